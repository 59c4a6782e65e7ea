// Package ulule is a [limiter.Store] for github.com/ulule/limiter/v3 on
// redis-swl: an exact sliding window where ulule's redis store has a fixed
// one, through the module or, where the server has none, the function
// library. Switching is one line:
//
//	store, err := ulule.NewStoreWithOptions(rdb, limiter.StoreOptions{Prefix: "limiter"})
//	// was sredis.NewStoreWithOptions(rdb, limiter.StoreOptions{Prefix: "limiter"})
//
// ulule's middlewares (stdlib, gin, fasthttp) work on it unchanged. A
// [limiter.Rate] is one window: at most Limit units in any Period.
//
// # Differences from ulule's redis store
//
//   - The window slides: no twice the limit across a window's edge, and
//     the quota comes back unit by unit as each leaves the window rather
//     than all at once at a window's end.
//   - A refused Get or Increment records nothing (ulule counts it). A
//     refused Increment's Remaining is what is still left, not 0.
//   - Reached, of Get and Increment: the request was refused, as in
//     ulule. Of Peek (and Increment(0), a negative Increment and Reset): a
//     Get now would be refused, that is, Remaining is 0. ulule's Peek says
//     Reached only once a request beyond the limit has been counted, so
//     false at exactly the limit, though the next Get is refused; a log
//     that records no refused request cannot tell the two apart. ulule's
//     tests.TestStoreSequentialAccess asserts that false (tests.go:52).
//   - Reset is when every unit has left the window, the whole quota back,
//     in Unix seconds rounded down as ulule's (its window's end). After
//     an admitted request that is now plus Period. After a refused one, a
//     single request may fit before Reset, when the oldest leaves. Of
//     Reset, and of Peek on an empty window: now (ulule's: now plus
//     Period).
//   - Keys: ulule's name (Prefix, ":", key) followed by ":swl:" and the
//     rate's period in milliseconds, so that two rates on one key each
//     keep their own log (in ulule they share one counter). At ulule's
//     own name its counter, a string, would fail every call with WRONGTYPE
//     until it expired; side by side, both stores work. While both run (a
//     rolling switch), each counts on its own key: up to both limits.
//   - Increment: a count above 100,000 fails (the module's cap on a
//     request); 0 records nothing (a Peek); a negative count gives back
//     that many of the newest units (SWL.REFUND), as ulule's INCRBY
//     subtracts them.
//   - Period must be a whole number of milliseconds, at least 1ms, and
//     Limit 0 to 2^53-1: other rates fail, recording nothing.
//   - A Get or Increment that got no reply fails with
//     swl.ErrUncertainOutcome, and is never sent again; go-redis resends
//     ulule's EVALSHA after a timeout, which may count it twice.
//   - Peek is one SWL.PEEK, and a second one when the window holds entries
//     and has room (SWL.PEEK reports the reset as if a request were
//     recorded): both read-only.
//   - The constructors send nothing: the first call asks the server
//     whether it has the module. NewStoreWithOptions fails only for a nil
//     client (ulule's loads its scripts, and fails while Redis is down).
//     It takes any go-redis client ([redis.UniversalClient]) rather than
//     ulule's narrower interface of go-redis methods.
//   - StoreOptions.MaxRetry and CleanUpInterval are ignored (ulule's redis
//     store has no use for them either).
package ulule
