//! A cluster node's settings ([`ClusterConfig`]), Kafka's defaults.

use std::net::TcpListener;
use std::sync::Arc;
use std::time::Duration;

use super::voters::Voter;
use super::{features, quorum_tls, records};
use crate::client;

/// Settings of a cluster node. Defaults are Kafka's.
#[derive(Debug)]
pub(crate) struct ClusterConfig {
    /// This node's id (Kafka `node.id`).
    pub node_id: i32,
    /// Every voter (Kafka `controller.quorum.voters`).
    pub voters: Vec<Voter>,
    /// This broker's Kafka listener as clients should reach it, `host:port`.
    pub advertised_listener: String,
    /// The listener other nodes' replica fetchers reach this one on, when it is not
    /// `advertised_listener` (Kafka's `inter.broker.listener.name`).
    pub replication_listener: Option<String>,
    /// The name of the inter-broker listener when one was named (Kafka's
    /// `inter.broker.listener.name`): follower fetches are taken only there.
    pub inter_broker_listener: Option<String>,
    /// Every Kafka listener of this broker by name, as clients of each should reach it
    /// (Kafka's `advertised.listeners`); registered so that each client is answered with
    /// the brokers' addresses on its own listener. Empty: only `advertised_listener`.
    pub endpoints: Vec<records::Endpoint>,
    /// This broker's rack (Kafka's `broker.rack`), registered with the broker: replica
    /// placement spreads a partition's replicas over racks, and consumers of a rack may
    /// fetch from a replica there. None: no rack.
    pub rack: Option<String>,
    /// How this node's replica fetchers connect (the inter-broker listener's TLS and
    /// SASL login); plaintext by default.
    pub replication_security: Arc<client::ClientSecurity>,
    /// Kafka `broker.session.timeout.ms`: 9 s.
    pub session_timeout: Duration,
    /// Kafka `default.replication.factor`: 1.
    pub default_replication_factor: i16,
    /// Kafka `min.insync.replicas`: 1 (the data plane's default for topics).
    pub min_insync_replicas: i32,
    /// Kafka `replica.lag.time.max.ms`: 30 s (the data plane's ISR shrink delay).
    pub replica_lag_time_max: Duration,
    /// Kafka `offsets.topic.replication.factor`: 3, capped at the number of voters.
    pub offsets_topic_replication_factor: i16,
    /// Kafka `offsets.topic.num.partitions`: 50, the partitions of `__consumer_offsets`
    /// when the controller creates it (the broker's
    /// [`CoordinatorConfig::offsets_topic_num_partitions`](crate::config::CoordinatorConfig::offsets_topic_num_partitions)).
    pub offsets_topic_num_partitions: i32,
    /// Kafka `num.partitions`: partitions of a topic created with -1.
    pub default_partitions: i32,
    /// Kafka `auto.leader.rebalance.enable`: true.
    pub auto_leader_rebalance: bool,
    /// Kafka `leader.imbalance.check.interval.seconds`: 300 s.
    pub leader_imbalance_check_interval: Duration,
    /// Kafka `leader.imbalance.per.broker.percentage`: 10.
    pub leader_imbalance_per_broker_percentage: u32,
    /// A snapshot is taken (and the log compacted) once this many entries follow the
    /// last one.
    pub snapshot_after_entries: usize,
    /// Raft tick.
    pub tick: Duration,
    /// Election timeout in ticks (randomized between this and twice this).
    pub election_ticks: usize,
    /// A quorum listener bound by the caller (tests bind port 0 first); None binds this
    /// node's voter address.
    pub quorum_listener: Option<TcpListener>,
    /// Mutual TLS on the quorum connections (`--quorum-security-protocol SSL`); None is
    /// plaintext.
    pub quorum_tls: Option<Arc<quorum_tls::QuorumTls>>,
    /// True: the node records its directory id with the quorum (`RegisterVoterDirectory`)
    /// once the cluster has an id. False only in tests, for a node whose record no peer
    /// has applied yet.
    pub record_directory: bool,
    /// The levels of each feature this node supports, registered with it (this
    /// build's: [`features::supported`]; other ones only in tests).
    pub supported_features: Vec<records::SupportedFeature>,
}

impl ClusterConfig {
    /// True if this node is one of the voters (a controller); false for a broker-only
    /// node.
    pub(crate) fn is_voter(&self) -> bool {
        self.voters.iter().any(|v| v.id == self.node_id)
    }

    /// Kafka's defaults for node `node_id` of `voters`.
    pub(crate) fn new(
        node_id: i32,
        voters: Vec<Voter>,
        advertised_listener: String,
    ) -> ClusterConfig {
        ClusterConfig {
            node_id,
            voters,
            advertised_listener,
            replication_listener: None,
            inter_broker_listener: None,
            endpoints: Vec::new(),
            rack: None,
            replication_security: Arc::default(),
            session_timeout: Duration::from_millis(9000),
            default_replication_factor: 1,
            min_insync_replicas: 1,
            replica_lag_time_max: Duration::from_millis(30_000),
            offsets_topic_replication_factor: 3,
            offsets_topic_num_partitions: 50,
            default_partitions: 1,
            auto_leader_rebalance: true,
            leader_imbalance_check_interval: Duration::from_secs(300),
            leader_imbalance_per_broker_percentage: 10,
            snapshot_after_entries: 1024,
            tick: Duration::from_millis(100),
            election_ticks: 10,
            quorum_listener: None,
            quorum_tls: None,
            record_directory: true,
            supported_features: features::supported(),
        }
    }
}
