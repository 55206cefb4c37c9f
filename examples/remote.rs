//! The same producer code on a data directory in this process and on a Kafka-API
//! cluster over the network: only the line that opens the log differs. Keyed records
//! land on the same partition both ways (Kafka's murmur2 partitioner), which the program
//! checks by reading both logs back.
//!
//! With `TIDELOG_BOOTSTRAP=host:port` it uses that cluster (tidelog, Apache Kafka,
//! Redpanda: any Kafka-API cluster; the topic `remote-example` is created if missing);
//! without, it starts a tidelog node in this process on a fresh data directory.
//!
//! Run with `cargo run --release --all-features --example remote`.

use std::collections::BTreeMap;
use std::time::Duration;

use tidelog::{
    Broker, ClientConfig, Cluster, IsolationLevel, Producer, ProducerRecord, Server, TopicConfig,
};

const TOPIC: &str = "remote-example";
const PARTITIONS: i32 = 4;
const USERS: u32 = 20;
const EVENTS_PER_USER: u32 = 50;

/// Sends every user's events, keyed by user; returns each user's partition.
fn produce(producer: &Producer) -> tidelog::Result<BTreeMap<String, i32>> {
    let mut partitions = BTreeMap::new();
    let mut receipts = Vec::new();
    for event in 0..EVENTS_PER_USER {
        for user in 0..USERS {
            let key = format!("user-{user}");
            let value = format!("event {event} of {key}");
            let receipt = producer.send_async(
                TOPIC,
                ProducerRecord::keyed(key.as_bytes(), value.as_bytes()),
            )?;
            receipts.push((key, receipt));
        }
    }
    producer.flush()?;
    for (key, receipt) in receipts {
        let partition = receipt.wait()?.partition;
        if *partitions.entry(key.clone()).or_insert(partition) != partition {
            return Err(tidelog::Error::InvalidBatch(format!(
                "{key} went to two partitions"
            )));
        }
    }
    Ok(partitions)
}

/// The keys the cluster holds in each partition, in order, read over the network.
fn keys_on_cluster(cluster: &Cluster, partition: i32) -> tidelog::Result<Vec<String>> {
    let mut keys = Vec::new();
    let mut offset = cluster
        .list_offset(
            TOPIC,
            partition,
            Cluster::EARLIEST,
            IsolationLevel::ReadUncommitted,
        )?
        .offset;
    let end = cluster
        .list_offset(
            TOPIC,
            partition,
            Cluster::LATEST,
            IsolationLevel::ReadUncommitted,
        )?
        .offset;
    for _ in 0..10_000 {
        if offset >= end {
            break;
        }
        let fetched = cluster.fetch(
            TOPIC,
            partition,
            offset,
            1 << 20,
            Duration::from_millis(100),
            IsolationLevel::ReadUncommitted,
        )?;
        // Whole batches only: the last one of an answer may be cut short.
        let mut rest = &fetched.records[..];
        while let Some(size) = tidelog::record::batch_size(rest).filter(|s| *s <= rest.len()) {
            let batch = tidelog::Batch::parse(&rest[..size])?;
            rest = &rest[size..];
            for record in batch.records() {
                let record = record?;
                if record.offset >= offset {
                    keys.push(String::from_utf8_lossy(record.key.unwrap_or_default()).into());
                    offset = record.offset + 1;
                }
            }
        }
    }
    Ok(keys)
}

fn main() -> tidelog::Result<()> {
    let base = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/remote-example");
    let _ = std::fs::remove_dir_all(&base);

    // In process: the log is a data directory.
    let broker = Broker::open(base.join("local"))?;
    broker.create_topic_if_missing(TOPIC, PARTITIONS, TopicConfig::new())?;
    let local = produce(&Producer::new(&broker)?)?;

    // Over the network: the log is a cluster. Only the opening line differs.
    let (bootstrap, node) = match std::env::var("TIDELOG_BOOTSTRAP") {
        Ok(b) => (b, None),
        Err(_) => {
            let node_broker = Broker::open(base.join("node"))?;
            let server = Server::builder(node_broker).listen("127.0.0.1:0").start()?;
            (server.local_addr().to_string(), Some(server))
        }
    };
    let cluster =
        Cluster::connect(ClientConfig::new(&bootstrap).set("client.id", "remote-example"))?;
    cluster.create_topic_if_missing(TOPIC, PARTITIONS, TopicConfig::new())?;
    let before: BTreeMap<i32, usize> = (0..PARTITIONS)
        .map(|p| Ok((p, keys_on_cluster(&cluster, p)?.len())))
        .collect::<tidelog::Result<_>>()?;
    let remote = produce(&Producer::new(&cluster)?)?;

    assert_eq!(
        local, remote,
        "each key on the same partition in process and on the cluster"
    );
    for p in 0..PARTITIONS {
        let keys = keys_on_cluster(&cluster, p)?;
        let new = &keys[before[&p]..];
        assert!(
            new.iter().all(|k| remote[k] == p),
            "partition {p} holds only its keys"
        );
        let expected = remote.values().filter(|q| **q == p).count() * EVENTS_PER_USER as usize;
        assert_eq!(new.len(), expected, "partition {p}: every record once");
    }
    println!(
        "{} records to {bootstrap} and to {}: every key on the same partition both ways",
        USERS * EVENTS_PER_USER,
        broker.dir().display()
    );
    if let Some(server) = node {
        server.shutdown()?;
    }
    Ok(())
}
