//! The commands: parse, open the key, decide, apply, reply.

use std::panic::{catch_unwind, AssertUnwindSafe};

use redis_module::{Context, RedisError, RedisResult, RedisString, RedisValue};

use crate::error::SwlError;
use crate::redis::key::Access;
use crate::redis::{open_log, reply, server_time_ms, with_log, StoredLog};
use crate::request::{parse, Command, Now, Request};
use crate::stats;
use crate::window::{self, expiry_after, OverLimit, ScoreLog, Verdict};

/// SWL.CHECK key window_ms limit now_ms [COST n] [WINDOW window_ms limit]... [PENALIZE | FORCE]
///
/// Trims the log to the widest window, admits the request if every window
/// has room for `cost` more units, records it as `cost` entries (with
/// FORCE also where it does not fit), and replies
/// `[allowed, limit, remaining, retry_after_ms, reset_after_ms, window_ms]`.
pub fn check(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    let outcome = guarded(|| {
        let request = parse(Command::Check, &args)?;
        let clock = server_time_ms();
        with_log!(open_log(ctx, &args[1], Access::Write)?, mut key => check_log(&mut key, &request, clock))
    });
    if let Ok(reply) = &outcome {
        stats::count_check(reply.allowed);
    }
    respond(ctx, outcome)
}

fn check_log(key: &mut impl StoredLog, request: &Request, clock: u64) -> Result<Verdict, SwlError> {
    let now = moment(request, clock);
    let expiry = key.expire_at();
    let reply = window::check(key, &request.windows, now, request.cost, request.over_limit);
    // A forced request is recorded whether or not it fit: its entries set
    // the expiry as an admit's do.
    let recorded = reply.allowed || request.over_limit == OverLimit::Force;
    finish(key, expiry, recorded, clock, reply.reset_after_ms)?;
    Ok(reply)
}

/// SWL.REFUND key window_ms limit now_ms [COST n] [WINDOW window_ms limit]...
///
/// Trims the log as SWL.CHECK would, gives back up to `cost` of its newest
/// entries, and replies what SWL.PEEK with the same arguments replies now.
pub fn refund(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    let outcome = guarded(|| {
        let request = parse(Command::Refund, &args)?;
        let clock = server_time_ms();
        with_log!(open_log(ctx, &args[1], Access::Write)?, mut key => refund_log(&mut key, &request, clock))
    });
    if outcome.is_ok() {
        stats::count_refund();
    }
    respond(ctx, outcome)
}

fn refund_log(
    key: &mut impl StoredLog,
    request: &Request,
    clock: u64,
) -> Result<Verdict, SwlError> {
    let now = moment(request, clock);
    let reply = window::refund(key, &request.windows, now, request.cost);
    // As after an admitted check: the key goes when its newest entry
    // leaves the window (the reply's reset counts a request not recorded).
    let lives = window::newest_leaves_after(key, &request.windows, now);
    finish(key, None, true, clock, lives)?;
    Ok(reply)
}

/// Ends a call that may have changed the log: the key lives at least until
/// its newest entry leaves the window (`lives` ms), on the server's clock;
/// `settled` (a check that recorded its request, a refund) sets exactly
/// that, otherwise the expiry the key had when the call began (`before`)
/// is only lengthened, also where the call emptied the log and wrote it
/// anew.
/// Calls in the same millisecond on a busy key compute the same expiry:
/// setting and propagating it again would change nothing.
fn finish(
    key: &mut impl StoredLog,
    before: Option<i64>,
    settled: bool,
    clock: u64,
    lives: i64,
) -> Result<(), SwlError> {
    let target = (clock as i64).saturating_add(lives);
    let at = expiry_after(settled, before, target);
    key.finish((key.expire_at() != Some(at)).then_some(at))
}

/// SWL.PEEK key window_ms limit now_ms [COST n] [WINDOW window_ms limit]... [OLDEST]
///
/// The reply SWL.CHECK would give now with the same arguments, without
/// changing anything: entries outside the window are ignored, not removed.
/// OLDEST adds a seventh integer: when the oldest entry in the reply's
/// window leaves it.
pub fn peek(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    let outcome = guarded(|| {
        let request = parse(Command::Peek, &args)?;
        let now = moment(&request, server_time_ms());
        Ok(with_log!(open_log(ctx, &args[1], Access::Read)?, key => peek_log(&key, &request, now)))
    });
    if outcome.is_ok() {
        stats::count_peek();
    }
    respond_with(ctx, outcome)
}

/// The verdict, and with OLDEST when the oldest entry in its window leaves.
fn peek_log(log: &impl ScoreLog, request: &Request, now: u64) -> (Verdict, Option<i64>) {
    let (windows, cost) = (&request.windows, request.cost);
    if request.oldest {
        let (verdict, oldest_after_ms) = window::peek_with_oldest(log, windows, now, cost);
        (verdict, Some(oldest_after_ms))
    } else {
        (window::peek(log, windows, now, cost), None)
    }
}

/// SWL.ENTRIES key
///
/// The log's entries, oldest first, in milliseconds: integers, or as
/// ZRANGE shows them for a score another tool wrote that is not a whole
/// number (fractional, infinite).
pub fn entries(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    let outcome = guarded(|| {
        let [_, name] = args.as_slice() else {
            return Err(SwlError::WrongArity);
        };
        with_log!(open_log(ctx, name, Access::Read)?, key => key.times())
    });
    match outcome {
        Ok(times) => {
            reply::times(ctx, &times);
            Ok(RedisValue::NoReply)
        }
        Err(error) => {
            stats::count_error();
            Err(error_reply(error))
        }
    }
}

fn moment(request: &Request, clock: u64) -> u64 {
    match request.now {
        Now::ServerClock => clock,
        Now::At(ms) => ms,
    }
}

/// Runs a command body so that no panic unwinds into the server: a panic
/// becomes an error reply instead of aborting redis-server.
fn guarded<T>(body: impl FnOnce() -> Result<T, SwlError>) -> Result<T, SwlError> {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or(Err(SwlError::Internal))
}

fn respond(ctx: &Context, outcome: Result<Verdict, SwlError>) -> RedisResult {
    respond_with(ctx, outcome.map(|verdict| (verdict, None)))
}

/// The six integers of a verdict, and a seventh after them where given.
fn respond_with(ctx: &Context, outcome: Result<(Verdict, Option<i64>), SwlError>) -> RedisResult {
    match outcome {
        Ok((verdict, extra)) => {
            let values = [
                i64::from(verdict.allowed),
                verdict.limit as i64,
                verdict.remaining as i64,
                verdict.retry_after_ms,
                verdict.reset_after_ms,
                verdict.window_ms as i64,
                extra.unwrap_or(0),
            ];
            reply::integers(ctx, &values[..if extra.is_some() { 7 } else { 6 }]);
            Ok(RedisValue::NoReply)
        }
        Err(error) => {
            stats::count_error();
            Err(error_reply(error))
        }
    }
}

fn error_reply(error: SwlError) -> RedisError {
    match error {
        SwlError::WrongArity => RedisError::WrongArity,
        other => RedisError::String(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_an_internal_error() {
        let outcome: Result<Verdict, _> = guarded(|| panic!("a bug"));
        assert_eq!(outcome, Err(SwlError::Internal));
        assert_eq!(
            SwlError::Internal.to_string(),
            "ERR internal error in the swl module"
        );
    }
}
