//! Metadata records: every change to the cluster's metadata is one of these, proposed to
//! Raft, committed, and applied by every node in log order ([`super::image`]).
//!
//! A Raft entry's data is an envelope: version (`u8`, 1), the proposing node's id
//! (`i32`), the proposer's request id (`u64`, so it can match the outcome to its waiting
//! caller) and the record: its type (`u8`), its version (`u8`, 0 for every type today)
//! and its fields in the order they are declared below (see docs/format.md).

use super::codec::{Reader, Writer};
use crate::error::Result;

/// A topic's id: 16 random bytes chosen by the proposer of `CreateTopic` (Kafka's topic
/// id, printed in base64), so a topic deleted and created again under the same name is a
/// different topic.
pub(crate) type TopicId = [u8; 16];

/// Envelope version written by this code.
const ENVELOPE_VERSION: u8 = 1;
/// Record version written by this code for every record type.
const RECORD_VERSION: u8 = 0;

/// `CreateTopic`'s fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CreateTopic {
    /// Topic name.
    pub name: String,
    /// The new topic's id.
    pub topic_id: TopicId,
    /// Partition count (ignored when `assignment` is given: its length counts).
    pub partitions: i32,
    /// Replicas per partition (ignored when `assignment` is given).
    pub replication_factor: i16,
    /// Replicas of each partition chosen by the client, or None for the controller's
    /// placement.
    pub assignment: Option<Vec<Vec<i32>>>,
    /// Per-topic config overrides by Kafka name.
    pub configs: Vec<(String, String)>,
    /// True for `__consumer_offsets`, created by the controller only.
    pub internal: bool,
}

/// `AlterPartition`'s fields: an ISR change proposed by a partition's leader.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AlterPartition {
    /// Topic name.
    pub topic: String,
    /// The topic's id (a change for a recreated topic of the same name is refused).
    pub topic_id: TopicId,
    /// Partition index.
    pub partition: i32,
    /// The proposing leader.
    pub broker_id: i32,
    /// The proposing leader's broker epoch.
    pub broker_epoch: i64,
    /// The leader epoch the change was computed from.
    pub leader_epoch: i32,
    /// The partition epoch the change was computed from.
    pub partition_epoch: i32,
    /// The new in-sync replica set (must contain the leader).
    pub new_isr: Vec<i32>,
}

/// One partition named by a record: topic name and id, partition index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PartitionRef {
    /// Topic name.
    pub topic: String,
    /// The topic's id (a recreated topic of the same name is another topic).
    pub topic_id: TopicId,
    /// Partition index.
    pub partition: i32,
}

