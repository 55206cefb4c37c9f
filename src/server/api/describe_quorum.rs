//! DescribeQuorum (key 55), versions 0-2, and AddRaftVoter (80) / RemoveRaftVoter (81),
//! version 0 (KIP-853): the metadata quorum of a cluster node, as
//! `kafka-metadata-quorum` asks for it. DescribeQuorum is answered by the controller
//! (the Raft leader) with each voter's and observer's (learner's) progress; another
//! node forwards it to the controller, as Kafka's brokers do, and relays its answer
//! (NOT_LEADER_OR_FOLLOWER naming the controller when it cannot be reached, or when the
//! request was itself forwarded to a node that is no longer the controller). The voter
//! changes are the controller's too: another node forwards them the same way and relays
//! the controller's answer (NOT_CONTROLLER naming the controller when it cannot be
//! reached or the request was forwarded already). A single node has no quorum:
//! INVALID_REQUEST. DescribeQuorum needs DESCRIBE on the cluster, the changes ALTER (of
//! the node first asked, and of the controller).

use std::time::Duration;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::describe_quorum_response::{
    Listener, Node, PartitionData, ReplicaState, TopicData,
};
use kafka_protocol::messages::{
    AddRaftVoterRequest, AddRaftVoterResponse, BrokerId, DescribeQuorumRequest,
    DescribeQuorumResponse, RemoveRaftVoterRequest, RemoveRaftVoterResponse, TopicName,
};

use super::{Ctx, Fatal, Reply, Request, kstr};
use crate::cluster::quorum_forward::FORWARDED_CLIENT_PREFIX;
use crate::cluster::{QuorumRefusal, QuorumStatus, ReplicaStatus};
use crate::security::acl::AclOperation;
use crate::server::cluster_view::VoterChangeRequest;
use crate::storage::codec::{uuid_base64, uuid_from_base64};

/// The metadata log's topic, as Kafka names it.
const METADATA_TOPIC: &str = "__cluster_metadata";
/// The longest a voter change waits when the request says 0 or less.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

pub(super) fn handle(ctx: &Ctx<'_>, req: &mut Request) -> Result<Reply, Fatal> {
    let request: DescribeQuorumRequest = req.decode()?;
    let refused = |code: i16, message: String| {
        DescribeQuorumResponse::default()
            .with_error_code(code)
            .with_error_message(Some(kstr(message)))
    };
    if !ctx.allowed_on_cluster(AclOperation::Describe) {
        return req.respond(&refused(
            ResponseError::ClusterAuthorizationFailed.code(),
            "Cluster authorization failed".into(),
        ));
    }
    let Some(cluster) = ctx.backend().cluster() else {
        return req.respond(&refused(
            ResponseError::InvalidRequest.code(),
            "this node is a single node; it has no metadata quorum".into(),
        ));
    };
    let asked_other = request.topics.iter().any(|t| {
        t.topic_name.as_str() != METADATA_TOPIC
            || t.partitions.iter().any(|p| p.partition_index != 0)
    });
    if asked_other || request.topics.is_empty() {
        return req.respond(&refused(
            ResponseError::InvalidRequest.code(),
            format!("only {METADATA_TOPIC} partition 0 has a quorum"),
        ));
    }
    let q = cluster.quorum().unwrap_or_default();
    let version = req.version();
    let me = cluster.node_id();
    let directory = |node: i32| {
        cluster
            .directory_of(node)
            .and_then(|d| uuid_from_base64(&d))
            .map_or(uuid::Uuid::nil(), uuid::Uuid::from_bytes)
    };
    let replica = |r: &ReplicaStatus| {
        let state = ReplicaState::default()
            .with_replica_id(BrokerId(r.node))
            .with_log_end_offset(r.log_end);
        let state = if version >= 1 {
            state
                .with_last_fetch_timestamp(r.last_heard_ms)
                .with_last_caught_up_timestamp(r.last_heard_ms)
        } else {
            state
        };
        if version >= 2 {
            state.with_replica_directory_id(directory(r.node))
        } else {
            state
        }
    };
    // Kafka's brokers forward DescribeQuorum to the controller: so does a node that is
    // not the controller, once (a request another node forwarded is answered here).
    let forwarded = req.client_id().starts_with(FORWARDED_CLIENT_PREFIX);
    let mut why_not = String::new();
    if q.leader != me && q.leader > 0 && !forwarded {
        match cluster.describe_quorum_at_controller(q.leader, &request, version) {
            Ok(answer) => return req.respond(&answer),
            Err(e) => why_not = format!(" ({e})"),
        }
    }
    let partition = if q.leader != me {
        PartitionData::default()
            .with_partition_index(0)
            .with_error_code(ResponseError::NotLeaderOrFollower.code())
            .with_error_message(Some(kstr(format!(
                "node {me} is not the controller; ask node {}{why_not}",
                q.leader
            ))))
            .with_leader_id(BrokerId(q.leader))
            .with_leader_epoch(q.term as i32)
    } else {
        PartitionData::default()
            .with_partition_index(0)
            .with_leader_id(BrokerId(q.leader))
            .with_leader_epoch(q.term as i32)
            .with_high_watermark(q.committed as i64)
            .with_current_voters(q.voters.iter().map(replica).collect())
            .with_observers(q.learners.iter().map(replica).collect())
    };
    let response = DescribeQuorumResponse::default().with_topics(vec![
        TopicData::default()
            .with_topic_name(TopicName(kstr(METADATA_TOPIC)))
            .with_partitions(vec![partition]),
    ]);
    let response = if version >= 2 {
        response.with_nodes(nodes(&q))
    } else {
        response
    };
    req.respond(&response)
}

