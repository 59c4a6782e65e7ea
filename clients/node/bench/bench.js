// The Node rate limiters on one redis-server with the module, in one run:
// express-rate-limit's store (rate-limit-redis's fixed window, SwlStore)
// and rate-limiter-flexible's limiter (RateLimiterRedis's fixed window,
// RateLimiterSwl), SwlStore and RateLimiterSwl in both encodings and
// through the function library. Server time per request (INFO
// commandstats: every command a request sends), while admitted and once
// clients are at their limit; memory per client at 100 and 10,000
// requests in the window; and the costliest single call the package
// makes. Ratios are against the fixed window measured here.
// Run by `make bench`; SWL_MODULE names the module.
'use strict';

const { createClient } = require('redis');
const { RedisStore } = require('rate-limit-redis');
const { RateLimiterRedis } = require('rate-limiter-flexible');
const { SwlStore, RateLimiterSwl } = require('..');
const { RedisServer } = require('../test/servers');

const CLIENTS = 200;
const LIMIT = 100;
const BIG_CLIENTS = 10;
const BIG_LIMIT = 10000;
const WINDOW_MS = 3600000;
const COSTLIEST = 100000;
const COSTLIEST_RUNS = 5;

// rate-limiter-flexible joins its prefix and the key with a colon, so its
// keys are named as the stores' are.
const flexiblePrefix = (prefix) => prefix.replace(/:$/, '');

// Each limiter, as a function making `request(client)` for a limit.
// `encoding` is set on the server first (new logs); `library` forces the
// function library on the same server.
function variants(redis) {
  const sendCommand = (...args) => redis.sendCommand(args);
  const swlStore = (encoding, library) => (limit, prefix) => {
    const store = new SwlStore({ sendCommand, prefix, encoding });
    store.init({ windowMs: WINDOW_MS, limit });
    store.swl.usesLibrary = library;
    return (client) => store.increment(client);
  };
  const swlFlexible = (encoding, library) => (limit, prefix) => {
    const limiter = new RateLimiterSwl({ storeClient: redis, points: limit, duration: WINDOW_MS / 1000, keyPrefix: flexiblePrefix(prefix), encoding });
    limiter.swl.usesLibrary = library;
    return (client) => limiter.consume(client).catch(() => {});
  };
  return [
    ['express-rate-limit', 'rate-limit-redis (fixed window)', 'zset', (limit, prefix) => {
      const store = new RedisStore({ sendCommand, prefix });
      store.init({ windowMs: WINDOW_MS, limit });
      return (client) => store.increment(client);
    }],
    ['express-rate-limit', 'SwlStore', 'zset', swlStore('zset', false)],
    ['express-rate-limit', 'SwlStore, compact', 'compact', swlStore('compact', false)],
    ['express-rate-limit', 'SwlStore, library', 'zset', swlStore('zset', true)],
    ['rate-limiter-flexible', 'RateLimiterRedis (fixed window)', 'zset', (limit, prefix) => {
      const limiter = new RateLimiterRedis({
        storeClient: redis, useRedisPackage: true, points: limit, duration: WINDOW_MS / 1000, keyPrefix: flexiblePrefix(prefix),
      });
      return (client) => limiter.consume(client).catch(() => {});
    }],
    ['rate-limiter-flexible', 'RateLimiterSwl', 'zset', swlFlexible('zset', false)],
    ['rate-limiter-flexible', 'RateLimiterSwl, compact', 'compact', swlFlexible('compact', false)],
    ['rate-limiter-flexible', 'RateLimiterSwl, library', 'zset', swlFlexible('zset', true)],
  ];
}

// Microseconds the server spent on every command since the last reset.
async function serverMicros(redis) {
  const info = await redis.sendCommand(['INFO', 'commandstats']);
  let total = 0;
  for (const match of info.matchAll(/^cmdstat_([^:]+):calls=\d+,usec=(\d+)/gm)) {
    if (!['info', 'config|resetstat', 'config', 'memory|usage', 'memory', 'flushall'].includes(match[1])) total += Number(match[2]);
  }
  return total;
}

// `perClient` requests for each of `clients` clients, the clients at once;
// server microseconds per request.
async function drive(redis, request, clients, perClient) {
  await redis.sendCommand(['CONFIG', 'RESETSTAT']);
  await Promise.all(Array.from({ length: clients }, async (_, c) => {
    for (let i = 0; i < perClient; i += 1) await request(`client${c}`);
  }));
  return (await serverMicros(redis)) / (clients * perClient);
}

