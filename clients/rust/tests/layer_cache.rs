//! The layer's denial cache on axum over real HTTP, against real
//! redis-server with the module and through the function library: a
//! client hammering at twenty times its limit gets the statuses and headers
//! it would without the cache while Redis sees one call per denial period;
//! a refund and a reset through the same process let the next request in.
#![cfg(feature = "axum")]

mod common;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;
use common::http::{by_user, get_as, on_redis};
use common::{calls, entries, serve, Server};
use redis_swl_client::{Config, Encoding, RateLimiter};

/// The command a check is: SWL.CHECK, or FCALL through the library.
fn check_command(module: bool) -> &'static str {
    if module {
        "swl.check"
    } else {
        "fcall"
    }
}

fn app(limiter: &Arc<RateLimiter>) -> Router {
    Router::new()
        .route("/", get(|| async { "hello\n" }))
        .route(
            "/slow-fail",
            get(|| async {
                tokio::time::sleep(Duration::from_millis(300)).await;
                (StatusCode::INTERNAL_SERVER_ERROR, "failed\n")
            }),
        )
        .layer(limiter.layer())
}

/// The number in `name=` of a structured header (`r=`, `t=`).
fn field(header: &str, name: &str) -> i64 {
    header
        .split(';')
        .find_map(|part| part.strip_prefix(name)?.strip_prefix('='))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{name} in {header:?}"))
}

/// One limiter with the cache and one without, on one server (so that a
/// pause of the server's delays both alike), each with keys of its own.
async fn pair(module: bool, windows: Vec<(u64, u64)>, refund: bool) -> Pair {
    let server = Server::start(module, Encoding::Compact);
    let config = |key_prefix: &str| Config {
        key: by_user(),
        key_prefix: key_prefix.to_string(),
        encoding: Encoding::Compact,
        refund_failed: refund,
        ..on_redis(server.url(), windows.clone())
    };
    let cached = RateLimiter::new(config(PREFIXES[0])).unwrap();
    let plain = RateLimiter::new(Config {
        denial_cache_keys: 0,
        ..config(PREFIXES[1])
    })
    .unwrap();
    let addresses = [serve(app(&cached)).await, serve(app(&plain)).await];
    // The library is loaded by the first call: not one of the counted.
    for address in addresses {
        assert_eq!(get_as(address, "/", "warm-up").await.0, 200);
    }
    Pair {
        server,
        limiters: [cached, plain],
        addresses,
    }
}

/// The key prefixes of the limiter with the cache and the one without.
const PREFIXES: [&str; 2] = ["on:", "off:"];

struct Pair {
    server: Server,
    limiters: [Arc<RateLimiter>; 2],
    addresses: [std::net::SocketAddr; 2],
}

impl Pair {
    /// The same request to both apps at once.
    async fn get(&self, path: &str, user: &str) -> [(u16, HashMap<String, String>); 2] {
        let (cached, plain) = tokio::join!(
            get_as(self.addresses[0], path, user),
            get_as(self.addresses[1], path, user)
        );
        [cached, plain]
    }

    /// The entries of `user`'s log in each limiter's key.
    fn entries(&self, module: bool, user: &str) -> [Vec<i64>; 2] {
        PREFIXES.map(|prefix| entries(&self.server, module, &format!("{prefix}{user}")))
    }
}

