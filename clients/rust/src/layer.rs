//! The tower layer: one SWL.CHECK per request (or its FCALL where the server
//! has no module), keyed by what the application's key function returns for
//! it (by default the client's address: the TCP peer), with
//! `RateLimit-Policy`, `RateLimit` and `Retry-After` headers. When Redis
//! cannot answer within the timeout, for whatever reason, the policy
//! answers instead: admit (fail open), refuse with 503 (fail closed), or a
//! bounded in-process limiter. Redis is tried again after a backoff that
//! doubles up to a second, so the service returns to it by itself.

use std::fmt;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::extract::ConnectInfo;
use http::request::Parts;
use http::{HeaderMap, HeaderValue, Request, Response, StatusCode};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use crate::{DenialCache, Encoding, Error, LocalLimiter, Options, Swl, Verdict, MAX_WINDOWS};

/// What answers when Redis cannot.
///
/// ```
/// use redis_swl_client::{Config, FailurePolicy};
/// let config = Config { policy: FailurePolicy::Closed, ..Config::new("redis://127.0.0.1:6379/", vec![(1_000, 5)]) };
/// assert_eq!(config.policy, FailurePolicy::Closed);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailurePolicy {
    /// Admit the request, and count and log it.
    Open,
    /// Refuse it with 503 Service Unavailable.
    Closed,
    /// Decide in this process, remembering at most this many clients.
    Local {
        /// Clients the local limiter remembers; the least recently seen is
        /// forgotten first.
        max_clients: usize,
    },
}

