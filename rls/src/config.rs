//! The rate limit configuration: envoyproxy/ratelimit's YAML format (domains
//! of nested descriptors, each a key and an optional value, with an optional
//! rate limit), checked as the reference checks it and looked up by a
//! request's descriptor as the reference looks it up. Plain Rust: no Redis,
//! no gRPC.
//!
//! Two extensions, which the reference refuses: a `unit` may be a length
//! (`90s`, `1500ms`, `15m`, `2h`, `7d`), and `rate_limit.windows` lists more
//! windows (`requests_per_unit` and `unit` each) that a request must fit
//! too, all in one atomic check.

use std::collections::HashMap;

use envoy_types::pb::google::protobuf::{value::Kind, ListValue, Struct, Value};
use serde_yaml::Value as Yaml;

/// The reference's units, as the protocol numbers them, with their lengths
/// (a month is 30 days and a year 365, as the reference counts them).
pub const UNITS: [(&str, i32, u64); 7] = [
    ("SECOND", 1, 1_000),
    ("MINUTE", 2, 60_000),
    ("HOUR", 3, 3_600_000),
    ("DAY", 4, 86_400_000),
    ("MONTH", 5, 2_592_000_000),
    ("YEAR", 6, 31_536_000_000),
    ("WEEK", 7, 604_800_000),
];

/// The protocol's UNKNOWN unit: what a window of another length reports.
pub const UNKNOWN_UNIT: i32 = 0;

/// A unit's protocol name (`MINUTE`), or `UNKNOWN`.
pub fn unit_name(unit: i32) -> &'static str {
    UNITS
        .iter()
        .find(|&&(_, number, _)| number == unit)
        .map_or("UNKNOWN", |&(name, _, _)| name)
}

/// The most windows one SWL.CHECK takes.
const MAX_WINDOWS: usize = 100;

/// The longest window a configuration may give: about 285 years, far inside
/// what SWL.CHECK takes (2^53 - 1 ms).
const LONGEST_WINDOW_MS: u64 = 9_000_000_000_000;

/// One window of a limit: at most `limit` hits in any `window_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub window_ms: u64,
    pub limit: u64,
    /// The protocol's unit for this length, or UNKNOWN_UNIT.
    pub unit: i32,
}

/// A descriptor's rate limit, as a request's lookup finds it.
#[derive(Debug, Clone, PartialEq)]
pub struct RateLimit {
    /// The first is the one configured as `requests_per_unit` and `unit`;
    /// the rest come from `windows`.
    pub windows: Vec<Window>,
    pub name: String,
    pub unlimited: bool,
    pub replaces: Vec<String>,
    pub shadow_mode: bool,
    pub quota_mode: bool,
    pub detailed_metric: bool,
    /// The name its statistics go under: `domain.key_value.key...`.
    pub stats_key: String,
    /// For each of the request's entries, the wildcard pattern that stands
    /// for its value in the Redis key (share_threshold), if any.
    pub shared_values: Vec<Option<String>>,
    pub metadata: Option<Struct>,
}

/// Why a configuration file was refused, with the file's name first, as the
/// reference words it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError(pub String);

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

fn refuse(file: &str, why: impl std::fmt::Display) -> ConfigError {
    ConfigError(format!("{file}: {why}"))
}

const VALID_KEYS: [&str; 17] = [
    "domain",
    "key",
    "value",
    "descriptors",
    "rate_limit",
    "unit",
    "requests_per_unit",
    "unlimited",
    "shadow_mode",
    "quota_mode",
    "name",
    "replaces",
    "detailed_metric",
    "value_to_metric",
    "share_threshold",
    "metadata",
    // Ours: more windows on one rate limit.
    "windows",
];

#[derive(Debug, Clone, Default)]
struct Node {
    children: HashMap<String, Node>,
    /// Keys of `children` that hold a `*`, in the order they were given,
    /// split on it.
    wildcards: Vec<(String, Vec<String>)>,
    limit: Option<RateLimit>,
    value_to_metric: bool,
    share_threshold: bool,
}

/// Every domain's descriptors.
#[derive(Debug, Clone, Default)]
pub struct Config {
    domains: HashMap<String, Node>,
}

impl Config {
    /// The configuration of `files` (name, contents), in order; with
    /// `merge_domains` (MERGE_DOMAIN_CONFIG) a domain given again adds to
    /// the first, otherwise it is refused.
    pub fn load(files: &[(String, String)], merge_domains: bool) -> Result<Config, ConfigError> {
        let mut config = Config::default();
        for (name, contents) in files {
            config.load_file(name, contents, merge_domains)?;
        }
        Ok(config)
    }

