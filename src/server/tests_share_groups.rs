//! Share groups (KIP-932) over a real socket: ShareGroupHeartbeat, ShareGroupDescribe
//! and the share session errors of ShareFetch and ShareAcknowledge, with requests
//! encoded and responses decoded by `kafka-protocol`.

use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

use super::tests_api::{Client, create as create_topic};
use super::tests_groups::start_without_initial_delay;

pub(super) fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn fetch(c: &mut Client, epoch: i32) -> ShareFetchResponse {
    let req = ShareFetchRequest::default()
        .with_group_id(Some(GroupId(s("sg"))))
        .with_member_id(Some(s("m1")))
        .with_share_session_epoch(epoch)
        .with_max_wait_ms(0)
        .with_max_bytes(1 << 20)
        .with_max_records(10);
    c.call(ApiKey::ShareFetch, 1, &req)
}

#[test]
fn a_share_member_joins_is_described_and_its_session_checks_epochs() {
    let dir = tempfile::tempdir().unwrap();
    let server = start_without_initial_delay(dir.path());
    let mut c = Client::connect(server.local_addr());
    create_topic(&mut c, "t", 2);

    let join = ShareGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s("sg")))
        .with_member_id(s("m1"))
        .with_member_epoch(0)
        .with_subscribed_topic_names(Some(vec![TopicName(s("t"))]));
    let joined: ShareGroupHeartbeatResponse = c.call(ApiKey::ShareGroupHeartbeat, 1, &join);
    assert_eq!(joined.error_code, 0, "{:?}", joined.error_message);
    assert_eq!(
        (joined.member_epoch, joined.heartbeat_interval_ms),
        (1, 5000)
    );
    let assigned = &joined.assignment.as_ref().unwrap().topic_partitions;
    assert_eq!(assigned[0].partitions, vec![0, 1]);
    let fenced = join.clone().with_member_epoch(9);
    let fenced: ShareGroupHeartbeatResponse = c.call(ApiKey::ShareGroupHeartbeat, 1, &fenced);
    assert_eq!(fenced.error_code, 110);

    let described: ShareGroupDescribeResponse = c.call(
        ApiKey::ShareGroupDescribe,
        1,
        &ShareGroupDescribeRequest::default()
            .with_group_ids(vec![GroupId(s("sg")), GroupId(s("nope"))]),
    );
    let g = &described.groups[0];
    assert_eq!((g.error_code, g.group_state.as_str()), (0, "Stable"));
    assert_eq!(g.members[0].member_id.as_str(), "m1");
    assert_eq!(g.assignor_name.as_str(), "simple");
    assert_eq!(described.groups[1].error_code, 69);

    // No session yet: SHARE_SESSION_NOT_FOUND; epoch 0 opens one, then 1 is next.
    assert_eq!(fetch(&mut c, 1).error_code, 122);
    assert_eq!(fetch(&mut c, 0).error_code, 0);
    assert_eq!(fetch(&mut c, 5).error_code, 123);
    assert_eq!(fetch(&mut c, 1).error_code, 0);
    let ack: ShareAcknowledgeResponse = c.call(
        ApiKey::ShareAcknowledge,
        1,
        &ShareAcknowledgeRequest::default()
            .with_group_id(Some(GroupId(s("sg"))))
            .with_member_id(Some(s("m1")))
            .with_share_session_epoch(3),
    );
    assert_eq!(ack.error_code, 123);
}

#[test]
fn list_groups_and_describe_groups_report_share_groups() {
    let dir = tempfile::tempdir().unwrap();
    let server = start_without_initial_delay(dir.path());
    let mut c = Client::connect(server.local_addr());
    create_topic(&mut c, "t", 1);
    let join = ShareGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s("sg")))
        .with_member_id(s("m1"))
        .with_member_epoch(0)
        .with_subscribed_topic_names(Some(vec![TopicName(s("t"))]));
    let joined: ShareGroupHeartbeatResponse = c.call(ApiKey::ShareGroupHeartbeat, 1, &join);
    assert_eq!(joined.error_code, 0, "{:?}", joined.error_message);
    // A classic group next to it.
    let commit = OffsetCommitRequest::default()
        .with_group_id(GroupId(s("classic")))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![
            offset_commit_request::OffsetCommitRequestTopic::default()
                .with_name(TopicName(s("t")))
                .with_partitions(vec![
                    offset_commit_request::OffsetCommitRequestPartition::default()
                        .with_partition_index(0)
                        .with_committed_offset(0),
                ]),
        ]);
    let committed: OffsetCommitResponse = c.call(ApiKey::OffsetCommit, 8, &commit);
    assert_eq!(committed.topics[0].partitions[0].error_code, 0);

    let list = |c: &mut Client,
                types: &[&str],
                states: &[&str]|
     -> Vec<(String, String, String, String)> {
        let r: ListGroupsResponse = c.call(
            ApiKey::ListGroups,
            5,
            &ListGroupsRequest::default()
                .with_types_filter(types.iter().map(|t| s(t)).collect())
                .with_states_filter(states.iter().map(|t| s(t)).collect()),
        );
        assert_eq!(r.error_code, 0);
        let mut out: Vec<_> = r
            .groups
            .iter()
            .map(|g| {
                (
                    g.group_id.to_string(),
                    g.group_type.to_string(),
                    g.protocol_type.to_string(),
                    g.group_state.to_string(),
                )
            })
            .collect();
        out.sort();
        out
    };
    let share = (
        "sg".to_string(),
        "share".to_string(),
        "share".to_string(),
        "Stable".to_string(),
    );
    let all = list(&mut c, &[], &[]);
    assert!(all.contains(&share), "{all:?}");
    assert!(all.iter().any(|g| g.0 == "classic"), "{all:?}");
    assert_eq!(list(&mut c, &["share"], &[]), vec![share.clone()]);
    assert_eq!(list(&mut c, &["Share"], &["stable"]), vec![share.clone()]);
    assert!(list(&mut c, &["share"], &["Empty"]).is_empty());
    assert!(
        list(&mut c, &["classic"], &[])
            .iter()
            .all(|g| g.1 == "classic")
    );

    let described: DescribeGroupsResponse = c.call(
        ApiKey::DescribeGroups,
        6,
        &DescribeGroupsRequest::default().with_groups(vec![GroupId(s("sg"))]),
    );
    assert_eq!(described.groups[0].error_code, 69);

    // Its member leaves: the group is listed Empty.
    let leave = join.with_member_epoch(-1);
    let left: ShareGroupHeartbeatResponse = c.call(ApiKey::ShareGroupHeartbeat, 1, &leave);
    assert_eq!(left.error_code, 0);
    let empty = (
        "sg".to_string(),
        "share".to_string(),
        "share".to_string(),
        "Empty".to_string(),
    );
    assert_eq!(list(&mut c, &["share"], &[]), vec![empty]);
}

