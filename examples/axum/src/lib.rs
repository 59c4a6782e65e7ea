//! Rate limiting for axum on redis-swl: one `SWL.CHECK` per request, keyed
//! by what the application's key function returns for it (by default the
//! client's address: the TCP peer), with `RateLimit-Policy`, `RateLimit`
//! and `Retry-After` headers. When Redis cannot answer within the timeout,
//! for whatever reason, the configured policy answers instead: admit (fail
//! open), refuse with 503 (fail closed), or a bounded in-process limiter.
//! Redis is tried again after a backoff that doubles up to a second, so the
//! service returns to it by itself.
//!
//! ```no_run
//! use std::net::SocketAddr;
//!
//! use axum::{routing::get, Router};
//! use swl_axum::{rate_limit, Config, RateLimiter};
//!
//! # async fn serve() -> Result<(), Box<dyn std::error::Error>> {
//! let limiter = RateLimiter::new(Config::new("redis://127.0.0.1:6379/", vec![(60_000, 100)]))?;
//! let app = Router::new()
//!     .route("/", get(|| async { "hello\n" }))
//!     .layer(axum::middleware::from_fn_with_state(limiter.clone(), rate_limit));
//! // limiter.failures(): requests the policy decided, for a health endpoint.
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:3001").await?;
//! axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>()).await?;
//! # Ok(())
//! # }
//! ```
//!
//! docs/middleware.md shows key functions for an authenticated identity
//! and for clients behind a trusted proxy ([`forwarded_for`]).

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};

/// What answers when Redis cannot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailurePolicy {
    /// Admit the request, and count and log it.
    Open,
    /// Refuse it with 503 Service Unavailable.
    Closed,
    /// Decide in this process, remembering at most this many clients.
    Local { max_clients: usize },
}

impl FailurePolicy {
    pub const NAMES: [&'static str; 3] = ["open", "closed", "local"];

    /// The policy named `name`; `max_clients` is for `local`.
    pub fn parse(name: &str, max_clients: usize) -> Result<Self, UnknownPolicy> {
        match name {
            "open" => Ok(FailurePolicy::Open),
            "closed" => Ok(FailurePolicy::Closed),
            "local" => Ok(FailurePolicy::Local { max_clients }),
            _ => Err(UnknownPolicy(name.to_string())),
        }
    }
}

/// A policy name other than open, closed or local.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownPolicy(pub String);

impl fmt::Display for UnknownPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown policy \"{}\" (accepted: {})",
            self.0,
            FailurePolicy::NAMES.join(", ")
        )
    }
}

impl std::error::Error for UnknownPolicy {}

/// Names the client a request counts against, from the request and the
/// TCP peer's address.
pub type KeyFn = Arc<dyn Fn(&Request, SocketAddr) -> String + Send + Sync>;

/// The default key: the TCP peer's address (an IPv4 client of a dual-stack
/// listener as plain IPv4), never a header the client chose.
pub fn client_address(_request: &Request, peer: SocketAddr) -> String {
    peer.ip().to_canonical().to_string()
}

/// A key function for a service behind reverse proxies at `proxies`. Each
/// proxy appends the address it saw to `X-Forwarded-For`, so reading from
/// the right while the address so far is one of `proxies` ends at the
/// client; entries a client wrote itself sit further left and are never
/// reached. A connection from anyone else is keyed by the peer's address.
pub fn forwarded_for(proxies: Vec<IpAddr>) -> KeyFn {
    Arc::new(move |request, peer| {
        let forwarded: Vec<&str> = request
            .headers()
            .get_all("x-forwarded-for")
            .iter()
            .filter_map(|value| value.to_str().ok())
            .flat_map(|value| value.split(','))
            .collect();
        let mut client = peer.ip().to_canonical();
        for hop in forwarded.iter().rev() {
            if !proxies.contains(&client) {
                break;
            }
            match hop.trim().parse::<IpAddr>() {
                Ok(address) => client = address.to_canonical(),
                Err(_) => break,
            }
        }
        client.to_string()
    })
}

