//! A check or refund is never sent twice, and never taken for certain when
//! no reply came. Each test stalls a real server (DEBUG SLEEP 0.6) while a
//! connection with a 200 ms response timeout and redis-rs's default
//! reconnection settings sends, and reads the log: a call that completed is
//! recorded once, one that timed out at most once, and failed with
//! `Error::UncertainOutcome`.

mod common;

use std::time::Duration;

use common::{entries, Server, Stall, DEBUG};
use redis::aio::{ConnectionLike, ConnectionManagerConfig};
use redis::AsyncConnectionConfig;
use redis_swl_client::{Encoding, Error, Options, Swl, Verdict};

const T: u64 = 1_700_000_000_000;
const TIMEOUT: Duration = Duration::from_millis(200);

fn debug_args() -> Vec<String> {
    DEBUG.iter().map(|s| s.to_string()).collect()
}

/// `actual` is one of `options`.
fn one_of(actual: &[i64], options: &[&[i64]]) {
    assert!(
        options.contains(&actual),
        "{actual:?} is none of {options:?}"
    );
}

fn uncertain(result: Result<Verdict, Error>) {
    match result {
        Err(error @ Error::UncertainOutcome(_)) => {
            assert!(error.redis_error().is_timeout(), "{error}");
            assert!(
                error
                    .to_string()
                    .starts_with("no reply, the command may or may not have been carried out: "),
                "{error}"
            );
        }
        other => panic!("not an uncertain outcome: {other:?}"),
    }
}

/// Checks and a refund on one key, two of them while `node` is stalled.
/// Each stall finds the connection open.
async fn session<C>(swl: &Swl<C>, node: &Server, module: bool, key: &str)
where
    C: ConnectionLike + Clone + Send + Sync,
{
    let t = T as i64;
    let at = |ms: u64| Options::new().now_ms(T + ms);
    // A completed check, recorded once (it also loads the library where the
    // server has no module).
    let first = swl.check(key, 60_000, 10, &at(0).cost(3)).await.unwrap();
    assert_eq!(
        Some(first),
        Verdict::from_reply(&[1, 10, 7, -1, 60_000, 60_000])
    );
    assert_eq!(entries(node, module, key), [t, t, t]);

    let stall = Stall::start(node.port, 0.6);
    uncertain(swl.check(key, 60_000, 10, &at(1)).await);
    stall.wait();
    let after_check = entries(node, module, key);
    one_of(&after_check, &[&[t, t, t], &[t, t, t, t + 1]]);

    // The connection goes on.
    let verdict = swl.check(key, 60_000, 10, &at(2)).await.unwrap();
    let remaining = 10 - after_check.len() as i64 - 1;
    assert_eq!(
        Some(verdict),
        Verdict::from_reply(&[1, 10, remaining, -1, 60_000, 60_000])
    );
    let mut before_refund = after_check.clone();
    before_refund.push(t + 2);
    assert_eq!(entries(node, module, key), before_refund);

    let stall = Stall::start(node.port, 0.6);
    uncertain(swl.refund(key, 60_000, 10, &at(3)).await);
    stall.wait();
    one_of(
        &entries(node, module, key),
        &[&before_refund, &before_refund[..before_refund.len() - 1]],
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_manager_sends_a_check_or_refund_once() {
    for module in [true, false] {
        let server = Server::with_args(module, Encoding::Zset, &debug_args());
        let client = redis::Client::open(server.url()).unwrap();
        let config = ConnectionManagerConfig::new().set_response_timeout(TIMEOUT);
        let manager = client
            .get_connection_manager_with_config(config)
            .await
            .unwrap();
        session(&Swl::new(manager), &server, module, "manager").await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multiplexed_connection_sends_a_check_or_refund_once() {
    for module in [true, false] {
        let server = Server::with_args(module, Encoding::Zset, &debug_args());
        let client = redis::Client::open(server.url()).unwrap();
        let config = AsyncConnectionConfig::new().set_response_timeout(TIMEOUT);
        let connection = client
            .get_multiplexed_async_connection_with_config(&config)
            .await
            .unwrap();
        session(&Swl::new(connection), &server, module, "multiplexed").await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peek_that_times_out_is_no_uncertain_outcome() {
    let server = Server::with_args(true, Encoding::Zset, &debug_args());
    let client = redis::Client::open(server.url()).unwrap();
    let config = AsyncConnectionConfig::new().set_response_timeout(TIMEOUT);
    let swl = Swl::new(
        client
            .get_multiplexed_async_connection_with_config(&config)
            .await
            .unwrap(),
    );
    let stall = Stall::start(server.port, 0.6);
    match swl.peek("k", 60_000, 10, &Options::new()).await {
        Err(Error::Redis(error)) => assert!(error.is_timeout(), "{error}"),
        other => panic!("not a plain timeout: {other:?}"),
    }
    stall.wait();
}

/// The cluster connection, built without retries as the client's docs ask
/// (with its default of 16 it sends a command again after a timeout).
#[cfg(feature = "cluster")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_connection_without_retries_sends_a_check_or_refund_once() {
    let cluster = common::Cluster::with_args(true, Encoding::Zset, &DEBUG);
    let connection = redis::cluster::ClusterClient::builder(cluster.urls())
        .response_timeout(TIMEOUT)
        .retries(0)
        .build()
        .unwrap()
        .get_async_connection()
        .await
        .unwrap();
    let swl = Swl::new(connection);
    session(&swl, cluster.serving("cluster"), true, "cluster").await;
}
