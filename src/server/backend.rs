//! What the API handlers need from a broker, as two small traits.
//!
//! The handlers are written against [`Backend`] and [`PartitionOps`] rather than the
//! broker types directly, so that the protocol layer can be tested on its own and stays
//! independent of how the broker keeps its registry. The broker implements them in
//! `broker_backend.rs`; the unit tests use a small backend over bare logs.

use std::path::PathBuf;
use std::sync::Arc;

use crate::error::Result;
use crate::record::ValidBatches;
use crate::storage::LogConfig;
use crate::storage::{AbortedTxn, ActiveProducer, AppendInfo, AppendOutcome, LogSlice, ReadLimit};
use crate::topic::{AppendEpoch, Signal};

/// The topic registry, the group coordinator and the data directory of a broker.
pub(crate) trait Backend: Send + Sync + 'static {
    /// Names of every topic, internal ones included.
    fn topic_names(&self) -> Vec<String>;
    /// Number of partitions of `topic`, `None` if it does not exist.
    fn partition_count(&self, topic: &str) -> Option<i32>;
    /// The topic id of `topic` (KIP-516), None if it does not exist or has none.
    fn topic_id(&self, _topic: &str) -> Option<[u8; 16]> {
        None
    }
    /// The partitions of `topic` offline on this node (held in a log directory that
    /// failed, or was unusable at start), each index with why. A cluster node reports
    /// none here (its Metadata answers from the cluster's view).
    fn offline_partitions(&self, _topic: &str) -> std::collections::BTreeMap<i32, String> {
        std::collections::BTreeMap::new()
    }
    /// Create `name` with `partitions` partitions (`-1` = the broker default) and the
    /// given Kafka-named config overrides.
    fn create_topic(&self, name: &str, partitions: i32, configs: &[(String, String)])
    -> Result<()>;
    /// Check that `create_topic` would succeed, creating nothing.
    fn validate_topic(
        &self,
        name: &str,
        partitions: i32,
        configs: &[(String, String)],
    ) -> Result<()>;
    /// Delete `name` and its data.
    fn delete_topic(&self, name: &str) -> Result<()>;
    /// One partition of a topic.
    fn partition(&self, topic: &str, partition: i32) -> Result<Arc<dyn PartitionOps>>;
    /// One partition of a topic this node holds a replica of, led here or not: a
    /// consumer's fetch from a follower (KIP-392) reads it up to its high watermark.
    /// A single node has no followers: the same as [`Backend::partition`].
    fn replica_partition(&self, topic: &str, partition: i32) -> Result<Arc<dyn PartitionOps>> {
        self.partition(topic, partition)
    }
    /// The effective configuration of `topic` as Kafka-named pairs.
    fn topic_configs(&self, topic: &str) -> Result<Vec<(String, String)>>;
    /// Grow `topic` to `total` partitions (CreatePartitions); with `validate_only`, only
    /// check that it could.
    fn create_partitions(&self, topic: &str, total: i32, validate_only: bool) -> Result<()>;
    /// The settings `topic` overrides, as Kafka-named pairs (not the broker defaults).
    fn topic_overrides(&self, topic: &str) -> Result<Vec<(String, String)>>;
    /// Replace the overrides of `topic` with `overrides` (AlterConfigs); with
    /// `validate_only`, only check them.
    fn alter_topic_config(
        &self,
        topic: &str,
        overrides: &[(String, String)],
        validate_only: bool,
    ) -> Result<()>;
    /// The brokers of the cluster, for DescribeCluster: a single node answers itself at
    /// `local` (its advertised `host:port`); a cluster answers its registered brokers at
    /// their endpoints of `listener`, leaving out those without it.
    fn brokers(&self, listener: &str, local: (String, i32)) -> Vec<BrokerEndpoint>;
    /// The group coordinator, shared with in-process consumers.
    fn groups(&self) -> crate::coordinator::GroupCoordinator;
    /// The transaction coordinator (leading no partition until `__transaction_state`
    /// exists).
    fn transactions(&self) -> crate::transaction::TransactionCoordinator;
    /// Makes `__transaction_state` unless done, on the first use of a transactional
    /// id: a single node also loads it into its transaction coordinator; a cluster
    /// node asks the controller for it (each partition's leader loads it).
    fn start_transactions(&self) -> Result<()>;
    /// Appends each transaction marker of `writes` to its partition, led here, then
    /// waits for their in-sync replicas (WriteTxnMarkers): each one's result, in order.
    /// A marker already written (the coordinator's retry) is not appended again.
    fn write_txn_markers(&self, writes: &[crate::broker::TxnMarkerWrite<'_>]) -> Vec<Result<()>>;
    /// The share coordinator (share groups, KIP-932), `__share_group_state` made and
    /// loaded on first use. A backend without one refuses.
    fn share(&self) -> Result<&crate::coordinator::ShareCoordinator> {
        Err(crate::error::Error::Closed(
            "share groups are not served by this backend".into(),
        ))
    }
    /// The dynamic group configs (the GROUP resource of DescribeConfigs and
    /// IncrementalAlterConfigs), where this node keeps them: a single node in its data
    /// directory, a cluster node in the metadata image.
    fn group_configs(&self) -> Option<&dyn crate::coordinator::group_configs::GroupConfigStore> {
        None
    }
    /// The settings the broker was opened with (the read-only configs of DescribeConfigs'
    /// BROKER resource), single node or cluster node alike.
    fn broker_config(&self) -> Option<&crate::config::BrokerConfig> {
        None
    }
    /// A single node's dynamic broker configs (the BROKER resource of DescribeConfigs,
    /// AlterConfigs and IncrementalAlterConfigs), kept in its data directory; None on a
    /// cluster node, which keeps them in the metadata image.
    fn node_broker_configs(&self) -> Option<&super::node_broker_configs::NodeBrokerConfigs> {
        None
    }
    /// The share groups this node knows, each with its number of members, made or
    /// loaded nothing (ListGroups, DescribeGroups).
    fn share_groups(&self) -> Vec<(String, usize)> {
        Vec::new()
    }
    /// DeleteGroups of share group `group` (see
    /// [`ShareCoordinator::delete_group`](crate::coordinator::ShareCoordinator::delete_group)),
    /// making nothing. A backend without share groups knows no such group.
    fn delete_share_group(&self, group: &str) -> Result<()> {
        Err(crate::error::Error::Share {
            group: group.to_string(),
            topic: String::new(),
            partition: -1,
            source: crate::error::ShareError::GroupIdNotFound,
        })
    }
    /// Deletes the share state of every share-partition of `topic`, deleted through
    /// the cluster's controller (a single node's broker does it as it deletes the
    /// topic). A failure is logged: the topic is deleted all the same, as in Kafka.
    fn delete_topic_share_states(&self, _topic: &str) {}
    /// The data directory (the server keeps its producer-id block there).
    fn data_dir(&self) -> PathBuf;
    /// Every partition log in the log directories (on a cluster node, the hosted
    /// ones), for DescribeLogDirs.
    fn local_logs(&self) -> Vec<LocalLog>;
    /// Every log directory with why it failed (None: usable), the data directory
    /// first, for DescribeLogDirs.
    fn log_dir_states(&self) -> Vec<(PathBuf, Option<String>)> {
        vec![(self.data_dir(), None)]
    }
    /// Starts moving partition `partition` of `topic` into the log directory `dir`
    /// (AlterReplicaLogDirs; the move goes on in the background).
    fn move_to_log_dir(&self, topic: &str, partition: i32, dir: &std::path::Path) -> Result<()> {
        let _ = (topic, partition);
        Err(crate::error::Error::InvalidConfig {
            key: "log.dirs".into(),
            reason: format!("{} is the only log directory", dir.display()),
        })
    }
    /// Close the broker cleanly (after the server stopped).
    fn close(&self) -> Result<()>;
    /// The cluster this broker is a node of, None for a single node. Handlers answer
    /// Metadata, CreateTopics, DeleteTopics, FindCoordinator, DescribeCluster and
    /// ListGroups from it.
    fn cluster(&self) -> Option<&dyn super::cluster_view::ClusterView> {
        None
    }
}

/// One partition's log in the data directory, as DescribeLogDirs describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LocalLog {
    /// Topic name.
    pub topic: String,
    /// Partition index.
    pub partition: i32,
    /// The log directory holding it.
    pub dir: PathBuf,
    /// Bytes of its files.
    pub size: u64,
    /// How far its log end is below its high watermark (Kafka's offset lag of a
    /// current log: never negative); for a future log, how far its copy's end is
    /// below the current log's end.
    pub offset_lag: i64,
    /// A future log: the partition moving into `dir` (Kafka's `is_future_key`).
    pub is_future: bool,
}