pub struct Config {
    pub redis_url: String,
    /// (window_ms, limit) pairs: every one must admit.
    pub windows: Vec<(u64, u64)>,
    pub cost: u64,
    pub policy: FailurePolicy,
    /// For each call to Redis, connecting included.
    pub timeout: Duration,
    pub key_prefix: String,
    /// Who a request counts against.
    pub key: KeyFn,
}

impl Config {
    /// Cost 1, failing open, a 50 ms timeout, keys `rl:<client address>`.
    pub fn new(redis_url: impl Into<String>, windows: Vec<(u64, u64)>) -> Config {
        Config {
            redis_url: redis_url.into(),
            windows,
            cost: 1,
            policy: FailurePolicy::Open,
            timeout: Duration::from_millis(50),
            key_prefix: "rl:".to_string(),
            key: Arc::new(client_address),
        }
    }
}

/// The reply of SWL.CHECK (or of the local limiter).
#[derive(Debug, Clone, Copy)]
struct Verdict {
    allowed: bool,
    limit: u64,
    remaining: u64,
    retry_after_ms: i64,
    reset_after_ms: i64,
    window_ms: u64,
}

pub struct RateLimiter {
    config: Config,
    client: redis::Client,
    connection: tokio::sync::Mutex<Option<ConnectionManager>>,
    backoff: Mutex<Backoff>,
    local: Mutex<LocalLimiter>,
    failures: AtomicU64,
}

/// Why Redis did not decide.
#[derive(Debug)]
enum Unavailable {
    Backoff,
    Timeout,
    Redis(redis::RedisError),
}

impl RateLimiter {
    pub fn new(config: Config) -> redis::RedisResult<Arc<Self>> {
        let client = redis::Client::open(config.redis_url.as_str())?;
        let max_clients = match config.policy {
            FailurePolicy::Local { max_clients } => max_clients,
            _ => 0,
        };
        Ok(Arc::new(RateLimiter {
            config,
            client,
            connection: tokio::sync::Mutex::new(None),
            backoff: Mutex::new(Backoff::default()),
            local: Mutex::new(LocalLimiter::new(max_clients)),
            failures: AtomicU64::new(0),
        }))
    }

    /// Requests decided by the failure policy since start.
    pub fn failures(&self) -> u64 {
        self.failures.load(Ordering::Relaxed)
    }

    async fn check(&self, key: &str) -> Result<Verdict, Unavailable> {
        if !self.lock_backoff().may_try(Instant::now()) {
            return Err(Unavailable::Backoff);
        }
        let result = tokio::time::timeout(self.config.timeout, self.call(key)).await;
        let outcome = match result {
            Ok(Ok(verdict)) => Ok(verdict),
            Ok(Err(error)) => Err(Unavailable::Redis(error)),
            Err(_) => Err(Unavailable::Timeout),
        };
        match &outcome {
            Ok(_) => self.lock_backoff().succeeded(),
            Err(why) => {
                // A connection that timed out or broke is dropped: the
                // next attempt connects afresh.
                let is_reply = matches!(why, Unavailable::Redis(e) if e.kind() != redis::ErrorKind::IoError && !e.is_timeout() && !e.is_connection_dropped());
                if !is_reply {
                    if let Ok(mut connection) = self.connection.try_lock() {
                        *connection = None;
                    }
                }
                self.lock_backoff().failed(Instant::now());
            }
        }
        outcome
    }

