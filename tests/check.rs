//! SWL.CHECK against a real redis-server: admission, the window boundary,
//! same-millisecond requests, COST, the reply fields, expiry and `*`.

mod support;

use support::{
    check, contents, entries, expire_time, for_each_encoding, pttl, scores, server_ms, Contents,
    Encoding, Server,
};

#[test]
fn admits_up_to_the_limit_then_denies() {
    for_each_encoding(|encoding| {
        let server = Server::with(encoding.config());
        let mut con = server.connect();
        assert_eq!(
            check(&mut con, "k", &["1000", "3", "5000"]),
            [1, 3, 2, -1, 1000]
        );
        assert_eq!(
            check(&mut con, "k", &["1000", "3", "5100"]),
            [1, 3, 1, -1, 1000]
        );
        assert_eq!(
            check(&mut con, "k", &["1000", "3", "5200"]),
            [1, 3, 0, -1, 1000]
        );
        // Full: the oldest entry (5000) leaves the window at 6000.
        assert_eq!(
            check(&mut con, "k", &["1000", "3", "5300"]),
            [0, 3, 0, 700, 900]
        );
        assert_eq!(
            check(&mut con, "k", &["1000", "3", "5999"]),
            [0, 3, 0, 1, 201]
        );
        assert_eq!(scores(&mut con, "k"), [5000.0, 5100.0, 5200.0]);
        // At 6000 the entry at 5000 is out (score <= t - W) and is trimmed.
        assert_eq!(
            check(&mut con, "k", &["1000", "3", "6000"]),
            [1, 3, 0, -1, 1000]
        );
        assert_eq!(scores(&mut con, "k"), [5100.0, 5200.0, 6000.0]);
    });
}

#[test]
fn entry_at_window_edge_is_out_and_one_later_is_in() {
    for_each_encoding(|encoding| {
        let server = Server::with(encoding.config());
        let mut con = server.connect();
        check(&mut con, "edge", &["1000", "1", "4000"]);
        // t - W = 4000: the entry at 4000 has left, the request is admitted.
        assert_eq!(
            check(&mut con, "edge", &["1000", "1", "5000"]),
            [1, 1, 0, -1, 1000]
        );
        assert_eq!(scores(&mut con, "edge"), [5000.0]);
        // t - W + 1 = 5000: the entry at 5000 is still in, the request is denied.
        assert_eq!(
            check(&mut con, "edge", &["1000", "1", "5999"]),
            [0, 1, 0, 1, 1]
        );
        assert_eq!(scores(&mut con, "edge"), [5000.0]);
    });
}

#[test]
fn same_millisecond_requests_are_all_counted() {
    for_each_encoding(|encoding| {
        let server = Server::with(encoding.config());
        let mut con = server.connect();
        for remaining in [4, 3, 2, 1, 0] {
            assert_eq!(
                check(&mut con, "ms", &["1000", "5", "7000"]),
                [1, 5, remaining, -1, 1000]
            );
        }
        assert_eq!(
            check(&mut con, "ms", &["1000", "5", "7000"]),
            [0, 5, 0, 1000, 1000]
        );
        assert_eq!(scores(&mut con, "ms"), [7000.0; 5]);
        if encoding == Encoding::Zset {
            let entries = entries(&mut con, b"ms");
            let mut members: Vec<&Vec<u8>> = entries.iter().map(|(m, _)| m).collect();
            members.sort();
            members.dedup();
            assert_eq!(members.len(), 5, "every request has its own member");
            for (member, _) in &entries {
                assert!(member.len() <= 32, "member of {} bytes", member.len());
            }
        }
    });
}

#[test]
fn cost_records_that_many_entries_or_none() {
    for_each_encoding(|encoding| {
        let server = Server::with(encoding.config());
        let mut con = server.connect();
        assert_eq!(
            check(&mut con, "c", &["1000", "5", "100", "COST", "3"]),
            [1, 5, 2, -1, 1000]
        );
        assert_eq!(scores(&mut con, "c"), [100.0; 3]);
        // 3 + 3 > 5: denied; the oldest one must leave, at 1100.
        assert_eq!(
            check(&mut con, "c", &["1000", "5", "200", "cost", "3"]),
            [0, 5, 2, 900, 900]
        );
        assert_eq!(scores(&mut con, "c"), [100.0; 3]);
        assert_eq!(
            check(&mut con, "c", &["1000", "5", "200", "Cost", "2"]),
            [1, 5, 0, -1, 1000]
        );
        assert_eq!(scores(&mut con, "c"), [100.0, 100.0, 100.0, 200.0, 200.0]);
        // Needs 4 entries gone: the fourth oldest is at 200, out at 1200.
        assert_eq!(
            check(&mut con, "c", &["1000", "5", "300", "COST", "4"]),
            [0, 5, 0, 900, 900]
        );
    });
}

