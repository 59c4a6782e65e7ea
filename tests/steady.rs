//! A log a client keeps calling, through the function library and the
//! module alike: one window, cost 1, call after call on logs of thousands
//! of entries (the usual check, which the library answers straight through
//! where it can: see packed.check_kept in lua/packed.lua). Every reply, the
//! log left and the expiry are compared after each call, while the head
//! leaves blocks, blocks open, values are copied, calls come behind the
//! newest, other writers change the key and keys outnumber what the
//! library keeps of them.

mod support;

use redis::{Connection, Value};
use support::{contents, for_each_encoding, server_in, server_ms, Contents, Encoding};

/// The window of every call here: an hour.
const WINDOW: u64 = 3_600_000;

/// A key's log as both can be compared: its times, and a compact log's
/// bytes (a sorted set's members are the server's clock, not compared).
fn log_of(con: &mut Connection, key: &str) -> (Vec<f64>, Option<Vec<u8>>) {
    let log = contents(con, key.as_bytes());
    let bytes = match &log {
        Contents::Bytes(bytes) => Some(bytes.clone()),
        _ => None,
    };
    (log.times(), bytes)
}

/// Replies counted: admitted, denied.
#[derive(Default)]
struct Outcomes {
    admitted: usize,
    denied: usize,
}

impl Outcomes {
    fn add(&mut self, reply: &[i64]) {
        if reply[0] == 1 {
            self.admitted += 1;
        } else {
            self.denied += 1;
        }
    }
}

/// A second window of a check: its milliseconds and limit.
type Second = Option<(u64, u64)>;

/// One check of `limit` at `now` on `key` (and a `second` window), by
/// the module or the library, with the server's clock before and after
/// it and the key's expiry before and after, read in one transaction.
fn checked(
    con: &mut Connection,
    library: bool,
    key: &str,
    limit: u64,
    now: u64,
    second: Second,
) -> Checked {
    let mut check = if library {
        let mut cmd = redis::cmd("FCALL");
        cmd.arg("swl_check").arg(1).arg(key);
        cmd
    } else {
        let mut cmd = redis::cmd("SWL.CHECK");
        cmd.arg(key);
        cmd
    };
    check.arg(WINDOW).arg(limit).arg(now);
    if let Some((ms, limit)) = second {
        check.arg("WINDOW").arg(ms).arg(limit);
    }
    let mut pipe = redis::pipe();
    pipe.atomic()
        .cmd("PEXPIRETIME")
        .arg(key)
        .cmd("TIME")
        .add_command(check)
        .cmd("TIME")
        .cmd("PEXPIRETIME")
        .arg(key);
    let r: Vec<Value> = pipe.query(con).expect("a check");
    let ms = |time: &Value| {
        let (s, us): (u64, u64) = redis::from_redis_value(time).expect("TIME");
        (s * 1000 + us / 1000) as i64
    };
    let integer = |value: &Value| redis::from_redis_value::<i64>(value).expect("PEXPIRETIME");
    Checked {
        reply: redis::from_redis_value(&r[2]).expect("a reply"),
        before: integer(&r[0]),
        after: integer(&r[4]),
        started: ms(&r[1]),
        ended: ms(&r[3]),
    }
}

struct Checked {
    reply: Vec<i64>,
    before: i64,
    after: i64,
    started: i64,
    ended: i64,
}

impl Checked {
    /// Whether the expiry is the one a check leaves: a window from the
    /// server's clock during the call after an admit (the newest entry is
    /// at now), and after a denial the one before unless that ended before
    /// the newest entry leaves (reset_after_ms from the clock) or was none.
    fn expiry_holds(&self) -> bool {
        let set = (self.started + self.reply[4]..=self.ended + self.reply[4]).contains(&self.after);
        if self.reply[0] == 1 {
            return set;
        }
        // (An expiry missing, -1, is set: the key was made by another
        // tool.)
        let lengthened =
            self.before == -1 || (self.before >= 0 && self.before < self.ended + self.reply[4]);
        if lengthened {
            set
        } else {
            self.after == self.before
        }
    }
}

/// The same check on the module's key and the library's: the same reply,
/// the same log, each expiry as a check leaves it.
fn check_both(
    con: &mut Connection,
    keys: (&str, &str),
    limit: u64,
    now: u64,
    context: &str,
) -> Vec<i64> {
    check_both_windows(con, keys, limit, now, None, context)
}

