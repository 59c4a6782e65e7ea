//! The packed log, compact format version 2: the same sorted multiset of
//! millisecond times as `compact` (version 1), in about a third of the
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

use crate::compact::{filling_allocation, partition_point, read_u32, Change, FormatError, MAGIC};
use crate::window::MAX_MS;

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

/// One block's bytes: its extent, 32 to 256 bytes.
#[derive(Debug, Clone, Copy)]
struct Block<'a> {
    bytes: &'a [u8],
}

impl<'a> Block<'a> {
    fn first(&self) -> u64 {
        let mut word = [0u8; 8];
        word[..7].copy_from_slice(&self.bytes[..7]);
        u64::from_le_bytes(word)
    }

    /// `l` as stored (`check_ends` refuses one over 52), at most 63 so
    /// that reading a damaged block shifts within a word.
    fn l(&self) -> u32 {
        u32::from(self.bytes[L_AT]).min(63)
    }

    fn before(&self) -> u32 {
        read_u32(&self.bytes[BEFORE_AT])
    }

    fn n(&self) -> usize {
        usize::from(read_u16(&self.bytes[N_AT]))
    }

    fn top(&self) -> usize {
        usize::from(read_u16(&self.bytes[TOP_AT]))
    }

    fn payload(&self) -> usize {
        self.bytes.len() - BLOCK_HEADER
    }

    /// Byte `k` of the high bit vector, counted from the block's end; 0
    /// past the payload.
    fn high_byte(&self, k: usize) -> u8 {
        if k < self.payload() {
            self.bytes[self.bytes.len() - 1 - k]
        } else {
            0
        }
    }

    fn high_bit(&self, j: usize) -> bool {
        self.high_byte(j / 8) >> (j % 8) & 1 == 1
    }

    /// Entry i's low part.
    fn low(&self, i: usize) -> u64 {
        read_bits(&self.bytes[BLOCK_HEADER..], i * self.l() as usize, self.l())
    }

    /// The bytes its entries take, header included.
    fn used(&self) -> usize {
        used_bytes(self.n(), self.l(), self.top())
    }

    /// The position of the high bit of entry `i`.
    fn select(&self, i: usize) -> Option<usize> {
        let mut seen = 0;
        for k in 0..self.payload() {
            let byte = self.high_byte(k);
            let ones = byte.count_ones() as usize;
            if seen + ones > i {
                let mut byte = byte;
                for _ in 0..i - seen {
                    byte &= byte - 1;
                }
                return Some(k * 8 + byte.trailing_zeros() as usize);
            }
            seen += ones;
        }
        None
    }

    /// The time of entry `i`; None where the bits do not hold one.
    fn time_of(&self, i: usize) -> Option<u64> {
        let high = self.select(i)?.checked_sub(i)?;
        time_from(self.first(), self.l(), high, self.low(i))
    }

    /// Entries at or before `t`, assuming t < the first time of the block
    /// after it; reads at most the payload.
    fn count_through(&self, t: u64) -> usize {
        let n = self.n();
        let Some(v) = t.checked_sub(self.first()) else {
            return 0;
        };
        let l = self.l();
        let h = (v >> l) as usize;
        if v >> l > self.top() as u64 {
            return n;
        }
        let low_limit = v & low_mask(l);
        // The entries with a high part below h: the ones before the h-th
        // zero of the bit vector.
        let (mut ones, mut zeros, mut j) = (0, 0, 0);
        if h > 0 {
            let mut k = 0;
            loop {
                if k >= self.payload() {
                    return ones.min(n);
                }
                let byte = self.high_byte(k);
                let byte_zeros = 8 - byte.count_ones() as usize;
                if zeros + byte_zeros < h {
                    zeros += byte_zeros;
                    ones += 8 - byte_zeros;
                    k += 1;
                    continue;
                }
                let mut bit = 0;
                while zeros < h {
                    if byte >> bit & 1 == 0 {
                        zeros += 1;
                    } else {
                        ones += 1;
                    }
                    bit += 1;
                }
                j = k * 8 + bit;
                break;
            }
        }
        // Then those of high part h whose low part is at most the limit.
        while ones < n && self.high_bit(j) && self.low(ones) <= low_limit {
            ones += 1;
            j += 1;
        }
        ones.min(n)
    }

    /// The checks an entry of a log relies on for a block at either end of
    /// its live range (the head block and the tail block), O(1) but the
    /// select of its last entry.
    fn check_ends(&self) -> Result<u64, FormatError> {
        let n = self.n();
        if n == 0
            || u32::from(self.bytes[L_AT]) > MAX_L
            || self.first() > MAX_MS
            || self.used() > self.bytes.len()
        {
            return Err(FormatError::Slots);
        }
        let last_bit = self.top() + n - 1;
        if !self.high_bit(last_bit) || !self.high_bit(0) || self.low(0) != 0 {
            return Err(FormatError::Slots);
        }
        time_from(self.first(), self.l(), self.top(), self.low(n - 1)).ok_or(FormatError::Slots)
    }

    /// Every entry's time, each bit checked: the entries a well-formed
    /// block holds, and nothing else in its bytes.
    fn times(&self, into: &mut Vec<u64>) -> Result<(), FormatError> {
        self.check_ends()?;
        let (n, l, top) = (self.n(), self.l(), self.top());
        let (first, start) = (self.first(), into.len());
        let mut i = 0;
        for j in 0..top + n {
            if self.high_bit(j) {
                let time = time_from(first, l, j - i, self.low(i)).ok_or(FormatError::Slots)?;
                if into.len() > start && into.last().is_some_and(|&last| last > time) {
                    return Err(FormatError::Slots);
                }
                into.push(time);
                i += 1;
            }
        }
        // The bytes between the low fields and the high bits are free:
        // zero, and so are the bits of either past its last entry.
        let low_bits = n * l as usize;
        let high_bits = top + n;
        let payload = &self.bytes[BLOCK_HEADER..];
        let low_end = low_bits.div_ceil(8);
        let high_start = payload.len() - high_bits.div_ceil(8);
        let clean = i == n
            && payload[low_end..high_start].iter().all(|&b| b == 0)
            && (low_bits.is_multiple_of(8) || payload[low_end - 1] >> (low_bits % 8) == 0)
            && (high_bits.is_multiple_of(8) || payload[high_start] >> (high_bits % 8) == 0);
        if clean {
            Ok(())
        } else {
            Err(FormatError::Slots)
        }
    }
}

/// A block under construction: 256 bytes whose high bits sit at the end,
/// placed in a value's block of any extent that holds what it uses.
struct Building {
    bytes: [u8; BLOCK],
}

impl Building {
    /// A block opened by `count` entries at `time`.
    fn open(time: u64, l: u32, before: u32) -> Self {
        let mut bytes = [0u8; BLOCK];
        bytes[..7].copy_from_slice(&time.to_le_bytes()[..7]);
        bytes[L_AT] = l as u8;
        bytes[BEFORE_AT].copy_from_slice(&before.to_le_bytes());
        bytes[N_AT].copy_from_slice(&1u16.to_le_bytes());
        bytes[BLOCK - 1] = 1;
        Building { bytes }
    }

