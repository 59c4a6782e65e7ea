//! Real redis-server processes for the tests: each on a free loopback port,
//! in a temporary directory, with or without the redis-swl module (its path
//! in SWL_MODULE, as `make test` sets it; otherwise the repository's release
//! build), stopped when dropped; and the HTTP server the layer's tests and
//! bench run their apps on.
#![allow(dead_code)]

#[cfg(feature = "axum")]
pub mod http;

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use redis_swl_client::Encoding;

pub const ENCODINGS: [Encoding; 2] = [Encoding::Zset, Encoding::Compact];
/// What a server needs for DEBUG SLEEP (Redis 7 refuses DEBUG by default).
pub const DEBUG: [&str; 2] = ["--enable-debug-command", "yes"];

/// The repository's root: the nearest directory above the crate that holds
/// the function library's sources (the swl-rls crate shares this file).
pub fn repository() -> PathBuf {
    let crate_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    crate_dir
        .ancestors()
        .find(|dir| dir.join("lua").is_dir() && dir.join("scripts/swl.lua").is_file())
        .map_or_else(|| crate_dir.join("../.."), PathBuf::from)
}

pub fn module_path() -> PathBuf {
    std::env::var_os("SWL_MODULE")
        .map(PathBuf::from)
        .unwrap_or_else(|| repository().join("target/release/libredis_swl.so"))
}

pub fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    listener.local_addr().expect("its address").port()
}

pub struct Server {
    pub port: u16,
    dir: PathBuf,
    args: Vec<String>,
    child: Child,
}

impl Server {
    /// A server with the module (creating logs in `encoding`) or without it.
    pub fn start(module: bool, encoding: Encoding) -> Server {
        Server::with_args(module, encoding, &[])
    }

