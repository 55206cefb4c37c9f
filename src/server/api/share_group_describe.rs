//! ShareGroupDescribe (key 77), version 1: share groups (KIP-932) with their epoch,
//! assignor ("simple") and members (subscriptions and assignments, topics by id and
//! name). Needs Describe on the group; an id no share group has answers
//! GROUP_ID_NOT_FOUND, as Kafka.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::share_group_describe_response::{
    Assignment, DescribedGroup, Member, TopicPartitions,
};
use kafka_protocol::messages::{
    GroupId, ShareGroupDescribeRequest, ShareGroupDescribeResponse, TopicName,
};

use super::{Ctx, Fatal, Reply, Request, error_code, kstr};
use crate::coordinator::ShareMemberState;
use crate::security::acl::{AclOperation, ResourceType};
use crate::security::denied_code;
use crate::server::backend::Backend;
use crate::server::topic_ids::topic_id;

/// `authorized_operations` when the client did not ask for them (Kafka's INT32_MIN).
const OPERATIONS_NOT_REQUESTED: i32 = i32::MIN;

fn member(backend: &dyn Backend, m: ShareMemberState) -> Member {
    Member::default()
        .with_member_id(kstr(m.member_id))
        .with_rack_id(m.rack.map(kstr))
        .with_member_epoch(m.member_epoch)
        .with_client_id(kstr(m.client_id))
        .with_client_host(kstr(m.client_host))
        .with_subscribed_topic_names(m.topics.into_iter().map(|t| TopicName(kstr(t))).collect())
        .with_assignment(
            Assignment::default().with_topic_partitions(
                m.assigned
                    .into_iter()
                    .map(|(t, p)| {
                        TopicPartitions::default()
                            .with_topic_id(topic_id(backend, &t))
                            .with_topic_name(TopicName(kstr(t)))
                            .with_partitions(p)
                    })
                    .collect(),
            ),
        )
}

pub(super) fn handle(ctx: &Ctx<'_>, req: &mut Request) -> Result<Reply, Fatal> {
    let request: ShareGroupDescribeRequest = req.decode()?;
    let backend = ctx.backend();
    let share = backend.share();
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
            let share = match &share {
                Ok(s) => s,
                Err(e) => return base.with_error_code(error_code(e)),
            };
            if !share.list_groups().iter().any(|g| g == id.as_str()) {
                return base
                    .with_error_code(ResponseError::GroupIdNotFound.code())
                    .with_error_message(Some(kstr(format!(
                        "group {} is not a share group",
                        &**id
                    ))));
            }
            let (epoch, members) = share.describe_members(id);
            let state = if members.is_empty() {
                "Empty"
            } else {
                "Stable"
            };
            base.with_group_state(kstr(state))
                .with_group_epoch(epoch)
                .with_assignment_epoch(epoch)
                .with_assignor_name(kstr("simple"))
                .with_members(members.into_iter().map(|m| member(backend, m)).collect())
        })
        .collect();
    req.respond(&ShareGroupDescribeResponse::default().with_groups(described))
}
