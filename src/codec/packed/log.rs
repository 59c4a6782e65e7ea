//! A packed log parsed in place: the header, the head and tail blocks,
//! and the searches by rank and by time across its blocks.

use super::*;

/// Where a parsed log's parts lie: enough to read the same, unchanged
/// bytes again without parsing them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    pub(super) head_rank: u32,
    pub(super) head_block: usize,
    pub(super) tail: usize,
    pub(super) blocks: usize,
    pub(super) newest: u64,
}

/// A validated packed log, read in place.
#[derive(Debug, Clone, Copy)]
pub struct Log<'a> {
    pub(super) value: &'a [u8],
    pub(super) head_rank: u32,
    pub(super) head_block: usize,
    pub(super) tail: usize,
    pub(super) blocks: usize,
    pub(super) newest: u64,
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
            return Err(FormatError::BlockShift);
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
    pub(super) fn check_head(&self, head_rank: u32, head_block: usize) -> Result<(), FormatError> {
        let head = self.block(head_block);
        head.check_ends()?;
        let offset = head_rank.wrapping_sub(head.before()) as usize;
        if offset >= head.n() {
            return Err(FormatError::Head);
        }
        let tail = self.block(self.tail);
        if tail.first() < head.first() {
            return Err(FormatError::Block);
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

    pub(super) fn block(&self, index: usize) -> Block<'a> {
        Block {
            bytes: &self.value[extent_of(self.value.len(), index)],
        }
    }

    /// The head's index in the head block.
    pub(super) fn head_offset(&self) -> usize {
        self.head_rank
            .wrapping_sub(self.block(self.head_block).before()) as usize
    }

    /// The rank of block `index`'s first entry, from the head.
    pub(super) fn rank_of(&self, index: usize) -> i64 {
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
    pub(super) fn block_of_rank(&self, rank: usize) -> usize {
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
    pub(super) fn count_through(&self, time: u64) -> usize {
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
    /// a search of the blocks between from where `time` lies between their
    /// first times as though each spanned as long (`guessed_block`). The
    /// blocks of a log a client keeps calling do, so a second window's
    /// floor is found in two probes, the guess and the block after it,
    /// which the function library reads with the guess's bytes.
    pub(super) fn block_through(&self, time: u64) -> usize {
        let (head, tail) = (self.head_block, self.tail);
        if head == tail {
            return head;
        }
        let low_first = self.block(head + 1).first();
        if low_first > time {
            return head;
        }
        let high_first = self.block(tail).first();
        if high_first <= time {
            return tail;
        }
        let low = head + 1;
        let guess = low + guessed_block(time, low_first, high_first, tail - low);
        searched_from(low, tail, guess, |index| self.block(index).first() <= time)
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
                    return Err(FormatError::Block);
                }
            }
            block.times(&mut times)?;
        }
        let free = self.value[self.tail_end()..].iter().all(|&b| b == 0);
        if !free {
            return Err(FormatError::Block);
        }
        times.drain(..self.head_offset());
        Ok(times)
    }

    /// Where the tail block ends.
    pub(super) fn tail_end(&self) -> usize {
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
    pub(super) fn recoded(&self, room: usize) -> Option<Vec<u8>> {
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
    pub(super) fn copied(&self, len: usize) -> Vec<u8> {
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

/// Where `time` lies among `count` blocks whose first starts at
/// `low_first` and whose next after the last at `high_first` (low_first
/// <= time < high_first), as though each spanned as long: 0 to count - 1.
/// In f64, each step as the function library's Lua (whose numbers are
/// doubles) takes it, so that both start a search at the same block
/// whatever a damaged log's first times.
pub(super) fn guessed_block(time: u64, low_first: u64, high_first: u64, count: usize) -> usize {
    let low_first = low_first as f64;
    let at = (time as f64 - low_first) * count as f64 / (high_first as f64 - low_first);
    // A saturating cast: the floor of a number at least 0.
    (at as usize).min(count.saturating_sub(1))
}

/// The last index in `low..high` (high > low) at which `holds`, where it
/// holds at `low` and not at `high`, searched from `guess`: steps of 1,
/// 2, 4, ... from it toward the answer, then a binary search between the
/// last two probes. O(log d) probes for an answer d from the guess. The
/// function library probes in the same order, so that a damaged log,
/// whose `holds` need not turn false once, is searched alike.
pub(super) fn searched_from(
    low: usize,
    high: usize,
    guess: usize,
    holds: impl Fn(usize) -> bool,
) -> usize {
    let (mut low, mut high) = (low, high);
    let guess = guess.clamp(low, high - 1);
    let mut step = 1;
    if guess == low || holds(guess) {
        low = guess;
        while step < high - low {
            if !holds(low + step) {
                high = low + step;
                break;
            }
            low += step;
            step *= 2;
        }
    } else {
        high = guess;
        while step < high - low {
            if holds(high - step) {
                low = high - step;
                break;
            }
            high -= step;
            step *= 2;
        }
    }
    low + partition_point(high - low - 1, |i| holds(low + 1 + i))
}
