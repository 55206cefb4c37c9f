//! The group coordinator: Kafka's classic consumer group protocol.
//!
//! One coordinator serves every group of a broker. The network server calls it for the
//! group APIs, and in-process [`GroupConsumer`](crate::GroupConsumer) members call the
//! same methods with the same bytes (Kafka's `ConsumerProtocol` subscription and
//! assignment), so an in-process member and a Kafka client can share a group.
//!
//! It comes in two parts:
//!
//! - [`Group`], a pure state machine: each transition takes the request and an explicit
//!   `now` and returns an outcome or a [`GroupError`]. No threads, locks or clock, so a
//!   test can drive it through any interleaving.
//! - [`GroupCoordinator`], a thin concurrent shell: one lock over every group, a
//!   condition variable that blocked JoinGroup and SyncGroup calls wait on, the reaper
//!   thread that expires sessions, and the `__consumer_offsets` journal that every
//!   commit and every new generation is written to before it is acknowledged.
//!
//! # Methods (the API the network server codes against)
//!
//! | Kafka API | method | blocks? |
//! |---|---|---|
//! | JoinGroup (11) | [`GroupCoordinator::join_group`], or [`begin_join`](GroupCoordinator::begin_join) then [`await_join`](GroupCoordinator::await_join) | until the round completes, or the timeout |
//! | SyncGroup (14) | [`GroupCoordinator::sync_group`] | a follower waits for the leader's assignment |
//! | Heartbeat (12) | [`GroupCoordinator::heartbeat`] | no |
//! | LeaveGroup (13) | [`GroupCoordinator::leave_group`] | no |
//! | OffsetCommit (8) | [`GroupCoordinator::offset_commit`] | appends to `__consumer_offsets` |
//! | OffsetFetch (9) | [`GroupCoordinator::offset_fetch`], [`offset_fetch_stable`](GroupCoordinator::offset_fetch_stable) (v7+ `require_stable`) | no |
//! | TxnOffsetCommit (28) | [`GroupCoordinator::txn_offset_commit`] | appends to `__consumer_offsets` |
//! | (a marker written to `__consumer_offsets`) | [`GroupCoordinator::complete_txn_offsets`] | no |
//! | ListGroups (16) | [`GroupCoordinator::list_groups`] | no |
//! | DescribeGroups (15) | [`GroupCoordinator::describe_group`] | no |
//! | DeleteGroups (42) | [`GroupCoordinator::delete_group`] | appends tombstones |
//! | OffsetDelete (47) | [`GroupCoordinator::offset_delete`] | appends tombstones |
//!
//! # Protocol (as in Kafka's classic `GroupCoordinator`)
//!
//! States: `Empty -> PreparingRebalance -> CompletingRebalance -> Stable`, back to
//! `PreparingRebalance` whenever a member joins, leaves, changes its subscription or
//! misses its session timeout. A round completes when every known member (and every
//! member id handed out with `MEMBER_ID_REQUIRED`) has sent JoinGroup, or when the
//! longest rebalance timeout of the members has passed; dynamic members that did not
//! rejoin are removed. Then the generation is bumped, a protocol every member supports
//! is chosen, and the leader computes the assignment client-side; its SyncGroup stores
//! one assignment per member, the group's metadata is written to `__consumer_offsets`
//! (Kafka's `GroupMetadataValue`), and the group is `Stable`.
//!
//! Static members (KIP-345, `group.instance.id`) keep their entry across restarts of
//! the client: rejoining with an empty member id, the instance gets a new member id and,
//! in a Stable group, its old assignment without a rebalance; the old id is fenced
//! (`FENCED_INSTANCE_ID`).
//!
//! # Loading, unloading and restarts
//!
//! `__consumer_offsets` has several partitions (`offsets.topic.num.partitions`, 50 by
//! default, fixed at the topic's creation), and a group's records are all in the
//! partition [`partition_for`] its id (Kafka's hash). The coordinator loads partitions
//! one by one ([`GroupCoordinator::unload_partition`] drops one): a single node loads
//! them all, a cluster node those it leads. A group whose partition is not loaded here
//! answers [`GroupError::NotCoordinator`]. Loading a partition replays it: committed
//! offsets, and each group's last stored generation,
//! restored `Stable` with its members, who go on heartbeating and committing with
//! their old ids and generation; no rebalance is needed. Member ids carry a per-load
//! incarnation, so a restarted coordinator never hands out an id it gave before.
//! Consumer-protocol groups (KIP-848, `consumer_group.rs`) are rebuilt the same way
//! from their records (Kafka's types 3 to 8), with their member epochs and assignments.
//!
//! # Transactional offsets
//!
//! TxnOffsetCommit's offsets are pending until the producer's transaction ends
//! (`txn_offsets`): written at once, as a transactional batch of the producer, but
//! shown by OffsetFetch only once [`GroupCoordinator::complete_txn_offsets`] is told of
//! its COMMIT marker (an ABORT drops them). Loading does the same from the log: a
//! producer's offsets count where a COMMIT marker of it follows them, and stay pending
//! without a marker.

mod commit_order;
mod consumer_group;
mod consumer_records;
mod consumer_shell;
mod consumer_types;
mod events;
mod group;
pub mod group_configs;
pub(crate) mod offsets;
pub(crate) mod protocol;
mod server_assignor;
#[cfg(feature = "server")]
mod share_fence;
mod share_members;
mod share_offsets;
mod share_partition;
mod share_read;
pub(crate) mod share_records;
mod share_shell;
mod sorted_map;
#[cfg(test)]
mod tests_migration;
#[cfg(test)]
mod tests_share;
mod txn_offsets;
mod types;
pub(crate) mod wire;

pub use crate::config::ConsumerGroupMigrationPolicy;
pub use crate::config::CoordinatorConfig;
pub use crate::config::ShareConfig;
pub use crate::error::GroupError;
pub use crate::error::{RecordState, ShareError};
pub use consumer_group::{
    ConsumerGroup, JOIN_EPOCH, LEAVE_EPOCH, STATIC_LEAVE_EPOCH, TopicsImage, validate_heartbeat,
};
pub use consumer_records::topic_id;
pub use consumer_types::{
    ConsumerGroupDescription, ConsumerGroupState, ConsumerHeartbeatRequest,
    ConsumerHeartbeatResponse, ConsumerMemberDescription, GroupType, TopicPartitionList,
    TypedListedGroup,
};
pub use group::{Group, PreparedCommit, PreparedOffsetDelete, load_groups};
pub use offsets::JournalRecord;
pub use share_members::{ShareHeartbeat, ShareHeartbeatResponse, ShareMemberState};
pub use share_offsets::ShareStartOffset;
pub use share_partition::{
    AcknowledgeType, AcquiredRecord, ShareLimits, SharePartition, StateBatch,
};
pub(crate) use share_read::ShareReadMode;
#[cfg(feature = "server")]
pub(crate) use share_read::ShareSource;
pub use share_records::SHARE_GROUP_STATE_TOPIC;
#[cfg(feature = "server")]
pub(crate) use share_shell::{PartitionJournal, keyed_records, read_log, scan_log};
pub use share_shell::{
    RecordVisitor, ShareCoordinator, ShareJournal, ShareMemberDescription, ShareStateStore,
};
pub use types::{
    CommitOffset, FetchedOffset, GroupDescription, GroupState, JoinGroupMember, JoinGroupRequest,
    JoinGroupResponse, JoinStart, JoinTicket, LeavingMember, ListedGroup, MemberDescription,
    MemberOrigin, OffsetCommitRequest, OffsetCommitResult, SyncGroupRequest, SyncGroupResponse,
    TxnOffsetCommitRequest,
};

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::storage::now_ms;
use offsets::OffsetJournal;

/// How the coordinator tells an in-process member that its group is rebalancing.
#[derive(Clone)]
pub(crate) struct RebalanceWaker {
    pub(crate) flag: Arc<AtomicBool>,
    pub(crate) signal: Arc<crate::topic::Signal>,
}

impl RebalanceWaker {
    fn wake(&self) {
        self.flag.store(true, Ordering::Release);
        self.signal.notify();
    }
}

impl std::fmt::Debug for RebalanceWaker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RebalanceWaker")
            .field("raised", &self.flag.load(Ordering::Relaxed))
            .finish()
    }
}

