//! Truncation of a [`PartitionLog`] (a follower's log end meeting its leader's): it
//! never changes a byte a reader holds, and `truncation.checkpoint` lets the next open
//! complete one a crash interrupted.

use super::{PartitionLog, WriterState};
use crate::error::{Error, Result};
use crate::storage::checkpoint;
use crate::storage::scan;
use crate::storage::segment::remove_files;
use crate::storage::signal::Moved;
use std::sync::Arc;
use std::sync::atomic::Ordering;

/// Name of the file that records a truncation in progress (the offset asked for), so
/// that a crash in the middle of one is completed on the next open.
pub const TRUNCATION_FILE: &str = "truncation.checkpoint";

impl PartitionLog {
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
                remove_files(dir, s.base_offset, "remove truncated segment")?;
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
    pub(in crate::storage) fn set_step_hook(&self, hook: Option<super::StepHook>) {
        *self.inner.step_hook.lock() = hook;
    }
}
