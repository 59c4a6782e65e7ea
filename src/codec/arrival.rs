//! Bytes per entry under the orders entries arrive in: format version 2
//! codes an entry older than the newest into the blocks around it, so no
//! order leaves it larger than version 1.

use super::*;
use crate::window::tests::XorShift;

const T0: u64 = 1_700_000_000_000;

/// The bytes per entry of one log of format `C` that records `times` in
/// their order, its every entry checked at the end.
fn bytes_per_entry<C: Codec>(times: &[u64]) -> f64 {
    let mut value: Option<Vec<u8>> = None;
    for &t in times {
        match C::record(value.as_deref_mut(), t, 1).unwrap() {
            Change::Replace(bytes) => value = Some(bytes),
            Change::Nothing | Change::InPlace(_) | Change::Ranges(_) => {}
            Change::Emptied => unreachable!("recording never empties"),
        }
    }
    let value = value.unwrap();
    let mut sorted = times.to_vec();
    sorted.sort_unstable();
    assert_eq!(C::parse(&value).unwrap().entries().unwrap(), sorted);
    value.len() as f64 / times.len() as f64
}

/// The arrival orders, by name: seconds apart unless said otherwise.
fn patterns() -> Vec<(String, Vec<u64>)> {
    let mut rng = XorShift(7);
    let second = |i: u64| T0 + i * 1000;
    let mut crafted: Vec<u64> = (0..3000).map(second).collect();
    // Inserts 1 ms after the first time of blocks in the middle.
    crafted.extend((0..3000).map(|j| T0 + (j % 100) * 170_000 + 1));
    let mut found: Vec<(String, Vec<u64>)> = vec![
        ("in order".into(), (0..12_000).map(second).collect()),
        (
            "a tenth an hour behind".into(),
            (0..12_000)
                .map(|i| second(i) - if i % 10 == 9 { 3_600_000 } else { 0 })
                .collect(),
        ),
        (
            "each 0 to 10 minutes behind".into(),
            (0..12_000)
                .map(|i| second(i) + 600_000 - rng.below(600_001))
                .collect(),
        ),
        (
            "three servers 30 ms apart".into(),
            (0..6000)
                .map(|i| T0 + (i / 3) * 30 - (i % 3) * 30)
                .collect(),
        ),
        ("crafted after blocks' first times".into(), crafted),
        (
            "each older than all".into(),
            (0..2500).map(|i| second(10_000 - i)).collect(),
        ),
        (
            "random in a day".into(),
            (0..8_000).map(|_| T0 + rng.below(86_400_000)).collect(),
        ),
        (
            "random in a year".into(),
            (0..8_000).map(|_| T0 + rng.below(31_536_000_000)).collect(),
        ),
        (
            "hourly, a third up to 14 hours behind".into(),
            (0..5000)
                .map(|i| T0 + i * 3_600_000 - if i % 3 == 0 { rng.below(50_000_000) } else { 0 })
                .collect(),
        ),
        (
            "sawtooth".into(),
            (0..8_000)
                .map(|i| T0 + (i % 100) * 100_000 + i / 100)
                .collect(),
        ),
        (
            "two clocks an hour apart".into(),
            (0..8_000)
                .map(|i| second(i / 2) + if i % 2 == 0 { 3_600_000 } else { 0 })
                .collect(),
        ),
    ];
    found.push((
        "two clients a millisecond apart, 10 s between calls".into(),
        (0..720).map(|i| T0 + (i / 2) * 10_000 - i % 2).collect(),
    ));
    found.push((
        "two clients 10 ms apart, every other call".into(),
        (0..4000)
            .map(|i| second(i) - if i % 2 == 1 { 10 } else { 0 })
            .collect(),
    ));
    // Sparse times in any order, over a span format version 1 holds in
    // 4-byte slots.
    for shift in [18, 20, 22] {
        let span = 4000u64 << shift;
        found.push((
            format!("random, gaps of 2^{shift} ms"),
            (0..4000).map(|_| T0 + rng.below(span)).collect(),
        ));
        let evens = (0..2000).map(|i| T0 + ((2 * i) << shift));
        let odds = (0..2000).rev().map(|i| T0 + ((2 * i + 1) << shift));
        found.push((
            format!("evens in order, then odds descending, gaps of 2^{shift} ms"),
            evens.chain(odds).collect(),
        ));
    }
    found.push((
        "four clients 0 to 3 ms apart, every 10 s".into(),
        (0..400).map(|i| T0 + (i / 4) * 10_000 - i % 4).collect(),
    ));
    for n in 1..=10 {
        found.push((format!("{n} in order"), (0..n).map(second).collect()));
    }
    found
}

#[test]
fn no_arrival_order_makes_version_2_larger_than_version_1() {
    for (name, times) in patterns() {
        let packed = bytes_per_entry::<Packed>(&times);
        let slots = bytes_per_entry::<Slots>(&times);
        assert!(packed <= slots, "{name}: {packed} against {slots}");
    }
}

/// The value's length after each call of a sliding window: trim to
/// the window, record, drop or recode the dead entries, as a check does.
fn sliding_lengths<C: Codec>(times: &[u64], window: u64) -> Vec<usize> {
    let mut value: Option<Vec<u8>> = None;
    let mut lengths = Vec::new();
    let apply = |value: &mut Option<Vec<u8>>, change: Change| match change {
        Change::Replace(bytes) => *value = Some(bytes),
        Change::Emptied => *value = None,
        Change::Nothing | Change::InPlace(_) | Change::Ranges(_) => {}
    };
    for &t in times {
        if let Some(bytes) = value.as_mut() {
            let change = C::trim_through(bytes, (t - window) as i64).unwrap();
            apply(&mut value, change);
        }
        let change = C::record(value.as_deref_mut(), t, 1).unwrap();
        apply(&mut value, change);
        let bytes = value.as_ref().unwrap();
        let reclaimed = C::parse(bytes).unwrap().reclaimed();
        if let Some(copy) = reclaimed {
            value = Some(copy);
        }
        let log = C::parse(value.as_ref().unwrap()).unwrap();
        let live = times.iter().filter(|&&e| e <= t && e > t - window).count();
        assert_eq!(log.entries().unwrap().len(), live);
        lengths.push(value.as_ref().unwrap().len());
    }
    lengths
}

#[test]
fn a_small_sliding_window_takes_no_more_than_version_1() {
    // One call a minute under an hour's window, one a second under 40 s,
    // and one a second under 10 minutes.
    for (step, window) in [(60_000, 3_600_000), (1000, 40_000), (1000, 600_000)] {
        let times: Vec<u64> = (0..2000).map(|i| T0 + i * step).collect();
        let packed = sliding_lengths::<Packed>(&times, window);
        let slots = sliding_lengths::<Slots>(&times, window);
        let settled = 1000..times.len();
        let total = |lengths: &[usize]| lengths[settled.clone()].iter().sum::<usize>();
        assert!(
            total(&packed) <= total(&slots),
            "every {step} ms: {} against {}",
            total(&packed),
            total(&slots)
        );
    }
}

#[test]
fn entries_an_hour_behind_cost_about_what_entries_in_order_do() {
    let patterns = patterns();
    let of = |name: &str| {
        let (_, times) = patterns.iter().find(|(n, _)| n == name).unwrap();
        bytes_per_entry::<Packed>(times)
    };
    assert!(of("in order") < 1.75, "{}", of("in order"));
    assert!(of("a tenth an hour behind") < 2.5);
    assert!(of("crafted after blocks' first times") < 2.5);
}
