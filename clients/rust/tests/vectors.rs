//! The local limiter against the shared test vectors: for every call, the
//! reply the module gave (clients/vectors/local-limiter.json, written and
//! checked by the repository's tests/vectors.rs against the module), as the
//! Python and Node local limiters are held to it.

mod common;

use redis_swl_client::{LocalLimiter, TooManyWindows, Verdict, MAX_WINDOWS};
use serde_json::Value;

fn vectors() -> Value {
    let path = common::repository().join("clients/vectors/local-limiter.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn the_local_limiter_replies_as_the_module_did() {
    let vectors = vectors();
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
            }
            .unwrap();
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
fn the_local_limiter_takes_as_many_windows_as_the_module() {
    let most = vectors()["windows_at_most"].as_u64().unwrap() as usize;
    assert_eq!(MAX_WINDOWS, most);
    let windows: Vec<(u64, u64)> = (0..=most as u64).map(|n| (1000 + n, 5)).collect();
    let mut limiter = LocalLimiter::new(10_000);
    let widest = 1000 + most as i64 - 1;
    let admitted = Verdict::from_reply(&[1, 5, 4, -1, widest, 1000]).unwrap();
    assert_eq!(limiter.check("k", &windows[..most], 1000, 1), Ok(admitted));
    assert_eq!(limiter.refund("k", &windows[..most], 1001, 1), Ok(admitted));
    let refused = limiter.check("k", &windows, 1002, 1).unwrap_err();
    assert_eq!(refused, TooManyWindows(most + 1));
    assert_eq!(
        refused.to_string(),
        format!("windows: at most {most} per call, not {}", most + 1)
    );
    assert_eq!(
        limiter.refund("k", &windows, 1002, 1),
        Err(TooManyWindows(most + 1))
    );
    // Refused before anything changed: the log still holds nothing.
    assert_eq!(
        limiter.check("k", &windows[..1], 1003, 1),
        Ok(Verdict::from_reply(&[1, 5, 4, -1, 1000, 1000]).unwrap())
    );
}

#[test]
fn the_least_recently_used_client_is_forgotten_first() {
    let mut limiter = LocalLimiter::new(2);
    let window = [(60_000, 1)];
    let allowed = |verdict: Result<Verdict, TooManyWindows>| verdict.unwrap().allowed;
    assert!(allowed(limiter.check("a", &window, 1000, 1)));
    assert!(allowed(limiter.check("b", &window, 1000, 1)));
    assert!(!allowed(limiter.check("a", &window, 1001, 1))); // a is now the most recent
    assert!(allowed(limiter.check("c", &window, 1002, 1))); // b is forgotten
    assert!(allowed(limiter.check("b", &window, 1003, 1)));
    assert!(!allowed(limiter.check("c", &window, 1004, 1)));
}
