//! Exactly once through a consume-transform-produce loop of tidelog's own network
//! clients (a transactional `Producer` and a `Consumer` on a `Cluster`) on three
//! `tidelog serve` child processes, where the node killed mid-transaction coordinates
//! both the transaction and the loop's consumer group: the case librdkafka cannot
//! follow (see `cluster_transactions_copy.rs`).
//!
//! - a transactional producer copies every record of a three-partition input topic to
//!   an output topic, each batch committed with the consumer's next offsets
//!   (`send_offsets_to_transaction`); every third transaction is aborted, and the loop
//!   goes back to the group's committed offsets, as an application does;
//! - with a batch's records written, the node that leads both the transactional id's
//!   `__transaction_state` partition and the group's `__consumer_offsets` partition is
//!   killed with SIGKILL; the loop goes on with whatever the offsets and the commit
//!   answered (committed by the successors, or aborted and copied again from the
//!   committed offsets);
//! - a read_committed consumer reads each input record's copy exactly once, and the
//!   group's offsets are at the input's end.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use tidelog::{
    ClientConfig, Cluster, Consumer, ConsumerConfig, ConsumerGroupMetadata, IsolationLevel,
    OffsetReset, Producer, ProducerRecord,
};
use tidelog_interop::cluster::eventually;
use tidelog_interop::transactions::{
    CopyClients, coordinator, copy_loop, group_coordinator, three_nodes_with,
};

const INPUT: &str = "rcopy-in";
const OUTPUT: &str = "rcopy-out";
const PARTITIONS: i32 = 3;
/// Input records per partition.
const PER_PARTITION: i64 = 30;
/// Records a transaction copies at most.
const BATCH: usize = 10;
const ID: &str = "remote-copier";
const WAIT: Duration = Duration::from_secs(60);

fn copier(cluster: &Cluster) -> Producer {
    let p = Producer::builder(cluster)
        .transactional_id(ID)
        .build()
        .expect("a transactional producer");
    eventually("init_transactions", WAIT, || p.init_transactions().ok());
    p
}

/// tidelog's copier and consumer of the group, and the cluster (for a new copier).
struct Clients {
    producer: Producer,
    consumer: Consumer,
    group: ConsumerGroupMetadata,
    cluster: Cluster,
}

impl CopyClients for Clients {
    type Error = tidelog::Error;

    /// Up to [`BATCH`]; the consumer is put back at `next` where a poll brought more.
    fn poll_batch(&mut self, next: &mut BTreeMap<i32, i64>) -> Vec<(i32, i64, String)> {
        let mut batch = Vec::new();
        let mut empty = 0;
        let mut left = Vec::new();
        while batch.len() < BATCH && empty < 3 {
            let records = match self.consumer.poll(Duration::from_millis(300)) {
                Ok(records) if !records.is_empty() => records,
                // A killed node's partitions answer errors until their leaders move.
                _ => {
                    empty += 1;
                    continue;
                }
            };
            for r in records.iter().flatten() {
                let at = next.entry(r.partition).or_insert(0);
                if r.offset == *at && batch.len() < BATCH {
                    *at += 1;
                    let value = String::from_utf8_lossy(r.value.unwrap_or_default()).into_owned();
                    batch.push((r.partition, r.offset, value));
                } else if r.offset >= *at {
                    left.push(r.partition);
                }
            }
        }
        left.dedup();
        for p in left {
            self.consumer.seek(INPUT, p, next[&p]).unwrap();
        }
        batch
    }

    /// Once the group's coordinator answers.
    fn committed(&self) -> BTreeMap<i32, i64> {
        eventually("the group's committed offsets", WAIT, || {
            (0..PARTITIONS)
                .map(|p| Some((p, self.consumer.committed(INPUT, p).ok()?.unwrap_or(0))))
                .collect::<Option<BTreeMap<i32, i64>>>()
        })
    }

    fn seek(&mut self, offsets: &BTreeMap<i32, i64>) {
        for (p, offset) in offsets {
            self.consumer.seek(INPUT, *p, *offset).unwrap();
        }
    }

