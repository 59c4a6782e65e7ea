use super::*;
use crate::codec::pairs::Pair;
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
    let mut pair = Pair::<Packed>::new();
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
        let mut pair = Pair::<Packed>::new();
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
    let mut pair = Pair::<Packed>::new();
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
    let mut pair = Pair::<Packed>::new();
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

/// The search between the head and tail blocks finds where an ordered
/// `holds` turns false from any guess, in two probes from the right one
/// and O(log d) from one d away; on any `holds` (a damaged log's) it
/// probes only between its ends and finds a block that holds with the
/// next one not holding, as a binary search does.
#[test]
fn the_search_from_a_guess_finds_the_last_block_that_holds() {
    use super::log::searched_from;
    use std::cell::RefCell;
    for count in 1..40usize {
        let (low, high) = (5, 5 + count);
        for answer in low..high {
            for guess in low..high {
                let probes = RefCell::new(0);
                let found = searched_from(low, high, guess, |i| {
                    *probes.borrow_mut() += 1;
                    i <= answer
                });
                assert_eq!(found, answer, "{count} blocks, guess {guess}");
                let d = guess.abs_diff(answer);
                let most = if d == 0 {
                    2
                } else {
                    2 * (usize::BITS - d.leading_zeros()) as usize + 2
                };
                assert!(
                    *probes.borrow() <= most,
                    "{count} blocks, guess {guess}, answer {answer}"
                );
            }
        }
    }
    let mut rng = XorShift(0x5ea4c4);
    for _ in 0..20_000 {
        let count = 1 + rng.below(60) as usize;
        let (low, high) = (3, 3 + count);
        let holds: Vec<bool> = (0..high).map(|_| rng.below(2) == 0).collect();
        let guess = low + rng.below(count as u64) as usize;
        let found = searched_from(low, high, guess, |i| {
            assert!(low < i && i < high, "probed {i} of {low}..{high}");
            holds[i]
        });
        assert!(low <= found && found < high);
        assert!(found == low || holds[found], "{found} does not hold");
        assert!(
            found + 1 == high || !holds[found + 1],
            "{} holds",
            found + 1
        );
    }
}

/// The guess takes the blocks between as spanning equal times: exact on
/// evenly spread ones, and within them whatever the times, even 56-bit
/// ones (which block_through never passes it: the time and the tail
/// block's first time are at most MAX_MS there, and only the blocks
/// between, which it does not take, can start later).
#[test]
fn the_guess_places_a_time_among_evenly_spread_blocks() {
    use super::log::guessed_block;
    for count in 1..50usize {
        for block in 0..count {
            for within in [0, 1, 499, 999] {
                let time = 7_000 + (block * 1_000 + within) as u64;
                assert_eq!(
                    guessed_block(time, 7_000, 7_000 + count as u64 * 1_000, count),
                    block
                );
            }
        }
    }
    // 56-bit first times (another writer's) and the widest spans.
    let most = (1u64 << 56) - 1;
    // (2^53 - 1) / 2^56 of 2^21 blocks, the span rounded to 2^56.
    assert_eq!(
        guessed_block(crate::window::MAX_MS, 0, most, 1 << 21),
        (1 << 18) - 1
    );
    assert_eq!(guessed_block(most - 1, 0, most, 1 << 21), (1 << 21) - 1);
    assert_eq!(guessed_block(0, 0, 1, 1), 0);
    assert_eq!(guessed_block(5, 5, 6, 1_000), 0);
}
