//! The share coordinator: every share-partition's state ([`SharePartition`]), each under
//! its own lock, the members of each share group, and the journal every change is
//! written to (`__share_group_state`, records in `share_records.rs`) before it is
//! answered.
//!
//! Two locks: the coordinator's (which share-partitions there are, the groups, their
//! members and sessions) and one per share-partition (its state, held while a change of
//! it is written). The coordinator's lock is taken first, or alone, and is never held
//! while a change waits for its journal: a share-partition whose state partition is led
//! by a slow node holds up only its own readers, not every share group of the node. A
//! first read of a share-partition (its state read back, its first snapshot written)
//! and the admin calls hold the coordinator's lock throughout.
//!
//! A change that cannot be written is undone and its caller gets the error: the state
//! in memory is never ahead of the journal. Loading replays the journal: each
//! share-partition's last snapshot, then its updates. After every snapshot the records
//! of a state partition before the oldest snapshot still needed are deleted (the topic's
//! cleanup policy is `delete` with no retention, as Kafka's): an update's key is the
//! same for every update of a share-partition, so compaction would lose updates.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::consumer_records::topic_id;
use super::group_configs::{
    GroupConfigStore, ShareReadOverrides, share_read_overrides, share_settings,
};
#[cfg(feature = "server")]
use super::share_fence::ShareFence;
use super::share_partition::{AcknowledgeType, AcquiredRecord, ShareLimits, SharePartition};
use super::share_records::{self as records, SNAPSHOT, ShareKey, ShareState, UPDATE};
use crate::config::ShareConfig;
use crate::error::{Error, RecordState, Result, ShareError};

/// Where the share coordinator writes its records: one partition of
/// `__share_group_state`.
pub trait ShareJournal: Send + Sync {
    /// Appends one record and returns its offset once it is durable.
    fn append(&self, key: &[u8], value: &[u8]) -> Result<i64>;
    /// Deletes the records before `offset` (none of them is needed any more).
    fn prune(&self, offset: i64) -> Result<()>;
}

/// A visitor of a state partition's keyed records: offset, key, value.
pub type RecordVisitor<'a> = dyn FnMut(i64, &[u8], Option<&[u8]>) -> Result<()> + 'a;

/// Where a cluster node's share coordinator keeps its share-partitions' state: the
/// partitions of `__share_group_state`, wherever the cluster leads them. A node holds
/// in memory only the share-partitions of the partitions it leads, each loaded from
/// its state partition when first used there (see
/// [`ShareCoordinator::unload_partition`]).
pub trait ShareStateStore: Send + Sync {
    /// The number of partitions of `__share_group_state`, made unless it exists.
    fn partitions(&self) -> Result<i32>;
    /// The journal of partition `index`, writing through its current leader.
    fn journal(&self, index: i32) -> Arc<dyn ShareJournal>;
    /// Calls `f` with the offset, key and value of every record of partition `index`,
    /// read from its current leader.
    fn read(&self, index: i32, f: &mut RecordVisitor<'_>) -> Result<()>;
    /// The leader epoch of `topic`-`partition` as this node knows it (stamped on the
    /// state records it writes of the partition's share-partitions).
    fn leader_epoch(&self, topic: &str, partition: i32) -> Result<i32>;
    /// Whether `__share_group_state` exists (what only reads, or deletes, makes
    /// nothing).
    fn made(&self) -> bool;
}

/// How long a journal write waits for the partition's in-sync replicas.
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);

/// The journal on one partition of `__share_group_state`.
pub(crate) struct PartitionJournal(pub(crate) crate::topic::Partition);

#[cfg(feature = "server")]
impl PartitionJournal {
    /// [`ShareJournal::append`] through `fence` (a cluster node's, at its leadership of
    /// the partition; not led here, the append is refused as any other). The fence is
    /// held for the append only, not for the wait for the in-sync replicas.
    pub(crate) fn append_fenced(
        &self,
        fence: &ShareFence,
        key: &[u8],
        value: &[u8],
    ) -> Result<i64> {
        let batch = one_record(key, value);
        let (info, appended) = match self.0.leader_epoch() {
            Some(leadership) => {
                let location = format!("{}-{}", records::SHARE_GROUP_STATE_TOPIC, self.0.index());
                fence.append(
                    self.0.index(),
                    leadership,
                    &batch,
                    |f| read_log(&self.0, &location, f),
                    || self.0.append_batch_at(&batch),
                )?
            }
            None => self.0.append_batch_at(&batch)?,
        };
        self.0
            .wait_committed_at(info.last_offset, appended, WRITE_TIMEOUT)?;
        Ok(info.base_offset)
    }
}

/// One record batch of one record.
fn one_record(key: &[u8], value: &[u8]) -> Vec<u8> {
    let mut b = crate::record::BatchBuilder::new();
    b.push(crate::storage::now_ms(), Some(key), Some(value), &[]);
    b.finish()
}

impl ShareJournal for PartitionJournal {
    fn append(&self, key: &[u8], value: &[u8]) -> Result<i64> {
        let (info, appended) = self.0.append_batch_at(&one_record(key, value))?;
        self.0
            .wait_committed_at(info.last_offset, appended, WRITE_TIMEOUT)?;
        Ok(info.base_offset)
    }

    fn prune(&self, offset: i64) -> Result<()> {
        if offset > self.0.log_start_offset() {
            self.0.delete_records_before(offset)?;
        }
        Ok(())
    }
}

/// A share-partition under its own lock (see the module documentation for the order
/// of locks).
pub(super) type Slot = Arc<Mutex<Entry>>;

pub(super) fn slot(e: Entry) -> Slot {
    Arc::new(Mutex::new(e))
}

/// One share-partition as the coordinator keeps it.
pub(super) struct Entry {
    topic: String,
    pub(super) partition: SharePartition,
    /// Its partition of `__share_group_state`.
    state_partition: usize,
    snapshot_epoch: i32,
    /// Updates written since the last snapshot.
    updates: u32,
    /// Offset of its last snapshot in its state partition.
    snapshot_offset: i64,
    /// The leader epoch of its partition its records are written with (0 on a single
    /// node); a load ignores records of an older one (a deposed leader's).
    pub(super) leader_epoch: i32,
    /// Its state epoch: raised when an admin sets or deletes its start offset
    /// (AlterShareGroupOffsets, DeleteShareGroupOffsets); a load ignores snapshots of
    /// an older one.
    pub(super) state_epoch: i32,
    /// Read back as deleted (a snapshot with start offset -1): no state.
    pub(super) deleted: bool,
}

impl Entry {
    /// The entry of a snapshot read back at `offset` of state partition `index`.
    pub(super) fn of_snapshot(
        v: &ShareState,
        offset: i64,
        index: usize,
        topic: &str,
        limits: ShareLimits,
    ) -> Entry {
        let deleted = v.start_offset < 0;
        Entry {
            topic: topic.to_string(),
            partition: SharePartition::restore(v.start_offset.max(0), &v.batches, limits),
            state_partition: index,
            snapshot_epoch: v.snapshot_epoch,
            updates: 0,
            snapshot_offset: offset,
            leader_epoch: v.leader_epoch,
            state_epoch: v.state_epoch,
            deleted,
        }
    }

    /// A copy of what the admin APIs read of it (its state, epochs and place).
    pub(super) fn summary(&self) -> Entry {
        Entry {
            topic: self.topic.clone(),
            partition: self.partition.clone(),
            ..*self
        }
    }

    /// Replays an update read back: it applies to the state (unless it is a fence,
    /// which changes nothing) and raises the leader epoch to its own.
    fn apply_update(&mut self, v: &ShareState) {
        if !is_fence(v) {
            self.partition.apply(v.start_offset, &v.batches);
        }
        self.updates += 1;
        self.leader_epoch = self.leader_epoch.max(v.leader_epoch);
    }
}

/// The epochs of a share-partition's state, where its next snapshot goes on from.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Epochs {
    pub(super) snapshot_epoch: Option<i32>,
    pub(super) state_epoch: i32,
}

impl Epochs {
    pub(super) fn of(e: &Entry) -> Epochs {
        Epochs {
            snapshot_epoch: Some(e.snapshot_epoch),
            state_epoch: e.state_epoch,
        }
    }

    /// The snapshot epoch of the next snapshot: 0 for a share-partition never written.
    pub(super) fn next_snapshot(self) -> i32 {
        self.snapshot_epoch.map_or(0, |e| e.saturating_add(1))
    }
}

/// Writes a new leader's fence of `k` at `leader_epoch` to `journal` (see
/// `share_fence.rs`): an update with no batches and start offset -1.
pub(super) fn raise_fence(
    journal: &dyn ShareJournal,
    k: &ShareKey,
    leader_epoch: i32,
) -> Result<()> {
    let fence = ShareState {
        snapshot_epoch: 0,
        state_epoch: 0,
        leader_epoch,
        start_offset: -1,
        batches: Vec::new(),
    };
    journal.append(&records::key(UPDATE, k), &records::value(UPDATE, &fence))?;
    Ok(())
}

/// True for a new leader's fence: an update with no batches and start offset -1
/// (see `share_fence.rs`).
fn is_fence(v: &ShareState) -> bool {
    v.start_offset < 0 && v.batches.is_empty()
}

