//! What the admin client's methods take and return (Kafka's admin types, by their
//! Kafka names where one exists).

use crate::consumer::Assignment;
pub use crate::error::TopicPartition;

/// A topic to create (Kafka's `NewTopic`): partitions and replication factor default
/// to the broker's (`num.partitions`, `default.replication.factor`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewTopic {
    /// Topic name.
    pub name: String,
    /// Number of partitions (`None`: the broker's `num.partitions`).
    pub partitions: Option<i32>,
    /// Replicas of each partition (`None`: the broker's `default.replication.factor`).
    pub replication_factor: Option<i16>,
    /// Topic settings by their Kafka names (`retention.ms`, `min.insync.replicas`, ...).
    pub configs: Vec<(String, String)>,
}

impl NewTopic {
    /// Topic `name` with the broker's defaults.
    pub fn new(name: impl Into<String>) -> NewTopic {
        NewTopic {
            name: name.into(),
            partitions: None,
            replication_factor: None,
            configs: Vec::new(),
        }
    }

    /// With `n` partitions.
    pub fn partitions(mut self, n: i32) -> NewTopic {
        self.partitions = Some(n);
        self
    }

    /// With `n` replicas of each partition.
    pub fn replication_factor(mut self, n: i16) -> NewTopic {
        self.replication_factor = Some(n);
        self
    }

    /// With the topic setting `key` = `value`.
    pub fn config(mut self, key: impl Into<String>, value: impl Into<String>) -> NewTopic {
        self.configs.push((key.into(), value.into()));
        self
    }
}

/// A broker of the cluster, as Metadata lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerMetadata {
    /// Node id.
    pub id: i32,
    /// Host clients connect to.
    pub host: String,
    /// Port clients connect to.
    pub port: i32,
    /// Rack, if the broker has one.
    pub rack: Option<String>,
}

/// One partition of a topic, as Metadata describes it (`kafka-topics --describe`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionMetadata {
    /// Partition index.
    pub partition: i32,
    /// The leader's node id; `None` while the partition has none
    /// (LEADER_NOT_AVAILABLE).
    pub leader: Option<i32>,
    /// The leader epoch (-1 if the broker does not say).
    pub leader_epoch: i32,
    /// Node ids of the replicas, in assignment order (the first is the preferred
    /// leader).
    pub replicas: Vec<i32>,
    /// Node ids of the in-sync replicas.
    pub isr: Vec<i32>,
    /// Replicas on brokers that are down.
    pub offline_replicas: Vec<i32>,
}

/// A topic, as Metadata describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicMetadata {
    /// Topic name.
    pub name: String,
    /// True for Kafka's internal topics (`__consumer_offsets`).
    pub internal: bool,
    /// The partitions, by index.
    pub partitions: Vec<PartitionMetadata>,
}

impl TopicMetadata {
    /// Replicas per partition (of partition 0; 0 for a topic without partitions).
    pub fn replication_factor(&self) -> usize {
        self.partitions.first().map_or(0, |p| p.replicas.len())
    }
}

/// The cluster as one Metadata answer describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterMetadata {
    /// The cluster id, if the broker has one.
    pub cluster_id: Option<String>,
    /// Node id of the controller, if there is one.
    pub controller: Option<i32>,
    /// The brokers clients can reach, by node id.
    pub brokers: Vec<BrokerMetadata>,
    /// Every topic, by name.
    pub topics: Vec<TopicMetadata>,
}

/// Where a configuration value comes from (DescribeConfigs' `config_source`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigSource {
    /// Set on the topic (DYNAMIC_TOPIC_CONFIG).
    Topic,
    /// Set on this broker at run time (DYNAMIC_BROKER_CONFIG).
    DynamicBroker,
    /// Set on every broker at run time (DYNAMIC_DEFAULT_BROKER_CONFIG).
    DynamicDefaultBroker,
    /// From the broker's configuration file (STATIC_BROKER_CONFIG).
    StaticBroker,
    /// Kafka's default (DEFAULT_CONFIG).
    Default,
    /// A source this client does not name, by number.
    Other(i8),
}

