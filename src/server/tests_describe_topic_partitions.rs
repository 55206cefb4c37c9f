//! DescribeTopicPartitions (KIP-966) of a single node over a real socket: paging with
//! the request's limit and the server's cap, topics that do not exist, a bad cursor,
//! and what ACLs let a principal see. (A cluster node's answer from its image is tested
//! in `cluster::tests::describe_topic_partitions`.)

use kafka_protocol::messages::describe_topic_partitions_request::{Cursor, TopicRequest};
use kafka_protocol::messages::describe_topic_partitions_response::DescribeTopicPartitionsResponseTopic;
use kafka_protocol::messages::*;

use super::tests_api::Client;
use super::tests_security::{allow_on_topic, broker, create_acls, login, s, sasl_server};
use super::*;
use crate::security::acl::AclOperation as Op;

/// A single node with topics `alpha` (3 partitions) and `beta` (2), made in process.
fn node(cap: Option<usize>) -> (tempfile::TempDir, ServerHandle) {
    let dir = tempfile::tempdir().unwrap();
    let broker = crate::broker::Broker::open(dir.path()).unwrap();
    broker
        .create_topic("alpha", 3, crate::config::TopicConfig::new())
        .unwrap();
    broker
        .create_topic("beta", 2, crate::config::TopicConfig::new())
        .unwrap();
    let mut builder = Server::builder(broker).listen("127.0.0.1:0");
    if let Some(cap) = cap {
        builder = builder.max_request_partition_size_limit(cap);
    }
    (dir, builder.start().unwrap())
}

fn request(
    topics: &[&str],
    limit: i32,
    cursor: Option<(&str, i32)>,
) -> DescribeTopicPartitionsRequest {
    DescribeTopicPartitionsRequest::default()
        .with_topics(
            topics
                .iter()
                .map(|t| TopicRequest::default().with_name(TopicName(s(t))))
                .collect(),
        )
        .with_response_partition_limit(limit)
        .with_cursor(cursor.map(|(t, p)| {
            Cursor::default()
                .with_topic_name(TopicName(s(t)))
                .with_partition_index(p)
        }))
}

fn describe(
    c: &mut Client,
    req: &DescribeTopicPartitionsRequest,
) -> DescribeTopicPartitionsResponse {
    c.call(ApiKey::DescribeTopicPartitions, 0, req)
}

fn name(t: &DescribeTopicPartitionsResponseTopic) -> String {
    t.name.as_ref().unwrap().to_string()
}

/// Each topic of a page with the partition indexes it carries, and the next cursor.
type Page = (Vec<(String, Vec<i32>)>, Option<(String, i32)>);

/// The [`Page`] of an answer whose topics are all described.
fn page(r: &DescribeTopicPartitionsResponse) -> Page {
    let topics = r
        .topics
        .iter()
        .map(|t| {
            assert_eq!(t.error_code, 0, "{t:?}");
            (
                name(t),
                t.partitions.iter().map(|p| p.partition_index).collect(),
            )
        })
        .collect();
    let next = r
        .next_cursor
        .as_ref()
        .map(|c| (c.topic_name.to_string(), c.partition_index));
    (topics, next)
}

fn owned(topics: &[(&str, &[i32])]) -> Vec<(String, Vec<i32>)> {
    topics
        .iter()
        .map(|(t, p)| (t.to_string(), p.to_vec()))
        .collect()
}

#[test]
fn pages_of_two_partitions_walk_both_topics_with_the_cursor() {
    let (_dir, server) = node(None);
    let mut c = Client::connect(server.local_addr());
    let topics = ["beta", "alpha"];
    let first = describe(&mut c, &request(&topics, 2, None));
    assert_eq!(
        page(&first),
        (owned(&[("alpha", &[0, 1])]), Some(("alpha".into(), 2)))
    );
    let second = describe(&mut c, &request(&topics, 2, Some(("alpha", 2))));
    assert_eq!(
        page(&second),
        (
            owned(&[("alpha", &[2]), ("beta", &[0])]),
            Some(("beta".into(), 1))
        )
    );
    let last = describe(&mut c, &request(&topics, 2, Some(("beta", 1))));
    assert_eq!(page(&last), (owned(&[("beta", &[1])]), None));
    // A page that ends with a topic's last partition points at the next topic's first.
    let exact = describe(&mut c, &request(&topics, 3, None));
    assert_eq!(
        page(&exact),
        (owned(&[("alpha", &[0, 1, 2])]), Some(("beta".into(), 0)))
    );

    // Every topic (an empty list), one page: a single node leads and is the only
    // replica of each partition; the ids are Metadata's.
    let every = describe(&mut c, &request(&[], 2000, None));
    let mine: Vec<_> = every
        .topics
        .iter()
        .filter(|t| !t.is_internal)
        .map(|t| (name(t), t.partitions.len()))
        .collect();
    assert_eq!(mine, [("alpha".to_string(), 3), ("beta".to_string(), 2)]);
    assert!(every.next_cursor.is_none());
    let ids = super::tests_api::topic_ids(&mut c, &["alpha", "beta"]);
    let alpha = every.topics.iter().find(|t| name(t) == "alpha").unwrap();
    assert_eq!(*alpha.topic_id.as_bytes(), ids[0].1);
    assert_ne!(ids[0].1, [0; 16]);
    let p = &alpha.partitions[1];
    assert_eq!(p.error_code, 0);
    assert_eq!(p.leader_id.0, 0);
    assert_eq!(p.replica_nodes, [BrokerId(0)]);
    assert_eq!(p.isr_nodes, [BrokerId(0)]);
    assert_eq!(p.eligible_leader_replicas, Some(vec![]));
    assert_eq!(p.last_known_elr, Some(vec![]));
    assert!(p.offline_replicas.is_empty());
    assert_eq!(
        alpha.topic_authorized_operations, 0b1101_1111_1000,
        "every topic operation without an authorizer"
    );
}

