//! Dynamic broker configs through AlterConfigs, IncrementalAlterConfigs and
//! DescribeConfigs (BROKER resources, type 4): KIP-73's replication throttle rates
//! (`leader.replication.throttled.rate`, `follower.replication.throttled.rate`) and the
//! pace of moves between log directories
//! (`replica.alter.log.dirs.io.max.bytes.per.second`), per broker id or cluster-wide
//! (resource name ""), kept in the cluster's metadata, or on a single node in its data
//! directory (`node_broker_configs.rs`).
//!
//! As in Kafka: a resource name that is not empty or a broker id is INVALID_REQUEST (on
//! a single node, also another broker's id); a broker config that cannot be changed
//! while the broker runs, or a bad value, INVALID_CONFIG; changing them needs
//! ALTER_CONFIGS on the cluster, describing them DESCRIBE_CONFIGS on the cluster.

use std::collections::BTreeMap;

use super::alter_configs::{Refusal, invalid_request};
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsSynonym,
};

use super::static_broker_configs::{LONG, static_configs};
use super::{Ctx, NODE_ID, error_code, kstr};
use crate::cluster::image::{
    BrokerConfigSource, BrokerConfigs, DYNAMIC_BROKER_KEYS, FOLLOWER_THROTTLED_RATE,
    LEADER_THROTTLED_RATE, UNTHROTTLED,
};
use crate::security::acl::{AclOperation, CLUSTER_RESOURCE_NAME, ResourceType};

/// DescribeConfigs `config_source` DYNAMIC_BROKER_CONFIG.
const DYNAMIC_BROKER_CONFIG: i8 = 2;
/// DescribeConfigs `config_source` DYNAMIC_DEFAULT_BROKER_CONFIG.
const DYNAMIC_DEFAULT_BROKER_CONFIG: i8 = 3;
/// DescribeConfigs `config_source` DEFAULT_CONFIG.
const DEFAULT_CONFIG: i8 = 5;

/// The broker a BROKER resource names: None for "" (the cluster-wide default).
fn broker_of(name: &str) -> Result<Option<i32>, Refusal> {
    if name.is_empty() {
        return Ok(None);
    }
    match name.parse::<i32>() {
        Ok(id) if id >= 0 => Ok(Some(id)),
        _ => Err(invalid_request(format!(
            "broker resource {name:?} is not a broker id (or \"\" for the cluster-wide default)"
        ))),
    }
}

/// The broker configs this node keeps: a single node's, or its cluster's.
pub(super) fn kept(ctx: &Ctx<'_>) -> Option<BrokerConfigs> {
    match ctx.backend().node_broker_configs() {
        Some(node) => Some(node.configs()),
        None => ctx.backend().cluster()?.broker_configs(),
    }
}

/// Alters the broker configs of resource `name`: `changes` computes the changes (each
/// key with its new value, or None to remove it) from the resource's current settings.
pub(super) fn alter(
    ctx: &Ctx<'_>,
    name: &str,
    validate_only: bool,
    changes: impl FnOnce(&BTreeMap<String, String>) -> Result<Vec<(String, Option<String>)>, Refusal>,
) -> Result<(), Refusal> {
    let broker = broker_of(name)?;
    ctx.check(
        AclOperation::AlterConfigs,
        ResourceType::Cluster,
        CLUSTER_RESOURCE_NAME,
    )?;
    let current = |configs: BrokerConfigs| configs.0.get(&broker).cloned().unwrap_or_default();
    let altered = if let Some(node) = ctx.backend().node_broker_configs() {
        if broker.is_some_and(|b| b != NODE_ID) {
            return Err(invalid_request(format!(
                "unexpected broker id {name:?}: this is broker {NODE_ID}"
            )));
        }
        let changes = changes(&current(node.configs()))?;
        node.alter(NODE_ID, broker, &changes, validate_only)
    } else if let (Some(cluster), Some(configs)) = (ctx.backend().cluster(), kept(ctx)) {
        let changes = changes(&current(configs))?;
        cluster.alter_broker_config(
            broker,
            changes,
            validate_only,
            crate::cluster::ADMIN_TIMEOUT,
        )
    } else {
        return Err(invalid_request(format!(
            "broker {name:?}: broker settings cannot be changed while the broker runs"
        )));
    };
    altered.map_err(|e| (error_code(&e), e.to_string()))?;
    if !validate_only {
        tracing::info!(peer = %ctx.peer, broker = name, "broker config altered");
    }
    Ok(())
}

