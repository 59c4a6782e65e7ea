//! The client: SWL.CHECK, SWL.PEEK and SWL.REFUND as typed verdicts, over
//! any redis-rs async connection, through the module where the server has
//! it and through the function library (FCALL) where it does not.

#[cfg(feature = "cluster")]
use std::any::Any;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

use redis::aio::ConnectionLike;
use redis::{Cmd, RedisResult};
use tokio::sync::OnceCell;

use crate::DenialCache;

/// The function library, `scripts/swl.lua` of the repository this crate was
/// built from (the crate's `swl.lua` is a link to it, packaged as the file).
const LIBRARY: &str = include_str!("../swl.lua");
const ENCODING_LINE: &str = "\nlocal ENCODING = 'compact'\n";
const VERSION_LINE: &str = "\nlocal VERSION = '";

/// The release of the function library this crate carries: its VERSION
/// line, which `FCALL_RO swl_version 0` replies.
fn library_version() -> &'static str {
    static VERSION: OnceLock<&'static str> = OnceLock::new();
    VERSION.get_or_init(|| {
        let start = LIBRARY
            .find(VERSION_LINE)
            .expect("swl.lua has a VERSION line")
            + VERSION_LINE.len();
        let end = LIBRARY[start..].find('\'').expect("the VERSION line ends") + start;
        &LIBRARY[start..end]
    })
}

/// A release's major, minor and patch numbers, from the start of `version`
/// (`0.4.0`, `1.2`, `0.5.0-rc.1`); `None` where it does not start with a
/// number.
fn release(version: &str) -> Option<[u64; 3]> {
    let mut numbers = [0; 3];
    let mut rest = version.trim();
    for (i, number) in numbers.iter_mut().enumerate() {
        if i > 0 {
            match rest.strip_prefix('.') {
                Some(after) if after.starts_with(|c: char| c.is_ascii_digit()) => rest = after,
                _ => break,
            }
        }
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        *number = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
    }
    Some(numbers)
}

/// Whether the loaded library's release is newer than `own`, comparing
/// major, minor and patch as numbers. A version that does not start with a
/// number is older than any.
fn is_newer(loaded: &str, own: &str) -> bool {
    matches!((release(loaded), release(own)), (Some(theirs), Some(ours)) if theirs > ours)
}

/// What the client asks a node before it loads or replaces the library
/// there: the loaded library's release. A library from before 0.4, or none,
/// has no such function.
fn version_check() -> Cmd {
    let mut command = redis::cmd("FCALL_RO");
    command.arg("swl_version").arg(0);
    command
}

/// The FUNCTION LOAD for a node whose [`version_check`] gave `answer`, or
/// `None` where the node's library stays as it is: one of any version
/// unless `replace`, and one newer than this crate's always.
fn library_load(
    encoding: Encoding,
    replace: bool,
    answer: RedisResult<String>,
) -> RedisResult<Option<Cmd>> {
    let loaded = match answer {
        Ok(version) => Some(version),
        // None there, or one from before 0.4.
        Err(error) if message_has(&error, "function not found") => None,
        // FUNCTION LOAD without REPLACE leaves a loaded library as it is:
        // only a replace needs to know which one is there.
        Err(error) if !replace && !error.is_io_error() && !error.is_timeout() => None,
        Err(error) => return Err(error),
    };
    if loaded.is_some_and(|loaded| !replace || is_newer(&loaded, library_version())) {
        return Ok(None);
    }
    let mut command = redis::cmd("FUNCTION");
    command.arg("LOAD");
    if replace {
        command.arg("REPLACE");
    }
    command.arg(library_source(encoding));
    Ok(Some(command))
}

/// A FUNCTION LOAD's result: one that found the library loaded (by another
/// client, meanwhile) did what was asked.
fn loaded(result: RedisResult<redis::Value>) -> RedisResult<()> {
    match result {
        Err(error) if !message_has(&error, "already exists") => Err(error),
        _ => Ok(()),
    }
}

/// How logs are stored: redis-swl's compact string (its times coded in
/// blocks), or a sorted set. Where the module is loaded, its own `swl.encoding` setting
/// decides; this is for logs the function library creates.
///
/// ```
/// use redis_swl_client::Encoding;
/// assert_eq!(Encoding::default(), Encoding::Compact);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Encoding {
    /// A sorted set, readable with ZRANGE and compatible with the usual Lua
    /// script's keys.
    Zset,
    /// A compact log: about 1 to 2 bytes per entry, in the newest format
    /// the library writes (the default).
    #[default]
    Compact,
    /// A compact log of format version 1, which redis-swl 0.3 reads too:
    /// for a fleet part way through an upgrade, while a 0.3 module,
    /// library or client still serves the keys.
    Compact1,
}

