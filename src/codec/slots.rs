//! Compact format version 1: the log's times in slots of 4 or 8 bytes,
//! in order. Nothing here knows about Redis; `redis/compact.rs` stores the
//! bytes in a string key.
//!
//! Layout, integers little-endian:
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 4 | magic `SWLc` |
//! | 4 | 1 | format version, 1 |
//! | 5 | 1 | slot width in bytes: 4 or 8 |
//! | 6 | 2 | reserved, zero |
//! | 8 | 8 | base: a time in milliseconds, at most 2^53-1 |
//! | 16 | 4 | head: index of the oldest live slot |
//! | 20 | 4 | reserved, zero |
//! | 24 | ... | slots, `width` bytes each |
//!
//! A slot holding v >= 1 is an entry at `base + v - 1`; 0 marks a free slot.
//! Slots before `head` are dead (trimmed); from `head` on come the live
//! slots in ascending order, then free slots up to the end of the value.
//! Free capacity at the end lets an entry be recorded by writing one slot.
//!
//! The base is chosen when a value is made from times (a new log, or one
//! with an entry before its base or past its slot width), ROOM_BELOW_MS
//! before the oldest, and kept when the value grows or drops its dead
//! slots: the slots then keep their bytes, so the function library, which
//! mirrors this in Lua, moves them with string operations rather than
//! decoding and encoding every slot.

use std::ops::Range;

use super::{
    partition_point, read_u32, read_u64, size_class, string_overhead, Change, Codec, FormatError,
    Reader, MAGIC,
};
use crate::window::MAX_MS;

pub const VERSION: u8 = 1;
pub const HEADER_LEN: usize = 24;
const WIDTH_AT: usize = 5;
const BASE_AT: Range<usize> = 8..16;
pub const HEAD_AT: Range<usize> = 16..20;
/// A value never has fewer slots than this: it keeps every compact log
/// longer than the 44 bytes Redis stores in its embedded encoding, which
/// reading in place would convert.
const MIN_SLOTS: usize = 8;
/// The shortest well-formed value.
pub const MIN_LEN: usize = HEADER_LEN + MIN_SLOTS * 4;
/// How far below its oldest entry a value made from times is based, so
/// that a client somewhat behind the others records into it (a time
/// before the base makes the whole value anew, O(N)).
pub const ROOM_BELOW_MS: u64 = 60_000;

/// Where a parsed log's parts lie: enough to read the same, unchanged
/// bytes again without parsing them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    width: usize,
    base: u64,
    head: usize,
    end: usize,
}

/// A validated compact log, read in place.
#[derive(Debug, Clone, Copy)]
pub struct Log<'a> {
    slots: &'a [u8],
    width: usize,
    base: u64,
    head: usize,
    end: usize,
}

impl<'a> Log<'a> {
    /// Checks the header and the live range in O(log N): the bytes hold a
    /// whole number of slots, the head lies within them, and the oldest and
    /// newest live entries are real times in order. `entries` checks every
    /// slot.
    pub fn parse(bytes: &'a [u8]) -> Result<Self, FormatError> {
        if bytes.len() < MIN_LEN {
            return Err(FormatError::TooShort);
        }
        let (header, slots) = bytes.split_at(HEADER_LEN);
        if header[..4] != MAGIC {
            return Err(FormatError::Magic);
        }
        if header[4] != VERSION {
            return Err(FormatError::Version);
        }
        let width = usize::from(header[WIDTH_AT]);
        if width != 4 && width != 8 {
            return Err(FormatError::SlotWidth);
        }
        if header[6..8] != [0; 2] || header[20..24] != [0; 4] {
            return Err(FormatError::Reserved);
        }
        if slots.len() % width != 0 {
            return Err(FormatError::Length);
        }
        let base = read_u64(&header[BASE_AT]);
        if base > MAX_MS {
            return Err(FormatError::Base);
        }
        let head = read_u32(&header[HEAD_AT]) as usize;
        let capacity = slots.len() / width;
        if head > capacity {
            return Err(FormatError::Head);
        }
        let mut log = Log {
            slots,
            width,
            base,
            head,
            end: head,
        };
        log.end = head + partition_point(capacity - head, |i| log.raw(head + i) != 0);
        if log.end > head {
            let oldest = log.time(head).ok_or(FormatError::Slot)?;
            let newest = log.time(log.end - 1).ok_or(FormatError::Slot)?;
            if oldest > newest {
                return Err(FormatError::Slot);
            }
        }
        Ok(log)
    }

