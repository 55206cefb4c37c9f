//! DescribeGroups (key 15), versions 0-6: state, protocol, generation's members with
//! their ids (instance ids from v4), clients, subscriptions and assignments. A group
//! that is not a classic one (a consumer-protocol or share group) or that does not
//! exist is described as Kafka 4 does: `Dead` with no error before v6, and
//! GROUP_ID_NOT_FOUND with a message from v6 (KIP-1043). Kafka's admin client then
//! asks ConsumerGroupDescribe.

use crate::coordinator::GroupError;
use crate::server::error_codes::KafkaCode;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::{DescribeGroupsRequest, DescribeGroupsResponse, GroupId};

use super::{Ctx, Fatal, Reply, Request, kstr};
use crate::security::acl::{AclOperation, ResourceType};
use crate::security::denied_code;

/// `authorized_operations` when the client did not ask for them (Kafka's INT32_MIN).
const OPERATIONS_NOT_REQUESTED: i32 = i32::MIN;

/// The first version that answers GROUP_ID_NOT_FOUND (with a message) for a group that
/// is not a classic group; older ones describe it as `Dead` without an error.
const NOT_FOUND_VERSION: i16 = 6;

/// A group DescribeGroups does not describe, by version: `Dead`, and from v6
/// GROUP_ID_NOT_FOUND with `message`.
fn not_classic(base: DescribedGroup, version: i16, message: String) -> DescribedGroup {
    let dead = base.with_group_state(kstr("Dead"));
    if version >= NOT_FOUND_VERSION {
        dead.with_error_code(ResponseError::GroupIdNotFound.code())
            .with_error_message(Some(kstr(message)))
    } else {
        dead
    }
}

pub(super) fn handle(ctx: &Ctx<'_>, req: &mut Request) -> Result<Reply, Fatal> {
    let request: DescribeGroupsRequest = req.decode()?;
    let version = req.version();
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
                Ok(d) if d.state.as_str() == "Dead" => {
                    let message = if is_share_group(ctx, id) {
                        format!("Group {} is not a classic group.", id.0)
                    } else {
                        format!("Group {} not found.", id.0)
                    };
                    not_classic(base, version, message)
                }
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
                // A consumer-protocol group.
                Err(GroupError::GroupIdNotFound) => not_classic(
                    base,
                    version,
                    format!("Group {} is not a classic group.", id.0),
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
