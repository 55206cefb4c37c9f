//! DescribeGroups (key 15), versions 0-5: state, protocol, generation's members with
//! their ids (instance ids from v4), clients, subscriptions and assignments. A share
//! group's id answers GROUP_ID_NOT_FOUND, as Kafka's (it is not a classic group).

use crate::server::error_codes::KafkaCode;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::{DescribeGroupsRequest, DescribeGroupsResponse, GroupId};

use super::{Ctx, Fatal, Reply, Request, kstr};
use crate::security::acl::{AclOperation, ResourceType};
use crate::security::denied_code;

/// `authorized_operations` when the client did not ask for them (Kafka's INT32_MIN).
const OPERATIONS_NOT_REQUESTED: i32 = i32::MIN;

pub(super) fn handle(ctx: &Ctx<'_>, req: &mut Request) -> Result<Reply, Fatal> {
    let request: DescribeGroupsRequest = req.decode()?;
    let groups = ctx.backend().groups();
    let described = request
        .groups
        .iter()
        .map(|id| {
            let base = DescribedGroup::default()
                .with_group_id(GroupId(kstr(id.0.to_string())))
                .with_authorized_operations(OPERATIONS_NOT_REQUESTED);
            if !ctx.allowed(AclOperation::Describe, ResourceType::Group, id) {
                return base
                    .with_error_code(denied_code(ResourceType::Group))
                    .with_group_state(kstr(""));
            }
            match groups.describe_group(id) {
                // Kafka answers a share group's id as it does every group not classic.
                Ok(d) if d.state.as_str() == "Dead" && is_share_group(ctx, id) => base
                    .with_error_code(ResponseError::GroupIdNotFound.code())
                    .with_group_state(kstr("")),
                Ok(d) => base
                    .with_group_state(kstr(d.state.as_str()))
                    .with_protocol_type(kstr(d.protocol_type))
                    .with_protocol_data(kstr(d.protocol_data))
                    .with_members(
                        d.members
                            .into_iter()
                            .map(|m| {
                                DescribedGroupMember::default()
                                    .with_member_id(kstr(m.member_id))
                                    .with_group_instance_id(m.group_instance_id.map(kstr))
                                    .with_client_id(kstr(m.client_id))
                                    .with_client_host(kstr(m.client_host))
                                    .with_member_metadata(m.metadata.into())
                                    .with_member_assignment(m.assignment.into())
                            })
                            .collect(),
                    ),
                Err(e) => base.with_error_code(e.code()).with_group_state(kstr("")),
            }
        })
        .collect();
    req.respond(&DescribeGroupsResponse::default().with_groups(described))
}

/// True when the share coordinator of this node knows `group`.
fn is_share_group(ctx: &Ctx<'_>, group: &str) -> bool {
    ctx.backend().share_groups().iter().any(|(g, _)| g == group)
}
