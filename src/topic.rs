//! Topic and Partition handles.
//!
//! A [`Partition`] is a cheap, cloneable handle on one partition's log; it is what the
//! producer, the consumers and the network server's Produce/Fetch handlers all call, so
//! there is one append path and one read path. A [`Topic`] holds the partitions of a
//! topic; adding partitions publishes a new partition list, and handles see it at once.
//!
//! Wakeups: the partition's log notifies the consumers watching it (each consumer has
//! one [`Signal`] it registers with the partitions it reads) whenever its high watermark
//! moves, whoever appended, so a consumer blocked in `poll` over many partitions wakes
//! as soon as any of them grows, without polling.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::time::Duration;

use parking_lot::RwLock;

use crate::config::TopicConfig;
use crate::record::BatchBuilder;
pub(crate) use crate::storage::Signal;
use crate::storage::{AppendInfo, AppendOutcome, LogConfig, LogSlice, PartitionLog, ReadLimit};
use crate::{Error, Result};

struct PartitionInner {
    topic: Arc<str>,
    index: i32,
    log: PartitionLog,
}

/// One partition of a topic: a handle on its log. Cheap to clone, `Send + Sync`.
#[derive(Clone)]
pub struct Partition {
    inner: Arc<PartitionInner>,
}

impl std::fmt::Debug for Partition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Partition({}-{})", self.inner.topic, self.inner.index)
    }
}

impl Partition {
    pub(crate) fn new(topic: Arc<str>, index: i32, log: PartitionLog) -> Self {
        Partition {
            inner: Arc::new(PartitionInner { topic, index, log }),
        }
    }

    /// The topic's name.
    pub fn topic(&self) -> &str {
        &self.inner.topic
    }

    /// The partition's index in its topic.
    pub fn index(&self) -> i32 {
        self.inner.index
    }

    /// The underlying log.
    pub fn log(&self) -> &PartitionLog {
        &self.inner.log
    }

    /// Appends one or more RecordBatch v2 batches (concatenated) and assigns their
    /// offsets; the log wakes the consumers waiting on this partition.
    pub fn append_batch(&self, batches: &[u8]) -> Result<AppendInfo> {
        self.inner.log.append(batches)
    }

    /// Appends batches of idempotent producers after their sequence checks, check and
    /// append in one step ([`PartitionLog::append_idempotent`]).
    pub fn append_idempotent(&self, batches: &[u8]) -> Result<AppendOutcome> {
        self.inner.log.append_idempotent(batches)
    }

    /// Finishes `builder`'s batch and appends it, as [`PartitionLog::append_builder`]
    /// does (no copy, no second CRC pass); the log wakes the consumers waiting on this
    /// partition.
    pub fn append_builder(&self, builder: &mut BatchBuilder) -> Result<AppendInfo> {
        self.inner.log.append_builder(builder)
    }

    /// Whole batches from the one containing `offset`, up to about `max_bytes` (at least
    /// one batch), as a zero-copy slice of the log. Empty at the log end;
    /// `Error::OffsetOutOfRange` outside `[log_start_offset, log_end_offset]`.
    pub fn read(&self, offset: i64, max_bytes: usize) -> Result<LogSlice> {
        self.inner.log.read(offset, max_bytes)
    }

    /// The first offset still in the log.
    pub fn log_start_offset(&self) -> i64 {
        self.inner.log.log_start_offset()
    }

    /// The offset the next record will get.
    pub fn log_end_offset(&self) -> i64 {
        self.inner.log.log_end_offset()
    }

    /// The highest offset readers may see, plus one (the log end unless the log is
    /// replicated).
    pub fn high_watermark(&self) -> i64 {
        self.inner.log.high_watermark()
    }

    /// Blocks until the log has a record at `offset` that readers may see (its high
    /// watermark is past it), the timeout passes, or the log closes. True if the record
    /// is there.
    pub fn wait_for(&self, offset: i64, timeout: Duration) -> bool {
        self.inner.log.wait_for(offset, timeout)
    }

    /// The earliest offset whose timestamp is at least `timestamp` (ms since the epoch),
    /// with that record's timestamp; None if every record is older.
    pub fn offset_for_timestamp(&self, timestamp: i64) -> Result<Option<(i64, i64)>> {
        self.inner.log.offset_for_timestamp(timestamp)
    }

    /// Bytes on disk.
    pub fn size_bytes(&self) -> u64 {
        self.inner.log.size_bytes()
    }

    /// Number of segments.
    pub fn segment_count(&self) -> usize {
        self.inner.log.segment_count()
    }

    /// Fsyncs the partition's files.
    pub fn sync(&self) -> Result<()> {
        self.inner.log.sync()
    }

    /// Wakes `signal` whenever the partition's high watermark moves (every append,
    /// whoever makes it, unless the log is replicated) and when it closes, until
    /// [`Partition::unwatch`].
    pub(crate) fn watch(&self, signal: &Arc<Signal>) {
        self.inner.log.watch(signal, ReadLimit::HighWatermark);
    }

    /// Stops waking `signal`.
    pub(crate) fn unwatch(&self, signal: &Arc<Signal>) {
        self.inner.log.unwatch(signal);
    }

