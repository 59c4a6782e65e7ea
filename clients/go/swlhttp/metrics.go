package swlhttp

// The decision metrics, under the Rust crate's names, labels, help texts
// and bucket bounds (as the Python and Node middleware count them), so one
// dashboard reads every language's services.

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

const (
	decisionsName = "redis_swl_decisions_total"
	secondsName   = "redis_swl_decision_seconds"
	decisionsHelp = "Requests decided by a redis-swl limiter, by limiter, decision (admitted, denied) and source (redis, cache, local, open, closed)"
	secondsHelp   = "Time a redis-swl limiter took to decide a request, by limiter and source"
)

// buckets run from 0.1 ms (an answer of the cache) to 250 ms (past any
// timeout worth setting), as the axum example sets them.
var buckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25}

// decisionMetrics counts one limiter's decisions. Every limiter on one
// registerer shares the two metrics, told apart by the limiter label.
type decisionMetrics struct {
	decisions *prometheus.CounterVec
	seconds   *prometheus.HistogramVec
	name      string
}

func newDecisionMetrics(registerer prometheus.Registerer, name string) (*decisionMetrics, error) {
	decisions, err := register(registerer, prometheus.NewCounterVec(
		prometheus.CounterOpts{Name: decisionsName, Help: decisionsHelp},
		[]string{"limiter", "decision", "source"}))
	if err != nil {
		return nil, err
	}
	seconds, err := register(registerer, prometheus.NewHistogramVec(
		prometheus.HistogramOpts{Name: secondsName, Help: secondsHelp, Buckets: buckets},
		[]string{"limiter", "source"}))
	if err != nil {
		return nil, err
	}
	return &decisionMetrics{decisions: decisions, seconds: seconds, name: name}, nil
}

// register registers collector, or finds the one another limiter
// registered under its name.
func register[C prometheus.Collector](registerer prometheus.Registerer, collector C) (C, error) {
	err := registerer.Register(collector)
	if err == nil {
		return collector, nil
	}
	var already prometheus.AlreadyRegisteredError
	if errors.As(err, &already) {
		if existing, ok := already.ExistingCollector.(C); ok {
			return existing, nil
		}
	}
	return collector, fmt.Errorf("swlhttp: metrics: %w", err)
}

// count counts a decision and the seconds it took.
func (m *decisionMetrics) count(admitted bool, source string, seconds float64) {
	if m == nil {
		return
	}
	decision := "denied"
	if admitted {
		decision = "admitted"
	}
	m.decisions.WithLabelValues(m.name, decision, source).Inc()
	m.seconds.WithLabelValues(m.name, source).Observe(seconds)
}
