use super::*;
use crate::codec::pairs::Pair;
use crate::window::tests::XorShift;

/// What ends every call: the dead slots reclaimed once over half.
fn reclaim(value: &[u8]) -> Result<Change, FormatError> {
    let log = Log::parse(value)?;
    Ok(log.reclaimed().map_or(Change::Nothing, Change::Replace))
}

/// What ends every call in version 1: the same base and width,
/// copied; or 8-byte slots made anew in 4 once their span allows.
fn reclaimed_as_copies(was: &[u8], now: &[u8]) {
    let (was, now) = (Log::parse(was).unwrap(), Log::parse(now).unwrap());
    let narrowed = (was.width, now.width) == (8, 4);
    if !narrowed {
        assert_eq!((now.base, now.width), (was.base, was.width));
    }
    assert_eq!(now.head, 0);
}

#[test]
fn a_new_log_has_the_documented_layout() {
    // Based a minute (60,000 ms) before the oldest: 100,000 is 60,001.
    let value = encode(&[100_000, 100_000, 100_005], 0);
    assert_eq!(&value[..8], b"SWLc\x01\x04\x00\x00");
    assert_eq!(value[8..16], 40_000u64.to_le_bytes());
    assert_eq!(value[16..24], [0; 8]);
    let slots = [0x61, 0xea, 0, 0, 0x61, 0xea, 0, 0, 0x66, 0xea, 0, 0];
    assert_eq!(value[24..36], slots);
    assert!(value[36..].iter().all(|&b| b == 0));
    assert!(value.len() >= MIN_LEN);
    assert_eq!(
        Log::parse(&value).unwrap().entries(),
        Ok(vec![100_000, 100_000, 100_005])
    );
    // Times within a minute of 0 are based at 0.
    assert_eq!(encode(&[1000], 0)[8..16], [0; 8]);
}

#[test]
fn recording_in_order_writes_only_the_new_slots() {
    let mut value = encode(&[10], 0);
    let change = record(Some(&mut value), 12, 2).unwrap();
    assert_eq!(change, Change::InPlace(28..36));
    assert_eq!(Log::parse(&value).unwrap().entries(), Ok(vec![10, 12, 12]));
}

#[test]
fn giving_back_the_newest_frees_their_slots_and_all_of_them_empties() {
    let mut value = encode(&[10, 11, 12, 13], 0);
    assert_eq!(drop_newest(&mut value, 2), Ok(Change::InPlace(32..40)));
    assert!(value[32..].iter().all(|&b| b == 0));
    assert_eq!(Log::parse(&value).unwrap().entries(), Ok(vec![10, 11]));
    assert_eq!(drop_newest(&mut value, 2), Ok(Change::Emptied));
}

#[test]
fn a_trim_moves_the_head_and_a_large_dead_prefix_is_reclaimed() {
    let times: Vec<u64> = (100_001..=100_040).collect();
    let mut value = encode(&times, 0);
    let capacity = (value.len() - HEADER_LEN) / 4;
    assert_eq!(
        trim_through(&mut value, 100_005),
        Ok(Change::InPlace(16..20))
    );
    assert_eq!(read_u32(&value[16..20]), 5);
    assert_eq!(reclaim(&value), Ok(Change::Nothing));
    // More than half dead: still only the head moves, and reclaiming
    // writes the live slots anew, byte for byte, with the same base.
    assert_eq!(
        trim_through(&mut value, 100_035),
        Ok(Change::InPlace(16..20))
    );
    let Ok(Change::Replace(reclaimed)) = reclaim(&value) else {
        panic!("more than half dead: the value is written anew");
    };
    let log = Log::parse(&reclaimed).unwrap();
    assert_eq!(log.entries(), Ok((100_036..=100_040).collect()));
    assert_eq!(log.base, 40_001);
    let live = HEADER_LEN + 35 * 4..HEADER_LEN + 40 * 4;
    assert_eq!(reclaimed[HEADER_LEN..HEADER_LEN + 20], value[live]);
    assert!(reclaimed.len() < HEADER_LEN + capacity * 4);
    assert_eq!(trim_through(&mut value, 100_040), Ok(Change::Emptied));
}

