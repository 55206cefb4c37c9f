//! The group coordinator: Kafka's classic consumer group protocol as a state machine.
//!
//! One coordinator serves every group of a broker. The network server calls it for the
//! group APIs, and in-process [`ConsumerGroup`](crate::ConsumerGroup) members call the same
//! methods with the same bytes (Kafka's `ConsumerProtocol` subscription and assignment),
//! so an in-process member and a Kafka client can share a group.
//!
//! # Public methods (the API the network server codes against)
//!
//! | Kafka API | method | blocks? |
//! |---|---|---|
//! | JoinGroup (11) | [`GroupCoordinator::join_group`]`(JoinGroupRequest, timeout) -> JoinGroupResponse` | until the rebalance completes, or `timeout` |
//! | (non-blocking) | [`GroupCoordinator::begin_join`]`(JoinGroupRequest) -> JoinStart`, then [`GroupCoordinator::await_join`]`(&JoinTicket, timeout) -> Option<JoinGroupResponse>` | `await_join` up to `timeout` |
//! | SyncGroup (14) | [`GroupCoordinator::sync_group`]`(SyncGroupRequest, timeout) -> SyncGroupResponse` | a follower waits for the leader's assignment |
//! | Heartbeat (12) | [`GroupCoordinator::heartbeat`]`(group_id, generation_id, member_id, group_instance_id) -> i16` | no |
//! | LeaveGroup (13) | [`GroupCoordinator::leave_group`]`(group_id, &[LeavingMember]) -> LeaveGroupResponse` | no |
//! | OffsetCommit (8) | [`GroupCoordinator::offset_commit`]`(OffsetCommitRequest) -> Vec<OffsetCommitResult>` | fsync-free append to `__consumer_offsets` |
//! | OffsetFetch (9) | [`GroupCoordinator::offset_fetch`]`(group_id, Option<&[(String, i32)]>) -> OffsetFetchResponse` | no |
//! | ListGroups (16) | [`GroupCoordinator::list_groups`]`() -> Vec<ListedGroup>` | no |
//! | DescribeGroups (15) | [`GroupCoordinator::describe_group`]`(group_id) -> GroupDescription` | no |
//! | DeleteGroups (42) | [`GroupCoordinator::delete_group`]`(group_id) -> i16` | no |
//!
//! Every answer carries a Kafka error code (constants in [`codes`]); `0` means success.
//! Timeouts are `std::time::Duration`s; the server converts the `*_ms` fields.
//!
//! # Protocol (as in Kafka's `GroupCoordinator`, classic protocol)
//!
//! States: `Empty -> PreparingRebalance -> CompletingRebalance -> Stable`, back to
//! `PreparingRebalance` whenever a member joins, leaves or misses its session timeout.
//! A rebalance completes when every known member has sent JoinGroup, or when the longest
//! `rebalance_timeout` of the members has passed (members that did not rejoin are
//! removed). Then the generation is bumped, a protocol every member supports is chosen
//! (by vote, in each member's order of preference), and the leader (the previous leader if
//! it rejoined, else the earliest member) receives every member's metadata and computes
//! the assignment client-side; its SyncGroup stores one assignment per member and makes
//! the group `Stable`. A reaper thread removes members whose last heartbeat is older than
//! their `session_timeout`.
//!
//! Offsets may be committed by members of the current generation while the group is
//! `Stable` or `PreparingRebalance` (so that a member can commit in its "partitions
//! revoked" callback), and by anyone with generation `-1` and an empty member id while
//! the group has no members (standalone consumers). Commits are appended to the
//! compacted internal topic `__consumer_offsets` (key and value in Kafka's format, see
//! `offsets.rs`) before they are acknowledged, and reloaded when the broker opens.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::storage::now_ms;

use parking_lot::{Condvar, Mutex};

use super::offsets::{self, OffsetJournal};
use crate::Result;

/// Kafka error codes the coordinator answers with (the numbers sent on the wire).
pub mod codes {
    /// Success.
    pub const NONE: i16 = 0;
    /// An unexpected server-side error.
    pub const UNKNOWN_SERVER_ERROR: i16 = -1;
    /// The topic or partition is unknown.
    pub const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
    /// The offset metadata string is larger than allowed.
    pub const OFFSET_METADATA_TOO_LARGE: i16 = 12;
    /// The coordinator is not available (closed broker).
    pub const COORDINATOR_NOT_AVAILABLE: i16 = 15;
    /// The generation id in the request is not the group's current generation.
    pub const ILLEGAL_GENERATION: i16 = 22;
    /// The member's protocol type or protocols are incompatible with the group's.
    pub const INCONSISTENT_GROUP_PROTOCOL: i16 = 23;
    /// The group id is empty or otherwise invalid.
    pub const INVALID_GROUP_ID: i16 = 24;
    /// The member id is not known to the group.
    pub const UNKNOWN_MEMBER_ID: i16 = 25;
    /// The session timeout is outside the broker's allowed range.
    pub const INVALID_SESSION_TIMEOUT: i16 = 26;
    /// The group is rebalancing; the member must rejoin.
    pub const REBALANCE_IN_PROGRESS: i16 = 27;
    /// The request timed out before the operation completed.
    pub const REQUEST_TIMED_OUT: i16 = 7;
    /// The log could not be written (the commit was not stored).
    pub const KAFKA_STORAGE_ERROR: i16 = 56;
    /// The group still has members (DeleteGroups).
    pub const NON_EMPTY_GROUP: i16 = 68;
    /// The group does not exist.
    pub const GROUP_ID_NOT_FOUND: i16 = 69;
    /// The group is full.
    pub const GROUP_MAX_SIZE_REACHED: i16 = 81;
    /// JoinGroup v4+: the member must rejoin with the member id given in the response.
    pub const MEMBER_ID_REQUIRED: i16 = 79;
    /// Another member with the same `group_instance_id` replaced this one.
    pub const FENCED_INSTANCE_ID: i16 = 82;
}

/// Settings of the group coordinator. Defaults mirror Kafka's broker settings, except
/// where noted.
#[derive(Debug, Clone)]
pub struct CoordinatorConfig {
    /// Smallest `session_timeout` a member may ask for. Default 6 s
    /// (`group.min.session.timeout.ms`).
    pub min_session_timeout: Duration,
    /// Largest `session_timeout` a member may ask for. Default 30 min
    /// (`group.max.session.timeout.ms`).
    pub max_session_timeout: Duration,
    /// How long the first rebalance of an empty group waits for more members. Default 0
    /// (Kafka's `group.initial.rebalance.delay.ms` is 3 s; in-process groups form
    /// faster without it, and each later join simply triggers a rebalance).
    pub initial_rebalance_delay: Duration,
    /// Most members a group may have. Default unlimited (`group.max.size`).
    pub max_group_size: usize,
    /// Longest metadata string stored with a committed offset. Default 4096
    /// (`offset.metadata.max.bytes`).
    pub offset_metadata_max_bytes: usize,
}

impl Default for CoordinatorConfig {
    fn default() -> Self {
        CoordinatorConfig {
            min_session_timeout: Duration::from_secs(6),
            max_session_timeout: Duration::from_secs(30 * 60),
            initial_rebalance_delay: Duration::ZERO,
            max_group_size: usize::MAX,
            offset_metadata_max_bytes: 4096,
        }
    }
}

