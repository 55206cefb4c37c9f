//! [`PartitionLog`]: one partition's ordered segments.
//!
//! Invariants this module keeps:
//!
//! 1. One writer: every mutation (append, roll, truncate, retention, compaction) holds
//!    the `writer` mutex. Readers take no lock but a brief read lock to clone the
//!    current segment list (`Arc<Vec<Arc<Segment>>>`).
//! 2. Offsets are dense and strictly increasing; a batch never spans two segments.
//! 3. The log end offset and high watermark are published (Release) after the bytes
//!    they cover; readers load them with Acquire and never read past the high watermark.
//! 4. After a failed fsync the log is poisoned and refuses writes until reopened.
//! 5. Files are created then the directory fsynced; deleted files leave readers' maps
//!    valid (the maps hold the inode).

use super::checkpoint;
use super::clock::CoarseClock;
use super::config::LogConfig;
use super::prefault::Prefaulter;
use super::retention::{SegmentSummary, compact_batch, latest_offsets, segments_to_delete};
use super::segment::{
    self, Segment, SegmentScan, SegmentWriter, Trust, file_name, parse_base_offset, scan_segment,
};
use crate::error::IoContext;
use crate::record::{Batch, BatchBuilder, batches};
use crate::{Error, Result};
use parking_lot::{Condvar, Mutex, RwLock};
use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// What one retention or compaction pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CleanupOutcome {
    /// Segments deleted by time or size retention.
    pub segments_deleted: usize,
    /// Segments rewritten (or removed, when nothing was left) by compaction.
    pub segments_compacted: usize,
    /// Records compaction removed.
    pub records_removed: u64,
}

/// Name of the per-partition checkpoint file (recovery point and log start offset).
pub const CHECKPOINT_FILE: &str = "partition.checkpoint";

/// Milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Where a successful append landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendInfo {
    /// Offset of the first record appended.
    pub base_offset: i64,
    /// Offset of the last record appended.
    pub last_offset: i64,
    /// The broker timestamp stamped on the batches, for LogAppendTime logs.
    pub log_append_time: Option<i64>,
    /// Largest record timestamp among the appended batches.
    pub max_timestamp: i64,
    /// Number of records appended.
    pub record_count: i64,
}

/// What opening a log found and repaired.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Segments below the recovery point, opened without validating their batches.
    pub segments_trusted: usize,
    /// Segments at or past the recovery point, whose every batch was validated.
    pub segments_validated: usize,
    /// Bytes of batches validated (CRC checked).
    pub bytes_validated: u64,
    /// Where the log was cut: (file, byte position, why).
    pub truncated: Vec<(PathBuf, u64, String)>,
    /// Index files that were missing or damaged and were rebuilt.
    pub indexes_rebuilt: Vec<PathBuf>,
    /// Segments deleted because they followed a cut.
    pub segments_removed: Vec<PathBuf>,
    /// The checkpoint file was damaged and ignored (the whole log was validated).
    pub checkpoint_damaged: bool,
}

impl RecoveryReport {
    /// True if recovery changed nothing on disk.
    pub fn is_clean(&self) -> bool {
        self.truncated.is_empty()
            && self.indexes_rebuilt.is_empty()
            && self.segments_removed.is_empty()
            && !self.checkpoint_damaged
    }
}

/// A zero-copy view of whole batches read from a log.
///
/// It keeps its segment's map alive, so it stays valid when the segment is rolled,
/// deleted by retention, or the log is closed.
pub struct LogSlice {
    seg: Option<Arc<Segment>>,
    start: usize,
    end: usize,
    base_offset: i64,
    next_offset: i64,
}

impl std::fmt::Debug for LogSlice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogSlice")
            .field("base_offset", &self.base_offset)
            .field("next_offset", &self.next_offset)
            .field("bytes", &self.len())
            .finish()
    }
}

impl LogSlice {
    /// The segment file the bytes live in (for `sendfile`), `None` for an empty slice
    /// of an empty log.
    pub fn file(&self) -> Option<&fs::File> {
        self.seg.as_ref().map(|s| &s.file)
    }
    /// Path of the segment file.
    pub fn path(&self) -> Option<&Path> {
        self.seg.as_ref().map(|s| s.log_path.as_path())
    }
    /// Byte position of the first byte inside [`LogSlice::file`].
    pub fn file_position(&self) -> u64 {
        self.start as u64
    }
    /// Base offset of the first batch (the requested offset when empty).
    pub fn base_offset(&self) -> i64 {
        self.base_offset
    }
    /// Offset to read next: one past the last record of the slice (the requested offset
    /// when empty).
    pub fn next_offset(&self) -> i64 {
        self.next_offset
    }
    /// Iterates the batches in the slice.
    pub fn batches(&self) -> impl Iterator<Item = Batch<'_>> {
        // The bytes were validated on append or recovery; headers only.
        let bytes: &[u8] = self;
        let mut pos = 0;
        std::iter::from_fn(move || {
            let b = Batch::parse_header_at(&bytes[pos..], "", 0).ok()?;
            pos += b.len();
            Some(b)
        })
    }
}

