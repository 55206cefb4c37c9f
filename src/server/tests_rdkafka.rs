//! librdkafka (through the `rdkafka` crate) against the server: an idempotent producer
//! with acks=all, then a consumer reading every partition from the beginning.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::time::Duration;

use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};

use super::*;

#[test]
fn librdkafka_produces_idempotently_and_consumes_everything() {
    let dir = tempfile::tempdir().unwrap();
    let broker = crate::Broker::open(dir.path()).unwrap();
    broker
        .create_topic("rd", 3, crate::TopicConfig::new())
        .unwrap();
    let server = Server::builder(broker)
        .listen(SocketAddr::from(([127, 0, 0, 1], 0)))
        .start()
        .unwrap();
    let bootstrap = server.local_addr().to_string();

    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .set("linger.ms", "5")
        .create()
        .unwrap();
    const N: usize = 5_000;
    for i in 0..N {
        let key = format!("k{i}");
        let value = format!("v{i}");
        let mut record = BaseRecord::to("rd").key(&key).payload(&value);
        loop {
            match producer.send(record) {
                Ok(()) => break,
                Err((_, r)) => {
                    producer.poll(Duration::from_millis(10));
                    record = r;
                }
            }
        }
    }
    producer.flush(Duration::from_secs(30)).unwrap();
    assert_eq!(producer.in_flight_count(), 0);

    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("group.id", "unused")
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    for p in 0..3 {
        tpl.add_partition_offset("rd", p, Offset::Beginning)
            .unwrap();
    }
    consumer.assign(&tpl).unwrap();
    let mut seen = HashSet::new();
    // Stop after 30 s without a message (a hang, not a timing assertion).
    let mut idle = 0;
    while seen.len() < N && idle < 300 {
        match consumer.poll(Duration::from_millis(100)) {
            Some(m) => {
                idle = 0;
                let m = m.unwrap();
                let v = String::from_utf8(m.payload().unwrap().to_vec()).unwrap();
                assert!(seen.insert(v), "duplicate record");
            }
            None => idle += 1,
        }
    }
    assert_eq!(seen.len(), N);
}
