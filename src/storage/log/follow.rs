//! The read-only follower side of a [`PartitionLog`] (`follow` holds how another
//! process's files are read): opening a log another process writes, and catching up
//! with that writer's appends, rolls and retention (`refresh`).

use super::{Assembly, LogEnv, PartitionLog};
use crate::error::IoContext;
use crate::error::{Error, Result};
use crate::storage::config::LogConfig;
use crate::storage::follow::{
    FollowState, LIST_EVERY, empty_scan, scan_listing, scan_read_only, walk,
};
use crate::storage::mmap::AppendMap;
use crate::storage::recovery;
use crate::storage::segment::{Segment, file_name};
use crate::storage::signal::Moved;
use crate::storage::types::RecoveryReport;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

impl PartitionLog {
    /// Opens the log in `dir` read-only: another process may be writing it. Nothing is
    /// written, locked or repaired; see the module docs for what is read and how the
    /// writer is followed.
    pub(crate) fn open_read_only(
        dir: &Path,
        name: &str,
        config: LogConfig,
        env: LogEnv,
    ) -> Result<PartitionLog> {
        config.validate()?;
        if !dir.is_dir() {
            return Err(Error::io(
                "open log directory",
                dir,
                std::io::Error::from(std::io::ErrorKind::NotFound),
            ));
        }
        // The writer may delete segments (retention, from the oldest) or replace them
        // (compaction) while they are read here: a segment file gone since the listing
        // lists the directory again, a few times at most.
        let mut attempt = 0;
        let (cp, listing, mut segments) = loop {
            let mut report = RecoveryReport::default();
            let cp = recovery::read_checkpoint(dir, &mut report);
            let listing = recovery::list_segments_read_only(dir)?;
            let rp = if report.checkpoint_damaged {
                i64::MIN
            } else {
                cp.recovery_point
            };
            match scan_listing(dir, &listing.bases, rp, &env.files) {
                Ok(segments) => break (cp, listing, segments),
                Err(Error::Io { source, .. })
                    if source.kind() == std::io::ErrorKind::NotFound && attempt < 5 =>
                {
                    attempt += 1;
                }
                Err(e) => return Err(e),
            }
        };
        if segments.is_empty() {
            let start = cp.log_start.max(0);
            segments.push(Segment::open_sealed(
                dir,
                start,
                &empty_scan(start),
                &env.files,
            ));
        }
        let log_end = segments.last().map_or(0, |s| s.next_offset());
        let log_start = cp.log_start.clamp(segments[0].base_offset, log_end);
        let recovery_point = cp.recovery_point.clamp(0, log_end);
        Ok(PartitionLog::assemble(
            Assembly {
                name,
                dir: dir.to_path_buf(),
                config,
                env,
                segments,
                active: None,
                read_only: true,
            },
            (log_start, log_end, recovery_point),
            cp.on_disk,
            listing.cut_files,
        ))
    }

    /// Catches a read-only log up with its writer: the batches appended since, a roll to
    /// a new segment, and (at most once a second, or with `list`) the segments retention
    /// deleted. Wakes the log's waiters when it moved. True if the log end moved. A log
    /// this process writes has nothing to catch up with.
    pub(crate) fn refresh(&self, list: bool) -> Result<bool> {
        if !self.inner.read_only || self.is_closed() {
            return Ok(false);
        }
        let mut st = self.inner.follow.lock();
        let mut moved = false;
        loop {
            let segs = self.segments();
            let Some(last) = segs.last().cloned() else {
                break;
            };
            moved |= self.follow_tail(&mut st, &last)?;
            let next = last.next_offset();
            let next_file = self.inner.dir.join(file_name(next, "log"));
            if next <= last.base_offset || !next_file.exists() {
                break;
            }
            // The writer rolled: it appends nothing more to `last`, whose end is read
            // once more, then the new segment is followed.
            moved |= self.follow_tail(&mut st, &last)?;
            let next = last.next_offset();
            let seg =
                Segment::open_sealed(&self.inner.dir, next, &empty_scan(next), &self.inner.files);
            let mut list = segs.as_ref().clone();
            list.push(seg);
            *self.inner.segments.write() = Arc::new(list);
            last.unpin();
            st.tail = None;
        }
        let due = st.listed.is_none_or(|t| t.elapsed() >= LIST_EVERY);
        if list || due {
            st.listed = Some(Instant::now());
            moved |= self.follow_listing()?;
        }
        drop(st);
        if moved {
            let end = self.segments().last().map_or(0, |s| s.next_offset());
            self.inner.log_end.store(end, Ordering::SeqCst);
            self.inner.high_watermark.store(end, Ordering::SeqCst);
            self.inner.watchers.notify(Moved::HighWatermark);
        }
        Ok(moved)
    }

