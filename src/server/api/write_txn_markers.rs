//! WriteTxnMarkers (key 27), versions 1-2: a transaction coordinator's COMMIT or ABORT
//! markers for partitions this node leads, of one or many transactions; each is
//! appended as a control batch (not again if the coordinator retries one already
//! written), then each waits for its partition's in-sync replicas. ClusterAction on
//! the cluster. Version 2 carries each marker's transaction version (KIP-890): from 2,
//! a marker whose producer epoch is not newer than the producer's on the partition is
//! refused with INVALID_PRODUCER_EPOCH (a delayed marker of an earlier transaction).
//! The protocol crate knows version 1 only: version 2 is read by
//! [`MarkersRequest`], and its response has version 1's layout.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::WriteTxnMarkersResponse;
use kafka_protocol::messages::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
};

use super::{Ctx, Fatal, Reply, Request, count_errors, encode_response, error_code};
use crate::broker::TxnMarkerWrite;
use crate::cluster::txn_markers_wire::MarkersRequest;
use crate::record::EndTxnMarker;
use crate::security::acl::AclOperation;

pub(super) fn handle(ctx: &Ctx<'_>, req: &mut Request) -> Result<Reply, Fatal> {
    let version = req.version();
    let MarkersRequest {
        request,
        transaction_versions,
    } = req.decode()?;
    let authorized = ctx.allowed_on_cluster(AclOperation::ClusterAction);
    // Every marker of the request appended, then each waits for its in-sync replicas
    // (the waits overlap), as Kafka's leader answers it.
    let mut writes = Vec::new();
    if authorized {
        for (i, m) in request.markers.iter().enumerate() {
            // Version 1 has none: Kafka's default, 0.
            let transaction_version = transaction_versions.get(i).copied().unwrap_or(0);
            let marker = if m.transaction_result {
                EndTxnMarker::commit(m.coordinator_epoch)
            } else {
                EndTxnMarker::abort(m.coordinator_epoch)
            };
            for t in &m.topics {
                for &p in &t.partition_indexes {
                    writes.push(TxnMarkerWrite {
                        topic: &t.name.0,
                        partition: p,
                        producer_id: m.producer_id.0,
                        producer_epoch: m.producer_epoch,
                        marker,
                        transaction_version,
                    });
                }
            }
        }
    }
    let results = ctx.backend().write_txn_markers(&writes);
    let mut codes = writes.iter().zip(results).map(|(w, r)| match r {
        Ok(()) => 0,
        Err(e) => {
            tracing::debug!(peer = %ctx.peer, topic = %w.topic, partition = w.partition, "transaction marker refused: {e}");
            error_code(&e)
        }
    });
    let markers = request
        .markers
        .iter()
        .map(|m| {
            let topics = m
                .topics
                .iter()
                .map(|t| {
                    let partitions = t
                        .partition_indexes
                        .iter()
                        .map(|&p| {
                            let code = if authorized {
                                // One result per marker written, in the same order.
                                codes
                                    .next()
                                    .unwrap_or(ResponseError::UnknownServerError.code())
                            } else {
                                ResponseError::ClusterAuthorizationFailed.code()
                            };
                            WritableTxnMarkerPartitionResult::default()
                                .with_partition_index(p)
                                .with_error_code(code)
                        })
                        .collect();
                    WritableTxnMarkerTopicResult::default()
                        .with_name(t.name.clone())
                        .with_partitions(partitions)
                })
                .collect();
            WritableTxnMarkerResult::default()
                .with_producer_id(m.producer_id)
                .with_topics(topics)
        })
        .collect();
    let response = WriteTxnMarkersResponse::default().with_markers(markers);
    count_errors(&response);
    // Version 2's response is version 1's.
    let written = version.min(1);
    encode_response(req.header.correlation_id, written, &response).map(Reply::bytes)
}
