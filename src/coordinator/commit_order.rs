//! The order of the changes to groups' committed offsets while offset commits wait for
//! the in-sync replicas outside the coordinator's lock.
//!
//! An OffsetCommit appends its batch to `__consumer_offsets` under the coordinator's
//! lock (so the log holds the commits in the order they were accepted), then waits for
//! the replicas without it (other groups' heartbeats, joins and commits go on; Kafka's
//! coordinator does not block either), then takes the lock again to store its offsets.
//! Between the two, later changes may have been made to the same partitions: a later
//! commit that stored first, a transaction's offsets, an OffsetDelete, the group's
//! deletion. **Rule:** a commit stores, once its wait ends, only the offsets that no
//! change made after its append superseded, so memory ends as the log's order says (as
//! Kafka's `onOffsetCommitAppend` compares the appended batch offsets). A commit whose
//! wait fails stores nothing (its partitions answer the error). A group with a commit
//! waiting is neither forgotten nor expired by the reaper.

use std::collections::HashMap;

use super::offsets::Committed;

/// A commit appended and waiting: its place in the order.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CommitTicket {
    /// The `__consumer_offsets` partition of the group.
    partition: i32,
    generation: u64,
    seq: u64,
}

/// See the module documentation. The maps only hold anything while a commit waits.
#[derive(Debug, Default)]
pub(crate) struct CommitOrder {
    /// Per `__consumer_offsets` partition, bumped by every load and unload of it: a
    /// commit appended before waits on a log the coordinator no longer serves from
    /// memory (a load reads it from the log). Other partitions' commits go on.
    generations: HashMap<i32, u64>,
    next: u64,
    /// Commits waiting, by group.
    waiting: HashMap<String, usize>,
    /// The latest change to each (group, topic, partition) while commits wait.
    partitions: HashMap<(String, String, i32), u64>,
    /// When each group's offsets were all removed, while commits wait.
    cleared: HashMap<String, u64>,
}

impl CommitOrder {
    /// A commit of `group` (of `__consumer_offsets` partition `partition`) was
    /// appended: its ticket.
    pub(crate) fn start(&mut self, group: &str, partition: i32) -> CommitTicket {
        self.next += 1;
        *self.waiting.entry(group.to_string()).or_default() += 1;
        CommitTicket {
            partition,
            generation: self.generation(partition),
            seq: self.next,
        }
    }

    /// True while a commit of `group` waits.
    pub(crate) fn is_waiting(&self, group: &str) -> bool {
        self.waiting.contains_key(group)
    }

    /// The offsets of `partitions` of `group` changed (stored or removed) now.
    pub(crate) fn changed<'a>(
        &mut self,
        group: &str,
        partitions: impl IntoIterator<Item = (&'a str, i32)>,
    ) {
        if self.waiting.is_empty() {
            return;
        }
        self.next += 1;
        for (topic, partition) in partitions {
            self.partitions
                .insert((group.to_string(), topic.to_string(), partition), self.next);
        }
    }

    /// Every offset of `group` was removed now.
    pub(crate) fn cleared(&mut self, group: &str) {
        if self.waiting.is_empty() {
            return;
        }
        self.next += 1;
        self.cleared.insert(group.to_string(), self.next);
    }

    fn generation(&self, partition: i32) -> u64 {
        self.generations.get(&partition).copied().unwrap_or(0)
    }

    /// Partition `partition` of `__consumer_offsets` was loaded or unloaded: commits
    /// of its groups appended before store nothing (changes recorded for them stay
    /// older than every later ticket, so they need no clearing).
    pub(crate) fn reset(&mut self, partition: i32) {
        *self.generations.entry(partition).or_default() += 1;
    }

    /// The commit of `ticket` to `group` ended its wait: of its `accepted` offsets, those
    /// to store now (none after a reload, or if the group was cleared since), each then
    /// marked as changed by this commit.
    pub(crate) fn finish(
        &mut self,
        ticket: CommitTicket,
        group: &str,
        accepted: &[(String, i32, Committed)],
    ) -> Vec<(String, i32, Committed)> {
        let current = ticket.generation == self.generation(ticket.partition)
            && self.cleared.get(group).is_none_or(|&s| s < ticket.seq);
        let mut kept = Vec::new();
        if current {
            for (topic, partition, value) in accepted {
                let key = (group.to_string(), topic.clone(), *partition);
                if self.partitions.get(&key).is_none_or(|&s| s < ticket.seq) {
                    self.partitions.insert(key, ticket.seq);
                    kept.push((topic.clone(), *partition, value.clone()));
                }
            }
        }
        if let Some(n) = self.waiting.get_mut(group) {
            *n -= 1;
            if *n == 0 {
                self.waiting.remove(group);
            }
        }
        if self.waiting.is_empty() {
            self.partitions.clear();
            self.cleared.clear();
        }
        kept
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offset(o: i64) -> Committed {
        Committed {
            offset: o,
            leader_epoch: -1,
            metadata: String::new(),
            commit_timestamp: 0,
        }
    }

    fn stored(kept: &[(String, i32, Committed)]) -> Vec<(i32, i64)> {
        kept.iter().map(|(_, p, c)| (*p, c.offset)).collect()
    }

    #[test]
    fn a_commit_that_ends_its_wait_late_stores_only_what_nothing_later_changed() {
        let mut order = CommitOrder::default();
        let first = order.start("g", 0);
        let second = order.start("g", 0);
        let a = vec![
            ("t".to_string(), 0, offset(10)),
            ("t".to_string(), 1, offset(11)),
        ];
        let b = vec![("t".to_string(), 0, offset(20))];
        // The later commit of partition 0 stores first; the earlier one keeps only 1.
        assert_eq!(stored(&order.finish(second, "g", &b)), vec![(0, 20)]);
        assert!(order.is_waiting("g"));
        assert_eq!(stored(&order.finish(first, "g", &a)), vec![(1, 11)]);
        assert!(!order.is_waiting("g"));
    }

    #[test]
    fn a_deletion_or_a_reload_after_the_append_wins() {
        let mut order = CommitOrder::default();
        let a = vec![
            ("t".to_string(), 0, offset(10)),
            ("t".to_string(), 1, offset(11)),
        ];
        let t = order.start("g", 0);
        order.changed("g", [("t", 1)]);
        assert_eq!(stored(&order.finish(t, "g", &a)), vec![(0, 10)]);
        let t = order.start("g", 0);
        order.cleared("g");
        assert!(order.finish(t, "g", &a).is_empty());
        let t = order.start("g", 0);
        order.reset(0);
        assert!(order.finish(t, "g", &a).is_empty());
        // After the deletion, a new commit stores.
        let t = order.start("g", 0);
        assert_eq!(order.finish(t, "g", &a).len(), 2);
    }

    #[test]
    fn a_reload_of_another_offsets_partition_drops_no_commit() {
        let mut order = CommitOrder::default();
        let a = vec![("t".to_string(), 0, offset(10))];
        let t = order.start("g", 3);
        order.reset(7);
        assert_eq!(stored(&order.finish(t, "g", &a)), vec![(0, 10)]);
        let t = order.start("g", 3);
        order.reset(3);
        assert!(order.finish(t, "g", &a).is_empty());
    }
}
