//! A topic deleted and created again under the same name, for the in-process clients:
//! a producer that outlives the deletion sends to the new topic, and a consumer whose
//! assignment outlives it moves to the new topic's partitions (from its reset policy:
//! the old positions mean nothing there) instead of waiting on the deleted logs.

use std::time::{Duration, Instant};

use tidelog::{
    Broker, Consumer, ConsumerConfig, OffsetReset, Producer, ProducerRecord, TopicConfig,
};

/// The values `consumer` polls within at most 10 s, until it has `n`.
fn poll_values(consumer: &mut Consumer, n: usize) -> Vec<(i32, String)> {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut got = Vec::new();
    while got.len() < n && Instant::now() < deadline {
        let records = consumer.poll(Duration::from_millis(200)).unwrap();
        for r in records.iter() {
            let r = r.unwrap();
            got.push((
                r.partition,
                String::from_utf8_lossy(r.value.unwrap()).into_owned(),
            ));
        }
    }
    got
}

#[test]
fn a_producer_and_a_consumer_move_to_the_topic_created_again() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::open(dir.path()).unwrap();
    broker.create_topic("t", 2, TopicConfig::new()).unwrap();
    let producer = Producer::builder(&broker).build().unwrap();
    for v in ["a", "b", "c", "d"] {
        producer
            .send("t", ProducerRecord::new(v.as_bytes()))
            .unwrap();
    }
    producer.flush().unwrap();
    let mut consumer = Consumer::new(
        &broker,
        ConsumerConfig::default().auto_offset_reset(OffsetReset::Earliest),
    );
    consumer.assign(&[("t", 0), ("t", 1)]).unwrap();
    assert_eq!(poll_values(&mut consumer, 4).len(), 4);

    broker.delete_topic("t").unwrap();
    // While the topic is gone, polls return nothing (and no error).
    assert!(
        consumer
            .poll(Duration::from_millis(100))
            .unwrap()
            .is_empty()
    );
    broker.create_topic("t", 1, TopicConfig::new()).unwrap();
    for v in ["after-1", "after-2"] {
        producer
            .send("t", ProducerRecord::new(v.as_bytes()))
            .unwrap();
    }
    producer.flush().unwrap();

    let got = poll_values(&mut consumer, 2);
    assert_eq!(
        got,
        vec![(0, "after-1".to_string()), (0, "after-2".to_string())]
    );
    // Partition 1 of the old topic has no successor: nothing, and no error.
    assert!(
        consumer
            .poll(Duration::from_millis(100))
            .unwrap()
            .is_empty()
    );
}