    fn view(&self) -> Block<'_> {
        Block { bytes: &self.bytes }
    }

    /// Adds up to `count` entries at `time` (no older than its newest) as
    /// fit; returns how many did.
    fn push_run(&mut self, time: u64, count: usize) -> usize {
        let block = self.view();
        let (n, l, first) = (block.n(), block.l(), block.first());
        let v = time - first;
        let (h, low) = ((v >> l) as usize, v & low_mask(l));
        let mut fitting = 0;
        while fitting < count && h <= MAX_N && n + fitting < MAX_N {
            if used_bytes(n + fitting + 1, l, h) > BLOCK {
                break;
            }
            fitting += 1;
        }
        if low != 0 {
            for i in n..n + fitting {
                write_bits(&mut self.bytes[BLOCK_HEADER..], i * l as usize, l, low);
            }
        }
        // Bits h + n .. h + n + fitting of the high vector: whole bytes at
        // once (COST 100,000 on a new log is the costliest check there is).
        let (mut j, end) = (h + n, h + n + fitting);
        while j < end {
            if j % 8 == 0 && end - j >= 8 {
                self.bytes[BLOCK - 1 - j / 8] = 0xff;
                j += 8;
            } else {
                set_high_bit(&mut self.bytes, j);
                j += 1;
            }
        }
        if fitting > 0 {
            self.set_counts(n + fitting, h);
        }
        fitting
    }

    fn set_counts(&mut self, n: usize, top: usize) {
        self.bytes[N_AT].copy_from_slice(&(n as u16).to_le_bytes());
        self.bytes[TOP_AT].copy_from_slice(&(top as u16).to_le_bytes());
    }

    /// Writes this block into `extent` (at least what it uses): the
    /// header and low fields at the front, the high bits at the end.
    fn place(&self, extent: &mut [u8]) {
        place(&self.bytes, extent);
    }
}

/// Writes the block in `from` (any extent) into `to` (an extent holding
/// what it uses; zero beyond it).
fn place(from: &[u8], to: &mut [u8]) {
    let block = Block { bytes: from };
    let low_end = BLOCK_HEADER + (block.n() * block.l() as usize).div_ceil(8);
    let high_len = (block.top() + block.n()).div_ceil(8);
    to.fill(0);
    to[..low_end].copy_from_slice(&from[..low_end]);
    let (to_len, from_len) = (to.len(), from.len());
    to[to_len - high_len..].copy_from_slice(&from[from_len - high_len..]);
}

/// Where a parsed log's parts lie: enough to read the same, unchanged
/// bytes again without parsing them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    head_rank: u32,
    head_block: usize,
    tail: usize,
    blocks: usize,
    newest: u64,
}

/// A validated packed log, read in place.
#[derive(Debug, Clone, Copy)]
pub struct Log<'a> {
    value: &'a [u8],
    head_rank: u32,
    head_block: usize,
    tail: usize,
    blocks: usize,
    newest: u64,
}

impl<'a> Log<'a> {
    /// Checks the header, the head block and the tail block, O(1): the
    /// head lies within the head block, and both blocks' ends hold times.
    /// `entries` checks every block.
    pub fn parse(value: &'a [u8]) -> Result<Self, FormatError> {
        if value.len() < MIN_LEN {
            return Err(FormatError::TooShort);
        }
        if value[..4] != MAGIC {
            return Err(FormatError::Magic);
        }
        if value[4] != VERSION {
            return Err(FormatError::Version);
        }
        if value[SHIFT_AT] != BLOCK_SHIFT {
            return Err(FormatError::Width);
        }
        if value[6..8] != [0; 2] || value[20..24] != [0; 4] {
            return Err(FormatError::Reserved);
        }
        let head_block = read_u32(&value[HEAD_BLOCK_AT]) as usize;
        let tail = read_u32(&value[TAIL_AT]) as usize;
        let blocks = blocks_in(value.len());
        if head_block > tail || tail >= blocks {
            return Err(FormatError::Head);
        }
        let mut log = Log {
            value,
            head_rank: read_u32(&value[HEAD_RANK_AT]),
            head_block,
            tail,
            blocks,
            newest: 0,
        };
        log.check_head(log.head_rank, head_block)?;
        log.newest = log.block(tail).check_ends()?;
        Ok(log)
    }

    /// What parsing checks of a head at `head_rank` in block `head_block`
    /// (also of a head a trim moves, before it is written): the head block's
    /// ends hold times, the head lies within it, and the tail block's rank
    /// lies past its live entries, by no more than the blocks between can
    /// hold, so that searches by rank stay among the blocks.
    fn check_head(&self, head_rank: u32, head_block: usize) -> Result<(), FormatError> {
        let head = self.block(head_block);
        head.check_ends()?;
        let offset = head_rank.wrapping_sub(head.before()) as usize;
        if offset >= head.n() {
            return Err(FormatError::Head);
        }
        let tail = self.block(self.tail);
        if tail.first() < head.first() {
            return Err(FormatError::Slots);
        }
        if self.tail != head_block {
            let head_live = head.n() - offset;
            let tail_rank = tail.before().wrapping_sub(head_rank) as usize;
            let between = self.tail - head_block - 1;
            if tail_rank < head_live || tail_rank - head_live > between * MOST_PER_BLOCK {
                return Err(FormatError::Head);
            }
        }
        Ok(())
    }

    pub fn layout(&self) -> Layout {
        Layout {
            head_rank: self.head_rank,
            head_block: self.head_block,
            tail: self.tail,
            blocks: self.blocks,
            newest: self.newest,
        }
    }

    /// The log in `value` as `layout` says, for bytes parsed before and not
    /// changed since. Reads stay within `value` whatever the layout says.
    pub fn with_layout(value: &'a [u8], layout: Layout) -> Self {
        let blocks = layout.blocks.min(blocks_in(value.len())).max(1);
        let tail = layout.tail.min(blocks - 1);
        Log {
            value,
            head_rank: layout.head_rank,
            head_block: layout.head_block.min(tail),
            tail,
            blocks,
            newest: layout.newest,
        }
    }