/// One broker as DescribeCluster lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BrokerEndpoint {
    /// The broker's node id.
    pub(crate) node_id: i32,
    /// Host clients connect to.
    pub(crate) host: String,
    /// Port clients connect to.
    pub(crate) port: i32,
    /// Rack, if known.
    pub(crate) rack: Option<String>,
    /// Fenced by the controller (a cluster's broker that stopped heartbeating).
    pub(crate) fenced: bool,
}

/// One partition's log as the handlers use it.
pub(crate) trait PartitionOps: Send + Sync {
    /// Append one or more validated batches (their CRC is not checked again); offsets
    /// are assigned by the log. With the leadership it was appended under, for an
    /// `acks=all` wait.
    fn append(&self, batches: &ValidBatches<'_>) -> Result<(AppendInfo, AppendEpoch)>;
    /// Append validated batches of idempotent producers after their sequence checks, in
    /// one step.
    fn append_idempotent(&self, batches: &ValidBatches<'_>)
    -> Result<(AppendOutcome, AppendEpoch)>;
    /// Whole batches from the one containing `offset`, up to `max_bytes` (at least one).
    fn read(&self, offset: i64, max_bytes: usize) -> Result<LogSlice>;
    /// A read_committed consumer's read: whole batches below the last stable offset,
    /// with that offset.
    fn read_committed(&self, offset: i64, max_bytes: usize) -> Result<(LogSlice, i64)>;
    /// The last stable offset (ListOffsets LATEST of a read_committed consumer).
    fn last_stable_offset(&self) -> Result<i64>;
    /// The aborted transactions with records in `from_offset..to_offset`.
    fn aborted_transactions(&self, from_offset: i64, to_offset: i64) -> Result<Vec<AbortedTxn>>;
    /// First readable offset.
    fn log_start_offset(&self) -> i64;
    /// Offset after the last committed record.
    fn high_watermark(&self) -> i64;
    /// First record with a timestamp >= `timestamp`: `(offset, timestamp)`.
    fn offset_for_timestamp(&self, timestamp: i64) -> Result<Option<(i64, i64)>>;
    /// Notify `signal` on every append until [`PartitionOps::unwatch`].
    fn watch(&self, signal: &Arc<Signal>);
    /// Stop notifying `signal`.
    fn unwatch(&self, signal: &Arc<Signal>);
    /// The partition's settings (`max.message.bytes`, `compression.type`, ...).
    fn log_config(&self) -> LogConfig;
    /// Advance the log start offset to `offset` (DeleteRecords); the new log start.
    /// `OffsetOutOfRange` beyond the high watermark.
    fn delete_records_before(&self, offset: i64) -> Result<i64>;

    // Replication (cluster nodes; a standalone partition accepts everything).

    /// The leader epoch while this node leads the partition (None on a single node,
    /// and on a follower).
    fn leader_epoch(&self) -> Option<i32> {
        None
    }
    /// Checks a request's `current_leader_epoch` (-1: none): `FencedLeaderEpoch` if
    /// older than this leader's, `UnknownLeaderEpoch` if newer, `NotLeaderOrFollower`
    /// on a follower.
    fn check_leader_epoch(&self, current: i32) -> Result<()>;
    /// False while a new leader's high watermark is below the start of its epoch
    /// (ListOffsets answers OFFSET_NOT_AVAILABLE then, KIP-207).
    fn offsets_available(&self) -> bool {
        true
    }
    /// True if producer `producer_id` has a transaction open here at `epoch`, so a
    /// batch of it needs no new verification by the coordinator (KIP-890 part 1).
    fn transaction_open_at(&self, producer_id: i64, epoch: i16) -> Result<bool> {
        let _ = (producer_id, epoch);
        Ok(false)
    }
    /// Before an `acks=all` append: `NotEnoughReplicas` if the ISR is below
    /// `min.insync.replicas`.
    fn check_enough_replicas(&self) -> Result<()>;
    /// `acks=all`: waits until the high watermark passes `offset`, appended under
    /// `appended` (`NotLeaderOrFollower` once the leadership is another).
    fn wait_committed(
        &self,
        offset: i64,
        appended: AppendEpoch,
        timeout: std::time::Duration,
    ) -> Result<()>;
    /// A follower's fetch: records its log end and moves the high watermark.
    fn record_replica_fetch(&self, replica: i32, fetch_offset: i64) -> Result<()>;
    /// True if the high watermark moved past what `replica` was last told.
    fn high_watermark_news(&self, replica: i32) -> bool;
    /// Notes the high watermark a response told `replica`.
    fn sent_high_watermark(&self, replica: i32, hw: i64);
    /// [`PartitionOps::read`] bounded by `limit` (a replica reads to the log end).
    fn read_bounded(&self, offset: i64, max_bytes: usize, limit: ReadLimit) -> Result<LogSlice>;
    /// Notify `signal` when what `limit` names moves, until [`PartitionOps::unwatch`].
    fn watch_bounded(&self, signal: &Arc<Signal>, limit: ReadLimit);
    /// OffsetForLeaderEpoch: the largest epoch at or below `epoch` and where it ends.
    fn end_offset_for_epoch(&self, epoch: i32) -> Result<(i32, i64)>;
    /// DescribeProducers: the idempotent producers of the partition's state.
    fn active_producers(&self) -> Result<Vec<ActiveProducer>>;
    /// On the leader, the log end offset of follower `replica` when it is in the ISR
    /// (where a consumer may be sent to read, KIP-392); None otherwise.
    fn in_sync_follower_log_end(&self, replica: i32) -> Option<i64> {
        let _ = replica;
        None
    }
}
