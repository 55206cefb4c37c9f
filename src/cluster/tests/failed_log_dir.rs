//! Cluster nodes with several log directories (`log.dirs`, JBOD): a node restarted
//! with one of them unusable keeps the replicas it held there offline instead of
//! making empty logs in their place (an empty replica could be caught up or elected as
//! if it were new, and would hide the records once the directory is back). The
//! controller learns which replicas are offline (`ReplicasOffline`, KIP-858), at start
//! and when a directory fails under a running node (told so, or pulled from under it:
//! replaced by a file, found at the next roll): they leave their ISRs and
//! leaderships (a transaction coordinator's too: its open transactions go on with the
//! next leader).

use super::acked_writes::{AckedWriter, assert_acked_stored};
use super::replication::{broker, create, part};
use super::*;
use crate::cluster::image::{MetadataImage, PartitionImage};
use crate::cluster::listener::{MetadataListener, MetadataUpdate};
use crate::cluster::records::MetadataRecord;
use std::sync::atomic::AtomicBool;

/// `replica.lag.time.max.ms` of these clusters: a follower slow on a busy machine stays
/// in sync. A partition whose ISR shrank to the node whose replica goes offline stays
/// leaderless with it in its ISR (as it must), which is not what these tests are about.
const IN_SYNC: Duration = WAIT;

/// The partitions of `topic` (of `count`) whose directory is in `dir`.
fn held_in(dir: &Path, topic: &str, count: i32) -> Vec<i32> {
    (0..count)
        .filter(|p| dir.join(format!("{topic}-{p}")).is_dir())
        .collect()
}

/// Makes node `i`'s second log directory unusable, as a disk gone: it is renamed away
/// and a plain file takes its path. Returns where it went.
fn take_away(c: &TestCluster, i: usize) -> PathBuf {
    let dir = c.extra_dir(i);
    let away = dir.with_extension("away");
    std::fs::rename(dir, &away).unwrap();
    std::fs::write(dir, b"not a directory").unwrap();
    away
}

/// Puts back what [`take_away`] took.
fn put_back(c: &TestCluster, i: usize, away: &Path) {
    std::fs::remove_file(c.extra_dir(i)).unwrap();
    std::fs::rename(away, c.extra_dir(i)).unwrap();
}

#[test]
fn a_node_restarted_without_a_log_directory_makes_no_empty_logs_in_its_place() {
    let mut c = TestCluster::with_log_dirs(3, IN_SYNC);
    c.wait_settled();
    create(&c, "t", 4, Vec::new());
    let writer = AckedWriter::start(&c, "t", 4);
    writer.wait_for_more("records in every partition", 40);
    let (acked, _) = writer.finish();
    let lost = held_in(c.extra_dir(2), "t", 4);
    let kept = held_in(c.dir(2), "t", 4);
    assert!(!lost.is_empty() && !kept.is_empty(), "{lost:?} {kept:?}");
    for p in 0..4 {
        assert_acked_stored(&c, 2, "t", p, &acked);
    }

    // Every replica in sync first (see `IN_SYNC`).
    wait_until("every replica of t in sync", || {
        (0..4).all(|p| partition_image(&c, 0, "t", p).isr.len() == 3)
    });
    c.halt(2);
    let away = take_away(&c, 2);
    c.restart(2);
    c.wait_settled();
    let b = broker(&c, 2);
    wait_until("node 3 applied topic t", || b.topic("t").is_ok());
    let offline = b.offline_partitions("t");
    assert_eq!(offline.keys().copied().collect::<Vec<_>>(), lost);
    for p in &lost {
        assert!(
            !c.dir(2).join(format!("t-{p}")).exists(),
            "an empty t-{p} was made in the data directory"
        );
        assert!(b.hosted_partition("t", *p).is_none(), "t-{p} is served");
    }
    for p in &kept {
        assert!(b.hosted_partition("t", *p).is_some(), "t-{p} is not served");
    }
    // The controller knows: they are offline, out of their ISRs, led elsewhere.
    wait_until("node 3's replicas to be marked offline", || {
        lost.iter().all(|p| {
            let x = partition_image(&c, 0, "t", *p);
            x.offline == [3] && !x.isr.contains(&3) && x.leader != 3
        })
    });
    for p in &kept {
        assert!(partition_image(&c, 0, "t", *p).offline.is_empty(), "t-{p}");
    }
    // A replica assigned to it now has no records anywhere: it gets a log.
    wait_until("node 3 unfenced", || c.node(0).image().is_unfenced(3));
    create(&c, "u", 2, Vec::new());
    wait_until("node 3 serves every partition of u", || {
        (0..2).all(|p| b.hosted_partition("u", p).is_some())
    });
    assert!(b.offline_partitions("u").is_empty());
    drop(b);

    // With the directory back, its replicas come back with their records.
    c.halt(2);
    put_back(&c, 2, &away);
    c.restart(2);
    c.wait_settled();
    let b = broker(&c, 2);
    wait_until("node 3 serves every partition of t", || {
        (0..4).all(|p| b.hosted_partition("t", p).is_some())
    });
    assert!(b.offline_partitions("t").is_empty());
    // Its new registration cleared the marks, and it caught up into the ISRs.
    wait_until("node 3 back in every ISR", || {
        (0..4).all(|p| {
            let x = partition_image(&c, 0, "t", p);
            x.offline.is_empty() && x.isr.contains(&3)
        })
    });
    for p in 0..4 {
        assert_acked_stored(&c, 2, "t", p, &acked);
    }
    c.shutdown();
}