    /// Wakes every watcher and waiter (used when the broker closes so that pollers
    /// return).
    pub(crate) fn wake_all(&self) {
        self.inner.log.wake_all();
    }
}

pub(crate) struct TopicInner {
    pub(crate) name: Arc<str>,
    pub(crate) partitions: RwLock<Arc<Vec<Partition>>>,
    /// `partitions.len()`, readable without a lock on the producer's hot path.
    pub(crate) partition_count: AtomicI32,
    pub(crate) config: RwLock<TopicConfig>,
    pub(crate) internal: bool,
    pub(crate) deleted: AtomicBool,
}

/// A topic: a named set of partitions. Cheap to clone, `Send + Sync`; sees partitions
/// added later.
#[derive(Clone)]
pub struct Topic {
    pub(crate) inner: Arc<TopicInner>,
}

impl std::fmt::Debug for Topic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Topic")
            .field("name", &self.name())
            .field("partitions", &self.partition_count())
            .finish()
    }
}

impl Topic {
    pub(crate) fn new(
        name: &str,
        partitions: Vec<Partition>,
        config: TopicConfig,
        internal: bool,
    ) -> Self {
        let count = partitions.len() as i32;
        Topic {
            inner: Arc::new(TopicInner {
                name: Arc::from(name),
                partitions: RwLock::new(Arc::new(partitions)),
                partition_count: AtomicI32::new(count),
                config: RwLock::new(config),
                internal,
                deleted: AtomicBool::new(false),
            }),
        }
    }

    /// The topic's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Number of partitions.
    pub fn partition_count(&self) -> i32 {
        self.inner.partition_count.load(Ordering::Acquire)
    }

    /// True for tidelog's own topics (`__consumer_offsets`).
    pub fn is_internal(&self) -> bool {
        self.inner.internal
    }

    /// The topic's overrides of the broker's log settings.
    pub fn config(&self) -> TopicConfig {
        self.inner.config.read().clone()
    }

    /// Partition `p`, or `Error::UnknownPartition`; on a cluster node,
    /// `Error::NotLeaderOrFollower` for a partition of the topic that this node holds no
    /// replica of.
    pub fn partition(&self, p: i32) -> Result<Partition> {
        if self.inner.deleted.load(Ordering::Acquire) {
            return Err(Error::UnknownTopic(self.name().to_string()));
        }
        let parts = self.inner.partitions.read();
        let dense = usize::try_from(p)
            .ok()
            .and_then(|i| parts.get(i))
            .filter(|x| x.index() == p);
        if let Some(found) = dense.or_else(|| {
            parts
                .binary_search_by_key(&p, Partition::index)
                .ok()
                .map(|i| &parts[i])
        }) {
            return Ok(found.clone());
        }
        let count = self.partition_count();
        if (0..count).contains(&p) {
            return Err(Error::NotLeaderOrFollower {
                partition: format!("{}-{p}", self.name()),
                reason: "this node holds no replica of it".into(),
            });
        }
        Err(Error::UnknownPartition {
            topic: self.name().to_string(),
            partition: p,
            count,
        })
    }

    /// All partitions held by this node, in order (every partition, but on a cluster
    /// node).
    pub fn partitions(&self) -> Arc<Vec<Partition>> {
        Arc::clone(&self.inner.partitions.read())
    }

    /// Per-partition state, for `describe`.
    pub fn describe(&self) -> TopicDescription {
        let parts = self.partitions();
        TopicDescription {
            name: self.name().to_string(),
            internal: self.is_internal(),
            config: self.config(),
            log_config: parts.first().map(|p| p.log().config()).unwrap_or_default(),
            partitions: parts
                .iter()
                .map(|p| PartitionDescription {
                    partition: p.index(),
                    log_start_offset: p.log_start_offset(),
                    log_end_offset: p.log_end_offset(),
                    size_bytes: p.size_bytes(),
                    segments: p.segment_count(),
                })
                .collect(),
        }
    }

    pub(crate) fn set_partitions(&self, partitions: Vec<Partition>) {
        let count = partitions.len() as i32;
        self.set_hosted_partitions(partitions, count);
    }

    /// A cluster node: the topic has `count` partitions, of which this node holds
    /// `partitions` (sorted by index).
    pub(crate) fn set_hosted_partitions(&self, partitions: Vec<Partition>, count: i32) {
        *self.inner.partitions.write() = Arc::new(partitions);
        self.inner.partition_count.store(count, Ordering::Release);
    }
}

/// What `describe` reports about one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionDescription {
    /// Partition index.
    pub partition: i32,
    /// First offset still in the log.
    pub log_start_offset: i64,
    /// Next offset to be written.
    pub log_end_offset: i64,
    /// Bytes on disk.
    pub size_bytes: u64,
    /// Number of segments.
    pub segments: usize,
}

/// What `describe` reports about a topic.
#[derive(Debug, Clone)]
pub struct TopicDescription {
    /// Topic name.
    pub name: String,
    /// True for internal topics.
    pub internal: bool,
    /// The topic's overrides.
    pub config: TopicConfig,
    /// The effective log settings (defaults with the overrides applied).
    pub log_config: LogConfig,
    /// One entry per partition.
    pub partitions: Vec<PartitionDescription>,
}
