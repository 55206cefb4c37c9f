//! A blocking admin client for a running tidelog node or cluster, or any Kafka cluster
//! (feature `server`): create, describe, grow, reconfigure and delete topics, list and
//! describe consumer groups with their committed offsets, move a group's offsets, and
//! look up partition offsets, over the Kafka protocol. What `tidelog topics` and
//! `tidelog groups` do with `--bootstrap`.
//!
//! ```no_run
//! use tidelog::admin::{AdminClient, NewTopic, OffsetSpec, TopicPartition};
//!
//! let admin = AdminClient::connect("127.0.0.1:9092,127.0.0.1:9192")?;
//! let topic = NewTopic::new("payments")
//!     .partitions(3)
//!     .replication_factor(3)
//!     .config("min.insync.replicas", "2");
//! for (name, result) in admin.create_topics(&[topic])? {
//!     result?; // an error names the topic and Kafka's error (TOPIC_ALREADY_EXISTS, ...)
//!     println!("created {name}");
//! }
//! for (_, topic) in admin.describe_topics(&["payments"])? {
//!     for p in topic?.partitions {
//!         println!("{}: leader {:?}, replicas {:?}, isr {:?}", p.partition, p.leader, p.replicas, p.isr);
//!     }
//! }
//! let end = admin.list_offsets(&[(TopicPartition::new("payments", 0), OffsetSpec::Latest)])?;
//! println!("{:?}", end[&TopicPartition::new("payments", 0)]);
//! # Ok::<(), tidelog::Error>(())
//! ```
//!
//! Like Kafka's clients it bootstraps from a list of addresses (the first that answers
//! Metadata), sends topic changes to the controller, group requests to the group's
//! coordinator (FindCoordinator) and ListOffsets to each partition's leader, and asks
//! again, after fresh metadata, when a broker answers that the leader, controller or
//! coordinator is elsewhere or not there yet ([`ErrorCode::is_retriable`]) or cannot be
//! reached, a bounded number of times ([`AdminClientBuilder::retries`]). Requests that
//! are not safe to repeat (creating or deleting topics, adding partitions, changing
//! configs) are repeated after a connection failure only if nothing was sent.
//!
//! Methods that act on several topics or groups answer for each, as Kafka's admin
//! client does: the outer `Result` is the request as a whole (a broker could not be
//! reached), the inner one each item's outcome. A broker's refusal is
//! [`Error::Admin`](crate::Error) with an [`AdminError`]: the topic, partition or
//! group, Kafka's error code (whose name it displays) and the broker's message.

mod broker_configs;
mod consumer_groups;
mod drain;
mod features;
mod partitions;
mod quorum;
mod quotas;
mod router;
mod security;
mod share_groups;
#[cfg(feature = "server")] // the tests start a tidelog server
#[cfg(test)]
mod tests;
mod types;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    BrokerId, CreatePartitionsRequest, CreateTopicsRequest, DeleteTopicsRequest,
    DescribeConfigsRequest, DescribeGroupsRequest, GroupId, IncrementalAlterConfigsRequest,
    ListGroupsRequest, ListOffsetsRequest, MetadataResponse, OffsetCommitRequest,
    OffsetFetchRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use parking_lot::Mutex;

pub use crate::error::{AdminError, ErrorCode, Resource};
pub use consumer_groups::{ConsumerGroupDescription, ConsumerGroupMember};
pub use drain::drain_plan;
pub use features::{FeatureMetadata, FeatureUpgradeType};
pub use partitions::{
    ElectionType, LogDirDescription, PartitionReassignment, ReplicaLogInfo, assign_replicas,
    assign_replicas_rack_aware,
};
pub use quorum::{QuorumInfo, QuorumReplica};
pub use quotas::QuotaMatch;
use router::{Outcome, Router, Settings, check, kstr};
pub use security::ScramAlteration;
pub use share_groups::ShareGroupOffset;
pub use types::{
    AlterConfigOp, BrokerMetadata, ClusterMetadata, CommittedOffset, ConfigEntry, ConfigSource,
    GroupDescription, GroupListing, ListedOffset, MemberDescription, NewTopic, OffsetSpec,
    PartitionMetadata, TopicMetadata, TopicPartition,
};

use crate::client::ClientSecurity;
use crate::consumer::{Assignment, IsolationLevel};
use crate::error::{Error, Result};
use crate::security::SecurityProtocol;
use crate::security::sasl::SaslMechanism;
use crate::security::{ClientIdentity, SaslLogin};

/// API versions asked for. Each is one every tidelog node answers and Kafka brokers
/// from 2.4 to 4.x answer too; no ApiVersions negotiation, except for the topic calls
/// of a negotiating client ([`AdminClientBuilder::negotiating`]), which pick the
/// highest version of the ranges below that the controller answers.
const CREATE_TOPICS_VERSION: i16 = 4;
const DELETE_TOPICS_VERSION: i16 = 3;
const CREATE_PARTITIONS_VERSION: i16 = 1;
/// CreateTopics versions a negotiating client sends (v2, the oldest Kafka 4 answers, to
/// v7; the fields filled are in every one).
const CREATE_TOPICS_VERSIONS: std::ops::RangeInclusive<i16> = 2..=7;
/// DeleteTopics versions a negotiating client sends (v6 names topics in `topics`).
const DELETE_TOPICS_VERSIONS: std::ops::RangeInclusive<i16> = 1..=6;
/// CreatePartitions versions a negotiating client sends.
const CREATE_PARTITIONS_VERSIONS: std::ops::RangeInclusive<i16> = 0..=3;
const DESCRIBE_CONFIGS_VERSION: i16 = 3;
const INCREMENTAL_ALTER_CONFIGS_VERSION: i16 = 0;
const LIST_GROUPS_VERSION: i16 = 3;
const DESCRIBE_GROUPS_VERSION: i16 = 4;
const OFFSET_FETCH_VERSION: i16 = 5;
const OFFSET_COMMIT_VERSION: i16 = 7;
const LIST_OFFSETS_VERSION: i16 = 5;

