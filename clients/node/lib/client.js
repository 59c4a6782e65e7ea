// The client: SWL.CHECK, SWL.PEEK and SWL.REFUND as typed verdicts, over
// whatever sends commands (node-redis, ioredis, or a sendCommand function
// as rate-limit-redis takes), through the module where the server has it
// and through the function library (FCALL) where it does not.
'use strict';

const { checkEncoding, librarySource, libraryVersion, isNewer } = require('./library');

// The module's commands and the library's functions that answer them, with
// the same arguments and replies.
const CHECK = Object.freeze({ command: 'SWL.CHECK', fn: 'swl_check', readOnly: false });
const PEEK = Object.freeze({ command: 'SWL.PEEK', fn: 'swl_peek', readOnly: true });
const REFUND = Object.freeze({ command: 'SWL.REFUND', fn: 'swl_refund', readOnly: false });
const ENTRIES = Object.freeze({ command: 'SWL.ENTRIES', fn: 'swl_entries', readOnly: true });

// A limit no log reaches, for counting what a log holds: 10^15 (the module
// takes up to 2^53 - 1, but replies near that lose digits in some clients).
const MAX_LIMIT = 1e15;

// One reply of SWL.CHECK, SWL.PEEK or SWL.REFUND, by name. limit, remaining
// and retryAfterMs describe the window named by windowMs: the one with the
// least left, or the one that denied. retryAfterMs is -1 when admitted, or
// when waiting cannot help (a cost above the limit). resetAfterMs is when
// the log's newest entry leaves the widest window (0 for an empty log).
// oldestAfterMs is set only by a peek with { oldest: true }.
class Verdict {
  constructor(allowed, limit, remaining, retryAfterMs, resetAfterMs, windowMs, oldestAfterMs) {
    this.allowed = allowed;
    this.limit = limit;
    this.remaining = remaining;
    this.retryAfterMs = retryAfterMs;
    this.resetAfterMs = resetAfterMs;
    this.windowMs = windowMs;
    if (oldestAfterMs !== undefined) this.oldestAfterMs = oldestAfterMs;
  }

  static fromReply(reply) {
    if (!Array.isArray(reply) || (reply.length !== 6 && reply.length !== 7)) {
      throw new Error(`not a redis-swl reply: ${JSON.stringify(reply)}`);
    }
    const values = reply.map(Number);
    if (!values.every(Number.isInteger)) throw new Error(`not a redis-swl reply: ${JSON.stringify(reply)}`);
    return new Verdict(values[0] === 1, ...values.slice(1));
  }

  // Whole seconds for a Retry-After header (rounded up), or null when
  // admitted or when waiting cannot help.
  get retryAfterSeconds() {
    return this.retryAfterMs < 0 ? null : Math.ceil(this.retryAfterMs / 1000);
  }
}

function integerArg(name, value, least) {
  if (!Number.isSafeInteger(value) || value < least) {
    throw new TypeError(`${name} must be an integer of at least ${least}, not ${String(value)}`);
  }
  return String(value);
}

// The arguments after the key, as the module and the library take them.
// Checked here only so far as to send what was meant (an integer, not
// "1e3"); the server checks ranges and says which argument is wrong.
function requestArgs(windowMs, limit, { nowMs, cost = 1, windows = [], penalize = false, oldest = false } = {}) {
  const args = [integerArg('windowMs', windowMs, 0), integerArg('limit', limit, 0)];
  args.push(nowMs === undefined || nowMs === null ? '*' : integerArg('nowMs', nowMs, 0));
  if (cost !== 1) args.push('COST', integerArg('cost', cost, 0));
  for (const [extraMs, extraLimit] of windows) {
    args.push('WINDOW', integerArg('windowMs', extraMs, 0), integerArg('limit', extraLimit, 0));
  }
  if (penalize) args.push('PENALIZE');
  if (oldest) args.push('OLDEST');
  return args;
}

const messageOf = (error) => String((error && error.message) || error);

