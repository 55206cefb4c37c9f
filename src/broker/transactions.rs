//! The broker's side of transactions: its transaction coordinator, the internal topic
//! `__transaction_state` made on first use (as Kafka does), and the markers written to
//! the partitions this broker leads.

use std::sync::{Arc, Weak};
use std::time::Duration;

use super::{Broker, BrokerInner, OFFSETS_TOPIC};
use crate::config::TopicConfig;
use crate::coordinator::TxnOffsetCommitRequest;
use crate::error::{Error, Result, TxnError, TxnState};
use crate::record::EndTxnMarker;
use crate::storage::{CleanupPolicy, MarkerOutcome};
use crate::transaction::events;
use crate::transaction::log::TRANSACTION_STATE_TOPIC;
use crate::transaction::{
    AddPartitionsRequest, EndTxnRequest, InitProducerIdAnswer, InitProducerIdRequest, MarkerWriter,
    MarkersDone, ProducerIdAndEpoch, TopicPartition, TransactionCoordinator, TxnMarkers,
};

/// A transaction coordinator's answer to an in-process producer.
pub(crate) type TxnAnswer<T> = std::result::Result<T, TxnError>;

/// What a cluster node adds to the transaction calls of its in-process producers: the
/// transaction and group coordinators of other nodes (the leaders of the id's
/// `__transaction_state` partition and of the group's `__consumer_offsets` partition),
/// the cluster's producer ids, and `__transaction_state` made through the controller.
/// Implemented by the cluster layer (above) and attached with
/// [`Broker::attach_remote_transactions`], so the broker does not depend on it.
pub(crate) trait RemoteTransactions: Send + Sync {
    /// Makes `__transaction_state` through the controller unless it exists.
    fn ensure_transaction_state(&self) -> Result<()>;
    /// A producer id no other producer of the cluster has.
    fn new_producer_id(&self) -> Result<i64>;
    /// InitProducerId of the transactional id at its coordinator.
    fn init_producer_id(&self, request: &InitProducerIdRequest) -> TxnAnswer<InitProducerIdAnswer>;
    /// The `transaction.version` the cluster finalized (its metadata image's).
    fn transaction_version(&self) -> i16;
    /// AddPartitionsToTxn at the coordinator: a producer's request, or, for a client
    /// of transaction version 2, the one a partition leader sends for it (KIP-890
    /// part 2).
    fn add_partitions(&self, request: &AddPartitionsRequest) -> TxnAnswer<()>;
    /// AddOffsetsToTxn of `group_id` at the coordinator (for a client of transaction
    /// version 2, the addition of the group's `__consumer_offsets` partition its group
    /// coordinator makes).
    fn add_offsets(
        &self,
        transactional_id: &str,
        producer: ProducerIdAndEpoch,
        group_id: &str,
        client_transaction_version: i16,
    ) -> TxnAnswer<()>;
    /// EndTxn at the coordinator (answered once the Prepare record is written): the
    /// producer id and epoch to go on with (bumped for a client of transaction
    /// version 2).
    fn end_txn(&self, request: &EndTxnRequest) -> TxnAnswer<ProducerIdAndEpoch>;
    /// The id's producer id, epoch and state (DescribeTransactions).
    fn describe(&self, transactional_id: &str) -> TxnAnswer<(ProducerIdAndEpoch, TxnState)>;
    /// True when this node coordinates `group_id`.
    fn coordinates_group(&self, group_id: &str) -> bool;
    /// TxnOffsetCommit of `request` at the group's coordinator, another node; an
    /// error names the group and the partition refused.
    fn txn_offset_commit(
        &self,
        transactional_id: &str,
        request: TxnOffsetCommitRequest,
    ) -> Result<()>;
}

/// The coordinators an in-process transactional producer talks to, chosen per call:
/// this broker's own transaction coordinator when it coordinates the id (every id on
/// a single node), else, on a cluster node, the coordinator of another node through
/// the attached [`RemoteTransactions`] (NOT_COORDINATOR without one).
pub(crate) struct TxnRoute {
    broker: Broker,
    remote: Option<Arc<dyn RemoteTransactions>>,
}

