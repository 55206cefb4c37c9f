//! Topic and Partition handles.
//!
//! A [`Partition`] is a cheap, cloneable handle on one partition's log; it is what the
//! producer, the consumers and the network server's Produce/Fetch handlers all call, so
//! there is one append path and one read path. A [`Topic`] holds the partitions of a
//! topic; adding partitions publishes a new partition list, and handles see it at once.
//!
//! Wakeups: the partition's log notifies the consumers watching it (each consumer has
//! one [`Signal`] it registers with the partitions it reads) whenever its high watermark
//! moves, whoever appended, so a consumer blocked in `poll` over many partitions wakes
//! as soon as any of them grows, without polling.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::time::{Duration, Instant};

use parking_lot::{Mutex, RwLock};

use crate::config::TopicConfig;
use crate::error::{Error, Result};
use crate::record::{BatchBuilder, Compression, ValidBatches};
use crate::replica::{IsrProposalEnd, LeaderState};
pub(crate) use crate::storage::Signal;
use crate::storage::{
    AbortedTxn, AppendInfo, AppendOutcome, LogConfig, LogSlice, PartitionLog, ReadLimit,
    RecoveryReport,
};

struct PartitionInner {
    topic: Arc<str>,
    index: i32,
    log: PartitionLog,
    /// The replica role: what appends may do and who moves the high watermark.
    /// Appends hold it shared, role changes exclusively, so no append of an old leader
    /// lands after the partition became a follower. (A standalone partition's builder
    /// appends skip it: the log's writer lock decides them, and every role change
    /// first ends them there, `PartitionLog::end_standalone`.)
    role: RwLock<Role>,
}

/// What this node does for a partition (a single node's partitions are standalone).
#[derive(Debug)]
#[cfg_attr(not(feature = "server"), allow(dead_code))]
pub(crate) enum Role {
    /// Not replicated: every append is committed at once.
    Standalone,
    /// This node leads the partition: it appends, and the high watermark follows the
    /// in-sync replicas ([`LeaderState`]).
    Leader {
        /// Followers' state, the ISR and the high-watermark rule.
        state: Mutex<LeaderState>,
        /// `min.insync.replicas` of the topic.
        min_insync_replicas: AtomicI32,
    },
    /// Another node leads it (the cluster's replica fetcher copies its log here), or
    /// nobody does (`leader` -1).
    Follower {
        /// The leader, or -1.
        leader: i32,
    },
}

/// The leadership an append was made under: the leader epoch while this node led the
/// partition, none on a standalone partition. An `acks=all` wait for that append
/// ([`Partition::wait_committed_at`]) is decided under it only: if the leadership
/// changed since, the offset may now hold another leader's record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(not(feature = "server"), allow(dead_code))]
pub(crate) struct AppendEpoch(Option<i32>);

/// An ISR change a leader wants to propose.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(not(feature = "server"), allow(dead_code))]
pub(crate) struct IsrChange {
    /// The leader epoch it was computed at.
    pub leader_epoch: i32,
    /// The partition epoch it was computed from.
    pub partition_epoch: i32,
    /// The new ISR.
    pub new_isr: Vec<i32>,
    /// The leadership's id of the proposal (what [`Partition::isr_change_failed`] names).
    pub proposal: u64,
}

/// One partition of a topic: a handle on its log. Cheap to clone, `Send + Sync`.
#[derive(Clone)]
pub struct Partition {
    inner: Arc<PartitionInner>,
}

impl std::fmt::Debug for Partition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Partition({}-{})", self.inner.topic, self.inner.index)
    }
}

#[cfg_attr(not(feature = "server"), allow(dead_code))]
impl Partition {
    pub(crate) fn new(topic: Arc<str>, index: i32, log: PartitionLog) -> Self {
        Partition {
            inner: Arc::new(PartitionInner {
                topic,
                index,
                log,
                role: RwLock::new(Role::Standalone),
            }),
        }
    }

    /// A cluster node's replica, before the replica manager gives it a role: it leads
    /// nothing (a follower of no leader, -1), so appends are refused with
    /// `NotLeaderOrFollower` ("no leader right now") as Kafka answers a replica it has
    /// no leader and epoch for, and its log is replicated at `initial_high_watermark`
    /// (the recorded one after a restart), so readers see nothing it has not committed.
    pub(crate) fn new_unassigned(
        topic: Arc<str>,
        index: i32,
        log: PartitionLog,
        initial_high_watermark: i64,
    ) -> Self {
        log.set_replicated(initial_high_watermark);
        log.end_standalone();
        Partition {
            inner: Arc::new(PartitionInner {
                topic,
                index,
                log,
                role: RwLock::new(Role::Follower { leader: -1 }),
            }),
        }
    }

    /// Takes over `old`'s replica role: `old`'s log was moved into another log
    /// directory and reopened as this one's (a cluster replica moved by
    /// AlterReplicaLogDirs). A leader keeps its epoch, ISR and followers' state, a
    /// follower its leader; `old` is left a follower of no leader, so its waiters wake
    /// and what is appended through it is refused.
    pub(crate) fn take_role_from(&self, old: &Partition) -> Result<()> {
        // Both logs stop taking standalone appends before either role changes.
        old.inner.log.end_standalone();
        self.inner.log.end_standalone();
        let taken = std::mem::replace(&mut *old.inner.role.write(), Role::Follower { leader: -1 });
        old.inner.log.wake_all();
        let mut role = self.inner.role.write();
        if let Role::Leader { state, .. } = &taken {
            let epoch = state.lock().leader_epoch;
            self.inner.log.set_leader_epoch(epoch)?;
        }
        *role = taken;
        drop(role);
        self.inner.log.wake_all();
        Ok(())
    }

    /// True if `other` is this very partition handle (not another one of the same
    /// partition, such as one reopened after a move between log directories).
    pub(crate) fn is_same(&self, other: &Partition) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// The topic's name.
    pub fn topic(&self) -> &str {
        &self.inner.topic
    }

    /// The partition's index in its topic.
    pub fn index(&self) -> i32 {
        self.inner.index
    }

