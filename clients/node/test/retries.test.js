// A check or refund is never sent twice, and never taken for certain when
// no reply came. Each test stalls a real server (DEBUG SLEEP 0.6) while a
// client with a 200 ms timeout and its library's default retry settings
// sends, and reads the log: a call that completed is recorded once, one
// that timed out at most once, and rejected with an UncertainOutcomeError.
// ioredis, left to itself, sends again after a reconnection every command
// that was awaiting a reply (autoResendUnfulfilledCommands); node-redis
// sends nothing twice, and SWL's own timeoutMs leaves the command out.
'use strict';

const assert = require('node:assert/strict');
const { describe, it, before, after } = require('node:test');
const Redis = require('ioredis');
const { createClient } = require('redis');
const { SWL, Verdict, UncertainOutcomeError } = require('..');
const { DEBUG, RedisServer, Stall } = require('./servers');

const T = 1700000000000;
const TIMEOUT_MS = 200;

// Each client as an app might make it, with a 200 ms timeout and nothing
// else changed: [name, make(server) => { swl, close, reopen }]. reopen
// connects a client that does not reconnect by itself.
const CLIENTS = [
  ['node-redis, socketTimeout', async (server) => {
    const client = createClient({ url: server.url, socket: { socketTimeout: TIMEOUT_MS } });
    client.on('error', () => {});
    await client.connect();
    // node-redis closes the client after a socket timeout, by default.
    const reopen = async () => { if (!client.isOpen) await client.connect(); };
    return { swl: new SWL({ client }), close: () => client.isOpen && client.destroy(), reopen };
  }],
  ['node-redis, timeoutMs', async (server) => {
    const client = createClient({ url: server.url });
    client.on('error', () => {});
    await client.connect();
    return { swl: new SWL({ client, timeoutMs: TIMEOUT_MS }), close: () => client.destroy() };
  }],
  ['ioredis, socketTimeout', async (server) => {
    const client = new Redis({ host: '127.0.0.1', port: server.port, socketTimeout: TIMEOUT_MS, lazyConnect: true });
    client.on('error', () => {});
    await client.connect();
    return { swl: new SWL({ client }), close: () => client.disconnect() };
  }],
  ['ioredis, timeoutMs', async (server) => {
    const client = new Redis({ host: '127.0.0.1', port: server.port, lazyConnect: true });
    client.on('error', () => {});
    await client.connect();
    return { swl: new SWL({ client, timeoutMs: TIMEOUT_MS }), close: () => client.disconnect() };
  }],
];

async function entries(server, module, key) {
  const client = await server.client();
  try {
    return await client.sendCommand(module ? ['SWL.ENTRIES', key] : ['FCALL', 'swl_entries', '1', key]);
  } finally {
    client.destroy();
  }
}

const uncertain = (error) => error instanceof UncertainOutcomeError
  && error.code === 'ERR_SWL_UNCERTAIN_OUTCOME'
  && /may or may not have been carried out/.test(error.message)
  && error.cause instanceof Error;

// `actual` is one of `options`.
function oneOf(actual, options) {
  assert.ok(options.some((option) => JSON.stringify(option) === JSON.stringify(actual)),
    `${JSON.stringify(actual)} is none of ${JSON.stringify(options)}`);
}

for (const module of [true, false]) {
  describe(module ? 'the module' : 'the library', () => {
    let server;
    before(async () => { server = await RedisServer.start({ module, args: DEBUG }); });
    after(() => server.stop());

    for (const [name, make] of CLIENTS) {
      it(`sends a check or refund once over ${name}`, async () => {
        const { swl, close, reopen = async () => {} } = await make(server);
        const key = `once:${name}`;
        try {
          // A completed check, recorded once (it also loads the library
          // where the server has no module).
          assert.deepEqual(await swl.check(key, 60000, 10, { cost: 3, nowMs: T }), new Verdict(true, 10, 7, -1, 60000, 60000));
          assert.deepEqual(await entries(server, module, key), [T, T, T]);

          let stall = await Stall.start(server.port);
          await assert.rejects(swl.check(key, 60000, 10, { nowMs: T + 1 }), uncertain);
          await stall.wait();
          await reopen();
          const afterCheck = await entries(server, module, key);
          oneOf(afterCheck, [[T, T, T], [T, T, T, T + 1]]);

          // The client goes on (on a new connection where it closed one).
          const verdict = await swl.check(key, 60000, 10, { nowMs: T + 2 });
          assert.deepEqual(verdict, new Verdict(true, 10, 10 - afterCheck.length - 1, -1, 60000, 60000));
          const beforeRefund = [...afterCheck, T + 2];
          assert.deepEqual(await entries(server, module, key), beforeRefund);

          stall = await Stall.start(server.port);
          await assert.rejects(swl.refund(key, 60000, 10, { nowMs: T + 3 }), uncertain);
          await stall.wait();
          oneOf(await entries(server, module, key), [beforeRefund, beforeRefund.slice(0, -1)]);
        } finally {
          close();
        }
      });
    }
  });
}

it('a peek that times out is no uncertain outcome: it changes nothing', async () => {
  const server = await RedisServer.start({ args: DEBUG });
  const client = await server.client();
  try {
    const swl = new SWL({ client, timeoutMs: TIMEOUT_MS });
    const stall = await Stall.start(server.port);
    await assert.rejects(swl.peek('k', 60000, 10), (error) => error.name === 'TimeoutError' && !(error instanceof UncertainOutcomeError));
    await stall.wait();
  } finally {
    client.destroy();
    await server.stop();
  }
});

it('a check the client refused before writing it is no uncertain outcome', async () => {
  const server = await RedisServer.start();
  try {
    const nodeRedis = await server.client();
    nodeRedis.destroy();
    await assert.rejects(new SWL({ client: nodeRedis }).check('k', 60000, 10),
      (error) => !(error instanceof UncertainOutcomeError) && error.message === 'The client is closed');
    const ioredis = new Redis({ host: '127.0.0.1', port: server.port, enableOfflineQueue: false, lazyConnect: true });
    await assert.rejects(new SWL({ client: ioredis }).check('k', 60000, 10),
      (error) => !(error instanceof UncertainOutcomeError) && /enableOfflineQueue options is false/.test(error.message));
    ioredis.disconnect();
    assert.deepEqual(await entries(server, true, 'k'), []);
  } finally {
    await server.stop();
  }
});
