//! The rate-limit middleware for FastAPI, Express, axum and net/http, each run as its
//! tiny app against a real redis-server and asked over real HTTP: headers
//! while admitting and denying, with one window and several; then Redis
//! stalled, paused, without the module, and stopped and restarted. Every
//! request is answered within the timeout plus a margin, by each app's
//! failure policy (open, closed, a bounded local limiter), and each app
//! returns to Redis by itself. Each app keys clients by their address, not
//! by a header they choose; serves its failure count at /failures, outside
//! the limit; and refuses an unknown policy. The apps are the Python, Node
//! and Rust packages' middleware, which go to the function library where
//! the module is missing. A middleware whose language runtime is missing is
//! skipped, saying so.
//!
//! The apps key by the peer's address, so each client here connects from
//! an address of its own in 127.0.0.0/8, all of which is loopback on Linux.

mod support;

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use socket2::{Domain, Socket, Type};
use support::{Config, Server};

/// The app's timeout for each call to Redis, and what a reply may take
/// beyond it on a shared, busy machine. (Long enough that a busy machine's
/// round trip is not a failure: the steps through Redis expect Redis's
/// answer, and only the faults the tests make, its policy's.)
const TIMEOUT_MS: u64 = 500;
const MARGIN: Duration = Duration::from_millis(700);

fn manifest() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    Python,
    Node,
    Rust,
    Go,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Python => "python",
            Kind::Node => "node",
            Kind::Rust => "rust",
            Kind::Go => "go",
        }
    }

    /// Installs what the app needs, once per run (tests run in parallel and
    /// would otherwise install into the same place at once); false where
    /// its runtime is missing.
    fn set_up(self) -> bool {
        static DONE: [OnceLock<bool>; 4] = [const { OnceLock::new() }; 4];
        *DONE[self as usize].get_or_init(|| self.install())
    }

    fn install(self) -> bool {
        let out = Command::new("bash")
            .arg(manifest().join("scripts/setup-examples.sh"))
            .arg(self.name())
            .output()
            .expect("run scripts/setup-examples.sh");
        if out.status.code() == Some(3) {
            eprintln!(
                "skipping the {} middleware: {}",
                self.name(),
                String::from_utf8_lossy(&out.stderr).trim()
            );
            return false;
        }
        assert!(
            out.status.success(),
            "setting up the {} middleware failed: {}",
            self.name(),
            String::from_utf8_lossy(&out.stderr)
        );
        true
    }

    fn command(self) -> Command {
        let root = manifest();
        match self {
            Kind::Python => {
                let mut command = Command::new(root.join("target/middleware/python/bin/python"));
                // No __pycache__ left in the source tree.
                command
                    .arg("app.py")
                    .env("PYTHONDONTWRITEBYTECODE", "1")
                    .current_dir(root.join("examples/fastapi"));
                command
            }
            Kind::Node => {
                let mut command = Command::new("node");
                command
                    .arg("app.js")
                    .current_dir(root.join("examples/express"));
                command
            }
            Kind::Rust => Command::new(root.join("target/middleware/axum/release/swl-axum")),
            Kind::Go => Command::new(root.join("target/middleware/go/swl-nethttp")),
        }
    }
}

/// One app process, stopped when dropped.
struct App {
    child: Child,
    port: u16,
    policy: &'static str,
}

impl App {
    fn start(kind: Kind, redis_port: u16, policy: &'static str, windows: &str) -> App {
        App::start_with(kind, redis_port, policy, windows, &[])
    }

