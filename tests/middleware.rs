//! The rate-limit middleware for FastAPI, Express and axum, each run as its
//! tiny app against a real redis-server and asked over real HTTP: headers
//! while admitting and denying, with one window and several; then Redis
//! stalled, paused, without the module, and stopped and restarted. Every
//! request is answered within the timeout plus a margin, by each app's
//! failure policy (open, closed, a bounded local limiter), and each app
//! returns to Redis by itself. A middleware whose language runtime is
//! missing is skipped, saying so.

mod support;

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use support::{Config, Server};

/// The app's timeout for each call to Redis, and what a reply may take
/// beyond it on a shared, busy machine.
const TIMEOUT_MS: u64 = 50;
const MARGIN: Duration = Duration::from_millis(700);

fn manifest() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    Python,
    Node,
    Rust,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Python => "python",
            Kind::Node => "node",
            Kind::Rust => "rust",
        }
    }

    /// Installs what the app needs; false where its runtime is missing.
    fn set_up(self) -> bool {
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
                command
                    .arg("app.py")
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
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free port");
        let child = kind
            .command()
            .env("REDIS_URL", format!("redis://127.0.0.1:{redis_port}/"))
            .env("PORT", port.to_string())
            .env("POLICY", policy)
            .env("WINDOWS", windows)
            .env("TIMEOUT_MS", TIMEOUT_MS.to_string())
            .env("LOCAL_MAX_CLIENTS", "2")
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

    fn get(&self, api_key: Option<&str>) -> Reply {
        get(self.port, api_key)
    }

    /// Asks until Redis answers again (the app's backoff is at most 1 s).
    fn wait_for_redis(&self, api_key: &str) {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let reply = self.get(Some(api_key));
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

#[derive(Debug)]
struct Reply {
    status: u16,
    headers: HashMap<String, String>,
    took: Duration,
}

impl Reply {
    fn header(&self, name: &str) -> &str {
        self.headers.get(name).map_or("", String::as_str)
    }
}

/// A real HTTP/1.1 request over a socket: GET / with an optional API key.
fn get(port: u16, api_key: Option<&str>) -> Reply {
    let started = Instant::now();
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect to the app");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let key = api_key.map_or(String::new(), |k| format!("X-API-Key: {k}\r\n"));
    write!(
        stream,
        "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n{key}Connection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).expect("an HTTP response");
    let took = started.elapsed();
    let text = String::from_utf8_lossy(&raw);
    let head = text.split("\r\n\r\n").next().unwrap_or_default();
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|line| line.split(' ').nth(1))
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("a status line: {text:?}"));
    let headers = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_string()))
        .collect();
    Reply {
        status,
        headers,
        took,
    }
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
fn assert_policy(app: &App, key: &str, fault: &str) {
    let reply = app.get(Some(key));
    let context = format!("{} app, {fault}", app.policy);
    assert!(
        reply.took < Duration::from_millis(TIMEOUT_MS) + MARGIN,
        "{context}: answered in {:?}",
        reply.took
    );
    match app.policy {
        "open" => {
            assert_headers(&reply, 200, &[("ratelimit-source", "open")], &context);
            assert_eq!(reply.header("ratelimit"), "", "{context}");
        }
        "closed" => assert_headers(
            &reply,
            503,
            &[("ratelimit-source", "closed"), ("retry-after", "1")],
            &context,
        ),
        _ => assert_headers(
            &reply,
            200,
            &[
                ("ratelimit-source", "local"),
                ("ratelimit-policy", "\"60000ms\";q=3;w=60"),
                ("ratelimit", "\"60000ms\";r=2;t=60"),
            ],
            &context,
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
        let reply = open.get(Some("alice"));
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
    assert_headers(
        &open.get(Some("alice")),
        429,
        &expected,
        "one window, denied",
    );
    // Several windows: the headers describe the binding one.
    let burst = "\"1000ms\";q=2;w=1";
    for remaining in ["1", "0"] {
        let ratelimit = format!("\"1000ms\";r={remaining};t=1");
        let expected = [
            ("ratelimit-policy", burst),
            ("ratelimit", ratelimit.as_str()),
        ];
        assert_headers(&closed.get(Some("bob")), 200, &expected, "several windows");
    }
    let expected = [
        ("ratelimit-policy", burst),
        ("ratelimit", "\"1000ms\";r=0;t=1"),
        ("retry-after", "1"),
    ];
    assert_headers(
        &closed.get(Some("bob")),
        429,
        &expected,
        "several windows, denied",
    );
    // Without an API key the client's address is the key.
    assert_eq!(open.get(None).status, 200);
    let entries = redis_cmd(&redis, &["SWL.ENTRIES", "rl:127.0.0.1"]);
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

    // The module unloaded: an error reply.
    redis_cmd(&redis, &["MODULE", "UNLOAD", "swl"]);
    for app in apps {
        assert_policy(app, "unloaded", "module unloaded");
    }
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
            assert_eq!(local.get(Some("stopped")).status, expected);
        }
        local.get(Some("third"));
        local.get(Some("fourth"));
        let forgotten = local.get(Some("stopped"));
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