/// The state of a group, named as Kafka names it in DescribeGroups and ListGroups.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GroupState {
    /// No members (offsets may still be stored).
    Empty,
    /// Waiting for members to (re)join.
    PreparingRebalance,
    /// Joined; waiting for the leader's assignment (SyncGroup).
    CompletingRebalance,
    /// Every member has its assignment.
    Stable,
    /// The group was deleted.
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
}

/// A JoinGroup request (API key 11).
#[derive(Debug, Clone, Default)]
pub struct JoinGroupRequest {
    /// The group to join.
    pub group_id: String,
    /// Empty on the first join; the id the coordinator gave on later joins.
    pub member_id: String,
    /// Static membership id (KIP-345), if any.
    pub group_instance_id: Option<String>,
    /// "consumer" for consumers; every member of a group must use the same.
    pub protocol_type: String,
    /// Supported protocols (assignor names) with their metadata, in order of preference.
    /// For consumers the metadata is a `ConsumerProtocol` subscription.
    pub protocols: Vec<(String, Vec<u8>)>,
    /// The member is removed if it sends no heartbeat for this long.
    pub session_timeout: Duration,
    /// How long a rebalance waits for this member to rejoin (JoinGroup v1+; v0 uses the
    /// session timeout).
    pub rebalance_timeout: Duration,
    /// JoinGroup v4+: a first join with an empty member id gets `MEMBER_ID_REQUIRED`
    /// and a member id to rejoin with.
    pub require_known_member_id: bool,
    /// The client's id (for DescribeGroups).
    pub client_id: String,
    /// The client's host (for DescribeGroups).
    pub client_host: String,
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
    /// Kafka error code; [`codes::NONE`] on success.
    pub error_code: i16,
    /// The new generation (-1 on error).
    pub generation_id: i32,
    /// The group's protocol type.
    pub protocol_type: Option<String>,
    /// The chosen protocol (assignor), None on error.
    pub protocol_name: Option<String>,
    /// The leader's member id ("" on error).
    pub leader: String,
    /// This member's id (also set with `MEMBER_ID_REQUIRED`).
    pub member_id: String,
    /// Every member with its metadata; only the leader receives this list.
    pub members: Vec<JoinGroupMember>,
}

impl JoinGroupResponse {
    fn error(code: i16, member_id: &str) -> Self {
        JoinGroupResponse {
            error_code: code,
            generation_id: -1,
            protocol_type: None,
            protocol_name: None,
            leader: String::new(),
            member_id: member_id.to_string(),
            members: Vec::new(),
        }
    }
}

/// What [`GroupCoordinator::begin_join`] did.
#[derive(Debug)]
pub enum JoinStart {
    /// The request was answered at once (an error or `MEMBER_ID_REQUIRED`).
    Done(JoinGroupResponse),
    /// The member is waiting for the rebalance; call
    /// [`GroupCoordinator::await_join`] with the ticket.
    Pending(JoinTicket),
}

/// A JoinGroup waiting for its rebalance to complete.
#[derive(Debug, Clone)]
pub struct JoinTicket {
    /// The group.
    pub group_id: String,
    /// The member id given to the joining member.
    pub member_id: String,
    join_seq: u64,
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
    /// Kafka error code; [`codes::NONE`] on success.
    pub error_code: i16,
    /// The group's protocol type.
    pub protocol_type: Option<String>,
    /// The chosen protocol.
    pub protocol_name: Option<String>,
    /// This member's assignment (a `ConsumerProtocol` assignment for consumers).
    pub assignment: Vec<u8>,
}

impl SyncGroupResponse {
    fn error(code: i16) -> Self {
        SyncGroupResponse {
            error_code: code,
            protocol_type: None,
            protocol_name: None,
            assignment: Vec::new(),
        }
    }
}

/// One member named in a LeaveGroup request (v3+ carries several).
#[derive(Debug, Clone, Default)]
pub struct LeavingMember {
    /// The member id (may be empty when `group_instance_id` is given).
    pub member_id: String,
    /// Static membership id, if any.
    pub group_instance_id: Option<String>,
}

/// The answer to a LeaveGroup request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaveGroupResponse {
    /// Top-level Kafka error code.
    pub error_code: i16,
    /// Per member: (member id, group instance id, error code).
    pub members: Vec<(String, Option<String>, i16)>,
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
}

/// The result of committing one partition's offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetCommitResult {
    /// Topic name.
    pub topic: String,
    /// Partition index.
    pub partition: i32,
    /// Kafka error code; [`codes::NONE`] when stored.
    pub error_code: i16,
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
    /// Per-partition error code.
    pub error_code: i16,
}

/// The answer to an OffsetFetch request (API key 9).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetFetchResponse {
    /// Top-level Kafka error code.
    pub error_code: i16,
    /// The offsets asked for (every committed one when no partitions were named).
    pub offsets: Vec<FetchedOffset>,
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
    /// Its metadata for the chosen protocol.
    pub metadata: Vec<u8>,
    /// Its current assignment.
    pub assignment: Vec<u8>,
}

/// A group as described by DescribeGroups (API key 15).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupDescription {
    /// Kafka error code (`GROUP_ID_NOT_FOUND` is reported as an empty `Dead` group, as
    /// Kafka does).
    pub error_code: i16,
    /// The group id.
    pub group_id: String,
    /// Its state.
    pub state: GroupState,
    /// The protocol type ("" if unknown).
    pub protocol_type: String,
    /// The chosen protocol ("" when not in a generation).
    pub protocol_data: String,
    /// The current generation.
    pub generation_id: i32,
    /// The leader's member id ("" if none).
    pub leader: String,
    /// The members.
    pub members: Vec<MemberDescription>,
}

/// A committed offset as the coordinator keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Committed {
    pub(crate) offset: i64,
    pub(crate) leader_epoch: i32,
    pub(crate) metadata: String,
    pub(crate) commit_timestamp: i64,
}

#[derive(Debug)]
struct Member {
    group_instance_id: Option<String>,
    client_id: String,
    client_host: String,
    protocols: Vec<(String, Vec<u8>)>,
    session_timeout: Duration,
    rebalance_timeout: Duration,
    last_heartbeat: Instant,
    /// Order in which members first joined; the earliest becomes leader.
    joined_seq: u64,
    /// Sequence of the JoinGroup this member is waiting on (0 = not waiting).
    awaiting_join: u64,
    /// The answer to that JoinGroup, once the rebalance completed.
    join_result: Option<(u64, JoinGroupResponse)>,
    /// Threads blocked in SyncGroup for this member (they count as alive).
    syncing: u32,
    assignment: Vec<u8>,
}

#[derive(Debug)]
struct Group {
    state: GroupState,
    protocol_type: Option<String>,
    protocol: Option<String>,
    generation: i32,
    leader: Option<String>,
    members: BTreeMap<String, Member>,
    /// Member ids handed out with MEMBER_ID_REQUIRED, not joined yet.
    pending: HashSet<String>,
    /// group_instance_id -> member id, for static members.
    instances: HashMap<String, String>,
    /// When a PreparingRebalance gives up on members that have not rejoined.
    rebalance_deadline: Option<Instant>,
    /// A new group's first rebalance does not complete before this.
    initial_delay_until: Option<Instant>,
    offsets: BTreeMap<(String, i32), Committed>,
}

