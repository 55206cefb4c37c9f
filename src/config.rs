//! Broker and topic settings. Defaults mirror Kafka's, and every setting names the Kafka
//! setting it mirrors.
//!
//! A [`TopicConfig`] holds only the settings a topic overrides, by their Kafka names
//! ("retention.ms", "cleanup.policy", ...); the broker's defaults fill in the rest. The
//! overrides are what the topic registry stores, so a topic keeps following the broker's
//! defaults for everything it did not override.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::storage::{CleanupPolicy, LogConfig};

/// Per-topic overrides of the broker's log settings (Kafka topic-level configs).
///
/// ```
/// use std::time::Duration;
/// let config = tidelog::TopicConfig::new()
///     .retention(Some(Duration::from_secs(3600)))
///     .segment_bytes(64 << 20);
/// assert_eq!(config.get("retention.ms"), Some("3600000"));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TopicConfig {
    overrides: BTreeMap<String, String>,
}

impl TopicConfig {
    /// No overrides: the topic follows the broker's defaults.
    pub fn new() -> Self {
        TopicConfig::default()
    }

    /// Sets a setting by its Kafka name; the value is checked when the topic is created
    /// (or by [`TopicConfig::validate`]).
    #[must_use]
    pub fn set(mut self, key: &str, value: impl ToString) -> Self {
        self.overrides.insert(key.to_string(), value.to_string());
        self
    }

    /// The override of a setting, by Kafka name.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.overrides.get(key).map(String::as_str)
    }

    /// Every override as `(Kafka name, value)`.
    pub fn overrides(&self) -> impl Iterator<Item = (&str, &str)> {
        self.overrides.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// Bytes per segment file before a new one is rolled (`segment.bytes`, default
    /// 1 GiB).
    #[must_use]
    pub fn segment_bytes(self, bytes: u64) -> Self {
        self.set("segment.bytes", bytes)
    }

    /// Age of a segment after which a new one is rolled (`segment.ms`, default 7 days).
    #[must_use]
    pub fn segment_age(self, age: Duration) -> Self {
        self.set("segment.ms", age.as_millis())
    }

    /// How long records are kept; None keeps them forever (`retention.ms`, default
    /// 7 days).
    #[must_use]
    pub fn retention(self, age: Option<Duration>) -> Self {
        self.set("retention.ms", age.map_or(-1, |d| d.as_millis() as i64))
    }

    /// Most bytes kept per partition; None is unlimited (`retention.bytes`, default
    /// unlimited).
    #[must_use]
    pub fn retention_bytes(self, bytes: Option<u64>) -> Self {
        self.set("retention.bytes", bytes.map_or(-1, |b| b as i64))
    }

    /// Delete old segments, compact by key, or both (`cleanup.policy`, default delete).
    #[must_use]
    pub fn cleanup_policy(self, policy: CleanupPolicy) -> Self {
        self.set("cleanup.policy", policy.as_str())
    }

    /// Fsync after this many records; None leaves flushing to the OS
    /// (`flush.messages`, default None).
    #[must_use]
    pub fn flush_messages(self, count: Option<u64>) -> Self {
        self.set("flush.messages", count.map_or(-1, |c| c as i64))
    }

    /// Answer `acks=all` writes only once the leader and every in-sync follower have
    /// fsynced them (`durable.acks`, a tidelog setting; default false, as Kafka, whose
    /// acknowledged records may be in the page cache only).
    #[must_use]
    pub fn durable_acks(self, durable: bool) -> Self {
        self.set("durable.acks", durable)
    }

    /// Fsync when unflushed data is this old; None leaves flushing to the OS
    /// (`flush.ms`, default None).
    #[must_use]
    pub fn flush_interval(self, interval: Option<Duration>) -> Self {
        self.set("flush.ms", interval.map_or(-1, |d| d.as_millis() as i64))
    }

    /// Largest batch accepted (`max.message.bytes`, default 1 MiB).
    #[must_use]
    pub fn max_message_bytes(self, bytes: u32) -> Self {
        self.set("max.message.bytes", bytes)
    }

    /// Stamp records with the broker's clock instead of the producer's
    /// (`message.timestamp.type` = LogAppendTime; default CreateTime).
    #[must_use]
    pub fn log_append_time(self, yes: bool) -> Self {
        self.set(
            "message.timestamp.type",
            if yes { "LogAppendTime" } else { "CreateTime" },
        )
    }

    /// The log settings of a topic with these overrides on top of `defaults`.
    /// `Error::InvalidConfig` names the first bad setting.
    pub fn apply(&self, defaults: &LogConfig) -> Result<LogConfig> {
        let mut config = defaults.clone();
        for (k, v) in &self.overrides {
            config.set(k, v)?;
        }
        Ok(config)
    }

    /// Checks every override against Kafka's rules.
    pub fn validate(&self) -> Result<()> {
        self.apply(&LogConfig::default()).map(|_| ())
    }
}

