//! The encodings are one contract: the same calls on a sorted-set log and
//! a compact log of either format version give the same replies, entries
//! and expiry; the `swl.encoding` setting decides only how new logs are
//! stored; and SWL.ENTRIES shows any of them.

mod support;

use redis::{Connection, Value};
use support::{
    error_text, load_library, load_shipped_library, set_encoding, swl_command, Config, Encoding,
    Rng, Server,
};

fn log_type(con: &mut Connection, key: &str) -> String {
    redis::cmd("TYPE").arg(key).query(con).unwrap()
}

fn entries(con: &mut Connection, key: &str) -> Result<Vec<Value>, String> {
    redis::cmd("SWL.ENTRIES")
        .arg(key)
        .query(con)
        .map_err(|e| error_text(&e))
}

/// Random valid arguments (errors are the same code for both encodings,
/// and tested on each in errors.rs): several windows, COST, PENALIZE
/// (SWL.CHECK only), times going backwards now and then, the server clock.
fn random_args(rng: &mut Rng, clock: u64, check: bool) -> Vec<String> {
    let now = match rng.below(12) {
        0 => "*".to_string(),
        1 => clock.saturating_sub(rng.below(500)).to_string(),
        2 => (clock + rng.below(300)).to_string(),
        _ => clock.to_string(),
    };
    let most = if rng.below(4) == 0 { 300 } else { 12 };
    let mut args = vec![
        (1 + rng.below(600)).to_string(),
        rng.below(most).to_string(),
        now,
    ];
    for _ in 0..rng.below(3) {
        args.extend([
            "WINDOW".into(),
            (1 + rng.below(600)).to_string(),
            rng.below(40).to_string(),
        ]);
    }
    if rng.below(3) == 0 {
        args.extend(["COST".into(), (1 + rng.below(6)).to_string()]);
    }
    if check && rng.below(3) == 0 {
        args.push("PENALIZE".into());
    }
    args
}

/// One call on both logs in one transaction, so `*` reads one clock.
/// None when the clock ticked between them: the logs are then started
/// anew on both sides.
type Both = (Vec<i64>, Vec<i64>);

fn both(con: &mut Connection, command: &str, args: &[String]) -> Option<Both> {
    let mut pipe = redis::pipe();
    pipe.atomic().cmd("TIME");
    // Each key is named after its encoding, which is set before each call
    // so that a log emptied and created anew keeps it.
    for key in ["zset", "compact"] {
        pipe.cmd("CONFIG")
            .arg("SET")
            .arg("swl.encoding")
            .arg(key)
            .ignore();
        pipe.cmd(command).arg(key).arg(args);
    }
    pipe.cmd("TIME");
    let replies: Vec<Value> = pipe.query(con).unwrap();
    let reply = |value: &Value| -> Vec<i64> { redis::from_redis_value(value).unwrap() };
    let time = |value: &Value| -> (u64, u64) { redis::from_redis_value(value).unwrap() };
    let (before, after) = (time(&replies[0]), time(&replies[3]));
    if before.0 * 1000 + before.1 / 1000 != after.0 * 1000 + after.1 / 1000 {
        let _: () = redis::cmd("DEL")
            .arg(&["zset", "compact"])
            .query(con)
            .unwrap();
        return None;
    }
    Some((reply(&replies[1]), reply(&replies[2])))
}

