//! The function library (scripts/swl.lua) against the module, on both
//! encodings: the same long random sequence through both, every reply and
//! error identical, every log with the same entries (a compact log with the
//! same bytes), and the same expiry; and keys handed back and forth.

mod support;

use std::ops::RangeInclusive;

use redis::{Connection, RedisResult, Value};
use support::{
    check_result, contents, error_text, expire_time, for_each_encoding, load_library, scores,
    server_in, server_ms, snapshot, swl_command, unhex, Config, Contents, Encoding, Rng, Server,
    NEVER_MS,
};

/// The calls that take a request's arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Check,
    Peek,
    Refund,
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::Check => "check",
            Op::Peek => "peek",
            Op::Refund => "refund",
        }
    }
}

/// SWL.CHECK, SWL.PEEK or SWL.REFUND on the module; FCALL swl_check,
/// swl_peek or swl_refund on the library.
fn command(module: bool, op: Op, key: &str, args: &[String]) -> redis::Cmd {
    let mut cmd = swl_command(!module, op.name(), key);
    cmd.arg(args);
    cmd
}

/// The reply, or the error as text, to compare them exactly.
fn call(
    con: &mut Connection,
    module: bool,
    op: Op,
    key: &str,
    args: &[String],
) -> Result<Vec<i64>, String> {
    let reply: RedisResult<Vec<i64>> = command(module, op, key, args).query(con);
    reply.map_err(|e| error_text(&e))
}

fn to_strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

/// SWL.ENTRIES or FCALL swl_entries, as the server replied.
fn entries_reply(con: &mut Connection, module: bool, key: &str) -> Result<Value, String> {
    let reply: RedisResult<Value> = swl_command(!module, "entries", key).query(con);
    reply.map_err(|e| error_text(&e))
}

/// Waits under which the library checks whether the server's clock has
/// reached the expiry it sets (the library's EXPIRY_CHECKED_BELOW_MS).
const EXPIRY_CHECKED_BELOW_MS: i64 = 10;

/// The three keys one step works on: checked by the module only, by the
/// library only, and by whichever the step picks (handed back and forth).
struct Keys {
    module: String,
    library: String,
    handed: String,
}

impl Keys {
    fn of(index: u64) -> Keys {
        Keys {
            module: format!("m{index}"),
            library: format!("l{index}"),
            handed: format!("h{index}"),
        }
    }

    fn all(&self) -> [&str; 3] {
        [&self.module, &self.library, &self.handed]
    }
}

/// What one step's call on one key did: its reply, the key's expiry
/// before and after, and the server's clock (ms) before and after.
struct Call {
    reply: Result<Vec<i64>, String>,
    before: i64,
    after: i64,
    started: u64,
    ended: u64,
}

impl Call {
    /// Expiry after a check is either the one before (kept) or the
    /// server's time during the call plus reset_after_ms (set), for the
    /// module and the library alike (the library's a millisecond later
    /// where that time is one its clock has reached, see
    /// refund_expiries_agree). A peek or an error keeps it; so does a trim
    /// that emptied the log, which has none.
    fn expiry(&self, op: Op) -> Expiry {
        let kept = self.before == self.after;
        let set = match &self.reply {
            _ if self.after == -2 => return Expiry::Either,
            Ok(reply) if op == Op::Check => {
                let earliest = self.started as i64 + reply[4];
                let later = i64::from(reply[4] < EXPIRY_CHECKED_BELOW_MS);
                let latest = self.ended as i64 + reply[4] + later;
                (earliest..=latest).contains(&self.after)
            }
            _ => false,
        };
        match (kept, set) {
            (true, true) => Expiry::Either,
            (true, false) => Expiry::Kept,
            (false, true) => Expiry::Set,
            (false, false) => Expiry::Neither,
        }
    }
}

/// A refund sets the expiry to when the newest entry it leaves leaves the
/// window: a time its reply does not give. Over logs left alike, it is the
/// same span after each call's clock: `other` must agree with the
/// module's `call` on some span. The library puts an expiry of a span
/// under EXPIRY_CHECKED_BELOW_MS that its clock has reached a millisecond
/// later (Redis would delete the key at once, where the module's key lives
/// to the end of that millisecond): there, a span one less agrees too.
fn refund_expiries_agree(module: &Call, other: &Call) -> bool {
    if module.after < 0 || other.after < 0 {
        return module.after == other.after;
    }
    let span = |call: &Call, later: i64| {
        (call.after - later - call.ended as i64)..=(call.after - later - call.started as i64)
    };
    let overlap = |a: &RangeInclusive<i64>, b: &RangeInclusive<i64>| {
        a.start() <= b.end() && b.start() <= a.end()
    };
    let spans = span(module, 0);
    overlap(&spans, &span(other, 0))
        || (*spans.start() < EXPIRY_CHECKED_BELOW_MS && overlap(&spans, &span(other, 1)))
}

#[derive(Debug, PartialEq, Clone, Copy)]
enum Expiry {
    Kept,
    Set,
    Either,
    Neither,
}

/// Runs the call on the three keys in one transaction, then gives each an
/// hour-long TTL or none: the made-up times give real TTLs of a few
/// milliseconds, which must not run out between steps. Also says whether
/// the server's clock stayed in one millisecond throughout.
/// One step: the same call on three keys.
struct Plan {
    keys: Keys,
    args: Vec<String>,
    op: Op,
    /// Whether the keys lose their expiry afterwards, or get an hour.
    persist: bool,
    handed_to_module: bool,
}

fn step(con: &mut Connection, plan: &Plan) -> ([Call; 3], bool) {
    let Plan {
        keys,
        args,
        op,
        persist,
        handed_to_module,
    } = plan;
    let (op, persist, handed_to_module) = (*op, *persist, *handed_to_module);
    let mut pipe = redis::pipe();
    pipe.atomic();
    for (key, module) in keys.all().into_iter().zip([true, false, handed_to_module]) {
        pipe.cmd("PEXPIRETIME")
            .arg(key)
            .cmd("TIME")
            .add_command(command(module, op, key, args))
            .cmd("TIME")
            .cmd("PEXPIRETIME")
            .arg(key);
    }
    for key in keys.all() {
        if persist {
            pipe.cmd("PERSIST").arg(key);
        } else {
            pipe.cmd("PEXPIRE").arg(key).arg(3_600_000);
        }
    }
    let ms = |time: &Value| {
        let (s, us): (u64, u64) = redis::from_redis_value(time).expect("TIME");
        s * 1000 + us / 1000
    };
    let integer = |value: &Value| redis::from_redis_value::<i64>(value).expect("PEXPIRETIME");
    match pipe.query::<Vec<Value>>(con) {
        Ok(r) => {
            let calls = [0, 1, 2].map(|i| {
                let at = 5 * i;
                Call {
                    reply: Ok(redis::from_redis_value(&r[at + 2]).expect("a reply")),
                    before: integer(&r[at]),
                    after: integer(&r[at + 4]),
                    started: ms(&r[at + 1]),
                    ended: ms(&r[at + 3]),
                }
            });
            let one_clock = calls[0].started == calls[2].ended;
            (calls, one_clock)
        }
        // The calls failed, which changes nothing: ask again for the text.
        Err(_) => {
            let modules = [true, false, handed_to_module];
            let calls = [0, 1, 2].map(|i| {
                let key = keys.all()[i];
                let expiry = expire_time(con, key.as_bytes());
                Call {
                    reply: call(con, modules[i], op, key, args),
                    before: expiry,
                    after: expiry,
                    started: 0,
                    ended: 0,
                }
            });
            (calls, true)
        }
    }
}

/// Puts a key back as `snapshot` read it.
fn restore(con: &mut Connection, key: &str, (_, dump, expiry): (String, Option<Vec<u8>>, i64)) {
    let _: i64 = redis::cmd("DEL").arg(key).query(con).unwrap();
    if let Some(dump) = dump {
        let _: () = redis::cmd("RESTORE")
            .arg(key)
            .arg(expiry.max(0))
            .arg(dump)
            .arg("ABSTTL")
            .query(con)
            .unwrap();
    }
}

/// Runs the step on the three keys. With `*` the three calls must read
/// the same millisecond: if the clock ticked, the keys are put back and
/// the step runs again.
fn step_on_one_clock(con: &mut Connection, plan: &Plan) -> [Call; 3] {
    let keys = &plan.keys;
    let star = plan.args.iter().any(|arg| arg == "*");
    for _ in 0..100 {
        let before = keys.all().map(|key| snapshot(con, key.as_bytes()));
        let (calls, one_clock) = step(con, plan);
        if one_clock || !star {
            return calls;
        }
        for (key, was) in keys.all().into_iter().zip(before) {
            restore(con, key, was);
        }
    }
    panic!("the server's clock ticked during 100 tries of one step");
}

/// Random arguments; limits below `max_limit`, costs up to a sixth of
/// it, times around `clock`, now
/// and then `*` (the server's clock, far from `clock`), a time long
/// before it (2^32 ms: the compact log's wide slots) or a malformed
/// argument.
fn random_args(rng: &mut Rng, clock: u64, max_limit: u64) -> Vec<String> {
    let now = match rng.below(40) {
        0..=3 => clock.saturating_sub(rng.below(300)).to_string(),
        4..=7 => (clock + rng.below(300)).to_string(),
        8..=10 => "*".to_string(),
        11 => (clock - (1 << 32) - rng.below(1000)).to_string(),
        _ => clock.to_string(),
    };
    // Costs of up to a sixth of the limits fill logs to hundreds; with
    // `*` small ones, so that the three calls fit in one millisecond.
    let most_cost = if now == "*" {
        4
    } else {
        (max_limit / 6).max(4)
    };
    // Windows of up to 400 ms, or twice the limits: about 12 ms pass per
    // step, so large limits see logs of hundreds.
    let longest_window = (2 * max_limit).max(400);
    let mut args = vec![
        (1 + rng.below(longest_window)).to_string(),
        rng.below(max_limit).to_string(),
        now,
    ];
    for _ in 0..rng.below(4) {
        match rng.below(4) {
            0 => args.extend(["COST".into(), (1 + rng.below(most_cost)).to_string()]),
            1 | 2 => args.extend([
                "WINDOW".into(),
                (1 + rng.below(longest_window)).to_string(),
                rng.below(max_limit).to_string(),
            ]),
            _ => args.push("PENALIZE".into()),
        }
    }
    // Now and then a malformed argument: the errors must match too.
    if rng.below(15) == 0 {
        let at = rng.below(args.len() as u64) as usize;
        args[at] = ["", "-1", "01", "1.5", "x", "COST", "99999999999999999"][rng.below(7) as usize]
            .to_string();
    }
    args
}

/// Scores another tool may have written into a log: infinite, fractional,
/// or many at once around `clock`.
fn foreign_scores(rng: &mut Rng, clock: u64) -> Vec<String> {
    match rng.below(4) {
        0 => vec!["+inf".into()],
        1 => vec!["-inf".into()],
        2 => vec![format!("{}.5", clock.saturating_sub(rng.below(400)))],
        _ => (0..200)
            .map(|_| clock.saturating_sub(rng.below(400)).to_string())
            .collect(),
    }
}

/// Another tool's write to the three (equal) logs at `keys`: scores added
/// to a sorted set, or a byte of a compact log overwritten, which the
/// module and the library must then read alike (WRONGTYPE or the same
/// reply). Returns whether it damaged a compact log.
fn foreign_write(
    con: &mut Connection,
    rng: &mut Rng,
    keys: &Keys,
    encoding: Encoding,
    (clock, n): (u64, usize),
) -> bool {
    match contents(con, keys.module.as_bytes()) {
        // Sorted sets only where new logs are sorted sets.
        Contents::Missing if encoding.is_compact() => false,
        Contents::Missing | Contents::Zset(_) => {
            let scores = foreign_scores(rng, clock);
            for key in keys.all() {
                let mut zadd = redis::cmd("ZADD");
                zadd.arg(key);
                for (i, score) in scores.iter().enumerate() {
                    zadd.arg(score).arg(format!("other{n}.{i}"));
                }
                let _: i64 = zadd.query(con).unwrap();
            }
            false
        }
        Contents::Bytes(bytes) => {
            let at = rng.below(bytes.len() as u64);
            let byte = [rng.below(256) as u8];
            for key in keys.all() {
                let _: i64 = redis::cmd("SETRANGE")
                    .arg(key)
                    .arg(at)
                    .arg(&byte[..])
                    .query(con)
                    .unwrap();
            }
            true
        }
    }
}

