//! A compact log whose bytes another writer damaged is read only in part
//! by each call, so the damage may show only when a call needs every slot
//! (to write the value anew). Such a call must never admit without
//! recording: it replies WRONGTYPE and leaves the value as it was, in the
//! module and in the function library alike.

mod support;

use redis::Connection;
use support::{compact_slots, error_text, load_library, swl_command, Encoding, Rng, Server};

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

/// A server with the module and the library, both creating compact logs.
fn server() -> Server {
    let server = Server::with(Encoding::Compact.config());
    load_library(&server, Encoding::Compact);
    server
}

/// The slots from the head on that hold `time`, read off the bytes.
fn slots_at(bytes: &[u8], time: u64) -> usize {
    let (base, slots) = compact_slots(bytes);
    slots
        .into_iter()
        .filter(|&stored| stored != 0 && base.checked_add(stored - 1) == Some(time))
        .count()
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

/// Random logs, one to three bytes of their slots or header damaged, then
/// random checks and refunds: a call either replies or is refused with
/// the value untouched, and after any admitted reply the log holds `cost`
/// more entries at `now` than before.
#[test]
fn after_any_admitted_reply_the_cost_was_recorded() {
    let server = server();
    let mut con = server.connect();
    let mut rng = Rng(0xda4a_9edb_17e5_0001);
    let mut seen = [0usize; 3];
    for round in 0..300 {
        let via = VIAS[round % 2];
        let key = "f";
        let _: () = redis::cmd("DEL").arg(key).query(&mut con).unwrap();
        let mut now = T;
        for _ in 0..1 + rng.below(40) {
            now += rng.below(50);
            let cost = (1 + rng.below(3)).to_string();
            call(
                &mut con,
                via,
                "check",
                key,
                &strings(&["100000", "1000", &now.to_string(), "COST", &cost]),
            )
            .unwrap();
        }
        let mut value = get(&mut con, key);
        for _ in 0..1 + rng.below(3) {
            let at = if rng.below(4) == 0 {
                rng.below(value.len() as u64)
            } else {
                24 + rng.below(value.len() as u64 - 24)
            } as usize;
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
            let mut args = strings(&[
                &(1000 + rng.below(200_000)).to_string(),
                &rng.below(300).to_string(),
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
                    assert_eq!(
                        slots_at(&after, now),
                        slots_at(&before, now) + cost as usize,
                        "{context}: admitted without recording"
                    );
                    seen[1] += 1;
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
