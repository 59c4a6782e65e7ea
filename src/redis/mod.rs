//! Everything that talks to Redis's module API, and so all of the module's
//! `unsafe`: sorted-set keys (`zset`), command docs (`docs`), replies
//! (`reply`) and the server clock.

pub mod docs;
pub mod reply;
pub mod zset;

use std::os::raw::c_int;

use redis_module::{raw, Context, RedisString, Status};

/// The server's clock: Unix time in milliseconds.
pub fn server_time_ms() -> u64 {
    // SAFETY: the module is initialised before any command runs, so the
    // function pointer is set; it only reads the clock.
    let now = unsafe { raw::RedisModule_Milliseconds.map_or(0, |clock| clock()) };
    u64::try_from(now).unwrap_or(0)
}

/// Runs at load: module options, then COMMAND DOCS.
pub fn init(ctx: &Context, args: &[RedisString]) -> Status {
    // A key is signalled to WATCH and client-side caching when a call
    // changed it (zset.rs does so), not whenever one is opened for writing:
    // a denial that changes nothing must not abort a WATCHed transaction.
    // SAFETY: the load context is live; the option is a plain flag.
    if let Some(set_options) = unsafe { raw::RedisModule_SetModuleOptions } {
        let option = raw::REDISMODULE_OPTION_NO_IMPLICIT_SIGNAL_MODIFIED as c_int;
        // SAFETY: as above.
        unsafe { set_options(ctx.ctx, option) };
    }
    docs::register_command_docs(ctx, args)
}