    /// An app with further settings from the environment.
    fn start_with(
        kind: Kind,
        redis_port: u16,
        policy: &'static str,
        windows: &str,
        settings: &[(&str, &str)],
    ) -> App {
        let port = free_port();
        let child = app_command(kind, redis_port, port, policy, windows)
            .envs(settings.iter().copied())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("start the {kind:?} app: {e}"));
        let mut app = App {
            child,
            port,
            policy,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                matches!(app.child.try_wait(), Ok(None)),
                "the {kind:?} app exited"
            );
            assert!(Instant::now() < deadline, "the {kind:?} app did not listen");
            std::thread::sleep(Duration::from_millis(20));
        }
        app
    }

    /// GET / from `client`'s address.
    fn get(&self, client: &str) -> Reply {
        request(self.port, address(client), "/", &[])
    }

    /// GET /failures: the app's failure count.
    fn failures(&self, client: &str) -> u64 {
        let reply = request(self.port, address(client), "/failures", &[]);
        assert_eq!(
            reply.status, 200,
            "{} app, /failures: {reply:?}",
            self.policy
        );
        assert_eq!(
            reply.header("ratelimit-source"),
            "",
            "{} app: /failures went through the limiter: {reply:?}",
            self.policy
        );
        let count = reply.body.trim_end_matches('\n');
        assert_eq!(reply.body, format!("{count}\n"), "one line: {reply:?}");
        count
            .parse()
            .unwrap_or_else(|_| panic!("a count: {reply:?}"))
    }

    /// Asks until Redis answers again (the app's backoff is at most 1 s).
    fn wait_for_redis(&self, client: &str) {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let reply = self.get(client);
            if reply.header("ratelimit-source") == "redis" {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the {} app never returned to Redis: {reply:?}",
                self.policy
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for App {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The app's command, set up to talk to Redis on `redis_port` and listen
/// on `port`.
fn app_command(kind: Kind, redis_port: u16, port: u16, policy: &str, windows: &str) -> Command {
    let mut command = kind.command();
    command
        .env("REDIS_URL", format!("redis://127.0.0.1:{redis_port}/"))
        .env("PORT", port.to_string())
        .env("POLICY", policy)
        .env("WINDOWS", windows)
        .env("TIMEOUT_MS", TIMEOUT_MS.to_string())
        .env("LOCAL_MAX_CLIENTS", "2");
    command
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// The clients of these tests, each at its own loopback address.
const CLIENTS: [&str; 21] = [
    "warm-up",
    "alice",
    "bob",
    "address",
    "stall",
    "after-stall",
    "pause",
    "after-pause",
    "unloaded",
    "unloaded-again",
    "after-unload",
    "stopped",
    "third",
    "fourth",
    "after-restart",
    "shared",
    "operator",
    "operator-down",
    "metrics",
    "metrics-off",
    "metrics-down",
];

fn address(client: &str) -> Ipv4Addr {
    let index = CLIENTS
        .iter()
        .position(|c| *c == client)
        .unwrap_or_else(|| panic!("{client} is not in CLIENTS"));
    Ipv4Addr::new(127, 0, 1, index as u8 + 1)
}

/// A TCP connection to 127.0.0.1:`port` from `from`. std connects only
/// from the address the system picks, so: socket, bind, connect.
fn connect_from(from: Ipv4Addr, port: u16) -> io::Result<TcpStream> {
    let socket = Socket::new(Domain::IPV4, Type::STREAM, None)?;
    socket.bind(&SocketAddr::from((from, 0)).into())?;
    socket.connect(&SocketAddr::from((Ipv4Addr::LOCALHOST, port)).into())?;
    Ok(TcpStream::from(socket))
}

#[derive(Debug)]
struct Reply {
    status: u16,
    headers: HashMap<String, String>,
    body: String,
    took: Duration,
}

impl Reply {
    fn header(&self, name: &str) -> &str {
        self.headers.get(name).map_or("", String::as_str)
    }
}

/// A real HTTP/1.1 GET over a socket from `from`, with extra headers.
fn request(port: u16, from: Ipv4Addr, path: &str, headers: &[(&str, &str)]) -> Reply {
    let started = Instant::now();
    let mut stream = connect_from(from, port).expect("connect to the app");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let extra: String = headers
        .iter()
        .map(|(name, value)| format!("{name}: {value}\r\n"))
        .collect();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{extra}Connection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).expect("an HTTP response");
    let took = started.elapsed();
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|line| line.split(' ').nth(1))
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("a status line: {text:?}"));
    let headers: HashMap<String, String> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_string()))
        .collect();
    let body = match headers.get("transfer-encoding") {
        Some(coding) if coding.eq_ignore_ascii_case("chunked") => dechunked(body),
        _ => body.to_string(),
    };
    Reply {
        status,
        headers,
        body,
        took,
    }
}

