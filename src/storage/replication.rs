//! The storage side of replication, on [`PartitionLog`]: the high watermark under the
//! cluster's control, follower appends that keep the leader's offsets and bytes, leader
//! epochs (stamping and the leader-epoch cache), and truncation that never changes a
//! byte a reader holds and survives a crash at any step.
//!
//! A log is standalone until [`PartitionLog::set_replicated`]: its high watermark is
//! then moved only by [`PartitionLog::set_high_watermark`]. Nothing here knows about
//! leaders, followers or the ISR; the cluster layer decides, this layer keeps the
//! invariants (`high watermark <= log end`, epochs increasing, offsets increasing).

use super::checkpoint;
use super::epoch::{EpochCache, EpochEntry, UNDEFINED_EPOCH};
use super::log::{PartitionLog, TRUNCATION_FILE, WriterState, parse_batches};
use super::scan;
use super::segment::file_name;
use super::signal::Moved;
use super::types::Stamp;
use crate::error::{Error, Result};
use std::fs;
use std::sync::Arc;
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
    pub fn append_replica(&self, bytes: &[u8]) -> Result<crate::storage::AppendInfo> {
        let parsed = parse_batches(bytes)?;
        let mut w = self.inner.writer.lock();
        let config = Arc::clone(&w.config);
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
        let now = self.append_clock(&config);
        let mut written = end;
        let mut base_offset = None;
        let (mut max_ts, mut count) = (-1i64, 0i64);
        for b in parsed.iter() {
            let offset = b.base_offset();
            if let Err(e) = self.write_batch(&mut w, b, offset, Stamp::default(), &config, now) {
                self.publish(&w, written);
                return Err(e);
            }
            base_offset.get_or_insert(offset);
            written = b.last_offset() + 1;
            count += b.record_count() as i64;
            max_ts = max_ts.max(b.max_timestamp());
        }
        self.finish_append(w, written, count, &config)?;
        Ok(crate::storage::AppendInfo {
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

    /// The latest epoch of the leader-epoch cache (None when no batch carries one).
    pub fn latest_epoch(&self) -> Result<Option<i32>> {
        self.with_epochs(|c| c.entries().last().map(|e| e.epoch))
    }

    /// Kafka's OffsetForLeaderEpoch for this log: the largest epoch at or below
    /// `requested` and the start offset of the next higher epoch, or the log end when
    /// it is the latest (also when `requested` is newer than every epoch of the log).
    /// A `requested` epoch older than every entry gets itself and the first entry's
    /// start; `(-1, -1)` (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET) when `requested` is
    /// negative or the log has no epoch.
    pub fn end_offset_for_epoch(&self, requested: i32) -> Result<(i32, i64)> {
        self.with_epochs(|c| c.end_offset_for(requested, self.log_end_offset()))
    }

    /// The leader-epoch cache: `(epoch, start offset)` entries, oldest first.
    pub fn epoch_entries(&self) -> Result<Vec<EpochEntry>> {
        self.with_epochs(|c| c.entries().to_vec())
    }

    /// Runs `f` on the leader-epoch cache (loading it first if needed), holding its
    /// read lock: a truncation changes the cache and the log end under its write lock,
    /// so `f` sees the two agree.
    fn with_epochs<T>(&self, f: impl FnOnce(&EpochCache) -> T) -> Result<T> {
        if self.inner.epochs.read().is_none() {
            let mut w = self.inner.writer.lock();
            self.ensure_epochs(&mut w)?;
        }
        let guard = self.inner.epochs.read();
        let empty = EpochCache::default();
        Ok(f(guard.as_ref().unwrap_or(&empty)))
    }

    /// Loads the leader-epoch cache if it is not loaded: rebuilt from every batch
    /// header (its file was missing at open: a log that never had an epoch, or one
    /// written before epochs existed), and written down if it has entries.
    pub(super) fn ensure_epochs(&self, w: &mut WriterState) -> Result<()> {
        if w.latest_epoch.is_some() {
            return Ok(());
        }
        let cache = self.epochs_from_headers()?;
        if !cache.entries().is_empty() && !self.inner.read_only {
            cache.write(&self.inner.dir)?;
        }
        w.latest_epoch = Some(cache.latest_epoch());
        *self.inner.epochs.write() = Some(cache);
        Ok(())
    }

    /// The cache as the batch headers say, from the log start.
    fn epochs_from_headers(&self) -> Result<EpochCache> {
        let segs = self.segments();
        let mut heads = Vec::new();
        for s in segs.iter() {
            let view = s.view()?;
            heads.extend(
                view.batches()
                    .map(|b| (b.partition_leader_epoch(), b.base_offset())),
            );
        }
        let mut cache = EpochCache::from_batches(heads.into_iter());
        cache.clamp(self.log_start_offset(), self.log_end_offset());
        Ok(cache)
    }

    /// Loads `leader-epoch-checkpoint` on open, if there is one, and brings it in line
    /// with the recovered log: entries past the log end go (see `EpochCache::clamp`),
    /// and epochs of the batches after the recovery point and the log start (which a
    /// crash may have kept out of the file) come in. A damaged file is rebuilt from the
    /// batch headers; returns true then.
    pub(super) fn load_epochs(&self) -> Result<bool> {
        let mut w = self.inner.writer.lock();
        let dir = &self.inner.dir;
        let mut cache = match EpochCache::read(dir) {
            Ok(None) => return Ok(false),
            Ok(Some(cache)) => cache,
            Err(e) if e.is_corruption() => {
                let cache = self.epochs_from_headers()?;
                cache.write(dir)?;
                w.latest_epoch = Some(cache.latest_epoch());
                *self.inner.epochs.write() = Some(cache);
                return Ok(true);
            }
            Err(e) => return Err(e),
        };
        let (start, end) = (self.log_start_offset(), self.log_end_offset());
        let from = self.recovery_point().max(start);
        let mut changed = cache.clamp(start, end);
        for seg in self.segments().iter().filter(|s| s.next_offset() > from) {
            let view = seg.view()?;
            for b in view.batches().filter(|b| b.base_offset() >= from) {
                changed |= cache.assign(b.partition_leader_epoch(), b.base_offset());
            }
        }
        changed |= cache.clamp(start, end);
        if changed {
            cache.write(dir)?;
        }
        w.latest_epoch = Some(cache.latest_epoch());
        *self.inner.epochs.write() = Some(cache);
        Ok(false)
    }

    /// Notes that a batch of a new `epoch` is about to be written at `offset`. The file
    /// is rewritten; a failure poisons the log (the cache and the file may disagree).
    pub(super) fn note_epoch(&self, w: &mut WriterState, epoch: i32, offset: i64) -> Result<()> {
        let mut guard = self.inner.epochs.write();
        let Some(cache) = guard.as_mut() else {
            return Ok(());
        };
        if cache.assign(epoch, offset) {
            w.latest_epoch = Some(cache.latest_epoch());
            self.write_epochs(cache)?;
        }
        Ok(())
    }

    /// Forgets the epochs that start at or after `offset` (a batch noted by
    /// [`PartitionLog::note_epoch`] was not written after all).
    pub(super) fn forget_epochs_from(&self, w: &mut WriterState, offset: i64) -> Result<()> {
        let mut guard = self.inner.epochs.write();
        if let Some(cache) = guard.as_mut()
            && cache.truncate_from_end(offset)
        {
            w.latest_epoch = Some(cache.latest_epoch());
            self.write_epochs(cache)?;
        }
        Ok(())
    }

    /// Moves the first epoch's start up to the log start after retention or
    /// `delete_records_before` moved it (Kafka's `truncateFromStart`). The caller holds
    /// the writer lock.
    pub(super) fn epochs_follow_log_start(&self, _w: &WriterState) -> Result<()> {
        let mut guard = self.inner.epochs.write();
        if let Some(cache) = guard.as_mut()
            && cache.truncate_from_start(self.log_start_offset())
        {
            self.write_epochs(cache)?;
        }
        Ok(())
    }

    fn write_epochs(&self, cache: &EpochCache) -> Result<()> {
        cache.write(&self.inner.dir).inspect_err(|e| self.poison(e))
    }

    /// Removes every record at or after `offset` and returns the new log end offset.
    /// As in Kafka, the cut falls on a batch boundary: a batch containing `offset` is
    /// removed whole, so the new end may be below `offset`. The high watermark comes
    /// down to the new end if it was above it, and the leader epochs that start at or
    /// past it are forgotten.
    ///
    /// No byte a reader may hold changes: the kept prefix of the segment that is cut is
    /// copied to a new file that replaces the old one by rename, later segments are
    /// unlinked, and slices (and their file descriptors, for `sendfile`) keep the old
    /// files. The offset is recorded in `truncation.checkpoint` before anything is
    /// touched and removed when all is done, so a crash at any step is completed on the
    /// next open: the log is found as it was before or as it is after, never between.
    /// A failure part-way poisons the log (reopen it to complete the truncation).
    pub fn truncate_to(&self, offset: i64) -> Result<i64> {
        self.check_writable()?;
        // The sync lock first, as `sync` takes them: no fsync moves the recovery point
        // past the cut while this runs.
        let _s = self.inner.sync_lock.lock();
        let mut w = self.inner.writer.lock();
        let (start, end) = (self.log_start_offset(), self.log_end_offset());
        if offset < start {
            return Err(Error::OffsetOutOfRange {
                partition: self.inner.name.clone(),
                offset,
                start,
                end,
            });
        }
        if offset >= end {
            return Ok(end);
        }
        checkpoint::write(&self.inner.dir.join(TRUNCATION_FILE), &offset.to_be_bytes())?;
        let result = self
            .step("intent recorded")
            .and_then(|()| self.truncate_locked(&mut w, offset));
        result.inspect_err(|e| self.poison(e))
    }

    /// Completes, on open, a truncation that a crash interrupted: the offset it was
    /// asked for, if there was one.
    pub(super) fn complete_interrupted_truncation(&self) -> Result<Option<i64>> {
        let path = self.inner.dir.join(TRUNCATION_FILE);
        let Some(payload) = checkpoint::read(&path)? else {
            return Ok(None);
        };
        let offset = payload
            .as_slice()
            .try_into()
            .map(i64::from_be_bytes)
            .map_err(|_| {
                Error::corrupt(
                    path.display(),
                    10,
                    format!(
                        "a truncation checkpoint holds one offset (8 bytes), not {} bytes",
                        payload.len()
                    ),
                )
            })?;
        let _s = self.inner.sync_lock.lock();
        let mut w = self.inner.writer.lock();
        self.truncate_locked(&mut w, offset)?;
        Ok(Some(offset))
    }

    /// The truncation itself, once its intent is on disk; idempotent, so that a
    /// truncation cut short by a crash is completed by running it again. The caller
    /// holds the sync and writer locks.
    fn truncate_locked(&self, w: &mut WriterState, offset: i64) -> Result<i64> {
        let dir = &self.inner.dir;
        let segs = self.segments();
        if offset < self.log_end_offset() {
            let config = Arc::clone(&w.config);
            let idx = segs
                .partition_point(|s| s.base_offset <= offset)
                .saturating_sub(1);
            let target = &segs[idx];
            let view = target.view()?;
            let cut = view
                .find(offset, &mut view.heads())?
                .unwrap_or(view.readable());
            drop(view);
            let files = &self.inner.files;
            let mut active = scan::cut_to(dir, target, cut, &config, files, &mut |s| self.step(s))?;
            for s in &segs[idx + 1..] {
                s.detach();
                for ext in ["log", "index", "timeindex"] {
                    let p = dir.join(file_name(s.base_offset, ext));
                    match fs::remove_file(&p) {
                        Ok(()) => {}
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                        Err(e) => return Err(Error::io("remove truncated segment", p, e)),
                    }
                }
            }
            checkpoint::sync_dir(dir)?;
            self.step("later segments removed")?;
            active.set_prefaulter(self.inner.prefault.clone());
            let new_end = active.shared().next_offset();
            let mut list = segs[..idx].to_vec();
            list.push(active.shared().clone());
            *self.inner.segments.write() = Arc::new(list);
            // The old writer goes without sealing: its file was replaced or removed.
            w.active = Some(active);
            // Cutting the batch that holds the log start offset (after a
            // delete_records_before inside it) leaves no record at or after it: the
            // start comes down to the new end so that start <= end still holds.
            self.inner.log_start.fetch_min(new_end, Ordering::AcqRel);
            let _h = self.inner.hw_lock.lock();
            let mut epochs = self.inner.epochs.write();
            self.inner.log_end.store(new_end, Ordering::SeqCst);
            let hw = if w.replicated {
                self.high_watermark().min(new_end)
            } else {
                new_end
            };
            self.inner.high_watermark.store(hw, Ordering::SeqCst);
            if let Some(cache) = epochs.as_mut()
                && cache.truncate_from_end(new_end)
            {
                w.latest_epoch = Some(cache.latest_epoch());
                cache.write(dir)?;
                self.step("leader epochs truncated")?;
            }
        }
        let end = self.log_end_offset();
        self.truncate_producers(w, end)?;
        self.inner.recovery_point.fetch_min(end, Ordering::AcqRel);
        self.write_checkpoint()?;
        self.step("checkpoint written")?;
        checkpoint::remove(&dir.join(TRUNCATION_FILE))?;
        self.inner.watchers.notify(Moved::HighWatermark);
        Ok(end)
    }

    /// A durable step of a truncation: the test hook may stop there or copy the
    /// directory.
    #[cfg(test)]
    pub(super) fn step(&self, name: &'static str) -> Result<()> {
        match self.inner.step_hook.lock().as_mut() {
            Some(hook) => hook(name),
            None => Ok(()),
        }
    }

    #[cfg(not(test))]
    #[inline(always)]
    pub(super) fn step(&self, _name: &'static str) -> Result<()> {
        Ok(())
    }

    /// Installs the truncation step hook (tests).
    #[cfg(test)]
    pub(super) fn set_step_hook(&self, hook: Option<super::log::StepHook>) {
        *self.inner.step_hook.lock() = hook;
    }
}
