//! OffsetFetch (key 9), versions 0-9: a group's committed offsets from the broker's
//! group coordinator (all of them when the request names no topics, v2+). v0, which
//! read Kafka's offsets in ZooKeeper, is answered UNSUPPORTED_VERSION per partition, as
//! Kafka 3.9 without ZooKeeper does. With `require_stable` (v7+, KIP-447), a partition
//! for which a transaction has an offset pending answers UNSTABLE_OFFSET_COMMIT instead
//! of an offset. v8 asks for several groups at once, each answered with its own error
//! code; v9 names the member asking (KIP-848), whose epoch in a consumer-protocol group
//! must be its current one (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH).
//!
//! A refusal of the whole group (GROUP_AUTHORIZATION_FAILED, the coordinator's errors)
//! is the top-level error code from v2 (the group's from v8); v1 has none, so there
//! every partition asked for carries it, as Kafka answers.

use crate::server::error_codes::KafkaCode;
use std::collections::BTreeMap;

use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{GroupId, OffsetFetchRequest, OffsetFetchResponse, TopicName};

use super::{Ctx, Fatal, Reply, Request, kstr};
use crate::security::acl::{AclOperation, ResourceType};
use crate::security::denied_code;

/// The first version that asks for several groups at once.
const GROUPS_SINCE: i16 = 8;

/// A group's answer: its partitions by topic name, or the group's error code.
type GroupAnswer = Result<BTreeMap<String, Vec<OffsetFetchResponsePartition>>, i16>;

pub(super) fn handle(ctx: &Ctx<'_>, req: &mut Request) -> Result<Reply, Fatal> {
    let request: OffsetFetchRequest = req.decode()?;
    let version = req.version();
    if version >= GROUPS_SINCE {
        let groups = request
            .groups
            .iter()
            .map(|g| {
                let wanted = g.topics.as_ref().map(|topics| {
                    wanted_of(topics.iter().map(|t| (&t.name, &t.partition_indexes)))
                });
                let member = (g.member_id.as_deref(), g.member_epoch);
                let answer = fetch_group(ctx, &g.group_id, wanted, request.require_stable, member);
                group_response(g.group_id.clone(), answer)
            })
            .collect();
        return req.respond(&OffsetFetchResponse::default().with_groups(groups));
    }
    let wanted = request
        .topics
        .as_ref()
        .map(|topics| wanted_of(topics.iter().map(|t| (&t.name, &t.partition_indexes))));
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
    let require_stable = version >= 7 && request.require_stable;
    let answer = fetch_group(
        ctx,
        &request.group_id,
        wanted.clone(),
        require_stable,
        (None, -1),
    );
    match answer {
        Ok(by_topic) => req.respond(&OffsetFetchResponse::default().with_topics(topics(by_topic))),
        Err(code) => req.respond(&group_error(code)),
    }
}

/// The `(topic, partition)` pairs a request names.
fn wanted_of<'a>(
    topics: impl Iterator<Item = (&'a TopicName, &'a Vec<i32>)>,
) -> Vec<(String, i32)> {
    topics
        .flat_map(|(name, partitions)| partitions.iter().map(move |&p| (name.0.to_string(), p)))
        .collect()
}

/// One group's committed offsets of `wanted` (all when None), checked against the ACLs
/// and, for v9's `member` (id, epoch), the group's members.
fn fetch_group(
    ctx: &Ctx<'_>,
    group_id: &str,
    wanted: Option<Vec<(String, i32)>>,
    require_stable: bool,
    member: (Option<&str>, i32),
) -> GroupAnswer {
    if !ctx.allowed(AclOperation::Describe, ResourceType::Group, group_id) {
        return Err(denied_code(ResourceType::Group));
    }
    let groups = ctx.backend().groups();
    groups
        .check_offset_fetch(group_id, member.0, member.1)
        .map_err(|e| e.code())?;
    let answer = if require_stable {
        groups.offset_fetch_stable(group_id, wanted.as_deref())
    } else {
        groups
            .offset_fetch(group_id, wanted.as_deref())
            .map(|offsets| offsets.into_iter().map(Ok).collect())
    };
    let offsets = answer.map_err(|e| e.code())?;
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
                _ => return Err(e.code()),
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
    Ok(by_topic)
}

/// A group of a v8+ response.
fn group_response(group_id: GroupId, answer: GroupAnswer) -> OffsetFetchResponseGroup {
    let group = OffsetFetchResponseGroup::default().with_group_id(group_id);
    match answer {
        Err(code) => group.with_error_code(code),
        Ok(by_topic) => group.with_topics(
            by_topic
                .into_iter()
                .map(|(name, partitions)| {
                    OffsetFetchResponseTopics::default()
                        .with_name(TopicName(kstr(name)))
                        .with_partitions(
                            partitions
                                .into_iter()
                                .map(|p| {
                                    OffsetFetchResponsePartitions::default()
                                        .with_partition_index(p.partition_index)
                                        .with_committed_offset(p.committed_offset)
                                        .with_committed_leader_epoch(p.committed_leader_epoch)
                                        .with_metadata(p.metadata)
                                        .with_error_code(p.error_code)
                                })
                                .collect(),
                        )
                })
                .collect(),
        ),
    }
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
