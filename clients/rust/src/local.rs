//! A sliding-window log in process memory, for deciding while Redis cannot
//! answer (the layer's `local` policy). It gives SWL.CHECK's and
//! SWL.REFUND's replies for the same calls: the clients' shared test
//! vectors (clients/vectors/local-limiter.json, the module's own replies)
//! hold it to that, as they hold the Python and Node ones. Calls are
//! expected in time order, as a clock gives them.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fmt;

use crate::Verdict;

/// The most windows one call takes (the first and its WINDOW clauses), as
/// the module and the function library take them.
pub const MAX_WINDOWS: usize = 100;

/// A call with more than [`MAX_WINDOWS`] windows (how many it had), refused
/// as the module refuses it.
///
/// ```
/// use redis_swl_client::{LocalLimiter, TooManyWindows};
/// let windows = vec![(1_000, 5); 101];
/// let refused = LocalLimiter::new(100).check("k", &windows, 7_000, 1).unwrap_err();
/// assert_eq!(refused, TooManyWindows(101));
/// assert_eq!(refused.to_string(), "windows: at most 100 per call, not 101");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooManyWindows(pub usize);

impl fmt::Display for TooManyWindows {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "windows: at most {MAX_WINDOWS} per call, not {}", self.0)
    }
}

impl std::error::Error for TooManyWindows {}

/// Logs for at most `max_clients` keys; the least recently used key is
/// forgotten first (a forgotten client starts afresh).
///
/// ```
/// use redis_swl_client::LocalLimiter;
/// let mut local = LocalLimiter::new(10_000);
/// let windows = [(60_000, 2)];
/// assert!(local.check("alice", &windows, 1_000, 1)?.allowed);
/// assert!(local.check("alice", &windows, 1_001, 1)?.allowed);
/// let denied = local.check("alice", &windows, 1_002, 1)?;
/// assert_eq!((denied.allowed, denied.retry_after_ms), (false, 59_998));
/// assert!(local.refund("alice", &windows, 1_003, 1)?.allowed);
/// # Ok::<(), redis_swl_client::TooManyWindows>(())
/// ```
#[derive(Debug)]
pub struct LocalLimiter {
    max_clients: usize,
    tick: u64,
    /// Each key's log (ascending) and when it was last used. A deque, so
    /// that trimming the head costs what it trims, not the whole log.
    logs: HashMap<String, (u64, VecDeque<u64>)>,
    by_use: BTreeMap<u64, String>,
}

/// The first index of an ascending log whose entry is after `time`.
fn first_after(log: &VecDeque<u64>, time: i128) -> usize {
    log.partition_point(|&t| i128::from(t) <= time)
}

/// Milliseconds until an entry at `time` leaves a window: 0 if out.
fn until_left(time: u64, window_ms: u64, now_ms: u64) -> i64 {
    let left = i128::from(time) + i128::from(window_ms) - i128::from(now_ms);
    i64::try_from(left.max(0)).unwrap_or(i64::MAX)
}

/// -1 (waiting cannot help) outranks any wait; otherwise the longer wins.
fn waits_longer(retry: i64, than: i64) -> bool {
    than != -1 && (retry == -1 || retry > than)
}

impl LocalLimiter {
    /// An empty limiter remembering at most `max_clients` keys.
    pub fn new(max_clients: usize) -> LocalLimiter {
        LocalLimiter {
            max_clients,
            tick: 0,
            logs: HashMap::new(),
            by_use: BTreeMap::new(),
        }
    }

    /// SWL.CHECK: trim, count, record if every window has room. `windows`
    /// are (window_ms, limit) pairs, at least one and at most
    /// [`MAX_WINDOWS`]; more are refused, changing nothing.
    ///
    /// ```
    /// use redis_swl_client::LocalLimiter;
    /// let verdict = LocalLimiter::new(100).check("k", &[(1_000, 5), (60_000, 50)], 7_000, 2)?;
    /// assert_eq!((verdict.allowed, verdict.remaining, verdict.window_ms), (true, 3, 1_000));
    /// # Ok::<(), redis_swl_client::TooManyWindows>(())
    /// ```
    pub fn check(
        &mut self,
        key: &str,
        windows: &[(u64, u64)],
        now_ms: u64,
        cost: u64,
    ) -> Result<Verdict, TooManyWindows> {
        let mut log = self.trimmed(key, windows, now_ms)?;
        let mut counts = counts(&log, windows, now_ms);
        let allowed = admits(windows, &counts, cost);
        if allowed {
            let at = first_after(&log, i128::from(now_ms));
            if at == log.len() {
                log.extend(std::iter::repeat_n(now_ms, cost as usize));
            } else {
                // Out of time order: rare.
                let later = log.split_off(at);
                log.extend(std::iter::repeat_n(now_ms, cost as usize));
                log.extend(later);
            }
            counts.iter_mut().for_each(|count| *count += cost);
        }
        let verdict = verdict(&log, windows, &counts, now_ms, cost, allowed, false);
        self.keep(key, log);
        Ok(verdict)
    }

