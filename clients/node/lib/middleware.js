// Express middleware on redis-swl: one SWL.CHECK per request (or its FCALL
// where the server has no module), keyed by what the application's key
// function returns for the request (by default the client's address: the
// TCP peer), with RateLimit-Policy, RateLimit and Retry-After headers. When
// Redis cannot answer within the timeout, for whatever reason (refused,
// reset, timed out, any error reply), the policy answers instead: 'open'
// admits (and logs and counts it), 'closed' refuses with 503, 'local'
// decides in this process for at most maxLocalClients clients. Redis is
// tried again after a backoff that doubles up to a second, so the app
// returns to it by itself.
//
//   const limiter = rateLimit({ url: 'redis://127.0.0.1:6379/', windows: [[60000, 100], [1000, 10]] });
//   app.use(limiter);           // limits the routes registered after it
//   app.post('/login', rateLimit({ url, windows: [[60000, 5]], key: byAccount }), login);
//   limiter.failures();         // requests the policy decided, for a health endpoint
//
// A denied client's next requests are answered from a denial cache until
// its wait has passed, without a call to Redis (RateLimit-Source: cache;
// lib/cache.js). With a prom-client registry as `metrics`, each decision is
// counted by limiter `name`, decision and source (lib/metrics.js).
'use strict';

const { performance } = require('node:perf_hooks');
const { SWL, withTimeout } = require('./client');
const { DenialCache, DEFAULT_KEYS } = require('./cache');
const { LocalLimiter, MAX_WINDOWS } = require('./local');
const { decisionMetrics } = require('./metrics');

const POLICIES = Object.freeze(['open', 'closed', 'local']);

// The default key: the TCP peer's address, never a header the client chose
// (req.ip is the same unless the app sets 'trust proxy').
function clientAddress(req) {
  return req.socket.remoteAddress || 'unknown';
}

// The draft's structured headers, all from the window the verdict names
// (the reset is capped at that window: the reply gives it for the widest).
function rateLimitHeaders(verdict) {
  const seconds = (ms) => Math.max(0, Math.ceil(ms / 1000));
  const name = `"${verdict.windowMs}ms"`;
  const headers = {
    'RateLimit-Policy': `${name};q=${verdict.limit};w=${seconds(verdict.windowMs)}`,
    RateLimit: `${name};r=${verdict.remaining};t=${seconds(Math.min(verdict.resetAfterMs, verdict.windowMs))}`,
  };
  if (!verdict.allowed && verdict.retryAfterMs >= 0) {
    headers['Retry-After'] = String(Math.max(1, seconds(verdict.retryAfterMs)));
  }
  return headers;
}

function checkWindows(windows) {
  const valid = Array.isArray(windows) && windows.length > 0 && windows.every(
    (w) => Array.isArray(w) && w.length === 2 && Number.isSafeInteger(w[0]) && w[0] > 0
      && Number.isSafeInteger(w[1]) && w[1] >= 0,
  );
  if (!valid) throw new TypeError('windows must be [[windowMs, limit], ...]: whole numbers, windowMs above 0');
  if (windows.length > MAX_WINDOWS) {
    throw new TypeError(`windows: at most ${MAX_WINDOWS} [windowMs, limit] pairs, not ${windows.length}`);
  }
}

// Error replies about the server's state rather than the call: after a
// failover the address may lead elsewhere, so the connection is replaced.
const SERVER_STATE = /^(READONLY|LOADING|MASTERDOWN|BUSY|CLUSTERDOWN|TRYAGAIN|NOREPLICAS)\b/;

// A node-redis connection that queues nothing while disconnected, shared
// by concurrent requests once it is ready, and dropped when a command on it
// fails other than by an error reply about the call (refused, reset, timed
// out, READONLY), so that the next attempt connects afresh. Only the
// connection that failed is dropped: a request that failed on an old one
// leaves a new one alone.
function connection(url, timeoutMs) {
  const { createClient, ErrorReply } = require('redis'); // eslint-disable-line global-require
  let ready = null; // a promise of the connected client
  let current = null;
  const drop = (failed) => {
    if (failed !== undefined && failed !== current) return;
    const old = current;
    current = null;
    ready = null;
    try {
      if (old) old.destroy();
    } catch {
      // already closed
    }
  };
  const connected = () => {
    if (!ready) {
      const fresh = createClient({
        url,
        socket: { connectTimeout: timeoutMs, reconnectStrategy: false },
        disableOfflineQueue: true,
      });
      fresh.on('error', () => {}); // failures surface as rejected calls
      current = fresh;
      ready = fresh.connect().then(() => fresh, (error) => {
        drop(fresh);
        throw error;
      });
    }
    return ready;
  };
  const sendCommand = async (...args) => {
    const client = await withTimeout(connected(), timeoutMs);
    try {
      return await withTimeout(client.sendCommand(args), timeoutMs);
    } catch (error) {
      if (!(error instanceof ErrorReply) || SERVER_STATE.test(error.message)) drop(client);
      throw error;
    }
  };
  return { sendCommand, connected, drop: () => drop() };
}