impl std::ops::Deref for LogSlice {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match &self.seg {
            Some(s) => s.bytes(self.start, self.end).unwrap_or(&[]),
            None => &[],
        }
    }
}

impl AsRef<[u8]> for LogSlice {
    fn as_ref(&self) -> &[u8] {
        self
    }
}

struct WriterState {
    active: Option<SegmentWriter>,
    /// The settings appends follow: the writer's own reference, so that an append
    /// takes no lock but the writer's to read them (`set_config` updates both).
    config: Arc<LogConfig>,
    unflushed_records: u64,
    /// When the oldest unflushed record was appended (None when all is flushed).
    unflushed_since: Option<Instant>,
    /// Scratch buffer for LogAppendTime restamping.
    scratch: Vec<u8>,
}

struct Inner {
    name: String,
    dir: PathBuf,
    /// Shared so that an append takes a reference count, not a copy.
    config: RwLock<Arc<LogConfig>>,
    /// The manager's maintenance clock, read by appends instead of the system clock
    /// where a tick of lag does not matter (see `clock`).
    clock: Option<CoarseClock>,
    segments: RwLock<Arc<Vec<Arc<Segment>>>>,
    writer: Mutex<WriterState>,
    /// Serializes `sync` calls (fsyncs run outside the writer lock).
    sync_lock: Mutex<()>,
    log_start: AtomicI64,
    log_end: AtomicI64,
    high_watermark: AtomicI64,
    recovery_point: AtomicI64,
    closed: AtomicBool,
    /// Set (with `poison_reason`) when an fsync failed; checked on every append.
    poisoned: AtomicBool,
    poison_reason: Mutex<Option<String>>,
    waiters: AtomicUsize,
    /// Faults in the active segment's next pages off the appending thread.
    prefault: Option<Prefaulter>,
    wait_lock: Mutex<()>,
    wait_cv: Condvar,
    report: RecoveryReport,
    /// The checkpoint's contents as last written or read (None if unknown).
    checkpoint_on_disk: Mutex<Option<[u8; 16]>>,
}

/// One partition's log on disk: append, read, roll, truncate, recover, retain.
///
/// Cheap to clone (an `Arc` inside); `Send + Sync`. One writer at a time (appends are
/// serialized by a mutex), any number of concurrent readers.
///
/// ```
/// use tidelog::storage::PartitionLog;
/// use tidelog::{BatchBuilder, LogConfig};
///
/// let dir = tempfile::tempdir()?;
/// let log = PartitionLog::open(dir.path().join("events-0"), "events-0", LogConfig::default())?;
/// let mut b = BatchBuilder::new();
/// b.push(1_000, None, Some(b"hello"), &[]);
/// let info = log.append(&b.finish())?;
/// assert_eq!(info.base_offset, 0);
/// let slice = log.read(0, 1 << 20)?;
/// let batch = slice.batches().next().unwrap();
/// assert_eq!(batch.records().next().unwrap()?.value, Some(&b"hello"[..]));
/// log.close()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct PartitionLog {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for PartitionLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PartitionLog")
            .field("name", &self.inner.name)
            .field("log_start_offset", &self.log_start_offset())
            .field("log_end_offset", &self.log_end_offset())
            .finish()
    }
}

fn encode_checkpoint(recovery_point: i64, log_start: i64) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&recovery_point.to_be_bytes());
    b[8..].copy_from_slice(&log_start.to_be_bytes());
    b
}

impl PartitionLog {
    /// Opens (creating if needed) the log in `dir`, recovering it: segments below the
    /// recovery point are trusted, later ones validated batch by batch and cut at the
    /// first torn or corrupt batch. `name` (e.g. `events-0`) names the log in errors.
    pub fn open(dir: impl AsRef<Path>, name: &str, config: LogConfig) -> Result<PartitionLog> {
        Self::open_with(dir.as_ref(), name, config, None, None)
    }

