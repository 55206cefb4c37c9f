//! Retention and compaction driven on a [`PartitionLog`]: `DeleteRecords`, deleting
//! the oldest segments, the retention pass and compaction of sealed segments (the
//! decisions and the rewritten bytes are `retention`'s), and the files of bytes recovery
//! cut.

use super::PartitionLog;
use crate::error::{Error, IoContext, Result};
use crate::storage::checkpoint;
use crate::storage::retention::{
    Compaction, SegmentSummary, compaction_rewrites, segments_to_delete,
};
use crate::storage::scan;
use crate::storage::segment::{Segment, remove_files};
use crate::storage::txn_index::{self, AbortedTxn};
use crate::storage::types::CleanupOutcome;
use std::fs;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;

/// The ending of a durable retention hold's file name: `<holder>.retention-hold`.
const HOLD_SUFFIX: &str = ".retention-hold";

/// A durable retention hold's offset (a TLCP file of 8 bytes), None if there is no file.
fn read_hold(path: &std::path::Path) -> Result<Option<i64>> {
    let Some(payload) = checkpoint::read(path)? else {
        return Ok(None);
    };
    let bytes: [u8; 8] = payload.as_slice().try_into().map_err(|_| {
        Error::corrupt(
            path.display(),
            10,
            "a retention hold holds one offset (8 bytes)",
        )
    })?;
    let offset = i64::from_be_bytes(bytes);
    if offset < 0 {
        return Err(Error::corrupt(
            path.display(),
            10,
            format!("negative retention hold {offset}"),
        ));
    }
    Ok(Some(offset))
}

impl PartitionLog {
    /// Advances the log start offset to `offset` (Kafka's DeleteRecords), deleting the
    /// segments whose successor starts at or below it; `offset` may not pass the high
    /// watermark. Returns the new log start offset.
    pub fn delete_records_before(&self, offset: i64) -> Result<i64> {
        self.check_writable()?;
        let end = self.high_watermark();
        if offset > end || offset < 0 {
            return Err(Error::OffsetOutOfRange {
                partition: self.inner.name.clone(),
                offset,
                start: self.log_start_offset(),
                end,
            });
        }
        let w = self.inner.writer.lock();
        let new_start = self.log_start_offset().max(offset);
        self.inner.log_start.store(new_start, Ordering::Release);
        // Segments whose successor starts at or below the new start (Kafka's rule):
        // the log start never jumps past `offset`, even over a gap.
        let segs = self.segments();
        let n = segs
            .windows(2)
            .take_while(|pair| pair[1].base_offset <= new_start)
            .count();
        self.remove_oldest_locked(n)?;
        self.epochs_follow_log_start(&w)?;
        drop(w);
        self.write_checkpoint()?;
        Ok(self.log_start_offset())
    }

    /// Deletes the `n` oldest segments (never the active one) and advances the log
    /// start offset past them. The caller holds the writer lock.
    pub(crate) fn remove_oldest_locked(&self, n: usize) -> Result<usize> {
        if n == 0 {
            return Ok(0);
        }
        let mut segs = self.inner.segments.write();
        let n = n.min(segs.len() - 1);
        let removed: Vec<Arc<Segment>> = segs[..n].to_vec();
        let next_base = segs[n].base_offset;
        *segs = Arc::new(segs[n..].to_vec());
        drop(segs);
        self.inner.log_start.fetch_max(next_base, Ordering::AcqRel);
        // Checkpoint the new start before the files go, so a crash never resurrects them.
        self.write_checkpoint()?;
        for s in &removed {
            s.detach();
            remove_files(&self.inner.dir, s.base_offset, "delete segment")?;
        }
        self.remove_snapshots_below(next_base)?;
        checkpoint::sync_dir(&self.inner.dir)?;
        Ok(n)
    }

    /// Holds retention of this log at `offset` for `holder` (None releases the hold):
    /// while held, retention (time and size) deletes no segment holding a record at or
    /// above the lowest hold. A forwarder holds its position so that records not
    /// forwarded yet stay; `delete_records_before` (an explicit request) ignores holds.
    pub fn hold_retention(&self, holder: &str, offset: Option<i64>) {
        let mut holds = self.inner.retention_holds.lock();
        match offset {
            Some(o) => {
                holds.insert(holder.to_string(), o);
            }
            None => {
                holds.remove(holder);
            }
        }
    }

    /// The lowest retention hold ([`hold_retention`](Self::hold_retention)), None
    /// without any.
    pub fn retention_floor(&self) -> Option<i64> {
        self.inner.retention_holds.lock().values().copied().min()
    }

