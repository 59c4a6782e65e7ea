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
    hits_addend: Option<serde_json::Value>,
}

/// A protojson integer: a number, or a string of one (as protojson writes
/// 64-bit integers); anything else is refused, naming `field`.
fn whole<T: TryFrom<u64>>(value: serde_json::Value, field: &str) -> Result<T, String> {
    let n = match &value {
        serde_json::Value::Number(n) => n.as_u64(),
        serde_json::Value::String(text) => text.parse().ok(),
        _ => None,
    };
    n.and_then(|n| T::try_from(n).ok())
        .ok_or_else(|| format!("{field}: {value} is not a whole number in range"))
}

/// The JSON request as the protocol's, or why it is not one.
fn to_request(request: JsonRequest) -> Result<RateLimitRequest, String> {
    let mut descriptors = Vec::with_capacity(request.descriptors.len());
    for (i, d) in request.descriptors.into_iter().enumerate() {
        let limit = match d.limit {
            None => None,
            Some(l) => Some(RateLimitOverride {
                requests_per_unit: l.requests_per_unit,
                unit: Unit::from_str_name(&l.unit.to_ascii_uppercase())
                    .filter(|u| *u != Unit::Unknown)
                    .ok_or_else(|| {
                        format!(
                            "descriptors[{i}].limit.unit: {:?} is not one of SECOND to YEAR",
                            l.unit
                        )
                    })? as i32,
            }),
        };
        let hits_addend = match d.hits_addend {
            None => None,
            Some(hits) => Some(UInt64Value {
                value: whole(hits, &format!("descriptors[{i}].hitsAddend"))?,
            }),
        };
        descriptors.push(RateLimitDescriptor {
            entries: d
                .entries
                .into_iter()
                .map(|e| Entry {
                    key: e.key,
                    value: e.value,
                })
                .collect(),
            limit,
            hits_addend,
            ..RateLimitDescriptor::default()
        });
    }
    Ok(RateLimitRequest {
        domain: request.domain,
        descriptors,
        hits_addend: match request.hits_addend {
            None => 0,
            Some(hits) => whole(hits, "hitsAddend")?,
        },
    })
}

pub fn router(service: Arc<Service>) -> Router {
    Router::new()
        .route("/healthcheck", get(health))
        .route("/json", post(check))
        .with_state(service)
}

async fn health(State(service): State<Arc<Service>>) -> (StatusCode, &'static str) {
    match service.unhealthy().await {
        None => (StatusCode::OK, "OK"),
        Some(why) => (StatusCode::INTERNAL_SERVER_ERROR, why),
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
    let request = match to_request(request) {
        Ok(request) => request,
        Err(why) => return (StatusCode::BAD_REQUEST, Json(json!({"error": why}))),
    };
    match service.should_rate_limit(request).await {
        Ok(response) => {
            let statuses: Vec<Value> = response
                .statuses
                .iter()
                .map(|s| {
                    let mut status =
                        json!({"code": code_name(s.code), "limitRemaining": s.limit_remaining});
                    if let Some(limit) = &s.current_limit {
                        status["currentLimit"] = json!({
                            "name": limit.name,
                            "requestsPerUnit": limit.requests_per_unit,
                            "unit": crate::config::unit_name(limit.unit),
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
