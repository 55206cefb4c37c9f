//! The producer: partitioning, batching and delivery of records.
//!
//! A [`Producer`] is cloneable and `Send + Sync`. Each thread that sends through it (or
//! a clone) fills its own RecordBatch v2 batch per partition (see `accumulator.rs`), so
//! senders never wait for each other, and each thread's records keep their order within
//! a partition; `flush`, `close` and the linger thread append every thread's batches.
//! A send takes no lock other threads contend for, allocates nothing (but a receipt's
//! slot, once per batch), and reads the coarse clock ([`crate::record::now_ms`]). Acknowledgement
//! levels keep Kafka's names with their in-process meaning documented on [`Acks`].
//!
//! With a `transactional_id` the producer writes in transactions (`transaction.rs`):
//! [`Producer::init_transactions`], [`Producer::begin_transaction`],
//! [`Producer::send_offsets_to_transaction`], [`Producer::commit_transaction`] and
//! [`Producer::abort_transaction`] drive the broker's transaction coordinator, and the
//! records of a transaction are appended as its transactional batches.

mod accumulator;
mod backend;
mod partitioner;
mod transaction;
#[cfg(all(test, feature = "server"))]
pub(crate) use transaction::test_batches;

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::broker::Broker;
use crate::error::{Error, Result};
use crate::record::{Compression, now_ms};
use crate::topic::Topic;
use accumulator::{
    AppendResult, BatchSlot, Delivery, ErrorSink, Forget, Lane, LaneConfig, Now, Rec, Receipt,
};

pub use backend::Destination;
use backend::Target;
// Implemented by the network client (feature `client`); unused without it.
#[cfg_attr(not(feature = "client"), allow(unused_imports))]
pub(crate) use backend::{RemoteLog, RemoteProducer, RemoteSlot};
pub use partitioner::{
    DefaultPartitioner, Partitioner, RoundRobinPartitioner, murmur2, partition_for_key, to_positive,
};
pub use transaction::ConsumerGroupMetadata;
// The network producer checks its settings as the in-process one (feature `client`).
#[cfg(feature = "client")]
pub(crate) use transaction::transaction_timeout_ms;

/// A record to send. Borrows its key, value and headers: nothing is copied until the
/// record is encoded into its batch.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProducerRecord<'a> {
    /// The key (partitioning and compaction use it), or None.
    pub key: Option<&'a [u8]>,
    /// The value, or None for a tombstone.
    pub value: Option<&'a [u8]>,
    /// Headers as (name, value) pairs.
    pub headers: &'a [(&'a str, &'a [u8])],
    /// An explicit partition; None lets the partitioner choose.
    pub partition: Option<i32>,
    /// CreateTime in ms since the epoch; None uses the current time, read from the
    /// kernel's coarse clock (at most one timer tick, 1 to 4 ms, behind the system
    /// clock; see [`ProducerRecord::timestamp`] to set it exactly).
    pub timestamp: Option<i64>,
}

impl<'a> ProducerRecord<'a> {
    /// A record with a value and no key.
    pub fn new(value: &'a [u8]) -> Self {
        ProducerRecord {
            value: Some(value),
            ..Default::default()
        }
    }

    /// A record with a key and a value.
    pub fn keyed(key: &'a [u8], value: &'a [u8]) -> Self {
        ProducerRecord {
            key: Some(key),
            value: Some(value),
            ..Default::default()
        }
    }

    /// Sets the key.
    #[must_use]
    pub fn key(mut self, key: &'a [u8]) -> Self {
        self.key = Some(key);
        self
    }

    /// Sends to this partition instead of asking the partitioner.
    #[must_use]
    pub fn partition(mut self, partition: i32) -> Self {
        self.partition = Some(partition);
        self
    }

    /// Sets the CreateTime timestamp (ms since the epoch).
    #[must_use]
    pub fn timestamp(mut self, timestamp: i64) -> Self {
        self.timestamp = Some(timestamp);
        self
    }

    /// Sets the headers.
    #[must_use]
    pub fn headers(mut self, headers: &'a [(&'a str, &'a [u8])]) -> Self {
        self.headers = headers;
        self
    }
}

/// Where a record was stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordMetadata {
    /// The partition.
    pub partition: i32,
    /// The record's offset (-1 with `Acks::None`, as in Kafka).
    pub offset: i64,
    /// The record's timestamp: its CreateTime, or the broker's LogAppendTime for topics
    /// configured so.
    pub timestamp: i64,
}

/// How much of the write a send waits for (Kafka `acks`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acks {
    /// `acks=0`: `send` returns once the record is in the accumulator; the offset is
    /// reported as -1. The record is appended with its batch (linger, size or flush);
    /// if that fails, `flush` or `close` returns the error.
    None,
    /// `acks=1`: `send` returns once the batch is appended to the partition's log
    /// (in the page cache; visible to consumers).
    Leader,
    /// `acks=all`: on a cluster node, `send` returns once every in-sync replica has the
    /// record (the partition's high watermark passed it), or fails after 30 s (Kafka's
    /// `request.timeout.ms`) with `Error::Timeout`; elsewhere the same as `Leader`.
    /// Kafka's default.
    All,
}

/// Whether an acknowledged write is on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// Acknowledged once in the page cache; flushed by the OS or by the topic's
    /// `flush.messages` / `flush.ms` (Kafka's behaviour). Default.
    #[default]
    PageCache,
    /// Acknowledged only once the partition is fsynced past the record. The fsync is
    /// waited for after the append released the partition's locks, through the log's
    /// group commit ([`crate::storage::PartitionLog::sync_to`]): concurrent senders
    /// share fsyncs, about one per round of N records for N threads sending at once.
    Fsync,
}

/// A receipt for a record sent with [`Producer::send_async`]: wait on it for the
/// record's offset.
#[derive(Debug)]
#[must_use = "a receipt does nothing unless waited on; drop it to fire and forget"]
pub struct DeliveryReceipt {
    slot: Arc<BatchSlot>,
    index: i32,
    partition: i32,
    timestamp: i64,
    /// `acks=all` on a replicated partition: the partition whose high watermark must
    /// pass the record.
    committed: Option<crate::topic::Partition>,
}

/// How long an `acks=all` send waits for the in-sync replicas (Kafka's
/// `request.timeout.ms` default).
const ACKS_ALL_TIMEOUT: Duration = Duration::from_secs(30);

/// The metadata of the record at `index` of a batch appended with outcome `r`, once
/// `committed` (if any) has it in every in-sync replica.
fn record_metadata(
    r: AppendResult,
    index: i32,
    partition: i32,
    timestamp: i64,
    committed: Option<&crate::topic::Partition>,
) -> Result<RecordMetadata> {
    let a = r?;
    let offset = a.base_offset + i64::from(index);
    if let Some(p) = committed {
        p.wait_committed_at(offset, a.epoch, ACKS_ALL_TIMEOUT)?;
    }
    Ok(RecordMetadata {
        partition,
        offset,
        timestamp: a.log_append_time.unwrap_or(timestamp),
    })
}

impl DeliveryReceipt {
    fn metadata(&self, r: AppendResult) -> Result<RecordMetadata> {
        record_metadata(
            r,
            self.index,
            self.partition,
            self.timestamp,
            self.committed.as_ref(),
        )
    }

