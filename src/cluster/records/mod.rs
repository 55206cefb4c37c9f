//! Metadata records: every change to the cluster's metadata is one of these, proposed to
//! Raft, committed, and applied by every node in log order ([`super::image`]).
//!
//! A record travels in an [`Envelope`] naming its proposer and request id, so the
//! proposer can match the outcome to its waiting caller; [`codec`] lays both out in
//! bytes (see docs/format.md).

pub(crate) mod codec;

use crate::security::SecurityProtocol;
use crate::security::acl::{AclBinding, AclFilter};
use crate::security::credentials::CredentialChange;
use crate::security::quota::QuotaChange;

/// A topic's id: 16 random bytes chosen by the proposer of `CreateTopic` (Kafka's topic
/// id, printed in base64), so a topic deleted and created again under the same name is a
/// different topic.
pub(crate) type TopicId = [u8; 16];

/// One listener a broker registers (Kafka's `BrokerRegistrationRecord` endpoint): its
/// name, the host and port clients of that listener are told, and its security
/// protocol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Endpoint {
    /// Listener name, upper-case (`PLAINTEXT`, `INTERNAL`, ...).
    pub name: String,
    /// Advertised host.
    pub host: String,
    /// Advertised port.
    pub port: u16,
    /// The listener's security protocol.
    pub protocol: SecurityProtocol,
}

