//! Transactional offsets (TxnOffsetCommit, KIP-98 and KIP-447): offsets a transactional
//! producer commits for a group are pending until its transaction ends. The COMMIT
//! marker the transaction coordinator appends to `__consumer_offsets` makes them the
//! group's committed offsets, the ABORT marker drops them; until then OffsetFetch does
//! not show them, and with `require_stable` answers UNSTABLE_OFFSET_COMMIT for their
//! partitions.
//!
//! As in Kafka's `GroupMetadata`, a plain OffsetCommit of the same partition made after
//! the transactional one (so later in the log) wins: the transactional offset is still
//! pending until the marker, but its COMMIT does not overwrite the newer offset.

use std::collections::{BTreeMap, HashMap};

use super::offsets::{Committed, Entry, Logged};

/// (group, topic, partition).
pub(crate) type GroupPartition = (String, String, i32);

/// One pending transactional offset.
#[derive(Debug, Clone, PartialEq, Eq)]
struct PendingOffset {
    value: Committed,
    /// A plain commit of the partition came after it: its COMMIT changes nothing.
    superseded: bool,
}

/// The pending transactional offsets of a coordinator, by producer, and the last epoch
/// each producer used (an older one is refused: a fenced zombie producer).
#[derive(Debug, Default)]
pub(crate) struct PendingTxnOffsets {
    by_producer: HashMap<i64, BTreeMap<GroupPartition, PendingOffset>>,
    epochs: HashMap<i64, i16>,
}

impl PendingTxnOffsets {
    /// The latest epoch producer `producer_id` committed offsets or ended a
    /// transaction with, if any.
    pub(crate) fn epoch_of(&self, producer_id: i64) -> Option<i16> {
        self.epochs.get(&producer_id).copied()
    }

    /// Notes `epoch` as producer `producer_id`'s if it is newer.
    fn note_epoch(&mut self, producer_id: i64, epoch: i16) {
        let e = self.epochs.entry(producer_id).or_insert(epoch);
        *e = (*e).max(epoch);
    }

    /// Holds `value` for `key` until producer `producer_id`'s transaction ends (a later
    /// TxnOffsetCommit of the same transaction replaces it).
    pub(crate) fn add(
        &mut self,
        producer_id: i64,
        producer_epoch: i16,
        key: GroupPartition,
        value: Committed,
    ) {
        self.note_epoch(producer_id, producer_epoch);
        self.by_producer.entry(producer_id).or_default().insert(
            key,
            PendingOffset {
                value,
                superseded: false,
            },
        );
    }

    /// A plain OffsetCommit of `key` was stored: pending transactional offsets of it
    /// no longer change it when their transaction commits.
    pub(crate) fn plain_commit(&mut self, group: &str, topic: &str, partition: i32) {
        for pending in self.by_producer.values_mut() {
            for (k, p) in pending.iter_mut() {
                if k.0 == group && k.1 == topic && k.2 == partition {
                    p.superseded = true;
                }
            }
        }
    }

    /// Ends producer `producer_id`'s transaction (its marker at `producer_epoch` is in
    /// the log): returns the offsets to store if `commit`, nothing for an abort; the
    /// pending ones are gone either way.
    pub(crate) fn complete(
        &mut self,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
    ) -> Vec<(GroupPartition, Committed)> {
        self.note_epoch(producer_id, producer_epoch);
        let Some(pending) = self.by_producer.remove(&producer_id) else {
            return Vec::new();
        };
        if !commit {
            return Vec::new();
        }
        pending
            .into_iter()
            .filter(|(_, p)| !p.superseded)
            .map(|(k, p)| (k, p.value))
            .collect()
    }

    /// True if a transaction has a pending offset of `topic`-`partition` for `group`.
    pub(crate) fn is_pending(&self, group: &str, topic: &str, partition: i32) -> bool {
        self.by_producer.values().any(|p| {
            p.keys()
                .any(|k| k.0 == group && k.1 == topic && k.2 == partition)
        })
    }
}

