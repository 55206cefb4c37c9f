//! The replication side of Fetch (key 1), kept apart from the consumer path in
//! `fetch.rs`: the leader-epoch check of a fetched partition (v9+), and a follower's
//! fetch (`replica_id` >= 0).
//!
//! A follower's fetch counts only from the follower's current incarnation (KIP-903): a
//! fetch that carries a broker epoch (v15+ `replica_state`) other than the one the
//! follower is registered at in this node's metadata is refused with
//! NOT_LEADER_OR_FOLLOWER before anything is recorded, so a stale process of that id, or
//! one restarted on a wiped disk before its new registration is published here, never
//! moves the high watermark nor rejoins the ISR (the follower retries once the metadata
//! agrees). A fetch without an epoch (a node of an older version, v14 and below) is taken
//! as Kafka takes it. Where an inter-broker listener is named, follower fetches are taken
//! only on it.
//!
//! A follower's fetch is recorded first (its log end is its fetch offset: the leader's
//! high watermark may move, which wakes `acks=all` producers), then served through a
//! [`ReplicaView`] of the partition: reads and the long poll go to the log end rather
//! than the high watermark, and the long poll also ends as soon as the high watermark
//! moved past what that follower was last told, so a caught-up follower learns of a
//! commit within one round trip.
//!
//! KIP-73: a follower outside the ISR of a partition this node lists in its topic's
//! `leader.replication.throttled.replicas` reads through this node's leader quota
//! (`leader.replication.throttled.rate`): no records while it is spent.

use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_protocol::messages::FetchRequest;

use crate::cluster::{LeaderThrottle, ReplicationQuota};
use crate::error::Result;
use crate::record::ValidBatches;
use crate::server::backend::{Backend, PartitionOps};
use crate::storage::LogConfig;
use crate::storage::{AbortedTxn, ActiveProducer, AppendInfo, AppendOutcome, LogSlice, ReadLimit};
use crate::topic::{AppendEpoch, Signal};

/// The follower a Fetch of `version` comes from (`replica_id`, from v15 in
/// `replica_state`), None for a consumer's, and why [`check_follower`] refuses it if it
/// does. `without_epoch`: whether a follower fetch without a broker epoch is taken
/// (the server's `follower_fetch_without_epoch`, for rolling upgrades).
pub(super) fn follower(
    backend: &dyn Backend,
    (listener, without_epoch): (&str, bool),
    request: &FetchRequest,
    version: i16,
) -> (Option<i32>, Option<String>) {
    let (id, epoch) = if version >= 15 {
        let state = &request.replica_state;
        (state.replica_id.0, state.replica_epoch)
    } else {
        (request.replica_id.0, -1)
    };
    if id < 0 {
        return (None, None);
    }
    let checked = check_follower(backend, listener, id, epoch).and_then(|()| {
        if epoch >= 0 || without_epoch || backend.cluster().is_none() {
            return Ok(());
        }
        Err(format!(
            "broker {id} fetched without a broker epoch (Fetch v{version}), which this node \
             cannot check against its registration: refused (a node of an older version; \
             during a rolling upgrade from one, start the upgraded nodes with \
             --follower-fetch-without-epoch)"
        ))
    });
    (Some(id), checked.err())
}

/// Whether the follower fetch of broker `replica` at broker epoch `epoch` (-1: none
/// sent), arrived on `listener`, may be taken: `Err` says why not. A single node takes
/// every fetch (it has no followers to check).
fn check_follower(
    backend: &dyn Backend,
    listener: &str,
    replica: i32,
    epoch: i64,
) -> std::result::Result<(), String> {
    let Some(cluster) = backend.cluster() else {
        return Ok(());
    };
    if let Some(inter) = cluster.inter_broker_listener()
        && inter != listener
    {
        return Err(format!(
            "broker {replica} fetched on listener {listener}: follower fetches are taken only on the inter-broker listener {inter}"
        ));
    }
    if epoch < 0 {
        return Ok(());
    }
    match cluster.broker_epoch(replica) {
        Some(registered) if registered == epoch => Ok(()),
        Some(registered) => Err(format!(
            "broker {replica} fetched at broker epoch {epoch}, but it is registered at epoch {registered}{}",
            if epoch < registered {
                ": a stale incarnation"
            } else {
                " (this node has not seen its new registration yet)"
            }
        )),
        None => Err(format!(
            "broker {replica} (broker epoch {epoch}) is not registered"
        )),
    }
}

/// Resolves a fetched partition: the leader-epoch check (`current_leader_epoch`, -1 for
/// none or before v9), and for a follower's fetch (`replica` >= 0) the fetch recorded
/// and a view that reads to the log end; a follower's fetch that
/// [`check_follower`] refused (`refused`, why) answers NOT_LEADER_OR_FOLLOWER,
/// recording nothing.
pub(super) fn resolve(
    backend: &dyn Backend,
    topic: &str,
    partition: i32,
    fetch_offset: i64,
    current_leader_epoch: i32,
    replica: Option<i32>,
    refused: Option<&str>,
) -> Result<Arc<dyn PartitionOps>> {
    let log = backend.partition(topic, partition)?;
    log.check_leader_epoch(current_leader_epoch)?;
    let Some(replica) = replica else {
        return Ok(log);
    };
    if let Some(reason) = refused {
        return Err(crate::error::Error::NotLeaderOrFollower {
            partition: format!("{topic}-{partition}"),
            reason: reason.to_string(),
        });
    }
    log.record_replica_fetch(replica, fetch_offset)?;
    // The parsed list the partition's log holds, read only when a leader rate is set.
    let throttle = backend.cluster().and_then(|c| {
        c.leader_throttle(topic, partition, replica, &|| {
            log.log_config().leader_throttled_replicas
        })
    });
    Ok(Arc::new(ReplicaView {
        log,
        replica,
        throttle,
    }))
}

