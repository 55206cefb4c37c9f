//! The [`Backend`] and [`PartitionOps`] traits implemented by the real [`Broker`].

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::backend::{Backend, BrokerEndpoint, PartitionOps};
use super::cluster_view::{ClusterView, NO_LEADER};
use crate::broker::Broker;
use crate::config::TopicConfig;
use crate::error::{Error, Result};
use crate::record::ValidBatches;
use crate::storage::LogConfig;
use crate::storage::{AbortedTxn, ActiveProducer, AppendInfo, AppendOutcome, LogSlice, ReadLimit};
use crate::topic::Signal;
use crate::topic::{AppendEpoch, Partition};

/// A broker served over the network.
pub(crate) struct BrokerBackend {
    pub(crate) broker: Broker,
    /// Set when the broker is a cluster node: topics and leaders come from the cluster.
    pub(crate) cluster: Option<Arc<dyn ClusterView>>,
    /// The group configs: a single node's file, or a cluster's metadata image.
    pub(crate) group_configs: Option<Arc<dyn crate::coordinator::group_configs::GroupConfigStore>>,
    /// A single node's dynamic broker configs (a cluster keeps them in its image).
    pub(crate) broker_configs: Option<Arc<super::node_broker_configs::NodeBrokerConfigs>>,
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

/// On a cluster node: Ok if this node leads `topic`-`partition` as the cluster's
/// metadata says.
fn check_leader(node: &dyn ClusterView, topic: &str, partition: i32) -> Result<()> {
    let t = node
        .topic(topic)
        .ok_or_else(|| Error::UnknownTopic(topic.to_string()))?;
    let p = usize::try_from(partition)
        .ok()
        .and_then(|i| t.partitions.get(i))
        .ok_or_else(|| Error::UnknownPartition {
            topic: topic.to_string(),
            partition,
            count: t.partitions.len() as i32,
        })?;
    if p.leader != node.node_id() {
        return Err(Error::NotLeaderOrFollower {
            partition: format!("{topic}-{partition}"),
            reason: if p.leader == NO_LEADER {
                "it has no leader right now".into()
            } else {
                format!("node {} leads it", p.leader)
            },
        });
    }
    Ok(())
}

impl Backend for BrokerBackend {
    fn topic_names(&self) -> Vec<String> {
        match &self.cluster {
            Some(c) => c.topic_names(),
            None => self.broker.topic_names(),
        }
    }

    fn partition_count(&self, topic: &str) -> Option<i32> {
        match &self.cluster {
            Some(c) => c.topic(topic).map(|t| t.partitions.len() as i32),
            // A lookup never creates: only a Metadata request that allows it does.
            None => self
                .broker
                .registered_topic(topic)
                .ok()
                .map(|t| t.partition_count()),
        }
    }

    fn offline_partitions(&self, topic: &str) -> std::collections::BTreeMap<i32, String> {
        match &self.cluster {
            Some(_) => std::collections::BTreeMap::new(),
            None => self.broker.offline_partitions(topic),
        }
    }

    fn topic_id(&self, topic: &str) -> Option<[u8; 16]> {
        match &self.cluster {
            Some(c) => c.topic(topic).map(|t| t.id),
            None => self
                .broker
                .topic_id(topic)
                .and_then(|id| crate::storage::codec::uuid_from_base64(&id)),
        }
    }

    fn cluster(&self) -> Option<&dyn ClusterView> {
        self.cluster.as_deref()
    }

    fn group_configs(&self) -> Option<&dyn crate::coordinator::group_configs::GroupConfigStore> {
        self.group_configs.as_deref()
    }

    fn broker_config(&self) -> Option<&crate::config::BrokerConfig> {
        Some(self.broker.config())
    }

    fn node_broker_configs(&self) -> Option<&super::node_broker_configs::NodeBrokerConfigs> {
        self.broker_configs.as_deref()
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
        crate::config::validate_topic_name(name)?;
        if self.broker.topic_names().iter().any(|t| t == name) {
            return Err(Error::TopicExists(name.to_string()));
        }
        if self.partitions_or_default(partitions) < 1 {
            return Err(Error::InvalidConfig {
                key: "partitions".into(),
                reason: format!("topic {name:?} needs at least 1 partition, not {partitions}"),
            });
        }
        self.broker
            .check_partition_limit(name, self.partitions_or_default(partitions))?;
        topic_config(configs).validate()
    }

    fn delete_topic(&self, name: &str) -> Result<()> {
        self.broker.delete_topic(name)
    }

    fn partition(&self, topic: &str, partition: i32) -> Result<Arc<dyn PartitionOps>> {
        if let Some(c) = &self.cluster {
            check_leader(&**c, topic, partition)?;
        }
        Ok(Arc::new(
            self.broker.registered_topic(topic)?.partition(partition)?,
        ))
    }

