//! The in-process share consumer (KIP-932, "queues for Kafka"): a member of a share
//! group. Any number of share consumers may read the same partition; the share
//! coordinator hands each record to one of them at a time, under an acquisition lock,
//! and every record is acknowledged on its own.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::broker::Broker;
use crate::coordinator::{AcknowledgeType, ShareReadMode};
use crate::error::{Error, Result, ShareError};
use crate::record::{Batch, decompression_limit};
use crate::storage::AbortedTxn;
use crate::topic::{Partition, Signal};

use super::{IsolationLevel, OffsetReset};

/// How long a `poll` with nothing to hand out sleeps at most before it looks again:
/// records another member released, or whose lock expired, wake no one.
const RECHECK: Duration = Duration::from_millis(50);

/// Settings of a [`ShareConsumer`].
#[derive(Debug, Clone)]
pub struct ShareConsumerConfig {
    /// The share group (`group.id`).
    pub group_id: String,
    /// The topics read (`subscribe()`): every partition of each.
    pub topics: Vec<String>,
    /// The client id, the first part of the member id. Default "tidelog-share".
    pub client_id: String,
    /// Most records one `poll` hands out (`max.poll.records`). Default 500.
    pub max_poll_records: usize,
    /// Most bytes read from one partition per `poll` (`max.partition.fetch.bytes`).
    /// Default 1 MiB.
    pub max_partition_fetch_bytes: usize,
    /// Where a share-partition the group never read starts, unless the group config
    /// `share.auto.offset.reset` says (it is in force where set, as for network
    /// members): `Latest` (Kafka's default) or `Earliest`. `None` is taken as `Latest`.
    pub auto_offset_reset: OffsetReset,
    /// Which records the group reads, unless the group config `share.isolation.level`
    /// says (in force where set): `ReadUncommitted` (Kafka's default) hands out every
    /// data record up to the high watermark; `ReadCommitted` reads up to the last
    /// stable offset and never hands out the records of aborted transactions.
    pub isolation_level: IsolationLevel,
}

impl ShareConsumerConfig {
    /// Settings for a member of `group_id` reading `topics`, Kafka's defaults otherwise.
    pub fn new(group_id: impl Into<String>, topics: &[&str]) -> Self {
        ShareConsumerConfig {
            group_id: group_id.into(),
            topics: topics.iter().map(|t| t.to_string()).collect(),
            client_id: "tidelog-share".into(),
            max_poll_records: 500,
            max_partition_fetch_bytes: 1 << 20,
            auto_offset_reset: OffsetReset::Latest,
            isolation_level: IsolationLevel::ReadUncommitted,
        }
    }

    /// Where a share-partition the group never read starts.
    pub fn auto_offset_reset(mut self, reset: OffsetReset) -> Self {
        self.auto_offset_reset = reset;
        self
    }

    /// Which records the group reads (see [`ShareConsumerConfig::isolation_level`]).
    pub fn isolation_level(mut self, level: IsolationLevel) -> Self {
        self.isolation_level = level;
        self
    }

    /// Most records one `poll` hands out.
    pub fn max_poll_records(mut self, n: usize) -> Self {
        self.max_poll_records = n.max(1);
        self
    }

    /// The client id.
    pub fn client_id(mut self, id: impl Into<String>) -> Self {
        self.client_id = id.into();
        self
    }
}

/// A record a [`ShareConsumer`] acquired: a copy of the log's record, with how many
/// times it has been delivered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareRecord {
    /// Topic name.
    pub topic: Arc<str>,
    /// Partition index.
    pub partition: i32,
    /// Offset in the partition.
    pub offset: i64,
    /// Timestamp, ms since the epoch.
    pub timestamp: i64,
    /// The key, or None.
    pub key: Option<Vec<u8>>,
    /// The value, or None for a tombstone.
    pub value: Option<Vec<u8>>,
    /// The headers, in order.
    pub headers: Vec<(String, Option<Vec<u8>>)>,
    /// Deliveries of the record so far, this one included (1 the first time).
    pub delivery_count: i16,
}

/// Where a record handed out stands with this consumer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Held {
    /// Handed out, not acknowledged yet.
    Delivered,
    /// Acknowledged, not yet sent to the coordinator.
    Acknowledged(AcknowledgeType),
}

type RecordKey = (Arc<str>, i32, i64);

/// Acknowledgements to send, by (topic, partition).
type Acks = BTreeMap<(Arc<str>, i32), Vec<(i64, AcknowledgeType)>>;