/// check_both with a `second` window.
fn check_both_windows(
    con: &mut Connection,
    keys: (&str, &str),
    limit: u64,
    now: u64,
    second: Second,
    context: &str,
) -> Vec<i64> {
    let module = checked(con, false, keys.0, limit, now, second);
    let library = checked(con, true, keys.1, limit, now, second);
    assert_eq!(library.reply, module.reply, "{context}: the reply at {now}");
    assert_eq!(
        log_of(con, keys.1),
        log_of(con, keys.0),
        "{context}: the log at {now}"
    );
    for (who, call) in [("module", &module), ("library", &library)] {
        assert!(
            call.expiry_holds(),
            "{context}: the {who}'s expiry at {now}: {:?} before {} after {} clock {}..{}",
            call.reply,
            call.before,
            call.after,
            call.started,
            call.ended
        );
    }
    module.reply
}

/// `entries` calls spread over the window, then `calls` more one spacing
/// apart, each admitted at a limit of twice the entries (trimming one and
/// adding one), then denials at a limit of the entries, then calls of which
/// every third comes 30 ms behind the newest: on a module key and a library
/// key, compared after each call. Returns the replies counted.
fn steady(
    con: &mut Connection,
    keys: (&str, &str),
    entries: u64,
    calls: u64,
    context: &str,
) -> Outcomes {
    let spacing = WINDOW / entries;
    let start = server_ms(con) - WINDOW;
    let at = |i: u64| start + i * spacing;
    let mut outcomes = Outcomes::default();
    for i in 0..entries + calls {
        outcomes.add(&check_both(con, keys, 2 * entries, at(i), context));
    }
    let next = entries + calls;
    for _ in 0..20 {
        outcomes.add(&check_both(con, keys, entries, at(next - 1) + 1, context));
    }
    for i in next..next + 60 {
        let now = if i % 3 == 0 { at(i - 1) - 30 } else { at(i) };
        outcomes.add(&check_both(con, keys, 2 * entries, now, context));
    }
    outcomes
}

#[test]
fn a_log_a_client_keeps_calling_is_read_and_written_alike_by_both() {
    for_each_encoding(|encoding| {
        let server = server_in(encoding);
        let mut con = server.connect();
        // One block, a few blocks, many blocks (the head and tail apart).
        for (entries, calls) in [(10, 400), (300, 700), (3000, 3000)] {
            let context = format!("{} with {entries} entries", encoding.name());
            let outcomes = steady(&mut con, ("m", "l"), entries, calls, &context);
            assert_eq!(
                outcomes.admitted,
                (entries + calls) as usize + 60,
                "{context}"
            );
            assert_eq!(outcomes.denied, 20, "{context}");
            if encoding == Encoding::Compact {
                // Format 2, whose head leaves block 0 past a block's entries.
                assert_eq!(packed_bytes(&mut con, "l")[4], 2, "{context}: format 2");
            }
            for key in ["m", "l"] {
                let _: i64 = redis::cmd("DEL").arg(key).query(&mut con).unwrap();
            }
        }
    });
}

