//! The module against a reference model written here from the rules, reply
//! by reply, over long random sequences of checks, peeks and refunds with
//! random times, costs, limits, windows and penalties; then the logs
//! themselves.

mod support;

use std::collections::BTreeMap;

use redis::Connection;
use support::{for_each_encoding, scores, Rng, Server};

/// The rules, spelled out as directly as possible on sorted vectors.
#[derive(Default)]
struct Model {
    logs: BTreeMap<String, Vec<u64>>,
}

struct Call {
    windows: Vec<(u64, u64)>,
    now: u64,
    cost: u64,
    penalize: bool,
}

fn inside(log: &[u64], window_ms: u64, now: u64) -> Vec<u64> {
    log.iter()
        .copied()
        .filter(|&s| s as i64 > now as i64 - window_ms as i64)
        .collect()
}

impl Model {
    fn reply(log: &[u64], call: &Call, allowed: bool) -> [i64; 5] {
        let widest = call.windows.iter().map(|w| w.0).max().unwrap();
        let per_window: Vec<(u64, u64, i64, bool)> = call
            .windows
            .iter()
            .map(|&(window_ms, limit)| {
                let seen = inside(log, window_ms, call.now);
                let count = seen.len() as u64;
                let denies = count + call.cost > limit;
                let retry = if allowed || !denies || call.cost > limit {
                    -1
                } else {
                    let k = (count + call.cost - limit) as usize;
                    seen[k - 1] as i64 + window_ms as i64 - call.now as i64
                };
                (limit, limit.saturating_sub(count), retry, denies)
            })
            .collect();
        let mut binding: Option<(u64, u64, i64)> = None;
        for &(limit, remaining, retry, denies) in &per_window {
            let better = match binding {
                None => allowed || denies,
                Some((_, best_remaining, best_retry)) => {
                    if allowed {
                        remaining < best_remaining
                    } else {
                        denies && best_retry != -1 && (retry == -1 || retry > best_retry)
                    }
                }
            };
            if better {
                binding = Some((limit, remaining, retry));
            }
        }
        let (limit, remaining, retry) = binding.unwrap_or_else(|| {
            let (limit, remaining, _, _) = per_window[0];
            (limit, remaining, 1)
        });
        let reset = log
            .iter()
            .max()
            .map_or(0, |&newest| newest as i64 + widest as i64 - call.now as i64);
        [
            i64::from(allowed),
            limit as i64,
            remaining as i64,
            retry,
            reset,
        ]
    }

    fn check(&mut self, key: &str, call: &Call) -> [i64; 5] {
        let widest = call.windows.iter().map(|w| w.0).max().unwrap();
        let log = self.logs.entry(key.to_string()).or_default();
        *log = inside(log, widest, call.now);
        let allowed = call
            .windows
            .iter()
            .all(|&(w, limit)| inside(log, w, call.now).len() as u64 + call.cost <= limit);
        if allowed || call.penalize {
            log.extend(std::iter::repeat_n(call.now, call.cost as usize));
            log.sort();
        }
        if !allowed && call.penalize {
            let largest = call.windows.iter().map(|w| w.1).max().unwrap() as usize;
            let excess = log.len().saturating_sub(largest);
            log.drain(..excess);
        }
        Model::reply(log, call, allowed)
    }

    /// Trims as a check would, gives back the `cost` newest entries, and
    /// replies what a peek then replies.
    fn refund(&mut self, key: &str, call: &Call) -> [i64; 5] {
        let widest = call.windows.iter().map(|w| w.0).max().unwrap();
        let log = self.logs.entry(key.to_string()).or_default();
        *log = inside(log, widest, call.now);
        log.truncate(log.len().saturating_sub(call.cost as usize));
        self.peek(key, call)
    }

