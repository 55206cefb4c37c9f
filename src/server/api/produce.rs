//! Produce (key 0), versions 3-12 (v9 is flexible; v10 and v11 add only tagged fields
//! and an error code tidelog does not give; v12 is a client of transaction version 2,
//! whose partitions the leader adds to the transaction: KIP-890 part 2, once the
//! cluster has finalized `transaction.version` 2; below it ApiVersions offers v11 at
//! most and a transactional batch of v12 is answered UNSUPPORTED_VERSION).
//!
//! Transactional batches (KIP-98) need the request's transactional id, Write on it, and
//! their partition in the producer's ongoing transaction, which the transaction
//! coordinator confirms before the append (KIP-890 part 1; refusals are answered as
//! Kafka answers a client of these versions: INVALID_TXN_STATE, INVALID_PRODUCER_EPOCH,
//! or the retriable NOT_ENOUGH_REPLICAS while the coordinator is busy). Control batches
//! are the coordinator's alone: a client's get INVALID_RECORD.
//!
//! Every batch of a partition is validated (length, magic 2, CRC-32C) before anything
//! is appended; a bad batch fails its partition only (`CORRUPT_MESSAGE`), other
//! partitions of the request go ahead. A compressed batch is decompressed (bounded by
//! 64 x `max.message.bytes`) and its records checked, as Kafka's broker does; when the
//! topic's `compression.type` names a codec other than the batch's (or `uncompressed`),
//! the partition rewrites the batch with the topic's codec before it is appended
//! (`Partition::append_batch`, Kafka's rule; `producer`, the default, stores batches as
//! sent). Batches of idempotent producers go
//! through `PartitionLog::append_idempotent`, whose sequence checks and append are one
//! step under the log's writer lock; its typed refusals become DUPLICATE_SEQUENCE_NUMBER,
//! OUT_OF_ORDER_SEQUENCE_NUMBER or INVALID_PRODUCER_EPOCH (`error_code`). `acks = 0`
//! gets no response at all; `acks = 1` is answered once the batches are in the leader's
//! log. `acks = -1` (all) is refused before anything is appended when the partition's
//! ISR is smaller than `min.insync.replicas` (NOT_ENOUGH_REPLICAS); otherwise every
//! partition is appended first, then the response waits until each partition's high
//! watermark passes its batches (`Partition::wait_committed`), at most the request's
//! `timeout_ms` (REQUEST_TIMED_OUT; NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR fell
//! below the minimum meanwhile). On a single node the high watermark is the log end, so
//! `-1` answers as `1` does.
//!
//! On a cluster, a batch of `__share_group_state` (another node's share coordinator
//! writing a share-partition's state) goes through the share coordinator's write fence
//! of the partition: a record of an older leader epoch than its share-partition already
//! has is refused, FENCED_LEADER_EPOCH, and nothing of the batch is appended.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::produce_request::TopicProduceData;
use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, PartitionProduceResponse, TopicProduceResponse,
};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse};

use super::{Answer, Ctx, Fatal, Reply, Request, error_code, kstr};
use crate::coordinator::{SHARE_GROUP_STATE_TOPIC, scan_log};
use crate::record::{Compression, ValidBatches, decompression_limit};
use crate::security::acl::{AclOperation, ResourceType};
use crate::server::backend::PartitionOps;
use crate::server::error_codes::produce_verification_code;
use crate::storage::AppendOutcome;
use crate::storage::LogConfig;
use crate::storage::ReadLimit;
use crate::topic::AppendEpoch;
use crate::transaction::ProducerIdAndEpoch;
use crate::transaction::log::TRANSACTION_STATE_TOPIC;

/// A partition's answer, and for an appended one the log, the offset the high
/// watermark must pass for `acks=all`, the leadership it was appended under and
/// whether `acks=all` waits for an fsync there (`durable.acks`).
type Appended = (
    PartitionProduceResponse,
    Option<(Arc<dyn PartitionOps>, i64, AppendEpoch, bool)>,
);

pub(super) fn handle(ctx: &Ctx<'_>, req: &mut Request) -> Result<Reply, Fatal> {
    match start(ctx, req)? {
        Answer::Now(reply) => Ok(reply),
        Answer::Later(finish) => finish(),
    }
}

