package swlhttp_test

import (
	"io"
	"log"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"

	swl "github.com/redis-swl/redis-swl/clients/go"
	"github.com/redis-swl/redis-swl/clients/go/swlhttp"
)

// 100 requests a minute and 10 a second per client address, decided in
// the process while Redis cannot answer; /metrics outside the limit.
func Example() {
	timeout := 50 * time.Millisecond
	rdb := redis.NewClient(&redis.Options{
		Addr: "127.0.0.1:6379",
		// go-redis gives up a command at the limiter's deadline, and dials
		// once: the limiter backs off itself.
		ContextTimeoutEnabled: true,
		DialTimeout:           timeout,
		ReadTimeout:           timeout,
		WriteTimeout:          timeout,
		DialerRetries:         1,
	})
	limiter, err := swlhttp.New(swl.New(swl.GoRedis(rdb)),
		swlhttp.Window(time.Minute, 100),
		swlhttp.Window(time.Second, 10),
		swlhttp.OnFailure(swlhttp.Local),
		swlhttp.Timeout(timeout),
		swlhttp.Metrics(prometheus.DefaultRegisterer))
	if err != nil {
		log.Fatal(err) // an unknown policy, a window the module would refuse, ...
	}
	api := http.NewServeMux()
	api.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "hello\n")
	})
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.Handler())
	mux.Handle("/", limiter.Middleware(api))
	_ = http.ListenAndServe("127.0.0.1:3002", mux)
}
