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

use crate::error::SwlError;
use crate::format::Version;
use crate::window::LogWriter;
use compact::CompactKey;
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
}

/// A log key, opened once per call as the encoding it holds.
pub enum LogKey {
    Zset(ZsetKey),
    Compact(CompactKey),
}

/// Opens the log at `name`: a sorted set, a compact string, or (no key)
/// whichever `swl.encoding` says new logs are. Anything else is WRONGTYPE.
pub fn open_log(ctx: &Context, name: &RedisString, access: Access) -> Result<LogKey, SwlError> {
    let key = OpenKey::open(ctx, name, access);
    match key.key_type() {
        raw::KeyType::ZSet => Ok(LogKey::Zset(ZsetKey::new(key))),
        raw::KeyType::String => CompactKey::new(key, new_version()).map(LogKey::Compact),
        raw::KeyType::Empty => match encoding() {
            Encoding::zset => Ok(LogKey::Zset(ZsetKey::new(key))),
            Encoding::compact | Encoding::compact1 => {
                CompactKey::new(key, new_version()).map(LogKey::Compact)
            }
        },
        _ => Err(SwlError::WrongType),
    }
}

fn encoding() -> Encoding {
    ENCODING
        .lock()
        .map_or(Encoding::compact, |setting| *setting)
}

/// The format version of the compact logs the setting creates: version 1
/// where `compact1` keeps writing what 0.3 reads.
fn new_version() -> Version {
    match encoding() {
        Encoding::compact1 => Version::Slots,
        _ => Version::Packed,
    }
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
