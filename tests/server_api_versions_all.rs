//! Every API version the server advertises in ApiVersions is answered: for each API key
//! and each version from its minimum to its maximum, a request of that version (encoded
//! by `kafka-protocol`'s client side, on a new connection) gets a response that decodes
//! at that version with its correlation id and no byte left over. The data-path APIs
//! carry a real topic, so their per-partition fields are exercised at every version and
//! their error codes checked.
#![cfg(feature = "server")]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use tidelog::{BatchBuilder, Broker, Server, TopicConfig};

const TOPIC: &str = "versions";
const GROUP: &str = "versions-group";

fn topic() -> TopicName {
    TopicName(StrBytes::from_static_str(TOPIC))
}

/// The test topic's id, from Metadata v12.
fn topic_id(addr: SocketAddr, corr: &mut i32) -> uuid::Uuid {
    *corr += 1;
    let req = MetadataRequest::default().with_topics(Some(vec![
        metadata_request::MetadataRequestTopic::default().with_name(Some(topic())),
    ]));
    let mut body = exchange(addr, ApiKey::Metadata, 12, *corr, &req);
    MetadataResponse::decode(&mut body, 12).unwrap().topics[0].topic_id
}

/// Sends `req` as `key` v`version` with correlation id `corr` on a new connection and
/// returns the response's body (after its header, whose correlation id is checked).
fn exchange<Q: Encodable>(
    addr: SocketAddr,
    key: ApiKey,
    version: i16,
    corr: i32,
    req: &Q,
) -> Bytes {
    let mut body = BytesMut::new();
    req.encode(&mut body, version)
        .unwrap_or_else(|e| panic!("encoding {key:?} v{version}: {e}"));
    exchange_raw(addr, key, version, corr, &body)
}

/// [`exchange`] of a request body encoded by the caller.
fn exchange_raw(addr: SocketAddr, key: ApiKey, version: i16, corr: i32, body: &[u8]) -> Bytes {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut buf = BytesMut::new();
    RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(corr)
        .with_client_id(Some(StrBytes::from_static_str("versions-test")))
        .encode(&mut buf, key.request_header_version(version))
        .unwrap();
    buf.extend_from_slice(body);
    let mut framed = (buf.len() as i32).to_be_bytes().to_vec();
    framed.extend_from_slice(&buf);
    s.write_all(&framed).unwrap();
    let mut size = [0u8; 4];
    s.read_exact(&mut size)
        .unwrap_or_else(|e| panic!("no response to {key:?} v{version}: {e}"));
    let mut body = vec![0u8; i32::from_be_bytes(size) as usize];
    s.read_exact(&mut body).unwrap();
    let mut body = Bytes::from(body);
    let header = ResponseHeader::decode(&mut body, key.response_header_version(version))
        .unwrap_or_else(|e| panic!("{key:?} v{version}: response header: {e}"));
    assert_eq!(header.correlation_id, corr, "{key:?} v{version}");
    body
}

fn batch() -> Bytes {
    let mut b = BatchBuilder::new();
    b.push(1_700_000_000_000, None, Some(b"v"), &[]);
    Bytes::from(b.finish())
}

/// Sends `req` at each version from `lo` to `hi` and checks that the response decodes
/// as `R` at that version with nothing left over, and that `errors` (the error codes of
/// the test topic's partition in it) are all 0; how many versions it checked.
fn every<Q: Encodable, R: Decodable + std::fmt::Debug>(
    addr: SocketAddr,
    key: ApiKey,
    (lo, hi): (i16, i16),
    corr: &mut i32,
    req: &Q,
    errors: fn(&R) -> Vec<i16>,
) -> i32 {
    for version in lo..=hi {
        *corr += 1;
        let mut body = exchange(addr, key, version, *corr, req);
        let response = R::decode(&mut body, version)
            .unwrap_or_else(|e| panic!("{key:?} v{version}: response does not decode: {e}"));
        assert!(
            body.is_empty(),
            "{key:?} v{version}: {} bytes after the response",
            body.len()
        );
        let codes = errors(&response);
        assert!(
            codes.iter().all(|&c| c == 0),
            "{key:?} v{version}: error codes {codes:?} in {response:?}"
        );
    }
    i32::from(hi - lo + 1)
}

