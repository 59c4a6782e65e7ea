//! Defects a red team found where the function library (scripts/swl.lua)
//! and the module part ways, or where either leaves a key that is not a
//! log. Each test makes the same sequence through both from the same
//! starting value (the same bytes or entries, the same absolute expiry)
//! and compares the reply, what the key holds afterwards (a compact log's
//! bytes, a sorted set's times) and its expiry; where the right answer is
//! known it is asserted too. Each prints what both did, so a failure says
//! how they differ.

mod support;

use redis::{Connection, ConnectionLike, RedisError, Value};
use support::{
    error_text, load_library, server_in, server_ms, set_encoding, swl_command, Config, Encoding,
    Server, ENCODINGS, MAX_MS,
};

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

/// The module's key and the library's.
const ON_MODULE: &str = "rt:module";
const ON_LIBRARY: &str = "rt:library";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Check,
    Refund,
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::Check => "check",
            Op::Refund => "refund",
        }
    }
}

/// SWL.CHECK or SWL.REFUND through the module, FCALL swl_check or
/// swl_refund through the library.
fn command(module: bool, op: Op, key: &str, args: &[&str]) -> redis::Cmd {
    let mut cmd = swl_command(!module, op.name(), key);
    cmd.arg(args);
    cmd
}

fn call(
    con: &mut Connection,
    module: bool,
    op: Op,
    key: &str,
    args: &[&str],
) -> Result<Vec<i64>, String> {
    command(module, op, key, args)
        .query(con)
        .map_err(|e| error_text(&e))
}

fn via(module: bool) -> &'static str {
    if module {
        "module"
    } else {
        "library"
    }
}

/// A starting log: the key's DUMP (whatever its type) and its absolute
/// expiry in ms (-1 for none).
struct Start {
    dump: Vec<u8>,
    expire_at: i64,
}

/// The log under `key` as it stands, to start both from.
fn start_of(con: &mut Connection, key: &str) -> Start {
    let dump: Vec<u8> = redis::cmd("DUMP").arg(key).query(con).expect("DUMP");
    let expire_at: i64 = redis::cmd("PEXPIRETIME").arg(key).query(con).unwrap();
    assert!(expire_at != -2, "{key} holds a log");
    Start { dump, expire_at }
}

/// A string of `bytes` expiring at `expire_at` (-1: none), to start from.
fn start_with_bytes(con: &mut Connection, bytes: &[u8], expire_at: i64) -> Start {
    let _: () = redis::cmd("SET")
        .arg("rt:bytes")
        .arg(bytes)
        .query(con)
        .unwrap();
    let dump: Vec<u8> = redis::cmd("DUMP").arg("rt:bytes").query(con).unwrap();
    let _: i64 = redis::cmd("DEL").arg("rt:bytes").query(con).unwrap();
    Start { dump, expire_at }
}

/// Puts the starting log under `key`: the same value, and the same
/// absolute expiry set with PEXPIREAT.
fn put(con: &mut Connection, key: &str, start: &Start) {
    let _: () = redis::cmd("RESTORE")
        .arg(key)
        .arg(0)
        .arg(&start.dump)
        .arg("REPLACE")
        .query(con)
        .expect("RESTORE");
    if start.expire_at >= 0 {
        let set: i64 = redis::cmd("PEXPIREAT")
            .arg(key)
            .arg(start.expire_at)
            .query(con)
            .unwrap();
        assert_eq!(set, 1, "the starting expiry");
    }
}

/// What a call left in its key: nothing, a sorted set's times (its
/// members are random, so only the times compare), or a string's bytes.
#[derive(Debug, Clone, PartialEq)]
enum Left {
    Gone,
    Zset(Vec<f64>),
    Bytes(Vec<u8>),
}

fn left_in(con: &mut Connection, key: &str) -> Left {
    let kind: String = redis::cmd("TYPE").arg(key).query(con).unwrap();
    match kind.as_str() {
        "none" => Left::Gone,
        "zset" => {
            let scored: Vec<(Vec<u8>, f64)> = redis::cmd("ZRANGE")
                .arg(key)
                .arg(0)
                .arg(-1)
                .arg("WITHSCORES")
                .query(con)
                .unwrap();
            Left::Zset(scored.into_iter().map(|(_, score)| score).collect())
        }
        "string" => Left::Bytes(redis::cmd("GET").arg(key).query(con).unwrap()),
        other => panic!("{key} holds a {other}"),
    }
}

