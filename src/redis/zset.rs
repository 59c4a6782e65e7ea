//! The log as a plain sorted set, through the module key API: a key guard
//! that closes on drop, trimming, counting, recording and expiry. Each write
//! is propagated to replicas and the AOF as the plain Redis command it
//! amounts to and announced with the keyspace event that command emits; the
//! key is signalled to WATCH and client-side caching only when it changed.

use std::cell::Cell;
use std::ffi::CString;
use std::os::raw::{c_char, c_int};
use std::ptr;
use std::sync::atomic::{AtomicU64, Ordering};

use redis_module::raw;

use super::key::OpenKey;

use super::server_time_ms;
use super::StoredLog;
use crate::error::SwlError;
use crate::window::{LogWriter, ScoreLog};

/// RedisModule_Call, which takes its arguments as C varargs.
type RawCall = unsafe extern "C" fn(
    *mut raw::RedisModuleCtx,
    *const c_char,
    *const c_char,
    ...
) -> *mut raw::RedisModuleCallReply;

/// Walking the skiplist costs a step per entry; past this many steps one
/// O(log N) command through RM_Call (ZCOUNT, ZRANGE by rank) is cheaper
/// despite its fixed cost.
const WALK_AT_MOST: u64 = 48;

/// Removing entries one by one costs an allocation and a lookup each;
/// past this many, one ZREMRANGEBYSCORE through RM_Call is faster
/// despite its fixed cost (measured: even at 64, one call ahead from
/// 256, twice as fast at 100,000; `make bench` prints the trim costs).
const REMOVE_ONE_BY_ONE_AT_MOST: u64 = 64;

/// A sorted-set key (or no key), closed when dropped.
pub struct ZsetKey {
    key: OpenKey,
    /// Every entry is known to score above this floor (set by a trim), so
    /// counting above it or any lower floor needs no read.
    all_above: Cell<Option<f64>>,
    /// The score entries were last recorded at: the newest entry, unless
    /// one from the future lies above it.
    recorded_at: Cell<Option<f64>>,
}

impl AsRef<OpenKey> for ZsetKey {
    fn as_ref(&self) -> &OpenKey {
        &self.key
    }
}

impl ZsetKey {
    /// The log in `key`, which holds a sorted set or nothing.
    pub fn new(key: OpenKey) -> Self {
        ZsetKey {
            key,
            all_above: Cell::new(None),
            recorded_at: Cell::new(None),
        }
    }

    fn key_type(&self) -> raw::KeyType {
        self.key.key_type()
    }

    /// Whether a trim has shown every entry to lie above `floor`.
    fn known_all_above(&self, floor: f64) -> bool {
        self.all_above.get().is_some_and(|known| floor <= known)
    }

    /// After removals: a sorted set that became empty is gone, as Redis
    /// deletes it, with the `del` event the command would emit.
    fn deleted_if_emptied(&self) {
        if ScoreLog::len(self) == 0 {
            self.key.changed(raw::REDISMODULE_NOTIFY_GENERIC, c"del");
        }
    }

    /// Every score, oldest first: SWL.ENTRIES.
    pub fn scores(&self) -> Vec<f64> {
        let mut range = ScoreRange::first_in(self, f64::NEG_INFINITY, f64::INFINITY, false);
        let mut scores = Vec::new();
        while let Some(score) = range.score() {
            scores.push(score);
            range.advance();
        }
        scores
    }

    /// Runs one command that changes the set through RM_Call, for removals
    /// too large to make one entry at a time: the command makes the change
    /// under the handle, so the handle is closed around it. Without the
    /// "!" flag the call is not propagated (callers propagate the effect),
    /// but the command signals and emits its own keyspace events.
    fn call_with_key_closed(
        &mut self,
        run: impl FnOnce(RawCall, *mut raw::RedisModuleCtx, *mut raw::RedisModuleString) -> CallReply,
    ) {
        self.key.close();
        drop(self.call(run));
        self.key.reopen();
        self.recorded_at.set(None);
        self.key.changed_by_command();
    }