    /// Blocks until the record's batch is appended (linger, size, flush or close).
    pub fn wait(self) -> Result<RecordMetadata> {
        match self.slot.wait(None) {
            Some(r) => self.metadata(r),
            None => Err(Error::Timeout("delivery receipt".into())),
        }
    }

    /// Waits at most `timeout`; `Error::Timeout` if the batch is still open.
    pub fn wait_timeout(&self, timeout: Duration) -> Result<RecordMetadata> {
        match self.slot.wait(Some(Instant::now() + timeout)) {
            Some(r) => self.metadata(r),
            None => Err(Error::Timeout(format!(
                "record for partition {} not appended within {timeout:?}",
                self.partition
            ))),
        }
    }

    /// True once the batch was appended (or failed).
    pub fn is_done(&self) -> bool {
        self.slot.is_done()
    }
}

/// Settings of a [`Producer`]. Defaults mirror the Kafka producer's.
#[derive(Clone)]
pub struct ProducerConfig {
    /// How long a batch waits for more records (`linger.ms`). Default 5 ms (Kafka 4.0's
    /// default). 0 appends each async send at once.
    pub linger: Duration,
    /// Target batch size in bytes (`batch.size`). Default 16384.
    pub batch_size: usize,
    /// Acknowledgement level (`acks`). Default `All`.
    pub acks: Acks,
    /// Fsync before acknowledging. Default `PageCache`.
    pub durability: Durability,
    /// Chooses partitions (`partitioner.class`). Default [`DefaultPartitioner`].
    pub partitioner: Arc<dyn Partitioner>,
    /// The codec batches are compressed with (`compression.type`). Default
    /// [`Compression::None`]. A topic whose own `compression.type` names a codec (or
    /// `uncompressed`) gets that one instead, as a Kafka broker would store it.
    pub compression: Compression,
    /// `transactional.id`: makes the producer transactional (see
    /// [`Producer::init_transactions`]). Default None.
    pub transactional_id: Option<String>,
    /// `transaction.timeout.ms`: how long the coordinator lets a transaction stay open
    /// before it aborts it. Default 60 s.
    pub transaction_timeout: Duration,
    /// `max.in.flight.requests.per.connection`: how many Produce requests a producer
    /// over the network keeps unanswered on a broker connection. Default 5 (Kafka's,
    /// and the most its idempotence allows). The in-process producer ignores it.
    pub max_in_flight: usize,
}

impl std::fmt::Debug for ProducerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProducerConfig")
            .field("linger", &self.linger)
            .field("batch_size", &self.batch_size)
            .field("acks", &self.acks)
            .field("durability", &self.durability)
            .field("compression", &self.compression)
            .field("transactional_id", &self.transactional_id)
            .field("transaction_timeout", &self.transaction_timeout)
            .field("max_in_flight", &self.max_in_flight)
            .finish()
    }
}

impl Default for ProducerConfig {
    fn default() -> Self {
        ProducerConfig {
            linger: Duration::from_millis(5),
            batch_size: 16384,
            acks: Acks::All,
            durability: Durability::PageCache,
            partitioner: Arc::new(DefaultPartitioner::default()),
            compression: Compression::None,
            transactional_id: None,
            transaction_timeout: Duration::from_secs(60),
            max_in_flight: 5,
        }
    }
}

/// Builds a [`Producer`].
#[derive(Debug)]
#[must_use]
pub struct ProducerBuilder {
    target: Destination,
    config: ProducerConfig,
    /// `config.partitioner` while it is the default one, known by its type: sends call
    /// it directly (inlined) instead of through the trait object.
    default_partitioner: Option<Arc<DefaultPartitioner>>,
}

impl ProducerBuilder {
    /// `linger.ms`. Default 5 ms.
    pub fn linger(mut self, linger: Duration) -> Self {
        self.config.linger = linger;
        self
    }

    /// `batch.size` in bytes. Default 16384.
    pub fn batch_size(mut self, bytes: usize) -> Self {
        self.config.batch_size = bytes.max(64);
        self
    }

    /// `max.in.flight.requests.per.connection`: Produce requests a producer over the
    /// network keeps unanswered per broker connection: at least 1, and at most 5 with
    /// `acks=all` (idempotence keeps order only that far, as in Kafka). Default 5.
    pub fn max_in_flight(mut self, requests: usize) -> Self {
        self.config.max_in_flight = requests;
        self
    }

    /// `acks`. Default `All`.
    pub fn acks(mut self, acks: Acks) -> Self {
        self.config.acks = acks;
        self
    }

    /// Fsync before acknowledging. Default `PageCache`.
    pub fn durability(mut self, durability: Durability) -> Self {
        self.config.durability = durability;
        self
    }

    /// `compression.type`: the codec batches are compressed with. Default
    /// [`Compression::None`]. A topic whose `compression.type` is not `producer`
    /// overrides it.
    ///
    /// ```
    /// use tidelog::{Broker, Compression, Producer, ProducerRecord, TopicConfig};
    /// # let dir = tempfile::tempdir()?;
    /// let broker = Broker::open(dir.path())?;
    /// broker.create_topic("logs", 1, TopicConfig::new())?;
    /// let producer = Producer::builder(&broker).compression(Compression::Zstd).build()?;
    /// producer.send("logs", ProducerRecord::new(b"a line of text"))?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn compression(mut self, codec: Compression) -> Self {
        self.config.compression = codec;
        self
    }

    /// `transactional.id`: the producer writes in transactions
    /// ([`Producer::init_transactions`], [`Producer::begin_transaction`], ...); a
    /// later producer with the same id fences this one.
    pub fn transactional_id(mut self, id: impl Into<String>) -> Self {
        self.config.transactional_id = Some(id.into());
        self
    }

    /// `transaction.timeout.ms`: how long the coordinator lets a transaction of this
    /// producer stay open before it aborts it. Default 60 s.
    pub fn transaction_timeout(mut self, timeout: Duration) -> Self {
        self.config.transaction_timeout = timeout;
        self
    }

    /// A custom partitioner. Default [`DefaultPartitioner`].
    pub fn partitioner(mut self, partitioner: impl Partitioner) -> Self {
        self.config.partitioner = Arc::new(partitioner);
        self.default_partitioner = None;
        self
    }

    /// Creates the producer (and its linger thread when `linger > 0`).
    ///
    /// # Errors
    /// On a cluster over the network, the errors of asking the cluster for a producer
    /// id (an idempotent producer; a transactional one asks in `init_transactions`),
    /// and [`Error::InvalidConfig`] for a `transactional.id` without `acks=all`.
    pub fn build(self) -> Result<Producer> {
        match self.target.0 {
            Target::Local(broker) => {
                Producer::with_config(broker, self.config, self.default_partitioner)
            }
            Target::Remote(log) => Ok(Producer {
                backend: Backend::Remote(log.producer(self.config)?),
            }),
        }
    }
}

/// FNV-1a: topic names are the application's own, so a fast hash without DoS
/// resistance suits the lookup of a topic a thread did not send to last.
#[derive(Default)]
struct Fnv(u64);

