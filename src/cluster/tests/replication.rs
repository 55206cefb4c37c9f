//! The data plane in process: three nodes replicate a topic with replication factor 3;
//! an `acks=all` producer on the leader returns once every in-sync replica has the
//! records, and every replica's log holds the same bytes at the same offsets; a follower
//! refuses appends naming the leader; a stopped follower leaves the ISR, the high
//! watermark goes on without it, and it rejoins once it caught up; with
//! `min.insync.replicas=2` and both followers gone, an `acks=all` send is refused and
//! nothing is appended.

use super::*;
use crate::broker::Broker;
use crate::producer::{Acks, Producer, ProducerRecord};
use crate::topic::Partition;

pub(super) fn broker(c: &TestCluster, i: usize) -> Broker {
    c.node(i).broker.upgrade().expect("the node's broker")
}

/// Partition `p` of `topic` on node index `i`.
pub(super) fn part(c: &TestCluster, i: usize, topic: &str, p: i32) -> Partition {
    broker(c, i).topic(topic).unwrap().partition(p).unwrap()
}

/// The bytes of a log from its start to `end`.
pub(super) fn bytes_to(p: &Partition, end: i64) -> Vec<u8> {
    let log = p.log();
    let mut out = Vec::new();
    let mut offset = log.log_start_offset();
    let deadline = Instant::now() + WAIT;
    while offset < end {
        assert!(Instant::now() < deadline, "reading {p:?} to {end}");
        let s = log
            .read_bounded(offset, 1 << 20, crate::storage::ReadLimit::LogEnd)
            .unwrap();
        if s.is_empty() {
            break;
        }
        out.extend_from_slice(&s);
        offset = s.next_offset();
    }
    out
}

/// Node index of the leader of `topic`-`p` in node 0's image.
pub(super) fn leader_index(c: &TestCluster, topic: &str, p: usize) -> usize {
    let img = c.node(c.running()[0]).image();
    (img.topic(topic).unwrap().partitions[p].leader - 1) as usize
}

pub(super) fn create(c: &TestCluster, name: &str, partitions: i32, configs: Vec<(String, String)>) {
    let node = c.node(c.running()[0]);
    node.create_topic(
        &NewTopic {
            name: name.into(),
            partitions,
            replication_factor: 3,
            configs,
            ..Default::default()
        },
        false,
        WAIT,
    )
    .unwrap();
    c.wait_same_image();
}

#[test]
fn acks_all_writes_reach_every_replica_with_the_same_bytes() {
    let c = TestCluster::new(3, 1024);
    c.wait_settled();
    create(&c, "events", 2, Vec::new());
    let l = leader_index(&c, "events", 0);
    let leader = part(&c, l, "events", 0);
    wait_until("leadership applied", || leader.leader_epoch().is_some());

    let producer = Producer::builder(&broker(&c, l))
        .acks(Acks::All)
        .linger(Duration::ZERO)
        .build()
        .unwrap();
    let mut last = -1;
    for i in 0..50 {
        let v = format!("record-{i}");
        let m = producer
            .send("events", ProducerRecord::new(v.as_bytes()).partition(0))
            .unwrap();
        assert_eq!(m.offset, i);
        // acks=all: committed (every ISR member has it) when send returns.
        assert!(leader.high_watermark() > m.offset);
        last = m.offset;
    }
    assert_eq!(last, 49);
    let end = leader.log_end_offset();
    let expected = bytes_to(&leader, end);
    for i in 0..3 {
        let p = part(&c, i, "events", 0);
        wait_until("every replica has the records", || {
            p.log_end_offset() == end && p.high_watermark() == end
        });
        assert_eq!(
            bytes_to(&p, end),
            expected,
            "node {} holds the same bytes",
            i + 1
        );
        // Same leader epochs as the leader's.
        assert_eq!(
            p.log().epoch_entries().unwrap(),
            leader.log().epoch_entries().unwrap()
        );
    }
    // A follower refuses appends, naming the leader.
    let f = (l + 1) % 3;
    let follower_producer = Producer::builder(&broker(&c, f))
        .acks(Acks::Leader)
        .linger(Duration::ZERO)
        .build()
        .unwrap();
    match follower_producer.send("events", ProducerRecord::new(b"x").partition(0)) {
        Err(crate::error::Error::NotLeaderOrFollower { reason, .. }) => {
            assert!(reason.contains(&format!("node {}", l + 1)), "{reason}");
        }
        other => panic!("a follower accepted an append: {other:?}"),
    }
    c.shutdown();
}

