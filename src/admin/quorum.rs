//! The metadata quorum through the admin client (KIP-853): DescribeQuorum,
//! AddRaftVoter and RemoveRaftVoter, sent to the controller as `kafka-metadata-quorum`
//! sends them.

use kafka_protocol::messages::describe_quorum_request::{PartitionData, TopicData};
use kafka_protocol::messages::describe_quorum_response::ReplicaState;
use kafka_protocol::messages::{
    AddRaftVoterRequest, AddRaftVoterResponse, BrokerId, DescribeQuorumRequest,
    RemoveRaftVoterRequest, RemoveRaftVoterResponse, TopicName, UnregisterBrokerRequest,
    UnregisterBrokerResponse,
};
use kafka_protocol::protocol::{Request, StrBytes};

use super::router::{Outcome, Router, check, kstr};
use super::{AdminClient, Cluster, Resource};
use crate::error::{Error, Result};
use crate::storage::codec::{uuid_base64, uuid_from_base64};

const DESCRIBE_QUORUM_VERSION: i16 = 2;
const ADD_RAFT_VOTER_VERSION: i16 = 0;
const REMOVE_RAFT_VOTER_VERSION: i16 = 0;
const UNREGISTER_BROKER_VERSION: i16 = 0;
/// How long the controller may take to apply a voter change.
const VOTER_CHANGE_TIMEOUT_MS: i32 = 30_000;

/// The metadata quorum, as its controller describes it (`kafka-metadata-quorum
/// describe --status --replication`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuorumInfo {
    /// The controller (Raft leader).
    pub leader: i32,
    /// Its epoch (the Raft term).
    pub leader_epoch: i32,
    /// The committed end of the metadata log.
    pub high_watermark: i64,
    /// The voters.
    pub voters: Vec<QuorumReplica>,
    /// The observers: broker-only nodes that follow the metadata log.
    pub observers: Vec<QuorumReplica>,
    /// Each member's quorum address, where the controller knows it.
    pub addresses: Vec<(i32, String)>,
}

/// One member of the quorum.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuorumReplica {
    /// Node id.
    pub node: i32,
    /// Its data directory's id (`meta.properties`' `directory.id`), if recorded.
    pub directory_id: Option<String>,
    /// How far its metadata log reaches, as the controller knows (-1 unknown).
    pub log_end_offset: i64,
    /// When the controller last heard from it, ms since the epoch (-1 never).
    pub last_fetch_timestamp: i64,
}

fn replica(r: &ReplicaState) -> QuorumReplica {
    QuorumReplica {
        node: r.replica_id.0,
        directory_id: (!r.replica_directory_id.is_nil())
            .then(|| uuid_base64(r.replica_directory_id.as_bytes())),
        log_end_offset: r.log_end_offset,
        last_fetch_timestamp: r.last_fetch_timestamp,
    }
}

/// A directory id as the wire carries it: nil for none.
fn directory(id: Option<&str>) -> Result<uuid::Uuid> {
    match id {
        None => Ok(uuid::Uuid::nil()),
        Some(s) => uuid_from_base64(s)
            .map(uuid::Uuid::from_bytes)
            .ok_or_else(|| Error::InvalidConfig {
                key: "directory.id".into(),
                reason: format!("{s:?} is not a directory id (22 base64url characters)"),
            }),
    }
}

/// The answer to a change of one node (a voter added or removed, a broker
/// unregistered): one error code and message.
trait NodeChange {
    fn error(&self) -> (i16, Option<&StrBytes>);
}

macro_rules! node_change {
    ($($response:ty),+) => {$(
        impl NodeChange for $response {
            fn error(&self) -> (i16, Option<&StrBytes>) {
                (self.error_code, self.error_message.as_ref())
            }
        }
    )+};
}

node_change!(
    AddRaftVoterResponse,
    RemoveRaftVoterResponse,
    UnregisterBrokerResponse
);

