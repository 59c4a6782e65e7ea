//! The sliding-window-log decision, as plain functions over a sorted log of
//! entry times (milliseconds). Nothing here knows about Redis: the log is
//! read through [`ScoreLog`], which the sorted-set key implements in
//! `redis/zset.rs` and a plain vector implements in the tests below.
//!
//! Every window's count is read once per call, and every other figure comes
//! from a rank in the log, so a call with W windows on a log of N entries
//! costs O(W log N) whatever the limits.

/// The largest integer a sorted-set score (an IEEE double) holds exactly.
pub const MAX_MS: u64 = (1 << 53) - 1;

/// Each unit of cost is one entry in the log, written in one call. The cap
/// keeps a single call from blocking the server or exhausting its memory.
pub const MAX_COST: u64 = 100_000;

/// Windows per call, the first one included. Each costs a count (O(log N))
/// and, when it denies, a lookup; the cap keeps one call's cost bounded
/// (`make bench` has the costliest call it allows).
pub const MAX_WINDOWS: usize = 100;

/// The wait reported for an entry that never leaves its window (a score of
/// `+inf` written by another tool): above every wait an entry the module
/// writes can give (at most 2 * MAX_MS), and exact as a double, so the
/// function library can reply it too.
pub const NEVER_MS: i64 = 1 << 54;

/// At most `limit` units in any `window_ms` milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub window_ms: u64,
    pub limit: u64,
}

impl Window {
    /// Entries scored at or below this are outside the window at `now`.
    /// Exact: both operands are at most 2^53-1.
    pub fn floor(&self, now: u64) -> i64 {
        now as i64 - self.window_ms as i64
    }
}

/// Read access to a log: a sorted multiset of scores. Each method should
/// cost at most O(log N).
pub trait ScoreLog {
    /// Number of entries.
    fn len(&self) -> u64;
    /// Number of entries scored above `floor`.
    fn count_above(&self, floor: i64) -> u64;
    /// The score at `rank`, 0 being the oldest entry.
    fn score_at(&self, rank: u64) -> Option<f64>;
}

/// The six integers every check replies with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    pub allowed: bool,
    pub limit: u64,
    pub remaining: u64,
    /// -1 when admitted or when waiting cannot help.
    pub retry_after_ms: i64,
    /// 0 when the log is empty.
    pub reset_after_ms: i64,
    /// The window `limit`, `remaining` and `retry_after_ms` describe.
    pub window_ms: u64,
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

/// The entries in each window at `now`, in the order of `windows`.
pub fn counts(log: &impl ScoreLog, windows: &[Window], now: u64) -> Vec<u64> {
    windows
        .iter()
        .map(|w| log.count_above(w.floor(now)))
        .collect()
}

fn fits(count: u64, cost: u64, window: Window) -> bool {
    count.saturating_add(cost) <= window.limit
}

/// Whether a request of `cost` units fits every window.
pub fn admits(windows: &[Window], counts: &[u64], cost: u64) -> bool {
    windows
        .iter()
        .zip(counts)
        .all(|(&w, &count)| fits(count, cost, w))
}

/// How many entries a penalized denial records: no more than the cap to
/// the largest limit keeps, so nothing is written only to be removed.
/// `newer` entries lie after `now` and outrank the ones recorded.
pub fn penalty_entries(cost: u64, largest_limit: u64, newer: u64) -> u64 {
    cost.min(largest_limit.saturating_sub(newer))
}

/// Each window's count after a call that recorded `recorded` entries at
/// `now` (inside every window) and then, with a `cap`, kept only the
/// newest `cap` entries of the log (each window is a newest part of it).
pub fn counts_after(counts: &[u64], recorded: u64, cap: Option<u64>) -> Vec<u64> {
    counts
        .iter()
        .map(|&count| {
            let count = count.saturating_add(recorded);
            cap.map_or(count, |cap| count.min(cap))
        })
        .collect()
}

