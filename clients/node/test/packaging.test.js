// The package as a user gets it: npm pack's tarball carries the repository's
// function library byte for byte and nothing of the tests; it installs into
// a fresh app, which loads the library into a server without the module;
// and its types compile under tsc --strict as an application uses them.
'use strict';

const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { execFile } = require('node:child_process');
const { promisify } = require('node:util');
const { it, before, after } = require('node:test');
const { ROOT, RedisServer } = require('./servers');

const run = promisify(execFile);
const PACKAGE = path.resolve(__dirname, '..');
const LIBRARY = fs.readFileSync(path.join(ROOT, 'scripts', 'swl.lua'));
const LICENSE = fs.readFileSync(path.join(ROOT, 'LICENSE'));
const { version: VERSION } = require('../package.json');

let scratch;
let tarball;
before(async () => {
  scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'redis-swl-pack-'));
  const { stdout } = await run('npm', ['pack', '--json', '--pack-destination', scratch], { cwd: PACKAGE });
  const [packed] = JSON.parse(stdout.slice(stdout.indexOf('[')));
  tarball = { path: path.join(scratch, packed.filename), files: packed.files.map((f) => f.path).sort() };
});
after(() => fs.rmSync(scratch, { recursive: true, force: true }));

it('packs the code, the types, the library and the license, and nothing else', () => {
  assert.deepEqual(tarball.files, [
    'LICENSE', 'README.md', 'index.d.mts', 'index.d.ts', 'index.js', 'index.mjs', 'lib/cache.js', 'lib/client.js', 'lib/express-rate-limit.js', 'lib/library.js',
    'lib/local.js', 'lib/metrics.js', 'lib/middleware.js', 'lib/rate-limiter-flexible.js', 'package.json', 'swl.lua',
  ]);
});

it('installs into a fresh app, which loads the library it carries', async () => {
  const app = path.join(scratch, 'app');
  fs.mkdirSync(app);
  fs.writeFileSync(path.join(app, 'package.json'), JSON.stringify({ name: 'app', private: true }));
  await run('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', tarball.path], { cwd: app });
  const installed = path.join(app, 'node_modules', 'redis-swl');
  assert.ok(fs.readFileSync(path.join(installed, 'swl.lua')).equals(LIBRARY));
  assert.ok(fs.readFileSync(path.join(installed, 'LICENSE')).equals(LICENSE));
  assert.deepEqual(fs.readdirSync(path.join(app, 'node_modules')).sort(), ['.package-lock.json', 'redis-swl']);

  // The app's own node-redis: the one installed here, found through
  // NODE_PATH, as an app's own dependency would be.
  const server = await RedisServer.start({ module: false });
  try {
    const script = `
      const { createClient } = require('redis');
      const { SWL } = require('redis-swl');
      (async () => {
        const client = await createClient({ url: '${server.url}' }).connect();
        const verdict = await new SWL({ client }).check('k', 60000, 2, { nowMs: 1000, cost: 2 });
        console.log(JSON.stringify(verdict));
        client.destroy();
      })();
    `;
    const { stdout } = await run('node', ['-e', script], {
      cwd: app, env: { ...process.env, NODE_PATH: path.join(PACKAGE, 'node_modules') },
    });
    assert.deepEqual(JSON.parse(stdout), {
      allowed: true, limit: 2, remaining: 0, retryAfterMs: -1, resetAfterMs: 60000, windowMs: 60000,
    });
    // Without rate-limiter-flexible (no NODE_PATH): the exports can be
    // listed and copied, and RateLimiterSwl says what it needs.
    const alone = await run('node', ['-e', `
      const swl = require('redis-swl');
      const copy = { ...swl };
      try {
        new copy.RateLimiterSwl({});
      } catch (error) {
        console.log(JSON.stringify([Object.keys(swl).length, error.message]));
      }
    `], { cwd: app });
    assert.deepEqual(JSON.parse(alone.stdout), [
      15, 'redis-swl: RateLimiterSwl needs rate-limiter-flexible: npm install rate-limiter-flexible',
    ]);
    // As an ES module: SwlStore is the default export, as RedisStore is
    // rate-limit-redis's, and every name is there; require lists the same
    // names, and has SwlStore as default too (not listed).
    const esm = await run('node', ['--input-type=module', '-e', `
      import SwlStore, * as swl from 'redis-swl';
      import { createRequire } from 'node:module';
      const cjs = createRequire(import.meta.url)('redis-swl');
      const names = Object.keys(swl).filter((name) => name !== 'default').sort();
      console.log(JSON.stringify([SwlStore === cjs.SwlStore, swl.SWL === cjs.SWL, names.join() === Object.keys(cjs).sort().join(), cjs.default === SwlStore]));
    `], { cwd: app });
    assert.deepEqual(JSON.parse(esm.stdout), [true, true, true, true]);
    const probe = await server.client();
    try {
      assert.equal((await probe.sendCommand(['FUNCTION', 'LIST', 'LIBRARYNAME', 'swl'])).length, 1);
    } finally {
      probe.destroy();
    }
  } finally {
    await server.stop();
  }
});

it('installs beside node-redis 4, which its peer range takes', async () => {
  const app = path.join(scratch, 'app-redis4');
  fs.mkdirSync(app);
  fs.writeFileSync(path.join(app, 'package.json'), JSON.stringify({ name: 'app-redis4', private: true }));
  await run('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', 'redis@4.7.1', tarball.path], { cwd: app });
  const installed = (name) => JSON.parse(fs.readFileSync(path.join(app, 'node_modules', name, 'package.json'))).version;
  assert.deepEqual([installed('redis'), installed('redis-swl')], ['4.7.1', VERSION]);
});

it('has types that compile under tsc --strict as an application uses them', async () => {
  const tsc = path.join(PACKAGE, 'node_modules', '.bin', 'tsc');
  await run(tsc, ['-p', path.join(__dirname, 'types', 'tsconfig.json')], { cwd: PACKAGE });
  // An app with the package alone (no express-rate-limit, no
  // rate-limiter-flexible) compiles too: the types name no optional peer.
  const app = path.join(scratch, 'app');
  fs.writeFileSync(path.join(app, 'alone.ts'), [
    "import { SWL, SwlStore, RateLimiterSwl, Verdict } from 'redis-swl';",
    'declare const client: object;',
    'export async function f(): Promise<boolean> {',
    '  const verdict: Verdict = await new SWL({ client }).check("k", 1000, 1);',
    '  const store = new SwlStore({ client, prefix: "p:" });',
    '  const limiter = new RateLimiterSwl({ storeClient: client, points: 1, duration: 1 });',
    '  return verdict.allowed && store.prefix === "p:" && limiter.points === 1;',
    '}',
  ].join('\n'));
  // An ES module gets SwlStore as the default export.
  fs.writeFileSync(path.join(app, 'module.mts'), [
    "import SwlStore, { SWL } from 'redis-swl';",
    'declare const client: object;',
    'export const store: SwlStore = new SwlStore({ client, keySuffix: "" });',
    'export const swl: SWL = new SWL({ client });',
  ].join('\n'));
  await run(tsc, ['--strict', '--noEmit', '--module', 'node16', '--moduleResolution', 'node16', '--target', 'es2022',
    '--typeRoots', path.join(PACKAGE, 'node_modules', '@types'), '--types', 'node', 'alone.ts', 'module.mts'], { cwd: app });
});
