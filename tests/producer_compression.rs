//! The in-process producer's `compression.type`, and a topic's `compression.type`
//! overriding it: what is stored is compressed with the codec Kafka's rules choose, and
//! consumers read it back.

use std::time::Duration;

use tidelog::record::batches;
use tidelog::{
    Broker, Compression, Consumer, ConsumerConfig, OffsetReset, Producer, ProducerRecord,
    TopicConfig,
};

/// The codecs of the batches stored in partition 0 of `topic`, and its values.
fn stored(broker: &Broker, topic: &str) -> (Vec<Compression>, Vec<Vec<u8>>) {
    let p = broker.topic(topic).unwrap().partition(0).unwrap();
    let slice = p.read(0, 1 << 20).unwrap();
    let codecs = batches(&slice)
        .map(|b| b.unwrap().codec().unwrap())
        .collect();
    let mut consumer = Consumer::new(
        broker,
        ConsumerConfig::default().auto_offset_reset(OffsetReset::Earliest),
    );
    consumer.assign(&[(topic, 0)]).unwrap();
    let values = consumer
        .poll(Duration::from_secs(5))
        .unwrap()
        .iter()
        .map(|r| r.unwrap().value.unwrap().to_vec())
        .collect();
    (codecs, values)
}

fn send_100(producer: &Producer, topic: &str) {
    let values: Vec<String> = (0..100)
        .map(|i| format!("event {i} of a repetitive stream"))
        .collect();
    let records: Vec<_> = values
        .iter()
        .map(|v| ProducerRecord::new(v.as_bytes()).partition(0))
        .collect();
    producer.send_batch(topic, &records).unwrap();
    producer.flush().unwrap();
}

#[test]
fn the_producer_compresses_with_its_codec_unless_the_topic_names_one() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::open(dir.path()).unwrap();
    for codec in Compression::ALL {
        let topic = format!("p-{codec}");
        broker.create_topic(&topic, 1, TopicConfig::new()).unwrap();
        let producer = Producer::builder(&broker)
            .compression(codec)
            .build()
            .unwrap();
        send_100(&producer, &topic);
        let (codecs, values) = stored(&broker, &topic);
        assert!(!codecs.is_empty());
        assert!(codecs.iter().all(|c| *c == codec), "{topic}: {codecs:?}");
        assert_eq!(values.len(), 100, "{topic}");
        assert_eq!(values[99], b"event 99 of a repetitive stream");
    }
    // The topic's compression.type wins over the producer's: lz4 for an uncompressed
    // producer, nothing for a gzip one on an `uncompressed` topic.
    for (setting, producer_codec, want) in [
        ("lz4", Compression::None, Compression::Lz4),
        ("uncompressed", Compression::Gzip, Compression::None),
        ("producer", Compression::Snappy, Compression::Snappy),
    ] {
        let topic = format!("t-{setting}");
        broker
            .create_topic(
                &topic,
                1,
                TopicConfig::new().set("compression.type", setting),
            )
            .unwrap();
        let producer = Producer::builder(&broker)
            .compression(producer_codec)
            .build()
            .unwrap();
        send_100(&producer, &topic);
        let (codecs, values) = stored(&broker, &topic);
        assert!(codecs.iter().all(|c| *c == want), "{topic}: {codecs:?}");
        assert_eq!(values.len(), 100, "{topic}");
    }
    // A topic config change applies from the next batch.
    broker
        .alter_topic_config("p-none", TopicConfig::new().set("compression.type", "zstd"))
        .unwrap();
    let producer = Producer::new(&broker).unwrap();
    send_100(&producer, "p-none");
    send_100(&producer, "p-none");
    let (codecs, values) = stored(&broker, "p-none");
    assert_eq!(codecs.last(), Some(&Compression::Zstd), "{codecs:?}");
    assert_eq!(values.len(), 300);
    broker.close().unwrap();
}