impl FailurePolicy {
    /// The accepted names.
    pub const NAMES: [&'static str; 3] = ["open", "closed", "local"];

    /// The policy named `name`; `max_clients` is for `local`.
    ///
    /// ```
    /// use redis_swl_client::FailurePolicy;
    /// assert_eq!(FailurePolicy::parse("local", 7), Ok(FailurePolicy::Local { max_clients: 7 }));
    /// assert_eq!(
    ///     FailurePolicy::parse("opne", 7).unwrap_err().to_string(),
    ///     "unknown policy \"opne\" (accepted: open, closed, local)"
    /// );
    /// ```
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
///
/// ```
/// use redis_swl_client::{FailurePolicy, UnknownPolicy};
/// assert_eq!(FailurePolicy::parse("fail-open", 0), Err(UnknownPolicy("fail-open".to_string())));
/// ```
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

/// Names the client a request counts against, from the request's head
/// (headers, extensions, URI).
///
/// ```
/// use std::sync::Arc;
/// use redis_swl_client::{client_address, KeyFn};
///
/// // By API key where authentication put one in the extensions, else by address.
/// #[derive(Clone)]
/// struct User(String);
/// let key: KeyFn = Arc::new(|parts| match parts.extensions.get::<User>() {
///     Some(User(id)) => format!("user:{id}"),
///     None => format!("ip:{}", client_address(parts)),
/// });
/// let mut request = http::Request::new(());
/// request.extensions_mut().insert(User("alice".to_string()));
/// assert_eq!(key(&request.into_parts().0), "user:alice");
/// ```
pub type KeyFn = Arc<dyn Fn(&Parts) -> String + Send + Sync>;

/// The default key: the TCP peer's address from axum's `ConnectInfo` (an
/// IPv4 client of a dual-stack listener as plain IPv4), never a header the
/// client chose; `unknown` where the server was not started with
/// `into_make_service_with_connect_info::<SocketAddr>()`.
///
/// ```
/// use std::net::SocketAddr;
/// use axum::extract::ConnectInfo;
/// use redis_swl_client::client_address;
///
/// let mut request = http::Request::new(());
/// request.extensions_mut().insert(ConnectInfo("[::ffff:192.0.2.7]:5000".parse::<SocketAddr>().unwrap()));
/// request.headers_mut().insert("x-forwarded-for", "198.51.100.1".parse().unwrap());
/// assert_eq!(client_address(&request.into_parts().0), "192.0.2.7");
/// ```
pub fn client_address(parts: &Parts) -> String {
    peer(parts).map_or_else(|| "unknown".to_string(), |ip| ip.to_string())
}

fn peer(parts: &Parts) -> Option<IpAddr> {
    parts
        .extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(peer)| peer.ip().to_canonical())
}

/// A key function for a service behind reverse proxies at `proxies`. Each
/// proxy appends the address it saw to `X-Forwarded-For`, so reading from
/// the right while the address so far is one of `proxies` ends at the
/// client; entries a client wrote itself sit further left and are never
/// reached. A connection from anyone else is keyed by the peer's address.
///
/// ```
/// use std::net::SocketAddr;
/// use axum::extract::ConnectInfo;
/// use redis_swl_client::forwarded_for;
///
/// let key = forwarded_for(vec!["10.0.0.1".parse().unwrap()]);
/// let mut request = http::Request::new(());
/// request.extensions_mut().insert(ConnectInfo("10.0.0.1:5000".parse::<SocketAddr>().unwrap()));
/// request.headers_mut().insert("x-forwarded-for", "203.0.113.9, 192.0.2.7".parse().unwrap());
/// assert_eq!(key(&request.into_parts().0), "192.0.2.7");
/// ```
pub fn forwarded_for(proxies: Vec<IpAddr>) -> KeyFn {
    Arc::new(move |parts| {
        let Some(mut client) = peer(parts) else {
            return "unknown".to_string();
        };
        // Entries are split from the raw bytes: bytes a client wrote into
        // its own part of a line must not hide the entries proxies added.
        let forwarded: Vec<&[u8]> = parts
            .headers
            .get_all("x-forwarded-for")
            .iter()
            .flat_map(|value| value.as_bytes().split(|&b| b == b','))
            .collect();
        for hop in forwarded.iter().rev() {
            if !proxies.contains(&client) {
                break;
            }
            match hop_address(hop) {
                Some(address) => client = address.to_canonical(),
                None => break,
            }
        }
        client.to_string()
    })
}

/// One X-Forwarded-For entry's address: `192.0.2.7`, `2001:db8::1`, and
/// the forms some proxies write, with a port or in brackets.
fn hop_address(hop: &[u8]) -> Option<IpAddr> {
    let hop = std::str::from_utf8(hop).ok()?.trim();
    hop.parse::<IpAddr>()
        .ok()
        .or_else(|| hop.parse::<SocketAddr>().ok().map(|a| a.ip()))
        .or_else(|| hop.strip_prefix('[')?.strip_suffix(']')?.parse().ok())
}

/// A response that, with [`Config::refund_failed`], does not count: 4xx and
/// 5xx, as the Python middleware's default.
///
/// ```
/// use std::sync::Arc;
/// use redis_swl_client::{Config, FailedFn};
/// // A login route: only server errors are given back, failed logins count.
/// let failed: FailedFn = Arc::new(|status| status.is_server_error());
/// let config = Config { refund_failed: true, failed, ..Config::new("redis://127.0.0.1:6379/", vec![(60_000, 5)]) };
/// assert!(!(config.failed)(http::StatusCode::UNAUTHORIZED));
/// ```
pub type FailedFn = Arc<dyn Fn(StatusCode) -> bool + Send + Sync>;

/// The layer's settings.
pub struct Config {
    /// The Redis server, for redis-rs: `redis://host:port/` (unused where
    /// `connection` is given).
    pub redis_url: String,
    /// The app's own connection to Redis, in place of one the layer makes
    /// from `redis_url` (see [`Config::with_connection`]).
    pub connection: Option<ConnectionManager>,
    /// (window_ms, limit) pairs: every one must admit; at most
    /// [`MAX_WINDOWS`](crate::MAX_WINDOWS), as one call takes.
    pub windows: Vec<(u64, u64)>,
    /// Per-route limits: a path prefix (`/search`) to the windows of the
    /// requests under it, which it covers with the paths below it
    /// (`/search/x`, not `/searchable`); the longest prefix wins, and no
    /// windows exempt the route. Each route keeps logs of its own
    /// (`<key_prefix><route>:<client>`).
    pub routes: Vec<(String, Vec<(u64, u64)>)>,
    /// Units each request weighs.
    pub cost: u64,
    /// What answers while Redis cannot.
    pub policy: FailurePolicy,
    /// For each command to Redis, connecting included. A request sends one;
    /// the first that finds no module and no library sends five.
    pub timeout: Duration,
    /// Prefix of the Redis keys.
    pub key_prefix: String,
    /// Who a request counts against.
    pub key: KeyFn,
    /// Give back the units of a request whose response `failed` says
    /// failed, through SWL.REFUND (or the local limiter that decided it),
    /// if it ended within the narrowest window. With the default `failed`,
    /// 4xx answers do not count either: limit a login route with a `failed`
    /// of its own (5xx only), or failed logins are free.
    pub refund_failed: bool,
    /// Which responses count as failed for `refund_failed`.
    pub failed: FailedFn,
    /// How logs the function library creates are stored (`Compact1`
    /// while redis-swl 0.3 still serves the keys).
    pub encoding: Encoding,
    /// Keys whose denials are remembered, to answer their next requests
    /// in the process until the wait Redis gave has passed (with
    /// `RateLimit-Source: cache`), without a call to Redis; 0 turns the
    /// cache off. See [`DenialCache`].
    pub denial_cache_keys: usize,
    /// The limiter's name in its metrics (the `metrics` feature): a fixed
    /// name such as `api` or `login`, never a path or a key.
    pub name: String,
}

impl Config {
    /// Cost 1, failing open, a 50 ms timeout, keys `rl:<client address>`,
    /// no refunds, a denial cache of 10,000 keys, named `default`.
    ///
    /// ```
    /// use redis_swl_client::{Config, FailurePolicy};
    /// let config = Config {
    ///     policy: FailurePolicy::Local { max_clients: 10_000 },
    ///     ..Config::new("redis://127.0.0.1:6379/", vec![(60_000, 100), (1_000, 10)])
    /// };
    /// assert_eq!(config.key_prefix, "rl:");
    /// ```
    pub fn new(redis_url: impl Into<String>, windows: Vec<(u64, u64)>) -> Config {
        Config {
            redis_url: redis_url.into(),
            connection: None,
            windows,
            routes: Vec::new(),
            cost: 1,
            policy: FailurePolicy::Open,
            timeout: Duration::from_millis(50),
            key_prefix: "rl:".to_string(),
            key: Arc::new(client_address),
            refund_failed: false,
            failed: Arc::new(|status: StatusCode| {
                status.is_client_error() || status.is_server_error()
            }),
            encoding: Encoding::Compact,
            denial_cache_keys: DenialCache::DEFAULT_KEYS,
            name: "default".to_string(),
        }
    }
}

impl Config {
    /// As [`Config::new`], over the app's own connection (its timeouts and
    /// retries are the app's: the layer still gives each call `timeout`).
    ///
    /// ```no_run
    /// use redis_swl_client::{Config, RateLimiter};
    /// # async fn example() -> Result<(), Box<dyn std::error::Error>> {
    /// let client = redis::Client::open("redis://127.0.0.1:6379/")?;
    /// let manager = client.get_connection_manager().await?;
    /// let limiter = RateLimiter::new(Config::with_connection(manager, vec![(60_000, 100)]))?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn with_connection(connection: ConnectionManager, windows: Vec<(u64, u64)>) -> Config {
        Config {
            connection: Some(connection),
            ..Config::new("", windows)
        }
    }
}

