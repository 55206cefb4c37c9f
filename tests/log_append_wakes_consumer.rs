//! One wake-up mechanism: an append made straight through a partition's `PartitionLog`
//! (as a replica fetcher or a tool does, not through `Partition::append_*`) wakes a
//! consumer blocked in a long `poll`, which returns the record before its timeout.
// Reaches into the partition's log (`Partition::log`, a `testing` feature hook).
#![cfg(feature = "testing")]

use std::sync::mpsc;
use std::time::Duration;

use tidelog::{BatchBuilder, Broker, Consumer, ConsumerConfig, TopicConfig};

#[test]
fn an_append_through_the_log_wakes_a_polling_consumer() -> tidelog::Result<()> {
    let dir = tempfile::tempdir().expect("temp dir");
    let broker = Broker::open(dir.path())?;
    broker.create_topic("direct", 1, TopicConfig::new())?;
    let mut consumer = Consumer::new(&broker, ConsumerConfig::default());
    consumer.assign(&[("direct", 0)])?;
    consumer.seek("direct", 0, 0)?;
    let (tx, rx) = mpsc::channel();
    let poller = std::thread::spawn(move || {
        // Far longer than the test waits below: only a wake-up returns it in time.
        let records = consumer.poll(Duration::from_secs(600));
        let values: tidelog::Result<Vec<Vec<u8>>> = records.and_then(|r| {
            r.iter()
                .map(|rec| rec.map(|rec| rec.value.unwrap_or_default().to_vec()))
                .collect()
        });
        tx.send(values).expect("the test waits for the poll");
        consumer
    });
    let log = broker.topic("direct")?.partition(0)?.log().clone();
    let mut batch = BatchBuilder::new();
    batch.push(1_700_000_000_000, None, Some(b"straight into the log"), &[]);
    log.append(&batch.finish())?;
    let values = rx
        .recv_timeout(Duration::from_secs(120))
        .expect("the poll was not woken by the append");
    assert_eq!(values?, vec![b"straight into the log".to_vec()]);
    drop(poller.join().expect("poller"));
    broker.close()
}
