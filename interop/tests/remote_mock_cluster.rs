//! tidelog's network client (`Cluster`, and the `Producer` over it) against an
//! implementation of the Kafka protocol that is not tidelog: librdkafka's mock cluster
//! (three brokers in this process). It advertises fewer Produce versions than the
//! client speaks, moves a partition's leader and answers NOT_LEADER_OR_FOLLOWER: the
//! client negotiates, follows the leader, and the idempotent producer's records are
//! each in the log once, in order. Describing a topic, which needs DescribeConfigs (the
//! mock has none), is `Error::UnsupportedApi` naming it. A transactional producer finds its coordinator on
//! another broker and rides out the mock's injected coordinator errors.

use std::time::Duration;

use rdkafka::mocking::{MockCluster, MockCoordinator};
use rdkafka::types::{RDKafkaApiKey, RDKafkaRespErr};
use tidelog::producer::partition_for_key;
use tidelog::{ClientConfig, Cluster, Error, IsolationLevel, Producer, ProducerRecord};

/// Every record value of partition `p` of `t`, in offset order.
fn values(cluster: &Cluster, p: i32) -> Vec<String> {
    let uncommitted = IsolationLevel::ReadUncommitted;
    let end = cluster
        .list_offset("t", p, Cluster::LATEST, uncommitted)
        .unwrap()
        .offset;
    let mut offset = cluster
        .list_offset("t", p, Cluster::EARLIEST, uncommitted)
        .unwrap()
        .offset;
    let mut out = Vec::new();
    for _ in 0..1000 {
        if offset >= end {
            break;
        }
        let fetched = cluster
            .fetch(
                "t",
                p,
                offset,
                1 << 20,
                Duration::from_millis(100),
                uncommitted,
            )
            .unwrap();
        let mut rest = &fetched.records[..];
        while let Some(size) = tidelog::record::batch_size(rest).filter(|s| *s <= rest.len()) {
            let batch = tidelog::Batch::parse(&rest[..size]).unwrap();
            rest = &rest[size..];
            for r in batch.records() {
                let r = r.unwrap();
                if r.offset >= offset {
                    out.push(String::from_utf8_lossy(r.value.unwrap_or_default()).into_owned());
                    offset = r.offset + 1;
                }
            }
        }
    }
    out
}

#[test]
fn the_network_producer_on_librdkafkas_mock_cluster() {
    let mock = MockCluster::new(3).unwrap();
    mock.create_topic("t", 4, 3).unwrap();
    // Fewer versions than the client's 3..=12: the client must send v7 at most.
    mock.apiversion(RDKafkaApiKey::Produce, Some(3), Some(7))
        .unwrap();
    let cluster = Cluster::connect(
        ClientConfig::new(mock.bootstrap_servers())
            .set("client.id", "mock-test")
            .set("retry.backoff.ms", 10),
    )
    .unwrap();
    assert_eq!(cluster.brokers().len(), 3);
    assert_eq!(cluster.partition_count("t").unwrap(), 4);
    // The mock answers no DescribeConfigs: describing a topic says so, by name.
    match cluster.describe_topic("t") {
        Err(Error::UnsupportedApi { api, .. }) => assert_eq!(api, "DescribeConfigs"),
        other => panic!("describe_topic on the mock: {other:?}"),
    }

    let producer = Producer::new(&cluster).unwrap();
    for i in 0..100 {
        let key = format!("user-{}", i % 10);
        let value = format!("{key} {i}");
        let sent = producer
            .send("t", ProducerRecord::keyed(key.as_bytes(), value.as_bytes()))
            .unwrap();
        assert_eq!(
            sent.partition,
            partition_for_key(key.as_bytes(), 4),
            "{key}"
        );
    }

    // Partition 0 moves to broker 2, and the next two Produce requests are refused
    // with NOT_LEADER_OR_FOLLOWER: the producer asks for metadata again and repeats
    // its batches, each appended once.
    mock.partition_leader("t", 0, Some(2)).unwrap();
    mock.request_errors(
        RDKafkaApiKey::Produce,
        &[
            RDKafkaRespErr::RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION,
            RDKafkaRespErr::RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION,
        ],
    );
    let receipts: Vec<_> = (0..50)
        .map(|i| {
            let value = format!("moved {i}");
            let r = ProducerRecord::new(value.as_bytes()).partition(0);
            producer.send_async("t", r).unwrap()
        })
        .collect();
    producer.flush().unwrap();
    let offsets: Vec<i64> = receipts
        .into_iter()
        .map(|r| r.wait().unwrap().offset)
        .collect();
    assert!(offsets.windows(2).all(|w| w[1] == w[0] + 1), "{offsets:?}");

    let mut all = Vec::new();
    for p in 0..4 {
        let vs = values(&cluster, p);
        for v in vs.iter().filter(|v| v.starts_with("user-")) {
            let key = v.split(' ').next().unwrap();
            assert_eq!(partition_for_key(key.as_bytes(), 4), p, "{v}");
        }
        all.extend(vs);
    }
    let moved: Vec<&String> = all.iter().filter(|v| v.starts_with("moved")).collect();
    let expected: Vec<String> = (0..50).map(|i| format!("moved {i}")).collect();
    assert_eq!(
        moved,
        expected.iter().collect::<Vec<_>>(),
        "once each, in order"
    );
    assert_eq!(all.len(), 150);
    producer.close().unwrap();
}

