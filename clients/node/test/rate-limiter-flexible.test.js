// rate-limiter-flexible with RateLimiterSwl against a model of a sliding
// log, on servers with the module and without it, both encodings, over
// node-redis and ioredis.
'use strict';

const assert = require('node:assert/strict');
const { describe, it, before, after } = require('node:test');
const Redis = require('ioredis');
const { RateLimiterRedis, RateLimiterRes } = require('rate-limiter-flexible');
const { RateLimiterSwl } = require('..');
const { ENCODINGS, RedisServer, logKind } = require('./servers');

const POINTS = 5;
const WINDOW_MS = 60000;

// A seeded generator, so that a failure replays.
function random(seed) {
  let state = seed;
  return (n) => {
    state = (state * 1103515245 + 12345) % 2147483648;
    return Math.floor((state / 2147483648) * n);
  };
}

const res = (remaining, msBeforeNext, consumed, first) => new RateLimiterRes(remaining, msBeforeNext, consumed, first);

// A limiter's answer, resolved or rejected, as [outcome, result].
const settle = (promise) => promise.then((value) => ['resolved', value], (error) => ['rejected', error]);

const BACKENDS = [
  ...ENCODINGS.map((encoding) => ({ name: `the module, ${encoding}, node-redis`, module: true, encoding, client: 'node-redis' })),
  ...ENCODINGS.map((encoding) => ({ name: `the library, ${encoding}, ioredis`, module: false, encoding, client: 'ioredis' })),
];

