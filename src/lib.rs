//! redis-swl: an exact, atomic sliding-window-log rate limiter for Redis.
//! This file only assembles the module.

mod commands;
mod compact;
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

redis_module! {
    name: "swl",
    version: 1,
    allocator: (ModuleAllocator, MODULE_ALLOCATOR),
    data_types: [],
    init: init,
    commands: [
        // ACL categories are set in `init`, where the server has the API.
        ["swl.check", commands::check, "write deny-oom", 1, 1, 1, ""],
        ["swl.peek", commands::peek, "readonly", 1, 1, 1, ""],
        ["swl.entries", commands::entries, "readonly", 1, 1, 1, ""],
    ],
    // The binding's macro wants every kind of setting listed.
    configurations: [
        i64: [],
        string: [],
        bool: [],
        enum: [
            ["encoding", &ENCODING, Encoding::zset, ConfigurationFlags::DEFAULT, None],
        ],
        module_args_as_configuration: false,
    ]
}
