//! AddOffsetsToTxn (key 25), versions 0-4: adds the `__consumer_offsets` partition of
//! a consumer group to the producer's transaction, so that the offsets it commits with
//! TxnOffsetCommit are written with the transaction's marker. Write on the
//! transactional id and Read on the group. PRODUCER_FENCED is INVALID_PRODUCER_EPOCH
//! before v2, TRANSACTION_ABORTABLE is INVALID_TXN_STATE before v4.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::{AddOffsetsToTxnRequest, AddOffsetsToTxnResponse};

use super::{Ctx, Fatal, Reply, Request};
use crate::security::acl::{AclOperation, ResourceType};
use crate::server::error_codes::txn_code_for;
use crate::transaction::ProducerIdAndEpoch;

pub(super) fn handle(ctx: &Ctx<'_>, req: &mut Request) -> Result<Reply, Fatal> {
    let request: AddOffsetsToTxnRequest = req.decode()?;
    let id = request.transactional_id.0.as_str();
    let group = request.group_id.0.as_str();
    let code = if !ctx.allowed(AclOperation::Write, ResourceType::TransactionalId, id) {
        ResponseError::TransactionalIdAuthorizationFailed.code()
    } else if !ctx.allowed(AclOperation::Read, ResourceType::Group, group) {
        ResponseError::GroupAuthorizationFailed.code()
    } else {
        let offsets_partitions = ctx
            .backend()
            .partition_count(crate::broker::OFFSETS_TOPIC)
            .unwrap_or(1)
            .max(1);
        let offsets_partition = crate::transaction::log::partition_for(group, offsets_partitions);
        let producer = ProducerIdAndEpoch {
            producer_id: request.producer_id.0,
            epoch: request.producer_epoch,
        };
        match ctx
            .backend()
            .transactions()
            .add_offsets(id, producer, offsets_partition, 0)
        {
            Ok(()) => 0,
            Err(e) => {
                tracing::debug!(peer = %ctx.peer, transactional_id = id, "AddOffsetsToTxn refused: {e}");
                txn_code_for(&e, req.version(), 2, 4)
            }
        }
    };
    req.respond(&AddOffsetsToTxnResponse::default().with_error_code(code))
}