/// ShareFetch of q-0 (topic id `id`) for `member` of `group` at `epoch`, waiting up to
/// `wait_ms`: the acquired offsets with their delivery counts.
fn share_fetch_q(
    c: &mut Client,
    group: &str,
    id: [u8; 16],
    member: &str,
    epoch: i32,
    wait_ms: i32,
) -> Vec<(i64, i16)> {
    share_fetch_q_bytes(c, (group, member), id, epoch, wait_ms, 1 << 20)
}

/// [`share_fetch_q`] reading at most `max_bytes` (at least one batch).
pub(super) fn share_fetch_q_bytes(
    c: &mut Client,
    (group, member): (&str, &str),
    id: [u8; 16],
    epoch: i32,
    wait_ms: i32,
    max_bytes: i32,
) -> Vec<(i64, i16)> {
    share_fetch_q_limited(c, (group, member), id, (epoch, wait_ms), (max_bytes, 10))
}

/// [`share_fetch_q`] at `epoch`, waiting up to `wait_ms`, reading at most `max_bytes`
/// (at least one batch) and asking for at most `max_records` records.
fn share_fetch_q_limited(
    c: &mut Client,
    (group, member): (&str, &str),
    id: [u8; 16],
    (epoch, wait_ms): (i32, i32),
    (max_bytes, max_records): (i32, i32),
) -> Vec<(i64, i16)> {
    let req = ShareFetchRequest::default()
        .with_group_id(Some(GroupId(s(group))))
        .with_member_id(Some(s(member)))
        .with_share_session_epoch(epoch)
        .with_max_wait_ms(wait_ms)
        .with_max_bytes(max_bytes)
        .with_max_records(max_records)
        .with_topics(vec![
            share_fetch_request::FetchTopic::default()
                .with_topic_id(uuid::Uuid::from_bytes(id))
                .with_partitions(vec![
                    share_fetch_request::FetchPartition::default()
                        .with_partition_index(0)
                        .with_partition_max_bytes(1 << 20),
                ]),
        ]);
    let r: ShareFetchResponse = c.call(ApiKey::ShareFetch, 1, &req);
    assert_eq!(r.error_code, 0, "{:?}", r.error_message);
    let mut out = Vec::new();
    for p in r.responses.iter().flat_map(|t| &t.partitions) {
        assert_eq!(p.error_code, 0, "{:?}", p.error_message);
        for a in &p.acquired_records {
            out.extend((a.first_offset..=a.last_offset).map(|o| (o, a.delivery_count)));
        }
    }
    out
}

#[test]
fn a_waiting_share_fetch_is_answered_by_an_append_and_by_a_release() {
    let dir = tempfile::tempdir().unwrap();
    let server = start_without_initial_delay(dir.path());
    let addr = server.local_addr();
    let mut c = Client::connect(addr);
    super::tests_api::create(&mut c, "q", 1);
    let id = super::tests_api::topic_ids(&mut c, &["q"])[0].1;
    let mut m1 = Client::connect(addr);
    let mut m2 = Client::connect(addr);
    for m in ["m1", "m2"] {
        let join = ShareGroupHeartbeatRequest::default()
            .with_group_id(GroupId(s("waiters")))
            .with_member_id(s(m))
            .with_member_epoch(0)
            .with_subscribed_topic_names(Some(vec![TopicName(s("q"))]));
        let joined: ShareGroupHeartbeatResponse = c.call(ApiKey::ShareGroupHeartbeat, 1, &join);
        assert_eq!(joined.error_code, 0, "{:?}", joined.error_message);
    }
    // Sessions open; the share-partition starts at the (empty) log's end.
    assert!(share_fetch_q(&mut m1, "waiters", id, "m1", 0, 0).is_empty());
    assert!(share_fetch_q(&mut m2, "waiters", id, "m2", 0, 0).is_empty());

    // m1 waits; records appended meanwhile answer it.
    let waiting = std::thread::spawn(move || {
        let got = share_fetch_q(&mut m1, "waiters", id, "m1", 1, 60_000);
        (m1, got)
    });
    let produced: ProduceResponse = c.call(
        ApiKey::Produce,
        8,
        &super::tests_api::produce_req(
            -1,
            vec![("q", 0, super::tests_api::batch(&["a", "b", "c"]))],
        ),
    );
    assert_eq!(produced.responses[0].partition_responses[0].error_code, 0);
    let (mut m1, got) = waiting.join().unwrap();
    assert_eq!(got, vec![(0, 1), (1, 1), (2, 1)]);

    // m2 waits (m1 holds everything); m1 releasing its records answers it.
    let waiting =
        std::thread::spawn(move || share_fetch_q(&mut m2, "waiters", id, "m2", 1, 60_000));
    let released: ShareAcknowledgeResponse = m1.call(
        ApiKey::ShareAcknowledge,
        1,
        &ShareAcknowledgeRequest::default()
            .with_group_id(Some(GroupId(s("waiters"))))
            .with_member_id(Some(s("m1")))
            .with_share_session_epoch(2)
            .with_topics(vec![
                share_acknowledge_request::AcknowledgeTopic::default()
                    .with_topic_id(uuid::Uuid::from_bytes(id))
                    .with_partitions(vec![
                        share_acknowledge_request::AcknowledgePartition::default()
                            .with_partition_index(0)
                            .with_acknowledgement_batches(vec![
                                share_acknowledge_request::AcknowledgementBatch::default()
                                    .with_first_offset(0)
                                    .with_last_offset(2)
                                    .with_acknowledge_types(vec![2]),
                            ]),
                    ]),
            ]),
    );
    assert_eq!(released.error_code, 0);
    assert_eq!(released.responses[0].partitions[0].error_code, 0);
    assert_eq!(waiting.join().unwrap(), vec![(0, 2), (1, 2), (2, 2)]);
}

