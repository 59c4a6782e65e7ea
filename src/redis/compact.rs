//! The log as a compact string of either format version (`crate::codec`),
//! read and changed in place through RM_StringDMA. What a call changed is propagated
//! once, when it ends, as the plain string commands it amounts to: one
//! `SET key value PXAT at` for a new, rewritten or small value; otherwise a
//! SETRANGE per changed range and PEXPIREAT if the expiry moved; UNLINK for
//! an emptied log. A replica or AOF without the module so ends up with the
//! same bytes and expiry, mostly from one command per call (each propagated
//! command costs a lookup by name, and two or more are wrapped in
//! MULTI/EXEC).

use std::cell::Cell;
use std::marker::PhantomData;
use std::ops::Range;
use std::os::raw::c_int;
use std::ptr;

use redis_module::raw;

use super::key::OpenKey;
use super::StoredLog;
use crate::codec::{Change, Codec, FormatError, Reader};
use crate::error::SwlError;
use crate::window::{LogWriter, ScoreLog};

/// Values up to this size are propagated whole, in one SET with the
/// expiry, rather than as SETRANGE and PEXPIREAT.
const SET_WHOLE_AT_MOST: usize = 512;

/// How a log that this call empties and then records into again is
/// written: `Codec::record` of the format version the setting names, where
/// that is not the version the key held.
pub type Renewal = fn(Option<&mut [u8]>, u64, u64) -> Result<Change, FormatError>;

/// A key holding a compact log in format `C` (or no key, whose log is
/// created in `C`), closed when dropped.
pub struct CompactKey<C: Codec> {
    key: OpenKey,
    /// The value's layout as last parsed; None once it changes.
    layout: Cell<Option<C::Layout>>,
    /// Where the setting names another version than `C`: how a log this
    /// call empties and refills is written in that version.
    renewal: Option<Renewal>,
    codec: PhantomData<C>,
    /// What this call changed, propagated by `finish`.
    pending: Pending,
    /// A floor every live entry is above: the last trim's, until an entry
    /// at or below it is recorded. Counts above it are the log's length,
    /// not searched again, as the function library counts them (the two
    /// differ only where another writer damaged the blocks a trim read).
    trimmed_to: Option<i64>,
}

#[derive(Default)]
struct Pending {
    /// The key held a log when the call began.
    existed: bool,
    /// The whole value was written anew (which a new key always is).
    rewritten: bool,
    /// The log emptied and its key was removed (it may be created again).
    deleted: bool,
    /// Bytes changed in place.
    ranges: Vec<Range<usize>>,
    /// The head as the call found it (its bytes and where they lie), kept
    /// when a change first moves it.
    original_head: Option<(Range<usize>, Vec<u8>)>,
    /// A change found bytes that are not a compact log (slots another
    /// writer changed, which a call reads only in part): the call records
    /// nothing and must fail.
    damaged: bool,
    /// The entries (time, count) recorded into a log this call emptied,
    /// to be written anew in the setting's version (`renewal`) when the
    /// call ends: a log emptied and refilled is a new log.
    renewed: Option<(u64, u64)>,
}

impl<C: Codec> AsRef<OpenKey> for CompactKey<C> {
    fn as_ref(&self) -> &OpenKey {
        &self.key
    }
}

/// The format version byte of the string in `key`, read in place; None
/// for a string too short to be a log, which is not read in place (that
/// would convert an embedded or integer string).
pub fn version_in(key: &OpenKey) -> Option<u8> {
    if key.key_type() != raw::KeyType::String || key.value_length() < crate::codec::MIN_LEN {
        return None;
    }
    let (ptr, len) = dma(key, raw::REDISMODULE_READ)?;
    // SAFETY: as in `CompactKey::bytes`; nothing changes the value here.
    let value = unsafe { std::slice::from_raw_parts(ptr, len) };
    crate::codec::version_of(value)
}

