//! SWL.PEEK replies exactly what the following SWL.CHECK replies, and
//! changes nothing: not the entries, not the expiry.

mod support;

use redis::Connection;
use support::{
    check, contents, error_text, expire_time, for_each_encoding, server_in, start_replica,
    swl_command, wait_for_replicas, Config, Contents, Rng, Server,
};

fn peek(con: &mut Connection, key: &str, args: &[String]) -> [i64; 5] {
    let reply: Vec<i64> = redis::cmd("SWL.PEEK")
        .arg(key)
        .arg(args)
        .query(con)
        .unwrap_or_else(|e| panic!("SWL.PEEK {key} {args:?}: {e}"));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    support::first_five(&reply, &args)
}

/// Entries (members and scores) and absolute expiry.
fn state(con: &mut Connection, key: &str) -> (Contents, i64) {
    (
        contents(con, key.as_bytes()),
        expire_time(con, key.as_bytes()),
    )
}

#[test]
fn peek_gives_the_reply_of_the_next_check_and_changes_nothing() {
    for_each_encoding(|encoding| {
        let server = Server::with(encoding.config());
        let mut con = server.connect();
        let mut rng = Rng(0x5eed_1234_abcd_ef01);
        let mut now = 1_000_000u64;
        let mut outcomes = [0usize; 2];
        for step in 0..1500 {
            let key = format!("p{}", step % 3);
            now += rng.below(40);
            let mut args = vec![
                "200".to_string(),
                (rng.below(6)).to_string(),
                now.to_string(),
            ];
            if rng.below(3) == 0 {
                args.extend(["COST".to_string(), (1 + rng.below(4)).to_string()]);
            }
            if rng.below(2) == 0 {
                args.extend([
                    "WINDOW".to_string(),
                    "50".to_string(),
                    (rng.below(4)).to_string(),
                ]);
            }
            if rng.below(4) == 0 {
                args.extend([
                    "WINDOW".to_string(),
                    "1000".to_string(),
                    (3 + rng.below(8)).to_string(),
                ]);
            }
            let before = state(&mut con, &key);
            let peeked = peek(&mut con, &key, &args);
            assert_eq!(
                state(&mut con, &key),
                before,
                "SWL.PEEK {key} {args:?} changed the key"
            );
            let str_args: Vec<&str> = args.iter().map(String::as_str).collect();
            let checked = check(&mut con, &key, &str_args);
            // These times are made up while the TTL runs on the server's clock:
            // an hour-long expiry keeps the log through the run, and SWL.PEEK
            // must leave that expiry alone too.
            let _: i64 = redis::cmd("PEXPIRE")
                .arg(&key)
                .arg(3_600_000)
                .query(&mut con)
                .unwrap();
            assert_eq!(peeked, checked, "step {step}: {key} {args:?}");
            outcomes[checked[0] as usize] += 1;
        }
        assert!(
            outcomes[0] > 200 && outcomes[1] > 200,
            "a mix: {outcomes:?}"
        );
    });
}

#[test]
fn peek_does_not_trim_entries_outside_the_window() {
    for_each_encoding(|encoding| {
        let server = Server::with(encoding.config());
        let mut con = server.connect();
        check(&mut con, "old", &["1000", "2", "1000"]);
        check(&mut con, "old", &["1000", "2", "1500"]);
        let before = state(&mut con, "old");
        let args: Vec<String> = ["1000", "2", "2200"].map(String::from).to_vec();
        assert_eq!(peek(&mut con, "old", &args), [1, 2, 0, -1, 1000]);
        assert_eq!(state(&mut con, "old"), before);
        assert_eq!(before.0.len(), 2);
    });
}

/// SWL.PEEK with OLDEST, through the module or (`library`) FCALL swl_peek.
fn peek_oldest(con: &mut Connection, library: bool, key: &str, args: &[&str]) -> Vec<i64> {
    swl_command(library, "peek", key)
        .arg(args)
        .arg("OLDEST")
        .query(con)
        .unwrap_or_else(|e| panic!("peek {key} {args:?} OLDEST: {e}"))
}

#[test]
fn oldest_adds_when_the_oldest_entry_in_the_replys_window_leaves_it() {
    for_each_encoding(|encoding| {
        let server = server_in(encoding);
        let mut con = server.connect();
        for library in [false, true] {
            let key = if library { "lib" } else { "mod" };
            let mut peek = |args: &[&str]| peek_oldest(&mut con, library, key, args);
            // Empty: an admit counts itself, at now, so a whole window.
            assert_eq!(peek(&["1000", "3", "500"]), [1, 3, 2, -1, 1000, 1000, 1000]);
            let mut con = server.connect();
            for at in ["100", "400", "700"] {
                check(&mut con, key, &["1000", "3", at]);
            }
            let mut peek = |args: &[&str]| peek_oldest(&mut con, library, key, args);
            // 100 has left by 1150; 400 is the oldest in the window.
            assert_eq!(peek(&["1000", "3", "1150"]), [1, 3, 0, -1, 1000, 1000, 250]);
            // Denied (three in the window): the same oldest, nothing pending.
            assert_eq!(peek(&["1000", "3", "900"]), [0, 3, 0, 200, 800, 1000, 200]);
            // The reply's window is the narrow one, which holds only 700.
            let narrow = ["1000", "9", "750", "WINDOW", "100", "1"];
            assert_eq!(peek(&narrow), [0, 1, 0, 50, 950, 100, 50]);
            // Nothing changed: the peeks left the three entries.
            let entries: Vec<i64> = redis::cmd("SWL.ENTRIES").arg(key).query(&mut con).unwrap();
            assert_eq!(entries, [100, 400, 700]);
        }
    });
}