    /// The underlying log, for tidelog's own tests and tools (the `testing` feature).
    /// Appends through it skip the partition's leadership and idempotence checks: use
    /// [`Partition::append_batch`] and the other methods of `Partition` instead.
    #[cfg(feature = "testing")]
    pub fn log(&self) -> &PartitionLog {
        &self.inner.log
    }

    /// The underlying log.
    #[cfg(not(feature = "testing"))]
    pub(crate) fn log(&self) -> &PartitionLog {
        &self.inner.log
    }

    /// The partition's effective log settings: the broker's defaults with the topic's
    /// overrides (`retention.ms`, `max.message.bytes`, `compression.type`, ...).
    pub fn config(&self) -> LogConfig {
        self.inner.log.config()
    }

    /// What recovery found and removed when the log was opened: torn or damaged tails
    /// cut (kept in cut files beside the segments), segments validated, bytes read.
    pub fn recovery_report(&self) -> &RecoveryReport {
        self.inner.log.recovery_report()
    }

    /// Kafka's DeleteRecords: moves the log start offset up to `offset`, deleting the
    /// segments wholly below it; an offset past the high watermark, or negative, is
    /// [`Error::OffsetOutOfRange`]. Returns the new log start offset. Consumers
    /// positioned below it get `OffsetOutOfRange` (or reset, per their policy).
    pub fn delete_records_before(&self, offset: i64) -> Result<i64> {
        self.inner.log.delete_records_before(offset)
    }

