//! One partition's log on disk. Knows nothing of topics or groups.
//!
//! [`PartitionLog`] appends and reads RecordBatch v2 batches in segment files
//! (`segment`), found through sparse offset and time indexes (`index`, `time_index`),
//! recovered on open (`log`), trimmed by retention and compaction (`retention`), with
//! small crash-safe checkpoint files (`checkpoint`). [`LogManager`] locks a data
//! directory and runs the maintenance thread. All `unsafe` is in `mmap`.
//!
//! The primitives replication builds on (`replication`): a high watermark the cluster
//! moves, reads bounded by it or by the log end ([`ReadLimit`]), follower appends that
//! keep the leader's bytes, leader epochs and their cache (`epoch`), sound and
//! crash-safe truncation, and the high-watermark checkpoint of a data directory
//! (`LogManager`). Every move of a log wakes its waiters (`signal`).

mod checkpoint;
mod clock;
mod config;
mod epoch;
mod events;
mod files;
mod follow;
mod group_commit;
mod index;
mod log;
mod manager;
mod mmap;
mod prefault;
mod producer_state;
mod recovery;
mod retention;
mod scan;
mod segment;
mod signal;
mod slice;
mod time_index;
mod types;

pub use config::{CONFIG_KEYS, CleanupPolicy, CompressionType, LogConfig};
#[cfg(test)]
pub(crate) use epoch::LEADER_EPOCH_FILE;
pub use epoch::{EpochEntry, UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET};
pub use files::StorageLimits;
pub use log::PartitionLog;
#[cfg(test)]
pub(crate) use log::TRUNCATION_FILE;
#[cfg(test)]
pub(crate) use manager::HIGH_WATERMARK_FILE;
pub use manager::{LogManager, ORPHANED_DIR, OrphanedLog};
#[cfg(feature = "server")]
pub(crate) use producer_state::ActiveProducer;
pub use producer_state::AppendOutcome;
#[cfg(test)]
pub(crate) use recovery::CHECKPOINT_FILE;
pub(crate) use signal::Signal;
pub use slice::LogSlice;
pub use types::{AppendInfo, CleanupOutcome, ReadLimit, RecoveryCut, RecoveryReport};

/// Writes `payload` crash-safely (temp file, fsync, rename, fsync dir) with a CRC32, as
/// every tidelog checkpoint is written; for the layers above storage (topic registry,
/// offsets).
pub(crate) fn write_checkpoint(path: &std::path::Path, payload: &[u8]) -> crate::error::Result<()> {
    checkpoint::write(path, payload)
}

/// Reads a file written by [`write_checkpoint`]: `Ok(None)` if it does not exist,
/// [`crate::Error::Corrupt`] if it is torn or damaged.
pub(crate) fn read_checkpoint(path: &std::path::Path) -> crate::error::Result<Option<Vec<u8>>> {
    checkpoint::read(path)
}

/// CRC-32 (IEEE) as the checkpoints use it (also the cluster's Raft files and frames).
#[allow(unused_imports)]
pub(crate) use checkpoint::crc32;
/// Fsyncs a directory (for the layers above that rename files into place).
#[allow(unused_imports)]
pub(crate) use checkpoint::sync_dir;
#[allow(unused_imports)]
pub(crate) use clock::now_ms;

#[cfg(test)]
mod tests;
