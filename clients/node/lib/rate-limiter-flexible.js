// RateLimiterSwl: a rate-limiter-flexible limiter on redis-swl, beside its
// RateLimiterRedis and constructed the same way. `points` per `duration`
// seconds is a sliding log: a consume that does not fit is rejected and
// records nothing (RateLimiterRedis counts it).
'use strict';

const RateLimiterStoreAbstract = require('rate-limiter-flexible/lib/RateLimiterStoreAbstract');
const RateLimiterRes = require('rate-limiter-flexible/lib/RateLimiterRes');
const { SWL, MAX_LIMIT } = require('./client');
const { DenialCache, DEFAULT_KEYS } = require('./cache');

// The most entries one call writes (the module's cap on COST).
const MAX_COST = 100000;

// What follows the peer's key name in ours: RateLimiterRedis keeps a
// counter (a string) at `keyPrefix:key`, and a log there would answer its
// calls, and ours, with WRONGTYPE while both run.
const KEY_SUFFIX = ':swl';

// A block "for ever" (block(key, 0)): entries that leave the window in a
// century, on a key that expires then. A wait longer than half of it is
// reported as -1, as RateLimiterRedis reports a key without expiry.
const FOREVER_MS = 100 * 365 * 24 * 3600 * 1000;

// A cost as RateLimiterRedis takes it: an integer, or a string of one,
// refused with its messages otherwise.
function costOf(points) {
  if (typeof points === 'string') {
    if (!/^[1-9][0-9]*$/.test(points)) {
      throw new Error('Consuming string different than integer values is not supported by this package');
    }
    return Number(points);
  }
  if (!Number.isInteger(points)) throw new Error('Consuming decimal number of points is not supported by this package');
  return points;
}

class RateLimiterSwl extends RateLimiterStoreAbstract {
  // opts: rate-limiter-flexible's (storeClient: a node-redis client or
  // cluster, or an ioredis client; points; duration; keyPrefix;
  // blockDuration; blockOnConsumed; insuranceLimiter;
  // rejectIfRedisNotReady), plus keySuffix (':swl'; '' keeps the keys of
  // redis-swl 0.3), encoding and timeoutMs as SWL takes them. A timeout is
  // what lets the insurance limiter answer while Redis is stalled.
  //
  // inMemoryBlockOnConsumed (equal to points: a rejected consume records
  // nothing, so the log holds no more) keeps a key's rejections in a
  // denial cache (lib/cache.js, 10,000 keys), answered without Redis until
  // their msBeforeNext has passed, as RateLimiterRedis keeps them in memory;
  // denialCache gives one of the application's instead. None by default.
  constructor(opts = {}) {
    super(opts);
    if (this.inMemoryBlockDuration > 0) {
      throw new TypeError('RateLimiterSwl: inMemoryBlockDuration is not supported: a rejection is kept in memory until it ends');
    }
    if (this.inMemoryBlockOnConsumed > this.points) {
      throw new TypeError(`RateLimiterSwl: inMemoryBlockOnConsumed must equal points (${this.points}): a rejected consume records nothing`);
    }
    let denialCache = opts.denialCache || null;
    if (!denialCache && this.inMemoryBlockOnConsumed > 0) denialCache = new DenialCache(DEFAULT_KEYS);
    if (denialCache && this._isBlockOnConsumedEnabled()) {
      throw new TypeError('RateLimiterSwl: a denial cache with blockOnConsumed is not supported: every rejected consume is recorded until it blocks');
    }
    if (this.execEvenly) throw new TypeError('RateLimiterSwl: execEvenly is not supported');
    this.client = opts.storeClient;
    this.keySuffix = opts.keySuffix === undefined ? KEY_SUFFIX : opts.keySuffix;
    if (typeof this.keySuffix !== 'string') throw new TypeError('RateLimiterSwl: keySuffix must be a string');
    this.rejectIfRedisNotReady = Boolean(opts.rejectIfRedisNotReady);
    this.swl = new SWL({ client: opts.storeClient, encoding: opts.encoding, timeoutMs: opts.timeoutMs });
    // Kept here rather than by the client: which denials it may keep
    // depends on blockDuration (see _consume).
    this.denialCache = denialCache;
    this.windowMs(); // refuses a duration that is no window now, not at the first call
  }

