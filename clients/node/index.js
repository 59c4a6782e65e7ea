// redis-swl for Node: the client, an express-rate-limit store, a
// rate-limiter-flexible limiter, Express middleware and the local limiter.
// RateLimiterSwl and rateLimit load rate-limiter-flexible and redis when
// first used, so an app needs only the libraries it uses.
'use strict';

const { SWL, Verdict, TimeoutError } = require('./lib/client');
const { SwlStore } = require('./lib/express-rate-limit');
const { LocalLimiter } = require('./lib/local');
const { librarySource, ENCODINGS } = require('./lib/library');

module.exports = {
  SWL,
  Verdict,
  TimeoutError,
  SwlStore,
  LocalLimiter,
  librarySource,
  ENCODINGS,
  get RateLimiterSwl() {
    return require('./lib/rate-limiter-flexible').RateLimiterSwl;
  },
  get rateLimit() {
    return require('./lib/middleware').rateLimit;
  },
  get clientAddress() {
    return require('./lib/middleware').clientAddress;
  },
  get rateLimitHeaders() {
    return require('./lib/middleware').rateLimitHeaders;
  },
};