impl Group {
    fn new() -> Self {
        Group {
            state: GroupState::Empty,
            protocol_type: None,
            protocol: None,
            generation: 0,
            leader: None,
            members: BTreeMap::new(),
            pending: HashSet::new(),
            instances: HashMap::new(),
            rebalance_deadline: None,
            initial_delay_until: None,
            offsets: BTreeMap::new(),
        }
    }
}

#[derive(Debug, Default)]
struct State {
    groups: HashMap<String, Group>,
    /// Counter for member ids and join sequence numbers.
    seq: u64,
}

struct Inner {
    config: CoordinatorConfig,
    state: Mutex<State>,
    /// Notified on every state change; join/sync waiters and the reaper wait on it.
    changed: Condvar,
    closed: AtomicBool,
    journal: Mutex<Option<Arc<dyn OffsetJournal>>>,
    reaper: Mutex<Option<JoinHandle<()>>>,
}

/// The group coordinator of a broker (see the module documentation for the protocol and
/// the list of methods). Cheap to clone; every clone is the same coordinator.
#[derive(Clone)]
pub struct GroupCoordinator {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for GroupCoordinator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupCoordinator")
            .field("config", &self.inner.config)
            .field("closed", &self.inner.closed.load(Ordering::Relaxed))
            .finish()
    }
}

impl GroupCoordinator {
    /// A coordinator with no offset journal (offsets kept in memory only) and no reaper
    /// thread. The broker attaches the `__consumer_offsets` journal and starts the reaper.
    pub fn new(config: CoordinatorConfig) -> Self {
        GroupCoordinator {
            inner: Arc::new(Inner {
                config,
                state: Mutex::new(State::default()),
                changed: Condvar::new(),
                closed: AtomicBool::new(false),
                journal: Mutex::new(None),
                reaper: Mutex::new(None),
            }),
        }
    }

    /// The coordinator's settings.
    pub fn config(&self) -> &CoordinatorConfig {
        &self.inner.config
    }

    /// Where committed offsets are written from now on.
    pub(crate) fn set_journal(&self, journal: Arc<dyn OffsetJournal>) {
        *self.inner.journal.lock() = Some(journal);
    }

    /// Loads committed offsets read back from `__consumer_offsets` (latest record per key
    /// wins; a tombstone deletes).
    pub(crate) fn load_offsets(&self, entries: Vec<offsets::Entry>) {
        let mut st = self.inner.state.lock();
        for entry in entries {
            match entry {
                offsets::Entry::Commit {
                    group,
                    topic,
                    partition,
                    value,
                } => {
                    st.groups
                        .entry(group)
                        .or_insert_with(Group::new)
                        .offsets
                        .insert((topic, partition), value);
                }
                offsets::Entry::Delete {
                    group,
                    topic,
                    partition,
                } => {
                    if let Some(g) = st.groups.get_mut(&group) {
                        g.offsets.remove(&(topic, partition));
                    }
                }
            }
        }
        st.groups
            .retain(|_, g| !g.offsets.is_empty() || !g.members.is_empty());
    }

    /// Starts the session reaper thread (idempotent).
    pub(crate) fn start_reaper(&self) -> Result<()> {
        let mut slot = self.inner.reaper.lock();
        if slot.is_some() {
            return Ok(());
        }
        let inner = Arc::clone(&self.inner);
        let handle = std::thread::Builder::new()
            .name("tidelog-group-reaper".into())
            .spawn(move || reaper_loop(&inner))
            .map_err(|e| crate::Error::io("spawn group reaper thread for", "<coordinator>", e))?;
        *slot = Some(handle);
        Ok(())
    }

    /// Stops the coordinator: blocked JoinGroup and SyncGroup calls return
    /// `COORDINATOR_NOT_AVAILABLE`, later calls too, and the reaper thread is joined.
    pub fn shutdown(&self) {
        self.inner.closed.store(true, Ordering::Release);
        {
            let _st = self.inner.state.lock();
            self.inner.changed.notify_all();
        }
        let handle = self.inner.reaper.lock().take();
        if let Some(handle) = handle {
            let _ = handle.join();
        }
    }

    /// True once [`shutdown`](Self::shutdown) was called.
    pub fn is_closed(&self) -> bool {
        self.inner.closed.load(Ordering::Acquire)
    }

    /// JoinGroup: adds or refreshes the member and blocks until the rebalance it
    /// triggers (or joins) completes, or `timeout` passes (then `REBALANCE_IN_PROGRESS`
    /// is returned and the member stays in the group, as if its request were still
    /// pending; it must rejoin).
    pub fn join_group(&self, req: JoinGroupRequest, timeout: Duration) -> JoinGroupResponse {
        match self.begin_join(req) {
            JoinStart::Done(resp) => resp,
            JoinStart::Pending(ticket) => match self.await_join(&ticket, timeout) {
                Some(resp) => resp,
                None => JoinGroupResponse::error(codes::REBALANCE_IN_PROGRESS, &ticket.member_id),
            },
        }
    }

