//! EndTxn (key 26), versions 0-5: commits or aborts the producer's transaction. The
//! answer comes once the Prepare record is in `__transaction_state`; the markers are
//! written in the background. A client of v5 (transaction version 2, KIP-890 part 2)
//! gets its bumped producer id and epoch back, once the cluster has finalized
//! `transaction.version` 2 (a single node has; below it the epoch stays, as for v4). Write on the transactional id.
//! PRODUCER_FENCED is INVALID_PRODUCER_EPOCH before v2, TRANSACTION_ABORTABLE is
//! INVALID_TXN_STATE before v4.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::{EndTxnRequest, EndTxnResponse, ProducerId};

use super::{Ctx, Fatal, Reply, Request};
use crate::cluster::features::TRANSACTION_VERSION;
use crate::security::acl::{AclOperation, ResourceType};
use crate::server::error_codes::txn_code_for;
use crate::transaction::{EPOCH_BUMP_TRANSACTION_VERSION, TxnResult};

/// The first version of transaction version 2 (the epoch bumped by every EndTxn).
const EPOCH_BUMP_SINCE: i16 = 5;

pub(super) fn handle(ctx: &Ctx<'_>, req: &mut Request) -> Result<Reply, Fatal> {
    let request: EndTxnRequest = req.decode()?;
    let version = req.version();
    let id = request.transactional_id.0.as_str();
    let response = EndTxnResponse::default()
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    if !ctx.allowed(AclOperation::Write, ResourceType::TransactionalId, id) {
        return req.respond(
            &response.with_error_code(ResponseError::TransactionalIdAuthorizationFailed.code()),
        );
    }
    let end = crate::transaction::EndTxnRequest {
        transactional_id: id.to_string(),
        producer_id: request.producer_id.0,
        producer_epoch: request.producer_epoch,
        result: if request.committed {
            TxnResult::Commit
        } else {
            TxnResult::Abort
        },
        client_transaction_version: if version >= EPOCH_BUMP_SINCE
            && super::api_versions::levels(ctx).level(TRANSACTION_VERSION)
                >= EPOCH_BUMP_TRANSACTION_VERSION
        {
            EPOCH_BUMP_TRANSACTION_VERSION
        } else {
            0
        },
    };
    let new_id = || ctx.shared.producers.new_producer_id();
    let response = match ctx.backend().transactions().end_txn(&end, &new_id) {
        Ok(ids) => response
            .with_producer_id(ProducerId(ids.producer_id))
            .with_producer_epoch(ids.epoch),
        Err(e) => {
            tracing::debug!(peer = %ctx.peer, transactional_id = id, "EndTxn refused: {e}");
            response.with_error_code(txn_code_for(&e, version, 2, 4))
        }
    };
    req.respond(&response)
}
