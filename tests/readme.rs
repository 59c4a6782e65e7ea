//! Every redis-cli session in the README is run against a real server (the
//! module and the function library loaded) through redis-cli itself, and
//! must print exactly what the README shows.

mod support;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use support::{load_library, Encoding, Server};

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

#[test]
fn every_redis_cli_session_in_the_readme_prints_what_it_shows() {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"))
        .expect("README.md");
    let sessions = sessions(&readme);
    assert!(sessions.len() >= 3, "found {} sessions", sessions.len());
    let server = Server::start();
    load_library(&server, Encoding::Zset);
    for session in &sessions {
        let _: () = redis::cmd("FLUSHALL").query(&mut server.connect()).unwrap();
        let printed = run_in_redis_cli(&server, &session.commands);
        assert_eq!(
            printed, session.output,
            "the session at README.md line {}",
            session.first_line
        );
    }
}