impl std::hash::Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut h = if self.0 == 0 {
            0xcbf2_9ce4_8422_2325
        } else {
            self.0
        };
        for b in bytes {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        self.0 = h;
    }
}

/// `a == b` for names as short as topic names usually are, compared in place: two
/// overlapping words, of 8 bytes for 8 to 16 bytes and of 4 for 4 to 7, and the
/// first, middle and last byte below 4 (a send compares the topic it is given with the
/// one it sent to last, and a call to `memcmp` cost as much as the rest of that
/// lookup).
#[inline(always)]
fn same_name(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    // The first and the last `W` bytes of both, as words.
    fn ends_match<const W: usize>(a: &[u8], b: &[u8]) -> bool {
        let word = |s: &[u8], at: usize| -> [u8; W] {
            let mut w = [0u8; W];
            w.copy_from_slice(&s[at..at + W]);
            w
        };
        let last = a.len() - W;
        word(a, 0) == word(b, 0) && word(a, last) == word(b, last)
    }
    match n {
        0 => true,
        1..=3 => a[0] == b[0] && a[n / 2] == b[n / 2] && a[n - 1] == b[n - 1],
        4..=7 => ends_match::<4>(a, b),
        8..=16 => ends_match::<8>(a, b),
        _ => a == b,
    }
}

/// Ids of producers, so that a thread finds its lanes of one producer.
static PRODUCER_IDS: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// The lanes of every producer this thread sends through.
    static THREAD_LANES: RefCell<Vec<ThreadLanes>> = const { RefCell::new(Vec::new()) };
}

/// One thread's lanes of one topic, by partition.
struct TopicLanes {
    name: Box<str>,
    topic: Topic,
    lanes: Vec<Option<Arc<Lane>>>,
}

/// One thread's lanes of one producer. Dropping it (the thread ends, or the producer is
/// gone) hands its lanes to the producer's linger thread and `flush`, which append
/// what is left.
struct ThreadLanes {
    producer: u64,
    inner: Weak<ProducerInner>,
    topics: Vec<TopicLanes>,
    by_name: HashMap<Box<str>, usize, std::hash::BuildHasherDefault<Fnv>>,
    /// The topic sent to last.
    last: usize,
}

impl ThreadLanes {
    fn new(inner: &Arc<ProducerInner>) -> Self {
        ThreadLanes {
            producer: inner.id,
            inner: Arc::downgrade(inner),
            topics: Vec::new(),
            by_name: HashMap::default(),
            last: 0,
        }
    }

    /// The index of `topic`'s lanes, looking the topic up (again, if it was deleted)
    /// when needed. Inlined into the send even though the compiler would not: the
    /// call's saved registers and returned `Result` cost about 29 instructions a
    /// record, more than the check itself.
    #[inline(always)]
    fn topic(&mut self, inner: &ProducerInner, topic: &str) -> Result<usize> {
        if let Some(t) = self.topics.get(self.last)
            && same_name(t.name.as_bytes(), topic.as_bytes())
            && !t.topic.inner.deleted.load(Ordering::Acquire)
        {
            return Ok(self.last);
        }
        self.find_topic(inner, topic)
    }

    #[cold]
    fn find_topic(&mut self, inner: &ProducerInner, topic: &str) -> Result<usize> {
        let i = match self.by_name.get(topic) {
            Some(&i) if !self.topics[i].topic.inner.deleted.load(Ordering::Acquire) => i,
            found => {
                let t = inner.broker.topic(topic)?;
                let lanes = TopicLanes {
                    name: topic.into(),
                    topic: t,
                    lanes: Vec::new(),
                };
                match found {
                    // Deleted (and perhaps created again): the old lanes go.
                    Some(&i) => {
                        let old = std::mem::replace(&mut self.topics[i], lanes);
                        old.lanes.iter().flatten().for_each(|l| l.orphan());
                        i
                    }
                    None => {
                        self.topics.push(lanes);
                        self.by_name.insert(topic.into(), self.topics.len() - 1);
                        self.topics.len() - 1
                    }
                }
            }
        };
        self.last = i;
        Ok(i)
    }

    /// Chooses the partition of `record` and pushes it into this thread's lane of it.
    /// Inlined into the send: a call would save and restore six registers and pass
    /// the record and its result through memory, for every record.
    #[inline(always)]
    fn push<D: Delivery>(
        &mut self,
        inner: &ProducerInner,
        topic: &str,
        record: &ProducerRecord<'_>,
        timestamp: i64,
        delivery: D,
    ) -> Result<(i32, D::Out)> {
        let t = self.topic(inner, topic)?;
        // `Topic::partition_count`, read here so that it is inlined.
        let count = self.topics[t]
            .topic
            .inner
            .partition_count
            .load(Ordering::Acquire);
        let partition = match &inner.default_partitioner {
            Some(default) => choose_partition(&**default, topic, record, count)?,
            None => choose_partition(&*inner.config.partitioner, topic, record, count)?,
        };
        let lane = match self.topics[t].lanes.get(partition as usize) {
            Some(Some(lane)) => lane,
            _ => self.add_lane(inner, t, partition)?,
        };
        let rec = Rec {
            timestamp,
            key: record.key,
            value: record.value,
            headers: record.headers,
        };
        let pushed = lane.push(&rec, delivery, inner.lane_config, &inner.errors)?;
        Ok((partition, pushed))
    }

    /// Makes this thread's lane of partition `p` of topic `t` and registers it with
    /// the producer.
    #[cold]
    fn add_lane(&mut self, inner: &ProducerInner, t: usize, p: i32) -> Result<&Arc<Lane>> {
        let lanes = &mut self.topics[t];
        let partition = lanes.topic.partition(p)?;
        let lane = Arc::new(Lane::new(
            partition,
            inner.config.batch_size,
            inner.config.compression,
        ));
        inner.register(&lane);
        let i = p as usize;
        if lanes.lanes.len() <= i {
            lanes.lanes.resize(i + 1, None);
        }
        Ok(lanes.lanes[i].insert(lane))
    }

    /// Appends this thread's open batch of one partition, if it has one.
    fn flush_partition(&mut self, inner: &ProducerInner, topic: &str, p: i32) -> Result<()> {
        let t = self.topic(inner, topic)?;
        match self.topics[t].lanes.get(p as usize) {
            Some(Some(lane)) => lane.flush(inner.lane_config.fsync, &inner.errors),
            _ => Ok(()),
        }
    }
}

impl Drop for ThreadLanes {
    fn drop(&mut self) {
        for lane in self.topics.iter().flat_map(|t| t.lanes.iter().flatten()) {
            lane.orphan();
        }
    }
}

struct ProducerInner {
    /// Tells this producer's lanes from another's in a thread's `THREAD_LANES`.
    id: u64,
    broker: Broker,
    config: ProducerConfig,
    /// `config.partitioner` when it is the default one (see [`ProducerBuilder`]).
    default_partitioner: Option<Arc<DefaultPartitioner>>,
    lane_config: LaneConfig,
    /// Every thread's lanes: what `flush`, `close` and the linger thread append.
    lanes: Mutex<Vec<Arc<Lane>>>,
    /// Lanes for sends that cannot use the thread's own (from a thread-local
    /// destructor, or from inside a custom partitioner).
    shared: Mutex<Option<ThreadLanes>>,
    /// Errors of appends nobody waits on, for `flush` and `close`.
    errors: ErrorSink,
    closed: AtomicBool,
    linger_thread: Mutex<Option<JoinHandle<()>>>,
    /// The transactional side, with a `transactional.id`.
    txn: Option<transaction::TxnProducer>,
}