    fn block(&self, index: usize) -> Block<'a> {
        Block {
            bytes: &self.value[extent_of(self.value.len(), index)],
        }
    }

    /// The head's index in the head block.
    fn head_offset(&self) -> usize {
        self.head_rank
            .wrapping_sub(self.block(self.head_block).before()) as usize
    }

    /// The rank of block `index`'s first entry, from the head.
    fn rank_of(&self, index: usize) -> i64 {
        i64::from(self.block(index).before().wrapping_sub(self.head_rank) as i32)
    }

    /// Number of live entries.
    pub fn len(&self) -> usize {
        let tail = self.block(self.tail);
        let end = tail.before().wrapping_add(tail.n() as u32);
        end.wrapping_sub(self.head_rank) as usize
    }

    /// The block holding the live entry at `rank`: the head block and the
    /// tail block first (parsing read both), then
    /// a binary search of the ranks of the blocks between; the function
    /// library searches in the same order, so that both read a block
    /// another writer damaged alike.
    fn block_of_rank(&self, rank: usize) -> usize {
        let (head, tail, rank) = (self.head_block, self.tail, rank as i64);
        if head == tail || rank < self.rank_of(head) + self.block(head).n() as i64 {
            return head;
        }
        if self.rank_of(tail) <= rank {
            return tail;
        }
        let low = head + 1;
        low + partition_point((tail - 1).saturating_sub(low), |i| {
            self.rank_of(low + 1 + i) <= rank
        })
    }

    /// The time of the live entry at `rank`, 0 the oldest. Bits that do not
    /// hold a time read as 2^53-1 (`entries` reports them as corrupt).
    pub fn time_at(&self, rank: usize) -> Option<u64> {
        let len = self.len();
        if rank >= len {
            return None;
        }
        // The newest, as parsing read it off the tail block's top; the
        // oldest, where the head is its block's first entry, that block's
        // first time (which parsing checked entry 0 holds).
        if rank == len - 1 {
            return Some(self.newest);
        }
        if rank == 0 && self.head_offset() == 0 {
            return Some(self.block(self.head_block).first());
        }
        let index = self.block_of_rank(rank);
        let within = rank as i64 - self.rank_of(index);
        let time = usize::try_from(within)
            .ok()
            .and_then(|i| self.block(index).time_of(i));
        Some(time.unwrap_or(MAX_MS))
    }

    /// Live entries at or before `time`: none before the oldest, all from
    /// the newest, otherwise a binary search of the blocks' first times
    /// and a count in one block.
    fn count_through(&self, time: u64) -> usize {
        let len = self.len();
        if time >= self.newest {
            return len;
        }
        if self.time_at(0).is_none_or(|oldest| time < oldest) {
            return 0;
        }
        let index = self.block_through(time);
        let through = self.rank_of(index) + self.block(index).count_through(time) as i64;
        through.clamp(0, len as i64) as usize
    }

    /// The last block whose first time is at most `time`: the head block
    /// where the block after it starts later (a trim's floor, mostly), the
    /// tail block where it starts no later (the newest window), otherwise
    /// a binary search of the blocks between that starts among the last
    /// SEARCHED_FIRST of them, where windows mostly end (the function
    /// library reads those at once, and searches in the same order).
    fn block_through(&self, time: u64) -> usize {
        let (head, tail) = (self.head_block, self.tail);
        if head == tail || self.block(head + 1).first() > time {
            return head;
        }
        if self.block(tail).first() <= time {
            return tail;
        }
        let (mut low, mut high) = (head + 1, tail - 1);
        if tail - head > 2 {
            let from = tail.saturating_sub(SEARCHED_FIRST).max(low);
            if self.block(from).first() <= time {
                low = from;
            } else {
                high = from - 1;
            }
        }
        low + partition_point(high - low, |i| self.block(low + 1 + i).first() <= time)
    }

    /// Live entries later than `floor`.
    pub fn count_above(&self, floor: i64) -> usize {
        match u64::try_from(floor) {
            Ok(floor) => self.len() - self.count_through(floor),
            Err(_) => self.len(),
        }
    }

    /// Every live entry, oldest first, every block checked.
    pub fn entries(&self) -> Result<Vec<u64>, FormatError> {
        let mut times = Vec::with_capacity(self.len() + self.head_offset());
        for index in self.head_block..=self.tail {
            let block = self.block(index);
            if index > self.head_block {
                let before = self.block(index - 1);
                let follows = before.before().wrapping_add(before.n() as u32) == block.before();
                if !follows || times.last().is_some_and(|&last| last > block.first()) {
                    return Err(FormatError::Slots);
                }
            }
            block.times(&mut times)?;
        }
        let free = self.value[self.tail_end()..].iter().all(|&b| b == 0);
        if !free {
            return Err(FormatError::Slots);
        }
        times.drain(..self.head_offset());
        Ok(times)
    }

    /// Where the tail block ends.
    fn tail_end(&self) -> usize {
        extent_of(self.value.len(), self.tail).end
    }

    /// Once the dead blocks before the head block are half the value's
    /// blocks or more (one dead block of 256 bytes is much of a small log),
    /// a value of the live blocks' bytes, sized for them: O(live), and so
    /// O(1) per entry ever recorded. A call's last change.
    pub fn reclaimed(&self) -> Option<Vec<u8>> {
        if self.tail == self.head_block + 1 && self.head_offset() >= self.len() {
            return self.recoded(0);
        }
        if self.head_block * 2 < self.blocks {
            return None;
        }
        let tail = self.block(self.tail);
        let live = HEADER_LEN + (self.tail - self.head_block) * BLOCK + tail.used();
        Some(self.copied(sized(live)))
    }

    /// A log whose live entries lie in its head and tail blocks (one or
    /// two), with at least as many dead ones before them: the live entries
    /// coded anew into a value of their size and `room` bytes more, O(two
    /// blocks), so O(1) per entry that died. A small sliding window so
    /// keeps about its live entries' bytes rather than a block of 256
    /// mostly dead ones. None where the blocks do not read as a log
    /// (another writer's damage): left as they are.
    fn recoded(&self, room: usize) -> Option<Vec<u8>> {
        let mut times = Vec::new();
        self.block(self.head_block).times(&mut times).ok()?;
        if self.tail != self.head_block {
            self.block(self.tail).times(&mut times).ok()?;
        }
        times.drain(..self.head_offset().min(times.len()));
        if times.len() != self.len() || times.windows(2).any(|w| w[0] > w[1]) {
            return None;
        }
        let runs: Vec<(u64, usize)> = times.iter().map(|&t| (t, 1)).collect();
        let blocks = encode(&runs, self.head_rank, None, Some(None));
        Some(laid_out(&blocks, self.head_rank, &[], room))
    }

    /// A new value of `len` bytes holding the live blocks, head block
    /// first, their bytes copied (the tail block placed in its extent).
    fn copied(&self, len: usize) -> Vec<u8> {
        let mut value = vec![0u8; len];
        let tail = self.tail - self.head_block;
        write_header(&mut value, self.head_rank, 0, tail);
        let from = extent_of(self.value.len(), self.head_block).start;
        let whole = tail * BLOCK;
        value[HEADER_LEN..HEADER_LEN + whole].copy_from_slice(&self.value[from..from + whole]);
        let to = extent_of(len, tail);
        place(self.block(self.tail).bytes, &mut value[to]);
        value
    }
}

/// The newest blocks between head and tail that a search for a time
/// looks at first.
const SEARCHED_FIRST: usize = 32;

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

fn low_mask(l: u32) -> u64 {
    (1u64 << l) - 1
}

/// first + (high << l) + low, where that is a time.
fn time_from(first: u64, l: u32, high: usize, low: u64) -> Option<u64> {
    let high = u64::try_from(high).ok()?;
    let offset = high.checked_shl(l).filter(|o| o >> l == high)?;
    first
        .checked_add(offset)?
        .checked_add(low)
        .filter(|&t| t <= MAX_MS)
}

/// floor(log2(x)) for x >= 1.
fn floor_log2(x: u64) -> u32 {
    63 - x.max(1).leading_zeros()
}

/// The `l` of a block opened at `time` after the block `before` (the
/// density of that one's entries): about log2 of the mean gap.
fn l_after(before: Block, time: u64) -> u32 {
    let gap = time.saturating_sub(before.first()) / before.n().max(1) as u64;
    floor_log2(gap).min(MAX_L)
}