/// A log's entries and, for a compact log, its bytes: what the module and
/// the library must leave alike (sorted-set members differ by design).
fn log_state(con: &mut Connection, key: &str) -> (Vec<f64>, Option<Vec<u8>>) {
    match contents(con, key.as_bytes()) {
        Contents::Bytes(bytes) => (Vec::new(), Some(bytes)),
        other => (other.times(), None),
    }
}

/// What a differential run saw: calls admitted, denied and failed,
/// compact logs with 8-byte slots, damaged compact logs refused
/// (WRONGTYPE) or read, and the most entries a log held.
#[derive(Debug, Default)]
struct Seen {
    admitted: usize,
    denied: usize,
    failed: usize,
    damaged_refused: usize,
    damaged_read: usize,
    wide_slots: usize,
    longest_log: usize,
}

/// Runs `steps` random checks, peeks and refunds on one server with the module and
/// the library, new logs in `encoding`, on four triples of keys, and
/// compares replies, logs, SWL.ENTRIES (over RESP2 and RESP3) and
/// expiries after each. `foreign`
/// is how often (one step in so many) another tool writes to the logs
/// first.
fn differential(
    encoding: Encoding,
    seed: u64,
    steps: usize,
    max_limit: u64,
    foreign: Option<u64>,
) -> Seen {
    let server = server_in(encoding);
    let mut con = server.connect();
    let mut resp3 = server.connect_resp3();
    let mut rng = Rng(seed);
    let mut clock = server_ms(&mut con) - 100_000;
    let mut seen = Seen::default();
    for n in 0..steps {
        let keys = Keys::of(rng.below(4));
        clock += rng.below(25);
        let damaged = foreign.is_some_and(|every| rng.below(every) == 0)
            && foreign_write(&mut con, &mut rng, &keys, encoding, (clock, n));
        let mut plan = Plan {
            keys,
            args: random_args(&mut rng, clock, max_limit),
            op: match rng.below(10) {
                0 | 1 => Op::Peek,
                2 | 3 => Op::Refund,
                _ => Op::Check,
            },
            persist: rng.below(3) == 0,
            handed_to_module: rng.below(2) == 0,
        };
        // Every other peek asks for the oldest entry's wait too (chosen
        // by the step, not drawn, so that the sequence stays as it was).
        if plan.op == Op::Peek && n % 2 == 0 {
            plan.args.push("OLDEST".into());
        }
        // One check in five is forced, recorded past its limits (a syntax
        // error beside PENALIZE), chosen the same way.
        if plan.op == Op::Check && n % 5 == 1 {
            plan.args.push("FORCE".into());
        }
        let done = step_on_one_clock(&mut con, &plan);
        let Plan {
            keys,
            args,
            op,
            handed_to_module,
            ..
        } = &plan;
        let (op, handed_to_module) = (*op, *handed_to_module);
        let context = format!(
            "{} step {n}: {op:?} {args:?} handed to the module={handed_to_module}",
            encoding.name()
        );
        let [module, library, handed] = done.each_ref().map(|call| &call.reply);
        assert_eq!(library, module, "{context}: the library's reply");
        assert_eq!(handed, module, "{context}: the handed key's reply");
        let state = log_state(&mut con, &keys.module);
        assert_eq!(
            log_state(&mut con, &keys.library),
            state,
            "{context}: library's log"
        );
        assert_eq!(
            log_state(&mut con, &keys.handed),
            state,
            "{context}: handed log"
        );
        if op == Op::Refund && done[0].reply.is_ok() {
            for other in &done[1..] {
                assert!(
                    refund_expiries_agree(&done[0], other),
                    "{context}: expiry {} and {}",
                    done[0].after,
                    other.after
                );
            }
        } else {
            let expiries = done.each_ref().map(|call| call.expiry(op));
            let agree = !(expiries.contains(&Expiry::Kept) && expiries.contains(&Expiry::Set));
            assert!(
                agree && !expiries.contains(&Expiry::Neither),
                "{context}: expiry {expiries:?} {:?}",
                done.each_ref()
                    .map(|c| (c.reply.clone(), c.before, c.after, c.started, c.ended))
            );
        }
        // SWL.ENTRIES alike in both protocols: RESP3 shows the types of
        // scores other tools wrote (doubles), which RESP2 sends as text.
        for con in [&mut con, &mut resp3] {
            let entries = entries_reply(con, true, &keys.module);
            assert_eq!(
                entries_reply(con, false, &keys.library),
                entries,
                "{context}: SWL.ENTRIES"
            );
        }
        if state.1.as_ref().is_some_and(|bytes| bytes[5] == 8) {
            seen.wide_slots += 1;
        }
        if !damaged {
            let entries = contents(&mut con, keys.module.as_bytes()).len();
            seen.longest_log = seen.longest_log.max(entries);
        }
        if damaged {
            match module {
                Err(e) if e.starts_with("WRONGTYPE") => seen.damaged_refused += 1,
                _ => seen.damaged_read += 1,
            }
            // Back to a log both write, whatever the damage did.
            for key in keys.all() {
                let _: i64 = redis::cmd("DEL").arg(key).query(&mut con).unwrap();
            }
        }
        match module {
            Ok(reply) if reply[0] == 1 => seen.admitted += 1,
            Ok(_) => seen.denied += 1,
            Err(_) => seen.failed += 1,
        }
    }
    eprintln!("{} {seen:?}", encoding.name());
    seen
}

#[test]
fn the_library_behaves_exactly_like_the_module() {
    for_each_encoding(|encoding| {
        let seen = differential(encoding, 0x00c0_ffee_1234_5678, 2500, 9, None);
        assert!(
            seen.admitted > 100 && seen.denied > 100 && seen.failed > 100,
            "{seen:?}"
        );
        if encoding.is_compact() {
            assert!(seen.wide_slots > 20, "{seen:?}");
        }
    });
}

/// Large limits on logs of hundreds of entries take the O(log N) paths
/// (binary searches, ZCOUNT and ZRANGE by rank) and the compact log's
/// rewrites and reclaims; other tools' writes take the saturating and
/// rounding ones (sorted sets) and the checks of damaged bytes (compact).
#[test]
fn the_library_agrees_on_large_logs_and_other_tools_writes() {
    for_each_encoding(|encoding| {
        let seen = differential(encoding, 0x5eed_0bad_cafe_f00d, 1500, 600, Some(6));
        assert!(
            seen.admitted > 50 && seen.denied > 50 && seen.failed > 50,
            "{seen:?}"
        );
        assert!(seen.longest_log > 200, "{seen:?}");
        if encoding.is_compact() {
            assert!(
                seen.damaged_refused > 5 && seen.damaged_read > 5,
                "{seen:?}"
            );
        }
    });
}

#[test]
fn the_library_reports_the_same_errors() {
    let module = Server::start();
    let library = Server::with(Config::without_module());
    load_library(&library, Encoding::Zset);
    let cases: &[&[&str]] = &[
        &["1000", "5"],
        &["0", "5", "1"],
        &["1000", "-5", "1"],
        &["1000", "5", "now"],
        &["1000", "5", "1", "COST", "0"],
        &["1000", "5", "1", "COST", "100001"],
        &["1000", "5", "1", "WINDOW", "10"],
        &["1000", "5", "1", "PENALIZE", "PENALIZE"],
        &["1000", "5", "1", "FORCE", "force"],
        &["1000", "5", "1", "FORCE", "PENALIZE"],
        &["1000", "5", "1", "PENALIZE", "FORCE"],
        &["1000", "5", "1", "BOGUS"],
        // OLDEST belongs to a peek, once.
        &["1000", "5", "1", "OLDEST"],
    ];
    // More windows than a call may have, refused at the keyword past the
    // maximum whatever follows it; the hundredth is taken.
    let windows = |n: usize, tail: &[&str]| {
        let mut args = to_strings(&["1000", "5", "1"]);
        for _ in 1..n {
            args.extend(to_strings(&["WINDOW", "10", "3"]));
        }
        args.extend(to_strings(tail));
        args
    };
    let too_many = [
        windows(101, &[]),
        windows(100, &["WINDOW", "x"]),
        windows(100, &["COST", "0"]),
    ];
    for args in cases.iter().map(|args| to_strings(args)).chain(too_many) {
        let expected = call(&mut module.connect(), true, Op::Check, "k", &args);
        assert!(expected.is_err(), "{args:?}");
        assert_eq!(
            call(&mut library.connect(), false, Op::Check, "k", &args),
            expected,
            "{args:?}"
        );
    }
    let twice = to_strings(&["1000", "5", "1", "OLDEST", "oldest"]);
    let expected = call(&mut module.connect(), true, Op::Peek, "k", &twice);
    assert_eq!(expected, Err("ERR syntax error".to_string()));
    assert_eq!(
        call(&mut library.connect(), false, Op::Peek, "k", &twice),
        expected
    );
    for server in [&module, &library] {
        let _: () = redis::cmd("SET")
            .arg("s")
            .arg("v")
            .query(&mut server.connect())
            .unwrap();
    }
    let args = to_strings(&["1000", "5", "1"]);
    for op in [Op::Check, Op::Peek, Op::Refund] {
        let expected = call(&mut module.connect(), true, op, "s", &args);
        assert_eq!(
            expected,
            Err("WRONGTYPE Operation against a key holding the wrong kind of value".to_string())
        );
        assert_eq!(
            call(&mut library.connect(), false, op, "s", &args),
            expected
        );
    }
}

/// A compact log made by the module: `times` recorded in order.
fn module_log(con: &mut Connection, key: &str, times: &[u64]) -> Vec<u8> {
    for time in times {
        let _: Vec<i64> = redis::cmd("SWL.CHECK")
            .arg(key)
            .arg(1u64 << 40)
            .arg(1000)
            .arg(time)
            .query(con)
            .unwrap();
    }
    redis::cmd("GET").arg(key).query(con).unwrap()
}

fn with_bytes(mut value: Vec<u8>, at: usize, bytes: &[u8]) -> Vec<u8> {
    value[at..at + bytes.len()].copy_from_slice(bytes);
    value
}

/// A narrow compact log with the slot at `index` holding `stored`.
fn with_slot(value: &[u8], index: usize, stored: u32) -> Vec<u8> {
    with_bytes(value.to_vec(), 24 + 4 * index, &stored.to_le_bytes())
}

/// Puts `value` under a key with an expiry, once for the module and once
/// for the library, and runs SWL.CHECK, SWL.PEEK and SWL.ENTRIES through
/// each: their replies, the bytes each left, and whether each kept the
/// expiry.
fn on_both(con: &mut Connection, value: &[u8], args: &[&str]) -> [(Replies, Vec<u8>, bool); 2] {
    [true, false].map(|module| {
        let _: () = redis::cmd("SET")
            .arg("k")
            .arg(value)
            .arg("PX")
            .arg(100_000)
            .query(con)
            .unwrap();
        let expiry = expire_time(con, b"k");
        let mut replies = Vec::new();
        for op in [Op::Check, Op::Peek] {
            let reply: RedisResult<Value> = command(module, op, "k", &to_strings(args)).query(con);
            replies.push(reply.map_err(|e| error_text(&e)));
        }
        replies.push(entries_reply(con, module, "k"));
        let left: Vec<u8> = redis::cmd("GET").arg("k").query(con).unwrap();
        (replies, left, expire_time(con, b"k") == expiry)
    })
}

type Replies = Vec<Result<Value, String>>;