/// Sends a request of `key` that makes sense at every version from `lo` to `hi` and
/// checks each response ([`every`]); how many versions it checked.
fn answer_every_version(
    addr: SocketAddr,
    key: ApiKey,
    (lo, hi): (i16, i16),
    corr: &mut i32,
) -> i32 {
    macro_rules! every {
        ($resp:ty, $req:expr $(,)?) => {
            every::<_, $resp>(addr, key, (lo, hi), corr, &$req, |_| Vec::new())
        };
        ($resp:ty, $req:expr, $errors:expr $(,)?) => {
            every::<_, $resp>(addr, key, (lo, hi), corr, &$req, $errors)
        };
    }
    match key {
        ApiKey::Produce => every!(
            ProduceResponse,
            ProduceRequest::default()
                .with_acks(1)
                .with_timeout_ms(5000)
                .with_topic_data(vec![
                    produce_request::TopicProduceData::default()
                        .with_name(topic())
                        .with_partition_data(vec![
                            produce_request::PartitionProduceData::default()
                                .with_index(0)
                                .with_records(Some(batch())),
                        ]),
                ]),
            |r| r
                .responses
                .iter()
                .flat_map(|t| t.partition_responses.iter().map(|p| p.error_code))
                .collect()
        ),
        ApiKey::Fetch => {
            let id = topic_id(addr, corr);
            every!(
                FetchResponse,
                FetchRequest::default()
                    .with_max_wait_ms(0)
                    .with_max_bytes(1 << 20)
                    .with_topics(vec![
                        fetch_request::FetchTopic::default()
                            .with_topic(topic())
                            // From v13 topics go by id.
                            .with_topic_id(id)
                            .with_partitions(vec![
                                fetch_request::FetchPartition::default()
                                    .with_partition(0)
                                    .with_fetch_offset(0)
                                    .with_partition_max_bytes(1 << 20),
                            ]),
                    ]),
                |r| r
                    .responses
                    .iter()
                    .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
                    .collect()
            )
        }
        ApiKey::ListOffsets => {
            every!(
                ListOffsetsResponse,
                ListOffsetsRequest::default().with_topics(vec![
                    list_offsets_request::ListOffsetsTopic::default()
                        .with_name(topic())
                        .with_partitions(vec![
                            list_offsets_request::ListOffsetsPartition::default()
                                .with_partition_index(0)
                                .with_timestamp(-1),
                        ]),
                ]),
                |r| r
                    .topics
                    .iter()
                    .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
                    .collect()
            )
        }
        ApiKey::Metadata => {
            every!(
                MetadataResponse,
                MetadataRequest::default().with_topics(Some(vec![
                    metadata_request::MetadataRequestTopic::default().with_name(Some(topic())),
                ])),
                |r| r.topics.iter().map(|t| t.error_code).collect()
            )
        }
        ApiKey::OffsetCommit => every!(
            OffsetCommitResponse,
            OffsetCommitRequest::default()
                .with_group_id(GroupId(StrBytes::from_static_str(GROUP)))
                .with_generation_id_or_member_epoch(-1)
                .with_topics(vec![
                    offset_commit_request::OffsetCommitRequestTopic::default()
                        .with_name(topic())
                        .with_partitions(vec![
                            offset_commit_request::OffsetCommitRequestPartition::default()
                                .with_partition_index(0)
                                .with_committed_offset(1),
                        ]),
                ]),
            |r| r
                .topics
                .iter()
                .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
                .collect()
        ),
        ApiKey::OffsetFetch => {
            // One group up to v7, a list of groups from v8.
            let single = OffsetFetchRequest::default()
                .with_group_id(GroupId(StrBytes::from_static_str(GROUP)))
                .with_topics(Some(vec![
                    offset_fetch_request::OffsetFetchRequestTopic::default()
                        .with_name(topic())
                        .with_partition_indexes(vec![0]),
                ]));
            let groups = OffsetFetchRequest::default().with_groups(vec![
                offset_fetch_request::OffsetFetchRequestGroup::default()
                    .with_group_id(GroupId(StrBytes::from_static_str(GROUP)))
                    .with_topics(Some(vec![
                        offset_fetch_request::OffsetFetchRequestTopics::default()
                            .with_name(topic())
                            .with_partition_indexes(vec![0]),
                    ])),
            ]);
            every::<_, OffsetFetchResponse>(addr, key, (lo, hi.min(7)), corr, &single, |r| {
                r.topics
                    .iter()
                    .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
                    .chain([r.error_code])
                    .collect()
            }) + every::<_, OffsetFetchResponse>(addr, key, (lo.max(8), hi), corr, &groups, |r| {
                r.groups
                    .iter()
                    .flat_map(|g| {
                        g.topics
                            .iter()
                            .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
                            .chain([g.error_code])
                    })
                    .collect()
            })
        }
        ApiKey::TxnOffsetCommit => every!(
            TxnOffsetCommitResponse,
            TxnOffsetCommitRequest::default()
                .with_transactional_id(TransactionalId(StrBytes::from_static_str("versions-txn")))
                .with_group_id(GroupId(StrBytes::from_static_str(GROUP)))
                .with_producer_id(ProducerId(1))
                .with_generation_id(-1)
                .with_topics(vec![
                    txn_offset_commit_request::TxnOffsetCommitRequestTopic::default()
                        .with_name(topic())
                        .with_partitions(vec![
                            txn_offset_commit_request::TxnOffsetCommitRequestPartition::default()
                                .with_partition_index(0)
                                .with_committed_offset(1),
                        ]),
                ]),
            // v5 (transaction version 2) adds the group to producer 1's transaction
            // first, and its coordinator knows no such producer:
            // INVALID_PRODUCER_ID_MAPPING (49), as Kafka answers.
            |r| r
                .topics
                .iter()
                .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
                .filter(|&c| c != 49)
                .collect()
        ),
        // One key up to v3, batched keys from v4; of groups, and (key type 1, from v1)
        // of transactional ids.
        ApiKey::FindCoordinator => {
            let mut find = |key_type: i8, (lo, hi): (i16, i16)| {
                let keyed = FindCoordinatorRequest::default()
                    .with_key_type(key_type)
                    .with_key(StrBytes::from_static_str(GROUP));
                let batched = FindCoordinatorRequest::default()
                    .with_key_type(key_type)
                    .with_coordinator_keys(vec![StrBytes::from_static_str(GROUP)]);
                every::<_, FindCoordinatorResponse>(addr, key, (lo, hi.min(3)), corr, &keyed, |r| {
                    vec![r.error_code]
                }) + every::<_, FindCoordinatorResponse>(
                    addr,
                    key,
                    (lo.max(4), hi),
                    corr,
                    &batched,
                    |r| r.coordinators.iter().map(|c| c.error_code).collect(),
                )
            };
            find(1, (lo.max(1), hi));
            find(0, (lo, hi))
        }
        ApiKey::JoinGroup => every!(JoinGroupResponse, JoinGroupRequest::default()),
        ApiKey::Heartbeat => every!(HeartbeatResponse, HeartbeatRequest::default()),
        ApiKey::LeaveGroup => every!(LeaveGroupResponse, LeaveGroupRequest::default()),
        ApiKey::SyncGroup => every!(SyncGroupResponse, SyncGroupRequest::default()),
        ApiKey::ApiVersions => every!(
            ApiVersionsResponse,
            ApiVersionsRequest::default()
                .with_client_software_name(StrBytes::from_static_str("versions-test"))
                .with_client_software_version(StrBytes::from_static_str("1.0")),
            |r| vec![r.error_code]
        ),
        ApiKey::CreateTopics => every!(CreateTopicsResponse, CreateTopicsRequest::default()),
        ApiKey::DeleteTopics => every!(DeleteTopicsResponse, DeleteTopicsRequest::default()),
        ApiKey::InitProducerId => every!(
            InitProducerIdResponse,
            InitProducerIdRequest::default().with_transaction_timeout_ms(60_000),
        ),
        ApiKey::DescribeConfigs => {
            every!(
                DescribeConfigsResponse,
                DescribeConfigsRequest::default().with_resources(vec![
                    describe_configs_request::DescribeConfigsResource::default()
                        .with_resource_type(2)
                        .with_resource_name(StrBytes::from_static_str(TOPIC)),
                ]),
                |r| r.results.iter().map(|t| t.error_code).collect()
            )
        }
        ApiKey::DescribeGroups => every!(
            DescribeGroupsResponse,
            DescribeGroupsRequest::default()
                .with_groups(vec![GroupId(StrBytes::from_static_str(GROUP))]),
        ),
        ApiKey::ListGroups => every!(ListGroupsResponse, ListGroupsRequest::default()),
        ApiKey::DeleteGroups => every!(DeleteGroupsResponse, DeleteGroupsRequest::default()),
        ApiKey::OffsetDelete => every!(
            OffsetDeleteResponse,
            OffsetDeleteRequest::default().with_group_id(GroupId(StrBytes::from_static_str(GROUP))),
        ),
        ApiKey::CreatePartitions => {
            every!(CreatePartitionsResponse, CreatePartitionsRequest::default())
        }
        ApiKey::AlterConfigs => every!(AlterConfigsResponse, AlterConfigsRequest::default()),
        ApiKey::IncrementalAlterConfigs => {
            every!(
                IncrementalAlterConfigsResponse,
                IncrementalAlterConfigsRequest::default()
            )
        }
        ApiKey::DeleteRecords => every!(DeleteRecordsResponse, DeleteRecordsRequest::default()),
        ApiKey::DescribeCluster => {
            every!(DescribeClusterResponse, DescribeClusterRequest::default())
        }
        ApiKey::SaslHandshake => every!(
            SaslHandshakeResponse,
            SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("PLAIN")),
        ),
        ApiKey::SaslAuthenticate => {
            every!(SaslAuthenticateResponse, SaslAuthenticateRequest::default())
        }
        ApiKey::DescribeAcls => every!(
            DescribeAclsResponse,
            DescribeAclsRequest::default()
                .with_resource_type_filter(1)
                .with_pattern_type_filter(1)
                .with_operation(1)
                .with_permission_type(1),
        ),
        ApiKey::CreateAcls => every!(CreateAclsResponse, CreateAclsRequest::default()),
        ApiKey::DeleteAcls => every!(DeleteAclsResponse, DeleteAclsRequest::default()),
        ApiKey::DescribeUserScramCredentials => {
            every!(
                DescribeUserScramCredentialsResponse,
                DescribeUserScramCredentialsRequest::default()
            )
        }
        ApiKey::AlterUserScramCredentials => {
            every!(
                AlterUserScramCredentialsResponse,
                AlterUserScramCredentialsRequest::default()
            )
        }
        ApiKey::OffsetForLeaderEpoch => every!(
            OffsetForLeaderEpochResponse,
            OffsetForLeaderEpochRequest::default().with_topics(vec![
                offset_for_leader_epoch_request::OffsetForLeaderTopic::default()
                    .with_topic(topic())
                    .with_partitions(vec![
                        offset_for_leader_epoch_request::OffsetForLeaderPartition::default()
                            .with_partition(0)
                            .with_leader_epoch(0),
                    ]),
            ]),
            |r| r
                .topics
                .iter()
                .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
                .collect()
        ),
        ApiKey::DescribeProducers => {
            every!(
                DescribeProducersResponse,
                DescribeProducersRequest::default().with_topics(vec![
                    describe_producers_request::TopicRequest::default()
                        .with_name(topic())
                        .with_partition_indexes(vec![0]),
                ]),
                |r| r
                    .topics
                    .iter()
                    .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
                    .collect()
            )
        }
        ApiKey::AddPartitionsToTxn => {
            every!(
                AddPartitionsToTxnResponse,
                AddPartitionsToTxnRequest::default()
            )
        }
        ApiKey::AddOffsetsToTxn => {
            every!(AddOffsetsToTxnResponse, AddOffsetsToTxnRequest::default())
        }
        ApiKey::EndTxn => every!(EndTxnResponse, EndTxnRequest::default()),
        ApiKey::WriteTxnMarkers => {
            // v2 (KIP-890) adds a byte per marker and is newer than the protocol
            // crate: without markers its body is v1's, and its response is v1's.
            let v1 = (lo, hi.min(1));
            let empty_request = WriteTxnMarkersRequest::default();
            let mut n =
                every::<_, WriteTxnMarkersResponse>(addr, key, v1, corr, &empty_request, |_| {
                    Vec::new()
                });
            for version in v1.1 + 1..=hi {
                *corr += 1;
                let mut empty = BytesMut::new();
                WriteTxnMarkersRequest::default()
                    .encode(&mut empty, 1)
                    .unwrap();
                let mut body = exchange_raw(addr, key, version, *corr, &empty);
                let r = WriteTxnMarkersResponse::decode(&mut body, 1)
                    .unwrap_or_else(|e| panic!("WriteTxnMarkers v{version}: {e}"));
                assert!(r.markers.is_empty() && body.is_empty(), "v{version}");
                n += 1;
            }
            n
        }
        ApiKey::DescribeTransactions => every!(
            DescribeTransactionsResponse,
            DescribeTransactionsRequest::default()
        ),
        ApiKey::ListTransactions => every!(
            ListTransactionsResponse,
            ListTransactionsRequest::default(),
            |r| vec![r.error_code]
        ),
        ApiKey::ConsumerGroupHeartbeat => every!(
            ConsumerGroupHeartbeatResponse,
            ConsumerGroupHeartbeatRequest::default()
                .with_group_id(GroupId(StrBytes::from_static_str("versions-848")))
                .with_member_id(StrBytes::from_static_str("m-versions"))
                .with_member_epoch(0)
                .with_rebalance_timeout_ms(30_000)
                .with_subscribed_topic_names(Some(vec![topic()]))
                .with_topic_partitions(Some(Vec::new())),
            |r| vec![r.error_code]
        ),
        ApiKey::ConsumerGroupDescribe => every!(
            ConsumerGroupDescribeResponse,
            ConsumerGroupDescribeRequest::default()
                .with_group_ids(vec![GroupId(StrBytes::from_static_str("versions-848"))])
        ),
        ApiKey::ShareGroupHeartbeat => every!(
            ShareGroupHeartbeatResponse,
            ShareGroupHeartbeatRequest::default()
                .with_group_id(GroupId(StrBytes::from_static_str("versions-share")))
                .with_member_id(StrBytes::from_static_str("m-share"))
                .with_member_epoch(0)
                .with_subscribed_topic_names(Some(vec![topic()])),
            |r| vec![r.error_code]
        ),
        ApiKey::ShareGroupDescribe => every!(
            ShareGroupDescribeResponse,
            ShareGroupDescribeRequest::default()
                .with_group_ids(vec![GroupId(StrBytes::from_static_str("versions-share"))]),
            |r| r.groups.iter().map(|g| g.error_code).collect()
        ),
        // The member joined above opens its share session (epoch 0) and closes it (-1).
        ApiKey::ShareFetch => every!(
            ShareFetchResponse,
            ShareFetchRequest::default()
                .with_group_id(Some(GroupId(StrBytes::from_static_str("versions-share"))))
                .with_member_id(Some(StrBytes::from_static_str("m-share")))
                .with_share_session_epoch(0)
                .with_max_wait_ms(0)
                .with_max_bytes(1 << 20)
                .with_max_records(10),
            |r| vec![r.error_code]
        ),
        ApiKey::ShareAcknowledge => every!(
            ShareAcknowledgeResponse,
            ShareAcknowledgeRequest::default()
                .with_group_id(Some(GroupId(StrBytes::from_static_str("versions-share"))))
                .with_member_id(Some(StrBytes::from_static_str("m-share")))
                .with_share_session_epoch(-1),
            |r| vec![r.error_code]
        ),
        // The share group joined above: its start offset on the test topic (none yet).
        ApiKey::DescribeShareGroupOffsets => every!(
            DescribeShareGroupOffsetsResponse,
            DescribeShareGroupOffsetsRequest::default().with_groups(vec![
                describe_share_group_offsets_request::DescribeShareGroupOffsetsRequestGroup::default()
                    .with_group_id(GroupId(StrBytes::from_static_str("versions-share")))
                    .with_topics(Some(vec![
                        describe_share_group_offsets_request::DescribeShareGroupOffsetsRequestTopic::default()
                            .with_topic_name(topic())
                            .with_partitions(vec![0]),
                    ])),
            ]),
            |r| r
                .groups
                .iter()
                .flat_map(|g| {
                    g.topics
                        .iter()
                        .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
                        .chain([g.error_code])
                })
                .collect()
        ),
        // A group that never existed: the answer, at every version, is Kafka's
        // GROUP_ID_NOT_FOUND (69), which is what this test expects.
        ApiKey::AlterShareGroupOffsets => every!(
            AlterShareGroupOffsetsResponse,
            AlterShareGroupOffsetsRequest::default()
                .with_group_id(GroupId(StrBytes::from_static_str("versions-share-none")))
                .with_topics(vec![
                    alter_share_group_offsets_request::AlterShareGroupOffsetsRequestTopic::default()
                        .with_topic_name(topic())
                        .with_partitions(vec![
                            alter_share_group_offsets_request::AlterShareGroupOffsetsRequestPartition::default()
                                .with_partition_index(0)
                                .with_start_offset(0),
                        ]),
                ]),
            |r| r
                .responses
                .iter()
                .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
                .chain([r.error_code])
                .filter(|&c| c != 69)
                .collect()
        ),
        ApiKey::DeleteShareGroupOffsets => every!(
            DeleteShareGroupOffsetsResponse,
            DeleteShareGroupOffsetsRequest::default()
                .with_group_id(GroupId(StrBytes::from_static_str("versions-share-none")))
                .with_topics(vec![
                    delete_share_group_offsets_request::DeleteShareGroupOffsetsRequestTopic::default()
                        .with_topic_name(topic()),
                ]),
            |r| r
                .responses
                .iter()
                .map(|t| t.error_code)
                .chain([r.error_code])
                .filter(|&c| c != 69)
                .collect()
        ),
        // A single node leads every partition: no election is needed, and for every
        // partition (null) none is listed.
        ApiKey::ElectLeaders => every!(
            ElectLeadersResponse,
            ElectLeadersRequest::default().with_timeout_ms(5000),
            |r| r
                .replica_election_results
                .iter()
                .flat_map(|t| t.partition_result.iter().map(|p| p.error_code))
                .chain([r.error_code])
                .collect()
        ),
        // The test topic's partition is listed (-1 when it is not).
        ApiKey::DescribeLogDirs => every!(
            DescribeLogDirsResponse,
            DescribeLogDirsRequest::default().with_topics(None),
            |r| {
                let listed = r.results.iter().any(|d| {
                    d.topics.iter().any(|t| {
                        t.name.0.as_str() == TOPIC
                            && t.partitions.iter().any(|p| p.partition_index == 0)
                    })
                });
                r.results
                    .iter()
                    .map(|d| d.error_code)
                    .chain([r.error_code, if listed { 0 } else { -1 }])
                    .collect()
            }
        ),
        // To a path that is not one of the node's log directories: LOG_DIR_NOT_FOUND.
        ApiKey::AlterReplicaLogDirs => every!(
            AlterReplicaLogDirsResponse,
            AlterReplicaLogDirsRequest::default().with_dirs(vec![
                alter_replica_log_dirs_request::AlterReplicaLogDir::default()
                    .with_path(StrBytes::from_static_str("/nonexistent-log-dir"))
                    .with_topics(vec![
                        alter_replica_log_dirs_request::AlterReplicaLogDirTopic::default()
                            .with_name(topic())
                            .with_partitions(vec![0]),
                    ]),
            ]),
            |r| r
                .results
                .iter()
                .flat_map(|t| &t.partitions)
                .map(|p| i16::from(p.error_code != 57))
                .chain([i16::from(r.results.is_empty())])
                .collect()
        ),
        // Onto the single node itself: nothing to move.
        ApiKey::AlterPartitionReassignments => every!(
            AlterPartitionReassignmentsResponse,
            AlterPartitionReassignmentsRequest::default()
                .with_timeout_ms(5000)
                .with_topics(vec![
                    alter_partition_reassignments_request::ReassignableTopic::default()
                        .with_name(topic())
                        .with_partitions(vec![
                            alter_partition_reassignments_request::ReassignablePartition::default()
                                .with_partition_index(0)
                                .with_replicas(Some(vec![BrokerId(0)])),
                        ]),
                ]),
            |r| r
                .responses
                .iter()
                .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
                .chain([r.error_code])
                .collect()
        ),
        ApiKey::ListPartitionReassignments => every!(
            ListPartitionReassignmentsResponse,
            ListPartitionReassignmentsRequest::default(),
            |r| vec![r.error_code]
        ),
        // A single node has no metadata quorum: each is answered with INVALID_REQUEST
        // (42), and any other code fails the check.
        ApiKey::DescribeQuorum => every!(
            DescribeQuorumResponse,
            DescribeQuorumRequest::default(),
            |r| vec![i16::from(r.error_code != 42)]
        ),
        ApiKey::AddRaftVoter => every!(
            AddRaftVoterResponse,
            AddRaftVoterRequest::default(),
            |r| vec![i16::from(r.error_code != 42)]
        ),
        ApiKey::RemoveRaftVoter => every!(
            RemoveRaftVoterResponse,
            RemoveRaftVoterRequest::default(),
            |r| vec![i16::from(r.error_code != 42)]
        ),
        // A single node registers no other broker: BROKER_ID_NOT_REGISTERED (102).
        ApiKey::UnregisterBroker => every!(
            UnregisterBrokerResponse,
            UnregisterBrokerRequest::default().with_broker_id(BrokerId(7)),
            |r| vec![i16::from(r.error_code != 102)]
        ),
        // A single node's levels are fixed: the level it has is taken.
        ApiKey::UpdateFeatures => every!(
            UpdateFeaturesResponse,
            UpdateFeaturesRequest::default().with_feature_updates(vec![
                update_features_request::FeatureUpdateKey::default()
                    .with_feature(StrBytes::from_static_str("transaction.version"))
                    .with_max_version_level(2)
                    .with_upgrade_type(1),
            ]),
            |r| vec![r.error_code]
        ),
        ApiKey::DescribeClientQuotas => every!(
            DescribeClientQuotasResponse,
            DescribeClientQuotasRequest::default(),
            |r| vec![r.error_code]
        ),
        ApiKey::AlterClientQuotas => every!(
            AlterClientQuotasResponse,
            AlterClientQuotasRequest::default().with_entries(vec![
                alter_client_quotas_request::EntryData::default()
                    .with_entity(vec![
                        alter_client_quotas_request::EntityData::default()
                            .with_entity_type(StrBytes::from_static_str("client-id"))
                            .with_entity_name(Some(StrBytes::from_static_str("versions"))),
                    ])
                    .with_ops(vec![
                        alter_client_quotas_request::OpData::default()
                            .with_key(StrBytes::from_static_str("producer_byte_rate"))
                            .with_value(1e9),
                    ]),
            ]),
            |r| r.entries.iter().map(|e| e.error_code).collect()
        ),
        // The test topic's one partition, on one page (-1 when it is not described).
        ApiKey::DescribeTopicPartitions => every!(
            DescribeTopicPartitionsResponse,
            DescribeTopicPartitionsRequest::default().with_topics(vec![
                describe_topic_partitions_request::TopicRequest::default().with_name(topic()),
            ]),
            |r| r
                .topics
                .iter()
                .map(|t| t.error_code)
                .chain([if r.topics.len() == 1 && r.topics[0].partitions.len() == 1 {
                    0
                } else {
                    -1
                }])
                .collect()
        ),
        other => panic!("the server advertises {other:?}, which this test has no request for"),
    }
}

