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

/// A node serving a broker with topic `t` of `partitions` partitions, and a cluster
/// handle on it.
fn node(partitions: i32) -> (tempfile::TempDir, Broker, crate::ServerHandle, Cluster) {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::open(dir.path()).unwrap();
    broker
        .create_topic("t", partitions, TopicConfig::new())
        .unwrap();
    let server = serve(&broker, "127.0.0.1:0");
    let cluster = Cluster::connect(ClientConfig::new(server.local_addr().to_string())).unwrap();
    (dir, broker, server, cluster)
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
    let consumer_protocol =
        GroupConfig::new("g", &["t"]).group_protocol(crate::consumer::GroupProtocol::Consumer);
    assert!(matches!(
        GroupConsumer::join(&cluster, consumer_protocol),
        Err(Error::InvalidConfig { key, .. }) if key == "group.protocol"
    ));
}
