package swlhttp

// The middleware over real HTTP against real redis-server processes, with
// the module in each encoding and with the function library alone: the
// headers while admitting and denying, with one window and several and a
// cost; the denial cache; each failure policy with Redis stopped for real,
// the backoff and the return to Redis; a check that times out; keys;
// concurrent requests. (The metrics are in metrics_test.go.)
// The tests move the limiter's clock themselves, so no assertion depends
// on how fast the machine is.

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	swl "github.com/redis-swl/redis-swl/clients/go"
)

const (
	minute = `"60000ms"`
	five   = `"5000ms"`
)

func TestHeadersWhileAdmittingAndDenying(t *testing.T) {
	each(t, func(t *testing.T, f *fixture) {
		server := serve(t, f.limiter(Window(time.Minute, 3)))
		since := time.Now()
		for remaining := 2; remaining >= 0; remaining-- {
			alice.get(t, server).expect(t, admitted(minute, "3", remaining, "60"))
		}
		denied := alice.get(t, server)
		denied.expect(t, want{
			status:     429,
			policy:     minute + ";q=3;w=60",
			limit:      minute + ";r=0;t=" + wait(t, field(denied.header.Get("RateLimit"), "t"), 60, since),
			retryAfter: wait(t, denied.header.Get("Retry-After"), 60, since),
			source:     "redis",
		})
		// The client's address is the key, and the denial recorded nothing.
		if entries := f.server.Entries(alice.key()); len(entries) != 3 {
			t.Fatalf("entries %v", entries)
		}
		// Another client has a limit of its own.
		bob.get(t, server).expect(t, admitted(minute, "3", 2, "60"))
		// In the encoding the server creates logs in.
		kind := map[bool]string{true: "zset", false: "string"}[f.backend.encoding == swl.Zset]
		if got := f.server.Do("TYPE", alice.key()); got != kind {
			t.Fatalf("a log of type %v, not %s", got, kind)
		}
	})
}

func TestSeveralWindowsAreOneCheckAndTheHeadersDescribeTheBindingOne(t *testing.T) {
	each(t, func(t *testing.T, f *fixture) {
		// The narrow window binds.
		server := serve(t, f.limiter(Window(time.Minute, 10), Window(5*time.Second, 2)))
		since := time.Now()
		for remaining := 1; remaining >= 0; remaining-- {
			alice.get(t, server).expect(t, admitted(five, "2", remaining, "5"))
		}
		denied := alice.get(t, server)
		denied.expect(t, want{
			status: 429,
			policy: five + ";q=2;w=5",
			// The reset is the widest window's, capped at this one.
			limit:      five + ";r=0;t=5",
			retryAfter: wait(t, denied.header.Get("Retry-After"), 5, since),
			source:     "redis",
		})
		// All or nothing: the minute window recorded no more than the other.
		if entries := f.server.Entries(alice.key()); len(entries) != 2 {
			t.Fatalf("entries %v", entries)
		}

		// The wide window binds, though it is not the first.
		wide := serve(t, f.limiter(Window(5*time.Second, 10), Window(time.Minute, 2), KeyPrefix("wide:")))
		since = time.Now()
		for remaining := 1; remaining >= 0; remaining-- {
			alice.get(t, wide).expect(t, admitted(minute, "2", remaining, "60"))
		}
		denied = alice.get(t, wide)
		denied.expect(t, want{
			status:     429,
			policy:     minute + ";q=2;w=60",
			limit:      minute + ";r=0;t=" + wait(t, field(denied.header.Get("RateLimit"), "t"), 60, since),
			retryAfter: wait(t, denied.header.Get("Retry-After"), 60, since),
			source:     "redis",
		})
	})
}

