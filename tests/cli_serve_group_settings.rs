//! `tidelog serve`'s group settings with Kafka's broker names: the share groups' size
//! (`--group-share-max-size`), record locks per partition and delivery count limit
//! (`--group-share-partition-max-record-locks`, `--group-share-delivery-count-limit`),
//! the bounds of group configs
//! (`--group-{consumer,share}-{min,max}-*-ms`) and the settings they bound, refused at
//! start as Kafka refuses them: a min above its max, a zero bound, a setting outside its
//! bounds, a heartbeat interval not below its session timeout.
#![cfg(all(feature = "cli", feature = "server"))]

mod cli_support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use cli_support::{err, serve, tidelog};
use kafka_protocol::ResponseError;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

/// Sends `req` as `key` v`version` on a new connection to `addr`; the connection, to
/// read the answer from.
fn send<Q: Encodable>(addr: &str, key: ApiKey, version: i16, req: &Q) -> TcpStream {
    let mut buf = BytesMut::new();
    RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(7)
        .with_client_id(Some(StrBytes::from_static_str("group-settings-test")))
        .encode(&mut buf, key.request_header_version(version))
        .unwrap();
    req.encode(&mut buf, version).unwrap();
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut framed = (buf.len() as i32).to_be_bytes().to_vec();
    framed.extend_from_slice(&buf);
    s.write_all(&framed).unwrap();
    s
}

/// Sends `req` as `key` v`version` on a new connection to `addr`; the response's body.
fn exchange<Q: Encodable>(addr: &str, key: ApiKey, version: i16, req: &Q) -> Bytes {
    let mut s = send(addr, key, version, req);
    let mut size = [0u8; 4];
    s.read_exact(&mut size).unwrap();
    let mut body = vec![0u8; i32::from_be_bytes(size) as usize];
    s.read_exact(&mut body).unwrap();
    let mut body = Bytes::from(body);
    let header = ResponseHeader::decode(&mut body, key.response_header_version(version)).unwrap();
    assert_eq!(header.correlation_id, 7, "{key:?}");
    body
}

/// The error code of member `member`'s first ShareGroupHeartbeat to group `group`.
fn join_share_group(addr: &str, group: &'static str, member: &'static str) -> i16 {
    let req = ShareGroupHeartbeatRequest::default()
        .with_group_id(GroupId(StrBytes::from_static_str(group)))
        .with_member_id(StrBytes::from_static_str(member))
        .with_member_epoch(0)
        .with_subscribed_topic_names(Some(vec![TopicName(StrBytes::from_static_str("events"))]));
    let mut body = exchange(addr, ApiKey::ShareGroupHeartbeat, 1, &req);
    ShareGroupHeartbeatResponse::decode(&mut body, 1)
        .unwrap()
        .error_code
}

/// The error code of setting group `group`'s config `key` to `value`.
fn alter_group_config(addr: &str, group: &'static str, key: &'static str, value: &str) -> i16 {
    let req = IncrementalAlterConfigsRequest::default().with_resources(vec![
        AlterConfigsResource::default()
            .with_resource_type(32) // GROUP
            .with_resource_name(StrBytes::from_static_str(group))
            .with_configs(vec![
                AlterableConfig::default()
                    .with_name(StrBytes::from_static_str(key))
                    .with_config_operation(0) // SET
                    .with_value(Some(StrBytes::from_string(value.to_string()))),
            ]),
    ]);
    let mut body = exchange(addr, ApiKey::IncrementalAlterConfigs, 1, &req);
    IncrementalAlterConfigsResponse::decode(&mut body, 1)
        .unwrap()
        .responses[0]
        .error_code
}

#[test]
fn a_share_group_is_capped_at_group_share_max_size() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let node = serve(&tmp.path().join("data"), &["--group-share-max-size", "1"]);
    assert_eq!(join_share_group(&node.addr, "queue", "member-a"), 0);
    assert_eq!(
        join_share_group(&node.addr, "queue", "member-b"),
        ResponseError::GroupMaxSizeReached.code()
    );
    // Another group has its own room.
    assert_eq!(join_share_group(&node.addr, "other-queue", "member-b"), 0);
    assert_eq!(node.stop(), Some(0));
}

/// A JoinGroup v3 of a new member of the new group "g" (the first member of a group
/// waits for the initial rebalance delay), with a rebalance timeout of 10 minutes.
fn first_join() -> JoinGroupRequest {
    // An empty `ConsumerProtocol` subscription (version 0, no topics, no user data).
    let subscription = Bytes::from_static(&[0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff]);
    JoinGroupRequest::default()
        .with_group_id(GroupId(StrBytes::from_static_str("g")))
        .with_session_timeout_ms(30_000)
        .with_rebalance_timeout_ms(600_000)
        .with_protocol_type(StrBytes::from_static_str("consumer"))
        .with_protocols(
            [join_group_request::JoinGroupRequestProtocol::default()
                .with_name(StrBytes::from_static_str("range"))
                .with_metadata(subscription)]
            .into_iter()
            .collect(),
        )
}

