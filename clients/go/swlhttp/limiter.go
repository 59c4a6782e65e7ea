// Package swlhttp is net/http middleware on redis-swl: one SWL.CHECK per
// request (or its FCALL where the server has no module), keyed by what the
// application's key function returns for it (by default the client's
// address, the TCP peer), with the RateLimit-Policy, RateLimit and
// Retry-After headers of docs/middleware.md. It is the Go twin of the
// Python (redis_swl.asgi), Node (rateLimit) and Rust (RateLimiter)
// middleware: the same options, headers, failure policies, denial cache
// and metrics.
//
//	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", ContextTimeoutEnabled: true})
//	limiter, err := swlhttp.New(swl.New(swl.GoRedis(rdb)),
//		swlhttp.Window(time.Minute, 100), swlhttp.Window(time.Second, 10),
//		swlhttp.OnFailure(swlhttp.Local))
//	if err != nil { ... }
//	http.ListenAndServe(addr, limiter.Middleware(mux))
//
// When Redis cannot answer within the timeout (50 ms by default), for
// whatever reason (refused, reset, timed out, an error reply), the policy
// answers instead: [Open] admits (and logs and counts it), [Closed]
// refuses with 503, [Local] decides in this process for at most
// [LocalMaxClients] clients. After a failure Redis is skipped for 50 ms,
// doubling to at most a second, so the service returns to it by itself;
// an error reply about one call (a key of another type, WRONGTYPE) sends
// that request alone to the policy. A check that timed out may still be
// carried out by Redis, and count there too; it is never sent twice.
//
// A denied client's next requests are answered from a denial cache until
// the wait Redis gave has passed, without a call to Redis. Each response
// carries RateLimit-Source: redis, cache, local, open or closed.
package swlhttp

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	swl "github.com/redis-swl/redis-swl/clients/go"
)

// Policy is what answers when Redis cannot.
type Policy string

const (
	// Open admits the request, and logs and counts it.
	Open Policy = "open"
	// Closed refuses it with 503 Service Unavailable and Retry-After: 1.
	Closed Policy = "closed"
	// Local decides it in this process, with a sliding-window log of its
	// own for at most LocalMaxClients clients.
	Local Policy = "local"
)

// policies are the accepted policies, in the order errors name them.
var policies = []Policy{Open, Closed, Local}

// UnknownPolicyError is the error of a policy other than open, closed and
// local; New wraps it. Its text is the other languages':
// unknown policy "fail-open" (accepted: open, closed, local).
type UnknownPolicyError struct {
	Policy Policy
}

func (e *UnknownPolicyError) Error() string {
	names := make([]string, len(policies))
	for i, p := range policies {
		names[i] = string(p)
	}
	return fmt.Sprintf("unknown policy %q (accepted: %s)", string(e.Policy), strings.Join(names, ", "))
}

const (
	// maxLimit is the largest limit the module takes (2^53 - 1).
	maxLimit = 1<<53 - 1
	// maxCost is the largest cost the module takes.
	maxCost = 100_000
	// firstDelay and lastDelay bound the backoff after a failure.
	firstDelay = 50 * time.Millisecond
	lastDelay  = time.Second
)

// config is what the options set, checked by New.
type config struct {
	windows         []window
	windowErr       error
	routes          []route
	refundFailed    bool
	failed          func(status int) bool
	cost            int64
	policy          Policy
	timeout         time.Duration
	localMaxClients int
	keyPrefix       string
	key             KeyFunc
	denialCacheKeys int
	name            string
	registerer      prometheus.Registerer
	logger          *slog.Logger
	// now is the clock (time.Now), for tests: the denial cache's waits,
	// the backoff, and the local limiter's Unix milliseconds.
	now func() time.Time
}

// Option configures a [Limiter].
type Option func(*config)

// route is a path prefix and the windows of the requests under it.
type route struct {
	prefix  string
	windows []window
}

// RouteWindow is one window of a [Route]: at most Limit units in any
// window of length Window.
type RouteWindow = swl.WindowLimit

