//! The standalone consumer, and the fetch machinery group members share with it.
//!
//! `poll` reads whole batches from the assigned partitions as zero-copy slices of the
//! log and hands them out in a [`ConsumerRecords`]; records are decoded only as the
//! caller iterates. A consumer blocked in `poll` waits on its own [`Signal`], which every
//! assigned partition notifies on append: it wakes as soon as any of them grows.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use crate::broker::Broker;
use crate::coordinator::{CommitOffset, GroupError, OffsetCommitRequest};
use crate::error::{Error, Result};
use crate::record::{Batch, Headers, Records, decompression_limit};
use crate::storage::{AbortedTxn, LogSlice};
use crate::topic::{Partition, Signal};

use super::source::{Origin, RemoteConsumer, Source};

/// What to do when a partition has no committed offset, or its committed offset is no
/// longer in the log (Kafka `auto.offset.reset`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OffsetReset {
    /// Start from the first record still in the log.
    Earliest,
    /// Start after the last record (only new records). Kafka's default.
    #[default]
    Latest,
    /// Fail with `Error::NoOffsetForPartition`.
    None,
}

/// Which records of transactions a consumer reads (Kafka `isolation.level`). Control
/// records (transaction markers) are never handed out, at either level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IsolationLevel {
    /// Every record up to the high watermark, including those of open and aborted
    /// transactions. Kafka's default.
    #[default]
    ReadUncommitted,
    /// Records up to the last stable offset (a transaction's records wait until it is
    /// decided), without those of aborted transactions. The end of a partition
    /// ("latest", `seek_to_end`) is then its last stable offset.
    ReadCommitted,
}

/// Settings of a consumer. Defaults mirror the Kafka consumer's.
#[derive(Debug, Clone)]
pub struct ConsumerConfig {
    /// The group whose committed offsets the consumer reads and writes (`group.id`).
    /// Required for commits. Default None.
    pub group_id: Option<String>,
    /// Policy without a valid committed offset (`auto.offset.reset`). Default Latest.
    pub auto_offset_reset: OffsetReset,
    /// Most bytes read from one partition per poll (`max.partition.fetch.bytes`);
    /// at least one batch is always returned. Default 1 MiB.
    pub max_partition_fetch_bytes: usize,
    /// Most bytes returned by one poll (`fetch.max.bytes`). Default 50 MiB.
    pub fetch_max_bytes: usize,
    /// Check the CRC-32C of every batch a poll hands out before decoding its records
    /// (`check.crcs`). Default true, as in Kafka: a batch whose bytes changed on disk
    /// after it was appended is an [`Error::Corrupt`] instead of wrong records.
    pub check_crcs: bool,
    /// Which records of transactions to read (`isolation.level`). Default
    /// ReadUncommitted, as in Kafka.
    pub isolation_level: IsolationLevel,
    /// The rack the consumer runs in (`client.rack`, KIP-392): over the network it is
    /// sent in Fetch (v11+), and a leader that prefers a replica in that rack is
    /// answered by fetching from that replica. Unused in process. Default None.
    pub client_rack: Option<String>,
}

impl Default for ConsumerConfig {
    fn default() -> Self {
        ConsumerConfig {
            group_id: None,
            auto_offset_reset: OffsetReset::Latest,
            max_partition_fetch_bytes: 1 << 20,
            fetch_max_bytes: 50 << 20,
            check_crcs: true,
            isolation_level: IsolationLevel::ReadUncommitted,
            client_rack: None,
        }
    }
}

impl ConsumerConfig {
    /// Sets `group.id`.
    #[must_use]
    pub fn group_id(mut self, group: impl Into<String>) -> Self {
        self.group_id = Some(group.into());
        self
    }

    /// Sets `auto.offset.reset`.
    #[must_use]
    pub fn auto_offset_reset(mut self, reset: OffsetReset) -> Self {
        self.auto_offset_reset = reset;
        self
    }

    /// Sets `max.partition.fetch.bytes`.
    #[must_use]
    pub fn max_partition_fetch_bytes(mut self, bytes: usize) -> Self {
        self.max_partition_fetch_bytes = bytes.max(1);
        self
    }

    /// Sets `check.crcs`.
    #[must_use]
    pub fn check_crcs(mut self, check: bool) -> Self {
        self.check_crcs = check;
        self
    }

    /// Sets `isolation.level`.
    #[must_use]
    pub fn isolation_level(mut self, level: IsolationLevel) -> Self {
        self.isolation_level = level;
        self
    }

    /// Sets `client.rack`.
    #[must_use]
    pub fn client_rack(mut self, rack: impl Into<String>) -> Self {
        self.client_rack = Some(rack.into());
        self
    }
}

/// One record handed out by `poll`, borrowing its key, value and headers from the log.
#[derive(Debug, Clone, Copy)]
pub struct ConsumerRecord<'a> {
    /// Topic name.
    pub topic: &'a str,
    /// Partition index.
    pub partition: i32,
    /// Offset in the partition.
    pub offset: i64,
    /// Timestamp (CreateTime or LogAppendTime), ms since the epoch.
    pub timestamp: i64,
    /// The key, or None.
    pub key: Option<&'a [u8]>,
    /// The value, or None for a tombstone.
    pub value: Option<&'a [u8]>,
    /// The headers.
    pub headers: Headers<'a>,
}

/// Batches read from one partition.
struct Fetched {
    topic: Arc<str>,
    partition: i32,
    /// First offset to hand out (the first batch may start before it).
    from: i64,
    slice: FetchedBytes,
    /// Most bytes one compressed batch may decompress to (from `max.message.bytes`).
    limit: usize,
    /// Check each batch's CRC-32C before decoding it (`check.crcs`).
    check_crcs: bool,
    /// Read committed: the aborted transactions with records in the slice, whose
    /// batches are skipped (empty for read_uncommitted).
    aborted: Vec<AbortedTxn>,
    /// The records sections of the slice's compressed batches, in order, decompressed
    /// the first time an iterator reaches one of them. Uncompressed batches are read
    /// in place and never touch this.
    decompressed: OnceLock<Vec<Result<Vec<u8>>>>,
}

/// The batches of one [`Fetched`]: a zero-copy slice of a local log, or the records of a
/// Fetch response from a broker (whole batches: a trailing partial batch is cut off
/// before).
enum FetchedBytes {
    Log(LogSlice),
    #[cfg(feature = "client")]
    Wire(bytes::Bytes),
}

impl std::ops::Deref for FetchedBytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            FetchedBytes::Log(s) => s,
            #[cfg(feature = "client")]
            FetchedBytes::Wire(b) => b,
        }
    }
}

impl Fetched {
    /// True if batch `b` of the slice is handed out: not a control batch (a
    /// transaction marker) nor a batch of an aborted transaction.
    #[inline]
    fn shows(&self, b: &Batch<'_>) -> bool {
        !b.is_control()
            && (self.aborted.is_empty()
                || !b.is_transactional()
                || !self.aborted.iter().any(|a| {
                    a.producer_id == b.producer_id()
                        && a.first_offset <= b.base_offset()
                        && b.base_offset() < a.last_offset
                }))
    }

