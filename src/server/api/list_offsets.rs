//! ListOffsets (key 2), versions 0-9 (v0 through `legacy`): earliest (-2), latest (-1:
//! the high watermark, what consumers may read) or the first offset at or after a
//! timestamp, per partition; from v7 the record with the largest timestamp (-3,
//! KIP-734), from v8 the earliest local offset (-4, the log start: nothing is tiered),
//! from v9 the latest tiered offset (-5: -1, nothing is tiered).
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
use crate::server::backend::PartitionOps;

/// ListOffsets timestamp meaning "the next offset to be written".
const LATEST: i64 = -1;
/// ListOffsets timestamp meaning "the first offset still in the log".
const EARLIEST: i64 = -2;
/// The record with the largest timestamp (v7+, KIP-734).
const MAX_TIMESTAMP: i64 = -3;
/// The first offset of the local log (v8+, KIP-405): the log start without tiering.
const EARLIEST_LOCAL: i64 = -4;
/// The last offset in tiered storage (v9+, KIP-1005): none without tiering.
const LATEST_TIERED: i64 = -5;
/// Bytes read per step of the scan for the largest timestamp.
const SCAN_BYTES: usize = 1 << 20;

/// The offset and timestamp of the first record with the largest timestamp below the
/// high watermark (Kafka's MAX_TIMESTAMP), None in an empty log.
fn max_timestamp(log: &dyn PartitionOps) -> crate::error::Result<Option<(i64, i64)>> {
    let end = log.high_watermark();
    let mut offset = log.log_start_offset();
    let mut best: Option<(i64, i64)> = None; // (timestamp, base offset of its batch)
    while offset < end {
        let slice = log.read(offset, SCAN_BYTES)?;
        let mut next = offset;
        for b in slice.batches() {
            if b.last_offset() >= end {
                break;
            }
            next = b.last_offset() + 1;
            if !b.is_control() && best.is_none_or(|(ts, _)| b.max_timestamp() > ts) {
                best = Some((b.max_timestamp(), b.base_offset()));
            }
        }
        if next <= offset {
            break;
        }
        offset = next;
    }
    let Some((ts, base)) = best else {
        return Ok(None);
    };
    // The record of that batch carrying the timestamp.
    let slice = log.read(base, SCAN_BYTES)?;
    let mut scratch = Vec::new();
    if let Some(b) = slice.batches().next() {
        for r in b.decode_records("ListOffsets", 1 << 26, &mut scratch)? {
            let r = r?;
            if r.timestamp == ts {
                return Ok(Some((r.offset, ts)));
            }
        }
        return Ok(Some((b.last_offset(), ts)));
    }
    Ok(None)
}

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
                                (EARLIEST | EARLIEST_LOCAL, _) => {
                                    Some((log.log_start_offset(), -1))
                                }
                                (MAX_TIMESTAMP, _) => max_timestamp(log.as_ref())?,
                                // Nothing is tiered: no offset, as Kafka without remote
                                // storage.
                                (LATEST_TIERED, _) => Some((-1, -1)),
                                (ts, false) => log.offset_for_timestamp(ts)?,
                                (ts, true) => {
                                    let lso = log.last_stable_offset()?;
                                    log.offset_for_timestamp(ts)?.filter(|&(o, _)| o < lso)
                                }
                            };
                            // KIP-207: as Kafka's `fetchOffsetForTimestamp`.
                            let unknown = ![EARLIEST, EARLIEST_LOCAL, LATEST_TIERED]
                                .contains(&p.timestamp)
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