/// Tells whether a topic partition exists (OffsetCommit answers
/// `UNKNOWN_TOPIC_OR_PARTITION` for those that do not).
pub(crate) type PartitionCheck = Arc<dyn Fn(&str, i32) -> bool + Send + Sync>;

/// The groups of one loaded partition of `__consumer_offsets`.
struct Loaded {
    /// Boxed: the table's empty buckets then cost a pointer, not a whole group.
    groups: HashMap<String, Box<Group>>,
    /// Consumer-protocol groups (KIP-848); their offsets are in `groups`.
    consumer: HashMap<String, ConsumerGroup>,
    incarnation: u64,
    /// Where this partition's records are written (None: kept in memory only).
    journal: Option<Arc<dyn OffsetJournal>>,
    /// Transactional offsets not yet decided by a marker (reset with every load).
    txn: txn_offsets::PendingTxnOffsets,
}

impl Loaded {
    fn new(incarnation: u64, journal: Option<Arc<dyn OffsetJournal>>) -> Loaded {
        Loaded {
            groups: HashMap::new(),
            consumer: HashMap::new(),
            incarnation,
            journal,
            txn: txn_offsets::PendingTxnOffsets::default(),
        }
    }
}

struct State {
    /// The partitions of `__consumer_offsets`: a group's partition is
    /// [`partition_for`] its id.
    partitions: i32,
    /// The partitions loaded here (this node coordinates their groups), by index.
    loaded: std::collections::BTreeMap<i32, Loaded>,
    partition_check: Option<PartitionCheck>,
    /// In-process members to wake when their group starts a rebalance.
    wakers: HashMap<String, HashMap<String, RebalanceWaker>>,
}

impl State {
    /// The `__consumer_offsets` partition of `group_id`.
    fn partition_of(&self, group_id: &str) -> i32 {
        partition_for(group_id, self.partitions)
    }

    /// The loaded partition that coordinates `group_id`, if it is loaded here.
    fn shard(&self, group_id: &str) -> Option<&Loaded> {
        self.loaded.get(&self.partition_of(group_id))
    }

    /// [`shard`](Self::shard), mutable.
    fn shard_mut(&mut self, group_id: &str) -> Option<&mut Loaded> {
        let p = self.partition_of(group_id);
        self.loaded.get_mut(&p)
    }

    /// The loaded partition of `group_id`, or NOT_COORDINATOR.
    fn coordinating(&mut self, group_id: &str) -> Result<&mut Loaded, GroupError> {
        self.shard_mut(group_id).ok_or(GroupError::NotCoordinator)
    }

    /// Wakes and forgets the in-process members of the groups of partition `index`.
    fn drop_wakers_of(&mut self, index: i32) {
        let partitions = self.partitions;
        self.wakers.retain(|group_id, wakers| {
            if partition_for(group_id, partitions) != index {
                return true;
            }
            for w in wakers.values() {
                w.wake();
            }
            false
        });
    }
}

/// The `__consumer_offsets` partition of `group_id` among `partitions`: Kafka's
/// `Utils.abs(groupId.hashCode()) % partitions`, with Java's `String.hashCode` over
/// UTF-16 code units (so a group has the partition, hence the coordinator, that a Kafka
/// broker would give it). The same rule places transactional ids in
/// `__transaction_state`.
///
/// ```
/// use tidelog::coordinator::partition_for;
/// // Java: "hello".hashCode() == 99162322.
/// assert_eq!(partition_for("hello", 50), 99_162_322 % 50);
/// assert_eq!(partition_for("any", 1), 0);
/// ```
pub fn partition_for(key: &str, partitions: i32) -> i32 {
    let hash = key.encode_utf16().fold(0i32, |h, unit| {
        h.wrapping_mul(31).wrapping_add(i32::from(unit))
    });
    // Kafka's Utils.abs masks the sign bit (i32::MIN maps to 0).
    (hash & 0x7fff_ffff) % partitions.max(1)
}

/// An OffsetCommit's batch in the log, waiting for the in-sync replicas.
type WaitingCommit = (
    offsets::JournalWait,
    commit_order::CommitTicket,
    group::PreparedCommit,
);

/// An OffsetCommit whose batch is appended
/// ([`GroupCoordinator::offset_commit_started`]): [`finish`](Self::finish) waits for
/// the in-sync replicas and stores the offsets. Dropped unfinished, it finishes (the
/// wait included), so that no commit is left waiting in the coordinator's order.
pub(crate) struct StartedCommit {
    coordinator: GroupCoordinator,
    group_id: String,
    results: Vec<OffsetCommitResult>,
    waiting: Option<WaitingCommit>,
}

impl StartedCommit {
    /// Waits for the in-sync replicas (if the batch was appended), stores what no
    /// later change superseded, and gives each partition's result, in the request's
    /// order.
    pub(crate) fn finish(mut self) -> Vec<OffsetCommitResult> {
        self.end();
        std::mem::take(&mut self.results)
    }

    fn end(&mut self) {
        if let Some(waiting) = self.waiting.take() {
            self.coordinator
                .finish_commit(&self.group_id, waiting, &mut self.results);
        }
    }
}

impl Drop for StartedCommit {
    fn drop(&mut self) {
        self.end();
    }
}

struct Inner {
    config: CoordinatorConfig,
    state: Mutex<State>,
    /// Notified on every state change; join/sync waiters and the reaper wait on it.
    changed: Condvar,
    closed: AtomicBool,
    reaper: Mutex<Option<JoinHandle<()>>>,
    incarnations: AtomicU64,
    /// Offset commits waiting for the replicas, without `state`'s lock (taken after it
    /// when both are held).
    order: Mutex<commit_order::CommitOrder>,
    /// The groups' own settings (none: the broker's for every group).
    group_configs: parking_lot::RwLock<Option<Arc<dyn group_configs::GroupConfigStore>>>,
}

/// The group coordinator of a broker (see the module documentation for the protocol
/// and the list of methods). Cheap to clone; every clone is the same coordinator.
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

/// Writes the metadata a transition asked to store. On a journal error the group's
/// generation is abandoned (members rejoin) and the error returned.
fn persist(
    group: &mut Group,
    journal: Option<&Arc<dyn OffsetJournal>>,
    now: Instant,
) -> Result<(), GroupError> {
    let Some(record) = group.take_pending_store(now_ms()) else {
        return Ok(());
    };
    events::group_stored(group);
    let Some(journal) = journal else {
        return Ok(());
    };
    journal.append(&[record]).map_err(|e| {
        group.store_failed(now);
        GroupError::Journal(Arc::new(e))
    })
}

/// Wakes the in-process members of `group_id` if it started a rebalance since `before`
/// (its rebalance count then).
fn wake_group(
    wakers: &HashMap<String, HashMap<String, RebalanceWaker>>,
    group_id: &str,
    before: u64,
    after: u64,
) {
    if after != before
        && let Some(wakers) = wakers.get(group_id)
    {
        for w in wakers.values() {
            w.wake();
        }
    }
}

impl GroupCoordinator {
    /// A loaded coordinator with no journal (offsets and groups kept in memory only)
    /// and no reaper thread. A broker loads it from `__consumer_offsets` and starts
    /// the reaper.
    pub fn new(config: CoordinatorConfig) -> Self {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let c = GroupCoordinator {
            inner: Arc::new(Inner {
                config,
                state: Mutex::new(State {
                    partitions: 1,
                    loaded: std::collections::BTreeMap::new(),
                    partition_check: None,
                    wakers: HashMap::new(),
                }),
                changed: Condvar::new(),
                closed: AtomicBool::new(false),
                reaper: Mutex::new(None),
                incarnations: AtomicU64::new(seed),
                order: Mutex::default(),
                group_configs: parking_lot::RwLock::new(None),
            }),
        };
        let incarnation = c.next_incarnation();
        c.inner
            .state
            .lock()
            .loaded
            .insert(0, Loaded::new(incarnation, None));
        c
    }

    fn next_incarnation(&self) -> u64 {
        // Spread successive loads apart so the low bits used in member ids differ.
        self.inner
            .incarnations
            .fetch_add(0x9E37_79B9, Ordering::Relaxed)
    }

