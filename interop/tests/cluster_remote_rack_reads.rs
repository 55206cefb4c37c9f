//! tidelog's own network `Consumer` with `client.rack` (KIP-392): three cluster nodes in
//! this process, in racks `rack-1` to `rack-3`, with Kafka's rack-aware replica
//! selector. The consumer, of a follower's rack, is sent there by the leader and reads
//! every committed record, in order, from that follower: the follower's partition log
//! shows the bytes it handed out (a follower's log is read by nobody else), and the
//! leader's shows none handed out after the first answer (the one that named the
//! follower, which carries no records).

use std::time::{Duration, Instant};

use tidelog::admin::NewTopic;
use tidelog::{
    ClientConfig, Cluster, Consumer, ConsumerConfig, OffsetReset, Producer, ProducerRecord,
};
use tidelog_interop::cluster::{Layout, eventually, shutdown_all, start_racked_nodes};

const TOPIC: &str = "near";
const RECORDS: usize = 500;
const WAIT: Duration = Duration::from_secs(30);

#[test]
fn the_network_consumer_with_a_followers_client_rack_reads_the_committed_records_from_it() {
    let layout = Layout::new(3);
    let dirs: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let (brokers, nodes) = start_racked_nodes(&layout, &dirs);
    let bootstrap = layout.bootstrap();
    let cluster = eventually("three brokers", WAIT, || {
        Cluster::connect(ClientConfig::new(&bootstrap).set("retry.backoff.ms", 50))
            .ok()
            .filter(|c| c.brokers().len() == 3)
    });
    eventually("the topic", WAIT, || {
        let created = cluster
            .admin()
            .create_topics(&[NewTopic::new(TOPIC).partitions(1).replication_factor(3)])
            .ok()?;
        created.into_values().all(|r| r.is_ok()).then_some(())
    });
    let leader = eventually("an in-sync leader", WAIT, || {
        let t = cluster.describe_topic(TOPIC).ok()?;
        let p = t.partitions.first()?;
        (p.isr.len() == 3).then_some(p.leader?)
    });

    let producer = Producer::new(&cluster).unwrap();
    let values: Vec<String> = (0..RECORDS).map(|i| format!("record-{i}")).collect();
    for value in &values {
        producer
            .send(TOPIC, ProducerRecord::new(value.as_bytes()).partition(0))
            .unwrap();
    }
    producer.flush().unwrap();

    let follower = (1..=3).find(|id| *id != leader).unwrap();
    let bytes_out = |id: i32| {
        brokers[(id - 1) as usize]
            .metrics()
            .partitions
            .iter()
            .find(|p| p.topic == TOPIC && p.partition == 0)
            .map_or(0, |p| p.bytes_out)
    };
    assert_eq!(bytes_out(follower), 0, "nobody read the follower yet");
    let leader_before = bytes_out(leader);

    let config = ConsumerConfig::default()
        .auto_offset_reset(OffsetReset::Earliest)
        .client_rack(format!("rack-{follower}"));
    let mut consumer = Consumer::new(&cluster, config);
    consumer.assign(&[(TOPIC, 0)]).unwrap();
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while seen.len() < RECORDS && Instant::now() < deadline {
        for r in &consumer.poll(Duration::from_millis(200)).unwrap() {
            let r = r.unwrap();
            assert_eq!(r.offset, seen.len() as i64, "offsets are dense");
            seen.push(String::from_utf8(r.value.unwrap().to_vec()).unwrap());
        }
    }
    assert_eq!(seen, values, "exactly the committed records, in order");
    assert!(
        bytes_out(follower) > 0,
        "the follower of the consumer's rack served the records"
    );
    assert_eq!(
        bytes_out(leader),
        leader_before,
        "the leader handed out no records to the consumer"
    );
    consumer.close();
    drop(producer);
    drop(cluster);
    shutdown_all(nodes);
}
