//! ConsumerGroupHeartbeat (key 68), versions 0-1: the consumer group protocol
//! (KIP-848). Topics travel by id ([`topic_ids`](crate::server::topic_ids)); the
//! coordinator works with names. Needs Read on the group, and Describe on every topic
//! subscribed to by name (TOPIC_AUTHORIZATION_FAILED otherwise, as Kafka); a regular
//! expression only ever matches topics the principal may describe. From version 1 the
//! client chooses its member id, which must not be empty.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::consumer_group_heartbeat_response::{Assignment, TopicPartitions};
use kafka_protocol::messages::{ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse};

use super::{Ctx, Fatal, Reply, Request, kstr};
use crate::coordinator::{ConsumerHeartbeatRequest, GroupError, TopicsImage};
use crate::security::acl::{AclOperation, ResourceType};
use crate::security::denied_code;
use crate::server::error_codes::KafkaCode;
use crate::server::topic_ids::{by_id, topic_id, topics_with_counts};

fn refusal(code: i16, message: String) -> ConsumerGroupHeartbeatResponse {
    ConsumerGroupHeartbeatResponse::default()
        .with_error_code(code)
        .with_error_message(Some(kstr(message)))
}

pub(super) fn handle(ctx: &Ctx<'_>, req: &mut Request) -> Result<Reply, Fatal> {
    let request: ConsumerGroupHeartbeatRequest = req.decode()?;
    let group_id = request.group_id.0.to_string();
    if !ctx.allowed(AclOperation::Read, ResourceType::Group, &group_id) {
        let code = denied_code(ResourceType::Group);
        return req.respond(&refusal(
            code,
            format!("not authorized on group {group_id}"),
        ));
    }
    if let Some(names) = &request.subscribed_topic_names {
        let denied: Vec<String> = names
            .iter()
            .map(|n| n.0.to_string())
            .filter(|n| !ctx.allowed(AclOperation::Describe, ResourceType::Topic, n))
            .collect();
        if !denied.is_empty() {
            let code = ResponseError::TopicAuthorizationFailed.code();
            let message = format!("not authorized to describe topics {denied:?}");
            return req.respond(&refusal(code, message));
        }
    }
    if req.version() >= 1 && request.member_id.is_empty() {
        let e = GroupError::InvalidRequest("MemberId can't be empty".into());
        return req.respond(&refusal(e.code(), e.to_string()));
    }
    let backend = ctx.backend();
    let topics: TopicsImage = topics_with_counts(backend)
        .into_iter()
        .filter(|(n, _)| ctx.permits(AclOperation::Describe, ResourceType::Topic, n))
        .collect();
    let ids = by_id(backend, topics.keys());
    let owned = request.topic_partitions.as_ref().map(|tps| {
        tps.iter()
            .filter_map(|tp| {
                let name = ids.get(&tp.topic_id)?;
                Some((name.clone(), tp.partitions.clone()))
            })
            .collect()
    });
    let heartbeat = ConsumerHeartbeatRequest {
        group_id,
        member_id: request.member_id.to_string(),
        member_epoch: request.member_epoch,
        instance_id: request.instance_id.as_ref().map(ToString::to_string),
        rack_id: request.rack_id.as_ref().map(ToString::to_string),
        rebalance_timeout_ms: request.rebalance_timeout_ms,
        subscribed_topic_names: request
            .subscribed_topic_names
            .as_ref()
            .map(|n| n.iter().map(|t| t.0.to_string()).collect()),
        subscribed_topic_regex: request
            .subscribed_topic_regex
            .as_ref()
            .map(ToString::to_string),
        server_assignor: request.server_assignor.as_ref().map(ToString::to_string),
        owned_partitions: owned,
        client_id: req.client_id().to_string(),
        client_host: format!("/{}", ctx.peer.ip()),
    };
    let response = match backend
        .groups()
        .consumer_group_heartbeat(heartbeat, &topics)
    {
        Ok(r) => ConsumerGroupHeartbeatResponse::default()
            .with_member_id(Some(kstr(r.member_id)))
            .with_member_epoch(r.member_epoch)
            .with_heartbeat_interval_ms(
                i32::try_from(r.heartbeat_interval.as_millis()).unwrap_or(i32::MAX),
            )
            .with_assignment(r.assignment.map(|a| {
                Assignment::default().with_topic_partitions(
                    a.into_iter()
                        .map(|(t, p)| {
                            TopicPartitions::default()
                                .with_topic_id(topic_id(backend, &t))
                                .with_partitions(p)
                        })
                        .collect(),
                )
            })),
        Err(e) => refusal(e.code(), e.to_string()),
    };
    req.respond(&response)
}
