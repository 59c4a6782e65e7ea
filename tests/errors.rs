//! Every bad argument gets an exact error naming it, and the key is exactly
//! as it was before the failed call.

mod support;

use support::{check, check_error, snapshot, Server};

const MAX: &str = "9007199254740991";
const OVER: &str = "9007199254740992";
const WINDOW_ERR: &str = "ERR window_ms must be an integer from 1 to 9007199254740991";
const LIMIT_ERR: &str = "ERR limit must be an integer from 0 to 9007199254740991";
const NOW_ERR: &str = "ERR now_ms must be an integer from 0 to 9007199254740991, or *";
const COST_ERR: &str = "ERR cost must be an integer from 1 to 100000";
const ARITY_ERR: &str = "ERR wrong number of arguments for 'swl.check' command";
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
    let before = snapshot(&mut con, b"k");
    assert_eq!(check_error(&mut con, b"k", args), expected, "args {args:?}");
    assert_eq!(snapshot(&mut con, b"k"), before, "key changed by {args:?}");
}

fn server_with_a_log() -> Server {
    let server = Server::start();
    let mut con = server.connect();
    // Entries that a successful check at now = 10^9 would trim; the window
    // keeps the key's expiry an hour away.
    check(&mut con, "k", &["3600000", "5", "100"]);
    check(&mut con, "k", &["3600000", "5", "200"]);
    server
}

#[test]
fn bad_window_ms_is_named() {
    let server = server_with_a_log();
    for bad in MALFORMED.iter().chain(&[&b"0"[..]]) {
        assert_error_leaves_key(&server, &[bad, b"5", b"1000000000"], WINDOW_ERR);
    }
}

#[test]
fn bad_limit_is_named() {
    let server = server_with_a_log();
    for bad in MALFORMED {
        assert_error_leaves_key(&server, &[b"1000", bad, b"1000000000"], LIMIT_ERR);
    }
}

#[test]
fn bad_now_ms_is_named() {
    let server = server_with_a_log();
    for bad in MALFORMED.iter().chain(&[&b"**"[..], b"* ", b"now"]) {
        assert_error_leaves_key(&server, &[b"1000", b"5", bad], NOW_ERR);
    }
}

#[test]
fn bad_cost_is_named() {
    let server = server_with_a_log();
    for bad in MALFORMED.iter().chain(&[&b"0"[..], b"100001"]) {
        assert_error_leaves_key(
            &server,
            &[b"1000", b"5", b"1000000000", b"COST", bad],
            COST_ERR,
        );
    }
}

#[test]
fn the_largest_values_are_accepted() {
    let server = Server::start();
    let mut con = server.connect();
    assert_eq!(
        check(&mut con, "max", &[MAX, MAX, MAX, "COST", "100000"]),
        [1, 9007199254740991, 9007199254640991, -1, 9007199254740991]
    );
}

#[test]
fn wrong_arity_is_redis_own_error() {
    let server = server_with_a_log();
    assert_error_leaves_key(&server, &[b"1000", b"5"], ARITY_ERR);
    assert_error_leaves_key(&server, &[b"1000"], ARITY_ERR);
    assert_error_leaves_key(&server, &[], ARITY_ERR);
    let mut con = server.connect();
    let error: redis::RedisError = redis::cmd("SWL.CHECK").query::<()>(&mut con).unwrap_err();
    assert_eq!(support::error_text(&error), ARITY_ERR);
}

#[test]
fn unknown_repeated_or_incomplete_options_are_syntax_errors() {
    let server = server_with_a_log();
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
}

#[test]
fn another_type_is_wrongtype_and_untouched() {
    let server = Server::start();
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
}

#[test]
fn argument_errors_come_before_the_key_type() {
    let server = Server::start();
    let mut con = server.connect();
    let _: () = redis::cmd("SET")
        .arg("k")
        .arg("value")
        .query(&mut con)
        .unwrap();
    assert_error_leaves_key(&server, &[b"x", b"5", b"*"], WINDOW_ERR);
}
