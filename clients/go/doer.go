package swl

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// Doer sends one command to Redis and returns its reply, in the manner of
// go-redis's Do: integers as int64, arrays as []any, strings as string, and
// an error reply from the server as an error with a RedisError method
// (go-redis's redis.Error), which the client reads as "the server answered
// and changed nothing". Any other error is taken to mean that no reply came.
//
// A Doer that is not a [OnceDoer] must never send a command again on its
// own: the client sends checks and refunds through Do then, and a second
// SWL.CHECK records a second request. [GoRedis] adapts a go-redis client.
type Doer interface {
	Do(ctx context.Context, args ...any) (any, error)
}

// OnceDoer is a Doer that can send a command exactly once: DoOnce never
// sends it again after a timeout or a lost connection, whatever retries Do
// makes. The client sends through DoOnce what changes a log or must not
// cost more than one timeout (SWL.CHECK, SWL.REFUND, their FCALLs, DEL
// and the probe), and through Do the rest.
type OnceDoer interface {
	Doer
	DoOnce(ctx context.Context, args ...any) (any, error)
}

// Primaries is a Doer of several servers, such as a cluster, where the
// function library is loaded server by server: ForEachPrimary calls fn
// with each primary (each shard) as a Doer of its own, so that each keeps
// a newer library it may have.
type Primaries interface {
	ForEachPrimary(ctx context.Context, fn func(ctx context.Context, node Doer) error) error
}

// GoRedis adapts a go-redis client (a *redis.Client, *redis.ClusterClient,
// *redis.Ring, or a failover client from redis.NewFailoverClient or
// redis.NewUniversalClient) as the client's Doer. The client's own
// settings are left as they are: a peek, FCALL_RO and FUNCTION LOAD are
// retried as it is set to (go-redis retries network errors three times by
// default), but checks, refunds and resets are sent through DoOnce, which
// marks the command as one go-redis must not send again, so that a check
// that timed out is recorded at most once.
//
// On a cluster or a ring it is also [Primaries]: the library is loaded on
// each primary, or each shard.
func GoRedis(client redis.UniversalClient) OnceDoer {
	return goRedis{client: client}
}

type goRedis struct {
	client redis.UniversalClient
}

func (g goRedis) Do(ctx context.Context, args ...any) (any, error) {
	return g.client.Do(ctx, args...).Result()
}

// sendOnce is a command go-redis sends once: go-redis sends a command again
// after a network error or a timeout (up to MaxRetries, on a cluster also
// to another node), unless the command's NoRetry says not to; it then
// replays it only where it failed before it was written.
type sendOnce struct {
	*redis.Cmd
}

func (sendOnce) NoRetry() bool { return true }

func (g goRedis) DoOnce(ctx context.Context, args ...any) (any, error) {
	cmd := redis.NewCmd(ctx, args...)
	_ = g.client.Process(ctx, &sendOnce{cmd})
	return cmd.Result()
}

func (g goRedis) ForEachPrimary(ctx context.Context, fn func(ctx context.Context, node Doer) error) error {
	each := func(ctx context.Context, node *redis.Client) error {
		return fn(ctx, goRedis{client: node})
	}
	switch client := g.client.(type) {
	case *redis.ClusterClient:
		return client.ForEachMaster(ctx, each)
	case *redis.Ring:
		return client.ForEachShard(ctx, each)
	}
	return fn(ctx, g)
}
