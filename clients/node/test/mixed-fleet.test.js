// A rolling deploy: the library a drop-in replaces (rate-limit-redis's
// RedisStore, rate-limiter-flexible's RateLimiterRedis) and ours, with the
// same configuration, on one server at the same time, with the module and
// with the library. Each keeps answering without an error, and each counts
// its own requests in its own key.
'use strict';

const assert = require('node:assert/strict');
const { describe, it, before, after } = require('node:test');
const express = require('express');
const Redis = require('ioredis');
const { rateLimit } = require('express-rate-limit');
const { RedisStore } = require('rate-limit-redis');
const { RateLimiterRedis, RateLimiterRes } = require('rate-limiter-flexible');
const { SwlStore, RateLimiterSwl } = require('..');
const { RedisServer, logKind } = require('./servers');

// A limiter's answer as the app sees it: its remaining points, or
// 'rejected' for a RateLimiterRes rejection; an error fails the test.
const answer = (promise) => promise.then((res) => res.remainingPoints, (error) => {
  if (error instanceof RateLimiterRes) return 'rejected';
  throw error;
});

for (const module of [true, false]) {
  describe(`the replaced library and ours on one server, ${module ? 'with the module' : 'with the library'}`, () => {
    let server;
    let redis;
    let ioredis;
    before(async () => {
      server = await RedisServer.start({ module });
      redis = await server.client();
      ioredis = new Redis({ host: '127.0.0.1', port: server.port, lazyConnect: true });
      await ioredis.connect();
    });
    after(async () => {
      ioredis.disconnect();
      redis.destroy();
      await server.stop();
    });

    for (const [name, storeClient, extra] of [['node-redis', () => redis, { useRedisPackage: true }], ['ioredis', () => ioredis, {}]]) {
      it(`RateLimiterRedis and RateLimiterSwl with the same options (${name})`, async () => {
        // The default keyPrefix of both: rlflx.
        const options = { storeClient: storeClient(), points: 3, duration: 60, blockDuration: 1 };
        const theirs = new RateLimiterRedis({ ...options, ...extra });
        const ours = new RateLimiterSwl(options);
        const user = `user-${name}`;
        const seen = { theirs: [], ours: [] };
        for (let i = 0; i < 4; i += 1) {
          seen.theirs.push(await answer(theirs.consume(user)));
          seen.ours.push(await answer(ours.consume(user)));
        }
        assert.deepEqual(seen, { theirs: [2, 1, 0, 'rejected'], ours: [2, 1, 0, 'rejected'] });
        for (const limiter of [theirs, ours]) {
          assert.equal((await limiter.get(user)).remainingPoints, 0);
          await limiter.penalty(user, 1);
          await limiter.reward(user, 1);
          await limiter.block(user, 1);
        }
        assert.equal(await redis.type(`rlflx:${user}`), 'string');
        // Ours a log (a sorted set or a compact log, as the server or the
        // library creates them), beside the peer's counter.
        assert.ok(['zset', 'compact'].includes(await logKind(redis, `rlflx:${user}:swl`)));
        assert.equal(await theirs.delete(user), true);
        assert.equal(await ours.delete(user), true);
        assert.equal(await redis.exists([`rlflx:${user}`, `rlflx:${user}:swl`]), 0);
      });
    }

    it('RedisStore and SwlStore with the same options behind express-rate-limit', async () => {
      const sendCommand = (...args) => redis.sendCommand(args);
      const apps = [];
      try {
        // The default prefix of both: rl:.
        for (const store of [new RedisStore({ sendCommand }), new SwlStore({ sendCommand })]) {
          const app = express();
          app.use(rateLimit({ windowMs: 60000, limit: 2, keyGenerator: (req) => req.get('x-user'), store }));
          app.get('/', (req, res) => res.send('ok'));
          const listening = await new Promise((resolve) => {
            const s = app.listen(0, '127.0.0.1', () => resolve(s));
          });
          apps.push(listening);
        }
        const codes = apps.map(() => []);
        for (let i = 0; i < 3; i += 1) {
          for (const [n, listening] of apps.entries()) {
            const response = await fetch(`http://127.0.0.1:${listening.address().port}/`, { headers: { 'x-user': 'fleet' } });
            codes[n].push(response.status);
          }
        }
        assert.deepEqual(codes, [[200, 200, 429], [200, 200, 429]]);
        assert.equal(await redis.get('rl:fleet'), '3');
        const entries = module ? ['SWL.ENTRIES', 'rl:fleet:swl'] : ['FCALL', 'swl_entries', '1', 'rl:fleet:swl'];
        assert.equal((await redis.sendCommand(entries)).length, 2);
      } finally {
        for (const listening of apps) {
          listening.closeAllConnections();
          listening.close();
        }
      }
    });
  });
}