impl<C: Codec> CompactKey<C> {
    /// The log in `key`, which holds a string or nothing. A string that is
    /// not a well-formed compact log is WRONGTYPE, and is left untouched:
    /// one too short to be a log is refused before it is read in place
    /// (which would convert an embedded or integer string).
    pub fn new(key: OpenKey, renewal: Option<Renewal>) -> Result<Self, SwlError> {
        let existed = key.key_type() == raw::KeyType::String;
        let log = CompactKey {
            key,
            layout: Cell::new(None),
            renewal,
            codec: PhantomData,
            pending: Pending {
                existed,
                ..Pending::default()
            },
            trimmed_to: None,
        };
        if existed && (log.key.value_length() < C::MIN_LEN || log.log().is_none()) {
            return Err(SwlError::WrongType);
        }
        Ok(log)
    }

    /// The value, read in place; empty for no key.
    fn bytes(&self) -> &[u8] {
        dma(&self.key, raw::REDISMODULE_READ)
            // SAFETY: the pointer and length come from StringDMA on the live
            // key and stay valid until the value is next changed, which
            // takes `&mut self`.
            .map_or(&[], |(ptr, len)| unsafe {
                std::slice::from_raw_parts(ptr, len)
            })
    }

    /// The value, to change in place; None for no key.
    fn bytes_mut(&mut self) -> Option<&mut [u8]> {
        dma(&self.key, raw::REDISMODULE_WRITE)
            // SAFETY: as in `bytes`, and the borrow of `self` is exclusive.
            .map(|(ptr, len)| unsafe { std::slice::from_raw_parts_mut(ptr, len) })
    }