/// The largest window, limit and time the module takes (2^53 - 1).
const MAX_MS: u64 = (1 << 53) - 1;
/// The largest cost the module takes.
const MAX_COST: u64 = 100_000;

/// Why a configuration cannot be used: each value the module would refuse
/// (so that every request went to the failure policy) is refused here.
///
/// ```
/// use redis_swl_client::{Config, RateLimiter};
/// let error = RateLimiter::new(Config { cost: 0, ..Config::new("redis://127.0.0.1:6379/", vec![(1_000, 5)]) });
/// assert_eq!(error.unwrap_err().to_string(), "cost: from 1 to 100000");
/// ```
#[derive(Debug)]
pub enum ConfigError {
    /// No windows, or a window or limit outside the module's range.
    Windows,
    /// More windows than one call takes ([`MAX_WINDOWS`](crate::MAX_WINDOWS)):
    /// how many were given.
    TooManyWindows(usize),
    /// A cost outside 1 to 100000.
    Cost,
    /// A timeout of zero.
    Timeout,
    /// A local policy that remembers no client.
    MaxClients,
    /// A route whose prefix does not start with `/`, or whose windows the
    /// module would refuse: its prefix.
    Route(String),
    /// The Redis URL did not parse.
    Redis(redis::RedisError),
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::Windows => write!(
                f,
                "windows: at least one (window_ms, limit), window_ms from 1 and limit from 0, both to {MAX_MS}"
            ),
            ConfigError::TooManyWindows(given) => write!(
                f,
                "windows: at most {MAX_WINDOWS} (window_ms, limit) pairs, not {given}"
            ),
            ConfigError::Cost => write!(f, "cost: from 1 to {MAX_COST}"),
            ConfigError::Timeout => write!(f, "timeout: above zero"),
            ConfigError::MaxClients => {
                write!(f, "policy: a local policy must remember at least one client")
            }
            ConfigError::Route(prefix) => write!(
                f,
                "routes: {prefix:?} must start with / and have windows as `windows` takes them, or none"
            ),
            ConfigError::Redis(error) => write!(f, "redis_url: {error}"),
        }
    }
}

