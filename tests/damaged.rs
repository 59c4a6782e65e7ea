//! A compact log whose bytes another writer damaged is read only in part
//! by each call, so the damage may show only when a call needs every slot
//! (to write the value anew). Such a call must never admit without
//! recording: it replies WRONGTYPE and leaves the value as it was, in the
//! module and in the function library alike.

mod support;

use redis::{Connection, RedisError, Value};
use support::{
    compact_slots, decode_packed, error_text, load_library, swl_command, Encoding, Rng, Server,
};

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
const T: u64 = 1_800_000_000_000;
const HOUR: &str = "3600000";

#[derive(Debug, Clone, Copy)]
enum Via {
    Module,
    Library,
}

const VIAS: [Via; 2] = [Via::Module, Via::Library];

fn call(
    con: &mut Connection,
    via: Via,
    name: &str,
    key: &str,
    args: &[String],
) -> Result<Vec<i64>, String> {
    swl_command(matches!(via, Via::Library), name, key)
        .arg(args)
        .query(con)
        .map_err(|e| error_text(&e))
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

fn get(con: &mut Connection, key: &str) -> Vec<u8> {
    redis::cmd("GET").arg(key).query(con).expect("GET")
}

/// A server with the module and the library, both creating compact logs
/// in `encoding`'s format version.
fn server_in(encoding: Encoding) -> Server {
    let server = Server::with(encoding.config());
    load_library(&server, encoding);
    server
}

/// Format version 1, whose slots the tests below damage one by one.
fn server() -> Server {
    server_in(Encoding::Compact1)
}

/// The slots from the head on that hold `time`, read off the bytes.
fn slots_at(bytes: &[u8], time: u64) -> usize {
    let (base, slots) = compact_slots(bytes);
    slots
        .into_iter()
        .filter(|&stored| stored != 0 && base.checked_add(stored - 1) == Some(time))
        .count()
}

/// Whether the module reads `bytes` as a log, every block checked
/// (SWL.ENTRIES replies rather than refusing it).
fn reads_whole(con: &mut Connection, bytes: &[u8]) -> bool {
    let _: () = redis::cmd("SET")
        .arg("whole?")
        .arg(bytes)
        .query(con)
        .unwrap();
    let entries: Result<Value, RedisError> = redis::cmd("SWL.ENTRIES").arg("whole?").query(con);
    entries.is_ok()
}

/// The live entries at `time`, read off the bytes of either format
/// version; None where damaged bytes do not decode.
fn entries_at(bytes: &[u8], time: u64) -> Option<usize> {
    match bytes.get(4) {
        Some(2) => {
            let bytes = bytes.to_vec();
            let times = std::panic::catch_unwind(|| decode_packed(&bytes)).ok()?;
            Some(times.iter().filter(|&&t| t == time as f64).count())
        }
        _ => Some(slots_at(bytes, time)),
    }
}

/// One entry at T (based a minute before it, so stored as 60,001), then
/// its last free slot overwritten with T + 6: the value parses (the log's
/// ends are in order) until a check needs every slot.
fn damaged_log(con: &mut Connection, via: Via) {
    let _: () = redis::cmd("DEL").arg("y").query(con).unwrap();
    call(
        con,
        via,
        "check",
        "y",
        &strings(&[HOUR, "10", &T.to_string()]),
    )
    .unwrap();
    let length: i64 = redis::cmd("SETRANGE")
        .arg("y")
        .arg(56)
        .arg(&60_007u32.to_le_bytes()[..])
        .query(con)
        .unwrap();
    assert_eq!(length, 60, "the last free slot is at 56");
}

#[test]
fn a_damaged_free_slot_is_refused_once_a_check_needs_every_slot() {
    let server = server();
    let mut con = server.connect();
    for via in VIAS {
        damaged_log(&mut con, via);
        let args = strings(&[HOUR, "10", &(T + 100).to_string()]);
        // Seven free slots take seven entries in place; the eighth check
        // finds the slots full (the damaged one read as the newest entry)
        // and copies them, unread, into a larger value: it records.
        for k in 1..=8 {
            // Once the free slots are full, the damaged one is the newest
            // entry the log's ends show (T + 6); the reset still counts
            // the entry each check records at T + 100.
            let reset = 3_600_000;
            let before = slots_at(&get(&mut con, "y"), T + 100);
            assert_eq!(
                call(&mut con, via, "check", "y", &args),
                Ok(vec![
                    1,
                    10,
                    if k == 8 { 0 } else { 9 - k },
                    -1,
                    reset,
                    3_600_000
                ]),
                "{via:?} check {k}"
            );
            assert_eq!(slots_at(&get(&mut con, "y"), T + 100), before + 1);
        }
        // A time before the base makes the value anew from its times,
        // which reads every slot: refused, the value as it was.
        let damaged = get(&mut con, "y");
        let behind = strings(&[HOUR, "100", &(T - 100_000).to_string()]);
        for k in 9..=20 {
            assert_eq!(
                call(&mut con, via, "check", "y", &behind),
                Err(WRONGTYPE.to_string()),
                "{via:?} check {k}"
            );
            assert_eq!(get(&mut con, "y"), damaged, "{via:?} check {k}");
        }
    }
    let info: String = redis::cmd("INFO").arg("swl").query(&mut con).unwrap();
    // The module's: the first entry and eight checks.
    assert!(info.contains("swl_admitted:9\r\n"), "{info}");
}

#[test]
fn a_time_before_the_base_of_a_damaged_log_is_refused() {
    let server = server();
    let mut con = server.connect();
    for via in VIAS {
        damaged_log(&mut con, via);
        let damaged = get(&mut con, "y");
        for penalize in [false, true] {
            // Before the base, a minute before T.
            let mut args = strings(&[HOUR, "10", &(T - 60_001).to_string()]);
            if penalize {
                args.push("PENALIZE".to_string());
            }
            assert_eq!(
                call(&mut con, via, "check", "y", &args),
                Err(WRONGTYPE.to_string()),
                "{via:?} {args:?}"
            );
            assert_eq!(get(&mut con, "y"), damaged, "{via:?}");
        }
    }
}

/// Random logs (some of several blocks), one to three bytes of their
/// slots, block headers or header damaged, then
/// random checks and refunds: a call either replies or is refused with
/// the value untouched, and after any admitted reply the log holds `cost`
/// more entries at `now` than before.
#[test]
fn after_any_admitted_reply_the_cost_was_recorded() {
    for encoding in [Encoding::Compact1, Encoding::Compact] {
        eprintln!("-- encoding {}", encoding.name());
        admitted_replies_recorded(encoding);
    }
}

fn admitted_replies_recorded(encoding: Encoding) {
    let server = server_in(encoding);
    let mut con = server.connect();
    let mut rng = Rng(0xda4a_9edb_17e5_0001);
    let mut seen = [0usize; 3];
    for round in 0..300 {
        let via = VIAS[round % 2];
        let key = "f";
        let _: () = redis::cmd("DEL").arg(key).query(&mut con).unwrap();
        let mut now = T;
        // One round in three a log of several blocks (in format version 2),
        // its calls sent at once.
        let calls = if round % 3 == 2 {
            100 + rng.below(1400)
        } else {
            1 + rng.below(40)
        };
        let mut pipe = redis::pipe();
        for _ in 0..calls {
            now += rng.below(50);
            let cost = (1 + rng.below(3)).to_string();
            pipe.add_command(swl_command(matches!(via, Via::Library), "check", key))
                .arg(strings(&[
                    "100000",
                    "10000",
                    &now.to_string(),
                    "COST",
                    &cost,
                ]));
        }
        let _: Vec<Vec<i64>> = pipe.query(&mut con).unwrap();
        let mut value = get(&mut con, key);
        for _ in 0..1 + rng.below(3) {
            let at = match rng.below(4) {
                0 => rng.below(value.len() as u64) as usize,
                // In format version 2, a block's header (its first time, `l`,
                // rank and counts): the tail block's or any other's.
                1 if encoding == Encoding::Compact => {
                    let tail = u32::from_le_bytes(value[16..20].try_into().unwrap()) as u64;
                    let block = if rng.below(2) == 0 {
                        tail
                    } else {
                        rng.below(tail + 1)
                    } as usize;
                    (24 + block * 256 + rng.below(16) as usize).min(value.len() - 1)
                }
                _ => 24 + rng.below(value.len() as u64 - 24) as usize,
            };
            value[at] = rng.below(256) as u8;
        }
        let _: () = redis::cmd("SET")
            .arg(key)
            .arg(&value)
            .query(&mut con)
            .unwrap();
        for step in 0..4 {
            now = match rng.below(6) {
                0 => now.saturating_sub(100_000 + rng.below(1000)),
                _ => now + rng.below(200),
            };
            let most = if rng.below(4) == 0 { 200 } else { 3 };
            let cost = 1 + rng.below(most);
            // Limits up to a few blocks' entries, so that a denial's wait
            // is read from any block.
            let limit = if rng.below(3) == 0 {
                rng.below(3000)
            } else {
                rng.below(300)
            };
            let mut args = strings(&[
                &(1000 + rng.below(200_000)).to_string(),
                &limit.to_string(),
                &now.to_string(),
                "COST",
                &cost.to_string(),
            ]);
            let refund = rng.below(4) == 0;
            if !refund && rng.below(4) == 0 {
                args.push("PENALIZE".to_string());
            }
            // What the call does, not an expiry an earlier call set:
            // refunding the entries a damaged log shows as newest can
            // leave it with none, which expires it at once (and it may be
            // gone by now: the round ends there).
            let _: i64 = redis::cmd("PERSIST").arg(key).query(&mut con).unwrap();
            let exists: i64 = redis::cmd("EXISTS").arg(key).query(&mut con).unwrap();
            if exists == 0 {
                break;
            }
            let before = get(&mut con, key);
            let name = if refund { "refund" } else { "check" };
            let context = format!("round {round} step {step} {via:?} {name} {args:?}");
            match call(&mut con, via, name, key, &args) {
                Err(error) => {
                    assert_eq!(error, WRONGTYPE, "{context}");
                    assert_eq!(
                        get(&mut con, key),
                        before,
                        "{context}: refused, and changed"
                    );
                    seen[0] += 1;
                    break;
                }
                Ok(reply) if reply[0] == 1 && !refund => {
                    let after: Vec<u8> = get(&mut con, key);
                    // Format version 2 writes an entry into its block
                    // without reading the whole block: where another
                    // writer damaged that block, SWL.ENTRIES refuses the
                    // log before and after, and the entry is counted by
                    // the block's own count only. Wherever the log reads
                    // whole, before and after, the cost was recorded.
                    let whole = |con: &mut Connection, bytes: &[u8]| {
                        encoding == Encoding::Compact1 || reads_whole(con, bytes)
                    };
                    if whole(&mut con, &before) && whole(&mut con, &after) {
                        assert_eq!(
                            entries_at(&after, now),
                            entries_at(&before, now).map(|n| n + cost as usize),
                            "{context}: admitted without recording"
                        );
                        seen[1] += 1;
                    }
                }
                Ok(_) => seen[2] += 1,
            }
            let exists: i64 = redis::cmd("EXISTS").arg(key).query(&mut con).unwrap();
            if exists == 0 {
                break;
            }
        }
    }
    assert!(
        seen.iter().all(|&n| n > 30),
        "refused, admitted, other: {seen:?}"
    );
}

/// A packed log (format version 2) whose second block another writer
/// damaged: calls that read only the head and the tail block go on; a time
/// that falls in the damaged block codes the blocks from it anew, which
/// reads it: refused, the value as it was, in the module and the library.
#[test]
fn a_damaged_block_is_refused_once_a_call_codes_it_anew() {
    let server = server_in(Encoding::Compact);
    let mut con = server.connect();
    for via in VIAS {
        let _: () = redis::cmd("DEL").arg("p").query(&mut con).unwrap();
        for i in 0..600u64 {
            let now = (T + i * 1000).to_string();
            call(&mut con, via, "check", "p", &strings(&[HOUR, "1000", &now])).unwrap();
        }
        let value = get(&mut con, "p");
        assert_eq!(value[4], 2);
        assert!(value[16] >= 2, "three blocks or more");
        // The second block's entry count, zero.
        let _: i64 = redis::cmd("SETRANGE")
            .arg("p")
            .arg(24 + 256 + 12)
            .arg(&[0u8, 0][..])
            .query(&mut con)
            .unwrap();
        let now = T + 600_000;
        let before = entries_at(&get(&mut con, "p"), now);
        let admitted = call(
            &mut con,
            via,
            "check",
            "p",
            &strings(&[HOUR, "1000", &now.to_string()]),
        );
        assert_eq!(admitted.map(|r| r[0]), Ok(1), "{via:?}");
        assert_eq!(entries_at(&get(&mut con, "p"), now), before.map(|n| n + 1));
        let damaged = get(&mut con, "p");
        // A client 500 s behind: its time falls in the second block.
        let behind = (T + 250_500).to_string();
        for penalize in [false, true] {
            let mut args = strings(&[HOUR, "1000", &behind]);
            if penalize {
                args.push("PENALIZE".to_string());
            }
            assert_eq!(
                call(&mut con, via, "check", "p", &args),
                Err(WRONGTYPE.to_string()),
                "{via:?} {args:?}"
            );
            assert_eq!(get(&mut con, "p"), damaged, "{via:?}: untouched");
        }
    }
}