#[test]
fn the_initial_rebalance_delay_comes_from_the_flag() {
    let tmp = tempfile::tempdir().expect("temp dir");
    // No delay: the first member's JoinGroup is answered at once.
    let node = serve(
        &tmp.path().join("none"),
        &["--group-initial-rebalance-delay-ms", "0"],
    );
    let mut body = exchange(&node.addr, ApiKey::JoinGroup, 3, &first_join());
    let r = JoinGroupResponse::decode(&mut body, 3).unwrap();
    assert_eq!((r.error_code, r.generation_id), (0, 1));
    assert_eq!(node.stop(), Some(0));
    // Ten minutes: it still waits after five seconds (Kafka's default, 3 s, would have
    // answered it).
    let node = serve(
        &tmp.path().join("long"),
        &["--group-initial-rebalance-delay-ms", "600000"],
    );
    let mut s = send(&node.addr, ApiKey::JoinGroup, 3, &first_join());
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let e = s.read_exact(&mut [0u8; 4]).unwrap_err();
    assert!(
        matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ),
        "{e}"
    );
    drop(s);
    assert_eq!(node.stop(), Some(0));
}

#[test]
fn a_node_opens_at_most_group_share_max_share_sessions() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let node = serve(
        &tmp.path().join("data"),
        &["--group-share-max-share-sessions", "1"],
    );
    // A share session of `member` (ShareFetch at epoch 0): its error code.
    let open = |member: &'static str| {
        let req = ShareFetchRequest::default()
            .with_group_id(Some(GroupId(StrBytes::from_static_str("queue"))))
            .with_member_id(Some(StrBytes::from_static_str(member)))
            .with_share_session_epoch(0)
            .with_max_wait_ms(0)
            .with_max_bytes(1 << 20)
            .with_max_records(10);
        let mut body = exchange(&node.addr, ApiKey::ShareFetch, 1, &req);
        ShareFetchResponse::decode(&mut body, 1).unwrap().error_code
    };
    assert_eq!(join_share_group(&node.addr, "queue", "member-a"), 0);
    assert_eq!(join_share_group(&node.addr, "queue", "member-b"), 0);
    assert_eq!(open("member-a"), 0);
    // Kafka's default is 2000 sessions; the flag made it one.
    assert_eq!(
        open("member-b"),
        ResponseError::ShareSessionLimitReached.code()
    );
    assert_eq!(node.stop(), Some(0));
}

#[test]
fn group_config_bounds_come_from_the_flags() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let node = serve(
        &tmp.path().join("data"),
        &[
            "--group-share-max-record-lock-duration-ms",
            "20000",
            "--group-share-record-lock-duration-ms",
            "18000",
            "--group-consumer-min-session-timeout-ms",
            "10000",
        ],
    );
    let invalid = ResponseError::InvalidConfig.code();
    // Kafka's default bounds are 15 s to 60 s; the flag lowered the max to 20 s.
    assert_eq!(
        alter_group_config(&node.addr, "g", "share.record.lock.duration.ms", "20000"),
        0
    );
    assert_eq!(
        alter_group_config(&node.addr, "g", "share.record.lock.duration.ms", "30000"),
        invalid
    );
    // The consumer session timeout's min went from 45 s down to 10 s.
    assert_eq!(
        alter_group_config(&node.addr, "g", "consumer.session.timeout.ms", "10000"),
        0
    );
    assert_eq!(
        alter_group_config(&node.addr, "g", "consumer.session.timeout.ms", "9999"),
        invalid
    );
    assert_eq!(node.stop(), Some(0));
}

#[test]
fn bad_bounds_and_settings_outside_them_are_refused_at_start() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let data = tmp.path().join("data");
    let serve_with = |flags: &[&str]| {
        let mut args = vec!["serve", "--listen", "127.0.0.1:0"];
        args.extend_from_slice(flags);
        tidelog(&data, &args, "")
    };
    let line = err(
        serve_with(&["--group-share-min-session-timeout-ms", "70000"]),
        1,
        "--group-share-min-session-timeout-ms 70000 is above --group-share-max-session-timeout-ms 60000",
    );
    assert!(!line.contains("consumer"), "{line}");
    err(
        serve_with(&["--group-consumer-min-heartbeat-interval-ms", "0"]),
        1,
        "--group-consumer-min-heartbeat-interval-ms 0 and --group-consumer-max-heartbeat-interval-ms 15000",
    );
    err(
        serve_with(&[
            "--group-share-min-record-lock-duration-ms",
            "1000",
            "--group-share-max-record-lock-duration-ms",
            "999",
        ]),
        1,
        "--group-share-max-record-lock-duration-ms 999",
    );
    // The broker's own setting must lie within its bounds (the default 30 s is not).
    err(
        serve_with(&["--group-share-max-record-lock-duration-ms", "20000"]),
        1,
        "--group-share-record-lock-duration-ms 30000 is outside --group-share-min-record-lock-duration-ms 15000 and --group-share-max-record-lock-duration-ms 20000",
    );
    err(
        serve_with(&[
            "--group-consumer-session-timeout-ms",
            "50000",
            "--group-consumer-heartbeat-interval-ms",
            "50000",
            "--group-consumer-max-heartbeat-interval-ms",
            "60000",
        ]),
        1,
        "--group-consumer-heartbeat-interval-ms 50000 is not below --group-consumer-session-timeout-ms 50000",
    );
    // Refused before the data directory is made.
    assert!(!data.exists());
}