  windowMs(options) {
    const ms = this._getKeySecDuration(options) * 1000;
    if (!Number.isSafeInteger(ms) || ms < 1) {
      throw new TypeError(`RateLimiterSwl: a duration of ${ms / 1000} s is not a window of whole milliseconds`);
    }
    return ms;
  }

  // The log of a key as rate-limiter-flexible names it (getKey: the
  // peer's name), where this limiter keeps it.
  logKey(rlKey) {
    return rlKey + this.keySuffix;
  }

  // rejectIfRedisNotReady: a client that is not connected fails the call at
  // once (so the insurance limiter answers), rather than queueing it. The
  // checks are RateLimiterRedis's.
  ready(rlKey, isReadOnly) {
    if (!this.rejectIfRedisNotReady) return;
    const { client } = this;
    let ready = true;
    if (typeof client.status === 'string') {
      ready = client.status === 'ready'; // ioredis
    } else if (typeof client.isReady === 'boolean') {
      ready = client.isReady; // node-redis client
    } else if (client._slots && typeof client._slots.getClient === 'function') { // node-redis cluster
      try {
        const node = client.isOpen === false ? null : client._slots.getClient(rlKey, isReadOnly);
        ready = Boolean(node && node.isReady === true);
      } catch {
        ready = false;
      }
    }
    if (!ready) throw new Error('Redis connection is not ready');
  }

  // What a limiter reply says of a log holding `units`.
  result(units, msBeforeNext, isFirstInDuration) {
    const ms = msBeforeNext > FOREVER_MS / 2 ? -1 : msBeforeNext;
    return new RateLimiterRes(Math.max(0, this.points - units), ms, units, isFirstInDuration);
  }

  // Admitted: msBeforeNext is when every point is back (the newest entry
  // leaves the window). Rejected: when this consume would fit (-1: never,
  // it asks for more than `points`); consumedPoints is then what the log
  // holds, up to `points`.
  async _consume(key, pointsToConsume = 1, options = {}) {
    const rlKey = this.getKey(key);
    const cost = costOf(pointsToConsume);
    this.ready(rlKey, false);
    const log = this.logKey(rlKey);
    const windowMs = this.windowMs(options);
    const cache = this.denialCache;
    const call = { cost };
    if (cache) {
      const cached = cache.answer(log, windowMs, this.points, call);
      if (cached) throw this.result(this.points - cached.remaining, cached.retryAfterMs, false);
    }
    const ticket = cache && cache.ticket();
    const verdict = await this.swl.check(log, windowMs, this.points, call);
    // With blockDuration, a rejection may write a block once its wait is
    // below blockDuration: only the block itself is kept then.
    if (cache && (verdict.allowed || !(this.blockDuration > 0))) cache.keep(log, windowMs, this.points, call, verdict, ticket);
    const units = this.points - verdict.remaining;
    if (verdict.allowed) return this.result(units, verdict.resetAfterMs, units === cost);
    const res = this.result(units, verdict.retryAfterMs, false);
    if (this.blockDuration > 0) {
      const blocks = this._isBlockOnConsumedEnabled()
        ? await this.crossesBlockOnConsumed(log, windowMs, cost)
        : await this.crossesLimit(log, windowMs, verdict.retryAfterMs);
      if (blocks) {
        await this._block(rlKey, this._getBlockedPoints(), this.msBlockDuration, options);
        res.msBeforeNext = this.msBlockDuration;
        res.remainingPoints = 0;
        // The log now denies until the block ends, and writes no block
        // before.
        if (cache) {
          const blocked = {
            ...verdict, remaining: 0, retryAfterMs: this.msBlockDuration, resetAfterMs: Math.max(verdict.resetAfterMs, this.msBlockDuration),
          };
          cache.keep(log, windowMs, this.points, call, blocked, ticket);
        }
      }
    }
    throw res;
  }

  // `pending`, after which a key's cached rejections are dropped (also
  // when it failed: a refund or delete that timed out may yet be done).
  forgetting(log, pending) {
    if (!this.denialCache) return pending;
    return pending.finally(() => this.denialCache.forget(log));
  }

