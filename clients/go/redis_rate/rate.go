package redis_rate

import (
	"context"
	"fmt"
	"math"
	"math/bits"
	"time"

	"github.com/redis/go-redis/v9"

	swl "github.com/redis-swl/redis-swl/clients/go"
)

// redisPrefix is put before every key, as redis_rate does.
const redisPrefix = "rate:"

// maxCost is the most units one SWL.CHECK records.
const maxCost = 100_000

// Limit is Rate events per Period, with bursts of up to Burst at once, as
// in redis_rate. On a sliding log it is Burst events in any window of
// Burst/Rate periods (rounded up to a whole millisecond): the burst
// redis_rate allows at once, and over time its rate. PerSecond, PerMinute
// and PerHour give Burst = Rate: Rate events in any Period.
type Limit struct {
	Rate   int
	Burst  int
	Period time.Duration
}

// String is redis_rate's: "10 req/s (burst 10)".
func (l Limit) String() string {
	return fmt.Sprintf("%d req/%s (burst %d)", l.Rate, unit(l.Period), l.Burst)
}

// IsZero tells whether l is the zero Limit.
func (l Limit) IsZero() bool {
	return l == Limit{}
}

func unit(period time.Duration) string {
	switch period {
	case time.Second:
		return "s"
	case time.Minute:
		return "m"
	case time.Hour:
		return "h"
	}
	return period.String()
}

// PerSecond is rate events in any second.
func PerSecond(rate int) Limit {
	return Limit{Rate: rate, Burst: rate, Period: time.Second}
}

// PerMinute is rate events in any minute.
func PerMinute(rate int) Limit {
	return Limit{Rate: rate, Burst: rate, Period: time.Minute}
}

// PerHour is rate events in any hour.
func PerHour(rate int) Limit {
	return Limit{Rate: rate, Burst: rate, Period: time.Hour}
}

// window is the log's window for l: Burst emission intervals of
// Period/Rate each, rounded up to a whole millisecond (never looser than
// l). With Burst 0, which admits nothing, it is Period.
func (l Limit) window() (time.Duration, error) {
	if l.Rate <= 0 || l.Burst < 0 || l.Period <= 0 {
		return 0, fmt.Errorf("redis_rate: %v: Rate and Period must be positive, Burst not negative", l)
	}
	if l.Burst == 0 {
		return ceilMs(uint64(l.Period), 0)
	}
	// Period*Burst overflows 64 bits for long periods and large bursts.
	high, low := bits.Mul64(uint64(l.Period), uint64(l.Burst))
	if high >= uint64(l.Rate) {
		return 0, fmt.Errorf("redis_rate: %v: the window is longer than a time.Duration holds", l)
	}
	ns, rest := bits.Div64(high, low, uint64(l.Rate))
	return ceilMs(ns, rest)
}