    /// True if the slice has a record to hand out: one at or after `from`, in a batch
    /// [`Fetched::shows`]; or a header that does not parse (the iterator reports it).
    /// Reads batch headers only (the CRC is the iterator's to check), and usually just
    /// the first.
    fn has_records(&self) -> bool {
        let mut seen = 0;
        for b in headers(&self.slice, &self.topic) {
            if b.last_offset() >= self.from && self.shows(&b) {
                return true;
            }
            seen += b.len();
        }
        seen < self.slice.len()
    }

    /// Decompresses every compressed batch of the slice (each on its own: a bad one is
    /// an error in its place and the others still decode).
    fn decompress(&self) -> Vec<Result<Vec<u8>>> {
        let location = format!("{}-{}", self.topic, self.partition);
        let mut out = Vec::new();
        let mut rest: &[u8] = &self.slice;
        while let Ok(b) = Batch::parse_header_at(rest, &location, 0) {
            rest = &rest[b.len()..];
            if b.compression() != 0 {
                let mut buf = Vec::new();
                out.push(
                    b.decompress_into(&location, self.limit, &mut buf)
                        .map(|()| buf),
                );
            }
        }
        out
    }
}

/// The batches of `bytes` by their headers alone (no CRC check), up to the first that
/// does not parse.
fn headers<'a>(bytes: &'a [u8], location: &'a str) -> impl Iterator<Item = Batch<'a>> + 'a {
    let mut rest = bytes;
    std::iter::from_fn(move || {
        let b = Batch::parse_header_at(rest, location, 0).ok()?;
        rest = &rest[b.len()..];
        Some(b)
    })
}

/// The records of one `poll`: zero-copy views of the log, decoded while iterating.
#[derive(Default)]
pub struct ConsumerRecords {
    fetched: Vec<Fetched>,
}

impl std::fmt::Debug for ConsumerRecords {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConsumerRecords")
            .field("partitions", &self.fetched.len())
            .finish()
    }
}

impl ConsumerRecords {
    /// True if the poll returned nothing.
    pub fn is_empty(&self) -> bool {
        self.fetched.is_empty()
    }

    /// The (topic, partition) pairs that returned records.
    pub fn partitions(&self) -> Vec<(String, i32)> {
        self.fetched
            .iter()
            .map(|f| (f.topic.to_string(), f.partition))
            .collect()
    }

    /// Bytes of batches returned.
    pub fn size_bytes(&self) -> usize {
        self.fetched.iter().map(|f| f.slice.len()).sum()
    }

    /// Iterates the records, partition by partition, in offset order within each.
    /// Uncompressed batches are decoded in place; a compressed batch (gzip, snappy, lz4,
    /// zstd) is decompressed into a buffer these records own, once, when an iterator
    /// first reaches it, and at most 64 x `max.message.bytes` (see
    /// [`decompression_limit`]). An item is an error only for a batch that cannot be
    /// decoded: a bad compressed stream ([`Error::Corrupt`] naming the partition and the
    /// batch's offset) or malformed records from a client.
    pub fn iter(&self) -> ConsumerRecordsIter<'_> {
        ConsumerRecordsIter {
            fetched: self.fetched.iter(),
            current: None,
            compressed_seen: 0,
            topic: "",
            partition: -1,
            from: 0,
            rest: &[],
            records: None,
        }
    }

    /// Number of records (decodes the batches' record headers).
    pub fn count(&self) -> usize {
        self.iter().filter(|r| r.is_ok()).count()
    }

    /// Adds one partition `p` of a Fetch answer (whose error code the caller checked),
    /// read from offset `from` on: the whole batches of its records (a broker may end
    /// an answer with part of a batch), each compressed one bounded as a batch of a log
    /// with Kafka's default `max.message.bytes` (the topic's own setting is the
    /// broker's to know), and, reading committed, without the transactions its
    /// `aborted_transactions` lists. Returns the offset after the last whole batch, the
    /// partition's new position; None when the answer holds nothing past `from`.
    #[cfg(feature = "client")]
    pub(crate) fn push_fetched(
        &mut self,
        (topic, partition, from): (Arc<str>, i32, i64),
        p: &kafka_protocol::messages::fetch_response::PartitionData,
        check_crcs: bool,
    ) -> Result<Option<i64>> {
        /// Kafka's default `max.message.bytes`.
        const DEFAULT_MAX_MESSAGE_BYTES: u32 = 1_048_588;
        let Some(records) = p.records.as_ref().filter(|r| !r.is_empty()) else {
            return Ok(None);
        };
        let (whole, next) = whole_batches(records, &format!("{topic}-{partition}"))?;
        if whole == 0 || next <= from {
            return Ok(None);
        }
        let limit = decompression_limit(DEFAULT_MAX_MESSAGE_BYTES.max(whole as u32));
        let aborted: Vec<(i64, i64)> = p
            .aborted_transactions
            .iter()
            .flatten()
            .map(|a| (a.producer_id.0, a.first_offset))
            .collect();
        self.push_wire(
            (topic, partition, from),
            records.slice(..whole),
            limit,
            check_crcs,
            &aborted,
        );
        Ok(Some(next))
    }

    /// Adds the whole batches `batches` of `topic`-`partition` (as a Fetch response
    /// carries them), whose records from offset `from` on are handed out; `limit`
    /// bounds what one compressed batch may decompress to. `aborted` is the response's
    /// `aborted_transactions` (producer id, first offset) of a read_committed fetch:
    /// a producer's transactional batches from there to its next marker in the
    /// batches (or their end) are left out, as Kafka's consumer does.
    #[cfg(feature = "client")]
    fn push_wire(
        &mut self,
        (topic, partition, from): (Arc<str>, i32, i64),
        batches: bytes::Bytes,
        limit: usize,
        check_crcs: bool,
        aborted: &[(i64, i64)],
    ) {
        let aborted = aborted
            .iter()
            .map(|&(producer_id, first_offset)| AbortedTxn {
                producer_id,
                first_offset,
                last_offset: headers(&batches, &topic)
                    .find(|b| {
                        b.is_control()
                            && b.producer_id() == producer_id
                            && b.base_offset() >= first_offset
                    })
                    .map_or(i64::MAX, |b| b.base_offset()),
                last_stable_offset: -1,
            })
            .collect();
        let fetched = Fetched {
            topic,
            partition,
            from,
            slice: FetchedBytes::Wire(batches),
            limit,
            check_crcs,
            aborted,
            decompressed: OnceLock::new(),
        };
        // Only markers or aborted records: nothing to hand out.
        if fetched.has_records() {
            self.fetched.push(fetched);
        }
    }
}

/// The length of the whole batches at the start of `records` (a broker may end a Fetch
/// answer with part of a batch) and the offset after the last of them; `location`
/// names the partition in the error of a malformed batch header.
#[cfg(feature = "client")]
fn whole_batches(records: &[u8], location: &str) -> Result<(usize, i64)> {
    let mut at = 0;
    let mut next = -1;
    while records.len() - at >= 12 {
        let len = i32::from_be_bytes([
            records[at + 8],
            records[at + 9],
            records[at + 10],
            records[at + 11],
        ]);
        let size = 12usize.saturating_add(len.max(0) as usize);
        if records.len() - at < size {
            break;
        }
        let batch = Batch::parse_header_at(&records[at..at + size], location, at as u64)?;
        next = batch.last_offset() + 1;
        at += size;
    }
    Ok((at, next))
}

