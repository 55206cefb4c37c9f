//! What the share-group offsets APIs (DescribeShareGroupOffsets,
//! AlterShareGroupOffsets, DeleteShareGroupOffsets) check alike: the group is a share
//! group this node's share coordinator serves, and each topic-partition named exists
//! and may be used.

use std::collections::BTreeMap;

use kafka_protocol::ResponseError;

use super::{Ctx, error_code};
use crate::coordinator::ShareCoordinator;
use crate::security::acl::{AclOperation, ResourceType};
use crate::security::denied_code;
use crate::server::topic_ids::topics_with_counts;

/// A refusal: Kafka's error code and a message.
pub(super) type Refusal = (i16, String);

/// The share coordinator serving `group`, after the group ACL `op` is checked and the
/// id is checked not to be a classic or consumer group's (GROUP_ID_NOT_FOUND, as Kafka
/// answers a group of another type).
pub(super) fn coordinator<'a>(
    ctx: &'a Ctx<'_>,
    group: &str,
    op: AclOperation,
) -> Result<&'a ShareCoordinator, Refusal> {
    if !ctx.allowed(op, ResourceType::Group, group) {
        return Err((
            denied_code(ResourceType::Group),
            format!("not authorized on group {group}"),
        ));
    }
    let backend = ctx.backend();
    if backend.groups().group_type(group).is_some() {
        return Err((
            ResponseError::GroupIdNotFound.code(),
            format!("group {group} is not a share group"),
        ));
    }
    backend.share().map_err(|e| (error_code(&e), e.to_string()))
}

/// The topics of the node or cluster with their partition counts.
pub(super) fn topics(ctx: &Ctx<'_>) -> BTreeMap<String, i32> {
    topics_with_counts(ctx.backend()).into_iter().collect()
}

/// Whether `topic`-`partition` may be used with the topic ACL `op` and exists
/// (TOPIC_AUTHORIZATION_FAILED, UNKNOWN_TOPIC_OR_PARTITION otherwise).
pub(super) fn check_partition(
    ctx: &Ctx<'_>,
    topics: &BTreeMap<String, i32>,
    op: AclOperation,
    topic: &str,
    partition: Option<i32>,
) -> Result<(), Refusal> {
    if !ctx.allowed(op, ResourceType::Topic, topic) {
        return Err((
            ResponseError::TopicAuthorizationFailed.code(),
            format!("not authorized on topic {topic}"),
        ));
    }
    match (topics.get(topic), partition) {
        (Some(n), Some(p)) if (0..*n).contains(&p) => Ok(()),
        (Some(_), None) => Ok(()),
        (Some(n), Some(p)) => Err((
            ResponseError::UnknownTopicOrPartition.code(),
            format!("topic {topic} has {n} partitions, not partition {p}"),
        )),
        (None, _) => Err((
            ResponseError::UnknownTopicOrPartition.code(),
            format!("unknown topic {topic}"),
        )),
    }
}
