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