#[test]
fn damaged_compact_logs_get_the_same_replies_from_both_and_keep_their_bytes() {
    let server = server_in(Encoding::Compact1);
    let mut con = server.connect();
    let narrow = module_log(&mut con, "narrow", &[1000, 1001, 1002]);
    let wide = module_log(&mut con, "wide", &[1000, 1000 + (1 << 32)]);
    let based_at_zero = module_log(&mut con, "zero", &[0, 1 << 32]);
    assert_eq!((narrow.len(), wide[5]), (60, 8));
    let wrongtype = Err("WRONGTYPE Operation against a key holding the wrong kind of value".into());
    let refused: Vec<(&str, Vec<u8>)> = vec![
        ("a plain string", b"v".to_vec()),
        ("too short", narrow[..55].to_vec()),
        ("not whole slots", narrow[..58].to_vec()),
        ("magic", with_bytes(narrow.clone(), 0, b"X")),
        ("version", with_bytes(narrow.clone(), 4, &[2])),
        ("width", with_bytes(narrow.clone(), 5, &[5])),
        ("reserved", with_bytes(narrow.clone(), 6, &[1])),
        ("reserved", with_bytes(narrow.clone(), 23, &[1])),
        (
            "base",
            with_bytes(narrow.clone(), 8, &(1u64 << 53).to_le_bytes()),
        ),
        ("head", with_bytes(narrow.clone(), 16, &10u32.to_le_bytes())),
        // Logs of times under a minute are based at 0: a slot holds its
        // time + 1.
        ("out of order", with_slot(&narrow, 0, 1005)),
        ("a free live slot", with_slot(&narrow, 0, 0)),
        (
            "past 2^53-1",
            with_bytes(wide.clone(), 32, &((1u64 << 53) + 1).to_le_bytes()),
        ),
        (
            "past 2^64",
            with_bytes(wide.clone(), 32, &u64::MAX.to_le_bytes()),
        ),
        // 2^53+1 rounds to 2^53 as a double, which would read as 2^53-1.
        (
            "2^53+1 at base 0",
            with_bytes(based_at_zero, 32, &((1u64 << 53) + 1).to_le_bytes()),
        ),
    ];
    let args = ["1000", "5", "2000"];
    for (what, value) in &refused {
        let [module, library] = on_both(&mut con, value, &args);
        assert_eq!(library, module, "{what}");
        let (replies, left, kept) = module;
        assert_eq!(replies, [0, 1, 2].map(|_| wrongtype.clone()), "{what}");
        assert_eq!((&left, kept), (value, true), "{what}: untouched");
    }
    // Read as logs: the newest at 2^53-1 exactly (base 0, slot 2^53),
    // and interior slots out of order, which only SWL.ENTRIES checks (a
    // call reads O(log N) slots).
    let edge = with_bytes(wide.clone(), 32, &(1u64 << 53).to_le_bytes());
    let [(module, left, kept), library] = on_both(&mut con, &edge, &args);
    assert_eq!(
        (&library.0, &library.1),
        (&module, &left),
        "the newest at 2^53-1"
    );
    assert!(!kept && !library.2, "an admitted check sets the expiry");
    let ints = |values: &[i64]| {
        Ok(Value::Array(
            values.iter().map(|&v| Value::Int(v)).collect(),
        ))
    };
    let newest = (1 << 53) - 1;
    // The check at 2000 trimmed 1000, counted the newest and recorded 2000.
    assert_eq!(module[0], ints(&[1, 5, 3, -1, newest + 1000 - 2000, 1000]));
    assert_eq!(module[2], ints(&[2000, newest]));
    let shuffled = module_log(&mut con, "shuffled", &[1000, 1001, 1002, 1003, 1004]);
    let shuffled = with_slot(&with_slot(&shuffled, 1, 1004), 3, 1002);
    let [(module, left, _), library] = on_both(&mut con, &shuffled, &["1000", "9", "1500"]);
    assert_eq!(
        (&library.0, &library.1),
        (&module, &left),
        "slots out of order"
    );
    assert_eq!(module[2], wrongtype);
    assert!(matches!(module[0], Ok(Value::Array(_))), "{module:?}");
    // Counts take the ends first: the floor (1001) is before the oldest
    // (1002), so all five count, though the slot a search would probe
    // first (1002) and the one after it (1001) say otherwise.
    let ends_first = module_log(&mut con, "ends", &[1000, 1001, 1002, 1003, 1004]);
    let ends_first = with_slot(&with_slot(&ends_first, 0, 1003), 1, 1002);
    let [(module, left, _), library] = on_both(&mut con, &ends_first, &["1000", "9", "2001"]);
    assert_eq!((&library.0, &library.1), (&module, &left), "ends first");
    assert_eq!(
        module[0],
        ints(&[1, 9, 3, -1, 1000, 1000]),
        "five and one more"
    );
}

/// A denial leaves a compact log as it found it, and a denied client tends
/// to try again: the library keeps what it parsed of such bytes for the
/// next call. The same bytes must then read as before, and bytes changed
/// in any way, by another tool between two denials, as the module reads
/// them.
/// Bytes that are not a packed log (format version 2) get WRONGTYPE from
/// both and are left as they were; damage inside a block between the head
/// and the tail, which a call does not read, shows only to SWL.ENTRIES.
#[test]
fn damaged_packed_logs_get_the_same_replies_from_both_and_keep_their_bytes() {
    let server = server_in(Encoding::Compact);
    let mut con = server.connect();
    let small = module_log(&mut con, "small", &[1000, 1700, 2500]);
    assert_eq!((small.len(), small[4]), (60, 2));
    let wrongtype = Err("WRONGTYPE Operation against a key holding the wrong kind of value".into());
    let refused: Vec<(&str, Vec<u8>)> = vec![
        ("too short", small[..55].to_vec()),
        ("magic", with_bytes(small.clone(), 0, b"X")),
        ("version", with_bytes(small.clone(), 4, &[3])),
        ("block size", with_bytes(small.clone(), 5, &[9])),
        ("reserved", with_bytes(small.clone(), 6, &[1])),
        ("reserved", with_bytes(small.clone(), 23, &[1])),
        (
            "head rank past the head block",
            with_bytes(small.clone(), 8, &[3]),
        ),
        (
            "head block past the tail",
            with_bytes(small.clone(), 12, &[1]),
        ),
        ("tail past the value", with_bytes(small.clone(), 16, &[1])),
        ("first past 2^53-1", with_bytes(small.clone(), 30, &[0x20])),
        ("l past 52", with_bytes(small.clone(), 31, &[53])),
        ("no entries", with_bytes(small.clone(), 36, &[0])),
        (
            "more entries than bits",
            with_bytes(small.clone(), 36, &[4]),
        ),
        (
            "the first entry's bit",
            with_bytes(small.clone(), 59, &[0x80]),
        ),
        (
            "a top past the payload",
            with_bytes(small.clone(), 38, &[0xff]),
        ),
    ];
    let args = ["1000", "5", "3000"];
    for (what, value) in &refused {
        let [module, library] = on_both(&mut con, value, &args);
        assert_eq!(library, module, "{what}");
        let (replies, left, kept) = module;
        assert_eq!(replies, [0, 1, 2].map(|_| wrongtype.clone()), "{what}");
        assert_eq!((&left, kept), (value, true), "{what}: untouched");
    }
    // A log of three blocks with its middle block damaged: calls read the
    // head and tail blocks only and reply; SWL.ENTRIES refuses it.
    let times: Vec<u64> = (0..600).map(|i| 1_000_000 + i * 1000).collect();
    let large = module_log(&mut con, "large", &times);
    let tail = u32::from_le_bytes(large[16..20].try_into().unwrap());
    assert!(tail >= 2, "{tail} blocks after the first");
    let interior = with_bytes(large.clone(), 24 + 256 + 12, &[0, 0]);
    let [module, library] = on_both(&mut con, &interior, &["1000000000", "1000", "1700000"]);
    assert_eq!(library, module, "an interior block damaged");
    assert!(module.0[0].is_ok() && module.0[1].is_ok(), "{:?}", module.0);
    assert_eq!(module.0[2], wrongtype, "SWL.ENTRIES reads every block");
}

/// Blocks between the head and the tail are not checked by a call (only
/// SWL.ENTRIES reads them all), so a first time or a rank another writer
/// damaged there is read as it lies: the module and the library search
/// the blocks in the same order and read it alike, in counts (PEEK at
/// floors across the log), in the entry a wait is for, and in refunds,
/// also those that make such a block the tail (checked then as parsing
/// checks a tail block: where it fails, neither reads a log after).
#[test]
fn damaged_blocks_between_head_and_tail_are_read_alike() {
    let server = server_in(Encoding::Compact);
    let mut con = server.connect();
    // 8,000 entries a second apart: over 40 blocks.
    let (log, newest) = packed_log_of(&mut con, 8000, 1000, 0);
    let tail = u32::from_le_bytes(log[16..20].try_into().unwrap()) as usize;
    assert!(tail > 40, "{tail} blocks after the first");
    let damages: [(usize, &[u8]); 4] = [
        (0, &[0; 7]),
        (0, &[0, 0, 0, 0, 0, 4, 0]),
        (8, &[0; 4]),
        (8, &[0, 0, 0xff, 0x7f]),
    ];
    let mut differing = Vec::new();
    for block in (1..tail).step_by(3) {
        for (at, bytes) in damages {
            let value = with_bytes(log.clone(), 24 + block * 256 + at, bytes);
            let mut outcomes = Vec::new();
            for module in [true, false] {
                let _: () = redis::cmd("SET")
                    .arg("k")
                    .arg(&value)
                    .query(&mut con)
                    .unwrap();
                let mut replies = Vec::new();
                for back in [100, 2000, 4000, 6000, 7900] {
                    let window = (back * 1000).to_string();
                    let args = to_strings(&[&window, "7999", &newest.to_string()]);
                    replies.push(call(&mut con, module, Op::Peek, "k", &args));
                }
                let args = to_strings(&["4000000", "100000", &newest.to_string()]);
                replies.push(call(&mut con, module, Op::Refund, "k", &args));
                let mut left = vec![bytes_left(&mut con, "k")];
                // Refunds that move the tail back into the blocks before:
                // the new tail block is checked as parsing checks it.
                for cost in ["300", "700", "1500"] {
                    let _: () = redis::cmd("SET")
                        .arg("k")
                        .arg(&value)
                        .query(&mut con)
                        .unwrap();
                    let args =
                        to_strings(&["4000000", "100000", &newest.to_string(), "COST", cost]);
                    replies.push(call(&mut con, module, Op::Refund, "k", &args));
                    left.push(bytes_left(&mut con, "k"));
                }
                outcomes.push((replies, left));
            }
            if outcomes[0] != outcomes[1] {
                differing.push(format!(
                    "block {block}, bytes {at}: {:?}: {:?} / {:?}",
                    bytes, outcomes[0].0, outcomes[1].0
                ));
            }
        }
    }
    assert!(differing.is_empty(), "read differently: {differing:?}");
}

#[test]
fn a_denied_log_changed_by_another_tool_is_read_as_it_now_is() {
    let server = server_in(Encoding::Compact1);
    let mut con = server.connect();
    let full = module_log(&mut con, "full", &[1000, 1001, 1002]);
    let ints = |values: &[i64]| {
        Ok(Value::Array(
            values.iter().map(|&v| Value::Int(v)).collect(),
        ))
    };
    let wrongtype = Err("WRONGTYPE Operation against a key holding the wrong kind of value".into());
    // Slot 2 (bytes 32..36) holds 1002 as 1002 - base + 1 = 1003 (a log
    // of times under a minute is based at 0).
    let newer = with_slot(&full, 2, 1101);
    let head_moved = with_bytes(full.clone(), 16, &1u32.to_le_bytes());
    let oldest_freed = with_slot(&full, 0, 0);
    let magic = with_bytes(full.clone(), 0, b"X");
    let args = ["1000", "3", "1500"];
    let denied = ints(&[0, 3, 0, 500, 502, 1000]);
    let admitted = ints(&[1, 3, 0, -1, 1000, 1000]);
    // What the bytes are, the check's reply, and whether the check leaves
    // them as they were.
    let sequence = [
        (
            "as the module left them",
            full.as_slice(),
            denied.clone(),
            true,
        ),
        (
            "a newer newest",
            &newer,
            ints(&[0, 3, 0, 500, 600, 1000]),
            true,
        ),
        ("back as they were", &full, denied, true),
        ("the head moved past one", &head_moved, admitted, false),
        (
            "the oldest slot freed",
            &oldest_freed,
            wrongtype.clone(),
            true,
        ),
        ("the magic overwritten", &magic, wrongtype, true),
    ];
    for (what, value, check, untouched) in sequence {
        // Twice each: the second call finds the bytes the first left.
        for _ in 0..2 {
            let [(module, left, kept), library] = on_both(&mut con, value, &args);
            assert_eq!(library, (module.clone(), left.clone(), kept), "{what}");
            assert_eq!(module[0], check, "{what}");
            assert_eq!(left == value && kept, untouched, "{what}: untouched");
        }
    }
}

