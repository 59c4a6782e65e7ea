//! The function library (scripts/swl.lua) against the module: the same long
//! random sequence through both, every reply and error identical, every log
//! with the same scores and entry count, and expiry by the same rule.

mod support;

use redis::{Connection, RedisResult};
use support::{error_text, expire_time, scores, server_ms, Config, Rng, Server, NEVER_MS};

fn load_library(server: &Server) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/swl.lua");
    let library = std::fs::read_to_string(path).expect("read scripts/swl.lua");
    let name: String = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg(library)
        .query(&mut server.connect())
        .expect("FUNCTION LOAD");
    assert_eq!(name, "swl");
}

/// SWL.CHECK or SWL.PEEK on the module; FCALL swl_check or swl_peek on the
/// library.
fn command(module: bool, peek: bool, key: &str, args: &[String]) -> redis::Cmd {
    let mut cmd = match (module, peek) {
        (true, false) => redis::cmd("SWL.CHECK"),
        (true, true) => redis::cmd("SWL.PEEK"),
        (false, false) => redis::cmd("FCALL").arg("swl_check").arg(1).clone(),
        (false, true) => redis::cmd("FCALL").arg("swl_peek").arg(1).clone(),
    };
    cmd.arg(key).arg(args);
    cmd
}

/// The reply, or the error as text, to compare them exactly.
fn call(
    con: &mut Connection,
    module: bool,
    peek: bool,
    key: &str,
    args: &[String],
) -> Result<Vec<i64>, String> {
    let reply: RedisResult<Vec<i64>> = command(module, peek, key, args).query(con);
    reply.map_err(|e| error_text(&e))
}

/// What one call did: its reply, the key's expiry before and after, and
/// the server's clock around it.
struct Step {
    reply: Result<Vec<i64>, String>,
    before: i64,
    after: i64,
    started: u64,
    ended: u64,
}

/// Runs the call and then gives the key an hour-long TTL or none, in one
/// transaction: the made-up times give real TTLs of a few milliseconds,
/// which must not run out on one server and not the other.
fn step(
    con: &mut Connection,
    module: bool,
    peek: bool,
    key: &str,
    args: &[String],
    persist: bool,
) -> Step {
    let mut pipe = redis::pipe();
    pipe.atomic()
        .cmd("PEXPIRETIME")
        .arg(key)
        .cmd("TIME")
        .add_command(command(module, peek, key, args))
        .cmd("TIME")
        .cmd("PEXPIRETIME")
        .arg(key);
    if persist {
        pipe.cmd("PERSIST").arg(key);
    } else {
        pipe.cmd("PEXPIRE").arg(key).arg(3_600_000);
    }
    type Replies = (i64, (u64, u64), Vec<i64>, (u64, u64), i64, i64);
    let ms = |(s, us): (u64, u64)| s * 1000 + us / 1000;
    match pipe.query::<Replies>(con) {
        Ok((before, started, reply, ended, after, _)) => Step {
            reply: Ok(reply),
            before,
            after,
            started: ms(started),
            ended: ms(ended),
        },
        // The call failed, which changes nothing: ask again for its text.
        Err(_) => Step {
            reply: call(con, module, peek, key, args),
            before: 0,
            after: 0,
            started: 0,
            ended: 0,
        },
    }
}

