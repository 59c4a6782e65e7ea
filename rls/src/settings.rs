//! The service's settings: envoyproxy/ratelimit's environment variables.
//! Each one the reference reads is used, refused at start (where ignoring
//! it would change what is limited or how the service is reached), or
//! accepted and reported as ignored (it tunes the reference's internals).
//! None is silently ignored.

use std::collections::HashMap;
use std::time::Duration;

/// How a request that any descriptor refuses is recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// Nowhere (ours, the default): a descriptor that admitted gives its
    /// hits back.
    CountsNowhere,
    /// Everywhere, over the limit too (the reference's default, kept for
    /// those who rely on it: STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=false).
    CountsEverywhere,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub grpc_address: String,
    pub http_address: String,
    pub redis_url: String,
    pub redis_cluster: bool,
    /// None: no timeout (REDIS_TIMEOUT=0, as the reference takes it).
    pub redis_timeout: Option<Duration>,
    pub encoding: redis_swl_client::Encoding,
    pub local_cache_keys: usize,
    pub near_limit_ratio: f32,
    pub shadow_mode: bool,
    pub quota_mode: bool,
    pub dynamic_metadata: bool,
    pub merge_domains: bool,
    pub headers: Option<[String; 3]>,
    pub refused: Refused,
    pub key_prefix: String,
    pub statsd: Option<String>,
    pub stats_flush: Duration,
    pub prometheus: Option<(String, String)>,
    pub log_level: crate::log::Level,
    pub log_json: bool,
    pub config_dir: std::path::PathBuf,
    pub ignore_dot_files: bool,
    pub force_start: bool,
    /// HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED: unhealthy until one loads.
    pub healthy_needs_config: bool,
    /// REDIS_HEALTH_CHECK_ACTIVE_CONNECTION: unhealthy while Redis does
    /// not answer.
    pub health_checks_redis: bool,
    /// What was set and is ignored, for the start-up log.
    pub ignored: Vec<String>,
}

/// Settings that only tune the reference's internals: accepted, reported.
const TUNING: [&str; 42] = [
    "REDIS_POOL_SIZE",
    "REDIS_PIPELINE_WINDOW",
    "REDIS_PIPELINE_LIMIT",
    "REDIS_CLUSTER_PIPELINE_PARALLELISM",
    "REDIS_POOL_ON_EMPTY_BEHAVIOR",
    "REDIS_STARTUP_INITIAL_INTERVAL",
    "REDIS_STARTUP_MAX_INTERVAL",
    "REDIS_STARTUP_MAX_ELAPSED_TIME",
    "REDIS_PERSECOND",
    "REDIS_PERSECOND_SOCKET_TYPE",
    "REDIS_PERSECOND_TYPE",
    "REDIS_PERSECOND_URL",
    "REDIS_PERSECOND_POOL_SIZE",
    "REDIS_PERSECOND_AUTH",
    "REDIS_PERSECOND_TLS",
    "REDIS_PERSECOND_SENTINEL_AUTH",
    "REDIS_PERSECOND_PIPELINE_WINDOW",
    "REDIS_PERSECOND_PIPELINE_LIMIT",
    "REDIS_PERSECOND_CLUSTER_PIPELINE_PARALLELISM",
    "REDIS_PERSECOND_TIMEOUT",
    "REDIS_PERSECOND_POOL_ON_EMPTY_BEHAVIOR",
    "REDIS_TLS_CLIENT_CERT",
    "REDIS_TLS_CLIENT_KEY",
    "REDIS_TLS_CACERT",
    "REDIS_TLS_SKIP_HOSTNAME_VERIFICATION",
    "REDIS_SENTINEL_AUTH",
    "EXPIRATION_JITTER_MAX_SECONDS",
    "GRPC_MAX_CONNECTION_AGE",
    "GRPC_MAX_CONNECTION_AGE_GRACE",
    "DEBUG_HOST",
    "DEBUG_PORT",
    "USE_DOG_STATSD",
    "USE_DOG_STATSD_MOGRIFIERS",
    "EXTRA_TAGS",
    "PROMETHEUS_MAPPER_YAML",
    "PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS",
    "TRACING_ENABLED",
    "TRACING_SERVICE_NAME",
    "TRACING_SERVICE_NAMESPACE",
    "TRACING_SERVICE_INSTANCE_ID",
    "TRACING_EXPORTER_PROTOCOL",
    "TRACING_SAMPLING_RATE",
];

