//! The transactional `Producer` over the network, against a tidelog server in process:
//! what it commits is read by a read_committed reader, what it aborts is not, a second
//! instance fences the first, and offsets sent to the transaction are the group's only
//! once it commits.

use std::time::{Duration, Instant};

use super::tests::serve;
use super::{ClientConfig, Cluster};
use crate::consumer::{Consumer, ConsumerConfig};
use crate::error::ErrorCode;
use crate::{
    Broker, ConsumerGroupMetadata, Error, IsolationLevel, Producer, ProducerRecord, TopicConfig,
};

fn node() -> (tempfile::TempDir, Broker, crate::ServerHandle, Cluster) {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::open(dir.path()).unwrap();
    broker.create_topic("a", 2, TopicConfig::new()).unwrap();
    broker.create_topic("b", 1, TopicConfig::new()).unwrap();
    let server = serve(&broker, "127.0.0.1:0");
    let cluster = Cluster::connect(ClientConfig::new(server.local_addr().to_string())).unwrap();
    (dir, broker, server, cluster)
}

/// The values a consumer of `level` reads from `topic`'s partitions, in partition
/// order, polled until a poll returns nothing.
fn read(broker: &Broker, topic: &str, partitions: i32, level: IsolationLevel) -> Vec<String> {
    let mut consumer = Consumer::new(broker, ConsumerConfig::default().isolation_level(level));
    let assigned: Vec<(&str, i32)> = (0..partitions).map(|p| (topic, p)).collect();
    consumer.assign(&assigned).unwrap();
    consumer.seek_to_beginning().unwrap();
    let mut got = Vec::new();
    for _ in 0..50 {
        let polled = consumer.poll(Duration::from_millis(20)).unwrap();
        if polled.is_empty() {
            break;
        }
        for r in polled.iter() {
            let r = r.unwrap();
            got.push(String::from_utf8(r.value.unwrap().to_vec()).unwrap());
        }
    }
    got.sort();
    got
}

