//! The changes: trim, cap, drop the newest, record (append into the tail
//! block, insert in place, or recode the blocks an entry goes into).

use super::*;

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
pub(super) fn move_head(
    value: &mut [u8],
    dropped: impl FnOnce(&Log) -> usize,
) -> Result<Change, FormatError> {
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
        let keep_n = usize::try_from(within).map_err(|_| FormatError::Block)?;
        let view = log.block(index);
        view.check_ends()?;
        if keep_n == 0 || keep_n > view.n() || head_block > index {
            return Err(FormatError::Block);
        }
        let last_kept = view.select(keep_n - 1).ok_or(FormatError::Block)?;
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
pub(super) fn append(value: &mut [u8], time: u64, count: usize) -> Option<Change> {
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
pub(super) fn insert_in_place(value: &mut [u8], time: u64) -> Option<Change> {
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
pub(super) fn move_bits_up(bits: &mut [u8], from: usize, to: usize, by: usize) {
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
pub(super) fn insert(value: &mut [u8], time: u64, count: usize) -> Result<Change, FormatError> {
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
        let at = usize::try_from(through as i64 - from_rank).map_err(|_| FormatError::Block)?;
        let at = at.min(times.len());
        let mut runs: Vec<(u64, usize)> = times.iter().map(|&t| (t, 1)).collect();
        runs.insert(at, (time, count));
        if runs.windows(2).any(|w| w[0].0 > w[1].0) {
            return Err(FormatError::Block);
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
pub(super) const RECODED_AFTER_AT_MOST: usize = 4;
pub(super) const RECODED_ENTRIES_AT_MOST: usize = 1024;

/// Puts `blocks`, the blocks from `index` to the tail coded anew, in place
/// of those, where the value has room; otherwise into a new value, the
/// blocks before copied as bytes.
pub(super) fn recode_to_tail(
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