/// Kafka's topic name rules: 1 to 249 characters from `[a-zA-Z0-9._-]`, and not `.` or
/// `..`.
pub fn validate_topic_name(name: &str) -> Result<()> {
    let bad = |reason: &str| {
        Err(Error::InvalidTopicName {
            name: name.to_string(),
            reason: reason.to_string(),
        })
    };
    if name.is_empty() {
        return bad("a topic name must not be empty");
    }
    if name == "." || name == ".." {
        return bad("a topic name cannot be \".\" or \"..\"");
    }
    if name.len() > 249 {
        return bad("a topic name can be at most 249 characters long");
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return bad(&format!(
            "character {c:?} is not allowed; use ASCII letters, digits, '.', '_' and '-'"
        ));
    }
    Ok(())
}

/// Settings of a [`Broker`](crate::Broker), set through
/// [`BrokerBuilder`](crate::BrokerBuilder).
#[derive(Debug, Clone)]
pub struct BrokerConfig {
    /// Default log settings of every topic (Kafka's `log.*` broker settings).
    pub log: LogConfig,
    /// How often the background thread checks `flush.ms` (Kafka
    /// `log.flush.scheduler.interval.ms`). Default 1 s.
    pub flush_check_interval: Duration,
    /// How often retention runs (Kafka `log.retention.check.interval.ms`). Default
    /// 5 min.
    pub retention_check_interval: Duration,
    /// Group coordinator settings (Kafka `group.*`).
    pub coordinator: CoordinatorConfig,
    /// Transaction coordinator settings (Kafka `transaction.*`).
    pub transaction: TransactionConfig,
    /// Share group settings (Kafka `group.share.*`, `share.coordinator.*`).
    pub share: ShareConfig,
    /// Partitions of a topic created implicitly (Kafka `num.partitions`). Default 1.
    pub default_partitions: i32,
    /// Create unknown topics on first use by a producer (Kafka
    /// `auto.create.topics.enable`). Default false: an in-process typo is an error.
    pub auto_create_topics: bool,
    /// Partitions the broker holds at most, over all its topics (`tidelog serve
    /// --max-partitions`): a creation of topics or partitions that would pass it is
    /// refused whole, before anything is created. Default: what the process can hold,
    /// [`StorageLimits::partitions_that_fit`](crate::storage::StorageLimits::partitions_that_fit)
    /// (19,462 under the kernel's default `vm.max_map_count`).
    pub max_partitions: usize,
    /// What the partitions' logs hold open at once, however many there are
    /// (descriptors, mapped segments). Default: [`crate::storage::StorageLimits::default`].
    pub storage_limits: crate::storage::StorageLimits,
    /// More log directories for partitions besides the data directory (Kafka's
    /// `log.dirs` past its first entry, JBOD). Default none.
    pub extra_log_dirs: Vec<std::path::PathBuf>,
}

impl Default for BrokerConfig {
    fn default() -> Self {
        BrokerConfig {
            log: LogConfig::default(),
            flush_check_interval: Duration::from_secs(1),
            retention_check_interval: Duration::from_secs(300),
            coordinator: CoordinatorConfig::default(),
            transaction: TransactionConfig::default(),
            share: ShareConfig::default(),
            default_partitions: 1,
            auto_create_topics: false,
            max_partitions: crate::storage::StorageLimits::default().partitions_that_fit(),
            storage_limits: crate::storage::StorageLimits::default(),
            extra_log_dirs: Vec::new(),
        }
    }
}