/// `read` at read_committed until it returns `want` (the markers of a commit may land
/// just after EndTxn's answer), for at most 10 s.
fn read_committed_until(broker: &Broker, topic: &str, partitions: i32, want: &[&str]) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let got = read(broker, topic, partitions, IsolationLevel::ReadCommitted);
        if got == want || Instant::now() >= deadline {
            assert_eq!(got, want, "read_committed {topic}");
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn transactional(cluster: &Cluster, id: &str) -> Producer {
    let p = Producer::builder(cluster)
        .transactional_id(id)
        .build()
        .unwrap();
    assert_eq!(p.transactional_id(), Some(id));
    p
}

#[test]
fn commits_are_read_committed_and_aborts_are_not() {
    let (_dir, broker, server, cluster) = node();
    let p = transactional(&cluster, "writer");
    assert!(matches!(
        p.begin_transaction(),
        Err(Error::InvalidProducerState {
            state: "before init_transactions",
            ..
        })
    ));
    p.init_transactions().unwrap();
    assert!(matches!(
        p.send("a", ProducerRecord::new(b"x")),
        Err(Error::InvalidProducerState {
            state: "outside a transaction",
            ..
        })
    ));

    p.begin_transaction().unwrap();
    p.send("a", ProducerRecord::new(b"a1").partition(0))
        .unwrap();
    p.send_nowait("a", ProducerRecord::new(b"a2").partition(1))
        .unwrap();
    let pending = p.send_async("b", ProducerRecord::new(b"b1")).unwrap();
    p.commit_transaction().unwrap();
    assert!(pending.wait().unwrap().offset >= 0);
    read_committed_until(&broker, "a", 2, &["a1", "a2"]);
    read_committed_until(&broker, "b", 1, &["b1"]);

    p.begin_transaction().unwrap();
    p.send("a", ProducerRecord::new(b"gone1").partition(0))
        .unwrap();
    p.send_nowait("b", ProducerRecord::new(b"gone2")).unwrap();
    p.flush().unwrap();
    assert_eq!(
        read(&broker, "b", 1, IsolationLevel::ReadUncommitted),
        ["b1", "gone2"],
        "appended before the abort"
    );
    p.abort_transaction().unwrap();

    p.begin_transaction().unwrap();
    p.send("b", ProducerRecord::new(b"b2")).unwrap();
    p.commit_transaction().unwrap();
    read_committed_until(&broker, "a", 2, &["a1", "a2"]);
    read_committed_until(&broker, "b", 1, &["b1", "b2"]);

    // The batches are transactional, and end with markers: the last stable offset is
    // the end of the log once the commit's markers are written.
    let part = broker.topic("b").and_then(|t| t.partition(0)).unwrap();
    let slice = part.read(0, 1 << 20).unwrap();
    let (data, markers): (Vec<_>, Vec<_>) = slice.batches().partition(|b| !b.is_control());
    assert!(data.iter().all(|b| b.is_transactional()));
    assert_eq!(markers.len(), 3, "commit, abort, commit");
    assert_eq!(
        part.log().last_stable_offset().unwrap(),
        part.log_end_offset()
    );
    p.close().unwrap();
    server.shutdown().unwrap();
}

#[test]
fn a_second_producer_with_the_same_id_fences_the_first() {
    let (_dir, broker, server, cluster) = node();
    let first = transactional(&cluster, "fenced");
    first.init_transactions().unwrap();
    first.begin_transaction().unwrap();
    first
        .send("a", ProducerRecord::new(b"old").partition(0))
        .unwrap();

    // The second instance's InitProducerId aborts the first's open transaction.
    let second = transactional(&cluster, "fenced");
    second.init_transactions().unwrap();
    let err = first.commit_transaction().unwrap_err();
    match &err {
        Error::ProducerFenced {
            transactional_id, ..
        } => assert_eq!(transactional_id, "fenced"),
        other => panic!("expected ProducerFenced, got {other:?}"),
    }
    assert!(err.to_string().contains("\"fenced\""), "{err}");
    // Fatal: every later call says so.
    assert!(matches!(
        first.begin_transaction(),
        Err(Error::ProducerFenced { .. })
    ));
    assert!(matches!(
        first.abort_transaction(),
        Err(Error::ProducerFenced { .. })
    ));

    second.begin_transaction().unwrap();
    second
        .send("a", ProducerRecord::new(b"new").partition(0))
        .unwrap();
    second.commit_transaction().unwrap();
    read_committed_until(&broker, "a", 2, &["new"]);
    server.shutdown().unwrap();
}

#[test]
fn a_fenced_producers_next_send_fails_too() {
    let (_dir, _broker, server, cluster) = node();
    let first = transactional(&cluster, "send-fenced");
    first.init_transactions().unwrap();
    first.begin_transaction().unwrap();
    let second = transactional(&cluster, "send-fenced");
    second.init_transactions().unwrap();
    // A new partition: AddPartitionsToTxn answers that the epoch is fenced.
    let err = first.send("b", ProducerRecord::new(b"late")).unwrap_err();
    assert!(
        matches!(&err, Error::ProducerFenced { transactional_id, .. } if transactional_id == "send-fenced"),
        "{err:?}"
    );
    server.shutdown().unwrap();
}

#[test]
fn after_a_failed_batch_the_transaction_takes_no_record_until_it_is_aborted() {
    let (_dir, broker, server, cluster) = node();
    broker
        .create_topic("small", 1, TopicConfig::new().max_message_bytes(512))
        .unwrap();
    let p = transactional(&cluster, "failed-batch");
    p.init_transactions().unwrap();
    p.begin_transaction().unwrap();
    p.send("small", ProducerRecord::new(b"fits")).unwrap();
    let big = vec![7u8; 4096];
    let err = p.send("small", ProducerRecord::new(&big)).unwrap_err();
    assert!(!matches!(err, Error::ProducerFenced { .. }), "{err:?}");
    // The partition is in the transaction already: the refusal comes from the failed
    // batch, not from adding the partition.
    let refused = p
        .send_nowait("small", ProducerRecord::new(b"after"))
        .unwrap_err();
    assert_eq!(refused.to_string(), err.to_string());
    assert!(p.commit_transaction().is_err(), "an abortable transaction");
    p.abort_transaction().unwrap();

    p.begin_transaction().unwrap();
    p.send("small", ProducerRecord::new(b"next")).unwrap();
    p.commit_transaction().unwrap();
    read_committed_until(&broker, "small", 1, &["next"]);
    server.shutdown().unwrap();
}

#[test]
fn offsets_sent_to_a_transaction_are_the_groups_only_once_it_commits() {
    let (_dir, _broker, server, cluster) = node();
    let p = transactional(&cluster, "copier");
    p.init_transactions().unwrap();
    let group = ConsumerGroupMetadata::new("copiers");
    let committed = |cluster: &Cluster| -> Vec<(String, i32, i64)> {
        match cluster.admin().list_consumer_group_offsets("copiers") {
            Ok(offsets) => offsets
                .into_iter()
                .map(|o| (o.partition.topic, o.partition.partition, o.offset))
                .collect(),
            Err(Error::Admin(e)) if e.code == ErrorCode::GROUP_ID_NOT_FOUND => Vec::new(),
            Err(e) => panic!("offsets: {e}"),
        }
    };

    p.begin_transaction().unwrap();
    p.send("b", ProducerRecord::new(b"out")).unwrap();
    p.send_offsets_to_transaction(&[("a".into(), 0, 5), ("a".into(), 1, 7)], &group)
        .unwrap();
    assert_eq!(committed(&cluster), [], "pending until the commit");
    p.abort_transaction().unwrap();
    assert_eq!(committed(&cluster), [], "dropped by the abort");

    p.begin_transaction().unwrap();
    p.send_offsets_to_transaction(&[("a".into(), 0, 9)], &group)
        .unwrap();
    p.commit_transaction().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut got = committed(&cluster);
    while got.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
        got = committed(&cluster);
    }
    assert_eq!(got, [("a".to_string(), 0, 9)]);
    server.shutdown().unwrap();
}