    /// The value as a log, parsed once per change.
    fn log(&self) -> Option<C::Log<'_>> {
        let bytes = self.bytes();
        if let Some(layout) = self.layout.get() {
            return Some(C::with_layout(bytes, layout));
        }
        let log = C::parse(bytes).ok()?;
        self.layout.set(Some(log.layout()));
        Some(log)
    }

    /// Runs one change on the stored value (None for no key), unless an
    /// earlier change of this call found the value damaged.
    fn change(&mut self, run: impl FnOnce(Option<&mut [u8]>) -> Result<Change, FormatError>) {
        if self.pending.damaged {
            return;
        }
        let change = run(self.bytes_mut());
        self.apply(change);
    }

    /// Keeps the head as the call found it, before a change moves it.
    fn keep_original_head(&mut self) {
        if self.pending.original_head.is_none() && !self.pending.rewritten {
            let range = C::HEAD_AT;
            if let Some(bytes) = self.bytes().get(range.clone()) {
                self.pending.original_head = Some((range, bytes.to_vec()));
            }
        }
    }

    /// Undoes what a failed call changed. Changes run trim, cap, then
    /// record or give back, and only the last of them moves slots or
    /// writes the value anew; the changes before it move the head (the
    /// dead slots are reclaimed when the call finishes). So a failure
    /// finds at most the head moved.
    fn restore(&mut self, pending: &Pending) {
        debug_assert!(!pending.rewritten && !pending.deleted);
        if !pending.ranges.is_empty() {
            if let (Some((range, head)), Some(value)) = (&pending.original_head, self.bytes_mut()) {
                debug_assert!(pending.ranges.iter().all(|r| r == range));
                if let Some(bytes) = value.get_mut(range.clone()) {
                    bytes.copy_from_slice(head);
                }
            }
        }
        self.layout.set(None);
    }

    /// Makes a change to the stored value, to be propagated by `finish`.
    /// Open validated only the header and the ends of the live range; a
    /// change that reads more (a value written anew checks every slot)
    /// can find the value damaged, and then changes nothing.
    fn apply(&mut self, change: Result<Change, FormatError>) {
        self.layout.set(None);
        match change {
            Ok(Change::Nothing) => {}
            Err(_) => self.pending.damaged = true,
            Ok(Change::InPlace(range)) => self.pending.ranges.push(range),
            Ok(Change::Ranges(ranges)) => self.pending.ranges.extend(ranges),
            Ok(Change::Replace(value)) => {
                self.store(&value);
                self.pending.rewritten = true;
                self.pending.ranges.clear();
            }
            Ok(Change::Emptied) => {
                // SAFETY: a live handle opened for writing.
                unsafe { raw::RedisModule_UnlinkKey.map(|f| f(self.key.ptr)) };
                self.pending.deleted = true;
                self.pending.ranges.clear();
            }
        }
    }

    /// Creates the empty key as a new log, `count` entries at `at`, written
    /// where it is stored (`Codec::NEW_LOG_IN_PLACE`): one buffer filled
    /// rather than a vector filled and copied.
    fn create(&mut self, at: u64, count: u64) {
        if self.pending.damaged {
            return;
        }
        let count = usize::try_from(count).unwrap_or(usize::MAX);
        let len = C::new_log_len(at, count);
        // SAFETY: a live handle opened for writing, on an empty key, which
        // StringTruncate creates as a string of `len` zero bytes.
        let status = unsafe {
            raw::RedisModule_StringTruncate
                .map_or(raw::REDISMODULE_ERR as c_int, |f| f(self.key.ptr, len))
        };
        self.layout.set(None);
        match self.bytes_mut() {
            Some(value) if status == raw::REDISMODULE_OK as c_int && value.len() == len => {
                C::write_new_log(value, at, count);
                self.pending.rewritten = true;
                self.pending.ranges.clear();
            }
            // Not created in place: written as any new value is.
            _ => self.change(|value| C::record(value, at, count as u64)),
        }
    }

    /// Stores `value` as the key's whole value, keeping its expiry.
    fn store(&mut self, value: &[u8]) {
        let expiry = match self.key.key_type() {
            raw::KeyType::Empty => None,
            _ => self.key.expire_at(),
        };
        // SAFETY: ctx is live; the string copies `value`, and is freed here
        // once the key holds its own reference. StringSet drops the expiry,
        // which is put back.
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
    }

    fn replicate_setrange(&self, range: Range<usize>) {
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

    /// The whole value, with the key's expiry (PXAT) or without one.
    fn replicate_set(&self, expiry: Option<i64>) {
        let value = self.bytes();
        // SAFETY: the formats match the arguments: key string, a buffer and
        // its length, then a C string and a long long.
        unsafe {
            if let Some(replicate) = raw::RedisModule_Replicate {
                let (ctx, name) = (self.key.ctx, self.key.name);
                let (bytes, len) = (value.as_ptr(), value.len() as libc::size_t);
                match expiry {
                    Some(at) => replicate(
                        ctx,
                        c"SET".as_ptr(),
                        c"sbcl".as_ptr(),
                        name,
                        bytes,
                        len,
                        c"PXAT".as_ptr(),
                        at as libc::c_longlong,
                    ),
                    None => replicate(ctx, c"SET".as_ptr(), c"sb".as_ptr(), name, bytes, len),
                };
            }
        }
        self.key
            .changed(raw::REDISMODULE_NOTIFY_STRING as c_int, c"set");
        if expiry.is_some() {
            self.key.changed(raw::REDISMODULE_NOTIFY_GENERIC, c"expire");
        }
    }
}

impl<C: Codec> StoredLog for CompactKey<C> {
    /// Every entry, each slot checked.
    fn times(&self) -> Result<Vec<f64>, SwlError> {
        if self.key.key_type() == raw::KeyType::Empty {
            return Ok(Vec::new());
        }
        let entries = C::parse(self.bytes())
            .and_then(|log| log.entries())
            .map_err(|_| SwlError::WrongType)?;
        Ok(entries.into_iter().map(|t| t as f64).collect())
    }

