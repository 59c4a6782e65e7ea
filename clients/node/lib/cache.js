// The denial cache: after Redis denies a check, the same key, windows and
// a cost at least as large are denied in the process until the reply's
// retryAfterMs has passed, without asking Redis again. A denial records
// nothing, so until then the log can only admit such a call if entries
// leave it some other way (a refund, a reset, a check with narrower
// windows, a failover to a lagging replica, a step of the server's clock);
// a refund or reset through the same client drops the key's entries, the
// others keep the cache stricter than Redis for at most the cached wait.
// The cache never admits. The design is the Rust crate's
// (clients/rust/src/cache.rs), name for name.
'use strict';

const { performance } = require('node:perf_hooks');
const { Verdict } = require('./client');

// Denials cached for different windows of one key, at most: one limiter
// uses one set of windows per key, so more is a sign of several.
const PER_KEY = 4;

// The number of keys the middleware's cache remembers by default.
const DEFAULT_KEYS = 10000;

// The windows of a call, first one first, as one string to compare.
const windowsOf = (windowMs, limit, windows = []) => JSON.stringify([[windowMs, limit], ...windows]);

// Whether a call may use and fill the cache: PENALIZE records denied
// requests in Redis, and a caller's nowMs is a time of its clock, which the
// cache's monotonic clock cannot place.
const cacheable = ({ penalize = false, nowMs } = {}) => !penalize && (nowMs === undefined || nowMs === null);

class DenialCache {
  // maxKeys: keys remembered at most (0 caches nothing), the least
  // recently used forgotten first. clock: milliseconds of a monotonic
  // clock (performance.now), for tests.
  constructor(maxKeys = DEFAULT_KEYS, { clock = () => performance.now() } = {}) {
    if (!Number.isSafeInteger(maxKeys) || maxKeys < 0) {
      throw new TypeError(`denial cache: maxKeys must be a whole number of at least 0, not ${String(maxKeys)}`);
    }
    this.maxKeys = maxKeys;
    this.clock = clock;
    // Key => { forgotten, denials }, least recently used first (a Map
    // keeps insertion order: a use deletes and sets the key again).
    this.keys = new Map();
    // Forgets so far: tickets are taken from it.
    this.forgets = 0;
    // The latest forget of a key no longer remembered: a ticket older than
    // that may be from before its forget, so it keeps nothing.
    this.forgottenBefore = 0;
  }

  // Keys remembered (with denials, or forgotten lately).
  get size() {
    return this.keys.size;
  }

  // The cached answer to a check of `options` on `key` (a Verdict), if a
  // denial of the same windows and at most its cost is still waiting;
  // null otherwise.
  answer(key, windowMs, limit, options = {}) {
    if (!cacheable(options)) return null;
    const entry = this.keys.get(String(key));
    if (!entry) return null;
    const now = this.clock();
    const windows = windowsOf(windowMs, limit, options.windows);
    const cost = options.cost === undefined ? 1 : options.cost;
    entry.denials = entry.denials.filter((denial) => now < denial.until);
    const found = entry.denials.find((denial) => denial.windows === windows && cost >= denial.cost);
    if (entry.denials.length === 0 && entry.forgotten === 0) {
      this.keys.delete(String(key));
    } else if (found) {
      this.touch(String(key), entry);
    }
    return found ? at(found, now) : null;
  }

  // Taken before a check is sent, given back with its verdict to keep: a
  // forget in between wins, and the denial's wait counts from this moment
  // (Redis decided after it, so a cached denial never outlasts Redis's).
  ticket() {
    return { forgets: this.forgets, at: this.clock() };
  }

  // Keeps `verdict` of a check of `options` on `key` if it is a denial
  // that waiting ends; an admission drops the key's denials (entries were
  // added: they still deny, but their remaining and reset are of the log
  // before).
  keep(key, windowMs, limit, options, verdict, ticket) {
    if (!cacheable(options)) return;
    const name = String(key);
    if (verdict.allowed) {
      if (this.keys.has(name)) this.forget(name);
      return;
    }
    if (verdict.retryAfterMs < 1 || this.maxKeys === 0) return;
    const now = this.clock();
    const entry = this.keys.get(name);
    const forgotten = entry ? entry.forgotten : this.forgottenBefore;
    if (forgotten > ticket.forgets) return;
    const denial = {
      windows: windowsOf(windowMs, limit, options.windows),
      cost: options.cost === undefined ? 1 : options.cost,
      verdict,
      until: ticket.at + verdict.retryAfterMs,
    };
    if (!entry) {
      this.insert(name, { forgotten: 0, denials: [denial] });
      return;
    }
    // The newest denial of these windows replaces the one before.
    entry.denials = entry.denials.filter((d) => d.windows !== denial.windows && now < d.until);
    if (entry.denials.length === PER_KEY) entry.denials.shift();
    entry.denials.push(denial);
    this.touch(name, entry);
  }

  // Drops `key`'s denials: its log lost entries another way than the cache
  // can see (the client's own refunds and deletes do this themselves). A
  // check that was sent before and is answered after does not put its
  // denial back.
  forget(key) {
    const name = String(key);
    this.forgets += 1;
    if (this.maxKeys === 0) {
      this.forgottenBefore = this.forgets;
      return;
    }
    // Kept, empty, so that checks already sent keep nothing.
    const entry = this.keys.get(name);
    if (entry) {
      entry.denials = [];
      entry.forgotten = this.forgets;
      this.touch(name, entry);
    } else {
      this.insert(name, { forgotten: this.forgets, denials: [] });
    }
  }

  insert(name, entry) {
    this.keys.set(name, entry);
    while (this.keys.size > this.maxKeys) {
      const [oldest, dropped] = this.keys.entries().next().value;
      this.keys.delete(oldest);
      this.forgottenBefore = Math.max(this.forgottenBefore, dropped.forgotten);
    }
  }

  touch(name, entry) {
    this.keys.delete(name);
    this.keys.set(name, entry);
  }
}

// The denial as it stands at `now` (before its end): the waits less the
// time since, the rest as Redis gave it.
function at(denial, now) {
  const { verdict } = denial;
  const leftMs = Math.max(0, Math.ceil(denial.until - now));
  const elapsed = Math.max(0, verdict.retryAfterMs - leftMs);
  return new Verdict(false, verdict.limit, verdict.remaining, leftMs,
    Math.max(0, verdict.resetAfterMs - elapsed), verdict.windowMs);
}

module.exports = { DenialCache, DEFAULT_KEYS, cacheable };
