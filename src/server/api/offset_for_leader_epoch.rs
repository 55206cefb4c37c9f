//! OffsetForLeaderEpoch (key 23), versions 2-4 (Kafka 4.0 removed 0-1, and the protocol
//! crate decodes only 2-4): for each partition and leader epoch,
//! the largest epoch of the leader's log at or below it and the offset where that epoch
//! ends (the start of the next one, or the log end for the latest). Followers ask it
//! before they fetch from a new leader, to truncate a divergent tail (KIP-101/279);
//! clients ask it after a leader change to detect truncation (KIP-320).
//!
//! Only the leader answers (NOT_LEADER_OR_FOLLOWER elsewhere); the request's
//! `current_leader_epoch` is checked (FENCED_LEADER_EPOCH if older, UNKNOWN_LEADER_EPOCH
//! if newer). A log without epochs answers UNDEFINED_EPOCH and UNDEFINED_EPOCH_OFFSET
//! (-1, -1).

use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::{OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse};

use super::{Ctx, Fatal, Reply, Request, error_code};
use crate::security::acl::{AclOperation, ResourceType};

pub(super) fn handle(ctx: &Ctx<'_>, req: &mut Request) -> Result<Reply, Fatal> {
    let request: OffsetForLeaderEpochRequest = req.decode()?;
    let backend = ctx.backend();
    // A follower's request needs ClusterAction on the cluster, a client's Describe on the
    // topic (TOPIC_AUTHORIZATION_FAILED per partition either way, as in Kafka).
    let follower = request.replica_id.0 >= 0;
    let allowed = |topic: &str| match follower {
        true => ctx.authorize_fetch(topic, true),
        false => ctx.authorize(AclOperation::Describe, ResourceType::Topic, topic),
    };
    let topics = request
        .topics
        .into_iter()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let answer = EpochEndOffset::default()
                        .with_partition(p.partition)
                        .with_leader_epoch(-1)
                        .with_end_offset(-1);
                    let found = allowed(&t.topic).and_then(|()| backend.partition(&t.topic, p.partition)).and_then(|log| {
                        log.check_leader_epoch(p.current_leader_epoch)?;
                        log.end_offset_for_epoch(p.leader_epoch)
                    });
                    match found {
                        Ok((epoch, end)) => answer.with_leader_epoch(epoch).with_end_offset(end),
                        Err(e) => {
                            tracing::debug!(peer = %ctx.peer, topic = %t.topic.0, partition = p.partition, "OffsetForLeaderEpoch refused: {e}");
                            answer.with_error_code(error_code(&e))
                        }
                    }
                })
                .collect();
            OffsetForLeaderTopicResult::default()
                .with_topic(t.topic)
                .with_partitions(partitions)
        })
        .collect();
    req.respond(&OffsetForLeaderEpochResponse::default().with_topics(topics))
}