impl Encoding {
    /// The name the module and the library use: `zset`, `compact` or
    /// `compact1`.
    ///
    /// ```
    /// use redis_swl_client::Encoding;
    /// assert_eq!(Encoding::Compact.name(), "compact");
    /// assert_eq!(Encoding::Compact1.name(), "compact1");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            Encoding::Zset => "zset",
            Encoding::Compact => "compact",
            Encoding::Compact1 => "compact1",
        }
    }
}

/// The function library's source, creating new logs in `encoding`: what
/// the client loads with FUNCTION LOAD where the server has no module.
///
/// ```
/// use redis_swl_client::{library_source, Encoding};
/// assert!(library_source(Encoding::Compact).contains("local ENCODING = 'compact'"));
/// assert!(library_source(Encoding::Zset).contains("local ENCODING = 'zset'"));
/// assert!(library_source(Encoding::Compact1).contains("local ENCODING = 'compact1'"));
/// ```
pub fn library_source(encoding: Encoding) -> &'static str {
    static ZSET: OnceLock<String> = OnceLock::new();
    static COMPACT1: OnceLock<String> = OnceLock::new();
    let with = |line: &str| LIBRARY.replacen(ENCODING_LINE, line, 1);
    match encoding {
        // The library as shipped creates compact logs.
        Encoding::Compact => LIBRARY,
        Encoding::Zset => ZSET.get_or_init(|| with("\nlocal ENCODING = 'zset'\n")),
        Encoding::Compact1 => COMPACT1.get_or_init(|| with("\nlocal ENCODING = 'compact1'\n")),
    }
}

/// A limit no log reaches, for counting what a log holds: 10^15 (the module
/// takes up to 2^53 - 1, but replies near that lose digits in some clients).
const MAX_LIMIT: u64 = 1_000_000_000_000_000;

/// What a log holds in a window ([`Swl::usage`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    /// The units recorded in the window.
    pub units: u64,
    /// When the newest entry leaves the window (0 when it holds none).
    pub reset_after_ms: i64,
}

/// One reply of SWL.CHECK, SWL.PEEK or SWL.REFUND, by name, as the Python
/// and Node clients give it.
///
/// `limit`, `remaining` and `retry_after_ms` describe the window named by
/// `window_ms`: the one with the least left, or the one that denied.
///
/// ```
/// use redis_swl_client::Verdict;
/// let verdict = Verdict::from_reply(&[0, 3, 0, 1500, 59000, 60000]).unwrap();
/// assert!(!verdict.allowed);
/// assert_eq!(verdict.retry_after_seconds(), Some(2));
/// assert_eq!(verdict.oldest_after_ms, None);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    /// Admitted (and, for a check, recorded).
    pub allowed: bool,
    /// The limit of the window the verdict describes.
    pub limit: u64,
    /// Units left in that window.
    pub remaining: u64,
    /// When a denied request would fit; -1 when admitted, or when waiting
    /// cannot help (a cost above the limit).
    pub retry_after_ms: i64,
    /// When the log's newest entry leaves the widest window (0 for an empty
    /// log).
    pub reset_after_ms: i64,
    /// The window the verdict describes.
    pub window_ms: u64,
    /// Only from a peek with [`Options::oldest`]: when the oldest entry in
    /// that window leaves it.
    pub oldest_after_ms: Option<i64>,
}

impl Verdict {
    /// The verdict of six integers (seven with OLDEST); `None` for anything
    /// else.
    ///
    /// ```
    /// use redis_swl_client::Verdict;
    /// let peeked = Verdict::from_reply(&[1, 5, 2, -1, 60_000, 60_000, 45_000]).unwrap();
    /// assert_eq!(peeked.oldest_after_ms, Some(45_000));
    /// assert_eq!(Verdict::from_reply(&[1, 2, 3]), None);
    /// ```
    pub fn from_reply(reply: &[i64]) -> Option<Verdict> {
        let (six, oldest) = match reply.len() {
            6 => (reply, None),
            7 => (&reply[..6], Some(reply[6])),
            _ => return None,
        };
        let &[allowed, limit, remaining, retry, reset, window] = six else {
            return None;
        };
        Some(Verdict {
            allowed: allowed == 1,
            limit: u64::try_from(limit).ok()?,
            remaining: u64::try_from(remaining).ok()?,
            retry_after_ms: retry,
            reset_after_ms: reset,
            window_ms: u64::try_from(window).ok()?,
            oldest_after_ms: oldest,
        })
    }

