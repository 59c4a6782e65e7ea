package golimiter

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sethvargo/go-limiter"

	swl "github.com/redis-swl/redis-swl/clients/go"
)

var _ limiter.Store = (*Store)(nil)

const (
	// DefaultPrefix is put before every key when Config.Prefix is empty.
	DefaultPrefix = "golimiter:"
	// DefaultOverrideTTL is how long a Set lasts when Config.OverrideTTL
	// is zero: a week, as go-redisstore keeps a key it was given a limit
	// for.
	DefaultOverrideTTL = 7 * 24 * time.Hour

	// maxTokens is the largest limit the module takes (2^53-1, the largest
	// integer a sorted-set score holds exactly).
	maxTokens = 1<<53 - 1
	// maxCost is the most units one SWL.REFUND gives back.
	maxCost = 100_000
)

// Config is [New]'s input, as memorystore.Config is memorystore.New's.
type Config struct {
	// Tokens is how many requests a key may make in any Interval. The
	// default is 1.
	Tokens uint64

	// Interval is the length of the sliding window, a whole number of
	// milliseconds. The default is 1 second.
	Interval time.Duration

	// Prefix is put before every key in Redis: a key's log is
	// Prefix+"log:"+key, and the limit Set gives it Prefix+"limit:"+key
	// (two namespaces, so that no key's log is another key's limit). The
	// default is DefaultPrefix.
	Prefix string

	// OverrideTTL is how long the limit Set gives a key lasts, from the
	// Set. The default is DefaultOverrideTTL.
	OverrideTTL time.Duration

	// Now, where set, is the time of every call, sent to Redis in whole
	// milliseconds (a test's clock, or one clock for a fleet). Where nil,
	// the Redis server's clock decides, and the reset times Take returns
	// are this process's clock at the reply plus the wait Redis replied.
	Now func() time.Time
}

// Store is a go-limiter Store over redis-swl: an exact sliding window of
// Interval with Tokens requests per key, shared by every process using the
// same Redis. It is safe for concurrent use.
type Store struct {
	doer     swl.Doer
	client   *swl.Client
	defaults limits
	prefix   string
	ttl      time.Duration
	now      func() time.Time
	stopped  atomic.Bool
}

// limits are the window a key's requests are counted in and how many it
// may make in it.
type limits struct {
	tokens   uint64
	interval time.Duration
}

// New is a store sending its commands through doer (swl.GoRedis adapts a
// go-redis client, single, cluster or failover), with c's defaults (nil
// for all of them).
//
// Close does not close the Redis client: it is the caller's.
func New(doer swl.Doer, c *Config) (*Store, error) {
	if c == nil {
		c = &Config{}
	}
	defaults := limits{tokens: 1, interval: time.Second}
	if c.Tokens > 0 {
		defaults.tokens = c.Tokens
	}
	if c.Interval != 0 {
		defaults.interval = c.Interval
	}
	if err := defaults.validate(); err != nil {
		return nil, err
	}
	s := &Store{
		doer:     doer,
		client:   swl.New(doer),
		defaults: defaults,
		prefix:   c.Prefix,
		ttl:      c.OverrideTTL,
		now:      c.Now,
	}
	if s.prefix == "" {
		s.prefix = DefaultPrefix
	}
	if s.ttl == 0 {
		s.ttl = DefaultOverrideTTL
	}
	if s.ttl < time.Millisecond {
		return nil, fmt.Errorf("golimiter: OverrideTTL must be at least 1ms, not %v", s.ttl)
	}
	if doer == nil {
		return nil, errors.New("golimiter: no Doer to send commands through")
	}
	return s, nil
}

func (l limits) validate() error {
	if l.interval < time.Millisecond || l.interval%time.Millisecond != 0 {
		return fmt.Errorf("golimiter: an interval must be a whole number of milliseconds, at least 1ms, not %v", l.interval)
	}
	if l.tokens > maxTokens {
		return fmt.Errorf("golimiter: tokens must be at most %d, not %d", uint64(maxTokens), l.tokens)
	}
	return nil
}

// Take records a request of key's if its window has room: it returns the
// key's limit, the requests left in the window after this one, and when
// to come back as Unix nanoseconds: for a denied request, when it would
// be admitted; for an admitted one, when every request in the window has
// left it. Where no wait admits (a limit of 0, from Set), the reset is an
// interval away.
func (s *Store) Take(ctx context.Context, key string) (tokens, remaining, reset uint64, ok bool, err error) {
	if s.stopped.Load() {
		return 0, 0, 0, false, limiter.ErrStopped
	}
	l, err := s.limitsOf(ctx, key)
	if err != nil {
		return 0, 0, 0, false, err
	}
	base, at := s.clock()
	v, err := s.client.Check(ctx, s.logKey(key), l.interval, int64(l.tokens), at...)
	if err != nil {
		return 0, 0, 0, false, fmt.Errorf("golimiter: take %q: %w", key, err)
	}
	wait := v.ResetAfter
	if !v.Allowed {
		wait = v.RetryAfter
		if wait < 0 {
			wait = l.interval
		}
	}
	return l.tokens, uint64(v.Remaining), unixNano(base(), wait), v.Allowed, nil
}