/// Calls at the edges of the compact format, through the module on one key
/// and the library on another: after every call, the same reply, the same
/// bytes, and expiries set by the same rule.
#[test]
fn the_library_writes_the_modules_bytes_at_the_format_edges() {
    for encoding in [Encoding::Compact1, Encoding::Compact] {
        eprintln!("-- encoding {}", encoding.name());
        format_edges_alike(encoding);
    }
}

fn format_edges_alike(encoding: Encoding) {
    let server = server_in(encoding);
    let mut con = server.connect();
    let wide = 1u64 << 40;
    let max = (1u64 << 53) - 1;
    let words = |line: String| -> Vec<String> { line.split(' ').map(String::from).collect() };
    let at_times = |window: u64, times: &[u64]| -> Vec<Vec<String>> {
        times
            .iter()
            .map(|t| words(format!("{window} 99 {t}")))
            .collect()
    };
    // Each sequence, and the width and head of the log it leaves (None: no
    // key), which show that it reached its edge.
    type Sequence = (&'static str, Vec<Vec<String>>, Option<(u8, u32)>);
    let sequences: Vec<Sequence> = vec![
        (
            "the last time 4-byte slots hold, then the first they do not",
            at_times(wide, &[1000, 1000 + (1 << 32) - 2, 1000 + (1 << 32) - 1]),
            Some((8, 0)),
        ),
        (
            "times before the base, and the oldest and newest times",
            // Waits stay below 2^53 ms, which the library rounds.
            at_times(1 << 52, &[5000, 4000, 4999, 0, 7000, 1 << 52, max]),
            Some((8, 4)),
        ),
        (
            // 40 entries, then a trim of 26 (more than half the slots), by
            // a window of an hour: the key outlives the reads after it.
            "a value filled, then reclaimed by a trim past half of it",
            at_times(wide, &(1000..1040).collect::<Vec<u64>>())
                .into_iter()
                .chain([
                    words("3600000 99 3601025".into()),
                    words("100 99 1040".into()),
                ])
                .collect(),
            Some((4, 0)),
        ),
        (
            "the largest cost on a new log, then before its base",
            vec![
                words("60000 200000 9000 COST 100000".into()),
                words("60000 200000 8000 COST 100000".into()),
            ],
            Some((4, 0)),
        ),
        (
            "forced past every limit: the largest cost under a zero limit, then before it",
            vec![
                words("60000 0 9000 COST 100000 FORCE".into()),
                words("60000 3 8000 COST 2 FORCE".into()),
            ],
            Some((4, 0)),
        ),
        (
            // Version 2: the head block's l set by the first later time.
            "several entries at once into a new log, then later ones",
            vec![
                words("60000 99 1000 COST 3".into()),
                words("60000 99 2000".into()),
                words("60000 99 2001 COST 2".into()),
            ],
            Some((4, 0)),
        ),
        (
            "penalties capped to the largest limit, and emptying trims",
            vec![
                words(format!("{wide} 3 1000 COST 3")),
                words(format!("{wide} 3 900 COST 9 PENALIZE")),
                words("10 3 5000 WINDOW 5 1".into()),
                words(format!("1 0 {max} PENALIZE")),
            ],
            None,
        ),
    ];
    for (what, calls, leaves) in &sequences {
        for key in ["m", "l"] {
            let _: i64 = redis::cmd("DEL").arg(key).query(&mut con).unwrap();
        }
        let started = server_ms(&mut con);
        for (n, args) in calls.iter().enumerate() {
            let module = call(&mut con, true, Op::Check, "m", args);
            let library = call(&mut con, false, Op::Check, "l", args);
            let context = format!("{what}, call {n}: {args:?}");
            assert!(module.is_ok(), "{context}: {module:?}");
            assert_eq!(library, module, "{context}");
            let [m, l] = ["m", "l"].map(|key| contents(&mut con, key.as_bytes()));
            assert!(!matches!(m, Contents::Zset(_)), "{context}");
            assert_eq!(l, m, "{context}");
            let [m, l] = [b"m", b"l"].map(|key| expire_time(&mut con, key));
            // Both expire at their clock + reset, or keep an expiry so
            // set: the library's at most the time its calls ran later
            // than the module's (and 1 ms) later.
            let later = (server_ms(&mut con) - started + 1) as i64;
            assert!(l >= m && l - m <= later, "{context}: {l} vs {m}");
        }
        let left = match contents(&mut con, b"l") {
            Contents::Bytes(bytes) => Some((
                bytes[5],
                u32::from_le_bytes(bytes[16..20].try_into().unwrap()),
                bytes[4],
            )),
            _ => None,
        };
        if encoding == Encoding::Compact1 {
            let left = left.map(|(width, head, _)| (width, head));
            assert_eq!(left, *leaves, "{what}: the width and head it leaves");
        } else {
            let version = left.map(|(_, _, version)| version);
            assert_eq!(version, leaves.map(|_| 2), "{what}: format version 2");
        }
    }
}

/// A new log of COST n is one block up to 1,920 entries (its high bits
/// at the end of the block, which ends before the value does where the
/// value has room for a second block: from 1,473 entries) and several
/// past that; the library makes the module's bytes for each, and the log
/// takes a later entry alike.
#[test]
fn new_logs_of_any_cost_a_block_holds_are_made_alike() {
    let server = server_in(Encoding::Compact);
    let mut con = server.connect();
    for cost in [1, 2, 16, 17, 100, 1472, 1473, 1500, 1919, 1920, 1921, 5000] {
        for (n, now) in [(0, "1000000"), (1, "1001000")] {
            let args = to_strings(&["10000", "100000", now, "COST", &cost.to_string()]);
            let module = call(&mut con, true, Op::Check, "m", &args);
            let library = call(&mut con, false, Op::Check, "l", &args);
            assert!(module.is_ok(), "COST {cost}, call {n}: {module:?}");
            assert_eq!(library, module, "COST {cost}, call {n}");
            let [m, l] = [b"m", b"l"].map(|key| contents(&mut con, key));
            assert_eq!(l, m, "COST {cost}, call {n}: the bytes");
        }
        let entries = entries_reply(&mut con, true, "l");
        assert!(entries.is_ok(), "COST {cost}: {entries:?}");
        for key in ["m", "l"] {
            let _: i64 = redis::cmd("DEL").arg(key).query(&mut con).unwrap();
        }
    }
}

#[test]
fn the_library_takes_the_server_clock_for_star_and_creates_logs_as_set() {
    for_each_encoding(|encoding| {
        let library = Server::with(Config::without_module());
        load_library(&library, encoding);
        let mut con = library.connect();
        let args = to_strings(&["60000", "5", "*", "COST", "2"]);
        let before = server_ms(&mut con);
        assert_eq!(
            call(&mut con, false, Op::Check, "now", &args),
            Ok(vec![1, 5, 3, -1, 60000, 60000])
        );
        let after = server_ms(&mut con);
        let log = scores(&mut con, "now");
        assert_eq!(log.len(), 2);
        assert_eq!(log[0], log[1]);
        let recorded = log[0] as u64;
        assert!(
            (before..=after).contains(&recorded),
            "{before} <= {recorded} <= {after}"
        );
        // Exact: from the clock the call read.
        let expiry = expire_time(&mut con, b"now") - (recorded as i64 + 60000);
        assert_eq!(expiry, 0, "expiry off by {expiry} ms");
        match contents(&mut con, b"now") {
            Contents::Zset(members) if encoding == Encoding::Zset => {
                assert!(members.iter().all(|(m, _)| m.len() == 14), "{members:?}")
            }
            // The module's bytes: a new log of two entries based a minute
            // before them (stored as 60,001).
            // A new log of two entries in format version 2: one block,
            // l 0, n 2, the high bits 0 and 1 set in the last byte.
            Contents::Bytes(bytes) if encoding == Encoding::Compact => {
                let mut expected = b"SWLc\x02\x08\0\0".to_vec();
                expected.extend([0; 16]);
                expected.extend(&recorded.to_le_bytes()[..7]);
                expected.extend([0, 0, 0, 0, 0, 2, 0, 0, 0]);
                assert_eq!(&bytes[..expected.len()], &expected[..]);
                assert_eq!(bytes.len(), 60, "a 64-byte allocation");
                assert!(bytes[expected.len()..59].iter().all(|&b| b == 0));
                assert_eq!(bytes[59], 0b11);
            }
            Contents::Bytes(bytes) if encoding == Encoding::Compact1 => {
                let mut expected = b"SWLc\x01\x04\0\0".to_vec();
                expected.extend((recorded - 60_000).to_le_bytes());
                expected.extend([0; 8]);
                expected.extend([0x61, 0xea, 0, 0, 0x61, 0xea, 0, 0]);
                assert_eq!(&bytes[..expected.len()], &expected[..]);
                assert_eq!(bytes.len(), 24 + 4 * 9, "9 slots fill a 64-byte allocation");
                assert!(bytes[expected.len()..].iter().all(|&b| b == 0));
            }
            other => panic!("{}: {other:?}", encoding.name()),
        }
    });
}

#[test]
fn an_infinite_score_gets_the_same_saturated_reply_and_nothing_fails() {
    let module = Server::start();
    let library = Server::with(Config::without_module());
    load_library(&library, Encoding::Zset);
    let args = to_strings(&["1000", "5", "*"]);
    for (server, is_module) in [(&module, true), (&library, false)] {
        let mut con = server.connect();
        let _: i64 = redis::cmd("ZADD")
            .arg(&["inf1", "+inf", "x", "1", "old"])
            .query(&mut con)
            .unwrap();
        let _: i64 = redis::cmd("EXPIRE")
            .arg("inf1")
            .arg(100)
            .query(&mut con)
            .unwrap();
        let started = server_ms(&mut con) as i64;
        assert_eq!(
            call(&mut con, is_module, Op::Check, "inf1", &args),
            Ok(vec![1, 5, 3, -1, NEVER_MS, 1000]),
            "module: {is_module}"
        );
        let ended = server_ms(&mut con) as i64;
        let log = scores(&mut con, "inf1");
        assert_eq!(log.len(), 2);
        assert_eq!(log[1], f64::INFINITY);
        // The key lives as long as its newest entry stays: 2^54 ms after
        // the call's clock, exactly.
        let expiry = expire_time(&mut con, b"inf1") - NEVER_MS;
        assert!(
            (started..=ended).contains(&expiry),
            "module: {is_module}: {started} <= {expiry} <= {ended}"
        );
    }
}

#[test]
fn the_library_names_the_window_its_reply_describes() {
    for_each_encoding(|encoding| {
        let library = Server::with(Config::without_module());
        load_library(&library, encoding);
        let mut con = library.connect();
        let one: &[&str] = &["60000", "2", "1000"];
        let several: &[&str] = &["60000", "10", "1100", "WINDOW", "1000", "2"];
        let long: &[&str] = &["60000", "2", "1200", "WINDOW", "1000", "2"];
        // In order, on one key: (call, arguments, reply).
        let calls = [
            (Op::Peek, one, [1, 2, 1, -1, 60000, 60000]),
            (Op::Check, one, [1, 2, 1, -1, 60000, 60000]),
            (Op::Peek, several, [1, 2, 0, -1, 60000, 1000]),
            (Op::Check, several, [1, 2, 0, -1, 60000, 1000]),
            (Op::Check, several, [0, 2, 0, 900, 60000, 1000]),
            (Op::Peek, long, [0, 2, 0, 59800, 59900, 60000]),
        ];
        for (op, args, reply) in calls {
            assert_eq!(
                call(&mut con, false, op, "w", &to_strings(args)),
                Ok(reply.to_vec()),
                "{op:?} {args:?}"
            );
        }
    });
}

/// Runs `setup` then `probe` (each a call and its arguments) on a key of
/// the module's and a key of the library's, and returns the probe's two
/// replies.
fn probe_both(
    con: &mut Connection,
    name: &str,
    setup: &[(Op, &[&str])],
    probe: (Op, &[&str]),
) -> [Vec<i64>; 2] {
    [true, false].map(|module| {
        let key = format!("{name}:{}", if module { "module" } else { "library" });
        for (op, args) in setup {
            call(con, module, *op, &key, &to_strings(args)).expect("setup");
        }
        call(con, module, probe.0, &key, &to_strings(probe.1)).expect("probe")
    })
}

/// Waits past 2^53 are exact in the module and doubles in Lua, so two
/// denying windows' waits may round to the same double: the library must
/// still name the window the module names (limit, remaining, window_ms),
/// and its waits are the module's rounded to a double.
#[test]
fn waits_past_2_53_bind_the_same_window_in_the_library() {
    for_each_encoding(|encoding| {
        let server = server_in(encoding);
        let mut con = server.connect();
        let max = "9007199254740991";
        let max_1 = "9007199254740990";
        let max_2 = "9007199254740989";
        let setup: &[(Op, &[&str])] = &[(Op::Check, &[max, "10", "1000", "COST", "2"])];
        let probes: &[&[&str]] = &[
            // The waits 2^53 (first) and 2^53 + 1 (second) round alike.
            &[max_1, "1", "998", "WINDOW", max, "2"],
            &[max, "2", "998", "WINDOW", max_1, "1"],
            // Several windows around 2^53, the longest wait in the middle.
            &[max_2, "1", "998", "WINDOW", max, "1", "WINDOW", max_1, "2"],
            &[max_1, "1", "997", "WINDOW", max_2, "1", "WINDOW", max, "2"],
        ];
        for (n, probe) in probes.iter().enumerate() {
            for op in [Op::Peek, Op::Check] {
                let name = format!("big{n}{op:?}");
                let [module, library] = probe_both(&mut con, &name, setup, (op, probe));
                let context = format!("{} {op:?} {probe:?}", encoding.name());
                assert_eq!(module[0], 0, "{context}: denied");
                let binding = |reply: &[i64]| (reply[0], reply[1], reply[2], reply[5]);
                assert_eq!(binding(&library), binding(&module), "{context}: {module:?}");
                let rounded = |wait: i64| wait as f64 as i64;
                assert_eq!(library[3], rounded(module[3]), "{context}: retry");
                assert_eq!(library[4], rounded(module[4]), "{context}: reset");
            }
        }
        // The repro: the window named second waits 1 ms longer, exactly.
        let [module, _] = probe_both(&mut con, "repro", setup, (Op::Peek, probes[0]));
        assert_eq!(
            module,
            [
                0,
                2,
                0,
                9007199254740993,
                9007199254740993,
                9007199254740991
            ]
        );
    });
}

/// A refund that leaves no live entry ends the key at once, in the module
/// and the library alike: a log whose entries all left the window, and a
/// compact log whose head another writer moved to its end.
#[test]
fn a_refund_that_leaves_nothing_live_ends_the_key_in_both() {
    for_each_encoding(|encoding| {
        let server = server_in(encoding);
        let mut con = server.connect();
        let setup: &[(Op, &[&str])] = &[(Op::Check, &["1000", "5", "1000", "COST", "2"])];
        let refund = (Op::Refund, &["1000", "5", "5000"][..]);
        let [module, library] = probe_both(&mut con, "old", setup, refund);
        assert_eq!(library, module);
        assert_eq!(module, [1, 5, 4, -1, 1000, 1000]);
        for key in ["old:module", "old:library"] {
            assert_eq!(expire_time(&mut con, key.as_bytes()), -2, "{key}");
        }
        if encoding == Encoding::Compact {
            // Format version 2 has no head past its entries: such bytes
            // are damaged, refused alike, and left as they were.
            let value = module_log(&mut con, "src2", &[1000, 1001, 1002]);
            let emptied = with_bytes(value, 8, &3u32.to_le_bytes());
            let [module, library] = on_both(&mut con, &emptied, &["1000", "5", "1500"]);
            assert_eq!(library, module);
            assert_eq!(module.1, emptied);
        }
        if encoding == Encoding::Compact1 {
            // Three entries, the head moved past them by another writer;
            // an expiry an hour away, which the refund must not keep.
            let value = module_log(&mut con, "src", &[1000, 1001, 1002]);
            let emptied = with_bytes(value, 16, &3u32.to_le_bytes());
            for (key, module) in [("head:module", true), ("head:library", false)] {
                let _: () = redis::cmd("SET")
                    .arg(key)
                    .arg(&emptied)
                    .arg("PX")
                    .arg(3_600_000)
                    .query(&mut con)
                    .unwrap();
                let reply = call(
                    &mut con,
                    module,
                    Op::Refund,
                    key,
                    &to_strings(&["1000", "5", "1500"]),
                );
                assert_eq!(reply, Ok(vec![1, 5, 4, -1, 1000, 1000]), "{key}");
                // Expired at the call's clock: gone once the clock passes it.
                let until = server_ms(&mut con) + 2;
                while server_ms(&mut con) < until {}
                assert_eq!(expire_time(&mut con, key.as_bytes()), -2, "{key}");
            }
        }
    });
}

/// The server's clock before and after a call, its reply and the expiry
/// after it, from one transaction: TIME, the call, TIME, PEXPIRETIME.
fn timed_call(
    con: &mut Connection,
    module: bool,
    key: &str,
    args: &[&str],
) -> ((i64, i64), Vec<i64>, i64) {
    type Time = (i64, i64);
    let (before, reply, after, expiry): (Time, Vec<i64>, Time, i64) = redis::pipe()
        .atomic()
        .cmd("TIME")
        .add_command(command(module, Op::Check, key, &to_strings(args)))
        .cmd("TIME")
        .cmd("PEXPIRETIME")
        .arg(key)
        .query(con)
        .expect("a timed call");
    let ms = |time: Time| time.0 * 1000 + time.1 / 1000;
    ((ms(before), ms(after)), reply, expiry)
}

/// The library sets the expiry from the call's clock, as the module does,
/// however long the call takes: COST 100,000 takes a fifth of a second
/// through the library on a sorted set. With a window shorter than the
/// call, the expiry has passed when the call ends (on Redis 7.0 an
/// absolute expiry in the past deletes the key at once): in both the
/// reply is the same and the key is gone.
#[test]
fn the_librarys_expiry_is_the_modules_after_a_long_call() {
    for_each_encoding(|encoding| {
        let server = server_in(encoding);
        let mut con = server.connect();
        let args = ["60000", "100000", "*", "COST", "100000"];
        for module in [true, false] {
            let key = format!("long:{module}");
            let ((started, ended), reply, expiry) = timed_call(&mut con, module, &key, &args);
            assert_eq!(reply, [1, 100000, 0, -1, 60000, 60000], "module {module}");
            // From the call's clock, which it reads as it starts: between
            // the TIMEs around it, and where the call is long (a sorted
            // set's COST 100,000) nearer its start than its end. (Each
            // call lasts from under a millisecond to a fifth of a second;
            // a busy machine may pause the server anywhere.)
            let from = expiry - 60000;
            let context = format!("module {module}: {started} <= {from} <= {ended}");
            assert!(started <= from && from <= ended, "{context}");
            if ended - started >= 20 {
                assert!(from - started <= (ended - started) / 2, "{context}");
            }
        }
        let short = ["1", "100000", "*", "COST", "100000"];
        for module in [true, false] {
            let key = format!("short:{module}");
            let (_, reply, _) = timed_call(&mut con, module, &key, &short);
            assert_eq!(reply, [1, 100000, 0, -1, 1, 1], "module {module}");
            // Gone once the server's clock passes the expiry.
            let until = server_ms(&mut con) + 2;
            while server_ms(&mut con) < until {}
            assert_eq!(expire_time(&mut con, key.as_bytes()), -2, "module {module}");
        }
    });
}

/// The rewrites of a log too large to read whole (growth, with the new
/// entries at the end or among the others, dead slots reclaimed, a client
/// behind, a time before the base) leave the module's bytes and reply
/// from the library, from a log both start with alike.
#[test]
fn large_compact_logs_are_rewritten_alike_by_both() {
    for encoding in [Encoding::Compact1, Encoding::Compact] {
        eprintln!("-- encoding {}", encoding.name());
        large_logs_rewritten_alike(encoding);
    }
}

fn large_logs_rewritten_alike(encoding: Encoding) {
    let server = server_in(encoding);
    let mut con = server.connect();
    let slots = encoding == Encoding::Compact1;
    let t: u64 = 1_800_000_000_000;
    let big = "1000000000000";
    // 20,000 entries, 100 a millisecond, made by the module.
    for ms in 0..200 {
        let args = [big, big, &(t + ms).to_string(), "COST", "100"];
        check_result(&mut con, "src", &args).unwrap();
    }
    let capacity = |con: &mut Connection, key: &str| -> usize {
        let len: usize = redis::cmd("STRLEN").arg(key).query(con).unwrap();
        (len - 24) / 4
    };
    // Version 1 fills its free slots; version 2 takes a bit an entry at
    // one time, so a cost of 5,000 fills a few blocks.
    let free = if slots {
        capacity(&mut con, "src") - 20_000
    } else {
        5000
    };
    let steps: Vec<(String, Vec<String>)> = vec![
        (
            "fill the spare room".into(),
            to_strings(&[big, big, &(t + 199).to_string(), "COST", &free.to_string()]),
        ),
        (
            "grow, at the end".into(),
            to_strings(&[big, big, &(t + 200).to_string()]),
        ),
        (
            "fill again".into(),
            to_strings(&[big, big, &(t + 200).to_string(), "COST", "2500"]),
        ),
        (
            "grow, among the others".into(),
            to_strings(&[big, big, &(t + 100).to_string(), "COST", "3000"]),
        ),
        (
            "a client 10 s behind".into(),
            to_strings(&[big, big, &(t - 10_000).to_string()]),
        ),
        (
            "trim past half".into(),
            to_strings(&["60", big, &(t + 200).to_string()]),
        ),
        (
            "before the base".into(),
            to_strings(&[big, big, &(t - 200_000).to_string()]),
        ),
        (
            "COST 100000 past the room".into(),
            to_strings(&[big, big, &(t + 300).to_string(), "COST", "100000"]),
        ),
    ];
    let _: () = redis::cmd("COPY")
        .arg("src")
        .arg("lib")
        .query(&mut con)
        .unwrap();
    for (what, args) in steps {
        let module = call(&mut con, true, Op::Check, "src", &args);
        let library = call(&mut con, false, Op::Check, "lib", &args);
        assert_eq!(library, module, "{what}");
        assert_eq!(module.map(|r| r[0]), Ok(1), "{what}");
        let [a, b]: [Vec<u8>; 2] =
            ["src", "lib"].map(|key| redis::cmd("GET").arg(key).query(&mut con).unwrap());
        assert!(a == b, "{what}: the library's bytes differ");
    }
    if slots {
        assert!(capacity(&mut con, "src") > 120_000);
    }
}

/// A log of `n` entries a millisecond apart from `t`, made by the module,
/// with the slot at `zeroed` freed as another writer might.
fn log_with_a_freed_slot(con: &mut Connection, n: u64, t: u64, zeroed: usize) -> Vec<u8> {
    let times: Vec<u64> = (t..t + n).collect();
    let value = module_log(con, "freed:src", &times);
    let _: i64 = redis::cmd("DEL").arg("freed:src").query(con).unwrap();
    with_slot(&value, zeroed, 0)
}

/// A call's reply, the bytes it left and the expiry after its clock.
type Outcome = (Result<Vec<i64>, String>, Vec<u8>, i64);

/// The server's clock (TIME), a call's reply, the bytes it left and its
/// expiry, from one transaction.
type TimedCall = ((i64, i64), Vec<i64>, Option<Vec<u8>>, i64);

/// Puts `value` under a key for the module and one for the library, runs
/// the call on each, and returns each one's outcome. The clock, the call
/// and what it left are read in one transaction: the key may live only a
/// few milliseconds (a short window on times of the past), and the
/// expiry is taken from the clock the call ran on.
fn on_both_timed(con: &mut Connection, value: &[u8], op: Op, args: &[&str]) -> [Outcome; 2] {
    [true, false].map(|module| {
        let key = if module { "both:m" } else { "both:l" };
        let command = command(module, op, key, &to_strings(args));
        let _: () = redis::cmd("SET").arg(key).arg(value).query(con).unwrap();
        let outcome: RedisResult<TimedCall> = redis::pipe()
            .atomic()
            .cmd("TIME")
            .add_command(command)
            .cmd("GET")
            .arg(key)
            .cmd("PEXPIRETIME")
            .arg(key)
            .query(con);
        match outcome {
            Ok(((seconds, micros), reply, left, expiry)) => {
                let started = seconds * 1000 + micros / 1000;
                let after = if expiry > 0 { expiry - started } else { expiry };
                (Ok(reply), left.unwrap_or_default(), after)
            }
            // The call failed, which changes nothing: ask again for its
            // text, and read the key it left.
            Err(_) => {
                let reply = call(con, module, op, key, &to_strings(args));
                let left: Vec<u8> = redis::cmd("GET").arg(key).query(con).unwrap_or_default();
                (reply, left, expire_time(con, key.as_bytes()))
            }
        }
    })
}

/// On a log another writer damaged, the module's reply and expiry come
/// from the log before its dead slots are dropped, and so do the
/// library's; dropping them, or growing a full log, never moves a freed
/// slot among the live ones (which would hide the entries after it): the
/// growth is refused as damage, the drop left undone.
#[test]
fn damaged_logs_are_replied_to_and_rewritten_alike() {
    let server = server_in(Encoding::Compact1);
    let mut con = server.connect();
    let t: u64 = 1_700_000_000_000;
    let last = (t + 39).to_string();
    let cases: [(usize, Op, [&str; 3]); 2] = [
        (33, Op::Check, ["19", "1", &last]),
        (32, Op::Refund, ["18", "1", &last]),
    ];
    for (zeroed, op, args) in cases {
        let value = log_with_a_freed_slot(&mut con, 40, t, zeroed);
        let [module, library] = on_both_timed(&mut con, &value, op, &args);
        assert_eq!(library.0, module.0, "{op:?} {args:?}: reply");
        assert_eq!(library.1, module.1, "{op:?} {args:?}: bytes");
        assert!(
            (library.2 - module.2).abs() <= 1,
            "{op:?}: expiry {library:?} {module:?}"
        );
    }
    // Full at 41 slots: a growth that would copy the freed slot is refused.
    let value = log_with_a_freed_slot(&mut con, 41, t, 24);
    assert_eq!((value.len() - 24) / 4, 41, "the log is full");
    let args = ["100000000", "1000", &(t + 41).to_string()];
    let [module, library] = on_both_timed(&mut con, &value, Op::Check, &args);
    let wrongtype = "WRONGTYPE Operation against a key holding the wrong kind of value";
    assert_eq!(module.0, Err(wrongtype.to_string()));
    assert_eq!((&library.0, &library.1), (&module.0, &value));
    assert_eq!(module.1, value, "left as it was");
}

/// A log that once spanned 2^32 ms (49 days) takes 8-byte slots; once the
/// wide span has left it, the next growth or drop of dead slots makes it
/// anew in 4-byte slots, in the module and the library alike.
#[test]
fn eight_byte_slots_narrow_again_once_the_wide_span_leaves() {
    let server = server_in(Encoding::Compact1);
    let mut con = server.connect();
    let t: u64 = 1_700_000_000_000;
    let width = |con: &mut Connection, key: &str| -> u8 {
        let value: Vec<u8> = redis::cmd("GET").arg(key).query(con).unwrap();
        value[5]
    };
    for (module, key) in [(true, "wide:m"), (false, "wide:l")] {
        let check = |con: &mut Connection, now: u64| {
            let args = to_strings(&["60000", "1000", &now.to_string()]);
            call(con, module, Op::Check, key, &args).expect("a check")
        };
        for i in 0..50 {
            check(&mut con, t + 10 * i);
        }
        // A client that sends seconds for milliseconds.
        check(&mut con, t / 1000);
        assert_eq!(width(&mut con, key), 8, "module {module}");
        for i in 0..1200 {
            check(&mut con, t + 1000 + 100 * i);
        }
        assert_eq!(width(&mut con, key), 4, "module {module}");
    }
    let [a, b]: [Vec<u8>; 2] =
        ["wide:m", "wide:l"].map(|key| redis::cmd("GET").arg(key).query(&mut con).unwrap());
    assert!(a == b, "the library's bytes differ");
}

/// Waits that reach 2^54 ms (an entry another tool scored at or past 2^53)
/// are all 2^54 in the module, which then keeps the window named first;
/// below that it names the longer wait exactly. The library too.
#[test]
fn waits_near_the_never_wait_bind_as_in_the_module() {
    let server = server_in(Encoding::Zset);
    let mut con = server.connect();
    let max = "9007199254740991";
    let cases: [(&[&str], &[&str]); 3] = [
        (
            &["9007199254740994", "a", "+inf", "b"],
            &[max, "2", "2", "WINDOW", max, "1"],
        ),
        (
            &["9007199254740994", "a", "+inf", "b"],
            &[max, "1", "2", "WINDOW", max, "2"],
        ),
        (
            &["+inf", "a", "+inf", "b"],
            &[max, "1", "2", "WINDOW", max, "1"],
        ),
    ];
    for (n, (scores, args)) in cases.iter().enumerate() {
        let replies = [true, false].map(|module| {
            let key = format!("never{n}:{module}");
            let _: i64 = redis::cmd("ZADD")
                .arg(&key)
                .arg(*scores)
                .query(&mut con)
                .unwrap();
            call(&mut con, module, Op::Peek, &key, &to_strings(args)).expect("a peek")
        });
        assert_eq!(replies[1], replies[0], "{scores:?} {args:?}");
    }
}

/// INFO memory's `used_memory_vm_functions`: the functions' Lua heap,
/// which maxmemory does not count.
fn functions_memory(con: &mut Connection) -> usize {
    support::info_number(con, "memory", "used_memory_vm_functions") as usize
}

/// A call that makes or decodes a large value leaves no garbage nor
/// reference to it in the library once it returns: the Lua heap is back
/// under twice the value's size after each such call.
#[test]
fn the_library_lets_go_of_large_values_when_a_call_ends() {
    for encoding in [Encoding::Compact1, Encoding::Compact] {
        eprintln!("-- encoding {}", encoding.name());
        lets_go_of_large_values(encoding);
    }
}

fn lets_go_of_large_values(encoding: Encoding) {
    let server = Server::with(Config::without_module());
    load_library(&server, encoding);
    let mut con = server.connect();
    // The library's own code and tables, before any call.
    let loaded = functions_memory(&mut con);
    let t: u64 = 1_800_000_000_000;
    let hour = "3600000000";
    let calls: [(u64, &str); 4] = [
        // A new log of 100,000 entries, then one grown past its room.
        (t, "100000"),
        (t + 1, "100000"),
        // Before the base: every slot decoded and written anew.
        (t - 120_000, "1"),
        (t - 240_000, "1"),
    ];
    for (now, cost) in calls {
        let args = [hour, "1000000", &now.to_string(), "COST", cost];
        let reply = call(&mut con, false, Op::Check, "big", &to_strings(&args));
        assert_eq!(reply.map(|r| r[0]), Ok(1), "{args:?}");
        let size: usize = redis::cmd("STRLEN").arg("big").query(&mut con).unwrap();
        let heap = functions_memory(&mut con);
        // Version 1's values (half a megabyte) dwarf the library's own
        // heap; version 2's (16 KB) are held to what the call added.
        let held = if encoding == Encoding::Compact1 {
            heap
        } else {
            heap.saturating_sub(loaded)
        };
        assert!(
            held < 2 * size,
            "{args:?}: Lua heap {heap} ({loaded} loaded) for a value of {size}"
        );
    }
}

/// The commands one FCALL issued, by name, from INFO commandstats (reset
/// before the call): what each step of the library costs.
fn commands_of(con: &mut Connection, key: &str, args: &[&str]) -> Vec<(String, i64)> {
    let (reply, issued) = replied_and_commands_of(con, key, args);
    reply.expect("swl_check");
    issued
}

/// Commands by name, with how many times each was called.
type Issued = Vec<(String, i64)>;

/// FCALL swl_check's reply (the error as text), and the commands it issued.
fn replied_and_commands_of(
    con: &mut Connection,
    key: &str,
    args: &[&str],
) -> (Result<Vec<i64>, String>, Issued) {
    let _: () = redis::cmd("CONFIG").arg(&["RESETSTAT"]).query(con).unwrap();
    let reply = call(con, false, Op::Check, key, &to_strings(args));
    let stats: String = redis::cmd("INFO").arg("commandstats").query(con).unwrap();
    let mut issued: Vec<(String, i64)> = stats
        .lines()
        .filter_map(|line| line.strip_prefix("cmdstat_"))
        .filter_map(|line| {
            let (name, rest) = line.split_once(':')?;
            let calls = rest
                .strip_prefix("calls=")?
                .split(',')
                .next()?
                .parse()
                .ok()?;
            (name != "fcall" && name != "config|resetstat").then(|| (name.to_string(), calls))
        })
        .collect();
    issued.sort();
    (reply, issued)
}

fn named(commands: &[&str]) -> Vec<(String, i64)> {
    let mut counted: Vec<(String, i64)> = Vec::new();
    for command in commands {
        match counted.iter_mut().find(|(name, _)| name == command) {
            Some((_, calls)) => *calls += 1,
            None => counted.push((command.to_string(), 1)),
        }
    }
    counted.sort();
    counted
}

/// The scores of the sorted set in `key`, as ZRANGE shows them; the error
/// as text where it holds anything else.
fn scores_as_text(con: &mut Connection, key: &str) -> Result<Vec<String>, String> {
    let reply: RedisResult<Vec<(String, String)>> = redis::cmd("ZRANGE")
        .arg(key)
        .arg(0)
        .arg(-1)
        .arg("WITHSCORES")
        .query(con);
    reply
        .map(|entries| entries.into_iter().map(|(_, score)| score).collect())
        .map_err(|e| error_text(&e))
}

/// (Another tool's write first, on both keys, where any; now_ms; the
/// reply; the library's commands, where the case is about them.)
type SortedSetStep<'a> = (
    &'a [&'a str],
    &'a str,
    Result<Vec<i64>, String>,
    Option<&'a [&'a str]>,
);

