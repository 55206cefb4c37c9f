//! DeleteTopics (key 20), versions 1-3.

use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{DeleteTopicsRequest, DeleteTopicsResponse};

use super::{Ctx, Fatal, Reply, Request, error_code};

pub(super) fn handle(ctx: &Ctx<'_>, req: &mut Request) -> Result<Reply, Fatal> {
    let request: DeleteTopicsRequest = req.decode()?;
    let responses = request
        .topic_names
        .into_iter()
        .map(|name| {
            let result = DeletableTopicResult::default().with_name(Some(name.clone()));
            match ctx.backend().delete_topic(&name) {
                Ok(()) => {
                    tracing::info!(topic = %name.0, peer = %ctx.peer, "topic deleted");
                    result
                }
                Err(e) => result.with_error_code(error_code(&e)),
            }
        })
        .collect();
    req.respond(&DeleteTopicsResponse::default().with_responses(responses))
}
