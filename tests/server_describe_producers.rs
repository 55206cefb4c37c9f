//! DescribeProducers (key 61) over a real socket with `kafka-protocol`'s client side:
//! two idempotent producers (ids from InitProducerId) write to a partition through
//! Produce; DescribeProducers lists each with its epoch, the sequence of its last record
//! and the max timestamp of its last batch, and an empty list for a partition nobody
//! wrote; an unknown partition and an unknown topic answer UNKNOWN_TOPIC_OR_PARTITION.
#![cfg(feature = "server")]

mod server_support;

use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::describe_producers_request::TopicRequest;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, DescribeProducersRequest, DescribeProducersResponse, InitProducerIdRequest,
    InitProducerIdResponse, ProduceRequest, ProduceResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use server_support::call;
use tidelog::{BatchBuilder, Broker, Server, TopicConfig};

const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;

fn name(topic: &str) -> TopicName {
    TopicName(StrBytes::from_string(topic.into()))
}

/// A fresh producer id and epoch from the server.
fn init_producer_id(s: &mut TcpStream) -> (i64, i16) {
    let resp: InitProducerIdResponse = call(
        s,
        ApiKey::InitProducerId,
        1,
        &InitProducerIdRequest::default()
            .with_transaction_timeout_ms(60_000)
            .with_producer_id(kafka_protocol::messages::ProducerId(-1))
            .with_producer_epoch(-1),
    );
    assert_eq!(resp.error_code, 0);
    (resp.producer_id.0, resp.producer_epoch)
}

/// Produces one idempotent batch with records at `timestamps` to `topic`-0.
fn produce(s: &mut TcpStream, topic: &str, (pid, epoch): (i64, i16), seq: i32, timestamps: &[i64]) {
    let mut b = BatchBuilder::new().producer(pid, epoch, seq);
    for &ts in timestamps {
        b.push(ts, None, Some(b"v"), &[]);
    }
    let req = ProduceRequest::default()
        .with_acks(1)
        .with_timeout_ms(5000)
        .with_topic_data(vec![
            TopicProduceData::default()
                .with_name(name(topic))
                .with_partition_data(vec![
                    PartitionProduceData::default()
                        .with_index(0)
                        .with_records(Some(Bytes::from(b.finish()))),
                ]),
        ]);
    let resp: ProduceResponse = call(s, ApiKey::Produce, 8, &req);
    let p = &resp.responses[0].partition_responses[0];
    assert_eq!(p.error_code, 0, "{p:?}");
}

#[test]
fn describe_producers_lists_idempotent_producers_per_partition() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::open(dir.path()).unwrap();
    broker
        .create_topic("events", 2, TopicConfig::new())
        .unwrap();
    let server = Server::builder(broker)
        .listen(SocketAddr::from(([127, 0, 0, 1], 0)))
        .start()
        .unwrap();
    let mut s = TcpStream::connect(server.local_addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();

    let first = init_producer_id(&mut s);
    let second = init_producer_id(&mut s);
    assert_ne!(first.0, second.0);
    produce(&mut s, "events", first, 0, &[1_000, 3_000, 2_000]);
    produce(&mut s, "events", second, 0, &[5_000]);
    produce(&mut s, "events", first, 3, &[4_000, 3_500]);

    let req = DescribeProducersRequest::default().with_topics(vec![
        TopicRequest::default()
            .with_name(name("events"))
            .with_partition_indexes(vec![0, 1, 7]),
        TopicRequest::default()
            .with_name(name("nowhere"))
            .with_partition_indexes(vec![0]),
    ]);
    let resp: DescribeProducersResponse = call(&mut s, ApiKey::DescribeProducers, 0, &req);
    assert_eq!(resp.topics.len(), 2);
    let events = &resp.topics[0];
    assert_eq!(events.name, name("events"));
    let indexes: Vec<i32> = events
        .partitions
        .iter()
        .map(|p| p.partition_index)
        .collect();
    assert_eq!(indexes, vec![0, 1, 7]);

    let p0 = &events.partitions[0];
    assert_eq!(p0.error_code, 0, "{p0:?}");
    let mut listed: Vec<_> = p0
        .active_producers
        .iter()
        .map(|p| {
            (
                p.producer_id.0,
                p.producer_epoch,
                p.last_sequence,
                p.last_timestamp,
                p.coordinator_epoch,
                p.current_txn_start_offset,
            )
        })
        .collect();
    listed.sort_unstable();
    let mut expected = vec![
        // The first producer's last batch holds sequences 3-4, max timestamp 4000.
        (first.0, i32::from(first.1), 4, 4_000, -1, -1),
        (second.0, i32::from(second.1), 0, 5_000, -1, -1),
    ];
    expected.sort_unstable();
    assert_eq!(listed, expected);

    let p1 = &events.partitions[1];
    assert_eq!(p1.error_code, 0, "{p1:?}");
    assert!(p1.active_producers.is_empty(), "{p1:?}");

    let p7 = &events.partitions[2];
    assert_eq!(p7.error_code, UNKNOWN_TOPIC_OR_PARTITION, "{p7:?}");
    assert!(p7.active_producers.is_empty());

    let nowhere = &resp.topics[1];
    assert_eq!(nowhere.partitions.len(), 1);
    assert_eq!(
        nowhere.partitions[0].error_code, UNKNOWN_TOPIC_OR_PARTITION,
        "{:?}",
        nowhere.partitions[0]
    );
}
