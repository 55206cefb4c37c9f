//! A partition's requests on its leader: Fetch, ListOffsets and DescribeProducers
//! (Produce is the producer's, which pipelines them), with the leader
//! epoch the client knows (so that a deposed leader answers FENCED_LEADER_EPOCH), each
//! repeated through [`Cluster::on_leader`] while leadership moves.

use bytes::Bytes;
use kafka_protocol::messages::describe_producers_request::TopicRequest;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{
    BrokerId, DescribeProducersRequest, FetchRequest, ListOffsetsRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use std::collections::BTreeMap;

use super::cluster::{Attempt, Cluster, api_version, partition_error, retriable, unreachable};
use crate::admin::isolation_level;
use crate::consumer::IsolationLevel;
use crate::error::{ErrorCode, Result};

/// Produce versions this client speaks: 3 (the first with RecordBatch v2) to 12 (13
/// names topics by id).
pub(super) const PRODUCE: std::ops::RangeInclusive<i16> = 3..=12;
/// Produce versions of a transactional producer of transaction version 0: up to 11,
/// as Kafka's client sends, since v12 tells the leader to add the partition to the
/// transaction itself (KIP-890 part 2), which only transaction version 2 does.
pub(super) const PRODUCE_BEFORE_TRANSACTION_V2: std::ops::RangeInclusive<i16> = 3..=11;
/// Fetch versions: 4 (the oldest Kafka 4 answers) to 12 (13 names topics by id).
pub(super) const FETCH: std::ops::RangeInclusive<i16> = 4..=12;
/// ListOffsets versions: 1 to 9.
const LIST_OFFSETS: std::ops::RangeInclusive<i16> = 1..=9;
/// DescribeProducers versions: 0 (the only one).
const DESCRIBE_PRODUCERS: std::ops::RangeInclusive<i16> = 0..=0;

/// What a partition's leader knows of one producer that wrote to it (DescribeProducers,
/// KIP-664): the state of its last batch appended, committed or not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ProducerSequence {
    /// The producer id.
    pub producer_id: i64,
    /// Its epoch.
    pub epoch: i16,
    /// The sequence number of its last record appended (-1: none).
    pub last_sequence: i32,
}

/// One partition's part of a Fetch answer.
#[derive(Debug, Clone)]
pub struct FetchedPartition {
    /// The partition's high watermark.
    pub high_watermark: i64,
    /// Its last stable offset (-1 when the broker does not say).
    pub last_stable_offset: i64,
    /// Its log start offset (-1 when the broker does not say).
    pub log_start_offset: i64,
    /// The aborted transactions in the records, as `(producer id, first offset)` (read
    /// committed only).
    pub aborted: Vec<(i64, i64)>,
    /// The record batches, as the broker sent them (the last may be cut short).
    pub records: Bytes,
}

/// A ListOffsets answer: an offset and the timestamp it was found by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListedOffset {
    /// The offset (-1: none, e.g. no record at or after the timestamp).
    pub offset: i64,
    /// The timestamp of the record found (-1 for the earliest and latest offsets).
    pub timestamp: i64,
}

fn topic_name(topic: &str) -> TopicName {
    TopicName(StrBytes::from_string(topic.to_string()))
}

impl Cluster {
    /// The `timestamp` of [`list_offset`](Self::list_offset) that asks for the log
    /// start offset.
    pub const EARLIEST: i64 = -2;
    /// The `timestamp` of [`list_offset`](Self::list_offset) that asks for the end.
    pub const LATEST: i64 = -1;

