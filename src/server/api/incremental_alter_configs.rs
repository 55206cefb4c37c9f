//! IncrementalAlterConfigs (key 44), versions 0-1: change some of a topic's settings,
//! keeping the others (`kafka-configs --alter --add-config/--delete-config`).
//!
//! Operations: SET (0) a value, DELETE (1) an override (back to the broker default),
//! APPEND (2) and SUBTRACT (3) items of a list setting (`cleanup.policy`). Per resource,
//! with the error codes of AlterConfigs (see `alter_configs.rs`), plus: an unknown
//! operation or a null value for SET, APPEND or SUBTRACT is INVALID_REQUEST; APPEND or
//! SUBTRACT on a setting that is not a list INVALID_CONFIG, as in Kafka.

use kafka_protocol::ResponseError;
use std::collections::HashMap;

use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse};

use super::alter_configs::{
    BROKER, Refusal, alter, appears_once, check_resource, duplicate_key, invalid_request,
    is_ignored, resource_counts, without_ignored,
};
use super::describe_configs::GROUP;
use super::{Ctx, Fatal, Reply, Request, broker_configs, error_code, kstr};
use crate::security::acl::{AclOperation, ResourceType};

const SET: i8 = 0;
const DELETE: i8 = 1;
const APPEND: i8 = 2;
const SUBTRACT: i8 = 3;

/// Settings whose value is a comma-separated list.
const LIST_SETTINGS: &[&str] = &["cleanup.policy"];

/// IncrementalAlterConfigs of a group (resource type 32): SET and DELETE of the group
/// settings Kafka has (`consumer.session.timeout.ms`, `share.auto.offset.reset`, ...),
/// checked against their bounds, stored durably before the answer (a cluster node
/// proposes them to the controller and answers once it applied them); a backend that
/// keeps no group configs answers INVALID_REQUEST.
fn alter_group(
    ctx: &Ctx<'_>,
    counts: &HashMap<(i8, String), usize>,
    r: &AlterConfigsResource,
    validate_only: bool,
) -> Result<(), Refusal> {
    let name = r.resource_name.as_str();
    if counts[&(GROUP, name.to_string())] > 1 {
        return Err(invalid_request(format!(
            "resource {name:?} appears more than once in the request"
        )));
    }
    ctx.check(AclOperation::AlterConfigs, ResourceType::Group, name)?;
    if let Some(refusal) = duplicate_key(r.configs.iter().map(|c| c.name.as_str())) {
        return Err(refusal);
    }
    let store = ctx.backend().group_configs().ok_or_else(|| {
        invalid_request(format!(
            "group {name:?}: this server keeps no group configs"
        ))
    })?;
    let changes = r
        .configs
        .iter()
        .map(|c| set_or_delete(&format!("group {name:?}"), c))
        .collect::<Result<Vec<_>, Refusal>>()?;
    let done = if validate_only {
        store.validate(name, &changes)
    } else {
        store.apply(name, &changes)
    };
    done.map_err(|e| (error_code(&e), e.to_string()))
}

/// IncrementalAlterConfigs of a cluster's dynamic broker configs: SET and DELETE (the
/// rates are not lists: APPEND and SUBTRACT are INVALID_CONFIG).
fn alter_broker(
    ctx: &Ctx<'_>,
    counts: &HashMap<(i8, String), usize>,
    r: &AlterConfigsResource,
    validate_only: bool,
) -> Result<(), Refusal> {
    let name = r.resource_name.as_str();
    appears_once(counts, BROKER, name)?;
    duplicate_key(r.configs.iter().map(|c| c.name.as_str())).map_or(Ok(()), Err)?;
    broker_configs::alter(ctx, name, validate_only, |_| {
        r.configs
            .iter()
            .map(|c| set_or_delete(&format!("broker {name:?}"), c))
            .collect()
    })
}

