// redis-swl for Node: the client, an express-rate-limit store, a
// rate-limiter-flexible limiter, Express middleware and the local limiter.
// RateLimiterSwl loads rate-limiter-flexible, and rateLimit node-redis,
// when first used, so an app needs only the libraries it uses.
'use strict';

const { SWL, Verdict, TimeoutError, UncertainOutcomeError } = require('./lib/client');
const { SwlStore } = require('./lib/express-rate-limit');
const { LocalLimiter, MAX_WINDOWS } = require('./lib/local');
const { librarySource, ENCODINGS } = require('./lib/library');
const { DenialCache } = require('./lib/cache');
const {
  rateLimit, clientAddress, rateLimitHeaders, failedResponse,
} = require('./lib/middleware');

// RateLimiterSwl extends rate-limiter-flexible's store class, so it is
// loaded when asked for. Without rate-limiter-flexible installed, what is
// given is a class that says so when constructed: listing or copying this
// module's exports (as `import * as` does) must not fail.
function loadRateLimiterSwl() {
  try {
    return require('./lib/rate-limiter-flexible').RateLimiterSwl;
  } catch (error) {
    if (error.code !== 'MODULE_NOT_FOUND' || !/rate-limiter-flexible/.test(error.message)) throw error;
    return class RateLimiterSwl {
      constructor() {
        throw new Error('redis-swl: RateLimiterSwl needs rate-limiter-flexible: npm install rate-limiter-flexible');
      }
    };
  }
}

module.exports = {
  SWL,
  Verdict,
  TimeoutError,
  UncertainOutcomeError,
  SwlStore,
  DenialCache,
  LocalLimiter,
  MAX_WINDOWS,
  rateLimit,
  clientAddress,
  rateLimitHeaders,
  failedResponse,
  librarySource,
  ENCODINGS,
};
// SwlStore is the default export, as RedisStore is rate-limit-redis's.
// TypeScript compiled to CommonJS reads `import SwlStore from 'redis-swl'`
// as require('redis-swl').default; with esModuleInterop (and in Babel's
// output) that is the whole module unless it sets `__esModule`.
// rate-limit-redis's CommonJS build sets both. Neither is enumerable, so
// listing or copying the exports gives the names it always did. The ES
// module entry point (index.mjs) names its default itself.
Object.defineProperty(module.exports, '__esModule', { value: true });
Object.defineProperty(module.exports, 'default', { value: SwlStore, writable: true, configurable: true });
let rateLimiterSwl;
Object.defineProperty(module.exports, 'RateLimiterSwl', {
  enumerable: true,
  get() {
    rateLimiterSwl = rateLimiterSwl || loadRateLimiterSwl();
    return rateLimiterSwl;
  },
});
