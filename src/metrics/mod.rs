//! Metrics of a running broker: [`Broker::metrics`](crate::Broker::metrics) returns a
//! [`Metrics`] snapshot, and with the `server` feature [`prometheus_text`] renders one
//! in the Prometheus text format (what `tidelog serve --metrics-listen` serves).
//!
//! Where each number comes from, and why recording it costs no lock:
//!
//! - **Partitions**: records and bytes in are counted by the partition's log for every
//!   batch it writes (leader, idempotent and follower appends alike), under the writer
//!   lock the append already holds, with a plain load and store of two relaxed atomics
//!   (one writer, so no read-modify-write). Records and bytes out are counted by every
//!   read of the log (in-process consumers, network fetches, replica fetches) with two
//!   relaxed `fetch_add`s on a cache line of their own. Offsets, size and segment count
//!   are read from the log as `topics describe` reads them.
//! - **Groups**: from the group coordinator's describe and offset-fetch answers; lag is
//!   the partition's high watermark minus the committed offset, as
//!   kafka-consumer-groups computes it.
//! - **Server**: per API, a request count and latency histogram (from the request's
//!   bytes read to its response written), recorded per request with relaxed atomics;
//!   errors per Kafka error code, counted from the error codes of each response;
//!   connections; bytes sent with `sendfile(2)`.
//! - **Storage**: segment fsyncs and their latency (timed around each fsync, off the
//!   append path), the prefault thread's work, and the sum of every log's recovery
//!   report.
//! - **Forwarders**: each running store-and-forward `Forwarder`
//!   of the broker's data directory (feature `client`) registers with the broker while
//!   it runs, and reports the status it keeps anyway (its counters under its own small
//!   lock, its per-partition positions as of its last refresh, about once a second).
//!
//! A snapshot is consistent per counter, not across counters: a record appended while
//! it is taken may show in one partition's `records_in` before its log end moves.

mod counters;
mod forward;
#[cfg(feature = "server")]
mod prometheus;
mod replication;
#[cfg(feature = "server")]
pub(crate) mod server;

pub use counters::recovery_bytes_validated;
pub(crate) use counters::{LogStats, PrefaultStats, recovery_validated};
pub use forward::{ForwardStatus, PartitionStatus};
#[cfg(feature = "server")]
pub use prometheus::{CONTENT_TYPE, prometheus_text};
#[cfg(feature = "server")]
pub(crate) use replication::ThrottleStats;

/// A snapshot of a broker's metrics; see the [module documentation](self) for where each
/// number is recorded.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Metrics {
    /// Every partition of every topic this broker holds (internal ones too), sorted by
    /// topic and partition.
    pub partitions: Vec<PartitionMetrics>,
    /// Every consumer group the coordinator knows, sorted by id (none while the
    /// coordinator is not loaded, e.g. on a cluster node that does not host
    /// `__consumer_offsets`).
    pub groups: Vec<GroupMetrics>,
    /// The storage layer of the data directory.
    pub storage: StorageMetrics,
    /// The network servers serving this broker, added up; None when none is running.
    pub server: Option<ServerMetrics>,
    /// The replication throttle of a cluster node (KIP-73); None on a single node.
    pub replication: Option<ReplicationMetrics>,
    /// The store-and-forward forwarders running on this broker's topics, sorted by name
    /// (one leaves when it is stopped or dropped).
    pub forwarders: Vec<ForwardStatus>,
}

/// A cluster node's replication throttle, as Kafka's replication quota metrics.
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct ReplicationMetrics {
    /// What it sends as leader to followers of its leader-throttled replicas
    /// (`leader.replication.throttled.rate`; Kafka's `LeaderReplication`).
    pub leader: ReplicationThrottleMetrics,
    /// What it fetches as follower of its follower-throttled replicas
    /// (`follower.replication.throttled.rate`; Kafka's `FollowerReplication`).
    pub follower: ReplicationThrottleMetrics,
}

