//! The in-process transactional producer of a cluster node whose coordinators are
//! other nodes: [`RemoteTransactions`] for [`ClusterNode`]. Each call finds the
//! coordinator in the node's current image (the leader of the transactional id's
//! `__transaction_state` partition, or of the group's `__consumer_offsets` partition)
//! and sends it the request a Kafka client would (InitProducerId v4,
//! AddPartitionsToTxn v3, AddOffsetsToTxn v3, EndTxn v3, DescribeTransactions v0,
//! TxnOffsetCommit v3) over the inter-broker listener with its security, through the
//! pool of connections the markers and verifications use. For a producer of
//! transaction version 2 (KIP-890 part 2, once the cluster finalized
//! `transaction.version` 2) EndTxn is v5, whose answer carries the bumped epoch, and
//! partitions (its group's `__consumer_offsets` partition too) join the transaction
//! as a partition leader adds them for such a client: AddPartitionsToTxn v4+, not
//! verify-only. Kafka's answers come back as the same [`TxnError`]s the local
//! coordinator returns, so the producer retries and fails the same way whichever node
//! coordinates.

use std::time::Duration;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, DescribeTransactionsRequest,
    EndTxnRequest as WireEndTxn, GroupId, InitProducerIdRequest as WireInitProducerId, ProducerId,
    TopicName, TransactionalId, TxnOffsetCommitRequest as WireTxnOffsetCommit,
};
use kafka_protocol::protocol::StrBytes;

use super::ClusterNode;
use super::features::TRANSACTION_VERSION;
use super::image::{NO_LEADER, OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC};
use crate::broker::RemoteTransactions;
use crate::coordinator::TxnOffsetCommitRequest;
use crate::error::{AdminError, Error, ErrorCode, Resource, Result, TxnError, TxnState};
use crate::transaction::{
    AddPartitionsRequest, EPOCH_BUMP_TRANSACTION_VERSION, EndTxnRequest, InitProducerIdAnswer,
    InitProducerIdRequest, ProducerIdAndEpoch, TxnResult,
};

/// The versions sent: those of a Kafka 3.x producer without KIP-890 part 2 (the
/// in-process producer's client transaction version is 0).
const INIT_PRODUCER_ID_VERSION: i16 = 4;
const ADD_PARTITIONS_VERSION: i16 = 3;
const ADD_OFFSETS_VERSION: i16 = 3;
const END_TXN_VERSION: i16 = 3;
/// EndTxn of transaction version 2: the epoch bumped and answered.
const END_TXN_V2_VERSION: i16 = 5;
const DESCRIBE_VERSION: i16 = 0;
const TXN_OFFSET_COMMIT_VERSION: i16 = 3;
/// How long allocating a producer id through the controller may take.
const ALLOCATE_TIMEOUT: Duration = Duration::from_secs(10);