/// [`handle`] up to the wait for the in-sync replicas: every partition is appended
/// here; an `acks=all` request whose appends must be replicated is answered by the
/// [`Answer::Later`] (on a plaintext connection, its writer thread, while this one reads
/// and appends the next request: see `connection.rs`).
pub(super) fn start(ctx: &Ctx<'_>, req: &mut Request) -> Result<Answer, Fatal> {
    let request: ProduceRequest = req.decode()?;
    let acks = request.acks;
    let version = req.version();
    let deadline = Instant::now() + Duration::from_millis(request.timeout_ms.max(0) as u64);
    // A transactional producer needs Write on its transactional id (Kafka refuses the
    // whole request otherwise).
    let transactional_id = request
        .transactional_id
        .as_ref()
        .map(|t| t.0.as_str())
        .filter(|t| !t.is_empty());
    let id_refused = transactional_id
        .is_some_and(|id| !ctx.allowed(AclOperation::Write, ResourceType::TransactionalId, id));
    let added = match transactional_id {
        Some(id) if version >= 12 && !id_refused && matches!(acks, -1..=1) => {
            add_together(ctx, id, &request.topic_data)
        }
        _ => Added::new(),
    };
    let appended: Vec<_> = request
        .topic_data
        .into_iter()
        .map(|t| {
            let partitions: Vec<_> = t
                .partition_data
                .into_iter()
                .map(|p| {
                    if id_refused {
                        (
                            refuse(
                                p.index,
                                ResponseError::TransactionalIdAuthorizationFailed.code(),
                                "not authorized to write as this transactional id".into(),
                            ),
                            None,
                        )
                    } else if !matches!(acks, -1..=1) {
                        (
                            refuse(
                                p.index,
                                ResponseError::InvalidRequiredAcks.code(),
                                format!("acks must be 0, 1 or -1, not {acks}"),
                            ),
                            None,
                        )
                    } else {
                        produce_partition(
                            ctx,
                            &t.name,
                            p.index,
                            p.records.unwrap_or_default(),
                            acks,
                            (transactional_id, &added),
                            version,
                        )
                    }
                })
                .collect();
            (t.name, partitions)
        })
        .collect();
    if acks == 0 {
        return Ok(Answer::Now(Reply::Nothing));
    }
    // The throttle time is the request's (set on this thread before it was handled).
    let throttle_ms = crate::server::throttle::current_ms();
    let peer = ctx.peer;
    // The answer needs only the header once the body is decoded.
    let answered = Request {
        header: req.header.clone(),
        body: Bytes::new(),
    };
    // An `acks=all` answer waits (on the connection's writer, so that the requests
    // behind it are read meanwhile) unless every appended partition's high watermark
    // is past it already and none needs an fsync: a partition without followers, whose
    // append moved its high watermark. That answer is written now, without a hop to
    // the writer thread and back.
    let waits = acks == -1
        && appended.iter().any(|(_, ps)| {
            ps.iter().any(|p| {
                p.1.as_ref().is_some_and(|(log, offset, _, durable)| {
                    *durable || log.high_watermark() <= *offset
                })
            })
        });
    let finish = move || {
        answer(appended, (acks, version, deadline, peer))
            .and_then(|r| answered.respond(&r.with_throttle_time_ms(throttle_ms)))
    };
    if waits {
        Ok(Answer::Later(Box::new(finish)))
    } else {
        finish().map(Answer::Now)
    }
}

