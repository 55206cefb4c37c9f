//! Retiring a node (Kafka's UnregisterBroker): the checks a caller is answered with
//! before the `UnregisterBroker` record is proposed (`image/unregister.rs` applies it).

use std::time::Duration;

use super::ClusterNode;
use super::records::MetadataRecord;
use crate::error::Result;

/// How an unregistration ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Unregistered {
    /// The node is gone from the cluster's metadata.
    Done,
    /// No broker of that id is registered (Kafka's BROKER_ID_NOT_REGISTERED).
    NotRegistered,
    /// Refused, and why: the node is a voter, is running, or holds replicas
    /// (INVALID_REQUEST).
    Refused(String),
}

impl ClusterNode {
    /// Removes `broker`'s registration through the controller, once it is neither a
    /// voter of the metadata quorum, nor running (unfenced), nor holding a replica.
    pub(crate) fn unregister_broker(&self, broker: i32, timeout: Duration) -> Result<Unregistered> {
        let image = self.image();
        let Some(b) = image.brokers.get(&broker) else {
            return Ok(Unregistered::NotRegistered);
        };
        if self.membership().voters.contains(&broker) {
            return Ok(Unregistered::Refused(format!(
                "node {broker} is a voter of the metadata quorum: remove it from the voters first (tidelog quorum remove-voter)"
            )));
        }
        let held = image.replicas_of(broker);
        if !held.is_empty() {
            return Ok(Unregistered::Refused(format!(
                "node {broker} still holds {} replica(s): {}; move them away first (tidelog cluster drain)",
                held.len(),
                held.join(", ")
            )));
        }
        if !b.fenced {
            return Ok(Unregistered::Refused(format!(
                "node {broker} is running: stop it first (a running node registers again)"
            )));
        }
        drop(image);
        self.propose(
            MetadataRecord::UnregisterBroker { broker_id: broker },
            timeout,
        )?;
        Ok(Unregistered::Done)
    }
}
