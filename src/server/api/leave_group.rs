//! LeaveGroup (key 13), versions 0-3 (one member before v3, a list from v3).

use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::{LeaveGroupRequest, LeaveGroupResponse};

use super::{Ctx, Fatal, Reply, Request, kstr};

pub(super) fn handle(ctx: &Ctx<'_>, req: &mut Request) -> Result<Reply, Fatal> {
    let request: LeaveGroupRequest = req.decode()?;
    let members: Vec<crate::LeavingMember> = if req.version() >= 3 {
        request
            .members
            .iter()
            .map(|m| crate::LeavingMember {
                member_id: m.member_id.to_string(),
                group_instance_id: m.group_instance_id.as_ref().map(|s| s.to_string()),
            })
            .collect()
    } else {
        vec![crate::LeavingMember {
            member_id: request.member_id.to_string(),
            group_instance_id: None,
        }]
    };
    let a = ctx
        .backend()
        .groups()
        .leave_group(&request.group_id, &members);
    let mut response = LeaveGroupResponse::default().with_error_code(a.error_code);
    // Per-member results exist from v3 on; before that the top-level code carries it.
    if req.version() >= 3 {
        response = response.with_members(
            a.members
                .into_iter()
                .map(|(member_id, instance, code)| {
                    MemberResponse::default()
                        .with_member_id(kstr(member_id))
                        .with_group_instance_id(instance.map(kstr))
                        .with_error_code(code)
                })
                .collect(),
        );
    } else if let Some(&(_, _, code)) = a.members.first().filter(|_| a.error_code == 0) {
        response = response.with_error_code(code);
    }
    req.respond(&response)
}