    /// Holds retention at `offset` for `holder` durably (None releases the hold): a
    /// file `<holder>.retention-hold` in the partition directory (a TLCP file, see
    /// docs/format.md) that the retention of every process owning the log honours, as
    /// it honours [`hold_retention`](Self::hold_retention)'s, across restarts. A
    /// read-only opener may write it too (it is the one file one writes): so a process
    /// reading a directory another one holds keeps that one's retention from deleting
    /// what it has not read. `holder` is letters, digits, `.`, `_` and `-`.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for a bad holder name; an I/O error naming the file.
    pub fn hold_retention_durably(&self, holder: &str, offset: Option<i64>) -> Result<()> {
        let path = self.hold_path(holder)?;
        match offset {
            Some(o) => checkpoint::write(&path, &o.to_be_bytes()),
            None => checkpoint::remove(&path),
        }
    }

    /// The durable retention hold of `holder`
    /// ([`hold_retention_durably`](Self::hold_retention_durably)), None without one.
    ///
    /// # Errors
    /// [`Error::Corrupt`] naming a damaged file; an I/O error naming it.
    pub fn durable_retention_hold(&self, holder: &str) -> Result<Option<i64>> {
        read_hold(&self.hold_path(holder)?)
    }

    /// Every durable retention hold of this log, by holder, read from the partition
    /// directory now.
    ///
    /// # Errors
    /// [`Error::Corrupt`] naming a damaged hold file; an I/O error naming the directory
    /// or file.
    pub fn durable_retention_holds(&self) -> Result<Vec<(String, i64)>> {
        let dir = &self.inner.dir;
        let mut holds = Vec::new();
        for entry in fs::read_dir(dir).ctx("list log directory", dir)? {
            let entry = entry.ctx("list log directory", dir)?;
            let name = entry.file_name();
            let Some(holder) = name.to_str().and_then(|n| n.strip_suffix(HOLD_SUFFIX)) else {
                continue;
            };
            if let Some(o) = read_hold(&entry.path())? {
                holds.push((holder.to_string(), o));
            }
        }
        holds.sort();
        Ok(holds)
    }

    fn hold_path(&self, holder: &str) -> Result<PathBuf> {
        let plain = !holder.is_empty()
            && !holder.starts_with('.')
            && holder
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
        if !plain {
            return Err(Error::InvalidConfig {
                key: "retention hold".into(),
                reason: format!(
                    "{holder:?} (of {}): use letters, digits, '.', '_' and '-'",
                    self.inner.name
                ),
            });
        }
        Ok(self.inner.dir.join(format!("{holder}{HOLD_SUFFIX}")))
    }

    /// One retention pass at time `now_ms`: deletes old segments (policy `delete`) and
    /// compacts (policy `compact`). The maintenance thread calls this; tests and tools
    /// may call it directly.
    pub fn apply_retention(&self, now_ms: i64) -> Result<CleanupOutcome> {
        if self.inner.read_only {
            return Err(Error::ReadOnly(self.inner.dir.clone()));
        }
        let mut out = CleanupOutcome::default();
        if self.is_closed() {
            return Ok(out);
        }
        let config = self.config();
        if config.cleanup_policy.deletes() {
            let w = self.inner.writer.lock();
            let segs = self.segments();
            let sums: Vec<SegmentSummary> = segs
                .iter()
                .map(|s| SegmentSummary {
                    size: s.size() as u64,
                    max_timestamp: s.max_timestamp(),
                })
                .collect();
            // Only segments whose successor starts at or below the high watermark
            // (always true of the sealed segments of a standalone log): no uncommitted
            // record is deleted and the log start never passes the high watermark. A
            // retention hold (a forwarder's position) keeps what it has not passed; the
            // durable ones are read only when something would go.
            let wanted = segments_to_delete(&sums, &config, now_ms);
            let mut floor = self.retention_floor().unwrap_or(i64::MAX);
            if wanted > 0 {
                for (_, o) in self.durable_retention_holds()? {
                    floor = floor.min(o);
                }
            }
            let hw = self.high_watermark().min(floor);
            let committed = segs
                .windows(2)
                .take_while(|pair| pair[1].base_offset <= hw)
                .count();
            let n = wanted.min(committed);
            out.segments_deleted = self.remove_oldest_locked(n)?;
            if out.segments_deleted > 0 {
                self.epochs_follow_log_start(&w)?;
            }
        }
        if let Some(ms) = config.retention_ms {
            self.remove_expired_cut_files(now_ms.saturating_sub(ms as i64))?;
        }
        if config.cleanup_policy.compacts() {
            let c = self.compact(now_ms)?;
            out.segments_compacted = c.segments_compacted;
            out.records_removed = c.records_removed;
        }
        Ok(out)
    }