/// The library keeps what it read of a few keys' logs from call to call:
/// a key changed by another writer in between (the module, or bytes
/// damaged in the middle of its head block) is read as it now is, and
/// more keys than it keeps are each answered as the module answers.
#[test]
fn logs_changed_between_calls_and_many_keys_are_read_alike_by_both() {
    for_each_encoding(|encoding| {
        let server = server_in(encoding);
        let mut con = server.connect();
        let context = encoding.name();
        let entries = 1000;
        let spacing = WINDOW / entries;
        let start = server_ms(&mut con) - WINDOW;
        let keys: Vec<(String, String)> = (0..40)
            .map(|k| (format!("m{k}"), format!("l{k}")))
            .collect();
        for i in 0..entries + 200 {
            for (k, (module, library)) in keys.iter().enumerate() {
                // Only the first key's log fills; the others are called
                // in turn, more of them than the library keeps.
                if k > 0 && i % 50 != 0 {
                    continue;
                }
                let now = start + i * spacing;
                check_both(&mut con, (module, library), 2 * entries, now, context);
                if k == 0 && i > entries && i % 7 == 0 {
                    // The module writes both keys between the library's
                    // calls: it changes the library's log under it.
                    for key in [module, library] {
                        module_check(&mut con, key, 2 * entries, now + 1);
                    }
                    assert_eq!(
                        log_of(&mut con, library),
                        log_of(&mut con, module),
                        "{context}"
                    );
                }
            }
        }
        if encoding != Encoding::Compact {
            return;
        }
        // A byte in the middle of the head block changed on both keys: the
        // next calls read it as the module does (a refusal or a reply).
        let (module, library) = (&keys[0].0, &keys[0].1);
        let at = 24 + head_block(&mut con, library) * 256 + 200;
        assert_eq!(head_block(&mut con, module), head_block(&mut con, library));
        for key in [module, library] {
            let _: i64 = redis::cmd("SETRANGE")
                .arg(key)
                .arg(at)
                .arg("\u{7f}")
                .query(&mut con)
                .unwrap();
        }
        let now = start + (entries + 200) * spacing;
        let replies = [false, true].map(|library| {
            let key = if library { &keys[0].1 } else { &keys[0].0 };
            let mut cmd = if library {
                let mut cmd = redis::cmd("FCALL");
                cmd.arg("swl_check").arg(1);
                cmd
            } else {
                redis::cmd("SWL.CHECK")
            };
            let reply: redis::RedisResult<Vec<i64>> = cmd
                .arg(key)
                .arg(WINDOW)
                .arg(2 * entries)
                .arg(now)
                .query(&mut con);
            reply.map_err(|e| e.to_string())
        });
        assert_eq!(replies[1], replies[0], "after damage: the reply");
        assert_eq!(
            log_of(&mut con, library),
            log_of(&mut con, module),
            "after damage: the log"
        );
    });
}

/// Two windows, an hour and a narrower one (or a wider one named second),
/// on logs of one block to many: the narrow window's floor in the head
/// block, the tail block or the blocks between, each window binding in
/// turn, calls behind the newest, and denials in the narrow window only.
#[test]
fn two_windows_on_a_log_a_client_keeps_calling_are_answered_alike_by_both() {
    for_each_encoding(|encoding| {
        let server = server_in(encoding);
        let mut con = server.connect();
        for entries in [10, 300, 12_000] {
            let context = format!("{} with {entries} entries", encoding.name());
            let keys = ("m", "l");
            let spacing = WINDOW / entries;
            let start = server_ms(&mut con) - WINDOW;
            let at = |i: u64| start + i * spacing;
            // Filled in one pipeline each, compared once.
            let mut fill = redis::pipe();
            for i in 0..entries {
                fill.cmd("SWL.CHECK")
                    .arg(keys.0)
                    .arg(WINDOW)
                    .arg(2 * entries)
                    .arg(at(i));
                fill.cmd("FCALL").arg("swl_check").arg(1).arg(keys.1);
                fill.arg(WINDOW).arg(2 * entries).arg(at(i));
            }
            let _: Vec<Value> = fill.query(&mut con).expect("the calls that fill");
            assert_eq!(
                log_of(&mut con, keys.1),
                log_of(&mut con, keys.0),
                "{context}"
            );
            let mut outcomes = Outcomes::default();
            for i in entries..entries + 240 {
                let now = if i % 5 == 4 { at(i - 1) - 30 } else { at(i) };
                // What the module's log would reply to one window.
                let peek = |con: &mut Connection, ms: u64, limit: u64| -> Vec<i64> {
                    redis::cmd("SWL.PEEK")
                        .arg(keys.0)
                        .arg(ms)
                        .arg(limit)
                        .arg(now)
                        .query(con)
                        .expect("SWL.PEEK")
                };
                let mut limit = 2 * entries;
                let second = match i % 8 {
                    // Ten minutes (blocks between head and tail on the
                    // largest log), binding: fewer left than the hour.
                    0 | 4 => (600_000, 600_000 / spacing + 2),
                    // Half an hour with as many left as the hour: the
                    // first window binds.
                    1 | 5 => {
                        let hour = peek(&mut con, WINDOW, limit)[2] as u64;
                        let half = peek(&mut con, WINDOW / 2, limit)[2] as u64;
                        (WINDOW / 2, limit - half + hour)
                    }
                    // Three calls' time, full: denied.
                    2 => (3 * spacing, 2),
                    // Both full, the second's wait the longer.
                    6 => {
                        limit = entries / 2;
                        (2 * WINDOW, entries / 2)
                    }
                    // Both full, waiting as long (the first binds) where a
                    // limit near the first's makes it so.
                    3 => {
                        limit = entries / 2;
                        let retry = peek(&mut con, WINDOW, limit)[3];
                        let ms = WINDOW + spacing;
                        (limit - 3..limit + 3)
                            .find(|&l| peek(&mut con, ms, l)[3] == retry)
                            .map_or((ms, limit), |l| (ms, l))
                    }
                    // Wider than the first: it trims.
                    _ => (2 * WINDOW, 3 * entries),
                };
                let reply = check_both_windows(&mut con, keys, limit, now, Some(second), &context);
                outcomes.add(&reply);
            }
            assert!(
                outcomes.admitted > 120 && outcomes.denied > 20,
                "{context}: {} admitted, {} denied",
                outcomes.admitted,
                outcomes.denied
            );
            for key in [keys.0, keys.1] {
                let _: i64 = redis::cmd("DEL").arg(key).query(&mut con).unwrap();
            }
        }
    });
}

