//! Fetch (key 1), versions 0-16, with a hand-framed response (v16, KIP-951, adds only
//! tagged fields, left out; v0-3, read as v4 through `legacy`, get their records
//! down-converted to message sets of magic 1, copied).
//!
//! The request is decoded with `kafka-protocol`; the response is written by hand so that
//! each partition's record bytes are not copied: the reply is a list of parts, in-memory
//! bytes for the fields and a [`Part::File`] (a [`LogSlice`]) for each partition's
//! records, which the connection sends with `sendfile(2)` straight from the segment
//! file.
//!
//! - Whole batches, starting with the one that contains the fetch offset.
//! - `partition_max_bytes` and the response's `max_bytes` are honoured, except that the
//!   first partition with data always gets at least one whole batch (Kafka's rule, so a
//!   consumer can always make progress past a batch larger than its limits). The
//!   response's `max_bytes` of a consumer's fetch is capped by the server's
//!   `fetch_max_bytes` (Kafka's broker setting `fetch.max.bytes`; 55 MiB by default, as
//!   Kafka's), so a client can decode one response while the next is on its way.
//! - Record slices of 16 KiB and more go out with `sendfile`; smaller ones are copied
//!   into the response, which then leaves in one write.
//! - An offset outside `[log start, log end]` is `OFFSET_OUT_OF_RANGE` with
//!   `log_start_offset` and `high_watermark`; one at or above the high watermark, up to
//!   the log end, has nothing yet (a new leader's high watermark may lag records an
//!   earlier leader's consumers read: Kafka answers them empty too).
//! - Long poll: while fewer than `min_bytes` are ready and `max_wait_ms` has not passed,
//!   the thread sleeps on one signal that every partition of the request notifies when
//!   its high watermark moves (appends from the network and in-process producers alike);
//!   never a sleep loop, and no spin before sleeping. `max_wait_ms` is capped by the
//!   server's `fetch_max_wait`, and the wait wakes every [`HANGUP_CHECK`] to see
//!   whether the client hung up: if it did, the request ends with no answer and the
//!   connection closes, so an abandoned long poll does not hold its thread, socket and
//!   connection slot.
//! - `isolation_level` read_committed (1, a consumer's fetch): records end at the
//!   partition's last stable offset rather than the high watermark, and each partition
//!   answers its `last_stable_offset` and the `aborted_transactions` (producer id, first
//!   offset) of the records returned, from which the client drops aborted records (and
//!   it never hands out control batches). read_uncommitted does no work for
//!   transactions: `last_stable_offset` is the high watermark there (Kafka's clients
//!   read it only when reading committed) and `aborted_transactions` is null. A
//!   follower's fetch reads to the log end whatever it says.
//! - v12+ is framed flexibly (compact arrays and strings, empty tagged fields); v13+
//!   names topics by id (KIP-516), an id no topic has answering UNKNOWN_TOPIC_ID; v15+
//!   carries a follower's id and broker epoch in `replica_state` (KIP-903), checked in
//!   `replica_fetch.rs` before the fetch is recorded.
//! - Fetch sessions (KIP-227, v7+): `fetch_session.rs` resolves the request against the
//!   session cache (what to read: the request's partitions, or an incremental fetch's
//!   session's) and keeps in an incremental answer only the partitions with news; a
//!   session error is the response's top-level error, with no partitions.
//! - Fetching from the closest replica (KIP-392, v11+): `read_replica.rs` resolves a
//!   consumer's partition on a follower (read up to its high watermark), and on the
//!   leader may answer `preferred_read_replica` instead of records, which ends the long
//!   poll.

use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_protocol::ResponseError;
use kafka_protocol::messages::FetchRequest;

use super::{Ctx, Fatal, Part, Reply, Request, error_code};
use crate::server::Shared;
use crate::server::backend::PartitionOps;
use crate::server::fetch_session::Answered;
use crate::server::sendfile::FileRegion;
use crate::storage::LogSlice;
use crate::topic::Signal;

/// How often a waiting Fetch checks that its client is still connected.
pub(super) const HANGUP_CHECK: Duration = Duration::from_millis(200);

impl FileRegion for LogSlice {
    fn file(&self) -> Option<&std::fs::File> {
        LogSlice::file(self)
    }
    fn position(&self) -> u64 {
        self.file_position()
    }
    fn len(&self) -> usize {
        <[u8]>::len(self)
    }
}

