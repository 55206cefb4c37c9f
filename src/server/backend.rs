//! What the API handlers need from a broker, as two small traits.
//!
//! The handlers are written against [`Backend`] and [`PartitionOps`] rather than the
//! broker types directly, so that the protocol layer can be tested on its own and stays
//! independent of how the broker keeps its registry. The broker implements them in
//! `broker_backend.rs`; the unit tests use a small backend over bare logs.

use std::path::PathBuf;
use std::sync::Arc;

use crate::Result;
use crate::storage::{AppendInfo, LogSlice};
use crate::topic::Signal;

/// The topic registry, the group coordinator and the data directory of a broker.
pub(crate) trait Backend: Send + Sync + 'static {
    /// Names of every topic, internal ones included.
    fn topic_names(&self) -> Vec<String>;
    /// Number of partitions of `topic`, `None` if it does not exist.
    fn partition_count(&self, topic: &str) -> Option<i32>;
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
    /// The effective configuration of `topic` as Kafka-named pairs.
    fn topic_configs(&self, topic: &str) -> Result<Vec<(String, String)>>;
    /// The group coordinator, shared with in-process consumers.
    fn groups(&self) -> crate::GroupCoordinator;
    /// The data directory (the server keeps its producer-id block there).
    fn data_dir(&self) -> PathBuf;
    /// Close the broker cleanly (after the server stopped).
    fn close(&self) -> Result<()>;
}

/// One partition's log as the handlers use it.
pub(crate) trait PartitionOps: Send + Sync {
    /// Append one or more validated batches; offsets are assigned by the log.
    fn append(&self, batches: &[u8]) -> Result<AppendInfo>;
    /// Whole batches from the one containing `offset`, up to `max_bytes` (at least one).
    fn read(&self, offset: i64, max_bytes: usize) -> Result<LogSlice>;
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
}
