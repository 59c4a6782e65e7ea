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
    check(&mut log, &[W], now, 1, OverLimit::Refuse);
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
    assert!(!check(&mut log.clone(), &[W], 300, 2, OverLimit::Refuse).allowed);
    let admitted = check(&mut log, &[W], 300, 1, OverLimit::Refuse);
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
    assert!(!check(&mut log, &[W], 300, 1, OverLimit::Refuse).allowed);
    assert_eq!(log, VecLog::of(&[100, 200, 300]));
}

#[test]
fn denied_verdict_waits_for_the_kth_oldest_entry() {
    // Full log at 100, 200, 300; a cost of 2 needs the two oldest gone:
    // the entry at 200 leaves at 1200, 900 ms after now = 300.
    let mut log = VecLog::of(&[100, 200, 300]);
    assert_eq!(
        check(&mut log, &[W], 300, 2, OverLimit::Refuse),
        denial(W, 0, 900, 1000)
    );
    assert_eq!(
        check(&mut log, &[W], 300, 1, OverLimit::Refuse).retry_after_ms,
        800
    );
    assert_eq!(log, VecLog::of(&[100, 200, 300]));
}

#[test]
fn waiting_cannot_help_a_cost_above_the_limit() {
    let mut log = VecLog::default();
    assert_eq!(
        check(&mut log, &[w(1000, 0)], 10, 1, OverLimit::Refuse),
        denial(w(1000, 0), 0, -1, 0)
    );
    assert_eq!(
        check(&mut log, &[W], 10, 4, OverLimit::Refuse).retry_after_ms,
        -1
    );
}

#[test]
fn entries_from_the_future_stay_in_the_window() {
    let mut log = VecLog::of(&[9000]);
    let v = check(&mut log, &[w(1000, 1)], 5000, 1, OverLimit::Refuse);
    assert_eq!(v, denial(w(1000, 1), 0, 5000, 5000));
    assert_eq!(log, VecLog::of(&[9000]));
}

#[test]
fn fractional_scores_round_up_and_infinite_ones_never_leave() {
    let mut log = VecLog(vec![4500.5, f64::INFINITY]);
    let v = check(&mut log, &[w(1000, 2)], 5000, 1, OverLimit::Refuse);
    assert_eq!(v, denial(w(1000, 2), 0, 501, NEVER_MS));
    let mut log = VecLog(vec![f64::INFINITY]);
    assert_eq!(
        check(&mut log, &[w(1000, 1)], 5000, 1, OverLimit::Refuse).retry_after_ms,
        NEVER_MS
    );
    // -inf is out of every window and trimmed.
    let mut log = VecLog(vec![f64::NEG_INFINITY]);
    assert!(check(&mut log, &[w(1000, 1)], 5000, 1, OverLimit::Refuse).allowed);
    assert_eq!(log, VecLog::of(&[5000]));
}

#[test]
fn every_figure_is_exact_at_the_top_of_the_range() {
    // Sums here pass 2^53, where doubles lose their last bit.
    let top = w(1000, 2);
    let mut log = VecLog::default();
    let v = check(&mut log, &[top], MAX_MS, 1, OverLimit::Refuse);
    assert_eq!((v.remaining, v.reset_after_ms), (1, 1000));
    // Earlier in time: the entry at 2^53-1 is still in the window.
    let v = check(&mut log, &[top], 0, 1, OverLimit::Refuse);
    assert_eq!((v.remaining, v.reset_after_ms), (0, 9_007_199_254_741_991));
    assert_eq!(log, VecLog::of(&[0, MAX_MS]));
    let v = check(&mut log, &[top], 0, 1, OverLimit::Refuse);
    assert_eq!(v, denial(top, 0, 1000, 9_007_199_254_741_991));
    let wide = w(MAX_MS, MAX_MS);
    let v = check(&mut VecLog::of(&[MAX_MS]), &[wide], 0, 1, OverLimit::Refuse);
    assert_eq!(v.limit, MAX_MS);
    assert_eq!(v.remaining, MAX_MS - 2);
    assert_eq!(v.reset_after_ms, 2 * MAX_MS as i64);
    let full = w(MAX_MS, 1);
    let v = check(&mut VecLog::of(&[MAX_MS]), &[full], 0, 1, OverLimit::Refuse);
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
        check(&mut log, &[short, long], 100, 1, OverLimit::Refuse).reset_after_ms,
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
    let v = check(&mut log, &[w(1000, 0)], 5, 100_000, OverLimit::Penalize);
    assert_eq!(v, denial(w(1000, 0), 0, -1, 0));
    assert_eq!(log, VecLog::default());
    assert_eq!(penalty_entries(100_000, 0, 0), 0);
    assert_eq!(penalty_entries(100_000, 7, 0), 7);
    assert_eq!(penalty_entries(5, 7, 3), 4);
    assert_eq!(penalty_entries(5, 7, 9), 0);
}