/// Sends records to topics. Cloneable and `Send + Sync`: clones share batches.
///
/// Each thread that sends fills its own batch per partition, so threads do not contend
/// on a send; `flush`, `close` and the linger thread append every thread's batches.
/// Dropping the last clone (or [`Producer::close`]) appends every open batch.
///
/// On a cluster over the network (`Producer::new(&cluster)`, feature `client`) the
/// same calls batch per partition and send each batch to the partition's leader.
#[derive(Clone)]
pub struct Producer {
    backend: Backend,
}

/// In process, or over the network: chosen once, when the producer is built.
#[derive(Clone)]
enum Backend {
    Local(Arc<ProducerInner>),
    Remote(Arc<dyn RemoteProducer>),
}

impl std::fmt::Debug for Producer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Producer")
            .field("config", self.config())
            .finish()
    }
}

impl Producer {
    /// A producer with default settings, on a [`Broker`] (`&broker`) or a cluster over
    /// the network (`&cluster`).
    pub fn new(log: impl Into<Destination>) -> Result<Producer> {
        Producer::builder(log).build()
    }

    /// A builder for a producer on `log`: a [`Broker`] (`&broker`) or a cluster over the
    /// network (`&cluster`).
    pub fn builder(log: impl Into<Destination>) -> ProducerBuilder {
        let default_partitioner = Arc::new(DefaultPartitioner::default());
        ProducerBuilder {
            target: log.into(),
            config: ProducerConfig {
                partitioner: Arc::clone(&default_partitioner) as Arc<dyn Partitioner>,
                ..ProducerConfig::default()
            },
            default_partitioner: Some(default_partitioner),
        }
    }

    /// The side that runs the transactional call `operation`: the in-process
    /// producer's (checked open), or the one over the network.
    fn txn_side(&self, operation: &'static str) -> Result<TxnSide<'_>> {
        match &self.backend {
            Backend::Local(inner) => {
                inner.check_open()?;
                Ok(TxnSide::Local(inner.txn(operation)?))
            }
            Backend::Remote(remote) => Ok(TxnSide::Remote(&**remote)),
        }
    }

    fn with_config(
        broker: Broker,
        config: ProducerConfig,
        default_partitioner: Option<Arc<DefaultPartitioner>>,
    ) -> Result<Producer> {
        let linger = config.linger;
        let lane_config = LaneConfig {
            batch_size: config.batch_size,
            fsync: config.durability == Durability::Fsync,
            immediate: linger.is_zero(),
            acks_all: config.acks == Acks::All,
        };
        let txn = match &config.transactional_id {
            Some(id) => Some(transaction::TxnProducer::new(
                broker.clone(),
                id.clone(),
                config.transaction_timeout,
                config.batch_size,
                config.compression,
            )?),
            None => None,
        };
        let inner = Arc::new(ProducerInner {
            id: PRODUCER_IDS.fetch_add(1, Ordering::Relaxed),
            broker,
            config,
            default_partitioner,
            lane_config,
            lanes: Mutex::new(Vec::new()),
            shared: Mutex::new(None),
            errors: ErrorSink::default(),
            closed: AtomicBool::new(false),
            linger_thread: Mutex::new(None),
            txn,
        });
        if !linger.is_zero() {
            let weak = Arc::downgrade(&inner);
            let handle = std::thread::Builder::new()
                .name("tidelog-producer-linger".into())
                .spawn(move || linger_loop(&weak, linger))
                .map_err(|e| Error::io("spawn producer linger thread", "<producer>", e))?;
            *inner.linger_thread.lock() = Some(handle);
        }
        Ok(Producer {
            backend: Backend::Local(inner),
        })
    }

    /// The producer's settings.
    pub fn config(&self) -> &ProducerConfig {
        match &self.backend {
            Backend::Local(inner) => &inner.config,
            Backend::Remote(remote) => remote.config(),
        }
    }
}

impl ProducerInner {
    #[inline]
    fn check_open(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) || self.broker.is_closed() {
            return Err(self.closed_error());
        }
        Ok(())
    }

    /// What [`ProducerInner::check_open`] returns once the producer or its broker closed.
    #[cold]
    fn closed_error(&self) -> Error {
        if self.closed.load(Ordering::Acquire) {
            return Error::Closed("producer".into());
        }
        Error::Closed(format!("broker at {}", self.broker.dir().display()))
    }

    /// Runs `f` on the calling thread's lanes of this producer; from a thread-local
    /// destructor, or from a send inside a custom partitioner (when the thread's lanes
    /// are in use), on the producer's shared lanes instead.
    #[inline]
    fn with_lanes<R>(
        self: &Arc<Self>,
        mut f: impl FnMut(&mut ThreadLanes) -> Result<R>,
    ) -> Result<R> {
        let local = THREAD_LANES.try_with(|cell| {
            let mut all = cell.try_borrow_mut().ok()?;
            let id = self.id;
            let i = match all.iter().position(|l| l.producer == id) {
                Some(i) => i,
                None => {
                    // Drop the lanes of producers that are gone (their batches were
                    // appended when they closed).
                    all.retain(|l| {
                        l.inner
                            .upgrade()
                            .is_some_and(|p| !p.closed.load(Ordering::Acquire))
                    });
                    all.push(ThreadLanes::new(self));
                    all.len() - 1
                }
            };
            Some(f(&mut all[i]))
        });
        match local {
            Ok(Some(r)) => r,
            _ => {
                let mut shared = self.shared.lock();
                f(shared.get_or_insert_with(|| ThreadLanes::new(self)))
            }
        }
    }

    /// Puts the record in this thread's batch of its partition; returns the partition,
    /// the record's timestamp and what `delivery` gives back.
    #[inline]
    fn enqueue<D: Delivery>(
        self: &Arc<Self>,
        topic: &str,
        record: &ProducerRecord<'_>,
        delivery: D,
    ) -> Result<(i32, i64, D::Out)> {
        self.check_open()?;
        let timestamp = record.timestamp.unwrap_or_else(now_ms);
        let (partition, out) =
            self.with_lanes(|l| l.push(self, topic, record, timestamp, delivery))?;
        Ok((partition, timestamp, out))
    }

    /// [`ProducerInner::enqueue`] without a receipt, as `send_nowait` sends: on the
    /// calling thread's own lanes, the whole push is inlined here (no closure called
    /// through a pointer, no result moved through the layers of `with_lanes`); from a
    /// thread-local destructor or inside a custom partitioner, `with_lanes`.
    #[inline(always)]
    fn enqueue_forget(self: &Arc<Self>, topic: &str, record: &ProducerRecord<'_>) -> Result<()> {
        self.check_open()?;
        let timestamp = record.timestamp.unwrap_or_else(now_ms);
        let id = self.id;
        // The push's error, if any, is boxed and left here rather than returned through
        // the thread-local's closure: a send that succeeds moves a flag and a pointer,
        // not a whole `Result`.
        let mut failed: Option<Box<Error>> = None;
        let own = THREAD_LANES.try_with(|cell| {
            let Ok(mut all) = cell.try_borrow_mut() else {
                return false;
            };
            let Some(lanes) = all.iter_mut().find(|l| l.producer == id) else {
                return false;
            };
            if let Err(e) = lanes.push(self, topic, record, timestamp, Forget) {
                failed = Some(Box::new(e));
            }
            true
        });
        match (own, failed) {
            (_, Some(e)) => Err(*e),
            (Ok(true), None) => Ok(()),
            _ => self
                .with_lanes(|l| l.push(self, topic, record, timestamp, Forget))
                .map(|_| ()),
        }
    }