/// True if a follower's long poll should answer now: the high watermark of one of its
/// partitions moved past what it was last told.
pub(super) fn news<'a>(logs: impl IntoIterator<Item = &'a Arc<dyn PartitionOps>>) -> bool {
    logs.into_iter().any(|l| l.high_watermark_news(-1))
}

/// A partition as a follower's fetch sees it. See the module documentation.
struct ReplicaView {
    log: Arc<dyn PartitionOps>,
    replica: i32,
    /// KIP-73: the leader's quota when this replica is leader-throttled here.
    throttle: Option<LeaderThrottle>,
}

impl PartitionOps for ReplicaView {
    fn append(&self, batches: &ValidBatches<'_>) -> Result<(AppendInfo, AppendEpoch)> {
        self.log.append(batches)
    }
    fn append_idempotent(
        &self,
        batches: &ValidBatches<'_>,
    ) -> Result<(AppendOutcome, AppendEpoch)> {
        self.log.append_idempotent(batches)
    }
    /// Up to the log end: a follower copies what is not committed yet. A
    /// leader-throttled replica gets nothing while the leader's quota is spent, and at
    /// most one second of it otherwise.
    fn read(&self, offset: i64, max_bytes: usize) -> Result<LogSlice> {
        let Some(t) = &self.throttle else {
            return self.log.read_bounded(offset, max_bytes, ReadLimit::LogEnd);
        };
        let now = Instant::now();
        if t.quota.is_exceeded(t.rate, now) {
            return Ok(LogSlice::empty(None, offset));
        }
        let most = ReplicationQuota::partition_max_bytes(t.rate, i32::MAX) as usize;
        let slice = self
            .log
            .read_bounded(offset, max_bytes.min(most), ReadLimit::LogEnd)?;
        t.quota.record(t.rate, slice.len(), now);
        Ok(slice)
    }
    fn read_committed(&self, offset: i64, max_bytes: usize) -> Result<(LogSlice, i64)> {
        self.log.read_committed(offset, max_bytes)
    }
    fn last_stable_offset(&self) -> Result<i64> {
        self.log.last_stable_offset()
    }
    fn aborted_transactions(&self, from_offset: i64, to_offset: i64) -> Result<Vec<AbortedTxn>> {
        self.log.aborted_transactions(from_offset, to_offset)
    }
    fn log_start_offset(&self) -> i64 {
        self.log.log_start_offset()
    }
    fn high_watermark(&self) -> i64 {
        self.log.high_watermark()
    }
    fn offset_for_timestamp(&self, timestamp: i64) -> Result<Option<(i64, i64)>> {
        self.log.offset_for_timestamp(timestamp)
    }
    /// Woken by appends (the log end) and by high-watermark moves.
    fn watch(&self, signal: &Arc<Signal>) {
        self.log.watch_bounded(signal, ReadLimit::LogEnd)
    }
    fn unwatch(&self, signal: &Arc<Signal>) {
        self.log.unwatch(signal)
    }
    fn log_config(&self) -> LogConfig {
        self.log.log_config()
    }
    fn delete_records_before(&self, offset: i64) -> Result<i64> {
        self.log.delete_records_before(offset)
    }
    fn check_leader_epoch(&self, current: i32) -> Result<()> {
        self.log.check_leader_epoch(current)
    }
    fn check_enough_replicas(&self) -> Result<()> {
        self.log.check_enough_replicas()
    }
    fn wait_committed(&self, offset: i64, appended: AppendEpoch, timeout: Duration) -> Result<()> {
        self.log.wait_committed(offset, appended, timeout)
    }
    fn record_replica_fetch(&self, replica: i32, fetch_offset: i64) -> Result<()> {
        self.log.record_replica_fetch(replica, fetch_offset)
    }
    /// For this view's follower (whatever `replica` says).
    fn high_watermark_news(&self, _replica: i32) -> bool {
        self.log.high_watermark_news(self.replica)
    }
    /// For this view's follower (whatever `replica` says).
    fn sent_high_watermark(&self, _replica: i32, hw: i64) {
        self.log.sent_high_watermark(self.replica, hw)
    }
    fn read_bounded(&self, offset: i64, max_bytes: usize, limit: ReadLimit) -> Result<LogSlice> {
        self.log.read_bounded(offset, max_bytes, limit)
    }
    fn watch_bounded(&self, signal: &Arc<Signal>, limit: ReadLimit) {
        self.log.watch_bounded(signal, limit)
    }
    fn end_offset_for_epoch(&self, epoch: i32) -> Result<(i32, i64)> {
        self.log.end_offset_for_epoch(epoch)
    }
    fn active_producers(&self) -> Result<Vec<ActiveProducer>> {
        self.log.active_producers()
    }
}
