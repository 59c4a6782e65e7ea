//! ShouldRateLimit: each descriptor's limit looked up, its hits checked
//! against its log with SWL, and the answers combined as the reference
//! combines them (replaces, unlimited, shadow and quota mode, headers,
//! dynamic metadata, statistics). A request Envoy is told to refuse is
//! recorded nowhere: descriptors that admitted it give its hits back.

use std::sync::{Arc, RwLock};

use envoy_types::pb::envoy::config::core::v3::HeaderValue;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{
    Code, DescriptorStatus, RateLimit as StatusLimit,
};
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use envoy_types::pb::google::protobuf::{value::Kind, ListValue, Struct, Value};
use futures::future::join_all;
use redis_swl_client::{rate_limit_headers, Verdict};
use tonic::Status;

use crate::config::{override_limit, Config, RateLimit, Window, UNKNOWN_UNIT};
use crate::limiter::{apply, give_back, Backend, Outcome};
use crate::settings::{Refused, Settings};
use crate::stats::{count, Stats};

/// The longest Redis key a descriptor may make, in bytes.
pub const MAX_KEY_BYTES: usize = 8_192;
/// The most descriptors one request may carry.
pub const MAX_DESCRIPTORS: usize = 1_000;

pub struct Service {
    config: RwLock<Option<Arc<Config>>>,
    backend: Backend,
    settings: Settings,
    pub stats: Arc<Stats>,
}

/// A descriptor with a limit to check.
struct Planned {
    index: usize,
    limit: RateLimit,
    key: String,
    hits: u64,
    quota: bool,
    /// Recorded whether or not it fits: a quota's charge, or every request
    /// where refused requests count.
    forced: bool,
}

fn invalid(why: impl Into<String>) -> Status {
    Status::invalid_argument(why.into())
}

impl Service {
    pub fn new(backend: Backend, settings: Settings, stats: Arc<Stats>) -> Service {
        Service {
            config: RwLock::new(None),
            backend,
            settings,
            stats,
        }
    }

