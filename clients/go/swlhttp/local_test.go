package swlhttp

// The local limiter against the shared test vectors: for every call, the
// reply the module gave (clients/vectors/local-limiter.json, written and
// checked by tests/vectors.rs against the module), as the Python and Node
// packages replay them.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	swl "github.com/redis-swl/redis-swl/clients/go"
)

type vectors struct {
	WindowsAtMost int `json:"windows_at_most"`
	Cases         []struct {
		Windows [][2]int64 `json:"windows"`
		Calls   []struct {
			Op    string   `json:"op"`
			NowMs int64    `json:"now_ms"`
			Cost  int64    `json:"cost"`
			Reply [6]int64 `json:"reply"`
		} `json:"calls"`
	} `json:"cases"`
}

// loadVectors reads the repository's vectors, from this file's place in
// it (clients/go/swlhttp).
func loadVectors(t *testing.T) vectors {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	path := filepath.Join(filepath.Dir(file), "..", "..", "vectors", "local-limiter.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var v vectors
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return v
}

// sixOf is a verdict as the module's six integers.
func sixOf(v swl.Verdict) [6]int64 {
	allowed := int64(0)
	if v.Allowed {
		allowed = 1
	}
	return [6]int64{allowed, v.Limit, v.Remaining, v.RetryAfter.Milliseconds(), v.ResetAfter.Milliseconds(), v.Window.Milliseconds()}
}

func windowsOf(pairs [][2]int64) []window {
	windows := make([]window, len(pairs))
	for i, pair := range pairs {
		windows[i] = window{ms: pair[0], limit: pair[1]}
	}
	return windows
}

func TestLocalLimiterRepliesAsTheModuleDid(t *testing.T) {
	v := loadVectors(t)
	if len(v.Cases) < 40 {
		t.Fatalf("only %d cases", len(v.Cases))
	}
	limiter := newLocalLimiter(10_000)
	calls := 0
	for n, c := range v.Cases {
		windows := windowsOf(c.Windows)
		for _, call := range c.Calls {
			key := fmt.Sprintf("case%d", n)
			var got swl.Verdict
			var err error
			switch call.Op {
			case "check":
				got, err = limiter.check(key, windows, call.NowMs, call.Cost)
			case "refund":
				got, err = limiter.refund(key, windows, call.NowMs, call.Cost)
			default:
				t.Fatalf("case %d: unknown op %q", n, call.Op)
			}
			if err != nil || sixOf(got) != call.Reply {
				t.Fatalf("case %d, %+v: got %v (%v), not %v", n, call, sixOf(got), err, call.Reply)
			}
			calls++
		}
	}
	if calls < 40*30 {
		t.Fatalf("only %d calls replayed", calls)
	}
}

func TestLocalLimiterTakesAsManyWindowsAsTheModuleAndRefusesOneMore(t *testing.T) {
	most := loadVectors(t).WindowsAtMost
	if most != maxWindows {
		t.Fatalf("the module takes %d windows, the limiter %d", most, maxWindows)
	}
	windows := make([]window, most+1)
	for n := range windows {
		windows[n] = window{ms: 1000 + int64(n), limit: 5}
	}
	limiter := newLocalLimiter(10_000)
	want := [6]int64{1, 5, 4, -1, 1000 + int64(most) - 1, 1000}
	if got, err := limiter.check("k", windows[:most], 1000, 1); err != nil || sixOf(got) != want {
		t.Fatalf("check: %v %v", sixOf(got), err)
	}
	if got, err := limiter.refund("k", windows[:most], 1001, 1); err != nil || sixOf(got) != want {
		t.Fatalf("refund: %v %v", sixOf(got), err)
	}
	message := fmt.Sprintf("windows: at most %d per call, not %d", most, most+1)
	if _, err := limiter.check("k", windows, 1002, 1); err == nil || err.Error() != message {
		t.Fatalf("check: %v", err)
	}
	if _, err := limiter.refund("k", windows, 1002, 1); err == nil || err.Error() != message {
		t.Fatalf("refund: %v", err)
	}
	// Refused before anything changed: the log still holds nothing.
	if got, _ := limiter.check("k", windows[:1], 1003, 1); sixOf(got) != [6]int64{1, 5, 4, -1, 1000, 1000} {
		t.Fatalf("after the refusals: %v", sixOf(got))
	}
}

func TestLocalLimiterForgetsTheLeastRecentlyUsedClientFirst(t *testing.T) {
	limiter := newLocalLimiter(2)
	minute := []window{{ms: 60_000, limit: 1}}
	allowed := func(key string, now int64) bool {
		t.Helper()
		v, err := limiter.check(key, minute, now, 1)
		if err != nil {
			t.Fatal(err)
		}
		return v.Allowed
	}
	for _, step := range []struct {
		key  string
		want bool
	}{
		{"a", true}, {"b", true},
		{"a", false}, // a is now the most recent
		{"c", true},  // b is forgotten
		{"b", true},
		{"c", false},
	} {
		if got := allowed(step.key, 1000); got != step.want {
			t.Fatalf("%s: allowed %v", step.key, got)
		}
	}
	if len(limiter.logs) != 2 || limiter.order.Len() != 2 {
		t.Fatalf("%d logs", len(limiter.logs))
	}
	limiter.forget("c")
	if !allowed("c", 1001) {
		t.Fatal("c was not forgotten")
	}
}

func TestLocalLimiterRecordsACostOf100000InOneCall(t *testing.T) {
	limiter := newLocalLimiter(10_000)
	second := []window{{ms: 1000, limit: 100_000}}
	steps := []struct {
		refund bool
		now    int64
		cost   int64
		want   [6]int64
	}{
		{false, 5, 100_000, [6]int64{1, 100_000, 0, -1, 1000, 1000}},
		// The refund replies as a peek of the same cost: it would fit exactly.
		{true, 6, 99_999, [6]int64{1, 100_000, 0, -1, 1000, 1000}},
		{false, 7, 1, [6]int64{1, 100_000, 99_998, -1, 1000, 1000}},
	}
	for _, step := range steps {
		call := limiter.check
		if step.refund {
			call = limiter.refund
		}
		if got, err := call("k", second, step.now, step.cost); err != nil || sixOf(got) != step.want {
			t.Fatalf("%+v: %v %v", step, sixOf(got), err)
		}
	}
}

func TestLocalLimiterCompactsALongTrimmedLog(t *testing.T) {
	limiter := newLocalLimiter(1)
	second := []window{{ms: 1000, limit: 100_000}}
	for now := int64(0); now < 5000; now++ {
		if _, err := limiter.check("k", second, now, 1); err != nil {
			t.Fatal(err)
		}
	}
	log := limiter.order.Front().Value.(*keyed).log
	if log.len() != 1000 || len(log.times) > 3000 {
		t.Fatalf("%d live entries in %d", log.len(), len(log.times))
	}
	got, _ := limiter.check("k", second, 5000, 1)
	if want := [6]int64{1, 100_000, 100_000 - 1000, -1, 1000, 1000}; sixOf(got) != want {
		t.Fatalf("%v", sixOf(got))
	}
}
