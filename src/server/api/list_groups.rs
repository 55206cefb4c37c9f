//! ListGroups (key 16), versions 0-4: every group of the coordinator, with its state
//! from v4, which may also filter by state.

use crate::server::error_codes::KafkaCode;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{GroupId, ListGroupsRequest, ListGroupsResponse};

use super::{Ctx, Fatal, Reply, Request, kstr};
use crate::broker::OFFSETS_TOPIC;
use crate::coordinator::{GroupError, GroupState};
use crate::security::acl::{AclOperation, CLUSTER_RESOURCE_NAME, ResourceType};

pub(super) fn handle(ctx: &Ctx<'_>, req: &mut Request) -> Result<Reply, Fatal> {
    let request: ListGroupsRequest = req.decode()?;
    // An unknown state name matches no group (Kafka does the same).
    let mut states = Vec::new();
    let mut unknown_state = false;
    for name in &request.states_filter {
        match GroupState::parse(name) {
            Some(s) => states.push(s),
            None => unknown_state = true,
        }
    }
    let response = match ctx.backend().groups().list_groups(&states) {
        Ok(_) if unknown_state && states.is_empty() => ListGroupsResponse::default(),
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
                        .with_group_state(kstr(g.state.as_str()))
                })
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
