//! The read a share fetch makes before it acquires: one rule for the network share
//! fetch (`ShareFetch`) and the in-process `ShareConsumer`. A share-partition is read
//! from its first available record (a new one starts where `share.auto.offset.reset`
//! says) up to the high watermark, or, for a read_committed group
//! (`share.isolation.level`), up to the last stable offset, with the aborted
//! transactions among the batches read; what of it may be acquired is the caller's to
//! say (the network fetch hands out batch ranges, the in-process consumer decoded
//! records).

use std::time::Instant;

use super::ShareCoordinator;
use crate::error::{Error, Result};
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

/// How a share group reads, the group's configs applied.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ShareReadMode {
    /// `share.isolation.level` is `read_committed`.
    pub committed: bool,
    /// `share.auto.offset.reset` is `earliest`: a new share-partition starts at the
    /// log's start, else at its end.
    pub earliest: bool,
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
        let initial = if mode.earliest { start } else { end };
        let from = self.fetch_offset(group, topic, partition, start, initial, now)?;
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
}