func TestACostWeighsEachRequest(t *testing.T) {
	each(t, func(t *testing.T, f *fixture) {
		server := serve(t, f.limiter(Window(time.Minute, 5), Cost(2)))
		since := time.Now()
		alice.get(t, server).expect(t, admitted(minute, "5", 3, "60"))
		alice.get(t, server).expect(t, admitted(minute, "5", 1, "60"))
		denied := alice.get(t, server)
		denied.expect(t, want{
			status:     429,
			policy:     minute + ";q=5;w=60",
			limit:      minute + ";r=1;t=" + wait(t, field(denied.header.Get("RateLimit"), "t"), 60, since),
			retryAfter: wait(t, denied.header.Get("Retry-After"), 60, since),
			source:     "redis",
		})
		if entries := f.server.Entries(alice.key()); len(entries) != 4 {
			t.Fatalf("entries %v", entries)
		}
	})
}

func TestTheDenialCacheAnswersADeniedClientWithoutRedisUntilItsWaitHasPassed(t *testing.T) {
	each(t, func(t *testing.T, f *fixture) {
		l := f.limiter(Window(time.Minute, 2))
		server := serve(t, l)
		since := time.Now()
		alice.get(t, server).expect(t, admitted(minute, "2", 1, "60"))
		alice.get(t, server).expect(t, admitted(minute, "2", 0, "60"))
		checks := f.checks()
		first := alice.get(t, server)
		reset := wait(t, field(first.header.Get("RateLimit"), "t"), 60, since)
		retry := wait(t, first.header.Get("Retry-After"), 60, since)
		denial := want{status: 429, policy: minute + ";q=2;w=60", limit: minute + ";r=0;t=" + reset, retryAfter: retry, source: "redis"}
		first.expect(t, denial)
		if f.checks() != checks+1 {
			t.Fatalf("%d checks, not %d", f.checks(), checks+1)
		}

		// The same answer, from the cache, without a check.
		cached := denial
		cached.source = "cache"
		for range 3 {
			alice.get(t, server).expect(t, cached)
		}
		// Less the time since.
		f.clock.Advance(10 * time.Second)
		later := cached
		later.limit = minute + ";r=0;t=" + less(t, reset, 10)
		later.retryAfter = less(t, retry, 10)
		alice.get(t, server).expect(t, later)
		if f.checks() != checks+1 {
			t.Fatalf("the cache asked Redis: %d checks, not %d", f.checks(), checks+1)
		}
		// Another client is not in the cache.
		bob.get(t, server).expect(t, admitted(minute, "2", 1, "60"))

		// Once the wait has passed, Redis is asked again (its clock has not
		// moved: it still denies), and its denial is cached again.
		f.clock.Advance(time.Minute)
		checks = f.checks()
		if r := alice.get(t, server); r.status != 429 || r.header.Get("RateLimit-Source") != "redis" {
			t.Fatalf("after the wait: %v", r)
		}
		if r := alice.get(t, server); r.status != 429 || r.header.Get("RateLimit-Source") != "cache" {
			t.Fatalf("after the wait: %v", r)
		}
		if f.checks() != checks+1 {
			t.Fatalf("%d checks, not %d", f.checks(), checks+1)
		}

		// A refund through the limiter drops the cached denial.
		ctx := context.Background()
		if _, err := l.Refund(ctx, string(alice), 1); err != nil {
			t.Fatal(err)
		}
		alice.get(t, server).expect(t, admitted(minute, "2", 0, "60"))
		// So does a reset: the next request is a new client's.
		alice.get(t, server)
		if err := l.Reset(ctx, string(alice)); err != nil {
			t.Fatal(err)
		}
		alice.get(t, server).expect(t, admitted(minute, "2", 1, "60"))
		if l.Failures() != 0 {
			t.Fatalf("%d failures", l.Failures())
		}
	})
}