/// The encoding a log is in: a sorted set, or a compact log's format
/// version (its fifth byte); None for anything else.
fn encoding_of(left: &Left) -> Option<Encoding> {
    match left {
        Left::Zset(_) => Some(Encoding::Zset),
        Left::Bytes(bytes) if bytes.len() > 4 && &bytes[..4] == b"SWLc" => match bytes[4] {
            1 => Some(Encoding::Compact1),
            2 => Some(Encoding::Compact),
            _ => None,
        },
        _ => None,
    }
}

/// A short account of a key's contents: its kind, length and version.
fn describe(left: &Left) -> String {
    match left {
        Left::Gone => "no key".to_string(),
        Left::Zset(times) => format!("zset of {} entries", times.len()),
        Left::Bytes(bytes) => format!(
            "string of {} bytes, {}",
            bytes.len(),
            match encoding_of(left) {
                Some(Encoding::Compact1) => "format version 1",
                Some(_) => "format version 2",
                None => "not a compact log",
            }
        ),
    }
}

/// Where two contents differ: the byte ranges (at most a few) where two
/// strings do, or their descriptions.
fn difference(a: &Left, b: &Left) -> String {
    match (a, b) {
        (Left::Bytes(a), Left::Bytes(b)) => {
            let mut ranges: Vec<(usize, usize)> = Vec::new();
            for at in 0..a.len().max(b.len()) {
                if a.get(at) != b.get(at) {
                    match ranges.last_mut() {
                        Some((_, end)) if *end + 1 == at => *end = at,
                        _ => ranges.push((at, at)),
                    }
                }
            }
            let shown: Vec<String> = ranges
                .iter()
                .take(12)
                .map(|&(from, to)| {
                    let slice = |bytes: &[u8]| {
                        let end = (to + 1).min(bytes.len());
                        hex(bytes.get(from.min(end)..end).unwrap_or_default())
                    };
                    format!("{from}..={to}: {} / {}", slice(a), slice(b))
                })
                .collect();
            format!(
                "lengths {} / {}, {} differing ranges: {}",
                a.len(),
                b.len(),
                ranges.len(),
                shown.join(", ")
            )
        }
        _ => format!("{} / {}", describe(a), describe(b)),
    }
}

fn hex(bytes: &[u8]) -> String {
    let shown: String = bytes.iter().take(16).map(|b| format!("{b:02x}")).collect();
    if bytes.len() > 16 {
        format!("{shown}..")
    } else {
        shown
    }
}

/// One call's outcome: its reply (or error text), what it left, and the
/// key's absolute expiry after it (-1 none, -2 no key).
#[derive(Debug)]
struct Outcome {
    reply: Result<Vec<i64>, String>,
    left: Left,
    expiry: i64,
}

fn reply_of(value: &Value) -> Result<Vec<i64>, String> {
    match value {
        Value::ServerError(error) => Err(error_text(&RedisError::from(error.clone()))),
        other => Ok(redis::from_redis_value(other).expect("a reply of integers")),
    }
}

