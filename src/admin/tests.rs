//! Tests of the admin client against a single node served in this process.

use std::time::Duration;

use super::*;
use crate::{Broker, Producer, ProducerRecord, Server, ServerHandle};

fn serve() -> (tempfile::TempDir, Broker, ServerHandle) {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::open(dir.path()).unwrap();
    let server = Server::builder(broker.clone())
        .listen("127.0.0.1:0")
        .start()
        .unwrap();
    (dir, broker, server)
}

fn admin(server: &ServerHandle) -> AdminClient {
    AdminClient::builder(server.local_addr().to_string())
        .retries(2)
        .retry_backoff(Duration::from_millis(10))
        .connect()
        .unwrap()
}

/// The Kafka error of a refusal.
#[track_caller]
fn code<T: std::fmt::Debug>(r: &Result<T>) -> ErrorCode {
    match r {
        Err(Error::Admin(e)) => e.code,
        other => panic!("not a broker's refusal: {other:?}"),
    }
}

#[test]
fn topics_are_created_described_altered_grown_and_deleted() {
    let (_dir, broker, server) = serve();
    let admin = admin(&server);

    let created = admin
        .create_topics(&[
            NewTopic::new("events")
                .partitions(2)
                .config("retention.ms", "86400000"),
            NewTopic::new("defaults"),
        ])
        .unwrap();
    assert!(
        created["events"].is_ok() && created["defaults"].is_ok(),
        "{created:?}"
    );
    assert_eq!(broker.topic("events").unwrap().partition_count(), 2);
    assert_eq!(broker.topic("defaults").unwrap().partition_count(), 1);

    let again = admin
        .create_topics(&[NewTopic::new("events").partitions(2)])
        .unwrap();
    assert_eq!(code(&again["events"]), ErrorCode::TOPIC_ALREADY_EXISTS);
    let rf = admin
        .create_topics(&[NewTopic::new("replicated").replication_factor(3)])
        .unwrap();
    assert_eq!(
        code(&rf["replicated"]),
        ErrorCode::INVALID_REPLICATION_FACTOR
    );
    let err = admin
        .create_topics(&[NewTopic::new("x"), NewTopic::new("x")])
        .unwrap_err();
    assert!(
        matches!(&err, Error::Admin(e) if e.code == ErrorCode::INVALID_REQUEST),
        "{err}"
    );

    let described = admin.describe_topics(&["events", "missing"]).unwrap();
    let events = described["events"].as_ref().unwrap();
    assert_eq!(events.partitions.len(), 2);
    assert_eq!(events.replication_factor(), 1);
    for (i, p) in events.partitions.iter().enumerate() {
        assert_eq!(p.partition, i as i32);
        assert_eq!(p.leader, Some(0));
        assert_eq!(p.replicas, [0]);
        assert_eq!(p.isr, [0]);
    }
    assert_eq!(
        code(&described["missing"]),
        ErrorCode::UNKNOWN_TOPIC_OR_PARTITION
    );
    assert!(
        described["missing"]
            .as_ref()
            .unwrap_err()
            .to_string()
            .starts_with("topic \"missing\": UNKNOWN_TOPIC_OR_PARTITION")
    );

    let m = admin.metadata().unwrap();
    assert_eq!(m.brokers.len(), 1);
    assert_eq!(m.controller, Some(0));
    let names: Vec<(&str, bool)> = m
        .topics
        .iter()
        .map(|t| (t.name.as_str(), t.internal))
        .collect();
    assert_eq!(
        names,
        [
            ("__consumer_offsets", true),
            ("defaults", false),
            ("events", false)
        ]
    );

    let configs = admin.describe_configs(&["events"]).unwrap();
    let retention = configs["events"]
        .as_ref()
        .unwrap()
        .iter()
        .find(|c| c.name == "retention.ms")
        .cloned()
        .unwrap();
    assert_eq!(retention.value.as_deref(), Some("86400000"));
    assert_eq!(retention.source, ConfigSource::Topic);

    let altered = admin
        .alter_configs(&[(
            "events",
            vec![
                AlterConfigOp::Delete("retention.ms".into()),
                AlterConfigOp::Set("cleanup.policy".into(), "compact".into()),
            ],
        )])
        .unwrap();
    assert!(altered["events"].is_ok(), "{altered:?}");
    let overrides: Vec<(String, String)> = broker
        .topic("events")
        .unwrap()
        .config()
        .overrides()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    assert_eq!(
        overrides,
        [("cleanup.policy".to_string(), "compact".to_string())]
    );
    let bad = admin
        .alter_configs(&[(
            "events",
            vec![AlterConfigOp::Set("retention.ms".into(), "soon".into())],
        )])
        .unwrap();
    assert_eq!(code(&bad["events"]), ErrorCode::INVALID_CONFIG);

    let grown = admin.create_partitions(&[("events", 5)]).unwrap();
    assert!(grown["events"].is_ok(), "{grown:?}");
    assert_eq!(broker.topic("events").unwrap().partition_count(), 5);
    let shrink = admin.create_partitions(&[("events", 3)]).unwrap();
    assert_eq!(code(&shrink["events"]), ErrorCode::INVALID_PARTITIONS);

    let deleted = admin.delete_topics(&["events", "missing"]).unwrap();
    assert!(deleted["events"].is_ok(), "{deleted:?}");
    assert_eq!(
        code(&deleted["missing"]),
        ErrorCode::UNKNOWN_TOPIC_OR_PARTITION
    );
    assert!(!broker.topics().contains(&"events".to_string()));
    server.shutdown().unwrap();
}