    /// Deletes the files of bytes recovery cut (`<base>.log.cut-<ms>`) made before
    /// `cutoff_ms`.
    fn remove_expired_cut_files(&self, cutoff_ms: i64) -> Result<()> {
        let mut files = self.inner.cut_files.lock();
        if files.iter().all(|(_, ms)| *ms >= cutoff_ms) {
            return Ok(());
        }
        let mut failed = None;
        files.retain(|(path, ms)| {
            if *ms >= cutoff_ms || failed.is_some() {
                return true;
            }
            match fs::remove_file(path) {
                Ok(()) => false,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
                Err(e) => {
                    failed = Some(Error::io("delete the cut file", path, e));
                    true
                }
            }
        });
        drop(files);
        checkpoint::sync_dir(&self.inner.dir)?;
        failed.map_or(Ok(()), Err)
    }

    /// Files beside the segments holding bytes recovery cut, oldest first.
    pub fn cut_files(&self) -> Vec<PathBuf> {
        let mut files = self.inner.cut_files.lock().clone();
        files.sort_by_key(|(_, ms)| *ms);
        files.into_iter().map(|(p, _)| p).collect()
    }

    /// Compacts the sealed segments wholly below the last stable offset: keeps the
    /// latest record of each key (over the whole log up to the last stable offset, the
    /// records of aborted transactions left out), records without a key, and
    /// tombstones younger than `delete_retention_ms`; drops the data of aborted
    /// transactions, and markers older than `delete_retention_ms` once no data of
    /// their transaction is left before them (Kafka's cleaner). The `.txnindex`
    /// entries of aborted transactions whose data is gone go with it. Offsets and
    /// leader epochs never change. Sealed segments are immutable, so the copies are
    /// written without blocking appends; only the swap takes the lock.
    pub fn compact(&self, now_ms: i64) -> Result<CleanupOutcome> {
        if self.inner.read_only {
            return Err(Error::ReadOnly(self.inner.dir.clone()));
        }
        let mut out = CleanupOutcome::default();
        let config = self.config();
        let segs = self.segments();
        if segs.len() < 2 || self.is_closed() {
            return Ok(out);
        }
        let stable = self.last_stable_offset()?;
        let aborted = self.aborted_transactions(0, stable)?;
        let limit = crate::record::decompression_limit(config.max_message_bytes);
        let cutoff = now_ms.saturating_sub(config.delete_retention_ms as i64);
        let Compaction {
            rewritten,
            records_removed,
            gone,
        } = compaction_rewrites(&segs, (stable, &aborted), cutoff, (&self.inner.name, limit))?;
        out.records_removed += records_removed;
        if rewritten.is_empty() {
            return Ok(out);
        }
        let _w = self.inner.writer.lock();
        let mut list: Vec<Arc<Segment>> = self.segments().iter().cloned().collect();
        for (old, bytes) in rewritten {
            // Retention or truncation may have removed it meanwhile.
            let Some(i) = list.iter().position(|s| Arc::ptr_eq(s, &old)) else {
                continue;
            };
            if i + 1 == list.len() {
                continue;
            }
            match scan::replace_with(
                &self.inner.dir,
                &old,
                &bytes,
                i == 0,
                (&config, &self.inner.files),
            )? {
                Some(new) => list[i] = new,
                None => {
                    list.remove(i);
                }
            }
            out.segments_compacted += 1;
        }
        *self.inner.segments.write() = Arc::new(list);
        self.forget_aborted(&segs, &gone)?;
        checkpoint::sync_dir(&self.inner.dir)?;
        Ok(out)
    }

    /// Removes the aborted transactions `gone` (their data compacted away) from the
    /// `.txnindex` of the segment of their marker (`segs`: the segments before the
    /// compaction) and from what readers see. The caller holds the writer lock.
    fn forget_aborted(&self, segs: &[Arc<Segment>], gone: &[AbortedTxn]) -> Result<()> {
        if gone.is_empty() {
            return Ok(());
        }
        let mut bases: Vec<i64> = gone
            .iter()
            .filter_map(|a| {
                let i = segs.partition_point(|s| s.base_offset <= a.last_offset);
                i.checked_sub(1).map(|i| segs[i].base_offset)
            })
            .collect();
        bases.dedup();
        for base in bases {
            let entries = txn_index::read(&self.inner.dir, base)?;
            let kept: Vec<AbortedTxn> = entries
                .iter()
                .filter(|e| !gone.contains(e))
                .copied()
                .collect();
            if kept.len() != entries.len() {
                txn_index::rewrite(&self.inner.dir, base, &kept)?;
            }
        }
        self.inner.txns.lock().aborted.retain(|e| !gone.contains(e));
        Ok(())
    }
}
