// Real redis-server processes for the tests and the bench: each on a free
// loopback port, in a temporary directory, with or without the redis-swl
// module (its path in SWL_MODULE, as `make test` sets it), stopped by the
// test that started it.
'use strict';

const assert = require('node:assert/strict');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const { spawn, execFile } = require('node:child_process');
const { promisify } = require('node:util');
const { createClient } = require('redis');

const ROOT = path.resolve(__dirname, '..', '..', '..');
const MODULE = process.env.SWL_MODULE || path.join(ROOT, 'target', 'release', 'libredis_swl.so');
const ENCODINGS = ['zset', 'compact'];
// What a server needs for DEBUG SLEEP (Redis 7 refuses DEBUG by default).
const DEBUG = ['--enable-debug-command', 'yes'];

function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

async function ping(port) {
  const client = createClient({ socket: { host: '127.0.0.1', port, reconnectStrategy: false, connectTimeout: 1000 } });
  client.on('error', () => {});
  try {
    await client.connect();
    return (await client.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    if (client.isOpen) client.destroy();
  }
}

class RedisServer {
  // module: load the redis-swl module (creating new logs in `encoding`);
  // clusterPort: a cluster node, with a bus port of its own.
  static async start({ module = true, encoding = 'zset', args = [], clusterPort = false } = {}) {
    const server = new RedisServer();
    server.module = module;
    server.encoding = encoding;
    server.dir = fs.mkdtempSync(path.join(os.tmpdir(), 'redis-swl-node-'));
    if (module && !fs.existsSync(MODULE)) throw new Error(`no module at ${MODULE}: build it (make build)`);
    // A port found free can be taken before redis-server binds it (the
    // test files run at once): a server that exits before it answers is
    // started again on other ports.
    for (let attempt = 1; ; attempt += 1) {
      server.port = await freePort();
      server.command = ['--port', String(server.port), '--bind', '127.0.0.1', '--save', '',
        '--appendonly', 'no', '--dir', server.dir];
      if (clusterPort) server.command.push('--cluster-port', String(await freePort()));
      if (module) server.command.push('--loadmodule', MODULE, '--swl.encoding', encoding);
      server.command.push(...args);
      try {
        await server.launch();
        return server;
      } catch (error) {
        if (!server.exitedEarly || attempt === 5) throw error;
        fs.rmSync(server.dir, { recursive: true, force: true });
        fs.mkdirSync(server.dir);
      }
    }
  }

  async launch() {
    // REDIS_SERVER runs the tests on another server build (see the README).
    this.process = spawn(process.env.REDIS_SERVER || 'redis-server', this.command, { stdio: 'ignore' });
    this.exited = new Promise((resolve) => this.process.once('exit', resolve));
    await this.waitReady();
  }

  async waitReady(timeoutMs = 20000) {
    const deadline = Date.now() + timeoutMs;
    let exited = false;
    this.exited.then(() => { exited = true; });
    this.exitedEarly = false;
    for (;;) {
      if (exited) {
        this.exitedEarly = true;
        throw new Error('redis-server exited');
      }
      if (await ping(this.port)) return;
      if (Date.now() > deadline) throw new Error('redis-server did not answer PING');
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  get url() {
    return `redis://127.0.0.1:${this.port}`;
  }

  // A connected node-redis client; the caller closes it.
  async client() {
    const client = createClient({ url: this.url });
    client.on('error', () => {});
    await client.connect();
    return client;
  }

  // Stalls the server: it keeps its connections and answers nothing.
  pause() {
    this.process.kill('SIGSTOP');
  }

  resume() {
    this.process.kill('SIGCONT');
  }

  // Stops the server, keeping its directory for a restart.
  async kill() {
    this.process.kill('SIGKILL');
    await this.exited;
  }

  // Starts the server again, on the same port and directory.
  restart() {
    return this.launch();
  }

  async stop() {
    if (this.process.exitCode === null && this.process.signalCode === null) {
      this.resume();
      this.process.kill('SIGTERM');
      await this.exited;
    }
    fs.rmSync(this.dir, { recursive: true, force: true });
  }
}

// Three primaries with every slot assigned.
class Cluster {
  static async start({ module = true, encoding = 'zset' } = {}) {
    const cluster = new Cluster();
    cluster.nodes = [];
    for (let i = 0; i < 3; i += 1) {
      const args = ['--cluster-enabled', 'yes', '--cluster-node-timeout', '5000'];
      cluster.nodes.push(await RedisServer.start({ module, encoding, args, clusterPort: true }));
    }
    try {
      const addresses = cluster.nodes.map((node) => `127.0.0.1:${node.port}`);
      await promisify(execFile)('redis-cli', ['--cluster', 'create', ...addresses, '--cluster-replicas', '0', '--cluster-yes'],
        { timeout: 60000 });
      const deadline = Date.now() + 30000;
      while (!(await cluster.ready())) {
        if (Date.now() > deadline) throw new Error('the cluster did not come up');
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    } catch (error) {
      await cluster.stop();
      throw error;
    }
    return cluster;
  }

  async ready() {
    for (const node of this.nodes) {
      const client = await node.client();
      try {
        const info = await client.sendCommand(['CLUSTER', 'INFO']);
        if (!info.includes('cluster_state:ok') || !info.includes('cluster_known_nodes:3')) return false;
      } finally {
        client.destroy();
      }
    }
    return true;
  }

  get rootNodes() {
    return this.nodes.map((node) => ({ url: node.url }));
  }

  async stop() {
    await Promise.all(this.nodes.map((node) => node.stop()));
  }
}

// The server stalled for `seconds` by DEBUG SLEEP, sent on a connection of
// its own before anything the test sends next: it then reads nothing and
// answers nothing, as a server busy with a long command or paused by its
// host. wait() resolves once it has woken and handled what arrived
// meanwhile.
class Stall {
  static async start(port, seconds = 0.6) {
    const stall = new Stall();
    stall.socket = net.connect(port, '127.0.0.1');
    stall.buffered = '';
    stall.waiting = null;
    stall.socket.setEncoding('latin1');
    stall.socket.on('data', (data) => {
      stall.buffered += data;
      if (stall.waiting) stall.waiting();
    });
    // Once it has answered, the server reads this connection as it reads
    // the others: a command sent on it now is read before one sent next on
    // another (a connection not yet accepted would be read later).
    stall.socket.write('PING\r\n');
    assert.equal(await stall.line(), '+PONG');
    await new Promise((resolve) => { stall.socket.write(`DEBUG SLEEP ${seconds}\r\n`, resolve); });
    return stall;
  }

  async line() {
    while (!this.buffered.includes('\r\n')) {
      await new Promise((resolve) => { this.waiting = resolve; });
    }
    const end = this.buffered.indexOf('\r\n');
    const line = this.buffered.slice(0, end);
    this.buffered = this.buffered.slice(end + 2);
    return line;
  }

  async wait() {
    assert.equal(await this.line(), '+OK');
    // Commands that came from other connections during the sleep were read
    // before this PING, which came after them.
    this.socket.write('PING\r\n');
    assert.equal(await this.line(), '+PONG');
    this.socket.destroy();
  }
}

// What a key holds: 'zset', 'compact' (a compact log of format version 2),
// 'compact1' (format version 1), or its TYPE.
async function logKind(client, key) {
  const kind = await client.sendCommand(['TYPE', key]);
  if (kind === 'string') {
    const head = await client.sendCommand(['GETRANGE', key, '0', '4'], { typeMapping: { 36: Buffer } });
    if (Buffer.isBuffer(head) && head.equals(Buffer.from('SWLc\x02', 'latin1'))) return 'compact';
    if (Buffer.isBuffer(head) && head.equals(Buffer.from('SWLc\x01', 'latin1'))) return 'compact1';
  }
  return kind;
}

module.exports = {
  ROOT, MODULE, ENCODINGS, DEBUG, RedisServer, Cluster, Stall, freePort, logKind,
};