/// DescribeConfigs `config_source` STATIC_BROKER_CONFIG.
const STATIC_BROKER_CONFIG: i8 = 4;

/// What each dynamic key is, for `include_documentation`.
fn dynamic_doc(key: &str) -> &'static str {
    match key {
        LEADER_THROTTLED_RATE => {
            "Bytes/s a leader sends to followers of its leader-throttled replicas."
        }
        FOLLOWER_THROTTLED_RATE => {
            "Bytes/s a follower fetches for its follower-throttled replicas."
        }
        _ => "Bytes/s a move between this node's log directories copies at most.",
    }
}

/// A synonym of a config.
fn synonym(name: &str, value: Option<String>, source: i8) -> DescribeConfigsSynonym {
    DescribeConfigsSynonym::default()
        .with_name(kstr(name.to_string()))
        .with_value(value.map(kstr))
        .with_source(source)
}

/// The broker configs of resource `name` as DescribeConfigs lists them (Kafka's
/// ConfigHelper): for this node's id, its read-only configs (`static_broker_configs.rs`)
/// and the dynamic ones; for "" (the cluster-wide default level), the dynamic ones.
/// Each with its source, its synonyms (when `synonyms`: the broker's own dynamic value,
/// the cluster-wide one, the static one, the default, those that are set) and its
/// documentation (when `documentation`).
pub(super) fn describe(
    ctx: &Ctx<'_>,
    configs: Option<&BrokerConfigs>,
    name: &str,
    synonyms: bool,
    documentation: bool,
) -> Result<Vec<DescribeConfigsResourceResult>, Refusal> {
    let broker = broker_of(name)?;
    let mut out = Vec::new();
    if let Some(configs) = configs {
        out.extend(
            DYNAMIC_BROKER_KEYS
                .iter()
                .map(|key| dynamic_entry(configs, broker, key, documentation)),
        );
    }
    if broker.is_some() {
        for c in static_configs(ctx) {
            let mut all = Vec::new();
            if !c.is_default() {
                all.push(synonym(c.name, c.value.clone(), STATIC_BROKER_CONFIG));
            }
            if let Some((default_name, v)) = &c.default {
                all.push(synonym(default_name, v.clone(), DEFAULT_CONFIG));
            }
            let source = all.first().map_or(DEFAULT_CONFIG, |s| s.source);
            let value = if c.sensitive { None } else { c.value.clone() };
            if c.sensitive {
                for s in &mut all {
                    s.value = None;
                }
            }
            out.push(
                entry(c.name, value, source, all, c.config_type)
                    .with_read_only(true)
                    .with_is_sensitive(c.sensitive)
                    .with_documentation(documentation.then(|| kstr(c.doc.to_string()))),
            );
        }
    }
    if !synonyms {
        for e in &mut out {
            e.synonyms.clear();
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// A dynamic key's entry for `broker` (None: the cluster-wide default level).
fn dynamic_entry(
    configs: &BrokerConfigs,
    broker: Option<i32>,
    key: &str,
    documentation: bool,
) -> DescribeConfigsResourceResult {
    let at = |b: Option<i32>| configs.0.get(&b).and_then(|m| m.get(key)).cloned();
    let mut all = Vec::new();
    if let Some(v) = broker.and_then(|b| at(Some(b))) {
        all.push(synonym(key, Some(v), DYNAMIC_BROKER_CONFIG));
    }
    if let Some(v) = at(None) {
        all.push(synonym(key, Some(v), DYNAMIC_DEFAULT_BROKER_CONFIG));
    }
    all.push(synonym(key, Some(UNTHROTTLED.to_string()), DEFAULT_CONFIG));
    let (value, source) = configs.value(broker, key);
    let source = match source {
        BrokerConfigSource::Broker => DYNAMIC_BROKER_CONFIG,
        BrokerConfigSource::ClusterDefault => DYNAMIC_DEFAULT_BROKER_CONFIG,
        BrokerConfigSource::Default => DEFAULT_CONFIG,
    };
    entry(key, Some(value), source, all, LONG)
        .with_read_only(false)
        .with_documentation(documentation.then(|| kstr(dynamic_doc(key).to_string())))
}

/// One config's entry.
fn entry(
    name: &str,
    value: Option<String>,
    source: i8,
    synonyms: Vec<DescribeConfigsSynonym>,
    config_type: i8,
) -> DescribeConfigsResourceResult {
    DescribeConfigsResourceResult::default()
        .with_name(kstr(name.to_string()))
        .with_value(value.map(kstr))
        .with_config_source(source)
        .with_synonyms(synonyms)
        .with_config_type(config_type)
}
