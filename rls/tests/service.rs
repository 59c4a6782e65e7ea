//! ShouldRateLimit over gRPC against the real service and real Redis: the
//! module in each encoding, the function library alone, and a cluster.

mod common;

use common::{answer, log_key, request, summary, Redis, Rls};
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::RateLimitOverride;
use envoy_types::pb::google::protobuf::UInt64Value;

const CONFIG: &str = "
domain: shop
descriptors:
  - key: user
    rate_limit:
      unit: minute
      requests_per_unit: 3
  - key: user
    value: vip
    rate_limit:
      unit: minute
      requests_per_unit: 5
  - key: route
    value: /api/*
    rate_limit:
      name: api
      unit: minute
      requests_per_unit: 2
  - key: route
    value: /api/open
    rate_limit:
      replaces:
        - name: api
      unit: minute
      requests_per_unit: 4
  - key: internal
    rate_limit:
      unlimited: true
  - key: trial
    shadow_mode: true
    rate_limit:
      unit: minute
      requests_per_unit: 1
  - key: tenant
    descriptors:
      - key: user
        rate_limit:
          unit: 2500ms
          requests_per_unit: 10
          windows:
            - unit: hour
              requests_per_unit: 2
  - key: tokens
    quota_mode: true
    rate_limit:
      unit: minute
      requests_per_unit: 2
";

const OK: &str = "OK";
const OVER: &str = "OVER_LIMIT";
const MINUTE: i32 = 2;
const HOUR: i32 = 3;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn descriptors_are_limited_as_configured_with_exact_windows() {
    for (setup, redis) in Redis::each() {
        let rls = Rls::start(&redis, CONFIG, &[]);
        let client = rls.client().await;
        let ask = |descriptors: Vec<&'static [(&'static str, &'static str)]>, hits| {
            let mut client = client.clone();
            async move {
                let response = answer(&mut client, request("shop", &descriptors, hits)).await;
                summary(&response)
            }
        };
        let bob: &[(&str, &str)] = &[("user", "bob")];
        let mut seen = Vec::new();
        for _ in 0..4 {
            seen.push(ask(vec![bob], 0).await);
        }
        assert_eq!(
            seen,
            [
                (OK, vec![(OK, 2, 3, MINUTE)]),
                (OK, vec![(OK, 1, 3, MINUTE)]),
                (OK, vec![(OK, 0, 3, MINUTE)]),
                (OVER, vec![(OVER, 0, 3, MINUTE)]),
            ],
            "{setup}"
        );
        assert_eq!(redis.entries(&log_key("shop", bob)).len(), 3, "{setup}");
        // The key-and-value entry wins over the key alone.
        assert_eq!(
            ask(vec![&[("user", "vip")]], 2).await,
            (OK, vec![(OK, 3, 5, MINUTE)]),
            "{setup}"
        );
        // A wildcard, and a limit that replaces it by name.
        assert_eq!(
            ask(vec![&[("route", "/api/a")], &[("route", "/api/open")]], 0).await,
            (OK, vec![(OK, 0, 0, 0), (OK, 3, 4, MINUTE)]),
            "{setup}"
        );
        assert_eq!(
            ask(vec![&[("route", "/api/b")]], 3).await,
            (OVER, vec![(OVER, 0, 2, MINUTE)]),
            "{setup}"
        );
        // Unlimited, unknown and shadowed descriptors never refuse.
        assert_eq!(
            ask(vec![&[("internal", "x")], &[("nothing", "x")]], 0).await,
            (OK, vec![(OK, u32::MAX, 0, 0), (OK, 0, 0, 0)]),
            "{setup}"
        );
        assert_eq!(ask(vec![&[("trial", "t")]], 0).await.0, OK, "{setup}");
        assert_eq!(
            ask(vec![&[("trial", "t")]], 0).await,
            (OK, vec![(OK, 0, 1, MINUTE)]),
            "{setup}"
        );
        // Two windows in one check: the hour's 2 binds before 2.5 s's 10.
        let nested: &[(&str, &str)] = &[("tenant", "t1"), ("user", "u")];
        assert_eq!(
            ask(vec![nested], 0).await,
            (OK, vec![(OK, 1, 2, HOUR)]),
            "{setup}"
        );
        assert_eq!(
            ask(vec![nested], 0).await,
            (OK, vec![(OK, 0, 2, HOUR)]),
            "{setup}"
        );
        assert_eq!(
            ask(vec![nested], 0).await,
            (OVER, vec![(OVER, 0, 2, HOUR)]),
            "{setup}"
        );
        drop(client);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_request_counts_nowhere_unless_asked_to() {
    for (setup, redis) in Redis::each() {
        for (stop, counted) in [(None, 2), (Some("true"), 2), (Some("false"), 4)] {
            let env: Vec<(&str, &str)> = stop
                .map(|v| vec![("STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", v)])
                .unwrap_or_default();
            let rls = Rls::start(&redis, CONFIG, &env);
            let mut client = rls.client().await;
            let user = format!("u{}", stop.unwrap_or("default"));
            let user_entry: Vec<(&str, &str)> = vec![("user", user.as_str())];
            let route = format!("/api/{}", stop.unwrap_or("default"));
            let route_entry: Vec<(&str, &str)> = vec![("route", route.as_str())];
            // The route allows 2 a minute, the user 3: the third request is
            // refused by the route, and the user's log must not count it.
            let mut codes = Vec::new();
            for _ in 0..4 {
                let response = answer(
                    &mut client,
                    request("shop", &[&user_entry, &route_entry], 0),
                )
                .await;
                codes.push(summary(&response).0);
            }
            assert_eq!(codes, [OK, OK, OVER, OVER], "{setup} {stop:?}");
            assert_eq!(
                (
                    redis.entries(&log_key("shop", &user_entry)).len(),
                    redis.entries(&log_key("shop", &route_entry)).len()
                ),
                (counted, counted),
                "{setup} {stop:?}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hits_addend_is_honoured_and_zero_checks_without_recording() {
    for (setup, redis) in Redis::each() {
        let rls = Rls::start(&redis, CONFIG, &[]);
        let mut client = rls.client().await;
        let alice: &[(&str, &str)] = &[("user", "alice")];
        let response = answer(&mut client, request("shop", &[alice], 2)).await;
        assert_eq!(
            summary(&response),
            (OK, vec![(OK, 1, 3, MINUTE)]),
            "{setup}"
        );
        // A descriptor's own hits win over the request's, and 0 records
        // nothing; a window at its limit still admits a check of 0.
        let mut zero = request("shop", &[alice], 5);
        zero.descriptors[0].hits_addend = Some(UInt64Value { value: 0 });
        let response = answer(&mut client, zero.clone()).await;
        assert_eq!(
            summary(&response),
            (OK, vec![(OK, 1, 3, MINUTE)]),
            "{setup}"
        );
        let response = answer(&mut client, request("shop", &[alice], 2)).await;
        assert_eq!(
            summary(&response),
            (OVER, vec![(OVER, 0, 3, MINUTE)]),
            "{setup}"
        );
        assert_eq!(redis.entries(&log_key("shop", alice)).len(), 2, "{setup}");
        // A descriptor's own limit.
        let mut own = request("shop", &[&[("anything", "x")]], 0);
        own.descriptors[0].limit = Some(RateLimitOverride {
            requests_per_unit: 1,
            unit: MINUTE,
        });
        // In an unknown domain not even a descriptor's own limit applies.
        let mut unknown = own.clone();
        unknown.domain = "nowhere".to_string();
        for _ in 0..2 {
            let response = answer(&mut client, unknown.clone()).await;
            assert_eq!(summary(&response), (OK, vec![(OK, 0, 0, 0)]), "{setup}");
        }
        let first = answer(&mut client, own.clone()).await;
        let second = answer(&mut client, own).await;
        assert_eq!(
            (summary(&first), summary(&second)),
            (
                (OK, vec![(OK, 0, 1, MINUTE)]),
                (OVER, vec![(OVER, 0, 1, MINUTE)])
            ),
            "{setup}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_charge_after_the_response_is_recorded_past_the_limit() {
    // The reference's token quota: a check of 0 before the request, the
    // charge after it; the window holds 2.
    for (setup, redis) in Redis::each() {
        let rls = Rls::start(&redis, CONFIG, &[]);
        let mut client = rls.client().await;
        let tokens: &[(&str, &str)] = &[("tokens", "team")];
        let mut check = request("shop", &[tokens], 0);
        check.descriptors[0].hits_addend = Some(UInt64Value { value: 0 });
        let mut seen = Vec::new();
        for charge in [1, 1, 3] {
            seen.push(summary(&answer(&mut client, check.clone()).await).0);
            answer(&mut client, request("shop", &[tokens], charge)).await;
        }
        seen.push(summary(&answer(&mut client, check.clone()).await).0);
        assert_eq!(seen, [OK, OK, OK, OVER], "{setup}");
        // Past the limit by the charge, not capped at it.
        assert_eq!(redis.entries(&log_key("shop", tokens)).len(), 5, "{setup}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_clear_errors_and_change_nothing() {
    let redis = Redis::module(redis_swl_client::Encoding::Compact);
    let rls = Rls::start(&redis, CONFIG, &[]);
    let mut client = rls.client().await;
    let long = "x".repeat(10_000);
    let mut huge = request("shop", &[&[("user", "huge")]], 0);
    huge.descriptors[0].hits_addend = Some(UInt64Value { value: u64::MAX });
    let mut bad_unit = request("shop", &[&[("user", "unit")]], 0);
    bad_unit.descriptors[0].limit = Some(RateLimitOverride {
        requests_per_unit: 1,
        unit: 99,
    });
    for (request, code, starts) in [
        (
            request("", &[&[("user", "a")]], 0),
            tonic::Code::InvalidArgument,
            "rate limit domain must not be empty",
        ),
        (
            request("shop", &[], 0),
            tonic::Code::InvalidArgument,
            "rate limit descriptor list must not be empty",
        ),
        (
            request("shop", &[&[("user", long.as_str())]], 0),
            tonic::Code::InvalidArgument,
            "descriptor 0 makes a key of 10014 bytes",
        ),
        (
            bad_unit,
            tonic::Code::InvalidArgument,
            "descriptor 0: its limit's unit 99",
        ),
    ] {
        let status = client.should_rate_limit(request).await.unwrap_err();
        assert_eq!(status.code(), code, "{}", status.message());
        assert!(status.message().starts_with(starts), "{}", status.message());
    }
    // Hits above every limit never fit, whatever their number.
    let response = answer(&mut client, huge).await;
    assert_eq!(summary(&response), (OVER, vec![(OVER, 0, 3, MINUTE)]));
    assert!(redis
        .entries(&log_key("shop", &[("user", "huge")]))
        .is_empty());
    let mut con = redis.server().connect();
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut con).unwrap();
    assert!(keys.is_empty(), "{keys:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_clients_get_exactly_the_limit() {
    for (setup, redis) in Redis::each() {
        let rls = Rls::start(&redis, "domain: load\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 100}\n", &[]);
        let mut tasks = Vec::new();
        for _ in 0..8 {
            let mut client = rls.client().await;
            tasks.push(tokio::spawn(async move {
                let mut admitted = 0;
                for _ in 0..40 {
                    let response =
                        answer(&mut client, request("load", &[&[("k", "shared")]], 0)).await;
                    admitted += u32::from(response.overall_code == 1);
                }
                admitted
            }));
        }
        let mut admitted = 0;
        for task in tasks {
            admitted += task.await.unwrap();
        }
        assert_eq!(admitted, 100, "{setup}");
        assert_eq!(
            redis.entries(&log_key("load", &[("k", "shared")])).len(),
            100,
            "{setup}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_limits_each_descriptor_on_its_own_node() {
    for module in [true, false] {
        let redis = Redis::cluster(module);
        let rls = Rls::start(&redis, CONFIG, &[]);
        let mut client = rls.client().await;
        for user in 0..12 {
            let user = format!("c{user}");
            let entries: Vec<(&str, &str)> = vec![("user", user.as_str())];
            let mut codes = Vec::new();
            for _ in 0..4 {
                let response = answer(&mut client, request("shop", &[&entries], 0)).await;
                codes.push(summary(&response).0);
            }
            assert_eq!(codes, [OK, OK, OK, OVER], "module {module}, {user}");
            assert_eq!(redis.entries(&log_key("shop", &entries)).len(), 3);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headers_metadata_and_json_follow_the_settings() {
    let redis = Redis::module(redis_swl_client::Encoding::Compact);
    let env = [
        ("LIMIT_RESPONSE_HEADERS_ENABLED", "true"),
        ("RESPONSE_DYNAMIC_METADATA", "true"),
    ];
    let rls = Rls::start(&redis, CONFIG, &env);
    let mut client = rls.client().await;
    let dave: &[(&str, &str)] = &[("user", "dave")];
    let mut last = None;
    for _ in 0..4 {
        last = Some(answer(&mut client, request("shop", &[dave], 0)).await);
    }
    let refused = last.unwrap();
    let headers: Vec<(String, String)> = refused
        .response_headers_to_add
        .iter()
        .map(|h| (h.key.clone(), h.value.clone()))
        .collect();
    let names: Vec<&str> = headers.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        names,
        [
            "RateLimit-Limit",
            "RateLimit-Remaining",
            "RateLimit-Reset",
            "ratelimit-policy",
            "ratelimit",
            "retry-after"
        ]
    );
    assert_eq!(headers[0].1, "3");
    assert_eq!(headers[1].1, "0");
    assert_eq!(headers[3].1, "\"60000ms\";q=3;w=60");
    let retry: u64 = headers[5].1.parse().unwrap();
    assert!((59..=60).contains(&retry), "{retry}");
    let metadata = refused.dynamic_metadata.unwrap();
    assert!(metadata.fields.contains_key("domain") && metadata.fields.contains_key("descriptors"));
    // The HTTP port: health, and the same check as JSON.
    assert_eq!(rls.get("/healthcheck"), Some((200, "OK".to_string())));
    let (status, body) = rls
        .http(
            "POST",
            "/json",
            r#"{"domain":"shop","descriptors":[{"entries":[{"key":"user","value":"erin"}]}]}"#,
        )
        .unwrap();
    assert_eq!(status, 200);
    let body: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["overallCode"], "OK");
    assert_eq!(body["statuses"][0]["limitRemaining"], 2);
    assert_eq!(body["statuses"][0]["currentLimit"]["unit"], "MINUTE");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configuration_reloads_and_a_bad_file_keeps_the_last() {
    let redis = Redis::module(redis_swl_client::Encoding::Compact);
    let rls = Rls::start(&redis, CONFIG, &[]);
    let client = rls.client().await;
    let limit_of = |who: &'static str| {
        let mut client = client.clone();
        async move {
            let response = answer(&mut client, request("shop", &[&[("user", who)]], 0)).await;
            summary(&response).1[0].2
        }
    };
    assert_eq!(limit_of("r1").await, 3);
    rls.write_config(
        "config.yaml",
        &CONFIG.replace("requests_per_unit: 3", "requests_per_unit: 7"),
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while limit_of("r2").await != 7 {
        assert!(
            std::time::Instant::now() < deadline,
            "not reloaded:\n{}",
            rls.log()
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    rls.write_config("config.yaml", "domain: shop\ndescriptors: [broken");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !rls.log().contains("error loading new configuration") {
        assert!(
            std::time::Instant::now() < deadline,
            "no error logged:\n{}",
            rls.log()
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(limit_of("r3").await, 7);
    drop(client);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_going_away_is_an_error_within_the_timeout() {
    let redis = Redis::module(redis_swl_client::Encoding::Compact);
    let rls = Rls::start(&redis, CONFIG, &[("REDIS_TIMEOUT", "500ms")]);
    let mut client = rls.client().await;
    answer(&mut client, request("shop", &[&[("user", "a")]], 0)).await;
    drop(redis);
    let started = std::time::Instant::now();
    let status = client
        .should_rate_limit(request("shop", &[&[("user", "a")]], 0))
        .await
        .unwrap_err();
    assert_eq!(
        status.code(),
        tonic::Code::Unavailable,
        "{}",
        status.message()
    );
    assert!(
        status.message().starts_with("redis: "),
        "{}",
        status.message()
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
}

#[test]
fn settings_that_would_change_limiting_are_refused_by_name() {
    let redis = Redis::module(redis_swl_client::Encoding::Compact);
    for (name, value) in [
        ("CONFIG_TYPE", "GRPC_XDS_SOTW"),
        ("BACKEND_TYPE", "memcache"),
        ("REDIS_TLS", "true"),
    ] {
        let log = Rls::try_start(&redis, CONFIG, &[(name, value)])
            .err()
            .unwrap();
        assert!(
            log.contains(&format!("swl-rls: {name}={value} is refused")),
            "{log}"
        );
    }
    let rls = Rls::start(&redis, CONFIG, &[("REDIS_POOL_SIZE", "20")]);
    assert!(
        rls.log().contains("REDIS_POOL_SIZE is set and ignored"),
        "{}",
        rls.log()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statistics_go_to_statsd_and_prometheus_under_the_references_names() {
    let redis = Redis::module(redis_swl_client::Encoding::Compact);
    let statsd = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    statsd
        .set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    let statsd_port = statsd.local_addr().unwrap().port().to_string();
    let prometheus = common::free_port();
    let prometheus_addr = format!("127.0.0.1:{prometheus}");
    let env = [
        ("USE_STATSD", "true"),
        ("STATSD_HOST", "127.0.0.1"),
        ("STATSD_PORT", statsd_port.as_str()),
        ("STATS_FLUSH_INTERVAL", "100ms"),
        ("USE_PROMETHEUS", "true"),
        ("PROMETHEUS_ADDR", prometheus_addr.as_str()),
    ];
    let rls = Rls::start(&redis, CONFIG, &env);
    let mut client = rls.client().await;
    // A limit of 3, near past 2 (0.8 of it): within, within, within and
    // near, over.
    for _ in 0..4 {
        answer(
            &mut client,
            request("shop", &[&[("user", "stat.10.0.0.1")]], 0),
        )
        .await;
    }
    let base = "ratelimit.service.rate_limit.shop.user";
    let expected: std::collections::BTreeMap<String, u64> = [
        ("total_hits", 4),
        ("within_limit", 3),
        ("near_limit", 1),
        ("over_limit", 1),
    ]
    .into_iter()
    .map(|(counter, n)| (format!("{base}.{counter}"), n))
    .collect();
    let mut totals = std::collections::BTreeMap::<String, u64>::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while expected.iter().any(|(name, n)| totals.get(name) != Some(n)) {
        assert!(std::time::Instant::now() < deadline, "statsd: {totals:?}");
        let mut buffer = [0u8; 1500];
        let Ok(read) = statsd.recv(&mut buffer) else {
            continue;
        };
        let line = String::from_utf8_lossy(&buffer[..read]).to_string();
        let (name, rest) = line.split_once(':').unwrap();
        let delta: u64 = rest.strip_suffix("|c").unwrap().parse().unwrap();
        *totals.entry(name.to_string()).or_default() += delta;
    }
    // Nothing past what was expected, and no shadow mode here.
    assert_eq!(totals.get(&format!("{base}.shadow_mode")), None);
    let page = std::net::TcpStream::connect(("127.0.0.1", prometheus))
        .and_then(|mut stream| {
            use std::io::{Read, Write};
            stream.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")?;
            let mut text = String::new();
            stream.read_to_string(&mut text)?;
            Ok(text)
        })
        .unwrap();
    assert!(
        page.contains("ratelimit_service_rate_limit_total_hits{domain=\"shop\",key1=\"user\"} 4\n"),
        "{page}"
    );
    assert!(
        page.contains("ratelimit_service_config_load_success 1\n"),
        "{page}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_health_checking_is_served() {
    use tonic_health::pb::{
        health_check_response::ServingStatus, health_client::HealthClient, HealthCheckRequest,
    };
    let redis = Redis::module(redis_swl_client::Encoding::Compact);
    let rls = Rls::start(&redis, CONFIG, &[]);
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", rls.address()))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut health = HealthClient::new(channel);
    for service in ["", "envoy.service.ratelimit.v3.RateLimitService"] {
        let status = health
            .check(HealthCheckRequest {
                service: service.to_string(),
            })
            .await
            .unwrap()
            .into_inner()
            .status;
        assert_eq!(status, ServingStatus::Serving as i32, "{service:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_redis_is_an_error_within_the_timeout() {
    let debug: Vec<String> = common::DEBUG.iter().map(|s| s.to_string()).collect();
    let server = common::Server::with_args(true, redis_swl_client::Encoding::Compact, &debug);
    let port = server.port;
    let redis = Redis::Single(server, true);
    let rls = Rls::start(&redis, CONFIG, &[("REDIS_TIMEOUT", "300ms")]);
    let mut client = rls.client().await;
    answer(&mut client, request("shop", &[&[("user", "slow")]], 0)).await;
    let stall = common::Stall::start(port, 3.0);
    let started = std::time::Instant::now();
    let status = client
        .should_rate_limit(request("shop", &[&[("user", "slow")]], 0))
        .await
        .unwrap_err();
    let waited = started.elapsed();
    assert_eq!(
        status.code(),
        tonic::Code::Unavailable,
        "{}",
        status.message()
    );
    assert!(
        status.message().contains("timed out"),
        "{}",
        status.message()
    );
    assert!(waited < std::time::Duration::from_secs(2), "{waited:?}");
    stall.wait();
}

/// RateLimitRequest's fields, with bytes where it has strings.
#[derive(Clone, PartialEq, prost::Message)]
struct RawRequest {
    #[prost(bytes = "vec", tag = "1")]
    domain: Vec<u8>,
    #[prost(message, repeated, tag = "2")]
    descriptors: Vec<RawDescriptor>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct RawDescriptor {
    #[prost(message, repeated, tag = "1")]
    entries: Vec<RawEntry>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct RawEntry {
    #[prost(bytes = "vec", tag = "1")]
    key: Vec<u8>,
    #[prost(bytes = "vec", tag = "2")]
    value: Vec<u8>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bytes_that_are_not_utf8_are_refused_and_the_service_goes_on() {
    let redis = Redis::module(redis_swl_client::Encoding::Compact);
    let rls = Rls::start(&redis, CONFIG, &[]);
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", rls.address()))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut raw = tonic::client::Grpc::new(channel);
    raw.ready().await.unwrap();
    let raw_request = RawRequest {
        domain: b"shop".to_vec(),
        descriptors: vec![RawDescriptor {
            entries: vec![RawEntry {
                key: b"user".to_vec(),
                value: vec![0xff, 0xfe, b'x'],
            }],
        }],
    };
    let path = tonic::codegen::http::uri::PathAndQuery::from_static(
        "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit",
    );
    let refused: Result<tonic::Response<RawRequest>, tonic::Status> = raw
        .unary(
            tonic::Request::new(raw_request),
            path,
            tonic_prost::ProstCodec::default(),
        )
        .await;
    let status = refused.unwrap_err();
    assert_eq!(status.code(), tonic::Code::Internal, "{}", status.message());
    assert!(
        status.message().contains("invalid string value"),
        "{}",
        status.message()
    );
    let mut client = rls.client().await;
    let response = answer(&mut client, request("shop", &[&[("user", "after")]], 0)).await;
    assert_eq!(summary(&response), (OK, vec![(OK, 2, 3, MINUTE)]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_local_cache_answers_a_denied_key_without_redis() {
    let redis = Redis::module(redis_swl_client::Encoding::Compact);
    let rls = Rls::start(&redis, CONFIG, &[("LOCAL_CACHE_SIZE_IN_BYTES", "1000000")]);
    let mut client = rls.client().await;
    let gil: &[(&str, &str)] = &[("user", "gil")];
    let mut codes = Vec::new();
    for _ in 0..4 {
        codes.push(summary(&answer(&mut client, request("shop", &[gil], 0)).await).0);
    }
    assert_eq!(codes, [OK, OK, OK, OVER]);
    let calls = |redis: &Redis| {
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query(&mut redis.server().connect())
            .unwrap();
        info.lines()
            .find_map(|l| l.strip_prefix("cmdstat_swl.check:calls="))
            .and_then(|rest| rest.split(',').next())
            .map_or(0, |n| n.parse::<u64>().unwrap())
    };
    let before = calls(&redis);
    for _ in 0..5 {
        let response = answer(&mut client, request("shop", &[gil], 0)).await;
        assert_eq!(summary(&response), (OVER, vec![(OVER, 0, 3, MINUTE)]));
    }
    // Answered in the service: Redis saw none of them.
    assert_eq!(calls(&redis), before);
    assert_eq!(redis.entries(&log_key("shop", gil)).len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_service_comes_back_within_seconds_of_redis() {
    let mut redis = Redis::module(redis_swl_client::Encoding::Compact);
    let rls = Rls::start(
        &redis,
        CONFIG,
        &[
            ("REDIS_TIMEOUT", "500ms"),
            ("REDIS_HEALTH_CHECK_ACTIVE_CONNECTION", "true"),
        ],
    );
    let mut client = rls.client().await;
    let hal: &[(&str, &str)] = &[("user", "hal")];
    answer(&mut client, request("shop", &[hal], 0)).await;
    let Redis::Single(server, _) = &mut redis else {
        unreachable!()
    };
    server.stop();
    // Down long enough to use up the reconnection's tries.
    let down = std::time::Instant::now();
    while down.elapsed() < std::time::Duration::from_secs(5) {
        let failed = client.should_rate_limit(request("shop", &[hal], 0)).await;
        assert_eq!(failed.unwrap_err().code(), tonic::Code::Unavailable);
    }
    assert_eq!(
        rls.get("/healthcheck"),
        Some((500, "Redis does not answer".to_string()))
    );
    server.start_again();
    let back = std::time::Instant::now();
    while client
        .should_rate_limit(request("shop", &[hal], 0))
        .await
        .is_err()
    {
        assert!(
            back.elapsed() < std::time::Duration::from_secs(5),
            "not back:\n{}",
            rls.log()
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(rls.get("/healthcheck"), Some((200, "OK".to_string())));
}

#[test]
fn json_refuses_what_is_not_a_request_naming_the_field() {
    let redis = Redis::module(redis_swl_client::Encoding::Compact);
    let rls = Rls::start(&redis, CONFIG, &[]);
    let entries = r#""entries":[{"key":"user","value":"ida"}]"#;
    for (descriptor, why) in [
        (
            format!(r#"{{{entries},"hitsAddend":-5}}"#),
            "descriptors[0].hitsAddend: -5 is not a whole number in range",
        ),
        (
            format!(r#"{{{entries},"hitsAddend":"abc"}}"#),
            "descriptors[0].hitsAddend: \"abc\" is not a whole number in range",
        ),
        (
            format!(r#"{{{entries},"limit":{{"requestsPerUnit":1,"unit":"FORTNIGHT"}}}}"#),
            "descriptors[0].limit.unit: \"FORTNIGHT\" is not one of SECOND to YEAR",
        ),
    ] {
        let body = format!(r#"{{"domain":"shop","descriptors":[{descriptor}]}}"#);
        let (status, text) = rls.http("POST", "/json", &body).unwrap();
        let text: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!((status, text["error"].as_str()), (400, Some(why)), "{body}");
    }
    // Hits as protojson writes a 64-bit integer: a string.
    let body = format!(
        r#"{{"domain":"shop","hitsAddend":"2","descriptors":[{{{entries},"hitsAddend":"2"}}]}}"#
    );
    let (status, text) = rls.http("POST", "/json", &body).unwrap();
    let text: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        (status, &text["statuses"][0]["limitRemaining"]),
        (200, &serde_json::json!(1))
    );
    assert!(redis.entries(&log_key("shop", &[("user", "ida")])).len() == 2);
}