    /// Appends this thread's open batch of one partition now.
    fn flush_partition(self: &Arc<Self>, topic: &str, partition: i32) -> Result<()> {
        self.with_lanes(|l| l.flush_partition(self, topic, partition))
    }
}

impl Producer {
    /// Sends one record and returns where it was stored (after its batch is appended;
    /// with `Acks::None`, at once with offset -1). Records this thread sent earlier to
    /// the same partition without waiting go in the same batch.
    pub fn send(&self, topic: &str, record: ProducerRecord<'_>) -> Result<RecordMetadata> {
        let inner = match &self.backend {
            Backend::Local(inner) => inner,
            Backend::Remote(remote) => {
                let receipt = remote.send_async(topic, &record)?;
                return match remote.config().acks {
                    Acks::None => Ok(backend::unacknowledged(&receipt)),
                    _ => receipt.wait(),
                };
            }
        };
        if let Some(txn) = &inner.txn {
            let append_now = inner.config.acks != Acks::None;
            return inner.send_in_transaction(txn, topic, &record, append_now);
        }
        if inner.config.acks == Acks::None {
            let (partition, timestamp, ()) = inner.enqueue(topic, &record, Forget)?;
            return Ok(RecordMetadata {
                partition,
                offset: -1,
                timestamp,
            });
        }
        let (partition, timestamp, (result, index, committed)) =
            inner.enqueue(topic, &record, Now)?;
        record_metadata(result, index, partition, timestamp, committed.as_ref())
    }

    /// Sends a record without waiting; the receipt gives its offset once its batch is
    /// appended (after `linger`, when the batch is full, or on `flush`).
    pub fn send_async(&self, topic: &str, record: ProducerRecord<'_>) -> Result<DeliveryReceipt> {
        let inner = match &self.backend {
            Backend::Local(inner) => inner,
            Backend::Remote(remote) => return remote.send_async(topic, &record),
        };
        if let Some(txn) = &inner.txn {
            // A transaction's batch is appended at once: the receipt is ready.
            let (partition, timestamp, appended) =
                inner.push_in_transaction(txn, topic, &record, true)?;
            let (appended, index) = appended.ok_or_else(|| {
                Error::InvalidBatch(format!(
                    "{topic}-{partition}: transactional batch not appended"
                ))
            })?;
            return Ok(DeliveryReceipt {
                slot: BatchSlot::completed(Ok(appended)),
                index,
                partition,
                timestamp,
                committed: None,
            });
        }
        let (partition, timestamp, (slot, index, committed)) =
            inner.enqueue(topic, &record, Receipt)?;
        Ok(DeliveryReceipt {
            slot,
            index,
            partition,
            timestamp,
            committed,
        })
    }

    /// Sends a record without a receipt (fire and forget): the cheapest send. The
    /// record goes into this thread's batch of its partition, which is appended after
    /// `linger`, when it is full, or on `flush`. If that append fails, the next
    /// [`Producer::flush`] or [`Producer::close`] returns the error (the first one since
    /// the previous `flush`). An error known at once (an unknown topic or partition, a
    /// closed producer) is returned here.
    ///
    /// ```
    /// use tidelog::{Broker, Producer, ProducerRecord, TopicConfig};
    /// # let dir = tempfile::tempdir()?;
    /// let broker = Broker::open(dir.path())?;
    /// broker.create_topic("clicks", 4, TopicConfig::new())?;
    /// let producer = Producer::new(&broker)?;
    /// for i in 0..1000u32 {
    ///     producer.send_nowait("clicks", ProducerRecord::keyed(b"user-7", &i.to_be_bytes()))?;
    /// }
    /// producer.flush()?; // every record is in the log, or this is the first error
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn send_nowait(&self, topic: &str, record: ProducerRecord<'_>) -> Result<()> {
        let inner = match &self.backend {
            Backend::Local(inner) => inner,
            Backend::Remote(remote) => return remote.send_async(topic, &record).map(|_| ()),
        };
        if let Some(txn) = &inner.txn {
            return inner
                .send_in_transaction(txn, topic, &record, false)
                .map(|_| ());
        }
        inner.enqueue_forget(topic, &record)
    }

    /// Sends several records (possibly to several partitions) and returns their
    /// metadata in order. Records for one partition are appended as few batches.
    pub fn send_batch(
        &self,
        topic: &str,
        records: &[ProducerRecord<'_>],
    ) -> Result<Vec<RecordMetadata>> {
        let inner = match &self.backend {
            Backend::Local(inner) => inner,
            Backend::Remote(remote) => return send_batch_remote(&**remote, topic, records),
        };
        if inner.txn.is_some() {
            return records.iter().map(|r| self.send(topic, *r)).collect();
        }
        let mut receipts = Vec::with_capacity(records.len());
        let mut touched: Vec<i32> = Vec::new();
        for r in records {
            let receipt = self.send_async(topic, *r)?;
            if !touched.contains(&receipt.partition) {
                touched.push(receipt.partition);
            }
            receipts.push(receipt);
        }
        for p in touched {
            inner.flush_partition(topic, p)?;
        }
        if inner.config.acks == Acks::None {
            return Ok(receipts
                .iter()
                .map(|r| RecordMetadata {
                    partition: r.partition,
                    offset: -1,
                    timestamp: r.timestamp,
                })
                .collect());
        }
        // Records of one batch share a slot: wait once per batch, not per record.
        let mut out = Vec::with_capacity(receipts.len());
        let mut last: Option<(&Arc<BatchSlot>, AppendResult)> = None;
        for r in &receipts {
            let result = match &last {
                Some((slot, result)) if Arc::ptr_eq(slot, &r.slot) => result.clone(),
                _ => {
                    let result = r
                        .slot
                        .wait(None)
                        .ok_or_else(|| Error::Timeout("delivery receipt".into()))?;
                    last = Some((&r.slot, result.clone()));
                    result
                }
            };
            out.push(r.metadata(result)?);
        }
        Ok(out)
    }

    /// Appends every thread's open batches now. Returns the first error among those
    /// appends and the failed appends, since the previous `flush`, of records nobody
    /// else hears of: sent without a receipt ([`Producer::send_nowait`], or `send` with
    /// [`Acks::None`]), or whose receipts had all been dropped when their batch was
    /// appended.
    pub fn flush(&self) -> Result<()> {
        let inner = match &self.backend {
            Backend::Local(inner) => inner,
            Backend::Remote(remote) => return remote.flush(),
        };
        if let Some(txn) = &inner.txn {
            txn.flush()?;
        }
        inner.flush_all()
    }
}

impl ProducerInner {
    /// Puts a record into the open transaction's batch of its partition (appending
    /// the batch when full, or with `append_now`).
    fn send_in_transaction(
        self: &Arc<Self>,
        txn: &transaction::TxnProducer,
        topic: &str,
        record: &ProducerRecord<'_>,
        append_now: bool,
    ) -> Result<RecordMetadata> {
        let (partition, timestamp, appended) =
            self.push_in_transaction(txn, topic, record, append_now)?;
        Ok(match appended {
            Some((a, index)) => RecordMetadata {
                partition,
                offset: a.base_offset + i64::from(index),
                timestamp: a.log_append_time.unwrap_or(timestamp),
            },
            None => RecordMetadata {
                partition,
                offset: -1,
                timestamp,
            },
        })
    }

