//! Cluster nodes with several log directories (`log.dirs`, JBOD): a node restarted
//! with one of them unusable keeps the replicas it held there offline instead of
//! making empty logs in their place (an empty replica could be caught up or elected as
//! if it were new, and would hide the records once the directory is back).

use super::acked_writes::{AckedWriter, assert_acked_stored};
use super::replication::{broker, create};
use super::*;

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
    let mut c = TestCluster::with_log_dirs(3);
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
    for p in 0..4 {
        assert_acked_stored(&c, 2, "t", p, &acked);
    }
    c.shutdown();
}