/// The same call on the module's key and the library's, both restored to
/// `start` first, in one transaction: TIME, the module's call, the
/// library's, TIME, and both expiries. Both calls read the server's clock
/// within the two TIMEs, so expiries set from it differ by no more than
/// the span between them (the second value); transactions are tried until
/// that span is 0 ms, where expiries set alike must be equal.
fn on_both(con: &mut Connection, start: &Start, op: Op, args: &[&str]) -> ([Outcome; 2], i64) {
    const TRIES: usize = 50;
    for attempt in 1..=TRIES {
        put(con, ON_MODULE, start);
        put(con, ON_LIBRARY, start);
        let mut pipe = redis::pipe();
        pipe.atomic()
            .cmd("TIME")
            .add_command(command(true, op, ON_MODULE, args))
            .add_command(command(false, op, ON_LIBRARY, args))
            .cmd("TIME")
            .cmd("PEXPIRETIME")
            .arg(ON_MODULE)
            .cmd("PEXPIRETIME")
            .arg(ON_LIBRARY);
        // Read raw, so an error reply inside EXEC stays in its place.
        let mut raw = con
            .req_packed_commands(&pipe.get_packed_pipeline(), 7, 1)
            .expect("the transaction");
        let items = match raw.pop() {
            Some(Value::Array(items)) if items.len() == 6 => items,
            other => panic!("EXEC replied {other:?}"),
        };
        let ms = |value: &Value| {
            let (secs, micros): (u64, u64) = redis::from_redis_value(value).expect("TIME");
            (secs * 1000 + micros / 1000) as i64
        };
        let spread = ms(&items[3]) - ms(&items[0]);
        if spread > 0 && attempt < TRIES {
            continue;
        }
        let expiry = |value: &Value| redis::from_redis_value::<i64>(value).expect("PEXPIRETIME");
        let outcomes = [
            Outcome {
                reply: reply_of(&items[1]),
                left: left_in(con, ON_MODULE),
                expiry: expiry(&items[4]),
            },
            Outcome {
                reply: reply_of(&items[2]),
                left: left_in(con, ON_LIBRARY),
                expiry: expiry(&items[5]),
            },
        ];
        return (outcomes, spread);
    }
    unreachable!()
}

/// Prints both outcomes, then the differences between them, none expected:
/// an empty list where they agree in reply, contents and expiry.
fn differences(case: &str, [module, library]: &[Outcome; 2], spread: i64) -> Vec<String> {
    eprintln!(
        "{case}\n  module:  {:?}, {}, expiry {}\n  library: {:?}, {}, expiry {}",
        module.reply,
        describe(&module.left),
        module.expiry,
        library.reply,
        describe(&library.left),
        library.expiry
    );
    let mut found = Vec::new();
    if module.reply != library.reply {
        found.push(format!(
            "{case}: replies differ: module {:?}, library {:?}",
            module.reply, library.reply
        ));
    }
    if module.left != library.left {
        found.push(format!(
            "{case}: contents differ (module / library): {}",
            difference(&module.left, &library.left)
        ));
    }
    let expiries_agree = if module.expiry < 0 || library.expiry < 0 {
        module.expiry == library.expiry
    } else {
        (module.expiry - library.expiry).abs() <= spread
    };
    if !expiries_agree {
        found.push(format!(
            "{case}: expiries differ: module {}, library {} ({} ms apart; the calls' clocks at most {spread} ms)",
            module.expiry,
            library.expiry,
            library.expiry - module.expiry
        ));
    }
    found
}

fn assert_alike(case: &str, outcomes: &[Outcome; 2], spread: i64) {
    let found = differences(case, outcomes, spread);
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// A server with the module and the library, both making new logs in
/// format version 2 (the module's default).
fn compact_server() -> Server {
    let server = Server::with(Config {
        encoding: Some(Encoding::Compact),
        ..Config::default()
    });
    load_library(&server, Encoding::Compact);
    server
}

/// `calls` checks of a window of 10^9 ms and a limit of 10^6, one at
/// `first + step * i` each, through the module: a log (format version 2)
/// of that many entries under `key`, its bytes and its expiry.
fn module_log(con: &mut Connection, key: &str, calls: u64, first: u64, step: u64) -> Start {
    let _: i64 = redis::cmd("DEL").arg(key).query(con).unwrap();
    let mut pipe = redis::pipe();
    for i in 0..calls {
        pipe.cmd("SWL.CHECK")
            .arg(key)
            .arg(1_000_000_000u64)
            .arg(1_000_000)
            .arg(first + step * i)
            .ignore();
    }
    let _: () = pipe.query(con).unwrap();
    start_of(con, key)
}

fn get(con: &mut Connection, key: &str) -> Vec<u8> {
    redis::cmd("GET").arg(key).query(con).unwrap()
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap())
}

fn u16_at(bytes: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([bytes[at], bytes[at + 1]])
}

// ---------------------------------------------------------------------
// 1. An expiry that has passed by the time a long call sets it.