    /// Chooses the record's partition and pushes it into the transaction's batch:
    /// the partition, the record's timestamp and, if its batch was appended, the
    /// append and the record's index in the batch. The topic is looked up through
    /// this thread's lanes (no lock, no allocation), as a send outside a transaction.
    fn push_in_transaction(
        self: &Arc<Self>,
        txn: &transaction::TxnProducer,
        topic: &str,
        record: &ProducerRecord<'_>,
        append_now: bool,
    ) -> Result<(i32, i64, Option<transaction::Placed>)> {
        self.check_open()?;
        let timestamp = record.timestamp.unwrap_or_else(now_ms);
        self.with_lanes(|l| {
            let t = l.topic(self, topic)?;
            let handle = &l.topics[t].topic;
            let count = handle.partition_count();
            let partition = choose_partition(&*self.config.partitioner, topic, record, count)?;
            let appended = txn.push(handle, partition, record, timestamp, append_now)?;
            Ok((partition, timestamp, appended))
        })
    }

    fn txn(&self, operation: &'static str) -> Result<&transaction::TxnProducer> {
        self.txn
            .as_ref()
            .ok_or_else(|| no_transactional_id(operation))
    }
}

impl Producer {
    /// The producer id and epoch a network producer numbers its batches with now (None
    /// in process, or before it has one): the identity under which a partition's
    /// leader keeps its sequences.
    #[cfg_attr(not(feature = "client"), allow(dead_code))]
    pub(crate) fn remote_producer_id(&self) -> Option<(i64, i16)> {
        match &self.backend {
            Backend::Local(_) => None,
            Backend::Remote(remote) => remote.producer_id(),
        }
    }

    /// The producer's `transactional.id`, if it is transactional.
    pub fn transactional_id(&self) -> Option<&str> {
        match &self.backend {
            Backend::Local(inner) => inner.txn.as_ref().map(|t| t.transactional_id()),
            Backend::Remote(remote) => remote.config().transactional_id.as_deref(),
        }
    }

    /// Registers the producer's `transactional.id` with the broker's transaction
    /// coordinator (InitProducerId): the id's epoch is bumped, which fences every
    /// older producer of the id (their next call fails with
    /// [`Error::ProducerFenced`]) and aborts the transaction one left open (waited
    /// for, at most 60 s). Call once, before the first transaction. On a cluster
    /// node whose coordinator of the id is elsewhere: [`Error::Transaction`] with
    /// `NotCoordinator` (or `InvalidConfig` while the cluster serves no transactions).
    ///
    /// ```
    /// use tidelog::{Broker, Producer, ProducerRecord, TopicConfig};
    /// # let dir = tempfile::tempdir()?;
    /// let broker = Broker::open(dir.path())?;
    /// broker.create_topic("a", 1, TopicConfig::new())?;
    /// broker.create_topic("b", 1, TopicConfig::new())?;
    /// let producer = Producer::builder(&broker).transactional_id("writer").build()?;
    /// producer.init_transactions()?;
    /// producer.begin_transaction()?;
    /// producer.send("a", ProducerRecord::new(b"debit"))?;
    /// producer.send("b", ProducerRecord::new(b"credit"))?;
    /// producer.commit_transaction()?; // both records, or (abort) neither
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn init_transactions(&self) -> Result<()> {
        match self.txn_side("init_transactions")? {
            TxnSide::Local(txn) => txn.init_transactions(),
            TxnSide::Remote(remote) => remote.init_transactions(),
        }
    }

    /// Opens a transaction: the records sent until its commit or abort belong to it
    /// (a partition joins it with its first record). `Error::InvalidProducerState`
    /// before `init_transactions` or while a transaction is open.
    pub fn begin_transaction(&self) -> Result<()> {
        match self.txn_side("begin_transaction")? {
            TxnSide::Local(txn) => txn.begin_transaction(),
            TxnSide::Remote(remote) => remote.begin_transaction(),
        }
    }

    /// Commits a consumer group's offsets (topic, partition, next offset to read)
    /// with the open transaction (AddOffsetsToTxn, then TxnOffsetCommit with the
    /// consuming member's generation, member id and instance id): they become the
    /// group's committed offsets when the transaction commits, and are dropped if it
    /// aborts. What a consume-transform-produce loop calls before
    /// `commit_transaction`, with [`crate::GroupConsumer::group_metadata`].
    pub fn send_offsets_to_transaction(
        &self,
        offsets: &[(String, i32, i64)],
        group: &ConsumerGroupMetadata,
    ) -> Result<()> {
        match self.txn_side("send_offsets_to_transaction")? {
            TxnSide::Local(txn) => txn.send_offsets(offsets, group),
            TxnSide::Remote(remote) => remote.send_offsets_to_transaction(offsets, group),
        }
    }

    /// Appends the transaction's open batches, commits it (EndTxn) and waits until
    /// its markers are written: its records become visible to read_committed
    /// consumers and its offsets the group's. A failure leaves the transaction to
    /// abort ([`Error::TransactionAbortable`]), or the producer fenced.
    pub fn commit_transaction(&self) -> Result<()> {
        match self.txn_side("commit_transaction")? {
            TxnSide::Local(txn) => txn.commit(),
            TxnSide::Remote(remote) => remote.commit_transaction(),
        }
    }

    /// Aborts the open transaction: records not appended yet are dropped, those
    /// appended are never shown to read_committed consumers, offsets sent are
    /// dropped. Also what to do after [`Error::TransactionAbortable`]; then a new
    /// transaction can begin.
    pub fn abort_transaction(&self) -> Result<()> {
        match self.txn_side("abort_transaction")? {
            TxnSide::Local(txn) => txn.abort(),
            TxnSide::Remote(remote) => remote.abort_transaction(),
        }
    }

    /// Appends every open batch and refuses further sends (`Error::Closed`). Returns
    /// the first error, as [`Producer::flush`] does.
    pub fn close(&self) -> Result<()> {
        let inner = match &self.backend {
            Backend::Local(inner) => inner,
            Backend::Remote(remote) => return remote.close(),
        };
        inner.closed.store(true, Ordering::Release);
        let r = inner.flush_all();
        if let Some(h) = inner.linger_thread.lock().take() {
            h.thread().unpark();
            let _ = h.join();
        }
        let retired = inner.retire_all();
        r.and(retired)
    }
}

impl ProducerInner {
    /// Adds a thread's new lane, and drops the lanes of threads that are gone once
    /// their batches are appended.
    fn register(&self, lane: &Arc<Lane>) {
        let mut lanes = self.lanes.lock();
        lanes.retain(|l| !(l.is_orphaned() && l.is_idle_and_empty()));
        lanes.push(Arc::clone(lane));
    }

