//! COMMAND DOCS for every command, through
//! `RedisModule_SetCommandInfo` (Redis 7.0+). Looked up at load time and
//! skipped where the server lacks it, so the module loads everywhere. The
//! one table of commands here also says which write, for the ACL categories.

use std::ffi::CStr;
use std::os::raw::c_int;
use std::ptr;

use redis_module::{raw, Context, RedisString, Status};

type Arg = raw::RedisModuleCommandArg;

const INFO_VERSION: raw::RedisModuleCommandInfoVersion = raw::RedisModuleCommandInfoVersion {
    version: 1,
    sizeof_historyentry: std::mem::size_of::<raw::RedisModuleCommandHistoryEntry>(),
    sizeof_keyspec: std::mem::size_of::<raw::RedisModuleCommandKeySpec>(),
    sizeof_arg: std::mem::size_of::<raw::RedisModuleCommandArg>(),
};

/// The arguments a command takes after its key.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Args {
    /// `window_ms limit now_ms [COST n] [WINDOW window_ms limit]...`
    Windows,
    /// The same, then `[PENALIZE | FORCE]`.
    WindowsAndOverLimit,
    /// The same, then `[OLDEST]`.
    WindowsAndOldest,
    /// Nothing after the key.
    None,
}

/// What COMMAND DOCS says of one command. Every command is described here,
/// in one table, so none lacks what its siblings have.
struct Doc {
    name: &'static CStr,
    summary: &'static CStr,
    complexity: &'static CStr,
    /// The key spec's flags (REDISMODULE_CMD_KEY_*).
    key_flags: u32,
    arity: c_int,
    args: Args,
    /// The module version that added the command.
    since: &'static CStr,
}

// A check both inserts and deletes entries; Redis allows only one of
// INSERT, DELETE and UPDATE, and UPDATE is the one for "some of each".
const CHECK_FLAGS: u32 =
    raw::REDISMODULE_CMD_KEY_RW | raw::REDISMODULE_CMD_KEY_ACCESS | raw::REDISMODULE_CMD_KEY_UPDATE;
const REFUND_FLAGS: u32 =
    raw::REDISMODULE_CMD_KEY_RW | raw::REDISMODULE_CMD_KEY_ACCESS | raw::REDISMODULE_CMD_KEY_DELETE;
const READ_FLAGS: u32 = raw::REDISMODULE_CMD_KEY_RO | raw::REDISMODULE_CMD_KEY_ACCESS;

/// Every command the module registers, as COMMAND DOCS and the ACL
/// categories describe it.
const COMMANDS: [Doc; 4] = [
    Doc {
        name: c"swl.check",
        summary: c"Checks a request against sliding-window-log rate limits and records it if admitted.",
        complexity: c"O(W log(N) + M + C): W windows, N entries in the log, M entries trimmed, C the cost recorded",
        key_flags: CHECK_FLAGS,
        arity: -5,
        args: Args::WindowsAndOverLimit,
        since: c"0.1.0",
    },
    Doc {
        name: c"swl.peek",
        summary: c"Tells what SWL.CHECK would reply now, without changing anything.",
        complexity: c"O(W log(N)): W windows, N entries in the log",
        key_flags: READ_FLAGS,
        arity: -5,
        args: Args::WindowsAndOldest,
        since: c"0.1.0",
    },
    Doc {
        name: c"swl.refund",
        summary: c"Gives back up to COST of the newest recorded units and replies what SWL.PEEK replies then.",
        complexity: c"O(W log(N) + M + C): W windows, N entries in the log, M entries trimmed, C the cost given back",
        key_flags: REFUND_FLAGS,
        arity: -5,
        args: Args::Windows,
        since: c"0.2.0",
    },
    Doc {
        name: c"swl.entries",
        summary: c"Lists the times of a log's entries, oldest first.",
        complexity: c"O(N): N entries in the log",
        key_flags: READ_FLAGS,
        arity: 2,
        args: Args::None,
        since: c"0.1.0",
    },
];

/// Each command's name and whether it writes its key, for the ACL
/// categories (`write` or `read`).
pub fn commands() -> impl Iterator<Item = (&'static CStr, bool)> {
    COMMANDS
        .iter()
        .map(|doc| (doc.name, doc.key_flags & raw::REDISMODULE_CMD_KEY_RW != 0))
}

/// Runs at load, after the commands are created. A failure is logged and
/// never stops the module from loading.
pub fn register_command_docs(ctx: &Context, _args: &[RedisString]) -> Status {
    for doc in &COMMANDS {
        if let Err(why) = set_info(ctx, doc) {
            ctx.log_warning(&format!(
                "no COMMAND DOCS for {}: {why}",
                doc.name.to_string_lossy()
            ));
        }
    }
    Status::Ok
}