/// Partition `p` of `topic` as node index `i`'s image has it.
fn partition_image(c: &TestCluster, i: usize, topic: &str, p: i32) -> PartitionImage {
    c.node(i).image().topics[topic].partitions[p as usize].clone()
}

#[test]
fn a_log_directory_failing_under_a_leader_moves_its_leaderships_and_loses_no_acknowledged_record() {
    let c = TestCluster::with_log_dirs(3, IN_SYNC);
    c.wait_settled();
    create(&c, "t", 4, Vec::new());
    let writer = AckedWriter::start(&c, "t", 4);
    writer.wait_for_more("records in every partition", 40);
    // A node leading a partition held in its second log directory (each node leads
    // one or two of the four, and holds about half of its replicas there).
    let (i, p) = (0..3)
        .flat_map(|i| (0..4).map(move |p| (i, p)))
        .find(|&(i, p)| {
            partition_image(&c, 0, "t", p).leader == i as i32 + 1
                && held_in(c.extra_dir(i), "t", 4).contains(&p)
        })
        .expect("a leader holding a partition in its second log directory");
    let id = i as i32 + 1;
    let lost = held_in(c.extra_dir(i), "t", 4);
    let end_at_failure = part(&c, i, "t", p).log_end_offset();
    broker(&c, i)
        .fail_log_dir(c.extra_dir(i), "test: the disk is gone")
        .unwrap();

    // The controller learns it: the node's replicas there leave their ISRs and
    // leaderships (on every node's image), the others stay.
    wait_until(
        "the failed replicas to be marked offline everywhere",
        || {
            (0..3).all(|n| {
                lost.iter().all(|q| {
                    let x = partition_image(&c, n, "t", *q);
                    x.offline == [id] && !x.isr.contains(&id) && x.leader != id
                })
            })
        },
    );
    for q in (0..4).filter(|q| !lost.contains(q)) {
        assert!(partition_image(&c, 0, "t", q).offline.is_empty(), "t-{q}");
    }
    // The producer goes on, the moved partition too, on its new leader.
    writer.wait_for_more("records after the failure", 80);
    let (acked, _) = writer.finish();
    let after = partition_image(&c, 0, "t", p);
    assert_ne!(after.leader, id);
    assert!(
        acked
            .iter()
            .any(|(q, o, _)| *q == p && *o >= end_at_failure),
        "nothing acknowledged on t-{p} after the failure"
    );
    for q in 0..4 {
        let leader = partition_image(&c, 0, "t", q).leader;
        assert_acked_stored(&c, leader as usize - 1, "t", q, &acked);
    }
    c.shutdown();
}

