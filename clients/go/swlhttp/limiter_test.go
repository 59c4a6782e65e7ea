package swlhttp

// Building a limiter: its defaults, and what it refuses before any request.

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	swl "github.com/redis-swl/redis-swl/clients/go"
)

// offline is a client of no server: building a limiter sends nothing.
func offline(t *testing.T) *swl.Client {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { _ = rdb.Close() })
	return swl.New(swl.GoRedis(rdb))
}

func TestTheDefaultsAreTheOtherLanguages(t *testing.T) {
	l, err := New(offline(t), Window(time.Minute, 100))
	if err != nil {
		t.Fatal(err)
	}
	c := l.config
	if c.timeout != 50*time.Millisecond || c.policy != Open || c.cost != 1 || c.keyPrefix != "rl:" ||
		c.localMaxClients != 10_000 || c.denialCacheKeys != 10_000 || c.name != "default" {
		t.Fatalf("%+v", c)
	}
	if l.local != nil || l.denials == nil || l.metrics != nil {
		t.Fatalf("%+v", l)
	}
	if got := l.limits.options; len(got) != 1 {
		t.Fatalf("%d options for one window", len(got))
	}
	if c.refundFailed || len(l.routes) != 0 || !c.failed(400) || !c.failed(503) || c.failed(302) {
		t.Fatalf("refunds %v, routes %v", c.refundFailed, l.routes)
	}
}

func TestAnUnknownPolicyIsRefusedWhenTheLimiterIsBuilt(t *testing.T) {
	_, err := New(offline(t), Window(time.Minute, 100), OnFailure("fail-open"))
	var unknown *UnknownPolicyError
	if !errors.As(err, &unknown) || unknown.Policy != "fail-open" {
		t.Fatalf("%v", err)
	}
	// The tiny apps print it after "POLICY: ", as the other languages do.
	if got := unknown.Error(); got != `unknown policy "fail-open" (accepted: open, closed, local)` {
		t.Fatalf("%q", got)
	}
	if got := err.Error(); got != `swlhttp: unknown policy "fail-open" (accepted: open, closed, local)` {
		t.Fatalf("%q", got)
	}
	for _, policy := range []Policy{Open, Closed, Local} {
		if _, err := New(offline(t), Window(time.Minute, 100), OnFailure(policy)); err != nil {
			t.Fatalf("%s: %v", policy, err)
		}
	}
}

func TestSettingsTheModuleWouldRefuseAreRefusedAtOnce(t *testing.T) {
	hundred := make([]Option, 101)
	for n := range hundred {
		hundred[n] = Window(time.Duration(1000+n)*time.Millisecond, 5)
	}
	if _, err := New(offline(t), hundred[:100]...); err != nil {
		t.Fatalf("100 windows: %v", err)
	}
	for _, c := range []struct {
		options []Option
		message string
	}{
		{nil, "swlhttp: windows: at least one (swlhttp.Window)"},
		{hundred, "swlhttp: windows: at most 100 (window, limit) pairs, not 101"},
		{[]Option{Window(0, 1)}, "swlhttp: window 0s: a whole number of milliseconds, at least 1ms"},
		{[]Option{Window(1500*time.Microsecond, 1)}, "swlhttp: window 1.5ms: a whole number of milliseconds, at least 1ms"},
		{[]Option{Window(time.Second, -1)}, "swlhttp: limit -1: from 0 to 9007199254740991"},
		{[]Option{Window(time.Second, 1<<53)}, "swlhttp: limit 9007199254740992: from 0 to 9007199254740991"},
		{[]Option{Window(time.Second, 1), Cost(0)}, "swlhttp: cost: from 1 to 100000, not 0"},
		{[]Option{Window(time.Second, 1), Cost(100_001)}, "swlhttp: cost: from 1 to 100000, not 100001"},
		{[]Option{Window(time.Second, 1), Timeout(0)}, "swlhttp: timeout: above zero, not 0s"},
		{[]Option{Window(time.Second, 1), OnFailure(Local), LocalMaxClients(0)}, "swlhttp: a local policy must remember at least one client, not 0"},
		{[]Option{Window(time.Second, 1), DenialCacheKeys(-1)}, "swlhttp: denial cache keys: 0 (off) or more, not -1"},
		{[]Option{Window(time.Second, 1), Key(nil)}, "swlhttp: no key function"},
		{[]Option{Window(time.Second, 1), Name("")}, "swlhttp: name: a limiter's name for its metrics, not empty"},
	} {
		if _, err := New(offline(t), c.options...); err == nil || err.Error() != c.message {
			t.Errorf("%q: %v", c.message, err)
		}
	}
	if _, err := New(nil, Window(time.Second, 1)); err == nil || err.Error() != "swlhttp: no client" {
		t.Errorf("no client: %v", err)
	}
	// Without the local policy, LocalMaxClients is not used.
	if _, err := New(offline(t), Window(time.Second, 1), LocalMaxClients(0)); err != nil {
		t.Error(err)
	}
}

func TestMetricsOfAnotherKindUnderTheSameNameAreRefused(t *testing.T) {
	registry := prometheus.NewRegistry()
	registry.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "redis_swl_decisions_total", Help: "another"}))
	_, err := New(offline(t), Window(time.Second, 1), Metrics(registry))
	if err == nil || !strings.HasPrefix(err.Error(), "swlhttp: metrics: ") {
		t.Fatalf("%v", err)
	}
	// Two limiters on one registry share the metrics.
	shared := prometheus.NewRegistry()
	for _, name := range []string{"api", "login", "api"} {
		if _, err := New(offline(t), Window(time.Second, 1), Name(name), Metrics(shared)); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
}
