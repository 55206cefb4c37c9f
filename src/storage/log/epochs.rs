//! The leader-epoch cache of a [`PartitionLog`] (`epoch` holds the cache itself): its
//! queries (OffsetForLeaderEpoch), loading it from its file or the batch headers, and
//! keeping it in line with appends, retention and truncation.

use super::{PartitionLog, WriterState};
use crate::error::Result;
use crate::storage::epoch::{EpochCache, EpochEntry};

impl PartitionLog {
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
}