#[test]
fn a_stopped_follower_leaves_the_isr_and_rejoins_after_catching_up() {
    let mut c = TestCluster::new(3, 1024);
    c.wait_settled();
    create(&c, "events", 1, Vec::new());
    let l = leader_index(&c, "events", 0);
    let f = (l + 1) % 3;
    let leader = part(&c, l, "events", 0);
    wait_until("leadership applied", || leader.leader_epoch().is_some());
    let producer = Producer::builder(&broker(&c, l))
        .acks(Acks::All)
        .linger(Duration::ZERO)
        .build()
        .unwrap();
    producer
        .send("events", ProducerRecord::new(b"before").partition(0))
        .unwrap();
    c.halt(f);
    // The ISR shrinks (lag time, or the controller fencing it), and acks=all goes on.
    wait_until("the stopped follower leaves the ISR", || {
        leader
            .isr()
            .is_some_and(|isr| !isr.contains(&(f as i32 + 1)))
    });
    for i in 0..20 {
        producer
            .send(
                "events",
                ProducerRecord::new(format!("while-{i}").as_bytes()).partition(0),
            )
            .unwrap();
    }
    assert_eq!(leader.high_watermark(), 21);
    c.restart(f);
    wait_until("the follower rejoins the ISR", || {
        leader
            .isr()
            .is_some_and(|isr| isr.contains(&(f as i32 + 1)))
    });
    let p = part(&c, f, "events", 0);
    wait_until("it caught up", || p.log_end_offset() == 21);
    assert_eq!(bytes_to(&p, 21), bytes_to(&leader, 21));
    c.shutdown();
}

#[test]
fn min_insync_replicas_refuses_acks_all_without_appending() {
    // Five nodes, so that the metadata quorum survives both followers of a partition
    // with three replicas going away (the ISR shrink is a metadata record).
    let mut c = TestCluster::new(5, 1024);
    c.wait_settled();
    create(
        &c,
        "strict",
        1,
        vec![("min.insync.replicas".into(), "2".into())],
    );
    let l = leader_index(&c, "strict", 0);
    let leader = part(&c, l, "strict", 0);
    wait_until("leadership applied", || leader.leader_epoch().is_some());
    let producer = Producer::builder(&broker(&c, l))
        .acks(Acks::All)
        .linger(Duration::ZERO)
        .build()
        .unwrap();
    producer
        .send("strict", ProducerRecord::new(b"ok").partition(0))
        .unwrap();
    let followers: Vec<usize> = c.node(l).image().topic("strict").unwrap().partitions[0]
        .replicas
        .iter()
        .map(|r| (*r - 1) as usize)
        .filter(|i| *i != l)
        .collect();
    assert_eq!(followers.len(), 2);
    for f in followers {
        c.halt(f);
    }
    wait_until("the ISR is the leader alone", || {
        leader.isr().is_some_and(|isr| isr.len() == 1)
    });
    let end = leader.log_end_offset();
    match producer.send("strict", ProducerRecord::new(b"refused").partition(0)) {
        Err(crate::error::Error::NotEnoughReplicas { isr: 1, min: 2, .. }) => {}
        other => panic!("acks=all with 1 in-sync replica of 2 needed: {other:?}"),
    }
    assert_eq!(leader.log_end_offset(), end, "nothing was appended");
    c.shutdown();
}

#[test]
fn isr_changes_are_proposed_without_waiting_for_the_controller() {
    // Six partitions led by node 1; nodes 2 and 3 stop, so there is no controller: every
    // partition's ISR shrink is proposed at once, none waits for another's outcome.
    let mut c = TestCluster::new(3, 1024);
    c.wait_settled();
    c.node(0)
        .create_topic(
            &NewTopic {
                name: "many".into(),
                partitions: -1,
                replication_factor: -1,
                assignment: Some(vec![vec![1, 2, 3]; 6]),
                configs: Vec::new(),
            },
            false,
            WAIT,
        )
        .unwrap();
    c.wait_same_image();
    let parts: Vec<Partition> = (0..6).map(|p| part(&c, 0, "many", p)).collect();
    wait_until("node 1 leads every partition", || {
        parts.iter().all(|p| p.leader_epoch().is_some())
    });
    let append = |value: &[u8]| {
        for p in &parts {
            let mut b = crate::record::BatchBuilder::new();
            b.push(1_000, None, Some(value), &[]);
            p.append_batch(&b.finish()).unwrap();
        }
    };
    // Both followers copy a first record while the quorum is whole. Else a follower
    // slow to make its first fetch (loaded machine) is dropped from the ISRs while node
    // 3 still acknowledges the metadata during its halt: the shrinks commit, and none is
    // left to propose without a controller.
    append(b"caught up");
    wait_until("every ISR whole and every record copied", || {
        parts
            .iter()
            .all(|p| p.isr().is_some_and(|isr| isr.len() == 3) && p.high_watermark() == 1)
    });
    c.halt(1);
    c.halt(2);
    // The followers fall behind: a record in every partition they will never fetch.
    append(b"behind");
    wait_until("every partition's shrink in flight at once", || {
        parts.iter().all(Partition::has_pending_isr_change)
    });
    c.shutdown();
}

