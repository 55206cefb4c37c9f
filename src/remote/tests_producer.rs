//! The `Producer` over the network, against a tidelog server in process and a
//! scripted node that loses an answer.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiKey, BrokerId, InitProducerIdResponse, ProduceRequest, ProducerId,
};
use kafka_protocol::protocol::{Decodable, Encodable};

use super::tests::{
    Handler, batches_of, fetch_t, metadata, metadata_naming_t, produce_answer, scripted_node, serve,
};
use super::{ClientConfig, Cluster};
use crate::error::ErrorCode;
use crate::producer::{RemoteProducer, partition_for_key};
use crate::{Acks, Broker, Error, Producer, ProducerRecord, TopicConfig};

fn node_with_topic(partitions: i32) -> (tempfile::TempDir, Broker, crate::ServerHandle) {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::open(dir.path()).unwrap();
    broker
        .create_topic("t", partitions, TopicConfig::new())
        .unwrap();
    let server = serve(&broker, "127.0.0.1:0");
    (dir, broker, server)
}

/// A scripted node 1, leader of every partition, that gives out producer id `id` at
/// epoch `epoch` and answers each Produce request with `produce(version, body)` (`None`
/// loses the answer); its address.
fn idempotent_leader(
    id: i64,
    epoch: i16,
    produce: impl Fn(i16, &mut Bytes) -> Option<bytes::BytesMut> + Send + Sync + 'static,
) -> String {
    let versions = vec![
        (ApiKey::ApiVersions, 0, 3),
        (ApiKey::Metadata, 0, 12),
        (ApiKey::Produce, 3, 12),
        (ApiKey::InitProducerId, 0, 4),
    ];
    let addr_cell: Arc<Mutex<String>> = Arc::default();
    let handler: Arc<Handler> = {
        let addr_cell = addr_cell.clone();
        Arc::new(move |key, version, body| match key {
            ApiKey::Metadata => {
                let addr = addr_cell.lock().unwrap().clone();
                Some(metadata(version, &[(1, &addr)], 1, 0))
            }
            ApiKey::InitProducerId => {
                let mut out = bytes::BytesMut::new();
                InitProducerIdResponse::default()
                    .with_producer_id(ProducerId(id))
                    .with_producer_epoch(epoch)
                    .encode(&mut out, version)
                    .unwrap();
                Some(out)
            }
            ApiKey::Produce => produce(version, body),
            _ => None,
        })
    };
    let addr = scripted_node(versions, handler);
    *addr_cell.lock().unwrap() = addr.clone();
    addr
}

#[test]
fn keyed_records_land_where_kafka_and_the_in_process_producer_put_them() {
    let (_dir, broker, server) = node_with_topic(4);
    let cluster = Cluster::connect(ClientConfig::new(server.local_addr().to_string())).unwrap();
    let remote = Producer::new(&cluster).unwrap();
    let local = Producer::new(&broker).unwrap();
    for i in 0..40u32 {
        let key = format!("user-{i}");
        let headers = [("h", &b"v"[..])];
        let r = ProducerRecord::keyed(key.as_bytes(), b"x")
            .timestamp(1_000 + i64::from(i))
            .headers(&headers);
        let sent = remote.send("t", r).unwrap();
        assert_eq!(
            sent.partition,
            partition_for_key(key.as_bytes(), 4),
            "{key}"
        );
        assert_eq!(
            local.send("t", r).unwrap().partition,
            sent.partition,
            "{key}"
        );
        assert_eq!(sent.timestamp, 1_000 + i64::from(i));
    }
    let mut seen = 0;
    for p in 0..4 {
        let fetched = fetch_t(&cluster, p, Duration::ZERO);
        for b in batches_of(&fetched.records) {
            for (_, value, key, _) in &b.records {
                let key = key.as_deref().unwrap();
                assert_eq!(partition_for_key(key, 4), p);
                assert_eq!(value, b"x");
                seen += 1;
            }
        }
    }
    assert_eq!(seen, 80, "40 sent over the network, 40 in process");
    assert!(matches!(
        remote.send("nope", ProducerRecord::new(b"x")),
        Err(Error::UnknownTopic(_))
    ));
    assert!(matches!(
        remote.send("t", ProducerRecord::new(b"x").partition(9)),
        Err(Error::UnknownPartition { partition: 9, .. })
    ));
    remote.close().unwrap();
    assert!(matches!(
        remote.send("t", ProducerRecord::new(b"x")),
        Err(Error::Closed(_))
    ));
    server.shutdown().unwrap();
}