// less is a header's whole seconds less n.
func less(t *testing.T, seconds string, n int64) string {
	t.Helper()
	s, err := strconv.ParseInt(seconds, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return strconv.FormatInt(s-n, 10)
}

func TestWithoutTheDenialCacheEveryRequestGoesToRedis(t *testing.T) {
	each(t, func(t *testing.T, f *fixture) {
		server := serve(t, f.limiter(Window(time.Minute, 1), DenialCacheKeys(0)))
		checks := f.checks()
		alice.get(t, server).expect(t, admitted(minute, "1", 0, "60"))
		for range 5 {
			if r := alice.get(t, server); r.status != 429 || r.header.Get("RateLimit-Source") != "redis" {
				t.Fatalf("%v", r)
			}
		}
		if f.checks() != checks+6 {
			t.Fatalf("%d checks, not %d", f.checks(), checks+6)
		}
	})
}

func TestTheDenialCacheAnswersWhileRedisIsDownAndIsNoFailure(t *testing.T) {
	each(t, func(t *testing.T, f *fixture) {
		l := f.limiter(Window(time.Minute, 1), OnFailure(Closed))
		server := serve(t, l)
		alice.get(t, server).expect(t, admitted(minute, "1", 0, "60"))
		denied := alice.get(t, server)
		f.stop()
		cached := alice.get(t, server)
		if cached.status != 429 || cached.header.Get("RateLimit-Source") != "cache" ||
			cached.header.Get("Retry-After") != denied.header.Get("Retry-After") {
			t.Fatalf("%v after %v", cached, denied)
		}
		bob.get(t, server).expect(t, want{status: 503, retryAfter: "1", source: "closed"})
		if l.Failures() != 1 {
			t.Fatalf("%d failures", l.Failures())
		}
	})
}

func TestEachPolicyAnswersWhileRedisIsStoppedAndRedisIsBackByItself(t *testing.T) {
	each(t, func(t *testing.T, f *fixture) {
		limiters := map[Policy]*Limiter{}
		servers := map[Policy]*httptest.Server{}
		for _, policy := range policies {
			limiters[policy] = f.limiter(Window(time.Minute, 3), OnFailure(policy), LocalMaxClients(2),
				KeyPrefix(string(policy)+":"))
			servers[policy] = serve(t, limiters[policy])
			alice.get(t, servers[policy]).expect(t, admitted(minute, "3", 2, "60"))
		}
		f.stop()

		bob.get(t, servers[Open]).expect(t, want{status: 200, source: "open"})
		bob.get(t, servers[Closed]).expect(t, want{status: 503, retryAfter: "1", source: "closed"})
		// The local limiter counts on its own, on the limiter's clock...
		local := servers[Local]
		locally := func(remaining int) want {
			w := admitted(minute, "3", remaining, "60")
			w.source = "local"
			return w
		}
		for remaining := 2; remaining >= 0; remaining-- {
			bob.get(t, local).expect(t, locally(remaining))
		}
		bob.get(t, local).expect(t, want{status: 429, policy: minute + ";q=3;w=60", limit: minute + ";r=0;t=60", retryAfter: "60", source: "local"})
		// ...and forgets the least recently seen client beyond two.
		carol.get(t, local).expect(t, locally(2))
		dave.get(t, local).expect(t, locally(2))
		bob.get(t, local).expect(t, locally(2))
		for policy, failures := range map[Policy]uint64{Open: 1, Closed: 1, Local: 7} {
			if got := limiters[policy].Failures(); got != failures {
				t.Fatalf("%s: %d failures, not %d", policy, got, failures)
			}
		}

		// Redis again (another server, as after a failover; the library
		// loaded there anew where there is no module): past the backoff,
		// every limiter is back on it.
		f.start()
		f.clock.Advance(time.Second)
		for _, policy := range policies {
			alice.get(t, servers[policy]).expect(t, admitted(minute, "3", 2, "60"))
		}
	})
}

func TestRedisIsSkippedAfterAFailureFor50msDoublingToASecond(t *testing.T) {
	each(t, func(t *testing.T, f *fixture) {
		l := f.limiter(Window(time.Minute, 100), OnFailure(Closed))
		server := serve(t, l)
		alice.get(t, server).expect(t, admitted(minute, "100", 99, "60"))
		f.stop()
		closed := want{status: 503, retryAfter: "1", source: "closed"}
		alice.get(t, server).expect(t, closed)
		for _, delay := range []time.Duration{50, 100, 200, 400, 800, 1000, 1000} {
			delay *= time.Millisecond
			dials := f.dials.Load()
			f.clock.Advance(delay - time.Millisecond)
			alice.get(t, server).expect(t, closed)
			if got := f.dials.Load(); got != dials {
				t.Fatalf("Redis was tried within %v of a failure", delay)
			}
			f.clock.Advance(time.Millisecond)
			alice.get(t, server).expect(t, closed)
			if got := f.dials.Load(); got == dials {
				t.Fatalf("Redis was not tried %v after a failure", delay)
			}
		}
		if l.Failures() != 15 {
			t.Fatalf("%d failures", l.Failures())
		}
		f.start()
		f.clock.Advance(time.Second)
		alice.get(t, server).expect(t, admitted(minute, "100", 99, "60"))
		// A success ends the backoff: the next failure waits 50 ms.
		f.stop()
		alice.get(t, server).expect(t, closed)
		dials := f.dials.Load()
		f.clock.Advance(50 * time.Millisecond)
		alice.get(t, server).expect(t, closed)
		if f.dials.Load() == dials {
			t.Fatal("Redis was not tried 50ms after a failure")
		}
	})
}

func TestACheckThatTimesOutIsThePolicysAndCountsOnceInRedis(t *testing.T) {
	// go-redis left to its own read timeout (3 s): the timer answers.
	eachWith(t, false, func(t *testing.T, f *fixture) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		// The probe, and the library loaded where there is no module,
		// before the short timeout.
		if _, err := f.client.Peek(ctx, alice.key(), time.Minute, 10); err != nil {
			t.Fatal(err)
		}
		l := f.limiter(Window(time.Minute, 10), Timeout(200*time.Millisecond))
		server := serve(t, l)
		// Redis paused for writes, as during a failover: the check waits.
		f.server.Do("CLIENT", "PAUSE", "5000", "WRITE")
		started := time.Now()
		alice.get(t, server).expect(t, want{status: 200, source: "open"})
		if took := time.Since(started); took > 4*time.Second {
			t.Fatalf("answered in %v, when Redis went on", took)
		}
		f.server.Do("CLIENT", "UNPAUSE")
		if l.Failures() != 1 {
			t.Fatalf("%d failures", l.Failures())
		}
		// The check was sent, and carried out once Redis went on: it counts
		// there, once.
		deadline := time.Now().Add(5 * time.Second)
		for len(f.server.Entries(alice.key())) == 0 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if entries := f.server.Entries(alice.key()); len(entries) != 1 {
			t.Fatalf("entries %v", entries)
		}
		patient := serve(t, f.limiter(Window(time.Minute, 10)))
		alice.get(t, patient).expect(t, admitted(minute, "10", 8, "60"))
	})
}