    /// Runs one command through RM_Call and hands back its reply.
    fn call(
        &self,
        run: impl FnOnce(RawCall, *mut raw::RedisModuleCtx, *mut raw::RedisModuleString) -> CallReply,
    ) -> CallReply {
        // SAFETY: the function is set at load.
        match unsafe { raw::RedisModule_Call } {
            Some(call) => run(call, self.key.ctx, self.key.name),
            None => CallReply(ptr::null_mut()),
        }
    }

    fn remove_through(&mut self, floor: i64) {
        let doomed = self.oldest_members(floor as f64, REMOVE_ONE_BY_ONE_AT_MOST + 1);
        if doomed.len() as u64 <= REMOVE_ONE_BY_ONE_AT_MOST {
            self.remove(doomed);
            self.key
                .changed(raw::REDISMODULE_NOTIFY_ZSET, c"zremrangebyscore");
            return;
        }
        for member in doomed {
            // SAFETY: taken from the stopped range; owned here.
            unsafe { self.free(member) };
        }
        self.call_with_key_closed(|call, ctx, name| {
            // SAFETY: the format matches the arguments (key string, C
            // string, long long).
            CallReply(unsafe {
                call(
                    ctx,
                    c"ZREMRANGEBYSCORE".as_ptr(),
                    c"scl".as_ptr(),
                    name,
                    c"-inf".as_ptr(),
                    floor as libc::c_longlong,
                )
            })
        });
    }

    /// Up to `limit` members scored at or below `max`, oldest first, owned
    /// by the caller; the range is stopped before they are used.
    fn oldest_members(&self, max: f64, limit: u64) -> Vec<*mut raw::RedisModuleString> {
        ScoreRange::first_in(self, f64::NEG_INFINITY, max, false)
            .take_members(limit, ScoreRange::advance)
    }

    /// The `limit` newest members, newest first, owned by the caller.
    fn newest_members(&self, limit: u64) -> Vec<*mut raw::RedisModuleString> {
        ScoreRange::last_in(self, f64::NEG_INFINITY, f64::INFINITY, false)
            .take_members(limit, ScoreRange::retreat)
    }

    /// Removes the entries ranked `first..=last` (negative: from the
    /// newest) with ZREMRANGEBYRANK: one entry at a time when few, else
    /// through RM_Call; and propagates it (ranks order replicas alike).
    fn remove_ranks(
        &mut self,
        first: i64,
        last: i64,
        members: impl FnOnce(&Self) -> Vec<*mut raw::RedisModuleString>,
    ) {
        let len = self.len() as i64;
        let span = |rank: i64| if rank < 0 { rank + len } else { rank };
        let count = (span(last) - span(first) + 1).max(0) as u64;
        if count == 0 {
            return;
        }
        if count <= REMOVE_ONE_BY_ONE_AT_MOST {
            self.remove(members(self));
            self.key
                .changed(raw::REDISMODULE_NOTIFY_ZSET, c"zremrangebyrank");
            self.deleted_if_emptied();
        } else {
            self.call_with_key_closed(|call, ctx, name| {
                // SAFETY: the format matches the arguments: key string, two
                // long longs.
                CallReply(unsafe {
                    call(
                        ctx,
                        c"ZREMRANGEBYRANK".as_ptr(),
                        c"sll".as_ptr(),
                        name,
                        first as libc::c_longlong,
                        last as libc::c_longlong,
                    )
                })
            });
        }
        self.replicate_ranks(first, last);
    }

    /// Removes the given members (taken from a stopped range) and frees them.
    fn remove(&self, members: Vec<*mut raw::RedisModuleString>) {
        // What was recorded may be among them.
        self.recorded_at.set(None);
        for member in members {
            let mut deleted: c_int = 0;
            // SAFETY: member came from this key's range iterator, which has
            // been stopped; we own it and free it after use.
            unsafe {
                raw::RedisModule_ZsetRem.map(|f| f(self.key.ptr, member, &mut deleted));
                self.free(member);
            }
        }
    }

