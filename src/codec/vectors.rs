//! Codec vectors: every operation of both compact formats, as the bytes
//! before it, the operation and its arguments, the bytes after it and
//! whether it succeeded, written to tests/vectors/codec.json. The function
//! library's codecs must turn each `before` into the same `after`
//! (tests/codec_vectors.rs replays them one by one), which proves the Lua
//! mirror operation by operation rather than only end to end.
//!
//! This test fails unless the file holds exactly these vectors; with
//! SWL_WRITE_VECTORS=1 it writes the file instead.

use std::fmt::Write as _;
use std::marker::PhantomData;

use super::*;
use crate::window::tests::XorShift;

const FILE: &str = "tests/vectors/codec.json";

/// One operation, as the library's codec test function takes it.
#[derive(Clone, Copy)]
enum Op {
    Record(u64, u64),
    TrimThrough(i64),
    CapTo(u64),
    DropNewest(u64),
    Reclaim,
}

impl Op {
    fn name_and_args(self) -> (&'static str, Vec<String>) {
        match self {
            Op::Record(time, count) => ("record", vec![time.to_string(), count.to_string()]),
            Op::TrimThrough(floor) => ("trim_through", vec![floor.to_string()]),
            Op::CapTo(max) => ("cap_to", vec![max.to_string()]),
            Op::DropNewest(count) => ("drop_newest", vec![count.to_string()]),
            Op::Reclaim => ("reclaim", vec![]),
        }
    }

    /// The operation as the library's test function takes it in a call:
    /// its name and arguments joined by colons.
    fn token(self) -> String {
        let (name, args) = self.name_and_args();
        std::iter::once(name.to_string())
            .chain(args)
            .collect::<Vec<_>>()
            .join(":")
    }

    /// The operation on `value` (None: no log), as the module runs it: the
    /// value after it, or an error, the value then left as it was.
    fn apply<C: Codec>(self, value: Option<&[u8]>) -> Result<Option<Vec<u8>>, FormatError> {
        let mut bytes = value.map(<[u8]>::to_vec);
        let change = match (self, bytes.as_deref_mut()) {
            (Op::Record(time, count), value) => C::record(value, time, count)?,
            (_, None) => Change::Nothing,
            (Op::TrimThrough(floor), Some(value)) => C::trim_through(value, floor)?,
            (Op::CapTo(max), Some(value)) => C::cap_to(value, max)?,
            (Op::DropNewest(count), Some(value)) => C::drop_newest(value, count)?,
            (Op::Reclaim, Some(value)) => match C::parse(value)?.reclaimed() {
                Some(bytes) => Change::Replace(bytes),
                None => Change::Nothing,
            },
        };
        Ok(match change {
            Change::Replace(new) => Some(new),
            Change::Emptied => None,
            Change::Nothing | Change::InPlace(_) | Change::Ranges(_) => bytes,
        })
    }
}

fn hex(bytes: Option<&[u8]>) -> String {
    match bytes {
        None => "null".to_string(),
        Some(bytes) => {
            let mut text = String::with_capacity(2 + 2 * bytes.len());
            text.push('"');
            for b in bytes {
                let _ = write!(text, "{b:02x}");
            }
            text.push('"');
            text
        }
    }
}

/// A case: operations run in turn on one log, each a vector.
struct Case<C: Codec> {
    name: String,
    codec: PhantomData<C>,
    value: Option<Vec<u8>>,
    lines: Vec<String>,
}

impl<C: Codec> Case<C> {
    fn new(name: &str) -> Self {
        Case {
            name: name.to_string(),
            codec: PhantomData,
            value: None,
            lines: Vec::new(),
        }
    }

    /// Runs `ops` in turn on the log as one call does (trim, cap or drop,
    /// record, then reclaim), writing one vector: op `call`, its arguments
    /// the operations' tokens. An error leaves the value as it was.
    fn call(&mut self, ops: &[Op]) -> &mut Self {
        let before = self.value.clone();
        let mut value = before.clone();
        let mut ok = true;
        for &op in ops {
            match op.apply::<C>(value.as_deref()) {
                Ok(after) => value = after,
                Err(_) => {
                    (ok, value) = (false, before.clone());
                    break;
                }
            }
        }
        let tokens: Vec<String> = ops.iter().map(|op| format!("\"{}\"", op.token())).collect();
        self.lines.push(format!(
            "{{\"case\": \"{}\", \"format\": {}, \"op\": \"call\", \"args\": [{}], \"ok\": {ok}, \"before\": {}, \"after\": {}}}",
            self.name,
            C::VERSION,
            tokens.join(", "),
            hex(before.as_deref()),
            hex(value.as_deref()),
        ));
        self.value = value;
        self
    }