/// Replays one record read back at `offset` of state partition `index` (`location`)
/// into `found`, the share-partitions read so far: a snapshot replaces a
/// share-partition's state, an update changes it. Skipped: what a deposed leader wrote
/// (an older leader epoch than one read before), a snapshot of an older state epoch,
/// an update of an older snapshot epoch than the last snapshot's, and updates of a
/// deleted share-partition (written before an admin reset it).
#[allow(clippy::too_many_arguments)]
fn replay(
    found: &mut HashMap<ShareKey, Entry>,
    kind: i16,
    k: ShareKey,
    v: &ShareState,
    offset: i64,
    index: usize,
    topic: &str,
    location: &str,
    limits: ShareLimits,
) -> Result<()> {
    match (kind, found.get_mut(&k)) {
        // A deleted state holds back no leader epoch: the next state may be of a topic
        // made again, whose leader epochs begin anew (a deposed leader's writes after
        // the delete are refused when written, and updates skipped below).
        (_, Some(e)) if v.leader_epoch < e.leader_epoch && !e.deleted => {}
        (SNAPSHOT, Some(e)) if v.state_epoch < e.state_epoch => {}
        (SNAPSHOT, _) => {
            found.insert(k, Entry::of_snapshot(v, offset, index, topic, limits));
        }
        (UPDATE, Some(e)) if is_fence(v) => {
            e.leader_epoch = e.leader_epoch.max(v.leader_epoch);
        }
        (UPDATE, Some(e)) if e.deleted || v.snapshot_epoch < e.snapshot_epoch => {}
        (UPDATE, Some(e)) => e.apply_update(v),
        // A new leader's fence before the share-partition's first snapshot.
        (UPDATE, None) if is_fence(v) => {}
        // An update whose snapshot was pruned away cannot be: the journal prunes only
        // below every share-partition's last snapshot.
        _ => {
            return Err(Error::corrupt(
                location,
                offset as u64,
                format!(
                    "update of share group {:?} partition {} before any snapshot",
                    k.group, k.partition
                ),
            ));
        }
    }
    Ok(())
}

/// A member of a share group.
#[derive(Debug, Clone)]
pub(super) struct Member {
    pub(super) topics: BTreeSet<String>,
    pub(super) client_id: String,
    /// Its member epoch (0 for an in-process member, which never heartbeats).
    pub(super) epoch: i32,
    /// When its session ends unless it heartbeats; `None` for an in-process member.
    pub(super) deadline: Option<Instant>,
    /// The partitions last assigned to it, by topic.
    pub(super) assigned: BTreeMap<String, Vec<i32>>,
    /// Its host as the server saw it, and its rack.
    pub(super) client_host: String,
    pub(super) rack: Option<String>,
}

#[derive(Default)]
pub(super) struct Inner {
    /// The partitions of `__share_group_state`, by index (empty until loaded).
    journals: Arc<Vec<Arc<dyn ShareJournal>>>,
    /// A cluster node's state partitions (then `journals` stays empty).
    pub(super) store: Option<Arc<dyn ShareStateStore>>,
    pub(super) partitions: HashMap<ShareKey, Slot>,
    /// The epochs of share-partitions deleted (DeleteShareGroupOffsets) and not read
    /// since: the next first snapshot of one goes on from them.
    pub(super) deleted: HashMap<ShareKey, Epochs>,
    pub(super) groups: BTreeMap<String, BTreeMap<String, Member>>,
    /// Each share group's epoch: bumped whenever a member joins or its assignment
    /// changes.
    pub(super) group_epochs: HashMap<String, i32>,
    /// Share sessions of members fetching over the network, by (group, member).
    pub(super) sessions: HashMap<(String, String), super::share_members::ShareSession>,
}

impl Inner {
    /// True until a single node's journals are loaded.
    pub(super) fn journals_empty(&self) -> bool {
        self.journals.is_empty()
    }
}

/// The members of a share group, as [`ShareCoordinator::describe`] tells them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareMemberDescription {
    /// The member id.
    pub member_id: String,
    /// The client id it gave.
    pub client_id: String,
    /// The topics it reads.
    pub topics: Vec<String>,
}

/// The share coordinator of a broker: see the module documentation.
pub struct ShareCoordinator {
    config: ShareConfig,
    inner: Mutex<Inner>,
    /// Set once `__share_group_state` is loaded (a single node) or the state store is
    /// set (a cluster node): read without the lock, which a journal write holds while
    /// it waits for the state partition's leader, perhaps another node whose answer
    /// asks this (the Produce of a state partition led here; see `is_loaded`).
    loaded: AtomicBool,
    /// Partitions whose share-partitions to drop at the next lock (see
    /// [`ShareCoordinator::unload_partition`]), as (topic id, partition).
    unloads: Mutex<Vec<([u8; 16], i32)>>,
    /// Notified after every change written (records acquired, acknowledged, released):
    /// the waiting ShareFetch requests.
    watchers: Mutex<Vec<Arc<crate::topic::Signal>>>,
    next_member: AtomicU64,
    /// The groups' own settings (none: the broker's for every group).
    group_configs: parking_lot::RwLock<Option<Arc<dyn GroupConfigStore>>>,
    /// The write fence of the partitions of `__share_group_state` led here.
    #[cfg(feature = "server")]
    fence: ShareFence,
}

impl std::fmt::Debug for ShareCoordinator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let inner = self.lock();
        f.debug_struct("ShareCoordinator")
            .field("state_partitions", &inner.journals.len())
            .field("share_partitions", &inner.partitions.len())
            .field("groups", &inner.groups.len())
            .finish()
    }
}

pub(super) fn share_error(group: &str, topic: &str, partition: i32, source: ShareError) -> Error {
    Error::Share {
        group: group.to_string(),
        topic: topic.to_string(),
        partition,
        source,
    }
}

/// A share-partition not held here: never fetched, or unloaded since.
fn not_held(k: &ShareKey, topic: &str) -> Error {
    let reason = "the share-partition was never fetched here (fetch_offset first)";
    share_error(
        &k.group,
        topic,
        k.partition,
        ShareError::InvalidRequest(reason.into()),
    )
}

impl ShareCoordinator {
    /// A coordinator with nothing loaded.
    pub fn new(config: ShareConfig) -> ShareCoordinator {
        ShareCoordinator {
            config,
            inner: Mutex::new(Inner::default()),
            loaded: AtomicBool::new(false),
            unloads: Mutex::new(Vec::new()),
            watchers: Mutex::new(Vec::new()),
            next_member: AtomicU64::new(0),
            group_configs: parking_lot::RwLock::new(None),
            #[cfg(feature = "server")]
            fence: ShareFence::default(),
        }
    }

    /// The write fence of the partitions of `__share_group_state` this node leads
    /// (every write of one goes through it on a cluster).
    #[cfg(feature = "server")]
    pub(crate) fn fence(&self) -> &ShareFence {
        &self.fence
    }

    /// Its settings.
    pub fn config(&self) -> &ShareConfig {
        &self.config
    }

    /// Reads each group's `share.session.timeout.ms`, `share.heartbeat.interval.ms` and
    /// `share.record.lock.duration.ms` from `store` from now on (a server sets the
    /// store it serves DescribeConfigs from).
    pub fn set_group_configs(&self, store: Arc<dyn GroupConfigStore>) {
        *self.group_configs.write() = Some(store);
    }

    /// The group config store set, if any.
    pub(super) fn group_config_store(&self) -> Option<Arc<dyn GroupConfigStore>> {
        self.group_configs.read().clone()
    }

    /// Its settings with `group`'s overrides.
    pub fn group_settings(&self, group: &str) -> ShareConfig {
        match &*self.group_configs.read() {
            Some(store) => share_settings(&store.overrides(group), &self.config),
            None => self.config.clone(),
        }
    }

    /// `group`'s `share.isolation.level` and `share.auto.offset.reset`, where its group
    /// configs set them (none while no store is set: an in-process broker alone).
    pub fn read_overrides(&self, group: &str) -> ShareReadOverrides {
        match &*self.group_configs.read() {
            Some(store) => share_read_overrides(&store.overrides(group)),
            None => ShareReadOverrides::default(),
        }
    }

    /// True once the partitions of `__share_group_state` are loaded (on a cluster
    /// node: once its state store is set). Never waits for the coordinator's lock: a
    /// write of another node's coordinator to a state partition led here asks this
    /// (`Backend::share`) while that coordinator holds its own lock, and this one may
    /// be waiting for that node in turn (a state partition led there); as Kafka's share
    /// coordinator takes state writes apart from its broker's share-partitions.
    pub fn is_loaded(&self) -> bool {
        self.loaded.load(Ordering::Acquire)
    }

    /// Makes this a cluster node's coordinator: every share-partition is loaded from
    /// `store` when first used here, and written through it. Members of a group may
    /// heartbeat to another node (the group's coordinator), so a share session opens
    /// for a member this node does not know.
    #[cfg(feature = "server")]
    pub(crate) fn set_store(&self, store: Arc<dyn ShareStateStore>) {
        let mut inner = self.lock();
        inner.store = Some(store);
        inner.partitions.clear();
        self.loaded.store(true, Ordering::Release);
    }

    /// Forgets the share-partitions of `topic`-`partition` (a cluster node that no
    /// longer leads it): their state stays in `__share_group_state`, and the next
    /// leader loads it; the records held here become available again there. Never
    /// waits for the coordinator's lock (a journal write may hold it while it waits
    /// for metadata): done before the next use.
    pub fn unload_partition(&self, topic: &str, partition: i32) {
        self.unloads.lock().push((topic_id(topic), partition));
    }

