//! The sliding-window-log decision, as plain functions over a sorted log of
//! scores (milliseconds). Nothing here knows about Redis: the log is read
//! through [`ScoreLog`], which the sorted-set key implements in `zset.rs` and
//! a plain vector implements in the tests below.

/// The largest integer a sorted-set score (an IEEE double) holds exactly.
pub const MAX_MS: u64 = (1 << 53) - 1;

/// At most `limit` units in any `window_ms` milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub window_ms: u64,
    pub limit: u64,
}

impl Window {
    /// Entries with a score at or below this are outside the window at `now`.
    /// Exact: both operands are at most 2^53-1, so the difference and its
    /// conversion to a double are exact.
    pub fn floor(&self, now: u64) -> f64 {
        (now as i64 - self.window_ms as i64) as f64
    }
}

/// Read access to a log of scores. Reads go newest first and stop early:
/// every figure a window needs lies within its newest `limit + 1` entries.
pub trait ScoreLog {
    /// Number of entries with a score above `floor`, counting at most `cap`.
    fn count_above(&self, floor: f64, cap: u64) -> u64;
    /// The score of the `n`-th newest entry (1-based) above `floor`.
    fn nth_newest_above(&self, floor: f64, n: u64) -> Option<f64>;
    /// The exact number of entries above `floor`, where that is known
    /// without reading the log (after a trim, say).
    fn known_count_above(&self, _floor: f64) -> Option<u64> {
        None
    }
    /// The score of the `n`-th oldest entry (1-based) above `floor`; asked
    /// only where the count is known.
    fn nth_oldest_above(&self, floor: f64, n: u64) -> Option<f64> {
        let total = self.known_count_above(floor)?;
        self.nth_newest_above(floor, (total + 1).checked_sub(n)?)
    }
}

/// The five integers every check replies with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    pub allowed: bool,
    pub limit: u64,
    pub remaining: u64,
    /// -1 when admitted or when waiting cannot help.
    pub retry_after_ms: i64,
    /// 0 when the log is empty.
    pub reset_after_ms: i64,
}

/// The window that trims the log and sets its expiry: the longest.
pub fn widest(windows: &[Window]) -> Window {
    windows
        .iter()
        .copied()
        .max_by_key(|w| w.window_ms)
        .unwrap_or(Window {
            window_ms: 1,
            limit: 0,
        })
}

/// The log never needs more entries than the largest limit.
pub fn largest_limit(windows: &[Window]) -> u64 {
    windows.iter().map(|w| w.limit).max().unwrap_or(0)
}

/// What one window sees of the log at `now`.
struct Seen {
    window: Window,
    /// Entries in the window, counted up to `limit + 1`.
    count: u64,
}

impl Seen {
    fn of(log: &impl ScoreLog, window: Window, now: u64) -> Seen {
        let count = log.count_above(window.floor(now), window.limit.saturating_add(1));
        Seen { window, count }
    }

    fn fits(&self, cost: u64) -> bool {
        self.count.saturating_add(cost) <= self.window.limit
    }

    fn remaining(&self) -> u64 {
        self.window.limit.saturating_sub(self.count)
    }

    /// When `cost` more units would fit: once all but the newest
    /// `limit - cost` entries have left, i.e. when the (limit - cost + 1)-th
    /// newest does (the k-th oldest, k = count + cost - limit).
    fn retry_after(&self, log: &impl ScoreLog, now: u64, cost: u64) -> i64 {
        if cost > self.window.limit {
            return -1;
        }
        let floor = self.window.floor(now);
        let nth_newest = self.window.limit - cost + 1;
        // The same entry is the k-th oldest: walk from the nearer end. A
        // client held at its limit waits for one of the oldest entries.
        let known = log.known_count_above(floor);
        let entry =
            match known.map(|total| total.saturating_add(cost).saturating_sub(self.window.limit)) {
                Some(kth_oldest) if kth_oldest >= 1 && kth_oldest < nth_newest => {
                    log.nth_oldest_above(floor, kth_oldest)
                }
                _ => log.nth_newest_above(floor, nth_newest),
            };
        match entry {
            Some(score) => ms_until_left(score, self.window, now).max(1),
            None => 1,
        }
    }
}

/// Whether a request of `cost` units at `now` fits every window.
pub fn admits(log: &impl ScoreLog, windows: &[Window], now: u64, cost: u64) -> bool {
    windows.iter().all(|&w| Seen::of(log, w, now).fits(cost))
}

