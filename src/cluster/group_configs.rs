//! Group configs of a cluster (the GROUP resource of DescribeConfigs and
//! IncrementalAlterConfigs): kept in the metadata image, so every node serves and
//! applies the same, and changed through the controller as `AlterGroupConfig` records.
//! A change returns once this node applied it; the other nodes apply it as they catch
//! up with the log, and a reader that must see every change made before it (the share
//! coordinator, before a new share-partition's start) takes a read barrier first.

use std::sync::Arc;
use std::time::Duration;

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

    /// A read barrier on the metadata log ([`ClusterNode::read_barrier`]): this node's
    /// image then holds every group config committed before the call.
    fn read_barrier(&self, timeout: Duration) -> Result<()> {
        self.node.read_barrier(timeout)
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
