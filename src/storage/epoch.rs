//! The leader-epoch cache of a partition (KIP-101, KIP-279): which leader epoch each
//! range of offsets was written in, as Kafka's `LeaderEpochFileCache`.
//!
//! An entry `(epoch, start_offset)` says that the batches from `start_offset` up to the
//! next entry's start were written by the leader of `epoch`. Entries are strictly
//! increasing in both fields. The cache is a function of the batch headers: an entry is
//! added when a batch whose `partitionLeaderEpoch` is higher than every epoch before it
//! is appended (by a leader that stamps its epoch, or by a follower copying the
//! leader's batches); batches whose epoch is negative (no epoch) or not higher add
//! nothing. Truncating the log removes the entries that start at or past the new end;
//! moving the log start moves the first entry's start up to it.
//!
//! It is kept in `leader-epoch-checkpoint`, Kafka's text format (see
//! `checkpoint::write_text`), rewritten crash-safely on every change.

use super::checkpoint;
use crate::error::{Error, Result};
use std::path::Path;

/// Name of the per-partition leader-epoch file.
pub const LEADER_EPOCH_FILE: &str = "leader-epoch-checkpoint";

/// Kafka's UNDEFINED_EPOCH and UNDEFINED_EPOCH_OFFSET.
pub const UNDEFINED_EPOCH: i32 = -1;
/// See [`UNDEFINED_EPOCH`].
pub const UNDEFINED_EPOCH_OFFSET: i64 = -1;

/// One entry of a leader-epoch cache: the first offset written in a leader epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EpochEntry {
    /// The leader epoch.
    pub epoch: i32,
    /// The offset of its first batch (or the log start offset, after retention moved
    /// past that batch).
    pub start_offset: i64,
}

/// The entries, oldest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct EpochCache {
    entries: Vec<EpochEntry>,
}

impl EpochCache {
    /// The entries, oldest first.
    pub(crate) fn entries(&self) -> &[EpochEntry] {
        &self.entries
    }

    /// The highest epoch, [`UNDEFINED_EPOCH`] when there is none.
    pub(crate) fn latest_epoch(&self) -> i32 {
        self.entries.last().map_or(UNDEFINED_EPOCH, |e| e.epoch)
    }

    /// Notes a batch of `epoch` at `offset`: a new entry if `epoch` is higher than every
    /// one before it. True if the cache changed.
    pub(crate) fn assign(&mut self, epoch: i32, offset: i64) -> bool {
        if epoch < 0 || epoch <= self.latest_epoch() {
            return false;
        }
        debug_assert!(self.entries.last().is_none_or(|e| e.start_offset < offset));
        self.entries.push(EpochEntry {
            epoch,
            start_offset: offset,
        });
        true
    }

    /// Removes the entries that start at or after `end` (the log was truncated there).
    pub(crate) fn truncate_from_end(&mut self, end: i64) -> bool {
        let keep = self.entries.partition_point(|e| e.start_offset < end);
        let changed = keep < self.entries.len();
        self.entries.truncate(keep);
        changed
    }

    /// The log start moved to `start`: entries that start at or below it go, except the
    /// last of them, which now starts at `start` (Kafka's `truncateFromStart`).
    pub(crate) fn truncate_from_start(&mut self, start: i64) -> bool {
        let below = self.entries.partition_point(|e| e.start_offset <= start);
        if below == 0 {
            return false;
        }
        let mut first = self.entries[below - 1];
        let changed = below > 1 || first.start_offset != start;
        first.start_offset = start;
        self.entries.drain(..below - 1);
        self.entries[0] = first;
        changed
    }

