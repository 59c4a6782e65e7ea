//! The tower layer on axum over real HTTP, against real redis-server with
//! the module and without it: exact 429s and headers with one window and
//! several, per-route use, and the refund of failed responses through Redis
//! and through the local limiter. (Redis stopped, stalled and restarted
//! under each policy: tests/middleware.rs of the repository, on
//! examples/axum, which is an app on this crate.)
#![cfg(feature = "axum")]

mod common;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;
use common::http::{by_user, get_as, on_redis};
use common::{entries, free_port, log_kind, serve, Server, ENCODINGS};
use redis_swl_client::{Config, Encoding, FailurePolicy, RateLimiter};

async fn statuses(address: SocketAddr, path: &str, user: &str, n: usize) -> Vec<u16> {
    let mut seen = Vec::new();
    for _ in 0..n {
        seen.push(get_as(address, path, user).await.0);
    }
    seen
}

fn app(limiter: &Arc<RateLimiter>) -> Router {
    Router::new()
        .route("/", get(|| async { "hello\n" }))
        .route(
            "/fail",
            get(|| async { (StatusCode::INTERNAL_SERVER_ERROR, "failed\n") }),
        )
        .layer(limiter.layer())
}

/// Polls until `key` holds no entries (within 5 s).
async fn eventually_empty(server: &Server, key: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while !entries(server, true, key).is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "{key} was not refunded"
        );
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
}

