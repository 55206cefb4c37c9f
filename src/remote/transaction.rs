//! The transactional side of the [`Producer`](crate::Producer) over the network
//! (Kafka's `transactional.id`): the calls Kafka's producer makes to the transaction
//! coordinator of its id (found with FindCoordinator, key type TRANSACTION) and to the
//! group coordinator of a consume-transform-produce loop, with the versions negotiated
//! with each broker.
//!
//! `init_transactions` is InitProducerId with the transactional id (which bumps the
//! id's epoch and so fences older instances); a partition joins the open transaction
//! with AddPartitionsToTxn before its first batch is sent (the sender numbers the
//! transactional batches with the producer id and epoch got here);
//! `send_offsets_to_transaction` is AddOffsetsToTxn to the transaction coordinator and
//! TxnOffsetCommit to the group's coordinator; a commit or abort is EndTxn, after the
//! batches are sent (commit) or dropped (abort).
//!
//! Transaction version 2 (KIP-890 part 2), as Kafka 4.0's producer uses it: when the
//! coordinator has finalized the feature `transaction.version` at 2 or more and answers
//! EndTxn v5 (checked at each `begin_transaction`), every EndTxn bumps the epoch and
//! answers the producer id and epoch of the next transaction, so a batch or marker
//! delayed from an earlier transaction is fenced; partitions and groups join the
//! transaction without AddPartitionsToTxn or AddOffsetsToTxn, through Produce v12 and
//! TxnOffsetCommit v5 (the partition leader and the group coordinator add them).
//! Against any other coordinator the producer keeps transaction version 0. A coordinator that moved
//! (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, unreachable) is found again, one that is
//! busy (COORDINATOR_LOAD_IN_PROGRESS, CONCURRENT_TRANSACTIONS) is asked again, for at
//! most [`MAX_BLOCK`] (Kafka's `max.block.ms` default). PRODUCER_FENCED (or
//! INVALID_PRODUCER_EPOCH) ends the producer with [`Error::ProducerFenced`]; another
//! failure inside a transaction makes it abortable ([`Error::TransactionAbortable`]).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::RangeInclusive;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, EndTxnRequest, FindCoordinatorRequest,
    GroupId, InitProducerIdRequest, ProducerId, TopicName, TransactionalId, TxnOffsetCommitRequest,
};
use kafka_protocol::protocol::{Message, Request, StrBytes};
use parking_lot::Mutex;

use super::cluster::{Cluster, api_version, unreachable};
use super::partition::{PRODUCE, PRODUCE_BEFORE_TRANSACTION_V2};
use crate::error::{ApiError, Error, ErrorCode, Resource, Result};
use crate::producer::{ConsumerGroupMetadata, transaction_timeout_ms};

/// How long a call waits out a coordinator that moved or is busy.
const MAX_BLOCK: Duration = Duration::from_secs(60);
/// FindCoordinator versions: 1 (the first with a key type) to 6.
const FIND_COORDINATOR: RangeInclusive<i16> = 1..=6;
/// InitProducerId versions: 0 to 5 (3 and up carry the producer id and epoch an abort
/// after a failed batch bumps).
pub(super) const INIT_PRODUCER_ID: RangeInclusive<i16> = 0..=5;
/// AddPartitionsToTxn versions: 0 to 3, the client's (4 and up are the brokers').
const ADD_PARTITIONS_TO_TXN: RangeInclusive<i16> = 0..=3;
/// AddOffsetsToTxn versions: 0 to 4.
const ADD_OFFSETS_TO_TXN: RangeInclusive<i16> = 0..=4;
/// TxnOffsetCommit versions: 0 to 4 (5 belongs to transaction version 2).
const TXN_OFFSET_COMMIT: RangeInclusive<i16> = 0..=4;
/// EndTxn versions: 0 to 4 (5 bumps the epoch on every end: transaction version 2).
const END_TXN: RangeInclusive<i16> = 0..=4;
/// EndTxn versions of transaction version 2.
const END_TXN_V2: RangeInclusive<i16> = 5..=5;
/// TxnOffsetCommit versions of transaction version 2 (v5 adds the group's partition).
const TXN_OFFSET_COMMIT_V2: RangeInclusive<i16> = 5..=5;
/// Kafka's feature of the transaction protocol's version, and the level of KIP-890
/// part 2.
const TRANSACTION_VERSION: &str = "transaction.version";
const EPOCH_BUMP_LEVEL: i16 = 2;

