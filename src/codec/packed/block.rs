//! Reading one block in place: its header fields, its low fields and
//! high bits, and the searches within it.

use super::*;

/// One block's bytes: its extent, 32 to 256 bytes.
#[derive(Debug, Clone, Copy)]
pub(super) struct Block<'a> {
    pub(super) bytes: &'a [u8],
}

impl<'a> Block<'a> {
    pub(super) fn first(&self) -> u64 {
        let mut word = [0u8; 8];
        word[..7].copy_from_slice(&self.bytes[..7]);
        u64::from_le_bytes(word)
    }

    /// `l` as stored (`check_ends` refuses one over 52), at most 63 so
    /// that reading a damaged block shifts within a word.
    pub(super) fn l(&self) -> u32 {
        u32::from(self.bytes[L_AT]).min(63)
    }

    pub(super) fn before(&self) -> u32 {
        read_u32(&self.bytes[BEFORE_AT])
    }

    pub(super) fn n(&self) -> usize {
        usize::from(read_u16(&self.bytes[N_AT]))
    }

    pub(super) fn top(&self) -> usize {
        usize::from(read_u16(&self.bytes[TOP_AT]))
    }

    pub(super) fn payload(&self) -> usize {
        self.bytes.len() - BLOCK_HEADER
    }

    /// Byte `k` of the high bit vector, counted from the block's end; 0
    /// past the payload.
    pub(super) fn high_byte(&self, k: usize) -> u8 {
        if k < self.payload() {
            self.bytes[self.bytes.len() - 1 - k]
        } else {
            0
        }
    }

    pub(super) fn high_bit(&self, j: usize) -> bool {
        self.high_byte(j / 8) >> (j % 8) & 1 == 1
    }

    /// Entry i's low part.
    pub(super) fn low(&self, i: usize) -> u64 {
        read_bits(&self.bytes[BLOCK_HEADER..], i * self.l() as usize, self.l())
    }

    /// The bytes its entries take, header included.
    pub(super) fn used(&self) -> usize {
        used_bytes(self.n(), self.l(), self.top())
    }

    /// The position of the high bit of entry `i`.
    pub(super) fn select(&self, i: usize) -> Option<usize> {
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
    pub(super) fn time_of(&self, i: usize) -> Option<u64> {
        let high = self.select(i)?.checked_sub(i)?;
        time_from(self.first(), self.l(), high, self.low(i))
    }

    /// Entries at or before `t`, assuming t < the first time of the block
    /// after it; reads at most the payload.
    pub(super) fn count_through(&self, t: u64) -> usize {
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
    pub(super) fn check_ends(&self) -> Result<u64, FormatError> {
        let n = self.n();
        if n == 0
            || u32::from(self.bytes[L_AT]) > MAX_L
            || self.first() > MAX_MS
            || self.used() > self.bytes.len()
        {
            return Err(FormatError::Block);
        }
        let last_bit = self.top() + n - 1;
        if !self.high_bit(last_bit) || !self.high_bit(0) || self.low(0) != 0 {
            return Err(FormatError::Block);
        }
        time_from(self.first(), self.l(), self.top(), self.low(n - 1)).ok_or(FormatError::Block)
    }

    /// Every entry's time, each bit checked: the entries a well-formed
    /// block holds, and nothing else in its bytes.
    pub(super) fn times(&self, into: &mut Vec<u64>) -> Result<(), FormatError> {
        self.check_ends()?;
        let (n, l, top) = (self.n(), self.l(), self.top());
        let (first, start) = (self.first(), into.len());
        let mut i = 0;
        for j in 0..top + n {
            if self.high_bit(j) {
                let time = time_from(first, l, j - i, self.low(i)).ok_or(FormatError::Block)?;
                if into.len() > start && into.last().is_some_and(|&last| last > time) {
                    return Err(FormatError::Block);
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
            Err(FormatError::Block)
        }
    }
}

pub(super) fn low_mask(l: u32) -> u64 {
    (1u64 << l) - 1
}

/// first + (high << l) + low, where that is a time.
pub(super) fn time_from(first: u64, l: u32, high: usize, low: u64) -> Option<u64> {
    let high = u64::try_from(high).ok()?;
    let offset = high.checked_shl(l).filter(|o| o >> l == high)?;
    first
        .checked_add(offset)?
        .checked_add(low)
        .filter(|&t| t <= MAX_MS)
}

/// floor(log2(x)) for x >= 1.
pub(super) fn floor_log2(x: u64) -> u32 {
    63 - x.max(1).leading_zeros()
}

/// The `l` of a block opened at `time` after the block `before` (the
/// density of that one's entries): about log2 of the mean gap.
pub(super) fn l_after(before: Block, time: u64) -> u32 {
    let gap = time.saturating_sub(before.first()) / before.n().max(1) as u64;
    floor_log2(gap).min(MAX_L)
}

/// The `l` of the head block, from the gap between its first two entries.
pub(super) fn l_from_gap(first: u64, second: u64) -> u32 {
    floor_log2(second.saturating_sub(first)).min(MAX_L)
}

/// `l` bits of `bits` from bit `at`; bits past the slice read 0.
pub(super) fn read_bits(bits: &[u8], at: usize, l: u32) -> u64 {
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
