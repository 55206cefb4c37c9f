//! The metadata image: the state the metadata log describes, and the deterministic rules
//! that apply one record to it.
//!
//! Every node applies the same committed records in the same order with [`MetadataImage::apply`]
//! and so holds the same image (the apply reads nothing but the image and the record: no
//! clock, no randomness, no local state). A record that breaks a rule is applied as a
//! rejection: the image does not change and the proposer is told why.
//!
//! Each record kind has a function of its own, which [`MetadataImage::apply`] dispatches
//! to; the snapshot codec is in [`codec`].
//!
//! Invariants (checked by the property test in `tests.rs` after every record):
//! - a partition's ISR is never empty, has no duplicates and is a subset of its replicas;
//! - its leader is -1 or an unfenced member of the ISR whose replica is not offline;
//! - its leader is -1 only when no ISR member is unfenced and online (no partition stays
//!   leaderless once an ISR member is back), and a fenced broker or an offline replica
//!   stays in an ISR only as its last member;
//! - its offline replicas are among its replicas, each once, each of a registered
//!   broker;
//! - leader epochs and partition epochs never go down; every leader change bumps the
//!   leader epoch, every leader, ISR or replica change bumps the partition epoch;
//! - a partition's replicas are distinct; the adding and removing replicas of a
//!   reassignment in progress are among them, disjoint, and leave at least one target
//!   replica (`reassign.rs`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::features;
use super::records::{
    AlterPartition, CreateTopic, Endpoint, MetadataRecord, PartitionRef, SupportedFeature, TopicId,
};
use crate::config::TopicConfig;
use crate::error::Error;
use crate::security::acl::{self, AclBinding, AclFilter};
use crate::security::credentials::{self, CredentialChange, Users};
use crate::security::quota::{self, QuotaChange, QuotaTable};

mod broker_configs;
mod codec;
mod offline;
mod once;
mod reassign;
mod unregister;

pub(crate) use once::ProposerWindow;
pub(crate) mod stored;

#[cfg(test)]
pub(crate) use broker_configs::LOG_DIR_MOVE_RATE;
pub(crate) use broker_configs::{
    BrokerConfigSource, BrokerConfigs, DYNAMIC_BROKER_KEYS, FOLLOWER_THROTTLED_RATE,
    LEADER_THROTTLED_RATE, UNTHROTTLED, apply_changes as apply_broker_changes,
    get_configs as get_broker_configs, put_configs as put_broker_configs,
    validate_change as validate_broker_change,
};

/// The internal topic of committed offsets.
pub(crate) const OFFSETS_TOPIC: &str = crate::broker::OFFSETS_TOPIC;
/// The internal topic of the transaction coordinators' state.
pub(crate) const TRANSACTION_STATE_TOPIC: &str = crate::transaction::log::TRANSACTION_STATE_TOPIC;
/// The share coordinators' internal topic.
pub(crate) const SHARE_GROUP_STATE_TOPIC: &str = crate::coordinator::SHARE_GROUP_STATE_TOPIC;

/// No leader.
pub(crate) const NO_LEADER: i32 = -1;

/// Most producer ids one `AllocateProducerIds` may reserve.
pub(crate) const MAX_PRODUCER_ID_BLOCK: i64 = 1_000_000;

/// A registered broker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BrokerRegistration {
    /// Node id.
    pub id: i32,
    /// Broker epoch: the log index of its registration.
    pub epoch: i64,
    /// Random per process start.
    pub incarnation: u64,
    /// Advertised Kafka listener, `host:port`.
    pub listener: String,
    /// The listener replica fetchers connect to, when not `listener`.
    pub replication_listener: Option<String>,
    /// Every listener by name as advertised; empty for a broker registered by a node
    /// that wrote `RegisterBroker` version 0 or 1 (it is listed at `listener` on every
    /// listener).
    pub endpoints: Vec<Endpoint>,
    /// The broker's rack (`broker.rack`), if it has one.
    pub rack: Option<String>,
    /// The levels of each feature the broker supports; empty for a broker registered
    /// by a node that wrote `RegisterBroker` version 0 to 3 (it supports level 0 of
    /// every feature only).
    pub features: Vec<SupportedFeature>,
    /// Fenced brokers lead nothing, are in no ISR (but as an ISR's last member) and are
    /// not listed to clients.
    pub fenced: bool,
    /// Set by a controlled shutdown, cleared by the next registration.
    pub shut_down: bool,
}

impl BrokerRegistration {
    /// The listener as `(host, port)`; port 0 if it does not parse.
    pub(crate) fn host_port(&self) -> (String, i32) {
        match self.listener.rsplit_once(':') {
            Some((host, port)) => (
                host.trim_start_matches('[')
                    .trim_end_matches(']')
                    .to_string(),
                port.parse::<u16>().map(i32::from).unwrap_or(0),
            ),
            None => (self.listener.clone(), 0),
        }
    }

    /// The `(host, port)` clients of listener `name` are told to reach this broker at
    /// (Kafka answers each request with the endpoints of the listener it arrived on), or
    /// None if the broker has no listener of that name. A broker that registered no
    /// endpoints (an older node) is at its one listener whatever the name.
    pub(crate) fn endpoint(&self, name: &str) -> Option<(String, i32)> {
        if self.endpoints.is_empty() {
            return Some(self.host_port());
        }
        self.endpoints
            .iter()
            .find(|e| e.name == name)
            .map(|e| (e.host.clone(), i32::from(e.port)))
    }
}

/// One partition of a topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PartitionImage {
    /// Replicas in assignment order (the first is the preferred leader).
    pub replicas: Vec<i32>,
    /// In-sync replicas, in replica order.
    pub isr: Vec<i32>,
    /// Current leader, or [`NO_LEADER`].
    pub leader: i32,
    /// Bumped on every leader change.
    pub leader_epoch: i32,
    /// Bumped on every leader or ISR change.
    pub partition_epoch: i32,
    /// Replicas a reassignment in progress adds (in `replicas` already; KIP-455).
    pub adding_replicas: Vec<i32>,
    /// Replicas a reassignment in progress removes once the new ones are in sync.
    pub removing_replicas: Vec<i32>,
    /// Replicas offline on their broker (their log directory failed, KIP-858), in
    /// replica order: in no ISR but as its last member, and elected by no election
    /// (not even an unclean one) until their broker registers again.
    pub offline: Vec<i32>,
}

impl PartitionImage {
    /// True if `broker` holds a replica.
    pub(crate) fn hosts(&self, broker: i32) -> bool {
        self.replicas.contains(&broker)
    }