// The server has no such command: the module is not loaded.
const isUnknownCommand = (error) => /unknown command/i.test(messageOf(error));
// The server has no such function: the library is not loaded.
const isMissingFunction = (error) => /function not found/i.test(messageOf(error));
// FUNCTION LOAD found the library loaded already (by another client).
const isLibraryPresent = (error) => /already exists/i.test(messageOf(error));

// `error`, said plainly where the server is older than the call: a module
// or library from before 0.3.0 refuses OLDEST as a syntax error.
function explained(error, args, usesLibrary) {
  if (args.includes('OLDEST') && /syntax error/i.test(messageOf(error)) && error instanceof Error) {
    const where = usesLibrary ? 'function library' : 'module';
    const fix = usesLibrary ? 'replace it: loadLibrary({ replace: true })' : 'load redis-swl 0.3.0 or later';
    error.message += `: the redis-swl ${where} on the server predates SWL.PEEK OLDEST (0.3.0); ${fix}`;
  }
  return error;
}

class TimeoutError extends Error {
  constructor(ms) {
    super(`redis-swl: no reply within ${ms} ms`);
    this.name = 'TimeoutError';
  }
}

// A check or refund was sent and no reply came: it timed out, or the
// connection was lost while waiting. The server may or may not have carried
// it out, so the request may or may not have been recorded (or given back).
// `cause` is the error the command failed with.
class UncertainOutcomeError extends Error {
  constructor(name, key, cause) {
    super(`redis-swl: ${name} on ${String(key)} got no reply (${messageOf(cause)}): it may or may not have been carried out`, { cause });
    this.name = 'UncertainOutcomeError';
    this.code = 'ERR_SWL_UNCERTAIN_OUTCOME';
  }
}

// What the client asks a node before it loads or replaces the library
// there: the loaded library's release. A library from before 0.4, or none,
// has no such function.
const VERSION_CHECK = Object.freeze(['FCALL_RO', 'swl_version', '0']);
// What a client sends once, before its first call (see SWL.ask).
const PROBE = Object.freeze(['SWL.CHECK']);

// Whether a server has the module, by the client or function that reaches
// it (see SWL.probe).
const PROBES = new WeakMap();

// The names of an error's classes, its own first.
function classesOf(error) {
  const names = [];
  for (let proto = Object.getPrototypeOf(Object(error)); proto && proto !== Error.prototype; proto = Object.getPrototypeOf(proto)) {
    names.push(proto.constructor && proto.constructor.name);
  }
  return names;
}

// The server answered with an error (node-redis ErrorReply, ioredis
// ReplyError): the command changed nothing.
const isErrorReply = (error) => classesOf(error).some((name) => name === 'ErrorReply' || name === 'ReplyError');

// Errors of a command the client refused before writing it: node-redis
// closed or offline, or its own timeout for a command still queued (not
// its socket timeouts, which come after); ioredis offline with its queue
// turned off.
const NOT_WRITTEN = ['ClientClosedError', 'ClientOfflineError', 'TimeoutError', 'CommandTimeoutDuringMaintenanceError'];

// Whether a command that failed with `error` can have been carried out: it
// can unless the server answered with an error, or the client refused it
// before writing it.
function mayHaveRun(error) {
  if (error instanceof TimeoutError) return true; // timeoutMs: the command is out
  if (isErrorReply(error)) return false;
  const classes = classesOf(error);
  if (NOT_WRITTEN.includes(classes[0])) return false;
  return !/enableOfflineQueue options is false/.test(messageOf(error));
}