    /// [`PartitionLog::open`] with the prefault thread of a [`super::LogManager`].
    pub(crate) fn open_with(
        dir: &Path,
        name: &str,
        config: LogConfig,
        prefault: Option<Prefaulter>,
        clock: Option<CoarseClock>,
    ) -> Result<PartitionLog> {
        config.validate()?;
        let dir = dir.to_path_buf();
        let created = !dir.exists();
        fs::create_dir_all(&dir).ctx("create log directory", &dir)?;
        if created && let Some(parent) = dir.parent() {
            checkpoint::sync_dir(parent)?;
        }
        let mut report = RecoveryReport::default();
        let (mut recovery_point, mut log_start) = (0i64, 0i64);
        let mut checkpoint_read = None;
        match checkpoint::read(&dir.join(CHECKPOINT_FILE)) {
            Ok(Some(p)) if p.len() == 16 => {
                checkpoint_read = p.as_slice().try_into().ok();
                recovery_point = i64::from_be_bytes(p[..8].try_into().expect("8 bytes"));
                log_start = i64::from_be_bytes(p[8..].try_into().expect("8 bytes"));
            }
            Ok(None) => {}
            Ok(Some(_)) | Err(_) => report.checkpoint_damaged = true,
        }

        // Segment base offsets, and leftovers to clean up.
        let mut bases = Vec::new();
        for entry in fs::read_dir(&dir).ctx("list log directory", &dir)? {
            let entry = entry.ctx("list log directory", &dir)?;
            let fname = entry.file_name();
            let fname = fname.to_string_lossy();
            if let Some(b) = parse_base_offset(&fname, "log") {
                bases.push(b);
            } else if fname.ends_with(".cleaned") || fname.ends_with(".tmp") {
                // An interrupted compaction or checkpoint: the originals are intact.
                let p = entry.path();
                fs::remove_file(&p).ctx("remove leftover", &p)?;
            }
        }
        bases.sort_unstable();
        // Index files without a log are orphans.
        for entry in fs::read_dir(&dir).ctx("list log directory", &dir)? {
            let entry = entry.ctx("list log directory", &dir)?;
            let fname = entry.file_name();
            let fname = fname.to_string_lossy();
            let base = parse_base_offset(&fname, "index")
                .or_else(|| parse_base_offset(&fname, "timeindex"));
            if let Some(b) = base
                && bases.binary_search(&b).is_err()
            {
                let p = entry.path();
                fs::remove_file(&p).ctx("remove orphan index", &p)?;
            }
        }

        let interval = config.index_interval_bytes as usize;
        let index_max = config.index_max_bytes as usize;
        let mut scans: Vec<(i64, SegmentScan)> = Vec::with_capacity(bases.len());
        let mut i = 0;
        while i < bases.len() {
            let base = bases[i];
            let next_base = bases.get(i + 1).copied();
            let trust = if report.checkpoint_damaged {
                Trust::None
            } else if next_base.is_some_and(|n| n <= recovery_point) {
                Trust::Full
            } else {
                Trust::UpTo(recovery_point)
            };
            let scan = scan_segment(&dir, base, trust, interval, index_max)?;
            let log_path = dir.join(file_name(base, "log"));
            if scan.trusted {
                report.segments_trusted += 1;
            } else {
                report.segments_validated += 1;
                report.bytes_validated += scan.bytes_validated;
            }
            if scan.index_rebuilt {
                report
                    .indexes_rebuilt
                    .push(dir.join(file_name(base, "index")));
            }
            if scan.time_index_rebuilt {
                report
                    .indexes_rebuilt
                    .push(dir.join(file_name(base, "timeindex")));
            }
            let prev_end = scans.last().map(|(_, s)| s.next_offset);
            let cut = scan.truncated.clone();
            let overlaps = prev_end.is_some_and(|e| base < e);
            if overlaps {
                // A segment that starts inside the previous one cannot be trusted.
                report.truncated.push((
                    log_path.clone(),
                    0,
                    "segment overlaps the previous one".into(),
                ));
            } else {
                if let Some((pos, why)) = &cut {
                    report.truncated.push((log_path.clone(), *pos, why.clone()));
                }
                scans.push((base, scan));
            }
            if cut.is_some() || overlaps {
                // Everything after a cut is unreliable: drop the following segments.
                let from = if overlaps { i } else { i + 1 };
                for &b in &bases[from..] {
                    for ext in ["log", "index", "timeindex"] {
                        let p = dir.join(file_name(b, ext));
                        if p.exists() {
                            fs::remove_file(&p).ctx("remove segment after a cut", &p)?;
                            if ext == "log" {
                                report.segments_removed.push(p);
                            }
                        }
                    }
                }
                checkpoint::sync_dir(&dir)?;
                break;
            }
            i += 1;
        }

        // Empty sealed segments in the middle are fine; open all but the last read-only.
        let mut segments = Vec::with_capacity(scans.len() + 1);
        let last = scans.pop();
        for (base, scan) in &scans {
            segments.push(Segment::open_sealed(&dir, *base, scan)?);
        }
        let mut active = match last {
            Some((base, scan)) => {
                let path = dir.join(file_name(base, "log"));
                let file = fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(&path)
                    .ctx("open segment", &path)?;
                Segment::open_active(
                    &dir,
                    base,
                    file,
                    &scan,
                    config.segment_bytes as usize,
                    index_max,
                    interval,
                    false,
                )?
            }
            None => {
                let w = Segment::create(
                    &dir,
                    log_start,
                    config.segment_bytes as usize,
                    index_max,
                    interval,
                )?;
                checkpoint::sync_dir(&dir)?;
                w
            }
        };
        active.set_prefaulter(prefault.clone());
        segments.push(active.shared().clone());
        let log_end = active.shared().next_offset();
        let first_base = segments[0].base_offset;
        let log_start = log_start.clamp(first_base, log_end);
        let recovery_point = if report.checkpoint_damaged {
            0
        } else {
            recovery_point.min(log_end)
        };

        let config = Arc::new(config);
        let inner = Arc::new(Inner {
            name: name.to_string(),
            dir,
            config: RwLock::new(Arc::clone(&config)),
            clock,
            segments: RwLock::new(Arc::new(segments)),
            writer: Mutex::new(WriterState {
                active: Some(active),
                config,
                unflushed_records: 0,
                unflushed_since: None,
                scratch: Vec::new(),
            }),
            sync_lock: Mutex::new(()),
            log_start: AtomicI64::new(log_start),
            log_end: AtomicI64::new(log_end),
            high_watermark: AtomicI64::new(log_end),
            recovery_point: AtomicI64::new(recovery_point),
            closed: AtomicBool::new(false),
            poisoned: AtomicBool::new(false),
            poison_reason: Mutex::new(None),
            waiters: AtomicUsize::new(0),
            prefault,
            wait_lock: Mutex::new(()),
            wait_cv: Condvar::new(),
            report,
            checkpoint_on_disk: Mutex::new(checkpoint_read),
        });
        let log = PartitionLog { inner };
        if !log.inner.report.is_clean() {
            // Make the repair durable before anything is appended on top of it.
            log.sync()?;
        }
        Ok(log)
    }