func TestAKeyRedisRefusesIsThePolicysAndTheOthersStayOnRedis(t *testing.T) {
	each(t, func(t *testing.T, f *fixture) {
		f.server.Do("SET", mallory.key(), "not a log")
		l := f.limiter(Window(time.Minute, 5), OnFailure(Closed))
		server := serve(t, l)
		mallory.get(t, server).expect(t, want{status: 503, retryAfter: "1", source: "closed"})
		// No backoff: the clock has not moved, and Redis decides.
		for remaining := 4; remaining >= 3; remaining-- {
			alice.get(t, server).expect(t, admitted(minute, "5", remaining, "60"))
		}
		if l.Failures() != 1 {
			t.Fatalf("%d failures", l.Failures())
		}
	})
}

func TestClientsAreKeyedByTheirAddressNotByAHeaderTheyChoose(t *testing.T) {
	each(t, func(t *testing.T, f *fixture) {
		server := serve(t, f.limiter(Window(time.Minute, 3)))
		var statuses []int
		for i := range 5 {
			statuses = append(statuses, alice.get(t, server, "X-API-Key", "key-"+strconv.Itoa(i)).status)
		}
		if want := []int{200, 200, 200, 429, 429}; !slices.Equal(statuses, want) {
			t.Fatalf("%v", statuses)
		}
		if entries := f.server.Entries(alice.key()); len(entries) != 3 {
			t.Fatalf("entries %v", entries)
		}
		if n := f.server.Do("EXISTS", "rl:key-0"); n != int64(0) {
			t.Fatalf("a key by header: %v", n)
		}

		// A key function of the application's own, after a prefix of its own.
		byUser := serve(t, f.limiter(Window(time.Minute, 1), KeyPrefix("api:"),
			Key(func(r *http.Request) string { return "user:" + r.Header.Get("X-User") })))
		alice.get(t, byUser, "X-User", "erin").expect(t, admitted(minute, "1", 0, "60"))
		if r := bob.get(t, byUser, "X-User", "erin"); r.status != 429 {
			t.Fatalf("%v", r)
		}
		if entries := f.server.Entries("api:user:erin"); len(entries) != 1 {
			t.Fatalf("entries %v", entries)
		}
	})
}