/// One change to the cluster's metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum MetadataRecord {
    /// Sets the cluster id, once (proposed by the first controller).
    InitCluster {
        /// Kafka-style base64 UUID.
        cluster_id: String,
    },
    /// A node starting: a new incarnation of broker `broker_id`. Its log index becomes the
    /// broker epoch; the broker starts fenced.
    RegisterBroker {
        /// Node id.
        broker_id: i32,
        /// Random per process start.
        incarnation: u64,
        /// Advertised Kafka listener, `host:port`.
        listener: String,
        /// The broker epoch of the node's last controlled shutdown, if its data
        /// directory says it shut down cleanly.
        clean_shutdown_epoch: Option<i64>,
    },
    /// The broker caught up with the metadata log and opened its logs: unfence it.
    BrokerReady {
        /// Node id.
        broker_id: i32,
        /// Its current broker epoch.
        broker_epoch: i64,
    },
    /// The controller did not hear from the broker for the session timeout.
    FenceBroker {
        /// Node id.
        broker_id: i32,
        /// The epoch being fenced.
        broker_epoch: i64,
    },
    /// Controlled shutdown: move leadership away, leave the ISRs, fence.
    ShutdownBroker {
        /// Node id.
        broker_id: i32,
        /// Its current broker epoch.
        broker_epoch: i64,
    },
    /// Creates a topic.
    CreateTopic(CreateTopic),
    /// Deletes a topic.
    DeleteTopic {
        /// Topic name.
        name: String,
        /// The id the proposer saw, so a recreated topic is not deleted by mistake.
        topic_id: Option<TopicId>,
    },
    /// Grows a topic's partition count.
    CreatePartitions {
        /// Topic name.
        name: String,
        /// The new total.
        total: i32,
        /// Replicas of each new partition, or None for the controller's placement.
        assignment: Option<Vec<Vec<i32>>>,
    },
    /// An ISR change from a partition leader.
    AlterPartition(AlterPartition),
    /// Replaces a topic's config overrides.
    AlterTopicConfig {
        /// Topic name.
        name: String,
        /// The full new set of overrides.
        configs: Vec<(String, String)>,
    },
    /// Reserves a block of producer ids for a broker.
    AllocateProducerIds {
        /// The broker asking.
        broker_id: i32,
        /// Its broker epoch.
        broker_epoch: i64,
        /// Ids in the block.
        count: i64,
    },
    /// Moves each partition's leadership back to its preferred replica (the first of
    /// its replicas) where that replica is an unfenced ISR member and does not lead it
    /// (the controller's automatic leader rebalance). Partitions where it cannot are
    /// left as they are.
    ElectPreferredLeaders {
        /// The partitions.
        partitions: Vec<PartitionRef>,
    },
}

mod kind {
    pub const INIT_CLUSTER: u8 = 1;
    pub const REGISTER_BROKER: u8 = 2;
    pub const BROKER_READY: u8 = 3;
    pub const FENCE_BROKER: u8 = 4;
    pub const SHUTDOWN_BROKER: u8 = 5;
    pub const CREATE_TOPIC: u8 = 6;
    pub const DELETE_TOPIC: u8 = 7;
    pub const CREATE_PARTITIONS: u8 = 8;
    pub const ALTER_PARTITION: u8 = 9;
    pub const ALTER_TOPIC_CONFIG: u8 = 10;
    pub const ALLOCATE_PRODUCER_IDS: u8 = 11;
    pub const ELECT_PREFERRED_LEADERS: u8 = 12;
}

fn put_assignment(w: &mut Writer, a: &Option<Vec<Vec<i32>>>) {
    match a {
        None => w.bool(false),
        Some(parts) => {
            w.bool(true);
            w.u32(parts.len() as u32);
            for p in parts {
                w.i32s(p);
            }
        }
    }
}

fn get_assignment(r: &mut Reader<'_>) -> Result<Option<Vec<Vec<i32>>>> {
    if !r.bool()? {
        return Ok(None);
    }
    let n = r.count(4)?;
    (0..n).map(|_| r.i32s()).collect::<Result<_>>().map(Some)
}

fn put_pairs(w: &mut Writer, pairs: &[(String, String)]) {
    w.pairs(pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())));
}