    pub fn domains(&self) -> usize {
        self.domains.len()
    }

    pub fn has_domain(&self, domain: &str) -> bool {
        self.domains.contains_key(domain)
    }

    fn load_file(&mut self, file: &str, contents: &str, merge: bool) -> Result<(), ConfigError> {
        let root: Yaml = serde_yaml::from_str(contents)
            .map_err(|e| refuse(file, format!("error loading config file: {e}")))?;
        let root = match root {
            Yaml::Mapping(map) => map,
            // An empty file is an empty mapping to the reference.
            Yaml::Null => serde_yaml::Mapping::new(),
            _ => return Err(refuse(file, "error loading config file: not a mapping")),
        };
        validate_keys(file, &root)?;
        let domain = string_field(file, &root, "domain")?;
        if domain.is_empty() {
            return Err(refuse(file, "config file cannot have empty domain"));
        }
        let descriptors = list_field(file, &root, "descriptors")?;
        if self.domains.contains_key(&domain) && !merge {
            return Err(refuse(
                file,
                format!("duplicate domain '{domain}' in config file"),
            ));
        }
        let node = self.domains.entry(domain.clone()).or_default();
        load_descriptors(file, node, &format!("{domain}."), descriptors)
    }

    /// The rate limit for `entries` (key, value pairs) of a request in
    /// `domain`, as the reference finds it; None for an unknown domain or
    /// a descriptor no limit matches.
    pub fn lookup(&self, domain: &str, entries: &[(&str, &str)]) -> Option<RateLimit> {
        let mut node = self.domains.get(domain)?;
        let mut limit: Option<RateLimit> = None;
        let mut detailed = String::from(domain);
        let mut valued = String::from(domain);
        let mut shared: HashMap<usize, String> = HashMap::new();
        for (i, &(key, value)) in entries.iter().enumerate() {
            let mut final_key = format!("{key}_{value}");
            detailed.push('.');
            detailed.push_str(&final_key);
            let mut next = node.children.get(&final_key);
            let mut wildcard: Option<&str> = None;
            if next.is_none() {
                if let Some((pattern, _)) = node
                    .wildcards
                    .iter()
                    .find(|(_, parts)| wildcard_match(parts, &final_key))
                {
                    next = node.children.get(pattern);
                    wildcard = Some(pattern);
                }
            }
            let by_value = next.is_some();
            if next.is_none() {
                final_key = key.to_string();
                next = node.children.get(&final_key);
            }
            if let (Some(pattern), Some(found)) = (wildcard, next) {
                if found.share_threshold {
                    let prefix = format!("{key}_");
                    shared.insert(
                        i,
                        pattern.strip_prefix(&prefix).unwrap_or(pattern).to_string(),
                    );
                }
            }
            valued.push('.');
            match next {
                Some(found) => {
                    let shown = if let Some(pattern) = wildcard {
                        if let Some(share) = shared.get(&i) {
                            share.clone()
                        } else if found.value_to_metric {
                            value.to_string()
                        } else {
                            let prefix = format!("{key}_");
                            pattern.strip_prefix(&prefix).unwrap_or(pattern).to_string()
                        }
                    } else if by_value || found.value_to_metric {
                        value.to_string()
                    } else {
                        String::new()
                    };
                    valued.push_str(key);
                    if !shown.is_empty() {
                        valued.push('_');
                        valued.push_str(&shown);
                    }
                }
                None => valued.push_str(key),
            }
            if let Some(found) = next {
                if let Some(found_limit) = &found.limit {
                    // A limit counts only at the request's own depth.
                    if i == entries.len() - 1 {
                        let mut copy = found_limit.clone();
                        if !shared.is_empty() {
                            copy.shared_values = (0..entries.len())
                                .map(|index| shared.get(&index).cloned())
                                .collect();
                        }
                        limit = Some(copy);
                    }
                }
            }
            match next {
                Some(found) if !found.children.is_empty() => node = found,
                _ => break,
            }
        }
        let mut limit = limit?;
        if limit.detailed_metric {
            limit.stats_key = if limit.shared_values.iter().any(Option::is_some) {
                let mut key = String::from(domain);
                for (i, (entry_key, value)) in entries.iter().enumerate() {
                    key.push('.');
                    key.push_str(entry_key);
                    match limit.shared_values.get(i).and_then(Option::as_ref) {
                        Some(pattern) => {
                            key.push('_');
                            key.push_str(pattern);
                        }
                        None if !value.is_empty() => {
                            key.push('_');
                            key.push_str(value);
                        }
                        None => {}
                    }
                }
                key
            } else {
                detailed
            };
        } else if valued != limit.stats_key {
            limit.stats_key = valued;
        }
        Some(limit)
    }
}

