// rate-limiter-flexible with RateLimiterSwl against a model of a sliding
// log, on servers with the module and without it, both encodings, over
// node-redis and ioredis.
'use strict';

const assert = require('node:assert/strict');
const { describe, it, before, after } = require('node:test');
const Redis = require('ioredis');
const { RateLimiterMemory, RateLimiterRedis, RateLimiterRes } = require('rate-limiter-flexible');
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
      const rlKey = `rlswl:${key}:swl`;
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
      const ttl = await redis.pTTL('rlswl:blocked:swl');
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
      assert.equal((await entries('rlswl:short:swl')).length, 3);
    });

    it('blocks for blockDuration at the rejection that crosses the limit, and only then', async () => {
      const rl = limiter({ points: 1, blockDuration: 90 });
      await rl.consume('b');
      const [outcome, value] = await settle(rl.consume('b'));
      assert.deepEqual([outcome, value], ['rejected', res(0, 90000, 1, false)]);
      // points + 1 entries that leave the window in 90 s, as RateLimiterRedis
      // sets points + 1.
      assert.equal((await entries('rlswl:b:swl')).length, 3);
      for (let i = 0; i < 3; i += 1) {
        const [again, blocked] = await settle(rl.consume('b'));
        assert.equal(again, 'rejected');
        assert.ok(blocked.msBeforeNext > 89000 && blocked.msBeforeNext <= 90000, String(blocked.msBeforeNext));
      }
      assert.equal((await entries('rlswl:b:swl')).length, 3);
      const ttl = await redis.pTTL('rlswl:b:swl');
      assert.ok(ttl > 89000 && ttl <= 90000, String(ttl));
    });

    it('blocks for blockDuration a consume of more than points, as RateLimiterRedis does', async () => {
      const rl = limiter({ points: 2, blockDuration: 90 });
      const [outcome, value] = await settle(rl.consume('big', 3));
      assert.deepEqual([outcome, value], ['rejected', res(0, 90000, 0, false)]);
      assert.equal((await entries('rlswl:big:swl')).length, 3);
      const [again, blocked] = await settle(rl.consume('big'));
      assert.equal(again, 'rejected');
      assert.ok(blocked.msBeforeNext > 89000 && blocked.msBeforeNext <= 90000, String(blocked.msBeforeNext));
      if (backend.client === 'node-redis') {
        const fixed = new RateLimiterRedis({ storeClient: redis, useRedisPackage: true, points: 2, duration: 60, blockDuration: 90, keyPrefix: 'rlfixed' });
        const [fixedOutcome, fixedValue] = await settle(fixed.consume('big', 3));
        assert.deepEqual([fixedOutcome, fixedValue.msBeforeNext], ['rejected', 90000]);
      }
    });

    it('takes a cost given as a string of an integer, and refuses other strings as RateLimiterRedis does', async () => {
      const insuranceLimiter = new RateLimiterMemory({ points: POINTS, duration: WINDOW_MS / 1000 });
      const rl = limiter({ insuranceLimiter });
      assert.deepEqual(await rl.consume('text', '2'), res(POINTS - 2, WINDOW_MS, 2, true));
      assert.deepEqual(await rl.penalty('text', '1'), res(POINTS - 3, WINDOW_MS, 3, false));
      assert.equal((await rl.reward('text', '1')).consumedPoints, 2);
      assert.equal((await entries('rlswl:text:swl')).length, 2);
      assert.equal(await insuranceLimiter.get('text'), null);
      const bare = limiter();
      await assert.rejects(bare.consume('text', '1.5'), { message: 'Consuming string different than integer values is not supported by this package' });
      await assert.rejects(bare.consume('text', 1.5), { message: 'Consuming decimal number of points is not supported by this package' });
      assert.equal((await entries('rlswl:text:swl')).length, 2);
    });

    it('keeps the order of calls not awaited from the first call on', async () => {
      const rl = limiter();
      const consumed = rl.consume('ordered');
      const deleted = rl.delete('ordered');
      assert.deepEqual(await consumed, res(POINTS - 1, WINDOW_MS, 1, true));
      assert.equal(await deleted, true);
      assert.equal(await redis.exists('rlswl:ordered:swl'), 0);
    });

    it('blocks at blockOnConsumed, counting rejected consumes toward it as RateLimiterRedis does', async () => {
      const rl = limiter({ points: 2, blockOnConsumed: 4, blockDuration: 90 });
      const run = async (l, key) => {
        const seen = [];
        for (let i = 0; i < 5; i += 1) {
          const [outcome, value] = await settle(l.consume(key));
          seen.push(outcome === 'resolved' ? 'resolved' : value.msBeforeNext > 61000);
        }
        return seen;
      };
      // Two admitted; the third rejected by the window; the fourth reaches
      // 4 and blocks for 90 s; the fifth finds the block.
      assert.deepEqual(await run(rl, 'boc'), ['resolved', 'resolved', false, true, true]);
      // 3 recorded, then the block's 4; nothing more while blocked.
      assert.equal((await entries('rlswl:boc:swl')).length, 7);
      if (backend.client === 'node-redis') {
        const fixed = new RateLimiterRedis({ storeClient: redis, useRedisPackage: true, points: 2, duration: 60, blockOnConsumed: 4, blockDuration: 90, keyPrefix: 'rlfixed' });
        assert.deepEqual(await run(fixed, 'boc'), ['resolved', 'resolved', false, true, true]);
      }
    });

    it('blocks for ever with a duration of 0, as RateLimiterRedis does', async () => {
      const rl = limiter();
      assert.deepEqual(await rl.block('forever', 0), res(0, -1, POINTS + 1, false));
      const [outcome, value] = await settle(rl.consume('forever'));
      assert.deepEqual([outcome, value], ['rejected', res(0, -1, POINTS, false)]);
      assert.deepEqual(await rl.get('forever'), res(0, -1, POINTS + 1, false));
      const ttl = await redis.pTTL('rlswl:forever:swl');
      assert.ok(ttl > 99 * 365 * 24 * 3600 * 1000, String(ttl));
    });
  });
}