/// A gap in an acknowledgement (type 0: an acquired offset at which the client found
/// no record) is archived, as Kafka archives it: the share-partition moves on over it
/// instead of holding it until its lock expires and delivering it again.
#[test]
fn an_acknowledged_gap_is_archived() {
    let (_dir, _server, mut c, id) = serving_q();
    produce_two(&mut c);
    assert_eq!(
        set_group_config(&mut c, "gaps", "share.auto.offset.reset", "earliest"),
        0
    );
    join_q(&mut c, "gaps");
    assert_eq!(
        share_fetch_q(&mut c, "gaps", id, "m1", 0, 0),
        vec![(0, 1), (1, 1)]
    );
    // Offset 0 accepted, offset 1 a gap.
    assert_eq!(
        acknowledge_q(&mut c, ("gaps", "m1"), id, 1, Some((0, 1, &[1, 0]))),
        (0, Some(0))
    );
    // Both complete: the start offset is past them.
    let described = describe_offsets(&mut c, "gaps").unwrap();
    assert_eq!((described[0].0, described[0].1), (0, 2));
}

/// A server with topic q (one partition): its data directory, the server, a client,
/// and q's topic id.
pub(super) fn serving_q() -> (
    tempfile::TempDir,
    crate::server::ServerHandle,
    Client,
    [u8; 16],
) {
    let dir = tempfile::tempdir().unwrap();
    let server = start_without_initial_delay(dir.path());
    let mut c = Client::connect(server.local_addr());
    create_topic(&mut c, "q", 1);
    let id = super::tests_api::topic_ids(&mut c, &["q"])[0].1;
    (dir, server, c, id)
}

/// IncrementalAlterConfigs of group `group`: SET `key` to `value`; the error code.
fn set_group_config(c: &mut Client, group: &str, key: &str, value: &str) -> i16 {
    super::tests_consumer_groups::alter_group_config(c, group, key, value).0
}

/// DescribeConfigs of group `group`'s `key`: its value and source.
fn describe_group_config(c: &mut Client, group: &str, key: &str) -> (Option<String>, i8) {
    let described: DescribeConfigsResponse = c.call(
        ApiKey::DescribeConfigs,
        4,
        &DescribeConfigsRequest::default().with_resources(vec![
            describe_configs_request::DescribeConfigsResource::default()
                .with_resource_type(32)
                .with_resource_name(s(group))
                .with_configuration_keys(None),
        ]),
    );
    let result = &described.results[0];
    assert_eq!(result.error_code, 0, "{:?}", result.error_message);
    let e = result
        .configs
        .iter()
        .find(|e| e.name.as_str() == key)
        .expect(key);
    (e.value.as_ref().map(|v| v.to_string()), e.config_source)
}

/// ShareGroupHeartbeat: member m1 joins `group`, subscribed to q; the answer.
fn join_q(c: &mut Client, group: &str) -> ShareGroupHeartbeatResponse {
    let join = ShareGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_member_id(s("m1"))
        .with_member_epoch(0)
        .with_subscribed_topic_names(Some(vec![TopicName(s("q"))]));
    let joined: ShareGroupHeartbeatResponse = c.call(ApiKey::ShareGroupHeartbeat, 1, &join);
    assert_eq!(joined.error_code, 0, "{:?}", joined.error_message);
    joined
}

#[test]
fn a_group_set_to_earliest_reads_what_was_produced_before_it_joined() {
    let (dir, server, mut c, id) = serving_q();
    produce_two(&mut c);

    // Kafka's bounds and values: INVALID_CONFIG; then `early` reads from the start.
    assert_eq!(
        set_group_config(&mut c, "early", "share.record.lock.duration.ms", "1"),
        40
    );
    assert_eq!(
        set_group_config(&mut c, "early", "share.auto.offset.reset", "soon"),
        40
    );
    assert_eq!(set_group_config(&mut c, "early", "no.such.config", "1"), 40);
    assert_eq!(
        set_group_config(&mut c, "early", "share.auto.offset.reset", "earliest"),
        0
    );
    let mut entry = |k: &str| describe_group_config(&mut c, "early", k);
    assert_eq!(
        entry("share.auto.offset.reset"),
        (Some("earliest".into()), 8)
    );
    assert_eq!(
        entry("share.record.lock.duration.ms"),
        (Some("30000".into()), 5)
    );
    assert_eq!(
        entry("consumer.session.timeout.ms"),
        (Some("45000".into()), 5)
    );

    // A new server on the same directory keeps the setting: `early` (earliest) acquires
    // the two records produced before it joined, `late` (latest, the default) none.
    server.shutdown().unwrap();
    let server = start_without_initial_delay(dir.path());
    let mut c = Client::connect(server.local_addr());
    for (group, expected) in [("early", vec![(0, 1), (1, 1)]), ("late", vec![])] {
        join_q(&mut c, group);
        assert_eq!(
            share_fetch_q(&mut c, group, id, "m1", 0, 0),
            expected,
            "{group}"
        );
    }
}