/// The response to a request whose partitions are `appended`: with `acks` -1, each
/// appended partition once the in-sync replicas have its batches (by `deadline`).
fn answer(
    appended: Vec<(kafka_protocol::messages::TopicName, Vec<Appended>)>,
    (acks, version, deadline, peer): (i16, i16, Instant, std::net::SocketAddr),
) -> Result<ProduceResponse, Fatal> {
    let responses = appended
        .into_iter()
        .map(|(name, partitions)| {
            let partition_responses = partitions
                .into_iter()
                .map(|(response, committed)| match committed {
                    Some((log, offset, appended, _)) if acks == -1 => {
                        let left = deadline.saturating_duration_since(Instant::now());
                        match log.wait_committed(offset, appended, left) {
                            Ok(()) => response,
                            Err(e) => {
                                tracing::debug!(%peer, topic = %name.0, partition = response.index, "acks=all not met: {e}");
                                refuse(response.index, error_code(&e), e.to_string())
                            }
                        }
                    }
                    _ => response,
                })
                // KIP-467's record errors are in versions 8 and up only.
                .map(|response| {
                    if version < 8 {
                        response.with_record_errors(Vec::new())
                    } else {
                        response
                    }
                })
                .collect();
            TopicProduceResponse::default()
                .with_name(name)
                .with_partition_responses(partition_responses)
        })
        .collect();
    Ok(ProduceResponse::default().with_responses(responses))
}

/// A failed partition.
fn refuse(index: i32, code: i16, message: String) -> PartitionProduceResponse {
    PartitionProduceResponse::default()
        .with_index(index)
        .with_error_code(code)
        .with_base_offset(-1)
        .with_log_append_time_ms(-1)
        .with_log_start_offset(-1)
        .with_error_message(Some(kstr(message)))
}

/// What the batches of a partition are: whether one comes from an idempotent producer,
/// and the producer id and epoch of a transactional one.
struct Batches {
    idempotent: bool,
    transactional: Option<ProducerIdAndEpoch>,
}

/// Validate every batch of `records` (the one CRC check they get: the log takes the
/// [`ValidBatches`] without another), and say what they are.
fn validate<'r>(
    topic: &str,
    partition: i32,
    records: &'r [u8],
    config: &LogConfig,
) -> Result<(ValidBatches<'r>, Batches), (i16, String)> {
    let limit = decompression_limit(config.max_message_bytes);
    let corrupt = |e: crate::error::Error| (ResponseError::CorruptMessage.code(), e.to_string());
    if records.is_empty() {
        // Kafka's ProduceRequest.validateRecords (v3+): INVALID_RECORD.
        return Err((
            ResponseError::InvalidRecord.code(),
            format!("produce request for {topic}-{partition} carries no record batch"),
        ));
    }
    let location = format!("produce request for {topic}-{partition}");
    let valid = ValidBatches::parse(records, &location).map_err(corrupt)?;
    let mut kinds = Batches {
        idempotent: false,
        transactional: None,
    };
    let mut scratch = Vec::new();
    for batch in valid.iter() {
        let codec = batch.codec().map_err(corrupt)?;
        if codec != Compression::None {
            for r in batch
                .decode_records(&location, limit, &mut scratch)
                .map_err(corrupt)?
            {
                r.map_err(corrupt)?;
            }
        }
        if batch.is_control() {
            // Kafka's LogValidator: only the transaction coordinator writes markers.
            return Err((
                ResponseError::InvalidRecord.code(),
                format!("{location}: clients are not allowed to write control records"),
            ));
        }
        if batch.is_transactional() {
            kinds.transactional = Some(ProducerIdAndEpoch {
                producer_id: batch.producer_id(),
                epoch: batch.producer_epoch(),
            });
        }
        kinds.idempotent |= batch.producer_id() >= 0;
    }
    Ok((valid, kinds))
}

/// Kafka's check of a compacted topic (KIP-467): every record has a key. The refusal
/// (INVALID_RECORD) names each keyless record by its index in its batch.
fn keyless_records(
    topic: &str,
    partition: i32,
    records: &ValidBatches<'_>,
    config: &LogConfig,
) -> Option<PartitionProduceResponse> {
    if !config.cleanup_policy.compacts() {
        return None;
    }
    let limit = decompression_limit(config.max_message_bytes);
    let location = format!("produce request for {topic}-{partition}");
    let mut scratch = Vec::new();
    let mut errors = Vec::new();
    // `validate` checked the batches and their records.
    for batch in records.iter() {
        let Ok(decoded) = batch.decode_records(&location, limit, &mut scratch) else {
            break;
        };
        for (i, r) in decoded.enumerate() {
            if r.is_ok_and(|r| r.key.is_none()) {
                errors.push(
                    BatchIndexAndErrorMessage::default()
                        .with_batch_index(i as i32)
                        .with_batch_index_error_message(Some(kstr(format!(
                            "compacted topic {topic} takes only records with a key"
                        )))),
                );
            }
        }
    }
    if errors.is_empty() {
        return None;
    }
    let message = format!(
        "{location}: {} record(s) without a key, which compacted topic {topic} refuses",
        errors.len()
    );
    Some(refuse(partition, ResponseError::InvalidRecord.code(), message).with_record_errors(errors))
}

