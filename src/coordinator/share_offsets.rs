//! The share-group offsets of the admin APIs (Kafka 4.1's DescribeShareGroupOffsets,
//! AlterShareGroupOffsets and DeleteShareGroupOffsets): each share-partition's start
//! offset, read from and written to its state in `__share_group_state`.
//!
//! Setting a start offset writes a snapshot of the share-partition with that start
//! offset, no record in flight and the next state epoch; deleting writes a snapshot
//! with start offset -1 and the next state epoch, which loads read as no state (the
//! next fetch starts as on a share-partition never read, at `share.auto.offset.reset`).
//! Both need a group with no member, as Kafka's (NON_EMPTY_GROUP otherwise). A load
//! skips snapshots of an older state epoch than one before it, so what the leader of
//! a data partition wrote of the old state does not count after the new one.

use std::collections::HashMap;

use super::consumer_records::topic_id;
use super::share_partition::ShareLimits;
use super::share_records::{self as records, SNAPSHOT, ShareKey, ShareState};
use super::share_shell::{Entry, Epochs, Inner, ShareCoordinator, raise_fence, slot};
use crate::error::{Error, Result, ShareError};

/// A share-partition's start offset, as DescribeShareGroupOffsets tells it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareStartOffset {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// The start offset: every record before it is acknowledged or archived.
    pub start_offset: i64,
    /// The leader epoch of the partition its state was last written at.
    pub leader_epoch: i32,
    /// The state epoch of its state (raised by every alter and delete).
    pub state_epoch: i32,
}

fn share_key(group: &str, topic: &str, partition: i32) -> ShareKey {
    ShareKey {
        group: group.to_string(),
        topic_id: topic_id(topic),
        partition,
    }
}

fn group_error(group: &str, source: ShareError) -> Error {
    Error::Share {
        group: group.to_string(),
        topic: String::new(),
        partition: -1,
        source,
    }
}

impl ShareCoordinator {
    /// The number of members `group` has now.
    pub fn member_count(&self, group: &str) -> usize {
        self.lock().groups.get(group).map_or(0, |m| m.len())
    }

    /// The start offsets of `group`'s share-partitions that have a state, of the
    /// topics `topics` (the state names topics by id), sorted. A group with neither
    /// members nor state is [`ShareError::GroupIdNotFound`].
    pub fn share_offsets(&self, group: &str, topics: &[String]) -> Result<Vec<ShareStartOffset>> {
        let mut inner = self.lock();
        let names: HashMap<[u8; 16], &String> = topics.iter().map(|t| (topic_id(t), t)).collect();
        let states = self.states_where(&mut inner, |k| k.group == group)?;
        if states.is_empty() && inner.groups.get(group).is_none_or(|m| m.is_empty()) {
            return Err(group_error(group, ShareError::GroupIdNotFound));
        }
        let mut out: Vec<ShareStartOffset> = states
            .into_iter()
            .filter_map(|(k, e)| {
                let topic = (*names.get(&k.topic_id)?).clone();
                Some(ShareStartOffset {
                    topic,
                    partition: k.partition,
                    start_offset: e.partition.start_offset(),
                    leader_epoch: e.leader_epoch,
                    state_epoch: e.state_epoch,
                })
            })
            .collect();
        out.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
        Ok(out)
    }

    /// Sets the start offset of each of `offsets` (topic, partition, start offset) of
    /// `group`, which must have no member: each share-partition starts there again
    /// with no record in flight. Group-level refusals are the error; each
    /// share-partition's outcome is in the answer, in order.
    pub fn alter_share_offsets(
        &self,
        group: &str,
        offsets: &[(String, i32, i64)],
    ) -> Result<Vec<Result<()>>> {
        let mut inner = self.lock();
        self.check_empty(&mut inner, group)?;
        Ok(offsets
            .iter()
            .map(|(topic, partition, start)| {
                if *start < 0 {
                    let e = ShareError::InvalidRequest(format!("start offset {start} is negative"));
                    return Err(Error::Share {
                        group: group.to_string(),
                        topic: topic.clone(),
                        partition: *partition,
                        source: e,
                    });
                }
                let k = share_key(group, topic, *partition);
                self.reset(&mut inner, &k, topic, Some(*start))
            })
            .collect())
    }