/// A request body in Kafka's classic encoding.
#[derive(Default)]
struct Body(Vec<u8>);

impl Body {
    fn i8(mut self, v: i8) -> Self {
        self.0.push(v as u8);
        self
    }
    fn i16(mut self, v: i16) -> Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    fn i32(mut self, v: i32) -> Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    fn i64(mut self, v: i64) -> Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    fn bytes(mut self, v: &[u8]) -> Self {
        self.0.extend_from_slice(&(v.len() as i32).to_be_bytes());
        self.0.extend_from_slice(v);
        self
    }
    fn str(self, v: &str) -> Self {
        let mut b = self.i16(v.len() as i16);
        b.0.extend_from_slice(v.as_bytes());
        b
    }
}

/// A response body in Kafka's classic encoding, read field by field.
struct Fields(Bytes);

impl Fields {
    fn i8(&mut self) -> i8 {
        self.0.get_i8()
    }
    fn i16(&mut self) -> i16 {
        self.0.get_i16()
    }
    fn i32(&mut self) -> i32 {
        self.0.get_i32()
    }
    fn i64(&mut self) -> i64 {
        self.0.get_i64()
    }
    fn str(&mut self) -> Option<String> {
        let len = self.i16();
        (len >= 0).then(|| String::from_utf8(self.0.split_to(len as usize).to_vec()).unwrap())
    }
    fn done(&self, what: &str) {
        assert!(
            self.0.is_empty(),
            "{what}: {} bytes after the response",
            self.0.len()
        );
    }
}