/// `__consumer_offsets` and `__transaction_state`: their coordinators write them, a
/// client's Produce never does.
fn coordinators_topic(topic: &str) -> bool {
    topic == crate::broker::OFFSETS_TOPIC || topic == TRANSACTION_STATE_TOPIC
}

/// Transactional partitions of a Produce whose place in the transaction
/// [`add_together`] settled: by (topic, partition), the producer and whether the batch
/// may go on (the transaction open there at its epoch, or the coordinator's answer to
/// the add).
type Added =
    std::collections::HashMap<(String, i32), (ProducerIdAndEpoch, Result<(), (i16, String)>)>;

/// Transaction version 2 (Produce v12): the partitions of one request whose first
/// batch of the producer's transaction this is are added to it together, each add on
/// a thread of its own, so that they reach the coordinator at once and are written as
/// one record there (`TransactionCoordinator::add_partitions`). Kafka's leader verifies
/// a request's partitions with one call to the coordinator; added one after another,
/// each waited for the writes of those before it, and the requests behind on the
/// connection for all of them. The partitions found open at the producer's epoch are
/// noted too, so that [`verify`] does not look again; a request of one partition, or
/// with one partition to add, is left to [`verify`]. Partitions that cannot be read
/// here (unknown, not led, bad batches) are left out: the append of each refuses it as
/// before.
fn add_together(ctx: &Ctx<'_>, id: &str, topics: &[TopicProduceData]) -> Added {
    let mut settled = Added::new();
    let partitions: usize = topics.iter().map(|t| t.partition_data.len()).sum();
    if partitions < 2 || !super::api_versions::transaction_version_2(ctx) {
        return settled; // left to `verify`, or refused below
    }
    let backend = ctx.backend();
    let mut wanted = Vec::new();
    for t in topics {
        // Only where the append may go: written by this client, not internal.
        if coordinators_topic(&t.name)
            || !ctx.allowed(AclOperation::Write, ResourceType::Topic, &t.name)
        {
            continue;
        }
        for p in &t.partition_data {
            let Some(records) = p.records.as_deref() else {
                continue;
            };
            let Ok(first) = crate::record::Batch::parse_header_at(records, "", 0) else {
                continue;
            };
            if !first.is_transactional() {
                continue;
            }
            let producer = ProducerIdAndEpoch {
                producer_id: first.producer_id(),
                epoch: first.producer_epoch(),
            };
            let Ok(log) = backend.partition(&t.name, p.index) else {
                continue;
            };
            match log.transaction_open_at(producer.producer_id, producer.epoch) {
                Ok(true) => {
                    settled.insert((t.name.to_string(), p.index), (producer, Ok(())));
                }
                Ok(false) => wanted.push((t.name.to_string(), p.index, producer)),
                Err(_) => {} // `verify` answers it
            }
        }
    }
    if wanted.len() < 2 {
        return settled;
    }
    std::thread::scope(|scope| {
        let asks: Vec<_> = wanted
            .iter()
            .map(|(topic, index, producer)| {
                std::thread::Builder::new()
                    .name("tidelog-txn-add".into())
                    .spawn_scoped(scope, move || {
                        retry_while_completing(|| {
                            in_transaction_at(backend, id, *producer, (topic, *index), true)
                        })
                    })
            })
            .collect();
        let added = wanted
            .iter()
            .zip(asks)
            .filter_map(|((topic, index, producer), ask)| {
                // A thread that could not start, or panicked, leaves the partition to
                // `verify`.
                let answer = ask.ok()?.join().ok()?;
                let answer = answer.map_err(|e| (produce_verification_code(&e), e.to_string()));
                Some(((topic.clone(), *index), (*producer, answer)))
            });
        settled.extend(added);
    });
    settled
}

