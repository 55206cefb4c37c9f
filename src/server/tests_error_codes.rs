//! The error-code audit as a table: for every API the server answers, each error
//! condition it can report is provoked over a real socket and the exact Kafka error code
//! checked (unknown topics and partitions, invalid names and arguments, duplicates,
//! internal topics, SASL state, and authorization with the authorizer on and no ACL for
//! the principal). NOT_LEADER_OR_FOLLOWER needs a cluster: see
//! `cluster::tests::describe_producers` and `cluster::tests::replication`.

use bytes::Bytes;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion};

use super::tests_api::{Client, batch, produce_req, start};
use super::tests_security::{broker, login, s, sasl_server};

// Kafka's error codes, as numbers: the test checks the wire, not our names for them.
const OFFSET_OUT_OF_RANGE: i16 = 1;
const CORRUPT_MESSAGE: i16 = 2;
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const MESSAGE_TOO_LARGE: i16 = 10;
const INVALID_TOPIC_EXCEPTION: i16 = 17;
const INVALID_REQUIRED_ACKS: i16 = 21;
const INVALID_GROUP_ID: i16 = 24;
const INVALID_SESSION_TIMEOUT: i16 = 26;
const TOPIC_AUTHORIZATION_FAILED: i16 = 29;
const GROUP_AUTHORIZATION_FAILED: i16 = 30;
const CLUSTER_AUTHORIZATION_FAILED: i16 = 31;
const UNSUPPORTED_SASL_MECHANISM: i16 = 33;
const ILLEGAL_SASL_STATE: i16 = 34;
const TOPIC_ALREADY_EXISTS: i16 = 36;
const INVALID_PARTITIONS: i16 = 37;
const INVALID_REPLICATION_FACTOR: i16 = 38;
const INVALID_CONFIG: i16 = 40;
const INVALID_REQUEST: i16 = 42;
const SECURITY_DISABLED: i16 = 54;
const TRANSACTIONAL_ID_AUTHORIZATION_FAILED: i16 = 53;
const GROUP_ID_NOT_FOUND: i16 = 69;
const INVALID_PRODUCER_ID_MAPPING: i16 = 49;
const INVALID_TRANSACTION_TIMEOUT: i16 = 50;
const TRANSACTIONAL_ID_NOT_FOUND: i16 = 105;
const INVALID_RECORD: i16 = 87;
const RESOURCE_NOT_FOUND: i16 = 91;
const UNACCEPTABLE_CREDENTIAL: i16 = 93;

/// The topic every server of the test has (one partition, a record at offset 0).
const TOPIC: &str = "audit";
/// A group with a committed offset and no members.
const GROUP: &str = "audit-group";
/// Resource type codes of DescribeConfigs and friends.
const TOPIC_RESOURCE: i8 = 2;
const BROKER_RESOURCE: i8 = 4;

fn topic(name: &str) -> TopicName {
    TopicName(s(name))
}

fn group(name: &str) -> GroupId {
    GroupId(s(name))
}

/// One case: what it provokes, the code Kafka answers, and how to get the code the
/// server answered.
type Case = (&'static str, i16, fn(&mut Client) -> i16);

fn call<Q: Encodable, R: Decodable + HeaderVersion>(
    c: &mut Client,
    key: ApiKey,
    version: i16,
    req: &Q,
) -> R {
    c.call(key, version, req)
}

fn produce(c: &mut Client, acks: i16, t: &str, p: i32, records: Vec<u8>) -> i16 {
    let r: ProduceResponse = call(
        c,
        ApiKey::Produce,
        8,
        &produce_req(acks, vec![(t, p, records)]),
    );
    r.responses[0].partition_responses[0].error_code
}

fn fetch(c: &mut Client, t: &str, offset: i64) -> i16 {
    let req = FetchRequest::default()
        .with_max_wait_ms(0)
        .with_max_bytes(1 << 20)
        .with_topics(vec![
            fetch_request::FetchTopic::default()
                .with_topic(topic(t))
                .with_partitions(vec![
                    fetch_request::FetchPartition::default()
                        .with_partition(0)
                        .with_fetch_offset(offset)
                        .with_partition_max_bytes(1 << 20),
                ]),
        ]);
    let r: FetchResponse = call(c, ApiKey::Fetch, 11, &req);
    r.responses[0].partitions[0].error_code
}

fn list_offsets(c: &mut Client, t: &str, p: i32) -> i16 {
    let req = ListOffsetsRequest::default().with_topics(vec![
        list_offsets_request::ListOffsetsTopic::default()
            .with_name(topic(t))
            .with_partitions(vec![
                list_offsets_request::ListOffsetsPartition::default()
                    .with_partition_index(p)
                    .with_timestamp(-1),
            ]),
    ]);
    let r: ListOffsetsResponse = call(c, ApiKey::ListOffsets, 5, &req);
    r.topics[0].partitions[0].error_code
}

fn metadata(c: &mut Client, t: &str) -> i16 {
    let req = MetadataRequest::default()
        .with_allow_auto_topic_creation(false)
        .with_topics(Some(vec![
            metadata_request::MetadataRequestTopic::default().with_name(Some(topic(t))),
        ]));
    let r: MetadataResponse = call(c, ApiKey::Metadata, 8, &req);
    r.topics[0].error_code
}

fn offset_commit(c: &mut Client, g: &str, t: &str, p: i32) -> i16 {
    let req = OffsetCommitRequest::default()
        .with_group_id(group(g))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![
            offset_commit_request::OffsetCommitRequestTopic::default()
                .with_name(topic(t))
                .with_partitions(vec![
                    offset_commit_request::OffsetCommitRequestPartition::default()
                        .with_partition_index(p)
                        .with_committed_offset(1),
                ]),
        ]);
    let r: OffsetCommitResponse = call(c, ApiKey::OffsetCommit, 7, &req);
    r.topics[0].partitions[0].error_code
}

