//! ShareFetch (key 78), version 1: a share group member acquires records (KIP-932).
//! The share session (member id and session epoch, see the share coordinator) holds
//! the partitions fetched: `topics` adds to it, `forgotten_topics_data` removes.
//! Acknowledgements of earlier records may come along (not with epoch 0: INVALID_REQUEST),
//! each partition's outcome in `acknowledge_error_code`; epoch -1 closes the session,
//! releasing what the member still holds. Records are read from the
//! share-partition's first available one up to the high watermark, or, for a group whose
//! `share.isolation.level` is `read_committed`, up to the last stable offset without
//! the records of aborted transactions (control batches are never acquired); the ones acquired
//! travel as `acquired_records` ranges with their delivery counts next to the record
//! batches holding them (the client delivers only acquired offsets). With nothing to
//! acquire the request waits up to `max_wait_ms`, woken by an append to its partitions,
//! a change of the share coordinator (records released or acknowledged) or the next
//! lock expiry, never polling. A new share-partition starts at the
//! log's end (Kafka's default `share.auto.offset.reset`, latest) or, when the group's
//! `share.auto.offset.reset` config is `earliest`, at its start; on a cluster node, read
//! once the node's group configs are up to date with the controller's (a read barrier
//! on the metadata log), and a partition whose start cannot be known in time is
//! answered NOT_LEADER_OR_FOLLOWER, retriable, rather than started at a guess. A request of
//! `max_bytes` 0 acquires nothing (as in Kafka); a topic id no topic has is answered
//! UNKNOWN_TOPIC_ID for each of its partitions, records and acknowledgements alike.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::share_fetch_response::{
    AcquiredRecords, PartitionData, ShareFetchableTopicResponse,
};
use kafka_protocol::messages::{ShareFetchRequest, ShareFetchResponse};

use super::fetch::{HANGUP_CHECK, Watch};
use super::share_acknowledge::{AckBatches, acknowledge, ids};
use super::{Ctx, Fatal, Reply, Request, error_code, kstr};
use crate::coordinator::{AcquiredRecord, ShareCoordinator, ShareReadMode, ShareSource};
use crate::error::{Result, ShareError};
use crate::security::acl::{AclOperation, ResourceType};
use crate::security::denied_code;
use crate::server::backend::{Backend, PartitionOps};
use crate::server::error_codes::KafkaCode;
use crate::server::topic_ids::{by_id, topic_id, topics_with_counts};
use crate::storage::{AbortedTxn, LogSlice, ReadLimit};
use crate::topic::Signal;

/// Records acquired per request when the client sets no limit (Kafka's
/// `max.poll.records` default).
const DEFAULT_MAX_RECORDS: usize = 500;

/// Reads of one partition per pass that may find nothing to deliver (only aborted
/// records or markers) before the pass moves on.
const MAX_EMPTY_READS: usize = 8;

fn refusal(code: i16, message: String) -> ShareFetchResponse {
    ShareFetchResponse::default()
        .with_error_code(code)
        .with_error_message(Some(kstr(message)))
}

/// The acquired records as Kafka's ranges: consecutive offsets with one delivery
/// count.
fn ranges(acquired: &[AcquiredRecord]) -> Vec<AcquiredRecords> {
    let mut out: Vec<AcquiredRecords> = Vec::new();
    for a in acquired {
        match out.last_mut() {
            Some(r) if r.last_offset + 1 == a.offset && r.delivery_count == a.delivery_count => {
                r.last_offset = a.offset;
            }
            _ => out.push(
                AcquiredRecords::default()
                    .with_first_offset(a.offset)
                    .with_last_offset(a.offset)
                    .with_delivery_count(a.delivery_count),
            ),
        }
    }
    out
}

/// Who fetches: the share coordinator, the group and the member.
struct Fetcher<'a> {
    backend: &'a dyn Backend,
    share: &'a ShareCoordinator,
    group: &'a str,
    member: &'a str,
}

