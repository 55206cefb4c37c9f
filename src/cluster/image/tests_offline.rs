//! Offline replicas (KIP-858) as applied to the image: ISR and leadership, elections
//! that never pick an offline replica, stale epochs, re-registration, the snapshot.

use super::tests::{check_invariants, cluster, fence, next, ready};
use super::*;
use crate::cluster::records::tests::{assigned_topic, registration};

/// Topic `name` with the given replicas per partition (its id is `[name.len(); 16]`).
fn create_with(img: &mut MetadataImage, name: &str, assignment: Vec<Vec<i32>>) {
    img.apply(next(img), &assigned_topic(name, assignment))
        .unwrap();
}

/// `ReplicasOffline` of broker `id` (at `epoch`, or its current one) for partitions
/// `partitions` of topic `name`.
fn offline(
    img: &mut MetadataImage,
    id: i32,
    epoch: Option<i64>,
    name: &str,
    partitions: &[i32],
) -> Outcome {
    let broker_epoch = epoch.unwrap_or_else(|| img.brokers[&id].epoch);
    let topic_id = img.topics[name].id;
    let out = img.apply(
        next(img),
        &MetadataRecord::ReplicasOffline {
            broker_id: id,
            broker_epoch,
            partitions: partitions.iter().map(|p| (topic_id, *p)).collect(),
        },
    );
    check_invariants(img);
    out
}

fn p<'a>(img: &'a MetadataImage, name: &str, i: usize) -> &'a PartitionImage {
    &img.topics[name].partitions[i]
}

fn elect_unclean(img: &mut MetadataImage, name: &str, partition: i32) {
    let topic_id = img.topics[name].id;
    img.apply(
        next(img),
        &MetadataRecord::ElectUncleanLeaders {
            partitions: vec![PartitionRef {
                topic: name.into(),
                topic_id,
                partition,
            }],
        },
    )
    .unwrap();
    check_invariants(img);
}

fn reregister(img: &mut MetadataImage, id: i32) {
    img.apply(
        next(img),
        &registration(id, img.index + 7_000, &format!("127.0.0.1:{}", 9000 + id)),
    )
    .unwrap();
    check_invariants(img);
}

#[test]
fn an_offline_leader_hands_over_and_is_never_elected_again() {
    let mut img = cluster(&[1, 2, 3]);
    create_with(&mut img, "t", vec![vec![1, 2, 3], vec![2, 3, 1]]);
    let before = p(&img, "t", 0).clone();

    // A stale epoch is refused and changes nothing.
    let stale = img.brokers[&1].epoch - 1;
    let e = offline(&mut img, 1, Some(stale), "t", &[0]).unwrap_err();
    assert!(
        matches!(e, Rejected::StaleBroker { broker: 1, .. }),
        "{e:?}"
    );
    assert_eq!(p(&img, "t", 0), &before);

    offline(&mut img, 1, None, "t", &[0, 9, -1]).unwrap();
    let after = p(&img, "t", 0);
    assert_eq!(after.offline, [1]);
    assert_eq!(after.isr, [2, 3]);
    assert_eq!(after.leader, 2);
    assert_eq!(after.leader_epoch, before.leader_epoch + 1);
    assert_eq!(after.partition_epoch, before.partition_epoch + 1);
    // Partition 1 was not named: broker 1 stays in its ISR.
    assert_eq!(p(&img, "t", 1).isr, [2, 3, 1]);
    assert!(p(&img, "t", 1).offline.is_empty());
    // The same again changes nothing.
    let same = p(&img, "t", 0).clone();
    offline(&mut img, 1, None, "t", &[0]).unwrap();
    assert_eq!(p(&img, "t", 0), &same);

    // The leader cannot bring the offline replica back into the ISR.
    let (leader_epoch, partition_epoch) = (same.leader_epoch, same.partition_epoch);
    let e = img
        .apply(
            next(&img),
            &MetadataRecord::AlterPartition(AlterPartition {
                topic: "t".into(),
                topic_id: img.topics["t"].id,
                partition: 0,
                broker_id: 2,
                broker_epoch: img.brokers[&2].epoch,
                leader_epoch,
                partition_epoch,
                new_isr: vec![1, 2, 3],
            }),
        )
        .unwrap_err();
    assert!(matches!(e, Rejected::IneligibleReplica { .. }), "{e:?}");

    // Its other replicas fenced one by one: the last one keeps the ISR and the
    // partition has no leader; broker 1 (unfenced, first in replica order) is not
    // elected, not even by an unclean election.
    fence(&mut img, 2);
    assert_eq!(p(&img, "t", 0).leader, 3);
    fence(&mut img, 3);
    assert_eq!(p(&img, "t", 0).leader, NO_LEADER);
    assert_eq!(p(&img, "t", 0).isr, [3]);
    check_invariants(&img);
    elect_unclean(&mut img, "t", 0);
    assert_eq!(p(&img, "t", 0).leader, NO_LEADER);
    ready(&mut img, 2);
    elect_unclean(&mut img, "t", 0);
    assert_eq!(p(&img, "t", 0).leader, 2);
    assert_eq!(p(&img, "t", 0).isr, [2]);
}

