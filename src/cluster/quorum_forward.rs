//! DescribeQuorum, AddRaftVoter and RemoveRaftVoter asked of a node that is not the
//! controller: Kafka's brokers forward them to the active controller, so
//! `kafka-metadata-quorum --bootstrap-server` and the admin clients get the controller's
//! view (every member's progress) and change the voters from any node. A node forwards
//! the request over the inter-broker connection to the controller's broker listener; the
//! controller answers a forwarded request itself, and a request forwarded to a node that
//! is no longer the controller is not forwarded again.

use std::time::Duration;

use kafka_protocol::protocol::Request;

use super::ClusterNode;

/// The client id prefix of a node's forwarded requests (followed by the node's id).
pub(crate) const FORWARDED_CLIENT_PREFIX: &str = "tidelog-forwarded-by-";

impl ClusterNode {
    /// `request` at `version` answered by the controller `leader` within `timeout`,
    /// through its listener for other nodes; why not when it is not registered with a
    /// listener or cannot be reached.
    pub(crate) fn at_controller<R: Request>(
        &self,
        leader: i32,
        request: &R,
        version: i16,
        timeout: Duration,
    ) -> std::result::Result<R::Response, String> {
        let image = self.image();
        let addr = image
            .brokers
            .get(&leader)
            .map(|b| b.replication_listener.clone().unwrap_or(b.listener.clone()))
            .ok_or_else(|| format!("the controller, node {leader}, has no registered listener"))?;
        self.forward_clients
            .call_within(
                &addr,
                &self.config.replication_security,
                request,
                version,
                timeout,
            )
            .map_err(|e| format!("the controller, node {leader} at {addr}, did not answer: {e}"))
    }
}
