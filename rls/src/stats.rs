//! The reference's statistics, under its names and with its meanings:
//! per limit key `ratelimit.service.rate_limit.<key>.{total_hits,
//! over_limit, near_limit, within_limit, shadow_mode}`, and the service's
//! own counters. Sent to statsd as counter deltas, and served to Prometheus
//! under the names the reference's default mapper gives them.

use std::collections::BTreeMap;
use std::sync::Mutex;

/// What one descriptor's decision adds to its key's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Hits {
    pub total: u64,
    pub over: u64,
    pub near: u64,
    pub within: u64,
    pub shadow: u64,
}

/// The reference's arithmetic: of `hits` that took a window from `before`
/// units (None: already at or past its limit) to `before + hits`, how many
/// were over the limit, near it (past `ratio` of it) or within it.
pub fn count(
    limit: u64,
    ratio: f32,
    before: Option<u64>,
    hits: u64,
    over: bool,
    shadow: bool,
) -> Hits {
    let near_threshold = (limit as f32 * ratio).floor() as u64;
    let mut counted = Hits {
        total: hits,
        ..Hits::default()
    };
    if over {
        match before {
            Some(before) if before < limit => {
                let after = before + hits;
                counted.over = after.saturating_sub(limit);
                counted.near = limit - near_threshold.max(before);
            }
            _ => counted.over = hits,
        }
        if shadow {
            counted.shadow = counted.over;
        }
    } else {
        counted.within = hits;
        let before = before.unwrap_or(0);
        let after = before + hits;
        if after > near_threshold {
            counted.near = if before >= near_threshold {
                hits
            } else {
                after - near_threshold
            };
        }
    }
    counted
}

/// Counters by full statsd name, with what statsd has not been sent yet.
#[derive(Default)]
pub struct Stats {
    counters: Mutex<BTreeMap<String, (u64, u64)>>,
}

/// The reference's stat name cleaning: `:` and `|` become `_`, and so do
/// the dots of an IPv4 address.
pub fn sanitize(name: &str) -> String {
    let replaced: String = name
        .chars()
        .map(|c| if c == ':' || c == '|' { '_' } else { c })
        .collect();
    let bytes = replaced.as_bytes();
    let mut out = replaced.clone().into_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if let Some(end) = ipv4_at(bytes, i) {
            for byte in &mut out[i..end] {
                if *byte == b'.' {
                    *byte = b'_';
                }
            }
            i = end;
        } else {
            i += 1;
        }
    }
    String::from_utf8(out).unwrap_or(replaced)
}

/// The end of `\d{1,3}(\.\d{1,3}){3}` starting at `start`, matched as Go's
/// leftmost-first regexp matches it.
fn ipv4_at(bytes: &[u8], start: usize) -> Option<usize> {
    let mut at = start;
    for group in 0..4 {
        if group > 0 {
            if bytes.get(at) != Some(&b'.') {
                return None;
            }
            at += 1;
        }
        let digits = bytes[at.min(bytes.len())..]
            .iter()
            .take(3)
            .take_while(|b| b.is_ascii_digit())
            .count();
        if digits == 0 {
            return None;
        }
        at += digits;
    }
    Some(at)
}

impl Stats {
    pub fn add(&self, name: &str, by: u64) {
        if by == 0 {
            return;
        }
        let mut counters = self.counters.lock().unwrap_or_else(|e| e.into_inner());
        let entry = counters.entry(name.to_string()).or_default();
        entry.0 = entry.0.saturating_add(by);
        entry.1 = entry.1.saturating_add(by);
    }

    /// Makes the counter exist at 0, as the reference's do once a key is
    /// seen.
    pub fn touch(&self, name: &str) {
        let mut counters = self.counters.lock().unwrap_or_else(|e| e.into_inner());
        counters.entry(name.to_string()).or_default();
    }

    /// Adds a descriptor's hits under `key` (the limit's statistics key).
    pub fn add_hits(&self, key: &str, hits: Hits) {
        let base = format!("ratelimit.service.rate_limit.{}", sanitize(key));
        for (name, by) in [
            ("total_hits", hits.total),
            ("over_limit", hits.over),
            ("near_limit", hits.near),
            ("within_limit", hits.within),
            ("shadow_mode", hits.shadow),
        ] {
            let full = format!("{base}.{name}");
            self.touch(&full);
            self.add(&full, by);
        }
    }

    /// The deltas not sent yet, as statsd lines; they count as sent.
    pub fn take_statsd(&self) -> Vec<String> {
        let mut counters = self.counters.lock().unwrap_or_else(|e| e.into_inner());
        counters
            .iter_mut()
            .filter(|(_, c)| c.1 > 0)
            .map(|(name, c)| {
                let line = format!("{name}:{}|c", c.1);
                c.1 = 0;
                line
            })
            .collect()
    }