impl std::error::Error for ConfigError {}

/// A request's windows, with the cost and the windows after the first as
/// each call sends them: made once, not per request.
#[derive(Debug)]
struct Limits {
    windows: Vec<(u64, u64)>,
    options: Options,
}

impl Limits {
    fn new(windows: &[(u64, u64)], cost: u64) -> Limits {
        Limits {
            windows: windows.to_vec(),
            options: Options::new()
                .cost(cost)
                .windows(windows.iter().skip(1).copied()),
        }
    }

    fn first(&self) -> (u64, u64) {
        self.windows[0]
    }
}

/// Who decided a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    Redis,
    /// The denial cache, repeating a denial of Redis's.
    Cache,
    Local,
}

/// The limits, the connection to Redis, the failure policy and its count;
/// shared by every service the layer makes.
///
/// ```
/// use redis_swl_client::{Config, RateLimiter};
/// let limiter = RateLimiter::new(Config::new("redis://127.0.0.1:6379/", vec![(60_000, 100)])).unwrap();
/// let for_a_health_route = limiter.clone();
/// # let _ = for_a_health_route.failures();
/// ```
pub struct RateLimiter {
    config: Config,
    /// The windows every request outside the routes is held to.
    limits: Arc<Limits>,
    /// Each route's prefix and limits, longest prefix first.
    routes: Vec<(String, Arc<Limits>)>,
    /// Where the layer connects itself (no `connection` given).
    client: Option<redis::Client>,
    connection: tokio::sync::Mutex<Option<Arc<Swl<ConnectionManager>>>>,
    backoff: Mutex<Backoff>,
    local: Mutex<LocalLimiter>,
    failures: AtomicU64,
    /// Outlives connections, which are replaced after failures.
    denials: Option<DenialCache>,
}

impl fmt::Debug for RateLimiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimiter")
            .field("windows", &self.config.windows)
            .field("policy", &self.config.policy)
            .field("failures", &self.failures())
            .finish_non_exhaustive()
    }
}

impl RateLimiter {
    /// The limiter for `config`; it connects when first used.
    ///
    /// ```
    /// use redis_swl_client::{Config, RateLimiter};
    /// let limiter = RateLimiter::new(Config::new("redis://127.0.0.1:6379/", vec![(60_000, 100)]))?;
    /// assert_eq!(limiter.failures(), 0);
    /// # Ok::<(), redis_swl_client::ConfigError>(())
    /// ```
    pub fn new(config: Config) -> Result<Arc<RateLimiter>, ConfigError> {
        let window_ok = |&(ms, limit): &(u64, u64)| (1..=MAX_MS).contains(&ms) && limit <= MAX_MS;
        if config.windows.is_empty() || !config.windows.iter().all(window_ok) {
            return Err(ConfigError::Windows);
        }
        if config.windows.len() > MAX_WINDOWS {
            return Err(ConfigError::TooManyWindows(config.windows.len()));
        }
        for (prefix, windows) in &config.routes {
            if !prefix.starts_with('/')
                || !windows.iter().all(window_ok)
                || windows.len() > MAX_WINDOWS
            {
                return Err(ConfigError::Route(prefix.clone()));
            }
        }
        if !(1..=MAX_COST).contains(&config.cost) {
            return Err(ConfigError::Cost);
        }
        if config.timeout.is_zero() {
            return Err(ConfigError::Timeout);
        }
        if config.policy == (FailurePolicy::Local { max_clients: 0 }) {
            return Err(ConfigError::MaxClients);
        }
        let client = match config.connection {
            Some(_) => None,
            None => {
                Some(redis::Client::open(config.redis_url.as_str()).map_err(ConfigError::Redis)?)
            }
        };
        let max_clients = match config.policy {
            FailurePolicy::Local { max_clients } => max_clients,
            _ => 0,
        };
        let limits = Arc::new(Limits::new(&config.windows, config.cost));
        let mut routes: Vec<(String, Arc<Limits>)> = config
            .routes
            .iter()
            .map(|(prefix, windows)| (prefix.clone(), Arc::new(Limits::new(windows, config.cost))))
            .collect();
        routes.sort_by_key(|(prefix, _)| std::cmp::Reverse(prefix.len()));
        #[cfg(feature = "metrics")]
        describe_metrics();
        Ok(Arc::new(RateLimiter {
            limits,
            routes,
            client,
            connection: tokio::sync::Mutex::new(None),
            backoff: Mutex::new(Backoff::default()),
            local: Mutex::new(LocalLimiter::new(max_clients)),
            failures: AtomicU64::new(0),
            denials: (config.denial_cache_keys > 0)
                .then(|| DenialCache::new(config.denial_cache_keys)),
            config,
        }))
    }

