package swlhttp

import (
	"math"
	"net/http"
	"strconv"
	"time"

	swl "github.com/redis-swl/redis-swl/clients/go"
)

// SetHeaders sets the IETF httpapi rate-limit draft's headers for v, all
// from the window v names (docs/middleware.md): RateLimit-Policy,
// RateLimit and, when denied and waiting helps, Retry-After. ResetAfter is
// for the widest window, and a narrower window's quota is whole again at
// most one window after its newest entry, hence the cap at the window.
//
// For the reply [0, 2, 0, 1500, 9001, 10000]:
//
//	RateLimit-Policy: "10000ms";q=2;w=10
//	RateLimit: "10000ms";r=0;t=10
//	Retry-After: 2
func SetHeaders(h http.Header, v swl.Verdict) {
	window := v.Window.Milliseconds()
	name := `"` + strconv.FormatInt(window, 10) + `ms"`
	h.Set("RateLimit-Policy", name+";q="+strconv.FormatInt(v.Limit, 10)+";w="+seconds(window))
	h.Set("RateLimit", name+";r="+strconv.FormatInt(v.Remaining, 10)+";t="+seconds(min(v.ResetAfter.Milliseconds(), window)))
	if retry, ok := v.RetryAfterSeconds(); ok && !v.Allowed {
		h.Set("Retry-After", strconv.FormatInt(max(1, retry), 10))
	}
}

// seconds is whole seconds, rounded up, for a header.
func seconds(ms int64) string {
	return strconv.FormatInt(max(0, ms/1000+min(1, ms%1000)), 10)
}

// ceilMs is d in whole milliseconds, rounded up; 0 for none or less.
func ceilMs(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

// maxDurationMs is the most milliseconds a time.Duration holds (about 292
// years).
const maxDurationMs = math.MaxInt64 / int64(time.Millisecond)

// milliseconds is ms as a Duration (-1 stays -1ms), capped as swl caps it.
func milliseconds(ms int64) time.Duration {
	if ms > maxDurationMs {
		return math.MaxInt64
	}
	return time.Duration(ms) * time.Millisecond
}