    /// The first half of JoinGroup: validates the request, registers the member and
    /// starts (or joins) a rebalance, without waiting.
    pub fn begin_join(&self, req: JoinGroupRequest) -> JoinStart {
        let cfg = &self.inner.config;
        if self.is_closed() {
            return JoinStart::Done(JoinGroupResponse::error(
                codes::COORDINATOR_NOT_AVAILABLE,
                &req.member_id,
            ));
        }
        if req.group_id.is_empty() {
            return JoinStart::Done(JoinGroupResponse::error(
                codes::INVALID_GROUP_ID,
                &req.member_id,
            ));
        }
        if req.session_timeout < cfg.min_session_timeout
            || req.session_timeout > cfg.max_session_timeout
        {
            return JoinStart::Done(JoinGroupResponse::error(
                codes::INVALID_SESSION_TIMEOUT,
                &req.member_id,
            ));
        }
        if req.protocol_type.is_empty() || req.protocols.is_empty() {
            return JoinStart::Done(JoinGroupResponse::error(
                codes::INCONSISTENT_GROUP_PROTOCOL,
                &req.member_id,
            ));
        }
        let now = Instant::now();
        let mut st = self.inner.state.lock();
        st.seq += 1;
        let seq = st.seq;
        let exists = st.groups.contains_key(&req.group_id);
        if !exists && !req.member_id.is_empty() {
            return JoinStart::Done(JoinGroupResponse::error(
                codes::UNKNOWN_MEMBER_ID,
                &req.member_id,
            ));
        }
        let group = st
            .groups
            .entry(req.group_id.clone())
            .or_insert_with(Group::new);
        if group.state == GroupState::Dead {
            return JoinStart::Done(JoinGroupResponse::error(
                codes::COORDINATOR_NOT_AVAILABLE,
                &req.member_id,
            ));
        }
        // Protocol compatibility with the group's current members.
        if !group.members.is_empty() {
            if group.protocol_type.as_deref() != Some(req.protocol_type.as_str()) {
                return JoinStart::Done(JoinGroupResponse::error(
                    codes::INCONSISTENT_GROUP_PROTOCOL,
                    &req.member_id,
                ));
            }
            let common = common_protocols(group, Some(&req.member_id));
            if !req
                .protocols
                .iter()
                .any(|(name, _)| common.as_ref().is_none_or(|c| c.contains(name)))
            {
                return JoinStart::Done(JoinGroupResponse::error(
                    codes::INCONSISTENT_GROUP_PROTOCOL,
                    &req.member_id,
                ));
            }
        }

        let mut member_id = req.member_id.clone();
        if member_id.is_empty() {
            // Static member coming back: it takes over its old entry's id slot.
            if let Some(instance) = &req.group_instance_id
                && let Some(old) = group.instances.remove(instance)
            {
                group.members.remove(&old);
                if group.leader.as_deref() == Some(old.as_str()) {
                    group.leader = None;
                }
            }
            if group.members.len() + group.pending.len() >= cfg.max_group_size {
                return JoinStart::Done(JoinGroupResponse::error(
                    codes::GROUP_MAX_SIZE_REACHED,
                    "",
                ));
            }
            let prefix = req
                .group_instance_id
                .as_deref()
                .unwrap_or(if req.client_id.is_empty() {
                    "member"
                } else {
                    req.client_id.as_str()
                });
            member_id = format!("{prefix}-{seq:016x}");
            if req.require_known_member_id && req.group_instance_id.is_none() {
                group.pending.insert(member_id.clone());
                if group.members.is_empty() && group.state == GroupState::Empty {
                    // Keep the (otherwise empty) group alive until the member rejoins.
                }
                return JoinStart::Done(JoinGroupResponse::error(
                    codes::MEMBER_ID_REQUIRED,
                    &member_id,
                ));
            }
        } else {
            if let Some(instance) = &req.group_instance_id
                && let Some(current) = group.instances.get(instance)
                && *current != member_id
            {
                return JoinStart::Done(JoinGroupResponse::error(
                    codes::FENCED_INSTANCE_ID,
                    &member_id,
                ));
            }
            if !group.members.contains_key(&member_id) && !group.pending.remove(&member_id) {
                return JoinStart::Done(JoinGroupResponse::error(
                    codes::UNKNOWN_MEMBER_ID,
                    &member_id,
                ));
            }
        }

        let is_new = !group.members.contains_key(&member_id);
        let member = group.members.entry(member_id.clone()).or_insert(Member {
            group_instance_id: req.group_instance_id.clone(),
            client_id: req.client_id.clone(),
            client_host: req.client_host.clone(),
            protocols: Vec::new(),
            session_timeout: req.session_timeout,
            rebalance_timeout: req.rebalance_timeout,
            last_heartbeat: now,
            joined_seq: seq,
            awaiting_join: 0,
            join_result: None,
            syncing: 0,
            assignment: Vec::new(),
        });
        member.protocols = req.protocols.clone();
        member.session_timeout = req.session_timeout;
        member.rebalance_timeout = req.rebalance_timeout.max(Duration::from_millis(1));
        member.last_heartbeat = now;
        member.awaiting_join = seq;
        member.join_result = None;
        if let Some(instance) = &req.group_instance_id {
            group.instances.insert(instance.clone(), member_id.clone());
        }
        if is_new && group.members.len() == 1 {
            group.protocol_type = Some(req.protocol_type.clone());
        }
        match group.state {
            GroupState::PreparingRebalance => {}
            GroupState::Empty => {
                if !cfg.initial_rebalance_delay.is_zero() {
                    group.initial_delay_until = Some(now + cfg.initial_rebalance_delay);
                }
                prepare_rebalance(group, now);
            }
            _ => prepare_rebalance(group, now),
        }
        try_complete_join(group, now);
        self.inner.changed.notify_all();
        JoinStart::Pending(JoinTicket {
            group_id: req.group_id,
            member_id,
            join_seq: seq,
        })
    }

    /// The second half of JoinGroup: waits up to `timeout` for the rebalance to
    /// complete. `None` if it did not complete in time (the member may call again).
    pub fn await_join(&self, ticket: &JoinTicket, timeout: Duration) -> Option<JoinGroupResponse> {
        let deadline = Instant::now() + timeout;
        let mut st = self.inner.state.lock();
        loop {
            if self.is_closed() {
                return Some(JoinGroupResponse::error(
                    codes::COORDINATOR_NOT_AVAILABLE,
                    &ticket.member_id,
                ));
            }
            let now = Instant::now();
            let Some(group) = st.groups.get_mut(&ticket.group_id) else {
                return Some(JoinGroupResponse::error(
                    codes::UNKNOWN_MEMBER_ID,
                    &ticket.member_id,
                ));
            };
            if try_complete_join(group, now) {
                self.inner.changed.notify_all();
            }
            let Some(member) = group.members.get_mut(&ticket.member_id) else {
                return Some(JoinGroupResponse::error(
                    codes::UNKNOWN_MEMBER_ID,
                    &ticket.member_id,
                ));
            };
            if let Some((seq, _)) = &member.join_result
                && *seq == ticket.join_seq
            {
                let (_, resp) = member.join_result.take()?;
                member.last_heartbeat = now;
                return Some(resp);
            }
            if member.awaiting_join != ticket.join_seq && member.join_result.is_none() {
                // A newer JoinGroup of the same member replaced this one.
                return Some(JoinGroupResponse::error(
                    codes::UNKNOWN_MEMBER_ID,
                    &ticket.member_id,
                ));
            }
            if now >= deadline {
                return None;
            }
            let mut wake = deadline;
            if let Some(d) = group.rebalance_deadline {
                wake = wake.min(d);
            }
            if let Some(d) = group.initial_delay_until {
                wake = wake.min(d);
            }
            self.inner
                .changed
                .wait_until(&mut st, wake.max(now + Duration::from_millis(1)));
        }
    }