#[test]
fn a_full_log_grows_keeping_its_base_and_its_slots_bytes() {
    let mut value = encode(&[100_000], 0);
    let capacity = (value.len() - HEADER_LEN) / 4;
    for time in 100_001..100_000 + capacity as u64 {
        assert!(matches!(
            record(Some(&mut value), time, 1),
            Ok(Change::InPlace(_))
        ));
    }
    // Full: an entry older than the newest goes to its place in a
    // larger value, the other slots copied unchanged.
    let Ok(Change::Replace(grown)) = record(Some(&mut value), 100_003, 2) else {
        panic!("a full log grows");
    };
    assert_eq!(grown[..24], value[..24]);
    let (old, new) = (&value[HEADER_LEN..], &grown[HEADER_LEN..]);
    assert_eq!(new[..16], old[..16]);
    assert_eq!(new[16..24], [0x64, 0xea, 0, 0, 0x64, 0xea, 0, 0]);
    assert_eq!(new[24..24 + old.len() - 16], old[16..]);
    assert!(grown.len() > value.len());
}

#[test]
fn times_past_the_slot_width_or_before_the_base_rewrite_the_value() {
    let t = 1_000_000;
    let mut value = encode(&[t], 0);
    let Ok(Change::Replace(wide)) = record(Some(&mut value), t + (1 << 32), 1) else {
        panic!("a span of 2^32 ms needs 8-byte slots");
    };
    assert_eq!(wide[WIDTH_AT], 8);
    assert_eq!(
        Log::parse(&wide).unwrap().entries(),
        Ok(vec![t, t + (1 << 32)])
    );
    // A minute behind the oldest still fits below the base.
    let mut behind = value.clone();
    let change = record(Some(&mut behind), t - ROOM_BELOW_MS, 1);
    assert!(matches!(change, Ok(Change::InPlace(_))), "{change:?}");
    let Ok(Change::Replace(rebased)) = record(Some(&mut value), t - ROOM_BELOW_MS - 1, 1) else {
        panic!("a time before the base rebases the log");
    };
    let log = Log::parse(&rebased).unwrap();
    assert_eq!(log.entries(), Ok(vec![t - ROOM_BELOW_MS - 1, t]));
    assert_eq!(log.base, t - 2 * ROOM_BELOW_MS - 1);
    let top = encode(&[0, MAX_MS], 0);
    assert_eq!(Log::parse(&top).unwrap().entries(), Ok(vec![0, MAX_MS]));
    // A span that fits 4-byte slots only without the room below is
    // based lower and takes 8-byte slots.
    let near = encode(&[t, t + u64::from(u32::MAX) - 10], 0);
    assert_eq!(near[WIDTH_AT], 8);
}

#[test]
fn values_fill_their_allocation_and_grow_by_an_eighth() {
    assert_eq!(size_class(100), 112);
    assert_eq!(size_class(4097), 5120);
    assert_eq!(size_class(4096), 4096);
    for n in [1usize, 7, 100, 1000, 10_000, 100_000] {
        let value = encode(&vec![5; n], 0);
        let slots = (value.len() - HEADER_LEN) / 4;
        assert!(slots >= n + (n / 8).max(4), "{n}: {slots}");
        // No more than a size class (a quarter) above what is wanted.
        assert!(value.len() <= (HEADER_LEN + (n + (n / 8).max(4)) * 4) * 5 / 4 + 16);
    }
}

#[test]
fn a_new_log_written_in_place_is_what_record_writes() {
    for (time, count) in [(0, 1), (1_700_000_000_000, 3), (5, 100_000)] {
        let Ok(Change::Replace(expected)) = record(None, time, count as u64) else {
            panic!("record on no log writes a value");
        };
        let mut value = vec![0u8; new_log_len(time, count)];
        write_new_log(&mut value, time, count);
        assert_eq!(value, expected, "{time} {count}");
    }
}

