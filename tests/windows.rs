//! Several windows on one log, all-or-nothing, and PENALIZE.

mod support;

use support::{
    check, expire_time, for_each_encoding, pttl, scores, server_ms, Config, Encoding, Server,
};

const BURST_AND_LONG: [&str; 3] = ["WINDOW", "60000", "5"];

fn burst_and_long(con: &mut redis::Connection, now: u64, extra: &[&str]) -> [i64; 5] {
    let now = now.to_string();
    let mut args = vec!["1000", "2", now.as_str()];
    args.extend(BURST_AND_LONG);
    args.extend(extra);
    check(con, "two", &args)
}

#[test]
fn two_windows_deny_in_turn_and_the_binding_one_replies() {
    for_each_encoding(|encoding| {
        let server = Server::with(encoding.config());
        let mut con = server.connect();
        // 2 per second and 5 per minute. Admitted: the window with least left.
        assert_eq!(burst_and_long(&mut con, 0, &[]), [1, 2, 1, -1, 60000]);
        assert_eq!(burst_and_long(&mut con, 100, &[]), [1, 2, 0, -1, 60000]);
        // The burst window denies (its older entry, at 0, leaves at 1000);
        // the long one would admit. Nothing is recorded.
        assert_eq!(burst_and_long(&mut con, 200, &[]), [0, 2, 0, 800, 59900]);
        assert_eq!(scores(&mut con, "two"), [0.0, 100.0]);
        assert_eq!(burst_and_long(&mut con, 1500, &[]), [1, 2, 1, -1, 60000]);
        // Both have 1 left: the tie goes to the window named first.
        assert_eq!(burst_and_long(&mut con, 2600, &[]), [1, 2, 1, -1, 60000]);
        assert_eq!(burst_and_long(&mut con, 3700, &[]), [1, 5, 0, -1, 60000]);
        // Now the long window denies: its oldest entry leaves at 60000.
        assert_eq!(burst_and_long(&mut con, 4800, &[]), [0, 5, 0, 55200, 58900]);
        // Both deny a cost of 2: the burst clears at 4700, the long window at
        // 60100 (the 4th newest, at 100): the longer wait binds.
        assert_eq!(
            burst_and_long(&mut con, 3800, &["COST", "2"]),
            [0, 5, 0, 56300, 59900]
        );
        // A cost the burst limit can never fit binds over any wait.
        assert_eq!(
            burst_and_long(&mut con, 3800, &["COST", "3"]),
            [0, 2, 1, -1, 59900]
        );
        assert_eq!(
            scores(&mut con, "two"),
            [0.0, 100.0, 1500.0, 2600.0, 3700.0]
        );
    });
}

#[test]
fn three_windows_admit_only_when_all_do() {
    for_each_encoding(|encoding| {
        let server = Server::with(encoding.config());
        let mut con = server.connect();
        let three = |con: &mut redis::Connection, now: u64| {
            let now = now.to_string();
            check(
                con,
                "three",
                &[
                    "1000", "2", &now, "WINDOW", "10000", "3", "WINDOW", "60000", "5",
                ],
            )
        };
        assert_eq!(three(&mut con, 0), [1, 2, 1, -1, 60000]);
        assert_eq!(three(&mut con, 100), [1, 2, 0, -1, 60000]);
        assert_eq!(three(&mut con, 1500), [1, 3, 0, -1, 60000]);
        // Only the middle window is full: it binds; the others would admit.
        assert_eq!(three(&mut con, 2600), [0, 3, 0, 7400, 58900]);
        assert_eq!(scores(&mut con, "three"), [0.0, 100.0, 1500.0]);
        // At 10050 the entry at 0 has left the middle window.
        assert_eq!(three(&mut con, 10050), [1, 3, 0, -1, 60000]);
        assert_eq!(scores(&mut con, "three"), [0.0, 100.0, 1500.0, 10050.0]);
    });
}

#[test]
fn the_widest_window_trims_and_sets_the_expiry() {
    for_each_encoding(|encoding| {
        let server = Server::with(encoding.config());
        let mut con = server.connect();
        // The wide window is named second; trimming must still keep its entries.
        check(
            &mut con,
            "wide",
            &["100", "10", "1000", "WINDOW", "5000", "10"],
        );
        let reply = check(
            &mut con,
            "wide",
            &["100", "10", "3000", "WINDOW", "5000", "10"],
        );
        assert_eq!(reply, [1, 10, 8, -1, 5000]);
        assert_eq!(scores(&mut con, "wide"), [1000.0, 3000.0]);
        let ttl = pttl(&mut con, "wide");
        assert!((4000..=5000).contains(&ttl), "pttl {ttl}");
        // 6000: the entry at 1000 is at the wide window's edge and goes.
        check(
            &mut con,
            "wide",
            &["100", "10", "6000", "WINDOW", "5000", "10"],
        );
        assert_eq!(scores(&mut con, "wide"), [3000.0, 6000.0]);
    });
}

