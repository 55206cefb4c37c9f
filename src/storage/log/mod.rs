//! [`PartitionLog`]: one partition's ordered segments.
//!
//! This file holds the log's struct, its shared state (`Inner`, `WriterState`) and the
//! small helpers every room uses; each room is one `impl PartitionLog` block:
//! `open` (open, assemble, close), `append` (appends and rolls), `read` (reads, waits,
//! lookups by time), `sync` (fsyncs, recovery point, checkpoint), `retention`
//! (DeleteRecords, retention, compaction), `replication` (replicated mode, high
//! watermark, follower appends), `epochs` (the leader-epoch cache), `truncate`
//! (crash-safe truncation), `producers` (idempotent producers' state), `transactions` (markers, the last
//! stable offset, aborted transactions), `follow` (a
//! read-only log following another process). The algorithms they call on segments
//! and files live below the log (`segment`, `scan`, `recovery`, `retention`,
//! `producer_state`, `follow`).
//!
//! Invariants the log keeps:
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

mod append;
mod epochs;
mod follow;
mod open;
mod producers;
mod read;
mod replication;
mod retention;
mod sync;
mod transactions;
mod truncate;

#[cfg(test)]
pub use truncate::TRUNCATION_FILE;

use super::clock::CoarseClock;
use super::config::LogConfig;
use super::epoch::EpochCache;
use super::events::{self, DiskSpace, RateLimit};
use super::files::Files;
use super::prefault::Prefaulter;
use super::producer_state::ProducerState;
use super::segment::{Segment, SegmentWriter};
use super::signal::Watchers;
use super::txn_index::TxnBounds;
use super::types::RecoveryReport;
use crate::error::{Error, Result};
use crate::record::ValidBatches;
use parking_lot::{Mutex, RwLock};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::Instant;

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
    /// the first idempotent, transactional or follower append, or the first question
    /// about transactions); every append updates it.
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
    /// Whether the log directory holding the log is usable (None: a log opened alone).
    pub(crate) dir_health: Option<Arc<crate::storage::dirs::DirHealth>>,
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
    /// No handle of the log has taken a replica role (a standalone partition's log):
    /// appends may skip the role check. Cleared for good under the writer lock
    /// ([`PartitionLog::end_standalone`]), so an append that reads it under that lock
    /// decides; a read without it is only a look.
    pub(super) standalone: AtomicBool,
    pub(super) closed: AtomicBool,
    /// Set (with `poison_reason`) when an fsync failed; checked on every append.
    pub(super) poisoned: AtomicBool,
    pub(super) poison_reason: Mutex<Option<String>>,
    /// The readers to wake when the log moves.
    pub(super) watchers: Watchers,
    /// The open and aborted transactions, as the producers' state has them (`known`
    /// once it is loaded). Changed under `writer` (take `writer` first).
    pub(super) txns: Mutex<TxnBounds>,
    /// The leader-epoch cache; None until loaded (see `WriterState::latest_epoch`).
    /// Changed under `writer`.
    pub(super) epochs: RwLock<Option<EpochCache>>,
    /// Faults in the active segment's next pages off the appending thread.
    pub(super) prefault: Option<Prefaulter>,
    /// Whether the data directory's disk is full (shared with the manager's other logs).
    pub(super) space: Arc<DiskSpace>,
    /// The data directory's bounded descriptors and maps (shared with its other logs).
    pub(super) files: Arc<Files>,
    /// Whether its log directory is usable (a failed one takes the log offline).
    pub(super) dir_health: Option<Arc<crate::storage::dirs::DirHealth>>,
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
    /// Offsets below which named holders (a forwarder) let retention delete, by
    /// holder: retention never deletes a record at or above the lowest
    /// ([`PartitionLog::hold_retention`]).
    pub(super) retention_holds: Mutex<std::collections::BTreeMap<String, i64>>,
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
    pub(crate) fn in_configured_codec(
        &self,
        batches: &ValidBatches<'_>,
    ) -> Result<Option<Vec<u8>>> {
        let (compression, max_message_bytes) = {
            let c = self.inner.config.read();
            (c.compression_type, c.max_message_bytes)
        };
        match compression {
            super::config::CompressionType::Producer => Ok(None),
            super::config::CompressionType::Codec(codec) => crate::record::recompress_batches(
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

    /// Bytes of the log from the batch holding `offset` to the end: what a reader at
    /// `offset` has left (0 at or past the end, the whole log before its start).
    pub fn bytes_from(&self, offset: i64) -> u64 {
        if offset >= self.log_end_offset() {
            return 0;
        }
        let segs = self.segments();
        let Some(i) = segs.iter().rposition(|s| s.base_offset <= offset) else {
            return self.size_bytes();
        };
        let later: u64 = segs[i + 1..].iter().map(|s| s.size() as u64).sum();
        let within = self
            .read(offset, 1)
            .ok()
            .filter(|slice| !slice.is_empty() && slice.path() == Some(segs[i].log_path.as_path()))
            .map_or(0, |slice| slice.file_position());
        later + (segs[i].size() as u64).saturating_sub(within)
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
        self.check_dir()
    }

    /// Ok unless the log directory holding the log failed (the log is then offline:
    /// appends and reads give a storage error).
    #[inline]
    pub(super) fn check_dir(&self) -> Result<()> {
        match &self.inner.dir_health {
            Some(h) => h.check(&self.inner.name),
            None => Ok(()),
        }
    }

    /// An I/O error `e` on the log's files: the log directory is failed (Kafka takes a
    /// directory offline on any I/O error but a full disk, which tidelog rides out).
    #[cold]
    pub(super) fn note_io_error(&self, e: &Error) {
        if let (Some(h), Error::Io { .. }) = (&self.inner.dir_health, e)
            && !events::is_out_of_space(e)
        {
            h.fail(&format!("{}: {e}", self.inner.name));
        }
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
        self.note_io_error(e);
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
        self.note_io_error(e);
        let mut p = self.inner.poison_reason.lock();
        if p.is_none() {
            *p = Some(e.to_string());
        }
        self.inner.poisoned.store(true, Ordering::Release);
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

/// Validates (length, magic, CRC) and collects the batches laid back to back in `bytes`.
pub(super) fn parse_batches(bytes: &[u8]) -> Result<ValidBatches<'_>> {
    ValidBatches::parse(bytes, "input")
}
