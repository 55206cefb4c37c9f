//! One file per Kafka API; this module holds the table of supported versions and routes a
//! decoded request header to its handler.
//!
//! Handlers decode their request body with [`codec::decode`](super::codec::decode) and
//! return a [`Reply`]: the response bytes (header included, size prefix excluded), or
//! nothing for an `acks = 0` produce.

mod alter_configs;
mod alter_user_scram_credentials;
mod api_versions;
mod create_acls;
mod create_partitions;
mod create_topics;
mod delete_acls;
mod delete_groups;
mod delete_records;
mod delete_topics;
mod describe_acls;
mod describe_cluster;
mod describe_configs;
mod describe_groups;
mod describe_producers;
mod describe_user_scram_credentials;
mod fetch;
mod find_coordinator;
mod heartbeat;
mod incremental_alter_configs;
mod init_producer_id;
mod join_group;
mod leave_group;
mod list_groups;
mod list_offsets;
mod metadata;
mod offset_commit;
mod offset_delete;
mod offset_fetch;
mod offset_for_leader_epoch;
mod produce;
mod replica_fetch;
pub(crate) mod sasl_authenticate;
pub(crate) mod sasl_handshake;
mod sync_group;

use crate::server::error_codes::KafkaCode;
use std::net::{SocketAddr, TcpStream};

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Encodable, HeaderVersion, StrBytes};

use super::Shared;
use super::backend::Backend;
use super::sendfile::FileRegion;
use crate::error::Error;
use crate::security::Security;
use crate::security::acl::{AclOperation, CLUSTER_RESOURCE_NAME, ResourceType};
use crate::security::peer_log::peer_warn;

/// `(api key, lowest version, highest version)` the server answers, in the order they
/// are listed in an ApiVersions response.
pub(crate) const SUPPORTED: &[(ApiKey, i16, i16)] = &[
    (ApiKey::Produce, 3, 8),
    (ApiKey::Fetch, 4, 11),
    (ApiKey::ListOffsets, 1, 5),
    (ApiKey::Metadata, 0, 8),
    (ApiKey::OffsetCommit, 2, 7),
    (ApiKey::OffsetFetch, 1, 5),
    (ApiKey::FindCoordinator, 0, 2),
    (ApiKey::JoinGroup, 0, 5),
    (ApiKey::Heartbeat, 0, 3),
    (ApiKey::LeaveGroup, 0, 3),
    (ApiKey::SyncGroup, 0, 3),
    (ApiKey::ApiVersions, 0, 3),
    (ApiKey::CreateTopics, 2, 4),
    (ApiKey::DeleteTopics, 1, 3),
    (ApiKey::InitProducerId, 0, 1),
    (ApiKey::DescribeConfigs, 1, 3),
    (ApiKey::DescribeGroups, 0, 5),
    (ApiKey::ListGroups, 0, 4),
    (ApiKey::DeleteGroups, 0, 2),
    (ApiKey::OffsetDelete, 0, 0),
    (ApiKey::CreatePartitions, 0, 3),
    (ApiKey::AlterConfigs, 0, 2),
    (ApiKey::IncrementalAlterConfigs, 0, 1),
    (ApiKey::DeleteRecords, 0, 2),
    (ApiKey::DescribeCluster, 0, 2),
    (ApiKey::SaslHandshake, 0, 1),
    (ApiKey::SaslAuthenticate, 0, 2),
    (ApiKey::DescribeAcls, 1, 3),
    (ApiKey::CreateAcls, 1, 3),
    (ApiKey::DeleteAcls, 1, 3),
    (ApiKey::DescribeUserScramCredentials, 0, 0),
    (ApiKey::AlterUserScramCredentials, 0, 0),
    (ApiKey::OffsetForLeaderEpoch, 2, 4),
    (ApiKey::DescribeProducers, 0, 0),
];

/// The version range the server answers for `api_key`, if it answers it at all.
pub(crate) fn supported_range(api_key: i16) -> Option<(i16, i16)> {
    SUPPORTED
        .iter()
        .find(|(k, _, _)| *k as i16 == api_key)
        .map(|&(_, lo, hi)| (lo, hi))
}

/// One piece of a response on the wire.
pub(crate) enum Part {
    /// Bytes built in memory.
    Bytes(Vec<u8>),
    /// Bytes of a segment file, sent with `sendfile(2)`.
    File(Box<dyn FileRegion>),
}

