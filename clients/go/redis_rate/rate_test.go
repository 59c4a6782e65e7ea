package redis_rate_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis-swl/redis-swl/clients/go/internal/redistest"
	"github.com/redis-swl/redis-swl/clients/go/redis_rate"
)

func TestLimitHelpersAndStringAreRedisRates(t *testing.T) {
	for _, tc := range []struct {
		limit redis_rate.Limit
		want  redis_rate.Limit
		text  string
	}{
		{redis_rate.PerSecond(10), redis_rate.Limit{Rate: 10, Burst: 10, Period: time.Second}, "10 req/s (burst 10)"},
		{redis_rate.PerMinute(5), redis_rate.Limit{Rate: 5, Burst: 5, Period: time.Minute}, "5 req/m (burst 5)"},
		{redis_rate.PerHour(100), redis_rate.Limit{Rate: 100, Burst: 100, Period: time.Hour}, "100 req/h (burst 100)"},
		{redis_rate.Limit{Rate: 3, Burst: 1, Period: 2 * time.Second}, redis_rate.Limit{Rate: 3, Burst: 1, Period: 2 * time.Second}, "3 req/2s (burst 1)"},
	} {
		if tc.limit != tc.want || tc.limit.String() != tc.text || tc.limit.IsZero() {
			t.Errorf("%+v %q %v, want %+v %q", tc.limit, tc.limit.String(), tc.limit.IsZero(), tc.want, tc.text)
		}
	}
	if !(redis_rate.Limit{}).IsZero() {
		t.Error("the zero Limit is not IsZero")
	}
}

// redis_rate's TestAllow, call by call, with exact values: the same
// Allowed and Remaining; ResetAfter is a whole window after the newest
// event (redis_rate: n emission intervals), and AllowN of more than the
// burst says no wait helps (redis_rate: a wait of 99s after which it is
// still denied).
func TestAllowAsRedisRatesTestAllow(t *testing.T) {
	each(t, func(t *testing.T, server *redistest.Server) {
		c := newClock(T)
		limiter := newLimiter(server, c)
		limit := redis_rate.PerSecond(10)

		res, err := limiter.Allow(ctx, "test_id", limit)
		expect(t, limit, res, err, result{1, 9, -1, ms(1_000)})
		expectEntries(t, server, "test_id", T)

		if err := limiter.Reset(ctx, "test_id"); err != nil {
			t.Fatal(err)
		}
		expectNoKey(t, server, "rate:test_id")
		res, err = limiter.Allow(ctx, "test_id", limit)
		expect(t, limit, res, err, result{1, 9, -1, ms(1_000)})

		res, err = limiter.AllowN(ctx, "test_id", limit, 2)
		expect(t, limit, res, err, result{2, 7, -1, ms(1_000)})
		res, err = limiter.AllowN(ctx, "test_id", limit, 7)
		expect(t, limit, res, err, result{7, 0, -1, ms(1_000)})
		res, err = limiter.AllowN(ctx, "test_id", limit, 1000)
		expect(t, limit, res, err, result{0, 0, -1, ms(1_000)})
		expectEntries(t, server, "test_id", times(10, T)...)

		// The ten at T leave at T+1000.
		c.Set(T + 400)
		res, err = limiter.Allow(ctx, "test_id", limit)
		expect(t, limit, res, err, result{0, 0, ms(600), ms(600)})
		c.Set(T + 1_000)
		res, err = limiter.Allow(ctx, "test_id", limit)
		expect(t, limit, res, err, result{1, 9, -1, ms(1_000)})
		expectEntries(t, server, "test_id", T+1_000)
	})
}