// Mean bytes per client key under `prefix`.
async function bytesPerClient(redis, prefix, clients) {
  let total = 0;
  for (let c = 0; c < clients; c += 1) {
    total += Number(await redis.sendCommand(['MEMORY', 'USAGE', `${prefix}client${c}`, 'SAMPLES', '0']));
  }
  return total / clients;
}

async function main() {
  const server = await RedisServer.start();
  const redis = createClient({ url: server.url });
  await redis.connect();
  try {
    console.log(`Node rate limiters on one server (${CLIENTS} clients, limit ${LIMIT} per hour; ` +
      'server microseconds per request, bytes per client)');
    const rows = [];
    for (const [library, name, encoding, make] of variants(redis)) {
      await redis.sendCommand(['FLUSHALL']);
      await redis.sendCommand(['CONFIG', 'SET', 'swl.encoding', encoding]);
      const request = make(LIMIT, 'bench:');
      const admitted = await drive(redis, request, CLIENTS, LIMIT);
      const atLimit = await bytesPerClient(redis, 'bench:', CLIENTS);
      const denied = await drive(redis, request, CLIENTS, LIMIT);
      const big = make(BIG_LIMIT, 'big:');
      await drive(redis, big, BIG_CLIENTS, BIG_LIMIT);
      const atBigLimit = await bytesPerClient(redis, 'big:', BIG_CLIENTS);
      rows.push({ library, name, admitted, denied, atLimit, atBigLimit });
    }
    console.log(`${'library'.padEnd(22)} ${'limiter'.padEnd(33)} ${'admitted'.padStart(9)} ${'denied'.padStart(8)} ` +
      `${'B@100'.padStart(8)} ${'B@10000'.padStart(10)}`);
    for (const r of rows) {
      console.log(`${r.library.padEnd(22)} ${r.name.padEnd(33)} ${r.admitted.toFixed(2).padStart(9)} ` +
        `${r.denied.toFixed(2).padStart(8)} ${r.atLimit.toFixed(0).padStart(8)} ${r.atBigLimit.toFixed(0).padStart(10)}`);
    }
    for (const library of ['express-rate-limit', 'rate-limiter-flexible']) {
      const [fixed, ...sliding] = rows.filter((r) => r.library === library);
      for (const r of sliding) {
        console.log(`${library}: ${r.name} / ${fixed.name}: admitted ${(r.admitted / fixed.admitted).toFixed(2)}x, ` +
          `denied ${(r.denied / fixed.denied).toFixed(2)}x, memory at ${LIMIT} ${(r.atLimit / fixed.atLimit).toFixed(1)}x, ` +
          `at ${BIG_LIMIT} ${(r.atBigLimit / fixed.atBigLimit).toFixed(0)}x`);
      }
    }

    // The costliest single call: a consume of the largest cost the module
    // takes, on a new key of a limiter of that many points (every unit is
    // written). Client-side milliseconds, median and worst of a few keys.
    const costliest = [];
    for (const [encoding, library] of [['zset', false], ['compact', false], ['zset', true], ['compact', true]]) {
      await redis.sendCommand(['FLUSHALL']);
      await redis.sendCommand(['CONFIG', 'SET', 'swl.encoding', encoding]);
      const limiter = new RateLimiterSwl({ storeClient: redis, points: COSTLIEST, duration: 3600, keyPrefix: 'costly', encoding });
      limiter.swl.usesLibrary = library;
      await limiter.consume('warm-up', 1);
      const times = [];
      for (let run = 0; run < COSTLIEST_RUNS; run += 1) {
        const started = process.hrtime.bigint();
        await limiter.consume(`key${run}`, COSTLIEST);
        times.push(Number(process.hrtime.bigint() - started) / 1e6);
      }
      times.sort((a, b) => a - b);
      costliest.push(`${library ? 'library' : 'module'} ${encoding} ${times[COSTLIEST_RUNS >> 1].toFixed(1)} ms ` +
        `(worst ${times[times.length - 1].toFixed(1)})`);
    }
    console.log(`costliest single call, RateLimiterSwl.consume(key, ${COSTLIEST}) on a new key: ${costliest.join(', ')}`);
  } finally {
    redis.destroy();
    await server.stop();
  }
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