impl Part {
    /// Number of bytes this part puts on the wire.
    pub(crate) fn len(&self) -> usize {
        match self {
            Part::Bytes(b) => b.len(),
            Part::File(f) => f.len(),
        }
    }
}

/// What goes back to the client for one request.
pub(crate) enum Reply {
    /// Nothing at all (a produce with `acks = 0`).
    Nothing,
    /// A response: the parts are written in order after one size prefix.
    Parts(Vec<Part>),
    /// Nothing, and the connection ends: the client hung up while the request waited.
    ClientGone,
}

impl Reply {
    /// A response held entirely in memory.
    pub(crate) fn bytes(b: Vec<u8>) -> Reply {
        Reply::Parts(vec![Part::Bytes(b)])
    }
}

/// A request that failed before a response could be built; the connection is closed.
#[derive(Debug)]
pub(crate) struct Fatal(pub String);

/// The request being handled: its decoded header and its body bytes.
pub(crate) struct Request {
    /// Header (api key, version, correlation id, client id).
    pub header: RequestHeader,
    /// The body, not yet decoded.
    pub body: Bytes,
}

impl Request {
    /// The API version of the request.
    pub(crate) fn version(&self) -> i16 {
        self.header.request_api_version
    }

    /// Decode the body as a `T`.
    pub(crate) fn decode<T: kafka_protocol::protocol::Decodable>(&mut self) -> Result<T, Fatal> {
        let version = self.version();
        super::codec::decode(&mut self.body, version).map_err(|e| {
            Fatal(format!(
                "cannot decode {} v{version} request: {e}",
                api_name(self.header.request_api_key)
            ))
        })
    }

    /// The client id of the request header ("" if none).
    pub(crate) fn client_id(&self) -> &str {
        self.header.client_id.as_deref().unwrap_or("")
    }

    /// Encode `response` with this request's version and correlation id (and count its
    /// error codes for the server's metrics).
    pub(crate) fn respond<R: Encodable + HeaderVersion + 'static>(
        &self,
        response: &R,
    ) -> Result<Reply, Fatal> {
        crate::metrics::server::count_response(response);
        encode_response(self.header.correlation_id, self.version(), response).map(Reply::bytes)
    }
}

/// Encode a response header (of the version that matches `R` at `version`) and `response`.
pub(crate) fn encode_response<R: Encodable + HeaderVersion>(
    correlation_id: i32,
    version: i16,
    response: &R,
) -> Result<Vec<u8>, Fatal> {
    let mut out = bytes::BytesMut::new();
    let header = ResponseHeader::default().with_correlation_id(correlation_id);
    header
        .encode(&mut out, R::header_version(version))
        .and_then(|()| response.encode(&mut out, version))
        .map_err(|e| Fatal(format!("cannot encode a v{version} response: {e}")))?;
    Ok(out.to_vec())
}

/// A readable name for an API key, for logs.
pub(crate) use crate::metrics::server::api_name;

/// The connection a request came in on.
pub(crate) struct Ctx<'a> {
    /// Server state and the broker.
    pub shared: &'a Shared,
    /// The client's address.
    pub peer: SocketAddr,
    /// Our address as the client reached it (advertised when nothing else is set).
    pub local: SocketAddr,
    /// The name of the listener the client connected on (`PLAINTEXT`, `INTERNAL`, ...):
    /// brokers are listed at their endpoints of this listener.
    pub listener: &'a str,
    /// The connection's TCP socket, to notice a client that hangs up while its request
    /// waits (never read or written through here).
    pub socket: &'a TcpStream,
    /// The connection's principal (`User:ANONYMOUS` until SASL or a client certificate
    /// says otherwise).
    pub principal: &'a str,
}

/// What a SaslHandshake or SaslAuthenticate did to the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SaslOutcome {
    /// Keep serving.
    Continue,
    /// The client just authenticated.
    Authenticated,
    /// Authentication failed: answer after the failed-login delay, then close.
    Failed,
    /// Answer, then close (an unsupported mechanism, an out-of-order request).
    Close,
}

/// The answer to a SASL request and what it did.
pub(crate) struct SaslAnswer {
    /// What to send.
    pub reply: Reply,
    /// What happens to the connection.
    pub outcome: SaslOutcome,
}

