//! A replica, with or without the module, holds exactly the master's log
//! (a sorted set's members and scores, a compact log's bytes) and the same
//! absolute expiry, after checks and refunds.

mod support;

use redis::Connection;
use support::{
    check, contents, expire_time, first_five, for_each_encoding, load_library, scores, server_ms,
    start_replica, wait_for_replicas, Config, Contents, Encoding, Server, NEVER_MS,
};

fn keys(con: &mut Connection) -> Vec<Vec<u8>> {
    let mut keys: Vec<Vec<u8>> = redis::cmd("KEYS").arg("*").query(con).unwrap();
    keys.sort();
    keys
}

/// Every key's entries and absolute expiry, in key order.
type State = Vec<(Vec<u8>, Contents, i64)>;

fn state(con: &mut Connection) -> State {
    keys(con)
        .into_iter()
        .map(|key| {
            let log = contents(con, &key);
            let expiry = expire_time(con, &key);
            (key, log, expiry)
        })
        .collect()
}

fn info_stat(con: &mut Connection, name: &str) -> i64 {
    let info: String = redis::cmd("INFO").arg("stats").query(con).unwrap();
    info.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in INFO stats"))
}

/// Waits until the master has deleted every `short:` log (they expire
/// within a second of their last check): DBSIZE counts keys still held,
/// expired or not, so this waits for the deletions replicas receive too.
fn wait_for_short_logs_to_expire(con: &mut Connection, long_logs: i64) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let held: i64 = redis::cmd("DBSIZE").query(con).unwrap();
        if held == long_logs {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "short logs never expired: {held} keys"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// SWL.CHECK or SWL.REFUND (`command`: "check" or "refund"), or FCALL
/// swl_check or swl_refund through the function library: the first five
/// integers of the reply (the sixth is checked).
fn call_through(
    con: &mut Connection,
    library: bool,
    command: &str,
    key: &str,
    args: &[&str],
) -> [i64; 5] {
    let mut cmd = if library {
        redis::cmd("FCALL")
            .arg(format!("swl_{command}"))
            .arg(1)
            .clone()
    } else {
        redis::cmd(&format!("SWL.{}", command.to_uppercase()))
    };
    let reply: Vec<i64> = cmd
        .arg(key)
        .arg(args)
        .query(con)
        .unwrap_or_else(|e| panic!("{command} {key} {args:?} failed: {e}"));
    first_five(&reply, args)
}

/// Through the module, and through the function library on a master
/// without it: what reaches replicas is the same plain commands either way.
#[test]
fn replicas_hold_exactly_the_masters_entries_and_expiry() {
    for_each_encoding(|encoding| {
        for library in [false, true] {
            eprintln!(
                "-- through the {}",
                if library { "library" } else { "module" }
            );
            replicate_a_mixed_run(encoding, library);
        }
    });
}

/// A master creating logs in `encoding`, through the module or (`library`)
/// the function library on a server without it, and its two replicas,
/// with the module and without it.
fn master_and_replicas(encoding: Encoding, library: bool) -> [Server; 3] {
    let master = if library {
        let master = Server::with(Config::without_module());
        load_library(&master, encoding);
        master
    } else {
        Server::with(encoding.config())
    };
    let with_module = start_replica(&master, Config::default());
    let without_module = start_replica(&master, Config::without_module());
    [master, with_module, without_module]
}

fn replicate_a_mixed_run(encoding: Encoding, library: bool) {
    let [master, with_module, without_module] = master_and_replicas(encoding, library);
    let mut con = master.connect();
    let check = |con: &mut Connection, key: &str, args: &[&str]| {
        call_through(con, library, "check", key, args)
    };
    let refund = |con: &mut Connection, key: &str, args: &[&str]| {
        call_through(con, library, "refund", key, args)
    };

    let mut outcomes = [0usize; 2];
    for i in 0..3000u64 {
        // Long logs live through the comparison; short ones expire meanwhile.
        let long = format!("long:{}", i % 41);
        // Each short log keeps to one clock: server-clock entries would be
        // far in the future for explicit times and keep the log for years.
        let short = format!("short:{}:{}", i % 8, i % 19);
        // A refund comes before a check of the same key, so every long log
        // ends with a check that leaves entries in it.
        let explicit = (1000 + i * 40).to_string();
        match (i % 8, i % 15) {
            (0..=5, 0) => refund(&mut con, &long, &["600000", "6", "*"]),
            (0..=5, 5) => refund(&mut con, &long, &["600000", "40", "*", "COST", "3"]),
            (0..=5, 10) => refund(
                &mut con,
                &long,
                &["60000", "2", &explicit, "WINDOW", "10", "2"],
            ),
            (6, 3 | 8) => refund(&mut con, &short, &["5", "2", "*"]),
            _ => [0; 5],
        };
        let reply = match i % 8 {
            // The server clock: replicas must get the master's time.
            0 => check(&mut con, &long, &["600000", "6", "*"]),
            1 => check(&mut con, &long, &["600000", "40", "*", "COST", "2"]),
            // Explicit times, moving forward so old entries are trimmed.
            2 => check(
                &mut con,
                &long,
                &["60000", "2", &(1000 + i * 40).to_string()],
            ),
            // Same millisecond, several at once; every other such call
            // forced, recorded past the limit.
            3 => {
                let now = (1000 + i).to_string();
                let mut args = vec!["600000", "4", &now, "COST", "3"];
                if i % 16 == 11 {
                    args.push("FORCE");
                }
                check(&mut con, &long, &args)
            }
            // Penalized denials cap the log by rank.
            4 => check(
                &mut con,
                &long,
                &["20", "1", "*", "WINDOW", "600000", "3", "PENALIZE"],
            ),
            5 => check(
                &mut con,
                &long,
                &[
                    "10",
                    "2",
                    &(1000 + i * 5).to_string(),
                    "WINDOW",
                    "600000",
                    "5",
                ],
            ),
            6 => check(&mut con, &short, &["5", "2", "*"]),
            _ => check(
                &mut con,
                &short,
                &["30", "3", &(1000 + i).to_string(), "COST", "2"],
            ),
        };
        outcomes[reply[0] as usize] += 1;
    }
    assert!(
        outcomes[0] > 300 && outcomes[1] > 300,
        "a mix of admits and denials: {outcomes:?}"
    );

    wait_for_short_logs_to_expire(&mut con, 41);
    assert!(
        info_stat(&mut con, "expired_keys") > 0,
        "logs expired during the run"
    );
    wait_for_replicas(&mut con, 2);
    let expected = state(&mut con);
    assert_eq!(expected.len(), 41);
    assert!(expected
        .iter()
        .all(|(_, log, expiry)| !log.is_empty() && *expiry > 0));
    assert_eq!(state(&mut with_module.connect()), expected);
    assert_eq!(state(&mut without_module.connect()), expected);
}

#[test]
fn a_trim_that_empties_the_log_deletes_the_key_on_replicas() {
    for_each_encoding(|encoding| {
        let master = Server::with(encoding.config());
        let replica = start_replica(&master, Config::without_module());
        let mut con = master.connect();
        check(&mut con, "gone", &["1000", "2", "1000"]);
        check(&mut con, "gone", &["1000", "2", "5000", "COST", "3"]);
        wait_for_replicas(&mut con, 1);
        assert_eq!(keys(&mut replica.connect()), Vec::<Vec<u8>>::new());
    });
}

#[test]
fn large_and_small_trims_reach_replicas_exactly() {
    for_each_encoding(|encoding| {
        let master = Server::with(encoding.config());
        let replica = start_replica(&master, Config::without_module());
        let mut con = master.connect();
        // 100 entries (listpack) and 400 (skiplist), one per millisecond.
        for (key, entries) in [("lp", 100u64), ("sl", 400)] {
            for t in 0..entries {
                check(
                    &mut con,
                    key,
                    &["1000000", "1000000", &(10_000 + t).to_string()],
                );
            }
        }
        // Trims of 1, 9, 60 and 300 entries: one by one and in one call.
        for (key, now) in [
            ("lp", 1_010_000u64),
            ("lp", 1_010_009),
            ("lp", 1_010_069),
            ("sl", 1_010_299),
        ] {
            check(&mut con, key, &["1000000", "1000000", &now.to_string()]);
        }
        assert_eq!(scores(&mut con, "lp").len(), 100 - 70 + 3);
        assert_eq!(scores(&mut con, "lp")[0], 10_070.0);
        assert_eq!(scores(&mut con, "sl").len(), 400 - 300 + 1);
        // Penalized denials, then caps: lp drops 2 entries one by one (its
        // trim empties the old ones first), sl drops 98 in one call.
        for (key, limit) in [("lp", "4"), ("sl", "5")] {
            let reply = check(
                &mut con,
                key,
                &["1000000", limit, "1010300", "COST", "3", "PENALIZE"],
            );
            assert_eq!(reply[0], 0, "{key} is denied");
        }
        assert_eq!(
            scores(&mut con, "lp"),
            [1_010_069.0, 1_010_300.0, 1_010_300.0, 1_010_300.0]
        );
        assert_eq!(
            scores(&mut con, "sl"),
            [10_399.0, 1_010_299.0, 1_010_300.0, 1_010_300.0, 1_010_300.0]
        );
        let expected = state(&mut con);
        wait_for_replicas(&mut con, 1);
        assert_eq!(state(&mut replica.connect()), expected);
    });
}

#[test]
fn scores_from_other_tools_keep_replicas_exact() {
    let master = Server::start();
    let replica = start_replica(&master, Config::without_module());
    let mut con = master.connect();
    // A fractional and an infinite score, written by something else.
    let _: i64 = redis::cmd("ZADD")
        .arg(&["odd", "4500.5", "a", "+inf", "b"])
        .query(&mut con)
        .unwrap();
    let started = server_ms(&mut con) as i64;
    assert_eq!(
        check(&mut con, "odd", &["1000", "5", "5000"]),
        [1, 5, 2, -1, NEVER_MS]
    );
    assert_eq!(
        check(&mut con, "odd", &["1000", "3", "5000"]),
        [0, 3, 0, 501, NEVER_MS]
    );
    let ended = server_ms(&mut con) as i64;
    // An infinite entry never leaves the window: the key lives 2^54 ms
    // (over 500,000 years) from the last check.
    let expiry = expire_time(&mut con, b"odd") - NEVER_MS;
    assert!(
        (started..=ended).contains(&expiry),
        "{started} <= {expiry} <= {ended}"
    );
    wait_for_replicas(&mut con, 1);
    let expected = state(&mut con);
    assert_eq!(expected.len(), 1);
    assert_eq!(state(&mut replica.connect()), expected);
}

#[test]
fn checks_inside_transactions_and_scripts_replicate_exactly() {
    for_each_encoding(|encoding| {
        let master = Server::with(encoding.config());
        let replica = start_replica(&master, Config::without_module());
        let mut con = master.connect();
        let (first, second): (Vec<i64>, Vec<i64>) = redis::pipe()
            .atomic()
            .cmd("SWL.CHECK")
            .arg(&["tx", "60000", "2", "*"])
            .cmd("SWL.CHECK")
            .arg(&["tx", "60000", "2", "*", "COST", "2"])
            .query(&mut con)
            .unwrap();
        assert_eq!((first[0], second[0]), (1, 0));
        let from_script: Vec<i64> = redis::cmd("EVAL")
            .arg("return redis.call('SWL.CHECK', KEYS[1], '60000', '3', '*', 'COST', '2')")
            .arg(1)
            .arg("lua")
            .query(&mut con)
            .unwrap();
        assert_eq!(from_script, [1, 3, 1, -1, 60000, 60000]);
        wait_for_replicas(&mut con, 1);
        let expected = state(&mut con);
        assert_eq!(
            expected
                .iter()
                .map(|(_, log, _)| log.len())
                .collect::<Vec<_>>(),
            [2, 1]
        );
        assert_eq!(state(&mut replica.connect()), expected);
    });
}

/// Compact logs of either format version large enough to take many blocks
/// (version 2) or to grow and drop dead slots (version 1): thousands of
/// checks, with costs, clients seconds behind, refunds and trims past
/// half, through the module and through the library. Replicas with and
/// without the module end with the master's bytes and expiries.
#[test]
fn large_compact_logs_reach_replicas_byte_for_byte() {
    for encoding in [Encoding::Compact1, Encoding::Compact] {
        for library in [false, true] {
            eprintln!("-- {} through the library: {library}", encoding.name());
            replicate_large_logs(encoding, library);
        }
    }
}

fn replicate_large_logs(encoding: Encoding, library: bool) {
    let [master, with_module, without_module] = master_and_replicas(encoding, library);
    let mut con = master.connect();
    let mut rng = support::Rng(0x5eed_b10c_0000_0002);
    let mut now = 1_800_000_000_000u64;
    let mut admitted = 0;
    for i in 0..4000u64 {
        let key = format!("large:{}", i % 3);
        now += rng.below(40);
        let time = match rng.below(10) {
            // A client some seconds behind.
            0 => now - rng.below(5000),
            // One minutes behind: the blocks from its time on are coded anew.
            1 if rng.below(10) == 0 => now - rng.below(300_000),
            _ => now,
        }
        .to_string();
        let cost = if rng.below(20) == 0 {
            1 + rng.below(500)
        } else {
            1
        };
        // An hour's window, and now and then a short one that trims most
        // of the log (past half: the dead blocks or slots are dropped).
        let window = if rng.below(200) == 0 {
            "20000"
        } else {
            "3600000"
        };
        let args = [window, "5000", &time, "COST", &cost.to_string()];
        if rng.below(15) == 0 {
            call_through(&mut con, library, "refund", &key, &args);
        } else {
            admitted += call_through(&mut con, library, "check", &key, &args)[0];
        }
    }
    assert!(admitted > 2000, "{admitted} admitted");
    wait_for_replicas(&mut con, 2);
    let expected = state(&mut con);
    assert_eq!(expected.len(), 3);
    for (key, log, _) in &expected {
        let Contents::Bytes(bytes) = log else {
            panic!("{key:?} is not a compact log");
        };
        let version = if encoding == Encoding::Compact { 2 } else { 1 };
        assert_eq!(bytes[4], version, "{key:?}");
        assert!(bytes.len() > 1000, "{key:?}: {} bytes", bytes.len());
    }
    assert_eq!(state(&mut with_module.connect()), expected);
    assert_eq!(state(&mut without_module.connect()), expected);
}
