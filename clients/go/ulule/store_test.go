package ulule_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/ulule/limiter/v3"
	sredis "github.com/ulule/limiter/v3/drivers/store/redis"

	"github.com/redis-swl/redis-swl/clients/go/ulule"
)

// perMinute is 3 requests in any minute.
var perMinute = limiter.Rate{Period: time.Minute, Limit: 3}

// logKey is where the default prefix puts key's log.
// logKey is key's log under ulule's default prefix, for a rate of a
// minute.
func logKey(key string) string { return "limiter:" + key + ":swl:60000" }

func lctx(limit, remaining, reset int64, reached bool) limiter.Context {
	return limiter.Context{Limit: limit, Remaining: remaining, Reset: reset, Reached: reached}
}

func expect(t *testing.T, got limiter.Context, err error, want limiter.Context) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
}

func expectEntries(t *testing.T, s *server, key string, want ...int64) {
	t.Helper()
	if got := s.Entries(key); !slices.Equal(got, want) {
		t.Fatalf("entries %v, want %v", got, want)
	}
}

func TestGetAdmitsLimitRequestsInAnyPeriod(t *testing.T) {
	each(t, func(t *testing.T, s *server) {
		store, clock := s.storeAt(t)
		// Reset is when every entry has left the window: the newest's time
		// plus the period, in seconds rounded down.
		for _, step := range []struct {
			at   int64
			want limiter.Context
		}{
			{T, lctx(3, 2, S+60, false)},
			{T + 1_500, lctx(3, 1, S+61, false)},
			{T + 2_500, lctx(3, 0, S+62, false)},
			// Refused, and not recorded: the quota is still back at S+62.
			{T + 10_000, lctx(3, 0, S+62, true)},
			{T + 59_999, lctx(3, 0, S+62, true)},
			// The entry at T has left the window at T+60000 exactly.
			{T + 60_000, lctx(3, 0, S+120, false)},
			{T + 60_001, lctx(3, 0, S+120, true)},
		} {
			clock.Set(step.at)
			got, err := store.Get(ctx, "alice", perMinute)
			expect(t, got, err, step.want)
		}
		expectEntries(t, s, logKey("alice"), T+1_500, T+2_500, T+60_000)
	})
}

func TestPeekRecordsNothing(t *testing.T) {
	each(t, func(t *testing.T, s *server) {
		store, clock := s.storeAt(t)
		peek := func(at int64, want limiter.Context) {
			t.Helper()
			clock.Set(at)
			got, err := store.Peek(ctx, "alice", perMinute)
			expect(t, got, err, want)
		}
		get := func(at int64) {
			t.Helper()
			clock.Set(at)
			if _, err := store.Get(ctx, "alice", perMinute); err != nil {
				t.Fatal(err)
			}
		}
		// An empty log's whole quota is back now.
		peek(T+250, lctx(3, 3, S, false))
		get(T + 1_500)
		peek(T+2_000, lctx(3, 2, S+61, false))
		get(T + 2_000)
		peek(T+3_000, lctx(3, 1, S+62, false))
		get(T + 3_000)
		// Full: a Get now would be refused.
		peek(T+4_000, lctx(3, 0, S+63, true))
		peek(T+61_500, lctx(3, 1, S+63, false))
		peek(T+63_000, lctx(3, 3, S+63, false))
		expectEntries(t, s, logKey("alice"), T+1_500, T+2_000, T+3_000)
	})
}