#[test]
fn a_missing_key_peeks_as_empty_and_stays_missing() {
    for_each_encoding(|encoding| {
        let server = Server::with(encoding.config());
        let mut con = server.connect();
        let args: Vec<String> = ["1000", "5", "*", "COST", "2"].map(String::from).to_vec();
        assert_eq!(peek(&mut con, "none", &args), [1, 5, 3, -1, 1000]);
        let zero: Vec<String> = ["1000", "0", "7"].map(String::from).to_vec();
        assert_eq!(peek(&mut con, "none", &zero), [0, 0, 0, -1, 0]);
        assert_eq!(expire_time(&mut con, b"none"), -2);
    });
}

#[test]
fn peek_rejects_penalize_and_bad_arguments_like_check() {
    for_each_encoding(|encoding| {
        let server = Server::with(encoding.config());
        let mut con = server.connect();
        let error = |con: &mut Connection, args: &[&str]| {
            let result: redis::RedisResult<Vec<i64>> =
                redis::cmd("SWL.PEEK").arg("k").arg(args).query(con);
            error_text(&result.expect_err("an error"))
        };
        assert_eq!(
            error(&mut con, &["1000", "5", "0", "PENALIZE"]),
            "ERR syntax error"
        );
        assert_eq!(
            error(&mut con, &["1000", "x", "0"]),
            "ERR limit must be an integer from 0 to 9007199254740991"
        );
        assert_eq!(
            error(&mut con, &["1000", "5", "0", "WINDOW", "0", "1"]),
            "ERR window_ms must be an integer from 1 to 9007199254740991"
        );
        let _: () = redis::cmd("SET").arg("s").arg("v").query(&mut con).unwrap();
        let result: redis::RedisResult<Vec<i64>> = redis::cmd("SWL.PEEK")
            .arg("s")
            .arg(&["1000", "5", "0"])
            .query(&mut con);
        assert_eq!(
            error_text(&result.expect_err("an error")),
            "WRONGTYPE Operation against a key holding the wrong kind of value"
        );
    });
}

#[test]
fn peek_runs_on_a_replica() {
    for_each_encoding(|encoding| {
        let master = Server::with(encoding.config());
        let replica = start_replica(&master, Config::default());
        let mut con = master.connect();
        check(&mut con, "r", &["60000", "3", "1000"]);
        check(&mut con, "r", &["60000", "3", "2000"]);
        wait_for_replicas(&mut con, 1);
        let args: Vec<String> = ["60000", "3", "3000"].map(String::from).to_vec();
        let mut on_replica = replica.connect();
        assert_eq!(peek(&mut on_replica, "r", &args), [1, 3, 0, -1, 60000]);
        // CHECK writes, so a read-only replica refuses it.
        let refused: redis::RedisResult<Vec<i64>> = redis::cmd("SWL.CHECK")
            .arg("r")
            .arg(&["60000", "3", "3000"])
            .query(&mut on_replica);
        let error = error_text(&refused.expect_err("refused"));
        assert!(error.starts_with("READONLY"), "{error}");
    });
}

#[test]
fn a_user_with_read_only_key_access_can_peek_but_not_check() {
    for_each_encoding(|encoding| {
        let server = Server::with(encoding.config());
        let mut admin = server.connect();
        check(&mut admin, "rl:a", &["60000", "3", "1000"]);
        let _: () = redis::cmd("ACL")
            .arg(&[
                "SETUSER",
                "reader",
                "on",
                ">secret",
                "%R~rl:*",
                "+swl.peek",
                "+swl.check",
            ])
            .query(&mut admin)
            .unwrap();
        let mut reader = redis::Client::open(format!(
            "redis://reader:secret@127.0.0.1:{}/",
            server.port()
        ))
        .and_then(|c| c.get_connection())
        .expect("connect as reader");
        let args: Vec<String> = ["60000", "3", "2000"].map(String::from).to_vec();
        assert_eq!(peek(&mut reader, "rl:a", &args), [1, 3, 1, -1, 60000]);
        let denied: redis::RedisResult<Vec<i64>> = redis::cmd("SWL.CHECK")
            .arg("rl:a")
            .arg(&args)
            .query(&mut reader);
        let error = error_text(&denied.expect_err("no write access"));
        assert!(error.starts_with("NOPERM"), "{error}");
        assert_eq!(contents(&mut admin, b"rl:a").len(), 1);
    });
}