/// The `l` of the head block, from the gap between its first two entries.
fn l_from_gap(first: u64, second: u64) -> u32 {
    floor_log2(second.saturating_sub(first)).min(MAX_L)
}

/// `l` bits of `bits` from bit `at`; bits past the slice read 0.
fn read_bits(bits: &[u8], at: usize, l: u32) -> u64 {
    let mut value = 0u64;
    let (mut done, l) = (0u32, l as usize);
    while (done as usize) < l {
        let bit = at + done as usize;
        let (byte, shift) = (bit / 8, bit % 8);
        let take = (8 - shift).min(l - done as usize);
        let part = bits.get(byte).map_or(0, |&b| u64::from(b) >> shift) & ((1 << take) - 1);
        value |= part << done;
        done += take as u32;
    }
    value
}

/// Writes the `l` low bits of `value` into `bits` from bit `at`, whatever
/// those bits held (free bits are zero, but another writer may have
/// damaged them).
fn write_bits(bits: &mut [u8], at: usize, l: u32, value: u64) {
    let (mut done, l) = (0usize, l as usize);
    while done < l {
        let bit = at + done;
        let (byte, shift) = (bit / 8, bit % 8);
        let take = (8 - shift).min(l - done);
        let mask = ((1u64 << take) - 1) as u8;
        let part = ((value >> done) as u8) & mask;
        bits[byte] = (bits[byte] & !(mask << shift)) | (part << shift);
        done += take;
    }
}

/// Clears the first `count` bits of `bits`.
fn clear_bits(bits: &mut [u8], count: usize) {
    let (whole, rest) = (count / 8, count % 8);
    bits[..whole].fill(0);
    if rest > 0 {
        bits[whole] &= !((1u8 << rest) - 1);
    }
}

/// Sets bit `j` of the high bit vector of the block in `block`.
fn set_high_bit(block: &mut [u8], j: usize) {
    let at = block.len() - 1 - j / 8;
    block[at] |= 1 << (j % 8);
}

fn write_header(value: &mut [u8], head_rank: u32, head_block: usize, tail: usize) {
    value[..4].copy_from_slice(&MAGIC);
    value[4] = VERSION;
    value[SHIFT_AT] = BLOCK_SHIFT;
    value[HEAD_RANK_AT].copy_from_slice(&head_rank.to_le_bytes());
    value[HEAD_BLOCK_AT].copy_from_slice(&(head_block as u32).to_le_bytes());
    value[TAIL_AT].copy_from_slice(&(tail as u32).to_le_bytes());
}

/// Encodes `runs` (ascending times, each with its count) into blocks, the
/// first of rank `before`, each block's `l` from the entries it opens with
/// (`l_ahead`). Greedy, each block filled as far as it goes; or, with
/// `spread` Some(k), the entries shared out evenly over k blocks (more only
/// where k do not hold them), so that a block split in the middle of a log
/// leaves no block nearly empty. Blocks coded through the tail (`to_tail`,
/// with the log's block before the first, if any) are where entries in
/// order go next: a last block whose `l` is read off its few entries takes
/// at least the `l` the block before it gives (see `l_after`), so that two
/// clients a millisecond apart do not leave it an `l` of 0 that the next
/// entry in order overflows.
fn encode(
    runs: &[(u64, usize)],
    before: u32,
    spread: Option<usize>,
    to_tail: Option<Option<Block>>,
) -> Vec<Building> {
    let runs: Vec<(u64, usize)> = runs.iter().copied().filter(|&(_, c)| c > 0).collect();
    let mut remaining: usize = runs.iter().map(|&(_, c)| c).sum();
    let mut blocks: Vec<Building> = Vec::new();
    // The next entry to place: `used` of run `run`'s entries are placed.
    let (mut run, mut used) = (0, 0);
    while remaining > 0 {
        let target = match spread {
            Some(k) if blocks.len() < k => remaining.div_ceil(k - blocks.len()),
            _ => remaining,
        };
        let rank = blocks.last().map_or(before, |b| {
            let b = b.view();
            b.before().wrapping_add(b.n() as u32)
        });
        let mut l = l_ahead(&runs, run, used, target);
        if let Some(after) = to_tail {
            let previous = blocks.last().map(|b| b.view()).or(after);
            if let Some(previous) = previous.filter(|_| remaining - 1 < L_FROM_AT_MOST) {
                l = l.max(l_after(previous, runs[run].0));
            }
        }
        let mut block = Building::open(runs[run].0, l, rank);
        let mut taken = 1;
        used += 1;
        while taken < target {
            if used == runs[run].1 {
                (run, used) = (run + 1, 0);
            }
            let (time, count) = runs[run];
            let pushed = block.push_run(time, (count - used).min(target - taken));
            if pushed == 0 {
                break;
            }
            taken += pushed;
            used += pushed;
        }
        if used == runs[run].1 {
            (run, used) = (run + 1, 0);
        }
        remaining -= taken;
        blocks.push(block);
    }
    blocks
}

/// The entries after a block's first that its `l` is taken from, at most.
const L_FROM_AT_MOST: usize = 64;

/// The `l` of a block that opens with entry `used` of run `run` and holds
/// at most `target` entries: log2 of the mean gap over the entries it
/// opens with (0 where they share one time, or it holds one). Each entry
/// then costs about l + 2 bits, whatever the blocks before were.
fn l_ahead(runs: &[(u64, usize)], run: usize, used: usize, target: usize) -> u32 {
    let first = runs[run].0;
    let mut wanted = (target - 1).min(L_FROM_AT_MOST);
    let mut seen = (runs[run].1 - used - 1).min(wanted);
    wanted -= seen;
    let mut last = first;
    for &(time, count) in &runs[run + 1..] {
        if wanted == 0 {
            break;
        }
        let take = count.min(wanted);
        (seen, wanted, last) = (seen + take, wanted - take, time);
    }
    if seen == 0 {
        return 0;
    }
    floor_log2((last - first) / seen as u64).min(MAX_L)
}

/// A new value holding `count` entries at `time`: blocks of equal times,
/// `l` 0, one bit an entry.
pub fn new_log(time: u64, count: usize) -> Vec<u8> {
    let blocks = encode(&[(time, count)], 0, None, None);
    laid_out(&blocks, 0, &[], 0)
}

/// A value of `blocks` after the whole blocks `kept` (bytes, 256 each),
/// the first of them the head block, with head rank `head_rank`, sized
/// for them and `room` bytes more.
fn laid_out(blocks: &[Building], head_rank: u32, kept: &[u8], room: usize) -> Vec<u8> {
    let last = blocks.last().map_or(0, |b| b.view().used());
    let count = kept.len() / BLOCK + blocks.len();
    let len = sized(HEADER_LEN + (count - 1) * BLOCK + last + room);
    let mut value = vec![0u8; len];
    write_header(&mut value, head_rank, 0, count - 1);
    value[HEADER_LEN..HEADER_LEN + kept.len()].copy_from_slice(kept);
    for (i, block) in blocks.iter().enumerate() {
        let extent = extent_of(len, kept.len() / BLOCK + i);
        block.place(&mut value[extent]);
    }
    value
}

