//! Everything that talks to Redis's module API, and so all of the module's
//! `unsafe`: sorted-set keys (`zset`), command docs (`docs`), replies
//! (`reply`) and the server clock.

pub mod docs;
pub mod reply;
pub mod zset;

use redis_module::raw;

/// The server's clock: Unix time in milliseconds.
pub fn server_time_ms() -> u64 {
    // SAFETY: the module is initialised before any command runs, so the
    // function pointer is set; it only reads the clock.
    let now = unsafe { raw::RedisModule_Milliseconds.map_or(0, |clock| clock()) };
    u64::try_from(now).unwrap_or(0)
}
