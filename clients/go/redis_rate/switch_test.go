package redis_rate_test

import (
	"strings"
	"testing"
	"time"

	v10 "github.com/go-redis/redis_rate/v10"

	"github.com/redis-swl/redis-swl/clients/go/internal/redistest"
	"github.com/redis-swl/redis-swl/clients/go/redis_rate"
)

// The same calls, spelled the same way, through go-redis/redis_rate v10
// and through this package, on the same server and its clock: five a
// minute, the first five allowed with the same Remaining and RetryAfter,
// the sixth denied with a wait of at most the minute. Only the import
// differs. Then the documented differences: ResetAfter, and the keys,
// which each refuses where the other wrote them.
func TestSameCallsThroughRedisRateV10AndThisPackage(t *testing.T) {
	each(t, func(t *testing.T, server *redistest.Server) {
		rdb := server.Client(nil)
		theirs := v10.NewLimiter(rdb)
		ours := redis_rate.NewLimiter(rdb)

		type outcome struct{ allowed, remaining int }
		var got [2][]outcome
		var lastRetry [2]time.Duration
		var firstReset [2]time.Duration
		for i := range 6 {
			res, err := theirs.Allow(ctx, "project:v10", v10.PerMinute(5))
			if err != nil {
				t.Fatal(err)
			}
			got[0] = append(got[0], outcome{res.Allowed, res.Remaining})
			lastRetry[0] = res.RetryAfter
			if i == 0 {
				firstReset[0] = res.ResetAfter
			} else if i < 5 && res.RetryAfter != -1 {
				t.Fatalf("redis_rate: RetryAfter %v when allowed", res.RetryAfter)
			}

			ours, err := ours.Allow(ctx, "project:swl", redis_rate.PerMinute(5))
			if err != nil {
				t.Fatal(err)
			}
			got[1] = append(got[1], outcome{ours.Allowed, ours.Remaining})
			lastRetry[1] = ours.RetryAfter
			if i == 0 {
				firstReset[1] = ours.ResetAfter
			} else if i < 5 && ours.RetryAfter != -1 {
				t.Fatalf("redis-swl: RetryAfter %v when allowed", ours.RetryAfter)
			}
		}
		want := []outcome{{1, 4}, {1, 3}, {1, 2}, {1, 1}, {1, 0}, {0, 0}}
		for i, name := range []string{"redis_rate v10", "redis-swl"} {
			if !equal(got[i], want) {
				t.Errorf("%s: %v, want %v", name, got[i], want)
			}
			if lastRetry[i] <= 0 || lastRetry[i] > time.Minute {
				t.Errorf("%s: denied with RetryAfter %v, not within the minute", name, lastRetry[i])
			}
		}

		// GCRA: one event is one emission interval (12s) to undo; the
		// log: the event stays a whole window.
		// (in float seconds: 12s give or take a rounding)
		if d := firstReset[0] - 12*time.Second; d < -time.Millisecond || d > time.Millisecond {
			t.Errorf("redis_rate v10: ResetAfter %v after one event, not 12s", firstReset[0])
		}
		if firstReset[1] != time.Minute {
			t.Errorf("redis-swl: ResetAfter %v after one event, not 1m", firstReset[1])
		}
		if typ := server.Do("TYPE", "rate:project:v10"); typ != "string" {
			t.Errorf("redis_rate v10's key is a %v", typ)
		}
		if n := len(server.Entries("rate:project:swl")); n != 5 {
			t.Errorf("%d entries in redis-swl's log, not 5", n)
		}

		_, err := ours.Allow(ctx, "project:v10", redis_rate.PerMinute(5))
		if want := `redis_rate: allow "project:v10": WRONGTYPE Operation against a key holding the wrong kind of value`; err == nil || err.Error() != want {
			t.Errorf("our Allow on redis_rate v10's key: %v, want %q", err, want)
		}
		// redis_rate v10's script reads a sorted set with GET, and a
		// compact log as a number: its error's text (which names the
		// script's lines) is the server's, only its start is pinned.
		theirError := map[any]string{
			"zset":   "WRONGTYPE Operation against a key holding the wrong kind of value",
			"string": "ERR user_script:",
		}[server.Do("TYPE", "rate:project:swl")]
		if _, err := theirs.Allow(ctx, "project:swl", v10.PerMinute(5)); err == nil || !strings.HasPrefix(err.Error(), theirError) {
			t.Errorf("redis_rate v10's Allow on our key: %v, want %q...", err, theirError)
		}
	})
}

func equal[E comparable](a, b []E) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