/// Removes every entry at or before `floor`: moves the head, O(log N).
pub fn trim_through(value: &mut [u8], floor: i64) -> Result<Change, FormatError> {
    move_head(value, |log| log.len() - log.count_above(floor))
}

/// Drops the oldest entries until at most `max_entries` are left.
pub fn cap_to(value: &mut [u8], max_entries: u64) -> Result<Change, FormatError> {
    let keep = usize::try_from(max_entries).unwrap_or(usize::MAX);
    move_head(value, |log| log.len() - log.len().min(keep))
}

/// Moves the head forward by the number of entries `dropped` says.
fn move_head(value: &mut [u8], dropped: impl FnOnce(&Log) -> usize) -> Result<Change, FormatError> {
    let (rank, block) = {
        let log = Log::parse(value)?;
        let dropped = dropped(&log);
        if dropped == 0 {
            return Ok(Change::Nothing);
        }
        if dropped >= log.len() {
            return Ok(Change::Emptied);
        }
        let rank = log.head_rank.wrapping_add(dropped as u32);
        let block = log.block_of_rank(dropped);
        // A block between head and tail that another writer damaged may be
        // found here: refused as the next parse would refuse it, before
        // anything is written.
        log.check_head(rank, block)?;
        (rank, block)
    };
    value[HEAD_RANK_AT].copy_from_slice(&rank.to_le_bytes());
    value[HEAD_BLOCK_AT].copy_from_slice(&(block as u32).to_le_bytes());
    Ok(Change::InPlace(HEAD_AT))
}

/// Removes the `count` newest entries, O(count) bits: freeing the tail
/// block's last fields and bits, and whole blocks emptied; removing all
/// of them empties the log.
pub fn drop_newest(value: &mut [u8], count: u64) -> Result<Change, FormatError> {
    let (mut tail, head_block, first_changed) = {
        let log = Log::parse(value)?;
        let count = usize::try_from(count).unwrap_or(usize::MAX);
        if count >= log.len() {
            return Ok(Change::Emptied);
        }
        (log.tail, log.head_block, log.len() - count)
    };
    let old_tail = tail;
    let len = value.len();
    // `keep`: live entries to keep; the blocks after the one holding the
    // last of them are freed whole. Everything is read and checked before
    // anything is written: a failed call leaves the value as it was.
    let (keep_block, keep_n, n, l, top, last_kept) = {
        let log = Log::parse(value)?;
        let index = log.block_of_rank(first_changed - 1);
        let within = first_changed as i64 - log.rank_of(index);
        let keep_n = usize::try_from(within).map_err(|_| FormatError::Slots)?;
        let view = log.block(index);
        view.check_ends()?;
        if keep_n == 0 || keep_n > view.n() || head_block > index {
            return Err(FormatError::Slots);
        }
        let last_kept = view.select(keep_n - 1).ok_or(FormatError::Slots)?;
        let (n, l, top) = (view.n(), view.l() as usize, view.top());
        (index, keep_n, n, l, top, last_kept)
    };
    for index in keep_block + 1..=old_tail {
        value[extent_of(len, index)].fill(0);
    }
    tail = keep_block;
    let extent = extent_of(len, tail);
    let block = &mut value[extent.clone()];
    if keep_n < n {
        // Clear the low fields and the high bits past the last kept entry.
        let end = block.len();
        for bit in keep_n * l..n * l {
            block[BLOCK_HEADER + bit / 8] &= !(1 << (bit % 8));
        }
        for j in last_kept + 1..top + n {
            block[end - 1 - j / 8] &= !(1 << (j % 8));
        }
        let top = last_kept - (keep_n - 1);
        block[N_AT].copy_from_slice(&(keep_n as u16).to_le_bytes());
        block[TOP_AT].copy_from_slice(&(top as u16).to_le_bytes());
    }
    let changed = extent.start + N_AT.start..extent_of(len, old_tail).end;
    if tail == old_tail {
        return Ok(Change::InPlace(changed));
    }
    value[TAIL_AT].copy_from_slice(&(tail as u32).to_le_bytes());
    Ok(Change::Ranges(vec![TAIL_AT, changed]))
}

/// Adds `count` entries at `time` (`value` None: a new log). Entries no
/// older than the newest go into the tail block where it has room, one
/// entry into the block after it: O(count) bits. Where the value has no
/// room for them, its live blocks are copied into a larger one (amortised
/// O(1): an eighth more). Anything else (an older entry, or several that
/// overflow the tail block) codes the block it goes into anew, bounded,
/// and moves the blocks after it up as bytes.
pub fn record(value: Option<&mut [u8]>, time: u64, count: u64) -> Result<Change, FormatError> {
    let count = usize::try_from(count).unwrap_or(usize::MAX);
    if count == 0 {
        return Ok(Change::Nothing);
    }
    let Some(value) = value else {
        return Ok(Change::Replace(new_log(time, count)));
    };
    let newest = Log::parse(value)?.newest;
    if time < newest && count == 1 {
        if let Some(change) = insert_in_place(value, time) {
            return Ok(change);
        }
    }
    if time >= newest {
        if let Some(change) = append(value, time, count) {
            return Ok(change);
        }
        // Where the value has no room: its live blocks copied into a larger
        // one, the tail block's extent grown where it was short.
        let grown = {
            let log = Log::parse(value)?;
            let tail_extent = extent_of(value.len(), log.tail).len();
            let live = HEADER_LEN + (log.tail - log.head_block) * BLOCK + tail_extent;
            // One block, mostly dead entries: its live ones coded anew
            // rather than copied with the dead.
            let mostly_dead = log.tail == log.head_block && log.head_offset() >= log.len();
            let recoded = (count == 1 && mostly_dead)
                .then(|| log.recoded(MIN_EXTENT))
                .flatten();
            recoded.unwrap_or_else(|| log.copied(sized(live + MIN_EXTENT)))
        };
        let mut grown = grown;
        if append(&mut grown, time, count).is_some() {
            return Ok(Change::Replace(grown));
        }
    }
    insert(value, time, count)
}

