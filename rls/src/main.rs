//! swl-rls: Envoy's rate limit service (envoy.service.ratelimit.v3) with
//! exact sliding windows on Redis, configured as envoyproxy/ratelimit is.
//! This file only starts things; see the modules for what they do.

mod config;
mod http;
mod limiter;
mod log;
mod runtime;
mod service;
mod settings;
mod stats;

use std::sync::Arc;
use std::time::Duration;

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::{
    RateLimitService, RateLimitServiceServer,
};
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use redis_swl_client::{DenialCache, Swl};
use tonic::{Request, Response, Status};

use crate::config::Config;
use crate::limiter::{Backend, Client};
use crate::service::Service;
use crate::settings::Settings;
use crate::stats::Stats;

struct Grpc(Arc<Service>);

#[tonic::async_trait]
impl RateLimitService for Grpc {
    async fn should_rate_limit(
        &self,
        request: Request<RateLimitRequest>,
    ) -> Result<Response<RateLimitResponse>, Status> {
        self.0
            .should_rate_limit(request.into_inner())
            .await
            .map(Response::new)
    }
}

async fn connect(settings: &Settings) -> Result<Client, redis::RedisError> {
    let cache =
        (settings.local_cache_keys > 0).then(|| DenialCache::new(settings.local_cache_keys));
    macro_rules! with_cache {
        ($swl:expr) => {
            match &cache {
                Some(cache) => $swl.with_denial_cache(cache.clone()),
                None => $swl,
            }
        };
    }
    if settings.redis_cluster {
        let urls: Vec<&str> = settings.redis_url.split(',').collect();
        // No command is sent again by the connection: a check that got no
        // reply may have been recorded.
        let mut builder = redis::cluster::ClusterClientBuilder::new(urls).retries(0);
        if let Some(timeout) = settings.redis_timeout {
            builder = builder
                .connection_timeout(timeout)
                .response_timeout(timeout);
        }
        let connection = builder.build()?.get_async_connection().await?;
        Ok(Client::Cluster(
            with_cache!(Swl::new(connection.clone()).with_encoding(settings.encoding)),
            connection,
        ))
    } else {
        let client = redis::Client::open(settings.redis_url.as_str())?;
        // Reconnection tries again at most a second apart (redis-rs's own
        // backoff grows to a minute, long after Redis is back).
        let mut config = redis::aio::ConnectionManagerConfig::new()
            .set_exponent_base(2)
            .set_factor(2)
            .set_max_delay(1_000)
            .set_number_of_retries(3);
        if let Some(timeout) = settings.redis_timeout {
            config = config
                .set_connection_timeout(timeout)
                .set_response_timeout(timeout);
        }
        let connection = client.get_connection_manager_with_config(config).await?;
        Ok(Client::Single(
            with_cache!(Swl::new(connection.clone()).with_encoding(settings.encoding)),
            connection,
        ))
    }
}

/// Loads the configuration files; a set that does not load is logged and
/// leaves the one in force.
fn reload(service: &Service, settings: &Settings, stats: &Stats, last: &mut Option<Looked>) {
    let files =
        runtime::read_files(&settings.config_dir, settings.ignore_dot_files).map_err(|error| {
            format!(
                "cannot read the configuration in {}: {error}",
                settings.config_dir.display()
            )
        });
    // Said once, not every second.
    if last.as_ref() == Some(&files) {
        return;
    }
    match &files {
        Err(why) => log::error(why),
        Ok(files) => match Config::load(files, settings.merge_domains) {
            Ok(config) => {
                stats.add("ratelimit.service.config_load_success", 1);
                log::info(&format!(
                    "loaded the configuration: {} domains from {} files",
                    config.domains(),
                    files.len()
                ));
                service.set_config(config);
            }
            Err(error) => {
                stats.add("ratelimit.service.config_load_error", 1);
                log::error(&format!("error loading new configuration: {error}"));
            }
        },
    }
    *last = Some(files);
}