fn offset_fetch(c: &mut Client, version: i16, g: &str) -> i16 {
    let req = OffsetFetchRequest::default()
        .with_group_id(group(g))
        .with_topics(Some(vec![
            offset_fetch_request::OffsetFetchRequestTopic::default()
                .with_name(topic(TOPIC))
                .with_partition_indexes(vec![0]),
        ]));
    let r: OffsetFetchResponse = call(c, ApiKey::OffsetFetch, version, &req);
    if version >= 2 {
        r.error_code
    } else {
        r.topics[0].partitions[0].error_code
    }
}

fn find_coordinator(c: &mut Client, key_type: i8) -> i16 {
    let req = FindCoordinatorRequest::default()
        .with_key(s(GROUP))
        .with_key_type(key_type);
    let r: FindCoordinatorResponse = call(c, ApiKey::FindCoordinator, 2, &req);
    r.error_code
}

fn join_group(c: &mut Client, g: &str, session_timeout_ms: i32) -> i16 {
    let req = JoinGroupRequest::default()
        .with_group_id(group(g))
        .with_session_timeout_ms(session_timeout_ms)
        .with_rebalance_timeout_ms(1000)
        .with_protocol_type(s("consumer"))
        .with_protocols(vec![
            join_group_request::JoinGroupRequestProtocol::default()
                .with_name(s("range"))
                .with_metadata(Bytes::new()),
        ]);
    let r: JoinGroupResponse = call(c, ApiKey::JoinGroup, 5, &req);
    r.error_code
}

fn heartbeat(c: &mut Client, g: &str) -> i16 {
    let req = HeartbeatRequest::default()
        .with_group_id(group(g))
        .with_member_id(s("m"));
    let r: HeartbeatResponse = call(c, ApiKey::Heartbeat, 3, &req);
    r.error_code
}

fn leave_group(c: &mut Client, g: &str) -> i16 {
    let req = LeaveGroupRequest::default()
        .with_group_id(group(g))
        .with_members(vec![
            leave_group_request::MemberIdentity::default().with_member_id(s("m")),
        ]);
    let r: LeaveGroupResponse = call(c, ApiKey::LeaveGroup, 3, &req);
    r.error_code
}

fn sync_group(c: &mut Client, g: &str) -> i16 {
    let req = SyncGroupRequest::default()
        .with_group_id(group(g))
        .with_member_id(s("m"));
    let r: SyncGroupResponse = call(c, ApiKey::SyncGroup, 3, &req);
    r.error_code
}

fn creatable(name: &str, partitions: i32, rf: i16) -> create_topics_request::CreatableTopic {
    create_topics_request::CreatableTopic::default()
        .with_name(topic(name))
        .with_num_partitions(partitions)
        .with_replication_factor(rf)
}

fn create_topics(c: &mut Client, topics: Vec<create_topics_request::CreatableTopic>) -> i16 {
    let req = CreateTopicsRequest::default()
        .with_timeout_ms(5000)
        .with_topics(topics);
    let r: CreateTopicsResponse = call(c, ApiKey::CreateTopics, 4, &req);
    r.topics[0].error_code
}

fn delete_topics(c: &mut Client, names: &[&str]) -> i16 {
    let req = DeleteTopicsRequest::default()
        .with_timeout_ms(5000)
        .with_topic_names(names.iter().map(|n| topic(n)).collect());
    let r: DeleteTopicsResponse = call(c, ApiKey::DeleteTopics, 3, &req);
    r.responses[0].error_code
}

