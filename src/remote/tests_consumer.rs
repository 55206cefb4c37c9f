//! `Consumer` and `GroupConsumer` over the network, against a tidelog server in
//! process.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::tests::serve;
use super::{ClientConfig, Cluster};
use crate::consumer::{
    Assignor, CooperativeStickyAssignor, RangeAssignor, RebalanceContext, RebalanceListener,
    RoundRobinAssignor,
};
use crate::{
    Broker, Consumer, ConsumerConfig, Error, GroupConfig, GroupConsumer, IsolationLevel,
    OffsetReset, Producer, ProducerRecord, TopicConfig,
};

/// A node serving a broker without initial rebalance delay (no test here is about it)
/// with topic `t` of `partitions` partitions, and a cluster handle on it.
fn node(partitions: i32) -> (tempfile::TempDir, Broker, crate::ServerHandle, Cluster) {
    let (dir, broker) = group_broker(partitions);
    let server = serve(&broker, "127.0.0.1:0");
    let cluster = Cluster::connect(ClientConfig::new(server.local_addr().to_string())).unwrap();
    (dir, broker, server, cluster)
}

/// A broker without initial rebalance delay, with topic `t` of `partitions` partitions.
fn group_broker(partitions: i32) -> (tempfile::TempDir, Broker) {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::builder(dir.path())
        .group_initial_rebalance_delay(Duration::ZERO)
        .open()
        .unwrap();
    broker
        .create_topic("t", partitions, TopicConfig::new())
        .unwrap();
    (dir, broker)
}

/// Sends `n` records `v0..` to partition `p` of `t` in process, stamped 1000, 1001, ...
fn send(broker: &Broker, p: i32, n: i64) {
    let producer = Producer::new(broker).unwrap();
    for i in 0..n {
        let value = format!("v{i}");
        producer
            .send(
                "t",
                ProducerRecord::new(value.as_bytes())
                    .partition(p)
                    .timestamp(1_000 + i),
            )
            .unwrap();
    }
}

/// Polls until `n` records came (at most 10 s); their (offset, value).
fn read(poll: &mut dyn FnMut() -> crate::ConsumerRecords, n: usize) -> Vec<(i64, String)> {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut got = Vec::new();
    while got.len() < n && Instant::now() < deadline {
        for r in &poll() {
            let r = r.unwrap();
            got.push((
                r.offset,
                String::from_utf8(r.value.unwrap().to_vec()).unwrap(),
            ));
        }
    }
    got
}

