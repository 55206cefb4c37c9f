//! One file per Kafka API; this module holds the table of the APIs the server serves (the
//! `apis!` invocation: key, versions, request and response types, handler, how errors are
//! counted), from which ApiVersions' list, the routing of a decoded request to its
//! handler, the fuzz target's decoding and the error counting of responses all come.
//!
//! Handlers decode their request body with [`codec::decode`](super::codec::decode) and
//! return a [`Reply`]: the response bytes (header included, size prefix excluded), or
//! nothing for an `acks = 0` produce.

mod add_offsets_to_txn;
mod add_partitions_to_txn;
mod add_raft_voter;
mod alter_client_quotas;
mod alter_configs;
mod alter_partition_reassignments;
mod alter_replica_log_dirs;
mod alter_share_group_offsets;
mod alter_user_scram_credentials;
mod api_versions;
mod broker_configs;
mod consumer_group_describe;
mod consumer_group_heartbeat;
mod create_acls;
mod create_partitions;
mod create_topics;
mod delete_acls;
mod delete_groups;
mod delete_records;
mod delete_share_group_offsets;
mod delete_topics;
mod describe_acls;
mod describe_client_quotas;
mod describe_cluster;
mod describe_configs;
mod describe_groups;
mod describe_log_dirs;
mod describe_producers;
mod describe_quorum;
mod describe_share_group_offsets;
mod describe_topic_partitions;
mod describe_transactions;
mod describe_user_scram_credentials;
mod elect_leaders;
mod end_txn;
mod fetch;
mod find_coordinator;
mod heartbeat;
mod incremental_alter_configs;
mod init_producer_id;
mod join_group;
mod leave_group;
pub(crate) mod legacy;
mod list_groups;
mod list_offsets;
mod list_partition_reassignments;
mod list_transactions;
mod metadata;
mod offset_commit;
mod offset_delete;
mod offset_fetch;
mod offset_for_leader_epoch;
mod produce;
mod read_replica;
mod remove_raft_voter;
mod replica_fetch;
pub(crate) mod sasl_authenticate;
pub(crate) mod sasl_handshake;
mod share_acknowledge;
mod share_fetch;
mod share_group_describe;
mod share_group_heartbeat;
mod share_group_offsets;
mod static_broker_configs;
mod sync_group;
mod txn_offset_commit;
mod unregister_broker;
mod update_features;
mod write_txn_markers;

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

/// Who answers an API of the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AnsweredBy {
    /// An API handler, through [`handle`].
    Handler,
    /// The connection itself (SASL: the answer changes the connection's state).
    Connection,
}

/// One line of the table of APIs.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Api {
    /// The api key.
    pub key: ApiKey,
    /// The lowest version answered.
    pub min: i16,
    /// The highest version answered.
    pub max: i16,
    /// Who answers it (read by the tests that check the table against the dispatch).
    #[cfg_attr(not(test), allow(dead_code))]
    pub answered_by: AnsweredBy,
}

/// The error codes of a response, for the server's error counters (see
/// [`crate::metrics::server::count_error`]); implemented for every response type of the
/// table by `apis!`.
pub(crate) trait ErrorCodes {
    /// Calls `f` with every error code of the response (zeros included).
    fn error_codes(&self, f: &mut dyn FnMut(i16));
}

