//! A compact log whose bytes another writer damaged is read only in part
//! by each call, so the damage may show only when a call needs every slot
//! (to write the value anew). Such a call must never admit without
//! recording: it replies WRONGTYPE and leaves the value as it was, in the
//! module and in the function library alike.

mod support;

use redis::{Connection, RedisError, Value};
use support::{
    compact_slots, decode_packed, error_text, server_in, swl_command, Encoding, Rng, Server,
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

/// The little-endian 4-byte field at `at` of a value (8: head rank, 12:
/// head block, 16: tail block; in a block, 8: its rank).
fn word(value: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(value[at..at + 4].try_into().unwrap())
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

fn get(con: &mut Connection, key: &str) -> Vec<u8> {
    redis::cmd("GET").arg(key).query(con).expect("GET")
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

/// A format version 2 log of three blocks whose middle block another
/// writer gave a first time past every entry: an entry just behind the
/// newest belongs, by the search of blocks' first times, in the head
/// block after its last entry, where it cannot go in place, and recoding
/// that block finds the log out of order. Both refuse it and leave the
/// value as it was. (Only format version 2 has blocks with first times;
/// the function library's usual check takes a straight path there, which
/// must search as the general one does.)
#[test]
fn an_entry_behind_the_newest_that_a_damaged_block_misplaces_is_refused() {
    let server = server_in(Encoding::Compact);
    let mut con = server.connect();
    let newest = T + 399_000;
    for behind in [1, 30] {
        for via in VIAS {
            let _: () = redis::cmd("DEL").arg("b").query(&mut con).expect("DEL");
            for i in 0..400u64 {
                let args = strings(&[HOUR, "1000", &(T + i * 1000).to_string()]);
                call(&mut con, Via::Module, "check", "b", &args).expect("a check");
            }
            let mut value = get(&mut con, "b");
            let (head_block, tail) = (word(&value, 12) as usize, word(&value, 16) as usize);
            assert!(tail >= head_block + 2, "blocks {head_block} to {tail}");
            // The middle 16 bits of the next block's first time.
            let at = 24 + (head_block + 1) * 256 + 4;
            value[at..at + 2].copy_from_slice(&[0xff, 0xff]);
            let _: () = redis::cmd("SET")
                .arg("b")
                .arg(&value)
                .query(&mut con)
                .expect("SET");
            let args = strings(&[HOUR, "1000", &(newest - behind).to_string()]);
            assert_eq!(
                call(&mut con, via, "check", "b", &args),
                Err(WRONGTYPE.to_string()),
                "{via:?}, {behind} ms behind"
            );
            assert_eq!(get(&mut con, "b"), value, "{via:?}, {behind} ms behind");
        }
    }
}

/// A log of blocks whose middle blocks' first times another writer
/// changed: a second, narrower window finds the block its floor lies in
/// by a binary search of those first times, which a damaged one can send
/// elsewhere. The function library, which counts that window straight
/// through, probes the same blocks in the same order as the module and
/// so counts alike: the same replies (admitted, denied or WRONGTYPE) and
/// the same bytes after each call: on a log of many blocks and on one of
/// a few. (Only format version 2 has blocks with first times.)
#[test]
fn a_narrow_window_over_damaged_block_starts_is_counted_as_the_module_counts() {
    let server = server_in(Encoding::Compact);
    let mut con = server.connect();
    let mut rng = Rng(0x5eed_2026);
    // About 60 blocks, and about 8.
    for (entries, blocks_between) in [(15_000u64, 40..100), (1_000, 2..9)] {
        damaged_rounds(
            &mut con,
            &mut rng,
            entries,
            &|_| 36,
            "2500",
            &blocks_between,
            &[],
        );
    }
}

/// As the test above, on logs whose blocks span very different times:
/// entries 10 ms apart, then 300 ms apart, and the other way round. The
/// search between the head and tail blocks starts from where a window's
/// floor would lie were the blocks evenly spread, and here it is many
/// blocks off, above or below: its steps out from there, and the binary
/// search between them, probe damaged blocks as the module's do, on the
/// function library's straight path and on its general one alike.
#[test]
fn a_narrow_window_over_damaged_unevenly_spread_blocks_is_counted_as_the_module_counts() {
    let server = server_in(Encoding::Compact);
    let mut con = server.connect();
    let mut rng = Rng(0x5eed_2027);
    let dense_first = |i: u64| -> u64 {
        if i < 6_000 {
            10
        } else {
            300
        }
    };
    let sparse_first = |i: u64| -> u64 {
        if i < 6_000 {
            300
        } else {
            10
        }
    };
    // One window of cost 1, which the library answers on its straight
    // path, and cost 2, which takes its general one (p_block_through).
    for options in [&[][..], &["COST", "2"]] {
        for spacing in [&dense_first as &dyn Fn(u64) -> u64, &sparse_first] {
            damaged_rounds(
                &mut con,
                &mut rng,
                12_000,
                spacing,
                "8000",
                &(30..80),
                options,
            );
        }
    }
}

/// A second window's floor lies in one block between the head and tail
/// blocks for many calls, and the function library keeps that block's
/// times with the bytes they were read from. Another writer then changes
/// the block's rank field or a bit of its low fields or high bits, its
/// first time kept: the next calls count in the block as it now is, in the
/// module and the library alike, and the rank's change shows in the
/// narrow window's count (against an unchanged copy).
#[test]
fn a_second_windows_block_changed_after_its_times_were_kept_is_read_as_it_now_is() {
    let server = server_in(Encoding::Compact);
    let mut con = server.connect();
    let con = &mut con;
    let (entries, spacing) = (12_000u64, 300u64);
    let minute = 60_000u64;
    for name in ["rank + 1", "rank - 1", "a low field bit", "a high bit"] {
        let _: () = redis::cmd("DEL")
            .arg(&["m", "l", "u"])
            .query(con)
            .expect("DEL");
        let mut fill = redis::pipe();
        for i in 0..entries {
            fill.cmd("SWL.CHECK")
                .arg("m")
                .arg(HOUR)
                .arg(2 * entries)
                .arg(T + i * spacing)
                .ignore();
        }
        let () = fill.query(con).expect("the calls that fill");
        for key in ["l", "u"] {
            let _: bool = redis::cmd("COPY")
                .arg("m")
                .arg(key)
                .query(con)
                .expect("COPY");
        }
        let mut now = T + entries * spacing;
        let args = |now: u64| {
            strings(&[
                HOUR,
                &(2 * entries).to_string(),
                &now.to_string(),
                "WINDOW",
                &minute.to_string(),
                "5000",
            ])
        };
        // Calls that keep the floor's block, then the change, then calls
        // that read it.
        for i in 0..12 {
            if i == 6 {
                let value = get(con, "m");
                let (head_block, tail) = (word(&value, 12) as usize, word(&value, 16) as usize);
                let first = |block: usize| {
                    let at = 24 + block * 256;
                    let mut bytes = [0u8; 8];
                    bytes[..7].copy_from_slice(&value[at..at + 7]);
                    u64::from_le_bytes(bytes)
                };
                let floor = now - minute;
                let block = (head_block + 1..tail)
                    .rev()
                    .find(|&block| first(block) <= floor)
                    .expect("a block between");
                assert!(
                    first(block + 1) > floor,
                    "{name}: block {block} of {head_block} to {tail}"
                );
                let (at, bytes) = block_changed(name, &value, 24 + block * 256);
                for key in ["m", "l"] {
                    let _: i64 = redis::cmd("SETRANGE")
                        .arg(key)
                        .arg(at)
                        .arg(&bytes)
                        .query(con)
                        .expect("SETRANGE");
                }
            }
            let args = args(now);
            let module = call(con, Via::Module, "check", "m", &args);
            let library = call(con, Via::Library, "check", "l", &args);
            assert_eq!(library, module, "{name}, call {i}: {args:?}");
            assert_eq!(get(con, "l"), get(con, "m"), "{name}, call {i}");
            let unchanged = call(con, Via::Module, "check", "u", &args);
            if i < 6 {
                assert_eq!(module, unchanged, "{name}, call {i}");
            } else if name.starts_with("rank") && i == 6 {
                // One entry more or fewer through the floor: the narrow
                // window's count, which binds, one the other way.
                let step = if name == "rank + 1" { 1 } else { -1 };
                let (module, unchanged) = (module.expect("a reply"), unchanged.expect("a reply"));
                assert_eq!(
                    module[2],
                    unchanged[2] + step,
                    "{name}: {module:?} {unchanged:?}"
                );
            }
            now += spacing;
        }
    }
}

/// The change `name` to the block at offset `at` of `value`: where to
/// write, and what. Its rank up one or down one, a bit of its first low
/// fields, a bit of its last byte of high bits.
fn block_changed(name: &str, value: &[u8], at: usize) -> (usize, Vec<u8>) {
    let rank = word(value, at + 8);
    match name {
        "rank + 1" => (at + 8, rank.wrapping_add(1).to_le_bytes().to_vec()),
        "rank - 1" => (at + 8, rank.wrapping_sub(1).to_le_bytes().to_vec()),
        "a low field bit" => (at + 17, vec![value[at + 17] ^ 0x10]),
        _ => (at + 255, vec![value[at + 255] ^ 0x04]),
    }
}

/// Six rounds of damaged_round, whose damage changed more than 50 replies
/// and which admitted more than 100 calls. `options` follow each call's
/// windows (COST 2 takes the function library's general path, where one
/// window of cost 1 takes its straight one).
fn damaged_rounds(
    con: &mut redis::Connection,
    rng: &mut Rng,
    entries: u64,
    spacing: &dyn Fn(u64) -> u64,
    narrow_limit: &str,
    blocks_between: &std::ops::Range<u64>,
    options: &[&str],
) {
    let (mut differed, mut admitted) = (0, 0);
    for round in 0..6u64 {
        let (replies_differed, replies_admitted) = damaged_round(
            con,
            rng,
            entries,
            spacing,
            narrow_limit,
            round,
            blocks_between,
            options,
        );
        differed += replies_differed;
        admitted += replies_admitted;
    }
    // The damage mattered, and calls were admitted (recorded, on the
    // library's straight path where `options` leave it one).
    assert!(
        differed > 50 && admitted > 100,
        "{entries} entries: {differed} differed, {admitted} admitted"
    );
}

/// One round of the tests above on a log of `entries` entries, the i-th
/// `spacing(i)` ms after the one before, with `blocks_between` its blocks
/// between the head and tail blocks, the narrow window's limit
/// `narrow_limit`, `options` after the windows: how many replies the
/// damage changed, and how many admitted.
#[allow(clippy::too_many_arguments)]
fn damaged_round(
    con: &mut redis::Connection,
    rng: &mut Rng,
    entries: u64,
    spacing: &dyn Fn(u64) -> u64,
    narrow_limit: &str,
    round: u64,
    blocks_between: &std::ops::Range<u64>,
    options: &[&str],
) -> (u32, u32) {
    let (mut differed, mut admitted) = (0, 0);
    let _: () = redis::cmd("DEL").arg(&["m", "l"]).query(con).expect("DEL");
    let mut now = T;
    for i in 0..entries {
        now += spacing(i);
        let args = strings(&[HOUR, "100000000", &now.to_string()]);
        call(con, Via::Module, "check", "m", &args).expect("a check");
    }
    let span = now - T;
    let mut value = get(con, "m");
    let undamaged = value.clone();
    let (head_block, tail) = (word(&value, 12) as u64, word(&value, 16) as u64);
    assert!(
        blocks_between.contains(&(tail - head_block - 1)),
        "blocks {head_block} to {tail}"
    );
    // Some middle blocks start anywhere in the log's span.
    for _ in 0..4 + 4 * round {
        let block = head_block + 1 + rng.below(tail - head_block - 1);
        let first = T + rng.below(span);
        let at = 24 + 256 * block as usize;
        value[at..at + 7].copy_from_slice(&first.to_le_bytes()[..7]);
    }
    // In odd rounds, a bit of as many middle blocks' fields or high bits,
    // which a count in the block reads (and which may leave it out of
    // order, or its high bits not its entries).
    if round % 2 == 1 {
        for _ in 0..4 + 4 * round {
            let block = head_block + 1 + rng.below(tail - head_block - 1);
            let at = 24 + 256 * block as usize + 16 + rng.below(240) as usize;
            value[at] ^= 1 << rng.below(8);
        }
    }
    for key in ["m", "l"] {
        let _: () = redis::cmd("SET")
            .arg(key)
            .arg(&value)
            .query(con)
            .expect("SET");
    }
    let _: () = redis::cmd("SET")
        .arg("u")
        .arg(&undamaged)
        .query(con)
        .expect("SET");
    for i in 0..100u64 {
        now += if i % 4 == 3 { 0 } else { spacing(entries) };
        // A ninth, two and five ninths of the log's span.
        let narrow = span / 9 * [1, 2, 5][(i % 3) as usize];
        let mut args = strings(&[
            HOUR,
            "100000000",
            &now.to_string(),
            "WINDOW",
            &narrow.to_string(),
            narrow_limit,
        ]);
        args.extend(strings(options));
        let module = call(con, Via::Module, "check", "m", &args);
        let library = call(con, Via::Library, "check", "l", &args);
        assert_eq!(library, module, "round {round}, call {i}: {args:?}");
        assert_eq!(get(con, "l"), get(con, "m"), "round {round}, call {i}");
        let before = call(con, Via::Module, "check", "u", &args);
        if before != module {
            differed += 1;
        }
        if module.as_ref().is_ok_and(|reply| reply[0] == 1) {
            admitted += 1;
        }
    }
    (differed, admitted)
}

/// Random logs (some of several blocks), damaged by another writer: one
/// to three bytes of their slots, block headers or header, two blocks (in
/// format version 1, two runs of slots) swapped, a block's rank or the
/// head moved a little, a block's top (a slot) changed a little. Then
/// random checks and refunds, each through the module and the library on
/// the same bytes: both refuse it with WRONGTYPE and leave it as it was,
/// or both reply alike, leave the same bytes and set the same expiry; and
/// after any admitted reply the log holds `cost` more entries at `now`
/// than before.
#[test]
fn after_any_admitted_reply_the_cost_was_recorded() {
    for encoding in [Encoding::Compact1, Encoding::Compact] {
        eprintln!("-- encoding {}", encoding.name());
        admitted_replies_recorded(encoding);
    }
}

/// Damages `value` as another writer might, one of several ways.
fn damage(value: &mut [u8], encoding: Encoding, rng: &mut Rng) {
    let packed = encoding == Encoding::Compact;
    let tail = word(value, 16) as u64;
    // Whole blocks (format version 2) or runs of 16 slots (version 1).
    let (start, size) = if packed { (24, 256) } else { (24, 64) };
    let whole = (value.len() - start) / size;
    let nudge = |bytes: &mut [u8], rng: &mut Rng| {
        let delta = 1 + rng.below(3) as u32;
        let mut word = [0u8; 4];
        word[..bytes.len()].copy_from_slice(bytes);
        let was = u32::from_le_bytes(word);
        let now = if rng.below(2) == 0 {
            was.wrapping_add(delta)
        } else {
            was.wrapping_sub(delta)
        };
        let len = bytes.len();
        bytes.copy_from_slice(&now.to_le_bytes()[..len]);
    };
    match rng.below(7) {
        0 => {
            let at = rng.below(value.len() as u64) as usize;
            value[at] = rng.below(256) as u8;
        }
        // In format version 2, a block's header (its first time, `l`,
        // rank and counts): the tail block's or any other's.
        1 if packed => {
            let block = if rng.below(2) == 0 {
                tail
            } else {
                rng.below(tail + 1)
            } as usize;
            let at = (24 + block * 256 + rng.below(16) as usize).min(value.len() - 1);
            value[at] = rng.below(256) as u8;
        }
        2 if whole >= 2 => {
            let a = rng.below(whole as u64) as usize;
            let b = (a + 1 + rng.below(whole as u64 - 1) as usize) % whole;
            let (a, b) = (a.min(b), a.max(b));
            let (low, high) = value.split_at_mut(start + b * size);
            low[start + a * size..start + (a + 1) * size].swap_with_slice(&mut high[..size]);
        }
        3 if packed => {
            let block = rng.below(tail + 1) as usize;
            let at = 24 + block * 256 + 8;
            if at + 4 <= value.len() {
                nudge(&mut value[at..at + 4], rng);
            }
        }
        3 => nudge(&mut value[16..20], rng),
        4 if packed => {
            let block = rng.below(tail + 1) as usize;
            let at = 24 + block * 256 + 14;
            if at + 2 <= value.len() {
                nudge(&mut value[at..at + 2], rng);
            }
        }
        4 => {
            let slots = (value.len() - 24) / 4;
            let at = 24 + 4 * rng.below(slots as u64) as usize;
            nudge(&mut value[at..at + 4], rng);
        }
        _ => {
            let at = 24 + rng.below(value.len() as u64 - 24) as usize;
            value[at] = rng.below(256) as u8;
        }
    }
}

/// What one call did: its reply, the bytes it left (None for no key), and
/// its expiry from the call's clock where that clock is known (None for
/// none, or where the call spanned a millisecond).
type Outcome = (Result<Vec<i64>, String>, Option<Vec<u8>>, Option<i64>);

/// `name` with `args` through `via` on `key`, set to `value` first.
fn outcome(
    con: &mut Connection,
    via: Via,
    key: &str,
    value: &[u8],
    name: &str,
    args: &[String],
) -> Outcome {
    let _: () = redis::cmd("SET").arg(key).arg(value).query(con).unwrap();
    let ms = |con: &mut Connection| -> i64 {
        let (seconds, micros): (i64, i64) = redis::cmd("TIME").query(con).unwrap();
        seconds * 1000 + micros / 1000
    };
    // The call's clock is known where the clock reads the same millisecond
    // before and after it.
    let started = ms(con);
    let reply = call(con, via, name, key, args);
    let ended = ms(con);
    let expiry: i64 = redis::cmd("PEXPIRETIME").arg(key).query(con).unwrap();
    // A key set to expire at once counts as gone, whether or not the
    // millisecond it expires in has ended yet: the module's key lives to
    // the end of that millisecond, the library's may live one more.
    let ttl: i64 = redis::cmd("PTTL").arg(key).query(con).unwrap();
    let left: Option<Vec<u8>> = if (0..=1).contains(&ttl) {
        None
    } else {
        redis::cmd("GET").arg(key).query(con).unwrap()
    };
    // The library puts an expiry the clock has reached a millisecond later
    // (Redis would delete the key at once), where the module's key lives
    // to the end of that millisecond: read as the module's.
    let from_clock = (expiry >= 0 && started == ended).then(|| (expiry - started).max(1) - 1);
    (reply, left, from_clock.map(|e| e.max(0)))
}

fn admitted_replies_recorded(encoding: Encoding) {
    let server = server_in(encoding);
    let mut con = server.connect();
    // A seed under which the swaps and edits found the module and the
    // library apart before they read damaged blocks alike.
    let mut rng = Rng(1001);
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
            damage(&mut value, encoding, &mut rng);
        }
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
            let name = if refund { "refund" } else { "check" };
            let context = format!("round {round} step {step} {name} {args:?}");
            let module = outcome(&mut con, Via::Module, key, &value, name, &args);
            let library = outcome(&mut con, Via::Library, "fl", &value, name, &args);
            assert_eq!(module.0, library.0, "{context}: replies");
            if module.1 != library.1 {
                let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
                eprintln!("value {}", hex(&value));
                eprintln!("module {:?}", module.1.as_deref().map(hex));
                eprintln!("library {:?}", library.1.as_deref().map(hex));
            }
            assert!(module.1 == library.1, "{context}: bytes left differ");
            if let (Some(m), Some(l)) = (module.2, library.2) {
                assert_eq!(m, l, "{context}: expiries from the calls' clocks");
            }
            let (reply, left, _) = module;
            match reply {
                Err(error) => {
                    assert_eq!(error, WRONGTYPE, "{context}");
                    assert_eq!(
                        left.as_ref(),
                        Some(&value),
                        "{context}: refused, and changed"
                    );
                    seen[0] += 1;
                    break;
                }
                Ok(reply) if reply[0] == 1 && !refund => {
                    // Format version 2 writes an entry into its block
                    // without reading the whole block: where another
                    // writer damaged that block, SWL.ENTRIES refuses the
                    // log before and after, and the entry is counted by
                    // the block's own count only. Wherever the log reads
                    // whole, before and after, the cost was recorded.
                    let after = left.clone().unwrap_or_default();
                    let whole = |con: &mut Connection, bytes: &[u8]| {
                        encoding == Encoding::Compact1 || reads_whole(con, bytes)
                    };
                    if whole(&mut con, &value) && whole(&mut con, &after) {
                        assert_eq!(
                            entries_at(&after, now),
                            entries_at(&value, now).map(|n| n + cost as usize),
                            "{context}: admitted without recording"
                        );
                        seen[1] += 1;
                    }
                }
                Ok(_) => seen[2] += 1,
            }
            // Refunding the entries a damaged log shows as newest can
            // leave it with none, which expires it at once: the round ends.
            match left {
                Some(left) => value = left,
                None => break,
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
