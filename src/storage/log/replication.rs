//! The storage side of replication, on [`PartitionLog`]: the high watermark under the
//! cluster's control, follower appends that keep the leader's offsets and bytes, and
//! the leader epoch appends stamp. The leader-epoch cache is in `epochs`, truncation
//! (which never changes a byte a reader holds and survives a crash at any step) in
//! `truncate`.
//!
//! A log is standalone until [`PartitionLog::set_replicated`]: its high watermark is
//! then moved only by [`PartitionLog::set_high_watermark`]. Nothing here knows about
//! leaders, followers or the ISR; the cluster layer decides, this layer keeps the
//! invariants (`high watermark <= log end`, epochs increasing, offsets increasing).

use super::{PartitionLog, parse_batches};
use crate::error::{Error, Result};
use crate::storage::epoch::UNDEFINED_EPOCH;
use crate::storage::signal::Moved;
use crate::storage::types::{AppendInfo, Stamp};
use std::sync::atomic::Ordering;

impl PartitionLog {
    /// Puts the log in replicated mode: appends move only the log end, and the high
    /// watermark (what consumers may read) moves by
    /// [`PartitionLog::set_high_watermark`]. Entering the mode sets the high watermark
    /// to `initial_high_watermark` (for example the one recorded in
    /// `replication-offset-checkpoint`) clamped to `[log start, log end]`: this may
    /// lower it, and readers then see less. On a log already replicated it is
    /// [`PartitionLog::set_high_watermark`]. Returns the high watermark.
    ///
    /// ```
    /// use tidelog::storage::PartitionLog;
    /// use tidelog::{BatchBuilder, LogConfig};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let log = PartitionLog::open(dir.path().join("t-0"), "t-0", LogConfig::default())?;
    /// assert_eq!(log.set_replicated(0), 0);
    /// let mut b = BatchBuilder::new();
    /// b.push(1_000, None, Some(b"not yet committed"), &[]);
    /// log.append(&b.finish())?;
    /// assert_eq!((log.log_end_offset(), log.high_watermark()), (1, 0));
    /// assert!(log.read(0, 1 << 20)?.is_empty(), "consumers see nothing yet");
    /// assert_eq!(log.set_high_watermark(1), 1);
    /// assert_eq!(log.read(0, 1 << 20)?.next_offset(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn set_replicated(&self, initial_high_watermark: i64) -> i64 {
        let mut w = self.inner.writer.lock();
        let _h = self.inner.hw_lock.lock();
        let (start, end) = (self.log_start_offset(), self.log_end_offset());
        let hw = if w.replicated {
            initial_high_watermark.min(end).max(self.high_watermark())
        } else {
            w.replicated = true;
            self.inner.replicated.store(true, Ordering::Release);
            initial_high_watermark.max(start).min(end)
        };
        self.inner.high_watermark.store(hw, Ordering::SeqCst);
        self.inner.watchers.notify(Moved::HighWatermark);
        hw
    }

    /// Puts the log back in standalone mode: the high watermark is the log end again
    /// (everything appended becomes visible) and follows every append.
    pub fn set_standalone(&self) {
        let mut w = self.inner.writer.lock();
        let _h = self.inner.hw_lock.lock();
        w.replicated = false;
        self.inner.replicated.store(false, Ordering::Release);
        self.inner
            .high_watermark
            .store(self.log_end_offset(), Ordering::SeqCst);
        self.inner.watchers.notify(Moved::HighWatermark);
    }

    /// True in replicated mode (see [`PartitionLog::set_replicated`]).
    #[inline]
    pub fn is_replicated(&self) -> bool {
        self.inner.replicated.load(Ordering::Acquire)
    }

    /// Moves a replicated log's high watermark forward to `high_watermark`, capped at
    /// the log end, and wakes the readers waiting for it. A value at or below the
    /// current one changes nothing (the high watermark never moves back this way); a
    /// standalone log's high watermark is its log end already. Returns the high
    /// watermark. Takes no lock an append takes.
    pub fn set_high_watermark(&self, high_watermark: i64) -> i64 {
        let _h = self.inner.hw_lock.lock();
        let current = self.high_watermark();
        if !self.inner.replicated.load(Ordering::Acquire) {
            return current;
        }
        // The log end only grows while `hw_lock` is held (truncation takes it).
        let target = high_watermark.min(self.log_end_offset());
        if target <= current {
            return current;
        }
        self.inner.high_watermark.store(target, Ordering::SeqCst);
        self.inner.watchers.notify(Moved::HighWatermark);
        target
    }

    /// Appends a leader's batches verbatim, as a follower must to hold a byte-identical
    /// log: offsets, `partitionLeaderEpoch` and every other byte stay as they are.
    ///
    /// Each batch is validated (length, magic, CRC, records present, timestamps) before
    /// anything is written. Its base offset must be at least the log end, and above the
    /// last offset of the batch before it (gaps are kept: a compacted leader has them),
    /// else [`Error::UnexpectedAppendOffset`]; its leader epoch must not be older than
    /// the log's latest, else [`Error::StaleLeaderEpoch`]. `max_message_bytes` does
    /// not apply (the leader accepted the batch). A new epoch enters the leader-epoch
    /// cache. In replicated mode the high watermark does not move.
    pub fn append_replica(&self, bytes: &[u8]) -> Result<AppendInfo> {
        let parsed = parse_batches(bytes)?;
        let mut w = self.inner.writer.lock();
        self.check_batches(&parsed, None)?;
        self.check_writable()?;
        self.ensure_epochs(&mut w)?;
        // A follower keeps the producers' state too: it has it when it becomes leader.
        self.ensure_producers(&mut w)?;
        let end = self.log_end_offset();
        let mut expected = end;
        let mut latest = w.latest_epoch.unwrap_or(UNDEFINED_EPOCH);
        for b in parsed.iter() {
            if b.base_offset() < expected {
                return Err(Error::UnexpectedAppendOffset {
                    partition: self.inner.name.clone(),
                    offset: b.base_offset(),
                    expected,
                });
            }
            let epoch = b.partition_leader_epoch();
            if epoch >= 0 {
                if epoch < latest {
                    return Err(Error::StaleLeaderEpoch {
                        partition: self.inner.name.clone(),
                        epoch,
                        latest,
                    });
                }
                latest = epoch;
            }
            expected = b.last_offset() + 1;
        }
        let now = self.append_clock(&w.config);
        let mut written = end;
        let mut base_offset = None;
        let (mut max_ts, mut count) = (-1i64, 0i64);
        for b in parsed.iter() {
            let offset = b.base_offset();
            if let Err(e) = self.write_batch(&mut w, b, offset, Stamp::default(), now) {
                self.publish(&w, written);
                return Err(e);
            }
            base_offset.get_or_insert(offset);
            written = b.last_offset() + 1;
            count += b.record_count() as i64;
            max_ts = max_ts.max(b.max_timestamp());
        }
        self.finish_append(w, written, count)?;
        Ok(AppendInfo {
            base_offset: base_offset.unwrap_or(end),
            last_offset: written - 1,
            log_append_time: None,
            max_timestamp: max_ts,
            record_count: count,
        })
    }

    /// Makes later appends (`append`, `append_builder`, not `append_replica`) stamp
    /// `epoch` in their batches' `partitionLeaderEpoch`, as the leader of that epoch
    /// does. The epoch enters the leader-epoch cache with the first batch appended in
    /// it. [`Error::StaleLeaderEpoch`] if it is older than the log's latest epoch;
    /// [`Error::InvalidConfig`] if negative.
    pub fn set_leader_epoch(&self, epoch: i32) -> Result<()> {
        if epoch < 0 {
            return Err(Error::InvalidConfig {
                key: "leader epoch".into(),
                reason: format!("{epoch} for {} is negative", self.inner.name),
            });
        }
        let mut w = self.inner.writer.lock();
        self.check_writable()?;
        self.ensure_epochs(&mut w)?;
        let latest = w.latest_epoch.unwrap_or(UNDEFINED_EPOCH);
        if epoch < latest {
            return Err(Error::StaleLeaderEpoch {
                partition: self.inner.name.clone(),
                epoch,
                latest,
            });
        }
        w.leader_epoch = Some(epoch);
        Ok(())
    }

    /// Stops stamping a leader epoch (a leader that becomes a follower): appends keep
    /// the `partitionLeaderEpoch` their batches came with again.
    pub fn clear_leader_epoch(&self) {
        self.inner.writer.lock().leader_epoch = None;
    }

    /// The epoch appends stamp, if [`PartitionLog::set_leader_epoch`] set one.
    pub fn leader_epoch(&self) -> Option<i32> {
        self.inner.writer.lock().leader_epoch
    }
}