// Route holds the requests under prefix (a path: "/search" covers
// "/search" and "/search/x", not "/searchable") to windows of their own,
// as the Python, Node and Rust middlewares take routes: the longest
// prefix wins, no windows exempt the route (no check, no headers), and
// each route keeps logs of its own (the key prefix, the route, a colon,
// the client).
func Route(prefix string, windows ...RouteWindow) Option {
	return func(c *config) {
		r := route{prefix: prefix}
		for _, w := range windows {
			if c.windowErr == nil && (w.Window < time.Millisecond || w.Window%time.Millisecond != 0 || w.Limit < 0 || w.Limit > maxLimit) {
				c.windowErr = fmt.Errorf("swlhttp: route %q: window %v, limit %d: a whole number of milliseconds, and from 0 to %d", prefix, w.Window, w.Limit, int64(maxLimit))
			}
			r.windows = append(r.windows, window{ms: w.Window.Milliseconds(), limit: w.Limit})
		}
		c.routes = append(c.routes, r)
	}
}

// RefundFailed gives back the units of a request whose response [Failed]
// says failed (4xx and 5xx by default), through SWL.REFUND (or the local
// limiter that decided it), if it ended within the narrowest window: a
// refund removes the newest entries, which after that may be another
// request's.
func RefundFailed(refund bool) Option {
	return func(c *config) { c.refundFailed = refund }
}

// Failed says which responses count as failed for [RefundFailed].
func Failed(failed func(status int) bool) Option {
	return func(c *config) { c.failed = failed }
}

// FailedResponse is the default [Failed]: 4xx and 5xx.
func FailedResponse(status int) bool {
	return status >= 400
}

// Window adds a limit: at most limit units in any window of length (a
// whole number of milliseconds). At least one is needed and at most 100,
// as one call takes; every one must admit a request (all or nothing: one
// SWL.CHECK, the others its WINDOW clauses). The first is the command's
// own window.
func Window(length time.Duration, limit int64) Option {
	return func(c *config) {
		if c.windowErr == nil && (length < time.Millisecond || length%time.Millisecond != 0) {
			c.windowErr = fmt.Errorf("swlhttp: window %v: a whole number of milliseconds, at least 1ms", length)
		}
		if c.windowErr == nil && (limit < 0 || limit > maxLimit) {
			c.windowErr = fmt.Errorf("swlhttp: limit %d: from 0 to %d", limit, int64(maxLimit))
		}
		c.windows = append(c.windows, window{ms: length.Milliseconds(), limit: limit})
	}
}

// Cost makes each request weigh units (1 to 100000; 1 by default).
func Cost(units int64) Option {
	return func(c *config) { c.cost = units }
}

// OnFailure sets what answers when Redis cannot: [Open] (the default),
// [Closed] or [Local]. New refuses any other with an
// [*UnknownPolicyError].
func OnFailure(policy Policy) Option {
	return func(c *config) { c.policy = policy }
}

// Timeout bounds each check, connecting included (50 ms by default): a
// check that has not answered by then is the policy's to decide. It is a
// race against a timer, so the request is answered in time whatever the
// Redis client does; give the go-redis client ContextTimeoutEnabled (and
// timeouts of its own of the same) so that the abandoned command ends
// then too, rather than at its own ReadTimeout.
func Timeout(timeout time.Duration) Option {
	return func(c *config) { c.timeout = timeout }
}

// LocalMaxClients is how many clients the local policy remembers (10000 by
// default), the least recently seen forgotten first, so that memory stays
// bounded through an outage: a client's log holds a time (8 bytes) per
// unit in its window, so the bound is LocalMaxClients times the largest
// limit times 8 bytes (80 MB for 10,000 clients at 1,000 an hour).
func LocalMaxClients(n int) Option {
	return func(c *config) { c.localMaxClients = n }
}

// KeyPrefix is put before what the key function returns ("rl:" by
// default).
func KeyPrefix(prefix string) Option {
	return func(c *config) { c.keyPrefix = prefix }
}

// Key sets who a request counts against ([ClientAddress] by default).
func Key(key KeyFunc) Option {
	return func(c *config) { c.key = key }
}