impl<'a> IntoIterator for &'a ConsumerRecords {
    type Item = Result<ConsumerRecord<'a>>;
    type IntoIter = ConsumerRecordsIter<'a>;

    /// `for record in &records` is `records.iter()`.
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

/// Iterator over the records of a [`ConsumerRecords`]: walks the batch headers of each
/// fetched slice and decodes records in place (no copy, no allocation) or, for a
/// compressed batch, from the records' decompressed copy.
pub struct ConsumerRecordsIter<'a> {
    fetched: std::slice::Iter<'a, Fetched>,
    /// The slice being walked.
    current: Option<&'a Fetched>,
    /// Compressed batches of the current slice already passed.
    compressed_seen: usize,
    topic: &'a str,
    partition: i32,
    /// Records before this offset (in the first batch) were already consumed.
    from: i64,
    /// Bytes of the current slice not yet walked.
    rest: &'a [u8],
    records: Option<Records<'a>>,
}

impl std::fmt::Debug for ConsumerRecordsIter<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConsumerRecordsIter")
            .field("topic", &self.topic)
            .field("partition", &self.partition)
            .finish()
    }
}

impl<'a> ConsumerRecordsIter<'a> {
    /// `b` if its CRC-32C matches its bytes; else `Error::Corrupt` naming the partition
    /// and the batch's offset.
    fn check_crc(&self, b: Batch<'a>) -> Result<Batch<'a>> {
        match Batch::parse_at(b.as_bytes(), self.topic, 0) {
            Ok(_) => Ok(b),
            Err(Error::Corrupt { reason, .. }) => Err(Error::corrupt(
                format!(
                    "{}-{} (batch at offset {})",
                    self.topic,
                    self.partition,
                    b.base_offset()
                ),
                0,
                reason,
            )),
            Err(e) => Err(e),
        }
    }
}

impl<'a> Iterator for ConsumerRecordsIter<'a> {
    type Item = Result<ConsumerRecord<'a>>;

    /// The next record of the current batch, inlined into the caller's loop (so that
    /// the fields it does not read are never decoded into a `ConsumerRecord`); the
    /// rest (skipping records before the fetch offset, moving to the next batch or
    /// partition, decompressing) is `next_slow`.
    #[inline(always)]
    fn next(&mut self) -> Option<Self::Item> {
        if let Some(records) = &mut self.records {
            match records.next() {
                Some(Ok(r)) if r.offset >= self.from => {
                    return Some(Ok(ConsumerRecord {
                        topic: self.topic,
                        partition: self.partition,
                        offset: r.offset,
                        timestamp: r.timestamp,
                        key: r.key,
                        value: r.value,
                        headers: r.headers,
                    }));
                }
                // Before the fetch offset: skipped below.
                Some(Ok(_)) => {}
                Some(Err(e)) => return Some(Err(e)),
                None => self.records = None,
            }
        }
        self.next_slow()
    }
}

impl<'a> ConsumerRecordsIter<'a> {
    #[inline(never)]
    fn next_slow(&mut self) -> Option<Result<ConsumerRecord<'a>>> {
        loop {
            if let Some(records) = &mut self.records {
                match records.next() {
                    Some(Ok(r)) if r.offset < self.from => continue,
                    Some(Ok(r)) => {
                        return Some(Ok(ConsumerRecord {
                            topic: self.topic,
                            partition: self.partition,
                            offset: r.offset,
                            timestamp: r.timestamp,
                            key: r.key,
                            value: r.value,
                            headers: r.headers,
                        }));
                    }
                    Some(Err(e)) => return Some(Err(e)),
                    None => self.records = None,
                }
            }
            if !self.rest.is_empty() {
                // The slice holds whole batches validated when they were appended; with
                // `check.crcs` each one's CRC is checked again here.
                let next =
                    Batch::parse_header_at(self.rest, self.topic, 0).and_then(|b| {
                        match self.current {
                            Some(f) if f.check_crcs => self.check_crc(b),
                            _ => Ok(b),
                        }
                    });
                match next {
                    // Markers and aborted records are never handed out; a compressed
                    // one still counts among the slice's decompressed batches.
                    Ok(b) if !self.current.is_none_or(|f| f.shows(&b)) => {
                        self.rest = &self.rest[b.len()..];
                        if b.compression() != 0 {
                            self.compressed_seen += 1;
                        }
                    }
                    Ok(b) if b.compression() != 0 => {
                        self.rest = &self.rest[b.len()..];
                        let f = self.current.expect("a slice is being walked");
                        let decompressed = f.decompressed.get_or_init(|| f.decompress());
                        let i = self.compressed_seen;
                        self.compressed_seen += 1;
                        match decompressed.get(i) {
                            Some(Ok(records)) => self.records = Some(b.records_in(records)),
                            Some(Err(e)) => return Some(Err(e.clone())),
                            None => {
                                self.rest = &[];
                                return Some(Err(Error::InvalidBatch(format!(
                                    "{}-{}: compressed batch at offset {} was not decompressed",
                                    self.topic,
                                    self.partition,
                                    b.base_offset()
                                ))));
                            }
                        }
                    }
                    Ok(b) => {
                        self.rest = &self.rest[b.len()..];
                        self.records = Some(b.records());
                    }
                    Err(e) => {
                        self.rest = &[];
                        return Some(Err(e));
                    }
                }
                continue;
            }
            let f = self.fetched.next()?;
            self.current = Some(f);
            self.compressed_seen = 0;
            self.topic = &f.topic;
            self.partition = f.partition;
            self.from = f.from;
            self.rest = &f.slice;
        }
    }
}

/// (topic, partition, offset) triples as OffsetCommit entries.
pub(crate) fn commit_entries(offsets: &[(&str, i32, i64)]) -> Vec<CommitOffset> {
    offsets
        .iter()
        .map(|(t, p, o)| CommitOffset {
            topic: t.to_string(),
            partition: *p,
            offset: *o,
            leader_epoch: -1,
            metadata: None,
            commit_timestamp: None,
        })
        .collect()
}

/// One assigned partition and the consumer's position in it.
pub(crate) struct Assigned {
    pub(crate) topic: Arc<str>,
    pub(crate) partition: Partition,
    /// The next offset to read; None until it is initialised from the committed offset
    /// or the reset policy.
    pub(crate) position: Option<i64>,
}

/// Assignment, positions and wakeups: what a standalone consumer and a group member
/// both need to fetch.
pub(crate) struct Fetcher {
    pub(crate) broker: Broker,
    pub(crate) config: ConsumerConfig,
    pub(crate) assigned: Vec<Assigned>,
    pub(crate) signal: Arc<Signal>,
    /// Where the next fetch starts, for fairness between partitions.
    next: usize,
}

impl Fetcher {
    pub(crate) fn new(broker: Broker, config: ConsumerConfig) -> Self {
        Fetcher {
            broker,
            config,
            assigned: Vec::new(),
            signal: Arc::new(Signal::default()),
            next: 0,
        }
    }

    /// Replaces the assignment; positions start unset (committed offset or policy).
    pub(crate) fn assign(&mut self, partitions: &[(String, i32)]) -> Result<()> {
        let mut new = Vec::with_capacity(partitions.len());
        for (topic, p) in partitions {
            let partition = self.broker.topic(topic)?.partition(*p)?;
            new.push(Assigned {
                topic: Arc::from(topic.as_str()),
                partition,
                position: None,
            });
        }
        self.unassign();
        for a in &new {
            a.partition.watch(&self.signal);
        }
        self.assigned = new;
        self.next = 0;
        Ok(())
    }

