//! The consumer group protocol (KIP-848) over a real socket: ConsumerGroupHeartbeat,
//! ConsumerGroupDescribe, topic ids in Metadata, ListGroups v5's group types and
//! OffsetCommit with member epochs, with requests encoded and responses decoded by
//! `kafka-protocol`.

use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions as Owned;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

use super::tests_api::{Client, create as create_topic};
use super::tests_groups::start_without_initial_delay;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn heartbeat(
    c: &mut Client,
    member: &str,
    epoch: i32,
    owned: Option<Vec<Owned>>,
) -> ConsumerGroupHeartbeatResponse {
    let mut req = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s("g")))
        .with_member_id(s(member))
        .with_member_epoch(epoch)
        .with_rebalance_timeout_ms(if epoch == 0 { 30_000 } else { -1 })
        .with_topic_partitions(owned);
    if epoch == 0 {
        req = req
            .with_subscribed_topic_names(Some(vec![TopicName(s("t"))]))
            .with_topic_partitions(Some(Vec::new()));
    }
    c.call(ApiKey::ConsumerGroupHeartbeat, 1, &req)
}

/// The partitions of an assignment, as the owned partitions of the next heartbeat.
fn owned(r: &ConsumerGroupHeartbeatResponse) -> Vec<Owned> {
    r.assignment
        .as_ref()
        .expect("an assignment")
        .topic_partitions
        .iter()
        .map(|tp| {
            Owned::default()
                .with_topic_id(tp.topic_id)
                .with_partitions(tp.partitions.clone())
        })
        .collect()
}

fn count(o: &[Owned]) -> usize {
    o.iter().map(|tp| tp.partitions.len()).sum()
}