/// KIP-890 part 1: a transactional batch is appended only if its partition is in the
/// producer's ongoing transaction, as the coordinator says: the local one, or on a
/// cluster the one on the node that leads the id's `__transaction_state` partition
/// (AddPartitionsToTxn `verify_only`). As Kafka's leader does, only the first batch of
/// a transaction in a partition is verified: later ones continue the transaction the
/// log holds open for the producer at that epoch. With `add` (Produce v12, a client of
/// transaction version 2: KIP-890 part 2) the leader adds the partition to the
/// transaction instead, as that client no longer sends AddPartitionsToTxn.
/// `added`: the partitions of the request [`add_together`] settled, answered as it
/// found them.
fn verify(
    ctx: &Ctx<'_>,
    log: &dyn PartitionOps,
    (transactional_id, added): (Option<&str>, &Added),
    producer: ProducerIdAndEpoch,
    (topic, index): (&str, i32),
    add: bool,
) -> Result<(), (i16, String)> {
    let Some(id) = transactional_id else {
        // Kafka: transactional records need the request's transactional id.
        return Err((
            ResponseError::TransactionalIdAuthorizationFailed.code(),
            format!(
                "transactional records for {topic}-{index} in a request without a transactional id"
            ),
        ));
    };
    // Looked up only when `add_together` settled some (the key is an owned name).
    if !added.is_empty()
        && let Some((added_for, answer)) = added.get(&(topic.to_string(), index))
        && *added_for == producer
    {
        return answer.clone();
    }
    match log.transaction_open_at(producer.producer_id, producer.epoch) {
        Ok(true) => return Ok(()),
        Ok(false) => {}
        Err(e) => return Err((error_code(&e), e.to_string())),
    }
    let ask = || in_transaction(ctx, id, producer, topic, index, add);
    let answer = if add {
        retry_while_completing(ask)
    } else {
        ask()
    };
    answer.map_err(|e| (produce_verification_code(&e), e.to_string()))
}

/// How long a leader asks the coordinator again to add a partition to a transaction
/// (Produce v12) while the producer's previous transaction is still completing (its
/// markers being written: CONCURRENT_TRANSACTIONS), before it answers the client with
/// the retriable error, which the client backs off from by its own `retry.backoff.ms`
/// (100 ms and more): Kafka's `add.partitions.to.txn.retry.backoff.max.ms` default.
/// The coordinator itself waits as long for the markers before it answers a leader
/// (`TransactionCoordinator::add_partitions_when_completed`), so a leader asks again
/// only when the coordinator is another node that gave up first.
pub(super) const ADD_RETRY_MAX: Duration = Duration::from_millis(100);
/// The longest pause between two of those asks (Kafka's
/// `add.partitions.to.txn.retry.backoff.ms` default); the first comes after 1 ms and
/// the pause doubles, as markers are written in about a millisecond.
const ADD_RETRY_BACKOFF_MAX: Duration = Duration::from_millis(20);

/// Runs `attempt` until it answers something other than CONCURRENT_TRANSACTIONS or
/// [`ADD_RETRY_MAX`] would pass; its last answer.
fn retry_while_completing<T>(
    mut attempt: impl FnMut() -> Result<T, crate::transaction::TxnError>,
) -> Result<T, crate::transaction::TxnError> {
    let deadline = Instant::now() + ADD_RETRY_MAX;
    let mut backoff = Duration::from_millis(1);
    loop {
        match attempt() {
            Err(crate::transaction::TxnError::ConcurrentTransactions)
                if Instant::now() + backoff <= deadline =>
            {
                std::thread::sleep(backoff);
                backoff = (backoff * 2).min(ADD_RETRY_BACKOFF_MAX);
            }
            answer => return answer,
        }
    }
}

