//! DescribeShareGroupOffsets (key 90), version 0: the start offset and leader epoch of
//! each share-partition of share groups (KIP-932), read from their state. Needs Describe
//! on the group (GROUP_AUTHORIZATION_FAILED) and on each topic
//! (TOPIC_AUTHORIZATION_FAILED for its partitions, and the zero topic id); a group with neither members nor
//! state answers GROUP_ID_NOT_FOUND, a partition that does not exist
//! UNKNOWN_TOPIC_OR_PARTITION, and a partition never read start offset -1, as Kafka.
//! Null topics: every share-partition of the group with a state, of the topics the
//! client may describe.

use kafka_protocol::messages::describe_share_group_offsets_request::DescribeShareGroupOffsetsRequestGroup;
use kafka_protocol::messages::describe_share_group_offsets_response::{
    DescribeShareGroupOffsetsResponseGroup as Group,
    DescribeShareGroupOffsetsResponsePartition as Partition,
    DescribeShareGroupOffsetsResponseTopic as Topic,
};
use kafka_protocol::messages::{
    DescribeShareGroupOffsetsRequest, DescribeShareGroupOffsetsResponse, TopicName,
};

use super::share_group_offsets::{check_partition, coordinator, topics};
use super::{Ctx, Fatal, Reply, Request, error_code, kstr};
use crate::coordinator::ShareStartOffset;
use crate::security::acl::{AclOperation, ResourceType};
use crate::server::topic_ids::topic_id;

pub(super) fn handle(ctx: &Ctx<'_>, req: &mut Request) -> Result<Reply, Fatal> {
    let request: DescribeShareGroupOffsetsRequest = req.decode()?;
    let groups = request.groups.iter().map(|g| describe(ctx, g)).collect();
    req.respond(&DescribeShareGroupOffsetsResponse::default().with_groups(groups))
}

fn describe(ctx: &Ctx<'_>, g: &DescribeShareGroupOffsetsRequestGroup) -> Group {
    let id = g.group_id.0.to_string();
    let base = Group::default().with_group_id(g.group_id.clone());
    let refused = |(code, message): (i16, String)| {
        base.clone()
            .with_error_code(code)
            .with_error_message(Some(kstr(message)))
    };
    let share = match coordinator(ctx, &id, AclOperation::Describe) {
        Ok(s) => s,
        Err(r) => return refused(r),
    };
    let known = topics(ctx);
    let names: Vec<String> = known.keys().cloned().collect();
    let offsets = match share.share_offsets(&id, &names) {
        Ok(o) => o,
        Err(e) => return refused((error_code(&e), e.to_string())),
    };
    let backend = ctx.backend();
    // A topic the client may not describe is named with Kafka's zero id, not its own.
    let topic = |name: &str, partitions: Vec<Partition>| {
        let id = if ctx.permits(AclOperation::Describe, ResourceType::Topic, name) {
            topic_id(backend, name)
        } else {
            Default::default()
        };
        Topic::default()
            .with_topic_name(TopicName(kstr(name)))
            .with_topic_id(id)
            .with_partitions(partitions)
    };
    let found = |o: &ShareStartOffset| {
        Partition::default()
            .with_partition_index(o.partition)
            .with_start_offset(o.start_offset)
            .with_leader_epoch(o.leader_epoch)
    };
    let topics = match &g.topics {
        None => {
            let mut by_topic: std::collections::BTreeMap<&str, Vec<Partition>> = Default::default();
            for o in offsets
                .iter()
                .filter(|o| ctx.permits(AclOperation::Describe, ResourceType::Topic, &o.topic))
            {
                by_topic.entry(&o.topic).or_default().push(found(o));
            }
            by_topic
                .into_iter()
                .map(|(name, partitions)| topic(name, partitions))
                .collect()
        }
        Some(asked) => asked
            .iter()
            .map(|t| {
                let name = t.topic_name.0.as_str();
                let partitions = t
                    .partitions
                    .iter()
                    .map(|&p| {
                        let checked =
                            check_partition(ctx, &known, AclOperation::Describe, name, Some(p));
                        match checked {
                            Err((code, message)) => Partition::default()
                                .with_partition_index(p)
                                .with_start_offset(-1)
                                .with_leader_epoch(-1)
                                .with_error_code(code)
                                .with_error_message(Some(kstr(message))),
                            Ok(()) => offsets
                                .iter()
                                .find(|o| o.topic == name && o.partition == p)
                                .map_or_else(
                                    || {
                                        Partition::default()
                                            .with_partition_index(p)
                                            .with_start_offset(-1)
                                            .with_leader_epoch(-1)
                                    },
                                    found,
                                ),
                        }
                    })
                    .collect();
                topic(name, partitions)
            })
            .collect(),
    };
    base.with_topics(topics)
}