/// FindCoordinator's key types.
const GROUP: i8 = 0;
const TRANSACTION: i8 = 1;

/// Kafka's codes the transactional calls handle.
const CONCURRENT_TRANSACTIONS: i16 = 51;
const INVALID_PRODUCER_EPOCH: i16 = 47;
const PRODUCER_FENCED: i16 = 90;
const OPERATION_NOT_ATTEMPTED: i16 = 55;

/// Where the producer is in Kafka's transaction state machine.
#[derive(Debug, Clone)]
enum Phase {
    /// `init_transactions` not called yet.
    Uninitialized,
    /// No transaction open.
    Ready,
    /// Between `begin_transaction` and its commit or abort.
    InTransaction,
    /// The open transaction failed: only `abort_transaction` goes on.
    Abortable(Error),
    /// Fenced (or another fatal error): the producer can do nothing more.
    Fatal(Error),
}

/// The transaction's state, locked for each transactional call (a send that adds a
/// partition, a commit while it flushes).
struct Txn {
    phase: Phase,
    /// The partitions added to the open transaction, by topic (looked up by `&str`
    /// for every record sent, so a send allocates nothing).
    partitions: BTreeMap<String, BTreeSet<i32>>,
    /// The groups whose offsets were added to the open transaction.
    groups: BTreeSet<String>,
    /// A batch of this epoch failed: its sequences may be out of step, so the abort
    /// bumps the epoch (KIP-360).
    needs_bump: bool,
    /// The open transaction uses transaction version 2 (KIP-890 part 2).
    version_2: bool,
}

/// The transactional side of a producer over the network.
pub(super) struct Transactions {
    cluster: Cluster,
    transactional_id: String,
    timeout_ms: i32,
    txn: Mutex<Txn>,
    /// The producer id and epoch, read by the sender for each batch (none before
    /// `init_transactions`).
    ids: Mutex<Option<(i64, i16)>>,
    /// The open transaction's `version_2`, read by the sender for each Produce
    /// (without the transaction's lock, which a send holds while it queues).
    produce_version_2: AtomicBool,
    /// The coordinators found, by key type and key.
    coordinators: Mutex<HashMap<(i8, String), String>>,
}

impl Transactions {
    pub(super) fn new(
        cluster: Cluster,
        transactional_id: String,
        timeout: Duration,
    ) -> Result<Transactions> {
        let timeout_ms = transaction_timeout_ms(&transactional_id, timeout)?;
        Ok(Transactions {
            cluster,
            transactional_id,
            timeout_ms,
            txn: Mutex::new(Txn {
                phase: Phase::Uninitialized,
                partitions: BTreeMap::new(),
                groups: BTreeSet::new(),
                needs_bump: false,
                version_2: false,
            }),
            ids: Mutex::new(None),
            produce_version_2: AtomicBool::new(false),
            coordinators: Mutex::new(HashMap::new()),
        })
    }

    pub(super) fn transactional_id(&self) -> &str {
        &self.transactional_id
    }

    /// The Produce versions of the open transaction's batches: v12 only with
    /// transaction version 2, whose leaders add the partition themselves.
    pub(super) fn produce_versions(&self) -> RangeInclusive<i16> {
        if self.produce_version_2.load(Ordering::Acquire) {
            PRODUCE
        } else {
            PRODUCE_BEFORE_TRANSACTION_V2
        }
    }

    /// The producer id and epoch the sender numbers batches with.
    pub(super) fn ids(&self) -> Option<(i64, i16)> {
        *self.ids.lock()
    }

    fn current_ids(&self) -> (i64, i16) {
        self.ids().unwrap_or((-1, -1))
    }

    fn invalid(&self, operation: &'static str, state: &'static str) -> Error {
        Error::InvalidProducerState {
            transactional_id: self.transactional_id.clone(),
            operation,
            state,
        }
    }

    fn fenced(&self) -> Error {
        let (producer_id, epoch) = self.current_ids();
        Error::ProducerFenced {
            transactional_id: self.transactional_id.clone(),
            producer_id,
            epoch,
        }
    }

