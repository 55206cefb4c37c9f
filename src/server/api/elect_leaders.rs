//! ElectLeaders (key 43), versions 0-2: Kafka's `kafka-leader-election`. Needs Alter on
//! the cluster (CLUSTER_AUTHORIZATION_FAILED for the request and each partition).
//! Version 0 is a preferred election; from version 1 `election_type` 0 is preferred, 1
//! unclean (a leaderless partition is led by any live replica, losing what only the old
//! ISR had), anything else INVALID_REQUEST. No `topic_partitions` (null) means every
//! partition, for either type as Kafka's broker takes it (`tidelog leader-election`
//! refuses an unclean one without partitions), and then partitions that need no election
//! are left out of the answer, as Kafka does.
//!
//! Per partition: UNKNOWN_TOPIC_OR_PARTITION, ELECTION_NOT_NEEDED (the preferred
//! replica leads already; for unclean, the partition has a leader),
//! PREFERRED_LEADER_NOT_AVAILABLE (it is fenced or out of the ISR),
//! ELIGIBLE_LEADERS_NOT_AVAILABLE (no live replica), or the controller's error. The
//! answer comes once this node applied the election. A single node leads every
//! partition it has: ELECTION_NOT_NEEDED.

use std::collections::BTreeMap;
use std::time::Duration;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::elect_leaders_response::{PartitionResult, ReplicaElectionResult};
use kafka_protocol::messages::{ElectLeadersRequest, ElectLeadersResponse, TopicName};

use super::{Ctx, Fatal, Reply, Request, error_code, kstr};
use crate::security::acl::{AclOperation, CLUSTER_RESOURCE_NAME, ResourceType};
use crate::server::partition_admin::{ElectionOutcome, ElectionType};

/// Kafka's `ElectionType.PREFERRED`.
const PREFERRED: i8 = 0;
/// Kafka's `ElectionType.UNCLEAN`.
const UNCLEAN: i8 = 1;

pub(super) fn handle(ctx: &Ctx<'_>, req: &mut Request) -> Result<Reply, Fatal> {
    let request: ElectLeadersRequest = req.decode()?;
    let version = req.version();
    let all = request.topic_partitions.is_none();
    let named: Vec<(String, i32)> = request
        .topic_partitions
        .iter()
        .flatten()
        .flat_map(|t| {
            let name = t.topic.0.to_string();
            t.partitions.iter().map(move |p| (name.clone(), *p))
        })
        .collect();
    let mut refuse = |code: i16, message: String| {
        let results = named
            .iter()
            .map(|(t, p)| (t.clone(), *p, code, Some(message.clone())))
            .collect();
        respond(req, code, results)
    };
    if let Err((code, message)) = ctx.check(
        AclOperation::Alter,
        ResourceType::Cluster,
        CLUSTER_RESOURCE_NAME,
    ) {
        return refuse(code, message);
    }
    let election = match if version == 0 {
        PREFERRED
    } else {
        request.election_type
    } {
        PREFERRED => ElectionType::Preferred,
        UNCLEAN => ElectionType::Unclean,
        other => {
            return refuse(
                ResponseError::InvalidRequest.code(),
                format!("unknown election type {other}; 0 is preferred, 1 unclean"),
            );
        }
    };
    let timeout = Duration::from_millis(request.timeout_ms.max(1) as u64);
    let backend = ctx.backend();
    let admin = backend.cluster().and_then(|c| c.partition_admin());
    let partitions = match (all, admin) {
        (true, Some(admin)) => admin.all_partitions(),
        (true, None) => Vec::new(),
        (false, _) => named,
    };
    let outcomes: Vec<crate::error::Result<ElectionOutcome>> = match admin {
        Some(admin) => admin.elect_leaders(election, &partitions, timeout),
        // A single node: the one replica of each partition leads it.
        None => partitions
            .iter()
            .map(|(t, p)| match backend.partition_count(t) {
                Some(n) if (0..n).contains(p) => Ok(ElectionOutcome::NotNeeded),
                Some(n) => Err(crate::error::Error::UnknownPartition {
                    topic: t.clone(),
                    partition: *p,
                    count: n,
                }),
                None => Err(crate::error::Error::UnknownTopic(t.clone())),
            })
            .collect(),
    };
    let mut results = Vec::with_capacity(partitions.len());
    for ((topic, partition), outcome) in partitions.into_iter().zip(outcomes) {
        let (code, message) = match outcome {
            Ok(ElectionOutcome::Elected) => (0, None),
            Ok(ElectionOutcome::NotNeeded) if all => continue,
            Ok(ElectionOutcome::NotNeeded) => (
                ResponseError::ElectionNotNeeded.code(),
                Some(match election {
                    ElectionType::Preferred => "the preferred replica leads already".to_string(),
                    ElectionType::Unclean => "the partition has a leader".to_string(),
                }),
            ),
            Ok(ElectionOutcome::PreferredNotAvailable) => (
                ResponseError::PreferredLeaderNotAvailable.code(),
                Some("the preferred replica is fenced or not in the ISR".to_string()),
            ),
            Ok(ElectionOutcome::EligibleNotAvailable) => (
                ResponseError::EligibleLeadersNotAvailable.code(),
                Some("no replica of the partition is alive".to_string()),
            ),
            Ok(ElectionOutcome::Failed(e)) | Err(e) => (error_code(&e), Some(e.to_string())),
        };
        if code != 0 {
            tracing::debug!(peer = %ctx.peer, topic = %topic, partition, code, "leader election refused: {message:?}");
        }
        results.push((topic, partition, code, message));
    }
    respond(req, 0, results)
}

/// The response: a top-level error (version 1+) and the partitions' results by topic.
fn respond(
    req: &mut Request,
    error: i16,
    results: Vec<(String, i32, i16, Option<String>)>,
) -> Result<Reply, Fatal> {
    let mut by_topic: BTreeMap<String, Vec<PartitionResult>> = BTreeMap::new();
    for (topic, partition, code, message) in results {
        by_topic.entry(topic).or_default().push(
            PartitionResult::default()
                .with_partition_id(partition)
                .with_error_code(code)
                .with_error_message(message.map(kstr)),
        );
    }
    let results = by_topic
        .into_iter()
        .map(|(topic, partitions)| {
            ReplicaElectionResult::default()
                .with_topic(TopicName(kstr(topic)))
                .with_partition_result(partitions)
        })
        .collect();
    let error = if req.version() >= 1 { error } else { 0 };
    req.respond(
        &ElectLeadersResponse::default()
            .with_error_code(error)
            .with_replica_election_results(results),
    )
}
