package swl_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	swl "github.com/redis-swl/redis-swl/clients/go"
)

func Example() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	limiter := swl.New(swl.GoRedis(rdb))

	// 100 a minute and 10 a second, for a request weighing 2.
	v, err := limiter.Check(ctx, "rl:alice", time.Minute, 100,
		swl.Cost(2), swl.Window(time.Second, 10))
	switch {
	case errors.Is(err, swl.ErrUncertainOutcome):
		// Sent, and no reply came: it may or may not have been recorded.
	case err != nil:
		// Not recorded (an error reply, no connection).
	case !v.Allowed:
		if seconds, ok := v.RetryAfterSeconds(); ok {
			fmt.Println("Retry-After:", seconds)
		}
	default:
		fmt.Println(v.Remaining, "left in the", v.Window, "window")
	}
}