    /// The error a failed batch of the open transaction stands for: fencing, or the
    /// transaction to abort.
    pub(super) fn batch_failure(&self, e: Error) -> Error {
        match e {
            Error::Api(a) if matches!(a.code.code(), PRODUCER_FENCED | INVALID_PRODUCER_EPOCH) => {
                self.fenced()
            }
            e @ (Error::ProducerFenced { .. } | Error::TransactionAbortable { .. }) => e,
            e => Error::TransactionAbortable {
                transactional_id: self.transactional_id.clone(),
                source: Box::new(e),
            },
        }
    }

    /// A failure inside the open transaction: fencing ends the producer, anything else
    /// makes the transaction abortable.
    fn fail(&self, txn: &mut Txn, e: Error) -> Error {
        let err = self.batch_failure(e);
        txn.phase = match &err {
            Error::ProducerFenced { .. } => Phase::Fatal(err.clone()),
            _ => Phase::Abortable(err.clone()),
        };
        err
    }

    /// Refuses a call unless the producer is in a transaction that can go on.
    fn check_in_transaction(&self, txn: &Txn, operation: &'static str) -> Result<()> {
        match &txn.phase {
            Phase::InTransaction => Ok(()),
            Phase::Abortable(e) | Phase::Fatal(e) => Err(e.clone()),
            Phase::Uninitialized => Err(self.invalid(operation, "before init_transactions")),
            Phase::Ready => Err(self.invalid(operation, "outside a transaction")),
        }
    }

    /// The refusal `code` of `api` at `broker` about `resource`: fencing as
    /// [`Error::ProducerFenced`], the rest as [`Error::Api`].
    fn refusal(
        &self,
        api: String,
        broker: &str,
        resource: Resource,
        code: i16,
        message: Option<&StrBytes>,
    ) -> Error {
        if matches!(code, PRODUCER_FENCED | INVALID_PRODUCER_EPOCH) {
            return self.fenced();
        }
        ApiError {
            api,
            broker: broker.to_string(),
            resource,
            code: ErrorCode::from_code(code),
            message: message
                .map(|m| m.to_string())
                .filter(|m| !m.trim().is_empty()),
        }
        .into()
    }

    fn id_resource(&self) -> Resource {
        Resource::TransactionalId(self.transactional_id.clone())
    }

    /// The coordinator of `key` (FindCoordinator with `key_type`), as found last.
    fn coordinator(&self, key_type: i8, key: &str) -> Result<Option<String>> {
        let cache_key = (key_type, key.to_string());
        if let Some(addr) = self.coordinators.lock().get(&cache_key) {
            return Ok(Some(addr.clone()));
        }
        let (broker, version, r) = self.cluster.call_any(FIND_COORDINATOR, |version| {
            let request = FindCoordinatorRequest::default().with_key_type(key_type);
            if version >= 4 {
                request.with_coordinator_keys(vec![StrBytes::from_string(key.to_string())])
            } else {
                request.with_key(StrBytes::from_string(key.to_string()))
            }
        })?;
        let (code, message, node) = if version >= 4 {
            match r.coordinators.first() {
                Some(c) => (
                    c.error_code,
                    c.error_message.clone(),
                    (c.host.to_string(), c.port),
                ),
                None => (
                    ErrorCode::COORDINATOR_NOT_AVAILABLE.code(),
                    None,
                    (String::new(), 0),
                ),
            }
        } else {
            (
                r.error_code,
                r.error_message.clone(),
                (r.host.to_string(), r.port),
            )
        };
        if code != 0 {
            let e = self.refusal(
                api_version::<FindCoordinatorRequest>(version),
                &broker,
                coordinator_resource(key_type, key),
                code,
                message.as_ref(),
            );
            return if busy(code) { Ok(None) } else { Err(e) };
        }
        let addr = if node.0.contains(':') {
            format!("[{}]:{}", node.0, node.1)
        } else {
            format!("{}:{}", node.0, node.1)
        };
        self.coordinators.lock().insert(cache_key, addr.clone());
        Ok(Some(addr))
    }

    fn forget_coordinator(&self, key_type: i8, key: &str) {
        self.coordinators
            .lock()
            .remove(&(key_type, key.to_string()));
    }