/// 25 checks of COST 100,000 at 1700000000000 and 20 at 1701000000001, a
/// window of 10^12 ms: 4.5 million entries, 2.5 million of them old.
fn long_log(con: &mut Connection) -> Start {
    let _: i64 = redis::cmd("DEL").arg("rt:long").query(con).unwrap();
    let mut pipe = redis::pipe();
    for (calls, at) in [(25, 1_700_000_000_000u64), (20, 1_701_000_000_001)] {
        for _ in 0..calls {
            pipe.cmd("SWL.CHECK")
                .arg("rt:long")
                .arg(1_000_000_000_000u64)
                .arg(MAX_MS)
                .arg(at)
                .arg("COST")
                .arg(100_000)
                .ignore();
        }
    }
    let _: () = pipe.query(con).unwrap();
    let start = start_of(con, "rt:long");
    let _: i64 = redis::cmd("DEL").arg("rt:long").query(con).unwrap();
    start
}

/// A key's state read at one instant (in one read-only script, where the
/// clock stands still): whether it exists, its expiry, its type, its
/// length, and what SWL.ENTRIES makes of it (the number of entries, or
/// its error).
#[derive(Debug)]
struct State {
    exists: bool,
    expiry: i64,
    kind: String,
    len: i64,
    entries: Result<i64, String>,
}

fn state(con: &mut Connection, key: &str) -> State {
    const READ: &str = "#!lua flags=no-writes
        local key = KEYS[1]
        local kind = redis.call('TYPE', key)['ok']
        local len = kind == 'string' and redis.call('STRLEN', key) or 0
        local entries, failed = 0, ''
        if kind ~= 'none' then
          local listed = redis.pcall('SWL.ENTRIES', key)
          if listed['err'] then failed = listed['err'] else entries = #listed end
        end
        return {redis.call('EXISTS', key), redis.call('PEXPIRETIME', key), kind, len, entries, failed}";
    let (exists, expiry, kind, len, entries, failed): (i64, i64, String, i64, i64, String) =
        redis::cmd("EVAL")
            .arg(READ)
            .arg(1)
            .arg(key)
            .query(con)
            .expect("the state script");
    State {
        exists: exists == 1,
        expiry,
        kind,
        len,
        entries: if failed.is_empty() {
            Ok(entries)
        } else {
            Err(failed)
        },
    }
}

/// A key left by a call is a log with an expiry, or gone: never a string
/// without one, nor one that is not a log.
fn is_a_log_with_an_expiry(state: &State) -> bool {
    !state.exists || (state.expiry > 0 && state.entries.is_ok())
}

/// Waits (on the server's clock, polling it) until the clock has passed
/// each of `expiries` that lies within the next minute.
fn until_past(con: &mut Connection, expiries: &[i64]) {
    let now = server_ms(con) as i64;
    let last = expiries
        .iter()
        .copied()
        .filter(|&at| at > 0 && at < now + 60_000)
        .max();
    if let Some(last) = last {
        while (server_ms(con) as i64) <= last {}
    }
}

/// The call on the long log, through the module on one key and the
/// library on another: each one's reply and state right after it.
fn long_call_on_both(
    con: &mut Connection,
    start: &Start,
    op: Op,
    args: &[&str],
) -> [(Result<Vec<i64>, String>, State); 2] {
    [true, false].map(|module| {
        let key = if module { ON_MODULE } else { ON_LIBRARY };
        put(con, key, start);
        let began = server_ms(con);
        let reply = call(con, module, op, key, args);
        let ended = server_ms(con);
        let after = state(con, key);
        eprintln!(
            "{op:?} {args:?} via the {}: {reply:?}, its clock within {began}..={ended} ms; \
             then EXISTS {}, PEXPIRETIME {}, TYPE {}, STRLEN {}, SWL.ENTRIES {:?}",
            via(module),
            after.exists,
            after.expiry,
            after.kind,
            after.len,
            after.entries
        );
        (reply, after)
    })
}

