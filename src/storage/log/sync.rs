//! Durability of a [`PartitionLog`]: fsyncs (the group commit's side, `sync_to`), the
//! recovery point and the partition checkpoint, and the flush policies the maintenance
//! thread applies.

use super::PartitionLog;
use crate::error::{Error, Result};
use crate::storage::checkpoint;
use crate::storage::group_commit::Durable;
use crate::storage::recovery::{CHECKPOINT_FILE, encode_checkpoint};
use crate::storage::segment::Segment;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

impl PartitionLog {
    /// Fsyncs every segment holding data past the recovery point, then checkpoints the
    /// new recovery point. A failed fsync poisons the log; a poisoned log is not synced
    /// again ([`Error::Poisoned`]): a later fsync could report success for pages the
    /// failed one dropped.
    pub fn sync(&self) -> Result<()> {
        if self.inner.read_only {
            return Ok(());
        }
        self.sync_to(self.log_end_offset())?;
        self.sync_indexes(true)?;
        self.write_checkpoint()
    }

    /// Fsyncs the index files written since their last fsync, of the sealed segments
    /// (and of the active one with `active`). A failed fsync poisons the log; a
    /// poisoned log moves its recovery point no more, so nothing new is trusted and
    /// nothing is synced.
    fn sync_indexes(&self, active: bool) -> Result<()> {
        if self.inner.read_only || self.inner.poisoned.load(Ordering::Acquire) {
            return Ok(());
        }
        let segs = self.segments();
        let Some((last, sealed)) = segs.split_last() else {
            return Ok(());
        };
        let dirty = |s: &&Arc<Segment>| s.indexes_dirty();
        let result = sealed
            .iter()
            .chain(active.then_some(last))
            .filter(dirty)
            .try_for_each(|s| {
                self.inner
                    .stats
                    .timed_fsync(|| s.sync_indexes().map(|_| ()))
            });
        if let Err(e) = result {
            self.poison(&e);
            return Err(e);
        }
        Ok(())
    }