#[test]
fn a_forced_request_over_the_limit_is_recorded_in_full() {
    let mut log = VecLog::of(&[100, 200, 300]);
    // Denied, and recorded: the window holds 4 of 3. One more fits once
    // the two oldest have left: the entry at 200 leaves at 1200.
    let v = check(&mut log, &[W], 400, 1, OverLimit::Force);
    assert_eq!(v, denial(W, 0, 800, 1000));
    assert_eq!(log, VecLog::of(&[100, 200, 300, 400]));
    // A plain check refuses while the window holds more than its limit.
    let v = check(&mut log, &[W], 1100, 1, OverLimit::Refuse);
    assert_eq!(v, denial(W, 0, 100, 300));
    assert_eq!(log, VecLog::of(&[200, 300, 400]));
    assert!(check(&mut log, &[W], 1200, 1, OverLimit::Refuse).allowed);
    assert_eq!(log, VecLog::of(&[300, 400, 1200]));
    // A cost above the limit is recorded whole, with no cap.
    let v = check(&mut log, &[W], 1200, 5, OverLimit::Force);
    assert_eq!(v, denial(W, 0, -1, 1000));
    assert_eq!(log.len(), 8);
}

#[test]
fn a_forced_request_that_fits_is_a_plain_admit() {
    for (scores, windows, now, cost) in [
        (&[][..], &[W][..], 10, 1),
        (&[100, 200], &[W], 300, 1),
        (&[900], &[w(1000, 2)], 500, 1),
        (&[50, 95], &[w(10, 2), w(100, 5)], 100, 1),
    ] {
        let (mut plain, mut forced) = (VecLog::of(scores), VecLog::of(scores));
        let v = check(&mut plain, windows, now, cost, OverLimit::Refuse);
        assert!(v.allowed, "{scores:?}");
        assert_eq!(check(&mut forced, windows, now, cost, OverLimit::Force), v);
        assert_eq!(forced, plain, "{scores:?}");
    }
}

#[test]
fn a_forced_request_under_a_zero_limit_is_recorded() {
    let mut log = VecLog::default();
    let v = check(&mut log, &[w(1000, 0)], 5, 3, OverLimit::Force);
    assert_eq!(v, denial(w(1000, 0), 0, -1, 1000));
    assert_eq!(log, VecLog::of(&[5, 5, 5]));
}

#[test]
fn a_forced_request_counts_in_every_window_and_the_denying_one_binds() {
    let (burst, hourly) = (w(10, 1), w(1000, 5));
    let mut log = VecLog::of(&[995]);
    // The burst window denies; the hourly one had room and counts it too.
    let v = check(&mut log, &[burst, hourly], 1000, 1, OverLimit::Force);
    assert_eq!(v, denial(burst, 0, 10, 1000));
    assert_eq!(log, VecLog::of(&[995, 1000]));
    let v = peek(&log, &[hourly], 1000, 1);
    assert_eq!((v.allowed, v.remaining), (true, 2));
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
/// sorted log: record all of a penalty, then cap; record all of a forced
/// request, uncapped.
fn reference_check(
    log: &mut Vec<u64>,
    windows: &[Window],
    now: u64,
    cost: u64,
    over_limit: OverLimit,
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
    if allowed || over_limit != OverLimit::Refuse {
        after.extend(std::iter::repeat_n(now, cost as usize));
        after.sort();
    }
    if !allowed && over_limit == OverLimit::Penalize {
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
            let over_limit = match rng.below(4) {
                0 => OverLimit::Penalize,
                1 => OverLimit::Force,
                _ => OverLimit::Refuse,
            };
            let context = format!("round {round} step {step}: {reference:?} {windows:?} now {now} cost {cost} {over_limit:?}");
            let expected = reference_check(
                &mut reference.clone(),
                &windows,
                now,
                cost,
                OverLimit::Refuse,
                true,
            );
            assert_eq!(peek(&log, &windows, now, cost), expected, "peek {context}");
            let expected = reference_check(&mut reference, &windows, now, cost, over_limit, false);
            assert_eq!(
                check(&mut log, &windows, now, cost, over_limit),
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
                let expected = reference_check(
                    &mut reference,
                    &windows,
                    now,
                    cost,
                    OverLimit::Refuse,
                    false,
                );
                assert_eq!(
                    check(&mut log, &windows, now, cost, OverLimit::Refuse),
                    expected
                );
            } else {
                let floor = widest(&windows).floor(now);
                reference.retain(|&s| s as i64 > floor);
                let keep = reference.len().saturating_sub(cost as usize);
                reference.truncate(keep);
                let expected = reference_check(
                    &mut reference.clone(),
                    &windows,
                    now,
                    cost,
                    OverLimit::Refuse,
                    true,
                );
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
    let v = check(&mut log, &windows, 10, 3, OverLimit::Penalize);
    assert!(!v.allowed);
    assert_eq!(log, VecLog::of(&[6, 7, 8, 9, 10, 10, 10]));
}
