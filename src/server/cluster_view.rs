//! What the API handlers ask of the cluster a node belongs to, as one narrow trait:
//! [`ClusterView`]. The handlers of Metadata, FindCoordinator, CreateTopics,
//! DeleteTopics, DescribeCluster, ListGroups and DescribeConfigs, and the broker backend's
//! leader check, see the cluster only through it, so they can be tested with a fake
//! cluster (see the tests at the end of this file).
//!
//! The server sits above the cluster: this file also holds the adapter that implements
//! the trait for [`ClusterNode`] (from its metadata image and its controller calls); the
//! cluster knows nothing of the server.

use std::time::Duration;

use crate::cluster::ClusterNode;
use crate::cluster::features::{FeatureChange, FeatureLevels};
use crate::config::TransactionConfig;
use crate::error::{Result, TxnError};
use crate::transaction::ProducerIdAndEpoch;

/// A voter change a node forwards to the controller.
#[derive(Debug, Clone, Copy)]
pub(crate) enum VoterChangeRequest<'a> {
    /// AddRaftVoter.
    Add(&'a kafka_protocol::messages::AddRaftVoterRequest),
    /// RemoveRaftVoter.
    Remove(&'a kafka_protocol::messages::RemoveRaftVoterRequest),
}

/// How long a request forwarded to the controller that it answers at once
/// (DescribeQuorum) may take.
const FORWARD_TIMEOUT: Duration = Duration::from_secs(10);

/// How much longer than the controller may take a forwarded voter change is waited for.
const FORWARD_SLACK: Duration = Duration::from_secs(5);

/// "No leader" in [`PartitionLayout::leader`] (as Kafka's -1).
pub(crate) const NO_LEADER: i32 = -1;

/// A registered broker of the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ClusterBroker {
    /// Node id.
    pub id: i32,
    /// Fenced by the controller (stopped heartbeating).
    pub fenced: bool,
    /// Its advertised `(host, port)` for the listener asked about; None if it has no
    /// listener of that name.
    pub endpoint: Option<(String, i32)>,
    /// Its rack (`broker.rack`), if it has one.
    pub rack: Option<String>,
}

/// The partitions of one topic as the cluster's metadata has them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TopicLayout {
    /// Topic id (KIP-516): a topic created again under a deleted one's name has another.
    pub id: [u8; 16],
    /// True for `__consumer_offsets`.
    pub internal: bool,
    /// The partitions, by index.
    pub partitions: Vec<PartitionLayout>,
}

/// The replicas of one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PartitionLayout {
    /// The leader, or [`NO_LEADER`].
    pub leader: i32,
    /// Bumped on every leader change.
    pub leader_epoch: i32,
    /// Replicas in assignment order.
    pub replicas: Vec<i32>,
    /// In-sync replicas.
    pub isr: Vec<i32>,
    /// Replicas offline on their broker (their log directory failed).
    pub offline: Vec<i32>,
}

/// A topic to create through the controller.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct TopicSpec {
    /// Name.
    pub name: String,
    /// Partitions, -1 = the cluster's `num.partitions`.
    pub partitions: i32,
    /// Replication factor, -1 = `default.replication.factor`.
    pub replication_factor: i16,
    /// Client-chosen replicas per partition (then `partitions` and
    /// `replication_factor` are -1).
    pub assignment: Option<Vec<Vec<i32>>>,
    /// Config overrides by Kafka name.
    pub configs: Vec<(String, String)>,
}

