//! OffsetCommit (key 8), versions 0-9 (v9's generation is the classic group's), stored
//! by the broker's group coordinator in `__consumer_offsets`. A partition that does not
//! exist answers UNKNOWN_TOPIC_OR_PARTITION. v1 gives each partition a commit timestamp
//! (-1: now); v0, whose offsets Kafka kept in ZooKeeper, is answered UNSUPPORTED_VERSION
//! per partition, as Kafka 3.9 without ZooKeeper does.

use crate::server::error_codes::KafkaCode;
use std::collections::BTreeMap;

use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::{OffsetCommitRequest, OffsetCommitResponse, TopicName};

use super::{Answer, Ctx, Fatal, Reply, Request, kstr, legacy};
use crate::security::acl::{AclOperation, ResourceType};
use crate::security::denied_code;
use kafka_protocol::ResponseError;

pub(super) fn handle(ctx: &Ctx<'_>, req: &mut Request) -> Result<Reply, Fatal> {
    match start(ctx, req)? {
        Answer::Now(reply) => Ok(reply),
        Answer::Later(finish) => finish(),
    }
}

/// The request handled up to the append of its batch to `__consumer_offsets` (the
/// connection may read and start the client's next commit meanwhile): the answer, or
/// what waits for the in-sync replicas and then answers.
pub(super) fn start(ctx: &Ctx<'_>, req: &mut Request) -> Result<Answer, Fatal> {
    let version = req.version();
    // v0-1: their own layout (v1's per-partition commit timestamps); v2+: the crate's.
    let (request, timestamps) = if version < 2 {
        legacy::offset_commit_request(&req.body, version).map_err(|e| {
            Fatal(format!(
                "cannot decode OffsetCommit v{version} request: {e}"
            ))
        })?
    } else {
        (req.decode::<OffsetCommitRequest>()?, Vec::new())
    };
    if version == 0 {
        // Version 0 stored offsets in ZooKeeper: Kafka 3.9 without ZooKeeper answers
        // UNSUPPORTED_VERSION for each partition, and so does tidelog.
        let code = ResponseError::UnsupportedVersion.code();
        let all = request.topics.iter().flat_map(|t| {
            t.partitions
                .iter()
                .map(move |p| (t.name.0.to_string(), p.partition_index, code))
        });
        return req.respond(&response(all.collect())).map(Answer::Now);
    }
    let mut timestamps = timestamps.into_iter();
    let offsets = request
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(move |p| (t, p)))
        .map(|(t, p)| crate::coordinator::CommitOffset {
            topic: t.name.0.to_string(),
            partition: p.partition_index,
            offset: p.committed_offset,
            leader_epoch: if version >= 6 {
                p.committed_leader_epoch
            } else {
                -1
            },
            metadata: p.committed_metadata.as_ref().map(|m| m.to_string()),
            // v1's own commit time, -1 for the time of the commit.
            commit_timestamp: timestamps.next().filter(|&ts| ts != -1),
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
    let started = match ctx.backend().groups().offset_commit_started(commit) {
        Ok(started) => started,
        Err(e) => {
            let refused = all.into_iter().map(|(t, p)| (t, p, e.code()));
            return req
                .respond(&response(refused.chain(denied).collect()))
                .map(Answer::Now);
        }
    };
    // The answer needs only the header once the body is decoded.
    let answered = Request {
        header: req.header.clone(),
        body: bytes::Bytes::new(),
    };
    Ok(Answer::Later(Box::new(move || {
        let results = started
            .finish()
            .into_iter()
            .map(|r| (r.topic, r.partition, r.result.err().map_or(0, |e| e.code())));
        answered.respond(&response(results.chain(denied).collect()))
    })))
}

/// The response: each (topic, partition, error code), grouped by topic.
fn response(results: Vec<(String, i32, i16)>) -> OffsetCommitResponse {
    let mut by_topic: BTreeMap<String, Vec<OffsetCommitResponsePartition>> = BTreeMap::new();
    for (topic, partition, code) in results {
        by_topic.entry(topic).or_default().push(
            OffsetCommitResponsePartition::default()
                .with_partition_index(partition)
                .with_error_code(code),
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
    OffsetCommitResponse::default().with_topics(topics)
}