/// Checks of a one-second window and `limit` through the module on one
/// sorted set and the library on another, each step's write first applied
/// to both: the same replies, scores and expiries after every step, and
/// the library's commands where a step names them.
fn sorted_set_steps_alike(limit: &str, steps: Vec<SortedSetStep>) {
    let server = server_in(Encoding::Zset);
    let mut con = server.connect();
    // The expiries as the last step left them, and the server time between
    // the two calls of the step that last set them.
    let mut expiries = (-2, -2);
    let mut apart = 0;
    for (write_first, now, reply, commands) in steps {
        if !write_first.is_empty() {
            for key in ["m", "l"] {
                let _: Value = redis::cmd(write_first[0])
                    .arg(key)
                    .arg(&write_first[1..])
                    .query(&mut con)
                    .unwrap();
            }
        }
        let args = ["1000", limit, now];
        let library_expiry = expire_time(&mut con, b"l");
        let before = server_ms(&mut con);
        let module = call(&mut con, true, Op::Check, "m", &to_strings(&args));
        let (library, issued) = replied_and_commands_of(&mut con, "l", &args);
        let after = server_ms(&mut con);
        assert_eq!(module, reply, "at {now}: the module");
        assert_eq!(library, reply, "at {now}: the library");
        let (m, l) = (expire_time(&mut con, b"m"), expire_time(&mut con, b"l"));
        if let Some(commands) = commands {
            // A denial lengthens the expiry where the clock has passed
            // the one an earlier call set, by a PEXPIRE (whether it moved,
            // the expiries' check below holds to the module's).
            let mut commands = commands.to_vec();
            if matches!(&reply, Ok(r) if r[0] == 0) && l != library_expiry {
                commands.push("pexpire");
            }
            assert_eq!(issued, named(&commands), "at {now}: the library's commands");
        }
        assert_eq!(
            scores_as_text(&mut con, "l"),
            scores_as_text(&mut con, "m"),
            "at {now}: scores"
        );
        // Set from the server's clock as each call ran: apart by at most
        // the time between the calls that set them (a denial may leave
        // both as an earlier step set them).
        if (m, l) != expiries {
            apart = (after - before) as i64;
        }
        assert!(
            (m < 0 && m == l) || (m > 0 && l >= m && l - m <= apart),
            "at {now}: expiries {m} and {l}, {apart} ms apart"
        );
        expiries = (m, l);
    }
}

