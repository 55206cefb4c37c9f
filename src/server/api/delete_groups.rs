//! DeleteGroups (key 42), versions 0-2: deletes empty groups with their committed
//! offsets (tombstones in `__consumer_offsets`); NON_EMPTY_GROUP for a group with
//! members, GROUP_ID_NOT_FOUND for an unknown one. A share group (an id no classic or
//! consumer group has) is deleted with the state of its share-partitions in
//! `__share_group_state`, as Kafka's group coordinator has its share coordinator
//! delete it.

use crate::coordinator::GroupError;
use crate::server::error_codes::KafkaCode;
use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::{DeleteGroupsRequest, DeleteGroupsResponse, GroupId};

use super::{Ctx, Fatal, Reply, Request, error_code, kstr};
use crate::security::acl::{AclOperation, ResourceType};
use crate::security::denied_code;

pub(super) fn handle(ctx: &Ctx<'_>, req: &mut Request) -> Result<Reply, Fatal> {
    let request: DeleteGroupsRequest = req.decode()?;
    let groups = ctx.backend().groups();
    let results = request
        .groups_names
        .iter()
        .map(|id| {
            let code = if !ctx.allowed(AclOperation::Delete, ResourceType::Group, id) {
                denied_code(ResourceType::Group)
            } else {
                match groups.delete_group(id) {
                    Ok(()) => 0,
                    Err(GroupError::GroupIdNotFound) => share_code(ctx, id),
                    Err(e) => e.code(),
                }
            };
            DeletableGroupResult::default()
                .with_group_id(GroupId(kstr(id.0.to_string())))
                .with_error_code(code)
        })
        .collect();
    req.respond(&DeleteGroupsResponse::default().with_results(results))
}

/// The error code of deleting share group `id` (0: deleted).
fn share_code(ctx: &Ctx<'_>, id: &str) -> i16 {
    ctx.backend()
        .delete_share_group(id)
        .err()
        .map_or(0, |e| error_code(&e))
}
