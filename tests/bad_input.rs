//! Bad input and closed handles get typed errors, never a panic or a hang.

use std::time::Duration;

use tidelog::{
    Broker, Consumer, ConsumerConfig, Error, GroupConfig, GroupConsumer, Producer, ProducerRecord,
    TopicConfig,
};

#[test]
fn unknown_topics_partitions_and_bad_names() -> tidelog::Result<()> {
    let dir = tempfile::tempdir().expect("temp dir");
    let broker = Broker::open(dir.path())?;
    assert!(matches!(broker.topic("nope"), Err(Error::UnknownTopic(_))));
    for bad in ["", ".", "..", "has space", &"x".repeat(250)] {
        assert!(
            matches!(
                broker.create_topic(bad, 1, TopicConfig::new()),
                Err(Error::InvalidTopicName { .. })
            ),
            "{bad:?} accepted"
        );
    }
    assert!(matches!(
        broker.create_topic("zero", 0, TopicConfig::new()),
        Err(Error::InvalidConfig { .. })
    ));
    assert!(matches!(
        broker.create_topic("cfg", 1, TopicConfig::new().set("retention.ms", "forever")),
        Err(Error::InvalidConfig { .. })
    ));
    let topic = broker
        .create_topic("t", 2, TopicConfig::new())
        .and_then(|()| broker.topic("t"))?;
    assert!(matches!(
        broker.create_topic("t", 2, TopicConfig::new()),
        Err(Error::TopicExists(_))
    ));
    assert!(matches!(
        topic.partition(2),
        Err(Error::UnknownPartition {
            partition: 2,
            count: 2,
            ..
        })
    ));
    assert!(matches!(
        topic.partition(-1),
        Err(Error::UnknownPartition { .. })
    ));
    assert!(matches!(
        broker.add_partitions("t", 1),
        Err(Error::InvalidConfig { .. })
    ));
    assert!(matches!(
        broker.delete_topic(tidelog::OFFSETS_TOPIC),
        Err(Error::InvalidConfig { .. })
    ));

    let producer = Producer::new(&broker)?;
    assert!(matches!(
        producer.send("nope", ProducerRecord::new(b"v")),
        Err(Error::UnknownTopic(_))
    ));
    let mut consumer = Consumer::new(&broker, ConsumerConfig::default());
    assert!(matches!(
        consumer.assign(&[("t", 7)]),
        Err(Error::UnknownPartition { .. })
    ));
    assert!(matches!(
        GroupConsumer::join(&broker, GroupConfig::new("g", &["nope"])),
        Err(Error::UnknownTopic(_))
    ));
    assert!(matches!(
        GroupConsumer::join(&broker, GroupConfig::new("", &["t"])),
        Err(Error::InvalidConfig { .. })
    ));
    // A commit without a group id is refused with a reason.
    consumer.assign(&[("t", 0)])?;
    assert!(matches!(
        consumer.commit_sync(),
        Err(Error::InvalidConfig { .. })
    ));
    Ok(())
}

#[test]
fn topics_are_created_listed_grown_and_deleted() -> tidelog::Result<()> {
    let dir = tempfile::tempdir().expect("temp dir");
    {
        let broker = Broker::open(dir.path())?;
        broker.create_topic("a", 1, TopicConfig::new().retention(None))?;
        broker.create_topic("b", 2, TopicConfig::new())?;
        let producer = Producer::new(&broker)?;
        producer.send("a", ProducerRecord::new(b"x"))?;
        broker.add_partitions("b", 5)?;
        broker.delete_topic("b")?;
        broker.create_topic("c", 3, TopicConfig::new())?;
        assert!(matches!(
            broker.delete_topic("b"),
            Err(Error::UnknownTopic(_))
        ));
    }
    // The registry survived the restart.
    let broker = Broker::open(dir.path())?;
    assert_eq!(broker.topics()?, vec!["__consumer_offsets", "a", "c"]);
    let a = broker.describe_topic("a")?;
    assert_eq!(a.partitions.len(), 1);
    assert_eq!(a.partitions[0].log_end_offset, 1);
    assert_eq!(a.log_config.retention_ms, None);
    assert_eq!(broker.topic("c")?.partition_count(), 3);
    broker.add_partitions("c", 4)?;
    assert_eq!(broker.topic("c")?.partition(3)?.log_end_offset(), 0);
    Ok(())
}

#[test]
fn closed_producer_and_broker_are_errors_not_hangs() -> tidelog::Result<()> {
    let dir = tempfile::tempdir().expect("temp dir");
    let broker = Broker::open(dir.path())?;
    broker.create_topic("t", 1, TopicConfig::new())?;
    let producer = Producer::new(&broker)?;
    producer.close()?;
    assert!(matches!(
        producer.send("t", ProducerRecord::new(b"v")),
        Err(Error::Closed(_))
    ));

    let mut consumer = Consumer::new(&broker, ConsumerConfig::default());
    consumer.assign(&[("t", 0)])?;
    // A poll blocked when the broker closes returns at once with Error::Closed.
    let closer = {
        let broker = broker.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            broker.close()
        })
    };
    let start = std::time::Instant::now();
    let mut result = consumer.poll(Duration::from_secs(30));
    while result.as_ref().is_ok_and(|r| r.is_empty()) && start.elapsed() < Duration::from_secs(30) {
        result = consumer.poll(Duration::from_secs(30));
    }
    assert!(matches!(result, Err(Error::Closed(_))), "{result:?}");
    closer.join().expect("closer thread")?;
    assert!(matches!(broker.topic("t"), Err(Error::Closed(_))));
    let other_dir = tempfile::tempdir().expect("temp dir");
    let other = Broker::open(other_dir.path())?;
    other.create_topic("t", 1, TopicConfig::new())?;
    let mut member = GroupConsumer::join(&other, GroupConfig::new("g", &["t"]))?;
    member.close();
    assert!(matches!(member.poll(Duration::ZERO), Err(Error::Closed(_))));
    Ok(())
}
