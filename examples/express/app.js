// A tiny Express service behind redis-swl's middleware (the redis-swl
// package, clients/node). Settings from the environment
// (docs/middleware.md): REDIS_URL (redis://127.0.0.1:6379/), PORT (3000),
// WINDOWS ("60000:100"; several as "60000:100,1000:10"), COST (1), POLICY
// (open, closed or local), TIMEOUT_MS (50), LOCAL_MAX_CLIENTS (10000),
// DENIAL_CACHE (on or off). GET /failures and GET /metrics (Prometheus)
// are outside the limit.
'use strict';

const express = require('express');
const { register } = require('prom-client');
const { rateLimit, clientAddress } = require('redis-swl');

const env = process.env;
const windows = (env.WINDOWS || '60000:100').split(',').map((pair) => pair.split(':').map(Number));
const DENIAL_CACHE = { on: 10000, off: 0 };
const denialCache = env.DENIAL_CACHE || 'on';
if (!Object.hasOwn(DENIAL_CACHE, denialCache)) {
  console.error(`DENIAL_CACHE: unknown setting "${denialCache}" (accepted: on, off)`);
  process.exit(1);
}
let limiter;
try {
  limiter = rateLimit({
    url: env.REDIS_URL || 'redis://127.0.0.1:6379/',
    windows,
    cost: Number(env.COST || 1),
    policy: env.POLICY || 'open',
    timeoutMs: Number(env.TIMEOUT_MS || 50),
    maxLocalClients: Number(env.LOCAL_MAX_CLIENTS || 10000),
    // Who a request counts against: here the default, the client's address.
    // docs/middleware.md keys by an authenticated identity instead.
    key: clientAddress,
    denialCacheKeys: DENIAL_CACHE[denialCache],
    // Counted as limiter="default" in prom-client's default registry.
    metrics: register,
  });
} catch (error) {
  // POLICY names no policy, or another setting is unusable
  console.error(`${error.message.startsWith('unknown policy') ? 'POLICY' : 'rate limiter'}: ${error.message}`);
  process.exit(1);
}

const app = express();
// Registered before the limiter, so they are not limited: they answer even
// while the policy refuses everything else.
app.get('/failures', (req, res) => res.type('text/plain').send(`${limiter.failures()}\n`));
app.get('/metrics', async (req, res) => {
  res.set('Content-Type', register.contentType).send(await register.metrics());
});
app.use(limiter);
app.get('/', (req, res) => res.type('text/plain').send('hello\n'));
const server = app.listen(Number(env.PORT || 3000), '127.0.0.1', () => {
  console.log(`listening on ${server.address().port}`);
});
