//! The [`Producer`](crate::Producer) over the network: records go into one open batch
//! per partition (RecordBatch v2, the producer's codec), which is sealed when the next
//! record would take it past `batch.size`, when it is `linger.ms` old, or on `flush`;
//! one sender thread sends the sealed batches in the order they were sealed, each to
//! its partition's leader ([`Cluster::produce`], which follows leader moves), so a
//! partition's batches are appended in order.
//!
//! With `acks=all` (Kafka's default) the producer is idempotent, as Kafka's is from
//! 3.0: it gets a producer id and epoch (InitProducerId) and numbers each partition's
//! batches with consecutive sequences when they are sent; a batch repeated after a lost
//! answer or a leader move carries the same numbers, so the leader appends it once
//! (a duplicate is answered with the first append's offset, or
//! DUPLICATE_SEQUENCE_NUMBER, taken as success). After a batch fails for good the
//! sequences could have a gap, so the producer asks for a new producer id before the
//! next batch (as Kafka's producer bumps its epoch).
//!
//! With a `transactional.id` the producer id and epoch come from the transaction
//! coordinator instead (`init_transactions`, see [`super::transaction`]); the batches
//! are marked transactional, a partition joins the open transaction before its first
//! record is queued, and a failed batch makes the transaction abortable (or the
//! producer fenced) instead of asking for a new producer id.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use kafka_protocol::messages::InitProducerIdRequest;
use parking_lot::{Condvar, Mutex};

use super::cluster::{Cluster, api_version};
use super::transaction::{INIT_PRODUCER_ID, Transactions};
use crate::error::{ApiError, Error, ErrorCode, Resource, Result};
use crate::producer::{
    Acks, ConsumerGroupMetadata, DeliveryReceipt, ProducerConfig, ProducerRecord, RemoteProducer,
    RemoteSlot,
};
use crate::record::{BatchBuilder, TRANSACTIONAL_BIT, set_producer};
/// Kafka's DUPLICATE_SEQUENCE_NUMBER: the batch was appended before.
const DUPLICATE_SEQUENCE_NUMBER: i16 = 46;

/// A producer over the network; see the [module documentation](self).
pub(super) struct ClusterProducer {
    config: ProducerConfig,
    shared: Arc<Shared>,
    closed: AtomicBool,
    sender: Mutex<Option<JoinHandle<()>>>,
}

struct Shared {
    cluster: Cluster,
    config: ProducerConfig,
    state: Mutex<State>,
    /// The transactional side, with a `transactional.id`.
    txn: Option<Transactions>,
    /// Wakes the sender: a batch sealed, a flush, a close.
    wake: Condvar,
    /// Wakes flushers: the sender finished a round.
    done: Condvar,
}

#[derive(Default)]
struct State {
    open: HashMap<(String, i32), Open>,
    sealed: VecDeque<Sealed>,
    /// Batches the sender took and has not finished.
    sending: usize,
    /// Seal every open batch now (a flush or close waits).
    flushing: usize,
    closing: bool,
    /// The first failure since the last flush.
    error: Option<Error>,
    /// The first failed batch of the open transaction (it must be aborted).
    txn_failed: Option<Error>,
}

/// A partition's batch being filled.
struct Open {
    builder: BatchBuilder,
    slot: RemoteSlot,
    records: i32,
    created: Instant,
}

/// A batch waiting to be sent.
struct Sealed {
    topic: String,
    partition: i32,
    bytes: Vec<u8>,
    records: i32,
    slot: RemoteSlot,
}

/// The idempotent producer's numbering, owned by the sender thread.
#[derive(Default)]
struct Numbering {
    /// Producer id and epoch (none: not idempotent, or to be asked for).
    id: Option<(i64, i16)>,
    next: HashMap<(String, i32), i32>,
}

