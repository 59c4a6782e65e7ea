package redis_rate_test

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/redis-swl/redis-swl/clients/go/redis_rate"
)

// redis_rate's own example, with only the import changed.
func ExampleNewLimiter() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})

	limiter := redis_rate.NewLimiter(rdb)
	res, err := limiter.Allow(ctx, "project:123", redis_rate.PerSecond(10))
	if err != nil {
		panic(err)
	}
	fmt.Println("allowed", res.Allowed, "remaining", res.Remaining)
}
