//! The same program, once on a `Broker` data directory in process and once on a tidelog
//! node over the network (`Cluster`): produce keyed records, consume them in a group of
//! two members, commit, drop everything and restart (the directory reopened, the node
//! restarted on it), continue. Both runs must see the same records at the same offsets
//! and leave the same committed offsets.
#![cfg(feature = "server")]

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tidelog::consumer::Source;
use tidelog::producer::Destination;
use tidelog::{
    Broker, ClientConfig, Cluster, Consumer, ConsumerConfig, GroupConfig, GroupConsumer,
    OffsetReset, Producer, ProducerRecord, Server, ServerHandle, TopicAdmin, TopicConfig,
};

const TOPIC: &str = "events";
const PARTITIONS: i32 = 4;
const GROUP: &str = "billing";
/// How long one phase may take before the test fails.
const PHASE_LIMIT: Duration = Duration::from_secs(90);

/// A record as the program saw it: (partition, offset, key, value).
type Seen = (i32, i64, String, String);

/// One run of the program on `log`: sends records `from..to` (key `user-{i % 10}`),
/// and two members of the group read them, committing after each poll. Returns what
/// they read, in (partition, offset) order.
fn phase<L: TopicAdmin + Sync>(log: &L, from: u32, to: u32) -> Vec<Seen>
where
    for<'a> &'a L: Into<Source> + Into<Destination>,
{
    log.create_topic_if_missing(TOPIC, PARTITIONS, TopicConfig::new())
        .expect("topic");
    let described = log.describe_topic(TOPIC).expect("describe");
    assert_eq!(described.partitions.len(), PARTITIONS as usize);
    assert!(log.topics().expect("topics").iter().any(|t| t == TOPIC));
    let expected = (to - from) as usize;
    let consumed = AtomicUsize::new(0);
    let seen = Mutex::new(Vec::new());
    // The records are sent once the group is settled (two partitions each), so that no
    // rebalance interrupts a commit; nobody leaves before both committed what they read.
    let settled = AtomicUsize::new(0);
    let finished = AtomicUsize::new(0);
    let deadline = Instant::now() + PHASE_LIMIT;
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                let config = GroupConfig::new(GROUP, &[TOPIC])
                    .auto_offset_reset(OffsetReset::Earliest)
                    .enable_auto_commit(false);
                let mut member = GroupConsumer::join(log, config).expect("join");
                while member.assignment().len() != 2 {
                    assert!(Instant::now() < deadline, "the group did not settle");
                    let records = member.poll(Duration::from_millis(50)).expect("poll");
                    assert!(records.is_empty(), "records before any was sent");
                }
                settled.fetch_add(1, Ordering::SeqCst);
                while consumed.load(Ordering::SeqCst) < expected {
                    assert!(Instant::now() < deadline, "records missing");
                    let records = member.poll(Duration::from_millis(100)).expect("poll");
                    let mut mine = Vec::new();
                    for r in &records {
                        let r = r.expect("record");
                        let text =
                            |b: Option<&[u8]>| String::from_utf8(b.unwrap().to_vec()).unwrap();
                        mine.push((r.partition, r.offset, text(r.key), text(r.value)));
                    }
                    if !mine.is_empty() {
                        member.commit_sync().expect("commit");
                        consumed.fetch_add(mine.len(), Ordering::SeqCst);
                        seen.lock().unwrap().extend(mine);
                    }
                }
                finished.fetch_add(1, Ordering::SeqCst);
                while finished.load(Ordering::SeqCst) < 2 {
                    assert!(Instant::now() < deadline, "the other member did not finish");
                    let records = member.poll(Duration::from_millis(50)).expect("poll");
                    assert!(records.is_empty(), "a record read twice");
                }
                member.close();
            });
        }
        while settled.load(Ordering::SeqCst) < 2 {
            assert!(Instant::now() < deadline, "the group did not settle");
            std::thread::sleep(Duration::from_millis(10));
        }
        let producer = Producer::new(log).expect("producer");
        for i in from..to {
            let key = format!("user-{}", i % 10);
            let value = format!("order-{i}");
            producer
                .send(
                    TOPIC,
                    ProducerRecord::keyed(key.as_bytes(), value.as_bytes()),
                )
                .expect("send");
        }
        producer.close().expect("close");
    });
    let mut seen = seen.into_inner().unwrap();
    seen.sort();
    assert_eq!(seen.len(), expected, "each record read once");
    seen
}

