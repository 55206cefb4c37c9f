//! The metadata records' binary codec (see docs/format.md): one small function per
//! record type or field group, and [`MetadataRecord::encode`]/[`MetadataRecord::decode`]
//! dispatching on the type.
//!
//! A Raft entry's data is an envelope: version (`u8`, 1), the proposing node's id
//! (`i32`), the proposer's request id (`u64`) and the record: its type (`u8`), its
//! version (`u8`, 0 for every type but `InitCluster` and `RegisterBroker`) and its
//! fields in the order they are declared in [`super`].

use super::{
    AlterPartition, CreateTopic, Endpoint, Envelope, MetadataRecord, PartitionRef, Stamp,
    SupportedFeature,
};
use crate::error::Result;
use crate::security::SecurityProtocol;
use crate::security::acl;
use crate::security::credentials::{self, CredentialChange};
use crate::security::quota;
use crate::storage::codec::{Reader, Writer};

/// Envelope version written by this code (2 adds the [`Stamp`]; 1 is still read).
const ENVELOPE_VERSION: u8 = 2;
/// Record version written by this code for every record type but `InitCluster` and
/// `RegisterBroker`.
const RECORD_VERSION: u8 = 0;
/// `InitCluster`'s version (1 adds the feature levels; 0 is still read).
const INIT_CLUSTER_VERSION: u8 = 1;
/// `RegisterBroker`'s version (1 adds the replication listener, 2 every named listener,
/// 3 the rack, 4 the supported features; 0 to 3 are still read).
const REGISTER_BROKER_VERSION: u8 = 4;

/// Record type ids.
pub(super) mod kind {
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
    pub const REGISTER_VOTER_DIRECTORY: u8 = 16;
    pub const ELECT_UNCLEAN_LEADERS: u8 = 32;
    pub const ALTER_PARTITION_REASSIGNMENT: u8 = 33;
    pub const ALTER_CLIENT_QUOTAS: u8 = 40;
    pub const UNREGISTER_BROKER: u8 = 43;
    pub const ALTER_GROUP_CONFIG: u8 = 44;
    pub const ALTER_BROKER_CONFIG: u8 = 45;
    pub const FEATURE_LEVEL: u8 = 46;
    pub const REPLICAS_OFFLINE: u8 = 48;
}

/// Tag of a credential upsert in `AlterScramCredentials`.
const UPSERT: u8 = 1;
/// Tag of a credential deletion in `AlterScramCredentials`.
const DELETE: u8 = 2;

impl MetadataRecord {
    /// The record's type id.
    fn kind(&self) -> u8 {
        match self {
            MetadataRecord::InitCluster { .. } => kind::INIT_CLUSTER,
            MetadataRecord::RegisterBroker { .. } => kind::REGISTER_BROKER,
            MetadataRecord::BrokerReady { .. } => kind::BROKER_READY,
            MetadataRecord::FenceBroker { .. } => kind::FENCE_BROKER,
            MetadataRecord::ShutdownBroker { .. } => kind::SHUTDOWN_BROKER,
            MetadataRecord::CreateTopic(_) => kind::CREATE_TOPIC,
            MetadataRecord::DeleteTopic { .. } => kind::DELETE_TOPIC,
            MetadataRecord::CreatePartitions { .. } => kind::CREATE_PARTITIONS,
            MetadataRecord::AlterPartition(_) => kind::ALTER_PARTITION,
            MetadataRecord::AlterTopicConfig { .. } => kind::ALTER_TOPIC_CONFIG,
            MetadataRecord::AllocateProducerIds { .. } => kind::ALLOCATE_PRODUCER_IDS,
            MetadataRecord::ElectPreferredLeaders { .. } => kind::ELECT_PREFERRED_LEADERS,
            MetadataRecord::AlterScramCredentials { .. } => kind::ALTER_SCRAM_CREDENTIALS,
            MetadataRecord::CreateAcls { .. } => kind::CREATE_ACLS,
            MetadataRecord::DeleteAcls { .. } => kind::DELETE_ACLS,
            MetadataRecord::RegisterVoterDirectory { .. } => kind::REGISTER_VOTER_DIRECTORY,
            MetadataRecord::ElectUncleanLeaders { .. } => kind::ELECT_UNCLEAN_LEADERS,
            MetadataRecord::AlterPartitionReassignment { .. } => kind::ALTER_PARTITION_REASSIGNMENT,
            MetadataRecord::AlterClientQuotas { .. } => kind::ALTER_CLIENT_QUOTAS,
            MetadataRecord::UnregisterBroker { .. } => kind::UNREGISTER_BROKER,
            MetadataRecord::AlterGroupConfig { .. } => kind::ALTER_GROUP_CONFIG,
            MetadataRecord::AlterBrokerConfig { .. } => kind::ALTER_BROKER_CONFIG,
            MetadataRecord::FeatureLevel { .. } => kind::FEATURE_LEVEL,
            MetadataRecord::ReplicasOffline { .. } => kind::REPLICAS_OFFLINE,
        }
    }