#[test]
fn an_offline_last_in_sync_replica_keeps_the_isr_but_leads_nothing() {
    let mut img = cluster(&[1, 2]);
    create_with(&mut img, "t", vec![vec![1, 2]]);
    fence(&mut img, 2);
    assert_eq!(p(&img, "t", 0).isr, [1]);
    offline(&mut img, 1, None, "t", &[0]).unwrap();
    assert_eq!(p(&img, "t", 0).isr, [1]);
    assert_eq!(p(&img, "t", 0).leader, NO_LEADER);
    // Nor does a preferred-leader election, nor its broker unfenced again, elect it.
    let topic_id = img.topics["t"].id;
    img.apply(
        next(&img),
        &MetadataRecord::ElectPreferredLeaders {
            partitions: vec![PartitionRef {
                topic: "t".into(),
                topic_id,
                partition: 0,
            }],
        },
    )
    .unwrap();
    assert_eq!(p(&img, "t", 0).leader, NO_LEADER);
    fence(&mut img, 1);
    ready(&mut img, 1);
    assert_eq!(p(&img, "t", 0).leader, NO_LEADER);
    check_invariants(&img);

    // A new incarnation clears the marks; once it is unfenced it leads again.
    let epoch = p(&img, "t", 0).partition_epoch;
    reregister(&mut img, 1);
    assert!(p(&img, "t", 0).offline.is_empty());
    assert!(p(&img, "t", 0).partition_epoch > epoch);
    assert_eq!(p(&img, "t", 0).leader, NO_LEADER);
    ready(&mut img, 1);
    assert_eq!(p(&img, "t", 0).leader, 1);
    check_invariants(&img);
}

#[test]
fn a_reassignment_drops_the_marks_of_the_replicas_it_removes() {
    let mut img = cluster(&[1, 2, 3]);
    create_with(&mut img, "t", vec![vec![1, 2]]);
    offline(&mut img, 1, None, "t", &[0]).unwrap();
    assert_eq!(p(&img, "t", 0).leader, 2);
    let topic_id = img.topics["t"].id;
    // 1 is removed, 3 added: it must join the ISR before the move completes.
    img.apply(
        next(&img),
        &MetadataRecord::AlterPartitionReassignment {
            partition: PartitionRef {
                topic: "t".into(),
                topic_id,
                partition: 0,
            },
            target: Some(vec![2, 3]),
        },
    )
    .unwrap();
    check_invariants(&img);
    assert_eq!(p(&img, "t", 0).offline, [1]);
    let q = p(&img, "t", 0).clone();
    img.apply(
        next(&img),
        &MetadataRecord::AlterPartition(AlterPartition {
            topic: "t".into(),
            topic_id,
            partition: 0,
            broker_id: 2,
            broker_epoch: img.brokers[&2].epoch,
            leader_epoch: q.leader_epoch,
            partition_epoch: q.partition_epoch,
            new_isr: vec![2, 3],
        }),
    )
    .unwrap();
    check_invariants(&img);
    assert_eq!(p(&img, "t", 0).replicas, [2, 3]);
    assert!(p(&img, "t", 0).offline.is_empty());
}

#[test]
fn the_snapshot_keeps_the_marks_and_a_version_11_image_has_none() {
    let mut img = cluster(&[1, 2, 3]);
    create_with(&mut img, "t", vec![vec![1, 2, 3]]);
    offline(&mut img, 3, None, "t", &[0]).unwrap();
    let bytes = img.encode();
    assert_eq!(&bytes[..2], &[0, 12]);
    let back = MetadataImage::decode(&bytes, "snapshot").unwrap();
    assert_eq!(back, img);
    assert_eq!(back.topics["t"].partitions[0].offline, [3]);

    let v11 = MetadataImage::decode(&img.encode_v11(), "v11").unwrap();
    assert!(v11.topics["t"].partitions[0].offline.is_empty());
    let mut expected = img.clone();
    let mut t = (*expected.topics["t"]).clone();
    t.partitions[0].offline.clear();
    expected.topics.insert("t".into(), Arc::new(t));
    assert_eq!(v11, expected);
    // Version 12 adds exactly the one list per partition: a count and broker 3.
    assert_eq!(bytes.len(), img.encode_v11().len() + 8);
}
