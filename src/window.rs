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

/// Read access to a log of scores, ascending.
pub trait ScoreLog {
    /// Number of entries with a score above `floor`.
    fn count_above(&self, floor: f64) -> u64;
    /// The `k`-th smallest score (1-based) among entries above `floor`.
    fn kth_above(&self, floor: f64, k: u64) -> Option<f64>;
    /// The largest score, if any entry lies above `floor`.
    fn max_above(&self, floor: f64) -> Option<f64>;
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

/// The window among `windows` that trims the log and sets its expiry.
/// `windows` is never empty: the parser always yields the first window.
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

/// Whether a request of `cost` units at `now` fits every window.
pub fn admits(log: &impl ScoreLog, windows: &[Window], now: u64, cost: u64) -> bool {
    windows
        .iter()
        .all(|w| fits(log.count_above(w.floor(now)), cost, w.limit))
}

fn fits(count: u64, cost: u64, limit: u64) -> bool {
    count.saturating_add(cost) <= limit
}

/// The reply for a request of `cost` units at `now`, read off the log as it
/// stands after the request was (or was not) recorded.
///
/// `limit`, `remaining` and `retry_after_ms` describe the binding window:
/// when denied, the denying window that makes the client wait longest (a
/// window that waiting cannot satisfy counts as longest); when admitted, the
/// window with the least left. Ties go to the window named first.
pub fn verdict(
    log: &impl ScoreLog,
    windows: &[Window],
    now: u64,
    cost: u64,
    allowed: bool,
) -> Verdict {
    let described = windows.iter().map(|window| {
        let count = log.count_above(window.floor(now));
        let denies = !fits(count, cost, window.limit);
        let reply = Verdict {
            allowed,
            limit: window.limit,
            remaining: window.limit.saturating_sub(count),
            retry_after_ms: if denies && !allowed {
                retry_after(log, *window, now, count, cost)
            } else {
                -1
            },
            reset_after_ms: 0,
        };
        (denies, reply)
    });
    let binding = if allowed {
        described.map(|(_, reply)| reply).reduce(|best, next| {
            if next.remaining < best.remaining {
                next
            } else {
                best
            }
        })
    } else {
        described
            .filter(|&(denies, _)| denies)
            .map(|(_, reply)| reply)
            .reduce(|best, next| {
                if waits_longer(next.retry_after_ms, best.retry_after_ms) {
                    next
                } else {
                    best
                }
            })
    };
    // A denial always has a denying window; should none deny on the log as
    // it now stands (a penalty cap shrank it), the first window describes it
    // and the client may retry at once.
    let mut reply = binding.unwrap_or_else(|| {
        let first = windows.first().copied().unwrap_or(widest(windows));
        Verdict {
            allowed,
            limit: first.limit,
            remaining: first
                .limit
                .saturating_sub(log.count_above(first.floor(now))),
            retry_after_ms: if allowed { -1 } else { 1 },
            reset_after_ms: 0,
        }
    });
    reply.reset_after_ms = reset_after(log, widest(windows), now);
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

/// When `cost` more units would fit this window, given `count` entries in it:
/// once the k-th oldest of them has left, k = count + cost - limit.
fn retry_after(log: &impl ScoreLog, window: Window, now: u64, count: u64, cost: u64) -> i64 {
    if cost > window.limit {
        return -1;
    }
    let k = count
        .saturating_add(cost)
        .saturating_sub(window.limit)
        .max(1);
    match log.kth_above(window.floor(now), k) {
        Some(score) => ms_until_left(score, window, now).max(1),
        None => 1,
    }
}

/// Milliseconds until every entry has left the widest window; 0 when empty.
fn reset_after(log: &impl ScoreLog, widest: Window, now: u64) -> i64 {
    match log.max_above(widest.floor(now)) {
        Some(score) => ms_until_left(score, widest, now),
        None => 0,
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
        fn count_above(&self, floor: f64) -> u64 {
            self.above(floor).count() as u64
        }
        fn kth_above(&self, floor: f64, k: u64) -> Option<f64> {
            self.above(floor).nth(k.checked_sub(1)? as usize)
        }
        fn max_above(&self, floor: f64) -> Option<f64> {
            self.above(floor).last()
        }
    }

    const W: Window = Window {
        window_ms: 1000,
        limit: 3,
    };

    fn after_admit(log: &VecLog, now: u64, cost: u64) -> VecLog {
        let mut scores = log.0.clone();
        scores.extend(std::iter::repeat_n(now as f64, cost as usize));
        scores.sort_by(f64::total_cmp);
        VecLog(scores)
    }

    #[test]
    fn entry_at_window_edge_is_out_and_one_later_is_in() {
        let now = 5000;
        assert_eq!(VecLog::of(&[4000]).count_above(W.floor(now)), 0);
        assert_eq!(VecLog::of(&[4001]).count_above(W.floor(now)), 1);
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
        let zero = Window {
            window_ms: 1000,
            limit: 0,
        };
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
        let v = verdict(
            &log,
            &[Window {
                window_ms: 1000,
                limit: 2,
            }],
            5000,
            1,
            false,
        );
        assert_eq!(v.retry_after_ms, 501);
        assert_eq!(v.reset_after_ms, i64::MAX);
    }

    #[test]
    fn the_widest_window_sets_reset() {
        let short = Window {
            window_ms: 10,
            limit: 5,
        };
        let long = Window {
            window_ms: 100,
            limit: 50,
        };
        assert_eq!(widest(&[short, long]), long);
        let log = VecLog::of(&[95]);
        assert_eq!(
            verdict(&log, &[short, long], 100, 1, true).reset_after_ms,
            95
        );
    }

    #[test]
    fn admitted_verdict_names_the_window_with_least_left_first_on_ties() {
        let a = Window {
            window_ms: 10,
            limit: 2,
        };
        let b = Window {
            window_ms: 100,
            limit: 5,
        };
        let c = Window {
            window_ms: 1000,
            limit: 4,
        };
        // Entries at 50 and 95: a holds 1 (1 left), b 2 (3 left), c 2 (2 left).
        let log = VecLog::of(&[50, 95]);
        let v = verdict(&log, &[a, b, c], 100, 1, true);
        assert_eq!((v.limit, v.remaining), (2, 1));
        let tie = Window {
            window_ms: 1000,
            limit: 3,
        };
        let v = verdict(&log, &[c, tie, b], 100, 1, true);
        assert_eq!((v.limit, v.remaining), (3, 1));
    }

    #[test]
    fn denied_verdict_names_the_window_that_waits_longest() {
        let burst = Window {
            window_ms: 10,
            limit: 1,
        };
        let hourly = Window {
            window_ms: 1000,
            limit: 2,
        };
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
        let loose = Window {
            window_ms: 10,
            limit: 100,
        };
        let tight = Window {
            window_ms: 1000,
            limit: 1,
        };
        let log = VecLog::of(&[50]);
        let v = verdict(&log, &[loose, tight], 100, 1, false);
        assert_eq!((v.limit, v.remaining, v.retry_after_ms), (1, 0, 950));
    }
}