    pub fn layout(&self) -> Layout {
        Layout {
            width: self.width,
            base: self.base,
            head: self.head,
            end: self.end,
        }
    }

    /// The log in `bytes` as `layout` says, for bytes parsed before and not
    /// changed since. Reads stay within `bytes` whatever the layout says.
    pub fn with_layout(bytes: &'a [u8], layout: Layout) -> Self {
        Log {
            slots: bytes.get(HEADER_LEN..).unwrap_or_default(),
            width: layout.width,
            base: layout.base,
            head: layout.head,
            end: layout.end.max(layout.head),
        }
    }

    fn capacity(&self) -> usize {
        self.slots.len() / self.width
    }

    /// The slot at `index` as stored; 0 past the end.
    fn raw(&self, index: usize) -> u64 {
        let at = index * self.width;
        match self.slots.get(at..at + self.width) {
            Some(bytes) if self.width == 8 => read_u64(bytes),
            Some(bytes) => u64::from(read_u32(bytes)),
            None => 0,
        }
    }

    /// The time of the slot at `index`, if it holds one.
    fn time(&self, index: usize) -> Option<u64> {
        let raw = self.raw(index).checked_sub(1)?;
        self.base.checked_add(raw).filter(|&t| t <= MAX_MS)
    }

    /// Number of live entries.
    pub fn len(&self) -> usize {
        self.end - self.head
    }

    /// The time of the live entry at `rank`, 0 the oldest. A slot that does
    /// not hold a time reads as 2^53-1 (`entries` reports it as corrupt).
    pub fn time_at(&self, rank: usize) -> Option<u64> {
        (rank < self.len()).then(|| self.time(self.head + rank).unwrap_or(MAX_MS))
    }

    /// Live entries at or before `time`: none before the oldest, all from
    /// the newest (the ends parsing checked), otherwise a binary search.
    /// The function library counts the same way, so that both read the
    /// same count from interior slots out of order.
    fn count_through(&self, time: u64) -> usize {
        // Stored values are time - base + 1: compare in that space.
        let Some(limit) = (time + 1).checked_sub(self.base) else {
            return 0;
        };
        let len = self.len();
        if len == 0 || self.raw(self.head) > limit {
            return 0;
        }
        if self.raw(self.end - 1) <= limit {
            return len;
        }
        partition_point(len, |rank| self.raw(self.head + rank) <= limit)
    }

    /// Live entries later than `floor`.
    pub fn count_above(&self, floor: i64) -> usize {
        match u64::try_from(floor) {
            Ok(floor) => self.len() - self.count_through(floor),
            Err(_) => self.len(),
        }
    }

    /// Once the dead slots before the head are over half the value, a new
    /// value holding the live ones, sized for them, with the same base and
    /// width: a copy of their bytes, O(live), and so O(1) per entry ever
    /// recorded; 8-byte slots whose entries now fit 4 bytes are made anew
    /// from their times instead (O(N), once). A call's last change, after
    /// any that can find the value damaged, so that a failed call has at
    /// most moved the head. None also where the copy would not read as
    /// holding every entry (see `copied`).
    pub fn reclaimed(&self) -> Option<Vec<u8>> {
        if self.head * 2 <= self.capacity() {
            return None;
        }
        if self.narrows_with(None) {
            if let Ok(times) = self.entries() {
                return Some(encode(&times, 0));
            }
        }
        self.copied(self.head, 0, 0, 0)
    }

