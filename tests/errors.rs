//! Every bad argument gets an exact error naming it, and the key is exactly
//! as it was before the failed call.

mod support;

use support::{check, command_error, for_each_encoding, snapshot, Encoding, Rng, Server};

const MAX: &str = "9007199254740991";
const OVER: &str = "9007199254740992";
const WINDOW_ERR: &str = "ERR window_ms must be an integer from 1 to 9007199254740991";
const LIMIT_ERR: &str = "ERR limit must be an integer from 0 to 9007199254740991";
const NOW_ERR: &str = "ERR now_ms must be an integer from 0 to 9007199254740991, or *";
const COST_ERR: &str = "ERR cost must be an integer from 1 to 100000";
const WINDOWS_ERR: &str = "ERR too many windows: at most 100 per call";
const ARITY_ERR: &str = "ERR wrong number of arguments for 'swl.check' command";
/// The commands that change a log take the same arguments (PENALIZE aside)
/// and fail alike: every case below runs on each.
const WRITERS: [&str; 2] = ["SWL.CHECK", "SWL.REFUND"];
const SYNTAX_ERR: &str = "ERR syntax error";
const WRONGTYPE_ERR: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

/// Malformed integers: signs, spaces, fractions, exponents, hex, leading
/// zeros, empty, NUL, non-UTF-8 and out of range.
const MALFORMED: &[&[u8]] = &[
    b"",
    b"-1",
    b"+1",
    b" 1",
    b"1 ",
    b"1.0",
    b"1e3",
    b"0x10",
    b"01",
    b"abc",
    b"1\0",
    b"\xff",
    b"-0",
    b"99999999999999999999999999",
    OVER.as_bytes(),
];

fn assert_error_leaves_key(server: &Server, args: &[&[u8]], expected: &str) {
    let mut con = server.connect();
    for command in WRITERS {
        let expected = expected.replace("'swl.check'", &format!("'{}'", command.to_lowercase()));
        let before = snapshot(&mut con, b"k");
        assert_eq!(
            command_error(&mut con, command, b"k", args),
            expected,
            "{command} {args:?}"
        );
        assert_eq!(
            snapshot(&mut con, b"k"),
            before,
            "key changed by {command} {args:?}"
        );
    }
}

fn server_with_a_log(encoding: Encoding) -> Server {
    let server = Server::with(encoding.config());
    let mut con = server.connect();
    // Entries that a successful check at now = 10^9 would trim; the window
    // keeps the key's expiry an hour away.
    check(&mut con, "k", &["3600000", "5", "100"]);
    check(&mut con, "k", &["3600000", "5", "200"]);
    server
}

#[test]
fn bad_window_ms_is_named() {
    for_each_encoding(|encoding| {
        let server = server_with_a_log(encoding);
        for bad in MALFORMED.iter().chain(&[&b"0"[..]]) {
            assert_error_leaves_key(&server, &[bad, b"5", b"1000000000"], WINDOW_ERR);
        }
    });
}

#[test]
fn bad_limit_is_named() {
    for_each_encoding(|encoding| {
        let server = server_with_a_log(encoding);
        for bad in MALFORMED {
            assert_error_leaves_key(&server, &[b"1000", bad, b"1000000000"], LIMIT_ERR);
        }
    });
}

#[test]
fn bad_now_ms_is_named() {
    for_each_encoding(|encoding| {
        let server = server_with_a_log(encoding);
        for bad in MALFORMED.iter().chain(&[&b"**"[..], b"* ", b"now"]) {
            assert_error_leaves_key(&server, &[b"1000", b"5", bad], NOW_ERR);
        }
    });
}

#[test]
fn bad_cost_is_named() {
    for_each_encoding(|encoding| {
        let server = server_with_a_log(encoding);
        for bad in MALFORMED.iter().chain(&[&b"0"[..], b"100001"]) {
            assert_error_leaves_key(
                &server,
                &[b"1000", b"5", b"1000000000", b"COST", bad],
                COST_ERR,
            );
        }
    });
}

