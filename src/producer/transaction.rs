//! The transactional producer (Kafka's `transactional.id`): its state and the calls it
//! makes to the broker's transaction coordinator — the same `TransactionCoordinator`,
//! with the same rules, that the network server's InitProducerId, AddPartitionsToTxn,
//! AddOffsetsToTxn, EndTxn and TxnOffsetCommit handlers drive.
//!
//! Records of a transaction do not go through the per-thread lanes: sequence numbers
//! are per partition of the producer, so one batch per partition is filled under the
//! transaction's lock and appended as a transactional batch (producer id, epoch,
//! sequence) through the partition's idempotent path, which refuses a fenced epoch.
//! A partition joins the transaction (AddPartitionsToTxn) on its first record.
//!
//! The producer follows the finalized `transaction.version`, read at each
//! `begin_transaction` as Kafka's producer reads it (a single node finalizes 2; a
//! cluster node takes its metadata image's level). At 2 it is Kafka's producer of
//! transaction version 2 (KIP-890 part 2): every commit or abort bumps the epoch at
//! the coordinator, and the next transaction uses the producer id and epoch EndTxn
//! answers (sequences from 0), so a batch or marker delayed from an earlier
//! transaction is fenced; partitions and the group's offsets join the transaction as
//! a partition leader and a group coordinator add them for such a client. Below 2 the
//! epoch stays from one transaction to the next (transaction versions 0 and 1).

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::accumulator::Appended;
use crate::broker::Broker;
use crate::coordinator::{CommitOffset, TxnOffsetCommitRequest};
use crate::error::{Error, Result, TxnError, TxnState};
use crate::record::{BatchBuilder, Compression, TRANSACTIONAL_BIT};
use crate::storage::AppendOutcome;
use crate::topic::{Partition, Topic};
use crate::transaction::{
    AddPartitionsRequest, EPOCH_BUMP_TRANSACTION_VERSION, EndTxnRequest, InitProducerIdAnswer,
    InitProducerIdRequest, ProducerIdAndEpoch, TxnResult,
};

/// How long a call waits out a busy coordinator (CONCURRENT_TRANSACTIONS, loading) or
/// the markers of a commit or abort (Kafka's `max.block.ms` default).
const MAX_BLOCK: Duration = Duration::from_secs(60);

/// The consumer group a consume-transform-produce loop commits its offsets to, with
/// the consuming member's identity, so that the group coordinator refuses offsets of
/// a member that lost its partitions (Kafka's `ConsumerGroupMetadata`, KIP-447).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerGroupMetadata {
    /// The group id.
    pub group_id: String,
    /// The member's generation (-1: not checked).
    pub generation_id: i32,
    /// The member id ("": not checked).
    pub member_id: String,
    /// The member's static membership id, if any.
    pub group_instance_id: Option<String>,
}

impl ConsumerGroupMetadata {
    /// The metadata of `group_id` without a member (generation and member not checked).
    pub fn new(group_id: impl Into<String>) -> Self {
        ConsumerGroupMetadata {
            group_id: group_id.into(),
            generation_id: -1,
            member_id: String::new(),
            group_instance_id: None,
        }
    }
}

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

/// One partition the transaction writes to: its batch, reused from one batch to the
/// next (no allocation per record or per batch), and its sequence.
struct Slot {
    /// The partition the open batch goes to (looked up again as each batch opens).
    partition: Partition,
    /// The partition is in the open transaction (AddPartitionsToTxn answered).
    added: bool,
    /// The next sequence (for the current producer id and epoch).
    sequence: i32,
    /// The open batch; empty when none is open.
    builder: BatchBuilder,
    /// The builder carries the producer id, epoch, `sequence` and the transactional
    /// bit (after a successful append it advances its base sequence by itself);
    /// false once any of them changed or an append failed.
    stamped: bool,
    /// When the open batch's first record arrived (for `linger.ms`).
    opened: Instant,
}

/// The partitions of one topic the producer wrote to, by index.
struct TopicSlots {
    /// The topic as last sent to (compared by identity on each record; replaced, the
    /// slots kept, when the topic of that name is another one).
    topic: Topic,
    slots: Vec<Option<Slot>>,
}

struct State {
    phase: Phase,
    ids: ProducerIdAndEpoch,
    /// Every topic written to, in the order first written.
    topics: Vec<TopicSlots>,
    /// The index in `topics` of each topic's name.
    by_name: HashMap<Box<str>, usize>,
    /// The topic of the last record.
    last: usize,
    /// The partitions added to the open transaction: index in `topics`, partition.
    added: Vec<(usize, usize)>,
    /// The groups whose offsets partition was added to the open transaction.
    groups: BTreeSet<String>,
    /// An append of this epoch failed: sequences may be out of step, so the abort
    /// bumps the epoch (KIP-360).
    needs_bump: bool,
    /// The client transaction version of the open transaction (read from the
    /// finalized `transaction.version` at its begin): 2 bumps the epoch at its end.
    version: i16,
}

