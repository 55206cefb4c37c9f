//! WriteTxnMarkers (key 27), version 1: a transaction coordinator's COMMIT or ABORT
//! markers for partitions this node leads; each is appended as a control batch and
//! waits for the partition's in-sync replicas. ClusterAction on the cluster.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
};
use kafka_protocol::messages::{WriteTxnMarkersRequest, WriteTxnMarkersResponse};

use super::{Ctx, Fatal, Reply, Request, error_code};
use crate::record::EndTxnMarker;
use crate::security::acl::AclOperation;

pub(super) fn handle(ctx: &Ctx<'_>, req: &mut Request) -> Result<Reply, Fatal> {
    let request: WriteTxnMarkersRequest = req.decode()?;
    let authorized = ctx.allowed_on_cluster(AclOperation::ClusterAction);
    let markers = request
        .markers
        .into_iter()
        .map(|m| {
            let marker = if m.transaction_result {
                EndTxnMarker::commit(m.coordinator_epoch)
            } else {
                EndTxnMarker::abort(m.coordinator_epoch)
            };
            let topics = m
                .topics
                .into_iter()
                .map(|t| {
                    let partitions = t
                        .partition_indexes
                        .iter()
                        .map(|&p| {
                            let code = if !authorized {
                                ResponseError::ClusterAuthorizationFailed.code()
                            } else {
                                match ctx.backend().write_txn_marker(
                                    &t.name.0,
                                    p,
                                    m.producer_id.0,
                                    m.producer_epoch,
                                    marker,
                                ) {
                                    Ok(()) => 0,
                                    Err(e) => {
                                        tracing::debug!(peer = %ctx.peer, topic = %t.name.0, partition = p, "transaction marker refused: {e}");
                                        error_code(&e)
                                    }
                                }
                            };
                            WritableTxnMarkerPartitionResult::default()
                                .with_partition_index(p)
                                .with_error_code(code)
                        })
                        .collect();
                    WritableTxnMarkerTopicResult::default()
                        .with_name(t.name)
                        .with_partitions(partitions)
                })
                .collect();
            WritableTxnMarkerResult::default()
                .with_producer_id(m.producer_id)
                .with_topics(topics)
        })
        .collect();
    req.respond(&WriteTxnMarkersResponse::default().with_markers(markers))
}