    /// The tower layer: `Router::layer(limiter.layer())` limits the routes
    /// added before it; `MethodRouter::layer` limits one route.
    ///
    /// ```no_run
    /// use std::net::SocketAddr;
    /// use axum::{routing::get, Router};
    /// use redis_swl_client::{Config, RateLimiter};
    ///
    /// # async fn serve() -> Result<(), Box<dyn std::error::Error>> {
    /// let limiter = RateLimiter::new(Config::new("redis://127.0.0.1:6379/", vec![(60_000, 100)]))?;
    /// let login = RateLimiter::new(Config {
    ///     key_prefix: "login:".to_string(), // logs of its own
    ///     ..Config::new("redis://127.0.0.1:6379/", vec![(60_000, 5)])
    /// })?;
    /// let app: Router = Router::new()
    ///     .route("/", get(|| async { "hello\n" }))
    ///     .layer(limiter.layer())
    ///     .route("/login", get(|| async { "welcome\n" }).layer(login.layer()));
    /// let listener = tokio::net::TcpListener::bind("127.0.0.1:3001").await?;
    /// axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>()).await?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn layer(self: &Arc<Self>) -> RateLimitLayer {
        RateLimitLayer {
            limiter: Arc::clone(self),
        }
    }

    /// Requests decided by the failure policy since start, for a health
    /// endpoint or a metric.
    ///
    /// ```
    /// # let limiter = redis_swl_client::RateLimiter::new(redis_swl_client::Config::new("redis://127.0.0.1:6379/", vec![(1_000, 1)])).unwrap();
    /// let decided_without_redis: u64 = limiter.failures();
    /// ```
    pub fn failures(&self) -> u64 {
        self.failures.load(Ordering::Relaxed)
    }

    /// Deletes the log of `client` (what the key function returned for its
    /// requests, before the prefix), so that its next request is admitted
    /// as a new client's, and drops its denials from this process's cache.
    /// Under the local policy, the local limiter's log is dropped too.
    ///
    /// ```no_run
    /// # async fn example(limiter: std::sync::Arc<redis_swl_client::RateLimiter>) -> Result<(), redis_swl_client::Error> {
    /// limiter.reset("203.0.113.9").await?; // keys rl:203.0.113.9
    /// # Ok(())
    /// # }
    /// ```
    pub async fn reset(&self, client: &str) -> Result<(), Error> {
        let keys: Vec<String> = std::iter::once(self.log_name("", client))
            .chain(
                self.routes
                    .iter()
                    .filter(|(_, limits)| !limits.windows.is_empty())
                    .map(|(route, _)| self.log_name(route, client)),
            )
            .collect();
        let reset = async {
            let swl = self.swl().await?;
            // One by one (in a cluster they may be on different nodes),
            // each tried whatever the others did; the first failure is
            // the result.
            let mut first_failure = Ok(());
            for key in &keys {
                let outcome = swl.reset(key).await;
                if first_failure.is_ok() {
                    first_failure = outcome;
                }
            }
            first_failure
        };
        let outcome = tokio::time::timeout(self.config.timeout * 4, reset).await;
        for key in &keys {
            if let Some(denials) = &self.denials {
                denials.forget(key);
            }
            self.lock(&self.local).forget(key);
        }
        outcome.unwrap_or_else(|elapsed| {
            let timed_out = std::io::Error::new(std::io::ErrorKind::TimedOut, elapsed);
            Err(Error::UncertainOutcome(timed_out.into()))
        })
    }

    /// The log of `client` on `route` (a prefix, or "" for none): each
    /// route keeps logs of its own.
    fn log_name(&self, route: &str, client: &str) -> String {
        match route {
            "" => format!("{}{client}", self.config.key_prefix),
            route => format!("{}{route}:{client}", self.config.key_prefix),
        }
    }

    /// The route (its prefix, or "" for none) and the limits a request's
    /// path is held to: the longest prefix that covers it.
    fn limits_for(&self, path: &str) -> (&str, &Arc<Limits>) {
        let covers = |prefix: &str| {
            path == prefix
                || path
                    .strip_prefix(prefix.trim_end_matches('/'))
                    .is_some_and(|rest| rest.starts_with('/'))
        };
        self.routes
            .iter()
            .find(|(prefix, _)| covers(prefix))
            .map_or(("", &self.limits), |(prefix, limits)| {
                (prefix.as_str(), limits)
            })
    }

    /// The connection's client, connecting if there is none.
    async fn swl(&self) -> redis::RedisResult<Arc<Swl<ConnectionManager>>> {
        let mut slot = self.connection.lock().await;
        if let Some(swl) = slot.as_ref() {
            return Ok(Arc::clone(swl));
        }
        let manager = match (&self.config.connection, &self.client) {
            (Some(manager), _) => manager.clone(),
            (None, Some(client)) => {
                let config = ConnectionManagerConfig::new()
                    .set_connection_timeout(self.config.timeout)
                    .set_response_timeout(self.config.timeout)
                    .set_number_of_retries(0);
                ConnectionManager::new_with_config(client.clone(), config).await?
            }
            (None, None) => {
                unreachable!("RateLimiter::new opens a client where no connection is given")
            }
        };
        let swl = Arc::new(Swl::new(manager).with_encoding(self.config.encoding));
        *slot = Some(Arc::clone(&swl));
        Ok(swl)
    }

    /// Redis's verdict, or `None` where it gave none in time. `refund`
    /// gives back instead; a refund that fails is only logged, and does not
    /// make the checks of other requests skip Redis.
    async fn redis(&self, key: &str, limits: &Limits, refund: bool) -> Option<Verdict> {
        if !refund && !self.lock(&self.backoff).may_try(Instant::now()) {
            return None;
        }
        let (window_ms, limit) = limits.first();
        let options = &limits.options;
        let call = async {
            let swl = self.swl().await?;
            if refund {
                swl.refund(key, window_ms, limit, options).await
            } else {
                swl.check(key, window_ms, limit, options).await
            }
        };
        // A call that timed out may still be carried out by Redis (its
        // command is out): under the local policy such a request can be
        // recorded in Redis as well as in this process.
        // Each command has the timeout (the connection manager's), and a
        // call that loads the library sends five: a command the server
        // lacks, the FCALL that finds no library, FCALL_RO swl_version,
        // FUNCTION LOAD and the FCALL again.
        let outcome = tokio::time::timeout(self.config.timeout * 5, call).await;
        if let (true, Some(denials)) = (refund, &self.denials) {
            // Also when it failed: it may have been carried out.
            denials.forget(key);
        }
        let failure = match outcome {
            Ok(Ok(verdict)) => {
                if !refund {
                    self.lock(&self.backoff).succeeded();
                }
                return Some(verdict);
            }
            Ok(Err(error)) => Some(error),
            Err(_) => None,
        };
        // Only an error reply about this call (a key of another type)
        // leaves the connection: after a timeout, a broken connection or a
        // reply about the server's state (READONLY after a failover,
        // LOADING, ...) the next attempt connects afresh, wherever the
        // address now leads.
        let keep = failure.as_ref().map(Error::redis_error).is_some_and(|e| {
            e.kind() != redis::ErrorKind::IoError
                && !e.is_timeout()
                && !e.is_connection_dropped()
                && !e.is_connection_refusal()
                && !matches!(
                    e.code(),
                    Some(
                        "READONLY"
                            | "LOADING"
                            | "MASTERDOWN"
                            | "BUSY"
                            | "CLUSTERDOWN"
                            | "TRYAGAIN"
                            | "NOREPLICAS"
                    )
                )
        });
        if !keep {
            if let Ok(mut connection) = self.connection.try_lock() {
                *connection = None;
            }
        }
        let why = failure.map_or_else(|| "timed out".to_string(), |e| e.to_string());
        if refund {
            eprintln!("rate limit: refund of {key} failed ({why})");
        } else {
            eprintln!("rate limit: Redis unavailable ({why})");
            self.lock(&self.backoff).failed(Instant::now());
        }
        None
    }

    fn lock<'a, T>(&self, mutex: &'a Mutex<T>) -> std::sync::MutexGuard<'a, T> {
        mutex
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The decision for a request: Redis's, the local limiter's, or the
    /// policy's status (200 to admit unlimited, 503 to refuse).
    async fn decide(&self, key: &str, limits: &Limits) -> Result<(Verdict, Source), StatusCode> {
        let first = limits.first();
        let ticket = match &self.denials {
            Some(denials) => {
                if let Some(verdict) = denials.answer(key, first, &limits.options, Instant::now()) {
                    return Ok((verdict, Source::Cache));
                }
                denials.ticket()
            }
            None => 0,
        };
        // The wait counts from the send: Redis decided after it, so the
        // cached denial never outlasts Redis's own.
        let sent = Instant::now();
        if let Some(verdict) = self.redis(key, limits, false).await {
            if let Some(denials) = &self.denials {
                denials.keep(key, first, &limits.options, &verdict, ticket, sent);
            }
            return Ok((verdict, Source::Redis));
        }
        self.failures.fetch_add(1, Ordering::Relaxed);
        match self.config.policy {
            FailurePolicy::Open => {
                eprintln!("rate limit: admitting {key} without Redis (fail open)");
                Err(StatusCode::OK)
            }
            FailurePolicy::Closed => Err(StatusCode::SERVICE_UNAVAILABLE),
            FailurePolicy::Local { .. } => {
                let verdict = self
                    .lock(&self.local)
                    .check(key, &limits.windows, now_ms(), self.config.cost)
                    // RateLimiter::new refused more windows than a call takes.
                    .map_err(|_| StatusCode::SERVICE_UNAVAILABLE)?;
                Ok((verdict, Source::Local))
            }
        }
    }

    /// Gives a failed request's units back where they were recorded, in
    /// Redis without holding up the response. Only while the request's own
    /// entries are surely in every window: a refund takes the newest
    /// entries, which after the narrowest window are no longer its own.
    fn give_back(
        self: &Arc<Self>,
        key: String,
        limits: Arc<Limits>,
        source: Source,
        decided: Instant,
    ) {
        let narrowest = limits.windows.iter().map(|&(ms, _)| ms).min().unwrap_or(0);
        if decided.elapsed() >= Duration::from_millis(narrowest) {
            return;
        }
        match source {
            Source::Redis => {
                let limiter = Arc::clone(self);
                tokio::spawn(async move {
                    limiter.redis(&key, &limits, true).await;
                });
            }
            // A cached verdict is a denial: nothing to give back.
            Source::Cache => {}
            Source::Local => {
                let mut local = self.lock(&self.local);
                // Windows RateLimiter::new took are never too many.
                let _ = local.refund(&key, &limits.windows, now_ms(), self.config.cost);
            }
        }
    }
}