#[test]
fn heartbeats_answer_the_groups_own_intervals() {
    let dir = tempfile::tempdir().unwrap();
    let server = start_without_initial_delay(dir.path());
    let mut c = Client::connect(server.local_addr());
    create_topic(&mut c, "q", 1);
    let key = "consumer.heartbeat.interval.ms";
    assert_eq!(set_group_config(&mut c, "tuned", key, "7000"), 0);
    let key = "share.heartbeat.interval.ms";
    assert_eq!(set_group_config(&mut c, "tuned-share", key, "12000"), 0);
    for (group, expected) in [("tuned", 7000), ("plain", 5000)] {
        let join = ConsumerGroupHeartbeatRequest::default()
            .with_group_id(GroupId(s(group)))
            .with_member_id(s("m1"))
            .with_member_epoch(0)
            .with_rebalance_timeout_ms(30_000)
            .with_subscribed_topic_names(Some(vec![TopicName(s("q"))]))
            .with_topic_partitions(Some(Vec::new()));
        let r: ConsumerGroupHeartbeatResponse = c.call(ApiKey::ConsumerGroupHeartbeat, 1, &join);
        assert_eq!(r.error_code, 0, "{:?}", r.error_message);
        assert_eq!(r.heartbeat_interval_ms, expected, "{group}");
    }
    for (group, expected) in [("tuned-share", 12000), ("plain-share", 5000)] {
        let r = join_q(&mut c, group);
        assert_eq!(r.heartbeat_interval_ms, expected, "{group}");
    }
}

/// DescribeShareGroupOffsets of q-0 and q-9 of `group`: (error code, start offset,
/// leader epoch) of each, or the group's error code.
fn describe_offsets(c: &mut Client, group: &str) -> Result<Vec<(i16, i64, i32)>, i16> {
    let req = DescribeShareGroupOffsetsRequest::default().with_groups(vec![
        describe_share_group_offsets_request::DescribeShareGroupOffsetsRequestGroup::default()
            .with_group_id(GroupId(s(group)))
            .with_topics(Some(vec![
                describe_share_group_offsets_request::DescribeShareGroupOffsetsRequestTopic::default()
                    .with_topic_name(TopicName(s("q")))
                    .with_partitions(vec![0, 9]),
            ])),
    ]);
    let r: DescribeShareGroupOffsetsResponse = c.call(ApiKey::DescribeShareGroupOffsets, 0, &req);
    let g = &r.groups[0];
    if g.error_code != 0 {
        return Err(g.error_code);
    }
    Ok(g.topics[0]
        .partitions
        .iter()
        .map(|p| (p.error_code, p.start_offset, p.leader_epoch))
        .collect())
}

/// AlterShareGroupOffsets of `group`'s q-`partition` to `offset`: the top-level and the
/// partition's error code (none when the answer has no partition).
fn alter_offset(c: &mut Client, group: &str, partition: i32, offset: i64) -> (i16, Option<i16>) {
    let req = AlterShareGroupOffsetsRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_topics(vec![
            alter_share_group_offsets_request::AlterShareGroupOffsetsRequestTopic::default()
                .with_topic_name(TopicName(s("q")))
                .with_partitions(vec![
                    alter_share_group_offsets_request::AlterShareGroupOffsetsRequestPartition::default()
                        .with_partition_index(partition)
                        .with_start_offset(offset),
                ]),
        ]);
    let r: AlterShareGroupOffsetsResponse = c.call(ApiKey::AlterShareGroupOffsets, 0, &req);
    let codes = |t: &alter_share_group_offsets_response::AlterShareGroupOffsetsResponseTopic| {
        t.partitions
            .iter()
            .map(|p| p.error_code)
            .collect::<Vec<i16>>()
    };
    let partitions = r.responses.iter().flat_map(codes).collect::<Vec<i16>>();
    assert!(partitions.len() <= 1, "{partitions:?}");
    (r.error_code, partitions.first().copied())
}

/// DeleteShareGroupOffsets of `group`'s `topic`: the top-level and the topic's code
/// (none when the answer has no topic).
fn delete_offsets(c: &mut Client, group: &str, topic: &str) -> (i16, Option<i16>) {
    let req = DeleteShareGroupOffsetsRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_topics(vec![
            delete_share_group_offsets_request::DeleteShareGroupOffsetsRequestTopic::default()
                .with_topic_name(TopicName(s(topic))),
        ]);
    let r: DeleteShareGroupOffsetsResponse = c.call(ApiKey::DeleteShareGroupOffsets, 0, &req);
    assert!(r.responses.len() <= 1, "{:?}", r.responses);
    (r.error_code, r.responses.first().map(|t| t.error_code))
}

#[test]
fn share_group_offsets_are_described_altered_and_deleted_over_the_wire() {
    let (_dir, _server, mut c, id) = serving_q();
    let versions: ApiVersionsResponse =
        c.call(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
    for key in [90, 91, 92] {
        let api = versions.api_keys.iter().find(|k| k.api_key == key);
        assert_eq!(
            api.map(|a| (a.min_version, a.max_version)),
            Some((0, 0)),
            "{key}"
        );
    }
    assert_eq!(describe_offsets(&mut c, "sg"), Err(69), "no such group");

    let join = ShareGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s("sg")))
        .with_member_id(s("m1"))
        .with_member_epoch(0)
        .with_subscribed_topic_names(Some(vec![TopicName(s("q"))]));
    let joined: ShareGroupHeartbeatResponse = c.call(ApiKey::ShareGroupHeartbeat, 1, &join);
    assert_eq!(joined.error_code, 0, "{:?}", joined.error_message);
    produce_two(&mut c);
    // The share-partition starts at the log's end (latest): 2; partition 9 does not
    // exist.
    assert!(share_fetch_q(&mut c, "sg", id, "m1", 0, 0).is_empty());
    assert_eq!(
        describe_offsets(&mut c, "sg"),
        Ok(vec![(0, 2, 0), (3, -1, -1)])
    );
    // With a member: NON_EMPTY_GROUP, at the top level alone (Kafka's error response).
    assert_eq!(alter_offset(&mut c, "sg", 0, 0), (68, None));
    assert_eq!(delete_offsets(&mut c, "sg", "q"), (68, None));

    let left: ShareGroupHeartbeatResponse = c.call(
        ApiKey::ShareGroupHeartbeat,
        1,
        &join.clone().with_member_epoch(-1),
    );
    assert_eq!(left.error_code, 0);
    assert_eq!(alter_offset(&mut c, "sg", 9, 0), (0, Some(3)));
    assert_eq!(alter_offset(&mut c, "sg", 0, -4), (0, Some(42)));
    assert_eq!(alter_offset(&mut c, "nope", 0, 0), (69, None));
    assert_eq!(alter_offset(&mut c, "sg", 0, 0), (0, Some(0)));
    assert_eq!(
        describe_offsets(&mut c, "sg"),
        Ok(vec![(0, 0, 0), (3, -1, -1)])
    );
    // The member back reads from 0: the two records produced before.
    let joined: ShareGroupHeartbeatResponse = c.call(ApiKey::ShareGroupHeartbeat, 1, &join);
    assert_eq!(joined.error_code, 0, "{:?}", joined.error_message);
    assert_eq!(
        share_fetch_q(&mut c, "sg", id, "m1", 0, 0),
        vec![(0, 1), (1, 1)]
    );
    let left: ShareGroupHeartbeatResponse = c.call(
        ApiKey::ShareGroupHeartbeat,
        1,
        &join.clone().with_member_epoch(-1),
    );
    assert_eq!(left.error_code, 0);

    assert_eq!(delete_offsets(&mut c, "sg", "nope"), (0, Some(3)));
    assert_eq!(delete_offsets(&mut c, "sg", "q"), (0, Some(0)));
    // Nothing left of the group: GROUP_ID_NOT_FOUND.
    assert_eq!(describe_offsets(&mut c, "sg"), Err(69));
}