    /// `rewritten`, where the copy reads as holding every entry: parsed,
    /// its search for the end of the live slots does not stop at a slot
    /// another writer freed, which would hide the entries after it.
    fn copied(&self, at: usize, count: usize, stored: u64, spare: usize) -> Option<Vec<u8>> {
        let value = self.rewritten(at, count, stored, spare);
        let holds_all = Log::parse(&value).is_ok_and(|copy| copy.len() == self.len() + count);
        holds_all.then_some(value)
    }

    /// Whether the log has 8-byte slots where a value made from its live
    /// entries (and `time`, if given) would take 4: its wide span has left.
    fn narrows_with(&self, time: Option<u64>) -> bool {
        if self.width != 8 {
            return false;
        }
        let ends = self
            .time_at(0)
            .zip(self.len().checked_sub(1).and_then(|r| self.time_at(r)));
        let (oldest, newest) = match (ends, time) {
            (Some((oldest, newest)), Some(time)) => (oldest.min(time), newest.max(time)),
            (Some(ends), None) => ends,
            (None, Some(time)) => (time, time),
            (None, None) => return false,
        };
        shape(oldest, newest, 1, 0).0 == 4
    }

    /// A new value with this log's base and width, head 0: its live slots
    /// with `count` slots holding `stored` before the slot at `at`, and
    /// room for an eighth more (at least `spare`). The live slots are
    /// copied as bytes, unread.
    fn rewritten(&self, at: usize, count: usize, stored: u64, spare: usize) -> Vec<u8> {
        let width = self.width;
        let slots = slots_for(self.len() + count, spare, width);
        let mut value = vec![0u8; HEADER_LEN + slots * width];
        write_header(&mut value, self.base, width);
        let (older, newer) = (
            &self.slots[self.head * width..at * width],
            &self.slots[at * width..self.end * width],
        );
        let inserted_at = HEADER_LEN + older.len();
        let newer_at = inserted_at + count * width;
        value[HEADER_LEN..inserted_at].copy_from_slice(older);
        for slot in value[inserted_at..newer_at].chunks_exact_mut(width) {
            write_slot(slot, stored);
        }
        value[newer_at..newer_at + newer.len()].copy_from_slice(newer);
        value
    }

    /// Every live entry, oldest first, each slot checked.
    pub fn entries(&self) -> Result<Vec<u64>, FormatError> {
        let mut times = Vec::with_capacity(self.len());
        for index in self.head..self.end {
            let time = self.time(index).ok_or(FormatError::Slot)?;
            if times.last().is_some_and(|&last| last > time) {
                return Err(FormatError::Slot);
            }
            times.push(time);
        }
        if (self.end..self.capacity()).any(|index| self.raw(index) != 0) {
            return Err(FormatError::Slot);
        }
        Ok(times)
    }
}

/// Removes every entry at or before `floor`: moves the head, O(log N).
/// (`Log::reclaimed` drops the dead slots once they are over half the
/// value.)
pub fn trim_through(value: &mut [u8], floor: i64) -> Result<Change, FormatError> {
    move_head(value, |log| log.end - log.count_above(floor))
}

/// Drops the oldest entries until at most `max_entries` are left.
pub fn cap_to(value: &mut [u8], max_entries: u64) -> Result<Change, FormatError> {
    let keep = usize::try_from(max_entries).unwrap_or(usize::MAX);
    move_head(value, |log| log.end - log.len().min(keep))
}

/// Removes the `count` newest entries by freeing their slots (the newest
/// are the last live ones), O(count); removing them all empties the log.
pub fn drop_newest(value: &mut [u8], count: u64) -> Result<Change, FormatError> {
    let (first, end, width) = {
        let log = Log::parse(value)?;
        let count = usize::try_from(count).unwrap_or(usize::MAX);
        if count >= log.len() {
            return Ok(if log.len() == 0 {
                Change::Nothing
            } else {
                Change::Emptied
            });
        }
        (log.end - count, log.end, log.width)
    };
    let range = HEADER_LEN + first * width..HEADER_LEN + end * width;
    value[range.clone()].fill(0);
    Ok(Change::InPlace(range))
}