/// A SET (with a value) or DELETE of a setting that is not a list, of `resource` (for
/// messages): the key with its new value, or None to remove it.
fn set_or_delete(resource: &str, c: &AlterableConfig) -> Result<(String, Option<String>), Refusal> {
    let key = c.name.to_string();
    match (c.config_operation, &c.value) {
        (SET, Some(v)) => Ok((key, Some(v.to_string()))),
        (DELETE, _) => Ok((key, None)),
        (APPEND | SUBTRACT, _) => Err((
            ResponseError::InvalidConfig.code(),
            format!("{resource}: {key} is not a list setting"),
        )),
        (SET, None) => Err(invalid_request(format!(
            "{resource}: SET of {key} without a value"
        ))),
        (other, _) => Err(invalid_request(format!(
            "{resource}: unknown operation {other} on {key}"
        ))),
    }
}

pub(super) fn handle(ctx: &Ctx<'_>, req: &mut Request) -> Result<Reply, Fatal> {
    let request: IncrementalAlterConfigsRequest = req.decode()?;
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
            let outcome = if r.resource_type == GROUP {
                alter_group(ctx, &counts, r, request.validate_only)
            } else if r.resource_type == BROKER && broker_configs::kept(ctx).is_some() {
                alter_broker(ctx, &counts, r, request.validate_only)
            } else {
                check_resource(&counts, r.resource_type, name)
                    .and_then(|()| ctx.check(AclOperation::AlterConfigs, ResourceType::Topic, name))
                    .and_then(|()| {
                        if let Some(refusal) =
                            duplicate_key(r.configs.iter().map(|c| c.name.as_str()))
                        {
                            return Err(refusal);
                        }
                        let effective = ctx
                            .backend()
                            .topic_configs(name)
                            .map_err(|e| (error_code(&e), e.to_string()))?;
                        alter(ctx, name, request.validate_only, |mut overrides| {
                            for c in &r.configs {
                                if is_ignored(c.name.as_str()) {
                                    let value = c.value.as_deref().unwrap_or_default().to_string();
                                    let configs = vec![(c.name.to_string(), value)];
                                    without_ignored(ctx.peer, name, configs);
                                    continue;
                                }
                                apply(&mut overrides, &effective, c)?;
                            }
                            Ok(overrides)
                        })
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
    req.respond(&IncrementalAlterConfigsResponse::default().with_responses(responses))
}

/// Applies one operation to the overrides; `effective` is the topic's whole current
/// configuration (the base of APPEND and SUBTRACT).
fn apply(
    overrides: &mut Vec<(String, String)>,
    effective: &[(String, String)],
    c: &AlterableConfig,
) -> Result<(), Refusal> {
    let key = c.name.as_str();
    let value = || {
        c.value.as_ref().map(|v| v.to_string()).ok_or_else(|| {
            invalid_request(format!(
                "null value for {key:?} with operation {}",
                c.config_operation
            ))
        })
    };
    let set = |overrides: &mut Vec<(String, String)>, v: String| {
        overrides.retain(|(k, _)| k != key);
        overrides.push((key.to_string(), v));
    };
    match c.config_operation {
        SET => set(overrides, value()?),
        DELETE => overrides.retain(|(k, _)| k != key),
        op @ (APPEND | SUBTRACT) => {
            if !LIST_SETTINGS.contains(&key) {
                return Err((
                    ResponseError::InvalidConfig.code(),
                    format!("{key:?} is not a list: APPEND and SUBTRACT do not apply to it"),
                ));
            }
            let current = overrides
                .iter()
                .chain(effective)
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.clone())
                .unwrap_or_default();
            let mut items: Vec<String> = current
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect();
            let given = value()?;
            for item in given.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                if op == APPEND && !items.iter().any(|i| i == item) {
                    items.push(item.to_string());
                } else if op == SUBTRACT {
                    items.retain(|i| i != item);
                }
            }
            set(overrides, items.join(","));
        }
        other => {
            return Err(invalid_request(format!(
                "unknown config operation {other} for {key:?}"
            )));
        }
    }
    Ok(())
}