impl Ctx<'_> {
    /// The broker behind the server.
    pub(crate) fn backend(&self) -> &dyn Backend {
        &*self.shared.backend
    }

    /// True if the client has closed its end of the connection (a request waiting on
    /// its behalf can stop; see [`peer_closed`](super::transport::peer_closed)).
    pub(crate) fn client_gone(&self) -> bool {
        super::transport::peer_closed(self.socket)
    }

    /// The server's security settings and stores.
    pub(crate) fn security(&self) -> &Security {
        &self.shared.security
    }

    /// Whether the connection's principal may do `op` on the resource `(kind, name)`
    /// (always, without an authorizer). A refusal is logged, rate-limited per peer.
    pub(crate) fn allowed(&self, op: AclOperation, kind: ResourceType, name: &str) -> bool {
        let ok = self.permits(op, kind, name);
        if !ok {
            peer_warn!(
                self.shared.peer_log,
                self.peer,
                principal = self.principal,
                "authorization failed: {} may not {op} {kind} {name:?}",
                self.principal
            );
        }
        ok
    }

    /// [`Ctx::allowed`] without the log line, for lists filtered down to what a
    /// principal may see (Kafka does not log those either).
    pub(crate) fn permits(&self, op: AclOperation, kind: ResourceType, name: &str) -> bool {
        self.security()
            .authorize(self.principal, self.peer, op, kind, name)
    }

    /// [`Ctx::allowed`] on the cluster resource.
    pub(crate) fn allowed_on_cluster(&self, op: AclOperation) -> bool {
        self.allowed(op, ResourceType::Cluster, CLUSTER_RESOURCE_NAME)
    }

    /// The authorizer for an ACL request that needs `op` on the cluster, or what Kafka
    /// answers for the whole request instead: SECURITY_DISABLED without an authorizer,
    /// CLUSTER_AUTHORIZATION_FAILED without `op`; as an error code and message.
    pub(crate) fn acl_authorizer(
        &self,
        op: AclOperation,
    ) -> Result<&crate::security::acl::Authorizer, (i16, &'static str)> {
        let Some(authorizer) = &self.security().authorizer else {
            return Err((
                kafka_protocol::ResponseError::SecurityDisabled.code(),
                "No Authorizer is configured on the broker",
            ));
        };
        if !self.allowed_on_cluster(op) {
            return Err((
                kafka_protocol::ResponseError::ClusterAuthorizationFailed.code(),
                "Cluster authorization failed",
            ));
        }
        Ok(authorizer)
    }

    /// [`Ctx::allowed`] as a result: `Error::AuthorizationFailed` (Kafka's
    /// TOPIC_/GROUP_/CLUSTER_AUTHORIZATION_FAILED through `error_code`) when refused.
    pub(crate) fn authorize(
        &self,
        op: AclOperation,
        kind: ResourceType,
        name: &str,
    ) -> crate::error::Result<()> {
        if self.allowed(op, kind, name) {
            return Ok(());
        }
        Err(Error::AuthorizationFailed {
            principal: self.principal.to_string(),
            operation: op,
            resource_type: kind,
            name: name.to_string(),
        })
    }

    /// [`Ctx::authorize`] as a handler's refusal: Kafka's code and the message.
    pub(crate) fn check(
        &self,
        op: AclOperation,
        kind: ResourceType,
        name: &str,
    ) -> Result<(), (i16, String)> {
        self.authorize(op, kind, name)
            .map_err(|e| (error_code(&e), e.to_string()))
    }

    /// The topics of `names` the principal may describe (Metadata and OffsetFetch of
    /// every topic list only those; nothing is logged for the others).
    pub(crate) fn describable(&self, names: Vec<String>) -> Vec<String> {
        names
            .into_iter()
            .filter(|n| self.permits(AclOperation::Describe, ResourceType::Topic, n))
            .collect()
    }

    /// Whether the principal may create topic `name`: Create on the cluster or on the
    /// topic (Kafka's rule for CreateTopics and auto-creation).
    pub(crate) fn may_create_topic(&self, name: &str) -> bool {
        self.permits(
            AclOperation::Create,
            ResourceType::Cluster,
            CLUSTER_RESOURCE_NAME,
        ) || self.allowed(AclOperation::Create, ResourceType::Topic, name)
    }

    /// Whether a Fetch may read `topic`: Read on it for a consumer, ClusterAction on the
    /// cluster for a follower (`replica_id >= 0`); refused partitions answer
    /// TOPIC_AUTHORIZATION_FAILED either way, as in Kafka.
    pub(crate) fn authorize_fetch(&self, topic: &str, follower: bool) -> crate::error::Result<()> {
        if !follower {
            return self.authorize(AclOperation::Read, ResourceType::Topic, topic);
        }
        if self.allowed_on_cluster(AclOperation::ClusterAction) {
            return Ok(());
        }
        Err(Error::AuthorizationFailed {
            principal: self.principal.to_string(),
            operation: AclOperation::ClusterAction,
            resource_type: ResourceType::Topic,
            name: topic.to_string(),
        })
    }

    /// The `host:port` clients of this connection's listener should connect to (a
    /// single node): the listener's advertised address, else the address the client
    /// reached.
    pub(crate) fn advertised(&self) -> (String, i32) {
        let port = i32::from(self.local.port());
        match self
            .shared
            .config
            .advertised_listeners
            .iter()
            .find(|(name, _)| name == self.listener)
        {
            Some((_, Some((host, p)))) => (host.clone(), p.map_or(port, i32::from)),
            _ => (self.local.ip().to_string(), port),
        }
    }
}