#[test]
fn the_servers_limit_caps_the_clients() {
    let (_dir, server) = node(Some(3));
    let mut c = Client::connect(server.local_addr());
    let r = describe(&mut c, &request(&["alpha", "beta"], 2000, None));
    assert_eq!(
        page(&r),
        (owned(&[("alpha", &[0, 1, 2])]), Some(("beta".into(), 0)))
    );
    // A limit under 1 is taken as 1.
    let r = describe(&mut c, &request(&["alpha", "beta"], 0, None));
    assert_eq!(
        page(&r),
        (owned(&[("alpha", &[0])]), Some(("alpha".into(), 1)))
    );
}

#[test]
fn missing_topics_and_bad_cursors_are_answered_per_topic() {
    let (_dir, server) = node(None);
    let mut c = Client::connect(server.local_addr());
    let r = describe(&mut c, &request(&["nope", "beta", "bad name!"], 2000, None));
    let codes: Vec<(String, i16, usize)> = r
        .topics
        .iter()
        .map(|t| (name(t), t.error_code, t.partitions.len()))
        .collect();
    assert_eq!(
        codes,
        [
            ("bad name!".to_string(), 17, 0),
            ("beta".to_string(), 0, 2),
            ("nope".to_string(), 3, 0)
        ],
        "INVALID_TOPIC_EXCEPTION, described, UNKNOWN_TOPIC_OR_PARTITION (in name order)"
    );
    assert_eq!(*r.topics[2].topic_id.as_bytes(), [0; 16]);
    // A missing topic where a page is full is where the next one starts.
    let r = describe(&mut c, &request(&["beta", "nope"], 2, None));
    assert_eq!(
        page(&r),
        (owned(&[("beta", &[0, 1])]), Some(("nope".into(), 0)))
    );

    // A cursor on a topic not asked for, or on a negative partition: INVALID_REQUEST
    // for every topic.
    for cursor in [("gamma", 0), ("beta", -1)] {
        let r = describe(&mut c, &request(&["alpha", "beta"], 2000, Some(cursor)));
        let codes: Vec<(String, i16)> = r.topics.iter().map(|t| (name(t), t.error_code)).collect();
        assert_eq!(
            codes,
            [("alpha".to_string(), 42), ("beta".to_string(), 42)],
            "{cursor:?}"
        );
        assert!(r.next_cursor.is_none());
    }
}

#[test]
fn acls_hide_topics_the_principal_may_not_describe() {
    let (_dir, broker) = broker(&["events", "hidden"], &[("admin", "a"), ("reader", "r")]);
    let server = sasl_server(broker, true);
    let addr = server.local_addr();
    let mut admin = login(addr, "PLAIN", "admin", "a").unwrap();
    create_acls(
        &mut admin,
        vec![allow_on_topic("events", "User:reader", Op::Read)],
    );
    let mut reader = login(addr, "PLAIN", "reader", "r").unwrap();
    let r = describe(
        &mut reader,
        &request(&["hidden", "events", "nope"], 2000, None),
    );
    let codes: Vec<(String, i16, i32)> = r
        .topics
        .iter()
        .map(|t| (name(t), t.error_code, t.topic_authorized_operations))
        .collect();
    assert_eq!(
        codes,
        [
            // Read, and the Describe it implies.
            ("events".to_string(), 0, (1 << 3) | (1 << 8)),
            ("hidden".to_string(), 29, i32::MIN),
            ("nope".to_string(), 29, i32::MIN),
        ],
        "TOPIC_AUTHORIZATION_FAILED whether the topic exists or not, after the page"
    );
    assert_eq!(*r.topics[1].topic_id.as_bytes(), [0; 16]);
    assert!(r.topics[1].partitions.is_empty());
    // Every topic: only those it may describe, without an error for the others.
    let r = describe(&mut reader, &request(&[], 2000, None));
    assert_eq!(page(&r), (owned(&[("events", &[0])]), None));
    // A super user sees both.
    let r = describe(&mut admin, &request(&["events", "hidden"], 2000, None));
    assert_eq!(
        page(&r),
        (owned(&[("events", &[0]), ("hidden", &[0])]), None)
    );
}
