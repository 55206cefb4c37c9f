//! Partition reassignment (KIP-455) and unclean leader election, as applied to the image.
//!
//! A reassignment of a partition from its replicas `original` to `target` is kept in the
//! partition itself, as Kafka's `PartitionRegistration` keeps it: `replicas` is `target`
//! followed by the original replicas not in it, `adding_replicas` the target replicas
//! not in `original`, `removing_replicas` the original ones not in `target`. The adding
//! replicas are followers like any other (the leader counts them toward nothing until
//! they join the ISR). Once every target replica is in the ISR (an ISR expansion by
//! the leader, or at once when the target adds nothing), the replica set becomes
//! `target`, the ISR keeps its target members, and a leader that is removed hands over
//! to the first target replica in the ISR: all in one change, so the partition is never
//! led from outside its replicas nor by a replica out of sync.
//!
//! Rules (checked by the tests in `tests.rs`):
//! - a target names registered brokers, each once, at least one;
//! - a new target replaces a reassignment in progress (the original replicas stay the
//!   ones before it); a cancellation goes back to the original replicas;
//! - the ISR is never emptied: a change that would leave no in-sync replica is refused;
//! - every change of the replicas, the ISR or the leader bumps the partition epoch,
//!   a leader change the leader epoch too.

use std::sync::Arc;

use super::{MetadataImage, NO_LEADER, Outcome, PartitionImage, Rejected, TopicImage, pname};
use crate::cluster::records::PartitionRef;

impl PartitionImage {
    /// True while a reassignment is in progress.
    pub(crate) fn reassigning(&self) -> bool {
        !self.adding_replicas.is_empty() || !self.removing_replicas.is_empty()
    }

    /// The replicas once the reassignment in progress completes (the replicas when
    /// none is).
    pub(crate) fn target_replicas(&self) -> Vec<i32> {
        without(&self.replicas, &self.removing_replicas)
    }

    /// The replicas before the reassignment in progress (the replicas when none is).
    pub(crate) fn original_replicas(&self) -> Vec<i32> {
        without(&self.replicas, &self.adding_replicas)
    }
}

fn without(list: &[i32], drop: &[i32]) -> Vec<i32> {
    list.iter().copied().filter(|r| !drop.contains(r)).collect()
}

/// The first of `order` in `isr` and `unfenced`, and not in `offline`, or
/// [`NO_LEADER`].
fn first_eligible(order: &[i32], isr: &[i32], unfenced: &[i32], offline: &[i32]) -> i32 {
    order
        .iter()
        .copied()
        .find(|r| isr.contains(r) && unfenced.contains(r) && !offline.contains(r))
        .unwrap_or(NO_LEADER)
}

/// Replaces a partition's replicas, reassignment, ISR, leader and offline replicas,
/// bumping the epochs where anything changed.
pub(super) fn set(p: &mut PartitionImage, next: PartitionImage) {
    let leader_changed = next.leader != p.leader;
    let changed = leader_changed
        || next.replicas != p.replicas
        || next.isr != p.isr
        || next.adding_replicas != p.adding_replicas
        || next.removing_replicas != p.removing_replicas
        || next.offline != p.offline;
    let (leader_epoch, partition_epoch) = (p.leader_epoch, p.partition_epoch);
    *p = next;
    p.leader_epoch = leader_epoch + i32::from(leader_changed);
    p.partition_epoch = partition_epoch + i32::from(changed);
}

/// Completes `p`'s reassignment if every target replica is in the ISR: the replicas
/// become the target, the removed ones leave the ISR, and a removed leader hands over
/// to the first target replica that is in sync and unfenced. True if it completed.
pub(super) fn complete(p: &mut PartitionImage, unfenced: &[i32]) -> bool {
    if !p.reassigning() {
        return false;
    }
    let target = p.target_replicas();
    if !target.iter().all(|r| p.isr.contains(r)) {
        return false;
    }
    let isr: Vec<i32> = target
        .iter()
        .copied()
        .filter(|r| p.isr.contains(r))
        .collect();
    let leader = if target.contains(&p.leader) {
        p.leader
    } else {
        first_eligible(&target, &isr, unfenced, &p.offline)
    };
    let next = PartitionImage {
        offline: without(&p.offline, &p.removing_replicas),
        replicas: target,
        isr,
        leader,
        adding_replicas: Vec::new(),
        removing_replicas: Vec::new(),
        ..p.clone()
    };
    set(p, next);
    true
}

