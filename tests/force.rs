//! FORCE: a request recorded whether or not it fits, uncapped, through the
//! module and the function library on every encoding. Each call goes to
//! both, on keys of their own: the same reply, the same entries (a compact
//! log the same bytes), and an expiry set by the same rule.

mod support;

use redis::{Connection, Value};
use support::{
    contents, error_text, expire_time, for_each_encoding, server_in, snapshot, swl_command,
    Contents, Encoding, Server,
};

const SYNTAX_ERR: &str = "ERR syntax error";

/// What a call did to its key's expiry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expiry {
    /// Exactly the server's clock during the call + reset_after_ms.
    Set,
    /// As it was before the call.
    Kept,
    /// No key after the call.
    NoKey,
    /// Anything else: the expiry after the call, and the server's clock
    /// before and after it.
    Other(i64, i64, i64),
}

/// A server with the module and the library, new logs in one encoding.
struct Both {
    _server: Server,
    con: Connection,
}

impl Both {
    fn start(encoding: Encoding) -> Both {
        let server = server_in(encoding);
        let con = server.connect();
        Both {
            _server: server,
            con,
        }
    }

    /// The module's key and the library's key for `key`.
    fn keys(key: &str) -> [(bool, String); 2] {
        [(false, format!("m:{key}")), (true, format!("l:{key}"))]
    }

    /// SWL.CHECK `key` `args` through the module and the library: the
    /// module's reply and what it did to the expiry, after checking that
    /// the library did the same to its key's expiry and, at a time given,
    /// replied the same and left the same log (with `*` each call reads
    /// its own clock).
    fn check(&mut self, key: &str, args: &[&str]) -> (Vec<i64>, Expiry) {
        let [module, library] = Both::keys(key).map(|(library, key)| {
            let (reply, expiry) = timed_check(&mut self.con, library, &key, args);
            (reply, expiry, log_of(&mut self.con, &key))
        });
        let context = format!("{key} {args:?}: the library against the module");
        assert_eq!(library.1, module.1, "{context}: the expiry");
        if !args.contains(&"*") {
            assert_eq!(library.0, module.0, "{context}: the reply");
            assert_eq!(library.2, module.2, "{context}: the log");
        }
        (module.0, module.1)
    }

    /// A call expected to fail, through both: the error's text, after
    /// checking that both keys are exactly as before.
    fn error(&mut self, command: &str, key: &str, args: &[&str]) -> String {
        let [module, library] = Both::keys(key).map(|(library, key)| {
            let before = snapshot(&mut self.con, key.as_bytes());
            let reply: redis::RedisResult<Value> = swl_command(library, command, &key)
                .arg(args)
                .query(&mut self.con);
            let error = match reply {
                Err(error) => error_text(&error),
                Ok(value) => panic!("{command} {key} {args:?}: expected an error, got {value:?}"),
            };
            let after = snapshot(&mut self.con, key.as_bytes());
            assert_eq!(after, before, "{command} {key} {args:?} changed the key");
            error
        });
        assert_eq!(library, module, "{command} {key} {args:?}");
        module
    }

    /// SWL.ENTRIES `key`, the same from both.
    fn entries(&mut self, key: &str) -> Vec<i64> {
        let [module, library] = Both::keys(key).map(|(library, key)| {
            swl_command(library, "entries", &key)
                .query::<Vec<i64>>(&mut self.con)
                .unwrap()
        });
        assert_eq!(library, module, "SWL.ENTRIES {key}");
        module
    }

    /// The module's log at `key` (the library's is the same).
    fn log(&mut self, key: &str) -> Log {
        log_of(&mut self.con, &format!("m:{key}"))
    }

    fn expire_at(&mut self, key: &str, at: i64) {
        for (_, key) in Both::keys(key) {
            let _: () = redis::cmd("PEXPIREAT")
                .arg(&key)
                .arg(at)
                .query(&mut self.con)
                .unwrap();
        }
    }

    fn expire_time(&mut self, key: &str) -> [i64; 2] {
        Both::keys(key).map(|(_, key)| expire_time(&mut self.con, key.as_bytes()))
    }
}

/// What the module and the library must leave alike: a sorted set's
/// times (its members are random numbers, by design), a compact log's
/// bytes.
#[derive(Debug, Clone, PartialEq)]
enum Log {
    Missing,
    Times(Vec<f64>),
    Bytes(Vec<u8>),
}

fn log_of(con: &mut Connection, key: &str) -> Log {
    match contents(con, key.as_bytes()) {
        Contents::Missing => Log::Missing,
        Contents::Bytes(bytes) => Log::Bytes(bytes),
        zset => Log::Times(zset.times()),
    }
}

/// TIME's reply: seconds and microseconds.
type Time = (i64, i64);

