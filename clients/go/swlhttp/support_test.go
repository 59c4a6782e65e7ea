package swlhttp

// What the middleware tests share: real redis-server processes (with the
// module in either encoding, or with the function library alone) that a
// test can stop and replace, a clock the test moves, and real HTTP from
// clients at addresses of their own.

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	swl "github.com/redis-swl/redis-swl/clients/go"
	"github.com/redis-swl/redis-swl/clients/go/internal/redistest"
)

// TestMain keeps go-redis from logging each dial the tests make fail.
func TestMain(m *testing.M) {
	redis.SetLogger(quiet{})
	os.Exit(m.Run())
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// backend is a Redis deployment the middleware is checked against.
type backend struct {
	module   bool
	encoding swl.Encoding
}

func (b backend) String() string {
	if b.module {
		return "module/" + b.encoding.String()
	}
	return "library/" + b.encoding.String()
}

// backends: the module in each encoding, and the function library alone,
// loaded by the client, in each.
var backends = []backend{{true, swl.Zset}, {true, swl.Compact}, {false, swl.Zset}, {false, swl.Compact}}

// clock is a clock the test moves: the denial cache's waits, the backoff
// and the local limiter's time.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// fixture is one backend's server, a go-redis client of it whose
// connections go to the server of the moment (so that one can be stopped
// and another started in its place), and the redis-swl client over it.
type fixture struct {
	t       *testing.T
	backend backend
	server  *redistest.Server
	addr    atomic.Value // string
	// Connections the go-redis client opened, or tried to.
	dials  atomic.Int64
	redis  *redis.Client
	client *swl.Client
	clock  *clock
}

// each runs test once per backend, each on servers of its own.
func each(t *testing.T, test func(t *testing.T, f *fixture)) {
	eachWith(t, true, test)
}

// eachWith is each, with go-redis told to give up commands at their
// context's deadline or not (see newFixture).
func eachWith(t *testing.T, contextTimeouts bool, test func(t *testing.T, f *fixture)) {
	for _, b := range backends {
		t.Run(b.String(), func(t *testing.T) {
			t.Parallel()
			test(t, newFixture(t, b, contextTimeouts))
		})
	}
}

// newFixture starts a server of b. With contextTimeouts, go-redis gives
// up a command at its context's deadline; without, only at its own read
// timeout (3 s).
func newFixture(t *testing.T, b backend, contextTimeouts bool) *fixture {
	f := &fixture{t: t, backend: b, clock: &clock{now: at(0)}}
	f.start()
	f.redis = redis.NewClient(&redis.Options{
		Dialer: func(ctx context.Context, network, _ string) (net.Conn, error) {
			f.dials.Add(1)
			var dialer net.Dialer
			return dialer.DialContext(ctx, network, f.addr.Load().(string))
		},
		ContextTimeoutEnabled: contextTimeouts,
		// One dial per attempt: the limiter backs off itself. And a pool
		// of more connections than a test fails to dial before go-redis
		// stops dialing (after as many as its size, until a dial of its own
		// succeeds), whatever the machine's number of CPUs; but not many
		// more, as each takes a port redistest might pick for a server.
		DialerRetries: 1,
		PoolSize:      20,
	})
	t.Cleanup(func() { _ = f.redis.Close() })
	f.client = swl.New(swl.GoRedis(f.redis), swl.WithEncoding(b.encoding))
	return f
}

// start starts a server (another, after stop), where the client's next
// connections go.
func (f *fixture) start() {
	f.server = redistest.Start(f.t, f.backend.module, f.backend.encoding.String())
	f.addr.Store(f.server.Addr())
}

// stop stops the server for real (SHUTDOWN NOSAVE): connections to it are
// refused from then on.
func (f *fixture) stop() {
	f.t.Helper()
	_ = f.server.Raw.Do(context.Background(), "SHUTDOWN", "NOSAVE").Err()
	deadline := time.Now().Add(10 * time.Second)
	for {
		conn, err := net.Dial("tcp", f.server.Addr())
		if err != nil {
			return
		}
		_ = conn.Close()
		if time.Now().After(deadline) {
			f.t.Fatal("redis-server still listens after SHUTDOWN")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// checks is how many checks the server carried out: SWL.CHECK, or FCALL
// where the library answers.
func (f *fixture) checks() int {
	if f.backend.module {
		return f.server.Succeeded("swl.check")
	}
	return f.server.Succeeded("fcall")
}

// limiter is a limiter of the fixture's client on its clock, logging
// nowhere; a timeout of its own unless given one, so that a busy machine
// does not send a request Redis should decide to the policy.
func (f *fixture) limiter(options ...Option) *Limiter {
	f.t.Helper()
	defaults := []Option{withClock(f.clock.Now), Timeout(10 * time.Second), Logger(slog.New(slog.DiscardHandler))}
	l, err := New(f.client, append(defaults, options...)...)
	if err != nil {
		f.t.Fatal(err)
	}
	return l
}

// serve is the limiter in front of a handler saying hello, over real HTTP.
func serve(t *testing.T, l *Limiter) *httptest.Server {
	hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "hello\n")
	})
	server := httptest.NewServer(l.Middleware(hello))
	t.Cleanup(server.Close)
	return server
}

// A client of the tests connects from an address of its own in
// 127.0.0.0/8, all of which is loopback on Linux: the middleware keys by
// it.
type client string

const (
	alice   client = "127.0.1.1"
	bob     client = "127.0.1.2"
	carol   client = "127.0.1.3"
	dave    client = "127.0.1.4"
	mallory client = "127.0.1.5"
)

// key is the client's Redis key under the default prefix.
func (c client) key() string { return "rl:" + string(c) }

type reply struct {
	status int
	header http.Header
	body   string
}

func (r reply) String() string {
	return fmt.Sprintf("%d %q %v", r.status, r.body, r.header)
}

// get is GET / from c, with headers, on a connection of its own.
func (c client) get(t *testing.T, server *httptest.Server, headers ...string) reply {
	t.Helper()
	r, err := c.fetch(server, headers...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// fetch is get for any goroutine.
func (c client) fetch(server *httptest.Server, headers ...string) (reply, error) {
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(string(c))}}
	http := &http.Client{
		Transport: &http.Transport{DialContext: dialer.DialContext, DisableKeepAlives: true},
		Timeout:   30 * time.Second,
	}
	request, err := newRequest(server.URL+"/", headers)
	if err != nil {
		return reply{}, err
	}
	response, err := http.Do(request)
	if err != nil {
		return reply{}, err
	}
	defer response.Body.Close()
	body, err := io.ReadAll(response.Body)
	if err != nil {
		return reply{}, err
	}
	return reply{status: response.StatusCode, header: response.Header, body: string(body)}, nil
}

func newRequest(url string, headers []string) (*http.Request, error) {
	request, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	for i := 0; i+1 < len(headers); i += 2 {
		request.Header.Set(headers[i], headers[i+1])
	}
	return request, nil
}

// want is a response as the tests expect it: its status, its rate-limit
// headers ("" for none) and who decided.
type want struct {
	status     int
	policy     string
	limit      string
	retryAfter string
	source     string
}

// expect checks the status and every rate-limit header exactly, and the
// body of an answer the middleware gave itself.
func (r reply) expect(t *testing.T, w want) {
	t.Helper()
	got := want{
		status:     r.status,
		policy:     r.header.Get("RateLimit-Policy"),
		limit:      r.header.Get("RateLimit"),
		retryAfter: r.header.Get("Retry-After"),
		source:     r.header.Get("RateLimit-Source"),
	}
	if got != w {
		t.Fatalf("got %+v, not %+v: %v", got, w, r)
	}
	body := map[int]string{200: "hello\n", 429: "too many requests\n", 503: "rate limiter unavailable\n"}[r.status]
	if r.body != body {
		t.Fatalf("body %q, not %q", r.body, body)
	}
}

// admitted is a 200 of Redis's for one window, with remaining left.
func admitted(window, limit string, remaining int, t string) want {
	return want{status: 200, policy: window + ";q=" + limit + ";w=" + t, limit: window + ";r=" + strconv.Itoa(remaining) + ";t=" + t, source: "redis"}
}

// wait is the whole seconds of a wait Redis measured from an entry
// recorded after since, as a header gives it: exactly seconds while less
// than a second has passed since then (the tests' case), else got if it
// is within the time that passed (a very busy machine).
func wait(t *testing.T, got string, seconds int64, since time.Time) string {
	t.Helper()
	passed := time.Since(since)
	if passed < time.Second {
		return strconv.FormatInt(seconds, 10)
	}
	n, err := strconv.ParseInt(got, 10, 64)
	if err != nil || n > seconds || n < seconds-ceilMs(passed)/1000-1 {
		t.Fatalf("a wait of %q, %v after its entry, not about %d", got, passed, seconds)
	}
	return got
}

// field is one parameter of a structured header: "t" of `"60000ms";r=0;t=60`.
func field(header, name string) string {
	for _, part := range strings.Split(header, ";") {
		if value, found := strings.CutPrefix(part, name+"="); found {
			return value
		}
	}
	return ""
}

// base is the tests' time: 2023-11-14, Unix milliseconds.
const base int64 = 1_700_000_000_000

func at(ms int64) time.Time { return time.UnixMilli(base + ms) }

func verdictOf(allowed bool, limit, remaining, retryMs, resetMs, windowMs int64) swl.Verdict {
	return swl.Verdict{
		Allowed: allowed, Limit: limit, Remaining: remaining,
		RetryAfter: milliseconds(retryMs), ResetAfter: milliseconds(resetMs), Window: milliseconds(windowMs),
	}
}
