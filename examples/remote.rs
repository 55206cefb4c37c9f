//! The same producer code on a data directory in this process and on a Kafka-API
//! cluster over the network: only the line that opens the log differs. Keyed records
//! land on the same partition both ways (Kafka's murmur2 partitioner), which the program
//! checks by reading both logs back; then the same group consumer code (two members,
//! each in its thread, committing as they go) reads every record of both logs exactly
//! once.
//!
//! With `TIDELOG_BOOTSTRAP=host:port` it uses that cluster (tidelog, Apache Kafka,
//! Redpanda: any Kafka-API cluster; the topic `remote-example` is created if missing);
//! without, it starts a tidelog node in this process on a fresh data directory.
//!
//! Run with `cargo run --release --all-features --example remote`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tidelog::consumer::Source;
use tidelog::{
    Broker, ClientConfig, Cluster, Consumer, ConsumerConfig, GroupConfig, GroupConsumer,
    IsolationLevel, OffsetReset, Producer, ProducerRecord, Server, TopicConfig,
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

/// Reads the whole topic in a new group of two members, each in its own thread and
/// committing after each poll: the same code for a data directory (`&broker`) and a
/// cluster (`&cluster`). Returns each record's (partition, offset, key), once each.
fn consume_in_group<L: Sync>(log: &L, group: &str) -> tidelog::Result<BTreeSet<(i32, i64, String)>>
where
    for<'a> &'a L: Into<Source>,
{
    // Where the topic ends now: the group reads up to there.
    let mut probe = Consumer::new(log, ConsumerConfig::default());
    let all: Vec<(&str, i32)> = (0..PARTITIONS).map(|p| (TOPIC, p)).collect();
    probe.assign(&all)?;
    let mut total = 0;
    for p in 0..PARTITIONS {
        total += probe.end_offset(TOPIC, p)?;
    }
    let seen = Mutex::new(BTreeSet::new());
    let deadline = Instant::now() + Duration::from_secs(60);
    std::thread::scope(|s| {
        let members: Vec<_> = (0..2)
            .map(|_| {
                s.spawn(|| -> tidelog::Result<()> {
                    let config = GroupConfig::new(group, &[TOPIC])
                        .auto_offset_reset(OffsetReset::Earliest)
                        .enable_auto_commit(false);
                    let mut member = GroupConsumer::join(log, config)?;
                    while (seen.lock().unwrap().len() as i64) < total {
                        if Instant::now() > deadline {
                            return Err(tidelog::Error::Timeout(format!(
                                "group {group}: records missing"
                            )));
                        }
                        let records = member.poll(Duration::from_millis(200))?;
                        for record in &records {
                            let r = record?;
                            let key = String::from_utf8_lossy(r.key.unwrap_or_default()).into();
                            if !seen.lock().unwrap().insert((r.partition, r.offset, key)) {
                                return Err(tidelog::Error::InvalidBatch(format!(
                                    "{}-{} read twice",
                                    r.partition, r.offset
                                )));
                            }
                        }
                        if !records.is_empty() {
                            member.commit_sync()?;
                        }
                    }
                    member.close();
                    Ok(())
                })
            })
            .collect();
        members
            .into_iter()
            .try_for_each(|m| m.join().expect("member thread"))
    })?;
    Ok(seen.into_inner().unwrap())
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

    // The same group consumer on both logs: every record read once, each key from its
    // partition.
    let group = format!("remote-example-{}", std::process::id());
    for (place, read) in [
        ("in process", consume_in_group(&broker, &group)?),
        ("on the cluster", consume_in_group(&cluster, &group)?),
    ] {
        assert!(
            read.iter().all(|(p, _, key)| remote[key] == *p),
            "{place}: each key read from its partition"
        );
        println!(
            "{place}: a group of two read {} records, each once",
            read.len()
        );
    }
    if let Some(server) = node {
        server.shutdown()?;
    }
    Ok(())
}
