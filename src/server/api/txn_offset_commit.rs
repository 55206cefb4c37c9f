//! TxnOffsetCommit (key 28), versions 0-5: a transactional producer commits a group's
//! offsets with its transaction (KIP-98). The group coordinator writes them to
//! `__consumer_offsets` at once and holds them pending until the transaction's marker
//! decides them; v3 adds the consuming member's generation, member id and instance id,
//! checked as Kafka does (KIP-447). A client of v5 (transaction version 2, KIP-890
//! part 2) sends no AddOffsetsToTxn: the group's `__consumer_offsets` partition is
//! added to its transaction here, at its transaction coordinator, before the offsets
//! are written (a coordinator that is busy or moving answers the retriable
//! CONCURRENT_TRANSACTIONS). Below a finalized `transaction.version` 2, where
//! ApiVersions offers v4 at most, v5 is answered UNSUPPORTED_VERSION.
//!
//! Authorization as Kafka's: Write on the transactional id, then Read on the group
//! (each refusal answers every partition), then Read on each topic
//! (TOPIC_AUTHORIZATION_FAILED for that topic's partitions).

use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{TxnOffsetCommitRequest, TxnOffsetCommitResponse};

use super::{Ctx, Fatal, Reply, Request};
use crate::coordinator::CommitOffset;
use crate::security::acl::{AclOperation, ResourceType};
use crate::security::denied_code;
use crate::server::error_codes::KafkaCode;
use crate::transaction::TxnError;

pub(super) fn handle(ctx: &Ctx<'_>, req: &mut Request) -> Result<Reply, Fatal> {
    let request: TxnOffsetCommitRequest = req.decode()?;
    let version = req.version();
    let mut commit = crate::coordinator::TxnOffsetCommitRequest {
        group_id: request.group_id.0.to_string(),
        producer_id: request.producer_id.0,
        producer_epoch: request.producer_epoch,
        generation_id: request.generation_id,
        member_id: request.member_id.to_string(),
        group_instance_id: request.group_instance_id.map(|s| s.to_string()),
        offsets: request
            .topics
            .iter()
            .flat_map(|t| {
                t.partitions.iter().map(move |p| CommitOffset {
                    topic: t.name.0.to_string(),
                    partition: p.partition_index,
                    offset: p.committed_offset,
                    leader_epoch: if version >= 2 {
                        p.committed_leader_epoch
                    } else {
                        -1
                    },
                    metadata: p.committed_metadata.as_ref().map(|m| m.to_string()),
                    commit_timestamp: None,
                })
            })
            .collect(),
    };
    let txn_ok = ctx.allowed(
        AclOperation::Write,
        ResourceType::TransactionalId,
        &request.transactional_id.0,
    );
    let group_ok = txn_ok && ctx.allowed(AclOperation::Read, ResourceType::Group, &commit.group_id);
    let refusal = if !txn_ok {
        Some(denied_code(ResourceType::TransactionalId))
    } else if !group_ok {
        Some(denied_code(ResourceType::Group))
    } else {
        None
    };
    let mut results: Vec<(String, i32, i16)> = Vec::new();
    commit.offsets.retain(|o| {
        let code = match refusal {
            Some(code) => code,
            None if !ctx.allowed(AclOperation::Read, ResourceType::Topic, &o.topic) => {
                denied_code(ResourceType::Topic)
            }
            None => return true,
        };
        results.push((o.topic.clone(), o.partition, code));
        false
    });
    if version > super::api_versions::LAST_TXN_OFFSET_COMMIT_BEFORE_TRANSACTION_V2
        && !commit.offsets.is_empty()
        && !super::api_versions::transaction_version_2(ctx)
    {
        // ApiVersions offers v5 only at transaction version 2 (see Produce v12).
        tracing::debug!(peer = %ctx.peer, group = %commit.group_id, "TxnOffsetCommit v{version} refused below transaction.version 2");
        let code = kafka_protocol::ResponseError::UnsupportedVersion.code();
        results.extend(
            commit
                .offsets
                .drain(..)
                .map(|o| (o.topic, o.partition, code)),
        );
    }
    if version > super::api_versions::LAST_TXN_OFFSET_COMMIT_BEFORE_TRANSACTION_V2
        && !commit.offsets.is_empty()
        && let Err(e) = add_offsets_partition(ctx, &request.transactional_id.0, &commit)
    {
        tracing::debug!(peer = %ctx.peer, group = %commit.group_id, "TxnOffsetCommit refused: {e}");
        let code = match e {
            TxnError::NotCoordinator
            | TxnError::CoordinatorNotAvailable { .. }
            | TxnError::CoordinatorLoadInProgress => TxnError::ConcurrentTransactions.code(),
            e => e.code(),
        };
        results.extend(
            commit
                .offsets
                .drain(..)
                .map(|o| (o.topic, o.partition, code)),
        );
    }
    if !commit.offsets.is_empty() {
        let asked: Vec<(String, i32)> = commit
            .offsets
            .iter()
            .map(|o| (o.topic.clone(), o.partition))
            .collect();
        // A refusal of the whole request applies to every partition of it.
        match ctx.backend().groups().txn_offset_commit(commit) {
            Ok(answers) => results.extend(
                answers
                    .into_iter()
                    .map(|r| (r.topic, r.partition, r.result.err().map_or(0, |e| e.code()))),
            ),
            Err(e) => results.extend(asked.into_iter().map(|(t, p)| (t, p, e.code()))),
        }
    }
    let topics = super::by_topic(
        results,
        |index, code| {
            TxnOffsetCommitResponsePartition::default()
                .with_partition_index(index)
                .with_error_code(code)
        },
        |name, partitions| {
            TxnOffsetCommitResponseTopic::default()
                .with_name(name)
                .with_partitions(partitions)
        },
    );
    req.respond(&TxnOffsetCommitResponse::default().with_topics(topics))
}

/// KIP-890 part 2: adds the `__consumer_offsets` partition of the commit's group to the
/// producer's transaction at its coordinator.
fn add_offsets_partition(
    ctx: &Ctx<'_>,
    transactional_id: &str,
    commit: &crate::coordinator::TxnOffsetCommitRequest,
) -> Result<(), TxnError> {
    let count = ctx
        .backend()
        .partition_count(crate::broker::OFFSETS_TOPIC)
        .unwrap_or(1)
        .max(1);
    let partition = crate::transaction::log::partition_for(&commit.group_id, count);
    let producer = crate::transaction::ProducerIdAndEpoch {
        producer_id: commit.producer_id,
        epoch: commit.producer_epoch,
    };
    super::produce::in_transaction(
        ctx,
        transactional_id,
        producer,
        crate::broker::OFFSETS_TOPIC,
        partition,
        true,
    )
}
