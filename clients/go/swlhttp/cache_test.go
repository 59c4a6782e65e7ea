package swlhttp

// The denial cache on its own, on explicit times: what it answers, until
// when, and what it forgets.

import (
	"testing"
	"time"

	swl "github.com/redis-swl/redis-swl/clients/go"
)

// base is the tests' time: 2023-11-14, Unix milliseconds.
const base int64 = 1_700_000_000_000

func at(ms int64) time.Time { return time.UnixMilli(base + ms) }

func verdictOf(allowed bool, limit, remaining, retryMs, resetMs, windowMs int64) swl.Verdict {
	return swl.Verdict{
		Allowed: allowed, Limit: limit, Remaining: remaining,
		RetryAfter: milliseconds(retryMs), ResetAfter: milliseconds(resetMs), Window: milliseconds(windowMs),
	}
}

func denied(retryMs, resetMs int64) swl.Verdict {
	return verdictOf(false, 5, 0, retryMs, resetMs, 1000)
}

func expectAnswer(t *testing.T, c *denialCache, key string, now time.Time, want swl.Verdict, ok bool) {
	t.Helper()
	got, found := c.answer(key, now)
	if found != ok || got != want {
		t.Fatalf("%s at %v: %+v (%v), not %+v (%v)", key, now.Sub(at(0)), got, found, want, ok)
	}
}

func TestTheCacheAnswersADenialLessTheTimeSinceUntilItsWaitHasPassed(t *testing.T) {
	c := newDenialCache(100)
	ticket := c.ticket()
	c.keep("k", denied(1500, 1800), ticket, at(0))
	expectAnswer(t, c, "k", at(0), denied(1500, 1800), true)
	expectAnswer(t, c, "k", at(400), denied(1100, 1400), true)
	// A wait in part of a millisecond is a whole one.
	expectAnswer(t, c, "k", at(1499).Add(time.Microsecond), denied(1, 301), true)
	expectAnswer(t, c, "k", at(1500), swl.Verdict{}, false)
	expectAnswer(t, c, "other", at(0), swl.Verdict{}, false)
	if c.len() != 0 {
		t.Fatalf("%d keys kept after the wait", c.len())
	}
}

func TestTheCacheKeepsNoAdmissionAndNoDenialWaitingCannotEnd(t *testing.T) {
	c := newDenialCache(100)
	c.keep("admitted", verdictOf(true, 5, 4, -1, 1000, 1000), c.ticket(), at(0))
	c.keep("never", denied(-1, 1000), c.ticket(), at(0))
	expectAnswer(t, c, "admitted", at(1), swl.Verdict{}, false)
	expectAnswer(t, c, "never", at(1), swl.Verdict{}, false)
	// An admission after a denial drops the denial.
	c.keep("k", denied(1000, 1000), c.ticket(), at(0))
	c.keep("k", verdictOf(true, 5, 0, -1, 1000, 1000), c.ticket(), at(10))
	expectAnswer(t, c, "k", at(20), swl.Verdict{}, false)
}

func TestAForgetWinsOverACheckSentBeforeIt(t *testing.T) {
	c := newDenialCache(100)
	ticket := c.ticket()
	c.forget("k") // a reset, while the check was out
	c.keep("k", denied(1000, 1000), ticket, at(0))
	expectAnswer(t, c, "k", at(1), swl.Verdict{}, false)
	// A check sent after the forget is kept.
	c.keep("k", denied(1000, 1000), c.ticket(), at(2))
	expectAnswer(t, c, "k", at(2), denied(1000, 1000), true)
	c.forget("k")
	expectAnswer(t, c, "k", at(3), swl.Verdict{}, false)
}

func TestTheCacheForgetsTheLeastRecentlyUsedKeyFirst(t *testing.T) {
	c := newDenialCache(2)
	for _, key := range []string{"a", "b"} {
		c.keep(key, denied(1000, 1000), c.ticket(), at(0))
	}
	expectAnswer(t, c, "a", at(1), denied(999, 999), true) // a is now the most recent
	c.keep("c", denied(1000, 1000), c.ticket(), at(2))
	expectAnswer(t, c, "b", at(3), swl.Verdict{}, false)
	expectAnswer(t, c, "a", at(3), denied(997, 997), true)
	expectAnswer(t, c, "c", at(3), denied(999, 999), true)
	// A ticket older than the forget of a key no longer remembered keeps
	// nothing, for any key: the cache cannot tell which.
	ticket := c.ticket()
	c.forget("d")
	c.forget("e")
	c.forget("f") // d, forgotten, is no longer remembered
	c.keep("d", denied(1000, 1000), ticket, at(4))
	expectAnswer(t, c, "d", at(5), swl.Verdict{}, false)
}

func TestACacheOfNoKeysIsOff(t *testing.T) {
	c := newDenialCache(0)
	if c != nil {
		t.Fatal("a cache of 0 keys")
	}
	c.keep("k", denied(1000, 1000), c.ticket(), at(0))
	c.forget("k")
	expectAnswer(t, c, "k", at(1), swl.Verdict{}, false)
}