/// A member of a share group (Kafka's `KafkaShareConsumer`).
///
/// `poll` hands out records this member acquired; each must be acknowledged with
/// [`acknowledge`](Self::acknowledge) (explicit mode, once `acknowledge` was called) or
/// is accepted by the next `poll` (implicit mode, as long as it never was).
/// Acknowledgements reach the coordinator with the next `poll`, [`commit_sync`](Self::commit_sync)
/// or when the consumer is dropped. A record not acknowledged before its lock
/// (`group.share.record.lock.duration.ms`) expires goes to another member; dropping the
/// consumer releases what it holds.
///
/// ```
/// use std::time::Duration;
/// use tidelog::{AcknowledgeType, Broker, OffsetReset, Producer, ProducerRecord, ShareConsumer, ShareConsumerConfig, TopicConfig};
///
/// let dir = tempfile::tempdir()?;
/// let broker = Broker::open(dir.path())?;
/// broker.create_topic("jobs", 1, TopicConfig::new())?;
/// Producer::new(&broker)?.send("jobs", ProducerRecord::new(b"job-1"))?;
///
/// let config = ShareConsumerConfig::new("workers", &["jobs"]).auto_offset_reset(OffsetReset::Earliest);
/// let mut worker = ShareConsumer::new(&broker, config)?;
/// let records = worker.poll(Duration::from_secs(5))?;
/// assert_eq!(records.len(), 1);
/// worker.acknowledge(&records[0], AcknowledgeType::Accept)?;
/// worker.commit_sync()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct ShareConsumer {
    broker: Broker,
    config: ShareConsumerConfig,
    member_id: String,
    held: BTreeMap<RecordKey, Held>,
    explicit: bool,
    signal: Arc<Signal>,
    watched: Vec<Partition>,
    /// Where the next poll starts among the partitions (round robin).
    next: usize,
    closed: bool,
}

impl std::fmt::Debug for ShareConsumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShareConsumer")
            .field("group_id", &self.config.group_id)
            .field("member_id", &self.member_id)
            .field("held", &self.held.len())
            .finish()
    }
}

impl ShareConsumer {
    /// Joins the share group of `config` on `broker` (making `__share_group_state` on
    /// first use). The topics must exist, and the group id must not be a classic or
    /// consumer group's ([`ShareError::NotShareGroup`]).
    pub fn new(broker: &Broker, config: ShareConsumerConfig) -> Result<ShareConsumer> {
        for t in &config.topics {
            broker.registered_topic(t)?;
        }
        // A group id names one kind of group (Kafka refuses a share member of a
        // classic or consumer group).
        if broker
            .group_coordinator()
            .group_type(&config.group_id)
            .is_some()
        {
            return Err(Error::Share {
                group: config.group_id.clone(),
                topic: config.topics.first().cloned().unwrap_or_default(),
                partition: -1,
                source: ShareError::NotShareGroup,
            });
        }
        let share = broker.share_coordinator()?;
        let member_id = share.join(&config.group_id, &config.topics, &config.client_id)?;
        Ok(ShareConsumer {
            broker: broker.clone(),
            config,
            member_id,
            held: BTreeMap::new(),
            explicit: false,
            signal: Arc::new(Signal::default()),
            watched: Vec::new(),
            next: 0,
            closed: false,
        })
    }

    /// The member id the share group knows this consumer by.
    pub fn member_id(&self) -> &str {
        &self.member_id
    }

    /// The group id.
    pub fn group_id(&self) -> &str {
        &self.config.group_id
    }

    /// Sends the acknowledgements made so far (in implicit mode, accepting every record
    /// handed out), then waits up to `timeout` for records to acquire. Returns at once
    /// with what it acquired, or empty at the timeout. In explicit mode, a record
    /// handed out by the last poll and not acknowledged is an error (Kafka's
    /// IllegalStateException): acknowledge every record before polling again.
    pub fn poll(&mut self, timeout: Duration) -> Result<Vec<ShareRecord>> {
        self.check_open()?;
        if self.explicit
            && let Some(((topic, partition, offset), _)) =
                self.held.iter().find(|(_, h)| **h == Held::Delivered)
        {
            return Err(self.error(
                topic,
                *partition,
                ShareError::InvalidRequest(format!(
                    "record at offset {offset} was not acknowledged before the next poll (explicit acknowledgement)"
                )),
            ));
        }
        self.commit_sync()?;
        let deadline = Instant::now() + timeout;
        loop {
            let seen = self.signal.current();
            let records = self.fetch_once()?;
            let now = Instant::now();
            if !records.is_empty() || now >= deadline {
                return Ok(records);
            }
            self.signal.wait_past(seen, deadline.min(now + RECHECK));
        }
    }

