//! Replay from a point in time: a consumer seeks every partition to the first record at
//! or after a timestamp (Kafka's `offsetsForTimes`) and reads from there.
//!
//! Run with `cargo run --release --example replay_from_timestamp`.

use std::time::Duration;

use tidelog::{Broker, Consumer, ConsumerConfig, Producer, ProducerRecord, TopicConfig};

fn main() -> tidelog::Result<()> {
    let dir = tempfile::tempdir()
        .map_err(|e| tidelog::Error::io("create temporary directory", std::env::temp_dir(), e))?;
    let broker = Broker::open(dir.path())?;
    broker.create_topic_if_missing("readings", 2, TopicConfig::new())?;

    // One reading per minute over a day, with explicit CreateTime timestamps.
    let start_of_day: i64 = 1_700_000_000_000;
    let producer = Producer::new(&broker)?;
    for minute in 0..24 * 60 {
        let ts = start_of_day + minute * 60_000;
        let value = format!("minute {minute}");
        let record = ProducerRecord::keyed(b"sensor", value.as_bytes()).timestamp(ts);
        drop(producer.send_async("readings", record)?);
    }
    producer.flush()?;

    // Replay everything from 18:00 on.
    let from = start_of_day + 18 * 3_600_000;
    let mut consumer = Consumer::new(&broker, ConsumerConfig::default());
    consumer.assign(&[("readings", 0), ("readings", 1)])?;
    consumer.seek_to_timestamp(from)?;
    let mut replayed = 0;
    let mut first = None;
    loop {
        let records = consumer.poll(Duration::from_millis(200))?;
        if records.is_empty() {
            break;
        }
        for r in records.iter() {
            let r = r?;
            assert!(
                r.timestamp >= from,
                "record at {} is before the replay point",
                r.timestamp
            );
            first.get_or_insert(r.timestamp);
            replayed += 1;
        }
    }
    assert_eq!(replayed, 6 * 60, "six hours of readings");
    println!(
        "replayed {replayed} readings from {} (first at {:?})",
        from, first
    );
    Ok(())
}
