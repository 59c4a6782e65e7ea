//! Rate-limiting HTTP requests with SWL.CHECK from Rust (the `redis` crate),
//! mapping each reply to response headers: `RateLimit-Policy` and
//! `RateLimit` as in the IETF httpapi rate-limit headers draft, and
//! `Retry-After` in whole seconds, rounded up.
//!
//! When Redis cannot be reached the handler either fails open, admitting
//! through a small in-process limiter so the API stays up with a looser
//! (per-instance) limit, or fails closed, refusing with 503.
//!
//! cargo run --example http_headers -- redis://127.0.0.1:6379/ alice 5 3 60000 open
//! prints one line per request: the status and the headers it would send.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// What a handler needs from a check: SWL.CHECK's five integers.
struct Verdict {
    allowed: bool,
    limit: i64,
    remaining: i64,
    retry_after_ms: i64,
    reset_after_ms: i64,
}

fn seconds_rounded_up(ms: i64) -> i64 {
    (ms + 999) / 1000
}

/// The status line and headers for one request.
fn response(verdict: &Verdict, window_ms: i64) -> String {
    let mut line = format!(
        "{} RateLimit-Policy: \"default\";q={};w={} | RateLimit: \"default\";r={};t={}",
        if verdict.allowed { 200 } else { 429 },
        verdict.limit,
        seconds_rounded_up(window_ms),
        verdict.remaining,
        seconds_rounded_up(verdict.reset_after_ms),
    );
    // -1 means waiting cannot help (the cost exceeds the limit): no hint.
    if !verdict.allowed && verdict.retry_after_ms >= 0 {
        line += &format!(
            " | Retry-After: {}",
            seconds_rounded_up(verdict.retry_after_ms)
        );
    }
    line
}

fn check(
    con: &mut redis::Connection,
    client: &str,
    limit: i64,
    window_ms: i64,
) -> redis::RedisResult<Verdict> {
    let [allowed, limit, remaining, retry_after_ms, reset_after_ms, _window_ms]: [i64; 6] =
        redis::cmd("SWL.CHECK")
            .arg(format!("rl:{client}"))
            .arg(window_ms)
            .arg(limit)
            .arg("*")
            .query(con)?;
    Ok(Verdict {
        allowed: allowed == 1,
        limit,
        remaining,
        retry_after_ms,
        reset_after_ms,
    })
}

/// The fail-open fallback: the same sliding-window log, kept in this
/// process only, so each instance enforces the limit on its own.
#[derive(Default)]
struct LocalLimiter {
    logs: HashMap<String, VecDeque<i64>>,
}

impl LocalLimiter {
    fn check(&mut self, client: &str, limit: i64, window_ms: i64) -> Verdict {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        let log = self.logs.entry(client.to_string()).or_default();
        while log.front().is_some_and(|&t| t <= now - window_ms) {
            log.pop_front();
        }
        let allowed = (log.len() as i64) < limit;
        if allowed {
            log.push_back(now);
        }
        let count = log.len() as i64;
        Verdict {
            allowed,
            limit,
            remaining: (limit - count).max(0),
            retry_after_ms: match (allowed, log.front()) {
                (false, Some(&oldest)) if limit > 0 => (oldest + window_ms - now).max(1),
                _ => -1,
            },
            reset_after_ms: log.back().map_or(0, |&newest| newest + window_ms - now),
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, url, client, requests, limit, window_ms, mode] = &args[..] else {
        eprintln!(
            "usage: http_headers <redis-url> <client> <requests> <limit> <window_ms> <open|closed>"
        );
        std::process::exit(2);
    };
    let (requests, limit, window_ms): (u32, i64, i64) =
        match (requests.parse(), limit.parse(), window_ms.parse()) {
            (Ok(r), Ok(l), Ok(w)) => (r, l, w),
            _ => {
                eprintln!("requests, limit and window_ms must be numbers");
                std::process::exit(2);
            }
        };
    let mut redis = redis::Client::open(url.as_str())
        .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(1)))
        .ok();
    let mut local = LocalLimiter::default();
    for _ in 0..requests {
        let verdict = redis
            .as_mut()
            .map(|con| check(con, client, limit, window_ms));
        let line = match verdict {
            Some(Ok(verdict)) => response(&verdict, window_ms),
            // Redis is unreachable (or failed): keep serving, or refuse.
            _ if mode == "open" => {
                response(&local.check(client, limit, window_ms), window_ms) + " (local)"
            }
            _ => "503 Retry-After: 1".to_string(),
        };
        println!("{line}");
    }
}
