package golimiter_test

import (
	"fmt"
	"log"
	"net/http"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sethvargo/go-limiter/httplimit"

	swl "github.com/redis-swl/redis-swl/clients/go"
	"github.com/redis-swl/redis-swl/clients/go/golimiter"
)

// 30 requests a minute per address, for every process sharing the Redis,
// through go-limiter's own middleware.
func ExampleNew() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	store, err := golimiter.New(swl.GoRedis(rdb), &golimiter.Config{Tokens: 30, Interval: time.Minute})
	if err != nil {
		log.Fatal(err)
	}
	middleware, err := httplimit.NewMiddleware(store, httplimit.IPKeyFunc())
	if err != nil {
		log.Fatal(err)
	}
	hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "hello")
	})
	http.Handle("/", middleware.Handle(hello))
}
