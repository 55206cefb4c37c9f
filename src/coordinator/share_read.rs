//! The read a share fetch makes before it acquires: one rule for the network share
//! fetch (`ShareFetch`) and the in-process `ShareConsumer`. A share-partition is read
//! from its first available record (a new one starts where `share.auto.offset.reset`
//! says) up to the high watermark, or, for a read_committed group
//! (`share.isolation.level`), up to the last stable offset, with the aborted
//! transactions among the batches read; what of it may be acquired is the caller's to
//! say (the network fetch hands out batch ranges, the in-process consumer decoded
//! records).
//!
//! Where a new share-partition starts is read from the group's configs once they are
//! up to date: on a cluster another node may have just set `share.auto.offset.reset`,
//! and this node's metadata may not have it yet. Before a share-partition not held
//! here is read, the group configs' read barrier is taken
//! ([`GroupConfigStore::read_barrier`](super::group_configs::GroupConfigStore::read_barrier):
//! one round trip to the controller, once per share-partition loaded), outside the
//! coordinator's lock; it matters only if the share-partition has no state stored, and
//! if it failed then, the read fails with the retriable [`ShareError::StartUnknown`]
//! rather than start at a guess.

use std::time::{Duration, Instant};

use super::ShareCoordinator;
use super::share_shell::share_error;
use crate::error::{Error, Result, ShareError};
use crate::storage::{AbortedTxn, LogSlice};
use crate::topic::Partition;

/// A partition as a share fetch reads it: its leader's log.
pub(crate) trait ShareSource {
    /// The high watermark: where a read_uncommitted group's reads end.
    fn high_watermark(&self) -> i64;
    /// The last stable offset: where a read_committed group's reads end.
    fn last_stable_offset(&self) -> Result<i64>;
    /// The log's first offset.
    fn log_start_offset(&self) -> i64;
    /// Whole batches from the one holding `offset`, about `max_bytes` (at least one),
    /// below the high watermark, or below the last stable offset when `committed`.
    fn read_below(&self, offset: i64, max_bytes: usize, committed: bool) -> Result<LogSlice>;
    /// The aborted transactions with records in `from..to`.
    fn aborted_transactions(&self, from: i64, to: i64) -> Result<Vec<AbortedTxn>>;
}

impl ShareSource for Partition {
    fn high_watermark(&self) -> i64 {
        Partition::high_watermark(self)
    }
    fn last_stable_offset(&self) -> Result<i64> {
        Partition::last_stable_offset(self)
    }
    fn log_start_offset(&self) -> i64 {
        Partition::log_start_offset(self)
    }
    fn read_below(&self, offset: i64, max_bytes: usize, committed: bool) -> Result<LogSlice> {
        match committed {
            true => self
                .read_committed(offset, max_bytes)
                .map(|(slice, _)| slice),
            false => self.read(offset, max_bytes),
        }
    }
    fn aborted_transactions(&self, from: i64, to: i64) -> Result<Vec<AbortedTxn>> {
        Partition::aborted_transactions(self, from, to)
    }
}

/// How long a new share-partition's read waits for the group configs to be up to date
/// ([`GroupConfigStore::read_barrier`](super::group_configs::GroupConfigStore::read_barrier)):
/// one round trip to the controller normally, longer through an election.
const START_BARRIER_TIMEOUT: Duration = Duration::from_secs(3);

/// How a share group reads, the group's configs applied.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ShareReadMode {
    /// `share.isolation.level` is `read_committed`.
    pub committed: bool,
    /// Where a new share-partition starts when the group's configs do not set
    /// `share.auto.offset.reset`: at the log's start (`earliest`), else at its end. The
    /// coordinator reads the group's setting itself, once its configs are up to date.
    pub earliest_by_default: bool,
}

/// What [`ShareCoordinator::read_share_partition`] read.
#[derive(Debug)]
pub(crate) struct ShareRead {
    /// Where the read started: the share-partition's first available record.
    pub from: i64,
    /// Whole batches from the one holding `from`, not empty.
    pub slice: LogSlice,
    /// Read committed, the aborted transactions with records in the slice (their
    /// records are never handed out); else empty.
    pub aborted: Vec<AbortedTxn>,
}

impl ShareCoordinator {
    /// Reads `topic`-`partition` of `source` for `group` as `mode` says, up to about
    /// `max_bytes`, from the share-partition's first available record (locks expired by
    /// `now` end first). `None` when there is nothing to read: the share-partition is at
    /// the end, or retention removed the records meanwhile (the next read skips to the
    /// log start).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn read_share_partition<S: ShareSource + ?Sized>(
        &self,
        source: &S,
        group: &str,
        topic: &str,
        partition: i32,
        mode: ShareReadMode,
        max_bytes: usize,
        now: Instant,
    ) -> Result<Option<ShareRead>> {
        let end = match mode.committed {
            true => source.last_stable_offset()?,
            false => source.high_watermark(),
        };
        let start = source.log_start_offset();
        // Taken before the coordinator's lock, where the share-partition may be new.
        let mut barrier = match self.holds(group, topic, partition) {
            true => None,
            false => Some(self.group_configs_barrier()),
        };
        // Called only for a share-partition with no state stored.
        let mut initial = || -> Result<i64> {
            // None: held when looked at, dropped since (this node stopped leading the
            // partition meanwhile): the barrier is taken now.
            barrier
                .take()
                .unwrap_or_else(|| self.group_configs_barrier())
                .map_err(|e| {
                    let reason = format!(
                        "the group configs on this node may lack a change made elsewhere ({e})"
                    );
                    share_error(group, topic, partition, ShareError::StartUnknown(reason))
                })?;
            let earliest = self
                .read_overrides(group)
                .earliest
                .unwrap_or(mode.earliest_by_default);
            Ok(if earliest { start } else { end })
        };
        let from = self.fetch_offset_from(group, topic, partition, start, &mut initial, now)?;
        if from >= end {
            return Ok(None);
        }
        let slice = match source.read_below(from, max_bytes, mode.committed) {
            Ok(s) if s.is_empty() => return Ok(None),
            Ok(s) => s,
            Err(Error::OffsetOutOfRange { .. }) => return Ok(None),
            Err(e) => return Err(e),
        };
        let aborted = match mode.committed {
            true => source.aborted_transactions(from, slice.next_offset())?,
            false => Vec::new(),
        };
        Ok(Some(ShareRead {
            from,
            slice,
            aborted,
        }))
    }

    /// The read barrier of the group configs, when a store is set.
    fn group_configs_barrier(&self) -> Result<()> {
        match self.group_config_store() {
            Some(store) => store.read_barrier(START_BARRIER_TIMEOUT),
            None => Ok(()),
        }
    }
}