    /// The coordinator's settings.
    pub fn config(&self) -> &CoordinatorConfig {
        &self.inner.config
    }

    /// Sets how OffsetCommit tells whether a partition exists.
    pub(crate) fn set_partition_check(&self, check: PartitionCheck) {
        self.inner.state.lock().partition_check = Some(check);
    }

    /// Becomes the coordinator of every group as the only partition of
    /// `__consumer_offsets`: replays `entries` (oldest first: committed offsets and
    /// group metadata) and writes to `journal` from now on. Replaces whatever was
    /// loaded before.
    pub(crate) fn load(&self, entries: Vec<offsets::Entry>, journal: Arc<dyn OffsetJournal>) {
        let logged = entries.into_iter().map(offsets::Logged::Plain).collect();
        let mut st = self.inner.state.lock();
        st.partitions = 1;
        st.loaded.clear();
        drop(st);
        self.load_logged(0, logged, journal);
    }

    /// Loads partition `index` from its records as logged: transactional offsets count
    /// where their producer's COMMIT marker is, and stay pending without a marker.
    pub(crate) fn load_logged(
        &self,
        index: i32,
        logged: Vec<offsets::Logged>,
        journal: Arc<dyn OffsetJournal>,
    ) {
        let incarnation = self.next_incarnation();
        let (entries, pending) = txn_offsets::resolve(logged);
        let groups = group::groups_from_entries(entries, Instant::now(), incarnation);
        let mut shard = Loaded::new(incarnation, Some(journal));
        shard.groups = groups
            .into_iter()
            .map(|(id, g)| (id, Box::new(g)))
            .collect();
        shard.txn = pending;
        let mut st = self.inner.state.lock();
        st.loaded.insert(index, shard);
        self.inner.order.lock().reset(index);
        self.inner.changed.notify_all();
    }

    /// Sets the number of partitions of `__consumer_offsets`, which places every group
    /// ([`partition_for`]): read from the topic, fixed at its creation.
    pub(crate) fn set_partition_count(&self, partitions: i32) {
        let mut st = self.inner.state.lock();
        if st.partitions != partitions.max(1) {
            st.partitions = partitions.max(1);
            self.inner.changed.notify_all();
        }
    }

    /// The number of partitions of `__consumer_offsets` groups are placed over.
    pub fn partition_count(&self) -> i32 {
        self.inner.state.lock().partitions
    }

    /// The `__consumer_offsets` partition whose leader coordinates `group_id`.
    pub fn partition_of(&self, group_id: &str) -> i32 {
        self.inner.state.lock().partition_of(group_id)
    }

    /// Becomes the coordinator of the groups of `partition` (of `__consumer_offsets`):
    /// reads it whole and appends to it from now on (a single node loads every
    /// partition when it opens; a cluster node each one it becomes the leader of).
    pub(crate) fn load_partition(
        &self,
        partition: crate::topic::Partition,
    ) -> crate::error::Result<()> {
        let index = partition.index();
        let (logged, records) = offsets::load(&partition)?;
        self.load_logged(index, logged, Arc::new(offsets::LogJournal { partition }));
        self.restore_consumer_groups(index, &records)?;
        Ok(())
    }

    /// Stops coordinating every group (a cluster node before it leads any partition of
    /// `__consumer_offsets`): every group API answers [`GroupError::NotCoordinator`]
    /// until the next load, and blocked JoinGroup and SyncGroup calls return it at
    /// once.
    pub fn unload(&self) {
        let mut st = self.inner.state.lock();
        let indexes: Vec<i32> = st.loaded.keys().copied().collect();
        st.loaded.clear();
        let mut order = self.inner.order.lock();
        for index in indexes {
            order.reset(index);
        }
        drop(order);
        for wakers in st.wakers.values() {
            for w in wakers.values() {
                w.wake();
            }
        }
        st.wakers.clear();
        self.inner.changed.notify_all();
    }

    /// Stops coordinating the groups of partition `index` of `__consumer_offsets` (a
    /// cluster node that lost its leadership): they answer
    /// [`GroupError::NotCoordinator`] until it is loaded again; the other partitions
    /// go on.
    pub fn unload_partition(&self, index: i32) {
        let mut st = self.inner.state.lock();
        st.loaded.remove(&index);
        self.inner.order.lock().reset(index);
        st.drop_wakers_of(index);
        self.inner.changed.notify_all();
    }

    /// True while some partition is loaded (the coordinator answers group APIs for
    /// its groups).
    pub fn is_loaded(&self) -> bool {
        !self.inner.state.lock().loaded.is_empty()
    }

    /// True while the partition of `group_id` is loaded here: this node coordinates
    /// the group.
    pub fn coordinates(&self, group_id: &str) -> bool {
        self.inner.state.lock().shard(group_id).is_some()
    }

    /// The partitions of `__consumer_offsets` loaded here, ascending.
    pub fn loaded_partitions(&self) -> Vec<i32> {
        self.inner.state.lock().loaded.keys().copied().collect()
    }

    /// Starts the session reaper thread (idempotent).
    pub(crate) fn start_reaper(&self) -> crate::error::Result<()> {
        let mut slot = self.inner.reaper.lock();
        if slot.is_some() {
            return Ok(());
        }
        let inner = Arc::clone(&self.inner);
        let handle = std::thread::Builder::new()
            .name("tidelog-group-reaper".into())
            .spawn(move || reaper_loop(&inner))
            .map_err(|e| {
                crate::error::Error::io("spawn group reaper thread for", "<coordinator>", e)
            })?;
        *slot = Some(handle);
        Ok(())
    }

    /// Stops the coordinator: blocked JoinGroup and SyncGroup calls return
    /// [`GroupError::CoordinatorNotAvailable`], later calls too, and the reaper thread
    /// is joined.
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

    fn check_open(&self) -> Result<(), GroupError> {
        if self.is_closed() {
            Err(GroupError::CoordinatorNotAvailable)
        } else {
            Ok(())
        }
    }

    /// Runs `f` on the group under the lock, then persists what it asked to store and
    /// wakes in-process members if it started a rebalance. A missing group is created
    /// when `missing` is None, else that error is returned.
    fn with_group<R>(
        &self,
        group_id: &str,
        missing: Option<GroupError>,
        f: impl FnOnce(&mut Group, Instant) -> Result<R, GroupError>,
    ) -> Result<R, GroupError> {
        self.with_group_txn(group_id, missing, |g, _, now| f(g, now))
    }

    /// [`with_group`](Self::with_group), `f` also given the pending transactional
    /// offsets.
    fn with_group_txn<R>(
        &self,
        group_id: &str,
        missing: Option<GroupError>,
        f: impl FnOnce(
            &mut Group,
            &mut txn_offsets::PendingTxnOffsets,
            Instant,
        ) -> Result<R, GroupError>,
    ) -> Result<R, GroupError> {
        self.check_open()?;
        let now = Instant::now();
        let mut guard = self.inner.state.lock();
        let st = &mut *guard;
        let p = st.partition_of(group_id);
        let loaded = st.loaded.get_mut(&p).ok_or(GroupError::NotCoordinator)?;
        let incarnation = loaded.incarnation;
        let group = match (loaded.groups.contains_key(group_id), missing) {
            (true, _) | (false, None) => loaded
                .groups
                .entry(group_id.to_string())
                .or_insert_with(|| Box::new(Group::new(group_id, incarnation))),
            (false, Some(e)) => return Err(e),
        };
        let before = group.rebalances();
        let out = f(group, &mut loaded.txn, now);
        let stored = persist(group, loaded.journal.as_ref(), now);
        let after = group.rebalances();
        wake_group(&st.wakers, group_id, before, after);
        self.inner.changed.notify_all();
        let out = out?;
        stored?;
        Ok(out)
    }

    /// JoinGroup: adds or refreshes the member and blocks until the rebalance it
    /// triggers (or joins) completes, or `timeout` passes (then
    /// [`GroupError::RebalanceInProgress`]: the member stays in the group as if its
    /// request were still pending, and must rejoin).
    pub fn join_group(
        &self,
        req: JoinGroupRequest,
        timeout: Duration,
    ) -> Result<JoinGroupResponse, GroupError> {
        match self.begin_join(req)? {
            JoinStart::Done(resp) => Ok(resp),
            JoinStart::Pending(ticket) => self
                .await_join(&ticket, timeout)
                .unwrap_or(Err(GroupError::RebalanceInProgress)),
        }
    }