// redis_rate's TestAllowN_IncrementZero: n = 0 asks, records nothing and
// creates no key.
func TestAllowNOfZeroAsks(t *testing.T) {
	each(t, func(t *testing.T, server *redistest.Server) {
		c := newClock(T)
		limiter := newLimiter(server, c)
		limit := redis_rate.PerSecond(10)

		res, err := limiter.AllowN(ctx, "test_id", limit, 0)
		expect(t, limit, res, err, result{0, 10, -1, 0})
		expectNoKey(t, server, "rate:test_id")

		res, err = limiter.Allow(ctx, "test_id", limit)
		expect(t, limit, res, err, result{1, 9, -1, ms(1_000)})

		c.Set(T + 100)
		res, err = limiter.AllowN(ctx, "test_id", limit, 0)
		expect(t, limit, res, err, result{0, 9, -1, ms(900)})
		expectEntries(t, server, "test_id", T)
	})
}

// redis_rate's TestAllowAtMost and TestAllowAtMost_IncrementZero: as many
// as fit; when none does, RetryAfter is when one would.
func TestAllowAtMostAsRedisRatesTests(t *testing.T) {
	each(t, func(t *testing.T, server *redistest.Server) {
		c := newClock(T)
		limiter := newLimiter(server, c)
		limit := redis_rate.PerSecond(10)

		res, err := limiter.AllowAtMost(ctx, "test_id", limit, 0)
		expect(t, limit, res, err, result{0, 10, -1, 0})
		expectNoKey(t, server, "rate:test_id")

		res, err = limiter.Allow(ctx, "test_id", limit)
		expect(t, limit, res, err, result{1, 9, -1, ms(1_000)})
		res, err = limiter.AllowAtMost(ctx, "test_id", limit, 2)
		expect(t, limit, res, err, result{2, 7, -1, ms(1_000)})
		res, err = limiter.AllowN(ctx, "test_id", limit, 0)
		expect(t, limit, res, err, result{0, 7, -1, ms(1_000)})
		res, err = limiter.AllowAtMost(ctx, "test_id", limit, 10)
		expect(t, limit, res, err, result{7, 0, -1, ms(1_000)})
		res, err = limiter.AllowN(ctx, "test_id", limit, 0)
		expect(t, limit, res, err, result{0, 0, -1, ms(1_000)})
		expectEntries(t, server, "test_id", times(10, T)...)

		c.Set(T + 400)
		res, err = limiter.AllowAtMost(ctx, "test_id", limit, 1000)
		expect(t, limit, res, err, result{0, 0, ms(600), ms(600)})
		res, err = limiter.AllowAtMost(ctx, "test_id", limit, 0)
		expect(t, limit, res, err, result{0, 0, ms(600), ms(600)})
		res, err = limiter.AllowN(ctx, "test_id", limit, 1000)
		expect(t, limit, res, err, result{0, 0, -1, ms(600)})
		expectEntries(t, server, "test_id", times(10, T)...)

		c.Set(T + 1_000)
		res, err = limiter.AllowAtMost(ctx, "test_id", limit, 0)
		expect(t, limit, res, err, result{0, 10, -1, 0})
	})
}

// Processes taking "as many as fit" at once never take more than the
// limit between them: each check is atomic, and a denied one is asked
// again for what it said is left.
func TestConcurrentAllowAtMostTakesExactlyTheLimit(t *testing.T) {
	each(t, func(t *testing.T, server *redistest.Server) {
		limiter := newLimiter(server, newClock(T))
		limit := redis_rate.PerSecond(10)
		var allowed atomic.Int64
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for range 3 {
					res, err := limiter.AllowAtMost(ctx, "shared", limit, 3)
					if err != nil {
						t.Error(err)
						return
					}
					if res.Allowed < 0 || res.Allowed > 3 {
						t.Errorf("allowed %d of 3", res.Allowed)
					}
					allowed.Add(int64(res.Allowed))
				}
			})
		}
		wg.Wait()
		if allowed.Load() != 10 {
			t.Fatalf("%d allowed, not 10", allowed.Load())
		}
		expectEntries(t, server, "shared", times(10, T)...)
	})
}