/// One side of the replication throttle.
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct ReplicationThrottleMetrics {
    /// Bytes moved for throttled replicas that are not in sync since the node started.
    pub throttled_bytes: u64,
    /// Those bytes per second over the last 11 seconds (Kafka's `byte-rate`).
    pub byte_rate: f64,
    /// Time the quota was spent while throttled replicas asked for data, so that they
    /// were held back (Kafka's `throttle-time`), in seconds since the node started.
    pub throttle_time_seconds: f64,
}

/// One partition's traffic and log.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PartitionMetrics {
    /// Topic name.
    pub topic: String,
    /// Partition index.
    pub partition: i32,
    /// True for internal topics (`__consumer_offsets`).
    pub internal: bool,
    /// Records appended since the log was opened (any appender).
    pub records_in: u64,
    /// Bytes of batches appended since the log was opened.
    pub bytes_in: u64,
    /// Offsets handed out by reads since the log was opened: from the offset each read
    /// asked for to the end of what it returned (the number of records, less the gaps
    /// compaction left).
    pub records_out: u64,
    /// Bytes of batches handed out by reads since the log was opened.
    pub bytes_out: u64,
    /// First offset still in the log.
    pub log_start_offset: i64,
    /// Offset the next record will get.
    pub log_end_offset: i64,
    /// The highest offset consumers may read, plus one.
    pub high_watermark: i64,
    /// Bytes on disk.
    pub size_bytes: u64,
    /// Number of segments.
    pub segments: usize,
}

/// One consumer group.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct GroupMetrics {
    /// The group id.
    pub group_id: String,
    /// Its state.
    pub state: &'static str,
    /// Its current generation (0 before its first rebalance, -1 if unknown).
    pub generation: i32,
    /// Members in the current generation.
    pub members: usize,
    /// Its committed offsets, sorted by topic and partition.
    pub offsets: Vec<GroupOffsetMetrics>,
}

/// A group's committed offset of one partition, and its lag.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct GroupOffsetMetrics {
    /// Topic name.
    pub topic: String,
    /// Partition index.
    pub partition: i32,
    /// The committed offset.
    pub committed: i64,
    /// The partition's high watermark; None if this broker does not hold the partition.
    pub high_watermark: Option<i64>,
    /// `high_watermark - committed`, at least 0; None without a high watermark.
    pub lag: Option<i64>,
}

/// A latency histogram.
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct HistogramSnapshot {
    /// `(upper bound in seconds, observations in this bucket)`, the bounds increasing
    /// and the last one `f64::INFINITY`; not cumulative.
    pub buckets: Vec<(f64, u64)>,
    /// Observations in all.
    pub count: u64,
    /// Sum of the observations, in seconds.
    pub sum_seconds: f64,
}

/// The storage layer of a data directory.
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct StorageMetrics {
    /// Segment fsyncs (a segment's data and indexes), by latency, over every log.
    pub fsync: HistogramSnapshot,
    /// The prefault thread's work.
    pub prefault: PrefaultMetrics,
    /// What recovery did when the logs were opened, added up over every log.
    pub recovery: RecoveryMetrics,
    /// Each log directory (the data directory first) and whether it is offline.
    pub log_dirs: Vec<LogDirMetrics>,
    /// Log directories offline (Kafka's `OfflineLogDirectoryCount`).
    pub offline_log_dirs: u64,
    /// Partitions this node holds that are offline because their log directory failed
    /// (Kafka's `OfflineReplicaCount`).
    pub offline_partitions: u64,
    /// Partitions moving between log directories now (future logs).
    pub future_logs: u64,
}

/// One log directory (Kafka's `log.dirs` entry).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct LogDirMetrics {
    /// Its path.
    pub dir: String,
    /// True once it failed (Kafka's `LogDirectoryOffline`): its partitions are offline.
    pub offline: bool,
}

