//! Everything that talks to Redis's module API, and so all of the module's
//! `unsafe`: keys (`key`), the log in each encoding (`zset`, `compact`),
//! command docs (`docs`), replies (`reply`), the encoding setting and the
//! server clock.

pub mod compact;
pub mod docs;
pub mod key;
pub mod reply;
pub mod zset;

use std::os::raw::c_int;
use std::sync::Mutex;

use redis_module::{enum_configuration, raw, Context, RedisString, Status};

use crate::codec::{Codec, Packed, Slots};
use crate::error::SwlError;
use crate::window::LogWriter;
use compact::{CompactKey, Renewal};
use key::{Access, OpenKey};
use zset::ZsetKey;

enum_configuration! {
    /// How new logs are stored (`swl.encoding`); existing keys keep theirs.
    #[allow(non_camel_case_types)]
    #[derive(Debug, Copy, PartialEq, Eq)]
    pub enum Encoding {
        zset = 0,
        compact = 1,
        compact1 = 2,
    }
}

/// `swl.encoding`, set at load or with CONFIG SET.
pub static ENCODING: Mutex<Encoding> = Mutex::new(Encoding::compact);

/// What a command needs of an opened log beyond reading and changing it.
pub trait StoredLog: LogWriter + AsRef<OpenKey> {
    /// The key's absolute expiry in Unix milliseconds, if it has one.
    fn expire_at(&self) -> Option<i64> {
        self.as_ref().expire_at()
    }
    /// Ends the call: sets the expiry where it changes (`expire_at`) and
    /// makes sure replicas and the AOF get everything the call changed; or,
    /// where a change found the log damaged, fails with the log as it was.
    fn finish(&mut self, expire_at: Option<i64>) -> Result<(), SwlError>;
    /// Every entry, oldest first, in milliseconds: SWL.ENTRIES.
    fn times(&self) -> Result<Vec<f64>, SwlError>;
}

/// A log key, opened once per call as the encoding and format it holds.
pub enum LogKey {
    Zset(ZsetKey),
    Slots(CompactKey<Slots>),
    Packed(CompactKey<Packed>),
}

/// Runs `$run` on the opened log `$key` (a `LogKey`), bound to `$log`,
/// whatever it holds: each command is written once, for any `StoredLog`.
macro_rules! with_log {
    ($key:expr, $log:pat => $run:expr) => {
        match $key {
            $crate::redis::LogKey::Zset($log) => $run,
            $crate::redis::LogKey::Slots($log) => $run,
            $crate::redis::LogKey::Packed($log) => $run,
        }
    };
}
pub(crate) use with_log;

/// Opens the log at `name`: a sorted set, a compact string of the format
/// version its version byte names, or (no key) whichever `swl.encoding`
/// says new logs are. Anything else is WRONGTYPE, as is a string that is
/// not a compact log of its version.
pub fn open_log(ctx: &Context, name: &RedisString, access: Access) -> Result<LogKey, SwlError> {
    let key = OpenKey::open(ctx, name, access);
    let new_logs = match encoding() {
        Encoding::zset => None,
        Encoding::compact => Some(Packed::VERSION),
        Encoding::compact1 => Some(Slots::VERSION),
    };
    let version = match key.key_type() {
        raw::KeyType::ZSet => return Ok(LogKey::Zset(ZsetKey::new(key))),
        raw::KeyType::String => compact::version_in(&key),
        raw::KeyType::Empty => match new_logs {
            None => return Ok(LogKey::Zset(ZsetKey::new(key))),
            version => version,
        },
        _ => return Err(SwlError::WrongType),
    };
    // A log that empties and is recorded into again in one call is a new
    // log, in the version the setting names (version 2 under `zset`, as
    // under `compact`).
    let renewal = |held: u8| -> Option<Renewal> {
        match new_logs.unwrap_or(Packed::VERSION) {
            new if new == held => None,
            Slots::VERSION => Some(Slots::record),
            _ => Some(Packed::record),
        }
    };
    match version {
        Some(Packed::VERSION) => CompactKey::new(key, renewal(Packed::VERSION)).map(LogKey::Packed),
        // Version 1 parses every other string, and refuses what is not one.
        _ => CompactKey::new(key, renewal(Slots::VERSION)).map(LogKey::Slots),
    }
}