/// The partitions of a long poll, watched with one signal until dropped.
pub(super) struct Watch<'a> {
    pub(super) signal: Arc<Signal>,
    logs: Vec<Arc<dyn PartitionOps>>,
    /// Where the signal is registered so that shutdown can wake it.
    shared: &'a Shared,
    id: u64,
}

impl<'a> Watch<'a> {
    fn new(shared: &'a Shared, wanted: &[Wanted]) -> Watch<'a> {
        let logs: Vec<Arc<dyn PartitionOps>> = wanted
            .iter()
            .flat_map(|w| w.partitions.iter())
            .filter_map(|p| p.log.as_ref().ok().cloned())
            .collect();
        Watch::over(shared, Arc::new(Signal::default()), logs)
    }

    /// `signal`, notified by an append to any of `logs` and woken at shutdown.
    pub(super) fn over(
        shared: &'a Shared,
        signal: Arc<Signal>,
        logs: Vec<Arc<dyn PartitionOps>>,
    ) -> Watch<'a> {
        let id = shared.long_polls.register(&signal);
        for log in &logs {
            log.watch(&signal);
        }
        Watch {
            signal,
            logs,
            shared,
            id,
        }
    }
}

impl Drop for Watch<'_> {
    fn drop(&mut self) {
        for log in &self.logs {
            log.unwatch(&self.signal);
        }
        self.shared.long_polls.unregister(self.id);
    }
}

/// A partition named in the request, resolved.
struct WantedPartition {
    index: i32,
    offset: i64,
    max_bytes: usize,
    log: crate::error::Result<Arc<dyn PartitionOps>>,
    /// The replica the consumer should fetch from instead (KIP-392), if any.
    preferred: Option<i32>,
}

/// A topic named in the request.
struct Wanted {
    name: String,
    /// Its id as the request gave it (v13+), answered back.
    id: uuid::Uuid,
    /// False for an id no topic has (UNKNOWN_TOPIC_ID).
    known: bool,
    partitions: Vec<WantedPartition>,
}

/// The answer for one partition.
struct PartitionData {
    index: i32,
    error: i16,
    high_watermark: i64,
    /// The high watermark for read_uncommitted (no extra work on that path: Kafka's
    /// clients read it only when they read committed).
    last_stable_offset: i64,
    log_start_offset: i64,
    /// read_committed: the aborted transactions of the records returned, as
    /// (producer id, first offset); None (null on the wire) for read_uncommitted.
    aborted: Option<Vec<(i64, i64)>>,
    records: Option<LogSlice>,
    /// The replica to fetch from instead (v11+), -1 for none.
    preferred_read_replica: i32,
}

impl PartitionData {
    /// What a fetch session compares: the index, the answer, and whether there is news
    /// (records or an error) to send whatever moved.
    fn seen(&self) -> (i32, Answered, bool) {
        let answered = Answered {
            high_watermark: self.high_watermark,
            last_stable_offset: self.last_stable_offset,
            log_start_offset: self.log_start_offset,
        };
        let records = self.records.as_ref().is_some_and(|r| !r.is_empty());
        let news = records || self.error != 0 || self.preferred_read_replica >= 0;
        (self.index, answered, news)
    }
}

/// Kafka's `isolation_level` of a Fetch or ListOffsets: 1 reads committed records.
pub(super) const READ_COMMITTED: i8 = 1;

/// The answer for one topic.
struct TopicData {
    name: String,
    /// Answered instead of the name from v13.
    id: uuid::Uuid,
    partitions: Vec<PartitionData>,
}

