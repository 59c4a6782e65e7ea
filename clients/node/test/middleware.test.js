// The Express middleware over real HTTP, with the module and without it:
// its denial cache (a client far over its limit gets the same statuses and
// headers as without the cache while Redis sees one check per denial), its
// metrics in a prom-client registry, its routes, refunds of failed
// responses, and the app's own connection.
'use strict';

const assert = require('node:assert/strict');
const { describe, it, before, after } = require('node:test');
const express = require('express');
const { Registry } = require('prom-client');
const { SWL, rateLimit } = require('..');
const { ENCODINGS, RedisServer, logKind } = require('./servers');

// SWL.CHECK and FCALL calls the server has answered, from INFO commandstats.
async function checks(redis) {
  const info = await redis.sendCommand(['INFO', 'commandstats']);
  const calls = (name) => Number((info.match(new RegExp(`cmdstat_${name}:calls=(\\d+)`)) || [0, 0])[1]);
  return calls('swl\\.check') + calls('fcall');
}

// `app` listening on a free loopback port.
function listen(app) {
  return new Promise((resolve) => {
    const listening = app.listen(0, '127.0.0.1', () => resolve(listening));
  });
}

// An app on a free port behind `limiter`, keyed by the X-Client header.
async function serve(limiter) {
  const app = express();
  app.use(limiter);
  app.get('/', (req, res) => res.send('hello\n'));
  const server = await listen(app);
  const get = async (client) => {
    const reply = await fetch(`http://127.0.0.1:${server.address().port}/`, { headers: { 'X-Client': client } });
    await reply.text();
    const header = (name) => reply.headers.get(name);
    const [, r, t] = (header('RateLimit') || '').match(/r=(\d+);t=(\d+)/) || [];
    return {
      status: reply.status, source: header('RateLimit-Source'), retryAfter: Number(header('Retry-After')), r: Number(r), t: Number(t),
    };
  };
  return { get, close: () => { server.close(); limiter.close(); } };
}

const byHeader = (req) => req.get('X-Client');
const sleepUntil = (at) => new Promise((resolve) => { setTimeout(resolve, Math.max(0, at - Date.now())); });

// An app with a route limited on its own, one exempt, and routes that fail.
async function serveRoutes(limiter) {
  const app = express();
  app.use(limiter);
  app.get('/search/:q', (req, res) => res.send('found\n'));
  app.get('/health', (req, res) => res.send('ok\n'));
  app.get('/fail', (req, res) => res.status(500).send('failed\n'));
  app.get('/missing', (req, res) => res.status(404).send('none\n'));
  app.get('/', (req, res) => res.send('hello\n'));
  const server = await listen(app);
  const get = async (path, client = 'c') => {
    const reply = await fetch(`http://127.0.0.1:${server.address().port}${path}`, { headers: { 'X-Client': client } });
    await reply.text();
    return { status: reply.status, policy: reply.headers.get('RateLimit-Policy') };
  };
  return { get, close: () => { server.close(); limiter.close(); } };
}