func TestIncrementRecordsCountUnitsOrGivesThemBack(t *testing.T) {
	each(t, func(t *testing.T, s *server) {
		store, clock := s.storeAt(t)
		rate := limiter.Rate{Period: time.Minute, Limit: 5}
		increment := func(at, count int64, want limiter.Context) {
			t.Helper()
			clock.Set(at)
			got, err := store.Increment(ctx, "alice", count, rate)
			expect(t, got, err, want)
		}
		increment(T, 2, lctx(5, 3, S+60, false))
		// 4 do not fit in the 3 left, and are not recorded: 3 are still left.
		increment(T+1_000, 4, lctx(5, 3, S+60, true))
		increment(T+1_000, 3, lctx(5, 0, S+61, false))
		// 0 is a peek.
		increment(T+1_500, 0, lctx(5, 0, S+61, true))
		expectEntries(t, s, logKey("alice"), T, T, T+1_000, T+1_000, T+1_000)
		// A negative count gives back the newest units.
		increment(T+2_000, -2, lctx(5, 2, S+61, false))
		expectEntries(t, s, logKey("alice"), T, T, T+1_000)
		increment(T+2_000, -1, lctx(5, 3, S+60, false))
		increment(T+2_500, -10, lctx(5, 5, S+2, false))
		expectEntries(t, s, logKey("alice"))

		clock.Set(T + 3_000)
		if _, err := store.Increment(ctx, "alice", 100_001, rate); err == nil || !strings.Contains(err.Error(), "cost") {
			t.Fatalf("a cost above 100000: %v", err)
		}
	})
}

func TestResetDeletesTheLog(t *testing.T) {
	each(t, func(t *testing.T, s *server) {
		store, clock := s.storeAt(t)
		for range 3 {
			if _, err := store.Get(ctx, "alice", perMinute); err != nil {
				t.Fatal(err)
			}
		}
		clock.Set(T + 5_500)
		got, err := store.Reset(ctx, "alice", perMinute)
		expect(t, got, err, lctx(3, 3, S+5, false))
		if n := s.Do("EXISTS", logKey("alice")); n != int64(0) {
			t.Fatalf("EXISTS %v after a reset", n)
		}
		got, err = store.Get(ctx, "alice", perMinute)
		expect(t, got, err, lctx(3, 2, S+65, false))

		// A missing log, and a limit of 0, which admits nothing.
		got, err = store.Reset(ctx, "bob", limiter.Rate{Period: time.Minute, Limit: 0})
		expect(t, got, err, lctx(0, 0, S+5, true))
	})
}

// The key is ulule's (prefix:key) with ":swl:" and the period after it.
func TestKeysFollowUlulesPrefix(t *testing.T) {
	each(t, func(t *testing.T, s *server) {
		for _, prefix := range []string{"limiter", "api", ""} {
			store := s.store(t, limiter.StoreOptions{Prefix: prefix, MaxRetry: 7, CleanUpInterval: time.Hour})
			if _, err := store.Get(ctx, "alice", perMinute); err != nil {
				t.Fatal(err)
			}
			key := prefix + ":alice:swl:60000"
			want := map[bool]string{true: "zset", false: "string"}[s.setup.Encoding == "zset"]
			if got := s.Do("TYPE", key); got != want {
				t.Fatalf("TYPE %s is %v, want %s", key, got, want)
			}
		}

		store, err := ulule.NewStore(s.Client(nil))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := store.Get(ctx, "bob", perMinute); err != nil {
			t.Fatal(err)
		}
		if got := s.Do("EXISTS", "limiter:bob:swl:60000"); got != int64(1) {
			t.Fatalf("EXISTS limiter:bob:swl:60000 %v", got)
		}
	})
}

// During a switch, ulule's counters (strings) stay where they are, beside
// the logs: neither store fails on the other's key.
func TestUlulesRedisStoreBesideKeepsWorking(t *testing.T) {
	each(t, func(t *testing.T, s *server) {
		theirs, err := sredis.NewStore(s.Client(nil))
		if err != nil {
			t.Fatal(err)
		}
		ours, clock := s.storeAt(t)
		for _, step := range []struct {
			at   int64
			want limiter.Context
		}{
			{T, lctx(3, 2, S+60, false)},
			{T + 1_000, lctx(3, 1, S+61, false)},
			{T + 2_000, lctx(3, 0, S+62, false)},
			{T + 3_000, lctx(3, 0, S+62, true)},
		} {
			clock.Set(step.at)
			got, err := ours.Get(ctx, "alice", perMinute)
			expect(t, got, err, step.want)
			got, err = theirs.Get(ctx, "alice", perMinute)
			if err != nil || got.Remaining != step.want.Remaining || got.Reached != step.want.Reached {
				t.Fatalf("ulule's store: %+v %v", got, err)
			}
		}
		if got := s.Do("GET", "limiter:alice"); got != "4" {
			t.Fatalf("ulule's counter is %v", got)
		}
	})
}