pub(super) fn handle(ctx: &Ctx<'_>, req: &mut Request) -> Result<Reply, Fatal> {
    let request: FetchRequest = req.decode()?;
    let version = req.version();
    let max_wait = Duration::from_millis(request.max_wait_ms.max(0) as u64)
        .min(ctx.shared.config.fetch_max_wait);
    let deadline = Instant::now() + max_wait;
    let min_bytes = request.min_bytes.max(0) as usize;
    let max_bytes = if request.max_bytes <= 0 {
        i32::MAX as usize
    } else {
        request.max_bytes as usize
    };

    // Resolve the partitions once (a follower's fetch is recorded then: replica_fetch.rs).
    let backend = ctx.backend();
    let (replica, refused) = super::replica_fetch::follower(
        backend,
        (ctx.listener, ctx.shared.config.follower_fetch_without_epoch),
        &request,
        version,
    );
    if replica.is_some() {
        crate::server::throttle::follower();
    }
    // v13+ names topics by id.
    let by_id =
        (version >= 13).then(|| crate::server::topic_ids::by_id(backend, &backend.topic_names()));
    // A consumer's response is capped by the server's `fetch.max.bytes`; a follower's
    // is not (Kafka's rule).
    let max_bytes = match replica {
        None => max_bytes.min(ctx.shared.config.fetch_max_bytes),
        Some(_) => max_bytes,
    };
    let session = match ctx
        .shared
        .fetch_sessions
        .begin(&request, replica.is_some(), Instant::now())
    {
        Ok(session) => session,
        Err(e) => {
            tracing::debug!(peer = %ctx.peer, "fetch refused: {e}");
            let refused = (error_code(&e), 0);
            return Ok(Reply::Parts(frame(
                req.header.correlation_id,
                version,
                refused,
                Vec::new(),
            )));
        }
    };
    // A consumer's fetch from v11 names its rack and may be served by a follower.
    let client_rack = (version >= 11 && replica.is_none()).then(|| request.rack_id.to_string());
    let rack_aware = ctx.shared.config.rack_aware_replica_selector;
    let wanted: Vec<Wanted> = session
        .topics
        .iter()
        .map(|t| {
            let (name, known) = match &by_id {
                Some(names) => match names.get(&t.topic_id) {
                    Some(name) => (name.clone(), true),
                    None => (t.topic_id.to_string(), false),
                },
                None => (t.name.clone(), true),
            };
            // Authorization first (Read on the topic; ClusterAction for a follower), so a
            // refused follower's fetch is never recorded.
            let allowed = if known {
                ctx.authorize_fetch(&name, replica.is_some())
            } else {
                Err(crate::error::Error::UnknownTopic(name.clone()))
            };
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let mut preferred = None;
                    let log = allowed.clone().and_then(|()| match replica {
                        Some(_) => super::replica_fetch::resolve(
                            backend,
                            &name,
                            p.index,
                            p.offset,
                            p.current_leader_epoch,
                            replica,
                            refused.as_deref(),
                        ),
                        None => super::read_replica::resolve(
                            backend,
                            (&name, p.index),
                            (p.offset, p.current_leader_epoch),
                            (client_rack.as_deref(), rack_aware, ctx.listener),
                        )
                        .map(|(log, chosen)| {
                            preferred = chosen;
                            log
                        }),
                    });
                    WantedPartition {
                        index: p.index,
                        offset: p.offset,
                        max_bytes: p.max_bytes,
                        log,
                        preferred,
                    }
                })
                .collect();
            Wanted {
                name,
                id: t.topic_id,
                known,
                partitions,
            }
        })
        .collect();
    // Long poll: one signal for the request, notified by each of its partitions on
    // append. Registered only once a wait is needed, and the partitions are read again
    // after registering so an append in between is not missed.
    let mut watch: Option<Watch> = None;
    let mut next_check = Instant::now() + HANGUP_CHECK;
    let topics = loop {
        let seen = watch.as_ref().map(|w| w.signal.current());
        let committed = request.isolation_level == READ_COMMITTED && replica.is_none();
        let (topics, bytes, errors) = gather(&wanted, max_bytes, (committed, replica.is_some()));
        if bytes >= min_bytes || errors || Instant::now() >= deadline || ctx.shared.is_stopping() {
            break topics;
        }
        if replica.is_some() && super::replica_fetch::news(logs(&wanted)) {
            break topics;
        }
        match (&watch, seen) {
            (Some(w), Some(seen)) => {
                // Parked at once, no spin: a network round trip takes tens of
                // microseconds anyway, and a spinning thread takes a core the
                // client (often on the same machine) needs.
                w.signal.wait_past_parked(seen, deadline.min(next_check));
                if Instant::now() >= next_check {
                    if ctx.client_gone() {
                        return Ok(Reply::ClientGone);
                    }
                    next_check = Instant::now() + HANGUP_CHECK;
                }
            }
            _ => watch = Some(Watch::new(ctx.shared, &wanted)),
        }
    };
    if replica.is_some() {
        for (w, t) in wanted.iter().zip(&topics) {
            for (p, d) in w.partitions.iter().zip(&t.partitions) {
                if let Ok(log) = &p.log {
                    log.sent_high_watermark(-1, d.high_watermark);
                }
            }
        }
    }
    let mut topics = topics;
    // Sessionless fetches (most clients') skip this: no key is made for them.
    if session.session_id != 0 {
        let sessions = &ctx.shared.fetch_sessions;
        for t in &mut topics {
            // A session keys a topic by its id from v13 (fetch_session::topic_key).
            let by_id;
            let key = match version >= 13 {
                true => {
                    by_id = crate::server::fetch_session::topic_key("", t.id);
                    by_id.as_str()
                }
                false => t.name.as_str(),
            };
            sessions.retain(&session, key, &mut t.partitions, PartitionData::seen);
        }
    }
    topics.retain(|t| !(session.incremental && t.partitions.is_empty()));
    Ok(Reply::Parts(frame(
        req.header.correlation_id,
        version,
        (0, session.session_id),
        topics,
    )))
}