    fn peek(&self, key: &str, call: &Call) -> [i64; 5] {
        let widest = call.windows.iter().map(|w| w.0).max().unwrap();
        let mut log = inside(
            self.logs.get(key).map_or(&[][..], Vec::as_slice),
            widest,
            call.now,
        );
        let allowed = call
            .windows
            .iter()
            .all(|&(w, limit)| inside(&log, w, call.now).len() as u64 + call.cost <= limit);
        if allowed {
            log.extend(std::iter::repeat_n(call.now, call.cost as usize));
            log.sort();
        }
        Model::reply(&log, call, allowed)
    }
}

fn arguments(call: &Call) -> Vec<String> {
    let mut args = vec![
        call.windows[0].0.to_string(),
        call.windows[0].1.to_string(),
        call.now.to_string(),
    ];
    if call.cost != 1 {
        args.extend(["COST".to_string(), call.cost.to_string()]);
    }
    for &(window_ms, limit) in &call.windows[1..] {
        args.extend([
            "WINDOW".to_string(),
            window_ms.to_string(),
            limit.to_string(),
        ]);
    }
    if call.penalize {
        args.push("PENALIZE".to_string());
    }
    args
}

/// Runs a command and takes the key's TTL off in the same transaction.
/// The TTL runs on the server's wall clock while these times are made up,
/// so it may be a millisecond, which a PERSIST sent after could find run
/// out (a transaction reads expiries at its start); expiry is proven in
/// check.rs, the window rules here.
fn run(con: &mut Connection, command: &str, key: &str, call: &Call) -> [i64; 5] {
    let (reply, _): (Vec<i64>, i64) = redis::pipe()
        .atomic()
        .cmd(command)
        .arg(key)
        .arg(arguments(call))
        .cmd("PERSIST")
        .arg(key)
        .query(con)
        .unwrap();
    let args = arguments(call);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    support::first_five(&reply, &args)
}

#[test]
fn the_module_matches_the_reference_model_reply_by_reply() {
    for_each_encoding(|encoding| {
        let server = Server::with(encoding.config());
        let mut con = server.connect();
        let mut model = Model::default();
        let mut rng = Rng(0x0123_4567_89ab_cdef);
        let mut clock = 100_000u64;
        let mut outcomes = [0usize; 2];
        for step in 0..6000 {
            let key = format!("m{}", rng.below(4));
            // Mostly forward, sometimes a client whose clock lags or runs ahead.
            clock += rng.below(30);
            let now = match rng.below(10) {
                0 => clock.saturating_sub(rng.below(300)),
                1 => clock + rng.below(300),
                _ => clock,
            };
            let windows: Vec<(u64, u64)> = (0..1 + rng.below(3))
                .map(|_| (1 + rng.below(400), rng.below(9)))
                .collect();
            let call = Call {
                windows,
                now,
                cost: 1 + rng.below(4) * rng.below(2),
                penalize: rng.below(4) == 0,
            };
            if rng.below(5) == 0 {
                let peek_call = Call {
                    penalize: false,
                    ..call
                };
                let expected = model.peek(&key, &peek_call);
                assert_eq!(
                    run(&mut con, "SWL.PEEK", &key, &peek_call),
                    expected,
                    "step {step} PEEK {key} {:?}",
                    arguments(&peek_call)
                );
                continue;
            }
            let refund = rng.below(6) == 0;
            let (command, call) = if refund {
                let call = Call {
                    penalize: false,
                    ..call
                };
                ("SWL.REFUND", call)
            } else {
                ("SWL.CHECK", call)
            };
            let expected = if refund {
                model.refund(&key, &call)
            } else {
                model.check(&key, &call)
            };
            let actual = run(&mut con, command, &key, &call);
            assert_eq!(
                actual,
                expected,
                "step {step}: {command} {key} {:?}",
                arguments(&call)
            );
            if !refund {
                outcomes[actual[0] as usize] += 1;
            }
            let log: Vec<f64> = model.logs[&key].iter().map(|&s| s as f64).collect();
            assert_eq!(scores(&mut con, &key), log, "step {step}: the log of {key}");
        }
        assert!(
            outcomes[0] > 1000 && outcomes[1] > 1000,
            "a mix: {outcomes:?}"
        );
    });
}