impl Endpoint {
    /// `host:port`, the host bracketed when it is an IPv6 address.
    pub(crate) fn address(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

/// A feature's range of levels a node supports (Kafka's `BrokerRegistrationRecord`
/// feature: KIP-584), as it registers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SupportedFeature {
    /// The feature's name, as `transaction.version`.
    pub name: String,
    /// The lowest level the node supports.
    pub min: i16,
    /// The highest level the node supports.
    pub max: i16,
}

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
        /// The feature levels a new cluster starts at (each capped at the highest level
        /// every broker registered by then supports). Record version 1; version 0 has
        /// none: a cluster formed before finalized features stays at level 0 of each
        /// until an operator upgrades it.
        features: Vec<(String, i16)>,
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
        /// The listener other nodes' replica fetchers connect to (Kafka's
        /// `inter.broker.listener.name`), `host:port`, when it is not `listener`.
        /// Record version 1; version 0 has none.
        replication_listener: Option<String>,
        /// Every listener of the broker by name, as advertised (Kafka's
        /// `advertised.listeners`), so that each client is answered with the brokers'
        /// addresses on the listener it connected to. Record version 2; versions 0 and 1
        /// have none (their brokers are listed at `listener` on every listener).
        endpoints: Vec<Endpoint>,
        /// The broker's rack (Kafka's `broker.rack`), for rack-aware replica placement
        /// and fetching from the closest replica. Record version 3; older versions have
        /// none.
        rack: Option<String>,
        /// The levels of each feature the node supports. Record version 4; older
        /// versions have none (the node supports level 0 of every feature only).
        features: Vec<SupportedFeature>,
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
    /// Adds, replaces and removes users' SCRAM credentials, all or none (Kafka's
    /// `UserScramCredentialRecord` and `RemoveUserScramCredentialRecord`, from
    /// AlterUserScramCredentials).
    AlterScramCredentials {
        /// The changes, in order.
        changes: Vec<CredentialChange>,
    },
    /// Adds ACL bindings, all or none (Kafka's `AccessControlEntryRecord`, from
    /// CreateAcls).
    CreateAcls {
        /// The bindings; ones already present are kept once.
        bindings: Vec<AclBinding>,
    },
    /// Removes the ACL bindings that match any filter at the record's index (Kafka's
    /// `RemoveAccessControlEntryRecord`s, from DeleteAcls); the outcome lists what each
    /// filter removed.
    DeleteAcls {
        /// The filters.
        filters: Vec<AclFilter>,
    },
    /// Records the directory id (`meta.properties`' `directory.id`) a voter is known by,
    /// once (KIP-853's voter directory id): a node that comes back with another one (an
    /// empty data directory) is refused by the quorum and stops.
    RegisterVoterDirectory {
        /// Node id.
        node_id: i32,
        /// Kafka-style base64 UUID.
        directory_id: String,
    },
    /// Elects a leader among the live replicas outside the ISR for each partition that
    /// has none (Kafka's unclean election, only when an operator asks for it per
    /// partition through ElectLeaders): the first unfenced replica, in assignment order,
    /// leads and is the ISR alone. Partitions with a leader, or without an unfenced
    /// replica, are left as they are.
    ElectUncleanLeaders {
        /// The partitions.
        partitions: Vec<PartitionRef>,
    },
    /// Starts, replaces or cancels a partition's reassignment (KIP-455, Kafka's
    /// `PartitionChangeRecord` with adding and removing replicas).
    AlterPartitionReassignment {
        /// The partition.
        partition: PartitionRef,
        /// The target replicas, or None to cancel the reassignment in progress.
        target: Option<Vec<i32>>,
    },
    /// Sets and removes client quotas, all or none (Kafka's `ClientQuotaRecord`, from
    /// AlterClientQuotas).
    AlterClientQuotas {
        /// The changes, in order.
        changes: Vec<QuotaChange>,
    },
    /// Removes a broker's registration (Kafka's `UnregisterBrokerRecord`, from
    /// UnregisterBroker): refused while it is unfenced or holds a replica.
    UnregisterBroker {
        /// Node id.
        broker_id: i32,
    },
    /// Sets and removes a group's config overrides, all or none (Kafka's
    /// `ConfigRecord`s of a GROUP resource, from IncrementalAlterConfigs).
    AlterGroupConfig {
        /// The group id.
        group: String,
        /// The changes, in order: a key and its new value, or `None` to remove it.
        changes: Vec<(String, Option<String>)>,
    },
    /// Sets and removes dynamic broker configs, all or none (Kafka's `ConfigRecord` of a
    /// BROKER resource, from AlterConfigs and IncrementalAlterConfigs): the
    /// replication throttle rates of KIP-73.
    AlterBrokerConfig {
        /// The broker, or None for the cluster-wide default (resource name "").
        broker: Option<i32>,
        /// Each key with its new value, or None to remove it.
        changes: Vec<(String, Option<String>)>,
    },
    /// Finalizes a feature's level cluster-wide (Kafka's `FeatureLevelRecord`, from
    /// UpdateFeatures): refused unless every registered broker supports it; level 0
    /// removes the feature from the finalized ones.
    FeatureLevel {
        /// The feature, as `transaction.version`.
        name: String,
        /// Its new level.
        level: i16,
    },
    /// Replicas of a broker that are offline on it: their log directory failed (KIP-858).
    /// They leave the ISR (but as its last member), a leadership they hold moves, and
    /// they are elected by no election (not even an unclean one) until the broker
    /// registers again with a new broker epoch.
    ReplicasOffline {
        /// Node id.
        broker_id: i32,
        /// Its current broker epoch (an older one is refused).
        broker_epoch: i64,
        /// The partitions, as `(topic id, partition)`.
        partitions: Vec<(TopicId, i32)>,
    },
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
            MetadataRecord::AlterScramCredentials { .. } => "AlterScramCredentials",
            MetadataRecord::CreateAcls { .. } => "CreateAcls",
            MetadataRecord::DeleteAcls { .. } => "DeleteAcls",
            MetadataRecord::RegisterVoterDirectory { .. } => "RegisterVoterDirectory",
            MetadataRecord::ElectUncleanLeaders { .. } => "ElectUncleanLeaders",
            MetadataRecord::AlterPartitionReassignment { .. } => "AlterPartitionReassignment",
            MetadataRecord::AlterClientQuotas { .. } => "AlterClientQuotas",
            MetadataRecord::UnregisterBroker { .. } => "UnregisterBroker",
            MetadataRecord::AlterGroupConfig { .. } => "AlterGroupConfig",
            MetadataRecord::AlterBrokerConfig { .. } => "AlterBrokerConfig",
            MetadataRecord::FeatureLevel { .. } => "FeatureLevel",
            MetadataRecord::ReplicasOffline { .. } => "ReplicasOffline",
        }
    }
}

/// A record as proposed: who proposed it and under which request id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Envelope {
    /// The proposing node.
    pub proposer: i32,
    /// The proposer's id for this proposal (matched against its waiting callers).
    pub request_id: u64,
    /// The proposing process and its proposal's lifetime, by which the metadata image
    /// applies each proposal at most once (none in envelopes of version 1).
    pub stamp: Option<Stamp>,
    /// The change.
    pub record: MetadataRecord,
}

/// Which process proposed an envelope and for how long it may be applied: the times are
/// milliseconds since that process started (its own monotonic clock), so they compare
/// only with each other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stamp {
    /// The proposing process (random per start, as its broker registration's).
    pub incarnation: u64,
    /// When the proposal was first made.
    pub issued_ms: u64,
    /// When its proposer stops waiting for it (and proposing it again).
    pub expires_ms: u64,
}

