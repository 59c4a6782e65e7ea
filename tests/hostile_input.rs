//! Random argument lists thrown at SWL.CHECK, SWL.PEEK and SWL.REFUND: the server never dies,
//! every reply is six well-formed integers or an error, and an error
//! leaves the key exactly as it was.

mod support;

use redis::{Connection, Value};
use support::{check, for_each_encoding, server_ms, snapshot, Rng, Server};

const TOKENS: &[&[u8]] = &[
    b"0",
    b"1",
    b"2",
    b"3",
    b"5",
    b"10",
    b"100",
    b"1000",
    b"60000",
    b"100000",
    b"100001",
    b"9007199254740991",
    b"9007199254740992",
    b"18446744073709551616",
    b"-1",
    b"-0",
    b"+5",
    b"-9223372036854775808",
    b"1e3",
    b"1.5",
    b" 1",
    b"1 ",
    b"01",
    b"0x1f",
    b"*",
    b"**",
    b"",
    b"\0",
    b"1\0",
    b"COST",
    b"cost",
    b"WINDOW",
    b"window",
    b"PENALIZE",
    b"penalize",
    b"NOPE",
    b"\xff\xfe",
    b"inf",
    b"-inf",
    b"nan",
];

fn random_arg(rng: &mut Rng) -> Vec<u8> {
    match rng.below(10) {
        // Raw random bytes of random length, NUL and high bytes included.
        0 => (0..rng.below(24)).map(|_| rng.below(256) as u8).collect(),
        // Random digit strings, some far too long.
        1 => (0..1 + rng.below(30))
            .map(|_| b'0' + rng.below(10) as u8)
            .collect(),
        _ => TOKENS[rng.below(TOKENS.len() as u64) as usize].to_vec(),
    }
}

/// A random call: sometimes well-formed with options in random order,
/// sometimes any number of random arguments.
fn random_call(rng: &mut Rng) -> Vec<Vec<u8>> {
    let mut args: Vec<Vec<u8>> = Vec::new();
    if rng.below(2) == 0 {
        args.push(b"1000".to_vec());
        args.push(rng.below(6).to_string().into_bytes());
        args.push(if rng.below(2) == 0 {
            b"*".to_vec()
        } else {
            (1000 + rng.below(3000)).to_string().into_bytes()
        });
        for _ in 0..rng.below(4) {
            match rng.below(3) {
                0 => args.extend([
                    b"COST".to_vec(),
                    (1 + rng.below(3)).to_string().into_bytes(),
                ]),
                1 => args.extend([
                    b"WINDOW".to_vec(),
                    (1 + rng.below(500)).to_string().into_bytes(),
                    rng.below(5).to_string().into_bytes(),
                ]),
                _ => args.push(b"PENALIZE".to_vec()),
            }
        }
        // Then maybe corrupt one argument.
        if !args.is_empty() && rng.below(3) == 0 {
            let at = rng.below(args.len() as u64) as usize;
            args[at] = random_arg(rng);
        }
    } else {
        args = (0..rng.below(12)).map(|_| random_arg(rng)).collect();
    }
    args
}

fn assert_well_formed(reply: &Value, call: &[Vec<u8>]) {
    let Value::Array(items) = reply else {
        panic!("not an array: {reply:?} for {call:?}");
    };
    let numbers: Vec<i64> = items
        .iter()
        .map(|item| match item {
            Value::Int(n) => *n,
            other => panic!("not an integer: {other:?} for {call:?}"),
        })
        .collect();
    let [allowed, limit, remaining, retry, reset, window] = numbers[..] else {
        panic!("not six integers: {numbers:?} for {call:?}");
    };
    assert!((1..=(1 << 53) - 1).contains(&window), "{numbers:?}");
    assert!(allowed == 0 || allowed == 1, "{numbers:?}");
    assert!((0..=limit).contains(&remaining), "{numbers:?}");
    if allowed == 1 {
        assert_eq!(retry, -1, "{numbers:?}");
    } else {
        assert!(retry == -1 || retry >= 1, "{numbers:?}");
    }
    assert!(reset >= 0, "{numbers:?}");
}

fn seed_keys(con: &mut Connection) {
    for t in ["1000", "1100", "1200"] {
        check(con, "log", &["1000", "10", t]);
    }
    let _: () = redis::cmd("SET")
        .arg("text")
        .arg("value")
        .query(con)
        .unwrap();
}

#[test]
fn random_arguments_never_crash_and_errors_change_nothing() {
    for_each_encoding(|encoding| {
        let mut server = Server::with(encoding.config());
        let mut con = server.connect();
        seed_keys(&mut con);
        let mut rng = Rng(0xdead_beef_cafe_f00d);
        let keys: [&[u8]; 4] = [b"log", b"text", b"fresh", b"nul\0key"];
        let mut seen = [0usize; 2];
        for round in 0..4000 {
            let command =
                ["SWL.PEEK", "SWL.REFUND", "SWL.CHECK", "SWL.CHECK"][rng.below(4) as usize];
            let key = keys[rng.below(keys.len() as u64) as usize];
            let args = random_call(&mut rng);
            let before = snapshot(&mut con, key);
            let mut call = redis::cmd(command);
            call.arg(key);
            for arg in &args {
                call.arg(arg.as_slice());
            }
            match call.query::<Value>(&mut con) {
                Ok(reply) => {
                    assert_well_formed(&reply, &args);
                    seen[0] += 1;
                }
                Err(error) => {
                    assert!(
                        error.code().is_some(),
                        "not a server error reply: {error} for {args:?}"
                    );
                    let after = snapshot(&mut con, key);
                    // Random windows give real, short TTLs: a key whose own
                    // expiry has passed meanwhile was removed by the server.
                    let expired = before.2 >= 0 && before.2 <= server_ms(&mut con) as i64;
                    if !expired {
                        assert_eq!(after, before, "{command} {key:?} {args:?} changed the key");
                    }
                    seen[1] += 1;
                }
            }
            if round % 500 == 0 {
                let _: String = redis::cmd("PING").query(&mut con).expect("server alive");
            }
        }
        assert!(
            seen[0] > 500 && seen[1] > 500,
            "both replies and errors: {seen:?}"
        );
        assert!(
            server.is_alive(),
            "redis-server died; log:\n{}",
            server.log()
        );
        let _: String = redis::cmd("PING").query(&mut con).expect("server alive");
    });
}