    /// Appends the record (type, version, fields).
    pub(crate) fn encode(&self, w: &mut Writer) {
        let kind = self.kind();
        w.u8(kind);
        w.u8(newest_version(kind));
        match self {
            MetadataRecord::InitCluster {
                cluster_id,
                features,
            } => {
                w.str(cluster_id);
                put_levels(w, features);
            }
            MetadataRecord::RegisterBroker { .. } => put_registration(w, self),
            MetadataRecord::BrokerReady {
                broker_id,
                broker_epoch,
            }
            | MetadataRecord::FenceBroker {
                broker_id,
                broker_epoch,
            }
            | MetadataRecord::ShutdownBroker {
                broker_id,
                broker_epoch,
            } => put_broker_epoch(w, *broker_id, *broker_epoch),
            MetadataRecord::CreateTopic(c) => put_create_topic(w, c),
            MetadataRecord::DeleteTopic { name, topic_id } => {
                w.str(name);
                put_opt_id(w, topic_id.as_ref());
            }
            MetadataRecord::CreatePartitions {
                name,
                total,
                assignment,
            } => {
                w.str(name);
                w.i32(*total);
                put_assignment(w, assignment);
            }
            MetadataRecord::AlterPartition(a) => put_alter_partition(w, a),
            MetadataRecord::AlterTopicConfig { name, configs } => {
                w.str(name);
                put_pairs(w, configs);
            }
            MetadataRecord::AllocateProducerIds {
                broker_id,
                broker_epoch,
                count,
            } => {
                put_broker_epoch(w, *broker_id, *broker_epoch);
                w.i64(*count);
            }
            MetadataRecord::ElectPreferredLeaders { partitions } => {
                put_list(w, partitions, put_partition_ref)
            }
            MetadataRecord::AlterScramCredentials { changes } => {
                put_list(w, changes, put_credential_change)
            }
            MetadataRecord::CreateAcls { bindings } => put_list(w, bindings, acl::put_binding),
            MetadataRecord::DeleteAcls { filters } => put_list(w, filters, acl::put_filter),
            MetadataRecord::RegisterVoterDirectory {
                node_id,
                directory_id,
            } => {
                w.i32(*node_id);
                w.str(directory_id);
            }
            MetadataRecord::ElectUncleanLeaders { partitions } => {
                put_list(w, partitions, put_partition_ref)
            }
            MetadataRecord::AlterPartitionReassignment { partition, target } => {
                put_partition_ref(w, partition);
                w.bool(target.is_some());
                if let Some(t) = target {
                    w.i32s(t);
                }
            }
            MetadataRecord::AlterClientQuotas { changes } => {
                put_list(w, changes, quota::put_change)
            }
            MetadataRecord::UnregisterBroker { broker_id } => w.i32(*broker_id),
            MetadataRecord::AlterGroupConfig { group, changes } => {
                w.str(group);
                put_list(w, changes, |w, (key, value)| {
                    w.str(key);
                    put_opt_str(w, value.as_deref());
                })
            }
            MetadataRecord::AlterBrokerConfig { broker, changes } => {
                put_broker_config(w, *broker, changes)
            }
            MetadataRecord::FeatureLevel { name, level } => {
                w.str(name);
                w.i16(*level);
            }
            MetadataRecord::ReplicasOffline {
                broker_id,
                broker_epoch,
                partitions,
            } => {
                put_broker_epoch(w, *broker_id, *broker_epoch);
                put_list(w, partitions, |w, (id, p)| {
                    w.raw(id);
                    w.i32(*p);
                });
            }
        }
    }

