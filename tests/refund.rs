//! SWL.REFUND gives back recorded units: it trims the log as SWL.CHECK
//! would, removes up to COST of the newest entries, replies what SWL.PEEK
//! then replies, and leaves the expiry an admitted check would leave.

mod support;

use redis::Connection;
use support::{
    check, contents, expire_time, for_each_encoding, scores, server_ms, snapshot, Contents, Server,
};

const HOUR: &str = "3600000";

/// `command key args...`: all six integers of the reply.
fn six(con: &mut Connection, command: &str, key: &str, args: &[&str]) -> Vec<i64> {
    redis::cmd(command)
        .arg(key)
        .arg(args)
        .query(con)
        .unwrap_or_else(|e| panic!("{command} {key} {args:?}: {e}"))
}

fn refund(con: &mut Connection, key: &str, args: &[&str]) -> Vec<i64> {
    six(con, "SWL.REFUND", key, args)
}

fn peek(con: &mut Connection, key: &str, args: &[&str]) -> Vec<i64> {
    six(con, "SWL.PEEK", key, args)
}

#[test]
fn a_refund_gives_back_the_newest_entry() {
    for_each_encoding(|encoding| {
        let server = Server::with(encoding.config());
        let mut con = server.connect();
        for now in ["1000", "2000", "3000"] {
            check(&mut con, "k", &[HOUR, "3", now]);
        }
        let args = [HOUR, "3", "3500"];
        assert_eq!(
            refund(&mut con, "k", &args),
            [1, 3, 0, -1, 3_600_000, 3_600_000]
        );
        assert_eq!(scores(&mut con, "k"), [1000.0, 2000.0]);
        assert_eq!(refund(&mut con, "k", &args), peek(&mut con, "k", &args));
        assert_eq!(scores(&mut con, "k"), [1000.0]);
    });
}

#[test]
fn a_refund_of_more_than_there_is_removes_the_key() {
    for_each_encoding(|encoding| {
        let server = Server::with(encoding.config());
        let mut con = server.connect();
        check(&mut con, "k", &[HOUR, "10", "1000", "COST", "3"]);
        assert_eq!(
            refund(&mut con, "k", &[HOUR, "10", "1000", "COST", "5"]),
            [1, 10, 5, -1, 3_600_000, 3_600_000]
        );
        assert_eq!(contents(&mut con, b"k"), Contents::Missing);
    });
}

#[test]
fn a_refund_on_a_missing_key_writes_nothing_and_leaves_a_watch_alone() {
    for_each_encoding(|encoding| {
        let server = Server::with(encoding.config());
        let mut con = server.connect();
        let args = [HOUR, "4", "5000", "COST", "2"];
        let _: () = redis::cmd("WATCH").arg("k").query(&mut con).unwrap();
        let empty = peek(&mut con, "k", &args);
        assert_eq!(empty, [1, 4, 2, -1, 3_600_000, 3_600_000]);
        assert_eq!(refund(&mut con, "k", &args), empty);
        assert_eq!(contents(&mut con, b"k"), Contents::Missing);
        // The transaction runs: nothing touched the watched key.
        let _: () = redis::cmd("MULTI").query(&mut con).unwrap();
        let _: () = redis::cmd("SET")
            .arg("other")
            .arg("1")
            .query(&mut con)
            .unwrap();
        let ran: redis::Value = redis::cmd("EXEC").query(&mut con).unwrap();
        assert_eq!(ran, redis::Value::Array(vec![redis::Value::Okay]));
        let stats: String = redis::cmd("INFO").arg("swl").query(&mut con).unwrap();
        assert!(stats.contains("swl_refunds:1\r\n"), "{stats}");
    });
}

#[test]
fn entries_outside_the_widest_window_are_trimmed_not_given_back() {
    for_each_encoding(|encoding| {
        let server = Server::with(encoding.config());
        let mut con = server.connect();
        for now in ["1000", "2000", "5000"] {
            check(&mut con, "k", &["10000", "10", now]);
        }
        // At 12000 the entries at 1000 and 2000 are out (<= 12000 - 10000):
        // trimmed, and only the newest of the rest is given back, so
        // a COST of 2 leaves nothing.
        assert_eq!(
            refund(&mut con, "k", &["10000", "10", "12000", "COST", "2"]),
            [1, 10, 8, -1, 10000, 10000]
        );
        assert_eq!(contents(&mut con, b"k"), Contents::Missing);
        for now in ["1000", "2000", "5000", "6000"] {
            check(&mut con, "k", &["10000", "10", now]);
        }
        assert_eq!(
            refund(&mut con, "k", &["10000", "10", "12000"]),
            [1, 10, 8, -1, 10000, 10000]
        );
        assert_eq!(scores(&mut con, "k"), [5000.0]);
    });
}