#[test]
fn penalize_records_denials_and_caps_the_log() {
    for_each_encoding(|encoding| {
        let server = Server::with(encoding.config());
        let mut con = server.connect();
        for t in 0..3u64 {
            assert_eq!(
                check(&mut con, "pen", &["1000", "3", &t.to_string(), "PENALIZE"])[0],
                1
            );
        }
        // A long burst of retries: each is recorded, the oldest entry dropped.
        let mut last_sent = 0;
        for t in 3..=102u64 {
            last_sent = server_ms(&mut con);
            let reply = check(&mut con, "pen", &["1000", "3", &t.to_string(), "PENALIZE"]);
            assert_eq!(reply, [0, 3, 0, 998, 1000], "retry at {t}");
            assert_eq!(scores(&mut con, "pen").len(), 3);
        }
        assert_eq!(scores(&mut con, "pen"), [100.0, 101.0, 102.0]);
        // The key lives until the newest entry leaves: a window from the
        // last retry's clock, which ran between these two readings.
        let expiry = expire_time(&mut con, b"pen");
        let read = server_ms(&mut con);
        let ran = u64::try_from(expiry).expect("an expiry") - 1000;
        assert!(
            (last_sent..=read).contains(&ran),
            "expiry {expiry}, the call sent at {last_sent}, read at {read}"
        );
        // It stays denied until it pauses for the window.
        assert_eq!(
            check(&mut con, "pen", &["1000", "3", "1099"]),
            [0, 3, 0, 1, 3]
        );
        // At 1100 only the entry at 100 has left: 101, 102 and this one fill it.
        assert_eq!(
            check(&mut con, "pen", &["1000", "3", "1100"]),
            [1, 3, 0, -1, 1000]
        );
    });
}

#[test]
fn penalize_caps_at_the_largest_limit_of_several_windows() {
    for_each_encoding(|encoding| {
        let server = Server::with(encoding.config());
        let mut con = server.connect();
        for t in 0..50u64 {
            check(
                &mut con,
                "pen2",
                &["10", "1", &t.to_string(), "WINDOW", "1000", "4", "PENALIZE"],
            );
        }
        assert_eq!(scores(&mut con, "pen2"), [46.0, 47.0, 48.0, 49.0]);
    });
}

#[test]
fn penalize_with_a_zero_limit_keeps_nothing() {
    for_each_encoding(|encoding| {
        let server = Server::with(encoding.config());
        let mut con = server.connect();
        assert_eq!(
            check(&mut con, "z", &["1000", "0", "5", "PENALIZE"]),
            [0, 0, 0, -1, 0]
        );
        assert_eq!(expire_time(&mut con, b"z"), -2);
    });
}

#[test]
fn without_penalize_denials_are_not_recorded() {
    for_each_encoding(|encoding| {
        let server = Server::with(encoding.config());
        let mut con = server.connect();
        check(&mut con, "np", &["1000", "1", "0"]);
        for t in 1..20u64 {
            assert_eq!(check(&mut con, "np", &["1000", "1", &t.to_string()])[0], 0);
        }
        assert_eq!(scores(&mut con, "np"), [0.0]);
    });
}

fn aof_size(con: &mut redis::Connection) -> u64 {
    let info: String = redis::cmd("INFO").arg("persistence").query(con).unwrap();
    info.lines()
        .find_map(|line| line.strip_prefix("aof_current_size:"))
        .and_then(|size| size.trim().parse().ok())
        .expect("aof_current_size in INFO persistence")
}

#[test]
fn a_penalty_writes_only_what_the_cap_keeps() {
    let server = Server::with(
        Config::default()
            .arg("appendonly", "yes")
            .arg("appendfsync", "always"),
    );
    let mut con = server.connect();
    // The first write also selects the database: get that out of the way.
    let _: () = redis::cmd("SET").arg("w").arg("1").query(&mut con).unwrap();
    // Above every limit: nothing would stay, so nothing is written.
    let before = aof_size(&mut con);
    assert_eq!(
        check(
            &mut con,
            "pz",
            &["1000", "0", "*", "COST", "100000", "PENALIZE"]
        ),
        [0, 0, 0, -1, 0]
    );
    assert_eq!(expire_time(&mut con, b"pz"), -2);
    assert_eq!(aof_size(&mut con), before);
    // A cap of 3 keeps 3 of the 100,000: the AOF takes what an admitted
    // check of cost 3 writes, and no more.
    let before = aof_size(&mut con);
    let reply = check(
        &mut con,
        "p1",
        &["60000", "3", "7000", "COST", "100000", "PENALIZE"],
    );
    assert_eq!(reply, [0, 3, 0, -1, 60000]);
    let penalized = aof_size(&mut con) - before;
    assert_eq!(scores(&mut con, "p1"), [7000.0; 3]);
    let before = aof_size(&mut con);
    let reply = check(&mut con, "p2", &["60000", "3", "7000", "COST", "3"]);
    assert_eq!(reply, [1, 3, 0, -1, 60000]);
    assert_eq!(aof_size(&mut con) - before, penalized);
}