/// What the API handlers need from the cluster a node belongs to.
pub(crate) trait ClusterView: Send + Sync {
    /// This node's id.
    fn node_id(&self) -> i32;
    /// The cluster's id, once the cluster is initialized.
    fn cluster_id(&self) -> Option<String>;
    /// The controller (Raft leader), if known.
    fn controller_id(&self) -> Option<i32>;
    /// Every registered broker (fenced ones included), by id, with its endpoint of
    /// `listener`.
    fn brokers(&self, listener: &str) -> Vec<ClusterBroker>;
    /// The broker epoch broker `id` is registered at (the place of its registration in
    /// the metadata log), None if it is not registered.
    fn broker_epoch(&self, id: i32) -> Option<i64> {
        let _ = id;
        None
    }
    /// The name of the inter-broker listener when one was named: follower fetches are
    /// taken only there.
    fn inter_broker_listener(&self) -> Option<String> {
        None
    }
    /// The metadata quorum as this node sees it (DescribeQuorum); None on a single
    /// node.
    fn quorum(&self) -> Option<crate::cluster::QuorumStatus> {
        None
    }
    /// The directory id the quorum recorded for `node` (`meta.properties`'
    /// `directory.id`), if any.
    fn directory_of(&self, node: i32) -> Option<String> {
        let _ = node;
        None
    }
    /// DescribeQuorum answered by the controller `leader` for a client of this node
    /// (Kafka's brokers forward it): its answer, or why it could not be asked.
    fn describe_quorum_at_controller(
        &self,
        leader: i32,
        request: &kafka_protocol::messages::DescribeQuorumRequest,
        version: i16,
    ) -> std::result::Result<kafka_protocol::messages::DescribeQuorumResponse, String> {
        let _ = (request, version);
        Err(format!(
            "this node cannot forward to the controller, node {leader}"
        ))
    }
    /// AddRaftVoter or RemoveRaftVoter answered by the controller `leader` within
    /// `timeout` for a client of this node (Kafka's brokers forward them): its error
    /// code and message, or why it could not be asked.
    fn voter_change_at_controller(
        &self,
        leader: i32,
        change: VoterChangeRequest<'_>,
        version: i16,
        timeout: Duration,
    ) -> std::result::Result<(i16, Option<String>), String> {
        let _ = (change, version, timeout);
        Err(format!(
            "this node cannot forward to the controller, node {leader}"
        ))
    }
    /// Adds (`add`) or removes voter `node` of the metadata quorum (AddRaftVoter,
    /// RemoveRaftVoter), on the controller: why not, with Kafka's error code.
    fn change_voter(
        &self,
        add: bool,
        node: i32,
        directory_id: Option<String>,
        timeout: Duration,
    ) -> std::result::Result<(), crate::cluster::QuorumRefusal> {
        let _ = (add, node, directory_id, timeout);
        Err(crate::cluster::QuorumRefusal::Failed {
            reason: "this node is not a cluster node".into(),
        })
    }
    /// The names of every topic, sorted.
    fn topic_names(&self) -> Vec<String>;
    /// The layout of each of `names` (None for a topic that does not exist), all read
    /// from one state of the metadata.
    fn topics(&self, names: &[String]) -> Vec<Option<TopicLayout>>;
    /// The topics this node knows are created but does not serve yet (their partitions
    /// are being opened here): Metadata lists them with LEADER_NOT_AVAILABLE, as Kafka
    /// does for a topic being created, rather than leaving them out or answering
    /// UNKNOWN_TOPIC_OR_PARTITION.
    fn topics_being_created(&self) -> Vec<String> {
        Vec::new()
    }
    /// The layout of topic `name`, None if it does not exist.
    fn topic(&self, name: &str) -> Option<TopicLayout> {
        self.topics(&[name.to_string()]).pop().flatten()
    }
    /// Create `topic` through the controller (with `validate_only`, only check it),
    /// returning once this node applied it or after `timeout`.
    fn create_topic(&self, topic: &TopicSpec, validate_only: bool, timeout: Duration)
    -> Result<()>;
    /// Delete topic `name` through the controller.
    fn delete_topic(&self, name: &str, timeout: Duration) -> Result<()>;
    /// Wait until this node has caught up with the metadata log (up to `timeout`, or
    /// until `gone` says the client left); true if it has.
    fn wait_caught_up(&self, timeout: Duration, gone: &dyn Fn() -> bool) -> bool;
    /// Makes `__transaction_state` through the controller unless it exists.
    fn ensure_transaction_state(&self, config: &TransactionConfig) -> Result<()> {
        let _ = config;
        Err(crate::error::Error::InvalidConfig {
            key: "transactional.id".into(),
            reason: "this cluster serves no transactions".into(),
        })
    }
    /// KIP-890 part 1: asks the coordinator of `transactional_id` on another node
    /// whether `topic`-`partition` is in the producer's ongoing transaction; with `add`
    /// (part 2, a client of transaction version 2) to add it.
    fn verify_transaction(
        &self,
        transactional_id: &str,
        producer: ProducerIdAndEpoch,
        topic: &str,
        partition: i32,
        add: bool,
    ) -> std::result::Result<(), TxnError> {
        let _ = (transactional_id, producer, topic, partition, add);
        Err(TxnError::NotCoordinator)
    }
    /// Leader elections and reassignments through the controller (None: this cluster
    /// offers none).
    fn partition_admin(&self) -> Option<&dyn super::partition_admin::PartitionAdmin> {
        None
    }
    /// The leader throttle of follower `replica`'s fetch of `topic`-`partition` (KIP-73),
    /// None if it is not throttled. `throttled`: the partition's parsed
    /// `leader.replication.throttled.replicas`.
    fn leader_throttle(
        &self,
        topic: &str,
        partition: i32,
        replica: i32,
        throttled: &dyn Fn() -> crate::storage::ThrottledReplicas,
    ) -> Option<crate::cluster::LeaderThrottle> {
        let _ = (topic, partition, replica, throttled);
        None
    }
    /// The settings this node was started with (None: a test double).
    fn cluster_config(&self) -> Option<&crate::cluster::ClusterConfig> {
        None
    }
    /// The dynamic broker configs (KIP-73's replication throttle rates), None if this
    /// cluster keeps none.
    fn broker_configs(&self) -> Option<crate::cluster::image::BrokerConfigs> {
        None
    }
    /// Sets and removes dynamic broker configs of `broker` (None: the cluster-wide
    /// default) through the controller, all or none; `validate_only` only checks.
    fn alter_broker_config(
        &self,
        broker: Option<i32>,
        changes: Vec<(String, Option<String>)>,
        validate_only: bool,
        timeout: Duration,
    ) -> Result<()> {
        let _ = (broker, changes, validate_only, timeout);
        Err(crate::error::Error::InvalidConfig {
            key: "broker config".into(),
            reason: "this cluster keeps no dynamic broker configs".into(),
        })
    }
    /// The cluster's finalized feature levels (KIP-584) and this node's supported
    /// ones; None if it keeps none (then a single node's fixed levels hold).
    fn feature_levels(&self) -> Option<FeatureLevels> {
        None
    }
    /// UpdateFeatures through the controller: `Ok(Err(message))` is
    /// INVALID_UPDATE_VERSION's refusal.
    fn update_features(
        &self,
        changes: &[FeatureChange],
        validate_only: bool,
        timeout: Duration,
    ) -> Result<std::result::Result<(), String>> {
        let _ = (validate_only, timeout);
        Ok(Err(format!(
            "this cluster keeps no feature levels: {} changes refused",
            changes.len()
        )))
    }
}