#[test]
fn two_members_split_a_topic_through_heartbeats() {
    let dir = tempfile::tempdir().unwrap();
    let server = start_without_initial_delay(dir.path());
    let mut c = Client::connect(server.local_addr());
    create_topic(&mut c, "t", 4);

    // Metadata v12 reports t's id, and finds t by it.
    let meta: MetadataResponse = c.call(
        ApiKey::Metadata,
        12,
        &MetadataRequest::default().with_topics(Some(vec![
            metadata_request::MetadataRequestTopic::default().with_name(Some(TopicName(s("t")))),
        ])),
    );
    let id = meta.topics[0].topic_id;
    assert!(!id.is_nil());
    let by_id: MetadataResponse = c.call(
        ApiKey::Metadata,
        12,
        &MetadataRequest::default().with_topics(Some(vec![
            metadata_request::MetadataRequestTopic::default().with_topic_id(id),
        ])),
    );
    assert_eq!(
        by_id.topics[0].name.as_ref().map(|n| n.0.as_str()),
        Some("t")
    );
    let unknown = uuid::Uuid::from_u128(42);
    let none: MetadataResponse = c.call(
        ApiKey::Metadata,
        12,
        &MetadataRequest::default().with_topics(Some(vec![
            metadata_request::MetadataRequestTopic::default()
                .with_name(None)
                .with_topic_id(unknown),
        ])),
    );
    assert_eq!(
        (none.topics[0].error_code, none.topics[0].topic_id),
        (100, unknown)
    );

    // v1: an empty member id is refused.
    assert_eq!(heartbeat(&mut c, "", 0, None).error_code, 42);
    let a = heartbeat(&mut c, "a", 0, None);
    assert_eq!((a.error_code, a.member_epoch), (0, 1), "{a:?}");
    assert_eq!(a.heartbeat_interval_ms, 5000);
    let a_owned = owned(&a);
    assert_eq!(count(&a_owned), 4);
    assert_eq!(a_owned[0].topic_id, id);

    // b joins: nothing until a has revoked half.
    let b = heartbeat(&mut c, "b", 0, None);
    assert_eq!((b.error_code, b.member_epoch), (0, 2));
    assert_eq!(count(&owned(&b)), 0);
    let a = heartbeat(&mut c, "a", 1, Some(a_owned));
    assert_eq!(a.member_epoch, 1);
    let kept = owned(&a);
    assert_eq!(count(&kept), 2);
    let a = heartbeat(&mut c, "a", 1, Some(kept));
    assert_eq!(a.member_epoch, 2);
    let b = heartbeat(&mut c, "b", 2, Some(Vec::new()));
    assert_eq!(count(&owned(&b)), 2);

    // Fenced: an epoch from the future.
    assert_eq!(heartbeat(&mut c, "b", 9, Some(owned(&b))).error_code, 110);

    // A commit with an older member epoch is stale.
    let commit = |epoch: i32| {
        OffsetCommitRequest::default()
            .with_group_id(GroupId(s("g")))
            .with_generation_id_or_member_epoch(epoch)
            .with_member_id(s("b"))
            .with_topics(vec![
                offset_commit_request::OffsetCommitRequestTopic::default()
                    .with_name(TopicName(s("t")))
                    .with_partitions(vec![
                        offset_commit_request::OffsetCommitRequestPartition::default()
                            .with_partition_index(0)
                            .with_committed_offset(5),
                    ]),
            ])
    };
    let ok: OffsetCommitResponse = c.call(ApiKey::OffsetCommit, 7, &commit(2));
    assert_eq!(ok.topics[0].partitions[0].error_code, 0);
    let stale: OffsetCommitResponse = c.call(ApiKey::OffsetCommit, 7, &commit(1));
    assert_eq!(stale.topics[0].partitions[0].error_code, 113);

    let described: ConsumerGroupDescribeResponse = c.call(
        ApiKey::ConsumerGroupDescribe,
        1,
        &ConsumerGroupDescribeRequest::default()
            .with_group_ids(vec![GroupId(s("g")), GroupId(s("nope"))]),
    );
    let g = &described.groups[0];
    assert_eq!((g.error_code, g.group_state.as_str()), (0, "Stable"));
    assert_eq!((g.group_epoch, g.assignment_epoch), (2, 2));
    assert_eq!(g.assignor_name.as_str(), "uniform");
    assert_eq!(g.members.len(), 2);
    assert!(g.members.iter().all(|m| m.member_type == 1));
    assert_eq!(described.groups[1].error_code, 69);

    // ListGroups v5: the group's type; a classic DescribeGroups does not describe it.
    let listed: ListGroupsResponse = c.call(
        ApiKey::ListGroups,
        5,
        &ListGroupsRequest::default().with_types_filter(vec![s("consumer")]),
    );
    assert_eq!(listed.groups.len(), 1);
    assert_eq!(listed.groups[0].group_type.as_str(), "consumer");
    let classic: ListGroupsResponse = c.call(
        ApiKey::ListGroups,
        5,
        &ListGroupsRequest::default().with_types_filter(vec![s("classic")]),
    );
    assert!(classic.groups.is_empty());
    // DescribeGroups, as Kafka 4: `Dead` without an error before v6, GROUP_ID_NOT_FOUND
    // with a message from v6 (an admin client then asks ConsumerGroupDescribe).
    let describe = |c: &mut Client, version: i16| -> DescribeGroupsResponse {
        c.call(
            ApiKey::DescribeGroups,
            version,
            &DescribeGroupsRequest::default().with_groups(vec![GroupId(s("g"))]),
        )
    };
    for version in 0..=5 {
        let d = describe(&mut c, version);
        let g = &d.groups[0];
        assert_eq!(
            (g.error_code, g.group_state.as_str()),
            (0, "Dead"),
            "v{version}"
        );
        assert!(g.members.is_empty(), "v{version}");
    }
    let d = describe(&mut c, 6);
    let g = &d.groups[0];
    assert_eq!((g.error_code, g.group_state.as_str()), (69, "Dead"));
    assert_eq!(
        g.error_message.as_deref(),
        Some("Group g is not a classic group.")
    );
    let unknown: DescribeGroupsResponse = c.call(
        ApiKey::DescribeGroups,
        6,
        &DescribeGroupsRequest::default().with_groups(vec![GroupId(s("nope"))]),
    );
    assert_eq!(unknown.groups[0].error_code, 69);
    assert_eq!(
        unknown.groups[0].error_message.as_deref(),
        Some("Group nope not found.")
    );

    // b leaves; a gets everything back.
    let left = heartbeat(&mut c, "b", -1, None);
    assert_eq!((left.error_code, left.member_epoch), (0, -1));
    let a = heartbeat(&mut c, "a", 2, None);
    assert_eq!(a.member_epoch, 3);
    assert_eq!(count(&owned(&a)), 4);
}