    /// The first half of JoinGroup: validates the request, registers the member and
    /// starts (or joins) a rebalance, without waiting.
    pub fn begin_join(&self, req: JoinGroupRequest) -> Result<JoinStart, GroupError> {
        group::validate_join(&req, &self.inner.config)?;
        if let Some(resp) = self.classic_join_to_consumer(&req)? {
            return Ok(JoinStart::Done(resp));
        }
        let missing =
            (!req.member_id.is_empty()).then(|| GroupError::UnknownMemberId(req.member_id.clone()));
        let cfg = &self.inner.config;
        self.with_group(&req.group_id, missing, |g, now| g.join(&req, cfg, now))
    }

    /// The second half of JoinGroup: waits up to `timeout` for the round to complete.
    /// `None` if it did not complete in time (the member may call again).
    pub fn await_join(
        &self,
        ticket: &JoinTicket,
        timeout: Duration,
    ) -> Option<Result<JoinGroupResponse, GroupError>> {
        let deadline = Instant::now() + timeout;
        let mut guard = self.inner.state.lock();
        loop {
            if self.is_closed() {
                return Some(Err(GroupError::CoordinatorNotAvailable));
            }
            let now = Instant::now();
            let st = &mut *guard;
            let p = st.partition_of(&ticket.group_id);
            let Some(loaded) = st.loaded.get_mut(&p) else {
                return Some(Err(GroupError::NotCoordinator));
            };
            let Some(group) = loaded.groups.get_mut(&ticket.group_id) else {
                return Some(Err(GroupError::UnknownMemberId(ticket.member_id.clone())));
            };
            let before = group.rebalances();
            let next = group.tick(now);
            let _ = persist(group, loaded.journal.as_ref(), now);
            wake_group(&st.wakers, &ticket.group_id, before, group.rebalances());
            if let Some(answer) = group.join_result(ticket, now) {
                self.inner.changed.notify_all();
                return Some(answer);
            }
            if now >= deadline {
                return None;
            }
            let wake = next.map_or(deadline, |n| n.min(deadline));
            self.inner
                .changed
                .wait_until(&mut guard, wake.max(now + Duration::from_millis(1)));
        }
    }

    /// SyncGroup: the leader hands in every member's assignment (stored in
    /// `__consumer_offsets` before anyone is answered); followers wait up to `timeout`
    /// for it. Errors: [`GroupError::RebalanceInProgress`] if the group started another
    /// rebalance meanwhile, [`GroupError::RequestTimedOut`] if the leader has not
    /// synced within `timeout` (the member may call again; a leader that never syncs is
    /// removed when its session expires).
    pub fn sync_group(
        &self,
        req: SyncGroupRequest,
        timeout: Duration,
    ) -> Result<SyncGroupResponse, GroupError> {
        if let Some(resp) =
            self.with_consumer_group(&req.group_id, |g, now| g.classic_sync(&req, now))?
        {
            return Ok(resp);
        }
        let deadline = Instant::now() + timeout;
        let missing = Some(GroupError::UnknownMemberId(req.member_id.clone()));
        if let Some(resp) = self.with_group(&req.group_id, missing, |g, now| g.sync(&req, now))? {
            return Ok(resp);
        }
        let instance = req.group_instance_id.as_deref();
        let mut guard = self.inner.state.lock();
        loop {
            let now = Instant::now();
            let closed = self.is_closed();
            let st = &mut *guard;
            let coordinating = st.shard(&req.group_id).is_some();
            let Some(group) = st
                .shard_mut(&req.group_id)
                .and_then(|l| l.groups.get_mut(&req.group_id))
            else {
                return Err(if closed {
                    GroupError::CoordinatorNotAvailable
                } else if !coordinating {
                    GroupError::NotCoordinator
                } else {
                    GroupError::UnknownMemberId(req.member_id.clone())
                });
            };
            let answer = if closed {
                Some(Err(GroupError::CoordinatorNotAvailable))
            } else {
                group.sync_result(&req.member_id, instance, req.generation_id, now)
            };
            let answer =
                answer.or_else(|| (now >= deadline).then_some(Err(GroupError::RequestTimedOut)));
            if let Some(answer) = answer {
                group.end_sync_wait(&req.member_id, now);
                return answer;
            }
            self.inner.changed.wait_until(&mut guard, deadline);
        }
    }

    /// Heartbeat: keeps the member's session alive. [`GroupError::RebalanceInProgress`]
    /// when the member must rejoin.
    pub fn heartbeat(
        &self,
        group_id: &str,
        generation_id: i32,
        member_id: &str,
        group_instance_id: Option<&str>,
    ) -> Result<(), GroupError> {
        if let Some(out) = self.with_consumer_group(group_id, |g, now| {
            g.classic_heartbeat(member_id, group_instance_id, generation_id, now)
        })? {
            return Ok(out);
        }
        let missing = Some(GroupError::UnknownMemberId(member_id.to_string()));
        self.with_group(group_id, missing, |g, now| {
            g.heartbeat(generation_id, member_id, group_instance_id, now)
        })
    }

    /// LeaveGroup: removes the members and starts a rebalance for the rest. One result
    /// per member named (an unknown group answers `UnknownMemberId` for each).
    pub fn leave_group(
        &self,
        group_id: &str,
        members: &[LeavingMember],
    ) -> Result<Vec<Result<(), GroupError>>, GroupError> {
        let unknown = || {
            members
                .iter()
                .map(|m| Err(GroupError::UnknownMemberId(m.member_id.clone())))
                .collect()
        };
        let cfg = &self.inner.config;
        if let Some(out) =
            self.with_consumer_group(group_id, |g, _| Ok(g.classic_leave(members, cfg)))?
        {
            return Ok(out);
        }
        match self.with_group(group_id, Some(GroupError::GroupIdNotFound), |g, now| {
            Ok(g.leave(members, now))
        }) {
            Err(GroupError::GroupIdNotFound) => Ok(unknown()),
            other => other,
        }
    }

    /// OffsetCommit: stores the offsets durably (appended to `__consumer_offsets`
    /// before this returns) and answers one result per partition. A journal error
    /// fails every partition of the request with [`GroupError::Journal`].
    pub fn offset_commit(
        &self,
        req: OffsetCommitRequest,
    ) -> Result<Vec<OffsetCommitResult>, GroupError> {
        Ok(self.offset_commit_started(req)?.finish())
    }

    /// [`offset_commit`](Self::offset_commit) up to its batch's append to
    /// `__consumer_offsets` (under the coordinator's lock, in the order of these calls):
    /// the wait for the in-sync replicas, and storing the offsets after it, run when
    /// the returned commit is [finished](StartedCommit::finish). A server answers a
    /// connection's later commits meanwhile (their appends follow this one in the log).
    pub(crate) fn offset_commit_started(
        &self,
        req: OffsetCommitRequest,
    ) -> Result<StartedCommit, GroupError> {
        if req.group_id.is_empty() {
            return Err(GroupError::InvalidGroupId(req.group_id));
        }
        let consumer = self.check_consumer_commit(&req)?;
        // A group that does not exist takes a commit of a negative generation as
        // Kafka does (from an admin client, or a consumer that assigns itself
        // partitions; a KIP-848 client sends its own member id with it): a simple
        // group is made.
        let simple = req.generation_id < 0;
        let missing = (!simple && !consumer).then_some(GroupError::IllegalGeneration {
            given: req.generation_id,
            current: -1,
        });
        let journal = self.journal_of(&req.group_id);
        let offsets_partition = self.partition_of(&req.group_id);
        let group_id = req.group_id.clone();
        let mut waiting = None;
        let results = self.commit_with(
            &group_id,
            &req.offsets,
            missing,
            |g, now| match consumer {
                true => Ok(()),
                false => g.check_commit(&req, now),
            },
            |g, txn, prepared| {
                let Some(journal) = &journal else {
                    for (t, p, _) in prepared.accepted() {
                        txn.plain_commit(&req.group_id, t, *p);
                    }
                    g.apply_commit(prepared);
                    return Ok(());
                };
                // Appended in order under the lock; the replicas are waited for
                // without it (commit_order.rs).
                let wait = journal
                    .append_deferred(&g.commit_records(&prepared))
                    .map_err(|e| GroupError::Journal(Arc::new(e)))?;
                let ticket = self
                    .inner
                    .order
                    .lock()
                    .start(&req.group_id, offsets_partition);
                waiting = Some((wait, ticket, prepared));
                Ok(())
            },
        )?;
        Ok(StartedCommit {
            coordinator: self.clone(),
            group_id,
            results,
            waiting,
        })
    }

