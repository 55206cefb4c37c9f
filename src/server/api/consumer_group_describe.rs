//! ConsumerGroupDescribe (key 69), versions 0-1: consumer-protocol groups (KIP-848)
//! with their epochs, assignor and members (subscriptions, current and target
//! assignments, topics by id and name). Needs Describe on the group; a group that is
//! not a consumer-protocol group answers GROUP_ID_NOT_FOUND, as Kafka.

use kafka_protocol::messages::consumer_group_describe_response::{
    Assignment, DescribedGroup, Member, TopicPartitions,
};
use kafka_protocol::messages::{
    ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, GroupId, TopicName,
};

use super::{Ctx, Fatal, Reply, Request, kstr};
use crate::coordinator::{ConsumerMemberDescription, TopicPartitionList};
use crate::security::acl::{AclOperation, ResourceType};
use crate::security::denied_code;
use crate::server::backend::Backend;
use crate::server::error_codes::KafkaCode;
use crate::server::topic_ids::topic_id;

/// `authorized_operations` when the client did not ask for them (Kafka's INT32_MIN).
const OPERATIONS_NOT_REQUESTED: i32 = i32::MIN;

/// `member_type` (v1, KIP-1099) of a member that uses the classic protocol in a
/// consumer-protocol group.
const CLASSIC_MEMBER_TYPE: i8 = 0;
/// `member_type` of a member that uses the consumer protocol.
const CONSUMER_MEMBER_TYPE: i8 = 1;

fn assignment(backend: &dyn Backend, list: TopicPartitionList) -> Assignment {
    Assignment::default().with_topic_partitions(
        list.into_iter()
            .map(|(t, p)| {
                TopicPartitions::default()
                    .with_topic_id(topic_id(backend, &t))
                    .with_topic_name(TopicName(kstr(t)))
                    .with_partitions(p)
            })
            .collect(),
    )
}

fn member(backend: &dyn Backend, m: ConsumerMemberDescription) -> Member {
    let member_type = if m.classic {
        CLASSIC_MEMBER_TYPE
    } else {
        CONSUMER_MEMBER_TYPE
    };
    Member::default()
        .with_member_id(kstr(m.member_id))
        .with_instance_id(m.instance_id.map(kstr))
        .with_rack_id(m.rack_id.map(kstr))
        .with_member_epoch(m.member_epoch)
        .with_client_id(kstr(m.client_id))
        .with_client_host(kstr(m.client_host))
        .with_subscribed_topic_names(
            m.subscribed_topic_names
                .into_iter()
                .map(|t| TopicName(kstr(t)))
                .collect(),
        )
        .with_subscribed_topic_regex(m.subscribed_topic_regex.map(kstr))
        .with_assignment(assignment(backend, m.assignment))
        .with_target_assignment(assignment(backend, m.target_assignment))
        .with_member_type(member_type)
}

pub(super) fn handle(ctx: &Ctx<'_>, req: &mut Request) -> Result<Reply, Fatal> {
    let request: ConsumerGroupDescribeRequest = req.decode()?;
    let groups = ctx.backend().groups();
    let described = request
        .group_ids
        .iter()
        .map(|id| {
            let base = DescribedGroup::default()
                .with_group_id(GroupId(kstr(id.0.to_string())))
                .with_authorized_operations(OPERATIONS_NOT_REQUESTED);
            if !ctx.allowed(AclOperation::Describe, ResourceType::Group, id) {
                return base.with_error_code(denied_code(ResourceType::Group));
            }
            match groups.consumer_group_describe(id) {
                Ok(d) => base
                    .with_group_state(kstr(d.state.as_str()))
                    .with_group_epoch(d.group_epoch)
                    .with_assignment_epoch(d.assignment_epoch)
                    .with_assignor_name(kstr(d.assignor_name))
                    .with_members(
                        d.members
                            .into_iter()
                            .map(|m| member(ctx.backend(), m))
                            .collect(),
                    ),
                Err(e) => base
                    .with_error_code(e.code())
                    .with_error_message(Some(kstr(e.to_string()))),
            }
        })
        .collect();
    req.respond(&ConsumerGroupDescribeResponse::default().with_groups(described))
}
