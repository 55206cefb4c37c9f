//! OffsetCommit (key 8), versions 2-7, stored by the broker's group coordinator in
//! `__consumer_offsets`.

use std::collections::BTreeMap;

use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::{OffsetCommitRequest, OffsetCommitResponse, TopicName};

use super::{Ctx, Fatal, Reply, Request, kstr};

pub(super) fn handle(ctx: &Ctx<'_>, req: &mut Request) -> Result<Reply, Fatal> {
    let request: OffsetCommitRequest = req.decode()?;
    let version = req.version();
    let offsets = request
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(move |p| crate::CommitOffset {
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
    let commit = crate::OffsetCommitRequest {
        group_id: request.group_id.0.to_string(),
        generation_id: request.generation_id_or_member_epoch,
        member_id: request.member_id.to_string(),
        group_instance_id: request.group_instance_id.map(|s| s.to_string()),
        offsets,
    };
    let results = ctx.backend().groups().offset_commit(commit);
    let mut by_topic: BTreeMap<String, Vec<OffsetCommitResponsePartition>> = BTreeMap::new();
    for r in results {
        by_topic.entry(r.topic).or_default().push(
            OffsetCommitResponsePartition::default()
                .with_partition_index(r.partition)
                .with_error_code(r.error_code),
        );
    }
    let topics = by_topic
        .into_iter()
        .map(|(name, partitions)| {
            OffsetCommitResponseTopic::default()
                .with_name(TopicName(kstr(name)))
                .with_partitions(partitions)
        })
        .collect();
    req.respond(&OffsetCommitResponse::default().with_topics(topics))
}
