//! The layer's metrics (the `metrics` feature) through a recorder of the
//! test's own: each decision counted once by limiter, decision and source,
//! and its latency recorded by limiter and source.
#![cfg(feature = "metrics")]

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

use axum::routing::get;
use axum::Router;
use common::http::{by_user, get_as, on_redis};
use common::{free_port, serve, Server};
use metrics::{Counter, Gauge, Histogram, Key, KeyName, Metadata, SharedString, Unit};
use redis_swl_client::{Config, Encoding, FailurePolicy, RateLimiter};

/// Counters, and the number of values each histogram got, by
/// `name{label=value,...}` with the labels sorted.
#[derive(Default)]
struct Recorder {
    counters: Mutex<BTreeMap<String, Arc<AtomicU64>>>,
    histograms: Mutex<BTreeMap<String, Arc<Values>>>,
}

#[derive(Default)]
struct Values(AtomicU64);

impl metrics::HistogramFn for Values {
    fn record(&self, value: f64) {
        assert!((0.0..5.0).contains(&value), "{value} s");
        self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

fn name(key: &Key) -> String {
    let mut labels: Vec<String> = key
        .labels()
        .map(|l| format!("{}={}", l.key(), l.value()))
        .collect();
    labels.sort();
    format!("{}{{{}}}", key.name(), labels.join(","))
}

impl metrics::Recorder for Recorder {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        let mut counters = self.counters.lock().unwrap();
        Counter::from_arc(counters.entry(name(key)).or_default().clone())
    }

    fn register_gauge(&self, _: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::noop()
    }

    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        let mut histograms = self.histograms.lock().unwrap();
        Histogram::from_arc(histograms.entry(name(key)).or_default().clone())
    }
}

fn snapshot<T>(
    map: &Mutex<BTreeMap<String, Arc<T>>>,
    read: impl Fn(&T) -> u64,
) -> Vec<(String, u64)> {
    map.lock()
        .unwrap()
        .iter()
        .map(|(name, value)| (name.clone(), read(value)))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_decision_is_counted_by_limiter_decision_and_source() {
    let recorder: &'static Recorder = Box::leak(Box::default());
    metrics::set_global_recorder(recorder).unwrap();
    let server = Server::start(true, Encoding::Compact);
    let limiter = |name: &str, url: String, policy| {
        RateLimiter::new(Config {
            name: name.to_string(),
            key: by_user(),
            policy,
            ..on_redis(url, vec![(60_000, 2)])
        })
        .unwrap()
    };
    let nowhere = format!("redis://127.0.0.1:{}/", free_port());
    let limiters = [
        limiter("api", server.url(), FailurePolicy::Closed),
        limiter("closed", nowhere.clone(), FailurePolicy::Closed),
        limiter("open", nowhere.clone(), FailurePolicy::Open),
        limiter("local", nowhere, FailurePolicy::Local { max_clients: 10 }),
    ];
    for (limiter, requests) in limiters.iter().zip([5, 1, 1, 3]) {
        let app = Router::new()
            .route("/", get(|| async { "hello\n" }))
            .layer(limiter.layer());
        let address = serve(app).await;
        for _ in 0..requests {
            get_as(address, "/", "alice").await;
        }
    }
    let read = |c: &AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
    let counter = |labels: &str, n: u64| (format!("redis_swl_decisions_total{{{labels}}}"), n);
    assert_eq!(
        snapshot(&recorder.counters, read),
        [
            counter("decision=admitted,limiter=api,source=redis", 2),
            counter("decision=admitted,limiter=local,source=local", 2),
            counter("decision=admitted,limiter=open,source=open", 1),
            counter("decision=denied,limiter=api,source=cache", 2),
            counter("decision=denied,limiter=api,source=redis", 1),
            counter("decision=denied,limiter=closed,source=closed", 1),
            // The local limiter's denial is its own, not the cache's.
            counter("decision=denied,limiter=local,source=local", 1),
        ]
    );
    let seconds = |labels: &str, n| (format!("redis_swl_decision_seconds{{{labels}}}"), n);
    assert_eq!(
        snapshot(&recorder.histograms, |v: &Values| read(&v.0)),
        [
            seconds("limiter=api,source=cache", 2),
            seconds("limiter=api,source=redis", 3),
            seconds("limiter=closed,source=closed", 1),
            seconds("limiter=local,source=local", 3),
            seconds("limiter=open,source=open", 1),
        ]
    );
}
