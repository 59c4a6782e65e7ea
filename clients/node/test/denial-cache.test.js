// The client with a denial cache, against real servers (with the module
// and without it): what Redis sees, and the calls that go to it as
// without the cache.
'use strict';

const assert = require('node:assert/strict');
const { describe, it, before, after } = require('node:test');
const { SWL, DenialCache, Verdict } = require('..');
const { RedisServer } = require('./servers');

// SWL.CHECK and FCALL calls the server has answered, from INFO commandstats.
async function checks(redis) {
  const info = await redis.sendCommand(['INFO', 'commandstats']);
  const calls = (name) => Number((info.match(new RegExp(`cmdstat_${name}:calls=(\\d+)`)) || [0, 0])[1]);
  return calls('swl\\.check') + calls('fcall');
}

for (const module of [true, false]) {
  describe(`a client with a denial cache, ${module ? 'the module' : 'the library'}`, () => {
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
    const make = () => new SWL({ client: redis, denialCache: new DenialCache() });

    it('answers a denied key from the cache until the wait has passed', async () => {
      const swl = make();
      assert.equal(new SWL({ client: redis }).denialCache, null);
      for (let n = 0; n < 2; n += 1) assert.equal((await swl.check('c:deny', 60000, 2)).allowed, true);
      const denied = await swl.check('c:deny', 60000, 2);
      assert.equal(denied.allowed, false);
      const before = await checks(redis);
      for (let n = 0; n < 5; n += 1) {
        const cached = await swl.check('c:deny', 60000, 2);
        assert.equal(cached.allowed, false);
        assert.equal(cached.remaining, 0);
        assert.ok(cached.retryAfterMs <= denied.retryAfterMs && cached.retryAfterMs > denied.retryAfterMs - 1000);
        assert.ok(cached.resetAfterMs <= denied.resetAfterMs && cached.resetAfterMs > denied.resetAfterMs - 1000);
      }
      // A larger cost is answered too; other windows and a smaller limit go to Redis.
      assert.equal((await swl.check('c:deny', 60000, 2, { cost: 2 })).allowed, false);
      assert.equal(await checks(redis), before);
      assert.equal((await swl.check('c:deny', 60000, 3)).allowed, true);
      assert.equal(await checks(redis), before + 1);
    });

    it('lets a refund and a delete through the client drop the key\'s denials', async () => {
      const swl = make();
      assert.equal((await swl.check('c:refund', 60000, 1)).allowed, true);
      assert.equal((await swl.check('c:refund', 60000, 1)).allowed, false);
      await swl.refund('c:refund', 60000, 1);
      assert.equal((await swl.check('c:refund', 60000, 1)).allowed, true);
      assert.equal((await swl.check('c:refund', 60000, 1)).allowed, false);
      assert.equal(await swl.delete('c:refund'), true);
      assert.equal((await swl.check('c:refund', 60000, 1)).allowed, true);
    });

    it('sends PENALIZE and a caller\'s nowMs to Redis as without the cache', async () => {
      const T = 1700000000000;
      const runs = [];
      for (const denialCache of [undefined, new DenialCache()]) {
        const swl = new SWL({ client: redis, denialCache });
        const key = `c:bypass:${runs.length}`;
        const replies = [];
        const sent = await checks(redis);
        for (let n = 0; n < 4; n += 1) replies.push(await swl.check(key, 60000, 1, { nowMs: T + n }));
        assert.equal(await checks(redis), sent + 4);
        for (let n = 0; n < 3; n += 1) replies.push(await swl.check(`${key}:p`, 60000, 1, { penalize: true }));
        const before = await checks(redis);
        replies.push(await swl.check(`${key}:p`, 60000, 1, { penalize: true }));
        assert.equal(await checks(redis), before + 1);
        replies.push(await swl.units(`${key}:p`, 60000));
        runs.push(replies.map((r) => (r instanceof Verdict ? [r.allowed, r.remaining, r.retryAfterMs >= 0] : r)));
      }
      assert.deepEqual(runs[1], runs[0]);
      assert.equal(runs[0].at(-1), 1); // PENALIZE caps the log to the limit
    });

    it('sends no denial that waiting cannot end to the cache', async () => {
      const swl = make();
      const before = await checks(redis);
      for (let n = 0; n < 3; n += 1) assert.equal((await swl.check('c:never', 60000, 1, { cost: 2 })).retryAfterMs, -1);
      assert.equal(await checks(redis), before + 3);
      assert.equal(swl.denialCache.size, 0);
    });

    it('keeps nothing from a check answered after a refund it was sent before', async () => {
      const swl = make();
      assert.equal((await swl.check('c:race', 60000, 1)).allowed, true);
      const [denied] = await Promise.all([swl.check('c:race', 60000, 1), swl.refund('c:race', 60000, 1)]);
      assert.equal(denied.allowed, false);
      assert.equal(swl.denialCache.size, 1); // the key, forgotten, with no denial
      assert.equal((await swl.check('c:race', 60000, 1)).allowed, true);
    });
  });
}

