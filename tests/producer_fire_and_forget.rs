//! Records sent without waiting for a receipt (`send_nowait`, or `send_async` with the
//! receipt dropped) are stored in order, and an append that fails for them is reported
//! by the next `flush`, once; a failure whose receipt is held goes to that receipt only.

use std::time::Duration;

use tidelog::{
    Broker, Consumer, ConsumerConfig, Error, OffsetReset, Producer, ProducerRecord, TopicConfig,
};

/// Values of every record of partition 0 of `topic`, in offset order.
fn values(broker: &Broker, topic: &str) -> tidelog::Result<Vec<Vec<u8>>> {
    let end = broker.topic(topic)?.partition(0)?.log_end_offset();
    let mut consumer = Consumer::new(
        broker,
        ConsumerConfig::default().auto_offset_reset(OffsetReset::Earliest),
    );
    consumer.assign(&[(topic, 0)])?;
    let mut out = Vec::new();
    for _ in 0..100 {
        if out.len() as i64 >= end {
            break;
        }
        for r in consumer.poll(Duration::from_secs(5))?.iter() {
            out.push(r?.value.unwrap_or_default().to_vec());
        }
    }
    Ok(out)
}

#[test]
fn fire_and_forget_stores_in_order_and_flush_reports_a_failure_once() -> tidelog::Result<()> {
    let dir = tempfile::tempdir().expect("temp dir");
    let broker = Broker::open(dir.path())?;
    broker.create_topic("t", 1, TopicConfig::new().max_message_bytes(1000))?;
    // A long linger: only a full batch or a flush appends.
    let producer = Producer::builder(&broker)
        .linger(Duration::from_secs(60))
        .build()?;
    for i in 0..50u32 {
        producer.send_nowait("t", ProducerRecord::new(&i.to_be_bytes()))?;
    }
    producer.flush()?;
    let want: Vec<Vec<u8>> = (0..50u32).map(|i| i.to_be_bytes().to_vec()).collect();
    assert_eq!(values(&broker, "t")?, want);

    // Too large for the topic: accepted into the batch, refused by the log.
    producer.send_nowait("t", ProducerRecord::new(&[7u8; 2000]))?;
    match producer.flush() {
        Err(Error::MessageTooLarge { size, max, .. }) => assert!(size > max && max == 1000),
        other => panic!("expected MessageTooLarge from flush, got {other:?}"),
    }
    // Reported once; the producer goes on.
    producer.flush()?;
    producer.send_nowait("t", ProducerRecord::new(b"after"))?;
    producer.flush()?;
    let got = values(&broker, "t")?;
    assert_eq!(got.len(), 51);
    assert_eq!(got[50], b"after");
    Ok(())
}

#[test]
fn a_held_receipt_gets_its_error_and_a_dropped_one_leaves_it_to_flush() -> tidelog::Result<()> {
    let dir = tempfile::tempdir().expect("temp dir");
    let broker = Broker::open(dir.path())?;
    broker.create_topic("t", 1, TopicConfig::new().max_message_bytes(1000))?;
    broker.create_topic("gone", 1, TopicConfig::new())?;
    let producer = Producer::builder(&broker)
        .linger(Duration::from_secs(60))
        .build()?;

    // A record too large for the topic fills a batch on its own, which is appended (and
    // refused) at once: the receipt has the error, flush does not report it again.
    let held = producer.send_async("t", ProducerRecord::new(&[1u8; 2000]))?;
    assert!(matches!(held.wait(), Err(Error::MessageTooLarge { .. })));
    producer.flush()?;
    assert_eq!(producer.send("t", ProducerRecord::new(b"small"))?.offset, 0);

    // A record whose receipt is dropped before its batch fails (here: its topic is
    // deleted meanwhile): flush reports it, once.
    drop(producer.send_async("gone", ProducerRecord::new(b"lost"))?);
    broker.delete_topic("gone")?;
    assert!(producer.flush().is_err(), "the failed append is reported");
    producer.flush()?;

    // close reports what flush would.
    producer.send_nowait("t", ProducerRecord::new(&[2u8; 2000]))?;
    assert!(matches!(
        producer.close(),
        Err(Error::MessageTooLarge { .. })
    ));
    assert_eq!(values(&broker, "t")?, vec![b"small".to_vec()]);
    Ok(())
}