impl State {
    /// Every slot, in order.
    fn slots_mut(&mut self) -> impl Iterator<Item = &mut Slot> {
        self.topics
            .iter_mut()
            .flat_map(|t| t.slots.iter_mut().flatten())
    }

    /// The slots with an open batch: index in `topics` and partition.
    fn open(&self) -> impl Iterator<Item = (usize, usize, &Slot)> {
        self.topics.iter().enumerate().flat_map(|(t, ts)| {
            ts.slots
                .iter()
                .enumerate()
                .filter_map(move |(p, s)| s.as_ref().map(|s| (t, p, s)))
                .filter(|(_, _, s)| !s.builder.is_empty())
        })
    }

    /// A new producer id or epoch: every partition's sequence starts again at 0.
    fn reset_sequences(&mut self) {
        for slot in self.slots_mut() {
            slot.sequence = 0;
            slot.stamped = false;
        }
    }

    /// The index of `topic` in `topics` (added if new).
    #[inline]
    fn topic_index(&mut self, topic: &Topic) -> usize {
        match self.topics.get(self.last) {
            Some(ts) if Arc::ptr_eq(&ts.topic.inner, &topic.inner) => self.last,
            _ => self.find_topic(topic),
        }
    }

    #[cold]
    fn find_topic(&mut self, topic: &Topic) -> usize {
        let i = match self.by_name.get(topic.name()) {
            Some(&i) => {
                let known = &mut self.topics[i].topic;
                if !Arc::ptr_eq(&known.inner, &topic.inner) {
                    // Deleted and created again: the same name, so the same sequences.
                    *known = topic.clone();
                }
                i
            }
            None => {
                self.topics.push(TopicSlots {
                    topic: topic.clone(),
                    slots: Vec::new(),
                });
                self.by_name
                    .insert(topic.name().into(), self.topics.len() - 1);
                self.topics.len() - 1
            }
        };
        self.last = i;
        i
    }
}

/// A record's batch, once appended, and the record's index in it.
pub(crate) type Placed = (Appended, i32);

/// The transactional side of a producer.
pub(crate) struct TxnProducer {
    broker: Broker,
    transactional_id: String,
    timeout_ms: i32,
    batch_size: usize,
    compression: Compression,
    state: Mutex<State>,
}

/// Checks a producer's `transactional.id` (not empty) and `transaction.timeout.ms`
/// (in milliseconds, as InitProducerId carries it: an `i32`), in process and over the
/// network alike; returns the timeout in milliseconds.
pub(crate) fn transaction_timeout_ms(transactional_id: &str, timeout: Duration) -> Result<i32> {
    if transactional_id.is_empty() {
        return Err(Error::InvalidConfig {
            key: "transactional.id".into(),
            reason: "must not be empty".into(),
        });
    }
    i32::try_from(timeout.as_millis()).map_err(|_| Error::InvalidConfig {
        key: "transaction.timeout.ms".into(),
        reason: format!("{timeout:?} is too long"),
    })
}

impl TxnProducer {
    pub(crate) fn new(
        broker: Broker,
        transactional_id: String,
        timeout: Duration,
        batch_size: usize,
        compression: Compression,
    ) -> Result<Self> {
        let timeout_ms = transaction_timeout_ms(&transactional_id, timeout)?;
        Ok(TxnProducer {
            broker,
            transactional_id,
            timeout_ms,
            batch_size,
            compression,
            state: Mutex::new(State {
                phase: Phase::Uninitialized,
                ids: ProducerIdAndEpoch {
                    producer_id: -1,
                    epoch: -1,
                },
                topics: Vec::new(),
                by_name: HashMap::new(),
                last: 0,
                added: Vec::new(),
                groups: BTreeSet::new(),
                needs_bump: false,
                version: 0,
            }),
        })
    }

    pub(crate) fn transactional_id(&self) -> &str {
        &self.transactional_id
    }

    fn invalid(&self, operation: &'static str, state: &'static str) -> Error {
        Error::InvalidProducerState {
            transactional_id: self.transactional_id.clone(),
            operation,
            state,
        }
    }

    fn fenced(&self, ids: ProducerIdAndEpoch) -> Error {
        Error::ProducerFenced {
            transactional_id: self.transactional_id.clone(),
            producer_id: ids.producer_id,
            epoch: ids.epoch,
        }
    }

    /// The coordinator's refusal as the producer's error: fencing is fatal (and ends
    /// the producer), the rest is returned as it is.
    fn coordinator_error(&self, st: &mut State, e: TxnError) -> Error {
        match e {
            TxnError::ProducerFenced { .. } | TxnError::InvalidProducerIdMapping { .. } => {
                let err = self.fenced(st.ids);
                st.phase = Phase::Fatal(err.clone());
                err
            }
            source => Error::Transaction {
                transactional_id: self.transactional_id.clone(),
                source,
            },
        }
    }