    /// Ends the call: sets the expiry (`expire_at`, where it changes) and
    /// propagates everything the call changed, with the keyspace events of
    /// the commands propagated. A call that found the value damaged puts
    /// the head back and fails with WRONGTYPE, the value as it was.
    fn finish(&mut self, expire_at: Option<i64>) -> Result<(), SwlError> {
        // Dead slots over half the value are dropped last, once nothing
        // that can find the value damaged follows (see Log::reclaimed).
        // Bytes that no longer parse (slots another writer damaged, which
        // the call's changes reached) are left as the call left them.
        // A log emptied and refilled by this call is written anew in the
        // setting's version (it holds only what the call recorded, so it
        // has nothing to reclaim).
        if !self.pending.damaged {
            match (self.pending.renewed, self.renewal) {
                (Some((at, count)), Some(renewal)) => self.apply(renewal(None, at, count)),
                _ => {
                    if let Some(value) = self.log().and_then(|log| log.reclaimed()) {
                        self.apply(Ok(Change::Replace(value)));
                    }
                }
            }
        }
        let pending = std::mem::take(&mut self.pending);
        if pending.damaged {
            self.restore(&pending);
            return Err(SwlError::WrongType);
        }
        if self.key.key_type() != raw::KeyType::String {
            if pending.deleted && pending.existed {
                self.key.unlinked();
            }
            return Ok(());
        }
        if let Some(at) = expire_at {
            self.key.restore_expire_at(at);
        }
        let expiry = expire_at.or_else(|| self.key.expire_at());
        // A key created or recreated by this call was rewritten.
        let whole = pending.rewritten
            || (!pending.ranges.is_empty() && self.bytes().len() <= SET_WHOLE_AT_MOST);
        if whole {
            self.replicate_set(expiry);
            return Ok(());
        }
        for range in pending.ranges {
            self.replicate_setrange(range);
        }
        if let Some(at) = expire_at {
            self.key.expire_at_changed(at);
        }
        Ok(())
    }
}

impl<C: Codec> ScoreLog for CompactKey<C> {
    fn len(&self) -> u64 {
        self.log().map_or(0, |log| log.len() as u64)
    }

    fn count_above(&self, floor: i64) -> u64 {
        let trimmed = self.trimmed_to.is_some_and(|to| floor <= to);
        self.log().map_or(0, |log| {
            if trimmed {
                log.len() as u64
            } else {
                log.count_above(floor) as u64
            }
        })
    }

    fn score_at(&self, rank: u64) -> Option<f64> {
        let rank = usize::try_from(rank).ok()?;
        self.log()?.time_at(rank).map(|time| time as f64)
    }
}

impl<C: Codec> LogWriter for CompactKey<C> {
    fn trim_through(&mut self, floor: i64) {
        self.keep_original_head();
        self.change(|value| value.map_or(Ok(Change::Nothing), |v| C::trim_through(v, floor)));
        self.trimmed_to = Some(floor);
    }

    fn record(&mut self, at: u64, count: u64) {
        if self
            .trimmed_to
            .is_some_and(|to| i64::try_from(at).is_ok_and(|at| at <= to))
        {
            self.trimmed_to = None;
        }
        if self.key.key_type() == raw::KeyType::Empty {
            if self.pending.existed && self.renewal.is_some() {
                self.pending.renewed = Some((at, count));
            }
            if C::NEW_LOG_IN_PLACE {
                self.create(at, count);
                return;
            }
        }
        self.change(|value| C::record(value, at, count));
    }

    fn cap_to(&mut self, max_entries: u64) {
        self.keep_original_head();
        self.change(|value| value.map_or(Ok(Change::Nothing), |v| C::cap_to(v, max_entries)));
    }

    fn drop_newest(&mut self, count: u64) {
        if !C::DROP_KEEPS_TRIM_FLOOR {
            self.trimmed_to = None;
        }
        self.change(|value| value.map_or(Ok(Change::Nothing), |v| C::drop_newest(v, count)));
    }
}

/// The value of `key` in place (`mode`: reading, or writing where the key
/// was opened so); None unless it holds a string.
fn dma(key: &OpenKey, mode: u32) -> Option<(*mut u8, usize)> {
    if key.key_type() != raw::KeyType::String {
        return None;
    }
    let mut len: libc::size_t = 0;
    // SAFETY: a live handle holding a string (writable when asked for
    // writing: the key was opened so).
    let ptr = unsafe {
        raw::RedisModule_StringDMA.map_or(ptr::null_mut(), |f| f(key.ptr, &mut len, mode as c_int))
    };
    (!ptr.is_null()).then_some((ptr.cast(), len))
}
