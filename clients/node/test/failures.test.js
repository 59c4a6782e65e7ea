// Redis stalled (SIGSTOP), stopped and restarted under express-rate-limit
// with passOnStoreError and under rate-limiter-flexible with an insurance
// limiter, over node-redis and ioredis: every answer comes within the
// timeout plus a margin, and both go back to Redis by themselves. (The
// middleware's own policies are exercised the same way by
// tests/middleware.rs, on examples/express.)
//
// node-redis is version 6 here: 5.9.0 can hang for good when the server
// dies while it reconnects (it reports itself ready and never writes
// again), which no store can undo; docs/node.md says so.
'use strict';

const assert = require('node:assert/strict');
const { it } = require('node:test');
const express = require('express');
const { createClient } = require('redis-v6');
const Redis = require('ioredis');
const { rateLimit } = require('express-rate-limit');
const { RateLimiterMemory } = require('rate-limiter-flexible');
const { SwlStore, RateLimiterSwl } = require('..');
const { RedisServer } = require('./servers');

// (Long enough that the calls expected to reach Redis, the first one and
// those after it is back, do on a busy machine.)
const TIMEOUT_MS = 300;
// What an answer may take beyond the timeout on a shared, busy machine.
const MARGIN_MS = 700;

// Clients as docs/node.md advises making them: nothing queued while
// disconnected, so a command fails at once. [name, connect(server) =>
// { client, sendCommand, close }]
const CLIENTS = [
  ['node-redis', async (server) => {
    const client = createClient({ url: server.url, disableOfflineQueue: true, socket: { reconnectStrategy: () => 20 } });
    client.on('error', () => {});
    await client.connect();
    return { client, sendCommand: (...args) => client.sendCommand(args), close: () => client.destroy() };
  }],
  ['ioredis', async (server) => {
    const client = new Redis({
      host: '127.0.0.1', port: server.port, enableOfflineQueue: false, maxRetriesPerRequest: 0, retryStrategy: () => 20, lazyConnect: true,
    });
    client.on('error', () => {});
    await client.connect();
    return { client, sendCommand: (command, ...args) => client.call(command, ...args), close: () => client.disconnect() };
  }],
];

// Runs `attempt` until it says Redis answered, within 10 s.
async function returnsToRedis(label, attempt) {
  const deadline = Date.now() + 10000;
  while (!(await attempt())) {
    assert.ok(Date.now() < deadline, `did not return to Redis: ${label}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

// Timed: [milliseconds taken, what `run` returned].
async function timed(run) {
  const started = Date.now();
  const value = await run();
  return [Date.now() - started, value];
}

for (const [name, connect] of CLIENTS) {
  it(`express-rate-limit with passOnStoreError admits while Redis cannot answer, then uses it again (${name})`, async () => {
    const server = await RedisServer.start();
    const { client, sendCommand, close } = await connect(server);
    const app = express();
    const logged = [];
    app.use(rateLimit({
      windowMs: 60000,
      limit: 100,
      passOnStoreError: true,
      standardHeaders: 'draft-8',
      keyGenerator: () => 'everyone',
      logger: { error: (error) => logged.push(error), warn() {} },
      store: new SwlStore({ sendCommand, timeoutMs: TIMEOUT_MS }),
    }));
    app.get('/', (req, res) => res.send('ok'));
    const listening = await new Promise((resolve) => {
      const s = app.listen(0, '127.0.0.1', () => resolve(s));
    });
    const url = `http://127.0.0.1:${listening.address().port}/`;
    // [status, limited by Redis]
    const request = async () => {
      const response = await fetch(url);
      await response.text();
      return [response.status, response.headers.get('ratelimit') !== null];
    };
    try {
      assert.deepEqual(await request(), [200, true]);
      for (const [fault, start, end] of [
        ['stalled', () => server.pause(), () => server.resume()],
        ['stopped', () => server.kill(), () => server.restart()],
      ]) {
        await start();
        for (let i = 0; i < 3; i += 1) {
          const [took, answer] = await timed(request);
          assert.deepEqual(answer, [200, false], fault);
          assert.ok(took < TIMEOUT_MS + MARGIN_MS, `${fault}: answered in ${took} ms`);
        }
        await end();
        await returnsToRedis(fault, async () => (await request())[1]);
      }
      assert.ok(logged.length >= 6);
    } finally {
      listening.closeAllConnections();
      listening.close();
      close();
      await server.stop();
    }
  });

  it(`rate-limiter-flexible answers from its insurance limiter while Redis cannot, then uses Redis again (${name})`, async () => {
    const server = await RedisServer.start();
    const { client, close } = await connect(server);
    const limiter = new RateLimiterSwl({
      storeClient: client,
      points: 5,
      duration: 60,
      keyPrefix: 'insured',
      timeoutMs: TIMEOUT_MS,
      insuranceLimiter: new RateLimiterMemory({ points: 2, duration: 60, keyPrefix: 'insured' }),
    });
    try {
      assert.equal((await limiter.consume('user')).remainingPoints, 4);
      for (const [fault, start, end] of [
        ['stalled', () => server.pause(), () => server.resume()],
        ['stopped', () => server.kill(), () => server.restart()],
      ]) {
        await limiter.insuranceLimiter.delete('user');
        await start();
        // The insurance limiter's own 2 points, then its rejection.
        const answers = [];
        for (let i = 0; i < 3; i += 1) {
          const [took, answer] = await timed(() => limiter.consume('user').then((r) => r.remainingPoints, () => 'rejected'));
          assert.ok(took < TIMEOUT_MS + MARGIN_MS, `${fault}: answered in ${took} ms`);
          answers.push(answer);
        }
        assert.deepEqual(answers, [1, 0, 'rejected'], fault);
        await end();
        // The insurance limiter refuses now, so an admitted consume is Redis's.
        await returnsToRedis(fault, () => limiter.consume('user').then(() => true, () => false));
      }
    } finally {
      close();
      await server.stop();
    }
  });
}