    fn replica_partition(&self, topic: &str, partition: i32) -> Result<Arc<dyn PartitionOps>> {
        let Some(c) = &self.cluster else {
            return self.partition(topic, partition);
        };
        let hosted = c
            .topic(topic)
            .and_then(|t| t.partitions.get(usize::try_from(partition).ok()?).cloned())
            .is_some_and(|p| p.replicas.contains(&c.node_id()));
        if !hosted {
            // The leader check names the leader, or why the partition is unknown.
            return self.partition(topic, partition);
        }
        Ok(Arc::new(
            self.broker.registered_topic(topic)?.partition(partition)?,
        ))
    }

    fn topic_configs(&self, topic: &str) -> Result<Vec<(String, String)>> {
        Ok(self.broker.describe_topic(topic)?.log_config.to_pairs())
    }

    fn create_partitions(&self, topic: &str, total: i32, validate_only: bool) -> Result<()> {
        if !validate_only {
            return self.broker.add_partitions(topic, total);
        }
        let current = self.broker.describe_topic(topic)?.partitions.len() as i32;
        if total <= current {
            return Err(Error::InvalidConfig {
                key: "partitions".into(),
                reason: format!(
                    "topic {topic:?} has {current} partitions; it can only grow, not to {total}"
                ),
            });
        }
        self.broker.check_partition_limit(topic, total - current)
    }

    fn topic_overrides(&self, topic: &str) -> Result<Vec<(String, String)>> {
        let t = self.broker.describe_topic(topic)?;
        Ok(t.config
            .overrides()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect())
    }

    fn alter_topic_config(
        &self,
        topic: &str,
        overrides: &[(String, String)],
        validate_only: bool,
    ) -> Result<()> {
        let config = topic_config(overrides);
        if validate_only {
            self.broker.describe_topic(topic)?;
            return config.apply(&self.broker.config().log).map(drop);
        }
        self.broker.alter_topic_config(topic, config)
    }

    fn brokers(&self, listener: &str, (host, port): (String, i32)) -> Vec<BrokerEndpoint> {
        if let Some(c) = &self.cluster {
            return c
                .brokers(listener)
                .into_iter()
                .filter_map(|b| {
                    let (host, port) = b.endpoint?;
                    Some(BrokerEndpoint {
                        node_id: b.id,
                        host,
                        port,
                        rack: b.rack,
                        fenced: b.fenced,
                    })
                })
                .collect();
        }
        vec![BrokerEndpoint {
            node_id: super::api::NODE_ID,
            host,
            port,
            rack: None,
            fenced: false,
        }]
    }

    fn groups(&self) -> crate::coordinator::GroupCoordinator {
        self.broker.group_coordinator().clone()
    }

    fn share(&self) -> Result<&crate::coordinator::ShareCoordinator> {
        self.broker.share_coordinator()
    }

    fn share_groups(&self) -> Vec<(String, usize)> {
        let share = self.broker.share_state();
        share
            .list_groups()
            .into_iter()
            .map(|g| {
                let members = share.describe(&g).len();
                (g, members)
            })
            .collect()
    }

    fn delete_share_group(&self, group: &str) -> Result<()> {
        self.broker.share_state().delete_group(group)
    }

    fn delete_topic_share_states(&self, topic: &str) {
        self.broker.delete_share_states_of(topic);
    }

    fn transactions(&self) -> crate::transaction::TransactionCoordinator {
        self.broker.transaction_coordinator().clone()
    }

    fn start_transactions(&self) -> Result<()> {
        match &self.cluster {
            Some(c) => c.ensure_transaction_state(&self.broker.config().transaction),
            None => self.broker.ensure_transaction_state(),
        }
    }

