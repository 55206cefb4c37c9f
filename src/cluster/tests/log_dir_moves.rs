//! AlterReplicaLogDirs on a cluster: the leader's and a follower's replica of a
//! partition move into their node's other log directory while an `acks=all` producer
//! writes; each keeps its role (the leader goes on leading, the follower following and
//! in the ISR) and every acknowledged record is on every replica.

use super::acked_writes::{AckedWriter, assert_acked_stored, bootstrap};
use super::replication::{broker, create, leader_index, part};
use super::*;
use crate::admin::{AdminClient, ErrorCode, TopicPartition};

/// The log directory of node `i` that does not hold `name` now, canonicalized (as
/// DescribeLogDirs shows it).
fn other_dir(c: &TestCluster, i: usize, name: &str) -> PathBuf {
    let to = match c.dir(i).join(name).is_dir() {
        true => c.extra_dir(i),
        false => c.dir(i),
    };
    std::fs::canonicalize(to).unwrap()
}

#[test]
fn a_leader_and_a_follower_replica_move_between_log_directories_under_writes() {
    let c = TestCluster::with_log_dirs(3, LAG);
    c.wait_settled();
    create(&c, "m", 1, Vec::new());
    let leader = leader_index(&c, "m", 0);
    let follower = (leader + 1) % 3;
    let led = part(&c, leader, "m", 0);
    wait_until("leadership applied", || led.leader_epoch().is_some());
    let epoch = led.leader_epoch();
    let writer = AckedWriter::start(&c, "m", 1);
    writer.wait_for_more("records before the moves", 20);

    let admin = AdminClient::connect(&bootstrap(&c)).unwrap();
    let tp = TopicPartition::new("m", 0);
    let mut targets = Vec::new();
    for i in [leader, follower] {
        let to = other_dir(&c, i, "m-0");
        let out = admin
            .alter_replica_log_dirs(i as i32 + 1, &[(tp.clone(), to.display().to_string())])
            .unwrap();
        assert!(matches!(out[&tp], Ok(())), "node {}: {out:?}", i + 1);
        targets.push((i, to));
    }
    for (i, to) in &targets {
        let b = broker(&c, *i);
        let served_from = || {
            let p = b.topic("m").ok()?.partition(0).ok()?;
            std::fs::canonicalize(p.log().dir()).ok()
        };
        wait_until("the move done", || {
            b.future_logs().is_empty() && served_from() == Some(to.join("m-0"))
        });
    }
    // Both keep their roles: the leader leads at the same epoch, the follower fetches
    // and stays in the ISR, and records are acknowledged after the moves.
    writer.wait_for_more("records after the moves", 20);
    let (acked, _) = writer.finish();
    assert_eq!(part(&c, leader, "m", 0).leader_epoch(), epoch);
    wait_until("every replica in the ISR", || {
        c.node(0).image().topic("m").unwrap().partitions[0]
            .isr
            .len()
            == 3
    });
    let img = c.wait_same_image();
    assert_eq!(
        img.topic("m").unwrap().partitions[0].leader,
        leader as i32 + 1
    );
    for i in 0..3 {
        assert_acked_stored(&c, i, "m", 0, &acked);
    }
    // A directory the node does not have is LOG_DIR_NOT_FOUND.
    let out = admin
        .alter_replica_log_dirs(1, &[(tp.clone(), "/nowhere/at/all".into())])
        .unwrap();
    match &out[&tp] {
        Err(crate::error::Error::Admin(e)) => assert_eq!(e.code, ErrorCode::LOG_DIR_NOT_FOUND),
        other => panic!("{other:?}"),
    }
    c.shutdown();
}

/// Kafka's dynamic `replica.alter.log.dirs.io.max.bytes.per.second`: set for one
/// broker or cluster-wide, each node paces its moves by its value, and back to the
/// one it started with once deleted.
#[test]
fn the_move_rate_is_a_dynamic_broker_config() {
    use crate::admin::AlterConfigOp;
    use crate::cluster::image::LOG_DIR_MOVE_RATE;
    let c = TestCluster::with_log_dirs(3, LAG);
    c.wait_settled();
    let admin = AdminClient::connect(&bootstrap(&c)).unwrap();
    let set = |v: &str| AlterConfigOp::Set(LOG_DIR_MOVE_RATE.into(), v.into());
    let rates =
        || -> Vec<Option<u64>> { (0..3).map(|i| broker(&c, i).log_dir_move_rate()).collect() };
    assert_eq!(rates(), vec![None; 3]);
    admin.alter_broker_configs(None, &[set("5000")]).unwrap();
    admin.alter_broker_configs(Some(2), &[set("1000")]).unwrap();
    wait_until("the rates applied", || {
        rates() == vec![Some(5000), Some(1000), Some(5000)]
    });
    let delete = AlterConfigOp::Delete(LOG_DIR_MOVE_RATE.into());
    admin
        .alter_broker_configs(None, std::slice::from_ref(&delete))
        .unwrap();
    admin.alter_broker_configs(Some(2), &[delete]).unwrap();
    wait_until("the rates back to unlimited", || rates() == vec![None; 3]);
    c.shutdown();
}
