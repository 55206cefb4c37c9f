//! Metadata (key 3), versions 0-12: the brokers, the controller and the topics asked for,
//! created on the fly when the request allows it and the server is configured to
//! (`auto_create_topics`: the broker's setting unless the server builder says otherwise;
//! `tidelog serve` turns it on).
//!
//! From v10 each topic carries its topic id (KIP-516), and v12 may ask for topics by id
//! (an id no topic has is UNKNOWN_TOPIC_ID). A topic deleted and created again under the
//! same name has a new id: clients (librdkafka among them) forget the old topic's
//! partitions only when the id changes.
//!
//! A single node is the only broker and leads every partition, but one in a log
//! directory that failed (or was unusable at start): that one has no leader
//! (LEADER_NOT_AVAILABLE, leader -1) and the node among its offline replicas, as Kafka
//! answers when a partition's only replica is offline. A cluster node answers
//! from its [`ClusterView`]: the unfenced brokers at their advertised endpoints of the
//! listener the request came in on (a broker without that listener is left out), the
//! Raft leader as controller, and per partition the leader (LEADER_NOT_AVAILABLE when
//! there is none or it lacks the listener), leader epoch, replicas, ISR and offline
//! replicas (those on fenced brokers, and those whose log directory failed on their
//! broker).

use kafka_protocol::ResponseError;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse, TopicName};

use super::{Ctx, Fatal, NODE_ID, Reply, Request, error_code, kstr};
use crate::security::acl::{AclOperation, ResourceType};
use crate::server::cluster_view::{
    ClusterBroker, ClusterView, NO_LEADER, PartitionLayout, TopicSpec,
};

/// The name of the internal offsets topic, flagged `is_internal`.
const OFFSETS_TOPIC: &str = "__consumer_offsets";

/// "Not requested" for the authorized-operations fields (v8).
const OPERATIONS_OMITTED: i32 = i32::MIN;

/// How long a Metadata request waits for the controller to create a topic.
const AUTO_CREATE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

pub(super) fn handle(ctx: &Ctx<'_>, req: &mut Request) -> Result<Reply, Fatal> {
    let request: MetadataRequest = req.decode()?;
    let version = req.version();
    let backend = ctx.backend();
    if let Some(cluster) = backend.cluster() {
        return handle_cluster(ctx, req, request, cluster);
    }
    // v0: an empty list means every topic; v1+: null means every topic.
    let (wanted, unknown_ids) = wanted_topics(&request, version, |id| {
        backend
            .topic_names()
            .into_iter()
            .find(|n| backend.topic_id(n).as_ref() == Some(id))
    });
    let allow_create =
        (version < 4 || request.allow_auto_topic_creation) && ctx.shared.config.auto_create_topics;
    let all = wanted.is_none();
    let names = match wanted {
        None => ctx.describable(backend.topic_names()),
        Some(names) => names,
    };
    let mut topics = Vec::with_capacity(names.len());
    for name in names {
        if !all && !ctx.allowed(AclOperation::Describe, ResourceType::Topic, &name) {
            topics.push(unauthorized(name));
            continue;
        }
        let mut count = backend.partition_count(&name);
        let mut error = 0;
        if count.is_none() {
            if allow_create && !ctx.may_create_topic(&name) {
                error = ResponseError::TopicAuthorizationFailed.code();
            } else if allow_create {
                match backend.create_topic(&name, -1, &[]) {
                    Ok(()) => {
                        tracing::info!(topic = %name, peer = %ctx.peer, client_id = req.client_id(), "topic created by a Metadata request");
                    }
                    Err(crate::error::Error::TopicExists(_)) => {}
                    Err(e) => {
                        tracing::info!(topic = %name, error = %e, "cannot auto-create topic");
                        error = error_code(&e);
                    }
                }
                count = backend.partition_count(&name);
            }
            if count.is_none() && error == 0 {
                error = unknown_topic_code(&name);
            }
        }
        let offline = backend.offline_partitions(&name);
        let partitions = (0..count.unwrap_or(0))
            .map(|p| single_node_partition(p, offline.contains_key(&p)))
            .collect();
        let id = backend.topic_id(&name).unwrap_or_default();
        topics.push(
            MetadataResponseTopic::default()
                .with_error_code(error)
                .with_is_internal(internal_topic(&name))
                .with_name(Some(TopicName(kstr(name))))
                .with_topic_id(uuid(id))
                .with_partitions(partitions)
                .with_topic_authorized_operations(OPERATIONS_OMITTED),
        );
    }
    topics.extend(unknown_ids.into_iter().map(unknown_id));
    let (host, port) = ctx.advertised();
    let response = MetadataResponse::default()
        .with_brokers(vec![
            MetadataResponseBroker::default()
                .with_node_id(BrokerId(NODE_ID))
                .with_host(kstr(host))
                .with_port(port),
        ])
        .with_cluster_id(Some(kstr(ctx.shared.cluster_id.clone())))
        .with_controller_id(BrokerId(NODE_ID))
        .with_topics(topics)
        .with_cluster_authorized_operations(OPERATIONS_OMITTED);
    req.respond(&response)
}

