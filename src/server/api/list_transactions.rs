//! ListTransactions (key 66), versions 0-1: the transactional ids this node
//! coordinates that the principal may describe, filtered by state names (unknown names
//! are answered back), by producer ids and (v1) by how long the transaction has run.

use kafka_protocol::messages::list_transactions_response::TransactionState;
use kafka_protocol::messages::{
    ListTransactionsRequest, ListTransactionsResponse, ProducerId, TransactionalId,
};

use super::{Ctx, Fatal, Reply, Request, kstr};
use crate::security::acl::{AclOperation, ResourceType};
use crate::server::error_codes::KafkaCode;
use crate::transaction::TxnState;

pub(super) fn handle(ctx: &Ctx<'_>, req: &mut Request) -> Result<Reply, Fatal> {
    let request: ListTransactionsRequest = req.decode()?;
    let names: Vec<String> = request
        .state_filters
        .iter()
        .map(|s| s.to_string())
        .collect();
    let unknown: Vec<_> = names
        .iter()
        .filter(|n| !TxnState::ALL.iter().any(|s| s.name() == n.as_str()))
        .map(|n| kstr(n.as_str()))
        .collect();
    let response = ListTransactionsResponse::default().with_unknown_state_filters(unknown);
    let listed = match ctx.backend().transactions().list() {
        Ok(l) => l,
        Err(e) => return req.respond(&response.with_error_code(e.code())),
    };
    let now = crate::storage::now_ms();
    let states = listed
        .into_iter()
        .filter(|m| names.is_empty() || names.iter().any(|n| n == m.state.name()))
        .filter(|m| {
            request.producer_id_filters.is_empty()
                || request
                    .producer_id_filters
                    .contains(&ProducerId(m.producer_id))
        })
        .filter(|m| request.duration_filter < 0 || now - m.txn_start_ms > request.duration_filter)
        .filter(|m| {
            ctx.permits(
                AclOperation::Describe,
                ResourceType::TransactionalId,
                &m.transactional_id,
            )
        })
        .map(|m| {
            TransactionState::default()
                .with_transactional_id(TransactionalId(kstr(m.transactional_id.as_str())))
                .with_producer_id(ProducerId(m.producer_id))
                .with_transaction_state(kstr(m.state.name()))
        })
        .collect();
    req.respond(&response.with_transaction_states(states))
}
