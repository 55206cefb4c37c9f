//! Damaged bytes in a trusted segment reach a Kafka client as an error, never as a gap:
//! `tidelog serve` answers the Fetch of a batch whose header was damaged (in a part of
//! the segment that opening does not read) with CORRUPT_MESSAGE, which librdkafka hands
//! to the application (it would retry KAFKA_STORAGE_ERROR silently); the records before
//! the damage are delivered, none after it; and the server logs the damage once, however
//! often the client retries.

mod serve_support;

use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer as _};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};
use tidelog::{BatchBuilder, Broker, TopicConfig};

#[test]
fn a_fetch_of_damaged_bytes_is_a_corrupt_message_error_for_librdkafka() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    {
        let broker = Broker::open(&data).unwrap();
        let config = TopicConfig::new()
            .segment_bytes(8192)
            .set("index.interval.bytes", "1024");
        let p = broker
            .create_topic("t", 1, config)
            .and_then(|()| broker.topic("t"))
            .unwrap()
            .partition(0)
            .unwrap();
        for i in 0..300i64 {
            let mut b = BatchBuilder::new();
            b.push(
                1_700_000_000_000 + i,
                None,
                Some(format!("v{i}").as_bytes()),
                &[],
            );
            p.append_batch(&b.finish()).unwrap();
        }
        broker.close().unwrap();
    }
    // Damage the magic byte of a batch in the first segment before its first index
    // entry: opening walks only the headers after the last entry, so it is trusted.
    let seg = data.join("t-0").join("00000000000000000000.log");
    let victim = 3usize; // one record per batch: the batch at offset 3
    let at = tidelog::testing::damage_batch_magic(&seg, victim).unwrap();

    let serve = serve_support::start(&data, &[], None);
    let addr = serve.addr.to_string();

    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &addr)
        .set("group.id", "damaged")
        .set("enable.auto.commit", "false")
        .set("fetch.error.backoff.ms", "50")
        .create()
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset("t", 0, Offset::Beginning).unwrap();
    consumer.assign(&tpl).unwrap();
    let mut values = Vec::new();
    let mut errors = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    // Until the error came back several times: the client retries the same offset.
    while errors.len() < 5 && Instant::now() < deadline {
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(m)) => values.push(String::from_utf8_lossy(m.payload().unwrap()).into_owned()),
            Some(Err(e)) => errors.push(e),
            None => {}
        }
    }
    drop(consumer);
    let (_, stderr) = serve.stop();

    assert_eq!(values, ["v0", "v1", "v2"], "no gap, no skip: {errors:?}");
    assert!(errors.len() >= 2, "{errors:?}");
    for e in &errors {
        assert!(
            matches!(
                e,
                // Kafka error 2, CORRUPT_MESSAGE (librdkafka names it INVALID_MSG).
                KafkaError::MessageConsumption(RDKafkaErrorCode::InvalidMessage)
            ),
            "{e:?}"
        );
    }
    let logged: Vec<&String> = stderr
        .iter()
        .filter(|l| l.contains("damaged data"))
        .collect();
    assert_eq!(logged.len(), 1, "logged once: {stderr:?}");
    assert!(
        logged[0].contains("ERROR")
            && logged[0].contains("t-0")
            && logged[0].contains(&format!("at byte {at}"))
            && logged[0].contains("reading offset 3"),
        "{}",
        logged[0]
    );
}