/// Limits of one and two (whose newest entries the library reads in one
/// go) and larger ones, a key denied call after call then admitted, and
/// entries after now from another writer: each call answered, and the
/// log and expiry left, as the module does.
#[test]
fn small_limits_runs_of_denials_and_later_entries_are_answered_alike_by_both() {
    for_each_encoding(|encoding| {
        let server = server_in(encoding);
        let mut con = server.connect();
        let context = encoding.name();
        let keys = ("m", "l");
        // Three calls to a window: limits up to 8 admit some, deny others.
        let spacing = WINDOW / 3;
        let start = server_ms(&mut con) - WINDOW;
        let limits = [1, 2, 3, 5, 2, 1, 8, 4, 2];
        let mut outcomes = Outcomes::default();
        let mut last = start;
        for i in 0..400u64 {
            let limit = limits[(i / 3) as usize % limits.len()];
            // In order, 30 ms behind, or a millisecond after the last call.
            let now = match i % 5 {
                4 => start + i * spacing - 30,
                2 => last + 1,
                _ => start + i * spacing,
            };
            last = now;
            let reply = check_both(&mut con, keys, limit, now, context);
            outcomes.add(&reply);
            if i % 13 == 12 {
                // Another writer: an entry after the next call in both,
                // every other time into an emptied log.
                for key in [keys.0, keys.1] {
                    if i % 26 == 25 {
                        let _: i64 = redis::cmd("DEL").arg(key).query(&mut con).unwrap();
                    }
                    module_check(&mut con, key, 1000, now + spacing + 7);
                }
            }
        }
        assert!(
            outcomes.admitted > 100 && outcomes.denied > 100,
            "{context}: {} admitted, {} denied",
            outcomes.admitted,
            outcomes.denied
        );
    });
}

/// Sorted sets from before new logs were packed stay sorted sets, and the
/// library (which checks them straight through too) answers them as the
/// module does: small limits and large, denials, calls behind the newest.
#[test]
fn sorted_sets_where_new_logs_are_packed_are_answered_alike_by_both() {
    let server = server_in(Encoding::Compact);
    let mut con = server.connect();
    let keys = ("m", "l");
    let spacing = WINDOW / 100;
    let start = server_ms(&mut con) - WINDOW;
    for key in [keys.0, keys.1] {
        let mut zadd = redis::cmd("ZADD");
        zadd.arg(key);
        for i in 0..100 {
            zadd.arg(start + i * spacing).arg(format!("{key}{i}"));
        }
        let _: i64 = zadd.query(&mut con).expect("ZADD");
    }
    let mut outcomes = Outcomes::default();
    for i in 100..400u64 {
        let now = if i % 5 == 4 {
            start + (i - 1) * spacing - 30
        } else {
            start + i * spacing
        };
        let limit = [1, 2, 100, 101, 150][(i % 5) as usize];
        let reply = check_both(&mut con, keys, limit, now, "sorted sets");
        outcomes.add(&reply);
    }
    assert!(
        outcomes.admitted > 50 && outcomes.denied > 50,
        "{} admitted, {} denied",
        outcomes.admitted,
        outcomes.denied
    );
    let kind: String = redis::cmd("TYPE").arg(keys.1).query(&mut con).unwrap();
    assert_eq!(kind, "zset");
}

