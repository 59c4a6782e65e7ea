//! One descriptor's hits against its log: which SWL calls, with what cost
//! and windows, and what their replies say in the protocol's terms.
//!
//! SWL.CHECK takes at most 100,000 units a call. A larger `hits_addend` is
//! decided in one call all the same: the first call carries 100,000 units
//! against each limit lowered by the rest, which admits exactly when all of
//! them fit; the rest are then recorded with FORCE.

use redis::aio::ConnectionManager;
use redis::cluster_async::ClusterConnection;
use redis_swl_client::{Error, Options, Swl, Verdict};

use crate::config::Window;

/// The most units one SWL call takes (its COST cap).
pub const MAX_COST: u64 = 100_000;

/// The client, over one server or a cluster.
/// (The connection beside the client is for the health check's PING.)
pub enum Client {
    Single(Swl<ConnectionManager>, ConnectionManager),
    Cluster(Swl<ClusterConnection>, ClusterConnection),
}

/// The client, and how long any one call may take (REDIS_TIMEOUT).
pub struct Backend {
    pub client: Client,
    pub timeout: Option<std::time::Duration>,
}

macro_rules! on_client {
    ($client:expr, $swl:ident => $call:expr) => {
        match $client {
            Client::Single($swl, _) => $call,
            Client::Cluster($swl, _) => $call,
        }
    };
}

impl Backend {
    /// One call, given up after the timeout: then it may or may not have
    /// been carried out.
    async fn call(
        &self,
        kind: Call,
        key: &str,
        windows: &[(u64, u64)],
        options: Options,
    ) -> Result<Verdict, Error> {
        let call = self.call_untimed(kind, key, windows, options);
        match self.timeout {
            None => call.await,
            Some(timeout) => tokio::time::timeout(timeout, call)
                .await
                .unwrap_or_else(|_| {
                    let late = (redis::ErrorKind::IoError, "timed out (REDIS_TIMEOUT)");
                    Err(Error::UncertainOutcome(redis::RedisError::from(late)))
                }),
        }
    }

    /// Whether Redis answers a PING within the timeout.
    pub async fn ping(&self) -> bool {
        let ping = async {
            let command = redis::cmd("PING");
            match &self.client {
                Client::Single(_, connection) => {
                    command.query_async::<String>(&mut connection.clone()).await
                }
                Client::Cluster(_, connection) => {
                    command.query_async::<String>(&mut connection.clone()).await
                }
            }
        };
        let timeout = self.timeout.unwrap_or(std::time::Duration::from_secs(10));
        matches!(tokio::time::timeout(timeout, ping).await, Ok(Ok(_)))
    }

    async fn call_untimed(
        &self,
        kind: Call,
        key: &str,
        windows: &[(u64, u64)],
        options: Options,
    ) -> Result<Verdict, Error> {
        let Some((&(window_ms, limit), rest)) = windows.split_first() else {
            let none = (redis::ErrorKind::ClientError, "a limit without a window");
            return Err(Error::Redis(redis::RedisError::from(none)));
        };
        let options = options.windows(rest.iter().copied());
        on_client!(&self.client, swl => match kind {
            Call::Check => swl.check(key, window_ms, limit, &options).await,
            Call::Peek => swl.peek(key, window_ms, limit, &options).await,
            Call::Refund => swl.refund(key, window_ms, limit, &options).await,
        })
    }
}

#[derive(Clone, Copy)]
enum Call {
    Check,
    Peek,
    Refund,
}

/// A descriptor's result, for its status and statistics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    /// Every window had room for the hits.
    pub allowed: bool,
    /// The window the verdict describes (the binding one).
    pub window_ms: u64,
    pub limit: u64,
    pub remaining: u64,
    pub retry_after_ms: i64,
    pub reset_after_ms: i64,
    /// The units the log held in that window before the call, where the
    /// reply tells (not when it was at or past its limit).
    pub before: Option<u64>,
    /// What this call added to the log (to give back if the request is
    /// refused elsewhere).
    pub recorded: u64,
}

/// A call that failed, and what it had recorded before it did.
#[derive(Debug)]
pub struct Failure {
    pub error: Error,
    pub recorded: u64,
}

fn pairs(windows: &[Window], lowered_by: u64, raised_by: u64) -> Vec<(u64, u64)> {
    windows
        .iter()
        .map(|w| (w.window_ms, w.limit.saturating_sub(lowered_by) + raised_by))
        .collect()
}

