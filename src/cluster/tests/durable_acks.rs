//! `durable.acks`: an `acks=all` write is answered only once the leader and every
//! in-sync follower have fsynced it (their recovery points are past it), where without
//! it (Kafka's default) the records may be in the page cache only.

use super::failover::{send, values};
use super::replication::{create, leader_index, part};
use super::*;
use crate::config::TopicConfig;
use crate::producer::{Acks, Producer, ProducerRecord};

#[test]
fn durable_acks_answer_a_single_node_write_once_it_is_fsynced() {
    let dir = tempfile::tempdir().unwrap();
    let broker = crate::broker::Broker::open(dir.path()).unwrap();
    for (topic, durable) in [("page-cache", false), ("durable", true)] {
        broker
            .create_topic(topic, 1, TopicConfig::new().durable_acks(durable))
            .unwrap();
        let producer = Producer::builder(&broker)
            .acks(Acks::All)
            .linger(Duration::ZERO)
            .build()
            .unwrap();
        let offset = producer
            .send(topic, ProducerRecord::new(&b"v"[..]).partition(0))
            .unwrap()
            .offset;
        let synced = broker
            .topic(topic)
            .unwrap()
            .partition(0)
            .unwrap()
            .log()
            .recovery_point();
        assert_eq!(synced > offset, durable, "{topic}: recovery point {synced}");
    }
}

#[test]
fn durable_acks_answer_once_every_in_sync_replica_fsynced() {
    let c = TestCluster::with_lag(3, 1024, Duration::from_secs(60));
    c.wait_settled();
    for (topic, durable) in [("page-cache", false), ("durable", true)] {
        let configs = vec![("durable.acks".to_string(), durable.to_string())];
        create(&c, topic, 1, configs);
        let l = leader_index(&c, topic, 0);
        let leader = part(&c, l, topic, 0);
        wait_until("leadership applied", || leader.leader_epoch().is_some());
        wait_until("a full ISR", || {
            leader.isr().is_some_and(|isr| isr.len() == 3)
        });
        let offsets = send(&c, l, topic, Acks::All, &values(topic, 3));
        let last = *offsets.last().unwrap();
        for i in 0..3 {
            let synced = part(&c, i, topic, 0).log().recovery_point();
            assert_eq!(
                synced > last,
                durable,
                "{topic}: node {} has fsynced to {synced} when offset {last} was acknowledged",
                i + 1
            );
        }
    }
}
