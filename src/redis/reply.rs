//! Replies written straight to the client, without building a value tree
//! first: a check replies on every call, so this is the hot path.

use redis_module::{raw, Context};

/// An array of integers.
pub fn integers(ctx: &Context, values: &[i64]) {
    // SAFETY: ctx is the live context of the command being answered; the
    // array length matches the number of elements written after it.
    unsafe {
        if let (Some(array), Some(integer)) = (
            raw::RedisModule_ReplyWithArray,
            raw::RedisModule_ReplyWithLongLong,
        ) {
            array(ctx.ctx, values.len() as libc::c_long);
            for &value in values {
                integer(ctx.ctx, value);
            }
        }
    }
}

/// An array of times: integers where whole (and within i64), doubles
/// otherwise, as ZRANGE shows a score (a bulk string in RESP2).
pub fn times(ctx: &Context, values: &[f64]) {
    // SAFETY: as in `integers`.
    unsafe {
        if let (Some(array), Some(integer), Some(double)) = (
            raw::RedisModule_ReplyWithArray,
            raw::RedisModule_ReplyWithLongLong,
            raw::RedisModule_ReplyWithDouble,
        ) {
            array(ctx.ctx, values.len() as libc::c_long);
            for &value in values {
                let whole = value.fract() == 0.0 && value.abs() < 9.2e18;
                if whole {
                    integer(ctx.ctx, value as i64);
                } else {
                    double(ctx.ctx, value);
                }
            }
        }
    }
}