/// The reply for a request of `cost` units at `now`, read off the log as it
/// stands after the request was (or was not) recorded.
///
/// `limit`, `remaining` and `retry_after_ms` describe the binding window:
/// when denied, the denying window that makes the client wait longest (one
/// that waiting cannot satisfy counts as longest); when admitted, the window
/// with the least left. Ties go to the window named first.
pub fn verdict(
    log: &impl ScoreLog,
    windows: &[Window],
    now: u64,
    cost: u64,
    allowed: bool,
) -> Verdict {
    let describe = |seen: &Seen, retry_after_ms| Verdict {
        allowed,
        limit: seen.window.limit,
        remaining: seen.remaining(),
        retry_after_ms,
        reset_after_ms: 0,
    };
    let seen = windows.iter().map(|&w| Seen::of(log, w, now));
    let binding = if allowed {
        seen.map(|s| describe(&s, -1)).reduce(|best, next| {
            if next.remaining < best.remaining {
                next
            } else {
                best
            }
        })
    } else {
        seen.filter(|s| !s.fits(cost))
            .map(|s| describe(&s, s.retry_after(log, now, cost)))
            .reduce(|best, next| {
                if waits_longer(next.retry_after_ms, best.retry_after_ms) {
                    next
                } else {
                    best
                }
            })
    };
    // A denial always has a denying window; should none deny on the log as
    // it now stands (a penalty cap shrank it), the first window describes
    // it, and the client may retry at once.
    let mut reply = binding.unwrap_or_else(|| {
        let first = Seen::of(
            log,
            windows.first().copied().unwrap_or(widest(windows)),
            now,
        );
        describe(&first, if allowed { -1 } else { 1 })
    });
    let widest = widest(windows);
    reply.reset_after_ms = match log.nth_newest_above(widest.floor(now), 1) {
        Some(newest) => ms_until_left(newest, widest, now),
        None => 0,
    };
    reply
}

/// -1 (waiting cannot help) outranks any wait; otherwise the longer wait.
fn waits_longer(retry: i64, than: i64) -> bool {
    match (retry, than) {
        (_, -1) => false,
        (-1, _) => true,
        (a, b) => a > b,
    }
}

/// Milliseconds from `now` until an entry at `score` leaves `window`, i.e.
/// until `score <= t - window_ms`. Scores written by other tools may be
/// fractional or huge, hence the rounding up and the clamp.
fn ms_until_left(score: f64, window: Window, now: u64) -> i64 {
    let wait = (score + window.window_ms as f64 - now as f64).ceil();
    if wait.is_nan() || wait <= 0.0 {
        0
    } else if wait >= i64::MAX as f64 {
        i64::MAX
    } else {
        wait as i64
    }
}

/// A log as it would be with `count` more entries at `score`: what a check
/// that admits would leave behind, without writing anything.
pub struct WithRecorded<'a, L> {
    pub log: &'a L,
    pub score: f64,
    pub count: u64,
}