#[test]
fn a_log_directory_pulled_from_under_a_leader_fails_on_its_next_roll_and_loses_no_acknowledged_record()
 {
    // No `fail_log_dir` here: the directory is replaced by a file under the running
    // node, and the first file a log there makes (a roll of its 4 KiB segments) fails
    // with the I/O error that takes the directory offline.
    let c = TestCluster::with_log_dirs(3, IN_SYNC);
    c.wait_settled();
    create(&c, "t", 4, vec![("segment.bytes".into(), "4096".into())]);
    let writer = AckedWriter::start(&c, "t", 4);
    writer.wait_for_more("records in every partition", 40);
    let (i, p) = (0..3)
        .flat_map(|i| (0..4).map(move |p| (i, p)))
        .find(|&(i, p)| {
            partition_image(&c, 0, "t", p).leader == i as i32 + 1
                && held_in(c.extra_dir(i), "t", 4).contains(&p)
        })
        .expect("a leader holding a partition in its second log directory");
    let id = i as i32 + 1;
    let lost = held_in(c.extra_dir(i), "t", 4);
    let b = broker(&c, i);
    assert_eq!(b.metrics().storage.offline_log_dirs, 0);
    let end_at_failure = part(&c, i, "t", p).log_end_offset();
    let away = take_away(&c, i);

    wait_until(
        "the pulled directory's replicas to be marked offline everywhere",
        || {
            (0..3).all(|n| {
                lost.iter().all(|q| {
                    let x = partition_image(&c, n, "t", *q);
                    x.offline == [id] && !x.isr.contains(&id) && x.leader != id
                })
            })
        },
    );
    // (The internal topics' partitions there are offline too.)
    let m = b.metrics();
    assert_eq!(m.storage.offline_log_dirs, 1);
    assert!(m.storage.offline_partitions >= lost.len() as u64);
    assert_eq!(
        b.offline_partitions("t")
            .keys()
            .copied()
            .collect::<Vec<_>>(),
        lost
    );
    for q in (0..4).filter(|q| !lost.contains(q)) {
        assert!(partition_image(&c, 0, "t", q).offline.is_empty(), "t-{q}");
    }
    writer.wait_for_more("records after the failure", 80);
    let (acked, _) = writer.finish();
    assert!(
        acked
            .iter()
            .any(|(q, o, _)| *q == p && *o >= end_at_failure),
        "nothing acknowledged on t-{p} after the failure"
    );
    // acks=all: what the leader on the pulled disk acknowledged, its followers had.
    for q in 0..4 {
        let leader = partition_image(&c, 0, "t", q).leader;
        assert_acked_stored(&c, leader as usize - 1, "t", q, &acked);
    }
    drop(b);
    put_back(&c, i, &away);
    c.shutdown();
}

/// The image after `record` is applied at its next index.
fn then(img: &MetadataImage, record: MetadataRecord) -> MetadataImage {
    let mut next = img.clone();
    next.apply(img.index + 1, &record).unwrap();
    next
}

/// A broker (node 1) whose second log directory failed, and the directories.
fn broker_with_a_failed_dir() -> (Broker, tempfile::TempDir, tempfile::TempDir) {
    let (data, extra) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let b = Broker::builder(data.path())
        .log_dirs([extra.path()])
        .open()
        .unwrap();
    b.fail_log_dir(extra.path(), "test: the disk is gone")
        .unwrap();
    (b, data, extra)
}

/// `img` after node 1's registration in it is made ready (unfenced).
fn ready(img: &MetadataImage) -> MetadataImage {
    let broker_epoch = img.brokers[&1].epoch;
    then(
        img,
        MetadataRecord::BrokerReady {
            broker_id: 1,
            broker_epoch,
        },
    )
}

/// Node 1's broker-registry listener, its metadata log ending at `log_end_at_start`
/// when it started.
fn registry(b: &Broker, log_end_at_start: u64) -> BrokerSync {
    BrokerSync {
        broker: b.downgrade(),
        swept: AtomicBool::new(false),
        static_move_rate: None,
        log_end_at_start,
    }
}

/// Tells `sync` of the update from `previous` to `current`.
fn update(sync: &BrokerSync, previous: &MetadataImage, current: &MetadataImage, caught_up: bool) {
    sync.on_metadata(&MetadataUpdate {
        node_id: 1,
        previous,
        current,
        caught_up,
    })
}