/// `op` with `args` through both on the long log, the module replying
/// `expected`: the replies agree, whatever either leaves is a log with an
/// expiry, never a string without one, and once the expiries are past
/// both keys are gone.
fn long_call_leaves_no_key(op: Op, args: &[&str], expected: Vec<i64>) {
    let server = compact_server();
    let mut con = server.connect();
    let start = long_log(&mut con);
    let [(module, module_after), (library, library_after)] =
        long_call_on_both(&mut con, &start, op, args);
    until_past(&mut con, &[module_after.expiry, library_after.expiry]);
    let gone = [ON_MODULE, ON_LIBRARY].map(|key| {
        redis::cmd("EXISTS")
            .arg(key)
            .query::<i64>(&mut con)
            .unwrap()
    });
    eprintln!("afterwards: EXISTS {gone:?}");
    assert_eq!(module, Ok(expected), "the module's reply");
    assert_eq!(library, module, "the library's reply");
    assert!(
        is_a_log_with_an_expiry(&library_after),
        "the library left a key that is not a log with an expiry: {library_after:?}"
    );
    assert!(
        is_a_log_with_an_expiry(&module_after),
        "the module left a key that is not a log with an expiry: {module_after:?}"
    );
    assert_eq!(gone, [0, 0], "EXISTS after the expiry (module, library)");
}

/// A check of a 1 ms window on a log of 4.5 million entries: it trims
/// the 2.5 million old ones and admits, its newest entry a millisecond
/// ahead, so the key expires 2 ms after the call's clock; the call takes
/// longer than that in the library, where the expiry has passed when it
/// is set. On Redis 7.0 PEXPIREAT to a past time deletes the key at once,
/// and the library then wrote the value's live blocks back with SET
/// KEEPTTL: a string without an expiry, which every later call refused
/// with WRONGTYPE. The module's key is gone once its 2 ms are out, and
/// so must the library's be.
#[test]
fn an_expiry_passed_during_a_long_check_leaves_no_key() {
    // 2,000,000 entries at 1701000000001 stay (from the future), the check's
    // own makes 2,000,001; the newest leaves the 1 ms window in 2 ms.
    long_call_leaves_no_key(
        Op::Check,
        &["1", "9007199254740991", "1701000000000"],
        vec![1, MAX_MS as i64, MAX_MS as i64 - 2_000_001, -1, 2, 1],
    );
}

/// The refund of the same log with a 1 ms window: it trims the 2.5
/// million old entries, gives back 100,000 of the newest, and sets the
/// key to expire a millisecond after the call's clock (its newest entry
/// is at the refund's time). The library's refund used to set that
/// expiry before it read its reply and dropped the dead blocks with SET
/// KEEPTTL; on a loaded machine the millisecond could pass first, and it
/// left a string without an expiry.
#[test]
fn an_expiry_passed_during_a_long_refund_leaves_no_key() {
    // 1,900,000 entries left, a request of 100,000 counted as recorded.
    long_call_leaves_no_key(
        Op::Refund,
        &["1", "9007199254740991", "1701000000001", "COST", "100000"],
        vec![1, MAX_MS as i64, MAX_MS as i64 - 2_000_000, -1, 1, 1],
    );
}

// ---------------------------------------------------------------------
// 2 to 5. Logs of several blocks (format version 2) whose bytes another
// writer changed.