/// The partitions of the request that resolved.
fn logs(wanted: &[Wanted]) -> impl Iterator<Item = &Arc<dyn PartitionOps>> {
    wanted
        .iter()
        .flat_map(|w| w.partitions.iter())
        .filter_map(|p| p.log.as_ref().ok())
}

/// Read every partition once (below the last stable offset if `committed`; a
/// `follower`'s reads go to the log end): the answers, the record bytes found, and
/// whether any partition has an error or a preferred read replica (either ends the long
/// poll). A consumer's partition whose fetch offset is its high watermark is not read:
/// the read would be empty (an idle partition of a long poll or of a fetch session).
fn gather(
    wanted: &[Wanted],
    max_bytes: usize,
    (committed, follower): (bool, bool),
) -> (Vec<TopicData>, usize, bool) {
    let mut total = 0usize;
    let mut errors = false;
    let topics = wanted
        .iter()
        .map(|w| TopicData {
            name: w.name.clone(),
            id: w.id,
            partitions: w
                .partitions
                .iter()
                .map(|p| {
                    let mut data = PartitionData {
                        index: p.index,
                        error: 0,
                        high_watermark: -1,
                        last_stable_offset: -1,
                        log_start_offset: -1,
                        aborted: committed.then(Vec::new),
                        records: None,
                        preferred_read_replica: -1,
                    };
                    let log = match &p.log {
                        Ok(log) => log,
                        Err(e) => {
                            errors = true;
                            data.error = if w.known {
                                error_code(e)
                            } else {
                                ResponseError::UnknownTopicId.code()
                            };
                            data.aborted = None;
                            return data;
                        }
                    };
                    data.high_watermark = log.high_watermark();
                    data.last_stable_offset = data.high_watermark;
                    data.log_start_offset = log.log_start_offset();
                    if let Some(id) = p.preferred {
                        // Sent to another replica: no records (Kafka's rule).
                        errors = true;
                        data.preferred_read_replica = id;
                        if committed {
                            data.last_stable_offset = log.last_stable_offset().unwrap_or(-1);
                        }
                        return data;
                    }
                    if !committed
                        && !follower
                        && p.offset == data.high_watermark
                        && p.offset >= data.log_start_offset
                    {
                        return data;
                    }
                    let budget = p.max_bytes.min(max_bytes.saturating_sub(total));
                    if budget == 0 && total > 0 {
                        if committed {
                            data.last_stable_offset = log.last_stable_offset().unwrap_or(-1);
                        }
                        return data;
                    }
                    let read = if committed {
                        read_committed(log.as_ref(), p.offset, budget.max(1), &mut data)
                    } else {
                        log.read(p.offset, budget.max(1))
                    };
                    match read {
                        Ok(slice) => {
                            // Past the first partition with data, a batch must fit.
                            if slice.is_empty() || (total > 0 && slice.len() > budget) {
                                return data;
                            }
                            total += slice.len();
                            data.records = Some(slice);
                        }
                        Err(e) => {
                            errors = true;
                            data.aborted = None;
                            data.error = match e {
                                crate::error::Error::OffsetOutOfRange { .. } => {
                                    ResponseError::OffsetOutOfRange.code()
                                }
                                e => error_code(&e),
                            };
                        }
                    }
                    data
                })
                .collect(),
        })
        .collect();
    (topics, total, errors)
}

/// A read_committed read of `log` from `offset`: records below the last stable offset,
/// which goes into `data`, with the aborted transactions of the range returned (those
/// whose ABORT marker is at or after `offset` and whose first offset is below the end
/// of the records, as Kafka's `collectAbortedTransactions`).
fn read_committed(
    log: &dyn PartitionOps,
    offset: i64,
    max_bytes: usize,
    data: &mut PartitionData,
) -> crate::error::Result<LogSlice> {
    let (slice, lso) = log.read_committed(offset, max_bytes)?;
    data.last_stable_offset = lso;
    if !slice.is_empty() {
        let aborted = log.aborted_transactions(offset, slice.next_offset())?;
        data.aborted = Some(
            aborted
                .iter()
                .map(|a| (a.producer_id, a.first_offset))
                .collect(),
        );
    }
    Ok(slice)
}

