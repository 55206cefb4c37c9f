//! Share groups on a cluster: `__share_group_state` made through the controller on first
//! use, and each node's share coordinator holding the share-partitions of the
//! partitions it leads (ShareFetch and ShareAcknowledge go to a partition's leader, as
//! in Kafka), their state written to and loaded from their state partition through its
//! leader: directly where that is this node, with Produce (`acks=all`) and Fetch over
//! the inter-broker client where it is another.
//!
//! [`ShareUnloader`] is a [`MetadataListener`]: when this node stops leading a
//! partition, its share-partitions are dropped from memory; the next leader loads
//! them from the state partition, where every acknowledgement was written before it was
//! answered (records acquired here become available again there).

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    BrokerId, DeleteRecordsRequest, FetchRequest, ProduceRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::handle::NodeHandle;
use super::image::{LocalRole, MetadataImage, NO_LEADER};
use super::listener::{MetadataListener, MetadataUpdate};
use super::records::{CreateTopic, MetadataRecord};
use super::transactions::ClientPool;
use crate::broker::{Broker, WeakBroker};
use crate::coordinator::{
    PartitionJournal, RecordVisitor, SHARE_GROUP_STATE_TOPIC, ShareJournal, ShareStateStore,
    keyed_records, read_log,
};
use crate::error::{AdminError, Error, ErrorCode, Resource, Result, TopicPartition};
use crate::storage::codec;
use kafka_protocol::ResponseError;

/// Replicas of `__share_group_state` (Kafka's
/// `share.coordinator.state.topic.replication.factor`), capped at the unfenced brokers.
const STATE_REPLICATION_FACTOR: i16 = 3;
/// Its `min.insync.replicas` (`share.coordinator.state.topic.min.isr`), capped at the
/// replicas.
const STATE_MIN_ISR: i32 = 2;
/// How long making `__share_group_state` waits for the metadata to apply it.
const CREATE_TIMEOUT: Duration = Duration::from_secs(10);
/// Produce and Fetch versions of the calls to a state partition's leader.
const PRODUCE_VERSION: i16 = 8;
const FETCH_VERSION: i16 = 12;
const DELETE_RECORDS_VERSION: i16 = 2;
/// How long a write or read of a state partition retries while its leader moves.
const RETRY_FOR: Duration = Duration::from_secs(10);
const RETRY_STEP: Duration = Duration::from_millis(50);
/// Bytes of one Fetch of a state partition.
const FETCH_BYTES: i32 = 1 << 20;

/// A cluster node's [`ShareStateStore`]: see the module documentation.
pub(crate) struct ClusterShareStore(Arc<StoreInner>);

struct StoreInner {
    node_id: i32,
    node: Weak<NodeHandle>,
    broker: WeakBroker,
    partitions: i32,
    clients: ClientPool,
}

impl ClusterShareStore {
    /// The store of `broker`'s share coordinator on the node `node`.
    pub(crate) fn new(node_id: i32, broker: &Broker, node: Weak<NodeHandle>) -> Self {
        ClusterShareStore(Arc::new(StoreInner {
            node_id,
            node,
            broker: broker.downgrade(),
            partitions: broker.config().share.state_topic_partitions.max(1),
            clients: ClientPool::new(format!("tidelog-share-state-{node_id}")),
        }))
    }
}

impl StoreInner {
    fn node(&self) -> Result<Arc<NodeHandle>> {
        self.node
            .upgrade()
            .ok_or_else(|| Error::Closed("cluster node".into()))
    }

    /// Where partition `index` of `__share_group_state` is led: None for here, else
    /// the address of its leader.
    fn leader(&self, image: &MetadataImage, index: i32) -> Result<Option<String>> {
        let name = format!("{SHARE_GROUP_STATE_TOPIC}-{index}");
        let leader = image
            .topic(SHARE_GROUP_STATE_TOPIC)
            .and_then(|t| t.partitions.get(usize::try_from(index).ok()?))
            .map_or(NO_LEADER, |p| p.leader);
        if leader == self.node_id {
            return Ok(None);
        }
        image
            .brokers
            .get(&leader)
            .filter(|b| !b.fenced)
            .map(|b| Some(b.replication_listener.clone().unwrap_or(b.listener.clone())))
            .ok_or_else(|| Error::NotLeaderOrFollower {
                partition: name,
                reason: "it has no leader right now".into(),
            })
    }

