//! FindCoordinator (key 10), versions 0-6 (v4 and up: several keys at once), of
//! groups (key type 0) and transactional ids (key type 1, whose first lookup makes
//! `__transaction_state`, as Kafka does): a single node coordinates every one whose
//! partition of that topic serves (COORDINATOR_NOT_AVAILABLE when its log directory
//! failed, as Kafka answers for a partition without a leader). On a
//! cluster node the coordinator of a group is the leader of its `__consumer_offsets`
//! partition (Kafka's `abs(groupId.hashCode) % partitions`), from its
//! [`ClusterView`], and the coordinator of a transactional id the leader of its
//! `__transaction_state` partition (`coordinator::partition_for`, the same hash);
//! COORDINATOR_NOT_AVAILABLE while that topic does not exist or the partition has no
//! leader.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::protocol::StrBytes;

use super::{Ctx, Fatal, NODE_ID, Reply, Request, kstr};
use crate::security::acl::{AclOperation, ResourceType};
use crate::security::denied_code;
use crate::server::cluster_view::ClusterView;
use crate::transaction::log::TRANSACTION_STATE_TOPIC;

/// The first version that asks for several keys at once.
const BATCHED_SINCE: i16 = 4;

/// A coordinator found: `(node id, host, port)`; or a refusal: code and message.
type Found = Result<(i32, String, i32), (i16, Option<String>)>;

pub(super) fn handle(ctx: &Ctx<'_>, req: &mut Request) -> Result<Reply, Fatal> {
    let request: FindCoordinatorRequest = req.decode()?;
    let kind = match request.key_type {
        0 => Some(ResourceType::Group),
        1 => Some(ResourceType::TransactionalId),
        _ => None,
    };
    if req.version() < BATCHED_SINCE {
        let response = match find(ctx, kind, request.key_type, &request.key) {
            Ok((id, host, port)) => FindCoordinatorResponse::default()
                .with_node_id(BrokerId(id))
                .with_host(kstr(host))
                .with_port(port),
            Err((code, message)) => FindCoordinatorResponse::default()
                .with_node_id(BrokerId(-1))
                .with_port(-1)
                .with_error_code(code)
                .with_error_message(message.map(kstr)),
        };
        return req.respond(&response);
    }
    let coordinators = request
        .coordinator_keys
        .iter()
        .map(|key| {
            let c = Coordinator::default().with_key(key.clone());
            match find(ctx, kind, request.key_type, key) {
                Ok((id, host, port)) => c
                    .with_node_id(BrokerId(id))
                    .with_host(kstr(host))
                    .with_port(port),
                Err((code, message)) => c
                    .with_node_id(BrokerId(-1))
                    .with_port(-1)
                    .with_error_code(code)
                    .with_error_message(message.map(kstr)),
            }
        })
        .collect();
    req.respond(&FindCoordinatorResponse::default().with_coordinators(coordinators))
}

/// The coordinator of one key: a group's, or (making `__transaction_state` on first
/// use) a transactional id's.
fn find(ctx: &Ctx<'_>, kind: Option<ResourceType>, key_type: i8, key: &StrBytes) -> Found {
    // Kafka's CoordinatorType.forId: an unknown type is INVALID_REQUEST.
    let kind = kind.ok_or_else(|| {
        (
            ResponseError::InvalidRequest.code(),
            Some(format!("unknown coordinator type {key_type}")),
        )
    })?;
    if !ctx.allowed(AclOperation::Describe, kind, key) {
        return Err((denied_code(kind), None));
    }
    let unavailable = |m: String| (ResponseError::CoordinatorNotAvailable.code(), Some(m));
    if kind == ResourceType::TransactionalId {
        ctx.backend().start_transactions().map_err(|e| {
            tracing::warn!(error = %e, "the transaction coordinator is not available");
            unavailable(e.to_string())
        })?;
    }
    let topic = if kind == ResourceType::TransactionalId {
        TRANSACTION_STATE_TOPIC
    } else {
        crate::broker::OFFSETS_TOPIC
    };
    if let Some(cluster) = ctx.backend().cluster() {
        return cluster_coordinator(cluster, topic, key, ctx.listener).map_err(unavailable);
    }
    if let Some(why) = offline_partition_of(ctx, topic, key) {
        return Err(unavailable(why));
    }
    let (host, port) = ctx.advertised();
    Ok((NODE_ID, host, port))
}

/// Why the partition of `topic` that holds `key` is offline on a single node (its log
/// directory failed, so it has no leader and the key no coordinator, as Kafka answers),
/// None when it serves or `topic` does not exist yet.
fn offline_partition_of(ctx: &Ctx<'_>, topic: &str, key: &str) -> Option<String> {
    let backend = ctx.backend();
    let count = backend.partition_count(topic).filter(|c| *c > 0)?;
    let partition = crate::coordinator::partition_for(key, count);
    let why = backend.offline_partitions(topic).remove(&partition)?;
    Some(format!("partition {topic}-{partition} is offline: {why}"))
}

/// The coordinator of `key` (a group, or a transactional id) on a cluster:
/// `(node id, host, port)` of the leader of its partition of `topic`
/// (`__consumer_offsets`, or `__transaction_state`) at its endpoint of `listener`, or
/// why there is none.
fn cluster_coordinator(
    cluster: &dyn ClusterView,
    topic_name: &str,
    key: &str,
    listener: &str,
) -> Result<(i32, String, i32), String> {
    let no_leader = || format!("{topic_name} has no leader yet");
    let topic = cluster.topic(topic_name).ok_or_else(no_leader)?;
    let count = topic.partitions.len() as i32;
    if count == 0 {
        return Err(no_leader());
    }
    let partition = crate::coordinator::partition_for(key, count);

    let leader = topic.partitions[partition as usize].leader;
    let broker = cluster
        .brokers(listener)
        .into_iter()
        .find(|b| b.id == leader && !b.fenced)
        .ok_or_else(no_leader)?;
    let (host, port) = broker.endpoint.ok_or_else(|| {
        format!("the coordinator, broker {leader}, has no listener named {listener}")
    })?;
    Ok((leader, host, port))
}