#[test]
fn a_consumer_of_assigned_partitions_reads_seeks_and_commits_over_the_network() {
    let (_dir, broker, _server, cluster) = node(2);
    send(&broker, 0, 10);
    let config = ConsumerConfig::default()
        .group_id("solo")
        .auto_offset_reset(OffsetReset::Earliest);
    let mut c = Consumer::new(&cluster, config.clone());
    c.assign(&[("t", 0)]).unwrap();
    assert_eq!(c.assignment(), [("t".to_string(), 0)]);
    assert_eq!(c.position("t", 0).unwrap(), 0);
    let got = read(&mut || c.poll(Duration::from_millis(100)).unwrap(), 10);
    let want: Vec<(i64, String)> = (0..10).map(|i| (i, format!("v{i}"))).collect();
    assert_eq!(got, want);
    assert_eq!(c.position("t", 0).unwrap(), 10);
    assert_eq!(c.end_offset("t", 0).unwrap(), 10);

    // offsetsForTimes and seeks, by ListOffsets.
    assert_eq!(
        c.offsets_for_times(1_005).unwrap(),
        [("t".to_string(), 0, Some(5))]
    );
    assert_eq!(
        c.offsets_for_times(5_000).unwrap(),
        [("t".to_string(), 0, None)]
    );
    c.seek_to_timestamp(1_005).unwrap();
    assert_eq!(c.position("t", 0).unwrap(), 5);
    let got = read(&mut || c.poll(Duration::from_millis(100)).unwrap(), 5);
    assert_eq!(got.first(), Some(&(5, "v5".to_string())));
    c.seek_to_timestamp(5_000).unwrap();
    assert_eq!(c.position("t", 0).unwrap(), 10);
    c.seek_to_beginning().unwrap();
    assert_eq!(c.position("t", 0).unwrap(), 0);
    c.seek_to_end().unwrap();
    assert_eq!(c.position("t", 0).unwrap(), 10);
    c.seek("t", 0, 3).unwrap();
    assert_eq!(c.position("t", 0).unwrap(), 3);

    // Commits, seen by the next consumer of the group.
    c.commit_sync().unwrap();
    assert_eq!(c.committed("t", 0).unwrap(), Some(3));
    c.commit_offsets(&[("t", 0, 7)]).unwrap();
    assert_eq!(c.committed("t", 0).unwrap(), Some(7));
    assert_eq!(c.committed("t", 1).unwrap(), None);
    let mut next = Consumer::new(&cluster, config);
    next.assign(&[("t", 0)]).unwrap();
    assert_eq!(next.position("t", 0).unwrap(), 7);

    // Bad input: typed errors naming what is wrong.
    assert!(matches!(
        c.assign(&[("t", 9)]),
        Err(Error::UnknownPartition { partition: 9, .. })
    ));
    assert!(matches!(
        c.assign(&[("nope", 0)]),
        Err(Error::UnknownTopic(t)) if t == "nope"
    ));
    assert!(matches!(
        c.seek("t", 1, 0),
        Err(Error::InvalidConfig { key, .. }) if key == "assignment"
    ));
    let mut anonymous = Consumer::new(&cluster, ConsumerConfig::default());
    anonymous.assign(&[("t", 0)]).unwrap();
    assert_eq!(anonymous.committed("t", 0).unwrap(), None);
    assert!(matches!(
        anonymous.commit_offsets(&[("t", 0, 1)]),
        Err(Error::InvalidConfig { key, .. }) if key == "group.id"
    ));
    let mut strict = Consumer::new(
        &cluster,
        ConsumerConfig::default().auto_offset_reset(OffsetReset::None),
    );
    strict.assign(&[("t", 0)]).unwrap();
    assert!(matches!(
        strict.position("t", 0),
        Err(Error::NoOffsetForPartition {
            start: 0,
            end: 10,
            ..
        })
    ));
    c.close();
    assert!(matches!(
        c.poll(Duration::from_millis(1)),
        Err(Error::Closed(_))
    ));
}

#[test]
fn a_read_committed_consumer_over_the_network_skips_aborted_records() {
    use crate::record::{Compression, EndTxnMarker, test_batch};
    let (_dir, broker, _server, cluster) = node(1);
    let p = broker.topic("t").unwrap().partition(0).unwrap();
    let marker = |commit| EndTxnMarker {
        commit,
        coordinator_epoch: 0,
    };
    p.append_batch(&test_batch(None, Compression::None, &["a"]))
        .unwrap(); // 0
    p.append_batch(&test_batch(Some(7), Compression::Lz4, &["x"]))
        .unwrap(); // 1
    p.log()
        .append_end_txn_marker(7, 0, marker(false), 2_000)
        .unwrap(); // 2
    p.append_batch(&test_batch(None, Compression::None, &["b"]))
        .unwrap(); // 3
    p.append_batch(&test_batch(Some(8), Compression::None, &["open"]))
        .unwrap(); // 4
    let level = |l| {
        let mut c = Consumer::new(
            &cluster,
            ConsumerConfig::default()
                .isolation_level(l)
                .auto_offset_reset(OffsetReset::Earliest),
        );
        c.assign(&[("t", 0)]).unwrap();
        c
    };
    let mut committed = level(IsolationLevel::ReadCommitted);
    let got = read(
        &mut || committed.poll(Duration::from_millis(100)).unwrap(),
        2,
    );
    assert_eq!(got, [(0, "a".to_string()), (3, "b".to_string())]);
    assert_eq!(
        committed.end_offset("t", 0).unwrap(),
        4,
        "the last stable offset"
    );
    let mut uncommitted = level(IsolationLevel::ReadUncommitted);
    let got = read(
        &mut || uncommitted.poll(Duration::from_millis(100)).unwrap(),
        4,
    );
    let values: Vec<&str> = got.iter().map(|(_, v)| v.as_str()).collect();
    assert_eq!(values, ["a", "x", "b", "open"]);
}