    /// Changes the assignment to `partitions`, keeping the positions of partitions
    /// that stay (the cooperative protocol's incremental assignment).
    pub(crate) fn update_assignment(&mut self, partitions: &[(String, i32)]) -> Result<()> {
        let keep = |a: &Assigned| {
            partitions
                .iter()
                .any(|(t, p)| **t == *a.topic && *p == a.partition.index())
        };
        let mut kept = Vec::with_capacity(partitions.len());
        for a in self.assigned.drain(..) {
            if keep(&a) {
                kept.push(a);
            } else {
                a.partition.unwatch(&self.signal);
            }
        }
        for (topic, p) in partitions {
            if kept
                .iter()
                .any(|a| *a.topic == **topic && a.partition.index() == *p)
            {
                continue;
            }
            let partition = self.broker.topic(topic)?.partition(*p)?;
            partition.watch(&self.signal);
            kept.push(Assigned {
                topic: Arc::from(topic.as_str()),
                partition,
                position: None,
            });
        }
        self.assigned = kept;
        self.next = 0;
        Ok(())
    }

    pub(crate) fn unassign(&mut self) {
        for a in self.assigned.drain(..) {
            a.partition.unwatch(&self.signal);
        }
    }

    pub(crate) fn find(&mut self, topic: &str, partition: i32) -> Result<&mut Assigned> {
        let i = self.index_of(topic, partition)?;
        Ok(&mut self.assigned[i])
    }

    /// Where `topic`-`partition` is in the assignment; an error if it is not.
    fn index_of(&self, topic: &str, partition: i32) -> Result<usize> {
        self.assigned
            .iter()
            .position(|a| &*a.topic == topic && a.partition.index() == partition)
            .ok_or_else(|| Error::InvalidConfig {
                key: "assignment".into(),
                reason: format!("partition {topic}-{partition} is not assigned to this consumer"),
            })
    }

    /// Where the consumer's reads of `a` end: the high watermark, or the last stable
    /// offset when reading committed.
    pub(crate) fn end_offset(&self, a: &Assigned) -> Result<i64> {
        match self.config.isolation_level {
            IsolationLevel::ReadUncommitted => Ok(a.partition.high_watermark()),
            IsolationLevel::ReadCommitted => a.partition.last_stable_offset(),
        }
    }

    /// [`Fetcher::end_offset`] of an assigned partition; an error if it is not.
    pub(crate) fn end_offset_of(&self, topic: &str, partition: i32) -> Result<i64> {
        self.end_offset(&self.assigned[self.index_of(topic, partition)?])
    }

    /// The position after applying the reset policy to `committed` (None = no commit).
    fn reset_position(&self, a: &Assigned, committed: Option<i64>) -> Result<i64> {
        let start = a.partition.log_start_offset();
        // "latest" is the high watermark (records above it are not committed yet), or
        // the last stable offset when reading committed.
        let end = self.end_offset(a)?;
        if let Some(c) = committed
            && c >= start
            && c <= end
        {
            return Ok(c);
        }
        match self.config.auto_offset_reset {
            OffsetReset::Earliest => Ok(start),
            OffsetReset::Latest => Ok(end),
            OffsetReset::None => Err(Error::NoOffsetForPartition {
                partition: format!("{}-{}", a.topic, a.partition.index()),
                offset: committed.unwrap_or(-1),
                start,
                end,
            }),
        }
    }

    /// The group's committed offset for one partition (None without a group or a
    /// commit).
    pub(crate) fn committed(&self, topic: &str, partition: i32) -> Result<Option<i64>> {
        let Some(group) = self.config.group_id.as_ref() else {
            return Ok(None);
        };
        let offsets = self
            .broker
            .group_coordinator()
            .offset_fetch(group, Some(&[(topic.to_string(), partition)]))
            .map_err(|source| Error::Group {
                group: group.clone(),
                source,
            })?;
        Ok(offsets
            .first()
            .and_then(|o| (o.offset >= 0).then_some(o.offset)))
    }

    /// For each assigned partition, the offset of its first record with a timestamp at
    /// or after `timestamp`, None when it has none before its end.
    pub(crate) fn offsets_for_times(
        &self,
        timestamp: i64,
    ) -> Result<Vec<(String, i32, Option<i64>)>> {
        let mut out = Vec::with_capacity(self.assigned.len());
        for a in &self.assigned {
            let end = self.end_offset(a)?;
            let found = a.partition.offset_for_timestamp(timestamp)?;
            let offset = found.map(|(o, _)| o).filter(|o| *o < end);
            out.push((a.topic.to_string(), a.partition.index(), offset));
        }
        Ok(out)
    }

    /// The assigned partitions, as `(topic, partition)`.
    pub(crate) fn assignment(&self) -> Vec<(String, i32)> {
        self.assigned
            .iter()
            .map(|a| (a.topic.to_string(), a.partition.index()))
            .collect()
    }

    /// Committed offsets of the group for the assigned partitions (None: none). When
    /// reading committed they are fetched with `require_stable` (KIP-447), and a
    /// partition for which a transaction has an offset pending is an error
    /// ([`GroupError::UnstableOffsetCommit`]).
    pub(crate) fn fetch_committed(
        &self,
    ) -> Result<Vec<std::result::Result<Option<i64>, GroupError>>> {
        let Some(group) = &self.config.group_id else {
            return Ok(vec![Ok(None); self.assigned.len()]);
        };
        let list = self.assignment();
        let coordinator = self.broker.group_coordinator();
        let offsets = match self.config.isolation_level {
            IsolationLevel::ReadCommitted => coordinator.offset_fetch_stable(group, Some(&list)),
            IsolationLevel::ReadUncommitted => coordinator
                .offset_fetch(group, Some(&list))
                .map(|offsets| offsets.into_iter().map(Ok).collect()),
        }
        .map_err(|source| Error::Group {
            group: group.clone(),
            source,
        })?;
        Ok(offsets
            .into_iter()
            .map(|o| o.map(|o| (o.offset >= 0).then_some(o.offset)))
            .collect())
    }

    /// Sets every unset position from the committed offsets or the reset policy. A
    /// partition whose committed offset is not stable yet (a transaction has one
    /// pending) keeps no position: it is not fetched, and the next call asks again,
    /// as Kafka's consumer does.
    pub(crate) fn init_positions(&mut self) -> Result<()> {
        if self.assigned.iter().all(|a| a.position.is_some()) {
            return Ok(());
        }
        let committed = self.fetch_committed()?;
        for i in 0..self.assigned.len() {
            if self.assigned[i].position.is_none()
                && let Some(Ok(committed)) = committed.get(i)
            {
                let pos = self.reset_position(&self.assigned[i], *committed)?;
                self.assigned[i].position = Some(pos);
            }
        }
        Ok(())
    }