#[test]
fn batches_per_partition_and_numbers_them_for_idempotence() {
    let (_dir, _broker, server) = node_with_topic(2);
    let cluster = Cluster::connect(ClientConfig::new(server.local_addr().to_string())).unwrap();
    let producer = Producer::builder(&cluster)
        .linger(Duration::from_secs(30))
        .batch_size(1 << 20)
        .build()
        .unwrap();
    let receipts: Vec<_> = (0..100u32)
        .map(|i| {
            let r = ProducerRecord::new(b"v").partition((i % 2) as i32);
            producer.send_async("t", r).unwrap()
        })
        .collect();
    assert!(!receipts[0].is_done(), "lingering for 30 s");
    producer.flush().unwrap();
    for (i, r) in receipts.into_iter().enumerate() {
        let m = r.wait().unwrap();
        assert_eq!((m.partition, m.offset), ((i % 2) as i32, (i / 2) as i64));
    }
    // A second round: its batch continues the partition's sequence.
    let last = producer
        .send_async("t", ProducerRecord::new(b"w").partition(0))
        .unwrap();
    producer.flush().unwrap();
    assert_eq!(last.wait().unwrap().offset, 50);
    let fetched = fetch_t(&cluster, 0, Duration::from_millis(0));
    let batches = batches_of(&fetched.records);
    assert_eq!(batches.len(), 2, "one batch per flush");
    let (pid, epoch, seq) = batches[0].producer;
    assert!(pid >= 0 && epoch >= 0, "an idempotent producer id");
    assert_eq!(seq, 0);
    assert_eq!(batches[1].producer, (pid, epoch, 50));
    server.shutdown().unwrap();
}

/// Batches that fill faster than `linger.ms` do not wake the dispatcher one by one to
/// time their linger: it wakes by itself before theirs runs out, for the one it
/// times already (a thread wake-up per batch, on the path of every record, before).
#[test]
fn batches_that_fill_within_a_linger_do_not_wake_the_dispatcher_each() {
    let (_dir, _broker, server) = node_with_topic(1);
    let cluster = Cluster::connect(ClientConfig::new(server.local_addr().to_string())).unwrap();
    let config = crate::ProducerConfig {
        linger: Duration::from_millis(50),
        batch_size: 100,
        ..crate::ProducerConfig::default()
    };
    let producer = super::producer::ClusterProducer::start(cluster.clone(), config).unwrap();
    let value = [7u8; 60];
    // The first record looks the leader up; the rest go to a partition with a leader.
    let first = producer
        .send_async("t", &ProducerRecord::new(&value).partition(0))
        .unwrap();
    first.wait().unwrap();
    let before = producer.dispatcher_kicks();
    let receipts: Vec<_> = (0..200)
        .map(|_| {
            producer
                .send_async("t", &ProducerRecord::new(&value).partition(0))
                .unwrap()
        })
        .collect();
    let kicks = producer.dispatcher_kicks() - before;
    for (i, r) in receipts.into_iter().enumerate() {
        assert_eq!(r.wait().unwrap().offset, i as i64 + 1, "record {i}");
    }
    // One batch per record (each fills the 100-byte batch): 200 new batches.
    let batches = batches_of(&fetch_t(&cluster, 0, Duration::ZERO).records).len();
    assert!(batches >= 100, "{batches} batches");
    assert!(
        kicks <= 20,
        "the dispatcher was woken {kicks} times for {batches} batches"
    );
    producer.close().unwrap();
    server.shutdown().unwrap();
}

