// SwlStore: an express-rate-limit (v7, v8) store on redis-swl, constructed
// as rate-limit-redis's RedisStore is. express-rate-limit increments first
// and denies when totalHits > limit; this store decides in Redis instead
// (SWL.CHECK) and answers totalHits so that express-rate-limit's decision
// is the sliding log's: a denied request records nothing.
'use strict';

const { SWL } = require('./client');

// What follows rate-limit-redis's key name in ours: RedisStore keeps a
// counter (a string) at `prefix + key`, and a log there would answer its
// calls, and ours, with WRONGTYPE while both run.
const KEY_SUFFIX = ':swl';

class SwlStore {
  // options: sendCommand or sendCommandCluster (as rate-limit-redis takes
  // them, called with `this` the store, as it calls them, for subclasses)
  // or client; prefix ('rl:', as RedisStore's); keySuffix (':swl'; '' and
  // prefix 'swl:' keep the keys of redis-swl 0.3); limit, for a rate
  // limiter whose limit is a function (the largest it returns); encoding,
  // timeoutMs and denialCache as SWL takes them (no denial cache by
  // default: with one, a denied client's requests are answered denied
  // without Redis until its wait has passed; resetKey and decrement's
  // refunds drop its denials).
  constructor(options = {}) {
    const bound = { ...options };
    for (const name of ['sendCommand', 'sendCommandCluster']) {
      if (typeof options[name] === 'function') bound[name] = options[name].bind(this);
    }
    this.swl = new SWL(bound);
    this.prefix = options.prefix === undefined ? 'rl:' : String(options.prefix);
    this.keySuffix = options.keySuffix === undefined ? KEY_SUFFIX : options.keySuffix;
    if (typeof this.keySuffix !== 'string') throw new TypeError('SwlStore: keySuffix must be a string');
    this.fixedLimit = options.limit;
    this.windowMs = undefined;
    this.limit = undefined;
    // Denials by key, as the times their decrement stops being possible
    // (express-rate-limit skips a decrement once the reset time it was
    // given has passed). A denied request recorded nothing, so a decrement
    // that finds one pending gives nothing back (see decrement).
    this.denials = new Map();
    // Whether express-rate-limit decrements at all (skipFailedRequests or
    // skipSuccessfulRequests); set by init.
    this.decrements = false;
    // The size of `denials` at which stale ones are swept from every key.
    this.sweepAt = 1024;
    // Why init refused the limiter's options, for every increment to say
    // (express-rate-limit v8 only logs what init throws).
    this.initError = new Error('SwlStore: express-rate-limit did not initialise the store');
  }

  // Called by express-rate-limit as the limiter is created.
  init(options) {
    this.windowMs = options.windowMs;
    const limit = typeof options.limit === 'function' ? this.fixedLimit : (options.limit ?? options.max);
    if (!Number.isSafeInteger(limit) || limit < 0) {
      this.initError = new TypeError(
        'SwlStore: the limit must be a whole number; with a limit function, give the store one: new SwlStore({ limit })',
      );
      throw this.initError;
    }
    this.limit = limit;
    this.initError = null;
    this.decrements = Boolean(options.skipFailedRequests || options.skipSuccessfulRequests);
  }

  // The log of a client: rate-limit-redis's key for it, and the suffix.
  key(key) {
    return this.prefix + key + this.keySuffix;
  }

  async increment(key) {
    if (this.initError) throw this.initError;
    const verdict = await this.swl.check(this.key(key), this.windowMs, this.limit);
    const now = Date.now();
    if (verdict.allowed) {
      return { totalHits: this.limit - verdict.remaining, resetTime: new Date(now + verdict.resetAfterMs) };
    }
    // One more than the limit, so that express-rate-limit denies; the reset
    // is when the request would fit (or, for a limit of 0, a window).
    const waitMs = verdict.retryAfterMs >= 0 ? verdict.retryAfterMs : this.windowMs;
    const resetTime = new Date(now + waitMs);
    if (this.decrements) this.remember(key, resetTime.getTime(), now);
    return { totalHits: this.limit + 1, resetTime };
  }

  // Whether a denial's decrement will come depends on the status the
  // response ends with and on requestWasSuccessful, which the store cannot
  // know: every denial is remembered until its decrement would be skipped.
  // One that no decrement claims then only lapses; one claimed by an
  // admitted request's decrement instead leaves that request's unit
  // recorded, which can only make the limit stricter, never looser.
  remember(key, until, now) {
    const pending = (this.denials.get(key) || []).filter((time) => time > now);
    pending.push(until);
    this.denials.set(key, pending);
    if (this.denials.size >= this.sweepAt) {
      for (const [other, times] of this.denials) {
        const live = times.filter((time) => time > now);
        if (live.length) this.denials.set(other, live);
        else this.denials.delete(other);
      }
      this.sweepAt = Math.max(1024, 2 * this.denials.size);
    }
  }

  // Gives a request's unit back (SWL.REFUND). A denied request recorded
  // nothing, so a decrement that finds a denial pending takes it instead.
  async decrement(key) {
    const pending = this.denials.get(key);
    if (pending) {
      const now = Date.now();
      const waiting = pending.filter((resetTime) => resetTime > now);
      const denial = waiting.shift();
      if (waiting.length) this.denials.set(key, waiting);
      else this.denials.delete(key);
      if (denial !== undefined) return;
    }
    await this.swl.refund(this.key(key), this.windowMs, this.limit);
  }

  // The units in the window now and when the newest leaves it; undefined
  // for a client with none.
  async get(key) {
    const { units, resetAfterMs } = await this.swl.usage(this.key(key), this.windowMs);
    if (units === 0) return undefined;
    return { totalHits: units, resetTime: new Date(Date.now() + resetAfterMs) };
  }

  async resetKey(key) {
    this.denials.delete(key);
    await this.swl.reset(this.key(key));
  }
}

module.exports = { SwlStore, KEY_SUFFIX };