    /// Sends the request `build` makes to the coordinator of `key` until the code
    /// `code_of` reads from the answer is not one of a coordinator that moved or is
    /// busy (finding the coordinator again after it moved), for at most
    /// [`MAX_BLOCK`]; returns the coordinator's address, the version and the answer.
    fn on_coordinator<R: Request + Message>(
        &self,
        key_type: i8,
        key: &str,
        ours: RangeInclusive<i16>,
        build: impl Fn(i16) -> R,
        code_of: impl Fn(&R::Response) -> i16,
    ) -> Result<(String, i16, R::Response)> {
        let deadline = Instant::now() + MAX_BLOCK;
        let mut backoff = Duration::from_millis(5);
        loop {
            let last = match self.coordinator(key_type, key) {
                Ok(Some(addr)) => match self.cluster.call(&addr, ours.clone(), &build) {
                    Ok((version, r)) => {
                        let code = code_of(&r);
                        if !busy(code) {
                            return Ok((addr, version, r));
                        }
                        if moved(code) {
                            self.forget_coordinator(key_type, key);
                        }
                        self.refusal(
                            api_version::<R>(version),
                            &addr,
                            coordinator_resource(key_type, key),
                            code,
                            None,
                        )
                    }
                    Err(e) if unreachable(&e) => {
                        self.forget_coordinator(key_type, key);
                        e
                    }
                    Err(e) => return Err(e),
                },
                Ok(None) => Error::Timeout(format!(
                    "no coordinator of {} is available",
                    coordinator_resource(key_type, key)
                )),
                Err(e) if unreachable(&e) => e,
                Err(e) => return Err(e),
            };
            if Instant::now() + backoff > deadline {
                return Err(last);
            }
            std::thread::sleep(backoff);
            backoff = (backoff * 2).min(Duration::from_millis(200));
        }
    }

    /// InitProducerId with the transactional id; `expected`: the producer id and epoch
    /// to bump (after a failed batch), checked by the coordinator.
    fn init_producer_id(&self, expected: Option<(i64, i16)>) -> Result<(i64, i16)> {
        let (pid, epoch) = expected.unwrap_or((-1, -1));
        let (addr, version, r) = self.on_coordinator(
            TRANSACTION,
            &self.transactional_id,
            INIT_PRODUCER_ID,
            |_| {
                InitProducerIdRequest::default()
                    .with_transactional_id(Some(TransactionalId(StrBytes::from_string(
                        self.transactional_id.clone(),
                    ))))
                    .with_transaction_timeout_ms(self.timeout_ms)
                    .with_producer_id(ProducerId(pid))
                    .with_producer_epoch(epoch)
            },
            |r| r.error_code,
        )?;
        if r.error_code != 0 {
            return Err(self.refusal(
                api_version::<InitProducerIdRequest>(version),
                &addr,
                self.id_resource(),
                r.error_code,
                None,
            ));
        }
        Ok((r.producer_id.0, r.producer_epoch))
    }

    /// Registers the transactional id with its coordinator (InitProducerId): fences
    /// older instances and ends a transaction one left open.
    pub(super) fn init_transactions(&self) -> Result<()> {
        let mut txn = self.txn.lock();
        match &txn.phase {
            Phase::Uninitialized => {}
            Phase::Fatal(e) => return Err(e.clone()),
            _ => return Err(self.invalid("init_transactions", "twice")),
        }
        match self.init_producer_id(None) {
            Ok(ids) => {
                *self.ids.lock() = Some(ids);
                txn.phase = Phase::Ready;
                Ok(())
            }
            Err(e @ Error::ProducerFenced { .. }) => {
                txn.phase = Phase::Fatal(e.clone());
                Err(e)
            }
            Err(e) => Err(e),
        }
    }

    pub(super) fn begin_transaction(&self) -> Result<()> {
        let mut txn = self.txn.lock();
        match &txn.phase {
            Phase::Ready => {
                txn.version_2 = self.coordinator_has_version_2();
                self.produce_version_2
                    .store(txn.version_2, Ordering::Release);
                txn.phase = Phase::InTransaction;
                Ok(())
            }
            Phase::Fatal(e) => Err(e.clone()),
            Phase::Uninitialized => {
                Err(self.invalid("begin a transaction", "before init_transactions"))
            }
            Phase::InTransaction | Phase::Abortable(_) => {
                Err(self.invalid("begin a transaction", "while one is open"))
            }
        }
    }