    /// The position of an assigned partition, set first if it is not; while its
    /// committed offset is not stable, [`GroupError::UnstableOffsetCommit`] (retriable).
    pub(crate) fn position(&mut self, topic: &str, partition: i32) -> Result<i64> {
        self.init_positions()?;
        let group = self.config.group_id.clone().unwrap_or_default();
        self.find(topic, partition)?
            .position
            .ok_or_else(|| Error::Group {
                group,
                source: GroupError::UnstableOffsetCommit {
                    topic: topic.to_string(),
                    partition,
                },
            })
    }

    /// Assigned partition `i` belongs to a deleted topic (its log is closed): takes the
    /// same partition of the topic now of that name, if there is one, at the reset
    /// policy's position (another topic: the old position means nothing there; Kafka's
    /// clients tell the two apart by topic id). False while there is none.
    fn follow_recreated(&mut self, i: usize) -> Result<bool> {
        let a = &self.assigned[i];
        let Ok(now) = self
            .broker
            .registered_topic(&a.topic)
            .and_then(|t| t.partition(a.partition.index()))
        else {
            return Ok(false);
        };
        if now.log().is_closed() {
            return Ok(false);
        }
        a.partition.unwatch(&self.signal);
        now.watch(&self.signal);
        self.assigned[i].partition = now;
        let position = self.reset_position(&self.assigned[i], None)?;
        self.assigned[i].position = Some(position);
        Ok(true)
    }

    /// One pass over the assigned partitions: reads what is there, never waits.
    fn fetch_once(&mut self) -> Result<ConsumerRecords> {
        self.init_positions()?;
        let n = self.assigned.len();
        let mut out = ConsumerRecords::default();
        let mut budget = self.config.fetch_max_bytes;
        for k in 0..n {
            let i = (self.next + k) % n;
            if self.assigned[i].partition.log().is_closed() && !self.follow_recreated(i)? {
                continue;
            }
            let Some(mut pos) = self.assigned[i].position else {
                continue; // its committed offset is not stable yet
            };
            let end = self.end_offset(&self.assigned[i])?;
            let max = self.config.max_partition_fetch_bytes.min(budget.max(1));
            let committed = self.config.isolation_level == IsolationLevel::ReadCommitted;
            let slice = loop {
                if pos >= end {
                    break None;
                }
                let read = if committed {
                    self.assigned[i]
                        .partition
                        .read_committed(pos, max)
                        .map(|(s, _)| s)
                } else {
                    self.assigned[i].partition.read(pos, max)
                };
                match read {
                    Ok(s) => break Some(s),
                    Err(Error::OffsetOutOfRange { .. }) => {
                        // Retention removed the position (or the log was truncated):
                        // apply the reset policy as Kafka does, then read from there.
                        let reset = self.reset_position(&self.assigned[i], Some(pos))?;
                        self.assigned[i].position = Some(reset);
                        if reset == pos {
                            break None;
                        }
                        pos = reset;
                    }
                    Err(e) => return Err(e),
                }
            };
            let Some(slice) = slice else { continue };
            if slice.is_empty() {
                continue;
            }
            let a = &mut self.assigned[i];
            let aborted = if committed {
                a.partition.aborted_transactions(pos, slice.next_offset())?
            } else {
                Vec::new()
            };
            a.position = Some(slice.next_offset());
            budget = budget.saturating_sub(slice.len());
            let fetched = Fetched {
                topic: Arc::clone(&a.topic),
                partition: a.partition.index(),
                from: pos,
                slice: FetchedBytes::Log(slice),
                limit: decompression_limit(a.partition.log().config().max_message_bytes),
                check_crcs: self.config.check_crcs,
                aborted,
                decompressed: OnceLock::new(),
            };
            // Only markers or aborted records: the position moves past them, and the
            // poll goes on waiting.
            if fetched.has_records() {
                out.fetched.push(fetched);
            }
            if budget == 0 {
                self.next = (i + 1) % n;
                break;
            }
        }
        if n > 0 && budget > 0 {
            self.next = (self.next + 1) % n;
        }
        Ok(out)
    }

    /// Fetches, waiting until records arrive, `deadline`, or `interrupt` is raised (then
    /// it returns what it has, possibly nothing).
    pub(crate) fn poll_until(
        &mut self,
        deadline: Instant,
        interrupt: Option<&AtomicBool>,
    ) -> Result<ConsumerRecords> {
        let interrupted = || interrupt.is_some_and(|f| f.load(Ordering::Acquire));
        loop {
            if self.broker.is_closed() {
                return Err(Error::Closed(format!(
                    "broker at {}",
                    self.broker.dir().display()
                )));
            }
            let seen = self.signal.current();
            let records = self.fetch_once()?;
            if !records.is_empty() || Instant::now() >= deadline || interrupted() {
                return Ok(records);
            }
            self.signal.wait_past(seen, deadline);
        }
    }

    /// Positions of the assigned partitions as commit entries.
    pub(crate) fn positions(&self) -> Vec<CommitOffset> {
        self.assigned
            .iter()
            .filter_map(|a| {
                a.position.map(|offset| CommitOffset {
                    topic: a.topic.to_string(),
                    partition: a.partition.index(),
                    offset,
                    leader_epoch: -1,
                    metadata: None,
                    commit_timestamp: None,
                })
            })
            .collect()
    }

    /// Commits `offsets` for the group as member `member_id` of `generation_id`.
    pub(crate) fn commit(
        &self,
        generation_id: i32,
        member_id: &str,
        instance: Option<&str>,
        offsets: Vec<CommitOffset>,
    ) -> Result<()> {
        let Some(group) = &self.config.group_id else {
            return Err(Error::InvalidConfig {
                key: "group.id".into(),
                reason: "committing offsets needs a group id".into(),
            });
        };
        if offsets.is_empty() {
            return Ok(());
        }
        let group_error = |source| Error::Group {
            group: group.clone(),
            source,
        };
        let results = self
            .broker
            .group_coordinator()
            .offset_commit(OffsetCommitRequest {
                group_id: group.clone(),
                generation_id,
                member_id: member_id.to_string(),
                group_instance_id: instance.map(str::to_string),
                offsets,
            })
            .map_err(group_error)?;
        match results.into_iter().find_map(|r| r.result.err()) {
            None => Ok(()),
            Some(e) => Err(group_error(e)),
        }
    }
}

impl Drop for Fetcher {
    fn drop(&mut self) {
        self.unassign();
    }
}

/// A [`Consumer`] of a [`Broker`] in this process.
struct LocalConsumer {
    fetcher: Fetcher,
    closed: bool,
}

impl std::fmt::Debug for LocalConsumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalConsumer")
            .field("config", &self.fetcher.config)
            .field("assignment", &self.assignment())
            .finish()
    }
}

impl LocalConsumer {
    fn new(broker: &Broker, config: ConsumerConfig) -> LocalConsumer {
        LocalConsumer {
            fetcher: Fetcher::new(broker.clone(), config),
            closed: false,
        }
    }

    fn check_open(&self) -> Result<()> {
        if self.closed {
            return Err(Error::Closed("consumer".into()));
        }
        Ok(())
    }

    fn assign(&mut self, partitions: &[(&str, i32)]) -> Result<()> {
        self.check_open()?;
        let list: Vec<(String, i32)> = partitions
            .iter()
            .map(|(t, p)| (t.to_string(), *p))
            .collect();
        self.fetcher.assign(&list)
    }

    fn assignment(&self) -> Vec<(String, i32)> {
        self.fetcher.assignment()
    }

