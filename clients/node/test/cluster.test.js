// A real three-node Redis Cluster, with the module and without it (the
// library, which the client loads on each node that lacks it), both
// encodings: the node-redis cluster client under SwlStore (given
// sendCommandCluster, as rate-limit-redis takes it) and under
// RateLimiterSwl.
'use strict';

const assert = require('node:assert/strict');
const { describe, it, before, after } = require('node:test');
const express = require('express');
const { createCluster } = require('redis');
const { rateLimit } = require('express-rate-limit');
const { SwlStore, RateLimiterSwl } = require('..');
const { Cluster, ENCODINGS, logKind } = require('./servers');

const USERS = Array.from({ length: 12 }, (_, i) => `user${i}`);

for (const module of [true, false]) {
  for (const encoding of ENCODINGS) {
    describe(`a cluster with ${module ? 'the module' : 'the library'}, ${encoding}`, () => {
      let cluster;
      let client;
      before(async () => {
        cluster = await Cluster.start({ module, encoding });
        client = createCluster({ rootNodes: cluster.rootNodes });
        client.on('error', () => {});
        await client.connect();
      });
      after(async () => {
        await client.destroy();
        await cluster.stop();
      });

      // The node that holds `key` (any other answers MOVED), and what is there.
      const onItsNode = async (key, command) => {
        for (const node of cluster.nodes) {
          const probe = await node.client();
          try {
            const slot = await probe.sendCommand(['CLUSTER', 'KEYSLOT', key]);
            if (await probe.sendCommand(['CLUSTER', 'COUNTKEYSINSLOT', String(slot)]) > 0) return [node, await command(probe)];
          } finally {
            probe.destroy();
          }
        }
        return [null, [null, null]];
      };
      // [its node, its entries, what it is]
      const logOf = async (key) => {
        const [node, [times, kind]] = await onItsNode(key, async (probe) => [
          await probe.sendCommand(module ? ['SWL.ENTRIES', key] : ['FCALL', 'swl_entries', '1', key]),
          await logKind(probe, key),
        ]);
        return [node, times, kind];
      };

      it('limits each client on its own node through SwlStore', async () => {
        const app = express();
        app.use(rateLimit({
          windowMs: 60000,
          limit: 2,
          keyGenerator: (req) => req.get('x-user'),
          store: new SwlStore({
            sendCommandCluster: ({ key, isReadOnly, command }) => client.sendCommand(key, isReadOnly, command),
            encoding,
          }),
        }));
        app.get('/', (req, res) => res.send('ok'));
        const listening = await new Promise((resolve) => {
          const s = app.listen(0, '127.0.0.1', () => resolve(s));
        });
        try {
          const nodes = new Set();
          for (const user of USERS) {
            const codes = [];
            for (let i = 0; i < 3; i += 1) {
              const response = await fetch(`http://127.0.0.1:${listening.address().port}/`, { headers: { 'x-user': user } });
              codes.push(response.status);
            }
            assert.deepEqual(codes, [200, 200, 429], user);
            const [node, times, kind] = await logOf(`rl:${user}:swl`);
            assert.deepEqual([times.length, kind], [2, encoding], user);
            nodes.add(node.port);
          }
          assert.equal(nodes.size, 3, 'the clients spread over every node');
          if (!module) {
            for (const node of cluster.nodes) {
              const probe = await node.client();
              assert.equal((await probe.sendCommand(['FUNCTION', 'LIST', 'LIBRARYNAME', 'swl'])).length, 1);
              probe.destroy();
            }
          }
        } finally {
          listening.closeAllConnections();
          listening.close();
        }
      });

      it('consumes and rewards through RateLimiterSwl', async () => {
        const limiter = new RateLimiterSwl({ storeClient: client, points: 2, duration: 60, keyPrefix: 'rlf', encoding });
        for (const user of USERS) {
          const seen = [];
          for (let i = 0; i < 3; i += 1) {
            seen.push(await limiter.consume(user).then((r) => r.remainingPoints, () => 'rejected'));
          }
          assert.equal((await limiter.reward(user, 1)).consumedPoints, 1);
          seen.push(await limiter.consume(user).then((r) => r.remainingPoints, () => 'rejected'));
          assert.deepEqual(seen, [1, 0, 'rejected', 0], user);
          const [, times, kind] = await logOf(`rlf:${user}:swl`);
          assert.deepEqual([times.length, kind], [2, encoding], user);
          assert.equal(await limiter.delete(user), true);
          assert.equal(await limiter.get(user), null);
        }
      });
    });
  }
}