    /// Deletes the state of each of `partitions` (topic, partition) of `group`, which
    /// must have no member: the next fetch of one starts as on a share-partition never
    /// read. A share-partition without state is left as it is.
    pub fn delete_share_offsets(
        &self,
        group: &str,
        partitions: &[(String, i32)],
    ) -> Result<Vec<Result<()>>> {
        let mut inner = self.lock();
        self.check_empty(&mut inner, group)?;
        Ok(partitions
            .iter()
            .map(|(topic, partition)| {
                self.reset(
                    &mut inner,
                    &share_key(group, topic, *partition),
                    topic,
                    None,
                )
            })
            .collect())
    }

    /// DeleteGroups of share group `group`, which must have no member
    /// ([`ShareError::NonEmptyGroup`]): the state of each of its share-partitions is
    /// deleted (as Kafka's group coordinator has its share coordinator delete it), then
    /// the group is forgotten; a group of the same id starts afresh, each
    /// share-partition where `share.auto.offset.reset` says.
    /// [`ShareError::GroupIdNotFound`] for a group with neither members nor state.
    pub fn delete_group(&self, group: &str) -> Result<()> {
        let mut inner = self.lock();
        let members = inner.groups.get(group).map_or(0, |m| m.len());
        if members > 0 {
            return Err(group_error(group, ShareError::NonEmptyGroup(members)));
        }
        let states = self.states_where(&mut inner, |k| k.group == group)?;
        if states.is_empty() && !inner.groups.contains_key(group) {
            return Err(group_error(group, ShareError::GroupIdNotFound));
        }
        for (k, _) in states {
            // The state names the topic by id only.
            self.reset(&mut inner, &k, "", None)?;
        }
        inner.groups.remove(group);
        inner.group_epochs.remove(group);
        inner.sessions.retain(|(g, _), _| g != group);
        Ok(())
    }

    /// Deletes the state of every share-partition of `topic` (a topic deleted), in
    /// every share group, members or not: a topic made again with the same name starts
    /// afresh in each group, where `share.auto.offset.reset` says. Returns how many
    /// share-partitions had a state. Nothing is made: without `__share_group_state`
    /// there is nothing to delete.
    pub fn delete_topic_states(&self, topic: &str) -> Result<usize> {
        let id = topic_id(topic);
        let mut inner = self.lock();
        let states = self.states_where(&mut inner, |k| k.topic_id == id)?;
        for (k, _) in &states {
            self.reset(&mut inner, k, topic, None)?;
        }
        Ok(states.len())
    }

    /// [`ShareError::NonEmptyGroup`] for a group with members,
    /// [`ShareError::GroupIdNotFound`] for one with neither members nor state.
    fn check_empty(&self, inner: &mut Inner, group: &str) -> Result<()> {
        let members = inner.groups.get(group).map_or(0, |m| m.len());
        if members > 0 {
            return Err(group_error(group, ShareError::NonEmptyGroup(members)));
        }
        if self.states_where(inner, |k| k.group == group)?.is_empty() {
            return Err(group_error(group, ShareError::GroupIdNotFound));
        }
        Ok(())
    }

    /// The live states of the share-partitions `wanted` picks: in memory on a single
    /// node (which holds them all), read from every partition of `__share_group_state`
    /// on a cluster node (which holds only those of the partitions it leads; none
    /// before the topic is made).
    fn states_where(
        &self,
        inner: &mut Inner,
        wanted: impl Fn(&ShareKey) -> bool,
    ) -> Result<Vec<(ShareKey, Entry)>> {
        let Some(store) = inner.store.clone() else {
            return Ok(inner
                .partitions
                .iter()
                .filter(|(k, _)| wanted(k))
                .map(|(k, e)| (k.clone(), e.lock().summary()))
                .collect());
        };
        if !store.made() {
            return Ok(Vec::new());
        }
        let mut out = Vec::new();
        for index in 0..store.partitions()? {
            let found = self.read_entries(store.as_ref(), index, &wanted)?;
            out.extend(found.into_iter().filter(|(_, e)| !e.deleted));
        }
        Ok(out)
    }

