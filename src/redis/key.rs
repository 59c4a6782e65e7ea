//! An open key, whatever it holds: the handle (closed on drop), its expiry,
//! and the bookkeeping every write shares. A change is announced with the
//! keyspace event of the command it is propagated as, and the key is
//! signalled to WATCH and client-side caching once, on drop, only if it
//! changed.

use std::cell::Cell;
use std::ffi::CStr;
use std::os::raw::c_int;
use std::ptr;

use redis_module::{raw, Context, RedisString};

/// Whether a key is opened to be changed or only looked at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
}

pub struct OpenKey {
    pub ctx: *mut raw::RedisModuleCtx,
    pub name: *mut raw::RedisModuleString,
    pub ptr: *mut raw::RedisModuleKey,
    mode: c_int,
    /// Whether this call changed the key: signalled once, on drop.
    changed: Cell<bool>,
}

impl OpenKey {
    pub fn open(ctx: &Context, name: &RedisString, access: Access) -> OpenKey {
        let mode = match access {
            Access::Read => raw::REDISMODULE_READ,
            Access::Write => raw::REDISMODULE_READ | raw::REDISMODULE_WRITE,
        };
        let mut key = OpenKey {
            ctx: ctx.ctx,
            name: name.inner,
            ptr: ptr::null_mut(),
            mode: mode as c_int,
            changed: Cell::new(false),
        };
        key.reopen();
        key
    }

    /// (Re)opens the handle, closing any handle held before.
    pub fn reopen(&mut self) {
        self.close();
        // SAFETY: ctx and name are live for the whole command call; the
        // handle is owned here and closed exactly once.
        self.ptr = unsafe {
            raw::RedisModule_OpenKey
                .map_or(ptr::null_mut(), |open| open(self.ctx, self.name, self.mode))
        }
        .cast();
    }

    pub fn close(&mut self) {
        if !self.ptr.is_null() {
            // SAFETY: the handle came from OpenKey and is closed only here.
            unsafe { raw::RedisModule_CloseKey.map(|f| f(self.ptr)) };
            self.ptr = ptr::null_mut();
        }
    }

    pub fn key_type(&self) -> raw::KeyType {
        if self.ptr.is_null() {
            return raw::KeyType::Empty;
        }
        // SAFETY: a live handle from OpenKey.
        raw::KeyType::from(unsafe { raw::RedisModule_KeyType.map_or(0, |f| f(self.ptr)) })
    }

    /// Elements of a sorted set, bytes of a string; 0 for no key.
    pub fn value_length(&self) -> usize {
        if self.ptr.is_null() {
            return 0;
        }
        // SAFETY: a live handle; an empty key has length 0.
        unsafe { raw::RedisModule_ValueLength.map_or(0, |f| f(self.ptr)) }
    }

    /// Records that the key changed, with the keyspace event of the command
    /// that makes the same change (class: REDISMODULE_NOTIFY_*).
    pub fn changed(&self, class: c_int, event: &CStr) {
        self.changed.set(true);
        // SAFETY: ctx and name are live for the call; the event is a
        // NUL-terminated literal.
        unsafe {
            raw::RedisModule_NotifyKeyspaceEvent
                .map(|f| f(self.ctx, class, event.as_ptr(), self.name));
        }
    }

    /// Records a change made by a command run through RM_Call, which
    /// emitted its own events.
    pub fn changed_by_command(&self) {
        self.changed.set(true);
    }

    /// The key's absolute expiry in Unix milliseconds, if it has one.
    pub fn expire_at(&self) -> Option<i64> {
        if self.ptr.is_null() {
            return None;
        }
        // SAFETY: a live handle.
        let at = unsafe { raw::RedisModule_GetAbsExpire.map_or(-1, |f| f(self.ptr)) };
        (at != raw::REDISMODULE_NO_EXPIRE as i64).then_some(at)
    }

    /// Sets an absolute expiry on this server only: where a rewrite of the
    /// value dropped it, and the propagated command kept it (KEEPTTL).
    pub fn restore_expire_at(&self, at_ms: i64) {
        // SAFETY: a live handle opened for writing.
        unsafe { raw::RedisModule_SetAbsExpire.map(|f| f(self.ptr, at_ms)) };
    }

    /// Sets an absolute expiry and propagates it as PEXPIREAT, so replicas
    /// and the AOF expire the key at the same instant, not a drifting TTL.
    pub fn set_expire_at(&self, at_ms: i64) {
        if self.key_type() == raw::KeyType::Empty {
            return;
        }
        self.restore_expire_at(at_ms);
        self.expire_at_changed(at_ms);
    }

    /// Propagates an expiry already set here as PEXPIREAT.
    pub fn expire_at_changed(&self, at_ms: i64) {
        // SAFETY: the format "sl" matches the key string and a long long.
        unsafe {
            if let Some(replicate) = raw::RedisModule_Replicate {
                replicate(
                    self.ctx,
                    c"PEXPIREAT".as_ptr(),
                    c"sl".as_ptr(),
                    self.name,
                    at_ms as libc::c_longlong,
                );
            }
        }
        self.changed(raw::REDISMODULE_NOTIFY_GENERIC, c"expire");
    }

    /// Removes the key, freeing a large value off the main thread, here
    /// and (as UNLINK) on replicas.
    pub fn unlink(&self) {
        // SAFETY: a live handle opened for writing.
        unsafe { raw::RedisModule_UnlinkKey.map(|f| f(self.ptr)) };
        self.unlinked();
    }

    /// Propagates the removal of a key already unlinked here.
    pub fn unlinked(&self) {
        // SAFETY: the format "s" matches the one key string.
        unsafe {
            if let Some(replicate) = raw::RedisModule_Replicate {
                replicate(self.ctx, c"UNLINK".as_ptr(), c"s".as_ptr(), self.name);
            }
        }
        self.changed(raw::REDISMODULE_NOTIFY_GENERIC, c"del");
    }
}

impl Drop for OpenKey {
    fn drop(&mut self) {
        self.close();
        if self.changed.get() {
            // SAFETY: ctx and name are live for the whole command call.
            unsafe { raw::RedisModule_SignalModifiedKey.map(|f| f(self.ctx, self.name)) };
        }
    }
}
