//! The [`Producer`](crate::Producer) over the network: records go into one open batch
//! per partition (RecordBatch v2, the producer's codec), which is sealed and joins its
//! partition's queue when the next record would take it past `batch.size`, or once it
//! is due (`linger.ms` old, or a flush waits) and its partition may send: a due batch
//! of a partition whose requests in flight are at the limit keeps taking records, as
//! Kafka's producer's does, so a slow broker gets fewer, fuller batches instead of a
//! queue of one batch per record.
//!
//! One thread per broker sends the queues of the partitions that broker leads: each
//! Produce carries the first waiting batch of every such partition, and up to
//! `max.in.flight.requests.per.connection` (default 5) of them wait for their answers
//! on the broker connection at once (a broker answers a connection in order). A
//! dispatcher thread wakes the broker threads when a batch falls due, looks leaders up
//! (sealing the due batches of partitions without one), and expires batches past
//! `delivery.timeout.ms`.
//!
//! With `acks=all` (Kafka's default) the producer is idempotent, as Kafka's is from
//! 3.0: it gets a producer id and epoch (InitProducerId) and numbers each partition's
//! batches with consecutive sequences when they are first sent. When a batch fails in a
//! way that asking again may mend (a leader move, a timeout, a lost connection), it
//! goes back into its partition's queue in sequence order, and the partition sends
//! nothing more until its other batches in flight are answered: those after the failed
//! one come back OUT_OF_ORDER_SEQUENCE (taken as retriable then, as Kafka's producer
//! does) and are queued again too, and the partition starts over from the oldest, with
//! the same numbers, so the leader appends each once (a batch it appended already is
//! answered with the first append's offset, or DUPLICATE_SEQUENCE_NUMBER, taken as
//! success). After a batch fails for good the sequences could have a gap, so the
//! producer asks for a new producer id once nothing is in flight, and numbers the
//! waiting batches again (as Kafka's producer bumps its epoch).
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

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    InitProducerIdRequest, ProduceRequest, ProduceResponse, TopicName, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;
use parking_lot::{Condvar, Mutex};

use super::cluster::{Cluster, api_version, partition_error, retriable, unreachable};
use super::partition::PRODUCE;
use super::transaction::{INIT_PRODUCER_ID, Transactions};
use crate::client::Client;
use crate::error::{ApiError, Error, ErrorCode, Resource, Result};
use crate::producer::{
    Acks, ConsumerGroupMetadata, DeliveryReceipt, ProducerConfig, ProducerRecord, RemoteProducer,
    RemoteSlot,
};
use crate::record::{BatchBuilder, TRANSACTIONAL_BIT, set_producer};

/// Kafka's NETWORK_EXCEPTION (retriable): stands for a connection that failed.
const NETWORK_EXCEPTION: i16 = 13;
/// Kafka's OUT_OF_ORDER_SEQUENCE_NUMBER: the leader expected another sequence.
const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = 45;
/// Kafka's DUPLICATE_SEQUENCE_NUMBER: the batch was appended before.
const DUPLICATE_SEQUENCE_NUMBER: i16 = 46;
/// The most Produce requests in flight per connection idempotence keeps in order (a
/// Kafka leader remembers the last five batches of each producer).
const MAX_IN_FLIGHT_IDEMPOTENT: usize = 5;
/// How long an idle thread sleeps before it looks again (a wake-up comes sooner).
const IDLE: Duration = Duration::from_millis(100);

/// A producer over the network; see the [module documentation](self).
pub(super) struct ClusterProducer {
    config: ProducerConfig,
    shared: Arc<Shared>,
    closed: AtomicBool,
    dispatcher: Mutex<Option<JoinHandle<()>>>,
}

struct Shared {
    cluster: Cluster,
    config: ProducerConfig,
    state: Mutex<State>,
    /// The transactional side, with a `transactional.id`.
    txn: Option<Transactions>,
    /// Wakes the broker threads: a batch to send (sealed, due, or records for a
    /// linger of 0), a leader learnt, a flush, a close.
    wake: Condvar,
    /// Wakes the dispatcher: a batch of a partition with no leader known, the first
    /// record of a batch that lingers, a failed batch, a flush, a close.
    kick: Condvar,
    /// Wakes flushers: batches finished.
    done: Condvar,
}