#[test]
fn both_encodings_give_the_same_replies_entries_and_expiry() {
    let server = Server::start();
    let mut con = server.connect();
    let mut rng = Rng(0x0e4c_0d1e_5eed_0042);
    let mut clock = 1_000_000u64;
    let mut seen = [0usize; 2];
    let mut compared = 0;
    for step in 0..4000 {
        clock += rng.below(30);
        let command = if rng.below(5) == 0 {
            "SWL.PEEK"
        } else {
            "SWL.CHECK"
        };
        let args = random_args(&mut rng, clock, command == "SWL.CHECK");
        let Some((zset, compact)) = both(&mut con, command, &args) else {
            continue;
        };
        let context = format!("step {step}: {command} {args:?}");
        assert_eq!(zset, compact, "{context}");
        assert_eq!(
            entries(&mut con, "zset"),
            entries(&mut con, "compact"),
            "{context}"
        );
        let expiry: Vec<i64> = redis::cmd("PEXPIRETIME")
            .arg("zset")
            .query(&mut con)
            .and_then(|a: i64| {
                redis::cmd("PEXPIRETIME")
                    .arg("compact")
                    .query(&mut con)
                    .map(|b: i64| vec![a, b])
            })
            .unwrap();
        assert_eq!(expiry[0], expiry[1], "{context}: expiry");
        for (key, kind) in [("zset", "zset"), ("compact", "string")] {
            let found = log_type(&mut con, key);
            assert!(
                found == kind || found == "none",
                "{context}: {key} is {found}"
            );
        }
        seen[zset[0] as usize] += 1;
        compared += 1;
    }
    assert!(compared > 3500, "compared {compared} steps");
    assert!(seen[0] > 300 && seen[1] > 300, "denials, admits: {seen:?}");
}

#[test]
fn the_setting_decides_new_logs_and_existing_ones_keep_theirs() {
    let server = Server::with(Encoding::Compact.config());
    let mut con = server.connect();
    assert_eq!(support::encoding_setting(&mut con), "compact");
    support::check(&mut con, "c", &["60000", "5", "*"]);
    assert_eq!(log_type(&mut con, "c"), "string");
    set_encoding(&mut con, Encoding::Zset);
    support::check(&mut con, "z", &["60000", "5", "*"]);
    support::check(&mut con, "c", &["60000", "5", "*"]);
    assert_eq!(log_type(&mut con, "z"), "zset");
    assert_eq!(
        log_type(&mut con, "c"),
        "string",
        "an existing log keeps its encoding"
    );
    assert_eq!(support::scores(&mut con, "c").len(), 2);
    let refused: redis::RedisResult<()> = redis::cmd("CONFIG")
        .arg("SET")
        .arg("swl.encoding")
        .arg("list")
        .query(&mut con);
    assert!(refused.is_err());
    let plain = Server::start();
    assert_eq!(support::encoding_setting(&mut plain.connect()), "zset");
}

#[test]
fn entries_lists_either_encoding_oldest_first() {
    let server = Server::start();
    let mut con = server.connect();
    for encoding in [Encoding::Zset, Encoding::Compact] {
        set_encoding(&mut con, encoding);
        let key = encoding.name();
        for now in ["300", "100", "300", "200"] {
            support::check(&mut con, key, &["1000", "10", now]);
        }
        assert_eq!(
            entries(&mut con, key),
            Ok([100, 200, 300, 300].map(Value::Int).to_vec()),
            "{key}"
        );
    }
    assert_eq!(entries(&mut con, "missing"), Ok(vec![]));
    // Scores other tools wrote show as ZRANGE shows them.
    let _: i64 = redis::cmd("ZADD")
        .arg(&["other", "4500.5", "a", "+inf", "b", "7", "c"])
        .query(&mut con)
        .unwrap();
    assert_eq!(
        entries(&mut con, "other"),
        Ok(vec![
            Value::Int(7),
            Value::BulkString(b"4500.5".to_vec()),
            Value::BulkString(b"inf".to_vec()),
        ])
    );
    let _: i64 = redis::cmd("RPUSH")
        .arg("list")
        .arg("x")
        .query(&mut con)
        .unwrap();
    assert_eq!(
        entries(&mut con, "list"),
        Err("WRONGTYPE Operation against a key holding the wrong kind of value".into())
    );
    let arity: redis::RedisResult<Value> = redis::cmd("SWL.ENTRIES").query(&mut con);
    assert_eq!(
        error_text(&arity.unwrap_err()),
        "ERR wrong number of arguments for 'swl.entries' command"
    );
}