/// One partition of a single node, which is its only replica: led here, or, when its
/// log directory failed (offline), without a leader as Kafka answers once the
/// controller finds no replica to elect: LEADER_NOT_AVAILABLE, leader -1, and this
/// node among the offline replicas (the ISR keeps its last member).
fn single_node_partition(index: i32, offline: bool) -> MetadataResponsePartition {
    let here = vec![BrokerId(NODE_ID)];
    let partition = MetadataResponsePartition::default()
        .with_partition_index(index)
        .with_leader_epoch(-1)
        .with_replica_nodes(here.clone())
        .with_isr_nodes(here.clone());
    if offline {
        partition
            .with_error_code(ResponseError::LeaderNotAvailable.code())
            .with_leader_id(BrokerId(NO_LEADER))
            .with_offline_replicas(here)
    } else {
        partition.with_leader_id(BrokerId(NODE_ID))
    }
}

/// Whether `name` is one of the internal topics a single node keeps (flagged
/// `is_internal`).
pub(super) fn internal_topic(name: &str) -> bool {
    name == OFFSETS_TOPIC
        || name == crate::transaction::log::TRANSACTION_STATE_TOPIC
        || name == crate::coordinator::SHARE_GROUP_STATE_TOPIC
}

/// A topic id on the wire.
pub(super) fn uuid<T: TryFrom<Vec<u8>> + Default>(id: [u8; 16]) -> T {
    id.to_vec().try_into().unwrap_or_default()
}

/// The answer for a topic asked for by an id no topic has (v12).
fn unknown_id(id: [u8; 16]) -> MetadataResponseTopic {
    MetadataResponseTopic::default()
        .with_error_code(ResponseError::UnknownTopicId.code())
        .with_topic_id(uuid(id))
        .with_topic_authorized_operations(OPERATIONS_OMITTED)
}

/// The answer for a topic the principal may not describe (or create).
fn unauthorized(name: String) -> MetadataResponseTopic {
    MetadataResponseTopic::default()
        .with_error_code(ResponseError::TopicAuthorizationFailed.code())
        .with_name(Some(TopicName(kstr(name))))
        .with_topic_authorized_operations(OPERATIONS_OMITTED)
}

/// The code for a topic that does not exist: INVALID_TOPIC_EXCEPTION if its name is not
/// a valid one, else UNKNOWN_TOPIC_OR_PARTITION (Kafka's rule).
pub(super) fn unknown_topic_code(name: &str) -> i16 {
    if crate::config::validate_topic_name(name).is_err() {
        ResponseError::InvalidTopicException.code()
    } else {
        ResponseError::UnknownTopicOrPartition.code()
    }
}

/// The topics a request asks for (None = every topic): by name, or by topic id (v12; a
/// topic with a non-zero id is looked up by it), and the ids that `name_of` finds no
/// topic of.
fn wanted_topics(
    request: &MetadataRequest,
    version: i16,
    name_of: impl Fn(&[u8; 16]) -> Option<String>,
) -> (Option<Vec<String>>, Vec<[u8; 16]>) {
    let mut unknown = Vec::new();
    let names = match &request.topics {
        None => None,
        Some(t) if t.is_empty() && version == 0 => None,
        Some(t) => Some(
            t.iter()
                .filter_map(|t| {
                    let id = *t.topic_id.as_bytes();
                    if id == [0; 16] {
                        return t.name.as_ref().map(|n| n.0.to_string());
                    }
                    let name = name_of(&id);
                    if name.is_none() {
                        unknown.push(id);
                    }
                    name
                })
                .collect(),
        ),
    };
    (names, unknown)
}

fn broker_ids(ids: &[i32]) -> Vec<BrokerId> {
    ids.iter().copied().map(BrokerId).collect()
}

