// Rate limiting for Express on redis-swl: one SWL.CHECK per request, keyed
// by what the application's key function returns for it (by default the
// client's address: the TCP peer), with RateLimit-Policy, RateLimit and
// Retry-After headers. When Redis cannot answer within the timeout, for
// whatever reason (refused, reset, timed out, any error reply), the
// configured policy answers instead: 'open' admits (and logs and counts
// it), 'closed' refuses with 503, 'local' decides in this process for at
// most maxLocalClients clients. Redis is tried again after a backoff that
// doubles up to a second, so the app returns to it by itself.
//
//   const limiter = rateLimit({ url: 'redis://127.0.0.1:6379/', windows: [[60000, 100], [1000, 10]] });
//   app.use(limiter);   // limits the routes registered after it
//   limiter.failures(); // requests the policy decided, for a health endpoint
//
// docs/middleware.md shows key functions for an authenticated identity and
// for clients behind a trusted proxy.
'use strict';

const { createClient } = require('redis');

const POLICIES = ['open', 'closed', 'local'];

// The default key: the TCP peer's address, never a header the client chose
// (req.ip is the same unless the app sets 'trust proxy').
function clientAddress(req) {
  return req.socket.remoteAddress || 'unknown';
}

// key(req) names the client a request counts against: a string, or a
// promise of one.
function rateLimit({
  url,
  windows,
  cost = 1,
  policy = 'open',
  timeoutMs = 50,
  maxLocalClients = 10000,
  keyPrefix = 'rl:',
  key = clientAddress,
}) {
  if (!POLICIES.includes(policy)) {
    throw new Error(`unknown policy "${policy}" (accepted: ${POLICIES.join(', ')})`);
  }
  const local = new LocalLimiter(maxLocalClients);
  let client = null;
  let delayMs = 0;
  let retryAt = 0;
  let failures = 0;

  const args = (name) => {
    const [[windowMs, limit], ...rest] = windows;
    const list = ['SWL.CHECK', name, String(windowMs), String(limit), '*'];
    for (const [w, l] of rest) list.push('WINDOW', String(w), String(l));
    return list.concat('COST', String(cost));
  };

  // A connection that failed is dropped; the next attempt connects afresh.
  const dropClient = () => {
    const old = client;
    client = null;
    try {
      if (old) old.destroy();
    } catch {
      // already closed
    }
  };

  const connected = async () => {
    if (!client) {
      const fresh = createClient({
        url,
        socket: { connectTimeout: timeoutMs, reconnectStrategy: false },
        disableOfflineQueue: true,
      });
      fresh.on('error', () => {}); // failures surface as rejected calls
      client = fresh;
      await fresh.connect();
    }
    return client;
  };

  const check = async (name) => {
    if (Date.now() < retryAt) return null;
    let timer;
    const timeout = new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error('timeout')), timeoutMs);
    });
    try {
      const reply = await Promise.race([connected().then((c) => c.sendCommand(args(name))), timeout]);
      delayMs = 0;
      retryAt = 0;
      const [allowed, limit, remaining, retryAfterMs, resetAfterMs, windowMs] = reply.map(Number);
      return { allowed: allowed === 1, limit, remaining, retryAfterMs, resetAfterMs, windowMs };
    } catch (error) {
      if (!(error && error.constructor && error.constructor.name === 'ErrorReply')) dropClient();
      delayMs = Math.min(1000, delayMs * 2 || 50);
      retryAt = Date.now() + delayMs;
      console.warn(`rate limit: Redis unavailable (${error && error.message})`);
      return null;
    } finally {
      clearTimeout(timer);
    }
  };

  // Connect now rather than on the first request.
  connected().catch(dropClient);

  const middleware = async (req, res, next) => {
    // Express 5 passes a key function's rejection on to the error handler.
    const name = keyPrefix + (await key(req));
    let verdict = await check(name);
    let source = 'redis';
    if (verdict === null) {
      failures += 1;
      if (policy === 'open') {
        console.warn(`rate limit: failing open for ${name}`);
        res.set('RateLimit-Source', 'open');
        return next();
      }
      if (policy === 'closed') {
        res.set({ 'Retry-After': '1', 'RateLimit-Source': 'closed' });
        return res.status(503).type('text/plain').send('rate limiter unavailable\n');
      }
      verdict = local.check(name, windows, cost, Date.now());
      source = 'local';
    }
    res.set(rateLimitHeaders(verdict));
    res.set('RateLimit-Source', source);
    if (verdict.allowed) return next();
    return res.status(429).type('text/plain').send('too many requests\n');
  };
  // Requests decided by the failure policy since start.
  middleware.failures = () => failures;
  return middleware;
}

// The draft's structured headers, all from the window the reply names (the
// reset is capped at that window: the reply gives it for the widest).
function rateLimitHeaders(v) {
  const seconds = (ms) => Math.max(0, Math.ceil(ms / 1000));
  const name = `"${v.windowMs}ms"`;
  const headers = {
    'RateLimit-Policy': `${name};q=${v.limit};w=${seconds(v.windowMs)}`,
    RateLimit: `${name};r=${v.remaining};t=${seconds(Math.min(v.resetAfterMs, v.windowMs))}`,
  };
  if (!v.allowed && v.retryAfterMs >= 0) headers['Retry-After'] = String(Math.max(1, seconds(v.retryAfterMs)));
  return headers;
}

// A sliding-window log per client in this process, for at most maxClients
// clients: the least recently seen is forgotten first (a Map keeps order).
class LocalLimiter {
  constructor(maxClients) {
    this.maxClients = maxClients;
    this.logs = new Map();
  }

  check(key, windows, cost, now) {
    const widest = Math.max(...windows.map(([w]) => w));
    const log = (this.logs.get(key) || []).filter((t) => t + widest > now);
    this.logs.delete(key);
    const inside = (w) => log.filter((t) => t + w > now);
    const allowed = windows.every(([w, l]) => inside(w).length + cost <= l);
    if (allowed) for (let i = 0; i < cost; i += 1) log.push(now);
    let best = null;
    for (const [windowMs, limit] of windows) {
      const entries = inside(windowMs);
      const fits = entries.length + cost <= limit;
      let retryAfterMs = -1;
      if (!allowed && !fits && cost <= limit) retryAfterMs = entries[entries.length + cost - limit - 1] + windowMs - now;
      const v = {
        allowed, limit, remaining: Math.max(0, limit - entries.length), retryAfterMs,
        resetAfterMs: log.length ? log[log.length - 1] + widest - now : 0, windowMs,
      };
      let better;
      if (best === null) better = allowed || !fits;
      else if (allowed) better = v.remaining < best.remaining;
      else better = !fits && best.retryAfterMs !== -1 && (retryAfterMs === -1 || retryAfterMs > best.retryAfterMs);
      if (better) best = v;
    }
    if (log.length && this.maxClients > 0) {
      this.logs.set(key, log);
      while (this.logs.size > this.maxClients) this.logs.delete(this.logs.keys().next().value);
    }
    return best || {
      allowed, limit: windows[0][1], remaining: 0, retryAfterMs: allowed ? -1 : 1, resetAfterMs: 0, windowMs: windows[0][0],
    };
  }
}

module.exports = { rateLimit, clientAddress, rateLimitHeaders, LocalLimiter };
