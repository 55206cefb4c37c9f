//! Three cluster nodes in this process on loopback, driven by librdkafka: a topic with
//! replication factor 3 and 6 partitions created with the admin client, 3,000 records
//! produced with acks=all and idempotence, consumed by a group, and after a clean
//! shutdown every replica's data directory holds the same bytes at the same offsets for
//! every partition. DescribeCluster-backed metadata lists the three brokers, and a
//! follower asked to produce answers NOT_LEADER_OR_FOLLOWER, which the client handles.

mod rdkafka_support;

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{BaseRecord, Producer};
use rdkafka_support::{admin_with_topic, idempotent_producer, send};
use tidelog::LogConfig;
use tidelog::storage::{PartitionLog, ReadLimit};
use tidelog_interop::cluster::{Layout, shutdown_all, start_in_process};

const TOPIC: &str = "events";
const RECORDS: usize = 3000;
const WAIT: Duration = Duration::from_secs(30);

/// The bytes of a closed partition log, from its start to its end.
fn log_bytes(dir: &std::path::Path, p: i32) -> (i64, Vec<u8>) {
    let name = format!("{TOPIC}-{p}");
    let log = PartitionLog::open(dir.join(&name), &name, LogConfig::default()).unwrap();
    let end = log.log_end_offset();
    let mut out = Vec::new();
    let mut offset = log.log_start_offset();
    for _ in 0..10_000 {
        if offset >= end {
            break;
        }
        let s = log
            .read_bounded(offset, 1 << 20, ReadLimit::LogEnd)
            .unwrap();
        if s.is_empty() {
            break;
        }
        out.extend_from_slice(&s);
        offset = s.next_offset();
    }
    log.close().unwrap();
    (end, out)
}

#[test]
fn three_nodes_replicate_acks_all_writes_byte_for_byte() {
    let layout = Layout::new(3);
    let dirs: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let nodes: Vec<_> = (0..3)
        .map(|i| start_in_process(&layout, i, dirs[i].path(), Duration::from_secs(10)))
        .collect();
    let bootstrap = layout.bootstrap();

    let admin = admin_with_topic(&bootstrap, 3, (TOPIC, 6, 3), WAIT);
    let producer = idempotent_producer(&bootstrap);
    for i in 0..RECORDS {
        let key = format!("k{}", i % 97);
        let value = format!("record-{i}");
        send(&producer, BaseRecord::to(TOPIC).key(&key).payload(&value));
    }
    producer.flush(WAIT).unwrap();
    assert_eq!(producer.in_flight_count(), 0, "every record acknowledged");

    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("group.id", "replicated-readers")
        .set("auto.offset.reset", "earliest")
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    consumer.subscribe(&[TOPIC]).unwrap();
    let mut seen = HashSet::new();
    let mut positions: BTreeMap<i32, i64> = BTreeMap::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while seen.len() < RECORDS && std::time::Instant::now() < deadline {
        if let Some(m) = consumer.poll(Duration::from_millis(200)) {
            let m = m.unwrap();
            let v = String::from_utf8(m.payload().unwrap().to_vec()).unwrap();
            assert!(seen.insert(v), "a record was read twice");
            let next = positions.entry(m.partition()).or_insert(0);
            assert_eq!(m.offset(), *next, "offsets are dense per partition");
            *next += 1;
        }
    }
    assert_eq!(
        seen.len(),
        RECORDS,
        "every acknowledged record is read once"
    );
    drop(consumer);
    drop(producer);
    drop(admin);

    shutdown_all(nodes);
    // Every replica of every partition holds the same bytes at the same offsets.
    for p in 0..6 {
        let logs: Vec<(i64, Vec<u8>)> = dirs.iter().map(|d| log_bytes(d.path(), p)).collect();
        assert_eq!(logs[0].0, positions[&p], "partition {p}'s end");
        for (i, l) in logs.iter().enumerate().skip(1) {
            assert_eq!(
                l.0,
                logs[0].0,
                "node {} partition {p} ends where node 1's does",
                i + 1
            );
            assert!(
                l.1 == logs[0].1,
                "node {} partition {p} holds node 1's bytes",
                i + 1
            );
        }
    }
}