    pub fn set_config(&self, config: Config) {
        *self.config.write().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(config));
    }

    /// Why the health check fails, if it does: with
    /// HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED, no configuration with a
    /// domain in it (as the reference counts one), or, with
    /// REDIS_HEALTH_CHECK_ACTIVE_CONNECTION, no answer from Redis.
    pub async fn unhealthy(&self) -> Option<&'static str> {
        let loaded = self.snapshot().is_some_and(|config| config.domains() > 0);
        if !loaded && self.settings.healthy_needs_config {
            return Some("no configuration loaded");
        }
        if self.settings.health_checks_redis && !self.backend.ping().await {
            return Some("Redis does not answer");
        }
        None
    }

    pub fn has_config(&self) -> bool {
        self.config
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
    }

    fn snapshot(&self) -> Option<Arc<Config>> {
        self.config
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The Redis key of a descriptor's log, as the reference makes its
    /// counters' keys but without the window's start: the prefix, the
    /// domain, and each entry's key and value (or the shared wildcard).
    fn log_key(&self, domain: &str, descriptor: &RateLimitDescriptor, limit: &RateLimit) -> String {
        let mut key = format!("{}{domain}_", self.settings.key_prefix);
        for (i, entry) in descriptor.entries.iter().enumerate() {
            key.push_str(&entry.key);
            key.push('_');
            match limit.shared_values.get(i).and_then(Option::as_ref) {
                Some(pattern) => key.push_str(pattern),
                None => key.push_str(&entry.value),
            }
            key.push('_');
        }
        key.push_str("swl");
        key
    }

    pub async fn should_rate_limit(
        &self,
        request: RateLimitRequest,
    ) -> Result<RateLimitResponse, Status> {
        let answer = self.decide(&request).await;
        if let Err(status) = &answer {
            let kind = if status.message().starts_with("redis: ") {
                "redis_error"
            } else {
                "service_error"
            };
            self.stats.add(
                &format!("ratelimit.service.call.should_rate_limit.{kind}"),
                1,
            );
            crate::log::debug(&format!("refused a call: {}", status.message()));
        }
        answer
    }

    async fn decide(&self, request: &RateLimitRequest) -> Result<RateLimitResponse, Status> {
        crate::log::debug(&format!("ShouldRateLimit: {request:?}"));
        if request.domain.is_empty() {
            return Err(invalid("rate limit domain must not be empty"));
        }
        if request.descriptors.is_empty() {
            return Err(invalid("rate limit descriptor list must not be empty"));
        }
        if request.descriptors.len() > MAX_DESCRIPTORS {
            return Err(invalid(format!(
                "at most {MAX_DESCRIPTORS} descriptors a request, not {}",
                request.descriptors.len()
            )));
        }
        let config = self
            .snapshot()
            .ok_or_else(|| Status::unavailable("no rate limit configuration loaded"))?;
        let domain = request.domain.as_str();
        let count_descriptors = request.descriptors.len();
        let mut limits: Vec<Option<RateLimit>> = Vec::with_capacity(count_descriptors);
        let mut unlimited = vec![false; count_descriptors];
        let mut replaced = std::collections::HashSet::new();
        for (i, descriptor) in request.descriptors.iter().enumerate() {
            let entries: Vec<(&str, &str)> = descriptor
                .entries
                .iter()
                .map(|e| (e.key.as_str(), e.value.as_str()))
                .collect();
            // An unknown domain has no limits, not even a descriptor's own,
            // as the reference has it.
            let limit = if !config.has_domain(domain) {
                self.stats.add(
                    &format!(
                        "ratelimit.service.rate_limit.{}.domain_not_found",
                        crate::stats::sanitize(domain)
                    ),
                    1,
                );
                None
            } else {
                match &descriptor.limit {
                    Some(own) => Some(
                        override_limit(domain, &entries, own.requests_per_unit, own.unit)
                            .ok_or_else(|| {
                                invalid(format!(
                                    "descriptor {i}: its limit's unit {} is not one of SECOND to YEAR",
                                    own.unit
                                ))
                            })?,
                    ),
                    None if entries.is_empty() => None,
                    None => config.lookup(domain, &entries),
                }
            };
            if let Some(limit) = &limit {
                replaced.extend(limit.replaces.iter().cloned());
                if limit.unlimited {
                    unlimited[i] = true;
                }
            }
            limits.push(limit.filter(|l| !l.unlimited));
        }
        for limit in &mut limits {
            if limit
                .as_ref()
                .is_some_and(|l| !l.name.is_empty() && replaced.contains(&l.name))
            {
                *limit = None;
            }
        }
        let mut planned = Vec::new();
        for (index, (descriptor, limit)) in request.descriptors.iter().zip(limits).enumerate() {
            let Some(limit) = limit else { continue };
            let key = self.log_key(domain, descriptor, &limit);
            if key.len() > MAX_KEY_BYTES {
                return Err(invalid(format!(
                    "descriptor {index} makes a key of {} bytes, over {MAX_KEY_BYTES}",
                    key.len()
                )));
            }
            let hits = match &descriptor.hits_addend {
                Some(own) => own.value,
                None => u64::from(request.hits_addend.max(1)),
            };
            let quota = self.settings.quota_mode || limit.quota_mode;
            // Quotas are charged for what was served (a charge after the
            // response), so their hits count over the limit too, and stay.
            let forced = hits > 0 && (quota || self.settings.refused == Refused::CountsEverywhere);
            planned.push(Planned {
                index,
                limit,
                key,
                hits,
                quota,
                forced,
            });
        }
        let results = join_all(
            planned
                .iter()
                .map(|p| apply(&self.backend, &p.key, &p.limit.windows, p.hits, p.forced)),
        )
        .await;
        // What each descriptor recorded, also where a later call failed.
        let recorded: Vec<u64> = results
            .iter()
            .map(|result| match result {
                Ok(outcome) => outcome.recorded,
                Err(failed) => failed.recorded,
            })
            .collect();
        let mut outcomes = Vec::with_capacity(results.len());
        for result in results {
            match result {
                Ok(outcome) => outcomes.push(outcome),
                Err(failed) => {
                    // Nothing half-recorded: what was recorded is given
                    // back (a call that timed out may or may not have been).
                    self.give_back_all(&planned, &recorded).await;
                    crate::log::warn(&format!("redis: {}", failed.error));
                    return Err(Status::unavailable(format!("redis: {}", failed.error)));
                }
            }
        }

        let mut statuses: Vec<DescriptorStatus> = (0..count_descriptors)
            .map(|i| DescriptorStatus {
                code: Code::Ok as i32,
                limit_remaining: if unlimited[i] { u32::MAX } else { 0 },
                ..DescriptorStatus::default()
            })
            .collect();
        let mut failed_limits = 0;
        let mut failed_quotas = 0;
        let mut quotas = 0;
        let mut passed = Vec::new();
        let mut binding: Option<(usize, u64)> = None;
        for (p, outcome) in planned.iter().zip(&outcomes) {
            let over = !outcome.allowed;
            let hits = count(
                outcome.limit,
                self.settings.near_limit_ratio,
                outcome.before,
                p.hits,
                over,
                p.limit.shadow_mode,
            );
            self.stats.add_hits(&p.limit.stats_key, hits);
            let window = p
                .limit
                .windows
                .iter()
                .find(|w| w.window_ms == outcome.window_ms)
                .copied()
                .unwrap_or(Window {
                    window_ms: outcome.window_ms,
                    limit: outcome.limit,
                    unit: UNKNOWN_UNIT,
                });
            let until_reset_ms = if over && outcome.retry_after_ms >= 0 {
                outcome.retry_after_ms
            } else {
                outcome
                    .reset_after_ms
                    .min(i64::try_from(outcome.window_ms).unwrap_or(i64::MAX))
            };
            let code = if over && !p.limit.shadow_mode {
                Code::OverLimit
            } else {
                Code::Ok
            };
            statuses[p.index] = DescriptorStatus {
                code: code as i32,
                current_limit: Some(StatusLimit {
                    name: p.limit.name.clone(),
                    requests_per_unit: u32::try_from(window.limit).unwrap_or(u32::MAX),
                    unit: window.unit,
                }),
                // Over the limit, nothing is left, as the reference says.
                limit_remaining: if over {
                    0
                } else {
                    u32::try_from(outcome.remaining).unwrap_or(u32::MAX)
                },
                duration_until_reset: Some(envoy_types::pb::google::protobuf::Duration {
                    seconds: (until_reset_ms.max(0) + 999) / 1000,
                    nanos: 0,
                }),
                quota: None,
            };
            if code == Code::OverLimit {
                if p.quota {
                    failed_quotas += 1;
                } else {
                    failed_limits += 1;
                    binding = Some((p.index, 0));
                }
            } else {
                passed.push(p.index);
            }
            if p.quota {
                quotas += 1;
            }
            if failed_limits == 0 && binding.is_none_or(|(_, least)| outcome.remaining < least) {
                binding = Some((p.index, outcome.remaining));
            }
        }
        if self.settings.quota_mode {
            // Every descriptor that is not unlimited is a quota then, with
            // a limit or without, as the reference counts them.
            quotas = unlimited.iter().filter(|&&u| !u).count();
        }
        let refused = failed_limits > 0 || (quotas > 0 && quotas == failed_quotas);
        let mut overall = if refused { Code::OverLimit } else { Code::Ok };
        if refused && self.settings.shadow_mode {
            overall = Code::Ok;
            self.stats.add("ratelimit.service.global_shadow_mode", 1);
        }
        if overall == Code::OverLimit {
            self.give_back_all(&planned, &recorded).await;
        }
        let mut response = RateLimitResponse {
            overall_code: overall as i32,
            ..RateLimitResponse::default()
        };
        if let (Some(names), Some((index, _))) = (&self.settings.headers, binding) {
            if let Some(at) = planned.iter().position(|p| p.index == index) {
                response.response_headers_to_add = headers(
                    names,
                    &statuses[index],
                    &outcomes[at],
                    overall == Code::OverLimit,
                );
            }
        }
        if self.settings.dynamic_metadata {
            response.dynamic_metadata = Some(metadata(request, &passed, &planned));
        }
        response.statuses = statuses;
        Ok(response)
    }

    /// Gives back what each planned descriptor `recorded`, but for forced
    /// ones (a quota's charge stays).
    async fn give_back_all(&self, planned: &[Planned], recorded: &[u64]) {
        let refunds = planned
            .iter()
            .zip(recorded)
            .filter(|(p, &recorded)| !p.forced && recorded > 0)
            .map(|(p, &recorded)| give_back(&self.backend, &p.key, &p.limit.windows, recorded));
        for result in join_all(refunds).await {
            if let Err(error) = result {
                crate::log::error(&format!(
                    "giving back a refused request's hits failed: {error}"
                ));
            }
        }
    }
}