    /// Fits entries read from the file or built from the batch headers to the log's
    /// offsets on open: the first entry starts at `start` at the earliest
    /// (`truncate_from_start`), and none starts at or past `end` (an entry written
    /// down for a batch that a crash lost), but for the first one of an empty log
    /// (`start == end`), which `truncate_from_start` may have moved there.
    pub(crate) fn clamp(&mut self, start: i64, end: i64) -> bool {
        let moved = self.truncate_from_start(start);
        let empty_log_start = self
            .entries
            .first()
            .is_some_and(|e| e.start_offset == start);
        let keep = self
            .entries
            .partition_point(|e| e.start_offset < end)
            .max(usize::from(empty_log_start));
        let cut = keep < self.entries.len();
        self.entries.truncate(keep);
        moved || cut
    }

    /// OffsetForLeaderEpoch: the largest epoch at or below `requested` and the offset
    /// where the next higher epoch starts, or `log_end` when it is the latest epoch (or
    /// `requested` is above every epoch: the cache gains an epoch only with its first
    /// batch, so a leader that has not written in its current epoch yet still answers
    /// for it). A `requested` epoch older than every entry gets itself and the first
    /// entry's start (its data is gone: the follower must replicate from there, as in
    /// Kafka). `(-1, -1)` when `requested` is undefined (negative) or the cache empty.
    pub(crate) fn end_offset_for(&self, requested: i32, log_end: i64) -> (i32, i64) {
        if requested < 0 || self.entries.is_empty() {
            return (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET);
        }
        let at_or_below = self.entries.partition_point(|e| e.epoch <= requested);
        match at_or_below {
            0 => (requested, self.entries[0].start_offset),
            n if n == self.entries.len() => (self.entries[n - 1].epoch, log_end),
            n => (self.entries[n - 1].epoch, self.entries[n].start_offset),
        }
    }

    /// Builds the cache from batch headers `(epoch, base offset)`, oldest first (to be
    /// clamped to the log's offsets).
    pub(crate) fn from_batches(batches: impl Iterator<Item = (i32, i64)>) -> EpochCache {
        let mut cache = EpochCache::default();
        for (epoch, offset) in batches {
            cache.assign(epoch, offset);
        }
        cache
    }

    /// Reads `dir/leader-epoch-checkpoint`: `Ok(None)` if it does not exist,
    /// [`Error::Corrupt`] if it is not Kafka's format or its entries are not strictly
    /// increasing non-negative pairs.
    pub(crate) fn read(dir: &Path) -> Result<Option<EpochCache>> {
        let path = dir.join(LEADER_EPOCH_FILE);
        let Some(lines) = checkpoint::read_text(&path, 2)? else {
            return Ok(None);
        };
        let mut cache = EpochCache::default();
        for (at, fields) in lines {
            let bad = |why: String| Error::corrupt(path.display(), at, why);
            let epoch: i32 = fields[0]
                .parse()
                .map_err(|_| bad(format!("epoch {:?} is not a number", fields[0])))?;
            let start_offset: i64 = fields[1]
                .parse()
                .map_err(|_| bad(format!("start offset {:?} is not a number", fields[1])))?;
            let follows = cache
                .entries
                .last()
                .is_none_or(|l| epoch > l.epoch && start_offset > l.start_offset);
            if epoch < 0 || start_offset < 0 || !follows {
                return Err(bad(format!(
                    "entry ({epoch}, {start_offset}) does not follow the one before it \
                     (epochs and start offsets must be non-negative and strictly increasing)"
                )));
            }
            cache.entries.push(EpochEntry {
                epoch,
                start_offset,
            });
        }
        Ok(Some(cache))
    }

