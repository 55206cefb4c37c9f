//! Offline replicas (KIP-858): a broker whose log directory failed says which of its
//! replicas are offline ([`MetadataRecord::ReplicasOffline`](crate::cluster::records::MetadataRecord::ReplicasOffline)).
//!
//! Rules (checked by the tests in `tests_offline.rs` and the property test):
//! - a stale broker epoch is refused; partitions gone, or not replicated by the broker,
//!   are skipped;
//! - an offline replica leaves the ISR unless it is its last member (an ISR is never
//!   emptied), loses the leadership, which goes to the first other ISR member that is
//!   unfenced and online, and is elected by no election until its broker registers
//!   again with a new broker epoch, which clears its marks (the new incarnation says
//!   again which of its replicas are offline, before it is unfenced);
//! - every change bumps the partition epoch, a leader change the leader epoch too.

use std::sync::Arc;

use super::reassign::set;
use super::{Applied, MetadataImage, NO_LEADER, Outcome, PartitionImage};
use crate::cluster::records::TopicId;

impl MetadataImage {
    /// `ReplicasOffline`: marks `broker`'s replicas of `partitions` offline; see the
    /// module documentation.
    pub(super) fn replicas_offline(
        &mut self,
        broker: i32,
        broker_epoch: i64,
        partitions: &[(TopicId, i32)],
    ) -> Outcome {
        self.current_broker(broker, broker_epoch)?;
        self.update_partitions(broker, |img, topic, index, p| {
            let named = partitions
                .iter()
                .any(|(id, i)| *id == *topic && *i as usize == index && *i >= 0);
            (named && !p.is_offline(broker)).then(|| img.take_offline(p, broker))
        });
        Ok(Applied::Done)
    }

    /// Clears `broker`'s offline marks (it registered again).
    pub(super) fn clear_offline(&mut self, broker: i32) {
        self.update_partitions(broker, |img, _, _, p| {
            if !p.is_offline(broker) {
                return None;
            }
            let mut next = PartitionImage {
                offline: p.offline.iter().copied().filter(|r| *r != broker).collect(),
                ..p.clone()
            };
            if next.leader == NO_LEADER {
                next.leader = img.elect(&next);
            }
            Some(next)
        });
    }

    /// `p` with `broker`'s replica offline: out of the ISR but as its last member, and
    /// not the leader.
    fn take_offline(&self, p: &PartitionImage, broker: i32) -> PartitionImage {
        let offline = p
            .replicas
            .iter()
            .copied()
            .filter(|r| *r == broker || p.is_offline(*r))
            .collect();
        let mut isr: Vec<i32> = p.isr.iter().copied().filter(|r| *r != broker).collect();
        if isr.is_empty() {
            // Never empty an ISR: its last member keeps the partition's data.
            isr = p.isr.clone();
        }
        let mut next = PartitionImage {
            isr,
            offline,
            ..p.clone()
        };
        if next.leader == broker || next.leader == NO_LEADER {
            next.leader = self.elect(&next);
        }
        next
    }

    /// Replaces each partition that `broker` replicates and for which `f` (given the
    /// topic id and the partition's index) returns a new state, bumping its epochs,
    /// rebuilding only the topics that change.
    fn update_partitions(
        &mut self,
        broker: i32,
        f: impl Fn(&MetadataImage, &TopicId, usize, &PartitionImage) -> Option<PartitionImage>,
    ) {
        let mut changed = Vec::new();
        for (name, topic) in &self.topics {
            let mut new_topic = None;
            for (i, p) in topic.partitions.iter().enumerate() {
                if !p.hosts(broker) {
                    continue;
                }
                if let Some(next) = f(self, &topic.id, i, p) {
                    let t = new_topic.get_or_insert_with(|| (**topic).clone());
                    set(&mut t.partitions[i], next);
                }
            }
            if let Some(t) = new_topic {
                changed.push((name.clone(), Arc::new(t)));
            }
        }
        self.topics.extend(changed);
    }
}