/// Asks the coordinator of `id` (this node's, or on a cluster the one of the node
/// that leads the id's `__transaction_state` partition) to verify (KIP-890 part 1) or,
/// with `add`, to add (part 2) `topic`-`index` in the producer's ongoing transaction.
pub(super) fn in_transaction(
    ctx: &Ctx<'_>,
    id: &str,
    producer: ProducerIdAndEpoch,
    topic: &str,
    index: i32,
    add: bool,
) -> Result<(), crate::transaction::TxnError> {
    in_transaction_at(ctx.backend(), id, producer, (topic, index), add)
}

/// [`in_transaction`] through `backend`.
fn in_transaction_at(
    backend: &dyn crate::server::backend::Backend,
    id: &str,
    producer: ProducerIdAndEpoch,
    (topic, index): (&str, i32),
    add: bool,
) -> Result<(), crate::transaction::TxnError> {
    let txns = backend.transactions();
    let local = txns.partition_of(id).is_some_and(|p| txns.leads(p));
    let wanted: std::collections::BTreeSet<_> = [(topic.to_string(), index)].into();
    match backend.cluster() {
        Some(cluster) if !local => cluster.verify_transaction(id, producer, topic, index, add),
        _ if add => txns.add_partitions_when_completed(
            &crate::transaction::AddPartitionsRequest {
                transactional_id: id.to_string(),
                producer_id: producer.producer_id,
                producer_epoch: producer.epoch,
                partitions: wanted,
                client_transaction_version: crate::transaction::EPOCH_BUMP_TRANSACTION_VERSION,
            },
            ADD_RETRY_MAX,
        ),
        _ => txns
            .verify_partitions(id, producer, &wanted)
            .and_then(|mut v| v.remove(&(topic.to_string(), index)).unwrap_or(Ok(()))),
    }
}

fn produce_partition(
    ctx: &Ctx<'_>,
    topic: &str,
    index: i32,
    records: Bytes,
    acks: i16,
    txn: (Option<&str>, &Added),
    version: i16,
) -> Appended {
    if let Err(e) = ctx.authorize(AclOperation::Write, ResourceType::Topic, topic) {
        return (refuse(index, error_code(&e), e.to_string()), None);
    }
    if coordinators_topic(topic) {
        // The coordinators own them; a client's bytes there would corrupt their state.
        return (
            refuse(
                index,
                ResponseError::InvalidTopicException.code(),
                format!("{topic} is internal: clients cannot produce to it"),
            ),
            None,
        );
    }
    let log = match ctx.backend().partition(topic, index) {
        Ok(log) => log,
        Err(e) => return (refuse(index, error_code(&e), e.to_string()), None),
    };
    let config = log.log_config();
    let (
        valid,
        Batches {
            idempotent,
            transactional,
        },
    ) = match validate(topic, index, &records, &config) {
        Ok(b) => b,
        Err((code, message)) => {
            tracing::debug!(peer = %ctx.peer, topic, partition = index, "{message}");
            return (refuse(index, code, message), None);
        }
    };
    if transactional.is_some()
        && version > super::api_versions::LAST_PRODUCE_BEFORE_TRANSACTION_V2
        && !super::api_versions::transaction_version_2(ctx)
    {
        // ApiVersions offers v12 only at transaction version 2; a client that sends it
        // anyway would have this leader add the partition to a transaction of
        // version 0 or 1, whose client adds its partitions itself.
        tracing::debug!(peer = %ctx.peer, topic, partition = index, "transactional Produce v{version} refused below transaction.version 2");
        return (
            refuse(
                index,
                ResponseError::UnsupportedVersion.code(),
                format!(
                    "Produce v{version} needs the finalized transaction.version 2; this cluster's is lower"
                ),
            ),
            None,
        );
    }
    if let Some(producer) = transactional
        && let Err((code, message)) = verify(
            ctx,
            log.as_ref(),
            txn,
            producer,
            (topic, index),
            version >= 12,
        )
    {
        tracing::debug!(peer = %ctx.peer, topic, partition = index, code, "transactional produce refused: {message}");
        return (refuse(index, code, message), None);
    }
    if let Some(refused) = keyless_records(topic, index, &valid, &config) {
        tracing::debug!(peer = %ctx.peer, topic, partition = index, "produce refused: records without a key on a compacted topic");
        return (refused, None);
    }
    if acks == -1
        && let Err(e) = log.check_enough_replicas()
    {
        tracing::debug!(peer = %ctx.peer, topic, partition = index, "produce refused: {e}");
        return (refuse(index, error_code(&e), e.to_string()), None);
    }
    let append = || {
        if idempotent {
            append_idempotent(log.as_ref(), &valid, topic, index)
        } else {
            log.append(&valid).map(|(info, appended)| {
                (
                    info.base_offset,
                    info.last_offset,
                    info.log_append_time,
                    appended,
                )
            })
        }
    };
    // Only a `__share_group_state` batch needs the leadership (a lock of the partition's
    // role): every other produce skips it.
    let fenced = match topic == SHARE_GROUP_STATE_TOPIC {
        true => log.leader_epoch(),
        false => None,
    };
    let result = match fenced {
        Some(leadership) => {
            // Another node's share coordinator writing a share-partition's state:
            // through the fence (a deposed leader's write is refused). Nothing here waits
            // for this node's share coordinator (`share()` is loaded-or-not, the fence
            // has its own lock): that node holds its coordinator while it waits for
            // this answer, and this coordinator may be waiting for that node likewise.
            let location = format!("{topic}-{index}");
            ctx.backend().share().and_then(|share| {
                share.fence().append(
                    index,
                    leadership,
                    valid.as_bytes(),
                    |f| {
                        scan_log(
                            log.log_start_offset(),
                            &location,
                            |offset| log.read_bounded(offset, 1 << 20, ReadLimit::LogEnd),
                            f,
                        )
                    },
                    append,
                )
            })
        }
        None => append(),
    }
    .map_err(|e| (error_code(&e), e.to_string()));
    match result {
        Ok((base_offset, last_offset, append_time, appended)) => (
            PartitionProduceResponse::default()
                .with_index(index)
                .with_base_offset(base_offset)
                .with_log_append_time_ms(append_time.unwrap_or(-1))
                .with_log_start_offset(log.log_start_offset()),
            Some((log, last_offset, appended, config.durable_acks)),
        ),
        Err((code, message)) => {
            tracing::debug!(peer = %ctx.peer, topic, partition = index, code, "produce refused: {message}");
            (refuse(index, code, message), None)
        }
    }
}