    /// NX makes a clash with an existing member try another value instead
    /// of moving that entry.
    /// The member added, or None if the key refused the write.
    fn add_unique(&self, score: f64) -> Option<*mut raw::RedisModuleString> {
        loop {
            let member = self.new_number(next_member_id());
            let mut flags: c_int = raw::REDISMODULE_ZADD_NX as c_int;
            // SAFETY: key is open for writing and holds a sorted set or
            // nothing; member is a live string we own.
            let status = unsafe {
                raw::RedisModule_ZsetAdd.map_or(raw::REDISMODULE_ERR as c_int, |f| {
                    f(self.key.ptr, score, member, &mut flags)
                })
            };
            let added = status == raw::REDISMODULE_OK as c_int
                && flags & raw::REDISMODULE_ZADD_ADDED as c_int != 0;
            if added {
                return Some(member);
            }
            // SAFETY: the member was not stored; we still own it.
            unsafe { self.free(member) };
            if status != raw::REDISMODULE_OK as c_int {
                return None;
            }
        }
    }

    /// Entries above `floor`, counted by walking down from the newest, or
    /// None once that would take more than `WALK_AT_MOST` steps.
    fn walk_count_above(&self, floor: f64) -> Option<u64> {
        let mut range = ScoreRange::last_in(self, floor, f64::INFINITY, true);
        let mut count = 0;
        while !range.at_end() {
            if count == WALK_AT_MOST {
                return None;
            }
            count += 1;
            range.retreat();
        }
        Some(count)
    }

    /// ZCOUNT key (floor +inf, O(log N) on a skiplist.
    fn zcount_above(&self, floor: i64) -> Option<u64> {
        let min = CString::new(format!("({floor}")).ok()?;
        let reply = self.call(|call, ctx, name| {
            // SAFETY: the format matches the arguments: key string, two C
            // strings.
            CallReply(unsafe {
                call(
                    ctx,
                    c"ZCOUNT".as_ptr(),
                    c"scc".as_ptr(),
                    name,
                    min.as_ptr(),
                    c"+inf".as_ptr(),
                )
            })
        });
        u64::try_from(reply.integer()?).ok()
    }

    /// ZRANGE key rank rank WITHSCORES, O(log N) on a skiplist.
    fn zrange_score(&self, rank: u64) -> Option<f64> {
        let rank = rank as libc::c_longlong;
        let reply = self.call(|call, ctx, name| {
            // SAFETY: the format matches the arguments: key string, two long
            // longs, a C string.
            CallReply(unsafe {
                call(
                    ctx,
                    c"ZRANGE".as_ptr(),
                    c"sllc".as_ptr(),
                    name,
                    rank,
                    rank,
                    c"WITHSCORES".as_ptr(),
                )
            })
        });
        reply.element_text(1)?.parse().ok()
    }

    fn replicate_trim(&self, floor: i64) {
        // SAFETY: the format matches the arguments: key string, C string, long long.
        unsafe {
            if let Some(replicate) = raw::RedisModule_Replicate {
                replicate(
                    self.key.ctx,
                    c"ZREMRANGEBYSCORE".as_ptr(),
                    c"scl".as_ptr(),
                    self.key.name,
                    c"-inf".as_ptr(),
                    floor as libc::c_longlong,
                );
            }
        }
    }

    /// `argv` holds score, member pairs.
    fn replicate_add(&self, argv: &mut [*mut raw::RedisModuleString]) {
        // SAFETY: "sv" takes the key string then an array of strings with its
        // length; Replicate takes its own references to them.
        unsafe {
            if let Some(replicate) = raw::RedisModule_Replicate {
                replicate(
                    self.key.ctx,
                    c"ZADD".as_ptr(),
                    c"sv".as_ptr(),
                    self.key.name,
                    argv.as_mut_ptr(),
                    argv.len() as libc::size_t,
                );
            }
        }
    }

    fn replicate_ranks(&self, first: i64, last: i64) {
        // SAFETY: the format matches: key string, two long longs.
        unsafe {
            if let Some(replicate) = raw::RedisModule_Replicate {
                replicate(
                    self.key.ctx,
                    c"ZREMRANGEBYRANK".as_ptr(),
                    c"sll".as_ptr(),
                    self.key.name,
                    first as libc::c_longlong,
                    last as libc::c_longlong,
                );
            }
        }
    }

