//! JoinGroup (key 11), versions 0-9 (static membership, KIP-345, from v5; a reason from
//! v8; from v9 a static leader returning to a Stable group is told to skip the
//! assignment), through the broker's [`GroupCoordinator`] (the same one in-process
//! consumers use).
//!
//! The request blocks until the rebalance completes or the member's rebalance timeout
//! passes, as in Kafka; the wait is cut into short slices so that a server shutdown is
//! not held up by a pending rebalance.
//!
//! [`GroupCoordinator`]: crate::coordinator::GroupCoordinator

use crate::server::error_codes::KafkaCode;
use std::time::{Duration, Instant};

use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::{JoinGroupRequest, JoinGroupResponse};

use super::{Ctx, Fatal, Reply, Request, kstr};
use crate::coordinator::{self, GroupError};
use crate::security::acl::{AclOperation, ResourceType};
use crate::security::denied_code;

/// Longest uninterrupted wait inside one JoinGroup (shutdown is checked in between).
const WAIT_SLICE: Duration = Duration::from_millis(200);

/// A non-negative millisecond count from the wire.
pub(super) fn millis(ms: i32) -> Duration {
    Duration::from_millis(ms.max(0) as u64)
}

pub(super) fn handle(ctx: &Ctx<'_>, req: &mut Request) -> Result<Reply, Fatal> {
    let request: JoinGroupRequest = req.decode()?;
    if !ctx.allowed(AclOperation::Read, ResourceType::Group, &request.group_id) {
        return req.respond(
            &JoinGroupResponse::default()
                .with_generation_id(-1)
                .with_error_code(denied_code(ResourceType::Group)),
        );
    }
    let version = req.version();
    let session_timeout = millis(request.session_timeout_ms);
    let rebalance_timeout = if version >= 1 {
        millis(request.rebalance_timeout_ms)
    } else {
        session_timeout
    };
    let member_id = request.member_id.to_string();
    let join = coordinator::JoinGroupRequest {
        group_id: request.group_id.0.to_string(),
        member_id: member_id.clone(),
        group_instance_id: request.group_instance_id.map(|s| s.to_string()),
        protocol_type: request.protocol_type.to_string(),
        protocols: request
            .protocols
            .into_iter()
            .map(|p| (p.name.to_string(), p.metadata.to_vec()))
            .collect(),
        session_timeout,
        rebalance_timeout,
        require_known_member_id: version >= 4,
        client_id: req
            .header
            .client_id
            .as_ref()
            .map(|c| c.to_string())
            .unwrap_or_default(),
        client_host: format!("/{}", ctx.peer.ip()),
        origin: coordinator::MemberOrigin::Network,
        supports_skip_assignment: version >= 9,
    };
    if let Some(reason) = request.reason.as_deref().filter(|r| !r.is_empty()) {
        tracing::debug!(group = %join.group_id, member = %member_id, reason, "JoinGroup");
    }
    let groups = ctx.backend().groups();
    let answer = match groups.begin_join(join) {
        Ok(coordinator::JoinStart::Done(answer)) => Ok(answer),
        Ok(coordinator::JoinStart::Pending(ticket)) => {
            let deadline = Instant::now() + rebalance_timeout + Duration::from_secs(1);
            loop {
                let now = Instant::now();
                if now >= deadline || ctx.shared.is_stopping() {
                    break Err(GroupError::RebalanceInProgress);
                }
                if let Some(answer) = groups.await_join(&ticket, WAIT_SLICE.min(deadline - now)) {
                    break answer;
                }
            }
        }
        Err(e) => Err(e),
    };
    let response = match answer {
        Ok(a) => JoinGroupResponse::default()
            .with_generation_id(a.generation_id)
            .with_protocol_type(a.protocol_type.map(kstr))
            .with_protocol_name(Some(kstr(a.protocol_name.unwrap_or_default())))
            .with_leader(kstr(a.leader))
            .with_member_id(kstr(a.member_id))
            .with_skip_assignment(a.skip_assignment)
            .with_members(
                a.members
                    .into_iter()
                    .map(|m| {
                        JoinGroupResponseMember::default()
                            .with_member_id(kstr(m.member_id))
                            .with_group_instance_id(m.group_instance_id.map(kstr))
                            .with_metadata(m.metadata.into())
                    })
                    .collect(),
            ),
        Err(e) => {
            // MEMBER_ID_REQUIRED carries the id to rejoin with; other errors echo the
            // request's member id.
            let member_id = match &e {
                GroupError::MemberIdRequired { member_id } => member_id.clone(),
                _ => member_id,
            };
            JoinGroupResponse::default()
                .with_error_code(e.code())
                .with_generation_id(-1)
                .with_protocol_name(Some(kstr("")))
                .with_member_id(kstr(member_id))
        }
    };
    req.respond(&response)
}