    /// Appends one or more RecordBatch v2 batches (concatenated) and assigns their
    /// offsets; the log wakes the consumers waiting on this partition. On a cluster
    /// node, `Error::NotLeaderOrFollower` (naming the leader) unless this node leads the
    /// partition.
    ///
    /// The topic's `compression.type` is honoured as a Kafka broker does: `producer`
    /// (the default) stores the batches as sent; a codec (or `uncompressed`) stores every
    /// batch that has another codec rewritten in it (the same records, producer fields
    /// and base sequence), after its CRC is checked.
    ///
    /// ```
    /// use tidelog::{Batch, BatchBuilder, Broker, Compression, TopicConfig};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let broker = Broker::open(dir.path())?;
    /// broker.create_topic("z", 1, TopicConfig::new().set("compression.type", "zstd"))?;
    /// let p = broker.topic("z")?.partition(0)?;
    /// let mut b = BatchBuilder::new().compression(Compression::Gzip);
    /// b.push(1, None, Some(b"v"), &[]);
    /// p.append_batch(&b.finish())?;
    /// let stored = p.read(0, 1 << 20)?;
    /// assert_eq!(Batch::parse(&stored)?.codec()?, Compression::Zstd);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn append_batch(&self, batches: &[u8]) -> Result<AppendInfo> {
        self.append_batch_at(batches).map(|(info, _)| info)
    }

    /// [`Partition::append_batch`], with the leadership the batches were appended
    /// under (read under the role lock the append holds), for an `acks=all` wait.
    pub(crate) fn append_batch_at(&self, batches: &[u8]) -> Result<(AppendInfo, AppendEpoch)> {
        self.append_valid_at(&ValidBatches::parse(batches, self.inner.log.name())?)
    }

    /// [`Partition::append_batch_at`] of batches already validated (a request's,
    /// checked once where it was received): no CRC is computed again, including on the
    /// way through the topic's codec.
    pub(crate) fn append_valid_at(
        &self,
        batches: &ValidBatches<'_>,
    ) -> Result<(AppendInfo, AppendEpoch)> {
        let rewritten = self.inner.log.in_configured_codec(batches)?;
        let again = self.rewritten(rewritten.as_deref())?;
        let batches = again.as_ref().unwrap_or(batches);
        self.under_role(|| self.inner.log.append_valid(batches))
    }

    /// Runs `append` under the partition's role (held shared, so no role change comes
    /// in between): refused unless this node may append, and followed by the high
    /// watermark a leader's append may move; with the leadership it ran under.
    #[inline]
    fn under_role<T>(&self, append: impl FnOnce() -> Result<T>) -> Result<(T, AppendEpoch)> {
        let role = self.inner.role.read();
        self.check_appendable(&role)?;
        let appended = append()?;
        self.after_append(&role);
        Ok((appended, Self::epoch_of(&role)))
    }

    /// Appends batches of idempotent producers after their sequence checks, check and
    /// append in one step ([`PartitionLog::append_idempotent`]). Refused on a cluster
    /// node that does not lead the partition, and the topic's `compression.type`
    /// honoured, as [`Partition::append_batch`].
    pub fn append_idempotent(&self, batches: &[u8]) -> Result<AppendOutcome> {
        self.append_idempotent_at(batches)
            .map(|(outcome, _)| outcome)
    }

    /// [`Partition::append_idempotent`], with the leadership the batches were appended
    /// (or found duplicate) under, for an `acks=all` wait.
    pub(crate) fn append_idempotent_at(
        &self,
        batches: &[u8],
    ) -> Result<(AppendOutcome, AppendEpoch)> {
        self.append_idempotent_valid_at(&ValidBatches::parse(batches, self.inner.log.name())?)
    }

    /// [`Partition::append_idempotent_at`] of batches already validated, as
    /// [`Partition::append_valid_at`].
    pub(crate) fn append_idempotent_valid_at(
        &self,
        batches: &ValidBatches<'_>,
    ) -> Result<(AppendOutcome, AppendEpoch)> {
        let rewritten = self.inner.log.in_configured_codec(batches)?;
        let again = self.rewritten(rewritten.as_deref())?;
        let batches = again.as_ref().unwrap_or(batches);
        self.under_role(|| self.inner.log.append_idempotent_valid(batches))
    }

    /// Finishes the batch of an idempotent (or transactional) producer in `builder` and
    /// appends it after its sequence checks, as [`Partition::append_idempotent_at`]
    /// does, without copying the batch out of the builder or computing again the CRC
    /// the builder has just computed. The builder is empty afterwards, whatever the
    /// result (and keeps its buffer).
    pub(crate) fn append_idempotent_builder_at(
        &self,
        builder: &mut BatchBuilder,
    ) -> Result<(AppendOutcome, AppendEpoch)> {
        builder.finish_with(|bytes| {
            self.append_idempotent_valid_at(&ValidBatches::sealed(bytes, self.inner.log.name())?)
        })
    }

    /// Finishes `builder`'s batch and appends it, as [`PartitionLog::append_builder`]
    /// does (no copy, no second CRC pass); the log wakes the consumers waiting on this
    /// partition. Refused on a cluster node that does not lead the partition, as
    /// [`Partition::append_batch`].
    pub fn append_builder(&self, builder: &mut BatchBuilder) -> Result<AppendInfo> {
        self.append_builder_at(builder).map(|(info, _)| info)
    }

    /// [`Partition::append_builder`], with the leadership the batch was appended
    /// under, for an `acks=all` wait.
    pub(crate) fn append_builder_at(
        &self,
        builder: &mut BatchBuilder,
    ) -> Result<(AppendInfo, AppendEpoch)> {
        // A standalone partition appends without the role lock (two atomic
        // read-modify-writes, a tenth of a single-record append): its log decides under
        // the writer lock, which every role change takes first (`end_standalone`). A
        // batch without a codec is sealed under that lock (faster for small ones), one
        // with a codec before it, so that no compression holds the lock.
        if self.inner.log.is_standalone() {
            if builder.codec() != Compression::None {
                return builder.finish_with(|bytes| {
                    let batches = ValidBatches::sealed(bytes, self.inner.log.name())?;
                    match self.inner.log.append_valid_standalone(&batches) {
                        Some(appended) => appended.map(|info| (info, AppendEpoch(None))),
                        // A role came between the look and the lock: append under it.
                        None => self.under_role(|| self.inner.log.append_valid(&batches)),
                    }
                });
            }
            if let Some(appended) = self.inner.log.append_builder_standalone(builder) {
                return appended.map(|info| (info, AppendEpoch(None)));
            }
        }
        self.under_role(|| self.inner.log.append_builder(builder))
    }

    /// Appends the COMMIT or ABORT control batch of a transaction of `producer_id`
    /// ([`PartitionLog::append_end_txn_marker_once`], what the transaction coordinator
    /// writes: a retried marker is not appended again), with the leadership it was
    /// appended or found under. Refused on a cluster node that does not lead the
    /// partition, as [`Partition::append_batch`].
    pub(crate) fn append_end_txn_marker_at(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        marker: crate::record::EndTxnMarker,
        transaction_version: i8,
        timestamp: i64,
    ) -> Result<(crate::storage::MarkerOutcome, AppendEpoch)> {
        let role = self.inner.role.read();
        self.check_appendable(&role)?;
        let outcome = self.inner.log.append_end_txn_marker_once(
            producer_id,
            producer_epoch,
            marker,
            transaction_version,
            timestamp,
        )?;
        if matches!(outcome, crate::storage::MarkerOutcome::Appended(_)) {
            self.after_append(&role);
        }
        Ok((outcome, Self::epoch_of(&role)))
    }

    /// The batches the topic's codec rewrote, if it did (tidelog encoded them: their
    /// CRC is not checked again).
    fn rewritten<'b>(&self, bytes: Option<&'b [u8]>) -> Result<Option<ValidBatches<'b>>> {
        bytes
            .map(|b| ValidBatches::encoded(b, self.inner.log.name()))
            .transpose()
    }

    /// The leadership of an append holding `role`.
    fn epoch_of(role: &Role) -> AppendEpoch {
        AppendEpoch(match role {
            Role::Leader { state, .. } => Some(state.lock().leader_epoch),
            _ => None,
        })
    }

    /// `topic-partition`, as errors name it.
    pub(crate) fn name(&self) -> String {
        format!("{}-{}", self.inner.topic, self.inner.index)
    }

    fn check_appendable(&self, role: &Role) -> Result<()> {
        match role {
            Role::Standalone | Role::Leader { .. } => Ok(()),
            Role::Follower { leader, .. } => Err(self.not_leader(*leader)),
        }
    }

    /// A leader's append may move the high watermark (an ISR of the leader alone).
    #[inline]
    fn after_append(&self, role: &Role) {
        if let Role::Leader { state, .. } = role
            && let Some(hw) = state.lock().advance(self.inner.log.log_end_offset())
        {
            self.inner.log.set_high_watermark(hw);
        }
    }

    fn not_leader(&self, leader: i32) -> Error {
        Error::NotLeaderOrFollower {
            partition: self.name(),
            reason: if leader < 0 {
                "it has no leader right now".into()
            } else {
                format!("node {leader} leads it")
            },
        }
    }

    /// True unless this node is a cluster node that only follows the partition (appends
    /// go to the leader then). A single node's partitions are always their own leader.
    pub fn is_leader(&self) -> bool {
        !matches!(&*self.inner.role.read(), Role::Follower { .. })
    }

    /// (leader, replicas, ISR) as this node knows them: all three on the leader, the
    /// leader alone on a follower, nothing on a standalone data directory.
    fn replica_view(&self) -> (Option<i32>, Vec<i32>, Vec<i32>) {
        match &*self.inner.role.read() {
            Role::Standalone => (None, Vec::new(), Vec::new()),
            Role::Leader { state, .. } => {
                let s = state.lock();
                (Some(s.node_id), s.replicas.clone(), s.isr.clone())
            }
            Role::Follower { leader } => {
                ((*leader >= 0).then_some(*leader), Vec::new(), Vec::new())
            }
        }
    }

    /// The leader epoch while this node leads the partition.
    pub(crate) fn leader_epoch(&self) -> Option<i32> {
        match &*self.inner.role.read() {
            Role::Leader { state, .. } => Some(state.lock().leader_epoch),
            _ => None,
        }
    }

    /// False while this node leads the partition with a high watermark below the start
    /// of its leader epoch (a new leader's, until its ISR has every record of the earlier
    /// epochs): the latest offset is not known then, Kafka's OFFSET_NOT_AVAILABLE
    /// (KIP-207).
    pub(crate) fn offsets_available(&self) -> bool {
        match &*self.inner.role.read() {
            Role::Leader { state, .. } => {
                self.inner.log.high_watermark() >= state.lock().epoch_start_offset
            }
            _ => true,
        }
    }

    /// Checks a request's `current_leader_epoch` (-1: none) against this leader's:
    /// older is `FencedLeaderEpoch`, newer `UnknownLeaderEpoch`; on a follower,
    /// `NotLeaderOrFollower`.
    pub(crate) fn check_leader_epoch(&self, current: i32) -> Result<()> {
        match &*self.inner.role.read() {
            Role::Standalone => Ok(()),
            Role::Follower { leader, .. } => Err(self.not_leader(*leader)),
            Role::Leader { state, .. } => {
                let epoch = state.lock().leader_epoch;
                if current < 0 || current == epoch {
                    Ok(())
                } else if current < epoch {
                    Err(Error::FencedLeaderEpoch {
                        partition: self.name(),
                        reason: format!("the request's epoch {current} is older than {epoch}"),
                    })
                } else {
                    Err(Error::UnknownLeaderEpoch {
                        partition: self.name(),
                        reason: format!(
                            "the request's epoch {current} is newer than this leader's {epoch}"
                        ),
                    })
                }
            }
        }
    }

    /// Makes this node the partition's leader at `leader_epoch` (or, already leader at
    /// that epoch, takes the new ISR and replicas). Entering: the log becomes
    /// replicated at `initial_high_watermark` if it was not (the recorded one after a
    /// restart), stamps the epoch, and the followers' state starts afresh.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn become_leader(
        &self,
        node_id: i32,
        leader_epoch: i32,
        partition_epoch: i32,
        replicas: Vec<i32>,
        isr: Vec<i32>,
        min_insync_replicas: i32,
        lag_max: Duration,
        initial_high_watermark: i64,
        now: Instant,
    ) -> Result<()> {
        let mut role = self.inner.role.write();
        self.inner.log.end_standalone();
        if let Role::Leader {
            state,
            min_insync_replicas: min,
        } = &*role
        {
            let mut s = state.lock();
            if s.leader_epoch == leader_epoch {
                s.update(partition_epoch, replicas, isr, now);
                min.store(min_insync_replicas, Ordering::Release);
                let end = self.inner.log.log_end_offset();
                if let Some(hw) = s.advance(end) {
                    self.inner.log.set_high_watermark(hw);
                }
                drop(s);
                drop(role);
                self.inner.log.wake_all();
                return Ok(());
            }
        }
        let log = &self.inner.log;
        let hw = if log.is_replicated() {
            log.high_watermark()
        } else {
            log.set_replicated(initial_high_watermark)
        };
        log.set_leader_epoch(leader_epoch)?;
        let mut state = LeaderState::new(
            node_id,
            leader_epoch,
            partition_epoch,
            replicas,
            isr,
            log.log_end_offset(),
            hw,
            lag_max,
            now,
        );
        if let Some(hw) = state.advance(log.log_end_offset()) {
            log.set_high_watermark(hw);
        }
        *role = Role::Leader {
            state: Mutex::new(state),
            min_insync_replicas: AtomicI32::new(min_insync_replicas),
        };
        drop(role);
        log.wake_all();
        Ok(())
    }

    /// Makes this node a follower of `leader` (-1: none): appends are refused from now
    /// on, the log is replicated (at `initial_high_watermark` if it was not) and stops
    /// stamping epochs. Waiters (acks=all) wake and see it.
    pub(crate) fn become_follower(&self, leader: i32, initial_high_watermark: i64) {
        let mut role = self.inner.role.write();
        self.inner.log.end_standalone();
        let log = &self.inner.log;
        if !log.is_replicated() {
            log.set_replicated(initial_high_watermark);
        }
        log.clear_leader_epoch();
        *role = Role::Follower { leader };
        drop(role);
        log.wake_all();
    }

    /// Sets the topic's `min.insync.replicas` while this node leads the partition.
    pub(crate) fn set_min_insync_replicas(&self, min: i32) {
        if let Role::Leader {
            min_insync_replicas,
            ..
        } = &*self.inner.role.read()
        {
            min_insync_replicas.store(min, Ordering::Release);
        }
    }

    /// A replica fetch from `replica` at `fetch_offset` (its log end): recorded, and the
    /// high watermark moved if the ISR now allows. `NotLeaderOrFollower` unless this
    /// node leads the partition and `replica` is one of its replicas.
    pub(crate) fn record_replica_fetch(&self, replica: i32, fetch_offset: i64) -> Result<()> {
        let role = self.inner.role.read();
        let Role::Leader { state, .. } = &*role else {
            return Err(match &*role {
                Role::Follower { leader, .. } => self.not_leader(*leader),
                _ => Error::NotLeaderOrFollower {
                    partition: self.name(),
                    reason: "it is not replicated".into(),
                },
            });
        };
        let log = &self.inner.log;
        let end = log.log_end_offset();
        if fetch_offset > end || fetch_offset < log.log_start_offset() {
            // Out of range: answered OFFSET_OUT_OF_RANGE, and not a log end to count.
            return Ok(());
        }
        let moved = state
            .lock()
            .on_fetch(replica, fetch_offset, end, Instant::now())
            .map_err(|e| Error::NotLeaderOrFollower {
                partition: self.name(),
                reason: format!("node {} holds no replica of it", e.0),
            })?;
        if let Some(hw) = moved {
            log.set_high_watermark(hw);
        }
        Ok(())
    }

    /// True if the high watermark moved past what `replica` was last told (its fetch
    /// should answer at once).
    pub(crate) fn high_watermark_news(&self, replica: i32) -> bool {
        match &*self.inner.role.read() {
            Role::Leader { state, .. } => state
                .lock()
                .follower(replica)
                .is_some_and(|f| self.inner.log.high_watermark() > f.last_sent_high_watermark),
            _ => false,
        }
    }

    /// On the leader, the log end offset of follower `replica` if it is in the ISR
    /// (Kafka's rack-aware replica selector picks among those); None otherwise.
    pub(crate) fn in_sync_follower_log_end(&self, replica: i32) -> Option<i64> {
        match &*self.inner.role.read() {
            Role::Leader { state, .. } => {
                let s = state.lock();
                if !s.isr.contains(&replica) {
                    return None;
                }
                s.follower(replica).map(|f| f.log_end)
            }
            _ => None,
        }
    }

    /// Notes the high watermark a fetch response told `replica`.
    pub(crate) fn sent_high_watermark(&self, replica: i32, hw: i64) {
        if let Role::Leader { state, .. } = &*self.inner.role.read() {
            state.lock().sent_high_watermark(replica, hw);
        }
    }

    /// The ISR change the rules ask for now, marked pending (the caller proposes it and
    /// calls [`Partition::isr_change_failed`] if that fails).
    pub(crate) fn isr_change(
        &self,
        now: Instant,
        eligible: impl Fn(i32) -> bool,
    ) -> Option<IsrChange> {
        let role = self.inner.role.read();
        let Role::Leader { state, .. } = &*role else {
            return None;
        };
        let mut s = state.lock();
        let new_isr = s.isr_change(self.inner.log.log_end_offset(), now, eligible)?;
        let proposal = s.propose(new_isr.clone());
        Some(IsrChange {
            leader_epoch: s.leader_epoch,
            partition_epoch: s.partition_epoch,
            new_isr,
            proposal,
        })
    }

    /// Forgets what this leader knows of `followers` (fenced or restarted brokers).
    pub(crate) fn reset_followers(&self, followers: &[i32]) {
        if let Role::Leader { state, .. } = &*self.inner.role.read() {
            let mut s = state.lock();
            let now = Instant::now();
            for f in followers {
                s.reset_follower(*f, now);
            }
        }
    }

    /// ISR change `proposal` of `leader_epoch` was not seen applied (`end` says whether
    /// it still may be): another may be proposed. A newer proposal is untouched.
    pub(crate) fn isr_change_failed(&self, leader_epoch: i32, proposal: u64, end: IsrProposalEnd) {
        if let Role::Leader { state, .. } = &*self.inner.role.read() {
            let mut s = state.lock();
            if s.leader_epoch == leader_epoch {
                s.proposal_ended(proposal, end);
                if let Some(hw) = s.advance(self.inner.log.log_end_offset()) {
                    self.inner.log.set_high_watermark(hw);
                }
            }
        }
    }

    /// True while this leader awaits the answer to an ISR change it proposed (tests).
    #[cfg(test)]
    pub(crate) fn has_pending_isr_change(&self) -> bool {
        match &*self.inner.role.read() {
            Role::Leader { state, .. } => state.lock().awaiting_answer(),
            _ => false,
        }
    }

    /// The committed ISR while this node leads the partition.
    #[cfg(test)]
    pub(crate) fn isr(&self) -> Option<Vec<i32>> {
        match &*self.inner.role.read() {
            Role::Leader { state, .. } => Some(state.lock().isr.clone()),
            _ => None,
        }
    }

    /// Before an `acks=all` append: `NotEnoughReplicas` if the ISR is smaller than
    /// `min.insync.replicas` (nothing may be appended then), `NotLeaderOrFollower` on a
    /// follower.
    pub(crate) fn check_enough_replicas(&self) -> Result<()> {
        match &*self.inner.role.read() {
            Role::Standalone => Ok(()),
            Role::Follower { leader, .. } => Err(self.not_leader(*leader)),
            Role::Leader {
                state,
                min_insync_replicas,
            } => {
                let isr = state.lock().isr.len();
                let min = min_insync_replicas.load(Ordering::Acquire);
                if (isr as i64) < i64::from(min) {
                    return Err(Error::NotEnoughReplicas {
                        partition: self.name(),
                        isr,
                        min,
                    });
                }
                Ok(())
            }
        }
    }

    /// `acks=all`: waits until the high watermark passes `offset` (every in-sync replica
    /// has the record), at most `timeout` (`Error::Timeout`). A standalone partition
    /// returns at once. `NotLeaderOrFollower` if this node stops leading the partition
    /// meanwhile, `NotEnoughReplicasAfterAppend` if the ISR is below
    /// `min.insync.replicas` when the record is committed.
    ///
    /// With `durable.acks`, this replica fsyncs the record first, and the high
    /// watermark passes it only once every in-sync follower fsynced it too.
    ///
    /// The wait is decided under the leadership current when it starts: it is for a
    /// record appended under that leadership (an offset appended under an earlier one
    /// may since hold another leader's record). tidelog's own `acks=all` paths wait
    /// with the leadership of their append instead.
    pub fn wait_committed(&self, offset: i64, timeout: Duration) -> Result<()> {
        self.wait_committed_at(offset, AppendEpoch(self.leader_epoch()), timeout)
    }

    /// `acks=all` for a record appended at `offset` under `appended` (what the append
    /// returned): as [`Partition::wait_committed`], and `NotLeaderOrFollower` as soon
    /// as the leadership is not that one, even if it came back to this node at a newer
    /// epoch (the offset may then hold a record of another leader's, and the high
    /// watermark passing it confirms nothing of this append).
    pub(crate) fn wait_committed_at(
        &self,
        offset: i64,
        appended: AppendEpoch,
        timeout: Duration,
    ) -> Result<()> {
        let log = &self.inner.log;
        if log.config().durable_acks {
            // Durable acks: this replica's copy is fsynced first (group commit); the
            // followers fsync theirs before their fetches count it.
            log.sync_to(offset + 1)?;
        }
        if log.high_watermark() > offset && !log.is_replicated() {
            return Ok(());
        }
        let epoch = appended.0;
        let deadline = Instant::now() + timeout;
        // Registered only once a wait is needed; the state is checked again after.
        let mut signal: Option<Arc<Signal>> = None;
        let result = loop {
            let seen = signal.as_ref().map(|s| s.current());
            if let Some(done) = self.committed(offset, epoch) {
                break done;
            }
            if log.is_closed() {
                break Err(Error::Closed(format!("partition {}", self.name())));
            }
            match (&signal, seen) {
                (Some(s), Some(seen)) => {
                    if !s.wait_past(seen, deadline) {
                        break self.committed(offset, epoch).unwrap_or_else(|| {
                            Err(Error::Timeout(format!(
                                "offset {offset} of {} was not replicated to the in-sync replicas within {timeout:?}",
                                self.name()
                            )))
                        });
                    }
                }
                _ => {
                    let s = Arc::new(Signal::default());
                    log.watch(&s, ReadLimit::HighWatermark);
                    signal = Some(s);
                }
            }
        };
        if let Some(s) = &signal {
            log.unwatch(s);
        }
        result
    }

    /// The outcome of an `acks=all` wait for `offset` begun at leader epoch `epoch`, if
    /// it is decided.
    fn committed(&self, offset: i64, epoch: Option<i32>) -> Option<Result<()>> {
        let log = &self.inner.log;
        match &*self.inner.role.read() {
            Role::Standalone => (log.high_watermark() > offset).then_some(Ok(())),
            Role::Follower { leader, .. } => Some(Err(self.not_leader(*leader))),
            Role::Leader {
                state,
                min_insync_replicas,
            } => {
                let s = state.lock();
                if Some(s.leader_epoch) != epoch {
                    return Some(Err(Error::NotLeaderOrFollower {
                        partition: self.name(),
                        reason: format!(
                            "the leadership changed (epoch {}) before offset {offset} was committed",
                            s.leader_epoch
                        ),
                    }));
                }
                if log.high_watermark() <= offset {
                    return None;
                }
                let min = min_insync_replicas.load(Ordering::Acquire);
                Some(if (s.isr.len() as i64) < i64::from(min) {
                    Err(Error::NotEnoughReplicasAfterAppend {
                        partition: self.name(),
                        isr: s.isr.len(),
                        min,
                    })
                } else {
                    Ok(())
                })
            }
        }
    }

    /// Whole batches from the one containing `offset`, up to about `max_bytes` (at least
    /// one batch), as a zero-copy slice of the log. Empty at the log end;
    /// `Error::OffsetOutOfRange` outside `[log_start_offset, log_end_offset]`.
    pub fn read(&self, offset: i64, max_bytes: usize) -> Result<LogSlice> {
        self.inner.log.read(offset, max_bytes)
    }

    /// [`Partition::read`] for a read_committed consumer: whole batches below the last
    /// stable offset, with that offset (see [`PartitionLog::read_committed`]).
    pub fn read_committed(&self, offset: i64, max_bytes: usize) -> Result<(LogSlice, i64)> {
        self.inner.log.read_committed(offset, max_bytes)
    }

    /// The last stable offset: where a read_committed consumer's reads end (the first
    /// offset of the earliest transaction not yet decided, else the high watermark).
    pub fn last_stable_offset(&self) -> Result<i64> {
        self.inner.log.last_stable_offset()
    }

    /// The aborted transactions with records in `from_offset..to_offset` (see
    /// [`PartitionLog::aborted_transactions`]).
    pub fn aborted_transactions(
        &self,
        from_offset: i64,
        to_offset: i64,
    ) -> Result<Vec<AbortedTxn>> {
        self.inner.log.aborted_transactions(from_offset, to_offset)
    }

    /// The first offset still in the log.
    pub fn log_start_offset(&self) -> i64 {
        self.inner.log.log_start_offset()
    }

    /// The offset the next record will get.
    pub fn log_end_offset(&self) -> i64 {
        self.inner.log.log_end_offset()
    }

    /// The highest offset readers may see, plus one (the log end unless the log is
    /// replicated).
    pub fn high_watermark(&self) -> i64 {
        self.inner.log.high_watermark()
    }

    /// Blocks until the log has a record at `offset` that readers may see (its high
    /// watermark is past it), the timeout passes, or the log closes. True if the record
    /// is there.
    pub fn wait_for(&self, offset: i64, timeout: Duration) -> bool {
        self.inner.log.wait_for(offset, timeout)
    }

    /// The earliest offset whose timestamp is at least `timestamp` (ms since the epoch),
    /// with that record's timestamp; None if every record is older.
    pub fn offset_for_timestamp(&self, timestamp: i64) -> Result<Option<(i64, i64)>> {
        self.inner.log.offset_for_timestamp(timestamp)
    }

    /// Bytes on disk.
    pub fn size_bytes(&self) -> u64 {
        self.inner.log.size_bytes()
    }

    /// Number of segments.
    pub fn segment_count(&self) -> usize {
        self.inner.log.segment_count()
    }

    /// Fsyncs the partition's files.
    pub fn sync(&self) -> Result<()> {
        self.inner.log.sync()
    }

    /// Wakes `signal` whenever the partition's high watermark moves (every append,
    /// whoever makes it, unless the log is replicated) and when it closes, until
    /// [`Partition::unwatch`].
    pub(crate) fn watch(&self, signal: &Arc<Signal>) {
        self.inner.log.watch(signal, ReadLimit::HighWatermark);
    }

    /// Stops waking `signal`.
    pub(crate) fn unwatch(&self, signal: &Arc<Signal>) {
        self.inner.log.unwatch(signal);
    }

    /// Wakes every watcher and waiter (used when the broker closes so that pollers
    /// return).
    pub(crate) fn wake_all(&self) {
        self.inner.log.wake_all();
    }
}