    fn new_number(&self, value: i64) -> *mut raw::RedisModuleString {
        // SAFETY: ctx is live; the string is freed by the caller.
        unsafe {
            raw::RedisModule_CreateStringFromLongLong
                .map_or(ptr::null_mut(), |f| f(self.key.ctx, value))
        }
    }

    /// # Safety
    /// `string` must be owned by the caller and not used afterwards.
    unsafe fn free(&self, string: *mut raw::RedisModuleString) {
        if !string.is_null() {
            // SAFETY: per the contract above.
            unsafe { raw::RedisModule_FreeString.map(|f| f(self.key.ctx, string)) };
        }
    }
}

impl ScoreLog for ZsetKey {
    fn len(&self) -> u64 {
        self.key.value_length() as u64
    }

    fn count_above(&self, floor: i64) -> u64 {
        // Floors are whole milliseconds within 2^53: exact as doubles.
        let floor_score = floor as f64;
        let all_above = self.known_all_above(floor_score)
            || ScoreRange::first_in(self, f64::NEG_INFINITY, floor_score, false).at_end();
        if all_above {
            return self.len();
        }
        self.walk_count_above(floor_score)
            .or_else(|| self.zcount_above(floor))
            .unwrap_or(0)
    }

    fn score_at(&self, rank: u64) -> Option<f64> {
        let newer = self.len().checked_sub(rank)?.checked_sub(1)?;
        // The newest is usually what was just recorded: confirm that
        // nothing lies above it, which reads no element.
        if let Some(recorded) = self.recorded_at.get().filter(|_| newer == 0) {
            if ScoreRange::last_in(self, recorded, f64::INFINITY, true).at_end() {
                return Some(recorded);
            }
        }
        let everything = (f64::NEG_INFINITY, f64::INFINITY);
        if newer < WALK_AT_MOST {
            ScoreRange::last_in(self, everything.0, everything.1, false)
                .nth_score(newer + 1, ScoreRange::retreat)
        } else if rank < WALK_AT_MOST {
            ScoreRange::first_in(self, everything.0, everything.1, false)
                .nth_score(rank + 1, ScoreRange::advance)
        } else {
            self.zrange_score(rank)
        }
    }
}

impl LogWriter for ZsetKey {
    /// Removes every entry with a score at or below `floor`, exactly what
    /// `ZREMRANGEBYSCORE key -inf floor` does, and propagates the effect.
    fn trim_through(&mut self, floor: i64) {
        let floor_score = floor as f64;
        let has_old = !ScoreRange::first_in(self, f64::NEG_INFINITY, floor_score, false).at_end();
        if has_old {
            let has_new = !ScoreRange::last_in(self, floor_score, f64::INFINITY, true).at_end();
            if has_new {
                self.remove_through(floor);
                self.replicate_trim(floor);
            } else {
                // Everything has left the window: the key goes.
                self.key.unlink();
            }
        }
        self.all_above.set(Some(floor_score));
    }

    /// Adds `count` entries scored `at`, each under a member no other entry
    /// of the key has, and propagates the ZADD.
    fn record(&mut self, at: u64, count: u64) {
        let score = at as f64;
        if self.all_above.get().is_some_and(|floor| score <= floor) {
            self.all_above.set(None);
        }
        self.recorded_at.set(Some(score));
        // In chunks on the stack, each propagated as one ZADD: the common
        // small cost needs no heap, a large one no huge buffer.
        const CHUNK: usize = 64;
        let score_arg = self.new_number(at as i64);
        let mut left = count;
        while left > 0 {
            let n = left.min(CHUNK as u64) as usize;
            let mut argv = [ptr::null_mut(); 2 * CHUNK];
            let mut added = 0;
            for _ in 0..n {
                // Only what was really added is propagated.
                if let Some(member) = self.add_unique(score) {
                    argv[2 * added] = score_arg;
                    argv[2 * added + 1] = member;
                    added += 1;
                }
            }
            if added > 0 {
                self.replicate_add(&mut argv[..2 * added]);
                self.key.changed(raw::REDISMODULE_NOTIFY_ZSET, c"zadd");
            }
            for pair in argv.chunks_exact(2).take(added) {
                // SAFETY: created by add_unique and owned here.
                unsafe { self.free(pair[1]) };
            }
            left -= n as u64;
        }
        // SAFETY: created above and owned here.
        unsafe { self.free(score_arg) };
    }

