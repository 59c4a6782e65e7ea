// The client against real servers: with the module and without it (the
// library, loaded by the client), both encodings, over node-redis and
// ioredis; the same replies from all of them.
'use strict';

const assert = require('node:assert/strict');
const { describe, it, before, after } = require('node:test');
const Redis = require('ioredis');
const { SWL, Verdict, TimeoutError, UncertainOutcomeError } = require('..');
const { librarySource } = require('../lib/library');
const { ENCODINGS, ROOT, RedisServer, logKind } = require('./servers');
const fs = require('node:fs');
const path = require('node:path');

const T = 1700000000000;

// The calls of one session and the replies the module gives them.
const SESSION = [
  ['check', [60000, 3, { nowMs: T, cost: 2 }], [1, 3, 1, -1, 60000, 60000]],
  ['check', [60000, 3, { nowMs: T + 1000, cost: 2 }], [0, 3, 1, 59000, 59000, 60000]],
  ['peek', [60000, 3, { nowMs: T + 1000, oldest: true }], [1, 3, 0, -1, 60000, 60000, 59000]],
  ['refund', [60000, 3, { nowMs: T + 2000 }], [1, 3, 1, -1, 60000, 60000]],
  ['check', [60000, 3, { nowMs: T + 3000, windows: [[1000, 1]] }], [1, 1, 0, -1, 60000, 1000]],
  ['check', [60000, 3, { nowMs: T + 3500, windows: [[1000, 1]] }], [0, 1, 0, 500, 59500, 1000]],
  ['check', [60000, 3, { nowMs: T + 3600, cost: 4 }], [0, 3, 1, -1, 59400, 60000]],
];

// Each way of reaching a server: [name, make(server) => { swl, close }].
const CLIENTS = [
  ['node-redis client', async (server, encoding) => {
    const client = await server.client();
    return { swl: new SWL({ client, encoding }), close: () => client.destroy() };
  }],
  ['node-redis sendCommand', async (server, encoding) => {
    const client = await server.client();
    return { swl: new SWL({ sendCommand: (...args) => client.sendCommand(args), encoding }), close: () => client.destroy() };
  }],
  ['ioredis client', async (server, encoding) => {
    const client = new Redis({ port: server.port, host: '127.0.0.1', lazyConnect: true });
    await client.connect();
    return { swl: new SWL({ client, encoding }), close: () => client.disconnect() };
  }],
];

for (const module of [true, false]) {
  for (const encoding of ENCODINGS) {
    describe(`${module ? 'the module' : 'the library'}, ${encoding}`, () => {
      let server;
      before(async () => { server = await RedisServer.start({ module, encoding }); });
      after(() => server.stop());

      for (const [name, make] of CLIENTS) {
        it(`answers a session exactly over ${name}`, async () => {
          const { swl, close } = await make(server, encoding);
          try {
            const key = `session:${name}`;
            for (const [method, args, reply] of SESSION) {
              const verdict = await swl[method](key, ...args);
              assert.deepEqual(verdict, Verdict.fromReply(reply), `${method} ${JSON.stringify(args)}`);
            }
            assert.equal(swl.usesLibrary, !module);
            const redis = await server.client();
            try {
              assert.equal(await logKind(redis, key), encoding);
              assert.deepEqual(await redis.sendCommand(module ? ['SWL.ENTRIES', key] : ['FCALL', 'swl_entries', '1', key]),
                [T, T + 3000]);
              assert.equal(await redis.sendCommand(['FUNCTION', 'LIST', 'LIBRARYNAME', 'swl']).then((l) => l.length),
                module ? 0 : 1);
            } finally {
              redis.destroy();
            }
            // On the server's clock: the session's entries are long gone.
            assert.deepEqual(await swl.usage(key, 60000), { units: 0, resetAfterMs: 0 });
            await swl.check(`${key}:now`, 60000, 5, { cost: 2 });
            const { units, resetAfterMs } = await swl.usage(`${key}:now`, 60000);
            assert.equal(units, 2);
            assert.ok(resetAfterMs > 50000 && resetAfterMs <= 60000, String(resetAfterMs));
            assert.deepEqual(await swl.entries(`${key}:none`), []);
            await swl.check(`${key}:at`, 60000, 5, { nowMs: 1000, cost: 2 });
            assert.deepEqual(await swl.entries(`${key}:at`), [1000, 1000]);
          } finally {
            close();
          }
        });
      }

      it('says which argument is wrong, and changes nothing', async () => {
        const client = await server.client();
        const swl = new SWL({ client, encoding });
        try {
          await swl.check('bad', 60000, 3, { nowMs: T });
          await assert.rejects(swl.check('bad', 60000, 3, { nowMs: T, cost: 100001 }), { message: 'ERR cost must be an integer from 1 to 100000' });
          await assert.rejects(swl.check('bad', 0, 3, { nowMs: T }), { message: 'ERR window_ms must be an integer from 1 to 9007199254740991' });
          assert.throws(() => swl.check('bad', 60000, 1.5), /limit must be an integer/);
          const entries = await client.sendCommand(module ? ['SWL.ENTRIES', 'bad'] : ['FCALL', 'swl_entries', '1', 'bad']);
          assert.deepEqual(entries, [T]);
        } finally {
          client.destroy();
        }
      });
    });
  }
}

