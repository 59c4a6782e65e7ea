//! The compact log: a sorted multiset of millisecond times held in a plain
//! byte string, read and changed in place. Two formats implement `Codec`
//! side by side: version 1 (`slots`, 4- or 8-byte slots) and version 2
//! (`packed`, Elias-Fano blocks). Both begin with the magic and a version
//! byte; a log keeps its version until it empties. Nothing here knows
//! about Redis; `redis/compact.rs` stores the bytes in a string key.

pub mod packed;
pub mod slots;

#[cfg(test)]
mod arrival;
#[cfg(test)]
pub(crate) mod pairs;
#[cfg(test)]
mod vectors;

use std::ops::Range;

pub use packed::Packed;
pub use slots::Slots;

/// The first four bytes of a compact log of either version.
pub const MAGIC: [u8; 4] = *b"SWLc";
/// Where the format version lies.
pub const VERSION_AT: usize = 4;

/// The shortest value either version takes: a shorter string is no log,
/// and is refused before it is read in place.
pub const MIN_LEN: usize = if Slots::MIN_LEN < Packed::MIN_LEN {
    Slots::MIN_LEN
} else {
    Packed::MIN_LEN
};

/// Why bytes are not a compact log of the version they were read as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FormatError {
    TooShort,
    Magic,
    Version,
    /// Version 1: a slot width other than 4 or 8.
    SlotWidth,
    /// Version 2: a block size other than 256.
    BlockShift,
    Reserved,
    /// Version 1: bytes after the header that are not whole slots.
    Length,
    Base,
    /// The head lies outside the log.
    Head,
    /// Version 1: a live slot that is free or past 2^53-1, slots out of
    /// order, or a free slot that is not zero.
    Slot,
    /// Version 2: a block whose header, fields or bits do not hold the
    /// entries its neighbours say, or times out of order.
    Block,
}

/// How a change is to reach the stored value, and from it replicas.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    Nothing,
    /// The value was changed in place in this byte range.
    InPlace(Range<usize>),
    /// The value was changed in place in these byte ranges.
    Ranges(Vec<Range<usize>>),
    /// The value is to be replaced by these bytes.
    Replace(Vec<u8>),
    /// No entry is left: the key is to go.
    Emptied,
}

/// A compact log format: how its values are parsed, read and changed.
/// Every change reads before it writes, so one that fails (`FormatError`:
/// bytes another writer damaged) leaves the value as it was.
pub trait Codec {
    /// The byte after the magic.
    const VERSION: u8;
    /// The shortest well-formed value.
    const MIN_LEN: usize;
    /// The bytes a trim or a cap changes (the head), so a failed call can
    /// put them back.
    const HEAD_AT: Range<usize>;
    /// Whether a new log is best written into storage of its final length
    /// (`new_log_len`, `write_new_log`) rather than made as a vector and
    /// copied: where a new log of many entries is large.
    const NEW_LOG_IN_PLACE: bool;
    /// Whether the newest entry a drop leaves is still above the floor of
    /// the trim before it, whatever another writer did to the bytes: so
    /// counts above that floor are the log's length, not searched again.
    const DROP_KEEPS_TRIM_FLOOR: bool;

    /// Where a parsed log's parts lie: enough to read the same, unchanged
    /// bytes again without parsing them.
    type Layout: Copy;
    /// A validated log, read in place.
    type Log<'a>: Reader<Layout = Self::Layout>;

    /// Checks the header and the ends of the live entries (not every
    /// entry: `Reader::entries` does).
    fn parse(value: &[u8]) -> Result<Self::Log<'_>, FormatError>;
    /// The log in `value` as `layout` says, for bytes parsed before and not
    /// changed since. Reads stay within `value` whatever the layout says.
    fn with_layout(value: &[u8], layout: Self::Layout) -> Self::Log<'_>;

    /// Removes every entry at or before `floor`.
    fn trim_through(value: &mut [u8], floor: i64) -> Result<Change, FormatError>;
    /// Drops the oldest entries until at most `max_entries` are left.
    fn cap_to(value: &mut [u8], max_entries: u64) -> Result<Change, FormatError>;
    /// Removes the `count` newest entries.
    fn drop_newest(value: &mut [u8], count: u64) -> Result<Change, FormatError>;
    /// Adds `count` entries at `time` (`value` None: a new log).
    fn record(value: Option<&mut [u8]>, time: u64, count: u64) -> Result<Change, FormatError>;
    /// The length of the new log `record` makes of `count` entries at
    /// `time`.
    fn new_log_len(time: u64, count: usize) -> usize;
    /// Writes that new log into `value` (zeroed, `new_log_len` bytes).
    fn write_new_log(value: &mut [u8], time: u64, count: usize);
}