/// Prefixes of further tuning settings (xDS, memcache, TLS of the gRPC
/// server's clients).
const TUNING_PREFIXES: [&str; 5] = [
    "CONFIG_GRPC_XDS_",
    "XDS_CLIENT_",
    "MEMCACHE_",
    "GRPC_CLIENT_TLS_",
    "GRPC_SERVER_TLS_",
];

/// Settings refused unless at the value we implement, with why.
const REFUSED: [(&str, &str, &str); 6] = [
    (
        "CONFIG_TYPE",
        "FILE",
        "only file configuration (FILE) is supported",
    ),
    (
        "BACKEND_TYPE",
        "redis",
        "only the redis backend is supported",
    ),
    (
        "REDIS_TLS",
        "false",
        "TLS to Redis is not supported; use a TLS proxy on loopback",
    ),
    (
        "GRPC_SERVER_USE_TLS",
        "false",
        "the gRPC server does not serve TLS",
    ),
    (
        "GRPC_UDS",
        "",
        "the gRPC server listens on TCP only (GRPC_HOST, GRPC_PORT)",
    ),
    (
        "DISABLE_STATS",
        "false",
        "statistics cannot be disabled; leave USE_STATSD and USE_PROMETHEUS off",
    ),
];

/// Why the settings were refused: the variable, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal(pub String);

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

struct Env<'a>(&'a HashMap<String, String>);

impl Env<'_> {
    fn text(&self, name: &str, default: &str) -> String {
        self.0
            .get(name)
            .cloned()
            .unwrap_or_else(|| default.to_string())
    }

    fn flag(&self, name: &str, default: bool) -> Result<bool, Refusal> {
        match self.0.get(name) {
            None => Ok(default),
            Some(v) => {
                parse_bool(v).ok_or_else(|| Refusal(format!("{name}={v}: not true or false")))
            }
        }
    }

    fn number<T: std::str::FromStr>(&self, name: &str, default: T) -> Result<T, Refusal> {
        match self.0.get(name) {
            None => Ok(default),
            Some(v) => v
                .parse()
                .map_err(|_| Refusal(format!("{name}={v}: not a number"))),
        }
    }

    fn duration(&self, name: &str, default: Duration) -> Result<Duration, Refusal> {
        match self.0.get(name) {
            None => Ok(default),
            Some(v) => parse_duration(v)
                .ok_or_else(|| Refusal(format!("{name}={v}: not a duration such as 500ms or 10s"))),
        }
    }
}