/// ShareFetch of partition 0 of each of `topics` (name, id) at session epoch 0 for
/// `member` of `group`: no error, so each share-partition has a state afterwards.
fn share_fetch_all(c: &mut Client, group: &str, member: &str, topics: &[[u8; 16]]) {
    let req = ShareFetchRequest::default()
        .with_group_id(Some(GroupId(s(group))))
        .with_member_id(Some(s(member)))
        .with_share_session_epoch(0)
        .with_max_wait_ms(0)
        .with_max_bytes(1 << 20)
        .with_max_records(10)
        .with_topics(
            topics
                .iter()
                .map(|id| {
                    share_fetch_request::FetchTopic::default()
                        .with_topic_id(uuid::Uuid::from_bytes(*id))
                        .with_partitions(vec![
                            share_fetch_request::FetchPartition::default()
                                .with_partition_index(0)
                                .with_partition_max_bytes(1 << 20),
                        ])
                })
                .collect(),
        );
    let r: ShareFetchResponse = c.call(ApiKey::ShareFetch, 1, &req);
    assert_eq!(r.error_code, 0, "{:?}", r.error_message);
    for p in r.responses.iter().flat_map(|t| &t.partitions) {
        assert_eq!(p.error_code, 0, "{:?}", p.error_message);
    }
}

/// DescribeShareGroupOffsets of `group` (partition 0 of each of `topics`, or every
/// share-partition with `None`): the group's error code, and each topic's name, id and
/// its partitions' (error code, start offset).
#[allow(clippy::type_complexity)]
fn describe_topics(
    c: &mut Client,
    group: &str,
    topics: Option<&[&str]>,
) -> (i16, Vec<(String, uuid::Uuid, Vec<(i16, i64)>)>) {
    use describe_share_group_offsets_request::{
        DescribeShareGroupOffsetsRequestGroup as G, DescribeShareGroupOffsetsRequestTopic as T,
    };
    let topics = topics.map(|ts| {
        ts.iter()
            .map(|t| {
                T::default()
                    .with_topic_name(TopicName(s(t)))
                    .with_partitions(vec![0])
            })
            .collect()
    });
    let req = DescribeShareGroupOffsetsRequest::default().with_groups(vec![
        G::default()
            .with_group_id(GroupId(s(group)))
            .with_topics(topics),
    ]);
    let r: DescribeShareGroupOffsetsResponse = c.call(ApiKey::DescribeShareGroupOffsets, 0, &req);
    let g = &r.groups[0];
    let mut out: Vec<_> = g
        .topics
        .iter()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|p| (p.error_code, p.start_offset))
                .collect();
            (t.topic_name.0.to_string(), t.topic_id, partitions)
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    (g.error_code, out)
}

/// AlterShareGroupOffsets of partition 0 of each of `topics` of `group` to offset 0:
/// the top-level code and each topic's (name, partition code).
fn alter_topics(c: &mut Client, group: &str, topics: &[&str]) -> (i16, Vec<(String, i16)>) {
    use alter_share_group_offsets_request::{
        AlterShareGroupOffsetsRequestPartition as P, AlterShareGroupOffsetsRequestTopic as T,
    };
    let req = AlterShareGroupOffsetsRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_topics(
            topics
                .iter()
                .map(|t| {
                    T::default()
                        .with_topic_name(TopicName(s(t)))
                        .with_partitions(vec![P::default().with_partition_index(0)])
                })
                .collect(),
        );
    let r: AlterShareGroupOffsetsResponse = c.call(ApiKey::AlterShareGroupOffsets, 0, &req);
    let mut out: Vec<_> = r
        .responses
        .iter()
        .map(|t| (t.topic_name.0.to_string(), t.partitions[0].error_code))
        .collect();
    out.sort();
    (r.error_code, out)
}

/// DeleteShareGroupOffsets of `topics` of `group`: the top-level code and each topic's
/// (name, id, code).
fn delete_topics(
    c: &mut Client,
    group: &str,
    topics: &[&str],
) -> (i16, Vec<(String, uuid::Uuid, i16)>) {
    let req = DeleteShareGroupOffsetsRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_topics(
            topics
                .iter()
                .map(|t| {
                    delete_share_group_offsets_request::DeleteShareGroupOffsetsRequestTopic::default()
                        .with_topic_name(TopicName(s(t)))
                })
                .collect(),
        );
    let r: DeleteShareGroupOffsetsResponse = c.call(ApiKey::DeleteShareGroupOffsets, 0, &req);
    let mut out: Vec<_> = r
        .responses
        .iter()
        .map(|t| (t.topic_name.0.to_string(), t.topic_id, t.error_code))
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    (r.error_code, out)
}

