//! Redis Cluster: the command is routed by its key, hash tags keep logs
//! together, and a log moved to another node by a slot migration keeps
//! working there.

mod support;

use support::{contents, expire_time, for_each_encoding, key_slot, node_id, Cluster, Server};

fn check_on(con: &mut impl redis::ConnectionLike, key: &str, args: &[&str]) -> Vec<i64> {
    redis::cmd("SWL.CHECK")
        .arg(key)
        .arg(args)
        .query(con)
        .unwrap_or_else(|e| panic!("{key}: {e}"))
}

/// The nodes (by port) whose own keyspace holds `key`. KEYS answers from
/// the node's own data, without redirection.
fn nodes_holding(cluster: &Cluster, key: &str) -> Vec<u16> {
    cluster
        .nodes
        .iter()
        .filter(|node| {
            let local: Vec<String> = redis::cmd("KEYS")
                .arg("*")
                .query(&mut node.connect())
                .unwrap();
            local.iter().any(|k| k == key)
        })
        .map(Server::port)
        .collect()
}

#[test]
fn cluster_routes_checks_by_key_and_keeps_logs_through_a_migration() {
    for_each_encoding(|encoding| {
        let cluster = Cluster::start_in(encoding, 3);
        let mut con = cluster.client();

        // Keys spread over all slots, each checked to its limit and beyond.
        let keys: Vec<String> = (0..300).map(|i| format!("rl:user:{i}")).collect();
        for key in &keys {
            for (t, remaining) in [("1000", 1), ("1001", 0)] {
                assert_eq!(
                    check_on(&mut con, key, &["60000", "2", t]),
                    [1, 2, remaining, -1, 60000, 60000]
                );
            }
            assert_eq!(
                check_on(&mut con, key, &["60000", "2", "1002"]),
                [0, 2, 0, 59998, 59999, 60000]
            );
        }
        let mut spread = [0usize; 3];
        for key in &keys {
            let owners = nodes_holding(&cluster, key);
            assert_eq!(owners.len(), 1, "{key} lives on exactly one node");
            let index = cluster
                .nodes
                .iter()
                .position(|n| n.port() == owners[0])
                .unwrap();
            spread[index] += 1;
        }
        assert!(
            spread.iter().all(|&n| n > 50),
            "keys on every node: {spread:?}"
        );

        // Keys with the same hash tag share a slot and a node.
        let tagged = ["{tenant:42}:api", "{tenant:42}:login", "{tenant:42}:upload"];
        for key in tagged {
            check_on(&mut con, key, &["1000", "5", "*"]);
        }
        let mut any = cluster.nodes[0].connect();
        let slot = key_slot(&mut any, tagged[0]);
        let owner = cluster.owner_of(slot).port();
        for key in tagged {
            assert_eq!(key_slot(&mut any, key), slot);
            assert_eq!(nodes_holding(&cluster, key), [owner]);
        }

        // Move one log's slot to another node with MIGRATE.
        let key = keys[0].as_str();
        let slot = key_slot(&mut any, key);
        let source = cluster.owner_of(slot);
        let target = cluster
            .nodes
            .iter()
            .find(|n| n.port() != source.port())
            .unwrap();
        let (source_id, target_id) = (node_id(source), node_id(target));
        let mut source_con = source.connect();
        let before = (
            contents(&mut source_con, key.as_bytes()),
            expire_time(&mut source_con, key.as_bytes()),
        );
        let mut target_con = target.connect();
        let ok = |con: &mut redis::Connection, args: &[&str]| {
            let _: String = redis::cmd("CLUSTER").arg(args).query(con).unwrap();
        };
        let slot_text = slot.to_string();
        ok(
            &mut target_con,
            &["SETSLOT", &slot_text, "IMPORTING", &source_id],
        );
        ok(
            &mut source_con,
            &["SETSLOT", &slot_text, "MIGRATING", &target_id],
        );
        let moved: String = redis::cmd("MIGRATE")
            .arg("127.0.0.1")
            .arg(target.port())
            .arg(key)
            .arg(0)
            .arg(5000)
            .query(&mut source_con)
            .unwrap();
        assert_eq!(moved, "OK");
        for node in &cluster.nodes {
            ok(
                &mut node.connect(),
                &["SETSLOT", &slot_text, "NODE", &target_id],
            );
        }
        cluster.wait_until_ok();

        assert_eq!(nodes_holding(&cluster, key), [target.port()]);
        let (log, expiry) = (
            contents(&mut target_con, key.as_bytes()),
            expire_time(&mut target_con, key.as_bytes()),
        );
        assert_eq!(log, before.0);
        // MIGRATE carries the TTL relative to each server's clock.
        assert!(
            (0..=1000).contains(&(expiry - before.1)),
            "expiry {} then {expiry}",
            before.1
        );
        // The same client follows the MOVED redirection and the log still counts.
        assert_eq!(
            check_on(&mut con, key, &["60000", "2", "1003"]),
            [0, 2, 0, 59997, 59998, 60000]
        );
        assert_eq!(
            check_on(&mut con, key, &["60000", "2", "61000"]),
            [1, 2, 0, -1, 60000, 60000]
        );
        assert_eq!(contents(&mut target_con, key.as_bytes()).len(), 2);
    });
}
