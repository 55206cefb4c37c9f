//! Helpers of the tests that drive in-process cluster nodes with librdkafka: an admin
//! client that waits for the brokers and creates a topic, and an `acks=all` idempotent
//! producer that sends through a full queue.
#![allow(dead_code)]

use std::time::Duration;

use futures_executor::block_on;
use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::message::ToBytes;
use rdkafka::producer::{BaseProducer, BaseRecord};
use tidelog_interop::cluster::eventually;

/// An admin client of `bootstrap`, once its metadata lists `brokers` brokers (at most
/// `limit`), after it created `topic` with `partitions` partitions of `replicas` replicas.
///
/// # Panics
/// When the brokers are not all listed in time or the topic is not created.
pub fn admin_with_topic(
    bootstrap: &str,
    brokers: usize,
    (topic, partitions, replicas): (&str, i32, i32),
    limit: Duration,
) -> AdminClient<DefaultClientContext> {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .unwrap();
    eventually("every broker listed", limit, || {
        admin
            .inner()
            .fetch_metadata(None, Duration::from_secs(2))
            .ok()
            .filter(|m| m.brokers().len() == brokers)
    });
    let created = block_on(admin.create_topics(
        &[NewTopic::new(
            topic,
            partitions,
            TopicReplication::Fixed(replicas),
        )],
        &AdminOptions::new().operation_timeout(Some(limit)),
    ))
    .unwrap();
    for r in created {
        r.unwrap();
    }
    admin
}

/// An `acks=all`, idempotent producer of `bootstrap` lingering 5 ms.
pub fn idempotent_producer(bootstrap: &str) -> BaseProducer {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("acks", "all")
        .set("enable.idempotence", "true")
        .set("linger.ms", "5")
        .create()
        .unwrap()
}

/// Sends `record`, serving the producer's events for 10 ms each time its queue is full
/// (at most 1000 tries).
pub fn send<K: ToBytes + ?Sized, P: ToBytes + ?Sized>(
    producer: &BaseProducer,
    mut record: BaseRecord<'_, K, P>,
) {
    for _ in 0..1000 {
        match producer.send(record) {
            Ok(()) => return,
            Err((_, r)) => {
                record = r;
                producer.poll(Duration::from_millis(10));
            }
        }
    }
    panic!("the producer's queue stayed full for 1000 tries");
}