/// What the prefault thread did: it faults in the pages a segment will be written to
/// next, and the pages a sequential reader will read next, off the appending and the
/// reading threads.
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct PrefaultMetrics {
    /// Ranges faulted in ahead of writers.
    pub write_ranges: u64,
    /// Bytes of those ranges.
    pub write_bytes: u64,
    /// Ranges mapped ahead of sequential readers.
    pub read_ranges: u64,
    /// Bytes of those ranges.
    pub read_bytes: u64,
    /// Time the thread spent faulting, in seconds.
    pub busy_seconds: f64,
    /// Ranges refused because the thread was behind (the writer or reader faulted them
    /// itself).
    pub refused_ranges: u64,
}

/// The recovery reports of every open log, added up.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct RecoveryMetrics {
    /// Logs open.
    pub logs: u64,
    /// Logs whose recovery changed something on disk (a cut, a rebuilt index, ...).
    pub logs_repaired: u64,
    /// Segments opened without validation (below the recovery point).
    pub segments_trusted: u64,
    /// Segments validated batch by batch.
    pub segments_validated: u64,
    /// Bytes of batches validated.
    pub bytes_validated: u64,
    /// Places where a log was cut (a torn or corrupt batch).
    pub truncations: u64,
    /// Index files rebuilt.
    pub indexes_rebuilt: u64,
    /// Segments removed because they followed a cut.
    pub segments_removed: u64,
    /// Damaged partition checkpoints ignored.
    pub checkpoints_damaged: u64,
    /// Batch headers read to rebuild idempotent producers' state.
    pub producer_batches_replayed: u64,
}

/// The network servers of a broker, added up.
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct ServerMetrics {
    /// Connections open now.
    pub connections_open: u64,
    /// Connections accepted and served since the server started.
    pub connections_accepted: u64,
    /// Connections refused (over `max_connections` or the open-files limit).
    pub connections_refused: u64,
    /// Per Kafka API with at least one request: its count and latency.
    pub requests: Vec<RequestMetrics>,
    /// Per Kafka error code answered at least once: how many times (the error codes in
    /// responses, one per partition, topic or group that failed).
    pub errors: Vec<ErrorMetrics>,
    /// Bytes written to sockets with `sendfile(2)` (zero-copy) by this process.
    pub sendfile_bytes: u64,
}

/// Requests of one Kafka API.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct RequestMetrics {
    /// The API's name as Kafka spells it (`Produce`, `Fetch`, ...).
    pub api: String,
    /// Its key.
    pub api_key: i16,
    /// Time from the request read to its response written (count: the requests).
    pub latency: HistogramSnapshot,
}

/// Answers with one Kafka error code.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ErrorMetrics {
    /// The code.
    pub code: i16,
    /// Its name as Kafka spells it (`UNKNOWN_TOPIC_OR_PARTITION`, ...).
    pub name: String,
    /// How many times it was answered.
    pub count: u64,
}

/// The metrics state a broker keeps: the servers serving it register here.
#[derive(Debug, Default)]
pub(crate) struct BrokerStats {
    #[cfg(feature = "server")]
    servers: parking_lot::Mutex<Vec<std::sync::Weak<server::ServerStats>>>,
    /// The replication throttle's counters, recorded by a cluster node's quotas.
    pub(crate) replication: replication::ReplicationStats,
}

impl BrokerStats {
    /// Adds `server`'s counters to the broker's metrics while it lives.
    #[cfg(feature = "server")]
    pub(crate) fn attach_server(&self, server: &std::sync::Arc<server::ServerStats>) {
        let mut servers = self.servers.lock();
        servers.retain(|s| s.strong_count() > 0);
        servers.push(std::sync::Arc::downgrade(server));
    }

    /// The servers' metrics added up, None when none is running.
    pub(crate) fn servers(&self) -> Option<ServerMetrics> {
        #[cfg(feature = "server")]
        {
            let live: Vec<_> = self
                .servers
                .lock()
                .iter()
                .filter_map(std::sync::Weak::upgrade)
                .collect();
            server::ServerStats::sum(&live)
        }
        #[cfg(not(feature = "server"))]
        None
    }
}

#[cfg(test)]
mod tests;
