//! [`PartitionLog`]: one partition's ordered segments.
//!
//! Invariants this module keeps:
//!
//! 1. One writer: every mutation (append, roll, truncate, retention, compaction) holds
//!    the `writer` mutex. Readers take no lock but a brief read lock to clone the
//!    current segment list (`Arc<Vec<Arc<Segment>>>`).
//! 2. Offsets strictly increase and a batch never spans two segments. A leader's
//!    appends get dense offsets; a follower's (`append_replica`) keep the leader's,
//!    which may leave gaps where the leader's log has them.
//! 3. The log end offset and high watermark are published after the bytes they cover;
//!    readers load them with Acquire and never read past the bound they ask for (the
//!    high watermark for consumers, the log end for replica fetches).
//! 4. `log start <= high watermark <= log end`. A standalone log's high watermark is its
//!    log end, moved by every append. A replicated log's (`set_replicated`) moves only
//!    through `set_high_watermark`, forwards only; it goes down only when the log enters
//!    replicated mode (to the high watermark the cluster recorded) and when a
//!    truncation cuts below it.
//! 5. After a failed fsync the log is poisoned and refuses writes until reopened.
//! 6. Files are created then the directory fsynced; deleted or replaced files leave
//!    readers' maps and descriptors valid (they hold the inode): no byte a reader may
//!    hold is ever written again, by an append, a compaction or a truncation.
//! 7. Every publish (append, high-watermark move, close) notifies the log's watchers
//!    (`signal`), so every reader waiting on the log wakes, however the log moved.
//! 8. No fsync runs under the writer lock. The recovery point moves only after the
//!    fsyncs that cover it returned, to a log end read (under the sync lock) before they
//!    started; durable appends wait for it with `sync_to` (group commit: one fsync
//!    covers every append before it, see `group_commit`). The checkpoint file may lag
//!    the recovery point (written by `sync`, `flush_sealed` and truncation), never pass
//!    it: a stale one only makes recovery validate more.

use super::checkpoint;
use super::clock::{CoarseClock, now_ms};
use super::config::LogConfig;
use super::epoch::EpochCache;
use super::events::{self, DiskSpace, RateLimit};
use super::files::Files;
use super::prefault::Prefaulter;
use super::producer_state::{self, ProducerState};
use super::recovery::{self, CHECKPOINT_FILE, encode_checkpoint};
use super::retention::{SegmentSummary, compact_batch, latest_offsets, segments_to_delete};
use super::scan;
use super::segment::{Segment, SegmentWriter, file_name};
use super::signal::{Moved, Signal, Watchers};
use super::slice::LogSlice;
use super::types::{AppendInfo, CleanupOutcome, ReadLimit, RecoveryReport, Stamp};
use crate::error::IoContext;
use crate::error::{Error, Result};
use crate::record::{Batch, BatchBuilder, batches};
use parking_lot::{Mutex, RwLock};
use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::{Duration, Instant};

/// Name of the file that records a truncation in progress (the offset asked for), so
/// that a crash in the middle of one is completed on the next open.
pub const TRUNCATION_FILE: &str = "truncation.checkpoint";

pub(super) struct WriterState {
    pub(super) active: Option<SegmentWriter>,
    /// The settings appends follow: the writer's own reference, so that an append
    /// takes no lock but the writer's to read them (`set_config` updates both).
    pub(super) config: Arc<LogConfig>,
    pub(super) unflushed_records: u64,
    /// When the oldest unflushed record was appended (None when all is flushed).
    pub(super) unflushed_since: Option<Instant>,
    /// Scratch buffer for LogAppendTime restamping.
    pub(super) scratch: Vec<u8>,
    /// Replicated mode: appends move the log end only (mirrored in `Inner::replicated`
    /// for readers; this copy is what an append reads, without an atomic).
    pub(super) replicated: bool,
    /// The epoch a leader stamps in every batch it appends (None: batches keep the
    /// `partitionLeaderEpoch` they came with).
    pub(super) leader_epoch: Option<i32>,
    /// The latest epoch of the leader-epoch cache once it is loaded; None before (an
    /// append then leaves the cache alone: loading it reads the batch headers).
    pub(super) latest_epoch: Option<i32>,
    /// Idempotent producers' state, once loaded (on open when a snapshot exists, else on
    /// the first idempotent or follower append); every append updates it.
    pub(super) producers: Option<ProducerState>,
}