/// With the authorizer on, the share-group offsets APIs check the ACLs Kafka's broker
/// checks: Describe on the group and on each topic for DescribeShareGroupOffsets, Read
/// on the group and on each topic for AlterShareGroupOffsets, Delete on the group and
/// Read on each topic for DeleteShareGroupOffsets. A group refused answers
/// GROUP_AUTHORIZATION_FAILED whether it exists or not; a topic refused answers
/// TOPIC_AUTHORIZATION_FAILED for its partitions, with no topic id (Kafka's zero id)
/// where Kafka gives none, and is left out of a describe of every share-partition.
#[test]
fn share_group_offsets_apis_check_kafkas_acls() {
    use super::tests_security::{binding, broker, create_acls, login, sasl_server};
    use crate::security::acl::{
        AclOperation as Op, AclPermission as Perm, PatternType::Literal, ResourceType,
    };
    use ResourceType::{Group, Topic};
    let (_dir, broker) = broker(
        &["q", "r"],
        &[
            ("admin", "a"),
            ("viewer", "v"),
            ("operator", "o"),
            ("nobody", "n"),
        ],
    );
    let server = sasl_server(broker, true);
    let addr = server.local_addr();
    let mut admin = login(addr, "PLAIN", "admin", "a").unwrap();
    let ids: Vec<[u8; 16]> = super::tests_api::topic_ids(&mut admin, &["q", "r"])
        .into_iter()
        .map(|(code, id)| {
            assert_eq!(code, 0);
            id
        })
        .collect();
    let join = ShareGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s("sg")))
        .with_member_id(s("m1"))
        .with_member_epoch(0)
        .with_subscribed_topic_names(Some(vec![TopicName(s("q")), TopicName(s("r"))]));
    let joined: ShareGroupHeartbeatResponse = admin.call(ApiKey::ShareGroupHeartbeat, 1, &join);
    assert_eq!(joined.error_code, 0, "{:?}", joined.error_message);
    share_fetch_all(&mut admin, "sg", "m1", &ids);
    let left: ShareGroupHeartbeatResponse = admin.call(
        ApiKey::ShareGroupHeartbeat,
        1,
        &join.clone().with_member_epoch(-1),
    );
    assert_eq!(left.error_code, 0);
    let allow =
        |kind, name: &str, who: &str, op| binding(kind, name, Literal, who, op, Perm::Allow);
    create_acls(
        &mut admin,
        vec![
            // viewer: Describe on the group, Read (which implies Describe) on q only.
            allow(Group, "sg", "User:viewer", Op::Describe),
            allow(Topic, "q", "User:viewer", Op::Read),
            // operator: Read and Delete on the group, Read on q, Describe only on r.
            allow(Group, "sg", "User:operator", Op::Read),
            allow(Group, "sg", "User:operator", Op::Delete),
            allow(Topic, "q", "User:operator", Op::Read),
            allow(Topic, "r", "User:operator", Op::Describe),
            // nobody: Read on both topics, nothing on the group.
            allow(Topic, "q", "User:nobody", Op::Read),
            allow(Topic, "r", "User:nobody", Op::Read),
        ],
    );
    let (gaf, taf) = (30, 29);
    let zero = uuid::Uuid::nil();
    let (q, r) = (
        uuid::Uuid::from_bytes(ids[0]),
        uuid::Uuid::from_bytes(ids[1]),
    );

    let mut nobody = login(addr, "PLAIN", "nobody", "n").unwrap();
    assert_eq!(
        describe_topics(&mut nobody, "sg", Some(&["q"])),
        (gaf, vec![])
    );
    assert_eq!(describe_topics(&mut nobody, "sg", None), (gaf, vec![]));
    assert_eq!(
        describe_topics(&mut nobody, "no-such-group", None).0,
        gaf,
        "refused before it is looked up"
    );
    // Refused on the group: the top-level code alone, no topic (Kafka's shape).
    assert_eq!(alter_topics(&mut nobody, "sg", &["q"]), (gaf, vec![]));
    assert_eq!(delete_topics(&mut nobody, "sg", &["q"]), (gaf, vec![]));

    let mut viewer = login(addr, "PLAIN", "viewer", "v").unwrap();
    // Describe: q as it is, r refused with no topic id; every share-partition: q only.
    assert_eq!(
        describe_topics(&mut viewer, "sg", Some(&["q", "r"])),
        (
            0,
            vec![
                ("q".into(), q, vec![(0, 0)]),
                ("r".into(), zero, vec![(taf, -1)])
            ]
        )
    );
    assert_eq!(
        describe_topics(&mut viewer, "sg", None),
        (0, vec![("q".into(), q, vec![(0, 0)])])
    );
    // Describe on the group is not Read, nor Delete.
    assert_eq!(alter_topics(&mut viewer, "sg", &["q"]), (gaf, vec![]));
    assert_eq!(delete_topics(&mut viewer, "sg", &["q"]), (gaf, vec![]));

    let mut operator = login(addr, "PLAIN", "operator", "o").unwrap();
    // Read on the group implies Describe; Describe on r suffices to describe it.
    assert_eq!(
        describe_topics(&mut operator, "sg", None),
        (
            0,
            vec![("q".into(), q, vec![(0, 0)]), ("r".into(), r, vec![(0, 0)])]
        )
    );
    // Alter and delete need Read on each topic: r is refused, q is done.
    assert_eq!(
        alter_topics(&mut operator, "sg", &["q", "r"]),
        (0, vec![("q".into(), 0), ("r".into(), taf)])
    );
    assert_eq!(
        delete_topics(&mut operator, "sg", &["q", "r"]),
        (0, vec![("q".into(), q, 0), ("r".into(), zero, taf)])
    );
    // q's state is gone, r's stays.
    assert_eq!(
        describe_topics(&mut admin, "sg", None),
        (0, vec![("r".into(), r, vec![(0, 0)])])
    );
}