fn describe_configs(c: &mut Client, kind: i8, name: &str) -> i16 {
    let req = DescribeConfigsRequest::default().with_resources(vec![
        describe_configs_request::DescribeConfigsResource::default()
            .with_resource_type(kind)
            .with_resource_name(s(name)),
    ]);
    let r: DescribeConfigsResponse = call(c, ApiKey::DescribeConfigs, 3, &req);
    r.results[0].error_code
}

fn describe_groups(c: &mut Client, g: &str) -> i16 {
    let req = DescribeGroupsRequest::default().with_groups(vec![group(g)]);
    let r: DescribeGroupsResponse = call(c, ApiKey::DescribeGroups, 5, &req);
    r.groups[0].error_code
}

fn delete_groups(c: &mut Client, g: &str) -> i16 {
    let req = DeleteGroupsRequest::default().with_groups_names(vec![group(g)]);
    let r: DeleteGroupsResponse = call(c, ApiKey::DeleteGroups, 2, &req);
    r.results[0].error_code
}

fn offset_delete(c: &mut Client, g: &str, p: i32) -> i16 {
    let req = OffsetDeleteRequest::default()
        .with_group_id(group(g))
        .with_topics(vec![
            offset_delete_request::OffsetDeleteRequestTopic::default()
                .with_name(topic(TOPIC))
                .with_partitions(vec![
                    offset_delete_request::OffsetDeleteRequestPartition::default()
                        .with_partition_index(p),
                ]),
        ]);
    let r: OffsetDeleteResponse = call(c, ApiKey::OffsetDelete, 0, &req);
    if r.error_code != 0 {
        return r.error_code;
    }
    r.topics[0].partitions[0].error_code
}

fn create_partitions(c: &mut Client, t: &str, count: i32) -> i16 {
    let req = CreatePartitionsRequest::default()
        .with_timeout_ms(5000)
        .with_topics(vec![
            create_partitions_request::CreatePartitionsTopic::default()
                .with_name(topic(t))
                .with_count(count),
        ]);
    let r: CreatePartitionsResponse = call(c, ApiKey::CreatePartitions, 3, &req);
    r.results[0].error_code
}

fn alter_configs(c: &mut Client, t: &str, key: &str, value: &str) -> i16 {
    let req = AlterConfigsRequest::default().with_resources(vec![
        alter_configs_request::AlterConfigsResource::default()
            .with_resource_type(TOPIC_RESOURCE)
            .with_resource_name(s(t))
            .with_configs(vec![
                alter_configs_request::AlterableConfig::default()
                    .with_name(s(key))
                    .with_value(Some(s(value))),
            ]),
    ]);
    let r: AlterConfigsResponse = call(c, ApiKey::AlterConfigs, 2, &req);
    r.responses[0].error_code
}

fn incremental_alter_configs(c: &mut Client, t: &str, key: &str, value: &str) -> i16 {
    let req = IncrementalAlterConfigsRequest::default().with_resources(vec![
        incremental_alter_configs_request::AlterConfigsResource::default()
            .with_resource_type(TOPIC_RESOURCE)
            .with_resource_name(s(t))
            .with_configs(vec![
                incremental_alter_configs_request::AlterableConfig::default()
                    .with_name(s(key))
                    .with_config_operation(0)
                    .with_value(Some(s(value))),
            ]),
    ]);
    let r: IncrementalAlterConfigsResponse = call(c, ApiKey::IncrementalAlterConfigs, 1, &req);
    r.responses[0].error_code
}

fn delete_records(c: &mut Client, t: &str, offset: i64) -> i16 {
    let req = DeleteRecordsRequest::default()
        .with_timeout_ms(5000)
        .with_topics(vec![
            delete_records_request::DeleteRecordsTopic::default()
                .with_name(topic(t))
                .with_partitions(vec![
                    delete_records_request::DeleteRecordsPartition::default()
                        .with_partition_index(0)
                        .with_offset(offset),
                ]),
        ]);
    let r: DeleteRecordsResponse = call(c, ApiKey::DeleteRecords, 2, &req);
    r.topics[0].partitions[0].error_code
}

fn init_producer_id(c: &mut Client, transactional_id: Option<&str>) -> i16 {
    let req = InitProducerIdRequest::default()
        .with_transactional_id(transactional_id.map(|t| TransactionalId(s(t))))
        .with_transaction_timeout_ms(60_000);
    let r: InitProducerIdResponse = call(c, ApiKey::InitProducerId, 1, &req);
    r.error_code
}