/// A sorted set whose last check was denied is read as it now is, however
/// it changed since: still full, its oldest entry gone, over its limit or
/// under it after another tool's writes, gone, or another type.
#[test]
fn a_sorted_set_denied_again_is_read_as_it_now_is() {
    let admitted_after_denials: &[&str] =
        &["zrange", "zremrangebyscore", "zadd", "zcount", "pexpire"];
    let steps: Vec<SortedSetStep> = vec![
        (&[], "1000", Ok(vec![1, 3, 2, -1, 1000, 1000]), None),
        (&[], "1001", Ok(vec![1, 3, 1, -1, 1000, 1000]), None),
        (&[], "1002", Ok(vec![1, 3, 0, -1, 1000, 1000]), None),
        (
            &[],
            "1500",
            Ok(vec![0, 3, 0, 500, 502, 1000]),
            Some(&["zremrangebyscore", "zcard", "zrange", "zrange", "pttl"]),
        ),
        // Still full, its oldest inside the window: nothing to trim.
        (
            &[],
            "1600",
            Ok(vec![0, 3, 0, 400, 402, 1000]),
            Some(&["zrange", "zrange", "pttl"]),
        ),
        // The oldest entry at the floor: trimmed, and admitted.
        (
            &[],
            "2000",
            Ok(vec![1, 3, 0, -1, 1000, 1000]),
            Some(admitted_after_denials),
        ),
        (&[], "2000", Ok(vec![0, 3, 0, 1, 1000, 1000]), None),
        // Two entries have left: the count is the trim's.
        (
            &[],
            "2002",
            Ok(vec![1, 3, 1, -1, 1000, 1000]),
            Some(admitted_after_denials),
        ),
        (&[], "2002", Ok(vec![1, 3, 0, -1, 1000, 1000]), None),
        (&[], "2002", Ok(vec![0, 3, 0, 998, 1000, 1000]), None),
        // Over its limit, with an entry to trim: the entry waited for is
        // read after the trim.
        (
            &["ZADD", "1002", "x"],
            "2003",
            Ok(vec![0, 3, 0, 997, 999, 1000]),
            Some(&["zrange", "zremrangebyscore", "zrange", "zrange", "pttl"]),
        ),
        // Under it: counted.
        (
            &["ZREMRANGEBYSCORE", "2000", "2000"],
            "2004",
            Ok(vec![1, 3, 0, -1, 1000, 1000]),
            Some(&[
                "zrange",
                "zremrangebyscore",
                "zcard",
                "zadd",
                "zcount",
                "pexpire",
            ]),
        ),
        (&[], "2005", Ok(vec![0, 3, 0, 997, 999, 1000]), None),
        (
            &["SET", "x"],
            "2006",
            Err("WRONGTYPE Operation against a key holding the wrong kind of value".into()),
            None,
        ),
        // Gone: a new log.
        (
            &["DEL"],
            "2007",
            Ok(vec![1, 3, 2, -1, 1000, 1000]),
            Some(&["zrange", "zremrangebyscore", "zcard", "zadd", "pexpire"]),
        ),
    ];
    sorted_set_steps_alike("3", steps);
}

