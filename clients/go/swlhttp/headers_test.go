package swlhttp

import (
	"net/http"
	"net/netip"
	"testing"

	swl "github.com/redis-swl/redis-swl/clients/go"
)

func TestHeadersDescribeTheWindowTheReplyNames(t *testing.T) {
	for _, c := range []struct {
		verdict                   swl.Verdict
		policy, limit, retryAfter string
	}{
		// The Rust crate's example: the reset is capped at the window.
		{verdictOf(false, 2, 0, 1500, 9001, 10_000), `"10000ms";q=2;w=10`, `"10000ms";r=0;t=10`, "2"},
		// Whole seconds, rounded up; a reset of the widest window capped
		// at this one's.
		{verdictOf(true, 10, 7, -1, 60_000, 1000), `"1000ms";q=10;w=1`, `"1000ms";r=7;t=1`, ""},
		{verdictOf(true, 3, 2, -1, 0, 1500), `"1500ms";q=3;w=2`, `"1500ms";r=2;t=0`, ""},
		{verdictOf(false, 3, 0, 1, 1, 60_000), `"60000ms";q=3;w=60`, `"60000ms";r=0;t=1`, "1"},
		{verdictOf(false, 3, 0, 59_001, 59_999, 60_000), `"60000ms";q=3;w=60`, `"60000ms";r=0;t=60`, "60"},
		// Waiting cannot help (a cost above the limit): no Retry-After.
		{verdictOf(false, 3, 3, -1, 0, 60_000), `"60000ms";q=3;w=60`, `"60000ms";r=3;t=0`, ""},
	} {
		h := http.Header{}
		SetHeaders(h, c.verdict)
		got := [3]string{h.Get("RateLimit-Policy"), h.Get("RateLimit"), h.Get("Retry-After")}
		if want := [3]string{c.policy, c.limit, c.retryAfter}; got != want {
			t.Errorf("%+v: %q, not %q", c.verdict, got, want)
		}
		if len(h) != 2+min(1, len(c.retryAfter)) {
			t.Errorf("%+v: %v", c.verdict, h)
		}
	}
}

func TestTheDefaultKeyIsThePeersAddressNeverAHeader(t *testing.T) {
	for remote, want := range map[string]string{
		"192.0.2.7:5000":           "192.0.2.7",
		"[::ffff:192.0.2.7]:5000":  "192.0.2.7",
		"[2001:db8::1]:443":        "2001:db8::1",
		"[fe80::1%eth0]:443":       "fe80::1%eth0",
		"":                         "unknown",
		"@":                        "unknown",
		"not an address, not one":  "unknown",
		"192.0.2.8":                "192.0.2.8",
		"[2001:db8::1]:not a port": "unknown",
	} {
		r := &http.Request{RemoteAddr: remote, Header: http.Header{"X-Forwarded-For": {"203.0.113.9"}}}
		if got := ClientAddress(r); got != want {
			t.Errorf("%q: %q, not %q", remote, got, want)
		}
	}
}

func TestForwardedForReadsFromTheRightWhileTheHopIsAProxy(t *testing.T) {
	key := ForwardedFor(netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"))
	for _, c := range []struct {
		remote    string
		forwarded []string
		want      string
	}{
		{"10.0.0.1:5000", []string{"203.0.113.9, 192.0.2.7"}, "192.0.2.7"},
		// Through both proxies, over two lines.
		{"10.0.0.1:5000", []string{"203.0.113.9, 192.0.2.7", "10.0.0.2"}, "192.0.2.7"},
		// The forms some proxies write.
		{"10.0.0.1:5000", []string{"192.0.2.7:1234"}, "192.0.2.7"},
		{"10.0.0.1:5000", []string{"[2001:db8::7]"}, "2001:db8::7"},
		{"10.0.0.1:5000", []string{"[2001:db8::7]:80"}, "2001:db8::7"},
		// Not from a proxy: the header is the client's, and ignored.
		{"192.0.2.9:5000", []string{"203.0.113.9"}, "192.0.2.9"},
		// A proxy, and nothing it added: the proxy itself.
		{"10.0.0.1:5000", nil, "10.0.0.1"},
		// An entry that is no address stops the walk at the hop before.
		{"10.0.0.1:5000", []string{"192.0.2.7, unknown"}, "10.0.0.1"},
		{"[::ffff:10.0.0.1]:5000", []string{"192.0.2.7"}, "192.0.2.7"},
		{"", []string{"192.0.2.7"}, "unknown"},
	} {
		r := &http.Request{RemoteAddr: c.remote, Header: http.Header{}}
		for _, line := range c.forwarded {
			r.Header.Add("X-Forwarded-For", line)
		}
		if got := key(r); got != c.want {
			t.Errorf("%q %q: %q, not %q", c.remote, c.forwarded, got, c.want)
		}
	}
}