    /// The coordinator's state, with the unloads asked for done.
    pub(super) fn lock(&self) -> parking_lot::MutexGuard<'_, Inner> {
        let mut inner = self.inner.lock();
        let unloads = std::mem::take(&mut *self.unloads.lock());
        for (id, partition) in unloads {
            inner
                .partitions
                .retain(|k, _| !(k.topic_id == id && k.partition == partition));
        }
        inner
    }

    /// Notifies `signal` after every change of a share-partition until
    /// [`unwatch`](Self::unwatch) (a ShareFetch waiting for records to become
    /// available).
    #[cfg(feature = "server")]
    pub(crate) fn watch(&self, signal: &Arc<crate::topic::Signal>) {
        self.watchers.lock().push(Arc::clone(signal));
    }

    /// Stops notifying `signal`.
    #[cfg(feature = "server")]
    pub(crate) fn unwatch(&self, signal: &Arc<crate::topic::Signal>) {
        self.watchers.lock().retain(|w| !Arc::ptr_eq(w, signal));
    }

    fn notify_watchers(&self) {
        for w in self.watchers.lock().iter() {
            w.notify();
        }
    }

    /// When the first lock held on a share-partition of `group` among `partitions`
    /// expires (its record becomes available then, with no append to wake a waiting
    /// ShareFetch).
    pub fn next_lock_expiry(&self, group: &str, partitions: &[(String, i32)]) -> Option<Instant> {
        let slots: Vec<Slot> = {
            let inner = self.lock();
            partitions
                .iter()
                .filter_map(|(t, p)| inner.partitions.get(&key(group, t, *p)).cloned())
                .collect()
        };
        slots
            .iter()
            .filter_map(|e| e.lock().partition.next_lock_expiry())
            .min()
    }

    /// The share-partitions held in memory, as (group, topic, partition).
    pub fn loaded_share_partitions(&self) -> Vec<(String, String, i32)> {
        let slots: Vec<(ShareKey, Slot)> = {
            let inner = self.lock();
            let all = inner.partitions.iter();
            all.map(|(k, e)| (k.clone(), Arc::clone(e))).collect()
        };
        let mut out: Vec<_> = slots
            .into_iter()
            .map(|(k, e)| (k.group, e.lock().topic.clone(), k.partition))
            .collect();
        out.sort();
        out
    }

    /// Loads every partition of `__share_group_state` (in index order): each
    /// share-partition's last snapshot and the updates after it.
    pub(crate) fn load(&self, partitions: &[crate::topic::Partition]) -> Result<()> {
        let limits = ShareLimits::from(&self.config);
        let mut loaded: HashMap<ShareKey, Entry> = HashMap::new();
        for (index, p) in partitions.iter().enumerate() {
            let location = format!("{}-{}", records::SHARE_GROUP_STATE_TOPIC, p.index());
            read_log(p, &location, |offset, key, value| {
                let Some((kind, k, v)) = records::decode(key, value)? else {
                    return Ok(());
                };
                replay(
                    &mut loaded,
                    kind,
                    k,
                    &v,
                    offset,
                    index,
                    "",
                    &location,
                    limits,
                )
            })?;
        }
        let mut inner = self.lock();
        inner.journals = Arc::new(
            partitions
                .iter()
                .map(|p| Arc::new(PartitionJournal(p.clone())) as Arc<dyn ShareJournal>)
                .collect(),
        );
        inner.deleted = loaded
            .iter()
            .filter(|(_, e)| e.deleted)
            .map(|(k, e)| (k.clone(), Epochs::of(e)))
            .collect();
        inner.partitions = loaded
            .into_iter()
            .filter(|(_, e)| !e.deleted)
            .map(|(k, e)| (k, slot(e)))
            .collect();
        self.loaded
            .store(!inner.journals.is_empty(), Ordering::Release);
        Ok(())
    }

    /// Joins `group` as a new member reading `topics`; returns its member id, or
    /// [`ShareError::GroupMaxSizeReached`] when the group has `group.share.max.size`
    /// members already.
    pub fn join(&self, group: &str, topics: &[String], client_id: &str) -> Result<String> {
        if group.is_empty() {
            return Err(share_error(
                group,
                "",
                -1,
                ShareError::InvalidRequest("the group id is empty".into()),
            ));
        }
        let n = self.next_member.fetch_add(1, Ordering::Relaxed);
        let member_id = format!("{client_id}-{:x}-{n}", crate::storage::now_ms());
        let member = Member {
            topics: topics.iter().cloned().collect(),
            client_id: client_id.to_string(),
            epoch: 0,
            deadline: None,
            assigned: BTreeMap::new(),
            client_host: String::new(),
            rack: None,
        };
        let mut inner = self.inner.lock();
        let members = inner.groups.entry(group.to_string()).or_default();
        if members.len() >= self.config.max_size {
            let source = ShareError::GroupMaxSizeReached(self.config.max_size);
            return Err(share_error(group, "", -1, source));
        }
        members.insert(member_id.clone(), member);
        Ok(member_id)
    }

    /// `member` leaves `group`: every record it holds is released. The group stays
    /// (its share-partitions keep their state) when it has no member left.
    pub fn leave(&self, group: &str, member: &str, now: Instant) -> Result<()> {
        {
            let mut inner = self.lock();
            if let Some(members) = inner.groups.get_mut(group) {
                members.remove(member);
            }
            inner
                .sessions
                .remove(&(group.to_string(), member.to_string()));
        }
        self.release_held(group, member, now)
    }

    /// Releases every record `member` of `group` holds (what a leave, and the close of
    /// a member's share session, do).
    pub fn release_held(&self, group: &str, member: &str, now: Instant) -> Result<()> {
        let keys: Vec<ShareKey> = {
            let inner = self.lock();
            let all = inner.partitions.keys();
            all.filter(|k| k.group == group).cloned().collect()
        };
        for k in keys {
            // None: unloaded meanwhile (no longer led here), nothing held here any more.
            let released = self.change_held(&k, "", |p| {
                p.expire_locks(now);
                p.release_member(member);
            });
            released.transpose()?;
        }
        Ok(())
    }

    /// The share groups known, in order.
    pub fn list_groups(&self) -> Vec<String> {
        let inner = self.lock();
        let mut out: BTreeSet<String> = inner.groups.keys().cloned().collect();
        out.extend(inner.partitions.keys().map(|k| k.group.clone()));
        out.into_iter().collect()
    }

    /// The members of `group` (empty for a group without members or unknown).
    pub fn describe(&self, group: &str) -> Vec<ShareMemberDescription> {
        let inner = self.lock();
        inner.groups.get(group).map_or_else(Vec::new, |members| {
            members
                .iter()
                .map(|(id, m)| ShareMemberDescription {
                    member_id: id.clone(),
                    client_id: m.client_id.clone(),
                    topics: m.topics.iter().cloned().collect(),
                })
                .collect()
        })
    }

    /// Where a read of `topic`-`partition` for `group` starts: its first available
    /// record in flight, else its end offset. A share-partition seen for the first time
    /// starts at `initial` (the log's start or end offset, as `share.auto.offset.reset`
    /// says), written to the journal as its first snapshot; records the log no longer
    /// has (before `log_start`) are passed over, and locks expired by `now` end.
    pub fn fetch_offset(
        &self,
        group: &str,
        topic: &str,
        partition: i32,
        log_start: i64,
        initial: i64,
        now: Instant,
    ) -> Result<i64> {
        let mut start = || Ok(initial);
        self.fetch_offset_from(group, topic, partition, log_start, &mut start, now)
    }

    /// [`fetch_offset`](Self::fetch_offset) where a share-partition seen for the first
    /// time, with no state stored, starts at what `initial` says: called only then,
    /// under the coordinator's lock, and its error is the read's.
    pub(crate) fn fetch_offset_from(
        &self,
        group: &str,
        topic: &str,
        partition: i32,
        log_start: i64,
        initial: &mut dyn FnMut() -> Result<i64>,
        now: Instant,
    ) -> Result<i64> {
        // Bounded: a share-partition unloaded between its read and its change (this
        // node just stopped leading its partition) is read again, at most twice more.
        let mut tries = 0;
        loop {
            let k = self.initialize(&mut self.lock(), group, topic, partition, initial)?;
            let changed = self.change_held(&k, topic, |p| {
                p.expire_locks(now);
                p.skip_to(log_start);
                p.fetch_offset()
            });
            match changed {
                Some(out) => return out,
                None if tries < 2 => tries += 1,
                None => return Err(not_held(&k, topic)),
            }
        }
    }

    /// Acquires for `member` of `group` up to `max_records` of the records at `offsets`
    /// of `topic`-`partition`, read from [`fetch_offset`](Self::fetch_offset) up to
    /// `read_end` (see [`SharePartition::acquire`]); the new delivery counts are in the
    /// journal before they are returned.
    #[allow(clippy::too_many_arguments)]
    pub fn acquire(
        &self,
        group: &str,
        member: &str,
        topic: &str,
        partition: i32,
        offsets: &[i64],
        read_end: i64,
        max_records: usize,
        now: Instant,
    ) -> Result<Vec<AcquiredRecord>> {
        // The group's lock duration now, for the records acquired from now on.
        let lock_duration = self.group_settings(group).record_lock_duration;
        let k = key(group, topic, partition);
        self.change(&k, topic, |p| {
            p.set_lock_duration(lock_duration);
            p.acquire(member, offsets, read_end, max_records, now)
        })
    }

    /// `member` of `group` acknowledges records of `topic`-`partition`; each
    /// acknowledgement succeeds or fails on its own (Kafka answers per batch), and the
    /// successful ones are in the journal before this returns.
    pub fn acknowledge(
        &self,
        group: &str,
        member: &str,
        topic: &str,
        partition: i32,
        acks: &[(i64, AcknowledgeType)],
        now: Instant,
    ) -> Result<Vec<(i64, std::result::Result<RecordState, ShareError>)>> {
        let k = key(group, topic, partition);
        self.change(&k, topic, |p| {
            acks.iter()
                .map(|&(offset, kind)| (offset, p.acknowledge(member, offset, kind, now)))
                .collect()
        })
    }

    /// The state and delivery count of one record while it is in flight (see
    /// [`SharePartition::state_of`]).
    pub fn record_state(
        &self,
        group: &str,
        topic: &str,
        partition: i32,
        offset: i64,
    ) -> Option<(RecordState, i16)> {
        let e = self.slot(&key(group, topic, partition))?;
        let entry = e.lock();
        entry.partition.state_of(offset)
    }

    /// The start offset of a share-partition: every record before it is acknowledged
    /// or archived. `None` for a share-partition never read.
    pub fn start_offset(&self, group: &str, topic: &str, partition: i32) -> Option<i64> {
        let e = self.slot(&key(group, topic, partition))?;
        let start = e.lock().partition.start_offset();
        Some(start)
    }

    /// The share-partition `k` if it is held here.
    fn slot(&self, k: &ShareKey) -> Option<Slot> {
        self.lock().partitions.get(k).cloned()
    }

    /// Whether the share-partition of `group` on `topic`-`partition` is held here
    /// (read here since this node leads the partition).
    pub(crate) fn holds(&self, group: &str, topic: &str, partition: i32) -> bool {
        self.slot(&key(group, topic, partition)).is_some()
    }

    /// The share-partition's key, made (and its first snapshot written) at the offset
    /// `initial` says unless known (held here, or stored).
    fn initialize(
        &self,
        inner: &mut Inner,
        group: &str,
        topic: &str,
        partition: i32,
        initial: &mut dyn FnMut() -> Result<i64>,
    ) -> Result<ShareKey> {
        let k = key(group, topic, partition);
        if inner.partitions.contains_key(&k) {
            return Ok(k); // its topic is named, if it was loaded, by the next change
        }
        let mut leader_epoch = 0;
        if let Some(store) = inner.store.clone() {
            let n = store.partitions()?;
            let index = records::state_partition_for(&k, n);
            leader_epoch = store.leader_epoch(topic, partition)?;
            // The fence first: what an earlier leader writes from now on is refused,
            // so the state read next has every write it was told succeeded.
            raise_fence(store.journal(index).as_ref(), &k, leader_epoch)?;
            if let Some(entry) = self.read_entry(store.as_ref(), &k, topic, index)? {
                if !entry.deleted {
                    check_leadership(&k, &entry, leader_epoch)?;
                    inner.partitions.insert(k.clone(), slot(entry));
                    return Ok(k);
                }
                inner.deleted.insert(k.clone(), Epochs::of(&entry));
            }
        } else if inner.journals.is_empty() {
            return Err(Error::Closed(format!(
                "the share coordinator ({} is not loaded)",
                records::SHARE_GROUP_STATE_TOPIC
            )));
        }
        let (state_partition, journal) = self.journal_for(inner, &k)?;
        let initial = initial()?;
        let partition_state = SharePartition::new(initial, ShareLimits::from(&self.config));
        // After a delete, on from its epochs (a load skips older snapshots).
        let was = inner.deleted.remove(&k).unwrap_or_default();
        let state = ShareState {
            snapshot_epoch: was.next_snapshot(),
            state_epoch: was.state_epoch,
            leader_epoch,
            start_offset: initial,
            batches: Vec::new(),
        };
        let offset = journal.append(
            &records::key(SNAPSHOT, &k),
            &records::value(SNAPSHOT, &state),
        )?;
        inner.partitions.insert(
            k.clone(),
            slot(Entry {
                topic: topic.to_string(),
                partition: partition_state,
                state_partition,
                snapshot_epoch: state.snapshot_epoch,
                updates: 0,
                snapshot_offset: offset,
                leader_epoch,
                state_epoch: state.state_epoch,
                deleted: false,
            }),
        );
        Ok(k)
    }

    /// The state partition of `k` and its journal.
    pub(super) fn journal_for(
        &self,
        inner: &Inner,
        k: &ShareKey,
    ) -> Result<(usize, Arc<dyn ShareJournal>)> {
        match &inner.store {
            Some(store) => {
                let index = records::state_partition_for(k, store.partitions()?);
                Ok((index as usize, store.journal(index)))
            }
            None => {
                let index = records::state_partition_for(k, inner.journals.len() as i32) as usize;
                Ok((index, Arc::clone(&inner.journals[index])))
            }
        }
    }

    /// The state of share-partition `k` as state partition `index` of `store` has it
    /// (its last snapshot and the updates after it, perhaps deleted), None if it has
    /// none.
    fn read_entry(
        &self,
        store: &dyn ShareStateStore,
        k: &ShareKey,
        topic: &str,
        index: i32,
    ) -> Result<Option<Entry>> {
        let mut found = self.read_entries(store, index, |rk| rk == k)?;
        Ok(found.remove(k).map(|mut e| {
            e.topic = topic.to_string();
            e
        }))
    }

    /// The share-partitions of state partition `index` of `store` that `wanted` picks,
    /// as the partition has them (deleted ones too; topics not named).
    pub(super) fn read_entries(
        &self,
        store: &dyn ShareStateStore,
        index: i32,
        wanted: impl Fn(&ShareKey) -> bool,
    ) -> Result<HashMap<ShareKey, Entry>> {
        let limits = ShareLimits::from(&self.config);
        let location = format!("{}-{index}", records::SHARE_GROUP_STATE_TOPIC);
        let mut found = HashMap::new();
        store.read(index, &mut |offset, key, value| {
            let Some((kind, rk, v)) = records::decode(key, value)? else {
                return Ok(());
            };
            if !wanted(&rk) {
                return Ok(());
            }
            replay(
                &mut found,
                kind,
                rk,
                &v,
                offset,
                index as usize,
                "",
                &location,
                limits,
            )
        })?;
        Ok(found)
    }

    /// Runs `op` on share-partition `k` and writes what it changed; on a write error
    /// the change is undone and the error returned. [`ShareError::InvalidRequest`]
    /// when `k` is not held here (never fetched, or unloaded since).
    fn change<T>(
        &self,
        k: &ShareKey,
        topic: &str,
        op: impl FnOnce(&mut SharePartition) -> T,
    ) -> Result<T> {
        self.change_held(k, topic, op)
            .unwrap_or_else(|| Err(not_held(k, topic)))
    }

    /// [`change`](Self::change), None when `k` is not held here. Runs under the
    /// share-partition's own lock, not the coordinator's (see the module
    /// documentation); `topic` names a share-partition loaded by id only.
    fn change_held<T>(
        &self,
        k: &ShareKey,
        topic: &str,
        op: impl FnOnce(&mut SharePartition) -> T,
    ) -> Option<Result<T>> {
        let per_snapshot = self.config.snapshot_update_records_per_snapshot;
        let (held, store, journals) = {
            let inner = self.lock();
            let held = Arc::clone(inner.partitions.get(k)?);
            (held, inner.store.clone(), Arc::clone(&inner.journals))
        };
        let mut entry = held.lock();
        if entry.topic.is_empty() {
            entry.topic = topic.to_string(); // loaded: the journal has the id only
        }
        let before = entry.partition.clone();
        let out = op(&mut entry.partition);
        let Some((start_offset, batches)) = entry.partition.take_changes() else {
            return Some(Ok(out));
        };
        let index = entry.state_partition;
        let journal = match &store {
            Some(store) => store.journal(index as i32),
            None => Arc::clone(&journals[index]),
        };
        let snapshot = entry.updates + 1 >= per_snapshot;
        let (kind, state) = if snapshot {
            let whole = ShareState {
                snapshot_epoch: entry.snapshot_epoch + 1,
                state_epoch: entry.state_epoch,
                leader_epoch: entry.leader_epoch,
                start_offset,
                batches: entry.partition.snapshot(),
            };
            (SNAPSHOT, whole)
        } else {
            let update = ShareState {
                snapshot_epoch: entry.snapshot_epoch,
                state_epoch: 0,
                leader_epoch: entry.leader_epoch,
                start_offset,
                batches,
            };
            (UPDATE, update)
        };
        Some(
            match journal.append(&records::key(kind, k), &records::value(kind, &state)) {
                Ok(offset) if snapshot => {
                    entry.snapshot_epoch += 1;
                    entry.updates = 0;
                    entry.snapshot_offset = offset;
                    drop(entry);
                    self.notify_watchers();
                    let oldest = match &store {
                        // A cluster node holds only some of a state partition's
                        // share-partitions (other nodes write the others): the last
                        // snapshot of each is read from the partition itself.
                        Some(store) => oldest_snapshot(store.as_ref(), index as i32),
                        None => Ok(self.oldest_held_snapshot(index)),
                    };
                    // Only space is at stake: a failed read or prune leaves records the
                    // next load reads and supersedes, and the next snapshot prunes
                    // again. Snapshots written meanwhile come later: pruning before an
                    // older one keeps them.
                    if let Ok(oldest) = oldest {
                        let _ = journal.prune(oldest.unwrap_or(offset));
                    }
                    Ok(out)
                }
                Ok(_) => {
                    entry.updates += 1;
                    drop(entry);
                    self.notify_watchers();
                    Ok(out)
                }
                Err(e @ (Error::FencedLeaderEpoch { .. } | Error::FencedStateEpoch { .. })) => {
                    // A later leader took the share-partition over, or an admin replaced
                    // its state (a newer state epoch): this node's state of it, and what
                    // it handed out, no longer count; it is read again when next used.
                    drop(entry);
                    let mut inner = self.lock();
                    if inner
                        .partitions
                        .get(k)
                        .is_some_and(|now| Arc::ptr_eq(now, &held))
                    {
                        inner.partitions.remove(k);
                    }
                    Err(e)
                }
                Err(e) => {
                    entry.partition = before;
                    Err(e)
                }
            },
        )
    }

    /// The offset of the oldest of the last snapshots of the share-partitions of state
    /// partition `index` held here (a single node, which holds them all).
    fn oldest_held_snapshot(&self, index: usize) -> Option<i64> {
        let held: Vec<Slot> = self.lock().partitions.values().cloned().collect();
        held.iter()
            .filter_map(|e| {
                let e = e.lock();
                (e.state_partition == index).then_some(e.snapshot_offset)
            })
            .min()
    }
}

