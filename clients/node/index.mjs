// redis-swl as an ES module: the CommonJS package's exports by name, and
// SwlStore as the default export, as rate-limit-redis exports RedisStore
// (`import RedisStore from 'rate-limit-redis'` becomes
// `import SwlStore from 'redis-swl'`).
import swl from './index.js';

export const {
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
  RateLimiterSwl,
} = swl;

export default swl.SwlStore;