    /// True if `broker`'s replica is offline (see [`PartitionImage::offline`]).
    pub(crate) fn is_offline(&self, broker: i32) -> bool {
        self.offline.contains(&broker)
    }
}

/// A topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TopicImage {
    /// Topic id.
    pub id: TopicId,
    /// Name.
    pub name: String,
    /// True for `__consumer_offsets`.
    pub internal: bool,
    /// Per-topic config overrides by Kafka name.
    pub configs: BTreeMap<String, String>,
    /// Partitions, by index.
    pub partitions: Vec<PartitionImage>,
}

impl TopicImage {
    /// The overrides as a [`TopicConfig`].
    pub(crate) fn config(&self) -> TopicConfig {
        self.configs
            .iter()
            .fold(TopicConfig::new(), |c, (k, v)| c.set(k, v))
    }
}

/// What an applied record produced, for its proposer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Applied {
    /// Done (or nothing to do: the image already said so).
    Done,
    /// The registration's broker epoch.
    BrokerEpoch(i64),
    /// The created topic's id.
    TopicCreated(TopicId),
    /// The first id of the reserved producer-id block.
    ProducerIds(i64),
    /// The ACL bindings each filter of a `DeleteAcls` removed.
    AclsRemoved(Vec<Vec<AclBinding>>),
}

/// Why a record was applied as a rejection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Rejected {
    /// The cluster id was set already to another value.
    ClusterIdSet(String),
    /// A broker that is not registered, or an epoch that is not its current one.
    StaleBroker {
        /// Node id.
        broker: i32,
        /// Why.
        reason: String,
    },
    /// A topic of that name exists.
    TopicExists(String),
    /// No such topic (or a different topic of that name).
    UnknownTopic(String),
    /// No such partition.
    UnknownPartition {
        /// Topic.
        topic: String,
        /// Partition asked for.
        partition: i32,
        /// Partitions the topic has.
        count: i32,
    },
    /// The topic name breaks a rule.
    InvalidTopicName {
        /// The name.
        name: String,
        /// The rule.
        reason: String,
    },
    /// A bad partition count.
    InvalidPartitions {
        /// Topic.
        topic: String,
        /// Why.
        reason: String,
    },
    /// A replication factor below 1 or above the unfenced brokers.
    InvalidReplicationFactor {
        /// Topic.
        topic: String,
        /// Why.
        reason: String,
    },
    /// A bad client-chosen assignment.
    InvalidReplicaAssignment {
        /// Topic.
        topic: String,
        /// Why.
        reason: String,
    },
    /// A bad config override.
    InvalidConfig {
        /// Kafka name of the setting.
        key: String,
        /// Why.
        reason: String,
    },
    /// An ISR change from a broker that does not lead the partition, or with an older
    /// leader epoch.
    FencedLeaderEpoch {
        /// `topic-partition`.
        partition: String,
        /// Why.
        reason: String,
    },
    /// An ISR change computed from an older partition epoch.
    InvalidUpdateVersion {
        /// `topic-partition`.
        partition: String,
        /// Why.
        reason: String,
    },
    /// An ISR that is empty, lacks the leader, names a non-replica or a fenced broker.
    IneligibleReplica {
        /// `topic-partition`.
        partition: String,
        /// Why.
        reason: String,
    },
    /// A copy of a proposal applied before (proposals are applied at most once).
    Duplicate {
        /// The proposing node.
        proposer: i32,
        /// Its request id.
        request_id: u64,
    },
    /// A registration of a node that does not support a finalized feature level, or a
    /// feature level that a registered broker does not support.
    UnsupportedFeature {
        /// The feature.
        feature: String,
        /// Why.
        reason: String,
    },
    /// A proposal committed after its proposer had given up on it.
    Expired {
        /// The proposing node.
        proposer: i32,
        /// Its request id.
        request_id: u64,
    },
}

impl std::fmt::Display for Rejected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", Error::from(self.clone()))
    }
}

impl From<Rejected> for Error {
    fn from(r: Rejected) -> Error {
        match r {
            Rejected::ClusterIdSet(id) => Error::InvalidConfig {
                key: "cluster.id".into(),
                reason: format!("the cluster id is {id} already"),
            },
            Rejected::StaleBroker { broker, reason } => Error::StaleBrokerEpoch { broker, reason },
            Rejected::TopicExists(t) => Error::TopicExists(t),
            Rejected::UnknownTopic(t) => Error::UnknownTopic(t),
            Rejected::UnknownPartition {
                topic,
                partition,
                count,
            } => Error::UnknownPartition {
                topic,
                partition,
                count,
            },
            Rejected::InvalidTopicName { name, reason } => Error::InvalidTopicName { name, reason },
            Rejected::InvalidPartitions { topic, reason } => {
                Error::InvalidPartitions { topic, reason }
            }
            Rejected::InvalidReplicationFactor { topic, reason } => {
                Error::InvalidReplicationFactor { topic, reason }
            }
            Rejected::InvalidReplicaAssignment { topic, reason } => {
                Error::InvalidReplicaAssignment { topic, reason }
            }
            Rejected::InvalidConfig { key, reason } => Error::InvalidConfig { key, reason },
            Rejected::FencedLeaderEpoch { partition, reason } => {
                Error::FencedLeaderEpoch { partition, reason }
            }
            Rejected::InvalidUpdateVersion { partition, reason } => {
                Error::InvalidUpdateVersion { partition, reason }
            }
            Rejected::IneligibleReplica { partition, reason } => {
                Error::IneligibleReplica { partition, reason }
            }
            Rejected::UnsupportedFeature { feature, reason } => Error::InvalidConfig {
                key: feature,
                reason,
            },
            Rejected::Duplicate {
                proposer,
                request_id,
            } => Error::Timeout(format!(
                "request {request_id} of node {proposer} was applied already; its outcome was not seen"
            )),
            Rejected::Expired {
                proposer,
                request_id,
            } => Error::Timeout(format!(
                "request {request_id} of node {proposer} was committed after its proposer gave up on it; not applied"
            )),
        }
    }
}

/// The outcome of applying one record.
pub(crate) type Outcome = std::result::Result<Applied, Rejected>;