#[derive(Default)]
struct State {
    /// Per topic, per partition.
    parts: HashMap<String, HashMap<i32, Part>>,
    /// Sealed batches not finished (queued or in flight).
    pending: usize,
    /// Batches in flight on all connections.
    in_flight: usize,
    /// Seal every open batch now (a flush or close waits).
    flushing: usize,
    closing: bool,
    /// The broker threads stop (the producer is closed and everything finished).
    stopped: bool,
    /// The producer id and epoch batches are numbered with (none: not idempotent, or
    /// to be asked for).
    id: Option<(i64, i16)>,
    /// A batch failed for good: ask for a new producer id once nothing is in flight.
    renew_id: bool,
    /// The broker threads, by address.
    brokers: HashMap<String, JoinHandle<()>>,
    /// The first failure since the last flush.
    error: Option<Error>,
    /// The first failed batch of the open transaction (it must be aborted).
    txn_failed: Option<Error>,
    /// When the dispatcher, waiting, wakes up by itself (none: it is not waiting, and
    /// looks at every open batch before it waits again).
    dispatcher_wakes: Option<Instant>,
    /// How often a record woke the dispatcher.
    #[cfg(all(test, feature = "server"))]
    kicks: usize,
}

/// A partition's batches.
#[derive(Default)]
struct Part {
    /// The batch being filled.
    open: Option<Open>,
    /// Sealed batches waiting to be sent, in order (batches sent again first, by
    /// sequence).
    queue: VecDeque<Batch>,
    /// Its batches in flight.
    in_flight: usize,
    /// The sequence of its next new batch.
    next_sequence: i32,
    /// Its leader's address (none: to be looked up).
    leader: Option<String>,
    /// Nothing is sent before then (the pause after a failure).
    retry_at: Option<Instant>,
    /// The pause after the next failure.
    backoff: Duration,
    /// A batch failed while others were in flight: nothing more is sent until they are
    /// answered, and their OUT_OF_ORDER_SEQUENCE answers are retried.
    recovering: bool,
    /// The last failure, reported if its batches expire.
    last_error: Option<Error>,
}

/// A partition's batch being filled.
struct Open {
    builder: BatchBuilder,
    slot: RemoteSlot,
    records: i32,
    created: Instant,
}

/// A sealed batch.
struct Batch {
    bytes: Bytes,
    records: i32,
    slot: RemoteSlot,
    /// Its sequence once numbered (idempotent or transactional).
    sequence: Option<i32>,
    /// When it fails with no answer in sight (`delivery.timeout.ms` after it was
    /// created).
    deadline: Instant,
}

/// A Produce request waiting for its answer.
struct InFlight {
    correlation_id: i32,
    version: i16,
    batches: Vec<(String, i32, Batch)>,
}

