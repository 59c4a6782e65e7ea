//! The denial cache: after Redis denies a check, the same key, windows and
//! a cost at least as large are denied in the process until the reply's
//! `retry_after_ms` has passed, without asking Redis again. A denial
//! records nothing, so until then the log can only admit such a call if
//! entries leave it some other way (a refund, a reset, a check with
//! narrower windows, a failover to a lagging replica, a step of the
//! server's clock); a refund or reset through the same client drops the
//! key's entries, the others keep the cache stricter than Redis for at most
//! the cached wait. The cache never admits.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::{Options, Verdict};

/// Denials cached for different windows of one key, at most: one limiter
/// uses one set of windows per key, so more is a sign of several.
const PER_KEY: usize = 4;

/// Recent denials by key, shared by every clone, for at most `max_keys`
/// keys (the least recently used key is forgotten first). Safe to use from
/// any thread and task.
///
/// The layer ([`RateLimiter`](crate::RateLimiter)) has one by default
/// ([`DenialCache::DEFAULT_KEYS`] keys); a [`Swl`](crate::Swl) client has
/// none unless given one with
/// [`with_denial_cache`](crate::Swl::with_denial_cache).
///
/// A check with [`Options::penalize`], [`Options::force`] or
/// [`Options::now_ms`] neither uses nor fills it, and a denial that waiting cannot help
/// (`retry_after_ms` -1: a cost above a limit) is not cached.
///
/// ```
/// use redis_swl_client::DenialCache;
/// let cache = DenialCache::new(DenialCache::DEFAULT_KEYS);
/// let shared = cache.clone(); // the same entries
/// assert_eq!(shared.len(), 0);
/// ```
#[derive(Clone)]
pub struct DenialCache {
    denials: Arc<Mutex<Denials>>,
}

impl fmt::Debug for DenialCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let denials = self.lock();
        f.debug_struct("DenialCache")
            .field("max_keys", &denials.max_keys)
            .field("keys", &denials.keys.len())
            .finish()
    }
}

impl DenialCache {
    /// The number of keys the layer's cache remembers by default.
    pub const DEFAULT_KEYS: usize = 10_000;

    /// An empty cache for at most `max_keys` keys (0 caches nothing).
    pub fn new(max_keys: usize) -> DenialCache {
        DenialCache {
            denials: Arc::new(Mutex::new(Denials {
                max_keys,
                tick: 0,
                keys: HashMap::new(),
                by_use: BTreeMap::new(),
                forgets: 0,
                forgotten_before: 0,
            })),
        }
    }

    /// Keys remembered (with denials, or forgotten lately).
    pub fn len(&self) -> usize {
        self.lock().keys.len()
    }

    /// Whether no key is remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Drops `key`'s denials: its log lost entries another way than the
    /// cache can see (the client's own refunds and resets do this
    /// themselves). A check that was sent before and is answered after
    /// does not put its denial back.
    ///
    /// ```
    /// let cache = redis_swl_client::DenialCache::new(100);
    /// cache.forget("rl:alice");
    /// ```
    pub fn forget(&self, key: &str) {
        self.lock().forget(key);
    }

    /// The cached answer to a check of `options` on `key`, if a denial of
    /// the same windows and at most its cost is still waiting at `now`.
    pub(crate) fn answer(
        &self,
        key: &str,
        first: (u64, u64),
        options: &Options,
        now: Instant,
    ) -> Option<Verdict> {
        if !options.cacheable() {
            return None;
        }
        self.lock()
            .answer(key, first, &options.windows, options.cost, now)
    }

    /// Taken before a check is sent, given back with its verdict to
    /// [`keep`](Self::keep): a forget in between wins.
    pub(crate) fn ticket(&self) -> u64 {
        self.lock().forgets
    }

    /// Keeps `verdict` of a check of `options` on `key` if it is a denial
    /// that waiting ends, its wait counted from `now`, when the check was
    /// sent; an admission drops the key's denials.
    pub(crate) fn keep(
        &self,
        key: &str,
        first: (u64, u64),
        options: &Options,
        verdict: &Verdict,
        ticket: u64,
        now: Instant,
    ) {
        if !options.cacheable() {
            return;
        }
        if verdict.allowed {
            // Entries were added: the key's denials still deny, but their
            // remaining and reset are of the log before.
            let mut denials = self.lock();
            if denials.keys.contains_key(key) {
                denials.forget(key);
            }
            return;
        }
        if verdict.retry_after_ms < 1 {
            return;
        }
        let windows: Vec<(u64, u64)> = std::iter::once(first)
            .chain(options.windows.iter().copied())
            .collect();
        let denial = Denial {
            windows,
            cost: options.cost,
            verdict: *verdict,
            until: now + Duration::from_millis(verdict.retry_after_ms as u64),
        };
        self.lock().keep(key, denial, ticket, now);
    }