#[test]
fn retry_after_waits_for_the_kth_oldest_entry() {
    for_each_encoding(|encoding| {
        let server = Server::with(encoding.config());
        let mut con = server.connect();
        for t in ["1000", "1250", "1500", "1750"] {
            check(&mut con, "r", &["1000", "4", t]);
        }
        // count 4, cost 1: k = 1 -> 1000 + 1000 - 1800 = 200.
        assert_eq!(
            check(&mut con, "r", &["1000", "4", "1800"]),
            [0, 4, 0, 200, 950]
        );
        // cost 3: k = 3 -> 1500 + 1000 - 1800 = 700.
        assert_eq!(
            check(&mut con, "r", &["1000", "4", "1800", "COST", "3"]),
            [0, 4, 0, 700, 950]
        );
        // cost 4 = limit: k = 4 -> the newest, 1750 + 1000 - 1800 = 950.
        assert_eq!(
            check(&mut con, "r", &["1000", "4", "1800", "COST", "4"]),
            [0, 4, 0, 950, 950]
        );
        // cost 5 > limit: waiting cannot help.
        assert_eq!(
            check(&mut con, "r", &["1000", "4", "1800", "COST", "5"]),
            [0, 4, 0, -1, 950]
        );
    });
}

#[test]
fn entries_from_the_future_count_and_extend_the_reset() {
    for_each_encoding(|encoding| {
        let server = Server::with(encoding.config());
        let mut con = server.connect();
        check(&mut con, "f", &["1000", "2", "9000"]);
        assert_eq!(
            check(&mut con, "f", &["1000", "2", "5000"]),
            [1, 2, 0, -1, 5000]
        );
        assert_eq!(
            check(&mut con, "f", &["1000", "2", "5000"]),
            [0, 2, 0, 1000, 5000]
        );
    });
}

#[test]
fn admitted_request_sets_the_ttl_to_reset_after() {
    for_each_encoding(|encoding| {
        let server = Server::with(encoding.config());
        let mut con = server.connect();
        let reply = check(&mut con, "ttl", &["60000", "10", "1000"]);
        assert_eq!(reply, [1, 10, 9, -1, 60000]);
        let ttl = pttl(&mut con, "ttl");
        assert!((59_000..=60_000).contains(&ttl), "pttl {ttl}");
        // With the server clock the expiry is exactly the newest entry + W.
        check(&mut con, "ttl2", &["60000", "10", "*"]);
        let newest = *scores(&mut con, "ttl2").last().unwrap() as i64;
        assert_eq!(expire_time(&mut con, b"ttl2"), newest + 60000);
    });
}

#[test]
fn a_denial_after_a_window_was_widened_extends_the_expiry() {
    for_each_encoding(|encoding| {
        let server = Server::with(encoding.config());
        let mut con = server.connect();
        assert_eq!(
            check(&mut con, "cfg", &["1000", "1", "*"]),
            [1, 1, 0, -1, 1000]
        );
        // The application now asks for a minute: the entry stays in that
        // window for about 59 s more, so the key must live as long.
        let started = server_ms(&mut con) as i64;
        let reply = check(&mut con, "cfg", &["60000", "1", "*"]);
        let ended = server_ms(&mut con) as i64;
        assert_eq!(reply[..3], [0, 1, 0]);
        assert_eq!(reply[3], reply[4]);
        let recorded = scores(&mut con, "cfg")[0] as i64;
        let checked_at = recorded + 60000 - reply[4];
        assert!(
            (started..=ended).contains(&checked_at),
            "reset {} from {recorded}, clock {started}..{ended}",
            reply[4]
        );
        assert_eq!(expire_time(&mut con, b"cfg"), recorded + 60000);
    });
}

#[test]
fn a_denial_never_shortens_an_expiry() {
    for_each_encoding(|encoding| {
        let server = Server::with(encoding.config());
        let mut con = server.connect();
        check(&mut con, "s", &["60000", "1", "*"]);
        let long = expire_time(&mut con, b"s");
        // A narrower window now: the denial's reset is about 1 s.
        let reply = check(&mut con, "s", &["1000", "0", "*"]);
        assert_eq!(reply[..4], [0, 0, 0, -1]);
        assert!(reply[4] <= 1000, "{reply:?}");
        assert_eq!(expire_time(&mut con, b"s"), long);
    });
}