/// A boolean as Go's strconv.ParseBool reads it.
fn parse_bool(text: &str) -> Option<bool> {
    match text {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// A Go duration of one unit: `500ms`, `10s`, `1m`, `2h`, `250us`.
pub fn parse_duration(text: &str) -> Option<Duration> {
    if text == "0" {
        return Some(Duration::ZERO);
    }
    let split = text.find(|c: char| !c.is_ascii_digit() && c != '.')?;
    let (number, unit) = text.split_at(split);
    let number: f64 = number.parse().ok()?;
    let seconds = match unit {
        "ns" => number / 1e9,
        "us" | "µs" => number / 1e6,
        "ms" => number / 1e3,
        "s" => number,
        "m" => number * 60.0,
        "h" => number * 3600.0,
        _ => return None,
    };
    Duration::try_from_secs_f64(seconds).ok()
}

impl Settings {
    /// The settings of `env` (the process's environment).
    pub fn from_env(env: &HashMap<String, String>) -> Result<Settings, Refusal> {
        let e = Env(env);
        for (name, wanted, why) in REFUSED {
            if let Some(value) = env.get(name) {
                let same = match (parse_bool(value), parse_bool(wanted)) {
                    (Some(value), Some(wanted)) => value == wanted,
                    _ => value.eq_ignore_ascii_case(wanted),
                };
                if !same {
                    return Err(Refusal(format!("{name}={value} is refused: {why}")));
                }
            }
        }
        let redis_type = e.text("REDIS_TYPE", "SINGLE").to_ascii_uppercase();
        let redis_cluster = match redis_type.as_str() {
            "SINGLE" => false,
            "CLUSTER" => true,
            other => {
                return Err(Refusal(format!(
                    "REDIS_TYPE={other} is refused: SINGLE and CLUSTER are supported"
                )))
            }
        };
        let socket = e.text("REDIS_SOCKET_TYPE", "unix").to_ascii_lowercase();
        if socket != "unix" && socket != "tcp" {
            return Err(Refusal(format!(
                "REDIS_SOCKET_TYPE={socket} is refused: unix or tcp"
            )));
        }
        if redis_cluster && socket == "unix" {
            return Err(Refusal(
                "REDIS_TYPE=CLUSTER needs REDIS_SOCKET_TYPE=tcp".to_string(),
            ));
        }
        let auth = e.text("REDIS_AUTH", "");
        let url = e.text("REDIS_URL", "/var/run/nutcracker/ratelimit.sock");
        let redis_url = redis_url(&url, &socket, &auth, redis_cluster);
        let encoding = match e.text("SWL_ENCODING", "compact").as_str() {
            "compact" => redis_swl_client::Encoding::Compact,
            "zset" => redis_swl_client::Encoding::Zset,
            other => {
                return Err(Refusal(format!(
                    "SWL_ENCODING={other} is refused: compact or zset"
                )))
            }
        };
        let cache_bytes: usize = e.number("LOCAL_CACHE_SIZE_IN_BYTES", 0)?;
        let near_limit_ratio: f32 = e.number("NEAR_LIMIT_RATIO", 0.8)?;
        if !(0.0..=1.0).contains(&near_limit_ratio) {
            return Err(Refusal(format!(
                "NEAR_LIMIT_RATIO={near_limit_ratio}: not between 0 and 1"
            )));
        }
        let headers = if e.flag("LIMIT_RESPONSE_HEADERS_ENABLED", false)? {
            Some([
                e.text("LIMIT_LIMIT_HEADER", "RateLimit-Limit"),
                e.text("LIMIT_REMAINING_HEADER", "RateLimit-Remaining"),
                e.text("LIMIT_RESET_HEADER", "RateLimit-Reset"),
            ])
        } else {
            None
        };
        let refused = if e.flag("STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", true)? {
            Refused::CountsNowhere
        } else {
            Refused::CountsEverywhere
        };
        let statsd = if e.flag("USE_STATSD", true)? {
            Some(format!(
                "{}:{}",
                e.text("STATSD_HOST", "localhost"),
                e.number::<u16>("STATSD_PORT", 8125)?
            ))
        } else {
            None
        };
        let prometheus = if e.flag("USE_PROMETHEUS", false)? {
            Some((
                listen_address(&e.text("PROMETHEUS_ADDR", ":9090")),
                e.text("PROMETHEUS_PATH", "/metrics"),
            ))
        } else {
            None
        };
        let log_level =
            crate::log::Level::parse(&e.text("LOG_LEVEL", "WARN")).ok_or_else(|| {
                Refusal(format!(
                    "LOG_LEVEL={}: one of DEBUG, INFO, WARN, ERROR",
                    e.text("LOG_LEVEL", "")
                ))
            })?;
        let log_json = match e.text("LOG_FORMAT", "text").to_ascii_lowercase().as_str() {
            "text" => false,
            "json" => true,
            other => return Err(Refusal(format!("LOG_FORMAT={other}: text or json"))),
        };
        let root = e.text("RUNTIME_ROOT", "/srv/runtime_data/current");
        let mut config_dir = std::path::PathBuf::from(root);
        let subdirectory = e.text("RUNTIME_SUBDIRECTORY", "");
        if !subdirectory.is_empty() {
            config_dir.push(subdirectory);
        }
        config_dir.push(e.text("RUNTIME_APPDIRECTORY", "config"));
        // Both ways of watching see every change: the directory is read
        // anew, through any symbolic link, on each look.
        e.flag("RUNTIME_WATCH_ROOT", true)?;
        let mut ignored: Vec<String> = env
            .keys()
            .filter(|name| {
                TUNING.contains(&name.as_str())
                    || TUNING_PREFIXES
                        .iter()
                        .any(|prefix| name.starts_with(prefix))
            })
            .cloned()
            .collect();
        ignored.sort();
        Ok(Settings {
            grpc_address: format!(
                "{}:{}",
                e.text("GRPC_HOST", "0.0.0.0"),
                e.number::<u16>("GRPC_PORT", 8081)?
            ),
            http_address: format!(
                "{}:{}",
                e.text("HOST", "0.0.0.0"),
                e.number::<u16>("PORT", 8080)?
            ),
            redis_url,
            redis_cluster,
            redis_timeout: Some(e.duration("REDIS_TIMEOUT", Duration::from_secs(10))?)
                .filter(|timeout| !timeout.is_zero()),
            encoding,
            // About 100 bytes a cached key, with its windows and wait.
            local_cache_keys: cache_bytes / 100,
            near_limit_ratio,
            shadow_mode: e.flag("SHADOW_MODE", false)?,
            quota_mode: e.flag("QUOTA_MODE", false)?,
            dynamic_metadata: e.flag("RESPONSE_DYNAMIC_METADATA", false)?,
            merge_domains: e.flag("MERGE_DOMAIN_CONFIG", false)?,
            headers,
            refused,
            key_prefix: e.text("CACHE_KEY_PREFIX", ""),
            statsd,
            stats_flush: match e.duration("STATS_FLUSH_INTERVAL", Duration::from_secs(10))? {
                zero if zero.is_zero() => {
                    return Err(Refusal(
                        "STATS_FLUSH_INTERVAL=0: not a flush interval".to_string(),
                    ))
                }
                every => every,
            },
            prometheus,
            log_level,
            log_json,
            config_dir,
            ignore_dot_files: e.flag("RUNTIME_IGNOREDOTFILES", false)?,
            force_start: e.flag("FORCE_START_WITHOUT_INITIAL_CONFIG", false)?,
            healthy_needs_config: e.flag("HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", false)?,
            health_checks_redis: e.flag("REDIS_HEALTH_CHECK_ACTIVE_CONNECTION", false)?,
            ignored,
        })
    }
}

/// `:9090` listens on every interface, as Go's listener takes it.
fn listen_address(address: &str) -> String {
    if address.starts_with(':') {
        format!("0.0.0.0{address}")
    } else {
        address.to_string()
    }
}

/// Percent-encodes all but unreserved characters, for a URL's user,
/// password or query.
fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// REDIS_URL as redis-rs takes it: a socket path, `host:port` (a list of
/// them for a cluster) or a `redis://` URL, with REDIS_AUTH (`password`, or
/// `user:password` split at its first colon, as the reference splits it)
/// where the URL has none.
fn redis_url(url: &str, socket: &str, auth: &str, cluster: bool) -> String {
    let (user, password) = match auth.split_once(':') {
        Some((user, password)) => (encode(user), encode(password)),
        None => (String::new(), encode(auth)),
    };
    let one = |address: &str| {
        if address.starts_with("redis://") || address.starts_with("rediss://") {
            address.to_string()
        } else if socket == "unix" && !cluster {
            let mut query = Vec::new();
            if !user.is_empty() {
                query.push(format!("user={user}"));
            }
            if !auth.is_empty() {
                query.push(format!("pass={password}"));
            }
            let query = if query.is_empty() {
                String::new()
            } else {
                format!("?{}", query.join("&"))
            };
            format!("redis+unix://{address}{query}")
        } else if auth.is_empty() {
            format!("redis://{address}/")
        } else {
            format!("redis://{user}:{password}@{address}/")
        }
    };
    url.split(',')
        .map(|address| one(address.trim()))
        .collect::<Vec<_>>()
        .join(",")
}

/// REDIS_URL with any password masked, for the log.
pub fn masked(url: &str) -> String {
    url.split(',')
        .map(|one| match (one.find("://"), one.rfind('@')) {
            (Some(scheme), Some(at)) if at > scheme => {
                format!("{}*****{}", &one[..scheme + 3], &one[at..])
            }
            _ => match one.find("pass=") {
                Some(at) => format!("{}pass=*****", &one[..at]),
                None => one.to_string(),
            },
        })
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(pairs: &[(&str, &str)]) -> Result<Settings, Refusal> {
        let env = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Settings::from_env(&env)
    }

    #[test]
    fn the_references_defaults() {
        let s = settings(&[]).unwrap();
        assert_eq!(s.grpc_address, "0.0.0.0:8081");
        assert_eq!(s.http_address, "0.0.0.0:8080");
        assert_eq!(
            s.redis_url,
            "redis+unix:///var/run/nutcracker/ratelimit.sock"
        );
        assert_eq!(s.statsd.as_deref(), Some("localhost:8125"));
        assert_eq!(s.refused, Refused::CountsNowhere);
        assert_eq!(
            s.config_dir,
            std::path::PathBuf::from("/srv/runtime_data/current/config")
        );
        assert_eq!(s.redis_timeout, Some(Duration::from_secs(10)));
    }

    #[test]
    fn redis_addresses_and_credentials() {
        let tcp = settings(&[
            ("REDIS_SOCKET_TYPE", "tcp"),
            ("REDIS_URL", "127.0.0.1:6379"),
            ("REDIS_AUTH", "secret"),
        ])
        .unwrap();
        assert_eq!(tcp.redis_url, "redis://:secret@127.0.0.1:6379/");
        let cluster = settings(&[
            ("REDIS_SOCKET_TYPE", "tcp"),
            ("REDIS_TYPE", "cluster"),
            ("REDIS_URL", "a:1,b:2"),
            ("REDIS_AUTH", "user:pw"),
        ])
        .unwrap();
        assert!(cluster.redis_cluster);
        assert_eq!(
            cluster.redis_url,
            "redis://user:pw@a:1/,redis://user:pw@b:2/"
        );
    }

    #[test]
    fn what_would_change_limiting_is_refused_by_name() {
        for (name, value) in [
            ("CONFIG_TYPE", "GRPC_XDS_SOTW"),
            ("BACKEND_TYPE", "memcache"),
            ("REDIS_TYPE", "SENTINEL"),
            ("REDIS_TLS", "true"),
            ("GRPC_UDS", "/tmp/rls.sock"),
            ("NEAR_LIMIT_RATIO", "two"),
            ("STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", "maybe"),
            ("STATS_FLUSH_INTERVAL", "0s"),
        ] {
            let refusal = settings(&[(name, value)]).unwrap_err();
            assert!(refusal.0.starts_with(&format!("{name}=")), "{refusal}");
        }
    }

    #[test]
    fn tuning_is_accepted_and_reported() {
        let s = settings(&[
            ("REDIS_POOL_SIZE", "20"),
            ("CONFIG_GRPC_XDS_NODE_ID", "n"),
            ("STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", "false"),
        ])
        .unwrap();
        assert_eq!(s.ignored, ["CONFIG_GRPC_XDS_NODE_ID", "REDIS_POOL_SIZE"]);
        assert_eq!(s.refused, Refused::CountsEverywhere);
    }

    #[test]
    fn go_durations() {
        assert_eq!(parse_duration("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(parse_duration("1.5s"), Some(Duration::from_millis(1500)));
        assert_eq!(parse_duration("10"), None);
        assert_eq!(parse_duration("0"), Some(Duration::ZERO));
        let off = settings(&[
            ("REDIS_TIMEOUT", "0"),
            ("REDIS_TLS", "f"),
            ("LOG_FORMAT", "JSON"),
        ])
        .unwrap();
        assert_eq!((off.redis_timeout, off.log_json), (None, true));
        assert_eq!(parse_duration("s"), None);
    }
}