/// The transactional producer over the network on the mock cluster, whose transaction
/// coordinator is broker 3: it finds the coordinator, waits out a loading and a busy
/// coordinator and one that moved, adds its partitions, commits, aborts, and reports
/// fencing at EndTxn as `Error::ProducerFenced` naming the id.
#[test]
fn the_transactional_producer_on_librdkafkas_mock_cluster() {
    let mock = MockCluster::new(3).unwrap();
    mock.create_topic("t", 4, 3).unwrap();
    mock.coordinator(MockCoordinator::Transaction("mock-txn".into()), 3)
        .unwrap();
    let cluster =
        Cluster::connect(ClientConfig::new(mock.bootstrap_servers()).set("retry.backoff.ms", 10))
            .unwrap();
    let producer = Producer::builder(&cluster)
        .transactional_id("mock-txn")
        .build()
        .unwrap();
    mock.request_errors(
        RDKafkaApiKey::InitProducerId,
        &[
            RDKafkaRespErr::RD_KAFKA_RESP_ERR_COORDINATOR_LOAD_IN_PROGRESS,
            RDKafkaRespErr::RD_KAFKA_RESP_ERR_CONCURRENT_TRANSACTIONS,
        ],
    );
    producer.init_transactions().unwrap();

    producer.begin_transaction().unwrap();
    for i in 0..10 {
        let value = format!("committed {i}");
        producer
            .send("t", ProducerRecord::new(value.as_bytes()).partition(i % 2))
            .unwrap();
    }
    mock.request_errors(
        RDKafkaApiKey::EndTxn,
        &[RDKafkaRespErr::RD_KAFKA_RESP_ERR_NOT_COORDINATOR],
    );
    producer.commit_transaction().unwrap();

    producer.begin_transaction().unwrap();
    producer
        .send("t", ProducerRecord::new(b"aborted").partition(2))
        .unwrap();
    producer.abort_transaction().unwrap();

    producer.begin_transaction().unwrap();
    producer
        .send("t", ProducerRecord::new(b"fenced").partition(3))
        .unwrap();
    mock.request_errors(
        RDKafkaApiKey::EndTxn,
        &[RDKafkaRespErr::RD_KAFKA_RESP_ERR_PRODUCER_FENCED],
    );
    match producer.commit_transaction() {
        Err(Error::ProducerFenced {
            transactional_id, ..
        }) => assert_eq!(transactional_id, "mock-txn"),
        other => panic!("expected ProducerFenced, got {other:?}"),
    }
    assert!(matches!(
        producer.begin_transaction(),
        Err(Error::ProducerFenced { .. })
    ));

    let mut committed: Vec<String> = (0..2).flat_map(|p| values(&cluster, p)).collect();
    committed.sort();
    let mut expected: Vec<String> = (0..10).map(|i| format!("committed {i}")).collect();
    expected.sort();
    assert_eq!(committed, expected);
    for (p, value) in [(2, "aborted"), (3, "fenced")] {
        assert_eq!(values(&cluster, p), [value], "partition {p}");
    }
}
