//! The replication side of Fetch (key 1), kept apart from the consumer path in
//! `fetch.rs`: the leader-epoch check of a fetched partition (v9+), and a follower's
//! fetch (`replica_id` >= 0).
//!
//! A follower's fetch is recorded first (its log end is its fetch offset: the leader's
//! high watermark may move, which wakes `acks=all` producers), then served through a
//! [`ReplicaView`] of the partition: reads and the long poll go to the log end rather
//! than the high watermark, and the long poll also ends as soon as the high watermark
//! moved past what that follower was last told, so a caught-up follower learns of a
//! commit within one round trip.

use std::sync::Arc;
use std::time::Duration;

use crate::error::Result;
use crate::record::ValidBatches;
use crate::server::backend::{Backend, PartitionOps};
use crate::storage::LogConfig;
use crate::storage::{AbortedTxn, ActiveProducer, AppendInfo, AppendOutcome, LogSlice, ReadLimit};
use crate::topic::{AppendEpoch, Signal};

/// Resolves a fetched partition: the leader-epoch check (`current_leader_epoch`, -1 for
/// none or before v9), and for a follower's fetch (`replica` >= 0) the fetch recorded
/// and a view that reads to the log end.
pub(super) fn resolve(
    backend: &dyn Backend,
    topic: &str,
    partition: i32,
    fetch_offset: i64,
    current_leader_epoch: i32,
    replica: Option<i32>,
) -> Result<Arc<dyn PartitionOps>> {
    let log = backend.partition(topic, partition)?;
    log.check_leader_epoch(current_leader_epoch)?;
    match replica {
        None => Ok(log),
        Some(replica) => {
            log.record_replica_fetch(replica, fetch_offset)?;
            Ok(Arc::new(ReplicaView { log, replica }))
        }
    }
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
    /// Up to the log end: a follower copies what is not committed yet.
    fn read(&self, offset: i64, max_bytes: usize) -> Result<LogSlice> {
        self.log.read_bounded(offset, max_bytes, ReadLimit::LogEnd)
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
