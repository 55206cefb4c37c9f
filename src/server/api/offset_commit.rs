//! OffsetCommit (key 8), versions 2-7, stored by the broker's group coordinator in
//! `__consumer_offsets`. A partition that does not exist answers
//! UNKNOWN_TOPIC_OR_PARTITION.

use crate::server::error_codes::KafkaCode;

use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::{OffsetCommitRequest, OffsetCommitResponse};

use super::{Ctx, Fatal, Reply, Request};
use crate::security::acl::{AclOperation, ResourceType};
use crate::security::denied_code;

pub(super) fn handle(ctx: &Ctx<'_>, req: &mut Request) -> Result<Reply, Fatal> {
    let request: OffsetCommitRequest = req.decode()?;
    let version = req.version();
    let offsets = request
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(move |p| crate::coordinator::CommitOffset {
                    topic: t.name.0.to_string(),
                    partition: p.partition_index,
                    offset: p.committed_offset,
                    leader_epoch: if version >= 6 {
                        p.committed_leader_epoch
                    } else {
                        -1
                    },
                    metadata: p.committed_metadata.as_ref().map(|m| m.to_string()),
                })
        })
        .collect();
    let mut commit = crate::coordinator::OffsetCommitRequest {
        group_id: request.group_id.0.to_string(),
        generation_id: request.generation_id_or_member_epoch,
        member_id: request.member_id.to_string(),
        group_instance_id: request.group_instance_id.map(|s| s.to_string()),
        offsets,
    };
    // Read on the group, then on each topic (TOPIC_AUTHORIZATION_FAILED per partition).
    let group_ok = ctx.allowed(AclOperation::Read, ResourceType::Group, &commit.group_id);
    let mut denied = Vec::new();
    commit.offsets.retain(|o| {
        let ok = group_ok && ctx.allowed(AclOperation::Read, ResourceType::Topic, &o.topic);
        let code = if group_ok {
            ResourceType::Topic
        } else {
            ResourceType::Group
        };
        if !ok {
            denied.push((o.topic.clone(), o.partition, denied_code(code)));
        }
        ok
    });
    let all: Vec<(String, i32)> = commit
        .offsets
        .iter()
        .map(|o| (o.topic.clone(), o.partition))
        .collect();
    // A group-level refusal applies to every partition of the request.
    let results: Vec<(String, i32, i16)> = match ctx.backend().groups().offset_commit(commit) {
        Ok(results) => results
            .into_iter()
            .map(|r| (r.topic, r.partition, r.result.err().map_or(0, |e| e.code())))
            .collect(),
        Err(e) => all.into_iter().map(|(t, p)| (t, p, e.code())).collect(),
    };
    let topics = super::by_topic(
        results.into_iter().chain(denied),
        |index, code| {
            OffsetCommitResponsePartition::default()
                .with_partition_index(index)
                .with_error_code(code)
        },
        |name, partitions| {
            OffsetCommitResponseTopic::default()
                .with_name(name)
                .with_partitions(partitions)
        },
    );
    req.respond(&OffsetCommitResponse::default().with_topics(topics))
}