    /// [`ShareCoordinator::reset_once`], read and written again (a few times at most)
    /// when the state partition's leader refuses the write because a snapshot landed
    /// between the read and the write (FENCED_STATE_EPOCH).
    fn reset(
        &self,
        inner: &mut Inner,
        k: &ShareKey,
        topic: &str,
        start: Option<i64>,
    ) -> Result<()> {
        let mut tries = 0;
        loop {
            match self.reset_once(inner, k, topic, start) {
                Err(Error::FencedStateEpoch { .. }) if tries < 3 => tries += 1,
                other => return other,
            }
        }
    }

    /// Writes a snapshot of share-partition `k` (of `topic`; "" when only its id is
    /// known) at the next state epoch: starting at `start` with nothing in flight, or
    /// deleted (`None`; nothing is written for a share-partition without state).
    fn reset_once(
        &self,
        inner: &mut Inner,
        k: &ShareKey,
        topic: &str,
        start: Option<i64>,
    ) -> Result<()> {
        let partition = k.partition;
        // The state as it is (epochs and leader epoch), None if it has none.
        let (was, mut leader_epoch) = match inner.store.clone() {
            None => match (inner.partitions.get(k), inner.deleted.get(k)) {
                (Some(e), _) => {
                    let e = e.lock();
                    (Some(Epochs::of(&e)), e.leader_epoch)
                }
                (None, Some(d)) => (Some(*d).filter(|_| start.is_some()), 0),
                (None, None) => (None, 0),
            },
            Some(store) => {
                let index = records::state_partition_for(k, store.partitions()?);
                let found = self.read_entries(store.as_ref(), index, |r| r == k)?;
                let leader_epoch = store.leader_epoch(topic, partition).unwrap_or(0);
                match found.get(k) {
                    Some(e) if e.deleted && start.is_none() => (None, leader_epoch),
                    Some(e) => (Some(Epochs::of(e)), e.leader_epoch.max(leader_epoch)),
                    None => (None, leader_epoch),
                }
            }
        };
        let Some(was) = was.or(start.map(|_| Epochs::default())) else {
            return Ok(()); // nothing to delete
        };
        if inner.store.is_none() && inner.journals_empty() {
            return Err(Error::Closed(format!(
                "the share coordinator ({} is not loaded)",
                records::SHARE_GROUP_STATE_TOPIC
            )));
        }
        leader_epoch = leader_epoch.max(0);
        let state_epoch = match was.snapshot_epoch {
            Some(_) => was.state_epoch.saturating_add(1),
            None => 0,
        };
        let state = ShareState {
            snapshot_epoch: was.next_snapshot(),
            state_epoch,
            leader_epoch,
            start_offset: start.unwrap_or(-1),
            batches: Vec::new(),
        };
        let (state_partition, journal) = self.journal_for(inner, k)?;
        if inner.store.is_some() {
            // The fence of the state partition holds only share-partitions with a
            // state, and refuses any other write but a fence to one without.
            raise_fence(journal.as_ref(), k, leader_epoch)?;
        }
        let offset = journal.append(
            &records::key(SNAPSHOT, k),
            &records::value(SNAPSHOT, &state),
        )?;
        match (start, inner.store.is_some()) {
            // A cluster node reads the share-partition again when it next uses it.
            (_, true) => {
                inner.partitions.remove(k);
            }
            (Some(start), false) => {
                inner.deleted.remove(k);
                let limits = ShareLimits::from(self.config());
                let entry = Entry::of_snapshot(&state, offset, state_partition, topic, limits);
                debug_assert_eq!(entry.partition.start_offset(), start);
                inner.partitions.insert(k.clone(), slot(entry));
            }
            (None, false) => {
                inner.partitions.remove(k);
                inner.deleted.insert(
                    k.clone(),
                    Epochs {
                        snapshot_epoch: Some(state.snapshot_epoch),
                        state_epoch,
                    },
                );
            }
        }
        Ok(())
    }
}
