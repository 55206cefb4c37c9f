//! Heartbeat (key 12), versions 0-3.

use kafka_protocol::messages::{HeartbeatRequest, HeartbeatResponse};

use super::{Ctx, Fatal, Reply, Request};

pub(super) fn handle(ctx: &Ctx<'_>, req: &mut Request) -> Result<Reply, Fatal> {
    let request: HeartbeatRequest = req.decode()?;
    let answer = ctx.backend().groups().heartbeat(
        &request.group_id,
        request.generation_id,
        &request.member_id,
        request.group_instance_id.as_deref(),
    );
    let code = answer.err().map_or(0, |e| e.code());
    req.respond(&HeartbeatResponse::default().with_error_code(code))
}
