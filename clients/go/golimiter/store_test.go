package golimiter_test

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sethvargo/go-limiter"

	swl "github.com/redis-swl/redis-swl/clients/go"
	"github.com/redis-swl/redis-swl/clients/go/golimiter"
	"github.com/redis-swl/redis-swl/clients/go/internal/redistest"
)

// Tokens requests pass in any Interval, and each one's token comes back
// exactly an Interval after it: at T+Interval-1ms the request at T still
// counts, at T+Interval it has left.
func TestTakeAdmitsTokensInAnyIntervalThenDenies(t *testing.T) {
	each(t, func(t *testing.T, server *redistest.Server) {
		c := newClock(T)
		store := newStore(t, server, c, golimiter.Config{Tokens: 3, Interval: 10 * time.Second})

		expectTake(t, store, "alice", take{3, 2, T + 10_000, true})
		c.Set(T + 2_000)
		expectTake(t, store, "alice", take{3, 1, T + 12_000, true})
		c.Set(T + 4_000)
		expectTake(t, store, "alice", take{3, 0, T + 14_000, true})
		expectEntries(t, server, "alice", T, T+2_000, T+4_000)

		// Denied: it would pass once the request at T leaves.
		c.Set(T + 5_000)
		expectTake(t, store, "alice", take{3, 0, T + 10_000, false})
		c.Set(T + 9_999)
		expectTake(t, store, "alice", take{3, 0, T + 10_000, false})
		expectEntries(t, server, "alice", T, T+2_000, T+4_000)

		c.Set(T + 10_000)
		expectTake(t, store, "alice", take{3, 0, T + 20_000, true})
		expectEntries(t, server, "alice", T+2_000, T+4_000, T+10_000)
		expectEntries(t, server, "bob")
	})
}

// memorystore's TestStore_Exercise, step by step, on a sliding window:
// the same calls and, where the algorithms agree, the same values. Two
// steps differ, as documented: Get of a key never seen answers its limit,
// all of it left (memorystore: 0, 0), and Burst gives back requests the
// window holds rather than adding tokens above the limit (memorystore: 14
// remaining).
func TestStoreContractOfMemorystoresExercise(t *testing.T) {
	each(t, func(t *testing.T, server *redistest.Server) {
		store := newStore(t, server, newClock(T), golimiter.Config{Tokens: 5, Interval: 3 * time.Second})
		key := "exercise"

		expectGet(t, store, key, 5, 5)
		expectTake(t, store, key, take{5, 4, T + 3_000, true})
		expectGet(t, store, key, 5, 4)

		if err := store.Set(ctx, key, 11, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		// Set fills the bucket: the window is emptied.
		expectEntries(t, server, key)
		expectGet(t, store, key, 11, 11)
		expectTake(t, store, key, take{11, 10, T + 5_000, true})
		expectGet(t, store, key, 11, 10)

		if err := store.Burst(ctx, key, 5); err != nil {
			t.Fatal(err)
		}
		// The one request in the window was given back, no more.
		expectEntries(t, server, key)
		expectGet(t, store, key, 11, 11)
		expectTake(t, store, key, take{11, 10, T + 5_000, true})
		expectGet(t, store, key, 11, 10)
		expectEntries(t, server, key, T)
	})
}

// memorystore's TestStore_Take: twice the tokens taken at once, from as
// many goroutines, pass exactly Tokens times, with every remaining count
// from Tokens-1 down to 0 once; and after an Interval one passes again.
func TestConcurrentTakesAdmitExactlyTokens(t *testing.T) {
	cases := []struct {
		name     string
		tokens   uint64
		interval time.Duration
	}{
		{"millisecond", 5, 500 * time.Millisecond},
		{"second", 10, time.Second},
	}
	each(t, func(t *testing.T, server *redistest.Server) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				c := newClock(T)
				store := newStore(t, server, c, golimiter.Config{Tokens: tc.tokens, Interval: tc.interval})
				key := "concurrent-" + tc.name
				reset := uint64(time.UnixMilli(T).Add(tc.interval).UnixNano())

				type result struct {
					tokens, remaining, reset uint64
					ok                       bool
					err                      error
				}
				results := make([]result, 2*tc.tokens)
				var wg sync.WaitGroup
				for i := range results {
					wg.Go(func() {
						r := &results[i]
						r.tokens, r.remaining, r.reset, r.ok, r.err = store.Take(ctx, key)
					})
				}
				wg.Wait()

				var admitted []uint64
				for _, r := range results {
					if r.err != nil {
						t.Fatal(r.err)
					}
					if r.tokens != tc.tokens || r.reset != reset {
						t.Fatalf("%+v: want tokens %d and reset %d", r, tc.tokens, reset)
					}
					if r.ok {
						admitted = append(admitted, r.remaining)
					} else if r.remaining != 0 {
						t.Fatalf("denied with %d remaining", r.remaining)
					}
				}
				slices.Sort(admitted)
				want := make([]uint64, tc.tokens)
				for i := range want {
					want[i] = uint64(i)
				}
				if !slices.Equal(admitted, want) {
					t.Fatalf("admitted with remaining %v, want %v", admitted, want)
				}
				expectEntries(t, server, key, times(int(tc.tokens), T)...)

				later := T + tc.interval.Milliseconds()
				c.Set(later)
				expectTake(t, store, key, take{tc.tokens, tc.tokens - 1, later + tc.interval.Milliseconds(), true})
				expectEntries(t, server, key, later)
			})
		}
	})
}