impl ConfigSource {
    pub(crate) fn from_wire(v: i8) -> ConfigSource {
        match v {
            1 => ConfigSource::Topic,
            2 => ConfigSource::DynamicBroker,
            3 => ConfigSource::DynamicDefaultBroker,
            4 => ConfigSource::StaticBroker,
            5 => ConfigSource::Default,
            other => ConfigSource::Other(other),
        }
    }
}

/// One setting of a topic's configuration (DescribeConfigs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigEntry {
    /// Kafka name of the setting.
    pub name: String,
    /// Its value (`None` when the broker hides it, e.g. a password).
    pub value: Option<String>,
    /// Where the value comes from: [`ConfigSource::Topic`] for a topic's overrides.
    pub source: ConfigSource,
    /// True if it cannot be changed.
    pub read_only: bool,
    /// True if the value is secret.
    pub sensitive: bool,
}

/// One change of a topic's configuration (IncrementalAlterConfigs' operations, Kafka's
/// `AlterConfigOp`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AlterConfigOp {
    /// Set `key` to `value`.
    Set(String, String),
    /// Remove the topic's value of `key` (back to the broker's default).
    Delete(String),
    /// Add items to a list setting (`cleanup.policy`).
    Append(String, String),
    /// Remove items from a list setting.
    Subtract(String, String),
}

/// A consumer group, as ListGroups lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupListing {
    /// The group id.
    pub group_id: String,
    /// Its protocol type (`consumer` for consumer groups; empty for a group that only
    /// stores offsets).
    pub protocol_type: String,
    /// Its state (`Stable`, `Empty`, ...; empty if the broker does not say).
    pub state: String,
}

/// A member of a consumer group (DescribeGroups).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberDescription {
    /// The member id the coordinator gave it.
    pub member_id: String,
    /// Its static member id (`group.instance.id`), if it has one.
    pub group_instance_id: Option<String>,
    /// The client id it sent.
    pub client_id: String,
    /// The host it connected from.
    pub host: String,
    /// Its partitions, decoded from the consumer protocol (`None` when the group is
    /// not a consumer group or the member has no assignment yet).
    pub assignment: Option<Assignment>,
}

/// A consumer group (DescribeGroups).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupDescription {
    /// The group id.
    pub group_id: String,
    /// Its state: `Stable`, `PreparingRebalance`, `CompletingRebalance`, `Empty`, or
    /// `Dead` for a group the coordinator does not know.
    pub state: String,
    /// Its protocol type (`consumer`).
    pub protocol_type: String,
    /// The protocol of its generation: for a consumer group, the assignor (`range`).
    pub protocol: String,
    /// Its members.
    pub members: Vec<MemberDescription>,
    /// Node id of its coordinator.
    pub coordinator: i32,
}

/// A group's committed offset of one partition (OffsetFetch).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommittedOffset {
    /// The partition.
    pub partition: TopicPartition,
    /// The committed offset: the next record the group reads.
    pub offset: i64,
    /// The leader epoch committed with it, if any.
    pub leader_epoch: Option<i32>,
    /// The metadata committed with it.
    pub metadata: String,
}

/// Which offset [`AdminClient::list_offsets`](super::AdminClient::list_offsets) asks
/// for (Kafka's `OffsetSpec`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetSpec {
    /// The first offset still in the log.
    Earliest,
    /// The end of what consumers may read (the high watermark).
    Latest,
    /// The first record with a timestamp at or after this one (ms since the epoch).
    Timestamp(i64),
}

/// The answer of ListOffsets for one partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListedOffset {
    /// The offset; `None` for a timestamp after every record.
    pub offset: Option<i64>,
    /// The timestamp of that record, for [`OffsetSpec::Timestamp`].
    pub timestamp: Option<i64>,
    /// The leader epoch of that record, if the broker says.
    pub leader_epoch: Option<i32>,
}