// A response that, with refundFailed, does not count: 4xx and 5xx.
function failedResponse(status) {
  return status >= 400;
}

// The routes option checked: a path prefix to its windows ([] exempts it).
function checkRoutes(routes) {
  if (routes === null || typeof routes !== 'object' || Array.isArray(routes)) {
    throw new TypeError("routes must be { '/prefix': [[windowMs, limit], ...], ... }");
  }
  for (const [prefix, windows] of Object.entries(routes)) {
    if (!prefix.startsWith('/')) throw new TypeError(`routes: a prefix starts with /, not ${JSON.stringify(prefix)}`);
    if (!(Array.isArray(windows) && windows.length === 0)) checkWindows(windows);
  }
  return routes;
}

// key(req) names the client a request counts against: a string, or a
// promise of one. Redis is reached through one of url (a connection the
// middleware makes and replaces after a failure), client (a node-redis or
// ioredis client of the app's) or sendCommand, as SWL takes them.
function rateLimit({
  url,
  client,
  sendCommand,
  windows,
  cost = 1,
  policy = 'open',
  timeoutMs = 50,
  maxLocalClients = 10000,
  keyPrefix = 'rl:',
  key = clientAddress,
  encoding = 'compact',
  denialCacheKeys = DEFAULT_KEYS,
  name = 'default',
  metrics,
  routes = {},
  refundFailed = false,
  failed = failedResponse,
}) {
  if ([url, client, sendCommand].filter((x) => x !== undefined).length !== 1) {
    throw new TypeError('redis-swl: give exactly one of url, client or sendCommand');
  }
  if (!POLICIES.includes(policy)) {
    throw new TypeError(`unknown policy "${policy}" (accepted: ${POLICIES.join(', ')})`);
  }
  checkWindows(windows);
  if (!Number.isSafeInteger(cost) || cost < 1 || cost > 100000) {
    throw new TypeError(`cost must be a whole number from 1 to 100000, not ${String(cost)}`);
  }
  if (!Number.isSafeInteger(timeoutMs) || timeoutMs < 1) {
    throw new TypeError(`timeoutMs must be a whole number of milliseconds above 0, not ${String(timeoutMs)}`);
  }
  checkRoutes(routes);
  if (typeof failed !== 'function') throw new TypeError('failed must be a function of the status code');
  const cache = new DenialCache(denialCacheKeys);
  const record = metrics === undefined || metrics === null ? null : decisionMetrics(metrics, name);
  // A connection made from url times each command itself, so that it can
  // drop the connection a command timed out on; the app's own client is
  // kept, and each command given timeoutMs.
  const redis = url !== undefined
    ? connection(url, timeoutMs)
    : { connected: () => Promise.resolve(), drop: () => {} };
  const swl = url !== undefined
    ? new SWL({ sendCommand: redis.sendCommand, encoding })
    : new SWL({ client, sendCommand, encoding, timeoutMs });
  // The route (its prefix, or '' for none) and the windows a request's
  // path within the app is held to: the longest prefix that covers it
  // ('/search' covers '/search/x', not '/searchable'), compared as the
  // app routes: without case unless it has 'case sensitive routing' on.
  // Each set of windows with what its calls send, made once: the first
  // window, and the cost and the others as options.
  const limitsOf = (held) => {
    if (held.length === 0) return { windows: held };
    const [[windowMs, limit], ...moreWindows] = held;
    return { windows: held, windowMs, limit, options: { cost, windows: moreWindows } };
  };
  const everyRequest = limitsOf(windows);
  // Longest prefix first, with the forms paths are compared in.
  const routeLimits = Object.keys(routes)
    .sort((a, b) => b.length - a.length)
    .map((prefix) => ({
      prefix,
      exact: prefix,
      folded: prefix.toLowerCase(),
      limits: limitsOf(routes[prefix]),
    }));
  const limitsFor = (req) => {
    const raw = req.path !== undefined ? req.path : String(req.url || '/').split('?')[0];
    const caseSensitive = Boolean(req.app && typeof req.app.get === 'function' && req.app.get('case sensitive routing'));
    const path = caseSensitive ? raw : raw.toLowerCase();
    for (const route of routeLimits) {
      const prefix = caseSensitive ? route.exact : route.folded;
      if (path === prefix || path.startsWith(`${prefix.replace(/\/+$/, '')}/`)) return [route.prefix, route.limits];
    }
    return ['', everyRequest];
  };
  // Each route keeps logs of its own.
  const logName = (route, who) => (route ? `${keyPrefix}${route}:${who}` : keyPrefix + who);
  const local = new LocalLimiter(maxLocalClients);
  let delayMs = 0;
  let retryAt = 0;
  let failures = 0;

  const check = async (name, held) => {
    if (Date.now() < retryAt) return null;
    try {
      const verdict = await swl.check(name, held.windowMs, held.limit, held.options);
      delayMs = 0;
      retryAt = 0;
      return verdict;
    } catch (error) {
      delayMs = Math.min(1000, delayMs * 2 || 50);
      retryAt = Date.now() + delayMs;
      console.warn(`rate limit: Redis unavailable (${error && error.message})`);
      return null;
    }
  };

  // Connect now rather than on the first request.
  redis.connected().catch(() => {});

  // Where a decision came from, counted once it is made.
  const decided = (started, allowed, source) => {
    if (record) record(allowed ? 'admitted' : 'denied', source, (performance.now() - started) / 1000);
  };

  // Gives a request's units back where they were recorded, if it ended
  // within the narrowest window: a refund removes the newest entries,
  // which after that may be another request's.
  const refundAfter = (name, held, source, decidedAt) => {
    if (Date.now() - decidedAt >= Math.min(...held.windows.map(([ms]) => ms))) return;
    if (source === 'local') {
      local.refund(name, held.windows, Date.now(), cost);
      return;
    }
    swl.refund(name, held.windowMs, held.limit, held.options)
      .catch((error) => console.warn(`rate limit: refund failed (${error && error.message})`))
      // Once Redis answered, or failed (the refund may be carried out).
      .finally(() => cache.forget(name));
  };

  const middleware = async (req, res, next) => {
    const started = performance.now();
    // The narrowest window a refund must come within counts from here.
    const decidedAt = Date.now();
    const [route, held] = limitsFor(req);
    if (held.windows.length === 0) return next();
    // Express 5 passes a key function's rejection on to the error handler.
    const name = logName(route, await key(req));
    const { windowMs, limit, options } = held;
    // A cached denial answers also while Redis fails: it is no failure.
    let verdict = cache.answer(name, windowMs, limit, options);
    let source = 'cache';
    if (verdict === null) {
      const ticket = cache.ticket();
      verdict = await check(name, held);
      source = 'redis';
      if (verdict !== null) cache.keep(name, windowMs, limit, options, verdict, ticket);
    }
    if (verdict === null) {
      failures += 1;
      if (policy === 'open') {
        console.warn(`rate limit: failing open for ${name}`);
        decided(started, true, 'open');
        res.set('RateLimit-Source', 'open');
        return next();
      }
      if (policy === 'closed') {
        decided(started, false, 'closed');
        res.set({ 'Retry-After': '1', 'RateLimit-Source': 'closed' });
        return res.status(503).type('text/plain').send('rate limiter unavailable\n');
      }
      verdict = local.check(name, held.windows, Date.now(), cost);
      source = 'local';
    }
    decided(started, verdict.allowed, source);
    res.set(rateLimitHeaders(verdict));
    res.set('RateLimit-Source', source);
    if (verdict.allowed) {
      if (refundFailed && (source === 'redis' || source === 'local')) {
        res.on('finish', () => {
          try {
            if (failed(res.statusCode)) refundAfter(name, held, source, decidedAt);
          } catch (error) {
            console.warn(`rate limit: failed(${res.statusCode}) threw (${error && error.message})`);
          }
        });
      }
      return next();
    }
    return res.status(429).type('text/plain').send('too many requests\n');
  };
  // Deletes a client's logs (`who`: what the key function returned, before
  // the prefix), each route's too, and drops their cached denials and local
  // logs, so that its next request is admitted as a new client's. Resolves
  // true if there was a log.
  middleware.reset = async (who) => {
    const names = [logName('', who)].concat(
      Object.entries(routes).filter(([, held]) => held.length > 0).map(([route]) => logName(route, who)),
    );
    try {
      // One by one (in a cluster they may be on different nodes), each
      // tried whatever the others did; the first failure is rejected with.
      const outcomes = [];
      for (const name of names) {
        outcomes.push(await swl.reset(name).then((deleted) => ({ deleted }), (error) => ({ error })));
      }
      const failure = outcomes.find((outcome) => 'error' in outcome);
      if (failure) throw failure.error;
      return outcomes.some((outcome) => outcome.deleted);
    } finally {
      for (const name of names) {
        cache.forget(name);
        local.forget(name);
      }
    }
  };
  // Gives back `units` of a client's newest recorded units (SWL.REFUND) on
  // the windows every request is held to, and drops its cached denials: a
  // request that should not count after all.
  middleware.refund = async (who, units = cost) => {
    const name = logName('', who);
    try {
      return await swl.refund(name, everyRequest.windowMs, everyRequest.limit, { ...everyRequest.options, cost: units });
    } finally {
      cache.forget(name);
    }
  };
  // The denial cache, for cache.forget(name) after a change made elsewhere.
  middleware.denialCache = cache;
  // Requests decided by the failure policy since start.
  middleware.failures = () => failures;
  // Closes the connection to Redis.
  middleware.close = redis.drop;
  return middleware;
}

module.exports = {
  rateLimit, clientAddress, rateLimitHeaders, failedResponse, POLICIES,
};