/// A linger longer than a clock can count (`Duration::MAX`) lingers until a flush.
#[test]
fn a_linger_past_any_clock_lingers_until_a_flush() {
    let (_dir, _broker, server) = node_with_topic(1);
    let cluster = Cluster::connect(ClientConfig::new(server.local_addr().to_string())).unwrap();
    let producer = Producer::builder(&cluster)
        .linger(Duration::MAX)
        .build()
        .unwrap();
    let first = producer.send_async("t", ProducerRecord::new(b"a")).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let second = producer.send_async("t", ProducerRecord::new(b"b")).unwrap();
    assert!(!first.is_done(), "lingering");
    producer.flush().unwrap();
    assert_eq!(first.wait().unwrap().offset, 0);
    assert_eq!(second.wait().unwrap().offset, 1);
    producer.close().unwrap();
    server.shutdown().unwrap();
}

#[test]
fn acks_zero_and_one_are_kafkas() {
    let (_dir, _broker, server) = node_with_topic(1);
    let cluster = Cluster::connect(ClientConfig::new(server.local_addr().to_string())).unwrap();
    let fire = Producer::builder(&cluster)
        .acks(Acks::None)
        .build()
        .unwrap();
    let m = fire.send("t", ProducerRecord::new(b"a")).unwrap();
    assert_eq!((m.partition, m.offset), (0, -1));
    assert_eq!(
        fire.send_async("t", ProducerRecord::new(b"b"))
            .unwrap()
            .wait()
            .unwrap()
            .offset,
        -1
    );
    fire.flush().unwrap();
    let leader = Producer::builder(&cluster)
        .acks(Acks::Leader)
        .build()
        .unwrap();
    let m = leader.send("t", ProducerRecord::new(b"c")).unwrap();
    assert_eq!(m.offset, 2, "after the two acks=0 records");
    let fetched = fetch_t(&cluster, 0, Duration::from_millis(0));
    let batches = batches_of(&fetched.records);
    assert_eq!(
        batches.last().unwrap().producer.0,
        -1,
        "acks=1 is not idempotent"
    );
    server.shutdown().unwrap();
}

/// A node that appends a batch but loses its first answer: the producer sends the same
/// batch again (same producer id and sequence) on a new connection, and the node
/// answers the retry with the first append's offset, as Kafka's leader does.
#[test]
fn a_lost_answer_is_retried_with_the_same_sequence() {
    let produced: Arc<Mutex<Vec<(i64, i32)>>> = Arc::default();
    let answered = Arc::new(AtomicUsize::new(0));
    let addr = {
        let (produced, answered) = (produced.clone(), answered.clone());
        idempotent_leader(77, 3, move |version, body| {
            let request = ProduceRequest::decode(body, version).unwrap();
            let records: Bytes = request.topic_data[0].partition_data[0]
                .records
                .clone()
                .unwrap();
            let b = crate::record::Batch::parse(&records).unwrap();
            produced
                .lock()
                .unwrap()
                .push((b.producer_id(), b.base_sequence()));
            // The first answer is lost.
            (answered.fetch_add(1, Ordering::SeqCst) > 0).then(|| produce_answer(version, 0, 5))
        })
    };
    let cluster = Cluster::connect(
        ClientConfig::new(&addr)
            .set("request.timeout.ms", 300)
            .set("retry.backoff.ms", 10),
    )
    .unwrap();
    let producer = Producer::new(&cluster).unwrap();
    let m = producer.send("t", ProducerRecord::new(b"once")).unwrap();
    assert_eq!(m.offset, 5);
    assert_eq!(
        *produced.lock().unwrap(),
        [(77, 0), (77, 0)],
        "the same batch twice"
    );
}

/// What the pipelining node saw: base sequences in the order Produce requests came,
/// and the values it appended.
#[derive(Default)]
struct Pipelined {
    received: Vec<i32>,
    log: Vec<String>,
    next_sequence: i32,
}

