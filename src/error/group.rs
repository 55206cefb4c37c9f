//! Why the group coordinator refused a request.

use std::sync::Arc;

/// A refusal of the group coordinator, named as Kafka names it. The network server turns
/// it into Kafka's numeric code; in-process callers match on the variant.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum GroupError {
    /// This node does not coordinate the group now (its partition of
    /// `__consumer_offsets` is not loaded here): find the coordinator again and retry.
    /// On a cluster the coordinator of a group is the node that leads the group's
    /// partition of `__consumer_offsets`; an in-process group member works only on that
    /// node (elsewhere, use a network client, which finds the coordinator).
    #[error(
        "this node is not the group's coordinator (on a cluster, the node that leads the group's partition of __consumer_offsets is; in-process group members work only there)"
    )]
    NotCoordinator,
    /// The coordinator is shutting down, or the group is being deleted.
    #[error("the group coordinator is not available")]
    CoordinatorNotAvailable,
    /// The group id is empty.
    #[error("invalid group id {0:?}")]
    InvalidGroupId(String),
    /// The member id is not a member of the group.
    #[error("unknown member id {0:?}")]
    UnknownMemberId(String),
    /// JoinGroup v4+: rejoin with this member id (KIP-394).
    #[error("member id required: rejoin with {member_id:?}")]
    MemberIdRequired {
        /// The id the member must rejoin with.
        member_id: String,
    },
    /// The generation in the request is not the group's current one.
    #[error("generation {given} is not the group's current generation {current}")]
    IllegalGeneration {
        /// The generation the member sent.
        given: i32,
        /// The group's generation.
        current: i32,
    },
    /// The member's protocol type or protocols do not match the group's.
    #[error("inconsistent group protocol: {0}")]
    InconsistentGroupProtocol(String),
    /// The session timeout is outside `[min, max]` of the coordinator.
    #[error("session timeout {0:?} is outside the allowed range")]
    InvalidSessionTimeout(std::time::Duration),
    /// The group is rebalancing: the member must rejoin.
    #[error("the group is rebalancing")]
    RebalanceInProgress,
    /// Another member with the same `group.instance.id` replaced this one (KIP-345).
    #[error("instance id {0:?} is now used by another member")]
    FencedInstanceId(String),
    /// The group has `group.max.size` members.
    #[error("the group has reached its maximum size {0}")]
    GroupMaxSizeReached(usize),
    /// DeleteGroups: the group still has members.
    #[error("the group still has members")]
    NonEmptyGroup,
    /// The group does not exist.
    #[error("the group does not exist")]
    GroupIdNotFound,
    /// OffsetDelete: the group is subscribed to the topic.
    #[error("the group is subscribed to topic {0:?}")]
    GroupSubscribedToTopic(String),
    /// The offset's metadata string is longer than `offset.metadata.max.bytes`.
    #[error("offset metadata of {len} bytes exceeds the limit of {max}")]
    OffsetMetadataTooLarge {
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// OffsetCommit for a topic or partition that does not exist.
    #[error("unknown topic or partition {topic}-{partition}")]
    UnknownTopicOrPartition {
        /// The topic.
        topic: String,
        /// The partition.
        partition: i32,
    },
    /// A follower's SyncGroup waited longer than its timeout for the leader (it may
    /// send SyncGroup again).
    #[error("timed out waiting for the leader's assignment")]
    RequestTimedOut,
    /// OffsetFetch with `require_stable`: a transaction has an offset of the partition
    /// pending (KIP-447); ask again once it ended.
    #[error("a transaction has a pending offset commit for {topic}-{partition}")]
    UnstableOffsetCommit {
        /// The topic.
        topic: String,
        /// The partition.
        partition: i32,
    },
    /// TxnOffsetCommit from a producer epoch older than the producer's latest (a fenced
    /// producer).
    #[error("producer {producer_id} epoch {epoch} is older than its epoch {current}")]
    InvalidProducerEpoch {
        /// The producer.
        producer_id: i64,
        /// The epoch in the request.
        epoch: i16,
        /// The producer's latest epoch.
        current: i16,
    },
    /// TxnOffsetCommit without a valid producer id or epoch (negative).
    #[error("producer id {producer_id} epoch {epoch} is not a transactional producer's")]
    InvalidProducerIdMapping {
        /// The producer id in the request.
        producer_id: i64,
        /// The epoch in the request.
        epoch: i16,
    },
    /// ConsumerGroupHeartbeat: the member's epoch is ahead of or behind the
    /// coordinator's (KIP-848); the member must rejoin with epoch 0.
    #[error("member epoch {given} is fenced: the member's epoch is {current}")]
    FencedMemberEpoch {
        /// The epoch the member sent.
        given: i32,
        /// The member's epoch at the coordinator.
        current: i32,
    },
    /// OffsetCommit of a consumer-protocol member with an epoch older than its current
    /// one (KIP-848): retry with the new epoch.
    #[error("member epoch {given} is stale: the member's epoch is {current}")]
    StaleMemberEpoch {
        /// The epoch the member sent.
        given: i32,
        /// The member's epoch at the coordinator.
        current: i32,
    },
    /// A static member joined with an instance id whose previous member has not left
    /// (KIP-848).
    #[error("instance id {0:?} is still used by a member that has not left")]
    UnreleasedInstanceId(String),
    /// The server-side assignor named is not one of `group.consumer.assignors`.
    #[error("server assignor {0:?} is not supported")]
    UnsupportedAssignor(String),
    /// The server-side subscription regular expression does not compile.
    #[error("invalid regular expression {regex:?}: {reason}")]
    InvalidRegularExpression {
        /// The expression.
        regex: String,
        /// Why it does not compile.
        reason: String,
    },
    /// A request whose fields are inconsistent (ConsumerGroupHeartbeat's validation).
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// The `__consumer_offsets` journal refused the write: nothing was stored.
    #[error("writing to __consumer_offsets failed: {0}")]
    Journal(#[source] Arc<crate::error::Error>),
}

impl GroupError {
    /// True for refusals after which the member should find the coordinator again and
    /// retry the same request later (Kafka's retriable coordinator errors).
    pub fn is_retriable(&self) -> bool {
        matches!(
            self,
            GroupError::NotCoordinator
                | GroupError::CoordinatorNotAvailable
                | GroupError::RequestTimedOut
                | GroupError::Journal(_)
        )
    }
}