/// What a listener heard: ("assigned" or "revoked", partitions).
type Heard = Arc<Mutex<Vec<(&'static str, Vec<(String, i32)>)>>>;

/// The assignment a member thread published last.
type Published = Arc<Mutex<Vec<(String, i32)>>>;

struct Recorder(Heard);

impl RebalanceListener for Recorder {
    fn on_partitions_revoked(&mut self, ctx: &RebalanceContext<'_>, partitions: &[(String, i32)]) {
        // The context commits the positions of what is given up.
        ctx.commit_sync().unwrap();
        let _ = ctx.positions();
        self.0
            .lock()
            .unwrap()
            .push(("revoked", partitions.to_vec()));
    }

    fn on_partitions_assigned(&mut self, partitions: &[(String, i32)]) {
        self.0
            .lock()
            .unwrap()
            .push(("assigned", partitions.to_vec()));
    }
}

/// Runs a member of `group` with `assignor` in a thread until `stop`, publishing its
/// assignment after each poll.
fn member(
    cluster: &Cluster,
    group: &str,
    assignor: Arc<dyn Assignor>,
    stop: Arc<AtomicBool>,
) -> (Heard, Published, std::thread::JoinHandle<()>) {
    let heard = Heard::default();
    let owned = Published::default();
    let config = GroupConfig::new(group, &["t"])
        .assignors(vec![assignor])
        .enable_auto_commit(false);
    let mut m = GroupConsumer::join(cluster, config).unwrap();
    m.set_listener(Recorder(heard.clone()));
    let published = owned.clone();
    let thread = std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !stop.load(Ordering::SeqCst) && Instant::now() < deadline {
            m.poll(Duration::from_millis(50)).unwrap();
            *published.lock().unwrap() = m.assignment();
        }
        assert!(m.generation() > 0 && !m.member_id().is_empty());
        m.close();
    });
    (heard, owned, thread)
}