impl ClusterProducer {
    pub(super) fn start(cluster: Cluster, config: ProducerConfig) -> Result<ClusterProducer> {
        let txn = match &config.transactional_id {
            Some(_) if config.acks != Acks::All => {
                return Err(Error::InvalidConfig {
                    key: "acks".into(),
                    reason: "a transactional producer needs acks=all".into(),
                });
            }
            Some(id) => Some(Transactions::new(
                cluster.clone(),
                id.clone(),
                config.transaction_timeout,
            )?),
            None => None,
        };
        let shared = Arc::new(Shared {
            cluster,
            config: config.clone(),
            state: Mutex::new(State::default()),
            txn,
            wake: Condvar::new(),
            done: Condvar::new(),
        });
        let mut numbering = Numbering::default();
        if shared.idempotent() && shared.txn.is_none() {
            numbering.id = Some(shared.init_producer_id()?);
        }
        let sender = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("tidelog-remote-producer".into())
                .spawn(move || shared.run(numbering))
                .map_err(|e| Error::io("spawn producer sender thread", "<producer>", e))?
        };
        Ok(ClusterProducer {
            config,
            shared,
            closed: AtomicBool::new(false),
            sender: Mutex::new(Some(sender)),
        })
    }
}

impl Shared {
    fn idempotent(&self) -> bool {
        self.config.acks == Acks::All
    }

    fn acks(&self) -> i16 {
        match self.config.acks {
            Acks::None => 0,
            Acks::Leader => 1,
            Acks::All => -1,
        }
    }

    /// A producer id and epoch for an idempotent producer (InitProducerId without a
    /// transactional id, which any broker answers).
    fn init_producer_id(&self) -> Result<(i64, i16)> {
        let (addr, version, r) = self.cluster.call_any(INIT_PRODUCER_ID, |_| {
            // No transactional id (the default is an empty one), and the timeout
            // Kafka's idempotent producer sends.
            InitProducerIdRequest::default()
                .with_transactional_id(None)
                .with_transaction_timeout_ms(i32::MAX)
        })?;
        if r.error_code != 0 {
            return Err(ApiError {
                api: api_version::<InitProducerIdRequest>(version),
                broker: addr,
                resource: Resource::Cluster,
                code: ErrorCode::from_code(r.error_code),
                message: None,
            }
            .into());
        }
        Ok((r.producer_id.0, r.producer_epoch))
    }

    /// Seals the batches that are due: all of them while a flush or close waits, else
    /// those `linger.ms` old. Returns when the oldest open batch is due next.
    fn seal_due(&self, st: &mut State) -> Option<Instant> {
        let linger = self.config.linger;
        let all = st.flushing > 0 || st.closing;
        let due: Vec<(String, i32)> = st
            .open
            .iter()
            .filter(|(_, o)| all || o.created.elapsed() >= linger)
            .map(|(k, _)| k.clone())
            .collect();
        for key in due {
            if let Some(open) = st.open.remove(&key) {
                st.sealed.push_back(seal(key, open));
            }
        }
        st.open.values().map(|o| o.created + linger).min()
    }

    /// The sender thread: seals what is due, sends the sealed batches in order, until
    /// closed with nothing left.
    fn run(&self, mut numbering: Numbering) {
        loop {
            let batches: Vec<Sealed> = {
                let mut st = self.state.lock();
                loop {
                    let next_due = self.seal_due(&mut st);
                    if !st.sealed.is_empty() {
                        break;
                    }
                    if st.closing && st.open.is_empty() {
                        return;
                    }
                    self.done.notify_all();
                    match next_due {
                        Some(at) => {
                            self.wake.wait_until(&mut st, at);
                        }
                        None => self.wake.wait(&mut st),
                    }
                }
                st.sending = st.sealed.len();
                st.sealed.drain(..).collect()
            };
            for batch in batches {
                let outcome = self.send(&mut numbering, &batch);
                match outcome {
                    Ok((offset, append_time)) => batch.slot.acknowledged(offset, append_time),
                    Err(e) => {
                        let e = match &self.txn {
                            Some(txn) => txn.batch_failure(e),
                            None => e,
                        };
                        let mut st = self.state.lock();
                        st.error.get_or_insert_with(|| e.clone());
                        if self.txn.is_some() {
                            st.txn_failed.get_or_insert_with(|| e.clone());
                        }
                        drop(st);
                        batch.slot.failed(e);
                    }
                }
                let mut st = self.state.lock();
                st.sending -= 1;
            }
            self.done.notify_all();
        }
    }