impl Fetcher<'_> {
    /// Acquires up to `room` records of `topic`-`partition`: the batches read and
    /// what was acquired of them (nothing when there is nothing to acquire). A read
    /// that found nothing to deliver (aborted records, markers) but moved the
    /// share-partition on is followed by the next, a bounded number of times.
    fn partition(
        &self,
        topic: &str,
        partition: i32,
        max_bytes: usize,
        room: usize,
    ) -> Result<(Bytes, Vec<AcquiredRecord>)> {
        let mut last_from = None;
        for _ in 0..MAX_EMPTY_READS {
            let Some(read) = self.read_once(topic, partition, max_bytes, room)? else {
                break;
            };
            if !read.nothing_to_deliver || last_from == Some(read.from) {
                return Ok((read.records, read.acquired));
            }
            last_from = Some(read.from);
        }
        Ok((Bytes::new(), Vec::new()))
    }

    /// One read of [`partition`](Self::partition) (the share coordinator's read rule,
    /// [`ShareCoordinator::read_share_partition`]); `None` when there was nothing to
    /// read.
    fn read_once(
        &self,
        topic: &str,
        partition: i32,
        max_bytes: usize,
        room: usize,
    ) -> Result<Option<OneRead>> {
        let p = self.backend.partition(topic, partition)?;
        let configs = self.backend.group_configs();
        // Where a new share-partition starts, the group's `share.auto.offset.reset`,
        // the coordinator reads once the group configs are up to date; a member over
        // the network sends no setting of its own: Kafka's default, latest.
        let mode = ShareReadMode {
            committed: configs.is_some_and(|c| c.share_reads_committed(self.group)),
            earliest_by_default: false,
        };
        let now = Instant::now();
        let share = self.share;
        let Some(read) =
            share.read_share_partition(&*p, self.group, topic, partition, mode, max_bytes, now)?
        else {
            return Ok(None);
        };
        // Control batches are never delivered, nor the records of aborted transactions
        // (left out, they count as archived: offsets of the read with no record to
        // deliver).
        let offsets: Vec<i64> = read
            .slice
            .batches()
            .filter(|b| !b.is_control() && !read.aborted.iter().any(|a| a.holds(b)))
            .flat_map(|b| b.base_offset().max(read.from)..=b.last_offset())
            .collect();
        let acquired = share.acquire(
            self.group,
            self.member,
            topic,
            partition,
            &offsets,
            read.slice.next_offset(),
            room,
            now,
        )?;
        let records = if acquired.is_empty() {
            Bytes::new()
        } else {
            Bytes::copy_from_slice(&read.slice)
        };
        Ok(Some(OneRead {
            from: read.from,
            records,
            acquired,
            nothing_to_deliver: offsets.is_empty(),
        }))
    }
}

/// A share fetch reads the partition's log on this node, its leader.
impl ShareSource for dyn PartitionOps {
    fn high_watermark(&self) -> i64 {
        PartitionOps::high_watermark(self)
    }
    fn last_stable_offset(&self) -> Result<i64> {
        PartitionOps::last_stable_offset(self)
    }
    fn log_start_offset(&self) -> i64 {
        PartitionOps::log_start_offset(self)
    }
    fn read_below(&self, offset: i64, max_bytes: usize, committed: bool) -> Result<LogSlice> {
        match committed {
            true => self
                .read_committed(offset, max_bytes)
                .map(|(slice, _)| slice),
            false => self.read_bounded(offset, max_bytes, ReadLimit::HighWatermark),
        }
    }
    fn aborted_transactions(&self, from: i64, to: i64) -> Result<Vec<AbortedTxn>> {
        PartitionOps::aborted_transactions(self, from, to)
    }
}

/// What one read of a share-partition gave.
struct OneRead {
    /// Where it started.
    from: i64,
    /// The batches read, when something of them was acquired.
    records: Bytes,
    /// What was acquired.
    acquired: Vec<AcquiredRecord>,
    /// It read batches with no record to deliver (only markers or aborted records).
    nothing_to_deliver: bool,
}