// DenialCacheKeys is how many keys the denial cache remembers (10000 by
// default, the least recently used forgotten first); 0 turns it off.
func DenialCacheKeys(n int) Option {
	return func(c *config) { c.denialCacheKeys = n }
}

// Name is the limiter's label in its metrics ("default" by default): a
// fixed name such as "api" or "login", never a path or a key.
func Name(name string) Option {
	return func(c *config) { c.name = name }
}

// Metrics counts every decision in registerer (none by default):
// redis_swl_decisions_total by limiter, decision (admitted, denied) and
// source (redis, cache, local, open, closed; closed's 503s are denied),
// and redis_swl_decision_seconds by limiter and source, the names and
// labels the Python, Node and Rust middleware count under. Limiters on one
// registerer share the two metrics.
func Metrics(registerer prometheus.Registerer) Option {
	return func(c *config) { c.registerer = registerer }
}

// Logger is where failures are logged (slog.Default() by default): each
// check Redis did not answer, and each request admitted under Open.
func Logger(logger *slog.Logger) Option {
	return func(c *config) { c.logger = logger }
}

// withClock sets the clock, for tests.
func withClock(now func() time.Time) Option {
	return func(c *config) { c.now = now }
}

// Limiter is the limits, the failure policy and its count, the denial
// cache and the local limiter, shared by every handler it wraps. It is
// safe for concurrent use.
type Limiter struct {
	client *swl.Client
	config config
	// The windows of requests outside the routes, and each route's,
	// longest prefix first.
	limits  limits
	routes  []routeLimits
	local   *localLimiter
	denials *swl.DenialCache
	metrics *decisionMetrics
	backoff backoff
	// Requests the policy decided.
	failures atomic.Uint64
}

// limits are a request's windows, with the first and the options each
// check sends (the cost and the other windows): made once, not per
// request.
type limits struct {
	windows []window
	first   window
	options []swl.RequestOption
	// The windows as the denial cache tells checks apart.
	cached []swl.WindowLimit
}

type routeLimits struct {
	prefix string
	// The prefix without trailing slashes, for the paths below it.
	base   string
	limits limits
}

func newLimits(windows []window, cost int64) limits {
	l := limits{windows: windows}
	if len(windows) == 0 {
		return l
	}
	for _, w := range windows {
		l.cached = append(l.cached, swl.WindowLimit{Window: milliseconds(w.ms), Limit: w.limit})
	}
	l.first = windows[0]
	l.options = []swl.RequestOption{swl.Cost(cost)}
	for _, w := range windows[1:] {
		l.options = append(l.options, swl.Window(milliseconds(w.ms), w.limit))
	}
	return l
}