/// A limit of 10 per 2 s, asked 16 times every 160 ms: 100 requests a
/// second, twenty times the limit, for three windows. Each admitted
/// request's entry leaves 80 ms away from any burst (2,000 ms is 12.5
/// bursts), so the apps agree unless a burst runs 80 ms late.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hammering_at_twenty_times_the_limit_is_answered_as_without_the_cache() {
    for module in [true, false] {
        let pair = pair(module, vec![(2_000, 10)], false).await;
        let before = calls(&pair.server, check_command(module));
        let start = tokio::time::Instant::now();
        let (mut admitted, mut denial_periods, mut from_cache) = (0, 0, 0);
        let mut denying = false;
        for burst in 0..38 {
            tokio::time::sleep_until(start + Duration::from_millis(160 * burst)).await;
            for _ in 0..16 {
                let [(status, cached), (plain_status, plain)] = pair.get("/", "alice").await;
                let context = format!("module {module}, burst {burst}: {cached:?} {plain:?}");
                assert_eq!(status, plain_status, "{context}");
                assert_eq!(plain["ratelimit-source"], "redis", "{context}");
                assert_eq!(cached["ratelimit-policy"], plain["ratelimit-policy"]);
                let (ours, theirs) = (&cached["ratelimit"], &plain["ratelimit"]);
                assert_eq!(field(ours, "r"), field(theirs, "r"), "{context}");
                assert!(
                    (field(ours, "t") - field(theirs, "t")).abs() <= 1,
                    "{context}"
                );
                if status == 200 {
                    assert_eq!(cached["ratelimit-source"], "redis", "{context}");
                    admitted += 1;
                    denying = false;
                    continue;
                }
                assert_eq!(status, 429, "{context}");
                let seconds =
                    |h: &HashMap<String, String>| h["retry-after"].parse::<i64>().unwrap();
                assert!((seconds(&cached) - seconds(&plain)).abs() <= 1, "{context}");
                if !denying {
                    denial_periods += 1;
                    denying = true;
                }
                if cached["ratelimit-source"] == "cache" {
                    from_cache += 1;
                } else {
                    assert_eq!(cached["ratelimit-source"], "redis", "{context}");
                }
            }
        }
        // The app without the cache asked Redis for every request (each
        // reply's source says so), and the one with it for the rest.
        let requests = 38 * 16;
        let checks = calls(&pair.server, check_command(module)) - before - requests;
        assert!(admitted >= 30, "{admitted} admitted");
        // One check per request admitted and one per denial period.
        assert!(
            checks <= admitted + denial_periods,
            "{checks} checks, module {module}"
        );
        assert_eq!(checks + from_cache, requests, "module {module}");
        eprintln!("module {module}: {requests} requests, {admitted} admitted, {denial_periods} denial periods, {checks} checks, {from_cache} from the cache");
        assert_eq!(pair.limiters[0].failures(), 0);
    }
}

/// A refund (of a failed response, after it) and a reset through the same
/// process drop the cached denial: the next request is admitted, as it is
/// without the cache.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refund_and_a_reset_through_the_process_let_the_next_request_in() {
    for module in [true, false] {
        let pair = pair(module, vec![(60_000, 2)], true).await;
        let mut seen = Vec::new();
        // Admitted, and failing after 300 ms: refunded then.
        let failing = pair
            .addresses
            .map(|a| tokio::spawn(get_as(a, "/slow-fail", "bob")));
        tokio::time::sleep(Duration::from_millis(50)).await;
        for _ in 0..3 {
            seen.push(pair.get("/", "bob").await);
        }
        for failed in failing {
            assert_eq!(failed.await.unwrap().0, 500);
        }
        // The refund goes out after the response: wait for it, and for the
        // app to hear its reply.
        let deadline = Instant::now() + Duration::from_secs(5);
        while pair.entries(module, "bob").iter().any(|e| e.len() != 1) {
            assert!(Instant::now() < deadline, "not refunded");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        for _ in 0..3 {
            seen.push(pair.get("/", "bob").await);
        }
        for limiter in &pair.limiters {
            limiter.reset("bob").await.unwrap();
        }
        seen.push(pair.get("/", "bob").await);
        let statuses = |app: usize| seen.iter().map(|r| r[app].0).collect::<Vec<_>>();
        let sources = |app: usize| {
            seen.iter()
                .map(|r| r[app].1["ratelimit-source"].as_str())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            statuses(0),
            [200, 429, 429, 200, 429, 429, 200],
            "module {module}"
        );
        assert_eq!(statuses(0), statuses(1));
        let expected = [
            "redis", "redis", "cache", "redis", "redis", "cache", "redis",
        ];
        assert_eq!(sources(0), expected, "module {module}");
        assert_eq!(sources(1), ["redis"; 7]);
    }
}
