//! CreateTopics (key 19), versions 0-6 (v0 has no `validate_only`; from v5 a created
//! topic's answer gives its partition count, replication factor and settings). One node: a replication factor above 1 is
//! refused, replica assignments are ignored. A cluster node proposes each topic to the
//! controller, with its replication factor (-1: `default.replication.factor`) or the
//! client's replica assignment, and answers once the topic is applied here (or
//! REQUEST_TIMED_OUT); `validate_only` checks against the cluster's current metadata.
//!
//! As in Kafka: a topic named twice in one request is INVALID_REQUEST (every copy), a
//! partition count of 0 or below -1 INVALID_PARTITIONS, a replication factor of 0 or
//! below -1 INVALID_REPLICATION_FACTOR.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::create_topics_response::{
    CreatableTopicConfigs, CreatableTopicResult,
};
use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse};

use super::{Ctx, Fatal, Reply, Request, describe_configs, error_code, kstr};
use crate::security::acl::{AclOperation, ResourceType};
use crate::security::denied_code;
use crate::server::cluster_view::{ClusterView, TopicSpec};

pub(super) fn handle(ctx: &Ctx<'_>, req: &mut Request) -> Result<Reply, Fatal> {
    let request: CreateTopicsRequest = req.decode()?;
    let backend = ctx.backend();
    if let Some(cluster) = backend.cluster() {
        return handle_cluster(ctx, req, request, cluster);
    }
    let duplicates = duplicates(&request);
    let topics = request
        .topics
        .into_iter()
        .map(|t| {
            let name = t.name.0.to_string();
            let configs = configs_of(ctx, &t);
            let result = CreatableTopicResult::default().with_name(t.name.clone());
            let outcome = if duplicates.contains(&name) {
                Err(duplicate(&name))
            } else if !ctx.may_create_topic(&name) {
                Err((
                    denied_code(ResourceType::Topic),
                    format!("not authorized to create topic {name:?}"),
                ))
            } else if t.replication_factor == 0 || t.replication_factor < -1 {
                Err((
                    ResponseError::InvalidReplicationFactor.code(),
                    format!(
                        "replication factor {} is not valid: it must be at least 1, or -1 for the default",
                        t.replication_factor
                    ),
                ))
            } else if t.replication_factor > 1 {
                Err((
                    ResponseError::InvalidReplicationFactor.code(),
                    format!(
                        "replication factor {} is above the 1 node of this cluster",
                        t.replication_factor
                    ),
                ))
            } else if t.num_partitions == 0 || t.num_partitions < -1 {
                Err((
                    ResponseError::InvalidPartitions.code(),
                    format!("{} partitions is not a valid count", t.num_partitions),
                ))
            } else {
                let r = if request.validate_only {
                    backend.validate_topic(&name, t.num_partitions, &configs)
                } else {
                    backend.create_topic(&name, t.num_partitions, &configs)
                };
                r.map_err(|e| (error_code(&e), e.to_string()))
            };
            match outcome {
                Ok(()) => {
                    if !request.validate_only {
                        tracing::info!(topic = %name, peer = %ctx.peer, client_id = req.client_id(), "topic created");
                    }
                    let partitions = backend.partition_count(&name).unwrap_or(t.num_partitions);
                    let result = result.with_num_partitions(partitions).with_replication_factor(1);
                    with_configs(ctx, result, &name, req.version())
                }
                Err((code, message)) => result
                    .with_error_code(code)
                    .with_error_message(Some(kstr(message))),
            }
        })
        .collect();
    req.respond(&CreateTopicsResponse::default().with_topics(topics))
}

/// From v5 a created topic's answer lists its settings, as DescribeConfigs would
/// (Kafka's `configs`), when the principal may describe them; otherwise
/// `topic_config_error_code` says why. Nothing for a topic not created here
/// (`validate_only`), whose settings are not known yet.
fn with_configs(
    ctx: &Ctx<'_>,
    result: CreatableTopicResult,
    name: &str,
    version: i16,
) -> CreatableTopicResult {
    if version < 5 || ctx.backend().partition_count(name).is_none() {
        return result;
    }
    if let Err((code, _)) = ctx.check(AclOperation::DescribeConfigs, ResourceType::Topic, name) {
        return result.with_topic_config_error_code(code);
    }
    match describe_configs::topic_configs(ctx, name) {
        Ok((pairs, overridden)) => result.with_configs(Some(
            pairs
                .into_iter()
                .map(|(k, v)| {
                    let source = describe_configs::config_source(&k, &overridden);
                    CreatableTopicConfigs::default()
                        .with_name(kstr(k))
                        .with_value(Some(kstr(v)))
                        .with_config_source(source)
                })
                .collect(),
        )),
        Err(e) => result.with_topic_config_error_code(error_code(&e)),
    }
}