/// Kafka's `isolation_level` field of Fetch and ListOffsets for `level`.
pub(crate) fn isolation_level(level: IsolationLevel) -> i8 {
    match level {
        IsolationLevel::ReadUncommitted => 0,
        IsolationLevel::ReadCommitted => 1,
    }
}

/// DescribeConfigs/IncrementalAlterConfigs resource type of a topic.
const TOPIC_RESOURCE: i8 = 2;

/// Per topic (or group, or partition), its outcome.
type Each<K, T = ()> = BTreeMap<K, Result<T>>;

/// Settings of an [`AdminClient`] before it connects.
#[derive(Debug, Clone)]
pub struct AdminClientBuilder {
    bootstrap: String,
    settings: Settings,
    protocol: SecurityProtocol,
    ca_location: Option<PathBuf>,
    certificate_location: Option<PathBuf>,
    key_location: Option<PathBuf>,
    sasl_mechanism: Option<SaslMechanism>,
    sasl_username: Option<String>,
    sasl_password: Option<String>,
}

impl AdminClientBuilder {
    /// The client id sent with every request (default `tidelog-admin`).
    pub fn client_id(mut self, id: impl Into<String>) -> Self {
        self.settings.client_id = id.into();
        self
    }

    /// How long one request may take (Kafka's `request.timeout.ms`, default 30 s): the
    /// wait for an answer, and the time a broker is given to create or delete a topic.
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.settings.request_timeout = timeout;
        self
    }

    /// How many times a request is repeated for the items a broker answered with a
    /// retriable error, or when it could not be reached (default 10).
    pub fn retries(mut self, n: u32) -> Self {
        self.settings.retries = n;
        self
    }

    /// The pause before the first repetition (Kafka's `retry.backoff.ms`, default
    /// 100 ms); it doubles with each one, up to 1 s.
    pub fn retry_backoff(mut self, backoff: Duration) -> Self {
        self.settings.retry_backoff = backoff;
        self
    }

    /// How connections reach the brokers (Kafka's `security.protocol`, default
    /// PLAINTEXT): SSL and SASL_SSL need [`ssl_ca_location`](Self::ssl_ca_location),
    /// SASL_PLAINTEXT and SASL_SSL a [`sasl_mechanism`](Self::sasl_mechanism), user
    /// name and password.
    pub fn security_protocol(mut self, protocol: SecurityProtocol) -> Self {
        self.protocol = protocol;
        self
    }

    /// The PEM file of the CA that signed the brokers' certificates (Kafka's
    /// `ssl.ca.location`); each broker's certificate must name the host the client
    /// connects to.
    pub fn ssl_ca_location(mut self, path: impl Into<PathBuf>) -> Self {
        self.ca_location = Some(path.into());
        self
    }

    /// The PEM file of this client's certificate chain (Kafka's
    /// `ssl.certificate.location`), presented on SSL and SASL_SSL listeners to brokers
    /// that ask for one: a tidelog SSL listener with `--tls-client-ca` requires it and
    /// takes the certificate's subject as the principal (`User:CN=...`). Needs
    /// [`ssl_key_location`](Self::ssl_key_location).
    pub fn ssl_certificate_location(mut self, path: impl Into<PathBuf>) -> Self {
        self.certificate_location = Some(path.into());
        self
    }

    /// The PEM file of the private key of
    /// [`ssl_certificate_location`](Self::ssl_certificate_location)'s certificate (Kafka's
    /// `ssl.key.location`: PKCS#8, PKCS#1 or SEC1, unencrypted).
    pub fn ssl_key_location(mut self, path: impl Into<PathBuf>) -> Self {
        self.key_location = Some(path.into());
        self
    }

    /// The SASL mechanism (Kafka's `sasl.mechanism`): PLAIN, SCRAM-SHA-256 or
    /// SCRAM-SHA-512. SCRAM never sends the password, and checks that the broker knows
    /// the credential.
    pub fn sasl_mechanism(mut self, mechanism: SaslMechanism) -> Self {
        self.sasl_mechanism = Some(mechanism);
        self
    }

    /// The SASL user name (Kafka's `sasl.username`); the principal is `User:NAME`.
    pub fn sasl_username(mut self, user: impl Into<String>) -> Self {
        self.sasl_username = Some(user.into());
        self
    }

    /// The SASL password (Kafka's `sasl.password`).
    pub fn sasl_password(mut self, password: impl Into<String>) -> Self {
        self.sasl_password = Some(password.into());
        self
    }

    /// Connects: asks the bootstrap addresses in turn for the cluster's metadata until
    /// one answers.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for a bootstrap list that is empty or has an entry that
    /// is not `HOST:PORT`, or security settings that do not go together (naming the
    /// setting: `ssl.ca.location`, `ssl.certificate.location`, `ssl.key.location`,
    /// `sasl.mechanism`, `sasl.username`); [`Error::Io`] or
    /// [`Error::Timeout`] when no address answers; [`Error::AuthenticationFailed`] when
    /// a broker refuses the SASL login.
    pub fn connect(self) -> Result<AdminClient> {
        let security = Arc::new(self.client_security()?);
        self.connect_with(security)
    }

    /// Connects with `security` (from [`client_security`](Self::client_security)),
    /// shared with other connections of the same settings.
    /// Makes each connection negotiate the broker's API versions (ApiVersions), and
    /// CreateTopics, DeleteTopics and CreatePartitions go in the highest version both
    /// sides speak (the remote API's [`Cluster`](crate::remote::Cluster): any Kafka
    /// cluster, not only tidelog nodes).
    pub(crate) fn negotiating(mut self) -> Self {
        self.settings.negotiate = true;
        self
    }

    pub(crate) fn connect_with(mut self, security: Arc<ClientSecurity>) -> Result<AdminClient> {
        let bootstrap = parse_bootstrap(&self.bootstrap)?;
        self.settings.security = security;
        let mut router = Router::new(bootstrap, self.settings);
        router.refresh(Some(&[]))?;
        Ok(AdminClient {
            router: Mutex::new(router),
        })
    }

    /// The bootstrap addresses, each checked to be `HOST:PORT`.
    pub(crate) fn bootstrap_addresses(&self) -> Result<Vec<String>> {
        parse_bootstrap(&self.bootstrap)
    }

    /// The client id, request timeout and retry backoff set.
    pub(crate) fn timing(&self) -> (&str, Duration, Duration) {
        (
            &self.settings.client_id,
            self.settings.request_timeout,
            self.settings.retry_backoff,
        )
    }

    /// The TLS and SASL settings checked and loaded (the CA and certificate files
    /// read), with errors naming the setting.
    pub(crate) fn client_security(&self) -> Result<ClientSecurity> {
        let sasl = match (
            self.protocol.uses_sasl(),
            self.sasl_mechanism,
            self.sasl_username.clone(),
            self.sasl_password.clone(),
        ) {
            (false, ..) => None,
            (true, None, ..) => {
                return Err(Error::InvalidConfig {
                    key: "sasl.mechanism".into(),
                    reason: format!(
                        "{} needs PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512",
                        self.protocol
                    ),
                });
            }
            (true, Some(mechanism), username, password) => Some(SaslLogin {
                mechanism,
                username: username.unwrap_or_default(),
                password: password.unwrap_or_default(),
            }),
        };
        let identity = match (&self.certificate_location, &self.key_location) {
            (None, None) => None,
            (Some(cert), Some(key)) => Some(ClientIdentity { cert, key }),
            (Some(_), None) => {
                return Err(Error::InvalidConfig {
                    key: "ssl.key.location".into(),
                    reason: "ssl.certificate.location needs the certificate's private key".into(),
                });
            }
            (None, Some(_)) => {
                return Err(Error::InvalidConfig {
                    key: "ssl.certificate.location".into(),
                    reason: "ssl.key.location needs the certificate it goes with".into(),
                });
            }
        };
        ClientSecurity::new(self.protocol, self.ca_location.as_deref(), identity, sasl)
    }
}