    /// Appends the record batches `records` to `partition` of `topic` on its leader,
    /// with `acks` (0, 1 or -1 for all) and, for a transactional producer, its id.
    /// Returns the offset of the first record and the broker's append time (-1 unless
    /// the topic keeps LogAppendTime); with acks 0, `(-1, -1)` once sent. One batch at a
    /// time, for tests of the leader-following loop (the producer pipelines its own).
    #[cfg(all(test, feature = "server"))]
    pub(crate) fn produce(
        &self,
        topic: &str,
        partition: i32,
        records: &bytes::Bytes,
        acks: i16,
        transactional_id: Option<&str>,
    ) -> Result<(i64, i64)> {
        let timeout_ms = self.request_timeout().as_millis().min(i32::MAX as u128) as i32;
        let build = |_: i16| {
            kafka_protocol::messages::ProduceRequest::default()
                .with_transactional_id(
                    transactional_id.map(|t| kafka_protocol::messages::TransactionalId(StrBytes::from_string(t.into()))),
                )
                .with_acks(acks)
                .with_timeout_ms(timeout_ms)
                .with_topic_data(vec![
                    kafka_protocol::messages::produce_request::TopicProduceData::default()
                        .with_name(topic_name(topic))
                        .with_partition_data(vec![
                            kafka_protocol::messages::produce_request::PartitionProduceData::default()
                                .with_index(partition)
                                .with_records(Some(records.clone())),
                        ]),
                ])
        };
        self.on_leader(topic, partition, |leader| {
            if acks == 0 {
                let sent = self.call_no_answer(&leader.addr, PRODUCE, build);
                return Attempt::Done(sent.map(|_| (-1, -1)));
            }
            let (version, response) = match self.call(&leader.addr, PRODUCE, build) {
                Ok(r) => r,
                Err(e) => return Attempt::Done(Err(e)),
            };
            let api = api_version::<kafka_protocol::messages::ProduceRequest>(version);
            let p = response
                .responses
                .iter()
                .filter(|t| t.name.0.as_str() == topic)
                .flat_map(|t| t.partition_responses.iter())
                .find(|p| p.index == partition);
            let Some(p) = p else {
                return Attempt::Retry(partition_error(
                    api,
                    &leader.addr,
                    topic,
                    partition,
                    ErrorCode::UNKNOWN_SERVER_ERROR.code(),
                    Some(&StrBytes::from_static_str(
                        "the answer leaves the partition out",
                    )),
                ));
            };
            if p.error_code == 0 {
                return Attempt::Done(Ok((p.base_offset, p.log_append_time_ms)));
            }
            let e = partition_error(
                api,
                &leader.addr,
                topic,
                partition,
                p.error_code,
                p.error_message.as_ref(),
            );
            Attempt::refused(p.error_code, e)
        })
    }

    /// Reads `partition` of `topic` from `offset` on its leader (Fetch): at most
    /// `max_bytes`, waiting up to `max_wait` for a first record, at `isolation`. The
    /// answer holds whole batches, the last possibly cut short, as the broker sent
    /// them: cut them with [`record::batch_size`](crate::record::batch_size).
    ///
    /// # Errors
    /// [`Error::UnknownTopic`](crate::Error::UnknownTopic),
    /// [`Error::UnknownPartition`](crate::Error::UnknownPartition); the broker's refusal
    /// (OFFSET_OUT_OF_RANGE, ...) as [`Error::Api`](crate::Error::Api), after the
    /// retries of a leader move.
    pub fn fetch(
        &self,
        topic: &str,
        partition: i32,
        offset: i64,
        max_bytes: i32,
        max_wait: std::time::Duration,
        isolation: IsolationLevel,
    ) -> Result<FetchedPartition> {
        let max_wait_ms = max_wait.as_millis().min(i32::MAX as u128) as i32;
        let isolation = isolation_level(isolation);
        self.on_leader(topic, partition, |leader| {
            let build = |version: i16| {
                let mut p = FetchPartition::default()
                    .with_partition(partition)
                    .with_fetch_offset(offset)
                    .with_partition_max_bytes(max_bytes);
                if version >= 9 {
                    p = p.with_current_leader_epoch(leader.epoch);
                }
                FetchRequest::default()
                    .with_replica_id(BrokerId(-1))
                    .with_max_wait_ms(max_wait_ms)
                    .with_min_bytes(1)
                    .with_max_bytes(max_bytes)
                    .with_isolation_level(isolation)
                    .with_topics(vec![
                        FetchTopic::default()
                            .with_topic(topic_name(topic))
                            .with_partitions(vec![p]),
                    ])
            };
            let (version, response) = match self.call(&leader.addr, FETCH, build) {
                Ok(r) => r,
                Err(e) => return Attempt::Done(Err(e)),
            };
            let api = api_version::<FetchRequest>(version);
            let found = response
                .responses
                .into_iter()
                .filter(|t| t.topic.0.as_str() == topic)
                .flat_map(|t| t.partitions)
                .find(|p| p.partition_index == partition);
            let code = match &found {
                Some(p) => p.error_code,
                None if response.error_code != 0 => response.error_code,
                None => ErrorCode::UNKNOWN_SERVER_ERROR.code(),
            };
            match found {
                Some(p) if p.error_code == 0 => Attempt::Done(Ok(FetchedPartition {
                    high_watermark: p.high_watermark,
                    last_stable_offset: p.last_stable_offset,
                    log_start_offset: p.log_start_offset,
                    aborted: p
                        .aborted_transactions
                        .unwrap_or_default()
                        .iter()
                        .map(|a| (a.producer_id.0, a.first_offset))
                        .collect(),
                    records: p.records.unwrap_or_default(),
                })),
                _ => {
                    let e = partition_error(api, &leader.addr, topic, partition, code, None);
                    Attempt::refused(code, e)
                }
            }
        })
    }

