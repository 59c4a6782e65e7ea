// Package redis_rate is github.com/go-redis/redis_rate/v10's API over
// redis-swl: an exact sliding log per key rather than GCRA, through the
// module or, where the server has none, its function library. Switching
// is an import change:
//
//	import "github.com/go-redis/redis_rate/v10"
//	import "github.com/redis-swl/redis-swl/clients/go/redis_rate"
//
//	limiter := redis_rate.NewLimiter(rdb)
//	res, err := limiter.Allow(ctx, "project:123", redis_rate.PerSecond(10))
//
// A Limit of Rate per Period with bursts of Burst is Burst events in any
// window of Burst/Rate periods, rounded up to a whole millisecond: the
// burst redis_rate allows at once, and over time its rate. For PerSecond,
// PerMinute and PerHour (Burst = Rate) that is Rate events in any Period,
// exactly, where GCRA lets nearly twice as many through in a Period that
// starts with a burst.
//
// # Differences from redis_rate v10
//
//	|                                     | go-redis/redis_rate v10                                                         | this package                                                                                               |
//	|-------------------------------------|---------------------------------------------------------------------------------|------------------------------------------------------------------------------------------------------------|
//	| Algorithm                           | GCRA: Burst events at once, then one every Period/Rate                          | sliding log: at most Burst events in any window of Burst/Rate periods                                      |
//	| Events in any Period, PerSecond(10) | up to 19 (a burst of 10, then one every 100ms)                                  | at most 10                                                                                                 |
//	| NewLimiter takes                    | an interface of Eval, EvalSha, EvalRO, EvalShaRO, ScriptExists, ScriptLoad, Del | redis.UniversalClient (*redis.Client, *redis.ClusterClient, *redis.Ring, ...)                              |
//	| Commands                            | EVALSHA (EVAL where the script is missing)                                      | SWL.CHECK, SWL.PEEK; FCALL swl_check, swl_peek where the module is missing (library loaded by the limiter) |
//	| Key rate:<key>                      | a string: the GCRA time                                                         | a sorted set or compact log; each fails on the other's keys (here WRONGTYPE) until they expire             |
//	| Memory per key                      | one number                                                                      | one entry per event in the window (compact: 0.7 to 2.1 bytes each; sorted set: 21 to 110)                  |
//	| Burst                               | bursts of up to Burst at once                                                   | the log's limit, in a window of Burst/Rate periods rounded up to a ms; Burst = Rate: Period                |
//	| Burst 0                             | denies, with a positive RetryAfter                                              | denies, RetryAfter -1, writes nothing                                                                      |
//	| Rate or Period <= 0                 | a division by zero in the script                                                | an error                                                                                                   |
//	| n < 0                               | gives back -n emission intervals                                                | an error                                                                                                   |
//	| n > 100000                          | allowed                                                                         | an error where n <= Burst (one entry per event); denied where n > Burst                                    |
//	| Remaining, denied                   | 0                                                                               | what is left now (AllowN of 5 with 3 left: 3)                                                              |
//	| RetryAfter, allowed                 | -1 (one nanosecond)                                                             | -1 (one nanosecond)                                                                                        |
//	| RetryAfter, n > Burst               | a positive wait, after which it is still denied                                 | -1: no wait admits it                                                                                      |
//	| ResetAfter, allowed                 | n emission intervals (PerSecond(10), one event: 100ms)                          | a window after the newest event (1s)                                                                       |
//	| Precision                           | microseconds (float seconds)                                                    | whole milliseconds                                                                                         |
//	| A check that timed out              | go-redis may send EVALSHA again: counted twice                                  | sent once; the error errors.Is swl.ErrUncertainOutcome                                                     |
//	| AllowAtMost                         | one script call                                                                 | a check of n; where fewer fit, a check of what the denial said is left, until one passes or one is denied  |
//
// Both use the key rate:<key> but store different things in it, so a
// fleet must not run the two on the same keys at once: this package
// refuses redis_rate's keys with WRONGTYPE, and redis_rate's script fails
// on ours (WRONGTYPE on a sorted set, a Lua error on a compact log), until
// they expire: redis_rate's within Burst/Rate periods of their last event
// (rounded up to a second), ours a window after their newest.
package redis_rate
