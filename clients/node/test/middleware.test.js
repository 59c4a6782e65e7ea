// The Express middleware's denial cache and metrics over real HTTP, with
// the module and without it: a client far over its limit gets the same
// statuses and headers as without the cache while Redis sees one check per
// denial, and the decisions are counted in a prom-client registry.
'use strict';

const assert = require('node:assert/strict');
const { describe, it, before, after } = require('node:test');
const express = require('express');
const { Registry } = require('prom-client');
const { rateLimit } = require('..');
const { RedisServer } = require('./servers');

// SWL.CHECK and FCALL calls the server has answered, from INFO commandstats.
async function checks(redis) {
  const info = await redis.sendCommand(['INFO', 'commandstats']);
  const calls = (name) => Number((info.match(new RegExp(`cmdstat_${name}:calls=(\\d+)`)) || [0, 0])[1]);
  return calls('swl\\.check') + calls('fcall');
}

// An app on a free port behind `limiter`, keyed by the X-Client header.
async function serve(limiter) {
  const app = express();
  app.use(limiter);
  app.get('/', (req, res) => res.send('hello\n'));
  const server = await new Promise((resolve) => {
    const listening = app.listen(0, '127.0.0.1', () => resolve(listening));
  });
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

for (const module of [true, false]) {
  describe(`the middleware's denial cache, ${module ? 'the module' : 'the library'}`, () => {
    let server;
    let redis;
    before(async () => {
      server = await RedisServer.start({ module });
      redis = await server.client();
    });
    after(async () => {
      redis.destroy();
      await server.stop();
    });
    const limiters = (windows, extra = {}) => [
      rateLimit({ url: server.url, windows, key: byHeader, keyPrefix: 'on:', ...extra }),
      rateLimit({ url: server.url, windows, key: byHeader, keyPrefix: 'off:', denialCacheKeys: 0 }),
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
      const limiter = rateLimit({
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
  });
}
