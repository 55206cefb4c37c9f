//! Draining a node before it is retired: the reassignments that move every replica it
//! holds to other brokers (`tidelog cluster drain`), planned from Metadata. Each
//! replica of the drained node is replaced, in place (so the replica order, and with it
//! the preferred leader, is otherwise kept), by the live broker that does not hold the
//! partition yet and holds the fewest replicas, counting the moves planned before it
//! (ties: the lowest id). The moves then run as any reassignment does
//! (AlterPartitionReassignments): the new replicas catch up as followers and the
//! replica set switches once they are in the ISR, so no acknowledged record is lost.

use std::collections::BTreeMap;

use super::{ClusterMetadata, TopicPartition};
use crate::error::{Error, Result};

/// The reassignments that move every replica `node` holds, per partition its new
/// replica set, in topic and partition order (empty once `node` holds nothing).
/// Fails, naming the partition, when no other live broker can take a replica (every
/// one holds the partition already).
pub fn drain_plan(
    metadata: &ClusterMetadata,
    node: i32,
) -> Result<Vec<(TopicPartition, Vec<i32>)>> {
    let mut load: BTreeMap<i32, usize> = metadata
        .brokers
        .iter()
        .filter(|b| b.id != node)
        .map(|b| (b.id, 0))
        .collect();
    let mut topics: Vec<_> = metadata.topics.iter().collect();
    topics.sort_by(|a, b| a.name.cmp(&b.name));
    for t in &topics {
        for p in &t.partitions {
            for r in &p.replicas {
                if let Some(n) = load.get_mut(r) {
                    *n += 1;
                }
            }
        }
    }
    let mut plan = Vec::new();
    for t in topics {
        let mut partitions: Vec<_> = t.partitions.iter().collect();
        partitions.sort_by_key(|p| p.partition);
        for p in partitions {
            let Some(at) = p.replicas.iter().position(|r| *r == node) else {
                continue;
            };
            let to = load
                .iter()
                .filter(|(b, _)| !p.replicas.contains(b))
                .min_by_key(|(b, n)| (**n, **b))
                .map(|(b, _)| *b)
                .ok_or_else(|| Error::InvalidReplicaAssignment {
                    topic: t.name.clone(),
                    reason: format!(
                        "partition {}-{} has replicas {:?}: no other live broker can take node {node}'s replica",
                        t.name, p.partition, p.replicas
                    ),
                })?;
            *load.get_mut(&to).expect("a live broker") += 1;
            let mut target = p.replicas.clone();
            target[at] = to;
            plan.push((TopicPartition::new(&t.name, p.partition), target));
        }
    }
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admin::{BrokerMetadata, PartitionMetadata, TopicMetadata};

    fn metadata(brokers: &[i32], topics: &[(&str, Vec<Vec<i32>>)]) -> ClusterMetadata {
        ClusterMetadata {
            cluster_id: None,
            controller: None,
            brokers: brokers
                .iter()
                .map(|id| BrokerMetadata {
                    id: *id,
                    host: "h".into(),
                    port: 1,
                    rack: None,
                })
                .collect(),
            topics: topics
                .iter()
                .map(|(name, parts)| TopicMetadata {
                    name: name.to_string(),
                    internal: false,
                    partitions: parts
                        .iter()
                        .enumerate()
                        .map(|(i, r)| PartitionMetadata {
                            partition: i as i32,
                            leader: r.first().copied(),
                            leader_epoch: 0,
                            replicas: r.clone(),
                            isr: r.clone(),
                            offline_replicas: Vec::new(),
                        })
                        .collect(),
                })
                .collect(),
        }
    }

    #[test]
    fn each_replica_of_the_node_goes_in_place_to_the_least_loaded_broker_without_one() {
        let m = metadata(
            &[1, 2, 3, 4],
            &[
                ("b", vec![vec![4, 1], vec![2, 3]]),
                ("a", vec![vec![1, 2, 4], vec![3, 4, 1], vec![1, 2, 3]]),
            ],
        );
        // Loads before: 1: 4, 2: 3, 3: 3. a-0 [1,2,4] can only go to 3; a-1 [3,4,1]
        // to 2 (2: 3 < ...); b-0 [4,1] to the least loaded of 2 and 3 (both 4: 2).
        let plan = drain_plan(&m, 4).unwrap();
        assert_eq!(
            plan,
            vec![
                (TopicPartition::new("a", 0), vec![1, 2, 3]),
                (TopicPartition::new("a", 1), vec![3, 2, 1]),
                (TopicPartition::new("b", 0), vec![2, 1]),
            ]
        );
        assert!(
            drain_plan(&m, 9).unwrap().is_empty(),
            "a node holding nothing"
        );
    }

    #[test]
    fn a_replica_no_other_broker_can_take_is_an_error_naming_the_partition() {
        let m = metadata(&[1, 2, 3], &[("t", vec![vec![1, 2], vec![1, 2, 3]])]);
        let e = drain_plan(&m, 3).unwrap_err().to_string();
        assert!(e.contains("t-1") && e.contains("node 3"), "{e}");
    }
}