/// At limits 1 and 2 a sorted set is read before it is trimmed, the newest
/// limit + 1 entries at once: the whole log, unless it holds more. Each
/// case reads alike in the module and the library: a new log, an admit
/// and a denial with nothing to trim, an admit after the oldest left,
/// more entries than the limit from another tool (the entry the wait is
/// for among those read, older ones trimmed too), gone, another type.
#[test]
fn small_limits_read_the_sorted_set_before_trimming_it() {
    let admitted: &[&str] = &["zrange", "zadd", "pexpire"];
    let admitted_after_a_trim: &[&str] = &["zrange", "zremrangebyscore", "zadd", "pexpire"];
    let denied: &[&str] = &["zrange", "pttl"];
    let denied_after_a_trim: &[&str] = &["zrange", "zremrangebyscore", "pttl"];
    let wrongtype = Err("WRONGTYPE Operation against a key holding the wrong kind of value".into());
    sorted_set_steps_alike(
        "2",
        vec![
            (
                &[],
                "1000",
                Ok(vec![1, 2, 1, -1, 1000, 1000]),
                Some(admitted),
            ),
            (
                &[],
                "1001",
                Ok(vec![1, 2, 0, -1, 1000, 1000]),
                Some(admitted),
            ),
            (&[], "1500", Ok(vec![0, 2, 0, 500, 501, 1000]), Some(denied)),
            // The oldest at the floor.
            (
                &[],
                "2000",
                Ok(vec![1, 2, 0, -1, 1000, 1000]),
                Some(admitted_after_a_trim),
            ),
            // Three entries: the trim is sent though it removes nothing.
            (
                &["ZADD", "1500", "x"],
                "2000",
                Ok(vec![0, 2, 0, 500, 1000, 1000]),
                Some(denied_after_a_trim),
            ),
            (
                &[],
                "2001",
                Ok(vec![0, 2, 0, 499, 999, 1000]),
                Some(denied_after_a_trim),
            ),
            // Older entries than those read are trimmed too.
            (
                &["ZADD", "100", "y", "1200", "z"],
                "2201",
                Ok(vec![0, 2, 0, 299, 799, 1000]),
                Some(denied_after_a_trim),
            ),
            (
                &[],
                "2600",
                Ok(vec![1, 2, 0, -1, 1000, 1000]),
                Some(admitted_after_a_trim),
            ),
            (&["SET", "x"], "2700", wrongtype, None),
            (
                &["DEL"],
                "2700",
                Ok(vec![1, 2, 1, -1, 1000, 1000]),
                Some(admitted),
            ),
        ],
    );
    sorted_set_steps_alike(
        "1",
        vec![
            (
                &[],
                "1000",
                Ok(vec![1, 1, 0, -1, 1000, 1000]),
                Some(admitted),
            ),
            (&[], "1999", Ok(vec![0, 1, 0, 1, 1, 1000]), Some(denied)),
            (
                &[],
                "2000",
                Ok(vec![1, 1, 0, -1, 1000, 1000]),
                Some(admitted_after_a_trim),
            ),
            (
                &["ZADD", "1999", "x"],
                "2500",
                Ok(vec![0, 1, 0, 500, 500, 1000]),
                Some(denied_after_a_trim),
            ),
        ],
    );
}

/// The one-window calls are the ones nearly every user makes: each issues
/// only the commands it needs (the usual script issues five when it
/// admits, three when it denies), so a change that adds one shows here.
#[test]
fn one_window_calls_issue_the_fewest_commands() {
    for_each_encoding(|encoding| {
        let server = Server::with(Config::without_module());
        load_library(&server, encoding);
        let mut con = server.connect();
        let admit: &[&str] = &["60000", "3", "*"];
        let (new, admitted, denied, one_left) = match encoding {
            Encoding::Zset => {
                let admitted: &[&str] = &[
                    "time",
                    "zremrangebyscore",
                    "zcard",
                    "zadd",
                    "zcount",
                    "pexpireat",
                ];
                // The entry a denial waits for and the newest, far apart:
                // a read each.
                let denied: &[&str] = &[
                    "time",
                    "zremrangebyscore",
                    "zcard",
                    "zrange",
                    "zrange",
                    "pexpiretime",
                ];
                // Limit 1: the entry waited for is the newest, one read,
                // which also tells that the log is full (no ZCARD).
                let one_left: &[&str] = &["time", "zremrangebyscore", "zrange", "pexpiretime"];
                // Into an empty log: what it adds is the newest, no count
                // of later entries (the usual script's five commands).
                let new: &[&str] = &["time", "zremrangebyscore", "zcard", "zadd", "pexpireat"];
                (new, admitted, denied, one_left)
            }
            Encoding::Compact | Encoding::Compact1 => {
                let new: &[&str] = &["time", "getrange", "type", "set", "pexpireat"];
                let admitted: &[&str] = &["time", "getrange", "setrange", "pexpireat"];
                let denied: &[&str] = &["time", "getrange", "pexpiretime"];
                (new, admitted, denied, denied)
            }
        };
        assert_eq!(commands_of(&mut con, "k", admit), named(new), "a new log");
        assert_eq!(
            commands_of(&mut con, "k", admit),
            named(admitted),
            "admitted"
        );
        assert_eq!(
            commands_of(&mut con, "k", &["60000", "3", "*", "COST", "1"]),
            named(admitted)
        );
        assert_eq!(commands_of(&mut con, "k", admit), named(denied), "denied");
        if encoding == Encoding::Zset {
            // Denied again: the entries at ranks -4 and -3 are asked
            // first, and show the log holding exactly its limit with none
            // to trim (no ZCARD, no ZREMRANGEBYSCORE).
            let again: &[&str] = &["time", "zrange", "zrange", "pexpiretime"];
            assert_eq!(
                commands_of(&mut con, "k", admit),
                named(again),
                "denied again"
            );
        }
        assert_eq!(
            commands_of(&mut con, "k", &["60000", "1", "*"]),
            named(one_left),
            "limit 1"
        );
        if encoding == Encoding::Compact {
            // A sorted set from before new logs were packed: straight
            // through after the GETRANGE that finds it no string.
            let now = server_ms(&mut con);
            let _: i64 = redis::cmd("ZADD")
                .arg("z")
                .arg(now - 1)
                .arg("a")
                .query(&mut con)
                .unwrap();
            assert_eq!(
                commands_of(&mut con, "z", &["60000", "3", &now.to_string()]),
                named(&[
                    "getrange",
                    "zremrangebyscore",
                    "zcard",
                    "zadd",
                    "zcount",
                    "pexpire"
                ]),
                "a sorted set"
            );
            // Two windows on a packed log: straight through as one.
            let two = ["60000", "10", "*", "WINDOW", "1000", "10"];
            assert_eq!(
                commands_of(&mut con, "two", &two[..3]),
                named(&["time", "getrange", "type", "set", "pexpireat"]),
                "a new log"
            );
            assert_eq!(
                commands_of(&mut con, "two", &two),
                named(&["time", "getrange", "setrange", "pexpireat"]),
                "two windows"
            );
        }
        if encoding == Encoding::Zset {
            // Limit 2 on a log of fewer: the one read of the newest three
            // is the whole log, and tells the count and the newest (no
            // ZCARD, no ZCOUNT) and that nothing is to trim; with now_ms
            // passed in, no TIME and a relative expiry.
            let now = server_ms(&mut con).to_string();
            let few: &[&str] = &["zrange", "zadd", "pexpire"];
            assert_eq!(
                commands_of(&mut con, "few", &["60000", "2", &now]),
                named(few),
                "limit 2"
            );
        }
    });
}