    /// Returns once every record below `offset` is fsynced (the recovery point is at
    /// or past it): what an append acknowledged only when durable waits for, after it
    /// released the log's locks. Concurrent calls share fsyncs (group commit): a call
    /// whose offset a finished or running sync covers starts none, and one sync covers
    /// everything appended before it started, so N threads appending and syncing at
    /// once get about one fsync per round of N records. The checkpoint file is not
    /// written here (the maintenance thread and [`PartitionLog::sync`] write it): a
    /// checkpoint behind the recovery point only makes recovery validate more.
    ///
    /// A failed fsync poisons the log and fails every call it covered; an offset that a
    /// truncation removed before it was synced is [`Error::NotLeaderOrFollower`].
    ///
    /// ```
    /// use tidelog::storage::PartitionLog;
    /// use tidelog::{BatchBuilder, LogConfig};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let log = PartitionLog::open(dir.path().join("t-0"), "t-0", LogConfig::default())?;
    /// let mut b = BatchBuilder::new();
    /// b.push(1_700_000_000_000, None, Some(b"durable"), &[]);
    /// let info = log.append_builder(&mut b)?;
    /// log.sync_to(info.last_offset + 1)?;
    /// assert!(log.recovery_point() > info.last_offset);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn sync_to(&self, offset: i64) -> Result<()> {
        if self.inner.read_only {
            return Ok(());
        }
        self.inner.group.sync_to(self, offset)
    }

    /// Fsyncs the segments holding data past the recovery point up to `end` (a log end
    /// read under the sync lock), then moves the recovery point to `end`. A failed
    /// fsync poisons the log.
    ///
    /// Of the active segment only the data is fsynced: opening the log after a crash
    /// walks the batch headers of the segment holding the recovery point from its last
    /// index entries on, so its index entries are not needed to find an acknowledged
    /// record (docs/design.md, "Invariants of a single node"). They are fsynced when
    /// the segment is sealed, by [`PartitionLog::sync`] and on close. A sealed segment
    /// is fsynced whole
    /// (its indexes, when written since their last fsync): once the recovery point
    /// passes it, opening trusts its indexes.
    fn fsync_up_to(&self, end: i64) -> Result<()> {
        let rp = self.recovery_point();
        let result = (|| {
            if end > rp {
                let segs = self.segments();
                let last = segs.len().saturating_sub(1);
                for (i, seg) in segs
                    .iter()
                    .enumerate()
                    .filter(|(_, s)| s.next_offset() > rp)
                {
                    if i == last {
                        self.inner.stats.timed_fsync(|| seg.sync_log())?;
                    } else {
                        self.inner.stats.timed_fsync(|| seg.sync())?;
                    }
                }
            }
            Ok(())
        })();
        if let Err(e) = result {
            self.poison(&e);
            return Err(e);
        }
        {
            let mut w = self.inner.writer.lock();
            if self.log_end_offset() == end {
                w.unflushed_records = 0;
                w.unflushed_since = None;
            }
        }
        self.inner.recovery_point.fetch_max(end, Ordering::AcqRel);
        Ok(())
    }

    /// Syncs if `flush_ms` says the oldest unflushed record is due (called by the
    /// maintenance thread).
    pub(crate) fn flush_if_due(&self) -> Result<()> {
        let Some(ms) = self.inner.config.read().flush_ms else {
            return Ok(());
        };
        let due = self
            .inner
            .writer
            .lock()
            .unflushed_since
            .is_some_and(|t| t.elapsed() >= Duration::from_millis(ms));
        if due { self.sync() } else { Ok(()) }
    }

    /// Fsyncs the segments sealed since the recovery point and moves the recovery point
    /// to the active segment's base offset, as Kafka does after a roll, off the
    /// appending thread (called by the maintenance thread). Without it the recovery
    /// point moves only on `sync`, which no flush policy calls by default, and recovery
    /// after a crash validates every segment written since the last clean close.
    /// A failed fsync poisons the log.
    pub(crate) fn flush_sealed(&self) -> Result<()> {
        if self.inner.read_only {
            return Ok(());
        }
        let _s = self.inner.sync_lock.lock();
        // Checked under the sync lock: `close` syncs (and `destroy` deletes) after it.
        if self.is_closed() || self.inner.poisoned.load(Ordering::Acquire) {
            return Ok(());
        }
        let segs = self.segments();
        let Some((active, sealed)) = segs.split_last() else {
            return Ok(());
        };
        let rp = self.recovery_point();
        if active.base_offset <= rp {
            // Durable appends (`sync_to`) may have moved the recovery point since the
            // checkpoint was written.
            return self.write_checkpoint();
        }
        let result = sealed
            .iter()
            .filter(|s| s.next_offset() > rp)
            .try_for_each(|s| self.inner.stats.timed_fsync(|| s.sync()));
        if let Err(e) = result {
            self.poison(&e);
            return Err(e);
        }
        self.inner
            .recovery_point
            .fetch_max(active.base_offset, Ordering::AcqRel);
        self.write_checkpoint()
    }

    /// Writes the checkpoint if it changed. The mutex also keeps two writers (a sync
    /// and a retention pass) from sharing the temporary file.
    pub(super) fn write_checkpoint(&self) -> Result<()> {
        // A recovery point past a sealed segment makes opening trust its indexes: the
        // ones written since their last fsync (a roll's final entry and trim, even when
        // a durable append synced the data first) are fsynced before it is written.
        self.sync_indexes(false)?;
        let mut on_disk = self.inner.checkpoint_on_disk.lock();
        let payload = encode_checkpoint(self.recovery_point(), self.log_start_offset());
        if *on_disk == Some(payload) {
            return Ok(());
        }
        checkpoint::write(&self.inner.dir.join(CHECKPOINT_FILE), &payload)?;
        *on_disk = Some(payload);
        Ok(())
    }
}

impl Durable for PartitionLog {
    fn durable_end(&self) -> i64 {
        self.recovery_point()
    }

    fn refuse(&self) -> Option<Error> {
        self.inner
            .poisoned
            .load(Ordering::Acquire)
            .then(|| self.poisoned_err())
    }

    fn lead(&self, sync: &mut dyn FnMut(i64) -> Result<()>) -> Result<()> {
        let _s = self.inner.sync_lock.lock();
        sync(self.log_end_offset())
    }

    fn sync_up_to(&self, end: i64) -> Result<()> {
        self.fsync_up_to(end)
    }

    fn log_end(&self) -> i64 {
        self.log_end_offset()
    }

    fn truncated(&self, target: i64) -> Error {
        Error::NotLeaderOrFollower {
            partition: self.inner.name.clone(),
            reason: format!(
                "offset {} was truncated before it was fsynced (the log end is now {})",
                target - 1,
                self.log_end_offset()
            ),
        }
    }
}