// Without a clock of its own, the store's calls are made at the server's
// time, and Reset is read from the local time the reply came at.
func TestServerClock(t *testing.T) {
	each(t, func(t *testing.T, s *server) {
		store := s.store(t, limiter.StoreOptions{Prefix: "limiter"})
		between := func(got limiter.Context, err error, before, after time.Time, wait time.Duration) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
			low, high := before.Add(wait).Unix(), after.Add(wait).Unix()
			if got.Reset < low || got.Reset > high {
				t.Fatalf("Reset %d, not in [%d, %d]", got.Reset, low, high)
			}
		}
		before := time.Now()
		got, err := store.Get(ctx, "alice", perMinute)
		between(got, err, before, time.Now(), time.Minute)
		got, err = store.Peek(ctx, "alice", perMinute)
		between(got, err, before, time.Now(), time.Minute)
		entries := s.Entries(logKey("alice"))
		if len(entries) != 1 || entries[0] < before.UnixMilli()-1_000 || entries[0] > time.Now().UnixMilli()+1_000 {
			t.Fatalf("entries %v, the request was made at %d", entries, before.UnixMilli())
		}
	})
}

// A rate the log cannot hold fails, recording nothing.
func TestRatesTheLogCannotHoldFail(t *testing.T) {
	each(t, func(t *testing.T, s *server) {
		store, _ := s.storeAt(t)
		for _, rate := range []limiter.Rate{
			{Period: 1500 * time.Microsecond, Limit: 3},
			{Period: 0, Limit: 3},
			{Period: time.Minute, Limit: -1},
		} {
			if got, err := store.Get(ctx, "alice", rate); err == nil {
				t.Fatalf("%+v: %+v", rate, got)
			}
			if got, err := store.Peek(ctx, "alice", rate); err == nil {
				t.Fatalf("%+v: %+v", rate, got)
			}
		}
		if got := s.Do("EXISTS", logKey("alice")); got != int64(0) {
			t.Fatal("a log was written")
		}
	})
}

func TestConstructorsRefuseNil(t *testing.T) {
	if store, err := ulule.NewStoreWithOptions(nil, limiter.StoreOptions{}); err == nil {
		t.Fatalf("%v", store)
	}
	if store, err := ulule.NewStore(redis.UniversalClient(nil)); err == nil {
		t.Fatalf("%v", store)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("NewStoreFromClient(nil) did not panic")
		}
	}()
	ulule.NewStoreFromClient(nil, limiter.StoreOptions{})
}

// Two rates on one key (ten in 1.5 s, three an hour) each hold: each has
// a log of its own, which the other's checks do not trim. (The shorter
// log lives 1.5 s from its last check: long enough for the reads after it
// on a busy machine.)
func TestTwoRatesOnOneKeyEachHold(t *testing.T) {
	each(t, func(t *testing.T, s *server) {
		store, clock := s.storeAt(t)
		hourly := limiter.Rate{Period: time.Hour, Limit: 3}
		burst := limiter.Rate{Period: 1_500 * time.Millisecond, Limit: 10}
		for i := range int64(5) {
			clock.Set(T + 1_000*i)
			if _, err := store.Get(ctx, "ip", burst); err != nil {
				t.Fatal(err)
			}
			got, err := store.Get(ctx, "ip", hourly)
			if i < 3 {
				expect(t, got, err, lctx(3, 2-i, S+3_600+i, false))
			} else {
				expect(t, got, err, lctx(3, 0, S+3_602, true))
			}
		}
		expectEntries(t, s, "limiter:ip:swl:3600000", T, T+1_000, T+2_000)
		expectEntries(t, s, "limiter:ip:swl:1500", T+3_000, T+4_000)
	})
}
