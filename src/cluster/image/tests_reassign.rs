//! Reassignments (KIP-455) and unclean elections as applied to the image.

use super::*;
use crate::cluster::records::tests::registration;

/// Brokers `ids` registered and unfenced.
fn cluster(ids: &[i32]) -> MetadataImage {
    let mut img = MetadataImage::default();
    for &id in ids {
        let at = img.index + 1;
        img.apply(at, &registration(id, id as u64, &format!("h:{id}")))
            .unwrap();
        let epoch = img.brokers[&id].epoch;
        img.apply(
            at + 1,
            &MetadataRecord::BrokerReady {
                broker_id: id,
                broker_epoch: epoch,
            },
        )
        .unwrap();
    }
    img
}

fn apply(img: &mut MetadataImage, record: MetadataRecord) -> Outcome {
    let at = img.index + 1;
    img.apply(at, &record)
}

/// Topic "t", one partition on `replicas`.
fn with_topic(ids: &[i32], replicas: Vec<i32>) -> MetadataImage {
    let mut img = cluster(ids);
    apply(
        &mut img,
        MetadataRecord::CreateTopic(CreateTopic {
            name: "t".into(),
            topic_id: [1; 16],
            partitions: -1,
            replication_factor: -1,
            assignment: Some(vec![replicas]),
            configs: vec![],
            internal: false,
        }),
    )
    .unwrap();
    img
}

fn t0() -> PartitionRef {
    PartitionRef {
        topic: "t".into(),
        topic_id: [1; 16],
        partition: 0,
    }
}

fn reassign(img: &mut MetadataImage, target: Option<Vec<i32>>) -> Outcome {
    apply(
        img,
        MetadataRecord::AlterPartitionReassignment {
            partition: t0(),
            target,
        },
    )
}

fn p(img: &MetadataImage) -> &PartitionImage {
    &img.topics["t"].partitions[0]
}

/// The leader of t-0 proposes `isr`.
fn alter_isr(img: &mut MetadataImage, isr: Vec<i32>) -> Outcome {
    let part = p(img).clone();
    let change = AlterPartition {
        topic: "t".into(),
        topic_id: [1; 16],
        partition: 0,
        broker_id: part.leader,
        broker_epoch: img.brokers[&part.leader].epoch,
        leader_epoch: part.leader_epoch,
        partition_epoch: part.partition_epoch,
        new_isr: isr,
    };
    apply(img, MetadataRecord::AlterPartition(change))
}

#[test]
fn new_replicas_follow_until_in_sync_then_the_set_switches_and_the_leader_moves_off() {
    let mut img = with_topic(&[1, 2, 3, 4], vec![1, 2, 3]);
    let start = p(&img).clone();
    reassign(&mut img, Some(vec![2, 3, 4])).unwrap();
    let moving = p(&img).clone();
    assert_eq!(moving.replicas, vec![2, 3, 4, 1]);
    assert_eq!(moving.adding_replicas, vec![4]);
    assert_eq!(moving.removing_replicas, vec![1]);
    // The ISR keeps its members (in replica order); the leader stays until the switch.
    assert_eq!(moving.isr, vec![2, 3, 1]);
    assert_eq!(moving.leader, 1);
    assert_eq!(moving.leader_epoch, start.leader_epoch);
    assert_eq!(moving.partition_epoch, start.partition_epoch + 1);
    // Node 4 now hosts a follower of the partition.
    let c = local_changes(4, &with_topic(&[1, 2, 3, 4], vec![1, 2, 3]), &img);
    assert!(
        matches!(
            &c.changed[..],
            [LocalPartitionChange {
                role: LocalRole::Follower { leader: 1, .. },
                ..
            }]
        ),
        "{c:?}"
    );
    // The leader adds node 4 to the ISR: the replica set becomes the target, and the
    // removed leader hands over to the first target replica in sync.
    let before = img.clone();
    alter_isr(&mut img, vec![1, 2, 3, 4]).unwrap();
    let done = p(&img).clone();
    assert_eq!(done.replicas, vec![2, 3, 4]);
    assert_eq!(done.isr, vec![2, 3, 4]);
    assert_eq!(done.leader, 2);
    assert!(done.adding_replicas.is_empty() && done.removing_replicas.is_empty());
    assert_eq!(done.leader_epoch, moving.leader_epoch + 1);
    assert!(done.partition_epoch > moving.partition_epoch);
    assert!(img.reassignments().is_empty());
    // Node 1 no longer hosts it: its local log goes.
    let c = local_changes(1, &before, &img);
    assert_eq!(c.removed, vec![("t".to_string(), [1; 16], 0)]);
}

