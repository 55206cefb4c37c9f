//! AddPartitionsToTxn (key 24), versions 0-5. Versions 0-3 are a producer's: one
//! transactional id (Write on it), its partitions (Write on each topic); a refusal of
//! one partition leaves the others OPERATION_NOT_ATTEMPTED, as Kafka answers. Versions
//! 4 and up are a partition leader's (ClusterAction): a batch of transactions, each
//! either added or, with `verify_only` (KIP-890 part 1), checked against the ongoing
//! transaction (TRANSACTION_ABORTABLE for a partition not in it; INVALID_TXN_STATE
//! before v5). PRODUCER_FENCED is INVALID_PRODUCER_EPOCH before v2.

use std::collections::BTreeSet;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, TopicName, TransactionalId,
};

use super::{Ctx, Fatal, Reply, Request};
use crate::security::acl::{AclOperation, ResourceType};
use crate::server::error_codes::txn_code_for;
use crate::transaction::{AddPartitionsRequest, ProducerIdAndEpoch, TopicPartition};

/// The first version whose clients know PRODUCER_FENCED.
const FENCED_SINCE: i16 = 2;
/// The first version whose clients know TRANSACTION_ABORTABLE.
const ABORTABLE_SINCE: i16 = 5;
/// The first version of the batched, leader-to-coordinator form.
const BATCHED_SINCE: i16 = 4;

pub(super) fn handle(ctx: &Ctx<'_>, req: &mut Request) -> Result<Reply, Fatal> {
    let request: AddPartitionsToTxnRequest = req.decode()?;
    let version = req.version();
    if version < BATCHED_SINCE {
        let txn = AddPartitionsToTxnTransaction::default()
            .with_transactional_id(request.v3_and_below_transactional_id)
            .with_producer_id(request.v3_and_below_producer_id)
            .with_producer_epoch(request.v3_and_below_producer_epoch)
            .with_topics(request.v3_and_below_topics);
        let topics = client_transaction(ctx, version, &txn);
        return req.respond(
            &AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(topics),
        );
    }
    if !ctx.allowed_on_cluster(AclOperation::ClusterAction) {
        return req.respond(
            &AddPartitionsToTxnResponse::default()
                .with_error_code(ResponseError::ClusterAuthorizationFailed.code()),
        );
    }
    let results = request
        .transactions
        .iter()
        .map(|txn| {
            AddPartitionsToTxnResult::default()
                .with_transactional_id(txn.transactional_id.clone())
                .with_topic_results(leader_transaction(ctx, version, txn))
        })
        .collect();
    req.respond(&AddPartitionsToTxnResponse::default().with_results_by_transaction(results))
}

fn partitions(topics: &[AddPartitionsToTxnTopic]) -> Vec<TopicPartition> {
    topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| (t.name.0.to_string(), *p)))
        .collect()
}

/// The answer of every partition, grouped by topic as the request named them.
fn by_topic(
    topics: &[AddPartitionsToTxnTopic],
    code: impl Fn(&str, i32) -> i16,
) -> Vec<AddPartitionsToTxnTopicResult> {
    topics
        .iter()
        .map(|t| {
            let results = t
                .partitions
                .iter()
                .map(|p| {
                    AddPartitionsToTxnPartitionResult::default()
                        .with_partition_index(*p)
                        .with_partition_error_code(code(&t.name.0, *p))
                })
                .collect();
            AddPartitionsToTxnTopicResult::default()
                .with_name(TopicName(t.name.0.clone()))
                .with_results_by_partition(results)
        })
        .collect()
}

