// express-rate-limit with SwlStore, over real HTTP, against servers with
// the module and without it (the library), in both encodings; beside the
// same app on rate-limit-redis's fixed window.
'use strict';

const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const { describe, it, before, after } = require('node:test');
const express = require('express');
const { RedisStore } = require('rate-limit-redis');
const { SwlStore } = require('..');
const { ENCODINGS, RedisServer, logKind } = require('./servers');

const VERSIONS = [['v8', require('express-rate-limit').rateLimit], ['v7', require('express-rate-limit-v7').rateLimit]];

const sleepUntil = (time) => new Promise((resolve) => setTimeout(resolve, Math.max(0, time - Date.now())));

// An app limited by `limiter`, keyed by the X-User header (a test's
// stand-in for an authenticated identity), with /ok and /fail (500).
async function startApp(limiter) {
  const app = express();
  app.use(limiter);
  app.get('/ok', (req, res) => res.send('ok'));
  app.get('/fail', (req, res) => res.status(500).send('failed'));
  const server = await new Promise((resolve) => {
    const listening = app.listen(0, '127.0.0.1', () => resolve(listening));
  });
  const base = `http://127.0.0.1:${server.address().port}`;
  return {
    get: (path, user) => fetch(base + path, { headers: { 'x-user': user } }),
    close: () => new Promise((resolve) => {
      server.closeAllConnections();
      server.close(resolve);
    }),
  };
}

const byUser = (req) => req.get('x-user');

// Status codes of `n` requests sent one after another.
async function statuses(app, path, user, n) {
  const codes = [];
  for (let i = 0; i < n; i += 1) codes.push((await app.get(path, user)).status);
  return codes;
}

// draft-8's partition key, as the draft defines it for express-rate-limit.
const partitionKey = (key) => Buffer.from(crypto.createHash('sha256').update(key).digest('hex').slice(0, 12)).toString('base64');

// Polls until `read` answers `expected` (a store's decrement runs after the
// response is sent), and asserts it.
async function eventually(read, expected) {
  const deadline = Date.now() + 5000;
  let value = await read();
  while (JSON.stringify(value) !== JSON.stringify(expected) && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 5));
    value = await read();
  }
  assert.deepEqual(value, expected);
}