/// OffsetFetch v8 asks for several groups at once, each answered on its own; v9 names
/// the member asking, whose epoch a consumer-protocol group checks (KIP-848).
#[test]
fn offset_fetch_v8_answers_groups_and_v9_checks_the_member_epoch() {
    let dir = tempfile::tempdir().unwrap();
    let server = start_without_initial_delay(dir.path());
    let mut c = Client::connect(server.local_addr());
    create_topic(&mut c, "t", 1);
    let a = heartbeat(&mut c, "a", 0, None);
    assert_eq!((a.error_code, a.member_epoch), (0, 1), "{a:?}");
    let commit = |group: &str, member: &str, epoch: i32, offset: i64| {
        OffsetCommitRequest::default()
            .with_group_id(GroupId(s(group)))
            .with_generation_id_or_member_epoch(epoch)
            .with_member_id(s(member))
            .with_topics(vec![
                offset_commit_request::OffsetCommitRequestTopic::default()
                    .with_name(TopicName(s("t")))
                    .with_partitions(vec![
                        offset_commit_request::OffsetCommitRequestPartition::default()
                            .with_partition_index(0)
                            .with_committed_offset(offset),
                    ]),
            ])
    };
    for (group, member, epoch, offset) in [("g", "a", 1, 5), ("classic", "", -1, 7)] {
        let r: OffsetCommitResponse = c.call(
            ApiKey::OffsetCommit,
            7,
            &commit(group, member, epoch, offset),
        );
        assert_eq!(r.topics[0].partitions[0].error_code, 0, "{group}");
    }
    let group = |id: &str, member: Option<&str>, epoch: i32| {
        offset_fetch_request::OffsetFetchRequestGroup::default()
            .with_group_id(GroupId(s(id)))
            .with_member_id(member.map(s))
            .with_member_epoch(epoch)
            .with_topics(Some(vec![
                offset_fetch_request::OffsetFetchRequestTopics::default()
                    .with_name(TopicName(s("t")))
                    .with_partition_indexes(vec![0]),
            ]))
    };
    let answers = |r: &OffsetFetchResponse| -> Vec<(String, i16, i64)> {
        r.groups
            .iter()
            .map(|g| {
                let offset = g
                    .topics
                    .first()
                    .and_then(|t| t.partitions.first())
                    .map_or(-2, |p| p.committed_offset);
                (g.group_id.0.to_string(), g.error_code, offset)
            })
            .collect()
    };
    // v8: three groups in one request, one of them unknown.
    let v8: OffsetFetchResponse = c.call(
        ApiKey::OffsetFetch,
        8,
        &OffsetFetchRequest::default().with_groups(vec![
            group("g", None, -1),
            group("classic", None, -1),
            group("nobody", None, -1),
        ]),
    );
    assert_eq!(
        answers(&v8),
        [
            ("g".to_string(), 0, 5),
            ("classic".to_string(), 0, 7),
            ("nobody".to_string(), 0, -1)
        ]
    );
    // v9: the member at its epoch; an older epoch, an unknown member, an admin client.
    let v9: OffsetFetchResponse = c.call(
        ApiKey::OffsetFetch,
        9,
        &OffsetFetchRequest::default().with_groups(vec![
            group("g", Some("a"), 1),
            group("g", Some("a"), 0),
            group("g", Some("zz"), 1),
            group("g", None, -1),
            group("classic", Some("anyone"), 3),
        ]),
    );
    assert_eq!(
        answers(&v9),
        [
            ("g".to_string(), 0, 5),
            ("g".to_string(), 113, -2),
            ("g".to_string(), 25, -2),
            ("g".to_string(), 0, 5),
            ("classic".to_string(), 0, 7)
        ]
    );
}

