//! Partition operations on an in-process cluster, through the admin client over the
//! wire: a preferred leader election brings a moved leadership back, DescribeLogDirs
//! lists each node's logs, a partition moves to another node under an `acks=all`
//! producer without losing an acknowledged record (the old replica's data deleted), and
//! a reassignment in progress is cancelled.

use super::acked_writes::{AckedWriter, assert_acked_stored, bootstrap};
use super::replication::{broker, part};
use super::*;
use crate::admin::{AdminClient, ElectionType, ErrorCode, TopicPartition};
use crate::error::Error;
use crate::producer::{Acks, Producer, ProducerRecord};

/// Creates `name` with one partition on node ids `replicas`, settled on every node.
pub(super) fn create_on(
    c: &TestCluster,
    name: &str,
    replicas: Vec<i32>,
    configs: Vec<(String, String)>,
) {
    c.node(c.running()[0])
        .create_topic(
            &NewTopic {
                name: name.into(),
                partitions: -1,
                replication_factor: -1,
                assignment: Some(vec![replicas]),
                configs,
            },
            false,
            WAIT,
        )
        .unwrap();
    c.wait_same_image();
}

fn partition_image(c: &TestCluster, topic: &str) -> image::PartitionImage {
    c.node(c.running()[0])
        .image()
        .topic(topic)
        .unwrap()
        .partitions[0]
        .clone()
}

fn refusal(r: &crate::error::Result<()>) -> Option<ErrorCode> {
    match r {
        Err(Error::Admin(e)) => Some(e.code),
        _ => None,
    }
}

#[test]
fn a_preferred_election_brings_the_leadership_back_and_log_dirs_list_every_node() {
    let c = TestCluster::new(3, 1024);
    c.wait_settled();
    create_on(&c, "lead", vec![1, 2, 3], Vec::new());
    let admin = AdminClient::connect(&bootstrap(&c)).unwrap();
    let lead0 = TopicPartition::new("lead", 0);
    let out = admin
        .elect_leaders(ElectionType::Preferred, Some(std::slice::from_ref(&lead0)))
        .unwrap();
    assert_eq!(refusal(&out[&lead0]), Some(ErrorCode::ELECTION_NOT_NEEDED));
    // Fence node 1 as a lost session would: its leadership moves to node 2; node 1
    // asks to be unfenced, catches up and rejoins the ISR, but does not lead.
    let epoch = c.node(0).image().brokers[&1].epoch;
    c.node(1)
        .propose(
            MetadataRecord::FenceBroker {
                broker_id: 1,
                broker_epoch: epoch,
            },
            WAIT,
        )
        .unwrap();
    // Back in the ISR of every partition it holds (the offsets partitions too: the
    // preferred election of every partition below elects it where it comes first).
    wait_until("node 1 back in every ISR, not leading lead-0", || {
        let img = c.node(0).image();
        let p = &img.topic("lead").unwrap().partitions[0];
        p.leader == 2
            && img.is_unfenced(1)
            && img
                .topics
                .values()
                .flat_map(|t| &t.partitions)
                .all(|p| !p.replicas.contains(&1) || p.isr.contains(&1))
    });
    let out = admin
        .elect_leaders(ElectionType::Unclean, Some(std::slice::from_ref(&lead0)))
        .unwrap();
    assert_eq!(
        refusal(&out[&lead0]),
        Some(ErrorCode::ELECTION_NOT_NEEDED),
        "an unclean election of a led partition"
    );
    // Every partition: the moved one is elected (offsets partitions may be too).
    let out = admin.elect_leaders(ElectionType::Preferred, None).unwrap();
    assert!(matches!(out.get(&lead0), Some(Ok(()))), "{out:?}");
    assert!(out.values().all(|r| r.is_ok()), "{out:?}");
    let img = c.wait_same_image();
    assert_eq!(img.topic("lead").unwrap().partitions[0].leader, 1);
    let leader = part(&c, 0, "lead", 0);
    wait_until("node 1 leads", || leader.is_leader());
    let missing = TopicPartition::new("nope", 0);
    let out = admin
        .elect_leaders(
            ElectionType::Preferred,
            Some(std::slice::from_ref(&missing)),
        )
        .unwrap();
    assert_eq!(
        refusal(&out[&missing]),
        Some(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION)
    );

    // Each node describes its own data directory, with the partition and its size.
    let producer = Producer::builder(&broker(&c, 0))
        .acks(Acks::All)
        .build()
        .unwrap();
    producer
        .send("lead", ProducerRecord::new(b"some bytes").partition(0))
        .unwrap();
    wait_until("every replica has the record", || {
        (0..3).all(|i| part(&c, i, "lead", 0).log_end_offset() == 1)
    });
    let dirs = admin.describe_log_dirs().unwrap();
    assert_eq!(dirs.keys().copied().collect::<Vec<_>>(), vec![1, 2, 3]);
    for (id, d) in &dirs {
        let d = d.as_ref().unwrap();
        assert_eq!(d.len(), 1, "one directory per node");
        let want = std::fs::canonicalize(c.dir(*id as usize - 1)).unwrap();
        assert_eq!(d[0].path, want.display().to_string());
        assert!(d[0].error.is_none());
        let r = d[0]
            .replicas
            .iter()
            .find(|r| r.partition == lead0)
            .unwrap_or_else(|| panic!("node {id}: {d:?}"));
        assert_eq!(
            r.size as u64,
            part(&c, *id as usize - 1, "lead", 0).size_bytes()
        );
        assert!(r.size > 0 && r.offset_lag == 0 && !r.is_future, "{r:?}");
    }
    c.shutdown();
}

