//! Several windows on one log, all-or-nothing, and PENALIZE.

mod support;

use support::{check, expire_time, pttl, scores, Server};

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
    let server = Server::start();
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
}

#[test]
fn three_windows_admit_only_when_all_do() {
    let server = Server::start();
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
}

#[test]
fn the_widest_window_trims_and_sets_the_expiry() {
    let server = Server::start();
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
}

#[test]
fn penalize_records_denials_and_caps_the_log() {
    let server = Server::start();
    let mut con = server.connect();
    for t in 0..3u64 {
        assert_eq!(
            check(&mut con, "pen", &["1000", "3", &t.to_string(), "PENALIZE"])[0],
            1
        );
    }
    // A long burst of retries: each is recorded, the oldest entry dropped.
    for t in 3..=102u64 {
        let reply = check(&mut con, "pen", &["1000", "3", &t.to_string(), "PENALIZE"]);
        assert_eq!(reply, [0, 3, 0, 998, 1000], "retry at {t}");
        assert_eq!(scores(&mut con, "pen").len(), 3);
    }
    assert_eq!(scores(&mut con, "pen"), [100.0, 101.0, 102.0]);
    let ttl = pttl(&mut con, "pen");
    assert!((900..=1000).contains(&ttl), "pttl {ttl}");
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
}

#[test]
fn penalize_caps_at_the_largest_limit_of_several_windows() {
    let server = Server::start();
    let mut con = server.connect();
    for t in 0..50u64 {
        check(
            &mut con,
            "pen2",
            &["10", "1", &t.to_string(), "WINDOW", "1000", "4", "PENALIZE"],
        );
    }
    assert_eq!(scores(&mut con, "pen2"), [46.0, 47.0, 48.0, 49.0]);
}

#[test]
fn penalize_with_a_zero_limit_keeps_nothing() {
    let server = Server::start();
    let mut con = server.connect();
    assert_eq!(
        check(&mut con, "z", &["1000", "0", "5", "PENALIZE"]),
        [0, 0, 0, -1, 0]
    );
    assert_eq!(expire_time(&mut con, b"z"), -2);
}

#[test]
fn without_penalize_denials_are_not_recorded() {
    let server = Server::start();
    let mut con = server.connect();
    check(&mut con, "np", &["1000", "1", "0"]);
    for t in 1..20u64 {
        assert_eq!(check(&mut con, "np", &["1000", "1", &t.to_string()])[0], 0);
    }
    assert_eq!(scores(&mut con, "np"), [0.0]);
}