/// The limit a request's descriptor gives itself (its `limit` field): one
/// window of the unit's length; no shadow or quota mode, as the reference
/// has it.
pub fn override_limit(
    domain: &str,
    entries: &[(&str, &str)],
    requests_per_unit: u32,
    unit: i32,
) -> Option<RateLimit> {
    let (_, unit, window_ms) = UNITS.iter().copied().find(|&(_, n, _)| n == unit)?;
    let parts: Vec<String> = entries
        .iter()
        .map(|(key, value)| {
            if value.is_empty() {
                key.to_string()
            } else {
                format!("{key}_{value}")
            }
        })
        .collect();
    Some(RateLimit {
        windows: vec![Window {
            window_ms,
            limit: u64::from(requests_per_unit),
            unit,
        }],
        name: String::new(),
        unlimited: false,
        replaces: Vec::new(),
        shadow_mode: false,
        quota_mode: false,
        detailed_metric: false,
        stats_key: format!("{domain}.{}", parts.join(".")),
        shared_values: Vec::new(),
        metadata: None,
    })
}

/// Whether `value` matches a pattern split on its `*`s: each `*` stands for
/// any run of characters, none included.
pub fn wildcard_match(parts: &[String], value: &str) -> bool {
    let [first, middle @ .., last] = parts else {
        return parts.first().is_some_and(|only| only == value);
    };
    if middle.is_empty() && parts.len() == 1 {
        return first == value;
    }
    if value.len() < parts.iter().map(String::len).sum::<usize>() {
        return false;
    }
    let Some(rest) = value.strip_prefix(first.as_str()) else {
        return false;
    };
    let Some(mut rest) = rest.strip_suffix(last.as_str()) else {
        return false;
    };
    for part in middle {
        match rest.find(part.as_str()) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    true
}

/// The reference's check of a file's keys: every mapping key a string from
/// the known set (metadata's own excepted), lists of mappings only, and
/// leaves of string, integer, boolean or nothing.
fn validate_keys(file: &str, map: &serde_yaml::Mapping) -> Result<(), ConfigError> {
    for (key, value) in map {
        let Yaml::String(key) = key else {
            return Err(refuse(
                file,
                format!(
                    "config error, key is not of type string: {}",
                    yaml_text(key)
                ),
            ));
        };
        if !VALID_KEYS.contains(&key.as_str()) {
            return Err(refuse(file, format!("config error, unknown key '{key}'")));
        }
        if key == "metadata" {
            continue;
        }
        match value {
            Yaml::Sequence(items) => {
                for item in items {
                    let Yaml::Mapping(item) = item else {
                        return Err(refuse(
                            file,
                            format!(
                                "config error, yaml file contains list of type other than map: {}",
                                yaml_text(item)
                            ),
                        ));
                    };
                    validate_keys(file, item)?;
                }
            }
            Yaml::Mapping(inner) => validate_keys(file, inner)?,
            Yaml::String(_) | Yaml::Bool(_) | Yaml::Null => {}
            Yaml::Number(n) if n.is_i64() || n.is_u64() => {}
            _ => return Err(refuse(file, "error checking config")),
        }
    }
    Ok(())
}

fn yaml_text(value: &Yaml) -> String {
    serde_yaml::to_string(value)
        .map(|text| text.trim_end().to_string())
        .unwrap_or_default()
}

fn field<'a>(map: &'a serde_yaml::Mapping, name: &str) -> Option<&'a Yaml> {
    map.get(name).filter(|value| !value.is_null())
}

fn type_error(file: &str, name: &str, want: &str, got: &Yaml) -> ConfigError {
    refuse(
        file,
        format!(
            "error loading config file: field '{name}' must be {want}, not {}",
            yaml_text(got)
        ),
    )
}

fn string_field(file: &str, map: &serde_yaml::Mapping, name: &str) -> Result<String, ConfigError> {
    match field(map, name) {
        None => Ok(String::new()),
        Some(Yaml::String(text)) => Ok(text.clone()),
        // yaml.v2 reads a number or boolean into a string field as its text.
        Some(Yaml::Number(n)) => Ok(n.to_string()),
        Some(Yaml::Bool(b)) => Ok(b.to_string()),
        Some(other) => Err(type_error(file, name, "a string", other)),
    }
}