const BACKENDS: [(bool, Encoding); 3] = [
    (true, Encoding::Zset),
    (true, Encoding::Compact),
    (false, Encoding::Compact),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn denies_exactly_with_the_drafts_headers() {
    for (module, encoding) in BACKENDS {
        let server = Server::start(module, encoding);
        let limiter = RateLimiter::new(Config {
            key: by_user(),
            encoding,
            ..on_redis(server.url(), vec![(60_000, 2)])
        })
        .unwrap();
        let address = serve(app(&limiter)).await;
        let mut seen = Vec::new();
        for _ in 0..3 {
            let (status, headers) = get_as(address, "/", "alice").await;
            let header = |name: &str| headers.get(name).cloned().unwrap_or_default();
            seen.push([
                status.to_string(),
                header("ratelimit-policy"),
                header("ratelimit"),
                header("retry-after"),
                header("ratelimit-source"),
            ]);
        }
        let row = |status: &str, ratelimit: &str, retry: &str| {
            [status, "\"60000ms\";q=2;w=60", ratelimit, retry, "redis"].map(String::from)
        };
        assert_eq!(
            seen,
            [
                row("200", "\"60000ms\";r=1;t=60", ""),
                row("200", "\"60000ms\";r=0;t=60", ""),
                row("429", "\"60000ms\";r=0;t=60", "60"),
            ],
            "module {module}, {encoding:?}"
        );
        assert_eq!(entries(&server, module, "rl:alice").len(), 2);
        assert_eq!(log_kind(&server, "rl:alice"), encoding.name());
        assert_eq!(limiter.failures(), 0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_windows_name_the_one_that_denied() {
    for encoding in ENCODINGS {
        let server = Server::start(true, encoding);
        let limiter = RateLimiter::new(Config {
            key: by_user(),
            ..on_redis(server.url(), vec![(60_000, 5), (1_000, 2)])
        })
        .unwrap();
        let address = serve(app(&limiter)).await;
        assert_eq!(statuses(address, "/", "bob", 2).await, [200, 200]);
        let (status, headers) = get_as(address, "/", "bob").await;
        assert_eq!(status, 429);
        assert_eq!(headers["ratelimit-policy"], "\"1000ms\";q=2;w=1");
        assert_eq!(headers["ratelimit"], "\"1000ms\";r=0;t=1");
        assert_eq!(headers["retry-after"], "1");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_responses_are_refunded_in_redis_and_locally() {
    for encoding in ENCODINGS {
        let server = Server::start(true, encoding);
        let closed_port = free_port();
        for (url, source) in [
            (server.url(), "redis"),
            (format!("redis://127.0.0.1:{closed_port}/"), "local"),
        ] {
            let limiter = RateLimiter::new(Config {
                key: by_user(),
                refund_failed: true,
                policy: FailurePolicy::Local { max_clients: 100 },
                ..Config::new(url, vec![(60_000, 2)])
            })
            .unwrap();
            let address = serve(app(&limiter)).await;
            for _ in 0..4 {
                let (status, headers) = get_as(address, "/fail", "carol").await;
                assert_eq!(
                    (status, headers["ratelimit-source"].as_str()),
                    (500, source)
                );
                if source == "redis" {
                    // The refund goes out after the response: wait for it.
                    eventually_empty(&server, "rl:carol").await;
                }
            }
            assert_eq!(
                statuses(address, "/", "carol", 3).await,
                [200, 200, 429],
                "{source}"
            );
            if source == "redis" {
                assert_eq!(entries(&server, true, "rl:carol").len(), 2);
            } else {
                assert_eq!(limiter.failures(), 7);
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_route_can_have_a_limit_of_its_own() {
    for encoding in ENCODINGS {
        let server = Server::start(true, encoding);
        let general = RateLimiter::new(Config {
            key: by_user(),
            ..on_redis(server.url(), vec![(60_000, 100)])
        })
        .unwrap();
        let login = RateLimiter::new(Config {
            key: by_user(),
            key_prefix: "login:".to_string(),
            ..on_redis(server.url(), vec![(60_000, 1)])
        })
        .unwrap();
        let app = Router::new()
            .route("/", get(|| async { "hello\n" }))
            .route("/login", get(|| async { "welcome\n" }).layer(login.layer()))
            .layer(general.layer());
        let address = serve(app).await;
        assert_eq!(statuses(address, "/login", "dave", 2).await, [200, 429]);
        assert_eq!(statuses(address, "/", "dave", 2).await, [200, 200]);
        assert_eq!(entries(&server, true, "login:dave").len(), 1);
        assert_eq!(entries(&server, true, "rl:dave").len(), 4);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routes_hold_their_requests_to_their_own_windows_in_logs_of_their_own() {
    for (module, encoding) in BACKENDS {
        let server = Server::start(module, encoding);
        let limiter = RateLimiter::new(Config {
            key: by_user(),
            routes: vec![
                ("/search".to_string(), vec![(60_000, 2)]),
                ("/health".to_string(), vec![]),
            ],
            refund_failed: true,
            ..on_redis(server.url(), vec![(60_000, 3)])
        })
        .unwrap();
        let app = Router::new()
            .route("/", get(|| async { "hello\n" }))
            .route("/searchable", get(|| async { "hello\n" }))
            .route("/search/{q}", get(|| async { "found\n" }))
            .route(
                "/search/fail/{q}",
                get(|| async { (StatusCode::INTERNAL_SERVER_ERROR, "failed\n") }),
            )
            .route("/health", get(|| async { "ok\n" }))
            .layer(limiter.layer());
        let address = serve(app).await;
        assert_eq!(
            statuses(address, "/search/a", "erin", 3).await,
            [200, 200, 429]
        );
        let (status, headers) = get_as(address, "/search/b", "frank").await;
        assert_eq!(status, 200);
        assert_eq!(headers["ratelimit-policy"], "\"60000ms\";q=2;w=60");
        // Exempt: no check, no headers.
        for _ in 0..5 {
            let (status, headers) = get_as(address, "/health", "erin").await;
            assert_eq!(status, 200);
            assert!(!headers.contains_key("ratelimit-policy"));
        }
        // A failed response on a route is given back on that route's log.
        assert_eq!(get_as(address, "/search/fail/x", "grace").await.0, 500);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while !entries(&server, module, "rl:/search:grace").is_empty() {
            assert!(std::time::Instant::now() < deadline, "never refunded");
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        // "/searchable" is not under "/search": the app's windows and log.
        assert_eq!(statuses(address, "/", "erin", 2).await, [200, 200]);
        let (status, headers) = get_as(address, "/searchable", "erin").await;
        assert_eq!(status, 200);
        assert_eq!(headers["ratelimit-policy"], "\"60000ms\";q=3;w=60");
        assert_eq!(get_as(address, "/", "erin").await.0, 429);
        assert_eq!(entries(&server, module, "rl:/search:erin").len(), 2);
        assert_eq!(entries(&server, module, "rl:erin").len(), 3);
        limiter.reset("erin").await.unwrap();
        assert!(entries(&server, module, "rl:/search:erin").is_empty());
        assert!(entries(&server, module, "rl:erin").is_empty());
        assert_eq!(statuses(address, "/search/a", "erin", 1).await, [200]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_apps_own_connection_serves_in_place_of_a_url() {
    for (module, encoding) in BACKENDS {
        let server = Server::start(module, encoding);
        let client = redis::Client::open(server.url()).unwrap();
        let manager = client.get_connection_manager().await.unwrap();
        let limiter = RateLimiter::new(Config {
            key: by_user(),
            policy: FailurePolicy::Closed,
            timeout: std::time::Duration::from_secs(2),
            ..Config::with_connection(manager, vec![(60_000, 1)])
        })
        .unwrap();
        let address = serve(app(&limiter)).await;
        assert_eq!(statuses(address, "/", "heidi", 2).await, [200, 429]);
        assert_eq!(entries(&server, module, "rl:heidi").len(), 1);
    }
}

#[test]
fn settings_the_module_would_refuse_are_refused_when_made() {
    let url = "redis://127.0.0.1:6379/";
    let windows = "windows: at least one (window_ms, limit), window_ms from 1 and limit from 0, both to 9007199254740991";
    for bad in [
        vec![],
        vec![(0, 1)],
        vec![(1 << 53, 1)],
        vec![(1000, 1 << 53)],
    ] {
        assert_eq!(
            RateLimiter::new(Config::new(url, bad))
                .unwrap_err()
                .to_string(),
            windows
        );
    }
    let refused = |config: Config| RateLimiter::new(config).unwrap_err().to_string();
    for cost in [0, 100_001] {
        assert_eq!(
            refused(Config {
                cost,
                ..Config::new(url, vec![(1000, 1)])
            }),
            "cost: from 1 to 100000"
        );
    }
    assert_eq!(
        refused(Config {
            timeout: std::time::Duration::ZERO,
            ..Config::new(url, vec![(1000, 1)])
        }),
        "timeout: above zero"
    );
    assert_eq!(
        refused(Config {
            policy: FailurePolicy::Local { max_clients: 0 },
            ..Config::new(url, vec![(1000, 1)])
        }),
        "policy: a local policy must remember at least one client"
    );
    for prefix in ["search", "/search"] {
        let windows = if prefix == "search" {
            vec![(1000, 1)]
        } else {
            vec![(0, 1)]
        };
        assert_eq!(
            refused(Config {
                routes: vec![(prefix.to_string(), windows)],
                ..Config::new(url, vec![(1000, 1)])
            }),
            format!("routes: {prefix:?} must start with / and have windows as `windows` takes them, or none")
        );
    }
    // At most 100 windows, as one call takes.
    let many: Vec<(u64, u64)> = (0..101).map(|n| (1000 + n, 5)).collect();
    assert!(RateLimiter::new(Config::new(url, many[..100].to_vec())).is_ok());
    assert_eq!(
        refused(Config::new(url, many)),
        "windows: at most 100 (window_ms, limit) pairs, not 101"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_requests_never_pass_the_limit() {
    for encoding in ENCODINGS {
        let server = Server::start(true, encoding);
        let limiter = RateLimiter::new(Config {
            key: by_user(),
            ..on_redis(server.url(), vec![(60_000, 50)])
        })
        .unwrap();
        let address = serve(app(&limiter)).await;
        let requests: Vec<_> = (0..400)
            .map(|_| tokio::spawn(get_as(address, "/", "eve")))
            .collect();
        let mut admitted = 0;
        for request in requests {
            admitted += usize::from(request.await.unwrap().0 == 200);
        }
        assert_eq!(admitted, 50);
        assert_eq!(entries(&server, true, "rl:eve").len(), 50);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_slower_than_its_window_is_not_refunded() {
    for encoding in ENCODINGS {
        let server = Server::start(true, encoding);
        let limiter = RateLimiter::new(Config {
            key: by_user(),
            refund_failed: true,
            ..on_redis(server.url(), vec![(60_000, 10), (1_000, 5)])
        })
        .unwrap();
        let app = Router::new()
            .route(
                "/slow",
                get(|| async {
                    tokio::time::sleep(std::time::Duration::from_millis(1_200)).await;
                    (StatusCode::BAD_GATEWAY, "late\n")
                }),
            )
            .route(
                "/fast",
                get(|| async { (StatusCode::BAD_GATEWAY, "failed\n") }),
            )
            .layer(limiter.layer());
        let address = serve(app).await;
        assert_eq!(get_as(address, "/slow", "frank").await.0, 502);
        // The slow request's entry may have left the 1 s window, so a refund
        // would take another request's: it keeps its own. A fast failure after
        // it is refunded (after its response: polled), and what is left is then
        // the slow request's entry, not the fast one's.
        let (seconds, micros): (u64, u64) =
            redis::cmd("TIME").query(&mut server.connect()).unwrap();
        let fast_started_ms = (seconds * 1000 + micros / 1000) as i64;
        assert_eq!(get_as(address, "/fast", "frank").await.0, 502);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        loop {
            let left = entries(&server, true, "rl:frank");
            if left.len() == 1 && left[0] < fast_started_ms {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "left: {left:?}");
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    }
}
