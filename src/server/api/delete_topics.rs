//! DeleteTopics (key 20), versions 1-3. A cluster node deletes through the controller and
//! answers once the deletion is applied here (its local logs are gone).

use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{DeleteTopicsRequest, DeleteTopicsResponse};

use super::{Ctx, Fatal, Reply, Request, error_code};
use crate::server::auth::acl::{AclOperation, ResourceType};

pub(super) fn handle(ctx: &Ctx<'_>, req: &mut Request) -> Result<Reply, Fatal> {
    let request: DeleteTopicsRequest = req.decode()?;
    let timeout = std::time::Duration::from_millis(request.timeout_ms.clamp(1000, 60_000) as u64);
    let responses = request
        .topic_names
        .into_iter()
        .map(|name| {
            let result = DeletableTopicResult::default().with_name(Some(name.clone()));
            let deleted = ctx.authorize(AclOperation::Delete, ResourceType::Topic, &name);
            let deleted = deleted.and_then(|()| match ctx.backend().cluster() {
                Some(cluster) => cluster.delete_topic(&name, timeout),
                None => ctx.backend().delete_topic(&name),
            });
            match deleted {
                Ok(()) => {
                    tracing::info!(topic = %name.0, peer = %ctx.peer, client_id = req.client_id(), "topic deleted");
                    result
                }
                Err(e) => result.with_error_code(error_code(&e)),
            }
        })
        .collect();
    req.respond(&DeleteTopicsResponse::default().with_responses(responses))
}