    /// The end of an OffsetCommit whose batch is in the log: waits for the in-sync
    /// replicas without the coordinator's lock, then stores what no later change
    /// superseded (commit_order.rs); a failed wait fails every accepted partition.
    fn finish_commit(
        &self,
        group_id: &str,
        (wait, ticket, prepared): WaitingCommit,
        results: &mut [OffsetCommitResult],
    ) {
        let waited = wait();
        let mut guard = self.inner.state.lock();
        let st = &mut *guard;
        let current = self
            .inner
            .order
            .lock()
            .finish(ticket, group_id, prepared.accepted());
        if let Err(e) = waited {
            let e = GroupError::Journal(Arc::new(e));
            for r in results.iter_mut().filter(|r| r.result.is_ok()) {
                r.result = Err(e.clone());
            }
            return;
        }
        let Some(shard) = st.shard_mut(group_id) else {
            return;
        };
        let Some(group) = shard.groups.get_mut(group_id) else {
            return;
        };
        for (t, p, _) in &current {
            shard.txn.plain_commit(group_id, t, *p);
        }
        group.apply_commit(group::PreparedCommit::of(current));
        self.inner.changed.notify_all();
    }

    /// TxnOffsetCommit: writes the offsets to `__consumer_offsets` at once, as a
    /// transactional batch of the producer, and holds them pending until
    /// [`complete_txn_offsets`](Self::complete_txn_offsets) is told how its transaction
    /// ended. A missing group is created, as Kafka does. Refused as a whole (KIP-447):
    /// a fenced static instance ([`GroupError::FencedInstanceId`]), a member id that is
    /// not the group's ([`GroupError::UnknownMemberId`]), another generation
    /// ([`GroupError::IllegalGeneration`]), an epoch older than the producer's
    /// ([`GroupError::InvalidProducerEpoch`]). One result per partition otherwise.
    ///
    /// Whether the producer's transaction holds the group's `__consumer_offsets`
    /// partition (AddOffsetsToTxn) is the transaction coordinator's to check.
    pub fn txn_offset_commit(
        &self,
        req: TxnOffsetCommitRequest,
    ) -> Result<Vec<OffsetCommitResult>, GroupError> {
        if req.producer_id < 0 || req.producer_epoch < 0 {
            return Err(GroupError::InvalidProducerIdMapping {
                producer_id: req.producer_id,
                epoch: req.producer_epoch,
            });
        }
        let journal = self.journal_of(&req.group_id);
        let (pid, epoch) = (req.producer_id, req.producer_epoch);
        self.commit_with(
            &req.group_id,
            &req.offsets,
            None,
            |g, _| {
                g.check_txn_commit(
                    req.generation_id,
                    &req.member_id,
                    req.group_instance_id.as_deref(),
                )
            },
            |g, txn, prepared| {
                if let Some(current) = txn.epoch_of(pid).filter(|&c| c > epoch) {
                    return Err(GroupError::InvalidProducerEpoch {
                        producer_id: pid,
                        epoch,
                        current,
                    });
                }
                if let Some(journal) = &journal {
                    journal
                        .append_txn(pid, epoch, &g.commit_records(&prepared))
                        .map_err(|e| GroupError::Journal(Arc::new(e)))?;
                }
                for (t, p, c) in prepared.accepted() {
                    let key = (req.group_id.clone(), t.clone(), *p);
                    txn.add(pid, epoch, key, c.clone());
                }
                Ok(())
            },
        )
    }

    /// Producer `producer_id`'s transaction ended: its COMMIT or ABORT marker (at
    /// `producer_epoch`) is in partition `partition` of `__consumer_offsets`. A commit
    /// makes the producer's pending transactional offsets of that partition's groups
    /// their committed offsets (but not over a plain commit made after them), an abort
    /// drops them. Nothing pending is no error: a transaction without offsets, or a
    /// marker written again.
    pub fn complete_txn_offsets(
        &self,
        partition: i32,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
    ) -> crate::error::Result<()> {
        let mut guard = self.inner.state.lock();
        let st = &mut *guard;
        let Some(loaded) = st.loaded.get_mut(&partition) else {
            // Not the coordinator: the next load reads the marker from the log.
            return Ok(());
        };
        let done = loaded.txn.complete(producer_id, producer_epoch, commit);
        let mut by_group: HashMap<String, Vec<(String, i32, offsets::Committed)>> = HashMap::new();
        for ((group, topic, partition), value) in done {
            by_group
                .entry(group)
                .or_default()
                .push((topic, partition, value));
        }
        let mut order = self.inner.order.lock();
        for (group_id, accepted) in by_group {
            order.changed(&group_id, accepted.iter().map(|(t, p, _)| (t.as_str(), *p)));
            let incarnation = loaded.incarnation;
            loaded
                .groups
                .entry(group_id.clone())
                .or_insert_with(|| Box::new(Group::new(&group_id, incarnation)))
                .apply_commit(PreparedCommit::of(accepted));
        }
        self.inner.changed.notify_all();
        Ok(())
    }

    /// What OffsetCommit and TxnOffsetCommit share: partitions that do not exist answer
    /// UNKNOWN_TOPIC_OR_PARTITION, `check` may refuse the whole request, the others are
    /// validated and `store`d (an error of it fails each of them), and the results come
    /// in the request's order.
    fn commit_with(
        &self,
        group_id: &str,
        offsets: &[CommitOffset],
        missing: Option<GroupError>,
        check: impl FnOnce(&mut Group, Instant) -> Result<(), GroupError>,
        store: impl FnOnce(
            &mut Group,
            &mut txn_offsets::PendingTxnOffsets,
            PreparedCommit,
        ) -> Result<(), GroupError>,
    ) -> Result<Vec<OffsetCommitResult>, GroupError> {
        if group_id.is_empty() {
            return Err(GroupError::InvalidGroupId(group_id.to_string()));
        }
        // Checked before taking the coordinator's lock (the check reads the topic
        // registry).
        let partition_check = self.inner.state.lock().partition_check.clone();
        let (known, unknown): (Vec<CommitOffset>, Vec<CommitOffset>) =
            offsets.iter().cloned().partition(|o| {
                partition_check
                    .as_ref()
                    .is_none_or(|c| c(&o.topic, o.partition))
            });
        let cfg = &self.inner.config;
        self.with_group_txn(group_id, missing, |g, txn, now| {
            check(g, now)?;
            let (mut results, prepared) = g.prepare_commit(&known, cfg, now_ms());
            if !prepared.is_empty()
                && let Err(e) = store(g, txn, prepared)
            {
                for r in &mut results {
                    if r.result.is_ok() {
                        r.result = Err(e.clone());
                    }
                }
            }
            results.extend(unknown.into_iter().map(|o| OffsetCommitResult {
                result: Err(GroupError::UnknownTopicOrPartition {
                    topic: o.topic.clone(),
                    partition: o.partition,
                }),
                topic: o.topic,
                partition: o.partition,
            }));
            // Back in the request's order.
            let order: HashMap<(&str, i32), usize> = offsets
                .iter()
                .enumerate()
                .map(|(i, o)| ((o.topic.as_str(), o.partition), i))
                .collect();
            results.sort_by_key(|r| order.get(&(r.topic.as_str(), r.partition)).copied());
            Ok(results)
        })
    }

