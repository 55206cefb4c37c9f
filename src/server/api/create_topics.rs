//! CreateTopics (key 19), versions 2-4. One node: a replication factor above 1 is
//! refused, replica assignments are ignored.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse};

use super::{Ctx, Fatal, Reply, Request, error_code, kstr};

pub(super) fn handle(ctx: &Ctx<'_>, req: &mut Request) -> Result<Reply, Fatal> {
    let request: CreateTopicsRequest = req.decode()?;
    let backend = ctx.backend();
    let topics = request
        .topics
        .into_iter()
        .map(|t| {
            let name = t.name.0.to_string();
            let configs: Vec<(String, String)> = t
                .configs
                .iter()
                .filter_map(|c| {
                    c.value
                        .as_ref()
                        .map(|v| (c.name.to_string(), v.to_string()))
                })
                .collect();
            let result = CreatableTopicResult::default().with_name(t.name.clone());
            let outcome = if t.replication_factor > 1 {
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
                        tracing::info!(topic = %name, peer = %ctx.peer, "topic created");
                    }
                    result
                }
                Err((code, message)) => result
                    .with_error_code(code)
                    .with_error_message(Some(kstr(message))),
            }
        })
        .collect();
    req.respond(&CreateTopicsResponse::default().with_topics(topics))
}
