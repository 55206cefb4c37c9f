//! Per-log settings. Names and defaults mirror Kafka's topic configs.

use crate::error::{Error, Result};
use crate::record::Compression;

/// What happens to old segments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CleanupPolicy {
    /// Delete whole segments past `retention_ms` / `retention_bytes` (Kafka `delete`).
    #[default]
    Delete,
    /// Keep the latest record of each key (Kafka `compact`).
    Compact,
    /// Both (Kafka `compact,delete`).
    CompactDelete,
}

impl CleanupPolicy {
    /// True if old segments are deleted by retention.
    pub fn deletes(self) -> bool {
        matches!(self, CleanupPolicy::Delete | CleanupPolicy::CompactDelete)
    }
    /// True if the log is compacted.
    pub fn compacts(self) -> bool {
        matches!(self, CleanupPolicy::Compact | CleanupPolicy::CompactDelete)
    }
    /// Kafka's spelling of the policy.
    pub fn as_str(self) -> &'static str {
        match self {
            CleanupPolicy::Delete => "delete",
            CleanupPolicy::Compact => "compact",
            CleanupPolicy::CompactDelete => "compact,delete",
        }
    }
}

/// Kafka's `compression.type` of a topic: the codec the broker stores batches with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CompressionType {
    /// `producer`: keep each batch as the producer compressed it. Kafka's default.
    #[default]
    Producer,
    /// Store every batch with this codec, recompressing batches that arrive with
    /// another one (`uncompressed` is `Codec(Compression::None)`).
    Codec(Compression),
}

impl CompressionType {
    /// Kafka's spelling: `producer`, `uncompressed`, `gzip`, `snappy`, `lz4`, `zstd`.
    pub fn as_str(self) -> &'static str {
        match self {
            CompressionType::Producer => "producer",
            CompressionType::Codec(Compression::None) => "uncompressed",
            CompressionType::Codec(c) => c.name(),
        }
    }

    /// The codec a batch compressed with `producer` is stored with.
    pub fn resolve(self, producer: Compression) -> Compression {
        match self {
            CompressionType::Producer => producer,
            CompressionType::Codec(c) => c,
        }
    }
}

impl std::str::FromStr for CompressionType {
    type Err = Error;

    fn from_str(value: &str) -> Result<CompressionType> {
        match value.trim() {
            "producer" => Ok(CompressionType::Producer),
            "uncompressed" => Ok(CompressionType::Codec(Compression::None)),
            // Kafka's topic config has no "none" (that is the producer's name).
            v @ ("gzip" | "snappy" | "lz4" | "zstd") => v.parse().map(CompressionType::Codec),
            _ => Err(invalid(
                "compression.type",
                format!("{value:?} is not one of uncompressed, zstd, lz4, snappy, gzip, producer"),
            )),
        }
    }
}