/// The cluster's metadata at one index of the metadata log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct MetadataImage {
    /// The index of the last record applied (0 = nothing yet).
    pub index: u64,
    /// Set by the first `InitCluster`.
    pub cluster_id: Option<String>,
    /// Registered brokers by id.
    pub brokers: BTreeMap<i32, BrokerRegistration>,
    /// Topics by name. Unchanged topics are shared between consecutive images, so a
    /// listener can skip them with `Arc::ptr_eq`.
    pub topics: BTreeMap<String, Arc<TopicImage>>,
    /// The first producer id of the next block.
    pub next_producer_id: i64,
    /// Users' SCRAM credentials (shared between images until they change).
    pub users: Arc<Users>,
    /// ACL bindings (shared between images until they change).
    pub acls: Arc<BTreeSet<AclBinding>>,
    /// What each proposing process (node id, incarnation) had applied, so that a copy
    /// of a proposal is never applied twice ([`MetadataImage::apply_envelope`]).
    pub proposals: BTreeMap<(i32, u64), ProposerWindow>,
    /// The directory id (`meta.properties`' `directory.id`) each voter registered
    /// first: a voter is known by it for good ([`MetadataImage::register_voter_directory`]).
    pub directories: BTreeMap<i32, String>,
    /// Client quotas (shared between images until they change).
    pub client_quotas: QuotaTable,
    /// Groups' config overrides by group id (shared between images until they change).
    pub group_configs: Arc<crate::coordinator::group_configs::GroupConfigs>,
    /// Dynamic broker configs (the replication throttle rates), per broker and
    /// cluster-wide.
    pub broker_configs: BrokerConfigs,
    /// The finalized level of each feature above level 0 (KIP-584; see
    /// [`features`]).
    pub features: BTreeMap<String, i16>,
}

fn pname(topic: &str, partition: usize) -> String {
    format!("{topic}-{partition}")
}

/// Kafka's rack-unaware replica placement over `brokers` (sorted), with the start
/// index and shift derived from the topic id so every node computes the same placement:
/// [`crate::admin::assign_replicas`], which generated reassignment plans use too.
pub(crate) fn place_replicas(
    brokers: &[i32],
    partitions: i32,
    replication_factor: usize,
    first_partition: i32,
    start: usize,
    shift: usize,
) -> Vec<Vec<i32>> {
    crate::admin::assign_replicas(
        brokers,
        partitions,
        replication_factor,
        first_partition,
        start,
        shift,
    )
}

/// The placement start index and shift of a topic, from its id.
fn placement_seed(id: &TopicId, n: usize) -> (usize, usize) {
    let a = u64::from_be_bytes(id[..8].try_into().expect("8 bytes"));
    let b = u64::from_be_bytes(id[8..].try_into().expect("8 bytes"));
    let n = n.max(1) as u64;
    ((a % n) as usize, (b % n) as usize)
}

impl MetadataImage {
    /// True if `broker` is registered and unfenced.
    pub(crate) fn is_unfenced(&self, broker: i32) -> bool {
        self.brokers.get(&broker).is_some_and(|b| !b.fenced)
    }

    /// Unfenced brokers, by id.
    pub(crate) fn unfenced_brokers(&self) -> Vec<i32> {
        self.brokers
            .values()
            .filter(|b| !b.fenced)
            .map(|b| b.id)
            .collect()
    }

    /// The finalized level of feature `name` (0 when it is not finalized).
    pub(crate) fn finalized_level(&self, name: &str) -> i16 {
        self.features.get(name).copied().unwrap_or(0)
    }

    /// The topic `name`.
    pub(crate) fn topic(&self, name: &str) -> Option<&Arc<TopicImage>> {
        self.topics.get(name)
    }

    /// The first replica, in assignment order, that is in the ISR, unfenced and not
    /// offline.
    fn elect(&self, p: &PartitionImage) -> i32 {
        p.replicas
            .iter()
            .copied()
            .find(|r| p.isr.contains(r) && !p.is_offline(*r) && self.is_unfenced(*r))
            .unwrap_or(NO_LEADER)
    }

    /// Sets a partition's ISR and leader, bumping the epochs if they change.
    fn change_partition(p: &mut PartitionImage, isr: Vec<i32>, leader: i32) {
        let leader_changed = leader != p.leader;
        if leader_changed || isr != p.isr {
            p.partition_epoch += 1;
        }
        if leader_changed {
            p.leader_epoch += 1;
        }
        p.isr = isr;
        p.leader = leader;
    }

    /// Applies `f` to every partition that `broker` replicates, rebuilding only the topics
    /// that change.
    fn update_partitions_of(
        &mut self,
        broker: i32,
        f: impl Fn(&MetadataImage, &PartitionImage) -> Option<(Vec<i32>, i32)>,
    ) {
        let mut changed = Vec::new();
        for (name, topic) in &self.topics {
            let mut new_topic: Option<TopicImage> = None;
            for (i, p) in topic.partitions.iter().enumerate() {
                if !p.hosts(broker) {
                    continue;
                }
                if let Some((isr, leader)) = f(self, p) {
                    let t = new_topic.get_or_insert_with(|| (**topic).clone());
                    Self::change_partition(&mut t.partitions[i], isr, leader);
                }
            }
            if let Some(t) = new_topic {
                changed.push((name.clone(), Arc::new(t)));
            }
        }
        self.topics.extend(changed);
    }

    /// Fences `broker` (already marked fenced in `brokers`): it leaves every ISR where it
    /// is not the last member, and partitions it led get the next leader from the ISR.
    fn fence(&mut self, broker: i32) {
        self.update_partitions_of(broker, |img, p| {
            let mut isr: Vec<i32> = p.isr.iter().copied().filter(|r| *r != broker).collect();
            if isr.is_empty() {
                // Never empty an ISR: its last member keeps the partition's data.
                isr = p.isr.clone();
            }
            let leader = if p.leader == broker || p.leader == NO_LEADER {
                img.elect(&PartitionImage {
                    isr: isr.clone(),
                    ..p.clone()
                })
            } else {
                p.leader
            };
            (isr != p.isr || leader != p.leader).then_some((isr, leader))
        });
    }

    /// Unfences `broker` (already marked unfenced): leaderless partitions whose ISR holds
    /// it get a leader.
    fn unfence(&mut self, broker: i32) {
        self.update_partitions_of(broker, |img, p| {
            if p.leader != NO_LEADER || !p.isr.contains(&broker) {
                return None;
            }
            let leader = img.elect(p);
            (leader != NO_LEADER).then(|| (p.isr.clone(), leader))
        });
    }