    /// Whole seconds for a `Retry-After` header (rounded up), or `None`
    /// when admitted or when waiting cannot help.
    ///
    /// ```
    /// use redis_swl_client::Verdict;
    /// let never = Verdict::from_reply(&[0, 1, 1, -1, 0, 1_000]).unwrap(); // a cost above the limit
    /// assert_eq!(never.retry_after_seconds(), None);
    /// ```
    pub fn retry_after_seconds(&self) -> Option<u64> {
        u64::try_from(self.retry_after_ms)
            .ok()
            .map(|ms| ms.div_ceil(1000))
    }
}

/// What a call adds to the key, window and limit: its cost, further
/// windows, its time, and PENALIZE or FORCE (check) or OLDEST (peek).
///
/// ```
/// use redis_swl_client::Options;
/// let options = Options::new().cost(2).window(1_000, 10);
/// assert_eq!(options.args(60_000, 100), ["60000", "100", "*", "COST", "2", "WINDOW", "1000", "10"]);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    pub(crate) cost: u64,
    pub(crate) windows: Vec<(u64, u64)>,
    now_ms: Option<u64>,
    penalize: bool,
    force: bool,
    oldest: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            cost: 1,
            windows: Vec::new(),
            now_ms: None,
            penalize: false,
            force: false,
            oldest: false,
        }
    }
}

impl Options {
    /// A request of one unit, on the server's clock.
    ///
    /// ```
    /// assert_eq!(redis_swl_client::Options::new().args(1_000, 5), ["1000", "5", "*"]);
    /// ```
    pub fn new() -> Options {
        Options::default()
    }

    /// The request weighs `cost` units (1 to 100000).
    ///
    /// ```
    /// let args = redis_swl_client::Options::new().cost(3).args(1_000, 5);
    /// assert_eq!(args[3..], ["COST", "3"]);
    /// ```
    pub fn cost(mut self, cost: u64) -> Options {
        self.cost = cost;
        self
    }

    /// Another window on the same log: every window must admit.
    ///
    /// ```
    /// let args = redis_swl_client::Options::new().window(1_000, 10).args(60_000, 100);
    /// assert_eq!(args[3..], ["WINDOW", "1000", "10"]);
    /// ```
    pub fn window(mut self, window_ms: u64, limit: u64) -> Options {
        self.windows.push((window_ms, limit));
        self
    }

    /// Further windows, as (window_ms, limit) pairs.
    ///
    /// ```
    /// let options = redis_swl_client::Options::new().windows([(1_000, 10), (10, 2)]);
    /// assert_eq!(options.args(60_000, 100).len(), 9);
    /// ```
    pub fn windows(mut self, windows: impl IntoIterator<Item = (u64, u64)>) -> Options {
        self.windows.extend(windows);
        self
    }

    /// The request's time, Unix milliseconds (the server's clock by default).
    ///
    /// ```
    /// let args = redis_swl_client::Options::new().now_ms(1_700_000_000_000).args(1_000, 5);
    /// assert_eq!(args[2], "1700000000000");
    /// ```
    pub fn now_ms(mut self, now_ms: u64) -> Options {
        self.now_ms = Some(now_ms);
        self
    }

    /// SWL.CHECK only: record a denied request too.
    ///
    /// ```
    /// let args = redis_swl_client::Options::new().penalize().args(1_000, 5);
    /// assert_eq!(args.last().unwrap(), "PENALIZE");
    /// ```
    pub fn penalize(mut self) -> Options {
        self.penalize = true;
        self
    }

    /// SWL.CHECK only: record the request whether or not it fits (FORCE),
    /// as a charge for what was already served; the verdict still says
    /// whether it fitted.
    ///
    /// ```
    /// let args = redis_swl_client::Options::new().force().args(1_000, 5);
    /// assert_eq!(args.last().unwrap(), "FORCE");
    /// ```
    pub fn force(mut self) -> Options {
        self.force = true;
        self
    }

    /// SWL.PEEK only: add `oldest_after_ms` to the verdict.
    ///
    /// ```
    /// let args = redis_swl_client::Options::new().oldest().args(1_000, 5);
    /// assert_eq!(args.last().unwrap(), "OLDEST");
    /// ```
    pub fn oldest(mut self) -> Options {
        self.oldest = true;
        self
    }

    /// Whether a check of these options may use a denial cache: not with
    /// PENALIZE or FORCE, which record denied requests in Redis, nor at a
    /// time of the caller's, which the cache's monotonic clock cannot place.
    pub(crate) fn cacheable(&self) -> bool {
        !self.penalize && !self.force && self.now_ms.is_none()
    }