// ceilMs is ns nanoseconds (and rest a fraction of one more) rounded up
// to a whole millisecond.
func ceilMs(ns, rest uint64) (time.Duration, error) {
	ms := ns / uint64(time.Millisecond)
	if ns%uint64(time.Millisecond) != 0 || rest != 0 {
		ms++
	}
	// The module counts in windows up to 2^53-1 ms, a time.Duration holds
	// fewer.
	if ms > math.MaxInt64/uint64(time.Millisecond) {
		return 0, fmt.Errorf("redis_rate: a window of %d ms is longer than a time.Duration holds", ms)
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// Limiter controls how frequently events are allowed to happen, over
// redis-swl: an exact sliding log per key.
type Limiter struct {
	client *swl.Client
	// now, where set (by the tests), is the time of every call; otherwise
	// the server's clock decides.
	now func() time.Time
}

// NewLimiter is a limiter over rdb: a *redis.Client, *redis.ClusterClient,
// *redis.Ring or any redis.UniversalClient. Checks are sent once, never
// again after a timeout (see swl.GoRedis).
func NewLimiter(rdb redis.UniversalClient) *Limiter {
	return &Limiter{client: swl.New(swl.GoRedis(rdb))}
}

// Result is the outcome of a call, with redis_rate's fields and
// conventions.
type Result struct {
	// Limit is the limit that was used to obtain this result.
	Limit Limit

	// Allowed is the number of events that may happen at time now: n
	// when admitted, 0 when not.
	Allowed int

	// Remaining is how many more events the window admits now.
	Remaining int

	// RetryAfter is when the request would be admitted: -1 (a
	// nanosecond, as in redis_rate) when it was, and when no wait would
	// admit it (n above Burst).
	RetryAfter time.Duration

	// ResetAfter is when the key's window is empty again, so that
	// Remaining is Burst: a window after its newest event; 0 for a key
	// with none.
	ResetAfter time.Duration
}

// Allow is AllowN(ctx, key, limit, 1).
func (l Limiter) Allow(ctx context.Context, key string, limit Limit) (*Result, error) {
	return l.AllowN(ctx, key, limit, 1)
}

// AllowN records n events of key's if they all fit in its window, and
// none otherwise. n = 0 asks without recording.
func (l Limiter) AllowN(ctx context.Context, key string, limit Limit, n int) (*Result, error) {
	window, err := limit.window()
	if err != nil {
		return nil, err
	}
	switch {
	case n < 0:
		return nil, fmt.Errorf("redis_rate: n must not be negative, not %d", n)
	case n == 0 || n > maxCost && n > limit.Burst:
		// Nothing to record: n is 0, or more than ever fits.
		return l.state(ctx, key, limit, window)
	case n > maxCost:
		return nil, fmt.Errorf("redis_rate: %d events at once is more than %d: a sliding log records one entry per event", n, maxCost)
	}
	v, err := l.client.Check(ctx, redisPrefix+key, window, int64(limit.Burst), l.at(swl.Cost(int64(n)))...)
	if err != nil {
		return nil, fmt.Errorf("redis_rate: allow %q: %w", key, err)
	}
	return result(limit, v, n), nil
}

// AllowAtMost records as many of n events of key's as fit in its window,
// at least one, or none if none fits: Allowed is how many. One call
// records at most 100,000 (the most one SWL.CHECK records).
func (l Limiter) AllowAtMost(ctx context.Context, key string, limit Limit, n int) (*Result, error) {
	window, err := limit.window()
	if err != nil {
		return nil, err
	}
	if n < 0 {
		return nil, fmt.Errorf("redis_rate: n must not be negative, not %d", n)
	}
	if n == 0 {
		res, err := l.state(ctx, key, limit, window)
		if err != nil || res.Remaining > 0 || limit.Burst == 0 {
			return res, err
		}
		// As in redis_rate: a full window says when one event would fit.
		v, err := l.client.Peek(ctx, redisPrefix+key, window, int64(limit.Burst), l.at()...)
		if err != nil {
			return nil, fmt.Errorf("redis_rate: allow %q: %w", key, err)
		}
		res.RetryAfter = v.RetryAfter
		return res, nil
	}
	// Ask for n; a denial says how many fit now, and the next check asks
	// for that many (another process may have taken some meanwhile, so
	// it can be denied too, with fewer left), down to one, whose denial
	// is the answer. Each check is atomic, so together they never admit
	// more than the limit; SWL.CHECK has no "as many as fit" of its own.
	cost := max(1, min(n, limit.Burst, maxCost))
	for {
		v, err := l.client.Check(ctx, redisPrefix+key, window, int64(limit.Burst), l.at(swl.Cost(int64(cost)))...)
		if err != nil {
			return nil, fmt.Errorf("redis_rate: allow %q: %w", key, err)
		}
		if v.Allowed || cost == 1 {
			return result(limit, v, cost), nil
		}
		// Strictly fewer each time, whatever the reply says.
		cost = int(min(int64(cost-1), max(1, v.Remaining)))
	}
}

// Reset deletes key's log: every event it recorded is forgotten.
func (l *Limiter) Reset(ctx context.Context, key string) error {
	if err := l.client.Reset(ctx, redisPrefix+key); err != nil {
		return fmt.Errorf("redis_rate: reset %q: %w", key, err)
	}
	return nil
}

// state is key's window as it stands, recording nothing: Allowed 0 and
// RetryAfter -1, as redis_rate answers n = 0.
func (l Limiter) state(ctx context.Context, key string, limit Limit, window time.Duration) (*Result, error) {
	burst := int64(limit.Burst)
	if burst < maxCost {
		// A peek that would admit counts its own request as recorded; one
		// of more than the limit is never admitted, and so reads the log
		// as it is.
		v, err := l.client.Peek(ctx, redisPrefix+key, window, burst, l.at(swl.Cost(burst+1))...)
		if err != nil {
			return nil, fmt.Errorf("redis_rate: allow %q: %w", key, err)
		}
		return result(limit, v, 0), nil
	}
	// No cost is above a limit this large: read what is left from a peek
	// of one, and the wait until the window empties from a peek that a
	// second window of the same length with no room denies.
	v, err := l.client.Peek(ctx, redisPrefix+key, window, burst, l.at()...)
	if err != nil {
		return nil, fmt.Errorf("redis_rate: allow %q: %w", key, err)
	}
	remaining := v.Remaining
	if v.Allowed {
		remaining++
		v, err = l.client.Peek(ctx, redisPrefix+key, window, burst, l.at(swl.Window(window, 0))...)
		if err != nil {
			return nil, fmt.Errorf("redis_rate: allow %q: %w", key, err)
		}
	}
	res := result(limit, v, 0)
	res.Remaining = int(remaining)
	res.RetryAfter = -1
	return res, nil
}

// at is options for a call at the limiter's time, and more.
func (l Limiter) at(options ...swl.RequestOption) []swl.RequestOption {
	if l.now != nil {
		options = append(options, swl.At(l.now()))
	}
	return options
}

// result is v as redis_rate reports it; allowed is the events recorded
// if v admitted.
func result(limit Limit, v swl.Verdict, allowed int) *Result {
	res := &Result{
		Limit:      limit,
		Remaining:  int(v.Remaining),
		RetryAfter: v.RetryAfter,
		ResetAfter: v.ResetAfter,
	}
	if v.Allowed {
		res.Allowed = allowed
	}
	if res.RetryAfter < 0 {
		// redis_rate's -1 is time.Duration(-1), the module's -1ms.
		res.RetryAfter = -1
	}
	return res
}