impl AdminClient {
    /// Runs a request about the cluster as a whole through `round` until its outcome is
    /// final: a retriable refusal (for the controller's requests NOT_CONTROLLER: the
    /// controller moved, or handed its leadership away because it is the voter being
    /// removed) is asked again after fresh metadata, as the router repeats rounds. A
    /// request that is not `idempotent` is repeated after a lost connection only if it
    /// was not sent.
    pub(super) fn until_final<T>(
        &self,
        idempotent: bool,
        mut round: impl FnMut(&mut Router) -> Result<Outcome<T>>,
    ) -> Result<T> {
        let mut found = self
            .router
            .lock()
            .rounds(vec![Cluster], idempotent, |r, _| {
                Ok(vec![(Cluster, round(r)?)])
            })?;
        found
            .remove(&Cluster)
            .unwrap_or_else(|| Err(Error::corrupt("an admin response", 0, "no answer")))
    }

    /// Sends the change of `node` to the controller; its error is about that node.
    fn change_node<R: Request>(&self, node: i32, request: &R, version: i16) -> Result<()>
    where
        R::Response: NodeChange,
    {
        self.until_final(false, |router| {
            let r = router.call_controller(request, version)?;
            let (code, message) = r.error();
            Ok(check(|| Resource::Broker(node), code, message).into())
        })
    }

    /// The metadata quorum: controller, voters and observers with their progress
    /// (DescribeQuorum, asked of the controller).
    pub fn describe_metadata_quorum(&self) -> Result<QuorumInfo> {
        let request = DescribeQuorumRequest::default().with_topics(vec![
            TopicData::default()
                .with_topic_name(TopicName(kstr("__cluster_metadata")))
                .with_partitions(vec![PartitionData::default().with_partition_index(0)]),
        ]);
        // A node that is not the controller answers NOT_LEADER_OR_FOLLOWER for the
        // partition: asked again of the controller fresh metadata names.
        let r = self.until_final(true, |router| {
            let r = router.call_controller(&request, DESCRIBE_QUORUM_VERSION)?;
            let refused = check(|| Resource::Cluster, r.error_code, r.error_message.as_ref())
                .and_then(
                    |()| match r.topics.first().and_then(|t| t.partitions.first()) {
                        Some(p) => {
                            check(|| Resource::Cluster, p.error_code, p.error_message.as_ref())
                        }
                        None => Ok(()),
                    },
                );
            Ok(refused.map(|()| r).into())
        })?;
        let p = r
            .topics
            .first()
            .and_then(|t| t.partitions.first())
            .ok_or_else(|| {
                Error::corrupt("a DescribeQuorum response", 0, "no metadata partition")
            })?;
        let addresses = r
            .nodes
            .iter()
            .filter_map(|n| {
                n.listeners
                    .first()
                    .map(|l| (n.node_id.0, format!("{}:{}", l.host, l.port)))
            })
            .collect();
        Ok(QuorumInfo {
            leader: p.leader_id.0,
            leader_epoch: p.leader_epoch,
            high_watermark: p.high_watermark,
            voters: p.current_voters.iter().map(replica).collect(),
            observers: p.observers.iter().map(replica).collect(),
            addresses,
        })
    }

    /// Makes `node`, a broker-only node that follows the metadata log, a voter
    /// (AddRaftVoter); `directory_id`, when given, must be the one it registered.
    pub fn add_raft_voter(&self, node: i32, directory_id: Option<&str>) -> Result<()> {
        let request = AddRaftVoterRequest::default()
            .with_timeout_ms(VOTER_CHANGE_TIMEOUT_MS)
            .with_voter_id(node)
            .with_voter_directory_id(directory(directory_id)?);
        self.change_node(node, &request, ADD_RAFT_VOTER_VERSION)
    }

    /// Removes voter `node` (RemoveRaftVoter); `directory_id`, when given, must be the
    /// one the quorum knows it by.
    pub fn remove_raft_voter(&self, node: i32, directory_id: Option<&str>) -> Result<()> {
        let request = RemoveRaftVoterRequest::default()
            .with_voter_id(node)
            .with_voter_directory_id(directory(directory_id)?);
        self.change_node(node, &request, REMOVE_RAFT_VOTER_VERSION)
    }

    /// Removes the registration of retired node `node` (UnregisterBroker), once it is
    /// stopped, not a voter and holds no replica: Metadata and DescribeCluster no
    /// longer list it.
    pub fn unregister_broker(&self, node: i32) -> Result<()> {
        let request = UnregisterBrokerRequest::default().with_broker_id(BrokerId(node));
        self.change_node(node, &request, UNREGISTER_BROKER_VERSION)
    }
}