/// Moves the head to the index `to` picks (within the live slots).
fn move_head(value: &mut [u8], to: impl FnOnce(&Log) -> usize) -> Result<Change, FormatError> {
    let head = {
        let log = Log::parse(value)?;
        let head = to(&log);
        if head == log.head {
            return Ok(Change::Nothing);
        }
        if head == log.end {
            return Ok(Change::Emptied);
        }
        head
    };
    value[HEAD_AT].copy_from_slice(&(head as u32).to_le_bytes());
    Ok(Change::InPlace(HEAD_AT))
}

/// Adds `count` entries at `time` (`value` None: a new log). An entry no
/// older than the newest is written into free slots, O(count); an older
/// one goes to its sorted position, moving the newer slots up. Where the
/// slots are full, the live slots are copied into a larger value with the
/// same base (O(N) bytes, amortised O(1): it has room for an eighth more).
/// Only a time before the base or past the slot width makes the value
/// anew from its times, based below the oldest.
pub fn record(value: Option<&mut [u8]>, time: u64, count: u64) -> Result<Change, FormatError> {
    let count = usize::try_from(count).unwrap_or(usize::MAX);
    let Some(value) = value else {
        // A new log: `count` equal entries, written without a vector of them.
        let times = std::iter::repeat_n(time, count);
        return Ok(Change::Replace(encode_from((time, time), count, 0, times)));
    };
    let (at, end, width, stored) = {
        let log = Log::parse(value)?;
        // The value made anew from its times, with the new ones among them.
        let remade = || -> Result<Change, FormatError> {
            let mut times = log.entries()?;
            let at = times.partition_point(|&t| t <= time);
            times.splice(at..at, std::iter::repeat_n(time, count));
            Ok(Change::Replace(encode(&times, count)))
        };
        let stored = (time + 1)
            .checked_sub(log.base)
            .filter(|&v| v >= 1 && (log.width == 8 || v <= u64::from(u32::MAX)));
        let Some(stored) = stored else {
            return remade();
        };
        let at = log.head + log.count_through(time);
        if log.capacity() - log.end < count {
            if log.narrows_with(Some(time)) {
                return remade();
            }
            let copy = log.copied(at, count, stored, count);
            return copy.map(Change::Replace).ok_or(FormatError::Slot);
        }
        (at, log.end, log.width, stored)
    };
    // The slots from the insertion point move up by `count`.
    let slot = |index: usize| HEADER_LEN + index * width;
    value.copy_within(slot(at)..slot(end), slot(at + count));
    for index in at..at + count {
        write_slot(&mut value[slot(index)..slot(index + 1)], stored);
    }
    Ok(Change::InPlace(slot(at)..slot(end + count)))
}

/// A new value holding `times` (ascending), based ROOM_BELOW_MS below the
/// oldest, in the narrowest width that holds them, with free slots for an
/// eighth more (at least `spare`).
pub fn encode(times: &[u64], spare: usize) -> Vec<u8> {
    let ends = match (times.first(), times.last()) {
        (Some(&oldest), Some(&newest)) => (oldest, newest),
        _ => (0, 0),
    };
    encode_from(ends, times.len(), spare, times.iter().copied())
}

/// `encode` of `len` ascending times between `oldest` and `newest`, from
/// an iterator (a run of equal times needs no vector of them). Slots are
/// filled a whole slot at a time, which the compiler vectorises: COST
/// 100,000 on a new log is the costliest check there is.
fn encode_from(
    (oldest, newest): (u64, u64),
    len: usize,
    spare: usize,
    times: impl Iterator<Item = u64>,
) -> Vec<u8> {
    let (width, base, slots) = shape(oldest, newest, len, spare);
    let mut value = vec![0u8; HEADER_LEN + slots * width];
    write_value(&mut value, base, width, times);
    value
}

