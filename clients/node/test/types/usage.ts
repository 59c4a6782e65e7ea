// Compiled (not run) by packaging.test.js with tsc --strict: the package's
// types as an application uses them.
import { createClient } from 'redis';
import { rateLimit as expressRateLimit } from 'express-rate-limit';
import { RateLimiterMemory } from 'rate-limiter-flexible';
import { register } from 'prom-client';
import {
  DenialCache,
  SWL, SwlStore, RateLimiterSwl, LocalLimiter, MAX_WINDOWS, Verdict, UncertainOutcomeError, rateLimit, librarySource,
} from 'redis-swl';

async function main(): Promise<void> {
  const client = createClient();
  const swl = new SWL({ client, encoding: 'compact', timeoutMs: 50 });
  const verdict: Verdict = await swl.check('k', 60000, 10, { cost: 2, windows: [[1000, 2]] });
  const seconds: number | null = verdict.retryAfterSeconds;
  const peeked = await swl.peek('k', 60000, 10, { oldest: true });
  const oldest: number | undefined = peeked.oldestAfterMs;
  await swl.refund('k', 60000, 10);
  try {
    await swl.check('k', 60000, 10);
  } catch (error) {
    if (error instanceof UncertainOutcomeError) {
      const code: 'ERR_SWL_UNCERTAIN_OUTCOME' = error.code;
      console.log(code, error.cause);
    }
  }
  const { units, resetAfterMs } = await swl.usage('k', 60000);
  await swl.loadLibrary({ replace: true });

  const limiter = expressRateLimit({
    windowMs: 60000,
    limit: 100,
    store: new SwlStore({ sendCommand: (...args: string[]) => client.sendCommand(args), prefix: 'rl:' }),
  });
  const flexible = new RateLimiterSwl({
    storeClient: client,
    points: 5,
    duration: 1,
    insuranceLimiter: new RateLimiterMemory({ points: 5, duration: 1 }),
  });
  const result = await flexible.consume('user', 2);
  const left: number = result.remainingPoints;

  const local: Verdict = new LocalLimiter(100).check('k', [[1000, 5]], Date.now());
  const most: number = MAX_WINDOWS;
  const middleware = rateLimit({ url: 'redis://127.0.0.1:6379/', windows: [[60000, 100]], policy: 'local' });
  const failures: number = middleware.failures();
  const counted = rateLimit({
    url: 'redis://127.0.0.1:6379/', windows: [[60000, 100]], denialCacheKeys: 0, name: 'api', metrics: register,
  });
  const wasThere: boolean = await counted.reset('127.0.0.1');
  const refunded: Verdict = await counted.refund('127.0.0.1');
  counted.denialCache.forget('rl:127.0.0.1');
  console.log(wasThere, refunded);
  const source: string = librarySource('zset');
  // What redis-swl 0.3 reads, while it still serves the keys.
  const upgrading = new SWL({ client, encoding: 'compact1' });
  console.log(seconds, oldest, units, resetAfterMs, limiter, left, local, most, failures, source, upgrading.encoding);
}

void main;

// The denial cache, given to a client.
const denialCache = new DenialCache(1000);
const cachedSwl = new SWL({ sendCommand: async (..._args: string[]) => null, denialCache });
denialCache.forget('rl:alice');
const cacheSize: number = cachedSwl.denialCache ? cachedSwl.denialCache.size : 0;
const cachedStore = new SwlStore({ sendCommand: async (..._args: string[]) => null, denialCache: new DenialCache() });
void cachedStore;
