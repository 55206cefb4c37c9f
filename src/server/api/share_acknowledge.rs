//! ShareAcknowledge (key 79), version 1: a share group member acknowledges records it
//! acquired through ShareFetch (1 accept, 2 release, 3 reject; 0 marks a gap, archived
//! as Kafka does) within its share session; epoch -1 closes the session, releasing
//! what the member still holds. Needs Read on the group. Each partition gets its own error code:
//! INVALID_RECORD_STATE when a record was not acquired by the member,
//! NOT_LEADER_OR_FOLLOWER on a cluster node that does not lead the partition,
//! UNKNOWN_TOPIC_ID for a topic id no topic has (one deleted since the fetch).

use std::collections::BTreeMap;
use std::time::Instant;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::share_acknowledge_response::{
    PartitionData, ShareAcknowledgeTopicResponse,
};
use kafka_protocol::messages::{ShareAcknowledgeRequest, ShareAcknowledgeResponse};

use super::{Ctx, Fatal, Reply, Request, error_code, kstr};
use crate::coordinator::{AcknowledgeType, ShareCoordinator};
use crate::error::ShareError;
use crate::security::acl::{AclOperation, ResourceType};
use crate::security::denied_code;
use crate::server::backend::Backend;
use crate::server::error_codes::KafkaCode;
use crate::server::topic_ids::{by_id, topic_id};

/// One partition's acknowledgement batches: `(first offset, last offset, types)`.
pub(super) type AckBatches = Vec<(i64, i64, Vec<i8>)>;

/// The acknowledge type of a gap: an offset with no record.
const GAP: i8 = 0;

/// The most offsets one acknowledgement batch may span: far more than a member can
/// hold acquired (`group.share.partition.max.record.locks`, 2000 by default), so a
/// request's batch cannot make the broker walk billions of offsets.
const MAX_ACK_SPAN: i64 = 1 << 20;

/// The acknowledgements of `batches`, one per offset: a batch with one type applies it
/// to every offset, else it has one type per offset. A gap (0: an acquired offset at
/// which the client found no record, e.g. one compacted away inside a batch) is
/// archived, as Kafka archives it: a rejection, never delivered again.
fn acknowledgements(batches: &AckBatches) -> Result<Vec<(i64, AcknowledgeType)>, ShareError> {
    let mut out = Vec::new();
    for (first, last, types) in batches {
        // Offsets far apart (or negative) overflow: no batch a client acquired.
        let n = last
            .checked_sub(*first)
            .and_then(|d| d.checked_add(1))
            .filter(|n| (1..=MAX_ACK_SPAN).contains(n));
        let Some(n) = n else {
            return Err(ShareError::InvalidRequest(format!(
                "acknowledgement batch {first}..={last} spans no offset or more than \
                 {MAX_ACK_SPAN}"
            )));
        };
        if *first < 0 || (types.len() != 1 && types.len() as i64 != n) {
            return Err(ShareError::InvalidRequest(format!(
                "acknowledgement batch {first}..={last} has {} types",
                types.len()
            )));
        }
        for (i, offset) in (*first..=*last).enumerate() {
            let id = if types.len() == 1 { types[0] } else { types[i] };
            let kind = match id {
                GAP => Some(AcknowledgeType::Reject),
                id => AcknowledgeType::from_id(id),
            };
            let kind = kind.ok_or_else(|| {
                ShareError::InvalidRequest(format!("acknowledge type {id} at offset {offset}"))
            })?;
            out.push((offset, kind));
        }
    }
    Ok(out)
}

/// Applies one partition's acknowledgements; the code and message of the first that
/// failed (0 when all succeeded).
pub(super) fn acknowledge(
    backend: &dyn Backend,
    share: &ShareCoordinator,
    group: &str,
    member: &str,
    (topic, partition): (&str, i32),
    batches: &AckBatches,
) -> (i16, Option<String>) {
    // Served by the partition's leader, which holds its share-partition.
    if let Err(e) = backend.partition(topic, partition) {
        return (error_code(&e), Some(e.to_string()));
    }
    let acks = match acknowledgements(batches) {
        Ok(a) => a,
        Err(e) => return (e.code(), Some(e.to_string())),
    };
    match share.acknowledge(group, member, topic, partition, &acks, Instant::now()) {
        Ok(results) => results
            .into_iter()
            .find_map(|(_, r)| r.err())
            .map_or((0, None), |e| (e.code(), Some(e.to_string()))),
        Err(e) => (error_code(&e), Some(e.to_string())),
    }
}

/// Group id and member id of a share request, both required.
pub(super) fn ids(
    group: Option<String>,
    member: Option<String>,
) -> Result<(String, String), ShareError> {
    match (group, member) {
        (Some(g), Some(m)) if !g.is_empty() && !m.is_empty() => Ok((g, m)),
        _ => Err(ShareError::InvalidRequest(
            "GroupId and MemberId must be set".into(),
        )),
    }
}