func TestConcurrentRequestsAreEachCountedOnce(t *testing.T) {
	each(t, func(t *testing.T, f *fixture) {
		// Forty requests at once from each of four clients, at thirty a
		// minute: thirty admitted each, by Redis, then by the local policy.
		clients := []client{alice, bob, carol, dave}
		burst := func(server *httptest.Server) map[client][]int {
			var mu sync.Mutex
			statuses := map[client][]int{}
			var wg sync.WaitGroup
			for _, c := range clients {
				for range 40 {
					wg.Go(func() {
						r, err := c.fetch(server)
						if err != nil {
							t.Error(err)
						}
						mu.Lock()
						defer mu.Unlock()
						statuses[c] = append(statuses[c], r.status)
					})
				}
			}
			wg.Wait()
			return statuses
		}
		expect := func(statuses map[client][]int) {
			t.Helper()
			for _, c := range clients {
				counts := map[int]int{}
				for _, status := range statuses[c] {
					counts[status]++
				}
				if counts[200] != 30 || counts[429] != 10 {
					t.Fatalf("%s: %v", c, counts)
				}
			}
		}
		redis := f.limiter(Window(time.Minute, 30), OnFailure(Local))
		expect(burst(serve(t, redis)))
		for _, c := range clients {
			if entries := f.server.Entries(c.key()); len(entries) != 30 {
				t.Fatalf("%s: %d entries", c, len(entries))
			}
		}
		f.stop()
		local := f.limiter(Window(time.Minute, 30), OnFailure(Local))
		expect(burst(serve(t, local)))
		if local.Failures() != 160 {
			t.Fatalf("%d failures", local.Failures())
		}
	})
}

// routed is the limiter in front of a mux: "/search/" and "/health", a
// failing "/fail" and "/search/fail/", "/missing" (404), and "/" (hello).
func routed(t *testing.T, l *Limiter) *httptest.Server {
	mux := http.NewServeMux()
	ok := func(body string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(body)) }
	}
	failing := func(w http.ResponseWriter, r *http.Request) { http.Error(w, "failed", http.StatusInternalServerError) }
	mux.Handle("/search/", ok("found\n"))
	mux.HandleFunc("/search/fail/", failing)
	mux.Handle("/health", ok("ok\n"))
	mux.HandleFunc("/fail", failing)
	mux.HandleFunc("/missing", http.NotFound)
	// Server-sent events need a Flusher, through RefundFailed's wrapper too.
	mux.HandleFunc("/stream", func(w http.ResponseWriter, r *http.Request) {
		flusher, ok := w.(http.Flusher)
		if !ok {
			http.Error(w, "no flusher", http.StatusInternalServerError)
			return
		}
		_, _ = w.Write([]byte("event\n"))
		flusher.Flush()
	})
	mux.Handle("/", ok("hello\n"))
	server := httptest.NewServer(l.Middleware(mux))
	t.Cleanup(server.Close)
	return server
}

// at is GET path from c.
func (c client) at(t *testing.T, server *httptest.Server, path string) reply {
	t.Helper()
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(string(c))}}
	http := &http.Client{Transport: &http.Transport{DialContext: dialer.DialContext, DisableKeepAlives: true}}
	response, err := http.Get(server.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer response.Body.Close()
	body, _ := io.ReadAll(response.Body)
	return reply{status: response.StatusCode, header: response.Header, body: string(body)}
}