#[test]
fn figures_are_exact_past_two_to_the_53() {
    for_each_encoding(|encoding| {
        let server = Server::with(encoding.config());
        let mut con = server.connect();
        let max = "9007199254740991";
        assert_eq!(
            check(&mut con, "top", &["1000", "2", max]),
            [1, 2, 1, -1, 1000]
        );
        // Back to time 0: the entry at 2^53-1 leaves at 2^53-1 + 1000.
        assert_eq!(
            check(&mut con, "top", &["1000", "2", "0"]),
            [1, 2, 0, -1, 9_007_199_254_741_991]
        );
        assert_eq!(
            check(&mut con, "top", &["1000", "2", "0"]),
            [0, 2, 0, 1000, 9_007_199_254_741_991]
        );
        assert_eq!(scores(&mut con, "top"), [0.0, 9_007_199_254_740_991.0]);
        let clock = server_ms(&mut con) as i64;
        let expiry = expire_time(&mut con, b"top") - 9_007_199_254_741_991;
        assert!(
            (clock - 1000..=clock).contains(&expiry),
            "expiry set at {expiry}, clock {clock}"
        );
        assert_eq!(
            check(&mut con, "wide", &[max, max, "0", "WINDOW", "1", max]),
            [
                1,
                9_007_199_254_740_991,
                9_007_199_254_740_990,
                -1,
                9_007_199_254_740_991
            ]
        );
    });
}

#[test]
fn denied_request_keeps_an_existing_ttl() {
    for_each_encoding(|encoding| {
        let server = Server::with(encoding.config());
        let mut con = server.connect();
        check(&mut con, "d", &["60000", "1", "1000"]);
        let custom = server_ms(&mut con) as i64 + 3_600_000;
        let _: () = redis::cmd("PEXPIREAT")
            .arg("d")
            .arg(custom)
            .query(&mut con)
            .unwrap();
        assert_eq!(
            check(&mut con, "d", &["60000", "1", "2000"]),
            [0, 1, 0, 59000, 59000]
        );
        assert_eq!(expire_time(&mut con, b"d"), custom);
    });
}

#[test]
fn denied_request_gives_a_key_without_ttl_one() {
    for_each_encoding(|encoding| {
        let server = Server::with(encoding.config());
        let mut con = server.connect();
        check(&mut con, "p", &["60000", "1", "1000"]);
        let _: () = redis::cmd("PERSIST").arg("p").query(&mut con).unwrap();
        assert_eq!(expire_time(&mut con, b"p"), -1);
        assert_eq!(
            check(&mut con, "p", &["60000", "1", "31000"]),
            [0, 1, 0, 30000, 30000]
        );
        let ttl = pttl(&mut con, "p");
        assert!((29_000..=30_000).contains(&ttl), "pttl {ttl}");
    });
}

#[test]
fn star_uses_the_server_clock() {
    for_each_encoding(|encoding| {
        let server = Server::with(encoding.config());
        let mut con = server.connect();
        let before = server_ms(&mut con);
        assert_eq!(
            check(&mut con, "now", &["1000", "5", "*"]),
            [1, 5, 4, -1, 1000]
        );
        let after = server_ms(&mut con);
        let recorded = scores(&mut con, "now")[0] as u64;
        assert!(
            (before..=after).contains(&recorded),
            "{before} <= {recorded} <= {after}"
        );
    });
}

#[test]
fn zero_limit_denies_and_creates_nothing() {
    for_each_encoding(|encoding| {
        let server = Server::with(encoding.config());
        let mut con = server.connect();
        assert_eq!(
            check(&mut con, "zero", &["1000", "0", "5000"]),
            [0, 0, 0, -1, 0]
        );
        assert_eq!(
            check(&mut con, "zero", &["1000", "0", "*"]),
            [0, 0, 0, -1, 0]
        );
        let exists: i64 = redis::cmd("EXISTS").arg("zero").query(&mut con).unwrap();
        assert_eq!(exists, 0);
    });
}

