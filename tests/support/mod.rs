//! Real redis-server processes for the integration tests: each on a free
//! loopback port, in a temporary directory of its own, stopped and cleaned
//! up when dropped (also when the test fails).

#![allow(dead_code)] // each test file uses its own part of the support

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use redis::{Connection, RedisError, Value};

/// SWL.<NAME> on `key` through the module, or through the function
/// library (`library`) FCALL swl_<name> 1 on it: `name` is check, peek,
/// refund or entries.
pub fn swl_command(library: bool, name: &str, key: &str) -> redis::Cmd {
    let mut cmd = if library {
        let mut fcall = redis::cmd("FCALL");
        fcall.arg(format!("swl_{name}")).arg(1);
        fcall
    } else {
        redis::cmd(&format!("SWL.{}", name.to_uppercase()))
    };
    cmd.arg(key);
    cmd
}

/// The largest integer an argument takes (2^53-1).
pub const MAX_MS: u64 = (1 << 53) - 1;
/// The wait reported for an entry that never leaves its window (2^54).
pub const NEVER_MS: i64 = 1 << 54;

/// The module under test: `SWL_MODULE` if set, otherwise the release
/// library, built once per test binary (`cargo test` builds no cdylib).
pub fn module_path() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            if let Some(path) = std::env::var_os("SWL_MODULE") {
                return PathBuf::from(path);
            }
            let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
            let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
            let status = Command::new(cargo)
                .args(["build", "--release", "--lib", "--quiet"])
                .current_dir(manifest)
                .status()
                .expect("run cargo build");
            assert!(status.success(), "building the module failed");
            let target = std::env::var_os("CARGO_TARGET_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(|| manifest.join("target"));
            target.join("release").join("libredis_swl.so")
        })
        .clone()
}

/// A directory removed with everything in it when dropped.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(label: &str) -> TempDir {
        static SEQ: AtomicUsize = AtomicUsize::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let name = format!(
            "swl-{label}-{}-{}-{nanos}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        let path = std::env::temp_dir().join(name);
        std::fs::create_dir_all(&path).expect("create a temporary directory");
        TempDir(path)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// How a server's new logs are stored (`swl.encoding`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Zset,
    /// Compact logs in format version 1, as 0.3 wrote them.
    Compact1,
    Compact,
}

pub const ENCODINGS: [Encoding; 3] = [Encoding::Zset, Encoding::Compact1, Encoding::Compact];

impl Encoding {
    /// A server with the module, creating logs in this encoding.
    pub fn config(self) -> Config {
        Config {
            encoding: Some(self),
            ..Config::default()
        }
    }

    /// A compact log, of either format version.
    pub fn is_compact(self) -> bool {
        self != Encoding::Zset
    }

    pub fn name(self) -> &'static str {
        match self {
            Encoding::Zset => "zset",
            Encoding::Compact1 => "compact1",
            Encoding::Compact => "compact",
        }
    }
}

/// The server's `swl.encoding` setting.
pub fn encoding_setting(con: &mut Connection) -> String {
    let setting: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("swl.encoding")
        .query(con)
        .expect("CONFIG GET swl.encoding");
    setting.into_iter().nth(1).unwrap_or_default()
}

/// Sets the server's `swl.encoding`.
pub fn set_encoding(con: &mut Connection, encoding: Encoding) {
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("swl.encoding")
        .arg(encoding.name())
        .query(con)
        .unwrap();
}

/// Runs a test body once per encoding, saying which one a failure is in.
pub fn for_each_encoding(body: impl Fn(Encoding)) {
    for encoding in ENCODINGS {
        eprintln!("-- encoding {}", encoding.name());
        body(encoding);
    }
}

/// The function library (scripts/swl.lua) as it is loaded to create new
/// logs in `encoding`: its ENCODING line edited, as the README shows.
pub fn library_source(encoding: Encoding) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/swl.lua");
    let library = std::fs::read_to_string(path).expect("read scripts/swl.lua");
    const SETTING: &str = "\nlocal ENCODING = 'compact'\n";
    assert_eq!(
        library.matches(SETTING).count(),
        1,
        "swl.lua's ENCODING line"
    );
    library.replace(
        SETTING,
        &format!("\nlocal ENCODING = '{}'\n", encoding.name()),
    )
}