    /// SyncGroup: the leader hands in every member's assignment; followers wait (up to
    /// `timeout`) for it. Answers the member's own assignment, `REBALANCE_IN_PROGRESS`
    /// if the group started another rebalance meanwhile, or `REQUEST_TIMED_OUT` if the
    /// leader has not synced within `timeout` (the member may call again; a leader that
    /// never syncs is removed when its session expires).
    pub fn sync_group(&self, req: SyncGroupRequest, timeout: Duration) -> SyncGroupResponse {
        if self.is_closed() {
            return SyncGroupResponse::error(codes::COORDINATOR_NOT_AVAILABLE);
        }
        let deadline = Instant::now() + timeout;
        let mut st = self.inner.state.lock();
        let Some(group) = st.groups.get_mut(&req.group_id) else {
            return SyncGroupResponse::error(codes::UNKNOWN_MEMBER_ID);
        };
        if let Some(code) = check_member(group, &req.member_id, req.group_instance_id.as_deref()) {
            return SyncGroupResponse::error(code);
        }
        if req.generation_id != group.generation {
            return SyncGroupResponse::error(codes::ILLEGAL_GENERATION);
        }
        if req
            .protocol_type
            .as_ref()
            .is_some_and(|p| group.protocol_type.as_ref() != Some(p))
            || req
                .protocol_name
                .as_ref()
                .is_some_and(|p| group.protocol.as_ref() != Some(p))
        {
            return SyncGroupResponse::error(codes::INCONSISTENT_GROUP_PROTOCOL);
        }
        match group.state {
            GroupState::PreparingRebalance => {
                return SyncGroupResponse::error(codes::REBALANCE_IN_PROGRESS);
            }
            GroupState::Empty | GroupState::Dead => {
                return SyncGroupResponse::error(codes::UNKNOWN_MEMBER_ID);
            }
            GroupState::CompletingRebalance => {
                let now = Instant::now();
                if let Some(m) = group.members.get_mut(&req.member_id) {
                    m.last_heartbeat = now;
                }
                if group.leader.as_deref() == Some(req.member_id.as_str()) {
                    let given: HashMap<String, Vec<u8>> = req.assignments.into_iter().collect();
                    for (id, m) in group.members.iter_mut() {
                        m.assignment = given.get(id).cloned().unwrap_or_default();
                    }
                    group.state = GroupState::Stable;
                    self.inner.changed.notify_all();
                }
            }
            GroupState::Stable => {}
        }
        // Wait for the leader's assignment of this generation.
        let generation = req.generation_id;
        if let Some(m) = group.members.get_mut(&req.member_id) {
            m.syncing += 1;
        }
        let result = loop {
            let Some(group) = st.groups.get_mut(&req.group_id) else {
                break SyncGroupResponse::error(codes::UNKNOWN_MEMBER_ID);
            };
            if self.is_closed() {
                break SyncGroupResponse::error(codes::COORDINATOR_NOT_AVAILABLE);
            }
            let Some(member) = group.members.get_mut(&req.member_id) else {
                break SyncGroupResponse::error(codes::UNKNOWN_MEMBER_ID);
            };
            let now = Instant::now();
            member.last_heartbeat = now;
            if group.generation != generation
                || group.state == GroupState::PreparingRebalance
                || group.state == GroupState::Empty
            {
                break SyncGroupResponse::error(codes::REBALANCE_IN_PROGRESS);
            }
            if group.state == GroupState::Stable {
                break SyncGroupResponse {
                    error_code: codes::NONE,
                    protocol_type: group.protocol_type.clone(),
                    protocol_name: group.protocol.clone(),
                    assignment: member.assignment.clone(),
                };
            }
            if now >= deadline {
                // Still waiting for the leader: the member may simply call again.
                break SyncGroupResponse::error(codes::REQUEST_TIMED_OUT);
            }
            self.inner.changed.wait_until(&mut st, deadline);
        };
        if let Some(m) = st
            .groups
            .get_mut(&req.group_id)
            .and_then(|g| g.members.get_mut(&req.member_id))
        {
            m.syncing = m.syncing.saturating_sub(1);
            m.last_heartbeat = Instant::now();
        }
        result
    }

    /// Heartbeat: keeps the member's session alive. Answers `REBALANCE_IN_PROGRESS`
    /// when the member must rejoin.
    pub fn heartbeat(
        &self,
        group_id: &str,
        generation_id: i32,
        member_id: &str,
        group_instance_id: Option<&str>,
    ) -> i16 {
        if self.is_closed() {
            return codes::COORDINATOR_NOT_AVAILABLE;
        }
        let mut st = self.inner.state.lock();
        let Some(group) = st.groups.get_mut(group_id) else {
            return codes::UNKNOWN_MEMBER_ID;
        };
        if let Some(code) = check_member(group, member_id, group_instance_id) {
            return code;
        }
        if let Some(m) = group.members.get_mut(member_id) {
            m.last_heartbeat = Instant::now();
        }
        match group.state {
            GroupState::PreparingRebalance => codes::REBALANCE_IN_PROGRESS,
            GroupState::Empty | GroupState::Dead => codes::UNKNOWN_MEMBER_ID,
            _ if generation_id != group.generation => codes::ILLEGAL_GENERATION,
            _ => codes::NONE,
        }
    }

    /// LeaveGroup: removes the members and starts a rebalance for the rest.
    pub fn leave_group(&self, group_id: &str, members: &[LeavingMember]) -> LeaveGroupResponse {
        if self.is_closed() {
            return LeaveGroupResponse {
                error_code: codes::COORDINATOR_NOT_AVAILABLE,
                members: Vec::new(),
            };
        }
        let now = Instant::now();
        let mut st = self.inner.state.lock();
        let Some(group) = st.groups.get_mut(group_id) else {
            return LeaveGroupResponse {
                error_code: codes::UNKNOWN_MEMBER_ID,
                members: members
                    .iter()
                    .map(|m| {
                        (
                            m.member_id.clone(),
                            m.group_instance_id.clone(),
                            codes::UNKNOWN_MEMBER_ID,
                        )
                    })
                    .collect(),
            };
        };
        let mut out = Vec::with_capacity(members.len());
        for m in members {
            let id = if m.member_id.is_empty() {
                m.group_instance_id
                    .as_ref()
                    .and_then(|i| group.instances.get(i).cloned())
                    .unwrap_or_default()
            } else {
                m.member_id.clone()
            };
            let code = match check_member(group, &id, m.group_instance_id.as_deref()) {
                Some(code) => code,
                None => {
                    remove_member(group, &id, now);
                    codes::NONE
                }
            };
            out.push((m.member_id.clone(), m.group_instance_id.clone(), code));
        }
        self.inner.changed.notify_all();
        let error_code = if members.len() == 1 {
            out[0].2
        } else {
            codes::NONE
        };
        LeaveGroupResponse {
            error_code,
            members: out,
        }
    }

