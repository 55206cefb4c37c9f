//! InitProducerId (key 22), versions 0-1: a fresh producer id with epoch 0 for an
//! idempotent producer. Transactions are not supported: a request with a transactional
//! id is refused.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};

use super::{Ctx, Fatal, Reply, Request, error_code};
use crate::security::acl::{AclOperation, CLUSTER_RESOURCE_NAME, ResourceType};

pub(super) fn handle(ctx: &Ctx<'_>, req: &mut Request) -> Result<Reply, Fatal> {
    let request: InitProducerIdRequest = req.decode()?;
    let response = InitProducerIdResponse::default()
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    let response = if request
        .transactional_id
        .as_ref()
        .is_some_and(|t| !t.is_empty())
    {
        tracing::info!(peer = %ctx.peer, "refusing InitProducerId with a transactional id: transactions are not supported");
        response.with_error_code(ResponseError::TransactionalIdAuthorizationFailed.code())
    } else if !ctx.permits(
        AclOperation::IdempotentWrite,
        ResourceType::Cluster,
        CLUSTER_RESOURCE_NAME,
    ) && !ctx.security().may_write_some_topic(ctx.principal, ctx.peer)
    {
        // KIP-679: IdempotentWrite on the cluster, or Write on some topic.
        ctx.allowed_on_cluster(AclOperation::IdempotentWrite);
        response.with_error_code(ResponseError::ClusterAuthorizationFailed.code())
    } else {
        match ctx.shared.producers.new_producer_id() {
            Ok(id) => response
                .with_producer_id(ProducerId(id))
                .with_producer_epoch(0),
            Err(e) => {
                tracing::error!(error = %e, "cannot allocate a producer id");
                response.with_error_code(error_code(&e))
            }
        }
    };
    req.respond(&response)
}