impl<L: ScoreLog> ScoreLog for WithRecorded<'_, L> {
    fn count_above(&self, floor: f64, cap: u64) -> u64 {
        let base = self.log.count_above(floor, cap);
        if self.score > floor {
            base.saturating_add(self.count).min(cap)
        } else {
            base
        }
    }

    fn nth_newest_above(&self, floor: f64, n: u64) -> Option<f64> {
        if self.score <= floor || self.count == 0 {
            return self.log.nth_newest_above(floor, n);
        }
        // Newest first: base entries above `score`, then the recorded ones,
        // then the rest of the base (equal scores are interchangeable).
        let newer = self.log.count_above(self.score, n);
        if n <= newer {
            self.log.nth_newest_above(floor, n)
        } else if n <= newer.saturating_add(self.count) {
            Some(self.score)
        } else {
            self.log.nth_newest_above(floor, n - self.count)
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A log held in a sorted vector: the reference the key API must match.
    #[derive(Debug, Default, Clone)]
    pub struct VecLog(pub Vec<f64>);

    impl VecLog {
        pub fn of(scores: &[u64]) -> Self {
            let mut scores: Vec<f64> = scores.iter().map(|&s| s as f64).collect();
            scores.sort_by(f64::total_cmp);
            VecLog(scores)
        }
        fn above(&self, floor: f64) -> impl Iterator<Item = f64> + '_ {
            self.0.iter().copied().filter(move |&s| s > floor)
        }
    }

    impl ScoreLog for VecLog {
        fn count_above(&self, floor: f64, cap: u64) -> u64 {
            (self.above(floor).count() as u64).min(cap)
        }
        fn nth_newest_above(&self, floor: f64, n: u64) -> Option<f64> {
            let above: Vec<f64> = self.above(floor).collect();
            above.iter().rev().nth(n.checked_sub(1)? as usize).copied()
        }
        fn known_count_above(&self, floor: f64) -> Option<u64> {
            Some(self.above(floor).count() as u64)
        }
        fn nth_oldest_above(&self, floor: f64, n: u64) -> Option<f64> {
            self.above(floor).nth(n.checked_sub(1)? as usize)
        }
    }

    /// The same log, read only from the newest end, as when no count is
    /// known: both ways to find an entry must agree.
    pub struct NewestFirst<'a>(pub &'a VecLog);

    impl ScoreLog for NewestFirst<'_> {
        fn count_above(&self, floor: f64, cap: u64) -> u64 {
            self.0.count_above(floor, cap)
        }
        fn nth_newest_above(&self, floor: f64, n: u64) -> Option<f64> {
            self.0.nth_newest_above(floor, n)
        }
    }

    const fn w(window_ms: u64, limit: u64) -> Window {
        Window { window_ms, limit }
    }

    const W: Window = w(1000, 3);

    fn after_admit(log: &VecLog, now: u64, cost: u64) -> VecLog {
        let mut scores = log.0.clone();
        scores.extend(std::iter::repeat_n(now as f64, cost as usize));
        scores.sort_by(f64::total_cmp);
        VecLog(scores)
    }

    #[test]
    fn entry_at_window_edge_is_out_and_one_later_is_in() {
        let now = 5000;
        assert_eq!(VecLog::of(&[4000]).count_above(W.floor(now), 9), 0);
        assert_eq!(VecLog::of(&[4001]).count_above(W.floor(now), 9), 1);
    }

    #[test]
    fn floor_is_exact_at_the_largest_values() {
        let w = Window {
            window_ms: MAX_MS,
            limit: 1,
        };
        assert_eq!(w.floor(MAX_MS), 0.0);
        assert_eq!(w.floor(0), -(MAX_MS as f64));
        assert_eq!((-(MAX_MS as f64)) as i64, -(MAX_MS as i64));
    }

    #[test]
    fn admits_up_to_the_limit_then_denies() {
        let log = VecLog::of(&[100, 200]);
        assert!(admits(&log, &[W], 300, 1));
        assert!(!admits(&log, &[W], 300, 2));
        let full = after_admit(&log, 300, 1);
        assert!(!admits(&full, &[W], 300, 1));
    }

    #[test]
    fn admitted_verdict_counts_the_recorded_request() {
        let log = after_admit(&VecLog::of(&[100, 200]), 300, 1);
        assert_eq!(
            verdict(&log, &[W], 300, 1, true),
            Verdict {
                allowed: true,
                limit: 3,
                remaining: 0,
                retry_after_ms: -1,
                reset_after_ms: 1000,
            }
        );
    }

    #[test]
    fn denied_verdict_waits_for_the_kth_oldest_entry() {
        // Full log at 100, 200, 300; a cost of 2 needs the two oldest gone:
        // the entry at 200 leaves at 1200, 900 ms after now = 300.
        let log = VecLog::of(&[100, 200, 300]);
        assert_eq!(
            verdict(&log, &[W], 300, 2, false),
            Verdict {
                allowed: false,
                limit: 3,
                remaining: 0,
                retry_after_ms: 900,
                reset_after_ms: 1000,
            }
        );
        assert_eq!(verdict(&log, &[W], 300, 1, false).retry_after_ms, 800);
    }

    #[test]
    fn waiting_cannot_help_a_cost_above_the_limit() {
        let log = VecLog::default();
        let zero = w(1000, 0);
        assert!(!admits(&log, &[zero], 10, 1));
        assert_eq!(
            verdict(&log, &[zero], 10, 1, false),
            Verdict {
                allowed: false,
                limit: 0,
                remaining: 0,
                retry_after_ms: -1,
                reset_after_ms: 0,
            }
        );
        assert_eq!(verdict(&log, &[W], 10, 4, false).retry_after_ms, -1);
    }

    #[test]
    fn entries_from_the_future_stay_in_the_window() {
        let log = VecLog::of(&[9000]);
        let v = verdict(&log, &[W], 5000, 1, false);
        assert_eq!(v.remaining, 2);
        assert_eq!(v.reset_after_ms, 5000);
    }

    #[test]
    fn fractional_and_infinite_scores_round_up_and_clamp() {
        let log = VecLog(vec![4500.5, f64::INFINITY]);
        let v = verdict(&log, &[w(1000, 2)], 5000, 1, false);
        assert_eq!(v.retry_after_ms, 501);
        assert_eq!(v.reset_after_ms, i64::MAX);
    }

    #[test]
    fn the_widest_window_sets_reset() {
        let short = w(10, 5);
        let long = w(100, 50);
        assert_eq!(widest(&[short, long]), long);
        let log = VecLog::of(&[95]);
        assert_eq!(
            verdict(&log, &[short, long], 100, 1, true).reset_after_ms,
            95
        );
    }

    #[test]
    fn admitted_verdict_names_the_window_with_least_left_first_on_ties() {
        let a = w(10, 2);
        let b = w(100, 5);
        let c = w(1000, 4);
        // Entries at 50 and 95: a holds 1 (1 left), b 2 (3 left), c 2 (2 left).
        let log = VecLog::of(&[50, 95]);
        let v = verdict(&log, &[a, b, c], 100, 1, true);
        assert_eq!((v.limit, v.remaining), (2, 1));
        let tie = w(1000, 3);
        let v = verdict(&log, &[c, tie, b], 100, 1, true);
        assert_eq!((v.limit, v.remaining), (3, 1));
    }

    #[test]
    fn denied_verdict_names_the_window_that_waits_longest() {
        let burst = w(10, 1);
        let hourly = w(1000, 2);
        // Entries at 0 and 95: burst denies (wait 5), hourly denies (wait 900).
        let log = VecLog::of(&[0, 95]);
        let v = verdict(&log, &[burst, hourly], 100, 1, false);
        assert_eq!((v.limit, v.retry_after_ms), (2, 900));
        // A window the cost can never fit outranks every wait.
        let v = verdict(&log, &[hourly, burst], 100, 2, false);
        assert_eq!((v.limit, v.retry_after_ms), (1, -1));
    }

    #[test]
    fn windows_that_admit_do_not_bind_a_denial() {
        let loose = w(10, 100);
        let tight = w(1000, 1);
        let log = VecLog::of(&[50]);
        let v = verdict(&log, &[loose, tight], 100, 1, false);
        assert_eq!((v.limit, v.remaining, v.retry_after_ms), (1, 0, 950));
    }

    /// A small deterministic generator, so failures reproduce.
    pub struct XorShift(pub u64);

    impl XorShift {
        pub fn below(&mut self, bound: u64) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0 % bound.max(1)
        }
    }

    #[test]
    fn recorded_overlay_reads_like_the_log_with_the_entries_added() {
        let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
        for _ in 0..2000 {
            let base: Vec<u64> = (0..rng.below(12)).map(|_| rng.below(40)).collect();
            let (score, count) = (rng.below(40), rng.below(4));
            let log = VecLog::of(&base);
            let overlay = WithRecorded {
                log: &log,
                score: score as f64,
                count,
            };
            let mut all = base.clone();
            all.extend(std::iter::repeat_n(score, count as usize));
            let real = VecLog::of(&all);
            for floor in -1..41 {
                let floor = floor as f64;
                for n in 0..18 {
                    assert_eq!(overlay.count_above(floor, n), real.count_above(floor, n));
                    assert_eq!(
                        overlay.nth_newest_above(floor, n),
                        real.nth_newest_above(floor, n),
                        "base {base:?} + {count} x {score}, floor {floor}, n {n}"
                    );
                }
            }
        }
    }

    #[test]
    fn verdicts_agree_with_a_full_count_whatever_the_cap() {
        // The reference: every figure from the whole sorted log.
        fn reference(scores: &[u64], w: Window, now: u64, cost: u64) -> (bool, u64, i64) {
            let floor = now as i64 - w.window_ms as i64;
            let inside: Vec<u64> = scores
                .iter()
                .copied()
                .filter(|&s| s as i64 > floor)
                .collect();
            let count = inside.len() as u64;
            let allowed = count + cost <= w.limit;
            let retry = if allowed || cost > w.limit {
                -1
            } else {
                let k = (count + cost - w.limit) as usize;
                inside[k - 1] as i64 + w.window_ms as i64 - now as i64
            };
            (allowed, w.limit.saturating_sub(count), retry)
        }
        let mut rng = XorShift(42);
        for _ in 0..5000 {
            let mut scores: Vec<u64> = (0..rng.below(20)).map(|_| rng.below(100)).collect();
            scores.sort();
            let w = Window {
                window_ms: 1 + rng.below(60),
                limit: rng.below(12),
            };
            let (now, cost) = (50 + rng.below(50), 1 + rng.below(5));
            let log = VecLog::of(&scores);
            let expected = reference(&scores, w, now, cost);
            let allowed = admits(&log, &[w], now, cost);
            let v = verdict(&log, &[w], now, cost, allowed);
            let got = (v.allowed, v.remaining, v.retry_after_ms);
            assert_eq!(got, expected, "{scores:?} {w:?} {now} {cost}");
            let newest_first = NewestFirst(&log);
            let v = verdict(&newest_first, &[w], now, cost, allowed);
            let got = (v.allowed, v.remaining, v.retry_after_ms);
            assert_eq!(got, expected, "newest first: {scores:?} {w:?} {now} {cost}");
        }
    }

    #[test]
    fn largest_limit_bounds_the_log() {
        let windows = [w(10, 7), w(100, 5)];
        assert_eq!(largest_limit(&windows), 7);
    }
}