    pub fn with_args(module: bool, encoding: Encoding, extra: &[String]) -> Server {
        let port = free_port();
        let dir =
            std::env::temp_dir().join(format!("redis-swl-rust-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("make the server's directory");
        let mut args: Vec<String> = [
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.extend(["--dir".to_string(), dir.display().to_string()]);
        if module {
            let module = module_path();
            assert!(
                module.is_file(),
                "no module at {}: build it (make build)",
                module.display()
            );
            args.extend(["--loadmodule".to_string(), module.display().to_string()]);
            args.extend(["--swl.encoding".to_string(), encoding.name().to_string()]);
        }
        args.extend(extra.iter().cloned());
        let child = spawn(&args);
        let mut server = Server {
            port,
            dir,
            args,
            child,
        };
        server.wait_ready();
        server
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Stops the server; [`Server::start_again`] brings it back.
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Starts the stopped server again on its port, empty.
    pub fn start_again(&mut self) {
        self.child = spawn(&self.args);
        self.wait_ready();
    }

    pub fn connect(&self) -> redis::Connection {
        redis::Client::open(self.url())
            .and_then(|client| client.get_connection())
            .expect("connect to the test server")
    }

    fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            assert!(
                matches!(self.child.try_wait(), Ok(None)),
                "redis-server exited"
            );
            let ping = redis::Client::open(self.url())
                .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(1)))
                .and_then(|mut c| redis::cmd("PING").query::<String>(&mut c));
            if ping.is_ok() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "redis-server did not answer PING"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn spawn(args: &[String]) -> Child {
    // REDIS_SERVER runs the tests on another server build (see the README).
    Command::new(std::env::var("REDIS_SERVER").unwrap_or_else(|_| "redis-server".to_string()))
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start redis-server")
}

/// The server stalled for `seconds` by DEBUG SLEEP, sent on a connection of
/// its own before anything the test sends next: it then reads nothing and
/// answers nothing, as a server busy with a long command or paused by its
/// host. [`Stall::wait`] returns once it has woken and handled what arrived
/// meanwhile.
pub struct Stall {
    stream: TcpStream,
    replies: BufReader<TcpStream>,
}

impl Stall {
    pub fn start(port: u16, seconds: f64) -> Stall {
        let stream = TcpStream::connect(("127.0.0.1", port)).expect("connect to stall");
        let replies = BufReader::new(stream.try_clone().expect("clone the stream"));
        let mut stall = Stall { stream, replies };
        // Once it has answered, the server reads this connection as it reads
        // the others: a command sent on it now is read before one sent next
        // on another (a connection not yet accepted would be read later).
        stall.send("PING\r\n");
        assert_eq!(stall.line(), "+PONG\r\n");
        stall.send(&format!("DEBUG SLEEP {seconds}\r\n"));
        stall
    }

    fn send(&mut self, command: &str) {
        self.stream
            .write_all(command.as_bytes())
            .expect("write to the server");
    }

    fn line(&mut self) -> String {
        let mut line = String::new();
        self.replies.read_line(&mut line).expect("read a reply");
        line
    }

    pub fn wait(mut self) {
        assert_eq!(self.line(), "+OK\r\n");
        // Commands that came from other connections during the sleep were
        // read before this PING, which came after them.
        self.send("PING\r\n");
        assert_eq!(self.line(), "+PONG\r\n");
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Three primaries with every slot assigned.
pub struct Cluster {
    pub nodes: Vec<Server>,
}

impl Cluster {
    pub fn start(module: bool, encoding: Encoding) -> Cluster {
        Cluster::with_args(module, encoding, &[])
    }

    /// Each node with `extra` arguments too.
    pub fn with_args(module: bool, encoding: Encoding, extra: &[&str]) -> Cluster {
        let nodes: Vec<Server> = (0..3)
            .map(|_| {
                let args = [
                    "--cluster-enabled",
                    "yes",
                    "--cluster-node-timeout",
                    "5000",
                    "--cluster-port",
                ]
                .iter()
                .map(|s| s.to_string())
                .chain([free_port().to_string()])
                .chain(extra.iter().map(|s| s.to_string()))
                .collect::<Vec<_>>();
                Server::with_args(module, encoding, &args)
            })
            .collect();
        let output = Command::new("redis-cli")
            .args(["--cluster", "create"])
            .args(nodes.iter().map(|n| format!("127.0.0.1:{}", n.port)))
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .stdin(Stdio::null())
            .output()
            .expect("run redis-cli --cluster create");
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stdout)
        );
        let deadline = Instant::now() + Duration::from_secs(30);
        for node in &nodes {
            loop {
                let info: String = redis::cmd("CLUSTER")
                    .arg("INFO")
                    .query(&mut node.connect())
                    .expect("CLUSTER INFO");
                if info.contains("cluster_state:ok") && info.contains("cluster_known_nodes:3") {
                    break;
                }
                assert!(Instant::now() < deadline, "the cluster did not come up");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        Cluster { nodes }
    }

    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(Server::url).collect()
    }

    /// The node that serves `key`'s slot: the one that answers for it
    /// rather than redirecting (MOVED).
    pub fn serving(&self, key: &str) -> &Server {
        self.nodes
            .iter()
            .find(|node| {
                redis::cmd("EXISTS")
                    .arg(key)
                    .query::<i64>(&mut node.connect())
                    .is_ok()
            })
            .expect("a node serves the key's slot")
    }

    /// The node that holds `key`.
    pub fn owner(&self, key: &str) -> &Server {
        let slot: i64 = redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(key)
            .query(&mut self.nodes[0].connect())
            .expect("KEYSLOT");
        self.nodes
            .iter()
            .find(|node| {
                redis::cmd("CLUSTER")
                    .arg("COUNTKEYSINSLOT")
                    .arg(slot)
                    .query::<i64>(&mut node.connect())
                    .is_ok_and(|n| n > 0)
            })
            .expect("a node holds the key")
    }
}

/// SWL.ENTRIES (or its FCALL) of `key`.
pub fn entries(server: &Server, module: bool, key: &str) -> Vec<i64> {
    let mut command = if module {
        redis::cmd("SWL.ENTRIES")
    } else {
        let mut fcall = redis::cmd("FCALL");
        fcall.arg("swl_entries").arg(1);
        fcall
    };
    command
        .arg(key)
        .query(&mut server.connect())
        .expect("entries")
}

/// What a key holds: "zset", "compact" (a compact log of format version
/// 2), "compact1" (format version 1), or its TYPE.
pub fn log_kind(server: &Server, key: &str) -> String {
    let mut con = server.connect();
    let kind: String = redis::cmd("TYPE").arg(key).query(&mut con).expect("TYPE");
    let head: Vec<u8> = redis::cmd("GETRANGE")
        .arg(key)
        .arg(0)
        .arg(4)
        .query(&mut con)
        .unwrap_or_default();
    if kind == "string" && head == b"SWLc\x02" {
        "compact".to_string()
    } else if kind == "string" && head == b"SWLc\x01" {
        "compact1".to_string()
    } else {
        kind
    }
}

/// Serves `app` on a free loopback port, with each request's peer address
/// (axum's ConnectInfo); the server stops with the runtime.
pub async fn serve(app: axum::Router) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(
            listener,
            app.into_make_service_with_connect_info::<std::net::SocketAddr>(),
        )
        .await
        .unwrap();
    });
    address
}

/// How many times the server has run `command` (INFO commandstats):
/// `swl.check`, `fcall`, ...
pub fn calls(server: &Server, command: &str) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut server.connect())
        .expect("INFO commandstats");
    let prefix = format!("cmdstat_{command}:calls=");
    info.lines()
        .find_map(|line| line.strip_prefix(prefix.as_str()))
        .and_then(|rest| rest.split(',').next())
        .map_or(0, |n| n.parse().expect("a count of calls"))
}