#[test]
fn offsets_and_groups_over_the_wire() {
    let (_dir, broker, server) = serve();
    let admin = admin(&server);
    admin
        .create_topics(&[NewTopic::new("orders").partitions(2)])
        .unwrap()
        .remove("orders")
        .unwrap()
        .unwrap();
    let producer = Producer::new(&broker).unwrap();
    for i in 0..5 {
        let value = format!("order {i}");
        let record = ProducerRecord::new(value.as_bytes()).partition(0);
        producer.send("orders", record).unwrap();
    }

    let p0 = TopicPartition::new("orders", 0);
    let p1 = TopicPartition::new("orders", 1);
    let p9 = TopicPartition::new("orders", 9);
    let offsets = admin
        .list_offsets(&[
            (p0.clone(), OffsetSpec::Latest),
            (p1.clone(), OffsetSpec::Earliest),
            (p9.clone(), OffsetSpec::Latest),
        ])
        .unwrap();
    assert_eq!(offsets[&p0].as_ref().unwrap().offset, Some(5));
    assert_eq!(offsets[&p1].as_ref().unwrap().offset, Some(0));
    assert_eq!(code(&offsets[&p9]), ErrorCode::UNKNOWN_TOPIC_OR_PARTITION);
    let future = admin
        .list_offsets(&[(p0.clone(), OffsetSpec::Timestamp(i64::MAX / 2))])
        .unwrap();
    assert_eq!(
        future[&p0].as_ref().unwrap().offset,
        None,
        "no record that late"
    );

    assert!(admin.list_groups().unwrap().is_empty());
    let committed = admin
        .alter_consumer_group_offsets("audit", &[(p0.clone(), 3), (p1.clone(), 0)])
        .unwrap();
    assert!(committed.values().all(|r| r.is_ok()), "{committed:?}");
    let groups = admin.list_groups().unwrap();
    assert_eq!(groups.len(), 1);
    assert_eq!(groups[0].group_id, "audit");
    let offsets = admin.list_consumer_group_offsets("audit").unwrap();
    let pairs: Vec<(i32, i64)> = offsets
        .iter()
        .map(|o| (o.partition.partition, o.offset))
        .collect();
    assert_eq!(pairs, [(0, 3), (1, 0)]);
    assert!(
        admin
            .list_consumer_group_offsets("nobody")
            .unwrap()
            .is_empty()
    );

    let described = admin.describe_groups(&["audit", "nobody"]).unwrap();
    let audit = described["audit"].as_ref().unwrap();
    assert_eq!(audit.state, "Empty");
    assert!(audit.members.is_empty());
    assert_eq!(audit.coordinator, 0);
    assert_eq!(described["nobody"].as_ref().unwrap().state, "Dead");
    server.shutdown().unwrap();
}

#[test]
fn bootstrap_tries_each_address_and_checks_the_list() {
    let (_dir, _broker, server) = serve();
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead_addr = dead.local_addr().unwrap();
    drop(dead);
    let list = format!("{dead_addr},{}", server.local_addr());
    let admin = AdminClient::connect(&list).unwrap();
    assert_eq!(admin.metadata().unwrap().brokers.len(), 1);

    for bad in ["", " , ", "localhost", "host:port", ":9092"] {
        let err = AdminClient::connect(bad).unwrap_err();
        assert!(
            matches!(&err, Error::InvalidConfig { key, .. } if key == "bootstrap.servers"),
            "{bad:?}: {err}"
        );
    }
    let err = AdminClient::builder(dead_addr.to_string())
        .retries(0)
        .connect()
        .unwrap_err();
    assert!(matches!(err, Error::Io { .. }), "{err}");
    server.shutdown().unwrap();
}
