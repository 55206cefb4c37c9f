//! Heartbeat (key 12), versions 0-4. An empty group id is INVALID_GROUP_ID, as in Kafka.

use crate::server::error_codes::KafkaCode;
use kafka_protocol::messages::{HeartbeatRequest, HeartbeatResponse};

use super::{Ctx, Fatal, Reply, Request};
use crate::coordinator::GroupError;
use crate::security::acl::{AclOperation, ResourceType};
use crate::security::denied_code;

pub(super) fn handle(ctx: &Ctx<'_>, req: &mut Request) -> Result<Reply, Fatal> {
    let request: HeartbeatRequest = req.decode()?;
    if !ctx.allowed(AclOperation::Read, ResourceType::Group, &request.group_id) {
        return req.respond(
            &HeartbeatResponse::default().with_error_code(denied_code(ResourceType::Group)),
        );
    }
    if request.group_id.is_empty() {
        let code = GroupError::InvalidGroupId(String::new()).code();
        return req.respond(&HeartbeatResponse::default().with_error_code(code));
    }
    let answer = ctx.backend().groups().heartbeat(
        &request.group_id,
        request.generation_id,
        &request.member_id,
        request.group_instance_id.as_deref(),
    );
    let code = answer.err().map_or(0, |e| e.code());
    req.respond(&HeartbeatResponse::default().with_error_code(code))
}