#[cfg(test)]
pub(crate) mod tests {
    use super::codec::{kind, put_opt_str};
    use super::*;
    use crate::security::acl::{AclOperation, AclPermission, PatternType, ResourceType};
    use crate::security::scram::{ScramCredential, ScramMechanism};
    use crate::storage::codec::{Reader, Writer};
    use proptest::prelude::*;

    /// One of every record type.
    pub(crate) fn samples() -> Vec<MetadataRecord> {
        vec![
            MetadataRecord::InitCluster {
                cluster_id: "abc".into(),
                features: vec![],
            },
            MetadataRecord::InitCluster {
                cluster_id: "def".into(),
                features: vec![("transaction.version".into(), 2)],
            },
            MetadataRecord::FeatureLevel {
                name: "transaction.version".into(),
                level: 1,
            },
            MetadataRecord::RegisterBroker {
                broker_id: 1,
                incarnation: 42,
                listener: "127.0.0.1:9092".into(),
                clean_shutdown_epoch: Some(7),
                replication_listener: Some("127.0.0.1:9094".into()),
                endpoints: vec![
                    Endpoint {
                        name: "PLAINTEXT".into(),
                        host: "127.0.0.1".into(),
                        port: 9092,
                        protocol: SecurityProtocol::Plaintext,
                    },
                    Endpoint {
                        name: "INTERNAL".into(),
                        host: "::1".into(),
                        port: 9094,
                        protocol: SecurityProtocol::SaslSsl,
                    },
                ],
                rack: Some("eu-west-1a".into()),
                features: vec![SupportedFeature {
                    name: "transaction.version".into(),
                    min: 0,
                    max: 2,
                }],
            },
            registration(2, 43, "h:1"),
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
            MetadataRecord::AlterScramCredentials {
                changes: vec![
                    CredentialChange::Upsert {
                        user: "alice".into(),
                        credential: ScramCredential::new(ScramMechanism::Sha512, "pw", 4096),
                    },
                    CredentialChange::Delete {
                        user: "bob".into(),
                        mechanism: ScramMechanism::Sha256,
                    },
                ],
            },
            MetadataRecord::CreateAcls {
                bindings: vec![AclBinding {
                    resource_type: ResourceType::Topic,
                    resource_name: "events".into(),
                    pattern_type: PatternType::Prefixed,
                    principal: "User:alice".into(),
                    host: "*".into(),
                    operation: AclOperation::Read,
                    permission: AclPermission::Allow,
                }],
            },
            MetadataRecord::DeleteAcls {
                filters: vec![
                    AclFilter::any(),
                    AclFilter {
                        resource_name: Some("events".into()),
                        principal: Some("User:alice".into()),
                        ..AclFilter::any()
                    },
                ],
            },
            MetadataRecord::RegisterVoterDirectory {
                node_id: 2,
                directory_id: "d3HkQx2bT0mJ8wz1fLmC4A".into(),
            },
            MetadataRecord::ElectUncleanLeaders {
                partitions: vec![PartitionRef {
                    topic: "t".into(),
                    topic_id: [5; 16],
                    partition: 1,
                }],
            },
            MetadataRecord::AlterPartitionReassignment {
                partition: PartitionRef {
                    topic: "t".into(),
                    topic_id: [6; 16],
                    partition: 0,
                },
                target: Some(vec![3, 1, 2]),
            },
            MetadataRecord::AlterPartitionReassignment {
                partition: PartitionRef {
                    topic: "u".into(),
                    topic_id: [7; 16],
                    partition: 4,
                },
                target: None,
            },
            MetadataRecord::UnregisterBroker { broker_id: 4 },
            MetadataRecord::AlterGroupConfig {
                group: "g".into(),
                changes: vec![
                    ("consumer.session.timeout.ms".into(), Some("50000".into())),
                    ("share.auto.offset.reset".into(), None),
                ],
            },
            MetadataRecord::AlterBrokerConfig {
                broker: Some(2),
                changes: vec![
                    (
                        "leader.replication.throttled.rate".into(),
                        Some("1000".into()),
                    ),
                    ("follower.replication.throttled.rate".into(), None),
                ],
            },
            MetadataRecord::AlterBrokerConfig {
                broker: None,
                changes: vec![],
            },
            MetadataRecord::ReplicasOffline {
                broker_id: 2,
                broker_epoch: 5,
                partitions: vec![([8; 16], 0), ([8; 16], 3)],
            },
            MetadataRecord::AlterClientQuotas {
                changes: vec![
                    QuotaChange {
                        entity: crate::security::QuotaEntity {
                            user: Some(crate::security::EntityName::Name("alice".into())),
                            client_id: Some(crate::security::EntityName::Default),
                        },
                        key: crate::security::PRODUCER_BYTE_RATE.into(),
                        value: Some(1_048_576.0),
                    },
                    QuotaChange {
                        entity: crate::security::QuotaEntity {
                            user: None,
                            client_id: Some(crate::security::EntityName::Name("app".into())),
                        },
                        key: crate::security::REQUEST_PERCENTAGE.into(),
                        value: None,
                    },
                ],
            },
        ]
    }

