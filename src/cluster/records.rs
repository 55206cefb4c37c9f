//! Metadata records: every change to the cluster's metadata is one of these, proposed to
//! Raft, committed, and applied by every node in log order ([`super::image`]).
//!
//! A Raft entry's data is an envelope: version (`u8`, 1), the proposing node's id
//! (`i32`), the proposer's request id (`u64`, so it can match the outcome to its waiting
//! caller) and the record: its type (`u8`), its version (`u8`, 0 for every type but
//! `RegisterBroker`) and its fields in the order they are declared below (see docs/format.md).

use crate::error::Result;
use crate::security::SecurityProtocol;
use crate::security::acl::{self, AclBinding, AclFilter};
use crate::security::credentials::{self, CredentialChange};
use crate::storage::codec::{Reader, Writer};

/// A topic's id: 16 random bytes chosen by the proposer of `CreateTopic` (Kafka's topic
/// id, printed in base64), so a topic deleted and created again under the same name is a
/// different topic.
pub(crate) type TopicId = [u8; 16];

/// Envelope version written by this code.
const ENVELOPE_VERSION: u8 = 1;
/// Record version written by this code for every record type but `RegisterBroker`.
const RECORD_VERSION: u8 = 0;
/// `RegisterBroker`'s version (1 adds the replication listener, 2 every named listener;
/// 0 and 1 are still read).
const REGISTER_BROKER_VERSION: u8 = 2;

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

/// Kafka's id of a security protocol (`SecurityProtocol.id`).
fn protocol_id(p: SecurityProtocol) -> i16 {
    match p {
        SecurityProtocol::Plaintext => 0,
        SecurityProtocol::Ssl => 1,
        SecurityProtocol::SaslPlaintext => 2,
        SecurityProtocol::SaslSsl => 3,
    }
}

/// A count (`u32`) of endpoints, each: name (string), host (string), port (`u16`),
/// security protocol (`i16`, Kafka's id: 0 PLAINTEXT, 1 SSL, 2 SASL_PLAINTEXT,
/// 3 SASL_SSL).
pub(crate) fn put_endpoints(w: &mut Writer, endpoints: &[Endpoint]) {
    w.u32(endpoints.len() as u32);
    for e in endpoints {
        w.str(&e.name);
        w.str(&e.host);
        w.u16(e.port);
        w.i16(protocol_id(e.protocol));
    }
}

/// Reads what [`put_endpoints`] wrote.
pub(crate) fn get_endpoints(r: &mut Reader<'_>) -> Result<Vec<Endpoint>> {
    // Two empty strings, a port and a protocol: 12 bytes at least.
    let n = r.count(12)?;
    let mut endpoints = Vec::with_capacity(n);
    for _ in 0..n {
        let name = r.str()?;
        let host = r.str()?;
        let port = r.u16()?;
        let protocol = match r.i16()? {
            0 => SecurityProtocol::Plaintext,
            1 => SecurityProtocol::Ssl,
            2 => SecurityProtocol::SaslPlaintext,
            3 => SecurityProtocol::SaslSsl,
            other => {
                return Err(r.error(format!(
                    "listener {name} has security protocol id {other}; known ids are 0 to 3"
                )));
            }
        };
        endpoints.push(Endpoint {
            name,
            host,
            port,
            protocol,
        });
    }
    Ok(endpoints)
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
    pub const ALTER_SCRAM_CREDENTIALS: u8 = 13;
    pub const CREATE_ACLS: u8 = 14;
    pub const DELETE_ACLS: u8 = 15;
}

/// Tag of a credential upsert in `AlterScramCredentials`.
const UPSERT: u8 = 1;
/// Tag of a credential deletion in `AlterScramCredentials`.
const DELETE: u8 = 2;

/// An optional string: `bool` present, then the string.
pub(crate) fn put_opt_str(w: &mut Writer, s: Option<&str>) {
    match s {
        None => w.bool(false),
        Some(s) => {
            w.bool(true);
            w.str(s);
        }
    }
}