    /// OffsetCommit: stores the offsets durably (appended to `__consumer_offsets`) and
    /// answers one error code per partition.
    pub fn offset_commit(&self, req: OffsetCommitRequest) -> Vec<OffsetCommitResult> {
        let all = |code: i16| {
            req.offsets
                .iter()
                .map(|o| OffsetCommitResult {
                    topic: o.topic.clone(),
                    partition: o.partition,
                    error_code: code,
                })
                .collect::<Vec<_>>()
        };
        if self.is_closed() {
            return all(codes::COORDINATOR_NOT_AVAILABLE);
        }
        if req.group_id.is_empty() {
            return all(codes::INVALID_GROUP_ID);
        }
        let mut st = self.inner.state.lock();
        let simple = req.generation_id < 0 && req.member_id.is_empty();
        let code = match st.groups.get_mut(&req.group_id) {
            None if simple => None,
            None => Some(codes::UNKNOWN_MEMBER_ID),
            Some(group) if simple => {
                (!group.members.is_empty()).then_some(codes::UNKNOWN_MEMBER_ID)
            }
            Some(group) => {
                match check_member(group, &req.member_id, req.group_instance_id.as_deref()) {
                    Some(code) => Some(code),
                    None if req.generation_id != group.generation => {
                        Some(codes::ILLEGAL_GENERATION)
                    }
                    None if group.state == GroupState::CompletingRebalance => {
                        Some(codes::REBALANCE_IN_PROGRESS)
                    }
                    None => {
                        if let Some(m) = group.members.get_mut(&req.member_id) {
                            m.last_heartbeat = Instant::now();
                        }
                        None
                    }
                }
            }
        };
        if let Some(code) = code {
            return all(code);
        }
        let ts = now_ms();
        let max_meta = self.inner.config.offset_metadata_max_bytes;
        let mut results = Vec::with_capacity(req.offsets.len());
        let mut accepted = Vec::with_capacity(req.offsets.len());
        for o in &req.offsets {
            let code = if o.metadata.as_ref().is_some_and(|m| m.len() > max_meta) {
                codes::OFFSET_METADATA_TOO_LARGE
            } else if o.partition < 0 || o.topic.is_empty() {
                codes::UNKNOWN_TOPIC_OR_PARTITION
            } else {
                accepted.push((
                    o.topic.clone(),
                    o.partition,
                    Committed {
                        offset: o.offset,
                        leader_epoch: o.leader_epoch,
                        metadata: o.metadata.clone().unwrap_or_default(),
                        commit_timestamp: ts,
                    },
                ));
                codes::NONE
            };
            results.push(OffsetCommitResult {
                topic: o.topic.clone(),
                partition: o.partition,
                error_code: code,
            });
        }
        if accepted.is_empty() {
            return results;
        }
        let journal = self.inner.journal.lock().clone();
        if let Some(journal) = journal {
            let records: Vec<(Vec<u8>, Option<Vec<u8>>)> = accepted
                .iter()
                .map(|(t, p, c)| {
                    (
                        offsets::encode_key(&req.group_id, t, *p),
                        Some(offsets::encode_value(c)),
                    )
                })
                .collect();
            if journal.append(&records).is_err() {
                for r in &mut results {
                    if r.error_code == codes::NONE {
                        r.error_code = codes::KAFKA_STORAGE_ERROR;
                    }
                }
                return results;
            }
        }
        let group = st
            .groups
            .entry(req.group_id.clone())
            .or_insert_with(Group::new);
        for (t, p, c) in accepted {
            group.offsets.insert((t, p), c);
        }
        results
    }

    /// OffsetFetch: the group's committed offsets for `partitions`, or all of them when
    /// `partitions` is None. Partitions without a commit answer offset -1.
    pub fn offset_fetch(
        &self,
        group_id: &str,
        partitions: Option<&[(String, i32)]>,
    ) -> OffsetFetchResponse {
        if self.is_closed() {
            return OffsetFetchResponse {
                error_code: codes::COORDINATOR_NOT_AVAILABLE,
                offsets: Vec::new(),
            };
        }
        let st = self.inner.state.lock();
        let group = st.groups.get(group_id);
        let fetched = |t: &str, p: i32, c: Option<&Committed>| FetchedOffset {
            topic: t.to_string(),
            partition: p,
            offset: c.map_or(-1, |c| c.offset),
            leader_epoch: c.map_or(-1, |c| c.leader_epoch),
            metadata: c.map(|c| c.metadata.clone()).unwrap_or_default(),
            error_code: codes::NONE,
        };
        let offsets = match partitions {
            Some(list) => list
                .iter()
                .map(|(t, p)| fetched(t, *p, group.and_then(|g| g.offsets.get(&(t.clone(), *p)))))
                .collect(),
            None => group
                .map(|g| {
                    g.offsets
                        .iter()
                        .map(|((t, p), c)| fetched(t, *p, Some(c)))
                        .collect()
                })
                .unwrap_or_default(),
        };
        OffsetFetchResponse {
            error_code: codes::NONE,
            offsets,
        }
    }

    /// ListGroups: every group the coordinator knows (including groups that only have
    /// committed offsets).
    pub fn list_groups(&self) -> Vec<ListedGroup> {
        let st = self.inner.state.lock();
        let mut out: Vec<ListedGroup> = st
            .groups
            .iter()
            .map(|(id, g)| ListedGroup {
                group_id: id.clone(),
                protocol_type: g.protocol_type.clone().unwrap_or_default(),
                state: g.state,
            })
            .collect();
        out.sort_by(|a, b| a.group_id.cmp(&b.group_id));
        out
    }

    /// DescribeGroups for one group. An unknown group is described as `Dead` with no
    /// members, as Kafka does.
    pub fn describe_group(&self, group_id: &str) -> GroupDescription {
        let st = self.inner.state.lock();
        let Some(g) = st.groups.get(group_id) else {
            return GroupDescription {
                error_code: codes::NONE,
                group_id: group_id.to_string(),
                state: GroupState::Dead,
                protocol_type: String::new(),
                protocol_data: String::new(),
                generation_id: -1,
                leader: String::new(),
                members: Vec::new(),
            };
        };
        let protocol = g.protocol.clone().unwrap_or_default();
        let stable = g.state == GroupState::Stable;
        GroupDescription {
            error_code: if self.is_closed() {
                codes::COORDINATOR_NOT_AVAILABLE
            } else {
                codes::NONE
            },
            group_id: group_id.to_string(),
            state: g.state,
            protocol_type: g.protocol_type.clone().unwrap_or_default(),
            protocol_data: if stable {
                protocol.clone()
            } else {
                String::new()
            },
            generation_id: g.generation,
            leader: g.leader.clone().unwrap_or_default(),
            members: g
                .members
                .iter()
                .map(|(id, m)| MemberDescription {
                    member_id: id.clone(),
                    group_instance_id: m.group_instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    metadata: if stable {
                        protocol_metadata(m, &protocol)
                    } else {
                        Vec::new()
                    },
                    assignment: if stable {
                        m.assignment.clone()
                    } else {
                        Vec::new()
                    },
                })
                .collect(),
        }
    }

    /// DeleteGroups for one group: refuses a group with members (`NON_EMPTY_GROUP`),
    /// otherwise deletes its committed offsets (tombstones in `__consumer_offsets`).
    pub fn delete_group(&self, group_id: &str) -> i16 {
        if self.is_closed() {
            return codes::COORDINATOR_NOT_AVAILABLE;
        }
        let mut st = self.inner.state.lock();
        let Some(group) = st.groups.get(group_id) else {
            return codes::GROUP_ID_NOT_FOUND;
        };
        if !group.members.is_empty() || !group.pending.is_empty() {
            return codes::NON_EMPTY_GROUP;
        }
        let journal = self.inner.journal.lock().clone();
        if let Some(journal) = journal {
            let records: Vec<(Vec<u8>, Option<Vec<u8>>)> = group
                .offsets
                .keys()
                .map(|(t, p)| (offsets::encode_key(group_id, t, *p), None))
                .collect();
            if !records.is_empty() && journal.append(&records).is_err() {
                return codes::KAFKA_STORAGE_ERROR;
            }
        }
        st.groups.remove(group_id);
        codes::NONE
    }

    /// Removes a member as if its session had timed out (the reaper's action, for
    /// tests that simulate a dead member without waiting).
    #[doc(hidden)]
    pub fn expire_member(&self, group_id: &str, member_id: &str) {
        let mut st = self.inner.state.lock();
        if let Some(group) = st.groups.get_mut(group_id) {
            remove_member(group, member_id, Instant::now());
        }
        self.inner.changed.notify_all();
    }

    /// One pass of the reaper: expires sessions, ends rebalances past their deadline.
    /// Returns the next instant at which something may time out.
    fn tick(&self, st: &mut State, now: Instant) -> Option<Instant> {
        tick_groups(st, now)
    }
}

