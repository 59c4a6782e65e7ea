//! The test vectors the clients' local limiters are held to
//! (clients/vectors/local-limiter.json): sequences of checks and refunds on
//! one key, each with the module's exact reply. A client's local limiter,
//! which decides in process while Redis is unreachable, must give the same
//! replies for the same calls. This test runs every sequence through the
//! module and fails unless the file holds exactly its replies; with
//! SWL_WRITE_VECTORS=1 it writes the file instead.

mod support;

use std::fmt::Write as _;
use std::path::Path;

use support::{Rng, Server};

const FILE: &str = "clients/vectors/local-limiter.json";
const CASES: usize = 40;
const CALLS: usize = 30;

/// Windows a case may use: narrow enough that entries leave within a case.
const WINDOW_MS: [u64; 4] = [100, 250, 1000, 5000];

fn call(con: &mut redis::Connection, op: &str, key: &str, args: &[String]) -> Vec<i64> {
    let command = if op == "check" {
        "SWL.CHECK"
    } else {
        "SWL.REFUND"
    };
    redis::cmd(command)
        .arg(key)
        .arg(args)
        .query(con)
        .unwrap_or_else(|e| panic!("{command} {key} {args:?}: {e}"))
}

/// The most windows a call may have, as the module takes them: a check
/// with that many is answered, one with a window more refused. Local
/// limiters refuse settings with more.
fn windows_at_most(con: &mut redis::Connection) -> usize {
    let with_windows = |n: usize| {
        let mut args = vec!["1000".to_string(), "5".into(), "1000".into()];
        for _ in 1..n {
            args.extend(["WINDOW".to_string(), "1000".into(), "5".into()]);
        }
        args
    };
    let most = 100;
    let _ = call(con, "check", "windows_at_most", &with_windows(most));
    let over: redis::RedisResult<Vec<i64>> = redis::cmd("SWL.CHECK")
        .arg("windows_at_most")
        .arg(with_windows(most + 1))
        .query(con);
    let error = over.expect_err("a window more than the maximum is refused");
    assert_eq!(
        support::error_text(&error),
        format!("ERR too many windows: at most {most} per call")
    );
    most
}

/// The file's text: every case and every call with the module's reply.
fn vectors(con: &mut redis::Connection) -> String {
    let mut rng = Rng(0x10ca_1113_5eed);
    let mut text = format!(
        "{{\n  \"about\": \"Checks and refunds on one key per case, with redis-swl's replies \
         (allowed, limit, remaining, retry_after_ms, reset_after_ms, window_ms). Written by \
         tests/vectors.rs from the module; clients' local limiters must reply the same.\",\n  \
         \"windows_at_most\": {},\n  \"cases\": [\n",
        windows_at_most(con)
    );
    for case in 0..CASES {
        let windows: Vec<(u64, u64)> = (0..1 + rng.below(3))
            .map(|_| (WINDOW_MS[rng.below(4) as usize], rng.below(8)))
            .collect();
        let listed: Vec<String> = windows
            .iter()
            .map(|(ms, l)| format!("[{ms}, {l}]"))
            .collect();
        let _ = writeln!(
            text,
            "    {{\"windows\": [{}], \"calls\": [",
            listed.join(", ")
        );
        let key = format!("v{case}");
        let mut now = 1_000_000 + rng.below(1000);
        for n in 0..CALLS {
            now += rng.below(windows[0].0 / 2);
            let op = if rng.below(5) == 0 { "refund" } else { "check" };
            let cost = 1 + rng.below(3);
            let mut args = vec![
                windows[0].0.to_string(),
                windows[0].1.to_string(),
                now.to_string(),
                "COST".to_string(),
                cost.to_string(),
            ];
            for (ms, limit) in &windows[1..] {
                args.extend(["WINDOW".to_string(), ms.to_string(), limit.to_string()]);
            }
            let reply = call(con, op, &key, &args);
            let reply: Vec<String> = reply.iter().map(i64::to_string).collect();
            let end = if n + 1 == CALLS { "" } else { "," };
            let _ = writeln!(
                text,
                "      {{\"op\": \"{op}\", \"now_ms\": {now}, \"cost\": {cost}, \"reply\": [{}]}}{end}",
                reply.join(", ")
            );
        }
        let end = if case + 1 == CASES { "" } else { "," };
        let _ = writeln!(text, "    ]}}{end}");
    }
    text.push_str("  ]\n}\n");
    text
}

#[test]
fn the_local_limiter_vectors_are_the_modules_replies() {
    let server = Server::start();
    let text = vectors(&mut server.connect());
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(FILE);
    if std::env::var_os("SWL_WRITE_VECTORS").is_some() {
        std::fs::write(&path, &text).expect("write the vectors");
    }
    let stored = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        stored == text,
        "{FILE} is not what the module replies: run SWL_WRITE_VECTORS=1 cargo test --test vectors"
    );
}