    /// Runs `op` without a vector: what brings the log to the state the
    /// next vectors start from.
    fn setup(&mut self, op: Op) -> &mut Self {
        self.value = op.apply::<C>(self.value.as_deref()).unwrap();
        self
    }

    /// Runs `op` as a vector where `kept`, otherwise as set-up.
    fn step(&mut self, kept: bool, op: Op) -> &mut Self {
        if kept {
            self.run(op)
        } else {
            self.setup(op)
        }
    }

    /// Runs `op`, writing its vector; an error leaves the value as it was.
    fn run(&mut self, op: Op) -> &mut Self {
        let before = self.value.clone();
        let result = op.apply::<C>(before.as_deref());
        let (name, args) = op.name_and_args();
        let (ok, after) = match result {
            Ok(after) => (true, after),
            Err(_) => (false, before.clone()),
        };
        self.lines.push(format!(
            "{{\"case\": \"{}\", \"format\": {}, \"op\": \"{name}\", \"args\": [{}], \"ok\": {ok}, \"before\": {}, \"after\": {}}}",
            self.name,
            C::VERSION,
            args.join(", "),
            hex(before.as_deref()),
            hex(after.as_deref()),
        ));
        self.value = after;
        self
    }

    /// Runs `op` on the value with `bytes` written at `at` (damage another
    /// writer made), keeping the undamaged value for what follows.
    fn damaged(&mut self, at: usize, bytes: &[u8], op: Op) -> &mut Self {
        let Some(kept) = self.value.clone() else {
            return self;
        };
        let mut value = kept.clone();
        let end = (at + bytes.len()).min(value.len());
        value[at..end].copy_from_slice(&bytes[..end - at]);
        self.value = Some(value);
        self.run(op);
        self.value = Some(kept);
        self
    }
}

const T: u64 = 1_700_000_000_000;

/// How many entries a format's cases take: many in a new log, a dense
/// block, a damaged log, and a sliding window of whole calls.
trait Sizes {
    const SIZES: (u64, u64, u64, u64);
}

impl Sizes for Packed {
    const SIZES: (u64, u64, u64, u64) = (3000, 1500, 300, 3000);
}

/// Format 1 has no blocks to fill: fewer entries show all it does.
impl Sizes for Slots {
    const SIZES: (u64, u64, u64, u64) = (300, 150, 120, 300);
}