    /// Every counter in Prometheus's text format, named as the reference's
    /// default statsd mapper names them.
    pub fn prometheus(&self) -> String {
        let counters = self.counters.lock().unwrap_or_else(|e| e.into_inner());
        let mut families: BTreeMap<String, Vec<(String, u64)>> = BTreeMap::new();
        for (name, (total, _)) in counters.iter() {
            let (family, labels) = prometheus_name(name);
            families.entry(family).or_default().push((labels, *total));
        }
        let mut text = String::new();
        for (family, samples) in families {
            text.push_str(&format!("# TYPE {family} counter\n"));
            for (labels, value) in samples {
                text.push_str(&format!("{family}{labels} {value}\n"));
            }
        }
        text
    }
}

fn label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The default mapper's name and labels for a statsd name; names it does
/// not map get the exporter's own rule (anything not a letter, digit or `_`
/// becomes `_`).
fn prometheus_name(name: &str) -> (String, String) {
    if let Some(rest) = name.strip_prefix("ratelimit.service.rate_limit.") {
        let parts: Vec<&str> = rest.split('.').collect();
        if let Some((metric, keys)) = parts.split_last() {
            if [
                "near_limit",
                "over_limit",
                "total_hits",
                "within_limit",
                "shadow_mode",
            ]
            .contains(metric)
                && keys.len() >= 2
            {
                let mut labels =
                    format!("domain=\"{}\",key1=\"{}\"", label(keys[0]), label(keys[1]));
                if keys.len() >= 3 {
                    labels.push_str(&format!(",key2=\"{}\"", label(keys[2])));
                }
                return (
                    format!("ratelimit_service_rate_limit_{metric}"),
                    format!("{{{labels}}}"),
                );
            }
        }
    }
    if let Some(kind) = name.strip_prefix("ratelimit.service.call.should_rate_limit.") {
        return (
            "ratelimit_service_should_rate_limit_error".to_string(),
            format!("{{err_type=\"{}\"}}", label(kind)),
        );
    }
    let family = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    (family, String::new())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_references_near_and_over_arithmetic() {
        // A limit of 10, near past 8.
        assert_eq!(
            count(10, 0.8, Some(3), 1, false, false),
            Hits {
                total: 1,
                within: 1,
                ..Hits::default()
            }
        );
        assert_eq!(
            count(10, 0.8, Some(8), 1, false, false),
            Hits {
                total: 1,
                within: 1,
                near: 1,
                ..Hits::default()
            }
        );
        assert_eq!(
            count(10, 0.8, Some(6), 4, false, false),
            Hits {
                total: 4,
                within: 4,
                near: 2,
                ..Hits::default()
            }
        );
        assert_eq!(
            count(10, 0.8, Some(7), 5, true, false),
            Hits {
                total: 5,
                over: 2,
                near: 2,
                ..Hits::default()
            }
        );
        assert_eq!(
            count(10, 0.8, None, 3, true, true),
            Hits {
                total: 3,
                over: 3,
                shadow: 3,
                ..Hits::default()
            }
        );
    }

    #[test]
    fn names_are_cleaned_as_the_reference_cleans_them() {
        assert_eq!(
            sanitize("d.remote_address_50.0.0.5"),
            "d.remote_address_50_0_0_5"
        );
        assert_eq!(sanitize("d.k_a:b|c"), "d.k_a_b_c");
        assert_eq!(sanitize("d.version_1.2"), "d.version_1.2");
    }

    #[test]
    fn statsd_deltas_and_prometheus_totals() {
        let stats = Stats::default();
        stats.add_hits(
            "d.k_v.sub",
            Hits {
                total: 2,
                within: 2,
                ..Hits::default()
            },
        );
        stats.add("ratelimit.service.call.should_rate_limit.redis_error", 1);
        let sent = stats.take_statsd();
        assert_eq!(
            sent,
            [
                "ratelimit.service.call.should_rate_limit.redis_error:1|c",
                "ratelimit.service.rate_limit.d.k_v.sub.total_hits:2|c",
                "ratelimit.service.rate_limit.d.k_v.sub.within_limit:2|c",
            ]
        );
        assert!(stats.take_statsd().is_empty());
        let text = stats.prometheus();
        assert!(text.contains("ratelimit_service_rate_limit_total_hits{domain=\"d\",key1=\"k_v\",key2=\"sub\"} 2\n"), "{text}");
        assert!(
            text.contains(
                "ratelimit_service_should_rate_limit_error{err_type=\"redis_error\"} 1\n"
            ),
            "{text}"
        );
    }
}