// Burst is the log's limit, in a window of Burst emission intervals
// (Period/Rate each), rounded up to a millisecond: 20 at once for 10/s
// with a burst of 20, then none for 2s; 1 per 334ms for 3/s with a burst
// of 1. Burst 0 admits nothing and writes nothing.
func TestBurstIsTheLimitOfAWindowOfBurstEmissionIntervals(t *testing.T) {
	each(t, func(t *testing.T, server *redistest.Server) {
		c := newClock(T)
		limiter := newLimiter(server, c)

		burst := redis_rate.Limit{Rate: 10, Burst: 20, Period: time.Second}
		for i := range 20 {
			res, err := limiter.Allow(ctx, "burst", burst)
			expect(t, burst, res, err, result{1, 19 - i, -1, ms(2_000)})
		}
		res, err := limiter.Allow(ctx, "burst", burst)
		expect(t, burst, res, err, result{0, 0, ms(2_000), ms(2_000)})
		c.Set(T + 1_999)
		res, err = limiter.Allow(ctx, "burst", burst)
		expect(t, burst, res, err, result{0, 0, ms(1), ms(1)})
		c.Set(T + 2_000)
		res, err = limiter.Allow(ctx, "burst", burst)
		expect(t, burst, res, err, result{1, 19, -1, ms(2_000)})
		expectEntries(t, server, "burst", T+2_000)

		c.Set(T)
		one := redis_rate.Limit{Rate: 3, Burst: 1, Period: time.Second}
		res, err = limiter.Allow(ctx, "one", one)
		expect(t, one, res, err, result{1, 0, -1, ms(334)})
		c.Set(T + 333)
		res, err = limiter.Allow(ctx, "one", one)
		expect(t, one, res, err, result{0, 0, ms(1), ms(1)})
		c.Set(T + 334)
		res, err = limiter.Allow(ctx, "one", one)
		expect(t, one, res, err, result{1, 0, -1, ms(334)})
		expectEntries(t, server, "one", T+334)

		none := redis_rate.Limit{Rate: 10, Burst: 0, Period: time.Second}
		res, err = limiter.Allow(ctx, "none", none)
		expect(t, none, res, err, result{0, 0, -1, 0})
		res, err = limiter.AllowAtMost(ctx, "none", none, 5)
		expect(t, none, res, err, result{0, 0, -1, 0})
		res, err = limiter.AllowAtMost(ctx, "none", none, 0)
		expect(t, none, res, err, result{0, 0, -1, 0})
		expectNoKey(t, server, "rate:none")
	})
}

// A sliding log records one entry per event, at most 100,000 in a call:
// more is an error where it could fit, and denied where it never could.
// Limits this large are read without a cost above them.
func TestLargeLimits(t *testing.T) {
	each(t, func(t *testing.T, server *redistest.Server) {
		c := newClock(T)
		limiter := newLimiter(server, c)
		limit := redis_rate.PerSecond(200_000)

		res, err := limiter.AllowN(ctx, "large", limit, 250_000)
		expect(t, limit, res, err, result{0, 200_000, -1, 0})
		res, err = limiter.AllowN(ctx, "large", limit, 100_000)
		expect(t, limit, res, err, result{100_000, 100_000, -1, ms(1_000)})
		c.Set(T + 500)
		res, err = limiter.AllowN(ctx, "large", limit, 250_000)
		expect(t, limit, res, err, result{0, 100_000, -1, ms(500)})
		res, err = limiter.AllowN(ctx, "large", limit, 0)
		expect(t, limit, res, err, result{0, 100_000, -1, ms(500)})
		res, err = limiter.AllowAtMost(ctx, "large", limit, 150_000)
		expect(t, limit, res, err, result{100_000, 0, -1, ms(1_000)})
		res, err = limiter.AllowAtMost(ctx, "large", limit, 0)
		expect(t, limit, res, err, result{0, 0, ms(500), ms(1_000)})

		_, err = limiter.AllowN(ctx, "large", limit, 150_000)
		if want := "redis_rate: 150000 events at once is more than 100000: a sliding log records one entry per event"; err == nil || err.Error() != want {
			t.Fatalf("%v, want %q", err, want)
		}
		if n := len(server.Entries("rate:large")); n != 200_000 {
			t.Fatalf("%d entries, not 200000", n)
		}
	})
}