    /// An error of the open transaction: fencing ends the producer, anything else
    /// makes the transaction abortable.
    fn fail(&self, st: &mut State, e: Error) -> Error {
        let err = match e {
            Error::InvalidProducerEpoch { .. } => self.fenced(st.ids),
            e @ (Error::ProducerFenced { .. } | Error::TransactionAbortable { .. }) => e,
            e => Error::TransactionAbortable {
                transactional_id: self.transactional_id.clone(),
                source: Box::new(e),
            },
        };
        st.phase = match &err {
            Error::ProducerFenced { .. } => Phase::Fatal(err.clone()),
            _ => Phase::Abortable(err.clone()),
        };
        err
    }

    /// Refuses a call unless the producer is in a transaction that can go on.
    fn check_in_transaction(&self, st: &State, operation: &'static str) -> Result<()> {
        match &st.phase {
            Phase::InTransaction => Ok(()),
            Phase::Abortable(e) | Phase::Fatal(e) => Err(e.clone()),
            Phase::Uninitialized => Err(self.invalid(operation, "before init_transactions")),
            Phase::Ready => Err(self.invalid(operation, "outside a transaction")),
        }
    }

    /// Calls the coordinator until it answers something other than "busy"
    /// (CONCURRENT_TRANSACTIONS, loading, not available, or moved: NOT_COORDINATOR,
    /// after which the next call finds it again), for at most [`MAX_BLOCK`].
    fn retry<T>(
        &self,
        mut call: impl FnMut() -> std::result::Result<T, TxnError>,
    ) -> std::result::Result<T, TxnError> {
        let deadline = Instant::now() + MAX_BLOCK;
        let mut backoff = Duration::from_millis(1);
        loop {
            match call() {
                Err(e) if e.is_retriable() && Instant::now() < deadline => {
                    std::thread::sleep(backoff);
                    backoff = (backoff * 2).min(Duration::from_millis(100));
                }
                r => return r,
            }
        }
    }

    /// InitProducerId through the broker's transaction coordinator: the id's epoch
    /// is bumped (a new id at epoch 0), which fences older instances and aborts their
    /// open transaction (waited out, as CONCURRENT_TRANSACTIONS, for at most
    /// [`MAX_BLOCK`]).
    pub(crate) fn init_transactions(&self) -> Result<()> {
        let mut st = self.state.lock();
        match &st.phase {
            Phase::Uninitialized => {}
            Phase::Fatal(e) => return Err(e.clone()),
            _ => return Err(self.invalid("init_transactions", "twice")),
        }
        let ids = self.init_producer_id(&mut st, None)?;
        st.ids = ids;
        st.reset_sequences();
        st.phase = Phase::Ready;
        Ok(())
    }

    fn init_producer_id(
        &self,
        st: &mut State,
        expected: Option<ProducerIdAndEpoch>,
    ) -> Result<ProducerIdAndEpoch> {
        let txns = self.broker.txn_route();
        txns.ensure_transaction_state()?;
        let request = InitProducerIdRequest {
            transactional_id: self.transactional_id.clone(),
            timeout_ms: self.timeout_ms,
            expected,
        };
        let answer = self.retry(|| match txns.init_producer_id(&request)? {
            InitProducerIdAnswer::Ready(ids) => Ok(ids),
            // The id's open transaction is being aborted: ask again once it is.
            InitProducerIdAnswer::Fencing => Err(TxnError::ConcurrentTransactions),
        });
        answer.map_err(|e| self.coordinator_error(st, e))
    }

