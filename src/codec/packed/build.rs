//! Building blocks (`Building`), the bit writers, coding runs of times
//! into blocks, and laying blocks out as a new value.

use super::*;

/// A block under construction: 256 bytes whose high bits sit at the end,
/// placed in a value's block of any extent that holds what it uses.
pub(super) struct Building {
    pub(super) bytes: [u8; BLOCK],
}

impl Building {
    /// A block opened by `count` entries at `time`.
    pub(super) fn open(time: u64, l: u32, before: u32) -> Self {
        let mut bytes = [0u8; BLOCK];
        bytes[..7].copy_from_slice(&time.to_le_bytes()[..7]);
        bytes[L_AT] = l as u8;
        bytes[BEFORE_AT].copy_from_slice(&before.to_le_bytes());
        bytes[N_AT].copy_from_slice(&1u16.to_le_bytes());
        bytes[BLOCK - 1] = 1;
        Building { bytes }
    }

    pub(super) fn view(&self) -> Block<'_> {
        Block { bytes: &self.bytes }
    }

    /// Adds up to `count` entries at `time` (no older than its newest) as
    /// fit; returns how many did.
    pub(super) fn push_run(&mut self, time: u64, count: usize) -> usize {
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

    pub(super) fn set_counts(&mut self, n: usize, top: usize) {
        self.bytes[N_AT].copy_from_slice(&(n as u16).to_le_bytes());
        self.bytes[TOP_AT].copy_from_slice(&(top as u16).to_le_bytes());
    }

    /// Writes this block into `extent` (at least what it uses): the
    /// header and low fields at the front, the high bits at the end.
    pub(super) fn place(&self, extent: &mut [u8]) {
        place(&self.bytes, extent);
    }
}

/// Writes the block in `from` (any extent) into `to` (an extent holding
/// what it uses; zero beyond it).
pub(super) fn place(from: &[u8], to: &mut [u8]) {
    let block = Block { bytes: from };
    let low_end = BLOCK_HEADER + (block.n() * block.l() as usize).div_ceil(8);
    let high_len = (block.top() + block.n()).div_ceil(8);
    to.fill(0);
    to[..low_end].copy_from_slice(&from[..low_end]);
    let (to_len, from_len) = (to.len(), from.len());
    to[to_len - high_len..].copy_from_slice(&from[from_len - high_len..]);
}

/// Writes the `l` low bits of `value` into `bits` from bit `at`, whatever
/// those bits held (free bits are zero, but another writer may have
/// damaged them).
pub(super) fn write_bits(bits: &mut [u8], at: usize, l: u32, value: u64) {
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
pub(super) fn clear_bits(bits: &mut [u8], count: usize) {
    let (whole, rest) = (count / 8, count % 8);
    bits[..whole].fill(0);
    if rest > 0 {
        bits[whole] &= !((1u8 << rest) - 1);
    }
}

/// Sets bit `j` of the high bit vector of the block in `block`.
pub(super) fn set_high_bit(block: &mut [u8], j: usize) {
    let at = block.len() - 1 - j / 8;
    block[at] |= 1 << (j % 8);
}

pub(super) fn write_header(value: &mut [u8], head_rank: u32, head_block: usize, tail: usize) {
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
pub(super) fn encode(
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
pub(super) const L_FROM_AT_MOST: usize = 64;

/// The `l` of a block that opens with entry `used` of run `run` and holds
/// at most `target` entries: log2 of the mean gap over the entries it
/// opens with (0 where they share one time, or it holds one). Each entry
/// then costs about l + 2 bits, whatever the blocks before were.
pub(super) fn l_ahead(runs: &[(u64, usize)], run: usize, used: usize, target: usize) -> u32 {
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
pub(super) fn laid_out(blocks: &[Building], head_rank: u32, kept: &[u8], room: usize) -> Vec<u8> {
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
