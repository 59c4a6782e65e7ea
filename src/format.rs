//! Compact logs of either format version, told apart by the version byte
//! after the magic: version 1 (`compact`, 4- or 8-byte slots) and version
//! 2 (`packed`, Elias-Fano blocks). A log keeps its version until it
//! empties; new logs take the version the setting names.

use std::ops::Range;

use crate::compact::{self, Change, FormatError};
use crate::packed;

/// A compact format version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    Slots = 1,
    Packed = 2,
}

/// The shortest value either version takes.
pub const MIN_LEN: usize = if compact::MIN_LEN < packed::MIN_LEN {
    compact::MIN_LEN
} else {
    packed::MIN_LEN
};

/// The version `value` says it is in; None for neither.
pub fn version_of(value: &[u8]) -> Option<Version> {
    match value.get(4) {
        Some(&packed::VERSION) => Some(Version::Packed),
        Some(&compact::VERSION) => Some(Version::Slots),
        _ => None,
    }
}

/// Where a parsed log of either version lies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    Slots(compact::Layout),
    Packed(packed::Layout),
}

/// A validated compact log of either version, read in place.
#[derive(Debug, Clone, Copy)]
pub enum Log<'a> {
    Slots(compact::Log<'a>),
    Packed(packed::Log<'a>),
}

impl<'a> Log<'a> {
    pub fn parse(value: &'a [u8]) -> Result<Self, FormatError> {
        match version_of(value) {
            Some(Version::Packed) => packed::Log::parse(value).map(Log::Packed),
            _ => compact::Log::parse(value).map(Log::Slots),
        }
    }

    /// Where the log's parts lie, to read the same unchanged bytes again
    /// without parsing them.
    pub fn layout(&self) -> Layout {
        match self {
            Log::Slots(log) => Layout::Slots(log.layout()),
            Log::Packed(log) => Layout::Packed(log.layout()),
        }
    }

    pub fn with_layout(value: &'a [u8], layout: Layout) -> Self {
        match layout {
            Layout::Slots(layout) => Log::Slots(compact::Log::with_layout(value, layout)),
            Layout::Packed(layout) => Log::Packed(packed::Log::with_layout(value, layout)),
        }
    }

    pub fn len(&self) -> usize {
        match self {
            Log::Slots(log) => log.len(),
            Log::Packed(log) => log.len(),
        }
    }

    pub fn count_above(&self, floor: i64) -> usize {
        match self {
            Log::Slots(log) => log.count_above(floor),
            Log::Packed(log) => log.count_above(floor),
        }
    }

    pub fn time_at(&self, rank: usize) -> Option<u64> {
        match self {
            Log::Slots(log) => log.time_at(rank),
            Log::Packed(log) => log.time_at(rank),
        }
    }

    pub fn entries(&self) -> Result<Vec<u64>, FormatError> {
        match self {
            Log::Slots(log) => log.entries(),
            Log::Packed(log) => log.entries(),
        }
    }

    pub fn reclaimed(&self) -> Option<Vec<u8>> {
        match self {
            Log::Slots(log) => log.reclaimed(),
            Log::Packed(log) => log.reclaimed(),
        }
    }
}

/// The bytes a trim or a cap changes (the head), so a failed call can put
/// them back.
pub fn head_range(value: &[u8]) -> Range<usize> {
    match version_of(value) {
        Some(Version::Packed) => packed::HEAD_AT,
        _ => compact::HEAD_AT,
    }
}

pub fn trim_through(value: &mut [u8], floor: i64) -> Result<Change, FormatError> {
    match version_of(value) {
        Some(Version::Packed) => packed::trim_through(value, floor),
        _ => compact::trim_through(value, floor),
    }
}

pub fn cap_to(value: &mut [u8], max_entries: u64) -> Result<Change, FormatError> {
    match version_of(value) {
        Some(Version::Packed) => packed::cap_to(value, max_entries),
        _ => compact::cap_to(value, max_entries),
    }
}

pub fn drop_newest(value: &mut [u8], count: u64) -> Result<Change, FormatError> {
    match version_of(value) {
        Some(Version::Packed) => packed::drop_newest(value, count),
        _ => compact::drop_newest(value, count),
    }
}

/// Adds `count` entries at `time` to `value` in its version, or to a new
/// log in `new` (`value` None).
pub fn record(
    value: Option<&mut [u8]>,
    new: Version,
    time: u64,
    count: u64,
) -> Result<Change, FormatError> {
    let version = value.as_deref().map_or(Some(new), version_of);
    match version {
        Some(Version::Packed) => packed::record(value, time, count),
        _ => compact::record(value, time, count),
    }
}

/// A compact log of either version and the sorted vector it must equal,
/// changed together: the harness of both versions' property tests.
#[cfg(test)]
pub(crate) mod pairs {
    use std::ops::Range;

    use super::*;

    pub struct Pair {
        version: Version,
        pub value: Option<Vec<u8>>,
        reference: Vec<u64>,
    }

    impl Pair {
        /// An empty log, whose first record makes a log of `version`.
        pub fn new(version: Version) -> Self {
            Pair {
                version,
                value: None,
                reference: Vec::new(),
            }
        }

        /// Applies a change, checking that bytes outside the ranges it
        /// reports stayed as they were: the ranges are what replicas get.
        fn apply(&mut self, before: Option<Vec<u8>>, change: Change) {
            let unchanged_outside = |ranges: &[Range<usize>], now: &[u8], was: &[u8]| {
                assert_eq!(now.len(), was.len());
                for (i, (a, b)) in now.iter().zip(was).enumerate() {
                    if !ranges.iter().any(|r| r.contains(&i)) {
                        assert_eq!(a, b, "byte {i} changed outside {ranges:?}");
                    }
                }
            };
            match change {
                Change::Nothing => assert_eq!(self.value, before),
                Change::Emptied => {
                    assert!(self.reference.is_empty());
                    self.value = None;
                }
                Change::Replace(bytes) => self.value = Some(bytes),
                Change::InPlace(range) => {
                    let now = self.value.as_deref().unwrap_or_default();
                    unchanged_outside(&[range], now, &before.unwrap_or_default());
                }
                Change::Ranges(ranges) => {
                    let now = self.value.as_deref().unwrap_or_default();
                    unchanged_outside(&ranges, now, &before.unwrap_or_default());
                }
            }
        }

        pub fn record(&mut self, time: u64, count: u64) {
            let before = self.value.clone();
            let change = record(self.value.as_deref_mut(), self.version, time, count);
            let at = self.reference.partition_point(|&t| t <= time);
            self.reference
                .splice(at..at, std::iter::repeat_n(time, count as usize));
            self.apply(before, change.unwrap());
        }

        /// What ends every call: the dead slots or blocks dropped once
        /// over half; `checked` sees the value before and after.
        pub fn reclaim(&mut self, checked: impl Fn(&[u8], &[u8])) {
            let Some(value) = &self.value else {
                return;
            };
            if let Some(bytes) = Log::parse(value).unwrap().reclaimed() {
                checked(value, &bytes);
                self.value = Some(bytes);
            }
        }

        /// Runs `change` on the value, if there is one, with `reference`
        /// changed as it must change the log.
        fn change(
            &mut self,
            change: impl FnOnce(&mut [u8]) -> Result<Change, FormatError>,
            reference: impl FnOnce(&mut Vec<u64>),
        ) {
            let Some(value) = self.value.as_mut() else {
                return;
            };
            let before = Some(value.clone());
            let change = change(value).unwrap();
            reference(&mut self.reference);
            self.apply(before, change);
        }

        pub fn trim_through(&mut self, floor: i64) {
            self.change(
                |value| trim_through(value, floor),
                |times| times.retain(|&t| t as i64 > floor),
            );
        }

        pub fn cap_to(&mut self, max: u64) {
            self.change(
                |value| cap_to(value, max),
                |times| {
                    let excess = times.len().saturating_sub(max as usize);
                    times.drain(..excess);
                },
            );
        }

        pub fn drop_newest(&mut self, count: u64) {
            self.change(
                |value| drop_newest(value, count),
                |times| times.truncate(times.len().saturating_sub(count as usize)),
            );
        }

        /// The log reads as the reference: every entry, every rank, and
        /// counts above fixed floors and around every seventh entry.
        pub fn check(&self, context: &str) {
            let Some(value) = &self.value else {
                assert!(self.reference.is_empty(), "{context}");
                return;
            };
            let log = Log::parse(value).unwrap();
            assert_eq!(log.entries().unwrap(), self.reference, "{context}");
            assert_eq!(log.len(), self.reference.len());
            for (rank, &time) in self.reference.iter().enumerate() {
                assert_eq!(log.time_at(rank), Some(time), "{context} rank {rank}");
            }
            assert_eq!(log.time_at(self.reference.len()), None);
            let mut floors = vec![-1i64, 0, 1, 50, 99, 100, 101, 1000, i64::MAX];
            for &t in self.reference.iter().step_by(7) {
                floors.extend([t as i64 - 1, t as i64, t as i64 + 1]);
            }
            for floor in floors {
                let expected = self.reference.iter().filter(|&&t| t as i64 > floor).count();
                assert_eq!(log.count_above(floor), expected, "{context} floor {floor}");
            }
        }
    }
}

/// Bytes per entry under the orders entries arrive in: format version 2
/// codes an entry older than the newest into the blocks around it, so no
/// order leaves it larger than version 1.
#[cfg(test)]
mod arrival_tests {
    use super::*;
    use crate::window::tests::XorShift;

    const T0: u64 = 1_700_000_000_000;

    /// The bytes per entry of one log of `version` that records `times` in
    /// their order, its every entry checked at the end.
    fn bytes_per_entry(version: Version, times: &[u64]) -> f64 {
        let mut value: Option<Vec<u8>> = None;
        for &t in times {
            match record(value.as_deref_mut(), version, t, 1).unwrap() {
                Change::Replace(bytes) => value = Some(bytes),
                Change::Nothing | Change::InPlace(_) | Change::Ranges(_) => {}
                Change::Emptied => unreachable!("recording never empties"),
            }
        }
        let value = value.unwrap();
        let mut sorted = times.to_vec();
        sorted.sort_unstable();
        assert_eq!(Log::parse(&value).unwrap().entries().unwrap(), sorted);
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
                    .map(|i| {
                        T0 + i * 3_600_000 - if i % 3 == 0 { rng.below(50_000_000) } else { 0 }
                    })
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
            let packed = bytes_per_entry(Version::Packed, &times);
            let slots = bytes_per_entry(Version::Slots, &times);
            assert!(packed <= slots, "{name}: {packed} against {slots}");
        }
    }

    /// The value's length after each call of a sliding window: trim to
    /// the window, record, drop or recode the dead entries, as a check does.
    fn sliding_lengths(version: Version, times: &[u64], window: u64) -> Vec<usize> {
        let mut value: Option<Vec<u8>> = None;
        let mut lengths = Vec::new();
        let apply = |value: &mut Option<Vec<u8>>, change: Change| match change {
            Change::Replace(bytes) => *value = Some(bytes),
            Change::Emptied => *value = None,
            Change::Nothing | Change::InPlace(_) | Change::Ranges(_) => {}
        };
        for &t in times {
            if let Some(bytes) = value.as_mut() {
                let change = trim_through(bytes, (t - window) as i64).unwrap();
                apply(&mut value, change);
            }
            let change = record(value.as_deref_mut(), version, t, 1).unwrap();
            apply(&mut value, change);
            let bytes = value.as_ref().unwrap();
            if let Some(copy) = Log::parse(bytes).unwrap().reclaimed() {
                value = Some(copy);
            }
            let log = Log::parse(value.as_ref().unwrap()).unwrap();
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
            let packed = sliding_lengths(Version::Packed, &times, window);
            let slots = sliding_lengths(Version::Slots, &times, window);
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
            bytes_per_entry(Version::Packed, times)
        };
        assert!(of("in order") < 1.75, "{}", of("in order"));
        assert!(of("a tenth an hour behind") < 2.5);
        assert!(of("crafted after blocks' first times") < 2.5);
    }
}

#[cfg(test)]
mod vectors;
