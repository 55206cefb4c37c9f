//! The requests and answers of the group APIs, as the coordinator takes and gives them
//! (the network server converts them from and to Kafka's messages; in-process members
//! build them directly). Errors are not fields: each call returns a
//! `Result<_, GroupError>`.

use std::time::Duration;

use super::GroupError;

/// The state of a group, named as Kafka names it in DescribeGroups and ListGroups.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum GroupState {
    /// No members (offsets may still be stored).
    Empty,
    /// Waiting for members to (re)join.
    PreparingRebalance,
    /// Joined; waiting for the leader's assignment (SyncGroup).
    CompletingRebalance,
    /// Every member has its assignment.
    Stable,
    /// The group was deleted, or is unknown.
    Dead,
}

impl GroupState {
    /// Kafka's name of the state ("Stable", "PreparingRebalance", ...).
    pub fn as_str(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
            GroupState::Dead => "Dead",
        }
    }

    /// The state of that Kafka name, case-insensitively (ListGroups v4 filters).
    pub fn parse(name: &str) -> Option<GroupState> {
        [
            GroupState::Empty,
            GroupState::PreparingRebalance,
            GroupState::CompletingRebalance,
            GroupState::Stable,
            GroupState::Dead,
        ]
        .into_iter()
        .find(|s| s.as_str().eq_ignore_ascii_case(name))
    }
}

/// Where a member's JoinGroup came from: it decides the group's initial rebalance delay
/// when that member is the group's first (see [`CoordinatorConfig`](super::CoordinatorConfig)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MemberOrigin {
    /// A Kafka client over the network.
    #[default]
    Network,
    /// A group member in the broker's process.
    InProcess,
}

/// A JoinGroup request (API key 11).
#[derive(Debug, Clone, Default)]
pub struct JoinGroupRequest {
    /// The group to join.
    pub group_id: String,
    /// Empty on the first join; the id the coordinator gave on later joins.
    pub member_id: String,
    /// Static membership id (KIP-345, `group.instance.id`), if any.
    pub group_instance_id: Option<String>,
    /// "consumer" for consumers; every member of a group must use the same.
    pub protocol_type: String,
    /// Supported protocols (assignor names) with their metadata, in order of preference.
    /// For consumers the metadata is a `ConsumerProtocol` subscription.
    pub protocols: Vec<(String, Vec<u8>)>,
    /// The member is removed if it sends no heartbeat for this long.
    pub session_timeout: Duration,
    /// How long a rebalance waits for this member to rejoin (JoinGroup v1+; zero, as
    /// for v0, means the session timeout).
    pub rebalance_timeout: Duration,
    /// JoinGroup v4+: a first join with an empty member id (and no instance id) gets
    /// [`GroupError::MemberIdRequired`] with a member id to rejoin with.
    pub require_known_member_id: bool,
    /// The client's id (for DescribeGroups).
    pub client_id: String,
    /// The client's host (for DescribeGroups).
    pub client_host: String,
    /// Network client or in-process member.
    pub origin: MemberOrigin,
    /// JoinGroup v9+: the client understands `skip_assignment`, so a static leader that
    /// returns to a Stable group is told it leads, with the member list, but not to
    /// assign (KIP-345, KIP-814).
    pub supports_skip_assignment: bool,
}

/// One member as the leader sees it in the JoinGroup response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinGroupMember {
    /// The member's id.
    pub member_id: String,
    /// Its static membership id, if any.
    pub group_instance_id: Option<String>,
    /// Its metadata for the chosen protocol.
    pub metadata: Vec<u8>,
}

/// The answer to a JoinGroup request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinGroupResponse {
    /// The generation the member is now in.
    pub generation_id: i32,
    /// The group's protocol type.
    pub protocol_type: Option<String>,
    /// The chosen protocol (assignor).
    pub protocol_name: Option<String>,
    /// The leader's member id.
    pub leader: String,
    /// This member's id.
    pub member_id: String,
    /// Every member with its metadata; only the leader receives this list.
    pub members: Vec<JoinGroupMember>,
    /// JoinGroup v9+: the leader must not run its assignor (a static leader back in a
    /// Stable group whose assignment stands); it syncs with an empty assignment.
    pub skip_assignment: bool,
}

/// What [`GroupCoordinator::begin_join`](super::GroupCoordinator::begin_join) did.
#[derive(Debug)]
pub enum JoinStart {
    /// The request was answered at once (a follower or static member rejoining a
    /// generation that goes on).
    Done(JoinGroupResponse),
    /// The member waits for the rebalance; call
    /// [`GroupCoordinator::await_join`](super::GroupCoordinator::await_join) with the
    /// ticket.
    Pending(JoinTicket),
}

/// A JoinGroup waiting for its rebalance to complete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinTicket {
    /// The group.
    pub group_id: String,
    /// The member id given to the joining member.
    pub member_id: String,
    pub(crate) join_seq: u64,
}

impl JoinTicket {
    /// The join's sequence number inside its group (newer joins have larger ones).
    pub fn seq(&self) -> u64 {
        self.join_seq
    }
}

