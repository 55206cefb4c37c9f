//! The in-process transactional producer: atomic writes to several topics, what
//! read_committed and read_uncommitted consumers see of committed and aborted
//! transactions, fencing by a newer instance, calls in the wrong state, offsets
//! committed with a transaction, and a broker reopened mid-transaction.

use std::time::{Duration, Instant};

use tidelog::transaction::TransactionConfig;
use tidelog::{
    Broker, Consumer, ConsumerConfig, ConsumerGroupMetadata, Error, GroupConfig, GroupConsumer,
    IsolationLevel, Producer, ProducerRecord, TopicConfig,
};

fn txn_config() -> TransactionConfig {
    TransactionConfig {
        state_log_partitions: 3,
        abort_timed_out_interval: Duration::from_millis(50),
        ..TransactionConfig::default()
    }
}

fn open(dir: &std::path::Path) -> Broker {
    let broker = Broker::builder(dir)
        .transaction(txn_config())
        .open()
        .expect("broker");
    for t in ["a", "b"] {
        if broker.topic(t).is_err() {
            broker
                .create_topic(t, 2, TopicConfig::new())
                .expect("topic");
        }
    }
    broker
}

fn producer(broker: &Broker, id: &str) -> Producer {
    let p = Producer::builder(broker)
        .transactional_id(id)
        .build()
        .expect("producer");
    p.init_transactions().expect("init_transactions");
    p
}

/// Every value of `topic` a consumer at `level` reads, sorted.
fn read(broker: &Broker, topic: &str, level: IsolationLevel) -> Vec<String> {
    let mut c = Consumer::new(broker, ConsumerConfig::default().isolation_level(level));
    c.assign(&[(topic, 0), (topic, 1)]).expect("assign");
    c.seek_to_beginning().expect("seek");
    let mut got = Vec::new();
    for _ in 0..50 {
        let polled = c.poll(Duration::from_millis(20)).expect("poll");
        if polled.is_empty() {
            break;
        }
        for r in polled.iter() {
            let v = r.expect("record").value.expect("value").to_vec();
            got.push(String::from_utf8(v).expect("utf-8"));
        }
    }
    got.sort();
    got
}

#[test]
fn a_transaction_writes_two_topics_atomically() {
    let dir = tempfile::tempdir().expect("dir");
    let broker = open(dir.path());
    let p = producer(&broker, "atomic");
    p.begin_transaction().expect("begin");
    p.send("a", ProducerRecord::keyed(b"k1", b"a1"))
        .expect("send");
    p.send_nowait("b", ProducerRecord::keyed(b"k2", b"b1"))
        .expect("send");
    assert!(read(&broker, "a", IsolationLevel::ReadCommitted).is_empty());
    p.commit_transaction().expect("commit");
    assert_eq!(read(&broker, "a", IsolationLevel::ReadCommitted), ["a1"]);
    assert_eq!(read(&broker, "b", IsolationLevel::ReadCommitted), ["b1"]);

    p.begin_transaction().expect("begin");
    p.send("a", ProducerRecord::new(b"a2")).expect("send");
    p.send("b", ProducerRecord::new(b"b2")).expect("send");
    p.abort_transaction().expect("abort");
    assert_eq!(read(&broker, "a", IsolationLevel::ReadCommitted), ["a1"]);
    assert_eq!(read(&broker, "b", IsolationLevel::ReadCommitted), ["b1"]);
    assert_eq!(
        read(&broker, "a", IsolationLevel::ReadUncommitted),
        ["a1", "a2"]
    );
    assert_eq!(
        read(&broker, "b", IsolationLevel::ReadUncommitted),
        ["b1", "b2"]
    );

    // The producer goes on after an abort; a batch of many records is one append.
    p.begin_transaction().expect("begin");
    let values: Vec<String> = (0..100).map(|i| format!("m{i:03}")).collect();
    for v in &values {
        p.send_nowait("a", ProducerRecord::new(v.as_bytes()).partition(0))
            .expect("send");
    }
    p.commit_transaction().expect("commit");
    let mut want: Vec<String> = values.clone();
    want.push("a1".into());
    want.sort();
    assert_eq!(read(&broker, "a", IsolationLevel::ReadCommitted), want);
}

