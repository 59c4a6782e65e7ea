//! The HTTP port (HOST, PORT): `/healthcheck`, and `/json`, which takes a
//! RateLimitRequest as JSON and answers as the gRPC call does; and the
//! Prometheus endpoint on its own address.

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::RateLimitOverride;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::{
    rate_limit_descriptor::Entry, RateLimitDescriptor,
};
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::rate_limit::Unit;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use envoy_types::pb::google::protobuf::UInt64Value;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::service::Service;

#[derive(Deserialize)]
struct JsonEntry {
    key: String,
    #[serde(default)]
    value: String,
}

#[derive(Deserialize)]
struct JsonLimit {
    #[serde(default, alias = "requestsPerUnit")]
    requests_per_unit: u32,
    #[serde(default)]
    unit: String,
}

#[derive(Deserialize)]
struct JsonDescriptor {
    #[serde(default)]
    entries: Vec<JsonEntry>,
    #[serde(default)]
    limit: Option<JsonLimit>,
    /// protojson writes a UInt64Value as a number or a string of one.
    #[serde(default, alias = "hitsAddend")]
    hits_addend: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct JsonRequest {
    #[serde(default)]
    domain: String,
    #[serde(default)]
    descriptors: Vec<JsonDescriptor>,
    #[serde(default, alias = "hitsAddend")]
    hits_addend: u32,
}

pub fn router(service: Arc<Service>) -> Router {
    Router::new()
        .route("/healthcheck", get(health))
        .route("/json", post(check))
        .with_state(service)
}

async fn health(State(service): State<Arc<Service>>) -> (StatusCode, &'static str) {
    if service.has_config() || !service.healthy_needs_config() {
        (StatusCode::OK, "OK")
    } else {
        (StatusCode::INTERNAL_SERVER_ERROR, "no configuration loaded")
    }
}

fn code_name(code: i32) -> &'static str {
    Code::try_from(code).map_or("UNKNOWN", |c| c.as_str_name())
}

async fn check(
    State(service): State<Arc<Service>>,
    body: axum::body::Bytes,
) -> (StatusCode, Json<Value>) {
    let request: JsonRequest = match serde_json::from_slice(&body) {
        Ok(request) => request,
        Err(error) => {
            return (
                StatusCode::BAD_REQUEST,
                Json(json!({"error": error.to_string()})),
            )
        }
    };
    let request = RateLimitRequest {
        domain: request.domain,
        descriptors: request
            .descriptors
            .into_iter()
            .map(|d| RateLimitDescriptor {
                entries: d
                    .entries
                    .into_iter()
                    .map(|e| Entry {
                        key: e.key,
                        value: e.value,
                    })
                    .collect(),
                limit: d.limit.map(|l| RateLimitOverride {
                    requests_per_unit: l.requests_per_unit,
                    unit: Unit::from_str_name(&l.unit.to_ascii_uppercase()).map_or(0, |u| u as i32),
                }),
                hits_addend: d
                    .hits_addend
                    .and_then(|hits| match hits {
                        serde_json::Value::Number(n) => n.as_u64(),
                        serde_json::Value::String(text) => text.parse().ok(),
                        _ => None,
                    })
                    .map(|value| UInt64Value { value }),
                ..RateLimitDescriptor::default()
            })
            .collect(),
        hits_addend: request.hits_addend,
    };
    match service.should_rate_limit(request).await {
        Ok(response) => {
            let statuses: Vec<Value> = response
                .statuses
                .iter()
                .map(|s| {
                    let mut status = json!({"code": code_name(s.code), "limitRemaining": s.limit_remaining});
                    if let Some(limit) = &s.current_limit {
                        status["currentLimit"] = json!({
                            "name": limit.name,
                            "requestsPerUnit": limit.requests_per_unit,
                            "unit": envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::rate_limit::Unit::try_from(limit.unit)
                                .map_or("UNKNOWN", |u| u.as_str_name()),
                        });
                    }
                    if let Some(reset) = &s.duration_until_reset {
                        status["durationUntilReset"] = json!(format!("{}s", reset.seconds));
                    }
                    status
                })
                .collect();
            let over = response.overall_code == Code::OverLimit as i32;
            let status = if over {
                StatusCode::TOO_MANY_REQUESTS
            } else {
                StatusCode::OK
            };
            (
                status,
                Json(
                    json!({"overallCode": code_name(response.overall_code), "statuses": statuses}),
                ),
            )
        }
        Err(status) => (
            StatusCode::BAD_REQUEST,
            Json(json!({"error": status.message()})),
        ),
    }
}

pub fn prometheus(service: Arc<Service>, path: &str) -> Router {
    Router::new()
        .route(
            path,
            get(|State(service): State<Arc<Service>>| async move { service.stats.prometheus() }),
        )
        .with_state(service)
}