impl TxnRoute {
    /// The local coordinator if it coordinates `transactional_id`.
    fn local(&self, transactional_id: &str) -> Option<&TransactionCoordinator> {
        let txns = self.broker.transaction_coordinator();
        txns.partition_of(transactional_id)
            .is_some_and(|p| txns.leads(p))
            .then_some(txns)
    }

    fn remote(&self) -> TxnAnswer<&dyn RemoteTransactions> {
        self.remote.as_deref().ok_or(TxnError::NotCoordinator)
    }

    /// A producer id for the local coordinator: the cluster's on a cluster node, else
    /// one of the data directory's in-process range.
    fn new_producer_id(&self) -> Result<i64> {
        match &self.remote {
            Some(r) => r.new_producer_id(),
            None => self.broker.new_in_process_producer_id(),
        }
    }

    /// Makes `__transaction_state` unless it exists (through the controller on a
    /// cluster node).
    pub(crate) fn ensure_transaction_state(&self) -> Result<()> {
        match &self.remote {
            Some(r) => r.ensure_transaction_state(),
            None => self.broker.ensure_transaction_state(),
        }
    }

    /// The finalized `transaction.version` a producer follows: the cluster's on a
    /// cluster node, else the one a single node finalizes for good, the highest this
    /// build supports (transaction version 2, KIP-890 part 2).
    pub(crate) fn transaction_version(&self) -> i16 {
        match &self.remote {
            Some(r) => r.transaction_version(),
            None => crate::transaction::EPOCH_BUMP_TRANSACTION_VERSION,
        }
    }

    pub(crate) fn init_producer_id(
        &self,
        request: &InitProducerIdRequest,
    ) -> TxnAnswer<InitProducerIdAnswer> {
        match self.local(&request.transactional_id) {
            Some(txns) => txns.init_producer_id(request, &|| self.new_producer_id()),
            None => self.remote()?.init_producer_id(request),
        }
    }

    pub(crate) fn add_partitions(&self, request: &AddPartitionsRequest) -> TxnAnswer<()> {
        match self.local(&request.transactional_id) {
            Some(txns) => txns.add_partitions(request),
            None => self.remote()?.add_partitions(request),
        }
    }

    pub(crate) fn add_offsets(
        &self,
        transactional_id: &str,
        producer: ProducerIdAndEpoch,
        group_id: &str,
        client_transaction_version: i16,
    ) -> TxnAnswer<()> {
        match self.local(transactional_id) {
            Some(txns) => {
                let count = self
                    .broker
                    .topic(OFFSETS_TOPIC)
                    .map(|t| t.partition_count())
                    .unwrap_or(1)
                    .max(1);
                let partition = crate::transaction::log::partition_for(group_id, count);
                txns.add_offsets(
                    transactional_id,
                    producer,
                    partition,
                    client_transaction_version,
                )
            }
            None => self.remote()?.add_offsets(
                transactional_id,
                producer,
                group_id,
                client_transaction_version,
            ),
        }
    }

    /// EndTxn: the producer id and epoch to go on with.
    pub(crate) fn end_txn(&self, request: &EndTxnRequest) -> TxnAnswer<ProducerIdAndEpoch> {
        match self.local(&request.transactional_id) {
            Some(txns) => txns.end_txn(request, &|| self.new_producer_id()),
            None => self.remote()?.end_txn(request),
        }
    }

    pub(crate) fn describe(
        &self,
        transactional_id: &str,
    ) -> TxnAnswer<(ProducerIdAndEpoch, TxnState)> {
        match self.local(transactional_id) {
            Some(txns) => txns.describe(transactional_id).map(|m| {
                let ids = ProducerIdAndEpoch {
                    producer_id: m.producer_id,
                    epoch: m.producer_epoch,
                };
                (ids, m.state)
            }),
            None => self.remote()?.describe(transactional_id),
        }
    }

