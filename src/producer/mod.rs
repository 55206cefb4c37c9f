//! The producer: partitioning, batching and delivery of records.
//!
//! A [`Producer`] is cloneable and `Send + Sync`; all clones share one accumulator, so
//! records sent from many threads to one partition coalesce into the same RecordBatch v2
//! batches (see `accumulator.rs`). Acknowledgement levels keep Kafka's names with their
//! in-process meaning documented on [`Acks`].

mod accumulator;
mod partitioner;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::storage::now_ms;

use parking_lot::{Mutex, RwLock};

use crate::broker::Broker;
use crate::record::Compression;
use crate::topic::Topic;
use crate::{Error, Result};
use accumulator::{AppendResult, BatchSlot, PartitionAccumulator};

pub use partitioner::{
    DefaultPartitioner, Partitioner, RoundRobinPartitioner, murmur2, partition_for_key, to_positive,
};

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
    /// CreateTime in ms since the epoch; None uses the current time.
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
    /// reported as -1. The record is appended with its batch (linger, size or flush).
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
    /// Acknowledged only after the partition is fsynced (one fsync per batch).
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
    committed: Option<crate::Partition>,
}

/// How long an `acks=all` send waits for the in-sync replicas (Kafka's
/// `request.timeout.ms` default).
const ACKS_ALL_TIMEOUT: Duration = Duration::from_secs(30);

impl DeliveryReceipt {
    fn metadata(&self, r: AppendResult) -> Result<RecordMetadata> {
        match r {
            Ok(a) => {
                let offset = a.base_offset + i64::from(self.index);
                if let Some(p) = &self.committed {
                    p.wait_committed(offset, ACKS_ALL_TIMEOUT)?;
                }
                Ok(RecordMetadata {
                    partition: self.partition,
                    offset,
                    timestamp: a.log_append_time.unwrap_or(self.timestamp),
                })
            }
            Err(e) => Err(e),
        }
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
}

impl std::fmt::Debug for ProducerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProducerConfig")
            .field("linger", &self.linger)
            .field("batch_size", &self.batch_size)
            .field("acks", &self.acks)
            .field("durability", &self.durability)
            .field("compression", &self.compression)
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
        }
    }
}

/// Builds a [`Producer`].
#[derive(Debug)]
#[must_use]
pub struct ProducerBuilder {
    broker: Broker,
    config: ProducerConfig,
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

    /// A custom partitioner. Default [`DefaultPartitioner`].
    pub fn partitioner(mut self, partitioner: impl Partitioner) -> Self {
        self.config.partitioner = Arc::new(partitioner);
        self
    }

    /// Creates the producer (and its linger thread when `linger > 0`).
    pub fn build(self) -> Result<Producer> {
        Producer::with_config(self.broker, self.config)
    }
}

/// FNV-1a: topic names are the application's own, so a fast hash without DoS
/// resistance suits the per-record lookup.
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

type TopicMap = HashMap<String, Arc<TopicAccumulators>, std::hash::BuildHasherDefault<Fnv>>;

/// The accumulators of one topic.
struct TopicAccumulators {
    topic: Topic,
    parts: RwLock<Vec<Arc<PartitionAccumulator>>>,
}

struct ProducerInner {
    broker: Broker,
    config: ProducerConfig,
    topics: RwLock<TopicMap>,
    closed: AtomicBool,
    linger_thread: Mutex<Option<JoinHandle<()>>>,
}

/// Sends records to topics. Cloneable and `Send + Sync`: clones share batches.
///
/// Dropping the last clone (or [`Producer::close`]) appends every open batch.
#[derive(Clone)]
pub struct Producer {
    inner: Arc<ProducerInner>,
}

impl std::fmt::Debug for Producer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Producer")
            .field("config", &self.inner.config)
            .finish()
    }
}

impl Producer {
    /// A producer with default settings.
    pub fn new(broker: &Broker) -> Result<Producer> {
        Producer::builder(broker).build()
    }

    /// A builder for a producer on `broker`.
    pub fn builder(broker: &Broker) -> ProducerBuilder {
        ProducerBuilder {
            broker: broker.clone(),
            config: ProducerConfig::default(),
        }
    }