    async fn call(&self, key: &str) -> redis::RedisResult<Verdict> {
        let mut slot = self.connection.lock().await;
        if slot.is_none() {
            let config = ConnectionManagerConfig::new()
                .set_connection_timeout(self.config.timeout)
                .set_response_timeout(self.config.timeout)
                .set_number_of_retries(0);
            *slot = Some(ConnectionManager::new_with_config(self.client.clone(), config).await?);
        }
        let Some(connection) = slot.as_mut() else {
            unreachable!("set above");
        };
        let mut connection = connection.clone();
        drop(slot);
        let mut command = redis::cmd("SWL.CHECK");
        command.arg(key);
        let (first_window, first_limit) = self.config.windows[0];
        command.arg(first_window).arg(first_limit).arg("*");
        for &(window_ms, limit) in &self.config.windows[1..] {
            command.arg("WINDOW").arg(window_ms).arg(limit);
        }
        command.arg("COST").arg(self.config.cost);
        let reply: Vec<i64> = command.query_async(&mut connection).await?;
        match reply[..] {
            [allowed, limit, remaining, retry_after_ms, reset_after_ms, window_ms] => Ok(Verdict {
                allowed: allowed == 1,
                limit: limit as u64,
                remaining: remaining as u64,
                retry_after_ms,
                reset_after_ms,
                window_ms: window_ms as u64,
            }),
            _ => Err((redis::ErrorKind::TypeError, "SWL.CHECK: not six integers").into()),
        }
    }

    fn lock_backoff(&self) -> std::sync::MutexGuard<'_, Backoff> {
        self.backoff
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The policy's answer, when Redis did not give one.
    fn fallback(&self, key: &str, why: &Unavailable) -> Result<Verdict, StatusCode> {
        self.failures.fetch_add(1, Ordering::Relaxed);
        match self.config.policy {
            FailurePolicy::Open => {
                eprintln!("rate limit: Redis unavailable ({why:?}); admitting {key} (fail open)");
                Err(StatusCode::OK)
            }
            FailurePolicy::Closed => Err(StatusCode::SERVICE_UNAVAILABLE),
            FailurePolicy::Local { .. } => {
                let mut local = self.local.lock().unwrap_or_else(|p| p.into_inner());
                Ok(local.check(key, &self.config.windows, self.config.cost, now_ms()))
            }
        }
    }
}

/// The middleware: `Router::layer(axum::middleware::from_fn_with_state(limiter, rate_limit))`,
/// served with `into_make_service_with_connect_info::<SocketAddr>()`. It
/// limits the routes added before the layer, not those added after it.
pub async fn rate_limit(
    State(limiter): State<Arc<RateLimiter>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    request: Request,
    next: Next,
) -> Response {
    let client = (limiter.config.key)(&request, peer);
    let key = format!("{}{client}", limiter.config.key_prefix);
    let (verdict, source) = match limiter.check(&key).await {
        Ok(verdict) => (verdict, "redis"),
        Err(why) => match limiter.fallback(&key, &why) {
            Ok(verdict) => (verdict, "local"),
            Err(StatusCode::OK) => {
                let mut response = next.run(request).await;
                source_header(response.headers_mut(), "open");
                return response;
            }
            Err(status) => {
                let mut response = (status, "rate limiter unavailable\n").into_response();
                response
                    .headers_mut()
                    .insert("retry-after", HeaderValue::from_static("1"));
                source_header(response.headers_mut(), "closed");
                return response;
            }
        },
    };
    let mut response = if verdict.allowed {
        next.run(request).await
    } else {
        (StatusCode::TOO_MANY_REQUESTS, "too many requests\n").into_response()
    };
    let headers = response.headers_mut();
    for (name, value) in rate_limit_headers(&verdict) {
        if let Ok(value) = HeaderValue::from_str(&value) {
            headers.insert(name, value);
        }
    }
    source_header(headers, source);
    response
}

/// Says which answered: redis, local, open or closed.
fn source_header(headers: &mut HeaderMap, source: &'static str) {
    headers.insert("ratelimit-source", HeaderValue::from_static(source));
}