    /// SWL.REFUND: trim, give back up to `cost` newest entries, and reply
    /// what a peek replies then. Windows as for [`check`](Self::check).
    ///
    /// ```
    /// use redis_swl_client::LocalLimiter;
    /// let mut local = LocalLimiter::new(100);
    /// local.check("k", &[(1_000, 1)], 5_000, 1)?;
    /// assert!(local.refund("k", &[(1_000, 1)], 5_001, 1)?.allowed);
    /// # Ok::<(), redis_swl_client::TooManyWindows>(())
    /// ```
    pub fn refund(
        &mut self,
        key: &str,
        windows: &[(u64, u64)],
        now_ms: u64,
        cost: u64,
    ) -> Result<Verdict, TooManyWindows> {
        let mut log = self.trimmed(key, windows, now_ms)?;
        let keep = log
            .len()
            .saturating_sub(usize::try_from(cost).unwrap_or(usize::MAX));
        log.truncate(keep);
        let mut counts = counts(&log, windows, now_ms);
        let allowed = admits(windows, &counts, cost);
        if allowed {
            counts.iter_mut().for_each(|count| *count += cost);
        }
        let verdict = verdict(&log, windows, &counts, now_ms, cost, allowed, allowed);
        self.keep(key, log);
        Ok(verdict)
    }

    /// Forgets `key`'s log: its next call starts afresh.
    ///
    /// ```
    /// use redis_swl_client::LocalLimiter;
    /// let mut local = LocalLimiter::new(100);
    /// local.check("k", &[(1_000, 1)], 5_000, 1)?;
    /// local.forget("k");
    /// assert!(local.check("k", &[(1_000, 1)], 5_001, 1)?.allowed);
    /// # Ok::<(), redis_swl_client::TooManyWindows>(())
    /// ```
    pub fn forget(&mut self, key: &str) {
        if let Some((used, _)) = self.logs.remove(key) {
            self.by_use.remove(&used);
        }
    }

    fn trimmed(
        &mut self,
        key: &str,
        windows: &[(u64, u64)],
        now_ms: u64,
    ) -> Result<VecDeque<u64>, TooManyWindows> {
        // As the module refuses the call, before anything changes.
        if windows.len() > MAX_WINDOWS {
            return Err(TooManyWindows(windows.len()));
        }
        let widest = windows.iter().map(|&(ms, _)| ms).max().unwrap_or(0);
        let Some((used, mut log)) = self.logs.remove(key) else {
            return Ok(VecDeque::new());
        };
        self.by_use.remove(&used);
        let out = first_after(&log, i128::from(now_ms) - i128::from(widest));
        log.drain(..out);
        Ok(log)
    }

    fn keep(&mut self, key: &str, log: VecDeque<u64>) {
        if log.is_empty() || self.max_clients == 0 {
            return;
        }
        self.tick += 1;
        self.logs.insert(key.to_string(), (self.tick, log));
        self.by_use.insert(self.tick, key.to_string());
        while self.logs.len() > self.max_clients {
            let Some((_, oldest)) = self.by_use.pop_first() else {
                break;
            };
            self.logs.remove(&oldest);
        }
    }
}

fn counts(log: &VecDeque<u64>, windows: &[(u64, u64)], now_ms: u64) -> Vec<u64> {
    windows
        .iter()
        .map(|&(ms, _)| (log.len() - first_after(log, i128::from(now_ms) - i128::from(ms))) as u64)
        .collect()
}

fn admits(windows: &[(u64, u64)], counts: &[u64], cost: u64) -> bool {
    windows
        .iter()
        .zip(counts)
        .all(|(&(_, limit), &count)| count.saturating_add(cost) <= limit)
}

/// As the module's: the window with the least left when admitted, the one
/// that waits longest (-1, never, the longest) when denied.
fn verdict(
    log: &VecDeque<u64>,
    windows: &[(u64, u64)],
    counts: &[u64],
    now_ms: u64,
    cost: u64,
    allowed: bool,
    pending: bool,
) -> Verdict {
    let widest = windows.iter().map(|&(ms, _)| ms).max().unwrap_or(0);
    // (limit, remaining, retry, window_ms)
    let mut binding: Option<(u64, u64, i64, u64)> = None;
    for (&(window_ms, limit), &count) in windows.iter().zip(counts) {
        let remaining = limit.saturating_sub(count);
        if allowed {
            if binding.is_none_or(|b| remaining < b.1) {
                binding = Some((limit, remaining, -1, window_ms));
            }
            continue;
        }
        if count.saturating_add(cost) <= limit {
            continue;
        }
        let retry = if cost > limit {
            -1
        } else {
            // The entry whose leaving makes room: rank len - (limit - cost + 1).
            let rank = (log.len() as i128) - i128::from(limit - cost + 1);
            usize::try_from(rank)
                .ok()
                .and_then(|rank| log.get(rank))
                .map_or(1, |&time| until_left(time, window_ms, now_ms).max(1))
        };
        if binding.is_none_or(|b| waits_longer(retry, b.2)) {
            binding = Some((limit, remaining, retry, window_ms));
        }
    }
    let (limit, remaining, retry_after_ms, window_ms) = binding.unwrap_or_else(|| {
        let (window_ms, limit) = windows.first().copied().unwrap_or((0, 0));
        let count = counts.first().copied().unwrap_or(0);
        let retry = if allowed { -1 } else { 1 };
        (limit, limit.saturating_sub(count), retry, window_ms)
    });
    let mut newest = log
        .back()
        .copied()
        .filter(|&t| i128::from(t) > i128::from(now_ms) - i128::from(widest));
    if pending {
        newest = Some(newest.map_or(now_ms, |t| t.max(now_ms)));
    }
    Verdict {
        allowed,
        limit,
        remaining,
        retry_after_ms,
        reset_after_ms: newest.map_or(0, |t| until_left(t, widest, now_ms)),
        window_ms,
        oldest_after_ms: None,
    }
}