// New is a limiter checking requests through client. It refuses, before
// any request, what the module would refuse (so that every request would
// go to the policy): no window or more than 100, a window not a whole
// number of milliseconds, a limit or cost out of range, a timeout of zero,
// a local policy remembering no client; and an unknown policy, with an
// [*UnknownPolicyError].
func New(client *swl.Client, options ...Option) (*Limiter, error) {
	c := config{
		cost:            1,
		policy:          Open,
		timeout:         50 * time.Millisecond,
		localMaxClients: 10_000,
		keyPrefix:       "rl:",
		key:             ClientAddress,
		failed:          FailedResponse,
		denialCacheKeys: swl.DefaultDenialCacheKeys,
		name:            "default",
		logger:          slog.Default(),
		now:             time.Now,
	}
	for _, option := range options {
		option(&c)
	}
	switch {
	case client == nil:
		return nil, errors.New("swlhttp: no client")
	case c.policy != Open && c.policy != Closed && c.policy != Local:
		return nil, fmt.Errorf("swlhttp: %w", &UnknownPolicyError{Policy: c.policy})
	case c.windowErr != nil:
		return nil, c.windowErr
	case len(c.windows) == 0:
		return nil, errors.New("swlhttp: windows: at least one (swlhttp.Window)")
	case len(c.windows) > maxWindows:
		return nil, fmt.Errorf("swlhttp: windows: at most %d (window, limit) pairs, not %d", maxWindows, len(c.windows))
	case c.cost < 1 || c.cost > maxCost:
		return nil, fmt.Errorf("swlhttp: cost: from 1 to %d, not %d", maxCost, c.cost)
	case c.timeout <= 0:
		return nil, fmt.Errorf("swlhttp: timeout: above zero, not %v", c.timeout)
	case c.policy == Local && c.localMaxClients < 1:
		return nil, fmt.Errorf("swlhttp: a local policy must remember at least one client, not %d", c.localMaxClients)
	case c.denialCacheKeys < 0:
		return nil, fmt.Errorf("swlhttp: denial cache keys: 0 (off) or more, not %d", c.denialCacheKeys)
	case c.key == nil:
		return nil, errors.New("swlhttp: no key function")
	case c.name == "":
		return nil, errors.New("swlhttp: name: a limiter's name for its metrics, not empty")
	case c.logger == nil || c.now == nil:
		return nil, errors.New("swlhttp: no logger or clock")
	case c.failed == nil:
		return nil, errors.New("swlhttp: no failed function")
	}
	for _, r := range c.routes {
		if !strings.HasPrefix(r.prefix, "/") || len(r.windows) > maxWindows {
			return nil, fmt.Errorf("swlhttp: route %q: a path starting with /, with at most %d windows", r.prefix, maxWindows)
		}
	}
	l := &Limiter{client: client, config: c, limits: newLimits(c.windows, c.cost), denials: swl.NewDenialCache(c.denialCacheKeys)}
	for _, r := range c.routes {
		l.routes = append(l.routes, routeLimits{prefix: r.prefix, base: strings.TrimRight(r.prefix, "/"), limits: newLimits(r.windows, c.cost)})
	}
	slices.SortStableFunc(l.routes, func(a, b routeLimits) int { return len(b.prefix) - len(a.prefix) })
	if c.policy == Local {
		l.local = newLocalLimiter(c.localMaxClients)
	}
	if c.registerer != nil {
		metrics, err := newDecisionMetrics(c.registerer, c.name)
		if err != nil {
			return nil, err
		}
		l.metrics = metrics
	}
	return l, nil
}

// Failures is the number of requests the policy decided because Redis did
// not (admitted under Open, refused under Closed, decided locally under
// Local), for a health check or a metric. A cached denial is not one.
func (l *Limiter) Failures() uint64 {
	return l.failures.Load()
}

// Middleware limits every request to next: a func(http.Handler)
// http.Handler, for routers that take middleware so.
func (l *Limiter) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started := time.Now()
		// The narrowest window a refund must come within counts from here.
		decided := l.config.now()
		route, held := l.limitsFor(r.URL.Path)
		if len(held.windows) == 0 {
			next.ServeHTTP(w, r)
			return
		}
		key := l.logName(route, l.config.key(r))
		verdict, source := l.decide(r.Context(), key, held)
		admitted := source == sourceOpen || (source != sourceClosed && verdict.Allowed)
		l.metrics.count(admitted, source, time.Since(started).Seconds())
		h := w.Header()
		switch source {
		case sourceOpen:
			h.Set("RateLimit-Source", source)
			next.ServeHTTP(w, r)
			return
		case sourceClosed:
			h.Set("Retry-After", "1")
			h.Set("RateLimit-Source", source)
			plain(w, http.StatusServiceUnavailable, "rate limiter unavailable\n")
			return
		}
		SetHeaders(h, verdict)
		h.Set("RateLimit-Source", source)
		if !verdict.Allowed {
			plain(w, http.StatusTooManyRequests, "too many requests\n")
			return
		}
		if !l.config.refundFailed {
			next.ServeHTTP(w, r)
			return
		}
		recorder := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		defer func() {
			// A handler that panicked answers 500, as net/http does.
			if recovered := recover(); recovered != nil {
				l.giveBack(key, held, source, decided)
				panic(recovered)
			}
			if l.config.failed(recorder.status) {
				l.giveBack(key, held, source, decided)
			}
		}()
		next.ServeHTTP(recorder, r)
	})
}

// statusRecorder keeps the status a handler answered with.
type statusRecorder struct {
	http.ResponseWriter
	status      int
	wroteHeader bool
}

