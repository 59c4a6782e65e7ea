//! A tiny service behind redis-swl-client's rate-limit layer
//! (clients/rust). Settings from the environment (docs/middleware.md):
//! REDIS_URL (redis://127.0.0.1:6379/), PORT (3001), WINDOWS ("60000:100";
//! several as "60000:100,1000:10"), COST (1), POLICY (open, closed or
//! local), TIMEOUT_MS (50), LOCAL_MAX_CLIENTS (10000), DENIAL_CACHE (on or
//! off). GET /failures and GET /metrics (Prometheus) are outside the limit.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::http::header::CONTENT_TYPE;
use axum::routing::get;
use axum::Router;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};
use redis_swl_client::{client_address, Config, DenialCache, FailurePolicy, RateLimiter};

fn setting(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_string())
}

fn number(name: &str, default: u64) -> u64 {
    setting(name, &default.to_string())
        .parse()
        .unwrap_or(default)
}

#[tokio::main]
async fn main() {
    let windows = setting("WINDOWS", "60000:100")
        .split(',')
        .filter_map(|pair| {
            let (window, limit) = pair.split_once(':')?;
            Some((window.parse().ok()?, limit.parse().ok()?))
        })
        .collect::<Vec<(u64, u64)>>();
    assert!(!windows.is_empty(), "WINDOWS: window_ms:limit[,...]");
    let max_clients = number("LOCAL_MAX_CLIENTS", 10_000) as usize;
    let policy =
        FailurePolicy::parse(&setting("POLICY", "open"), max_clients).unwrap_or_else(|e| {
            eprintln!("POLICY: {e}");
            std::process::exit(1);
        });
    let denial_cache_keys = match setting("DENIAL_CACHE", "on").as_str() {
        "on" => DenialCache::DEFAULT_KEYS,
        "off" => 0,
        other => {
            eprintln!("DENIAL_CACHE: unknown setting \"{other}\" (accepted: on, off)");
            std::process::exit(1);
        }
    };
    // Installed before the limiter, which describes its metrics to it.
    let prometheus = PrometheusBuilder::new()
        .set_buckets_for_metric(
            Matcher::Full("redis_swl_decision_seconds".to_string()),
            &[
                0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
            ],
        )
        .and_then(PrometheusBuilder::install_recorder)
        .unwrap_or_else(|e| {
            eprintln!("metrics: {e}");
            std::process::exit(1);
        });
    let upkeep = prometheus.clone();
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_secs(5)).await;
            upkeep.run_upkeep();
        }
    });
    let limiter = RateLimiter::new(Config {
        cost: number("COST", 1),
        policy,
        timeout: Duration::from_millis(number("TIMEOUT_MS", 50)),
        // Who a request counts against: here the default, the client's
        // address. docs/middleware.md keys by an authenticated identity.
        key: Arc::new(client_address),
        denial_cache_keys,
        ..Config::new(setting("REDIS_URL", "redis://127.0.0.1:6379/"), windows)
    })
    .unwrap_or_else(|e| {
        eprintln!("rate limiter: {e}");
        std::process::exit(1);
    });
    let failures = limiter.clone();
    let app = Router::new()
        .route("/", get(|| async { "hello\n" }))
        .layer(limiter.layer())
        // Added after the layer, so it is not limited: it answers even
        // while the policy refuses everything else.
        .route(
            "/failures",
            get(move || async move { format!("{}\n", failures.failures()) }),
        )
        .route(
            "/metrics",
            get(move || async move {
                let content_type = "text/plain; version=0.0.4; charset=utf-8";
                ([(CONTENT_TYPE, content_type)], prometheus.render())
            }),
        );
    let address = SocketAddr::from(([127, 0, 0, 1], number("PORT", 3001) as u16));
    let listener = tokio::net::TcpListener::bind(address).await.expect("bind");
    println!("listening on {}", listener.local_addr().expect("address"));
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .await
    .expect("serve");
}
