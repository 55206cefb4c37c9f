//! Leader epochs and failover in process, each built deterministically by cutting
//! followers off their leaders (`pause_fetchers`) instead of racing a crash:
//! - consumers (in process and over the network) and ListOffsets never see a record
//!   above the high watermark;
//! - a leader that took writes nobody copied and then died comes back, truncates its
//!   divergent tail by leader epoch and converges byte for byte with the new leader,
//!   which answers OffsetForLeaderEpoch (and fences stale or unknown epochs);
//! - an idempotent batch retried on the new leader after a failover is not appended
//!   twice.

use std::net::SocketAddr;

use bytes::Bytes;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    BrokerId, FetchRequest, ListOffsetsRequest, OffsetForLeaderEpochRequest, ProduceRequest,
    TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::replication::{broker, bytes_to, create, leader_index, part};
use super::*;
use crate::cluster::client::Client;
use crate::consumer::{Consumer, ConsumerConfig};
use crate::producer::{Acks, Producer, ProducerRecord};
use crate::record::BatchBuilder;

const CALL: Duration = Duration::from_secs(10);

pub(super) fn addr(c: &TestCluster, i: usize) -> SocketAddr {
    c.nodes[i].as_ref().unwrap().local_addr()
}

fn tname(t: &str) -> TopicName {
    TopicName(StrBytes::from_string(t.to_string()))
}

pub(super) fn pause(c: &TestCluster, i: usize, paused: bool) {
    c.node(i).replica_manager().pause_fetchers(paused);
}

pub(super) fn send(
    c: &TestCluster,
    i: usize,
    topic: &str,
    acks: Acks,
    values: &[String],
) -> Vec<i64> {
    let producer = Producer::builder(&broker(c, i))
        .acks(acks)
        .linger(Duration::ZERO)
        .build()
        .unwrap();
    values
        .iter()
        .map(|v| {
            producer
                .send(topic, ProducerRecord::new(v.as_bytes()).partition(0))
                .unwrap()
                .offset
        })
        .collect()
}

pub(super) fn values(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}

/// A network consumer's fetch of partition 0 from `offset`: (error, high watermark,
/// offset after the last record returned).
fn net_fetch(client: &mut Client, topic: &str, offset: i64) -> (i16, i64, i64) {
    let request = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(0)
        .with_min_bytes(0)
        .with_max_bytes(1 << 20)
        .with_session_epoch(-1)
        .with_topics(vec![
            FetchTopic::default()
                .with_topic(tname(topic))
                .with_partitions(vec![
                    FetchPartition::default()
                        .with_partition(0)
                        .with_fetch_offset(offset)
                        .with_current_leader_epoch(-1)
                        .with_partition_max_bytes(1 << 20),
                ]),
        ]);
    let r = client.call(&request, 11, CALL).unwrap();
    let p = &r.responses[0].partitions[0];
    let mut next = offset;
    if let Some(records) = &p.records {
        for b in crate::record::batches(records) {
            next = b.unwrap().last_offset() + 1;
        }
    }
    (p.error_code, p.high_watermark, next)
}

#[test]
fn consumers_never_see_records_above_the_high_watermark() {
    // A long lag time: the followers stay in the ISR while they are cut off.
    let c = TestCluster::with_lag(3, 1024, Duration::from_secs(60));
    c.wait_settled();
    create(&c, "hw", 1, Vec::new());
    let l = leader_index(&c, "hw", 0);
    let leader = part(&c, l, "hw", 0);
    wait_until("leadership applied", || leader.leader_epoch().is_some());
    send(&c, l, "hw", Acks::All, &values("committed", 5));
    for i in (0..3).filter(|i| *i != l) {
        pause(&c, i, true);
    }
    // acks=1: in the leader's log, not committed.
    send(&c, l, "hw", Acks::Leader, &values("pending", 3));
    assert_eq!((leader.log_end_offset(), leader.high_watermark()), (8, 5));

    let mut consumer = Consumer::new(&broker(&c, l), ConsumerConfig::default());
    consumer.assign(&[("hw", 0)]).unwrap();
    consumer.seek_to_beginning().unwrap();
    let mut seen = 0;
    for _ in 0..5 {
        seen += consumer.poll(Duration::from_millis(100)).unwrap().count();
    }
    assert_eq!(
        seen, 5,
        "the in-process consumer stops at the high watermark"
    );
    consumer.seek_to_end().unwrap();
    assert_eq!(
        consumer.position("hw", 0).unwrap(),
        5,
        "the end is the high watermark"
    );

    let mut client = Client::new(addr(&c, l).to_string(), "hw-test");
    assert_eq!(net_fetch(&mut client, "hw", 0), (0, 5, 5));
    assert_eq!(
        net_fetch(&mut client, "hw", 5),
        (0, 5, 5),
        "nothing above it"
    );
    let latest = client
        .call(
            &ListOffsetsRequest::default()
                .with_replica_id(BrokerId(-1))
                .with_topics(vec![
                    ListOffsetsTopic::default()
                        .with_name(tname("hw"))
                        .with_partitions(vec![
                            ListOffsetsPartition::default()
                                .with_partition_index(0)
                                .with_timestamp(-1),
                        ]),
                ]),
            5,
            CALL,
        )
        .unwrap();
    assert_eq!(
        latest.topics[0].partitions[0].offset, 5,
        "ListOffsets latest"
    );

    // The followers fetch again: the records are committed and visible.
    for i in (0..3).filter(|i| *i != l) {
        pause(&c, i, false);
    }
    wait_until("the high watermark reaches the log end", || {
        leader.high_watermark() == 8
    });
    assert_eq!(net_fetch(&mut client, "hw", 5), (0, 8, 8));
    let mut more = 0;
    for _ in 0..5 {
        more += consumer.poll(Duration::from_millis(100)).unwrap().count();
    }
    assert_eq!(more, 3);
    c.shutdown();
}

