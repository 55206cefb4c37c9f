//! What the handlers of ElectLeaders, AlterPartitionReassignments and
//! ListPartitionReassignments ask of a cluster node, as one narrow trait
//! ([`PartitionAdmin`], reached through
//! [`ClusterView::partition_admin`](super::cluster_view::ClusterView::partition_admin)),
//! and its implementation for [`ClusterNode`] (`cluster/partition_admin.rs`).

use std::time::Duration;

use crate::cluster::ClusterNode;
pub(crate) use crate::cluster::partition_admin::{
    Altered, ElectionOutcome, ElectionType, Reassignment,
};
pub(crate) use crate::cluster::unregister::Unregistered;
use crate::error::Result;

/// Leader elections and reassignments through the controller.
pub(crate) trait PartitionAdmin {
    /// Every partition of the cluster, by topic name and index.
    fn all_partitions(&self) -> Vec<(String, i32)>;
    /// Elects leaders of `partitions`; one outcome per partition, in order.
    fn elect_leaders(
        &self,
        election: ElectionType,
        partitions: &[(String, i32)],
        timeout: Duration,
    ) -> Vec<Result<ElectionOutcome>>;
    /// Starts, replaces or (with None) cancels a partition's reassignment.
    fn alter_reassignment(
        &self,
        topic: &str,
        partition: i32,
        target: Option<Vec<i32>>,
        timeout: Duration,
    ) -> Result<Altered>;
    /// The partition's replication factor (its replicas before a reassignment).
    fn replication_factor(&self, topic: &str, partition: i32) -> Result<usize>;
    /// The reassignments in progress (of `partitions` only, when given).
    fn list_reassignments(&self, partitions: Option<&[(String, i32)]>) -> Vec<Reassignment>;
    /// Removes a retired broker's registration (UnregisterBroker).
    fn unregister_broker(&self, broker: i32, timeout: Duration) -> Result<Unregistered>;
}

impl PartitionAdmin for ClusterNode {
    fn all_partitions(&self) -> Vec<(String, i32)> {
        ClusterNode::all_partitions(self)
    }

    fn elect_leaders(
        &self,
        election: ElectionType,
        partitions: &[(String, i32)],
        timeout: Duration,
    ) -> Vec<Result<ElectionOutcome>> {
        ClusterNode::elect_leaders(self, election, partitions, timeout)
    }

    fn alter_reassignment(
        &self,
        topic: &str,
        partition: i32,
        target: Option<Vec<i32>>,
        timeout: Duration,
    ) -> Result<Altered> {
        ClusterNode::alter_reassignment(self, topic, partition, target, timeout)
    }

    fn replication_factor(&self, topic: &str, partition: i32) -> Result<usize> {
        ClusterNode::replication_factor(self, topic, partition)
    }

    fn list_reassignments(&self, partitions: Option<&[(String, i32)]>) -> Vec<Reassignment> {
        ClusterNode::list_reassignments(self, partitions)
    }

    fn unregister_broker(&self, broker: i32, timeout: Duration) -> Result<Unregistered> {
        ClusterNode::unregister_broker(self, broker, timeout)
    }
}