/// The offset of the oldest of the last snapshots of the share-partitions in state
/// partition `index` of `store` (None when it has none): nothing before it is needed.
/// A snapshot of an older leader epoch than one before it (a deposed leader's, which
/// loads skip) does not count. Records written meanwhile come after the partition's
/// end as read, so after it too.
fn oldest_snapshot(store: &dyn ShareStateStore, index: i32) -> Result<Option<i64>> {
    // (leader epoch, offset) of each share-partition's last snapshot.
    // A deleted share-partition's (start offset -1) needs nothing.
    let mut last: HashMap<ShareKey, (i32, i64, bool)> = HashMap::new();
    store.read(index, &mut |offset, key, value| {
        if let Some((SNAPSHOT, k, v)) = records::decode(key, value)? {
            let deleted = v.start_offset < 0;
            let seen = last.entry(k).or_insert((v.leader_epoch, offset, deleted));
            // After a deleted state, any leader epoch (a topic made again).
            if v.leader_epoch >= seen.0 || seen.2 {
                *seen = (v.leader_epoch, offset, deleted);
            }
        }
        Ok(())
    })?;
    Ok(last
        .into_values()
        .filter(|(_, _, deleted)| !deleted)
        .map(|(_, offset, _)| offset)
        .min())
}

/// A node with an older leader epoch than the state it read (`entry`) is no leader of
/// the partition any more: NOT_LEADER_OR_FOLLOWER.
fn check_leadership(k: &ShareKey, entry: &Entry, leader_epoch: i32) -> Result<()> {
    if leader_epoch < entry.leader_epoch {
        return Err(Error::NotLeaderOrFollower {
            partition: format!("{}-{}", entry.topic, k.partition),
            reason: format!(
                "its share state was written by leader epoch {}, this node knows {leader_epoch}",
                entry.leader_epoch
            ),
        });
    }
    Ok(())
}

