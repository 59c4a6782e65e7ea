//! The client over redis-rs's async cluster connection, on a real
//! three-node Redis Cluster with the module and without it (the library,
//! which the client loads on every primary), both encodings.
#![cfg(feature = "cluster")]

mod common;

use common::{entries, log_kind, Cluster, ENCODINGS};
use redis_swl_client::{Options, Swl, Verdict};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_client_is_limited_on_its_own_node() {
    for module in [true, false] {
        for encoding in ENCODINGS {
            let cluster = Cluster::start(module, encoding);
            let connection = redis::cluster::ClusterClient::new(cluster.urls())
                .unwrap()
                .get_async_connection()
                .await
                .unwrap();
            let swl = Swl::new(connection).with_encoding(encoding);
            let mut nodes = std::collections::BTreeSet::new();
            for user in 0..12 {
                let key = format!("rl:user{user}");
                let mut seen = Vec::new();
                for _ in 0..3 {
                    seen.push(
                        swl.check(&key, 60_000, 2, &Options::new())
                            .await
                            .unwrap()
                            .allowed,
                    );
                }
                let refunded = swl.refund(&key, 60_000, 2, &Options::new()).await.unwrap();
                assert_eq!(seen, [true, true, false], "{key}");
                assert_eq!((refunded.allowed, refunded.remaining), (true, 0), "{key}");
                let peeked = swl.peek(&key, 60_000, 2, &Options::new()).await.unwrap();
                assert_eq!(
                    Some(peeked),
                    Verdict::from_reply(&[1, 2, 0, -1, peeked.reset_after_ms, 60_000])
                );
                let owner = cluster.owner(&key);
                assert_eq!(entries(owner, module, &key).len(), 1, "{key}");
                assert_eq!(log_kind(owner, &key), encoding.name(), "{key}");
                nodes.insert(owner.port);
            }
            assert_eq!(nodes.len(), 3, "the clients spread over every node");
            assert_eq!(swl.uses_library(), !module);
            for node in &cluster.nodes {
                let libraries: Vec<redis::Value> = redis::cmd("FUNCTION")
                    .arg("LIST")
                    .arg("LIBRARYNAME")
                    .arg("swl")
                    .query(&mut node.connect())
                    .unwrap();
                assert_eq!(libraries.len(), usize::from(!module), "node {}", node.port);
            }
        }
    }
}
