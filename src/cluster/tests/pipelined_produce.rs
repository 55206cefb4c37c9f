//! A connection's `acks=all` Produce requests wait for their replicas together: the
//! leader appends a request sent behind one still waiting (it is not held until the
//! first is answered), answers none before the in-sync replicas have its batches, and
//! answers every Produce in the order it came (an `acks=1` one behind them too); a
//! request of another kind behind them is handled only once they are answered, and sees
//! their records.

use bytes::Bytes;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, ListOffsetsRequest, ListOffsetsResponse, ProduceRequest, ProduceResponse, TopicName,
    list_offsets_request,
};
use kafka_protocol::protocol::StrBytes;

use super::failover::{addr, pause};
use super::replication::{create, leader_index, part};
use super::*;
use crate::record::BatchBuilder;
use crate::server::tests_api::Client;

fn produce(acks: i16, value: &str) -> ProduceRequest {
    let mut b = BatchBuilder::new();
    b.push(1_000, None, Some(value.as_bytes()), &[]);
    ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(60_000)
        .with_topic_data(vec![
            TopicProduceData::default()
                .with_name(TopicName(StrBytes::from_static_str("t")))
                .with_partition_data(vec![
                    PartitionProduceData::default()
                        .with_index(0)
                        .with_records(Some(Bytes::from(b.finish()))),
                ]),
        ])
}

/// The (error code, base offset) of partition 0 in a Produce answer.
fn answered(resp: &ProduceResponse) -> (i16, i64) {
    let p = &resp.responses[0].partition_responses[0];
    (p.error_code, p.base_offset)
}

#[test]
fn a_connections_acks_all_produces_wait_for_their_replicas_together_and_are_answered_in_order() {
    // No replica leaves the ISR while the followers are held.
    let c = TestCluster::with_lag(3, 1024, Duration::from_secs(120));
    c.wait_settled();
    create(&c, "t", 1, Vec::new());
    let l = leader_index(&c, "t", 0);
    let leader = part(&c, l, "t", 0);
    wait_until("t-0 led with every replica in sync", || {
        leader.leader_epoch().is_some()
            && c.node(l).image().topic("t").unwrap().partitions[0]
                .isr
                .len()
                == 3
    });
    let mut client = Client::connect(addr(&c, l));
    let first: ProduceResponse = client.call(ApiKey::Produce, 8, &produce(-1, "first"));
    assert_eq!(answered(&first), (0, 0));
    let followers: Vec<usize> = c.running().into_iter().filter(|&i| i != l).collect();
    wait_until("the followers have the first record", || {
        followers
            .iter()
            .all(|&i| part(&c, i, "t", 0).log_end_offset() == 1)
    });
    for &i in &followers {
        pause(&c, i, true);
    }

    // Three acks=all requests back to back, an acks=1 one, then a ListOffsets.
    let sent: Vec<i32> = [(-1, "a"), (-1, "b"), (-1, "c"), (1, "d")]
        .iter()
        .map(|&(acks, v)| client.send(ApiKey::Produce, 8, &produce(acks, v)))
        .collect();
    let list = ListOffsetsRequest::default()
        .with_replica_id(kafka_protocol::messages::BrokerId(-1))
        .with_topics(vec![
            list_offsets_request::ListOffsetsTopic::default()
                .with_name(TopicName(StrBytes::from_static_str("t")))
                .with_partitions(vec![
                    list_offsets_request::ListOffsetsPartition::default()
                        .with_partition_index(0)
                        .with_timestamp(-1),
                ]),
        ]);
    let list_id = client.send(ApiKey::ListOffsets, 4, &list);
    // Every request is appended while the first still waits for the replicas.
    wait_until("the four requests appended", || {
        leader.log_end_offset() == 5
    });
    // None is answered before its replicas have it, nor the acks=1 one behind them.
    std::thread::sleep(Duration::from_millis(300));
    assert!(!client.has_pending_bytes(), "a Produce was answered early");
    assert_eq!(leader.high_watermark(), 1, "the followers are held");

    for &i in &followers {
        pause(&c, i, false);
    }
    for (k, &id) in sent.iter().enumerate() {
        let (got, resp): (i32, ProduceResponse) = client.recv(8);
        assert_eq!(got, id, "answers come in the order of the requests");
        assert_eq!(answered(&resp), (0, k as i64 + 1), "{resp:?}");
    }
    let (got, resp): (i32, ListOffsetsResponse) = client.recv(4);
    assert_eq!(got, list_id);
    let p = &resp.topics[0].partitions[0];
    assert_eq!(
        (p.error_code, p.offset),
        (0, 5),
        "the ListOffsets sees every record sent before it, replicated"
    );
    c.shutdown();
}