// A limit Set gives a key is in Redis, so another store (another process)
// counts the key by it; it expires OverrideTTL after the Set, and a Set
// empties the key's window.
func TestSetIsSeenByEveryStoreSharingTheRedis(t *testing.T) {
	each(t, func(t *testing.T, server *redistest.Server) {
		c := newClock(T)
		config := golimiter.Config{Tokens: 5, Interval: time.Second, OverrideTTL: time.Hour}
		setter := newStore(t, server, c, config)
		taker := newStore(t, server, c, config)

		expectTake(t, taker, "carol", take{5, 4, T + 1_000, true})
		if err := setter.Set(ctx, "carol", 2, time.Minute); err != nil {
			t.Fatal(err)
		}
		if got := server.Do("GET", "golimiter:limit:carol"); got != "2 60000" {
			t.Fatalf("the limit is stored as %q", got)
		}
		if ttl := server.Do("PTTL", "golimiter:limit:carol").(int64); ttl <= 0 || ttl > time.Hour.Milliseconds() {
			t.Fatalf("the limit expires in %dms, not within the hour", ttl)
		}
		expectEntries(t, server, "carol")

		expectTake(t, taker, "carol", take{2, 1, T + 60_000, true})
		expectTake(t, taker, "carol", take{2, 0, T + 60_000, true})
		expectTake(t, taker, "carol", take{2, 0, T + 60_000, false})
		expectGet(t, setter, "carol", 2, 0)
		// Other keys keep the store's limit.
		expectTake(t, taker, "dave", take{5, 4, T + 1_000, true})

		// A store with another prefix has other keys, and other limits.
		other := newStore(t, server, c, golimiter.Config{Tokens: 5, Interval: time.Second, Prefix: "rl:"})
		expectTake(t, other, "carol", take{5, 4, T + 1_000, true})
		if got := server.Entries("rl:log:carol"); !slices.Equal(got, []int64{T}) {
			t.Fatalf("entries of rl:log:carol: %v", got)
		}
	})
}