#[test]
fn a_check_that_empties_the_log_leaves_no_key() {
    for_each_encoding(|encoding| {
        let server = Server::with(encoding.config());
        let mut con = server.connect();
        check(&mut con, "gone", &["1000", "2", "1000"]);
        check(&mut con, "gone", &["1000", "2", "1500"]);
        // Everything left the window and the cost can never fit: nothing stays.
        assert_eq!(
            check(&mut con, "gone", &["1000", "2", "9000", "COST", "3"]),
            [0, 2, 2, -1, 0]
        );
        let exists: i64 = redis::cmd("EXISTS").arg("gone").query(&mut con).unwrap();
        assert_eq!(exists, 0);
        // Partly out: only the old entry goes.
        check(&mut con, "part", &["1000", "5", "1000"]);
        check(&mut con, "part", &["1000", "5", "1500"]);
        assert_eq!(
            check(&mut con, "part", &["1000", "5", "2200", "COST", "9"]),
            [0, 5, 4, -1, 300]
        );
        assert_eq!(scores(&mut con, "part"), [1500.0]);
    });
}

#[test]
fn binary_keys_work_nul_included() {
    for_each_encoding(|encoding| {
        let server = Server::with(encoding.config());
        let mut con = server.connect();
        let key: &[u8] = b"rl:\x00\xff\r\n user";
        let reply: Vec<i64> = redis::cmd("SWL.CHECK")
            .arg(key)
            .arg(&["1000", "2", "100"])
            .query(&mut con)
            .unwrap();
        assert_eq!(reply, [1, 2, 1, -1, 1000, 1000]);
        assert_eq!(contents(&mut con, key).times(), [100.0]);
        assert_eq!(contents(&mut con, b"rl:"), Contents::Missing);
    });
}

/// The script most teams run today, with the timestamp as the member.
const USUAL_SCRIPT: &str = r#"
local key, window, limit, now = KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
if redis.call('ZCARD', key) < limit then
  redis.call('ZADD', key, now, now)
  redis.call('PEXPIRE', key, window)
  return 1
end
return 0
"#;

#[test]
fn a_key_written_by_the_usual_script_works_unchanged() {
    let server = Server::start();
    let mut con = server.connect();
    for now in [1000, 1100, 1200] {
        let allowed: i64 = redis::cmd("EVAL")
            .arg(USUAL_SCRIPT)
            .arg(1)
            .arg("legacy")
            .arg(&[10000, 3, now])
            .query(&mut con)
            .unwrap();
        assert_eq!(allowed, 1);
    }
    assert_eq!(
        check(&mut con, "legacy", &["10000", "4", "1300"]),
        [1, 4, 0, -1, 10000]
    );
    assert_eq!(
        check(&mut con, "legacy", &["10000", "4", "1400"]),
        [0, 4, 0, 9600, 9900]
    );
    let entries = entries(&mut con, b"legacy");
    let members: Vec<&[u8]> = entries.iter().take(3).map(|(m, _)| m.as_slice()).collect();
    assert_eq!(members, [&b"1000"[..], b"1100", b"1200"]);
    // The trim also removes the script's entries once they leave.
    assert_eq!(
        check(&mut con, "legacy", &["10000", "4", "11100"]),
        [1, 4, 1, -1, 10000]
    );
    assert_eq!(scores(&mut con, "legacy"), [1200.0, 1300.0, 11100.0]);
}

#[test]
fn many_entries_trim_in_one_call() {
    let server = Server::start();
    let mut con = server.connect();
    // Enough entries that Redis converts the set to a skiplist.
    for t in 0..300 {
        check(
            &mut con,
            "big",
            &["1000000", "1000", &(1000 + t).to_string()],
        );
    }
    let encoding: String = redis::cmd("OBJECT")
        .arg("ENCODING")
        .arg("big")
        .query(&mut con)
        .unwrap();
    assert_eq!(encoding, "skiplist");
    // At t = 1001150 the 151 entries 1000..=1150 have left the window.
    let reply = check(&mut con, "big", &["1000000", "1000", "1001150"]);
    assert_eq!(reply, [1, 1000, 850, -1, 1000000]);
    let left = scores(&mut con, "big");
    assert_eq!(left.len(), 150);
    assert_eq!((left[0], left[148], left[149]), (1151.0, 1299.0, 1001150.0));
}

#[test]
fn small_logs_stay_in_the_compact_encoding() {
    let server = Server::start();
    let mut con = server.connect();
    for _ in 0..128 {
        check(&mut con, "small", &["1000", "1000", "*"]);
    }
    let encoding: String = redis::cmd("OBJECT")
        .arg("ENCODING")
        .arg("small")
        .query(&mut con)
        .unwrap();
    assert_eq!(encoding, "listpack");
}