    /// True if partition `p` is led by another broker than its preferred replica
    /// (the first) while that replica is an unfenced ISR member: a preferred-leader
    /// election would move it.
    pub(crate) fn prefers_another_leader(&self, p: &PartitionImage) -> bool {
        p.replicas.first().is_some_and(|r| {
            *r != p.leader && p.isr.contains(r) && !p.is_offline(*r) && self.is_unfenced(*r)
        })
    }

    /// Moves the leadership of a partition to its preferred replica if
    /// [`MetadataImage::prefers_another_leader`]; otherwise (a topic or partition gone,
    /// the replica fenced or out of the ISR since the controller decided) nothing.
    fn elect_preferred(&mut self, topic: &str, id: &TopicId, partition: i32) {
        let Some(t) = self.topics.get(topic).filter(|t| t.id == *id) else {
            return;
        };
        let Some(p) = usize::try_from(partition)
            .ok()
            .and_then(|i| t.partitions.get(i))
        else {
            return;
        };
        if !self.prefers_another_leader(p) {
            return;
        }
        let mut t = (**t).clone();
        let target = &mut t.partitions[partition as usize];
        let (isr, preferred) = (target.isr.clone(), target.replicas[0]);
        Self::change_partition(target, isr, preferred);
        self.topics.insert(topic.to_string(), Arc::new(t));
    }

    /// The partitions a controller's automatic leader rebalance moves now (Kafka's
    /// `checkAndTriggerAutoLeaderRebalance`): for each broker, of the partitions whose
    /// preferred replica it is, the share that another broker leads; where that share
    /// is above `percentage`, every one of them that
    /// [`MetadataImage::prefers_another_leader`].
    pub(crate) fn imbalanced_partitions(&self, percentage: u32) -> Vec<PartitionRef> {
        let mut preferred: BTreeMap<i32, (usize, Vec<PartitionRef>)> = BTreeMap::new();
        for t in self.topics.values() {
            for (i, p) in t.partitions.iter().enumerate() {
                let Some(first) = p.replicas.first() else {
                    continue;
                };
                let entry = preferred.entry(*first).or_default();
                entry.0 += 1;
                if p.leader != *first {
                    entry.1.push(PartitionRef {
                        topic: t.name.clone(),
                        topic_id: t.id,
                        partition: i as i32,
                    });
                }
            }
        }
        let mut out = Vec::new();
        for (total, off) in preferred.into_values() {
            if off.len() * 100 > total * percentage as usize {
                out.extend(off.into_iter().filter(|r| {
                    self.topics
                        .get(&r.topic)
                        .and_then(|t| t.partitions.get(r.partition as usize))
                        .is_some_and(|p| self.prefers_another_leader(p))
                }));
            }
        }
        out
    }

    fn current_broker(
        &self,
        broker: i32,
        epoch: i64,
    ) -> std::result::Result<&BrokerRegistration, Rejected> {
        match self.brokers.get(&broker) {
            None => Err(Rejected::StaleBroker {
                broker,
                reason: "it is not registered".into(),
            }),
            Some(b) if b.epoch != epoch => Err(Rejected::StaleBroker {
                broker,
                reason: format!("broker epoch {epoch} is not its current epoch {}", b.epoch),
            }),
            Some(b) => Ok(b),
        }
    }

    /// Applies the record committed at `index`. Deterministic; on a rejection the image is
    /// unchanged but for its index.
    pub(crate) fn apply(&mut self, index: u64, record: &MetadataRecord) -> Outcome {
        self.index = index;
        match record {
            MetadataRecord::InitCluster {
                cluster_id,
                features,
            } => self.init_cluster(cluster_id, features),
            MetadataRecord::RegisterBroker {
                broker_id,
                incarnation,
                listener,
                clean_shutdown_epoch,
                replication_listener,
                endpoints,
                rack,
                features,
            } => self.register(
                index,
                *broker_id,
                *incarnation,
                (listener, replication_listener.as_deref(), endpoints),
                (*clean_shutdown_epoch, rack.as_deref(), features),
            ),
            MetadataRecord::BrokerReady {
                broker_id,
                broker_epoch,
            } => self.broker_ready(*broker_id, *broker_epoch),
            MetadataRecord::FenceBroker {
                broker_id,
                broker_epoch,
            } => self.fence_broker(*broker_id, *broker_epoch),
            MetadataRecord::ShutdownBroker {
                broker_id,
                broker_epoch,
            } => self.shutdown_broker(*broker_id, *broker_epoch),
            MetadataRecord::CreateTopic(c) => self.create_topic(c),
            MetadataRecord::DeleteTopic { name, topic_id } => {
                self.delete_topic(name, topic_id.as_ref())
            }
            MetadataRecord::CreatePartitions {
                name,
                total,
                assignment,
            } => self.create_partitions(name, *total, assignment.as_deref()),
            MetadataRecord::AlterPartition(a) => self.alter_partition(a),
            MetadataRecord::AlterTopicConfig { name, configs } => {
                self.alter_topic_config(name, configs)
            }
            MetadataRecord::ElectPreferredLeaders { partitions } => {
                self.elect_preferred_leaders(partitions)
            }
            MetadataRecord::AllocateProducerIds {
                broker_id,
                broker_epoch,
                count,
            } => self.allocate_producer_ids(*broker_id, *broker_epoch, *count),
            MetadataRecord::AlterScramCredentials { changes } => {
                self.alter_scram_credentials(changes)
            }
            MetadataRecord::CreateAcls { bindings } => self.create_acls(bindings),
            MetadataRecord::DeleteAcls { filters } => self.delete_acls(filters),
            MetadataRecord::RegisterVoterDirectory {
                node_id,
                directory_id,
            } => self.register_voter_directory(*node_id, directory_id),
            MetadataRecord::ElectUncleanLeaders { partitions } => {
                self.elect_unclean_leaders(partitions)
            }
            MetadataRecord::AlterPartitionReassignment { partition, target } => {
                self.alter_reassignment(partition, target.as_deref())
            }
            MetadataRecord::AlterClientQuotas { changes } => self.alter_client_quotas(changes),
            MetadataRecord::UnregisterBroker { broker_id } => self.unregister_broker(*broker_id),
            MetadataRecord::AlterGroupConfig { group, changes } => {
                self.alter_group_config(group, changes)
            }
            MetadataRecord::AlterBrokerConfig { broker, changes } => {
                self.alter_broker_config(*broker, changes)
            }
            MetadataRecord::FeatureLevel { name, level } => self.feature_level(name, *level),
            MetadataRecord::ReplicasOffline {
                broker_id,
                broker_epoch,
                partitions,
            } => self.replicas_offline(*broker_id, *broker_epoch, partitions),
        }
    }

