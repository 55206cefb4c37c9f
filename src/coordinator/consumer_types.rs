//! The requests and answers of the consumer group protocol (KIP-848), as the
//! coordinator takes and gives them: topics by name (the network server maps Kafka's
//! topic ids to and from names). Errors are not fields: each call returns a
//! `Result<_, GroupError>`.

use std::time::Duration;

/// Topic partitions by topic name, each list sorted.
pub type TopicPartitionList = Vec<(String, Vec<i32>)>;

/// A ConsumerGroupHeartbeat request (API key 68).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConsumerHeartbeatRequest {
    /// The group.
    pub group_id: String,
    /// The member id: chosen by the client (version 1), or empty on a first join
    /// (version 0: the coordinator gives one).
    pub member_id: String,
    /// 0 to join, the current epoch to heartbeat, -1 to leave, -2 for a static member
    /// leaving temporarily (it keeps its assignment until its session times out).
    pub member_epoch: i32,
    /// Static membership id (`group.instance.id`), if any.
    pub instance_id: Option<String>,
    /// The member's rack, if any.
    pub rack_id: Option<String>,
    /// How long the member may take to revoke partitions, in ms; -1 if unchanged.
    pub rebalance_timeout_ms: i32,
    /// The topics subscribed to by name; None if unchanged.
    pub subscribed_topic_names: Option<Vec<String>>,
    /// The server-side regular expression subscribed to; None if unchanged, "" to
    /// clear it.
    pub subscribed_topic_regex: Option<String>,
    /// The server-side assignor the member prefers; None if unchanged.
    pub server_assignor: Option<String>,
    /// The partitions the member owns now; None if unchanged since the last heartbeat.
    pub owned_partitions: Option<TopicPartitionList>,
    /// The client's id (for ConsumerGroupDescribe).
    pub client_id: String,
    /// The client's host (for ConsumerGroupDescribe).
    pub client_host: String,
}

/// The answer to a ConsumerGroupHeartbeat request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerHeartbeatResponse {
    /// The member's id.
    pub member_id: String,
    /// The member's epoch (-1 or -2 after a leave).
    pub member_epoch: i32,
    /// How often the member should heartbeat.
    pub heartbeat_interval: Duration,
    /// The partitions the member may own now; None if unchanged.
    pub assignment: Option<TopicPartitionList>,
}

/// The state of a consumer-protocol group, named as Kafka names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ConsumerGroupState {
    /// No members.
    Empty,
    /// The group epoch moved past the target assignment's (not seen from outside:
    /// the target is computed at once).
    Assigning,
    /// Some member has not reached the target assignment yet.
    Reconciling,
    /// Every member owns its target assignment.
    Stable,
    /// The group is unknown.
    Dead,
}

impl ConsumerGroupState {
    /// Kafka's name of the state.
    pub fn as_str(self) -> &'static str {
        match self {
            ConsumerGroupState::Empty => "Empty",
            ConsumerGroupState::Assigning => "Assigning",
            ConsumerGroupState::Reconciling => "Reconciling",
            ConsumerGroupState::Stable => "Stable",
            ConsumerGroupState::Dead => "Dead",
        }
    }
}

/// One member in a ConsumerGroupDescribe answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerMemberDescription {
    /// The member id.
    pub member_id: String,
    /// Static membership id, if any.
    pub instance_id: Option<String>,
    /// The member's rack, if any.
    pub rack_id: Option<String>,
    /// The member's epoch.
    pub member_epoch: i32,
    /// The client's id.
    pub client_id: String,
    /// The client's host.
    pub client_host: String,
    /// The topics subscribed to by name.
    pub subscribed_topic_names: Vec<String>,
    /// The server-side regular expression subscribed to, if any.
    pub subscribed_topic_regex: Option<String>,
    /// The partitions the member owns (its current assignment).
    pub assignment: TopicPartitionList,
    /// The partitions the target assignment gives it.
    pub target_assignment: TopicPartitionList,
    /// True for a member that uses the classic protocol (JoinGroup, SyncGroup) in the
    /// group (ConsumerGroupDescribe v1 `MemberType` 0, KIP-1099), false for one that
    /// uses the consumer protocol (`MemberType` 1).
    pub classic: bool,
}

/// A consumer-protocol group as described by ConsumerGroupDescribe (API key 69).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerGroupDescription {
    /// The group id.
    pub group_id: String,
    /// Its state.
    pub state: ConsumerGroupState,
    /// The group epoch.
    pub group_epoch: i32,
    /// The epoch of the target assignment.
    pub assignment_epoch: i32,
    /// The server-side assignor in use.
    pub assignor_name: String,
    /// The members.
    pub members: Vec<ConsumerMemberDescription>,
}

/// Which protocol a group speaks (ListGroups v5 `GroupType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GroupType {
    /// The classic protocol (JoinGroup/SyncGroup).
    Classic,
    /// The consumer protocol (KIP-848, ConsumerGroupHeartbeat).
    Consumer,
}

impl GroupType {
    /// Kafka's name of the type ("classic", "consumer").
    pub fn as_str(self) -> &'static str {
        match self {
            GroupType::Classic => "classic",
            GroupType::Consumer => "consumer",
        }
    }
}

/// A group as listed by ListGroups, with its type and its state by Kafka's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypedListedGroup {
    /// The group id.
    pub group_id: String,
    /// The protocol type ("consumer"), "" for a classic group that only has offsets.
    pub protocol_type: String,
    /// Its state, as Kafka names it.
    pub state: &'static str,
    /// Its type.
    pub group_type: GroupType,
}