    /// A `RegisterBroker` of node `broker_id` (process `incarnation`) at `listener`, and
    /// nothing else: no clean shutdown, no other listener, no rack, no feature.
    pub(crate) fn registration(broker_id: i32, incarnation: u64, listener: &str) -> MetadataRecord {
        MetadataRecord::RegisterBroker {
            broker_id,
            incarnation,
            listener: listener.into(),
            clean_shutdown_epoch: None,
            replication_listener: None,
            endpoints: vec![],
            rack: None,
            features: vec![],
        }
    }

    /// A `CreateTopic` of `name` (id `[name.len(); 16]`, internal if its name starts
    /// with `__`) with the replicas given per partition.
    pub(crate) fn assigned_topic(name: &str, assignment: Vec<Vec<i32>>) -> MetadataRecord {
        MetadataRecord::CreateTopic(CreateTopic {
            name: name.into(),
            topic_id: [name.len() as u8; 16],
            partitions: -1,
            replication_factor: -1,
            assignment: Some(assignment),
            configs: vec![],
            internal: name.starts_with("__"),
        })
    }

    #[test]
    fn every_record_round_trips() {
        for record in samples() {
            let env = Envelope {
                proposer: 3,
                request_id: 77,
                stamp: Some(Stamp {
                    incarnation: 5,
                    issued_ms: 1_000,
                    expires_ms: 31_000,
                }),
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

    #[test]
    fn a_version_1_envelope_has_no_stamp() {
        let record = MetadataRecord::InitCluster {
            cluster_id: "abc".into(),
            features: vec![],
        };
        let mut w = Writer::new();
        w.u8(1);
        w.i32(3);
        w.u64(77);
        record.encode(&mut w);
        let env = Envelope::decode(&w.into_bytes(), "v1").unwrap();
        assert_eq!(
            env,
            Envelope {
                proposer: 3,
                request_id: 77,
                stamp: None,
                record,
            }
        );
    }

    #[test]
    fn a_version_0_registration_has_no_replication_listener() {
        let record = registration(4, 9, "h:1");
        let mut w = Writer::new();
        record.encode(&mut w);
        let mut bytes = w.into_bytes();
        // Version 0: the same fields without the optional listener, the endpoints, the
        // rack and the features.
        bytes[1] = 0;
        bytes.truncate(bytes.len() - 10);
        let mut r = Reader::new(&bytes, "v0");
        assert_eq!(MetadataRecord::decode(&mut r).unwrap(), record);
        r.finish().unwrap();
        bytes[1] = 5;
        assert!(MetadataRecord::decode(&mut Reader::new(&bytes, "v5")).is_err());
    }

    #[test]
    fn a_version_1_registration_has_no_endpoints() {
        let mut w = Writer::new();
        w.u8(kind::REGISTER_BROKER);
        w.u8(1);
        w.i32(4);
        w.u64(9);
        w.str("h:1");
        w.i64(12);
        put_opt_str(&mut w, Some("h:2"));
        let bytes = w.into_bytes();
        let mut r = Reader::new(&bytes, "v1");
        assert_eq!(
            MetadataRecord::decode(&mut r).unwrap(),
            MetadataRecord::RegisterBroker {
                broker_id: 4,
                incarnation: 9,
                listener: "h:1".into(),
                clean_shutdown_epoch: Some(12),
                replication_listener: Some("h:2".into()),
                endpoints: vec![],
                rack: None,
                features: vec![],
            }
        );
        r.finish().unwrap();
    }

    #[test]
    fn a_version_2_registration_has_no_rack() {
        let record = registration(4, 9, "h:1");
        let mut w = Writer::new();
        record.encode(&mut w);
        let mut bytes = w.into_bytes();
        bytes[1] = 2;
        bytes.truncate(bytes.len() - 5);
        let mut r = Reader::new(&bytes, "v2");
        assert_eq!(MetadataRecord::decode(&mut r).unwrap(), record);
        r.finish().unwrap();
    }

    #[test]
    fn a_version_3_registration_lays_out_its_endpoints_and_rack() {
        let record = MetadataRecord::RegisterBroker {
            broker_id: 1,
            incarnation: 2,
            listener: "a:1".into(),
            clean_shutdown_epoch: None,
            replication_listener: None,
            endpoints: vec![Endpoint {
                name: "EXT".into(),
                host: "b".into(),
                port: 0x0102,
                protocol: SecurityProtocol::Ssl,
            }],
            rack: None,
            features: vec![],
        };
        let mut w = Writer::new();
        record.encode(&mut w);
        let bytes = w.into_bytes();
        assert_eq!(bytes[1], 4, "version");
        // ... replication listener absent, then 1 endpoint: "EXT", "b", port, SSL (1),
        // then no rack, no features.
        let tail: &[u8] = &[
            0, 0, 0, 0, 1, 0, 0, 0, 3, b'E', b'X', b'T', 0, 0, 0, 1, b'b', 1, 2, 0, 1, 0, 0, 0, 0,
            0,
        ];
        assert!(bytes.ends_with(tail), "{bytes:?}");
        let mut bad = bytes.clone();
        let at = bad.len() - 6;
        bad[at] = 9;
        let e = MetadataRecord::decode(&mut Reader::new(&bad, "bad")).unwrap_err();
        assert!(e.to_string().contains("security protocol id 9"), "{e}");
    }

    #[test]
    fn a_version_3_registration_has_no_features_and_lays_them_out_in_version_4() {
        let record = MetadataRecord::RegisterBroker {
            broker_id: 4,
            incarnation: 9,
            listener: "h:1".into(),
            clean_shutdown_epoch: None,
            replication_listener: None,
            endpoints: vec![],
            rack: None,
            features: vec![SupportedFeature {
                name: "tv".into(),
                min: 1,
                max: 2,
            }],
        };
        let mut w = Writer::new();
        record.encode(&mut w);
        let mut bytes = w.into_bytes();
        assert_eq!(bytes[1], 4, "version");
        // One feature: "tv", levels 1 to 2.
        let tail: &[u8] = &[0, 0, 0, 1, 0, 0, 0, 2, b't', b'v', 0, 1, 0, 2];
        assert!(bytes.ends_with(tail), "{bytes:?}");
        bytes[1] = 3;
        bytes.truncate(bytes.len() - tail.len());
        let mut r = Reader::new(&bytes, "v3");
        let MetadataRecord::RegisterBroker { features, .. } =
            MetadataRecord::decode(&mut r).unwrap()
        else {
            panic!("a registration");
        };
        assert_eq!(features, vec![]);
        r.finish().unwrap();
    }

    #[test]
    fn a_version_0_init_cluster_has_no_features_and_a_feature_level_is_laid_out() {
        let mut w = Writer::new();
        w.u8(kind::INIT_CLUSTER);
        w.u8(0);
        w.str("abc");
        let bytes = w.into_bytes();
        let mut r = Reader::new(&bytes, "v0");
        assert_eq!(
            MetadataRecord::decode(&mut r).unwrap(),
            MetadataRecord::InitCluster {
                cluster_id: "abc".into(),
                features: vec![],
            }
        );
        r.finish().unwrap();
        let mut w = Writer::new();
        MetadataRecord::FeatureLevel {
            name: "tv".into(),
            level: 2,
        }
        .encode(&mut w);
        // Kind 46, version 0, the name, the level.
        assert_eq!(w.into_bytes(), vec![46, 0, 0, 0, 0, 2, b't', b'v', 0, 2]);
    }

    #[test]
    fn replicas_offline_is_laid_out() {
        let mut w = Writer::new();
        MetadataRecord::ReplicasOffline {
            broker_id: 1,
            broker_epoch: 2,
            partitions: vec![([7; 16], 3)],
        }
        .encode(&mut w);
        // Kind 48, version 0, the broker id and epoch, one partition: its topic id and
        // index.
        let mut expected = vec![48, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 1];
        expected.extend_from_slice(&[7; 16]);
        expected.extend_from_slice(&[0, 0, 0, 3]);
        let bytes = w.into_bytes();
        assert_eq!(bytes, expected);
        // A count larger than the bytes left is an error, not an allocation.
        let mut bad = bytes.clone();
        bad[17] = 9;
        assert!(MetadataRecord::decode(&mut Reader::new(&bad, "bad")).is_err());
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = Envelope::decode(&bytes, "fuzz");
        }
    }
}