    /// The offset of `partition` of `topic` for `timestamp`, as Kafka's ListOffsets
    /// answers it (its leader asked): [`EARLIEST`](Self::EARLIEST) the log start offset,
    /// [`LATEST`](Self::LATEST) the end (the last stable offset when reading
    /// committed), else the first record whose timestamp is at or after `timestamp`
    /// (Kafka's `offsetsForTimes`; offset -1 when there is none).
    ///
    /// # Errors
    /// As [`fetch`](Self::fetch).
    pub fn list_offset(
        &self,
        topic: &str,
        partition: i32,
        timestamp: i64,
        isolation: IsolationLevel,
    ) -> Result<ListedOffset> {
        let isolation = isolation_level(isolation);
        self.on_leader(topic, partition, |leader| {
            let build = |version: i16| {
                list_offsets_request(version, topic, &[(partition, leader.epoch)], timestamp)
                    .with_isolation_level(if version >= 2 { isolation } else { 0 })
            };
            let (version, response) = match self.call(&leader.addr, LIST_OFFSETS, build) {
                Ok(r) => r,
                Err(e) => return Attempt::Done(Err(e)),
            };
            let api = api_version::<ListOffsetsRequest>(version);
            let found = response
                .topics
                .iter()
                .filter(|t| t.name.0.as_str() == topic)
                .flat_map(|t| t.partitions.iter())
                .find(|p| p.partition_index == partition);
            let code = found.map_or(ErrorCode::UNKNOWN_SERVER_ERROR.code(), |p| p.error_code);
            match found {
                Some(p) if p.error_code == 0 => Attempt::Done(Ok(ListedOffset {
                    offset: p.offset,
                    timestamp: p.timestamp,
                })),
                _ => {
                    let e = partition_error(api, &leader.addr, topic, partition, code, None);
                    Attempt::refused(code, e)
                }
            }
        })
    }
}

impl Cluster {
    /// The producers the leader of `partition` of `topic` holds state for
    /// (DescribeProducers): each one's last batch appended, including one appended and
    /// not yet replicated, which no reader sees before the high watermark passes it.
    ///
    /// # Errors
    /// [`Error::UnsupportedApi`](crate::Error::UnsupportedApi) when the leader does not
    /// answer DescribeProducers (Kafka before 2.8); as [`fetch`](Self::fetch) otherwise.
    pub(crate) fn producer_sequences(
        &self,
        topic: &str,
        partition: i32,
    ) -> Result<Vec<ProducerSequence>> {
        self.on_leader(topic, partition, |leader| {
            let build = |_version: i16| {
                DescribeProducersRequest::default().with_topics(vec![
                    TopicRequest::default()
                        .with_name(topic_name(topic))
                        .with_partition_indexes(vec![partition]),
                ])
            };
            let (version, response) = match self.call(&leader.addr, DESCRIBE_PRODUCERS, build) {
                Ok(r) => r,
                Err(e) => return Attempt::Done(Err(e)),
            };
            let api = api_version::<DescribeProducersRequest>(version);
            let found = response
                .topics
                .into_iter()
                .filter(|t| t.name.0.as_str() == topic)
                .flat_map(|t| t.partitions)
                .find(|p| p.partition_index == partition);
            let code = found
                .as_ref()
                .map_or(ErrorCode::UNKNOWN_SERVER_ERROR.code(), |p| p.error_code);
            match found {
                Some(p) if p.error_code == 0 => Attempt::Done(Ok(p
                    .active_producers
                    .iter()
                    .map(|s| ProducerSequence {
                        producer_id: s.producer_id.0,
                        epoch: i16::try_from(s.producer_epoch).unwrap_or(i16::MAX),
                        last_sequence: s.last_sequence,
                    })
                    .collect())),
                _ => {
                    let e = partition_error(api, &leader.addr, topic, partition, code, None);
                    Attempt::refused(code, e)
                }
            }
        })
    }