fn key(group: &str, topic: &str, partition: i32) -> ShareKey {
    ShareKey {
        group: group.to_string(),
        topic_id: topic_id(topic),
        partition,
    }
}

/// Calls `f` with the offset, key and value of every record of `partition`'s log, from
/// its start to its end (control batches skipped).
pub(crate) fn read_log(
    partition: &crate::topic::Partition,
    location: &str,
    mut f: impl FnMut(i64, &[u8], Option<&[u8]>) -> Result<()>,
) -> Result<()> {
    scan_log(
        partition.log_start_offset(),
        location,
        |offset| {
            partition
                .log()
                .read_bounded(offset, 1 << 20, crate::storage::ReadLimit::LogEnd)
        },
        &mut f,
    )
}

/// Calls `f` with the offset, key and value of every keyed record of a log from
/// `start` to its end, reading it with `read` (whole batches from the one holding an
/// offset, nothing at the end; control batches skipped).
pub(crate) fn scan_log<S: AsRef<[u8]>>(
    start: i64,
    location: &str,
    mut read: impl FnMut(i64) -> Result<S>,
    f: &mut RecordVisitor<'_>,
) -> Result<()> {
    let mut offset = start;
    let mut scratch = Vec::new();
    // Bounded: every round moves `offset` forward or ends.
    loop {
        let slice = read(offset)?;
        if slice.as_ref().is_empty() {
            return Ok(());
        }
        let next = keyed_records(slice.as_ref(), offset, location, &mut scratch, f)?;
        if next <= offset {
            return Ok(());
        }
        offset = next;
    }
}

/// Calls `f` with the offset, key and value of every keyed record at or after
/// `offset` in the record batches `bytes` (control batches skipped); returns the offset
/// after the last batch.
pub(crate) fn keyed_records(
    bytes: &[u8],
    offset: i64,
    location: &str,
    scratch: &mut Vec<u8>,
    f: &mut RecordVisitor<'_>,
) -> Result<i64> {
    let mut next = offset;
    for batch in crate::record::batches(bytes) {
        let batch = batch?;
        next = batch.last_offset() + 1;
        if batch.is_control() || batch.last_offset() < offset {
            continue;
        }
        for record in batch.decode_records(location, 1 << 26, scratch)? {
            let record = record?;
            if record.offset < offset {
                continue;
            }
            if let Some(key) = record.key {
                f(record.offset, key, record.value)?;
            }
        }
    }
    Ok(next)
}

#[cfg(feature = "server")]
#[cfg(test)]
mod tests {
    use super::super::group_configs::GroupConfigs;
    use super::*;

    /// One partition of `__share_group_state` in memory, which the coordinators of
    /// several cluster nodes write to and read from.
    #[derive(Default)]
    struct MemLog {
        start: i64,
        next: i64,
        records: Vec<(i64, Vec<u8>, Vec<u8>)>,
        /// Run at the start of the next read (another node's write landing then).
        on_read: Option<Box<dyn FnOnce() + Send>>,
        /// Run at the end of a read, after as many more reads (another node's write
        /// landing after a read, before its reader writes).
        after_read: Option<(u32, Box<dyn FnOnce() + Send>)>,
    }

    /// The log, the leader epoch of the data partitions as one node knows it, and the
    /// write fence of the log's leader.
    #[derive(Default, Clone)]
    struct MemStore(Arc<Mutex<MemLog>>, i32, Arc<ShareFence>);

    impl MemStore {
        fn visit(&self, f: &mut RecordVisitor<'_>) -> Result<()> {
            let records = self.0.lock().records.clone();
            for (offset, key, value) in records {
                f(offset, &key, Some(&value))?;
            }
            Ok(())
        }
    }

    impl ShareJournal for MemStore {
        fn append(&self, key: &[u8], value: &[u8]) -> Result<i64> {
            let mut b = crate::record::BatchBuilder::new();
            b.push(0, Some(key), Some(value), &[]);
            self.2.append(
                0,
                0,
                &b.finish(),
                |f| self.visit(f),
                || {
                    let mut log = self.0.lock();
                    let offset = log.next;
                    log.next += 1;
                    log.records.push((offset, key.to_vec(), value.to_vec()));
                    Ok(offset)
                },
            )
        }

        fn prune(&self, offset: i64) -> Result<()> {
            let mut log = self.0.lock();
            log.start = log.start.max(offset);
            log.records.retain(|r| r.0 >= offset);
            Ok(())
        }
    }

    impl ShareStateStore for MemStore {
        fn partitions(&self) -> Result<i32> {
            Ok(1)
        }

        fn journal(&self, _index: i32) -> Arc<dyn ShareJournal> {
            Arc::new(self.clone())
        }

        fn leader_epoch(&self, _topic: &str, _partition: i32) -> Result<i32> {
            Ok(self.1)
        }

        fn made(&self) -> bool {
            true
        }

        fn read(&self, _index: i32, f: &mut RecordVisitor<'_>) -> Result<()> {
            let hook = self.0.lock().on_read.take();
            if let Some(hook) = hook {
                hook();
            }
            self.visit(f)?;
            let taken = self.0.lock().after_read.take();
            let after = match taken {
                Some((0, hook)) => Some(hook),
                Some((n, hook)) => {
                    self.0.lock().after_read = Some((n - 1, hook));
                    None
                }
                None => None,
            };
            if let Some(hook) = after {
                hook();
            }
            Ok(())
        }
    }

    /// A node's coordinator on `store`, knowing the data partitions' leader epoch
    /// `epoch`.
    fn node_at(store: &MemStore, epoch: i32) -> ShareCoordinator {
        let share = ShareCoordinator::new(ShareConfig {
            snapshot_update_records_per_snapshot: 2,
            ..ShareConfig::default()
        });
        share.set_store(Arc::new(MemStore(
            Arc::clone(&store.0),
            epoch,
            Arc::clone(&store.2),
        )));
        share
    }

    fn node(store: &MemStore) -> ShareCoordinator {
        node_at(store, 0)
    }