/// A node that checks sequences as a Kafka leader does (the next one is appended, an
/// old one is a duplicate, one ahead is OUT_OF_ORDER_SEQUENCE_NUMBER) and refuses its
/// third Produce with NOT_ENOUGH_REPLICAS, a retriable error, while the producer has
/// more requests in flight behind it: those come back OUT_OF_ORDER_SEQUENCE_NUMBER,
/// and the producer sends them all again from the refused one, in order. Every record
/// is appended once, in the order it was sent.
#[test]
fn pipelined_batches_keep_their_order_through_a_retriable_error() {
    let seen: Arc<Mutex<Pipelined>> = Arc::default();
    let addr = {
        let seen = seen.clone();
        idempotent_leader(9, 0, move |version, body| {
            // Slow enough that the producer queues more requests meanwhile.
            std::thread::sleep(Duration::from_millis(2));
            let request = ProduceRequest::decode(body, version).unwrap();
            let records = request.topic_data[0].partition_data[0]
                .records
                .clone()
                .unwrap();
            let b = crate::record::Batch::parse(&records).unwrap();
            let mut seen = seen.lock().unwrap();
            seen.received.push(b.base_sequence());
            let offset = seen.log.len() as i64;
            let code = if seen.received.len() == 3 {
                19 // NOT_ENOUGH_REPLICAS: not appended
            } else if b.base_sequence() > seen.next_sequence {
                45 // OUT_OF_ORDER_SEQUENCE_NUMBER
            } else if b.base_sequence() < seen.next_sequence {
                46 // DUPLICATE_SEQUENCE_NUMBER
            } else {
                for r in b.records() {
                    let value = r.unwrap().value.unwrap_or_default().to_vec();
                    seen.log.push(String::from_utf8(value).unwrap());
                }
                seen.next_sequence += b.records().count() as i32;
                0
            };
            Some(produce_answer(version, code, offset))
        })
    };
    let cluster = Cluster::connect(ClientConfig::new(&addr).set("retry.backoff.ms", 10)).unwrap();
    // batch.size 64: every record is a batch of its own.
    let producer = Producer::builder(&cluster).batch_size(64).build().unwrap();
    let receipts: Vec<_> = (0..100)
        .map(|i| {
            let value = format!("v{i}");
            producer
                .send_async("t", ProducerRecord::new(value.as_bytes()))
                .unwrap()
        })
        .collect();
    producer.flush().unwrap();
    for (i, r) in receipts.into_iter().enumerate() {
        assert_eq!(r.wait().unwrap().offset, i as i64, "record {i}");
    }
    let seen = seen.lock().unwrap();
    let expected: Vec<String> = (0..100).map(|i| format!("v{i}")).collect();
    assert_eq!(seen.log, expected, "each once, in order");
    // The refused batch (sequence 2) was sent again after batches behind it: they
    // were in flight together.
    let refused_at = seen.received.iter().position(|&s| s == 2).unwrap();
    let resent_at = seen.received.iter().rposition(|&s| s == 2).unwrap();
    assert!(
        seen.received[refused_at + 1..resent_at]
            .iter()
            .any(|&s| s > 2),
        "requests in flight behind the refused one: {:?}",
        seen.received
    );
}