func (s *statusRecorder) WriteHeader(status int) {
	if !s.wroteHeader {
		s.status, s.wroteHeader = status, true
	}
	s.ResponseWriter.WriteHeader(status)
}

// Unwrap lets http.ResponseController reach the writer underneath.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// Flush and Hijack pass on to the writer underneath, for handlers that
// look for http.Flusher or http.Hijacker (server-sent events, WebSockets).
func (s *statusRecorder) Flush() {
	if flusher, ok := s.ResponseWriter.(http.Flusher); ok {
		flusher.Flush()
	}
}

func (s *statusRecorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	hijacker, ok := s.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, http.ErrNotSupported
	}
	return hijacker.Hijack()
}

// limitsFor is the route (its prefix, or "" for none) and the limits a
// request's path is held to: the longest prefix that covers it.
func (l *Limiter) limitsFor(path string) (string, limits) {
	for _, r := range l.routes {
		if path == r.prefix || (strings.HasPrefix(path, r.base) && strings.HasPrefix(path[len(r.base):], "/")) {
			return r.prefix, r.limits
		}
	}
	return "", l.limits
}

// logName is the log of client on route ("" for none): each route keeps
// logs of its own.
func (l *Limiter) logName(route, client string) string {
	if route == "" {
		return l.config.keyPrefix + client
	}
	return l.config.keyPrefix + route + ":" + client
}

// giveBack gives a failed request's units back where they were recorded,
// in Redis without holding up the response, while the request's own
// entries are surely in every window.
func (l *Limiter) giveBack(key string, held limits, source string, decided time.Time) {
	narrowest := held.windows[0].ms
	for _, w := range held.windows {
		narrowest = min(narrowest, w.ms)
	}
	if l.config.now().Sub(decided) >= milliseconds(narrowest) {
		return
	}
	switch source {
	case sourceLocal:
		_, _ = l.local.refund(key, held.windows, l.config.now().UnixMilli(), l.config.cost)
	case sourceRedis:
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), l.config.timeout)
			defer cancel()
			// Also when it failed: it may have been carried out.
			defer l.denials.Forget(key)
			if _, err := l.client.Refund(ctx, key, milliseconds(held.first.ms), held.first.limit, held.options...); err != nil {
				l.config.logger.Warn("rate limit: refund failed", "key", key, "error", err)
			}
		}()
	}
}

func plain(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(body))
}

// Who decided a request: RateLimit-Source's values.
const (
	sourceRedis  = "redis"
	sourceCache  = "cache"
	sourceLocal  = "local"
	sourceOpen   = "open"
	sourceClosed = "closed"
)

// decide is the verdict on a request and who gave it: a cached denial of
// Redis's, Redis's verdict, or the policy's where Redis gave none (no
// verdict under open and closed).
func (l *Limiter) decide(ctx context.Context, key string, held limits) (swl.Verdict, string) {
	// A cached denial answers also while Redis fails: it is no failure.
	if verdict, ok := l.denials.Answer(key, held.cached, l.config.cost, l.config.now()); ok {
		return verdict, sourceCache
	}
	ticket, sent := l.denials.Ticket(), l.config.now()
	verdict, err := l.check(ctx, key, held)
	if err == nil {
		l.denials.Keep(key, held.cached, l.config.cost, verdict, ticket, sent)
		return verdict, sourceRedis
	}
	l.failures.Add(1)
	switch l.config.policy {
	case Closed:
		return swl.Verdict{}, sourceClosed
	case Local:
		verdict, err := l.local.check(key, held.windows, l.config.now().UnixMilli(), l.config.cost)
		if err != nil {
			// New refused more windows than a call takes: not reached.
			return swl.Verdict{}, sourceClosed
		}
		return verdict, sourceLocal
	}
	l.config.logger.Warn("rate limit: failing open", "key", key)
	return swl.Verdict{}, sourceOpen
}