    fn write_txn_markers(&self, writes: &[crate::broker::TxnMarkerWrite<'_>]) -> Vec<Result<()>> {
        let mut results: Vec<Result<()>> = writes
            .iter()
            .map(|w| match &self.cluster {
                Some(c) => check_leader(c.as_ref(), w.topic, w.partition),
                None => Ok(()),
            })
            .collect();
        let led: Vec<usize> = (0..writes.len()).filter(|&i| results[i].is_ok()).collect();
        let mine: Vec<crate::broker::TxnMarkerWrite<'_>> = led.iter().map(|&i| writes[i]).collect();
        for (i, r) in led.into_iter().zip(self.broker.write_txn_markers(&mine)) {
            results[i] = r;
        }
        results
    }

    fn data_dir(&self) -> PathBuf {
        self.broker.dir().to_path_buf()
    }

    fn local_logs(&self) -> Vec<super::backend::LocalLog> {
        let mut out = Vec::new();
        for name in self.broker.topic_names() {
            let Ok(topic) = self.broker.registered_topic(&name) else {
                continue;
            };
            for p in topic.partitions().iter() {
                out.push(super::backend::LocalLog {
                    topic: name.clone(),
                    partition: p.index(),
                    dir: p
                        .log()
                        .dir()
                        .parent()
                        .map_or_else(|| self.broker.dir().to_path_buf(), Path::to_path_buf),
                    size: p.size_bytes(),
                    offset_lag: (p.high_watermark() - p.log_end_offset()).max(0),
                    is_future: false,
                });
            }
        }
        for f in self.broker.future_logs() {
            if let Some((topic, partition)) = crate::storage::split_log_name(&f.name) {
                out.push(super::backend::LocalLog {
                    topic: topic.to_string(),
                    partition,
                    dir: f.dir,
                    size: f.size,
                    offset_lag: f.offset_lag,
                    is_future: true,
                });
            }
        }
        out
    }

    fn log_dir_states(&self) -> Vec<(PathBuf, Option<String>)> {
        self.broker.log_dir_states()
    }

    fn move_to_log_dir(&self, topic: &str, partition: i32, dir: &Path) -> Result<()> {
        self.broker.start_partition_move(topic, partition, dir)
    }

    fn close(&self) -> Result<()> {
        self.broker.close()
    }
}

impl PartitionOps for Partition {
    fn leader_epoch(&self) -> Option<i32> {
        Partition::leader_epoch(self)
    }
    fn transaction_open_at(&self, producer_id: i64, epoch: i16) -> Result<bool> {
        self.log().transaction_open_at(producer_id, epoch)
    }
    fn append(&self, batches: &ValidBatches<'_>) -> Result<(AppendInfo, AppendEpoch)> {
        self.append_valid_at(batches)
    }
    fn append_idempotent(
        &self,
        batches: &ValidBatches<'_>,
    ) -> Result<(AppendOutcome, AppendEpoch)> {
        self.append_idempotent_valid_at(batches)
    }
    fn read(&self, offset: i64, max_bytes: usize) -> Result<LogSlice> {
        Partition::read(self, offset, max_bytes)
    }
    fn read_committed(&self, offset: i64, max_bytes: usize) -> Result<(LogSlice, i64)> {
        Partition::read_committed(self, offset, max_bytes)
    }
    fn last_stable_offset(&self) -> Result<i64> {
        Partition::last_stable_offset(self)
    }
    fn aborted_transactions(&self, from_offset: i64, to_offset: i64) -> Result<Vec<AbortedTxn>> {
        Partition::aborted_transactions(self, from_offset, to_offset)
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
    fn log_config(&self) -> LogConfig {
        self.log().config()
    }
    fn delete_records_before(&self, offset: i64) -> Result<i64> {
        self.log().delete_records_before(offset)
    }
    fn check_leader_epoch(&self, current: i32) -> Result<()> {
        Partition::check_leader_epoch(self, current)
    }
    fn check_enough_replicas(&self) -> Result<()> {
        Partition::check_enough_replicas(self)
    }
    fn offsets_available(&self) -> bool {
        Partition::offsets_available(self)
    }
    fn wait_committed(
        &self,
        offset: i64,
        appended: AppendEpoch,
        timeout: std::time::Duration,
    ) -> Result<()> {
        Partition::wait_committed_at(self, offset, appended, timeout)
    }
    fn record_replica_fetch(&self, replica: i32, fetch_offset: i64) -> Result<()> {
        Partition::record_replica_fetch(self, replica, fetch_offset)
    }
    fn high_watermark_news(&self, replica: i32) -> bool {
        Partition::high_watermark_news(self, replica)
    }
    fn sent_high_watermark(&self, replica: i32, hw: i64) {
        Partition::sent_high_watermark(self, replica, hw)
    }
    fn read_bounded(&self, offset: i64, max_bytes: usize, limit: ReadLimit) -> Result<LogSlice> {
        self.log().read_bounded(offset, max_bytes, limit)
    }
    fn watch_bounded(&self, signal: &Arc<Signal>, limit: ReadLimit) {
        self.log().watch(signal, limit)
    }
    fn end_offset_for_epoch(&self, epoch: i32) -> Result<(i32, i64)> {
        self.log().end_offset_for_epoch(epoch)
    }
    fn active_producers(&self) -> Result<Vec<ActiveProducer>> {
        self.log().active_producers()
    }
    fn in_sync_follower_log_end(&self, replica: i32) -> Option<i64> {
        Partition::in_sync_follower_log_end(self, replica)
    }
}
