//! The read-only broker configs DescribeConfigs lists for this node's BROKER resource,
//! one table for a single node and a cluster node: what the node was started with
//! (`tidelog serve`'s flags, the [`ServerBuilder`](crate::ServerBuilder) and
//! [`BrokerBuilder`](crate::BrokerBuilder) settings) under Kafka's names and units.
//!
//! A setting at tidelog's default has source DEFAULT_CONFIG, one set otherwise
//! STATIC_BROKER_CONFIG with the default as its second synonym (Kafka lists a key's
//! synonyms STATIC first, then DEFAULT). A secret (the TLS private key, Kafka's
//! `ssl.keystore.key`) is listed as Kafka lists a PASSWORD: sensitive, with no value.

use super::Ctx;
use crate::cluster::ClusterConfig;
use crate::config::BrokerConfig;
use crate::server::Config;

/// DescribeConfigs `config_type`s (KIP-569).
pub(super) const BOOLEAN: i8 = 1;
pub(super) const STRING: i8 = 2;
pub(super) const INT: i8 = 3;
pub(super) const SHORT: i8 = 4;
pub(super) const LONG: i8 = 5;
pub(super) const LIST: i8 = 7;
pub(super) const PASSWORD: i8 = 9;

/// One read-only broker config of this node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct StaticConfig {
    /// Kafka's name.
    pub name: &'static str,
    /// The value in force (None: none, as Kafka's null; or a secret).
    pub value: Option<String>,
    /// tidelog's default, under its Kafka name (None: no default, e.g. `node.id`).
    pub default: Option<(&'static str, Option<String>)>,
    /// Its `config_type`.
    pub config_type: i8,
    /// A secret: described with no value.
    pub sensitive: bool,
    /// What it is, for `include_documentation`.
    pub doc: &'static str,
}

impl StaticConfig {
    /// Whether the value in force is the default (source DEFAULT_CONFIG).
    pub(super) fn is_default(&self) -> bool {
        self.default
            .as_ref()
            .is_some_and(|(name, v)| *name == self.name && *v == self.value)
    }
}

/// A milliseconds value.
fn ms(d: std::time::Duration) -> String {
    d.as_millis().to_string()
}

/// A count Kafka types as INT: larger ones (tidelog's "unlimited") as `i32::MAX`.
fn int(n: usize) -> String {
    n.min(i32::MAX as usize).to_string()
}

/// The log settings: (Kafka broker name, topic name they default, type, doc).
const LOG_KEYS: &[(&str, &str, i8, &str)] = &[
    (
        "log.segment.bytes",
        "segment.bytes",
        INT,
        "Largest segment file of a log, in bytes.",
    ),
    (
        "log.roll.ms",
        "segment.ms",
        LONG,
        "Longest time before a new segment is rolled, in ms.",
    ),
    (
        "log.index.interval.bytes",
        "index.interval.bytes",
        INT,
        "Bytes between entries of the offset index.",
    ),
    (
        "log.index.size.max.bytes",
        "segment.index.bytes",
        INT,
        "Largest offset index file, in bytes.",
    ),
    (
        "message.max.bytes",
        "max.message.bytes",
        INT,
        "Largest record batch accepted, in bytes.",
    ),
    (
        "log.retention.ms",
        "retention.ms",
        LONG,
        "How long records are kept, in ms (-1: forever).",
    ),
    (
        "log.retention.bytes",
        "retention.bytes",
        LONG,
        "Largest size of a partition's log before old segments are deleted (-1: unlimited).",
    ),
    (
        "log.cleanup.policy",
        "cleanup.policy",
        LIST,
        "delete and/or compact.",
    ),
    (
        "log.cleaner.delete.retention.ms",
        "delete.retention.ms",
        LONG,
        "How long tombstones are kept in a compacted log, in ms.",
    ),
    (
        "log.flush.interval.messages",
        "flush.messages",
        LONG,
        "Records appended before a forced flush (-1: not forced).",
    ),
    (
        "log.flush.interval.ms",
        "flush.ms",
        LONG,
        "Longest time before a forced flush, in ms (-1: not forced).",
    ),
    (
        "log.message.timestamp.type",
        "message.timestamp.type",
        STRING,
        "CreateTime or LogAppendTime.",
    ),
    (
        "compression.type",
        "compression.type",
        STRING,
        "The codec batches are stored with (producer: as sent).",
    ),
    (
        "min.insync.replicas",
        "min.insync.replicas",
        INT,
        "In-sync replicas an acks=all produce needs.",
    ),
];