/// SWL.CHECK (or the library's) in one transaction with the expiry before
/// and after it and the server's clock around it.
fn timed_check(
    con: &mut Connection,
    library: bool,
    key: &str,
    args: &[&str],
) -> (Vec<i64>, Expiry) {
    let mut call = swl_command(library, "check", key);
    call.arg(args);
    let (before, started, reply, ended, after): (i64, Time, Vec<i64>, Time, i64) = redis::pipe()
        .atomic()
        .cmd("PEXPIRETIME")
        .arg(key)
        .cmd("TIME")
        .add_command(call)
        .cmd("TIME")
        .cmd("PEXPIRETIME")
        .arg(key)
        .query(con)
        .unwrap_or_else(|e| panic!("check {key} {args:?}: {e}"));
    let ms = |(seconds, micros): Time| seconds * 1000 + micros / 1000;
    let (started, ended) = (ms(started), ms(ended));
    let reset = reply[4];
    let expiry = if after == -2 {
        Expiry::NoKey
    } else if (started + reset..=ended + reset).contains(&after) {
        Expiry::Set
    } else if after == before {
        Expiry::Kept
    } else {
        Expiry::Other(after, started, ended)
    };
    (reply, expiry)
}

/// W = 60 s throughout: keys made at made-up times live a minute on the
/// server's clock, long past the test.
const T: u64 = 1_000_000;

fn at(ms: u64) -> String {
    (T + ms).to_string()
}

#[test]
fn a_forced_request_that_fits_is_a_plain_admit() {
    for_each_encoding(|encoding| {
        let mut both = Both::start(encoding);
        for (now, cost) in [(0, "2"), (100, "1"), (200, "2")] {
            let args = ["60000", "5", &at(now), "COST", cost];
            let plain = both.check("plain", &args);
            let forced = both.check("forced", &[&args[..], &["FORCE"]].concat());
            assert_eq!(forced, plain, "{args:?}");
            assert_eq!(forced.1, Expiry::Set);
            assert_eq!(both.log("forced"), both.log("plain"), "{args:?}");
        }
        assert_eq!(
            both.check("forced", &["60000", "5", &at(300)]).0[..2],
            [0, 5]
        );
    });
}

#[test]
fn a_forced_request_over_the_limit_is_recorded_and_later_checks_refuse() {
    for_each_encoding(|encoding| {
        let mut both = Both::start(encoding);
        let check = |both: &mut Both, now, extra: &[&str]| {
            let now = at(now);
            both.check("k", &[&["60000", "3", &now][..], extra].concat())
        };
        assert_eq!(
            check(&mut both, 0, &["COST", "2"]),
            (vec![1, 3, 1, -1, 60000, 60000], Expiry::Set)
        );
        // 2 + 3 > 3: denied, and all three recorded. COST 3 fits again
        // once all five have left.
        assert_eq!(
            check(&mut both, 10_000, &["COST", "3", "FORCE"]),
            (vec![0, 3, 0, 60000, 60000, 60000], Expiry::Set)
        );
        let (first, forced) = (T as i64, T as i64 + 10_000);
        assert_eq!(both.entries("k"), [first, first, forced, forced, forced]);
        // Five of three: one more fits once three have left, when the
        // forced entries leave at 70 s.
        assert_eq!(
            check(&mut both, 20_000, &[]),
            (vec![0, 3, 0, 50000, 50000, 60000], Expiry::Kept)
        );
        // The first two have left; the window still holds its limit.
        assert_eq!(
            check(&mut both, 60_000, &[]),
            (vec![0, 3, 0, 10000, 10000, 60000], Expiry::Kept)
        );
        assert_eq!(both.entries("k"), [forced, forced, forced]);
        assert_eq!(
            check(&mut both, 70_000, &[]),
            (vec![1, 3, 2, -1, 60000, 60000], Expiry::Set)
        );
        assert_eq!(both.entries("k"), [T as i64 + 70_000]);
    });
}

#[test]
fn a_cost_above_the_limit_is_recorded_whole_unlike_a_penalty() {
    for_each_encoding(|encoding| {
        let mut both = Both::start(encoding);
        let args = ["60000", "3", &at(0), "COST", "5"];
        assert_eq!(
            both.check("forced", &[&args[..], &["FORCE"]].concat()),
            (vec![0, 3, 0, -1, 60000, 60000], Expiry::Set)
        );
        assert_eq!(both.entries("forced"), [T as i64; 5]);
        // PENALIZE caps the log to the limit.
        assert_eq!(
            both.check("penalized", &[&args[..], &["PENALIZE"]].concat()),
            (vec![0, 3, 0, -1, 60000, 60000], Expiry::Set)
        );
        assert_eq!(both.entries("penalized"), [T as i64; 3]);
        // Five of three: one more fits once all five leave.
        assert_eq!(
            both.check("forced", &["60000", "3", &at(30_000)]),
            (vec![0, 3, 0, 30000, 30000, 60000], Expiry::Kept)
        );
        assert_eq!(
            both.check("forced", &["60000", "3", &at(60_000)]),
            (vec![1, 3, 2, -1, 60000, 60000], Expiry::Set)
        );
    });
}