fn wait_for(what: &str, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !cond() {
        assert!(Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn members_over_the_network_split_partitions_with_each_assignor_and_tell_the_listener() {
    let (_dir, _broker, _server, cluster) = node(4);
    let assignors: [(Arc<dyn Assignor>, bool); 3] = [
        (Arc::new(RangeAssignor), false),
        (Arc::new(RoundRobinAssignor), false),
        (Arc::new(CooperativeStickyAssignor), true),
    ];
    for (assignor, cooperative) in assignors {
        let group = format!("g-{}", assignor.name());
        let stop = Arc::new(AtomicBool::new(false));
        let (heard_a, owned_a, a) = member(&cluster, &group, assignor.clone(), stop.clone());
        wait_for("the first member owns every partition", || {
            owned_a.lock().unwrap().len() == 4
        });
        let (heard_b, owned_b, b) = member(&cluster, &group, assignor.clone(), stop.clone());
        wait_for("the members split the partitions", || {
            owned_a.lock().unwrap().len() == 2 && owned_b.lock().unwrap().len() == 2
        });
        stop.store(true, Ordering::SeqCst);
        a.join().unwrap();
        b.join().unwrap();
        let mut all = owned_a.lock().unwrap().clone();
        all.extend(owned_b.lock().unwrap().iter().cloned());
        all.sort();
        let want: Vec<(String, i32)> = (0..4).map(|p| ("t".to_string(), p)).collect();
        assert_eq!(all, want, "{group}");
        let heard = heard_a.lock().unwrap().clone();
        let revoked: Vec<(String, i32)> = heard
            .iter()
            .filter(|(what, _)| *what == "revoked")
            .flat_map(|(_, ps)| ps.iter().cloned())
            .collect();
        // Eager: everything is given up before rejoining; cooperative: only what moves.
        assert_eq!(
            revoked.len(),
            if cooperative { 2 } else { 4 },
            "{group}: {heard:?}"
        );
        assert_eq!(
            heard.first().map(|h| h.1.len()),
            Some(4),
            "{group}: {heard:?}"
        );
        let heard_b = heard_b.lock().unwrap().clone();
        assert!(
            heard_b
                .iter()
                .any(|(what, ps)| *what == "assigned" && !ps.is_empty()),
            "{group}: {heard_b:?}"
        );
    }
}

#[test]
fn a_static_member_over_the_network_comes_back_to_its_partitions_and_offsets() {
    let (_dir, broker, _server, cluster) = node(2);
    send(&broker, 0, 5);
    let config = GroupConfig::new("static", &["t"])
        .group_instance_id("worker-1")
        .auto_offset_reset(OffsetReset::Earliest)
        .auto_commit_interval(Duration::from_millis(10));
    let mut first = GroupConsumer::join(&cluster, config.clone()).unwrap();
    let got = read(&mut || first.poll(Duration::from_millis(100)).unwrap(), 5);
    assert_eq!(got.len(), 5);
    let generation = first.generation();
    let assignment = first.assignment();
    assert_eq!(assignment.len(), 2);
    let metadata = first.group_metadata();
    assert_eq!(metadata.group_instance_id.as_deref(), Some("worker-1"));
    assert_eq!(metadata.generation_id, generation);
    // Closing auto-commits; a static member does not leave the group.
    first.close();
    assert!(matches!(
        first.poll(Duration::from_millis(1)),
        Err(Error::Closed(_))
    ));
    let mut again = GroupConsumer::join(&cluster, config).unwrap();
    again.poll(Duration::from_millis(100)).unwrap();
    assert_eq!(again.assignment(), assignment);
    assert_eq!(again.generation(), generation, "no rebalance");
    assert_eq!(again.committed("t", 0).unwrap(), Some(5));
    assert_eq!(again.position("t", 0).unwrap(), 5);
    assert_eq!(again.end_offset("t", 0).unwrap(), 5);
    assert_eq!(
        again.offsets_for_times(1_002).unwrap(),
        [("t".to_string(), 0, Some(2)), ("t".to_string(), 1, None)]
    );
    again.seek("t", 0, 1).unwrap();
    let got = read(&mut || again.poll(Duration::from_millis(100)).unwrap(), 4);
    assert_eq!(got.first(), Some(&(1, "v1".to_string())));
    again.commit_offsets(&[("t", 0, 4)]).unwrap();
    assert_eq!(again.committed("t", 0).unwrap(), Some(4));
}

#[test]
fn a_member_over_the_network_refuses_what_it_cannot_do() {
    let (_dir, _broker, _server, cluster) = node(1);
    assert!(matches!(
        GroupConsumer::join(&cluster, GroupConfig::new("g", &["nope"])),
        Err(Error::UnknownTopic(t)) if t == "nope"
    ));
    assert!(matches!(
        GroupConsumer::join(&cluster, GroupConfig::new("", &["t"])),
        Err(Error::InvalidConfig { key, .. }) if key == "group.id"
    ));
    assert!(matches!(
        GroupConsumer::join(&cluster, GroupConfig::new("g", &[])),
        Err(Error::InvalidConfig { key, .. }) if key == "subscription"
    ));
    let consumer_protocol =
        GroupConfig::new("g", &["t"]).group_protocol(crate::consumer::GroupProtocol::Consumer);
    assert!(matches!(
        GroupConsumer::join(&cluster, consumer_protocol),
        Err(Error::InvalidConfig { key, .. }) if key == "group.protocol"
    ));
}

/// (partition, offset) of every record of `records`.
fn offsets(records: &crate::ConsumerRecords) -> Vec<(i32, i64)> {
    records
        .iter()
        .map(|r| r.map(|r| (r.partition, r.offset)).unwrap())
        .collect()
}

/// A member over the network that gives partitions up to a newcomer commits their
/// positions first (auto-commit), under an eager and a cooperative assignor: the
/// newcomer starts where it stopped, and no record is read twice.
#[test]
fn a_member_over_the_network_hands_partitions_over_at_its_positions() {
    let (_dir, broker) = group_broker(4);
    for p in 0..4 {
        send(&broker, p, 10);
    }
    let _server = serve(&broker, "127.0.0.1:0");
    let cluster = Cluster::connect(ClientConfig::new(_server.local_addr().to_string())).unwrap();
    let assignors: [Arc<dyn Assignor>; 2] =
        [Arc::new(RangeAssignor), Arc::new(CooperativeStickyAssignor)];
    for assignor in assignors {
        let group = format!("handover-{}", assignor.name());
        let config = GroupConfig::new(&group, &["t"])
            .assignors(vec![assignor])
            .auto_offset_reset(OffsetReset::Earliest)
            .heartbeat_interval(Duration::from_millis(100));
        let mut a = GroupConsumer::join(&cluster, config.clone()).unwrap();
        let mut read = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(20);
        while read.len() < 40 && Instant::now() < deadline {
            read.extend(offsets(&a.poll(Duration::from_millis(100)).unwrap()));
        }
        assert_eq!(read.len(), 40, "{group}");
        assert_eq!(a.assignment().len(), 4);
        assert_eq!(a.end_offset("t", 3).unwrap(), 10);

        let b = std::thread::spawn({
            let (cluster, config) = (cluster.clone(), config.clone());
            move || {
                let mut b = GroupConsumer::join(&cluster, config).unwrap();
                let mut got = Vec::new();
                let deadline = Instant::now() + Duration::from_secs(20);
                while b.assignment().len() != 2 && Instant::now() < deadline {
                    got.extend(offsets(&b.poll(Duration::from_millis(100)).unwrap()));
                }
                (b, got)
            }
        });
        let deadline = Instant::now() + Duration::from_secs(20);
        while a.assignment().len() != 2 && Instant::now() < deadline {
            read.extend(offsets(&a.poll(Duration::from_millis(100)).unwrap()));
        }
        let (mut b, got) = b.join().unwrap();
        read.extend(got);
        let mut both = a.assignment();
        both.extend(b.assignment());
        both.sort();
        let want: Vec<(String, i32)> = (0..4).map(|p| ("t".to_string(), p)).collect();
        assert_eq!(both, want, "{group}");
        for (t, p) in b.assignment() {
            assert_eq!(
                b.position(&t, p).unwrap(),
                10,
                "{group}: {t}-{p} at a's commit"
            );
        }
        read.extend(offsets(&b.poll(Duration::from_millis(300)).unwrap()));
        let mut unique = read.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), read.len(), "{group}: no record twice");
        assert_eq!(unique.len(), 40, "{group}");

        let moved = b.assignment()[0].1;
        b.seek("t", moved, 4).unwrap();
        b.commit_sync().unwrap();
        assert_eq!(b.committed("t", moved).unwrap(), Some(4));
        b.close();
        a.close();
    }
}

/// A member over the network reading committed gets the committed records only (up to
/// the last stable offset, none of an aborted transaction even when its producer
/// commits a later one, no marker), and its `latest` reset is the last stable offset;
/// reading uncommitted, every record.
#[test]
fn a_member_over_the_network_reads_committed_records() {
    use crate::record::{Compression, EndTxnMarker, test_batch};
    let (_dir, broker, _server, cluster) = node(1);
    let p = broker.topic("t").unwrap().partition(0).unwrap();
    let append = |txn: Option<i64>, v: &str| {
        p.append_batch(&test_batch(txn, Compression::None, &[v]))
            .unwrap();
    };
    append(None, "a"); // 0
    append(Some(7), "aborted"); // 1
    append(Some(8), "committed"); // 2
    let log = p.log();
    log.append_end_txn_marker(7, 0, EndTxnMarker::abort(0), 1)
        .unwrap(); // 3
    append(Some(7), "later"); // 4: producer 7 again, committed below
    log.append_end_txn_marker(8, 0, EndTxnMarker::commit(0), 1)
        .unwrap(); // 5
    log.append_end_txn_marker(7, 0, EndTxnMarker::commit(0), 1)
        .unwrap(); // 6
    append(None, "b"); // 7
    append(Some(9), "open"); // 8
    let read = |level: IsolationLevel, reset: OffsetReset, want: usize| {
        let config = GroupConfig::new(format!("{level:?}-{reset:?}"), &["t"])
            .auto_offset_reset(reset)
            .enable_auto_commit(false)
            .isolation_level(level);
        let mut m = GroupConsumer::join(&cluster, config).unwrap();
        // At least one poll: the member joins on its first.
        let mut once = true;
        let got = read(
            &mut || {
                once = false;
                m.poll(Duration::from_millis(200)).unwrap()
            },
            want,
        );
        if once {
            let polled = m.poll(Duration::from_millis(200)).unwrap();
            assert!(polled.is_empty(), "nothing after the last stable offset");
        }
        let position = m.position("t", 0).unwrap();
        m.close();
        let values: Vec<String> = got.into_iter().map(|(_, v)| v).collect();
        (values, position)
    };
    let (got, position) = read(IsolationLevel::ReadCommitted, OffsetReset::Earliest, 4);
    assert_eq!(got, ["a", "committed", "later", "b"]);
    assert_eq!(position, 8, "up to the open transaction");
    let (got, _) = read(IsolationLevel::ReadUncommitted, OffsetReset::Earliest, 6);
    assert_eq!(got, ["a", "aborted", "committed", "later", "b", "open"]);
    let (got, position) = read(IsolationLevel::ReadCommitted, OffsetReset::Latest, 0);
    assert_eq!((got.len(), position), (0, 8), "latest is the LSO");
}

/// A member over the network reading committed fetches its group's offsets with
/// `require_stable` (KIP-447): offsets a transaction holds pending are waited for, so
/// the member starts where the transaction committed, not at its reset position.
#[test]
fn a_member_over_the_network_reading_committed_waits_for_offsets_of_an_open_transaction() {
    use crate::producer::ConsumerGroupMetadata;
    let (_dir, broker) = group_broker(1);
    send(&broker, 0, 4);
    let txn = Producer::builder(&broker)
        .transactional_id("copier")
        .build()
        .unwrap();
    txn.init_transactions().unwrap();
    txn.begin_transaction().unwrap();
    txn.send_offsets_to_transaction(
        &[("t".to_string(), 0, 2)],
        &ConsumerGroupMetadata::new("stable"),
    )
    .unwrap();
    let server = serve(&broker, "127.0.0.1:0");
    let cluster = Cluster::connect(ClientConfig::new(server.local_addr().to_string())).unwrap();
    let config = GroupConfig::new("stable", &["t"])
        .auto_offset_reset(OffsetReset::Earliest)
        .enable_auto_commit(false)
        .isolation_level(IsolationLevel::ReadCommitted);
    // The member fetches the offsets while the transaction is still open (no initial
    // rebalance delay), and is answered once it commits.
    let committer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(1500));
        txn.commit_transaction().unwrap();
    });
    let mut m = GroupConsumer::join(&cluster, config).unwrap();
    let got = read(&mut || m.poll(Duration::from_millis(50)).unwrap(), 2);
    let got: Vec<i64> = got.into_iter().map(|(o, _)| o).collect();
    assert_eq!(got, [2, 3], "from the offset the transaction committed");
    m.close();
    committer.join().unwrap();
}