fn sasl_handshake(c: &mut Client, mechanism: &str) -> i16 {
    let req = SaslHandshakeRequest::default().with_mechanism(s(mechanism));
    let r: SaslHandshakeResponse = call(c, ApiKey::SaslHandshake, 1, &req);
    r.error_code
}

fn describe_acls(c: &mut Client) -> i16 {
    let req = DescribeAclsRequest::default()
        .with_resource_type_filter(1)
        .with_pattern_type_filter(1)
        .with_operation(1)
        .with_permission_type(1);
    let r: DescribeAclsResponse = call(c, ApiKey::DescribeAcls, 3, &req);
    r.error_code
}

fn create_acls(c: &mut Client) -> i16 {
    let req = CreateAclsRequest::default().with_creations(vec![
        create_acls_request::AclCreation::default()
            .with_resource_type(2)
            .with_resource_name(s(TOPIC))
            .with_resource_pattern_type(3)
            .with_principal(s("User:bob"))
            .with_host(s("*"))
            .with_operation(3)
            .with_permission_type(3),
    ]);
    let r: CreateAclsResponse = call(c, ApiKey::CreateAcls, 3, &req);
    r.results[0].error_code
}

fn delete_acls(c: &mut Client) -> i16 {
    let req = DeleteAclsRequest::default().with_filters(vec![
        delete_acls_request::DeleteAclsFilter::default()
            .with_resource_type_filter(1)
            .with_pattern_type_filter(1)
            .with_operation(1)
            .with_permission_type(1),
    ]);
    let r: DeleteAclsResponse = call(c, ApiKey::DeleteAcls, 3, &req);
    r.filter_results[0].error_code
}

fn describe_scram(c: &mut Client, user: &str) -> i16 {
    let req = DescribeUserScramCredentialsRequest::default().with_users(Some(vec![
        describe_user_scram_credentials_request::UserName::default().with_name(s(user)),
    ]));
    let r: DescribeUserScramCredentialsResponse =
        call(c, ApiKey::DescribeUserScramCredentials, 0, &req);
    if r.error_code != 0 {
        return r.error_code;
    }
    r.results[0].error_code
}

fn alter_scram(c: &mut Client, iterations: i32) -> i16 {
    let req = AlterUserScramCredentialsRequest::default().with_upsertions(vec![
        alter_user_scram_credentials_request::ScramCredentialUpsertion::default()
            .with_name(s("carol"))
            .with_mechanism(2)
            .with_iterations(iterations)
            .with_salt(Bytes::from_static(b"0123456789abcdef"))
            .with_salted_password(Bytes::from_static(&[7; 64])),
    ]);
    let r: AlterUserScramCredentialsResponse = call(c, ApiKey::AlterUserScramCredentials, 0, &req);
    r.results[0].error_code
}

fn offset_for_leader_epoch(c: &mut Client, t: &str) -> i16 {
    let req = OffsetForLeaderEpochRequest::default().with_topics(vec![
        offset_for_leader_epoch_request::OffsetForLeaderTopic::default()
            .with_topic(topic(t))
            .with_partitions(vec![
                offset_for_leader_epoch_request::OffsetForLeaderPartition::default()
                    .with_partition(0)
                    .with_current_leader_epoch(-1)
                    .with_leader_epoch(0),
            ]),
    ]);
    let r: OffsetForLeaderEpochResponse = call(c, ApiKey::OffsetForLeaderEpoch, 4, &req);
    r.topics[0].partitions[0].error_code
}

fn describe_producers(c: &mut Client, t: &str, p: i32) -> i16 {
    let req = DescribeProducersRequest::default().with_topics(vec![
        describe_producers_request::TopicRequest::default()
            .with_name(topic(t))
            .with_partition_indexes(vec![p]),
    ]);
    let r: DescribeProducersResponse = call(c, ApiKey::DescribeProducers, 0, &req);
    r.topics[0].partitions[0].error_code
}

/// A batch whose CRC does not match its bytes.
/// A transactional batch of producer 7 at epoch 0.
fn transactional_batch() -> Vec<u8> {
    let mut b = crate::record::BatchBuilder::new()
        .producer(7, 0, 0)
        .attributes(crate::record::TRANSACTIONAL_BIT);
    b.push(1_700_000_000_000, None, Some(b"x"), &[]);
    b.finish()
}

fn damaged_batch() -> Vec<u8> {
    let mut b = batch(&["x"]);
    let last = b.len() - 1;
    b[last] ^= 0xff;
    b
}