#[test]
fn transactional_calls_need_a_transactional_id_and_acks_all() {
    let (_dir, _broker, server, cluster) = node();
    let plain = Producer::new(&cluster).unwrap();
    assert_eq!(plain.transactional_id(), None);
    assert!(matches!(
        plain.init_transactions(),
        Err(Error::InvalidConfig { key, .. }) if key == "transactional.id"
    ));
    assert!(matches!(
        Producer::builder(&cluster)
            .transactional_id("x")
            .acks(crate::Acks::Leader)
            .build(),
        Err(Error::InvalidConfig { key, .. }) if key == "acks"
    ));
    assert!(matches!(
        Producer::builder(&cluster).transactional_id("").build(),
        Err(Error::InvalidConfig { key, .. }) if key == "transactional.id"
    ));
    server.shutdown().unwrap();
}

/// The epochs of the data batches of `topic`-`partition`, in log order.
fn data_epochs(broker: &Broker, topic: &str, partition: i32) -> Vec<(i64, i16)> {
    let part = broker
        .topic(topic)
        .and_then(|t| t.partition(partition))
        .unwrap();
    let slice = part.read(0, 1 << 20).unwrap();
    slice
        .batches()
        .filter(|b| !b.is_control())
        .map(|b| (b.producer_id(), b.producer_epoch()))
        .collect()
}