/// A chunked body's data (Go's net/http sends a long body so).
fn dechunked(mut body: &str) -> String {
    let mut data = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let size = usize::from_str_radix(size.split(';').next().unwrap_or("").trim(), 16)
            .unwrap_or_else(|_| panic!("a chunk size: {size:?}"));
        if size == 0 {
            break;
        }
        data.push_str(&rest[..size]);
        body = rest[size..].strip_prefix("\r\n").expect("a chunk's end");
    }
    data
}

/// A TCP proxy in front of Redis that can stall (hold every connection,
/// answer nothing) or go back to forwarding, dropping what it held.
struct Proxy {
    port: u16,
    stalled: Arc<AtomicU8>,
    sockets: Arc<Mutex<Vec<TcpStream>>>,
}

impl Proxy {
    fn start(upstream: u16) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
        let port = listener.local_addr().unwrap().port();
        let stalled = Arc::new(AtomicU8::new(0));
        let sockets: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        let (flag, held) = (stalled.clone(), sockets.clone());
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                held.lock().unwrap().push(client.try_clone().unwrap());
                if flag.load(Ordering::SeqCst) == 1 {
                    continue; // accepted, never answered
                }
                let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)) else {
                    let _ = client.shutdown(Shutdown::Both);
                    continue;
                };
                held.lock().unwrap().push(server.try_clone().unwrap());
                for (mut from, mut to) in [
                    (client.try_clone().unwrap(), server.try_clone().unwrap()),
                    (server, client),
                ] {
                    let flag = flag.clone();
                    std::thread::spawn(move || {
                        let mut buffer = [0u8; 16384];
                        while let Ok(n) = from.read(&mut buffer) {
                            // Stalled: bytes go nowhere, nothing comes back.
                            if n == 0
                                || (flag.load(Ordering::SeqCst) == 0
                                    && to.write_all(&buffer[..n]).is_err())
                            {
                                break;
                            }
                        }
                        if flag.load(Ordering::SeqCst) == 0 {
                            let _ = to.shutdown(Shutdown::Both);
                        }
                    });
                }
            }
        });
        Proxy {
            port,
            stalled,
            sockets,
        }
    }

    fn stall(&self) {
        self.stalled.store(1, Ordering::SeqCst);
    }

    /// Forwards again; connections held while stalled are dropped, as a
    /// server that hung would drop them, so clients reconnect.
    fn resume(&self) {
        self.stalled.store(0, Ordering::SeqCst);
        for socket in self.sockets.lock().unwrap().drain(..) {
            let _ = socket.shutdown(Shutdown::Both);
        }
    }
}