    /// Group configs that lag: a change stored elsewhere becomes visible only at the
    /// next read barrier, which fails while `unreachable` (no controller answers).
    #[derive(Debug, Default)]
    struct Lagging {
        visible: Mutex<Arc<GroupConfigs>>,
        stored: Mutex<Arc<GroupConfigs>>,
        unreachable: AtomicBool,
        barriers: AtomicU64,
        defaults: (crate::config::CoordinatorConfig, ShareConfig),
    }

    impl Lagging {
        /// Another node sets `group`'s `share.auto.offset.reset`: not visible here yet.
        fn set_elsewhere(&self, group: &str, reset: &str) {
            let key = super::super::group_configs::SHARE_AUTO_OFFSET_RESET;
            let overrides = [(key.to_string(), reset.to_string())].into();
            *self.stored.lock() = Arc::new([(group.to_string(), overrides)].into());
        }
    }

    impl GroupConfigStore for Lagging {
        fn configs(&self) -> Arc<GroupConfigs> {
            self.visible.lock().clone()
        }

        fn defaults(&self) -> (&crate::config::CoordinatorConfig, &ShareConfig) {
            (&self.defaults.0, &self.defaults.1)
        }

        fn store(
            &self,
            _: &str,
            _: &[super::super::group_configs::GroupConfigChange],
        ) -> Result<()> {
            Err(Error::Closed("this test's group configs".into()))
        }

        fn read_barrier(&self, timeout: Duration) -> Result<()> {
            self.barriers.fetch_add(1, Ordering::Relaxed);
            if self.unreachable.load(Ordering::Relaxed) {
                return Err(Error::Timeout(format!(
                    "the test's read barrier: no controller was known within {timeout:?}"
                )));
            }
            *self.visible.lock() = self.stored.lock().clone();
            Ok(())
        }
    }

    /// A partition whose log holds offsets 0 to 9, none of which the test reads.
    struct TenRecords;

    impl super::super::ShareSource for TenRecords {
        fn high_watermark(&self) -> i64 {
            10
        }
        fn last_stable_offset(&self) -> Result<i64> {
            Ok(10)
        }
        fn log_start_offset(&self) -> i64 {
            0
        }
        fn read_below(&self, offset: i64, _: usize, _: bool) -> Result<crate::storage::LogSlice> {
            Ok(crate::storage::LogSlice::empty(None, offset))
        }
        fn aborted_transactions(&self, _: i64, _: i64) -> Result<Vec<crate::storage::AbortedTxn>> {
            Ok(Vec::new())
        }
    }

    /// A share-partition read for the first time starts where the group's
    /// `share.auto.offset.reset` says once the group configs are up to date (a read
    /// barrier), never at a guess: set on another node and not seen here yet, it is
    /// seen after the barrier; with a barrier that fails, the read fails, retriable,
    /// and nothing is started. The barrier is taken only for a share-partition not held
    /// here, not on each read.
    #[test]
    fn a_new_share_partition_starts_where_the_group_configs_say_once_up_to_date() {
        let store = MemStore::default();
        let share = node(&store);
        let configs = Arc::new(Lagging::default());
        share.set_group_configs(configs.clone());
        let mode = super::super::ShareReadMode {
            committed: false,
            earliest_by_default: false,
        };
        let read = |group: &str| {
            share.read_share_partition(&TenRecords, group, "t", 0, mode, 1024, Instant::now())
        };

        configs.set_elsewhere("g", "earliest");
        read("g").unwrap();
        assert_eq!(
            share.start_offset("g", "t", 0),
            Some(0),
            "earliest, seen after the barrier"
        );
        assert_eq!(configs.barriers.load(Ordering::Relaxed), 1);
        read("g").unwrap();
        assert_eq!(
            configs.barriers.load(Ordering::Relaxed),
            1,
            "a held share-partition takes none"
        );

        // No barrier: no start, and the read fails with a retriable refusal.
        configs.unreachable.store(true, Ordering::Relaxed);
        configs.set_elsewhere("h", "earliest");
        let e = read("h").unwrap_err();
        assert!(
            matches!(&e, Error::Share { source: ShareError::StartUnknown(why), .. } if why.contains("no controller was known")),
            "{e}"
        );
        assert_eq!(share.start_offset("h", "t", 0), None);
        configs.unreachable.store(false, Ordering::Relaxed);
        read("h").unwrap();
        assert_eq!(share.start_offset("h", "t", 0), Some(0));

        // A group that sets nothing starts at the end (latest), the caller's default.
        read("other").unwrap();
        assert_eq!(share.start_offset("other", "t", 0), Some(10));
    }

    /// Acquires offsets `from..from + 10` of `group`'s t-0 and accepts the first 4: an
    /// update, then a snapshot.
    fn work(share: &ShareCoordinator, group: &str, from: i64) {
        let now = Instant::now();
        share.fetch_offset(group, "t", 0, 0, 0, now).unwrap();
        let offsets: Vec<i64> = (from..from + 10).collect();
        let got = share
            .acquire(group, "m", "t", 0, &offsets, from + 10, 100, now)
            .unwrap();
        assert_eq!(got.len(), 10);
        let acks: Vec<(i64, AcknowledgeType)> = (from..from + 4)
            .map(|o| (o, AcknowledgeType::Accept))
            .collect();
        for (_, r) in share.acknowledge(group, "m", "t", 0, &acks, now).unwrap() {
            r.unwrap();
        }
        share.release_held(group, "m", now).unwrap();
    }

    /// A state partition led by another node, as a node's coordinator writes to it: each
    /// append is a Produce the leader's handler takes as produce.rs does (it asks the
    /// leader's coordinator whether it is loaded, `Backend::share`, then appends
    /// through the leader's fence); reads are Fetches, which never ask the leader's
    /// coordinator. The first append waits at `meet` until the other node's first
    /// append is under way too.
    #[derive(Clone)]
    struct LedElsewhere {
        log: MemStore,
        leader: std::sync::Weak<ShareCoordinator>,
        meet: Arc<std::sync::Barrier>,
        met: Arc<std::sync::atomic::AtomicBool>,
    }

    impl ShareJournal for LedElsewhere {
        fn append(&self, key: &[u8], value: &[u8]) -> Result<i64> {
            if !self.met.swap(true, Ordering::SeqCst) {
                self.meet.wait();
            }
            let leader = self
                .leader
                .upgrade()
                .ok_or_else(|| Error::Closed("the leader".into()))?;
            if !leader.is_loaded() {
                return Err(Error::Closed("the leader's share coordinator".into()));
            }
            self.log.append(key, value)
        }

        fn prune(&self, offset: i64) -> Result<()> {
            self.log.prune(offset)
        }
    }

    impl ShareStateStore for LedElsewhere {
        fn partitions(&self) -> Result<i32> {
            Ok(1)
        }

        fn journal(&self, _index: i32) -> Arc<dyn ShareJournal> {
            Arc::new(self.clone())
        }

        fn leader_epoch(&self, _topic: &str, _partition: i32) -> Result<i32> {
            Ok(0)
        }

        fn made(&self) -> bool {
            true
        }

        fn read(&self, index: i32, f: &mut RecordVisitor<'_>) -> Result<()> {
            self.log.read(index, f)
        }
    }

    /// Two nodes, each writing its share-partitions' state to a state partition the
    /// other leads, both at once (each holding its own coordinator while it waits for
    /// the other's answer, as a journal write does): the leader's side of a write never
    /// waits for the leader's coordinator, so neither waits for the other. Before, the
    /// leader's Produce handler asked its coordinator whether it was loaded under the
    /// coordinator's lock: the two writes waited for each other until the inter-broker
    /// call timed out (10 s), and every request of the share group on either node with
    /// them (librdkafka's 0171 stalled 10 s per new share-partition).
    #[test]
    fn nodes_writing_share_state_to_each_others_state_partitions_do_not_wait_for_each_other() {
        let config = ShareConfig::default();
        let a = Arc::new(ShareCoordinator::new(config.clone()));
        let b = Arc::new(ShareCoordinator::new(config));
        let meet = Arc::new(std::sync::Barrier::new(2));
        // a's share-partitions are kept in a state partition b leads, and b's in one a
        // leads.
        for (node, leader) in [(&a, &b), (&b, &a)] {
            node.set_store(Arc::new(LedElsewhere {
                log: MemStore::default(),
                leader: Arc::downgrade(leader),
                meet: Arc::clone(&meet),
                met: Arc::default(),
            }));
        }
        let (tx, rx) = std::sync::mpsc::channel();
        for (name, node) in [("a", &a), ("b", &b)] {
            let node = Arc::clone(node);
            let tx = tx.clone();
            std::thread::spawn(move || {
                let first = node.fetch_offset("g", "t", 0, 0, 0, Instant::now());
                let _ = tx.send((name, first));
            });
        }
        for _ in 0..2 {
            // Bounded: a deadlock shows as no answer at all.
            let (name, first) = rx
                .recv_timeout(Duration::from_secs(60))
                .expect("the two nodes' state writes wait for each other");
            assert_eq!(first.unwrap(), 0, "node {name} starts its share-partition");
        }
        assert_eq!(a.start_offset("g", "t", 0), Some(0));
        assert_eq!(b.start_offset("g", "t", 0), Some(0));
    }