/// Replays the records of `__consumer_offsets` as logged: a transactional batch's
/// offset commits are held for their producer and, where a COMMIT marker of that
/// producer follows, take effect at the marker (an ABORT drops them); those without a
/// marker yet stay pending. Returns the entries in the order they take effect, and
/// what is still pending.
pub(crate) fn resolve(logged: Vec<Logged>) -> (Vec<Entry>, PendingTxnOffsets) {
    let mut entries = Vec::with_capacity(logged.len());
    let mut pending = PendingTxnOffsets::default();
    for l in logged {
        match l {
            Logged::Plain(entry) => {
                if let Entry::Commit {
                    group,
                    topic,
                    partition,
                    ..
                } = &entry
                {
                    pending.plain_commit(group, topic, *partition);
                }
                entries.push(entry);
            }
            Logged::Txn {
                producer_id,
                producer_epoch,
                entry:
                    Entry::Commit {
                        group,
                        topic,
                        partition,
                        value,
                    },
            } => pending.add(
                producer_id,
                producer_epoch,
                (group, topic, partition),
                value,
            ),
            // Kafka writes nothing else transactionally; anything else counts as is.
            Logged::Txn { entry, .. } => entries.push(entry),
            Logged::Marker {
                producer_id,
                producer_epoch,
                commit,
            } => {
                let done = pending.complete(producer_id, producer_epoch, commit);
                entries.extend(done.into_iter().map(|((group, topic, partition), value)| {
                    Entry::Commit {
                        group,
                        topic,
                        partition,
                        value,
                    }
                }));
            }
        }
    }
    (entries, pending)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn committed(offset: i64) -> Committed {
        Committed {
            offset,
            leader_epoch: -1,
            metadata: String::new(),
            commit_timestamp: 0,
        }
    }

    fn commit_entry(offset: i64) -> Entry {
        Entry::Commit {
            group: "g".into(),
            topic: "t".into(),
            partition: 0,
            value: committed(offset),
        }
    }

    fn txn(producer_id: i64, offset: i64) -> Logged {
        Logged::Txn {
            producer_id,
            producer_epoch: 0,
            entry: commit_entry(offset),
        }
    }

    fn marker(producer_id: i64, commit: bool) -> Logged {
        Logged::Marker {
            producer_id,
            producer_epoch: 0,
            commit,
        }
    }

    #[test]
    fn a_commit_marker_applies_its_producers_offsets_where_it_is() {
        let (entries, pending) = resolve(vec![
            Logged::Plain(commit_entry(1)),
            txn(7, 5),
            txn(8, 6),
            marker(7, true),
            marker(8, false),
        ]);
        assert_eq!(entries, vec![commit_entry(1), commit_entry(5)]);
        assert!(!pending.is_pending("g", "t", 0));
        assert_eq!(pending.epoch_of(8), Some(0));
    }

    #[test]
    fn without_a_marker_the_offsets_stay_pending() {
        let (entries, mut pending) = resolve(vec![txn(7, 5), marker(9, true)]);
        assert!(entries.is_empty());
        assert!(pending.is_pending("g", "t", 0));
        assert!(!pending.is_pending("g", "t", 1) && !pending.is_pending("h", "t", 0));
        let done = pending.complete(7, 1, true);
        assert_eq!(done, vec![(("g".into(), "t".into(), 0), committed(5))]);
        assert_eq!(pending.epoch_of(7), Some(1));
    }

    #[test]
    fn a_later_plain_commit_wins_over_a_committed_transaction() {
        let (entries, pending) = resolve(vec![
            txn(7, 5),
            Logged::Plain(commit_entry(9)),
            marker(7, true),
        ]);
        assert_eq!(entries, vec![commit_entry(9)]);
        assert!(!pending.is_pending("g", "t", 0));
    }
}