/// The slot width, the base and the number of slots of a new value of
/// `len` times from `oldest` to `newest`: based ROOM_BELOW_MS below the
/// oldest (or at 0), 4-byte slots where the newest fits them, room for an
/// eighth more (at least `spare`).
fn shape(oldest: u64, newest: u64, len: usize, spare: usize) -> (usize, u64, usize) {
    let base = oldest - oldest.min(ROOM_BELOW_MS);
    let span = if len == 0 { 0 } else { newest - base + 1 };
    let width = if span <= u64::from(u32::MAX) { 4 } else { 8 };
    (width, base, slots_for(len, spare, width))
}

/// The number of slots of a value made for `len` entries: room for an
/// eighth more, at least `spare` and at least 4, filling its allocation.
fn slots_for(len: usize, spare: usize, width: usize) -> usize {
    slots_filling_allocation(len + (len / 8).max(spare).max(4), width)
}

/// The length of the new log `record` writes for `count` entries on no
/// log (see `write_new_log`).
pub fn new_log_len(time: u64, count: usize) -> usize {
    let (width, _, slots) = shape(time, time, count, 0);
    HEADER_LEN + slots * width
}

/// Writes into `value` (zeroed, `new_log_len` bytes) the new log of
/// `count` entries at `time`: the bytes `record` on no log writes, built in
/// place by the caller's storage rather than in a vector copied there.
pub fn write_new_log(value: &mut [u8], time: u64, count: usize) {
    let (width, base, _) = shape(time, time, count, 0);
    write_value(value, base, width, std::iter::repeat_n(time, count));
}

/// Writes a value's header (head 0) into `value`.
fn write_header(value: &mut [u8], base: u64, width: usize) {
    value[..4].copy_from_slice(&MAGIC);
    value[4] = VERSION;
    value[WIDTH_AT] = width as u8;
    value[BASE_AT].copy_from_slice(&base.to_le_bytes());
}

/// Writes a value's header and its slots from `times` into `value`, which
/// is zeroed (the free slots stay so).
fn write_value(value: &mut [u8], base: u64, width: usize, times: impl Iterator<Item = u64>) {
    write_header(value, base, width);
    let filled = value[HEADER_LEN..].chunks_exact_mut(width).zip(times);
    if width == 4 {
        for (slot, time) in filled {
            slot.copy_from_slice(&((time - base + 1) as u32).to_le_bytes());
        }
    } else {
        for (slot, time) in filled {
            slot.copy_from_slice(&(time - base + 1).to_le_bytes());
        }
    }
}

/// The number of slots, at least `wanted`, whose value fills the memory
/// Redis allocates for it anyway: a string of n bytes takes a block of
/// jemalloc's next size class above n plus its header (four classes per
/// power of two), and slack up to that class would otherwise be wasted.
fn slots_filling_allocation(wanted: usize, width: usize) -> usize {
    let wanted = wanted.max(MIN_SLOTS);
    let len = HEADER_LEN + wanted * width;
    let block = size_class(len + string_overhead(len));
    let usable = block - string_overhead(block);
    ((usable - HEADER_LEN) / width).max(wanted)
}

/// Stores `stored` in a slot of 4 or 8 bytes (the slot's length), which the
/// callers have checked it fits: the low bytes of its little-endian form.
fn write_slot(slot: &mut [u8], stored: u64) {
    slot.copy_from_slice(&stored.to_le_bytes()[..slot.len()]);
}

/// Compact format version 1.
pub struct Slots;

impl Codec for Slots {
    const VERSION: u8 = VERSION;
    const MIN_LEN: usize = MIN_LEN;
    const HEAD_AT: Range<usize> = HEAD_AT;
    /// COST 100,000 on a new log, the costliest check there is, makes
    /// 400 KB of slots: filled once where they are stored.
    const NEW_LOG_IN_PLACE: bool = true;
    /// Dropping frees the newest slots; those left keep their times.
    const DROP_KEEPS_TRIM_FLOOR: bool = true;
    super::codec_items_of_the_module!();

    fn new_log_len(time: u64, count: usize) -> usize {
        new_log_len(time, count)
    }
    fn write_new_log(value: &mut [u8], time: u64, count: usize) {
        write_new_log(value, time, count)
    }
}

super::reader_by_log_methods!();

#[cfg(test)]
mod tests;
