//! Dynamic broker configs of a cluster through AlterConfigs, IncrementalAlterConfigs and
//! DescribeConfigs (BROKER resources, type 4): KIP-73's replication throttle rates
//! (`leader.replication.throttled.rate`, `follower.replication.throttled.rate`), per
//! broker id or cluster-wide (resource name ""), kept in the cluster's metadata.
//!
//! As in Kafka: a resource name that is not empty or a broker id is INVALID_REQUEST; a
//! broker config that cannot be changed while the cluster runs, or a bad value,
//! INVALID_CONFIG; changing them needs ALTER_CONFIGS on the cluster, describing them
//! DESCRIBE_CONFIGS on the cluster. A single node keeps no dynamic broker configs (its
//! BROKER resources are refused as before).

use std::collections::BTreeMap;

use super::alter_configs::{Refusal, invalid_request};
use super::{Ctx, error_code};
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

/// The cluster's broker configs when this node is a cluster node that keeps them.
pub(super) fn kept(ctx: &Ctx<'_>) -> Option<BrokerConfigs> {
    ctx.backend().cluster()?.broker_configs()
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
    let (Some(cluster), Some(configs)) = (ctx.backend().cluster(), kept(ctx)) else {
        return Err(invalid_request(format!(
            "broker {name:?}: broker settings cannot be changed while the broker runs"
        )));
    };
    let current = configs.0.get(&broker).cloned().unwrap_or_default();
    let changes = changes(&current)?;
    cluster
        .alter_broker_config(
            broker,
            changes,
            validate_only,
            crate::cluster::ADMIN_TIMEOUT,
        )
        .map_err(|e| (error_code(&e), e.to_string()))?;
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