fn refusal(code: i16, message: String) -> ShareAcknowledgeResponse {
    ShareAcknowledgeResponse::default()
        .with_error_code(code)
        .with_error_message(Some(kstr(message)))
}

pub(super) fn handle(ctx: &Ctx<'_>, req: &mut Request) -> Result<Reply, Fatal> {
    let request: ShareAcknowledgeRequest = req.decode()?;
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
    if request.share_session_epoch == 0 {
        let e = ShareError::InvalidRequest("ShareAcknowledge needs an open share session".into());
        return req.respond(&refusal(e.code(), e.to_string()));
    }
    let backend = ctx.backend();
    let share = match backend.share() {
        Ok(s) => s,
        Err(e) => return req.respond(&refusal(error_code(&e), e.to_string())),
    };
    if let Err(e) = share.share_session(
        &group,
        &member,
        request.share_session_epoch,
        &[],
        &[],
        Instant::now(),
    ) {
        return req.respond(&refusal(error_code(&e), e.to_string()));
    }
    let names = crate::server::topic_ids::topics_with_counts(backend)
        .into_iter()
        .map(|(n, _)| n)
        .collect::<Vec<_>>();
    let ids = by_id(backend, names.iter());
    let mut by_topic: BTreeMap<String, Vec<PartitionData>> = BTreeMap::new();
    let mut unknown = Vec::new();
    for t in &request.topics {
        let Some(name) = ids.get(&t.topic_id) else {
            // A topic deleted since (or never known): each partition says so, as
            // Kafka answers it.
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    PartitionData::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(ResponseError::UnknownTopicId.code())
                        .with_error_message(Some(kstr(format!("no topic has id {}", t.topic_id))))
                })
                .collect();
            unknown.push(
                ShareAcknowledgeTopicResponse::default()
                    .with_topic_id(t.topic_id)
                    .with_partitions(partitions),
            );
            continue;
        };
        for p in &t.partitions {
            let (code, message) = if ctx.allowed(AclOperation::Read, ResourceType::Topic, name) {
                let batches: AckBatches = p
                    .acknowledgement_batches
                    .iter()
                    .map(|b| (b.first_offset, b.last_offset, b.acknowledge_types.clone()))
                    .collect();
                acknowledge(
                    backend,
                    share,
                    &group,
                    &member,
                    (name, p.partition_index),
                    &batches,
                )
            } else {
                (ResponseError::TopicAuthorizationFailed.code(), None)
            };
            by_topic.entry(name.clone()).or_default().push(
                PartitionData::default()
                    .with_partition_index(p.partition_index)
                    .with_error_code(code)
                    .with_error_message(message.map(kstr)),
            );
        }
    }
    if request.share_session_epoch == -1 {
        // The session's last request: what the member still holds goes back.
        if let Err(e) = share.release_held(&group, &member, Instant::now()) {
            return req.respond(&refusal(error_code(&e), e.to_string()));
        }
    }
    let responses = by_topic
        .into_iter()
        .map(|(t, partitions)| {
            ShareAcknowledgeTopicResponse::default()
                .with_topic_id(topic_id(backend, &t))
                .with_partitions(partitions)
        })
        .chain(unknown)
        .collect();
    req.respond(&ShareAcknowledgeResponse::default().with_responses(responses))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gap_is_archived_as_kafka_archives_it() {
        // Offsets 5..=7, one type each: accepted, a gap (no record there), rejected;
        // then a batch of gaps with one type.
        let batches: AckBatches = vec![(5, 7, vec![1, 0, 3]), (9, 10, vec![0])];
        let got = acknowledgements(&batches).unwrap();
        use AcknowledgeType::{Accept, Reject};
        assert_eq!(
            got,
            vec![
                (5, Accept),
                (6, Reject),
                (7, Reject),
                (9, Reject),
                (10, Reject)
            ]
        );
        let bad: AckBatches = vec![(5, 5, vec![4])];
        assert!(matches!(
            acknowledgements(&bad),
            Err(ShareError::InvalidRequest(_))
        ));
    }

    #[test]
    fn a_batch_over_no_offset_or_too_many_is_refused_not_walked() {
        for (first, last) in [
            (i64::MIN, i64::MAX), // overflows
            (0, i64::MAX),        // billions of offsets
            (0, MAX_ACK_SPAN),    // one too many
            (7, 6),               // none
            (-3, -1),             // no offset is negative
        ] {
            let batches: AckBatches = vec![(first, last, vec![1])];
            assert!(
                matches!(
                    acknowledgements(&batches),
                    Err(ShareError::InvalidRequest(_))
                ),
                "{first}..={last}"
            );
        }
        let widest: AckBatches = vec![(0, MAX_ACK_SPAN - 1, vec![1])];
        assert_eq!(
            acknowledgements(&widest).unwrap().len() as i64,
            MAX_ACK_SPAN
        );
    }
}