    /// OffsetFetch: the group's committed offsets for `partitions`, or all of them
    /// when `partitions` is None. Partitions without a commit answer offset -1.
    pub fn offset_fetch(
        &self,
        group_id: &str,
        partitions: Option<&[(String, i32)]>,
    ) -> Result<Vec<FetchedOffset>, GroupError> {
        match self.with_group(group_id, Some(GroupError::GroupIdNotFound), |g, _| {
            Ok(g.fetch_offsets(partitions))
        }) {
            Err(GroupError::GroupIdNotFound) => {
                Ok(Group::new(group_id, 0).fetch_offsets(partitions))
            }
            other => other,
        }
    }

    /// OffsetFetch with `require_stable` (v7+, KIP-447): as
    /// [`offset_fetch`](Self::offset_fetch), but a partition for which a transaction
    /// has an offset pending answers [`GroupError::UnstableOffsetCommit`] instead (a
    /// read_committed consumer asks again once the transaction ended).
    pub fn offset_fetch_stable(
        &self,
        group_id: &str,
        partitions: Option<&[(String, i32)]>,
    ) -> Result<Vec<Result<FetchedOffset, GroupError>>, GroupError> {
        let mark = |txn: &txn_offsets::PendingTxnOffsets, fetched: Vec<FetchedOffset>| {
            fetched
                .into_iter()
                .map(|o| {
                    if txn.is_pending(group_id, &o.topic, o.partition) {
                        Err(GroupError::UnstableOffsetCommit {
                            topic: o.topic,
                            partition: o.partition,
                        })
                    } else {
                        Ok(o)
                    }
                })
                .collect()
        };
        match self.with_group_txn(group_id, Some(GroupError::GroupIdNotFound), |g, txn, _| {
            Ok(mark(txn, g.fetch_offsets(partitions)))
        }) {
            Err(GroupError::GroupIdNotFound) => {
                let st = self.inner.state.lock();
                let shard = st.shard(group_id).ok_or(GroupError::NotCoordinator)?;
                Ok(mark(
                    &shard.txn,
                    Group::new(group_id, 0).fetch_offsets(partitions),
                ))
            }
            other => other,
        }
    }

    /// ListGroups: every group the coordinator knows (including groups that only have
    /// committed offsets), sorted by id; only those in `states` when it is not empty.
    pub fn list_groups(&self, states: &[GroupState]) -> Result<Vec<ListedGroup>, GroupError> {
        self.check_open()?;
        let st = self.inner.state.lock();
        if st.loaded.is_empty() {
            return Err(GroupError::NotCoordinator);
        }
        let mut out: Vec<ListedGroup> = st
            .loaded
            .values()
            .flat_map(|l| l.groups.values())
            .map(|g| g.listed())
            .filter(|g| states.is_empty() || states.contains(&g.state))
            .collect();
        out.sort_by(|a, b| a.group_id.cmp(&b.group_id));
        Ok(out)
    }

    /// DescribeGroups for one group. An unknown group is described as `Dead` with no
    /// members and generation -1, as Kafka does.
    pub fn describe_group(&self, group_id: &str) -> Result<GroupDescription, GroupError> {
        self.refuse_classic_describe(group_id)?;
        match self.with_group(group_id, Some(GroupError::GroupIdNotFound), |g, _| {
            Ok(g.describe())
        }) {
            Err(GroupError::GroupIdNotFound) => Ok(GroupDescription {
                group_id: group_id.to_string(),
                state: GroupState::Dead,
                protocol_type: String::new(),
                protocol_data: String::new(),
                generation_id: -1,
                leader: String::new(),
                members: Vec::new(),
            }),
            other => other,
        }
    }

    /// DeleteGroups for one group: refuses a group with members
    /// ([`GroupError::NonEmptyGroup`]); otherwise journals tombstones for its offsets
    /// and its metadata, then forgets it.
    pub fn delete_group(&self, group_id: &str) -> Result<(), GroupError> {
        self.check_open()?;
        let was_consumer = self.delete_consumer_group(group_id)?;
        let mut guard = self.inner.state.lock();
        let st = &mut *guard;
        let p = st.partition_of(group_id);
        let loaded = st.loaded.get_mut(&p).ok_or(GroupError::NotCoordinator)?;
        let Some(group) = loaded.groups.get_mut(group_id) else {
            return if was_consumer {
                Ok(())
            } else {
                Err(GroupError::GroupIdNotFound)
            };
        };
        let records = group.prepare_delete()?;
        if !records.is_empty()
            && let Some(journal) = &loaded.journal
        {
            journal
                .append(&records)
                .map_err(|e| GroupError::Journal(Arc::new(e)))?;
        }
        group.mark_dead();
        loaded.groups.remove(group_id);
        self.inner.order.lock().cleared(group_id);
        st.wakers.remove(group_id);
        self.inner.changed.notify_all();
        Ok(())
    }

    /// OffsetDelete: deletes the group's committed offsets of `partitions` (tombstones
    /// in `__consumer_offsets`), except those of topics a member of the group is
    /// subscribed to ([`GroupError::GroupSubscribedToTopic`] for those). One result per
    /// partition.
    pub fn offset_delete(
        &self,
        group_id: &str,
        partitions: &[(String, i32)],
    ) -> Result<Vec<Result<(), GroupError>>, GroupError> {
        let journal = self.journal_of(group_id);
        let subscribed = self.consumer_subscribed_topics(group_id);
        self.with_group(group_id, Some(GroupError::GroupIdNotFound), |g, _| {
            let (mut results, mut records) = g.prepare_offset_delete(partitions)?;
            consumer_shell::refuse_subscribed(
                group_id,
                partitions,
                &subscribed,
                (&mut results, &mut records),
            );
            if !records.is_empty()
                && let Some(journal) = &journal
            {
                journal
                    .append(&records)
                    .map_err(|e| GroupError::Journal(Arc::new(e)))?;
            }
            let deleted: Vec<(String, i32)> = partitions
                .iter()
                .zip(&results)
                .filter(|(_, r)| r.is_ok())
                .map(|(tp, _)| tp.clone())
                .collect();
            g.remove_offsets(&deleted);
            self.inner
                .order
                .lock()
                .changed(group_id, deleted.iter().map(|(t, p)| (t.as_str(), *p)));
            Ok(results)
        })
    }

    /// Registers how to wake an in-process member when its group starts a rebalance.
    pub(crate) fn set_waker(&self, group_id: &str, member_id: &str, waker: RebalanceWaker) {
        let mut st = self.inner.state.lock();
        let live: Vec<String> = st
            .shard(group_id)
            .and_then(|l| l.groups.get(group_id))
            .map(|g| g.member_ids())
            .unwrap_or_default();
        let wakers = st.wakers.entry(group_id.to_string()).or_default();
        wakers.retain(|id, _| live.contains(id));
        wakers.insert(member_id.to_string(), waker);
    }

    /// Removes a member as if its session had timed out (the reaper's action, for
    /// tests that simulate a dead member without waiting).
    #[doc(hidden)]
    pub fn expire_member(&self, group_id: &str, member_id: &str) {
        let _ = self.with_group(group_id, Some(GroupError::GroupIdNotFound), |g, now| {
            g.expire_member(member_id, now);
            Ok(())
        });
    }

    /// One pass of the reaper over every group: expires sessions, ends rebalances past
    /// their deadline, expires the offsets of groups empty for longer than the
    /// retention, forgets groups with nothing left. Returns the next instant at which
    /// something may time out.
    fn tick(&self, st: &mut State, now: Instant) -> Option<Instant> {
        let mut next: Option<Instant> = None;
        let State { loaded, wakers, .. } = st;
        for shard in loaded.values_mut() {
            if let Some(t) = self.tick_partition(shard, wakers, now) {
                next = Some(next.map_or(t, |n| n.min(t)));
            }
        }
        next
    }