/// A TCP proxy on `listener` to `target`: a connection accepted while `hold` is set
/// forwards nothing until it is cleared (for at most 30 s).
fn proxy(listener: std::net::TcpListener, target: String, hold: Arc<AtomicBool>) {
    std::thread::spawn(move || {
        for conn in listener.incoming().take(100) {
            let Ok(client) = conn else { return };
            let (target, hold) = (target.clone(), hold.clone());
            std::thread::spawn(move || {
                let deadline = Instant::now() + Duration::from_secs(30);
                while hold.load(Ordering::SeqCst) && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(10));
                }
                let Ok(server) = std::net::TcpStream::connect(&target) else {
                    return;
                };
                let (mut c_in, mut s_out) =
                    (client.try_clone().unwrap(), server.try_clone().unwrap());
                std::thread::spawn(move || std::io::copy(&mut c_in, &mut s_out));
                let (mut s_in, mut c_out) = (server, client);
                let _ = std::io::copy(&mut s_in, &mut c_out);
            });
        }
    });
}

/// Over the network `commit_async` sends the commit and returns without waiting for the
/// answer (Kafka's `commitAsync`): with the coordinator out of reach the call returns
/// and nothing is committed yet; once it can be reached the commits land in the order
/// they were made, their callbacks are called from `poll` in that order, and `close`
/// waits for what is pending.
#[test]
fn commit_async_over_the_network_returns_before_the_answer_and_keeps_the_order() {
    let (_dir, broker) = group_broker(1);
    send(&broker, 0, 10);
    // Clients reach the node through a proxy that can hold new connections: the
    // member's committer thread opens its own.
    let front = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let front_addr = front.local_addr().unwrap().to_string();
    let server = crate::Server::builder(broker.clone())
        .listen("127.0.0.1:0")
        .advertised(front_addr.clone())
        .start()
        .unwrap();
    let hold = Arc::new(AtomicBool::new(false));
    proxy(front, server.local_addr().to_string(), hold.clone());
    let cluster = Cluster::connect(ClientConfig::new(front_addr)).unwrap();
    let config = GroupConfig::new("async", &["t"])
        .auto_offset_reset(OffsetReset::Earliest)
        .enable_auto_commit(false);
    let mut m = GroupConsumer::join(&cluster, config).unwrap();
    let got = read(&mut || m.poll(Duration::from_millis(100)).unwrap(), 10);
    assert_eq!(got.len(), 10);
    let committed = || {
        let key = [("t".to_string(), 0)];
        broker
            .group_coordinator()
            .offset_fetch("async", Some(&key))
            .unwrap()[0]
            .offset
    };

    hold.store(true, Ordering::SeqCst);
    // Each callback's offsets and whether its commit succeeded.
    type Heard = Arc<Mutex<Vec<(Vec<(String, i32, i64)>, bool)>>>;
    let heard = Heard::default();
    let callback = |heard: &Heard| {
        let heard = heard.clone();
        move |offsets: &[(String, i32, i64)], result: crate::Result<()>| {
            heard
                .lock()
                .unwrap()
                .push((offsets.to_vec(), result.is_ok()));
        }
    };
    m.seek("t", 0, 4).unwrap();
    m.commit_async().unwrap();
    assert_eq!(
        committed(),
        -1,
        "commit_async returned before the commit landed"
    );
    m.seek("t", 0, 7).unwrap();
    m.commit_async_with(callback(&heard));
    m.seek("t", 0, 10).unwrap();
    m.commit_async_with(callback(&heard));
    assert_eq!(committed(), -1);
    assert!(heard.lock().unwrap().is_empty(), "no answer yet");

    hold.store(false, Ordering::SeqCst);
    let deadline = Instant::now() + Duration::from_secs(20);
    while heard.lock().unwrap().len() < 2 && Instant::now() < deadline {
        m.poll(Duration::from_millis(50)).unwrap();
    }
    let t = |o| vec![("t".to_string(), 0, o)];
    assert_eq!(*heard.lock().unwrap(), [(t(7), true), (t(10), true)]);
    assert_eq!(
        committed(),
        10,
        "the last commit made is the one that stays"
    );

    // A commit_sync waits for the asynchronous commits before its own; close waits for
    // what is pending.
    m.seek("t", 0, 2).unwrap();
    m.commit_async().unwrap();
    m.seek("t", 0, 3).unwrap();
    m.commit_sync().unwrap();
    assert_eq!(committed(), 3);
    m.seek("t", 0, 5).unwrap();
    m.commit_async_with(callback(&heard));
    m.close();
    assert_eq!(heard.lock().unwrap().last(), Some(&(t(5), true)));
    assert_eq!(committed(), 5);
    m.commit_async_with(callback(&heard));
    assert_eq!(
        heard.lock().unwrap().last(),
        Some(&(vec![], false)),
        "closed"
    );
    assert!(matches!(m.commit_async(), Err(Error::Closed(_))));
    server.shutdown().unwrap();
}

