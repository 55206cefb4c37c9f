//! DeleteShareGroupOffsets (key 92), version 0: deletes the state of a share group's
//! share-partitions of whole topics (KIP-932; the group must have no member): the next
//! fetch of one starts as on a share-partition never read (`share.auto.offset.reset`).
//! Needs Delete on the group (GROUP_AUTHORIZATION_FAILED) and Read on each topic
//! (TOPIC_AUTHORIZATION_FAILED, with the zero topic id). A group with members answers
//! NON_EMPTY_GROUP, one with neither members nor state GROUP_ID_NOT_FOUND; a refusal of
//! the group (these, or its authorization) is answered at the top level alone, with no
//! topic, as Kafka's error response. A topic that does not exist is
//! UNKNOWN_TOPIC_OR_PARTITION.

use kafka_protocol::messages::delete_share_group_offsets_response::DeleteShareGroupOffsetsResponseTopic as Topic;
use kafka_protocol::messages::{
    DeleteShareGroupOffsetsRequest, DeleteShareGroupOffsetsResponse, TopicName,
};

use super::share_group_offsets::{Refusal, check_partition, coordinator, topics};
use super::{Ctx, Fatal, Reply, Request, error_code, kstr};
use crate::security::acl::{AclOperation, ResourceType};
use crate::server::topic_ids::topic_id;

pub(super) fn handle(ctx: &Ctx<'_>, req: &mut Request) -> Result<Reply, Fatal> {
    let request: DeleteShareGroupOffsetsRequest = req.decode()?;
    let group = request.group_id.0.to_string();
    let known = topics(ctx);
    let mut asked: Vec<(String, Option<Refusal>)> = request
        .topics
        .iter()
        .map(|t| {
            let name = t.topic_name.0.to_string();
            let checked = check_partition(ctx, &known, AclOperation::Read, &name, None);
            (name, checked.err())
        })
        .collect();
    let mut top: Option<Refusal> = None;
    match coordinator(ctx, &group, AclOperation::Delete) {
        Err(r) => top = Some(r),
        Ok(share) => {
            let partitions: Vec<(String, i32)> = asked
                .iter()
                .filter(|a| a.1.is_none())
                .flat_map(|(t, _)| (0..known[t]).map(move |p| (t.clone(), p)))
                .collect();
            match share.delete_share_offsets(&group, &partitions) {
                Err(e) => top = Some((error_code(&e), e.to_string())),
                Ok(results) => {
                    for ((t, _), r) in partitions.iter().zip(results) {
                        if let Err(e) = r
                            && let Some(a) = asked.iter_mut().find(|a| a.0 == *t && a.1.is_none())
                        {
                            a.1 = Some((error_code(&e), e.to_string()));
                        }
                    }
                }
            }
        }
    }
    // A group-level refusal is the top-level code alone, with no topic (Kafka's error
    // response).
    if let Some((code, message)) = top {
        return req.respond(
            &DeleteShareGroupOffsetsResponse::default()
                .with_error_code(code)
                .with_error_message(Some(kstr(message))),
        );
    }
    let backend = ctx.backend();
    let responses = asked
        .into_iter()
        .map(|(t, refusal)| {
            let (code, message) = refusal.map_or((0, None), |(c, m)| (c, Some(kstr(m))));
            // A topic the client may not read is named with Kafka's zero id.
            let id = if ctx.permits(AclOperation::Read, ResourceType::Topic, &t) {
                topic_id(backend, &t)
            } else {
                Default::default()
            };
            Topic::default()
                .with_topic_id(id)
                .with_topic_name(TopicName(kstr(t)))
                .with_error_code(code)
                .with_error_message(message)
        })
        .collect();
    req.respond(&DeleteShareGroupOffsetsResponse::default().with_responses(responses))
}