    /// [`tick`](Self::tick) of the groups of one loaded partition.
    fn tick_partition(
        &self,
        loaded: &mut Loaded,
        wakers: &mut HashMap<String, HashMap<String, RebalanceWaker>>,
        now: Instant,
    ) -> Option<Instant> {
        let retention = self.inner.config.offsets_retention;
        let wall = now_ms();
        let journal = loaded.journal.clone();
        let mut next =
            consumer_shell::tick_consumer_groups(loaded, journal.as_ref(), &self.inner.config, now);
        let active = consumer_shell::active_consumer_groups(loaded);
        let mut woken = Vec::new();
        let mut expired = Vec::new();
        for (id, group) in loaded.groups.iter_mut() {
            let before = group.rebalances();
            if let Some(t) = group.tick(now) {
                next = Some(next.map_or(t, |n| n.min(t)));
            }
            let _ = persist(group, journal.as_ref(), now);
            if group.rebalances() != before {
                woken.push(id.clone());
            }
            // A group with nothing left, or empty for longer than the offsets'
            // retention, goes with tombstones for what it had stored.
            let records = if active.contains(id) || self.inner.order.lock().is_waiting(id) {
                None
            } else if group.is_forgettable() {
                group.prepare_delete().ok()
            } else {
                group.expired_records(retention, wall)
            };
            if let Some(records) = records {
                let written = match &journal {
                    Some(j) if !records.is_empty() => j.append(&records).is_ok(),
                    _ => true,
                };
                if written {
                    expired.push(id.clone());
                }
            }
        }
        for id in expired {
            loaded.groups.remove(&id);
            wakers.remove(&id);
        }
        for id in woken {
            wake_group(wakers, &id, 0, 1);
        }
        next
    }

    /// The journal of `group_id`'s partition, None if it is not loaded (or keeps
    /// nothing).
    fn journal_of(&self, group_id: &str) -> Option<Arc<dyn OffsetJournal>> {
        self.inner
            .state
            .lock()
            .shard(group_id)
            .and_then(|l| l.journal.clone())
    }
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
        // Bounded so a newly joined member's session is checked without a notify.
        let wake = next
            .unwrap_or(now + Duration::from_secs(1))
            .min(now + Duration::from_secs(1))
            .max(now + Duration::from_millis(1));
        inner.changed.wait_until(&mut st, wake);
    }
}

