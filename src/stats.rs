//! Counters since the module was loaded, shown by `INFO swl`.

use std::sync::atomic::{AtomicU64, Ordering};

use redis_module::{InfoContext, RedisResult};
use redis_module_macros::info_command_handler;

static CHECKS: AtomicU64 = AtomicU64::new(0);
static ADMITTED: AtomicU64 = AtomicU64::new(0);
static DENIED: AtomicU64 = AtomicU64::new(0);
static PEEKS: AtomicU64 = AtomicU64::new(0);
static REFUNDS: AtomicU64 = AtomicU64::new(0);
static ERRORS: AtomicU64 = AtomicU64::new(0);

/// A SWL.CHECK that replied with a verdict.
pub fn count_check(allowed: bool) {
    CHECKS.fetch_add(1, Ordering::Relaxed);
    let outcome = if allowed { &ADMITTED } else { &DENIED };
    outcome.fetch_add(1, Ordering::Relaxed);
}

/// A SWL.PEEK that replied with a verdict.
pub fn count_peek() {
    PEEKS.fetch_add(1, Ordering::Relaxed);
}

/// A SWL.REFUND that replied with a verdict.
pub fn count_refund() {
    REFUNDS.fetch_add(1, Ordering::Relaxed);
}

/// Any command replying with an error.
pub fn count_error() {
    ERRORS.fetch_add(1, Ordering::Relaxed);
}

/// The `swl` INFO section (`INFO swl`, `INFO modules`, `INFO everything`);
/// Redis prefixes each field with `swl_`.
#[info_command_handler]
fn info(ctx: &InfoContext, _for_crash_report: bool) -> RedisResult<()> {
    let read = |counter: &AtomicU64| counter.load(Ordering::Relaxed) as i64;
    ctx.builder()
        .add_section("")
        .field("checks", read(&CHECKS))?
        .field("admitted", read(&ADMITTED))?
        .field("denied", read(&DENIED))?
        .field("peeks", read(&PEEKS))?
        .field("refunds", read(&REFUNDS))?
        .field("errors", read(&ERRORS))?
        .build_section()?
        .build_info()?;
    Ok(())
}
