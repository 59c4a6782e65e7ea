//! The commands: parse, open the key, decide, apply, reply.

use std::panic::{catch_unwind, AssertUnwindSafe};

use redis_module::{Context, RedisError, RedisResult, RedisString, RedisValue};

use crate::error::SwlError;
use crate::redis::reply;
use crate::redis::server_time_ms;
use crate::redis::zset::{Access, ZsetKey};
use crate::request::{parse, Command, Now, Request};
use crate::stats;
use crate::window::{self, expiry_after, Verdict};

/// SWL.CHECK key window_ms limit now_ms [COST n] [WINDOW window_ms limit]... [PENALIZE]
///
/// Trims the log to the widest window, admits the request if every window
/// has room for `cost` more units, records it as `cost` entries, and replies
/// `[allowed, limit, remaining, retry_after_ms, reset_after_ms]`.
pub fn check(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    let outcome = guarded(|| {
        let request = parse(Command::Check, &args)?;
        let clock = server_time_ms();
        let now = moment(&request, clock);
        let mut key = ZsetKey::open(ctx, &args[1], Access::Write)?;
        let reply = window::check(
            &mut key,
            &request.windows,
            now,
            request.cost,
            request.penalize,
        );
        // The key lives at least until its newest entry leaves the window,
        // on the server's clock. Checks in the same millisecond on a busy
        // key compute the same expiry: setting and propagating it again
        // would change nothing.
        let current = key.expire_at();
        let at = expiry_after(
            reply.allowed,
            current,
            (clock as i64).saturating_add(reply.reset_after_ms),
        );
        if current != Some(at) {
            key.set_expire_at(at);
        }
        Ok(reply)
    });
    if let Ok(reply) = &outcome {
        stats::count_check(reply.allowed);
    }
    respond(ctx, outcome)
}

/// SWL.PEEK key window_ms limit now_ms [COST n] [WINDOW window_ms limit]...
///
/// The reply SWL.CHECK would give now with the same arguments, without
/// changing anything: entries outside the window are ignored, not removed.
pub fn peek(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    let outcome = guarded(|| {
        let request = parse(Command::Peek, &args)?;
        let now = moment(&request, server_time_ms());
        let key = ZsetKey::open(ctx, &args[1], Access::Read)?;
        Ok(window::peek(&key, &request.windows, now, request.cost))
    });
    if outcome.is_ok() {
        stats::count_peek();
    }
    respond(ctx, outcome)
}

fn moment(request: &Request, clock: u64) -> u64 {
    match request.now {
        Now::ServerClock => clock,
        Now::At(ms) => ms,
    }
}

/// Runs a command body so that no panic unwinds into the server: a panic
/// becomes an error reply instead of aborting redis-server.
fn guarded(body: impl FnOnce() -> Result<Verdict, SwlError>) -> Result<Verdict, SwlError> {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or(Err(SwlError::Internal))
}

fn respond(ctx: &Context, outcome: Result<Verdict, SwlError>) -> RedisResult {
    match outcome {
        Ok(verdict) => {
            reply::integers(
                ctx,
                &[
                    i64::from(verdict.allowed),
                    verdict.limit as i64,
                    verdict.remaining as i64,
                    verdict.retry_after_ms,
                    verdict.reset_after_ms,
                ],
            );
            Ok(RedisValue::NoReply)
        }
        Err(error) => {
            stats::count_error();
            Err(match error {
                SwlError::WrongArity => RedisError::WrongArity,
                other => RedisError::String(other.to_string()),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_an_internal_error() {
        let outcome = guarded(|| panic!("a bug"));
        assert_eq!(outcome, Err(SwlError::Internal));
        assert_eq!(
            SwlError::Internal.to_string(),
            "ERR internal error in the swl module"
        );
    }
}
