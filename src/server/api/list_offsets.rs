//! ListOffsets (key 2), versions 0-5 (v0 through `legacy`): earliest (-2), latest (-1:
//! the high watermark, what consumers may read) or the first offset at or after a
//! timestamp, per partition.
//! From v4 the request's `current_leader_epoch` is checked as Fetch does. A new leader
//! whose high watermark is still below the start of its epoch answers latest, and a
//! timestamp found at none of its committed records, with OFFSET_NOT_AVAILABLE
//! (KIP-207): its high watermark may be below what the previous leader had committed.
//! With `isolation_level` read_committed (v2+), latest is the last stable offset, and
//! a timestamp found at or above it is not found (Kafka's `fetchOffsetForTimestamp`).

use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};

use kafka_protocol::ResponseError;

use super::{Ctx, Fatal, Reply, Request, error_code};
use crate::security::acl::{AclOperation, ResourceType};

/// ListOffsets timestamp meaning "the next offset to be written".
const LATEST: i64 = -1;
/// ListOffsets timestamp meaning "the first offset still in the log".
const EARLIEST: i64 = -2;

pub(super) fn handle(ctx: &Ctx<'_>, req: &mut Request) -> Result<Reply, Fatal> {
    let request: ListOffsetsRequest = req.decode()?;
    let backend = ctx.backend();
    let committed = req.version() >= 2 && request.isolation_level == super::fetch::READ_COMMITTED;
    let topics = request
        .topics
        .into_iter()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let answer = ListOffsetsPartitionResponse::default()
                        .with_partition_index(p.partition_index)
                        .with_timestamp(-1)
                        .with_offset(-1)
                        .with_leader_epoch(-1);
                    if let Err(e) =
                        ctx.authorize(AclOperation::Describe, ResourceType::Topic, &t.name)
                    {
                        return answer.with_error_code(error_code(&e));
                    }
                    let found = backend
                        .partition(&t.name, p.partition_index)
                        .and_then(|log| {
                            // v4+: the client's leader epoch (-1 before).
                            log.check_leader_epoch(p.current_leader_epoch)?;
                            let found = match (p.timestamp, committed) {
                                (LATEST, false) => Some((log.high_watermark(), -1)),
                                (LATEST, true) => Some((log.last_stable_offset()?, -1)),
                                (EARLIEST, _) => Some((log.log_start_offset(), -1)),
                                (ts, false) => log.offset_for_timestamp(ts)?,
                                (ts, true) => {
                                    let lso = log.last_stable_offset()?;
                                    log.offset_for_timestamp(ts)?.filter(|&(o, _)| o < lso)
                                }
                            };
                            // KIP-207: as Kafka's `fetchOffsetForTimestamp`.
                            let unknown = p.timestamp != EARLIEST
                                && (p.timestamp == LATEST || found.is_none())
                                && !log.offsets_available();
                            Ok((found, unknown))
                        });
                    match found {
                        Ok((_, true)) => {
                            answer.with_error_code(ResponseError::OffsetNotAvailable.code())
                        }
                        Ok((Some((offset, ts)), false)) => {
                            answer.with_offset(offset).with_timestamp(ts)
                        }
                        Ok((None, false)) => answer,
                        Err(e) => answer.with_error_code(error_code(&e)),
                    }
                })
                .collect();
            ListOffsetsTopicResponse::default()
                .with_name(t.name)
                .with_partitions(partitions)
        })
        .collect();
    req.respond(&ListOffsetsResponse::default().with_topics(topics))
}