/// Records `count` entries no older than the newest in place, where the
/// tail block takes them all, or (one entry) a free block after it.
fn append(value: &mut [u8], time: u64, count: usize) -> Option<Change> {
    let len = value.len();
    let (index, first, n, old_l, l, fits, opened, blocks) = {
        let log = Log::parse(value).ok()?;
        let tail = log.block(log.tail);
        let (first, n) = (tail.first(), tail.n());
        // A head block whose entries all sit at its first time (one entry,
        // or several recorded at once into a new log) has no low bits to
        // keep: its `l` comes from the gap to the first later time.
        let at_first = n == 1 || (tail.l() == 0 && tail.top() == 0);
        let l = if at_first && log.tail == log.head_block {
            l_from_gap(first, time)
        } else {
            tail.l()
        };
        let h = ((time - first) >> l) as usize;
        let fits =
            n + count <= MAX_N && h <= MAX_N && used_bytes(n + count, l, h) <= tail.bytes.len();
        let next_l = l_after(tail, time);
        let opened = Building::open(time, next_l, tail.before().wrapping_add(n as u32));
        (log.tail, first, n, tail.l(), l, fits, opened, log.blocks)
    };
    if fits {
        let v = time - first;
        let h = (v >> l) as usize;
        let extent = extent_of(len, index);
        let block = &mut value[extent.clone()];
        block[L_AT] = l as u8;
        if l != old_l {
            // The entries there, all at the first time, have low fields of
            // zero under the new `l` too, whatever the free bits held.
            clear_bits(&mut block[BLOCK_HEADER..], n * l as usize);
        }
        for i in n..n + count {
            write_bits(
                &mut block[BLOCK_HEADER..],
                i * l as usize,
                l,
                v & low_mask(l),
            );
            set_high_bit(block, h + i);
        }
        block[N_AT].copy_from_slice(&((n + count) as u16).to_le_bytes());
        block[TOP_AT].copy_from_slice(&(h as u16).to_le_bytes());
        let from = extent.start + if l == old_l { N_AT.start } else { L_AT };
        let to = extent.end - (h + n) / 8;
        return Some(Change::InPlace(from..to));
    }
    let next = index + 1;
    if count > 1 || next >= blocks {
        return None;
    }
    let extent = extent_of(len, next);
    opened.place(&mut value[extent.clone()]);
    value[TAIL_AT].copy_from_slice(&(next as u32).to_le_bytes());
    Some(Change::Ranges(vec![TAIL_AT, extent]))
}

/// Records one entry at `time`, older than the newest, into the block
/// that holds the entries around it, where it has room and the entry
/// does not open it: the block's later low fields move up a field and its
/// later high bits up a bit, as they lie (bits another writer changed
/// too, as the library moves them), and the blocks after it count one more
/// entry before them: O(block) but for those ranks. A client a little
/// behind then costs about what one in order does. None where it does not
/// go so.
fn insert_in_place(value: &mut [u8], time: u64) -> Option<Change> {
    let (extent, at, v, l, n, top, index, tail) = {
        let log = Log::parse(value).ok()?;
        let through = log.count_through(time);
        if through >= log.len() {
            return None;
        }
        let index = log.block_of_rank(through);
        let block = log.block(index);
        // Its place among the block's entries, after at least one live one.
        let at = usize::try_from(through as i64 - log.rank_of(index)).ok()?;
        let after_live = if index == log.head_block {
            log.head_offset()
        } else {
            0
        };
        let (n, top) = (block.n(), block.top());
        let l = u32::from(block.bytes[L_AT]);
        if at <= after_live || at > n || l > MAX_L || n >= MAX_N {
            return None;
        }
        let v = time.checked_sub(block.first())?;
        let h = usize::try_from(v >> l).ok().filter(|&h| h <= MAX_N)?;
        let fits_order = if at == n { h >= top } else { h <= top };
        let new_top = if at == n { h } else { top };
        if !fits_order || used_bytes(n + 1, l, new_top) > block.bytes.len() {
            return None;
        }
        (
            extent_of(value.len(), index),
            at,
            v,
            l,
            n,
            top,
            index,
            log.tail,
        )
    };
    let block = &mut value[extent.clone()];
    let low = &mut block[BLOCK_HEADER..];
    let width = l as usize;
    move_bits_up(low, at * width, n * width, width);
    write_bits(low, at * width, l, v & low_mask(l));
    // The high bits, read from the block's end, in a buffer where bit j is
    // bit j mod 8 of byte j div 8.
    let h = (v >> l) as usize;
    let high_len = (top.max(h) + n + 1).div_ceil(8);
    let end = block.len();
    let mut high: Vec<u8> = (0..high_len).map(|k| block[end - 1 - k]).collect();
    move_bits_up(&mut high, h + at, top + n, 1);
    high[(h + at) / 8] |= 1 << ((h + at) % 8);
    for (k, &byte) in high.iter().enumerate() {
        block[end - 1 - k] = byte;
    }
    let new_top = if at == n { h } else { top };
    block[N_AT].copy_from_slice(&((n + 1) as u16).to_le_bytes());
    block[TOP_AT].copy_from_slice(&(new_top as u16).to_le_bytes());
    // Each block after it has one more entry before it.
    let len = value.len();
    for i in index + 1..=tail {
        let at = extent_of(len, i).start + BEFORE_AT.start;
        let before = read_u32(&value[at..at + 4]).wrapping_add(1);
        value[at..at + 4].copy_from_slice(&before.to_le_bytes());
    }
    Some(Change::InPlace(
        extent.start + N_AT.start..extent_of(len, tail).end,
    ))
}

/// Moves bits `from..to` of `bits` up by `by`, whatever they hold: bits
/// `to..to + by` take the last of them, and the rest stay as they were.
fn move_bits_up(bits: &mut [u8], from: usize, to: usize, by: usize) {
    let mut end = to;
    while end > from {
        let len = (end - from).min(56);
        let start = end - len;
        let chunk = read_bits(bits, start, len as u32);
        write_bits(bits, start + by, len as u32, chunk);
        end = start;
    }
}

