//! ListPartitionReassignments (key 46), version 0 (KIP-455): the partitions being
//! reassigned, with their replicas now (the target, then the replicas being removed)
//! and the replicas being added and removed. `topics` null lists every one; otherwise
//! only the named partitions that are being reassigned (others are left out, as Kafka
//! does). Needs Describe on the cluster (CLUSTER_AUTHORIZATION_FAILED). A single node
//! never reassigns: the list is empty.

use std::collections::BTreeMap;

use kafka_protocol::messages::list_partition_reassignments_response::{
    OngoingPartitionReassignment, OngoingTopicReassignment,
};
use kafka_protocol::messages::{
    BrokerId, ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse, TopicName,
};

use super::{Ctx, Fatal, Reply, Request, kstr};
use crate::security::acl::{AclOperation, CLUSTER_RESOURCE_NAME, ResourceType};

pub(super) fn handle(ctx: &Ctx<'_>, req: &mut Request) -> Result<Reply, Fatal> {
    let request: ListPartitionReassignmentsRequest = req.decode()?;
    if let Err((code, message)) = ctx.check(
        AclOperation::Describe,
        ResourceType::Cluster,
        CLUSTER_RESOURCE_NAME,
    ) {
        return req.respond(
            &ListPartitionReassignmentsResponse::default()
                .with_error_code(code)
                .with_error_message(Some(kstr(message))),
        );
    }
    let named: Option<Vec<(String, i32)>> = request.topics.map(|topics| {
        topics
            .iter()
            .flat_map(|t| {
                let name = t.name.0.to_string();
                t.partition_indexes.iter().map(move |p| (name.clone(), *p))
            })
            .collect()
    });
    let backend = ctx.backend();
    let ongoing = backend
        .cluster()
        .and_then(|c| c.partition_admin())
        .map(|a| a.list_reassignments(named.as_deref()))
        .unwrap_or_default();
    let ids = |v: Vec<i32>| v.into_iter().map(BrokerId).collect::<Vec<_>>();
    let mut topics: BTreeMap<String, Vec<OngoingPartitionReassignment>> = BTreeMap::new();
    for r in ongoing {
        topics.entry(r.topic).or_default().push(
            OngoingPartitionReassignment::default()
                .with_partition_index(r.partition)
                .with_replicas(ids(r.replicas))
                .with_adding_replicas(ids(r.adding))
                .with_removing_replicas(ids(r.removing)),
        );
    }
    let topics = topics
        .into_iter()
        .map(|(name, partitions)| {
            OngoingTopicReassignment::default()
                .with_name(TopicName(kstr(name)))
                .with_partitions(partitions)
        })
        .collect();
    req.respond(&ListPartitionReassignmentsResponse::default().with_topics(topics))
}