    #[test]
    fn a_cluster_nodes_snapshots_prune_what_no_share_partition_of_any_node_needs() {
        let store = MemStore::default();
        // Two nodes lead partitions of share-partitions kept in one state partition.
        let (a, b) = (node(&store), node(&store));
        for round in 0..20 {
            work(&a, "ga", round * 4);
            work(&b, "gb", round * 4);
        }
        let (start, held) = {
            let log = store.0.lock();
            (log.start, log.records.len())
        };
        assert!(start > 0, "nothing pruned");
        // Each share-partition needs its last snapshot and the updates after it.
        assert!(held <= 6, "{held} records held");
        // A third node loads both share-partitions whole.
        let c = node(&store);
        for group in ["ga", "gb"] {
            assert_eq!(
                c.fetch_offset(group, "t", 0, 0, 0, Instant::now()).unwrap(),
                80
            );
            // Accepted up to 80; 80 was delivered in the last two rounds and released.
            assert_eq!(c.record_state(group, "t", 0, 79), None, "accepted");
            assert_eq!(
                c.record_state(group, "t", 0, 80),
                Some((RecordState::Available, 2)),
            );
        }
    }

    #[test]
    fn what_a_deposed_leader_writes_after_the_next_one_loaded_is_fenced() {
        let store = MemStore::default();
        let old = node_at(&store, 1);
        work(&old, "g", 0);
        let now = Instant::now();
        let held: Vec<i64> = (4..14).collect();
        let got = old.acquire("g", "m", "t", 0, &held, 14, 100, now).unwrap();
        assert_eq!(got.len(), 10);
        // The leadership moves: the new leader (epoch 2) loads the share-partition,
        // what the old one held available again.
        let new = node_at(&store, 2);
        assert_eq!(new.fetch_offset("g", "t", 0, 0, 0, now).unwrap(), 4);
        // The old leader, not knowing yet, accepts records it held: refused when
        // written, and it drops the share-partition with what it handed out.
        let acks: Vec<(i64, AcknowledgeType)> =
            (4..8).map(|o| (o, AcknowledgeType::Accept)).collect();
        let refused = old.acknowledge("g", "m", "t", 0, &acks, now).unwrap_err();
        assert!(
            matches!(refused, Error::FencedLeaderEpoch { .. }),
            "{refused}"
        );
        assert!(old.loaded_share_partitions().is_empty());
        assert_eq!(old.record_state("g", "t", 0, 4), None);
        // The next leader reads the new leader's state.
        let next = node_at(&store, 3);
        assert_eq!(next.fetch_offset("g", "t", 0, 0, 0, now).unwrap(), 4);
        assert_eq!(
            next.record_state("g", "t", 0, 4),
            Some((RecordState::Available, 2))
        );
        // A node loading with an older leader epoch than the state has is refused.
        let stale = node_at(&store, 2);
        let e = stale.fetch_offset("g", "t", 0, 0, 0, now).unwrap_err();
        assert!(matches!(e, Error::FencedLeaderEpoch { .. }), "{e}");
    }

    #[test]
    fn a_deposed_leaders_write_while_the_next_one_reads_the_state_is_refused() {
        let store = MemStore::default();
        let old = Arc::new(node_at(&store, 1));
        work(&old, "g", 0);
        let now = Instant::now();
        let held: Vec<i64> = (4..14).collect();
        old.acquire("g", "m", "t", 0, &held, 14, 100, now).unwrap();
        // The old leader's acceptance lands while the new leader reads the state (after
        // the new leader's read began, before it wrote anything else).
        let answer = Arc::new(Mutex::new(None));
        let (deposed, told) = (Arc::clone(&old), Arc::clone(&answer));
        store.0.lock().on_read = Some(Box::new(move || {
            let acks: Vec<(i64, AcknowledgeType)> =
                (4..8).map(|o| (o, AcknowledgeType::Accept)).collect();
            *told.lock() = Some(deposed.acknowledge("g", "m", "t", 0, &acks, now));
        }));
        let new = node_at(&store, 2);
        assert_eq!(new.fetch_offset("g", "t", 0, 0, 0, now).unwrap(), 4);
        // The acceptance was not answered as done: the new leader delivers 4..8 again.
        let answer = answer
            .lock()
            .take()
            .expect("the old leader wrote during the read");
        assert!(
            matches!(answer, Err(Error::FencedLeaderEpoch { .. })),
            "{answer:?}"
        );
        assert_eq!(
            new.record_state("g", "t", 0, 4),
            Some((RecordState::Available, 2))
        );
    }

    /// A store and the leader of t-0 (at leader epoch 1) holding offsets 4..14 of g's
    /// share-partition after [`work`].
    fn holding() -> (MemStore, ShareCoordinator, Instant) {
        let store = MemStore::default();
        let leader = node_at(&store, 1);
        work(&leader, "g", 0);
        let now = Instant::now();
        let held: Vec<i64> = (4..14).collect();
        let got = leader
            .acquire("g", "m", "t", 0, &held, 14, 100, now)
            .unwrap();
        assert_eq!(got.len(), 10);
        (store, leader, now)
    }

    /// `leader` accepts records `offsets` of g's t-0 it held: FENCED_STATE_EPOCH.
    fn accepting_held_records_is_state_fenced(
        leader: &ShareCoordinator,
        offsets: std::ops::Range<i64>,
        now: Instant,
    ) {
        let acks: Vec<(i64, AcknowledgeType)> =
            offsets.map(|o| (o, AcknowledgeType::Accept)).collect();
        let refused = leader
            .acknowledge("g", "m", "t", 0, &acks, now)
            .unwrap_err();
        assert!(
            matches!(refused, Error::FencedStateEpoch { .. }),
            "{refused}"
        );
    }

    #[test]
    fn a_leaders_write_of_a_state_an_admin_replaced_is_fenced_and_the_state_reloads() {
        let store = MemStore::default();
        let leader = node_at(&store, 1);
        work(&leader, "g", 0);
        let now = Instant::now();
        let held: Vec<i64> = (4..14).collect();
        leader
            .acquire("g", "m", "t", 0, &held, 14, 100, now)
            .unwrap();
        // The group's coordinator (another node; the group has no member there) sets
        // the start offset back to 2: the next state epoch.
        let coordinator = node_at(&store, 1);
        let altered = coordinator
            .alter_share_offsets("g", &[("t".into(), 0, 2)])
            .unwrap();
        altered[0].as_ref().unwrap();
        // The leader of t-0, holding the old state, accepts records it held: refused
        // when written, and it drops the share-partition.
        accepting_held_records_is_state_fenced(&leader, 4..8, now);
        assert!(leader.loaded_share_partitions().is_empty());
        // Read again, it has the new state: from 2, nothing in flight.
        assert_eq!(leader.fetch_offset("g", "t", 0, 0, 0, now).unwrap(), 2);
        assert_eq!(leader.record_state("g", "t", 0, 4), None);
        let again: Vec<i64> = (2..14).collect();
        let got = leader
            .acquire("g", "m", "t", 0, &again, 14, 100, now)
            .unwrap();
        let counts: Vec<i16> = got.iter().map(|r| r.delivery_count).collect();
        assert_eq!(counts, vec![1; 12], "delivered anew from 2");
        // A third node reads the same (what the leader held available again).
        let next = node_at(&store, 1);
        assert_eq!(next.fetch_offset("g", "t", 0, 0, 0, now).unwrap(), 2);
    }

    /// [`holding`], with group "other" worked on t-0 too (the fence knows both
    /// share-partitions), and the node coordinating the groups (another node).
    fn holding_with_other() -> (MemStore, ShareCoordinator, Instant, ShareCoordinator) {
        let (store, leader, now) = holding();
        work(&leader, "other", 0);
        assert_eq!(store.2.known(0), 2);
        let coordinator = node_at(&store, 1);
        (store, leader, now, coordinator)
    }

    #[test]
    fn a_deleted_state_leaves_the_fence_and_its_leaders_next_write_reloads_it() {
        let (store, leader, now, coordinator) = holding_with_other();
        // The group's coordinator deletes g's state: the fence forgets it.
        let deleted = coordinator
            .delete_share_offsets("g", &[("t".into(), 0)])
            .unwrap();
        deleted[0].as_ref().unwrap();
        assert_eq!(store.2.known(0), 1, "the fence shrinks");
        // The leader of t-0, holding the deleted state, accepts records it held:
        // refused, and it drops the share-partition.
        accepting_held_records_is_state_fenced(&leader, 4..8, now);
        assert!(!leader.loaded_share_partitions().is_empty(), "other stays");
        // Read again, it starts as a share-partition never read (at the initial
        // offset asked), with nothing in flight.
        assert_eq!(leader.fetch_offset("g", "t", 0, 0, 9, now).unwrap(), 9);
        assert_eq!(leader.record_state("g", "t", 0, 4), None);
        assert_eq!(store.2.known(0), 2);
        // A third node reads the same.
        let next = node_at(&store, 1);
        assert_eq!(next.fetch_offset("g", "t", 0, 0, 0, now).unwrap(), 9);
    }

