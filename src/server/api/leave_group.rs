//! LeaveGroup (key 13), versions 0-5 (one member before v3, a list from v3, where a
//! static member may be named by its `group.instance.id` alone). An empty group id is
//! INVALID_GROUP_ID, as in Kafka.

use crate::server::error_codes::KafkaCode;
use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::{LeaveGroupRequest, LeaveGroupResponse};

use super::{Ctx, Fatal, Reply, Request, kstr};
use crate::coordinator::LeavingMember;
use crate::security::acl::{AclOperation, ResourceType};
use crate::security::denied_code;

pub(super) fn handle(ctx: &Ctx<'_>, req: &mut Request) -> Result<Reply, Fatal> {
    let request: LeaveGroupRequest = req.decode()?;
    if !ctx.allowed(AclOperation::Read, ResourceType::Group, &request.group_id) {
        return req.respond(
            &LeaveGroupResponse::default().with_error_code(denied_code(ResourceType::Group)),
        );
    }
    if request.group_id.is_empty() {
        let code = crate::coordinator::GroupError::InvalidGroupId(String::new()).code();
        return req.respond(&LeaveGroupResponse::default().with_error_code(code));
    }
    let members: Vec<LeavingMember> = if req.version() >= 3 {
        request
            .members
            .iter()
            .map(|m| LeavingMember {
                member_id: m.member_id.to_string(),
                group_instance_id: m.group_instance_id.as_ref().map(|s| s.to_string()),
            })
            .collect()
    } else {
        vec![LeavingMember {
            member_id: request.member_id.to_string(),
            group_instance_id: None,
        }]
    };
    let answer = ctx
        .backend()
        .groups()
        .leave_group(&request.group_id, &members);
    let results = match answer {
        Ok(results) => results,
        Err(e) => return req.respond(&LeaveGroupResponse::default().with_error_code(e.code())),
    };
    let code =
        |r: &Result<(), crate::coordinator::GroupError>| r.as_ref().err().map_or(0, |e| e.code());
    let response = if req.version() >= 3 {
        // Per-member results exist from v3 on.
        LeaveGroupResponse::default().with_members(
            members
                .into_iter()
                .zip(&results)
                .map(|(m, r)| {
                    MemberResponse::default()
                        .with_member_id(kstr(m.member_id))
                        .with_group_instance_id(m.group_instance_id.map(kstr))
                        .with_error_code(code(r))
                })
                .collect(),
        )
    } else {
        // Before v3 the top-level code carries the one member's result.
        LeaveGroupResponse::default().with_error_code(results.first().map_or(0, code))
    };
    req.respond(&response)
}