/// A consumer over the network reads in a fetch session (KIP-227): once the session is
/// open, a request lists only the partitions whose position moved, and a quiet one
/// lists none; every record still arrives. A broker that lost the session or disagrees
/// on its epoch makes the next request a full fetch that opens another.
#[test]
fn a_consumer_over_the_network_fetches_in_a_session_listing_only_changed_partitions() {
    let (_dir, broker, _server, cluster) = node(20);
    for p in 0..20 {
        send(&broker, p, 3);
    }
    let config = ConsumerConfig::default().auto_offset_reset(OffsetReset::Earliest);
    let mut reader = super::consumer::Reader::new(cluster.clone(), config);
    let all: Vec<(String, i32)> = (0..20).map(|p| ("t".to_string(), p)).collect();
    reader.assign(&all).unwrap();
    let got = read(&mut || reader.poll(Duration::from_millis(100)).unwrap(), 60);
    assert_eq!(got.len(), 60);
    // The positions the last answers moved are told once more; then a quiet session
    // lists nothing.
    assert!(reader.fetch(Duration::from_millis(10)).unwrap().is_empty());
    let listed = reader.partitions_listed;
    let sent = reader.fetches_sent;
    assert!(reader.fetch(Duration::from_millis(10)).unwrap().is_empty());
    assert_eq!(reader.fetches_sent, sent + 1);
    assert_eq!(
        reader.partitions_listed, listed,
        "a quiet fetch lists no partition"
    );
    assert!(reader.sessions.values().all(|s| s.id != 0 && s.epoch > 1));

    send(&broker, 3, 1);
    send(&broker, 7, 1);
    let got = read(&mut || reader.poll(Duration::from_millis(100)).unwrap(), 2);
    assert_eq!(got, [(3, "v0".to_string()), (3, "v0".to_string())]);
    assert!(reader.fetch(Duration::from_millis(10)).unwrap().is_empty());
    assert_eq!(
        reader.partitions_listed - listed,
        2,
        "only the two partitions that moved"
    );
    assert_eq!(reader.position("t", 3).unwrap(), 4);
    assert_eq!(reader.position("t", 7).unwrap(), 4);

    // INVALID_FETCH_SESSION_EPOCH, then FETCH_SESSION_ID_NOT_FOUND: a full fetch of
    // every partition follows, and the records come.
    for (p, break_session) in [
        (
            5,
            &(|s: &mut super::consumer::FetchSession| s.epoch += 5) as &dyn Fn(&mut _),
        ),
        (9, &|s: &mut super::consumer::FetchSession| {
            s.id = s.id.wrapping_add(1_000)
        }),
    ] {
        reader.sessions.values_mut().for_each(break_session);
        let before = reader.partitions_listed;
        send(&broker, p, 1);
        let got = read(&mut || reader.poll(Duration::from_millis(100)).unwrap(), 1);
        assert_eq!(got, [(3, "v0".to_string())], "partition {p}");
        assert!(
            reader.partitions_listed - before >= 20,
            "a full fetch after the broker refused the session"
        );
        assert_eq!(reader.position("t", p).unwrap(), 4);
        assert!(reader.sessions.values().all(|s| s.id != 0));
    }
}