    /// The arguments after the key, as the module and the library take them.
    ///
    /// ```
    /// let args = redis_swl_client::Options::new().cost(2).args(60_000, 100);
    /// assert_eq!(args, ["60000", "100", "*", "COST", "2"]);
    /// ```
    pub fn args(&self, window_ms: u64, limit: u64) -> Vec<String> {
        let mut args = vec![window_ms.to_string(), limit.to_string()];
        args.push(self.now_ms.map_or("*".to_string(), |t| t.to_string()));
        if self.cost != 1 {
            args.extend(["COST".to_string(), self.cost.to_string()]);
        }
        for (window_ms, limit) in &self.windows {
            args.extend([
                "WINDOW".to_string(),
                window_ms.to_string(),
                limit.to_string(),
            ]);
        }
        if self.penalize {
            args.push("PENALIZE".to_string());
        }
        if self.force {
            args.push("FORCE".to_string());
        }
        if self.oldest {
            args.push("OLDEST".to_string());
        }
        args
    }
}

/// Why a call of [`Swl`] failed. It converts into the
/// [`redis::RedisError`] it holds, so `?` works in a function that returns
/// a [`redis::RedisResult`].
///
/// ```
/// use redis_swl_client::Error;
///
/// fn give_up_or_not(error: &Error) -> &'static str {
///     match error {
///         // Neither a denial nor an admission: the request may be in the log.
///         Error::UncertainOutcome(_) => "may have been recorded",
///         _ => "not recorded",
///     }
/// }
/// let refused = Error::from(redis::RedisError::from((redis::ErrorKind::ResponseError, "ERR", "cost".to_string())));
/// assert_eq!(give_up_or_not(&refused), "not recorded");
/// assert!(!refused.is_uncertain_outcome());
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// A check, refund or reset was sent and no reply came: it timed out,
    /// or the connection was lost while waiting. The server may or may not
    /// have carried it out, so the request may or may not have been
    /// recorded (or given back, or deleted). Never given for a peek, which
    /// changes nothing.
    UncertainOutcome(redis::RedisError),
    /// Any other failure: an error reply (which changed nothing), a
    /// connection that failed before the command went out, a reply that is
    /// not redis-swl's, or a peek that failed.
    Redis(redis::RedisError),
}

impl Error {
    /// Whether this is [`Error::UncertainOutcome`].
    pub fn is_uncertain_outcome(&self) -> bool {
        matches!(self, Error::UncertainOutcome(_))
    }

    /// The error redis-rs gave.
    ///
    /// ```
    /// let error = redis_swl_client::Error::from(redis::RedisError::from(std::io::Error::from(std::io::ErrorKind::TimedOut)));
    /// assert!(error.redis_error().is_timeout());
    /// ```
    pub fn redis_error(&self) -> &redis::RedisError {
        match self {
            Error::UncertainOutcome(error) | Error::Redis(error) => error,
        }
    }