/// The broker-wide settings of `broker`: (name, value, type, doc).
fn broker_settings(b: &BrokerConfig) -> Vec<Setting> {
    let topic = b.log.to_pairs();
    let mut out: Vec<Setting> = LOG_KEYS
        .iter()
        .filter_map(|(name, key, ty, doc)| {
            let (_, v) = topic.iter().find(|(k, _)| k == key)?;
            Some((*name, v.clone(), *ty, *doc))
        })
        .collect();
    let c = &b.coordinator;
    let t = &b.transaction;
    out.extend([
        ("num.partitions", b.default_partitions.to_string(), INT, "Partitions of a topic created without a count."),
        ("auto.create.topics.enable", b.auto_create_topics.to_string(), BOOLEAN, "Whether in-process producers create unknown topics."),
        ("log.retention.check.interval.ms", ms(b.retention_check_interval), LONG, "How often retention runs, in ms."),
        ("log.flush.scheduler.interval.ms", ms(b.flush_check_interval), LONG, "How often flush.ms is checked, in ms."),
        ("group.min.session.timeout.ms", ms(c.min_session_timeout), INT, "Smallest session timeout a classic group member may ask for, in ms."),
        ("group.max.session.timeout.ms", ms(c.max_session_timeout), INT, "Largest session timeout a classic group member may ask for, in ms."),
        ("group.initial.rebalance.delay.ms", ms(c.initial_rebalance_delay), INT, "How long a new classic group waits for more members before its first rebalance, in ms."),
        ("offsets.topic.num.partitions", c.offsets_topic_num_partitions.to_string(), INT, "Partitions of __consumer_offsets, made on first use."),
        ("transaction.state.log.num.partitions", t.state_log_partitions.to_string(), INT, "Partitions of __transaction_state, made on first use."),
        ("transaction.state.log.replication.factor", t.state_log_replication_factor.to_string(), INT, "Replicas of each __transaction_state partition on a cluster."),
        ("transaction.state.log.min.isr", t.state_log_min_isr.to_string(), INT, "min.insync.replicas of __transaction_state on a cluster."),
        ("transaction.max.timeout.ms", ms(t.max_timeout), INT, "Longest transaction timeout a producer may ask for, in ms."),
        ("transactional.id.expiration.ms", ms(t.transactional_id_expiration), INT, "How long an idle transactional id is kept, in ms."),
    ]);
    out
}

/// The server's settings: (name, value, type, doc).
fn server_settings(s: &Config) -> Vec<Setting> {
    vec![
        (
            "socket.request.max.bytes",
            int(s.max_request_size),
            INT,
            "Largest request accepted, in bytes.",
        ),
        (
            "fetch.max.bytes",
            int(s.fetch_max_bytes),
            INT,
            "Most record bytes one Fetch response carries.",
        ),
        (
            "max.request.partition.size.limit",
            s.max_request_partition_size_limit.to_string(),
            INT,
            "Most partitions one DescribeTopicPartitions response carries.",
        ),
        (
            "max.connections",
            int(s.max_connections),
            INT,
            "Most connections served at once.",
        ),
        (
            "max.connections.per.ip",
            int(s.max_connections_per_ip),
            INT,
            "Most connections served at once from one address.",
        ),
        (
            "max.connections.per.ip.overrides",
            s.max_connections_per_ip_overrides.clone(),
            STRING,
            "Per-address connection limits, HOST:LIMIT,...",
        ),
        (
            "connections.max.idle.ms",
            ms(s.idle_timeout),
            LONG,
            "A connection idle this long is closed, in ms.",
        ),
        (
            "super.users",
            s.super_users.join(";"),
            LIST,
            "Principals allowed everything when ACLs are enforced.",
        ),
    ]
}

/// A cluster node's settings: (name, value, type, doc); they stand for the broker's
/// settings of the same name (the controller places and sizes topics).
#[rustfmt::skip]
fn cluster_settings(c: &ClusterConfig) -> Vec<Setting> {
    vec![
        ("default.replication.factor", c.default_replication_factor.to_string(), INT, "Replicas of a topic created with -1."),
        ("min.insync.replicas", c.min_insync_replicas.to_string(), INT, "In-sync replicas an acks=all produce needs."),
        ("replica.lag.time.max.ms", ms(c.replica_lag_time_max), LONG, "A follower this long behind leaves the ISR, in ms."),
        ("offsets.topic.replication.factor", c.offsets_topic_replication_factor.to_string(), SHORT, "Replicas of each __consumer_offsets partition."),
        ("offsets.topic.num.partitions", c.offsets_topic_num_partitions.to_string(), INT, "Partitions of __consumer_offsets, made on first use."),
        ("num.partitions", c.default_partitions.to_string(), INT, "Partitions of a topic created without a count."),
        ("auto.leader.rebalance.enable", c.auto_leader_rebalance.to_string(), BOOLEAN, "Whether leaderships move back to preferred replicas."),
        ("leader.imbalance.check.interval.seconds", c.leader_imbalance_check_interval.as_secs().to_string(), LONG, "How often leader balance is checked, in s."),
        ("leader.imbalance.per.broker.percentage", c.leader_imbalance_per_broker_percentage.to_string(), INT, "Share of a broker's leaderships not preferred before a rebalance, in %."),
        ("broker.session.timeout.ms", ms(c.session_timeout), INT, "A broker not heard from this long is fenced, in ms."),
    ]
}