    /// The local partition `index`, led here.
    fn local(&self, index: i32) -> Result<crate::topic::Partition> {
        let broker = self
            .broker
            .upgrade()
            .ok_or_else(|| Error::Closed("broker".into()))?;
        broker
            .hosted_partition(SHARE_GROUP_STATE_TOPIC, index)
            .ok_or_else(|| Error::NotLeaderOrFollower {
                partition: format!("{SHARE_GROUP_STATE_TOPIC}-{index}"),
                reason: "not hosted here yet".into(),
            })
    }

    /// One record appended to partition `index` through its leader at `addr`, once
    /// its in-sync replicas have it.
    fn produce(&self, addr: &str, index: i32, key: &[u8], value: &[u8]) -> Result<i64> {
        let node = self.node()?;
        let security = node.config().replication_security.clone();
        drop(node);
        let mut b = crate::record::BatchBuilder::new();
        b.push(crate::storage::now_ms(), Some(key), Some(value), &[]);
        let request = ProduceRequest::default()
            .with_acks(-1)
            .with_timeout_ms(5_000)
            .with_topic_data(vec![
                TopicProduceData::default()
                    .with_name(topic_name())
                    .with_partition_data(vec![
                        PartitionProduceData::default()
                            .with_index(index)
                            .with_records(Some(Bytes::from(b.finish()))),
                    ]),
            ]);
        let response = self
            .clients
            .call(addr, &security, &request, PRODUCE_VERSION)?;
        let answer = response
            .responses
            .iter()
            .flat_map(|t| &t.partition_responses)
            .find(|p| p.index == index)
            .ok_or_else(|| refused(index, "an answer without the partition".into()))?;
        if answer.error_code == ResponseError::FencedLeaderEpoch.code() {
            // The state partition's leader has a newer leader epoch of the
            // share-partition: this node was deposed (not retried).
            return Err(Error::FencedLeaderEpoch {
                partition: format!("{SHARE_GROUP_STATE_TOPIC}-{index}"),
                reason: answer
                    .error_message
                    .as_deref()
                    .unwrap_or("a newer leader wrote the share-partition's state")
                    .to_string(),
            });
        }
        if answer.error_code == ResponseError::FencedStateEpoch.code() {
            // An admin replaced the share-partition's state since this node read it.
            return Err(Error::FencedStateEpoch {
                partition: format!("{SHARE_GROUP_STATE_TOPIC}-{index}"),
                reason: answer
                    .error_message
                    .as_deref()
                    .unwrap_or("the share-partition's state has a newer state epoch")
                    .to_string(),
            });
        }
        if answer.error_code != 0 {
            return Err(refused(
                index,
                format!(
                    "its leader answered {}",
                    ErrorCode::from_code(answer.error_code)
                ),
            ));
        }
        Ok(answer.base_offset)
    }

    /// The records of partition `index` before `offset` deleted by its leader at
    /// `addr` (DeleteRecords).
    fn delete_records(&self, addr: &str, index: i32, offset: i64) -> Result<()> {
        let node = self.node()?;
        let security = node.config().replication_security.clone();
        drop(node);
        let request = DeleteRecordsRequest::default()
            .with_timeout_ms(5_000)
            .with_topics(vec![
                DeleteRecordsTopic::default()
                    .with_name(topic_name())
                    .with_partitions(vec![
                        DeleteRecordsPartition::default()
                            .with_partition_index(index)
                            .with_offset(offset),
                    ]),
            ]);
        let response = self
            .clients
            .call(addr, &security, &request, DELETE_RECORDS_VERSION)?;
        let answer = response
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .find(|p| p.partition_index == index)
            .ok_or_else(|| refused(index, "an answer without the partition".into()))?;
        match answer.error_code {
            0 => Ok(()),
            code => Err(answered(index, code)),
        }
    }

    /// Every keyed record of partition `index`, fetched from its leader at `addr` up
    /// to its high watermark.
    fn fetch(&self, addr: &str, index: i32, f: &mut RecordVisitor<'_>) -> Result<()> {
        let node = self.node()?;
        let security = node.config().replication_security.clone();
        drop(node);
        let location = format!("{SHARE_GROUP_STATE_TOPIC}-{index}");
        let mut scratch = Vec::new();
        let mut offset = 0;
        // Bounded: every round moves `offset` forward or ends.
        loop {
            let request = FetchRequest::default()
                .with_replica_id(BrokerId(-1))
                .with_max_wait_ms(0)
                .with_min_bytes(0)
                .with_max_bytes(FETCH_BYTES)
                .with_topics(vec![
                    FetchTopic::default()
                        .with_topic(topic_name())
                        .with_partitions(vec![
                            FetchPartition::default()
                                .with_partition(index)
                                .with_fetch_offset(offset)
                                .with_partition_max_bytes(FETCH_BYTES),
                        ]),
                ]);
            let response = self
                .clients
                .call(addr, &security, &request, FETCH_VERSION)?;
            let p = response
                .responses
                .iter()
                .flat_map(|t| &t.partitions)
                .find(|p| p.partition_index == index)
                .ok_or_else(|| refused(index, "an answer without the partition".into()))?;
            // Pruned below `offset` (by a single node before it joined a cluster):
            // start at the log's start.
            if p.error_code == 1 && p.log_start_offset > offset {
                offset = p.log_start_offset;
                continue;
            }
            if p.error_code != 0 {
                return Err(answered(index, p.error_code));
            }
            let records = p.records.clone().unwrap_or_default();
            if offset >= p.high_watermark || records.is_empty() {
                return Ok(());
            }
            let next = keyed_records(&records, offset, &location, &mut scratch, f)?;
            if next <= offset {
                return Ok(());
            }
            offset = next;
        }
    }
}

