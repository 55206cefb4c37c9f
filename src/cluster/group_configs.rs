//! Group configs of a cluster (the GROUP resource of DescribeConfigs and
//! IncrementalAlterConfigs): kept in the metadata image, so every node serves and
//! applies the same, and changed through the controller as `AlterGroupConfig` records.
//! A change returns once this node applied it; the other nodes apply it as they catch
//! up with the log.

use std::sync::Arc;

use super::{ADMIN_TIMEOUT, ClusterNode, MetadataRecord};
use crate::config::{CoordinatorConfig, ShareConfig};
use crate::coordinator::group_configs::{GroupConfigChange, GroupConfigStore, GroupConfigs};
use crate::error::Result;

/// The group configs of a cluster, in its metadata image, with this node's settings as
/// the groups' defaults.
#[derive(Debug)]
pub(crate) struct ClusterGroupConfigs {
    node: Arc<ClusterNode>,
    coordinator: CoordinatorConfig,
    share: ShareConfig,
}

impl ClusterGroupConfigs {
    /// The group configs of `node`'s cluster, with this broker's settings as defaults.
    pub(crate) fn new(
        node: Arc<ClusterNode>,
        coordinator: &CoordinatorConfig,
        share: &ShareConfig,
    ) -> ClusterGroupConfigs {
        ClusterGroupConfigs {
            node,
            coordinator: coordinator.clone(),
            share: share.clone(),
        }
    }
}

impl GroupConfigStore for ClusterGroupConfigs {
    fn configs(&self) -> Arc<GroupConfigs> {
        self.node.image().group_configs.clone()
    }

    fn defaults(&self) -> (&CoordinatorConfig, &ShareConfig) {
        (&self.coordinator, &self.share)
    }

    fn store(&self, group: &str, changes: &[GroupConfigChange]) -> Result<()> {
        if changes.is_empty() {
            return Ok(());
        }
        self.node
            .propose(
                MetadataRecord::AlterGroupConfig {
                    group: group.to_string(),
                    changes: changes.to_vec(),
                },
                ADMIN_TIMEOUT,
            )
            .map(drop)
    }
}