    fn seek(&mut self, topic: &str, partition: i32, offset: i64) -> Result<()> {
        self.check_open()?;
        self.fetcher.find(topic, partition)?.position = Some(offset);
        Ok(())
    }

    fn seek_to_beginning(&mut self) -> Result<()> {
        self.check_open()?;
        for a in &mut self.fetcher.assigned {
            a.position = Some(a.partition.log_start_offset());
        }
        Ok(())
    }

    fn seek_to_end(&mut self) -> Result<()> {
        self.check_open()?;
        for i in 0..self.fetcher.assigned.len() {
            let end = self.fetcher.end_offset(&self.fetcher.assigned[i])?;
            self.fetcher.assigned[i].position = Some(end);
        }
        Ok(())
    }

    fn end_offset(&self, topic: &str, partition: i32) -> Result<i64> {
        self.check_open()?;
        self.fetcher.end_offset_of(topic, partition)
    }

    fn offsets_for_times(&self, timestamp: i64) -> Result<Vec<(String, i32, Option<i64>)>> {
        self.check_open()?;
        self.fetcher.offsets_for_times(timestamp)
    }

    fn seek_to_timestamp(&mut self, timestamp: i64) -> Result<()> {
        let found = self.offsets_for_times(timestamp)?;
        for (i, (_, _, offset)) in found.into_iter().enumerate() {
            let end = self.fetcher.end_offset(&self.fetcher.assigned[i])?;
            self.fetcher.assigned[i].position = Some(offset.unwrap_or(end));
        }
        Ok(())
    }

    fn position(&mut self, topic: &str, partition: i32) -> Result<i64> {
        self.check_open()?;
        self.fetcher.position(topic, partition)
    }

    fn poll(&mut self, timeout: Duration) -> Result<ConsumerRecords> {
        self.check_open()?;
        self.fetcher.poll_until(Instant::now() + timeout, None)
    }

    fn commit_sync(&mut self) -> Result<()> {
        self.check_open()?;
        let positions = self.fetcher.positions();
        self.fetcher.commit(-1, "", None, positions)
    }

    fn commit_offsets(&mut self, offsets: &[(&str, i32, i64)]) -> Result<()> {
        self.check_open()?;
        self.fetcher.commit(-1, "", None, commit_entries(offsets))
    }

    fn committed(&self, topic: &str, partition: i32) -> Result<Option<i64>> {
        self.fetcher.committed(topic, partition)
    }

    fn close(&mut self) {
        self.fetcher.unassign();
        self.closed = true;
    }
}

/// A consumer with a manual assignment (Kafka's `assign()` mode): reads the partitions
/// it is given, from the positions it is told or from its group's committed offsets.
///
/// Opened on a [`Broker`] in this process (`Consumer::new(&broker, ..)`), or, with the
/// `client` feature, on a `tidelog::Cluster` over the network (`Consumer::new(&cluster,
/// ..)`): the calls are the same; over the network `poll` sends Fetch requests to each
/// partition's leader, the positions and ends are asked with ListOffsets, and commits go
/// to the group's coordinator (OffsetCommit, OffsetFetch).
pub struct Consumer(Kind);

enum Kind {
    Local(LocalConsumer),
    // Built only with the `client` feature.
    #[cfg_attr(not(feature = "client"), allow(dead_code))]
    Remote(Box<dyn RemoteConsumer>),
}

impl std::fmt::Debug for Consumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            Kind::Local(c) => c.fmt(f),
            Kind::Remote(c) => f
                .debug_struct("RemoteConsumer")
                .field("assignment", &c.assignment())
                .finish(),
        }
    }
}

impl Consumer {
    /// A consumer on `log` (`&broker`, or `&cluster` with the `client` feature) with
    /// these settings and no assignment.
    pub fn new(log: impl Into<Source>, config: ConsumerConfig) -> Consumer {
        match log.into().0 {
            Origin::Local(broker) => Consumer(Kind::Local(LocalConsumer::new(&broker, config))),
            Origin::Remote(remote) => Consumer(Kind::Remote(remote.consumer(config))),
        }
    }

    /// Reads these (topic, partition) pairs from now on, replacing the previous
    /// assignment. `UnknownTopic` / `UnknownPartition` if one does not exist.
    ///
    /// A topic deleted while assigned reads nothing (and no error); once a topic of that
    /// name is created again, its partitions of the same numbers are read from the
    /// `auto_offset_reset` position (another topic: the old positions mean nothing
    /// there).
    pub fn assign(&mut self, partitions: &[(&str, i32)]) -> Result<()> {
        match &mut self.0 {
            Kind::Local(c) => c.assign(partitions),
            Kind::Remote(c) => {
                let list: Vec<(String, i32)> = partitions
                    .iter()
                    .map(|(t, p)| (t.to_string(), *p))
                    .collect();
                c.assign(&list)
            }
        }
    }

    /// The current assignment.
    pub fn assignment(&self) -> Vec<(String, i32)> {
        match &self.0 {
            Kind::Local(c) => c.assignment(),
            Kind::Remote(c) => c.assignment(),
        }
    }

    /// The next read of this partition starts at `offset`.
    pub fn seek(&mut self, topic: &str, partition: i32, offset: i64) -> Result<()> {
        match &mut self.0 {
            Kind::Local(c) => c.seek(topic, partition, offset),
            Kind::Remote(c) => c.seek(topic, partition, offset),
        }
    }

    /// Every assigned partition restarts at its first record.
    pub fn seek_to_beginning(&mut self) -> Result<()> {
        match &mut self.0 {
            Kind::Local(c) => c.seek_to_beginning(),
            Kind::Remote(c) => c.seek_to(-2),
        }
    }

    /// Every assigned partition skips to its end (only new records): the high
    /// watermark, or the last stable offset when reading committed.
    pub fn seek_to_end(&mut self) -> Result<()> {
        match &mut self.0 {
            Kind::Local(c) => c.seek_to_end(),
            Kind::Remote(c) => c.seek_to(-1),
        }
    }

    /// Where the consumer's reads of the partition end now (Kafka's `endOffsets` for
    /// this consumer's `isolation.level`): its high watermark, or its last stable
    /// offset when reading committed. The lag is this minus the position.
    pub fn end_offset(&self, topic: &str, partition: i32) -> Result<i64> {
        match &self.0 {
            Kind::Local(c) => c.end_offset(topic, partition),
            Kind::Remote(c) => c.end_offset(topic, partition),
        }
    }

    /// Kafka's `offsetsForTimes` for the assigned partitions: for each, the offset of
    /// its first record with a timestamp at or after `timestamp` (ms since the epoch),
    /// None when it has none before its end. Over the network: ListOffsets by
    /// timestamp.
    pub fn offsets_for_times(&self, timestamp: i64) -> Result<Vec<(String, i32, Option<i64>)>> {
        match &self.0 {
            Kind::Local(c) => c.offsets_for_times(timestamp),
            Kind::Remote(c) => c.offsets_for_times(timestamp),
        }
    }

    /// Every assigned partition moves to its first record with a timestamp at or after
    /// `timestamp` (ms since the epoch), or to its end if there is none.
    pub fn seek_to_timestamp(&mut self, timestamp: i64) -> Result<()> {
        match &mut self.0 {
            Kind::Local(c) => c.seek_to_timestamp(timestamp),
            Kind::Remote(c) => c.seek_to(timestamp),
        }
    }

