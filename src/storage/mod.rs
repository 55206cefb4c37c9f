//! One partition's log on disk. Knows nothing of topics or groups.
//!
//! [`PartitionLog`] appends and reads RecordBatch v2 batches in segment files
//! (`segment`), found through sparse offset and time indexes (`index`, `time_index`),
//! recovered on open (`log`), trimmed by retention and compaction (`retention`), with
//! small crash-safe checkpoint files (`checkpoint`). [`LogManager`] locks a data
//! directory and runs the maintenance thread. All `unsafe` is in `mmap`.

mod checkpoint;
mod clock;
mod config;
mod index;
mod log;
mod manager;
mod mmap;
mod prefault;
mod retention;
mod segment;
mod time_index;

pub use config::{CONFIG_KEYS, CleanupPolicy, CompressionType, LogConfig};
#[cfg(test)]
pub(crate) use log::CHECKPOINT_FILE;
pub use log::{AppendInfo, CleanupOutcome, LogSlice, PartitionLog, RecoveryReport};
pub use manager::LogManager;

/// Writes `payload` crash-safely (temp file, fsync, rename, fsync dir) with a CRC32, as
/// every tidelog checkpoint is written; for the layers above storage (topic registry,
/// offsets).
pub(crate) fn write_checkpoint(path: &std::path::Path, payload: &[u8]) -> crate::Result<()> {
    checkpoint::write(path, payload)
}

/// Reads a file written by [`write_checkpoint`]: `Ok(None)` if it does not exist,
/// [`crate::Error::Corrupt`] if it is torn or damaged.
pub(crate) fn read_checkpoint(path: &std::path::Path) -> crate::Result<Option<Vec<u8>>> {
    checkpoint::read(path)
}

/// CRC-32 (IEEE) as the checkpoints use it (also the cluster's Raft files and frames).
#[allow(unused_imports)]
pub(crate) use checkpoint::crc32;
/// Fsyncs a directory (for the layers above that rename files into place).
#[allow(unused_imports)]
pub(crate) use checkpoint::sync_dir;
#[allow(unused_imports)]
pub(crate) use log::now_ms;

#[cfg(test)]
mod tests;