    /// The offsets of `partitions` of `topic` for `timestamp` as a reader of
    /// uncommitted records sees them (as [`list_offset`](Self::list_offset) answers
    /// each): one ListOffsets per leader the known metadata names. A partition without
    /// a leader, whose leader cannot be reached or answers an error worth asking again,
    /// is then asked alone, with `list_offset`'s retries.
    ///
    /// # Errors
    /// As [`list_offset`](Self::list_offset).
    pub(crate) fn list_offsets(
        &self,
        topic: &str,
        partitions: &[i32],
        timestamp: i64,
    ) -> Result<BTreeMap<i32, i64>> {
        let mut by_leader: BTreeMap<String, Vec<(i32, i32)>> = BTreeMap::new();
        let mut alone = Vec::new();
        for &p in partitions {
            match self.leader(topic, p)? {
                Some(l) => by_leader.entry(l.addr).or_default().push((p, l.epoch)),
                None => alone.push(p),
            }
        }
        let mut out = BTreeMap::new();
        for (addr, asked) in by_leader {
            let build = |version: i16| list_offsets_request(version, topic, &asked, timestamp);
            let (version, response) = match self.call(&addr, LIST_OFFSETS, build) {
                Ok(answer) => answer,
                Err(e) if unreachable(&e) => {
                    alone.extend(asked.iter().map(|(p, _)| *p));
                    continue;
                }
                Err(e) => return Err(e),
            };
            let answers = response
                .topics
                .iter()
                .filter(|t| t.name.0.as_str() == topic)
                .flat_map(|t| t.partitions.iter());
            let mut unanswered: Vec<i32> = asked.iter().map(|(p, _)| *p).collect();
            for a in answers {
                let Some(i) = unanswered.iter().position(|p| *p == a.partition_index) else {
                    continue;
                };
                let p = unanswered.swap_remove(i);
                match a.error_code {
                    0 => {
                        out.insert(p, a.offset);
                    }
                    code if retriable(ErrorCode::from_code(code)) => alone.push(p),
                    code => {
                        let api = api_version::<ListOffsetsRequest>(version);
                        return Err(partition_error(api, &addr, topic, p, code, None));
                    }
                }
            }
            alone.extend(unanswered);
        }
        for p in alone {
            let uncommitted = IsolationLevel::ReadUncommitted;
            out.insert(
                p,
                self.list_offset(topic, p, timestamp, uncommitted)?.offset,
            );
        }
        Ok(out)
    }
}

/// A ListOffsets request of `version` for `partitions` of `topic` (each with the leader
/// epoch known, sent from v4) at `timestamp`, reading uncommitted.
fn list_offsets_request(
    version: i16,
    topic: &str,
    partitions: &[(i32, i32)],
    timestamp: i64,
) -> ListOffsetsRequest {
    let partitions = partitions
        .iter()
        .map(|&(partition, epoch)| {
            let p = ListOffsetsPartition::default()
                .with_partition_index(partition)
                .with_timestamp(timestamp);
            if version >= 4 {
                p.with_current_leader_epoch(epoch)
            } else {
                p
            }
        })
        .collect();
    ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![
            ListOffsetsTopic::default()
                .with_name(topic_name(topic))
                .with_partitions(partitions),
        ])
}
