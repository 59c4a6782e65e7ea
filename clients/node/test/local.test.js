// The local limiter against the shared test vectors: for every call, the
// reply the module gave (clients/vectors/local-limiter.json, written and
// checked by tests/vectors.rs against the module).
'use strict';

const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { it } = require('node:test');
const { LocalLimiter, MAX_WINDOWS, Verdict } = require('..');
const { ROOT } = require('./servers');

const VECTORS = JSON.parse(fs.readFileSync(path.join(ROOT, 'clients', 'vectors', 'local-limiter.json'), 'utf8'));

it('replies as the module did', () => {
  assert.ok(VECTORS.cases.length >= 40);
  const limiter = new LocalLimiter();
  VECTORS.cases.forEach((vector, n) => {
    for (const call of vector.calls) {
      const verdict = limiter[call.op](`case${n}`, vector.windows, call.now_ms, call.cost);
      assert.deepEqual(verdict, Verdict.fromReply(call.reply), `case ${n}: ${JSON.stringify(call)}`);
    }
  });
});

it('takes as many windows as the module, and refuses one more', () => {
  const most = VECTORS.windows_at_most;
  assert.equal(MAX_WINDOWS, most);
  const windows = Array.from({ length: most + 1 }, (_, n) => [1000 + n, 5]);
  const limiter = new LocalLimiter();
  assert.deepEqual(limiter.check('k', windows.slice(0, most), 1000), new Verdict(true, 5, 4, -1, 1000 + most - 1, 1000));
  assert.deepEqual(limiter.refund('k', windows.slice(0, most), 1001), new Verdict(true, 5, 4, -1, 1000 + most - 1, 1000));
  for (const op of ['check', 'refund']) {
    assert.throws(() => limiter[op]('k', windows, 1002), { name: 'TypeError', message: `windows: at most ${most} per call, not ${most + 1}` });
  }
  // Refused before anything changed: the log still holds nothing.
  assert.deepEqual(limiter.check('k', windows.slice(0, 1), 1003), new Verdict(true, 5, 4, -1, 1000, 1000));
});

it('forgets the least recently used client first', () => {
  const limiter = new LocalLimiter(2);
  const window = [[60000, 1]];
  for (const key of ['a', 'b']) assert.equal(limiter.check(key, window, 1000).allowed, true);
  assert.equal(limiter.check('a', window, 1001).allowed, false); // a is now the most recent
  assert.equal(limiter.check('c', window, 1002).allowed, true); // b is forgotten
  assert.equal(limiter.check('b', window, 1003).allowed, true);
  assert.equal(limiter.check('c', window, 1004).allowed, false);
});

it('records a cost of 100000 in one call', () => {
  const limiter = new LocalLimiter();
  assert.deepEqual(limiter.check('k', [[1000, 100000]], 5, 100000), new Verdict(true, 100000, 0, -1, 1000, 1000));
  // The refund replies as a peek of the same cost: it would fit exactly.
  assert.deepEqual(limiter.refund('k', [[1000, 100000]], 6, 99999), new Verdict(true, 100000, 0, -1, 1000, 1000));
  assert.deepEqual(limiter.check('k', [[1000, 100000]], 7), new Verdict(true, 100000, 99998, -1, 1000, 1000));
});