/// The reply for a request of `cost` units at `now`, from each window's
/// count after the call (`counts`) and the log as it then stands.
/// `pending` says that `cost` entries at `now` count as recorded without
/// being in the log (SWL.PEEK of a request that would be admitted).
///
/// `limit`, `remaining`, `retry_after_ms` and `window_ms` describe the
/// binding window:
/// when denied, the denying window that makes the client wait longest (one
/// that waiting cannot satisfy counts as longest); when admitted, the window
/// with the least left. Ties go to the window named first.
pub fn verdict(
    log: &impl ScoreLog,
    windows: &[Window],
    counts: &[u64],
    now: u64,
    cost: u64,
    allowed: bool,
    pending: bool,
) -> Verdict {
    let describe = |window: Window, count: u64, retry_after_ms| Verdict {
        allowed,
        limit: window.limit,
        remaining: window.limit.saturating_sub(count),
        retry_after_ms,
        reset_after_ms: 0,
        window_ms: window.window_ms,
    };
    let seen = windows.iter().copied().zip(counts.iter().copied());
    let binding = if allowed {
        seen.map(|(w, count)| describe(w, count, -1))
            .reduce(|best, next| {
                if next.remaining < best.remaining {
                    next
                } else {
                    best
                }
            })
    } else {
        seen.filter(|&(w, count)| !fits(count, cost, w))
            .map(|(w, count)| describe(w, count, retry_after(log, w, now, cost)))
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
        let first = windows.first().copied().unwrap_or(widest(windows));
        let count = counts.first().copied().unwrap_or(0);
        describe(first, count, if allowed { -1 } else { 1 })
    });
    // An admitted check has recorded at `now`: its entry is among those
    // the reset waits for, also where another writer damaged the log's
    // ends (a compact log read in part).
    reply.reset_after_ms = reset_after(log, widest(windows), now, pending || allowed);
    reply
}

/// When `cost` more units would fit a window they do not fit now: once all
/// but the newest `limit - cost` entries have left it, i.e. when the
/// (limit - cost + 1)-th newest entry of the log leaves. That entry lies in
/// the window, which holds at least that many since the cost does not fit.
fn retry_after(log: &impl ScoreLog, window: Window, now: u64, cost: u64) -> i64 {
    if cost > window.limit {
        return -1;
    }
    let nth_newest = window.limit - cost + 1;
    let entry = log
        .len()
        .checked_sub(nth_newest)
        .and_then(|rank| log.score_at(rank));
    entry.map_or(1, |score| ms_until_left(score, window, now).max(1))
}

