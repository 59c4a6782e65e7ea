//! The function library is written as modules (lua/) that
//! scripts/build-library.sh joins into scripts/swl.lua, the one file users
//! load and every client embeds. The committed file must be that build,
//! and its main chunk must keep room for what comes next.

mod support;

use std::path::Path;
use std::process::Command;

use support::{Config, Server, TempDir};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

#[test]
fn the_committed_library_is_the_build_of_its_modules() {
    let dir = TempDir::new("library-build");
    let built = dir.path().join("swl.lua");
    let status = Command::new("bash")
        .arg(root().join("scripts/build-library.sh"))
        .arg(&built)
        .status()
        .expect("run scripts/build-library.sh");
    assert!(status.success(), "scripts/build-library.sh failed");
    let (built, committed) = (read(&built), read(&root().join("scripts/swl.lua")));
    let differs = built
        .lines()
        .zip(committed.lines())
        .position(|(a, b)| a != b)
        .map_or(built.lines().count().min(committed.lines().count()), |i| i);
    assert!(
        built == committed,
        "scripts/swl.lua is not the build of lua/ (first difference at line {}): \
         run `make library` and commit the result",
        differs + 1
    );
}

/// The library with `count` more locals declared at the top of its main
/// chunk, after the shebang line.
fn with_locals(library: &str, count: usize) -> String {
    let (shebang, rest) = library.split_once('\n').expect("a shebang line");
    let names: Vec<String> = (0..count).map(|i| format!("spare{i}")).collect();
    format!("{shebang}\nlocal {} = nil\n{rest}", names.join(", "))
}

fn loads(server: &Server, library: &str) -> bool {
    redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg("REPLACE")
        .arg(library)
        .query::<String>(&mut server.connect())
        .is_ok()
}

/// Lua allows a function 200 locals at once.
const LUA_LOCALS: usize = 200;

/// The most locals the library's main chunk holds at once, counted by the
/// compiler Redis runs: the library loads with `k` more declared at its
/// top exactly while k plus that count is at most LUA_LOCALS.
fn main_chunk_locals(server: &Server, library: &str) -> usize {
    assert!(
        !loads(server, &with_locals(library, LUA_LOCALS)),
        "a library with {LUA_LOCALS} more locals loaded: the count below would mean nothing"
    );
    let (mut fits, mut fails) = (1, LUA_LOCALS);
    assert!(
        loads(server, &with_locals(library, fits)),
        "the library does not load with one more local"
    );
    while fails - fits > 1 {
        let mid = (fits + fails) / 2;
        if loads(server, &with_locals(library, mid)) {
            fits = mid;
        } else {
            fails = mid;
        }
    }
    LUA_LOCALS - fits
}

#[test]
fn the_main_chunk_keeps_to_a_hundred_locals() {
    let server = Server::with(Config::without_module());
    let library = read(&root().join("scripts/swl.lua"));
    let count = main_chunk_locals(&server, &library);
    println!("scripts/swl.lua: {count} locals in its main chunk at most (Lua allows {LUA_LOCALS})");
    assert!(
        count <= 100,
        "the main chunk holds {count} locals at once, more than 100"
    );
}

/// The lines of a Lua file that issue a command, comments left out.
fn commands_issued(path: &Path) -> Vec<String> {
    read(path)
        .lines()
        .enumerate()
        .filter_map(|(i, line)| {
            let code = line.split("--").next().unwrap_or_default();
            let issues = ["redis_call", "redis_pcall", "redis.call", "redis.pcall"]
                .iter()
                .any(|call| code.contains(call));
            issues.then(|| format!("{}:{}: {}", path.display(), i + 1, line.trim()))
        })
        .collect()
}

#[test]
fn the_codecs_issue_no_command_of_their_own() {
    // Their reads and writes go through lua/keyspace.lua, which
    // tests/codec_vectors.rs replaces with bytes in memory.
    for codec in ["lua/compact.lua", "lua/packed.lua"] {
        let issued = commands_issued(&root().join(codec));
        assert!(
            issued.is_empty(),
            "{codec} issues commands:\n{}",
            issued.join("\n")
        );
    }
    // The check itself finds a command where there is one.
    assert!(!commands_issued(&root().join("lua/keyspace.lua")).is_empty());
}