    fn with_config(broker: Broker, config: ProducerConfig) -> Result<Producer> {
        let linger = config.linger;
        let producer = Producer {
            inner: Arc::new(ProducerInner {
                broker,
                config,
                topics: RwLock::new(TopicMap::default()),
                closed: AtomicBool::new(false),
                linger_thread: Mutex::new(None),
            }),
        };
        if !linger.is_zero() {
            let weak = Arc::downgrade(&producer.inner);
            let handle = std::thread::Builder::new()
                .name("tidelog-producer-linger".into())
                .spawn(move || linger_loop(&weak, linger))
                .map_err(|e| Error::io("spawn producer linger thread", "<producer>", e))?;
            *producer.inner.linger_thread.lock() = Some(handle);
        }
        Ok(producer)
    }

    /// The producer's settings.
    pub fn config(&self) -> &ProducerConfig {
        &self.inner.config
    }

    fn check_open(&self) -> Result<()> {
        if self.inner.closed.load(Ordering::Acquire) {
            return Err(Error::Closed("producer".into()));
        }
        if self.inner.broker.is_closed() {
            return Err(Error::Closed(format!(
                "broker at {}",
                self.inner.broker.dir().display()
            )));
        }
        Ok(())
    }

    /// Registers `topic`'s accumulators (first send to it, or after it was deleted and
    /// created again).
    fn add_topic(&self, topic: &str) -> Result<()> {
        let t = self.inner.broker.topic(topic)?;
        let accs = Arc::new(TopicAccumulators {
            topic: t,
            parts: RwLock::new(Vec::new()),
        });
        self.inner.topics.write().insert(topic.to_string(), accs);
        Ok(())
    }

    /// Runs `f` on the accumulator of `topic`'s partition chosen for `record`, under
    /// read locks only: no reference count is touched per record.
    fn with_accumulator<R>(
        &self,
        topic: &str,
        record: &ProducerRecord<'_>,
        f: impl FnOnce(i32, &PartitionAccumulator) -> R,
    ) -> Result<R> {
        loop {
            let topics = self.inner.topics.read();
            let accs = match topics.get(topic) {
                Some(a) if !a.topic.inner.deleted.load(Ordering::Acquire) => a,
                _ => {
                    drop(topics);
                    self.add_topic(topic)?;
                    continue;
                }
            };
            let count = accs.topic.partition_count();
            let partition = match record.partition {
                Some(p) => p,
                None => {
                    self.inner
                        .config
                        .partitioner
                        .partition(topic, record.key, record.value, count)
                }
            };
            if partition < 0 || partition >= count {
                return Err(Error::UnknownPartition {
                    topic: topic.to_string(),
                    partition,
                    count,
                });
            }
            {
                let parts = accs.parts.read();
                if let Some(acc) = parts.get(partition as usize) {
                    return Ok(f(partition, acc));
                }
            }
            // First record for this partition (or the topic grew): add accumulators.
            let mut parts = accs.parts.write();
            while parts.len() < count as usize {
                let p = accs.topic.partition(parts.len() as i32)?;
                parts.push(Arc::new(PartitionAccumulator::new(
                    p,
                    self.inner.config.batch_size,
                    self.inner.config.compression,
                )));
            }
        }
    }

    /// Puts the record in its partition's batch. `flush_now` appends the batch at once.
    fn enqueue(
        &self,
        topic: &str,
        record: &ProducerRecord<'_>,
        flush_now: bool,
    ) -> Result<DeliveryReceipt> {
        self.check_open()?;
        let timestamp = record.timestamp.unwrap_or_else(now_ms);
        let fsync = self.inner.config.durability == Durability::Fsync;
        let flush_now = flush_now || self.inner.config.linger.is_zero();
        let batch_size = self.inner.config.batch_size;
        let acks_all = self.inner.config.acks == Acks::All;
        self.with_accumulator(topic, record, |partition, acc| {
            // acks=all on a replicated partition: refused before anything is appended
            // when the ISR is below min.insync.replicas.
            let replicated = acks_all && acc.partition.log().is_replicated();
            if replicated {
                acc.partition.check_enough_replicas()?;
            }
            let pending = acc.push(
                timestamp,
                record.key,
                record.value,
                record.headers,
                batch_size,
                fsync,
                flush_now,
            );
            Ok(DeliveryReceipt {
                slot: pending.slot,
                index: pending.index,
                partition,
                timestamp,
                committed: replicated.then(|| acc.partition.clone()),
            })
        })?
    }

