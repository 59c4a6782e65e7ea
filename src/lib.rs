//! redis-swl: an exact, atomic sliding-window-log rate limiter for Redis.
//! This file only assembles the module.

mod codec;
mod commands;
mod error;
mod redis;
mod request;
mod stats;
mod window;

use crate::redis::{init, Encoding, ENCODING};
use redis_module::configuration::ConfigurationFlags;
use redis_module::redis_module;

// Unit tests run without a server, where Redis's allocator does not exist.
#[cfg(not(test))]
type ModuleAllocator = redis_module::alloc::RedisAlloc;
#[cfg(not(test))]
const MODULE_ALLOCATOR: ModuleAllocator = redis_module::alloc::RedisAlloc;
#[cfg(test)]
type ModuleAllocator = std::alloc::System;
#[cfg(test)]
const MODULE_ALLOCATOR: ModuleAllocator = std::alloc::System;

/// The crate's version as MODULE LIST shows it: major*10000 + minor*100 +
/// patch, as other modules encode theirs.
const MODULE_VERSION: i32 = version_number(env!("CARGO_PKG_VERSION"));

const fn version_number(version: &str) -> i32 {
    let bytes = version.as_bytes();
    let (mut parts, mut part, mut i) = ([0i32; 3], 0, 0);
    while i < bytes.len() && part < 3 {
        match bytes[i] {
            b'.' => part += 1,
            digit @ b'0'..=b'9' => parts[part] = parts[part] * 10 + (digit - b'0') as i32,
            _ => break, // a pre-release or build suffix
        }
        i += 1;
    }
    parts[0] * 10000 + parts[1] * 100 + parts[2]
}

redis_module! {
    name: "swl",
    version: MODULE_VERSION,
    allocator: (ModuleAllocator, MODULE_ALLOCATOR),
    data_types: [],
    init: init,
    commands: [
        // ACL categories are set in `init`, where the server has the API.
        ["swl.check", commands::check, "write deny-oom", 1, 1, 1, ""],
        ["swl.peek", commands::peek, "readonly", 1, 1, 1, ""],
        ["swl.refund", commands::refund, "write", 1, 1, 1, ""],
        ["swl.entries", commands::entries, "readonly", 1, 1, 1, ""],
    ],
    // The binding's macro wants every kind of setting listed.
    configurations: [
        i64: [],
        string: [],
        bool: [],
        enum: [
            ["encoding", &ENCODING, Encoding::compact, ConfigurationFlags::DEFAULT, None],
        ],
        module_args_as_configuration: false,
    ]
}

#[cfg(test)]
mod tests {
    use super::version_number;

    #[test]
    fn the_version_is_encoded_as_other_modules_encode_theirs() {
        assert_eq!(version_number("0.2.0"), 200);
        assert_eq!(version_number("1.12.3"), 11203);
        assert_eq!(version_number("2.0.1-rc1"), 20001);
    }
}
