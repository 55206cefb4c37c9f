//! DescribeTopicPartitions (key 75), version 0 (KIP-966): the partitions of topics, by
//! name or of every topic (an empty topic list), a page at a time, as Kafka 3.8+ Java
//! admin clients ask for them in `describeTopics`.
//!
//! As Kafka answers: topics in name order, from the request's `cursor` (its topic, from
//! its partition index) on; at most `response_partition_limit` partitions (capped by the
//! server's `max.request.partition.size.limit`, 2000 by default, and at least 1), and
//! when partitions are left, `next_cursor` names the first of them. Per partition the
//! leader (-1 when there is none, or it has no endpoint on the request's listener), the
//! leader epoch, the replicas, the ISR, the eligible leader replicas and the last known
//! ELR (empty: tidelog keeps no ELR) and the replicas offline (on a broker fenced, gone
//! or without the listener, or in a log directory that failed). Per topic its id,
//! `is_internal` and the operations the principal may do on it.
//!
//! A topic asked for that does not exist is UNKNOWN_TOPIC_OR_PARTITION (or
//! INVALID_TOPIC_EXCEPTION for a name that cannot be a topic's), one being created on a
//! cluster node LEADER_NOT_AVAILABLE (retriable, as Metadata answers); one the principal
//! may not DESCRIBE is TOPIC_AUTHORIZATION_FAILED, listed after the page. When every
//! topic is asked for, those are left out. A cursor whose topic is not among the topics
//! asked for, or whose partition index is negative, makes every topic INVALID_REQUEST.
//!
//! A single node is the only replica of its partitions and leads them (but one in a
//! failed log directory, which has no leader and this node offline); a cluster node
//! answers from its [`ClusterView`].

use std::collections::BTreeSet;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::describe_topic_partitions_response::{
    Cursor, DescribeTopicPartitionsResponsePartition, DescribeTopicPartitionsResponseTopic,
};
use kafka_protocol::messages::{
    BrokerId, DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse, TopicName,
};

use super::metadata::{internal_topic, unknown_topic_code, uuid};
use super::{Ctx, Fatal, NODE_ID, Reply, Request, kstr};
use crate::security::acl::{AclOperation, ResourceType};
use crate::server::cluster_view::{ClusterBroker, NO_LEADER, PartitionLayout, TopicLayout};

/// Kafka's default `max.request.partition.size.limit`: the most partitions one
/// DescribeTopicPartitions response carries, whatever the client asks for.
pub(crate) const DEFAULT_MAX_REQUEST_PARTITION_SIZE_LIMIT: i32 = 2000;

/// The operations on a topic whose bits `topic_authorized_operations` may have set
/// (Kafka's `AclEntry.supportedOperations(TOPIC)`).
const TOPIC_OPERATIONS: [AclOperation; 8] = [
    AclOperation::Read,
    AclOperation::Write,
    AclOperation::Create,
    AclOperation::Delete,
    AclOperation::Alter,
    AclOperation::Describe,
    AclOperation::DescribeConfigs,
    AclOperation::AlterConfigs,
];

/// What one topic is, as far as this answer is concerned.
enum Found {
    /// It exists, with this layout.
    Topic(TopicLayout),
    /// It is being created on this cluster node (not ready to be described yet).
    BeingCreated,
    /// There is no such topic.
    Missing,
}