#[test]
fn an_isr_expansion_short_of_the_target_does_not_switch() {
    let mut img = with_topic(&[1, 2, 3, 4, 5], vec![1, 2, 3]);
    reassign(&mut img, Some(vec![4, 5, 1])).unwrap();
    alter_isr(&mut img, vec![1, 2, 3, 4]).unwrap();
    assert_eq!(p(&img).replicas, vec![4, 5, 1, 2, 3]);
    assert_eq!(p(&img).adding_replicas, vec![4, 5]);
    assert_eq!(img.reassignments().len(), 1);
    alter_isr(&mut img, vec![1, 2, 3, 4, 5]).unwrap();
    assert_eq!(p(&img).replicas, vec![4, 5, 1]);
    assert_eq!(p(&img).isr, vec![4, 5, 1]);
    // The leader is a target replica: it stays.
    assert_eq!(p(&img).leader, 1);
}

#[test]
fn a_target_already_in_sync_switches_at_once() {
    let mut img = with_topic(&[1, 2, 3], vec![1, 2, 3]);
    let epoch = p(&img).leader_epoch;
    reassign(&mut img, Some(vec![2, 3])).unwrap();
    assert_eq!(p(&img).replicas, vec![2, 3]);
    assert_eq!(p(&img).isr, vec![2, 3]);
    assert_eq!(p(&img).leader, 2);
    assert_eq!(p(&img).leader_epoch, epoch + 1);
    assert!(!p(&img).reassigning());
    // The same replicas in another order: the preferred leader changes, nothing moves.
    reassign(&mut img, Some(vec![3, 2])).unwrap();
    assert_eq!(p(&img).replicas, vec![3, 2]);
    assert_eq!(p(&img).leader, 2);
}

#[test]
fn a_cancellation_goes_back_to_the_original_replicas() {
    let mut img = with_topic(&[1, 2, 3, 4], vec![1, 2, 3]);
    reassign(&mut img, Some(vec![2, 3, 4])).unwrap();
    let moving = p(&img).clone();
    reassign(&mut img, None).unwrap();
    let back = p(&img).clone();
    assert_eq!(back.original_replicas(), back.replicas);
    let mut sorted = back.replicas.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, vec![1, 2, 3]);
    assert!(!back.reassigning());
    assert_eq!(back.leader, 1);
    assert!(back.partition_epoch > moving.partition_epoch);
    // Node 4 stops hosting it.
    let c = local_changes(
        4,
        &{
            let mut m = img.clone();
            m.topics = BTreeMap::from([(
                "t".to_string(),
                Arc::new(TopicImage {
                    partitions: vec![moving],
                    ..(*img.topics["t"]).clone()
                }),
            )]);
            m
        },
        &img,
    );
    assert_eq!(c.removed, vec![("t".to_string(), [1; 16], 0)]);
    // A second cancellation changes nothing.
    let same = img.topics.clone();
    reassign(&mut img, None).unwrap();
    assert_eq!(img.topics, same);
}

#[test]
fn a_new_target_replaces_the_reassignment_in_progress() {
    let mut img = with_topic(&[1, 2, 3, 4, 5], vec![1, 2, 3]);
    reassign(&mut img, Some(vec![2, 3, 4])).unwrap();
    reassign(&mut img, Some(vec![1, 2, 5])).unwrap();
    let q = p(&img);
    // The original replicas stay those before the first move: 4 is dropped.
    assert_eq!(q.replicas, vec![1, 2, 5, 3]);
    assert_eq!(q.adding_replicas, vec![5]);
    assert_eq!(q.removing_replicas, vec![3]);
    assert_eq!(q.isr, vec![1, 2, 3]);
}

