//! DescribeProducers (key 61), version 0: the idempotent producers each partition knows
//! (KIP-664's `kafka-transactions describe-producers`), from the producer state the log
//! keeps (`storage::producer_state`): producer id, epoch, the sequence of its last record
//! and the max timestamp of its last batch (-1 once retention removed that batch).
//! Transactions are not supported, so the coordinator epoch and the current transaction
//! start offset are always -1.
//!
//! Per partition, in Kafka's order (`KafkaApis.handleDescribeProducersRequest`): Read on
//! the topic (TOPIC_AUTHORIZATION_FAILED), then an unknown topic or partition (also a
//! name that is not a valid topic name) UNKNOWN_TOPIC_OR_PARTITION, then a cluster node
//! answers NOT_LEADER_OR_FOLLOWER for a partition it does not lead.

use kafka_protocol::messages::describe_producers_response::{
    PartitionResponse, ProducerState, TopicResponse,
};
use kafka_protocol::messages::{DescribeProducersRequest, DescribeProducersResponse, ProducerId};

use super::{Ctx, Fatal, Reply, Request, error_code, kstr};
use crate::security::acl::{AclOperation, ResourceType};

/// No transaction coordinator has written a marker (transactions are not supported).
const NO_COORDINATOR_EPOCH: i32 = -1;
/// No open transaction.
const NO_TXN_START_OFFSET: i64 = -1;

pub(super) fn handle(ctx: &Ctx<'_>, req: &mut Request) -> Result<Reply, Fatal> {
    let request: DescribeProducersRequest = req.decode()?;
    let backend = ctx.backend();
    let topics = request
        .topics
        .into_iter()
        .map(|t| {
            let name = t.name.0.to_string();
            let topic_error = ctx
                .authorize(AclOperation::Read, ResourceType::Topic, &name)
                .and_then(|()| match backend.partition_count(&name) {
                    Some(_) => Ok(()),
                    None => Err(crate::error::Error::UnknownTopic(name.clone())),
                })
                .err();
            let partitions = t
                .partition_indexes
                .iter()
                .map(|&index| {
                    let answer = PartitionResponse::default().with_partition_index(index);
                    let producers = match &topic_error {
                        Some(e) => Err(e.clone()),
                        None => backend
                            .partition(&name, index)
                            .and_then(|log| log.active_producers()),
                    };
                    match producers {
                        Ok(producers) => answer.with_active_producers(
                            producers
                                .into_iter()
                                .map(|p| {
                                    ProducerState::default()
                                        .with_producer_id(ProducerId(p.producer_id))
                                        .with_producer_epoch(i32::from(p.epoch))
                                        .with_last_sequence(p.last_sequence)
                                        .with_last_timestamp(p.last_timestamp)
                                        .with_coordinator_epoch(NO_COORDINATOR_EPOCH)
                                        .with_current_txn_start_offset(NO_TXN_START_OFFSET)
                                })
                                .collect(),
                        ),
                        Err(e) => {
                            tracing::debug!(peer = %ctx.peer, topic = %name, partition = index, "DescribeProducers refused: {e}");
                            answer
                                .with_error_code(error_code(&e))
                                .with_error_message(Some(kstr(e.to_string())))
                        }
                    }
                })
                .collect();
            TopicResponse::default()
                .with_name(t.name)
                .with_partitions(partitions)
        })
        .collect();
    req.respond(&DescribeProducersResponse::default().with_topics(topics))
}