for (const backend of BACKENDS) {
  describe(`RateLimiterSwl on ${backend.name}`, () => {
    let server;
    let redis; // node-redis, for looking at keys
    let storeClient;
    before(async () => {
      server = await RedisServer.start({ module: backend.module, encoding: backend.encoding });
      redis = await server.client();
      if (backend.client === 'ioredis') {
        storeClient = new Redis({ host: '127.0.0.1', port: server.port, lazyConnect: true });
        await storeClient.connect();
      } else {
        storeClient = redis;
      }
    });
    after(async () => {
      if (storeClient !== redis) storeClient.disconnect();
      redis.destroy();
      await server.stop();
    });
    const entries = (key) => redis.sendCommand(backend.module ? ['SWL.ENTRIES', key] : ['FCALL', 'swl_entries', '1', key]);
    const limiter = (options = {}) => new RateLimiterSwl({
      storeClient, points: POINTS, duration: WINDOW_MS / 1000, keyPrefix: 'rlswl', encoding: backend.encoding, ...options,
    });

    it('consumes, rewards, penalises, gets and deletes as a sliding log', async () => {
      const rl = limiter();
      const next = random(backend.encoding.length * 7919 + (backend.module ? 1 : 2));
      const key = 'model';
      const rlKey = `rlswl:${key}`;
      let count = 0;
      // When the newest entry leaves the window, on the server's entries;
      // the call ran between `before` and `after`.
      const leaving = async (before, after) => {
        const times = await entries(rlKey);
        const newest = Number(times[times.length - 1]);
        return [newest + WINDOW_MS - after, newest + WINDOW_MS - before];
      };
      for (let step = 0; step < 150; step += 1) {
        const op = ['consume', 'consume', 'consume', 'reward', 'penalty', 'get', 'delete'][next(7)];
        const n = 1 + next(op === 'consume' ? 7 : 2);
        const before = Date.now();
        const [outcome, value] = await settle(op === 'get' || op === 'delete' ? rl[op](key) : rl[op](key, n));
        const after = Date.now();
        const at = `step ${step}: ${op} ${n} with ${count} recorded`;
        if (op === 'consume' && count + n <= POINTS) {
          count += n;
          assert.deepEqual([outcome, value], ['resolved', res(POINTS - count, WINDOW_MS, count, count === n)], at);
        } else if (op === 'consume') {
          assert.equal(outcome, 'rejected', at);
          assert.ok(value instanceof RateLimiterRes, at);
          const { msBeforeNext } = value;
          assert.deepEqual(value, res(Math.max(0, POINTS - count), msBeforeNext, Math.min(count, POINTS), false), at);
          if (n > POINTS) {
            assert.equal(msBeforeNext, -1, at);
          } else {
            const times = (await entries(rlKey)).map(Number);
            const waitedFor = times[count + n - POINTS - 1];
            assert.ok(msBeforeNext >= waitedFor + WINDOW_MS - after && msBeforeNext <= waitedFor + WINDOW_MS - before, at);
          }
        } else if (op === 'penalty') {
          count += n;
          assert.deepEqual([outcome, value], ['resolved', res(Math.max(0, POINTS - count), WINDOW_MS, count, count === n)], at);
        } else if (op === 'reward') {
          count = Math.max(0, count - n);
          assert.equal(outcome, 'resolved', at);
          const { msBeforeNext } = value;
          assert.deepEqual(value, res(Math.max(0, POINTS - count), msBeforeNext, count, false), at);
          if (count === 0) {
            assert.equal(msBeforeNext, 0, at);
          } else {
            const [least, most] = await leaving(before, after);
            assert.ok(msBeforeNext >= least && msBeforeNext <= most, at);
          }
        } else if (op === 'get') {
          assert.equal(outcome, 'resolved', at);
          if (count === 0) {
            assert.equal(value, null, at);
          } else {
            const { msBeforeNext } = value;
            assert.deepEqual(value, res(Math.max(0, POINTS - count), msBeforeNext, count, false), at);
            const [least, most] = await leaving(before, after);
            assert.ok(msBeforeNext >= least && msBeforeNext <= most, at);
          }
        } else {
          assert.deepEqual([outcome, value], ['resolved', count > 0], at);
          count = 0;
        }
        assert.equal((await entries(rlKey)).length, count, at);
        if (count > 0) assert.equal(await logKind(redis, rlKey), backend.encoding, at);
        else assert.equal(await redis.exists(rlKey), 0, at);
      }
    });

    it('records nothing for a rejected consume, where RateLimiterRedis counts it', async () => {
      const rl = limiter({ points: 3 });
      const fixed = new RateLimiterRedis({ storeClient: redis, useRedisPackage: true, points: 3, duration: 60, keyPrefix: 'rlfixed' });
      const run = async (l) => {
        const seen = [];
        for (let i = 0; i < 3; i += 1) seen.push((await settle(l.consume('user')))[0]);
        seen.push((await settle(l.consume('user')))[0]);
        await l.reward('user', 1);
        seen.push((await settle(l.consume('user')))[0]);
        return seen;
      };
      assert.deepEqual(await run(rl), ['resolved', 'resolved', 'resolved', 'rejected', 'resolved']);
      if (backend.client === 'node-redis') {
        assert.deepEqual(await run(fixed), ['resolved', 'resolved', 'resolved', 'rejected', 'rejected']);
      }
    });

    it('blocks a key for a duration, and after it admits', async () => {
      const rl = limiter();
      const blocked = await rl.block('blocked', 1);
      const start = Date.now();
      assert.deepEqual(blocked, res(0, 1000, POINTS + 1, false));
      const [outcome, value] = await settle(rl.consume('blocked'));
      assert.equal(outcome, 'rejected');
      assert.ok(value.msBeforeNext > 0 && value.msBeforeNext <= 1000, String(value.msBeforeNext));
      assert.equal((await rl.get('blocked')).consumedPoints, POINTS + 1);
      const ttl = await redis.pTTL('rlswl:blocked');
      assert.ok(ttl > 0 && ttl <= 1000, String(ttl));
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, start + 1000 - Date.now()) + 20));
      assert.deepEqual(await rl.consume('blocked'), res(POINTS - 1, WINDOW_MS, 1, true));
    });

    it('writes no block shorter than the wait the log gives', async () => {
      const rl = limiter({ points: 3, duration: 6, blockDuration: 1 });
      for (let i = 0; i < 3; i += 1) await rl.consume('short');
      for (let i = 0; i < 3; i += 1) {
        const [outcome, value] = await settle(rl.consume('short'));
        assert.equal(outcome, 'rejected');
        assert.ok(value.msBeforeNext > 5000 && value.msBeforeNext <= 6000, String(value.msBeforeNext));
      }
      assert.equal((await entries('rlswl:short')).length, 3);
    });

    it('blocks for blockDuration at the rejection that crosses the limit, and only then', async () => {
      const rl = limiter({ points: 1, blockDuration: 90 });
      await rl.consume('b');
      const [outcome, value] = await settle(rl.consume('b'));
      assert.deepEqual([outcome, value], ['rejected', res(0, 90000, 1, false)]);
      // points + 1 entries that leave the window in 90 s, as RateLimiterRedis
      // sets points + 1.
      assert.equal((await entries('rlswl:b')).length, 3);
      for (let i = 0; i < 3; i += 1) {
        const [again, blocked] = await settle(rl.consume('b'));
        assert.equal(again, 'rejected');
        assert.ok(blocked.msBeforeNext > 89000 && blocked.msBeforeNext <= 90000, String(blocked.msBeforeNext));
      }
      assert.equal((await entries('rlswl:b')).length, 3);
      const ttl = await redis.pTTL('rlswl:b');
      assert.ok(ttl > 89000 && ttl <= 90000, String(ttl));
    });
  });
}

describe('RateLimiterSwl', () => {
  it('refuses what a sliding log cannot do', async () => {
    const storeClient = { sendCommand() {} };
    assert.throws(() => new RateLimiterSwl({ storeClient, points: 5, duration: 1, inMemoryBlockOnConsumed: 10 }),
      /inMemoryBlockOnConsumed is not supported/);
    assert.throws(() => new RateLimiterSwl({ storeClient, points: 5, duration: 0.0001 }), /not a window of whole milliseconds/);
    assert.throws(() => new RateLimiterSwl({ storeClient, points: 5, duration: 0 }), /not a window of whole milliseconds/);
    await assert.rejects(new RateLimiterSwl({ storeClient, points: 5, duration: 1 }).set('k', 1, 1), /set is not supported/);
  });
});
