package swlhttp

import (
	"net/http"
	"net/netip"
	"slices"
	"strings"
)

// KeyFunc names the client a request counts against (the limiter puts its
// key prefix before it). It is called once per request, before the
// handler; it must not read the body.
type KeyFunc func(r *http.Request) string

// ClientAddress is the default key: the TCP peer's address, from
// r.RemoteAddr (an IPv4 client of a dual-stack listener as plain IPv4),
// never a header the client chose; "unknown" where RemoteAddr holds no
// address (a Unix socket). It is the Python, Node and Rust middleware's
// default.
func ClientAddress(r *http.Request) string {
	peer, ok := peerOf(r)
	if !ok {
		return "unknown"
	}
	return peer.String()
}

func peerOf(r *http.Request) (netip.Addr, bool) {
	if peer, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
		return peer.Addr().Unmap(), true
	}
	if peer, err := netip.ParseAddr(r.RemoteAddr); err == nil {
		return peer.Unmap(), true
	}
	return netip.Addr{}, false
}

// ForwardedFor is a key function for a service behind reverse proxies at
// proxies. Each proxy appends the address it saw to X-Forwarded-For, so
// reading from the right while the address so far is one of proxies ends
// at the client; entries a client wrote itself sit further left and are
// never reached. A connection from anyone else is keyed by its own
// address, as [ClientAddress] keys it. It is the Rust crate's
// forwarded_for.
func ForwardedFor(proxies ...netip.Addr) KeyFunc {
	trusted := make([]netip.Addr, len(proxies))
	for i, proxy := range proxies {
		trusted[i] = proxy.Unmap()
	}
	return func(r *http.Request) string {
		client, ok := peerOf(r)
		if !ok {
			return "unknown"
		}
		// Entries are split from each whole line: bytes a client wrote into
		// its own part of a line must not hide the entries proxies added.
		var hops []string
		for _, line := range r.Header.Values("X-Forwarded-For") {
			hops = append(hops, strings.Split(line, ",")...)
		}
		for i := len(hops) - 1; i >= 0 && slices.Contains(trusted, client); i-- {
			hop, ok := hopAddress(hops[i])
			if !ok {
				break
			}
			client = hop
		}
		return client.String()
	}
}

// hopAddress is one X-Forwarded-For entry's address: 192.0.2.7,
// 2001:db8::1, and the forms some proxies write, with a port or in
// brackets.
func hopAddress(hop string) (netip.Addr, bool) {
	hop = strings.TrimSpace(hop)
	if address, err := netip.ParseAddr(hop); err == nil {
		return address.Unmap(), true
	}
	if address, err := netip.ParseAddrPort(hop); err == nil {
		return address.Addr().Unmap(), true
	}
	if inner, found := strings.CutPrefix(hop, "["); found {
		if inner, found := strings.CutSuffix(inner, "]"); found {
			if address, err := netip.ParseAddr(inner); err == nil {
				return address.Unmap(), true
			}
		}
	}
	return netip.Addr{}, false
}
