//! Retention deletes records a consumer has not read yet: the consumer follows its
//! `auto_offset_reset` policy, and with `none` it gets a clear error.

use std::time::Duration;

use tidelog::{
    Broker, Consumer, ConsumerConfig, Error, OffsetReset, Producer, ProducerRecord, TopicConfig,
};

fn setup(dir: &std::path::Path) -> tidelog::Result<Broker> {
    let broker = Broker::open(dir)?;
    broker.create_topic("short", 1, TopicConfig::new().segment_bytes(1024))?;
    let producer = Producer::builder(&broker).linger(Duration::ZERO).build()?;
    for i in 0u32..200 {
        producer.send("short", ProducerRecord::new(&i.to_be_bytes()))?;
    }
    Ok(broker)
}

fn first_value(records: &tidelog::ConsumerRecords) -> Option<u32> {
    let r = records.iter().next()?.ok()?;
    Some(u32::from_be_bytes(r.value?.try_into().ok()?))
}

#[test]
fn reset_earliest_skips_to_the_new_log_start() -> tidelog::Result<()> {
    let dir = tempfile::tempdir().expect("temp dir");
    let broker = setup(dir.path())?;
    let mut c = Consumer::new(
        &broker,
        ConsumerConfig::default()
            .group_id("slow")
            .auto_offset_reset(OffsetReset::Earliest),
    );
    c.assign(&[("short", 0)])?;
    c.commit_offsets(&[("short", 0, 10)])?;
    let partition = broker.topic("short")?.partition(0)?;
    let start = partition.delete_records_before(150)?;
    assert!(
        start > 10,
        "retention did not move the log start past the commit"
    );

    let records = c.poll(Duration::from_secs(5))?;
    let first = first_value(&records).expect("records after the reset");
    assert_eq!(i64::from(first), start);
    Ok(())
}

#[test]
fn reset_none_reports_the_lost_offset() -> tidelog::Result<()> {
    let dir = tempfile::tempdir().expect("temp dir");
    let broker = setup(dir.path())?;
    let mut c = Consumer::new(
        &broker,
        ConsumerConfig::default()
            .group_id("strict")
            .auto_offset_reset(OffsetReset::None),
    );
    c.assign(&[("short", 0)])?;
    c.commit_offsets(&[("short", 0, 10)])?;
    broker
        .topic("short")?
        .partition(0)?
        .delete_records_before(150)?;
    match c.poll(Duration::from_millis(100)) {
        Err(Error::NoOffsetForPartition {
            partition, offset, ..
        }) => {
            assert_eq!(partition, "short-0");
            assert_eq!(offset, 10);
        }
        other => panic!("expected NoOffsetForPartition, got {other:?}"),
    }
    Ok(())
}

#[test]
fn retention_under_a_reading_consumer_moves_it_forward() -> tidelog::Result<()> {
    let dir = tempfile::tempdir().expect("temp dir");
    let broker = setup(dir.path())?;
    let mut c = Consumer::new(
        &broker,
        ConsumerConfig::default()
            .auto_offset_reset(OffsetReset::Earliest)
            .max_partition_fetch_bytes(1),
    );
    c.assign(&[("short", 0)])?;
    assert_eq!(first_value(&c.poll(Duration::from_secs(5))?), Some(0));
    // The consumer is at offset 1 when retention removes everything below 150.
    let start = broker
        .topic("short")?
        .partition(0)?
        .delete_records_before(150)?;
    let records = c.poll(Duration::from_secs(5))?;
    assert_eq!(first_value(&records).map(i64::from), Some(start));
    Ok(())
}
