// The client protocol (clients/spec/protocol.md) against its vectors
// (clients/vectors/protocol.json): for each case, the commands the client
// sends and what it makes of the replies. The stand-in is the one thing a
// client sends commands with, a sendCommand function, answering as the
// vectors say: the vectors are the server.
'use strict';

const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { describe, it } = require('node:test');
const { SWL, UncertainOutcomeError, librarySource } = require('..');
const { ROOT } = require('./servers');

const VECTORS = JSON.parse(fs.readFileSync(path.join(ROOT, 'clients', 'vectors', 'protocol.json'), 'utf8'));

// Error replies and socket timeouts as node-redis rejects with them (the
// client tells them by their class names).
class ErrorReply extends Error {}
class SocketTimeoutError extends Error {}

function run(swl, call) {
  if (call.op === 'load_library') return swl.loadLibrary({ replace: call.replace });
  return swl[call.op](call.key, call.window_ms, call.limit, { nowMs: call.now_ms });
}

describe('the client protocol', () => {
  for (const testCase of VECTORS.cases) {
    it(testCase.name, async () => {
      let expected = [];
      const sendCommand = async (...command) => {
        const sent = command.map((arg) => (String(arg) === librarySource() ? '$LIBRARY' : String(arg)));
        assert.ok(expected.length > 0, `sent ${JSON.stringify(sent)} after the step's last exchange`);
        const exchange = expected.shift();
        assert.deepEqual(sent, exchange.send);
        if (exchange.error !== undefined) throw new ErrorReply(exchange.error);
        if (exchange.timeout) throw new SocketTimeoutError('Socket timeout timeout. Expecting data');
        return exchange.reply;
      };
      const swl = new SWL({ sendCommand });
      for (const [n, step] of testCase.steps.entries()) {
        expected = [...step.exchanges];
        const where = `${testCase.name}, step ${n + 1}`;
        const { result } = step;
        let answer;
        let failure;
        try {
          answer = await run(swl, step.call);
        } catch (error) {
          failure = error;
        }
        if (result.verdict) {
          assert.equal(failure, undefined, where);
          const [allowed, ...rest] = result.verdict;
          assert.deepEqual(
            [answer.allowed, answer.limit, answer.remaining, answer.retryAfterMs, answer.resetAfterMs, answer.windowMs],
            [allowed === 1, ...rest],
            where,
          );
        } else if (result.ok) {
          assert.equal(failure, undefined, where);
        } else if (result.uncertain) {
          assert.ok(failure instanceof UncertainOutcomeError, `${where}: ${failure}`);
        } else {
          assert.ok(failure !== undefined && !(failure instanceof UncertainOutcomeError), `${where}: ${failure}`);
          assert.match(failure.message.toLowerCase(), new RegExp(result.error.toLowerCase().replace(/[.*+?^${}()|[\]\\]/g, '\\$&')), where);
        }
        assert.deepEqual(expected, [], `${where}: not sent`);
      }
    });
  }
});