#[cfg(feature = "metrics")]
const DECISIONS: &str = "redis_swl_decisions_total";
#[cfg(feature = "metrics")]
const DECISION_SECONDS: &str = "redis_swl_decision_seconds";

/// Tells the installed recorder what the metrics mean.
#[cfg(feature = "metrics")]
fn describe_metrics() {
    metrics::describe_counter!(
        DECISIONS,
        "Requests decided by a redis-swl limiter, by limiter, decision (admitted, denied) and source (redis, cache, local, open, closed)"
    );
    metrics::describe_histogram!(
        DECISION_SECONDS,
        metrics::Unit::Seconds,
        "Time a redis-swl limiter took to decide a request, by limiter and source"
    );
}

#[cfg(feature = "metrics")]
impl RateLimiter {
    /// Counts a decision and the time it took, labelled by the limiter's
    /// name and who decided.
    fn count(&self, decision: &Result<(Verdict, Source), StatusCode>, took: Duration) {
        let (admitted, source) = match decision {
            Ok((verdict, source)) => (verdict.allowed, source.name()),
            Err(StatusCode::OK) => (true, "open"),
            Err(_) => (false, "closed"),
        };
        let name = self.config.name.clone();
        let decision = if admitted { "admitted" } else { "denied" };
        metrics::counter!(DECISIONS, "limiter" => name.clone(), "decision" => decision, "source" => source)
            .increment(1);
        metrics::histogram!(DECISION_SECONDS, "limiter" => name, "source" => source)
            .record(took.as_secs_f64());
    }
}

