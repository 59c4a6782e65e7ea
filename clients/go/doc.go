// Package swl is exact sliding-window-log rate limiting on Redis: a client
// for the redis-swl module's SWL.CHECK, SWL.PEEK, SWL.REFUND and
// SWL.ENTRIES, and for its function library (FCALL swl_check ...) where the
// server has no module, which the package carries and loads itself.
//
// A [Client] sends its commands through a [Doer]; [GoRedis] adapts a
// go-redis v9 client, single, cluster or failover, so that checks and
// refunds are never sent twice:
//
//	limiter := swl.New(swl.GoRedis(rdb))
//	v, err := limiter.Check(ctx, "rl:alice", time.Minute, 100)
//
// A check or refund that was sent and got no reply fails with an
// [*UncertainOutcomeError]: it may or may not have been recorded.
package swl
