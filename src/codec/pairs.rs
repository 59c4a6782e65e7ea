//! A compact log of either version and the sorted vector it must equal,
//! changed together: the harness of both versions' property tests.

use std::marker::PhantomData;
use std::ops::Range;

use super::*;

pub struct Pair<C: Codec> {
    codec: PhantomData<C>,
    pub value: Option<Vec<u8>>,
    reference: Vec<u64>,
}

impl<C: Codec> Pair<C> {
    /// An empty log, whose first record makes a log of format `C`.
    pub fn new() -> Self {
        Pair {
            codec: PhantomData,
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
        let change = C::record(self.value.as_deref_mut(), time, count);
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
        let reclaimed = C::parse(value).unwrap().reclaimed();
        if let Some(bytes) = reclaimed {
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
            |value| C::trim_through(value, floor),
            |times| times.retain(|&t| t as i64 > floor),
        );
    }

    pub fn cap_to(&mut self, max: u64) {
        self.change(
            |value| C::cap_to(value, max),
            |times| {
                let excess = times.len().saturating_sub(max as usize);
                times.drain(..excess);
            },
        );
    }

    pub fn drop_newest(&mut self, count: u64) {
        self.change(
            |value| C::drop_newest(value, count),
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
        let log = C::parse(value).unwrap();
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
