// Rate-limiting HTTP requests with SWL.CHECK from Node.js (node-redis).
//
// Maps each reply to response headers: RateLimit-Policy and RateLimit as in
// the IETF httpapi rate-limit headers draft, and Retry-After in whole
// seconds, rounded up. When Redis cannot be reached the handler either
// fails open, admitting through a small in-process limiter (a looser,
// per-instance limit), or fails closed, refusing with 503.
//
//   npm install
//   node http_headers.js redis://127.0.0.1:6379/ alice 5 3 60000 open
//
// prints one line per request: the status and the headers it would send.

'use strict';

const { createClient } = require('redis');

const secondsRoundedUp = (ms) => Math.ceil(ms / 1000);

function response([allowed, limit, remaining, retryAfterMs, resetAfterMs], windowMs) {
  let line =
    `${allowed ? 200 : 429} RateLimit-Policy: "default";q=${limit};w=${secondsRoundedUp(windowMs)}` +
    ` | RateLimit: "default";r=${remaining};t=${secondsRoundedUp(resetAfterMs)}`;
  // -1 means waiting cannot help (the cost exceeds the limit): no hint.
  if (!allowed && retryAfterMs >= 0) line += ` | Retry-After: ${secondsRoundedUp(retryAfterMs)}`;
  return line;
}

// The fail-open fallback: the same sliding-window log, in this process.
class LocalLimiter {
  constructor() {
    this.logs = new Map();
  }

  check(client, limit, windowMs) {
    const now = Date.now();
    const log = this.logs.get(client) || [];
    while (log.length && log[0] <= now - windowMs) log.shift();
    const allowed = log.length < limit;
    if (allowed) log.push(now);
    this.logs.set(client, log);
    const retry = !allowed && limit > 0 && log.length ? Math.max(1, log[0] + windowMs - now) : -1;
    const reset = log.length ? log[log.length - 1] + windowMs - now : 0;
    return [allowed, limit, Math.max(0, limit - log.length), retry, reset];
  }
}

async function connect(url) {
  const client = createClient({ url, socket: { connectTimeout: 1000, reconnectStrategy: false } });
  client.on('error', () => {}); // failures surface as rejected commands
  try {
    await client.connect();
    return client;
  } catch {
    return null;
  }
}

async function main() {
  const [url, clientId, requests, limit, windowMs, mode] = process.argv.slice(2);
  if (mode === undefined) {
    console.error('usage: node http_headers.js <redis-url> <client> <requests> <limit> <window_ms> <open|closed>');
    process.exit(2);
  }
  const redis = await connect(url);
  const local = new LocalLimiter();
  for (let i = 0; i < Number(requests); i++) {
    let reply = null;
    try {
      if (redis) reply = await redis.sendCommand(['SWL.CHECK', `rl:${clientId}`, windowMs, limit, '*']);
    } catch {
      reply = null;
    }
    if (reply) {
      console.log(response([reply[0] === 1, ...reply.slice(1)], Number(windowMs)));
    } else if (mode === 'open') {
      // Redis is unreachable: keep serving, or refuse.
      console.log(response(local.check(clientId, Number(limit), Number(windowMs)), Number(windowMs)) + ' (local)');
    } else {
      console.log('503 Retry-After: 1');
    }
  }
  if (redis) await redis.quit();
}

main();