/// A packed log of `entries` a `step` apart through the module, then a
/// check that trims it to the newest `kept` (all where `kept` is 0): its
/// bytes and its newest time.
fn packed_log_of(con: &mut Connection, entries: u64, step: u64, kept: u64) -> (Vec<u8>, u64) {
    let _: () = redis::cmd("DEL").arg("log").query(con).unwrap();
    let mut pipe = redis::pipe();
    for i in 0..entries {
        pipe.cmd("SWL.CHECK")
            .arg("log")
            .arg(1u64 << 40)
            .arg(100_000)
            .arg(1_000_000 + i * step);
    }
    let mut newest = 1_000_000 + (entries - 1) * step;
    if kept > 0 {
        newest += step;
        pipe.cmd("SWL.CHECK")
            .arg("log")
            .arg(kept * step)
            .arg(100_000)
            .arg(newest);
    }
    let _: Vec<Value> = pipe.query(con).unwrap();
    let log: Vec<u8> = redis::cmd("GET").arg("log").query(con).unwrap();
    (log, newest)
}

/// The bytes a call left in `key`; none where it is gone or set to
/// expire at once (a refund that leaves no entry in the window), whether
/// or not the millisecond it expires in has ended yet: the module's key
/// lives to the end of that millisecond, the library's may not.
fn bytes_left(con: &mut Connection, key: &str) -> Option<Vec<u8>> {
    let ttl: i64 = redis::cmd("PTTL").arg(key).query(con).unwrap();
    if ttl == -2 || (0..=1).contains(&ttl) {
        return None;
    }
    redis::cmd("GET").arg(key).query(con).unwrap()
}

/// A call's reply and the bytes it left (see bytes_left).
type ReplyAndBytes = (Result<Vec<i64>, String>, Option<Vec<u8>>);

/// The module's and the library's reply to one `op` on the one key "k",
/// set to `value` before each (on_both_timed's, but for a key that a call
/// may set to expire at once, and with no clock read).
fn op_on_both(con: &mut Connection, value: &[u8], op: Op, args: &[String]) -> [ReplyAndBytes; 2] {
    [true, false].map(|module| {
        let _: () = redis::cmd("SET").arg("k").arg(value).query(con).unwrap();
        let reply = call(con, module, op, "k", args);
        (reply, bytes_left(con, "k"))
    })
}

/// Two one-block logs whose bits another writer damaged, found by the
/// differential runs above with other seeds. In the first, a trim leaves
/// one entry: the oldest is then the newest (as the module's time_at), not
/// a select among the damaged bits. In the second, a damaged low field
/// stops the trim's count short, and the refund then leaves the newest
/// entry at or below the trim's floor: none is counted above it. The
/// module's replies are exact; the library's and the bytes left the same.
#[test]
fn damaged_block_interiors_are_counted_alike_after_a_trim_and_a_refund() {
    let server = server_in(Encoding::Compact);
    let mut con = server.connect();
    let cases: [(&str, Op, &[&str], Vec<i64>); 2] = [
        (
            "53574c63020800000000000000000000000000000000000074f82733a20100000000000040004102\
            00000000000000000000000000000000000000000000000000000000000000000000000100000000\
            00000000000000000000000000000000000000000000000000000000000000000000000000000000\
            000000000000000092000000000000000000000000000000000000007fffffffffffffff",
            Op::Check,
            &[
                "146",
                "439",
                "1796154587900",
                "COST",
                "4",
                "WINDOW",
                "575",
                "515",
            ],
            vec![1, 439, 434, -1, 575, 146],
        ),
        (
            "53574c63020800004b000000000000000000000000000000612f2a33a20100074b00000055000200\
            002693c96432994c2693c96432994c2693c96432994c26938e6432994c2693c96432994c2693c964\
            32994c2693c96432994c2693c96432994c2693c96432994c2693c96432994c269319010000000000\
            00000000000000000000000000000000000000000000000000000000000000000000000000000000\
            00000000000000000000000000000000005ffffffffffffffffffffd",
            Op::Refund,
            &["355", "138", "1796154732961"],
            vec![1, 138, 137, -1, 355, 355],
        ),
    ];
    for (hex, op, args, expected) in cases {
        let outcomes = op_on_both(&mut con, &unhex(hex), op, &to_strings(args));
        assert_eq!(outcomes[0].0, Ok(expected), "{op:?} {args:?}: the module");
        assert_eq!(outcomes[1], outcomes[0], "{op:?} {args:?}: the library");
    }
}

/// Parsing checks the head block and the tail block (their ends, the head
/// within the first, the rank of the second past it). Any byte of either
/// damaged, a call is refused with WRONGTYPE or replies, the same in the
/// module and the library, and leaves the same bytes: among them a tail
/// block's rank past what the blocks between hold, which the module once
/// searched beyond the value.
#[test]
fn damaged_head_and_tail_blocks_are_refused_or_read_alike() {
    let server = server_in(Encoding::Compact);
    let mut con = server.connect();
    let mut differing = Vec::new();
    // Two blocks; three, the head moved into the second; two, the head
    // moved into the first; one, the head moved inside it (where a check
    // of one window goes straight through the library).
    for (entries, step, kept) in [
        (300, 100, 0),
        (600, 37, 300),
        (2500, 7, 2000),
        (150, 100, 100),
    ] {
        let (log, newest) = packed_log_of(&mut con, entries, step, kept);
        let head = u32::from_le_bytes(log[12..16].try_into().unwrap()) as usize;
        let tail = u32::from_le_bytes(log[16..20].try_into().unwrap()) as usize;
        let head_rank = u32::from_le_bytes(log[8..12].try_into().unwrap());
        let one_block = entries == 150;
        assert_eq!(
            tail == head,
            one_block,
            "{entries} entries: blocks {head} to {tail}"
        );
        if one_block {
            let before = u32::from_le_bytes(log[24 + 8..24 + 12].try_into().unwrap());
            // 150 entries and the trimming check's own, 100 kept.
            assert_eq!(head_rank - before, 51, "the head inside its block");
        }
        let block = |index: usize| 24 + index * 256..(24 + (index + 1) * 256).min(log.len());
        let at = |offset: u64| (newest + offset).to_string();
        let calls = [
            // Trims from inside the head block, first (before another
            // call has read the head entry's time of these bytes):
            // admitted, and denied (the wait for an entry past the head).
            (Op::Check, to_strings(&["5000", "1000", &at(0)])),
            (Op::Check, to_strings(&["5000", "40", &at(0)])),
            (Op::Peek, to_strings(&["100000", "10", &at(0)])),
            (Op::Check, to_strings(&["100000", "10", &at(5)])),
            (
                Op::Refund,
                to_strings(&["100000", "10", &at(5), "COST", "3"]),
            ),
            (Op::Check, to_strings(&["1000000", "1000", &at(7)])),
            (
                Op::Check,
                to_strings(&["1000000", "1000", &(newest - 100_000).to_string()]),
            ),
            (
                Op::Check,
                to_strings(&["100000", "1000", &at(90_000), "COST", "2"]),
            ),
        ];
        let tail_block = if one_block { 0..0 } else { block(tail) };
        for byte in block(head).chain(tail_block) {
            for flip in [0x01u8, 0x80, 0xff] {
                let mut value = log.clone();
                value[byte] ^= flip;
                for (op, args) in &calls {
                    let outcomes = op_on_both(&mut con, &value, *op, args);
                    for (reply, _) in &outcomes {
                        if let Err(error) = reply {
                            assert!(
                                error.starts_with("WRONGTYPE"),
                                "byte {byte} ^ {flip:#x}, {op:?} {args:?}: {error}"
                            );
                        }
                    }
                    if outcomes[0] != outcomes[1] {
                        differing.push(format!(
                            "{entries} entries, byte {byte} ^ {flip:#x}, {op:?} {args:?}: {:?} / {:?}",
                            outcomes[0].0, outcomes[1].0
                        ));
                    }
                }
            }
        }
    }
    assert!(
        differing.is_empty(),
        "{} read differently: {:?}",
        differing.len(),
        &differing[..differing.len().min(10)]
    );
}

/// Entries arriving behind the newest, as clients whose clocks differ send
/// them: an hour behind now and then, up to ten minutes behind, a few
/// milliseconds behind, and inserts just after a block's first time. Each
/// order runs through the module on one key and the library on another,
/// on format version 2 and version 1, with the same replies and the same
/// bytes every hundred calls and at the end.
#[test]
fn entries_behind_the_newest_are_coded_alike_by_both() {
    const T0: u64 = 1_700_000_000_000;
    // A window nothing here leaves.
    const MONTHS: u64 = 1 << 40;
    let mut rng = Rng(11);
    // Small sliding windows, whose dead entries are coded away.
    let sliding: Vec<(&str, Vec<u64>, u64)> = vec![
        (
            "one a second under 40 s",
            (0..1500u64).map(|i| T0 + i * 1000).collect(),
            40_000,
        ),
        (
            "one a minute under an hour",
            (0..600u64).map(|i| T0 + i * 60_000).collect(),
            3_600_000,
        ),
    ];
    let patterns: Vec<(&str, Vec<u64>)> = vec![
        (
            "a tenth an hour behind",
            (0..3000u64)
                .map(|i| T0 + i * 1000 - if i % 10 == 9 { 3_600_000 } else { 0 })
                .collect(),
        ),
        (
            "each up to ten minutes behind",
            (0..3000u64)
                .map(|i| T0 + 600_000 + i * 1000 - rng.below(600_001))
                .collect(),
        ),
        (
            "three servers 30 ms apart",
            (0..3000u64)
                .map(|i| T0 + (i / 3) * 30 - (i % 3) * 30)
                .collect(),
        ),
        (
            "sparse, in any order over a month",
            (0..2000u64).map(|_| T0 + rng.below(2_000 << 20)).collect(),
        ),
        (
            "two clients a millisecond apart",
            (0..1000u64)
                .map(|i| T0 + (i / 2) * 10_000 - i % 2)
                .collect(),
        ),
        (
            "after the first times of blocks in the middle",
            (0..3000u64)
                .map(|i| {
                    if i < 2000 {
                        T0 + i * 1000
                    } else {
                        T0 + (i % 10) * 170_000 + 1 + i % 3
                    }
                })
                .collect(),
        ),
    ];
    for encoding in [Encoding::Compact, Encoding::Compact1] {
        let server = server_in(encoding);
        let mut con = server.connect();
        for (name, times, window) in patterns
            .iter()
            .map(|(n, t)| (n, t, MONTHS))
            .chain(sliding.iter().map(|(n, t, w)| (n, t, *w)))
        {
            for (i, chunk) in times.chunks(100).enumerate() {
                let mut replies: [Vec<Value>; 2] = [Vec::new(), Vec::new()];
                for (module, got) in [true, false].into_iter().zip(replies.iter_mut()) {
                    let key = if module { "behind:m" } else { "behind:l" };
                    let mut pipe = redis::pipe();
                    for t in chunk {
                        let args = to_strings(&[&window.to_string(), "1000000", &t.to_string()]);
                        pipe.add_command(command(module, Op::Check, key, &args));
                    }
                    *got = pipe.query(&mut con).unwrap_or_else(|e| {
                        panic!("{name}, calls {}.. by the module: {module}: {e}", i * 100)
                    });
                }
                assert_eq!(replies[0], replies[1], "{name}, calls {}..", i * 100);
                let [m, l]: [Vec<u8>; 2] = ["behind:m", "behind:l"]
                    .map(|key| redis::cmd("GET").arg(key).query(&mut con).unwrap());
                assert!(
                    m == l,
                    "{name} in {}: bytes differ after {} calls",
                    encoding.name(),
                    (i + 1) * 100
                );
            }
            let newest = times.iter().max().copied().unwrap_or(0);
            let mut sorted: Vec<u64> = times
                .iter()
                .copied()
                .filter(|&t| t + window > newest)
                .collect();
            sorted.sort_unstable();
            let entries: Vec<u64> = swl_command(false, "entries", "behind:m")
                .query(&mut con)
                .unwrap();
            assert_eq!(entries, sorted, "{name}");
            let _: () = redis::cmd("DEL")
                .arg("behind:m")
                .arg("behind:l")
                .query(&mut con)
                .unwrap();
        }
    }
}