    #[test]
    fn a_deleted_group_leaves_the_fence_and_a_group_of_its_name_starts_afresh() {
        let (store, leader, now, coordinator) = holding_with_other();
        // The group's coordinator deletes g: refused while it has a member.
        let member = coordinator.join("g", &["t".into()], "c").unwrap();
        let e = coordinator.delete_group("g").unwrap_err();
        assert!(
            matches!(
                &e,
                Error::Share {
                    source: ShareError::NonEmptyGroup(1),
                    ..
                }
            ),
            "{e}"
        );
        coordinator.leave("g", &member, now).unwrap();
        coordinator.delete_group("g").unwrap();
        assert_eq!(store.2.known(0), 1, "the fence forgets g's share-partition");
        assert!(!coordinator.list_groups().contains(&"g".to_string()));
        let e = coordinator.delete_group("g").unwrap_err();
        assert!(
            matches!(
                &e,
                Error::Share {
                    source: ShareError::GroupIdNotFound,
                    ..
                }
            ),
            "{e}"
        );
        // The leader of t-0, holding the deleted state, accepts records it held:
        // refused, and it drops the share-partition.
        accepting_held_records_is_state_fenced(&leader, 4..8, now);
        // A group of the same name starts afresh (at the initial offset asked), here
        // and on a node loading it.
        assert_eq!(leader.fetch_offset("g", "t", 0, 0, 9, now).unwrap(), 9);
        assert_eq!(leader.record_state("g", "t", 0, 4), None);
        let next = node_at(&store, 1);
        assert_eq!(next.fetch_offset("g", "t", 0, 0, 0, now).unwrap(), 9);
        // The other group keeps its state.
        assert_eq!(next.fetch_offset("other", "t", 0, 0, 0, now).unwrap(), 4);
    }

    #[test]
    fn a_deleted_topics_share_states_go_and_the_topic_made_again_starts_afresh() {
        let store = MemStore::default();
        // The topic's partition was led at leader epoch 5.
        let old = node_at(&store, 5);
        work(&old, "ga", 0);
        work(&old, "gb", 0);
        assert_eq!(store.2.known(0), 2);
        let now = Instant::now();
        // Deleted: every group's share-partition of it.
        let admin = node_at(&store, 5);
        assert_eq!(admin.delete_topic_states("t").unwrap(), 2);
        assert_eq!(admin.delete_topic_states("t").unwrap(), 0, "nothing left");
        assert_eq!(store.2.known(0), 0);
        // Made again, its partition's leader epochs begin anew: the new leader starts
        // afresh (not at 4, where the old state was) ...
        let new = node_at(&store, 0);
        assert_eq!(new.fetch_offset("gb", "t", 0, 0, 2, now).unwrap(), 2);
        assert_eq!(new.fetch_offset("ga", "t", 0, 0, 0, now).unwrap(), 0);
        let offsets: Vec<i64> = (0..10).collect();
        let got = new
            .acquire("ga", "m", "t", 0, &offsets, 10, 100, now)
            .unwrap();
        assert_eq!(got.len(), 10);
        // ... and what it writes (an update) is what the next node reads.
        let next = node_at(&store, 0);
        assert_eq!(next.fetch_offset("ga", "t", 0, 0, 0, now).unwrap(), 0);
        assert_eq!(
            next.record_state("ga", "t", 0, 0),
            Some((RecordState::Available, 1))
        );
        // Its next snapshot prunes the old states, not gb's new one.
        let acks: Vec<(i64, AcknowledgeType)> =
            (0..4).map(|o| (o, AcknowledgeType::Accept)).collect();
        for (_, r) in new.acknowledge("ga", "m", "t", 0, &acks, now).unwrap() {
            r.unwrap();
        }
        assert!(store.0.lock().start > 0, "pruned");
        let last = node_at(&store, 0);
        assert_eq!(last.fetch_offset("ga", "t", 0, 0, 0, now).unwrap(), 4);
        assert_eq!(last.fetch_offset("gb", "t", 0, 0, 7, now).unwrap(), 2);
    }

    #[test]
    fn an_admins_alter_is_refused_if_a_snapshot_landed_since_its_read_and_read_again() {
        let (store, leader, now) = holding();
        let leader = Arc::new(leader);
        let snapshots = |log: &MemLog| {
            let k = records::key(SNAPSHOT, &key("g", "t", 0));
            log.records.iter().filter(|r| r.1 == k).map(|r| r.0).max()
        };
        // Between the admin's read of the state (its second read: the first checks the
        // group) and its write, the leader of t-0 accepts records one by one until it
        // writes a snapshot: of the same snapshot epoch as the admin's.
        let (writer, log) = (Arc::clone(&leader), Arc::clone(&store.0));
        store.0.lock().after_read = Some((
            1,
            Box::new(move || {
                let before = snapshots(&log.lock());
                for o in 4..12 {
                    let acks = [(o, AcknowledgeType::Accept)];
                    for (_, r) in writer.acknowledge("g", "m", "t", 0, &acks, now).unwrap() {
                        r.unwrap();
                    }
                    if snapshots(&log.lock()) > before {
                        return;
                    }
                }
                panic!("the leader wrote no snapshot");
            }),
        ));
        let coordinator = node_at(&store, 1);
        let altered = coordinator
            .alter_share_offsets("g", &[("t".into(), 0, 2)])
            .unwrap();
        altered[0].as_ref().unwrap();
        assert!(store.0.lock().after_read.is_none(), "the leader wrote");
        // The leader's next update, made against its snapshot of the old state: refused,
        // not taken as an update of the admin's state.
        accepting_held_records_is_state_fenced(&leader, 12..14, now);
        // Read again, the state is the admin's: from 2, nothing in flight.
        for node in [&*leader, &node_at(&store, 1)] {
            assert_eq!(node.fetch_offset("g", "t", 0, 0, 0, now).unwrap(), 2);
            assert_eq!(node.record_state("g", "t", 0, 12), None);
        }
    }

    /// A store whose appends of one share group's records wait at a gate once it is
    /// shut (a state partition led by a slow node).
    struct GatedStore {
        store: MemStore,
        group: &'static [u8],
        /// While shut: each gated append says it arrived, then waits to be let through.
        gate: Mutex<Option<Gate>>,
    }

    type Gate = (
        std::sync::mpsc::Sender<()>,
        Arc<Mutex<std::sync::mpsc::Receiver<()>>>,
    );

    impl ShareJournal for GatedStore {
        fn append(&self, key: &[u8], value: &[u8]) -> Result<i64> {
            let gated = key.windows(self.group.len()).any(|w| w == self.group);
            let shut = if gated {
                self.gate.lock().clone()
            } else {
                None
            };
            if let Some((arrived, through)) = shut {
                arrived.send(()).unwrap();
                through.lock().recv().unwrap();
            }
            self.store.append(key, value)
        }

        fn prune(&self, offset: i64) -> Result<()> {
            self.store.prune(offset)
        }
    }

    struct Gated(Arc<GatedStore>);

    impl ShareStateStore for Gated {
        fn partitions(&self) -> Result<i32> {
            Ok(1)
        }

        fn journal(&self, _index: i32) -> Arc<dyn ShareJournal> {
            Arc::clone(&self.0) as Arc<dyn ShareJournal>
        }

        fn leader_epoch(&self, _topic: &str, _partition: i32) -> Result<i32> {
            Ok(0)
        }

        fn made(&self) -> bool {
            true
        }

        fn read(&self, index: i32, f: &mut RecordVisitor<'_>) -> Result<()> {
            ShareStateStore::read(&self.0.store, index, f)
        }
    }

    #[test]
    fn a_share_partition_waiting_for_its_journal_holds_up_no_other_share_partition() {
        let gated = Arc::new(GatedStore {
            store: MemStore::default(),
            group: b"slow-readers",
            gate: Mutex::new(None),
        });
        let share = Arc::new(ShareCoordinator::new(ShareConfig::default()));
        share.set_store(Arc::new(Gated(Arc::clone(&gated))));
        let now = Instant::now();
        let offsets: Vec<i64> = (0..10).collect();
        for group in ["slow-readers", "quick-readers"] {
            share.fetch_offset(group, "t", 0, 0, 0, now).unwrap();
        }
        // The slow group's next write waits at the gate, its share-partition locked.
        let (arrived_tx, arrived) = std::sync::mpsc::channel();
        let (through, through_rx) = std::sync::mpsc::channel();
        *gated.gate.lock() = Some((arrived_tx, Arc::new(Mutex::new(through_rx))));
        let slow = {
            let (share, offsets) = (Arc::clone(&share), offsets.clone());
            std::thread::spawn(move || {
                share.acquire("slow-readers", "m", "t", 0, &offsets, 10, 100, now)
            })
        };
        arrived.recv_timeout(Duration::from_secs(30)).unwrap();
        // Meanwhile another share group reads and acknowledges, and the slow group's
        // lock expiry is asked for (what every waiting ShareFetch asks).
        let quick = {
            let share = Arc::clone(&share);
            std::thread::spawn(move || {
                let got = share.acquire("quick-readers", "m", "t", 0, &offsets, 10, 100, now)?;
                let acks = [(0, AcknowledgeType::Accept)];
                let acked = share.acknowledge("quick-readers", "m", "t", 0, &acks, now)?;
                let held = share.next_lock_expiry("quick-readers", &[("t".into(), 0)]);
                Ok::<_, Error>((got.len(), acked.len(), held.is_some()))
            })
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while !quick.is_finished() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        let quick_done = quick.is_finished();
        through.send(()).unwrap();
        *gated.gate.lock() = None;
        assert!(
            quick_done,
            "another share group waited for the slow group's journal write"
        );
        assert_eq!(quick.join().unwrap().unwrap(), (10, 1, true));
        assert_eq!(slow.join().unwrap().unwrap().len(), 10);
        assert_eq!(
            share.record_state("slow-readers", "t", 0, 9).map(|s| s.1),
            Some(1)
        );
    }
}