#[test]
fn a_newer_instance_fences_the_older_one() {
    let dir = tempfile::tempdir().expect("dir");
    let broker = open(dir.path());
    let old = producer(&broker, "fenced-id");
    old.begin_transaction().expect("begin");
    old.send("a", ProducerRecord::new(b"zombie")).expect("send");
    let new = producer(&broker, "fenced-id");
    // The old instance's open transaction was aborted by the new one's init.
    assert!(read(&broker, "a", IsolationLevel::ReadCommitted).is_empty());
    let fenced = |r: tidelog::Result<()>| match r {
        Err(Error::ProducerFenced {
            transactional_id, ..
        }) => assert_eq!(transactional_id, "fenced-id"),
        other => panic!("expected ProducerFenced, got {other:?}"),
    };
    fenced(old.send("a", ProducerRecord::new(b"late")).map(|_| ()));
    fenced(old.commit_transaction());
    fenced(old.begin_transaction());
    new.begin_transaction().expect("begin");
    new.send("a", ProducerRecord::new(b"fresh")).expect("send");
    new.commit_transaction().expect("commit");
    assert_eq!(read(&broker, "a", IsolationLevel::ReadCommitted), ["fresh"]);
}

#[test]
fn a_stale_instance_cannot_append_to_a_partition_of_its_transaction() {
    let dir = tempfile::tempdir().expect("dir");
    let broker = open(dir.path());
    // A long linger: the batch stays open until the flush.
    let old = Producer::builder(&broker)
        .transactional_id("zombie-append")
        .linger(Duration::from_secs(60))
        .build()
        .expect("producer");
    old.init_transactions().expect("init");
    old.begin_transaction().expect("begin");
    // The partition is in the old transaction; its batch is still open.
    old.send_nowait("a", ProducerRecord::new(b"buffered").partition(0))
        .expect("send");
    let _new = producer(&broker, "zombie-append");
    // The abort marker carries the bumped epoch: the partition refuses the old one.
    match old.flush() {
        Err(Error::ProducerFenced {
            transactional_id, ..
        }) => assert_eq!(transactional_id, "zombie-append"),
        other => panic!("expected ProducerFenced, got {other:?}"),
    }
    assert!(read(&broker, "a", IsolationLevel::ReadUncommitted).is_empty());
}

#[test]
fn calls_in_the_wrong_state_are_refused() {
    let dir = tempfile::tempdir().expect("dir");
    let broker = open(dir.path());
    let p = Producer::builder(&broker)
        .transactional_id("states")
        .build()
        .expect("producer");
    let invalid = |r: tidelog::Result<()>, what: &str| match r {
        Err(Error::InvalidProducerState {
            transactional_id, ..
        }) => assert_eq!(transactional_id, "states", "{what}"),
        other => panic!("{what}: expected InvalidProducerState, got {other:?}"),
    };
    invalid(p.begin_transaction(), "begin before init");
    invalid(
        p.send("a", ProducerRecord::new(b"x")).map(|_| ()),
        "send before init",
    );
    p.init_transactions().expect("init");
    invalid(p.init_transactions(), "init twice");
    invalid(
        p.send("a", ProducerRecord::new(b"x")).map(|_| ()),
        "send outside a transaction",
    );
    invalid(p.commit_transaction(), "commit outside a transaction");
    invalid(p.abort_transaction(), "abort outside a transaction");
    p.begin_transaction().expect("begin");
    invalid(p.begin_transaction(), "begin twice");
    // An empty transaction commits without the coordinator.
    p.commit_transaction().expect("commit");

    // A plain producer has no transactions.
    let plain = Producer::new(&broker).expect("producer");
    assert!(matches!(
        plain.begin_transaction(),
        Err(Error::InvalidConfig { .. })
    ));
}

#[test]
fn an_abortable_error_is_aborted_and_the_producer_goes_on() {
    let dir = tempfile::tempdir().expect("dir");
    let broker = open(dir.path());
    broker
        .create_topic("small", 1, TopicConfig::new().max_message_bytes(200))
        .expect("topic");
    let p = producer(&broker, "abortable");
    p.begin_transaction().expect("begin");
    p.send("a", ProducerRecord::new(b"kept?").partition(0))
        .expect("send");
    let big = vec![7u8; 1000];
    match p.send("small", ProducerRecord::new(&big)) {
        Err(Error::TransactionAbortable {
            transactional_id, ..
        }) => assert_eq!(transactional_id, "abortable"),
        other => panic!("expected TransactionAbortable, got {other:?}"),
    }
    // Until the abort, everything but the abort repeats the error.
    assert!(matches!(
        p.commit_transaction(),
        Err(Error::TransactionAbortable { .. })
    ));
    p.abort_transaction().expect("abort");
    p.begin_transaction().expect("begin");
    p.send("small", ProducerRecord::new(b"fits")).expect("send");
    p.send("a", ProducerRecord::new(b"after").partition(0))
        .expect("send");
    p.commit_transaction().expect("commit");
    assert_eq!(read(&broker, "a", IsolationLevel::ReadCommitted), ["after"]);
}