/// Conditions a plain server (no authorizer) answers.
const PLAIN: &[Case] = &[
    ("Produce: unknown topic", UNKNOWN_TOPIC_OR_PARTITION, |c| {
        produce(c, 1, "nowhere", 0, batch(&["x"]))
    }),
    (
        "Produce: unknown partition",
        UNKNOWN_TOPIC_OR_PARTITION,
        |c| produce(c, 1, TOPIC, 9, batch(&["x"])),
    ),
    ("Produce: no records", INVALID_RECORD, |c| {
        produce(c, 1, TOPIC, 0, Vec::new())
    }),
    ("Produce: bad CRC", CORRUPT_MESSAGE, |c| {
        produce(c, 1, TOPIC, 0, damaged_batch())
    }),
    ("Produce: acks 2", INVALID_REQUIRED_ACKS, |c| {
        produce(c, 2, TOPIC, 0, batch(&["x"]))
    }),
    (
        "Produce: batch above max.message.bytes",
        MESSAGE_TOO_LARGE,
        |c| produce(c, 1, "small", 0, batch(&[&"x".repeat(2048)])),
    ),
    (
        "Produce: __consumer_offsets",
        INVALID_TOPIC_EXCEPTION,
        |c| produce(c, 1, crate::broker::OFFSETS_TOPIC, 0, batch(&["x"])),
    ),
    ("Produce: a client's control batch", INVALID_RECORD, |c| {
        let marker = crate::record::EndTxnMarker::commit(0).batch(7, 0, 1_700_000_000_000);
        produce(c, 1, TOPIC, 0, marker)
    }),
    (
        "Produce: transactional batch without a transactional id",
        TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        |c| produce(c, 1, TOPIC, 0, transactional_batch()),
    ),
    ("Fetch: unknown topic", UNKNOWN_TOPIC_OR_PARTITION, |c| {
        fetch(c, "nowhere", 0)
    }),
    ("Fetch: offset past the end", OFFSET_OUT_OF_RANGE, |c| {
        fetch(c, TOPIC, 1000)
    }),
    (
        "ListOffsets: unknown topic",
        UNKNOWN_TOPIC_OR_PARTITION,
        |c| list_offsets(c, "nowhere", 0),
    ),
    (
        "ListOffsets: unknown partition",
        UNKNOWN_TOPIC_OR_PARTITION,
        |c| list_offsets(c, TOPIC, 9),
    ),
    ("Metadata: unknown topic", UNKNOWN_TOPIC_OR_PARTITION, |c| {
        metadata(c, "nowhere")
    }),
    ("Metadata: invalid name", INVALID_TOPIC_EXCEPTION, |c| {
        metadata(c, "bad name!")
    }),
    (
        "OffsetCommit: unknown topic",
        UNKNOWN_TOPIC_OR_PARTITION,
        |c| offset_commit(c, GROUP, "nowhere", 0),
    ),
    (
        "OffsetCommit: unknown partition",
        UNKNOWN_TOPIC_OR_PARTITION,
        |c| offset_commit(c, GROUP, TOPIC, 9),
    ),
    ("OffsetCommit: empty group id", INVALID_GROUP_ID, |c| {
        offset_commit(c, "", TOPIC, 0)
    }),
    ("FindCoordinator: unknown key type", INVALID_REQUEST, |c| {
        find_coordinator(c, 7)
    }),
    ("JoinGroup: empty group id", INVALID_GROUP_ID, |c| {
        join_group(c, "", 10_000)
    }),
    (
        "JoinGroup: session timeout below the minimum",
        INVALID_SESSION_TIMEOUT,
        |c| join_group(c, "j", 1),
    ),
    ("Heartbeat: empty group id", INVALID_GROUP_ID, |c| {
        heartbeat(c, "")
    }),
    ("LeaveGroup: empty group id", INVALID_GROUP_ID, |c| {
        leave_group(c, "")
    }),
    ("SyncGroup: empty group id", INVALID_GROUP_ID, |c| {
        sync_group(c, "")
    }),
    ("CreateTopics: exists", TOPIC_ALREADY_EXISTS, |c| {
        create_topics(c, vec![creatable(TOPIC, 1, 1)])
    }),
    ("CreateTopics: 0 partitions", INVALID_PARTITIONS, |c| {
        create_topics(c, vec![creatable("zero", 0, 1)])
    }),
    (
        "CreateTopics: replication factor 0",
        INVALID_REPLICATION_FACTOR,
        |c| create_topics(c, vec![creatable("rf0", 1, 0)]),
    ),
    (
        "CreateTopics: replication factor above the nodes",
        INVALID_REPLICATION_FACTOR,
        |c| create_topics(c, vec![creatable("rf3", 1, 3)]),
    ),
    ("CreateTopics: invalid name", INVALID_TOPIC_EXCEPTION, |c| {
        create_topics(c, vec![creatable("bad name!", 1, 1)])
    }),
    ("CreateTopics: named twice", INVALID_REQUEST, |c| {
        create_topics(c, vec![creatable("twice", 1, 1), creatable("twice", 1, 1)])
    }),
    ("CreateTopics: invalid config", INVALID_CONFIG, |c| {
        let t = creatable("badcfg", 1, 1).with_configs(vec![
            create_topics_request::CreatableTopicConfig::default()
                .with_name(s("cleanup.policy"))
                .with_value(Some(s("shred"))),
        ]);
        create_topics(c, vec![t])
    }),
    (
        "DeleteTopics: unknown topic",
        UNKNOWN_TOPIC_OR_PARTITION,
        |c| delete_topics(c, &["nowhere"]),
    ),
    ("DeleteTopics: named twice", INVALID_REQUEST, |c| {
        delete_topics(c, &["small", "small"])
    }),
    ("DeleteTopics: __consumer_offsets", INVALID_REQUEST, |c| {
        delete_topics(c, &[crate::broker::OFFSETS_TOPIC])
    }),
    (
        "InitProducerId: transaction timeout above the maximum",
        INVALID_TRANSACTION_TIMEOUT,
        |c| {
            let req = InitProducerIdRequest::default()
                .with_transactional_id(Some(TransactionalId(s("tx"))))
                .with_transaction_timeout_ms(i32::MAX);
            let r: InitProducerIdResponse = call(c, ApiKey::InitProducerId, 4, &req);
            r.error_code
        },
    ),
    (
        "EndTxn: unknown transactional id",
        INVALID_PRODUCER_ID_MAPPING,
        |c| {
            assert_eq!(init_producer_id(c, Some("known")), 0);
            let req = EndTxnRequest::default()
                .with_transactional_id(TransactionalId(s("unknown")))
                .with_producer_id(ProducerId(5))
                .with_committed(true);
            let r: EndTxnResponse = call(c, ApiKey::EndTxn, 3, &req);
            r.error_code
        },
    ),
    (
        "DescribeTransactions: unknown transactional id",
        TRANSACTIONAL_ID_NOT_FOUND,
        |c| {
            assert_eq!(init_producer_id(c, Some("known")), 0);
            let req = DescribeTransactionsRequest::default()
                .with_transactional_ids(vec![TransactionalId(s("unknown"))]);
            let r: DescribeTransactionsResponse = call(c, ApiKey::DescribeTransactions, 0, &req);
            r.transaction_states[0].error_code
        },
    ),
    (
        "DescribeConfigs: unknown topic",
        UNKNOWN_TOPIC_OR_PARTITION,
        |c| describe_configs(c, TOPIC_RESOURCE, "nowhere"),
    ),
    (
        "DescribeConfigs: invalid topic name",
        INVALID_TOPIC_EXCEPTION,
        |c| describe_configs(c, TOPIC_RESOURCE, "bad name!"),
    ),
    ("DescribeConfigs: another broker", INVALID_REQUEST, |c| {
        describe_configs(c, BROKER_RESOURCE, "42")
    }),
    (
        "DescribeConfigs: unsupported resource type",
        INVALID_REQUEST,
        |c| describe_configs(c, 3, "x"),
    ),
    ("DeleteGroups: unknown group", GROUP_ID_NOT_FOUND, |c| {
        delete_groups(c, "nobody")
    }),
    ("OffsetDelete: unknown group", GROUP_ID_NOT_FOUND, |c| {
        offset_delete(c, "nobody", 0)
    }),
    (
        "OffsetDelete: unknown partition",
        UNKNOWN_TOPIC_OR_PARTITION,
        |c| offset_delete(c, GROUP, 9),
    ),
    (
        "CreatePartitions: unknown topic",
        UNKNOWN_TOPIC_OR_PARTITION,
        |c| create_partitions(c, "nowhere", 2),
    ),
    (
        "CreatePartitions: fewer partitions",
        INVALID_PARTITIONS,
        |c| create_partitions(c, TOPIC, 1),
    ),
    (
        "AlterConfigs: unknown topic",
        UNKNOWN_TOPIC_OR_PARTITION,
        |c| alter_configs(c, "nowhere", "retention.ms", "1000"),
    ),
    ("AlterConfigs: invalid value", INVALID_CONFIG, |c| {
        alter_configs(c, TOPIC, "retention.ms", "soon")
    }),
    ("AlterConfigs: unknown key", INVALID_CONFIG, |c| {
        alter_configs(c, TOPIC, "no.such.key", "1")
    }),
    (
        "IncrementalAlterConfigs: unknown topic",
        UNKNOWN_TOPIC_OR_PARTITION,
        |c| incremental_alter_configs(c, "nowhere", "retention.ms", "1000"),
    ),
    (
        "IncrementalAlterConfigs: invalid value",
        INVALID_CONFIG,
        |c| incremental_alter_configs(c, TOPIC, "cleanup.policy", "shred"),
    ),
    (
        "DeleteRecords: unknown topic",
        UNKNOWN_TOPIC_OR_PARTITION,
        |c| delete_records(c, "nowhere", 0),
    ),
    (
        "DeleteRecords: past the high watermark",
        OFFSET_OUT_OF_RANGE,
        |c| delete_records(c, TOPIC, 1000),
    ),
    (
        "SaslHandshake: on a listener without SASL",
        ILLEGAL_SASL_STATE,
        |c| sasl_handshake(c, "PLAIN"),
    ),
    (
        "DescribeAcls: no authorizer",
        SECURITY_DISABLED,
        describe_acls,
    ),
    ("CreateAcls: no authorizer", SECURITY_DISABLED, create_acls),
    ("DeleteAcls: no authorizer", SECURITY_DISABLED, delete_acls),
    (
        "DescribeUserScramCredentials: unknown user",
        RESOURCE_NOT_FOUND,
        |c| describe_scram(c, "nobody"),
    ),
    (
        "AlterUserScramCredentials: too few iterations",
        UNACCEPTABLE_CREDENTIAL,
        |c| alter_scram(c, 1),
    ),
    (
        "OffsetForLeaderEpoch: unknown topic",
        UNKNOWN_TOPIC_OR_PARTITION,
        |c| offset_for_leader_epoch(c, "nowhere"),
    ),
    (
        "DescribeProducers: unknown topic",
        UNKNOWN_TOPIC_OR_PARTITION,
        |c| describe_producers(c, "nowhere", 0),
    ),
    (
        "DescribeProducers: unknown partition",
        UNKNOWN_TOPIC_OR_PARTITION,
        |c| describe_producers(c, TOPIC, 9),
    ),
];