/// Transaction version 2 (KIP-890 part 2), which the server finalizes: every EndTxn
/// bumps the producer's epoch, so the next transaction's batches carry a new epoch and
/// a batch delayed from an earlier transaction is fenced instead of joining the open
/// one (the lost write / torn transaction of the original protocol).
#[test]
fn every_transaction_end_bumps_the_epoch_and_fences_a_delayed_batch() {
    let (_dir, broker, server, cluster) = node();
    let p = transactional(&cluster, "bumped");
    p.init_transactions().unwrap();
    p.begin_transaction().unwrap();
    p.send("a", ProducerRecord::new(b"t1").partition(0))
        .unwrap();
    p.commit_transaction().unwrap();
    p.begin_transaction().unwrap();
    p.send("a", ProducerRecord::new(b"t2").partition(0))
        .unwrap();
    p.abort_transaction().unwrap();
    p.begin_transaction().unwrap();
    p.send("a", ProducerRecord::new(b"t3").partition(0))
        .unwrap();
    let epochs = data_epochs(&broker, "a", 0);
    assert_eq!(epochs.len(), 3, "{epochs:?}");
    let (id, first) = epochs[0];
    assert_eq!(
        epochs,
        [(id, first), (id, first + 1), (id, first + 2)],
        "the commit and the abort each bumped the epoch"
    );

    // A batch of the first transaction that arrives only now (its epoch, the next
    // sequence) must not join the third transaction.
    let slice = broker
        .topic("a")
        .and_then(|t| t.partition(0))
        .unwrap()
        .read(0, 1 << 20)
        .unwrap();
    let mut delayed = slice.batches().next().unwrap().as_bytes().to_vec();
    crate::record::set_producer(&mut delayed, id, first, 1);
    let err = cluster
        .produce("a", 0, &delayed.into(), -1, Some("bumped"))
        .unwrap_err();
    match &err {
        // INVALID_PRODUCER_EPOCH or PRODUCER_FENCED.
        Error::Api(e) => assert!(matches!(e.code.code(), 47 | 90), "{err}"),
        other => panic!("expected a fenced epoch, got {other:?}"),
    }
    p.commit_transaction().unwrap();
    read_committed_until(&broker, "a", 2, &["t1", "t3"]);
    p.close().unwrap();
    server.shutdown().unwrap();
}