    /// `RegisterVoterDirectory`: the first directory id of a voter is kept; the same one
    /// again is a no-op, another one is refused (the voter's data directory was lost:
    /// it must not come back as if new).
    pub(crate) fn register_voter_directory(&mut self, node_id: i32, directory_id: &str) -> Outcome {
        match self.directories.get(&node_id) {
            Some(known) if known != directory_id => Err(Rejected::StaleBroker {
                broker: node_id,
                reason: format!(
                    "node {node_id} is known by directory id {known}, not {directory_id}: its data directory was lost"
                ),
            }),
            Some(_) => Ok(Applied::Done),
            None => {
                self.directories.insert(node_id, directory_id.to_string());
                Ok(Applied::Done)
            }
        }
    }

    /// `InitCluster`: sets the cluster id and the starting feature levels once (each
    /// level capped at the highest every broker registered by then supports); the same
    /// id again changes nothing.
    fn init_cluster(&mut self, cluster_id: &str, levels: &[(String, i16)]) -> Outcome {
        match &self.cluster_id {
            None => {
                self.cluster_id = Some(cluster_id.to_string());
                for (name, level) in levels {
                    let level = self
                        .brokers
                        .values()
                        .map(|b| features::range_of(&b.features, name).1)
                        .fold(*level, i16::min);
                    if level > 0 {
                        self.features.insert(name.clone(), level);
                    }
                }
                Ok(Applied::Done)
            }
            Some(id) if id == cluster_id => Ok(Applied::Done),
            Some(id) => Err(Rejected::ClusterIdSet(id.clone())),
        }
    }

    /// `BrokerReady`: unfences the broker's current epoch; leaderless partitions whose
    /// ISR holds it get a leader.
    fn broker_ready(&mut self, broker_id: i32, broker_epoch: i64) -> Outcome {
        let b = self.current_broker(broker_id, broker_epoch)?;
        if !b.fenced {
            return Ok(Applied::Done);
        }
        let b = self.brokers.get_mut(&broker_id).expect("checked above");
        b.fenced = false;
        b.shut_down = false;
        self.unfence(broker_id);
        Ok(Applied::Done)
    }

    /// `FenceBroker`: fences the broker's current epoch (see [`MetadataImage::fence`]).
    fn fence_broker(&mut self, broker_id: i32, broker_epoch: i64) -> Outcome {
        let b = self.current_broker(broker_id, broker_epoch)?;
        if b.fenced {
            return Ok(Applied::Done);
        }
        self.brokers
            .get_mut(&broker_id)
            .expect("checked above")
            .fenced = true;
        self.fence(broker_id);
        Ok(Applied::Done)
    }

    /// `ShutdownBroker`: marks the broker's current epoch shut down, and fences it.
    fn shutdown_broker(&mut self, broker_id: i32, broker_epoch: i64) -> Outcome {
        self.current_broker(broker_id, broker_epoch)?;
        let b = self.brokers.get_mut(&broker_id).expect("checked above");
        b.shut_down = true;
        if !b.fenced {
            b.fenced = true;
            self.fence(broker_id);
        }
        Ok(Applied::Done)
    }

    /// `DeleteTopic`: removes the topic if it is the one the proposer saw and not
    /// internal.
    fn delete_topic(&mut self, name: &str, topic_id: Option<&TopicId>) -> Outcome {
        let topic = self
            .topics
            .get(name)
            .ok_or_else(|| Rejected::UnknownTopic(name.to_string()))?;
        if topic_id.is_some_and(|id| *id != topic.id) {
            return Err(Rejected::UnknownTopic(name.to_string()));
        }
        if topic.internal {
            return Err(Rejected::InvalidConfig {
                key: "topic".into(),
                reason: format!("the internal topic {name} cannot be deleted"),
            });
        }
        self.topics.remove(name);
        Ok(Applied::Done)
    }

    /// `AlterTopicConfig`: replaces the topic's config overrides, once they validate.
    fn alter_topic_config(&mut self, name: &str, configs: &[(String, String)]) -> Outcome {
        let topic = self
            .topics
            .get(name)
            .ok_or_else(|| Rejected::UnknownTopic(name.to_string()))?;
        validate_configs(name, configs)?;
        let mut t = (**topic).clone();
        t.configs = configs.iter().cloned().collect();
        self.topics.insert(name.to_string(), Arc::new(t));
        Ok(Applied::Done)
    }

    /// `ElectPreferredLeaders`: each partition's preferred replica leads where it can.
    fn elect_preferred_leaders(&mut self, partitions: &[PartitionRef]) -> Outcome {
        for r in partitions {
            self.elect_preferred(&r.topic, &r.topic_id, r.partition);
        }
        Ok(Applied::Done)
    }

    /// `AllocateProducerIds`: reserves the next `count` producer ids for a current
    /// broker epoch.
    fn allocate_producer_ids(&mut self, broker_id: i32, broker_epoch: i64, count: i64) -> Outcome {
        self.current_broker(broker_id, broker_epoch)?;
        if !(1..=MAX_PRODUCER_ID_BLOCK).contains(&count) {
            return Err(Rejected::InvalidConfig {
                key: "producer id block".into(),
                reason: format!("{count} ids is outside 1..={MAX_PRODUCER_ID_BLOCK}"),
            });
        }
        let first = self.next_producer_id;
        self.next_producer_id = first.saturating_add(count);
        Ok(Applied::ProducerIds(first))
    }

    /// `AlterScramCredentials`: all the changes, or none.
    fn alter_scram_credentials(&mut self, changes: &[CredentialChange]) -> Outcome {
        let mut users = (*self.users).clone();
        credentials::apply_changes(&mut users, changes).map_err(invalid)?;
        self.users = Arc::new(users);
        Ok(Applied::Done)
    }

    /// `AlterClientQuotas`: all the changes, or none.
    fn alter_client_quotas(&mut self, changes: &[QuotaChange]) -> Outcome {
        let mut quotas = (*self.client_quotas.0).clone();
        quota::apply_changes(&mut quotas, changes).map_err(invalid)?;
        self.client_quotas = QuotaTable(Arc::new(quotas));
        Ok(Applied::Done)
    }

    /// `AlterGroupConfig`: all the changes, or none (each value within Kafka's bounds;
    /// the proposer checked the intervals against the session timeouts).
    fn alter_group_config(
        &mut self,
        group: &str,
        changes: &[crate::coordinator::group_configs::GroupConfigChange],
    ) -> Outcome {
        let mut configs = (*self.group_configs).clone();
        crate::coordinator::group_configs::apply_checked_values(&mut configs, group, changes)
            .map_err(invalid)?;
        self.group_configs = Arc::new(configs);
        Ok(Applied::Done)
    }