fn redis_cmd(server: &Server, args: &[&str]) -> redis::Value {
    redis::cmd(args[0])
        .arg(&args[1..])
        .query(&mut server.connect())
        .unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

fn assert_headers(reply: &Reply, status: u16, expected: &[(&str, &str)], context: &str) {
    assert_eq!(reply.status, status, "{context}: {reply:?}");
    for (name, value) in expected {
        assert_eq!(reply.header(name), *value, "{context}: {name} in {reply:?}");
    }
}

/// What each policy answers while Redis cannot, for a client new to it.
fn assert_policy(app: &App, client: &str, fault: &str) {
    let reply = app.get(client);
    let context = format!("{} app, {fault}", app.policy);
    assert_policy_answered(app, &reply, &context);
}

/// `reply` is the app's policy's answer, in time.
fn assert_policy_answered(app: &App, reply: &Reply, context: &str) {
    assert!(
        reply.took < Duration::from_millis(TIMEOUT_MS) + MARGIN,
        "{context}: answered in {:?}",
        reply.took
    );
    match app.policy {
        "open" => {
            assert_headers(reply, 200, &[("ratelimit-source", "open")], context);
            assert_eq!(reply.header("ratelimit"), "", "{context}");
        }
        "closed" => assert_headers(
            reply,
            503,
            &[("ratelimit-source", "closed"), ("retry-after", "1")],
            context,
        ),
        _ => assert_headers(
            reply,
            200,
            &[
                ("ratelimit-source", "local"),
                ("ratelimit-policy", "\"60000ms\";q=3;w=60"),
                ("ratelimit", "\"60000ms\";r=2;t=60"),
            ],
            context,
        ),
    }
}

fn exercise(kind: Kind) {
    if !kind.set_up() {
        return;
    }
    let mut redis = Server::with(Config::default().arg("enable-module-command", "yes"));
    let proxy = Proxy::start(redis.port());
    let open = App::start(kind, proxy.port, "open", "60000:3");
    let closed = App::start(kind, proxy.port, "closed", "60000:10,1000:2");
    let local = App::start(kind, proxy.port, "local", "60000:3");
    let apps = [&open, &closed, &local];
    for app in apps {
        app.wait_for_redis("warm-up");
    }

    // Through Redis: one window, admitting then denying.
    let one = "\"60000ms\";q=3;w=60";
    for remaining in ["2", "1", "0"] {
        let reply = open.get("alice");
        let ratelimit = format!("\"60000ms\";r={remaining};t=60");
        let expected = [
            ("ratelimit-source", "redis"),
            ("ratelimit-policy", one),
            ("ratelimit", ratelimit.as_str()),
        ];
        assert_headers(&reply, 200, &expected, "one window");
        assert_eq!(reply.header("retry-after"), "");
    }
    let expected = [
        ("ratelimit-policy", one),
        ("ratelimit", "\"60000ms\";r=0;t=60"),
        ("retry-after", "60"),
    ];
    assert_headers(&open.get("alice"), 429, &expected, "one window, denied");
    // Several windows: the headers describe the binding one.
    let burst = "\"1000ms\";q=2;w=1";
    for remaining in ["1", "0"] {
        let ratelimit = format!("\"1000ms\";r={remaining};t=1");
        let expected = [
            ("ratelimit-policy", burst),
            ("ratelimit", ratelimit.as_str()),
        ];
        assert_headers(&closed.get("bob"), 200, &expected, "several windows");
    }
    let expected = [
        ("ratelimit-policy", burst),
        ("ratelimit", "\"1000ms\";r=0;t=1"),
        ("retry-after", "1"),
    ];
    assert_headers(
        &closed.get("bob"),
        429,
        &expected,
        "several windows, denied",
    );
    // The client's address is the key.
    assert_eq!(open.get("address").status, 200);
    let key = format!("rl:{}", address("address"));
    let entries = redis_cmd(&redis, &["SWL.ENTRIES", &key]);
    assert!(
        matches!(entries, redis::Value::Array(ref e) if e.len() == 1),
        "{entries:?}"
    );

    // Redis stalled: a socket that takes requests and never answers.
    proxy.stall();
    for app in apps {
        assert_policy(app, "stall", "stalled");
    }
    proxy.resume();
    for app in apps {
        app.wait_for_redis("after-stall");
    }

    // Redis paused for writes, as during a failover.
    redis_cmd(&redis, &["CLIENT", "PAUSE", "10000", "WRITE"]);
    for app in apps {
        assert_policy(app, "pause", "paused");
    }
    redis_cmd(&redis, &["CLIENT", "UNPAUSE"]);
    for app in apps {
        app.wait_for_redis("after-pause");
    }

    // The module unloaded: each package goes to the function library
    // instead, which it loads itself, and Redis decides again. The request
    // that finds the module gone also has the server compile the library
    // (a few milliseconds, more on a busy machine): where that overruns
    // the app's timeout, the app's policy answers it, in time, as it
    // answers any call Redis did not answer in time.
    redis_cmd(&redis, &["MODULE", "UNLOAD", "swl"]);
    for app in apps {
        let reply = app.get("unloaded");
        let context = format!("{} app, module unloaded", app.policy);
        if reply.header("ratelimit-source") != "redis" {
            assert_policy_answered(app, &reply, &context);
            app.wait_for_redis("unloaded-again");
        }
    }
    let libraries = redis_cmd(&redis, &["FUNCTION", "LIST", "LIBRARYNAME", "swl"]);
    assert!(
        matches!(libraries, redis::Value::Array(ref l) if l.len() == 1),
        "{libraries:?} ({kind:?})"
    );
    let module = support::module_path().to_string_lossy().into_owned();
    redis_cmd(&redis, &["MODULE", "LOAD", &module]);
    for app in apps {
        app.wait_for_redis("after-unload");
    }

    // Redis stopped: connections refused; then started again.
    redis.stop_for_a_while(|| {
        for app in apps {
            assert_policy(app, "stopped", "stopped");
        }
        // The local limiter counts, and forgets the least recently seen
        // client beyond two.
        for expected in [200, 200, 429] {
            assert_eq!(local.get("stopped").status, expected);
        }
        local.get("third");
        local.get("fourth");
        let forgotten = local.get("stopped");
        assert_headers(
            &forgotten,
            200,
            &[("ratelimit", "\"60000ms\";r=2;t=60")],
            "forgotten",
        );
    });
    for app in apps {
        app.wait_for_redis("after-restart");
    }
}

/// Clients are told apart by their address, not by a header they choose: a
/// client sending a new X-API-Key with every request gets one limit.
fn keys_by_address(kind: Kind) {
    if !kind.set_up() {
        return;
    }
    let redis = Server::start();
    let app = App::start(kind, redis.port(), "open", "60000:3");
    app.wait_for_redis("warm-up");
    let from = address("shared");
    let statuses: Vec<u16> = (0..5)
        .map(|i| {
            let api_key = format!("key-{i}");
            let reply = request(app.port, from, "/", &[("X-API-Key", &api_key)]);
            // A denial Redis gave may be repeated by a denial cache.
            let source = reply.header("ratelimit-source");
            let cached = reply.status == 429 && source == "cache";
            assert!(source == "redis" || cached, "{reply:?}");
            reply.status
        })
        .collect();
    assert_eq!(statuses, [200, 200, 200, 429, 429]);
    let entries = redis_cmd(&redis, &["SWL.ENTRIES", &format!("rl:{from}")]);
    assert!(
        matches!(entries, redis::Value::Array(ref e) if e.len() == 3),
        "{entries:?}"
    );
    let by_header = redis_cmd(&redis, &["EXISTS", "rl:key-0"]);
    assert_eq!(by_header, redis::Value::Int(0));
}

/// /failures is outside the limit: it answers while the limit admits no
/// more, and under "closed" while Redis is down, counting each request the
/// policy decided.
fn serves_failures_outside_the_limit(kind: Kind) {
    if !kind.set_up() {
        return;
    }
    let mut redis = Server::start();
    let app = App::start(kind, redis.port(), "closed", "60000:3");
    app.wait_for_redis("operator");
    for expected in [200, 200, 429] {
        assert_eq!(app.get("operator").status, expected);
    }
    let before = app.failures("operator");
    for _ in 0..5 {
        assert_eq!(app.failures("operator"), before, "nothing failed");
    }
    let entries = redis_cmd(
        &redis,
        &["SWL.ENTRIES", &format!("rl:{}", address("operator"))],
    );
    assert!(
        matches!(entries, redis::Value::Array(ref e) if e.len() == 3),
        "/failures was not counted: {entries:?}"
    );
    redis.stop_for_a_while(|| {
        let mut expected = app.failures("operator");
        for _ in 0..3 {
            // A client Redis has not denied: a denial cache would answer
            // "operator" itself.
            assert_policy(&app, "operator-down", "stopped");
            expected += 1;
            assert_eq!(app.failures("operator"), expected);
        }
    });
}

/// An unknown POLICY stops the app at once, naming it and the accepted ones.
fn refuses_an_unknown_policy(kind: Kind) {
    if !kind.set_up() {
        return;
    }
    let mut child = app_command(kind, free_port(), free_port(), "fail-open", "60000:3")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("start the {kind:?} app: {e}"));
    let deadline = Instant::now() + Duration::from_secs(30);
    while matches!(child.try_wait(), Ok(None)) {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the {kind:?} app kept running with POLICY=fail-open");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let Output { status, stderr, .. } = child.wait_with_output().expect("the app's output");
    assert_eq!(status.code(), Some(1), "{kind:?}");
    assert_eq!(
        String::from_utf8_lossy(&stderr).trim(),
        r#"POLICY: unknown policy "fail-open" (accepted: open, closed, local)"#,
        "{kind:?}"
    );
}

#[test]
fn the_fastapi_middleware_answers_by_its_policy_and_returns_to_redis() {
    exercise(Kind::Python);
}

#[test]
fn the_express_middleware_answers_by_its_policy_and_returns_to_redis() {
    exercise(Kind::Node);
}

#[test]
fn the_axum_middleware_answers_by_its_policy_and_returns_to_redis() {
    exercise(Kind::Rust);
}

#[test]
fn the_nethttp_middleware_answers_by_its_policy_and_returns_to_redis() {
    exercise(Kind::Go);
}

#[test]
fn the_fastapi_middleware_keys_clients_by_address_not_by_api_key() {
    keys_by_address(Kind::Python);
}

#[test]
fn the_express_middleware_keys_clients_by_address_not_by_api_key() {
    keys_by_address(Kind::Node);
}

#[test]
fn the_axum_middleware_keys_clients_by_address_not_by_api_key() {
    keys_by_address(Kind::Rust);
}

#[test]
fn the_nethttp_middleware_keys_clients_by_address_not_by_api_key() {
    keys_by_address(Kind::Go);
}

#[test]
fn the_fastapi_app_serves_failures_outside_the_limit() {
    serves_failures_outside_the_limit(Kind::Python);
}

#[test]
fn the_express_app_serves_failures_outside_the_limit() {
    serves_failures_outside_the_limit(Kind::Node);
}

#[test]
fn the_axum_app_serves_failures_outside_the_limit() {
    serves_failures_outside_the_limit(Kind::Rust);
}

#[test]
fn the_nethttp_app_serves_failures_outside_the_limit() {
    serves_failures_outside_the_limit(Kind::Go);
}

#[test]
fn the_fastapi_app_refuses_an_unknown_policy() {
    refuses_an_unknown_policy(Kind::Python);
}

#[test]
fn the_express_app_refuses_an_unknown_policy() {
    refuses_an_unknown_policy(Kind::Node);
}

#[test]
fn the_axum_app_refuses_an_unknown_policy() {
    refuses_an_unknown_policy(Kind::Rust);
}

#[test]
fn the_nethttp_app_refuses_an_unknown_policy() {
    refuses_an_unknown_policy(Kind::Go);
}

/// GET /metrics: each sample of the Prometheus text, by name and labels,
/// the labels in alphabetical order (prometheus_client writes them so,
/// the others in the order they were given) and every count as a number.
fn metrics(app: &App, client: &str) -> HashMap<String, f64> {
    let reply = request(app.port, address(client), "/metrics", &[]);
    assert_eq!(reply.status, 200, "/metrics: {reply:?}");
    assert_eq!(reply.header("ratelimit-source"), "", "limited: {reply:?}");
    assert!(reply
        .header("content-type")
        .starts_with("text/plain; version=0.0.4"));
    reply
        .body
        .lines()
        .filter(|line| !line.starts_with('#') && !line.is_empty())
        .map(|line| {
            let (sample, value) = line.rsplit_once(' ').expect("a sample and its value");
            let sample = match sample.split_once('{') {
                Some((name, labels)) => {
                    let mut labels: Vec<&str> = labels.trim_end_matches('}').split(',').collect();
                    labels.sort();
                    format!("{name}{{{}}}", labels.join(","))
                }
                None => sample.to_string(),
            };
            (sample, value.parse().expect("a number"))
        })
        .collect()
}

/// An app's denial cache answers a denied client's next requests
/// (RateLimit-Source: cache) without asking Redis, unless DENIAL_CACHE=off,
/// and /metrics, outside the limit, counts each decision by its source,
/// under the same names and labels in every language.
fn answers_denials_from_its_cache_and_counts_decisions_at_metrics(kind: Kind) {
    if !kind.set_up() {
        return;
    }
    let mut redis = Server::start();
    let app = App::start(kind, redis.port(), "closed", "60000:3");
    let off = App::start_with(
        kind,
        redis.port(),
        "closed",
        "60000:3",
        &[("DENIAL_CACHE", "off")],
    );
    app.wait_for_redis("warm-up");
    off.wait_for_redis("warm-up");
    let before = metrics(&app, "operator");
    let calls = || -> u64 {
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query(&mut redis.connect())
            .expect("INFO commandstats");
        info.lines()
            .find_map(|l| l.strip_prefix("cmdstat_swl.check:calls="))
            .and_then(|rest| rest.split(',').next())
            .and_then(|n| n.parse().ok())
            .expect("SWL.CHECK's calls")
    };
    let sent = calls();
    let sources = |app: &App, client: &str| -> Vec<String> {
        (0..8)
            .map(|_| {
                let reply = app.get(client);
                format!("{} {}", reply.status, reply.header("ratelimit-source"))
            })
            .collect()
    };
    let mut expected = vec!["200 redis"; 3];
    expected.push("429 redis");
    expected.extend(["429 cache"; 4]);
    assert_eq!(sources(&app, "metrics"), expected);
    assert_eq!(calls(), sent + 4, "the cache answered without Redis");
    let mut without = vec!["200 redis"; 3];
    without.extend(["429 redis"; 5]);
    assert_eq!(sources(&off, "metrics-off"), without);
    assert_eq!(calls(), sent + 12);
    redis.stop_for_a_while(|| {
        for _ in 0..2 {
            assert_eq!(app.get("metrics-down").status, 503);
        }
    });
    let after = metrics(&app, "operator");
    let delta = |sample: &str| {
        after.get(sample).copied().unwrap_or(0.0) - before.get(sample).copied().unwrap_or(0.0)
    };
    let decisions = |decision: &str, source: &str| {
        format!(
            r#"redis_swl_decisions_total{{decision="{decision}",limiter="default",source="{source}"}}"#
        )
    };
    for (decision, source, count) in [
        ("admitted", "redis", 3.0),
        ("denied", "redis", 1.0),
        ("denied", "cache", 4.0),
        ("denied", "closed", 2.0),
        ("admitted", "open", 0.0),
    ] {
        let sample = decisions(decision, source);
        assert_eq!(delta(&sample), count, "{sample} in {after:?}");
    }
    for (source, count) in [("redis", 4.0), ("cache", 4.0), ("closed", 2.0)] {
        let sample =
            format!(r#"redis_swl_decision_seconds_count{{limiter="default",source="{source}"}}"#);
        assert_eq!(delta(&sample), count, "{sample} in {after:?}");
    }
    let cached = decisions("denied", "cache");
    assert_eq!(metrics(&off, "operator").get(&cached), None);
}

#[test]
fn the_axum_app_answers_denials_from_its_cache_and_counts_decisions_at_metrics() {
    answers_denials_from_its_cache_and_counts_decisions_at_metrics(Kind::Rust);
}

#[test]
fn the_nethttp_app_answers_denials_from_its_cache_and_counts_decisions_at_metrics() {
    answers_denials_from_its_cache_and_counts_decisions_at_metrics(Kind::Go);
}

#[test]
fn the_express_app_answers_denials_from_its_cache_and_counts_decisions_at_metrics() {
    answers_denials_from_its_cache_and_counts_decisions_at_metrics(Kind::Node);
}

#[test]
fn the_fastapi_app_answers_denials_from_its_cache_and_counts_decisions_at_metrics() {
    answers_denials_from_its_cache_and_counts_decisions_at_metrics(Kind::Python);
}

/// DENIAL_CACHE takes on or off; anything else stops an app at once.
fn refuses_an_unknown_denial_cache_setting(kind: Kind) {
    if !kind.set_up() {
        return;
    }
    let output = app_command(kind, free_port(), free_port(), "open", "60000:3")
        .env("DENIAL_CACHE", "maybe")
        .stdin(Stdio::null())
        .output()
        .expect("run the app");
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&output.stderr).trim(),
        r#"DENIAL_CACHE: unknown setting "maybe" (accepted: on, off)"#
    );
}

#[test]
fn the_axum_app_refuses_an_unknown_denial_cache_setting() {
    refuses_an_unknown_denial_cache_setting(Kind::Rust);
}

#[test]
fn the_nethttp_app_refuses_an_unknown_denial_cache_setting() {
    refuses_an_unknown_denial_cache_setting(Kind::Go);
}

#[test]
fn the_express_app_refuses_an_unknown_denial_cache_setting() {
    refuses_an_unknown_denial_cache_setting(Kind::Node);
}

#[test]
fn the_fastapi_app_refuses_an_unknown_denial_cache_setting() {
    refuses_an_unknown_denial_cache_setting(Kind::Python);
}