/// 400 entries a second apart from 1700000000000, then bit 0 of the low
/// field of block 1's first entry (byte 296) set. A check at
/// 1700001166000 with a window of 10^6 ms trims into block 1, which makes
/// the head block the damaged one: the module replied
/// [0,0,0,-1,0,1000000] and moved its head onto it (every later call then
/// WRONGTYPE), the library refused with WRONGTYPE. Both must refuse and
/// leave the bytes as they were.
#[test]
fn a_trim_onto_a_damaged_block_is_refused_by_both() {
    let server = compact_server();
    let mut con = server.connect();
    let log = module_log(&mut con, "rt:src", 400, 1_700_000_000_000, 1000);
    let mut value = get(&mut con, "rt:src");
    assert_eq!(value[4], 2, "format version 2");
    assert_eq!(
        u32_at(&value, 24 + 256 + 8),
        160,
        "block 1 starts at rank 160"
    );
    assert_eq!(value[296] & 1, 0);
    value[296] |= 1;
    let start = start_with_bytes(&mut con, &value, log.expire_at);
    let args = ["1000000", "0", "1700001166000"];
    let (outcomes, spread) = on_both(&mut con, &start, Op::Check, &args);
    let case = format!("check {args:?}, byte 296 | 1");
    let mut found = differences(&case, &outcomes, spread);
    found.extend(refused_untouched(&case, &outcomes, &value, log.expire_at));
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// Where either call did not refuse with WRONGTYPE, leaving the bytes
/// and the expiry as they were.
fn refused_untouched(
    case: &str,
    outcomes: &[Outcome; 2],
    value: &[u8],
    expire_at: i64,
) -> Vec<String> {
    let mut found = Vec::new();
    let before = Left::Bytes(value.to_vec());
    for (outcome, module) in outcomes.iter().zip([true, false]) {
        let by = via(module);
        if outcome.reply != Err(WRONGTYPE.to_string()) {
            found.push(format!(
                "{case}: the {by} replied {:?}, not WRONGTYPE",
                outcome.reply
            ));
        }
        if outcome.left != before {
            found.push(format!(
                "{case}: the {by} changed the bytes (before / after): {}",
                difference(&before, &outcome.left)
            ));
        }
        if outcome.expiry != expire_at {
            found.push(format!(
                "{case}: the {by} changed the expiry from {expire_at} to {}",
                outcome.expiry
            ));
        }
    }
    found
}

/// The 700-entry log of cases 3 to 5: entries a second apart from
/// 1700000001000, in format version 2: its starting expiry and bytes.
fn seven_hundred(con: &mut Connection) -> (Start, Vec<u8>) {
    let log = module_log(con, "rt:src", 700, 1_700_000_001_000, 1000);
    let value = get(con, "rt:src");
    assert_eq!(value[4], 2, "format version 2");
    assert!(u32_at(&value, 16) >= 3, "four blocks or more");
    assert_eq!(
        u32_at(&value, 24 + 256 + 8),
        160,
        "block 1 starts at rank 160"
    );
    assert_eq!(u16_at(&value, 24 + 3 * 256 + 14), 310, "block 3's top");
    (log, value)
}

/// Blocks 1 and 2 swapped (bytes 280..536 and 536..792): each block is
/// well formed, but they stand out of order. A check of 500 in 443001 ms
/// at 1700000700001: the module admitted ([1,500,56,-1,...]), the library
/// denied ([0,500,0,1,443000,443001]). Whichever is right, both must
/// reply alike and leave the same bytes.
#[test]
fn blocks_out_of_order_get_one_verdict_from_both() {
    let server = compact_server();
    let mut con = server.connect();
    let (log, mut value) = seven_hundred(&mut con);
    let (one, two) = value[280..792].split_at_mut(256);
    one.swap_with_slice(two);
    let start = start_with_bytes(&mut con, &value, log.expire_at);
    let args = ["443001", "500", "1700000700001"];
    let (outcomes, spread) = on_both(&mut con, &start, Op::Check, &args);
    for (outcome, module) in outcomes.iter().zip([true, false]) {
        eprintln!(
            "  the {}'s bytes against the start: {}",
            via(module),
            difference(&Left::Bytes(value.clone()), &outcome.left)
        );
    }
    assert_alike(
        &format!("check {args:?}, blocks 1 and 2 swapped"),
        &outcomes,
        spread,
    );
}

/// Block 1's rank (bytes 288..292) set to 200 where it is 160: a check at
/// 1700000160001 (in block 1) with a window of 10^9 ms. The module
/// refuses with WRONGTYPE; the library failed with a Lua error
/// (`attempt to index field '?' (a nil value)`). Both must refuse with
/// WRONGTYPE and leave the bytes as they were.
#[test]
fn a_wrong_block_rank_is_wrongtype_in_both_not_a_lua_error() {
    let server = compact_server();
    let mut con = server.connect();
    let (log, mut value) = seven_hundred(&mut con);
    value[288..292].copy_from_slice(&200u32.to_le_bytes());
    let start = start_with_bytes(&mut con, &value, log.expire_at);
    let args = ["1000000000", "1000000", "1700000160001"];
    let (outcomes, spread) = on_both(&mut con, &start, Op::Check, &args);
    let case = format!("check {args:?}, block 1's rank 200");
    let mut found = differences(&case, &outcomes, spread);
    found.extend(refused_untouched(&case, &outcomes, &value, log.expire_at));
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// Block 3's top (bytes 806..808) set to 307 where it is 310: a refund
/// of 60 at 1700000700000 with a window of 10^9 ms. Replies and bytes
/// matched, but the module's expiry was 1,536 ms before the library's.
/// The expiry must be the same too.
#[test]
fn a_refund_on_a_changed_top_sets_the_same_expiry_in_both() {
    let server = compact_server();
    let mut con = server.connect();
    let (log, mut value) = seven_hundred(&mut con);
    value[806..808].copy_from_slice(&307u16.to_le_bytes());
    let start = start_with_bytes(&mut con, &value, log.expire_at);
    let args = ["1000000000", "1000000", "1700000700000", "COST", "60"];
    let (outcomes, spread) = on_both(&mut con, &start, Op::Refund, &args);
    assert_alike(
        &format!("refund {args:?}, block 3's top 307"),
        &outcomes,
        spread,
    );
}

// ---------------------------------------------------------------------
// 6. A log emptied and refilled by one call is a new log.

/// The calls that empty a log of three entries at 1700000000000 (a
/// window of 60,000 ms, a limit of 10) and record into it: a check whose
/// trim leaves nothing, and a penalized check whose cost, above the
/// limit, caps away every older entry.
const REFILLS: [(&str, &[&str]); 2] = [
    (
        "a check whose trim empties the log",
        &["60000", "10", "1700000100000"],
    ),
    (
        "a penalized check whose cost above the limit caps the log to its own entries",
        &["60000", "10", "1700000000001", "COST", "11", "PENALIZE"],
    ),
];

/// On a server whose module and library both make new logs in `setting`:
/// from a log in each encoding, each of the REFILLS through both. Both
/// must reply alike and leave the same log, in `setting`'s encoding (a
/// new log, whatever the old one's). Returns what differs.
fn refills_in(setting: Encoding) -> Vec<String> {
    let server = server_in(setting);
    let mut con = server.connect();
    let mut found = Vec::new();
    for old in ENCODINGS {
        set_encoding(&mut con, old);
        let _: i64 = redis::cmd("DEL").arg("rt:old").query(&mut con).unwrap();
        let made = call(
            &mut con,
            true,
            Op::Check,
            "rt:old",
            &["60000", "10", "1700000000000", "COST", "3"],
        );
        assert_eq!(made, Ok(vec![1, 10, 7, -1, 60000, 60000]));
        set_encoding(&mut con, setting);
        let start = start_of(&mut con, "rt:old");
        assert_eq!(
            encoding_of(&left_in(&mut con, "rt:old")),
            Some(old),
            "the old log's encoding"
        );
        for (what, args) in REFILLS {
            let case = format!(
                "setting {}, a {} log, {what} {args:?}",
                setting.name(),
                old.name()
            );
            let (outcomes, spread) = on_both(&mut con, &start, Op::Check, args);
            found.extend(differences(&case, &outcomes, spread));
            // A log keeps its kind, sorted set or string; a compact one
            // this call emptied is recorded into anew in the format
            // version the setting names (version 2 but under compact1).
            let expected = match (old, setting) {
                (Encoding::Zset, _) => Encoding::Zset,
                (_, Encoding::Compact1) => Encoding::Compact1,
                _ => Encoding::Compact,
            };
            for (outcome, module) in outcomes.iter().zip([true, false]) {
                let made = encoding_of(&outcome.left);
                if made != Some(expected) {
                    found.push(format!(
                        "{case}: the {} left {} ({made:?}), not a log in {}",
                        via(module),
                        describe(&outcome.left),
                        expected.name()
                    ));
                }
            }
        }
    }
    found
}

/// A compact log of format version 1 emptied and refilled by one check
/// on a server set to `compact`: the module wrote the new log in format
/// version 2, the library in version 1. Over each setting (the module's
/// swl.encoding and the library's ENCODING alike) and each encoding of
/// the old log, both leave the same log: a sorted set stays one, and a
/// compact log takes the compact format version the setting names (so a
/// server set to compact1 never hands 0.3 a version 2 log).
#[test]
fn a_log_emptied_and_refilled_by_one_call_takes_the_settings_version_in_both() {
    let found: Vec<String> = ENCODINGS.into_iter().flat_map(refills_in).collect();
    assert!(
        found.is_empty(),
        "{} differences:\n{}",
        found.len(),
        found.join("\n")
    );
}
