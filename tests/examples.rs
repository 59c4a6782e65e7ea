//! The client examples run against a real server: the Rust one always, the
//! Python and Node.js ones where those runtimes are installed. All three
//! print the same status and headers for the same requests.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use support::Server;

fn manifest() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn on_path(program: &str) -> bool {
    Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {program}"))
        .output()
        .is_ok_and(|out| out.status.success())
}

/// Installs an example's client library; panics with the reason if that
/// fails on a machine that has the runtime.
fn setup(runtime: &str) {
    let out = Command::new("bash")
        .arg(manifest().join("scripts/setup-examples.sh"))
        .arg(runtime)
        .output()
        .expect("run scripts/setup-examples.sh");
    assert!(
        out.status.success(),
        "setting up the {runtime} example failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs one example and returns its lines.
fn run(program: &Path, before: &[PathBuf], args: &[&str]) -> Vec<String> {
    let out = Command::new(program)
        .args(before)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("run {}: {e}", program.display()));
    assert!(
        out.status.success(),
        "{} failed: {}",
        program.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(String::from)
        .collect()
}

const POLICY: &str = "RateLimit-Policy: \"default\";q=3;w=60";

fn expected(suffix: &str) -> Vec<String> {
    let ok = |r: u32| format!("200 {POLICY} | RateLimit: \"default\";r={r};t=60{suffix}");
    let limited =
        format!("429 {POLICY} | RateLimit: \"default\";r=0;t=60 | Retry-After: 60{suffix}");
    vec![ok(2), ok(1), ok(0), limited.clone(), limited]
}

/// Each example: through Redis, failing open without it, failing closed.
fn exercise(program: &Path, before: &[PathBuf], client: &str) {
    let server = Server::start();
    let up = server.url();
    let closed_port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port");
    let down = format!("redis://127.0.0.1:{closed_port}/");
    assert_eq!(
        run(program, before, &[&up, client, "5", "3", "60000", "open"]),
        expected("")
    );
    let key = format!("rl:{client}");
    let entries: i64 = redis::cmd("ZCARD")
        .arg(&key)
        .query(&mut server.connect())
        .unwrap();
    assert_eq!(entries, 3);
    assert_eq!(
        run(program, before, &[&down, client, "5", "3", "60000", "open"]),
        expected(" (local)")
    );
    assert_eq!(
        run(
            program,
            before,
            &[&down, client, "2", "3", "60000", "closed"]
        ),
        ["503 Retry-After: 1", "503 Retry-After: 1"]
    );
}

/// `cargo test` builds examples only as test targets, so build the program.
fn build_rust_example() -> PathBuf {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(cargo)
        .args(["build", "--quiet", "--example", "http_headers"])
        .current_dir(manifest())
        .status()
        .expect("run cargo build --example");
    assert!(status.success(), "building the Rust example failed");
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| manifest().join("target"));
    target.join("debug/examples/http_headers")
}

#[test]
fn the_rust_example_maps_replies_to_headers() {
    exercise(&build_rust_example(), &[], "rust");
}

#[test]
fn the_python_example_maps_replies_to_headers() {
    if !on_path("python3") {
        eprintln!("skipped: no python3 on this machine");
        return;
    }
    setup("python");
    let python = manifest().join("target/example-env/bin/python");
    exercise(
        &python,
        &[manifest().join("examples/python/http_headers.py")],
        "python",
    );
}

#[test]
fn the_node_example_maps_replies_to_headers() {
    if !(on_path("node") && on_path("npm")) {
        eprintln!("skipped: no node/npm on this machine");
        return;
    }
    setup("node");
    exercise(
        Path::new("node"),
        &[manifest().join("examples/node/http_headers.js")],
        "node",
    );
}