it('the middleware returns to Redis after a restart under concurrent requests', async () => {
  const server = await RedisServer.start();
  const { rateLimit: middleware } = require('..');
  const limiter = middleware({
    url: server.url, windows: [[60000, 1000000]], policy: 'local', key: (req) => req.get('x-user'),
  });
  const app = express();
  app.use(limiter);
  app.get('/', (req, res) => res.send('ok'));
  const listening = await new Promise((resolve) => {
    const s = app.listen(0, '127.0.0.1', () => resolve(s));
  });
  const url = `http://127.0.0.1:${listening.address().port}/`;
  // The sources of 50 requests sent at once, from 50 clients.
  const burst = () => Promise.all(Array.from({ length: 50 }, async (_, i) => {
    const response = await fetch(url, { headers: { 'x-user': `user${i}` } });
    await response.text();
    return response.headers.get('ratelimit-source');
  }));
  const warn = console.warn;
  console.warn = () => {};
  try {
    await server.kill();
    assert.ok((await burst()).every((source) => source === 'local'));
    await server.restart();
    await returnsToRedis('restarted', async () => (await burst()).every((source) => source === 'redis'));
  } finally {
    console.warn = warn;
    limiter.close();
    listening.closeAllConnections();
    listening.close();
    await server.stop();
  }
});

it('the middleware refuses a cost, a timeout or windows it cannot use', () => {
  const { rateLimit: middleware } = require('..');
  const url = 'redis://127.0.0.1:1/';
  for (const cost of [0, 1.5, 100001]) {
    assert.throws(() => middleware({ url, windows: [[1000, 1]], cost }), /cost must be a whole number from 1 to 100000/);
  }
  assert.throws(() => middleware({ url, windows: [[1000, 1]], timeoutMs: 0 }), /timeoutMs must be/);
  assert.throws(() => middleware({ url, windows: [] }), /windows must be/);
  // At most 100 windows, as one call takes.
  const windows = Array.from({ length: 101 }, (_, n) => [1000 + n, 5]);
  middleware({ url, windows: windows.slice(0, 100) }).close();
  assert.throws(() => middleware({ url, windows }), { name: 'TypeError', message: 'windows: at most 100 [windowMs, limit] pairs, not 101' });
  assert.throws(() => middleware({ url, windows: [[1000, 1]], policy: 'fail-open' }), /unknown policy "fail-open"/);
});
