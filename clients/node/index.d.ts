// Types of redis-swl for Node. They name nothing of the optional peers
// (express-rate-limit, rate-limiter-flexible), so an app compiles without
// the ones it does not use; the classes match those libraries'
// interfaces by their shape.
/// <reference types="node" />

/** The parts of an Express request the middleware reads (Express itself ships no types). */
export interface RequestLike {
  socket: { remoteAddress?: string };
  [name: string]: unknown;
}

/** A window given as [windowMs, limit]. */
export type Window = readonly [number, number];

/**
 * How the function library stores new logs: a sorted set, a compact log ('compact', the newest format), or a compact log of
 * format version 1 ('compact1', which redis-swl 0.3 reads too: while 0.3 still serves the keys).
 */
export type Encoding = 'zset' | 'compact' | 'compact1';
export declare const ENCODINGS: readonly Encoding[];

/** One reply of SWL.CHECK, SWL.PEEK or SWL.REFUND, by name. */
export declare class Verdict {
  /** Admitted (and, for a check, recorded). */
  readonly allowed: boolean;
  /** The limit of the window named by windowMs. */
  readonly limit: number;
  /** Units left in that window. */
  readonly remaining: number;
  /** When a denied request would fit; -1 when admitted or when waiting cannot help. */
  readonly retryAfterMs: number;
  /** When the log's newest entry leaves the widest window; 0 for an empty log. */
  readonly resetAfterMs: number;
  /** The window the verdict describes: the one with the least left, or the one that denied. */
  readonly windowMs: number;
  /** Only from a peek with { oldest: true }: when the oldest entry in that window leaves it. */
  readonly oldestAfterMs?: number;
  /** Whole seconds for Retry-After (rounded up), or null. */
  readonly retryAfterSeconds: number | null;
  static fromReply(reply: readonly unknown[]): Verdict;
}

/** A command that got no reply within timeoutMs (a check or refund rejects with an UncertainOutcomeError instead, this its cause). */
export declare class TimeoutError extends Error {
  constructor(ms: number);
}

/**
 * A check or refund was sent and no reply came: it timed out (timeoutMs, or
 * the client's own socket timeout), or the connection was lost while
 * waiting. The server may or may not have carried it out, so the request
 * may or may not have been recorded (or given back). The client never sends
 * it again by itself.
 */
export declare class UncertainOutcomeError extends Error {
  readonly name: 'UncertainOutcomeError';
  readonly code: 'ERR_SWL_UNCERTAIN_OUTCOME';
  /** The error the command failed with. */
  readonly cause: unknown;
  constructor(name: string, key: string | Buffer, cause: unknown);
}

/** rate-limit-redis's sendCommand: (...args) => the reply. */
export type SendCommandFn = (...args: string[]) => Promise<unknown>;
/** rate-limit-redis's sendCommandCluster. */
export type SendCommandClusterFn = (details: { key: string; isReadOnly: boolean; command: string[] }) => Promise<unknown>;

/** How commands reach Redis: exactly one of these. */
export type Sender =
  | { sendCommand: SendCommandFn; sendCommandCluster?: never; client?: never }
  | { sendCommandCluster: SendCommandClusterFn; sendCommand?: never; client?: never }
  /** A node-redis client or cluster (v5), or an ioredis client. */
  | { client: object; sendCommand?: never; sendCommandCluster?: never };

export interface CommonOptions {
  /**
   * How logs the function library creates are stored: 'compact' (the default), 'compact1' (format version 1, which redis-swl
   * 0.3 reads) or 'zset'; the module's own setting decides where it is loaded.
   */
  encoding?: Encoding;
  /**
   * After this long a command rejects (each command of a call: loading the library takes four): a check or refund with an
   * UncertainOutcomeError, as it is still out and may yet be carried out, anything else with a TimeoutError. node-redis drops a
   * command it has not written by then. By default the client's own timeouts apply.
   */
  timeoutMs?: number;
  /**
   * Answers checks of keys Redis denied, denied, until their wait has passed, without a call to Redis (none by default for
   * SWL, SwlStore and RateLimiterSwl). refund and delete (SwlStore's resetKey and decrement, RateLimiterSwl's reward and
   * delete) drop the key's denials; a check with penalize or nowMs neither uses nor fills it.
   */
  denialCache?: DenialCache;
}

export type SWLOptions = Sender & CommonOptions;

export interface CallOptions {
  /** Units the request weighs (1 to 100000). */
  cost?: number;
  /** Further windows on the same log. */
  windows?: readonly Window[];
  /** Unix ms; the server's clock by default. */
  nowMs?: number;
}

