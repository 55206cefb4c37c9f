//! The plain types the storage layer's files share, at the bottom of its import order:
//! what an append returned ([`AppendInfo`]), how far a read may go ([`ReadLimit`]), what
//! a retention pass did ([`CleanupOutcome`]), what opening a log repaired
//! ([`RecoveryReport`], [`RecoveryCut`]), and how an append stamps its batches
//! (`Stamp`), and what opening one segment found (`SegmentScan`, `CutFile`: `scan`
//! fills them, `segment` opens from them). No logic beyond formatting; nothing here
//! imports another storage file.

use std::path::PathBuf;

/// How far a read or a wait may go: the offset it is bounded by (exclusive).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReadLimit {
    /// Up to the high watermark: what consumers may see (committed records, once the
    /// log is replicated).
    HighWatermark,
    /// Up to the log end: what a follower's replica fetch may copy.
    LogEnd,
}

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
    /// `leader-epoch-checkpoint` was damaged and was rebuilt from the batch headers.
    pub leader_epochs_rebuilt: bool,
    /// A truncation that a crash interrupted was completed: the offset it was asked
    /// to truncate to.
    pub truncation_completed: Option<i64>,
    /// Producer-state snapshots that were damaged and removed (the state came from an
    /// older snapshot or from the batch headers).
    pub producer_snapshots_removed: Vec<PathBuf>,
    /// Batch headers read to bring the idempotent producers' state from its latest
    /// snapshot to the log end (0 after a clean close; nothing is read, and the state is
    /// loaded later, when the log has no snapshot).
    pub producer_batches_replayed: u64,
    /// What each cut (in `truncated`) and each removed segment (in `segments_removed`)
    /// took out of the log, and the file beside the segment that now holds those bytes.
    pub cuts: Vec<RecoveryCut>,
}

/// Bytes that recovery took out of a log: the tail of a segment cut at a torn or
/// corrupt batch, or a whole segment that followed a cut. They are not destroyed but
/// moved to `sidecar`, a file beside the segment (`<segment>.log.cut-<unix ms>`) that
/// `tidelog dump` reads, until retention deletes it after `retention.ms`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecoveryCut {
    /// The segment file that was cut, or removed.
    pub file: PathBuf,
    /// Byte position of the cut in `file` (0 for a removed segment).
    pub position: u64,
    /// The first offset the log no longer holds: where the log ends after the cut (a
    /// removed segment's base offset).
    pub offset: i64,
    /// Bytes removed.
    pub bytes: u64,
    /// Records in the removed batches whose headers could be read.
    pub records: u64,
    /// The file that holds the removed bytes.
    pub sidecar: PathBuf,
    /// Why.
    pub reason: String,
}

impl std::fmt::Display for RecoveryCut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let plural = |n: u64, one: &str, many: &str| {
            if n == 1 {
                format!("1 {one}")
            } else {
                format!("{n} {many}")
            }
        };
        write!(
            f,
            "{} cut at byte {} (offset {}): {} and {} removed, moved to {} ({})",
            self.file.display(),
            self.position,
            self.offset,
            plural(self.bytes, "byte", "bytes"),
            plural(self.records, "record", "records"),
            self.sidecar.display(),
            self.reason
        )
    }
}

impl RecoveryReport {
    /// True if recovery changed nothing on disk.
    pub fn is_clean(&self) -> bool {
        self.truncated.is_empty()
            && self.indexes_rebuilt.is_empty()
            && self.segments_removed.is_empty()
            && !self.checkpoint_damaged
            && !self.leader_epochs_rebuilt
            && self.truncation_completed.is_none()
            && self.producer_snapshots_removed.is_empty()
    }
}

/// How an append stamps the batches it writes.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Stamp {
    /// The leader's epoch, written in partitionLeaderEpoch (outside the CRC).
    pub(super) leader_epoch: Option<i32>,
    /// LogAppendTime: the broker's time, written in maxTimestamp with the timestamp-type
    /// bit (inside the CRC, which is recomputed).
    pub(super) log_append_time: Option<i64>,
}

/// What opening a segment found.
#[derive(Debug, Default, Clone)]
pub(crate) struct SegmentScan {
    pub(crate) data_len: usize,
    pub(crate) next_offset: i64,
    pub(crate) max_timestamp: i64,
    pub(crate) max_ts_batch: u32,
    pub(crate) index_entries: usize,
    pub(crate) time_entries: usize,
    pub(crate) last_time_entry: i64,
    pub(crate) bytes_since_index: usize,
    /// (position, reason) of the first bad batch, where the log was cut.
    pub(crate) truncated: Option<(u64, String)>,
    pub(crate) index_rebuilt: bool,
    pub(crate) time_index_rebuilt: bool,
    pub(crate) bytes_validated: u64,
    /// Opened without validating batches (below the recovery point).
    pub(crate) trusted: bool,
    /// The index files are as they were found (not rewritten): no index fsync is owed.
    pub(crate) indexes_on_disk: bool,
    /// Where the bytes cut at `truncated` went.
    pub(crate) cut: Option<CutFile>,
}

/// Bytes recovery removed from a log, moved to a file beside the segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CutFile {
    /// The file holding them, `<segment>.log.cut-<unix ms>`.
    pub(crate) path: PathBuf,
    /// How many bytes.
    pub(crate) bytes: u64,
    /// Records in the batches among them whose headers can be read.
    pub(crate) records: u64,
}