    /// Before a record of `topic`/`partition` is queued: refuses it outside a
    /// transaction that can go on, and adds the partition to the transaction
    /// (AddPartitionsToTxn) if it is new to it. Runs `queue` under the transaction's
    /// lock, so a commit cannot come between; `queue` refuses the record with the
    /// first failed batch of the transaction (which makes it abortable) when there is
    /// one, looked at under the lock it queues with, and so does `failed` (the same
    /// look on its own) before a partition is added with AddPartitionsToTxn.
    pub(super) fn before_send<T>(
        &self,
        topic: &str,
        partition: i32,
        failed: impl FnOnce() -> Option<Error>,
        queue: impl FnOnce() -> Result<T>,
    ) -> Result<T> {
        let mut txn = self.txn.lock();
        self.check_in_transaction(&txn, "send")?;
        let added = txn
            .partitions
            .get(topic)
            .is_some_and(|p| p.contains(&partition));
        if !added {
            // Transaction version 2: the partition's leader adds it (Produce v12).
            if !txn.version_2 {
                if let Some(e) = failed() {
                    return Err(self.fail(&mut txn, e));
                }
                if let Err(e) = self.add_partition(topic, partition) {
                    return Err(self.fail(&mut txn, e));
                }
            }
            txn.partitions
                .entry(topic.to_string())
                .or_default()
                .insert(partition);
        }
        queue().map_err(|e| self.fail(&mut txn, e))
    }

    fn add_partition(&self, topic: &str, partition: i32) -> Result<()> {
        let (pid, epoch) = self.current_ids();
        let (addr, version, r) = self.on_coordinator(
            TRANSACTION,
            &self.transactional_id,
            ADD_PARTITIONS_TO_TXN,
            |_| {
                AddPartitionsToTxnRequest::default()
                    .with_v3_and_below_transactional_id(TransactionalId(StrBytes::from_string(
                        self.transactional_id.clone(),
                    )))
                    .with_v3_and_below_producer_id(ProducerId(pid))
                    .with_v3_and_below_producer_epoch(epoch)
                    .with_v3_and_below_topics(vec![
                        AddPartitionsToTxnTopic::default()
                            .with_name(TopicName(StrBytes::from_string(topic.to_string())))
                            .with_partitions(vec![partition]),
                    ])
            },
            |r| {
                r.results_by_topic_v3_and_below
                    .iter()
                    .flat_map(|t| t.results_by_partition.iter())
                    .map(|p| p.partition_error_code)
                    .find(|c| *c != 0 && *c != OPERATION_NOT_ATTEMPTED)
                    .unwrap_or(r.error_code)
            },
        )?;
        let code = r
            .results_by_topic_v3_and_below
            .iter()
            .flat_map(|t| t.results_by_partition.iter())
            .map(|p| p.partition_error_code)
            .find(|c| *c != 0)
            .unwrap_or(r.error_code);
        if code != 0 {
            return Err(self.refusal(
                api_version::<AddPartitionsToTxnRequest>(version),
                &addr,
                Resource::Partition(crate::error::TopicPartition::new(topic, partition)),
                code,
                None,
            ));
        }
        Ok(())
    }

    /// AddOffsetsToTxn of the group, then TxnOffsetCommit of `offsets` (topic,
    /// partition, next offset to read) to the group's coordinator with the member's
    /// identity.
    pub(super) fn send_offsets(
        &self,
        offsets: &[(String, i32, i64)],
        group: &ConsumerGroupMetadata,
    ) -> Result<()> {
        let mut txn = self.txn.lock();
        self.check_in_transaction(&txn, "send offsets")?;
        // Transaction version 2: the group's coordinator adds it (TxnOffsetCommit v5).
        if !txn.groups.contains(&group.group_id)
            && !txn.version_2
            && let Err(e) = self.add_offsets(&group.group_id)
        {
            return Err(self.fail(&mut txn, e));
        }
        txn.groups.insert(group.group_id.clone());
        let versions = if txn.version_2 {
            TXN_OFFSET_COMMIT_V2
        } else {
            TXN_OFFSET_COMMIT
        };
        self.txn_offset_commit(offsets, group, versions)
            .map_err(|e| self.fail(&mut txn, e))
    }