/// Settings of one partition log.
///
/// `Default` gives Kafka's defaults. Each field names the Kafka topic config it mirrors;
/// [`LogConfig::set`] takes those names.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LogConfig {
    /// Roll to a new segment when the active one would exceed this size.
    /// Kafka `segment.bytes`. Default = 1 GiB.
    pub segment_bytes: u64,
    /// Roll to a new segment when the active one is this old (ms). Kafka `segment.ms`.
    /// Default = 7 days. As in Kafka, the roll happens on the next append. Under a
    /// running maintenance thread, a `segment_ms` of at least 50 of its ticks (the flush
    /// check interval) is checked against the time of the last tick, so the roll may
    /// come up to one tick late; shorter ones read the system clock on each append.
    pub segment_ms: u64,
    /// Bytes of log between two sparse index entries. Kafka `index.interval.bytes`.
    /// Default = 4096.
    pub index_interval_bytes: u32,
    /// Maximum size of an index file; a full index rolls the segment.
    /// Kafka `segment.index.bytes`. Default = 10 MiB.
    pub index_max_bytes: u32,
    /// Largest batch accepted. Kafka `max.message.bytes`. Default = 1 MiB.
    pub max_message_bytes: u32,
    /// Delete sealed segments whose newest record is older than this (ms); `None` keeps
    /// them forever. Kafka `retention.ms` (-1 = forever). Default = 168 hours.
    pub retention_ms: Option<u64>,
    /// Delete the oldest sealed segments while the log is larger than this; `None` is
    /// unlimited. Kafka `retention.bytes`. Default = unlimited.
    pub retention_bytes: Option<u64>,
    /// Kafka `cleanup.policy`. Default = delete.
    pub cleanup_policy: CleanupPolicy,
    /// How long tombstones survive compaction (ms). Kafka `delete.retention.ms`.
    /// Default = 1 day.
    pub delete_retention_ms: u64,
    /// Fsync after this many records; `None` relies on the page cache and the flusher.
    /// Kafka `flush.messages`. Default = not forced.
    pub flush_messages: Option<u64>,
    /// Fsync when the oldest unflushed record is this old (ms); `None` = not forced.
    /// Kafka `flush.ms`. Default = not forced.
    pub flush_ms: Option<u64>,
    /// Stamp batches with the broker's clock (LogAppendTime) instead of keeping the
    /// producer's (CreateTime). Kafka `message.timestamp.type`. Default = CreateTime.
    pub log_append_time: bool,
    /// The codec batches are stored with. Kafka `compression.type`. Default = producer
    /// (as sent).
    pub compression_type: CompressionType,
    /// Fewest in-sync replicas an `acks=all` write needs. Kafka `min.insync.replicas`.
    /// Default = 1. Stored and validated; a single node is its own only replica.
    pub min_insync_replicas: u32,
    /// Durable acks (a tidelog setting, `durable.acks`): an `acks=all` write is answered
    /// only once the leader and every in-sync follower have fsynced it (followers fsync
    /// what they fetched before their next fetch counts it toward the high watermark),
    /// through the log's group commit. Default = false (Kafka's: acknowledged records
    /// may be only in the page cache of every replica).
    pub durable_acks: bool,
    /// Forget an idempotent producer's state (its epoch and last sequences) once its
    /// last write to the partition is this old (ms), unless it has a transaction open;
    /// checked on every retention pass and when the state is loaded. Kafka
    /// `producer.id.expiration.ms`. Default = 1 day.
    pub producer_id_expiration_ms: u64,
    /// The replicas whose replication from this topic's leaders is throttled to the
    /// leader's `leader.replication.throttled.rate` (KIP-73). Kafka
    /// `leader.replication.throttled.replicas`. Default = none.
    pub leader_throttled_replicas: ThrottledReplicas,
    /// The replicas whose fetching as followers is throttled to their broker's
    /// `follower.replication.throttled.rate` (KIP-73). Kafka
    /// `follower.replication.throttled.replicas`. Default = none.
    pub follower_throttled_replicas: ThrottledReplicas,
}

/// A topic's throttled replicas (Kafka's `*.replication.throttled.replicas`): none (the
/// empty list), every replica (`*`), or `partition:broker` pairs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ThrottledReplicas {
    /// No replica is throttled.
    #[default]
    None,
    /// Every replica of the topic (`*`).
    All,
    /// These `(partition, broker)` replicas.
    List(Vec<(i32, i32)>),
}

impl ThrottledReplicas {
    /// Parses Kafka's format: `*`, or a comma-separated list of
    /// `partitionId:brokerId` (empty: none).
    pub fn parse(key: &str, value: &str) -> Result<ThrottledReplicas> {
        let value = value.trim();
        if value == "*" {
            return Ok(ThrottledReplicas::All);
        }
        let mut pairs = Vec::new();
        for item in value.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let pair = item.split_once(':').and_then(|(p, b)| {
                let p = p.trim().parse::<i32>().ok().filter(|p| *p >= 0)?;
                let b = b.trim().parse::<i32>().ok().filter(|b| *b >= 0)?;
                Some((p, b))
            });
            let Some(pair) = pair else {
                return Err(invalid(
                    key,
                    format!(
                        "{item:?} is not a replica: the value must be the literal '*' or a list of replicas in the format [partitionId]:[brokerId],[partitionId]:[brokerId],..."
                    ),
                ));
            };
            if !pairs.contains(&pair) {
                pairs.push(pair);
            }
        }
        Ok(if pairs.is_empty() {
            ThrottledReplicas::None
        } else {
            ThrottledReplicas::List(pairs)
        })
    }

    /// True if the replica of `partition` on `broker` is throttled.
    pub fn contains(&self, partition: i32, broker: i32) -> bool {
        match self {
            ThrottledReplicas::None => false,
            ThrottledReplicas::All => true,
            ThrottledReplicas::List(l) => l.contains(&(partition, broker)),
        }
    }
}