    /// The next offset that will be read from the partition. Reading committed, while
    /// a transaction has the group's offset of the partition pending (KIP-447), it is
    /// not known yet: [`Error::Group`] with [`GroupError::UnstableOffsetCommit`], and
    /// `poll` does not read the partition until the transaction ended.
    pub fn position(&mut self, topic: &str, partition: i32) -> Result<i64> {
        match &mut self.0 {
            Kind::Local(c) => c.position(topic, partition),
            Kind::Remote(c) => c.position(topic, partition),
        }
    }

    /// Waits up to `timeout` for records from the assigned partitions. Returns as soon
    /// as any partition has records (in process woken by the append, not by polling;
    /// over the network by the broker answering its Fetch); empty after the timeout.
    /// `Error::Closed` once the broker is closed.
    pub fn poll(&mut self, timeout: Duration) -> Result<ConsumerRecords> {
        match &mut self.0 {
            Kind::Local(c) => c.poll(timeout),
            Kind::Remote(c) => c.poll(timeout),
        }
    }

    /// Commits the current positions for the consumer's group (a "simple" commit:
    /// generation -1, no member id, refused while the group has active members).
    pub fn commit_sync(&mut self) -> Result<()> {
        match &mut self.0 {
            Kind::Local(c) => c.commit_sync(),
            Kind::Remote(c) => c.commit(None),
        }
    }

    /// Commits explicit offsets (the next offset to read) for the consumer's group.
    pub fn commit_offsets(&mut self, offsets: &[(&str, i32, i64)]) -> Result<()> {
        match &mut self.0 {
            Kind::Local(c) => c.commit_offsets(offsets),
            Kind::Remote(c) => c.commit(Some(offsets)),
        }
    }

    /// The group's committed offset for a partition, None if there is none.
    pub fn committed(&self, topic: &str, partition: i32) -> Result<Option<i64>> {
        match &self.0 {
            Kind::Local(c) => c.committed(topic, partition),
            Kind::Remote(c) => c.committed(topic, partition),
        }
    }

    /// Releases the assignment; later calls return `Error::Closed`.
    pub fn close(&mut self) {
        match &mut self.0 {
            Kind::Local(c) => c.close(),
            Kind::Remote(c) => c.close(),
        }
    }
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::TopicConfig;
    use crate::producer::{Producer, ProducerRecord};
    use crate::record::{Compression, EndTxnMarker, test_batch};

    #[cfg(feature = "client")]
    #[test]
    fn a_partial_last_batch_of_a_fetch_answer_is_cut_off() {
        let mut bytes = Vec::new();
        for base in [0i64, 3] {
            let mut b = crate::BatchBuilder::new();
            for i in 0..3 {
                b.push(0, None, Some(format!("v{i}").as_bytes()), &[]);
            }
            let mut batch = b.finish();
            crate::record::set_base_offset(&mut batch, base);
            bytes.extend_from_slice(&batch);
        }
        let first = bytes.len() / 2;
        assert_eq!(whole_batches(&bytes, "t-0").unwrap(), (bytes.len(), 6));
        assert_eq!(
            whole_batches(&bytes[..bytes.len() - 1], "t-0").unwrap(),
            (first, 3)
        );
        assert_eq!(whole_batches(&bytes[..5], "t-0").unwrap(), (0, -1));
        let mut bad = bytes.clone();
        bad[16] = 9; // magic
        assert!(whole_batches(&bad, "t-0").is_err());

        // One partition of a Fetch answer: the records from `from` on, the new
        // position after the whole batches, nothing for an answer behind `from`.
        let part = |records: &[u8]| {
            kafka_protocol::messages::fetch_response::PartitionData::default()
                .with_records(Some(bytes::Bytes::copy_from_slice(records)))
        };
        let mut out = ConsumerRecords::default();
        let cut = part(&bytes[..bytes.len() - 1]);
        assert_eq!(
            out.push_fetched((Arc::from("t"), 0, 1), &cut, true)
                .unwrap(),
            Some(3)
        );
        let offsets: Vec<i64> = out.iter().map(|r| r.unwrap().offset).collect();
        assert_eq!(offsets, [1, 2]);
        let behind = out.push_fetched((Arc::from("t"), 0, 6), &part(&bytes), true);
        assert_eq!(behind.unwrap(), None);
        assert_eq!(out.count(), 2);
        assert!(
            out.push_fetched((Arc::from("t"), 0, 0), &part(&bad), true)
                .is_err()
        );
    }

    /// Appends one batch of `values` to `p`: transactional for producer `txn` if
    /// given (lz4-compressed, so that skipping it must keep the consumer's count of
    /// compressed batches right).
    fn append(p: &Partition, txn: Option<i64>, values: &[&str]) {
        let codec = txn.map_or(Compression::None, |_| Compression::Lz4);
        p.append_batch(&test_batch(txn, codec, values))
            .expect("append");
    }

    fn end_txn(p: &Partition, pid: i64, commit: bool) {
        let marker = EndTxnMarker {
            commit,
            coordinator_epoch: 0,
        };
        p.log()
            .append_end_txn_marker(pid, 0, marker, 2_000)
            .expect("marker");
    }

    /// A broker in `dir` with a topic `t` of one partition, and that partition.
    fn topic_t(dir: &tempfile::TempDir) -> (Broker, Partition) {
        let broker = Broker::open(dir.path()).expect("broker");
        let p = broker
            .create_topic_handle("t", 1, TopicConfig::new())
            .expect("topic")
            .partition(0)
            .expect("partition");
        (broker, p)
    }

    /// Every record a consumer of `level` reads from the start of `t-0`, polled until
    /// a poll returns nothing.
    fn read_all(broker: &Broker, level: IsolationLevel) -> (Vec<String>, Consumer) {
        let config = ConsumerConfig::default().isolation_level(level);
        let mut consumer = Consumer::new(broker, config);
        consumer.assign(&[("t", 0)]).expect("assign");
        consumer.seek_to_beginning().expect("seek");
        let mut got = Vec::new();
        for _ in 0..20 {
            let polled = consumer.poll(Duration::from_millis(20)).expect("poll");
            if polled.is_empty() {
                break;
            }
            for r in polled.iter() {
                let r = r.expect("record");
                got.push(String::from_utf8(r.value.expect("value").to_vec()).expect("utf-8"));
            }
        }
        (got, consumer)
    }