/// A message set of one uncompressed message of `magic` 0 or 1 (key "k", value "v").
fn message_set(magic: i8) -> Vec<u8> {
    let mut m = vec![magic as u8, 0];
    if magic == 1 {
        m.extend_from_slice(&1_700_000_000_000i64.to_be_bytes());
    }
    for field in [b"k", b"v"] {
        m.extend_from_slice(&1i32.to_be_bytes());
        m.extend_from_slice(field);
    }
    let crc = crc_fast::checksum(crc_fast::CrcAlgorithm::Crc32IsoHdlc, &m) as u32;
    let mut set = 0i64.to_be_bytes().to_vec();
    set.extend_from_slice(&(m.len() as i32 + 4).to_be_bytes());
    set.extend_from_slice(&crc.to_be_bytes());
    set.extend_from_slice(&m);
    set
}

/// The versions below `kafka-protocol`'s (Kafka 3.9 answers them, Kafka 4 does not):
/// each request encoded by hand in the layout of Kafka's protocol guide, and the
/// fields of its answer checked; how many versions it checked.
fn answer_old_versions(addr: SocketAddr, key: ApiKey, (lo, hi): (i16, i16), corr: &mut i32) -> i32 {
    for version in lo..=hi {
        *corr += 1;
        let what = format!("{key:?} v{version}");
        let (body, check): (Body, fn(&mut Fields, i16)) = match (key, version) {
            (ApiKey::OffsetCommit, 0 | 1) => {
                let mut b = Body::default().str(GROUP);
                if version == 1 {
                    b = b.i32(-1).str("");
                }
                b = b.i32(1).str(TOPIC).i32(1).i32(0).i64(7);
                if version == 1 {
                    // Its own commit time (a minute ago): offsets expire from it.
                    let now = std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .unwrap();
                    b = b.i64(now.as_millis() as i64 - 60_000);
                }
                (b.str("old"), |f, version| {
                    assert_eq!((f.i32(), f.str().as_deref()), (1, Some(TOPIC)));
                    assert_eq!((f.i32(), f.i32()), (1, 0));
                    // v0 (offsets in ZooKeeper): UNSUPPORTED_VERSION, as Kafka 3.9.
                    assert_eq!(f.i16(), if version == 0 { 35 } else { 0 });
                })
            }
            (ApiKey::OffsetFetch, 0) => (
                Body::default().str(GROUP).i32(1).str(TOPIC).i32(1).i32(0),
                |f, _| {
                    assert_eq!((f.i32(), f.str().as_deref()), (1, Some(TOPIC)));
                    assert_eq!((f.i32(), f.i32(), f.i64()), (1, 0, -1));
                    assert_eq!((f.str().as_deref(), f.i16()), (Some(""), 35));
                },
            ),
            (ApiKey::CreateTopics, 0 | 1) => {
                let name = if version == 0 { "old-v0" } else { "old-v1" };
                let b = Body::default().i32(1).str(name).i32(2).i16(1).i32(0).i32(0);
                let b = if version == 1 {
                    b.i32(5000).i8(0)
                } else {
                    b.i32(5000)
                };
                (b, |f, version| {
                    assert_eq!(f.i32(), 1);
                    let name = f.str().unwrap();
                    assert!(name.starts_with("old-v"), "{name}");
                    assert_eq!(f.i16(), 0, "{name} created");
                    if version == 1 {
                        let message = f.str();
                        assert!(message.as_deref().is_none_or(str::is_empty), "{message:?}");
                    }
                })
            }
            (ApiKey::DeleteTopics, 0) => {
                (Body::default().i32(1).str("old-v0").i32(5000), |f, _| {
                    assert_eq!(f.i32(), 1, "no throttle_time_ms before v1");
                    assert_eq!((f.str().as_deref(), f.i16()), (Some("old-v0"), 0));
                })
            }
            (ApiKey::DescribeConfigs, 0) => (
                Body::default()
                    .i32(1)
                    .i8(2)
                    .str(TOPIC)
                    .i32(2)
                    .str("cleanup.policy")
                    .str("retention.ms"),
                |f, _| {
                    assert_eq!((f.i32(), f.i32()), (0, 1), "throttle, one resource");
                    assert_eq!(f.i16(), 0);
                    let message = f.str();
                    assert!(message.as_deref().is_none_or(str::is_empty), "{message:?}");
                    assert_eq!((f.i8(), f.str().as_deref()), (2, Some(TOPIC)));
                    assert_eq!(f.i32(), 2);
                    let mut seen = Vec::new();
                    for _ in 0..2 {
                        let (name, value) = (f.str().unwrap(), f.str().unwrap());
                        // read_only, is_default (v0), is_sensitive
                        assert_eq!((f.i8(), f.i8(), f.i8()), (0, 1, 0), "{name}");
                        seen.push((name, value));
                    }
                    seen.sort();
                    assert_eq!(
                        seen,
                        [
                            ("cleanup.policy".to_string(), "delete".to_string()),
                            ("retention.ms".to_string(), "604800000".to_string()),
                        ]
                    );
                },
            ),
            (ApiKey::ListOffsets, 0) => (
                // Latest (-1) of TOPIC-0, at most one offset.
                Body::default()
                    .i32(-1)
                    .i32(1)
                    .str(TOPIC)
                    .i32(1)
                    .i32(0)
                    .i64(-1)
                    .i32(1),
                |f, _| {
                    assert_eq!((f.i32(), f.str().as_deref()), (1, Some(TOPIC)));
                    assert_eq!((f.i32(), f.i32(), f.i16()), (1, 0, 0));
                    // old_style_offsets: the log end.
                    assert_eq!(f.i32(), 1);
                    assert!(f.i64() >= 0);
                },
            ),
            (ApiKey::Produce, 0..=2) => (
                // acks 1: one message of magic 0 (v0) or 1 (v1, v2).
                Body::default()
                    .i16(1)
                    .i32(5000)
                    .i32(1)
                    .str(TOPIC)
                    .i32(1)
                    .i32(0)
                    .bytes(&message_set(if version == 0 { 0 } else { 1 })),
                |f, version| {
                    assert_eq!((f.i32(), f.str().as_deref()), (1, Some(TOPIC)));
                    assert_eq!((f.i32(), f.i32(), f.i16()), (1, 0, 0));
                    assert!(f.i64() >= 0, "base_offset");
                    if version == 2 {
                        assert_eq!(f.i64(), -1, "log_append_time_ms");
                    }
                    if version >= 1 {
                        assert_eq!(f.i32(), 0, "throttle_time_ms");
                    }
                },
            ),
            (ApiKey::Fetch, 0..=3) => {
                // TOPIC-0 from offset 0 (Produce put records there first).
                let mut b = Body::default().i32(-1).i32(0).i32(0);
                if version == 3 {
                    b = b.i32(1 << 20);
                }
                let b = b.i32(1).str(TOPIC).i32(1).i32(0).i64(0).i32(1 << 20);
                (b, |f, version| {
                    if version >= 1 {
                        assert_eq!(f.i32(), 0, "throttle_time_ms");
                    }
                    assert_eq!((f.i32(), f.str().as_deref()), (1, Some(TOPIC)));
                    assert_eq!((f.i32(), f.i32(), f.i16()), (1, 0, 0));
                    assert!(f.i64() > 0, "high watermark");
                    // A message set of magic 1: offset 0 first.
                    let len = f.i32();
                    assert!(len > 0, "records");
                    assert_eq!((f.i64(), f.i32() > 0), (0, true));
                    let _crc = f.i32();
                    assert_eq!(f.i8(), 1, "magic");
                    for _ in 0..len - 17 {
                        f.i8();
                    }
                })
            }
            other => panic!("{other:?}: an old version this test has no request for"),
        };
        let mut fields = Fields(exchange_raw(addr, key, version, *corr, &body.0));
        check(&mut fields, version);
        fields.done(&what);
    }
    // OffsetCommit v1 stored its offset: OffsetFetch v1 reads it back.
    if key == ApiKey::OffsetCommit && hi >= 1 {
        *corr += 1;
        let body = Body::default().str(GROUP).i32(1).str(TOPIC).i32(1).i32(0);
        let mut f = Fields(exchange_raw(addr, ApiKey::OffsetFetch, 1, *corr, &body.0));
        assert_eq!((f.i32(), f.str().as_deref(), f.i32()), (1, Some(TOPIC), 1));
        assert_eq!(
            (f.i32(), f.i64(), f.str().as_deref(), f.i16()),
            (0, 7, Some("old"), 0)
        );
        f.done("OffsetFetch v1 after OffsetCommit v1");
    }
    i32::from(hi - lo + 1)
}