fn tick_groups(st: &mut State, now: Instant) -> Option<Instant> {
    let mut next: Option<Instant> = None;
    let mut soonest = |t: Instant| {
        next = Some(next.map_or(t, |n| n.min(t)));
    };
    for group in st.groups.values_mut() {
        let expired: Vec<String> = group
            .members
            .iter()
            .filter(|(_, m)| {
                m.awaiting_join == 0
                    && m.syncing == 0
                    && now >= m.last_heartbeat + m.session_timeout
            })
            .map(|(id, _)| id.clone())
            .collect();
        for id in expired {
            remove_member(group, &id, now);
        }
        try_complete_join(group, now);
        for m in group.members.values() {
            if m.awaiting_join == 0 && m.syncing == 0 {
                soonest(m.last_heartbeat + m.session_timeout);
            }
        }
        if let Some(d) = group.rebalance_deadline {
            soonest(d);
        }
        if let Some(d) = group.initial_delay_until {
            soonest(d);
        }
    }
    next
}

fn reaper_loop(inner: &Arc<Inner>) {
    let coordinator = GroupCoordinator {
        inner: Arc::clone(inner),
    };
    let mut st = inner.state.lock();
    while !inner.closed.load(Ordering::Acquire) {
        let now = Instant::now();
        let next = coordinator.tick(&mut st, now);
        inner.changed.notify_all();
        let wake = next.unwrap_or(now + Duration::from_secs(1));
        // Bounded so a newly joined member's session is checked without a notify.
        let wake = wake
            .min(now + Duration::from_secs(1))
            .max(now + Duration::from_millis(1));
        inner.changed.wait_until(&mut st, wake);
    }
}

/// The protocols every member except `except` supports (None when there is no other
/// member).
fn common_protocols(group: &Group, except: Option<&str>) -> Option<HashSet<String>> {
    let mut common: Option<HashSet<String>> = None;
    for (id, m) in &group.members {
        if Some(id.as_str()) == except {
            continue;
        }
        let names: HashSet<String> = m.protocols.iter().map(|(n, _)| n.clone()).collect();
        common = Some(match common {
            None => names,
            Some(c) => c.intersection(&names).cloned().collect(),
        });
    }
    common
}

fn protocol_metadata(m: &Member, protocol: &str) -> Vec<u8> {
    m.protocols
        .iter()
        .find(|(n, _)| n == protocol)
        .map(|(_, meta)| meta.clone())
        .unwrap_or_default()
}

/// Checks that `member_id` belongs to the group (and is not fenced by a newer static
/// member). None if it does.
fn check_member(group: &Group, member_id: &str, instance: Option<&str>) -> Option<i16> {
    if let Some(instance) = instance
        && let Some(current) = group.instances.get(instance)
        && current != member_id
    {
        return Some(codes::FENCED_INSTANCE_ID);
    }
    if group.members.contains_key(member_id) {
        None
    } else {
        Some(codes::UNKNOWN_MEMBER_ID)
    }
}

fn prepare_rebalance(group: &mut Group, now: Instant) {
    if group.state != GroupState::PreparingRebalance {
        let timeout = group
            .members
            .values()
            .map(|m| m.rebalance_timeout)
            .max()
            .unwrap_or(Duration::ZERO);
        group.rebalance_deadline = Some(now + timeout);
        group.state = GroupState::PreparingRebalance;
    }
}

fn remove_member(group: &mut Group, member_id: &str, now: Instant) {
    let Some(m) = group.members.remove(member_id) else {
        return;
    };
    if let Some(instance) = &m.group_instance_id
        && group.instances.get(instance).map(String::as_str) == Some(member_id)
    {
        group.instances.remove(instance);
    }
    if group.leader.as_deref() == Some(member_id) {
        group.leader = None;
    }
    match group.state {
        GroupState::Stable | GroupState::CompletingRebalance => {
            if group.members.is_empty() {
                group.generation += 1;
                group.state = GroupState::Empty;
                group.protocol = None;
                group.rebalance_deadline = None;
            } else {
                prepare_rebalance(group, now);
            }
        }
        GroupState::PreparingRebalance => {
            try_complete_join(group, now);
        }
        GroupState::Empty | GroupState::Dead => {}
    }
}