    /// The error of a command that failed: an uncertain outcome where it
    /// changes the log and may have been carried out.
    fn of(names: Names, error: redis::RedisError) -> Error {
        if names.changes && (error.is_timeout() || error.is_connection_dropped()) {
            Error::UncertainOutcome(error)
        } else {
            Error::Redis(error)
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::UncertainOutcome(error) => write!(
                f,
                "no reply, the command may or may not have been carried out: {error}"
            ),
            Error::Redis(error) => error.fmt(f),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(self.redis_error())
    }
}

impl From<redis::RedisError> for Error {
    fn from(error: redis::RedisError) -> Error {
        Error::Redis(error)
    }
}

impl From<Error> for redis::RedisError {
    fn from(error: Error) -> redis::RedisError {
        match error {
            Error::UncertainOutcome(error) | Error::Redis(error) => error,
        }
    }
}

/// A command of the module and the function that answers it in the library.
#[derive(Clone, Copy)]
struct Names {
    command: &'static str,
    function: &'static str,
    /// It changes the log: a second one records (or gives back) twice.
    changes: bool,
}

const CHECK: Names = Names {
    command: "SWL.CHECK",
    function: "swl_check",
    changes: true,
};
const PEEK: Names = Names {
    command: "SWL.PEEK",
    function: "swl_peek",
    changes: false,
};
const REFUND: Names = Names {
    command: "SWL.REFUND",
    function: "swl_refund",
    changes: true,
};
const ENTRIES: Names = Names {
    command: "SWL.ENTRIES",
    function: "swl_entries",
    changes: false,
};

/// What a client sends once, before its first call, to learn whether the
/// server has the module: SWL.CHECK without its arguments. Redis refuses it
/// for its arity before it looks at ACLs or at the cluster's slots, so it
/// records nothing and needs no permission: "unknown command" without the
/// module, "wrong number of arguments" with it.
const PROBE: &str = "SWL.CHECK";

fn message_has(error: &redis::RedisError, text: &str) -> bool {
    error.to_string().to_lowercase().contains(text)
}

/// redis-swl over an async redis-rs connection: a
/// [`ConnectionManager`](redis::aio::ConnectionManager), a
/// [`MultiplexedConnection`](redis::aio::MultiplexedConnection), or with the
/// `cluster` feature a cluster's async connection. Each call is one
/// command: SWL.* where the module is loaded, otherwise FCALL; where FCALL
/// finds no library, the client loads the one it carries (on a cluster, on
/// every primary) and calls again.
///
/// Which of the two it is, the client learns once, before its first call,
/// by sending SWL.CHECK without arguments (refused for its arity where the
/// module is loaded, as an unknown command where it is not): calls made
/// while that probe is out wait for it, and none is sent to the wrong
/// place first. A probe that fails (a timeout) fails the calls waiting for
/// it, having sent nothing else, and the next call probes again.
///
/// A check or refund is never sent twice by this client, and neither
/// `ConnectionManager` nor `MultiplexedConnection` sends one again: one
/// that got no reply (a response timeout, a connection lost while waiting)
/// fails with [`Error::UncertainOutcome`], as it may or may not have been
/// recorded. redis-rs's cluster connection does send a command again when
/// its connection to the node drops (or a node's own timeout comes before
/// the request's), up to its `retries` (16 by default): build it with
/// `ClusterClientBuilder::retries(0)` for checks. A MOVED or ASK is then
/// given as an error, which records nothing: such a check may be sent again.
///
/// ```no_run
/// use redis_swl_client::{Options, Swl};
///
/// # async fn example() -> redis::RedisResult<()> {
/// let client = redis::Client::open("redis://127.0.0.1:6379/")?;
/// let swl = Swl::new(client.get_connection_manager().await?);
/// let verdict = swl.check("rl:alice", 60_000, 100, &Options::new()).await?;
/// if !verdict.allowed {
///     println!("retry in {:?} s", verdict.retry_after_seconds());
/// }
/// # Ok(())
/// # }
/// ```
pub struct Swl<C> {
    connection: C,
    /// The same connection, where it is a cluster's: the library is then
    /// loaded primary by primary.
    #[cfg(feature = "cluster")]
    cluster: Option<redis::cluster_async::ClusterConnection>,
    encoding: Encoding,
    /// What the probe found: true where the server has no module.
    probed: OnceCell<bool>,
    uses_library: AtomicBool,
    denials: Option<DenialCache>,
}

impl<C: ConnectionLike + Clone + Send + Sync + 'static> Swl<C> {
    /// A client over `connection`, for logs the library creates as compact
    /// logs.
    ///
    /// ```no_run
    /// # async fn example() -> redis::RedisResult<()> {
    /// let client = redis::Client::open("redis://127.0.0.1:6379/")?;
    /// let swl = redis_swl_client::Swl::new(client.get_multiplexed_async_connection().await?);
    /// # Ok(())
    /// # }
    /// ```
    pub fn new(connection: C) -> Swl<C> {
        Swl {
            #[cfg(feature = "cluster")]
            cluster: (&connection as &dyn Any)
                .downcast_ref::<redis::cluster_async::ClusterConnection>()
                .cloned(),
            connection,
            encoding: Encoding::Compact,
            probed: OnceCell::new(),
            uses_library: AtomicBool::new(false),
            denials: None,
        }
    }
}

impl<C: ConnectionLike + Clone + Send + Sync> Swl<C> {
    /// Answers checks from `cache` while a denial Redis gave for the same
    /// key and windows, and a cost no larger, is still waiting: denied,
    /// with the wait left, without a command (none by default; the layer
    /// has one of its own). [`refund`](Swl::refund) and
    /// [`reset`](Swl::reset) drop the key's cached denials; see
    /// [`DenialCache`] for what else can end a wait early. Clients over
    /// one process's connections may share a cache.
    ///
    /// ```no_run
    /// # async fn example(connection: redis::aio::ConnectionManager) -> redis::RedisResult<()> {
    /// use redis_swl_client::{DenialCache, Options, Swl};
    /// let swl = Swl::new(connection).with_denial_cache(DenialCache::new(DenialCache::DEFAULT_KEYS));
    /// let first = swl.check("rl:alice", 1_000, 1, &Options::new()).await?;
    /// let second = swl.check("rl:alice", 1_000, 1, &Options::new()).await?; // no command
    /// assert!(!second.allowed);
    /// # Ok(())
    /// # }
    /// ```
    pub fn with_denial_cache(mut self, cache: DenialCache) -> Swl<C> {
        self.denials = Some(cache);
        self
    }