/// The broker id this server answers as (a single-node cluster).
pub(crate) const NODE_ID: i32 = 0;

/// Kafka's error code for a tidelog error.
pub(crate) fn error_code(e: &Error) -> i16 {
    use kafka_protocol::ResponseError as R;
    let r = match e {
        Error::OffsetOutOfRange { .. } => R::OffsetOutOfRange,
        Error::MessageTooLarge { .. } => R::MessageTooLarge,
        Error::Corrupt { .. } => R::CorruptMessage,
        Error::InvalidBatch(_) => R::CorruptMessage,
        Error::UnknownTopic(_) | Error::UnknownPartition { .. } => R::UnknownTopicOrPartition,
        Error::TopicExists(_) => R::TopicAlreadyExists,
        Error::InvalidTopicName { .. } => R::InvalidTopicException,
        Error::InvalidConfig { .. } => R::InvalidConfig,
        Error::Group { source, .. } => return source.code(),
        Error::Timeout(_) => R::RequestTimedOut,
        Error::Io { .. } | Error::Poisoned { .. } => R::KafkaStorageError,
        Error::Closed(_) => R::NotLeaderOrFollower,
        Error::DuplicateSequence { .. } => R::DuplicateSequenceNumber,
        Error::OutOfOrderSequence { .. } => R::OutOfOrderSequenceNumber,
        Error::InvalidProducerEpoch { .. } => R::InvalidProducerEpoch,
        Error::InvalidReplicationFactor { .. } => R::InvalidReplicationFactor,
        Error::InvalidReplicaAssignment { .. } => R::InvalidReplicaAssignment,
        Error::InvalidPartitions { .. } => R::InvalidPartitions,
        Error::NotLeaderOrFollower { .. } => R::NotLeaderOrFollower,
        Error::FencedLeaderEpoch { .. } => R::FencedLeaderEpoch,
        Error::InvalidUpdateVersion { .. } => R::InvalidUpdateVersion,
        Error::IneligibleReplica { .. } => R::IneligibleReplica,
        Error::StaleBrokerEpoch { .. } => R::StaleBrokerEpoch,
        Error::AuthenticationFailed { .. } => R::SaslAuthenticationFailed,
        Error::AuthorizationFailed { resource_type, .. } => {
            return crate::security::denied_code(*resource_type);
        }
        Error::UnknownLeaderEpoch { .. } => R::UnknownLeaderEpoch,
        Error::NotEnoughReplicas { .. } => R::NotEnoughReplicas,
        Error::NotEnoughReplicasAfterAppend { .. } => R::NotEnoughReplicasAfterAppend,
        _ => R::UnknownServerError,
    };
    r.code()
}

/// A Kafka string from a Rust one.
pub(crate) fn kstr(s: impl Into<String>) -> StrBytes {
    StrBytes::from_string(s.into())
}

/// How long a cluster node that has not caught up with the metadata log yet (just
/// restarted) holds a client request before it closes the connection.
const CATCH_UP_HOLD: std::time::Duration = std::time::Duration::from_secs(10);