/// The layer [`RateLimiter::layer`] makes.
///
/// ```
/// use axum::{routing::get, Router};
/// use redis_swl_client::{Config, RateLimitLayer, RateLimiter};
/// let limiter = RateLimiter::new(Config::new("redis://127.0.0.1:6379/", vec![(60_000, 100)])).unwrap();
/// let layer: RateLimitLayer = limiter.layer();
/// let app: Router = Router::new().route("/", get(|| async { "hello" })).layer(layer);
/// ```
#[derive(Clone, Debug)]
pub struct RateLimitLayer {
    limiter: Arc<RateLimiter>,
}

impl<S> tower_layer::Layer<S> for RateLimitLayer {
    type Service = RateLimitService<S>;

    fn layer(&self, inner: S) -> RateLimitService<S> {
        RateLimitService {
            inner,
            limiter: Arc::clone(&self.limiter),
        }
    }
}

/// The service [`RateLimitLayer`] wraps around another.
///
/// ```
/// use tower_layer::Layer;
/// use redis_swl_client::{Config, RateLimitService, RateLimiter};
/// let limiter = RateLimiter::new(Config::new("redis://127.0.0.1:6379/", vec![(60_000, 100)])).unwrap();
/// let handler = tower::service_fn(|_: http::Request<()>| async {
///     Ok::<_, std::convert::Infallible>(http::Response::new(axum::body::Body::from("hello")))
/// });
/// let service: RateLimitService<_> = limiter.layer().layer(handler);
/// ```
#[derive(Clone, Debug)]
pub struct RateLimitService<S> {
    inner: S,
    limiter: Arc<RateLimiter>,
}