/// Records `hits` on `key` if every window has room for them (or, with
/// `forced`, whether or not), and says how the windows stand. `hits` 0
/// checks without recording: over the limit only when a window holds more
/// than its limit, as the reference decides.
pub async fn apply(
    backend: &Backend,
    key: &str,
    windows: &[Window],
    hits: u64,
    forced: bool,
) -> Result<Outcome, Failure> {
    let failed = |recorded| move |error| Failure { error, recorded };
    let largest = windows.iter().map(|w| w.limit).max().unwrap_or(0);
    if hits == 0 {
        // A window holding at most its limit admits a unit more than it.
        let v = backend
            .call(Call::Peek, key, &pairs(windows, 0, 1), Options::new())
            .await
            .map_err(failed(0))?;
        let limit = v.limit.saturating_sub(1);
        return Ok(Outcome {
            limit,
            before: v.allowed.then(|| limit - v.remaining),
            ..outcome_of(&v, 0)
        });
    }
    if !forced && hits > largest {
        // Never fits: how the windows stand, and no wait helps.
        let status = status(backend, key, windows).await.map_err(failed(0))?;
        return Ok(Outcome {
            allowed: false,
            retry_after_ms: -1,
            ..status
        });
    }
    // Where forced, units past the largest limit change no decision: all
    // are at one time, so they leave together, and the largest limit plus
    // one keeps every window over until then.
    let to_record = if forced { hits.min(largest + 1) } else { hits };
    let first = to_record.min(MAX_COST);
    let rest = hits - first;
    let mut options = Options::new().cost(first);
    if forced {
        options = options.force();
    }
    let decided = backend
        .call(Call::Check, key, &pairs(windows, rest, 0), options)
        .await
        .map_err(failed(0))?;
    let recorded_first = if decided.allowed || forced { first } else { 0 };
    let mut recorded = recorded_first;
    let mut last = decided;
    while recorded_first > 0 && recorded < to_record {
        let chunk = (to_record - recorded).min(MAX_COST);
        last = backend
            .call(
                Call::Check,
                key,
                &pairs(windows, 0, 0),
                Options::new().cost(chunk).force(),
            )
            .await
            .map_err(failed(recorded))?;
        recorded += chunk;
    }
    // The first reply is of lowered limits unless nothing was lowered.
    let stood = if rest == 0 || recorded > first {
        outcome_of(&last, recorded)
    } else {
        status(backend, key, windows)
            .await
            .map_err(failed(recorded))?
    };
    Ok(Outcome {
        allowed: decided.allowed,
        retry_after_ms: if decided.allowed {
            -1
        } else {
            decided.retry_after_ms
        },
        before: if decided.allowed {
            stood
                .limit
                .checked_sub(stood.remaining)
                .and_then(|after| after.checked_sub(hits))
        } else if rest == 0 && decided.remaining > 0 && !forced {
            Some(decided.limit - decided.remaining)
        } else {
            None
        },
        recorded,
        ..stood
    })
}

fn outcome_of(v: &Verdict, recorded: u64) -> Outcome {
    Outcome {
        allowed: v.allowed,
        window_ms: v.window_ms,
        limit: v.limit,
        remaining: v.remaining,
        retry_after_ms: v.retry_after_ms,
        reset_after_ms: v.reset_after_ms,
        before: None,
        recorded,
    }
}

/// How the windows stand now: a peek of one unit, its pending unit taken
/// back out of `remaining`.
async fn status(backend: &Backend, key: &str, windows: &[Window]) -> Result<Outcome, Error> {
    let v = backend
        .call(Call::Peek, key, &pairs(windows, 0, 0), Options::new())
        .await?;
    let remaining = v.remaining + u64::from(v.allowed);
    Ok(Outcome {
        remaining,
        // Below its limit, the window's count is what is not left.
        before: v.allowed.then(|| v.limit - remaining),
        ..outcome_of(&v, 0)
    })
}

/// Gives back `units` recorded on `key` by a request refused elsewhere.
pub async fn give_back(
    backend: &Backend,
    key: &str,
    windows: &[Window],
    units: u64,
) -> Result<(), Error> {
    let mut left = units;
    while left > 0 {
        let chunk = left.min(MAX_COST);
        backend
            .call(
                Call::Refund,
                key,
                &pairs(windows, 0, 0),
                Options::new().cost(chunk),
            )
            .await?;
        left -= chunk;
    }
    Ok(())
}
