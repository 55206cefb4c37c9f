//! AlterPartitionReassignments (key 45), versions 0-1 (KIP-455): moves partitions to
//! other replicas, or (replicas null) cancels a move in progress. Needs Alter on the
//! cluster (CLUSTER_AUTHORIZATION_FAILED for the request). Per partition, once this
//! node applied the change: UNKNOWN_TOPIC_OR_PARTITION, INVALID_REPLICA_ASSIGNMENT (an
//! empty target, a broker named twice or not registered, no replica left in sync),
//! NO_REASSIGNMENT_IN_PROGRESS (a cancellation of nothing), INVALID_REPLICATION_FACTOR
//! (version 1 with `allow_replication_factor_change` false and a target of another
//! size, KIP-860), or the controller's error. The new replicas then catch up as
//! followers and the replica set switches once they are all in the ISR
//! (ListPartitionReassignments shows the moves still in progress). A single node hosts
//! every partition itself: only its own id is a valid target.

use std::time::Duration;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::alter_partition_reassignments_response::{
    ReassignablePartitionResponse, ReassignableTopicResponse,
};
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse,
};

use super::{Ctx, Fatal, NODE_ID, Reply, Request, error_code, kstr};
use crate::error::Error;
use crate::security::acl::{AclOperation, CLUSTER_RESOURCE_NAME, ResourceType};
use crate::server::partition_admin::Altered;

pub(super) fn handle(ctx: &Ctx<'_>, req: &mut Request) -> Result<Reply, Fatal> {
    let request: AlterPartitionReassignmentsRequest = req.decode()?;
    let allow_rf_change = req.version() == 0 || request.allow_replication_factor_change;
    let answer = |code: i16, message: Option<String>| {
        AlterPartitionReassignmentsResponse::default()
            .with_allow_replication_factor_change(allow_rf_change)
            .with_error_code(code)
            .with_error_message(message.map(kstr))
    };
    if let Err((code, message)) = ctx.check(
        AclOperation::Alter,
        ResourceType::Cluster,
        CLUSTER_RESOURCE_NAME,
    ) {
        return req.respond(&answer(code, Some(message)));
    }
    let timeout = Duration::from_millis(request.timeout_ms.max(1) as u64);
    let responses = request
        .topics
        .iter()
        .map(|t| {
            let topic = t.name.0.to_string();
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let target: Option<Vec<i32>> =
                        p.replicas.as_ref().map(|r| r.iter().map(|b| b.0).collect());
                    let outcome = alter(ctx, &topic, p.partition_index, target, allow_rf_change, timeout);
                    let answer =
                        ReassignablePartitionResponse::default().with_partition_index(p.partition_index);
                    match outcome {
                        Ok(()) => answer.with_error_message(None),
                        Err((code, message)) => {
                            tracing::debug!(peer = %ctx.peer, topic = %topic, partition = p.partition_index, code, "reassignment refused: {message}");
                            answer
                                .with_error_code(code)
                                .with_error_message(Some(kstr(message)))
                        }
                    }
                })
                .collect();
            ReassignableTopicResponse::default()
                .with_name(t.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    req.respond(&answer(0, None).with_responses(responses))
}

/// One partition's reassignment, as an error code and message when refused.
fn alter(
    ctx: &Ctx<'_>,
    topic: &str,
    partition: i32,
    target: Option<Vec<i32>>,
    allow_rf_change: bool,
    timeout: Duration,
) -> Result<(), (i16, String)> {
    let refused = |e: Error| (error_code(&e), e.to_string());
    let backend = ctx.backend();
    let Some(admin) = backend.cluster().and_then(|c| c.partition_admin()) else {
        return single_node(ctx, topic, partition, target.as_deref());
    };
    if let Some(t) = &target
        && !allow_rf_change
    {
        let rf = admin
            .replication_factor(topic, partition)
            .map_err(refused)?;
        if t.len() != rf {
            return Err((
                ResponseError::InvalidReplicationFactor.code(),
                format!(
                    "partition {topic}-{partition} has {rf} replicas, the target {t:?} {}, and the request does not allow a change of replication factor",
                    t.len()
                ),
            ));
        }
    }
    match admin.alter_reassignment(topic, partition, target, timeout) {
        Ok(Altered::Done) => Ok(()),
        Ok(Altered::NoReassignmentInProgress) => Err((
            ResponseError::NoReassignmentInProgress.code(),
            format!("partition {topic}-{partition} is not being reassigned"),
        )),
        Err(e) => Err(refused(e)),
    }
}

/// A single node: the partition stays where it is; a target of this node alone is a
/// reassignment with nothing to do.
fn single_node(
    ctx: &Ctx<'_>,
    topic: &str,
    partition: i32,
    target: Option<&[i32]>,
) -> Result<(), (i16, String)> {
    let count = ctx.backend().partition_count(topic).unwrap_or(0);
    if !(0..count).contains(&partition) {
        return Err((
            ResponseError::UnknownTopicOrPartition.code(),
            format!("unknown partition {topic}-{partition}"),
        ));
    }
    match target {
        None => Err((
            ResponseError::NoReassignmentInProgress.code(),
            format!("partition {topic}-{partition} is not being reassigned"),
        )),
        Some([NODE_ID]) => Ok(()),
        Some(t) => Err((
            ResponseError::InvalidReplicaAssignment.code(),
            format!(
                "the target {t:?} of {topic}-{partition} names other brokers than this single node ({NODE_ID})"
            ),
        )),
    }
}