    /// Reads one record (type, version, fields).
    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<MetadataRecord> {
        let kind = r.u8()?;
        let version = r.u8()?;
        let newest = newest_version(kind);
        if version > newest {
            return Err(r.error(format!(
                "record type {kind} has version {version}; this node reads versions up to {newest}"
            )));
        }
        match kind {
            kind::INIT_CLUSTER => Ok(MetadataRecord::InitCluster {
                cluster_id: r.str()?,
                features: if version >= 1 {
                    get_levels(r)?
                } else {
                    Vec::new()
                },
            }),
            kind::REGISTER_BROKER => get_registration(r, version),
            kind::BROKER_READY | kind::FENCE_BROKER | kind::SHUTDOWN_BROKER => {
                get_broker_epoch_record(r, kind)
            }
            kind::CREATE_TOPIC => Ok(MetadataRecord::CreateTopic(get_create_topic(r)?)),
            kind::DELETE_TOPIC => Ok(MetadataRecord::DeleteTopic {
                name: r.str()?,
                topic_id: get_opt_id(r)?,
            }),
            kind::CREATE_PARTITIONS => Ok(MetadataRecord::CreatePartitions {
                name: r.str()?,
                total: r.i32()?,
                assignment: get_assignment(r)?,
            }),
            kind::ALTER_PARTITION => Ok(MetadataRecord::AlterPartition(get_alter_partition(r)?)),
            kind::ALTER_TOPIC_CONFIG => Ok(MetadataRecord::AlterTopicConfig {
                name: r.str()?,
                configs: r.pairs()?,
            }),
            kind::ALLOCATE_PRODUCER_IDS => get_allocate_producer_ids(r),
            // At least a string length, 16 id bytes and a partition each.
            kind::ELECT_PREFERRED_LEADERS => Ok(MetadataRecord::ElectPreferredLeaders {
                partitions: get_list(r, 24, get_partition_ref)?,
            }),
            // At least a tag, a string length and a mechanism each.
            kind::ALTER_SCRAM_CREDENTIALS => Ok(MetadataRecord::AlterScramCredentials {
                changes: get_list(r, 6, get_credential_change)?,
            }),
            kind::CREATE_ACLS => Ok(MetadataRecord::CreateAcls {
                bindings: get_list(r, 14, acl::get_binding)?,
            }),
            kind::DELETE_ACLS => Ok(MetadataRecord::DeleteAcls {
                filters: get_list(r, 7, acl::get_filter)?,
            }),
            kind::REGISTER_VOTER_DIRECTORY => Ok(MetadataRecord::RegisterVoterDirectory {
                node_id: r.i32()?,
                directory_id: r.str()?,
            }),
            kind::ELECT_UNCLEAN_LEADERS => Ok(MetadataRecord::ElectUncleanLeaders {
                partitions: get_list(r, 24, get_partition_ref)?,
            }),
            kind::ALTER_PARTITION_REASSIGNMENT => get_reassignment(r),
            // At least two entity tags, a key length and a value tag each.
            kind::ALTER_CLIENT_QUOTAS => Ok(MetadataRecord::AlterClientQuotas {
                changes: get_list(r, 5, quota::get_change)?,
            }),
            kind::UNREGISTER_BROKER => Ok(MetadataRecord::UnregisterBroker {
                broker_id: r.i32()?,
            }),
            // At least a key length and a value tag each.
            kind::ALTER_GROUP_CONFIG => Ok(MetadataRecord::AlterGroupConfig {
                group: r.str()?,
                changes: get_list(r, 3, |r| Ok((r.str()?, get_opt_str(r)?)))?,
            }),
            kind::ALTER_BROKER_CONFIG => {
                let (broker, changes) = get_broker_config(r)?;
                Ok(MetadataRecord::AlterBrokerConfig { broker, changes })
            }
            kind::FEATURE_LEVEL => Ok(MetadataRecord::FeatureLevel {
                name: r.str()?,
                level: r.i16()?,
            }),
            // A topic id and a partition each.
            kind::REPLICAS_OFFLINE => Ok(MetadataRecord::ReplicasOffline {
                broker_id: r.i32()?,
                broker_epoch: r.i64()?,
                partitions: get_list(r, 20, |r| Ok((r.fixed()?, r.i32()?)))?,
            }),
            other => Err(r.error(format!("unknown metadata record type {other}"))),
        }
    }
}