pub(super) fn handle(ctx: &Ctx<'_>, req: &mut Request) -> Result<Reply, Fatal> {
    let request: DescribeTopicPartitionsRequest = req.decode()?;
    let all = request.topics.is_empty();
    let cursor = request
        .cursor
        .as_ref()
        .map(|c| (c.topic_name.0.to_string(), c.partition_index));
    let from = cursor.as_ref().map_or("", |(name, _)| name.as_str());
    let asked: BTreeSet<String> = request
        .topics
        .iter()
        .map(|t| t.name.0.to_string())
        .collect();
    if let Some((name, partition)) = &cursor
        && ((!all && !asked.contains(name)) || *partition < 0)
    {
        tracing::debug!(peer = %ctx.peer, cursor = %name, partition, "DescribeTopicPartitions: invalid cursor");
        let topics = asked.into_iter().map(|n| invalid_request(&n)).collect();
        return req.respond(&DescribeTopicPartitionsResponse::default().with_topics(topics));
    }
    let (brokers, names) = match ctx.backend().cluster() {
        Some(cluster) => (
            cluster.brokers(ctx.listener),
            if all {
                cluster.topic_names()
            } else {
                asked.into_iter().collect()
            },
        ),
        None => (
            single_node_brokers(ctx),
            if all {
                ctx.backend().topic_names()
            } else {
                asked.into_iter().collect()
            },
        ),
    };
    // Sorted, from the cursor's topic on; the ones the principal may not describe are
    // left out of every topic, and refused when asked for by name (after the page).
    let mut names: Vec<String> = names.into_iter().filter(|n| n.as_str() >= from).collect();
    names.sort();
    names.dedup();
    let mut refused = Vec::new();
    names.retain(|n| {
        let ok = if all {
            ctx.permits(AclOperation::Describe, ResourceType::Topic, n)
        } else {
            ctx.allowed(AclOperation::Describe, ResourceType::Topic, n)
        };
        if !ok && !all {
            refused.push(unauthorized(n));
        }
        ok
    });
    let found = find(ctx, &names);
    let limit = request
        .response_partition_limit
        .min(ctx.shared.config.max_request_partition_size_limit)
        .max(1);
    let first = |name: &str| match &cursor {
        Some((topic, p)) if topic == name => *p,
        _ => 0,
    };
    let (mut topics, next_cursor) = page(names, found, limit, first, all, &brokers);
    for t in &mut topics {
        let name = t.name.as_ref().map_or("", |n| n.0.as_str());
        t.topic_authorized_operations = authorized_operations(ctx, name);
    }
    topics.extend(refused);
    req.respond(
        &DescribeTopicPartitionsResponse::default()
            .with_topics(topics)
            .with_next_cursor(next_cursor),
    )
}

/// The topics of `names` (in order): on a cluster node from its [`ClusterView`], on a
/// single node from the broker.
fn find(ctx: &Ctx<'_>, names: &[String]) -> Vec<Found> {
    let backend = ctx.backend();
    if let Some(cluster) = backend.cluster() {
        let being_created = cluster.topics_being_created();
        return names
            .iter()
            .zip(cluster.topics(names))
            .map(|(name, layout)| match layout {
                Some(t) => Found::Topic(t),
                None if being_created.contains(name) => Found::BeingCreated,
                None => Found::Missing,
            })
            .collect();
    }
    names
        .iter()
        .map(|name| {
            let Some(count) = backend.partition_count(name) else {
                return Found::Missing;
            };
            let offline = backend.offline_partitions(name);
            let partitions = (0..count)
                .map(|p| {
                    let here = vec![NODE_ID];
                    let failed = offline.contains_key(&p);
                    PartitionLayout {
                        leader: if failed { NO_LEADER } else { NODE_ID },
                        leader_epoch: -1,
                        replicas: here.clone(),
                        isr: here.clone(),
                        offline: if failed { here } else { Vec::new() },
                    }
                })
                .collect();
            Found::Topic(TopicLayout {
                id: backend.topic_id(name).unwrap_or_default(),
                internal: internal_topic(name),
                partitions,
            })
        })
        .collect()
}

/// A single node as the only broker, at its address for the request's listener.
fn single_node_brokers(ctx: &Ctx<'_>) -> Vec<ClusterBroker> {
    vec![ClusterBroker {
        id: NODE_ID,
        fenced: false,
        endpoint: Some(ctx.advertised()),
        rack: None,
    }]
}