pub(super) fn handle(ctx: &Ctx<'_>, req: &mut Request) -> Result<Reply, Fatal> {
    let request: ShareFetchRequest = req.decode()?;
    let (group, member) = match ids(
        request.group_id.as_ref().map(|g| g.0.to_string()),
        request.member_id.as_deref().map(String::from),
    ) {
        Ok(ids) => ids,
        Err(e) => return req.respond(&refusal(e.code(), e.to_string())),
    };
    if !ctx.allowed(AclOperation::Read, ResourceType::Group, &group) {
        let code = denied_code(ResourceType::Group);
        return req.respond(&refusal(code, format!("not authorized on group {group}")));
    }
    let epoch = request.share_session_epoch;
    let has_acks = request
        .topics
        .iter()
        .flat_map(|t| &t.partitions)
        .any(|p| !p.acknowledgement_batches.is_empty());
    if epoch == 0 && has_acks {
        let e = ShareError::InvalidRequest(
            "acknowledgements need an open share session (epoch 0 opens one)".into(),
        );
        return req.respond(&refusal(e.code(), e.to_string()));
    }
    let backend = ctx.backend();
    let share = match backend.share() {
        Ok(s) => s,
        Err(e) => return req.respond(&refusal(error_code(&e), e.to_string())),
    };
    let names: Vec<String> = topics_with_counts(backend)
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    let ids = by_id(backend, names.iter());
    let mut answers: BTreeMap<(String, i32), PartitionData> = BTreeMap::new();
    let mut add = Vec::new();
    let mut acks: Vec<((String, i32), AckBatches)> = Vec::new();
    let mut unknown = Vec::new();
    for t in &request.topics {
        let Some(name) = ids.get(&t.topic_id) else {
            // A topic deleted since (or never known): each partition says so, for its
            // records and its acknowledgements, as Kafka answers it.
            let code = ResponseError::UnknownTopicId.code();
            let message = format!("no topic has id {}", t.topic_id);
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let mut data = partition_data(p.partition_index)
                        .with_error_code(code)
                        .with_error_message(Some(kstr(message.clone())));
                    if !p.acknowledgement_batches.is_empty() {
                        data.acknowledge_error_code = code;
                        data.acknowledge_error_message = Some(kstr(message.clone()));
                    }
                    data
                })
                .collect();
            unknown.push(
                ShareFetchableTopicResponse::default()
                    .with_topic_id(t.topic_id)
                    .with_partitions(partitions),
            );
            continue;
        };
        for p in &t.partitions {
            let key = (name.clone(), p.partition_index);
            if !ctx.allowed(AclOperation::Read, ResourceType::Topic, name) {
                let code = ResponseError::TopicAuthorizationFailed.code();
                answers.insert(key, partition_data(p.partition_index).with_error_code(code));
                continue;
            }
            add.push(key.clone());
            if !p.acknowledgement_batches.is_empty() {
                let batches = p
                    .acknowledgement_batches
                    .iter()
                    .map(|b| (b.first_offset, b.last_offset, b.acknowledge_types.clone()))
                    .collect();
                acks.push((key, batches));
            }
        }
    }
    let forget: Vec<(String, i32)> = request
        .forgotten_topics_data
        .iter()
        .filter_map(|t| Some((ids.get(&t.topic_id)?, &t.partitions)))
        .flat_map(|(n, ps)| ps.iter().map(move |p| (n.clone(), *p)))
        .collect();
    let session = match share.share_session(&group, &member, epoch, &add, &forget, Instant::now()) {
        Ok(s) => s,
        Err(e) => return req.respond(&refusal(error_code(&e), e.to_string())),
    };
    for ((topic, partition), batches) in acks {
        let (code, message) = acknowledge(
            backend,
            share,
            &group,
            &member,
            (&topic, partition),
            &batches,
        );
        let data = answers
            .entry((topic, partition))
            .or_insert_with(|| partition_data(partition));
        data.acknowledge_error_code = code;
        data.acknowledge_error_message = message.map(kstr);
    }
    // The last request of a session only acknowledges.
    if epoch == -1 {
        // The session's last request: what the member still holds goes back.
        if let Err(e) = share.release_held(&group, &member, Instant::now()) {
            return req.respond(&refusal(error_code(&e), e.to_string()));
        }
    } else {
        let fetcher = Fetcher {
            backend,
            share,
            group: &group,
            member: &member,
        };
        fetch(ctx, &fetcher, &request, &session, &mut answers);
    }
    let lock = share.group_settings(&group).record_lock_duration;
    let mut by_topic: BTreeMap<String, Vec<PartitionData>> = BTreeMap::new();
    for ((topic, _), data) in answers {
        by_topic.entry(topic).or_default().push(data);
    }
    // A session's partition whose topic was deleted since has no id to answer under
    // (a request naming it got UNKNOWN_TOPIC_ID above).
    let responses = by_topic
        .into_iter()
        .map(|(t, partitions)| (topic_id(backend, &t), partitions))
        .filter(|(id, _)| !id.is_nil())
        .map(|(id, partitions)| {
            ShareFetchableTopicResponse::default()
                .with_topic_id(id)
                .with_partitions(partitions)
        })
        .chain(unknown)
        .collect();
    let response = ShareFetchResponse::default()
        .with_acquisition_lock_timeout_ms(i32::try_from(lock.as_millis()).unwrap_or(i32::MAX))
        .with_responses(responses);
    req.respond(&response)
}