    /// A count that moves whenever the local coordinator of `transactional_id` has
    /// written a transaction's markers (0 when another node coordinates it): read it
    /// before [`describe`](Self::describe), then pass it to
    /// [`wait_completed`](Self::wait_completed).
    pub(crate) fn completed(&self, transactional_id: &str) -> u64 {
        self.local(transactional_id)
            .map_or(0, TransactionCoordinator::completed)
    }

    /// Waits at most `timeout` for a transaction to complete after `seen`: woken by the
    /// local coordinator when it coordinates `transactional_id`, else (another node's
    /// coordinator, asked over the network) for the whole `timeout`.
    pub(crate) fn wait_completed(&self, transactional_id: &str, seen: u64, timeout: Duration) {
        match self.local(transactional_id) {
            Some(txns) => {
                txns.wait_completed(seen, timeout);
            }
            None => std::thread::sleep(timeout),
        }
    }

    /// TxnOffsetCommit at the group's coordinator: this broker's on a single node or
    /// where it coordinates the group, else the other node's.
    pub(crate) fn txn_offset_commit(
        &self,
        transactional_id: &str,
        request: TxnOffsetCommitRequest,
    ) -> Result<()> {
        if let Some(r) = self
            .remote
            .as_ref()
            .filter(|r| !r.coordinates_group(&request.group_id))
        {
            return r.txn_offset_commit(transactional_id, request);
        }
        let group = request.group_id.clone();
        let refused = match self.broker.group_coordinator().txn_offset_commit(request) {
            Ok(results) => results.into_iter().find_map(|r| r.result.err()),
            Err(e) => Some(e),
        };
        match refused {
            None => Ok(()),
            Some(source) => Err(Error::Group { group, source }),
        }
    }
}

/// The first producer id of in-process transactional producers (2^62): a range of its
/// own, so that they never take an id the network server hands out.
pub(crate) const IN_PROCESS_PRODUCER_IDS: i64 = 1 << 62;

/// How long a marker waits for the partition's in-sync replicas (acks=all).
const MARKER_TIMEOUT: Duration = Duration::from_secs(5);

/// Writes markers to the partitions this broker leads.
struct LocalMarkers {
    broker: Weak<BrokerInner>,
}

impl MarkerWriter for LocalMarkers {
    fn write_markers(&self, m: &TxnMarkers) -> Vec<(TopicPartition, Error)> {
        crate::transaction::write_markers_as_batch(self, m)
    }

    /// Every marker of the batch appended, then each waits for its in-sync replicas
    /// ([`Broker::write_txn_markers`]).
    fn write_batch(&self, batch: &[TxnMarkers], done: &MarkersDone<'_>) {
        let Some(inner) = self.broker.upgrade() else {
            crate::transaction::fail_batch(batch, done, || Error::Closed("broker".into()));
            return;
        };
        let broker = Broker { inner };
        let mut writes = Vec::new();
        for (i, m) in batch.iter().enumerate() {
            let marker = match m.result {
                crate::transaction::TxnResult::Commit => EndTxnMarker::commit(m.coordinator_epoch),
                crate::transaction::TxnResult::Abort => EndTxnMarker::abort(m.coordinator_epoch),
            };
            for (topic, partition) in &m.partitions {
                let write = TxnMarkerWrite {
                    topic,
                    partition: *partition,
                    producer_id: m.producer_id,
                    producer_epoch: m.producer_epoch,
                    marker,
                    transaction_version: m.transaction_version,
                };
                writes.push((i, write));
            }
        }
        let plain: Vec<TxnMarkerWrite<'_>> = writes.iter().map(|(_, w)| *w).collect();
        let results = broker.write_txn_markers(&plain);
        let mut failed: Vec<Vec<(TopicPartition, Error)>> =
            batch.iter().map(|_| Vec::new()).collect();
        for ((i, w), result) in writes.iter().zip(results) {
            let (topic, partition) = (w.topic, w.partition);
            let id = &batch[*i].transactional_id;
            match result {
                Ok(()) => {}
                // A partition deleted since it was added: nothing to mark (Kafka drops it).
                Err(Error::UnknownTopic(_) | Error::UnknownPartition { .. }) => {
                    events::marker_dropped(id, topic, partition, None);
                }
                // A newer producer epoch or coordinator wrote there already: this
                // marker is fenced and never will be written (Kafka drops it too).
                Err(
                    e @ (Error::InvalidProducerEpoch { .. }
                    | Error::TransactionCoordinatorFenced { .. }),
                ) => {
                    events::marker_dropped(id, topic, partition, Some(&e));
                }
                Err(e) => failed[*i].push(((topic.to_string(), partition), e)),
            }
        }
        for (i, f) in failed.into_iter().enumerate() {
            done(i, f);
        }
    }
}

