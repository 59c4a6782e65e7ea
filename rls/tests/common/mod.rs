//! The service as its users run it: the swl-rls binary started on free
//! loopback ports against real redis-server processes (the Rust client's
//! test servers: with the module or without it, or a three-node cluster),
//! with its configuration in a temporary runtime directory, stopped when
//! dropped.
#![allow(dead_code)]

pub mod envoy;
#[path = "../../../clients/rust/tests/common/mod.rs"]
mod redis_servers;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::{
    rate_limit_descriptor::Entry, RateLimitDescriptor,
};
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
// Each test binary and the bench use a part of these.
#[allow(unused_imports)]
pub use redis_servers::{entries, free_port, Cluster, Server, Stall, DEBUG};
use redis_swl_client::Encoding;

/// Where the logs live: a server with the module, one without it (the
/// client loads the function library), or a cluster of three.
pub enum Redis {
    Single(Server, bool),
    Cluster(Cluster, bool),
}

impl Redis {
    pub fn module(encoding: Encoding) -> Redis {
        Redis::Single(Server::start(true, encoding), true)
    }

    pub fn library() -> Redis {
        Redis::Single(Server::start(false, Encoding::Compact), false)
    }

    pub fn cluster(module: bool) -> Redis {
        Redis::Cluster(Cluster::start(module, Encoding::Compact), module)
    }

    /// Every kind a behaviour test runs on: the module in each encoding and
    /// the library alone.
    pub fn each() -> Vec<(&'static str, Redis)> {
        vec![
            ("module, compact", Redis::module(Encoding::Compact)),
            ("module, zset", Redis::module(Encoding::Zset)),
            ("library", Redis::library()),
        ]
    }

    pub fn env(&self) -> Vec<(String, String)> {
        let (addresses, cluster) = match self {
            Redis::Single(server, _) => (format!("127.0.0.1:{}", server.port), false),
            Redis::Cluster(cluster, _) => (
                cluster
                    .nodes
                    .iter()
                    .map(|n| format!("127.0.0.1:{}", n.port))
                    .collect::<Vec<_>>()
                    .join(","),
                true,
            ),
        };
        vec![
            ("REDIS_SOCKET_TYPE".into(), "tcp".into()),
            ("REDIS_URL".into(), addresses),
            (
                "REDIS_TYPE".into(),
                if cluster { "CLUSTER" } else { "SINGLE" }.into(),
            ),
        ]
    }

    /// The times of `key`'s entries, oldest first.
    pub fn entries(&self, key: &str) -> Vec<i64> {
        match self {
            Redis::Single(server, module) => entries(server, *module, key),
            Redis::Cluster(cluster, module) => entries(cluster.owner(key), *module, key),
        }
    }

    pub fn server(&self) -> &Server {
        match self {
            Redis::Single(server, _) => server,
            Redis::Cluster(cluster, _) => &cluster.nodes[0],
        }
    }
}

pub struct Rls {
    child: Child,
    pub grpc: u16,
    pub http: u16,
    root: PathBuf,
    log: PathBuf,
}

impl Rls {
    /// The service on `redis` with `config` as its one configuration file
    /// and `env` for settings, once its health check answers.
    pub fn start(redis: &Redis, config: &str, env: &[(&str, &str)]) -> Rls {
        Rls::try_start(redis, config, env)
            .unwrap_or_else(|log| panic!("swl-rls did not start:\n{log}"))
    }