#[test]
fn several_units_in_one_millisecond_are_given_back_one_by_one() {
    for_each_encoding(|encoding| {
        let server = Server::with(encoding.config());
        let mut con = server.connect();
        check(&mut con, "k", &[HOUR, "10", "7000", "COST", "5"]);
        check(&mut con, "k", &[HOUR, "10", "7000", "COST", "3"]);
        assert_eq!(
            refund(&mut con, "k", &[HOUR, "10", "7000", "COST", "4"]),
            [1, 10, 2, -1, 3_600_000, 3_600_000]
        );
        assert_eq!(scores(&mut con, "k"), [7000.0; 4]);
    });
}

#[test]
fn with_several_windows_the_reply_is_the_peek_after_the_refund() {
    for_each_encoding(|encoding| {
        let server = Server::with(encoding.config());
        let mut con = server.connect();
        for now in [10_000, 50_000, 55_000, 58_000, 59_000, 59_500] {
            check(
                &mut con,
                "k",
                &["60000", "100", &now.to_string(), "WINDOW", "1000", "2"],
            );
        }
        let args = [
            "60000", "100", "60000", "COST", "2", "WINDOW", "1000", "2", "WINDOW", "5000", "3",
        ];
        let before = scores(&mut con, "k");
        assert_eq!(
            before,
            [10_000.0, 50_000.0, 55_000.0, 58_000.0, 59_000.0, 59_500.0]
        );
        let refunded = refund(&mut con, "k", &args);
        assert_eq!(
            scores(&mut con, "k"),
            [10_000.0, 50_000.0, 55_000.0, 58_000.0]
        );
        assert_eq!(refunded, peek(&mut con, "k", &args));
        // The 2 units asked about fill the 1 s window (2 of 2) and, with
        // 58000, the 5 s one (3 of 3): the first named of the two binds.
        assert_eq!(refunded, [1, 2, 0, -1, 60000, 1000]);
    });
}

#[test]
fn the_expiry_after_a_refund_is_the_newest_entry_leaving_the_window() {
    for_each_encoding(|encoding| {
        let server = Server::with(encoding.config());
        let mut con = server.connect();
        let base = server_ms(&mut con);
        let at = |offset: u64| (base + offset).to_string();
        check(&mut con, "k", &["60000", "10", &at(0)]);
        check(&mut con, "k", &["60000", "10", &at(20_000)]);
        check(&mut con, "k", &["60000", "10", &at(40_000)]);
        // Entries at base+0 and +20 s remain: the key goes at +80 s on the
        // server's clock, as an admitted check at the same moment would set.
        let started = server_ms(&mut con);
        refund(&mut con, "k", &["60000", "10", &at(0)]);
        let ended = server_ms(&mut con);
        let expiry = expire_time(&mut con, b"k");
        // The reply is relative to now_ms (base), the expiry to the clock.
        let lives = 20_000 + 60_000;
        assert!(
            (started + lives..=ended + lives).contains(&(expiry as u64)),
            "{expiry} not in {}..={}",
            started + lives,
            ended + lives
        );
        // With the server's clock, exactly newest + window.
        check(&mut con, "s", &["60000", "10", &at(0)]);
        check(&mut con, "s", &["60000", "10", &at(30_000)]);
        refund(&mut con, "s", &["60000", "10", "*"]);
        assert_eq!(expire_time(&mut con, b"s"), (base + 60_000) as i64);
    });
}

#[test]
fn a_refund_of_another_type_is_wrongtype_and_leaves_it() {
    for_each_encoding(|encoding| {
        let server = Server::with(encoding.config());
        let mut con = server.connect();
        let _: () = redis::cmd("RPUSH")
            .arg("k")
            .arg("a")
            .query(&mut con)
            .unwrap();
        let before = snapshot(&mut con, b"k");
        let error = redis::cmd("SWL.REFUND")
            .arg(&["k", "1000", "5", "*"])
            .query::<Vec<i64>>(&mut con)
            .unwrap_err();
        assert_eq!(
            support::error_text(&error),
            "WRONGTYPE Operation against a key holding the wrong kind of value"
        );
        assert_eq!(snapshot(&mut con, b"k"), before);
    });
}
