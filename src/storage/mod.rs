//! One partition's log on disk. Knows nothing of topics or groups.
//!
//! [`PartitionLog`] (`log/`, one room per concern) appends and reads RecordBatch v2
//! batches in segment files (`segment`), found through sparse offset and time indexes
//! (`index`, `time_index`), recovered on open (`recovery`, `scan`, assembled by
//! `log/open.rs`), trimmed by retention and compaction (`retention`,
//! `log/retention.rs`), with small crash-safe checkpoint files (`checkpoint`).
//! [`LogManager`] locks a data directory and runs the maintenance thread. All `unsafe`
//! is in `mmap`.
//!
//! The primitives replication builds on (`log/replication.rs`, `log/epochs.rs`,
//! `log/truncate.rs`): a high watermark the cluster moves, reads bounded by it or by the
//! log end ([`ReadLimit`]), follower appends that keep the leader's bytes, leader epochs
//! and their cache (`epoch`), sound and crash-safe truncation, and the high-watermark
//! checkpoint of a data directory (`LogManager`). Every move of a log wakes its waiters
//! (`signal`).

// Import order of the storage files
//
// Bottom-up: a file uses only the files listed before it (a line's files do not use
// each other), and there is no cycle between files but among `log/`'s rooms (and in
// tests, `tests/` and each file's `mod tests`). Re-exports below are for the layers
// above storage; storage's own files import from the file that defines an item.
//
// 1. `types` (shared plain types), `clock` (`now_ms`, `CoarseClock`), `config`,
//    `checkpoint`, `mmap`, `files`, `group_commit`, `time_index`
// 2. `events` (clock), `epoch` (checkpoint), `signal` (types), `index` (files, mmap),
//    `prefault` (mmap)
// 3. `segment` (config, events, files, index, mmap, prefault, time_index, types)
// 4. `slice` (mmap, segment), `scan` (clock, config, files, index, mmap, segment,
//    time_index, types), `follow` (files, index, mmap, segment, time_index, types),
//    `producer_state` (checkpoint, segment, types), `retention` (config, segment)
// 5. `recovery` (checkpoint, config, files, prefault, producer_state, scan, segment,
//    types)
// 6. `log/` (all of the above but index and time_index): `mod.rs` (the struct, its
//    state, small shared helpers) and its rooms `open`, `append`, `read`, `sync`,
//    `retention`, `replication`, `epochs`, `truncate`, `producers`, `follow`, which
//    use one another's methods
// 7. `manager` (checkpoint, clock, config, events, files, log, prefault)

mod checkpoint;
mod clock;
#[cfg_attr(not(feature = "server"), allow(dead_code))]
pub(crate) mod codec;
mod config;
pub(crate) mod dirs;
mod epoch;
mod events;
mod files;
mod follow;
mod group_commit;
mod index;
mod log;
mod manager;
mod mmap;
pub(crate) mod moves;
mod prefault;
mod producer_state;
mod recovery;
mod retention;
mod scan;
mod segment;
mod signal;
mod slice;
mod time_index;
mod txn_index;
mod types;

pub use config::{CONFIG_KEYS, CleanupPolicy, CompressionType, LogConfig, ThrottledReplicas};
pub use dirs::FUTURE_SUFFIX;
#[cfg(test)]
pub(crate) use epoch::LEADER_EPOCH_FILE;
pub use epoch::{EpochEntry, UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET};
pub(crate) use events::{move_abandoned, partition_offline};
pub use files::StorageLimits;
pub use log::PartitionLog;
#[cfg(test)]
pub(crate) use log::TRUNCATION_FILE;
#[cfg(test)]
pub(crate) use manager::HIGH_WATERMARK_FILE;
#[cfg(feature = "server")]
pub(crate) use manager::split_log_name;
pub use manager::{FutureLog, LogManager, ORPHANED_DIR, OrphanedLog};
#[cfg(feature = "server")]
pub(crate) use producer_state::ActiveProducer;
pub use producer_state::{AppendOutcome, EPOCH_BUMP_MARKER_VERSION, MarkerOutcome};
#[cfg(test)]
pub(crate) use recovery::CHECKPOINT_FILE;
pub(crate) use signal::Signal;
pub use slice::LogSlice;
pub use txn_index::{ABORTED_TXN_LEN, AbortedTxn};
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
pub(crate) mod tests;