/// `host:port[,host:port...]` as a list, each entry checked.
fn parse_bootstrap(list: &str) -> Result<Vec<String>> {
    let bad = |reason: String| Error::InvalidConfig {
        key: "bootstrap.servers".into(),
        reason,
    };
    let mut out = Vec::new();
    for entry in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        match entry.rsplit_once(':') {
            Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok() => {
                out.push(entry.to_string());
            }
            _ => return Err(bad(format!("{entry:?} is not HOST:PORT"))),
        }
    }
    if out.is_empty() {
        return Err(bad(format!("{list:?} names no HOST:PORT")));
    }
    Ok(out)
}

/// A blocking admin client of a Kafka cluster (Kafka's `Admin`); see the
/// [module documentation](self). Safe to share between threads (one request at a time).
///
/// A consumer group's lag, as `kafka-consumer-groups --describe` computes it (the
/// partition's high watermark minus the group's committed offset):
///
/// ```no_run
/// use tidelog::admin::{AdminClient, OffsetSpec};
///
/// let admin = AdminClient::connect("127.0.0.1:9092")?;
/// for group in admin.list_groups()? {
///     let committed = admin.list_consumer_group_offsets(&group.group_id)?;
///     let specs: Vec<_> = committed
///         .iter()
///         .map(|c| (c.partition.clone(), OffsetSpec::Latest))
///         .collect();
///     let ends = admin.list_offsets(&specs)?;
///     for c in &committed {
///         if let Ok(end) = &ends[&c.partition] {
///             let lag = end.offset.map_or(0, |e| (e - c.offset).max(0));
///             println!("{} {}: lag {lag}", group.group_id, c.partition);
///         }
///     }
/// }
/// # Ok::<(), tidelog::Error>(())
/// ```
#[derive(Debug)]
pub struct AdminClient {
    router: Mutex<Router>,
}

/// Refuses a request that names one item twice (INVALID_REQUEST, as a broker would).
fn unique<K: Ord + Clone>(keys: &[K], resource: impl Fn(&K) -> Resource) -> Result<()> {
    let mut sorted = keys.to_vec();
    sorted.sort();
    match sorted.windows(2).find(|w| w[0] == w[1]) {
        Some(w) => Err(AdminError::new(
            resource(&w[0]),
            ErrorCode::INVALID_REQUEST,
            Some("named more than once in one request".into()),
        )
        .into()),
        None => Ok(()),
    }
}

fn topic(name: &str) -> Resource {
    Resource::Topic(name.to_string())
}

fn group(id: &str) -> Resource {
    Resource::Group(id.to_string())
}

/// A group's outcome in a response: its value (`value`, given the group id) if its
/// error code is 0, else the refusal with the broker's message.
fn group_outcome<T>(
    id: &StrBytes,
    code: i16,
    message: Option<&StrBytes>,
    value: impl FnOnce(String) -> T,
) -> (String, Outcome<T>) {
    let gid = id.to_string();
    let o = check(|| group(&gid), code, message).map(|()| value(gid.clone()));
    (gid, o.into())
}