impl<S, B, R> tower_service::Service<Request<B>> for RateLimitService<S>
where
    S: tower_service::Service<Request<B>, Response = Response<R>> + Clone + Send + 'static,
    S::Future: Send,
    B: Send + 'static,
    R: From<&'static str> + Send + 'static,
{
    type Response = Response<R>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Response<R>, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        // The clone that was made ready serves this request.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let limiter = Arc::clone(&self.limiter);
        Box::pin(async move {
            let (parts, body) = request.into_parts();
            let (route, limits) = limiter.limits_for(parts.uri.path());
            if limits.windows.is_empty() {
                return inner.call(Request::from_parts(parts, body)).await;
            }
            let key = limiter.log_name(route, &(limiter.config.key)(&parts));
            let limits = Arc::clone(limits);
            let request = Request::from_parts(parts, body);
            let decided = Instant::now();
            let decision = limiter.decide(&key, &limits).await;
            #[cfg(feature = "metrics")]
            limiter.count(&decision, decided.elapsed());
            let (verdict, source) = match decision {
                Ok(decided) => decided,
                Err(StatusCode::OK) => {
                    let mut response = inner.call(request).await?;
                    source_header(response.headers_mut(), "open");
                    return Ok(response);
                }
                Err(status) => {
                    let mut response = Response::new(R::from("rate limiter unavailable\n"));
                    *response.status_mut() = status;
                    let headers = response.headers_mut();
                    headers.insert("retry-after", HeaderValue::from_static("1"));
                    headers.insert(
                        "content-type",
                        HeaderValue::from_static("text/plain; charset=utf-8"),
                    );
                    source_header(headers, "closed");
                    return Ok(response);
                }
            };
            let mut response = if verdict.allowed {
                let response = inner.call(request).await?;
                if limiter.config.refund_failed && (limiter.config.failed)(response.status()) {
                    limiter.give_back(key, limits, source, decided);
                }
                response
            } else {
                let mut response = Response::new(R::from("too many requests\n"));
                *response.status_mut() = StatusCode::TOO_MANY_REQUESTS;
                response.headers_mut().insert(
                    "content-type",
                    HeaderValue::from_static("text/plain; charset=utf-8"),
                );
                response
            };
            let headers = response.headers_mut();
            for (name, value) in rate_limit_headers(&verdict) {
                if let Ok(value) = HeaderValue::from_str(&value) {
                    headers.insert(name, value);
                }
            }
            source_header(headers, source.name());
            Ok(response)
        })
    }
}

impl Source {
    fn name(self) -> &'static str {
        match self {
            Source::Redis => "redis",
            Source::Cache => "cache",
            Source::Local => "local",
        }
    }
}

/// Says which answered: redis, cache, local, open or closed.
fn source_header(headers: &mut HeaderMap, source: &'static str) {
    headers.insert("ratelimit-source", HeaderValue::from_static(source));
}

/// The IETF draft's structured headers, all from the window the verdict
/// names: `RateLimit-Policy`, `RateLimit` and, when denied and waiting
/// helps, `Retry-After`. `reset_after_ms` is for the widest window; a
/// narrower one's quota is whole again at most one window after its newest
/// entry, hence the cap.
///
/// ```
/// use redis_swl_client::{rate_limit_headers, Verdict};
/// let verdict = Verdict::from_reply(&[0, 2, 0, 1500, 9001, 10_000]).unwrap();
/// assert_eq!(rate_limit_headers(&verdict), [
///     ("ratelimit-policy", "\"10000ms\";q=2;w=10".to_string()),
///     ("ratelimit", "\"10000ms\";r=0;t=10".to_string()),
///     ("retry-after", "2".to_string()),
/// ]);
/// ```
pub fn rate_limit_headers(verdict: &Verdict) -> Vec<(&'static str, String)> {
    let seconds = |ms: i64| (ms.max(0) as u64).div_ceil(1000);
    let window = i64::try_from(verdict.window_ms).unwrap_or(i64::MAX);
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
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
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