func TestRoutesHoldTheirRequestsToTheirOwnWindowsInLogsOfTheirOwn(t *testing.T) {
	each(t, func(t *testing.T, f *fixture) {
		l := f.limiter(Window(time.Minute, 3),
			Route("/search", RouteWindow{Window: time.Minute, Limit: 2}), Route("/health"))
		server := routed(t, l)
		statuses := func(path string, n int) []int {
			var seen []int
			for range n {
				seen = append(seen, alice.at(t, server, path).status)
			}
			return seen
		}
		if got := statuses("/search/a", 3); !slices.Equal(got, []int{200, 200, 429}) {
			t.Fatalf("/search: %v", got)
		}
		if got := bob.at(t, server, "/search/b").header.Get("RateLimit-Policy"); got != minute+";q=2;w=60" {
			t.Fatalf("/search policy %q", got)
		}
		for range 5 {
			if r := alice.at(t, server, "/health"); r.status != 200 || r.header.Get("RateLimit-Policy") != "" {
				t.Fatalf("/health: %v", r)
			}
		}
		if got := statuses("/", 2); !slices.Equal(got, []int{200, 200}) {
			t.Fatalf("/: %v", got)
		}
		// "/searchable" is not under "/search": the app's windows and log.
		if r := alice.at(t, server, "/searchable"); r.status != 200 || r.header.Get("RateLimit-Policy") != minute+";q=3;w=60" {
			t.Fatalf("/searchable: %v", r)
		}
		if r := alice.at(t, server, "/"); r.status != 429 {
			t.Fatalf("/: %v", r)
		}
		routeKey := "rl:/search:" + string(alice)
		if got := len(f.server.Entries(routeKey)); got != 2 {
			t.Fatalf("%s holds %d", routeKey, got)
		}
		if got := len(f.server.Entries(alice.key())); got != 3 {
			t.Fatalf("%s holds %d", alice.key(), got)
		}
		if err := l.Reset(context.Background(), string(alice)); err != nil {
			t.Fatal(err)
		}
		if len(f.server.Entries(routeKey)) != 0 || len(f.server.Entries(alice.key())) != 0 {
			t.Fatal("reset left a log")
		}
	})
}

func TestFailedResponsesAreRefundedWithRefundFailed(t *testing.T) {
	each(t, func(t *testing.T, f *fixture) {
		l := f.limiter(Window(time.Minute, 2), Route("/search", RouteWindow{Window: time.Minute, Limit: 1}),
			RefundFailed(true), Failed(func(status int) bool { return status >= 500 }))
		server := routed(t, l)
		// The refund is sent once the response is written: wait for it.
		empty := func(key string) {
			deadline := time.Now().Add(5 * time.Second)
			for len(f.server.Entries(key)) != 0 {
				if time.Now().After(deadline) {
					t.Fatalf("%s was not refunded", key)
				}
				time.Sleep(time.Millisecond)
			}
		}
		for range 4 {
			if r := carol.at(t, server, "/fail"); r.status != 500 {
				t.Fatalf("/fail: %v", r)
			}
			empty(carol.key())
			if r := carol.at(t, server, "/search/fail/x"); r.status != 500 {
				t.Fatalf("/search/fail: %v", r)
			}
			empty("rl:/search:" + string(carol))
		}
		if r := dave.at(t, server, "/stream"); r.status != 200 || r.body != "event\n" {
			t.Fatalf("/stream: %v", r)
		}
		// A 404 is no failure to this Failed: it counts.
		if r := carol.at(t, server, "/missing"); r.status != 404 {
			t.Fatalf("%v", r)
		}
		if r := carol.at(t, server, "/"); r.status != 200 {
			t.Fatalf("%v", r)
		}
		if r := carol.at(t, server, "/"); r.status != 429 {
			t.Fatalf("%v", r)
		}
	})
}
