//! tidelog's own transactional `Producer` over the network (transaction version 2: a
//! partition joins a transaction through its first Produce, and every transaction's
//! markers bring the producer a new epoch) on three `tidelog serve` child processes: a
//! topic of three one-replica partitions, one led by each node, gets many small
//! transactions back to back, every third one aborted. Each commit and abort succeeds,
//! and a read_committed `Consumer` reads each committed record exactly once, in the
//! order sent per partition, and no aborted one.
//!
//! Small transactions sent back to back put a transaction's first batches at the
//! leaders while the coordinator still writes the previous transaction's markers (the
//! ones that bring the new epoch): the window where a leader once took the new
//! transaction's first batch for a continuation of the old one and never asked the
//! coordinator to add the partition (the commit was refused as fenced, or, when the
//! other partitions were added, succeeded with that partition's records never marked
//! and never read). An abort right after `send_nowait` drops records no leader saw: the
//! coordinator must end a transaction it never heard of, at the current epoch.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use tidelog::{
    ClientConfig, Cluster, Consumer, ConsumerConfig, IsolationLevel, OffsetReset, Producer,
    ProducerRecord, TopicConfig,
};
use tidelog_interop::cluster::{Processes, eventually};

const TOPIC: &str = "remote-txn";
const PARTITIONS: i32 = 3;
const TRANSACTIONS: u32 = 300;
/// Records per partition in each transaction.
const PER_PARTITION: u32 = 4;
const WAIT: Duration = Duration::from_secs(60);

#[test]
fn back_to_back_transactions_over_three_leaders_all_commit_or_abort_exactly() {
    let root = tempfile::tempdir().unwrap();
    let nodes = Processes::start(
        tidelog_interop::tidelog_bin(),
        root.path(),
        3,
        &["--broker-session-timeout-ms", "2000"],
    );
    let bootstrap = nodes.layout.bootstrap();
    let cluster = eventually("three brokers", WAIT, || {
        Cluster::connect(ClientConfig::new(&bootstrap))
            .ok()
            .filter(|c| c.brokers().len() == 3)
    });
    eventually("the topic", WAIT, || {
        cluster
            .create_topic_if_missing(TOPIC, PARTITIONS, TopicConfig::new())
            .ok()
    });
    let leaders = eventually("a leader per partition", WAIT, || {
        let t = cluster.describe_topic(TOPIC).ok()?;
        t.partitions
            .iter()
            .map(|p| p.leader)
            .collect::<Option<Vec<i32>>>()
    });
    let mut distinct = leaders.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(
        distinct.len(),
        3,
        "each partition led by another node: {leaders:?}"
    );

    let producer = Producer::builder(&cluster)
        .transactional_id("remote-txn-writer")
        .build()
        .unwrap();
    eventually("init_transactions", WAIT, || {
        producer.init_transactions().ok()
    });
    let mut committed: BTreeMap<i32, Vec<String>> = BTreeMap::new();
    for t in 0..TRANSACTIONS {
        producer
            .begin_transaction()
            .unwrap_or_else(|e| panic!("begin transaction {t}: {e}"));
        let mut sent = Vec::new();
        for i in 0..PER_PARTITION {
            for p in 0..PARTITIONS {
                let value = format!("t{t}-p{p}-{i}");
                producer
                    .send_nowait(TOPIC, ProducerRecord::new(value.as_bytes()).partition(p))
                    .unwrap_or_else(|e| panic!("send {value}: {e}"));
                sent.push((p, value));
            }
        }
        if t % 3 == 2 {
            producer
                .abort_transaction()
                .unwrap_or_else(|e| panic!("abort transaction {t}: {e}"));
        } else {
            producer
                .commit_transaction()
                .unwrap_or_else(|e| panic!("commit transaction {t}: {e}"));
            for (p, value) in sent {
                committed.entry(p).or_default().push(value);
            }
        }
    }
    producer.close().unwrap();

    let mut reader = Consumer::new(
        &cluster,
        ConsumerConfig::default()
            .isolation_level(IsolationLevel::ReadCommitted)
            .auto_offset_reset(OffsetReset::Earliest),
    );
    let assigned: Vec<(&str, i32)> = (0..PARTITIONS).map(|p| (TOPIC, p)).collect();
    reader.assign(&assigned).unwrap();
    let want: usize = committed.values().map(Vec::len).sum();
    let mut read: BTreeMap<i32, Vec<String>> = BTreeMap::new();
    let deadline = Instant::now() + WAIT;
    let mut poll = |read: &mut BTreeMap<i32, Vec<String>>, wait| {
        let records = reader.poll(wait).unwrap();
        for r in &records {
            let r = r.unwrap();
            let value = String::from_utf8_lossy(r.value.unwrap_or_default()).into_owned();
            read.entry(r.partition).or_default().push(value);
        }
    };
    while read.values().map(Vec::len).sum::<usize>() < want && Instant::now() < deadline {
        poll(&mut read, Duration::from_millis(200));
    }
    // Nothing more than the committed records comes after them.
    poll(&mut read, Duration::from_millis(500));
    for p in 0..PARTITIONS {
        let (got, sent) = (
            read.get(&p).map_or(&[][..], Vec::as_slice),
            committed.get(&p).map_or(&[][..], Vec::as_slice),
        );
        assert!(
            got == sent,
            "partition {p}: read_committed read {} records, {} committed; first difference at \
             {:?}",
            got.len(),
            sent.len(),
            got.iter().zip(sent).position(|(a, b)| a != b)
        );
    }
    drop(nodes);
}