    fn lock(&self) -> MutexGuard<'_, Denials> {
        self.denials
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

struct Denial {
    /// The first window, then the others, as the call gave them.
    windows: Vec<(u64, u64)>,
    cost: u64,
    verdict: Verdict,
    /// When the denied call could first be admitted.
    until: Instant,
}

impl Denial {
    fn same_windows(&self, first: (u64, u64), rest: &[(u64, u64)]) -> bool {
        self.windows.first() == Some(&first) && self.windows[1..] == *rest
    }

    /// The denial as it stands at `now` (before `until`): the waits less
    /// the time since, the rest as Redis gave it.
    fn at(&self, now: Instant) -> Verdict {
        let left = self.until.saturating_duration_since(now);
        let left_ms = i64::try_from(left.as_nanos().div_ceil(1_000_000)).unwrap_or(i64::MAX);
        let elapsed = self.verdict.retry_after_ms.saturating_sub(left_ms).max(0);
        Verdict {
            retry_after_ms: left_ms,
            reset_after_ms: self.verdict.reset_after_ms.saturating_sub(elapsed).max(0),
            ..self.verdict
        }
    }
}

struct Entry {
    used: u64,
    /// The forget count when the key was last forgotten (0: never).
    forgotten: u64,
    denials: Vec<Denial>,
}

struct Denials {
    max_keys: usize,
    tick: u64,
    keys: HashMap<String, Entry>,
    by_use: BTreeMap<u64, String>,
    /// Forgets so far: tickets are taken from it.
    forgets: u64,
    /// The latest forget of a key no longer remembered: a ticket older
    /// than that may be from before its forget, so it keeps nothing.
    forgotten_before: u64,
}

impl Denials {
    fn answer(
        &mut self,
        key: &str,
        first: (u64, u64),
        rest: &[(u64, u64)],
        cost: u64,
        now: Instant,
    ) -> Option<Verdict> {
        let entry = self.keys.get_mut(key)?;
        entry.denials.retain(|denial| now < denial.until);
        let verdict = entry
            .denials
            .iter()
            .find(|d| d.same_windows(first, rest) && cost >= d.cost)
            .map(|d| d.at(now));
        if entry.denials.is_empty() && entry.forgotten == 0 {
            self.remove(key);
        } else if verdict.is_some() {
            self.touch(key);
        }
        verdict
    }

    fn keep(&mut self, key: &str, denial: Denial, ticket: u64, now: Instant) {
        if self.max_keys == 0 {
            return;
        }
        let forgotten = self
            .keys
            .get(key)
            .map_or(self.forgotten_before, |e| e.forgotten);
        if forgotten > ticket {
            return;
        }
        match self.keys.get_mut(key) {
            Some(entry) => {
                // The newest denial of these windows replaces the one before.
                entry
                    .denials
                    .retain(|d| d.windows != denial.windows && now < d.until);
                if entry.denials.len() == PER_KEY {
                    entry.denials.remove(0);
                }
                entry.denials.push(denial);
                self.touch(key);
            }
            None => self.insert(key, Vec::from([denial]), 0),
        }
    }

    fn forget(&mut self, key: &str) {
        self.forgets += 1;
        let forgets = self.forgets;
        if self.max_keys == 0 {
            self.forgotten_before = forgets;
            return;
        }
        // Kept, empty, so that checks already sent keep nothing.
        match self.keys.get_mut(key) {
            Some(entry) => {
                entry.denials.clear();
                entry.forgotten = forgets;
                self.touch(key);
            }
            None => self.insert(key, Vec::new(), forgets),
        }
    }

    fn insert(&mut self, key: &str, denials: Vec<Denial>, forgotten: u64) {
        self.tick += 1;
        self.by_use.insert(self.tick, key.to_string());
        self.keys.insert(
            key.to_string(),
            Entry {
                used: self.tick,
                forgotten,
                denials,
            },
        );
        while self.keys.len() > self.max_keys {
            let Some((_, oldest)) = self.by_use.pop_first() else {
                break;
            };
            if let Some(entry) = self.keys.remove(&oldest) {
                self.forgotten_before = self.forgotten_before.max(entry.forgotten);
            }
        }
    }