for (const module of [true, false]) {
  for (const encoding of ENCODINGS) {
    describe(`the middleware, ${module ? 'the module' : 'the library'}, ${encoding}`, () => {
      let server;
      let redis;
      before(async () => {
        server = await RedisServer.start({ module, encoding });
        redis = await server.client();
      });
      after(async () => {
        redis.destroy();
        await server.stop();
      });
      // The middleware, creating new logs in this encoding where it loads the
      // library. These tests are of Redis's answers, not of failing open
      // (failures.test.js): a command is given seconds, where a loaded
      // machine may take more than the default 50 ms.
      const limiterOf = (options) => rateLimit({ encoding, timeoutMs: 10000, ...options });
      const limiters = (windows, extra = {}) => [
        limiterOf({ url: server.url, windows, key: byHeader, keyPrefix: 'on:', ...extra }),
        limiterOf({ url: server.url, windows, key: byHeader, keyPrefix: 'off:', denialCacheKeys: 0 }),
      ];

      it('answers a client at 20 times its limit as Redis would, asking Redis once per denial', async () => {
        // 2 per 2430 ms, a request every 60 ms: 20 times the limit for three
        // windows. Entries leave the window 30 ms from any request.
        const [on, off] = await Promise.all(limiters([[2430, 2]]).map(serve));
        try {
          await on.get('warm-up');
          await off.get('warm-up');
          const start = Date.now();
          const replies = [];
          let sent = 0;
          let onChecks = 0;
          for (let n = 0; n < 122; n += 1) {
            await sleepUntil(start + 60 * n);
            const before = await checks(redis);
            const [cached, plain] = await Promise.all([on.get('hammer'), off.get('hammer')]);
            sent += (await checks(redis)) - before;
            replies.push([cached, plain]);
            if (cached.source === 'redis') onChecks += 1;
          }
          // Every request of the app without the cache is one check.
          assert.equal(sent, replies.length + onChecks);
          let afterAdmission = true;
          let admitted = 0;
          let deniedByRedis = 0;
          replies.forEach(([cached, plain], n) => {
            const where = `request ${n}: ${JSON.stringify([cached, plain])}`;
            assert.equal(cached.status, plain.status, where);
            assert.equal(plain.source, 'redis', where);
            assert.equal(cached.r, plain.r, where);
            assert.ok(Math.abs(cached.t - plain.t) <= 1, where);
            if (plain.status === 200) {
              assert.equal(cached.source, 'redis', where);
              admitted += 1;
              afterAdmission = true;
            } else {
              assert.ok(Math.abs(cached.retryAfter - plain.retryAfter) <= 1, where);
              // One denial from Redis after each admission, then the cache.
              assert.equal(cached.source, afterAdmission ? 'redis' : 'cache', where);
              if (afterAdmission) deniedByRedis += 1;
              afterAdmission = false;
            }
          });
          assert.ok(admitted >= 6 && admitted < 12, `${admitted} admitted`);
          assert.equal(onChecks, admitted + deniedByRedis);
          assert.ok(deniedByRedis >= 3 && deniedByRedis <= admitted, `${deniedByRedis} denials from Redis`);
        } finally {
          on.close();
          off.close();
        }
      });

      it('lets a refund and a reset through the process in at once, as without the cache', async () => {
        const pair = limiters([[60000, 1]]);
        const [on, off] = await Promise.all(pair.map(serve));
        try {
          for (const [limiter, app] of [[pair[0], on], [pair[1], off]]) {
            assert.deepEqual([(await app.get('undo')).status, (await app.get('undo')).status], [200, 429]);
            assert.equal((await app.get('undo')).source, limiter === pair[0] ? 'cache' : 'redis');
            await limiter.refund('undo');
            assert.deepEqual([(await app.get('undo')).status, (await app.get('undo')).status], [200, 429]);
            assert.equal(await limiter.reset('undo'), true);
            assert.deepEqual([(await app.get('undo')).status, (await app.get('undo')).status], [200, 429]);
          }
        } finally {
          on.close();
          off.close();
        }
      });

      it('counts each decision by limiter, decision and source', async () => {
        const registry = new Registry();
        const limiter = limiterOf({
          url: server.url, windows: [[60000, 3]], key: byHeader, keyPrefix: 'metrics:', name: 'api', metrics: registry,
        });
        const app = await serve(limiter);
        try {
          const statuses = [];
          for (let n = 0; n < 8; n += 1) statuses.push((await app.get('counted')).status);
          assert.deepEqual(statuses, [200, 200, 200, 429, 429, 429, 429, 429]);
          const text = await registry.metrics();
          const sample = (line) => Number((text.match(new RegExp(`^${line.replace(/[{}]/g, '\\$&')} (\\S+)$`, 'm')) || [])[1]);
          assert.equal(sample('redis_swl_decisions_total{limiter="api",decision="admitted",source="redis"}'), 3);
          assert.equal(sample('redis_swl_decisions_total{limiter="api",decision="denied",source="redis"}'), 1);
          assert.equal(sample('redis_swl_decisions_total{limiter="api",decision="denied",source="cache"}'), 4);
          assert.equal(sample('redis_swl_decision_seconds_count{limiter="api",source="redis"}'), 4);
          assert.equal(sample('redis_swl_decision_seconds_count{limiter="api",source="cache"}'), 4);
          assert.doesNotMatch(text, /counted/);
        } finally {
          app.close();
        }
      });

      const units = async (key) => {
        const swl = new SWL({ client: redis });
        return swl.units(key, 60000);
      };

      it('holds each route to its own windows, in logs of its own, and exempts a route with none', async () => {
        const limiter = limiterOf({
          url: server.url, windows: [[60000, 3]], key: byHeader, keyPrefix: 'routes:',
          routes: { '/search': [[60000, 2]], '/health': [] },
        });
        const app = await serveRoutes(limiter);
        try {
          const statuses = async (path, n) => {
            const replies = [];
            for (let i = 0; i < n; i += 1) replies.push(await app.get(path));
            return replies;
          };
          assert.deepEqual((await statuses('/search/a', 3)).map((r) => r.status), [200, 200, 429]);
          // Express routes without case: so does the limiter.
          assert.equal((await app.get('/SEARCH/a')).status, 429);
          assert.equal((await app.get('/search/b')).policy, '"60000ms";q=2;w=60');
          const health = await statuses('/health', 5);
          assert.deepEqual(health.map((r) => [r.status, r.policy]), Array(5).fill([200, null]));
          assert.deepEqual((await statuses('/', 3)).map((r) => r.status), [200, 200, 200]);
          // '/searchable' is not under '/search': the app's windows and log.
          assert.deepEqual(await app.get('/searchable'), { status: 429, policy: '"60000ms";q=3;w=60' });
          assert.equal(await units('routes:/search:c'), 2);
          assert.equal(await units('routes:c'), 3);
          assert.equal(await logKind(redis, 'routes:/search:c'), encoding);
          assert.equal(await limiter.reset('c'), true);
          assert.deepEqual([await units('routes:/search:c'), await units('routes:c')], [0, 0]);
          assert.equal((await app.get('/search/a')).status, 200);
        } finally {
          app.close();
        }
      });

      it('gives back what a failed response was charged, with refundFailed', async () => {
        const limiter = limiterOf({
          url: server.url, windows: [[60000, 2]], key: byHeader, keyPrefix: 'refunds:', refundFailed: true,
          failed: (status) => status >= 500,
        });
        const app = await serveRoutes(limiter);
        // The refund is sent when the response has finished: wait for it.
        const settled = async (key, expected) => {
          const deadline = Date.now() + 5000;
          while ((await units(key)) !== expected) {
            assert.ok(Date.now() < deadline, `${key} never held ${expected}`);
            await new Promise((resolve) => { setImmediate(resolve); });
          }
        };
        try {
          for (let i = 0; i < 4; i += 1) {
            assert.equal((await app.get('/fail')).status, 500);
            await settled('refunds:c', 0);
          }
          // A 404 is no failure to this `failed`: it counts.
          assert.equal((await app.get('/missing')).status, 404);
          await settled('refunds:c', 1);
          assert.deepEqual([(await app.get('/')).status, (await app.get('/')).status], [200, 429]);
        } finally {
          app.close();
        }
      });

      it("uses the app's own client, or its sendCommand, where given one", async () => {
        for (const [name, option] of [['client', { client: redis }], ['sendCommand', { sendCommand: (...args) => redis.sendCommand(args) }]]) {
          const limiter = limiterOf({ ...option, windows: [[60000, 1]], key: byHeader, keyPrefix: `own-${name}:` });
          const app = await serveRoutes(limiter);
          try {
            assert.deepEqual([(await app.get('/')).status, (await app.get('/')).status], [200, 429]);
            assert.equal(await units(`own-${name}:c`), 1);
          } finally {
            app.close();
          }
          // Closing the middleware leaves the app's client open.
          assert.equal(await redis.sendCommand(['PING']), 'PONG');
        }
        assert.throws(() => rateLimit({ windows: [[60000, 1]] }), /exactly one of url, client or sendCommand/);
        assert.throws(() => rateLimit({ url: server.url, client: redis, windows: [[60000, 1]] }), /exactly one/);
        assert.throws(() => rateLimit({ url: server.url, windows: [[60000, 1]], routes: { search: [] } }), /starts with \//);
      });
    });
  }
}