/// A partition whose requests in flight are at the limit keeps filling its due batch
/// (linger 0), as Kafka's producer does, instead of queueing a batch per record: with
/// one request in flight held by the node, the 20 records sent meanwhile go in one
/// batch once it answers.
#[test]
fn a_due_batch_takes_records_while_its_partition_waits_for_an_answer() {
    let counts: Arc<Mutex<Vec<usize>>> = Arc::default();
    let gate = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let addr = {
        let (counts, gate) = (counts.clone(), gate.clone());
        idempotent_leader(5, 0, move |version, body| {
            let request = ProduceRequest::decode(body, version).unwrap();
            let records = request.topic_data[0].partition_data[0]
                .records
                .clone()
                .unwrap();
            let n = crate::record::Batch::parse(&records)
                .unwrap()
                .records()
                .count();
            let offset = {
                let mut counts = counts.lock().unwrap();
                counts.push(n);
                counts.iter().sum::<usize>() - n
            };
            // The first answer waits until the test opens the gate (at most 10 s).
            for _ in 0..1000 {
                if gate.load(Ordering::SeqCst) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            Some(produce_answer(version, 0, offset as i64))
        })
    };
    let cluster = Cluster::connect(ClientConfig::new(&addr)).unwrap();
    let producer = Producer::builder(&cluster)
        .linger(Duration::ZERO)
        .max_in_flight(1)
        .build()
        .unwrap();
    let first = producer
        .send_async("t", ProducerRecord::new(b"first"))
        .unwrap();
    for _ in 0..1000 {
        if !counts.lock().unwrap().is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(
        *counts.lock().unwrap(),
        [1],
        "the first record is in flight"
    );
    // Sent one by one, with time for a batch to be sealed and queued after each.
    let receipts: Vec<_> = (0..20)
        .map(|i| {
            std::thread::sleep(Duration::from_millis(2));
            let value = format!("v{i}");
            producer
                .send_async("t", ProducerRecord::new(value.as_bytes()))
                .unwrap()
        })
        .collect();
    gate.store(true, Ordering::SeqCst);
    producer.flush().unwrap();
    assert_eq!(first.wait().unwrap().offset, 0);
    for (i, r) in receipts.into_iter().enumerate() {
        assert_eq!(r.wait().unwrap().offset, i as i64 + 1, "record {i}");
    }
    assert_eq!(
        *counts.lock().unwrap(),
        [1, 20],
        "records per Produce request"
    );
}

/// `max.in.flight.requests.per.connection` is 1 to 5 with idempotence (a Kafka leader
/// keeps the last five batches of a producer), at least 1 without.
#[test]
fn max_in_flight_is_checked() {
    let (_dir, _broker, server) = node_with_topic(1);
    let cluster = Cluster::connect(ClientConfig::new(server.local_addr().to_string())).unwrap();
    for (acks, n) in [(Acks::All, 6), (Acks::All, 0), (Acks::Leader, 0)] {
        match Producer::builder(&cluster)
            .acks(acks)
            .max_in_flight(n)
            .build()
        {
            Err(Error::InvalidConfig { key, .. }) => {
                assert_eq!(key, "max.in.flight.requests.per.connection")
            }
            other => panic!("{acks:?} with {n} in flight: {:?}", other.err()),
        }
    }
    let producer = Producer::builder(&cluster)
        .acks(Acks::Leader)
        .max_in_flight(1)
        .build()
        .unwrap();
    let m = producer.send("t", ProducerRecord::new(b"v")).unwrap();
    assert_eq!(m.offset, 0);
    server.shutdown().unwrap();
}

/// A node whose partition `t`-0 has no leader in its first Metadata answer naming `t`
/// (leader -1, a leader being elected after a node died), then node 1: the producer
/// asks again after its backoff instead of keeping the leaderless answer, and its
/// record is appended long before `delivery.timeout.ms`.
#[test]
fn a_partition_without_a_leader_is_asked_for_again() {
    let asked = Arc::new(AtomicUsize::new(0));
    let addr: Arc<Mutex<String>> = Arc::default();
    let handler: Arc<Handler> = {
        let (asked, addr) = (asked.clone(), addr.clone());
        Arc::new(move |key, version, body| match key {
            ApiKey::Metadata => {
                let me = addr.lock().unwrap().clone();
                let (names_t, mut r) = metadata_naming_t(body, version, &me);
                if names_t && asked.fetch_add(1, Ordering::SeqCst) == 0 {
                    r.topics[0].partitions[0].leader_id = BrokerId(-1);
                    r.topics[0].partitions[0].error_code = ErrorCode::LEADER_NOT_AVAILABLE.code();
                }
                let mut out = BytesMut::new();
                r.encode(&mut out, version).unwrap();
                Some(out)
            }
            ApiKey::Produce => Some(produce_answer(version, 0, 9)),
            _ => None,
        })
    };
    let versions = vec![
        (ApiKey::ApiVersions, 0, 3),
        (ApiKey::Metadata, 0, 12),
        (ApiKey::Produce, 3, 12),
    ];
    let node = scripted_node(versions, handler);
    *addr.lock().unwrap() = node.clone();
    let cluster = Cluster::connect(
        ClientConfig::new(&node)
            .set("retry.backoff.ms", 10)
            .set("delivery.timeout.ms", 5_000),
    )
    .unwrap();
    let producer = Producer::builder(&cluster)
        .acks(Acks::Leader)
        .build()
        .unwrap();
    let m = producer
        .send("t", ProducerRecord::new(b"a").partition(0))
        .unwrap();
    assert_eq!((m.partition, m.offset), (0, 9));
    assert!(
        asked.load(Ordering::SeqCst) >= 2,
        "the leaderless answer was asked again"
    );
}