/// The reference's three headers (limit, remaining, seconds to reset) under
/// the configured names, the draft's `RateLimit-Policy` and `RateLimit`,
/// and `Retry-After` on a refusal, all of the binding descriptor.
fn headers(
    names: &[String; 3],
    status: &DescriptorStatus,
    outcome: &Outcome,
    refused: bool,
) -> Vec<HeaderValue> {
    let header = |key: &str, value: String| HeaderValue {
        key: key.to_string(),
        value,
        ..HeaderValue::default()
    };
    let limit = status
        .current_limit
        .as_ref()
        .map_or(0, |l| l.requests_per_unit);
    let reset = status.duration_until_reset.map_or(0, |d| d.seconds);
    let mut list = vec![
        header(&names[0], limit.to_string()),
        header(&names[1], status.limit_remaining.to_string()),
        header(&names[2], reset.to_string()),
    ];
    // Retry-After goes with a refusal only, not with a quota that is over
    // while the request passes.
    let verdict = Verdict {
        allowed: !refused,
        limit: outcome.limit,
        remaining: u64::from(status.limit_remaining),
        retry_after_ms: outcome.retry_after_ms,
        reset_after_ms: outcome.reset_after_ms,
        window_ms: outcome.window_ms,
        oldest_after_ms: None,
    };
    list.extend(
        rate_limit_headers(&verdict)
            .into_iter()
            .map(|(name, value)| header(name, value)),
    );
    list
}