/// Random arguments; limits below `max_limit`.
fn random_args(rng: &mut Rng, clock: u64, max_limit: u64) -> Vec<String> {
    // Explicit times only: with `*` each server reads its own clock.
    let now = match rng.below(10) {
        0 => clock.saturating_sub(rng.below(300)),
        1 => clock + rng.below(300),
        _ => clock,
    }
    .to_string();
    let mut args = vec![
        (1 + rng.below(400)).to_string(),
        rng.below(max_limit).to_string(),
        now,
    ];
    for _ in 0..rng.below(4) {
        match rng.below(4) {
            0 => args.extend(["COST".into(), (1 + rng.below(4)).to_string()]),
            1 | 2 => args.extend([
                "WINDOW".into(),
                (1 + rng.below(400)).to_string(),
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

/// Expiry after a call is either the one before (kept) or the server's
/// time during the call plus reset_after_ms (set).
#[derive(Debug, PartialEq, Clone, Copy)]
enum Expiry {
    Kept,
    Set,
    Either,
    Neither,
}

fn classify(before: i64, after: i64, reset: i64, started: u64, ended: u64) -> Expiry {
    let kept = before == after;
    let set = after >= started as i64 + reset && after <= ended as i64 + reset;
    match (kept, set) {
        (true, true) => Expiry::Either,
        (true, false) => Expiry::Kept,
        (false, true) => Expiry::Set,
        (false, false) => Expiry::Neither,
    }
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

/// Runs `steps` random checks and peeks through both, on four keys, and
/// compares replies, logs and expiry after each. `foreign` is how often
/// (one step in so many) another tool adds scores to both logs first.
/// Returns how many calls admitted, denied and failed.
fn differential(seed: u64, steps: usize, max_limit: u64, foreign: Option<u64>) -> [usize; 3] {
    let module = Server::start();
    let library = Server::with(Config::without_module());
    load_library(&library);
    let mut cons = [module.connect(), library.connect()];
    let mut rng = Rng(seed);
    let mut clock = 500_000u64;
    let mut seen = [0usize; 3];
    for n in 0..steps {
        let key = format!("d{}", rng.below(4));
        clock += rng.below(25);
        if foreign.is_some_and(|every| rng.below(every) == 0) {
            let scores = foreign_scores(&mut rng, clock);
            for con in cons.iter_mut() {
                let mut zadd = redis::cmd("ZADD");
                zadd.arg(&key);
                for (i, score) in scores.iter().enumerate() {
                    zadd.arg(score).arg(format!("other{n}.{i}"));
                }
                let _: i64 = zadd.query(con).unwrap();
            }
        }
        let args = random_args(&mut rng, clock, max_limit);
        let peek = rng.below(5) == 0;
        let persist = rng.below(3) == 0;
        let steps: Vec<Step> = cons
            .iter_mut()
            .zip([true, false])
            .map(|(con, is_module)| step(con, is_module, peek, &key, &args, persist))
            .collect();
        let expiries: Vec<Expiry> = steps
            .iter()
            .map(|s| match &s.reply {
                // A trim that emptied the log removed the key.
                _ if s.after == -2 => Expiry::Either,
                Ok(r) if !peek => classify(s.before, s.after, r[4], s.started, s.ended),
                _ if s.after == s.before => Expiry::Kept,
                _ => Expiry::Neither,
            })
            .collect();
        let replies: Vec<&Result<Vec<i64>, String>> = steps.iter().map(|s| &s.reply).collect();
        let context = format!("step {n}: {key} {args:?} peek={peek}");
        assert_eq!(replies[0], replies[1], "{context}");
        assert!(
            !expiries.contains(&Expiry::Neither),
            "{context}: expiry {expiries:?}"
        );
        assert!(
            !(expiries.contains(&Expiry::Kept) && expiries.contains(&Expiry::Set)),
            "{context}: expiry {expiries:?}"
        );
        let [a, b] = &mut cons;
        assert_eq!(scores(a, &key), scores(b, &key), "{context}: the logs");
        assert_eq!(
            expire_time(a, key.as_bytes()) == -2,
            expire_time(b, key.as_bytes()) == -2,
            "{context}"
        );
        match &replies[0] {
            Ok(reply) => seen[reply[0] as usize] += 1,
            Err(_) => seen[2] += 1,
        }
    }
    seen
}

#[test]
fn the_library_behaves_exactly_like_the_module() {
    let seen = differential(0x00c0_ffee_1234_5678, 2500, 9, None);
    assert!(
        seen.iter().all(|&n| n > 100),
        "admits, denials and errors: {seen:?}"
    );
}

/// Large limits on logs of hundreds of entries take the module's O(log N)
/// paths (counts and ranks through ZCOUNT and ZRANGE); scores from other
/// tools take the saturating and rounding ones.
#[test]
fn the_library_agrees_on_large_logs_and_other_tools_scores() {
    let seen = differential(0x5eed_0bad_cafe_f00d, 1500, 600, Some(6));
    assert!(
        seen.iter().all(|&n| n > 50),
        "admits, denials and errors: {seen:?}"
    );
}

#[test]
fn the_library_reports_the_same_errors() {
    let module = Server::start();
    let library = Server::with(Config::without_module());
    load_library(&library);
    let cases: &[&[&str]] = &[
        &["1000", "5"],
        &["0", "5", "1"],
        &["1000", "-5", "1"],
        &["1000", "5", "now"],
        &["1000", "5", "1", "COST", "0"],
        &["1000", "5", "1", "COST", "100001"],
        &["1000", "5", "1", "WINDOW", "10"],
        &["1000", "5", "1", "PENALIZE", "PENALIZE"],
        &["1000", "5", "1", "BOGUS"],
    ];
    for args in cases {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        let expected = call(&mut module.connect(), true, false, "k", &args);
        assert!(expected.is_err(), "{args:?}");
        assert_eq!(
            call(&mut library.connect(), false, false, "k", &args),
            expected,
            "{args:?}"
        );
    }
    for server in [&module, &library] {
        let _: () = redis::cmd("SET")
            .arg("s")
            .arg("v")
            .query(&mut server.connect())
            .unwrap();
    }
    let args: Vec<String> = ["1000", "5", "1"].map(String::from).to_vec();
    for peek in [false, true] {
        let expected = call(&mut module.connect(), true, peek, "s", &args);
        assert_eq!(
            expected,
            Err("WRONGTYPE Operation against a key holding the wrong kind of value".to_string())
        );
        assert_eq!(
            call(&mut library.connect(), false, peek, "s", &args),
            expected
        );
    }
}

#[test]
fn the_library_takes_the_server_clock_for_star() {
    let library = Server::with(Config::without_module());
    load_library(&library);
    let mut con = library.connect();
    let args: Vec<String> = ["60000", "5", "*", "COST", "2"].map(String::from).to_vec();
    let before = server_ms(&mut con);
    assert_eq!(
        call(&mut con, false, false, "now", &args),
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
    // Exact, or 1 ms late if a millisecond ticked inside the function
    // between reading the clock and setting the expiry (see swl.lua).
    let expiry = expire_time(&mut con, b"now") - (recorded as i64 + 60000);
    assert!(expiry == 0 || expiry == 1, "expiry off by {expiry} ms");
    let members = support::entries(&mut con, b"now");
    assert!(members.iter().all(|(m, _)| m.len() == 14), "{members:?}");
}

#[test]
fn an_infinite_score_gets_the_same_saturated_reply_and_nothing_fails() {
    let module = Server::start();
    let library = Server::with(Config::without_module());
    load_library(&library);
    let args: Vec<String> = ["1000", "5", "*"].map(String::from).to_vec();
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
            call(&mut con, is_module, false, "inf1", &args),
            Ok(vec![1, 5, 3, -1, NEVER_MS, 1000]),
            "module: {is_module}"
        );
        let ended = server_ms(&mut con) as i64;
        let log = scores(&mut con, "inf1");
        assert_eq!(log.len(), 2);
        assert_eq!(log[1], f64::INFINITY);
        // The key lives as long as its newest entry stays: 2^54 ms (the
        // library's relative expiry rounds to a double there: 1 ms more).
        let expiry = expire_time(&mut con, b"inf1") - NEVER_MS;
        assert!(
            (started..=ended + 1).contains(&expiry),
            "module: {is_module}: {started} <= {expiry} <= {ended}"
        );
    }
}

#[test]
fn the_library_names_the_window_its_reply_describes() {
    let library = Server::with(Config::without_module());
    load_library(&library);
    let mut con = library.connect();
    let args = |list: &[&str]| -> Vec<String> { list.iter().map(|s| s.to_string()).collect() };
    let one = args(&["60000", "2", "1000"]);
    assert_eq!(
        call(&mut con, false, true, "w", &one),
        Ok(vec![1, 2, 1, -1, 60000, 60000])
    );
    assert_eq!(
        call(&mut con, false, false, "w", &one),
        Ok(vec![1, 2, 1, -1, 60000, 60000])
    );
    let several = args(&["60000", "10", "1100", "WINDOW", "1000", "2"]);
    assert_eq!(
        call(&mut con, false, true, "w", &several),
        Ok(vec![1, 2, 0, -1, 60000, 1000])
    );
    assert_eq!(
        call(&mut con, false, false, "w", &several),
        Ok(vec![1, 2, 0, -1, 60000, 1000])
    );
    assert_eq!(
        call(&mut con, false, false, "w", &several),
        Ok(vec![0, 2, 0, 900, 60000, 1000])
    );
    let long = args(&["60000", "2", "1200", "WINDOW", "1000", "2"]);
    assert_eq!(
        call(&mut con, false, true, "w", &long),
        Ok(vec![0, 2, 0, 59800, 59900, 60000])
    );
}