// check is Redis's verdict, or the error that kept it from giving one in
// time (or the backoff's, while Redis is skipped).
func (l *Limiter) check(ctx context.Context, key string, held limits) (swl.Verdict, error) {
	if !l.backoff.mayTry(l.config.now()) {
		return swl.Verdict{}, errSkipped
	}
	// The request's values, not its cancellation: a client that hangs up
	// is no failure of Redis's.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.config.timeout)
	defer cancel()
	type outcome struct {
		verdict swl.Verdict
		err     error
	}
	done := make(chan outcome, 1)
	go func() {
		verdict, err := l.client.Check(ctx, key, milliseconds(held.first.ms), held.first.limit, held.options...)
		done <- outcome{verdict, err}
	}()
	var result outcome
	select {
	case result = <-done:
	case <-ctx.Done():
		// A check that timed out may still be carried out by Redis: under
		// the local policy such a request can count in Redis as well.
		result.err = fmt.Errorf("%w after %v", context.DeadlineExceeded, l.config.timeout)
	}
	switch {
	case result.err == nil:
		l.backoff.succeeded()
	case aboutTheCall(result.err):
		// An error reply about this call (a key of another type): the
		// policy decides it, and Redis stays in use for the others.
		l.config.logger.Warn("rate limit: Redis refused the call", "key", key, "error", result.err)
	default:
		l.backoff.failed(l.config.now())
		l.config.logger.Warn("rate limit: Redis unavailable", "error", result.err)
	}
	return result.verdict, result.err
}

var errSkipped = errors.New("swlhttp: Redis skipped after a failure")

// serverState are the error replies about the server's state rather than
// the call (after a failover, the address may lead elsewhere).
var serverState = []string{"READONLY", "LOADING", "MASTERDOWN", "BUSY", "CLUSTERDOWN", "TRYAGAIN", "NOREPLICAS"}

// aboutTheCall: err is the server's error reply about this call only, such
// as WRONGTYPE, not about its state.
func aboutTheCall(err error) bool {
	var reply interface {
		error
		RedisError()
	}
	if !errors.As(err, &reply) {
		return false
	}
	message := reply.Error()
	for _, state := range serverState {
		if strings.HasPrefix(message, state) {
			return false
		}
	}
	return true
}

// Reset deletes the log of client (what the key function returned for its
// requests, before the prefix), so that its next request is admitted as a
// new client's, and drops its cached denial and its local log.
func (l *Limiter) Reset(ctx context.Context, client string) error {
	keys := []string{l.logName("", client)}
	for _, r := range l.routes {
		if len(r.limits.windows) > 0 {
			keys = append(keys, l.logName(r.prefix, client))
		}
	}
	for _, key := range keys {
		defer l.forget(key)
	}
	// One by one (in a cluster they may be on different nodes), each tried
	// whatever the others did.
	var errs []error
	for _, key := range keys {
		errs = append(errs, l.client.Reset(ctx, key))
	}
	return errors.Join(errs...)
}

// Refund gives back units of client's newest recorded units (SWL.REFUND;
// a request that should not count after all), and drops its cached
// denial.
func (l *Limiter) Refund(ctx context.Context, client string, units int64) (swl.Verdict, error) {
	key := l.logName("", client)
	// Also when it failed: it may have been carried out.
	defer l.denials.Forget(key)
	options := append([]swl.RequestOption{}, l.limits.options...)
	options = append(options, swl.Cost(units))
	return l.client.Refund(ctx, key, milliseconds(l.limits.first.ms), l.limits.first.limit, options...)
}

func (l *Limiter) forget(key string) {
	l.denials.Forget(key)
	if l.local != nil {
		l.local.forget(key)
	}
}

// backoff skips Redis for a while after a failure: 50 ms, doubling to a
// second.
type backoff struct {
	mu    sync.Mutex
	delay time.Duration
	until time.Time
}

func (b *backoff) mayTry(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return !now.Before(b.until)
}

func (b *backoff) failed(now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if now.Before(b.until) {
		// Requests failing together back off once, not once each.
		return
	}
	b.delay = min(lastDelay, max(firstDelay, 2*b.delay))
	b.until = now.Add(b.delay)
}

func (b *backoff) succeeded() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.delay, b.until = 0, time.Time{}
}
