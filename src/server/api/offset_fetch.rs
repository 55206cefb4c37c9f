//! OffsetFetch (key 9), versions 0-7: a group's committed offsets from the broker's
//! group coordinator (all of them when the request names no topics, v2+). v0, which
//! read Kafka's offsets in ZooKeeper, is answered UNSUPPORTED_VERSION per partition, as
//! Kafka 3.9 without ZooKeeper does. With `require_stable` (v7+, KIP-447), a partition
//! for which a transaction has an offset pending answers UNSTABLE_OFFSET_COMMIT instead
//! of an offset.
//!
//! A refusal of the whole group (GROUP_AUTHORIZATION_FAILED, the coordinator's errors)
//! is the top-level error code from v2; v1 has none, so there every partition asked for
//! carries it, as Kafka answers.

use crate::server::error_codes::KafkaCode;
use std::collections::BTreeMap;

use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponsePartition, OffsetFetchResponseTopic,
};
use kafka_protocol::messages::{OffsetFetchRequest, OffsetFetchResponse, TopicName};

use super::{Ctx, Fatal, Reply, Request, kstr};
use crate::security::acl::{AclOperation, ResourceType};
use crate::security::denied_code;

pub(super) fn handle(ctx: &Ctx<'_>, req: &mut Request) -> Result<Reply, Fatal> {
    let request: OffsetFetchRequest = req.decode()?;
    let wanted: Option<Vec<(String, i32)>> = request.topics.as_ref().map(|topics| {
        topics
            .iter()
            .flat_map(|t| {
                t.partition_indexes
                    .iter()
                    .map(move |&p| (t.name.0.to_string(), p))
            })
            .collect()
    });
    let version = req.version();
    let group_error = |code: i16| {
        if version >= 2 {
            return OffsetFetchResponse::default().with_error_code(code);
        }
        let mut by_topic: BTreeMap<String, Vec<OffsetFetchResponsePartition>> = BTreeMap::new();
        for (topic, partition) in wanted.iter().flatten() {
            by_topic.entry(topic.clone()).or_default().push(
                OffsetFetchResponsePartition::default()
                    .with_partition_index(*partition)
                    .with_committed_offset(-1)
                    .with_metadata(Some(kstr("")))
                    .with_error_code(code),
            );
        }
        OffsetFetchResponse::default().with_topics(topics(by_topic))
    };
    if version == 0 {
        // Version 0 read offsets from ZooKeeper: Kafka 3.9 without ZooKeeper answers
        // UNSUPPORTED_VERSION for each partition, and so does tidelog.
        return req.respond(&group_error(
            kafka_protocol::ResponseError::UnsupportedVersion.code(),
        ));
    }
    if !ctx.allowed(
        AclOperation::Describe,
        ResourceType::Group,
        &request.group_id,
    ) {
        return req.respond(&group_error(denied_code(ResourceType::Group)));
    }
    let groups = ctx.backend().groups();
    let answer = if version >= 7 && request.require_stable {
        groups.offset_fetch_stable(&request.group_id, wanted.as_deref())
    } else {
        groups
            .offset_fetch(&request.group_id, wanted.as_deref())
            .map(|offsets| offsets.into_iter().map(Ok).collect())
    };
    let offsets = match answer {
        Ok(offsets) => offsets,
        Err(e) => return req.respond(&group_error(e.code())),
    };
    let mut by_topic: BTreeMap<String, Vec<OffsetFetchResponsePartition>> = BTreeMap::new();
    for o in offsets {
        let (o, unstable) = match o {
            Ok(o) => (o, None),
            Err(e) => match &e {
                crate::coordinator::GroupError::UnstableOffsetCommit { topic, partition } => (
                    crate::coordinator::FetchedOffset {
                        topic: topic.clone(),
                        partition: *partition,
                        offset: -1,
                        leader_epoch: -1,
                        metadata: String::new(),
                    },
                    Some(e.code()),
                ),
                _ => return req.respond(&group_error(e.code())),
            },
        };
        // Describe on each topic: a named one answers TOPIC_AUTHORIZATION_FAILED, an
        // unnamed one (every offset of the group) is left out.
        let (code, offset) = match (
            ctx.permits(AclOperation::Describe, ResourceType::Topic, &o.topic),
            wanted.is_some(),
        ) {
            (true, _) => (unstable.unwrap_or(0), o.offset),
            (false, true) => (denied_code(ResourceType::Topic), -1),
            (false, false) => continue,
        };
        by_topic.entry(o.topic).or_default().push(
            OffsetFetchResponsePartition::default()
                .with_partition_index(o.partition)
                .with_error_code(code)
                .with_committed_offset(offset)
                .with_committed_leader_epoch(o.leader_epoch)
                .with_metadata(Some(kstr(o.metadata))),
        );
    }
    req.respond(&OffsetFetchResponse::default().with_topics(topics(by_topic)))
}

/// The response's topics from partitions grouped by topic name.
fn topics(
    by_topic: BTreeMap<String, Vec<OffsetFetchResponsePartition>>,
) -> Vec<OffsetFetchResponseTopic> {
    by_topic
        .into_iter()
        .map(|(name, partitions)| {
            OffsetFetchResponseTopic::default()
                .with_name(TopicName(kstr(name)))
                .with_partitions(partitions)
        })
        .collect()
}