/// A group of a describe answer (DescribeGroups, ConsumerGroupDescribe): its id, error
/// code and message.
trait DescribedGroup {
    fn outcome_of(&self) -> (StrBytes, i16, Option<StrBytes>);
}

impl DescribedGroup for kafka_protocol::messages::describe_groups_response::DescribedGroup {
    fn outcome_of(&self) -> (StrBytes, i16, Option<StrBytes>) {
        (
            self.group_id.0.clone(),
            self.error_code,
            self.error_message.clone(),
        )
    }
}

impl DescribedGroup for kafka_protocol::messages::consumer_group_describe_response::DescribedGroup {
    fn outcome_of(&self) -> (StrBytes, i16, Option<StrBytes>) {
        (
            self.group_id.0.clone(),
            self.error_code,
            self.error_message.clone(),
        )
    }
}

/// Each group of a describe answer with its outcome: `describe` (given the group id)
/// for a group answered without an error.
fn described<G: DescribedGroup, T>(
    groups: Vec<G>,
    describe: impl Fn(String, G) -> T,
) -> Vec<(String, Outcome<T>)> {
    groups
        .into_iter()
        .map(|g| {
            let (id, code, message) = g.outcome_of();
            group_outcome(&id, code, message.as_ref(), |gid| describe(gid, g))
        })
        .collect()
}

/// A classic group as DescribeGroups answered it, from coordinator `node`.
fn group_description(
    gid: String,
    node: i32,
    g: kafka_protocol::messages::describe_groups_response::DescribedGroup,
) -> GroupDescription {
    let consumer = g.protocol_type.as_str() == "consumer";
    GroupDescription {
        group_id: gid,
        state: g.group_state.to_string(),
        protocol_type: g.protocol_type.to_string(),
        protocol: g.protocol_data.to_string(),
        members: g
            .members
            .into_iter()
            .map(|m| MemberDescription {
                member_id: m.member_id.to_string(),
                group_instance_id: m.group_instance_id.map(|s| s.to_string()),
                client_id: m.client_id.to_string(),
                host: m.client_host.to_string(),
                assignment: (consumer && !m.member_assignment.is_empty())
                    .then(|| Assignment::decode(&m.member_assignment).ok())
                    .flatten(),
            })
            .collect(),
        coordinator: node,
    }
}

fn node_ids(ids: &[BrokerId]) -> Vec<i32> {
    ids.iter().map(|b| b.0).collect()
}

/// Each topic's outcome, from its name, error code and message in a response.
fn topic_outcomes<'a>(
    results: impl Iterator<Item = (String, i16, Option<&'a StrBytes>)>,
) -> Vec<(String, Outcome<()>)> {
    results
        .map(|(name, code, message)| {
            let o = check(|| topic(&name), code, message);
            (name, o.into())
        })
        .collect()
}

/// The topics of a Metadata answer, each with its outcome.
fn topics_of(m: MetadataResponse) -> Vec<(String, Outcome<TopicMetadata>)> {
    m.topics
        .into_iter()
        .filter_map(|t| {
            let name = t.name?.0.to_string();
            let outcome = check(|| topic(&name), t.error_code, None)
                .map(|()| TopicMetadata {
                    name: name.clone(),
                    internal: t.is_internal,
                    partitions: t
                        .partitions
                        .into_iter()
                        .map(|p| PartitionMetadata {
                            partition: p.partition_index,
                            leader: Some(p.leader_id.0).filter(|l| *l >= 0),
                            leader_epoch: p.leader_epoch,
                            replicas: node_ids(&p.replica_nodes),
                            isr: node_ids(&p.isr_nodes),
                            offline_replicas: node_ids(&p.offline_replicas),
                        })
                        .collect(),
                })
                .map(|mut t| {
                    t.partitions.sort_by_key(|p| p.partition);
                    t
                })
                .into();
            Some((name, outcome))
        })
        .collect()
}

impl AdminClient {
    /// Connects to the cluster at `bootstrap` (`host:port`, or several separated by
    /// commas) with the default settings. See [`AdminClientBuilder::connect`].
    pub fn connect(bootstrap: &str) -> Result<AdminClient> {
        AdminClient::builder(bootstrap).connect()
    }

    /// Settings for a client of the cluster at `bootstrap`.
    pub fn builder(bootstrap: impl Into<String>) -> AdminClientBuilder {
        AdminClientBuilder {
            bootstrap: bootstrap.into(),
            settings: Settings {
                client_id: "tidelog-admin".into(),
                request_timeout: Duration::from_secs(30),
                retries: 10,
                retry_backoff: Duration::from_millis(100),
                security: Default::default(),
                negotiate: false,
            },
            protocol: SecurityProtocol::Plaintext,
            ca_location: None,
            certificate_location: None,
            key_location: None,
            sasl_mechanism: None,
            sasl_username: None,
            sasl_password: None,
        }
    }

    /// The cluster: its id, controller, brokers and every topic (Metadata). Topics the
    /// broker answers with an error (one being created) are left out.
    pub fn metadata(&self) -> Result<ClusterMetadata> {
        let mut r = self.router.lock();
        let m = r.rounds(vec![Cluster], true, |r, _| {
            let m = r.refresh(None)?;
            Ok(vec![(Cluster, Outcome::Done(Ok(m)))])
        })?;
        let m = m.into_values().next().expect("one key")?;
        let mut brokers: Vec<BrokerMetadata> = m
            .brokers
            .iter()
            .map(|b| BrokerMetadata {
                id: b.node_id.0,
                host: b.host.to_string(),
                port: b.port,
                rack: b.rack.as_ref().map(|r| r.to_string()),
            })
            .collect();
        brokers.sort_by_key(|b| b.id);
        let cluster_id = m.cluster_id.as_ref().map(|c| c.to_string());
        let controller = Some(m.controller_id.0).filter(|c| *c >= 0);
        let mut topics: Vec<TopicMetadata> = topics_of(m)
            .into_iter()
            .filter_map(|(_, o)| match o {
                Outcome::Done(Ok(t)) => Some(t),
                _ => None,
            })
            .collect();
        topics.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(ClusterMetadata {
            cluster_id,
            controller,
            brokers,
            topics,
        })
    }