/// Each member's quorum listener (KIP-853's `nodes`, listener name `CONTROLLER`).
fn nodes(q: &QuorumStatus) -> Vec<Node> {
    q.addresses
        .iter()
        .filter_map(|(node, addr)| {
            let (host, port) = addr.rsplit_once(':')?;
            let port: u16 = port.parse().ok()?;
            Some(
                Node::default()
                    .with_node_id(BrokerId(*node))
                    .with_listeners(vec![
                        Listener::default()
                            .with_name(kstr("CONTROLLER"))
                            .with_host(kstr(host.trim_start_matches('[').trim_end_matches(']')))
                            .with_port(port),
                    ]),
            )
        })
        .collect()
}

/// The directory id of a request: None for the nil id ("any").
fn directory_id(id: &uuid::Uuid) -> Option<String> {
    (!id.is_nil()).then(|| uuid_base64(id.as_bytes()))
}

/// An outcome as a response's error code and message.
fn outcome(r: Result<(), QuorumRefusal>) -> (i16, Option<String>) {
    match r {
        Ok(()) => (0, None),
        Err(e) => (e.code(), Some(e.to_string())),
    }
}

/// Runs a voter change on the cluster, or says why not: a node that is not the
/// controller forwards it there (unless it was forwarded to it) and relays the answer.
fn change(
    ctx: &Ctx<'_>,
    req: &Request,
    request: VoterChangeRequest<'_>,
    timeout: Duration,
) -> (i16, Option<String>) {
    if !ctx.allowed_on_cluster(AclOperation::Alter) {
        return (
            ResponseError::ClusterAuthorizationFailed.code(),
            Some("Cluster authorization failed".into()),
        );
    }
    let Some(cluster) = ctx.backend().cluster() else {
        return (
            ResponseError::InvalidRequest.code(),
            Some("this node is a single node; it has no metadata quorum".into()),
        );
    };
    let (add, node, directory) = match request {
        VoterChangeRequest::Add(r) => (true, r.voter_id, &r.voter_directory_id),
        VoterChangeRequest::Remove(r) => (false, r.voter_id, &r.voter_directory_id),
    };
    match cluster.change_voter(add, node, directory_id(directory), timeout) {
        Err(QuorumRefusal::NotController { leader })
            if leader > 0 && !req.client_id().starts_with(FORWARDED_CLIENT_PREFIX) =>
        {
            match cluster.voter_change_at_controller(leader, request, req.version(), timeout) {
                Ok(answer) => answer,
                Err(why) => {
                    let (code, message) = outcome(Err(QuorumRefusal::NotController { leader }));
                    (code, message.map(|m| format!("{m} ({why})")))
                }
            }
        }
        other => outcome(other),
    }
}

pub(super) fn add(ctx: &Ctx<'_>, req: &mut Request) -> Result<Reply, Fatal> {
    let request: AddRaftVoterRequest = req.decode()?;
    let timeout = u64::try_from(request.timeout_ms)
        .ok()
        .filter(|ms| *ms > 0)
        .map_or(DEFAULT_TIMEOUT, Duration::from_millis);
    let (code, message) = change(ctx, req, VoterChangeRequest::Add(&request), timeout);
    req.respond(
        &AddRaftVoterResponse::default()
            .with_error_code(code)
            .with_error_message(message.map(kstr)),
    )
}

pub(super) fn remove(ctx: &Ctx<'_>, req: &mut Request) -> Result<Reply, Fatal> {
    let request: RemoveRaftVoterRequest = req.decode()?;
    let (code, message) = change(
        ctx,
        req,
        VoterChangeRequest::Remove(&request),
        DEFAULT_TIMEOUT,
    );
    req.respond(
        &RemoveRaftVoterResponse::default()
            .with_error_code(code)
            .with_error_message(message.map(kstr)),
    )
}