    fn transaction(
        &mut self,
        batch: &[(i32, i64, String)],
        abort: bool,
        step: &mut dyn FnMut(&str),
    ) -> tidelog::Result<()> {
        let p = &self.producer;
        p.begin_transaction()?;
        let mut next = Vec::new();
        for (partition, offset, value) in batch {
            let copy = format!("out-{value}");
            p.send_nowait(
                OUTPUT,
                ProducerRecord::new(copy.as_bytes()).partition(*partition),
            )?;
            next.push((INPUT.to_string(), *partition, offset + 1));
        }
        p.flush()?;
        step("flushed");
        p.send_offsets_to_transaction(&next, &self.group)?;
        step("offsets sent");
        if abort {
            p.abort_transaction()
        } else {
            p.commit_transaction()
        }
    }

    /// Aborts; a new copier where that fails.
    fn recover(&mut self, _: tidelog::Error, start: Instant, trace: &mut Vec<String>) {
        if let Err(e) = self.producer.abort_transaction() {
            trace.push(format!("  abort failed: {e}"));
            self.producer = copier(&self.cluster);
            trace.push(format!("  a new copier at {:?}", start.elapsed()));
        }
    }
}

#[test]
fn a_copy_loop_is_exactly_once_when_both_its_coordinators_are_killed() {
    let root = tempfile::tempdir().unwrap();
    let (mut nodes, admin, _) = three_nodes_with(root.path(), &[INPUT, OUTPUT], PARTITIONS);
    drop(admin);
    let bootstrap = nodes.layout.bootstrap();
    let cluster = eventually("three brokers", WAIT, || {
        Cluster::connect(ClientConfig::new(&bootstrap))
            .ok()
            .filter(|c| c.brokers().len() == 3)
    });
    let seeder = Producer::builder(&cluster).build().unwrap();
    let mut input = Vec::new();
    for partition in 0..PARTITIONS {
        for i in 0..PER_PARTITION {
            let v = format!("in-{partition}-{i}");
            seeder
                .send(
                    INPUT,
                    ProducerRecord::new(v.as_bytes()).partition(partition),
                )
                .unwrap_or_else(|e| panic!("seed {v}: {e}"));
            input.push(v);
        }
    }
    seeder.close().unwrap();

    let producer = copier(&cluster);
    let node = coordinator(&nodes.layout.addr(0), ID).expect("a transaction coordinator");
    let victim = (node - 1) as usize;
    // The group's coordinator is the same node, so the kill takes both coordinators.
    let group_id = (0..100)
        .map(|n| format!("remote-copier-group-{n}"))
        .find(|g| group_coordinator(&nodes.layout.addr(0), g) == Some(node))
        .expect("a group coordinated by the transaction coordinator's node");
    let mut consumer = Consumer::new(
        &cluster,
        ConsumerConfig::default()
            .group_id(group_id.clone())
            .isolation_level(IsolationLevel::ReadCommitted)
            .auto_offset_reset(OffsetReset::Earliest),
    );
    let assigned: Vec<(&str, i32)> = (0..PARTITIONS).map(|p| (INPUT, p)).collect();
    consumer.assign(&assigned).unwrap();
    let mut clients = Clients {
        producer,
        consumer,
        group: ConsumerGroupMetadata::new(group_id),
        cluster: cluster.clone(),
    };

    let end: BTreeMap<i32, i64> = (0..PARTITIONS).map(|p| (p, PER_PARTITION)).collect();
    let kill = (victim, "the coordinators' node");
    copy_loop(&mut clients, &mut nodes, kill, &end, 2 * WAIT);
    clients.producer.close().unwrap();

    let mut expected: Vec<String> = input.iter().map(|v| format!("out-{v}")).collect();
    expected.sort();
    let mut reader = Consumer::new(
        &cluster,
        ConsumerConfig::default()
            .isolation_level(IsolationLevel::ReadCommitted)
            .auto_offset_reset(OffsetReset::Earliest),
    );
    let outputs: Vec<(&str, i32)> = (0..PARTITIONS).map(|p| (OUTPUT, p)).collect();
    reader.assign(&outputs).unwrap();
    let mut seen = Vec::new();
    let mut poll = |seen: &mut Vec<String>, wait| {
        if let Ok(records) = reader.poll(wait) {
            for r in records.iter().flatten() {
                seen.push(String::from_utf8_lossy(r.value.unwrap_or_default()).into_owned());
            }
        }
    };
    let read_until = Instant::now() + WAIT;
    while seen.len() < expected.len() && Instant::now() < read_until {
        poll(&mut seen, Duration::from_millis(200));
    }
    // Nothing more than the committed copies comes after them.
    poll(&mut seen, Duration::from_millis(500));
    seen.sort();
    assert_eq!(seen, expected, "each input record copied exactly once");
}
