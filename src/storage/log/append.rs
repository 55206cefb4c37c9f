//! Appending to a [`PartitionLog`]: checking batches, stamping offsets (and leader
//! epoch, LogAppendTime), writing them into the active segment, publishing the new log
//! end to readers, and rolling segments.

use super::{PartitionLog, WriterState, parse_batches};
use crate::error::{Error, Result};
use crate::record::{Batch, BatchBuilder, ValidBatches};
use crate::storage::checkpoint;
use crate::storage::clock::now_ms;
use crate::storage::config::LogConfig;
use crate::storage::producer_state;
use crate::storage::segment::{Segment, SegmentWriter};
use crate::storage::signal::Moved;
use crate::storage::types::{AppendInfo, Stamp};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

impl PartitionLog {
    /// Appends one or more batches laid back to back. Each is validated (length, magic,
    /// CRC, size limit) before anything is written; offsets are assigned by stamping
    /// each batch's baseOffset in place (and its partitionLeaderEpoch, once
    /// [`PartitionLog::set_leader_epoch`] was called). Returns where they landed.
    pub fn append(&self, batches_bytes: &[u8]) -> Result<AppendInfo> {
        self.append_valid(&parse_batches(batches_bytes)?)
    }

    /// [`PartitionLog::append`] of batches already validated (a request's, checked once
    /// where it was received): the log's own checks (size limit, records present,
    /// timestamps) run, the CRC is not computed again.
    ///
    /// ```
    /// use tidelog::record::ValidBatches;
    /// use tidelog::storage::PartitionLog;
    /// use tidelog::{BatchBuilder, LogConfig};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let log = PartitionLog::open(dir.path().join("t-0"), "t-0", LogConfig::default())?;
    /// let mut b = BatchBuilder::new();
    /// b.push(1_700_000_000_000, None, Some(b"hello"), &[]);
    /// let bytes = b.finish();
    /// let valid = ValidBatches::parse(&bytes, "a request for t-0")?;
    /// assert_eq!(log.append_valid(&valid)?.base_offset, 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn append_valid(&self, batches: &ValidBatches<'_>) -> Result<AppendInfo> {
        self.check_and_append(self.inner.writer.lock(), batches)
    }

    /// The log's checks of `batches` (size limit, records, timestamps; the log
    /// writable), then the append, under the writer lock `w`.
    fn check_and_append(
        &self,
        w: parking_lot::MutexGuard<'_, WriterState>,
        batches: &ValidBatches<'_>,
    ) -> Result<AppendInfo> {
        self.check_batches(batches, Some(w.config.max_message_bytes as usize))?;
        self.check_writable()?;
        self.append_locked(w, batches)
    }

    /// Finishes `builder`'s batch and appends it: [`PartitionLog::append`] of
    /// [`BatchBuilder::finish`], without copying the batch out of the builder and
    /// without checking again the CRC the builder has just computed over the same
    /// bytes. The builder is empty afterwards, whatever the result.
    ///
    /// ```
    /// use tidelog::storage::PartitionLog;
    /// use tidelog::{BatchBuilder, LogConfig};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let log = PartitionLog::open(dir.path().join("t-0"), "t-0", LogConfig::default())?;
    /// let mut b = BatchBuilder::new();
    /// b.push(1_700_000_000_000, None, Some(b"hello"), &[]);
    /// assert_eq!(log.append_builder(&mut b)?.base_offset, 0);
    /// assert!(b.is_empty());
    /// // An empty builder is refused like an empty batch.
    /// assert!(log.append_builder(&mut b).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn append_builder(&self, builder: &mut BatchBuilder) -> Result<AppendInfo> {
        builder
            .finish_with(|bytes| self.append_valid(&ValidBatches::sealed(bytes, &self.inner.name)?))
    }

    /// True until a handle of the log took a replica role
    /// ([`PartitionLog::end_standalone`]): a look, which
    /// [`PartitionLog::append_valid_standalone`] confirms under the writer lock.
    #[inline]
    pub(crate) fn is_standalone(&self) -> bool {
        self.inner.standalone.load(Ordering::Acquire)
    }

    /// [`PartitionLog::append_builder`] for a standalone partition, as
    /// [`PartitionLog::append_valid_standalone`], the builder's batch sealed under the
    /// writer lock (its CRC-32C; measured faster for one-record batches than sealing
    /// before the lock, 8.2-8.5 against 7.6-7.8 M appends/s); for a builder without a
    /// codec, so that no compression runs under the lock. `None`, and the builder left
    /// as it was, once a handle of the log has taken a role.
    pub(crate) fn append_builder_standalone(
        &self,
        builder: &mut BatchBuilder,
    ) -> Option<Result<AppendInfo>> {
        let w = self.lock_standalone()?;
        Some(builder.finish_with(|bytes| {
            self.check_and_append(w, &ValidBatches::sealed(bytes, &self.inner.name)?)
        }))
    }

    /// [`PartitionLog::append_valid`] for a standalone partition, whose handles have no
    /// replica role to check: `None`, nothing appended, once a handle of the log has
    /// taken one ([`PartitionLog::end_standalone`]); the caller then appends under that
    /// role. Decided under the writer lock, which a role change takes first, so no
    /// append decided standalone lands after a handle took a role.
    pub(crate) fn append_valid_standalone(
        &self,
        batches: &ValidBatches<'_>,
    ) -> Option<Result<AppendInfo>> {
        let w = self.lock_standalone()?;
        Some(self.check_and_append(w, batches))
    }

    /// The writer lock, if the log is still standalone (read under the lock, which
    /// [`PartitionLog::end_standalone`] takes too, so the answer holds while it is held).
    fn lock_standalone(&self) -> Option<parking_lot::MutexGuard<'_, WriterState>> {
        let w = self.inner.writer.lock();
        self.inner.standalone.load(Ordering::Relaxed).then_some(w)
    }

    /// Ends the standalone appends of [`PartitionLog::append_valid_standalone`] and
    /// [`PartitionLog::append_builder_standalone`] for good: a partition handle calls
    /// it before it takes a replica role (leader or follower; roles never go back to
    /// standalone). An append that holds the writer lock finishes first; any later one
    /// goes through the role.
    pub(crate) fn end_standalone(&self) {
        let _w = self.inner.writer.lock();
        self.inner.standalone.store(false, Ordering::Release);
    }

    /// Appends checked batches at the log end (the caller holds the writer lock and ran
    /// `check_batches` and `check_writable`). The append goes by the log's settings as
    /// the writer state holds them (read there, not cloned: an `Arc` clone and drop
    /// would add two atomic read-modify-writes to every append).
    pub(super) fn append_locked(
        &self,
        mut w: parking_lot::MutexGuard<'_, WriterState>,
        parsed: &ValidBatches<'_>,
    ) -> Result<AppendInfo> {
        let now = self.append_clock(&w.config);
        let base_offset = self.inner.log_end.load(Ordering::Relaxed);
        let stamp = Stamp {
            leader_epoch: w.leader_epoch,
            log_append_time: w.config.log_append_time.then_some(now),
        };
        let mut next = base_offset;
        let mut max_ts = -1;
        let mut count = 0i64;
        for b in parsed.iter() {
            if let Err(e) = self.write_batch(&mut w, b, next, stamp, now) {
                // Nothing of this batch was published; earlier batches of this call were.
                self.publish(&w, next);
                return Err(e);
            }
            next += b.last_offset_delta() as i64 + 1;
            count += b.record_count() as i64;
            max_ts = max_ts.max(stamp.log_append_time.unwrap_or(b.max_timestamp()));
        }
        self.finish_append(w, next, count)?;
        Ok(AppendInfo {
            base_offset,
            last_offset: next - 1,
            log_append_time: stamp.log_append_time,
            max_timestamp: max_ts,
            record_count: count,
        })
    }

    /// Checks what the log requires of every batch before any is written (an append is
    /// all or nothing): records present, timestamps valid, and, when given, the size
    /// limit.
    pub(super) fn check_batches(
        &self,
        parsed: &ValidBatches<'_>,
        max_bytes: Option<usize>,
    ) -> Result<()> {
        for b in parsed.iter() {
            if let Some(max) = max_bytes
                && b.len() > max
            {
                return Err(Error::MessageTooLarge {
                    partition: self.inner.name.clone(),
                    size: b.len(),
                    max,
                });
            }
            if b.record_count() == 0 {
                return Err(Error::InvalidBatch(format!(
                    "a batch for {} has no records",
                    self.inner.name
                )));
            }
            // -1 means "no timestamp"; anything below is invalid, as in Kafka.
            if b.max_timestamp() < -1 || b.base_timestamp() < -1 {
                return Err(Error::InvalidBatch(format!(
                    "a batch for {} has a negative timestamp (base {}, max {})",
                    self.inner.name,
                    b.base_timestamp(),
                    b.max_timestamp()
                )));
            }
        }
        if parsed.is_empty() {
            return Err(Error::InvalidBatch(format!(
                "no batch in an append to {}",
                self.inner.name
            )));
        }
        Ok(())
    }

    /// The time an append goes by: LogAppendTime is written down, so it reads the
    /// system clock; the segment age check takes the maintenance clock where a tick of
    /// lag does not matter.
    pub(super) fn append_clock(&self, config: &LogConfig) -> i64 {
        match &self.inner.clock {
            Some(c) if !config.log_append_time => c.now_within(config.segment_ms),
            _ => None,
        }
        .unwrap_or_else(now_ms)
    }

    /// Writes one batch at `offset` into the active segment (rolling first if needed),
    /// stamped as `stamp` says, and notes a new leader epoch in the cache. Publishes
    /// nothing.
    pub(super) fn write_batch(
        &self,
        w: &mut WriterState,
        b: &Batch<'_>,
        offset: i64,
        stamp: Stamp,
        now: i64,
    ) -> Result<()> {
        if b.is_transactional() {
            // Transactions need the producers' state, and a marker must parse before
            // it is written (`record_batch` parses it again after).
            self.ensure_producers(w)?;
            if b.is_control() && b.producer_id() >= 0 {
                crate::record::EndTxnMarker::of_batch(b, &self.inner.name)?;
            }
        }
        self.maybe_roll(w, b.len(), offset, b.last_offset_delta(), now)
            .inspect_err(|e| self.note_out_of_space(e))?;
        // The epoch entry is on disk before the batch can be published: a recovery
        // point that covers the batch never finds its epoch missing from the file.
        let new_epoch = match w.latest_epoch {
            Some(latest) => {
                let epoch = stamp
                    .leader_epoch
                    .unwrap_or_else(|| b.partition_leader_epoch());
                (epoch > latest).then_some(epoch)
            }
            None => None,
        };
        if let Some(epoch) = new_epoch {
            self.note_epoch(w, epoch, offset)?;
        }
        let result = match stamp.log_append_time {
            Some(t) => {
                let mut scratch = std::mem::take(&mut w.scratch);
                let r = restamp_log_append_time(&mut scratch, b, t).and_then(|restamped| {
                    self.active(w)?.append(
                        &restamped,
                        offset,
                        stamp.leader_epoch,
                        now,
                        &self.inner.space,
                    )
                });
                w.scratch = scratch;
                r
            }
            None => self
                .active(w)?
                .append(b, offset, stamp.leader_epoch, now, &self.inner.space),
        };
        if let Err(e) = &result {
            self.note_out_of_space(e);
        }
        if result.is_err() && new_epoch.is_some() {
            // The batch is not in the log: neither is its epoch.
            self.forget_epochs_from(w, offset)?;
        }
        result?;
        self.inner
            .stats
            .appended(b.record_count() as u64, b.len() as u64);
        if let Some(p) = w.producers.as_mut()
            && let Some(change) = p.record_batch(b, offset, &self.inner.name, now)?
        {
            self.note_txn_change(w, change)?;
        }
        Ok(())
    }

    fn active<'w>(&self, w: &'w mut WriterState) -> Result<&'w mut SegmentWriter> {
        w.active.as_mut().ok_or_else(|| self.closed_err())
    }

    /// Publishes the batches an append wrote up to `end`, counts them for the flush
    /// policy, and syncs up to `end` when `flush_messages` says so (after releasing the
    /// lock, through the group commit).
    pub(super) fn finish_append(
        &self,
        mut w: parking_lot::MutexGuard<'_, WriterState>,
        end: i64,
        count: i64,
    ) -> Result<()> {
        self.publish(&w, end);
        w.unflushed_records += count as u64;
        if w.unflushed_since.is_none() {
            w.unflushed_since = Some(Instant::now());
        }
        let flush_now = w
            .config
            .flush_messages
            .is_some_and(|n| w.unflushed_records >= n);
        drop(w);
        if flush_now {
            // Group commit, without rewriting the checkpoint (the maintenance thread does).
            self.sync_to(end)?;
        }
        Ok(())
    }

    /// Publishes a new log end offset and wakes the readers waiting for it: the high
    /// watermark follows in a standalone log; a replicated one wakes only the readers of
    /// the log end (the high watermark moves by `set_high_watermark`).
    pub(super) fn publish(&self, w: &WriterState, end: i64) {
        if w.replicated {
            // SeqCst: a replica fetch that registered its signal then read the log end
            // either sees this store or is seen by the notify (see `Watchers::add`).
            self.inner.log_end.store(end, Ordering::SeqCst);
            self.inner.watchers.notify(Moved::LogEnd);
        } else {
            self.inner.log_end.store(end, Ordering::Release);
            self.inner.high_watermark.store(end, Ordering::SeqCst);
            self.inner.watchers.notify(Moved::HighWatermark);
        }
    }

    fn maybe_roll(
        &self,
        w: &mut WriterState,
        len: usize,
        next_offset: i64,
        last_delta: i32,
        now: i64,
    ) -> Result<()> {
        let (segment_bytes, segment_ms) = (w.config.segment_bytes as usize, w.config.segment_ms);
        let Some(active) = w.active.as_ref() else {
            return Err(self.closed_err());
        };
        let seg_base = active.shared().base_offset;
        let empty = active.position() == 0;
        let too_big = !active.fits(len, segment_bytes);
        let too_old = !empty
            && active
                .first_append_ms
                .is_some_and(|t| now.saturating_sub(t) >= segment_ms as i64);
        let offsets_overflow = next_offset + last_delta as i64 - seg_base > u32::MAX as i64;
        let index_full = active.index_full();
        // Offsets that do not fit the segment's relative u32 roll it even when empty: a
        // follower's batch may lie far past the log end (a gap in the leader's log).
        let roll = offsets_overflow || (!empty && (too_big || too_old || index_full));
        let too_big = if roll {
            len > segment_bytes
        } else {
            empty && too_big
        };
        if too_big {
            return Err(Error::MessageTooLarge {
                partition: self.inner.name.clone(),
                size: len,
                max: segment_bytes,
            });
        }
        if roll {
            self.roll_locked(w, next_offset)?;
        }
        Ok(())
    }

    fn roll_locked(&self, w: &mut WriterState, next_offset: i64) -> Result<()> {
        if w.active.is_none() {
            return Err(self.closed_err());
        }
        // The new segment first: if it cannot be made (a full disk), the active one
        // stays as it is and takes appends again once there is room.
        let mut new = Segment::create(&self.inner.dir, next_offset, &w.config, &self.inner.files)?;
        new.set_prefaulter(self.inner.prefault.clone());
        checkpoint::sync_dir(&self.inner.dir)?;
        let old = w.active.take().ok_or_else(|| self.closed_err())?;
        let old_base = old.shared().base_offset;
        let sealed = match old.seal() {
            Ok(s) => s,
            Err(e) => {
                self.poison(&e);
                return Err(e);
            }
        };
        let mut segs = self.inner.segments.write();
        let mut list: Vec<Arc<Segment>> = segs.iter().cloned().collect();
        if let Some(last) = list.last_mut() {
            *last = sealed;
        }
        list.push(new.shared().clone());
        *segs = Arc::new(list);
        drop(segs);
        w.active = Some(new);
        // The producers' state as of the new segment: a restart replays from here (the
        // aborted transactions of the sealed segment are on disk first).
        if let Some(p) = &w.producers {
            crate::storage::txn_index::sync(&self.inner.dir, old_base)?;
            producer_state::write_snapshot(&self.inner.dir, next_offset, p)?;
        }
        Ok(())
    }

    /// Seals the active segment and starts a new one (if the active one has data).
    pub fn roll(&self) -> Result<()> {
        self.check_writable()?;
        let mut w = self.inner.writer.lock();
        let empty = w.active.as_ref().is_none_or(|a| a.position() == 0);
        if empty {
            return Ok(());
        }
        let next = self.log_end_offset();
        self.roll_locked(&mut w, next)
    }
}

/// A copy of `b` in `scratch` marked LogAppendTime with time `t` (its CRC recomputed).
fn restamp_log_append_time<'s>(
    scratch: &'s mut Vec<u8>,
    b: &Batch<'_>,
    t: i64,
) -> Result<Batch<'s>> {
    scratch.clear();
    scratch.extend_from_slice(b.as_bytes());
    crate::record::set_log_append_time(scratch, t);
    Batch::parse_header_at(scratch, "", 0)
}