fn topic_name() -> TopicName {
    TopicName(StrBytes::from_static_str(SHARE_GROUP_STATE_TOPIC))
}

fn refused(index: i32, reason: String) -> Error {
    Error::NotLeaderOrFollower {
        partition: format!("{SHARE_GROUP_STATE_TOPIC}-{index}"),
        reason,
    }
}

/// The error of a leader's answer `code` (not 0) about partition `index`: a leader
/// moving or not there yet (retried) as [`Error::NotLeaderOrFollower`].
fn answered(index: i32, code: i16) -> Error {
    match code {
        // 20 (appended, not replicated): written again, harmless as a record replays
        // to the same state.
        3 | 5 | 6 | 19 | 20 => refused(
            index,
            format!("its leader answered {}", ErrorCode::from_code(code)),
        ),
        _ => Error::Admin(Box::new(AdminError::new(
            Resource::Partition(TopicPartition {
                topic: SHARE_GROUP_STATE_TOPIC.into(),
                partition: index,
            }),
            ErrorCode::from_code(code),
            None,
        ))),
    }
}

/// `f` again while it fails because the leader moves (or has not applied its
/// leadership yet) or its in-sync replicas are too few for now, for up to
/// [`RETRY_FOR`]. A write appended but not replicated is written again: a share
/// record replays to the same state however often it is in the log.
fn retrying<T>(mut f: impl FnMut() -> Result<T>) -> Result<T> {
    let deadline = Instant::now() + RETRY_FOR;
    loop {
        match f() {
            Err(
                Error::NotLeaderOrFollower { .. }
                | Error::NotEnoughReplicas { .. }
                | Error::NotEnoughReplicasAfterAppend { .. }
                | Error::Io { .. },
            ) if Instant::now() < deadline => {
                std::thread::sleep(RETRY_STEP);
            }
            other => return other,
        }
    }
}

impl ShareStateStore for ClusterShareStore {
    fn partitions(&self) -> Result<i32> {
        self.0.partitions()
    }

    fn journal(&self, index: i32) -> Arc<dyn ShareJournal> {
        Arc::new(StateJournal {
            store: Arc::clone(&self.0),
            index,
        })
    }

    fn leader_epoch(&self, topic: &str, partition: i32) -> Result<i32> {
        self.0.leader_epoch(topic, partition)
    }

    fn made(&self) -> bool {
        self.0
            .node()
            .is_ok_and(|n| n.image().topic(SHARE_GROUP_STATE_TOPIC).is_some())
    }

    fn read(&self, index: i32, f: &mut RecordVisitor<'_>) -> Result<()> {
        // A failed read called `f` for nothing: the coordinator reads into a fresh
        // state each time.
        retrying(|| {
            let image = self.0.node()?.image();
            match self.0.leader(&image, index)? {
                None => read_log(
                    &self.0.local(index)?,
                    &format!("{SHARE_GROUP_STATE_TOPIC}-{index}"),
                    &mut *f,
                ),
                Some(addr) => self.0.fetch(&addr, index, f),
            }
        })
    }
}

impl StoreInner {
    /// One record appended to partition `index`, led here, through this node's write
    /// fence, once its in-sync replicas have it.
    fn append_local(&self, index: i32, key: &[u8], value: &[u8]) -> Result<i64> {
        let broker = self
            .broker
            .upgrade()
            .ok_or_else(|| Error::Closed("broker".into()))?;
        PartitionJournal(self.local(index)?).append_fenced(broker.share_state().fence(), key, value)
    }

