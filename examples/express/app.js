// A tiny Express service behind the rate-limit middleware. Settings from the
// environment: REDIS_URL, PORT, WINDOWS ("60000:100,1000:10"), COST, POLICY
// (open, closed or local), TIMEOUT_MS (50), LOCAL_MAX_CLIENTS.
'use strict';

const express = require('express');
const { rateLimit } = require('./ratelimit');

const env = process.env;
const windows = (env.WINDOWS || '60000:100').split(',').map((pair) => pair.split(':').map(Number));
const limiter = rateLimit({
  url: env.REDIS_URL || 'redis://127.0.0.1:6379/',
  windows,
  cost: Number(env.COST || 1),
  policy: env.POLICY || 'open',
  timeoutMs: Number(env.TIMEOUT_MS || 50),
  maxLocalClients: Number(env.LOCAL_MAX_CLIENTS || 10000),
});

const app = express();
app.use(limiter);
app.get('/', (req, res) => res.type('text/plain').send('hello\n'));
app.get('/failures', (req, res) => res.type('text/plain').send(`${limiter.state.failures}\n`));
const server = app.listen(Number(env.PORT || 3000), '127.0.0.1', () => {
  console.log(`listening on ${server.address().port}`);
});