    /// The log's name, e.g. `events-0`.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The log's directory.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// What recovery found and repaired when this log was opened.
    pub fn recovery_report(&self) -> &RecoveryReport {
        &self.inner.report
    }

    /// The current settings.
    pub fn config(&self) -> LogConfig {
        LogConfig::clone(&self.inner.config.read())
    }

    /// Replaces the settings (they apply from the next append or retention pass).
    pub fn set_config(&self, config: LogConfig) -> Result<()> {
        config.validate()?;
        let config = Arc::new(config);
        *self.inner.config.write() = Arc::clone(&config);
        self.inner.writer.lock().config = config;
        Ok(())
    }

    /// First offset that can be read.
    #[inline]
    pub fn log_start_offset(&self) -> i64 {
        self.inner.log_start.load(Ordering::Acquire)
    }

    /// Offset the next appended record will get.
    #[inline]
    pub fn log_end_offset(&self) -> i64 {
        self.inner.log_end.load(Ordering::Acquire)
    }

    /// Offset up to which readers may read (exclusive). Equal to the log end offset
    /// until replication holds it back.
    #[inline]
    pub fn high_watermark(&self) -> i64 {
        self.inner.high_watermark.load(Ordering::Acquire)
    }

    /// Offset up to which the log is known to be on disk (exclusive).
    pub fn recovery_point(&self) -> i64 {
        self.inner.recovery_point.load(Ordering::Acquire)
    }

    /// Bytes of data in all segments.
    pub fn size_bytes(&self) -> u64 {
        self.segments().iter().map(|s| s.size() as u64).sum()
    }

    /// Number of segments.
    pub fn segment_count(&self) -> usize {
        self.segments().len()
    }

    /// Base offsets of the segments, oldest first.
    pub fn segment_base_offsets(&self) -> Vec<i64> {
        self.segments().iter().map(|s| s.base_offset).collect()
    }

    /// True once [`PartitionLog::close`] ran.
    pub fn is_closed(&self) -> bool {
        self.inner.closed.load(Ordering::Acquire)
    }

    pub(crate) fn segments(&self) -> Arc<Vec<Arc<Segment>>> {
        self.inner.segments.read().clone()
    }

    fn closed_err(&self) -> Error {
        Error::Closed(format!("partition log {}", self.inner.name))
    }

    fn check_writable(&self) -> Result<()> {
        if self.is_closed() {
            return Err(self.closed_err());
        }
        if self.inner.poisoned.load(Ordering::Acquire) {
            return Err(Error::Poisoned {
                partition: self.inner.name.clone(),
                reason: self.inner.poison_reason.lock().clone().unwrap_or_default(),
            });
        }
        Ok(())
    }

    fn poison(&self, e: &Error) {
        let mut p = self.inner.poison_reason.lock();
        if p.is_none() {
            *p = Some(e.to_string());
        }
        self.inner.poisoned.store(true, Ordering::Release);
    }

    /// Appends one or more batches laid back to back. Each is validated (length, magic,
    /// CRC, size limit) before anything is written; offsets are assigned by stamping
    /// each batch's baseOffset in place. Returns where they landed.
    pub fn append(&self, batches_bytes: &[u8]) -> Result<AppendInfo> {
        let mut parsed: smallvec_like::Batches<'_> = smallvec_like::Batches::new();
        for b in batches(batches_bytes) {
            parsed.push(b?);
        }
        self.append_parsed(parsed)
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
        builder.finish_with(|bytes| {
            let mut parsed: smallvec_like::Batches<'_> = smallvec_like::Batches::new();
            parsed.push(Batch::parse_header_at(bytes, &self.inner.name, 0)?);
            self.append_parsed(parsed)
        })
    }