/// Route a request whose api key and version are in [`SUPPORTED`] to its handler.
///
/// A cluster node processes no request but ApiVersions until it has published the
/// metadata log up to its own registration (Kafka's brokers wait for their initial
/// catch-up): before that it would answer from what it knew when it stopped (old
/// leaders, old ISRs). Such a request is held, and if the node is still behind after
/// [`CATCH_UP_HOLD`] the connection is closed, which clients treat as retriable.
pub(crate) fn handle(ctx: &Ctx<'_>, mut req: Request) -> Result<Reply, Fatal> {
    let req = &mut req;
    if req.header.request_api_key != ApiKey::ApiVersions as i16
        && let Some(cluster) = ctx.backend().cluster()
        && !cluster.wait_caught_up(CATCH_UP_HOLD, || ctx.client_gone())
    {
        return Err(Fatal(format!(
            "node {} has not caught up with the cluster's metadata within {CATCH_UP_HOLD:?}; \
             not processing {}",
            cluster.node_id(),
            api_name(req.header.request_api_key)
        )));
    }
    match ApiKey::try_from(req.header.request_api_key) {
        Ok(ApiKey::ApiVersions) => api_versions::handle(req),
        Ok(ApiKey::Metadata) => metadata::handle(ctx, req),
        Ok(ApiKey::Produce) => produce::handle(ctx, req),
        Ok(ApiKey::Fetch) => fetch::handle(ctx, req),
        Ok(ApiKey::ListOffsets) => list_offsets::handle(ctx, req),
        Ok(ApiKey::FindCoordinator) => find_coordinator::handle(ctx, req),
        Ok(ApiKey::JoinGroup) => join_group::handle(ctx, req),
        Ok(ApiKey::SyncGroup) => sync_group::handle(ctx, req),
        Ok(ApiKey::Heartbeat) => heartbeat::handle(ctx, req),
        Ok(ApiKey::LeaveGroup) => leave_group::handle(ctx, req),
        Ok(ApiKey::OffsetCommit) => offset_commit::handle(ctx, req),
        Ok(ApiKey::OffsetFetch) => offset_fetch::handle(ctx, req),
        Ok(ApiKey::InitProducerId) => init_producer_id::handle(ctx, req),
        Ok(ApiKey::CreateTopics) => create_topics::handle(ctx, req),
        Ok(ApiKey::DeleteTopics) => delete_topics::handle(ctx, req),
        Ok(ApiKey::DescribeConfigs) => describe_configs::handle(ctx, req),
        Ok(ApiKey::DescribeGroups) => describe_groups::handle(ctx, req),
        Ok(ApiKey::ListGroups) => list_groups::handle(ctx, req),
        Ok(ApiKey::DeleteGroups) => delete_groups::handle(ctx, req),
        Ok(ApiKey::OffsetDelete) => offset_delete::handle(ctx, req),
        Ok(ApiKey::CreatePartitions) => create_partitions::handle(ctx, req),
        Ok(ApiKey::AlterConfigs) => alter_configs::handle(ctx, req),
        Ok(ApiKey::IncrementalAlterConfigs) => incremental_alter_configs::handle(ctx, req),
        Ok(ApiKey::DeleteRecords) => delete_records::handle(ctx, req),
        Ok(ApiKey::DescribeCluster) => describe_cluster::handle(ctx, req),
        Ok(ApiKey::DescribeAcls) => describe_acls::handle(ctx, req),
        Ok(ApiKey::CreateAcls) => create_acls::handle(ctx, req),
        Ok(ApiKey::DeleteAcls) => delete_acls::handle(ctx, req),
        Ok(ApiKey::DescribeUserScramCredentials) => {
            describe_user_scram_credentials::handle(ctx, req)
        }
        Ok(ApiKey::AlterUserScramCredentials) => alter_user_scram_credentials::handle(ctx, req),
        // The connection answers the SASL APIs itself (they change its state).
        Ok(ApiKey::OffsetForLeaderEpoch) => offset_for_leader_epoch::handle(ctx, req),
        Ok(ApiKey::DescribeProducers) => describe_producers::handle(ctx, req),
        _ => Err(Fatal(format!(
            "{} is not supported",
            api_name(req.header.request_api_key)
        ))),
    }
}

pub(crate) use api_versions::unsupported_version_reply;