/// What the group committed, and what a standalone consumer reads from the start:
/// every record, the first at or after timestamp 0 at offset 0 of each partition.
fn check_all<L: TopicAdmin>(log: &L) -> (BTreeMap<i32, Option<i64>>, usize)
where
    for<'a> &'a L: Into<Source>,
{
    let mut consumer = Consumer::new(
        log,
        ConsumerConfig::default()
            .group_id(GROUP)
            .auto_offset_reset(OffsetReset::Earliest),
    );
    let all: Vec<(&str, i32)> = (0..PARTITIONS).map(|p| (TOPIC, p)).collect();
    consumer.assign(&all).expect("assign");
    let committed: BTreeMap<i32, Option<i64>> = (0..PARTITIONS)
        .map(|p| (p, consumer.committed(TOPIC, p).expect("committed")))
        .collect();
    for (_, p, offset) in consumer.offsets_for_times(0).expect("offsets for times") {
        let end = consumer.end_offset(TOPIC, p).expect("end");
        assert_eq!(offset, (end > 0).then_some(0), "partition {p}");
    }
    consumer.seek_to_beginning().expect("seek");
    let mut read = 0;
    let deadline = Instant::now() + PHASE_LIMIT;
    let total: i64 = (0..PARTITIONS)
        .map(|p| consumer.end_offset(TOPIC, p).expect("end"))
        .sum();
    let described: i64 = log
        .describe_topic(TOPIC)
        .expect("describe")
        .partitions
        .iter()
        .map(|p| p.log_end_offset)
        .sum();
    assert_eq!(described, total, "the description's end offsets");
    while (read as i64) < total {
        assert!(
            Instant::now() < deadline,
            "standalone consumer: records missing"
        );
        read += consumer
            .poll(Duration::from_millis(100))
            .expect("poll")
            .count();
    }
    consumer.close();
    (committed, read)
}

/// The whole program on one place: `open` (re)opens the log, as a restarted program
/// would.
fn program<L: TopicAdmin + Sync>(
    open: &mut dyn FnMut() -> Arc<L>,
) -> (Vec<Seen>, BTreeMap<i32, Option<i64>>)
where
    for<'a> &'a L: Into<Source> + Into<Destination>,
{
    let log = open();
    let mut seen = phase(&*log, 0, 60);
    drop(log);
    let log = open();
    seen.extend(phase(&*log, 60, 100));
    let (committed, read) = check_all(&*log);
    assert_eq!(read, 100);
    (seen, committed)
}

#[test]
fn the_same_program_runs_in_process_and_on_a_node() {
    let local_dir = tempfile::tempdir().unwrap();
    let (local_seen, local_committed) =
        program(&mut || Arc::new(Broker::open(local_dir.path()).expect("open the directory")));

    let node_dir = tempfile::tempdir().unwrap();
    let mut node: Option<(ServerHandle, Broker)> = None;
    let (remote_seen, remote_committed) = program(&mut || {
        // A restart: the old node stops, a new one serves the same directory.
        if let Some((server, broker)) = node.take() {
            server.shutdown().expect("stop the node");
            broker.close().expect("close the directory");
        }
        let broker = Broker::open(node_dir.path()).expect("open the node's directory");
        let server = Server::builder(broker.clone())
            .listen("127.0.0.1:0")
            .start()
            .expect("serve");
        let cluster =
            Cluster::connect(ClientConfig::new(server.local_addr().to_string())).expect("connect");
        node = Some((server, broker));
        Arc::new(cluster)
    });

    assert_eq!(local_seen.len(), 100);
    for (p, _, key, _) in &local_seen {
        assert_eq!(
            *p,
            tidelog::producer::partition_for_key(key.as_bytes(), PARTITIONS),
            "{key}"
        );
    }
    assert_eq!(
        remote_seen, local_seen,
        "the same records at the same offsets"
    );
    assert_eq!(
        remote_committed, local_committed,
        "the same committed offsets"
    );
    let ends: i64 = local_committed.values().map(|c| c.unwrap_or(0)).sum();
    assert_eq!(ends, 100, "everything read was committed");
}