describe('RateLimiterSwl', () => {
  it('answers from the insurance limiter at once while the client is not ready, with rejectIfRedisNotReady', async () => {
    const server = await RedisServer.start();
    const client = await server.client();
    try {
      const insuranceLimiter = new RateLimiterMemory({ points: 3, duration: 60 });
      const rl = new RateLimiterSwl({ storeClient: client, points: 5, duration: 60, rejectIfRedisNotReady: true, insuranceLimiter });
      assert.deepEqual(await rl.consume('user'), res(4, 60000, 1, true));
      // The server stops listening before it dies: the client reconnects at
      // once, and could otherwise reach the dying server's listener and
      // count itself ready on a socket that is then reset.
      await client.sendCommand(['CONFIG', 'SET', 'port', '0']);
      const down = new Promise((resolve) => { client.once('reconnecting', resolve); });
      await server.kill();
      await down;
      assert.equal(client.isReady, false);
      // Within a second (the client's offline queue would hold the call
      // until it reconnects): the insurance limiter's own first point.
      const answer = await Promise.race([
        rl.consume('user'),
        new Promise((resolve) => { setTimeout(resolve, 1000, 'queued').unref(); }),
      ]);
      assert.deepEqual(answer, res(2, 60000, 1, true));
    } finally {
      client.destroy();
      await server.stop();
    }
  });

  it('raises a block that failed after a rejection', async () => {
    const server = await RedisServer.start();
    const client = await server.client();
    try {
      // The block is the check that gives its own time: it fails. (The
      // probe, a bare SWL.CHECK, and the checks on the server's clock go
      // through.)
      const storeClient = {
        sendCommand: (command, options) => (command[0] === 'SWL.CHECK' && command.length > 4 && command[4] !== '*'
          ? Promise.reject(new Error('the block failed'))
          : client.sendCommand(command, options)),
      };
      const rl = new RateLimiterSwl({ storeClient, points: 2, duration: 60, blockDuration: 90 });
      await assert.rejects(rl.consume('user', 3), /the block failed/);
      await rl.consume('user', 2);
      await assert.rejects(rl.consume('user'), /the block failed/);
    } finally {
      client.destroy();
      await server.stop();
    }
  });

  it('refuses what a sliding log cannot do', async () => {
    const storeClient = { sendCommand() {} };
    assert.throws(() => new RateLimiterSwl({ storeClient, points: 5, duration: 1, inMemoryBlockOnConsumed: 10 }),
      /inMemoryBlockOnConsumed must equal points \(5\): a rejected consume records nothing/);
    assert.throws(() => new RateLimiterSwl({
      storeClient, points: 5, duration: 1, inMemoryBlockOnConsumed: 5, inMemoryBlockDuration: 10,
    }), /inMemoryBlockDuration is not supported/);
    assert.throws(() => new RateLimiterSwl({
      storeClient, points: 5, duration: 1, inMemoryBlockOnConsumed: 5, blockOnConsumed: 7, blockDuration: 10,
    }), /a denial cache with blockOnConsumed is not supported/);
    assert.throws(() => new RateLimiterSwl({ storeClient, points: 5, duration: 1, keySuffix: 1 }), /keySuffix must be a string/);
    assert.throws(() => new RateLimiterSwl({ storeClient, points: 5, duration: 0.0001 }), /not a window of whole milliseconds/);
    assert.throws(() => new RateLimiterSwl({ storeClient, points: 5, duration: 0 }), /not a window of whole milliseconds/);
    await assert.rejects(new RateLimiterSwl({ storeClient, points: 5, duration: 1 }).set('k', 1, 1), /set is not supported/);
  });
});