/// A client over its limit, denied call after call (which the library
/// answers from what the denial before found where the bytes it reads are
/// the same), while the log changes between denials: an entry forced in
/// by another writer and refunded, the limit raised, the oldest entry
/// reaching the floor, a byte of the head block changed. Each call is
/// answered, and the log and expiry left, as the module does, on logs of
/// one block and of many.
#[test]
fn denials_in_a_row_read_what_changed_between_them() {
    for_each_encoding(|encoding| {
        let server = server_in(encoding);
        let mut con = server.connect();
        let keys = ("m", "l");
        for entries in [10u64, 1000] {
            let context = format!("{} with {entries} entries", encoding.name());
            let context = context.as_str();
            let _: i64 = redis::cmd("DEL")
                .arg(keys.0)
                .arg(keys.1)
                .query(&mut con)
                .unwrap();
            let spacing = WINDOW / entries;
            let start = server_ms(&mut con) - 2 * WINDOW;
            // Half a window more than the entries, one spacing apart, so
            // that the head has moved on.
            let filled = entries + entries / 2;
            for i in 0..filled {
                check_both(&mut con, keys, 2 * entries, start + i * spacing, context);
            }
            let oldest = start + (filled - entries) * spacing;
            let newest = start + (filled - 1) * spacing;
            let now = newest + 1;
            let deny = |con: &mut Connection, limit: u64, now: u64| {
                let reply = check_both(con, keys, limit, now, context);
                assert_eq!(reply[0], 0, "{context}: denied at {now}, limit {limit}");
                reply
            };
            let window = WINDOW as i64;
            let wait_for = |entry: u64, now: u64| (entry + WINDOW - now) as i64;
            let full = |now: u64| {
                vec![
                    0,
                    entries as i64,
                    0,
                    wait_for(oldest, now),
                    wait_for(newest, now),
                    window,
                ]
            };
            assert_eq!(deny(&mut con, entries, now), full(now));
            assert_eq!(deny(&mut con, entries, now + 1), full(now + 1));
            // An entry after the newest, forced in by the module in both.
            for key in [keys.0, keys.1] {
                let mut cmd = redis::cmd("SWL.CHECK");
                cmd.arg(key).arg(WINDOW).arg(1).arg(now + 2).arg("FORCE");
                let _: Vec<i64> = cmd.query(&mut con).expect("FORCE");
            }
            let second = start + (filled - entries + 1) * spacing;
            let forced = vec![
                0,
                entries as i64,
                0,
                wait_for(second, now + 3),
                wait_for(now + 2, now + 3),
                window,
            ];
            assert_eq!(deny(&mut con, entries, now + 3), forced);
            let forced = vec![
                0,
                entries as i64,
                0,
                wait_for(second, now + 4),
                wait_for(now + 2, now + 4),
                window,
            ];
            assert_eq!(deny(&mut con, entries, now + 4), forced);
            // Refunded: full again.
            for key in [keys.0, keys.1] {
                let _: Value = redis::cmd("SWL.REFUND")
                    .arg(key)
                    .arg(WINDOW)
                    .arg(entries)
                    .arg(now + 2)
                    .query(&mut con)
                    .expect("SWL.REFUND");
            }
            assert_eq!(deny(&mut con, entries, now + 5), full(now + 5));
            assert_eq!(deny(&mut con, entries, now + 6), full(now + 6));
            // A limit one higher admits one more, then denies.
            let reply = check_both(&mut con, keys, entries + 1, now + 7, context);
            assert_eq!(reply[0], 1, "{context}: a higher limit");
            deny(&mut con, entries + 1, now + 8);
            deny(&mut con, entries + 1, now + 9);
            // The floor a millisecond below the oldest entry, then at it:
            // it leaves, and a call is admitted.
            deny(&mut con, entries + 1, oldest + WINDOW - 1);
            let reply = check_both(&mut con, keys, entries + 1, oldest + WINDOW, context);
            assert_eq!(reply[0], 1, "{context}: the oldest left");
            if encoding != Encoding::Compact || entries < 1000 {
                continue;
            }
            // Bytes changed in both keys between denials, the others as
            // they were: the head rank one on (one entry fewer: admitted),
            // then the head block's first time a millisecond off (every
            // time in it with it, and the wait).
            let now = oldest + WINDOW + 1;
            let live = entries + 1 - reply[2] as u64;
            deny(&mut con, live, now);
            deny(&mut con, live, now + 1);
            let rank = header_field(&packed_bytes(&mut con, keys.1), 8);
            set_range_in_both(&mut con, keys, 8, &(rank + 1).to_le_bytes());
            let reply = check_both(&mut con, keys, live, now + 2, context);
            assert_eq!(reply[0], 1, "{context}: the head rank moved on");
            deny(&mut con, live, now + 3);
            let before = deny(&mut con, live, now + 4);
            let bytes = packed_bytes(&mut con, keys.1);
            let at = 24 + header_field(&bytes, 12) as usize * 256;
            let (first, shift) = match bytes[at] {
                255 => (254, -1),
                byte => (byte + 1, 1),
            };
            set_range_in_both(&mut con, keys, at, &[first]);
            let reply = deny(&mut con, live, now + 5);
            assert_eq!(reply[3], before[3] + shift - 1, "{context}: the wait");
        }
    });
}