fn encoding() -> Encoding {
    ENCODING
        .lock()
        .map_or(Encoding::compact, |setting| *setting)
}

/// The server's clock: Unix time in milliseconds.
pub fn server_time_ms() -> u64 {
    // SAFETY: the module is initialised before any command runs, so the
    // function pointer is set; it only reads the clock.
    let now = unsafe { raw::RedisModule_Milliseconds.map_or(0, |clock| clock()) };
    u64::try_from(now).unwrap_or(0)
}

/// Runs at load: refuses arguments, sets module options, then COMMAND DOCS.
pub fn init(ctx: &Context, args: &[RedisString]) -> Status {
    // Settings are module configs (swl.encoding), not arguments: an
    // argument is a mistake to report, not to ignore.
    if let Some(first) = args.first() {
        ctx.log_warning(&format!(
            "unknown module argument '{}': the module takes no arguments; \
             set swl.encoding with --swl.encoding, in redis.conf, with \
             MODULE LOADEX ... CONFIG swl.encoding, or with CONFIG SET",
            first.to_string_lossy()
        ));
        return Status::Err;
    }
    // A key is signalled to WATCH and client-side caching when a call
    // changed it (key.rs does so), not whenever one is opened for writing:
    // a denial that changes nothing must not abort a WATCHed transaction.
    // SAFETY: the load context is live; the option is a plain flag.
    if let Some(set_options) = unsafe { raw::RedisModule_SetModuleOptions } {
        let option = raw::REDISMODULE_OPTION_NO_IMPLICIT_SIGNAL_MODIFIED as c_int;
        // SAFETY: as above.
        unsafe { set_options(ctx.ctx, option) };
    }
    set_acl_categories(ctx);
    docs::register_command_docs(ctx, args)
}

/// Puts the commands that write their key (SWL.CHECK, SWL.REFUND, as
/// docs.rs describes them) in the `write` ACL category and the read-only
/// ones in `read`, so `+@write` and `+@read` grant them, where the server has
/// RedisModule_SetCommandACLCategories (7.2 and later); and all of them in a
/// category of their own, `swl` (`+@swl`), where it can add one (7.4 and
/// later). Redis 7.0 has neither: there the commands are granted by name,
/// and the module still loads.
fn set_acl_categories(ctx: &Context) {
    // SAFETY: the API table is filled in at load, before this runs.
    let api = unsafe {
        (
            raw::RedisModule_GetCommand,
            raw::RedisModule_SetCommandACLCategories,
        )
    };
    let (Some(get_command), Some(set_categories)) = api else {
        return;
    };
    // SAFETY: called during load, as the API requires; the name is a
    // NUL-terminated literal.
    let own = unsafe { raw::RedisModule_AddACLCategory }.is_some_and(
        |add| unsafe { add(ctx.ctx, c"swl".as_ptr()) } == raw::REDISMODULE_OK as c_int,
    );
    let (write, read) = if own {
        (c"write swl", c"read swl")
    } else {
        (c"write", c"read")
    };
    for (name, writes) in docs::commands() {
        let categories = if writes { write } else { read };
        // SAFETY: the load context is live; both are NUL-terminated.
        let failed = unsafe {
            let command = get_command(ctx.ctx, name.as_ptr());
            command.is_null()
                || set_categories(command, categories.as_ptr()) != raw::REDISMODULE_OK as c_int
        };
        if failed {
            ctx.log_warning(&format!(
                "could not put {} in the ACL category {}",
                name.to_string_lossy(),
                categories.to_string_lossy()
            ));
        }
    }
}