// Limits and counts that have no meaning are errors, and send nothing.
func TestMeaninglessLimitsAreErrors(t *testing.T) {
	server := redistest.Start(t, true, "compact")
	limiter := newLimiter(server, newClock(T))
	for _, tc := range []struct {
		limit redis_rate.Limit
		n     int
		want  string
	}{
		{redis_rate.Limit{}, 1, "redis_rate: 0 req/0s (burst 0): Rate and Period must be positive, Burst not negative"},
		{redis_rate.PerSecond(0), 1, "redis_rate: 0 req/s (burst 0): Rate and Period must be positive, Burst not negative"},
		{redis_rate.Limit{Rate: 1, Burst: -1, Period: time.Second}, 1, "redis_rate: 1 req/s (burst -1): Rate and Period must be positive, Burst not negative"},
		{redis_rate.Limit{Rate: 1, Burst: 1, Period: -time.Second}, 1, "redis_rate: 1 req/-1s (burst 1): Rate and Period must be positive, Burst not negative"},
		{redis_rate.PerSecond(10), -1, "redis_rate: n must not be negative, not -1"},
		{redis_rate.Limit{Rate: 1, Burst: 1 << 40, Period: time.Hour}, 1, "redis_rate: 1 req/h (burst 1099511627776): the window is longer than a time.Duration holds"},
		{redis_rate.Limit{Rate: 1, Burst: 2_600_000, Period: time.Hour}, 1, "redis_rate: a window of 9360000000000 ms is longer than a time.Duration holds"},
	} {
		for name, call := range map[string]func() (*redis_rate.Result, error){
			"AllowN":      func() (*redis_rate.Result, error) { return limiter.AllowN(ctx, "k", tc.limit, tc.n) },
			"AllowAtMost": func() (*redis_rate.Result, error) { return limiter.AllowAtMost(ctx, "k", tc.limit, tc.n) },
		} {
			if res, err := call(); err == nil || err.Error() != tc.want {
				t.Errorf("%s(%+v, %d) = %+v, %v\nwant %q", name, tc.limit, tc.n, res, err, tc.want)
			}
		}
	}
	if n := server.Do("DBSIZE"); n != int64(0) {
		t.Fatalf("%d keys after refused calls", n)
	}
}

// Each key's log is on the node that owns its slot, through the module or
// the library the limiter loads on every primary.
func TestCluster(t *testing.T) {
	for _, module := range []bool{true, false} {
		t.Run(map[bool]string{true: "module", false: "library"}[module], func(t *testing.T) {
			t.Parallel()
			nodes := redistest.StartCluster(t, module)
			limiter := redis_rate.NewLimiter(redistest.ClusterClient(t, nodes))
			redis_rate.SetClock(limiter, newClock(T).Now)
			limit := redis_rate.PerMinute(1)
			owners := map[int]bool{}
			for user := range 12 {
				key := fmt.Sprintf("user%d", user)
				res, err := limiter.Allow(ctx, key, limit)
				expect(t, limit, res, err, result{1, 0, -1, ms(60_000)})
				res, err = limiter.Allow(ctx, key, limit)
				expect(t, limit, res, err, result{0, 0, ms(60_000), ms(60_000)})
				owner := redistest.Owner(t, nodes, "rate:"+key)
				owners[owner.Port] = true
				expectEntries(t, owner, key, T)
			}
			if len(owners) != 3 {
				t.Fatalf("the logs are on %d nodes, not 3", len(owners))
			}
			if err := limiter.Reset(ctx, "user0"); err != nil {
				t.Fatal(err)
			}
			expectNoKey(t, redistest.Owner(t, nodes, "rate:user0"), "rate:user0")
		})
	}
}