fn kstr(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// Kafka's answer `code` to a request of `transactional_id`'s producer as the
/// coordinator's refusal; `what` names the request, for the codes no [`TxnError`]
/// stands for.
fn txn_refusal(code: i16, producer: ProducerIdAndEpoch, what: &str) -> TxnError {
    if let Some(refusal) = super::transactions::coordinator_refusal(code, producer) {
        return refusal;
    }
    match ResponseError::try_from_code(code) {
        Some(ResponseError::TransactionalIdNotFound) => TxnError::TransactionalIdNotFound,
        Some(
            ResponseError::TransactionalIdAuthorizationFailed
            | ResponseError::TopicAuthorizationFailed
            | ResponseError::GroupAuthorizationFailed
            | ResponseError::ClusterAuthorizationFailed,
        ) => TxnError::AuthorizationFailed {
            request: what.to_string(),
            code: ErrorCode::from_code(code),
        },
        Some(
            ResponseError::CoordinatorNotAvailable
            | ResponseError::NotEnoughReplicas
            | ResponseError::NotEnoughReplicasAfterAppend
            | ResponseError::RequestTimedOut,
        ) => TxnError::CoordinatorNotAvailable {
            reason: format!(
                "the transaction coordinator answered {} to {what}",
                ErrorCode::from_code(code)
            ),
        },
        _ => TxnError::InvalidRequest(format!(
            "the transaction coordinator answered {} to {what}",
            ErrorCode::from_code(code)
        )),
    }
}

/// A failed call to a coordinator: it may be back, or moved, on the next try.
fn unreachable(e: &Error) -> TxnError {
    TxnError::CoordinatorNotAvailable {
        reason: format!("cannot reach the transaction coordinator: {e}"),
    }
}

impl ClusterNode {
    /// The leader of `key`'s partition of `topic` (Kafka's hash of the key) in the
    /// current image ([`NO_LEADER`] while it has none), and the image.
    fn leader_for(
        &self,
        topic: &str,
        key: &str,
    ) -> std::result::Result<(i32, std::sync::Arc<super::image::MetadataImage>), TxnError> {
        let image = self.image();
        let partitions = image.topic(topic).map(|t| &t.partitions);
        let count = partitions.map_or(0, |p| p.len() as i32);
        if count == 0 {
            return Err(TxnError::CoordinatorNotAvailable {
                reason: format!("{topic} does not exist yet"),
            });
        }
        let index = crate::transaction::log::partition_for(key, count);
        let leader = partitions
            .and_then(|p| p.get(index as usize))
            .map_or(NO_LEADER, |p| p.leader);
        Ok((leader, image))
    }

    /// The inter-broker address of the coordinator of `key` (the leader of its
    /// partition of `topic`), or the refusal a producer retries on: this node (still
    /// loading what it leads), no leader, no such topic.
    fn coordinator_addr(&self, topic: &str, key: &str) -> std::result::Result<String, TxnError> {
        let (leader, image) = self.leader_for(topic, key)?;
        if leader == self.config.node_id {
            return Err(TxnError::CoordinatorLoadInProgress);
        }
        image
            .brokers
            .get(&leader)
            .filter(|b| !b.fenced)
            .map(|b| b.replication_listener.clone().unwrap_or(b.listener.clone()))
            .ok_or_else(|| TxnError::CoordinatorNotAvailable {
                reason: format!("the partition of {key:?} in {topic} has no leader"),
            })
    }

    /// `request` to the coordinator of `transactional_id`.
    fn call_txn<R: kafka_protocol::protocol::Request>(
        &self,
        transactional_id: &str,
        request: &R,
        version: i16,
    ) -> std::result::Result<R::Response, TxnError> {
        let addr = self.coordinator_addr(TRANSACTION_STATE_TOPIC, transactional_id)?;
        self.txn_clients
            .call(&addr, &self.config.replication_security, request, version)
            .map_err(|e| unreachable(&e))
    }
}

impl RemoteTransactions for ClusterNode {
    fn ensure_transaction_state(&self) -> Result<()> {
        let broker = self
            .broker
            .upgrade()
            .ok_or_else(|| Error::Closed("broker".into()))?;
        ClusterNode::ensure_transaction_state(self, &broker.config().transaction)
    }

    fn new_producer_id(&self) -> Result<i64> {
        self.allocate_producer_ids(1, ALLOCATE_TIMEOUT)
    }

    fn init_producer_id(
        &self,
        request: &InitProducerIdRequest,
    ) -> std::result::Result<InitProducerIdAnswer, TxnError> {
        let expected = request.expected.unwrap_or(ProducerIdAndEpoch {
            producer_id: -1,
            epoch: -1,
        });
        let wire = WireInitProducerId::default()
            .with_transactional_id(Some(TransactionalId(kstr(&request.transactional_id))))
            .with_transaction_timeout_ms(request.timeout_ms)
            .with_producer_id(ProducerId(expected.producer_id))
            .with_producer_epoch(expected.epoch);
        let r = self.call_txn(&request.transactional_id, &wire, INIT_PRODUCER_ID_VERSION)?;
        match r.error_code {
            0 => Ok(InitProducerIdAnswer::Ready(ProducerIdAndEpoch {
                producer_id: r.producer_id.0,
                epoch: r.producer_epoch,
            })),
            code => Err(txn_refusal(code, expected, "InitProducerId")),
        }
    }

    fn transaction_version(&self) -> i16 {
        self.image().finalized_level(TRANSACTION_VERSION)
    }

    fn add_partitions(&self, request: &AddPartitionsRequest) -> std::result::Result<(), TxnError> {
        let producer = ProducerIdAndEpoch {
            producer_id: request.producer_id,
            epoch: request.producer_epoch,
        };
        if request.client_transaction_version >= EPOCH_BUMP_TRANSACTION_VERSION {
            return request
                .partitions
                .iter()
                .try_for_each(|(topic, partition)| {
                    self.verify_transaction(
                        &request.transactional_id,
                        producer,
                        topic,
                        *partition,
                        true,
                    )
                });
        }
        let mut topics: Vec<AddPartitionsToTxnTopic> = Vec::new();
        for (topic, partition) in &request.partitions {
            match topics.last_mut().filter(|t| t.name.0.as_str() == topic) {
                Some(t) => t.partitions.push(*partition),
                None => topics.push(
                    AddPartitionsToTxnTopic::default()
                        .with_name(TopicName(kstr(topic)))
                        .with_partitions(vec![*partition]),
                ),
            }
        }
        let wire = AddPartitionsToTxnRequest::default()
            .with_v3_and_below_transactional_id(TransactionalId(kstr(&request.transactional_id)))
            .with_v3_and_below_producer_id(ProducerId(request.producer_id))
            .with_v3_and_below_producer_epoch(request.producer_epoch)
            .with_v3_and_below_topics(topics);
        let r = self.call_txn(&request.transactional_id, &wire, ADD_PARTITIONS_VERSION)?;
        if r.error_code != 0 {
            return Err(txn_refusal(r.error_code, producer, "AddPartitionsToTxn"));
        }
        for t in &r.results_by_topic_v3_and_below {
            for p in &t.results_by_partition {
                match ResponseError::try_from_code(p.partition_error_code) {
                    None => {}
                    // Not an error of its own: another partition's refusal.
                    Some(ResponseError::OperationNotAttempted) => {}
                    Some(ResponseError::TransactionAbortable | ResponseError::InvalidTxnState) => {
                        return Err(TxnError::TransactionAbortable {
                            topic: t.name.0.to_string(),
                            partition: p.partition_index,
                        });
                    }
                    Some(_) => {
                        let what = format!(
                            "AddPartitionsToTxn of {}-{}",
                            t.name.0.as_str(),
                            p.partition_index
                        );
                        return Err(txn_refusal(p.partition_error_code, producer, &what));
                    }
                }
            }
        }
        Ok(())
    }

    fn add_offsets(
        &self,
        transactional_id: &str,
        producer: ProducerIdAndEpoch,
        group_id: &str,
        client_transaction_version: i16,
    ) -> std::result::Result<(), TxnError> {
        if client_transaction_version >= EPOCH_BUMP_TRANSACTION_VERSION {
            let (_, image) = self.leader_for(OFFSETS_TOPIC, group_id)?;
            let count = image.topic(OFFSETS_TOPIC).map_or(1, |t| t.partitions.len());
            let partition = crate::transaction::log::partition_for(group_id, count as i32);
            return self.verify_transaction(
                transactional_id,
                producer,
                OFFSETS_TOPIC,
                partition,
                true,
            );
        }
        let wire = AddOffsetsToTxnRequest::default()
            .with_transactional_id(TransactionalId(kstr(transactional_id)))
            .with_producer_id(ProducerId(producer.producer_id))
            .with_producer_epoch(producer.epoch)
            .with_group_id(GroupId(kstr(group_id)));
        let r = self.call_txn(transactional_id, &wire, ADD_OFFSETS_VERSION)?;
        match r.error_code {
            0 => Ok(()),
            code => Err(txn_refusal(code, producer, "AddOffsetsToTxn")),
        }
    }

    fn end_txn(
        &self,
        request: &EndTxnRequest,
    ) -> std::result::Result<ProducerIdAndEpoch, TxnError> {
        let producer = ProducerIdAndEpoch {
            producer_id: request.producer_id,
            epoch: request.producer_epoch,
        };
        let wire = WireEndTxn::default()
            .with_transactional_id(TransactionalId(kstr(&request.transactional_id)))
            .with_producer_id(ProducerId(request.producer_id))
            .with_producer_epoch(request.producer_epoch)
            .with_committed(request.result == TxnResult::Commit);
        let version_2 = request.client_transaction_version >= EPOCH_BUMP_TRANSACTION_VERSION;
        let version = if version_2 {
            END_TXN_V2_VERSION
        } else {
            END_TXN_VERSION
        };
        let r = self.call_txn(&request.transactional_id, &wire, version)?;
        match r.error_code {
            // v5 answers the producer id and epoch to go on with; before, they stay.
            0 if version_2 => Ok(ProducerIdAndEpoch {
                producer_id: r.producer_id.0,
                epoch: r.producer_epoch,
            }),
            0 => Ok(producer),
            code => Err(txn_refusal(code, producer, "EndTxn")),
        }
    }

    fn describe(
        &self,
        transactional_id: &str,
    ) -> std::result::Result<(ProducerIdAndEpoch, TxnState), TxnError> {
        let wire = DescribeTransactionsRequest::default()
            .with_transactional_ids(vec![TransactionalId(kstr(transactional_id))]);
        let r = self.call_txn(transactional_id, &wire, DESCRIBE_VERSION)?;
        let none = ProducerIdAndEpoch {
            producer_id: -1,
            epoch: -1,
        };
        let s = r
            .transaction_states
            .iter()
            .find(|s| s.transactional_id.0.as_str() == transactional_id)
            .ok_or_else(|| TxnError::CoordinatorNotAvailable {
                reason: "the transaction coordinator did not describe the id".into(),
            })?;
        if s.error_code != 0 {
            return Err(txn_refusal(s.error_code, none, "DescribeTransactions"));
        }
        let state = (0..=7)
            .filter_map(TxnState::from_id)
            .find(|st| st.name() == s.transaction_state.as_str())
            .ok_or_else(|| {
                TxnError::InvalidRequest(format!(
                    "the transaction coordinator described an unknown state {:?}",
                    s.transaction_state.as_str()
                ))
            })?;
        let ids = ProducerIdAndEpoch {
            producer_id: s.producer_id.0,
            epoch: s.producer_epoch,
        };
        Ok((ids, state))
    }

    fn coordinates_group(&self, group_id: &str) -> bool {
        self.leader_for(OFFSETS_TOPIC, group_id)
            .is_ok_and(|(leader, _)| leader == self.config.node_id)
    }

    fn txn_offset_commit(
        &self,
        transactional_id: &str,
        request: TxnOffsetCommitRequest,
    ) -> Result<()> {
        let group = request.group_id.clone();
        let addr =
            self.coordinator_addr(OFFSETS_TOPIC, &group)
                .map_err(|e| Error::Transaction {
                    transactional_id: transactional_id.to_string(),
                    source: e,
                })?;
        let mut topics: Vec<TxnOffsetCommitRequestTopic> = Vec::new();
        for o in &request.offsets {
            let partition = TxnOffsetCommitRequestPartition::default()
                .with_partition_index(o.partition)
                .with_committed_offset(o.offset)
                .with_committed_leader_epoch(o.leader_epoch)
                .with_committed_metadata(o.metadata.as_deref().map(kstr));
            match topics.last_mut().filter(|t| t.name.0.as_str() == o.topic) {
                Some(t) => t.partitions.push(partition),
                None => topics.push(
                    TxnOffsetCommitRequestTopic::default()
                        .with_name(TopicName(kstr(&o.topic)))
                        .with_partitions(vec![partition]),
                ),
            }
        }
        let wire = WireTxnOffsetCommit::default()
            .with_transactional_id(TransactionalId(kstr(transactional_id)))
            .with_group_id(GroupId(kstr(&group)))
            .with_producer_id(ProducerId(request.producer_id))
            .with_producer_epoch(request.producer_epoch)
            .with_generation_id(request.generation_id)
            .with_member_id(kstr(&request.member_id))
            .with_group_instance_id(request.group_instance_id.as_deref().map(kstr))
            .with_topics(topics);
        let r = self.txn_clients.call(
            &addr,
            &self.config.replication_security,
            &wire,
            TXN_OFFSET_COMMIT_VERSION,
        )?;
        for t in &r.topics {
            if let Some(p) = t.partitions.iter().find(|p| p.error_code != 0) {
                let message = format!(
                    "TxnOffsetCommit of {}-{} to group {group:?}",
                    t.name.0.as_str(),
                    p.partition_index
                );
                return Err(Error::Admin(Box::new(AdminError::new(
                    Resource::Group(group.clone()),
                    ErrorCode::from_code(p.error_code),
                    Some(message),
                ))));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_remote_coordinators_answer_keeps_its_meaning() {
        let p = ProducerIdAndEpoch {
            producer_id: 7,
            epoch: 1,
        };
        let code = |e: ResponseError| txn_refusal(e.code(), p, "EndTxn");
        assert_eq!(
            code(ResponseError::NotCoordinator),
            TxnError::NotCoordinator
        );
        assert_eq!(
            code(ResponseError::ConcurrentTransactions),
            TxnError::ConcurrentTransactions
        );
        assert!(matches!(
            code(ResponseError::ProducerFenced),
            TxnError::ProducerFenced { producer_id: 7, .. }
        ));
        assert!(code(ResponseError::NotEnoughReplicas).is_retriable());
        let TxnError::InvalidRequest(message) = code(ResponseError::InvalidTxnState) else {
            panic!("INVALID_TXN_STATE is not retriable");
        };
        assert!(message.contains("EndTxn"), "{message}");
    }
}