    /// Acknowledges a record this consumer acquired: `Accept` (processed),
    /// `Release` (give it to the group again) or `Reject` (never deliver it again).
    /// Switches the consumer to explicit acknowledgement. Sent with the next `poll` or
    /// [`commit_sync`](Self::commit_sync).
    pub fn acknowledge(&mut self, record: &ShareRecord, kind: AcknowledgeType) -> Result<()> {
        self.check_open()?;
        let key = (Arc::clone(&record.topic), record.partition, record.offset);
        match self.held.get_mut(&key) {
            Some(h @ Held::Delivered) => {
                *h = Held::Acknowledged(kind);
                self.explicit = true;
                Ok(())
            }
            Some(Held::Acknowledged(_)) => Err(self.error(
                &record.topic,
                record.partition,
                ShareError::InvalidRecordState {
                    offset: record.offset,
                    state: None,
                    reason: "it was acknowledged already".into(),
                },
            )),
            None => Err(self.error(
                &record.topic,
                record.partition,
                ShareError::InvalidRecordState {
                    offset: record.offset,
                    state: None,
                    reason: "this consumer did not hand it out (or it was acknowledged and sent)"
                        .into(),
                },
            )),
        }
    }

    /// Sends the acknowledgements made so far to the share coordinator and waits until
    /// they are in `__share_group_state`. In implicit mode every record handed out is
    /// accepted. Fails with the first acknowledgement the coordinator refused (a record
    /// whose lock expired went to another member:
    /// [`ShareError::InvalidRecordState`]); the others count.
    pub fn commit_sync(&mut self) -> Result<()> {
        self.check_open()?;
        let implicit = !self.explicit;
        let mut by_partition = Acks::new();
        let mut keep = BTreeMap::new();
        for ((topic, partition, offset), h) in std::mem::take(&mut self.held) {
            let kind = match h {
                Held::Acknowledged(kind) => kind,
                Held::Delivered if implicit => AcknowledgeType::Accept,
                Held::Delivered => {
                    keep.insert((topic, partition, offset), h);
                    continue;
                }
            };
            by_partition
                .entry((topic, partition))
                .or_default()
                .push((offset, kind));
        }
        self.held = keep;
        self.send(by_partition)
    }

    /// Leaves the share group: sends the acknowledgements made so far and releases
    /// every record still held. Dropping the consumer does the same.
    pub fn close(&mut self) -> Result<()> {
        if self.closed {
            return Ok(());
        }
        let sent = self.commit_sync();
        self.closed = true;
        for p in self.watched.drain(..) {
            p.unwatch(&self.signal);
        }
        let share = self.broker.share_coordinator()?;
        share.leave(&self.config.group_id, &self.member_id, Instant::now())?;
        sent
    }