    fn add_offsets(&self, group_id: &str) -> Result<()> {
        let (pid, epoch) = self.current_ids();
        let (addr, version, r) = self.on_coordinator(
            TRANSACTION,
            &self.transactional_id,
            ADD_OFFSETS_TO_TXN,
            |_| {
                AddOffsetsToTxnRequest::default()
                    .with_transactional_id(TransactionalId(StrBytes::from_string(
                        self.transactional_id.clone(),
                    )))
                    .with_producer_id(ProducerId(pid))
                    .with_producer_epoch(epoch)
                    .with_group_id(GroupId(StrBytes::from_string(group_id.to_string())))
            },
            |r| r.error_code,
        )?;
        if r.error_code != 0 {
            return Err(self.refusal(
                api_version::<AddOffsetsToTxnRequest>(version),
                &addr,
                self.id_resource(),
                r.error_code,
                None,
            ));
        }
        Ok(())
    }

    fn txn_offset_commit(
        &self,
        offsets: &[(String, i32, i64)],
        group: &ConsumerGroupMetadata,
        versions: RangeInclusive<i16>,
    ) -> Result<()> {
        let (pid, epoch) = self.current_ids();
        let mut topics: Vec<TxnOffsetCommitRequestTopic> = Vec::new();
        for (topic, partition, offset) in offsets {
            let p = TxnOffsetCommitRequestPartition::default()
                .with_partition_index(*partition)
                .with_committed_offset(*offset)
                .with_committed_leader_epoch(-1);
            match topics.iter_mut().find(|t| t.name.0.as_str() == topic) {
                Some(t) => t.partitions.push(p),
                None => topics.push(
                    TxnOffsetCommitRequestTopic::default()
                        .with_name(TopicName(StrBytes::from_string(topic.clone())))
                        .with_partitions(vec![p]),
                ),
            }
        }
        let (addr, version, r) = self.on_coordinator(
            GROUP,
            &group.group_id,
            versions,
            |version| {
                let mut request = TxnOffsetCommitRequest::default()
                    .with_transactional_id(TransactionalId(StrBytes::from_string(
                        self.transactional_id.clone(),
                    )))
                    .with_group_id(GroupId(StrBytes::from_string(group.group_id.clone())))
                    .with_producer_id(ProducerId(pid))
                    .with_producer_epoch(epoch)
                    .with_topics(topics.clone());
                if version >= 3 {
                    request = request
                        .with_generation_id(group.generation_id)
                        .with_member_id(StrBytes::from_string(group.member_id.clone()))
                        .with_group_instance_id(
                            group.group_instance_id.clone().map(StrBytes::from_string),
                        );
                }
                request
            },
            |r| first_partition_code(r).map_or(0, |(_, _, c)| c),
        )?;
        if let Some((topic, partition, code)) = first_partition_code(&r) {
            return Err(self.refusal(
                api_version::<TxnOffsetCommitRequest>(version),
                &addr,
                Resource::Partition(crate::error::TopicPartition::new(&topic, partition)),
                code,
                None,
            ));
        }
        Ok(())
    }

    /// Commits the open transaction: `flush` sends its batches (an error makes the
    /// transaction abortable), then EndTxn(commit).
    pub(super) fn commit(&self, flush: impl FnOnce() -> Result<()>) -> Result<()> {
        let mut txn = self.txn.lock();
        self.check_in_transaction(&txn, "commit the transaction")?;
        if let Err(e) = flush() {
            txn.needs_bump = true;
            return Err(self.fail(&mut txn, e));
        }
        if let Err(e) = self.end(&mut txn, true) {
            return Err(self.fail(&mut txn, e));
        }
        txn.phase = Phase::Ready;
        Ok(())
    }

