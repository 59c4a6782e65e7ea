// A tiny net/http service behind redis-swl's middleware (the swlhttp
// package of the Go module, clients/go). Settings from the environment
// (docs/middleware.md): REDIS_URL (redis://127.0.0.1:6379/), PORT (3002),
// WINDOWS ("60000:100"; several as "60000:100,1000:10"), COST (1), POLICY
// (open, closed or local), TIMEOUT_MS (50), LOCAL_MAX_CLIENTS (10000),
// DENIAL_CACHE (on or off). GET /failures and GET /metrics (Prometheus)
// are outside the limit.
package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"

	swl "github.com/redis-swl/redis-swl/clients/go"
	"github.com/redis-swl/redis-swl/clients/go/swlhttp"
)

func setting(name, fallback string) string {
	if value, ok := os.LookupEnv(name); ok {
		return value
	}
	return fallback
}

func number(name string, fallback int64) int64 {
	value := setting(name, strconv.FormatInt(fallback, 10))
	n, err := strconv.ParseInt(value, 10, 64)
	if err != nil {
		fail("%s: a whole number, not %q", name, value)
	}
	return n
}

// fail says what is wrong on stderr and exits with status 1, as the other
// tiny apps do.
func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(1)
}

// windows are WINDOWS' window_ms:limit pairs.
func windows() []swlhttp.Option {
	var options []swlhttp.Option
	value := setting("WINDOWS", "60000:100")
	for _, pair := range strings.Split(value, ",") {
		window, limit, found := strings.Cut(pair, ":")
		ms, err1 := strconv.ParseInt(window, 10, 64)
		n, err2 := strconv.ParseInt(limit, 10, 64)
		if !found || err1 != nil || err2 != nil {
			fail("WINDOWS: window_ms:limit, several separated by commas, not %q", value)
		}
		options = append(options, swlhttp.Window(time.Duration(ms)*time.Millisecond, n))
	}
	return options
}

func main() {
	denialCacheKeys := map[string]int{"on": 10_000, "off": 0}
	denialCache := setting("DENIAL_CACHE", "on")
	keys, ok := denialCacheKeys[denialCache]
	if !ok {
		fail(`DENIAL_CACHE: unknown setting "%s" (accepted: on, off)`, denialCache)
	}
	timeout := time.Duration(number("TIMEOUT_MS", 50)) * time.Millisecond
	redisOptions, err := redis.ParseURL(setting("REDIS_URL", "redis://127.0.0.1:6379/"))
	if err != nil {
		fail("REDIS_URL: %v", err)
	}
	// Each command gives up at the limiter's deadline, connecting included,
	// and dials once: the limiter backs off itself after a failure, and
	// go-redis drops a connection a command failed on, so the next try
	// connects afresh.
	redisOptions.ContextTimeoutEnabled = true
	redisOptions.DialTimeout = timeout
	redisOptions.ReadTimeout = timeout
	redisOptions.WriteTimeout = timeout
	redisOptions.DialerRetries = 1
	rdb := redis.NewClient(redisOptions)

	options := append(windows(),
		swlhttp.Cost(number("COST", 1)),
		swlhttp.OnFailure(swlhttp.Policy(setting("POLICY", "open"))),
		swlhttp.Timeout(timeout),
		swlhttp.LocalMaxClients(int(number("LOCAL_MAX_CLIENTS", 10_000))),
		// Who a request counts against: here the default, the client's
		// address. docs/middleware.md keys by an authenticated identity.
		swlhttp.Key(swlhttp.ClientAddress),
		swlhttp.DenialCacheKeys(keys),
		// Counted as limiter="default" in the default registry.
		swlhttp.Metrics(prometheus.DefaultRegisterer),
	)
	limiter, err := swlhttp.New(swl.New(swl.GoRedis(rdb)), options...)
	var unknown *swlhttp.UnknownPolicyError
	switch {
	case errors.As(err, &unknown):
		fail("POLICY: %v", unknown)
	case err != nil:
		fail("rate limiter: %v", err)
	}

	hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "hello\n")
	})
	mux := http.NewServeMux()
	// Not behind the limiter: they answer even while the policy refuses
	// everything else.
	mux.HandleFunc("GET /failures", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = fmt.Fprintf(w, "%d\n", limiter.Failures())
	})
	mux.Handle("GET /metrics", promhttp.Handler())
	mux.Handle("/", limiter.Middleware(hello))

	listener, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.FormatInt(number("PORT", 3002), 10)))
	if err != nil {
		fail("listen: %v", err)
	}
	fmt.Println("listening on", listener.Addr())
	server := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	fail("serve: %v", server.Serve(listener))
}