describe('the client', () => {
  it('gives up after timeoutMs on a stalled server', async () => {
    const server = await RedisServer.start();
    const client = await server.client();
    try {
      // Long enough for the calls after each resume on a busy machine.
      const swl = new SWL({ client, timeoutMs: 400 });
      // The first call asks whether the server has the module: a check
      // that timed out waiting for that answer was never sent.
      server.pause();
      await assert.rejects(swl.check('k0', 1000, 1), (error) => error instanceof TimeoutError);
      server.resume();
      await swl.peek('k', 1000, 1);
      server.pause();
      const started = Date.now();
      // The check is out, and may still be carried out: no certain failure.
      await assert.rejects(swl.check('k', 1000, 1), (error) => error instanceof UncertainOutcomeError && error.cause instanceof TimeoutError);
      await assert.rejects(swl.peek('k', 1000, 1), TimeoutError);
      // Given up, not waiting for the server (paused until resumed).
      assert.ok(Date.now() - started < 3000);
      server.resume();
      assert.equal((await swl.check('k2', 1000, 1)).allowed, true);
    } finally {
      client.destroy();
      await server.stop();
    }
  });

  for (const module of [true, false]) {
    it(`sends the first call where it belongs, and calls not awaited in order (${module ? 'the module' : 'the library'})`, async () => {
      const server = await RedisServer.start({ module });
      const client = await server.client();
      await client.sendCommand(['CONFIG', 'RESETSTAT']); // node-redis's CLIENT SETINFO is unknown to Redis 7.0
      try {
        for (const [name, swl] of [['client', new SWL({ client })], ['sendCommand', new SWL({ sendCommand: (...args) => client.sendCommand(args) })]]) {
          const key = `order:${name}`;
          const checked = swl.check(key, 60000, 5);
          const deleted = swl.reset(key);
          assert.equal((await checked).allowed, true);
          assert.equal(await deleted, true);
          assert.equal(await client.exists(key), 0);
        }
        // The errors are the protocol's (clients/spec/protocol.md): each
        // SWL's probe, refused for its arity or as an unknown command, and
        // without the module the version check's before the library was
        // loaded (FCALL_RO swl_version finds no function). No SWL.CHECK
        // with arguments, and no FCALL before the library was there.
        const errors = await client.sendCommand(['INFO', 'errorstats']);
        const stats = await client.sendCommand(['INFO', 'commandstats']);
        const count = (text, pattern) => Number((pattern.exec(text) || [0, 0])[1]);
        assert.equal(count(errors, /errorstat_ERR:count=(\d+)/), module ? 2 : 3, errors);
        assert.equal(count(stats, /cmdstat_fcall_ro:.*failed_calls=(\d+)/), module ? 0 : 1, stats);
        assert.equal(count(stats, /cmdstat_fcall:.*failed_calls=(\d+)/), 0, stats);
      } finally {
        client.destroy();
        await server.stop();
      }
    });
  }

  for (const module of [true, false]) {
    it(`finds its way where ACL refuses COMMAND and FUNCTION LIST (${module ? 'the module' : 'the library'})`, async () => {
      const server = await RedisServer.start({ module });
      const admin = await server.client();
      const { createClient } = require('redis');
      const client = createClient({ url: `redis://limited:secret@127.0.0.1:${server.port}` });
      client.on('error', () => {});
      try {
        await admin.sendCommand(['ACL', 'SETUSER', 'limited', 'on', '>secret', '~*', '+@all', '-command', '-function|list']);
        if (!module) await new SWL({ client: admin }).loadLibrary();
        await client.connect();
        const swl = new SWL({ client });
        assert.equal((await swl.check('acl', 60000, 1)).allowed, true);
        assert.equal((await swl.check('acl', 60000, 1)).allowed, false);
        assert.equal(swl.usesLibrary, !module);
      } finally {
        if (client.isOpen) client.destroy();
        admin.destroy();
        await server.stop();
      }
    });
  }

  it('replaces a library from before that lacks the function a call needs', async () => {
    const server = await RedisServer.start({ module: false });
    const client = await server.client();
    try {
      const old = librarySource('zset').replace("function_name = 'swl_peek'", "function_name = 'swl_peek_old'");
      await client.sendCommand(['FUNCTION', 'LOAD', old]);
      const swl = new SWL({ client });
      // Of this package's release, so not newer: replaced by the call
      // that finds the function missing (clients/spec/protocol.md).
      assert.equal((await swl.peek('k', 1000, 1)).allowed, true);
      const [library] = await client.sendCommand(['FUNCTION', 'LIST', 'WITHCODE', 'LIBRARYNAME', 'swl']);
      assert.equal(library[library.indexOf('library_code') + 1], librarySource());
    } finally {
      client.destroy();
      await server.stop();
    }
  });

  it('makes compact logs of format version 1 with compact1, as redis-swl 0.3 reads them', async () => {
    const server = await RedisServer.start({ module: false });
    const client = await server.client();
    try {
      const swl = new SWL({ client, encoding: 'compact1' });
      assert.equal((await swl.check('k', 1000, 3)).allowed, true);
      const head = await client.sendCommand(['GETRANGE', 'k', '0', '4'], { typeMapping: { 36: Buffer } });
      assert.deepEqual(head, Buffer.from('SWLc\x01', 'latin1'));
      const [library] = await client.sendCommand(['FUNCTION', 'LIST', 'WITHCODE', 'LIBRARYNAME', 'swl']);
      assert.ok(library[library.indexOf('library_code') + 1].includes("\nlocal ENCODING = 'compact1'\n"));
    } finally {
      client.destroy();
      await server.stop();
    }
  });

  it('refuses an unknown encoding and a sender it cannot use', () => {
    assert.throws(() => new SWL({ sendCommand: () => {}, encoding: 'list' }), /encoding must be one of zset, compact/);
    assert.throws(() => new SWL({}), /exactly one of sendCommand, sendCommandCluster or client/);
    assert.throws(() => new SWL({ client: {} }), /node-redis client or cluster, or an ioredis client/);
  });

  it('ships the repository library, with the encoding set', () => {
    const repository = fs.readFileSync(path.join(ROOT, 'scripts', 'swl.lua'), 'utf8');
    assert.equal(librarySource(), repository);
    assert.equal(librarySource('compact'), repository);
    assert.equal(librarySource('zset'), repository.replace("\nlocal ENCODING = 'compact'\n", "\nlocal ENCODING = 'zset'\n"));
    assert.equal(librarySource('compact1'), repository.replace("\nlocal ENCODING = 'compact'\n", "\nlocal ENCODING = 'compact1'\n"));
  });
});