    /// Aborts the open transaction: `drop_batches` drops the batches not sent and
    /// waits for those being sent (returning whether one of the transaction failed),
    /// then EndTxn(abort); after a failed batch the epoch is bumped (KIP-360), so that
    /// the next transaction starts its sequences afresh.
    pub(super) fn abort(&self, drop_batches: impl FnOnce() -> bool) -> Result<()> {
        let mut txn = self.txn.lock();
        match &txn.phase {
            Phase::InTransaction | Phase::Abortable(_) => {}
            Phase::Fatal(e) => return Err(e.clone()),
            Phase::Uninitialized => {
                return Err(self.invalid("abort the transaction", "before init_transactions"));
            }
            Phase::Ready => {
                return Err(self.invalid("abort the transaction", "outside a transaction"));
            }
        }
        if drop_batches() {
            txn.needs_bump = true;
        }
        let bumped = match self.end(&mut txn, false) {
            Ok(bumped) => bumped,
            Err(e) => {
                if let Error::ProducerFenced { .. } = e {
                    txn.phase = Phase::Fatal(e.clone());
                }
                return Err(e);
            }
        };
        // EndTxn v5 bumped the epoch already.
        if std::mem::take(&mut txn.needs_bump) && !bumped {
            match self.init_producer_id(self.ids()) {
                Ok(ids) => *self.ids.lock() = Some(ids),
                Err(e) => {
                    txn.phase = Phase::Fatal(e.clone());
                    return Err(e);
                }
            }
        }
        txn.phase = Phase::Ready;
        Ok(())
    }

    /// EndTxn (nothing to do if no partition or group was added); returns whether it
    /// bumped the epoch (transaction version 2: the answer's producer id and epoch are
    /// the next transaction's, and the sender starts its sequences afresh with them).
    fn end(&self, txn: &mut Txn, commit: bool) -> Result<bool> {
        if txn.partitions.is_empty() && txn.groups.is_empty() {
            return Ok(false);
        }
        let (pid, epoch) = self.current_ids();
        let (addr, version, r) = self.on_coordinator(
            TRANSACTION,
            &self.transactional_id,
            if txn.version_2 { END_TXN_V2 } else { END_TXN },
            |_| {
                EndTxnRequest::default()
                    .with_transactional_id(TransactionalId(StrBytes::from_string(
                        self.transactional_id.clone(),
                    )))
                    .with_producer_id(ProducerId(pid))
                    .with_producer_epoch(epoch)
                    .with_committed(commit)
            },
            |r| r.error_code,
        )?;
        if r.error_code != 0 {
            return Err(self.refusal(
                api_version::<EndTxnRequest>(version),
                &addr,
                self.id_resource(),
                r.error_code,
                None,
            ));
        }
        txn.partitions.clear();
        txn.groups.clear();
        let bumped = version >= *END_TXN_V2.start();
        if bumped {
            *self.ids.lock() = Some((r.producer_id.0, r.producer_epoch));
        }
        Ok(bumped)
    }

    /// Whether the transaction coordinator speaks transaction version 2: it finalized
    /// `transaction.version` at 2 or more and answers EndTxn v5 (as Kafka 4.0's
    /// producer decides). A coordinator not found now means version 0, which every
    /// coordinator takes.
    fn coordinator_has_version_2(&self) -> bool {
        let Ok(Some(addr)) = self.coordinator(TRANSACTION, &self.transactional_id) else {
            return false;
        };
        let level = self
            .cluster
            .finalized_feature(&addr, TRANSACTION_VERSION)
            .ok()
            .flatten()
            .unwrap_or(0);
        level >= EPOCH_BUMP_LEVEL
            && self
                .cluster
                .negotiated::<EndTxnRequest>(&addr, END_TXN_V2)
                .is_ok()
    }
}

/// The first partition of a TxnOffsetCommit answer with an error, and its code.
fn first_partition_code(
    r: &kafka_protocol::messages::TxnOffsetCommitResponse,
) -> Option<(String, i32, i16)> {
    r.topics.iter().find_map(|t| {
        t.partitions
            .iter()
            .find(|p| p.error_code != 0)
            .map(|p| (t.name.0.to_string(), p.partition_index, p.error_code))
    })
}

/// What a coordinator of `key_type` is about, for errors.
fn coordinator_resource(key_type: i8, key: &str) -> Resource {
    match key_type {
        GROUP => Resource::Group(key.to_string()),
        _ => Resource::TransactionalId(key.to_string()),
    }
}

/// True for the codes of a coordinator that moved: find it again.
fn moved(code: i16) -> bool {
    let code = ErrorCode::from_code(code);
    code == ErrorCode::NOT_COORDINATOR || code == ErrorCode::COORDINATOR_NOT_AVAILABLE
}

/// True for the codes after which the same request is sent again (after finding the
/// coordinator again if it moved).
fn busy(code: i16) -> bool {
    moved(code)
        || ErrorCode::from_code(code) == ErrorCode::COORDINATOR_LOAD_IN_PROGRESS
        || code == CONCURRENT_TRANSACTIONS
}
