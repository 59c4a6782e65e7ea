//! The local limiter against the shared test vectors: for every call, the
//! reply the module gave (clients/vectors/local-limiter.json, written and
//! checked by the repository's tests/vectors.rs against the module), as the
//! Python and Node local limiters are held to it.

mod common;

use redis_swl_client::{LocalLimiter, Verdict};
use serde_json::Value;

#[test]
fn the_local_limiter_replies_as_the_module_did() {
    let path = common::repository().join("clients/vectors/local-limiter.json");
    let vectors: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let cases = vectors["cases"].as_array().unwrap();
    assert!(cases.len() >= 40);
    let mut limiter = LocalLimiter::new(10_000);
    let number = |value: &Value| value.as_u64().unwrap();
    for (n, case) in cases.iter().enumerate() {
        let windows: Vec<(u64, u64)> = case["windows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| (number(&w[0]), number(&w[1])))
            .collect();
        for call in case["calls"].as_array().unwrap() {
            let (now, cost) = (number(&call["now_ms"]), number(&call["cost"]));
            let key = format!("case{n}");
            let verdict = match call["op"].as_str().unwrap() {
                "check" => limiter.check(&key, &windows, now, cost),
                _ => limiter.refund(&key, &windows, now, cost),
            };
            let reply: Vec<i64> = call["reply"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_i64().unwrap())
                .collect();
            assert_eq!(
                Some(verdict),
                Verdict::from_reply(&reply),
                "case {n}: {call}"
            );
        }
    }
}

#[test]
fn the_least_recently_used_client_is_forgotten_first() {
    let mut limiter = LocalLimiter::new(2);
    let window = [(60_000, 1)];
    assert!(limiter.check("a", &window, 1000, 1).allowed);
    assert!(limiter.check("b", &window, 1000, 1).allowed);
    assert!(!limiter.check("a", &window, 1001, 1).allowed); // a is now the most recent
    assert!(limiter.check("c", &window, 1002, 1).allowed); // b is forgotten
    assert!(limiter.check("b", &window, 1003, 1).allowed);
    assert!(!limiter.check("c", &window, 1004, 1).allowed);
}