/// With transaction version 2 the producer sends no AddOffsetsToTxn: the group's
/// coordinator adds the group to the transaction (TxnOffsetCommit v5), and the offsets
/// are the group's once the transaction commits, not before.
#[test]
fn offsets_join_a_version_2_transaction_without_add_offsets() {
    let (_dir, _broker, server, cluster) = node();
    let p = transactional(&cluster, "copier2");
    p.init_transactions().unwrap();
    let group = ConsumerGroupMetadata::new("copiers2");
    p.begin_transaction().unwrap();
    p.send_offsets_to_transaction(&[("a".into(), 0, 3)], &group)
        .unwrap();
    let pending = cluster.admin().list_consumer_group_offsets("copiers2");
    assert!(
        matches!(&pending, Ok(o) if o.is_empty())
            || matches!(&pending, Err(Error::Admin(e)) if e.code == ErrorCode::GROUP_ID_NOT_FOUND),
        "{pending:?}"
    );
    p.commit_transaction().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let got: Vec<_> = cluster
            .admin()
            .list_consumer_group_offsets("copiers2")
            .map(|o| o.into_iter().map(|o| o.offset).collect())
            .unwrap_or_default();
        if got == [3] || Instant::now() >= deadline {
            assert_eq!(got, [3]);
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    server.shutdown().unwrap();
}

/// A coordinator that finalizes no `transaction.version` (a broker before Kafka 4.0,
/// or one that keeps transaction version 0) gets transaction version 0: partitions
/// added with AddPartitionsToTxn, EndTxn below v5, Produce below v12, one epoch for
/// every transaction.
#[test]
fn a_broker_without_transaction_version_2_gets_version_0() {
    use std::sync::{Arc, Mutex};

    use bytes::BytesMut;
    use kafka_protocol::messages::add_partitions_to_txn_response::{
        AddPartitionsToTxnPartitionResult, AddPartitionsToTxnTopicResult,
    };
    use kafka_protocol::messages::find_coordinator_response::Coordinator;
    use kafka_protocol::messages::{
        AddPartitionsToTxnResponse, ApiKey, EndTxnResponse, FindCoordinatorResponse,
        InitProducerIdResponse, ProduceRequest, ProducerId, TopicName,
    };
    use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

    use super::tests::{Handler, metadata, produce_answer, scripted_node};

    let versions = vec![
        (ApiKey::ApiVersions, 0, 3),
        (ApiKey::Metadata, 0, 12),
        (ApiKey::Produce, 3, 12),
        (ApiKey::FindCoordinator, 0, 6),
        (ApiKey::InitProducerId, 0, 5),
        (ApiKey::AddPartitionsToTxn, 0, 5),
        (ApiKey::EndTxn, 0, 5),
    ];
    let addr_cell: Arc<Mutex<String>> = Arc::default();
    let calls: Arc<Mutex<Vec<(ApiKey, i16)>>> = Arc::default();
    let epochs: Arc<Mutex<Vec<i16>>> = Arc::default();
    let handler: Arc<Handler> = {
        let (addr_cell, calls, epochs) = (addr_cell.clone(), calls.clone(), epochs.clone());
        Arc::new(move |key, version, body| {
            let addr = addr_cell.lock().unwrap().clone();
            calls.lock().unwrap().push((key, version));
            let mut out = BytesMut::new();
            match key {
                ApiKey::Metadata => return Some(metadata(version, &[(1, &addr)], 1, 0)),
                ApiKey::Produce => {
                    let request = ProduceRequest::decode(body, version).unwrap();
                    let records = request.topic_data[0].partition_data[0]
                        .records
                        .clone()
                        .unwrap();
                    let b = crate::record::Batch::parse(&records).unwrap();
                    epochs.lock().unwrap().push(b.producer_epoch());
                    return Some(produce_answer(version, 0, 0));
                }
                ApiKey::FindCoordinator => {
                    let (host, port) = addr.rsplit_once(':').unwrap();
                    let (host, port) = (StrBytes::from_string(host.into()), port.parse().unwrap());
                    // v4 and up answer per key.
                    assert!(version >= 4, "FindCoordinator v{version}");
                    FindCoordinatorResponse::default()
                        .with_coordinators(vec![
                            Coordinator::default()
                                .with_key(StrBytes::from_static_str("v0"))
                                .with_node_id(kafka_protocol::messages::BrokerId(1))
                                .with_host(host)
                                .with_port(port),
                        ])
                        .encode(&mut out, version)
                        .unwrap();
                }
                ApiKey::InitProducerId => InitProducerIdResponse::default()
                    .with_producer_id(ProducerId(41))
                    .with_producer_epoch(0)
                    .encode(&mut out, version)
                    .unwrap(),
                ApiKey::AddPartitionsToTxn => AddPartitionsToTxnResponse::default()
                    .with_results_by_topic_v3_and_below(vec![
                        AddPartitionsToTxnTopicResult::default()
                            .with_name(TopicName(StrBytes::from_static_str("t")))
                            .with_results_by_partition(vec![
                                AddPartitionsToTxnPartitionResult::default()
                                    .with_partition_index(0),
                            ]),
                    ])
                    .encode(&mut out, version)
                    .unwrap(),
                ApiKey::EndTxn => EndTxnResponse::default().encode(&mut out, version).unwrap(),
                _ => return None,
            }
            Some(out)
        })
    };
    let addr = scripted_node(versions, handler);
    *addr_cell.lock().unwrap() = addr.clone();
    let cluster = Cluster::connect(ClientConfig::new(&addr)).unwrap();
    let p = transactional(&cluster, "v0");
    p.init_transactions().unwrap();
    for value in ["one", "two"] {
        p.begin_transaction().unwrap();
        p.send("t", ProducerRecord::new(value.as_bytes())).unwrap();
        p.commit_transaction().unwrap();
    }
    assert_eq!(*epochs.lock().unwrap(), [0, 0], "one epoch");
    let calls = calls.lock().unwrap().clone();
    let of = |key: ApiKey| -> Vec<i16> {
        calls
            .iter()
            .filter(|(k, _)| *k == key)
            .map(|(_, v)| *v)
            .collect()
    };
    assert_eq!(of(ApiKey::AddPartitionsToTxn), [3, 3], "{calls:?}");
    assert_eq!(of(ApiKey::EndTxn), [4, 4], "{calls:?}");
    // The broker takes Produce v12, but v12 makes the leader add the partition to the
    // transaction (transaction version 2): a version 0 transaction sends v11, as
    // Kafka's client does.
    assert_eq!(of(ApiKey::Produce), [11, 11], "{calls:?}");
}