    /// The partitions of each topic named, with their leader, replicas and in-sync
    /// replicas (Metadata; as `kafka-topics --describe`). An unknown topic is
    /// UNKNOWN_TOPIC_OR_PARTITION.
    pub fn describe_topics(&self, names: &[&str]) -> Result<Each<String, TopicMetadata>> {
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        unique(&names, |n| topic(n))?;
        self.router.lock().rounds(names, true, |r, pending| {
            Ok(topics_of(r.refresh(Some(pending))?))
        })
    }

    /// Creates topics (CreateTopics, sent to the controller), each with its partitions,
    /// replication factor and settings. Answers once each topic exists on the broker
    /// asked, or with its error (TOPIC_ALREADY_EXISTS, INVALID_REPLICATION_FACTOR,
    /// INVALID_CONFIG, ...).
    pub fn create_topics(&self, topics: &[NewTopic]) -> Result<Each<String>> {
        let names: Vec<String> = topics.iter().map(|t| t.name.clone()).collect();
        unique(&names, |n| topic(n))?;
        self.router.lock().rounds(names, false, |r, pending| {
            let timeout_ms = r.timeout_ms();
            let request = |_| {
                CreateTopicsRequest::default()
                    .with_timeout_ms(timeout_ms)
                    .with_topics(
                        topics
                            .iter()
                            .filter(|t| pending.contains(&t.name))
                            .map(|t| {
                                CreatableTopic::default()
                                    .with_name(TopicName(kstr(&t.name)))
                                    .with_num_partitions(t.partitions.unwrap_or(-1))
                                    .with_replication_factor(t.replication_factor.unwrap_or(-1))
                                    .with_configs(
                                        t.configs
                                            .iter()
                                            .map(|(k, v)| {
                                                CreatableTopicConfig::default()
                                                    .with_name(kstr(k))
                                                    .with_value(Some(kstr(v)))
                                            })
                                            .collect(),
                                    )
                            })
                            .collect(),
                    )
            };
            let response = r.call_controller_negotiated(
                CREATE_TOPICS_VERSION,
                CREATE_TOPICS_VERSIONS,
                request,
            )?;
            Ok(topic_outcomes(response.topics.iter().map(|t| {
                (t.name.0.to_string(), t.error_code, t.error_message.as_ref())
            })))
        })
    }

    /// Deletes topics and their data (DeleteTopics, sent to the controller).
    pub fn delete_topics(&self, names: &[&str]) -> Result<Each<String>> {
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        unique(&names, |n| topic(n))?;
        self.router.lock().rounds(names, false, |r, pending| {
            let timeout_ms = r.timeout_ms();
            let request = |version| {
                let request = DeleteTopicsRequest::default().with_timeout_ms(timeout_ms);
                let names = pending.iter().map(|n| TopicName(kstr(n)));
                if version >= 6 {
                    let topics = names.map(|n| DeleteTopicState::default().with_name(Some(n)));
                    request.with_topics(topics.collect())
                } else {
                    request.with_topic_names(names.collect())
                }
            };
            let response = r.call_controller_negotiated(
                DELETE_TOPICS_VERSION,
                DELETE_TOPICS_VERSIONS,
                request,
            )?;
            Ok(topic_outcomes(response.responses.iter().filter_map(|t| {
                let name = t.name.as_ref()?.0.to_string();
                Some((name, t.error_code, t.error_message.as_ref()))
            })))
        })
    }

    /// Grows topics to the given partition counts (CreatePartitions, sent to the
    /// controller; Kafka's `createPartitions`). A count that is not larger than the
    /// topic's is INVALID_PARTITIONS.
    pub fn create_partitions(&self, counts: &[(&str, i32)]) -> Result<Each<String>> {
        let names: Vec<String> = counts.iter().map(|(n, _)| n.to_string()).collect();
        unique(&names, |n| topic(n))?;
        self.router.lock().rounds(names, false, |r, pending| {
            let timeout_ms = r.timeout_ms();
            let request = |_| {
                CreatePartitionsRequest::default()
                    .with_timeout_ms(timeout_ms)
                    .with_topics(
                        counts
                            .iter()
                            .filter(|(n, _)| pending.iter().any(|p| p == n))
                            .map(|(n, count)| {
                                CreatePartitionsTopic::default()
                                    .with_name(TopicName(kstr(*n)))
                                    .with_count(*count)
                                    .with_assignments(None)
                            })
                            .collect(),
                    )
            };
            let response = r.call_controller_negotiated(
                CREATE_PARTITIONS_VERSION,
                CREATE_PARTITIONS_VERSIONS,
                request,
            )?;
            Ok(topic_outcomes(response.results.iter().map(|t| {
                (t.name.0.to_string(), t.error_code, t.error_message.as_ref())
            })))
        })
    }