impl Broker {
    /// The transaction coordinator (served by the network server).
    pub fn transaction_coordinator(&self) -> &TransactionCoordinator {
        &self.inner.transactions
    }

    /// The coordinators an in-process transactional producer talks to ([`TxnRoute`]).
    pub(crate) fn txn_route(&self) -> TxnRoute {
        TxnRoute {
            broker: self.clone(),
            remote: self.inner.remote_transactions.read().clone(),
        }
    }

    #[cfg(feature = "server")]
    /// Gives the in-process transactional producers of this cluster node the
    /// coordinators of the other nodes (until the cluster is detached).
    pub(crate) fn attach_remote_transactions(&self, remote: Arc<dyn RemoteTransactions>) {
        *self.inner.remote_transactions.write() = Some(remote);
    }

    /// The marker writer of the partitions this broker leads (a cluster node's
    /// coordinators send the others' markers over the network).
    pub(crate) fn local_marker_writer(&self) -> Arc<dyn MarkerWriter> {
        Arc::new(LocalMarkers {
            broker: Arc::downgrade(&self.inner),
        })
    }

    /// Makes `__transaction_state` (`transaction.state.log.num.partitions`
    /// partitions, compacted, internal) unless it exists, and loads every partition
    /// into the transaction coordinator: what a single node does on the first
    /// FindCoordinator or InitProducerId of a transactional id, and at open when the
    /// topic exists. Cheap once done.
    pub(crate) fn ensure_transaction_state(&self) -> Result<()> {
        let txns = &self.inner.transactions;
        if txns.partition_count() > 0 {
            return Ok(());
        }
        if self.is_cluster_node() {
            return Err(Error::InvalidConfig {
                key: "transactional.id".into(),
                reason: "on a cluster node __transaction_state is made through the controller and loaded by its partitions' leaders".into(),
            });
        }
        let _once = self.inner.txn_setup.lock();
        if txns.partition_count() > 0 {
            return Ok(());
        }
        let topic = match self.registered_topic(TRANSACTION_STATE_TOPIC) {
            Ok(t) => t,
            Err(_) => {
                let partitions = self.inner.config.transaction.state_log_partitions;
                events::creating_state_topic(partitions);
                self.create_topic_inner(
                    TRANSACTION_STATE_TOPIC,
                    partitions,
                    TopicConfig::new().cleanup_policy(CleanupPolicy::Compact),
                    true,
                )?
            }
        };
        txns.set_marker_writer(self.local_marker_writer());
        for p in topic.partitions().iter() {
            txns.load_partition(
                p.index(),
                p.leader_epoch().unwrap_or(0),
                Arc::new(p.clone()),
            )?;
        }
        txns.set_partition_count(topic.partition_count());
        events::coordinator_loaded(topic.partition_count());
        txns.start_timer()
    }

    /// A producer id for an in-process transactional producer, never handed out
    /// before by this data directory. In-process ids come from their own range,
    /// starting at [`IN_PROCESS_PRODUCER_IDS`] (far above the ids the network server
    /// hands out from 0), reserved in blocks of 1000 whose upper end is written to
    /// `<data dir>/producer-id-block-in-process` before any id of the block is used.
    pub(crate) fn new_in_process_producer_id(&self) -> Result<i64> {
        const BLOCK: i64 = 1000;
        let file = self.dir().join("producer-id-block-in-process");
        let mut ids = self.inner.in_process_ids.lock();
        let (next, limit) = match *ids {
            Some(b) => b,
            None => {
                let start = match crate::storage::read_checkpoint(&file)? {
                    Some(bytes) => {
                        let raw: [u8; 8] = bytes.as_slice().try_into().map_err(|_| {
                            Error::corrupt(file.display(), 0, "a producer id block is 8 bytes")
                        })?;
                        i64::from_be_bytes(raw)
                    }
                    None => IN_PROCESS_PRODUCER_IDS,
                };
                (start, start)
            }
        };
        let limit = if next >= limit {
            let limit = next + BLOCK;
            crate::storage::write_checkpoint(&file, &limit.to_be_bytes())?;
            limit
        } else {
            limit
        };
        *ids = Some((next + 1, limit));
        Ok(next)
    }