    fn send(&mut self, acks: Acks) -> Result<()> {
        if acks.is_empty() {
            return Ok(());
        }
        let share = self.broker.share_coordinator()?;
        let now = Instant::now();
        let mut first_error = None;
        for ((topic, partition), list) in acks {
            let results = share.acknowledge(
                &self.config.group_id,
                &self.member_id,
                &topic,
                partition,
                &list,
                now,
            )?;
            for (_, result) in results {
                if let (Err(e), None) = (result, &first_error) {
                    first_error = Some(self.error(&topic, partition, e));
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    fn check_open(&self) -> Result<()> {
        if self.closed {
            return Err(Error::Closed(format!(
                "share consumer {} of group {:?}",
                self.member_id, self.config.group_id
            )));
        }
        Ok(())
    }

    fn error(&self, topic: &str, partition: i32, source: ShareError) -> Error {
        Error::Share {
            group: self.config.group_id.clone(),
            topic: topic.to_string(),
            partition,
            source,
        }
    }

    /// The partitions of the subscribed topics, watched for appends.
    fn partitions(&mut self) -> Result<Vec<Partition>> {
        let mut out = Vec::new();
        for t in &self.config.topics {
            out.extend(
                self.broker
                    .registered_topic(t)?
                    .partitions()
                    .iter()
                    .cloned(),
            );
        }
        if out.len() != self.watched.len() {
            for p in self.watched.drain(..) {
                p.unwatch(&self.signal);
            }
            for p in &out {
                p.watch(&self.signal);
            }
            self.watched = out.clone();
        }
        Ok(out)
    }

    /// One pass over the partitions: acquires what there is, never waits.
    fn fetch_once(&mut self) -> Result<Vec<ShareRecord>> {
        let partitions = self.partitions()?;
        let mut out = Vec::new();
        let n = partitions.len();
        for k in 0..n {
            let room = self.config.max_poll_records - out.len();
            if room == 0 {
                break;
            }
            let p = &partitions[(self.next + k) % n];
            let got = self.fetch_partition(p, room)?;
            for r in &got {
                let key = (Arc::clone(&r.topic), r.partition, r.offset);
                self.held.insert(key, Held::Delivered);
            }
            out.extend(got);
        }
        if n > 0 {
            self.next = (self.next + 1) % n;
        }
        Ok(out)
    }

    /// Acquires up to `room` records of one partition.
    fn fetch_partition(&self, p: &Partition, room: usize) -> Result<Vec<ShareRecord>> {
        let share = self.broker.share_coordinator()?;
        let group = &self.config.group_id;
        let (topic, index) = (p.topic(), p.index());
        // The group's configs, where set, are in force over this consumer's settings
        // (as for every member over the network); `share.auto.offset.reset` the
        // coordinator reads itself, for a new share-partition only.
        let overrides = share.read_overrides(group);
        let mode = ShareReadMode {
            committed: overrides
                .read_committed
                .unwrap_or(self.config.isolation_level == IsolationLevel::ReadCommitted),
            earliest_by_default: self.config.auto_offset_reset == OffsetReset::Earliest,
        };
        let max_bytes = self.config.max_partition_fetch_bytes;
        let now = Instant::now();
        let Some(read) =
            share.read_share_partition(p, group, topic, index, mode, max_bytes, now)?
        else {
            return Ok(Vec::new());
        };
        // Control batches and the records of aborted transactions are never handed out:
        // left out of the candidates, they count as archived (offsets of the read with
        // no record to acquire).
        let topic: Arc<str> = Arc::from(topic);
        let candidates = read_records(
            &read.slice,
            &topic,
            index,
            read.from,
            &read.aborted,
            p.config().max_message_bytes,
        )?;
        let offsets: Vec<i64> = candidates.iter().map(|r| r.offset).collect();
        let acquired = share.acquire(
            group,
            &self.member_id,
            &topic,
            index,
            &offsets,
            read.slice.next_offset(),
            room,
            now,
        )?;
        let mut by_offset: BTreeMap<i64, ShareRecord> =
            candidates.into_iter().map(|r| (r.offset, r)).collect();
        Ok(acquired
            .into_iter()
            .filter_map(|a| {
                by_offset.remove(&a.offset).map(|mut r| {
                    r.delivery_count = a.delivery_count;
                    r
                })
            })
            .collect())
    }
}

/// The records at or after `from` of the batches in `bytes`, control batches and the
/// batches of the `aborted` transactions skipped.
fn read_records(
    bytes: &[u8],
    topic: &Arc<str>,
    partition: i32,
    from: i64,
    aborted: &[AbortedTxn],
    max_message_bytes: u32,
) -> Result<Vec<ShareRecord>> {
    let location = format!("{topic}-{partition}");
    let limit = decompression_limit(max_message_bytes);
    let mut out = Vec::new();
    let mut scratch = Vec::new();
    let mut rest = bytes;
    while !rest.is_empty() {
        let batch = Batch::parse_at(rest, &location, 0)?;
        rest = &rest[batch.len()..];
        if batch.is_control()
            || batch.last_offset() < from
            || aborted.iter().any(|a| a.holds(&batch))
        {
            continue;
        }
        for r in batch.decode_records(&location, limit, &mut scratch)? {
            let r = r?;
            if r.offset < from {
                continue;
            }
            out.push(ShareRecord {
                topic: Arc::clone(topic),
                partition,
                offset: r.offset,
                timestamp: r.timestamp,
                key: r.key.map(<[u8]>::to_vec),
                value: r.value.map(<[u8]>::to_vec),
                headers: r
                    .headers
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.map(<[u8]>::to_vec)))
                    .collect(),
                delivery_count: 0,
            });
        }
    }
    Ok(out)
}

impl Drop for ShareConsumer {
    fn drop(&mut self) {
        // Errors have no one to go to: what was not sent is released by the lock's
        // expiry (or by the leave, which releases everything held).
        let _ = self.close();
    }
}