/// `new-0` got a log; `old-0`, which may be in the failed directory, did not.
fn assert_new_served_old_offline(b: &Broker) {
    assert!(
        b.hosted_partition("new", 0).is_some(),
        "{:?}",
        b.offline_partitions("new")
    );
    assert!(b.hosted_partition("old", 0).is_none());
    assert!(b.offline_partitions("old").contains_key(&0));
}

#[test]
fn a_replica_assigned_after_the_restart_gets_a_log_even_in_the_update_that_catches_the_node_up() {
    use crate::cluster::records::tests::{assigned_topic, registration};
    let (b, _data, _extra) = broker_with_a_failed_dir();
    // The node's metadata log ended at index 3 when it started: topic `old` (assigned
    // to it at index 3) may have had a log in the failed directory; `new`, assigned at
    // index 6, after its new registration at 4, cannot have.
    let registered = then(&MetadataImage::default(), registration(1, 1, "h:1"));
    let at_start = then(&ready(&registered), assigned_topic("old", vec![vec![1]]));
    let again = then(&at_start, registration(1, 2, "h:1"));
    let caught_up = then(&ready(&again), assigned_topic("new", vec![vec![1]]));
    let sync = registry(&b, at_start.index);
    update(&sync, &MetadataImage::default(), &at_start, false);
    assert!(b.hosted_partition("old", 0).is_none());
    assert!(b.offline_partitions("old").contains_key(&0));
    // One update applies the registration and the new assignment.
    update(&sync, &at_start, &caught_up, true);
    assert_new_served_old_offline(&b);
}

#[test]
fn a_node_that_started_without_metadata_counts_no_replica_new_until_it_caught_up() {
    use crate::cluster::records::tests::{assigned_topic, registration};
    let (b, _data, _extra) = broker_with_a_failed_dir();
    // A metadata log lost with its directory (or never had): every record is after
    // its end, but `old` may have a log in the failed directory all the same.
    let registered = then(&MetadataImage::default(), registration(1, 1, "h:1"));
    let assigned = then(&ready(&registered), assigned_topic("old", vec![vec![1]]));
    let again = ready(&then(&assigned, registration(1, 2, "h:1")));
    let sync = registry(&b, 0);
    update(&sync, &MetadataImage::default(), &assigned, false);
    update(&sync, &assigned, &again, true);
    assert!(b.hosted_partition("old", 0).is_none());
    assert!(b.offline_partitions("old").contains_key(&0));
    // Once it caught up, a replica assigned to it is new.
    let later = then(&again, assigned_topic("new", vec![vec![1]]));
    update(&sync, &again, &later, true);
    assert_new_served_old_offline(&b);
}