/// What the configuration directory held at the last look, or why it
/// could not be read.
type Looked = Result<Vec<(String, String)>, String>;

async fn send_statsd(stats: Arc<Stats>, address: String, every: Duration) {
    let Ok(socket) = tokio::net::UdpSocket::bind("0.0.0.0:0").await else {
        log::error("statsd: cannot open a UDP socket");
        return;
    };
    let mut tick = tokio::time::interval(every);
    loop {
        tick.tick().await;
        for line in stats.take_statsd() {
            // statsd is best effort, as with the reference.
            let _ = socket.send_to(line.as_bytes(), address.as_str()).await;
        }
    }
}

#[tokio::main]
async fn main() {
    let env = std::env::vars().collect();
    let settings = match Settings::from_env(&env) {
        Ok(settings) => settings,
        Err(refusal) => {
            eprintln!("swl-rls: {refusal}");
            std::process::exit(2);
        }
    };
    log::init(settings.log_level, settings.log_json);
    for name in &settings.ignored {
        log::warn(&format!(
            "{name} is set and ignored: it tunes envoyproxy/ratelimit's internals"
        ));
    }
    let backend = match connect(&settings).await {
        Ok(client) => Backend {
            client,
            timeout: settings.redis_timeout,
        },
        Err(error) => {
            log::error(&format!(
                "cannot connect to Redis at {}: {error}",
                settings::masked(&settings.redis_url)
            ));
            std::process::exit(1);
        }
    };
    let stats = Arc::new(Stats::default());
    let service = Arc::new(Service::new(backend, settings.clone(), stats.clone()));
    let mut last = None;
    reload(&service, &settings, &stats, &mut last);
    if !service.has_config() && !settings.force_start {
        log::error(
            "no configuration loaded (FORCE_START_WITHOUT_INITIAL_CONFIG=true starts without one)",
        );
        std::process::exit(1);
    }

    let (reporter, health) = tonic_health::server::health_reporter();
    reporter.set_serving::<RateLimitServiceServer<Grpc>>().await;
    {
        let (service, settings, stats) = (service.clone(), settings.clone(), stats.clone());
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            loop {
                tick.tick().await;
                reload(&service, &settings, &stats, &mut last);
            }
        });
    }
    if let Some(address) = settings.statsd.clone() {
        tokio::spawn(send_statsd(stats.clone(), address, settings.stats_flush));
    }
    let http = match tokio::net::TcpListener::bind(&settings.http_address).await {
        Ok(listener) => listener,
        Err(error) => {
            log::error(&format!(
                "cannot listen on {}: {error}",
                settings.http_address
            ));
            std::process::exit(1);
        }
    };
    let router = http::router(service.clone());
    tokio::spawn(async move { axum::serve(http, router).await });
    if let Some((address, path)) = settings.prometheus.clone() {
        match tokio::net::TcpListener::bind(&address).await {
            Ok(listener) => {
                let router = http::prometheus(service.clone(), &path);
                tokio::spawn(async move { axum::serve(listener, router).await });
            }
            Err(error) => {
                log::error(&format!("cannot listen on {address}: {error}"));
                std::process::exit(1);
            }
        }
    }
    let grpc_address = match tokio::net::lookup_host(&settings.grpc_address)
        .await
        .ok()
        .and_then(|mut found| found.next())
    {
        Some(address) => address,
        None => {
            log::error(&format!("cannot resolve {}", settings.grpc_address));
            std::process::exit(1);
        }
    };
    log::warn(&format!(
        "serving gRPC on {grpc_address} and HTTP on {}",
        settings.http_address
    ));
    let served = tonic::transport::Server::builder()
        .add_service(health)
        .add_service(RateLimitServiceServer::new(Grpc(service)))
        .serve_with_shutdown(grpc_address, async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await;
    if let Err(error) = served {
        log::error(&format!("the gRPC server failed: {error}"));
        std::process::exit(1);
    }
}