fn set_info(ctx: &Context, doc: &Doc) -> Result<(), &'static str> {
    // SAFETY: the API table is filled in once at load, before this runs,
    // and never written again.
    let api = unsafe { (raw::RedisModule_GetCommand, raw::RedisModule_SetCommandInfo) };
    let (Some(get_command), Some(set_command_info)) = api else {
        return Err("this server has no RedisModule_SetCommandInfo");
    };
    // SAFETY: ctx is the load context; the name is a NUL-terminated literal.
    let command = unsafe { get_command(ctx.ctx, doc.name.as_ptr()) };
    if command.is_null() {
        return Err("the command is not registered");
    }

    let mut key_specs = [key_spec(doc.key_flags), end_of_key_specs()];
    let mut now_choices = [
        integer(c"now_ms"),
        Arg {
            summary: c"the server's clock".as_ptr(),
            ..pure_token(c"server_clock", c"*")
        },
        end_of_args(),
    ];
    let mut window_parts = [integer(c"window_ms"), integer(c"limit"), end_of_args()];
    let mut over_limit_choices = [
        Arg {
            summary: c"record a denied request too, capping the log to the largest limit".as_ptr(),
            ..pure_token(c"penalize", c"PENALIZE")
        },
        Arg {
            summary: c"record the request whether or not it fits, with no cap".as_ptr(),
            since: c"0.5.0".as_ptr(),
            ..pure_token(c"force", c"FORCE")
        },
        end_of_args(),
    ];
    let optional = raw::REDISMODULE_CMD_ARG_OPTIONAL as c_int;
    let mut args = vec![Arg {
        key_spec_index: 0,
        ..arg(
            c"key",
            raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_KEY,
        )
    }];
    if doc.args != Args::None {
        args.extend([
            integer(c"window_ms"),
            integer(c"limit"),
            Arg {
                subargs: now_choices.as_mut_ptr(),
                ..arg(
                    c"now",
                    raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_ONEOF,
                )
            },
            Arg {
                token: c"COST".as_ptr(),
                flags: optional,
                ..integer(c"cost")
            },
            Arg {
                token: c"WINDOW".as_ptr(),
                flags: optional | raw::REDISMODULE_CMD_ARG_MULTIPLE as c_int,
                subargs: window_parts.as_mut_ptr(),
                ..arg(
                    c"window",
                    raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_BLOCK,
                )
            },
        ]);
    }
    if doc.args == Args::WindowsAndOverLimit {
        args.push(Arg {
            flags: optional,
            subargs: over_limit_choices.as_mut_ptr(),
            ..arg(
                c"over_limit",
                raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_ONEOF,
            )
        });
    }
    if doc.args == Args::WindowsAndOldest {
        args.push(Arg {
            flags: optional,
            since: c"0.3.0".as_ptr(),
            ..pure_token(c"oldest", c"OLDEST")
        });
    }
    args.push(end_of_args());

    let info = raw::RedisModuleCommandInfo {
        version: &INFO_VERSION,
        summary: doc.summary.as_ptr(),
        complexity: doc.complexity.as_ptr(),
        since: doc.since.as_ptr(),
        history: ptr::null_mut(),
        tips: ptr::null(),
        arity: doc.arity,
        key_specs: key_specs.as_mut_ptr(),
        args: args.as_mut_ptr(),
    };
    // SAFETY: every pointer in `info` refers to literals or to the arrays
    // above, all alive for this call; Redis copies what it keeps.
    let status = unsafe { set_command_info(command, &info) };
    if status == raw::REDISMODULE_OK as c_int {
        Ok(())
    } else {
        Err("the server rejected the command info")
    }
}

fn integer(name: &'static CStr) -> Arg {
    arg(
        name,
        raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_INTEGER,
    )
}

fn pure_token(name: &'static CStr, token: &'static CStr) -> Arg {
    Arg {
        token: token.as_ptr(),
        ..arg(
            name,
            raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_PURE_TOKEN,
        )
    }
}

fn arg(name: &'static CStr, type_: raw::RedisModuleCommandArgType) -> Arg {
    Arg {
        name: name.as_ptr(),
        type_,
        key_spec_index: -1,
        token: ptr::null(),
        summary: ptr::null(),
        since: ptr::null(),
        flags: 0,
        deprecated_since: ptr::null(),
        subargs: ptr::null_mut(),
        display_text: ptr::null(),
    }
}

/// Argument arrays end with an all-zero entry.
fn end_of_args() -> Arg {
    Arg {
        name: ptr::null(),
        key_spec_index: 0,
        ..arg(c"", 0)
    }
}

/// The one key, at argument 1.
fn key_spec(flags: u32) -> raw::RedisModuleCommandKeySpec {
    raw::RedisModuleCommandKeySpec {
        notes: ptr::null(),
        flags: u64::from(flags),
        begin_search_type: raw::RedisModuleKeySpecBeginSearchType_REDISMODULE_KSPEC_BS_INDEX,
        bs: raw::RedisModuleCommandKeySpec__bindgen_ty_1 {
            index: raw::RedisModuleCommandKeySpec__bindgen_ty_1__bindgen_ty_1 { pos: 1 },
        },
        find_keys_type: raw::RedisModuleKeySpecFindKeysType_REDISMODULE_KSPEC_FK_RANGE,
        fk: raw::RedisModuleCommandKeySpec__bindgen_ty_2 {
            range: raw::RedisModuleCommandKeySpec__bindgen_ty_2__bindgen_ty_1 {
                lastkey: 0,
                keystep: 1,
                limit: 0,
            },
        },
    }
}

/// Key-spec arrays end with an entry whose begin-search type is 0.
fn end_of_key_specs() -> raw::RedisModuleCommandKeySpec {
    raw::RedisModuleCommandKeySpec {
        flags: 0,
        begin_search_type: 0,
        find_keys_type: 0,
        ..key_spec(0)
    }
}