function withTimeout(promise, ms) {
  if (ms === undefined || ms === null) return promise;
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new TimeoutError(ms)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

// A function (key, command, readOnly, once) => Promise of the reply, from
// exactly one of: sendCommand (rate-limit-redis's: (...args) => reply),
// sendCommandCluster (its cluster form: ({ key, isReadOnly, command }) =>
// reply), or client (a node-redis client or cluster, or an ioredis client).
// The key routes a cluster's commands, FUNCTION LOAD included: the library
// is loaded on the node that answered that it lacked it. `once` marks a
// check or refund, which the client must not send twice. node-redis never
// sends a written command again; given timeoutMs, it drops one still queued
// (while it reconnects) at that time rather than writing it later.
function senderOf({ sendCommand, sendCommandCluster, client, timeoutMs }) {
  const given = [sendCommand, sendCommandCluster, client].filter((x) => x !== undefined);
  if (given.length !== 1) {
    throw new TypeError('redis-swl: give exactly one of sendCommand, sendCommandCluster or client');
  }
  if (sendCommand !== undefined) {
    if (typeof sendCommand !== 'function') throw new TypeError('sendCommand must be a function');
    return (key, command) => sendCommand(...command);
  }
  if (sendCommandCluster !== undefined) {
    if (typeof sendCommandCluster !== 'function') throw new TypeError('sendCommandCluster must be a function');
    return (key, command, isReadOnly) => sendCommandCluster({ key, isReadOnly, command });
  }
  if (client && typeof client.call === 'function') return ioredisSender(client);
  const options = timeoutMs === undefined || timeoutMs === null ? undefined : { timeout: timeoutMs };
  if (client && typeof client.sendCommand === 'function' && 'masters' in client) {
    return (key, command, isReadOnly) => client.sendCommand(key, isReadOnly, command, options); // node-redis cluster
  }
  if (client && typeof client.sendCommand === 'function') return (key, command) => client.sendCommand(command, options);
  throw new TypeError('redis-swl: client must be a node-redis client or cluster, or an ioredis client');
}

// ioredis sends again, once it has reconnected, every command that was
// awaiting its reply when a connection closed (autoResendUnfulfilledCommands,
// on by default). The only ones it drops, rejecting them with an AbortError,
// are those of a pipeline cut short: its close handler tells them by their
// pipelineIndex. A check or refund is marked as one, so that ioredis rejects
// it instead of sending it twice; nothing else in ioredis reads the mark.
function ioredisSender(client) {
  // ioredis is there: the client is one of its. (Its instances do not lead
  // to the class: their constructor is EventEmitter's, mixed in.)
  const { Command } = require('ioredis'); // eslint-disable-line global-require
  return (key, command, isReadOnly, once) => {
    if (!once) return client.call(...command);
    const [name, ...args] = command;
    // As client.call makes it.
    const sent = new Command(name, args, { keyPrefix: client.options && client.options.keyPrefix, replyEncoding: 'utf8' });
    sent.pipelineIndex = -1;
    return client.sendCommand(sent);
  };
}

class SWL {
  // options: one of sendCommand, sendCommandCluster or client (see
  // senderOf); encoding of logs the library creates ('compact', the
  // default, 'compact1' for format version 1, which redis-swl 0.3 reads,
  // or 'zset'; the module's own setting decides where it is loaded);
  // timeoutMs, after which a command rejects with a TimeoutError (none by
  // default: the client's own timeouts apply), or for a check or refund
  // with an UncertainOutcomeError: the command is not taken back, and may
  // still be carried out; denialCache, a DenialCache (lib/cache.js) that
  // answers checks of keys Redis denied until their wait has passed (none
  // by default: every check goes to Redis).
  constructor(options = {}) {
    const send = senderOf(options);
    // What the module probe's answer is shared by.
    this.sender = options.client || options.sendCommand || options.sendCommandCluster;
    // Each command has timeoutMs of its own: a call that loads the library
    // sends four.
    this.send = (key, command, readOnly, once) => withTimeout(send(key, command, readOnly, once), options.timeoutMs);
    this.encoding = options.encoding === undefined ? 'compact' : options.encoding;
    checkEncoding(this.encoding);
    this.denialCache = options.denialCache || null;
    // True once the server answered that it has no module.
    this.usesLibrary = false;
    // Whether the server has the module, asked once before the first
    // command (see probe).
    this.probed = null;
  }

  // Asks the server once whether it has the module, by the probe of
  // clients/spec/protocol.md (see ask), so that the first check already
  // goes to SWL.CHECK or to FCALL: trying SWL.CHECK first would cost a
  // round trip, and a later call not awaited would overtake it. The answer
  // is shared by every SWL over the same client or function (limiters made
  // per route or per request ask once). Every command of this SWL waits
  // for the same promise, one tick each, so they leave in the order they
  // were called. A probe that failed (no connection, a timeout) fails the
  // calls waiting for it, and is asked again by the next call.
  probe(key) {
    if (!this.probed) {
      let shared = PROBES.get(this.sender);
      if (!shared) {
        shared = this.ask(key);
        PROBES.set(this.sender, shared);
        shared.catch(() => {
          if (PROBES.get(this.sender) === shared) PROBES.delete(this.sender);
        });
      }
      this.probed = shared.then(
        (hasModule) => {
          if (hasModule === false) this.usesLibrary = true;
        },
        (error) => {
          this.probed = null;
          throw error;
        },
      );
    }
    return this.probed;
  }

  // Resolves true or false: whether the server has the module. The probe
  // is SWL.CHECK without its arguments, sent once: Redis refuses it for its
  // arity before it looks at ACLs or at a cluster's slots, so it records
  // nothing and needs no permission: "unknown command" without the module,
  // "wrong number of arguments" (or any other error reply) with it.
  // Without the module, the library is loaded here where the server lacks
  // it, before any call goes to it, so that calls keep their order; a
  // server that refuses the version check or the load is left to the
  // call, which loads it, if it can, when FCALL finds it missing.
  async ask(key) {
    try {
      await this.send(key, PROBE, false, true);
      return true;
    } catch (error) {
      // A sendCommand function may hand error replies on as plain errors:
      // their text tells them too.
      const arity = /wrong number of arguments/i.test(messageOf(error));
      if (!isErrorReply(error) && !isUnknownCommand(error) && !arity) throw error;
      if (!isUnknownCommand(error)) return true;
    }
    try {
      await this.loadLibrary({ key });
    } catch (error) {
      if (!isErrorReply(error)) throw error;
    }
    return false;
  }

  // Checks a request of `cost` units against `limit` per `windowMs` (and
  // any further `windows`, [[windowMs, limit], ...]) and records it if
  // admitted. nowMs defaults to the server's clock. With a denial cache, a
  // check it can answer does not reach Redis (see lib/cache.js); one with
  // penalize or nowMs always does.
  check(key, windowMs, limit, options = {}) {
    const { cost, windows, penalize, nowMs } = options;
    const args = requestArgs(windowMs, limit, { cost, windows, penalize, nowMs });
    if (!this.denialCache) return this.run(CHECK, key, args);
    return this.cachedCheck(key, windowMs, limit, options, args);
  }

  async cachedCheck(key, windowMs, limit, options, args) {
    const cache = this.denialCache;
    const cached = cache.answer(key, windowMs, limit, options);
    if (cached) return cached;
    const ticket = cache.ticket();
    const verdict = await this.run(CHECK, key, args);
    cache.keep(key, windowMs, limit, options, verdict, ticket);
    return verdict;
  }

  // What check would reply now, changing nothing. With { oldest: true } the
  // verdict's oldestAfterMs is set too.
  peek(key, windowMs, limit, options = {}) {
    const { cost, windows, oldest, nowMs } = options;
    return this.run(PEEK, key, requestArgs(windowMs, limit, { cost, windows, oldest, nowMs }));
  }

  // Gives back up to `cost` of the newest recorded units (a request that
  // should not count after all) and replies what peek replies then.
  // It drops the key's cached denials once Redis answered, or failed to.
  refund(key, windowMs, limit, options = {}) {
    const { cost, windows, nowMs } = options;
    return this.forgetting(key, this.run(REFUND, key, requestArgs(windowMs, limit, { cost, windows, nowMs })));
  }

  // `pending`, after which the key's cached denials are dropped (also when
  // it failed: a refund or delete that timed out may yet be carried out).
  forgetting(key, pending) {
    if (!this.denialCache) return pending;
    return pending.finally(() => this.denialCache.forget(key));
  }

  // The log: its entries' times, oldest first, as Unix milliseconds
  // (SWL.ENTRIES); none for no key.
  async entries(key) {
    const reply = await this.call(ENTRIES, key, []);
    return reply.map((time) => {
      const ms = Number(time);
      if (!Number.isSafeInteger(ms)) throw new TypeError(`not whole milliseconds: ${String(time)}`);
      return ms;
    });
  }

  // What the log holds in the last windowMs: its units and when the newest
  // leaves the window (0 when it holds none). Two peeks, sent together.
  async usage(key, windowMs) {
    const [units, log] = await Promise.all([this.units(key, windowMs), this.peek(key, windowMs, 0)]);
    return { units, resetAfterMs: log.resetAfterMs };
  }

  // The units the log holds in the last windowMs: a peek against a limit
  // no log reaches, whose remaining counts them.
  async units(key, windowMs) {
    const counted = await this.peek(key, windowMs, MAX_LIMIT);
    return MAX_LIMIT - 1 - counted.remaining;
  }

  // Removes the log (DEL), so that its next check is a new client's, and
  // drops the key's cached denials as refund does: resolves true if there
  // was one.
  reset(key) {
    return this.forgetting(key, (async () => {
      await this.probe(key);
      const deleted = await this.send(key, ['DEL', key], false);
      return Number(deleted) === 1;
    })());
  }

  // reset's name before 0.5.
  delete(key) {
    return this.reset(key);
  }

  // Loads the function library on the server (for a cluster, on the node
  // that serves `key`), replacing an older one with { replace: true }.
  // It first asks that node which release its library is (FCALL_RO
  // swl_version 0): a library newer than the one this package carries is
  // never replaced, replace or not, and is used as it is; one from before
  // 0.4, which cannot say, counts as older. With replace, a node that
  // answers neither a version nor "function not found" rejects with its
  // error and nothing is replaced.
  async loadLibrary({ replace = false, key = 'redis-swl' } = {}) {
    let loaded = null;
    try {
      loaded = String(await this.send(key, VERSION_CHECK, false));
    } catch (error) {
      // None there, or one from before 0.4 (which FUNCTION LOAD without
      // REPLACE leaves as it is): only a replace needs to know which.
      if (!isMissingFunction(error) && (replace || !isErrorReply(error))) throw error;
    }
    if (loaded !== null && (!replace || isNewer(loaded, libraryVersion()))) return;
    const command = ['FUNCTION', 'LOAD', ...(replace ? ['REPLACE'] : []), librarySource(this.encoding)];
    try {
      await this.send(key, command, false);
    } catch (error) {
      if (!isLibraryPresent(error)) throw error;
    }
  }

  async run(names, key, args) {
    return Verdict.fromReply(await this.call(names, key, args));
  }

  async call({ command, fn, readOnly }, key, args) {
    if (typeof key !== 'string' && !Buffer.isBuffer(key)) throw new TypeError('key must be a string or a Buffer');
    // A check or refund is sent once; one that may have been carried out
    // without a reply rejects with an UncertainOutcomeError.
    const send = async (sent, routeReadOnly) => {
      try {
        return await this.send(key, sent, routeReadOnly, !readOnly);
      } catch (error) {
        if (readOnly || !mayHaveRun(error)) throw error;
        throw new UncertainOutcomeError(sent[0] === 'FCALL' ? sent[1] : sent[0], key, error);
      }
    };
    await this.probe(key);
    if (!this.usesLibrary) {
      try {
        return await send([command, key, ...args], readOnly);
      } catch (error) {
        if (!isUnknownCommand(error)) throw explained(error, args, false);
        this.usesLibrary = true;
      }
    }
    const fcall = ['FCALL', fn, '1', key, ...args];
    try {
      return await send(fcall, false);
    } catch (error) {
      if (!isMissingFunction(error)) throw explained(error, args, true);
    }
    await this.loadLibrary({ key });
    try {
      return await send(fcall, false);
    } catch (error) {
      if (!isMissingFunction(error)) throw explained(error, args, true);
    }
    // A library from an older release that lacks the function: replaced
    // (never by an older one than it), and the call sent a last time.
    await this.loadLibrary({ replace: true, key });
    try {
      return await send(fcall, false);
    } catch (error) {
      throw explained(error, args, true);
    }
  }
}

module.exports = {
  SWL, Verdict, TimeoutError, UncertainOutcomeError, MAX_LIMIT, requestArgs, senderOf, withTimeout,
};
