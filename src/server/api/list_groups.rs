//! ListGroups (key 16), versions 0-5: every group of the coordinator, with its state
//! from v4, which may also filter by state, and its type ("classic") from v5, which may
//! filter by type.

use crate::server::error_codes::KafkaCode;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{GroupId, ListGroupsRequest, ListGroupsResponse};

use super::{Ctx, Fatal, Reply, Request, kstr};
use crate::broker::OFFSETS_TOPIC;
use crate::coordinator::{GroupError, GroupState};
use crate::security::acl::{AclOperation, CLUSTER_RESOURCE_NAME, ResourceType};

/// Kafka's name of the type of every group here (the classic protocol; KIP-848's
/// "consumer" groups are not served).
const CLASSIC: &str = "classic";

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
    // v5 filters by group type: every group here is a classic one (case-insensitive, as
    // Kafka; an unknown type matches nothing).
    let classic = request.types_filter.is_empty()
        || request
            .types_filter
            .iter()
            .any(|t| t.eq_ignore_ascii_case(CLASSIC));
    let typed = req.version() >= 5;
    let response = match ctx.backend().groups().list_groups(&states) {
        Ok(_) if (unknown_state && states.is_empty()) || !classic => ListGroupsResponse::default(),
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
                    let listed = ListedGroup::default()
                        .with_group_id(GroupId(kstr(g.group_id)))
                        .with_protocol_type(kstr(g.protocol_type))
                        .with_group_state(kstr(g.state.as_str()));
                    if typed {
                        listed.with_group_type(kstr(CLASSIC))
                    } else {
                        listed
                    }
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