    /// The encoding of logs the library creates (the module's own setting
    /// decides where it is loaded).
    ///
    /// ```no_run
    /// # async fn example(connection: redis::aio::ConnectionManager) {
    /// use redis_swl_client::{Encoding, Swl};
    /// let swl = Swl::new(connection).with_encoding(Encoding::Compact);
    /// # }
    /// ```
    pub fn with_encoding(mut self, encoding: Encoding) -> Swl<C> {
        self.encoding = encoding;
        self
    }

    /// True once the server answered that it has no module.
    ///
    /// ```no_run
    /// # async fn example(swl: redis_swl_client::Swl<redis::aio::ConnectionManager>) -> redis::RedisResult<()> {
    /// swl.check("rl:alice", 1_000, 5, &redis_swl_client::Options::new()).await?;
    /// println!("through the {}", if swl.uses_library() { "function library" } else { "module" });
    /// # Ok(())
    /// # }
    /// ```
    pub fn uses_library(&self) -> bool {
        self.uses_library.load(Ordering::Relaxed)
    }

    /// Checks a request of `options`' cost against `limit` per `window_ms`
    /// (and any further windows) and records it if admitted.
    ///
    /// ```no_run
    /// # async fn example(swl: redis_swl_client::Swl<redis::aio::ConnectionManager>) -> redis::RedisResult<()> {
    /// use redis_swl_client::Options;
    /// // 100 a minute and 10 a second, for a request weighing 2.
    /// let options = Options::new().cost(2).window(1_000, 10);
    /// let verdict = swl.check("rl:alice", 60_000, 100, &options).await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn check(
        &self,
        key: &str,
        window_ms: u64,
        limit: u64,
        options: &Options,
    ) -> Result<Verdict, Error> {
        let Some(cache) = &self.denials else {
            return self.run(CHECK, key, options.args(window_ms, limit)).await;
        };
        let first = (window_ms, limit);
        if let Some(cached) = cache.answer(key, first, options, Instant::now()) {
            return Ok(cached);
        }
        let ticket = cache.ticket();
        // The wait counts from the send: Redis decided after it, so the
        // cached denial never outlasts Redis's own.
        let sent = Instant::now();
        let verdict = self.run(CHECK, key, options.args(window_ms, limit)).await?;
        cache.keep(key, first, options, &verdict, ticket, sent);
        Ok(verdict)
    }

    /// What [`check`](Swl::check) would reply now, changing nothing.
    ///
    /// ```no_run
    /// # async fn example(swl: redis_swl_client::Swl<redis::aio::ConnectionManager>) -> redis::RedisResult<()> {
    /// use redis_swl_client::Options;
    /// let verdict = swl.peek("rl:alice", 60_000, 100, &Options::new().oldest()).await?;
    /// let oldest_leaves_in = verdict.oldest_after_ms;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn peek(
        &self,
        key: &str,
        window_ms: u64,
        limit: u64,
        options: &Options,
    ) -> Result<Verdict, Error> {
        self.run(PEEK, key, options.args(window_ms, limit)).await
    }

    /// `key`'s log: its entries' times, oldest first, as Unix milliseconds
    /// (SWL.ENTRIES); none for no key. A sorted set with a score another
    /// tool wrote that is not a whole number fails with a type error.
    ///
    /// ```no_run
    /// # async fn example(swl: redis_swl_client::Swl<redis::aio::ConnectionManager>) -> Result<(), redis_swl_client::Error> {
    /// let times: Vec<i64> = swl.entries("rl:alice").await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn entries(&self, key: &str) -> Result<Vec<i64>, Error> {
        self.call(ENTRIES, key, &[]).await
    }

    /// The units `key`'s log holds in the last `window_ms`: a peek against
    /// a limit no log reaches, whose remaining counts them.
    ///
    /// ```no_run
    /// # async fn example(swl: redis_swl_client::Swl<redis::aio::ConnectionManager>) -> Result<(), redis_swl_client::Error> {
    /// let units = swl.units("rl:alice", 60_000).await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn units(&self, key: &str, window_ms: u64) -> Result<u64, Error> {
        let counted = self
            .peek(key, window_ms, MAX_LIMIT, &Options::new())
            .await?;
        Ok(MAX_LIMIT - 1 - counted.remaining)
    }

    /// The units `key`'s log holds in the last `window_ms`, and when its
    /// newest entry leaves that window (0 when it holds none): two peeks,
    /// sent together.
    ///
    /// ```no_run
    /// # async fn example(swl: redis_swl_client::Swl<redis::aio::ConnectionManager>) -> Result<(), redis_swl_client::Error> {
    /// let usage = swl.usage("rl:alice", 60_000).await?;
    /// println!("{} units, the newest leaves in {} ms", usage.units, usage.reset_after_ms);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn usage(&self, key: &str, window_ms: u64) -> Result<Usage, Error> {
        let newest = Options::new();
        let (units, log) = tokio::join!(
            self.units(key, window_ms),
            self.peek(key, window_ms, 0, &newest)
        );
        Ok(Usage {
            units: units?,
            reset_after_ms: log?.reset_after_ms,
        })
    }

    /// Gives back up to `options`' cost of the newest recorded units (a
    /// request that should not count after all), and replies what
    /// [`peek`](Swl::peek) replies then.
    ///
    /// ```no_run
    /// # async fn example(swl: redis_swl_client::Swl<redis::aio::ConnectionManager>) -> redis::RedisResult<()> {
    /// use redis_swl_client::Options;
    /// swl.refund("rl:alice", 60_000, 100, &Options::new()).await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn refund(
        &self,
        key: &str,
        window_ms: u64,
        limit: u64,
        options: &Options,
    ) -> Result<Verdict, Error> {
        let refunded = self.run(REFUND, key, options.args(window_ms, limit)).await;
        // Also after a failure: it may have been carried out.
        if let Some(cache) = &self.denials {
            cache.forget(key);
        }
        refunded
    }

    /// Deletes `key`'s log (DEL), so that its client starts afresh, and
    /// drops the key's cached denials (a DEL sent another way leaves them
    /// to their wait).
    ///
    /// ```no_run
    /// # async fn example(swl: redis_swl_client::Swl<redis::aio::ConnectionManager>) -> redis::RedisResult<()> {
    /// swl.reset("rl:alice").await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn reset(&self, key: &str) -> Result<(), Error> {
        let mut connection = self.connection.clone();
        let deleted = redis::cmd("DEL")
            .arg(key)
            .query_async::<i64>(&mut connection)
            .await;
        if let Some(cache) = &self.denials {
            cache.forget(key);
        }
        match deleted {
            Ok(_) => Ok(()),
            Err(error) if error.is_timeout() || error.is_connection_dropped() => {
                Err(Error::UncertainOutcome(error))
            }
            Err(error) => Err(Error::Redis(error)),
        }
    }

    /// Loads the function library (on a cluster, on every primary), or with
    /// `replace` replaces an older one. A library already loaded is left.
    ///
    /// Before it loads anything on a node, it asks the node which release
    /// its library is (`FCALL_RO swl_version 0`): a library newer than the
    /// one this crate carries is never replaced, `replace` or not, and is
    /// used as it is. One from before 0.4, which cannot say, counts as
    /// older. With `replace`, a node that answers neither a version nor
    /// "function not found" fails the call with its error, and nothing is
    /// replaced there.
    ///
    /// ```no_run
    /// # async fn example(swl: redis_swl_client::Swl<redis::aio::ConnectionManager>) -> redis::RedisResult<()> {
    /// swl.load_library(true).await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn load_library(&self, replace: bool) -> RedisResult<()> {
        #[cfg(feature = "cluster")]
        if let Some(cluster) = &self.cluster {
            return load_on_primaries(cluster.clone(), self.encoding, replace).await;
        }
        let mut connection = self.connection.clone();
        let answer = version_check().query_async(&mut connection).await;
        match library_load(self.encoding, replace, answer)? {
            Some(command) => loaded(command.query_async(&mut connection).await),
            None => Ok(()),
        }
    }

    async fn run(&self, names: Names, key: &str, args: Vec<String>) -> Result<Verdict, Error> {
        let reply = self.call(names, key, &args).await?;
        Verdict::from_reply(&reply).ok_or_else(|| {
            Error::Redis(redis::RedisError::from((
                redis::ErrorKind::TypeError,
                "not a redis-swl reply",
                format!("{reply:?}"),
            )))
        })
    }

    /// Loads the library where the probe found no module, before any call
    /// goes to it, so that calls keep their order. A server that refuses
    /// the version check or the load is left to the call: it loads the
    /// library, if it can, when FCALL finds it missing. Only a failure to
    /// get an answer (a timeout, a lost connection) fails the probe.
    async fn prepare_library(&self) -> RedisResult<()> {
        match self.load_library(false).await {
            Err(error)
                if error.is_io_error()
                    || error.is_timeout()
                    || error.is_connection_dropped()
                    || error.is_connection_refusal() =>
            {
                Err(error)
            }
            _ => Ok(()),
        }
    }

    /// Each command is sent once by this client. redis-rs's
    /// `ConnectionManager` and `MultiplexedConnection` never send one again
    /// (a manager reconnects, and gives the error); its cluster connection
    /// may, unless it was built with `retries(0)` (see [`Swl`]).
    async fn call(&self, names: Names, key: &str, args: &[String]) -> Result<Vec<i64>, Error> {
        let mut connection = self.connection.clone();
        let sent = |result: RedisResult<Vec<i64>>| result.map_err(|error| Error::of(names, error));
        // One probe for every call: the others wait for it (and try it
        // again, one at a time, if it failed).
        let library = *self
            .probed
            .get_or_try_init(|| async {
                let library = self.probe().await?;
                if library {
                    self.prepare_library().await?;
                }
                Ok::<bool, redis::RedisError>(library)
            })
            .await?;
        if library {
            self.uses_library.store(true, Ordering::Relaxed);
        }
        if !self.uses_library() {
            let mut command = redis::cmd(names.command);
            command.arg(key).arg(args);
            match command.query_async(&mut connection).await {
                // The module went away (an unknown command is not carried out).
                Err(error) if message_has(&error, "unknown command") => {
                    self.uses_library.store(true, Ordering::Relaxed);
                }
                result => return sent(result),
            }
        }
        let fcall = fcall(names, key, args);
        match fcall.query_async(&mut connection).await {
            Err(error) if message_has(&error, "function not found") => {}
            result => return sent(result),
        }
        self.load_library(false).await?;
        match fcall.query_async(&mut connection).await {
            // A library was there already, from before this function:
            // replaced by this one, which has every function it had.
            Err(error) if message_has(&error, "function not found") => {
                self.load_library(true).await?;
                sent(fcall.query_async(&mut connection).await)
            }
            result => sent(result),
        }
    }
}