/// Loads the function library on `server` as it is shipped.
pub fn load_shipped_library(server: &Server) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/swl.lua");
    let library = std::fs::read_to_string(path).expect("read scripts/swl.lua");
    let name: String = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg(library)
        .query(&mut server.connect())
        .expect("FUNCTION LOAD");
    assert_eq!(name, "swl");
}

/// Loads the function library on `server`, creating new logs in `encoding`.
pub fn load_library(server: &Server, encoding: Encoding) {
    let name: String = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg(library_source(encoding))
        .query(&mut server.connect())
        .expect("FUNCTION LOAD");
    assert_eq!(name, "swl");
}

/// A server whose module and library both make new logs in `encoding`.
pub fn server_in(encoding: Encoding) -> Server {
    let server = Server::with(encoding.config());
    load_library(&server, encoding);
    server
}

/// How to start a server.
#[derive(Clone)]
pub struct Config {
    pub module: bool,
    /// A cluster node, with a free bus port of its own.
    pub cluster: bool,
    /// `swl.encoding`, where the module is loaded; None leaves the
    /// module's default, as `make run` does.
    pub encoding: Option<Encoding>,
    pub args: Vec<String>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            module: true,
            cluster: false,
            encoding: Some(Encoding::Zset),
            args: Vec::new(),
        }
    }
}

impl Config {
    /// A server with the module as it is loaded with no settings.
    pub fn as_shipped() -> Config {
        Config {
            encoding: None,
            ..Config::default()
        }
    }

    pub fn without_module() -> Config {
        Config {
            module: false,
            ..Config::default()
        }
    }

    pub fn arg(mut self, name: &str, value: &str) -> Config {
        self.args.push(format!("--{name}"));
        self.args.push(value.to_string());
        self
    }
}

pub struct Server {
    child: Option<Child>,
    port: u16,
    config: Config,
    dir: TempDir,
}

impl Server {
    /// A plain server with the module loaded.
    pub fn start() -> Server {
        Server::with(Config::default())
    }

    pub fn with(config: Config) -> Server {
        let dir = TempDir::new("redis");
        let mut server = Server {
            child: None,
            port: 0,
            config,
            dir,
        };
        // A free port can be taken by someone else between our probe and
        // the server's bind; try a few.
        for _ in 0..5 {
            server.port = free_port();
            if server.spawn() {
                return server;
            }
        }
        panic!("redis-server did not start; log:\n{}", server.log());
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    pub fn connect(&self) -> Connection {
        redis::Client::open(self.url())
            .and_then(|client| client.get_connection())
            .expect("connect to redis-server")
    }

    /// A connection that speaks RESP3 (HELLO 3), as redis-py 8 and
    /// node-redis 5 do by default: replies keep their types (doubles).
    pub fn connect_resp3(&self) -> Connection {
        redis::Client::open(format!("{}?protocol=resp3", self.url()))
            .and_then(|client| client.get_connection())
            .expect("connect to redis-server with RESP3")
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("redis.log")).unwrap_or_default()
    }

    /// Stops the server (without saving) and starts it again on the same
    /// port and directory, so it reloads whatever it persisted.
    pub fn restart(&mut self) {
        self.stop();
        assert!(
            self.spawn(),
            "redis-server did not restart; log:\n{}",
            self.log()
        );
    }

    /// Stops the server, runs `during`, and starts it again on the same
    /// port and directory.
    pub fn stop_for_a_while(&mut self, during: impl FnOnce()) {
        self.stop();
        during();
        assert!(
            self.spawn(),
            "redis-server did not restart; log:\n{}",
            self.log()
        );
    }