#[test]
fn loading_the_group_coordinator_does_not_hold_up_the_metadata() {
    let mut c = TestCluster::new(3, 1024);
    c.wait_settled();
    let offsets = |c: &TestCluster| {
        c.node(c.running()[0])
            .image()
            .topic(crate::broker::OFFSETS_TOPIC)
            .map(|t| t.partitions[0].leader)
            .filter(|l| *l >= 1)
    };
    wait_until("__consumer_offsets has a leader", || offsets(&c).is_some());
    let old = (offsets(&c).unwrap() - 1) as usize;
    wait_until("the first coordinator loaded", || {
        broker(&c, old)
            .group_coordinator()
            .loaded_partitions()
            .contains(&0)
    });
    // Every load now waits until the test lets it go, as on a large offsets log.
    for i in c.running() {
        c.node(i).replica_manager().hold_coordinator_loads(true);
    }
    c.halt(old);
    wait_until("a new leader of __consumer_offsets-0", || {
        offsets(&c).is_some_and(|l| l != old as i32 + 1)
    });
    let new = (offsets(&c).unwrap() - 1) as usize;
    // The new coordinator applies and publishes metadata while it loads: a topic
    // created through it is there (its logs opened) before the load is done.
    c.node(new)
        .create_topic(
            &NewTopic {
                name: "meanwhile".into(),
                partitions: 1,
                replication_factor: 2,
                ..Default::default()
            },
            false,
            WAIT,
        )
        .unwrap();
    assert!(broker(&c, new).topic("meanwhile").is_ok());
    assert!(
        !broker(&c, new)
            .group_coordinator()
            .loaded_partitions()
            .contains(&0),
        "published while the coordinator loads"
    );
    for i in c.running() {
        c.node(i).replica_manager().hold_coordinator_loads(false);
    }
    wait_until("the new coordinator loaded", || {
        broker(&c, new)
            .group_coordinator()
            .loaded_partitions()
            .contains(&0)
    });
    c.shutdown();
}

#[test]
fn a_failed_coordinator_load_is_retried() {
    let mut c = TestCluster::new(3, 1024);
    c.wait_settled();
    let offsets = |c: &TestCluster| {
        c.node(c.running()[0])
            .image()
            .topic(crate::broker::OFFSETS_TOPIC)
            .map(|t| t.partitions[0].leader)
            .filter(|l| *l >= 1)
    };
    wait_until("__consumer_offsets has a leader", || offsets(&c).is_some());
    let old = (offsets(&c).unwrap() - 1) as usize;
    wait_until("the first coordinator loaded", || {
        broker(&c, old)
            .group_coordinator()
            .loaded_partitions()
            .contains(&0)
    });
    // The next load of every node fails once (a read error).
    for i in c.running() {
        c.node(i).replica_manager().fail_coordinator_loads(1);
    }
    c.halt(old);
    wait_until("a new leader of __consumer_offsets-0", || {
        offsets(&c).is_some_and(|l| l != old as i32 + 1)
    });
    let new = (offsets(&c).unwrap() - 1) as usize;
    wait_until("the new coordinator loaded after a retry", || {
        broker(&c, new)
            .group_coordinator()
            .loaded_partitions()
            .contains(&0)
    });
    c.shutdown();
}

#[test]
fn a_slow_truncation_does_not_hold_up_the_metadata() {
    // A lag long enough that no ISR change of "a" comes while its truncation is held:
    // a change of the partition itself waits for its truncation (as it must), and this
    // test holds the truncation until the end, where a slow disk would finish it.
    let mut c = TestCluster::with_lag(3, 1024, Duration::from_secs(120));
    c.wait_settled();
    create(&c, "a", 1, vec![]);
    let old = leader_index(&c, "a", 0);
    let mut b = crate::record::BatchBuilder::new();
    b.push(1_000, None, Some(b"v"), &[]);
    part(&c, old, "a", 0).append_batch(&b.finish()).unwrap();
    wait_until("every replica has the record", || {
        (0..3).all(|i| part(&c, i, "a", 0).log_end_offset() == 1)
    });
    // Every truncation now waits, as on a slow disk.
    for i in c.running() {
        c.node(i).replica_manager().hold_truncations(true);
    }
    c.halt(old);
    // The follower of the new leader truncates (by epoch) before it fetches again.
    let mut follower = None;
    wait_until("a follower's truncation under way", || {
        follower = c
            .running()
            .into_iter()
            .find(|i| c.node(*i).replica_manager().hold_truncations(true) > 0);
        follower.is_some()
    });
    let f = follower.unwrap();
    // Meanwhile its metadata goes on: a topic created through it, followed from the
    // same leader, is there when the call returns.
    c.node(f)
        .create_topic(
            &NewTopic {
                name: "meanwhile".into(),
                partitions: 4,
                replication_factor: 2,
                ..Default::default()
            },
            false,
            WAIT,
        )
        .unwrap();
    assert!(broker(&c, f).topic("meanwhile").is_ok());
    for i in c.running() {
        c.node(i).replica_manager().hold_truncations(false);
    }
    c.shutdown();
}
