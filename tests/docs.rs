//! Every redis-cli session on every page (README.md and docs/*.md) is
//! run through redis-cli itself, in the order a reader meets them (the
//! README, then the pages in its Documentation list's order), on one server with
//! the module and the function library loaded, and must print exactly what
//! the page shows: a reader can follow the pages on one `make run` server.
//! The README stays a landing page that links every page; `make run`
//! listens on loopback unless told otherwise.

mod support;

use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::{load_shipped_library, Config, Server};

const PROMPT: &str = "127.0.0.1:6379> ";

/// One session: the commands typed and everything they printed.
struct Session {
    first_line: usize,
    commands: Vec<String>,
    output: Vec<String>,
}

fn sessions(readme: &str) -> Vec<Session> {
    let mut found = Vec::new();
    let mut block: Option<Session> = None;
    let mut in_code = false;
    for (number, line) in readme.lines().enumerate() {
        if line.starts_with("```") {
            in_code = !in_code;
            if let Some(session) = block.take().filter(|s| !s.commands.is_empty()) {
                found.push(session);
            }
            if in_code {
                block = Some(Session {
                    first_line: number + 1,
                    commands: Vec::new(),
                    output: Vec::new(),
                });
            }
            continue;
        }
        let Some(session) = block.as_mut() else {
            continue;
        };
        if let Some(command) = line.strip_prefix(PROMPT) {
            session.commands.push(command.to_string());
        } else if !session.commands.is_empty() {
            session.output.push(line.to_string());
        }
    }
    found
}

fn run_in_redis_cli(server: &Server, commands: &[String]) -> Vec<String> {
    let mut cli = Command::new("redis-cli")
        .args(["--no-raw", "-p", &server.port().to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run redis-cli");
    let mut input = cli.stdin.take().expect("stdin");
    for command in commands {
        writeln!(input, "{command}").expect("write to redis-cli");
    }
    drop(input);
    let out = cli.wait_with_output().expect("redis-cli output");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(String::from)
        .collect()
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// README.md, then every page under docs/, by name.
fn pages() -> Vec<PathBuf> {
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .expect("docs/")
        .map(|entry| entry.expect("a docs/ entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
        .collect();
    docs.sort();
    std::iter::once(root().join("README.md"))
        .chain(docs)
        .collect()
}

/// The README, then the pages in the order its Documentation list gives.
fn reading_order() -> Vec<PathBuf> {
    let readme = std::fs::read_to_string(root().join("README.md")).expect("README.md");
    let list = readme
        .split_once("\n## Documentation\n")
        .map(|(_, list)| list)
        .expect("the README's Documentation section");
    let mut order = vec![root().join("README.md")];
    for (at, _) in list.match_indices("](docs/") {
        let rest = &list[at + 2..];
        let link = &rest[..rest.find([')', '#']).unwrap_or(rest.len())];
        let page = root().join(link);
        if !order.contains(&page) {
            order.push(page);
        }
    }
    order
}

#[test]
fn every_redis_cli_session_on_every_page_prints_what_it_shows() {
    let order = reading_order();
    assert_eq!(order.len(), pages().len(), "the README links every page");
    // As `make run` starts it, and the library as it is shipped.
    let server = Server::with(Config::as_shipped());
    load_shipped_library(&server);
    let mut replayed = 0;
    for page in order {
        let text = std::fs::read_to_string(&page).expect("read a page");
        for session in &sessions(&text) {
            let printed = run_in_redis_cli(&server, &session.commands);
            assert_eq!(
                printed,
                session.output,
                "the session at {} line {}",
                page.display(),
                session.first_line
            );
            replayed += 1;
        }
    }
    assert!(replayed >= 6, "replayed {replayed} sessions");
}

#[test]
fn the_readme_is_a_short_landing_page_that_links_every_page() {
    let readme = std::fs::read_to_string(root().join("README.md")).expect("README.md");
    let lines = readme.lines().count();
    assert!(lines <= 250, "README.md has {lines} lines");
    for page in &pages()[1..] {
        let name = page.file_name().unwrap().to_string_lossy();
        assert!(
            readme.contains(&format!("](docs/{name})")),
            "README.md does not link docs/{name}"
        );
    }
}

/// Every relative link on every page names a file that exists.
#[test]
fn every_link_between_pages_resolves() {
    for page in pages() {
        let text = std::fs::read_to_string(&page).expect("read a page");
        let dir = page.parent().expect("a page's folder");
        for (at, _) in text.match_indices("](") {
            let rest = &text[at + 2..];
            let target = &rest[..rest.find(')').unwrap_or(rest.len())];
            let file = target.split('#').next().unwrap_or_default();
            if file.is_empty() || file.contains("://") {
                continue;
            }
            assert!(
                dir.join(file).exists(),
                "{} links {target}, which does not exist",
                page.display()
            );
        }
    }
}

/// A child started in a process group of its own, stopped with all its
/// descendants when dropped, also when a test fails.
struct ProcessGroup(std::process::Child);

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", "--", &format!("-{}", self.0.id())])
            .status();
        let _ = self.0.wait();
    }
}

/// `make run`'s server (`make serve`, the same without the build), on a
/// free port, with make's `variables`: the settings `names`, once it
/// answers on `host`.
fn make_serve_settings(host: &str, variables: &[&str], names: &[&str]) -> Vec<String> {
    let port = support::free_port();
    let dir = support::TempDir::new("make-serve");
    let mut make = Command::new("make");
    make.current_dir(root())
        .args(["--no-print-directory", "-s", "serve"])
        .arg(format!("PORT={port}"))
        .arg(format!("RUN_DIR={}", dir.path().display()))
        .args(variables)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // make stays the server's parent: the guard stops the whole group.
    make.process_group(0);
    let mut child = ProcessGroup(make.spawn().expect("run make serve"));
    let client = redis::Client::open(format!("redis://{host}:{port}/")).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(mut con) = client.get_connection_with_timeout(Duration::from_millis(200)) {
            let modules: Vec<redis::Value> =
                redis::cmd("MODULE").arg("LIST").query(&mut con).unwrap();
            assert_eq!(modules.len(), 1, "the module is loaded");
            return names
                .iter()
                .map(|name| {
                    let setting: Vec<String> = redis::cmd("CONFIG")
                        .arg(&["GET", name])
                        .query(&mut con)
                        .expect("CONFIG GET");
                    setting[1].clone()
                })
                .collect();
        }
        assert!(Instant::now() < deadline, "make serve never answered");
        assert!(child.0.try_wait().unwrap().is_none(), "make serve exited");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Loopback unless BIND says otherwise, nothing saved across restarts,
/// and ARGS reaching redis-server.
#[test]
fn make_run_listens_on_loopback_unless_told_otherwise() {
    let names = ["bind", "save", "hz"];
    assert_eq!(
        make_serve_settings("127.0.0.1", &[], &names),
        ["127.0.0.1", "", "10"]
    );
    assert_eq!(
        make_serve_settings("127.0.0.2", &["BIND=127.0.0.2", "ARGS=--hz 77"], &names),
        ["127.0.0.2", "", "77"]
    );
}