/// Conditions of a principal the authorizer allows nothing (no ACL names it).
const DENIED: &[Case] = &[
    ("Produce", TOPIC_AUTHORIZATION_FAILED, |c| {
        produce(c, 1, TOPIC, 0, batch(&["x"]))
    }),
    ("Fetch", TOPIC_AUTHORIZATION_FAILED, |c| fetch(c, TOPIC, 0)),
    ("ListOffsets", TOPIC_AUTHORIZATION_FAILED, |c| {
        list_offsets(c, TOPIC, 0)
    }),
    ("Metadata", TOPIC_AUTHORIZATION_FAILED, |c| {
        metadata(c, TOPIC)
    }),
    ("OffsetCommit", GROUP_AUTHORIZATION_FAILED, |c| {
        offset_commit(c, GROUP, TOPIC, 0)
    }),
    (
        "OffsetFetch v1 (per partition)",
        GROUP_AUTHORIZATION_FAILED,
        |c| offset_fetch(c, 1, GROUP),
    ),
    (
        "OffsetFetch v5 (top level)",
        GROUP_AUTHORIZATION_FAILED,
        |c| offset_fetch(c, 5, GROUP),
    ),
    ("FindCoordinator", GROUP_AUTHORIZATION_FAILED, |c| {
        find_coordinator(c, 0)
    }),
    (
        "FindCoordinator (transaction)",
        TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        |c| find_coordinator(c, 1),
    ),
    (
        "InitProducerId (transactional id)",
        TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        |c| init_producer_id(c, Some("tx")),
    ),
    (
        "Produce (transactional id)",
        TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        |c| {
            let req = produce_req(1, vec![(TOPIC, 0, transactional_batch())])
                .with_transactional_id(Some(TransactionalId(s("tx"))));
            let r: ProduceResponse = call(c, ApiKey::Produce, 8, &req);
            r.responses[0].partition_responses[0].error_code
        },
    ),
    ("JoinGroup", GROUP_AUTHORIZATION_FAILED, |c| {
        join_group(c, GROUP, 10_000)
    }),
    ("Heartbeat", GROUP_AUTHORIZATION_FAILED, |c| {
        heartbeat(c, GROUP)
    }),
    ("LeaveGroup", GROUP_AUTHORIZATION_FAILED, |c| {
        leave_group(c, GROUP)
    }),
    ("SyncGroup", GROUP_AUTHORIZATION_FAILED, |c| {
        sync_group(c, GROUP)
    }),
    ("CreateTopics", TOPIC_AUTHORIZATION_FAILED, |c| {
        create_topics(c, vec![creatable("new", 1, 1)])
    }),
    ("DeleteTopics", TOPIC_AUTHORIZATION_FAILED, |c| {
        delete_topics(c, &[TOPIC])
    }),
    (
        "InitProducerId (idempotent write)",
        CLUSTER_AUTHORIZATION_FAILED,
        |c| init_producer_id(c, None),
    ),
    ("DescribeConfigs", TOPIC_AUTHORIZATION_FAILED, |c| {
        describe_configs(c, TOPIC_RESOURCE, TOPIC)
    }),
    ("DescribeGroups", GROUP_AUTHORIZATION_FAILED, |c| {
        describe_groups(c, GROUP)
    }),
    ("DeleteGroups", GROUP_AUTHORIZATION_FAILED, |c| {
        delete_groups(c, GROUP)
    }),
    ("OffsetDelete", GROUP_AUTHORIZATION_FAILED, |c| {
        offset_delete(c, GROUP, 0)
    }),
    ("CreatePartitions", TOPIC_AUTHORIZATION_FAILED, |c| {
        create_partitions(c, TOPIC, 2)
    }),
    ("AlterConfigs", TOPIC_AUTHORIZATION_FAILED, |c| {
        alter_configs(c, TOPIC, "retention.ms", "1000")
    }),
    ("IncrementalAlterConfigs", TOPIC_AUTHORIZATION_FAILED, |c| {
        incremental_alter_configs(c, TOPIC, "retention.ms", "1000")
    }),
    ("DeleteRecords", TOPIC_AUTHORIZATION_FAILED, |c| {
        delete_records(c, TOPIC, 0)
    }),
    ("DescribeAcls", CLUSTER_AUTHORIZATION_FAILED, describe_acls),
    ("CreateAcls", CLUSTER_AUTHORIZATION_FAILED, create_acls),
    ("DeleteAcls", CLUSTER_AUTHORIZATION_FAILED, delete_acls),
    (
        "DescribeUserScramCredentials",
        CLUSTER_AUTHORIZATION_FAILED,
        |c| describe_scram(c, "alice"),
    ),
    (
        "AlterUserScramCredentials",
        CLUSTER_AUTHORIZATION_FAILED,
        |c| alter_scram(c, 8192),
    ),
    ("OffsetForLeaderEpoch", TOPIC_AUTHORIZATION_FAILED, |c| {
        offset_for_leader_epoch(c, TOPIC)
    }),
    ("DescribeProducers", TOPIC_AUTHORIZATION_FAILED, |c| {
        describe_producers(c, TOPIC, 0)
    }),
];