/// Settings of the group coordinator. Defaults mirror Kafka's broker settings, except
/// where noted.
#[derive(Debug, Clone)]
pub struct CoordinatorConfig {
    /// Smallest `session_timeout` a member may ask for. Default 6 s
    /// (`group.min.session.timeout.ms`).
    pub min_session_timeout: Duration,
    /// Largest `session_timeout` a member may ask for. Default 30 min
    /// (`group.max.session.timeout.ms`).
    pub max_session_timeout: Duration,
    /// How long the first rebalance of an empty group waits for more members when its
    /// first member is a network client (`group.initial.rebalance.delay.ms`). Each
    /// member that joins meanwhile extends the wait by this much again, up to the
    /// round's rebalance timeout, so consumers started together form one generation,
    /// not one per member. Default 3 s, as Kafka.
    pub initial_rebalance_delay: Duration,
    /// The same delay when the group's first member is in-process. Default 0: members
    /// in one process join within microseconds of each other, and a later join simply
    /// starts another rebalance.
    pub in_process_initial_rebalance_delay: Duration,
    /// Most members a group may have. Default unlimited (`group.max.size`).
    pub max_group_size: usize,
    /// Longest metadata string stored with a committed offset. Default 4096
    /// (`offset.metadata.max.bytes`).
    pub offset_metadata_max_bytes: usize,
    /// How long the offsets of a group without members are kept after it became empty
    /// (`offsets.retention.minutes`, KIP-211). Default 7 days.
    pub offsets_retention: Duration,
    /// Partitions of `__consumer_offsets` when it is created
    /// (`offsets.topic.num.partitions`). Default 50, as Kafka. Fixed at creation: an
    /// existing topic keeps its count (a data directory made with one partition goes on
    /// with one), which is read from the topic, never from this setting. A group's
    /// partition, hence its coordinator, is
    /// [`partition_for`](crate::coordinator::partition_for) its id.
    pub offsets_topic_num_partitions: i32,
    /// How long a member of a consumer-protocol group (KIP-848) stays without a
    /// heartbeat before it is removed (`group.consumer.session.timeout.ms`). Default 45 s.
    pub consumer_session_timeout: Duration,
    /// How often members of a consumer-protocol group are told to heartbeat
    /// (`group.consumer.heartbeat.interval.ms`). Default 5 s.
    pub consumer_heartbeat_interval: Duration,
    /// Smallest and largest `consumer.session.timeout.ms` a group config may set
    /// (`group.consumer.min.session.timeout.ms`, `group.consumer.max.session.timeout.ms`).
    /// Default 45 s and 60 s.
    pub consumer_min_session_timeout: Duration,
    /// See [`consumer_min_session_timeout`](Self::consumer_min_session_timeout).
    pub consumer_max_session_timeout: Duration,
    /// Smallest and largest `consumer.heartbeat.interval.ms` a group config may set
    /// (`group.consumer.min.heartbeat.interval.ms`,
    /// `group.consumer.max.heartbeat.interval.ms`). Default 5 s and 15 s.
    pub consumer_min_heartbeat_interval: Duration,
    /// See [`consumer_min_heartbeat_interval`](Self::consumer_min_heartbeat_interval).
    pub consumer_max_heartbeat_interval: Duration,
    /// The server-side assignors of consumer-protocol groups, the first being the
    /// default (`group.consumer.assignors`): any of "uniform" and "range". Default
    /// `["uniform", "range"]`.
    pub consumer_assignors: Vec<String>,
    /// Whether a group converts online between the classic and the consumer protocol
    /// (`group.consumer.migration.policy`, KIP-848). Default `bidirectional`.
    pub consumer_migration_policy: ConsumerGroupMigrationPolicy,
}

/// When a group converts between the classic and the consumer protocol
/// (`group.consumer.migration.policy`): a classic group whose members use the consumer
/// embedded protocol becomes a consumer group when a consumer-protocol member joins
/// (upgrade), and a consumer group whose remaining members all use the classic protocol
/// becomes a classic group when its last consumer-protocol member leaves (downgrade).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ConsumerGroupMigrationPolicy {
    /// Neither conversion.
    Disabled,
    /// Classic to consumer only.
    Upgrade,
    /// Consumer to classic only.
    Downgrade,
    /// Both (Kafka's default).
    #[default]
    Bidirectional,
}

impl ConsumerGroupMigrationPolicy {
    /// True if a classic group may become a consumer group.
    pub fn upgrade_enabled(self) -> bool {
        matches!(self, Self::Upgrade | Self::Bidirectional)
    }

    /// True if a consumer group may become a classic group.
    pub fn downgrade_enabled(self) -> bool {
        matches!(self, Self::Downgrade | Self::Bidirectional)
    }

    /// Kafka's name of the policy.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Disabled => "disabled",
            Self::Upgrade => "upgrade",
            Self::Downgrade => "downgrade",
            Self::Bidirectional => "bidirectional",
        }
    }
}