    /// `CreateAcls`: adds the bindings, all or none (none if one does not validate).
    fn create_acls(&mut self, bindings: &[AclBinding]) -> Outcome {
        for b in bindings {
            b.validate().map_err(invalid)?;
        }
        let mut acls = (*self.acls).clone();
        acls.extend(bindings.iter().cloned());
        if acls.len() != self.acls.len() {
            self.acls = Arc::new(acls);
        }
        Ok(Applied::Done)
    }

    /// `DeleteAcls`: removes the bindings any filter matches; tells what each removed.
    fn delete_acls(&mut self, filters: &[AclFilter]) -> Outcome {
        let mut acls = (*self.acls).clone();
        let removed = acl::remove_matching(&mut acls, filters);
        if acls.len() != self.acls.len() {
            self.acls = Arc::new(acls);
        }
        Ok(Applied::AclsRemoved(removed))
    }

    /// `FeatureLevel`: finalizes `level` of feature `name` once every registered broker
    /// supports it (the proposer checked the other rules of UpdateFeatures); level 0
    /// removes it.
    fn feature_level(&mut self, name: &str, level: i16) -> Outcome {
        if level < 0 {
            return Err(Rejected::UnsupportedFeature {
                feature: name.into(),
                reason: format!("level {level} of {name} is below 0"),
            });
        }
        if let Some(reason) = features::blocking_broker(self, name, level) {
            return Err(Rejected::UnsupportedFeature {
                feature: name.into(),
                reason: format!("level {level} of {name}: {reason}"),
            });
        }
        if level == 0 {
            self.features.remove(name);
        } else {
            self.features.insert(name.to_string(), level);
        }
        Ok(Applied::Done)
    }

    fn register(
        &mut self,
        index: u64,
        broker_id: i32,
        incarnation: u64,
        (listener, replication_listener, endpoints): (&str, Option<&str>, &[Endpoint]),
        (clean_shutdown_epoch, rack, supported): (Option<i64>, Option<&str>, &[SupportedFeature]),
    ) -> Outcome {
        if broker_id < 0 {
            return Err(Rejected::StaleBroker {
                broker: broker_id,
                reason: "broker ids are not negative".into(),
            });
        }
        if let Some((feature, reason)) =
            features::unsupported_finalized(broker_id, &self.features, supported)
        {
            return Err(Rejected::UnsupportedFeature { feature, reason });
        }
        let previous = self.brokers.get(&broker_id).cloned();
        if let Some(prev) = &previous
            && prev.incarnation == incarnation
        {
            // The same process registering twice (a re-proposal): nothing changes.
            return Ok(Applied::BrokerEpoch(prev.epoch));
        }
        let epoch = index as i64;
        self.brokers.insert(
            broker_id,
            BrokerRegistration {
                id: broker_id,
                epoch,
                incarnation,
                listener: listener.to_string(),
                replication_listener: replication_listener.map(str::to_string),
                endpoints: endpoints.to_vec(),
                rack: rack.map(str::to_string),
                features: supported.to_vec(),
                fenced: true,
                shut_down: false,
            },
        );
        if let Some(prev) = previous {
            // The new incarnation says again which of its replicas are offline.
            self.clear_offline(broker_id);
            let clean = clean_shutdown_epoch == Some(prev.epoch) && prev.shut_down;
            // The previous incarnation is gone. A restart that did not follow a controlled
            // shutdown may have lost records it acknowledged: it leaves every ISR (but as
            // a last member) and its leaderships move, exactly as if it had been fenced.
            // After a controlled shutdown it was fenced then already, and this changes
            // nothing.
            if !prev.fenced || !clean {
                self.fence(broker_id);
            }
        }
        Ok(Applied::BrokerEpoch(epoch))
    }

    fn check_new_topic_name(&self, name: &str) -> std::result::Result<(), Rejected> {
        if let Err(Error::InvalidTopicName { name, reason }) =
            crate::config::validate_topic_name(name)
        {
            return Err(Rejected::InvalidTopicName { name, reason });
        }
        if name == crate::broker::CLUSTER_METADATA_TOPIC {
            return Err(Rejected::InvalidTopicName {
                name: name.into(),
                reason: "the name is reserved for the cluster's metadata log".into(),
            });
        }
        if self.topics.contains_key(name) {
            return Err(Rejected::TopicExists(name.into()));
        }
        let folded = name.replace('.', "_");
        if let Some(other) = self.topics.keys().find(|t| t.replace('.', "_") == folded) {
            return Err(Rejected::InvalidTopicName {
                name: name.into(),
                reason: format!("it collides with topic {other:?} ('.' and '_' collide)"),
            });
        }
        Ok(())
    }

    /// Checks a client-chosen assignment: every partition has the same number of distinct,
    /// registered replicas, at least one of them unfenced.
    fn check_assignment(
        &self,
        topic: &str,
        assignment: &[Vec<i32>],
        replication_factor: Option<usize>,
    ) -> std::result::Result<(), Rejected> {
        let bad = |reason: String| Rejected::InvalidReplicaAssignment {
            topic: topic.into(),
            reason,
        };
        let rf = replication_factor.unwrap_or_else(|| assignment.first().map_or(0, Vec::len));
        for (i, replicas) in assignment.iter().enumerate() {
            if replicas.is_empty() {
                return Err(bad(format!("partition {i} has no replicas")));
            }
            if replicas.len() != rf {
                return Err(bad(format!(
                    "partition {i} has {} replicas; every partition needs {rf}",
                    replicas.len()
                )));
            }
            let mut sorted = replicas.clone();
            sorted.sort_unstable();
            sorted.dedup();
            if sorted.len() != replicas.len() {
                return Err(bad(format!(
                    "partition {i} names a broker twice: {replicas:?}"
                )));
            }
            if let Some(b) = replicas.iter().find(|b| !self.brokers.contains_key(b)) {
                return Err(bad(format!(
                    "partition {i} names broker {b}, which is not registered"
                )));
            }
            if !replicas.iter().any(|b| self.is_unfenced(*b)) {
                return Err(bad(format!(
                    "every replica of partition {i} ({replicas:?}) is on a fenced broker"
                )));
            }
        }
        Ok(())
    }