pub(crate) struct TopicInner {
    pub(crate) name: Arc<str>,
    pub(crate) partitions: RwLock<Arc<Vec<Partition>>>,
    /// `partitions.len()`, readable without a lock on the producer's hot path.
    pub(crate) partition_count: AtomicI32,
    pub(crate) config: RwLock<TopicConfig>,
    pub(crate) internal: bool,
    pub(crate) deleted: AtomicBool,
    /// Partitions this node holds in a log directory that is offline, with why: they
    /// answer a storage error (Kafka's KAFKA_STORAGE_ERROR).
    pub(crate) offline: RwLock<std::collections::BTreeMap<i32, String>>,
}

/// A topic: a named set of partitions. Cheap to clone, `Send + Sync`; sees partitions
/// added later.
#[derive(Clone)]
pub struct Topic {
    pub(crate) inner: Arc<TopicInner>,
}

impl std::fmt::Debug for Topic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Topic")
            .field("name", &self.name())
            .field("partitions", &self.partition_count())
            .finish()
    }
}

impl Topic {
    pub(crate) fn new(
        name: &str,
        partitions: Vec<Partition>,
        config: TopicConfig,
        internal: bool,
    ) -> Self {
        let count = partitions.len() as i32;
        Topic {
            inner: Arc::new(TopicInner {
                name: Arc::from(name),
                partitions: RwLock::new(Arc::new(partitions)),
                partition_count: AtomicI32::new(count),
                config: RwLock::new(config),
                internal,
                deleted: AtomicBool::new(false),
                offline: RwLock::default(),
            }),
        }
    }