for (const module of [true, false]) {
  for (const encoding of ENCODINGS) {
    describe(`SwlStore on ${module ? 'the module' : 'the library'}, ${encoding}`, () => {
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
      const sendCommand = (...args) => redis.sendCommand(args);
      const entries = (key) => redis.sendCommand(module ? ['SWL.ENTRIES', key] : ['FCALL', 'swl_entries', '1', key]);

      it('admits the limit in any window where a fixed window admits twice as many', async () => {
        const windowMs = 2000;
        const options = { windowMs, limit: 3, keyGenerator: byUser, standardHeaders: 'draft-8', legacyHeaders: false };
        const rateLimit = VERSIONS[0][1];
        const sliding = await startApp(rateLimit({ ...options, store: new SwlStore({ sendCommand, encoding }) }));
        const fixed = await startApp(rateLimit({ ...options, store: new RedisStore({ sendCommand, prefix: 'fixed:' }) }));
        try {
          const user = `boundary-${encoding}`;
          const seen = { sliding: [], fixed: [] };
          const both = async (n) => {
            seen.sliding.push(...(await statuses(sliding, '/ok', user, n)));
            seen.fixed.push(...(await statuses(fixed, '/ok', user, n)));
          };
          await both(1);
          const start = Date.now(); // both windows began before this
          await sleepUntil(start + 1000);
          await both(2);
          // The fixed window has ended; the two requests at +1 s are in the
          // sliding window until +3 s.
          await sleepUntil(start + windowMs + 50);
          await both(3);
          assert.deepEqual(seen.fixed, [200, 200, 200, 200, 200, 200]);
          assert.deepEqual(seen.sliding, [200, 200, 200, 200, 429, 429]);
          assert.equal(await logKind(redis, `rl:${user}:swl`), encoding);
          assert.equal((await entries(`rl:${user}:swl`)).length, 3);
        } finally {
          await sliding.close();
          await fixed.close();
        }
      });

      it('sends draft-8 headers and Retry-After exactly', async () => {
        const user = `headers-${encoding}`;
        const app = await startApp(VERSIONS[0][1]({
          windowMs: 60000, limit: 2, keyGenerator: byUser, standardHeaders: 'draft-8', legacyHeaders: false,
          store: new SwlStore({ sendCommand, encoding, prefix: 'h:' }),
        }));
        try {
          const policy = `"2-in-1min"; q=2; w=60; pk=:${partitionKey(user)}:`;
          const answers = [];
          for (let i = 0; i < 3; i += 1) {
            const response = await app.get('/ok', user);
            answers.push([response.status, response.headers.get('ratelimit'), response.headers.get('ratelimit-policy'),
              response.headers.get('retry-after')]);
          }
          assert.deepEqual(answers, [
            [200, '"2-in-1min"; r=1; t=60', policy, null],
            [200, '"2-in-1min"; r=0; t=60', policy, null],
            [429, '"2-in-1min"; r=0; t=60', policy, '60'],
          ]);
          assert.equal((await entries(`h:${user}:swl`)).length, 2);
        } finally {
          await app.close();
        }
      });

      for (const [version, rateLimit] of VERSIONS) {
        it(`gives back failed requests with skipFailedRequests, and nothing for a denial (${version})`, async () => {
          const user = `skip-${version}-${encoding}`;
          const store = new SwlStore({ sendCommand, encoding, prefix: `skip-${version}:` });
          const key = `skip-${version}:${user}:swl`;
          const app = await startApp(rateLimit({
            windowMs: 60000, limit: 2, keyGenerator: byUser, skipFailedRequests: true, store,
          }));
          try {
            for (let i = 0; i < 4; i += 1) {
              assert.equal((await app.get('/fail', user)).status, 500);
              await eventually(async () => (await entries(key)).length, 0);
            }
            assert.deepEqual(await statuses(app, '/ok', user, 2), [200, 200]);
            // A denial is a failed request too: its decrement must give back nothing.
            assert.equal((await app.get('/ok', user)).status, 429);
            await eventually(() => store.denials.size, 0);
            assert.equal((await entries(key)).length, 2);
            assert.equal((await app.get('/ok', user)).status, 429);
            await eventually(() => store.denials.size, 0);
            assert.deepEqual(await store.get(user).then((info) => info.totalHits), 2);
            await store.resetKey(user);
            assert.equal(await store.get(user), undefined);
            assert.equal(await redis.exists(key), 0);
          } finally {
            await app.close();
          }
        });
      }
    });
  }
}

