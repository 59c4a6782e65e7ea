//! The client's denial cache against real servers, with the module and
//! through the function library: a denied key is answered in the process
//! until its wait ends, without a command; PENALIZE and a caller's time go
//! to Redis as they would without the cache; a refund or a reset through
//! the same client lets the next check in.

mod common;

use std::time::{Duration, Instant};

use common::{calls, entries, Server};
use redis_swl_client::{DenialCache, Encoding, Options, Swl, Verdict};

type Client = Swl<redis::aio::MultiplexedConnection>;

async fn clients(server: &Server) -> (Client, Client) {
    let client = redis::Client::open(server.url()).unwrap();
    let connection = client.get_multiplexed_async_connection().await.unwrap();
    let cached = Swl::new(connection.clone()).with_denial_cache(DenialCache::new(100));
    (cached, Swl::new(connection))
}

/// Whole milliseconds from `earlier` to `later` (0 if it is not later).
fn ms_between(earlier: Instant, later: Instant) -> i64 {
    i64::try_from(later.saturating_duration_since(earlier).as_millis()).unwrap_or(i64::MAX)
}

/// The command a check is: SWL.CHECK, or FCALL through the library.
fn check_command(module: bool) -> &'static str {
    if module {
        "swl.check"
    } else {
        "fcall"
    }
}

/// The window of the denial the cache answers: long enough that a busy
/// machine's round trips leave most of its wait.
const WINDOW_MS: u64 = 2_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denial_is_answered_without_a_command_until_its_wait_ends() {
    for module in [true, false] {
        let server = Server::start(module, Encoding::Compact);
        let (swl, _) = clients(&server).await;
        let options = Options::new();
        for _ in 0..2 {
            assert!(
                swl.check("k", WINDOW_MS, 2, &options)
                    .await
                    .unwrap()
                    .allowed
            );
        }
        // The cache counts a wait from when its call was sent, somewhere
        // between these two instants; each cached answer is worked out
        // between the two around its own call.
        let sent_before = Instant::now();
        let denied = swl.check("k", WINDOW_MS, 2, &options).await.unwrap();
        let replied = Instant::now();
        // (Most of the window is left for the cached answers below, even
        // where the checks before took long.)
        assert!(
            !denied.allowed && denied.retry_after_ms > WINDOW_MS as i64 / 2,
            "{denied:?}"
        );
        let sent = calls(&server, check_command(module));
        let mut last = denied;
        for _ in 0..20 {
            tokio::time::sleep(Duration::from_millis(5)).await;
            let asked = Instant::now();
            let cached = swl.check("k", WINDOW_MS, 2, &options).await.unwrap();
            let answered = Instant::now();
            let (least, most) = (
                ms_between(replied, asked),
                ms_between(sent_before, answered),
            );
            if most >= denied.retry_after_ms - 10 {
                break; // a slow machine: the wait may be over
            }
            assert_eq!(
                cached,
                Verdict {
                    retry_after_ms: cached.retry_after_ms,
                    reset_after_ms: cached.reset_after_ms,
                    ..denied
                }
            );
            assert!(cached.retry_after_ms < last.retry_after_ms);
            // The wait left is rounded up to whole milliseconds, so the
            // time waited is rounded down, as these bounds are.
            let waited = denied.retry_after_ms - cached.retry_after_ms;
            assert!(
                least <= waited && waited <= most,
                "{waited} ms waited, {least} to {most} ms passed"
            );
            assert_eq!(
                denied.reset_after_ms - cached.reset_after_ms,
                denied.retry_after_ms - cached.retry_after_ms
            );
            // A larger cost is denied too; a smaller one is Redis's to say.
            let heavier = swl.check("k", WINDOW_MS, 2, &options.clone().cost(2)).await;
            assert!(!heavier.unwrap().allowed);
            last = cached;
        }
        assert_eq!(
            calls(&server, check_command(module)),
            sent,
            "module {module}"
        );
        tokio::time::sleep(Duration::from_millis(denied.retry_after_ms as u64)).await;
        let after = swl.check("k", WINDOW_MS, 2, &options).await.unwrap();
        assert!(after.allowed, "{after:?}");
        assert_eq!(calls(&server, check_command(module)), sent + 1);
    }
}

/// PENALIZE records denied requests, and a caller's time may be any
/// clock's: both go to Redis and reply exactly what a client without the
/// cache gets.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn penalize_and_a_callers_time_are_answered_as_without_the_cache() {
    for module in [true, false] {
        let server = Server::start(module, Encoding::Compact);
        let (cached, plain) = clients(&server).await;
        // Times of the caller's, near the server's clock (this machine's).
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        let mut runs = Vec::new();
        for (swl, key) in [(&cached, "cached"), (&plain, "plain")] {
            let mut seen = Vec::new();
            let server = &server;
            let check = |options: Options| async move {
                let verdict = swl.check(key, 60_000, 1, &options).await.unwrap();
                (verdict.allowed, verdict.retry_after_ms > 0)
            };
            seen.push(check(Options::new().now_ms(t)).await);
            // A denial on the server's clock, which the cache keeps...
            seen.push(check(Options::new()).await);
            let sent = calls(server, check_command(module));
            // ...then calls the cache must leave to Redis.
            seen.push(check(Options::new().penalize()).await);
            seen.push(check(Options::new().penalize()).await);
            seen.push(check(Options::new().now_ms(t + 30_000)).await);
            seen.push(check(Options::new().now_ms(t + 200_000)).await);
            seen.push(check(Options::new().now_ms(t + 200_001).penalize()).await);
            seen.push(check(Options::new().now_ms(t + 200_002)).await);
            assert_eq!(calls(server, check_command(module)), sent + 6, "{key}");
            runs.push((seen, entries(server, module, key)));
        }
        assert_eq!(runs[0], runs[1], "module {module}");
        let (seen, _) = &runs[0];
        let denied = (false, true);
        assert_eq!(seen[1..5], [denied; 4]);
        assert_eq!(seen[5], (true, false));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refund_or_a_reset_through_the_client_lets_the_next_check_in() {
    for module in [true, false] {
        let server = Server::start(module, Encoding::Compact);
        let (swl, _) = clients(&server).await;
        let options = Options::new();
        assert!(swl.check("k", 60_000, 1, &options).await.unwrap().allowed);
        for _ in 0..2 {
            assert!(!swl.check("k", 60_000, 1, &options).await.unwrap().allowed);
        }
        swl.refund("k", 60_000, 1, &options).await.unwrap();
        assert!(swl.check("k", 60_000, 1, &options).await.unwrap().allowed);
        assert!(!swl.check("k", 60_000, 1, &options).await.unwrap().allowed);
        swl.reset("k").await.unwrap();
        assert!(entries(&server, module, "k").is_empty());
        assert!(swl.check("k", 60_000, 1, &options).await.unwrap().allowed);
        // A delete made elsewhere is not seen until told.
        assert!(!swl.check("k", 60_000, 1, &options).await.unwrap().allowed);
        let _: i64 = redis::cmd("DEL")
            .arg("k")
            .query(&mut server.connect())
            .unwrap();
        assert!(!swl.check("k", 60_000, 1, &options).await.unwrap().allowed);
    }
}