impl std::str::FromStr for ConsumerGroupMigrationPolicy {
    type Err = String;

    /// Parses Kafka's names, case-insensitively.
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        [
            Self::Disabled,
            Self::Upgrade,
            Self::Downgrade,
            Self::Bidirectional,
        ]
        .into_iter()
        .find(|p| p.as_str().eq_ignore_ascii_case(s))
        .ok_or_else(|| {
            format!(
                "invalid group.consumer.migration.policy {s:?}: expected disabled, upgrade, downgrade or bidirectional"
            )
        })
    }
}

impl Default for CoordinatorConfig {
    fn default() -> Self {
        CoordinatorConfig {
            min_session_timeout: Duration::from_secs(6),
            max_session_timeout: Duration::from_secs(30 * 60),
            initial_rebalance_delay: Duration::from_secs(3),
            in_process_initial_rebalance_delay: Duration::ZERO,
            max_group_size: usize::MAX,
            offset_metadata_max_bytes: 4096,
            offsets_retention: Duration::from_secs(7 * 24 * 3600),
            offsets_topic_num_partitions: 50,
            consumer_session_timeout: Duration::from_secs(45),
            consumer_heartbeat_interval: Duration::from_secs(5),
            consumer_min_session_timeout: Duration::from_secs(45),
            consumer_max_session_timeout: Duration::from_secs(60),
            consumer_min_heartbeat_interval: Duration::from_secs(5),
            consumer_max_heartbeat_interval: Duration::from_secs(15),
            consumer_assignors: vec!["uniform".into(), "range".into()],
            consumer_migration_policy: ConsumerGroupMigrationPolicy::Bidirectional,
        }
    }
}

/// Settings of the transaction coordinator. Defaults are Kafka's.
#[derive(Debug, Clone)]
pub struct TransactionConfig {
    /// Partitions of the internal topic `__transaction_state`, made on first use
    /// (`transaction.state.log.num.partitions`). Default 50.
    pub state_log_partitions: i32,
    /// Replicas of each `__transaction_state` partition on a cluster, capped at the
    /// unfenced brokers when it is made (`transaction.state.log.replication.factor`).
    /// Default 3.
    pub state_log_replication_factor: i16,
    /// `min.insync.replicas` of `__transaction_state` on a cluster, capped at its
    /// replication factor (`transaction.state.log.min.isr`). Default 2.
    pub state_log_min_isr: i32,
    /// Longest transaction timeout a producer may ask for
    /// (`transaction.max.timeout.ms`). Default 15 min.
    pub max_timeout: Duration,
    /// How long a transactional id without a change is kept
    /// (`transactional.id.expiration.ms`). Default 7 days.
    pub transactional_id_expiration: Duration,
    /// How often transactions past their timeout are aborted
    /// (`transaction.abort.timed.out.transaction.cleanup.interval.ms`). Default 10 s.
    pub abort_timed_out_interval: Duration,
    /// How often expired transactional ids are removed
    /// (`transaction.remove.expired.transaction.cleanup.interval.ms`). Default 1 h.
    pub remove_expired_interval: Duration,
}

impl Default for TransactionConfig {
    fn default() -> Self {
        TransactionConfig {
            state_log_partitions: 50,
            state_log_replication_factor: 3,
            state_log_min_isr: 2,
            max_timeout: Duration::from_millis(900_000),
            transactional_id_expiration: Duration::from_millis(604_800_000),
            abort_timed_out_interval: Duration::from_secs(10),
            remove_expired_interval: Duration::from_secs(3600),
        }
    }
}