/// Until the newest entry leaves the widest window; 0 if none is in it.
fn reset_after(log: &impl ScoreLog, widest: Window, now: u64, pending: bool) -> i64 {
    let floor = widest.floor(now) as f64;
    let newest = log
        .len()
        .checked_sub(1)
        .and_then(|rank| log.score_at(rank))
        .filter(|&score| score > floor);
    let newest = match (newest, pending) {
        (Some(score), true) => Some(score.max(now as f64)),
        (None, true) => Some(now as f64),
        (newest, false) => newest,
    };
    newest.map_or(0, |score| ms_until_left(score, widest, now))
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
/// until `score <= t - window_ms`, in exact integer arithmetic: the sum can
/// pass 2^53, where doubles lose their last bits. Scores written by other
/// tools may be fractional (rounded up: ceil(s + w - t) = ceil(s) + w - t)
/// or infinite (never leaves: NEVER_MS).
pub fn ms_until_left(score: f64, window: Window, now: u64) -> i64 {
    // Beyond this a score is past every real time; below, ceil is exact
    // and converts to an integer exactly.
    const HUGE: f64 = (1u64 << 60) as f64;
    let score = score.ceil();
    if score.is_nan() || score <= -HUGE {
        return 0;
    }
    if score >= HUGE {
        return NEVER_MS;
    }
    let wait = score as i128 + i128::from(window.window_ms) - i128::from(now);
    wait.clamp(0, i128::from(NEVER_MS)) as i64
}

/// The key's absolute expiry after a check, given its expiry before
/// (`current`) and the moment its newest entry leaves (`target`): an
/// admitted request sets exactly that; a denial may lengthen the expiry
/// but never shortens it, so the key outlives the wait it reports.
pub fn expiry_after(allowed: bool, current: Option<i64>, target: i64) -> i64 {
    match current {
        Some(at) if !allowed => at.max(target),
        _ => target,
    }
}

/// What a check needs to change the log, beside reading it.
pub trait LogWriter: ScoreLog {
    /// Removes every entry scored at or below `floor`.
    fn trim_through(&mut self, floor: i64);
    /// Adds `count` entries scored `at`.
    fn record(&mut self, at: u64, count: u64);
    /// Drops the oldest entries until at most `max_entries` are left.
    fn cap_to(&mut self, max_entries: u64);
    /// Removes the `count` newest entries (all of them if fewer).
    fn drop_newest(&mut self, count: u64);
}

/// SWL.CHECK on a log: trims it to the widest window, admits the request
/// if every window has room for `cost` more units, records it as `cost`
/// entries at `now` (a denial too, with `penalize`, after which the log is
/// capped to the largest limit), and returns the reply.
pub fn check(
    log: &mut impl LogWriter,
    windows: &[Window],
    now: u64,
    cost: u64,
    penalize: bool,
) -> Verdict {
    log.trim_through(widest(windows).floor(now));
    let before = counts(log, windows, now);
    let allowed = admits(windows, &before, cost);
    let (recorded, cap) = if allowed {
        (cost, None)
    } else if penalize {
        // However hard a client retries, its log stays this small.
        let cap = largest_limit(windows);
        let newer = log.count_above(now as i64);
        (penalty_entries(cost, cap, newer), Some(cap))
    } else {
        (0, None)
    };
    // Capping first to leave room for what is recorded keeps the same
    // entries as recording then capping (what is recorded at `now` is
    // among the newest `cap`), and leaves recording as the last change, so
    // no change follows one that moved slots.
    if let Some(cap) = cap {
        log.cap_to(cap - recorded);
    }
    if recorded > 0 {
        log.record(now, recorded);
    }
    let after = counts_after(&before, recorded, cap);
    verdict(log, windows, &after, now, cost, allowed, false)
}

/// SWL.REFUND on a log: trims it as `check` would, gives back up to `cost`
/// of its newest entries, and replies what `peek` replies afterwards.
pub fn refund(log: &mut impl LogWriter, windows: &[Window], now: u64, cost: u64) -> Verdict {
    log.trim_through(widest(windows).floor(now));
    log.drop_newest(cost);
    peek(log, windows, now, cost)
}

/// Until the newest entry in the widest window leaves it (0 if none is
/// in it): how long the log must live, whatever a reply says of a request
/// not yet recorded.
pub fn newest_leaves_after(log: &impl ScoreLog, windows: &[Window], now: u64) -> i64 {
    reset_after(log, widest(windows), now, false)
}

/// SWL.PEEK on a log: the reply `check` would give, changing nothing.
/// Entries outside the widest window are ignored rather than trimmed.
pub fn peek(log: &impl ScoreLog, windows: &[Window], now: u64, cost: u64) -> Verdict {
    let before = counts(log, windows, now);
    let allowed = admits(windows, &before, cost);
    let after = counts_after(&before, if allowed { cost } else { 0 }, None);
    verdict(log, windows, &after, now, cost, allowed, allowed)
}

/// SWL.PEEK with OLDEST: the verdict, and the milliseconds until the
/// oldest entry in its window leaves that window (see `oldest_after`).
pub fn peek_with_oldest(
    log: &impl ScoreLog,
    windows: &[Window],
    now: u64,
    cost: u64,
) -> (Verdict, i64) {
    let verdict = peek(log, windows, now, cost);
    let window = Window {
        window_ms: verdict.window_ms,
        limit: verdict.limit,
    };
    (verdict, oldest_after(log, window, now, verdict.allowed))
}

/// Milliseconds until the oldest entry in `window` leaves it, counting a
/// `pending` request at `now` as recorded (as a peek of an admit does);
/// 0 when the window holds none. What a client that reports "the window
/// started at its oldest entry" (Python's `limits`) needs.
pub fn oldest_after(log: &impl ScoreLog, window: Window, now: u64, pending: bool) -> i64 {
    let in_window = log.count_above(window.floor(now));
    let oldest = match in_window {
        0 => None,
        n => log.len().checked_sub(n).and_then(|rank| log.score_at(rank)),
    };
    let oldest = match (oldest, pending) {
        (Some(score), true) => Some(score.min(now as f64)),
        (None, true) => Some(now as f64),
        (oldest, false) => oldest,
    };
    oldest.map_or(0, |score| ms_until_left(score, window, now))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A log held in a sorted vector: the reference every encoding matches.
    #[derive(Debug, Default, Clone, PartialEq)]
    pub struct VecLog(pub Vec<f64>);

    impl VecLog {
        pub fn of(scores: &[u64]) -> Self {
            let mut scores: Vec<f64> = scores.iter().map(|&s| s as f64).collect();
            scores.sort_by(f64::total_cmp);
            VecLog(scores)
        }
    }

    impl ScoreLog for VecLog {
        fn len(&self) -> u64 {
            self.0.len() as u64
        }
        fn count_above(&self, floor: i64) -> u64 {
            self.0.iter().filter(|&&s| s > floor as f64).count() as u64
        }
        fn score_at(&self, rank: u64) -> Option<f64> {
            self.0.get(usize::try_from(rank).ok()?).copied()
        }
    }

    impl LogWriter for VecLog {
        fn trim_through(&mut self, floor: i64) {
            self.0.retain(|&s| s > floor as f64);
        }
        fn record(&mut self, at: u64, count: u64) {
            self.0
                .extend(std::iter::repeat_n(at as f64, count as usize));
            self.0.sort_by(f64::total_cmp);
        }
        fn cap_to(&mut self, max_entries: u64) {
            let excess = self.0.len().saturating_sub(max_entries as usize);
            self.0.drain(..excess);
        }
        fn drop_newest(&mut self, count: u64) {
            let keep = self.0.len().saturating_sub(count as usize);
            self.0.truncate(keep);
        }
    }

    const fn w(window_ms: u64, limit: u64) -> Window {
        Window { window_ms, limit }
    }

    const W: Window = w(1000, 3);

    #[test]
    fn oldest_after_is_when_the_oldest_in_the_replys_window_leaves() {
        let oldest = |scores: &[u64], windows: &[Window], now, cost| {
            peek_with_oldest(&VecLog::of(scores), windows, now, cost).1
        };
        // Empty: a peek that would admit counts itself, at now.
        assert_eq!(oldest(&[], &[W], 500, 1), 1000);
        // The oldest in the window (200), not the one already out (0).
        assert_eq!(oldest(&[0, 200, 400], &[W], 1100, 1), 100);
        // A denial counts nothing pending: still the oldest present.
        assert_eq!(oldest(&[200, 300, 400], &[W], 1100, 1), 100);
        // Entries from the future: an admit's own entry at now is older.
        assert_eq!(oldest(&[900], &[W], 500, 1), 1000);
        assert_eq!(oldest(&[900, 900, 900], &[W], 500, 1), 1400);
        // The reply's window is the narrow one, which holds only 1050.
        let windows = [w(10_000, 100), w(100, 1)];
        assert_eq!(oldest(&[200, 1050], &windows, 1100, 1), 50);
        // Denied by nothing that fits: no pending entry, an empty window.
        assert_eq!(oldest(&[], &[w(1000, 0)], 500, 1), 0);
    }

    fn denial(window: Window, remaining: u64, retry: i64, reset: i64) -> Verdict {
        Verdict {
            allowed: false,
            limit: window.limit,
            remaining,
            retry_after_ms: retry,
            reset_after_ms: reset,
            window_ms: window.window_ms,
        }
    }

    #[test]
    fn entry_at_window_edge_is_out_and_one_later_is_in() {
        let now = 5000;
        assert_eq!(VecLog::of(&[4000]).count_above(W.floor(now)), 0);
        assert_eq!(VecLog::of(&[4001]).count_above(W.floor(now)), 1);
        let mut log = VecLog::of(&[4000, 4001]);
        check(&mut log, &[W], now, 1, false);
        assert_eq!(log, VecLog::of(&[4001, 5000]));
    }

    #[test]
    fn floor_is_exact_at_the_largest_values() {
        let w = w(MAX_MS, 1);
        assert_eq!(w.floor(MAX_MS), 0);
        assert_eq!(w.floor(0), -(MAX_MS as i64));
        assert_eq!(w.floor(0) as f64 as i64, -(MAX_MS as i64));
    }

    #[test]
    fn admits_up_to_the_limit_then_denies() {
        let mut log = VecLog::of(&[100, 200]);
        assert!(!check(&mut log.clone(), &[W], 300, 2, false).allowed);
        let admitted = check(&mut log, &[W], 300, 1, false);
        assert_eq!(
            admitted,
            Verdict {
                allowed: true,
                limit: 3,
                remaining: 0,
                retry_after_ms: -1,
                reset_after_ms: 1000,
                window_ms: 1000,
            }
        );
        assert!(!check(&mut log, &[W], 300, 1, false).allowed);
        assert_eq!(log, VecLog::of(&[100, 200, 300]));
    }

    #[test]
    fn denied_verdict_waits_for_the_kth_oldest_entry() {
        // Full log at 100, 200, 300; a cost of 2 needs the two oldest gone:
        // the entry at 200 leaves at 1200, 900 ms after now = 300.
        let mut log = VecLog::of(&[100, 200, 300]);
        assert_eq!(
            check(&mut log, &[W], 300, 2, false),
            denial(W, 0, 900, 1000)
        );
        assert_eq!(check(&mut log, &[W], 300, 1, false).retry_after_ms, 800);
        assert_eq!(log, VecLog::of(&[100, 200, 300]));
    }

    #[test]
    fn waiting_cannot_help_a_cost_above_the_limit() {
        let mut log = VecLog::default();
        assert_eq!(
            check(&mut log, &[w(1000, 0)], 10, 1, false),
            denial(w(1000, 0), 0, -1, 0)
        );
        assert_eq!(check(&mut log, &[W], 10, 4, false).retry_after_ms, -1);
    }

    #[test]
    fn entries_from_the_future_stay_in_the_window() {
        let mut log = VecLog::of(&[9000]);
        let v = check(&mut log, &[w(1000, 1)], 5000, 1, false);
        assert_eq!(v, denial(w(1000, 1), 0, 5000, 5000));
        assert_eq!(log, VecLog::of(&[9000]));
    }

    #[test]
    fn fractional_scores_round_up_and_infinite_ones_never_leave() {
        let mut log = VecLog(vec![4500.5, f64::INFINITY]);
        let v = check(&mut log, &[w(1000, 2)], 5000, 1, false);
        assert_eq!(v, denial(w(1000, 2), 0, 501, NEVER_MS));
        let mut log = VecLog(vec![f64::INFINITY]);
        assert_eq!(
            check(&mut log, &[w(1000, 1)], 5000, 1, false).retry_after_ms,
            NEVER_MS
        );
        // -inf is out of every window and trimmed.
        let mut log = VecLog(vec![f64::NEG_INFINITY]);
        assert!(check(&mut log, &[w(1000, 1)], 5000, 1, false).allowed);
        assert_eq!(log, VecLog::of(&[5000]));
    }

    #[test]
    fn every_figure_is_exact_at_the_top_of_the_range() {
        // Sums here pass 2^53, where doubles lose their last bit.
        let top = w(1000, 2);
        let mut log = VecLog::default();
        let v = check(&mut log, &[top], MAX_MS, 1, false);
        assert_eq!((v.remaining, v.reset_after_ms), (1, 1000));
        // Earlier in time: the entry at 2^53-1 is still in the window.
        let v = check(&mut log, &[top], 0, 1, false);
        assert_eq!((v.remaining, v.reset_after_ms), (0, 9_007_199_254_741_991));
        assert_eq!(log, VecLog::of(&[0, MAX_MS]));
        let v = check(&mut log, &[top], 0, 1, false);
        assert_eq!(v, denial(top, 0, 1000, 9_007_199_254_741_991));
        let wide = w(MAX_MS, MAX_MS);
        let v = check(&mut VecLog::of(&[MAX_MS]), &[wide], 0, 1, false);
        assert_eq!(v.limit, MAX_MS);
        assert_eq!(v.remaining, MAX_MS - 2);
        assert_eq!(v.reset_after_ms, 2 * MAX_MS as i64);
        let full = w(MAX_MS, 1);
        let v = check(&mut VecLog::of(&[MAX_MS]), &[full], 0, 1, false);
        assert_eq!(v.retry_after_ms, 2 * MAX_MS as i64);
        assert_eq!(ms_until_left(MAX_MS as f64, w(1, 1), MAX_MS), 1);
        assert_eq!(ms_until_left(0.0, wide, MAX_MS), 0);
        assert_eq!(ms_until_left(1e300, wide, 0), NEVER_MS);
        assert_eq!(ms_until_left(-1e300, wide, 0), 0);
    }

    #[test]
    fn the_widest_window_sets_reset() {
        let short = w(10, 5);
        let long = w(100, 50);
        assert_eq!(widest(&[short, long]), long);
        let mut log = VecLog::of(&[95]);
        assert_eq!(
            check(&mut log, &[short, long], 100, 1, false).reset_after_ms,
            100
        );
        assert_eq!(
            peek(&VecLog::of(&[95]), &[short, long], 100, 1).reset_after_ms,
            100
        );
        assert_eq!(
            peek(&VecLog::of(&[95]), &[short, long], 100, 99).reset_after_ms,
            95
        );
    }

    #[test]
    fn admitted_verdict_names_the_window_with_least_left_first_on_ties() {
        let a = w(10, 2);
        let b = w(100, 5);
        let c = w(1000, 4);
        // Entries at 50 and 95, and the peeked request at 100.
        let log = VecLog::of(&[50, 95]);
        let v = peek(&log, &[b, c], 100, 1);
        assert_eq!((v.limit, v.remaining), (4, 1));
        let tie = w(1000, 3);
        let v = peek(&log, &[w(1000, 4), tie, b], 100, 0);
        assert_eq!((v.limit, v.remaining), (3, 1));
        let v = peek(&log, &[a, b], 100, 1);
        assert_eq!((v.limit, v.remaining), (2, 0));
    }

    #[test]
    fn denied_verdict_names_the_window_that_waits_longest() {
        let burst = w(10, 1);
        let hourly = w(1000, 2);
        // Entries at 0 and 95: burst denies (wait 5), hourly denies (wait 900).
        let log = VecLog::of(&[0, 95]);
        let v = peek(&log, &[burst, hourly], 100, 1);
        assert_eq!((v.limit, v.retry_after_ms, v.window_ms), (2, 900, 1000));
        // A window the cost can never fit outranks every wait.
        let v = peek(&log, &[hourly, burst], 100, 2);
        assert_eq!((v.limit, v.retry_after_ms, v.window_ms), (1, -1, 10));
    }

    #[test]
    fn windows_that_admit_do_not_bind_a_denial() {
        let loose = w(10, 100);
        let tight = w(1000, 1);
        let v = peek(&VecLog::of(&[50]), &[loose, tight], 100, 1);
        assert_eq!((v.limit, v.remaining, v.retry_after_ms), (1, 0, 950));
    }

    #[test]
    fn a_penalty_above_every_limit_records_nothing() {
        let mut log = VecLog::default();
        let v = check(&mut log, &[w(1000, 0)], 5, 100_000, true);
        assert_eq!(v, denial(w(1000, 0), 0, -1, 0));
        assert_eq!(log, VecLog::default());
        assert_eq!(penalty_entries(100_000, 0, 0), 0);
        assert_eq!(penalty_entries(100_000, 7, 0), 7);
        assert_eq!(penalty_entries(5, 7, 3), 4);
        assert_eq!(penalty_entries(5, 7, 9), 0);
    }

    #[test]
    fn a_denial_lengthens_an_expiry_and_never_shortens_it() {
        assert_eq!(expiry_after(true, Some(900), 500), 500);
        assert_eq!(expiry_after(true, None, 500), 500);
        assert_eq!(expiry_after(false, Some(400), 500), 500);
        assert_eq!(expiry_after(false, Some(900), 500), 900);
        assert_eq!(expiry_after(false, None, 500), 500);
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

    /// SWL.CHECK written from the README's rules alone, over the whole
    /// sorted log: record all of a penalty, then cap.
    fn reference_check(
        log: &mut Vec<u64>,
        windows: &[Window],
        now: u64,
        cost: u64,
        penalize: bool,
        peek: bool,
    ) -> Verdict {
        let in_window = |log: &[u64], w: &Window| -> Vec<u64> {
            log.iter()
                .copied()
                .filter(|&s| s as i64 > now as i64 - w.window_ms as i64)
                .collect()
        };
        let wide = *windows.iter().max_by_key(|w| w.window_ms).unwrap();
        let mut after = log.clone();
        if !peek {
            after.retain(|&s| s as i64 > now as i64 - wide.window_ms as i64);
        }
        let allowed = windows
            .iter()
            .all(|w| in_window(&after, w).len() as u64 + cost <= w.limit);
        if allowed || penalize {
            after.extend(std::iter::repeat_n(now, cost as usize));
            after.sort();
        }
        if !allowed && penalize {
            let cap = windows.iter().map(|w| w.limit).max().unwrap() as usize;
            let excess = after.len().saturating_sub(cap);
            after.drain(..excess);
        }
        let mut best: Option<Verdict> = None;
        for w in windows {
            let inside = in_window(&after, w);
            let count = inside.len() as u64;
            let fits = count + cost <= w.limit;
            let retry = if allowed || fits || cost > w.limit {
                -1
            } else {
                let k = (count + cost - w.limit) as usize;
                (inside[k - 1] as i64 + w.window_ms as i64 - now as i64).max(1)
            };
            let v = Verdict {
                allowed,
                limit: w.limit,
                remaining: w.limit.saturating_sub(count),
                retry_after_ms: retry,
                reset_after_ms: 0,
                window_ms: w.window_ms,
            };
            let better = match best {
                None => allowed || !fits,
                Some(b) if allowed => v.remaining < b.remaining,
                Some(b) => !fits && waits_longer(v.retry_after_ms, b.retry_after_ms),
            };
            if better {
                best = Some(v);
            }
        }
        let mut v = best.unwrap_or_else(|| Verdict {
            allowed,
            limit: windows[0].limit,
            remaining: windows[0]
                .limit
                .saturating_sub(in_window(&after, &windows[0]).len() as u64),
            retry_after_ms: 1,
            reset_after_ms: 0,
            window_ms: windows[0].window_ms,
        });
        v.reset_after_ms = in_window(&after, &wide)
            .last()
            .map_or(0, |&s| (s + wide.window_ms) as i64 - now as i64);
        if !peek {
            *log = after;
        }
        v
    }

    #[test]
    fn checks_and_peeks_agree_with_the_rules_read_off_the_whole_log() {
        let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
        for round in 0..3000 {
            let mut reference: Vec<u64> = (0..rng.below(30)).map(|_| rng.below(200)).collect();
            reference.sort();
            let mut log = VecLog::of(&reference);
            for step in 0..8 {
                let windows: Vec<Window> = (0..1 + rng.below(3))
                    .map(|_| w(1 + rng.below(120), rng.below(12)))
                    .collect();
                let now = 100 + rng.below(150);
                let cost = 1 + rng.below(5);
                let penalize = rng.below(3) == 0;
                let context = format!("round {round} step {step}: {reference:?} {windows:?} now {now} cost {cost} penalize {penalize}");
                let expected =
                    reference_check(&mut reference.clone(), &windows, now, cost, false, true);
                assert_eq!(peek(&log, &windows, now, cost), expected, "peek {context}");
                let expected =
                    reference_check(&mut reference, &windows, now, cost, penalize, false);
                assert_eq!(
                    check(&mut log, &windows, now, cost, penalize),
                    expected,
                    "{context}"
                );
                assert_eq!(log, VecLog::of(&reference), "log after {context}");
            }
        }
    }

    #[test]
    fn a_refund_trims_then_gives_back_the_newest_entries() {
        let mut log = VecLog::of(&[100, 900, 1500, 1500, 1600]);
        // At 2000 the entry at 900 is gone (<= 2000 - 1100): it is trimmed,
        // not given back.
        let v = refund(&mut log, &[w(1100, 4)], 2000, 1);
        assert_eq!(log, VecLog::of(&[1500, 1500]));
        assert_eq!(v, peek(&log, &[w(1100, 4)], 2000, 1));
        // The reply counts the request it asks about at `now`; the log
        // itself lives until its newest entry leaves.
        assert!(v.allowed);
        assert_eq!((v.remaining, v.reset_after_ms), (1, 1100));
        assert_eq!(newest_leaves_after(&log, &[w(1100, 4)], 2000), 600);
    }

    #[test]
    fn a_refund_of_more_than_the_log_holds_empties_it() {
        let mut log = VecLog::of(&[10, 20]);
        let v = refund(&mut log, &[W], 30, 5);
        assert_eq!(log, VecLog::default());
        assert_eq!(v, peek(&VecLog::default(), &[W], 30, 5));
        assert_eq!(newest_leaves_after(&log, &[W], 30), 0);
    }

    #[test]
    fn checks_and_refunds_agree_with_the_rules_read_off_the_whole_log() {
        let mut rng = XorShift(0x2545_f491_4f6c_dd1d);
        for round in 0..2000 {
            let mut reference: Vec<u64> = Vec::new();
            let mut log = VecLog::default();
            for step in 0..10 {
                let windows: Vec<Window> = (0..1 + rng.below(3))
                    .map(|_| w(1 + rng.below(120), rng.below(12)))
                    .collect();
                let now = 100 + rng.below(150);
                let cost = 1 + rng.below(5);
                let context = format!(
                    "round {round} step {step}: {reference:?} {windows:?} now {now} cost {cost}"
                );
                if rng.below(2) == 0 {
                    let expected =
                        reference_check(&mut reference, &windows, now, cost, false, false);
                    assert_eq!(check(&mut log, &windows, now, cost, false), expected);
                } else {
                    let floor = widest(&windows).floor(now);
                    reference.retain(|&s| s as i64 > floor);
                    let keep = reference.len().saturating_sub(cost as usize);
                    reference.truncate(keep);
                    let expected =
                        reference_check(&mut reference.clone(), &windows, now, cost, false, true);
                    assert_eq!(refund(&mut log, &windows, now, cost), expected, "{context}");
                }
                assert_eq!(log, VecLog::of(&reference), "log after {context}");
            }
        }
    }

    #[test]
    fn largest_limit_bounds_the_log() {
        let windows = [w(10, 7), w(100, 5)];
        assert_eq!(largest_limit(&windows), 7);
        let mut log = VecLog::of(&[1, 2, 3, 4, 5, 6, 7, 8, 9]);
        let v = check(&mut log, &windows, 10, 3, true);
        assert!(!v.allowed);
        assert_eq!(log, VecLog::of(&[6, 7, 8, 9, 10, 10, 10]));
    }
}