    pub(crate) fn begin_transaction(&self) -> Result<()> {
        let mut st = self.state.lock();
        match &st.phase {
            Phase::Ready => {
                let finalized = self.broker.txn_route().transaction_version();
                st.version = if finalized >= EPOCH_BUMP_TRANSACTION_VERSION {
                    EPOCH_BUMP_TRANSACTION_VERSION
                } else {
                    0
                };
                st.phase = Phase::InTransaction;
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

    /// Puts a record into the open batch of `partition` of `topic` (a partition the
    /// caller checked is in the topic's range), adding the partition to the
    /// transaction first if it is new to it; appends the batch if it is full (or
    /// `append_now`). Returns the record's batch outcome: the base offset and log
    /// append time of its batch once appended, and its index in it.
    #[inline]
    pub(crate) fn push(
        &self,
        topic: &Topic,
        partition: i32,
        record: &super::ProducerRecord<'_>,
        timestamp: i64,
        append_now: bool,
    ) -> Result<Option<Placed>> {
        let mut st = self.state.lock();
        self.check_in_transaction(&st, "send")?;
        let t = st.topic_index(topic);
        let p = usize::try_from(partition).map_err(|_| Error::UnknownPartition {
            topic: topic.name().to_string(),
            partition,
            count: topic.partition_count(),
        })?;
        let slot = match st.topics[t].slots.get_mut(p) {
            Some(Some(slot)) if slot.added && !slot.builder.is_empty() => slot,
            _ => self.open_batch(&mut st, topic, t, p)?,
        };
        let index = slot.builder.len() as i32;
        slot.builder
            .push(timestamp, record.key, record.value, record.headers);
        if slot.builder.size_bytes() >= self.batch_size || append_now {
            let appended = self.append(&mut st, t, p)?;
            return Ok(appended.map(|info| (info, index)));
        }
        Ok(None)
    }

    /// Makes partition `p` of `topic` (`t` in `st.topics`) ready for a record: its
    /// slot made, the partition looked up again if no batch is open (so that a topic
    /// deleted and created again is written to anew), and the partition added to the
    /// transaction (AddPartitionsToTxn) if it is not in it yet.
    #[cold]
    fn open_batch<'s>(
        &self,
        st: &'s mut State,
        topic: &Topic,
        t: usize,
        p: usize,
    ) -> Result<&'s mut Slot> {
        let index = p as i32;
        let slots = &mut st.topics[t].slots;
        if slots.len() <= p {
            slots.resize_with(p + 1, || None);
        }
        match &mut slots[p] {
            Some(slot) if slot.builder.is_empty() => {
                slot.partition = topic.partition(index)?;
                slot.opened = Instant::now();
            }
            Some(_) => {}
            empty => {
                *empty = Some(Slot {
                    partition: topic.partition(index)?,
                    added: false,
                    sequence: 0,
                    builder: BatchBuilder::new().compression(self.compression),
                    stamped: false,
                    opened: Instant::now(),
                });
            }
        }
        let added = st.topics[t].slots[p].as_ref().is_some_and(|s| s.added);
        if !added {
            let request = AddPartitionsRequest {
                transactional_id: self.transactional_id.clone(),
                producer_id: st.ids.producer_id,
                producer_epoch: st.ids.epoch,
                partitions: [(topic.name().to_string(), index)].into(),
                client_transaction_version: st.version,
            };
            let txns = self.broker.txn_route();
            if let Err(e) = self.retry(|| txns.add_partitions(&request)) {
                let err = self.coordinator_error(st, e);
                return Err(match err {
                    Error::ProducerFenced { .. } => err,
                    e => self.fail(st, e),
                });
            }
            st.added.push((t, p));
        }
        let slot = st.topics[t].slots[p]
            .as_mut()
            .expect("the slot was made above");
        slot.added = true;
        Ok(slot)
    }

    /// Appends the open batch of partition `p` of `st.topics[t]` as a transactional
    /// batch of the producer.
    fn append(&self, st: &mut State, t: usize, p: usize) -> Result<Option<Appended>> {
        let ids = st.ids;
        let Some(Some(slot)) = st.topics[t].slots.get_mut(p) else {
            return Ok(None);
        };
        if slot.builder.is_empty() {
            return Ok(None);
        }
        if !slot.stamped {
            slot.builder = std::mem::take(&mut slot.builder)
                .producer(ids.producer_id, ids.epoch, slot.sequence)
                .attributes(TRANSACTIONAL_BIT);
            slot.stamped = true;
        }
        let sequence = slot.sequence;
        let count = slot.builder.len() as i32;
        // The builder is empty afterwards, appended or not: a failed batch is dropped.
        let result = slot
            .partition
            .append_idempotent_builder_at(&mut slot.builder);
        match result {
            Ok((AppendOutcome::Appended(info), epoch)) => {
                slot.sequence = sequence.wrapping_add(count) & i32::MAX;
                Ok(Some(Appended {
                    base_offset: info.base_offset,
                    log_append_time: info.log_append_time,
                    epoch,
                }))
            }
            Ok((AppendOutcome::Duplicate(_), _)) => {
                slot.stamped = false;
                st.needs_bump = true;
                let partition = format!("{}-{p}", st.topics[t].topic.name());
                Err(self.fail(
                    st,
                    Error::DuplicateSequence {
                        partition,
                        producer_id: ids.producer_id,
                        sequence,
                    },
                ))
            }
            Err(e) => {
                slot.stamped = false;
                st.needs_bump = true;
                Err(self.fail(st, e))
            }
        }
    }

    /// Appends every open batch of the transaction.
    pub(crate) fn flush(&self) -> Result<()> {
        let mut st = self.state.lock();
        if !matches!(st.phase, Phase::InTransaction) {
            return Ok(());
        }
        self.flush_locked(&mut st)
    }

    /// The linger thread's part: appends the open batches older than `linger`. A
    /// failure makes the transaction abortable (or the producer fenced), which the
    /// next call reports.
    pub(crate) fn append_older_than(&self, linger: Duration) {
        let Some(mut st) = self.state.try_lock() else {
            return; // a sender or a commit holds it: the next tick tries again
        };
        if !matches!(st.phase, Phase::InTransaction) {
            return;
        }
        let due: Vec<(usize, usize)> = st
            .open()
            .filter(|(_, _, s)| s.opened.elapsed() >= linger)
            .map(|(t, p, _)| (t, p))
            .collect();
        for (t, p) in due {
            if self.append(&mut st, t, p).is_err() {
                return;
            }
        }
    }

    fn flush_locked(&self, st: &mut State) -> Result<()> {
        let open: Vec<(usize, usize)> = st.open().map(|(t, p, _)| (t, p)).collect();
        for (t, p) in open {
            self.append(st, t, p)?;
        }
        Ok(())
    }

    /// AddOffsetsToTxn of the group, then TxnOffsetCommit of `offsets` (topic,
    /// partition, next offset to read) with the member's identity: the offsets are
    /// the group's once the transaction commits, dropped if it aborts.
    pub(crate) fn send_offsets(
        &self,
        offsets: &[(String, i32, i64)],
        group: &ConsumerGroupMetadata,
    ) -> Result<()> {
        let mut st = self.state.lock();
        self.check_in_transaction(&st, "send offsets")?;
        let txns = self.broker.txn_route();
        if !st.groups.contains(&group.group_id) {
            let (ids, version) = (st.ids, st.version);
            let added = self
                .retry(|| txns.add_offsets(&self.transactional_id, ids, &group.group_id, version));
            if let Err(e) = added {
                let err = self.coordinator_error(&mut st, e);
                return Err(self.fail(&mut st, err));
            }
            st.groups.insert(group.group_id.clone());
        }
        let request = TxnOffsetCommitRequest {
            group_id: group.group_id.clone(),
            producer_id: st.ids.producer_id,
            producer_epoch: st.ids.epoch,
            generation_id: group.generation_id,
            member_id: group.member_id.clone(),
            group_instance_id: group.group_instance_id.clone(),
            offsets: offsets
                .iter()
                .map(|(topic, partition, offset)| CommitOffset {
                    topic: topic.clone(),
                    partition: *partition,
                    offset: *offset,
                    leader_epoch: -1,
                    metadata: None,
                    commit_timestamp: None,
                })
                .collect(),
        };
        txns.txn_offset_commit(&self.transactional_id, request)
            .map_err(|e| self.fail(&mut st, e))
    }

    /// Appends the open batches, then EndTxn(commit), and waits until the markers are
    /// written. An error leaves the transaction abortable (or the producer fenced).
    pub(crate) fn commit(&self) -> Result<()> {
        let mut st = self.state.lock();
        self.check_in_transaction(&st, "commit the transaction")?;
        self.flush_locked(&mut st)?;
        if let Err(e) = self.end(&mut st, TxnResult::Commit) {
            return Err(match e {
                e @ Error::ProducerFenced { .. } => e,
                e => self.fail(&mut st, e),
            });
        }
        st.phase = Phase::Ready;
        Ok(())
    }

    /// Drops the records not appended yet, then EndTxn(abort), and waits until the
    /// markers are written; after a failed append the epoch is bumped (KIP-360), so
    /// that the next transaction starts its sequences afresh (at transaction version 2
    /// EndTxn bumped it already).
    pub(crate) fn abort(&self) -> Result<()> {
        let mut st = self.state.lock();
        match &st.phase {
            Phase::InTransaction | Phase::Abortable(_) => {}
            Phase::Fatal(e) => return Err(e.clone()),
            Phase::Uninitialized => {
                return Err(self.invalid("abort the transaction", "before init_transactions"));
            }
            Phase::Ready => {
                return Err(self.invalid("abort the transaction", "outside a transaction"));
            }
        }
        let compression = self.compression;
        for slot in st.slots_mut().filter(|s| !s.builder.is_empty()) {
            // The records not appended are dropped (the slot's sequence stays).
            slot.builder = BatchBuilder::new().compression(compression);
            slot.stamped = false;
        }
        let bumped = self.end(&mut st, TxnResult::Abort)?;
        if std::mem::take(&mut st.needs_bump) && !bumped {
            let current = st.ids;
            st.ids = self.init_producer_id(&mut st, Some(current))?;
            st.reset_sequences();
        }
        st.phase = Phase::Ready;
        Ok(())
    }

    /// EndTxn with `result` (nothing to do if no partition or group was added) and the
    /// wait for its markers. At transaction version 2 the producer goes on with the
    /// producer id and epoch EndTxn answers, its sequences from 0; returns whether they
    /// changed.
    fn end(&self, st: &mut State, result: TxnResult) -> Result<bool> {
        if st.added.is_empty() && st.groups.is_empty() {
            return Ok(false);
        }
        let ended = st.ids;
        let request = EndTxnRequest {
            transactional_id: self.transactional_id.clone(),
            producer_id: ended.producer_id,
            producer_epoch: ended.epoch,
            result,
            client_transaction_version: st.version,
        };
        let txns = self.broker.txn_route();
        let next = self
            .retry(|| txns.end_txn(&request))
            .map_err(|e| self.coordinator_error(st, e))?;
        let bumped = next != ended;
        if bumped {
            st.ids = next;
            st.reset_sequences();
        }
        // While the markers are written, the coordinator holds the ended producer id
        // at the bumped epoch (the next producer id takes over once they are).
        let preparing = ProducerIdAndEpoch {
            producer_id: ended.producer_id,
            epoch: if bumped {
                ended.epoch.wrapping_add(1)
            } else {
                ended.epoch
            },
        };
        self.wait_markers(st, preparing)?;
        for (t, p) in std::mem::take(&mut st.added) {
            if let Some(Some(slot)) = st.topics[t].slots.get_mut(p) {
                slot.added = false;
            }
        }
        st.groups.clear();
        Ok(bumped)
    }

    /// Waits until the coordinator wrote every marker of the transaction (the id is
    /// no longer in PrepareCommit or PrepareAbort), for at most [`MAX_BLOCK`]: the
    /// coordinator holds the producer's ids, or `preparing` while it writes them.
    fn wait_markers(&self, st: &mut State, preparing: ProducerIdAndEpoch) -> Result<()> {
        let txns = self.broker.txn_route();
        let deadline = Instant::now() + MAX_BLOCK;
        loop {
            // Read before the state: a completion after it wakes the wait below.
            let seen = txns.completed(&self.transactional_id);
            let (ids, state) = self
                .retry(|| txns.describe(&self.transactional_id))
                .map_err(|e| self.coordinator_error(st, e))?;
            let prepare = matches!(state, TxnState::PrepareCommit | TxnState::PrepareAbort);
            if ids != st.ids && !(prepare && ids == preparing) {
                return Err(self.fenced(st.ids));
            }
            if !prepare {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(Error::Timeout(format!(
                    "transactional id {:?}: the markers of the transaction were not written within {MAX_BLOCK:?}",
                    self.transactional_id
                )));
            }
            // Woken when the local coordinator writes the markers; at most 1 ms
            // between looks otherwise (another node's coordinator).
            txns.wait_completed(&self.transactional_id, seen, Duration::from_millis(1));
        }
    }
}

/// What tests of transaction versions read and write: the batches of a partition with
/// their producer epochs, and a late batch of an earlier transaction.
#[cfg(test)]
pub(crate) mod test_batches {
    use crate::topic::Partition;