/// Partitions of one Fetch response sent with `sendfile` (each holds its segment's
/// descriptor until sent); the records of any further ones are copied.
const MAX_SENDFILE_PARTS: usize = 64;

/// Record slices shorter than this are copied into the response buffer rather than sent
/// with `sendfile`: a consumer that keeps up gets a batch or two per Fetch, and one
/// write of the whole response (one syscall, one TCP segment) costs less than a write of
/// the fields followed by a `sendfile` (two syscalls, two segments: the client wakes
/// for the first and waits for the second).
const MIN_SENDFILE_BYTES: usize = 16 * 1024;

/// Lay out a Fetch response of `version` (0-16), with its top-level error code and
/// session id (v7+).
fn frame(
    correlation_id: i32,
    version: i16,
    (error_code, session_id): (i16, i32),
    topics: Vec<TopicData>,
) -> Vec<Part> {
    let flexible = version >= 12;
    let mut parts = Vec::new();
    let mut files = 0usize;
    let mut buf = Vec::with_capacity(256);
    buf.extend_from_slice(&correlation_id.to_be_bytes());
    if flexible {
        buf.push(0); // the response header's tagged fields: none
    }
    if version >= 1 {
        buf.extend_from_slice(&crate::server::throttle::current_ms().to_be_bytes()); // throttle_time_ms
    }
    if version >= 7 {
        buf.extend_from_slice(&error_code.to_be_bytes());
        buf.extend_from_slice(&session_id.to_be_bytes());
    }
    put_len(&mut buf, flexible, topics.len());
    for topic in topics {
        if version >= 13 {
            buf.extend_from_slice(topic.id.as_bytes());
        } else {
            let name = &topic.name.as_bytes()[..topic.name.len().min(i16::MAX as usize)];
            if flexible {
                put_len(&mut buf, true, name.len());
            } else {
                buf.extend_from_slice(&(name.len() as i16).to_be_bytes());
            }
            buf.extend_from_slice(name);
        }
        put_len(&mut buf, flexible, topic.partitions.len());
        for mut p in topic.partitions {
            if version < 4 {
                // Fetch v0-3: a message set of magic 1, copied.
                let location = format!("{}-{}", topic.name, p.index);
                let set = match p.records.take() {
                    Some(slice) => super::legacy::down_convert(&slice, &location),
                    None => Ok(Vec::new()),
                };
                let (error, set) = match set {
                    Ok(set) => (p.error, set),
                    Err(e) => {
                        tracing::warn!("cannot down-convert {location} for Fetch v{version}: {e}");
                        (ResponseError::CorruptMessage.code(), Vec::new())
                    }
                };
                crate::metrics::server::count_error(error);
                buf.extend_from_slice(&p.index.to_be_bytes());
                buf.extend_from_slice(&error.to_be_bytes());
                buf.extend_from_slice(&p.high_watermark.to_be_bytes());
                put_len(&mut buf, false, set.len());
                buf.extend_from_slice(&set);
                continue;
            }
            crate::metrics::server::count_error(p.error);
            buf.extend_from_slice(&p.index.to_be_bytes());
            buf.extend_from_slice(&p.error.to_be_bytes());
            buf.extend_from_slice(&p.high_watermark.to_be_bytes());
            buf.extend_from_slice(&p.last_stable_offset.to_be_bytes());
            if version >= 5 {
                buf.extend_from_slice(&p.log_start_offset.to_be_bytes());
            }
            // aborted_transactions: null for read_uncommitted.
            match &p.aborted {
                None if flexible => put_uvarint(&mut buf, 0),
                None => buf.extend_from_slice(&(-1i32).to_be_bytes()),
                Some(aborted) => {
                    put_len(&mut buf, flexible, aborted.len());
                    for (producer_id, first_offset) in aborted {
                        buf.extend_from_slice(&producer_id.to_be_bytes());
                        buf.extend_from_slice(&first_offset.to_be_bytes());
                        if flexible {
                            buf.push(0);
                        }
                    }
                }
            }
            if version >= 11 {
                buf.extend_from_slice(&p.preferred_read_replica.to_be_bytes());
            }
            match p.records {
                Some(slice) if !slice.is_empty() => {
                    put_len(&mut buf, flexible, slice.len());
                    // A sendfile holds its segment's descriptor until it is sent: a
                    // response takes a bounded number of them (a fetch of thousands of
                    // partitions would otherwise hold thousands); the rest, and a slice
                    // whose file cannot be opened, are copied from the map.
                    if slice.len() >= MIN_SENDFILE_BYTES
                        && files < MAX_SENDFILE_PARTS
                        && slice.file().is_some()
                    {
                        files += 1;
                        parts.push(Part::Bytes(std::mem::take(&mut buf)));
                        parts.push(Part::File(Box::new(slice)));
                    } else {
                        buf.extend_from_slice(&slice);
                    }
                }
                _ => put_len(&mut buf, flexible, 0),
            }
            if flexible {
                buf.push(0); // the partition's tagged fields
            }
        }
        if flexible {
            buf.push(0); // the topic's tagged fields
        }
    }
    if flexible {
        buf.push(0); // the response's tagged fields
    }
    if !buf.is_empty() {
        parts.push(Part::Bytes(buf));
    }
    parts
}