    /// The same, or what the service logged when it exited instead.
    pub fn try_start(redis: &Redis, config: &str, env: &[(&str, &str)]) -> Result<Rls, String> {
        for _ in 0..5 {
            let (grpc, http) = (free_port(), free_port());
            let root = std::env::temp_dir().join(format!("swl-rls-{}-{grpc}", std::process::id()));
            let dir = root.join("ratelimit/config");
            std::fs::create_dir_all(&dir).expect("make the runtime directory");
            std::fs::write(dir.join("config.yaml"), config).expect("write the configuration");
            let log = root.join("rls.log");
            let mut command = Command::new(env!("CARGO_BIN_EXE_swl-rls"));
            command
                .env_clear()
                .env("GRPC_HOST", "127.0.0.1")
                .env("GRPC_PORT", grpc.to_string())
                .env("HOST", "127.0.0.1")
                .env("PORT", http.to_string())
                .env("RUNTIME_ROOT", &root)
                .env("RUNTIME_SUBDIRECTORY", "ratelimit")
                .env("USE_STATSD", "false")
                .env("LOG_LEVEL", "info")
                .envs(redis.env())
                .envs(env.iter().map(|(k, v)| (k.to_string(), v.to_string())))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(&log).expect("the log file"));
            let child = command.spawn().expect("start swl-rls");
            let mut rls = Rls {
                child,
                grpc,
                http,
                root,
                log,
            };
            match rls.wait_ready() {
                Ok(()) => return Ok(rls),
                // A port taken between the pick and the bind: again.
                Err(log) if log.contains("Address already in use") => continue,
                Err(log) => return Err(log),
            }
        }
        Err("no free ports".to_string())
    }

    fn wait_ready(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(Some(_)) = self.child.try_wait() {
                return Err(self.log());
            }
            if self
                .get("/healthcheck")
                .is_some_and(|(status, _)| status == 200)
                && TcpStream::connect(("127.0.0.1", self.grpc)).is_ok()
            {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!("no health check answer in 30 s\n{}", self.log()));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Replaces the configuration file (written aside, then renamed, as a
    /// deployment swaps it).
    pub fn write_config(&self, name: &str, yaml: &str) {
        let dir = self.root.join("ratelimit/config");
        let temporary = self.root.join(format!(".{name}.new"));
        std::fs::write(&temporary, yaml).expect("write the configuration");
        std::fs::rename(&temporary, dir.join(name)).expect("swap the configuration");
    }

    /// An HTTP request on the service's port: its status and body.
    pub fn http(&self, method: &str, path: &str, body: &str) -> Option<(u16, String)> {
        let mut stream = TcpStream::connect(("127.0.0.1", self.http)).ok()?;
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .ok()?;
        let request = format!(
            "{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(request.as_bytes()).ok()?;
        let mut reply = String::new();
        stream.read_to_string(&mut reply).ok()?;
        let status = reply.split(' ').nth(1)?.parse().ok()?;
        let body = reply
            .split_once("\r\n\r\n")
            .map_or("", |(_, b)| b)
            .to_string();
        Some((status, body))
    }

    pub fn get(&self, path: &str) -> Option<(u16, String)> {
        self.http("GET", path, "")
    }

    pub async fn client(&self) -> RateLimitServiceClient<tonic::transport::Channel> {
        RateLimitServiceClient::connect(format!("http://127.0.0.1:{}", self.grpc))
            .await
            .expect("connect to swl-rls")
    }

    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.grpc)
    }
}

impl Drop for Rls {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// The answer to a call that must succeed.
pub async fn answer(
    client: &mut RateLimitServiceClient<tonic::transport::Channel>,
    request: RateLimitRequest,
) -> RateLimitResponse {
    client
        .should_rate_limit(request)
        .await
        .expect("ShouldRateLimit")
        .into_inner()
}

/// A request of `descriptors` (each a list of key, value entries).
pub fn request(
    domain: &str,
    descriptors: &[&[(&str, &str)]],
    hits_addend: u32,
) -> RateLimitRequest {
    RateLimitRequest {
        domain: domain.to_string(),
        descriptors: descriptors
            .iter()
            .map(|entries| descriptor(entries))
            .collect(),
        hits_addend,
    }
}

pub fn descriptor(entries: &[(&str, &str)]) -> RateLimitDescriptor {
    RateLimitDescriptor {
        entries: entries
            .iter()
            .map(|(key, value)| Entry {
                key: key.to_string(),
                value: value.to_string(),
            })
            .collect(),
        ..RateLimitDescriptor::default()
    }
}

/// "OK" or "OVER_LIMIT" overall, and each status as (code, remaining,
/// requests per unit, unit).
pub fn summary(response: &RateLimitResponse) -> (&'static str, Vec<(&'static str, u32, u32, i32)>) {
    let name = |code: i32| match code {
        1 => "OK",
        2 => "OVER_LIMIT",
        _ => "UNKNOWN",
    };
    (
        name(response.overall_code),
        response
            .statuses
            .iter()
            .map(|s| {
                let limit = s.current_limit.as_ref();
                (
                    name(s.code),
                    s.limit_remaining,
                    limit.map_or(0, |l| l.requests_per_unit),
                    limit.map_or(0, |l| l.unit),
                )
            })
            .collect(),
    )
}

/// The Redis key of a descriptor's log, with no CACHE_KEY_PREFIX.
pub fn log_key(domain: &str, entries: &[(&str, &str)]) -> String {
    let mut key = format!("{domain}_");
    for (k, v) in entries {
        key.push_str(&format!("{k}_{v}_"));
    }
    key.push_str("swl");
    key
}