fn partition_data(partition: i32) -> PartitionData {
    PartitionData::default().with_partition_index(partition)
}

/// Acquires records of the session's partitions into `answers`, waiting up to
/// `max_wait_ms` while there is none.
fn fetch(
    ctx: &Ctx<'_>,
    fetcher: &Fetcher<'_>,
    request: &ShareFetchRequest,
    session: &[(String, i32)],
    answers: &mut BTreeMap<(String, i32), PartitionData>,
) {
    let max_records = usize::try_from(request.max_records)
        .ok()
        .filter(|n| *n > 0)
        .unwrap_or(DEFAULT_MAX_RECORDS);
    let deadline =
        Instant::now() + Duration::from_millis(u64::try_from(request.max_wait_ms).unwrap_or(0));
    let Some(max_bytes) = usize::try_from(request.max_bytes).ok().filter(|b| *b > 0) else {
        // MaxBytes 0 (a client's fetch.max.bytes=0): Kafka acquires and returns no
        // record. Answered after MaxWaitMs, as a long poll that finds nothing, so the
        // client does not ask again at once.
        while Instant::now() < deadline && !ctx.client_gone() && !ctx.shared.is_stopping() {
            std::thread::sleep(
                deadline
                    .saturating_duration_since(Instant::now())
                    .min(HANGUP_CHECK),
            );
        }
        return;
    };
    let mut wait: Option<ShareWait> = None;
    loop {
        let seen = wait.as_ref().map_or(0, |w| w.watch.signal.current());
        let mut got = 0;
        for (topic, partition) in session {
            let room = max_records - got;
            if room == 0 {
                break;
            }
            let data = answers
                .entry((topic.clone(), *partition))
                .or_insert_with(|| partition_data(*partition));
            match fetcher.partition(topic, *partition, max_bytes, room) {
                Ok((_, acquired)) if acquired.is_empty() => {}
                Ok((records, acquired)) => {
                    got += acquired.len();
                    data.records = Some(records);
                    data.acquired_records = ranges(&acquired);
                }
                Err(e) => {
                    data.error_code = error_code(&e);
                    data.error_message = Some(kstr(e.to_string()));
                }
            }
        }
        if got > 0 || Instant::now() >= deadline || ctx.client_gone() || ctx.shared.is_stopping() {
            return;
        }
        match &wait {
            Some(w) => {
                let until = fetcher
                    .share
                    .next_lock_expiry(fetcher.group, session)
                    .map_or(deadline, |e| e.min(deadline))
                    .min(Instant::now() + HANGUP_CHECK);
                w.watch.signal.wait_past_parked(seen, until);
            }
            // Registered once a wait is needed; the partitions are read again before
            // waiting, so what happened in between is not missed.
            None => wait = Some(ShareWait::new(ctx, fetcher, session)),
        }
    }
}

/// A waiting ShareFetch's signal: notified by an append to the session's partitions
/// (as Fetch's long poll), by any change of the share coordinator (records released,
/// acknowledged), and at shutdown; the coordinator's watch ends when dropped.
struct ShareWait<'a> {
    watch: Watch<'a>,
    share: &'a ShareCoordinator,
}

impl<'a> ShareWait<'a> {
    fn new(ctx: &'a Ctx<'_>, fetcher: &Fetcher<'a>, session: &[(String, i32)]) -> Self {
        let logs = session
            .iter()
            .filter_map(|(t, p)| fetcher.backend.partition(t, *p).ok())
            .collect();
        let watch = Watch::over(ctx.shared, Arc::new(Signal::default()), logs);
        fetcher.share.watch(&watch.signal);
        ShareWait {
            watch,
            share: fetcher.share,
        }
    }
}

impl Drop for ShareWait<'_> {
    fn drop(&mut self) {
        self.share.unwatch(&self.watch.signal);
    }
}