/// The adapter: a cluster node answers from its metadata image.
impl ClusterView for ClusterNode {
    fn node_id(&self) -> i32 {
        ClusterNode::node_id(self)
    }

    fn cluster_id(&self) -> Option<String> {
        self.image().cluster_id.clone()
    }

    fn controller_id(&self) -> Option<i32> {
        ClusterNode::controller_id(self)
    }

    fn quorum(&self) -> Option<crate::cluster::QuorumStatus> {
        Some(self.quorum_status())
    }

    fn directory_of(&self, node: i32) -> Option<String> {
        ClusterNode::directory_of(self, node)
    }

    fn describe_quorum_at_controller(
        &self,
        leader: i32,
        request: &kafka_protocol::messages::DescribeQuorumRequest,
        version: i16,
    ) -> std::result::Result<kafka_protocol::messages::DescribeQuorumResponse, String> {
        self.at_controller(leader, request, version, FORWARD_TIMEOUT)
    }

    fn voter_change_at_controller(
        &self,
        leader: i32,
        change: VoterChangeRequest<'_>,
        version: i16,
        timeout: Duration,
    ) -> std::result::Result<(i16, Option<String>), String> {
        let timeout = timeout + FORWARD_SLACK;
        let answer = match change {
            VoterChangeRequest::Add(r) => self
                .at_controller(leader, r, version, timeout)
                .map(|a| (a.error_code, a.error_message)),
            VoterChangeRequest::Remove(r) => self
                .at_controller(leader, r, version, timeout)
                .map(|a| (a.error_code, a.error_message)),
        }?;
        Ok((answer.0, answer.1.map(|m| m.to_string())))
    }