/// The names the request lists more than once.
fn duplicates(request: &CreateTopicsRequest) -> std::collections::HashSet<String> {
    let mut seen = std::collections::HashSet::new();
    request
        .topics
        .iter()
        .map(|t| t.name.0.to_string())
        .filter(|n| !seen.insert(n.clone()))
        .collect()
}

/// The refusal of a topic the request names more than once.
fn duplicate(name: &str) -> (i16, String) {
    (
        ResponseError::InvalidRequest.code(),
        format!("topic {name:?} appears more than once in the request"),
    )
}

/// The config overrides a topic asks for, without those Kafka ignores
/// (`message.format.version`, logged).
fn configs_of(ctx: &Ctx<'_>, t: &CreatableTopic) -> Vec<(String, String)> {
    let configs = t
        .configs
        .iter()
        .filter_map(|c| {
            c.value
                .as_ref()
                .map(|v| (c.name.to_string(), v.to_string()))
        })
        .collect();
    super::alter_configs::without_ignored(ctx.peer, t.name.0.as_str(), configs)
}

/// A client's replica assignment, partition by partition, or an error code and message.
fn assignment_of(t: &CreatableTopic) -> Result<Option<Vec<Vec<i32>>>, (i16, String)> {
    if t.assignments.is_empty() {
        return Ok(None);
    }
    if t.num_partitions != -1 || t.replication_factor != -1 {
        return Err((
            ResponseError::InvalidRequest.code(),
            "a replica assignment goes with num_partitions and replication_factor -1".into(),
        ));
    }
    let mut by_partition: Vec<(i32, Vec<i32>)> = t
        .assignments
        .iter()
        .map(|a| {
            (
                a.partition_index,
                a.broker_ids.iter().map(|b| b.0).collect(),
            )
        })
        .collect();
    by_partition.sort_by_key(|(p, _)| *p);
    if by_partition
        .iter()
        .enumerate()
        .any(|(i, (p, _))| *p != i as i32)
    {
        return Err((
            ResponseError::InvalidReplicaAssignment.code(),
            "the assignment must list partitions 0, 1, 2, ... once each".into(),
        ));
    }
    Ok(Some(by_partition.into_iter().map(|(_, r)| r).collect()))
}

/// CreateTopics on a cluster node.
fn handle_cluster(
    ctx: &Ctx<'_>,
    req: &mut Request,
    request: CreateTopicsRequest,
    cluster: &dyn ClusterView,
) -> Result<Reply, Fatal> {
    let timeout = std::time::Duration::from_millis(request.timeout_ms.clamp(1000, 60_000) as u64);
    let duplicates = duplicates(&request);
    let topics = request
        .topics
        .iter()
        .map(|t| {
            let name = t.name.0.to_string();
            let result = CreatableTopicResult::default().with_name(t.name.clone());
            let allowed = if duplicates.contains(&name) {
                Err(duplicate(&name))
            } else if ctx.may_create_topic(&name) {
                Ok(())
            } else {
                Err((
                    denied_code(ResourceType::Topic),
                    format!("not authorized to create topic {name:?}"),
                ))
            };
            let outcome = allowed
                .and_then(|()| assignment_of(t))
                .and_then(|assignment| {
                    if assignment.is_none() && (t.num_partitions == 0 || t.num_partitions < -1) {
                        return Err((
                            ResponseError::InvalidPartitions.code(),
                            format!("{} partitions is not a valid count", t.num_partitions),
                        ));
                    }
                    if assignment.is_none()
                        && (t.replication_factor == 0 || t.replication_factor < -1)
                    {
                        return Err((
                            ResponseError::InvalidReplicationFactor.code(),
                            format!("replication factor {} is not valid", t.replication_factor),
                        ));
                    }
                    let topic = TopicSpec {
                        name: name.clone(),
                        partitions: t.num_partitions,
                        replication_factor: t.replication_factor,
                        assignment,
                        configs: configs_of(ctx, t),
                    };
                    cluster
                        .create_topic(&topic, request.validate_only, timeout)
                        .map_err(|e| (error_code(&e), e.to_string()))
                });
            match outcome {
                Ok(()) => {
                    if !request.validate_only {
                        tracing::info!(topic = %name, peer = %ctx.peer, client_id = req.client_id(), "topic created");
                    }
                    let (partitions, rf) =
                        cluster
                            .topic(&name)
                            .map_or((t.num_partitions, t.replication_factor), |t| {
                                (
                                    t.partitions.len() as i32,
                                    t.partitions.first().map_or(-1, |p| p.replicas.len() as i16),
                                )
                            });
                    let result = result
                        .with_num_partitions(partitions)
                        .with_replication_factor(rf);
                    with_configs(ctx, result, &name, req.version())
                }
                Err((code, message)) => result
                    .with_error_code(code)
                    .with_error_message(Some(kstr(message))),
            }
        })
        .collect();
    req.respond(&CreateTopicsResponse::default().with_topics(topics))
}
