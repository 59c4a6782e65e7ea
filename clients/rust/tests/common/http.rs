//! Asking the layer's apps over HTTP.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use redis_swl_client::{Config, FailurePolicy, KeyFn};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Keys requests by their X-User header: a test's stand-in for an
/// authenticated identity.
pub fn by_user() -> KeyFn {
    Arc::new(|parts| {
        parts
            .headers
            .get("x-user")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("anonymous")
            .to_string()
    })
}

/// Settings for a test that wants Redis's own decisions: a timeout a busy
/// machine cannot reach, and a closed policy, so that a failure shows as a
/// 503 instead of passing as an admission.
pub fn on_redis(url: String, windows: Vec<(u64, u64)>) -> Config {
    Config {
        timeout: std::time::Duration::from_secs(2),
        policy: FailurePolicy::Closed,
        ..Config::new(url, windows)
    }
}

/// One GET over a fresh connection: the status and the headers.
pub async fn get_as(address: SocketAddr, path: &str, user: &str) -> (u16, HashMap<String, String>) {
    let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
    let request =
        format!("GET {path} HTTP/1.1\r\nHost: test\r\nX-User: {user}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    let head = response.split("\r\n\r\n").next().unwrap();
    let mut lines = head.lines();
    let status = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers = lines
        .filter_map(|line| line.split_once(": "))
        .map(|(name, value)| (name.to_lowercase(), value.to_string()))
        .collect();
    (status, headers)
}
