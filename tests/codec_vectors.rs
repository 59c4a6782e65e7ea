//! The function library's compact codecs against the module's, operation
//! by operation: every vector in tests/vectors/codec.json (bytes before,
//! an operation and its arguments, bytes after, written by the Rust codecs'
//! own test, src/codec/vectors.rs) is replayed through the Lua codecs, in
//! a test-only library built from the same modules with tests/codec.lua,
//! over bytes in memory rather than a key, and must leave exactly the bytes
//! the Rust codecs left.

mod support;

use std::path::Path;
use std::process::Command;

use support::{unhex, Config, Server, TempDir};

struct Vector {
    case: String,
    format: u8,
    op: String,
    args: Vec<String>,
    ok: bool,
    before: Option<Vec<u8>>,
    after: Option<Vec<u8>>,
}

/// The text after `"name": ` in a line of the file, up to the end of its
/// value (the file is written one vector a line, its fields in one order).
fn field<'a>(line: &'a str, name: &str) -> &'a str {
    let key = format!("\"{name}\": ");
    let from = line
        .find(&key)
        .unwrap_or_else(|| panic!("no {name} in {line}"))
        + key.len();
    let rest = &line[from..];
    let end = if let Some(quoted) = rest.strip_prefix('"') {
        quoted.find('"').expect("a closing quote") + 2
    } else if rest.starts_with('[') {
        rest.find(']').expect("a closing bracket") + 1
    } else {
        rest.find([',', '}']).expect("the end of a value")
    };
    &rest[..end]
}

fn unquote(text: &str) -> &str {
    text.trim_matches('"')
}

fn bytes(text: &str) -> Option<Vec<u8>> {
    (text != "null").then(|| unhex(unquote(text)))
}

fn vectors() -> Vec<Vector> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/vectors/codec.json");
    let text = std::fs::read_to_string(path).expect("read tests/vectors/codec.json");
    text.lines()
        .filter(|line| line.starts_with('{'))
        .map(|line| {
            let args = field(line, "args").trim_matches(['[', ']']);
            Vector {
                case: unquote(field(line, "case")).to_string(),
                format: field(line, "format").parse().expect("a format"),
                op: unquote(field(line, "op")).to_string(),
                args: args
                    .split(", ")
                    .filter(|a| !a.is_empty())
                    .map(|a| unquote(a).to_string())
                    .collect(),
                ok: field(line, "ok") == "true",
                before: bytes(field(line, "before")),
                after: bytes(field(line, "after")),
            }
        })
        .collect()
}

/// The library with the codec test function, built as scripts/swl.lua is.
fn test_library(dir: &TempDir) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = dir.path().join("swl-codec.lua");
    let status = Command::new("bash")
        .arg(root.join("scripts/build-library.sh"))
        .arg(&out)
        .arg(root.join("tests/codec.lua"))
        .status()
        .expect("run scripts/build-library.sh");
    assert!(status.success(), "scripts/build-library.sh failed");
    std::fs::read_to_string(out).expect("read the test library")
}

fn hex(bytes: &Option<Vec<u8>>) -> String {
    match bytes {
        None => "none".to_string(),
        Some(b) => b.iter().map(|x| format!("{x:02x}")).collect(),
    }
}

#[test]
fn the_librarys_codecs_write_the_modules_bytes_operation_by_operation() {
    let vectors = vectors();
    assert!(vectors.len() > 300, "only {} codec vectors", vectors.len());
    for format in [1, 2] {
        assert!(
            vectors
                .iter()
                .any(|v| v.format == format && v.op == "call" && v.ok),
            "no vector of format {format} for a whole call"
        );
        for op in ["record", "trim_through", "cap_to", "drop_newest", "reclaim"] {
            for ok in [true, false] {
                assert!(
                    vectors
                        .iter()
                        .any(|v| v.format == format && v.op == op && v.ok == ok),
                    "no vector of format {format} for {op} {}",
                    if ok { "succeeding" } else { "failing" }
                );
            }
        }
    }
    let dir = TempDir::new("codec-vectors");
    let server = Server::with(Config::without_module());
    let mut con = server.connect();
    let name: String = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg(test_library(&dir))
        .query(&mut con)
        .expect("FUNCTION LOAD of the test library");
    assert_eq!(name, "swl");
    let mut failures = Vec::new();
    for (i, v) in vectors.iter().enumerate() {
        // The bytes where there are any, then the operations as tokens:
        // a call's as they are, one operation's name and arguments joined.
        let tokens = if v.op == "call" {
            v.args.clone()
        } else {
            let parts: Vec<String> = std::iter::once(v.op.clone())
                .chain(v.args.clone())
                .collect();
            vec![parts.join(":")]
        };
        let mut call = redis::cmd("FCALL");
        call.arg("swl_codec").arg(0).arg(v.format);
        match &v.before {
            Some(before) => call.arg(1).arg(before.as_slice()),
            None => call.arg(0).arg(""),
        };
        call.arg(&tokens);
        let (outcome, after): (String, Option<Vec<u8>>) = call
            .query(&mut con)
            .unwrap_or_else(|e| (format!("failed: {e}"), None));
        let expected = if v.ok { "ok" } else { "error" };
        if outcome != expected || after != v.after {
            failures.push(format!(
                "vector {i} ({}, format {}: {} {:?}): {outcome}, expected {expected}\n  before {}\n  after  {}\n  wanted {}",
                v.case,
                v.format,
                v.op,
                v.args,
                hex(&v.before),
                hex(&after),
                hex(&v.after)
            ));
        }
    }
    // The codecs ran over bytes in memory: no key was made.
    let keys: i64 = redis::cmd("DBSIZE").query(&mut con).unwrap();
    assert_eq!(keys, 0, "the codecs wrote a key");
    assert!(
        failures.is_empty(),
        "{} of {} vectors differ:\n{}",
        failures.len(),
        vectors.len(),
        failures.join("\n")
    );
}
