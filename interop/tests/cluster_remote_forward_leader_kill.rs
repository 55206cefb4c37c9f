//! The store-and-forward `Forwarder` through a remote leader's death: an embedded log
//! (a `Broker` in this process) with a topic of two partitions is forwarded to three
//! `tidelog serve` child processes (replication factor 3, `min.insync.replicas=2`);
//! while records are still being written locally and forwarded, the remote leader of
//! partition 0 is killed with SIGKILL. The forwarder catches up, and the remote topic
//! holds every local record exactly once, in local order per partition.

use std::time::{Duration, Instant};

use tidelog::forward::Forwarder;
use tidelog::{
    Broker, Consumer, ConsumerConfig, OffsetReset, Producer, ProducerRecord, TopicConfig,
};
use tidelog_interop::cluster::eventually;

mod remote_cluster_support;
use remote_cluster_support::{WAIT, config, three_nodes_with_topic};

const TOPIC: &str = "forwarded";
const PARTITIONS: i32 = 2;
const RECORDS: u32 = 4000;

/// Writes records `from..to` (value: the number) into the local topic, round-robin.
fn write(local: &Broker, from: u32, to: u32) {
    let producer = Producer::new(local).unwrap();
    for i in from..to {
        let value = i.to_string();
        producer
            .send(
                TOPIC,
                ProducerRecord::new(value.as_bytes()).partition(i as i32 % PARTITIONS),
            )
            .unwrap();
    }
    producer.flush().unwrap();
}

#[test]
fn the_forwarder_delivers_every_record_once_through_a_killed_remote_leader() {
    let root = tempfile::tempdir().unwrap();
    let (mut nodes, bootstrap, cluster, leader) =
        three_nodes_with_topic(root.path(), TOPIC, PARTITIONS);

    let dir = tempfile::tempdir().unwrap();
    let local = Broker::open(dir.path()).unwrap();
    local
        .create_topic(TOPIC, PARTITIONS, TopicConfig::new())
        .unwrap();
    write(&local, 0, RECORDS / 2);
    let forwarder = Forwarder::builder(&local, config(&bootstrap))
        .name("edge")
        .topic(TOPIC)
        .start()
        .unwrap();
    // Some records are across; then the leader of partition 0 dies with SIGKILL while
    // the rest is written and forwarded.
    eventually("records forwarded", WAIT, || {
        (forwarder.status().records_forwarded >= u64::from(RECORDS / 8)).then_some(())
    });
    nodes.kill((leader - 1) as usize);
    write(&local, RECORDS / 2, RECORDS);
    let caught_up = forwarder.wait_caught_up(WAIT * 3);
    let status = forwarder.status();
    assert!(
        caught_up,
        "the forwarder caught up: {status:?}\n{}",
        nodes.logs()
    );
    forwarder.stop().unwrap();
    assert_eq!(status.records_lost, 0);

    // The remote topic: every record once, in local order per partition.
    let mut consumer = Consumer::new(
        &cluster,
        ConsumerConfig::default().auto_offset_reset(OffsetReset::Earliest),
    );
    let all: Vec<(&str, i32)> = (0..PARTITIONS).map(|p| (TOPIC, p)).collect();
    consumer.assign(&all).unwrap();
    let mut remote: Vec<Vec<u32>> = vec![Vec::new(); PARTITIONS as usize];
    let deadline = Instant::now() + WAIT;
    while remote.iter().map(Vec::len).sum::<usize>() < RECORDS as usize && Instant::now() < deadline
    {
        let records = consumer.poll(Duration::from_millis(200)).unwrap();
        for r in &records {
            let r = r.unwrap();
            let v: u32 = std::str::from_utf8(r.value.unwrap())
                .unwrap()
                .parse()
                .unwrap();
            remote[r.partition as usize].push(v);
        }
    }
    for p in 0..PARTITIONS {
        let want: Vec<u32> = (0..RECORDS)
            .filter(|i| *i as i32 % PARTITIONS == p)
            .collect();
        let got = &remote[p as usize];
        assert_eq!(got.len(), want.len(), "partition {p}: every record, once");
        assert!(*got == want, "partition {p}: in local order, once");
    }
}