    fn change_voter(
        &self,
        add: bool,
        node: i32,
        directory_id: Option<String>,
        timeout: Duration,
    ) -> std::result::Result<(), crate::cluster::QuorumRefusal> {
        if add {
            self.add_voter(node, directory_id, timeout)
        } else {
            self.remove_voter(node, directory_id, timeout)
        }
    }

    fn brokers(&self, listener: &str) -> Vec<ClusterBroker> {
        self.image()
            .brokers
            .values()
            .map(|b| ClusterBroker {
                id: b.id,
                fenced: b.fenced,
                endpoint: b.endpoint(listener),
                rack: b.rack.clone(),
            })
            .collect()
    }

    fn broker_epoch(&self, id: i32) -> Option<i64> {
        self.image().brokers.get(&id).map(|b| b.epoch)
    }

    fn inter_broker_listener(&self) -> Option<String> {
        ClusterNode::inter_broker_listener(self).map(str::to_string)
    }

    fn topic_names(&self) -> Vec<String> {
        self.image().topics.keys().cloned().collect()
    }

    fn topics_being_created(&self) -> Vec<String> {
        self.topics_being_published()
    }

    fn topics(&self, names: &[String]) -> Vec<Option<TopicLayout>> {
        let image = self.image();
        names
            .iter()
            .map(|name| {
                let t = image.topic(name)?;
                Some(TopicLayout {
                    id: t.id,
                    internal: t.internal,
                    partitions: t
                        .partitions
                        .iter()
                        .map(|p| PartitionLayout {
                            leader: p.leader,
                            leader_epoch: p.leader_epoch,
                            replicas: p.replicas.clone(),
                            isr: p.isr.clone(),
                            offline: p.offline.clone(),
                        })
                        .collect(),
                })
            })
            .collect()
    }

    fn create_topic(
        &self,
        topic: &TopicSpec,
        validate_only: bool,
        timeout: Duration,
    ) -> Result<()> {
        let topic = crate::cluster::NewTopic {
            name: topic.name.clone(),
            partitions: topic.partitions,
            replication_factor: topic.replication_factor,
            assignment: topic.assignment.clone(),
            configs: topic.configs.clone(),
        };
        ClusterNode::create_topic(self, &topic, validate_only, timeout)
    }

    fn delete_topic(&self, name: &str, timeout: Duration) -> Result<()> {
        ClusterNode::delete_topic(self, name, timeout)
    }

    fn wait_caught_up(&self, timeout: Duration, gone: &dyn Fn() -> bool) -> bool {
        ClusterNode::wait_caught_up(self, timeout, gone)
    }

    fn ensure_transaction_state(&self, config: &TransactionConfig) -> Result<()> {
        ClusterNode::ensure_transaction_state(self, config)
    }

