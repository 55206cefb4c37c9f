//! ShareGroupHeartbeat (key 76), version 1: membership of a share group (KIP-932).
//! Members choose their member id, join with epoch 0 and leave with -1; the share
//! coordinator assigns every member every partition of its topics (topics travel by
//! id). Needs Read on the group, and Describe on every subscribed topic
//! (TOPIC_AUTHORIZATION_FAILED otherwise, as Kafka). A group id of a classic or
//! consumer group answers GROUP_ID_NOT_FOUND.

use std::collections::BTreeMap;
use std::time::Instant;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::share_group_heartbeat_response::{Assignment, TopicPartitions};
use kafka_protocol::messages::{ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse};

use super::{Ctx, Fatal, Reply, Request, error_code, kstr};
use crate::coordinator::ShareHeartbeat;
use crate::error::ShareError;
use crate::security::acl::{AclOperation, ResourceType};
use crate::security::denied_code;
use crate::server::error_codes::KafkaCode;
use crate::server::topic_ids::{topic_id, topics_with_counts};

fn refusal(code: i16, message: String) -> ShareGroupHeartbeatResponse {
    ShareGroupHeartbeatResponse::default()
        .with_error_code(code)
        .with_error_message(Some(kstr(message)))
}

pub(super) fn handle(ctx: &Ctx<'_>, req: &mut Request) -> Result<Reply, Fatal> {
    let request: ShareGroupHeartbeatRequest = req.decode()?;
    let group_id = request.group_id.0.to_string();
    if !ctx.allowed(AclOperation::Read, ResourceType::Group, &group_id) {
        let code = denied_code(ResourceType::Group);
        return req.respond(&refusal(
            code,
            format!("not authorized on group {group_id}"),
        ));
    }
    let names: Option<Vec<String>> = request
        .subscribed_topic_names
        .as_ref()
        .map(|n| n.iter().map(|t| t.0.to_string()).collect());
    if let Some(names) = &names {
        let denied: Vec<&String> = names
            .iter()
            .filter(|n| !ctx.allowed(AclOperation::Describe, ResourceType::Topic, n))
            .collect();
        if !denied.is_empty() {
            let code = ResponseError::TopicAuthorizationFailed.code();
            let message = format!("not authorized to describe topics {denied:?}");
            return req.respond(&refusal(code, message));
        }
    }
    let backend = ctx.backend();
    if backend.groups().group_type(&group_id).is_some() {
        let e = ShareError::NotShareGroup;
        return req.respond(&refusal(e.code(), format!("group {group_id}: {e}")));
    }
    let share = match backend.share() {
        Ok(s) => s,
        Err(e) => return req.respond(&refusal(error_code(&e), e.to_string())),
    };
    let topics: BTreeMap<String, i32> = topics_with_counts(backend)
        .into_iter()
        .filter(|(n, _)| ctx.permits(AclOperation::Describe, ResourceType::Topic, n))
        .collect();
    let heartbeat = ShareHeartbeat {
        group_id,
        member_id: request.member_id.to_string(),
        member_epoch: request.member_epoch,
        subscribed_topic_names: names,
        rack_id: request.rack_id.as_ref().map(ToString::to_string),
        client_id: req.client_id().to_string(),
        client_host: format!("/{}", ctx.peer.ip()),
    };
    let response = match share.heartbeat(heartbeat, &topics, Instant::now()) {
        Ok(r) => ShareGroupHeartbeatResponse::default()
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
        Err(e) => refusal(error_code(&e), e.to_string()),
    };
    req.respond(&response)
}
