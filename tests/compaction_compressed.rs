//! Compaction of a topic whose batches are compressed: the cleaner decompresses them,
//! keeps the latest record of each key, and writes the survivors back compressed with
//! the batch's own codec, keeping every offset.
// Reaches into the partition's log (`Partition::log`, a `testing` feature hook).
#![cfg(feature = "testing")]

use std::collections::BTreeMap;
use std::time::Duration;

use tidelog::record::batches;
use tidelog::{
    Broker, CleanupPolicy, Compression, Consumer, ConsumerConfig, OffsetReset, Producer,
    ProducerRecord, TopicConfig,
};

#[test]
fn compaction_keeps_the_latest_value_per_key_in_batches_of_the_same_codec() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::open(dir.path()).unwrap();
    let config = TopicConfig::new()
        .cleanup_policy(CleanupPolicy::Compact)
        .segment_bytes(600);
    broker.create_topic("state", 1, config).unwrap();
    let producer = Producer::builder(&broker)
        .compression(Compression::Lz4)
        .build()
        .unwrap();
    // 20 rounds over 10 keys, one batch per round: many sealed segments.
    let mut latest = BTreeMap::new();
    for round in 0..20 {
        let values: Vec<(String, String)> = (0..10)
            .map(|k| {
                (
                    format!("key-{k}"),
                    format!("round {round} of key {k}: some payload"),
                )
            })
            .collect();
        let records: Vec<_> = values
            .iter()
            .map(|(k, v)| ProducerRecord::keyed(k.as_bytes(), v.as_bytes()).partition(0))
            .collect();
        let sent = producer.send_batch("state", &records).unwrap();
        for ((k, v), meta) in values.iter().zip(sent) {
            latest.insert(k.clone(), (meta.offset, v.clone()));
        }
    }
    producer.flush().unwrap();
    let partition = broker.topic("state").unwrap().partition(0).unwrap();
    assert!(
        partition.segment_count() > 3,
        "{} segments",
        partition.segment_count()
    );
    let outcome = partition.log().compact(i64::MAX / 2).unwrap();
    assert!(outcome.records_removed > 100, "{outcome:?}");

    // Every stored batch is still lz4 and the offsets of the survivors are unchanged.
    let slice = partition.read(0, 1 << 20).unwrap();
    for b in batches(&slice) {
        assert_eq!(b.unwrap().codec().unwrap(), Compression::Lz4);
    }
    let mut consumer = Consumer::new(
        &broker,
        ConsumerConfig::default().auto_offset_reset(OffsetReset::Earliest),
    );
    consumer.assign(&[("state", 0)]).unwrap();
    let mut seen = BTreeMap::new();
    for _ in 0..20 {
        let polled = consumer.poll(Duration::from_millis(200)).unwrap();
        if polled.is_empty() {
            break;
        }
        for r in polled.iter() {
            let r = r.unwrap();
            let k = String::from_utf8(r.key.unwrap().to_vec()).unwrap();
            let v = String::from_utf8(r.value.unwrap().to_vec()).unwrap();
            seen.insert(k, (r.offset, v)); // later records of a key replace earlier ones
        }
    }
    assert_eq!(seen, latest);
    // Only the active segment may still hold older values of a key.
    let total: usize = batches(&partition.read(0, 1 << 20).unwrap())
        .map(|b| b.unwrap().record_count() as usize)
        .sum();
    assert!(total < 200 - 100, "{total} records left of 200");
    broker.close().unwrap();
}