/// Completes the PreparingRebalance phase if every member has rejoined or the deadline
/// passed. Returns true if it completed.
fn try_complete_join(group: &mut Group, now: Instant) -> bool {
    if group.state != GroupState::PreparingRebalance {
        return false;
    }
    if let Some(until) = group.initial_delay_until {
        if now < until {
            return false;
        }
        group.initial_delay_until = None;
    }
    let all_joined = group.members.values().all(|m| m.awaiting_join != 0);
    let past_deadline = group.rebalance_deadline.is_some_and(|d| now >= d);
    if !all_joined && !past_deadline {
        return false;
    }
    // Members that did not rejoin in time are dropped.
    let laggards: Vec<String> = group
        .members
        .iter()
        .filter(|(_, m)| m.awaiting_join == 0)
        .map(|(id, _)| id.clone())
        .collect();
    for id in laggards {
        if let Some(m) = group.members.remove(&id)
            && let Some(instance) = &m.group_instance_id
        {
            group.instances.remove(instance);
        }
        if group.leader.as_deref() == Some(id.as_str()) {
            group.leader = None;
        }
    }
    group.generation += 1;
    group.rebalance_deadline = None;
    if group.members.is_empty() {
        group.state = GroupState::Empty;
        group.protocol = None;
        group.leader = None;
        return true;
    }
    // Choose the protocol: among those every member supports, each member votes for
    // its most preferred one; most votes wins (ties: the leader's preference).
    let common = common_protocols(group, None).unwrap_or_default();
    let leader = match &group.leader {
        Some(l) if group.members.contains_key(l) => l.clone(),
        _ => group
            .members
            .iter()
            .min_by_key(|(_, m)| m.joined_seq)
            .map(|(id, _)| id.clone())
            .unwrap_or_default(),
    };
    let mut votes: HashMap<&str, usize> = HashMap::new();
    for m in group.members.values() {
        if let Some((name, _)) = m.protocols.iter().find(|(n, _)| common.contains(n)) {
            *votes.entry(name.as_str()).or_default() += 1;
        }
    }
    let leader_prefs: Vec<String> = group
        .members
        .get(&leader)
        .map(|m| m.protocols.iter().map(|(n, _)| n.clone()).collect())
        .unwrap_or_default();
    let best = votes.values().copied().max().unwrap_or(0);
    let protocol = leader_prefs
        .iter()
        .find(|n| votes.get(n.as_str()).copied() == Some(best))
        .cloned()
        .or_else(|| common.iter().next().cloned())
        .unwrap_or_default();
    group.protocol = Some(protocol.clone());
    group.leader = Some(leader.clone());
    group.state = GroupState::CompletingRebalance;
    let mut by_join: Vec<(&String, &Member)> = group.members.iter().collect();
    by_join.sort_by_key(|(_, m)| m.joined_seq);
    let all_members: Vec<JoinGroupMember> = by_join
        .iter()
        .map(|(id, m)| JoinGroupMember {
            member_id: (*id).clone(),
            group_instance_id: m.group_instance_id.clone(),
            metadata: protocol_metadata(m, &protocol),
        })
        .collect();
    let generation = group.generation;
    let protocol_type = group.protocol_type.clone();
    for (id, m) in group.members.iter_mut() {
        let resp = JoinGroupResponse {
            error_code: codes::NONE,
            generation_id: generation,
            protocol_type: protocol_type.clone(),
            protocol_name: Some(protocol.clone()),
            leader: leader.clone(),
            member_id: id.clone(),
            members: if *id == leader {
                all_members.clone()
            } else {
                Vec::new()
            },
        };
        m.join_result = Some((m.awaiting_join, resp));
        m.awaiting_join = 0;
        m.assignment.clear();
        m.last_heartbeat = now;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn coordinator() -> GroupCoordinator {
        GroupCoordinator::new(CoordinatorConfig {
            min_session_timeout: Duration::from_millis(1),
            ..CoordinatorConfig::default()
        })
    }

    fn join_req(group: &str, member: &str) -> JoinGroupRequest {
        JoinGroupRequest {
            group_id: group.into(),
            member_id: member.into(),
            protocol_type: "consumer".into(),
            protocols: vec![("range".into(), vec![1]), ("roundrobin".into(), vec![2])],
            session_timeout: Duration::from_secs(10),
            rebalance_timeout: Duration::from_secs(10),
            client_id: "c".into(),
            ..Default::default()
        }
    }

    fn pending(start: JoinStart) -> JoinTicket {
        match start {
            JoinStart::Pending(t) => t,
            JoinStart::Done(r) => panic!("join answered at once: {r:?}"),
        }
    }

    #[test]
    fn two_members_form_a_generation_and_sync() {
        let c = coordinator();
        let a = c.join_group(join_req("g", ""), Duration::from_secs(1));
        assert_eq!(a.error_code, codes::NONE);
        assert_eq!(a.generation_id, 1);
        assert_eq!(a.leader, a.member_id);
        assert_eq!(a.members.len(), 1);

        // A second member triggers a rebalance; the first learns it from a heartbeat.
        let tb = pending(c.begin_join(join_req("g", "")));
        assert_eq!(
            c.heartbeat("g", 1, &a.member_id, None),
            codes::REBALANCE_IN_PROGRESS
        );
        let ta = pending(c.begin_join(join_req("g", &a.member_id)));
        let ra = c.await_join(&ta, Duration::from_secs(1)).unwrap();
        let rb = c.await_join(&tb, Duration::from_secs(1)).unwrap();
        assert_eq!(ra.generation_id, 2);
        assert_eq!(rb.generation_id, 2);
        assert_eq!(ra.leader, a.member_id);
        assert_eq!(ra.members.len(), 2);
        assert!(rb.members.is_empty());
        assert_eq!(ra.protocol_name.as_deref(), Some("range"));

        let sync = c.sync_group(
            SyncGroupRequest {
                group_id: "g".into(),
                generation_id: 2,
                member_id: ra.member_id.clone(),
                assignments: vec![
                    (ra.member_id.clone(), vec![7]),
                    (rb.member_id.clone(), vec![8]),
                ],
                ..Default::default()
            },
            Duration::from_secs(1),
        );
        assert_eq!(sync.assignment, vec![7]);
        let sync_b = c.sync_group(
            SyncGroupRequest {
                group_id: "g".into(),
                generation_id: 2,
                member_id: rb.member_id.clone(),
                ..Default::default()
            },
            Duration::from_secs(1),
        );
        assert_eq!(sync_b.error_code, codes::NONE);
        assert_eq!(sync_b.assignment, vec![8]);
        assert_eq!(c.describe_group("g").state, GroupState::Stable);
        assert_eq!(c.heartbeat("g", 2, &rb.member_id, None), codes::NONE);
        assert_eq!(
            c.heartbeat("g", 1, &rb.member_id, None),
            codes::ILLEGAL_GENERATION
        );

        // Leaving starts a rebalance for the rest.
        let left = c.leave_group(
            "g",
            &[LeavingMember {
                member_id: rb.member_id.clone(),
                group_instance_id: None,
            }],
        );
        assert_eq!(left.error_code, codes::NONE);
        assert_eq!(c.describe_group("g").state, GroupState::PreparingRebalance);
    }

    #[test]
    fn member_id_required_then_rejoin() {
        let c = coordinator();
        let mut req = join_req("g", "");
        req.require_known_member_id = true;
        let first = c.join_group(req.clone(), Duration::from_secs(1));
        assert_eq!(first.error_code, codes::MEMBER_ID_REQUIRED);
        assert!(!first.member_id.is_empty());
        req.member_id = first.member_id.clone();
        let second = c.join_group(req, Duration::from_secs(1));
        assert_eq!(second.error_code, codes::NONE);
        assert_eq!(second.member_id, first.member_id);
    }

    #[test]
    fn bad_requests_get_kafka_codes() {
        let c = coordinator();
        assert_eq!(
            c.join_group(join_req("g", "nobody"), Duration::from_secs(1))
                .error_code,
            codes::UNKNOWN_MEMBER_ID
        );
        assert_eq!(
            c.join_group(join_req("", ""), Duration::from_secs(1))
                .error_code,
            codes::INVALID_GROUP_ID
        );
        let mut other = join_req("g", "");
        other.protocols = vec![("sticky".into(), vec![])];
        c.join_group(join_req("g", ""), Duration::from_secs(1));
        assert_eq!(
            c.join_group(other, Duration::from_secs(1)).error_code,
            codes::INCONSISTENT_GROUP_PROTOCOL
        );
        assert_eq!(c.heartbeat("nope", 1, "x", None), codes::UNKNOWN_MEMBER_ID);
    }

    #[test]
    fn simple_commits_and_fetches() {
        let c = coordinator();
        let res = c.offset_commit(OffsetCommitRequest {
            group_id: "g".into(),
            generation_id: -1,
            offsets: vec![CommitOffset {
                topic: "t".into(),
                partition: 0,
                offset: 5,
                leader_epoch: -1,
                metadata: None,
            }],
            ..Default::default()
        });
        assert_eq!(res[0].error_code, codes::NONE);
        let f = c.offset_fetch("g", Some(&[("t".into(), 0), ("t".into(), 1)]));
        assert_eq!(f.offsets[0].offset, 5);
        assert_eq!(f.offsets[1].offset, -1);
        assert_eq!(c.list_groups()[0].group_id, "g");
        assert_eq!(c.delete_group("g"), codes::NONE);
        assert_eq!(c.offset_fetch("g", None).offsets, vec![]);
    }

    #[test]
    fn expired_session_removes_member() {
        let c = coordinator();
        let mut req = join_req("g", "");
        req.session_timeout = Duration::from_millis(20);
        let a = c.join_group(req, Duration::from_secs(1));
        c.start_reaper().unwrap();
        let start = Instant::now();
        while c.heartbeat("g", a.generation_id, &a.member_id, None) != codes::UNKNOWN_MEMBER_ID {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "member never expired"
            );
            std::thread::sleep(Duration::from_millis(30));
        }
        assert_eq!(c.describe_group("g").state, GroupState::Empty);
        c.shutdown();
        assert_eq!(
            c.heartbeat("g", 1, "x", None),
            codes::COORDINATOR_NOT_AVAILABLE
        );
    }
}