/// A SyncGroup request (API key 14).
#[derive(Debug, Clone, Default)]
pub struct SyncGroupRequest {
    /// The group.
    pub group_id: String,
    /// The generation from the JoinGroup response.
    pub generation_id: i32,
    /// The member id.
    pub member_id: String,
    /// Static membership id, if any.
    pub group_instance_id: Option<String>,
    /// SyncGroup v5+: checked against the group's protocol type when present.
    pub protocol_type: Option<String>,
    /// SyncGroup v5+: checked against the chosen protocol when present.
    pub protocol_name: Option<String>,
    /// The leader's assignment: (member id, assignment bytes); empty for followers.
    pub assignments: Vec<(String, Vec<u8>)>,
}

/// The answer to a SyncGroup request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncGroupResponse {
    /// The group's protocol type.
    pub protocol_type: Option<String>,
    /// The chosen protocol.
    pub protocol_name: Option<String>,
    /// This member's assignment (a `ConsumerProtocol` assignment for consumers).
    pub assignment: Vec<u8>,
}

/// One member named in a LeaveGroup request (v3+ carries several).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LeavingMember {
    /// The member id (may be empty when `group_instance_id` is given).
    pub member_id: String,
    /// Static membership id, if any.
    pub group_instance_id: Option<String>,
}

/// An OffsetCommit request (API key 8).
#[derive(Debug, Clone, Default)]
pub struct OffsetCommitRequest {
    /// The group.
    pub group_id: String,
    /// The member's generation, or -1 for a standalone (simple) consumer.
    pub generation_id: i32,
    /// The member id, or "" for a standalone consumer.
    pub member_id: String,
    /// Static membership id, if any.
    pub group_instance_id: Option<String>,
    /// The offsets to store.
    pub offsets: Vec<CommitOffset>,
}

/// A TxnOffsetCommit request (API key 28): offsets a transactional producer commits
/// for a group, pending until its transaction ends (KIP-98), with the group
/// information of its consumer (KIP-447; generation -1 and no member id without it).
#[derive(Debug, Clone, Default)]
pub struct TxnOffsetCommitRequest {
    /// The group.
    pub group_id: String,
    /// The producer whose transaction the offsets belong to.
    pub producer_id: i64,
    /// Its epoch.
    pub producer_epoch: i16,
    /// The consuming member's generation, or -1.
    pub generation_id: i32,
    /// The consuming member's id, or "".
    pub member_id: String,
    /// The consuming member's static membership id, if any.
    pub group_instance_id: Option<String>,
    /// The offsets to commit with the transaction.
    pub offsets: Vec<CommitOffset>,
}

/// One partition's offset in an OffsetCommit request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitOffset {
    /// Topic name.
    pub topic: String,
    /// Partition index.
    pub partition: i32,
    /// The next offset the group should read.
    pub offset: i64,
    /// The leader epoch of the last consumed record, or -1.
    pub leader_epoch: i32,
    /// Free-form metadata stored with the offset.
    pub metadata: Option<String>,
    /// When it was committed (ms since the epoch; OffsetCommit v1 lets the client say),
    /// or None for the time of the commit.
    pub commit_timestamp: Option<i64>,
}

/// The result of committing one partition's offset.
#[derive(Debug, Clone)]
pub struct OffsetCommitResult {
    /// Topic name.
    pub topic: String,
    /// Partition index.
    pub partition: i32,
    /// Stored, or why not.
    pub result: Result<(), GroupError>,
}

/// A committed offset as returned by OffsetFetch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchedOffset {
    /// Topic name.
    pub topic: String,
    /// Partition index.
    pub partition: i32,
    /// The committed offset, or -1 if the group has none for this partition.
    pub offset: i64,
    /// The committed leader epoch, or -1.
    pub leader_epoch: i32,
    /// The committed metadata ("" if none).
    pub metadata: String,
}

/// A group as listed by ListGroups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedGroup {
    /// The group id.
    pub group_id: String,
    /// The protocol type ("consumer"), "" for a group that only has offsets.
    pub protocol_type: String,
    /// Its state.
    pub state: GroupState,
}

/// One member in a DescribeGroups answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberDescription {
    /// The member id.
    pub member_id: String,
    /// Static membership id, if any.
    pub group_instance_id: Option<String>,
    /// The client's id.
    pub client_id: String,
    /// The client's host.
    pub client_host: String,
    /// Its metadata for the chosen protocol (empty unless the group is Stable).
    pub metadata: Vec<u8>,
    /// Its current assignment (empty unless the group is Stable).
    pub assignment: Vec<u8>,
}

/// A group as described by DescribeGroups (API key 15). An unknown group is described
/// as `Dead` with no members, as Kafka does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupDescription {
    /// The group id.
    pub group_id: String,
    /// Its state.
    pub state: GroupState,
    /// The protocol type ("" if unknown).
    pub protocol_type: String,
    /// The chosen protocol ("" unless Stable).
    pub protocol_data: String,
    /// The current generation (-1 for an unknown group).
    pub generation_id: i32,
    /// The leader's member id ("" if none).
    pub leader: String,
    /// The members.
    pub members: Vec<MemberDescription>,
}