/// IncrementalAlterConfigs of group `group`: SET `key` to `value`; the error code and
/// message.
pub(super) fn alter_group_config(
    c: &mut Client,
    group: &str,
    key: &str,
    value: &str,
) -> (i16, String) {
    let req = IncrementalAlterConfigsRequest::default().with_resources(vec![
        incremental_alter_configs_request::AlterConfigsResource::default()
            .with_resource_type(32)
            .with_resource_name(s(group))
            .with_configs(vec![
                incremental_alter_configs_request::AlterableConfig::default()
                    .with_name(s(key))
                    .with_config_operation(0)
                    .with_value(Some(s(value))),
            ]),
    ]);
    let r: IncrementalAlterConfigsResponse = c.call(ApiKey::IncrementalAlterConfigs, 1, &req);
    let r = &r.responses[0];
    let message = r.error_message.as_deref().unwrap_or("").to_string();
    (r.error_code, message)
}

/// IncrementalAlterConfigs of a group config is checked against the broker's bounds
/// (`group.consumer.min/max.*`), not Kafka's defaults; INVALID_CONFIG names the bound.
#[test]
fn group_configs_are_bounded_by_the_brokers_settings() {
    use std::time::Duration;
    let dir = tempfile::tempdir().unwrap();
    let broker = crate::broker::Broker::builder(dir.path())
        .group_consumer_session_timeout_bounds(Duration::from_secs(10), Duration::from_secs(90))
        .group_consumer_heartbeat_interval_bounds(Duration::from_secs(1), Duration::from_secs(3))
        .open()
        .unwrap();
    let server = crate::server::Server::builder(broker)
        .listen(std::net::SocketAddr::from(([127, 0, 0, 1], 0)))
        .start()
        .unwrap();
    let mut c = Client::connect(server.local_addr());
    let mut set = |key: &str, value: &str| alter_group_config(&mut c, "g", key, value);
    // Allowed here, outside Kafka's default bounds.
    assert_eq!(set("consumer.session.timeout.ms", "10000").0, 0);
    assert_eq!(set("consumer.heartbeat.interval.ms", "1000").0, 0);
    let (code, message) = set("consumer.session.timeout.ms", "90001");
    assert_eq!(code, 40, "{message}");
    assert!(
        message.contains("group.consumer.max.session.timeout.ms (90000)"),
        "{message}"
    );
    let (code, message) = set("consumer.heartbeat.interval.ms", "999");
    assert_eq!(code, 40, "{message}");
    assert!(
        message.contains("group.consumer.min.heartbeat.interval.ms (1000)"),
        "{message}"
    );
}

/// ConsumerGroupDescribe v1 tells a classic member of a consumer group (member type 0)
/// from a consumer-protocol one (1), KIP-1099.
#[test]
fn consumer_group_describe_gives_each_members_type() {
    let dir = tempfile::tempdir().unwrap();
    let server = start_without_initial_delay(dir.path());
    let mut c = Client::connect(server.local_addr());
    create_topic(&mut c, "t", 4);
    let a = heartbeat(&mut c, "a", 0, None);
    assert_eq!(a.error_code, 0, "{a:?}");
    let sub = crate::consumer::Subscription {
        topics: vec!["t".into()],
        ..Default::default()
    };
    let join = JoinGroupRequest::default()
        .with_group_id(GroupId(s("g")))
        .with_session_timeout_ms(30_000)
        .with_rebalance_timeout_ms(30_000)
        .with_protocol_type(s("consumer"))
        .with_protocols(vec![
            join_group_request::JoinGroupRequestProtocol::default()
                .with_name(s("range"))
                .with_metadata(bytes::Bytes::from(sub.encode())),
        ]);
    let mut joined: JoinGroupResponse = c.call(ApiKey::JoinGroup, 5, &join);
    if joined.error_code == 79 {
        let again = join.with_member_id(joined.member_id.clone());
        joined = c.call(ApiKey::JoinGroup, 5, &again);
    }
    assert_eq!(joined.error_code, 0, "{joined:?}");
    let described: ConsumerGroupDescribeResponse = c.call(
        ApiKey::ConsumerGroupDescribe,
        1,
        &ConsumerGroupDescribeRequest::default().with_group_ids(vec![GroupId(s("g"))]),
    );
    let mut types: Vec<(String, i8)> = described.groups[0]
        .members
        .iter()
        .map(|m| (m.member_id.to_string(), m.member_type))
        .collect();
    types.sort();
    let mut expected = vec![("a".to_string(), 1), (joined.member_id.to_string(), 0)];
    expected.sort();
    assert_eq!(types, expected);
}
