//! AlterShareGroupOffsets (key 91), version 0: sets the start offset of share-partitions
//! of a share group with no member (KIP-932; what `kafka-share-groups --reset-offsets`
//! sends): each starts there again with no record in flight, at the next state epoch.
//! Needs Read on the group (GROUP_AUTHORIZATION_FAILED) and on each topic
//! (TOPIC_AUTHORIZATION_FAILED for its partitions). A group with members answers
//! NON_EMPTY_GROUP, one with neither members nor state GROUP_ID_NOT_FOUND; a refusal of
//! the group (these, or its authorization) is answered at the top level alone, with no
//! topic, as Kafka's error response. A partition that does not exist is
//! UNKNOWN_TOPIC_OR_PARTITION, a negative start offset INVALID_REQUEST.

use kafka_protocol::messages::alter_share_group_offsets_response::{
    AlterShareGroupOffsetsResponsePartition as Partition,
    AlterShareGroupOffsetsResponseTopic as Topic,
};
use kafka_protocol::messages::{
    AlterShareGroupOffsetsRequest, AlterShareGroupOffsetsResponse, TopicName,
};

use super::share_group_offsets::{Refusal, check_partition, coordinator, topics};
use super::{Ctx, Fatal, Reply, Request, error_code, kstr};
use crate::security::acl::AclOperation;
use crate::server::topic_ids::topic_id;

pub(super) fn handle(ctx: &Ctx<'_>, req: &mut Request) -> Result<Reply, Fatal> {
    let request: AlterShareGroupOffsetsRequest = req.decode()?;
    let group = request.group_id.0.to_string();
    let known = topics(ctx);
    // Each partition asked: its refusal, or None to be altered.
    let mut asked: Vec<(String, i32, i64, Option<Refusal>)> = Vec::new();
    for t in &request.topics {
        let name = t.topic_name.0.to_string();
        for p in &t.partitions {
            let checked = check_partition(
                ctx,
                &known,
                AclOperation::Read,
                &name,
                Some(p.partition_index),
            );
            asked.push((
                name.clone(),
                p.partition_index,
                p.start_offset,
                checked.err(),
            ));
        }
    }
    let mut top: Option<Refusal> = None;
    match coordinator(ctx, &group, AclOperation::Read) {
        Err(r) => top = Some(r),
        Ok(share) => {
            let valid: Vec<(String, i32, i64)> = asked
                .iter()
                .filter(|a| a.3.is_none())
                .map(|(t, p, o, _)| (t.clone(), *p, *o))
                .collect();
            match share.alter_share_offsets(&group, &valid) {
                Err(e) => top = Some((error_code(&e), e.to_string())),
                Ok(results) => {
                    let mut results = results.into_iter();
                    for a in asked.iter_mut().filter(|a| a.3.is_none()) {
                        if let Some(Err(e)) = results.next() {
                            a.3 = Some((error_code(&e), e.to_string()));
                        }
                    }
                }
            }
        }
    }
    // A group-level refusal is the top-level code alone, with no partition (Kafka's
    // error response).
    if let Some((code, message)) = top {
        return req.respond(
            &AlterShareGroupOffsetsResponse::default()
                .with_error_code(code)
                .with_error_message(Some(kstr(message))),
        );
    }
    let backend = ctx.backend();
    let mut by_topic: std::collections::BTreeMap<String, Vec<Partition>> = Default::default();
    for (t, p, _, refusal) in asked {
        let (code, message) = refusal.map_or((0, None), |(c, m)| (c, Some(kstr(m))));
        by_topic.entry(t).or_default().push(
            Partition::default()
                .with_partition_index(p)
                .with_error_code(code)
                .with_error_message(message),
        );
    }
    let responses = by_topic
        .into_iter()
        .map(|(t, partitions)| {
            Topic::default()
                .with_topic_id(topic_id(backend, &t))
                .with_topic_name(TopicName(kstr(t)))
                .with_partitions(partitions)
        })
        .collect();
    req.respond(&AlterShareGroupOffsetsResponse::default().with_responses(responses))
}
