//! ListGroups (key 16), versions 0-5: every group of the coordinator, with its state
//! from v4, which may also filter by state, and its type ("classic", "consumer" or
//! "share") from v5, which may also filter by type. States are Kafka's names of each
//! protocol's states ("Stable", "Reconciling", ...); a share group is "Stable" with
//! members and "Empty" without, its protocol type "share". A share group is listed by
//! the node coordinating its id (the leader of its `__consumer_offsets` partition).

use crate::server::error_codes::KafkaCode;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{GroupId, ListGroupsRequest, ListGroupsResponse};

use super::{Ctx, Fatal, Reply, Request, kstr};
use crate::broker::OFFSETS_TOPIC;
use crate::coordinator::{GroupError, GroupType};
use crate::security::acl::{AclOperation, CLUSTER_RESOURCE_NAME, ResourceType};

pub(super) fn handle(ctx: &Ctx<'_>, req: &mut Request) -> Result<Reply, Fatal> {
    let request: ListGroupsRequest = req.decode()?;
    // An unknown state or type name matches no group (Kafka does the same).
    let states: Vec<String> = request
        .states_filter
        .iter()
        .map(ToString::to_string)
        .collect();
    let mut types = Vec::new();
    let mut unknown_type = false;
    let mut share_wanted = request.types_filter.is_empty();
    for name in &request.types_filter {
        if name.eq_ignore_ascii_case(SHARE) {
            share_wanted = true;
            continue;
        }
        match [GroupType::Classic, GroupType::Consumer]
            .into_iter()
            .find(|t| t.as_str().eq_ignore_ascii_case(name))
        {
            Some(t) => types.push(t),
            None => unknown_type = true,
        }
    }
    let others_wanted = request.types_filter.is_empty() || !types.is_empty();
    let share_groups = if share_wanted {
        share_groups(ctx, &states)
    } else {
        Vec::new()
    };
    let response = match ctx.backend().groups().list_typed_groups(&states, &types) {
        Ok(_) if !others_wanted => ListGroupsResponse::default().with_groups(share_groups),
        Ok(_) if unknown_type && types.is_empty() => ListGroupsResponse::default(),
        Ok(groups) => ListGroupsResponse::default().with_groups(
            groups
                .into_iter()
                .filter(|g| {
                    ctx.permits(
                        AclOperation::Describe,
                        ResourceType::Cluster,
                        CLUSTER_RESOURCE_NAME,
                    ) || ctx.permits(AclOperation::Describe, ResourceType::Group, &g.group_id)
                })
                .map(|g| {
                    ListedGroup::default()
                        .with_group_id(GroupId(kstr(g.group_id)))
                        .with_protocol_type(kstr(g.protocol_type))
                        .with_group_state(kstr(g.state))
                        .with_group_type(kstr(g.group_type.as_str()))
                })
                .chain(share_groups)
                .collect(),
        ),
        // A cluster node that leads no `__consumer_offsets` partition coordinates no
        // group: it lists none, as Kafka's brokers do; one that leads a partition it has
        // not loaded yet says so, and the client asks again.
        Err(e) => match (e, ctx.backend().cluster()) {
            (GroupError::NotCoordinator, Some(cluster)) => {
                let leads_offsets = cluster
                    .topic(OFFSETS_TOPIC)
                    .is_some_and(|t| t.partitions.iter().any(|p| p.leader == cluster.node_id()));
                if leads_offsets {
                    ListGroupsResponse::default()
                        .with_error_code(ResponseError::CoordinatorLoadInProgress.code())
                } else {
                    ListGroupsResponse::default()
                }
            }
            (e, _) => ListGroupsResponse::default().with_error_code(e.code()),
        },
    };
    req.respond(&response)
}

/// Type and protocol type of a share group.
const SHARE: &str = "share";

/// The share groups this node coordinates in one of `states` (any when empty) that the
/// principal may describe.
fn share_groups(ctx: &Ctx<'_>, states: &[String]) -> Vec<ListedGroup> {
    let backend = ctx.backend();
    let coordinator = backend.groups();
    backend
        .share_groups()
        .into_iter()
        .filter(|(g, _)| coordinator.coordinates(g))
        .map(|(g, members)| (g, if members > 0 { "Stable" } else { "Empty" }))
        .filter(|(_, state)| {
            states.is_empty() || states.iter().any(|s| s.eq_ignore_ascii_case(state))
        })
        .filter(|(g, _)| {
            ctx.permits(
                AclOperation::Describe,
                ResourceType::Cluster,
                CLUSTER_RESOURCE_NAME,
            ) || ctx.permits(AclOperation::Describe, ResourceType::Group, g)
        })
        .map(|(g, state)| {
            ListedGroup::default()
                .with_group_id(GroupId(kstr(g)))
                .with_protocol_type(kstr(SHARE))
                .with_group_state(kstr(state))
                .with_group_type(kstr(SHARE))
        })
        .collect()
}
