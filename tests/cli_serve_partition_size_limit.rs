//! `tidelog serve --max-request-partition-size-limit` (Kafka's
//! `max.request.partition.size.limit`): a DescribeTopicPartitions answer carries at most
//! that many partitions whatever the request's `response_partition_limit`, and names the
//! next one in its cursor; 0 is refused at start.
#![cfg(all(feature = "cli", feature = "server"))]

mod cli_support;
mod server_support;

use std::net::TcpStream;
use std::time::Duration;

use cli_support::{err, ok, serve, tidelog, tidelog_raw};
use kafka_protocol::messages::describe_topic_partitions_request::{Cursor, TopicRequest};
use kafka_protocol::messages::{
    ApiKey, DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

/// One DescribeTopicPartitions of `topic` from `cursor` asking for up to 1,000
/// partitions; the partition indexes answered and the next cursor's partition.
fn describe(addr: &str, topic: &str, cursor: Option<i32>) -> (Vec<i32>, Option<i32>) {
    let name = || TopicName(StrBytes::from_string(topic.to_string()));
    let req = DescribeTopicPartitionsRequest::default()
        .with_topics(vec![TopicRequest::default().with_name(name())])
        .with_response_partition_limit(1000)
        .with_cursor(cursor.map(|p| {
            Cursor::default()
                .with_topic_name(name())
                .with_partition_index(p)
        }));
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let r: DescribeTopicPartitionsResponse =
        server_support::call(&mut s, ApiKey::DescribeTopicPartitions, 0, &req);
    assert_eq!(r.topics.len(), 1, "{r:?}");
    assert_eq!(r.topics[0].error_code, 0, "{r:?}");
    let partitions = r.topics[0]
        .partitions
        .iter()
        .map(|p| p.partition_index)
        .collect();
    let next = r.next_cursor.map(|c| {
        assert_eq!(c.topic_name.0.as_str(), topic);
        c.partition_index
    });
    (partitions, next)
}

#[test]
fn describe_topic_partitions_pages_at_the_flags_limit() {
    let tmp = tempfile::tempdir().unwrap();
    let node = serve(
        &tmp.path().join("data"),
        &["--max-request-partition-size-limit", "2"],
    );
    let b = node.addr.clone();
    ok(tidelog_raw(
        &[
            "topics",
            "create",
            "wide",
            "--partitions",
            "5",
            "--bootstrap",
            &b,
        ],
        "",
    ));
    assert_eq!(describe(&b, "wide", None), (vec![0, 1], Some(2)));
    assert_eq!(describe(&b, "wide", Some(2)), (vec![2, 3], Some(4)));
    assert_eq!(describe(&b, "wide", Some(4)), (vec![4], None));
    assert_eq!(node.stop(), Some(0));

    // Without the flag, Kafka's 2,000 applies: all five in one answer.
    let node = serve(&tmp.path().join("data"), &[]);
    assert_eq!(
        describe(&node.addr, "wide", None),
        (vec![0, 1, 2, 3, 4], None)
    );
    assert_eq!(node.stop(), Some(0));
}

#[test]
fn a_limit_of_zero_is_refused_at_start() {
    let tmp = tempfile::tempdir().unwrap();
    err(
        tidelog(
            &tmp.path().join("data"),
            &[
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--max-request-partition-size-limit",
                "0",
            ],
            "",
        ),
        2,
        "--max-request-partition-size-limit",
    );
}