fn member(broker: &Broker, group: &str) -> GroupConsumer {
    let config = GroupConfig::new(group, &["a"]).isolation_level(IsolationLevel::ReadCommitted);
    let mut m = GroupConsumer::join(broker, config).expect("join");
    let deadline = Instant::now() + Duration::from_secs(10);
    while m.assignment().is_empty() && Instant::now() < deadline {
        m.poll(Duration::from_millis(20)).expect("poll");
    }
    assert!(!m.assignment().is_empty(), "the member got partitions");
    m
}

#[test]
fn offsets_sent_to_a_transaction_are_the_groups_only_once_it_commits() {
    let dir = tempfile::tempdir().expect("dir");
    let broker = open(dir.path());
    let m = member(&broker, "copier");
    let meta = m.group_metadata();
    assert_eq!(meta.group_id, "copier");
    assert!(meta.generation_id >= 1, "{meta:?}");
    assert!(!meta.member_id.is_empty());
    let p = producer(&broker, "offsets");

    p.begin_transaction().expect("begin");
    p.send("b", ProducerRecord::new(b"out")).expect("send");
    p.send_offsets_to_transaction(&[("a".into(), 0, 5)], &meta)
        .expect("offsets");
    p.abort_transaction().expect("abort");
    assert_eq!(m.committed("a", 0).expect("committed"), None);

    p.begin_transaction().expect("begin");
    p.send_offsets_to_transaction(&[("a".into(), 0, 7), ("a".into(), 1, 3)], &meta)
        .expect("offsets");
    assert_eq!(m.committed("a", 0).expect("committed"), None, "pending");
    p.commit_transaction().expect("commit");
    assert_eq!(m.committed("a", 0).expect("committed"), Some(7));
    assert_eq!(m.committed("a", 1).expect("committed"), Some(3));

    // A member id the group does not know is refused, and the transaction aborts.
    let stranger = ConsumerGroupMetadata {
        member_id: "nobody".into(),
        ..meta
    };
    p.begin_transaction().expect("begin");
    match p.send_offsets_to_transaction(&[("a".into(), 0, 9)], &stranger) {
        Err(Error::TransactionAbortable { source, .. }) => {
            assert!(matches!(*source, Error::Group { .. }), "{source:?}");
        }
        other => panic!("expected TransactionAbortable, got {other:?}"),
    }
    p.abort_transaction().expect("abort");
    assert_eq!(m.committed("a", 0).expect("committed"), Some(7));
}

#[test]
fn a_transaction_open_when_the_broker_closed_is_aborted_by_its_timeout() {
    let dir = tempfile::tempdir().expect("dir");
    {
        let broker = open(dir.path());
        let p = Producer::builder(&broker)
            .transactional_id("reopen")
            .transaction_timeout(Duration::from_millis(300))
            .build()
            .expect("producer");
        p.init_transactions().expect("init");
        p.begin_transaction().expect("begin");
        p.send("a", ProducerRecord::new(b"lost").partition(0))
            .expect("send");
        drop(p);
        broker.close().expect("close");
    }
    let broker = open(dir.path());
    // The coordinator is loaded at open: its timer aborts the transaction.
    let part = broker
        .topic("a")
        .and_then(|t| t.partition(0))
        .expect("part");
    let deadline = Instant::now() + Duration::from_secs(10);
    while part.log_end_offset() < 2 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(part.log_end_offset(), 2, "the record and its ABORT marker");
    // The log itself is reachable with the `testing` feature (the test command's
    // --all-features): the ABORT marker closed the transaction.
    #[cfg(feature = "testing")]
    assert_eq!(part.log().last_stable_offset().expect("lso"), 2);
    assert!(read(&broker, "a", IsolationLevel::ReadCommitted).is_empty());
    assert_eq!(
        read(&broker, "a", IsolationLevel::ReadUncommitted),
        ["lost"]
    );
    // A new instance of the id goes on.
    let p = producer(&broker, "reopen");
    p.begin_transaction().expect("begin");
    p.send("a", ProducerRecord::new(b"next").partition(0))
        .expect("send");
    p.commit_transaction().expect("commit");
    assert_eq!(read(&broker, "a", IsolationLevel::ReadCommitted), ["next"]);
}