impl Envelope {
    /// The bytes of a Raft entry's data.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut w = Writer::new();
        w.u8(ENVELOPE_VERSION);
        w.i32(self.proposer);
        w.u64(self.request_id);
        // Every envelope this code writes is stamped; version 1 had none.
        let stamp = self.stamp.unwrap_or(Stamp {
            incarnation: 0,
            issued_ms: 0,
            expires_ms: 0,
        });
        w.u64(stamp.incarnation);
        w.u64(stamp.issued_ms);
        w.u64(stamp.expires_ms);
        self.record.encode(&mut w);
        w.into_bytes()
    }

    /// Reads a Raft entry's data; `location` names the entry in errors.
    pub(crate) fn decode(data: &[u8], location: &str) -> Result<Envelope> {
        let mut r = Reader::new(data, location);
        let version = r.u8()?;
        if !(1..=ENVELOPE_VERSION).contains(&version) {
            return Err(r.error(format!(
                "metadata entry version {version}; this node reads versions 1 to {ENVELOPE_VERSION}"
            )));
        }
        let proposer = r.i32()?;
        let request_id = r.u64()?;
        let stamp = if version >= 2 {
            Some(Stamp {
                incarnation: r.u64()?,
                issued_ms: r.u64()?,
                expires_ms: r.u64()?,
            })
        } else {
            None
        };
        let record = MetadataRecord::decode(&mut r)?;
        r.finish()?;
        Ok(Envelope {
            proposer,
            request_id,
            stamp,
            record,
        })
    }
}

/// The version this code writes of record type `kind` (and the newest it reads).
fn newest_version(kind: u8) -> u8 {
    match kind {
        kind::INIT_CLUSTER => INIT_CLUSTER_VERSION,
        kind::REGISTER_BROKER => REGISTER_BROKER_VERSION,
        _ => RECORD_VERSION,
    }
}

/// A count (`u32`), then each item.
fn put_list<T>(w: &mut Writer, items: &[T], put: impl Fn(&mut Writer, &T)) {
    w.u32(items.len() as u32);
    for item in items {
        put(w, item);
    }
}