/// As shipped, the module and the function library create compact logs:
/// the module loaded with no settings, the library loaded as it is; each
/// creates sorted sets once set to `zset`.
#[test]
fn new_logs_are_compact_unless_set_to_sorted_sets() {
    let server = Server::with(Config::as_shipped());
    load_shipped_library(&server);
    let mut con = server.connect();
    assert_eq!(support::encoding_setting(&mut con), "compact");
    let args = ["60000", "5", "1700000000000"];
    for (module, key) in [(true, "m"), (false, "l")] {
        let _: Vec<i64> = swl_command(!module, "check", key)
            .arg(&args)
            .query(&mut con)
            .unwrap();
        assert_eq!(log_type(&mut con, key), "string", "module {module}");
        assert_eq!(format_version(&mut con, key), 2, "module {module}");
    }
    set_encoding(&mut con, Encoding::Zset);
    let _: () = redis::cmd("FUNCTION")
        .arg("DELETE")
        .arg("swl")
        .query(&mut con)
        .unwrap();
    load_library(&server, Encoding::Zset);
    for (module, key) in [(true, "mz"), (false, "lz")] {
        let _: Vec<i64> = swl_command(!module, "check", key)
            .arg(&args)
            .query(&mut con)
            .unwrap();
        assert_eq!(log_type(&mut con, key), "zset", "module {module}");
    }
}

/// A compact log's format version: its fifth byte.
fn format_version(con: &mut Connection, key: &str) -> u8 {
    let value: Vec<u8> = redis::cmd("GETRANGE")
        .arg(key)
        .arg(4)
        .arg(4)
        .query(con)
        .unwrap();
    value[0]
}

/// A log 0.3 wrote (format version 1), a packed log (version 2) and a
/// sorted set serve side by side, through the module and the library,
/// whichever wrote them: each keeps its format as it grows and is trimmed,
/// and all three reply as one another.
#[test]
fn logs_of_either_format_version_serve_side_by_side() {
    let server = Server::with(Encoding::Compact1.config());
    load_library(&server, Encoding::Compact);
    let mut con = server.connect();
    let t = 1_700_000_000_000u64;
    // Written as 0.3 writes them, by the module set to compact1; then the
    // setting says compact, as after an upgrade.
    support::check(&mut con, "v1", &["60000", "50", &t.to_string()]);
    assert_eq!(format_version(&mut con, "v1"), 1);
    set_encoding(&mut con, Encoding::Zset);
    support::check(&mut con, "zset", &["60000", "50", &t.to_string()]);
    set_encoding(&mut con, Encoding::Compact);
    support::check(&mut con, "v2", &["60000", "50", &t.to_string()]);
    assert_eq!(format_version(&mut con, "v2"), 2);
    let mut rng = Rng(0x51de_b151_de00_0001);
    let mut now = t;
    for step in 0..1500 {
        now += rng.below(300);
        let time = if rng.below(8) == 0 {
            now - rng.below(3000)
        } else {
            now
        };
        let mut args = vec!["60000".to_string(), "50".into(), time.to_string()];
        if rng.below(6) == 0 {
            args.extend(["WINDOW".into(), "5000".into(), "10".into()]);
        }
        let library = rng.below(2) == 0;
        let command = if rng.below(10) == 0 {
            "refund"
        } else {
            "check"
        };
        let replies: Vec<Vec<i64>> = ["zset", "v1", "v2"]
            .iter()
            .map(|key| {
                swl_command(library, command, key)
                    .arg(&args)
                    .query(&mut con)
                    .unwrap_or_else(|e| panic!("step {step} {key}: {e}"))
            })
            .collect();
        let context = format!("step {step}: {command} {args:?} library {library}");
        assert_eq!(replies[1], replies[0], "{context}: version 1");
        assert_eq!(replies[2], replies[0], "{context}: version 2");
        let zset = entries(&mut con, "zset");
        assert_eq!(entries(&mut con, "v1"), zset, "{context}");
        assert_eq!(entries(&mut con, "v2"), zset, "{context}");
        for (key, version) in [("v1", 1), ("v2", 2)] {
            if log_type(&mut con, key) == "string" {
                assert_eq!(format_version(&mut con, key), version, "{context}: {key}");
            }
        }
    }
}
