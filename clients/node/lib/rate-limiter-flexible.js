// RateLimiterSwl: a rate-limiter-flexible limiter on redis-swl, beside its
// RateLimiterRedis and constructed the same way. `points` per `duration`
// seconds is a sliding log: a consume that does not fit is rejected and
// records nothing (RateLimiterRedis counts it).
'use strict';

const RateLimiterStoreAbstract = require('rate-limiter-flexible/lib/RateLimiterStoreAbstract');
const RateLimiterRes = require('rate-limiter-flexible/lib/RateLimiterRes');
const { SWL, MAX_LIMIT } = require('./client');

// The most entries one call writes (the module's cap on COST).
const MAX_COST = 100000;

class RateLimiterSwl extends RateLimiterStoreAbstract {
  // opts: rate-limiter-flexible's (storeClient: a node-redis client or
  // cluster, or an ioredis client; points; duration; keyPrefix;
  // blockDuration; insuranceLimiter), plus encoding and timeoutMs as SWL
  // takes them. A timeout is what lets the insurance limiter answer while
  // Redis is stalled.
  constructor(opts = {}) {
    super(opts);
    if (this.inMemoryBlockOnConsumed > 0) {
      throw new TypeError('RateLimiterSwl: inMemoryBlockOnConsumed is not supported: a rejected consume records nothing');
    }
    if (this.execEvenly) throw new TypeError('RateLimiterSwl: execEvenly is not supported');
    this.client = opts.storeClient;
    this.swl = new SWL({ client: opts.storeClient, encoding: opts.encoding, timeoutMs: opts.timeoutMs });
    this.windowMs(); // refuses a duration that is no window now, not at the first call
  }

  windowMs(options) {
    const ms = this._getKeySecDuration(options) * 1000;
    if (!Number.isSafeInteger(ms) || ms < 1) {
      throw new TypeError(`RateLimiterSwl: a duration of ${ms / 1000} s is not a window of whole milliseconds`);
    }
    return ms;
  }

  // What a limiter reply says of a log holding `units`.
  result(units, msBeforeNext, isFirstInDuration) {
    return new RateLimiterRes(Math.max(0, this.points - units), msBeforeNext, units, isFirstInDuration);
  }

  // Admitted: msBeforeNext is when every point is back (the newest entry
  // leaves the window). Rejected: when this consume would fit (-1: never,
  // it asks for more than `points`); consumedPoints is then what the log
  // holds, up to `points`.
  async _consume(key, pointsToConsume = 1, options = {}) {
    const rlKey = this.getKey(key);
    const windowMs = this.windowMs(options);
    const verdict = await this.swl.check(rlKey, windowMs, this.points, { cost: pointsToConsume });
    const units = this.points - verdict.remaining;
    if (verdict.allowed) return this.result(units, verdict.resetAfterMs, units === pointsToConsume);
    const res = this.result(units, verdict.retryAfterMs, false);
    // blockDuration: a rejection blocks for at least blockDuration. Where
    // the log's own wait is as long, nothing is written; a rejection while
    // the log is over the limit (blocked, or penalised) writes nothing
    // either, so retrying neither lengthens a block nor grows the log.
    if (this.blockDuration > 0 && verdict.retryAfterMs >= 0 && verdict.retryAfterMs < this.msBlockDuration
      && (await this.swl.units(rlKey, windowMs)) <= this.points) {
      await this._block(rlKey, this._getBlockedPoints(), this.msBlockDuration, options);
      res.msBeforeNext = this.msBlockDuration;
      res.remainingPoints = 0;
    }
    throw res;
  }

  // Records `points` whatever the limit.
  async _penalty(key, points = 1, options = {}) {
    const verdict = await this.swl.check(this.getKey(key), this.windowMs(options), MAX_LIMIT, { cost: points });
    const units = MAX_LIMIT - verdict.remaining;
    return this.result(units, verdict.resetAfterMs, units === points);
  }

  // Gives back up to `points` of the newest recorded points (SWL.REFUND).
  async _reward(key, points = 1, options = {}) {
    const rlKey = this.getKey(key);
    const windowMs = this.windowMs(options);
    const [refunded, log] = await Promise.all([
      this.swl.refund(rlKey, windowMs, MAX_LIMIT, { cost: points }),
      this.swl.peek(rlKey, windowMs, 0),
    ]);
    return this.result(MAX_LIMIT - points - refunded.remaining, log.resetAfterMs, false);
  }

  // get(key) and delete(key) (rate-limiter-flexible's) prefix the key and
  // come here; get passes the result through _getRateLimiterRes. null for
  // a key with nothing in the window.
  async _get(rlKey, options = {}) {
    const { units, resetAfterMs } = await this.swl.usage(rlKey, this.windowMs(options));
    return units === 0 ? null : this.result(units, resetAfterMs, false);
  }

  _getRateLimiterRes(rlKey, changedPoints, result) {
    return result;
  }

  _delete(rlKey) {
    return this.swl.delete(rlKey);
  }

  // block(key, secDuration), and a rejected consume with blockDuration:
  // `initPoints` entries timed (on this process's clock) to leave the
  // window when the block ends, written by a check that is told it is that
  // time minus the window. Checked against a window of the block's length,
  // it trims what left the real window by now and sets the key's expiry to
  // when its newest entry leaves the real window.
  _block(rlKey, initPoints, msDuration, options = {}) {
    const blocking = async () => {
      if (!(msDuration > 0)) throw new TypeError('RateLimiterSwl: a block needs a duration of more than 0 s');
      const nowMs = Date.now() + msDuration - this.windowMs(options);
      // A call writes at most MAX_COST entries.
      for (let left = initPoints; left > 0; left -= MAX_COST) {
        await this.swl.check(rlKey, msDuration, MAX_LIMIT, { cost: Math.min(left, MAX_COST), nowMs });
      }
      return new RateLimiterRes(0, msDuration, initPoints);
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

module.exports = { RateLimiterSwl };