impl MetadataImage {
    /// The topic and partition a record names (the same topic id), or why not.
    fn referenced(
        &self,
        r: &PartitionRef,
    ) -> std::result::Result<(Arc<TopicImage>, usize), Rejected> {
        let topic = self
            .topics
            .get(&r.topic)
            .filter(|t| t.id == r.topic_id)
            .ok_or_else(|| Rejected::UnknownTopic(r.topic.clone()))?;
        let count = topic.partitions.len() as i32;
        let index = usize::try_from(r.partition)
            .ok()
            .filter(|i| *i < topic.partitions.len())
            .ok_or_else(|| Rejected::UnknownPartition {
                topic: r.topic.clone(),
                partition: r.partition,
                count,
            })?;
        Ok((Arc::clone(topic), index))
    }

    /// `AlterPartitionReassignment`: starts, replaces or (with no target) cancels the
    /// partition's reassignment; see the module documentation.
    pub(super) fn alter_reassignment(
        &mut self,
        r: &PartitionRef,
        target: Option<&[i32]>,
    ) -> Outcome {
        let (topic, index) = self.referenced(r)?;
        let p = &topic.partitions[index];
        let name = pname(&r.topic, index);
        let bad = |reason: String| Rejected::InvalidReplicaAssignment {
            topic: r.topic.clone(),
            reason: format!("partition {name}: {reason}"),
        };
        let original = p.original_replicas();
        let (replicas, adding, removing) = match target {
            None if !p.reassigning() => return Ok(super::Applied::Done),
            None => (original.clone(), Vec::new(), Vec::new()),
            Some(target) => {
                if target.is_empty() {
                    return Err(bad("a reassignment needs at least one replica".into()));
                }
                let mut sorted = target.to_vec();
                sorted.sort_unstable();
                sorted.dedup();
                if sorted.len() != target.len() {
                    return Err(bad(format!("the target {target:?} names a broker twice")));
                }
                if let Some(b) = target.iter().find(|b| !self.brokers.contains_key(b)) {
                    return Err(bad(format!("broker {b} is not registered")));
                }
                let mut replicas = target.to_vec();
                replicas.extend(original.iter().filter(|o| !target.contains(o)));
                (
                    replicas,
                    without(target, &original),
                    without(&original, target),
                )
            }
        };
        let isr: Vec<i32> = replicas
            .iter()
            .copied()
            .filter(|r| p.isr.contains(r))
            .collect();
        if isr.is_empty() {
            return Err(bad(format!(
                "none of the replicas {replicas:?} is in sync (ISR {:?})",
                p.isr
            )));
        }
        let unfenced = self.unfenced_brokers();
        let leader = if replicas.contains(&p.leader) {
            p.leader
        } else {
            first_eligible(&replicas, &isr, &unfenced, &p.offline)
        };
        let mut t = (*topic).clone();
        let target_p = &mut t.partitions[index];
        let next = PartitionImage {
            offline: p
                .offline
                .iter()
                .copied()
                .filter(|r| replicas.contains(r))
                .collect(),
            replicas,
            isr,
            leader,
            adding_replicas: adding,
            removing_replicas: removing,
            ..target_p.clone()
        };
        set(target_p, next);
        complete(target_p, &unfenced);
        self.topics.insert(r.topic.clone(), Arc::new(t));
        Ok(super::Applied::Done)
    }

    /// `ElectUncleanLeaders`: each leaderless partition is led by its first unfenced
    /// replica that is not offline, which alone makes the ISR (records it lacks are
    /// lost: the operator asked for it).
    pub(super) fn elect_unclean_leaders(&mut self, partitions: &[PartitionRef]) -> Outcome {
        let unfenced = self.unfenced_brokers();
        for r in partitions {
            let Ok((topic, index)) = self.referenced(r) else {
                continue;
            };
            let p = &topic.partitions[index];
            if p.leader != NO_LEADER {
                continue;
            }
            let Some(leader) = p
                .replicas
                .iter()
                .copied()
                .find(|b| unfenced.contains(b) && !p.is_offline(*b))
            else {
                continue;
            };
            let mut t = (*topic).clone();
            let target = &mut t.partitions[index];
            let next = PartitionImage {
                isr: vec![leader],
                leader,
                ..target.clone()
            };
            set(target, next);
            self.topics.insert(r.topic.clone(), Arc::new(t));
        }
        Ok(super::Applied::Done)
    }

    /// Every partition with a reassignment in progress: `(topic, partition, image)`,
    /// by topic name and partition.
    pub(crate) fn reassignments(&self) -> Vec<(&str, i32, &PartitionImage)> {
        self.partitions_where(PartitionImage::reassigning).collect()
    }

    /// The partitions that `keep` picks: `(topic, partition, image)`, by topic name and
    /// partition.
    pub(crate) fn partitions_where(
        &self,
        keep: impl Fn(&PartitionImage) -> bool + Copy,
    ) -> impl Iterator<Item = (&str, i32, &PartitionImage)> {
        self.topics.values().flat_map(move |t| {
            t.partitions
                .iter()
                .enumerate()
                .filter(move |(_, p)| keep(p))
                .map(|(i, p)| (t.name.as_str(), i as i32, p))
        })
    }
}