  // blockDuration: a rejection blocks for at least blockDuration, a
  // consume of more than `points` too. Where the log's own wait is as
  // long, nothing is written; a rejection while the log is over the limit
  // (blocked, or penalised) writes nothing either, so retrying neither
  // lengthens a block nor grows the log.
  async crossesLimit(log, windowMs, retryAfterMs) {
    if (retryAfterMs >= this.msBlockDuration) return false;
    return (await this.swl.units(log, windowMs)) <= this.points;
  }

  // blockOnConsumed: as RateLimiterRedis counts rejected consumes toward
  // it, a rejected consume is recorded while the log stays below the
  // threshold, and the one that reaches it blocks. Once the log holds the
  // threshold, a rejection writes nothing.
  async crossesBlockOnConsumed(log, windowMs, cost) {
    const counted = await this.swl.check(log, windowMs, this.blockOnConsumed - 1, { cost });
    if (counted.allowed) return false;
    return (await this.swl.units(log, windowMs)) < this.blockOnConsumed;
  }

  // Records `points` whatever the limit.
  async _penalty(key, points = 1, options = {}) {
    const rlKey = this.getKey(key);
    const cost = costOf(points);
    this.ready(rlKey, false);
    const verdict = await this.swl.check(this.logKey(rlKey), this.windowMs(options), MAX_LIMIT, { cost });
    const units = MAX_LIMIT - verdict.remaining;
    return this.result(units, verdict.resetAfterMs, units === cost);
  }

  // Gives back up to `points` of the newest recorded points (SWL.REFUND).
  async _reward(key, points = 1, options = {}) {
    const rlKey = this.getKey(key);
    const cost = costOf(points);
    this.ready(rlKey, false);
    const log = this.logKey(rlKey);
    const windowMs = this.windowMs(options);
    const [refunded, usage] = await this.forgetting(log, Promise.all([
      this.swl.refund(log, windowMs, MAX_LIMIT, { cost }),
      this.swl.peek(log, windowMs, 0),
    ]));
    return this.result(MAX_LIMIT - cost - refunded.remaining, usage.resetAfterMs, false);
  }

  // get(key) and delete(key) (rate-limiter-flexible's) prefix the key and
  // come here; get passes the result through _getRateLimiterRes. null for
  // a key with nothing in the window.
  async _get(rlKey, options = {}) {
    this.ready(rlKey, true);
    const { units, resetAfterMs } = await this.swl.usage(this.logKey(rlKey), this.windowMs(options));
    return units === 0 ? null : this.result(units, resetAfterMs, false);
  }

  _getRateLimiterRes(rlKey, changedPoints, result) {
    return result;
  }

  async _delete(rlKey) {
    this.ready(rlKey, false);
    return this.forgetting(this.logKey(rlKey), this.swl.delete(this.logKey(rlKey)));
  }

  // block(key, secDuration), and a rejected consume with blockDuration:
  // `initPoints` entries timed (on this process's clock) to leave the
  // window when the block ends, written by a check that is told it is that
  // time minus the window. Checked against a window of the block's length,
  // it trims what left the real window by now and sets the key's expiry to
  // when its newest entry leaves the real window. A duration of 0 blocks
  // for ever, as RateLimiterRedis's block does (a century here).
  _block(rlKey, initPoints, msDuration, options = {}) {
    const blocking = async () => {
      if (!(msDuration >= 0)) throw new TypeError('RateLimiterSwl: a block needs a duration of 0 s (for ever) or more');
      this.ready(rlKey, false);
      const ms = msDuration === 0 ? FOREVER_MS : msDuration;
      const nowMs = Date.now() + ms - this.windowMs(options);
      // A call writes at most MAX_COST entries.
      for (let left = initPoints; left > 0; left -= MAX_COST) {
        await this.swl.check(this.logKey(rlKey), ms, MAX_LIMIT, { cost: Math.min(left, MAX_COST), nowMs });
      }
      return new RateLimiterRes(0, msDuration === 0 ? -1 : msDuration, initPoints);
    };
    return new Promise((resolve, reject) => {
      blocking().then(resolve, (error) => {
        this._handleError(error, 'block', resolve, reject, [this.parseKey(rlKey), msDuration / 1000, options]);
      });
    });
  }

  async _set() {
    throw new Error('RateLimiterSwl: set is not supported: a sliding log holds entries, not a count');
  }
}

module.exports = { RateLimiterSwl, KEY_SUFFIX };