describe('SwlStore', () => {
  it('admits the limit when the status of a denial is judged by an async requestWasSuccessful', async () => {
    const server = await RedisServer.start();
    const redis = await server.client();
    try {
      const store = new SwlStore({ sendCommand: (...args) => redis.sendCommand(args), prefix: 'async:' });
      const app = express();
      app.use(VERSIONS[0][1]({
        windowMs: 60000,
        limit: 5,
        keyGenerator: byUser,
        skipSuccessfulRequests: true,
        // Anything below 500 succeeds: the 429s are decremented, the 500s not.
        requestWasSuccessful: async (req, res) => res.statusCode < 500,
        store,
      }));
      app.get('/fail', (req, res) => res.status(500).send('failed'));
      const listening = await new Promise((resolve) => {
        const s = app.listen(0, '127.0.0.1', () => resolve(s));
      });
      try {
        const url = `http://127.0.0.1:${listening.address().port}/fail`;
        const codes = [];
        for (let i = 0; i < 12; i += 1) {
          codes.push((await fetch(url, { headers: { 'x-user': 'u' } })).status);
          await eventually(() => store.denials.size, 0);
        }
        assert.deepEqual(codes, [500, 500, 500, 500, 500, 429, 429, 429, 429, 429, 429, 429]);
        assert.equal((await redis.sendCommand(['SWL.ENTRIES', 'async:u:swl'])).length, 5);
      } finally {
        listening.closeAllConnections();
        listening.close();
      }
    } finally {
      redis.destroy();
      await server.stop();
    }
  });

  it('forgets denials whose decrement can no longer come', async () => {
    const server = await RedisServer.start();
    const redis = await server.client();
    try {
      const store = new SwlStore({ sendCommand: (...args) => redis.sendCommand(args) });
      // A limit of 0 denies everything, with a reset one window away.
      store.init({ windowMs: 200, limit: 0, skipFailedRequests: true });
      await Promise.all(Array.from({ length: 1100 }, (_, i) => store.increment(`early${i}`)));
      assert.equal(store.denials.size, 1100);
      await new Promise((resolve) => setTimeout(resolve, 250));
      // Swept once the map doubles: what is left is what can still come.
      await Promise.all(Array.from({ length: 1000 }, (_, i) => store.increment(`late${i}`)));
      assert.equal(store.denials.size, 1000);
      assert.ok([...store.denials.keys()].every((key) => key.startsWith('late')));
    } finally {
      redis.destroy();
      await server.stop();
    }
  });

  it('calls sendCommand and sendCommandCluster with this the store, as RedisStore does', async () => {
    const server = await RedisServer.start();
    const redis = await server.client();
    try {
      class CountingStore extends SwlStore {}
      const seen = [];
      const stores = [
        new CountingStore({
          sendCommand(...args) {
            seen.push(this instanceof CountingStore);
            return redis.sendCommand(args);
          },
        }),
        new CountingStore({
          sendCommandCluster({ command }) {
            seen.push(this instanceof CountingStore);
            return redis.sendCommand(command);
          },
        }),
      ];
      for (const store of stores) {
        store.init({ windowMs: 60000, limit: 2 });
        assert.equal((await store.increment('bound')).totalHits, 1);
        await store.resetKey('bound');
      }
      assert.ok(seen.length >= 4);
      assert.deepEqual(new Set(seen), new Set([true]));
    } finally {
      redis.destroy();
      await server.stop();
    }
  });

  it('says what it needs when the limit is a function', async () => {
    const store = new SwlStore({ sendCommand: () => Promise.reject(new Error('not called')) });
    const errors = [];
    VERSIONS[0][1]({ limit: () => 5, store, logger: { error: (error) => errors.push(error), warn() {} }, validate: false });
    assert.match(String(errors[0]), /with a limit function, give the store one: new SwlStore\(\{ limit \}\)/);
    await assert.rejects(store.increment('k'), /give the store one/);
    assert.throws(() => VERSIONS[1][1]({ limit: () => 5, store: new SwlStore({ sendCommand() {} }) }), /give the store one/);
  });

  it('checks a limit function against the limit it is given', async () => {
    const server = await RedisServer.start();
    const redis = await server.client();
    try {
      const store = new SwlStore({ sendCommand: (...args) => redis.sendCommand(args), limit: 3 });
      const app = await startApp(VERSIONS[0][1]({
        windowMs: 60000, limit: (req) => (req.get('x-user') === 'gold' ? 3 : 1), keyGenerator: byUser, store,
      }));
      try {
        assert.deepEqual(await statuses(app, '/ok', 'gold', 4), [200, 200, 200, 429]);
        // The store admits up to 3; express-rate-limit denies above 1.
        assert.deepEqual(await statuses(app, '/ok', 'plain', 4), [200, 429, 429, 429]);
        assert.equal((await redis.sendCommand(['SWL.ENTRIES', 'rl:plain:swl'])).length, 3);
      } finally {
        await app.close();
      }
    } finally {
      redis.destroy();
      await server.stop();
    }
  });
});