    /// Drops the oldest entries until at most `max_entries` are left, and
    /// propagates that as ZREMRANGEBYRANK (ranks order replicas alike).
    fn cap_to(&mut self, max_entries: u64) {
        let excess = self.len().saturating_sub(max_entries);
        if excess > 0 {
            self.remove_ranks(0, excess as i64 - 1, |key| {
                key.oldest_members(f64::INFINITY, excess)
            });
        }
    }

    /// Removes the `count` newest entries, as ZREMRANGEBYRANK -count -1;
    /// all of them, as UNLINK.
    fn drop_newest(&mut self, count: u64) {
        let len = self.len();
        if len == 0 {
            return;
        }
        if count >= len {
            self.key.unlink();
            return;
        }
        self.remove_ranks(-(count as i64), -1, |key| key.newest_members(count));
    }
}

impl StoredLog for ZsetKey {
    fn times(&self) -> Result<Vec<f64>, SwlError> {
        Ok(self.scores())
    }

    /// Each change was propagated as it was made; only the expiry is left.
    fn finish(&mut self, expire_at: Option<i64>) -> Result<(), SwlError> {
        if let Some(at) = expire_at {
            self.key.set_expire_at(at);
        }
        Ok(())
    }
}

/// A reply from RedisModule_Call, freed when dropped.
struct CallReply(*mut raw::RedisModuleCallReply);

impl CallReply {
    fn integer(&self) -> Option<i64> {
        if self.0.is_null() {
            return None;
        }
        // SAFETY: a live reply; the type is checked before the value is read.
        unsafe {
            let kind = raw::RedisModule_CallReplyType.map(|f| f(self.0))?;
            if kind != raw::REDISMODULE_REPLY_INTEGER as c_int {
                return None;
            }
            raw::RedisModule_CallReplyInteger.map(|f| f(self.0))
        }
    }

    /// The text of element `index` of an array reply.
    fn element_text(&self, index: usize) -> Option<String> {
        if self.0.is_null() {
            return None;
        }
        // SAFETY: a live reply; an index past the end gives null, and the
        // element belongs to the reply, which outlives this borrow.
        unsafe {
            let element = raw::RedisModule_CallReplyArrayElement.map(|f| f(self.0, index))?;
            if element.is_null() {
                return None;
            }
            let mut len: libc::size_t = 0;
            let text = raw::RedisModule_CallReplyStringPtr.map(|f| f(element, &mut len))?;
            if text.is_null() {
                return None;
            }
            let bytes = std::slice::from_raw_parts(text.cast::<u8>(), len);
            std::str::from_utf8(bytes).ok().map(str::to_owned)
        }
    }
}

impl Drop for CallReply {
    fn drop(&mut self) {
        if !self.0.is_null() {
            // SAFETY: the reply came from RM_Call and is freed only here.
            unsafe { raw::RedisModule_FreeCallReply.map(|f| f(self.0)) };
        }
    }
}

/// A position in the key's score-ordered range, stopped when dropped.
struct ScoreRange<'a> {
    key: &'a ZsetKey,
    open: bool,
}

impl<'a> ScoreRange<'a> {
    /// The lowest entry scored in `min..=max`, or in `(min, max]` when
    /// `exclude_min`.
    fn first_in(key: &'a ZsetKey, min: f64, max: f64, exclude_min: bool) -> Self {
        // SAFETY: key is live and holds a sorted set when non-empty.
        let open = key.key_type() == raw::KeyType::ZSet
            && unsafe {
                raw::RedisModule_ZsetFirstInScoreRange
                    .map_or(0, |f| f(key.key.ptr, min, max, c_int::from(exclude_min), 0))
            } == raw::REDISMODULE_OK as c_int;
        ScoreRange { key, open }
    }

