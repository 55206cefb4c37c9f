//! Three cluster nodes in this process, in racks `rack-1` to `rack-3`, with Kafka's
//! rack-aware replica selector: a librdkafka consumer with `client.rack` of a follower's
//! rack is sent there by the leader (KIP-392) and reads every committed record, in
//! order, from that follower (whose partition log then shows the bytes it handed out:
//! a follower's log is read by nobody else).

mod rdkafka_support;

use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{BaseRecord, Producer};
use rdkafka::{Offset, TopicPartitionList};
use rdkafka_support::{admin_with_topic, idempotent_producer, send};
use tidelog_interop::cluster::{Layout, eventually, shutdown_all, start_racked_nodes};

const TOPIC: &str = "near";
const RECORDS: usize = 500;
const WAIT: Duration = Duration::from_secs(30);

#[test]
fn a_consumer_with_a_followers_client_rack_reads_the_committed_records_from_it() {
    let layout = Layout::new(3);
    let dirs: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let (brokers, nodes) = start_racked_nodes(&layout, &dirs);
    let bootstrap = layout.bootstrap();
    let admin = admin_with_topic(&bootstrap, 3, (TOPIC, 1, 3), WAIT);
    let producer = idempotent_producer(&bootstrap);
    let values: Vec<String> = (0..RECORDS).map(|i| format!("record-{i}")).collect();
    for value in &values {
        send(&producer, BaseRecord::<(), _>::to(TOPIC).payload(value));
    }
    producer.flush(WAIT).unwrap();
    assert_eq!(producer.in_flight_count(), 0, "every record acknowledged");

    let leader = eventually("a leader", WAIT, || {
        let m = admin
            .inner()
            .fetch_metadata(Some(TOPIC), Duration::from_secs(2))
            .ok()?;
        let p = m.topics().first()?.partitions().first()?;
        (p.leader() > 0 && p.isr().len() == 3).then_some(p.leader())
    });
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

    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("group.id", "near-readers")
        .set("client.rack", format!("rack-{follower}"))
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    let mut assignment = TopicPartitionList::new();
    assignment
        .add_partition_offset(TOPIC, 0, Offset::Beginning)
        .unwrap();
    consumer.assign(&assignment).unwrap();
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while seen.len() < RECORDS && Instant::now() < deadline {
        if let Some(m) = consumer.poll(Duration::from_millis(200)) {
            let m = m.unwrap();
            assert_eq!(m.offset(), seen.len() as i64, "offsets are dense");
            seen.push(String::from_utf8(m.payload().unwrap().to_vec()).unwrap());
        }
    }
    assert_eq!(seen, values, "exactly the committed records, in order");
    assert!(
        bytes_out(follower) > 0,
        "the follower of the consumer's rack served the records"
    );
    drop(consumer);
    drop(producer);
    drop(admin);
    shutdown_all(nodes);
}
