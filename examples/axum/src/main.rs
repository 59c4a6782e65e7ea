//! A tiny service behind redis-swl-client's rate-limit layer
//! (clients/rust). Settings from the environment (docs/middleware.md):
//! REDIS_URL (redis://127.0.0.1:6379/), PORT (3001), WINDOWS ("60000:100";
//! several as "60000:100,1000:10"), COST (1), POLICY (open, closed or
//! local), TIMEOUT_MS (50), LOCAL_MAX_CLIENTS (10000).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::routing::get;
use axum::Router;
use redis_swl_client::{client_address, Config, FailurePolicy, RateLimiter};

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
    let limiter = RateLimiter::new(Config {
        cost: number("COST", 1),
        policy,
        timeout: Duration::from_millis(number("TIMEOUT_MS", 50)),
        // Who a request counts against: here the default, the client's
        // address. docs/middleware.md keys by an authenticated identity.
        key: Arc::new(client_address),
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