    /// Checks parsed batches against the log's limits and appends them.
    fn append_parsed(&self, parsed: smallvec_like::Batches<'_>) -> Result<AppendInfo> {
        let mut w = self.inner.writer.lock();
        let config = Arc::clone(&w.config);
        let max = config.max_message_bytes as usize;
        // Validate everything first: an append is all or nothing.
        for b in parsed.iter() {
            if b.len() > max {
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
        self.check_writable()?;
        // LogAppendTime is written down: the system clock. The segment age check takes
        // the maintenance clock where a tick of lag does not matter.
        let now = match &self.inner.clock {
            Some(c) if !config.log_append_time => c.now_within(config.segment_ms),
            _ => None,
        }
        .unwrap_or_else(now_ms);
        let base_offset = self.inner.log_end.load(Ordering::Relaxed);
        let mut next = base_offset;
        let mut max_ts = -1;
        let mut count = 0i64;
        let log_append_time = config.log_append_time.then_some(now);
        for b in parsed.iter() {
            self.maybe_roll(&mut w, b.len(), next, b.last_offset_delta(), &config, now)?;
            let active = w.active.as_mut().ok_or_else(|| self.closed_err())?;
            let res = if let Some(t) = log_append_time {
                let mut scratch = std::mem::take(&mut w.scratch);
                scratch.clear();
                scratch.extend_from_slice(b.as_bytes());
                crate::record::set_log_append_time(&mut scratch, t);
                let restamped = Batch::parse_header_at(&scratch, "", 0)?;
                let r = w
                    .active
                    .as_mut()
                    .ok_or_else(|| self.closed_err())?
                    .append(&restamped, next, now);
                w.scratch = scratch;
                r
            } else {
                active.append(b, next, now)
            };
            if let Err(e) = res {
                // Nothing of this batch was published; earlier batches of this call were.
                self.publish(next);
                return Err(e);
            }
            next += b.last_offset_delta() as i64 + 1;
            count += b.record_count() as i64;
            max_ts = max_ts.max(log_append_time.unwrap_or(b.max_timestamp()));
        }
        self.publish(next);
        w.unflushed_records += count as u64;
        if w.unflushed_since.is_none() {
            w.unflushed_since = Some(Instant::now());
        }
        let flush_now = config
            .flush_messages
            .is_some_and(|n| w.unflushed_records >= n);
        drop(w);
        if flush_now {
            self.sync()?;
        }
        Ok(AppendInfo {
            base_offset,
            last_offset: next - 1,
            log_append_time,
            max_timestamp: max_ts,
            record_count: count,
        })
    }

    /// Publishes a new log end offset (and high watermark) and wakes waiters.
    fn publish(&self, end: i64) {
        self.inner.log_end.store(end, Ordering::Release);
        self.inner.high_watermark.store(end, Ordering::SeqCst);
        if self.inner.waiters.load(Ordering::SeqCst) > 0 {
            let _g = self.inner.wait_lock.lock();
            self.inner.wait_cv.notify_all();
        }
    }

    fn maybe_roll(
        &self,
        w: &mut WriterState,
        len: usize,
        next_offset: i64,
        last_delta: i32,
        config: &LogConfig,
        now: i64,
    ) -> Result<()> {
        let Some(active) = w.active.as_ref() else {
            return Err(self.closed_err());
        };
        let seg_base = active.shared().base_offset;
        let empty = active.position() == 0;
        let too_big = !active.fits(len, config.segment_bytes as usize);
        let too_old = !empty
            && active
                .first_append_ms
                .is_some_and(|t| now.saturating_sub(t) >= config.segment_ms as i64);
        let offsets_overflow = next_offset + last_delta as i64 - seg_base > u32::MAX as i64;
        let index_full = active.index_full();
        if !empty && (too_big || too_old || offsets_overflow || index_full) {
            self.roll_locked(w, next_offset, config)?;
        } else if empty && too_big {
            return Err(Error::MessageTooLarge {
                partition: self.inner.name.clone(),
                size: len,
                max: config.segment_bytes as usize,
            });
        }
        Ok(())
    }

    fn roll_locked(&self, w: &mut WriterState, next_offset: i64, config: &LogConfig) -> Result<()> {
        let old = w.active.take().ok_or_else(|| self.closed_err())?;
        let sealed = match old.seal() {
            Ok(s) => s,
            Err(e) => {
                self.poison(&e);
                return Err(e);
            }
        };
        let mut new = Segment::create(
            &self.inner.dir,
            next_offset,
            config.segment_bytes as usize,
            config.index_max_bytes as usize,
            config.index_interval_bytes as usize,
        )?;
        new.set_prefaulter(self.inner.prefault.clone());
        checkpoint::sync_dir(&self.inner.dir)?;
        let mut segs = self.inner.segments.write();
        let mut list: Vec<Arc<Segment>> = segs.iter().cloned().collect();
        if let Some(last) = list.last_mut() {
            *last = sealed;
        }
        list.push(new.shared().clone());
        *segs = Arc::new(list);
        drop(segs);
        w.active = Some(new);
        Ok(())
    }

    /// Seals the active segment and starts a new one (if the active one has data).
    pub fn roll(&self) -> Result<()> {
        self.check_writable()?;
        let config = self.config();
        let mut w = self.inner.writer.lock();
        let empty = w.active.as_ref().is_none_or(|a| a.position() == 0);
        if empty {
            return Ok(());
        }
        let next = self.log_end_offset();
        self.roll_locked(&mut w, next, &config)
    }

    /// Reads whole batches starting with the one that contains `offset`, up to
    /// `max_bytes` (at least one batch, even a larger one). Reading at the high
    /// watermark gives an empty slice; outside `[log start, high watermark]` is
    /// [`Error::OffsetOutOfRange`].
    pub fn read(&self, offset: i64, max_bytes: usize) -> Result<LogSlice> {
        let hw = self.high_watermark();
        let start = self.log_start_offset();
        if offset < start || offset > hw {
            return Err(Error::OffsetOutOfRange {
                partition: self.inner.name.clone(),
                offset,
                start,
                end: hw,
            });
        }
        let segs = self.segments();
        let empty = |seg: Option<&Arc<Segment>>| LogSlice {
            start: seg.map_or(0, |s| s.size()),
            end: seg.map_or(0, |s| s.size()),
            seg: seg.cloned(),
            base_offset: offset,
            next_offset: offset,
        };
        if offset == hw {
            return Ok(empty(segs.last()));
        }
        let first = segs
            .partition_point(|s| s.base_offset <= offset)
            .saturating_sub(1);
        for seg in &segs[first..] {
            let mut heads = seg.heads();
            let Some(pos) = seg.find(offset, &mut heads) else {
                continue;
            };
            let mut end = pos;
            let mut next_offset = offset;
            let mut base = None;
            let limit = seg.size();
            while end < limit && (base.is_none() || end - pos < max_bytes) {
                // Past the first batch, the reader is about to touch these bytes
                // anyway: walk them through the map (one fault per 64 KiB) rather than
                // a system call per header.
                let b = match base {
                    None => heads.at(end),
                    Some(_) => seg.head_at(end),
                };
                let Some(b) = b else { break };
                if b.base_offset >= hw || (base.is_some() && end - pos + b.len > max_bytes) {
                    break;
                }
                base.get_or_insert(b.base_offset);
                next_offset = b.last_offset + 1;
                end += b.len;
            }
            if let Some(base_offset) = base {
                if let Some(p) = &self.inner.prefault {
                    seg.read_ahead(pos, end, p);
                }
                return Ok(LogSlice {
                    seg: Some(seg.clone()),
                    start: pos,
                    end,
                    base_offset,
                    next_offset,
                });
            }
        }
        Ok(empty(segs.last()))
    }

    /// Blocks until the high watermark passes `offset` (a record at `offset` can be
    /// read), the timeout expires, or the log is closed. Returns true if data is there.
    /// Spins briefly before sleeping on a condition variable: a reader that keeps up
    /// with the writer is woken in microseconds, an idle one costs no CPU.
    pub fn wait_for(&self, offset: i64, timeout: Duration) -> bool {
        let ready = || self.inner.high_watermark.load(Ordering::SeqCst) > offset;
        if ready() {
            return true;
        }
        let deadline = Instant::now() + timeout;
        let spin_until = Instant::now() + timeout.min(Duration::from_micros(50));
        let mut spins = 0u32;
        while Instant::now() < spin_until {
            for _ in 0..64 {
                std::hint::spin_loop();
            }
            if ready() {
                return true;
            }
            spins += 1;
            if spins.is_multiple_of(16) {
                std::thread::yield_now();
            }
        }
        let mut g = self.inner.wait_lock.lock();
        self.inner.waiters.fetch_add(1, Ordering::SeqCst);
        let result = loop {
            if ready() {
                break true;
            }
            if self.is_closed() {
                break false;
            }
            if self.inner.wait_cv.wait_until(&mut g, deadline).timed_out() {
                break ready();
            }
        };
        self.inner.waiters.fetch_sub(1, Ordering::SeqCst);
        result
    }

    /// Wakes every thread blocked in [`PartitionLog::wait_for`] (they re-check and go
    /// back to sleep unless data arrived or the log closed).
    pub fn wake_all(&self) {
        let _g = self.inner.wait_lock.lock();
        self.inner.wait_cv.notify_all();
    }

    /// The first record whose timestamp is >= `timestamp`: `(offset, timestamp)`, or
    /// `None` if every record is older. Searches segments by their largest timestamp,
    /// then the time index, then batch headers, then the records of one batch.
    pub fn offset_for_timestamp(&self, timestamp: i64) -> Result<Option<(i64, i64)>> {
        let hw = self.high_watermark();
        let start = self.log_start_offset();
        for seg in self.segments().iter() {
            if seg.max_timestamp() < timestamp || seg.next_offset() <= start {
                continue;
            }
            let Some(mut pos) = seg.find_time(timestamp) else {
                continue;
            };
            while let Some(b) = seg.batch_at(pos) {
                if b.base_offset() >= hw {
                    break;
                }
                if b.max_timestamp() >= timestamp && b.last_offset() >= start {
                    if b.compression() != 0 || b.timestamp_type_log_append() {
                        return Ok(Some((b.base_offset().max(start), b.max_timestamp())));
                    }
                    for r in b.records() {
                        let r = r?;
                        if r.timestamp >= timestamp && r.offset >= start {
                            return Ok(Some((r.offset, r.timestamp)));
                        }
                    }
                }
                pos += b.len();
            }
        }
        Ok(None)
    }

    /// Fsyncs every segment holding data past the recovery point, then checkpoints the
    /// new recovery point. A failed fsync poisons the log.
    pub fn sync(&self) -> Result<()> {
        let _s = self.inner.sync_lock.lock();
        let end = self.log_end_offset();
        let rp = self.recovery_point();
        let result = (|| {
            if end > rp {
                for seg in self.segments().iter().filter(|s| s.next_offset() > rp) {
                    seg.sync()?;
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
        self.write_checkpoint()
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
            return Ok(());
        }
        let result = sealed
            .iter()
            .filter(|s| s.next_offset() > rp)
            .try_for_each(|s| s.sync());
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
    fn write_checkpoint(&self) -> Result<()> {
        let mut on_disk = self.inner.checkpoint_on_disk.lock();
        let payload = encode_checkpoint(self.recovery_point(), self.log_start_offset());
        if *on_disk == Some(payload) {
            return Ok(());
        }
        checkpoint::write(&self.inner.dir.join(CHECKPOINT_FILE), &payload)?;
        *on_disk = Some(payload);
        Ok(())
    }

    /// Removes every record at or after `offset` and returns the new log end offset.
    /// As in Kafka, the cut falls on a batch boundary: a batch containing `offset` is
    /// removed whole, so the new end may be below `offset`.
    pub fn truncate_to(&self, offset: i64) -> Result<i64> {
        self.check_writable()?;
        let start = self.log_start_offset();
        if offset < start {
            return Err(Error::OffsetOutOfRange {
                partition: self.inner.name.clone(),
                offset,
                start,
                end: self.log_end_offset(),
            });
        }
        let config = self.config();
        let mut w = self.inner.writer.lock();
        let end = self.log_end_offset();
        if offset >= end {
            return Ok(end);
        }
        let segs = self.segments();
        let idx = segs
            .partition_point(|s| s.base_offset <= offset)
            .saturating_sub(1);
        let target = segs[idx].clone();
        // Drop the active writer (without shrinking: readers may hold the bytes).
        if let Some(mut active) = w.active.take() {
            active.keep_file_length();
            active.seal()?;
        }
        for s in &segs[idx + 1..] {
            for ext in ["log", "index", "timeindex"] {
                let p = self.inner.dir.join(file_name(s.base_offset, ext));
                fs::remove_file(&p).ctx("remove truncated segment", &p)?;
            }
        }
        let cut = target
            .find(offset, &mut target.heads())
            .unwrap_or(target.size());
        // Rebuild the target's state from its bytes below the cut.
        let scan = segment::scan_prefix(&self.inner.dir, target.base_offset, cut, &config)?;
        let file = fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&target.log_path)
            .ctx("open segment", &target.log_path)?;
        let mut active = Segment::open_active(
            &self.inner.dir,
            target.base_offset,
            file,
            &scan,
            config.segment_bytes as usize,
            config.index_max_bytes as usize,
            config.index_interval_bytes as usize,
            true,
        )?;
        active.erase_tail()?;
        active.set_prefaulter(self.inner.prefault.clone());
        let new_end = scan.next_offset;
        let mut list: Vec<Arc<Segment>> = segs[..idx].to_vec();
        list.push(active.shared().clone());
        *self.inner.segments.write() = Arc::new(list);
        w.active = Some(active);
        // Cutting the batch that holds the log start offset (after a
        // delete_records_before inside it) leaves no record at or after it: the start
        // comes down to the new end so that start <= end still holds.
        self.inner.log_start.fetch_min(new_end, Ordering::AcqRel);
        self.inner.log_end.store(new_end, Ordering::Release);
        self.inner.high_watermark.store(new_end, Ordering::SeqCst);
        drop(w);
        checkpoint::sync_dir(&self.inner.dir)?;
        let _s = self.inner.sync_lock.lock();
        self.segments().last().map(|s| s.sync()).transpose()?;
        self.inner
            .recovery_point
            .fetch_min(new_end, Ordering::AcqRel);
        self.write_checkpoint()?;
        Ok(new_end)
    }

    /// Advances the log start offset to `offset` (Kafka's DeleteRecords), deleting the
    /// segments that lie wholly below it. Returns the new log start offset.
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
        let _w = self.inner.writer.lock();
        let new_start = self.log_start_offset().max(offset);
        self.inner.log_start.store(new_start, Ordering::Release);
        let segs = self.segments();
        let n = segs[..segs.len() - 1]
            .iter()
            .take_while(|s| s.next_offset() <= new_start)
            .count();
        self.remove_oldest_locked(n)?;
        drop(_w);
        self.write_checkpoint()?;
        Ok(new_start)
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
            for ext in ["log", "index", "timeindex"] {
                let p = self.inner.dir.join(file_name(s.base_offset, ext));
                match fs::remove_file(&p) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(Error::io("delete segment", p, e)),
                }
            }
        }
        checkpoint::sync_dir(&self.inner.dir)?;
        Ok(n)
    }

    /// One retention pass at time `now_ms`: deletes old segments (policy `delete`) and
    /// compacts (policy `compact`). The maintenance thread calls this; tests and tools
    /// may call it directly.
    pub fn apply_retention(&self, now_ms: i64) -> Result<CleanupOutcome> {
        let mut out = CleanupOutcome::default();
        if self.is_closed() {
            return Ok(out);
        }
        let config = self.config();
        if config.cleanup_policy.deletes() {
            let _w = self.inner.writer.lock();
            let sums: Vec<SegmentSummary> = self
                .segments()
                .iter()
                .map(|s| SegmentSummary {
                    size: s.size() as u64,
                    max_timestamp: s.max_timestamp(),
                })
                .collect();
            let n = segments_to_delete(&sums, &config, now_ms);
            out.segments_deleted = self.remove_oldest_locked(n)?;
        }
        if config.cleanup_policy.compacts() {
            let c = self.compact(now_ms)?;
            out.segments_compacted = c.segments_compacted;
            out.records_removed = c.records_removed;
        }
        Ok(out)
    }

    /// Compacts the sealed segments: keeps the latest record of each key (over the whole
    /// log up to the high watermark), records without a key, and tombstones younger than
    /// `delete_retention_ms`. Offsets never change. Sealed segments are immutable, so
    /// the copies are written without blocking appends; only the swap takes the lock.
    pub fn compact(&self, now_ms: i64) -> Result<CleanupOutcome> {
        let mut out = CleanupOutcome::default();
        let config = self.config();
        let segs = self.segments();
        if segs.len() < 2 || self.is_closed() {
            return Ok(out);
        }
        let hw = self.high_watermark();
        let limit = crate::record::decompression_limit(config.max_message_bytes);
        let mut latest = HashMap::new();
        for seg in segs.iter() {
            latest_offsets(seg.batches(), hw, limit, &mut latest);
        }
        let cutoff = now_ms.saturating_sub(config.delete_retention_ms as i64);
        let mut rewritten: Vec<(Arc<Segment>, Vec<u8>)> = Vec::new();
        for seg in &segs[..segs.len() - 1] {
            let mut bytes = Vec::with_capacity(seg.size());
            let mut changed = false;
            for b in seg.batches() {
                changed |=
                    compact_batch(&b, &latest, cutoff, (&self.inner.name, limit), &mut bytes)?;
            }
            if changed {
                let before: i64 = seg.batches().map(|b| b.record_count() as i64).sum();
                let after: i64 = batches(&bytes)
                    .flatten()
                    .map(|b| b.record_count() as i64)
                    .sum();
                out.records_removed += (before - after).max(0) as u64;
                rewritten.push((seg.clone(), bytes));
            }
        }
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
            match segment::replace_with(&self.inner.dir, old.base_offset, &bytes, i == 0, &config)?
            {
                Some(new) => list[i] = new,
                None => {
                    list.remove(i);
                }
            }
            out.segments_compacted += 1;
        }
        *self.inner.segments.write() = Arc::new(list);
        checkpoint::sync_dir(&self.inner.dir)?;
        Ok(out)
    }

    /// Seals the active segment, fsyncs everything and writes the checkpoint; later
    /// appends fail with [`Error::Closed`]. Readers' slices stay valid. Idempotent.
    pub fn close(&self) -> Result<()> {
        let mut w = self.inner.writer.lock();
        if self.inner.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        let sealed = w.active.take().map(|a| a.seal()).transpose();
        drop(w);
        self.wake_all();
        let sealed = sealed?;
        if let Some(s) = sealed {
            let mut segs = self.inner.segments.write();
            let mut list: Vec<Arc<Segment>> = segs.iter().cloned().collect();
            if let Some(last) = list.last_mut() {
                *last = s;
            }
            *segs = Arc::new(list);
        }
        if self.inner.poisoned.load(Ordering::Acquire) {
            return Ok(());
        }
        self.sync()
    }

    /// Deletes the log's files and directory (the log must be closed or unused).
    pub(crate) fn destroy(&self) -> Result<()> {
        self.close()?;
        fs::remove_dir_all(&self.inner.dir).ctx("delete log directory", &self.inner.dir)?;
        if let Some(parent) = self.inner.dir.parent() {
            checkpoint::sync_dir(parent)?;
        }
        Ok(())
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        if !self.closed.load(Ordering::Acquire) {
            // Best effort on drop: seal (trim) the active segment. No fsync here; the
            // recovery point tells the next open what to validate.
            if let Some(a) = self.writer.get_mut().active.take() {
                let _ = a.seal();
            }
        }
    }
}

/// A tiny inline vector for the batches of one append (almost always one).
mod smallvec_like {
    use crate::record::Batch;

    pub(super) struct Batches<'a> {
        first: Option<Batch<'a>>,
        rest: Vec<Batch<'a>>,
    }

    impl<'a> Batches<'a> {
        pub(super) fn new() -> Self {
            Batches {
                first: None,
                rest: Vec::new(),
            }
        }
        pub(super) fn push(&mut self, b: Batch<'a>) {
            if self.first.is_none() {
                self.first = Some(b);
            } else {
                self.rest.push(b);
            }
        }
        pub(super) fn is_empty(&self) -> bool {
            self.first.is_none()
        }
        pub(super) fn iter(&self) -> impl Iterator<Item = &Batch<'a>> {
            self.first.iter().chain(self.rest.iter())
        }
    }
}
