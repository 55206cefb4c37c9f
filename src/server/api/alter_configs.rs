//! AlterConfigs (key 33), versions 0-2: replace a topic's configuration overrides (the
//! settings not given go back to the broker's defaults, as in Kafka).
//!
//! Per resource: a topic that does not exist is UNKNOWN_TOPIC_OR_PARTITION; an unknown
//! setting or a bad value INVALID_CONFIG (Kafka's names: `cleanup.policy`,
//! `retention.ms`, `min.insync.replicas`, `compression.type`, ...); a null value, a
//! setting named twice, a resource named twice or an unknown resource type
//! INVALID_REQUEST. A BROKER resource sets the dynamic broker configs (see
//! `broker_configs.rs`): the settings given, the others removed. `validate_only` checks
//! without changing anything. `message.format.version` is accepted and ignored, with a
//! warning, as Kafka 3.x does. Shared with IncrementalAlterConfigs: [`alter`].

use std::collections::HashMap;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{AlterConfigsRequest, AlterConfigsResponse};

use super::{Ctx, Fatal, Reply, Request, broker_configs, error_code, kstr};
use crate::security::acl::{AclOperation, ResourceType};

/// Resource type of a topic.
pub(super) const TOPIC: i8 = 2;
/// Resource type of a broker.
pub(super) const BROKER: i8 = 4;

/// A refusal: Kafka error code and message.
pub(super) type Refusal = (i16, String);

pub(super) fn invalid_request(message: String) -> Refusal {
    (ResponseError::InvalidRequest.code(), message)
}

/// How many times each `(type, name)` resource appears in a request.
pub(super) fn resource_counts<'a>(
    resources: impl Iterator<Item = (i8, &'a str)>,
) -> HashMap<(i8, String), usize> {
    let mut seen = HashMap::new();
    for (t, n) in resources {
        *seen.entry((t, n.to_string())).or_default() += 1;
    }
    seen
}

/// INVALID_REQUEST for a resource named more than once in a request.
pub(super) fn appears_once(
    counts: &HashMap<(i8, String), usize>,
    resource_type: i8,
    name: &str,
) -> Result<(), Refusal> {
    if counts[&(resource_type, name.to_string())] > 1 {
        return Err(invalid_request(format!(
            "resource {name:?} appears more than once in the request"
        )));
    }
    Ok(())
}

/// The checks every resource of both APIs passes before its settings are looked at:
/// appears once, is a topic.
pub(super) fn check_resource(
    counts: &HashMap<(i8, String), usize>,
    resource_type: i8,
    name: &str,
) -> Result<(), Refusal> {
    appears_once(counts, resource_type, name)?;
    match resource_type {
        TOPIC => Ok(()),
        BROKER => Err(invalid_request(format!(
            "broker {name:?}: broker settings cannot be changed while the broker runs"
        ))),
        other => Err(invalid_request(format!(
            "resource type {other} is not supported"
        ))),
    }
}

/// Computes a topic's new overrides from its current ones with `change` and applies
/// them (or, with `validate_only`, checks them).
pub(super) fn alter(
    ctx: &Ctx<'_>,
    topic: &str,
    validate_only: bool,
    change: impl FnOnce(Vec<(String, String)>) -> Result<Vec<(String, String)>, Refusal>,
) -> Result<(), Refusal> {
    let backend = ctx.backend();
    let current = backend
        .topic_overrides(topic)
        .map_err(|e| (error_code(&e), e.to_string()))?;
    let next = change(current)?;
    backend
        .alter_topic_config(topic, &next, validate_only)
        .map_err(|e| (error_code(&e), e.to_string()))?;
    if !validate_only {
        tracing::info!(peer = %ctx.peer, topic, "topic config altered");
    }
    Ok(())
}

/// Topic settings Kafka 3.x accepts and ignores, with the value its DescribeConfigs
/// shows: `message.format.version` (deprecated in 3.0, where every record batch is v2).
pub(super) const IGNORED_TOPIC_CONFIGS: &[(&str, &str)] = &[("message.format.version", "3.0-IV1")];

/// True for a setting of [`IGNORED_TOPIC_CONFIGS`].
pub(super) fn is_ignored(key: &str) -> bool {
    IGNORED_TOPIC_CONFIGS.iter().any(|(k, _)| *k == key)
}

/// `configs` without the ignored settings, each dropped one logged at warn with the
/// topic and the client's address.
pub(super) fn without_ignored(
    peer: std::net::SocketAddr,
    topic: &str,
    mut configs: Vec<(String, String)>,
) -> Vec<(String, String)> {
    configs.retain(|(key, value)| {
        if !is_ignored(key) {
            return true;
        }
        tracing::warn!(
            %peer,
            topic,
            "ignoring {key}={value}: deprecated since Kafka 3.0, which ignores it (record batches are always v2)"
        );
        false
    });
    configs
}

/// The error for a setting named twice in one resource.
pub(super) fn duplicate_key<'a>(mut keys: impl Iterator<Item = &'a str>) -> Option<Refusal> {
    let mut seen = std::collections::HashSet::new();
    keys.find(|k| !seen.insert(*k))
        .map(|k| invalid_request(format!("setting {k:?} appears more than once")))
}

pub(super) fn handle(ctx: &Ctx<'_>, req: &mut Request) -> Result<Reply, Fatal> {
    let request: AlterConfigsRequest = req.decode()?;
    let counts = resource_counts(
        request
            .resources
            .iter()
            .map(|r| (r.resource_type, r.resource_name.as_str())),
    );
    let responses = request
        .resources
        .iter()
        .map(|r| {
            let name = r.resource_name.as_str();
            let keys = || duplicate_key(r.configs.iter().map(|c| c.name.as_str()));
            let outcome = if r.resource_type == BROKER && broker_configs::kept(ctx).is_some() {
                // Every setting given, the others removed.
                appears_once(&counts, BROKER, name).and_then(|()| {
                    keys().map_or(Ok(()), Err)?;
                    broker_configs::alter(ctx, name, request.validate_only, |current| {
                        let given: Vec<_> = r
                            .configs
                            .iter()
                            .map(|c| (c.name.to_string(), c.value.as_ref().map(|v| v.to_string())))
                            .collect();
                        let removed = current
                            .keys()
                            .filter(|k| !given.iter().any(|(g, _)| g == *k))
                            .map(|k| (k.clone(), None));
                        Ok(given.iter().cloned().chain(removed).collect())
                    })
                })
            } else {
                check_resource(&counts, r.resource_type, name)
                .and_then(|()| ctx.check(AclOperation::AlterConfigs, ResourceType::Topic, name))
                .and_then(|()| {
                    if let Some(refusal) = keys()
                    {
                        return Err(refusal);
                    }
                    let mut overrides = Vec::with_capacity(r.configs.len());
                    for c in &r.configs {
                        let Some(v) = &c.value else {
                            return Err(invalid_request(format!(
                                "null value for {:?}: AlterConfigs sets every override it names",
                                c.name.as_str()
                            )));
                        };
                        overrides.push((c.name.to_string(), v.to_string()));
                    }
                    let overrides = without_ignored(ctx.peer, name, overrides);
                    alter(ctx, name, request.validate_only, |_| Ok(overrides))
                })
            };
            let response = AlterConfigsResourceResponse::default()
                .with_resource_type(r.resource_type)
                .with_resource_name(r.resource_name.clone());
            match outcome {
                Ok(()) => response.with_error_message(None),
                Err((code, message)) => response
                    .with_error_code(code)
                    .with_error_message(Some(kstr(message))),
            }
        })
        .collect();
    req.respond(&AlterConfigsResponse::default().with_responses(responses))
}