    /// The topic's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Number of partitions.
    pub fn partition_count(&self) -> i32 {
        self.inner.partition_count.load(Ordering::Acquire)
    }

    /// True for tidelog's own topics (`__consumer_offsets`).
    pub fn is_internal(&self) -> bool {
        self.inner.internal
    }

    /// The topic's overrides of the broker's log settings.
    pub fn config(&self) -> TopicConfig {
        self.inner.config.read().clone()
    }

    /// Partition `p`, or `Error::UnknownPartition`; on a cluster node,
    /// `Error::NotLeaderOrFollower` for a partition of the topic that this node holds no
    /// replica of.
    pub fn partition(&self, p: i32) -> Result<Partition> {
        if self.inner.deleted.load(Ordering::Acquire) {
            return Err(Error::UnknownTopic(self.name().to_string()));
        }
        let parts = self.inner.partitions.read();
        let dense = usize::try_from(p)
            .ok()
            .and_then(|i| parts.get(i))
            .filter(|x| x.index() == p);
        if let Some(found) = dense.or_else(|| {
            parts
                .binary_search_by_key(&p, Partition::index)
                .ok()
                .map(|i| &parts[i])
        }) {
            return Ok(found.clone());
        }
        let count = self.partition_count();
        if let Some(why) = self.inner.offline.read().get(&p) {
            return Err(Error::io(
                "use partition",
                format!("{}-{p}", self.name()),
                std::io::Error::other(why.clone()),
            ));
        }
        if (0..count).contains(&p) {
            return Err(Error::NotLeaderOrFollower {
                partition: format!("{}-{p}", self.name()),
                reason: "this node holds no replica of it".into(),
            });
        }
        Err(Error::UnknownPartition {
            topic: self.name().to_string(),
            partition: p,
            count,
        })
    }