#[test]
fn a_divergent_tail_is_truncated_by_leader_epoch_and_the_logs_converge() {
    // A 30 s lag time, as in the idempotent retry below: with the test clusters' 1 s, a
    // busy machine could let the leader shrink its ISR to itself between the pause and
    // the halt, and then no replica could be elected.
    let mut c = TestCluster::with_lag(3, 1024, WAIT);
    c.wait_settled();
    create(&c, "div", 1, Vec::new());
    let l = leader_index(&c, "div", 0);
    let old = part(&c, l, "div", 0);
    wait_until("leadership applied", || old.leader_epoch().is_some());
    let first_epoch = old.leader_epoch().unwrap();
    send(&c, l, "div", Acks::All, &values("a", 10));
    for i in 0..3 {
        let p = part(&c, i, "div", 0);
        wait_until("every replica at 10", || p.high_watermark() == 10);
    }
    // The followers are cut off; the leader takes writes nobody copies, and dies
    // before the ISR could shrink.
    for i in (0..3).filter(|i| *i != l) {
        pause(&c, i, true);
    }
    send(&c, l, "div", Acks::Leader, &values("lost", 5));
    assert_eq!(old.log_end_offset(), 15);
    drop(old);
    c.halt(l);
    let survivor = (0..3).find(|i| *i != l).unwrap();
    wait_until("a new leader", || {
        let img = c.node(survivor).image();
        let p = &img.topic("div").unwrap().partitions[0];
        p.leader != NO_LEADER && p.leader != l as i32 + 1
    });
    for i in (0..3).filter(|i| *i != l) {
        pause(&c, i, false);
    }
    let n = leader_index(&c, "div", 0);
    let new_leader = part(&c, n, "div", 0);
    wait_until("the new leadership applied", || {
        new_leader.leader_epoch().is_some_and(|e| e > first_epoch)
    });
    let new_epoch = new_leader.leader_epoch().unwrap();
    assert_eq!(
        send(&c, n, "div", Acks::All, &values("b", 3)),
        vec![10, 11, 12]
    );

    // OffsetForLeaderEpoch on the new leader.
    let mut client = Client::new(addr(&c, n).to_string(), "epoch-test");
    let ask = |client: &mut Client, current: i32, epoch: i32| {
        let r = client
            .call(
                &OffsetForLeaderEpochRequest::default()
                    .with_replica_id(BrokerId(-1))
                    .with_topics(vec![
                        OffsetForLeaderTopic::default()
                            .with_topic(tname("div"))
                            .with_partitions(vec![
                                OffsetForLeaderPartition::default()
                                    .with_partition(0)
                                    .with_current_leader_epoch(current)
                                    .with_leader_epoch(epoch),
                            ]),
                    ]),
                4,
                CALL,
            )
            .unwrap();
        let p = &r.topics[0].partitions[0];
        (p.error_code, p.leader_epoch, p.end_offset)
    };
    assert_eq!(
        ask(&mut client, new_epoch, first_epoch),
        (0, first_epoch, 10)
    );
    assert_eq!(ask(&mut client, new_epoch, new_epoch), (0, new_epoch, 13));
    assert_eq!(ask(&mut client, -1, new_epoch + 5), (0, new_epoch, 13));
    assert_eq!(
        ask(&mut client, first_epoch, first_epoch).0,
        ResponseError::FencedLeaderEpoch.code()
    );
    assert_eq!(
        ask(&mut client, new_epoch + 1, first_epoch).0,
        ResponseError::UnknownLeaderEpoch.code()
    );
    let f = (0..3).find(|i| *i != l && *i != n).unwrap();
    let mut follower = Client::new(addr(&c, f).to_string(), "epoch-test");
    assert_eq!(
        ask(&mut follower, -1, first_epoch).0,
        ResponseError::NotLeaderOrFollower.code()
    );

    // The old leader comes back: its tail (10..15 of the old epoch) goes, and it
    // copies the new leader's records.
    c.restart(l);
    wait_until("the restarted node has the topic", || {
        broker(&c, l)
            .topic("div")
            .is_ok_and(|t| t.partition(0).is_ok())
    });
    let back = part(&c, l, "div", 0);
    let expected = bytes_to(&new_leader, 13);
    wait_until("the old leader converges", || {
        back.log_end_offset() == 13 && bytes_to(&back, 13) == expected
    });
    assert_eq!(
        back.log().epoch_entries().unwrap(),
        new_leader.log().epoch_entries().unwrap()
    );
    let mut consumer = Consumer::new(&broker(&c, n), ConsumerConfig::default());
    consumer.assign(&[("div", 0)]).unwrap();
    consumer.seek_to_beginning().unwrap();
    let mut got = Vec::new();
    for _ in 0..10 {
        for r in consumer.poll(Duration::from_millis(100)).unwrap().iter() {
            got.push(String::from_utf8(r.unwrap().value.unwrap().to_vec()).unwrap());
        }
        if got.len() >= 13 {
            break;
        }
    }
    let mut want = values("a", 10);
    want.extend(values("b", 3));
    assert_eq!(got, want, "no record of the lost tail survives");
    c.shutdown();
}

