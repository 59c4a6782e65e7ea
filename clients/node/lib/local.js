// A sliding-window log in process memory, for deciding while Redis cannot
// answer (the middleware's 'local' policy). It gives SWL.CHECK's and
// SWL.REFUND's replies for the same calls: the clients' shared test vectors
// (clients/vectors/local-limiter.json, the module's own replies) hold it to
// that. Calls are expected in time order, as a clock gives them.
'use strict';

const { Verdict } = require('./client');

// Index of the first entry after `time` in an ascending log.
function firstAfter(log, time) {
  let low = 0;
  let high = log.length;
  while (low < high) {
    const mid = (low + high) >>> 1;
    if (log[mid] <= time) low = mid + 1;
    else high = mid;
  }
  return low;
}

// Milliseconds until an entry at `time` leaves a window: 0 if out.
const untilLeft = (time, windowMs, nowMs) => Math.max(0, time + windowMs - nowMs);

// -1 (waiting cannot help) outranks any wait; otherwise the longer wins.
function waitsLonger(retry, than) {
  if (than === -1) return false;
  if (retry === -1) return true;
  return retry > than;
}

class LocalLimiter {
  // Logs for at most maxClients keys; the least recently used key is
  // forgotten first (a forgotten client starts afresh). A Map keeps order.
  constructor(maxClients = 10000) {
    this.maxClients = maxClients;
    this.logs = new Map();
  }

  // SWL.CHECK: trim, count, record if every window has room.
  // windows: [[windowMs, limit], ...].
  check(key, windows, nowMs, cost = 1) {
    let log = this.trimmed(key, windows, nowMs);
    let counts = LocalLimiter.counts(log, windows, nowMs);
    const allowed = windows.every(([, limit], i) => counts[i] + cost <= limit);
    if (allowed) {
      // Not splice(at, 0, ...entries): a cost of 100000 passes too many arguments.
      const at = firstAfter(log, nowMs);
      log = log.slice(0, at).concat(new Array(cost).fill(nowMs), log.slice(at));
      counts = counts.map((count) => count + cost);
    }
    const verdict = LocalLimiter.verdict(log, windows, counts, nowMs, cost, allowed, false);
    this.keep(key, log);
    return verdict;
  }

  // SWL.REFUND: trim, give back up to `cost` newest entries, and reply what
  // a peek replies then.
  refund(key, windows, nowMs, cost = 1) {
    const log = this.trimmed(key, windows, nowMs);
    log.splice(Math.max(0, log.length - cost));
    let counts = LocalLimiter.counts(log, windows, nowMs);
    const allowed = windows.every(([, limit], i) => counts[i] + cost <= limit);
    if (allowed) counts = counts.map((count) => count + cost);
    const verdict = LocalLimiter.verdict(log, windows, counts, nowMs, cost, allowed, allowed);
    this.keep(key, log);
    return verdict;
  }

  trimmed(key, windows, nowMs) {
    const widest = Math.max(...windows.map(([ms]) => ms));
    const log = this.logs.get(key) || [];
    this.logs.delete(key);
    return log.slice(firstAfter(log, nowMs - widest));
  }

  keep(key, log) {
    if (log.length && this.maxClients > 0) {
      this.logs.set(key, log);
      while (this.logs.size > this.maxClients) this.logs.delete(this.logs.keys().next().value);
    }
  }

  static counts(log, windows, nowMs) {
    return windows.map(([ms]) => log.length - firstAfter(log, nowMs - ms));
  }

  // As the module's: the window with the least left when admitted, the one
  // that waits longest (-1, never, the longest) when denied.
  static verdict(log, windows, counts, nowMs, cost, allowed, pending) {
    const widest = Math.max(...windows.map(([ms]) => ms));
    let binding = null;
    windows.forEach(([windowMs, limit], i) => {
      const count = counts[i];
      const described = { limit, remaining: Math.max(0, limit - count), retry: -1, windowMs };
      if (allowed) {
        if (binding === null || described.remaining < binding.remaining) binding = described;
        return;
      }
      if (count + cost <= limit) return;
      if (cost <= limit) {
        const rank = log.length - (limit - cost + 1);
        described.retry = rank >= 0 && rank < log.length ? Math.max(1, untilLeft(log[rank], windowMs, nowMs)) : 1;
      }
      if (binding === null || waitsLonger(described.retry, binding.retry)) binding = described;
    });
    if (binding === null) {
      const [[windowMs, limit]] = windows;
      binding = { limit, remaining: Math.max(0, limit - counts[0]), retry: allowed ? -1 : 1, windowMs };
    }
    let newest = log.length && log[log.length - 1] > nowMs - widest ? log[log.length - 1] : null;
    if (pending) newest = newest === null ? nowMs : Math.max(newest, nowMs);
    const reset = newest === null ? 0 : untilLeft(newest, widest, nowMs);
    return new Verdict(allowed, binding.limit, binding.remaining, binding.retry, reset, binding.windowMs);
  }
}

module.exports = { LocalLimiter };
