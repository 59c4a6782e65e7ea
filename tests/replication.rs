//! A replica, with or without the module, holds exactly the master's
//! entries (members and scores) and the same absolute expiry.

mod support;

use redis::Connection;
use support::{check, entries, expire_time, start_replica, wait_for_replicas, Config, Server};

fn keys(con: &mut Connection) -> Vec<Vec<u8>> {
    let mut keys: Vec<Vec<u8>> = redis::cmd("KEYS").arg("*").query(con).unwrap();
    keys.sort();
    keys
}

/// Every key's entries and absolute expiry, in key order.
type State = Vec<(Vec<u8>, Vec<(Vec<u8>, f64)>, i64)>;

fn state(con: &mut Connection) -> State {
    keys(con)
        .into_iter()
        .map(|key| {
            let log = entries(con, &key);
            let expiry = expire_time(con, &key);
            (key, log, expiry)
        })
        .collect()
}

#[test]
fn replicas_hold_exactly_the_masters_entries_and_expiry() {
    let master = Server::start();
    let with_module = start_replica(&master, Config::default());
    let without_module = start_replica(&master, Config::without_module());
    let mut con = master.connect();

    let mut outcomes = [0usize; 2];
    for i in 0..900u64 {
        let key = format!("user:{}", i % 7);
        let reply = match i % 6 {
            // The server clock: replicas must get the master's time.
            0 => check(&mut con, &key, &["50", "3", "*"]),
            1 => check(&mut con, &key, &["100000", "40", "*", "COST", "2"]),
            // Explicit times, moving forward so old entries are trimmed.
            2 => check(&mut con, &key, &["30", "2", &(1000 + i * 5).to_string()]),
            // Same millisecond, several at once.
            3 => check(
                &mut con,
                &key,
                &["1000", "4", &(1000 + i).to_string(), "COST", "3"],
            ),
            // Penalized denials cap the log by rank.
            4 => check(
                &mut con,
                &key,
                &["20", "1", "*", "WINDOW", "200", "3", "PENALIZE"],
            ),
            _ => check(
                &mut con,
                &key,
                &["10", "2", &(1000 + i * 5).to_string(), "WINDOW", "100", "5"],
            ),
        };
        outcomes[reply[0] as usize] += 1;
    }
    assert!(
        outcomes[0] > 50 && outcomes[1] > 50,
        "a mix of admits and denials: {outcomes:?}"
    );

    wait_for_replicas(&mut con, 2);
    let expected = state(&mut con);
    assert!(!expected.is_empty());
    assert_eq!(state(&mut with_module.connect()), expected);
    assert_eq!(state(&mut without_module.connect()), expected);
}

#[test]
fn a_trim_that_empties_the_log_deletes_the_key_on_replicas() {
    let master = Server::start();
    let replica = start_replica(&master, Config::without_module());
    let mut con = master.connect();
    check(&mut con, "gone", &["1000", "2", "1000"]);
    check(&mut con, "gone", &["1000", "2", "5000", "COST", "3"]);
    wait_for_replicas(&mut con, 1);
    assert_eq!(keys(&mut replica.connect()), Vec::<Vec<u8>>::new());
}