/// The cases, for one format version.
fn cases<C: Codec + Sizes>() -> Vec<Case<C>> {
    let mut all = Vec::new();
    let case = |name: &str| Case::new(name);
    let (many, dense, damaged, called) = C::SIZES;

    // New logs, appends in order, and entries sharing a millisecond.
    let mut c = case("new logs and appends");
    c.run(Op::Record(T, 1))
        .run(Op::Record(T + 7, 1))
        .run(Op::Record(T + 7, 1));
    c.run(Op::Record(T + 7, 3))
        .run(Op::Record(T + 100, 2))
        .run(Op::Record(T + 100_000, 1));
    for i in 0..40 {
        c.step(i % 8 == 0, Op::Record(T + 100_000 + 13 * i, 1));
    }
    all.push(c);
    let mut c = case("new logs of many entries");
    c.run(Op::Record(T, 5));
    c.value = None;
    c.run(Op::Record(T, many))
        .run(Op::Record(T, 1))
        .run(Op::Record(T + 1, 2));
    all.push(c);
    let mut c = case("a new log at time 0");
    c.run(Op::Record(0, 1))
        .run(Op::Record(0, 1))
        .run(Op::Record(5, 1));
    all.push(c);
    // A gap of 2^52 ms: the widest low fields a block takes.
    let mut c = case("the widest gap");
    c.run(Op::Record(0, 1))
        .run(Op::Record((1 << 52) + 3, 1))
        .run(Op::Record(crate::window::MAX_MS, 1));
    all.push(c);
    let mut c = case("a new log at the largest time");
    c.run(Op::Record(crate::window::MAX_MS, 2))
        .run(Op::Record(crate::window::MAX_MS, 1));
    all.push(c);

    // Entries older than the newest: in place, into blocks coded anew,
    // older than all.
    let mut c = case("out of order");
    for i in 0..300 {
        c.setup(Op::Record(T + 20 * i, 1));
    }
    c.run(Op::Record(T + 20 * 299 - 30, 1))
        .run(Op::Record(T + 20 * 150 + 1, 1));
    c.run(Op::Record(T + 20 * 150 + 1, 4))
        .run(Op::Record(T + 20 * 10, 1));
    c.run(Op::Record(T - 1000, 1))
        .run(Op::Record(T - 5, 3))
        .run(Op::Record(T + 20 * 299, 1));
    all.push(c);
    let mut c = case("clients a millisecond apart, in any order");
    let mut rng = XorShift(0x5eed_c0de);
    for i in 0..400 {
        c.step(i % 25 == 0, Op::Record(T + 3 * i + rng.below(40), 1));
    }
    all.push(c);
    // Sparse blocks: a recode takes the blocks after the one it codes.
    let mut c = case("behind the newest among sparse blocks");
    for i in 0..damaged * 4 {
        c.setup(Op::Record(T + 100_000 * i, 1));
    }
    let middle = T + 100_000 * damaged * 2;
    c.run(Op::Record(middle + 1, 3))
        .run(Op::Record(T + 100_000 * 5 + 7, 2));
    c.run(Op::Record(middle + 50_001, 1))
        .run(Op::Record(T + 100_000 * damaged * 4, 1));
    all.push(c);
    let mut c = case("a dense block behind the newest");
    c.run(Op::Record(T, dense))
        .run(Op::Record(T + 1, 1))
        .run(Op::Record(T + 50, 1));
    c.run(Op::Record(T, 1)).run(Op::Record(T + 1, 2));
    all.push(c);

    // Trims, caps and refunds, then the dead part dropped.
    let mut c = case("trims caps and refunds");
    for i in 0..300 {
        c.setup(Op::Record(T + 10 * i, 1 + i % 2));
    }
    c.run(Op::TrimThrough(-1))
        .run(Op::TrimThrough(T as i64 - 1))
        .run(Op::TrimThrough(T as i64));
    c.run(Op::TrimThrough(T as i64 + 995))
        .run(Op::Reclaim)
        .run(Op::CapTo(5000))
        .run(Op::CapTo(700));
    c.run(Op::Reclaim)
        .run(Op::DropNewest(1))
        .run(Op::DropNewest(3))
        .run(Op::DropNewest(250));
    c.run(Op::TrimThrough(T as i64 + 2000))
        .run(Op::Reclaim)
        .run(Op::CapTo(100));
    c.run(Op::Reclaim)
        .run(Op::DropNewest(99))
        .run(Op::DropNewest(1));
    all.push(c);
    let mut c = case("a trim past the newest empties the log");
    c.run(Op::Record(T, 2))
        .run(Op::Record(T + 5, 1))
        .run(Op::TrimThrough(T as i64 + 5));
    all.push(c);
    let mut c = case("a cap to nothing empties the log");
    c.run(Op::Record(T, 3)).run(Op::CapTo(0));
    all.push(c);

    // Growth, and a sliding window that compacts and recodes as it goes.
    let mut c = case("a sliding window");
    for i in 0..900u64 {
        let now = T + 37 * i;
        let kept = i % 60 == 0;
        c.step(kept, Op::TrimThrough(now as i64 - 5000));
        c.step(kept, Op::Record(now, 1));
        if i % 20 == 0 {
            c.step(kept, Op::Reclaim);
        }
    }
    c.run(Op::Reclaim);
    all.push(c);
    // The same as whole calls, each reclaiming after its append: what a
    // call read of a block it appended to is not read again as it was.
    let mut c = case("a sliding window, whole calls");
    for i in 0..900u64 {
        let now = T + 37 * i;
        let ops = [
            Op::TrimThrough(now as i64 - 5000),
            Op::Record(now, 1),
            Op::Reclaim,
        ];
        // Kept: the calls whose reclaim rewrites the value, and a few more.
        let mut appended = c.value.clone();
        for op in &ops[..2] {
            appended = op.apply::<C>(appended.as_deref()).unwrap();
        }
        let reclaimed = Op::Reclaim.apply::<C>(appended.as_deref()).unwrap();
        if reclaimed != appended || i % 100 == 0 {
            c.call(&ops);
        } else {
            for op in ops {
                c.setup(op);
            }
        }
    }
    all.push(c);
    let mut c = case("a window that slides past two blocks");
    for i in 0..700u64 {
        c.setup(Op::Record(T + i, 1));
    }
    c.run(Op::TrimThrough(T as i64 + 690))
        .run(Op::Reclaim)
        .run(Op::Record(T + 700, 1));
    all.push(c);
    let mut c = case("a span past four-byte slots");
    c.run(Op::Record(T, 1))
        .run(Op::Record(T + (1 << 33), 1))
        .run(Op::TrimThrough(T as i64));
    c.run(Op::Reclaim).run(Op::Record(T + (1 << 33) + 5, 1));
    all.push(c);

    // Whole calls: several operations on one opened log, as checks and
    // refunds make them (what a call has read, kept between them).
    let mut c = case("calls on a log of several blocks");
    for i in 0..called {
        c.setup(Op::Record(T + 37 * i, 1));
    }
    let mut now = T + 37 * called;
    for i in 0..20u64 {
        let floor = now as i64 - 37 * called as i64 * 4 / 5;
        let behind = if i % 3 == 2 { 30 } else { 0 };
        c.call(&[
            Op::TrimThrough(floor),
            Op::Record(now - behind, 1),
            Op::Reclaim,
        ]);
        if i % 10 == 5 {
            c.call(&[
                Op::TrimThrough(floor),
                Op::CapTo(called / 2),
                Op::Record(now, 2),
            ]);
            c.call(&[Op::TrimThrough(floor), Op::DropNewest(2), Op::Reclaim]);
        }
        now += 37;
    }
    c.call(&[Op::TrimThrough(now as i64), Op::Record(now + 1, 1)]);
    all.push(c);

    // Values another writer damaged: each operation on each damage.
    let mut c = case("damaged values");
    for i in 0..damaged {
        c.setup(Op::Record(T + 20 * i, 1));
    }
    c.setup(Op::TrimThrough(T as i64 + 100));
    let len = c.value.as_ref().map_or(0, Vec::len);
    let damage: [(usize, &[u8]); 9] = [
        (0, b"XWLc"),
        (4, &[9]),
        (5, &[3]),
        (8, &[0xff, 0xff, 0xff, 0x7f]),
        (12, &[0x7f]),
        (16, &[0x7f]),
        (24, &[0; 16]),
        (24 + 12, &[0, 0]),
        (len - 1, &[0xff]),
    ];
    let ops = [
        Op::Record(T + 20 * damaged, 1),
        Op::Record(T + 50, 1),
        Op::TrimThrough(T as i64 + 2000),
        Op::CapTo(10),
        Op::DropNewest(2),
        Op::Reclaim,
    ];
    for (at, bytes) in damage {
        for op in ops {
            c.damaged(at, bytes, op);
        }
    }
    all.push(c);
    all
}

fn vectors() -> String {
    let mut lines = Vec::new();
    lines.extend(cases::<Slots>().into_iter().flat_map(|case| case.lines));
    lines.extend(cases::<Packed>().into_iter().flat_map(|case| case.lines));
    format!("[\n{}\n]\n", lines.join(",\n"))
}

#[test]
fn the_codec_vectors_are_the_codecs_output() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(FILE);
    let vectors = vectors();
    if std::env::var_os("SWL_WRITE_VECTORS").is_some() {
        std::fs::write(&path, &vectors).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == vectors,
        "{FILE} is not what the codecs write: run SWL_WRITE_VECTORS=1 cargo test --lib codec_vectors"
    );
}
