// The denial cache on its own, on a clock the test moves: what it answers,
// what it keeps and forgets, and the shared vectors replayed through it.
'use strict';

const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { it } = require('node:test');
const { DenialCache, Verdict } = require('..');
const { ROOT } = require('./servers');

const VECTORS = JSON.parse(fs.readFileSync(path.join(ROOT, 'clients', 'vectors', 'local-limiter.json'), 'utf8'));

const denial = (retry, reset) => Verdict.fromReply([0, 5, 0, retry, reset, 1000]);

// A cache on a clock at `time.now` milliseconds.
function cacheAt(maxKeys = 10) {
  const time = { now: 0 };
  return { cache: new DenialCache(maxKeys, { clock: () => time.now }), time };
}

it('answers a denial with the wait left until it ends', () => {
  const { cache, time } = cacheAt();
  cache.keep('k', 1000, 5, {}, denial(300, 900), cache.ticket());
  time.now = 100;
  assert.deepEqual(cache.answer('k', 1000, 5), denial(200, 800));
  time.now = 299.5;
  assert.deepEqual(cache.answer('k', 1000, 5), denial(1, 601));
  time.now = 300;
  assert.equal(cache.answer('k', 1000, 5), null);
  assert.equal(cache.size, 0);
});

it('answers only the same windows and a cost at least the denied one', () => {
  const { cache, time } = cacheAt();
  const two = { cost: 2, windows: [[60000, 50]] };
  cache.keep('k', 1000, 5, two, denial(300, 900), cache.ticket());
  time.now = 1;
  assert.ok(cache.answer('k', 1000, 5, two));
  assert.ok(cache.answer('k', 1000, 5, { ...two, cost: 3 }));
  assert.equal(cache.answer('k', 1000, 5, { ...two, cost: 1 }), null);
  assert.equal(cache.answer('k', 1000, 5, { cost: 2 }), null);
  assert.equal(cache.answer('k', 1000, 6, two), null);
  assert.equal(cache.answer('other', 1000, 5, two), null);
});

it('is neither used nor filled by PENALIZE or a caller\'s time', () => {
  const { cache } = cacheAt();
  for (const options of [{ penalize: true }, { nowMs: 5000 }]) {
    cache.keep('k', 1000, 5, options, denial(300, 900), cache.ticket());
    assert.equal(cache.size, 0);
  }
  cache.keep('k', 1000, 5, {}, denial(300, 900), cache.ticket());
  for (const options of [{ penalize: true }, { nowMs: 5000 }]) {
    assert.equal(cache.answer('k', 1000, 5, options), null);
  }
});

it('keeps no admission, nor a denial that waiting cannot end', () => {
  const { cache } = cacheAt();
  cache.keep('k', 1000, 5, {}, Verdict.fromReply([1, 5, 4, -1, 1000, 1000]), cache.ticket());
  cache.keep('k', 1000, 5, {}, Verdict.fromReply([0, 1, 1, -1, 0, 1000]), cache.ticket());
  assert.equal(cache.size, 0);
});

it('drops the denials of a key admitted since', () => {
  const { cache } = cacheAt();
  cache.keep('k', 1000, 5, {}, denial(300, 900), cache.ticket());
  cache.keep('k', 1000, 5, { cost: 1, windows: [] }, Verdict.fromReply([1, 5, 0, -1, 1000, 1000]), cache.ticket());
  assert.equal(cache.answer('k', 1000, 5), null);
});

it('lets a forget win over checks sent before it', () => {
  const { cache } = cacheAt();
  cache.keep('k', 1000, 5, {}, denial(300, 900), cache.ticket());
  const sentBefore = cache.ticket();
  cache.forget('k');
  assert.equal(cache.answer('k', 1000, 5), null);
  cache.keep('k', 1000, 5, {}, denial(300, 900), sentBefore);
  assert.equal(cache.answer('k', 1000, 5), null);
  cache.keep('k', 1000, 5, {}, denial(300, 900), cache.ticket());
  assert.ok(cache.answer('k', 1000, 5));
});

it('forgets the least recently used key first, and forgets stay safe', () => {
  const { cache } = cacheAt(2);
  const keep = (key, ticket) => cache.keep(key, 1000, 5, {}, denial(300, 900), ticket);
  keep('a', cache.ticket());
  keep('b', cache.ticket());
  assert.ok(cache.answer('a', 1000, 5)); // a is the newest
  keep('c', cache.ticket());
  assert.equal(cache.size, 2);
  assert.equal(cache.answer('b', 1000, 5), null);
  assert.ok(cache.answer('a', 1000, 5));
  // A forgotten key pushed out still refuses a check sent before.
  const sentBefore = cache.ticket();
  cache.forget('a');
  keep('d', cache.ticket());
  keep('e', cache.ticket());
  keep('a', sentBefore);
  assert.equal(cache.answer('a', 1000, 5), null);
  const off = new DenialCache(0);
  off.keep('k', 1000, 5, {}, denial(300, 900), off.ticket());
  assert.equal(off.size, 0);
  assert.throws(() => new DenialCache(-1), { name: 'TypeError' });
});

// The module's replies in time order, through the cache: a call it answers
// is one the module denied, with the module's reply at that time where the
// cost is the cached one (but for fewer remaining where it is above 1), and
// never a longer wait where it is larger.
it('answers from the vectors only what the module denied, as it did', () => {
  const { cache, time } = cacheAt(10000);
  let answered = 0;
  let asked = 0;
  VECTORS.cases.forEach((vector, n) => {
    const [[windowMs, limit], ...windows] = vector.windows;
    const key = `case${n}`;
    let cachedCost = null;
    for (const call of vector.calls) {
      time.now = call.now_ms;
      const module = Verdict.fromReply(call.reply);
      const where = `case ${n}: ${JSON.stringify(call)}`;
      if (call.op === 'refund') {
        cache.forget(key);
        cachedCost = null;
        continue;
      }
      const options = { cost: call.cost, windows };
      const ticket = cache.ticket();
      const cached = cache.answer(key, windowMs, limit, options);
      if (cached && call.cost === cachedCost) {
        // Of a cost above 1, entries may leave before the wait ends: more
        // remain than the cache says.
        const remaining = Math.max(cached.remaining, module.remaining);
        assert.deepEqual({ ...cached, remaining }, { ...module }, where);
        assert.ok(call.cost > 1 || cached.remaining === module.remaining, where);
        answered += 1;
      } else if (cached) {
        assert.equal(module.allowed, false, where);
        assert.equal(cached.allowed, false, where);
        assert.equal(cached.resetAfterMs, module.resetAfterMs, where);
        // -1: waiting cannot help, longer than any wait.
        assert.ok(module.retryAfterMs === -1 || cached.retryAfterMs <= module.retryAfterMs, where);
        answered += 1;
      } else {
        asked += 1;
        cache.keep(key, windowMs, limit, options, module, ticket);
        if (module.allowed) cachedCost = null;
        else if (module.retryAfterMs > 0) cachedCost = call.cost;
      }
    }
  });
  assert.ok(answered > 20, `${answered} answered from the cache`);
  assert.ok(asked > answered, `${asked} asked`);
});
