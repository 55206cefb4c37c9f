//! DescribeConfigs (key 32), versions 0-4 (v0 says `is_default` where later
//! versions give the source, and has no synonyms): a topic's effective configuration (Kafka
//! names and values; the settings the topic overrides have source DYNAMIC_TOPIC_CONFIG,
//! the others DEFAULT_CONFIG); a broker resource answers the dynamic broker configs, a
//! single node's or its cluster's (DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG
//! or DEFAULT_CONFIG; see `broker_configs.rs`), and for this node's id also the
//! read-only ones it was started with (`static_broker_configs.rs`), with synonyms and
//! documentation when asked.
//!
//! As in Kafka: a topic with an invalid name is INVALID_TOPIC_EXCEPTION, an unknown one
//! UNKNOWN_TOPIC_OR_PARTITION; a broker resource must name this node's id (or be empty),
//! else INVALID_REQUEST, as must the resource type.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult,
};
use kafka_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse};

use super::alter_configs::IGNORED_TOPIC_CONFIGS;
use super::{Ctx, Fatal, NODE_ID, Reply, Request, broker_configs, error_code, kstr};
use crate::security::acl::{AclOperation, CLUSTER_RESOURCE_NAME, ResourceType};

/// Resource type of a topic.
const TOPIC: i8 = 2;
/// Resource type of a broker.
const BROKER: i8 = 4;
/// `config_source` DEFAULT_CONFIG.
const DEFAULT_CONFIG: i8 = 5;
/// `config_source` DYNAMIC_TOPIC_CONFIG: a setting the topic overrides.
const TOPIC_CONFIG: i8 = 1;
/// Resource type of a group (KIP-848's dynamic group configs).
pub(super) const GROUP: i8 = 32;
/// `config_source` GROUP_CONFIG: a setting the group overrides.
const GROUP_CONFIG: i8 = 8;

/// Settings as (name, value) pairs.
type Settings = Vec<(String, String)>;

/// A topic's effective settings as DescribeConfigs lists them (with the ones Kafka 3.x
/// ignores, at their defaults), and the settings it overrides.
pub(super) fn topic_configs(
    ctx: &Ctx<'_>,
    topic: &str,
) -> crate::error::Result<(Settings, Settings)> {
    let mut pairs = ctx.backend().topic_configs(topic)?;
    let overridden = ctx.backend().topic_overrides(topic)?;
    for (k, v) in IGNORED_TOPIC_CONFIGS {
        if !pairs.iter().any(|(p, _)| p == k) {
            pairs.push((k.to_string(), v.to_string()));
        }
    }
    Ok((pairs, overridden))
}

/// The `config_source` of a setting: DYNAMIC_TOPIC_CONFIG if the topic overrides it.
pub(super) fn config_source(name: &str, overridden: &[(String, String)]) -> i8 {
    if overridden.iter().any(|(o, _)| o == name) {
        TOPIC_CONFIG
    } else {
        DEFAULT_CONFIG
    }
}

/// A group's settings as DescribeConfigs lists them, and the ones it overrides (a
/// single node's from its data directory, a cluster node's from the metadata image); a
/// backend that keeps no group configs answers INVALID_REQUEST.
fn group_configs(ctx: &Ctx<'_>, group: &str) -> Result<(Settings, Settings), (i16, String)> {
    let store = ctx.backend().group_configs().ok_or_else(|| {
        (
            ResponseError::InvalidRequest.code(),
            format!("group {group:?}: this server keeps no group configs"),
        )
    })?;
    let mut pairs = Vec::new();
    let mut overridden = Vec::new();
    for (k, v, set) in store.describe(group) {
        if set {
            overridden.push((k.clone(), v.clone()));
        }
        pairs.push((k, v));
    }
    Ok((pairs, overridden))
}

pub(super) fn handle(ctx: &Ctx<'_>, req: &mut Request) -> Result<Reply, Fatal> {
    let request: DescribeConfigsRequest = req.decode()?;
    let (synonyms, documentation) = (request.include_synonyms, request.include_documentation);
    let results = request
        .resources
        .into_iter()
        .map(|r| {
            let result = DescribeConfigsResult::default()
                .with_resource_type(r.resource_type)
                .with_resource_name(r.resource_name.clone());
            let mut overridden = Vec::new();
            let (kind, name) = match r.resource_type {
                BROKER => (ResourceType::Cluster, CLUSTER_RESOURCE_NAME),
                GROUP => (ResourceType::Group, r.resource_name.as_str()),
                _ => (ResourceType::Topic, r.resource_name.as_str()),
            };
            let allowed = ctx.check(AclOperation::DescribeConfigs, kind, name);
            let pairs = match r.resource_type {
                _ if allowed.is_err() => allowed.map(|()| Vec::new()),
                TOPIC => crate::config::validate_topic_name(&r.resource_name)
                    .and_then(|()| topic_configs(ctx, &r.resource_name))
                    .map(|(pairs, o)| {
                        overridden = o;
                        pairs
                    })
                    .map_err(|e| (error_code(&e), e.to_string())),
                BROKER => Ok(Vec::new()),
                GROUP => group_configs(ctx, &r.resource_name).map(|(pairs, o)| {
                    overridden = o;
                    pairs
                }),
                other => Err((
                    ResponseError::InvalidRequest.code(),
                    format!("resource type {other} is not supported"),
                )),
            };
            let override_source = if r.resource_type == GROUP {
                GROUP_CONFIG
            } else {
                TOPIC_CONFIG
            };
            let configs = pairs.and_then(|pairs| {
                if r.resource_type == BROKER {
                    return broker(ctx, r.resource_name.as_str(), synonyms, documentation);
                }
                Ok(pairs
                    .into_iter()
                    .map(|(k, v)| {
                        let source = match config_source(&k, &overridden) {
                            TOPIC_CONFIG => override_source,
                            default => default,
                        };
                        DescribeConfigsResourceResult::default()
                            .with_name(kstr(k))
                            .with_value(Some(kstr(v)))
                            .with_config_source(source)
                    })
                    .collect())
            });
            match configs {
                Ok(configs) => result.with_configs(
                    configs
                        .into_iter()
                        .filter(|c| {
                            r.configuration_keys
                                .as_ref()
                                .is_none_or(|keys| keys.contains(&c.name))
                        })
                        .collect(),
                ),
                Err((code, message)) => result
                    .with_error_code(code)
                    .with_error_message(Some(kstr(message))),
            }
        })
        .collect();
    req.respond(&DescribeConfigsResponse::default().with_results(results))
}

/// The configs of broker resource `name`: this node's id, or "" (the cluster-wide
/// default level); another broker's id is INVALID_REQUEST, as Kafka answers a broker
/// resource only on that broker.
fn broker(
    ctx: &Ctx<'_>,
    name: &str,
    synonyms: bool,
    documentation: bool,
) -> Result<Vec<DescribeConfigsResourceResult>, (i16, String)> {
    let id = ctx.backend().cluster().map_or(NODE_ID, |c| c.node_id());
    if !(name.is_empty() || name.parse::<i32>() == Ok(id)) {
        return Err((
            ResponseError::InvalidRequest.code(),
            format!("unexpected broker id {name:?}: this is broker {id}"),
        ));
    }
    let kept = broker_configs::kept(ctx);
    broker_configs::describe(ctx, kept.as_ref(), name, synonyms, documentation)
}