/// `bytes` written at offset `at` of both keys.
fn set_range_in_both(con: &mut Connection, keys: (&str, &str), at: usize, bytes: &[u8]) {
    for key in [keys.0, keys.1] {
        let _: i64 = redis::cmd("SETRANGE")
            .arg(key)
            .arg(at)
            .arg(bytes)
            .query(con)
            .expect("SETRANGE");
    }
}

/// A denial right after an admit that opened a new tail block (on a
/// sorted set, after every 50th admit): the newest entry, the one the
/// admit added, is read as the module reads it.
#[test]
fn a_denial_after_a_block_opens_reads_the_newest_entry_alike() {
    for_each_encoding(|encoding| {
        let server = server_in(encoding);
        let mut con = server.connect();
        let context = encoding.name();
        let keys = ("m", "l");
        let entries = 300;
        let spacing = WINDOW / entries;
        let start = server_ms(&mut con) - 2 * WINDOW;
        let tail_of = |con: &mut Connection| match log_of(con, keys.1).1 {
            Some(bytes) => header_field(&bytes, 16),
            None => 0,
        };
        let mut tail = 0;
        let mut denials = 0;
        for i in 0..3 * entries {
            let now = start + i * spacing;
            let reply = check_both(&mut con, keys, 2 * entries, now, context);
            assert_eq!(reply[0], 1, "{context}: admitted at {now}");
            let opened = match encoding {
                Encoding::Compact => tail_of(&mut con) != tail,
                _ => i % 50 == 49,
            };
            tail = tail_of(&mut con);
            if opened && i > 0 {
                // The count after the admit is the limit: a denial at the
                // same time waits for the oldest and resets a window on.
                let live = 2 * entries - reply[2] as u64;
                let denied = check_both(&mut con, keys, live, now, context);
                assert_eq!(denied[0], 0, "{context}: denied at {now}");
                assert_eq!(denied[4], WINDOW as i64, "{context}: the reset at {now}");
                denials += 1;
            }
        }
        assert!(
            denials >= 5,
            "{context}: {denials} denials after an opening"
        );
    });
}

/// Traffic that falls (a hundred calls a window, then eight): the log's
/// blocks are copied down into a value with a free block after its one
/// block, whose entries are then mostly dead, and the module opens that
/// block and codes the log anew when the call ends. Each call is answered,
/// and the log and expiry left, as the module does.
#[test]
fn a_log_whose_traffic_falls_is_coded_anew_as_the_module_does() {
    for_each_encoding(|encoding| {
        let server = server_in(encoding);
        let mut con = server.connect();
        let context = encoding.name();
        let mut now = server_ms(&mut con) - 2 * WINDOW;
        for (calls, spacing) in [(300, WINDOW / 100), (80, WINDOW / 8)] {
            for _ in 0..calls {
                now += spacing;
                let reply = check_both(&mut con, ("m", "l"), 1000, now, context);
                assert_eq!(reply[0], 1, "{context}: admitted at {now}");
            }
        }
    });
}