/// The `Codec` items a format module has as items of the same names: its
/// `Layout` and `Log`, `Log::parse` and `Log::with_layout`, and the change
/// functions. (Its constants and new logs are its own.)
macro_rules! codec_items_of_the_module {
    () => {
        type Layout = Layout;
        type Log<'a> = Log<'a>;

        fn parse(value: &[u8]) -> Result<Log<'_>, FormatError> {
            Log::parse(value)
        }
        fn with_layout(value: &[u8], layout: Layout) -> Log<'_> {
            Log::with_layout(value, layout)
        }
        fn trim_through(value: &mut [u8], floor: i64) -> Result<Change, FormatError> {
            trim_through(value, floor)
        }
        fn cap_to(value: &mut [u8], max_entries: u64) -> Result<Change, FormatError> {
            cap_to(value, max_entries)
        }
        fn drop_newest(value: &mut [u8], count: u64) -> Result<Change, FormatError> {
            drop_newest(value, count)
        }
        fn record(value: Option<&mut [u8]>, time: u64, count: u64) -> Result<Change, FormatError> {
            record(value, time, count)
        }
    };
}
use codec_items_of_the_module;

/// `Reader` for a format's `Log`, by its methods of the same names.
macro_rules! reader_by_log_methods {
    () => {
        impl Reader for Log<'_> {
            type Layout = Layout;
            fn layout(&self) -> Layout {
                Log::layout(self)
            }
            fn len(&self) -> usize {
                Log::len(self)
            }
            fn count_above(&self, floor: i64) -> usize {
                Log::count_above(self, floor)
            }
            fn time_at(&self, rank: usize) -> Option<u64> {
                Log::time_at(self, rank)
            }
            fn entries(&self) -> Result<Vec<u64>, FormatError> {
                Log::entries(self)
            }
            fn reclaimed(&self) -> Option<Vec<u8>> {
                Log::reclaimed(self)
            }
        }
    };
}
use reader_by_log_methods;

/// Reading a parsed log.
pub trait Reader {
    type Layout;
    fn layout(&self) -> Self::Layout;
    /// Number of live entries.
    fn len(&self) -> usize;
    /// Live entries later than `floor`.
    fn count_above(&self, floor: i64) -> usize;
    /// The time of the live entry at `rank`, 0 the oldest.
    fn time_at(&self, rank: usize) -> Option<u64>;
    /// Every live entry, oldest first, each checked.
    fn entries(&self) -> Result<Vec<u64>, FormatError>;
    /// Once the dead entries are over half the value, a new value holding
    /// the live ones: a call's last change.
    fn reclaimed(&self) -> Option<Vec<u8>>;
}

/// The format version `value` says it is in, if it is long enough to be
/// a log.
pub fn version_of(value: &[u8]) -> Option<u8> {
    value.get(VERSION_AT).copied()
}

/// The length, at least `len`, of a value that fills the memory Redis
/// allocates for a string of `len` bytes: a string of n bytes takes a
/// block of jemalloc's next size class above n plus its header (four
/// classes per power of two), and slack up to that class would otherwise
/// be wasted.
pub fn filling_allocation(len: usize) -> usize {
    let block = size_class(len + string_overhead(len));
    // The longest string whose header and NUL still fit the block.
    let usable = [4, 6, 10]
        .into_iter()
        .map(|overhead| block - overhead)
        .find(|&usable| string_overhead(usable) + usable <= block)
        .unwrap_or(len);
    usable.max(len)
}

/// A Redis string's header (3, 5 or 9 bytes by length) and its NUL.
pub(crate) fn string_overhead(len: usize) -> usize {
    match len {
        0..=255 => 4,
        256..=65535 => 6,
        _ => 10,
    }
}

/// jemalloc's size class for `n` bytes: multiples of 16 up to 128, then
/// four evenly spaced classes per power of two.
pub(crate) fn size_class(n: usize) -> usize {
    if n <= 128 {
        return n.div_ceil(16) * 16;
    }
    let spacing = n.next_power_of_two() / 8;
    n.div_ceil(spacing) * spacing
}

/// The first index in `0..len` where `is_before` turns false, assuming it
/// holds on a prefix; never reads outside `0..len`.
pub(crate) fn partition_point(len: usize, is_before: impl Fn(usize) -> bool) -> usize {
    let (mut low, mut high) = (0, len);
    while low < high {
        let mid = low + (high - low) / 2;
        if is_before(mid) {
            low = mid + 1;
        } else {
            high = mid;
        }
    }
    low
}

pub(crate) fn read_u16(bytes: &[u8]) -> u16 {
    u16::from_le_bytes([bytes[0], bytes[1]])
}

pub(crate) fn read_u32(bytes: &[u8]) -> u32 {
    let mut word = [0u8; 4];
    word.copy_from_slice(&bytes[..4]);
    u32::from_le_bytes(word)
}

pub(crate) fn read_u64(bytes: &[u8]) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(&bytes[..8]);
    u64::from_le_bytes(word)
}