    /// Writes `dir/leader-epoch-checkpoint` crash-safely.
    pub(crate) fn write(&self, dir: &Path) -> Result<()> {
        let lines: Vec<String> = self
            .entries
            .iter()
            .map(|e| format!("{} {}", e.epoch, e.start_offset))
            .collect();
        checkpoint::write_text(&dir.join(LEADER_EPOCH_FILE), &lines)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(entries: &[(i32, i64)]) -> EpochCache {
        EpochCache::from_batches(entries.iter().copied())
    }

    fn pairs(c: &EpochCache) -> Vec<(i32, i64)> {
        c.entries()
            .iter()
            .map(|e| (e.epoch, e.start_offset))
            .collect()
    }

    #[test]
    fn only_a_higher_epoch_adds_an_entry() {
        let c = cache(&[(-1, 0), (0, 5), (0, 9), (2, 12), (1, 20), (2, 25), (5, 30)]);
        assert_eq!(pairs(&c), vec![(0, 5), (2, 12), (5, 30)]);
        assert_eq!(c.latest_epoch(), 5);
        assert_eq!(EpochCache::default().latest_epoch(), UNDEFINED_EPOCH);
    }

    #[test]
    fn end_offsets_follow_offset_for_leader_epoch() {
        let c = cache(&[(1, 0), (3, 100), (4, 150)]);
        let log_end = 200;
        assert_eq!(
            c.end_offset_for(4, log_end),
            (4, 200),
            "latest: the log end"
        );
        assert_eq!(
            c.end_offset_for(7, log_end),
            (4, 200),
            "newer: the latest's end"
        );
        assert_eq!(c.end_offset_for(3, log_end), (3, 150));
        assert_eq!(c.end_offset_for(2, log_end), (1, 100), "unknown: the floor");
        assert_eq!(c.end_offset_for(1, log_end), (1, 100));
        assert_eq!(
            c.end_offset_for(0, log_end),
            (0, 0),
            "older than all: first start"
        );
        assert_eq!(c.end_offset_for(-1, log_end), (-1, -1));
        assert_eq!(EpochCache::default().end_offset_for(3, log_end), (-1, -1));
    }

    #[test]
    fn truncation_from_either_end() {
        let mut c = cache(&[(1, 0), (3, 100), (4, 150)]);
        assert!(!c.truncate_from_end(151));
        assert!(c.truncate_from_end(150));
        assert_eq!(pairs(&c), vec![(1, 0), (3, 100)]);
        assert!(!c.truncate_from_start(0));
        assert!(c.truncate_from_start(120));
        assert_eq!(pairs(&c), vec![(3, 120)]);
        assert!(!c.truncate_from_start(120));
        assert!(!c.truncate_from_start(50), "below the first entry: nothing");
        assert!(c.truncate_from_end(0));
        assert!(c.entries().is_empty());
        assert!(!c.truncate_from_start(7));
        // Fitted to the log's offsets; an empty log keeps the epoch it starts in.
        let mut c = cache(&[(1, 0), (3, 100), (4, 130)]);
        assert!(c.clamp(120, 130));
        assert_eq!(pairs(&c), vec![(3, 120)]);
        assert!(!c.clamp(120, 130));
        assert!(c.clamp(130, 130));
        assert_eq!(pairs(&c), vec![(3, 130)]);
        assert!(!c.clamp(130, 130));
    }

    #[test]
    fn the_file_is_kafkas_text_format_and_damage_is_typed() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(EpochCache::read(dir.path()).unwrap(), None);
        let c = cache(&[(0, 0), (3, 1500)]);
        c.write(dir.path()).unwrap();
        let path = dir.path().join(LEADER_EPOCH_FILE);
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "0\n2\n0 0\n3 1500\n"
        );
        assert_eq!(EpochCache::read(dir.path()).unwrap(), Some(c));
        for (text, at) in [
            ("0\n2\n3 0\n1 5\n", 8),
            ("0\n1\n-2 0\n", 4),
            ("0\n2\n1 5\n2 5\n", 8),
            ("0\n1\nx 1\n", 4),
        ] {
            std::fs::write(&path, text).unwrap();
            let e = EpochCache::read(dir.path()).unwrap_err();
            assert!(e.is_corruption(), "{text:?}: {e}");
            assert!(
                e.to_string().contains(&format!("at byte {at}:")),
                "{text:?}: {e}"
            );
        }
    }
}