    /// All partitions held by this node, in order (every partition, but on a cluster
    /// node).
    pub fn partitions(&self) -> Arc<Vec<Partition>> {
        Arc::clone(&self.inner.partitions.read())
    }

    /// Per-partition state, for `describe`.
    pub fn describe(&self) -> TopicDescription {
        let parts = self.partitions();
        TopicDescription {
            name: self.name().to_string(),
            internal: self.is_internal(),
            config: self.config(),
            log_config: parts.first().map(|p| p.log().config()).unwrap_or_default(),
            partitions: parts
                .iter()
                .map(|p| {
                    let (leader, replicas, isr) = p.replica_view();
                    PartitionDescription {
                        partition: p.index(),
                        log_start_offset: p.log_start_offset(),
                        log_end_offset: p.log_end_offset(),
                        leader,
                        replicas,
                        isr,
                        size_bytes: Some(p.size_bytes()),
                        segments: Some(p.segment_count()),
                    }
                })
                .collect(),
        }
    }

    /// Marks partitions offline (held in a log directory that failed), each with why:
    /// they answer a storage error until the node opens again.
    pub(crate) fn set_offline_partitions(&self, offline: std::collections::BTreeMap<i32, String>) {
        *self.inner.offline.write() = offline;
    }

    /// The partitions held in a log directory that failed, with why.
    pub(crate) fn offline_partitions(&self) -> std::collections::BTreeMap<i32, String> {
        self.inner.offline.read().clone()
    }

