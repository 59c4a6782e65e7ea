package redis_rate_test

// Real redis-server processes for the tests (internal/redistest), and
// what the tests read of them.

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/redis-swl/redis-swl/clients/go/internal/redistest"
	"github.com/redis-swl/redis-swl/clients/go/redis_rate"
)

var ctx = context.Background()

// T is the tests' time: 2023-11-14, Unix milliseconds.
const T int64 = 1_700_000_000_000

// setups are the module in each encoding, and the function library,
// which the limiter loads, creating compact logs.
var setups = []redistest.Setup{{Module: true, Encoding: "zset"}, {Module: true, Encoding: "compact"}, {Module: false, Encoding: "compact"}}

// each runs test once per setup, each on a server of its own.
func each(t *testing.T, test func(t *testing.T, server *redistest.Server)) {
	redistest.Each(t, setups, func(t *testing.T, _ redistest.Setup, server *redistest.Server) { test(t, server) })
}

// clock is a test's time, moved by hand.
type clock = redistest.Clock

func newClock(ms int64) *clock { return redistest.NewClock(ms) }

// newLimiter is a limiter over a go-redis client of server with default
// settings, at clock's time.
func newLimiter(server *redistest.Server, c *clock) *redis_rate.Limiter {
	limiter := redis_rate.NewLimiter(server.Client(nil))
	redis_rate.SetClock(limiter, c.Now)
	return limiter
}

// result is a Result without its Limit, waits in milliseconds.
type result struct {
	allowed, remaining     int
	retryAfter, resetAfter time.Duration
}

// ms is n milliseconds; -1 stays redis_rate's -1 (a nanosecond).
func ms(n int64) time.Duration {
	if n == -1 {
		return -1
	}
	return time.Duration(n) * time.Millisecond
}

func expect(t *testing.T, limit redis_rate.Limit, res *redis_rate.Result, err error, want result) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	if res.Limit != limit {
		t.Fatalf("the result's limit is %v, not %v", res.Limit, limit)
	}
	got := result{res.Allowed, res.Remaining, res.RetryAfter, res.ResetAfter}
	if got != want {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
}

// expectEntries checks the log of a limiter's key (rate:key), as the
// server lists it: its events' times, oldest first.
func expectEntries(t *testing.T, server *redistest.Server, key string, want ...int64) {
	t.Helper()
	if got := server.Entries("rate:" + key); !slices.Equal(got, want) {
		t.Fatalf("entries of %q: %v, want %v", key, got, want)
	}
}

func expectNoKey(t *testing.T, server *redistest.Server, key string) {
	t.Helper()
	if n := server.Do("EXISTS", key); n != int64(0) {
		t.Fatalf("%s exists", key)
	}
}

// times is n times t.
func times(n int, t int64) []int64 {
	return slices.Repeat([]int64{t}, n)
}
