// RateLimiterSwl and SwlStore over each node-redis the package's peer range
// takes (4, 5 and 6), with the module and with the library.
'use strict';

const assert = require('node:assert/strict');
const { describe, it, before, after } = require('node:test');
const { RateLimiterRes } = require('rate-limiter-flexible');
const { SwlStore, RateLimiterSwl } = require('..');
const { RedisServer } = require('./servers');

const VERSIONS = [['4', 'redis-v4'], ['5', 'redis'], ['6', 'redis-v6']];

for (const module of [true, false]) {
  for (const [version, name] of VERSIONS) {
    describe(`node-redis ${version} (${require(`${name}/package.json`).version}), ${module ? 'the module' : 'the library'}`, () => {
      let server;
      let client;
      before(async () => {
        server = await RedisServer.start({ module });
        client = require(name).createClient({ url: server.url });
        client.on('error', () => {});
        await client.connect();
      });
      after(async () => {
        await client.disconnect();
        await server.stop();
      });

      it('consumes, rewards, gets, blocks and deletes through RateLimiterSwl', async () => {
        const rl = new RateLimiterSwl({ storeClient: client, points: 2, duration: 60, blockDuration: 90 });
        const seen = [];
        for (let i = 0; i < 3; i += 1) {
          seen.push(await rl.consume('user').then((res) => res.remainingPoints, (res) => (res instanceof RateLimiterRes ? res.msBeforeNext : res)));
        }
        assert.deepEqual(seen, [1, 0, 90000]);
        assert.equal((await rl.reward('user', 3)).consumedPoints, 2);
        assert.equal(await rl.delete('user'), true);
        assert.equal(await rl.get('user'), null);
        assert.deepEqual(await rl.block('user', 0), new RateLimiterRes(0, -1, 3));
        const entries = module ? ['SWL.ENTRIES', 'rlflx:user:swl'] : ['FCALL', 'swl_entries', '1', 'rlflx:user:swl'];
        assert.equal((await client.sendCommand(entries)).length, 3);
      });

      it('counts, gives back and resets through SwlStore', async () => {
        const store = new SwlStore({ sendCommand: (...args) => client.sendCommand(args) });
        store.init({ windowMs: 60000, limit: 2 });
        assert.equal((await store.increment('ip')).totalHits, 1);
        assert.equal((await store.increment('ip')).totalHits, 2);
        assert.equal((await store.increment('ip')).totalHits, 3);
        await store.decrement('ip');
        assert.equal((await store.get('ip')).totalHits, 1);
        await store.resetKey('ip');
        assert.equal(await client.sendCommand(['EXISTS', 'rl:ip:swl']), 0);
      });
    });
  }
}
