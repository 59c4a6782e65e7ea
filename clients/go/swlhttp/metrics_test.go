package swlhttp

import (
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// gathered is every sample in registry by name and labels (in
// alphabetical order, as the Rust tests read /metrics): a counter's
// value, and a histogram's count as name_count.
func gathered(t *testing.T, registry *prometheus.Registry) (map[string]float64, map[string]*dto.MetricFamily) {
	t.Helper()
	families, err := registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	samples, byName := map[string]float64{}, map[string]*dto.MetricFamily{}
	for _, family := range families {
		byName[family.GetName()] = family
		for _, metric := range family.GetMetric() {
			var labels []string
			for _, pair := range metric.GetLabel() {
				labels = append(labels, pair.GetName()+"="+strconv.Quote(pair.GetValue()))
			}
			sort.Strings(labels)
			name, value := family.GetName(), metric.GetCounter().GetValue()
			if histogram := metric.GetHistogram(); histogram != nil {
				name, value = name+"_count", float64(histogram.GetSampleCount())
			}
			samples[name+"{"+strings.Join(labels, ",")+"}"] = value
		}
	}
	return samples, byName
}

func decisions(limiter, decision, source string) string {
	return `redis_swl_decisions_total{decision="` + decision + `",limiter="` + limiter + `",source="` + source + `"}`
}

func decided(limiter, source string) string {
	return `redis_swl_decision_seconds_count{limiter="` + limiter + `",source="` + source + `"}`
}

func TestMetricsCountEveryDecisionByLimiterDecisionAndSource(t *testing.T) {
	each(t, func(t *testing.T, f *fixture) {
		registry := prometheus.NewRegistry()
		server := serve(t, f.limiter(Window(time.Minute, 3), OnFailure(Closed), Metrics(registry)))
		// Another limiter on the same registry, told apart by its name.
		login := serve(t, f.limiter(Window(time.Minute, 1), KeyPrefix("login:"), Name("login"), Metrics(registry)))

		// The docs' eight requests: three admitted, one denied by Redis,
		// four by the cache.
		checks := f.checks()
		var sources []string
		for range 8 {
			r := alice.get(t, server)
			sources = append(sources, strconv.Itoa(r.status)+" "+r.header.Get("RateLimit-Source"))
		}
		eight := []string{"200 redis", "200 redis", "200 redis", "429 redis", "429 cache", "429 cache", "429 cache", "429 cache"}
		if !slices.Equal(sources, eight) {
			t.Fatalf("%q", sources)
		}
		if f.checks() != checks+4 {
			t.Fatalf("%d checks, not %d", f.checks(), checks+4)
		}
		bob.get(t, login)
		bob.get(t, login)
		// Two refused while Redis is stopped.
		f.stop()
		for range 2 {
			carol.get(t, server).expect(t, want{status: 503, retryAfter: "1", source: "closed"})
		}

		samples, families := gathered(t, registry)
		expected := map[string]float64{
			decisions("default", "admitted", "redis"): 3,
			decisions("default", "denied", "redis"):   1,
			decisions("default", "denied", "cache"):   4,
			decisions("default", "denied", "closed"):  2,
			decisions("login", "admitted", "redis"):   1,
			decisions("login", "denied", "redis"):     1,
			decided("default", "redis"):               4,
			decided("default", "cache"):               4,
			decided("default", "closed"):              2,
			decided("login", "redis"):                 2,
		}
		for sample, count := range expected {
			if samples[sample] != count {
				t.Errorf("%s: %v, not %v", sample, samples[sample], count)
			}
		}
		if len(samples) != len(expected) {
			t.Errorf("samples %v", samples)
		}
		// The other languages' help texts and bucket bounds.
		if help := families["redis_swl_decisions_total"].GetHelp(); help != "Requests decided by a redis-swl limiter, by limiter, decision (admitted, denied) and source (redis, cache, local, open, closed)" {
			t.Errorf("help %q", help)
		}
		seconds := families["redis_swl_decision_seconds"]
		if help := seconds.GetHelp(); help != "Time a redis-swl limiter took to decide a request, by limiter and source" {
			t.Errorf("help %q", help)
		}
		var bounds []float64
		for _, bucket := range seconds.GetMetric()[0].GetHistogram().GetBucket() {
			bounds = append(bounds, bucket.GetUpperBound())
		}
		if pinned := []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25}; !slices.Equal(bounds, pinned) {
			t.Errorf("buckets %v", bounds)
		}
	})
}