/// Rates that change from phase to phase (2 to 400 calls a window, a
/// seeded sequence): one window or two, limits that admit all or deny
/// some, every third call 30 ms behind in some phases. Logs grow, are
/// copied down when traffic falls, open blocks and are coded anew: each
/// call is answered, and the log and expiry left, as the module does.
#[test]
fn rates_that_change_are_answered_alike_by_both() {
    for_each_encoding(|encoding| {
        let server = server_in(encoding);
        let mut con = server.connect();
        let context = encoding.name();
        let mut rng = support::Rng(0x5eed_2026_1205);
        let mut now = server_ms(&mut con) - 2 * WINDOW;
        for _ in 0..16 {
            let per_window = [2, 5, 8, 10, 20, 40, 60, 100, 150, 250, 400][rng.below(11) as usize];
            let calls = 20 + rng.below(130);
            let limit = [
                1_000_000,
                1_000_000,
                2 * per_window,
                per_window,
                per_window + 1,
            ][rng.below(5) as usize];
            let behind = rng.below(10) < 3;
            let second = (rng.below(10) < 3).then_some((60_000, per_window / 30 + 2));
            for i in 0..calls {
                now += WINDOW / per_window;
                let at = if behind && i % 3 == 2 { now - 30 } else { now };
                check_both_windows(&mut con, ("m", "l"), limit, at, second, context);
            }
        }
    });
}

/// A key whose head block the library last found past block 0 (its next
/// call reads the header alone first), replaced by another writer with a
/// log of one block: the library's next call, which trims and appends
/// within block 0, reads and writes it as the module does.
#[test]
fn a_log_replaced_by_one_of_one_block_is_read_as_it_now_is() {
    for_each_encoding(|encoding| {
        let server = server_in(encoding);
        let mut con = server.connect();
        let context = encoding.name();
        let keys = ("m", "l");
        let entries = 1000;
        let spacing = WINDOW / entries;
        let start = server_ms(&mut con) - 2 * WINDOW;
        // Calls one spacing apart, trimming one and adding one, until one
        // has found the head past block 0.
        let mut i = 0;
        let mut past_block_0 = false;
        while i <= entries || (encoding == Encoding::Compact && !past_block_0) {
            assert!(i < 4 * entries, "{context}: the head never left block 0");
            past_block_0 =
                encoding == Encoding::Compact && i > 0 && head_block(&mut con, keys.1) != 0;
            check_both(&mut con, keys, 2 * entries, start + i * spacing, context);
            i += 1;
        }
        // Both keys made anew by the module: ten entries a tenth of the
        // window apart.
        let from = start + i * spacing;
        for key in [keys.0, keys.1] {
            let _: i64 = redis::cmd("DEL").arg(key).query(&mut con).unwrap();
            for j in 0..10 {
                module_check(&mut con, key, 20, from + j * (WINDOW / 10));
            }
        }
        if encoding == Encoding::Compact {
            let bytes = packed_bytes(&mut con, keys.1);
            assert_eq!(&bytes[12..20], &[0; 8], "{context}: one block");
        }
        // The oldest leaves, and an entry is added.
        let reply = check_both(&mut con, keys, 20, from + WINDOW, context);
        let window = WINDOW as i64;
        assert_eq!(reply, vec![1, 20, 10, -1, window, window], "{context}");
        let (times, _) = log_of(&mut con, keys.1);
        let expected: Vec<f64> = (1..=10)
            .map(|j| (from + j * (WINDOW / 10)) as f64)
            .collect();
        assert_eq!(times, expected, "{context}");
    });
}

/// The bytes of the packed log in `key`.
fn packed_bytes(con: &mut Connection, key: &str) -> Vec<u8> {
    log_of(con, key).1.expect("a packed log")
}

/// The header's 4-byte field at `at` (8: head rank, 12: head block, 16:
/// tail block) of a packed log's `bytes`.
fn header_field(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap())
}

/// The head block of the packed log in `key`.
fn head_block(con: &mut Connection, key: &str) -> usize {
    header_field(&packed_bytes(con, key), 12) as usize
}

fn module_check(con: &mut Connection, key: &str, limit: u64, now: u64) -> Vec<i64> {
    redis::cmd("SWL.CHECK")
        .arg(key)
        .arg(WINDOW)
        .arg(limit)
        .arg(now)
        .query(con)
        .expect("SWL.CHECK")
}
