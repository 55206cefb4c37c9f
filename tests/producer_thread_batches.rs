//! Each sending thread fills its own batches: a synchronous send appends the thread's
//! earlier records with it, in order; a thread that ends leaves its open batch to the
//! linger thread or to `flush`; a partitioner that itself sends through the producer
//! neither deadlocks nor panics.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tidelog::producer::Partitioner;
use tidelog::{Broker, Producer, ProducerRecord, TopicConfig};

fn log_end(broker: &Broker, topic: &str) -> tidelog::Result<i64> {
    Ok(broker.topic(topic)?.partition(0)?.log_end_offset())
}

/// Sends `n` records to `topic` from a new thread, without waiting, and lets it end.
fn send_from_a_thread(producer: &Producer, topic: &'static str, n: u8) -> tidelog::Result<()> {
    let producer = producer.clone();
    std::thread::spawn(move || -> tidelog::Result<()> {
        for i in 0..n {
            producer.send_nowait(topic, ProducerRecord::new(&[i]))?;
        }
        Ok(())
    })
    .join()
    .expect("sender thread")
}

#[test]
fn a_sync_send_carries_the_threads_earlier_records() -> tidelog::Result<()> {
    let dir = tempfile::tempdir().expect("temp dir");
    let broker = Broker::open(dir.path())?;
    broker.create_topic("t", 1, TopicConfig::new())?;
    let producer = Producer::builder(&broker)
        .linger(Duration::from_secs(60))
        .build()?;
    let first = producer.send_async("t", ProducerRecord::new(b"a"))?;
    producer.send_nowait("t", ProducerRecord::new(b"b"))?;
    assert!(!first.is_done(), "linger 60 s: nothing appended yet");
    let third = producer.send("t", ProducerRecord::new(b"c"))?;
    assert_eq!(third.offset, 2);
    assert!(first.is_done(), "appended with the synchronous send");
    assert_eq!(first.wait()?.offset, 0);
    assert_eq!(log_end(&broker, "t")?, 3);
    Ok(())
}

#[test]
fn an_ended_threads_batch_is_appended_by_flush_and_by_linger() -> tidelog::Result<()> {
    let dir = tempfile::tempdir().expect("temp dir");
    let broker = Broker::open(dir.path())?;
    broker.create_topic("slow", 1, TopicConfig::new())?;
    broker.create_topic("fast", 1, TopicConfig::new())?;

    // Linger 60 s: the ended thread's records wait for flush.
    let producer = Producer::builder(&broker)
        .linger(Duration::from_secs(60))
        .build()?;
    send_from_a_thread(&producer, "slow", 10)?;
    producer.flush()?;
    assert_eq!(log_end(&broker, "slow")?, 10);

    // Linger 10 ms: the linger thread appends them without a flush.
    let producer = Producer::builder(&broker)
        .linger(Duration::from_millis(10))
        .build()?;
    send_from_a_thread(&producer, "fast", 5)?;
    let deadline = Instant::now() + Duration::from_secs(10);
    while log_end(&broker, "fast")? < 5 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(log_end(&broker, "fast")?, 5);
    producer.close()?;
    Ok(())
}

/// Sends a copy of every record it places to the topic "audit", through the producer
/// it partitions for.
struct Auditing {
    producer: Arc<Mutex<Option<Producer>>>,
}

impl Partitioner for Auditing {
    fn partition(
        &self,
        topic: &str,
        _key: Option<&[u8]>,
        value: Option<&[u8]>,
        _partition_count: i32,
    ) -> i32 {
        if topic != "audit"
            && let Some(p) = self.producer.lock().expect("lock").as_ref()
        {
            p.send_nowait("audit", ProducerRecord::new(value.unwrap_or_default()))
                .expect("audit send");
        }
        0
    }
}

#[test]
fn a_partitioner_that_sends_through_the_producer() -> tidelog::Result<()> {
    let dir = tempfile::tempdir().expect("temp dir");
    let broker = Broker::open(dir.path())?;
    broker.create_topic("main", 1, TopicConfig::new())?;
    broker.create_topic("audit", 1, TopicConfig::new())?;
    let slot = Arc::new(Mutex::new(None));
    let producer = Producer::builder(&broker)
        .partitioner(Auditing {
            producer: Arc::clone(&slot),
        })
        .build()?;
    *slot.lock().expect("lock") = Some(producer.clone());
    for i in 0..3u8 {
        assert_eq!(
            producer.send("main", ProducerRecord::new(&[i]))?.offset,
            i64::from(i)
        );
    }
    producer.flush()?;
    assert_eq!(log_end(&broker, "audit")?, 3);
    // Break the cycle partitioner -> producer.
    slot.lock().expect("lock").take();
    producer.close()?;
    Ok(())
}