/// Metadata of a cluster node, from its [`ClusterView`].
fn handle_cluster(
    ctx: &Ctx<'_>,
    req: &mut Request,
    request: MetadataRequest,
    cluster: &dyn ClusterView,
) -> Result<Reply, Fatal> {
    let version = req.version();
    let allow_create =
        (version < 4 || request.allow_auto_topic_creation) && ctx.shared.config.auto_create_topics;
    let (wanted, unknown_ids) = wanted_topics(&request, version, |id| {
        let names = cluster.topic_names();
        let layouts = cluster.topics(&names);
        names
            .into_iter()
            .zip(layouts)
            .find_map(|(n, l)| l.is_some_and(|l| l.id == *id).then_some(n))
    });
    if allow_create && let Some(names) = &wanted {
        auto_create(ctx, req, cluster, names);
    }
    let all = wanted.is_none();
    // Created, and this node is opening their partitions: listed with Kafka's answer for
    // a topic being created, which clients retry (a consumer whose subscribed topic is
    // missing from Metadata, or UNKNOWN_TOPIC_OR_PARTITION, reports it as not there).
    let being_created = cluster.topics_being_created();
    let names = wanted.unwrap_or_else(|| {
        let mut names = cluster.topic_names();
        names.extend(being_created.iter().cloned());
        names.sort();
        ctx.describable(names)
    });
    let brokers = cluster.brokers(ctx.listener);
    let layouts = cluster.topics(&names);
    let mut topics: Vec<MetadataResponseTopic> = names
        .into_iter()
        .zip(layouts)
        .map(|(name, layout)| {
            if !all && !ctx.allowed(AclOperation::Describe, ResourceType::Topic, &name) {
                return unauthorized(name);
            }
            let topic = MetadataResponseTopic::default()
                .with_name(Some(TopicName(kstr(name.clone()))))
                .with_topic_authorized_operations(OPERATIONS_OMITTED);
            let Some(t) = layout else {
                if being_created.contains(&name) {
                    return topic.with_error_code(ResponseError::LeaderNotAvailable.code());
                }
                return topic.with_error_code(unknown_topic_code(&name));
            };
            let partitions = t
                .partitions
                .iter()
                .enumerate()
                .map(|(i, p)| partition(i, p, &brokers))
                .collect();
            topic
                .with_topic_id(uuid(t.id))
                .with_is_internal(t.internal)
                .with_partitions(partitions)
        })
        .collect();
    topics.extend(unknown_ids.into_iter().map(unknown_id));
    // Every broker at its endpoint of the listener the request came in on; one without
    // that listener is left out (Kafka logs it the same way).
    let brokers = brokers
        .into_iter()
        .filter(|b| !b.fenced)
        .filter_map(|b| {
            let Some((host, port)) = b.endpoint else {
                tracing::debug!(
                    broker = b.id,
                    listener = ctx.listener,
                    "broker has no endpoint for the listener: left out of Metadata"
                );
                return None;
            };
            Some(
                MetadataResponseBroker::default()
                    .with_node_id(BrokerId(b.id))
                    .with_host(kstr(host))
                    .with_port(port)
                    .with_rack(b.rack.map(kstr)),
            )
        })
        .collect();
    let response = MetadataResponse::default()
        .with_brokers(brokers)
        .with_cluster_id(cluster.cluster_id().map(kstr))
        .with_controller_id(BrokerId(cluster.controller_id().unwrap_or(-1)))
        .with_topics(topics)
        .with_cluster_authorized_operations(OPERATIONS_OMITTED);
    req.respond(&response)
}

/// Creates the topics of `names` that do not exist (and the principal may create)
/// through the controller, as a Metadata request that allows it does.
fn auto_create(ctx: &Ctx<'_>, req: &Request, cluster: &dyn ClusterView, names: &[String]) {
    let layouts = cluster.topics(names);
    let being_created = cluster.topics_being_created();
    for (name, _) in names.iter().zip(layouts).filter(|(_, l)| l.is_none()) {
        if being_created.contains(name) || !ctx.may_create_topic(name) {
            continue;
        }
        let topic = TopicSpec {
            name: name.clone(),
            partitions: -1,
            replication_factor: -1,
            ..Default::default()
        };
        match cluster.create_topic(&topic, false, AUTO_CREATE_TIMEOUT) {
            Ok(()) => {
                tracing::info!(topic = %name, peer = %ctx.peer, client_id = req.client_id(), "topic created by a Metadata request");
            }
            Err(e) => tracing::info!(topic = %name, error = %e, "cannot auto-create topic"),
        }
    }
}

/// One partition of a cluster's topic in Metadata: its leader (LEADER_NOT_AVAILABLE
/// when there is none or it lacks the request's listener, as Kafka answers), leader
/// epoch, replicas, ISR and the replicas offline: on brokers that are fenced or gone, or
/// in a log directory that failed on their broker.
fn partition(
    index: usize,
    p: &PartitionLayout,
    brokers: &[ClusterBroker],
) -> MetadataResponsePartition {
    let unfenced = |id: i32| brokers.iter().any(|b| b.id == id && !b.fenced);
    let offline: Vec<i32> = p
        .replicas
        .iter()
        .copied()
        .filter(|r| !unfenced(*r) || p.offline.contains(r))
        .collect();
    let reachable = p.leader != NO_LEADER
        && brokers
            .iter()
            .any(|b| b.id == p.leader && b.endpoint.is_some());
    let (error, leader) = if reachable {
        (0, p.leader)
    } else {
        (ResponseError::LeaderNotAvailable.code(), NO_LEADER)
    };
    MetadataResponsePartition::default()
        .with_error_code(error)
        .with_partition_index(index as i32)
        .with_leader_id(BrokerId(leader))
        .with_leader_epoch(p.leader_epoch)
        .with_replica_nodes(broker_ids(&p.replicas))
        .with_isr_nodes(broker_ids(&p.isr))
        .with_offline_replicas(broker_ids(&offline))
}