    /// The highest entry scored in `min..=max`, or in `(min, max]` when
    /// `exclude_min`.
    fn last_in(key: &'a ZsetKey, min: f64, max: f64, exclude_min: bool) -> Self {
        // SAFETY: as in first_in.
        let open = key.key_type() == raw::KeyType::ZSet
            && unsafe {
                raw::RedisModule_ZsetLastInScoreRange
                    .map_or(0, |f| f(key.key.ptr, min, max, c_int::from(exclude_min), 0))
            } == raw::REDISMODULE_OK as c_int;
        ScoreRange { key, open }
    }

    fn at_end(&self) -> bool {
        // SAFETY: only asked of an open range on a live key.
        !self.open
            || unsafe { raw::RedisModule_ZsetRangeEndReached.map_or(1, |f| f(self.key.key.ptr)) }
                != 0
    }

    /// The current entry's member (owned by the caller) and score.
    fn current(&self) -> Option<(*mut raw::RedisModuleString, f64)> {
        if self.at_end() {
            return None;
        }
        let mut score = 0.0;
        // SAFETY: the range is open and not at its end.
        let member = unsafe {
            raw::RedisModule_ZsetRangeCurrentElement
                .map_or(ptr::null_mut(), |f| f(self.key.key.ptr, &mut score))
        };
        (!member.is_null()).then_some((member, score))
    }

    fn score(&self) -> Option<f64> {
        let (member, score) = self.current()?;
        // SAFETY: current() hands over ownership of the member.
        unsafe { self.key.free(member) };
        Some(score)
    }

    /// The score `n - 1` steps on from here (1-based), stepping with `step`.
    fn nth_score(mut self, n: u64, step: fn(&mut Self)) -> Option<f64> {
        if n == 0 {
            return None;
        }
        for _ in 1..n {
            if self.at_end() {
                return None;
            }
            step(&mut self);
        }
        self.score()
    }

    /// Up to `limit` members from here on, stepping with `step`, owned by
    /// the caller.
    fn take_members(mut self, limit: u64, step: fn(&mut Self)) -> Vec<*mut raw::RedisModuleString> {
        let mut members = Vec::new();
        while (members.len() as u64) < limit {
            let Some((member, _)) = self.current() else {
                break;
            };
            members.push(member);
            step(&mut self);
        }
        members
    }

    fn advance(&mut self) {
        // SAFETY: moving an open iterator on a live key.
        if self.open
            && unsafe { raw::RedisModule_ZsetRangeNext.map_or(0, |f| f(self.key.key.ptr)) } == 0
        {
            self.stop();
        }
    }

    fn retreat(&mut self) {
        // SAFETY: moving an open iterator on a live key.
        if self.open
            && unsafe { raw::RedisModule_ZsetRangePrev.map_or(0, |f| f(self.key.key.ptr)) } == 0
        {
            self.stop();
        }
    }

    fn stop(&mut self) {
        if self.open {
            // SAFETY: stops the iterator this range started.
            unsafe { raw::RedisModule_ZsetRangeStop.map(|f| f(self.key.key.ptr)) };
            self.open = false;
        }
    }
}

impl Drop for ScoreRange<'_> {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The next candidate member: a random 14-digit number. Redis stores it
/// as compactly as one of the usual script's 13-digit timestamp members
/// (an integer in a listpack, a 16-byte string in a skiplist). Random
/// members never clash after a restart or failover the way a counter
/// could; the rare clash within a key is caught by the caller's NX.
fn next_member_id() -> i64 {
    const LOW: u64 = 10_000_000_000_000;
    const SPAN: u64 = 90_000_000_000_000;
    // xorshift64*, one step per call; commands run on the main thread.
    static STATE: AtomicU64 = AtomicU64::new(0);
    let mut x = STATE.load(Ordering::Relaxed);
    if x == 0 {
        x = server_time_ms().wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    }
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    STATE.store(x, Ordering::Relaxed);
    (LOW + x.wrapping_mul(0x2545_F491_4F6C_DD1D) % SPAN) as i64
}
