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
use super::{Ctx, NODE_ID, error_code};
use crate::cluster::image::{BrokerConfigSource, BrokerConfigs, DYNAMIC_BROKER_KEYS};
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

/// The dynamic broker configs of resource `name` as DescribeConfigs lists them: name,
/// value and `config_source`.
pub(super) fn describe(
    configs: &BrokerConfigs,
    name: &str,
) -> Result<Vec<(String, String, i8)>, Refusal> {
    let broker = broker_of(name)?;
    Ok(DYNAMIC_BROKER_KEYS
        .iter()
        .map(|key| {
            let (value, source) = configs.value(broker, key);
            let source = match source {
                BrokerConfigSource::Broker => DYNAMIC_BROKER_CONFIG,
                BrokerConfigSource::ClusterDefault => DYNAMIC_DEFAULT_BROKER_CONFIG,
                BrokerConfigSource::Default => DEFAULT_CONFIG,
            };
            (key.to_string(), value, source)
        })
        .collect())
}
