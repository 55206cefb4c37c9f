//! DeleteRecords (key 21), versions 0-2: advance partitions' log start offsets (Kafka's
//! `kafka-delete-records`). Per partition: offset -1 means the high watermark; an offset
//! above the high watermark or below -1 is OFFSET_OUT_OF_RANGE; an unknown topic or
//! partition UNKNOWN_TOPIC_OR_PARTITION; the internal offsets topic
//! INVALID_TOPIC_EXCEPTION. The answer is the partition's new low watermark (log start).

use kafka_protocol::ResponseError;
use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::{DeleteRecordsRequest, DeleteRecordsResponse};

use super::{Ctx, Fatal, Reply, Request, error_code};
use crate::security::acl::{AclOperation, ResourceType};

/// Kafka's "delete up to the high watermark".
const HIGH_WATERMARK: i64 = -1;

pub(super) fn handle(ctx: &Ctx<'_>, req: &mut Request) -> Result<Reply, Fatal> {
    let request: DeleteRecordsRequest = req.decode()?;
    let topics = request
        .topics
        .into_iter()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let result = DeleteRecordsPartitionResult::default()
                        .with_partition_index(p.partition_index)
                        .with_low_watermark(-1);
                    match delete(ctx, &t.name.0, p.partition_index, p.offset) {
                        Ok(low) => result.with_low_watermark(low),
                        Err(code) => result.with_error_code(code),
                    }
                })
                .collect();
            DeleteRecordsTopicResult::default()
                .with_name(t.name)
                .with_partitions(partitions)
        })
        .collect();
    req.respond(&DeleteRecordsResponse::default().with_topics(topics))
}

fn delete(ctx: &Ctx<'_>, topic: &str, partition: i32, offset: i64) -> Result<i64, i16> {
    ctx.authorize(AclOperation::Delete, ResourceType::Topic, topic)
        .map_err(|e| error_code(&e))?;
    if topic == crate::broker::OFFSETS_TOPIC
        || topic == crate::transaction::log::TRANSACTION_STATE_TOPIC
    {
        return Err(ResponseError::InvalidTopicException.code());
    }
    let log = ctx
        .backend()
        .partition(topic, partition)
        .map_err(|e| error_code(&e))?;
    let offset = if offset == HIGH_WATERMARK {
        log.high_watermark()
    } else {
        offset
    };
    match log.delete_records_before(offset) {
        Ok(low) => {
            tracing::info!(peer = %ctx.peer, topic, partition, low_watermark = low, "records deleted");
            Ok(low)
        }
        Err(e) => {
            tracing::debug!(peer = %ctx.peer, topic, partition, offset, "DeleteRecords refused: {e}");
            Err(error_code(&e))
        }
    }
}