/// Codes the block `time` goes into anew, with `count` more entries at
/// `time`, together with the (up to RECODED_AFTER_AT_MOST) blocks after
/// it: bounded but for a large count. Where they end at the tail block
/// they are filled in order, the last one left for appends; elsewhere the
/// entries are shared out evenly over as many blocks as they take, so that
/// entries arriving behind the newest fill the blocks around them rather
/// than split off nearly empty ones. The blocks after move up by the
/// blocks added (down by those saved), as bytes, each counting `count`
/// more entries before it.
/// In place where the value has room, otherwise into a new value (the
/// blocks before copied as bytes).
fn insert(value: &mut [u8], time: u64, count: usize) -> Result<Change, FormatError> {
    let len = value.len();
    let (index, last, blocks, head_rank, head_block, tail) = {
        let log = Log::parse(value)?;
        let through = log.count_through(time);
        let index = if through >= log.len() {
            log.tail
        } else {
            log.block_of_rank(through)
        };
        // The blocks after it while their entries are few: a recode's
        // cost is its entries (dense blocks hold up to 1,920).
        let mut last = index;
        let mut entries = log.block(index).n();
        while last < log.tail && last - index < RECODED_AFTER_AT_MOST {
            entries += log.block(last + 1).n();
            if entries > RECODED_ENTRIES_AT_MOST {
                break;
            }
            last += 1;
        }
        let mut times = Vec::new();
        for i in index..=last {
            log.block(i).times(&mut times)?;
        }
        let from_rank = log.rank_of(index).max(0);
        if index == log.head_block {
            times.drain(..log.head_offset().min(times.len()));
        }
        let at = usize::try_from(through as i64 - from_rank).map_err(|_| FormatError::Slots)?;
        let at = at.min(times.len());
        let mut runs: Vec<(u64, usize)> = times.iter().map(|&t| (t, 1)).collect();
        runs.insert(at, (time, count));
        if runs.windows(2).any(|w| w[0].0 > w[1].0) {
            return Err(FormatError::Slots);
        }
        let before = log.head_rank.wrapping_add(from_rank as u32);
        // Through the tail filled in order; elsewhere shared out evenly over
        // as many blocks as they take filled in order.
        let blocks = if last == log.tail {
            let after = (index > log.head_block).then(|| log.block(index - 1));
            encode(&runs, before, None, Some(after))
        } else {
            let taken = encode(&runs, before, None, None).len();
            encode(&runs, before, Some(taken), None)
        };
        (index, last, blocks, log.head_rank, log.head_block, log.tail)
    };
    if last == tail {
        return recode_to_tail(value, index, &blocks, head_rank, head_block, tail);
    }
    // The blocks after the recoded ones move up or down by the blocks the
    // recode added or saved; the tail block lands in its new extent.
    let new_tail = index + blocks.len() + (tail - last) - 1;
    let tail_block = value[extent_of(len, tail)].to_vec();
    let last_used = Block { bytes: &tail_block }.used();
    let bumped = |block: &mut [u8]| {
        let before = read_u32(&block[BEFORE_AT]).wrapping_add(count as u32);
        block[BEFORE_AT].copy_from_slice(&before.to_le_bytes());
    };
    // The blocks after the recoded ones, but the tail block: whole.
    let from = extent_of(len, last + 1).start;
    let whole_after = (tail - last - 1) * BLOCK;
    if new_tail >= blocks_in(len) || last_used > extent_of(len, new_tail).len() {
        // A new value: the blocks before, the new ones, the ones after.
        let kept_from = extent_of(len, head_block).start;
        let kept = &value[kept_from..kept_from + (index - head_block) * BLOCK];
        let count_blocks = (index - head_block) + blocks.len() + (tail - last);
        let needed = HEADER_LEN + (count_blocks - 1) * BLOCK + last_used;
        let new_len = sized(needed);
        let mut grown = vec![0u8; new_len];
        write_header(&mut grown, head_rank, 0, count_blocks - 1);
        grown[HEADER_LEN..HEADER_LEN + kept.len()].copy_from_slice(kept);
        let first_new = index - head_block;
        for (i, block) in blocks.iter().enumerate() {
            block.place(&mut grown[extent_of(new_len, first_new + i)]);
        }
        let to = extent_of(new_len, first_new + blocks.len()).start;
        grown[to..to + whole_after].copy_from_slice(&value[from..from + whole_after]);
        place(
            &tail_block,
            &mut grown[extent_of(new_len, count_blocks - 1)],
        );
        for i in first_new + blocks.len()..count_blocks {
            bumped(&mut grown[extent_of(new_len, i)]);
        }
        return Ok(Change::Replace(grown));
    }
    let to = extent_of(len, index + blocks.len()).start;
    value.copy_within(from..from + whole_after, to);
    place(&tail_block, &mut value[extent_of(len, new_tail)]);
    // Blocks the recode saved, at the tail's end, are free again.
    for i in new_tail + 1..=tail {
        value[extent_of(len, i)].fill(0);
    }
    for i in index + blocks.len()..=new_tail {
        bumped(&mut value[extent_of(len, i)]);
    }
    for (i, block) in blocks.iter().enumerate() {
        block.place(&mut value[extent_of(len, index + i)]);
    }
    let changed = extent_of(len, index).start..extent_of(len, new_tail.max(tail)).end;
    if new_tail == tail {
        return Ok(Change::InPlace(changed));
    }
    value[TAIL_AT].copy_from_slice(&(new_tail as u32).to_le_bytes());
    Ok(Change::Ranges(vec![TAIL_AT, changed]))
}

/// The blocks after the one a time goes into that are coded anew with it
/// (see `insert`), while they hold at most RECODED_ENTRIES_AT_MOST entries
/// with it: sparse blocks, which few entries fill, are shared out over
/// more of them.
const RECODED_AFTER_AT_MOST: usize = 4;
const RECODED_ENTRIES_AT_MOST: usize = 1024;

/// Puts `blocks`, the blocks from `index` to the tail coded anew, in place
/// of those, where the value has room; otherwise into a new value, the
/// blocks before copied as bytes.
fn recode_to_tail(
    value: &mut [u8],
    index: usize,
    blocks: &[Building],
    head_rank: u32,
    head_block: usize,
    tail: usize,
) -> Result<Change, FormatError> {
    let len = value.len();
    let last = index + blocks.len() - 1;
    let fits = last < blocks_in(len)
        && blocks
            .last()
            .is_some_and(|b| b.view().used() <= extent_of(len, last).len());
    if !fits {
        let start = extent_of(len, head_block).start;
        let kept = &value[start..start + (index - head_block) * BLOCK];
        return Ok(Change::Replace(laid_out(blocks, head_rank, kept, 0)));
    }
    for (i, block) in blocks.iter().enumerate() {
        block.place(&mut value[extent_of(len, index + i)]);
    }
    for i in last + 1..=tail {
        value[extent_of(len, i)].fill(0);
    }
    let changed = extent_of(len, index).start..extent_of(len, last.max(tail)).end;
    if last == tail {
        return Ok(Change::InPlace(changed));
    }
    value[TAIL_AT].copy_from_slice(&(last as u32).to_le_bytes());
    Ok(Change::Ranges(vec![TAIL_AT, changed]))
}