impl std::fmt::Display for ThrottledReplicas {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ThrottledReplicas::None => Ok(()),
            ThrottledReplicas::All => f.write_str("*"),
            ThrottledReplicas::List(l) => {
                let items: Vec<String> = l.iter().map(|(p, b)| format!("{p}:{b}")).collect();
                f.write_str(&items.join(","))
            }
        }
    }
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            segment_bytes: 1 << 30,
            segment_ms: 7 * 24 * 3600 * 1000,
            index_interval_bytes: 4096,
            index_max_bytes: 10 << 20,
            max_message_bytes: 1 << 20,
            retention_ms: Some(168 * 3600 * 1000),
            retention_bytes: None,
            cleanup_policy: CleanupPolicy::Delete,
            delete_retention_ms: 24 * 3600 * 1000,
            flush_messages: None,
            flush_ms: None,
            log_append_time: false,
            compression_type: CompressionType::Producer,
            min_insync_replicas: 1,
            durable_acks: false,
            producer_id_expiration_ms: 24 * 3600 * 1000,
            leader_throttled_replicas: ThrottledReplicas::None,
            follower_throttled_replicas: ThrottledReplicas::None,
        }
    }
}

/// The Kafka config names [`LogConfig::set`] understands.
pub const CONFIG_KEYS: &[&str] = &[
    "segment.bytes",
    "segment.ms",
    "index.interval.bytes",
    "segment.index.bytes",
    "max.message.bytes",
    "retention.ms",
    "retention.bytes",
    "cleanup.policy",
    "delete.retention.ms",
    "flush.messages",
    "flush.ms",
    "message.timestamp.type",
    "compression.type",
    "min.insync.replicas",
    "durable.acks",
    "producer.id.expiration.ms",
    "leader.replication.throttled.replicas",
    "follower.replication.throttled.replicas",
];

fn invalid(key: &str, reason: impl Into<String>) -> Error {
    Error::InvalidConfig {
        key: key.to_string(),
        reason: reason.into(),
    }
}

fn parse_u64(key: &str, v: &str, min: u64) -> Result<u64> {
    let n: u64 = v
        .trim()
        .parse()
        .map_err(|_| invalid(key, format!("{v:?} is not a non-negative integer")))?;
    if n < min {
        return Err(invalid(key, format!("{n} is below the minimum {min}")));
    }
    Ok(n)
}

/// -1 (or any negative number) means "none", as in Kafka.
fn parse_opt(key: &str, v: &str, min: u64) -> Result<Option<u64>> {
    match v.trim().parse::<i64>() {
        Ok(n) if n < 0 => Ok(None),
        Ok(_) => parse_u64(key, v, min).map(Some),
        Err(_) => Err(invalid(key, format!("{v:?} is not an integer"))),
    }
}

impl LogConfig {
    /// Sets one setting by its Kafka name, e.g. `set("retention.ms", "60000")`. On an
    /// error the config is left unchanged.
    pub fn set(&mut self, key: &str, value: &str) -> Result<()> {
        let mut next = self.clone();
        next.set_unchecked(key, value)?;
        next.validate()?;
        *self = next;
        Ok(())
    }