/// Generates, from the table of APIs below: [`APIS`] (what ApiVersions lists), the
/// dispatch to the handlers, [`decode_only`] and the [`ErrorCodes`] of each response.
macro_rules! apis {
    (@answered_by handler) => { AnsweredBy::Handler };
    (@answered_by connection) => { AnsweredBy::Connection };
    (@dispatch handler $module:ident $ctx:ident $req:ident) => { $module::handle($ctx, $req) };
    (@dispatch connection $module:ident $ctx:ident $req:ident) => { Err(not_supported($req)) };
    (@errors none) => { |_, _| {} };
    (@errors framed) => { |_, _| {} };
    (@errors $count:expr) => { $count };
    ($(
        $key:ident $lo:literal..=$hi:literal, $request:ident => $response:ident,
        $answered_by:ident($module:ident), errors [$($errors:tt)*];
    )*) => {
        /// Every API the server answers, in the order an ApiVersions response lists them.
        pub(crate) const APIS: &[Api] = &[$(
            Api {
                key: ApiKey::$key,
                min: $lo,
                max: $hi,
                answered_by: apis!(@answered_by $answered_by),
            },
        )*];

        /// Route a request of an API answered by a handler to it.
        fn dispatch(ctx: &Ctx<'_>, req: &mut Request) -> Result<Reply, Fatal> {
            match ApiKey::try_from(req.header.request_api_key) {
                $(Ok(ApiKey::$key) => apis!(@dispatch $answered_by $module ctx req),)*
                _ => Err(not_supported(req)),
            }
        }

        /// Decode the body of `req` as the request type of its api key, without acting on
        /// it. Used by the request-decoder fuzz target.
        #[cfg(any(test, feature = "testing"))]
        pub(crate) fn decode_only(mut req: Request) -> Result<(), Fatal> {
            if req.header.request_api_key == ApiKey::OffsetCommit as i16 && req.version() < 2 {
                // OffsetCommit v0-1 have their own reader (see `legacy`).
                return legacy::offset_commit_request(&req.body, req.version())
                    .map(drop)
                    .map_err(Fatal);
            }
            if req.header.request_api_key == ApiKey::WriteTxnMarkers as i16 {
                // Version 2 is newer than the protocol crate's: its own reader.
                return req
                    .decode::<crate::cluster::txn_markers_wire::MarkersRequest>()
                    .map(drop);
            }
            match ApiKey::try_from(req.header.request_api_key) {
                $(Ok(ApiKey::$key) => req.decode::<kafka_protocol::messages::$request>().map(drop),)*
                _ => Err(not_supported(&req)),
            }
        }

        $(
            impl ErrorCodes for kafka_protocol::messages::$response {
                fn error_codes(&self, f: &mut dyn FnMut(i16)) {
                    let count: fn(&Self, &mut dyn FnMut(i16)) = apis!(@errors $($errors)*);
                    count(self, f)
                }
            }
        )*

        /// Tests: the body of a default request of `key` at `version`, and whether a
        /// response body decodes as `key`'s response at `version` with nothing left over.
        #[cfg(test)]
        pub(crate) mod table_codec {
            use super::*;
            use kafka_protocol::protocol::Decodable;

            pub(crate) fn default_request(key: ApiKey, version: i16) -> Vec<u8> {
                let modern = legacy::modern_version(key, version).unwrap_or(version);
                let mut out = bytes::BytesMut::new();
                if key == ApiKey::WriteTxnMarkers {
                    // Version 2 is newer than the protocol crate's.
                    crate::cluster::txn_markers_wire::MarkersRequest::default()
                        .encode(&mut out, version)
                        .unwrap();
                    return out.to_vec();
                }
                match key {
                    $(ApiKey::$key => kafka_protocol::messages::$request::default()
                        .encode(&mut out, modern)
                        .unwrap(),)*
                    other => panic!("{other:?} is not in the table"),
                }
                legacy::old_request(key, version, &out)
            }

            pub(crate) fn decodes(key: ApiKey, version: i16, body: Bytes) -> Result<(), String> {
                let modern = legacy::modern_version(key, version);
                let (version, mut body) = match modern {
                    Some(m) => (m, Bytes::from(legacy::upgrade(key, version, &body)?)),
                    None => (version, body),
                };
                let decoded = match key {
                    _ if key == ApiKey::WriteTxnMarkers => {
                        crate::cluster::txn_markers_wire::MarkersResponse::decode(&mut body, version)
                            .map(drop)
                    }
                    $(ApiKey::$key => kafka_protocol::messages::$response::decode(&mut body, version).map(drop),)*
                    other => panic!("{other:?} is not in the table"),
                };
                decoded.map_err(|e| e.to_string())?;
                if body.is_empty() { Ok(()) } else { Err(format!("{} bytes left over", body.len())) }
            }
        }
    };
}

