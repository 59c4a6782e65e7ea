package ulule_test

import (
	"log"
	"net/http"

	"github.com/redis/go-redis/v9"
	"github.com/ulule/limiter/v3"
	"github.com/ulule/limiter/v3/drivers/middleware/stdlib"

	"github.com/redis-swl/redis-swl/clients/go/ulule"
)

// ulule's net/http middleware on this store: 100 requests in any minute
// per client address.
func Example() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	store, err := ulule.NewStoreWithOptions(rdb, limiter.StoreOptions{Prefix: "limiter"})
	if err != nil {
		log.Fatal(err)
	}
	rate, err := limiter.NewRateFromFormatted("100-M")
	if err != nil {
		log.Fatal(err)
	}
	hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("hello"))
	})
	http.Handle("/", stdlib.NewMiddleware(limiter.New(store, rate)).Handler(hello))
}