    /// Numbers (when idempotent) and sends one batch to its partition's leader.
    fn send(&self, numbering: &mut Numbering, batch: &Sealed) -> Result<(i64, i64)> {
        let mut bytes = batch.bytes.clone();
        let key = (batch.topic.clone(), batch.partition);
        if let Some(txn) = &self.txn {
            let ids = txn.ids();
            if numbering.id != ids {
                // A new epoch (after an abort that bumped it) starts every sequence at 0.
                numbering.next.clear();
                numbering.id = ids;
            }
            let Some((id, epoch)) = ids else {
                return Err(Error::InvalidProducerState {
                    transactional_id: txn.transactional_id().to_string(),
                    operation: "send",
                    state: "before init_transactions",
                });
            };
            let sequence = numbering.next.get(&key).copied().unwrap_or(0);
            set_producer(&mut bytes, id, epoch, sequence);
        } else if self.idempotent() {
            let (id, epoch) = match numbering.id {
                Some(id) => id,
                None => {
                    let id = self.init_producer_id()?;
                    numbering.next.clear();
                    numbering.id = Some(id);
                    id
                }
            };
            let sequence = numbering.next.get(&key).copied().unwrap_or(0);
            set_producer(&mut bytes, id, epoch, sequence);
        }
        let result = self.cluster.produce(
            &batch.topic,
            batch.partition,
            &bytes.into(),
            self.acks(),
            self.txn.as_ref().map(|t| t.transactional_id()),
        );
        let result = match result {
            Err(Error::Api(e)) if e.code.code() == DUPLICATE_SEQUENCE_NUMBER => Ok((-1, -1)),
            other => other,
        };
        if self.idempotent() {
            match &result {
                Ok(_) => {
                    let next = numbering.next.entry(key).or_insert(0);
                    *next = next.wrapping_add(batch.records) & i32::MAX;
                }
                // A batch that failed for good may leave a gap: start over with a new
                // producer id (in a transaction: the abort bumps the epoch).
                Err(_) if self.txn.is_none() => numbering.id = None,
                Err(_) => {}
            }
        }
        result
    }

    /// Seals every open batch and waits until every batch sealed so far is sent;
    /// returns (and clears) the first failure since the last flush.
    fn flush(&self) -> Result<()> {
        let mut st = self.state.lock();
        st.flushing += 1;
        self.wake.notify_all();
        let deadline = Instant::now() + self.flush_timeout();
        while !(st.open.is_empty() && st.sealed.is_empty() && st.sending == 0) {
            if self.done.wait_until(&mut st, deadline).timed_out() {
                st.flushing -= 1;
                return Err(Error::Timeout(format!(
                    "flush: batches not acknowledged within {:?}",
                    self.flush_timeout()
                )));
            }
        }
        st.flushing -= 1;
        match st.error.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// How long a flush waits: the last batch may retry for `delivery.timeout.ms`
    /// after the ones before it.
    fn flush_timeout(&self) -> Duration {
        self.cluster.delivery_timeout() * 2 + self.cluster.request_timeout()
    }
}

/// The batch `open` of `key`, finished.
fn seal(key: (String, i32), mut open: Open) -> Sealed {
    Sealed {
        topic: key.0,
        partition: key.1,
        bytes: open.builder.finish(),
        records: open.records,
        slot: open.slot,
    }
}

impl RemoteProducer for ClusterProducer {
    fn config(&self) -> &ProducerConfig {
        &self.config
    }

    fn send_async(&self, topic: &str, record: &ProducerRecord<'_>) -> Result<DeliveryReceipt> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Closed("producer".into()));
        }
        let shared = &self.shared;
        let count = shared.cluster.partition_count(topic)?;
        let partition = match record.partition {
            Some(p) if (0..count).contains(&p) => p,
            Some(p) => {
                return Err(Error::UnknownPartition {
                    topic: topic.to_string(),
                    partition: p,
                    count,
                });
            }
            None => self
                .config
                .partitioner
                .partition(topic, record.key, record.value, count),
        };
        match &shared.txn {
            Some(txn) => txn.before_send(
                topic,
                partition,
                || shared.state.lock().txn_failed.clone(),
                || Ok(self.queue(topic, partition, record)),
            ),
            None => Ok(self.queue(topic, partition, record)),
        }
    }

    fn flush(&self) -> Result<()> {
        self.shared.flush()
    }