/// `count` entries, one a millisecond from `first`, recorded by checks
/// (so the log is in the server's encoding), sent as one pipeline.
fn fill(con: &mut redis::Connection, key: &str, first: u64, count: u64) {
    let mut pipe = redis::pipe();
    for t in first..first + count {
        let args = ["100000000", "100000000", &t.to_string()].map(str::to_owned);
        pipe.cmd("SWL.CHECK").arg(key).arg(&args).ignore();
    }
    let _: () = pipe.query(con).unwrap();
}

#[test]
fn counts_and_waits_are_exact_on_large_logs_with_large_limits() {
    for_each_encoding(|encoding| {
        let server = Server::with(encoding.config());
        let mut con = server.connect();
        // 20,000 entries at 1..=20000; now = 20000.
        fill(&mut con, "big", 1, 20_000);
        let kind: String = redis::cmd("TYPE").arg("big").query(&mut con).unwrap();
        assert_eq!(
            kind,
            if encoding == Encoding::Zset {
                "zset"
            } else {
                "string"
            }
        );
        let now = "20000";
        // Each window holds its width in entries: 10 (walked), 5,000 and
        // 15,000 (counted by rank); the widest holds all 20,000.
        let reply = |con: &mut redis::Connection, args: &[&str]| -> Vec<i64> {
            redis::cmd("SWL.PEEK")
                .arg("big")
                .arg(args)
                .query(con)
                .unwrap()
        };
        let windows = [
            "100000", "30000", now, "WINDOW", "10", "100", "WINDOW", "5000", "5004", "WINDOW",
            "15000", "15010",
        ];
        // Admitted: the least left is 5000's window (4 left, 3 after this one).
        assert_eq!(reply(&mut con, &windows), [1, 5004, 3, -1, 100000, 5000]);
        // A cost of 11 fits none of the last two. 5000's window needs its
        // (5004 - 11 + 1) = 4994th newest entry, at 15007, gone: at 20007.
        // 15,000's needs its 15000th newest, at 5001, gone: at 20001. The
        // longer wait binds.
        let mut denied = windows.to_vec();
        denied.extend(["COST", "11"]);
        assert_eq!(reply(&mut con, &denied), [0, 5004, 4, 7, 100000, 5000]);
        let mut alone = vec!["100000", "30000", now, "WINDOW", "15000", "15010"];
        alone.extend(["COST", "11"]);
        assert_eq!(reply(&mut con, &alone), [0, 15010, 10, 1, 100000, 15000]);
        // And the check itself agrees, then records.
        let checked = check(&mut con, "big", &windows);
        assert_eq!(checked, [1, 5004, 3, -1, 100000]);
        assert_eq!(scores(&mut con, "big").len(), 20_001);
    });
}

#[test]
fn the_reply_names_the_window_it_describes() {
    for_each_encoding(|encoding| {
        let server = Server::with(encoding.config());
        let mut con = server.connect();
        let reply = |con: &mut redis::Connection, command: &str, args: &[&str]| -> Vec<i64> {
            redis::cmd(command)
                .arg("named")
                .arg(args)
                .query(con)
                .unwrap()
        };
        // One window: it is the one named.
        let one = ["60000", "2", "1000"];
        assert_eq!(
            reply(&mut con, "SWL.PEEK", &one),
            [1, 2, 1, -1, 60000, 60000]
        );
        assert_eq!(
            reply(&mut con, "SWL.CHECK", &one),
            [1, 2, 1, -1, 60000, 60000]
        );
        // Several: the binding one. Admitted, the least left is the burst
        // window; denied by it alone, it names it with its wait.
        let several = ["60000", "10", "1100", "WINDOW", "1000", "2"];
        assert_eq!(
            reply(&mut con, "SWL.PEEK", &several),
            [1, 2, 0, -1, 60000, 1000]
        );
        assert_eq!(
            reply(&mut con, "SWL.CHECK", &several),
            [1, 2, 0, -1, 60000, 1000]
        );
        assert_eq!(
            reply(&mut con, "SWL.CHECK", &several),
            [0, 2, 0, 900, 60000, 1000]
        );
        // Denied by both: the long window waits longest and binds.
        let long = ["60000", "2", "1200", "WINDOW", "1000", "2"];
        assert_eq!(
            reply(&mut con, "SWL.PEEK", &long),
            [0, 2, 0, 59800, 59900, 60000]
        );
    });
}