/// Runs `cases` each on a new connection from `connect`; every mismatch, listed.
fn mismatches(cases: &[Case], mut connect: impl FnMut() -> Client) -> Vec<String> {
    cases
        .iter()
        .filter_map(|(what, expected, run)| {
            let got = run(&mut connect());
            (got != *expected).then(|| format!("{what}: expected {expected}, got {got}"))
        })
        .collect()
}

/// A record in the test topic, and a topic with a small `max.message.bytes`.
fn prepare(broker: &crate::broker::Broker) {
    broker
        .create_topic(
            "small",
            1,
            crate::config::TopicConfig::new().set("max.message.bytes", 1024),
        )
        .unwrap();
    let p = broker.topic(TOPIC).unwrap().partition(0).unwrap();
    p.append_batch(&batch(&["first"])).unwrap();
}

#[test]
fn every_error_condition_answers_kafkas_code() {
    let dir = tempfile::tempdir().unwrap();
    let plain_broker = crate::broker::Broker::open(dir.path()).unwrap();
    plain_broker
        .create_topic(TOPIC, 1, crate::config::TopicConfig::new())
        .unwrap();
    prepare(&plain_broker);
    drop(plain_broker);
    let server = start(dir.path());
    // The group with a committed offset (a simple commit, as an admin tool makes).
    let committed = offset_commit(&mut Client::connect(server.local_addr()), GROUP, TOPIC, 0);
    assert_eq!(committed, 0);
    let plain = mismatches(PLAIN, || Client::connect(server.local_addr()));
    assert!(plain.is_empty(), "{}", plain.join("\n"));

    let (_sasl_dir, sasl_broker) = broker(&[TOPIC], &[("alice", "alice-secret")]);
    prepare(&sasl_broker);
    let server = sasl_server(sasl_broker, true);
    let sasl_addr = server.local_addr();
    let denied = mismatches(DENIED, || {
        login(sasl_addr, "SCRAM-SHA-512", "alice", "alice-secret").unwrap()
    });
    assert!(denied.is_empty(), "{}", denied.join("\n"));

    // SASL itself: a mechanism the listener does not enable.
    let mut c = Client::connect(sasl_addr);
    assert_eq!(sasl_handshake(&mut c, "GSSAPI"), UNSUPPORTED_SASL_MECHANISM);
}
