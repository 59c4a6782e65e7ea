//! Exact sliding-window-log rate limiting on Redis, from Rust: a client for
//! the [redis-swl](https://github.com/redis-swl/redis-swl) module and, with
//! the `axum` feature, a tower layer for axum and any tower service.
//!
//! A sliding log admits at most `limit` requests in *any* window of
//! `window_ms`; every request is an entry, also several in one millisecond.
//! Where the server cannot load modules (most managed Redis), every call
//! goes to redis-swl's function library instead, which this crate carries
//! and loads itself: the same replies, the same keys.
//!
//! ```no_run
//! use redis_swl_client::{Options, Swl};
//!
//! # async fn example() -> redis::RedisResult<()> {
//! let client = redis::Client::open("redis://127.0.0.1:6379/")?;
//! let swl = Swl::new(client.get_connection_manager().await?);
//! // 100 a minute and 10 a second.
//! let verdict = swl
//!     .check("rl:alice", 60_000, 100, &Options::new().window(1_000, 10))
//!     .await?;
//! if !verdict.allowed {
//!     println!("429, Retry-After: {:?}", verdict.retry_after_seconds());
//! }
//! # Ok(())
//! # }
//! ```
//!
//! Features: `axum` (the layer: [`RateLimiter`], [`RateLimitLayer`]),
//! `cluster` (the client over redis-rs's async cluster connection),
//! `metrics` (the layer's decisions and their latency through the
//! [`metrics`](https://docs.rs/metrics) facade: `redis_swl_decisions_total`
//! by `limiter`, `decision` and `source`, `redis_swl_decision_seconds` by
//! `limiter` and `source`).

mod cache;
mod client;
#[cfg(feature = "axum")]
mod layer;
mod local;

pub use cache::DenialCache;
pub use client::{library_source, Encoding, Error, Options, Swl, Usage, Verdict};
#[cfg(feature = "axum")]
pub use layer::{
    client_address, forwarded_for, rate_limit_headers, Config, ConfigError, FailedFn,
    FailurePolicy, KeyFn, RateLimitLayer, RateLimitService, RateLimiter, UnknownPolicy,
};
pub use local::{LocalLimiter, TooManyWindows, MAX_WINDOWS};

// The README's examples compile as doc tests.
#[cfg(all(doctest, feature = "axum"))]
#[doc = include_str!("../README.md")]
struct ReadmeExamples;
