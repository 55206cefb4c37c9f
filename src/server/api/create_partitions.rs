//! CreatePartitions (key 37), versions 0-3: grow topics over the wire (Kafka's
//! `kafka-topics --alter --partitions`). Per topic: an unknown topic is
//! UNKNOWN_TOPIC_OR_PARTITION; a count that does not grow it INVALID_PARTITIONS; manual
//! assignments must name this node once per new partition (INVALID_REPLICA_ASSIGNMENT);
//! a topic named twice in one request INVALID_REQUEST; the internal offsets topic cannot
//! grow (INVALID_REQUEST: its partition count places the groups). `validate_only` checks
//! without changing anything.

use std::collections::HashMap;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::{CreatePartitionsRequest, CreatePartitionsResponse};

use super::{Ctx, Fatal, NODE_ID, Reply, Request, error_code, kstr};
use crate::security::acl::{AclOperation, ResourceType};
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;

pub(super) fn handle(ctx: &Ctx<'_>, req: &mut Request) -> Result<Reply, Fatal> {
    let request: CreatePartitionsRequest = req.decode()?;
    let mut seen: HashMap<String, usize> = HashMap::new();
    for t in &request.topics {
        *seen.entry(t.name.0.to_string()).or_default() += 1;
    }
    let results = request
        .topics
        .iter()
        .map(|t| {
            let name = t.name.0.to_string();
            let outcome = if seen[&name] > 1 {
                Err((
                    ResponseError::InvalidRequest.code(),
                    format!("topic {name:?} appears more than once in the request"),
                ))
            } else {
                ctx.check(AclOperation::Alter, ResourceType::Topic, &name)
                    .and_then(|()| grow(ctx, &name, t, request.validate_only))
            };
            let result = CreatePartitionsTopicResult::default()
                .with_name(t.name.clone())
                .with_error_message(None);
            match outcome {
                Ok(()) => result,
                Err((code, message)) => {
                    tracing::debug!(peer = %ctx.peer, topic = %name, code, "CreatePartitions refused: {message}");
                    result
                        .with_error_code(code)
                        .with_error_message(Some(kstr(message)))
                }
            }
        })
        .collect();
    req.respond(&CreatePartitionsResponse::default().with_results(results))
}

fn grow(
    ctx: &Ctx<'_>,
    name: &str,
    t: &CreatePartitionsTopic,
    validate_only: bool,
) -> Result<(), (i16, String)> {
    let backend = ctx.backend();
    let Some(current) = backend.partition_count(name) else {
        return Err((
            ResponseError::UnknownTopicOrPartition.code(),
            format!("unknown topic {name:?}"),
        ));
    };
    if name == crate::broker::OFFSETS_TOPIC
        || name == crate::transaction::log::TRANSACTION_STATE_TOPIC
    {
        return Err((
            ResponseError::InvalidRequest.code(),
            format!("{name} is internal: its partition count cannot change"),
        ));
    }
    if t.count <= current {
        let message = if t.count == current {
            format!("topic {name:?} already has {current} partitions")
        } else {
            format!(
                "topic {name:?} has {current} partitions, more than the {} asked for: partitions can only be added",
                t.count
            )
        };
        return Err((ResponseError::InvalidPartitions.code(), message));
    }
    if let Some(assignments) = &t.assignments {
        let new = (t.count - current) as usize;
        if assignments.len() != new {
            return Err((
                ResponseError::InvalidReplicaAssignment.code(),
                format!(
                    "{} assignments given for the {new} new partitions of {name:?}",
                    assignments.len()
                ),
            ));
        }
        if let Some(a) = assignments
            .iter()
            .find(|a| a.broker_ids.len() != 1 || a.broker_ids[0].0 != NODE_ID)
        {
            let ids: Vec<i32> = a.broker_ids.iter().map(|b| b.0).collect();
            return Err((
                ResponseError::InvalidReplicaAssignment.code(),
                format!("replicas {ids:?}: this cluster has one broker, node {NODE_ID}"),
            ));
        }
    }
    backend
        .create_partitions(name, t.count, validate_only)
        .map_err(|e| (error_code(&e), e.to_string()))?;
    if !validate_only {
        tracing::info!(topic = %name, peer = %ctx.peer, partitions = t.count, "partitions added");
    }
    Ok(())
}
