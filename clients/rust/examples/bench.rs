//! The layer's cost per request, in one run on one machine: the same axum
//! app without a limiter, with tower_governor's in-process limiter, and
//! with this crate's layer on a redis-server with the module (clients
//! admitted, and clients at their limit, asking Redis or answered by the
//! denial cache) and through the function library.
//! Each app is driven over real HTTP by 32 keep-alive connections, each for
//! its own clients; what is reported is the time per request, how much
//! the limiter adds to the bare app's, and how many calls Redis took per
//! request (SWL.CHECK or FCALL, from INFO commandstats). Run by `make bench`:
//! `cargo run --release --all-features --example bench` (SWL_MODULE names
//! the module).

#[path = "../tests/common/mod.rs"]
mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use axum::routing::get;
use axum::Router;
use common::{serve, Server};
use redis_swl_client::{Config, Encoding, KeyFn, RateLimiter};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tower_governor::governor::GovernorConfigBuilder;
use tower_governor::key_extractor::KeyExtractor;
use tower_governor::{GovernorError, GovernorLayer};

const CONNECTIONS: usize = 32;
const CLIENTS_PER_CONNECTION: usize = 32;
const REQUESTS_PER_CONNECTION: usize = 3_000;

/// Both limiters key by the X-Client header, so each limits the same
/// 1,024 clients.
#[derive(Clone)]
struct ByClient;

impl KeyExtractor for ByClient {
    type Key = String;

    fn extract<T>(&self, request: &http::Request<T>) -> Result<String, GovernorError> {
        request
            .headers()
            .get("x-client")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
            .ok_or(GovernorError::UnableToExtractKey)
    }
}

fn by_client() -> KeyFn {
    Arc::new(|parts| {
        parts
            .headers
            .get("x-client")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string()
    })
}

fn bare() -> Router {
    Router::new().route("/", get(|| async { "hello\n" }))
}

/// Microseconds per request over all connections, and the statuses seen.
async fn drive(address: SocketAddr) -> (f64, Vec<(u16, usize)>) {
    let started = Instant::now();
    let tasks: Vec<_> = (0..CONNECTIONS)
        .map(|connection| {
            tokio::spawn(async move {
                let stream = tokio::net::TcpStream::connect(address).await.unwrap();
                stream.set_nodelay(true).unwrap();
                let mut stream = BufReader::new(stream);
                let mut statuses = std::collections::BTreeMap::new();
                let mut line = String::new();
                for i in 0..REQUESTS_PER_CONNECTION {
                    let client = connection * CLIENTS_PER_CONNECTION + i % CLIENTS_PER_CONNECTION;
                    let request =
                        format!("GET / HTTP/1.1\r\nHost: bench\r\nX-Client: c{client}\r\n\r\n");
                    stream
                        .get_mut()
                        .write_all(request.as_bytes())
                        .await
                        .unwrap();
                    let (mut status, mut length) = (0u16, 0usize);
                    loop {
                        line.clear();
                        stream.read_line(&mut line).await.unwrap();
                        if line == "\r\n" {
                            break;
                        }
                        let lower = line.to_ascii_lowercase();
                        if let Some(code) = lower.strip_prefix("http/1.1 ") {
                            status = code[..3].parse().unwrap();
                        } else if let Some(value) = lower.strip_prefix("content-length: ") {
                            length = value.trim().parse().unwrap();
                        }
                    }
                    let mut body = vec![0; length];
                    stream.read_exact(&mut body).await.unwrap();
                    *statuses.entry(status).or_insert(0) += 1;
                }
                statuses
            })
        })
        .collect();
    let mut statuses = std::collections::BTreeMap::new();
    for task in tasks {
        for (status, n) in task.await.unwrap() {
            *statuses.entry(status).or_insert(0) += n;
        }
    }
    let micros =
        started.elapsed().as_secs_f64() * 1e6 / (CONNECTIONS * REQUESTS_PER_CONNECTION) as f64;
    (micros, statuses.into_iter().collect())
}

/// The layer on `server`, with keys of its own under `prefix`, with the
/// denial cache or without it.
fn layer(server: &Server, prefix: &str, limit: u64, encoding: Encoding, cache: bool) -> Router {
    let limiter = RateLimiter::new(Config {
        key: by_client(),
        key_prefix: prefix.to_string(),
        encoding,
        denial_cache_keys: if cache { 10_000 } else { 0 },
        ..Config::new(server.url(), vec![(3_600_000, limit)])
    })
    .unwrap();
    bare().layer(limiter.layer())
}

/// The checks a server has taken: SWL.CHECK, and FCALL where the library
/// answers (INFO commandstats).
fn redis_calls(server: &Server) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut server.connect())
        .expect("INFO commandstats");
    info.lines()
        .filter(|line| line.starts_with("cmdstat_swl.check:") || line.starts_with("cmdstat_fcall:"))
        .filter_map(|line| {
            line.split("calls=")
                .nth(1)?
                .split(',')
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let module = Server::start(true, Encoding::Compact);
    let library = Server::start(false, Encoding::Compact);
    let requests = (CONNECTIONS * REQUESTS_PER_CONNECTION) as u64;
    let governor = GovernorConfigBuilder::default()
        .per_nanosecond(1)
        .burst_size(u32::MAX)
        .key_extractor(ByClient)
        .finish()
        .unwrap();
    let apps: Vec<(&str, Router, Option<&Server>)> = vec![
        ("axum, no limiter", bare(), None),
        (
            "tower_governor (in process)",
            bare().layer(GovernorLayer::new(governor)),
            None,
        ),
        (
            "redis-swl layer, admitted",
            layer(&module, "admitted:", requests, Encoding::Compact, true),
            Some(&module),
        ),
        (
            "redis-swl layer, at the limit",
            layer(&module, "limited:", 10, Encoding::Compact, false),
            Some(&module),
        ),
        (
            "redis-swl layer, limit, cached",
            layer(&module, "cached:", 10, Encoding::Compact, true),
            Some(&module),
        ),
        (
            "redis-swl layer, library",
            layer(&library, "library:", requests, Encoding::Compact, true),
            Some(&library),
        ),
    ];
    println!(
        "Rust: axum over HTTP, {CONNECTIONS} keep-alive connections, {} clients, {requests} requests per app \
         (compact logs; microseconds per request, and what the limiter adds)",
        CONNECTIONS * CLIENTS_PER_CONNECTION
    );
    let mut bare_us = 0.0;
    let mut governor_us = 0.0;
    for (name, app, server) in apps {
        let address = serve(app).await;
        drive(address).await; // warm-up: connections, the library's load, clients to their limit
        let calls_before = server.map_or(0, redis_calls);
        let (micros, statuses) = drive(address).await;
        let calls = server.map_or(0, redis_calls) - calls_before;
        if name.starts_with("axum") {
            bare_us = micros;
        }
        if name.starts_with("tower_governor") {
            governor_us = micros;
        }
        let statuses: Vec<String> = statuses.iter().map(|(s, n)| format!("{n} x {s}")).collect();
        let against_governor = if governor_us > 0.0 && !name.starts_with("tower_governor") {
            format!("  ({:.2}x tower_governor's time)", micros / governor_us)
        } else {
            String::new()
        };
        println!(
            "{name:<32} {micros:>8.1} us/request  +{:>6.1} us over the bare app  {:>5.2} Redis calls/request{against_governor}  [{}]",
            micros - bare_us,
            calls as f64 / requests as f64,
            statuses.join(", ")
        );
    }
}