    /// Appends each COMMIT or ABORT marker of `writes` (a WriteTxnMarkers request, or
    /// a batch of the local coordinator's markers) to its partition, led here, and
    /// waits for its in-sync replicas; each one's result, in order. Every marker is
    /// appended first, then each waits, so the waits overlap as in Kafka's leader (one
    /// wait for the whole request). Idempotent: a coordinator's retry of a marker
    /// already in the log (its earlier write timed out, or its answer was lost) is not
    /// appended again, and is answered once that marker is replicated.
    pub(crate) fn write_txn_markers(&self, writes: &[TxnMarkerWrite<'_>]) -> Vec<Result<()>> {
        let appended: Vec<Result<AppendedMarker>> =
            writes.iter().map(|w| self.append_txn_marker(w)).collect();
        appended
            .into_iter()
            .zip(writes)
            .map(|(a, w)| a.and_then(|a| self.finish_txn_marker(w, a)))
            .collect()
    }

    /// The first half of [`Broker::write_txn_markers`]: the marker appended (or found
    /// written, or not needed), and where to wait for it.
    fn append_txn_marker(&self, w: &TxnMarkerWrite<'_>) -> Result<AppendedMarker> {
        let p = self.registered_topic(w.topic)?.partition(w.partition)?;
        if w.topic == OFFSETS_TOPIC && !p.log().has_open_transaction(w.producer_id)? {
            // The group coordinator reads every record of its journal: a marker there
            // ends the producer's transactional offsets (TxnOffsetCommit), and with
            // none open it would end nothing. An earlier try may have appended it and
            // failed on the wait: the offsets are completed once the log is replicated
            // (nothing pending is no error).
            let last = p.log_end_offset() - 1;
            return Ok(AppendedMarker {
                partition: p,
                last,
                appended: None,
            });
        }
        let ts = crate::storage::now_ms();
        let (outcome, appended) = p.append_end_txn_marker_at(
            w.producer_id,
            w.producer_epoch,
            w.marker,
            w.transaction_version,
            ts,
        )?;
        let last = match outcome {
            MarkerOutcome::Appended(info) => info.last_offset,
            MarkerOutcome::Repeated { log_end_offset } => log_end_offset - 1,
        };
        Ok(AppendedMarker {
            partition: p,
            last,
            appended: Some(appended),
        })
    }

    /// The second half of [`Broker::write_txn_markers`]: waits for the in-sync
    /// replicas, then a marker on `__consumer_offsets` completes the producer's
    /// offsets in the group coordinator.
    fn finish_txn_marker(&self, w: &TxnMarkerWrite<'_>, a: AppendedMarker) -> Result<()> {
        let p = &a.partition;
        match a.appended {
            Some(appended) => p.wait_committed_at(a.last, appended, MARKER_TIMEOUT)?,
            None if a.last >= 0 => p.wait_committed(a.last, MARKER_TIMEOUT)?,
            None => {}
        }
        if w.topic == OFFSETS_TOPIC {
            let commit = w.marker.commit;
            self.group_coordinator().complete_txn_offsets(
                w.partition,
                w.producer_id,
                w.producer_epoch,
                commit,
            )?;
            if a.appended.is_some() {
                events::offsets_marker(w.producer_id, w.producer_epoch, commit);
            }
        }
        Ok(())
    }
}

/// One marker to write to a partition led here ([`Broker::write_txn_markers`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct TxnMarkerWrite<'a> {
    /// The partition's topic.
    pub(crate) topic: &'a str,
    /// The partition.
    pub(crate) partition: i32,
    /// The producer whose transaction the marker ends.
    pub(crate) producer_id: i64,
    /// The producer epoch the marker carries.
    pub(crate) producer_epoch: i16,
    /// COMMIT or ABORT, with the coordinator epoch.
    pub(crate) marker: EndTxnMarker,
    /// The transaction version of the marker (from 2 the leader takes only a producer
    /// epoch newer than the producer's: KIP-890).
    pub(crate) transaction_version: i8,
}