/// DeleteGroups of `group`: its error code.
fn delete_group(c: &mut Client, group: &str) -> i16 {
    let req = DeleteGroupsRequest::default().with_groups_names(vec![GroupId(s(group))]);
    let r: DeleteGroupsResponse = c.call(ApiKey::DeleteGroups, 2, &req);
    r.results[0].error_code
}

/// ShareGroupHeartbeat of `member` of `group` reading q, joining (epoch 0) or leaving
/// (-1): no error.
pub(super) fn heartbeat_q(c: &mut Client, group: &str, member: &str, epoch: i32) {
    let req = ShareGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_member_id(s(member))
        .with_member_epoch(epoch)
        .with_subscribed_topic_names(Some(vec![TopicName(s("q"))]));
    let r: ShareGroupHeartbeatResponse = c.call(ApiKey::ShareGroupHeartbeat, 1, &req);
    assert_eq!(r.error_code, 0, "{:?}", r.error_message);
}

/// Produces two records to q-0.
pub(super) fn produce_two(c: &mut Client) {
    let produced: ProduceResponse = c.call(
        ApiKey::Produce,
        8,
        &super::tests_api::produce_req(-1, vec![("q", 0, super::tests_api::batch(&["a", "b"]))]),
    );
    assert_eq!(produced.responses[0].partition_responses[0].error_code, 0);
}

/// Deleting a share group (DeleteGroups) deletes the state of its share-partitions in
/// `__share_group_state`, as Kafka's group coordinator has its share coordinator
/// delete it: a group of the same id starts afresh (here at the log's start, its
/// `share.auto.offset.reset`), every record delivered for the first time, and so does
/// a group after its topic is deleted and made again.
#[test]
fn deleting_a_share_group_or_its_topic_deletes_the_share_state() {
    let (_dir, _server, mut c, id) = serving_q();
    assert_eq!(
        set_group_config(&mut c, "sg", "share.auto.offset.reset", "earliest"),
        0
    );
    produce_two(&mut c);
    heartbeat_q(&mut c, "sg", "m1", 0);
    assert_eq!(
        share_fetch_q(&mut c, "sg", id, "m1", 0, 0),
        vec![(0, 1), (1, 1)]
    );
    // With a member: NON_EMPTY_GROUP.
    assert_eq!(delete_group(&mut c, "sg"), 68);
    // It leaves, releasing both records (the state has them at delivery count 1).
    heartbeat_q(&mut c, "sg", "m1", -1);
    assert_eq!(delete_group(&mut c, "sg"), 0);
    assert_eq!(delete_group(&mut c, "sg"), 69, "gone");
    assert_eq!(describe_offsets(&mut c, "sg"), Err(69));
    let listed: ListGroupsResponse = c.call(ApiKey::ListGroups, 5, &ListGroupsRequest::default());
    assert!(listed.groups.iter().all(|g| g.group_id.as_str() != "sg"));
    // The group again: both records delivered for the first time.
    heartbeat_q(&mut c, "sg", "m2", 0);
    assert_eq!(
        share_fetch_q(&mut c, "sg", id, "m2", 0, 0),
        vec![(0, 1), (1, 1)]
    );
    heartbeat_q(&mut c, "sg", "m2", -1);

    // The topic deleted and made again: its share-partition starts afresh too.
    let req = DeleteTopicsRequest::default()
        .with_timeout_ms(5000)
        .with_topic_names(vec![TopicName(s("q"))]);
    let deleted: DeleteTopicsResponse = c.call(ApiKey::DeleteTopics, 4, &req);
    assert_eq!(deleted.responses[0].error_code, 0);
    create_topic(&mut c, "q", 1);
    let id = super::tests_api::topic_ids(&mut c, &["q"])[0].1;
    produce_two(&mut c);
    heartbeat_q(&mut c, "sg", "m3", 0);
    assert_eq!(
        share_fetch_q(&mut c, "sg", id, "m3", 0, 0),
        vec![(0, 1), (1, 1)]
    );
}

