//! FindCoordinator (key 10), versions 0-2: a single node coordinates every group. On a
//! cluster node the coordinator of a group is the leader of its `__consumer_offsets`
//! partition (Kafka's `abs(groupId.hashCode) % partitions`), from its
//! [`ClusterView`];
//! COORDINATOR_NOT_AVAILABLE while that topic does not exist or the partition has no
//! leader.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};

use super::{Ctx, Fatal, NODE_ID, Reply, Request, kstr};
use crate::security::acl::{AclOperation, ResourceType};
use crate::security::denied_code;
use crate::server::cluster_view::ClusterView;

pub(super) fn handle(ctx: &Ctx<'_>, req: &mut Request) -> Result<Reply, Fatal> {
    let request: FindCoordinatorRequest = req.decode()?;
    let kind = match request.key_type {
        0 => ResourceType::Group,
        1 => ResourceType::TransactionalId,
        other => {
            // Kafka's CoordinatorType.forId: an unknown type is INVALID_REQUEST.
            return req.respond(
                &FindCoordinatorResponse::default()
                    .with_node_id(BrokerId(-1))
                    .with_port(-1)
                    .with_error_code(ResponseError::InvalidRequest.code())
                    .with_error_message(Some(kstr(format!("unknown coordinator type {other}")))),
            );
        }
    };
    if !ctx.allowed(AclOperation::Describe, kind, &request.key) {
        return req.respond(
            &FindCoordinatorResponse::default()
                .with_node_id(BrokerId(-1))
                .with_port(-1)
                .with_error_code(denied_code(kind)),
        );
    }
    if let Some(cluster) = ctx.backend().cluster() {
        let response = match cluster_coordinator(cluster, &request.key, ctx.listener) {
            Ok((id, host, port)) => FindCoordinatorResponse::default()
                .with_node_id(BrokerId(id))
                .with_host(kstr(host))
                .with_port(port),
            Err(message) => FindCoordinatorResponse::default()
                .with_node_id(BrokerId(-1))
                .with_port(-1)
                .with_error_code(ResponseError::CoordinatorNotAvailable.code())
                .with_error_message(Some(kstr(message))),
        };
        return req.respond(&response);
    }
    let (host, port) = ctx.advertised();
    let response = FindCoordinatorResponse::default()
        .with_node_id(BrokerId(NODE_ID))
        .with_host(kstr(host))
        .with_port(port);
    req.respond(&response)
}

/// Java's `String.hashCode` (over UTF-16 code units), as Kafka partitions groups.
fn java_hash(s: &str) -> i32 {
    s.encode_utf16()
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)))
}

/// The coordinator of `group` on a cluster: `(node id, host, port)` of the leader of its
/// `__consumer_offsets` partition at its endpoint of `listener`, or why there is none.
fn cluster_coordinator(
    cluster: &dyn ClusterView,
    group: &str,
    listener: &str,
) -> Result<(i32, String, i32), String> {
    let no_leader = || format!("{} has no leader yet", crate::broker::OFFSETS_TOPIC);
    let topic = cluster
        .topic(crate::broker::OFFSETS_TOPIC)
        .ok_or_else(no_leader)?;
    let count = topic.partitions.len() as i32;
    if count == 0 {
        return Err(no_leader());
    }
    // Kafka's Utils.abs: i32::MIN maps to 0, not to itself.
    let partition = (java_hash(group) & 0x7fff_ffff) % count;
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

#[cfg(test)]
mod tests {
    use super::java_hash;

    #[test]
    fn group_hash_is_javas() {
        // "hello".hashCode() in Java.
        assert_eq!(java_hash("hello"), 99_162_322);
        assert_eq!(java_hash(""), 0);
    }
}