/// The read-only broker configs of this node, by name.
pub(super) fn static_configs(ctx: &Ctx<'_>) -> Vec<StaticConfig> {
    let config = &ctx.shared.config;
    let node_id = ctx
        .backend()
        .cluster()
        .map_or(super::NODE_ID, |c| c.node_id());
    let roles = match ctx.backend().cluster() {
        None => "broker,controller",
        Some(c) => match c.quorum() {
            Some(q) if !q.voters.iter().any(|v| v.node == node_id) => "broker",
            _ => "broker,controller",
        },
    };
    let mut out = vec![
        fixed("node.id", Some(node_id.to_string()), INT, "This node's id."),
        fixed(
            "broker.id",
            Some(node_id.to_string()),
            INT,
            "This broker's id (node.id).",
        ),
        fixed(
            "process.roles",
            Some(roles.to_string()),
            LIST,
            "broker, and controller on a quorum voter.",
        ),
        fixed(
            "listeners",
            Some(config.listeners.clone()),
            LIST,
            "The listeners, NAME://HOST:PORT.",
        ),
        unset_by_default(fixed(
            "advertised.listeners",
            config.advertised.clone(),
            LIST,
            "The addresses given to clients (none: each listener's).",
        )),
    ];
    let dirs: Vec<String> = ctx
        .backend()
        .log_dir_states()
        .into_iter()
        .map(|(d, _)| d.display().to_string())
        .collect();
    let dirs = if dirs.is_empty() {
        ctx.backend().data_dir().display().to_string()
    } else {
        dirs.join(",")
    };
    out.push(fixed(
        "log.dirs",
        Some(dirs),
        STRING,
        "The log directories.",
    ));
    if config.tls.is_some() {
        out.push(StaticConfig {
            sensitive: true,
            ..fixed("ssl.keystore.key", None, PASSWORD, "The TLS private key.")
        });
    }
    out.extend(with_defaults(
        server_settings(config),
        server_settings(&Config::default()),
    ));
    if let Some(broker) = ctx.backend().broker_config() {
        out.extend(with_defaults(
            broker_settings(broker),
            broker_settings(&BrokerConfig::default()),
        ));
    }
    if let Some(cluster) = ctx.backend().cluster().and_then(|c| c.cluster_config()) {
        let mine = with_defaults(
            cluster_settings(cluster),
            cluster_settings(&ClusterConfig::new(
                cluster.node_id,
                Vec::new(),
                String::new(),
            )),
        );
        for c in mine {
            out.retain(|o| o.name != c.name);
            out.push(c);
        }
        out.push(unset_by_default(fixed(
            "broker.rack",
            cluster.rack.clone(),
            STRING,
            "This broker's rack.",
        )));
        if let Some(name) = &cluster.inter_broker_listener {
            out.push(fixed(
                "inter.broker.listener.name",
                Some(name.clone()),
                STRING,
                "The listener replica fetchers use.",
            ));
        }
    }
    out.sort_by_key(|c| c.name);
    out
}

/// A setting: its name, value, type and doc.
type Setting = (&'static str, String, i8, &'static str);

/// The settings in force, each with its default (the same settings of the defaults).
fn with_defaults(now: Vec<Setting>, defaults: Vec<Setting>) -> impl Iterator<Item = StaticConfig> {
    now.into_iter()
        .zip(defaults)
        .map(
            |((name, value, config_type, doc), (_, default, _, _))| StaticConfig {
                name,
                value: Some(value),
                default: Some((name, Some(default))),
                config_type,
                sensitive: false,
                doc,
            },
        )
}

/// `config` with a default of none (Kafka's null).
fn unset_by_default(config: StaticConfig) -> StaticConfig {
    StaticConfig {
        default: Some((config.name, None)),
        ..config
    }
}

/// A config with no default.
fn fixed(
    name: &'static str,
    value: Option<String>,
    config_type: i8,
    doc: &'static str,
) -> StaticConfig {
    StaticConfig {
        name,
        value,
        default: None,
        config_type,
        sensitive: false,
        doc,
    }
}