impl MetadataRecord {
    /// A short name for logs.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            MetadataRecord::InitCluster { .. } => "InitCluster",
            MetadataRecord::RegisterBroker { .. } => "RegisterBroker",
            MetadataRecord::BrokerReady { .. } => "BrokerReady",
            MetadataRecord::FenceBroker { .. } => "FenceBroker",
            MetadataRecord::ShutdownBroker { .. } => "ShutdownBroker",
            MetadataRecord::CreateTopic(_) => "CreateTopic",
            MetadataRecord::DeleteTopic { .. } => "DeleteTopic",
            MetadataRecord::CreatePartitions { .. } => "CreatePartitions",
            MetadataRecord::AlterPartition(_) => "AlterPartition",
            MetadataRecord::AlterTopicConfig { .. } => "AlterTopicConfig",
            MetadataRecord::AllocateProducerIds { .. } => "AllocateProducerIds",
            MetadataRecord::ElectPreferredLeaders { .. } => "ElectPreferredLeaders",
        }
    }

    /// Appends the record (type, version, fields).
    pub(crate) fn encode(&self, w: &mut Writer) {
        match self {
            MetadataRecord::InitCluster { cluster_id } => {
                w.u8(kind::INIT_CLUSTER);
                w.u8(RECORD_VERSION);
                w.str(cluster_id);
            }
            MetadataRecord::RegisterBroker {
                broker_id,
                incarnation,
                listener,
                clean_shutdown_epoch,
            } => {
                w.u8(kind::REGISTER_BROKER);
                w.u8(RECORD_VERSION);
                w.i32(*broker_id);
                w.u64(*incarnation);
                w.str(listener);
                w.i64(clean_shutdown_epoch.unwrap_or(-1));
            }
            MetadataRecord::BrokerReady {
                broker_id,
                broker_epoch,
            } => {
                w.u8(kind::BROKER_READY);
                w.u8(RECORD_VERSION);
                w.i32(*broker_id);
                w.i64(*broker_epoch);
            }
            MetadataRecord::FenceBroker {
                broker_id,
                broker_epoch,
            } => {
                w.u8(kind::FENCE_BROKER);
                w.u8(RECORD_VERSION);
                w.i32(*broker_id);
                w.i64(*broker_epoch);
            }
            MetadataRecord::ShutdownBroker {
                broker_id,
                broker_epoch,
            } => {
                w.u8(kind::SHUTDOWN_BROKER);
                w.u8(RECORD_VERSION);
                w.i32(*broker_id);
                w.i64(*broker_epoch);
            }
            MetadataRecord::CreateTopic(c) => {
                w.u8(kind::CREATE_TOPIC);
                w.u8(RECORD_VERSION);
                w.str(&c.name);
                w.raw(&c.topic_id);
                w.i32(c.partitions);
                w.i16(c.replication_factor);
                put_assignment(w, &c.assignment);
                put_pairs(w, &c.configs);
                w.bool(c.internal);
            }
            MetadataRecord::DeleteTopic { name, topic_id } => {
                w.u8(kind::DELETE_TOPIC);
                w.u8(RECORD_VERSION);
                w.str(name);
                match topic_id {
                    None => w.bool(false),
                    Some(id) => {
                        w.bool(true);
                        w.raw(id);
                    }
                }
            }
            MetadataRecord::CreatePartitions {
                name,
                total,
                assignment,
            } => {
                w.u8(kind::CREATE_PARTITIONS);
                w.u8(RECORD_VERSION);
                w.str(name);
                w.i32(*total);
                put_assignment(w, assignment);
            }
            MetadataRecord::AlterPartition(a) => {
                w.u8(kind::ALTER_PARTITION);
                w.u8(RECORD_VERSION);
                w.str(&a.topic);
                w.raw(&a.topic_id);
                w.i32(a.partition);
                w.i32(a.broker_id);
                w.i64(a.broker_epoch);
                w.i32(a.leader_epoch);
                w.i32(a.partition_epoch);
                w.i32s(&a.new_isr);
            }
            MetadataRecord::AlterTopicConfig { name, configs } => {
                w.u8(kind::ALTER_TOPIC_CONFIG);
                w.u8(RECORD_VERSION);
                w.str(name);
                put_pairs(w, configs);
            }
            MetadataRecord::AllocateProducerIds {
                broker_id,
                broker_epoch,
                count,
            } => {
                w.u8(kind::ALLOCATE_PRODUCER_IDS);
                w.u8(RECORD_VERSION);
                w.i32(*broker_id);
                w.i64(*broker_epoch);
                w.i64(*count);
            }
            MetadataRecord::ElectPreferredLeaders { partitions } => {
                w.u8(kind::ELECT_PREFERRED_LEADERS);
                w.u8(RECORD_VERSION);
                w.u32(partitions.len() as u32);
                for p in partitions {
                    w.str(&p.topic);
                    w.raw(&p.topic_id);
                    w.i32(p.partition);
                }
            }
        }
    }

    /// Reads one record (type, version, fields).
    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<MetadataRecord> {
        let kind = r.u8()?;
        let version = r.u8()?;
        if version != RECORD_VERSION {
            return Err(r.error(format!(
                "record type {kind} has version {version}; this node reads version {RECORD_VERSION}"
            )));
        }
        let broker_and_epoch =
            |r: &mut Reader<'_>| -> Result<(i32, i64)> { Ok((r.i32()?, r.i64()?)) };
        Ok(match kind {
            kind::INIT_CLUSTER => MetadataRecord::InitCluster {
                cluster_id: r.str()?,
            },
            kind::REGISTER_BROKER => {
                let broker_id = r.i32()?;
                let incarnation = r.u64()?;
                let listener = r.str()?;
                let epoch = r.i64()?;
                MetadataRecord::RegisterBroker {
                    broker_id,
                    incarnation,
                    listener,
                    clean_shutdown_epoch: (epoch >= 0).then_some(epoch),
                }
            }
            kind::BROKER_READY => {
                let (broker_id, broker_epoch) = broker_and_epoch(r)?;
                MetadataRecord::BrokerReady {
                    broker_id,
                    broker_epoch,
                }
            }
            kind::FENCE_BROKER => {
                let (broker_id, broker_epoch) = broker_and_epoch(r)?;
                MetadataRecord::FenceBroker {
                    broker_id,
                    broker_epoch,
                }
            }
            kind::SHUTDOWN_BROKER => {
                let (broker_id, broker_epoch) = broker_and_epoch(r)?;
                MetadataRecord::ShutdownBroker {
                    broker_id,
                    broker_epoch,
                }
            }
            kind::CREATE_TOPIC => MetadataRecord::CreateTopic(CreateTopic {
                name: r.str()?,
                topic_id: r.fixed()?,
                partitions: r.i32()?,
                replication_factor: r.i16()?,
                assignment: get_assignment(r)?,
                configs: r.pairs()?,
                internal: r.bool()?,
            }),
            kind::DELETE_TOPIC => MetadataRecord::DeleteTopic {
                name: r.str()?,
                topic_id: if r.bool()? { Some(r.fixed()?) } else { None },
            },
            kind::CREATE_PARTITIONS => MetadataRecord::CreatePartitions {
                name: r.str()?,
                total: r.i32()?,
                assignment: get_assignment(r)?,
            },
            kind::ALTER_PARTITION => MetadataRecord::AlterPartition(AlterPartition {
                topic: r.str()?,
                topic_id: r.fixed()?,
                partition: r.i32()?,
                broker_id: r.i32()?,
                broker_epoch: r.i64()?,
                leader_epoch: r.i32()?,
                partition_epoch: r.i32()?,
                new_isr: r.i32s()?,
            }),
            kind::ALTER_TOPIC_CONFIG => MetadataRecord::AlterTopicConfig {
                name: r.str()?,
                configs: r.pairs()?,
            },
            kind::ALLOCATE_PRODUCER_IDS => {
                let (broker_id, broker_epoch) = broker_and_epoch(r)?;
                MetadataRecord::AllocateProducerIds {
                    broker_id,
                    broker_epoch,
                    count: r.i64()?,
                }
            }
            kind::ELECT_PREFERRED_LEADERS => {
                // At least a string length, 16 id bytes and a partition each.
                let n = r.count(24)?;
                let partitions = (0..n)
                    .map(|_| {
                        Ok(PartitionRef {
                            topic: r.str()?,
                            topic_id: r.fixed()?,
                            partition: r.i32()?,
                        })
                    })
                    .collect::<Result<_>>()?;
                MetadataRecord::ElectPreferredLeaders { partitions }
            }
            other => {
                return Err(r.error(format!("unknown metadata record type {other}")));
            }
        })
    }
}