fn bool_field(file: &str, map: &serde_yaml::Mapping, name: &str) -> Result<bool, ConfigError> {
    match field(map, name) {
        None => Ok(false),
        Some(Yaml::Bool(b)) => Ok(*b),
        // YAML 1.1's other words for them, which the reference's parser
        // reads as booleans.
        Some(Yaml::String(word)) => match word.as_str() {
            "y" | "Y" | "yes" | "Yes" | "YES" | "on" | "On" | "ON" => Ok(true),
            "n" | "N" | "no" | "No" | "NO" | "off" | "Off" | "OFF" => Ok(false),
            _ => Err(type_error(
                file,
                name,
                "true or false",
                &Yaml::String(word.clone()),
            )),
        },
        Some(other) => Err(type_error(file, name, "true or false", other)),
    }
}

fn u32_field(file: &str, map: &serde_yaml::Mapping, name: &str) -> Result<u32, ConfigError> {
    match field(map, name) {
        None => Ok(0),
        Some(Yaml::Number(n)) => n
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .ok_or_else(|| {
                type_error(
                    file,
                    name,
                    "a whole number from 0 to 4294967295",
                    &Yaml::Number(n.clone()),
                )
            }),
        Some(other) => Err(type_error(file, name, "a whole number", other)),
    }
}

fn list_field<'a>(
    file: &str,
    map: &'a serde_yaml::Mapping,
    name: &str,
) -> Result<&'a [Yaml], ConfigError> {
    match field(map, name) {
        None => Ok(&[]),
        Some(Yaml::Sequence(items)) => Ok(items),
        Some(other) => Err(type_error(file, name, "a list", other)),
    }
}

fn mapping<'a>(
    file: &str,
    name: &str,
    value: &'a Yaml,
) -> Result<&'a serde_yaml::Mapping, ConfigError> {
    match value {
        Yaml::Mapping(map) => Ok(map),
        other => Err(type_error(file, name, "a mapping", other)),
    }
}

/// A unit's protocol number and length: one of the reference's (in any
/// case), or a length of ours (`<n>ms`, `s`, `m`, `h` or `d`).
pub fn parse_unit(text: &str) -> Option<(i32, u64)> {
    let upper = text.to_ascii_uppercase();
    if let Some(&(_, unit, ms)) = UNITS.iter().find(|(name, _, _)| *name == upper) {
        return Some((unit, ms));
    }
    let split = text.find(|c: char| !c.is_ascii_digit())?;
    let (digits, suffix) = text.split_at(split);
    if digits.is_empty() || (digits.len() > 1 && digits.starts_with('0')) {
        return None;
    }
    let count: u64 = digits.parse().ok()?;
    let scale = match suffix {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return None,
    };
    let ms = count.checked_mul(scale)?;
    if ms == 0 || ms > LONGEST_WINDOW_MS {
        return None;
    }
    // A length that is one of the reference's units reports it.
    let unit = UNITS
        .iter()
        .find(|&&(_, _, unit_ms)| unit_ms == ms)
        .map_or(UNKNOWN_UNIT, |&(_, unit, _)| unit);
    Some((unit, ms))
}

fn load_window(file: &str, map: &serde_yaml::Mapping) -> Result<Window, ConfigError> {
    let unit = string_field(file, map, "unit")?;
    let (unit, window_ms) = parse_unit(&unit)
        .ok_or_else(|| refuse(file, format!("invalid rate limit unit '{unit}'")))?;
    Ok(Window {
        window_ms,
        limit: u64::from(u32_field(file, map, "requests_per_unit")?),
        unit,
    })
}