/// Per-partition answers `(topic, partition, error code)` grouped by topic, in topic
/// name order: `partition(index, code)` builds a partition's answer, `topic(name,
/// partitions)` a topic's (TxnOffsetCommit).
pub(super) fn by_topic<P, T>(
    results: impl IntoIterator<Item = (String, i32, i16)>,
    partition: impl Fn(i32, i16) -> P,
    topic: impl Fn(kafka_protocol::messages::TopicName, Vec<P>) -> T,
) -> Vec<T> {
    let mut grouped: std::collections::BTreeMap<String, Vec<P>> = Default::default();
    for (name, index, code) in results {
        grouped
            .entry(name)
            .or_default()
            .push(partition(index, code));
    }
    grouped
        .into_iter()
        .map(|(name, partitions)| {
            topic(kafka_protocol::messages::TopicName(kstr(name)), partitions)
        })
        .collect()
}

// The Kafka APIs the server serves, one line each, in the order ApiVersions lists them:
//
//     Key lo..=hi, Request => Response, answered_by(module), errors [how];
//
// `handler(m)`: [`handle`] routes the request to `m::handle(ctx, req)`; `connection(m)`:
// the connection answers it itself with `m` (the SASL APIs, which change its state).
// `errors [|r, f| ...]` calls `f` with every error code of a response `r`, one per
// topic, partition, group or resource that failed, as Kafka's `errorCounts` does (for the
// server's metrics, see [`ErrorCodes`]); `errors [framed]`: counted where the response is
// framed by hand (Fetch); `errors [none]`: not counted.
//
// Adding an API: its handler file (and `mod` line above), and one line here.
apis! {
    Produce 0..=12, ProduceRequest => ProduceResponse, handler(produce),
        errors [|r, f| r.responses.iter().flat_map(|t| &t.partition_responses).for_each(|p| f(p.error_code))];
    Fetch 0..=16, FetchRequest => FetchResponse, handler(fetch), errors [framed];
    ListOffsets 0..=9, ListOffsetsRequest => ListOffsetsResponse, handler(list_offsets),
        errors [|r, f| r.topics.iter().flat_map(|t| &t.partitions).for_each(|p| f(p.error_code))];
    Metadata 0..=12, MetadataRequest => MetadataResponse, handler(metadata),
        errors [|r, f| {
            f(r.error_code);
            for t in &r.topics {
                f(t.error_code);
                t.partitions.iter().for_each(|p| f(p.error_code));
            }
        }];
    OffsetCommit 0..=9, OffsetCommitRequest => OffsetCommitResponse, handler(offset_commit),
        errors [|r, f| r.topics.iter().flat_map(|t| &t.partitions).for_each(|p| f(p.error_code))];
    OffsetFetch 0..=9, OffsetFetchRequest => OffsetFetchResponse, handler(offset_fetch),
        errors [|r, f| {
            f(r.error_code);
            r.topics.iter().flat_map(|t| &t.partitions).for_each(|p| f(p.error_code));
            for g in &r.groups {
                f(g.error_code);
                g.topics.iter().flat_map(|t| &t.partitions).for_each(|p| f(p.error_code));
            }
        }];
    FindCoordinator 0..=6, FindCoordinatorRequest => FindCoordinatorResponse, handler(find_coordinator),
        errors [|r, f| {
            f(r.error_code);
            r.coordinators.iter().for_each(|c| f(c.error_code));
        }];
    JoinGroup 0..=9, JoinGroupRequest => JoinGroupResponse, handler(join_group),
        errors [|r, f| f(r.error_code)];
    Heartbeat 0..=4, HeartbeatRequest => HeartbeatResponse, handler(heartbeat),
        errors [|r, f| f(r.error_code)];
    LeaveGroup 0..=5, LeaveGroupRequest => LeaveGroupResponse, handler(leave_group),
        errors [|r, f| {
            f(r.error_code);
            r.members.iter().for_each(|m| f(m.error_code));
        }];
    SyncGroup 0..=5, SyncGroupRequest => SyncGroupResponse, handler(sync_group),
        errors [|r, f| f(r.error_code)];
    ApiVersions 0..=3, ApiVersionsRequest => ApiVersionsResponse, handler(api_versions),
        errors [|r, f| f(r.error_code)];
    CreateTopics 0..=6, CreateTopicsRequest => CreateTopicsResponse, handler(create_topics),
        errors [|r, f| r.topics.iter().for_each(|t| f(t.error_code))];
    DeleteTopics 0..=5, DeleteTopicsRequest => DeleteTopicsResponse, handler(delete_topics),
        errors [|r, f| r.responses.iter().for_each(|t| f(t.error_code))];
    InitProducerId 0..=5, InitProducerIdRequest => InitProducerIdResponse, handler(init_producer_id),
        errors [|r, f| f(r.error_code)];
    AddPartitionsToTxn 0..=5, AddPartitionsToTxnRequest => AddPartitionsToTxnResponse,
        handler(add_partitions_to_txn),
        errors [|r, f| {
            f(r.error_code);
            r.results_by_topic_v3_and_below
                .iter()
                .chain(r.results_by_transaction.iter().flat_map(|t| &t.topic_results))
                .flat_map(|t| &t.results_by_partition)
                .for_each(|p| f(p.partition_error_code));
        }];
    AddOffsetsToTxn 0..=4, AddOffsetsToTxnRequest => AddOffsetsToTxnResponse, handler(add_offsets_to_txn),
        errors [|r, f| f(r.error_code)];
    EndTxn 0..=5, EndTxnRequest => EndTxnResponse, handler(end_txn), errors [|r, f| f(r.error_code)];
    WriteTxnMarkers 1..=2, WriteTxnMarkersRequest => WriteTxnMarkersResponse, handler(write_txn_markers),
        errors [|r, f| r.markers.iter().flat_map(|m| &m.topics).flat_map(|t| &t.partitions).for_each(|p| f(p.error_code))];
    TxnOffsetCommit 0..=5, TxnOffsetCommitRequest => TxnOffsetCommitResponse, handler(txn_offset_commit),
        errors [|r, f| r.topics.iter().flat_map(|t| &t.partitions).for_each(|p| f(p.error_code))];
    DescribeConfigs 0..=4, DescribeConfigsRequest => DescribeConfigsResponse, handler(describe_configs),
        errors [|r, f| r.results.iter().for_each(|x| f(x.error_code))];
    DescribeGroups 0..=6, DescribeGroupsRequest => DescribeGroupsResponse, handler(describe_groups),
        errors [|r, f| r.groups.iter().for_each(|g| f(g.error_code))];
    ListGroups 0..=5, ListGroupsRequest => ListGroupsResponse, handler(list_groups),
        errors [|r, f| f(r.error_code)];
    DeleteGroups 0..=2, DeleteGroupsRequest => DeleteGroupsResponse, handler(delete_groups),
        errors [|r, f| r.results.iter().for_each(|g| f(g.error_code))];
    OffsetDelete 0..=0, OffsetDeleteRequest => OffsetDeleteResponse, handler(offset_delete),
        errors [|r, f| {
            f(r.error_code);
            r.topics.iter().flat_map(|t| &t.partitions).for_each(|p| f(p.error_code));
        }];
    CreatePartitions 0..=3, CreatePartitionsRequest => CreatePartitionsResponse, handler(create_partitions),
        errors [|r, f| r.results.iter().for_each(|t| f(t.error_code))];
    AlterConfigs 0..=2, AlterConfigsRequest => AlterConfigsResponse, handler(alter_configs),
        errors [|r, f| r.responses.iter().for_each(|x| f(x.error_code))];
    IncrementalAlterConfigs 0..=1, IncrementalAlterConfigsRequest => IncrementalAlterConfigsResponse,
        handler(incremental_alter_configs),
        errors [|r, f| r.responses.iter().for_each(|x| f(x.error_code))];
    DeleteRecords 0..=2, DeleteRecordsRequest => DeleteRecordsResponse, handler(delete_records),
        errors [|r, f| r.topics.iter().flat_map(|t| &t.partitions).for_each(|p| f(p.error_code))];
    DescribeCluster 0..=2, DescribeClusterRequest => DescribeClusterResponse, handler(describe_cluster),
        errors [|r, f| f(r.error_code)];
    ElectLeaders 0..=2, ElectLeadersRequest => ElectLeadersResponse, handler(elect_leaders),
        errors [|r, f| {
            f(r.error_code);
            r.replica_election_results.iter().flat_map(|t| &t.partition_result).for_each(|p| f(p.error_code));
        }];
    AlterReplicaLogDirs 1..=2, AlterReplicaLogDirsRequest => AlterReplicaLogDirsResponse, handler(alter_replica_log_dirs),
        errors [|r, f| r.results.iter().flat_map(|t| &t.partitions).for_each(|p| f(p.error_code))];
    DescribeLogDirs 1..=4, DescribeLogDirsRequest => DescribeLogDirsResponse, handler(describe_log_dirs),
        errors [|r, f| {
            f(r.error_code);
            r.results.iter().for_each(|d| f(d.error_code));
        }];
    AlterPartitionReassignments 0..=1, AlterPartitionReassignmentsRequest => AlterPartitionReassignmentsResponse,
        handler(alter_partition_reassignments),
        errors [|r, f| {
            f(r.error_code);
            r.responses.iter().flat_map(|t| &t.partitions).for_each(|p| f(p.error_code));
        }];
    ListPartitionReassignments 0..=0, ListPartitionReassignmentsRequest => ListPartitionReassignmentsResponse,
        handler(list_partition_reassignments), errors [|r, f| f(r.error_code)];
    SaslHandshake 0..=1, SaslHandshakeRequest => SaslHandshakeResponse, connection(sasl_handshake),
        errors [none];
    SaslAuthenticate 0..=2, SaslAuthenticateRequest => SaslAuthenticateResponse, connection(sasl_authenticate),
        errors [none];
    DescribeAcls 1..=3, DescribeAclsRequest => DescribeAclsResponse, handler(describe_acls), errors [none];
    CreateAcls 1..=3, CreateAclsRequest => CreateAclsResponse, handler(create_acls), errors [none];
    DeleteAcls 1..=3, DeleteAclsRequest => DeleteAclsResponse, handler(delete_acls), errors [none];
    DescribeUserScramCredentials 0..=0, DescribeUserScramCredentialsRequest => DescribeUserScramCredentialsResponse,
        handler(describe_user_scram_credentials), errors [none];
    AlterUserScramCredentials 0..=0, AlterUserScramCredentialsRequest => AlterUserScramCredentialsResponse,
        handler(alter_user_scram_credentials), errors [none];
    DescribeClientQuotas 0..=1, DescribeClientQuotasRequest => DescribeClientQuotasResponse,
        handler(describe_client_quotas), errors [|r, f| f(r.error_code)];
    AlterClientQuotas 0..=1, AlterClientQuotasRequest => AlterClientQuotasResponse,
        handler(alter_client_quotas), errors [|r, f| r.entries.iter().for_each(|e| f(e.error_code))];
    OffsetForLeaderEpoch 2..=4, OffsetForLeaderEpochRequest => OffsetForLeaderEpochResponse,
        handler(offset_for_leader_epoch),
        errors [|r, f| r.topics.iter().flat_map(|t| &t.partitions).for_each(|p| f(p.error_code))];
    DescribeProducers 0..=0, DescribeProducersRequest => DescribeProducersResponse, handler(describe_producers),
        errors [|r, f| r.topics.iter().flat_map(|t| &t.partitions).for_each(|p| f(p.error_code))];
    DescribeTransactions 0..=0, DescribeTransactionsRequest => DescribeTransactionsResponse,
        handler(describe_transactions),
        errors [|r, f| r.transaction_states.iter().for_each(|t| f(t.error_code))];
    ListTransactions 0..=1, ListTransactionsRequest => ListTransactionsResponse, handler(list_transactions),
        errors [|r, f| f(r.error_code)];
    ConsumerGroupHeartbeat 0..=1, ConsumerGroupHeartbeatRequest => ConsumerGroupHeartbeatResponse,
        handler(consumer_group_heartbeat), errors [|r, f| f(r.error_code)];
    ConsumerGroupDescribe 0..=1, ConsumerGroupDescribeRequest => ConsumerGroupDescribeResponse,
        handler(consumer_group_describe), errors [|r, f| r.groups.iter().for_each(|g| f(g.error_code))];
    ShareGroupHeartbeat 1..=1, ShareGroupHeartbeatRequest => ShareGroupHeartbeatResponse,
        handler(share_group_heartbeat), errors [|r, f| f(r.error_code)];
    ShareGroupDescribe 1..=1, ShareGroupDescribeRequest => ShareGroupDescribeResponse,
        handler(share_group_describe), errors [|r, f| r.groups.iter().for_each(|g| f(g.error_code))];
    ShareFetch 1..=1, ShareFetchRequest => ShareFetchResponse, handler(share_fetch),
        errors [|r, f| {
            f(r.error_code);
            r.responses.iter().flat_map(|t| &t.partitions).for_each(|p| {
                f(p.error_code);
                f(p.acknowledge_error_code);
            });
        }];
    ShareAcknowledge 1..=1, ShareAcknowledgeRequest => ShareAcknowledgeResponse, handler(share_acknowledge),
        errors [|r, f| {
            f(r.error_code);
            r.responses.iter().flat_map(|t| &t.partitions).for_each(|p| f(p.error_code));
        }];
    DescribeShareGroupOffsets 0..=0, DescribeShareGroupOffsetsRequest => DescribeShareGroupOffsetsResponse,
        handler(describe_share_group_offsets),
        errors [|r, f| for g in &r.groups {
            f(g.error_code);
            g.topics.iter().flat_map(|t| &t.partitions).for_each(|p| f(p.error_code));
        }];
    AlterShareGroupOffsets 0..=0, AlterShareGroupOffsetsRequest => AlterShareGroupOffsetsResponse,
        handler(alter_share_group_offsets),
        errors [|r, f| {
            f(r.error_code);
            r.responses.iter().flat_map(|t| &t.partitions).for_each(|p| f(p.error_code));
        }];
    DeleteShareGroupOffsets 0..=0, DeleteShareGroupOffsetsRequest => DeleteShareGroupOffsetsResponse,
        handler(delete_share_group_offsets),
        errors [|r, f| {
            f(r.error_code);
            r.responses.iter().for_each(|t| f(t.error_code));
        }];
    DescribeQuorum 0..=2, DescribeQuorumRequest => DescribeQuorumResponse, handler(describe_quorum),
        errors [|r, f| {
            f(r.error_code);
            r.topics.iter().flat_map(|t| &t.partitions).for_each(|p| f(p.error_code));
        }];
    AddRaftVoter 0..=0, AddRaftVoterRequest => AddRaftVoterResponse, handler(add_raft_voter),
        errors [|r, f| f(r.error_code)];
    RemoveRaftVoter 0..=0, RemoveRaftVoterRequest => RemoveRaftVoterResponse, handler(remove_raft_voter),
        errors [|r, f| f(r.error_code)];
    UnregisterBroker 0..=0, UnregisterBrokerRequest => UnregisterBrokerResponse, handler(unregister_broker),
        errors [|r, f| f(r.error_code)];
    UpdateFeatures 0..=2, UpdateFeaturesRequest => UpdateFeaturesResponse, handler(update_features),
        errors [|r, f| f(r.error_code)];
    DescribeTopicPartitions 0..=0, DescribeTopicPartitionsRequest => DescribeTopicPartitionsResponse,
        handler(describe_topic_partitions),
        errors [|r, f| r.topics.iter().for_each(|t| f(t.error_code))];
}