    /// Markers are never handed out; read_uncommitted reads every data record up to
    /// the high watermark, read_committed stops at the last stable offset and leaves
    /// out aborted transactions, and its end (lag, `seek_to_end`) is that offset.
    #[test]
    fn isolation_levels_read_as_kafkas_consumers() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (broker, p) = topic_t(&dir);
        append(&p, None, &["a"]); // 0
        append(&p, Some(7), &["b1", "b1'"]); // 1-2
        append(&p, Some(8), &["c1"]); // 3
        end_txn(&p, 7, false); // 4
        append(&p, Some(8), &["c2"]); // 5
        end_txn(&p, 8, true); // 6
        append(&p, None, &["d"]); // 7
        append(&p, Some(7), &["b2"]); // 8, open
        append(&p, None, &["e"]); // 9
        let (all, _) = read_all(&broker, IsolationLevel::ReadUncommitted);
        assert_eq!(all, ["a", "b1", "b1'", "c1", "c2", "d", "b2", "e"]);
        let (committed, mut consumer) = read_all(&broker, IsolationLevel::ReadCommitted);
        assert_eq!(committed, ["a", "c1", "c2", "d"]);
        assert_eq!(consumer.position("t", 0).expect("position"), 8);
        assert_eq!(consumer.end_offset("t", 0).expect("end"), 8);
        consumer.seek("t", 0, 0).expect("seek");
        consumer.seek_to_end().expect("seek to end");
        assert_eq!(consumer.position("t", 0).expect("position"), 8);
        end_txn(&p, 7, true); // 10
        let polled = consumer.poll(Duration::from_millis(100)).expect("poll");
        let values: Vec<Vec<u8>> = polled
            .iter()
            .map(|r| r.expect("record").value.expect("value").to_vec())
            .collect();
        assert_eq!(values, [b"b2".to_vec(), b"e".to_vec()]);
        assert_eq!(consumer.end_offset("t", 0).expect("end"), 11);
        assert_eq!(consumer.position("t", 0).expect("position"), 11);
    }

    /// A group member reading committed reads as a `Consumer` does: committed records
    /// up to the last stable offset, which is its end.
    #[test]
    fn a_group_member_reads_committed_records() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (broker, p) = topic_t(&dir);
        append(&p, None, &["a"]); // 0
        append(&p, Some(7), &["x"]); // 1
        end_txn(&p, 7, false); // 2
        append(&p, None, &["b"]); // 3
        append(&p, Some(8), &["open"]); // 4
        append(&p, None, &["c"]); // 5
        let config = crate::GroupConfig::new("g", &["t"])
            .auto_offset_reset(OffsetReset::Earliest)
            .isolation_level(IsolationLevel::ReadCommitted);
        let mut member = crate::GroupConsumer::join(&broker, config).expect("join");
        let mut got = Vec::new();
        for _ in 0..50 {
            for r in member.poll(Duration::from_millis(20)).expect("poll").iter() {
                got.push(r.expect("record").value.expect("value").to_vec());
            }
            if got.len() >= 2 {
                break;
            }
        }
        assert_eq!(got, [b"a".to_vec(), b"b".to_vec()]);
        assert_eq!(member.end_offset("t", 0).expect("end"), 4);
        assert_eq!(member.position("t", 0).expect("position"), 4);
        member.close();
    }

    /// A poll whose slice holds only markers or aborted records moves past them and
    /// waits on: it returns no empty partition.
    #[test]
    fn a_slice_of_only_markers_and_aborted_records_is_not_returned() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (broker, p) = topic_t(&dir);
        append(&p, Some(7), &["x"]);
        end_txn(&p, 7, false);
        for level in [
            IsolationLevel::ReadCommitted,
            IsolationLevel::ReadUncommitted,
        ] {
            let mut consumer =
                Consumer::new(&broker, ConsumerConfig::default().isolation_level(level));
            consumer.assign(&[("t", 0)]).expect("assign");
            consumer.seek("t", 0, 1).expect("seek");
            let polled = consumer.poll(Duration::from_millis(20)).expect("poll");
            assert!(polled.is_empty(), "{level:?}: {:?}", polled.partitions());
            assert_eq!(consumer.position("t", 0).expect("position"), 2);
        }
    }

    /// Reading committed, a consumer does not start from a committed offset while a
    /// transaction has one pending (KIP-447's `require_stable`); reading uncommitted,
    /// it takes the one committed before.
    #[test]
    fn a_read_committed_consumer_waits_for_a_stable_committed_offset() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (broker, p) = topic_t(&dir);
        for v in ["a", "b", "c", "d"] {
            append(&p, None, &[v]);
        }
        let coordinator = broker.group_coordinator();
        coordinator
            .offset_commit(OffsetCommitRequest {
                group_id: "g".into(),
                generation_id: -1,
                offsets: commit_entries(&[("t", 0, 1)]),
                ..Default::default()
            })
            .expect("commit");
        let results = coordinator
            .txn_offset_commit(crate::coordinator::TxnOffsetCommitRequest {
                group_id: "g".into(),
                producer_id: 5,
                generation_id: -1,
                offsets: commit_entries(&[("t", 0, 3)]),
                ..Default::default()
            })
            .expect("txn commit");
        assert!(results[0].result.is_ok());
        let consumer = |level| {
            let mut c = Consumer::new(
                &broker,
                ConsumerConfig::default()
                    .group_id("g")
                    .isolation_level(level),
            );
            c.assign(&[("t", 0)]).expect("assign");
            c
        };
        let mut uncommitted = consumer(IsolationLevel::ReadUncommitted);
        assert_eq!(uncommitted.position("t", 0).expect("position"), 1);
        let mut committed = consumer(IsolationLevel::ReadCommitted);
        let e = committed.position("t", 0).expect_err("unstable");
        assert!(
            matches!(
                e,
                Error::Group {
                    source: GroupError::UnstableOffsetCommit { .. },
                    ..
                }
            ),
            "{e}"
        );
        assert!(
            committed
                .poll(Duration::from_millis(10))
                .expect("poll")
                .is_empty()
        );
        coordinator
            .complete_txn_offsets(coordinator.partition_of("g"), 5, 0, true)
            .expect("commit");
        let polled = committed.poll(Duration::from_millis(100)).expect("poll");
        let offsets: Vec<i64> = polled.iter().map(|r| r.expect("record").offset).collect();
        assert_eq!(offsets, [3]);
    }

    /// A consumer that starts inside a batch skips the batch's earlier records, for
    /// plain and compressed batches, and hands out the rest of every partition.
    #[test]
    fn a_read_from_inside_a_batch_starts_at_the_position() {
        let dir = tempfile::tempdir().expect("temp dir");
        let broker = Broker::open(dir.path()).expect("broker");
        for (topic, codec) in [("plain", Compression::None), ("packed", Compression::Lz4)] {
            broker
                .create_topic(topic, 1, TopicConfig::new())
                .expect("topic");
            let producer = Producer::builder(&broker)
                .compression(codec)
                .build()
                .expect("producer");
            let values: Vec<[u8; 4]> = (0u32..10).map(u32::to_be_bytes).collect();
            let records: Vec<ProducerRecord<'_>> =
                values.iter().map(|v| ProducerRecord::new(v)).collect();
            producer.send_batch(topic, &records).expect("send");
            producer.send_batch(topic, &records[..3]).expect("send");

            let mut consumer = Consumer::new(&broker, ConsumerConfig::default());
            consumer.assign(&[(topic, 0)]).expect("assign");
            consumer.seek(topic, 0, 4).expect("seek");
            let mut got = Vec::new();
            for _ in 0..10 {
                let polled = consumer.poll(Duration::from_millis(100)).expect("poll");
                for r in polled.iter() {
                    let r = r.expect("record");
                    got.push((r.offset, r.value.map(<[u8]>::to_vec)));
                }
                if got.len() >= 9 {
                    break;
                }
            }
            let want: Vec<(i64, Option<Vec<u8>>)> = (4..13)
                .map(|o| (o, Some(((o % 10) as u32).to_be_bytes().to_vec())))
                .collect();
            assert_eq!(got, want, "{topic}");
        }
    }
}