    /// The producer id, epoch and base sequence of every data batch of `part` from
    /// offset `from`, and the epoch of every marker.
    pub(crate) fn epochs(part: &Partition, from: i64) -> (Vec<(i64, i16, i32)>, Vec<i16>) {
        let slice = part.read(from, 1 << 20).expect("read");
        let data = slice
            .batches()
            .filter(|b| !b.is_control())
            .map(|b| (b.producer_id(), b.producer_epoch(), b.base_sequence()))
            .collect();
        let markers = slice
            .batches()
            .filter(|b| b.is_control())
            .map(|b| b.producer_epoch())
            .collect();
        (data, markers)
    }

    /// A transactional batch of producer `id` at `epoch` and `sequence`, as a delayed
    /// one of an earlier transaction arrives, appended to `part`.
    pub(crate) fn late_batch(
        part: &Partition,
        id: i64,
        epoch: i16,
        sequence: i32,
    ) -> crate::Result<()> {
        let mut late = crate::record::BatchBuilder::new()
            .producer(id, epoch, sequence)
            .attributes(crate::record::TRANSACTIONAL_BIT);
        late.push(0, None, Some(b"late"), &[]);
        part.append_idempotent_builder_at(&mut late).map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::test_batches::{epochs, late_batch};
    use crate::Broker;
    use crate::config::TopicConfig;
    use crate::producer::{Producer, ProducerRecord};

    #[cfg(feature = "server")]
    mod cluster {
        use std::sync::Arc;

        use crate::broker::TopicAuthority;
        use crate::config::TopicConfig;
        use crate::producer::Producer;
        use crate::{Broker, Error, Result};

        /// A cluster whose metadata nobody serves: enough to make the broker a cluster
        /// node.
        struct NoCluster;

        impl TopicAuthority for NoCluster {
            fn create_topic(&self, name: &str, _: i32, _: &TopicConfig) -> Result<()> {
                Err(Error::UnknownTopic(name.into()))
            }
            fn delete_topic(&self, name: &str) -> Result<()> {
                Err(Error::UnknownTopic(name.into()))
            }
            fn add_partitions(&self, name: &str, _: i32) -> Result<()> {
                Err(Error::UnknownTopic(name.into()))
            }
            fn alter_topic_config(&self, name: &str, _: &TopicConfig) -> Result<()> {
                Err(Error::UnknownTopic(name.into()))
            }
        }

        #[test]
        fn a_cluster_node_without_a_local_coordinator_refuses_init_transactions() {
            let dir = tempfile::tempdir().expect("dir");
            let broker = Broker::open(dir.path()).expect("broker");
            broker.attach_cluster(Arc::new(NoCluster)).expect("attach");
            let p = Producer::builder(&broker)
                .transactional_id("remote")
                .build()
                .expect("producer");
            match p.init_transactions() {
                Err(Error::InvalidConfig { key, .. }) => assert_eq!(key, "transactional.id"),
                Err(Error::Transaction {
                    transactional_id,
                    source: crate::error::TxnError::NotCoordinator,
                }) => assert_eq!(transactional_id, "remote"),
                other => panic!("expected a refusal, got {other:?}"),
            }
        }
    }

    #[test]
    fn the_transactional_id_and_timeout_are_checked() {
        let err = super::transaction_timeout_ms("", std::time::Duration::from_secs(60));
        assert!(
            matches!(&err, Err(crate::Error::InvalidConfig { key, .. }) if key == "transactional.id"),
            "{err:?}"
        );
        let err = super::transaction_timeout_ms("t", std::time::Duration::from_secs(1 << 40));
        assert!(
            matches!(&err, Err(crate::Error::InvalidConfig { key, .. }) if key == "transaction.timeout.ms"),
            "{err:?}"
        );
        let ms = super::transaction_timeout_ms("t", std::time::Duration::from_secs(60));
        assert_eq!(ms.expect("valid"), 60_000);
    }

    /// A broker with topic `t` of `partitions` and an initialized transactional
    /// producer `id` on it (`batch.size` 256).
    fn initialized(partitions: i32, id: &str) -> (tempfile::TempDir, Broker, Producer) {
        let dir = tempfile::tempdir().expect("dir");
        let broker = Broker::open(dir.path()).expect("broker");
        broker
            .create_topic("t", partitions, TopicConfig::new())
            .expect("topic");
        let p = Producer::builder(&broker)
            .transactional_id(id)
            .batch_size(256)
            .build()
            .expect("producer");
        p.init_transactions().expect("init");
        (dir, broker, p)
    }

    /// Batches of several transactions, with records dropped by an abort in between,
    /// reach each partition with sequences that follow on within each epoch (the log
    /// refuses a gap; every end bumps the epoch, from which they start at 0) and
    /// without the dropped records.
    #[test]
    fn sequences_follow_on_across_batches_transactions_and_an_abort() {
        let (_dir, broker, p) = initialized(2, "sequences");
        let value = [7u8; 40];
        let send = |n: i32| {
            for i in 0..n {
                let r = ProducerRecord::new(&value).partition(i % 2);
                p.send_nowait("t", r).expect("send");
            }
        };
        p.begin_transaction().expect("begin");
        send(50);
        p.commit_transaction().expect("commit");
        // Fewer records than a batch holds: none appended before the abort drops them.
        p.begin_transaction().expect("begin");
        send(3);
        p.abort_transaction().expect("abort");
        p.begin_transaction().expect("begin");
        send(50);
        p.commit_transaction().expect("commit");
        for i in 0..2 {
            let part = broker
                .topic("t")
                .and_then(|t| t.partition(i))
                .expect("part");
            let slice = part.read(0, 1 << 20).expect("read");
            let (mut epoch, mut next) = (None, 0);
            let mut records = 0;
            for b in slice.batches().filter(|b| !b.is_control()) {
                assert!(b.is_transactional());
                if epoch != Some(b.producer_epoch()) {
                    (epoch, next) = (Some(b.producer_epoch()), 0);
                }
                assert_eq!(b.base_sequence(), next, "partition {i}");
                let count = b.records().count() as i32;
                assert!(count > 1, "several records per batch");
                next += count;
                records += count;
            }
            assert_eq!(
                records, 50,
                "partition {i}: the aborted records were dropped"
            );
            assert_eq!(
                part.log().last_stable_offset().expect("lso"),
                part.log_end_offset()
            );
        }
    }

    /// A single node finalizes `transaction.version` 2: the producer acts as Kafka's
    /// producer of transaction version 2 (KIP-890 part 2). Every commit or abort bumps
    /// the epoch, the next transaction's batches carry it (sequences from 0), the
    /// markers carry the bumped epochs, and a late batch of an earlier transaction is
    /// fenced instead of joining the open one.
    #[test]
    fn every_end_bumps_the_epoch_and_a_late_batch_of_an_earlier_transaction_is_fenced() {
        let (_dir, broker, p) = initialized(1, "bumps");
        for commit in [true, false, true] {
            p.begin_transaction().expect("begin");
            p.send("t", ProducerRecord::new(b"v").partition(0))
                .expect("send");
            if commit {
                p.commit_transaction().expect("commit");
            } else {
                p.abort_transaction().expect("abort");
            }
        }
        let part = broker
            .topic("t")
            .and_then(|t| t.partition(0))
            .expect("part");
        let (data, markers) = epochs(&part, 0);
        let (id, first, _) = data[0];
        assert_eq!(
            data,
            vec![(id, first, 0), (id, first + 1, 0), (id, first + 2, 0)],
            "each transaction at the epoch the previous end bumped to"
        );
        assert_eq!(markers, vec![first + 1, first + 2, first + 3]);
        p.begin_transaction().expect("begin");
        p.send("t", ProducerRecord::new(b"w").partition(0))
            .expect("send");
        match late_batch(&part, id, first, 1) {
            Err(crate::Error::InvalidProducerEpoch { epoch, current, .. }) => {
                assert_eq!((epoch, current), (first, first + 3));
            }
            other => panic!("expected the late batch fenced, got {other:?}"),
        }
        p.commit_transaction().expect("commit");
        assert_eq!(epochs(&part, 0).1.last(), Some(&(first + 4)));
    }

    #[test]
    fn in_process_producer_ids_are_never_handed_out_twice() {
        let dir = tempfile::tempdir().expect("dir");
        let broker = Broker::open(dir.path()).expect("broker");
        let first = broker.new_in_process_producer_id().expect("id");
        assert_eq!(first, 1 << 62, "a range of their own");
        assert_eq!(broker.new_in_process_producer_id().expect("id"), first + 1);
        broker.close().expect("close");
        let broker = Broker::open(dir.path()).expect("broker");
        let after = broker.new_in_process_producer_id().expect("id");
        assert!(after > first + 1, "{after} after a reopen");
    }

    #[test]
    fn the_linger_thread_appends_a_transactions_batches() {
        let dir = tempfile::tempdir().expect("dir");
        let broker = Broker::open(dir.path()).expect("broker");
        broker
            .create_topic("t", 1, TopicConfig::new())
            .expect("topic");
        let p = Producer::builder(&broker)
            .transactional_id("linger")
            .linger(std::time::Duration::from_millis(5))
            .build()
            .expect("producer");
        p.init_transactions().expect("init");
        p.begin_transaction().expect("begin");
        p.send_nowait("t", ProducerRecord::new(b"v")).expect("send");
        let part = broker
            .topic("t")
            .and_then(|t| t.partition(0))
            .expect("part");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while part.log_end_offset() == 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert_eq!(part.log_end_offset(), 1, "appended before the commit");
        assert_eq!(
            part.log().last_stable_offset().expect("lso"),
            0,
            "still open"
        );
        p.commit_transaction().expect("commit");
        assert_eq!(part.log().last_stable_offset().expect("lso"), 2);
    }

    #[test]
    fn threads_send_into_one_transaction() {
        let (_dir, broker, p) = initialized(2, "threads");
        p.begin_transaction().expect("begin");
        let threads: Vec<_> = (0..4u8)
            .map(|t| {
                let p = p.clone();
                std::thread::spawn(move || {
                    for i in 0..100u8 {
                        let v = [t, i];
                        let r = ProducerRecord::new(&v).partition(i32::from(i % 2));
                        if i % 3 == 0 {
                            let m = p.send_async("t", r).expect("send").wait().expect("wait");
                            assert!(m.offset >= 0);
                        } else {
                            p.send_nowait("t", r).expect("send");
                        }
                    }
                })
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().expect("thread"));
        p.commit_transaction().expect("commit");
        let ends: i64 = (0..2)
            .map(|i| {
                let part = broker
                    .topic("t")
                    .and_then(|t| t.partition(i))
                    .expect("part");
                assert_eq!(
                    part.log().last_stable_offset().expect("lso"),
                    part.log_end_offset()
                );
                part.log_end_offset()
            })
            .sum();
        assert!(ends > 400, "400 records and 2 markers, {ends}");
        let records: usize = (0..2)
            .map(|i| {
                let part = broker
                    .topic("t")
                    .and_then(|t| t.partition(i))
                    .expect("part");
                let slice = part.read(0, 1 << 20).expect("read");
                slice
                    .batches()
                    .filter(|b| !b.is_control())
                    .map(|b| {
                        assert!(b.is_transactional());
                        b.records().count()
                    })
                    .sum::<usize>()
            })
            .sum();
        assert_eq!(records, 400);
    }
}