    /// New partitions: ISR = the unfenced replicas, leader = the first of them.
    fn new_partitions(&self, assignment: Vec<Vec<i32>>) -> Vec<PartitionImage> {
        assignment
            .into_iter()
            .map(|replicas| {
                let isr: Vec<i32> = replicas
                    .iter()
                    .copied()
                    .filter(|b| self.is_unfenced(*b))
                    .collect();
                PartitionImage {
                    leader: isr.first().copied().unwrap_or(NO_LEADER),
                    replicas,
                    isr,
                    leader_epoch: 0,
                    partition_epoch: 0,
                    adding_replicas: Vec::new(),
                    removing_replicas: Vec::new(),
                    offline: Vec::new(),
                }
            })
            .collect()
    }

    /// Replica placement over the unfenced brokers, or INVALID_REPLICATION_FACTOR.
    fn place(
        &self,
        topic: &str,
        id: &TopicId,
        partitions: i32,
        replication_factor: i32,
        first_partition: i32,
    ) -> std::result::Result<Vec<Vec<i32>>, Rejected> {
        let brokers = self.unfenced_brokers();
        if replication_factor < 1 || replication_factor as usize > brokers.len() {
            return Err(Rejected::InvalidReplicationFactor {
                topic: topic.into(),
                reason: format!(
                    "replication factor {replication_factor} is not between 1 and the {} unfenced brokers of the cluster",
                    brokers.len()
                ),
            });
        }
        let (start, shift) = placement_seed(id, brokers.len());
        // Rack-aware when any unfenced broker has a rack; as Kafka's controller
        // (`StripedReplicaPlacer`), the brokers without one are one rack more (named
        // "", which no registered rack is).
        let racked: Vec<(i32, String)> = brokers
            .iter()
            .map(|b| {
                let rack = self.brokers.get(b).and_then(|r| r.rack.clone());
                (*b, rack.unwrap_or_default())
            })
            .collect();
        if racked.iter().any(|(_, rack)| !rack.is_empty()) {
            return Ok(crate::admin::assign_replicas_rack_aware(
                &racked,
                partitions,
                replication_factor as usize,
                first_partition,
                start,
                shift,
            ));
        }
        Ok(place_replicas(
            &brokers,
            partitions,
            replication_factor as usize,
            first_partition,
            start,
            shift,
        ))
    }

    fn create_topic(&mut self, c: &CreateTopic) -> Outcome {
        self.check_new_topic_name(&c.name)?;
        let internal_name = c.name == OFFSETS_TOPIC
            || c.name == TRANSACTION_STATE_TOPIC
            || c.name == SHARE_GROUP_STATE_TOPIC;
        if internal_name != c.internal {
            return Err(Rejected::InvalidTopicName {
                name: c.name.clone(),
                reason: format!(
                    "only {OFFSETS_TOPIC}, {TRANSACTION_STATE_TOPIC} and {SHARE_GROUP_STATE_TOPIC} are internal, and only the cluster creates them"
                ),
            });
        }
        validate_configs(&c.name, &c.configs)?;
        let assignment = match &c.assignment {
            Some(a) => {
                if a.is_empty() {
                    return Err(Rejected::InvalidPartitions {
                        topic: c.name.clone(),
                        reason: "the replica assignment lists no partition".into(),
                    });
                }
                self.check_assignment(&c.name, a, None)?;
                a.clone()
            }
            None => {
                if c.partitions < 1 {
                    return Err(Rejected::InvalidPartitions {
                        topic: c.name.clone(),
                        reason: format!("{} partitions; a topic needs at least 1", c.partitions),
                    });
                }
                self.place(
                    &c.name,
                    &c.topic_id,
                    c.partitions,
                    i32::from(c.replication_factor),
                    0,
                )?
            }
        };
        let topic = TopicImage {
            id: c.topic_id,
            name: c.name.clone(),
            internal: c.internal,
            configs: c.configs.iter().cloned().collect(),
            partitions: self.new_partitions(assignment),
        };
        self.topics.insert(c.name.clone(), Arc::new(topic));
        Ok(Applied::TopicCreated(c.topic_id))
    }

    fn create_partitions(
        &mut self,
        name: &str,
        total: i32,
        assignment: Option<&[Vec<i32>]>,
    ) -> Outcome {
        let topic = self
            .topics
            .get(name)
            .ok_or_else(|| Rejected::UnknownTopic(name.into()))?
            .clone();
        let current = topic.partitions.len() as i32;
        if total <= current {
            return Err(Rejected::InvalidPartitions {
                topic: name.into(),
                reason: format!(
                    "topic {name:?} has {current} partitions; it can only grow, not to {total}"
                ),
            });
        }
        let rf = topic.partitions.first().map_or(1, |p| p.replicas.len());
        let new = match assignment {
            Some(a) => {
                if a.len() as i32 != total - current {
                    return Err(Rejected::InvalidReplicaAssignment {
                        topic: name.into(),
                        reason: format!(
                            "{} new partitions need {} assignments, not {}",
                            total - current,
                            total - current,
                            a.len()
                        ),
                    });
                }
                self.check_assignment(name, a, Some(rf))?;
                a.to_vec()
            }
            None => self.place(name, &topic.id, total - current, rf as i32, current)?,
        };
        let mut t = (*topic).clone();
        t.partitions.extend(self.new_partitions(new));
        self.topics.insert(name.into(), Arc::new(t));
        Ok(Applied::Done)
    }