/// Settings of share groups (KIP-932) and their share coordinator. Defaults are Kafka's.
#[derive(Debug, Clone)]
pub struct ShareConfig {
    /// How long a member holds a record it acquired before the record becomes
    /// available to the group again (`group.share.record.lock.duration.ms`). Default 30 s.
    pub record_lock_duration: Duration,
    /// How many times a record is delivered at most: released or expired at this
    /// count, it is archived instead of made available (`group.share.delivery.count.limit`).
    /// Default 5.
    pub delivery_count_limit: i16,
    /// Most records in flight (acquired, available again, or acknowledged above the
    /// start offset) of one share-partition
    /// (`group.share.partition.max.record.locks`). Default 2000, Kafka's since 4.1
    /// (KAFKA-19245; 200 before): four times a client's default `max.poll.records`, so
    /// that one ShareFetch may acquire a whole poll's worth and a partition can be
    /// fetched by several members at once.
    pub partition_max_record_locks: usize,
    /// How long a member of a share group stays without a heartbeat before it is
    /// removed and its records released (`group.share.session.timeout.ms`). Default 45 s.
    pub session_timeout: Duration,
    /// How often members of a share group are told to heartbeat
    /// (`group.share.heartbeat.interval.ms`). Default 5 s.
    pub heartbeat_interval: Duration,
    /// Smallest and largest `share.session.timeout.ms` a group config may set
    /// (`group.share.min.session.timeout.ms`, `group.share.max.session.timeout.ms`).
    /// Default 45 s and 60 s.
    pub min_session_timeout: Duration,
    /// See [`min_session_timeout`](Self::min_session_timeout).
    pub max_session_timeout: Duration,
    /// Smallest and largest `share.heartbeat.interval.ms` a group config may set
    /// (`group.share.min.heartbeat.interval.ms`, `group.share.max.heartbeat.interval.ms`).
    /// Default 5 s and 15 s.
    pub min_heartbeat_interval: Duration,
    /// See [`min_heartbeat_interval`](Self::min_heartbeat_interval).
    pub max_heartbeat_interval: Duration,
    /// Smallest and largest `share.record.lock.duration.ms` a group config may set
    /// (`group.share.min.record.lock.duration.ms`,
    /// `group.share.max.record.lock.duration.ms`). Default 15 s and 60 s.
    pub min_record_lock_duration: Duration,
    /// See [`min_record_lock_duration`](Self::min_record_lock_duration).
    pub max_record_lock_duration: Duration,
    /// Partitions of the internal topic `__share_group_state`, made on first use
    /// (`share.coordinator.state.topic.num.partitions`). Default 50.
    pub state_topic_partitions: i32,
    /// Update records written for a share-partition before its state is written whole
    /// again as a snapshot (`share.coordinator.snapshot.update.records.per.snapshot`).
    /// Default 500.
    pub snapshot_update_records_per_snapshot: u32,
    /// Most members of one share group: a member joining a group that has as many is
    /// refused with GROUP_MAX_SIZE_REACHED (`group.share.max.size`). Default 200.
    pub max_size: usize,
    /// Most share sessions this node holds (ShareFetch and ShareAcknowledge of members
    /// over the network): a new session beyond them is refused with
    /// SHARE_SESSION_LIMIT_REACHED until one closes (`group.share.max.share.sessions`).
    /// Default 2000.
    pub max_share_sessions: usize,
}

impl Default for ShareConfig {
    fn default() -> Self {
        ShareConfig {
            record_lock_duration: Duration::from_millis(30_000),
            delivery_count_limit: 5,
            partition_max_record_locks: 2000,
            session_timeout: Duration::from_millis(45_000),
            heartbeat_interval: Duration::from_millis(5_000),
            min_session_timeout: Duration::from_millis(45_000),
            max_session_timeout: Duration::from_millis(60_000),
            min_heartbeat_interval: Duration::from_millis(5_000),
            max_heartbeat_interval: Duration::from_millis(15_000),
            min_record_lock_duration: Duration::from_millis(15_000),
            max_record_lock_duration: Duration::from_millis(60_000),
            state_topic_partitions: 50,
            snapshot_update_records_per_snapshot: 500,
            max_size: 200,
            max_share_sessions: 2000,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_names_follow_kafkas_rules() {
        assert!(validate_topic_name("events.v1_a-b").is_ok());
        assert!(validate_topic_name(&"a".repeat(249)).is_ok());
        for bad in ["", ".", "..", "a b", "é", "a/b"] {
            assert!(validate_topic_name(bad).is_err(), "{bad:?} accepted");
        }
        assert!(validate_topic_name(&"a".repeat(250)).is_err());
    }

    #[test]
    fn overrides_apply_over_defaults() {
        let c = TopicConfig::new()
            .retention(None)
            .cleanup_policy(CleanupPolicy::Compact);
        let log = c.apply(&LogConfig::default()).unwrap();
        assert_eq!(log.retention_ms, None);
        assert_eq!(log.cleanup_policy, CleanupPolicy::Compact);
        assert!(
            TopicConfig::new()
                .set("retention.ms", "soon")
                .validate()
                .is_err()
        );
        assert!(TopicConfig::new().set("no.such", "1").validate().is_err());
    }
}
