// Decision metrics through prom-client, an optional peer: loaded only when
// an application gives a registry. The names, labels and help texts are
// the Rust crate's, so one dashboard reads every language's services.
'use strict';

const DECISIONS = 'redis_swl_decisions_total';
const SECONDS = 'redis_swl_decision_seconds';
// The axum example's bounds: 0.1 ms (the cache) to 250 ms (past any timeout).
const BUCKETS = Object.freeze([0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25]);

// The decisions of limiter `name` counted in `registry` (a prom-client
// Registry): record(decision, source, seconds). Every limiter on one
// registry shares the two metrics, told apart by the limiter label.
function decisionMetrics(registry, name) {
  if (typeof name !== 'string' || name === '') throw new TypeError('name: a limiter\'s name for its metrics, not empty');
  if (!registry || typeof registry.getSingleMetric !== 'function') {
    throw new TypeError('metrics must be a prom-client Registry (require(\'prom-client\').register)');
  }
  const { Counter, Histogram } = require('prom-client'); // eslint-disable-line global-require
  const decisions = registry.getSingleMetric(DECISIONS) || new Counter({
    name: DECISIONS,
    help: 'Requests decided by a redis-swl limiter, by limiter, decision (admitted, denied) and source (redis, cache, local, open, closed)',
    labelNames: ['limiter', 'decision', 'source'],
    registers: [registry],
  });
  const seconds = registry.getSingleMetric(SECONDS) || new Histogram({
    name: SECONDS,
    help: 'Time a redis-swl limiter took to decide a request, by limiter and source',
    labelNames: ['limiter', 'source'],
    buckets: BUCKETS,
    registers: [registry],
  });
  return (decision, source, elapsed) => {
    decisions.inc({ limiter: name, decision, source });
    seconds.observe({ limiter: name, source }, elapsed);
  };
}

module.exports = { decisionMetrics, DECISIONS, SECONDS, BUCKETS };
