//! The admin client's partition operations: leader elections (ElectLeaders, as
//! `kafka-leader-election`), log directories (DescribeLogDirs, as `kafka-log-dirs`;
//! AlterReplicaLogDirs, as `kafka-reassign-partitions` with `log_dirs`) and
//! replica reassignments (AlterPartitionReassignments and ListPartitionReassignments,
//! KIP-455, as `kafka-reassign-partitions`).

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::messages::alter_partition_reassignments_request::{
    ReassignablePartition, ReassignableTopic,
};
use kafka_protocol::messages::alter_replica_log_dirs_request::{
    AlterReplicaLogDir, AlterReplicaLogDirTopic,
};
use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
use kafka_protocol::messages::list_partition_reassignments_request::ListPartitionReassignmentsTopics;
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterReplicaLogDirsRequest, BrokerId,
    DescribeLogDirsRequest, ElectLeadersRequest, ListPartitionReassignmentsRequest, TopicName,
};

use super::router::{Outcome, check, kstr};
use super::{AdminClient, Cluster, TopicPartition, node_ids};
use crate::error::{AdminError, ErrorCode, Resource, Result};

const ELECT_LEADERS_VERSION: i16 = 1;
const DESCRIBE_LOG_DIRS_VERSION: i16 = 1;
const ALTER_REASSIGNMENTS_VERSION: i16 = 0;
const ALTER_REPLICA_LOG_DIRS_VERSION: i16 = 1;
const LIST_REASSIGNMENTS_VERSION: i16 = 0;

/// Which leader an election picks (Kafka's `ElectionType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElectionType {
    /// The preferred replica (the first of the replicas), if it is alive and in sync.
    Preferred,
    /// For a partition without a leader, any live replica, even out of sync: records
    /// only the old in-sync replicas had are lost.
    Unclean,
}

impl ElectionType {
    fn code(self) -> i8 {
        match self {
            ElectionType::Preferred => 0,
            ElectionType::Unclean => 1,
        }
    }
}

/// One log directory of a broker (DescribeLogDirs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogDirDescription {
    /// The directory's path on the broker.
    pub path: String,
    /// The directory's error (KAFKA_STORAGE_ERROR for a failed one), if any.
    pub error: Option<AdminError>,
    /// The partition logs in it.
    pub replicas: Vec<ReplicaLogInfo>,
}

/// One partition's log in a log directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaLogInfo {
    /// The partition.
    pub partition: TopicPartition,
    /// Bytes on disk.
    pub size: i64,
    /// How far the log end is behind the high watermark (0 for a current log).
    pub offset_lag: i64,
    /// True for a log being moved here from another directory of the broker.
    pub is_future: bool,
}

/// A reassignment in progress (ListPartitionReassignments).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionReassignment {
    /// Every replica now: the target, then the replicas being removed.
    pub replicas: Vec<i32>,
    /// Replicas being added.
    pub adding: Vec<i32>,
    /// Replicas being removed.
    pub removing: Vec<i32>,
}

/// Kafka's rack-unaware replica placement (`assignReplicasToBrokersRackUnaware`): the
/// first replica of partition `first_partition + k` is broker `(p + start) % n` of
/// `brokers` (sorted), the others follow it at a shift that moves by one every `n`
/// partitions, so leaders (the first replicas) and followers both spread evenly. The
/// controller places new topics with it (start and shift from the topic id) and
/// `tidelog reassign --generate` plans moves with it. A replication factor above the
/// number of brokers is capped at it (callers check it first: Kafka refuses it with
/// INVALID_REPLICATION_FACTOR).
pub fn assign_replicas(
    brokers: &[i32],
    partitions: i32,
    replication_factor: usize,
    first_partition: i32,
    start: usize,
    shift: usize,
) -> Vec<Vec<i32>> {
    let n = brokers.len();
    let mut out = Vec::with_capacity(partitions.max(0) as usize);
    if n == 0 {
        return out;
    }
    let mut next_shift = shift % n;
    for k in 0..partitions {
        let p = (first_partition.max(0) + k) as usize;
        if p > 0 && p.is_multiple_of(n) {
            next_shift += 1;
        }
        let first = (p + start) % n;
        let mut replicas = vec![brokers[first]];
        for j in 0..replication_factor.min(n).saturating_sub(1) {
            let step = 1 + (next_shift + j) % (n - 1).max(1);
            replicas.push(brokers[(first + step) % n]);
        }
        out.push(replicas);
    }
    out
}