describe('the drop-ins with a denial cache', () => {
  let server;
  let redis;
  before(async () => {
    server = await RedisServer.start();
    redis = await server.client();
  });
  after(async () => {
    redis.destroy();
    await server.stop();
  });

  it('RateLimiterSwl keeps rejections in memory with inMemoryBlockOnConsumed, until reward or delete', async () => {
    const { RateLimiterSwl } = require('..'); // eslint-disable-line global-require
    assert.equal(new RateLimiterSwl({ storeClient: redis, points: 3, duration: 60 }).denialCache, null);
    const rl = new RateLimiterSwl({ storeClient: redis, points: 3, duration: 60, inMemoryBlockOnConsumed: 3 });
    for (let n = 0; n < 3; n += 1) await rl.consume('mem');
    const first = await rl.consume('mem').catch((res) => res);
    assert.equal(first.remainingPoints, 0);
    const before = await checks(redis);
    for (let n = 0; n < 3; n += 1) {
      const res = await rl.consume('mem').catch((rejected) => rejected);
      assert.equal(res.remainingPoints, 0);
      assert.equal(res.consumedPoints, 3);
      assert.ok(res.msBeforeNext <= first.msBeforeNext && res.msBeforeNext > first.msBeforeNext - 1000);
    }
    assert.equal(await checks(redis), before);
    await rl.reward('mem');
    assert.equal((await rl.consume('mem')).remainingPoints, 0);
    await assert.rejects(rl.consume('mem'));
    await rl.delete('mem');
    assert.equal((await rl.consume('mem')).remainingPoints, 2);
  });

  it('RateLimiterSwl still writes a blockDuration block to Redis, and answers it from memory', async () => {
    const { RateLimiterSwl } = require('..'); // eslint-disable-line global-require
    const rl = new RateLimiterSwl({
      storeClient: redis, points: 2, duration: 60, blockDuration: 120, inMemoryBlockOnConsumed: 2,
    });
    for (let n = 0; n < 2; n += 1) await rl.consume('blocked');
    const first = await rl.consume('blocked').catch((res) => res);
    assert.equal(first.msBeforeNext, 120000);
    assert.equal(await redis.sendCommand(['SWL.ENTRIES', 'rlflx:blocked:swl']).then((e) => e.length), 5);
    const before = await checks(redis);
    const again = await rl.consume('blocked').catch((res) => res);
    assert.ok(again.msBeforeNext <= 120000 && again.msBeforeNext > 119000, String(again.msBeforeNext));
    assert.equal(await checks(redis), before);
  });

  it('SwlStore answers denials from a denial cache it is given, until resetKey', async () => {
    const express = require('express'); // eslint-disable-line global-require
    const { rateLimit } = require('express-rate-limit'); // eslint-disable-line global-require
    const { SwlStore } = require('..'); // eslint-disable-line global-require
    assert.equal(new SwlStore({ client: redis }).swl.denialCache, null);
    const store = new SwlStore({ client: redis, denialCache: new DenialCache() });
    const app = express();
    app.use(rateLimit({ windowMs: 60000, limit: 2, store, standardHeaders: 'draft-7', legacyHeaders: false }));
    app.get('/', (req, res) => res.send('hello\n'));
    const listening = await new Promise((resolve) => { const s = app.listen(0, '127.0.0.1', () => resolve(s)); });
    const get = () => fetch(`http://127.0.0.1:${listening.address().port}/`).then(async (r) => { await r.text(); return r.status; });
    try {
      assert.deepEqual([await get(), await get(), await get()], [200, 200, 429]);
      const before = await checks(redis);
      assert.deepEqual([await get(), await get()], [429, 429]);
      assert.equal(await checks(redis), before);
      await store.resetKey('127.0.0.1');
      assert.equal(await get(), 200);
    } finally {
      listening.close();
    }
  });
});