export declare class SWL {
  constructor(options: SWLOptions);
  /** True once the server answered that it has no module. */
  usesLibrary: boolean;
  readonly encoding: Encoding;
  readonly denialCache: DenialCache | null;
  check(key: string | Buffer, windowMs: number, limit: number, options?: CallOptions & { penalize?: boolean }): Promise<Verdict>;
  peek(key: string | Buffer, windowMs: number, limit: number, options?: CallOptions & { oldest?: boolean }): Promise<Verdict>;
  refund(key: string | Buffer, windowMs: number, limit: number, options?: CallOptions): Promise<Verdict>;
  /** The log's entries, oldest first, as Unix milliseconds (SWL.ENTRIES); none for no key. */
  entries(key: string | Buffer): Promise<number[]>;
  /** The units the log holds in the last windowMs. */
  units(key: string | Buffer, windowMs: number): Promise<number>;
  /** The units the log holds in the last windowMs, and when the newest leaves it. */
  usage(key: string | Buffer, windowMs: number): Promise<{ units: number; resetAfterMs: number }>;
  /** Removes the log (DEL) and its cached denials; true if there was one. */
  reset(key: string | Buffer): Promise<boolean>;
  /** @deprecated reset's name before 0.5. */
  delete(key: string | Buffer): Promise<boolean>;
  /**
   * Loads the function library (on a cluster, on the node serving key), replacing an older one with replace. It asks that node
   * FCALL_RO swl_version 0 first and never replaces a library newer than the one this package carries.
   */
  loadLibrary(options?: { replace?: boolean; key?: string }): Promise<void>;
}

export type SwlStoreOptions = Sender & CommonOptions & {
  /** Prefix of the Redis keys; 'rl:' by default, as rate-limit-redis's. */
  prefix?: string;
  /**
   * Follows rate-limit-redis's key (prefix + key) in our log's name: ':swl' by default, so that both can run on one server;
   * '' (with prefix 'swl:') keeps the keys of redis-swl 0.3.
   */
  keySuffix?: string;
  /** The limit to check against when express-rate-limit's is a function: the largest it returns. */
  limit?: number;
};

/** What express-rate-limit's store calls answer. */
export interface ClientRateLimitInfo {
  totalHits: number;
  resetTime: Date | undefined;
}

/** An express-rate-limit (v7, v8) store: a sliding-window log. */
export declare class SwlStore {
  constructor(options: SwlStoreOptions);
  prefix: string;
  /** Called by express-rate-limit with its options. */
  init(options: { windowMs: number; limit?: number | ((...args: any[]) => unknown); max?: unknown; [option: string]: unknown }): void;
  increment(key: string): Promise<ClientRateLimitInfo>;
  decrement(key: string): Promise<void>;
  get(key: string): Promise<ClientRateLimitInfo | undefined>;
  resetKey(key: string): Promise<void>;
}
/** SwlStore is also the default export, as RedisStore is rate-limit-redis's: `import SwlStore from 'redis-swl'`. */
export default SwlStore;

/** rate-limiter-flexible's store options that RateLimiterSwl takes, and ours. */
export interface RateLimiterSwlOptions extends CommonOptions {
  /** A node-redis client or cluster (v5), or an ioredis client. */
  storeClient: object;
  points?: number;
  /** Seconds: a whole number of milliseconds. */
  duration?: number;
  keyPrefix?: string;
  /**
   * Follows the key RateLimiterRedis would use (keyPrefix:key) in our log's name: ':swl' by default, so that both can run on
   * one server; '' keeps the keys of redis-swl 0.3.
   */
  keySuffix?: string;
  blockDuration?: number;
  /** Points, rejected consumes included, at which a key is blocked for blockDuration (more than points). */
  blockOnConsumed?: number;
  /**
   * Equal to points: a key's rejections are answered in memory (a DenialCache of 10,000 keys, or denialCache) until their
   * msBeforeNext has passed. Not with blockOnConsumed; inMemoryBlockDuration is not supported.
   */
  inMemoryBlockOnConsumed?: number;
  /** Fail a call at once (to the insurance limiter) while the client is not connected, rather than queue it. */
  rejectIfRedisNotReady?: boolean;
  /** A rate-limiter-flexible limiter that answers while Redis cannot. */
  insuranceLimiter?: object;
}

/** rate-limiter-flexible's RateLimiterRes. */
export interface RateLimiterResult {
  remainingPoints: number;
  msBeforeNext: number;
  consumedPoints: number;
  isFirstInDuration: boolean;
}

/** A rate-limiter-flexible limiter: points per duration as a sliding log. Rejections are RateLimiterResults. */
export declare class RateLimiterSwl {
  constructor(options: RateLimiterSwlOptions);
  readonly points: number;
  readonly duration: number;
  readonly keyPrefix: string;
  consume(key: string | number, points?: number | string, options?: { customDuration?: number }): Promise<RateLimiterResult>;
  penalty(key: string | number, points?: number | string, options?: { customDuration?: number }): Promise<RateLimiterResult>;
  reward(key: string | number, points?: number | string, options?: { customDuration?: number }): Promise<RateLimiterResult>;
  get(key: string | number, options?: { customDuration?: number }): Promise<RateLimiterResult | null>;
  delete(key: string | number): Promise<boolean>;
  /** 0 blocks for ever. */
  block(key: string | number, secDuration: number): Promise<RateLimiterResult>;
  /** The key RateLimiterRedis would use; our log is at getKey(key) + keySuffix. */
  getKey(key: string | number): string;
}