#[test]
fn bad_targets_are_refused_and_change_nothing() {
    let mut img = with_topic(&[1, 2, 3], vec![1, 2, 3]);
    let same = img.topics.clone();
    for (target, why) in [
        (vec![], "at least one"),
        (vec![1, 1, 2], "twice"),
        (vec![1, 2, 9], "broker 9 is not registered"),
    ] {
        let e = reassign(&mut img, Some(target)).unwrap_err();
        assert!(
            matches!(&e, Rejected::InvalidReplicaAssignment { reason, .. } if reason.contains(why)),
            "{e:?}"
        );
    }
    let mut other = t0();
    other.topic_id = [2; 16];
    let e = apply(
        &mut img,
        MetadataRecord::AlterPartitionReassignment {
            partition: other,
            target: Some(vec![1]),
        },
    )
    .unwrap_err();
    assert_eq!(e, Rejected::UnknownTopic("t".into()));
    let mut beyond = t0();
    beyond.partition = 1;
    let e = apply(
        &mut img,
        MetadataRecord::AlterPartitionReassignment {
            partition: beyond,
            target: Some(vec![1]),
        },
    )
    .unwrap_err();
    assert!(
        matches!(
            e,
            Rejected::UnknownPartition {
                partition: 1,
                count: 1,
                ..
            }
        ),
        "{e:?}"
    );
    assert_eq!(img.topics, same);
}

#[test]
fn a_target_without_an_in_sync_replica_is_refused() {
    let mut img = with_topic(&[1, 2, 3, 4], vec![1]);
    reassign(&mut img, Some(vec![2, 3])).unwrap();
    alter_isr(&mut img, vec![1, 2]).unwrap();
    // The original replica dies: the added one leads.
    let epoch = img.brokers[&1].epoch;
    apply(
        &mut img,
        MetadataRecord::FenceBroker {
            broker_id: 1,
            broker_epoch: epoch,
        },
    )
    .unwrap();
    assert_eq!((p(&img).leader, p(&img).isr.clone()), (2, vec![2]));
    // A new target of 4 keeps the original replica 1 and 4: neither is in sync.
    let same = img.topics.clone();
    let e = reassign(&mut img, Some(vec![4])).unwrap_err();
    assert!(
        matches!(&e, Rejected::InvalidReplicaAssignment { reason, .. } if reason.contains("in sync")),
        "{e:?}"
    );
    // Cancelling would leave only replica 1, out of sync: refused too.
    assert!(reassign(&mut img, None).is_err());
    assert_eq!(img.topics, same);
}

#[test]
fn an_unclean_election_leads_a_leaderless_partition_from_outside_the_isr() {
    let mut img = with_topic(&[1, 2, 3], vec![1, 2]);
    alter_isr(&mut img, vec![1]).unwrap();
    let epoch = img.brokers[&1].epoch;
    apply(
        &mut img,
        MetadataRecord::FenceBroker {
            broker_id: 1,
            broker_epoch: epoch,
        },
    )
    .unwrap();
    assert_eq!((p(&img).leader, p(&img).isr.clone()), (NO_LEADER, vec![1]));
    let before = p(&img).clone();
    let elect = MetadataRecord::ElectUncleanLeaders {
        partitions: vec![t0()],
    };
    apply(&mut img, elect.clone()).unwrap();
    assert_eq!((p(&img).leader, p(&img).isr.clone()), (2, vec![2]));
    assert_eq!(p(&img).leader_epoch, before.leader_epoch + 1);
    // A partition with a leader is left alone.
    let now = img.topics.clone();
    apply(&mut img, elect).unwrap();
    assert_eq!(img.topics, now);
}

#[test]
fn a_reassignment_survives_a_snapshot() {
    let mut img = with_topic(&[1, 2, 3, 4], vec![1, 2, 3]);
    reassign(&mut img, Some(vec![4, 2, 3])).unwrap();
    let back = MetadataImage::decode(&img.encode(), "snapshot").unwrap();
    assert_eq!(back, img);
    assert_eq!(back.reassignments().len(), 1);
}