fn read_u16(bytes: &[u8]) -> u16 {
    u16::from_le_bytes([bytes[0], bytes[1]])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::pairs::Pair;
    use crate::format::Version;
    use crate::window::tests::XorShift;

    /// What ends every call in version 2: the live blocks copied down,
    /// the value filling its allocation.
    fn reclaimed_as_copies(_was: &[u8], now: &[u8]) {
        assert_eq!(Log::parse(now).unwrap().head_block, 0);
        assert_eq!(now.len(), filling_allocation(now.len()));
    }

    #[test]
    fn a_new_log_has_the_documented_layout() {
        let value = new_log(100_000, 1);
        assert_eq!(value.len(), 60);
        assert_eq!(&value[..8], b"SWLc\x02\x08\x00\x00");
        // Head rank 0, head block 0, tail block 0.
        assert_eq!(value[8..24], [0; 16]);
        // The block: first, l 0, before 0, n 1, top 0.
        assert_eq!(value[24..31], 100_000u64.to_le_bytes()[..7]);
        assert_eq!(value[31..36], [0; 5]);
        assert_eq!(value[36..40], [1, 0, 0, 0]);
        // Entry 0 sets bit 0 of the high bit vector: the value's last byte.
        assert_eq!(value[59], 1);
        assert!(value[40..59].iter().all(|&b| b == 0));
        assert_eq!(Log::parse(&value).unwrap().entries(), Ok(vec![100_000]));
    }

    #[test]
    fn a_tail_rank_past_what_the_blocks_between_hold_is_refused() {
        // Entries a second apart until the log has three blocks.
        let mut value = new_log(1_000_000, 1);
        let mut time = 1_000_000;
        while Log::parse(&value).unwrap().tail < 2 {
            time += 1000;
            if let Change::Replace(grown) = record(Some(&mut value), time, 1).unwrap() {
                value = grown;
            }
        }
        let head_n = Log::parse(&value).unwrap().block(0).n() as u32;
        let at = extent_of(value.len(), 2).start + BEFORE_AT.start;
        let rank = read_u32(&value[at..at + 4]);
        assert!(rank > head_n && rank <= head_n + MOST_PER_BLOCK as u32);
        // Block 1 holds at least none and at most a whole block's entries.
        let most = head_n + MOST_PER_BLOCK as u32;
        for (stored, parses) in [
            (head_n, true),
            (most, true),
            (head_n - 1, false),
            (most + 1, false),
            (u32::MAX, false),
        ] {
            let mut damaged = value.clone();
            damaged[at..at + 4].copy_from_slice(&stored.to_le_bytes());
            assert_eq!(Log::parse(&damaged).is_ok(), parses, "tail rank {stored}");
        }
    }

    #[test]
    fn the_second_entry_fixes_the_head_blocks_l_and_is_coded_in_place() {
        let mut value = new_log(100_000, 1);
        // A gap of 1,000 ms: l 9 (512), so high part 1 and low part 488.
        let change = record(Some(&mut value), 101_000, 1).unwrap();
        assert_eq!(change, Change::InPlace(24 + 7..60));
        assert_eq!(value[31], 9);
        assert_eq!(value[36..40], [2, 0, 1, 0]);
        assert_eq!(read_bits(&value[40..], 9, 9), 488);
        // Bits 0 (entry 0) and 1 + 1 (entry 1).
        assert_eq!(value[59], 0b101);
        assert_eq!(
            Log::parse(&value).unwrap().entries(),
            Ok(vec![100_000, 101_000])
        );
    }

    #[test]
    fn entries_recorded_at_once_into_a_new_log_leave_its_l_to_the_next_time() {
        // COST 3 on a new log: three entries at its first time, l 0.
        let mut value = new_log(100_000, 3);
        assert_eq!((value[31], value[59]), (0, 0b111));
        // Free bits another writer set where the low fields will go.
        value[40] = 0xff;
        // A gap of 1,000 ms: l 9, in place, as for a log of one entry; the
        // three entries' low fields written zero, the new one's 488.
        let change = record(Some(&mut value), 101_000, 1).unwrap();
        assert_eq!(change, Change::InPlace(24 + 7..60));
        assert_eq!(value[31], 9);
        assert_eq!(value[36..40], [4, 0, 1, 0]);
        assert_eq!(read_bits(&value[40..], 0, 27), 0);
        assert_eq!(read_bits(&value[40..], 27, 9), 488);
        // Bits 0, 1, 2 (the first three) and 1 + 3 (the new one).
        assert_eq!(value[59], 0b10111);
        assert_eq!(
            Log::parse(&value).unwrap().entries(),
            Ok(vec![100_000, 100_000, 100_000, 101_000])
        );
    }

    #[test]
    fn steady_arrivals_cost_under_two_bytes_an_entry() {
        let mut pair = Pair::new(Version::Packed);
        let mut rng = XorShift(42);
        let mut t = 1_700_000_000_000u64;
        for _ in 0..10_000 {
            t += 1 + rng.below(1999);
            pair.record(t, 1);
        }
        pair.check("poisson-ish");
        let len = pair.value.as_ref().unwrap().len();
        assert!(len < 20_000, "{len} bytes for 10,000 entries");
    }

    #[test]
    fn random_changes_keep_the_log_equal_to_a_sorted_vector() {
        for seed in 1..=40u64 {
            let mut rng = XorShift(seed * 7919);
            let mut pair = Pair::new(Version::Packed);
            let mut now = 1_000_000u64 + rng.below(1 << 40);
            let gap = 1 + rng.below(5000);
            for step in 0..600 {
                let context = format!("seed {seed} step {step}");
                match rng.below(20) {
                    0..=9 => {
                        now += rng.below(gap);
                        pair.record(now, 1);
                    }
                    10 => pair.record(now.saturating_sub(rng.below(3 * gap)), 1),
                    11 => pair.record(now, 1 + rng.below(if seed % 5 == 0 { 3000 } else { 20 })),
                    12 => pair.record(now.saturating_sub(rng.below(50 * gap)), 1 + rng.below(5)),
                    13..=15 => pair.trim_through(now as i64 - (rng.below(300) * gap) as i64),
                    16 => pair.cap_to(rng.below(400)),
                    17 => pair.drop_newest(rng.below(30)),
                    _ => {
                        let shift = rng.below(40);
                        now += rng.below(1 << shift);
                        pair.record(now, 1);
                    }
                }
                pair.reclaim(reclaimed_as_copies);
                if step % 25 == 0 || seed < 4 {
                    pair.check(&context);
                    if let Some(value) = &pair.value {
                        let len = value.len();
                        assert_eq!(len, filling_allocation(len), "{context}: allocation");
                    }
                }
            }
            pair.check(&format!("seed {seed}"));
        }
    }

    #[test]
    fn times_past_the_width_of_a_block_and_up_to_2_53_are_kept() {
        let mut pair = Pair::new(Version::Packed);
        for t in [
            0,
            1,
            1 << 33,
            (1 << 40) + 5,
            MAX_MS - 10,
            MAX_MS - 10,
            MAX_MS,
        ] {
            pair.record(t, 1);
            pair.check(&format!("{t}"));
        }
        pair.record(5, 3);
        pair.check("out of order");
    }

    #[test]
    fn a_large_cost_on_a_new_log_takes_a_bit_an_entry() {
        let value = new_log(1 << 45, 100_000);
        // A bit and a fraction an entry, with an eighth of spare room.
        assert!(value.len() < 100_000 * 3 / 16, "{}", value.len());
        let log = Log::parse(&value).unwrap();
        assert_eq!(log.len(), 100_000);
        assert_eq!(log.count_above((1 << 45) - 1), 100_000);
        assert_eq!(log.count_above(1 << 45), 0);
        assert_eq!(log.time_at(99_999), Some(1 << 45));
    }

    #[test]
    fn damaged_blocks_are_refused_and_reads_stay_in_bounds() {
        let mut rng = XorShift(99);
        let mut pair = Pair::new(Version::Packed);
        let mut t = 5_000_000u64;
        for _ in 0..3000 {
            t += rng.below(400);
            pair.record(t, 1);
        }
        let good = pair.value.clone().unwrap();
        for round in 0..3000 {
            let mut bad = good.clone();
            for _ in 0..1 + rng.below(4) {
                let at = rng.below(bad.len() as u64) as usize;
                bad[at] = rng.below(256) as u8;
            }
            if round % 3 == 0 {
                let at = 24 + rng.below(40) as usize * BLOCK + rng.below(16) as usize;
                if at < bad.len() {
                    bad[at] ^= 1 << rng.below(8);
                }
            }
            // Nothing panics, whatever the bytes.
            if let Ok(log) = Log::parse(&bad) {
                let _ = log.entries();
                let _ = (
                    log.len(),
                    log.count_above(t as i64 - 500_000),
                    log.time_at(7),
                );
                let _ = log.reclaimed();
            }
            let floor = t as i64 - rng.below(600_000) as i64;
            let _ = trim_through(&mut bad.clone(), floor);
            let _ = cap_to(&mut bad.clone(), rng.below(4000));
            let _ = drop_newest(&mut bad.clone(), rng.below(100));
            let _ = record(Some(&mut bad.clone()), t + rng.below(1000), 1);
            let _ = record(
                Some(&mut bad.clone()),
                t - rng.below(100_000),
                1 + rng.below(3),
            );
        }
    }
}
