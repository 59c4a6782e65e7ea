//! The log as a compact string (the format is `crate::compact`), read and
//! changed in place through RM_StringDMA. Each change is propagated as the
//! plain string command it amounts to: SETRANGE for bytes changed in place,
//! SET ... KEEPTTL for a value written anew, UNLINK for an emptied log. A
//! replica or AOF without the module so ends up with the same bytes.

use std::os::raw::c_int;
use std::ptr;

use redis_module::raw;

use super::key::OpenKey;
use crate::compact::{self, Change, FormatError, Log};
use crate::error::SwlError;
use crate::window::{LogWriter, ScoreLog};

/// A compact-log key (or no key), closed when dropped.
pub struct CompactKey {
    key: OpenKey,
}

impl AsRef<OpenKey> for CompactKey {
    fn as_ref(&self) -> &OpenKey {
        &self.key
    }
}

impl CompactKey {
    /// The log in `key`, which holds a string or nothing. A string that is
    /// not a well-formed compact log is WRONGTYPE, and is left untouched:
    /// one too short to be a log is refused before it is read in place
    /// (which would convert an embedded or integer string).
    pub fn new(key: OpenKey) -> Result<Self, SwlError> {
        let log = CompactKey { key };
        if log.key.key_type() == raw::KeyType::String
            && (log.key.value_length() < compact::MIN_LEN || Log::parse(log.bytes()).is_err())
        {
            return Err(SwlError::WrongType);
        }
        Ok(log)
    }

    /// The value, read in place; empty for no key.
    fn bytes(&self) -> &[u8] {
        self.dma(raw::REDISMODULE_READ)
            // SAFETY: the pointer and length come from StringDMA on the live
            // key and stay valid until the value is next changed, which
            // takes `&mut self`.
            .map_or(&[], |(ptr, len)| unsafe {
                std::slice::from_raw_parts(ptr, len)
            })
    }

    /// The value, to change in place; None for no key.
    fn bytes_mut(&mut self) -> Option<&mut [u8]> {
        self.dma(raw::REDISMODULE_WRITE)
            // SAFETY: as in `bytes`, and the borrow of `self` is exclusive.
            .map(|(ptr, len)| unsafe { std::slice::from_raw_parts_mut(ptr, len) })
    }

    fn dma(&self, mode: u32) -> Option<(*mut u8, usize)> {
        if self.key.key_type() != raw::KeyType::String {
            return None;
        }
        let mut len: libc::size_t = 0;
        // SAFETY: a live handle holding a string (writable when asked for
        // writing: the key was opened so).
        let ptr = unsafe {
            raw::RedisModule_StringDMA.map_or(ptr::null_mut(), |f| {
                f(self.key.ptr, &mut len, mode as c_int)
            })
        };
        (!ptr.is_null()).then_some((ptr.cast(), len))
    }

    fn log(&self) -> Option<Log<'_>> {
        Log::parse(self.bytes()).ok()
    }

    /// Every entry, oldest first, each slot checked: SWL.ENTRIES.
    pub fn entries(&self) -> Result<Vec<u64>, SwlError> {
        if self.key.key_type() == raw::KeyType::Empty {
            return Ok(Vec::new());
        }
        Log::parse(self.bytes())
            .and_then(|log| log.entries())
            .map_err(|_| SwlError::WrongType)
    }

    /// Makes a change reach the stored value, replicas and the AOF. The
    /// value was validated on open and every change keeps it well formed,
    /// so a format error here cannot happen; it would change nothing.
    fn apply(&mut self, change: Result<Change, FormatError>) {
        match change {
            Ok(Change::Nothing) | Err(_) => {}
            Ok(Change::InPlace(range)) => self.replicate_setrange(range),
            Ok(Change::Replace(value)) => self.replace(&value),
            Ok(Change::Emptied) => self.key.unlink(),
        }
    }

    fn replicate_setrange(&self, range: std::ops::Range<usize>) {
        let Some(bytes) = self.bytes().get(range.clone()) else {
            return;
        };
        // SAFETY: the format matches the arguments: key string, long long,
        // a buffer and its length.
        unsafe {
            if let Some(replicate) = raw::RedisModule_Replicate {
                replicate(
                    self.key.ctx,
                    c"SETRANGE".as_ptr(),
                    c"slb".as_ptr(),
                    self.key.name,
                    range.start as libc::c_longlong,
                    bytes.as_ptr(),
                    bytes.len() as libc::size_t,
                );
            }
        }
        self.key
            .changed(raw::REDISMODULE_NOTIFY_STRING as c_int, c"setrange");
    }

    /// Stores `value` as the key's whole value, keeping its expiry, and
    /// propagates SET ... KEEPTTL.
    fn replace(&mut self, value: &[u8]) {
        let expiry = self.key.expire_at();
        // SAFETY: ctx is live; the string copies `value`, and is freed here
        // once the key holds its own reference. StringSet drops the expiry,
        // which is restored on this server; the propagated SET keeps it.
        unsafe {
            let string = raw::RedisModule_CreateString.map_or(ptr::null_mut(), |f| {
                f(self.key.ctx, value.as_ptr().cast(), value.len())
            });
            if string.is_null() {
                return;
            }
            if let Some(set) = raw::RedisModule_StringSet {
                set(self.key.ptr, string);
            }
            if let Some(free) = raw::RedisModule_FreeString {
                free(self.key.ctx, string);
            }
        }
        if let Some(at) = expiry {
            self.key.restore_expire_at(at);
        }
        // SAFETY: the format matches the arguments: key string, a buffer and
        // its length, a C string.
        unsafe {
            if let Some(replicate) = raw::RedisModule_Replicate {
                replicate(
                    self.key.ctx,
                    c"SET".as_ptr(),
                    c"sbc".as_ptr(),
                    self.key.name,
                    value.as_ptr(),
                    value.len() as libc::size_t,
                    c"KEEPTTL".as_ptr(),
                );
            }
        }
        self.key
            .changed(raw::REDISMODULE_NOTIFY_STRING as c_int, c"set");
    }
}

impl ScoreLog for CompactKey {
    fn len(&self) -> u64 {
        self.log().map_or(0, |log| log.len() as u64)
    }

    fn count_above(&self, floor: i64) -> u64 {
        self.log().map_or(0, |log| log.count_above(floor) as u64)
    }

    fn score_at(&self, rank: u64) -> Option<f64> {
        let rank = usize::try_from(rank).ok()?;
        self.log()?.time_at(rank).map(|time| time as f64)
    }
}

impl LogWriter for CompactKey {
    fn trim_through(&mut self, floor: i64) {
        if let Some(value) = self.bytes_mut() {
            let change = compact::trim_through(value, floor);
            self.apply(change);
        }
    }

    fn record(&mut self, at: u64, count: u64) {
        let change = compact::record(self.bytes_mut(), at, count);
        self.apply(change);
    }

    fn cap_to(&mut self, max_entries: u64) {
        if let Some(value) = self.bytes_mut() {
            let change = compact::cap_to(value, max_entries);
            self.apply(change);
        }
    }
}