/// Kafka's rack-aware replica placement (`assignReplicasToBrokersRackAware`), for
/// brokers that all have a rack: `brokers` (id, rack), sorted by id, are first arranged
/// so that racks alternate (the first broker of each rack, racks in name order, then the
/// second of each, ...); partition `first_partition + k` starts at arranged broker
/// `(p + start) % n`, and each further replica is the next broker, at a shift as in
/// [`assign_replicas`] (times the number of racks), that is in a rack with no replica
/// of the partition yet (once every rack has one, any broker without one). So a
/// partition has replicas in as many racks as it can, and leaders and followers spread
/// evenly over the brokers. The controller places new topics with it when any unfenced
/// broker has a rack (those without one under rack "", as one rack more), and
/// `tidelog reassign --generate` plans moves with it
/// when every broker given has one. A replication factor above the number of brokers is
/// capped at it.
pub fn assign_replicas_rack_aware(
    brokers: &[(i32, String)],
    partitions: i32,
    replication_factor: usize,
    first_partition: i32,
    start: usize,
    shift: usize,
) -> Vec<Vec<i32>> {
    let arranged = rack_alternated(brokers);
    let n = arranged.len();
    let mut out = Vec::with_capacity(partitions.max(0) as usize);
    if n == 0 {
        return out;
    }
    let rack_of = |id: i32| {
        brokers
            .iter()
            .find(|(b, _)| *b == id)
            .map(|(_, r)| r.as_str())
            .unwrap_or_default()
    };
    let racks = brokers
        .iter()
        .map(|(_, r)| r)
        .collect::<BTreeSet<_>>()
        .len();
    let mut next_shift = shift % n;
    for k in 0..partitions {
        let p = (first_partition.max(0) + k) as usize;
        if p > 0 && p.is_multiple_of(n) {
            next_shift += 1;
        }
        let first = (p + start) % n;
        let leader = arranged[first];
        let mut replicas = vec![leader];
        let mut with_replicas = BTreeSet::from([rack_of(leader)]);
        let mut step = 0usize;
        while replicas.len() < replication_factor.min(n) {
            // Every broker but the first is visited within n - 1 steps, and one of them
            // is always acceptable, so this ends.
            let at = (first + 1 + (next_shift * racks + step) % (n - 1).max(1)) % n;
            step += 1;
            let broker = arranged[at];
            let rack = rack_of(broker);
            if (!with_replicas.contains(rack) || with_replicas.len() == racks)
                && !replicas.contains(&broker)
            {
                replicas.push(broker);
                with_replicas.insert(rack);
            }
        }
        out.push(replicas);
    }
    out
}

/// `brokers` (id, rack) arranged so that racks alternate: the first broker (by id) of
/// each rack in rack order, then the second of each, and so on.
fn rack_alternated(brokers: &[(i32, String)]) -> Vec<i32> {
    let mut by_rack: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for (id, rack) in brokers {
        by_rack.entry(rack.as_str()).or_default().push(*id);
    }
    for ids in by_rack.values_mut() {
        ids.sort_unstable();
    }
    let most = by_rack.values().map(Vec::len).max().unwrap_or(0);
    (0..most)
        .flat_map(|i| by_rack.values().filter_map(move |ids| ids.get(i).copied()))
        .collect()
}

fn partition(tp: &TopicPartition) -> Resource {
    Resource::Partition(tp.clone())
}

/// `partitions` grouped by topic, in order.
fn by_topic(partitions: &[TopicPartition]) -> BTreeMap<String, Vec<i32>> {
    let mut m: BTreeMap<String, Vec<i32>> = BTreeMap::new();
    for tp in partitions {
        m.entry(tp.topic.clone()).or_default().push(tp.partition);
    }
    m
}

impl AdminClient {
    /// Elects leaders (ElectLeaders, sent to the controller): of `partitions`, or of
    /// every partition with None (then only the partitions an election moved, or could
    /// not, are answered). Per partition: `Ok` once elected, or the refusal
    /// (ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE,
    /// ELIGIBLE_LEADERS_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION).
    pub fn elect_leaders(
        &self,
        election: ElectionType,
        partitions: Option<&[TopicPartition]>,
    ) -> Result<BTreeMap<TopicPartition, Result<()>>> {
        let mut r = self.router.lock();
        r.refresh(Some(&[]))?;
        let request = ElectLeadersRequest::default()
            .with_election_type(election.code())
            .with_timeout_ms(r.timeout_ms())
            .with_topic_partitions(partitions.map(|ps| {
                by_topic(ps)
                    .into_iter()
                    .map(|(t, p)| {
                        TopicPartitions::default()
                            .with_topic(TopicName(kstr(t)))
                            .with_partitions(p)
                    })
                    .collect()
            }));
        let response = r.call_controller(&request, ELECT_LEADERS_VERSION)?;
        check(|| Resource::Cluster, response.error_code, None)?;
        let mut out = BTreeMap::new();
        for t in &response.replica_election_results {
            for p in &t.partition_result {
                let tp = TopicPartition::new(t.topic.0.to_string(), p.partition_id);
                let outcome = check(|| partition(&tp), p.error_code, p.error_message.as_ref());
                out.insert(tp, outcome.map_err(Into::into));
            }
        }
        Ok(out)
    }