/// Reads what [`put_list`] wrote; every item takes at least `min_size` bytes.
fn get_list<T>(
    r: &mut Reader<'_>,
    min_size: usize,
    get: impl Fn(&mut Reader<'_>) -> Result<T>,
) -> Result<Vec<T>> {
    let n = r.count(min_size)?;
    (0..n).map(|_| get(r)).collect()
}

/// A broker id (`i32`) and broker epoch (`i64`).
fn put_broker_epoch(w: &mut Writer, broker_id: i32, broker_epoch: i64) {
    w.i32(broker_id);
    w.i64(broker_epoch);
}

/// `BrokerReady`, `FenceBroker` or `ShutdownBroker` (by `kind`): a broker id and epoch.
fn get_broker_epoch_record(r: &mut Reader<'_>, kind: u8) -> Result<MetadataRecord> {
    let broker_id = r.i32()?;
    let broker_epoch = r.i64()?;
    Ok(match kind {
        kind::BROKER_READY => MetadataRecord::BrokerReady {
            broker_id,
            broker_epoch,
        },
        kind::FENCE_BROKER => MetadataRecord::FenceBroker {
            broker_id,
            broker_epoch,
        },
        _ => MetadataRecord::ShutdownBroker {
            broker_id,
            broker_epoch,
        },
    })
}

/// `RegisterBroker`'s fields (version 4): id, incarnation, listener, clean shutdown
/// epoch (-1 for none), replication listener, endpoints, rack, supported features.
fn put_registration(w: &mut Writer, record: &MetadataRecord) {
    let MetadataRecord::RegisterBroker {
        broker_id,
        incarnation,
        listener,
        clean_shutdown_epoch,
        replication_listener,
        endpoints,
        rack,
        features,
    } = record
    else {
        unreachable!("put_registration is given a RegisterBroker");
    };
    w.i32(*broker_id);
    w.u64(*incarnation);
    w.str(listener);
    w.i64(clean_shutdown_epoch.unwrap_or(-1));
    put_opt_str(w, replication_listener.as_deref());
    put_endpoints(w, endpoints);
    put_opt_str(w, rack.as_deref());
    put_supported_features(w, features);
}

/// Reads `RegisterBroker`'s fields at `version` (0 lacks the replication listener,
/// 0 and 1 the endpoints, 0 to 2 the rack, 0 to 3 the supported features).
fn get_registration(r: &mut Reader<'_>, version: u8) -> Result<MetadataRecord> {
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
    let rack = if version >= 3 { get_opt_str(r)? } else { None };
    let features = if version >= 4 {
        get_supported_features(r)?
    } else {
        Vec::new()
    };
    Ok(MetadataRecord::RegisterBroker {
        broker_id,
        incarnation,
        listener,
        clean_shutdown_epoch: (epoch >= 0).then_some(epoch),
        replication_listener,
        endpoints,
        rack,
        features,
    })
}

/// A count (`u32`) of feature levels, each: name (string), level (`i16`).
pub(crate) fn put_levels(w: &mut Writer, levels: &[(String, i16)]) {
    put_list(w, levels, |w, (name, level)| {
        w.str(name);
        w.i16(*level);
    });
}

/// Reads what [`put_levels`] wrote.
pub(crate) fn get_levels(r: &mut Reader<'_>) -> Result<Vec<(String, i16)>> {
    // A string length and a level each.
    get_list(r, 6, |r| Ok((r.str()?, r.i16()?)))
}

/// A count (`u32`) of supported features, each: name (string), lowest and highest
/// level (`i16`, `i16`).
pub(crate) fn put_supported_features(w: &mut Writer, features: &[SupportedFeature]) {
    put_list(w, features, |w, f| {
        w.str(&f.name);
        w.i16(f.min);
        w.i16(f.max);
    });
}

/// Reads what [`put_supported_features`] wrote.
pub(crate) fn get_supported_features(r: &mut Reader<'_>) -> Result<Vec<SupportedFeature>> {
    // A string length and two levels each.
    get_list(r, 8, |r| {
        Ok(SupportedFeature {
            name: r.str()?,
            min: r.i16()?,
            max: r.i16()?,
        })
    })
}

fn put_create_topic(w: &mut Writer, c: &CreateTopic) {
    w.str(&c.name);
    w.raw(&c.topic_id);
    w.i32(c.partitions);
    w.i16(c.replication_factor);
    put_assignment(w, &c.assignment);
    put_pairs(w, &c.configs);
    w.bool(c.internal);
}

fn get_create_topic(r: &mut Reader<'_>) -> Result<CreateTopic> {
    Ok(CreateTopic {
        name: r.str()?,
        topic_id: r.fixed()?,
        partitions: r.i32()?,
        replication_factor: r.i16()?,
        assignment: get_assignment(r)?,
        configs: r.pairs()?,
        internal: r.bool()?,
    })
}

fn put_alter_partition(w: &mut Writer, a: &AlterPartition) {
    w.str(&a.topic);
    w.raw(&a.topic_id);
    w.i32(a.partition);
    w.i32(a.broker_id);
    w.i64(a.broker_epoch);
    w.i32(a.leader_epoch);
    w.i32(a.partition_epoch);
    w.i32s(&a.new_isr);
}

fn get_alter_partition(r: &mut Reader<'_>) -> Result<AlterPartition> {
    Ok(AlterPartition {
        topic: r.str()?,
        topic_id: r.fixed()?,
        partition: r.i32()?,
        broker_id: r.i32()?,
        broker_epoch: r.i64()?,
        leader_epoch: r.i32()?,
        partition_epoch: r.i32()?,
        new_isr: r.i32s()?,
    })
}

fn get_allocate_producer_ids(r: &mut Reader<'_>) -> Result<MetadataRecord> {
    Ok(MetadataRecord::AllocateProducerIds {
        broker_id: r.i32()?,
        broker_epoch: r.i64()?,
        count: r.i64()?,
    })
}

/// `AlterPartitionReassignment`: the partition, whether a target follows (`bool`; none:
/// a cancellation), the target replicas.
fn get_reassignment(r: &mut Reader<'_>) -> Result<MetadataRecord> {
    let partition = get_partition_ref(r)?;
    let target = if r.bool()? { Some(r.i32s()?) } else { None };
    Ok(MetadataRecord::AlterPartitionReassignment { partition, target })
}

fn put_partition_ref(w: &mut Writer, p: &PartitionRef) {
    w.str(&p.topic);
    w.raw(&p.topic_id);
    w.i32(p.partition);
}

fn get_partition_ref(r: &mut Reader<'_>) -> Result<PartitionRef> {
    Ok(PartitionRef {
        topic: r.str()?,
        topic_id: r.fixed()?,
        partition: r.i32()?,
    })
}

/// A tag ([`UPSERT`] or [`DELETE`]), then the credential, or the user and mechanism.
fn put_credential_change(w: &mut Writer, c: &CredentialChange) {
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

fn get_credential_change(r: &mut Reader<'_>) -> Result<CredentialChange> {
    match r.u8()? {
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
    put_list(w, endpoints, |w, e| {
        w.str(&e.name);
        w.str(&e.host);
        w.u16(e.port);
        w.i16(protocol_id(e.protocol));
    });
}

/// Reads what [`put_endpoints`] wrote.
pub(crate) fn get_endpoints(r: &mut Reader<'_>) -> Result<Vec<Endpoint>> {
    // Two empty strings, a port and a protocol: 12 bytes at least.
    get_list(r, 12, get_endpoint)
}

fn get_endpoint(r: &mut Reader<'_>) -> Result<Endpoint> {
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
    Ok(Endpoint {
        name,
        host,
        port,
        protocol,
    })
}

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

/// An optional topic id: `bool` present, then its 16 bytes.
fn put_opt_id(w: &mut Writer, id: Option<&[u8; 16]>) {
    match id {
        None => w.bool(false),
        Some(id) => {
            w.bool(true);
            w.raw(id);
        }
    }
}

fn get_opt_id(r: &mut Reader<'_>) -> Result<Option<[u8; 16]>> {
    Ok(if r.bool()? { Some(r.fixed()?) } else { None })
}

/// An optional assignment: `bool` present, then a count (`u32`) of replica lists.
fn put_assignment(w: &mut Writer, a: &Option<Vec<Vec<i32>>>) {
    match a {
        None => w.bool(false),
        Some(parts) => {
            w.bool(true);
            put_list(w, parts, |w, p| w.i32s(p));
        }
    }
}

fn get_assignment(r: &mut Reader<'_>) -> Result<Option<Vec<Vec<i32>>>> {
    if !r.bool()? {
        return Ok(None);
    }
    get_list(r, 4, |r| r.i32s()).map(Some)
}

fn put_pairs(w: &mut Writer, pairs: &[(String, String)]) {
    w.pairs(pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())));
}

/// `AlterBrokerConfig` (and each broker's entry of the image's broker configs): the
/// broker id (`i32`, -1 for the cluster-wide default), then a count (`u32`) of keys,
/// each: key (string), value (optional string; none removes the key).
pub(crate) fn put_broker_config(
    w: &mut Writer,
    broker: Option<i32>,
    changes: &[(String, Option<String>)],
) {
    w.i32(broker.unwrap_or(-1));
    put_list(w, changes, |w, (k, v)| {
        w.str(k);
        put_opt_str(w, v.as_deref());
    });
}

/// Keys with their new values (None: removed), as `AlterBrokerConfig` carries them.
pub(crate) type ConfigChanges = Vec<(String, Option<String>)>;

/// Reads what [`put_broker_config`] wrote.
pub(crate) fn get_broker_config(r: &mut Reader<'_>) -> Result<(Option<i32>, ConfigChanges)> {
    let broker = r.i32()?;
    let broker = match broker {
        -1 => None,
        b if b >= 0 => Some(b),
        other => return Err(r.error(format!("broker config of broker id {other}"))),
    };
    // A key length and a value tag each.
    let changes = get_list(r, 5, |r| Ok((r.str()?, get_opt_str(r)?)))?;
    Ok((broker, changes))
}