    fn set_unchecked(&mut self, key: &str, value: &str) -> Result<()> {
        match key {
            "segment.bytes" => self.segment_bytes = parse_u64(key, value, 14)?,
            "segment.ms" => self.segment_ms = parse_u64(key, value, 1)?,
            "index.interval.bytes" => {
                self.index_interval_bytes = parse_u64(key, value, 0)?
                    .try_into()
                    .map_err(|_| invalid(key, "must fit in 32 bits"))?
            }
            "segment.index.bytes" => {
                self.index_max_bytes = parse_u64(key, value, 12)?
                    .try_into()
                    .map_err(|_| invalid(key, "must fit in 32 bits"))?
            }
            "max.message.bytes" => {
                self.max_message_bytes = parse_u64(key, value, 61)?
                    .try_into()
                    .map_err(|_| invalid(key, "must fit in 32 bits"))?
            }
            "retention.ms" => self.retention_ms = parse_opt(key, value, 0)?,
            "retention.bytes" => self.retention_bytes = parse_opt(key, value, 0)?,
            "cleanup.policy" => {
                let mut parts: Vec<&str> = value.split(',').map(str::trim).collect();
                parts.sort_unstable();
                self.cleanup_policy = match parts.as_slice() {
                    ["delete"] => CleanupPolicy::Delete,
                    ["compact"] => CleanupPolicy::Compact,
                    ["compact", "delete"] => CleanupPolicy::CompactDelete,
                    _ => {
                        return Err(invalid(
                            key,
                            format!("{value:?} is not delete, compact or compact,delete"),
                        ));
                    }
                }
            }
            "delete.retention.ms" => self.delete_retention_ms = parse_u64(key, value, 0)?,
            "flush.messages" => self.flush_messages = parse_opt(key, value, 1)?,
            "flush.ms" => self.flush_ms = parse_opt(key, value, 0)?,
            "message.timestamp.type" => {
                self.log_append_time = match value.trim() {
                    "CreateTime" => false,
                    "LogAppendTime" => true,
                    _ => {
                        return Err(invalid(
                            key,
                            format!("{value:?} is not CreateTime or LogAppendTime"),
                        ));
                    }
                }
            }
            "compression.type" => self.compression_type = value.parse()?,
            "durable.acks" => {
                self.durable_acks = match value.trim() {
                    "true" => true,
                    "false" => false,
                    _ => return Err(invalid(key, format!("{value:?} is not true or false"))),
                }
            }
            "producer.id.expiration.ms" => {
                self.producer_id_expiration_ms = parse_u64(key, value, 1)?
            }
            "leader.replication.throttled.replicas" => {
                self.leader_throttled_replicas = ThrottledReplicas::parse(key, value)?
            }
            "follower.replication.throttled.replicas" => {
                self.follower_throttled_replicas = ThrottledReplicas::parse(key, value)?
            }
            "min.insync.replicas" => {
                self.min_insync_replicas = parse_u64(key, value, 1)?
                    .try_into()
                    .map_err(|_| invalid(key, "must fit in 32 bits"))?
            }
            _ => {
                return Err(invalid(
                    key,
                    format!(
                        "unknown setting; known settings are {}",
                        CONFIG_KEYS.join(", ")
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Checks that the settings are consistent (segment sizes fit the index format).
    pub fn validate(&self) -> Result<()> {
        if self.segment_bytes > i32::MAX as u64 {
            return Err(invalid(
                "segment.bytes",
                format!(
                    "{} exceeds {} (positions are 32-bit)",
                    self.segment_bytes,
                    i32::MAX
                ),
            ));
        }
        if self.segment_bytes < 14 {
            return Err(invalid("segment.bytes", "must be at least 14"));
        }
        if self.index_max_bytes < 12 {
            return Err(invalid(
                "segment.index.bytes",
                "must hold at least one entry (12 bytes)",
            ));
        }
        if self.max_message_bytes < 61 {
            return Err(invalid(
                "max.message.bytes",
                "must be at least one batch header (61 bytes)",
            ));
        }
        Ok(())
    }

    /// The settings as Kafka `(name, value)` pairs, in [`CONFIG_KEYS`] order.
    pub fn to_pairs(&self) -> Vec<(String, String)> {
        let opt = |v: Option<u64>| v.map_or("-1".to_string(), |n| n.to_string());
        [
            ("segment.bytes", self.segment_bytes.to_string()),
            ("segment.ms", self.segment_ms.to_string()),
            (
                "index.interval.bytes",
                self.index_interval_bytes.to_string(),
            ),
            ("segment.index.bytes", self.index_max_bytes.to_string()),
            ("max.message.bytes", self.max_message_bytes.to_string()),
            ("retention.ms", opt(self.retention_ms)),
            ("retention.bytes", opt(self.retention_bytes)),
            ("cleanup.policy", self.cleanup_policy.as_str().to_string()),
            ("delete.retention.ms", self.delete_retention_ms.to_string()),
            ("flush.messages", opt(self.flush_messages)),
            ("flush.ms", opt(self.flush_ms)),
            (
                "message.timestamp.type",
                if self.log_append_time {
                    "LogAppendTime"
                } else {
                    "CreateTime"
                }
                .to_string(),
            ),
            (
                "compression.type",
                self.compression_type.as_str().to_string(),
            ),
            ("min.insync.replicas", self.min_insync_replicas.to_string()),
            ("durable.acks", self.durable_acks.to_string()),
            (
                "producer.id.expiration.ms",
                self.producer_id_expiration_ms.to_string(),
            ),
            (
                "leader.replication.throttled.replicas",
                self.leader_throttled_replicas.to_string(),
            ),
            (
                "follower.replication.throttled.replicas",
                self.follower_throttled_replicas.to_string(),
            ),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_round_trips_through_pairs() {
        let mut c = LogConfig::default();
        c.set("retention.ms", "-1").unwrap();
        c.set("cleanup.policy", "delete,compact").unwrap();
        c.set("message.timestamp.type", "LogAppendTime").unwrap();
        c.set("flush.messages", "10").unwrap();
        c.set("compression.type", "uncompressed").unwrap();
        c.set("min.insync.replicas", "2").unwrap();
        assert_eq!(
            c.compression_type,
            CompressionType::Codec(Compression::None)
        );
        assert_eq!(c.min_insync_replicas, 2);
        assert_eq!(c.retention_ms, None);
        assert_eq!(c.cleanup_policy, CleanupPolicy::CompactDelete);
        let mut d = LogConfig::default();
        for (k, v) in c.to_pairs() {
            d.set(&k, &v).unwrap();
        }
        assert_eq!(c, d);
    }

    #[test]
    fn throttled_replicas_take_kafkas_format() {
        let mut c = LogConfig::default();
        c.set("leader.replication.throttled.replicas", "0:1, 1:2,0:1")
            .unwrap();
        assert_eq!(
            c.leader_throttled_replicas,
            ThrottledReplicas::List(vec![(0, 1), (1, 2)])
        );
        assert!(c.leader_throttled_replicas.contains(1, 2));
        assert!(!c.leader_throttled_replicas.contains(1, 1));
        c.set("follower.replication.throttled.replicas", "*")
            .unwrap();
        assert!(c.follower_throttled_replicas.contains(7, 9));
        c.set("follower.replication.throttled.replicas", "")
            .unwrap();
        assert_eq!(c.follower_throttled_replicas, ThrottledReplicas::None);
        for bad in ["0", "a:1", "0:-1", "0:1:2", "**"] {
            let e = c
                .set("leader.replication.throttled.replicas", bad)
                .unwrap_err()
                .to_string();
            assert!(e.contains("leader.replication.throttled.replicas"), "{e}");
        }
        assert_eq!(c.leader_throttled_replicas.to_string(), "0:1,1:2");
    }

    #[test]
    fn bad_values_name_the_key() {
        let mut c = LogConfig::default();
        let e = c.set("segment.bytes", "lots").unwrap_err().to_string();
        assert!(e.contains("segment.bytes"), "{e}");
        let e = c.set("nope", "1").unwrap_err().to_string();
        assert!(e.contains("unknown setting"), "{e}");
        assert!(c.set("segment.bytes", "4294967296").is_err());
        assert!(c.set("cleanup.policy", "shred").is_err());
        let e = c.set("compression.type", "none").unwrap_err().to_string();
        assert!(
            e.contains("compression.type") && e.contains("uncompressed"),
            "{e}"
        );
        assert!(c.set("min.insync.replicas", "0").is_err());
        for v in ["producer", "gzip", "snappy", "lz4", "zstd"] {
            c.set("compression.type", v).unwrap();
            assert_eq!(c.compression_type.as_str(), v);
        }
    }
}