    fn alter_partition(&mut self, a: &AlterPartition) -> Outcome {
        self.current_broker(a.broker_id, a.broker_epoch)?;
        let topic = self
            .topics
            .get(&a.topic)
            .filter(|t| t.id == a.topic_id)
            .ok_or_else(|| Rejected::UnknownTopic(a.topic.clone()))?
            .clone();
        let count = topic.partitions.len() as i32;
        let p = usize::try_from(a.partition)
            .ok()
            .and_then(|i| topic.partitions.get(i))
            .ok_or_else(|| Rejected::UnknownPartition {
                topic: a.topic.clone(),
                partition: a.partition,
                count,
            })?;
        let part = pname(&a.topic, a.partition as usize);
        if p.leader != a.broker_id || a.leader_epoch != p.leader_epoch {
            return Err(Rejected::FencedLeaderEpoch {
                partition: part,
                reason: format!(
                    "broker {} at leader epoch {} is not the leader (leader {} at epoch {})",
                    a.broker_id, a.leader_epoch, p.leader, p.leader_epoch
                ),
            });
        }
        if a.partition_epoch != p.partition_epoch {
            return Err(Rejected::InvalidUpdateVersion {
                partition: part,
                reason: format!(
                    "the change was computed at partition epoch {}, the partition is at {}",
                    a.partition_epoch, p.partition_epoch
                ),
            });
        }
        let bad = |reason: String| Rejected::IneligibleReplica {
            partition: part.clone(),
            reason,
        };
        if !a.new_isr.contains(&p.leader) {
            return Err(bad(format!(
                "the ISR {:?} lacks the leader {}",
                a.new_isr, p.leader
            )));
        }
        let mut seen = a.new_isr.clone();
        seen.sort_unstable();
        seen.dedup();
        if seen.len() != a.new_isr.len() {
            return Err(bad(format!("the ISR {:?} names a broker twice", a.new_isr)));
        }
        if let Some(r) = a.new_isr.iter().find(|r| !p.replicas.contains(r)) {
            return Err(bad(format!(
                "broker {r} is not a replica ({:?})",
                p.replicas
            )));
        }
        if let Some(r) = a
            .new_isr
            .iter()
            .find(|r| !p.isr.contains(r) && !self.is_unfenced(**r))
        {
            return Err(bad(format!("broker {r} is fenced and cannot join the ISR")));
        }
        if let Some(r) = a
            .new_isr
            .iter()
            .find(|r| !p.isr.contains(r) && p.is_offline(**r))
        {
            return Err(bad(format!(
                "the replica on broker {r} is offline (its log directory failed) and cannot join the ISR"
            )));
        }
        // Kept in replica order, like every ISR the controller writes.
        let isr: Vec<i32> = p
            .replicas
            .iter()
            .copied()
            .filter(|r| a.new_isr.contains(r))
            .collect();
        let unfenced = self.unfenced_brokers();
        let mut t = (*topic).clone();
        let target = &mut t.partitions[a.partition as usize];
        let leader = target.leader;
        Self::change_partition(target, isr, leader);
        // The new replicas of a reassignment joined the ISR: the replica set switches.
        reassign::complete(target, &unfenced);
        self.topics.insert(a.topic.clone(), Arc::new(t));
        Ok(Applied::Done)
    }
}

/// A refused credential or binding (`Error::InvalidConfig` naming the field) as a
/// rejection.
fn invalid(e: Error) -> Rejected {
    match e {
        Error::InvalidConfig { key, reason } => Rejected::InvalidConfig { key, reason },
        other => Rejected::InvalidConfig {
            key: "security".into(),
            reason: other.to_string(),
        },
    }
}

/// Refuses `topic`'s config overrides unless they validate, naming the topic, the
/// setting and (for lists such as the throttled replicas) the bad entry.
fn validate_configs(
    topic: &str,
    configs: &[(String, String)],
) -> std::result::Result<(), Rejected> {
    let config = configs
        .iter()
        .fold(TopicConfig::new(), |c, (k, v)| c.set(k, v));
    match config.validate() {
        Ok(()) => Ok(()),
        Err(Error::InvalidConfig { key, reason }) => Err(Rejected::InvalidConfig {
            key,
            reason: format!("topic {topic}: {reason}"),
        }),
        Err(e) => Err(Rejected::InvalidConfig {
            key: "config".into(),
            reason: format!("topic {topic}: {e}"),
        }),
    }
}

/// What this node does for one partition, as the replica manager needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum LocalRole {
    /// This node leads the partition.
    Leader {
        /// Current leader epoch.
        leader_epoch: i32,
        /// Current partition epoch (for `AlterPartition`).
        partition_epoch: i32,
        /// The committed ISR (the high watermark is computed over it).
        isr: Vec<i32>,
        /// Every replica.
        replicas: Vec<i32>,
    },
    /// This node follows `leader` (-1: no leader right now).
    Follower {
        /// The leader to fetch from, or [`NO_LEADER`].
        leader: i32,
        /// Current leader epoch.
        leader_epoch: i32,
        /// Current partition epoch.
        partition_epoch: i32,
    },
}

/// A hosted partition whose role or epochs changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LocalPartitionChange {
    /// Topic name.
    pub topic: String,
    /// Topic id.
    pub topic_id: TopicId,
    /// Partition index.
    pub partition: i32,
    /// The new role.
    pub role: LocalRole,
}

/// How this node's replicas change between two images (Kafka's `LocalReplicaChanges`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct LocalChanges {
    /// Partitions hosted here that are new or whose leader, ISR or epochs changed.
    pub changed: Vec<LocalPartitionChange>,
    /// Partitions no longer hosted here (topic deleted, or reassigned to other
    /// replicas), as `(topic, topic id, partition)`.
    pub removed: Vec<(String, TopicId, i32)>,
}

fn local_role(node: i32, p: &PartitionImage) -> LocalRole {
    if p.leader == node {
        LocalRole::Leader {
            leader_epoch: p.leader_epoch,
            partition_epoch: p.partition_epoch,
            isr: p.isr.clone(),
            replicas: p.replicas.clone(),
        }
    } else {
        LocalRole::Follower {
            leader: p.leader,
            leader_epoch: p.leader_epoch,
            partition_epoch: p.partition_epoch,
        }
    }
}

/// The changes to `node`'s replicas from `previous` to `current`.
pub(crate) fn local_changes(
    node: i32,
    previous: &MetadataImage,
    current: &MetadataImage,
) -> LocalChanges {
    let mut out = LocalChanges::default();
    for (name, topic) in &current.topics {
        let before = previous.topics.get(name);
        if before.is_some_and(|b| Arc::ptr_eq(b, topic)) {
            continue;
        }
        let before = before.filter(|b| b.id == topic.id);
        for (i, p) in topic.partitions.iter().enumerate() {
            if !p.hosts(node) {
                continue;
            }
            if before.and_then(|b| b.partitions.get(i)) == Some(p) {
                continue;
            }
            out.changed.push(LocalPartitionChange {
                topic: name.clone(),
                topic_id: topic.id,
                partition: i as i32,
                role: local_role(node, p),
            });
        }
    }
    for (name, topic) in &previous.topics {
        let still = current.topics.get(name).filter(|t| t.id == topic.id);
        for (i, p) in topic.partitions.iter().enumerate() {
            // Deleted with its topic, or reassigned away.
            let gone = still
                .and_then(|t| t.partitions.get(i))
                .is_none_or(|c| !c.hosts(node));
            if p.hosts(node) && gone {
                out.removed.push((name.clone(), topic.id, i as i32));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_features;
#[cfg(test)]
mod tests_offline;
#[cfg(test)]
mod tests_reassign;