    /// Every setting of each topic, with its value and where it comes from
    /// (DescribeConfigs): the topic's own settings have [`ConfigSource::Topic`].
    pub fn describe_configs(&self, topics: &[&str]) -> Result<Each<String, Vec<ConfigEntry>>> {
        let names: Vec<String> = topics.iter().map(|n| n.to_string()).collect();
        unique(&names, |n| topic(n))?;
        self.router.lock().rounds(names, true, |r, pending| {
            let request = DescribeConfigsRequest::default().with_resources(
                pending
                    .iter()
                    .map(|n| {
                        DescribeConfigsResource::default()
                            .with_resource_type(TOPIC_RESOURCE)
                            .with_resource_name(kstr(n))
                            .with_configuration_keys(None)
                    })
                    .collect(),
            );
            let response = r.call_any(&request, DESCRIBE_CONFIGS_VERSION)?;
            Ok(response
                .results
                .into_iter()
                .map(|res| {
                    let name = res.resource_name.to_string();
                    let o = check(|| topic(&name), res.error_code, res.error_message.as_ref()).map(
                        |()| {
                            res.configs
                                .into_iter()
                                .map(broker_configs::config_entry)
                                .collect()
                        },
                    );
                    (name, o.into())
                })
                .collect())
        })
    }

    /// Changes settings of topics, keeping the others (IncrementalAlterConfigs, Kafka's
    /// `incrementalAlterConfigs`). A topic's changes apply all together or not at all.
    pub fn alter_configs(&self, changes: &[(&str, Vec<AlterConfigOp>)]) -> Result<Each<String>> {
        let names: Vec<String> = changes.iter().map(|(n, _)| n.to_string()).collect();
        unique(&names, |n| topic(n))?;
        self.router.lock().rounds(names, false, |r, pending| {
            r.refresh(Some(&[]))?;
            let request = IncrementalAlterConfigsRequest::default().with_resources(
                changes
                    .iter()
                    .filter(|(n, _)| pending.iter().any(|p| p == n))
                    .map(|(n, ops)| {
                        AlterConfigsResource::default()
                            .with_resource_type(TOPIC_RESOURCE)
                            .with_resource_name(kstr(*n))
                            .with_configs(ops.iter().map(alterable).collect())
                    })
                    .collect(),
            );
            let addr = r.any_addr()?;
            let response = r.call_addr(&addr, &request, INCREMENTAL_ALTER_CONFIGS_VERSION)?;
            Ok(topic_outcomes(response.responses.iter().map(|res| {
                let name = res.resource_name.to_string();
                (name, res.error_code, res.error_message.as_ref())
            })))
        })
    }

    /// Every consumer group of the cluster, sorted by id (ListGroups, asked of every
    /// broker: each lists the groups it coordinates).
    pub fn list_groups(&self) -> Result<Vec<GroupListing>> {
        let mut r = self.router.lock();
        r.refresh(Some(&[]))?;
        let nodes: Vec<i32> = r.node_ids();
        let per_node = r.rounds(nodes, true, |r, pending| {
            r.refresh(Some(&[]))?;
            let mut out = Vec::new();
            for &node in pending {
                let Some(addr) = r.node_addr(node) else {
                    // No longer a broker of the cluster: its groups moved to the others.
                    out.push((node, Outcome::Done(Ok(Vec::new()))));
                    continue;
                };
                let answer = r.call_addr(&addr, &ListGroupsRequest::default(), LIST_GROUPS_VERSION);
                let outcome = match answer {
                    Ok(l) => check(|| Resource::Broker(node), l.error_code, None)
                        .map(|()| {
                            l.groups
                                .into_iter()
                                .map(|g| GroupListing {
                                    group_id: g.group_id.0.to_string(),
                                    protocol_type: g.protocol_type.to_string(),
                                    state: g.group_state.to_string(),
                                })
                                .collect::<Vec<_>>()
                        })
                        .into(),
                    Err(e) => Outcome::Retry(e),
                };
                out.push((node, outcome));
            }
            Ok(out)
        })?;
        let mut groups: Vec<GroupListing> = Vec::new();
        for (_, listed) in per_node {
            groups.extend(listed?);
        }
        groups.sort_by(|a, b| a.group_id.cmp(&b.group_id));
        groups.dedup_by(|a, b| a.group_id == b.group_id);
        Ok(groups)
    }

    /// Each group's state, protocol and members with their assignments (DescribeGroups,
    /// sent to the group's coordinator). A group the coordinator does not know is
    /// described as `Dead` with no members, as Kafka does.
    pub fn describe_groups(&self, groups: &[&str]) -> Result<Each<String, GroupDescription>> {
        self.to_coordinators(
            groups,
            DESCRIBE_GROUPS_VERSION,
            |id| DescribeGroupsRequest::default().with_groups(vec![GroupId(kstr(id))]),
            |node, response| described(response.groups, |gid, g| group_description(gid, node, g)),
        )
    }

    /// Sends each group's request (`make`) to the group's coordinator (FindCoordinator)
    /// and reads its answer (`read`, given the coordinator's node id) into an outcome per
    /// group, with the client's retries.
    fn to_coordinators<R: kafka_protocol::protocol::Request, T>(
        &self,
        groups: &[&str],
        version: i16,
        make: impl Fn(&str) -> R,
        read: impl Fn(i32, R::Response) -> Vec<(String, Outcome<T>)>,
    ) -> Result<Each<String, T>> {
        let ids: Vec<String> = groups.iter().map(|g| g.to_string()).collect();
        unique(&ids, |g| group(g))?;
        self.router.lock().rounds(ids, true, |r, pending| {
            let mut out = Vec::new();
            for id in pending {
                let (node, addr) = match r.coordinator(id)? {
                    Outcome::Done(Ok(found)) => found,
                    Outcome::Done(Err(e)) => {
                        out.push((id.clone(), Outcome::Done(Err(e))));
                        continue;
                    }
                    Outcome::Retry(e) => {
                        out.push((id.clone(), Outcome::Retry(e)));
                        continue;
                    }
                };
                match r.call_addr(&addr, &make(id), version) {
                    Ok(response) => out.extend(read(node, response)),
                    Err(e) => out.push((id.clone(), Outcome::Retry(e))),
                }
            }
            Ok(out)
        })
    }