/// A marker appended (or found in the log), to wait for.
struct AppendedMarker {
    partition: crate::topic::Partition,
    /// The offset the high watermark must pass (-1: none).
    last: i64,
    /// The leadership it was appended or found under; None: the current one.
    appended: Option<crate::topic::AppendEpoch>,
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::record::{BatchBuilder, TRANSACTIONAL_BIT};
    use crate::transaction::{
        AddPartitionsRequest, EndTxnRequest, InitProducerIdAnswer, InitProducerIdRequest,
        TxnResult, TxnState,
    };

    /// A leader that takes no marker (as if the broker crashed before writing them).
    struct Unreachable;

    impl MarkerWriter for Unreachable {
        fn write_markers(&self, m: &TxnMarkers) -> Vec<(TopicPartition, Error)> {
            m.partitions
                .iter()
                .map(|tp| (tp.clone(), Error::Timeout("crashed".into())))
                .collect()
        }
    }

    #[test]
    fn a_transaction_prepared_before_a_restart_is_completed_at_open() {
        let dir = tempfile::tempdir().unwrap();
        let broker = Broker::open(dir.path()).unwrap();
        broker.create_topic("t", 1, TopicConfig::new()).unwrap();
        broker.ensure_transaction_state().unwrap();
        let txns = broker.transaction_coordinator();
        let init = InitProducerIdRequest {
            transactional_id: "tx".into(),
            timeout_ms: 60_000,
            expected: None,
        };
        let InitProducerIdAnswer::Ready(p) = txns.init_producer_id(&init, &|| Ok(42)).unwrap()
        else {
            panic!("no producer id");
        };
        txns.add_partitions(&AddPartitionsRequest {
            transactional_id: "tx".into(),
            producer_id: p.producer_id,
            producer_epoch: p.epoch,
            partitions: [("t".to_string(), 0)].into(),
            client_transaction_version: 0,
        })
        .unwrap();
        let part = broker.topic("t").unwrap().partition(0).unwrap();
        let mut b = BatchBuilder::new()
            .producer(p.producer_id, p.epoch, 0)
            .attributes(TRANSACTIONAL_BIT);
        b.push(1, None, Some(b"v"), &[]);
        part.append_idempotent(&b.finish()).unwrap();
        txns.set_marker_writer(Arc::new(Unreachable));
        let end = EndTxnRequest {
            transactional_id: "tx".into(),
            producer_id: p.producer_id,
            producer_epoch: p.epoch,
            result: TxnResult::Commit,
            client_transaction_version: 0,
        };
        txns.end_txn(&end, &|| Ok(43)).unwrap();
        assert_eq!(txns.describe("tx").unwrap().state, TxnState::PrepareCommit);
        assert_eq!(part.log().last_stable_offset().unwrap(), 0, "still open");
        drop(part);
        broker.close().unwrap();

        let broker = Broker::open(dir.path()).unwrap();
        // The markers are sent again in the background (bounded wait).
        let txns = broker.transaction_coordinator();
        for _ in 0..1000 {
            if txns.describe("tx").unwrap().state != TxnState::PrepareCommit {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let m = txns.describe("tx").unwrap();
        assert_eq!(m.state, TxnState::CompleteCommit);
        let part = broker.topic("t").unwrap().partition(0).unwrap();
        assert_eq!(part.log_end_offset(), 2, "the record and its COMMIT marker");
        assert_eq!(part.log().last_stable_offset().unwrap(), 2);
        assert!(!part.log().has_open_transaction(p.producer_id).unwrap());
    }

    /// Writes `marker` of producer 42 at epoch 0 to `topic`-`partition`.
    fn write_one(broker: &Broker, topic: &str, partition: i32, marker: EndTxnMarker) -> Result<()> {
        let write = TxnMarkerWrite {
            topic,
            partition,
            producer_id: 42,
            producer_epoch: 0,
            marker,
            transaction_version: 0,
        };
        let mut results = broker.write_txn_markers(&[write]);
        assert_eq!(results.len(), 1);
        results.remove(0)
    }

    /// The marker batches of `part`, in log order (COMMIT: true).
    pub(crate) fn markers_of(part: &crate::topic::Partition) -> Vec<bool> {
        let slice = part.read(0, 1 << 20).unwrap();
        crate::record::batches(&slice)
            .map(|b| b.unwrap())
            .filter(|b| b.is_control())
            .map(|b| EndTxnMarker::of_batch(&b, "t").unwrap().unwrap().commit)
            .collect()
    }

    /// The coordinator retries a marker whose write it did not hear back about: the
    /// leader answers it without appending it again.
    #[test]
    fn a_retried_marker_is_written_once() {
        let dir = tempfile::tempdir().unwrap();
        let broker = Broker::open(dir.path()).unwrap();
        broker.create_topic("t", 1, TopicConfig::new()).unwrap();
        let part = broker.topic("t").unwrap().partition(0).unwrap();
        let mut b = BatchBuilder::new()
            .producer(42, 0, 0)
            .attributes(TRANSACTIONAL_BIT);
        b.push(1, None, Some(b"v"), &[]);
        part.append_idempotent(&b.finish()).unwrap();
        for _ in 0..2 {
            write_one(&broker, "t", 0, EndTxnMarker::commit(0)).unwrap();
        }
        assert_eq!(markers_of(&part), vec![true]);
        assert_eq!(part.log_end_offset(), 2);
        assert_eq!(part.log().last_stable_offset().unwrap(), 2);
    }

    /// A marker on `__consumer_offsets` appended by a try whose wait failed: the retry
    /// finds no transaction open there, and still makes the offsets committed.
    #[test]
    fn a_retried_offsets_marker_commits_the_offsets_once() {
        use crate::coordinator::{CommitOffset, TxnOffsetCommitRequest};
        let dir = tempfile::tempdir().unwrap();
        let broker = Broker::open(dir.path()).unwrap();
        broker.create_topic("in", 1, TopicConfig::new()).unwrap();
        let groups = broker.group_coordinator();
        let request = TxnOffsetCommitRequest {
            group_id: "g".into(),
            producer_id: 42,
            producer_epoch: 0,
            generation_id: -1,
            member_id: String::new(),
            group_instance_id: None,
            offsets: vec![CommitOffset {
                topic: "in".into(),
                partition: 0,
                offset: 10,
                leader_epoch: -1,
                metadata: None,
                commit_timestamp: None,
            }],
        };
        for r in groups.txn_offset_commit(request).unwrap() {
            assert!(r.result.is_ok(), "{r:?}");
        }
        let fetched = || {
            groups
                .offset_fetch("g", Some(&[("in".to_string(), 0)]))
                .unwrap()[0]
                .offset
        };
        assert_eq!(fetched(), -1, "pending");
        let p = groups.partition_of("g");
        let offsets = broker.topic(OFFSETS_TOPIC).unwrap().partition(p).unwrap();
        assert!(offsets.log().has_open_transaction(42).unwrap());
        // The first try's append; its acks=all wait failed before the group
        // coordinator heard of it.
        offsets
            .log()
            .append_end_txn_marker(42, 0, EndTxnMarker::commit(0), 1)
            .unwrap();
        assert_eq!(fetched(), -1);
        let end = offsets.log_end_offset();
        write_one(&broker, OFFSETS_TOPIC, p, EndTxnMarker::commit(0)).unwrap();
        assert_eq!(fetched(), 10);
        assert_eq!(offsets.log_end_offset(), end, "not appended again");
    }
}