    /// A cluster node: the topic has `count` partitions, of which this node holds
    /// `partitions` (sorted by index).
    pub(crate) fn set_hosted_partitions(&self, partitions: Vec<Partition>, count: i32) {
        *self.inner.partitions.write() = Arc::new(partitions);
        self.inner.partition_count.store(count, Ordering::Release);
    }
}

/// What `describe_topic` reports about one partition, in process
/// ([`Broker`](crate::Broker)) and over the network ([`Cluster`](crate::Cluster)) alike.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionDescription {
    /// Partition index.
    pub partition: i32,
    /// First offset still in the log.
    pub log_start_offset: i64,
    /// Next offset to be written (over the network: the high watermark, the end
    /// consumers may read).
    pub log_end_offset: i64,
    /// The node leading the partition; `None` while it has no leader, and in process
    /// on a data directory that is not a cluster node (the process itself writes it).
    pub leader: Option<i32>,
    /// Node ids of the replicas, in assignment order (known over the network, and in
    /// process on the node leading the partition; empty otherwise).
    pub replicas: Vec<i32>,
    /// Node ids of the in-sync replicas (known where `replicas` is).
    pub isr: Vec<i32>,
    /// Bytes on disk (`None` over the network: Kafka reports sizes per log directory,
    /// not per topic).
    pub size_bytes: Option<u64>,
    /// Number of segments (`None` over the network).
    pub segments: Option<usize>,
}

/// What `describe_topic` reports about a topic, in process and over the network alike.
#[derive(Debug, Clone)]
pub struct TopicDescription {
    /// Topic name.
    pub name: String,
    /// True for internal topics.
    pub internal: bool,
    /// The topic's overrides.
    pub config: TopicConfig,
    /// The effective log settings (defaults with the overrides applied).
    pub log_config: LogConfig,
    /// One entry per partition.
    pub partitions: Vec<PartitionDescription>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one_record(value: &[u8]) -> Vec<u8> {
        let mut b = BatchBuilder::new();
        b.push(1_000, None, Some(value), &[]);
        b.finish().to_vec()
    }

    fn lead(p: &Partition, epoch: i32, isr: Vec<i32>) {
        p.become_leader(
            1,
            epoch,
            epoch,
            vec![1, 2],
            isr,
            1,
            Duration::from_secs(30),
            0,
            Instant::now(),
        )
        .expect("leader");
    }

    /// Partition 0 of topic `t` on a log `name` of its own in `dir`, standalone.
    fn standalone(dir: &std::path::Path, name: &str) -> Partition {
        let log = PartitionLog::open(dir.join(name), name, LogConfig::default()).expect("log");
        Partition::new(Arc::from("t"), 0, log)
    }