    /// The offsets a group has committed, sorted by partition (OffsetFetch, sent to the
    /// group's coordinator; Kafka's `listConsumerGroupOffsets`). A group without
    /// commits has none.
    pub fn list_consumer_group_offsets(&self, group_id: &str) -> Result<Vec<CommittedOffset>> {
        let mut r = self.router.lock();
        let mut answer = r.rounds(vec![group_id.to_string()], true, |r, _| {
            let addr = match r.coordinator(group_id)? {
                Outcome::Done(Ok((_, addr))) => addr,
                Outcome::Done(Err(e)) => {
                    return Ok(vec![(group_id.to_string(), Outcome::Done(Err(e)))]);
                }
                Outcome::Retry(e) => return Ok(vec![(group_id.to_string(), Outcome::Retry(e))]),
            };
            let request = OffsetFetchRequest::default()
                .with_group_id(GroupId(kstr(group_id)))
                .with_topics(None);
            let response = match r.call_addr(&addr, &request, OFFSET_FETCH_VERSION) {
                Ok(response) => response,
                Err(e) => return Ok(vec![(group_id.to_string(), Outcome::Retry(e))]),
            };
            let mut offsets = Vec::new();
            let mut outcome = check(|| group(group_id), response.error_code, None);
            for t in response.topics {
                for p in t.partitions {
                    let tp = TopicPartition::new(t.name.0.to_string(), p.partition_index);
                    if outcome.is_ok() && p.error_code != 0 {
                        outcome = check(|| Resource::Partition(tp.clone()), p.error_code, None);
                    }
                    if p.committed_offset >= 0 {
                        offsets.push(CommittedOffset {
                            partition: tp,
                            offset: p.committed_offset,
                            leader_epoch: Some(p.committed_leader_epoch).filter(|e| *e >= 0),
                            metadata: p.metadata.map(|m| m.to_string()).unwrap_or_default(),
                        });
                    }
                }
            }
            offsets.sort_by(|a, b| a.partition.cmp(&b.partition));
            Ok(vec![(
                group_id.to_string(),
                outcome.map(|()| offsets).into(),
            )])
        })?;
        answer.remove(group_id).expect("one key")
    }

    /// Commits offsets for a group that has no active members (OffsetCommit with no
    /// generation, sent to the group's coordinator; Kafka's
    /// `alterConsumerGroupOffsets`), as `kafka-consumer-groups --reset-offsets` does. A
    /// group with members refuses it.
    pub fn alter_consumer_group_offsets(
        &self,
        group_id: &str,
        offsets: &[(TopicPartition, i64)],
    ) -> Result<Each<TopicPartition>> {
        let keys: Vec<TopicPartition> = offsets.iter().map(|(tp, _)| tp.clone()).collect();
        unique(&keys, |tp| Resource::Partition(tp.clone()))?;
        self.router.lock().rounds(keys, true, |r, pending| {
            let all_pending =
                |o: fn(Error) -> Outcome<()>, e: Error| -> Vec<(TopicPartition, Outcome<()>)> {
                    pending
                        .iter()
                        .map(|tp| (tp.clone(), o(e.clone())))
                        .collect()
                };
            let addr = match r.coordinator(group_id)? {
                Outcome::Done(Ok((_, addr))) => addr,
                Outcome::Done(Err(e)) => return Ok(all_pending(|e| Outcome::Done(Err(e)), e)),
                Outcome::Retry(e) => return Ok(all_pending(Outcome::Retry, e)),
            };
            let mut by_topic: BTreeMap<&str, Vec<OffsetCommitRequestPartition>> = BTreeMap::new();
            for (tp, offset) in offsets.iter().filter(|(tp, _)| pending.contains(tp)) {
                by_topic.entry(&tp.topic).or_default().push(
                    OffsetCommitRequestPartition::default()
                        .with_partition_index(tp.partition)
                        .with_committed_offset(*offset)
                        .with_committed_leader_epoch(-1)
                        .with_committed_metadata(Some(kstr(""))),
                );
            }
            let request = OffsetCommitRequest::default()
                .with_group_id(GroupId(kstr(group_id)))
                .with_generation_id_or_member_epoch(-1)
                .with_member_id(kstr(""))
                .with_topics(
                    by_topic
                        .into_iter()
                        .map(|(t, partitions)| {
                            OffsetCommitRequestTopic::default()
                                .with_name(TopicName(kstr(t)))
                                .with_partitions(partitions)
                        })
                        .collect(),
                );
            let response = match r.call_addr(&addr, &request, OFFSET_COMMIT_VERSION) {
                Ok(response) => response,
                Err(e) => return Ok(all_pending(Outcome::Retry, e)),
            };
            Ok(response
                .topics
                .into_iter()
                .flat_map(|t| {
                    let name = t.name.0.to_string();
                    t.partitions.into_iter().map(move |p| {
                        let tp = TopicPartition::new(name.clone(), p.partition_index);
                        let o = check(|| group(group_id), p.error_code, None);
                        (tp, o.into())
                    })
                })
                .collect())
        })
    }

    /// Offsets of partitions (ListOffsets, sent to each partition's leader): the first
    /// still in the log, the end of what consumers may read (the high watermark), or
    /// the first at or after a time.
    pub fn list_offsets(
        &self,
        specs: &[(TopicPartition, OffsetSpec)],
    ) -> Result<Each<TopicPartition, ListedOffset>> {
        self.list_offsets_with(specs, IsolationLevel::ReadUncommitted)
    }