/// The draft's structured headers, all from the window the reply names.
/// `reset_after_ms` is for the widest window; a narrower one's quota is
/// whole again at most one window after its newest entry, hence the cap.
fn rate_limit_headers(verdict: &Verdict) -> Vec<(&'static str, String)> {
    let seconds = |ms: i64| (ms.max(0) + 999) / 1000;
    let window = verdict.window_ms as i64;
    let name = format!("\"{}ms\"", verdict.window_ms);
    let mut headers = vec![
        (
            "ratelimit-policy",
            format!("{name};q={};w={}", verdict.limit, seconds(window)),
        ),
        (
            "ratelimit",
            format!(
                "{name};r={};t={}",
                verdict.remaining,
                seconds(verdict.reset_after_ms.min(window))
            ),
        ),
    ];
    if !verdict.allowed && verdict.retry_after_ms >= 0 {
        headers.push((
            "retry-after",
            seconds(verdict.retry_after_ms).max(1).to_string(),
        ));
    }
    headers
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Skips Redis for a while after a failure: 50 ms, doubling to 1 s.
#[derive(Default)]
struct Backoff {
    delay: Option<Duration>,
    until: Option<Instant>,
}

impl Backoff {
    fn may_try(&self, now: Instant) -> bool {
        self.until.is_none_or(|until| now >= until)
    }
    fn failed(&mut self, now: Instant) {
        let delay = self.delay.map_or(Duration::from_millis(50), |d| {
            (d * 2).min(Duration::from_secs(1))
        });
        self.delay = Some(delay);
        self.until = Some(now + delay);
    }
    fn succeeded(&mut self) {
        *self = Backoff::default();
    }
}

/// A sliding-window log per client, in this process, for at most
/// `max_clients` clients: the least recently seen is forgotten first.
struct LocalLimiter {
    max_clients: usize,
    tick: u64,
    logs: HashMap<String, (u64, Vec<u64>)>,
    by_use: BTreeMap<u64, String>,
}

impl LocalLimiter {
    fn new(max_clients: usize) -> Self {
        LocalLimiter {
            max_clients,
            tick: 0,
            logs: HashMap::new(),
            by_use: BTreeMap::new(),
        }
    }

    fn check(&mut self, key: &str, windows: &[(u64, u64)], cost: u64, now: u64) -> Verdict {
        self.tick += 1;
        let widest = windows.iter().map(|w| w.0).max().unwrap_or(1);
        let (used, mut log) = self.logs.remove(key).unwrap_or_default();
        self.by_use.remove(&used);
        log.retain(|&t| t + widest > now);
        let in_window =
            |log: &[u64], window: u64| log.iter().filter(|&&t| t + window > now).count() as u64;
        let allowed = windows.iter().all(|&(w, l)| in_window(&log, w) + cost <= l);
        if allowed {
            log.extend(std::iter::repeat_n(now, cost as usize));
        }
        // The binding window: least left when admitted, longest wait when denied.
        let mut best: Option<Verdict> = None;
        for &(window_ms, limit) in windows {
            let count = in_window(&log, window_ms);
            let fits = count + cost <= limit;
            let retry = if allowed || fits || cost > limit {
                -1
            } else {
                let inside: Vec<u64> = log
                    .iter()
                    .copied()
                    .filter(|&t| t + window_ms > now)
                    .collect();
                let k = (count + cost - limit) as usize;
                (inside[k - 1] + window_ms - now) as i64
            };
            let verdict = Verdict {
                allowed,
                limit,
                remaining: limit.saturating_sub(count),
                retry_after_ms: retry,
                reset_after_ms: log.last().map_or(0, |&t| (t + widest - now) as i64),
                window_ms,
            };
            let better = match best {
                None => allowed || !fits,
                Some(b) if allowed => verdict.remaining < b.remaining,
                Some(b) => {
                    !fits && (b.retry_after_ms != -1 && (retry == -1 || retry > b.retry_after_ms))
                }
            };
            if better {
                best = Some(verdict);
            }
        }
        if self.logs.len() >= self.max_clients {
            if let Some((_, oldest)) = self.by_use.pop_first() {
                self.logs.remove(&oldest);
            }
        }
        if self.max_clients > 0 && !log.is_empty() {
            self.logs.insert(key.to_string(), (self.tick, log));
            self.by_use.insert(self.tick, key.to_string());
        }
        best.unwrap_or(Verdict {
            allowed,
            limit: windows[0].1,
            remaining: 0,
            retry_after_ms: if allowed { -1 } else { 1 },
            reset_after_ms: 0,
            window_ms: windows[0].0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_local_limiter_forgets_the_least_recently_seen_client() {
        let mut local = LocalLimiter::new(2);
        let windows = [(60_000, 1)];
        assert!(local.check("a", &windows, 1, 1000).allowed);
        assert!(local.check("b", &windows, 1, 1000).allowed);
        assert!(!local.check("a", &windows, 1, 1001).allowed);
        // A third client pushes out b, the least recently seen.
        assert!(local.check("c", &windows, 1, 1002).allowed);
        assert_eq!(local.logs.len(), 2);
        assert!(
            local.check("b", &windows, 1, 1003).allowed,
            "b was forgotten"
        );
        assert!(!local.logs.contains_key("a") || !local.logs.contains_key("c"));
    }

    #[test]
    fn an_unknown_policy_is_refused_naming_it_and_the_accepted_ones() {
        let error = FailurePolicy::parse("opne", 7).unwrap_err();
        assert_eq!(
            error.to_string(),
            "unknown policy \"opne\" (accepted: open, closed, local)"
        );
        assert_eq!(
            FailurePolicy::parse("local", 7),
            Ok(FailurePolicy::Local { max_clients: 7 })
        );
    }

    fn key_of(key: &KeyFn, peer: &str, forwarded: &[&str]) -> String {
        let mut request = Request::new(axum::body::Body::empty());
        for value in forwarded {
            let value = HeaderValue::from_str(value).unwrap();
            request.headers_mut().append("x-forwarded-for", value);
        }
        key(&request, peer.parse().unwrap())
    }

    #[test]
    fn the_default_key_is_the_peer_address_whatever_the_headers() {
        let key: KeyFn = Arc::new(client_address);
        assert_eq!(
            key_of(&key, "192.0.2.7:5000", &["198.51.100.1"]),
            "192.0.2.7"
        );
        assert_eq!(key_of(&key, "[::ffff:192.0.2.7]:5000", &[]), "192.0.2.7");
    }

    #[test]
    fn forwarded_for_is_read_only_from_trusted_proxies() {
        let key = forwarded_for(vec![
            "10.0.0.1".parse().unwrap(),
            "10.0.0.2".parse().unwrap(),
        ]);
        // A client that is not a proxy cannot choose its key.
        assert_eq!(
            key_of(&key, "192.0.2.7:5000", &["198.51.100.1"]),
            "192.0.2.7"
        );
        // Behind a proxy: the address it saw, not what the client wrote.
        let spoofed = ["203.0.113.9, 192.0.2.7"];
        assert_eq!(key_of(&key, "10.0.0.1:5000", &spoofed), "192.0.2.7");
        // Behind two proxies, over two header lines.
        let chain = ["203.0.113.9", "192.0.2.7, 10.0.0.2"];
        assert_eq!(key_of(&key, "10.0.0.1:5000", &chain), "192.0.2.7");
        // Without a usable entry, the proxy's own address is the key.
        assert_eq!(key_of(&key, "10.0.0.1:5000", &[]), "10.0.0.1");
        assert_eq!(key_of(&key, "10.0.0.1:5000", &["garbage"]), "10.0.0.1");
    }

    #[test]
    fn headers_come_from_the_window_the_reply_names() {
        let verdict = Verdict {
            allowed: false,
            limit: 2,
            remaining: 0,
            retry_after_ms: 1500,
            reset_after_ms: 9001,
            window_ms: 10_000,
        };
        assert_eq!(
            rate_limit_headers(&verdict),
            [
                ("ratelimit-policy", "\"10000ms\";q=2;w=10".to_string()),
                ("ratelimit", "\"10000ms\";r=0;t=10".to_string()),
                ("retry-after", "2".to_string()),
            ]
        );
    }
}