    /// Reads the batches appended to `seg` (the last segment) after its checked end and
    /// makes them readable. True if there were any.
    fn follow_tail(&self, st: &mut FollowState, seg: &Arc<Segment>) -> Result<bool> {
        let file = match self.inner.files.fds.get(seg.id(), &seg.log_path) {
            Ok(f) => f,
            // Not made yet (an empty log), or deleted: nothing to follow.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(Error::io("open segment", &seg.log_path, e)),
        };
        let location = seg.log_path.display().to_string();
        let w = walk(
            &file,
            seg.base_offset,
            (seg.size(), seg.next_offset(), false),
            (&location, i64::MIN),
        )
        .ctx("read", &seg.log_path)?;
        if w.batches == 0 {
            return Ok(false);
        }
        let reused = match &mut st.tail {
            Some((s, f))
                if Arc::ptr_eq(s, seg)
                    && seg.has_log_map(f.map())
                    && f.map().capacity() >= w.end =>
            {
                f.publish(w.end)
            }
            _ => false,
        };
        if !reused {
            let capacity = (self.config().segment_bytes as usize).max(w.end);
            let (map, follower) = AppendMap::map_ro_following(&file, capacity, w.end)
                .ctx("map segment", &seg.log_path)?;
            seg.install_log_map(map)?;
            st.tail = Some((Arc::clone(seg), follower));
        }
        seg.follow_to(w.end, w.next, w.max_ts);
        Ok(true)
    }

    /// Lists the directory: segments whose files are gone (retention) leave the list and
    /// the log start moves to where `partition.checkpoint` says; a segment past the last
    /// one after a gap in offsets joins it. True if the log start or end moved.
    fn follow_listing(&self) -> Result<bool> {
        let listing = recovery::list_segments_read_only(&self.inner.dir)?;
        let segs = self.segments();
        let mut list: Vec<Arc<Segment>> = segs
            .iter()
            .filter(|s| listing.bases.binary_search(&s.base_offset).is_ok())
            .cloned()
            .collect();
        let last_base = segs.last().map_or(i64::MIN, |s| s.base_offset);
        let mut moved = false;
        for &base in listing.bases.iter().filter(|&&b| b > last_base) {
            if list.last().is_some_and(|s| base < s.next_offset()) {
                break;
            }
            let scan = match scan_read_only(&self.inner.dir, base, i64::MIN, (true, None)) {
                Ok(scan) => scan,
                // Deleted since it was listed: the next listing sees where the log is.
                Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
                    break;
                }
                Err(e) => return Err(e),
            };
            list.push(Segment::open_sealed(
                &self.inner.dir,
                base,
                &scan,
                &self.inner.files,
            ));
            moved = true;
        }
        if list.is_empty() {
            // Everything was deleted (the topic): keep the last, empty, as its end.
            return Ok(false);
        }
        let removed = list.len() != segs.len() || moved;
        if removed {
            *self.inner.segments.write() = Arc::new(list);
        }
        let mut report = RecoveryReport::default();
        let cp = recovery::read_checkpoint(&self.inner.dir, &mut report);
        let segs = self.segments();
        let end = segs.last().map_or(0, |s| s.next_offset());
        let start = cp
            .log_start
            .max(self.log_start_offset())
            .clamp(segs[0].base_offset, end);
        if start != self.log_start_offset() {
            self.inner.log_start.store(start, Ordering::Release);
            return Ok(true);
        }
        Ok(moved)
    }
}