/// Reads what [`put_opt_str`] wrote.
pub(crate) fn get_opt_str(r: &mut Reader<'_>) -> Result<Option<String>> {
    Ok(if r.bool()? { Some(r.str()?) } else { None })
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
            MetadataRecord::AlterScramCredentials { .. } => "AlterScramCredentials",
            MetadataRecord::CreateAcls { .. } => "CreateAcls",
            MetadataRecord::DeleteAcls { .. } => "DeleteAcls",
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
                replication_listener,
                endpoints,
            } => {
                w.u8(kind::REGISTER_BROKER);
                w.u8(REGISTER_BROKER_VERSION);
                w.i32(*broker_id);
                w.u64(*incarnation);
                w.str(listener);
                w.i64(clean_shutdown_epoch.unwrap_or(-1));
                put_opt_str(w, replication_listener.as_deref());
                put_endpoints(w, endpoints);
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
            MetadataRecord::AlterScramCredentials { changes } => {
                w.u8(kind::ALTER_SCRAM_CREDENTIALS);
                w.u8(RECORD_VERSION);
                w.u32(changes.len() as u32);
                for c in changes {
                    match c {
                        CredentialChange::Upsert { user, credential } => {
                            w.u8(UPSERT);
                            credentials::put_credential(w, user, credential);
                        }
                        CredentialChange::Delete { user, mechanism } => {
                            w.u8(DELETE);
                            w.str(user);
                            w.u8(mechanism.kafka_type() as u8);
                        }
                    }
                }
            }
            MetadataRecord::CreateAcls { bindings } => {
                w.u8(kind::CREATE_ACLS);
                w.u8(RECORD_VERSION);
                w.u32(bindings.len() as u32);
                for b in bindings {
                    acl::put_binding(w, b);
                }
            }
            MetadataRecord::DeleteAcls { filters } => {
                w.u8(kind::DELETE_ACLS);
                w.u8(RECORD_VERSION);
                w.u32(filters.len() as u32);
                for f in filters {
                    acl::put_filter(w, f);
                }
            }
        }
    }

    /// Reads one record (type, version, fields).
    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<MetadataRecord> {
        let kind = r.u8()?;
        let version = r.u8()?;
        let newest = match kind {
            kind::REGISTER_BROKER => REGISTER_BROKER_VERSION,
            _ => RECORD_VERSION,
        };
        if version > newest {
            return Err(r.error(format!(
                "record type {kind} has version {version}; this node reads versions up to {newest}"
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
                let replication_listener = if version >= 1 { get_opt_str(r)? } else { None };
                let endpoints = if version >= 2 {
                    get_endpoints(r)?
                } else {
                    Vec::new()
                };
                MetadataRecord::RegisterBroker {
                    broker_id,
                    incarnation,
                    listener,
                    clean_shutdown_epoch: (epoch >= 0).then_some(epoch),
                    replication_listener,
                    endpoints,
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
            kind::ALTER_SCRAM_CREDENTIALS => {
                // At least a tag, a string length and a mechanism each.
                let n = r.count(6)?;
                let changes = (0..n)
                    .map(|_| match r.u8()? {
                        UPSERT => {
                            let (user, credential) = credentials::get_credential(r)?;
                            Ok(CredentialChange::Upsert { user, credential })
                        }
                        DELETE => {
                            let user = r.str()?;
                            let mechanism = credentials::get_mechanism(r, &user)?;
                            Ok(CredentialChange::Delete { user, mechanism })
                        }
                        other => Err(r.error(format!("unknown credential change {other}"))),
                    })
                    .collect::<Result<_>>()?;
                MetadataRecord::AlterScramCredentials { changes }
            }
            kind::CREATE_ACLS => {
                let n = r.count(14)?;
                let bindings = (0..n).map(|_| acl::get_binding(r)).collect::<Result<_>>()?;
                MetadataRecord::CreateAcls { bindings }
            }
            kind::DELETE_ACLS => {
                let n = r.count(7)?;
                let filters = (0..n).map(|_| acl::get_filter(r)).collect::<Result<_>>()?;
                MetadataRecord::DeleteAcls { filters }
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
    use crate::security::acl::{AclOperation, AclPermission, PatternType, ResourceType};
    use crate::security::scram::{ScramCredential, ScramMechanism};
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
            },
            MetadataRecord::RegisterBroker {
                broker_id: 2,
                incarnation: 43,
                listener: "h:1".into(),
                clean_shutdown_epoch: None,
                replication_listener: None,
                endpoints: vec![],
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

    #[test]
    fn a_version_0_registration_has_no_replication_listener() {
        let record = MetadataRecord::RegisterBroker {
            broker_id: 4,
            incarnation: 9,
            listener: "h:1".into(),
            clean_shutdown_epoch: None,
            replication_listener: None,
            endpoints: vec![],
        };
        let mut w = Writer::new();
        record.encode(&mut w);
        let mut bytes = w.into_bytes();
        // Version 0: the same fields without the optional listener and the endpoints.
        bytes[1] = 0;
        bytes.truncate(bytes.len() - 5);
        let mut r = Reader::new(&bytes, "v0");
        assert_eq!(MetadataRecord::decode(&mut r).unwrap(), record);
        r.finish().unwrap();
        bytes[1] = 3;
        assert!(MetadataRecord::decode(&mut Reader::new(&bytes, "v3")).is_err());
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
            }
        );
        r.finish().unwrap();
    }

    #[test]
    fn a_version_2_registration_lays_out_its_endpoints() {
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
        };
        let mut w = Writer::new();
        record.encode(&mut w);
        let bytes = w.into_bytes();
        assert_eq!(bytes[1], 2, "version");
        // ... replication listener absent, then 1 endpoint: "EXT", "b", port, SSL (1).
        let tail: &[u8] = &[
            0, 0, 0, 0, 1, 0, 0, 0, 3, b'E', b'X', b'T', 0, 0, 0, 1, b'b', 1, 2, 0, 1,
        ];
        assert!(bytes.ends_with(tail), "{bytes:?}");
        let mut bad = bytes.clone();
        let at = bad.len() - 1;
        bad[at] = 9;
        let e = MetadataRecord::decode(&mut Reader::new(&bad, "bad")).unwrap_err();
        assert!(e.to_string().contains("security protocol id 9"), "{e}");
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = Envelope::decode(&bytes, "fuzz");
        }
    }
}