/// A producer's request (v0-3): authorized, checked partition by partition, added.
fn client_transaction(
    ctx: &Ctx<'_>,
    version: i16,
    txn: &AddPartitionsToTxnTransaction,
) -> Vec<AddPartitionsToTxnTopicResult> {
    let id: &TransactionalId = &txn.transactional_id;
    if !ctx.allowed(AclOperation::Write, ResourceType::TransactionalId, &id.0) {
        let code = ResponseError::TransactionalIdAuthorizationFailed.code();
        return by_topic(&txn.topics, |_, _| code);
    }
    // Partitions refused before the coordinator is asked, with their codes.
    let refused: Vec<(TopicPartition, i16)> = partitions(&txn.topics)
        .into_iter()
        .filter_map(|(topic, p)| {
            let code = if !ctx.allowed(AclOperation::Write, ResourceType::Topic, &topic) {
                ResponseError::TopicAuthorizationFailed.code()
            } else if ctx
                .backend()
                .partition_count(&topic)
                .is_none_or(|n| p < 0 || p >= n)
            {
                ResponseError::UnknownTopicOrPartition.code()
            } else {
                return None;
            };
            Some(((topic, p), code))
        })
        .collect();
    if !refused.is_empty() {
        let not_attempted = ResponseError::OperationNotAttempted.code();
        return by_topic(&txn.topics, |t, p| {
            refused
                .iter()
                .find(|((rt, rp), _)| rt == t && *rp == p)
                .map_or(not_attempted, |(_, c)| *c)
        });
    }
    let request = AddPartitionsRequest {
        transactional_id: id.0.to_string(),
        producer_id: txn.producer_id.0,
        producer_epoch: txn.producer_epoch,
        partitions: partitions(&txn.topics).into_iter().collect(),
        client_transaction_version: 0,
    };
    let code = match ctx.backend().transactions().add_partitions(&request) {
        Ok(()) => 0,
        Err(e) => {
            tracing::debug!(peer = %ctx.peer, transactional_id = %id.0, "AddPartitionsToTxn refused: {e}");
            txn_code_for(&e, version, FENCED_SINCE, ABORTABLE_SINCE)
        }
    };
    by_topic(&txn.topics, |_, _| code)
}

/// A partition leader's request (v4+): verify (KIP-890 part 1) or add.
fn leader_transaction(
    ctx: &Ctx<'_>,
    version: i16,
    txn: &AddPartitionsToTxnTransaction,
) -> Vec<AddPartitionsToTxnTopicResult> {
    let coordinator = ctx.backend().transactions();
    let id = txn.transactional_id.0.to_string();
    let wanted: BTreeSet<TopicPartition> = partitions(&txn.topics).into_iter().collect();
    let code =
        |e: &crate::transaction::TxnError| txn_code_for(e, version, FENCED_SINCE, ABORTABLE_SINCE);
    if txn.verify_only {
        let producer = ProducerIdAndEpoch {
            producer_id: txn.producer_id.0,
            epoch: txn.producer_epoch,
        };
        return match coordinator.verify_partitions(&id, producer, &wanted) {
            Ok(verdicts) => by_topic(&txn.topics, |t, p| {
                match verdicts.get(&(t.to_string(), p)) {
                    Some(Err(e)) => code(e),
                    _ => 0,
                }
            }),
            Err(e) => {
                let c = code(&e);
                by_topic(&txn.topics, |_, _| c)
            }
        };
    }
    let request = AddPartitionsRequest {
        transactional_id: id,
        producer_id: txn.producer_id.0,
        producer_epoch: txn.producer_epoch,
        partitions: wanted,
        // A leader adds partitions for producers of transaction version 2 (KIP-890
        // part 2), which no longer send AddPartitionsToTxn themselves.
        client_transaction_version: crate::transaction::EPOCH_BUMP_TRANSACTION_VERSION,
    };
    // While the producer's previous transaction is completing, answered once its
    // markers are written rather than with CONCURRENT_TRANSACTIONS for the leader to
    // ask again after a backoff.
    let added = coordinator.add_partitions_when_completed(&request, super::produce::ADD_RETRY_MAX);
    let c = match added {
        Ok(()) => 0,
        Err(e) => code(&e),
    };
    by_topic(&txn.topics, |_, _| c)
}
