// The default export from TypeScript compiled to CommonJS: `import SwlStore
// from 'redis-swl'` type-checks and constructs SwlStore, as `import
// RedisStore from 'rate-limit-redis'` does, with esModuleInterop and
// without it (and under module node16, which always has it). Each case is
// compiled by tsc --strict in a temporary app (a directory beside a
// node_modules linking to this package), then run with node; no Redis is needed to construct a
// store. require('redis-swl') lists the same names as before.
'use strict';

const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { execFile } = require('node:child_process');
const { it, before, after } = require('node:test');

const PACKAGE = path.resolve(__dirname, '..');
const TSC = path.join(PACKAGE, 'node_modules', '.bin', 'tsc');

// A command's exit code and output; a failing command is reported, not thrown.
function run(command, args, options) {
  return new Promise((resolve) => {
    execFile(command, args, options, (error, stdout, stderr) => {
      resolve({ code: error ? (error.code ?? 1) : 0, stdout, stderr });
    });
  });
}

const SOURCE = `
import SwlStore, { SwlStore as NamedSwlStore, SWL } from 'redis-swl';
import * as swl from 'redis-swl';

const sendCommand = async (...args: string[]): Promise<unknown> => args;
const store: SwlStore = new SwlStore({ sendCommand, prefix: 'p:' });
const prefix: string = store.prefix;
console.log(JSON.stringify({
  resolved: require.resolve('redis-swl'),
  instance: store instanceof NamedSwlStore,
  constructor: store.constructor === NamedSwlStore,
  prefix,
  namespace: swl.SwlStore === NamedSwlStore && swl.SWL === SWL,
}));
`;

let scratch;
before(() => {
  scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'redis-swl-ts-'));
  fs.mkdirSync(path.join(scratch, 'node_modules'));
  fs.symlinkSync(PACKAGE, path.join(scratch, 'node_modules', 'redis-swl'), 'dir');
});
after(() => fs.rmSync(scratch, { recursive: true, force: true }));

const CASES = [
  ['module commonjs, without esModuleInterop', ['--module', 'commonjs', '--esModuleInterop', 'false']],
  ['module commonjs, with esModuleInterop', ['--module', 'commonjs', '--esModuleInterop', 'true']],
  ['module node16 (CommonJS output)', ['--module', 'node16', '--moduleResolution', 'node16']],
];

for (const [name, options] of CASES) {
  it(`import SwlStore from 'redis-swl' type-checks and constructs SwlStore: ${name}`, async () => {
    const app = fs.mkdtempSync(path.join(scratch, 'app-'));
    fs.writeFileSync(path.join(app, 'package.json'), JSON.stringify({ name: 'app', private: true }));
    fs.writeFileSync(path.join(app, 'main.ts'), SOURCE);
    const out = path.join(app, 'out');
    const tsc = await run(TSC, [
      ...options, '--strict', '--target', 'es2020', '--outDir', out,
      '--typeRoots', path.join(PACKAGE, 'node_modules', '@types'), '--types', 'node', 'main.ts',
    ], { cwd: app });
    assert.equal(tsc.code, 0, `tsc failed:\n${tsc.stdout}${tsc.stderr}`);
    assert.match(fs.readFileSync(path.join(out, 'main.js'), 'utf8'), /require\("redis-swl"\)/);

    const node = await run(process.execPath, [path.join(out, 'main.js')], { cwd: app });
    assert.equal(node.code, 0, `node failed:\n${node.stderr}`);
    assert.deepEqual(JSON.parse(node.stdout), {
      resolved: path.join(fs.realpathSync(PACKAGE), 'index.js'),
      instance: true,
      constructor: true,
      prefix: 'p:',
      namespace: true,
    });
  });
}

it('require gives the same names as before, and SwlStore as default beside them', () => {
  const swl = require('..');
  assert.equal(swl.default, swl.SwlStore);
  assert.equal(swl.__esModule, true);
  // Neither is listed or copied: Object.keys, for...in and spreads are as before.
  assert.deepEqual(Object.keys(swl).sort(), [
    'DenialCache', 'ENCODINGS', 'LocalLimiter', 'MAX_WINDOWS', 'RateLimiterSwl', 'SWL', 'SwlStore', 'TimeoutError',
    'UncertainOutcomeError', 'Verdict', 'clientAddress', 'failedResponse', 'librarySource', 'rateLimit', 'rateLimitHeaders',
  ]);
  assert.equal('default' in { ...swl }, false);
  assert.equal(typeof swl, 'object');
});
