//! The [`Backend`] and [`PartitionOps`] traits implemented by the real [`Broker`].

use std::path::PathBuf;
use std::sync::Arc;

use super::backend::{Backend, PartitionOps};
use crate::storage::{AppendInfo, LogSlice};
use crate::topic::Signal;
use crate::{Broker, Error, Partition, Result, TopicConfig};

/// A broker served over the network.
pub(crate) struct BrokerBackend {
    pub(crate) broker: Broker,
}

/// Kafka-named overrides as a [`TopicConfig`].
fn topic_config(configs: &[(String, String)]) -> TopicConfig {
    configs
        .iter()
        .fold(TopicConfig::new(), |c, (k, v)| c.set(k, v))
}

impl BrokerBackend {
    /// `-1` (Kafka's "use the broker default") as the broker's default partition count.
    fn partitions_or_default(&self, partitions: i32) -> i32 {
        if partitions == -1 {
            self.broker.config().default_partitions
        } else {
            partitions
        }
    }
}

impl Backend for BrokerBackend {
    fn topic_names(&self) -> Vec<String> {
        self.broker.topics()
    }

    fn partition_count(&self, topic: &str) -> Option<i32> {
        // A lookup never creates: only a Metadata request that allows it does.
        self.broker
            .registered_topic(topic)
            .ok()
            .map(|t| t.partition_count())
    }

    fn create_topic(
        &self,
        name: &str,
        partitions: i32,
        configs: &[(String, String)],
    ) -> Result<()> {
        let partitions = self.partitions_or_default(partitions);
        self.broker
            .create_topic(name, partitions, topic_config(configs))
            .map(drop)
    }

    fn validate_topic(
        &self,
        name: &str,
        partitions: i32,
        configs: &[(String, String)],
    ) -> Result<()> {
        crate::validate_topic_name(name)?;
        if self.broker.topics().iter().any(|t| t == name) {
            return Err(Error::TopicExists(name.to_string()));
        }
        if self.partitions_or_default(partitions) < 1 {
            return Err(Error::InvalidConfig {
                key: "partitions".into(),
                reason: format!("topic {name:?} needs at least 1 partition, not {partitions}"),
            });
        }
        topic_config(configs).validate()
    }

    fn delete_topic(&self, name: &str) -> Result<()> {
        self.broker.delete_topic(name)
    }

    fn partition(&self, topic: &str, partition: i32) -> Result<Arc<dyn PartitionOps>> {
        Ok(Arc::new(
            self.broker.registered_topic(topic)?.partition(partition)?,
        ))
    }

    fn topic_configs(&self, topic: &str) -> Result<Vec<(String, String)>> {
        Ok(self.broker.describe_topic(topic)?.log_config.to_pairs())
    }

    fn groups(&self) -> crate::GroupCoordinator {
        self.broker.group_coordinator().clone()
    }

    fn data_dir(&self) -> PathBuf {
        self.broker.dir().to_path_buf()
    }

    fn close(&self) -> Result<()> {
        self.broker.close()
    }
}

impl PartitionOps for Partition {
    fn append(&self, batches: &[u8]) -> Result<AppendInfo> {
        self.append_batch(batches)
    }
    fn read(&self, offset: i64, max_bytes: usize) -> Result<LogSlice> {
        Partition::read(self, offset, max_bytes)
    }
    fn log_start_offset(&self) -> i64 {
        Partition::log_start_offset(self)
    }
    fn high_watermark(&self) -> i64 {
        Partition::high_watermark(self)
    }
    fn offset_for_timestamp(&self, timestamp: i64) -> Result<Option<(i64, i64)>> {
        Partition::offset_for_timestamp(self, timestamp)
    }
    fn watch(&self, signal: &Arc<Signal>) {
        Partition::watch(self, signal)
    }
    fn unwatch(&self, signal: &Arc<Signal>) {
        Partition::unwatch(self, signal)
    }
}