#[test]
fn every_advertised_version_of_every_api_is_answered_at_that_version() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::open(dir.path()).unwrap();
    broker.create_topic(TOPIC, 1, TopicConfig::new()).unwrap();
    let server = Server::builder(broker)
        .listen(SocketAddr::from(([127, 0, 0, 1], 0)))
        .start()
        .unwrap();
    let addr = server.local_addr();

    let advertised = {
        let req = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("versions-test"))
            .with_client_software_version(StrBytes::from_static_str("1.0"));
        let mut body = exchange(addr, ApiKey::ApiVersions, 3, 1, &req);
        let r = ApiVersionsResponse::decode(&mut body, 3).unwrap();
        assert_eq!(r.error_code, 0);
        r.api_keys
    };
    assert!(
        advertised
            .iter()
            .any(|k| k.api_key == ApiKey::DescribeProducers as i16),
        "{advertised:?}"
    );
    // The versions Kafka 4.0 removed (KIP-896) and Kafka 3.9 answers are served too.
    for key in [
        ApiKey::ListOffsets,
        ApiKey::OffsetCommit,
        ApiKey::OffsetFetch,
        ApiKey::CreateTopics,
        ApiKey::DeleteTopics,
        ApiKey::DescribeConfigs,
        ApiKey::JoinGroup,
        ApiKey::Heartbeat,
        ApiKey::LeaveGroup,
        ApiKey::SyncGroup,
    ] {
        let k = advertised.iter().find(|k| k.api_key == key as i16).unwrap();
        assert_eq!(
            k.min_version, 0,
            "{key:?}: Kafka 3.9 answers from version 0"
        );
    }
    let mut corr = 100;
    let mut answered = 0;
    for k in &advertised {
        let key = ApiKey::try_from(k.api_key).unwrap();
        let valid = key.valid_versions();
        // WriteTxnMarkers v2 (KIP-890) is newer than the protocol crate's.
        let newest = if key == ApiKey::WriteTxnMarkers {
            2
        } else {
            valid.max
        };
        assert!(
            k.min_version >= 0 && k.max_version <= newest,
            "{key:?} advertised {}-{}, the protocol defines {valid:?}",
            k.min_version,
            k.max_version
        );
        // Versions below the protocol crate's (Kafka 4 dropped them, Kafka 3.9 answers).
        let old = (k.min_version, k.max_version.min(valid.min - 1));
        if old.0 <= old.1 {
            answered += answer_old_versions(addr, key, old, &mut corr);
        }
        let modern = (k.min_version.max(valid.min), k.max_version);
        answered += answer_every_version(addr, key, modern, &mut corr);
    }
    let expected: i32 = advertised
        .iter()
        .map(|k| i32::from(k.max_version - k.min_version + 1))
        .sum();
    assert_eq!(answered, expected);
}
