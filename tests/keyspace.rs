//! A check touches a key for WATCH and client-side caching only when it
//! changes it, and announces each change with the keyspace event of the
//! command it amounts to: on the master exactly as on a replica applying
//! the propagated commands.

mod support;

use std::time::Duration;

use redis::Connection;
use support::{for_each_encoding, start_replica, wait_for_replicas, Config, Encoding, Server};

/// Whether a transaction WATCHing `key` still commits after `meanwhile`
/// ran on another connection.
fn watch_survives(server: &Server, key: &str, meanwhile: &[&[&str]]) -> bool {
    let mut watcher = server.connect();
    let mut other = server.connect();
    let _: () = redis::cmd("WATCH").arg(key).query(&mut watcher).unwrap();
    for command in meanwhile {
        let _: redis::Value = redis::cmd(command[0])
            .arg(&command[1..])
            .query(&mut other)
            .unwrap();
    }
    let committed: Option<(i64,)> = redis::pipe()
        .atomic()
        .cmd("INCR")
        .arg("counter")
        .query(&mut watcher)
        .unwrap();
    committed.is_some()
}

#[test]
fn only_a_check_that_changes_the_key_aborts_a_watching_transaction() {
    for_each_encoding(|encoding| {
        let server = Server::with(encoding.config());
        let check: &[&str] = &["SWL.CHECK", "w", "60000", "1", "*"];
        assert!(!watch_survives(&server, "w", &[check]), "an admit writes");
        // With `*` a denial computes the expiry the admit set: nothing changes.
        assert!(watch_survives(&server, "w", &[check]), "a no-op denial");
        let peek: &[&str] = &["SWL.PEEK", "w", "60000", "1", "*"];
        assert!(watch_survives(&server, "w", &[peek]), "a peek");
        // A denial that must lengthen the expiry does change the key.
        let shorten: &[&str] = &["PEXPIRE", "w", "1000"];
        let _: () = redis::cmd(shorten[0])
            .arg(&shorten[1..])
            .query(&mut server.connect())
            .unwrap();
        assert!(
            !watch_survives(&server, "w", &[check]),
            "an extending denial"
        );
        let same_ms: &[&str] = &["SWL.CHECK", "x", "60000", "0", "5"];
        assert!(
            watch_survives(&server, "x", &[same_ms]),
            "a denial on no key"
        );
    });
}

/// Keyspace events (event, key) seen by a subscriber until the `SET` of
/// `end`, which the caller issues after the commands it watches.
fn events_until(subscriber: &mut Connection, end: &str) -> Vec<(String, String)> {
    let mut pubsub = subscriber.as_pubsub();
    pubsub
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut events = Vec::new();
    loop {
        let message = pubsub.get_message().expect("a keyspace event");
        let event = message
            .get_channel_name()
            .trim_start_matches("__keyevent@0__:")
            .to_string();
        let key: String = message.get_payload().unwrap();
        if event == "set" && key == end {
            return events;
        }
        events.push((event, key));
    }
}

fn subscribe(server: &Server) -> Connection {
    let mut con = server.connect();
    let _: () = redis::cmd("PSUBSCRIBE")
        .arg("__keyevent@0__:*")
        .query(&mut con)
        .unwrap();
    con
}

#[test]
fn keyspace_events_match_the_commands_propagated_to_replicas() {
    for_each_encoding(keyspace_events_in);
}

