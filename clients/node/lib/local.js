// A sliding-window log in process memory, for deciding while Redis cannot
// answer (the middleware's 'local' policy). It gives SWL.CHECK's and
// SWL.REFUND's replies for the same calls: the clients' shared test vectors
// (clients/vectors/local-limiter.json, the module's own replies) hold it to
// that. Calls are expected in time order, as a clock gives them.
'use strict';

const { Verdict } = require('./client');

// The most windows one call takes (the first and its WINDOW clauses), as
// the module and the library take them.
const MAX_WINDOWS = 100;

// Index of the first entry after `time` in an ascending log, from `low`.
function firstAfter(log, time, low = 0) {
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

// One client's entries, ascending. The head is dropped by moving `start`
// and the array is compacted only when half of it is dropped, so trimming
// costs O(1) amortised rather than a copy of the log.
class Log {
  constructor() {
    this.times = [];
    this.start = 0;
  }

  get length() {
    return this.times.length - this.start;
  }

  at(index) {
    return this.times[this.start + index];
  }

  // How many entries are at or before `time`.
  countThrough(time) {
    return firstAfter(this.times, time, this.start) - this.start;
  }

  dropThrough(time) {
    this.start = firstAfter(this.times, time, this.start);
    if (this.start > 1024 && this.start * 2 > this.times.length) {
      this.times = this.times.slice(this.start);
      this.start = 0;
    }
  }

  dropNewest(n) {
    this.times.length = Math.max(this.start, this.times.length - n);
  }

  // `cost` entries at `time`, in time order.
  add(time, cost) {
    const at = firstAfter(this.times, time, this.start);
    // Out of time order is rare; a cost is at most 100000 entries.
    const after = at === this.times.length ? [] : this.times.splice(at);
    for (let i = 0; i < cost; i += 1) this.times.push(time);
    for (const later of after) this.times.push(later);
  }
}

class LocalLimiter {
  // Logs for at most maxClients keys; the least recently used key is
  // forgotten first (a forgotten client starts afresh). A Map keeps order.
  // Each call costs O(log n) plus the entries it trims or writes: a log is
  // trimmed by dropping its head in place, not by copying it.
  constructor(maxClients = 10000) {
    this.maxClients = maxClients;
    this.logs = new Map();
  }

  // SWL.CHECK: trim, count, record if every window has room.
  // windows: [[windowMs, limit], ...], at most MAX_WINDOWS (more throw, as
  // the module refuses them).
  check(key, windows, nowMs, cost = 1) {
    const log = this.trimmed(key, windows, nowMs);
    let counts = LocalLimiter.counts(log, windows, nowMs);
    const allowed = windows.every(([, limit], i) => counts[i] + cost <= limit);
    if (allowed) {
      log.add(nowMs, cost);
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
    log.dropNewest(cost);
    let counts = LocalLimiter.counts(log, windows, nowMs);
    const allowed = windows.every(([, limit], i) => counts[i] + cost <= limit);
    if (allowed) counts = counts.map((count) => count + cost);
    const verdict = LocalLimiter.verdict(log, windows, counts, nowMs, cost, allowed, allowed);
    this.keep(key, log);
    return verdict;
  }

  // Drops key's log (a reset).
  forget(key) {
    this.logs.delete(key);
  }

  trimmed(key, windows, nowMs) {
    if (windows.length > MAX_WINDOWS) {
      // As the module refuses the call, before anything changes.
      throw new TypeError(`windows: at most ${MAX_WINDOWS} per call, not ${windows.length}`);
    }
    const widest = Math.max(...windows.map(([ms]) => ms));
    const log = this.logs.get(key) || new Log();
    this.logs.delete(key);
    log.dropThrough(nowMs - widest);
    return log;
  }

  keep(key, log) {
    if (log.length && this.maxClients > 0) {
      this.logs.set(key, log);
      while (this.logs.size > this.maxClients) this.logs.delete(this.logs.keys().next().value);
    }
  }

  static counts(log, windows, nowMs) {
    return windows.map(([ms]) => log.length - log.countThrough(nowMs - ms));
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
        described.retry = rank >= 0 && rank < log.length ? Math.max(1, untilLeft(log.at(rank), windowMs, nowMs)) : 1;
      }
      if (binding === null || waitsLonger(described.retry, binding.retry)) binding = described;
    });
    if (binding === null) {
      const [[windowMs, limit]] = windows;
      binding = { limit, remaining: Math.max(0, limit - counts[0]), retry: allowed ? -1 : 1, windowMs };
    }
    const last = log.length ? log.at(log.length - 1) : null;
    let newest = last !== null && last > nowMs - widest ? last : null;
    if (pending) newest = newest === null ? nowMs : Math.max(newest, nowMs);
    const reset = newest === null ? 0 : untilLeft(newest, widest, nowMs);
    return new Verdict(allowed, binding.limit, binding.remaining, binding.retry, reset, binding.windowMs);
  }
}

module.exports = { LocalLimiter, MAX_WINDOWS };
