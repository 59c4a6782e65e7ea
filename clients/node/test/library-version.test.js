// Which library a client leaves loaded: it asks the node for its library's
// release (FCALL_RO swl_version 0) before it loads or replaces it there,
// never replaces one newer than its own copy, and replaces an older one (or
// one from before 0.4, without swl_version) only when asked to; on a
// cluster, node by node.
'use strict';

const assert = require('node:assert/strict');
const { describe, it } = require('node:test');
const Redis = require('ioredis');
const { createCluster } = require('redis');
const { SWL } = require('..');
const { librarySource, libraryVersion, release, isNewer } = require('../lib/library');
const { Cluster, RedisServer } = require('./servers');

const OWN = libraryVersion();

// The packaged library, saying it is `version`.
function libraryOf(version) {
  const source = librarySource().replace(/\nlocal VERSION = '[^']*'\n/, `\nlocal VERSION = '${version}'\n`);
  assert.ok(source.includes(`\nlocal VERSION = '${version}'\n`));
  return source;
}

// The packaged library as one from before 0.4: no swl_version.
function withoutSwlVersion() {
  const source = librarySource().replace(/\nredis\.register_function \{ function_name = 'swl_version'[^\n]*\n/, '\n');
  assert.ok(!source.includes("function_name = 'swl_version'"));
  return source;
}

async function loadedCode(client) {
  const [library] = await client.sendCommand(['FUNCTION', 'LIST', 'WITHCODE', 'LIBRARYNAME', 'swl']);
  return library[library.indexOf('library_code') + 1];
}

const loadedVersion = (client) => client.sendCommand(['FCALL_RO', 'swl_version', '0']);

// A server without the module whose library is `source`, and a client of it.
async function serverWith(source) {
  const server = await RedisServer.start({ module: false });
  const client = await server.client();
  await client.sendCommand(['FUNCTION', 'LOAD', source]);
  return { server, client };
}

describe('the library version', () => {
  it('compares major, minor and patch as numbers', () => {
    assert.deepEqual(release('0.10.0'), [0, 10, 0]);
    assert.deepEqual(release('1.2'), [1, 2, 0]);
    assert.deepEqual(release('0.5.0-rc.1'), [0, 5, 0]);
    assert.equal(release('dev'), null);
    assert.equal(isNewer('0.10.0', '0.9.9'), true);
    assert.equal(isNewer('0.9.9', '0.10.0'), false);
    assert.equal(isNewer('0.4.0', '0.4.0'), false);
    assert.equal(isNewer('dev', '0.4.0'), false);
    assert.match(OWN, /^\d+\.\d+\.\d+$/);
  });

  for (const via of ['node-redis', 'ioredis']) {
    it(`never replaces a newer library (${via})`, async () => {
      const newer = libraryOf('9.9.9');
      const { server, client } = await serverWith(newer);
      const ioredis = via === 'ioredis' ? new Redis({ port: server.port, host: '127.0.0.1' }) : null;
      try {
        const swl = new SWL({ client: ioredis || client });
        // The check uses it as it is.
        assert.equal((await swl.check('k', 1000, 3)).allowed, true);
        await swl.loadLibrary();
        await swl.loadLibrary({ replace: true });
        assert.equal(await loadedCode(client), newer);
        assert.equal(await loadedVersion(client), '9.9.9');
        assert.equal((await swl.check('k', 1000, 3)).remaining, 1);
      } finally {
        if (ioredis) ioredis.disconnect();
        client.destroy();
        await server.stop();
      }
    });
  }

  it('asks the node before it loads or replaces anything', async () => {
    const server = await RedisServer.start({ module: false });
    const client = await server.client();
    try {
      const sent = [];
      const swl = new SWL({ sendCommand: (...args) => { sent.push(args); return client.sendCommand(args); } });
      assert.equal((await swl.check('k', 1000, 3)).allowed, true);
      await swl.loadLibrary({ replace: true });
      const asked = sent.filter(([name]) => name === 'FCALL_RO' || name === 'FUNCTION').map((args) => args.slice(0, 3));
      assert.deepEqual(asked.map((args) => args.slice(0, 2)), [
        ['FCALL_RO', 'swl_version'], ['FUNCTION', 'LOAD'], ['FCALL_RO', 'swl_version'], ['FUNCTION', 'LOAD'],
      ]);
      assert.equal(asked[3][2], 'REPLACE');
    } finally {
      client.destroy();
      await server.stop();
    }
  });

  for (const [name, older, answer] of [['0.0.1', libraryOf('0.0.1'), '0.0.1'], ['one without swl_version', withoutSwlVersion(), null]]) {
    it(`uses an older library (${name}) as it is, and replaces it on request`, async () => {
      const { server, client } = await serverWith(older);
      try {
        const swl = new SWL({ client });
        assert.equal((await swl.check('k', 1000, 3)).allowed, true);
        await swl.loadLibrary();
        assert.equal(await loadedCode(client), older);
        if (answer) assert.equal(await loadedVersion(client), answer);
        // On request, as after an upgrade.
        await swl.loadLibrary({ replace: true });
        assert.equal(await loadedCode(client), librarySource());
        assert.equal(await loadedVersion(client), OWN);
        assert.equal((await swl.check('k', 1000, 3)).remaining, 1);
      } finally {
        client.destroy();
        await server.stop();
      }
    });
  }

  it('asks each node of a cluster on its own', async () => {
    const cluster = await Cluster.start({ module: false });
    const nodes = await Promise.all(cluster.nodes.map((node) => node.client()));
    const client = createCluster({ rootNodes: cluster.rootNodes });
    client.on('error', () => {});
    try {
      const newer = libraryOf('9.9.9');
      await nodes[0].sendCommand(['FUNCTION', 'LOAD', newer]);
      await nodes[1].sendCommand(['FUNCTION', 'LOAD', libraryOf('0.0.1')]);
      await client.connect();
      // A key served by each node (another answers MOVED).
      const keys = [];
      for (const node of nodes) {
        for (let i = 0; keys.length < nodes.indexOf(node) + 1; i += 1) {
          const key = `rl:user${i}`;
          if (await node.sendCommand(['EXISTS', key]).then(() => true, () => false)) keys.push(key);
        }
      }
      const swl = new SWL({ client });
      // Loaded where it is missing; the others used as they are.
      for (const key of keys) {
        assert.equal((await swl.check(key, 1000, 1)).allowed, true, key);
        assert.equal((await swl.check(key, 1000, 1)).allowed, false, key);
      }
      assert.deepEqual(await Promise.all(nodes.map(loadedVersion)), ['9.9.9', '0.0.1', OWN]);
      // The older one replaced, the newer one kept.
      for (const key of keys) await swl.loadLibrary({ replace: true, key });
      assert.deepEqual(await Promise.all(nodes.map(loadedVersion)), ['9.9.9', OWN, OWN]);
      assert.equal(await loadedCode(nodes[0]), newer);
      for (const key of keys) assert.equal((await swl.check(key, 1000, 1)).allowed, false, key);
    } finally {
      await client.destroy();
      for (const node of nodes) node.destroy();
      await cluster.stop();
    }
  });
});