/// An idempotent producer's append: (base offset, last offset, append time, the
/// leadership it was appended under); a duplicate batch is answered with its offsets
/// and not appended again.
fn append_idempotent(
    log: &dyn PartitionOps,
    valid: &ValidBatches<'_>,
    topic: &str,
    index: i32,
) -> crate::error::Result<(i64, i64, Option<i64>, AppendEpoch)> {
    log.append_idempotent(valid)
        .map(|(outcome, appended)| match outcome {
            AppendOutcome::Appended(info) => (
                info.base_offset,
                info.last_offset,
                info.log_append_time,
                appended,
            ),
            AppendOutcome::Duplicate(base) => {
                tracing::debug!(
                    topic,
                    partition = index,
                    base_offset = base,
                    "duplicate batch not appended again"
                );
                // A batch is replicated whole: the high watermark past its base offset
                // is past all of it.
                (base, base, None, appended)
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{BatchBuilder, CRC_CHECKS};
    use crate::transaction::TxnError;
    use crate::{Broker, TopicConfig};

    /// A leader adding a partition asks again while the previous transaction
    /// completes, and answers the first other answer; it gives up after a bounded
    /// number of asks, and another refusal ends the asking at once.
    #[test]
    fn adding_a_partition_is_asked_again_while_the_previous_transaction_completes() {
        let mut asked = 0;
        let answer = retry_while_completing(|| {
            asked += 1;
            if asked < 3 {
                Err(TxnError::ConcurrentTransactions)
            } else {
                Ok(asked)
            }
        });
        assert_eq!(answer, Ok(3));

        let mut asked = 0;
        let answer: Result<(), TxnError> = retry_while_completing(|| {
            asked += 1;
            Err(TxnError::ConcurrentTransactions)
        });
        assert_eq!(answer, Err(TxnError::ConcurrentTransactions));
        // 1, 2, 4, 8, 16, then 20 ms pauses within 100 ms: at most 9 asks.
        assert!((2..=9).contains(&asked), "{asked} asks");

        let mut asked = 0;
        let answer: Result<(), TxnError> = retry_while_completing(|| {
            asked += 1;
            Err(TxnError::CoordinatorLoadInProgress)
        });
        assert_eq!(answer, Err(TxnError::CoordinatorLoadInProgress));
        assert_eq!(asked, 1, "only CONCURRENT_TRANSACTIONS is asked again here");
    }

    fn batch(codec: Compression, key: &[u8]) -> Vec<u8> {
        let mut b = BatchBuilder::new().compression(codec);
        b.push(1_000, Some(key), Some(b"value"), &[]);
        b.push(1_001, Some(key), Some(b"value"), &[]);
        b.finish()
    }

    fn crc_checks() -> u64 {
        CRC_CHECKS.with(|n| n.get())
    }

    /// The network produce path of one partition, as `produce_partition` runs it:
    /// validation, the compacted topic's key check and the append (through the topic's
    /// codec); the CRC-32C checks it made.
    fn produce_and_count(p: &crate::topic::Partition, records: &[u8]) -> u64 {
        let config = p.log_config();
        let before = crc_checks();
        let (valid, _) = validate(p.topic(), p.index(), records, &config).expect("valid");
        assert!(keyless_records(p.topic(), p.index(), &valid, &config).is_none());
        PartitionOps::append(p, &valid).expect("append");
        crc_checks() - before
    }

    #[test]
    fn a_produced_batch_has_its_crc_checked_once_whatever_the_topic() {
        let dir = tempfile::tempdir().unwrap();
        let broker = Broker::open(dir.path()).unwrap();
        broker.create_topic("plain", 1, TopicConfig::new()).unwrap();
        broker
            .create_topic(
                "zstd",
                1,
                TopicConfig::new().set("compression.type", "zstd"),
            )
            .unwrap();
        broker
            .create_topic(
                "compact",
                1,
                TopicConfig::new().set("cleanup.policy", "compact"),
            )
            .unwrap();
        // Two batches in one request, the second in another codec than the first.
        let mut records = batch(Compression::None, b"k");
        records.extend(batch(Compression::Gzip, b"k"));
        for topic in ["plain", "zstd", "compact"] {
            let p = broker.topic(topic).unwrap().partition(0).unwrap();
            assert_eq!(
                produce_and_count(&p, &records),
                2,
                "{topic}: one check a batch"
            );
            assert_eq!(p.log().log_end_offset(), 4, "{topic}");
        }
        // The zstd topic stored both batches rewritten in its codec.
        let p = broker.topic("zstd").unwrap().partition(0).unwrap();
        let stored = p.read(0, 1 << 20).unwrap();
        for b in crate::record::batches(&stored) {
            assert_eq!(b.unwrap().codec().unwrap(), Compression::Zstd);
        }
    }

    #[test]
    fn a_corrupt_batch_is_refused_once_with_corrupt_message_and_nothing_is_appended() {
        let dir = tempfile::tempdir().unwrap();
        let broker = Broker::open(dir.path()).unwrap();
        broker.create_topic("t", 1, TopicConfig::new()).unwrap();
        let p = broker.topic("t").unwrap().partition(0).unwrap();
        let first = batch(Compression::None, b"k");
        let mut records = first.clone();
        records.extend(batch(Compression::None, b"k"));
        let last = records.len() - 1;
        records[last] ^= 0x40;
        let before = crc_checks();
        let Err((code, message)) = validate("t", 0, &records, &p.log_config()) else {
            panic!("a flipped bit passed validation");
        };
        assert_eq!(crc_checks() - before, 2);
        assert_eq!(code, ResponseError::CorruptMessage.code());
        assert!(message.contains("produce request for t-0"), "{message}");
        assert!(message.contains("CRC-32C mismatch"), "{message}");
        assert!(
            message.contains(&first.len().to_string()),
            "the position: {message}"
        );
        assert_eq!(p.log().log_end_offset(), 0);
    }
}
