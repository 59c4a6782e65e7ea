package swl

// The denial cache on its own, on explicit times: what it answers, for
// which windows and costs, until when, and what it forgets.

import (
	"testing"
	"time"
)

// base is the tests' time: 2023-11-14, Unix milliseconds.
const base int64 = 1_700_000_000_000

func at(ms int64) time.Time { return time.UnixMilli(base + ms) }

func verdictWith(allowed bool, limit, remaining, retryMs, resetMs, windowMs int64) Verdict {
	return Verdict{
		Allowed: allowed, Limit: limit, Remaining: remaining,
		RetryAfter: milliseconds(retryMs), ResetAfter: milliseconds(resetMs), Window: milliseconds(windowMs),
	}
}

func denied(retryMs, resetMs int64) Verdict {
	return verdictWith(false, 5, 0, retryMs, resetMs, 1000)
}

// minuteOf5 is the windows the tests' checks are of: 5 a second.
var minuteOf5 = []WindowLimit{{Window: time.Second, Limit: 5}}

func expectAnswer(t *testing.T, c *DenialCache, key string, now time.Time, want Verdict, ok bool) {
	t.Helper()
	got, found := c.Answer(key, minuteOf5, 1, now)
	if found != ok || got != want {
		t.Fatalf("%s at %v: %+v (%v), not %+v (%v)", key, now.Sub(at(0)), got, found, want, ok)
	}
}

func TestTheCacheAnswersADenialLessTheTimeSinceUntilItsWaitHasPassed(t *testing.T) {
	c := NewDenialCache(100)
	ticket := c.Ticket()
	c.Keep("k", minuteOf5, 1, denied(1500, 1800), ticket, at(0))
	expectAnswer(t, c, "k", at(0), denied(1500, 1800), true)
	expectAnswer(t, c, "k", at(400), denied(1100, 1400), true)
	// A wait in part of a millisecond is a whole one.
	expectAnswer(t, c, "k", at(1499).Add(time.Microsecond), denied(1, 301), true)
	expectAnswer(t, c, "k", at(1500), Verdict{}, false)
	expectAnswer(t, c, "other", at(0), Verdict{}, false)
	if c.Len() != 0 {
		t.Fatalf("%d keys kept after the wait", c.Len())
	}
}

func TestTheCacheKeepsNoAdmissionAndNoDenialWaitingCannotEnd(t *testing.T) {
	c := NewDenialCache(100)
	c.Keep("admitted", minuteOf5, 1, verdictWith(true, 5, 4, -1, 1000, 1000), c.Ticket(), at(0))
	c.Keep("never", minuteOf5, 1, denied(-1, 1000), c.Ticket(), at(0))
	expectAnswer(t, c, "admitted", at(1), Verdict{}, false)
	expectAnswer(t, c, "never", at(1), Verdict{}, false)
	// An admission after a denial drops the denial.
	c.Keep("k", minuteOf5, 1, denied(1000, 1000), c.Ticket(), at(0))
	c.Keep("k", minuteOf5, 1, verdictWith(true, 5, 0, -1, 1000, 1000), c.Ticket(), at(10))
	expectAnswer(t, c, "k", at(20), Verdict{}, false)
}

func TestAForgetWinsOverACheckSentBeforeIt(t *testing.T) {
	c := NewDenialCache(100)
	ticket := c.Ticket()
	c.Forget("k") // a reset, while the check was out
	c.Keep("k", minuteOf5, 1, denied(1000, 1000), ticket, at(0))
	expectAnswer(t, c, "k", at(1), Verdict{}, false)
	// A check sent after the forget is kept.
	c.Keep("k", minuteOf5, 1, denied(1000, 1000), c.Ticket(), at(2))
	expectAnswer(t, c, "k", at(2), denied(1000, 1000), true)
	c.Forget("k")
	expectAnswer(t, c, "k", at(3), Verdict{}, false)
}

func TestTheCacheForgetsTheLeastRecentlyUsedKeyFirst(t *testing.T) {
	c := NewDenialCache(2)
	for _, key := range []string{"a", "b"} {
		c.Keep(key, minuteOf5, 1, denied(1000, 1000), c.Ticket(), at(0))
	}
	expectAnswer(t, c, "a", at(1), denied(999, 999), true) // a is now the most recent
	c.Keep("c", minuteOf5, 1, denied(1000, 1000), c.Ticket(), at(2))
	expectAnswer(t, c, "b", at(3), Verdict{}, false)
	expectAnswer(t, c, "a", at(3), denied(997, 997), true)
	expectAnswer(t, c, "c", at(3), denied(999, 999), true)
	// A ticket older than the forget of a key no longer remembered keeps
	// nothing, for any key: the cache cannot tell which.
	ticket := c.Ticket()
	c.Forget("d")
	c.Forget("e")
	c.Forget("f") // d, forgotten, is no longer remembered
	c.Keep("d", minuteOf5, 1, denied(1000, 1000), ticket, at(4))
	expectAnswer(t, c, "d", at(5), Verdict{}, false)
}

func TestACacheOfNoKeysIsOff(t *testing.T) {
	c := NewDenialCache(0)
	if c != nil {
		t.Fatal("a cache of 0 keys")
	}
	c.Keep("k", minuteOf5, 1, denied(1000, 1000), c.Ticket(), at(0))
	c.Forget("k")
	expectAnswer(t, c, "k", at(1), Verdict{}, false)
}

func TestTheCacheAnswersTheSameWindowsAndAtLeastTheCostDenied(t *testing.T) {
	c := NewDenialCache(100)
	two := []WindowLimit{{Window: time.Second, Limit: 5}, {Window: time.Minute, Limit: 50}}
	c.Keep("k", minuteOf5, 2, denied(1000, 1000), c.Ticket(), at(0))
	c.Keep("k", two, 1, denied(500, 900), c.Ticket(), at(0))
	for _, check := range []struct {
		windows []WindowLimit
		cost    int64
		want    Verdict
		ok      bool
	}{
		{minuteOf5, 1, Verdict{}, false}, // a smaller cost may fit
		{minuteOf5, 2, denied(1000, 1000), true},
		{minuteOf5, 3, denied(1000, 1000), true},
		{two, 1, denied(500, 900), true}, // the other windows' own denial
		{two[1:], 2, Verdict{}, false},   // windows no denial was of
	} {
		got, ok := c.Answer("k", check.windows, check.cost, at(0))
		if ok != check.ok || got != check.want {
			t.Fatalf("%v cost %d: %+v (%v), not %+v (%v)", check.windows, check.cost, got, ok, check.want, check.ok)
		}
	}
	// At most four sets of windows a key.
	for n := int64(1); n <= 5; n++ {
		c.Keep("many", []WindowLimit{{Window: time.Duration(n) * time.Second, Limit: 1}}, 1, denied(1000, 1000), c.Ticket(), at(0))
	}
	if _, ok := c.Answer("many", []WindowLimit{{Window: time.Second, Limit: 1}}, 1, at(0)); ok {
		t.Fatal("the oldest of five denials of a key is kept")
	}
	if _, ok := c.Answer("many", []WindowLimit{{Window: 5 * time.Second, Limit: 1}}, 1, at(0)); !ok {
		t.Fatal("the newest denial of a key is not kept")
	}
}
