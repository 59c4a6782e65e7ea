// Package golimiter is a [limiter.Store] for github.com/sethvargo/go-limiter
// over redis-swl: an exact sliding window of Interval with Tokens requests
// per key, shared by every process using the same Redis, through the
// module or, where the server has none, its function library.
//
// It stands in for memorystore with the same Config fields, so the switch
// is one line, and httplimit and anything else taking a limiter.Store work
// on it unchanged:
//
//	store, err := memorystore.New(&memorystore.Config{Tokens: 15, Interval: time.Minute})
//	store, err := golimiter.New(swl.GoRedis(rdb), &golimiter.Config{Tokens: 15, Interval: time.Minute})
//
// # Keys
//
// A key's log is Prefix+"log:"+key (Prefix is "golimiter:" by default), a
// sorted set or a compact log (redis-swl's encodings), which expires when
// its newest request leaves the window. A limit Set gives a key is the
// string Prefix+"limit:"+key, "tokens interval_ms", which expires
// OverrideTTL (a week by default) after the Set. Logs and limits have a
// namespace each, so that no key a client chooses names another key's
// limit.
//
// # Differences from memorystore
//
// A sliding log admits at most Tokens requests in any Interval, and a
// request's token comes back exactly one Interval after it was taken;
// memorystore's bucket refills at each tick of Interval since the key's
// first request, so up to twice Tokens may pass around a tick.
//
//	|                            | memorystore (token bucket)                                                | golimiter (sliding log)                                                                                 |
//	|----------------------------|---------------------------------------------------------------------------|---------------------------------------------------------------------------------------------------------|
//	| Requests                   | the bucket refills at each tick of Interval since the key's first request | at most Tokens in any Interval; each token comes back an Interval after it was taken                    |
//	| Take's reset               | the next tick                                                             | denied: when this request would be admitted; admitted: when the window empties; limit 0: an Interval on |
//	| Get, unseen key            | 0, 0                                                                      | the key's limit, all of it left (an empty window and no key are the same)                               |
//	| Set                        | a new full bucket, in this process; gone when swept                       | in Redis for every process, for OverrideTTL; empties the key's window                                   |
//	| Burst                      | adds tokens, even above the limit (an unseen key's limit grows)           | gives back up to n of the key's newest requests in the window (SWL.REFUND): never above the limit       |
//	| Interval                   | any duration                                                              | a whole number of milliseconds, at least 1ms (New and Set return an error)                              |
//	| Tokens                     | any (0 in Config: 1)                                                      | at most 2^53-1 (0 in Config: 1; Set with 0 denies every request)                                        |
//	| Close                      | Take and Get fail with ErrStopped                                         | every method fails with ErrStopped; the Redis client stays open                                         |
//	| Clock                      | this process's                                                            | the Redis server's (Config.Now to give one)                                                             |
//	| A Take                     | in memory                                                                 | two commands: GET of the key's limit, then SWL.CHECK (or FCALL swl_check)                               |
//	| SweepInterval, SweepMinTTL | sweep idle buckets                                                        | none: Redis expires a log when its window empties, a limit after OverrideTTL                            |
//
// A Take that was sent and got no reply fails with an error that
// errors.Is(err, swl.ErrUncertainOutcome): the request may or may not have
// been recorded (it is never sent twice). httplimit answers 500 to it, as
// to any error.
package golimiter