/// The length of an array, a string or records: an i32 (a u16 for strings is written
/// by the caller), or from v12 an unsigned varint of the length plus one.
fn put_len(buf: &mut Vec<u8>, flexible: bool, len: usize) {
    if flexible {
        put_uvarint(buf, len as u64 + 1);
    } else {
        buf.extend_from_slice(&(len as i32).to_be_bytes());
    }
}

/// An unsigned varint (LEB128), as the flexible versions frame lengths.
fn put_uvarint(buf: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        buf.push((v as u8) | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::TopicConfig;
    use crate::record::BatchBuilder;

    /// The records of a one-batch log holding one record of `value_len` bytes.
    fn slice_of(dir: &std::path::Path, value_len: usize) -> LogSlice {
        let broker = crate::broker::Broker::open(dir).unwrap();
        let topic = broker
            .create_topic_handle("t", 1, TopicConfig::new())
            .unwrap();
        let partition = topic.partition(0).unwrap();
        let mut b = BatchBuilder::new();
        b.push(1_700_000_000_000, None, Some(&vec![7u8; value_len]), &[]);
        partition.append_batch(&b.finish()).unwrap();
        partition.read(0, usize::MAX).unwrap()
    }

    fn one_partition(records: LogSlice) -> Vec<TopicData> {
        vec![TopicData {
            name: "t".into(),
            id: uuid::Uuid::nil(),
            partitions: vec![PartitionData {
                index: 0,
                error: 0,
                high_watermark: 1,
                last_stable_offset: 1,
                log_start_offset: 0,
                aborted: None,
                records: Some(records),
                preferred_read_replica: -1,
            }],
        }]
    }

    #[test]
    fn a_small_record_slice_is_copied_so_the_response_is_one_write() {
        let dir = tempfile::tempdir().unwrap();
        let slice = slice_of(dir.path(), 100);
        assert!(slice.len() < MIN_SENDFILE_BYTES && slice.file().is_some());
        let records = slice.to_vec();
        let parts = frame(7, 11, (0, 0), one_partition(slice));
        let [Part::Bytes(bytes)] = parts.as_slice() else {
            panic!("{} parts, expected one in-memory part", parts.len());
        };
        // The records close the response, after their i32 length.
        let (head, tail) = bytes.split_at(bytes.len() - records.len());
        assert_eq!(tail, records.as_slice());
        assert_eq!(
            &head[head.len() - 4..],
            &(records.len() as i32).to_be_bytes()
        );
        assert_eq!(&head[..4], &7i32.to_be_bytes(), "correlation id first");
    }

    #[test]
    fn a_large_record_slice_goes_out_with_sendfile() {
        let dir = tempfile::tempdir().unwrap();
        let slice = slice_of(dir.path(), MIN_SENDFILE_BYTES);
        let (len, position) = (slice.len(), slice.file_position());
        assert!(len >= MIN_SENDFILE_BYTES);
        let parts = frame(7, 11, (0, 0), one_partition(slice));
        let [Part::Bytes(head), Part::File(file)] = parts.as_slice() else {
            panic!(
                "{} parts, expected the fields then the file region",
                parts.len()
            );
        };
        assert_eq!(&head[head.len() - 4..], &(len as i32).to_be_bytes());
        assert_eq!((file.len(), file.position()), (len, position));
    }
}