    /// The leader epoch of `topic`-`partition` in this node's metadata.
    fn leader_epoch(&self, topic: &str, partition: i32) -> Result<i32> {
        let image = self.node()?.image();
        let t = image
            .topic(topic)
            .ok_or_else(|| Error::UnknownTopic(topic.to_string()))?;
        usize::try_from(partition)
            .ok()
            .and_then(|i| t.partitions.get(i))
            .map(|p| p.leader_epoch)
            .ok_or_else(|| Error::UnknownPartition {
                topic: topic.to_string(),
                partition,
                count: t.partitions.len() as i32,
            })
    }

    fn partitions(&self) -> Result<i32> {
        let node = self.node()?;
        if let Some(t) = node.image().topic(SHARE_GROUP_STATE_TOPIC) {
            return Ok(t.partitions.len() as i32);
        }
        ensure_state_topic(&node, self.partitions)?;
        node.image()
            .topic(SHARE_GROUP_STATE_TOPIC)
            .map(|t| t.partitions.len() as i32)
            .ok_or_else(|| Error::Closed(format!("{SHARE_GROUP_STATE_TOPIC} was not made")))
    }
}

/// Partition `index` of `__share_group_state` as a journal: appended and pruned
/// through its current leader (the followers follow its log start).
struct StateJournal {
    store: Arc<StoreInner>,
    index: i32,
}

impl ShareJournal for StateJournal {
    fn append(&self, key: &[u8], value: &[u8]) -> Result<i64> {
        retrying(|| {
            let image = self.store.node()?.image();
            match self.store.leader(&image, self.index)? {
                None => self.store.append_local(self.index, key, value),
                Some(addr) => self.store.produce(&addr, self.index, key, value),
            }
        })
    }

    fn prune(&self, offset: i64) -> Result<()> {
        // Only space is at stake: tried once, the next snapshot prunes again.
        let image = self.store.node()?.image();
        match self.store.leader(&image, self.index)? {
            None => PartitionJournal(self.store.local(self.index)?).prune(offset),
            Some(addr) => self.store.delete_records(&addr, self.index, offset),
        }
    }
}

/// Makes `__share_group_state` through the controller unless it exists (what the
/// first share-partition of a cluster does): `partitions` partitions, cleanup policy
/// `delete` with no retention (as Kafka's), [`STATE_REPLICATION_FACTOR`] replicas
/// capped at the unfenced brokers. Returns once this node applied it (or another node
/// made it first).
fn ensure_state_topic(node: &NodeHandle, partitions: i32) -> Result<()> {
    let image = node.image();
    if image.topic(SHARE_GROUP_STATE_TOPIC).is_some() {
        return Ok(());
    }
    let unfenced = image.unfenced_brokers().len();
    let rf = i16::try_from(unfenced)
        .unwrap_or(i16::MAX)
        .min(STATE_REPLICATION_FACTOR);
    if rf < 1 {
        return Err(Error::InvalidConfig {
            key: "share.coordinator.state.topic.replication.factor".into(),
            reason: format!("no unfenced broker to place {SHARE_GROUP_STATE_TOPIC} on yet"),
        });
    }
    let min_isr = STATE_MIN_ISR.min(i32::from(rf));
    let record = MetadataRecord::CreateTopic(CreateTopic {
        name: SHARE_GROUP_STATE_TOPIC.into(),
        topic_id: codec::random_uuid(),
        partitions,
        replication_factor: rf,
        assignment: None,
        configs: vec![
            ("cleanup.policy".into(), "delete".into()),
            ("retention.ms".into(), "-1".into()),
            ("retention.bytes".into(), "-1".into()),
            ("min.insync.replicas".into(), min_isr.to_string()),
        ],
        internal: true,
    });
    tracing::info!(
        partitions,
        replicas = rf,
        "creating {SHARE_GROUP_STATE_TOPIC}"
    );
    match node.submit(record, CREATE_TIMEOUT).and_then(|p| p.wait()) {
        Ok(_) => Ok(()),
        // Another node made it meanwhile.
        Err(_) if node.image().topic(SHARE_GROUP_STATE_TOPIC).is_some() => Ok(()),
        Err(e) => Err(e),
    }
}

/// Drops the share-partitions of the partitions this node stops leading. See the
/// module documentation.
pub(crate) struct ShareUnloader {
    pub(crate) broker: WeakBroker,
}

impl MetadataListener for ShareUnloader {
    fn on_metadata(&self, update: &MetadataUpdate<'_>) {
        let Some(broker) = self.broker.upgrade() else {
            return;
        };
        let share = broker.share_state();
        let changes = update.local_changes();
        for (topic, _, partition) in &changes.removed {
            share.unload_partition(topic, *partition);
        }
        for c in changes.changed {
            if !matches!(c.role, LocalRole::Leader { .. }) {
                share.unload_partition(&c.topic, c.partition);
            }
        }
    }
}