/// The first window and `n - 1` WINDOW clauses, then `tail`.
fn with_windows(n: usize, tail: &[&'static [u8]]) -> Vec<&'static [u8]> {
    let mut args: Vec<&[u8]> = vec![b"1000", b"5", b"1000000000"];
    for _ in 1..n {
        args.extend([&b"WINDOW"[..], b"10", b"3"]);
    }
    args.extend(tail);
    args
}

#[test]
fn more_than_a_hundred_windows_are_refused_naming_the_maximum() {
    for_each_encoding(|encoding| {
        let server = server_with_a_log(encoding);
        assert_error_leaves_key(&server, &with_windows(101, &[]), WINDOWS_ERR);
        // Refused at the keyword past the maximum, whatever follows it.
        assert_error_leaves_key(&server, &with_windows(100, &[b"WINDOW", b"x"]), WINDOWS_ERR);
        assert_error_leaves_key(&server, &with_windows(100, &[b"WINDOW"]), WINDOWS_ERR);
        // The hundredth window is taken: a bad argument after it is named.
        assert_error_leaves_key(&server, &with_windows(100, &[b"COST", b"0"]), COST_ERR);
        let mut con = server.connect();
        let args: Vec<String> = with_windows(100, &[])
            .iter()
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        // Two entries in the hour (trimmed by a check at 10^9): the
        // windows of 10 ms with limit 3 all admit.
        assert_eq!(check(&mut con, "k", &args), [1, 3, 2, -1, 1000]);
    });
}

#[test]
fn the_largest_values_are_accepted() {
    for_each_encoding(|encoding| {
        let server = Server::with(encoding.config());
        let mut con = server.connect();
        assert_eq!(
            check(&mut con, "max", &[MAX, MAX, MAX, "COST", "100000"]),
            [1, 9007199254740991, 9007199254640991, -1, 9007199254740991]
        );
    });
}

#[test]
fn wrong_arity_is_redis_own_error() {
    for_each_encoding(|encoding| {
        let server = server_with_a_log(encoding);
        assert_error_leaves_key(&server, &[b"1000", b"5"], ARITY_ERR);
        assert_error_leaves_key(&server, &[b"1000"], ARITY_ERR);
        assert_error_leaves_key(&server, &[], ARITY_ERR);
        let mut con = server.connect();
        let error: redis::RedisError = redis::cmd("SWL.CHECK").query::<()>(&mut con).unwrap_err();
        assert_eq!(support::error_text(&error), ARITY_ERR);
    });
}

#[test]
fn penalize_is_a_syntax_error_for_a_refund() {
    for_each_encoding(|encoding| {
        let server = server_with_a_log(encoding);
        let mut con = server.connect();
        let before = snapshot(&mut con, b"k");
        for args in [
            &["1000", "5", "*", "PENALIZE"][..],
            &["1000", "5", "*", "COST", "1", "PENALIZE"],
        ] {
            let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
            assert_eq!(
                command_error(&mut con, "SWL.REFUND", b"k", &args),
                SYNTAX_ERR
            );
        }
        assert_eq!(snapshot(&mut con, b"k"), before);
    });
}

#[test]
fn unknown_repeated_or_incomplete_options_are_syntax_errors() {
    for_each_encoding(|encoding| {
        let server = server_with_a_log(encoding);
        let base: &[&[u8]] = &[b"1000", b"5", b"1000000000"];
        let options: &[&[&[u8]]] = &[
            &[b"NOPE"],
            &[b"COST"],
            &[b"COST", b"1", b"COST", b"1"],
            &[b"COST", b"1", b"extra"],
            &[b""],
            &[b"COST\0", b"1"],
        ];
        for extra in options {
            let args: Vec<&[u8]> = base.iter().chain(extra.iter()).copied().collect();
            assert_error_leaves_key(&server, &args, SYNTAX_ERR);
        }
    });
}

#[test]
fn another_type_is_wrongtype_and_untouched() {
    for_each_encoding(|encoding| {
        let server = Server::with(encoding.config());
        let mut con = server.connect();
        let _: () = redis::cmd("SET")
            .arg("k")
            .arg("value")
            .query(&mut con)
            .unwrap();
        let _: () = redis::cmd("PEXPIRE")
            .arg("k")
            .arg(100000)
            .query(&mut con)
            .unwrap();
        assert_error_leaves_key(&server, &[b"1000", b"5", b"*"], WRONGTYPE_ERR);
        let _: () = redis::cmd("DEL").arg("k").query(&mut con).unwrap();
        let _: () = redis::cmd("RPUSH")
            .arg("k")
            .arg("a")
            .query(&mut con)
            .unwrap();
        assert_error_leaves_key(&server, &[b"1000", b"0", b"*"], WRONGTYPE_ERR);
    });
}

#[test]
fn argument_errors_come_before_the_key_type() {
    for_each_encoding(|encoding| {
        let server = Server::with(encoding.config());
        let mut con = server.connect();
        let _: () = redis::cmd("SET")
            .arg("k")
            .arg("value")
            .query(&mut con)
            .unwrap();
        assert_error_leaves_key(&server, &[b"x", b"5", b"*"], WINDOW_ERR);
    });
}

/// A value that is a well-formed compact log (header, two live slots at
/// 100 and 200, six free ones).
fn compact_log() -> Vec<u8> {
    let mut value = b"SWLc\x01\x04\0\0".to_vec();
    value.extend(100u64.to_le_bytes());
    value.extend([0u8; 8]);
    value.extend([1, 0, 0, 0, 101, 0, 0, 0]);
    value.extend([0u8; 24]);
    value
}

#[test]
fn strings_that_are_not_compact_logs_are_wrongtype_and_untouched() {
    let server = Server::start();
    let mut con = server.connect();
    let good = compact_log();
    let _: () = redis::cmd("SET")
        .arg("k")
        .arg(&good)
        .query(&mut con)
        .unwrap();
    let entries: Vec<i64> = redis::cmd("SWL.ENTRIES").arg("k").query(&mut con).unwrap();
    assert_eq!(entries, [100, 200]);
    let corrupt = |at: usize, byte: u8| {
        let mut value = good.clone();
        value[at] = byte;
        value
    };
    let mut out_of_order = good.clone();
    out_of_order[24] = 102;
    let bad: Vec<Vec<u8>> = vec![
        b"123".to_vec(),
        b"value".to_vec(),
        good[..40].to_vec(),
        good[..good.len() - 1].to_vec(),
        corrupt(0, b'X'),
        corrupt(4, 2),
        corrupt(5, 3),
        corrupt(6, 1),
        corrupt(15, 0x80),
        corrupt(16, 9),
        corrupt(23, 1),
        out_of_order,
        vec![b'x'; 100],
    ];
    for value in &bad {
        let _: () = redis::cmd("SET")
            .arg("k")
            .arg(value)
            .query(&mut con)
            .unwrap();
        let _: () = redis::cmd("PEXPIRE")
            .arg("k")
            .arg(100000)
            .query(&mut con)
            .unwrap();
        assert_error_leaves_key(&server, &[b"1000", b"5", b"*"], WRONGTYPE_ERR);
        let before = snapshot(&mut con, b"k");
        for command in ["SWL.PEEK", "SWL.ENTRIES"] {
            let mut cmd = redis::cmd(command);
            cmd.arg("k");
            if command == "SWL.PEEK" {
                cmd.arg(&["1000", "5", "*"]);
            }
            let reply: redis::RedisResult<redis::Value> = cmd.query(&mut con);
            let error = reply.expect_err(command);
            assert_eq!(
                support::error_text(&error),
                WRONGTYPE_ERR,
                "{command} {value:?}"
            );
        }
        assert_eq!(snapshot(&mut con, b"k"), before, "{value:?}");
    }
}

#[test]
/// A check reads O(log N) of a value: its header, bounds and the slots it
/// searches. Every mutation either gets WRONGTYPE with the value untouched
/// or a well-formed reply; SWL.ENTRIES reads every slot and refuses what
/// is out of order anywhere.
fn mutated_compact_logs_never_crash_the_server_or_read_past_the_value() {
    let server = Server::start();
    let mut con = server.connect();
    let good = compact_log();
    let mut rng = Rng(0xfa11_0fde_ad5e_ed00);
    let mut outcomes = [0usize; 2];
    for _ in 0..1500 {
        let mut value = good.clone();
        for _ in 0..1 + rng.below(4) {
            let at = rng.below(value.len() as u64) as usize;
            value[at] = rng.below(256) as u8;
        }
        if rng.below(4) == 0 {
            value.truncate(value.len() - 1 - rng.below(20) as usize);
        }
        let _: () = redis::cmd("SET")
            .arg("m")
            .arg(&value)
            .query(&mut con)
            .unwrap();
        let reply: redis::RedisResult<Vec<i64>> = redis::cmd("SWL.CHECK")
            .arg("m")
            .arg(&["1000", "5", "150", "COST", "2"])
            .query(&mut con);
        match reply {
            Ok(reply) => {
                assert_eq!(reply.len(), 6);
                assert_eq!(reply[5], 1000, "{reply:?}");
                assert!([0, 1].contains(&reply[0]) && reply[1] == 5, "{reply:?}");
                assert!((0..=5).contains(&reply[2]), "{reply:?}");
                outcomes[0] += 1;
                let entries: redis::RedisResult<Vec<i64>> =
                    redis::cmd("SWL.ENTRIES").arg("m").query(&mut con);
                if let Ok(entries) = entries {
                    assert!(entries.windows(2).all(|w| w[0] <= w[1]), "{entries:?}");
                }
            }
            Err(error) => {
                assert_eq!(support::error_text(&error), WRONGTYPE_ERR);
                let after: Vec<u8> = redis::cmd("GET").arg("m").query(&mut con).unwrap();
                assert_eq!(after, value, "a refused value is left as it was");
                outcomes[1] += 1;
            }
        }
    }
    assert!(
        outcomes.iter().all(|&n| n > 100),
        "accepted, refused: {outcomes:?}"
    );
    let pong: String = redis::cmd("PING").query(&mut con).unwrap();
    assert_eq!(pong, "PONG");
}
