//! `make bench`'s rows for swl-rls, in one run on one machine:
//! ShouldRateLimit calls a second and their p50 and p99 latency from our
//! own load generator (16 concurrent gRPC callers, one descriptor and
//! three); Redis's server time per descriptor (SWL.CHECK's, beside the
//! reference's INCRBY and EXPIRE measured on the same server); and the
//! same proxy through a real Envoy driven by wrk, with the rate limit
//! filter and without it.

#[path = "../tests/common/mod.rs"]
mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::envoy::{envoy_path, upstream, Envoy};
use common::{request, Redis, Rls};

const CONFIG: &str = "
domain: edge
descriptors:
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 4000000000}
  - key: route
    rate_limit: {unit: hour, requests_per_unit: 4000000000}
  - key: tenant
    rate_limit: {unit: hour, requests_per_unit: 4000000000}
";

const CALLERS: usize = 16;
const SECONDS: u64 = 3;

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let at = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[at].as_secs_f64() * 1e3
}

/// Calls a second, p50 and p99 in ms, of `descriptors` descriptors a call.
async fn load(rls: &Rls, descriptors: usize) -> (f64, f64, f64) {
    let deadline = Instant::now() + Duration::from_secs(SECONDS);
    let mut tasks = Vec::new();
    for caller in 0..CALLERS {
        let mut client = rls.client().await;
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let mut n = 0usize;
            while Instant::now() < deadline {
                n += 1;
                let user = format!("u{}", (caller * 7919 + n) % 1000);
                let route = format!("/r{}", n % 10);
                let all: [&[(&str, &str)]; 3] = [
                    &[("user", user.as_str())],
                    &[("route", route.as_str())],
                    &[("tenant", "t")],
                ];
                let started = Instant::now();
                client
                    .should_rate_limit(request("edge", &all[..descriptors], 0))
                    .await
                    .expect("ShouldRateLimit");
                latencies.push(started.elapsed());
            }
            latencies
        }));
    }
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await.expect("a caller"));
    }
    all.sort();
    (
        all.len() as f64 / SECONDS as f64,
        percentile(&all, 0.5),
        percentile(&all, 0.99),
    )
}

/// Microseconds a call of each named command took in Redis since the
/// last CONFIG RESETSTAT.
fn server_us(redis: &Redis, commands: &[&str]) -> f64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut redis.server().connect())
        .expect("INFO");
    commands
        .iter()
        .map(|command| {
            let prefix = format!("cmdstat_{command}:");
            info.lines()
                .find_map(|line| line.strip_prefix(prefix.as_str()))
                .and_then(|rest| {
                    rest.split(',')
                        .find_map(|f| f.strip_prefix("usec_per_call="))
                })
                .map_or(0.0, |v| v.parse().unwrap_or(0.0))
        })
        .sum()
}

fn reset_stats(redis: &Redis) {
    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query(&mut redis.server().connect())
        .expect("CONFIG RESETSTAT");
}

/// wrk's requests a second, p50 and p99 in ms.
fn wrk(port: u16) -> Option<(f64, f64, f64)> {
    let output = Command::new("wrk")
        .args([
            "-t2",
            "-c16",
            &format!("-d{SECONDS}s"),
            "--latency",
            "-H",
            "x-user: bench",
        ])
        .arg(format!("http://127.0.0.1:{port}/"))
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&output.stdout).to_string();
    let field = |label: &str| {
        text.lines().find_map(|line| {
            line.trim()
                .strip_prefix(label)
                .map(|rest| rest.trim().to_string())
        })
    };
    let ms = |value: String| {
        let (number, unit) = value.split_at(value.find(|c: char| c.is_ascii_alphabetic())?);
        let number: f64 = number.parse().ok()?;
        Some(match unit {
            "us" => number / 1e3,
            "ms" => number,
            "s" => number * 1e3,
            _ => return None,
        })
    };
    Some((
        field("Requests/sec:")?.parse().ok()?,
        ms(field("50%")?)?,
        ms(field("99%")?)?,
    ))
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let redis = Redis::module(redis_swl_client::Encoding::Compact);
    let rls = Rls::start(&redis, CONFIG, &[]);
    println!("swl-rls: ShouldRateLimit from {CALLERS} concurrent gRPC callers for {SECONDS} s each (the module, compact logs)");
    println!();
    println!("| descriptors a call | calls a second | p50 | p99 | Redis time a descriptor: SWL.CHECK | the reference's INCRBY + EXPIRE |");
    println!("|---|---|---|---|---|---|");
    for descriptors in [1, 3] {
        reset_stats(&redis);
        let (rate, p50, p99) = runtime.block_on(load(&rls, descriptors));
        let swl = server_us(&redis, &["swl.check"]);
        // The reference's commands for as many descriptors, on the same
        // server: one counter per key and window.
        reset_stats(&redis);
        let mut con = redis.server().connect();
        for batch in 0..200 {
            let mut pipe = redis::pipe();
            for n in 0..100 {
                let key = format!("ref_edge_user_u{}_1700000000", (batch * 100 + n) % 1000);
                pipe.cmd("INCRBY").arg(&key).arg(1).ignore();
                pipe.cmd("EXPIRE").arg(&key).arg(3600).ignore();
            }
            let _: () = pipe.query(&mut con).expect("the reference's commands");
        }
        let reference = server_us(&redis, &["incrby", "expire"]);
        println!(
            "| {descriptors} | {rate:.0} | {p50:.2} ms | {p99:.2} ms | {swl:.2} us ({:.2}x) | {reference:.2} us |",
            swl / reference
        );
    }
    println!();
    let wrk_present = Command::new("wrk").arg("--version").output().is_ok();
    if !wrk_present || !envoy_path().exists() {
        println!("(Envoy rows skipped: wrk or Envoy missing; make bench installs both)");
        return;
    }
    let upstream = upstream();
    let bare = Envoy::start(upstream, None, false);
    let filtered = Envoy::start(upstream, Some(&rls.address()), false);
    println!("Through Envoy, wrk -t2 -c16 -d{SECONDS}s, one user (one descriptor a request):");
    println!();
    println!("| Envoy | requests a second | p50 | p99 |");
    println!("|---|---|---|---|");
    let base = wrk(bare.port);
    let with = wrk(filtered.port);
    if let (Some(base), Some(with)) = (base, with) {
        println!(
            "| without the filter | {:.0} | {:.2} ms | {:.2} ms |",
            base.0, base.1, base.2
        );
        println!(
            "| with swl-rls | {:.0} ({:.2}x) | {:.2} ms | {:.2} ms |",
            with.0,
            with.0 / base.0,
            with.1,
            with.2
        );
    } else {
        println!("(wrk gave no figures)");
    }
}