fn keyspace_events_in(encoding: Encoding) {
    let notify = |config: Config| config.arg("notify-keyspace-events", "EA");
    let master = Server::with(notify(encoding.config()));
    let replica = start_replica(&master, notify(Config::without_module()));
    let mut on_master = subscribe(&master);
    let mut on_replica = subscribe(&replica);
    let mut con = master.connect();
    let hundred: Vec<String> = (1..=100)
        .flat_map(|t| [t.to_string(), t.to_string()])
        .collect();
    let commands: Vec<Vec<String>> = [
        "SWL.CHECK ev 60000 2 *",
        "SWL.CHECK ev 60000 2 * COST 5",
        "SWL.PEEK ev 60000 2 *",
        "PEXPIRE ev 999999999",
        "SWL.CHECK ev 60000 1 * PENALIZE",
        "ZADD big",
        "SWL.CHECK big 10000000 1000 10000090",
        "SWL.CHECK big 10000000 1 30000000",
        "ZADD cap",
        "SWL.CHECK cap 10000000 5 100 PENALIZE",
        "SET end 1",
    ]
    .iter()
    .map(|line| {
        let mut words: Vec<String> = line.split(' ').map(String::from).collect();
        if words[0] == "ZADD" {
            words.extend(hundred.iter().cloned());
        }
        words
    })
    .collect();
    for words in &commands {
        let _: redis::Value = redis::cmd(&words[0])
            .arg(&words[1..])
            .query(&mut con)
            .unwrap();
    }
    wait_for_replicas(&mut con, 1);
    // `ev` is created by the module, in the encoding under test; `big` and
    // `cap` are sorted sets written by ZADD.
    let ev: &[(&str, &str)] = match encoding {
        Encoding::Zset => &[
            ("zadd", "ev"),
            ("expire", "ev"),
            ("expire", "ev"),
            // The penalty: the oldest dropped to make room (which empties
            // the log), one entry recorded, and the expiry the key had.
            ("zremrangebyrank", "ev"),
            ("del", "ev"),
            ("zadd", "ev"),
            ("expire", "ev"),
        ],
        // A new or small compact log goes whole, as one SET ... PXAT.
        Encoding::Compact | Encoding::Compact1 => &[
            ("set", "ev"),
            ("expire", "ev"),
            ("expire", "ev"),
            ("set", "ev"),
            ("expire", "ev"),
        ],
    };
    let expected: Vec<(String, String)> = ev
        .iter()
        .chain(&[
            ("zadd", "big"),
            // 90 entries trimmed in one command, then the admit.
            ("zremrangebyscore", "big"),
            ("zadd", "big"),
            ("expire", "big"),
            // Everything left the window: the log is deleted, then started anew.
            ("del", "big"),
            ("zadd", "big"),
            ("expire", "big"),
            ("zadd", "cap"),
            // A penalty capping 100 entries to 4 in one command, to record
            // a fifth.
            ("zremrangebyrank", "cap"),
            ("zadd", "cap"),
            ("expire", "cap"),
        ])
        .map(|(event, key)| (event.to_string(), key.to_string()))
        .collect();
    // A log large enough to be changed in place (SETRANGE) when compact:
    // grown one entry at a time, trimmed, given back, capped and emptied.
    // Windows are long, so that nothing expires during the test.
    for t in 0..300u64 {
        let now = (1000 + t).to_string();
        support::check(&mut con, "large", &["10000000", "1000", &now]);
    }
    let steps: [(&str, &[&str]); 7] = [
        ("SWL.CHECK", &["10000000", "1000", "10001100", "COST", "2"]),
        ("SWL.REFUND", &["10000000", "1000", "10001100"]),
        ("SWL.CHECK", &["10000000", "5", "10001100", "COST", "9"]),
        (
            "SWL.REFUND",
            &["10000000", "1000", "10001100", "COST", "100"],
        ),
        ("SWL.CHECK", &["10000000", "5", "10001100", "PENALIZE"]),
        ("SWL.REFUND", &["10000000", "5", "10001100", "COST", "2"]),
        ("SWL.CHECK", &["10000000", "5", "100000000"]),
    ];
    for (command, args) in steps {
        let _: Vec<i64> = redis::cmd(command)
            .arg("large")
            .arg(args)
            .query(&mut con)
            .unwrap();
    }
    let refunded: Vec<i64> = redis::cmd("SWL.REFUND")
        .arg(&["large", "10000000", "5", "100000000", "COST", "5"])
        .query(&mut con)
        .unwrap();
    assert_eq!(refunded[0], 1);
    let _: () = redis::cmd("SET")
        .arg("end2")
        .arg("1")
        .query(&mut con)
        .unwrap();
    wait_for_replicas(&mut con, 1);
    let end = ("set".to_string(), "end".to_string());
    let on_master = events_until(&mut on_master, "end2");
    let on_replica = events_until(&mut on_replica, "end2");
    let at_end = on_master.iter().position(|event| *event == end);
    let (first, second) = on_master.split_at(at_end.expect("the end of the first part"));
    assert_eq!(first, expected, "on the master");
    assert!(second.len() > 300, "{}", second.len());
    assert_eq!(on_replica, on_master, "on the replica");
}

/// A forced request is recorded whether or not it fits: it aborts a
/// transaction WATCHing its key, and is announced and replicated as an
/// admit that records into a log with entries.
#[test]
fn a_forced_denial_is_watched_announced_and_replicated_as_an_admit() {
    for_each_encoding(|encoding| {
        let notify = |config: Config| config.arg("notify-keyspace-events", "EA");
        let master = Server::with(notify(encoding.config()));
        let replica = start_replica(&master, notify(Config::without_module()));
        let mut con = master.connect();
        for key in ["admitted", "forced"] {
            support::check(&mut con, key, &["60000", "2", "1000000"]);
        }
        // The calls below set each key's expiry a window from the server's
        // clock, as these did: in the same millisecond that changes
        // nothing, and no "expire" is announced. The clock is past it.
        let checked_at = support::server_ms(&mut con);
        while support::server_ms(&mut con) <= checked_at {}
        wait_for_replicas(&mut con, 1);
        let mut on_master = subscribe(&master);
        let mut on_replica = subscribe(&replica);
        let admit: &[&str] = &["SWL.CHECK", "admitted", "60000", "2", "1000100"];
        assert!(!watch_survives(&master, "admitted", &[admit]), "an admit");
        let forced: &[&str] = &["SWL.CHECK", "forced", "60000", "1", "1000100", "FORCE"];
        assert!(
            !watch_survives(&master, "forced", &[forced]),
            "a forced denial"
        );
        let _: () = redis::cmd("SET").arg("end").arg(1).query(&mut con).unwrap();
        wait_for_replicas(&mut con, 1);
        let on_master = events_until(&mut on_master, "end");
        let of = |events: &[(String, String)], key: &str| -> Vec<String> {
            let on_key = events.iter().filter(|(_, k)| k == key);
            on_key.map(|(event, _)| event.clone()).collect()
        };
        let admitted = of(&on_master, "admitted");
        assert!(!admitted.is_empty());
        assert_eq!(of(&on_master, "forced"), admitted);
        assert_eq!(events_until(&mut on_replica, "end"), on_master);
        let mut on_replica = replica.connect();
        for key in [&b"admitted"[..], b"forced"] {
            assert_eq!(
                support::contents(&mut on_replica, key),
                support::contents(&mut con, key)
            );
            let expiry = support::expire_time(&mut con, key);
            assert!(expiry > 0);
            assert_eq!(support::expire_time(&mut on_replica, key), expiry);
        }
        assert_eq!(support::contents(&mut con, b"forced").len(), 2);
    });
}