#[test]
fn a_partition_moves_to_another_node_under_acks_all_writes_and_loses_nothing() {
    let c = TestCluster::new(4, 1024);
    c.wait_settled();
    create_on(
        &c,
        "moves",
        vec![1, 2, 3],
        vec![("min.insync.replicas".into(), "2".into())],
    );
    let writer = AckedWriter::start(&c, "moves", 1);
    wait_until("writes acknowledged", || writer.count() >= 50);
    let admin = AdminClient::connect(&bootstrap(&c)).unwrap();
    let moves0 = TopicPartition::new("moves", 0);
    // Node 1 (the leader) is replaced by node 4.
    let out = admin
        .alter_partition_reassignments(&[(moves0.clone(), Some(vec![4, 2, 3]))])
        .unwrap();
    assert!(matches!(out[&moves0], Ok(())), "{out:?}");
    wait_until("the reassignment to complete", || {
        admin.list_partition_reassignments(None).unwrap().is_empty()
            && partition_image(&c, "moves").replicas == vec![4, 2, 3]
    });
    let img = c.wait_same_image();
    let p = &img.topic("moves").unwrap().partitions[0];
    assert_eq!(p.leader, 4, "the leadership moved off the removed leader");
    assert_eq!(p.isr, vec![4, 2, 3]);
    wait_until("node 1's copy deleted", || {
        !partition_dir(c.dir(0), "moves", 0).exists()
    });
    assert!(broker(&c, 0).hosted_partition("moves", 0).is_none());
    writer.wait_for_more("writes acknowledged by the new leader", 50);
    let (acked, failed) = writer.finish();
    // Every acknowledged record is on the new leader, at its offset.
    assert_acked_stored(&c, 3, "moves", 0, &acked);
    eprintln!(
        "{} records acknowledged across the move, {failed} sends failed",
        acked.len()
    );
    c.shutdown();
}

#[test]
fn a_reassignment_in_progress_is_cancelled() {
    let c = TestCluster::new(4, 1024);
    c.wait_settled();
    create_on(&c, "stay", vec![1, 2, 3], Vec::new());
    let admin = AdminClient::connect(&bootstrap(&c)).unwrap();
    let stay0 = TopicPartition::new("stay", 0);
    let out = admin
        .alter_partition_reassignments(&[(stay0.clone(), None)])
        .unwrap();
    assert_eq!(
        refusal(&out[&stay0]),
        Some(ErrorCode::NO_REASSIGNMENT_IN_PROGRESS)
    );
    // Node 4 cannot catch up while its fetchers are paused: the move stays in progress.
    c.node(3).replica_manager().pause_fetchers(true);
    let out = admin
        .alter_partition_reassignments(&[(stay0.clone(), Some(vec![1, 2, 4]))])
        .unwrap();
    assert!(matches!(out[&stay0], Ok(())), "{out:?}");
    let listed = admin.list_partition_reassignments(None).unwrap();
    let r = &listed[&stay0];
    assert_eq!(
        (r.replicas.clone(), r.adding.clone(), r.removing.clone()),
        (vec![1, 2, 4, 3], vec![4], vec![3])
    );
    wait_until("node 4 holds a replica", || {
        partition_dir(c.dir(3), "stay", 0).exists()
    });
    // Bad targets are refused per partition.
    let nowhere = TopicPartition::new("stay", 5);
    let out = admin
        .alter_partition_reassignments(&[(nowhere.clone(), Some(vec![1]))])
        .unwrap();
    assert_eq!(
        refusal(&out[&nowhere]),
        Some(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION)
    );
    let out = admin
        .alter_partition_reassignments(&[(stay0.clone(), Some(vec![1, 9]))])
        .unwrap();
    assert_eq!(
        refusal(&out[&stay0]),
        Some(ErrorCode::INVALID_REPLICA_ASSIGNMENT)
    );
    // Cancelled: the original replicas stay, node 4's copy goes.
    let out = admin
        .alter_partition_reassignments(&[(stay0.clone(), None)])
        .unwrap();
    assert!(matches!(out[&stay0], Ok(())), "{out:?}");
    assert!(admin.list_partition_reassignments(None).unwrap().is_empty());
    // The controller answered once the cancellation was committed; the node read here
    // may apply it a moment later.
    wait_until("the cancellation applied on the node read", || {
        let p = partition_image(&c, "stay");
        let mut replicas = p.replicas.clone();
        replicas.sort_unstable();
        replicas == [1, 2, 3] && !p.reassigning()
    });
    wait_until("node 4's copy deleted", || {
        !partition_dir(c.dir(3), "stay", 0).exists()
    });
    c.node(3).replica_manager().pause_fetchers(false);
    c.shutdown();
}
