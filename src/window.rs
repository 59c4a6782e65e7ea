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

/// What a check does with a request that does not fit: the default
/// records nothing; PENALIZE records it and caps the log to the largest
/// limit; FORCE records all of it, uncapped (a charge made after the fact,
/// such as the tokens a response used).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OverLimit {
    Refuse,
    Penalize,
    Force,
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
/// entries at `now` (a denial too, as `over_limit` says: penalized, after
/// which the log is capped to the largest limit, or forced, uncapped), and
/// returns the reply.
pub fn check(
    log: &mut impl LogWriter,
    windows: &[Window],
    now: u64,
    cost: u64,
    over_limit: OverLimit,
) -> Verdict {
    log.trim_through(widest(windows).floor(now));
    let before = counts(log, windows, now);
    let allowed = admits(windows, &before, cost);
    let (recorded, cap) = match over_limit {
        _ if allowed => (cost, None),
        OverLimit::Refuse => (0, None),
        OverLimit::Penalize => {
            // However hard a client retries, its log stays this small.
            let cap = largest_limit(windows);
            let newer = log.count_above(now as i64);
            (penalty_entries(cost, cap, newer), Some(cap))
        }
        // Recorded past the limit: later checks refuse until enough leave.
        OverLimit::Force => (cost, None),
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
pub(crate) mod tests;
