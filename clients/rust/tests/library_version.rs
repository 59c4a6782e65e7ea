//! Which library a client leaves loaded: it asks each node for its
//! library's release (`FCALL_RO swl_version 0`) before it loads or replaces
//! it there, never replaces one newer than its own copy, and replaces an
//! older one (or one from before 0.4, without swl_version) on request or
//! where it lacks a function; on a cluster, primary by primary.

mod common;

use common::{calls, Server};
use redis_swl_client::{library_source, Encoding, Options, Swl};

const OWN: &str = env!("CARGO_PKG_VERSION");

/// The packaged library, saying it is `version`.
fn library_of(version: &str) -> String {
    let line = format!("\nlocal VERSION = '{OWN}'\n");
    let source = library_source(Encoding::Compact);
    assert!(source.contains(&line), "the library is {OWN}");
    source.replacen(&line, &format!("\nlocal VERSION = '{version}'\n"), 1)
}

/// `source` without swl_version, as a library from before 0.4.
fn without_swl_version(source: &str) -> String {
    let start = source
        .find("\nredis.register_function { function_name = 'swl_version'")
        .expect("swl_version is registered");
    let end = source[start + 1..].find('\n').expect("its line ends") + start + 1;
    format!("{}{}", &source[..start], &source[end..])
}

fn load(server: &Server, source: &str) {
    let _: String = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg(source)
        .query(&mut server.connect())
        .unwrap();
}

fn loaded_code(server: &Server) -> String {
    let libraries: Vec<redis::Value> = redis::cmd("FUNCTION")
        .arg("LIST")
        .arg("WITHCODE")
        .arg("LIBRARYNAME")
        .arg("swl")
        .query(&mut server.connect())
        .unwrap();
    let [redis::Value::Array(fields)] = &libraries[..] else {
        panic!("one library: {libraries:?}");
    };
    let at = fields
        .iter()
        .position(|field| *field == redis::Value::BulkString(b"library_code".to_vec()))
        .expect("its code");
    redis::from_redis_value(&fields[at + 1]).unwrap()
}

fn loaded_version(server: &Server) -> redis::RedisResult<String> {
    redis::cmd("FCALL_RO")
        .arg("swl_version")
        .arg(0)
        .query(&mut server.connect())
}

async fn client(server: &Server) -> Swl<redis::aio::MultiplexedConnection> {
    let client = redis::Client::open(server.url()).unwrap();
    Swl::new(client.get_multiplexed_async_connection().await.unwrap())
}

/// A server (no module) with `code` loaded as its library, a client of
/// it, and the client's first check, which uses that library as it is,
/// as any library loaded already.
async fn serving(code: &str) -> (Server, Swl<redis::aio::MultiplexedConnection>) {
    let server = Server::start(false, Encoding::Compact);
    load(&server, code);
    let swl = client(&server).await;
    assert!(
        swl.check("k", 1000, 3, &Options::new())
            .await
            .unwrap()
            .allowed
    );
    (server, swl)
}

#[tokio::test]
async fn a_newer_library_is_never_replaced() {
    let newer = library_of("9.9.9");
    let (server, swl) = serving(&newer).await;
    swl.load_library(false).await.unwrap();
    swl.load_library(true).await.unwrap();
    // Asked each time (and once by the first check's probe, which found
    // no module), and nothing loaded but the test's own.
    assert_eq!(calls(&server, "fcall_ro"), 3);
    assert_eq!(calls(&server, "function|load"), 1);
    assert_eq!(loaded_code(&server), newer);
    assert_eq!(loaded_version(&server).unwrap(), "9.9.9");
    let verdict = swl.check("k", 1000, 3, &Options::new()).await.unwrap();
    assert_eq!(verdict.remaining, 1);
}

#[tokio::test]
async fn a_newer_library_without_a_function_is_kept_too() {
    // A client replaces a library that lacks a function it calls, unless
    // the library is newer than its own: the call fails instead.
    let newer = library_of("9.9.9").replace("'swl_peek'", "'swl_peek_renamed'");
    let (server, swl) = serving(&newer).await;
    let error = swl.peek("k", 1000, 3, &Options::new()).await.unwrap_err();
    assert!(
        error
            .to_string()
            .to_lowercase()
            .contains("function not found"),
        "{error}"
    );
    assert_eq!(loaded_code(&server), newer);
}

#[tokio::test]
async fn an_older_library_is_used_and_replaced_on_request() {
    for (older, answer) in [
        (library_of("0.0.1"), Some("0.0.1")),
        (without_swl_version(&library_of("0.3.0")), None),
    ] {
        let (server, swl) = serving(&older).await;
        swl.load_library(false).await.unwrap();
        assert_eq!(loaded_code(&server), older);
        assert_eq!(loaded_version(&server).ok().as_deref(), answer);
        // Replaced on request, as after an upgrade.
        swl.load_library(true).await.unwrap();
        assert_eq!(loaded_code(&server), library_source(Encoding::Compact));
        assert_eq!(loaded_version(&server).unwrap(), OWN);
    }
}

#[tokio::test]
async fn an_older_library_without_a_function_is_replaced() {
    let server = Server::start(false, Encoding::Compact);
    let older = without_swl_version(&library_of("0.2.0")).replace("'swl_peek'", "'swl_peek_old'");
    load(&server, &older);
    let swl = client(&server).await;
    assert!(
        swl.peek("k", 1000, 3, &Options::new())
            .await
            .unwrap()
            .allowed
    );
    assert_eq!(loaded_version(&server).unwrap(), OWN);
}

#[cfg(feature = "cluster")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_primary_of_a_cluster_is_asked_on_its_own() {
    let cluster = common::Cluster::start(false, Encoding::Compact);
    let newer = library_of("9.9.9");
    load(&cluster.nodes[0], &newer);
    load(&cluster.nodes[1], &library_of("0.0.1"));
    let connection = redis::cluster::ClusterClient::new(cluster.urls())
        .unwrap()
        .get_async_connection()
        .await
        .unwrap();
    let swl = Swl::new(connection);
    let versions = || {
        cluster
            .nodes
            .iter()
            .map(|node| loaded_version(node).unwrap())
            .collect::<Vec<_>>()
    };
    // Loaded where it is missing; the others left as they are.
    swl.load_library(false).await.unwrap();
    assert_eq!(versions(), ["9.9.9", "0.0.1", OWN]);
    // The older one replaced, the newer one kept.
    swl.load_library(true).await.unwrap();
    assert_eq!(versions(), ["9.9.9", OWN, OWN]);
    assert_eq!(loaded_code(&cluster.nodes[0]), newer);
    // Checks go to each node's library, the newer one included.
    let mut nodes = std::collections::BTreeSet::new();
    for user in 0..12 {
        let key = format!("rl:user{user}");
        assert!(
            swl.check(&key, 1000, 1, &Options::new())
                .await
                .unwrap()
                .allowed
        );
        assert!(
            !swl.check(&key, 1000, 1, &Options::new())
                .await
                .unwrap()
                .allowed
        );
        nodes.insert(cluster.owner(&key).port);
    }
    assert_eq!(nodes.len(), 3);
}