/** The most windows one call takes (the first and its WINDOW clauses): 100. */
export declare const MAX_WINDOWS: 100;

/**
 * Recent denials by key: after Redis denies a check, the same key, windows
 * and a cost at least as large are answered denied in the process until the
 * denial's retryAfterMs has passed (on the monotonic clock), without asking
 * Redis. It never admits. At most maxKeys keys (10,000 by default; 0 caches
 * nothing), the least recently used forgotten first. A check with penalize
 * or nowMs neither uses nor fills it; a denial with retryAfterMs -1 is not
 * cached.
 */
export declare class DenialCache {
  constructor(maxKeys?: number);
  readonly maxKeys: number;
  /** Keys remembered (with denials, or forgotten lately). */
  readonly size: number;
  /** Drops key's denials after a change the client did not make (its own refunds and deletes do this). */
  forget(key: string | Buffer): void;
}

/** A sliding-window log in process memory, replying as the module does. */
export declare class LocalLimiter {
  constructor(maxClients?: number);
  /** Throws a TypeError for more than MAX_WINDOWS windows, as the module refuses them. */
  check(key: string, windows: readonly Window[], nowMs: number, cost?: number): Verdict;
  refund(key: string, windows: readonly Window[], nowMs: number, cost?: number): Verdict;
  /** Drops key's log (a reset). */
  forget(key: string): void;
}

export type Policy = 'open' | 'closed' | 'local';

export interface RateLimitOptions {
  /** Redis to connect to, for node-redis: redis://host:port/. Give exactly one of url, client and sendCommand. */
  url?: string;
  /** The app's own node-redis client or cluster, or ioredis client; each command is given timeoutMs. */
  client?: object;
  /** A function that sends one command, as rate-limit-redis takes it: (...args) => Promise of the reply. */
  sendCommand?: (...args: string[]) => Promise<unknown>;
  /**
   * Per-route limits: a path prefix (within the app) to the windows of the requests under it; the longest prefix wins,
   * [] exempts them. Each route keeps logs of its own.
   */
  routes?: Readonly<Record<string, readonly Window[]>>;
  /** Give back the units of a request whose response `failed` says failed (through SWL.REFUND); false by default. */
  refundFailed?: boolean;
  /** Which responses count as failed for refundFailed: 4xx and 5xx by default. */
  failed?: (status: number) => boolean;
  /** [[windowMs, limit], ...], at most MAX_WINDOWS; a request must fit every one. */
  windows: readonly Window[];
  cost?: number;
  /** What answers while Redis cannot: 'open' (default), 'closed' or 'local'. */
  policy?: Policy;
  /** How long a check may take before the policy answers; 50 by default. */
  timeoutMs?: number;
  maxLocalClients?: number;
  /** Prefix of the Redis keys; 'rl:' by default. */
  keyPrefix?: string;
  /** Who a request counts against; the TCP peer's address by default. */
  key?: (req: any) => string | Promise<string>;
  encoding?: Encoding;
  /**
   * Keys whose denials the denial cache remembers (10,000 by default; 0 turns it off): a denied client's next requests are
   * answered denied, with RateLimit-Source: cache, until its wait has passed, without a call to Redis.
   */
  denialCacheKeys?: number;
  /** The limiter's label in its metrics: a fixed name ('api', 'login'), never a path or a key; 'default' by default. */
  name?: string;
  /**
   * A prom-client Registry (prom-client's `register`, or one of the app's) to count decisions in:
   * redis_swl_decisions_total{limiter,decision,source} and redis_swl_decision_seconds{limiter,source}. None by default.
   */
  metrics?: object;
}

export interface RateLimitMiddleware {
  (req: any, res: any, next: (error?: unknown) => void): Promise<void>;
  /** Requests the failure policy decided since start. */
  failures(): number;
  /** Closes the connection to Redis. */
  close(): void;
  /** Deletes a client's log (the key function's value) and drops its cached denials; true if there was a log. */
  reset(client: string): Promise<boolean>;
  /** Gives back units (the cost by default) of a client's newest recorded units and drops its cached denials. */
  refund(client: string, units?: number): Promise<Verdict>;
  readonly denialCache: DenialCache;
}

export declare function rateLimit(options: RateLimitOptions): RateLimitMiddleware;
export declare function clientAddress(req: RequestLike): string;
export declare function rateLimitHeaders(verdict: Verdict): Record<string, string>;
/** The default `failed` of rateLimit: 4xx and 5xx. */
export declare function failedResponse(status: number): boolean;
/** The function library this package ships, creating new logs in `encoding` ('compact' by default). */
export declare function librarySource(encoding?: Encoding): string;