/// A record as proposed: who proposed it and under which request id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Envelope {
    /// The proposing node.
    pub proposer: i32,
    /// The proposer's id for this proposal (matched against its waiting callers).
    pub request_id: u64,
    /// The change.
    pub record: MetadataRecord,
}

impl Envelope {
    /// The bytes of a Raft entry's data.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut w = Writer::new();
        w.u8(ENVELOPE_VERSION);
        w.i32(self.proposer);
        w.u64(self.request_id);
        self.record.encode(&mut w);
        w.into_bytes()
    }

    /// Reads a Raft entry's data; `location` names the entry in errors.
    pub(crate) fn decode(data: &[u8], location: &str) -> Result<Envelope> {
        let mut r = Reader::new(data, location);
        let version = r.u8()?;
        if version != ENVELOPE_VERSION {
            return Err(r.error(format!(
                "metadata entry version {version}; this node reads version {ENVELOPE_VERSION}"
            )));
        }
        let proposer = r.i32()?;
        let request_id = r.u64()?;
        let record = MetadataRecord::decode(&mut r)?;
        r.finish()?;
        Ok(Envelope {
            proposer,
            request_id,
            record,
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    /// One of every record type.
    pub(crate) fn samples() -> Vec<MetadataRecord> {
        vec![
            MetadataRecord::InitCluster {
                cluster_id: "abc".into(),
            },
            MetadataRecord::RegisterBroker {
                broker_id: 1,
                incarnation: 42,
                listener: "127.0.0.1:9092".into(),
                clean_shutdown_epoch: Some(7),
            },
            MetadataRecord::RegisterBroker {
                broker_id: 2,
                incarnation: 43,
                listener: "h:1".into(),
                clean_shutdown_epoch: None,
            },
            MetadataRecord::BrokerReady {
                broker_id: 1,
                broker_epoch: 3,
            },
            MetadataRecord::FenceBroker {
                broker_id: 1,
                broker_epoch: 3,
            },
            MetadataRecord::ShutdownBroker {
                broker_id: 1,
                broker_epoch: 3,
            },
            MetadataRecord::CreateTopic(CreateTopic {
                name: "t".into(),
                topic_id: [9; 16],
                partitions: 3,
                replication_factor: 2,
                assignment: Some(vec![vec![1, 2], vec![2, 3]]),
                configs: vec![("retention.ms".into(), "10".into())],
                internal: false,
            }),
            MetadataRecord::DeleteTopic {
                name: "t".into(),
                topic_id: Some([1; 16]),
            },
            MetadataRecord::CreatePartitions {
                name: "t".into(),
                total: 5,
                assignment: None,
            },
            MetadataRecord::AlterPartition(AlterPartition {
                topic: "t".into(),
                topic_id: [2; 16],
                partition: 1,
                broker_id: 2,
                broker_epoch: 5,
                leader_epoch: 1,
                partition_epoch: 4,
                new_isr: vec![2, 3],
            }),
            MetadataRecord::AlterTopicConfig {
                name: "t".into(),
                configs: vec![],
            },
            MetadataRecord::AllocateProducerIds {
                broker_id: 1,
                broker_epoch: 3,
                count: 1000,
            },
            MetadataRecord::ElectPreferredLeaders {
                partitions: vec![
                    PartitionRef {
                        topic: "t".into(),
                        topic_id: [3; 16],
                        partition: 2,
                    },
                    PartitionRef {
                        topic: "u".into(),
                        topic_id: [4; 16],
                        partition: 0,
                    },
                ],
            },
        ]
    }

    #[test]
    fn every_record_round_trips() {
        for record in samples() {
            let env = Envelope {
                proposer: 3,
                request_id: 77,
                record,
            };
            let bytes = env.encode();
            assert_eq!(Envelope::decode(&bytes, "test").unwrap(), env);
            // Every strict prefix is an error, never a panic or a wrong record.
            for cut in 0..bytes.len() {
                assert!(Envelope::decode(&bytes[..cut], "test").is_err());
            }
        }
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = Envelope::decode(&bytes, "fuzz");
        }
    }
}