/// One ShareFetch of member `member` of `group` at `epoch` from partition 0 of the topic
/// `topic_id`, asking for up to 500 records, releasing `release` (first and last
/// offset) first; the acquired records as (first offset, last offset, delivery count).
fn share_fetch(
    addr: &str,
    (group, member): (&'static str, &'static str),
    topic_id: uuid::Uuid,
    epoch: i32,
    release: Option<(i64, i64)>,
) -> Vec<(i64, i64, i16)> {
    let acks = release.map_or_else(Vec::new, |(first, last)| {
        vec![
            share_fetch_request::AcknowledgementBatch::default()
                .with_first_offset(first)
                .with_last_offset(last)
                .with_acknowledge_types(vec![2]), // RELEASE
        ]
    });
    let req = ShareFetchRequest::default()
        .with_group_id(Some(GroupId(StrBytes::from_static_str(group))))
        .with_member_id(Some(StrBytes::from_static_str(member)))
        .with_share_session_epoch(epoch)
        .with_max_wait_ms(0)
        .with_max_bytes(1 << 20)
        .with_max_records(500)
        .with_topics(vec![
            share_fetch_request::FetchTopic::default()
                .with_topic_id(topic_id)
                .with_partitions(vec![
                    share_fetch_request::FetchPartition::default()
                        .with_partition_index(0)
                        .with_partition_max_bytes(1 << 20)
                        .with_acknowledgement_batches(acks),
                ]),
        ]);
    let mut body = exchange(addr, ApiKey::ShareFetch, 1, &req);
    let r = ShareFetchResponse::decode(&mut body, 1).unwrap();
    assert_eq!(r.error_code, 0, "{:?}", r.error_message);
    let mut out = Vec::new();
    for p in r.responses.iter().flat_map(|t| &t.partitions) {
        assert_eq!(p.error_code, 0, "{:?}", p.error_message);
        assert_eq!(
            p.acknowledge_error_code, 0,
            "{:?}",
            p.acknowledge_error_message
        );
        let acquired = p.acquired_records.iter();
        out.extend(acquired.map(|a| (a.first_offset, a.last_offset, a.delivery_count)));
    }
    out
}

#[test]
fn share_record_locks_and_delivery_count_limit_come_from_the_flags() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let data = tmp.path().join("data");
    let lines: String = (0..300).map(|i| format!("record-{i}\n")).collect();
    let made = tidelog(&data, &["topics", "create", "events"], "");
    assert_eq!(made.code, 0, "{}", made.stderr);
    let produced = tidelog(&data, &["produce", "events", "-p", "0"], &lines);
    assert_eq!(produced.code, 0, "{}", produced.stderr);
    let node = serve(
        &data,
        &[
            "--group-share-partition-max-record-locks",
            "100",
            "--group-share-delivery-count-limit",
            "2",
        ],
    );
    let req = MetadataRequest::default().with_topics(Some(vec![
        metadata_request::MetadataRequestTopic::default()
            .with_name(Some(TopicName(StrBytes::from_static_str("events")))),
    ]));
    let mut body = exchange(&node.addr, ApiKey::Metadata, 12, &req);
    let topic_id = MetadataResponse::decode(&mut body, 12).unwrap().topics[0].topic_id;
    assert_eq!(
        alter_group_config(&node.addr, "queue", "share.auto.offset.reset", "earliest"),
        0
    );
    let member = ("queue", "member-a");
    assert_eq!(join_share_group(&node.addr, member.0, member.1), 0);
    // 300 records wait; a fetch of up to 500 acquires the 100 locks a partition has
    // (2000 by default).
    assert_eq!(
        share_fetch(&node.addr, member, topic_id, 0, None),
        vec![(0, 99, 1)]
    );
    // Released once, they come again; released a second time, they reached the limit
    // of two deliveries (5 by default) and are archived: the next records come.
    assert_eq!(
        share_fetch(&node.addr, member, topic_id, 1, Some((0, 99))),
        vec![(0, 99, 2)]
    );
    assert_eq!(
        share_fetch(&node.addr, member, topic_id, 2, Some((0, 99))),
        vec![(100, 199, 1)]
    );
    assert_eq!(node.stop(), Some(0));
}

#[test]
fn share_settings_outside_kafkas_ranges_are_refused_at_start() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let data = tmp.path().join("data");
    for (flag, value) in [
        ("--group-share-delivery-count-limit", "1"),
        ("--group-share-delivery-count-limit", "11"),
        ("--group-share-partition-max-record-locks", "99"),
        ("--group-share-partition-max-record-locks", "10001"),
    ] {
        let run = tidelog(
            &data,
            &["serve", "--listen", "127.0.0.1:0", flag, value],
            "",
        );
        assert_eq!(run.code, 2, "{flag} {value}: {}", run.stderr);
        assert!(run.stderr.contains(flag), "{flag} {value}: {}", run.stderr);
    }
    assert!(!data.exists());
}