#[test]
fn counts_take_the_ends_before_any_interior_slot() {
    // Interior slots out of order (damage a call does not read): a
    // floor before the oldest counts every entry, one from the newest
    // none, whatever the slot a search would probe first holds.
    let with_slot = |index: usize, stored: u32| {
        let mut value = encode(&[100, 200, 300, 400, 500], 0);
        let at = HEADER_LEN + 4 * index;
        value[at..at + 4].copy_from_slice(&stored.to_le_bytes());
        value
    };
    // Based at 0, slots hold time + 1: the oldest at 149, and the
    // middle slot read as 102.
    let mut early = with_slot(0, 150);
    early[HEADER_LEN + 8..HEADER_LEN + 12].copy_from_slice(&103u32.to_le_bytes());
    assert_eq!(Log::parse(&early).unwrap().count_above(120), 5);
    // The middle slot read as 999, after the newest.
    let late = with_slot(2, 900);
    assert_eq!(Log::parse(&late).unwrap().count_above(500), 0);
    assert_eq!(Log::parse(&late).unwrap().count_above(250), 3);
}

#[test]
fn random_changes_agree_with_a_sorted_vector() {
    let mut rng = XorShift(0x0dd_ba11_5eed);
    for round in 0..400 {
        let mut pair = Pair::<Slots>::new();
        let mut clock = rng.below(1000);
        for step in 0..60 {
            let context = format!("round {round} step {step}");
            match rng.below(10) {
                0..=4 => {
                    clock += rng.below(20);
                    let time = match rng.below(8) {
                        0 => clock.saturating_sub(rng.below(300)),
                        1 => clock + (1 << 32) * rng.below(2),
                        _ => clock,
                    };
                    let most = if rng.below(10) == 0 { 60 } else { 3 };
                    pair.record(time, 1 + rng.below(most));
                }
                5..=6 => pair.trim_through(clock as i64 - rng.below(200) as i64),
                7 => {
                    let most = if rng.below(8) == 0 { 60 } else { 3 };
                    pair.drop_newest(1 + rng.below(most))
                }
                _ => pair.cap_to(rng.below(40)),
            }
            pair.check(&context);
            pair.reclaim(reclaimed_as_copies);
            pair.check(&context);
        }
    }
}

#[test]
fn hostile_bytes_are_refused_or_read_without_panicking() {
    let mut rng = XorShift(0xbad_c0de);
    let good = encode(&[100, 200, 300, 400], 0);
    assert!(Log::parse(&good[..MIN_LEN - 1]).is_err());
    assert_eq!(Log::parse(b"hello").err(), Some(FormatError::TooShort));
    for _ in 0..20_000 {
        let mut bytes = if rng.below(3) == 0 {
            (0..rng.below(120))
                .map(|_| rng.below(256) as u8)
                .collect::<Vec<u8>>()
        } else {
            let mut bytes = good.clone();
            for _ in 0..1 + rng.below(4) {
                let at = rng.below(bytes.len() as u64) as usize;
                bytes[at] = rng.below(256) as u8;
            }
            bytes.truncate(bytes.len() - rng.below(3) as usize * rng.below(9) as usize);
            bytes
        };
        if let Ok(log) = Log::parse(&bytes) {
            let _ = (log.entries(), log.count_above(250), log.time_at(1));
            for _ in 0..3 {
                let _ = match rng.below(5) {
                    0 => trim_through(&mut bytes, rng.below(500) as i64),
                    1 => cap_to(&mut bytes, rng.below(5)),
                    2 => drop_newest(&mut bytes, rng.below(5)),
                    3 => reclaim(&bytes),
                    _ => record(Some(&mut bytes), rng.below(600), 1 + rng.below(3)),
                };
            }
        }
    }
}