    fn touch(&mut self, key: &str) {
        let Some(entry) = self.keys.get_mut(key) else {
            return;
        };
        self.tick += 1;
        if let Some(name) = self.by_use.remove(&entry.used) {
            self.by_use.insert(self.tick, name);
        }
        entry.used = self.tick;
    }

    /// Removes a key that was never forgotten.
    fn remove(&mut self, key: &str) {
        if let Some(entry) = self.keys.remove(key) {
            self.by_use.remove(&entry.used);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn denial(retry: i64, reset: i64) -> Verdict {
        Verdict::from_reply(&[0, 5, 0, retry, reset, 1_000]).unwrap()
    }

    fn ms(base: Instant, ms: u64) -> Instant {
        base + Duration::from_millis(ms)
    }

    #[test]
    fn a_denial_is_answered_with_the_wait_left_until_it_ends() {
        let cache = DenialCache::new(10);
        let (base, options) = (Instant::now(), Options::new());
        let ticket = cache.ticket();
        cache.keep("k", (1_000, 5), &options, &denial(300, 900), ticket, base);
        let later = cache.answer("k", (1_000, 5), &options, ms(base, 100));
        assert_eq!(later, Some(denial(200, 800)));
        let almost = base + Duration::from_micros(299_500);
        assert_eq!(
            cache.answer("k", (1_000, 5), &options, almost),
            Some(denial(1, 601))
        );
        assert_eq!(cache.answer("k", (1_000, 5), &options, ms(base, 300)), None);
    }

    #[test]
    fn only_the_same_windows_and_a_cost_at_least_the_denied_one_are_answered() {
        let cache = DenialCache::new(10);
        let base = Instant::now();
        let two = Options::new().cost(2).window(60_000, 50);
        cache.keep("k", (1_000, 5), &two, &denial(300, 900), 0, base);
        let at = ms(base, 1);
        assert!(cache.answer("k", (1_000, 5), &two, at).is_some());
        assert!(cache
            .answer("k", (1_000, 5), &two.clone().cost(3), at)
            .is_some());
        assert!(cache
            .answer("k", (1_000, 5), &two.clone().cost(1), at)
            .is_none());
        assert!(cache
            .answer("k", (1_000, 5), &Options::new().cost(2), at)
            .is_none());
        assert!(cache.answer("k", (1_000, 6), &two, at).is_none());
        assert!(cache.answer("other", (1_000, 5), &two, at).is_none());
    }

    #[test]
    fn penalize_force_and_a_callers_time_neither_use_nor_fill_the_cache() {
        let cache = DenialCache::new(10);
        let base = Instant::now();
        let uncached = [
            Options::new().penalize(),
            Options::new().force(),
            Options::new().now_ms(5_000),
        ];
        for options in uncached.clone() {
            cache.keep("k", (1_000, 5), &options, &denial(300, 900), 0, base);
            assert!(cache.is_empty());
        }
        cache.keep("k", (1_000, 5), &Options::new(), &denial(300, 900), 0, base);
        for options in uncached {
            assert_eq!(cache.answer("k", (1_000, 5), &options, base), None);
        }
    }

    #[test]
    fn admissions_and_denials_that_waiting_cannot_end_are_not_cached() {
        let cache = DenialCache::new(10);
        let base = Instant::now();
        let admitted = Verdict::from_reply(&[1, 5, 4, -1, 1_000, 1_000]).unwrap();
        let never = Verdict::from_reply(&[0, 1, 1, -1, 0, 1_000]).unwrap();
        for verdict in [admitted, never] {
            cache.keep("k", (1_000, 5), &Options::new(), &verdict, 0, base);
        }
        assert!(cache.is_empty());
    }

    #[test]
    fn a_forget_drops_the_key_and_wins_over_checks_sent_before_it() {
        let cache = DenialCache::new(10);
        let (base, options) = (Instant::now(), Options::new());
        cache.keep(
            "k",
            (1_000, 5),
            &options,
            &denial(300, 900),
            cache.ticket(),
            base,
        );
        let sent_before = cache.ticket();
        cache.forget("k");
        assert_eq!(cache.answer("k", (1_000, 5), &options, base), None);
        cache.keep(
            "k",
            (1_000, 5),
            &options,
            &denial(300, 900),
            sent_before,
            base,
        );
        assert_eq!(cache.answer("k", (1_000, 5), &options, base), None);
        cache.keep(
            "k",
            (1_000, 5),
            &options,
            &denial(300, 900),
            cache.ticket(),
            base,
        );
        assert!(cache.answer("k", (1_000, 5), &options, base).is_some());
    }

    #[test]
    fn the_least_recently_used_key_is_dropped_first_and_forgets_stay_safe() {
        let cache = DenialCache::new(2);
        let (base, options) = (Instant::now(), Options::new());
        let keep = |key: &str, ticket: u64| {
            cache.keep(key, (1_000, 5), &options, &denial(300, 900), ticket, base);
        };
        keep("a", 0);
        keep("b", 0);
        assert!(cache.answer("a", (1_000, 5), &options, base).is_some()); // a is the newest
        keep("c", 0);
        assert_eq!(cache.len(), 2);
        assert!(cache.answer("b", (1_000, 5), &options, base).is_none());
        assert!(cache.answer("a", (1_000, 5), &options, base).is_some());
        // A forgotten key pushed out still refuses a check sent before.
        let sent_before = cache.ticket();
        cache.forget("a");
        keep("d", cache.ticket());
        keep("e", cache.ticket());
        keep("a", sent_before);
        assert!(cache.answer("a", (1_000, 5), &options, base).is_none());
        assert_eq!(DenialCache::new(0).len(), 0);
    }

    /// The shared vectors (the module's replies, in time order) through the
    /// cache: a check it answers is one the module denied, with the
    /// module's reply at that time where the cost is the cached one (but
    /// for fewer remaining where it is above 1), and never a longer wait
    /// where it is larger.
    #[test]
    fn every_answer_from_the_cache_is_the_modules_denial() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../vectors/local-limiter.json");
        let vectors: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let cache = DenialCache::new(10_000);
        let base = Instant::now();
        let number = |value: &serde_json::Value| value.as_u64().unwrap();
        let (mut answered, mut asked) = (0, 0);
        for (n, case) in vectors["cases"].as_array().unwrap().iter().enumerate() {
            let windows: Vec<(u64, u64)> = case["windows"]
                .as_array()
                .unwrap()
                .iter()
                .map(|w| (number(&w[0]), number(&w[1])))
                .collect();
            let key = format!("case{n}");
            let mut cached_cost = None;
            for call in case["calls"].as_array().unwrap() {
                let (now, cost) = (ms(base, number(&call["now_ms"])), number(&call["cost"]));
                let reply: Vec<i64> = call["reply"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_i64().unwrap())
                    .collect();
                let module = Verdict::from_reply(&reply).unwrap();
                if call["op"] == "refund" {
                    cache.forget(&key);
                    cached_cost = None;
                    continue;
                }
                let options = Options::new().cost(cost).windows(windows[1..].to_vec());
                let ticket = cache.ticket();
                match cache.answer(&key, windows[0], &options, now) {
                    Some(cached) if Some(cost) == cached_cost => {
                        // Of a cost above 1, entries may leave before the
                        // wait ends: more remain than the cache says.
                        let remaining = cached.remaining.max(module.remaining);
                        assert_eq!(
                            Verdict {
                                remaining,
                                ..cached
                            },
                            module,
                            "case {n}: {call}"
                        );
                        assert!(cost > 1 || cached.remaining == module.remaining);
                        answered += 1;
                    }
                    Some(cached) => {
                        assert!(!module.allowed, "case {n}: {call}");
                        assert!(!cached.allowed);
                        assert_eq!(cached.reset_after_ms, module.reset_after_ms, "{call}");
                        // -1: waiting cannot help, longer than any wait.
                        let never = module.retry_after_ms == -1;
                        assert!(never || cached.retry_after_ms <= module.retry_after_ms);
                        answered += 1;
                    }
                    None => {
                        asked += 1;
                        cache.keep(&key, windows[0], &options, &module, ticket, now);
                        if module.allowed {
                            cached_cost = None;
                        } else if module.retry_after_ms > 0 {
                            cached_cost = Some(cost);
                        }
                    }
                }
            }
        }
        assert!(answered > 20, "{answered} answered from the cache");
        assert!(asked > answered, "{asked} asked");
    }
}