    fn builder_of(value: &[u8]) -> BatchBuilder {
        let mut b = BatchBuilder::new();
        b.push(1_000, None, Some(value), &[]);
        b
    }

    #[test]
    fn a_standalone_partition_given_a_role_appends_builders_under_that_role() {
        let dir = tempfile::tempdir().expect("temp dir");
        let p = standalone(dir.path(), "t-0");
        // Standalone: appended without a role, committed at once; a batch with a codec
        // (sealed before the log's lock) too.
        let (info, epoch) = p.append_builder_at(&mut builder_of(b"a")).expect("append");
        assert_eq!((info.base_offset, epoch), (0, AppendEpoch(None)));
        let mut packed = BatchBuilder::new().compression(Compression::Lz4);
        packed.push(1_000, None, Some(b"a2"), &[]);
        let (info, epoch) = p.append_builder_at(&mut packed).expect("append");
        assert_eq!((info.base_offset, epoch), (1, AppendEpoch(None)));
        assert!(packed.is_empty());
        assert_eq!(p.high_watermark(), 2);
        // A follower refuses, and keeps the refused records in the builder's hands:
        // none reaches the log.
        p.become_follower(2, 2);
        let mut b = builder_of(b"b");
        assert!(matches!(
            p.append_builder_at(&mut b),
            Err(Error::NotLeaderOrFollower { .. })
        ));
        let mut packed = BatchBuilder::new().compression(Compression::Lz4);
        packed.push(1_000, None, Some(b"b2"), &[]);
        assert!(matches!(
            p.append_builder_at(&mut packed),
            Err(Error::NotLeaderOrFollower { .. })
        ));
        assert_eq!(p.log().log_end_offset(), 2);
        // A leader stamps its epoch, and its high watermark waits for the ISR.
        lead(&p, 7, vec![1, 2]);
        let (info, epoch) = p.append_builder_at(&mut builder_of(b"c")).expect("append");
        assert_eq!((info.base_offset, epoch), (2, AppendEpoch(Some(7))));
        assert_eq!(
            p.high_watermark(),
            2,
            "the follower has not fetched offset 2"
        );
        let slice = p
            .log()
            .read_bounded(2, 1 << 20, ReadLimit::LogEnd)
            .expect("read");
        let epochs: Vec<i32> = slice
            .batches()
            .map(|b| b.partition_leader_epoch())
            .collect();
        assert_eq!(epochs, [7]);
    }

    #[test]
    fn no_builder_append_lands_after_a_concurrent_role_change() {
        let dir = tempfile::tempdir().expect("temp dir");
        let p = standalone(dir.path(), "t-0");
        let appender = {
            let p = p.clone();
            std::thread::spawn(move || {
                let (mut appended, mut refused) = (0i64, 0u32);
                for i in 0..5_000_000 {
                    // With and without a codec: sealed under the log's lock, and before.
                    let codec = [Compression::None, Compression::Lz4][i % 2];
                    let mut b = BatchBuilder::new().compression(codec);
                    b.push(1_000, None, Some(b"x"), &[]);
                    match p.append_builder_at(&mut b) {
                        Ok(_) => {
                            assert_eq!(refused, 0, "an append landed after one was refused");
                            appended += 1;
                        }
                        Err(Error::NotLeaderOrFollower { .. }) => refused += 1,
                        Err(e) => panic!("append: {e}"),
                    }
                    if refused == 100 {
                        return appended;
                    }
                }
                panic!("the role change never refused an append");
            })
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while p.log().log_end_offset() < 100 && Instant::now() < deadline {
            std::thread::yield_now();
        }
        p.become_follower(2, 0);
        let end = p.log().log_end_offset();
        let appended = appender.join().expect("appender");
        assert_eq!(
            p.log().log_end_offset(),
            end,
            "an append landed after the change"
        );
        assert_eq!(appended, end);
    }

    #[test]
    fn a_partition_that_took_a_role_leaves_its_old_handle_refusing_builders() {
        let dir = tempfile::tempdir().expect("temp dir");
        let old = standalone(dir.path(), "t-0");
        let new = standalone(dir.path(), "t-0.moved");
        old.append_builder_at(&mut builder_of(b"a"))
            .expect("append");
        new.take_role_from(&old).expect("take the role");
        assert!(matches!(
            old.append_builder_at(&mut builder_of(b"b")),
            Err(Error::NotLeaderOrFollower { .. })
        ));
        assert_eq!(old.log().log_end_offset(), 1);
    }

    #[test]
    fn an_acks_all_wait_fails_when_its_record_was_truncated_under_a_new_leadership() {
        let dir = tempfile::tempdir().expect("temp dir");
        let p = standalone(dir.path(), "t-0");
        // Epoch 5: our record at offset 0, not yet on the follower (HW 0).
        lead(&p, 5, vec![1, 2]);
        let (info, appended) = p.append_batch_at(&one_record(b"ours")).expect("append");
        assert_eq!(appended, AppendEpoch(Some(5)));
        assert_eq!((info.last_offset, p.high_watermark()), (0, 0));
        // The leadership moves away, the new leader's log truncates ours...
        p.become_follower(2, 0);
        p.log().truncate_to(0).expect("truncate");
        // ...and comes back at epoch 6, with other records at and past offset 0,
        // committed at once (an ISR of this leader alone).
        lead(&p, 6, vec![1]);
        p.append_batch(&one_record(b"theirs")).expect("append");
        p.append_batch(&one_record(b"theirs too")).expect("append");
        assert_eq!(p.high_watermark(), 2, "offset 0 is committed, but not ours");
        // The wait for our record (begun after all that) must not confirm theirs.
        assert!(matches!(
            p.wait_committed_at(info.last_offset, appended, Duration::from_millis(1)),
            Err(Error::NotLeaderOrFollower { .. })
        ));
        // A record appended under epoch 6 is confirmed by the same high watermark.
        let (mine, now) = p.append_batch_at(&one_record(b"new")).expect("append");
        assert_eq!(now, AppendEpoch(Some(6)));
        p.wait_committed_at(mine.last_offset, now, Duration::from_millis(1))
            .expect("committed under its own leadership");
    }
}
