//! DescribeTransactions (key 65), version 0: the coordinator's metadata of each
//! transactional id (Describe on it; its partitions of topics the principal may not
//! describe are left out, as Kafka does).

use std::collections::BTreeMap;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::describe_transactions_response::{TopicData, TransactionState};
use kafka_protocol::messages::{
    DescribeTransactionsRequest, DescribeTransactionsResponse, ProducerId, TopicName,
};

use super::{Ctx, Fatal, Reply, Request, kstr};
use crate::security::acl::{AclOperation, ResourceType};
use crate::server::error_codes::KafkaCode;
use crate::transaction::TransactionMetadata;

pub(super) fn handle(ctx: &Ctx<'_>, req: &mut Request) -> Result<Reply, Fatal> {
    let request: DescribeTransactionsRequest = req.decode()?;
    let coordinator = ctx.backend().transactions();
    let states = request
        .transactional_ids
        .into_iter()
        .map(|id| {
            let state = TransactionState::default()
                .with_transactional_id(id.clone())
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1)
                .with_transaction_start_time_ms(-1);
            if !ctx.allowed(AclOperation::Describe, ResourceType::TransactionalId, &id.0) {
                return state
                    .with_error_code(ResponseError::TransactionalIdAuthorizationFailed.code());
            }
            match coordinator.describe(&id.0) {
                Ok(m) => described(ctx, state, &m),
                Err(e) => state.with_error_code(e.code()),
            }
        })
        .collect();
    req.respond(&DescribeTransactionsResponse::default().with_transaction_states(states))
}

fn described(ctx: &Ctx<'_>, state: TransactionState, m: &TransactionMetadata) -> TransactionState {
    let mut topics: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for (topic, p) in &m.partitions {
        if ctx.permits(AclOperation::Describe, ResourceType::Topic, topic) {
            topics.entry(topic).or_default().push(*p);
        }
    }
    state
        .with_transaction_state(kstr(m.state.name()))
        .with_transaction_timeout_ms(m.timeout_ms)
        .with_transaction_start_time_ms(m.txn_start_ms)
        .with_producer_id(ProducerId(m.producer_id))
        .with_producer_epoch(m.producer_epoch)
        .with_topics(
            topics
                .into_iter()
                .map(|(t, ps)| {
                    TopicData::default()
                        .with_topic(TopicName(kstr(t)))
                        .with_partitions(ps)
                })
                .collect(),
        )
}