#[test]
fn a_forced_request_under_a_zero_limit_creates_the_log() {
    for_each_encoding(|encoding| {
        let mut both = Both::start(encoding);
        assert_eq!(
            both.check("z", &["60000", "0", &at(0)]),
            (vec![0, 0, 0, -1, 0, 60000], Expiry::NoKey)
        );
        assert_eq!(
            both.check("z", &["60000", "0", &at(0), "FORCE", "COST", "2"]),
            (vec![0, 0, 0, -1, 60000, 60000], Expiry::Set)
        );
        assert_eq!(
            both.check("z", &["60000", "0", &at(1000), "force"]),
            (vec![0, 0, 0, -1, 60000, 60000], Expiry::Set)
        );
        assert_eq!(both.entries("z"), [T as i64, T as i64, T as i64 + 1000]);
        // A plain check counts them, and records nothing.
        assert_eq!(
            both.check("z", &["60000", "3", &at(2000)]),
            (vec![0, 3, 0, 58000, 59000, 60000], Expiry::Kept)
        );
    });
}

#[test]
fn a_forced_request_counts_in_every_window_and_the_denying_one_binds() {
    for_each_encoding(|encoding| {
        let mut both = Both::start(encoding);
        let check = |both: &mut Both, now, extra: &[&str]| {
            let now = at(now);
            let args = [&["10000", "1", &now, "WINDOW", "60000", "5"][..], extra].concat();
            both.check("k", &args)
        };
        assert_eq!(
            check(&mut both, 0, &[]),
            (vec![1, 1, 0, -1, 60000, 10000], Expiry::Set)
        );
        // The ten-second window denies (the minute had room) and binds.
        assert_eq!(
            check(&mut both, 5000, &["FORCE"]),
            (vec![0, 1, 0, 10000, 60000, 10000], Expiry::Set)
        );
        // COST 3 is recorded where the minute had room for it; waiting
        // cannot help the ten seconds, which binds.
        assert_eq!(
            check(&mut both, 6000, &["FORCE", "COST", "3"]),
            (vec![0, 1, 0, -1, 60000, 10000], Expiry::Set)
        );
        assert_eq!(
            both.entries("k"),
            [T, T + 5000, T + 6000, T + 6000, T + 6000].map(|t| t as i64)
        );
        // The minute holds five of five: the oldest leaves at 60 s.
        assert_eq!(
            both.check("k", &["60000", "5", &at(20_000)]),
            (vec![0, 5, 0, 40000, 46000, 60000], Expiry::Kept)
        );
    });
}

/// A forced request records, so it sets the expiry as an admit does: to
/// exactly when its newest entry leaves, shortening a longer one and
/// giving a key without one an expiry, where a denial keeps it.
#[test]
fn a_forced_request_sets_the_expiry_as_an_admit_does() {
    for_each_encoding(|encoding| {
        let mut both = Both::start(encoding);
        let args = ["60000", "1", "*"];
        assert_eq!(
            both.check("e", &args),
            (vec![1, 1, 0, -1, 60000, 60000], Expiry::Set)
        );
        let later = both.expire_time("e")[0] + 3_600_000;
        both.expire_at("e", later);
        assert_eq!(both.check("e", &args).1, Expiry::Kept);
        assert_eq!(both.expire_time("e"), [later; 2]);
        // The forced entry is at the call's clock: the key lives exactly a
        // window from it, and the reply waits for it too.
        let forced = both.check("e", &["60000", "1", "*", "FORCE"]);
        assert_eq!(forced, (vec![0, 1, 0, 60000, 60000, 60000], Expiry::Set));
        for (_, key) in Both::keys("e") {
            let newest = *support::scores(&mut both.con, &key).last().unwrap() as i64;
            assert_eq!(
                expire_time(&mut both.con, key.as_bytes()),
                newest + 60000,
                "{key}"
            );
        }
        for (_, key) in Both::keys("e") {
            let _: () = redis::cmd("PERSIST")
                .arg(&key)
                .query(&mut both.con)
                .unwrap();
        }
        assert_eq!(
            both.check("e", &["60000", "1", "*", "FORCE"]).1,
            Expiry::Set
        );
        for (_, key) in Both::keys("e") {
            let ttl = support::pttl(&mut both.con, &key);
            assert!((59_000..=60_000).contains(&ttl), "{key}: pttl {ttl}");
        }
    });
}

#[test]
fn force_twice_with_penalize_or_outside_a_check_is_a_syntax_error() {
    for_each_encoding(|encoding| {
        let mut both = Both::start(encoding);
        both.check("k", &["60000", "1", &at(0)]);
        let now = at(100);
        let base = ["60000", "1", &now];
        for options in [
            &["FORCE", "FORCE"][..],
            &["force", "COST", "2", "Force"],
            &["FORCE", "PENALIZE"],
            &["PENALIZE", "COST", "2", "FORCE"],
            &["FORCE", "OLDEST"],
            &["FORCE", "WINDOW", "10"],
        ] {
            let args = [&base[..], options].concat();
            assert_eq!(both.error("check", "k", &args), SYNTAX_ERR, "{options:?}");
        }
        for command in ["peek", "refund"] {
            let args = [&base[..], &["FORCE"]].concat();
            assert_eq!(both.error(command, "k", &args), SYNTAX_ERR, "{command}");
        }
        assert_eq!(both.entries("k"), [T as i64]);
    });
}