fn load_descriptors(
    file: &str,
    parent: &mut Node,
    parent_key: &str,
    descriptors: &[Yaml],
) -> Result<(), ConfigError> {
    for descriptor in descriptors {
        let map = mapping(file, "descriptors", descriptor)?;
        let key = string_field(file, map, "key")?;
        if key.is_empty() {
            return Err(refuse(file, "descriptor has empty key"));
        }
        let value = string_field(file, map, "value")?;
        let final_key = if value.is_empty() {
            key.clone()
        } else {
            format!("{key}_{value}")
        };
        let full_key = format!("{parent_key}{final_key}");
        if parent.children.contains_key(&final_key) {
            return Err(refuse(
                file,
                format!("duplicate descriptor composite key '{full_key}'"),
            ));
        }
        let shadow_mode = bool_field(file, map, "shadow_mode")?;
        let quota_mode = bool_field(file, map, "quota_mode")?;
        let detailed_metric = bool_field(file, map, "detailed_metric")?;
        let share_threshold = bool_field(file, map, "share_threshold")?;
        let metadata = match map.get("metadata") {
            None | Some(Yaml::Null) => None,
            Some(Yaml::Mapping(fields)) if fields.is_empty() => None,
            Some(Yaml::Mapping(fields)) => Some(
                to_struct(fields)
                    .map_err(|why| refuse(file, format!("error parsing metadata: {why}")))?,
            ),
            Some(other) => return Err(type_error(file, "metadata", "a mapping", other)),
        };
        let limit = match field(map, "rate_limit") {
            None => None,
            Some(rate_limit) => {
                let rate_limit = mapping(file, "rate_limit", rate_limit)?;
                let unlimited = bool_field(file, rate_limit, "unlimited")?;
                let unit = string_field(file, rate_limit, "unit")?;
                let parsed = parse_unit(&unit);
                let name = string_field(file, rate_limit, "name")?;
                let mut windows = Vec::new();
                if unlimited {
                    if parsed.is_some() {
                        return Err(refuse(
                            file,
                            "should not specify rate limit unit when unlimited",
                        ));
                    }
                } else {
                    windows.push(load_window(file, rate_limit)?);
                    let more = list_field(file, rate_limit, "windows")?;
                    if more.len() >= MAX_WINDOWS {
                        return Err(refuse(
                            file,
                            format!(
                                "'{full_key}' has {} windows: at most {MAX_WINDOWS} in all",
                                more.len() + 1
                            ),
                        ));
                    }
                    for more in more {
                        windows.push(load_window(file, mapping(file, "windows", more)?)?);
                    }
                }
                let mut replaces = Vec::new();
                for replaced in list_field(file, rate_limit, "replaces")? {
                    let replaced =
                        string_field(file, mapping(file, "replaces", replaced)?, "name")?;
                    if replaced.is_empty() {
                        return Err(refuse(file, "should not have an empty replaces entry"));
                    }
                    if replaced == name {
                        return Err(refuse(
                            file,
                            "replaces should not contain name of same descriptor",
                        ));
                    }
                    replaces.push(replaced);
                }
                Some(RateLimit {
                    windows,
                    name,
                    unlimited,
                    replaces,
                    shadow_mode,
                    quota_mode,
                    detailed_metric,
                    stats_key: full_key.clone(),
                    shared_values: Vec::new(),
                    metadata: metadata.clone(),
                })
            }
        };
        if share_threshold && !final_key.contains('*') {
            return Err(refuse(
                file,
                format!("share_threshold can only be used with wildcard values (containing '*'), but found key '{final_key}'"),
            ));
        }
        if final_key.contains('*') {
            let parts = final_key.split('*').map(str::to_string).collect();
            parent.wildcards.push((final_key.clone(), parts));
        }
        let mut node = Node {
            limit,
            value_to_metric: bool_field(file, map, "value_to_metric")?,
            share_threshold,
            ..Node::default()
        };
        load_descriptors(
            file,
            &mut node,
            &format!("{full_key}."),
            list_field(file, map, "descriptors")?,
        )?;
        parent.children.insert(final_key, node);
    }
    Ok(())
}

/// YAML metadata as a protobuf Struct (what Envoy's dynamic metadata is).
fn to_struct(map: &serde_yaml::Mapping) -> Result<Struct, String> {
    let mut fields = std::collections::HashMap::new();
    for (key, value) in map {
        let key = match key {
            Yaml::String(text) => text.clone(),
            Yaml::Number(n) => n.to_string(),
            Yaml::Bool(b) => b.to_string(),
            other => return Err(format!("key {} is not a string", yaml_text(other))),
        };
        fields.insert(key, to_value(value)?);
    }
    Ok(Struct { fields })
}

fn to_value(value: &Yaml) -> Result<Value, String> {
    let kind = match value {
        Yaml::Null => Kind::NullValue(0),
        Yaml::Bool(b) => Kind::BoolValue(*b),
        Yaml::Number(n) => Kind::NumberValue(n.as_f64().ok_or("a number out of range")?),
        Yaml::String(text) => Kind::StringValue(text.clone()),
        Yaml::Sequence(items) => Kind::ListValue(ListValue {
            values: items.iter().map(to_value).collect::<Result<_, _>>()?,
        }),
        Yaml::Mapping(map) => Kind::StructValue(to_struct(map)?),
        Yaml::Tagged(tagged) => return to_value(&tagged.value),
    };
    Ok(Value { kind: Some(kind) })
}

#[cfg(test)]
mod tests;
