//! Keyed records land on the partition Kafka's Java client would choose.

use tidelog::producer::partition_for_key;
use tidelog::{Broker, Producer, ProducerRecord, TopicConfig};

/// Key -> partition for 1,000 partitions, as printed by Kafka's Java `Partitioner`
/// (kafka-python's compatibility table).
const JAVA_1000: [(&[u8], i32); 6] = [
    (b"", 681),
    (b"a", 524),
    (b"ab", 434),
    (b"abc", 107),
    (b"123456789", 566),
    (b"\x00 ", 742),
];

#[test]
fn default_partitioner_matches_the_java_client() -> tidelog::Result<()> {
    for (key, want) in JAVA_1000 {
        assert_eq!(partition_for_key(key, 1000), want, "key {key:?}");
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let broker = Broker::open(dir.path())?;
    broker.create_topic("orders", 7, TopicConfig::new())?;
    let producer = Producer::new(&broker)?;
    for i in 0..500 {
        let key = format!("order-{i}");
        let meta = producer.send("orders", ProducerRecord::keyed(key.as_bytes(), b"v"))?;
        let java = (tidelog::producer::murmur2(key.as_bytes()) & 0x7fff_ffff) % 7;
        assert_eq!(meta.partition, java, "key {key}");
        // The same key always goes to the same partition.
        let again = producer.send("orders", ProducerRecord::keyed(key.as_bytes(), b"w"))?;
        assert_eq!(again.partition, meta.partition);
        assert!(again.offset > meta.offset);
    }
    Ok(())
}

#[test]
fn explicit_partition_wins_and_is_checked() -> tidelog::Result<()> {
    let dir = tempfile::tempdir().expect("temp dir");
    let broker = Broker::open(dir.path())?;
    broker.create_topic("t", 3, TopicConfig::new())?;
    let producer = Producer::new(&broker)?;
    let meta = producer.send("t", ProducerRecord::keyed(b"abc", b"v").partition(2))?;
    assert_eq!(meta.partition, 2);
    assert!(matches!(
        producer.send("t", ProducerRecord::new(b"v").partition(3)),
        Err(tidelog::Error::UnknownPartition {
            partition: 3,
            count: 3,
            ..
        })
    ));
    Ok(())
}