#[cfg(test)]
mod tests_txn;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coordinator::offsets::decode;

    /// A journal in memory, which can be made to fail, or to hold its waits for the
    /// replicas (as a partition whose followers are slow to fetch).
    #[derive(Default)]
    pub(super) struct MemJournal {
        records: Mutex<Vec<JournalRecord>>,
        fail: AtomicBool,
        replicas: Arc<HeldReplicas>,
    }

    /// While `held`, every wait for the replicas blocks (at most 30 s); `waits` counts
    /// those that began.
    #[derive(Default)]
    pub(super) struct HeldReplicas {
        held: Mutex<bool>,
        released: Condvar,
        waits: std::sync::atomic::AtomicUsize,
    }

    impl HeldReplicas {
        fn wait(&self) {
            self.waits.fetch_add(1, Ordering::AcqRel);
            let deadline = Instant::now() + Duration::from_secs(30);
            let mut held = self.held.lock();
            while *held && Instant::now() < deadline {
                self.released.wait_until(&mut held, deadline);
            }
        }

        fn hold(&self, held: bool) {
            *self.held.lock() = held;
            self.released.notify_all();
        }
    }

    impl MemJournal {
        fn check(&self) -> crate::error::Result<()> {
            if self.fail.load(Ordering::Relaxed) {
                return Err(crate::error::Error::io(
                    "append to",
                    "__consumer_offsets-0",
                    std::io::Error::other("disk full"),
                ));
            }
            Ok(())
        }
    }

    impl OffsetJournal for MemJournal {
        fn append(&self, records: &[JournalRecord]) -> crate::error::Result<()> {
            self.append_deferred(records)?()
        }

        fn append_deferred(
            &self,
            records: &[JournalRecord],
        ) -> crate::error::Result<offsets::JournalWait> {
            self.check()?;
            self.records.lock().extend_from_slice(records);
            let replicas = Arc::clone(&self.replicas);
            Ok(Box::new(move || {
                replicas.wait();
                Ok(())
            }))
        }

        fn append_txn(
            &self,
            _producer_id: i64,
            _producer_epoch: i16,
            records: &[JournalRecord],
        ) -> crate::error::Result<()> {
            self.append(records)
        }
    }

    impl MemJournal {
        fn entries(&self) -> Vec<offsets::Entry> {
            self.records
                .lock()
                .iter()
                .filter_map(|(k, v)| decode(k, v.as_deref()).unwrap())
                .collect()
        }
    }

    pub(super) fn coordinator(journal: &Arc<MemJournal>) -> GroupCoordinator {
        let c = GroupCoordinator::new(CoordinatorConfig {
            min_session_timeout: Duration::from_millis(1),
            initial_rebalance_delay: Duration::ZERO,
            ..CoordinatorConfig::default()
        });
        c.load(Vec::new(), Arc::clone(journal) as Arc<dyn OffsetJournal>);
        c
    }

    pub(super) fn join_req(member: &str) -> JoinGroupRequest {
        JoinGroupRequest {
            group_id: "g".into(),
            member_id: member.into(),
            protocol_type: "consumer".into(),
            protocols: vec![("range".into(), vec![1]), ("roundrobin".into(), vec![2])],
            session_timeout: Duration::from_secs(10),
            rebalance_timeout: Duration::from_secs(10),
            client_id: "c".into(),
            ..Default::default()
        }
    }

    pub(super) fn commit_req(generation: i32, member: &str, offset: i64) -> OffsetCommitRequest {
        OffsetCommitRequest {
            group_id: "g".into(),
            generation_id: generation,
            member_id: member.into(),
            group_instance_id: None,
            offsets: vec![CommitOffset {
                topic: "t".into(),
                partition: 0,
                offset,
                leader_epoch: -1,
                metadata: None,
                commit_timestamp: None,
            }],
        }
    }

    /// One member joins and syncs; returns (member id, generation).
    pub(super) fn stable_member(c: &GroupCoordinator) -> (String, i32) {
        let a = c
            .join_group(join_req(""), Duration::from_secs(5))
            .expect("join");
        assert_eq!(a.leader, a.member_id);
        let s = c
            .sync_group(
                SyncGroupRequest {
                    group_id: "g".into(),
                    generation_id: a.generation_id,
                    member_id: a.member_id.clone(),
                    assignments: vec![(a.member_id.clone(), vec![9])],
                    ..Default::default()
                },
                Duration::from_secs(5),
            )
            .expect("sync");
        assert_eq!(s.assignment, vec![9]);
        (a.member_id, a.generation_id)
    }

    #[test]
    fn load_commit_unload_reload_keeps_offsets_and_generation() {
        let journal = Arc::new(MemJournal::default());
        let c = coordinator(&journal);
        let (member, generation) = stable_member(&c);
        let results = c
            .offset_commit(commit_req(generation, &member, 42))
            .unwrap();
        assert!(results[0].result.is_ok());

        c.unload();
        assert!(!c.is_loaded());
        assert!(matches!(
            c.heartbeat("g", generation, &member, None),
            Err(GroupError::NotCoordinator)
        ));
        assert!(matches!(
            c.offset_commit(commit_req(generation, &member, 43)),
            Err(GroupError::NotCoordinator)
        ));
        assert!(matches!(
            c.offset_fetch("g", None),
            Err(GroupError::NotCoordinator)
        ));
        assert!(matches!(
            c.list_groups(&[]),
            Err(GroupError::NotCoordinator)
        ));

        // Load again from what was journaled: the same offsets and generation, and the
        // member goes on with its old id.
        c.load(
            journal.entries(),
            Arc::clone(&journal) as Arc<dyn OffsetJournal>,
        );
        let d = c.describe_group("g").unwrap();
        assert_eq!(d.state, GroupState::Stable);
        assert_eq!(d.generation_id, generation);
        assert_eq!(d.members.len(), 1);
        assert_eq!(d.members[0].assignment, vec![9]);
        c.heartbeat("g", generation, &member, None).unwrap();
        let fetched = c.offset_fetch("g", Some(&[("t".into(), 0)])).unwrap();
        assert_eq!(fetched[0].offset, 42);
        let results = c
            .offset_commit(commit_req(generation, &member, 43))
            .unwrap();
        assert!(results[0].result.is_ok());
    }

    #[test]
    fn a_group_that_does_not_exist_takes_a_negative_generations_commit_with_a_member_id() {
        // A KIP-848 client that assigns itself partitions commits with its own member
        // id and epoch -1; Kafka makes a simple group, whatever the member id.
        let journal = Arc::new(MemJournal::default());
        let c = coordinator(&journal);
        let results = c
            .offset_commit(commit_req(-1, "a-member-id-of-its-own", 5))
            .unwrap();
        assert!(results[0].result.is_ok(), "{:?}", results[0].result);
        let fetched = c.offset_fetch("g", Some(&[("t".into(), 0)])).unwrap();
        assert_eq!(fetched[0].offset, 5);
        // A generation of a group that is not there is still refused.
        let mut req = commit_req(3, "m", 6);
        req.group_id = "missing".into();
        match c.offset_commit(req) {
            Err(e) => assert!(matches!(e, GroupError::IllegalGeneration { .. }), "{e:?}"),
            Ok(r) => assert!(
                matches!(r[0].result, Err(GroupError::IllegalGeneration { .. })),
                "{:?}",
                r[0].result
            ),
        }
    }

    #[test]
    fn a_commit_waiting_for_the_replicas_holds_up_no_other_group() {
        let journal = Arc::new(MemJournal::default());
        let c = coordinator(&journal);
        let (member, generation) = stable_member(&c);
        journal.replicas.hold(true);
        // A commit of another group waits for its replicas...
        let committer = {
            let c = c.clone();
            let mut req = commit_req(-1, "", 7);
            req.group_id = "other".into();
            std::thread::spawn(move || c.offset_commit(req))
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while journal.replicas.waits.load(Ordering::Acquire) == 0 {
            assert!(Instant::now() < deadline, "the commit never appended");
            std::thread::sleep(Duration::from_millis(5));
        }
        // ...while g's member heartbeats (answered, not held up), and the commit is not
        // shown before the replicas have it.
        let (tx, rx) = crossbeam_channel::bounded(1);
        {
            let c = c.clone();
            std::thread::spawn(move || {
                let _ = tx.send(c.heartbeat("g", generation, &member, None));
            });
        }
        let answered = rx.recv_timeout(Duration::from_secs(10));
        assert!(
            matches!(answered, Ok(Ok(()))),
            "a heartbeat waited for another group's commit: {answered:?}"
        );
        let fetched = c.offset_fetch("other", Some(&[("t".into(), 0)])).unwrap();
        assert_eq!(fetched[0].offset, -1);
        assert!(!committer.is_finished());
        journal.replicas.hold(false);
        let results = committer.join().unwrap().unwrap();
        assert!(results[0].result.is_ok());
        let fetched = c.offset_fetch("other", Some(&[("t".into(), 0)])).unwrap();
        assert_eq!(fetched[0].offset, 7);
    }

    #[test]
    fn a_journal_error_fails_the_commit() {
        let journal = Arc::new(MemJournal::default());
        let c = coordinator(&journal);
        let (member, generation) = stable_member(&c);
        journal.fail.store(true, Ordering::Relaxed);
        let results = c.offset_commit(commit_req(generation, &member, 5)).unwrap();
        let Err(e) = &results[0].result else {
            panic!("a commit the journal refused was acknowledged");
        };
        assert!(matches!(e, GroupError::Journal(_)), "{e:?}");
        journal.fail.store(false, Ordering::Relaxed);
        let fetched = c.offset_fetch("g", Some(&[("t".into(), 0)])).unwrap();
        assert_eq!(fetched[0].offset, -1, "nothing was stored");
    }

    #[test]
    fn unload_wakes_a_blocked_join_with_not_coordinator() {
        let journal = Arc::new(MemJournal::default());
        let c = coordinator(&journal);
        let (member, _) = stable_member(&c);
        // A second member starts a round the first has not rejoined: it blocks.
        let JoinStart::Pending(ticket) = c.begin_join(join_req("")).unwrap() else {
            panic!("a new member waits for the round");
        };
        let c2 = c.clone();
        let waiter = std::thread::spawn(move || c2.await_join(&ticket, Duration::from_secs(30)));
        std::thread::sleep(Duration::from_millis(50));
        c.unload();
        let answer = waiter.join().unwrap();
        assert!(
            matches!(answer, Some(Err(GroupError::NotCoordinator))),
            "{answer:?}"
        );
        let _ = member;
    }

    #[test]
    fn two_members_form_a_generation_and_a_follower_waits_for_the_leader() {
        let journal = Arc::new(MemJournal::default());
        let c = coordinator(&journal);
        let (a, _) = stable_member(&c);
        let JoinStart::Pending(tb) = c.begin_join(join_req("")).unwrap() else {
            panic!("pending");
        };
        assert!(matches!(
            c.heartbeat("g", 1, &a, None),
            Err(GroupError::RebalanceInProgress)
        ));
        let JoinStart::Pending(ta) = c.begin_join(join_req(&a)).unwrap() else {
            panic!("pending");
        };
        let ra = c.await_join(&ta, Duration::from_secs(1)).unwrap().unwrap();
        let rb = c.await_join(&tb, Duration::from_secs(1)).unwrap().unwrap();
        assert_eq!((ra.generation_id, rb.generation_id), (2, 2));
        assert_eq!(ra.leader, a);
        assert_eq!(ra.members.len(), 2);
        assert!(rb.members.is_empty());
        // The follower syncs first and waits for the leader.
        let c2 = c.clone();
        let b_id = rb.member_id.clone();
        let follower = std::thread::spawn(move || {
            c2.sync_group(
                SyncGroupRequest {
                    group_id: "g".into(),
                    generation_id: 2,
                    member_id: b_id,
                    ..Default::default()
                },
                Duration::from_secs(30),
            )
        });
        std::thread::sleep(Duration::from_millis(50));
        c.sync_group(
            SyncGroupRequest {
                group_id: "g".into(),
                generation_id: 2,
                member_id: a.clone(),
                assignments: vec![(a.clone(), vec![7]), (rb.member_id.clone(), vec![8])],
                ..Default::default()
            },
            Duration::from_secs(1),
        )
        .unwrap();
        assert_eq!(follower.join().unwrap().unwrap().assignment, vec![8]);
        // The generation was journaled before anyone was answered.
        let stored = journal.entries().into_iter().rev().find_map(|e| match e {
            offsets::Entry::Group { value, .. } => Some(value),
            _ => None,
        });
        let stored = stored.expect("group metadata journaled");
        assert_eq!(stored.generation, 2);
        assert_eq!(stored.members.len(), 2);
    }

    #[test]
    fn delete_group_tombstones_offsets_and_metadata() {
        let journal = Arc::new(MemJournal::default());
        let c = coordinator(&journal);
        let (member, generation) = stable_member(&c);
        c.offset_commit(commit_req(generation, &member, 3)).unwrap();
        assert!(matches!(
            c.delete_group("g"),
            Err(GroupError::NonEmptyGroup)
        ));
        let left = c
            .leave_group(
                "g",
                &[LeavingMember {
                    member_id: member,
                    group_instance_id: None,
                }],
            )
            .unwrap();
        assert!(left[0].is_ok());
        c.delete_group("g").unwrap();
        assert!(matches!(
            c.delete_group("g"),
            Err(GroupError::GroupIdNotFound)
        ));
        let entries = journal.entries();
        assert!(entries.contains(&offsets::Entry::DeleteGroup { group: "g".into() }));
        c.load(
            journal.entries(),
            Arc::clone(&journal) as Arc<dyn OffsetJournal>,
        );
        assert!(c.list_groups(&[]).unwrap().is_empty());
    }

    #[test]
    fn initial_delay_applies_to_network_groups_only() {
        let c = GroupCoordinator::new(CoordinatorConfig {
            min_session_timeout: Duration::from_millis(1),
            initial_rebalance_delay: Duration::from_secs(60),
            ..CoordinatorConfig::default()
        });
        // In-process first member: no delay.
        let mut req = join_req("");
        req.origin = MemberOrigin::InProcess;
        let r = c.join_group(req, Duration::from_secs(5)).unwrap();
        assert_eq!(r.generation_id, 1);
        // A network group waits for more members.
        let mut req = join_req("");
        req.group_id = "net".into();
        let JoinStart::Pending(t) = c.begin_join(req).unwrap() else {
            panic!("pending");
        };
        assert!(c.await_join(&t, Duration::from_millis(100)).is_none());
        assert_eq!(
            c.describe_group("net").unwrap().state,
            GroupState::PreparingRebalance
        );
    }
}
