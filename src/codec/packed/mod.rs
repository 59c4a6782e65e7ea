//! The packed log, compact format version 2: the same sorted multiset of
//! millisecond times as `slots` (version 1), in about a third of the
//! bytes. Times are kept in blocks of 256 bytes, each coded with
//! Elias-Fano: every entry's offset from the block's first time is split
//! into `l` low bits, kept in fixed-width fields, and the high bits, kept
//! in unary as a bit vector. Nothing here knows about Redis;
//! `redis/compact.rs` stores the bytes in a string key, as it does
//! version 1's.
//!
//! Layout, integers little-endian:
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 4 | magic `SWLc` |
//! | 4 | 1 | format version, 2 |
//! | 5 | 1 | log2 of the block size: 8 |
//! | 6 | 2 | reserved, zero |
//! | 8 | 4 | head rank: the rank of the oldest live entry |
//! | 12 | 4 | head block: the block holding it |
//! | 16 | 4 | tail block: the block holding the newest entry |
//! | 20 | 4 | reserved, zero |
//! | 24 | ... | blocks, 256 bytes apart |
//!
//! The last block may be shorter: a block's extent is the rest of the
//! value, up to 256 bytes; a rest under 32 bytes is zero padding. A block:
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 7 | first: the time of its first entry |
//! | 7 | 1 | `l`, at most 52 |
//! | 8 | 4 | before: the rank of its first entry |
//! | 12 | 2 | n: its entries, at least 1 |
//! | 14 | 2 | top: the high part of its last entry |
//! | 16 | ... | payload |
//!
//! Entry i of a block, at time t, has the offset v = t - first, its high
//! part h = v >> l and its low part v mod 2^l. The low parts fill the
//! payload from its front, entry i's at bit i*l (bits are numbered from
//! the least significant bit of each byte). The high parts are the bit
//! vector read from the payload's back: bit j is bit j mod 8 of the byte
//! j div 8 before the block's end, and entry i sets bit h + i. The two
//! never share a byte; an entry is recorded into the tail block if both
//! still fit, otherwise into the next block, which is opened for it.
//!
//! Ranks count entries as they were recorded, modulo 2^32: the blocks
//! from the head block to the tail block follow one another (a block's
//! `before` is the one before it's plus its n). The head is a rank, so a
//! trim rewrites 8 header bytes. Blocks before the head block are dead,
//! entries before the head in the head block too; blocks after the tail
//! block are free (zero). Once the dead blocks are half the value or more,
//! the live ones are copied, as bytes, to a value of their size.
//!
//! `l` is chosen when a block opens: by an entry in order, from the
//! density of the block before it (its first time to the new block's,
//! over its n); when blocks are coded anew (an entry behind the newest
//! that its block has no room for), from the mean gap of the entries each
//! opens with. So each entry costs about l + 2 bits: near log2 C(span +
//! n, n), the information in the times. The head block, which has no
//! live block before it, takes its `l` from the gap to its first later
//! time.

use std::ops::Range;

use super::{
    filling_allocation, partition_point, read_u16, read_u32, Change, Codec, FormatError, Reader,
    MAGIC,
};
use crate::window::MAX_MS;

// Reading a block; building blocks and the bit writers; parsing a log and
// its searches; the changes: trim, cap, drop, record, append, insert and
// recode.
mod block;
mod build;
mod change;
mod log;
#[cfg(test)]
mod tests;

use block::*;
pub use build::new_log;
use build::*;
pub use change::{cap_to, drop_newest, record, trim_through};
pub use log::{Layout, Log};

pub const VERSION: u8 = 2;
pub const HEADER_LEN: usize = 24;
const SHIFT_AT: usize = 5;
const BLOCK_SHIFT: u8 = 8;
pub const BLOCK: usize = 1 << BLOCK_SHIFT;
const HEAD_RANK_AT: Range<usize> = 8..12;
const HEAD_BLOCK_AT: Range<usize> = 12..16;
const TAIL_AT: Range<usize> = 16..20;
/// What a trim or a cap changes: the head rank and the head block.
pub const HEAD_AT: Range<usize> = 8..16;
const BLOCK_HEADER: usize = 16;
const L_AT: usize = 7;
const BEFORE_AT: Range<usize> = 8..12;
const N_AT: Range<usize> = 12..14;
const TOP_AT: Range<usize> = 14..16;
/// The shortest block: a rest of the value shorter than this is padding.
pub const MIN_EXTENT: usize = 32;
/// The shortest well-formed value.
pub const MIN_LEN: usize = HEADER_LEN + MIN_EXTENT;
const MAX_L: u32 = 52;
const MAX_N: usize = u16::MAX as usize;
/// The entries a whole block can hold: one high bit each, and no low bits.
const MOST_PER_BLOCK: usize = (BLOCK - BLOCK_HEADER) * 8;

/// The extent of block `index` in a value of `len` bytes (empty past it).
fn extent_of(len: usize, index: usize) -> Range<usize> {
    let start = (HEADER_LEN + index * BLOCK).min(len);
    start..(start + BLOCK).min(len)
}

/// The blocks a value of `len` bytes has room for.
fn blocks_in(len: usize) -> usize {
    let room = len.saturating_sub(HEADER_LEN);
    room / BLOCK + usize::from(room % BLOCK >= MIN_EXTENT)
}

/// The length of a new value for `needed` bytes: room for an eighth
/// more, filling its allocation.
fn sized(needed: usize) -> usize {
    filling_allocation((needed + needed / 8).max(MIN_LEN))
}

/// The bytes a block of `n` entries takes, its last with high part `top`.
fn used_bytes(n: usize, l: u32, top: usize) -> usize {
    BLOCK_HEADER + (n * l as usize).div_ceil(8) + (top + n).div_ceil(8)
}

/// Compact format version 2.
pub struct Packed;

impl Codec for Packed {
    const VERSION: u8 = VERSION;
    const MIN_LEN: usize = MIN_LEN;
    const HEAD_AT: Range<usize> = HEAD_AT;
    /// A new log of many entries is a sixteenth of version 1's: made as a
    /// vector, once.
    const NEW_LOG_IN_PLACE: bool = false;
    /// The newest entry a drop leaves may be at or below the floor where
    /// another writer's low fields stopped a trim's count short; the
    /// function library then counts again too.
    const DROP_KEEPS_TRIM_FLOOR: bool = false;
    super::codec_items_of_the_module!();

    fn new_log_len(time: u64, count: usize) -> usize {
        new_log(time, count).len()
    }
    fn write_new_log(value: &mut [u8], time: u64, count: usize) {
        value.copy_from_slice(&new_log(time, count));
    }
}

super::reader_by_log_methods!();