    fn close(&self) -> Result<()> {
        if self.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        let flushed = self.shared.flush();
        self.shared.state.lock().closing = true;
        self.shared.wake.notify_all();
        if let Some(h) = self.sender.lock().take() {
            let _ = h.join();
        }
        flushed
    }

    fn init_transactions(&self) -> Result<()> {
        self.txn("init_transactions")?.init_transactions()
    }

    fn begin_transaction(&self) -> Result<()> {
        self.txn("begin_transaction")?.begin_transaction()
    }

    fn send_offsets_to_transaction(
        &self,
        offsets: &[(String, i32, i64)],
        group: &ConsumerGroupMetadata,
    ) -> Result<()> {
        self.txn("send_offsets_to_transaction")?
            .send_offsets(offsets, group)
    }

    fn commit_transaction(&self) -> Result<()> {
        self.txn("commit_transaction")?
            .commit(|| self.shared.flush())
    }

    fn abort_transaction(&self) -> Result<()> {
        let txn = self.txn("abort_transaction")?;
        txn.abort(|| self.drop_batches(txn.transactional_id()))
    }
}

impl ClusterProducer {
    /// The transactional side, for a transactional call on an open producer.
    fn txn(&self, operation: &'static str) -> Result<&Transactions> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Closed("producer".into()));
        }
        self.shared
            .txn
            .as_ref()
            .ok_or_else(|| Error::InvalidConfig {
                key: "transactional.id".into(),
                reason: format!("{operation} needs a transactional producer (none is set)"),
            })
    }

    /// For an abort: fails the records not sent yet, waits for the batches being sent,
    /// and returns whether a batch of the transaction failed (its error is cleared).
    fn drop_batches(&self, transactional_id: &str) -> bool {
        let shared = &self.shared;
        let mut st = shared.state.lock();
        let mut dropped: Vec<RemoteSlot> = st.open.drain().map(|(_, o)| o.slot).collect();
        dropped.extend(st.sealed.drain(..).map(|b| b.slot));
        let deadline = Instant::now() + shared.flush_timeout();
        while st.sending > 0 {
            if shared.done.wait_until(&mut st, deadline).timed_out() {
                break;
            }
        }
        st.error = None;
        let failed = st.txn_failed.take().is_some();
        drop(st);
        for slot in dropped {
            slot.failed(Error::InvalidProducerState {
                transactional_id: transactional_id.to_string(),
                operation: "deliver the record",
                state: "after its transaction was aborted",
            });
        }
        failed
    }

    /// Puts the record in the open batch of `partition` of `topic`.
    fn queue(&self, topic: &str, partition: i32, record: &ProducerRecord<'_>) -> DeliveryReceipt {
        let shared = &self.shared;
        let timestamp = record.timestamp.unwrap_or_else(now_ms);
        let size = BatchBuilder::record_size(0, 0, record.key, record.value, record.headers) + 16;
        let mut st = shared.state.lock();
        let key = (topic.to_string(), partition);
        let full = st.open.get(&key).is_some_and(|o| {
            o.records > 0 && o.builder.size_bytes() + size > self.config.batch_size
        });
        if full && let Some(open) = st.open.remove(&key) {
            st.sealed.push_back(seal(key.clone(), open));
            shared.wake.notify_all();
        }
        let first = st.open.is_empty();
        let attributes = if shared.txn.is_some() {
            TRANSACTIONAL_BIT
        } else {
            0
        };
        let open = st.open.entry(key).or_insert_with(|| Open {
            builder: BatchBuilder::new()
                .compression(self.config.compression)
                .attributes(attributes),
            slot: RemoteSlot::default(),
            records: 0,
            created: Instant::now(),
        });
        open.builder
            .push(timestamp, record.key, record.value, record.headers);
        let index = open.records;
        open.records += 1;
        let receipt = match self.config.acks {
            // No offset comes back: the receipt reports -1.
            Acks::None => open.slot.receipt(0, partition, timestamp),
            _ => open.slot.receipt(index, partition, timestamp),
        };
        if first || self.config.linger.is_zero() {
            shared.wake.notify_all();
        }
        receipt
    }
}

impl Drop for ClusterProducer {
    fn drop(&mut self) {
        let _ = RemoteProducer::close(self);
    }
}

/// Milliseconds since the Unix epoch.
fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
