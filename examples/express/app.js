// A tiny Express service behind redis-swl's middleware (the redis-swl
// package, clients/node). Settings from the environment
// (docs/middleware.md): REDIS_URL (redis://127.0.0.1:6379/), PORT (3000),
// WINDOWS ("60000:100"; several as "60000:100,1000:10"), COST (1), POLICY
// (open, closed or local), TIMEOUT_MS (50), LOCAL_MAX_CLIENTS (10000).
'use strict';

const express = require('express');
const { rateLimit, clientAddress } = require('redis-swl');

const env = process.env;
const windows = (env.WINDOWS || '60000:100').split(',').map((pair) => pair.split(':').map(Number));
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
  });
} catch (error) {
  // POLICY names no policy, or another setting is unusable
  console.error(`${error.message.startsWith('unknown policy') ? 'POLICY' : 'rate limiter'}: ${error.message}`);
  process.exit(1);
}

const app = express();
// Registered before the limiter, so it is not limited: it answers even while
// the policy refuses everything else.
app.get('/failures', (req, res) => res.type('text/plain').send(`${limiter.failures()}\n`));
app.use(limiter);
app.get('/', (req, res) => res.type('text/plain').send('hello\n'));
const server = app.listen(Number(env.PORT || 3000), '127.0.0.1', () => {
  console.log(`listening on ${server.address().port}`);
});