impl ClusterProducer {
    pub(super) fn start(cluster: Cluster, config: ProducerConfig) -> Result<ClusterProducer> {
        let idempotent = config.acks == Acks::All;
        if config.max_in_flight == 0 || (idempotent && config.max_in_flight > 5) {
            return Err(Error::InvalidConfig {
                key: "max.in.flight.requests.per.connection".into(),
                reason: format!(
                    "{} is not between 1 and {MAX_IN_FLIGHT_IDEMPOTENT} (the most an \
                     idempotent producer keeps in order)",
                    config.max_in_flight
                ),
            });
        }
        let txn = match &config.transactional_id {
            Some(_) if !idempotent => {
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
            kick: Condvar::new(),
            done: Condvar::new(),
        });
        if shared.idempotent() && shared.txn.is_none() {
            shared.state.lock().id = Some(shared.init_producer_id()?);
        }
        let dispatcher = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("tidelog-remote-producer".into())
                .spawn(move || shared.dispatch())
                .map_err(|e| Error::io("spawn producer thread", "<producer>", e))?
        };
        Ok(ClusterProducer {
            config,
            shared,
            closed: AtomicBool::new(false),
            dispatcher: Mutex::new(Some(dispatcher)),
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

    /// Seals the due batches (all of them while a flush or close waits, else those
    /// `linger.ms` old) of the partitions with no leader known, whose lookups and
    /// expiry go by their queues; a partition with a leader has its due batch sealed by
    /// its broker thread once it may send (see [`take_batches`](Self::take_batches)),
    /// and those threads are woken here when a batch falls due. Returns when the oldest
    /// open batch not yet due falls due.
    fn seal_due(&self, st: &mut State) -> Option<Instant> {
        let linger = self.config.linger;
        let all = st.flushing > 0 || st.closing;
        let deadline = self.cluster.delivery_timeout();
        let mut next: Option<Instant> = None;
        let mut sealed = 0;
        let mut due = false;
        for part in st.parts.values_mut().flat_map(|t| t.values_mut()) {
            let Some(open) = &part.open else { continue };
            if !(all || open.created.elapsed() >= linger) {
                // A linger past what an `Instant` holds never falls due by itself.
                if let Some(at) = open.created.checked_add(linger) {
                    next = Some(next.map_or(at, |n| n.min(at)));
                }
            } else if part.leader.is_some() {
                due = true;
            } else {
                let open = part.open.take().expect("checked above");
                part.queue.push_back(seal(open, deadline));
                sealed += 1;
            }
        }
        st.pending += sealed;
        if sealed > 0 || due {
            self.wake.notify_all();
        }
        next
    }

    /// True when nothing is open, queued or in flight.
    fn idle(st: &State) -> bool {
        st.pending == 0
            && st
                .parts
                .values()
                .flat_map(|t| t.values())
                .all(|p| p.open.is_none())
    }

    /// The dispatcher thread: seals what is due, looks up leaders and starts a thread
    /// per broker, renews the producer id, expires batches; until closed with nothing
    /// left.
    fn dispatch(self: Arc<Self>) {
        let mut st = self.state.lock();
        loop {
            let mut next = self.seal_due(&mut st);
            if st.closing && Self::idle(&st) {
                break;
            }
            self.expire(&mut st);
            if st.renew_id && st.in_flight == 0 {
                drop(st);
                let renewed = self.init_producer_id();
                st = self.state.lock();
                match renewed {
                    Ok(id) => {
                        st.id = Some(id);
                        st.renew_id = false;
                        renumber(&mut st);
                        self.wake.notify_all();
                    }
                    Err(e) => self.fail_all_queued(&mut st, &e),
                }
                continue;
            }
            // Partitions with batches to send and no leader known.
            let now = Instant::now();
            let lookups: Vec<(String, i32)> = st
                .parts
                .iter()
                .flat_map(|(t, ps)| ps.iter().map(move |(p, part)| (t, *p, part)))
                .filter(|(_, _, part)| {
                    part.leader.is_none()
                        && !part.queue.is_empty()
                        && part.retry_at.is_none_or(|at| at <= now)
                })
                .map(|(t, p, _)| (t.clone(), p))
                .collect();
            if !lookups.is_empty() {
                drop(st);
                let found: Vec<_> = lookups
                    .into_iter()
                    .map(|(t, p)| {
                        let leader = self.cluster.leader(&t, p);
                        (t, p, leader)
                    })
                    .collect();
                st = self.state.lock();
                for (topic, partition, leader) in found {
                    self.learn_leader(&mut st, &topic, partition, leader);
                }
                continue;
            }
            for part in st.parts.values().flat_map(|t| t.values()) {
                if part.leader.is_none()
                    && !part.queue.is_empty()
                    && let Some(at) = part.retry_at
                {
                    next = Some(next.map_or(at, |n| n.min(at)));
                }
            }
            self.done.notify_all();
            let until = next.unwrap_or(now + IDLE).min(now + IDLE);
            st.dispatcher_wakes = Some(until);
            self.kick.wait_until(&mut st, until);
            st.dispatcher_wakes = None;
        }
        st.stopped = true;
        self.wake.notify_all();
        let brokers: Vec<JoinHandle<()>> = st.brokers.drain().map(|(_, h)| h).collect();
        drop(st);
        for h in brokers {
            let _ = h.join();
        }
        self.done.notify_all();
    }

    /// Records the leader lookup of `partition` of `topic`: its address (starting the
    /// broker's thread if it has none), a pause while it has none (the topic's
    /// metadata is marked stale, so that the lookup after the pause asks the cluster
    /// again rather than reading the same leaderless answer until
    /// `metadata.max.age.ms`), or the failure of its queue for an error asking again
    /// does not mend (the topic is gone).
    fn learn_leader(
        self: &Arc<Self>,
        st: &mut State,
        topic: &str,
        partition: i32,
        leader: Result<Option<super::cluster::Leader>>,
    ) {
        let addr = match leader {
            Ok(Some(leader)) => leader.addr,
            Ok(None) => {
                let e = partition_error(
                    "Metadata".into(),
                    "",
                    topic,
                    partition,
                    ErrorCode::LEADER_NOT_AVAILABLE.code(),
                    None,
                );
                self.cluster.invalidate(topic);
                self.pause(st, topic, partition, e);
                return;
            }
            Err(e) if unreachable(&e) => {
                self.pause(st, topic, partition, e);
                return;
            }
            Err(e) => {
                let failed: Vec<Batch> = part_mut(st, topic, partition).queue.drain(..).collect();
                for batch in failed {
                    self.finish(st, Err(e.clone()), batch.slot);
                }
                return;
            }
        };
        part_mut(st, topic, partition).leader = Some(addr.clone());
        if let std::collections::hash_map::Entry::Vacant(slot) = st.brokers.entry(addr.clone()) {
            let shared = self.clone();
            let spawned = std::thread::Builder::new()
                .name("tidelog-remote-producer-broker".into())
                .spawn(move || shared.send_to(addr.clone()));
            match spawned {
                Ok(h) => {
                    slot.insert(h);
                }
                Err(e) => {
                    let e = Error::io("spawn producer thread", slot.key(), e);
                    part_mut(st, topic, partition).leader = None;
                    self.pause(st, topic, partition, e);
                }
            }
        }
        self.wake.notify_all();
    }

    /// A pause before `partition` of `topic` is tried again after `e`.
    fn pause(&self, st: &mut State, topic: &str, partition: i32, e: Error) {
        let base = self.cluster.retry_backoff();
        let max = self.cluster.retry_backoff_max();
        let part = part_mut(st, topic, partition);
        let backoff = if part.backoff.is_zero() {
            base
        } else {
            part.backoff
        };
        part.retry_at = Some(Instant::now() + backoff);
        part.backoff = (backoff * 2).min(max);
        part.last_error = Some(e);
    }

    /// Fails the queued batches past their delivery deadline, of partitions with none
    /// in flight (those in flight wait for their answers).
    fn expire(&self, st: &mut State) {
        let now = Instant::now();
        let mut expired = Vec::new();
        for (topic, ps) in &mut st.parts {
            for (partition, part) in ps.iter_mut() {
                if part.in_flight > 0 {
                    continue;
                }
                while part.queue.front().is_some_and(|b| b.deadline <= now) {
                    let batch = part.queue.pop_front().expect("checked above");
                    let e = part.last_error.clone().unwrap_or_else(|| {
                        Error::Timeout(format!(
                            "{topic}/{partition}: batch not sent within delivery.timeout.ms ({:?})",
                            self.cluster.delivery_timeout()
                        ))
                    });
                    expired.push((batch, e));
                }
            }
        }
        for (batch, e) in expired {
            self.finish(st, Err(e), batch.slot);
        }
    }

    /// Fails every queued batch with `e` (no producer id to number them with).
    fn fail_all_queued(&self, st: &mut State, e: &Error) {
        let failed: Vec<Batch> = st
            .parts
            .values_mut()
            .flat_map(|t| t.values_mut())
            .flat_map(|p| p.queue.drain(..))
            .collect();
        for batch in failed {
            self.finish(st, Err(e.clone()), batch.slot);
        }
    }

    /// A sealed batch finished: acknowledged at `(offset, append time)`, or failed.
    fn finish(&self, st: &mut State, outcome: Result<(i64, i64)>, slot: RemoteSlot) {
        st.pending -= 1;
        match outcome {
            Ok((offset, append_time)) => slot.acknowledged(offset, append_time),
            Err(e) => {
                let e = match &self.txn {
                    Some(txn) => txn.batch_failure(e),
                    None => e,
                };
                st.error.get_or_insert_with(|| e.clone());
                if self.txn.is_some() {
                    st.txn_failed.get_or_insert_with(|| e.clone());
                }
                slot.failed(e);
            }
        }
        if st.pending == 0 {
            self.done.notify_all();
        }
    }

    /// The producer id and epoch to number new batches with: the transaction's (a new
    /// epoch starts every sequence at 0), or the idempotent producer's.
    fn numbering(&self, st: &mut State) -> Result<Option<(i64, i16)>> {
        let Some(txn) = &self.txn else {
            return Ok(st.id);
        };
        let ids = txn.ids();
        if st.id != ids {
            st.id = ids;
            renumber(st);
        }
        match ids {
            Some(ids) => Ok(Some(ids)),
            None => Err(Error::InvalidProducerState {
                transactional_id: txn.transactional_id().to_string(),
                operation: "send",
                state: "before init_transactions",
            }),
        }
    }

    /// The batches a broker thread sends next to `addr`: the first waiting batch of
    /// each partition it leads that may send, numbered when idempotent.
    fn take_batches(&self, st: &mut State, addr: &str) -> Vec<(String, i32, Batch)> {
        let mut out = Vec::new();
        if st.renew_id {
            return out;
        }
        let ids = if self.idempotent() {
            match self.numbering(st) {
                Ok(ids) => ids,
                Err(e) => {
                    self.fail_all_queued(st, &e);
                    return out;
                }
            }
        } else {
            None
        };
        let now = Instant::now();
        let max = self.config.max_in_flight;
        let linger = self.config.linger;
        let all = st.flushing > 0 || st.closing;
        let delivery_timeout = self.cluster.delivery_timeout();
        let mut taken = 0;
        let mut sealed = 0;
        for (topic, ps) in &mut st.parts {
            for (partition, part) in ps.iter_mut() {
                if part.leader.as_deref() != Some(addr)
                    || part.recovering
                    || part.in_flight >= max
                    || part.retry_at.is_some_and(|at| at > now)
                {
                    continue;
                }
                // The open batch is sealed once it is due and would go now: while the
                // partition may not send, it keeps taking records (up to batch.size),
                // as Kafka's producer does, instead of queueing a batch per record.
                if part.queue.is_empty()
                    && part
                        .open
                        .as_ref()
                        .is_some_and(|o| all || o.created.elapsed() >= linger)
                {
                    let open = part.open.take().expect("checked above");
                    part.queue.push_back(seal(open, delivery_timeout));
                    sealed += 1;
                }
                let Some(mut batch) = part.queue.pop_front() else {
                    continue;
                };
                if let Some((id, epoch)) = ids {
                    let sequence = *batch.sequence.get_or_insert_with(|| {
                        let s = part.next_sequence;
                        part.next_sequence = s.wrapping_add(batch.records) & i32::MAX;
                        s
                    });
                    stamp(&mut batch.bytes, id, epoch, sequence);
                }
                part.in_flight += 1;
                taken += 1;
                out.push((topic.clone(), *partition, batch));
            }
        }
        st.in_flight += taken;
        st.pending += sealed;
        out
    }

    /// A broker thread: sends the batches of the partitions the broker at `addr`
    /// leads, keeping up to `max.in.flight.requests.per.connection` Produce requests
    /// unanswered, and handles the answers in order.
    fn send_to(self: Arc<Self>, addr: String) {
        let mut conn = self.cluster.connection(&addr);
        let mut in_flight: VecDeque<InFlight> = VecDeque::new();
        let timeout = self.cluster.answer_timeout();
        loop {
            let batches = {
                let mut st = self.state.lock();
                loop {
                    if st.stopped && in_flight.is_empty() {
                        return;
                    }
                    let batches = if in_flight.len() < self.config.max_in_flight {
                        self.take_batches(&mut st, &addr)
                    } else {
                        Vec::new()
                    };
                    if !batches.is_empty() || !in_flight.is_empty() {
                        break batches;
                    }
                    self.wake.wait_for(&mut st, IDLE);
                }
            };
            if !batches.is_empty() {
                match self.submit(&mut conn, batches) {
                    Ok(Some(request)) => in_flight.push_back(request),
                    Ok(None) => {}
                    Err((e, batches)) => {
                        // The connection is gone: everything on it fails, to be sent again.
                        let mut all = batches;
                        all.extend(in_flight.drain(..).flat_map(|r| r.batches));
                        self.answered_all(all, &e);
                    }
                }
                continue;
            }
            let request = in_flight.pop_front().expect("checked in the loop above");
            match conn.receive::<ProduceRequest>(request.correlation_id, request.version, timeout) {
                Ok(response) => self.answered(&addr, request, response),
                Err(e) => {
                    let mut all = request.batches;
                    all.extend(in_flight.drain(..).flat_map(|r| r.batches));
                    self.answered_all(all, &e);
                }
            }
        }
    }

    /// Writes one Produce with `batches` on `conn`: the request to wait for (none with
    /// acks 0: the batches are acknowledged once written), or the error and the
    /// batches back.
    #[allow(clippy::type_complexity)]
    fn submit(
        &self,
        conn: &mut Client,
        batches: Vec<(String, i32, Batch)>,
    ) -> std::result::Result<Option<InFlight>, (Error, Vec<(String, i32, Batch)>)> {
        let versions = self
            .txn
            .as_ref()
            .map_or(PRODUCE, Transactions::produce_versions);
        let version = match conn.version::<ProduceRequest>(versions) {
            Ok(v) => v,
            Err(e) => return Err((e, batches)),
        };
        let timeout_ms = self
            .cluster
            .request_timeout()
            .as_millis()
            .min(i32::MAX as u128) as i32;
        let mut topics: Vec<TopicProduceData> = Vec::new();
        for (topic, partition, batch) in &batches {
            let data = PartitionProduceData::default()
                .with_index(*partition)
                .with_records(Some(batch.bytes.clone()));
            match topics.iter_mut().find(|t| t.name.0.as_str() == topic) {
                Some(t) => t.partition_data.push(data),
                None => topics.push(
                    TopicProduceData::default()
                        .with_name(TopicName(StrBytes::from_string(topic.clone())))
                        .with_partition_data(vec![data]),
                ),
            }
        }
        let request =
            ProduceRequest::default()
                .with_transactional_id(self.txn.as_ref().map(|t| {
                    TransactionalId(StrBytes::from_string(t.transactional_id().to_string()))
                }))
                .with_acks(self.acks())
                .with_timeout_ms(timeout_ms)
                .with_topic_data(topics);
        let timeout = self.cluster.answer_timeout();
        match conn.submit(&request, version, timeout) {
            Err(e) => Err((e, batches)),
            Ok(_) if self.acks() == 0 => {
                drop(request);
                let mut st = self.state.lock();
                for (topic, partition, batch) in batches {
                    self.settle(&mut st, &topic, partition, batch, Ok((-1, -1)));
                }
                Ok(None)
            }
            Ok(correlation_id) => Ok(Some(InFlight {
                correlation_id,
                version,
                batches,
            })),
        }
    }

    /// The answer of `request` from the broker at `addr`.
    fn answered(&self, addr: &str, request: InFlight, response: ProduceResponse) {
        let api = api_version::<ProduceRequest>(request.version);
        let mut st = self.state.lock();
        let mut failed = false;
        for (topic, partition, batch) in request.batches {
            let found = response
                .responses
                .iter()
                .filter(|t| t.name.0.as_str() == topic)
                .flat_map(|t| t.partition_responses.iter())
                .find(|p| p.index == partition);
            let (code, message) = match found {
                Some(p) if p.error_code == 0 => {
                    let ok = Ok((p.base_offset, p.log_append_time_ms));
                    self.settle(&mut st, &topic, partition, batch, ok);
                    continue;
                }
                Some(p) => (p.error_code, p.error_message.as_ref()),
                None => (ErrorCode::UNKNOWN_SERVER_ERROR.code(), None),
            };
            let e = partition_error(api.clone(), addr, &topic, partition, code, message);
            self.settle(&mut st, &topic, partition, batch, Err((code, e)));
            failed = true;
        }
        // Waits on batches in flight (an abort's) look again.
        self.done.notify_all();
        if failed {
            self.wake_all();
        }
    }

    /// The connection failed with `e`: every batch on it is sent again.
    fn answered_all(&self, batches: Vec<(String, i32, Batch)>, e: &Error) {
        let mut st = self.state.lock();
        for (topic, partition, batch) in batches {
            self.settle(
                &mut st,
                &topic,
                partition,
                batch,
                Err((NETWORK_EXCEPTION, e.clone())),
            );
        }
        drop(st);
        self.wake_all();
    }

    /// Wakes the broker threads and the dispatcher.
    fn wake_all(&self) {
        self.wake.notify_all();
        self.kick.notify_all();
    }

    /// The outcome of one batch in flight: acknowledged, queued again in sequence order
    /// after a failure asking again may mend, or failed for good. `Err` carries Kafka's
    /// code (NETWORK_EXCEPTION for a connection that failed).
    fn settle(
        &self,
        st: &mut State,
        topic: &str,
        partition: i32,
        batch: Batch,
        outcome: std::result::Result<(i64, i64), (i16, Error)>,
    ) {
        st.in_flight -= 1;
        let part = part_mut(st, topic, partition);
        part.in_flight -= 1;
        let outcome = match outcome {
            Err((DUPLICATE_SEQUENCE_NUMBER, _)) => Ok((-1, -1)),
            other => other,
        };
        match outcome {
            Ok(done) => {
                part.backoff = Duration::ZERO;
                part.last_error = None;
                if part.in_flight == 0 {
                    part.recovering = false;
                }
                self.finish(st, Ok(done), batch.slot);
            }
            Err((code, e)) => {
                let again = retriable(ErrorCode::from_code(code))
                    || (code == OUT_OF_ORDER_SEQUENCE_NUMBER && part.recovering);
                if again && batch.deadline > Instant::now() {
                    // Back in the queue before the batches sent after it (and after
                    // those sent before it), so the partition resends in order.
                    let at = part
                        .queue
                        .iter()
                        .position(|b| match (b.sequence, batch.sequence) {
                            (Some(s), Some(mine)) => s > mine,
                            (None, _) => true,
                            (Some(_), None) => false,
                        })
                        .unwrap_or(part.queue.len());
                    part.queue.insert(at, batch);
                    part.recovering = part.in_flight > 0;
                    part.leader = None;
                    self.cluster.invalidate(topic);
                    self.pause(st, topic, partition, e);
                } else {
                    // A gap in the sequences: the batches after this one fail with
                    // OUT_OF_ORDER_SEQUENCE and are numbered again under a new id.
                    part.recovering = part.in_flight > 0;
                    if self.idempotent() && self.txn.is_none() {
                        st.renew_id = true;
                    }
                    self.finish(st, Err(e), batch.slot);
                }
                if part_mut(st, topic, partition).in_flight == 0 {
                    part_mut(st, topic, partition).recovering = false;
                }
            }
        }
    }

    /// Seals every open batch and waits until every batch sealed so far is finished;
    /// returns (and clears) the first failure since the last flush.
    fn flush(&self) -> Result<()> {
        let mut st = self.state.lock();
        st.flushing += 1;
        self.wake_all();
        let deadline = Instant::now() + self.flush_timeout();
        while !Self::idle(&st) {
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

/// The state of `partition` of `topic` (created empty).
fn part_mut<'a>(st: &'a mut State, topic: &str, partition: i32) -> &'a mut Part {
    if !st.parts.contains_key(topic) {
        st.parts.insert(topic.to_string(), HashMap::new());
    }
    st.parts
        .get_mut(topic)
        .expect("inserted above")
        .entry(partition)
        .or_default()
}

/// Forgets every sequence: a new producer id or epoch numbers the waiting batches from
/// 0 again.
fn renumber(st: &mut State) {
    for part in st.parts.values_mut().flat_map(|t| t.values_mut()) {
        part.next_sequence = 0;
        part.recovering = false;
        for b in &mut part.queue {
            b.sequence = None;
        }
    }
}

/// Writes the producer id, epoch and sequence into the batch `bytes` (copied only when
/// a request still holds it).
fn stamp(bytes: &mut Bytes, id: i64, epoch: i16, sequence: i32) {
    let mut buf = match std::mem::take(bytes).try_into_mut() {
        Ok(buf) => buf,
        Err(shared) => BytesMut::from(&shared[..]),
    };
    set_producer(&mut buf, id, epoch, sequence);
    *bytes = buf.freeze();
}

/// The batch `open`, finished, to be delivered within `delivery_timeout` of its start.
fn seal(mut open: Open, delivery_timeout: Duration) -> Batch {
    Batch {
        bytes: Bytes::from(open.builder.finish()),
        records: open.records,
        slot: open.slot,
        sequence: None,
        deadline: open.created + delivery_timeout,
    }
}

#[cfg(all(test, feature = "server"))]
impl ClusterProducer {
    /// How often a record woke the dispatcher so far.
    pub(super) fn dispatcher_kicks(&self) -> usize {
        self.shared.state.lock().kicks
    }
}

impl RemoteProducer for ClusterProducer {
    fn config(&self) -> &ProducerConfig {
        &self.config
    }

    fn producer_id(&self) -> Option<(i64, i16)> {
        self.shared.state.lock().id
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
                || self.queue(topic, partition, record, true),
            ),
            None => self.queue(topic, partition, record, false),
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
        self.shared.wake_all();
        if let Some(h) = self.dispatcher.lock().take() {
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

    /// For an abort: fails the records not sent yet, waits for the batches in flight,
    /// and returns whether a batch of the transaction failed (its error is cleared).
    fn drop_batches(&self, transactional_id: &str) -> bool {
        let shared = &self.shared;
        let mut st = shared.state.lock();
        let mut dropped: Vec<RemoteSlot> = Vec::new();
        let mut queued = 0;
        for part in st.parts.values_mut().flat_map(|t| t.values_mut()) {
            dropped.extend(part.open.take().map(|o| o.slot));
            queued += part.queue.len();
            dropped.extend(part.queue.drain(..).map(|b| b.slot));
            part.recovering = false;
            part.retry_at = None;
        }
        st.pending -= queued;
        let deadline = Instant::now() + shared.flush_timeout();
        while st.in_flight > 0 {
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

    /// Puts the record in the open batch of `partition` of `topic`; `in_transaction`:
    /// refused with the transaction's first failed batch if it has one (looked at
    /// under the lock the record is queued with).
    fn queue(
        &self,
        topic: &str,
        partition: i32,
        record: &ProducerRecord<'_>,
        in_transaction: bool,
    ) -> Result<DeliveryReceipt> {
        let shared = &self.shared;
        let timestamp = record.timestamp.unwrap_or_else(crate::record::now_ms);
        let size = BatchBuilder::record_size(0, 0, record.key, record.value, record.headers) + 16;
        let delivery_timeout = shared.cluster.delivery_timeout();
        let mut st = shared.state.lock();
        if in_transaction && let Some(e) = &st.txn_failed {
            return Err(e.clone());
        }
        let part = part_mut(&mut st, topic, partition);
        let led = part.leader.is_some();
        let full = part.open.as_ref().is_some_and(|o| {
            o.records > 0 && o.builder.size_bytes() + size > self.config.batch_size
        });
        let mut sealed = false;
        if full && let Some(open) = part.open.take() {
            part.queue.push_back(seal(open, delivery_timeout));
            sealed = true;
        }
        let first = part.open.is_none();
        let linger = self.config.linger;
        let attributes = if shared.txn.is_some() {
            TRANSACTIONAL_BIT
        } else {
            0
        };
        let open = part.open.get_or_insert_with(|| Open {
            builder: BatchBuilder::new()
                .compression(self.config.compression)
                .attributes(attributes),
            slot: RemoteSlot::default(),
            records: 0,
            created: Instant::now(),
        });
        let created = open.created;
        open.builder
            .push(timestamp, record.key, record.value, record.headers);
        let index = open.records;
        open.records += 1;
        let receipt = match self.config.acks {
            // No offset comes back: the receipt reports -1.
            Acks::None => open.slot.receipt(0, partition, timestamp),
            _ => open.slot.receipt(index, partition, timestamp),
        };
        if sealed {
            st.pending += 1;
        }
        // Who acts on it: the broker thread when the partition has a leader and a
        // batch may go now, else the dispatcher (a leader to look up, or a linger to
        // time). With a linger of 0 the dispatcher is not woken per record; nor for a
        // new batch's linger when it wakes by itself before that runs out (batches
        // that fill in less than a linger would wake it once each).
        if led && (sealed || linger.is_zero()) {
            shared.wake.notify_all();
        }
        // Looked at only for a new batch: not on the path of every record.
        let sleeps_past_linger = || {
            st.dispatcher_wakes
                .is_some_and(|at| created.checked_add(linger).is_some_and(|due| at > due))
        };
        let times_linger = led && first && !linger.is_zero();
        if (!led && (sealed || first)) || (times_linger && sleeps_past_linger()) {
            #[cfg(all(test, feature = "server"))]
            {
                st.kicks += 1;
            }
            shared.kick.notify_one();
        }
        Ok(receipt)
    }
}

impl Drop for ClusterProducer {
    fn drop(&mut self) {
        let _ = RemoteProducer::close(self);
    }
}