    /// Whether the process is still running.
    pub fn is_alive(&mut self) -> bool {
        matches!(self.child.as_mut().map(|c| c.try_wait()), Some(Ok(None)))
    }

    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn spawn(&mut self) -> bool {
        // REDIS_SERVER runs the tests on another server build (see the
        // README): redis-server from PATH by default.
        let mut command = Command::new(redis_server());
        command
            .arg("--port")
            .arg(self.port.to_string())
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .args(["--repl-diskless-sync-delay", "0"])
            .arg("--dir")
            .arg(self.dir.path())
            .args(["--logfile", "redis.log", "--daemonize", "no"]);
        if self.config.module {
            let module = module_path();
            assert!(module.exists(), "module not built: {}", module.display());
            command.arg("--loadmodule").arg(module);
            if let Some(encoding) = self.config.encoding {
                command.args(["--swl.encoding", encoding.name()]);
            }
        }
        if self.config.cluster {
            command
                .args([
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    "nodes.conf",
                ])
                .args(["--cluster-port", &free_port().to_string()]);
        }
        command.args(&self.config.args);
        let child = command
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("run redis-server (is it installed? `make test` installs it)");
        self.child = Some(child);
        self.wait_ready()
    }

    /// Ready once PING answers and nothing is still loading.
    fn wait_ready(&mut self) -> bool {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if !self.is_alive() {
                self.child = None;
                return false;
            }
            let ping = redis::Client::open(self.url())
                .and_then(|c| c.get_connection_with_timeout(Duration::from_millis(200)))
                .and_then(|mut c| redis::cmd("PING").query::<String>(&mut c));
            if ping.is_ok() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        self.stop();
        false
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .expect("find a free loopback port")
}

/// `SWL.CHECK key args...`, expected to succeed: the first five integers
/// of the reply. The sixth, the window the reply describes, is checked
/// here: the only window, or one of the windows, of the request.
pub fn check(con: &mut Connection, key: &str, args: &[&str]) -> [i64; 5] {
    let reply: Vec<i64> = redis::cmd("SWL.CHECK")
        .arg(key)
        .arg(args)
        .query(con)
        .unwrap_or_else(|e| panic!("SWL.CHECK {key} {args:?} failed: {e}"));
    first_five(&reply, args)
}

/// The windows (window_ms) a request names: the first, then each WINDOW.
pub fn windows_of(args: &[&str]) -> Vec<i64> {
    let mut windows = vec![args[0].parse().unwrap()];
    for (i, arg) in args.iter().enumerate() {
        if arg.eq_ignore_ascii_case("WINDOW") {
            windows.push(args[i + 1].parse().unwrap());
        }
    }
    windows
}

/// A reply's first five integers, after checking that it has six and the
/// sixth names a window of the request (the window itself if only one).
pub fn first_five(reply: &[i64], args: &[&str]) -> [i64; 5] {
    assert_eq!(reply.len(), 6, "six integers: {reply:?}");
    let windows = windows_of(args);
    if windows.len() == 1 {
        assert_eq!(reply[5], windows[0], "the window of {args:?}");
    } else {
        assert!(
            windows.contains(&reply[5]),
            "{reply:?}: a window of {args:?}"
        );
    }
    reply[..5].try_into().unwrap()
}

/// `SWL.CHECK key args...`: five integers, or the error's exact text.
pub fn check_result(con: &mut Connection, key: &str, args: &[&str]) -> Result<Vec<i64>, String> {
    redis::cmd("SWL.CHECK")
        .arg(key)
        .arg(args)
        .query(con)
        .map_err(|e| error_text(&e))
}

/// The exact error text a command replies with (code and message).
pub fn error_text(error: &RedisError) -> String {
    match (error.code(), error.detail()) {
        (Some(code), Some(detail)) => format!("{code} {detail}"),
        (Some(code), None) => code.to_string(),
        _ => error.to_string(),
    }
}

/// `command key args...`, expected to fail: the error's exact text.
pub fn command_error(con: &mut Connection, command: &str, key: &[u8], args: &[&[u8]]) -> String {
    let result: Result<Value, RedisError> = redis::cmd(command).arg(key).arg(args).query(con);
    match result {
        Err(error) => error_text(&error),
        Ok(value) => panic!("expected an error, got {value:?}"),
    }
}

/// A key's entries, oldest first: (member, score).
pub fn entries(con: &mut Connection, key: &[u8]) -> Vec<(Vec<u8>, f64)> {
    redis::cmd("ZRANGE")
        .arg(key)
        .arg(0)
        .arg(-1)
        .arg("WITHSCORES")
        .query(con)
        .expect("ZRANGE")
}

/// A log's exact contents, whatever its encoding, to compare servers:
/// a sorted set's members and scores, a compact log's bytes. Read with
/// plain commands, so it works where the module is not loaded.
#[derive(Debug, Clone, PartialEq)]
pub enum Contents {
    Missing,
    Zset(Vec<(Vec<u8>, f64)>),
    Bytes(Vec<u8>),
}

pub fn contents(con: &mut Connection, key: &[u8]) -> Contents {
    let kind: String = redis::cmd("TYPE").arg(key).query(con).expect("TYPE");
    match kind.as_str() {
        "none" => Contents::Missing,
        "zset" => Contents::Zset(entries(con, key)),
        "string" => Contents::Bytes(redis::cmd("GET").arg(key).query(con).expect("GET")),
        other => panic!("a log is a zset or a string, not {other}"),
    }
}

impl Contents {
    /// The entries' times, oldest first. A compact log is decoded here from
    /// the byte format the README documents, independently of the module.
    pub fn times(&self) -> Vec<f64> {
        match self {
            Contents::Missing => Vec::new(),
            Contents::Zset(entries) => entries.iter().map(|(_, s)| *s).collect(),
            Contents::Bytes(bytes) => decode_compact(bytes),
        }
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.times().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The times in a compact log of either format version.
pub fn decode_compact(bytes: &[u8]) -> Vec<f64> {
    assert_eq!(&bytes[..4], b"SWLc", "a compact log's magic");
    match bytes[4] {
        1 => decode_slots(bytes),
        2 => decode_packed(bytes),
        version => panic!("compact format version {version}"),
    }
}

/// The times in a compact log of format version 1: a 24-byte header
/// (magic `SWLc`, version 1, slot width, base time, head index), then slots
/// holding time - base + 1, the live ones from `head` up to the first 0.
pub fn decode_slots(bytes: &[u8]) -> Vec<f64> {
    let (base, slots) = compact_slots(bytes);
    slots
        .into_iter()
        .take_while(|&stored| stored != 0)
        .map(|stored| (base + stored - 1) as f64)
        .collect()
}

/// A compact log's base and the values its slots hold from the head on
/// (time - base + 1, 0 for a free slot), read off the bytes as the README
/// documents them.
pub fn compact_slots(bytes: &[u8]) -> (u64, Vec<u64>) {
    let width = bytes[5] as usize;
    assert!(width == 4 || width == 8, "slot width {width}");
    let base = u64::from_le_bytes(bytes[8..16].try_into().unwrap());
    let head = u32::from_le_bytes(bytes[16..20].try_into().unwrap()) as usize;
    let slots = bytes[24..]
        .chunks_exact(width)
        .skip(head)
        .map(|slot| {
            let mut word = [0u8; 8];
            word[..width].copy_from_slice(slot);
            u64::from_le_bytes(word)
        })
        .collect();
    (base, slots)
}

/// The bytes that `hex` (two digits a byte, as tests write values out) spells.
pub fn unhex(hex: &str) -> Vec<u8> {
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect()
}

/// The times in a compact log of format version 2, as docs/encodings.md
/// documents it: a 24-byte header (head rank, head block, tail block at
/// 8, 12 and 16), then blocks 256 bytes apart; a block holds its first
/// time (7 bytes), l, the rank of its first entry, n and top, then the
/// low parts of its entries from the front and the high parts in unary
/// from the back.
pub fn decode_packed(bytes: &[u8]) -> Vec<f64> {
    let word = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
    let (head_rank, head_block, tail) = (word(8), word(12) as usize, word(16) as usize);
    let mut times = Vec::new();
    let mut head_offset = 0;
    for index in head_block..=tail {
        let start = 24 + index * 256;
        let block = &bytes[start..(start + 256).min(bytes.len())];
        let mut first = [0u8; 8];
        first[..7].copy_from_slice(&block[..7]);
        let first = u64::from_le_bytes(first);
        let l = block[7] as usize;
        let before = u32::from_le_bytes(block[8..12].try_into().unwrap());
        let n = u16::from_le_bytes([block[12], block[13]]) as usize;
        if index == head_block {
            head_offset = head_rank.wrapping_sub(before) as usize;
        }
        let bit = |at: usize| block[16 + at / 8] >> (at % 8) & 1;
        let high_bit = |j: usize| block[block.len() - 1 - j / 8] >> (j % 8) & 1;
        let (mut i, mut j) = (0, 0);
        while i < n {
            if high_bit(j) == 1 {
                let low = (0..l).map(|b| u64::from(bit(i * l + b)) << b).sum::<u64>();
                times.push((first + (((j - i) as u64) << l) + low) as f64);
                i += 1;
            }
            j += 1;
        }
    }
    times.drain(..head_offset);
    times
}

/// A number INFO shows: `field` of the section `section`.
pub fn info_number(con: &mut Connection, section: &str, field: &str) -> u64 {
    let info: String = redis::cmd("INFO").arg(section).query(con).unwrap();
    info.lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or_else(|| panic!("INFO {section} has no number {field}"))
}

/// A key's scores (times), oldest first, whatever its encoding.
pub fn scores(con: &mut Connection, key: &str) -> Vec<f64> {
    contents(con, key.as_bytes()).times()
}

/// A key's absolute expiry in ms: -1 without one, -2 when there is no key.
pub fn expire_time(con: &mut Connection, key: &[u8]) -> i64 {
    redis::cmd("PEXPIRETIME")
        .arg(key)
        .query(con)
        .expect("PEXPIRETIME")
}

pub fn pttl(con: &mut Connection, key: &str) -> i64 {
    redis::cmd("PTTL").arg(key).query(con).expect("PTTL")
}

/// The server's clock in Unix milliseconds.
pub fn server_ms(con: &mut Connection) -> u64 {
    let (secs, micros): (u64, u64) = redis::cmd("TIME").query(con).expect("TIME");
    secs * 1000 + micros / 1000
}

/// Everything about a key that a check could change: type, entries, expiry.
/// Read by one read-only script, so an expiry cannot fall between the
/// reads (the clock stands still inside a script), and it runs even when
/// the server is out of memory.
pub fn snapshot(con: &mut Connection, key: &[u8]) -> (String, Option<Vec<u8>>, i64) {
    const READ: &str = "#!lua flags=no-writes
        local kind = redis.call('TYPE', KEYS[1])['ok']
        return {kind, redis.call('DUMP', KEYS[1]), redis.call('PEXPIRETIME', KEYS[1])}";
    redis::cmd("EVAL")
        .arg(READ)
        .arg(1)
        .arg(key)
        .query(con)
        .expect("snapshot script")
}

/// A replica of `master` started with `config`, once its link is up.
pub fn start_replica(master: &Server, config: Config) -> Server {
    let replica = Server::with(config.arg("replicaof", &format!("127.0.0.1 {}", master.port())));
    let mut con = replica.connect();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let info: String = redis::cmd("INFO")
            .arg("replication")
            .query(&mut con)
            .unwrap();
        if info.contains("master_link_status:up") {
            return replica;
        }
        assert!(Instant::now() < deadline, "replica did not sync:\n{info}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// WAIT until `replicas` replicas have everything written so far.
pub fn wait_for_replicas(con: &mut Connection, replicas: i64) {
    let synced: i64 = redis::cmd("WAIT")
        .arg(replicas)
        .arg(10000)
        .query(con)
        .unwrap();
    assert_eq!(synced, replicas, "replicas did not acknowledge in time");
}

/// A small deterministic generator, so a failing sequence reproduces.
pub struct Rng(pub u64);

impl Rng {
    pub fn below(&mut self, bound: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % bound.max(1)
    }
}

/// A Redis Cluster of masters on loopback, each with the module loaded.
pub struct Cluster {
    pub nodes: Vec<Server>,
}

impl Cluster {
    pub fn start(masters: usize) -> Cluster {
        Cluster::start_in(Encoding::Zset, masters)
    }

    /// A cluster whose nodes create logs in `encoding`.
    pub fn start_in(encoding: Encoding, masters: usize) -> Cluster {
        let config = Config {
            cluster: true,
            ..encoding.config()
        };
        let nodes: Vec<Server> = (0..masters).map(|_| Server::with(config.clone())).collect();
        let mut create = Command::new("redis-cli");
        create.arg("--cluster").arg("create");
        for node in &nodes {
            create.arg(format!("127.0.0.1:{}", node.port()));
        }
        let output = create
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .stdin(Stdio::null())
            .output()
            .expect("run redis-cli --cluster create");
        assert!(
            output.status.success(),
            "cluster create failed: {}",
            String::from_utf8_lossy(&output.stdout)
        );
        let cluster = Cluster { nodes };
        cluster.wait_until_ok();
        cluster
    }

    /// Every node sees the cluster as ok with all slots assigned.
    pub fn wait_until_ok(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        for node in &self.nodes {
            let mut con = node.connect();
            loop {
                let info: String = redis::cmd("CLUSTER").arg("INFO").query(&mut con).unwrap();
                if info.contains("cluster_state:ok")
                    && info.contains("cluster_slots_assigned:16384")
                {
                    break;
                }
                assert!(Instant::now() < deadline, "cluster not ok:\n{info}");
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }

    pub fn client(&self) -> redis::cluster::ClusterConnection {
        let urls: Vec<String> = self.nodes.iter().map(Server::url).collect();
        redis::cluster::ClusterClient::new(urls)
            .and_then(|client| client.get_connection())
            .expect("connect to the cluster")
    }

    /// The node that serves `slot`, by asking the first node.
    pub fn owner_of(&self, slot: u16) -> &Server {
        let mut con = self.nodes[0].connect();
        let slots: Vec<(u16, u16, Vec<Value>)> = redis::cmd("CLUSTER")
            .arg("SLOTS")
            .query(&mut con)
            .map(|ranges: Vec<Vec<Value>>| {
                ranges
                    .into_iter()
                    .map(|range| {
                        let start = redis::from_redis_value(&range[0]).unwrap();
                        let end = redis::from_redis_value(&range[1]).unwrap();
                        let master = match &range[2] {
                            Value::Array(node) => node.clone(),
                            other => panic!("unexpected CLUSTER SLOTS entry {other:?}"),
                        };
                        (start, end, master)
                    })
                    .collect()
            })
            .unwrap();
        let (_, _, master) = slots
            .iter()
            .find(|(start, end, _)| (*start..=*end).contains(&slot))
            .expect("slot assigned");
        let port: u16 = redis::from_redis_value(&master[1]).unwrap();
        self.nodes
            .iter()
            .find(|node| node.port() == port)
            .expect("owner is one of ours")
    }
}

/// A node's cluster id.
pub fn node_id(node: &Server) -> String {
    redis::cmd("CLUSTER")
        .arg("MYID")
        .query(&mut node.connect())
        .unwrap()
}

/// The hash slot of a key.
pub fn key_slot(con: &mut Connection, key: &str) -> u16 {
    redis::cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg(key)
        .query(con)
        .unwrap()
}

/// The redis-server the tests run: REDIS_SERVER where it is set (another
/// build or version), otherwise redis-server from PATH.
pub fn redis_server() -> String {
    std::env::var("REDIS_SERVER").unwrap_or_else(|_| "redis-server".to_string())
}