/// What a [`super::LogManager`] shares with each of its logs (a log opened alone gets
/// its own).
#[derive(Clone, Default)]
pub(crate) struct LogEnv {
    /// Faults in the active segments' next pages.
    pub(crate) prefault: Option<Prefaulter>,
    /// The maintenance clock appends read (see `clock`).
    pub(crate) clock: Option<CoarseClock>,
    /// Whether the disk is full (one episode per data directory).
    pub(crate) space: Arc<DiskSpace>,
    /// The descriptors and maps the data directory's logs hold, bounded.
    pub(crate) files: Arc<Files>,
}

/// The parts a log is assembled from (see `PartitionLog::assemble`).
pub(super) struct Assembly<'a> {
    pub(super) name: &'a str,
    pub(super) dir: PathBuf,
    pub(super) config: LogConfig,
    pub(super) env: LogEnv,
    pub(super) segments: Vec<Arc<Segment>>,
    /// The active segment's writer; None read-only.
    pub(super) active: Option<SegmentWriter>,
    pub(super) read_only: bool,
}

/// A hook told of each durable step of a truncation (tests stop or copy the directory
/// there).
#[cfg(test)]
pub(super) type StepHook = Box<dyn FnMut(&'static str) -> Result<()> + Send>;

pub(super) struct Inner {
    pub(super) name: String,
    pub(super) dir: PathBuf,
    /// Shared so that an append takes a reference count, not a copy.
    pub(super) config: RwLock<Arc<LogConfig>>,
    /// The manager's maintenance clock, read by appends instead of the system clock
    /// where a tick of lag does not matter (see `clock`).
    pub(super) clock: Option<CoarseClock>,
    pub(super) segments: RwLock<Arc<Vec<Arc<Segment>>>>,
    pub(super) writer: Mutex<WriterState>,
    /// Serializes `sync` calls (fsyncs run outside the writer lock).
    pub(super) sync_lock: Mutex<()>,
    /// Coalesces concurrent requests for durability into shared fsyncs (`sync_to`).
    pub(super) group: super::group_commit::GroupCommit,
    /// Serializes the moves of a replicated log's high watermark with the changes of
    /// mode and with truncation (which also hold `writer`; take `writer` first).
    pub(super) hw_lock: Mutex<()>,
    pub(super) log_start: AtomicI64,
    pub(super) log_end: AtomicI64,
    pub(super) high_watermark: AtomicI64,
    pub(super) recovery_point: AtomicI64,
    /// `WriterState::replicated`, for readers.
    pub(super) replicated: AtomicBool,
    pub(super) closed: AtomicBool,
    /// Set (with `poison_reason`) when an fsync failed; checked on every append.
    pub(super) poisoned: AtomicBool,
    pub(super) poison_reason: Mutex<Option<String>>,
    /// The readers to wake when the log moves.
    pub(super) watchers: Watchers,
    /// The leader-epoch cache; None until loaded (see `WriterState::latest_epoch`).
    /// Changed under `writer`.
    pub(super) epochs: RwLock<Option<EpochCache>>,
    /// Faults in the active segment's next pages off the appending thread.
    pub(super) prefault: Option<Prefaulter>,
    /// Whether the data directory's disk is full (shared with the manager's other logs).
    pub(super) space: Arc<DiskSpace>,
    /// The data directory's bounded descriptors and maps (shared with its other logs).
    pub(super) files: Arc<Files>,
    /// Damaged reads are logged at most once a minute per log.
    pub(super) corrupt_reads: RateLimit,
    /// Files holding bytes recovery cut (`<base>.log.cut-<ms>`) and their unix ms:
    /// retention deletes them after `retention.ms`.
    pub(super) cut_files: Mutex<Vec<(PathBuf, i64)>>,
    pub(super) report: RecoveryReport,
    /// The checkpoint's contents as last written or read (None if unknown).
    pub(super) checkpoint_on_disk: Mutex<Option<[u8; 16]>>,
    /// Opened read-only: another process may write the files; this one never does, and
    /// follows that writer's appends, rolls and retention (`follow`).
    pub(super) read_only: bool,
    /// How a read-only log follows its writer.
    pub(super) follow: Mutex<super::follow::FollowState>,
    /// Records and bytes appended and read, fsyncs (`crate::metrics`).
    pub(super) stats: crate::metrics::LogStats,
    #[cfg(test)]
    pub(super) step_hook: Mutex<Option<StepHook>>,
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
    pub(super) inner: Arc<Inner>,
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

impl PartitionLog {
    /// Opens (creating if needed) the log in `dir`, recovering it: segments below the
    /// recovery point are trusted, later ones validated batch by batch and cut at the
    /// first torn or corrupt batch. `name` (e.g. `events-0`) names the log in errors.
    pub fn open(dir: impl AsRef<Path>, name: &str, config: LogConfig) -> Result<PartitionLog> {
        Self::open_with(dir.as_ref(), name, config, LogEnv::default())
    }

    /// [`PartitionLog::open`] with what a [`super::LogManager`] shares with its logs:
    /// reads the checkpoint, lists and recovers the segments (`recovery`), assembles the
    /// log, completes a truncation a crash interrupted and loads the leader-epoch cache.
    pub(crate) fn open_with(
        dir: &Path,
        name: &str,
        config: LogConfig,
        env: LogEnv,
    ) -> Result<PartitionLog> {
        let LogEnv {
            prefault,
            clock,
            space,
            files,
        } = env;
        config.validate()?;
        let dir = dir.to_path_buf();
        let created = !dir.exists();
        fs::create_dir_all(&dir).ctx("create log directory", &dir)?;
        if created && let Some(parent) = dir.parent() {
            checkpoint::sync_dir(parent)?;
        }
        let mut report = RecoveryReport::default();
        let cp = recovery::read_checkpoint(&dir, &mut report);
        let listing = recovery::list_segments(&dir)?;
        let scans = recovery::recover_segments(
            &dir,
            &listing.bases,
            cp.recovery_point,
            &config,
            &mut report,
        )?;
        let (segments, active) = recovery::open_segments(
            &dir,
            scans,
            cp.log_start,
            &config,
            (prefault.clone(), &files),
        )?;
        let mut cut_files = listing.cut_files.clone();
        cut_files.extend(report.cuts.iter().filter_map(|c| {
            let name = c.sidecar.file_name()?.to_str()?;
            Some((c.sidecar.clone(), scan::parse_cut_name(name)?))
        }));
        for cut in &report.cuts {
            events::recovery_cut(name, &cut.to_string());
        }
        let log_end = active.shared().next_offset();
        let log_start = cp.log_start.clamp(segments[0].base_offset, log_end);
        let recovery_point = if report.checkpoint_damaged {
            0
        } else {
            cp.recovery_point.min(log_end)
        };
        let mut log = PartitionLog::assemble(
            Assembly {
                name,
                dir,
                config,
                env: LogEnv {
                    prefault,
                    clock,
                    space,
                    files,
                },
                segments,
                active: Some(active),
                read_only: false,
            },
            (log_start, log_end, recovery_point),
            cp.on_disk,
            cut_files,
        );
        report.truncation_completed = log.complete_interrupted_truncation()?;
        report.leader_epochs_rebuilt = log.load_epochs()?;
        let snapshots = match report.truncation_completed {
            // The truncation removed the snapshots past its cut.
            Some(_) => producer_state::list_snapshots(&log.inner.dir)?,
            None => listing.snapshots,
        };
        (
            report.producer_snapshots_removed,
            report.producer_batches_replayed,
        ) = log.load_producers_on_open(&snapshots)?;
        if let Some(inner) = Arc::get_mut(&mut log.inner) {
            // Open holds the only reference to the new log.
            inner.report = report;
        }
        if !log.inner.report.is_clean() {
            // Make the repair durable before anything is appended on top of it.
            log.sync()?;
        }
        Ok(log)
    }

    /// A log over recovered (or, read-only, followed) segments.
    pub(super) fn assemble(
        a: Assembly<'_>,
        (log_start, log_end, recovery_point): (i64, i64, i64),
        checkpoint_on_disk: Option<[u8; 16]>,
        cut_files: Vec<(PathBuf, i64)>,
    ) -> PartitionLog {
        let config = Arc::new(a.config);
        PartitionLog {
            inner: Arc::new(Inner {
                name: a.name.to_string(),
                dir: a.dir,
                config: RwLock::new(Arc::clone(&config)),
                clock: a.env.clock,
                segments: RwLock::new(Arc::new(a.segments)),
                writer: Mutex::new(WriterState {
                    active: a.active,
                    config,
                    unflushed_records: 0,
                    unflushed_since: None,
                    scratch: Vec::new(),
                    replicated: false,
                    leader_epoch: None,
                    latest_epoch: None,
                    producers: None,
                }),
                sync_lock: Mutex::new(()),
                group: Default::default(),
                hw_lock: Mutex::new(()),
                log_start: AtomicI64::new(log_start),
                log_end: AtomicI64::new(log_end),
                high_watermark: AtomicI64::new(log_end),
                recovery_point: AtomicI64::new(recovery_point),
                replicated: AtomicBool::new(false),
                closed: AtomicBool::new(false),
                poisoned: AtomicBool::new(false),
                poison_reason: Mutex::new(None),
                watchers: Watchers::default(),
                epochs: RwLock::new(None),
                prefault: a.env.prefault,
                space: a.env.space,
                files: a.env.files,
                corrupt_reads: RateLimit::default(),
                cut_files: Mutex::new(cut_files),
                report: RecoveryReport::default(),
                checkpoint_on_disk: Mutex::new(checkpoint_on_disk),
                read_only: a.read_only,
                follow: Mutex::new(super::follow::FollowState::default()),
                stats: Default::default(),
                #[cfg(test)]
                step_hook: Mutex::new(None),
            }),
        }
    }

    /// True if the log was opened read-only (another process may write it).
    pub fn is_read_only(&self) -> bool {
        self.inner.read_only
    }

    /// The log's name, e.g. `events-0`.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The log's directory.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// Records and bytes appended and read, fsyncs (see `crate::metrics`).
    pub(crate) fn stats(&self) -> &crate::metrics::LogStats {
        &self.inner.stats
    }

    /// What recovery found and repaired when this log was opened.
    pub fn recovery_report(&self) -> &RecoveryReport {
        &self.inner.report
    }

    /// The current settings.
    pub fn config(&self) -> LogConfig {
        LogConfig::clone(&self.inner.config.read())
    }

    /// `batches` rewritten in the codec the log's `compression.type` names, for the
    /// batches that do not have it (Kafka's rule for a topic-level codec that differs from
    /// the producer's); `None` when they are stored as sent (`producer`, the default, or
    /// every batch already in that codec). Decompression is bounded by
    /// `max.message.bytes` ([`decompression_limit`](crate::record::decompression_limit));
    /// a batch that does not decode is [`Error::Corrupt`] naming this log.
    pub(crate) fn in_configured_codec(&self, batches: &[u8]) -> Result<Option<Vec<u8>>> {
        let (compression, max_message_bytes) = {
            let c = self.inner.config.read();
            (c.compression_type, c.max_message_bytes)
        };
        match compression {
            super::CompressionType::Producer => Ok(None),
            super::CompressionType::Codec(codec) => crate::record::recompress_batches(
                batches,
                codec,
                self.name(),
                crate::record::decompression_limit(max_message_bytes),
            ),
        }
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

    pub(super) fn closed_err(&self) -> Error {
        Error::Closed(format!("partition log {}", self.inner.name))
    }

    pub(super) fn check_writable(&self) -> Result<()> {
        if self.inner.read_only {
            return Err(Error::ReadOnly(self.inner.dir.clone()));
        }
        if self.is_closed() {
            return Err(self.closed_err());
        }
        if self.inner.poisoned.load(Ordering::Acquire) {
            return Err(self.poisoned_err());
        }
        Ok(())
    }

    fn poisoned_err(&self) -> Error {
        Error::Poisoned {
            partition: self.inner.name.clone(),
            reason: self.inner.poison_reason.lock().clone().unwrap_or_default(),
        }
    }

    /// An append failed with `e`: if for lack of disk space, a full-disk episode starts
    /// (logged once for the data directory).
    #[cold]
    fn note_out_of_space(&self, e: &Error) {
        if events::is_out_of_space(e) {
            self.inner.space.ran_out(&self.inner.name, e);
        }
    }

    /// Logs a read that met damaged bytes (at most once a minute for this log).
    #[cold]
    pub(super) fn report_corrupt_read(&self, e: &Error) {
        if e.is_corruption() {
            events::corrupt_read(&self.inner.corrupt_reads, &self.inner.name, e);
        }
    }

    pub(super) fn poison(&self, e: &Error) {
        let mut p = self.inner.poison_reason.lock();
        if p.is_none() {
            *p = Some(e.to_string());
        }
        self.inner.poisoned.store(true, Ordering::Release);
    }

    /// Appends one or more batches laid back to back. Each is validated (length, magic,
    /// CRC, size limit) before anything is written; offsets are assigned by stamping
    /// each batch's baseOffset in place (and its partitionLeaderEpoch, once
    /// [`PartitionLog::set_leader_epoch`] was called). Returns where they landed.
    pub fn append(&self, batches_bytes: &[u8]) -> Result<AppendInfo> {
        self.append_parsed(parse_batches(batches_bytes)?)
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

    /// Checks parsed batches against the log's limits and appends them at the log end.
    fn append_parsed(&self, parsed: smallvec_like::Batches<'_>) -> Result<AppendInfo> {
        let w = self.inner.writer.lock();
        let config = Arc::clone(&w.config);
        self.check_batches(&parsed, Some(config.max_message_bytes as usize))?;
        self.check_writable()?;
        self.append_locked(w, &parsed, &config)
    }

    /// Appends checked batches at the log end (the caller holds the writer lock and ran
    /// `check_batches` and `check_writable`).
    pub(super) fn append_locked(
        &self,
        mut w: parking_lot::MutexGuard<'_, WriterState>,
        parsed: &smallvec_like::Batches<'_>,
        config: &LogConfig,
    ) -> Result<AppendInfo> {
        let now = self.append_clock(config);
        let base_offset = self.inner.log_end.load(Ordering::Relaxed);
        let stamp = Stamp {
            leader_epoch: w.leader_epoch,
            log_append_time: config.log_append_time.then_some(now),
        };
        let mut next = base_offset;
        let mut max_ts = -1;
        let mut count = 0i64;
        for b in parsed.iter() {
            if let Err(e) = self.write_batch(&mut w, b, next, stamp, config, now) {
                // Nothing of this batch was published; earlier batches of this call were.
                self.publish(&w, next);
                return Err(e);
            }
            next += b.last_offset_delta() as i64 + 1;
            count += b.record_count() as i64;
            max_ts = max_ts.max(stamp.log_append_time.unwrap_or(b.max_timestamp()));
        }
        self.finish_append(w, next, count, config)?;
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
        parsed: &smallvec_like::Batches<'_>,
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
        config: &LogConfig,
        now: i64,
    ) -> Result<()> {
        self.maybe_roll(w, b.len(), offset, b.last_offset_delta(), config, now)
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
        if let Some(p) = w.producers.as_mut() {
            p.record_batch(b, offset);
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
        config: &LogConfig,
    ) -> Result<()> {
        self.publish(&w, end);
        w.unflushed_records += count as u64;
        if w.unflushed_since.is_none() {
            w.unflushed_since = Some(Instant::now());
        }
        let flush_now = config
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
        // Offsets that do not fit the segment's relative u32 roll it even when empty: a
        // follower's batch may lie far past the log end (a gap in the leader's log).
        let roll = offsets_overflow || (!empty && (too_big || too_old || index_full));
        let too_big = if roll {
            len > config.segment_bytes as usize
        } else {
            empty && too_big
        };
        if too_big {
            return Err(Error::MessageTooLarge {
                partition: self.inner.name.clone(),
                size: len,
                max: config.segment_bytes as usize,
            });
        }
        if roll {
            self.roll_locked(w, next_offset, config)?;
        }
        Ok(())
    }

    fn roll_locked(&self, w: &mut WriterState, next_offset: i64, config: &LogConfig) -> Result<()> {
        if w.active.is_none() {
            return Err(self.closed_err());
        }
        // The new segment first: if it cannot be made (a full disk), the active one
        // stays as it is and takes appends again once there is room.
        let mut new = Segment::create(&self.inner.dir, next_offset, config, &self.inner.files)?;
        new.set_prefaulter(self.inner.prefault.clone());
        checkpoint::sync_dir(&self.inner.dir)?;
        let old = w.active.take().ok_or_else(|| self.closed_err())?;
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
        // The producers' state as of the new segment: a restart replays from here.
        if let Some(p) = &w.producers {
            producer_state::write_snapshot(&self.inner.dir, next_offset, p)?;
        }
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
    /// `max_bytes` (at least one batch, even a larger one), below the high watermark
    /// (what consumers may see). Reading at the high watermark gives an empty slice;
    /// outside `[log start, high watermark]` is [`Error::OffsetOutOfRange`].
    pub fn read(&self, offset: i64, max_bytes: usize) -> Result<LogSlice> {
        self.read_bounded(offset, max_bytes, ReadLimit::HighWatermark)
    }

    /// The offset `limit` names: the high watermark or the log end.
    #[inline]
    pub fn bound(&self, limit: ReadLimit) -> i64 {
        match limit {
            ReadLimit::HighWatermark => self.high_watermark(),
            ReadLimit::LogEnd => self.log_end_offset(),
        }
    }

    /// [`PartitionLog::read`] bounded by `limit`: [`ReadLimit::LogEnd`] reads records
    /// above the high watermark too, as a follower's replica fetch does. Outside
    /// `[log start, bound]` is [`Error::OffsetOutOfRange`].
    pub fn read_bounded(
        &self,
        offset: i64,
        max_bytes: usize,
        limit: ReadLimit,
    ) -> Result<LogSlice> {
        // A sealed segment is mapped when read; one that retention, compaction or a
        // truncation removed or replaced since the segment list was taken cannot be:
        // read again from the new list (whose bounds say where the log is now).
        let mut attempt = 0;
        loop {
            match self.read_once(offset, max_bytes, limit) {
                Err(Error::Io { source, .. })
                    if source.kind() == std::io::ErrorKind::NotFound && attempt < 2 =>
                {
                    attempt += 1;
                    // Read-only: the writer's retention took it; list the directory.
                    self.refresh(true)?;
                }
                result => return result,
            }
        }
    }

    fn read_once(&self, offset: i64, max_bytes: usize, limit: ReadLimit) -> Result<LogSlice> {
        if self.inner.read_only && offset >= self.bound(limit) {
            // At the end of what this reader has seen: the writer may have gone on.
            self.refresh(false)?;
        }
        let hw = self.bound(limit);
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
        if offset == hw {
            return Ok(LogSlice::empty(segs.last(), offset));
        }
        let first = segs
            .partition_point(|s| s.base_offset <= offset)
            .saturating_sub(1);
        for seg in &segs[first..] {
            let view = seg.view()?;
            let mut heads = view.heads();
            let Some(pos) = view
                .find(offset, &mut heads)
                .inspect_err(|e| self.report_corrupt_read(e))?
            else {
                continue;
            };
            let mut end = pos;
            let mut next_offset = offset;
            let mut base = None;
            let limit = view.readable();
            while end < limit && (base.is_none() || end - pos < max_bytes) {
                // Past the first batch, the reader is about to touch these bytes
                // anyway: walk them through the map (one fault per 64 KiB) rather than
                // a system call per header.
                let b = match base {
                    None => heads.at(end),
                    Some(_) => view.head_at(end),
                };
                // A header that does not parse, or offsets that do not follow, end the
                // slice here: the next read, which starts at this batch, reports it.
                let Some(b) = b.filter(|b| base.is_none() || b.base_offset >= next_offset) else {
                    break;
                };
                // Whole batches below the bound: a batch that straddles a high watermark
                // (never the case when it is a follower's log end) waits for it.
                if b.last_offset >= hw || (base.is_some() && end - pos + b.len > max_bytes) {
                    break;
                }
                base.get_or_insert(b.base_offset);
                next_offset = b.last_offset + 1;
                end += b.len;
            }
            if let Some(base_offset) = base {
                if let Some(p) = &self.inner.prefault {
                    view.read_ahead(pos, end, p);
                }
                let from = offset.max(base_offset);
                self.inner
                    .stats
                    .read((next_offset - from) as u64, (end - pos) as u64);
                return Ok(LogSlice::new(
                    seg,
                    view.map().cloned(),
                    (pos, end),
                    (base_offset, next_offset),
                ));
            }
        }
        Ok(LogSlice::empty(segs.last(), offset))
    }

    /// Blocks until the high watermark passes `offset` (a record at `offset` can be
    /// read), the timeout expires, or the log is closed. Returns true if data is there.
    /// Spins briefly before registering a signal with the log and sleeping on it: a
    /// reader that keeps up with the writer is woken in microseconds and costs the
    /// writer nothing, an idle one costs no CPU.
    pub fn wait_for(&self, offset: i64, timeout: Duration) -> bool {
        self.wait_for_bounded(offset, ReadLimit::HighWatermark, timeout)
    }

    /// [`PartitionLog::wait_for`] for the bound `limit` names: with
    /// [`ReadLimit::LogEnd`], until the log end passes `offset` (a replica fetch's long
    /// poll).
    pub fn wait_for_bounded(&self, offset: i64, limit: ReadLimit, timeout: Duration) -> bool {
        if self.inner.read_only {
            return self.poll_writer(offset, limit, timeout);
        }
        // SeqCst loads: a waiter registers its signal, then reads the bound; the writer
        // stores the bound, then reads the watcher count (see `Watchers::add`).
        let ready = || {
            let bound = match limit {
                ReadLimit::HighWatermark => &self.inner.high_watermark,
                ReadLimit::LogEnd => &self.inner.log_end,
            };
            bound.load(Ordering::SeqCst) > offset
        };
        if ready() {
            return true;
        }
        let deadline = Instant::now() + timeout;
        // Spin first, unregistered: a writer pays nothing for a reader that keeps up.
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
        let signal = Arc::new(Signal::default());
        self.inner.watchers.add(&signal, limit);
        let result = loop {
            let seen = signal.current();
            if ready() {
                break true;
            }
            if self.is_closed() {
                break false;
            }
            if !signal.wait_past(seen, deadline) {
                break ready();
            }
        };
        self.inner.watchers.remove(&signal);
        result
    }

    /// [`PartitionLog::wait_for_bounded`] of a read-only log: another process appends,
    /// so it looks every 10 ms (or sooner, as the deadline comes).
    fn poll_writer(&self, offset: i64, limit: ReadLimit, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if self.bound(limit) > offset {
                return true;
            }
            if self.is_closed() || self.refresh(false).is_err() {
                return self.bound(limit) > offset;
            }
            if self.bound(limit) > offset {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            std::thread::sleep((deadline - now).min(Duration::from_millis(10)));
        }
    }

    /// True if a reader waits on the log (a read-only log is followed then).
    pub(crate) fn is_watched(&self) -> bool {
        self.inner.watchers.is_watched()
    }

    /// Notifies `signal` whenever what `limit` names moves (appends and high-watermark
    /// moves for [`ReadLimit::LogEnd`], high-watermark moves for
    /// [`ReadLimit::HighWatermark`]; in a standalone log every append moves both) and
    /// when the log closes, until [`PartitionLog::unwatch`]. Register, then read the
    /// log: a move after the read is never missed.
    pub(crate) fn watch(&self, signal: &Arc<Signal>, limit: ReadLimit) {
        self.inner.watchers.add(signal, limit);
    }

    /// Stops notifying `signal` (one registration of it).
    pub(crate) fn unwatch(&self, signal: &Arc<Signal>) {
        self.inner.watchers.remove(signal);
    }

    /// Wakes every reader waiting on the log: threads in [`PartitionLog::wait_for`] (they
    /// re-check and go back to sleep unless data arrived or the log closed) and the
    /// watchers (consumers, long polls).
    pub fn wake_all(&self) {
        self.inner.watchers.notify(Moved::HighWatermark);
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
            let view = seg.view()?;
            let Some(mut pos) = view
                .find_time(timestamp)
                .inspect_err(|e| self.report_corrupt_read(e))?
            else {
                continue;
            };
            let mut prev: Option<i64> = None;
            while pos < view.readable() {
                let Some(b) = view
                    .batch_at(pos)
                    .filter(|b| prev.is_none_or(|p| b.base_offset() > p))
                else {
                    let e = view.corrupt_at(pos, prev, prev.map_or(seg.base_offset, |p| p + 1));
                    self.report_corrupt_read(&e);
                    return Err(e);
                };
                prev = Some(b.last_offset());
                if b.last_offset() >= hw {
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
            for ext in ["log", "index", "timeindex"] {
                let p = self.inner.dir.join(file_name(s.base_offset, ext));
                match fs::remove_file(&p) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(Error::io("delete segment", p, e)),
                }
            }
        }
        self.remove_snapshots_below(next_base)?;
        checkpoint::sync_dir(&self.inner.dir)?;
        Ok(n)
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
            // record is deleted and the log start never passes the high watermark.
            let hw = self.high_watermark();
            let committed = segs
                .windows(2)
                .take_while(|pair| pair[1].base_offset <= hw)
                .count();
            let n = segments_to_delete(&sums, &config, now_ms).min(committed);
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

    /// Compacts the sealed segments wholly below the high watermark: keeps the latest
    /// record of each key (over the whole log up to the high watermark), records
    /// without a key, and tombstones younger than `delete_retention_ms`. Offsets and
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
        let hw = self.high_watermark();
        let limit = crate::record::decompression_limit(config.max_message_bytes);
        let mut latest = HashMap::new();
        for seg in segs.iter() {
            // Every batch, or an error: a damaged header must not make compaction keep
            // only the batches before it.
            let view = seg.view()?;
            let all: Vec<Batch<'_>> = view.checked_batches().collect::<Result<_>>()?;
            latest_offsets(all.into_iter(), hw, limit, &mut latest);
        }
        let cutoff = now_ms.saturating_sub(config.delete_retention_ms as i64);
        let mut rewritten: Vec<(Arc<Segment>, Vec<u8>)> = Vec::new();
        let sealed = &segs[..segs.len() - 1];
        for seg in sealed.iter().take_while(|s| s.next_offset() <= hw) {
            let view = seg.view()?;
            let mut bytes = Vec::with_capacity(seg.size());
            let mut changed = false;
            for b in view.batches() {
                changed |=
                    compact_batch(&b, &latest, cutoff, (&self.inner.name, limit), &mut bytes)?;
            }
            if changed {
                let before: i64 = view.batches().map(|b| b.record_count() as i64).sum();
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
        checkpoint::sync_dir(&self.inner.dir)?;
        Ok(out)
    }

    /// Seals the active segment, snapshots the producers' state (if loaded), fsyncs
    /// everything and writes the checkpoint; later appends fail with [`Error::Closed`].
    /// Readers' slices stay valid. Idempotent.
    pub fn close(&self) -> Result<()> {
        if self.inner.read_only {
            // Nothing to seal, sync or checkpoint: this process never wrote the log.
            if !self.inner.closed.swap(true, Ordering::AcqRel) {
                self.wake_all();
            }
            return Ok(());
        }
        let mut w = self.inner.writer.lock();
        if self.inner.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        let snapshot = match &w.producers {
            Some(p) if !self.inner.poisoned.load(Ordering::Acquire) => {
                producer_state::write_snapshot(&self.inner.dir, self.log_end_offset(), p)
            }
            _ => Ok(()),
        };
        let sealed = w.active.take().map(|a| a.seal()).transpose();
        drop(w);
        self.wake_all();
        snapshot?;
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
        for s in self.segments().iter() {
            s.detach();
        }
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
pub(super) mod smallvec_like {
    use crate::record::Batch;

    pub(in crate::storage) struct Batches<'a> {
        first: Option<Batch<'a>>,
        rest: Vec<Batch<'a>>,
    }

    impl<'a> Batches<'a> {
        pub(in crate::storage) fn new() -> Self {
            Batches {
                first: None,
                rest: Vec::new(),
            }
        }
        pub(in crate::storage) fn push(&mut self, b: Batch<'a>) {
            if self.first.is_none() {
                self.first = Some(b);
            } else {
                self.rest.push(b);
            }
        }
        pub(in crate::storage) fn is_empty(&self) -> bool {
            self.first.is_none()
        }
        pub(in crate::storage) fn iter(&self) -> impl Iterator<Item = &Batch<'a>> {
            self.first.iter().chain(self.rest.iter())
        }
    }
}

/// Validates (length, magic, CRC) and collects the batches laid back to back in `bytes`.
pub(super) fn parse_batches(bytes: &[u8]) -> Result<smallvec_like::Batches<'_>> {
    let mut parsed = smallvec_like::Batches::new();
    for b in batches(bytes) {
        parsed.push(b?);
    }
    Ok(parsed)
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

impl super::group_commit::Durable for PartitionLog {
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
