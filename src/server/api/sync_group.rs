//! SyncGroup (key 14), versions 0-5 (v5 checks the protocol type and name): the leader hands in the assignment, every member
//! receives its own, through the broker's group coordinator. An empty group id is
//! INVALID_GROUP_ID, as in Kafka.

use crate::server::error_codes::KafkaCode;
use std::time::Duration;

use kafka_protocol::messages::{SyncGroupRequest, SyncGroupResponse};

use super::{Ctx, Fatal, Reply, Request, kstr};
use crate::security::acl::{AclOperation, ResourceType};
use crate::security::denied_code;

/// How long a follower waits for the leader's assignment.
const SYNC_TIMEOUT: Duration = Duration::from_secs(60);

pub(super) fn handle(ctx: &Ctx<'_>, req: &mut Request) -> Result<Reply, Fatal> {
    let request: SyncGroupRequest = req.decode()?;
    if !ctx.allowed(AclOperation::Read, ResourceType::Group, &request.group_id) {
        return req.respond(
            &SyncGroupResponse::default().with_error_code(denied_code(ResourceType::Group)),
        );
    }
    if request.group_id.is_empty() {
        let code = crate::coordinator::GroupError::InvalidGroupId(String::new()).code();
        return req.respond(&SyncGroupResponse::default().with_error_code(code));
    }
    let sync = crate::coordinator::SyncGroupRequest {
        group_id: request.group_id.0.to_string(),
        generation_id: request.generation_id,
        member_id: request.member_id.to_string(),
        group_instance_id: request.group_instance_id.map(|s| s.to_string()),
        protocol_type: request.protocol_type.map(|s| s.to_string()),
        protocol_name: request.protocol_name.map(|s| s.to_string()),
        assignments: request
            .assignments
            .into_iter()
            .map(|a| (a.member_id.to_string(), a.assignment.to_vec()))
            .collect(),
    };
    let response = match ctx.backend().groups().sync_group(sync, SYNC_TIMEOUT) {
        Ok(a) => SyncGroupResponse::default()
            .with_protocol_type(a.protocol_type.map(kstr))
            .with_protocol_name(a.protocol_name.map(kstr))
            .with_assignment(a.assignment.into()),
        Err(e) => SyncGroupResponse::default().with_error_code(e.code()),
    };
    req.respond(&response)
}