    /// The log directories of each broker (DescribeLogDirs, sent to every broker the
    /// cluster lists), with the partition logs each holds and their sizes.
    pub fn describe_log_dirs(&self) -> Result<BTreeMap<i32, Result<Vec<LogDirDescription>>>> {
        let mut r = self.router.lock();
        r.refresh(Some(&[]))?;
        let mut out = BTreeMap::new();
        for id in r.node_ids() {
            let Some(addr) = r.node_addr(id) else {
                continue;
            };
            let request = DescribeLogDirsRequest::default().with_topics(None);
            let answer = r
                .call_addr(&addr, &request, DESCRIBE_LOG_DIRS_VERSION)
                .and_then(|response| {
                    check(|| Resource::Broker(id), response.error_code, None)?;
                    Ok(response
                        .results
                        .into_iter()
                        .map(|d| LogDirDescription {
                            path: d.log_dir.to_string(),
                            error: check(|| Resource::Broker(id), d.error_code, None).err(),
                            replicas: d
                                .topics
                                .iter()
                                .flat_map(|t| {
                                    t.partitions.iter().map(|p| ReplicaLogInfo {
                                        partition: TopicPartition::new(
                                            t.name.0.to_string(),
                                            p.partition_index,
                                        ),
                                        size: p.partition_size,
                                        offset_lag: p.offset_lag,
                                        is_future: p.is_future_key,
                                    })
                                })
                                .collect(),
                        })
                        .collect())
                });
            out.insert(id, answer);
        }
        Ok(out)
    }

    /// Moves partitions of the broker `broker` into other log directories of that
    /// broker (AlterReplicaLogDirs, Kafka's `Admin.alterReplicaLogDirs`): each partition
    /// with the path of the directory it goes to (as
    /// [`describe_log_dirs`](AdminClient::describe_log_dirs) shows it). Per partition:
    /// `Ok` once the broker started the move (it copies in the background:
    /// `describe_log_dirs` shows the future log until it is swapped in), or the refusal
    /// (LOG_DIR_NOT_FOUND, KAFKA_STORAGE_ERROR, UNKNOWN_TOPIC_OR_PARTITION,
    /// INVALID_CONFIG, CLUSTER_AUTHORIZATION_FAILED). A broker the cluster does not list
    /// is BROKER_ID_NOT_REGISTERED.
    pub fn alter_replica_log_dirs(
        &self,
        broker: i32,
        moves: &[(TopicPartition, String)],
    ) -> Result<BTreeMap<TopicPartition, Result<()>>> {
        let keys: Vec<TopicPartition> = moves.iter().map(|(tp, _)| tp.clone()).collect();
        super::unique(&keys, partition)?;
        let mut r = self.router.lock();
        r.refresh(Some(&[]))?;
        let addr = r.node_addr(broker).ok_or_else(|| {
            AdminError::new(
                Resource::Broker(broker),
                ErrorCode::BROKER_ID_NOT_REGISTERED,
                Some(format!("the cluster lists brokers {:?}", r.node_ids())),
            )
        })?;
        let mut by_dir: BTreeMap<&str, Vec<TopicPartition>> = BTreeMap::new();
        for (tp, dir) in moves {
            by_dir.entry(dir).or_default().push(tp.clone());
        }
        let request = AlterReplicaLogDirsRequest::default().with_dirs(
            by_dir
                .into_iter()
                .map(|(dir, tps)| {
                    AlterReplicaLogDir::default()
                        .with_path(kstr(dir))
                        .with_topics(
                            by_topic(&tps)
                                .into_iter()
                                .map(|(t, ps)| {
                                    AlterReplicaLogDirTopic::default()
                                        .with_name(TopicName(kstr(t)))
                                        .with_partitions(ps)
                                })
                                .collect(),
                        )
                })
                .collect(),
        );
        let response = r.call_addr(&addr, &request, ALTER_REPLICA_LOG_DIRS_VERSION)?;
        let mut out = BTreeMap::new();
        for t in &response.results {
            for p in &t.partitions {
                let tp = TopicPartition::new(t.topic_name.0.to_string(), p.partition_index);
                let outcome = check(|| partition(&tp), p.error_code, None);
                out.insert(tp, outcome.map_err(Into::into));
            }
        }
        Ok(out)
    }