    /// Appends the open batch of one partition now.
    fn flush_partition(&self, topic: &str, partition: i32) -> Result<()> {
        let fsync = self.inner.config.durability == Durability::Fsync;
        let record = ProducerRecord {
            partition: Some(partition),
            ..Default::default()
        };
        self.with_accumulator(topic, &record, |_, acc| acc.flush(fsync))?
    }

    /// Sends one record and returns where it was stored (after its batch is appended;
    /// with `Acks::None`, at once with offset -1). Records other threads accumulated
    /// for the same partition go in the same batch.
    pub fn send(&self, topic: &str, record: ProducerRecord<'_>) -> Result<RecordMetadata> {
        let none = self.inner.config.acks == Acks::None;
        let receipt = self.enqueue(topic, &record, !none)?;
        if none {
            return Ok(RecordMetadata {
                partition: receipt.partition,
                offset: -1,
                timestamp: receipt.timestamp,
            });
        }
        receipt.wait()
    }

    /// Sends a record without waiting; the receipt gives its offset once its batch is
    /// appended (after `linger`, when the batch is full, or on `flush`).
    pub fn send_async(&self, topic: &str, record: ProducerRecord<'_>) -> Result<DeliveryReceipt> {
        self.enqueue(topic, &record, false)
    }

    /// Sends several records (possibly to several partitions) and returns their
    /// metadata in order. Records for one partition are appended as few batches.
    pub fn send_batch(
        &self,
        topic: &str,
        records: &[ProducerRecord<'_>],
    ) -> Result<Vec<RecordMetadata>> {
        let mut receipts = Vec::with_capacity(records.len());
        let mut touched: Vec<i32> = Vec::new();
        for r in records {
            let receipt = self.enqueue(topic, r, false)?;
            if !touched.contains(&receipt.partition) {
                touched.push(receipt.partition);
            }
            receipts.push(receipt);
        }
        for p in touched {
            self.flush_partition(topic, p)?;
        }
        if self.inner.config.acks == Acks::None {
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

    /// Appends every open batch now; returns the first append error.
    pub fn flush(&self) -> Result<()> {
        self.inner.flush_all()
    }

    /// Appends every open batch and refuses further sends (`Error::Closed`).
    pub fn close(&self) -> Result<()> {
        self.inner.closed.store(true, Ordering::Release);
        let r = self.inner.flush_all();
        if let Some(h) = self.inner.linger_thread.lock().take() {
            h.thread().unpark();
            let _ = h.join();
        }
        r
    }
}

impl ProducerInner {
    fn all_accumulators(&self) -> Vec<Arc<PartitionAccumulator>> {
        self.topics
            .read()
            .values()
            .flat_map(|t| t.parts.read().clone())
            .collect()
    }

    fn flush_all(&self) -> Result<()> {
        let fsync = self.config.durability == Durability::Fsync;
        let mut first = Ok(());
        for acc in self.all_accumulators() {
            if let Err(e) = acc.flush(fsync)
                && first.is_ok()
            {
                first = Err(e);
            }
        }
        first
    }
}

impl Drop for ProducerInner {
    fn drop(&mut self) {
        self.closed.store(true, Ordering::Release);
        let _ = self.flush_all();
        if let Some(h) = self.linger_thread.get_mut().take() {
            h.thread().unpark();
            // The linger thread only holds a Weak: it exits on its next wakeup. If it
            // dropped the last strong reference itself, this runs on it: do not join.
            if h.thread().id() != std::thread::current().id() {
                let _ = h.join();
            }
        }
    }
}

/// Appends batches older than `linger`. Holds only a weak reference, so dropping the
/// producer ends it.
fn linger_loop(weak: &Weak<ProducerInner>, linger: Duration) {
    let tick = (linger / 2).max(Duration::from_micros(500));
    loop {
        {
            let Some(inner) = weak.upgrade() else { return };
            if inner.closed.load(Ordering::Acquire) {
                return;
            }
            let fsync = inner.config.durability == Durability::Fsync;
            for acc in inner.all_accumulators() {
                acc.flush_if_older(linger, fsync);
            }
        }
        std::thread::park_timeout(tick);
    }
}