/// Decode the body of `req` as the request type of its api key, without acting on it.
/// Used by the request-decoder fuzz target.
#[cfg(any(test, feature = "testing"))]
pub(crate) fn decode_only(mut req: Request) -> Result<(), Fatal> {
    use kafka_protocol::messages::*;
    match ApiKey::try_from(req.header.request_api_key) {
        Ok(ApiKey::Produce) => req.decode::<ProduceRequest>().map(drop),
        Ok(ApiKey::Fetch) => req.decode::<FetchRequest>().map(drop),
        Ok(ApiKey::ListOffsets) => req.decode::<ListOffsetsRequest>().map(drop),
        Ok(ApiKey::Metadata) => req.decode::<MetadataRequest>().map(drop),
        Ok(ApiKey::OffsetCommit) => req.decode::<OffsetCommitRequest>().map(drop),
        Ok(ApiKey::OffsetFetch) => req.decode::<OffsetFetchRequest>().map(drop),
        Ok(ApiKey::FindCoordinator) => req.decode::<FindCoordinatorRequest>().map(drop),
        Ok(ApiKey::JoinGroup) => req.decode::<JoinGroupRequest>().map(drop),
        Ok(ApiKey::Heartbeat) => req.decode::<HeartbeatRequest>().map(drop),
        Ok(ApiKey::LeaveGroup) => req.decode::<LeaveGroupRequest>().map(drop),
        Ok(ApiKey::SyncGroup) => req.decode::<SyncGroupRequest>().map(drop),
        Ok(ApiKey::ApiVersions) => req.decode::<ApiVersionsRequest>().map(drop),
        Ok(ApiKey::CreateTopics) => req.decode::<CreateTopicsRequest>().map(drop),
        Ok(ApiKey::DeleteTopics) => req.decode::<DeleteTopicsRequest>().map(drop),
        Ok(ApiKey::InitProducerId) => req.decode::<InitProducerIdRequest>().map(drop),
        Ok(ApiKey::DescribeConfigs) => req.decode::<DescribeConfigsRequest>().map(drop),
        Ok(ApiKey::DescribeGroups) => req.decode::<DescribeGroupsRequest>().map(drop),
        Ok(ApiKey::ListGroups) => req.decode::<ListGroupsRequest>().map(drop),
        Ok(ApiKey::DeleteGroups) => req.decode::<DeleteGroupsRequest>().map(drop),
        Ok(ApiKey::OffsetDelete) => req.decode::<OffsetDeleteRequest>().map(drop),
        Ok(ApiKey::CreatePartitions) => req.decode::<CreatePartitionsRequest>().map(drop),
        Ok(ApiKey::AlterConfigs) => req.decode::<AlterConfigsRequest>().map(drop),
        Ok(ApiKey::IncrementalAlterConfigs) => {
            req.decode::<IncrementalAlterConfigsRequest>().map(drop)
        }
        Ok(ApiKey::DeleteRecords) => req.decode::<DeleteRecordsRequest>().map(drop),
        Ok(ApiKey::DescribeCluster) => req.decode::<DescribeClusterRequest>().map(drop),
        Ok(ApiKey::SaslHandshake) => req.decode::<SaslHandshakeRequest>().map(drop),
        Ok(ApiKey::SaslAuthenticate) => req.decode::<SaslAuthenticateRequest>().map(drop),
        Ok(ApiKey::DescribeAcls) => req.decode::<DescribeAclsRequest>().map(drop),
        Ok(ApiKey::CreateAcls) => req.decode::<CreateAclsRequest>().map(drop),
        Ok(ApiKey::DeleteAcls) => req.decode::<DeleteAclsRequest>().map(drop),
        Ok(ApiKey::DescribeUserScramCredentials) => req
            .decode::<DescribeUserScramCredentialsRequest>()
            .map(drop),
        Ok(ApiKey::AlterUserScramCredentials) => {
            req.decode::<AlterUserScramCredentialsRequest>().map(drop)
        }
        Ok(ApiKey::OffsetForLeaderEpoch) => req.decode::<OffsetForLeaderEpochRequest>().map(drop),
        Ok(ApiKey::DescribeProducers) => req.decode::<DescribeProducersRequest>().map(drop),
        _ => Err(Fatal(format!(
            "{} is not supported",
            api_name(req.header.request_api_key)
        ))),
    }
}