#[test]
fn a_transaction_coordinator_on_a_failed_log_directory_moves_and_keeps_the_open_transaction() {
    use crate::config::TransactionConfig;
    use crate::error::{TxnError, TxnState};
    use crate::producer::{Producer, ProducerRecord};
    use crate::transaction::log::{TRANSACTION_STATE_TOPIC, partition_for};
    const PARTITIONS: i32 = 6;
    let c = TestCluster::with_log_dirs(3, IN_SYNC);
    c.wait_settled();
    c.node(0)
        .ensure_transaction_state(&TransactionConfig {
            state_log_partitions: PARTITIONS,
            ..TransactionConfig::default()
        })
        .unwrap();
    create(&c, "t", 3, Vec::new());
    let img = c.wait_same_image();
    let leader_of =
        |p: i32| img.topic(TRANSACTION_STATE_TOPIC).unwrap().partitions[p as usize].leader;
    // A coordinator partition held in its leader's second log directory, and an id
    // of it; the producer is on a node that does not lead it.
    let (i, tp) = (0..PARTITIONS)
        .map(|tp| ((leader_of(tp) - 1) as usize, tp))
        .find(|&(i, tp)| held_in(c.extra_dir(i), TRANSACTION_STATE_TOPIC, PARTITIONS).contains(&tp))
        .expect("a coordinator partition in its leader's second log directory");
    let id = (0..10_000)
        .map(|k| format!("txn-{k}"))
        .find(|id| partition_for(id, PARTITIONS) == tp)
        .unwrap();
    let coordinates = |n: usize| broker(&c, n).transaction_coordinator().leads(tp);
    wait_until("the coordinator loaded", || coordinates(i));
    // The producer writes to a partition its node leads, another node than `i`.
    let (j, p) = (0..3)
        .map(|p| {
            (
                (img.topic("t").unwrap().partitions[p as usize].leader - 1) as usize,
                p,
            )
        })
        .find(|&(j, _)| j != i)
        .expect("a partition of t led by another node");
    let producer = Producer::builder(&broker(&c, j))
        .transactional_id(id.clone())
        .build()
        .unwrap();
    producer.init_transactions().unwrap();
    let leader = part(&c, j, "t", p);
    wait_until("the partition led", || leader.leader_epoch().is_some());
    producer.begin_transaction().unwrap();
    producer
        .send("t", ProducerRecord::new(b"before").partition(p))
        .unwrap();
    producer.flush().unwrap();

    broker(&c, i)
        .fail_log_dir(c.extra_dir(i), "test: the disk is gone")
        .unwrap();
    // The failed node stops coordinating the partition (its callers are told
    // NOT_COORDINATOR and look again); another replica leads and coordinates it.
    wait_until("the coordinator moved to a healthy replica", || {
        let x = partition_image(&c, 0, TRANSACTION_STATE_TOPIC, tp);
        x.leader > 0
            && x.leader != i as i32 + 1
            && !coordinates(i)
            && coordinates((x.leader - 1) as usize)
    });
    let refused = broker(&c, i).transaction_coordinator().describe(&id);
    assert!(
        matches!(
            refused,
            Err(TxnError::NotCoordinator | TxnError::CoordinatorNotAvailable { .. })
        ),
        "{refused:?}"
    );
    // The open transaction was not lost: the new coordinator has it, it goes on and
    // commits.
    producer
        .send("t", ProducerRecord::new(b"after").partition(p))
        .unwrap();
    let now = partition_image(&c, 0, TRANSACTION_STATE_TOPIC, tp).leader;
    let open = broker(&c, (now - 1) as usize)
        .transaction_coordinator()
        .describe(&id)
        .unwrap();
    assert_eq!(open.state, TxnState::Ongoing, "{open:?}");
    assert!(open.partitions.contains(&("t".to_string(), p)), "{open:?}");
    producer.commit_transaction().unwrap();
    wait_until("both records and the marker stable", || {
        leader.log_end_offset() == 3 && leader.log().last_stable_offset().unwrap() == 3
    });
    assert!(leader.log().aborted_transactions(0, 3).unwrap().is_empty());
    drop(producer);
    c.shutdown();
}

#[test]
fn the_offline_scan_walks_the_image_again_only_when_something_changed() {
    use crate::cluster::node::OfflineScan;
    use crate::cluster::records::tests::{assigned_topic, registration};
    let (b, _data, _extra) = broker_with_a_failed_dir();
    // No replica is new here: each one assigned is offline (it may be in the failed
    // directory).
    let sync = registry(&b, u64::MAX);
    let registered = ready(&then(&MetadataImage::default(), registration(1, 1, "h:1")));
    let old = then(&registered, assigned_topic("old", vec![vec![1]]));
    update(&sync, &MetadataImage::default(), &old, true);
    let mut scan = OfflineScan::default();
    let names = |found: &[(_, String, i32)]| {
        found
            .iter()
            .map(|(_, t, p)| format!("{t}-{p}"))
            .collect::<Vec<_>>()
    };
    assert_eq!(names(scan.unreported(&old, old.index, &b, 1)), ["old-0"]);
    assert_eq!(names(scan.unreported(&old, old.index, &b, 1)), ["old-0"]);
    assert_eq!(scan.scans, 1, "nothing changed: no second walk");
    // A replica assigned later: in the Raft loop's image before the listeners applied
    // it, then applied.
    let later = then(&old, assigned_topic("new", vec![vec![1]]));
    assert_eq!(names(scan.unreported(&later, old.index, &b, 1)), ["old-0"]);
    update(&sync, &old, &later, true);
    assert_eq!(
        names(scan.unreported(&later, later.index, &b, 1)),
        ["new-0", "old-0"]
    );
    assert_eq!(scan.scans, 3);
    assert_eq!(names(scan.unreported(&later, later.index, &b, 1)).len(), 2);
    assert_eq!(scan.scans, 3);
}
