//! The commands: parse, open the key, decide, apply, reply.

use std::panic::{catch_unwind, AssertUnwindSafe};

use redis_module::{Context, RedisError, RedisResult, RedisString, RedisValue};

use crate::error::SwlError;
use crate::request::{parse_check, Now};
use crate::window::{admits, verdict, widest, Verdict};
use crate::zset::{server_time_ms, ZsetKey};

/// SWL.CHECK key window_ms limit now_ms [COST n]
///
/// Trims the log to the window, admits the request if it fits, records it
/// with `cost` entries, and replies `[allowed, limit, remaining,
/// retry_after_ms, reset_after_ms]`.
pub fn check(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    guarded(|| {
        let request = parse_check(&args)?;
        let clock = server_time_ms();
        let now = match request.now {
            Now::ServerClock => clock,
            Now::At(ms) => ms,
        };
        let key = ZsetKey::open(ctx, &args[1])?;
        let windows = &request.windows;
        key.trim_through(widest(windows).floor(now));
        let allowed = admits(&key, windows, now, request.cost);
        if allowed {
            key.record(now, request.cost);
        }
        let reply = verdict(&key, windows, now, request.cost, allowed);
        // The key lives exactly as long as its newest entry stays in the
        // window. A denial keeps an existing expiry but repairs a missing one.
        if allowed || key.expire_at().is_none() {
            key.set_expire_at(clock.saturating_add_signed(reply.reset_after_ms) as i64);
        }
        Ok(reply)
    })
}

/// Runs a command body so that no panic unwinds into the server: a panic
/// becomes an error reply instead of aborting redis-server.
fn guarded(body: impl FnOnce() -> Result<Verdict, SwlError>) -> RedisResult {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(verdict)) => Ok(reply(verdict)),
        Ok(Err(error)) => Err(error.into()),
        Err(_) => Err(SwlError::Internal.into()),
    }
}

fn reply(verdict: Verdict) -> RedisValue {
    RedisValue::Array(vec![
        RedisValue::Integer(i64::from(verdict.allowed)),
        RedisValue::Integer(verdict.limit as i64),
        RedisValue::Integer(verdict.remaining as i64),
        RedisValue::Integer(verdict.retry_after_ms),
        RedisValue::Integer(verdict.reset_after_ms),
    ])
}

impl From<SwlError> for RedisError {
    fn from(error: SwlError) -> Self {
        match error {
            SwlError::WrongArity => RedisError::WrongArity,
            other => RedisError::String(other.to_string()),
        }
    }
}