// Get is key's limit and the requests left in its window now, changing
// nothing. A key with no requests in its window has all of them left.
func (s *Store) Get(ctx context.Context, key string) (tokens, remaining uint64, err error) {
	if s.stopped.Load() {
		return 0, 0, limiter.ErrStopped
	}
	l, err := s.limitsOf(ctx, key)
	if err != nil {
		return 0, 0, err
	}
	_, at := s.clock()
	v, err := s.client.Peek(ctx, s.logKey(key), l.interval, int64(l.tokens), at...)
	if err != nil {
		return 0, 0, fmt.Errorf("golimiter: get %q: %w", key, err)
	}
	left := uint64(v.Remaining)
	if v.Allowed {
		// A peek that would admit replies as if its request were recorded.
		left++
	}
	return l.tokens, left, nil
}

// Set gives key its own limit, tokens in any interval, in Redis, so that
// every store sharing it uses it, for OverrideTTL; and empties key's
// window, as go-limiter's Set fills the key's bucket. A limit of 0
// denies every request.
func (s *Store) Set(ctx context.Context, key string, tokens uint64, interval time.Duration) error {
	if s.stopped.Load() {
		return limiter.ErrStopped
	}
	l := limits{tokens: tokens, interval: interval}
	if err := l.validate(); err != nil {
		return err
	}
	value := strconv.FormatUint(tokens, 10) + " " + strconv.FormatInt(interval.Milliseconds(), 10)
	if _, err := s.doer.Do(ctx, "SET", s.overrideKey(key), value, "PX", s.ttl.Milliseconds()); err != nil {
		return fmt.Errorf("golimiter: set %q: %w", key, err)
	}
	if err := s.client.Reset(ctx, s.logKey(key)); err != nil {
		return fmt.Errorf("golimiter: set %q: %w", key, err)
	}
	return nil
}

// Burst gives back up to tokens of key's newest requests in its window
// (SWL.REFUND), so that key may make that many more now: remaining rises
// by tokens, but never above the key's limit.
func (s *Store) Burst(ctx context.Context, key string, tokens uint64) error {
	if s.stopped.Load() {
		return limiter.ErrStopped
	}
	l, err := s.limitsOf(ctx, key)
	if err != nil {
		return err
	}
	_, at := s.clock()
	// A refund gives back at most maxCost units; the log may hold more.
	for tokens > 0 {
		n := min(tokens, maxCost)
		options := append(at[:len(at):len(at)], swl.Cost(int64(n)))
		v, err := s.client.Refund(ctx, s.logKey(key), l.interval, int64(l.tokens), options...)
		if err != nil {
			return fmt.Errorf("golimiter: burst %q: %w", key, err)
		}
		tokens -= n
		// The refund replies as a peek of n units would, counting them
		// as recorded where they fit: left is what the window has now.
		left := uint64(v.Remaining)
		if v.Allowed {
			left += n
		}
		if left >= l.tokens {
			// Nothing left to give back in the window.
			break
		}
	}
	return nil
}

// Close makes every later call fail with limiter.ErrStopped. The Redis
// client is left open: it is the caller's.
func (s *Store) Close(context.Context) error {
	s.stopped.Store(true)
	return nil
}

// logKey and overrideKey are key's log and the limit Set gave it.
func (s *Store) logKey(key string) string { return s.prefix + "log:" + key }

func (s *Store) overrideKey(key string) string { return s.prefix + "limit:" + key }

// limitsOf is the limit Set gave key, or the store's. It is read from
// Redis on every call, so that a Set in one process holds in all of them
// at once; that costs a round trip before each check.
func (s *Store) limitsOf(ctx context.Context, key string) (limits, error) {
	reply, err := s.doer.Do(ctx, "GET", s.overrideKey(key))
	// go-redis answers a missing key with redis.Nil, other clients with nil.
	if errors.Is(err, redis.Nil) || err == nil && reply == nil {
		return s.defaults, nil
	}
	if err != nil {
		return limits{}, fmt.Errorf("golimiter: the limit of %q: %w", key, err)
	}
	l, ok := parseLimits(reply)
	if !ok {
		return limits{}, fmt.Errorf("golimiter: %s holds %.40q, not a limit Set wrote", s.overrideKey(key), fmt.Sprint(reply))
	}
	return l, nil
}

// parseLimits reads what Set writes: tokens and interval_ms.
func parseLimits(reply any) (limits, bool) {
	text, ok := reply.(string)
	if !ok {
		return limits{}, false
	}
	tokens, ms, found := strings.Cut(text, " ")
	if !found {
		return limits{}, false
	}
	t, err := strconv.ParseUint(tokens, 10, 64)
	if err != nil {
		return limits{}, false
	}
	m, err := strconv.ParseInt(ms, 10, 64)
	if err != nil || m < 1 || m > math.MaxInt64/int64(time.Millisecond) {
		return limits{}, false
	}
	l := limits{tokens: t, interval: time.Duration(m) * time.Millisecond}
	return l, l.validate() == nil
}

// clock is the time a call is sent at, as options for it, and its base
// for the reset Take returns: the store's clock, read once, or where it
// has none the server's, whose base is this process's clock at the reply.
func (s *Store) clock() (base func() time.Time, at []swl.RequestOption) {
	if s.now == nil {
		return time.Now, nil
	}
	now := time.UnixMilli(s.now().UnixMilli())
	return func() time.Time { return now }, []swl.RequestOption{swl.At(now)}
}

// latest is the last time UnixNano can give.
var latest = time.Unix(0, math.MaxInt64)

func unixNano(now time.Time, wait time.Duration) uint64 {
	t := now.Add(wait)
	if t.After(latest) {
		t = latest
	}
	return uint64(t.UnixNano())
}