/// One page of topics (sorted, each with what `find` found), at most `limit` partitions,
/// the first topic's from `first(name)` on; and the cursor of what is left, if anything.
/// Topics that do not exist are answered as such when asked for by name, and left out
/// when every topic is asked for (as Kafka does); a topic that cannot start on this page
/// is where the next cursor points.
fn page(
    names: Vec<String>,
    found: Vec<Found>,
    limit: i32,
    first: impl Fn(&str) -> i32,
    all: bool,
    brokers: &[ClusterBroker],
) -> (Vec<DescribeTopicPartitionsResponseTopic>, Option<Cursor>) {
    let mut remaining = i64::from(limit);
    let mut topics = Vec::new();
    for (name, found) in names.into_iter().zip(found) {
        if remaining == 0 {
            return (topics, Some(cursor(name, 0)));
        }
        let t = match found {
            Found::Topic(t) => t,
            Found::BeingCreated | Found::Missing if all => continue,
            Found::BeingCreated => {
                topics.push(failed(&name, ResponseError::LeaderNotAvailable.code()));
                continue;
            }
            Found::Missing => {
                topics.push(failed(&name, unknown_topic_code(&name)));
                continue;
            }
        };
        let count = t.partitions.len() as i64;
        let start = i64::from(first(&name));
        let end = count.min(start + remaining);
        let partitions: Vec<DescribeTopicPartitionsResponsePartition> = (start..end)
            .map(|i| partition(i as i32, &t.partitions[i as usize], brokers))
            .collect();
        remaining -= partitions.len() as i64;
        let topic = DescribeTopicPartitionsResponseTopic::default()
            .with_name(Some(TopicName(kstr(name.clone()))))
            .with_topic_id(uuid(t.id))
            .with_is_internal(t.internal)
            .with_partitions(partitions);
        topics.push(topic);
        if end < count {
            return (topics, Some(cursor(name, end as i32)));
        }
    }
    (topics, None)
}

/// One partition as Kafka describes it: the leader if it is reachable on the request's
/// listener (else -1, with no error), and the replicas offline: on a broker fenced,
/// unknown or without the listener, or in a log directory that failed.
fn partition(
    index: i32,
    p: &PartitionLayout,
    brokers: &[ClusterBroker],
) -> DescribeTopicPartitionsResponsePartition {
    let reachable = |id: i32| brokers.iter().any(|b| b.id == id && b.endpoint.is_some());
    let online = |id: i32| {
        brokers
            .iter()
            .any(|b| b.id == id && !b.fenced && b.endpoint.is_some())
            && !p.offline.contains(&id)
    };
    let leader = if p.leader != NO_LEADER && reachable(p.leader) {
        p.leader
    } else {
        NO_LEADER
    };
    let ids = |v: &[i32]| v.iter().copied().map(BrokerId).collect::<Vec<_>>();
    let offline: Vec<i32> = p.replicas.iter().copied().filter(|r| !online(*r)).collect();
    DescribeTopicPartitionsResponsePartition::default()
        .with_partition_index(index)
        .with_leader_id(BrokerId(leader))
        .with_leader_epoch(p.leader_epoch)
        .with_replica_nodes(ids(&p.replicas))
        .with_isr_nodes(ids(&p.isr))
        .with_eligible_leader_replicas(Some(Vec::new()))
        .with_last_known_elr(Some(Vec::new()))
        .with_offline_replicas(ids(&offline))
}

/// The bits (1 << Kafka's operation code) of the operations on topic `name` the
/// connection's principal may do; every topic operation without an authorizer.
fn authorized_operations(ctx: &Ctx<'_>, name: &str) -> i32 {
    TOPIC_OPERATIONS
        .iter()
        .filter(|op| ctx.permits(**op, ResourceType::Topic, name))
        .fold(0, |bits, op| bits | 1 << op.code())
}

fn cursor(name: String, partition: i32) -> Cursor {
    Cursor::default()
        .with_topic_name(TopicName(kstr(name)))
        .with_partition_index(partition)
}

/// The answer for a topic asked for that is not described: `code`, its name, and whether
/// its name is an internal topic's.
fn failed(name: &str, code: i16) -> DescribeTopicPartitionsResponseTopic {
    DescribeTopicPartitionsResponseTopic::default()
        .with_error_code(code)
        .with_name(Some(TopicName(kstr(name))))
        .with_is_internal(internal_topic(name))
}

/// The answer for a topic the principal may not describe (nothing about it disclosed).
fn unauthorized(name: &str) -> DescribeTopicPartitionsResponseTopic {
    DescribeTopicPartitionsResponseTopic::default()
        .with_error_code(ResponseError::TopicAuthorizationFailed.code())
        .with_name(Some(TopicName(kstr(name))))
}

/// The answer for each topic of a request with a bad cursor.
fn invalid_request(name: &str) -> DescribeTopicPartitionsResponseTopic {
    DescribeTopicPartitionsResponseTopic::default()
        .with_error_code(ResponseError::InvalidRequest.code())
        .with_name(Some(TopicName(kstr(name))))
}