    fn verify_transaction(
        &self,
        transactional_id: &str,
        producer: ProducerIdAndEpoch,
        topic: &str,
        partition: i32,
        add: bool,
    ) -> std::result::Result<(), TxnError> {
        ClusterNode::verify_transaction(self, transactional_id, producer, topic, partition, add)
    }
    fn partition_admin(&self) -> Option<&dyn super::partition_admin::PartitionAdmin> {
        Some(self)
    }
    fn cluster_config(&self) -> Option<&crate::cluster::ClusterConfig> {
        Some(self.config())
    }
    fn broker_configs(&self) -> Option<crate::cluster::image::BrokerConfigs> {
        Some(self.image().broker_configs.clone())
    }
    fn leader_throttle(
        &self,
        topic: &str,
        partition: i32,
        replica: i32,
        throttled: &dyn Fn() -> crate::storage::ThrottledReplicas,
    ) -> Option<crate::cluster::LeaderThrottle> {
        ClusterNode::leader_throttle(self, topic, partition, replica, throttled)
    }
    fn alter_broker_config(
        &self,
        broker: Option<i32>,
        changes: Vec<(String, Option<String>)>,
        validate_only: bool,
        timeout: Duration,
    ) -> Result<()> {
        ClusterNode::alter_broker_config(self, broker, changes, validate_only, timeout)
    }
    fn feature_levels(&self) -> Option<FeatureLevels> {
        Some(ClusterNode::feature_levels(self))
    }
    fn update_features(
        &self,
        changes: &[FeatureChange],
        validate_only: bool,
        timeout: Duration,
    ) -> Result<std::result::Result<(), String>> {
        ClusterNode::update_features(self, changes, validate_only, timeout)
    }
}

#[cfg(test)]
pub(crate) mod fake {
    //! A cluster in memory, for handler tests.

    use super::*;
    use parking_lot::Mutex;

    /// A listener's name, host and port.
    pub(crate) type Endpoint = (String, String, i32);

    /// A fake cluster: fixed brokers and topics; created topics are recorded.
    #[derive(Debug, Default)]
    pub(crate) struct FakeCluster {
        pub node_id: i32,
        pub cluster_id: Option<String>,
        pub controller: Option<i32>,
        /// `(id, fenced, endpoints by listener name)`.
        pub brokers: Vec<(i32, bool, Vec<Endpoint>)>,
        pub topics: std::collections::BTreeMap<String, TopicLayout>,
        /// Topics created but not served yet ([`ClusterView::topics_being_created`]).
        pub being_created: Vec<String>,
        pub created: Mutex<Vec<TopicSpec>>,
    }

    impl ClusterView for FakeCluster {
        fn node_id(&self) -> i32 {
            self.node_id
        }
        fn cluster_id(&self) -> Option<String> {
            self.cluster_id.clone()
        }
        fn controller_id(&self) -> Option<i32> {
            self.controller
        }
        fn brokers(&self, listener: &str) -> Vec<ClusterBroker> {
            self.brokers
                .iter()
                .map(|(id, fenced, endpoints)| ClusterBroker {
                    id: *id,
                    fenced: *fenced,
                    endpoint: endpoints
                        .iter()
                        .find(|(name, _, _)| name == listener)
                        .map(|(_, host, port)| (host.clone(), *port)),
                    rack: None,
                })
                .collect()
        }
        fn topic_names(&self) -> Vec<String> {
            self.topics.keys().cloned().collect()
        }
        fn topics(&self, names: &[String]) -> Vec<Option<TopicLayout>> {
            names.iter().map(|n| self.topics.get(n).cloned()).collect()
        }
        fn topics_being_created(&self) -> Vec<String> {
            self.being_created.clone()
        }
        fn create_topic(&self, topic: &TopicSpec, _: bool, _: Duration) -> Result<()> {
            self.created.lock().push(topic.clone());
            Ok(())
        }
        fn delete_topic(&self, name: &str, _: Duration) -> Result<()> {
            Err(crate::error::Error::UnknownTopic(name.to_string()))
        }
        fn wait_caught_up(&self, _: Duration, _: &dyn Fn() -> bool) -> bool {
            true
        }
        fn ensure_transaction_state(&self, _: &TransactionConfig) -> Result<()> {
            let name = crate::transaction::log::TRANSACTION_STATE_TOPIC;
            if self.topics.contains_key(name) {
                Ok(())
            } else {
                Err(crate::error::Error::Timeout(format!("{name} not made yet")))
            }
        }
    }
}