    fn all_lanes(&self) -> Vec<Arc<Lane>> {
        self.lanes.lock().clone()
    }

    fn flush_all(&self) -> Result<()> {
        let fsync = self.lane_config.fsync;
        let mut first = Ok(());
        for lane in self.all_lanes() {
            if let Err(e) = lane.flush(fsync, &self.errors)
                && first.is_ok()
            {
                first = Err(e);
            }
        }
        self.lanes
            .lock()
            .retain(|l| !(l.is_orphaned() && l.is_idle_and_empty()));
        // An error of this flush's own appends was also recorded if nobody waits on
        // its records: take it either way, so that it is reported once.
        let pending = self.errors.take();
        match (first, pending) {
            (Err(e), _) | (Ok(()), Some(e)) => Err(e),
            (Ok(()), None) => Ok(()),
        }
    }

    /// Appends what is left in every lane and lets go of their partitions and buffers.
    fn retire_all(&self) -> Result<()> {
        let fsync = self.lane_config.fsync;
        let mut first = Ok(());
        for lane in std::mem::take(&mut *self.lanes.lock()) {
            if let Err(e) = lane.retire(fsync, &self.errors)
                && first.is_ok()
            {
                first = Err(e);
            }
        }
        let pending = self.errors.take();
        match (first, pending) {
            (Err(e), _) | (Ok(()), Some(e)) => Err(e),
            (Ok(()), None) => Ok(()),
        }
    }
}

impl Drop for ProducerInner {
    fn drop(&mut self) {
        self.closed.store(true, Ordering::Release);
        if let Some(h) = self.linger_thread.get_mut().take() {
            h.thread().unpark();
            // The linger thread only holds a Weak: it exits on its next wakeup. If it
            // dropped the last strong reference itself, this runs on it: do not join.
            if h.thread().id() != std::thread::current().id() {
                let _ = h.join();
            }
        }
        let _ = self.retire_all();
    }
}

/// Where a transactional call runs: in process, or over the network.
enum TxnSide<'a> {
    Local(&'a transaction::TxnProducer),
    Remote(&'a dyn RemoteProducer),
}

/// The refusal of a transactional call on a producer without a `transactional.id`.
fn no_transactional_id(operation: &'static str) -> Error {
    Error::InvalidConfig {
        key: "transactional.id".into(),
        reason: format!("{operation} needs a transactional producer (none is set)"),
    }
}

/// [`Producer::send_batch`] over the network: every record into its partition's batch,
/// the batches sent, then each record's metadata.
fn send_batch_remote(
    remote: &dyn RemoteProducer,
    topic: &str,
    records: &[ProducerRecord<'_>],
) -> Result<Vec<RecordMetadata>> {
    let receipts = records
        .iter()
        .map(|r| remote.send_async(topic, r))
        .collect::<Result<Vec<_>>>()?;
    remote.flush()?;
    receipts
        .into_iter()
        .map(|r| match remote.config().acks {
            Acks::None => Ok(backend::unacknowledged(&r)),
            _ => r.wait(),
        })
        .collect()
}

/// Appends batches older than `linger`, and whatever the lanes of ended threads hold.
/// Holds only a weak reference, so dropping the producer ends it.
fn linger_loop(weak: &Weak<ProducerInner>, linger: Duration) {
    let tick = (linger / 2).max(Duration::from_micros(500));
    loop {
        {
            let Some(inner) = weak.upgrade() else { return };
            if inner.closed.load(Ordering::Acquire) {
                return;
            }
            let fsync = inner.lane_config.fsync;
            for lane in inner.all_lanes() {
                lane.flush_if_older(linger, fsync, &inner.errors);
            }
            if let Some(txn) = &inner.txn {
                txn.append_older_than(linger);
            }
        }
        std::thread::park_timeout(tick);
    }
}

/// The partition of `record` among a topic's `count`: the one it names, else the
/// partitioner's; out of range is [`Error::UnknownPartition`]. Plain and transactional
/// sends choose alike.
#[inline]
fn choose_partition<P: Partitioner + ?Sized>(
    partitioner: &P,
    topic: &str,
    record: &ProducerRecord<'_>,
    count: i32,
) -> Result<i32> {
    let partition = match record.partition {
        Some(p) => p,
        None => partitioner.partition(topic, record.key, record.value, count),
    };
    if partition < 0 || partition >= count {
        return Err(Error::UnknownPartition {
            topic: topic.to_string(),
            partition,
            count,
        });
    }
    Ok(partition)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::TopicConfig;

    fn broker_with_topic(dir: &std::path::Path) -> Broker {
        let broker = Broker::open(dir).expect("broker");
        broker
            .create_topic("t", 1, TopicConfig::new())
            .expect("topic");
        broker
    }

    #[test]
    fn ended_threads_lanes_leave_the_registry_once_appended() {
        let dir = tempfile::tempdir().expect("temp dir");
        let broker = broker_with_topic(dir.path());
        let producer = Producer::builder(&broker)
            .linger(Duration::from_secs(60))
            .build()
            .expect("producer");
        for i in 0..3u8 {
            let p = producer.clone();
            std::thread::spawn(move || p.send_nowait("t", ProducerRecord::new(&[i])))
                .join()
                .expect("thread")
                .expect("send");
        }
        // One lane per thread, unless the linger thread (whose first pass may run late)
        // already appended an ended thread's lane and a later thread's registration
        // dropped it.
        let Backend::Local(inner) = &producer.backend else {
            panic!("an in-process producer")
        };
        let lanes = inner.lanes.lock().len();
        assert!((1..=3).contains(&lanes), "{lanes} lanes for 3 threads");
        producer.flush().expect("flush");
        assert!(inner.lanes.lock().is_empty(), "orphans dropped");
        let end = broker.topic("t").and_then(|t| t.partition(0));
        assert_eq!(end.expect("partition").log_end_offset(), 3);
    }

    /// Sends every record to the last partition.
    struct Last;

    impl Partitioner for Last {
        fn partition(&self, _: &str, _: Option<&[u8]>, _: Option<&[u8]>, count: i32) -> i32 {
            count - 1
        }
    }

    #[test]
    fn the_default_partitioner_is_the_configs_and_a_custom_one_replaces_it() {
        let dir = tempfile::tempdir().expect("temp dir");
        let broker = Broker::open(dir.path()).expect("broker");
        for name in ["four", "custom"] {
            broker
                .create_topic(name, 4, TopicConfig::new())
                .expect("topic");
        }
        let default = Producer::builder(&broker)
            .acks(Acks::Leader)
            .build()
            .expect("producer");
        let Backend::Local(inner) = &default.backend else {
            panic!("an in-process producer")
        };
        let direct = inner
            .default_partitioner
            .as_ref()
            .expect("default partitioner");
        assert!(
            std::ptr::addr_eq(Arc::as_ptr(direct), Arc::as_ptr(&inner.config.partitioner)),
            "sends call the partitioner the config shows"
        );
        for key in [&b"user-1"[..], b"user-2", b"user-3", b"user-42"] {
            let sent = default
                .send("four", ProducerRecord::keyed(key, b"v"))
                .expect("send");
            assert_eq!(sent.partition, partition_for_key(key, 4), "{key:?}");
        }
        let custom = Producer::builder(&broker)
            .acks(Acks::Leader)
            .partitioner(Last)
            .build()
            .expect("producer");
        let Backend::Local(inner) = &custom.backend else {
            panic!("an in-process producer")
        };
        assert!(inner.default_partitioner.is_none());
        let sent = custom
            .send("custom", ProducerRecord::keyed(b"user-1", b"v"))
            .expect("send");
        assert_eq!(sent.partition, 3, "the custom partitioner chose");
        assert_eq!(send_flushed(&custom, &broker, "custom", 3), 2);
    }

    /// Sends one keyless record without a receipt, flushes, and returns the log end of
    /// partition `p` of `topic`.
    fn send_flushed(producer: &Producer, broker: &Broker, topic: &str, p: i32) -> i64 {
        producer
            .send_nowait(topic, ProducerRecord::new(b"v"))
            .expect("send");
        producer.flush().expect("flush");
        let partition = broker.topic(topic).and_then(|t| t.partition(p));
        partition.expect("partition").log_end_offset()
    }

    #[test]
    fn send_nowait_on_the_threads_own_lanes_returns_the_pushs_error() {
        let dir = tempfile::tempdir().expect("temp dir");
        let broker = broker_with_topic(dir.path());
        let producer = Producer::new(&broker).expect("producer");
        // The thread's lanes exist after this send: the next ones take the inlined path.
        assert_eq!(send_flushed(&producer, &broker, "t", 0), 1);
        match producer.send_nowait("t", ProducerRecord::new(b"v").partition(5)) {
            Err(Error::UnknownPartition {
                topic,
                partition,
                count,
            }) => assert_eq!((topic.as_str(), partition, count), ("t", 5, 1)),
            other => panic!("expected an unknown partition, got {other:?}"),
        }
        match producer.send_nowait("missing", ProducerRecord::new(b"v")) {
            Err(Error::UnknownTopic(topic)) => assert_eq!(topic, "missing"),
            other => panic!("expected an unknown topic, got {other:?}"),
        }
        assert_eq!(send_flushed(&producer, &broker, "t", 0), 2);
    }

    #[test]
    fn same_name_tells_every_byte_of_names_of_every_length() {
        for n in 0..=40usize {
            let a: Vec<u8> = (0..n).map(|i| b'a' + (i % 26) as u8).collect();
            assert!(same_name(&a, &a.clone()), "{n} bytes, equal");
            for i in 0..n {
                let mut b = a.clone();
                b[i] ^= 0x20;
                assert!(!same_name(&a, &b), "{n} bytes, byte {i} differs");
            }
            let mut longer = a.clone();
            longer.push(b'z');
            assert!(!same_name(&a, &longer), "{n} and {} bytes", n + 1);
        }
    }

    #[test]
    fn sends_to_names_that_differ_inside_reach_their_own_topics() {
        let dir = tempfile::tempdir().expect("temp dir");
        let broker = Broker::open(dir.path()).expect("broker");
        // Same length, same first and last 8 bytes: only a byte inside tells them apart.
        let names = [
            "orders-eu-v1-2024-x",
            "orders-us-v1-2024-x",
            "ab-12345678-cd",
            "ab-12345679-cd",
        ];
        for name in names {
            broker
                .create_topic(name, 1, TopicConfig::new())
                .expect("topic");
        }
        let producers = [
            Producer::new(&broker).expect("producer"),
            Producer::new(&broker).expect("producer"),
        ];
        for i in 0..200u32 {
            let name = names[(i % 4) as usize];
            let producer = &producers[(i / 3 % 2) as usize];
            let value = format!("{name}:{i}");
            producer
                .send_nowait(name, ProducerRecord::new(value.as_bytes()))
                .expect("send");
        }
        for p in &producers {
            p.flush().expect("flush");
        }
        for (k, name) in names.iter().enumerate() {
            let partition = broker
                .topic(name)
                .and_then(|t| t.partition(0))
                .expect("partition");
            let mut got = Vec::new();
            let slice = partition.read(0, 1 << 20).expect("read");
            for batch in crate::record::batches(&slice) {
                for r in batch.expect("batch").records() {
                    let v = r.expect("record").value.expect("value").to_vec();
                    got.push(String::from_utf8(v).expect("utf-8"));
                }
            }
            let mut expected: Vec<(usize, String)> = (0..200u32)
                .filter(|i| (i % 4) as usize == k)
                .map(|i| ((i / 3 % 2) as usize, format!("{name}:{i}")))
                .collect();
            // Each producer's records keep their order; the two producers' batches
            // interleave batch by batch.
            for p in 0..2 {
                let mine: Vec<&String> =
                    expected.iter().filter(|e| e.0 == p).map(|e| &e.1).collect();
                let seen: Vec<&String> = got.iter().filter(|g| mine.contains(g)).collect();
                assert_eq!(seen, mine, "producer {p}'s records in {name}");
            }
            expected.sort();
            assert_eq!(
                got.len(),
                expected.len(),
                "every record of {name} once, none of another topic"
            );
        }
    }

    #[test]
    fn a_send_after_close_names_what_closed() {
        let dir = tempfile::tempdir().expect("temp dir");
        let broker = broker_with_topic(dir.path());
        let producer = Producer::new(&broker).expect("producer");
        producer
            .send_nowait("t", ProducerRecord::new(b"a"))
            .expect("send");
        let other = Producer::new(&broker).expect("producer");
        producer.close().expect("close");
        match producer.send_nowait("t", ProducerRecord::new(b"b")) {
            Err(Error::Closed(what)) => assert_eq!(what, "producer"),
            other => panic!("expected the producer closed, got {other:?}"),
        }
        broker.close().expect("close broker");
        match other.send_nowait("t", ProducerRecord::new(b"c")) {
            Err(Error::Closed(what)) => assert!(what.starts_with("broker at "), "{what}"),
            other => panic!("expected the broker closed, got {other:?}"),
        }
    }

    #[test]
    fn a_thread_forgets_the_lanes_of_closed_producers() {
        let dir = tempfile::tempdir().expect("temp dir");
        let broker = broker_with_topic(dir.path());
        let count = || THREAD_LANES.with(|l| l.borrow().len());
        let first = Producer::new(&broker).expect("producer");
        first
            .send_nowait("t", ProducerRecord::new(b"a"))
            .expect("send");
        assert_eq!(count(), 1);
        first.close().expect("close");
        let second = Producer::new(&broker).expect("producer");
        second
            .send_nowait("t", ProducerRecord::new(b"b"))
            .expect("send");
        assert_eq!(count(), 1, "the closed producer's lanes are gone");
        drop(second);
        let third = Producer::new(&broker).expect("producer");
        third.send("t", ProducerRecord::new(b"c")).expect("send");
        assert_eq!(count(), 1, "the dropped producer's lanes are gone");
        assert!(matches!(
            first.send_nowait("t", ProducerRecord::new(b"d")),
            Err(Error::Closed(_))
        ));
    }
}
