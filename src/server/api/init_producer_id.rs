//! InitProducerId (key 22), versions 0-5. Without a transactional id: a fresh producer
//! id with epoch 0 for an idempotent producer. With one: the transaction coordinator's
//! answer (a new id at epoch 0, or the id's epoch bumped, fencing older instances;
//! KIP-360 recovery with the producer id and epoch of v3 and up), after
//! `__transaction_state` is made on first use. An ongoing transaction of the id is
//! aborted first: CONCURRENT_TRANSACTIONS until that is done. Clients below v4 get
//! INVALID_PRODUCER_EPOCH where later ones get PRODUCER_FENCED.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};

use super::{Ctx, Fatal, Reply, Request, error_code};
use crate::security::acl::{AclOperation, CLUSTER_RESOURCE_NAME, ResourceType};
use crate::server::error_codes::txn_code_for;
use crate::transaction::{InitProducerIdAnswer, ProducerIdAndEpoch, TxnError};

/// The first version whose clients know PRODUCER_FENCED.
const FENCED_SINCE: i16 = 4;
/// The first version whose clients know TRANSACTION_ABORTABLE.
const ABORTABLE_SINCE: i16 = 5;

pub(super) fn handle(ctx: &Ctx<'_>, req: &mut Request) -> Result<Reply, Fatal> {
    let request: InitProducerIdRequest = req.decode()?;
    let response = InitProducerIdResponse::default()
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    let response = match request.transactional_id.as_ref().filter(|t| !t.is_empty()) {
        Some(id) => transactional(ctx, req.version(), &request, id, response),
        None => idempotent(ctx, response),
    };
    req.respond(&response)
}

fn idempotent(ctx: &Ctx<'_>, response: InitProducerIdResponse) -> InitProducerIdResponse {
    if !ctx.permits(
        AclOperation::IdempotentWrite,
        ResourceType::Cluster,
        CLUSTER_RESOURCE_NAME,
    ) && !ctx.security().may_write_some_topic(ctx.principal, ctx.peer)
    {
        // KIP-679: IdempotentWrite on the cluster, or Write on some topic.
        ctx.allowed_on_cluster(AclOperation::IdempotentWrite);
        return response.with_error_code(ResponseError::ClusterAuthorizationFailed.code());
    }
    match ctx.shared.producers.new_producer_id() {
        Ok(id) => response
            .with_producer_id(ProducerId(id))
            .with_producer_epoch(0),
        Err(e) => {
            tracing::error!(error = %e, "cannot allocate a producer id");
            response.with_error_code(error_code(&e))
        }
    }
}

fn transactional(
    ctx: &Ctx<'_>,
    version: i16,
    request: &InitProducerIdRequest,
    id: &str,
    response: InitProducerIdResponse,
) -> InitProducerIdResponse {
    if !ctx.allowed(AclOperation::Write, ResourceType::TransactionalId, id) {
        return response.with_error_code(ResponseError::TransactionalIdAuthorizationFailed.code());
    }
    if let Err(e) = ctx.backend().start_transactions() {
        tracing::warn!(error = %e, "the transaction coordinator is not available");
        return response.with_error_code(ResponseError::CoordinatorNotAvailable.code());
    }
    let expected =
        (request.producer_id.0 >= 0 && request.producer_epoch >= 0).then_some(ProducerIdAndEpoch {
            producer_id: request.producer_id.0,
            epoch: request.producer_epoch,
        });
    let init = crate::transaction::InitProducerIdRequest {
        transactional_id: id.to_string(),
        timeout_ms: request.transaction_timeout_ms,
        expected,
    };
    let new_id = || ctx.shared.producers.new_producer_id();
    match ctx
        .backend()
        .transactions()
        .init_producer_id(&init, &new_id)
    {
        Ok(InitProducerIdAnswer::Ready(ids)) => response
            .with_producer_id(ProducerId(ids.producer_id))
            .with_producer_epoch(ids.epoch),
        Ok(InitProducerIdAnswer::Fencing) => {
            let e = TxnError::ConcurrentTransactions;
            response.with_error_code(txn_code_for(&e, version, FENCED_SINCE, ABORTABLE_SINCE))
        }
        Err(e) => {
            tracing::debug!(peer = %ctx.peer, transactional_id = id, "InitProducerId refused: {e}");
            response.with_error_code(txn_code_for(&e, version, FENCED_SINCE, ABORTABLE_SINCE))
        }
    }
}