    /// Moves partitions to new replicas, or (None) cancels a move in progress
    /// (AlterPartitionReassignments, sent to the controller). Per partition: `Ok` once
    /// the controller took the change (the new replicas then catch up; see
    /// [`list_partition_reassignments`](AdminClient::list_partition_reassignments)),
    /// or the refusal (INVALID_REPLICA_ASSIGNMENT, NO_REASSIGNMENT_IN_PROGRESS,
    /// UNKNOWN_TOPIC_OR_PARTITION, ...).
    pub fn alter_partition_reassignments(
        &self,
        moves: &[(TopicPartition, Option<Vec<i32>>)],
    ) -> Result<BTreeMap<TopicPartition, Result<()>>> {
        let keys: Vec<TopicPartition> = moves.iter().map(|(tp, _)| tp.clone()).collect();
        super::unique(&keys, partition)?;
        self.router.lock().rounds(keys, false, |r, pending| {
            let mut topics: BTreeMap<&str, Vec<ReassignablePartition>> = BTreeMap::new();
            for (tp, target) in moves.iter().filter(|(tp, _)| pending.contains(tp)) {
                topics.entry(&tp.topic).or_default().push(
                    ReassignablePartition::default()
                        .with_partition_index(tp.partition)
                        .with_replicas(
                            target
                                .as_ref()
                                .map(|t| t.iter().copied().map(BrokerId).collect()),
                        ),
                );
            }
            let request = AlterPartitionReassignmentsRequest::default()
                .with_timeout_ms(r.timeout_ms())
                .with_topics(
                    topics
                        .into_iter()
                        .map(|(t, ps)| {
                            ReassignableTopic::default()
                                .with_name(TopicName(kstr(t)))
                                .with_partitions(ps)
                        })
                        .collect(),
                );
            let response = r.call_controller(&request, ALTER_REASSIGNMENTS_VERSION)?;
            if let Err(e) = check(
                || Resource::Cluster,
                response.error_code,
                response.error_message.as_ref(),
            ) {
                return Ok(pending
                    .iter()
                    .map(|tp| (tp.clone(), Outcome::from(Err::<(), _>(e.clone()))))
                    .collect());
            }
            Ok(response
                .responses
                .iter()
                .flat_map(|t| {
                    t.partitions.iter().map(|p| {
                        let tp = TopicPartition::new(t.name.0.to_string(), p.partition_index);
                        let o = check(|| partition(&tp), p.error_code, p.error_message.as_ref());
                        (tp, o.into())
                    })
                })
                .collect())
        })
    }

    /// The reassignments in progress (ListPartitionReassignments, sent to the
    /// controller): of `partitions` only, or all with None.
    pub fn list_partition_reassignments(
        &self,
        partitions: Option<&[TopicPartition]>,
    ) -> Result<BTreeMap<TopicPartition, PartitionReassignment>> {
        let request = ListPartitionReassignmentsRequest::default()
            .with_timeout_ms(self.router.lock().timeout_ms())
            .with_topics(partitions.map(|ps| {
                by_topic(ps)
                    .into_iter()
                    .map(|(t, p)| {
                        ListPartitionReassignmentsTopics::default()
                            .with_name(TopicName(kstr(t)))
                            .with_partition_indexes(p)
                    })
                    .collect()
            }));
        let listed = self.router.lock().rounds(vec![Cluster], true, |r, _| {
            let response = r.call_controller(&request, LIST_REASSIGNMENTS_VERSION)?;
            let outcome: Outcome<_> = check(
                || Resource::Cluster,
                response.error_code,
                response.error_message.as_ref(),
            )
            .map(|()| response.topics)
            .into();
            Ok(vec![(Cluster, outcome)])
        })?;
        let topics = listed.into_values().next().expect("one key")?;
        let mut out = BTreeMap::new();
        for t in topics {
            for p in t.partitions {
                out.insert(
                    TopicPartition::new(t.name.0.to_string(), p.partition_index),
                    PartitionReassignment {
                        replicas: node_ids(&p.replicas),
                        adding: node_ids(&p.adding_replicas),
                        removing: node_ids(&p.removing_replicas),
                    },
                );
            }
        }
        Ok(out)
    }
}