/// `share.isolation.level` (KIP-932): q-0 holds, by offset, 0 plain "a", 1-2 producer
/// 7's records then its ABORT at 5, 3 producer 8's record then its COMMIT at 6, 4
/// producer 9's record of a transaction still open, 7 plain "d". A read_committed group
/// ends at the last stable offset (4) and never gets aborted records; a
/// read_uncommitted one (the default) gets every data record, never a marker.
#[test]
fn a_read_committed_share_group_gets_only_committed_records() {
    use crate::record::{Compression, EndTxnMarker, test_batch};
    let dir = tempfile::tempdir().unwrap();
    let broker = crate::broker::Broker::builder(dir.path())
        .group_initial_rebalance_delay(std::time::Duration::ZERO)
        .open()
        .unwrap();
    let server = crate::server::Server::builder(broker.clone())
        .listen(std::net::SocketAddr::from(([127, 0, 0, 1], 0)))
        .start()
        .unwrap();
    let mut c = Client::connect(server.local_addr());
    create_topic(&mut c, "q", 1);
    let id = super::tests_api::topic_ids(&mut c, &["q"])[0].1;
    let p = broker.topic("q").unwrap().partition(0).unwrap();
    let log = p.log();
    // The records, and the transaction markers the coordinator writes.
    let append = |txn: Option<i64>, values: &[&str]| {
        let batch = test_batch(txn, Compression::None, values);
        p.append_batch(&batch).unwrap();
    };
    let end = |producer: i64, marker: EndTxnMarker| {
        log.append_end_txn_marker(producer, 0, marker, 1).unwrap();
    };
    append(None, &["a"]);
    append(Some(7), &["b1", "b2"]);
    append(Some(8), &["c1"]);
    append(Some(9), &["open"]);
    end(7, EndTxnMarker::abort(0));
    end(8, EndTxnMarker::commit(0));
    append(None, &["d"]);

    assert_eq!(
        set_group_config(&mut c, "committed", "share.isolation.level", "committed"),
        40
    );
    for (group, level) in [
        ("committed", "read_committed"),
        ("uncommitted", "read_uncommitted"),
    ] {
        for (key, value) in [
            ("share.auto.offset.reset", "earliest"),
            ("share.isolation.level", level),
        ] {
            assert_eq!(set_group_config(&mut c, group, key, value), 0, "{key}");
        }
    }
    let offsets = |got: Vec<(i64, i16)>| got.into_iter().map(|(o, _)| o).collect::<Vec<_>>();
    join_q(&mut c, "committed");
    // "a", then "c1" (committed) past the aborted 1-2; the open transaction at 4 ends
    // the read.
    assert_eq!(
        offsets(share_fetch_q(&mut c, "committed", id, "m1", 0, 0)),
        vec![0, 3]
    );
    assert!(share_fetch_q(&mut c, "committed", id, "m1", 1, 0).is_empty());
    join_q(&mut c, "uncommitted");
    assert_eq!(
        offsets(share_fetch_q(&mut c, "uncommitted", id, "m1", 0, 0)),
        vec![0, 1, 2, 3, 4, 7]
    );

    // The open transaction aborts: the committed group goes on past it, skipping it
    // and the markers after it, even reading one batch at a time.
    end(9, EndTxnMarker::abort(0));
    append(None, &["e"]);
    let one_batch = share_fetch_q_bytes(&mut c, ("committed", "m1"), id, 2, 0, 1);
    assert_eq!(offsets(one_batch), vec![7]);
    assert_eq!(
        offsets(share_fetch_q(&mut c, "committed", id, "m1", 3, 0)),
        vec![9]
    );
    assert_eq!(
        describe_group_config(&mut c, "other", "share.isolation.level"),
        (Some("read_uncommitted".into()), 5)
    );
    assert_eq!(
        describe_group_config(&mut c, "committed", "share.isolation.level"),
        (Some("read_committed".into()), 8)
    );
}

/// ShareAcknowledge of `member` of `group` at `epoch`: `first..=last` of q-0 with the
/// acknowledge type `kind`, or nothing when `range` is `None` (the last request of a
/// session, epoch -1). The request's and the partition's error codes.
fn acknowledge_q(
    c: &mut Client,
    (group, member): (&str, &str),
    id: [u8; 16],
    epoch: i32,
    range: Option<(i64, i64, &[i8])>,
) -> (i16, Option<i16>) {
    let topics = range.map_or_else(Vec::new, |(first, last, types)| {
        vec![
            share_acknowledge_request::AcknowledgeTopic::default()
                .with_topic_id(uuid::Uuid::from_bytes(id))
                .with_partitions(vec![
                    share_acknowledge_request::AcknowledgePartition::default()
                        .with_partition_index(0)
                        .with_acknowledgement_batches(vec![
                            share_acknowledge_request::AcknowledgementBatch::default()
                                .with_first_offset(first)
                                .with_last_offset(last)
                                .with_acknowledge_types(types.to_vec()),
                        ]),
                ]),
        ]
    });
    let r: ShareAcknowledgeResponse = c.call(
        ApiKey::ShareAcknowledge,
        1,
        &ShareAcknowledgeRequest::default()
            .with_group_id(Some(GroupId(s(group))))
            .with_member_id(Some(s(member)))
            .with_share_session_epoch(epoch)
            .with_topics(topics),
    );
    let partition = r
        .responses
        .iter()
        .flat_map(|t| &t.partitions)
        .map(|p| p.error_code)
        .next();
    (r.error_code, partition)
}

/// Kafka's `group.share.partition.max.record.locks` is 2000 since Kafka 4.1
/// (KAFKA-19245; 200 before, less than a client's default `max.poll.records` of 500):
/// one ShareFetch for 500 records of a partition holding 500 acquires all of them.
/// librdkafka's share consumer test 0173 (implicit mode, second consumer) does this:
/// its first member takes one poll's worth, accepts it and leaves; the next member
/// must then get only the records produced after, each delivered for the first time.
#[test]
fn one_share_fetch_acquires_its_max_records_under_the_default_record_lock_limit() {
    let (_dir, _server, mut c, id) = serving_q();
    assert_eq!(
        set_group_config(&mut c, "sg", "share.auto.offset.reset", "earliest"),
        0
    );
    let produce = |c: &mut Client, from: usize, n: usize| {
        let values: Vec<String> = (from..from + n).map(|i| format!("r{i}")).collect();
        let values: Vec<&str> = values.iter().map(String::as_str).collect();
        let batch = super::tests_api::batch(&values);
        let produced: ProduceResponse = c.call(
            ApiKey::Produce,
            8,
            &super::tests_api::produce_req(-1, vec![("q", 0, batch)]),
        );
        assert_eq!(produced.responses[0].partition_responses[0].error_code, 0);
    };
    produce(&mut c, 0, 500);
    heartbeat_q(&mut c, "sg", "m1", 0);
    let first = share_fetch_q_limited(&mut c, ("sg", "m1"), id, (0, 0), (1 << 20, 500));
    assert_eq!(first, (0..500).map(|o| (o, 1)).collect::<Vec<_>>());
    // Accepted (type 1), then the session's last request.
    assert_eq!(
        acknowledge_q(&mut c, ("sg", "m1"), id, 1, Some((0, 499, &[1]))),
        (0, Some(0))
    );
    assert_eq!(acknowledge_q(&mut c, ("sg", "m1"), id, -1, None), (0, None));
    heartbeat_q(&mut c, "sg", "m1", -1);

    produce(&mut c, 500, 5);
    heartbeat_q(&mut c, "sg", "m2", 0);
    let second = share_fetch_q_limited(&mut c, ("sg", "m2"), id, (0, 0), (1 << 20, 500));
    assert_eq!(second, (500..505).map(|o| (o, 1)).collect::<Vec<_>>());
}