    /// [`list_offsets`](Self::list_offsets) as a consumer of `isolation` sees them
    /// (Kafka's `ListOffsetsOptions.isolationLevel`): reading committed, the end is
    /// the last stable offset, and a time is looked up below it.
    pub fn list_offsets_with(
        &self,
        specs: &[(TopicPartition, OffsetSpec)],
        isolation: IsolationLevel,
    ) -> Result<Each<TopicPartition, ListedOffset>> {
        let keys: Vec<TopicPartition> = specs.iter().map(|(tp, _)| tp.clone()).collect();
        unique(&keys, |tp| Resource::Partition(tp.clone()))?;
        self.router.lock().rounds(keys, true, |r, pending| {
            let mut topics: Vec<String> = pending.iter().map(|tp| tp.topic.clone()).collect();
            topics.dedup();
            let metadata = topics_of(r.refresh(Some(&topics))?);
            let mut out: Vec<(TopicPartition, Outcome<ListedOffset>)> = Vec::new();
            // Leader address -> the partitions to ask it about.
            let mut by_leader: BTreeMap<String, Vec<(TopicPartition, OffsetSpec)>> =
                BTreeMap::new();
            for (tp, spec) in specs.iter().filter(|(tp, _)| pending.contains(tp)) {
                let part = tp.clone();
                let partition = || Resource::Partition(part.clone());
                let meta = metadata.iter().find(|(n, _)| *n == tp.topic);
                let leader = match meta {
                    Some((_, Outcome::Done(Ok(t)))) => {
                        match t.partitions.iter().find(|p| p.partition == tp.partition) {
                            Some(p) => p.leader.ok_or_else(|| {
                                AdminError::new(partition(), ErrorCode::LEADER_NOT_AVAILABLE, None)
                            }),
                            None => Err(AdminError::new(
                                partition(),
                                ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
                                Some(format!(
                                    "topic {:?} has {} partitions",
                                    t.name,
                                    t.partitions.len()
                                )),
                            )),
                        }
                    }
                    Some((_, Outcome::Done(Err(Error::Admin(e))))) => {
                        Err(AdminError::new(partition(), e.code, e.message.clone()))
                    }
                    _ => Err(AdminError::new(
                        partition(),
                        ErrorCode::LEADER_NOT_AVAILABLE,
                        Some("no metadata for its topic".into()),
                    )),
                };
                let addr = leader.and_then(|id| {
                    r.node_addr(id).ok_or_else(|| {
                        AdminError::new(
                            partition(),
                            ErrorCode::LEADER_NOT_AVAILABLE,
                            Some(format!("its leader {id} is not among the brokers")),
                        )
                    })
                });
                match addr {
                    Ok(addr) => by_leader.entry(addr).or_default().push((tp.clone(), *spec)),
                    Err(e) => out.push((tp.clone(), Err::<ListedOffset, _>(e).into())),
                }
            }
            for (addr, parts) in by_leader {
                let mut by_topic: BTreeMap<&str, Vec<ListOffsetsPartition>> = BTreeMap::new();
                for (tp, spec) in &parts {
                    let timestamp = match spec {
                        OffsetSpec::Earliest => -2,
                        OffsetSpec::Latest => -1,
                        OffsetSpec::Timestamp(ts) => *ts,
                    };
                    by_topic.entry(&tp.topic).or_default().push(
                        ListOffsetsPartition::default()
                            .with_partition_index(tp.partition)
                            .with_current_leader_epoch(-1)
                            .with_timestamp(timestamp),
                    );
                }
                let request = ListOffsetsRequest::default()
                    .with_replica_id(BrokerId(-1))
                    .with_isolation_level(isolation_level(isolation))
                    .with_topics(
                        by_topic
                            .into_iter()
                            .map(|(t, partitions)| {
                                ListOffsetsTopic::default()
                                    .with_name(TopicName(kstr(t)))
                                    .with_partitions(partitions)
                            })
                            .collect(),
                    );
                match r.call_addr(&addr, &request, LIST_OFFSETS_VERSION) {
                    Ok(response) => {
                        for t in response.topics {
                            let name = t.name.0.to_string();
                            for p in t.partitions {
                                let tp = TopicPartition::new(name.clone(), p.partition_index);
                                let o =
                                    check(|| Resource::Partition(tp.clone()), p.error_code, None)
                                        .map(|()| ListedOffset {
                                            offset: Some(p.offset).filter(|o| *o >= 0),
                                            timestamp: Some(p.timestamp).filter(|t| *t >= 0),
                                            leader_epoch: Some(p.leader_epoch).filter(|e| *e >= 0),
                                        });
                                out.push((tp, o.into()));
                            }
                        }
                    }
                    Err(e) => out.extend(
                        parts
                            .into_iter()
                            .map(|(tp, _)| (tp, Outcome::Retry(e.clone()))),
                    ),
                }
            }
            Ok(out)
        })
    }
}

/// The wire form of one config change.
fn alterable(op: &AlterConfigOp) -> AlterableConfig {
    let (code, key, value) = match op {
        AlterConfigOp::Set(k, v) => (0, k, Some(v)),
        AlterConfigOp::Delete(k) => (1, k, None),
        AlterConfigOp::Append(k, v) => (2, k, Some(v)),
        AlterConfigOp::Subtract(k, v) => (3, k, Some(v)),
    };
    AlterableConfig::default()
        .with_name(kstr(key))
        .with_config_operation(code)
        .with_value(value.map(kstr))
}

/// The key of a request about the cluster as a whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Cluster;

impl std::fmt::Display for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the cluster")
    }
}
