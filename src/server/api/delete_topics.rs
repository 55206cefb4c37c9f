//! DeleteTopics (key 20), versions 0-5 (an error message from v5). A cluster node deletes through the controller and
//! answers once the deletion is applied here (its local logs are gone).
//!
//! Per topic, as Kafka: a name listed twice is INVALID_REQUEST (every copy), then Delete
//! on the topic (TOPIC_AUTHORIZATION_FAILED), then an unknown topic
//! UNKNOWN_TOPIC_OR_PARTITION. The internal `__consumer_offsets` holds the groups'
//! offsets and is never deleted: INVALID_REQUEST.

use std::collections::HashSet;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{DeleteTopicsRequest, DeleteTopicsResponse};

use super::{Ctx, Fatal, Reply, Request, error_code, kstr};
use crate::security::acl::{AclOperation, ResourceType};

pub(super) fn handle(ctx: &Ctx<'_>, req: &mut Request) -> Result<Reply, Fatal> {
    let request: DeleteTopicsRequest = req.decode()?;
    let timeout = std::time::Duration::from_millis(request.timeout_ms.clamp(1000, 60_000) as u64);
    let mut seen = HashSet::new();
    let duplicates: HashSet<String> = request
        .topic_names
        .iter()
        .map(|n| n.0.to_string())
        .filter(|n| !seen.insert(n.clone()))
        .collect();
    let responses = request
        .topic_names
        .into_iter()
        .map(|name| {
            let result = DeletableTopicResult::default().with_name(Some(name.clone()));
            let refused = |message: String| {
                result
                    .clone()
                    .with_error_code(ResponseError::InvalidRequest.code())
                    .with_error_message(Some(kstr(message)))
            };
            if duplicates.contains(name.0.as_str()) {
                return refused(format!(
                    "topic {:?} appears more than once in the request",
                    name.0.as_str()
                ));
            }
            let deleted = ctx.authorize(AclOperation::Delete, ResourceType::Topic, &name);
            if deleted.is_ok() && name.0.as_str() == crate::broker::OFFSETS_TOPIC {
                return refused(format!(
                    "{} is internal: it holds the groups' offsets and cannot be deleted",
                    crate::broker::OFFSETS_TOPIC
                ));
            }
            let deleted = deleted.and_then(|()| match ctx.backend().cluster() {
                Some(cluster) => cluster.delete_topic(&name, timeout).map(|()| {
                    ctx.backend().delete_topic_share_states(&name);
                }),
                None => ctx.backend().delete_topic(&name),
            });
            match deleted {
                Ok(()) => {
                    tracing::info!(topic = %name.0, peer = %ctx.peer, client_id = req.client_id(), "topic deleted");
                    result
                }
                Err(e) => result
                    .with_error_code(error_code(&e))
                    .with_error_message(Some(kstr(e.to_string()))),
            }
        })
        .collect();
    req.respond(&DeleteTopicsResponse::default().with_responses(responses))
}
