package golimiter_test

// Real redis-server processes for the tests (internal/redistest), and
// what the tests read of them.

import (
	"context"
	"slices"
	"testing"
	"time"

	swl "github.com/redis-swl/redis-swl/clients/go"
	"github.com/redis-swl/redis-swl/clients/go/golimiter"
	"github.com/redis-swl/redis-swl/clients/go/internal/redistest"
)

var ctx = context.Background()

// T is the tests' time: 2023-11-14, Unix milliseconds.
const T int64 = 1_700_000_000_000

// setups are the module in each encoding, and the function library,
// which the store loads, creating compact logs.
var setups = []redistest.Setup{{Module: true, Encoding: "zset"}, {Module: true, Encoding: "compact"}, {Module: false, Encoding: "compact"}}

// each runs test once per setup, each on a server of its own.
func each(t *testing.T, test func(t *testing.T, server *redistest.Server)) {
	redistest.Each(t, setups, func(t *testing.T, _ redistest.Setup, server *redistest.Server) { test(t, server) })
}

// clock is a test's time, moved by hand.
type clock = redistest.Clock

func newClock(ms int64) *clock { return redistest.NewClock(ms) }

// newStore is a store over a go-redis client of server with default
// settings, at clock's time, closed when the test ends.
func newStore(t *testing.T, server *redistest.Server, c *clock, config golimiter.Config) *golimiter.Store {
	t.Helper()
	if c != nil {
		config.Now = c.Now
	}
	store, err := golimiter.New(swl.GoRedis(server.Client(nil)), &config)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close(ctx) })
	return store
}

// take is what Take returns, reset as Unix milliseconds.
type take struct {
	tokens, remaining uint64
	resetMs           int64
	ok                bool
}

func expectTake(t *testing.T, store *golimiter.Store, key string, want take) {
	t.Helper()
	tokens, remaining, reset, ok, err := store.Take(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	got := take{tokens, remaining, 0, ok}
	if reset%uint64(time.Millisecond) == 0 {
		got.resetMs = int64(reset / uint64(time.Millisecond))
	} else {
		t.Errorf("reset %d is not a whole millisecond", reset)
	}
	if got != want {
		t.Fatalf("Take(%q) = %+v, want %+v", key, got, want)
	}
}

func expectGet(t *testing.T, store *golimiter.Store, key string, tokens, remaining uint64) {
	t.Helper()
	gotTokens, gotRemaining, err := store.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if gotTokens != tokens || gotRemaining != remaining {
		t.Fatalf("Get(%q) = %d, %d, want %d, %d", key, gotTokens, gotRemaining, tokens, remaining)
	}
}

// expectEntries checks the log of a store's key (the default prefix), as
// the server lists it: its requests' times, oldest first.
func expectEntries(t *testing.T, server *redistest.Server, key string, want ...int64) {
	t.Helper()
	if got := server.Entries(golimiter.DefaultPrefix + "log:" + key); !slices.Equal(got, want) {
		t.Fatalf("entries of %q: %v, want %v", key, got, want)
	}
}

// times is n times t.
func times(n int, t int64) []int64 {
	return slices.Repeat([]int64{t}, n)
}