/// The version range the server answers for `api_key`, if it answers it at all.
pub(crate) fn supported_range(api_key: i16) -> Option<(i16, i16)> {
    APIS.iter()
        .find(|api| api.key as i16 == api_key)
        .map(|api| (api.min, api.max))
}

/// The refusal of a request of an API the server does not answer.
fn not_supported(req: &Request) -> Fatal {
    Fatal(format!(
        "{} is not supported",
        api_name(req.header.request_api_key)
    ))
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

/// What a request a connection may have several of under way gets
/// ([`handle_pipelined`]).
pub(crate) enum Answer {
    /// The reply, ready.
    Now(Reply),
    /// What finishes the request (waits for the in-sync replicas) and gives the reply;
    /// it must run, in the order the requests came, even if the reply is not written.
    Later(Later),
}

/// The rest of a request under way: see [`Answer::Later`].
pub(crate) type Later = Box<dyn FnOnce() -> Result<Reply, Fatal> + Send>;

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

    /// The API of the request, if the protocol crate knows its key.
    fn api_key(&self) -> Option<ApiKey> {
        ApiKey::try_from(self.header.request_api_key).ok()
    }

    /// The protocol crate's version a request of an old version (see [`legacy`]) is
    /// decoded and answered as; its own version otherwise.
    fn modern_version(&self) -> i16 {
        self.api_key()
            .and_then(|key| legacy::modern_version(key, self.version()))
            .unwrap_or(self.version())
    }

    /// Decode the body as a `T` (an old version as the newer one it maps to).
    pub(crate) fn decode<T: kafka_protocol::protocol::Decodable>(&mut self) -> Result<T, Fatal> {
        let version = self.modern_version();
        if version != self.version()
            && let Some(key) = self.api_key()
        {
            self.body = legacy::decode_as(key, self.version(), &self.body);
        }
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
    pub(crate) fn respond<R: Encodable + HeaderVersion + ErrorCodes>(
        &self,
        response: &R,
    ) -> Result<Reply, Fatal> {
        count_errors(response);
        let modern = self.modern_version();
        let Some(key) = self.api_key().filter(|_| modern != self.version()) else {
            return encode_response(self.header.correlation_id, modern, response).map(Reply::bytes);
        };
        // An old version: the newer layout rewritten (both have response header v0).
        let mut body = bytes::BytesMut::new();
        response
            .encode(&mut body, modern)
            .map_err(|e| Fatal(format!("cannot encode a v{modern} response: {e}")))?;
        let old = legacy::downgrade(key, self.version(), &body).map_err(|e| {
            Fatal(format!(
                "cannot write a {} v{} response: {e}",
                api_name(key as i16),
                self.version()
            ))
        })?;
        let mut out = self.header.correlation_id.to_be_bytes().to_vec();
        out.extend_from_slice(&old);
        Ok(Reply::bytes(out))
    }
}

/// Counts the error codes of `response` for the server of the connection this thread
/// serves (nothing outside a connection).
pub(crate) fn count_errors<R: ErrorCodes>(response: &R) {
    if crate::metrics::server::counting_errors() {
        response.error_codes(&mut crate::metrics::server::count_error);
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
        Error::Transaction { source, .. } => return source.code(),
        Error::Share { source, .. } => return source.code(),
        Error::Timeout(_) => R::RequestTimedOut,
        Error::Io { .. } | Error::Poisoned { .. } => R::KafkaStorageError,
        Error::Closed(_) => R::NotLeaderOrFollower,
        Error::DuplicateSequence { .. } => R::DuplicateSequenceNumber,
        Error::OutOfOrderSequence { .. } => R::OutOfOrderSequenceNumber,
        Error::InvalidProducerEpoch { .. } => R::InvalidProducerEpoch,
        Error::TransactionCoordinatorFenced { .. } => R::TransactionCoordinatorFenced,
        Error::InvalidReplicationFactor { .. } => R::InvalidReplicationFactor,
        Error::InvalidReplicaAssignment { .. } => R::InvalidReplicaAssignment,
        Error::InvalidPartitions { .. } => R::InvalidPartitions,
        Error::NotLeaderOrFollower { .. } => R::NotLeaderOrFollower,
        Error::FencedLeaderEpoch { .. } => R::FencedLeaderEpoch,
        Error::FencedStateEpoch { .. } => R::FencedStateEpoch,
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
        Error::FetchSessionIdNotFound { .. } => R::FetchSessionIdNotFound,
        Error::InvalidFetchSessionEpoch { .. } => R::InvalidFetchSessionEpoch,
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

/// Route a request whose api key and version are in [`APIS`] to its handler.
///
/// A cluster node processes no request but ApiVersions until it has published the
/// metadata log up to its own registration (Kafka's brokers wait for their initial
/// catch-up): before that it would answer from what it knew when it stopped (old
/// leaders, old ISRs). Such a request is held, and if the node is still behind after
/// [`CATCH_UP_HOLD`] the connection is closed, which clients treat as retriable.
pub(crate) fn handle(ctx: &Ctx<'_>, mut req: Request) -> Result<Reply, Fatal> {
    let req = &mut req;
    if req.header.request_api_key != ApiKey::ApiVersions as i16 {
        caught_up(ctx, req)?;
    }
    let started = std::time::Instant::now();
    super::throttle::before(ctx, req);
    let reply = dispatch(ctx, req);
    if let Ok(r) = &reply {
        super::throttle::after(ctx, req, r, started);
    }
    reply
}

/// On a cluster node, waits (up to [`CATCH_UP_HOLD`]) until the node has caught up
/// with the cluster's metadata; a node that does not is not to process `req`.
fn caught_up(ctx: &Ctx<'_>, req: &Request) -> Result<(), Fatal> {
    if let Some(cluster) = ctx.backend().cluster()
        && !cluster.wait_caught_up(CATCH_UP_HOLD, &|| ctx.client_gone())
    {
        return Err(Fatal(format!(
            "node {} has not caught up with the cluster's metadata within {CATCH_UP_HOLD:?}; \
             not processing {}",
            cluster.node_id(),
            api_name(req.header.request_api_key)
        )));
    }
    Ok(())
}

/// True for the requests [`handle_pipelined`] takes: OffsetCommit and Produce, whose
/// waits for the in-sync replicas may overlap the connection's next such requests.
pub(crate) fn pipelined(req: &Request) -> bool {
    pipelined_key(req.header.request_api_key)
}

/// [`pipelined`] by api key (read from a frame before it is decoded).
pub(crate) fn pipelined_key(api_key: i16) -> bool {
    api_key == ApiKey::OffsetCommit as i16 || api_key == ApiKey::Produce as i16
}

/// [`handle`] for a request of [`pipelined`]: the same checks, then the request
/// handled up to what it waits for (see [`Answer`]).
pub(crate) fn handle_pipelined(ctx: &Ctx<'_>, mut req: Request) -> Result<Answer, Fatal> {
    let req = &mut req;
    caught_up(ctx, req)?;
    let started = std::time::Instant::now();
    super::throttle::before(ctx, req);
    let answer = match ApiKey::try_from(req.header.request_api_key) {
        Ok(ApiKey::OffsetCommit) => offset_commit::start(ctx, req),
        Ok(ApiKey::Produce) => produce::start(ctx, req),
        _ => dispatch(ctx, req).map(Answer::Now),
    };
    match &answer {
        Ok(Answer::Now(r)) => super::throttle::after(ctx, req, r, started),
        // Neither a fetch nor a held reply: only the request's time is recorded.
        Ok(Answer::Later(_)) => super::throttle::after(ctx, req, &Reply::Nothing, started),
        Err(_) => {}
    }
    answer
}

pub(crate) use api_versions::unsupported_version_reply;
pub(crate) use describe_topic_partitions::DEFAULT_MAX_REQUEST_PARTITION_SIZE_LIMIT;
