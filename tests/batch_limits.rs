//! Batches respect the topic's `max.message.bytes` whatever the producer's `batch_size`;
//! a single record too large for it fails with `MessageTooLarge`, alone.

use std::time::Duration;

use tidelog::{Broker, Error, Producer, ProducerRecord, TopicConfig};

#[test]
fn batches_are_cut_below_max_message_bytes() -> tidelog::Result<()> {
    let dir = tempfile::tempdir().expect("temp dir");
    let broker = Broker::open(dir.path())?;
    broker.create_topic("small", 1, TopicConfig::new().max_message_bytes(1000))?;
    let producer = Producer::builder(&broker)
        .batch_size(1 << 20)
        .linger(Duration::from_secs(60))
        .build()?;
    let value = [1u8; 100];
    let receipts: Vec<_> = (0..100)
        .map(|_| producer.send_async("small", ProducerRecord::new(&value)))
        .collect::<tidelog::Result<_>>()?;
    producer.flush()?;
    for (i, r) in receipts.into_iter().enumerate() {
        assert_eq!(r.wait()?.offset, i as i64);
    }
    let big = [2u8; 2000];
    match producer.send("small", ProducerRecord::new(&big)) {
        Err(Error::MessageTooLarge { .. }) => {}
        other => panic!("expected MessageTooLarge, got {other:?}"),
    }
    // The failure is the big record's alone: the next small one is stored.
    assert_eq!(
        producer.send("small", ProducerRecord::new(&value))?.offset,
        100
    );
    Ok(())
}