// A limit of 0 denies every request and records nothing; the reset is an
// interval away, since no wait would admit one.
func TestSetToZeroTokensDeniesEveryRequest(t *testing.T) {
	each(t, func(t *testing.T, server *redistest.Server) {
		store := newStore(t, server, newClock(T), golimiter.Config{Tokens: 5, Interval: time.Second})
		if err := store.Set(ctx, "mallory", 0, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		expectTake(t, store, "mallory", take{0, 0, T + 10_000, false})
		expectGet(t, store, "mallory", 0, 0)
		if n := server.Do("EXISTS", "golimiter:log:mallory"); n != int64(0) {
			t.Fatal("a denied request created the log")
		}
	})
}

// Burst gives back the newest requests in the window, never more than it
// holds: an emptied log is deleted, and a missing one is not created.
func TestBurstGivesBackTheNewestRequests(t *testing.T) {
	each(t, func(t *testing.T, server *redistest.Server) {
		c := newClock(T)
		store := newStore(t, server, c, golimiter.Config{Tokens: 3, Interval: 10 * time.Second})
		for _, at := range []int64{T, T + 1_000, T + 2_000} {
			c.Set(at)
			expectTake(t, store, "erin", take{3, uint64(2 - (at-T)/1_000), at + 10_000, true})
		}
		if err := store.Burst(ctx, "erin", 2); err != nil {
			t.Fatal(err)
		}
		expectEntries(t, server, "erin", T)
		expectGet(t, store, "erin", 3, 2)

		if err := store.Burst(ctx, "erin", 0); err != nil {
			t.Fatal(err)
		}
		expectEntries(t, server, "erin", T)

		if err := store.Burst(ctx, "erin", 10); err != nil {
			t.Fatal(err)
		}
		for _, key := range []string{"erin", "frank"} {
			if err := store.Burst(ctx, key, 1); err != nil {
				t.Fatal(err)
			}
			if n := server.Do("EXISTS", "golimiter:log:"+key); n != int64(0) {
				t.Fatalf("%s's log is there after its requests were given back", key)
			}
		}
		expectGet(t, store, "erin", 3, 3)
	})
}

// A refund gives back at most 100,000 units, so a larger Burst is given
// back in parts, and stops once the window is empty.
func TestBurstAboveOneRefundIsGivenBackInParts(t *testing.T) {
	each(t, func(t *testing.T, server *redistest.Server) {
		store := newStore(t, server, newClock(T), golimiter.Config{Tokens: 250_000, Interval: 10 * time.Second})
		recorder := swl.New(swl.GoRedis(server.Client(nil)))
		for range 2 {
			v, err := recorder.Check(ctx, "golimiter:log:big", 10*time.Second, 250_000, swl.Cost(100_000), swl.NowMs(T))
			if err != nil || !v.Allowed {
				t.Fatalf("%+v %v", v, err)
			}
		}
		if err := store.Burst(ctx, "big", 150_000); err != nil {
			t.Fatal(err)
		}
		expectGet(t, store, "big", 250_000, 200_000)
		if n := len(server.Entries("golimiter:log:big")); n != 50_000 {
			t.Fatalf("%d entries left, not 50000", n)
		}
		if err := store.Burst(ctx, "big", math.MaxUint64); err != nil {
			t.Fatal(err)
		}
		if n := server.Do("EXISTS", "golimiter:log:big"); n != int64(0) {
			t.Fatal("the log is there after every request was given back")
		}
		// 100,000 and 50,000, then 100,000 that emptied the log.
		if calls := server.Succeeded("swl.refund"); server.Module && calls != 3 {
			t.Fatalf("%d refunds, not 3", calls)
		}
	})
}

// With no clock given, the server's decides: the request is recorded at
// its time, and the reset is this process's clock plus the wait.
func TestDefaultsAndTheServersClock(t *testing.T) {
	server := redistest.Start(t, true, "compact")
	store, err := golimiter.New(swl.GoRedis(server.Client(nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	tokens, remaining, reset, ok, err := store.Take(ctx, "grace")
	after := time.Now()
	if err != nil || tokens != 1 || remaining != 0 || !ok {
		t.Fatalf("Take = %d, %d, %v, %v", tokens, remaining, ok, err)
	}
	if low, high := before.Add(time.Second), after.Add(time.Second); reset < uint64(low.UnixNano()) || reset > uint64(high.UnixNano()) {
		t.Fatalf("reset %d is not a second after the call, [%d, %d]", reset, low.UnixNano(), high.UnixNano())
	}
	entries := server.Entries("golimiter:log:grace")
	if len(entries) != 1 || entries[0] < before.UnixMilli() || entries[0] > after.UnixMilli() {
		t.Fatalf("entries %v, not one within [%d, %d]", entries, before.UnixMilli(), after.UnixMilli())
	}

	before = time.Now()
	_, remaining, reset, ok, err = store.Take(ctx, "grace")
	after = time.Now()
	if err != nil || remaining != 0 || ok {
		t.Fatalf("the second Take: %d, %v, %v", remaining, ok, err)
	}
	// It would pass when the first leaves, a second after it was recorded
	// (give or take the reply's time and the milliseconds the server
	// rounds down to).
	due := time.UnixMilli(entries[0] + 1_000)
	if low, high := due, due.Add(after.Sub(before)+time.Millisecond); reset < uint64(low.UnixNano()) || reset > uint64(high.UnixNano()) {
		t.Fatalf("reset %d is not when the first request leaves, [%d, %d]", reset, low.UnixNano(), high.UnixNano())
	}
}

// Intervals the module cannot count in, and limits above its largest, are
// refused before anything is sent.
func TestLimitsOutsideTheModulesRangeAreRefused(t *testing.T) {
	for _, tc := range []struct {
		config golimiter.Config
		want   string
	}{
		{golimiter.Config{Interval: 1500 * time.Microsecond}, "golimiter: an interval must be a whole number of milliseconds, at least 1ms, not 1.5ms"},
		{golimiter.Config{Interval: -time.Second}, "golimiter: an interval must be a whole number of milliseconds, at least 1ms, not -1s"},
		{golimiter.Config{Tokens: 1 << 53}, "golimiter: tokens must be at most 9007199254740991, not 9007199254740992"},
		{golimiter.Config{OverrideTTL: time.Microsecond}, "golimiter: OverrideTTL must be at least 1ms, not 1µs"},
	} {
		if _, err := golimiter.New(nil, &tc.config); err == nil || err.Error() != tc.want {
			t.Errorf("New(%+v): %v, want %q", tc.config, err, tc.want)
		}
	}

	if _, err := golimiter.New(nil, nil); err == nil || err.Error() != "golimiter: no Doer to send commands through" {
		t.Errorf("New(nil, nil): %v", err)
	}

	server := redistest.Start(t, true, "compact")
	store := newStore(t, server, newClock(T), golimiter.Config{})
	for _, tc := range []struct {
		tokens   uint64
		interval time.Duration
		want     string
	}{
		{1, 0, "golimiter: an interval must be a whole number of milliseconds, at least 1ms, not 0s"},
		{1, time.Second + time.Nanosecond, "golimiter: an interval must be a whole number of milliseconds, at least 1ms, not 1.000000001s"},
		{1<<53 + 1, time.Second, "golimiter: tokens must be at most 9007199254740991, not 9007199254740993"},
	} {
		if err := store.Set(ctx, "heidi", tc.tokens, tc.interval); err == nil || err.Error() != tc.want {
			t.Errorf("Set(%d, %v): %v, want %q", tc.tokens, tc.interval, err, tc.want)
		}
	}
	if n := server.Do("DBSIZE"); n != int64(0) {
		t.Fatalf("%d keys after refused calls", n)
	}
}

// A key's limit another tool overwrote is an error, not the default.
func TestALimitSetDidNotWriteIsAnError(t *testing.T) {
	server := redistest.Start(t, true, "compact")
	store := newStore(t, server, newClock(T), golimiter.Config{})
	server.Do("SET", "golimiter:limit:ivan", "60 per minute")
	_, _, _, _, err := store.Take(ctx, "ivan")
	if want := `golimiter: golimiter:limit:ivan holds "60 per minute", not a limit Set wrote`; err == nil || err.Error() != want {
		t.Fatalf("%v, want %q", err, want)
	}
	expectEntries(t, server, "ivan")
}

// After Close every call fails with go-limiter's ErrStopped and returns
// zero values, and sends nothing; the Redis client is the caller's, and
// stays open.
func TestClosedStoreFailsWithErrStopped(t *testing.T) {
	server := redistest.Start(t, true, "compact")
	rdb := server.Client(nil)
	store, err := golimiter.New(swl.GoRedis(rdb), &golimiter.Config{Now: newClock(T).Now})
	if err != nil {
		t.Fatal(err)
	}
	expectTake(t, store, "judy", take{1, 0, T + 1_000, true})
	for range 2 {
		if err := store.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	tokens, remaining, reset, ok, err := store.Take(ctx, "judy")
	if tokens != 0 || remaining != 0 || reset != 0 || ok || !errors.Is(err, limiter.ErrStopped) {
		t.Fatalf("Take after Close: %d, %d, %d, %v, %v", tokens, remaining, reset, ok, err)
	}
	tokens, remaining, err = store.Get(ctx, "judy")
	if tokens != 0 || remaining != 0 || !errors.Is(err, limiter.ErrStopped) {
		t.Fatalf("Get after Close: %d, %d, %v", tokens, remaining, err)
	}
	if err := store.Set(ctx, "judy", 5, time.Second); !errors.Is(err, limiter.ErrStopped) {
		t.Fatalf("Set after Close: %v", err)
	}
	if err := store.Burst(ctx, "judy", 1); !errors.Is(err, limiter.ErrStopped) {
		t.Fatalf("Burst after Close: %v", err)
	}
	expectEntries(t, server, "judy", T)
	if n := server.Do("EXISTS", "golimiter:limit:judy"); n != int64(0) {
		t.Fatal("Set after Close wrote a limit")
	}
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatalf("the Redis client was closed: %v", err)
	}
}

// Each key's log and limit are on the node that owns their slot, and a
// key's limit is read there whichever node holds its log.
func TestCluster(t *testing.T) {
	for _, module := range []bool{true, false} {
		t.Run(map[bool]string{true: "module", false: "library"}[module], func(t *testing.T) {
			t.Parallel()
			nodes := redistest.StartCluster(t, module)
			c := newClock(T)
			store, err := golimiter.New(swl.GoRedis(redistest.ClusterClient(t, nodes)),
				&golimiter.Config{Tokens: 1, Interval: time.Minute, Now: c.Now})
			if err != nil {
				t.Fatal(err)
			}
			owners := map[int]bool{}
			for user := range 12 {
				key := fmt.Sprintf("user%d", user)
				expectTake(t, store, key, take{1, 0, T + 60_000, true})
				expectTake(t, store, key, take{1, 0, T + 60_000, false})
				owner := redistest.Owner(t, nodes, golimiter.DefaultPrefix+"log:"+key)
				owners[owner.Port] = true
				expectEntries(t, owner, key, T)
			}
			if len(owners) != 3 {
				t.Fatalf("the logs are on %d nodes, not 3", len(owners))
			}

			if err := store.Set(ctx, "user0", 2, time.Minute); err != nil {
				t.Fatal(err)
			}
			limitOwner := redistest.Owner(t, nodes, "golimiter:limit:user0")
			if got := limitOwner.Do("GET", "golimiter:limit:user0"); got != "2 60000" {
				t.Fatalf("the limit is stored as %q", got)
			}
			expectTake(t, store, "user0", take{2, 1, T + 60_000, true})
			expectTake(t, store, "user0", take{2, 0, T + 60_000, true})
			expectTake(t, store, "user0", take{2, 0, T + 60_000, false})
			expectEntries(t, redistest.Owner(t, nodes, "golimiter:log:user0"), "user0", T, T)
		})
	}
}

// A client that picks its key cannot reach another key's limit: logs and
// limits have a namespace each.
func TestAKeyNeverNamesAnotherKeysLimit(t *testing.T) {
	each(t, func(t *testing.T, server *redistest.Server) {
		store := newStore(t, server, newClock(T), golimiter.Config{Tokens: 2, Interval: time.Minute})
		for _, key := range []string{"limit:bob", "bob:limit", "log:bob"} {
			expectTake(t, store, key, take{2, 1, T + 60_000, true})
		}
		expectTake(t, store, "bob", take{2, 1, T + 60_000, true})
		if got := server.Do("EXISTS", "golimiter:limit:bob"); got != int64(0) {
			t.Fatalf("EXISTS golimiter:limit:bob: %v", got)
		}
		expectEntries(t, server, "limit:bob", T)
		expectEntries(t, server, "bob", T)
	})
}
