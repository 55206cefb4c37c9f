//! OffsetDelete (key 47), version 0: deletes a group's committed offsets for some
//! partitions; GROUP_SUBSCRIBED_TO_TOPIC for a topic a live member subscribes to,
//! GROUP_ID_NOT_FOUND for an unknown group. As in Kafka, Delete on the group is checked
//! first (GROUP_AUTHORIZATION_FAILED for the whole request), then per partition Read on
//! its topic (TOPIC_AUTHORIZATION_FAILED) and that it exists (UNKNOWN_TOPIC_OR_PARTITION).

use crate::server::error_codes::KafkaCode;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::{OffsetDeleteRequest, OffsetDeleteResponse, TopicName};

use super::{Ctx, Fatal, Reply, Request, kstr};
use crate::security::acl::{AclOperation, ResourceType};
use crate::security::denied_code;

pub(super) fn handle(ctx: &Ctx<'_>, req: &mut Request) -> Result<Reply, Fatal> {
    let request: OffsetDeleteRequest = req.decode()?;
    let partitions: Vec<(String, i32)> = request
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(move |p| (t.name.0.to_string(), p.partition_index))
        })
        .collect();
    if !ctx.allowed(AclOperation::Delete, ResourceType::Group, &request.group_id) {
        let code = denied_code(ResourceType::Group);
        return req.respond(&OffsetDeleteResponse::default().with_error_code(code));
    }
    let (partitions, denied): (Vec<_>, Vec<_>) = partitions
        .into_iter()
        .partition(|(t, _)| ctx.allowed(AclOperation::Read, ResourceType::Topic, t));
    let (partitions, unknown): (Vec<_>, Vec<_>) = partitions.into_iter().partition(|(t, p)| {
        ctx.backend()
            .partition_count(t)
            .is_some_and(|count| (0..count).contains(p))
    });
    let results = match ctx
        .backend()
        .groups()
        .offset_delete(&request.group_id, &partitions)
    {
        Ok(results) => results,
        Err(e) => return req.respond(&OffsetDeleteResponse::default().with_error_code(e.code())),
    };
    let mut topics: Vec<OffsetDeleteResponseTopic> = Vec::new();
    let refused = denied
        .into_iter()
        .map(|p| (p, Err(denied_code(ResourceType::Topic))))
        .chain(
            unknown
                .into_iter()
                .map(|p| (p, Err(ResponseError::UnknownTopicOrPartition.code()))),
        );
    let done = partitions
        .into_iter()
        .zip(results.into_iter().map(|r| r.map_err(|e| e.code())));
    for ((topic, partition), result) in done.chain(refused) {
        let p = OffsetDeleteResponsePartition::default()
            .with_partition_index(partition)
            .with_error_code(result.err().unwrap_or(0));
        match topics.iter_mut().find(|t| t.name.0.as_str() == topic) {
            Some(t) => t.partitions.push(p),
            None => topics.push(
                OffsetDeleteResponseTopic::default()
                    .with_name(TopicName(kstr(topic)))
                    .with_partitions(vec![p]),
            ),
        }
    }
    req.respond(&OffsetDeleteResponse::default().with_topics(topics))
}