#[test]
fn a_retried_idempotent_batch_is_not_duplicated_after_a_failover() {
    // A 30 s lag time: a follower slow on a busy machine stays in the ISR. With the
    // test clusters' 1 s, the leader could shrink its ISR to itself before it dies,
    // leaving no replica to elect (or acknowledge records only it has).
    let mut c = TestCluster::with_lag(3, 1024, WAIT);
    c.wait_settled();
    create(&c, "idem", 1, Vec::new());
    let l = leader_index(&c, "idem", 0);
    let leader = part(&c, l, "idem", 0);
    wait_until("leadership applied", || leader.leader_epoch().is_some());
    let producer_id = 4242i64;
    let batch = |seq: i32, v: &str| {
        let mut b = BatchBuilder::new().producer(producer_id, 0, seq);
        b.push(1_000, None, Some(v.as_bytes()), &[]);
        Bytes::from(b.finish())
    };
    let produce = |client: &mut Client, records: Bytes| {
        let r = client
            .call(
                &ProduceRequest::default()
                    .with_acks(-1)
                    .with_timeout_ms(10_000)
                    .with_topic_data(vec![
                        TopicProduceData::default()
                            .with_name(tname("idem"))
                            .with_partition_data(vec![
                                PartitionProduceData::default()
                                    .with_index(0)
                                    .with_records(Some(records)),
                            ]),
                    ]),
                8,
                CALL,
            )
            .unwrap();
        let p = &r.responses[0].partition_responses[0];
        (p.error_code, p.base_offset)
    };
    let mut client = Client::new(addr(&c, l).to_string(), "idem-test");
    assert_eq!(produce(&mut client, batch(0, "zero")), (0, 0));
    assert_eq!(produce(&mut client, batch(1, "one")), (0, 1));
    // Every replica in sync first: whichever follower is elected has both records.
    wait_until("every replica of idem in sync", || {
        c.node(l).image().topic("idem").unwrap().partitions[0]
            .isr
            .len()
            == 3
    });
    // The leader dies after acknowledging; the producer did not get the answer of its
    // last batch and retries it on the new leader.
    drop(leader);
    c.halt(l);
    let survivor = (0..3).find(|i| *i != l).unwrap();
    wait_until("a new leader", || {
        let img = c.node(survivor).image();
        let p = &img.topic("idem").unwrap().partitions[0];
        p.leader != NO_LEADER && p.leader != l as i32 + 1
    });
    let n = leader_index(&c, "idem", 0);
    let new_leader = part(&c, n, "idem", 0);
    wait_until("the new leadership applied", || {
        new_leader.leader_epoch().is_some()
    });
    let mut client = Client::new(addr(&c, n).to_string(), "idem-test");
    assert_eq!(
        produce(&mut client, batch(1, "one")),
        (0, 1),
        "the retry is answered with the first append's offset"
    );
    assert_eq!(produce(&mut client, batch(2, "two")), (0, 2));
    assert_eq!(new_leader.log_end_offset(), 3, "no duplicate appended");
    c.shutdown();
}