impl<C: ConnectionLike + Clone + Send + Sync> Swl<C> {
    /// Whether the server lacks the module, by [`PROBE`]: refused as an
    /// unknown command, or (the module) for its arity. Any other failure
    /// (a timeout, a lost connection) is the caller's, and decides nothing.
    async fn probe(&self) -> RedisResult<bool> {
        let mut connection = self.connection.clone();
        match redis::cmd(PROBE)
            .query_async::<redis::Value>(&mut connection)
            .await
        {
            Ok(_) => Ok(false),
            Err(error) if error.kind() == redis::ErrorKind::ResponseError => {
                Ok(message_has(&error, "unknown command"))
            }
            Err(error) => Err(error),
        }
    }
}

/// [`Swl::load_library`] on a cluster: node by node, on each primary the
/// connection knows, so that each keeps a newer library of its own.
#[cfg(feature = "cluster")]
async fn load_on_primaries(
    mut cluster: redis::cluster_async::ClusterConnection,
    encoding: Encoding,
    replace: bool,
) -> RedisResult<()> {
    use redis::cluster_routing::{MultipleNodeRoutingInfo, RoutingInfo, SingleNodeRoutingInfo};
    // Each primary's answer, by its address.
    let every = RoutingInfo::MultiNode((MultipleNodeRoutingInfo::AllMasters, None));
    let redis::Value::Map(answers) = cluster.route_command(&redis::cmd("PING"), every).await?
    else {
        return Err(redis::RedisError::from((
            redis::ErrorKind::ClientError,
            "no primaries answered by address",
        )));
    };
    for (address, _) in answers {
        let address: String = redis::from_redis_value(&address)?;
        let node = address
            .rsplit_once(':')
            .and_then(|(host, port)| Some((host.to_string(), port.parse().ok()?)))
            .map(|(host, port)| {
                RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress { host, port })
            })
            .ok_or_else(|| {
                redis::RedisError::from((
                    redis::ErrorKind::ClientError,
                    "not a node's address",
                    address.clone(),
                ))
            })?;
        let answer = cluster
            .route_command(&version_check(), node.clone())
            .await
            .and_then(|version| redis::from_redis_value(&version));
        if let Some(command) = library_load(encoding, replace, answer)? {
            loaded(cluster.route_command(&command, node).await)?;
        }
    }
    Ok(())
}

fn fcall(names: Names, key: &str, args: &[String]) -> Cmd {
    let mut command = redis::cmd("FCALL");
    command.arg(names.function).arg(1).arg(key).arg(args);
    command
}

#[cfg(test)]
mod tests {
    use super::{is_newer, library_version, release};

    #[test]
    fn versions_compare_as_numbers() {
        assert_eq!(release("0.10.0"), Some([0, 10, 0]));
        assert_eq!(release("1.2"), Some([1, 2, 0]));
        assert_eq!(release("0.5.0-rc.1"), Some([0, 5, 0]));
        assert_eq!(release("dev"), None);
        assert!(is_newer("0.10.0", "0.9.9"));
        assert!(!is_newer("0.9.9", "0.10.0"));
        assert!(!is_newer("0.4.0", "0.4.0"));
        assert!(!is_newer("dev", "0.4.0"));
        assert_eq!(library_version(), env!("CARGO_PKG_VERSION"));
    }
}