fn string(text: impl Into<String>) -> Value {
    Value {
        kind: Some(Kind::StringValue(text.into())),
    }
}

fn number(n: f64) -> Value {
    Value {
        kind: Some(Kind::NumberValue(n)),
    }
}

fn list(values: Vec<Value>) -> Value {
    Value {
        kind: Some(Kind::ListValue(ListValue { values })),
    }
}

/// Dynamic metadata as the reference gives it: the domain, each
/// descriptor's entries (and limit and hits), the request's hits, and the
/// metadata of the descriptors that passed, merged.
fn metadata(request: &RateLimitRequest, passed: &[usize], planned: &[Planned]) -> Struct {
    let mut fields = std::collections::HashMap::new();
    fields.insert("domain".to_string(), string(request.domain.clone()));
    let descriptors = request
        .descriptors
        .iter()
        .map(|d| {
            let mut own = std::collections::HashMap::new();
            own.insert(
                "entries".to_string(),
                list(
                    d.entries
                        .iter()
                        .map(|e| string(format!("{}={}", e.key, e.value)))
                        .collect(),
                ),
            );
            if let Some(limit) = &d.limit {
                own.insert(
                    "limit".to_string(),
                    string(format!(
                        "requests_per_unit:{} unit:{}",
                        limit.requests_per_unit,
                        crate::config::unit_name(limit.unit)
                    )),
                );
            }
            if let Some(hits) = &d.hits_addend {
                own.insert("hitsAddend".to_string(), number(hits.value as f64));
            }
            Value {
                kind: Some(Kind::StructValue(Struct { fields: own })),
            }
        })
        .collect();
    fields.insert("descriptors".to_string(), list(descriptors));
    if request.hits_addend != 0 {
        fields.insert(
            "hitsAddend".to_string(),
            number(f64::from(request.hits_addend)),
        );
    }
    let mut merged = Struct::default();
    for p in planned.iter().filter(|p| passed.contains(&p.index)) {
        if let Some(own) = &p.limit.metadata {
            merge(&mut merged, own);
        }
    }
    if !merged.fields.is_empty() {
        fields.insert(
            "metadata".to_string(),
            Value {
                kind: Some(Kind::StructValue(merged)),
            },
        );
    }
    Struct { fields }
}

/// Adds `from`'s fields to `into`'s: structs merge, anything else already
/// there stays.
fn merge(into: &mut Struct, from: &Struct) {
    for (key, value) in &from.fields {
        match (into.fields.get_mut(key), &value.kind) {
            (
                Some(Value {
                    kind: Some(Kind::StructValue(inner)),
                }),
                Some(Kind::StructValue(more)),
            ) => merge(inner, more),
            (Some(_), _) => {}
            (None, _) => {
                into.fields.insert(key.clone(), value.clone());
            }
        }
    }
}
