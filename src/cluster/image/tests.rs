//! The apply rules: placement, elections, fencing, epochs; a property test over random
//! record sequences checks the image invariants and that every node reaches the same
//! image.

use super::*;
use crate::cluster::records::tests::{registration, samples};
use crate::cluster::records::{Envelope, Stamp};
use proptest::prelude::*;

/// An image with brokers `ids` registered and unfenced (registration indexes 1..).
pub(super) fn cluster(ids: &[i32]) -> MetadataImage {
    let mut img = MetadataImage::default();
    let mut index = 0;
    for &id in ids {
        index += 1;
        img.apply(
            index,
            &registration(id, id as u64 * 100, &format!("127.0.0.1:{}", 9000 + id)),
        )
        .unwrap();
    }
    for &id in ids {
        index += 1;
        let epoch = img.brokers[&id].epoch;
        img.apply(
            index,
            &MetadataRecord::BrokerReady {
                broker_id: id,
                broker_epoch: epoch,
            },
        )
        .unwrap();
    }
    img
}

pub(super) fn next(img: &MetadataImage) -> u64 {
    img.index + 1
}

fn create(img: &mut MetadataImage, name: &str, partitions: i32, rf: i16) -> Outcome {
    img.apply(
        next(img),
        &MetadataRecord::CreateTopic(CreateTopic {
            name: name.into(),
            topic_id: [name.len() as u8; 16],
            partitions,
            replication_factor: rf,
            assignment: None,
            configs: vec![],
            internal: false,
        }),
    )
}

pub(super) fn fence(img: &mut MetadataImage, id: i32) {
    let epoch = img.brokers[&id].epoch;
    img.apply(
        next(img),
        &MetadataRecord::FenceBroker {
            broker_id: id,
            broker_epoch: epoch,
        },
    )
    .unwrap();
}

pub(super) fn ready(img: &mut MetadataImage, id: i32) {
    let epoch = img.brokers[&id].epoch;
    img.apply(
        next(img),
        &MetadataRecord::BrokerReady {
            broker_id: id,
            broker_epoch: epoch,
        },
    )
    .unwrap();
}

fn part<'a>(img: &'a MetadataImage, topic: &str, p: usize) -> &'a PartitionImage {
    &img.topics[topic].partitions[p]
}

/// Every invariant of the module documentation.
pub(super) fn check_invariants(img: &MetadataImage) {
    // Every registered broker supports every finalized feature level.
    for b in img.brokers.values() {
        assert_eq!(
            features::unsupported_finalized(b.id, &img.features, &b.features),
            None
        );
    }
    for t in img.topics.values() {
        for (i, p) in t.partitions.iter().enumerate() {
            let at = format!("{}-{i}: {p:?}", t.name);
            assert!(!p.isr.is_empty(), "empty ISR {at}");
            let mut isr = p.isr.clone();
            isr.sort_unstable();
            isr.dedup();
            assert_eq!(isr.len(), p.isr.len(), "duplicate in ISR {at}");
            assert!(
                p.isr.iter().all(|r| p.replicas.contains(r)),
                "ISR not in replicas {at}"
            );
            if p.leader != NO_LEADER {
                assert!(p.isr.contains(&p.leader), "leader outside ISR {at}");
                assert!(img.is_unfenced(p.leader), "fenced leader {at}");
                assert!(!p.is_offline(p.leader), "offline leader {at}");
            } else {
                assert!(
                    !p.isr
                        .iter()
                        .any(|r| img.is_unfenced(*r) && !p.is_offline(*r)),
                    "leaderless with an unfenced, online ISR member {at}"
                );
            }
            // Offline replicas: replicas, each once, in replica order, registered.
            let positions: Vec<Option<usize>> = p
                .offline
                .iter()
                .map(|r| p.replicas.iter().position(|x| x == r))
                .collect();
            assert!(
                positions.iter().all(Option::is_some) && positions.windows(2).all(|w| w[0] < w[1]),
                "offline replicas not replicas, repeated or out of order {at}"
            );
            assert!(
                p.offline.iter().all(|r| img.brokers.contains_key(r)),
                "offline replica of an unregistered broker {at}"
            );
            if p.isr.iter().any(|r| p.is_offline(*r)) {
                assert_eq!(p.isr.len(), 1, "offline replica in a larger ISR {at}");
                assert_eq!(p.leader, NO_LEADER, "{at}");
            }
            let mut replicas = p.replicas.clone();
            replicas.sort_unstable();
            replicas.dedup();
            assert_eq!(replicas.len(), p.replicas.len(), "duplicate replica {at}");
            assert!(
                p.adding_replicas
                    .iter()
                    .chain(&p.removing_replicas)
                    .all(|r| p.replicas.contains(r)),
                "a reassignment's replica outside the replicas {at}"
            );
            assert!(
                !p.adding_replicas
                    .iter()
                    .any(|r| p.removing_replicas.contains(r)),
                "a replica both added and removed {at}"
            );
            assert!(!p.target_replicas().is_empty(), "no target replica {at}");
            if p.isr.iter().any(|r| !img.is_unfenced(*r)) {
                assert_eq!(p.isr.len(), 1, "fenced broker in a larger ISR {at}");
                assert_eq!(p.leader, NO_LEADER, "{at}");
            }
        }
    }
}

#[test]
fn placement_spreads_leaders_and_replicas_evenly() {
    let mut img = cluster(&[1, 2, 3]);
    create(&mut img, "events", 6, 3).unwrap();
    check_invariants(&img);
    let t = &img.topics["events"];
    let mut leaders = BTreeMap::new();
    for p in &t.partitions {
        assert_eq!(p.replicas.len(), 3);
        assert_eq!(p.isr, p.replicas, "a new partition's ISR is every replica");
        assert_eq!(p.leader, p.replicas[0]);
        *leaders.entry(p.leader).or_insert(0) += 1;
    }
    assert_eq!(
        leaders.values().copied().collect::<Vec<_>>(),
        vec![2, 2, 2],
        "{leaders:?}"
    );
    // Replication factor 2 over 4 brokers, 8 partitions: every broker leads 2 and holds 4.
    let mut img = cluster(&[1, 2, 3, 4]);
    create(&mut img, "t", 8, 2).unwrap();
    let mut lead = BTreeMap::new();
    let mut hold = BTreeMap::new();
    for p in &img.topics["t"].partitions {
        *lead.entry(p.leader).or_insert(0) += 1;
        for r in &p.replicas {
            *hold.entry(*r).or_insert(0) += 1;
        }
        assert_ne!(p.replicas[0], p.replicas[1]);
    }
    assert!(lead.values().all(|n| *n == 2), "{lead:?}");
    assert!(hold.values().all(|n| *n == 4), "{hold:?}");
}

#[test]
fn kafkas_rack_unaware_assignment() {
    // Kafka's documented example: 5 brokers, 10 partitions, start 0, shift 0.
    let a = place_replicas(&[0, 1, 2, 3, 4], 10, 3, 0, 0, 0);
    assert_eq!(a[0], vec![0, 1, 2]);
    assert_eq!(a[4], vec![4, 0, 1]);
    assert_eq!(a[5], vec![0, 2, 3]);
    assert_eq!(a[9], vec![4, 1, 2]);
}

/// `(id, rack)` pairs from `(id, "rackN")`.
fn racked(pairs: &[(i32, &str)]) -> Vec<(i32, String)> {
    pairs.iter().map(|(id, r)| (*id, r.to_string())).collect()
}

#[test]
fn kafkas_rack_aware_assignment() {
    // Kafka's documented example: racks alternate as 0, 3, 1, 5, 4, 2, then round robin.
    let brokers = racked(&[
        (0, "rack1"),
        (1, "rack3"),
        (2, "rack3"),
        (3, "rack2"),
        (4, "rack2"),
        (5, "rack1"),
    ]);
    let a = crate::admin::assign_replicas_rack_aware(&brokers, 6, 3, 0, 0, 0);
    assert_eq!(
        a,
        vec![
            vec![0, 3, 1],
            vec![3, 1, 5],
            vec![1, 5, 4],
            vec![5, 4, 2],
            vec![4, 2, 0],
            vec![2, 0, 3],
        ]
    );
}

#[test]
fn rack_aware_placement_spreads_replicas_over_racks_and_balances_brokers() {
    let brokers = racked(&[(1, "a"), (2, "a"), (3, "b"), (4, "b"), (5, "c"), (6, "c")]);
    let rack = |id: i32| brokers.iter().find(|(b, _)| *b == id).unwrap().1.clone();
    for (start, shift) in [(0, 0), (2, 3), (5, 1)] {
        let a = crate::admin::assign_replicas_rack_aware(&brokers, 12, 3, 0, start, shift);
        let mut lead = std::collections::BTreeMap::new();
        let mut hold = std::collections::BTreeMap::new();
        for replicas in &a {
            let racks: BTreeSet<String> = replicas.iter().map(|r| rack(*r)).collect();
            assert_eq!(racks.len(), 3, "{replicas:?}: one replica per rack");
            *lead.entry(replicas[0]).or_insert(0) += 1;
            for r in replicas {
                *hold.entry(*r).or_insert(0) += 1;
            }
        }
        assert!(lead.values().all(|n| *n == 2), "{lead:?}");
        assert!(hold.values().all(|n| *n == 6), "{hold:?}");
    }
    // Fewer racks than replicas: every rack has one before any has two; no broker twice.
    let two = racked(&[(1, "a"), (2, "a"), (3, "b"), (4, "b")]);
    for replicas in crate::admin::assign_replicas_rack_aware(&two, 8, 3, 0, 1, 1) {
        let distinct: BTreeSet<i32> = replicas.iter().copied().collect();
        assert_eq!(distinct.len(), 3, "{replicas:?}");
        let in_a = replicas.iter().filter(|r| **r <= 2).count();
        assert!(in_a == 1 || in_a == 2, "{replicas:?} spans both racks");
    }
    // One broker: one replica.
    let one = racked(&[(7, "a")]);
    assert_eq!(
        crate::admin::assign_replicas_rack_aware(&one, 2, 1, 0, 0, 0),
        vec![vec![7], vec![7]]
    );
}

/// An image with brokers `racks` (id, rack) registered and unfenced.
fn racked_cluster(racks: &[(i32, Option<&str>)]) -> MetadataImage {
    let mut img = MetadataImage::default();
    for (i, (id, rack)) in racks.iter().enumerate() {
        img.apply(
            i as u64 + 1,
            &MetadataRecord::RegisterBroker {
                broker_id: *id,
                incarnation: *id as u64,
                listener: format!("h:{id}"),
                clean_shutdown_epoch: None,
                replication_listener: None,
                endpoints: vec![],
                rack: rack.map(str::to_string),
                features: vec![],
            },
        )
        .unwrap();
    }
    for (id, _) in racks {
        let epoch = img.brokers[id].epoch;
        let at = next(&img);
        img.apply(
            at,
            &MetadataRecord::BrokerReady {
                broker_id: *id,
                broker_epoch: epoch,
            },
        )
        .unwrap();
    }
    img
}

/// As Kafka's controller (`StripedReplicaPlacer`), the brokers without a rack are one
/// rack more: a partly racked cluster still spreads each partition over its racks.
#[test]
fn brokers_without_a_rack_are_placed_as_one_rack_of_their_own() {
    let mut img = racked_cluster(&[(1, Some("a")), (2, Some("a")), (3, None), (4, None)]);
    create(&mut img, "t", 8, 2).unwrap();
    for p in &img.topic("t").unwrap().partitions {
        let in_a = p.replicas.iter().filter(|r| **r <= 2).count();
        assert_eq!(
            in_a, 1,
            "{:?}: one replica in rack a, one unracked",
            p.replicas
        );
    }
}

#[test]
fn the_controller_places_new_topics_rack_aware_when_every_broker_has_a_rack() {
    let mut img = racked_cluster(&[
        (1, Some("a")),
        (2, Some("a")),
        (3, Some("b")),
        (4, Some("b")),
    ]);
    create(&mut img, "t", 8, 2).unwrap();
    let extra = img.index + 1;
    img.apply(
        extra,
        &MetadataRecord::CreatePartitions {
            name: "t".into(),
            total: 12,
            assignment: None,
        },
    )
    .unwrap();
    let t = img.topic("t").unwrap();
    assert_eq!(t.partitions.len(), 12);
    for p in &t.partitions {
        let in_a = p.replicas.iter().filter(|r| **r <= 2).count();
        assert_eq!(in_a, 1, "{:?}: one replica in each rack", p.replicas);
    }
}

#[test]
fn replication_factor_above_the_unfenced_brokers_is_refused() {
    let mut img = cluster(&[1, 2, 3]);
    fence(&mut img, 3);
    let before = img.clone();
    let e = create(&mut img, "t", 1, 3).unwrap_err();
    assert!(
        matches!(e, Rejected::InvalidReplicationFactor { .. }),
        "{e:?}"
    );
    assert_eq!(img.topics, before.topics);
    assert!(create(&mut img, "t", 1, 2).is_ok());
    assert!(matches!(
        create(&mut img, "t", 1, 2),
        Err(Rejected::TopicExists(_))
    ));
    assert!(matches!(
        create(&mut img, "t2", 0, 1),
        Err(Rejected::InvalidPartitions { .. })
    ));
    assert!(create(&mut img, "t_", 1, 1).is_ok());
    assert!(matches!(
        create(&mut img, "t.", 1, 1),
        Err(Rejected::InvalidTopicName { .. })
    ));
}

#[test]
fn fencing_the_leader_elects_the_next_isr_member_in_replica_order() {
    let mut img = cluster(&[1, 2, 3]);
    create(&mut img, "t", 3, 3).unwrap();
    let p0 = part(&img, "t", 0).clone();
    let old_leader = p0.leader;
    fence(&mut img, old_leader);
    check_invariants(&img);
    let p = part(&img, "t", 0);
    let expected = p0
        .replicas
        .iter()
        .copied()
        .find(|r| *r != old_leader)
        .unwrap();
    assert_eq!(p.leader, expected);
    assert!(!p.isr.contains(&old_leader));
    assert_eq!(p.leader_epoch, p0.leader_epoch + 1);
    assert_eq!(p.partition_epoch, p0.partition_epoch + 1);
}

/// Makes broker `id` an ISR member of every partition it replicates (as its leaders'
/// AlterPartition would once it caught up).
fn rejoin(img: &mut MetadataImage, id: i32) {
    let names: Vec<String> = img.topics.keys().cloned().collect();
    for name in names {
        for i in 0..img.topics[&name].partitions.len() {
            let t = img.topics[&name].clone();
            let p = &t.partitions[i];
            if !p.hosts(id) || p.isr.contains(&id) || p.leader == NO_LEADER {
                continue;
            }
            let mut isr = p.isr.clone();
            isr.push(id);
            img.apply(
                next(img),
                &MetadataRecord::AlterPartition(AlterPartition {
                    topic: name.clone(),
                    topic_id: t.id,
                    partition: i as i32,
                    broker_id: p.leader,
                    broker_epoch: img.brokers[&p.leader].epoch,
                    leader_epoch: p.leader_epoch,
                    partition_epoch: p.partition_epoch,
                    new_isr: isr,
                }),
            )
            .unwrap();
        }
    }
}

#[test]
fn preferred_leaders_come_back_once_in_sync_and_only_then() {
    let mut img = cluster(&[1, 2, 3]);
    create(&mut img, "t", 6, 3).unwrap();
    assert!(
        img.imbalanced_partitions(10).is_empty(),
        "balanced at creation"
    );
    // A rolling restart: 1 and 2 go and come back; 3 leads everything.
    for b in [1, 2] {
        fence(&mut img, b);
        ready(&mut img, b);
    }
    assert!(img.topics["t"].partitions.iter().all(|p| p.leader == 3));
    // Not in sync yet: nothing to elect.
    assert!(img.imbalanced_partitions(10).is_empty());
    rejoin(&mut img, 1);
    rejoin(&mut img, 2);
    check_invariants(&img);
    let moves = img.imbalanced_partitions(10);
    let expected: Vec<i32> = (0..6)
        .filter(|i| part(&img, "t", *i as usize).replicas[0] != 3)
        .collect();
    let mut moved: Vec<i32> = moves.iter().map(|r| r.partition).collect();
    moved.sort_unstable();
    assert_eq!(moved, expected);
    let before = img.topics["t"].clone();
    img.apply(
        next(&img),
        &MetadataRecord::ElectPreferredLeaders { partitions: moves },
    )
    .unwrap();
    check_invariants(&img);
    for (p, q) in before.partitions.iter().zip(&img.topics["t"].partitions) {
        assert_eq!(q.leader, q.replicas[0], "{q:?}");
        assert_eq!(q.isr, p.isr);
        if p.leader != q.leader {
            assert_eq!(q.leader_epoch, p.leader_epoch + 1);
            assert_eq!(q.partition_epoch, p.partition_epoch + 1);
        } else {
            assert_eq!(q, p);
        }
    }
    assert!(img.imbalanced_partitions(10).is_empty());
    // A stale election (the preferred replica fenced since) changes nothing.
    let p0 = part(&img, "t", 0).clone();
    let stale = MetadataRecord::ElectPreferredLeaders {
        partitions: vec![PartitionRef {
            topic: "t".into(),
            topic_id: img.topics["t"].id,
            partition: 0,
        }],
    };
    fence(&mut img, p0.replicas[0]);
    let before = img.clone();
    img.apply(next(&img), &stale).unwrap();
    assert_eq!(img.topics, before.topics);
}

#[test]
fn the_imbalance_threshold_is_per_broker() {
    let mut img = cluster(&[1, 2, 3]);
    create(&mut img, "t", 30, 3).unwrap();
    // Ten partitions prefer each broker. One of broker 1's moves: 10%, not above.
    let first = (0..30)
        .find(|i| part(&img, "t", *i).replicas[0] == 1)
        .unwrap();
    let mut t = (*img.topics["t"]).clone();
    let p = &mut t.partitions[first];
    p.leader = p.replicas[1];
    img.topics.insert("t".into(), Arc::new(t));
    assert!(img.imbalanced_partitions(10).is_empty());
    let moves = img.imbalanced_partitions(5);
    assert_eq!(moves.len(), 1);
    assert_eq!(moves[0].partition, first as i32);
}

#[test]
fn fencing_a_follower_only_shrinks_the_isr() {
    let mut img = cluster(&[1, 2, 3]);
    create(&mut img, "t", 3, 3).unwrap();
    let before = img.topics["t"].clone();
    fence(&mut img, 3);
    for (p, q) in before.partitions.iter().zip(&img.topics["t"].partitions) {
        if p.leader == 3 {
            continue;
        }
        assert_eq!(q.leader, p.leader);
        assert_eq!(q.leader_epoch, p.leader_epoch);
        assert_eq!(q.partition_epoch, p.partition_epoch + 1);
        assert!(!q.isr.contains(&3) && q.isr.len() == 2);
    }
}

#[test]
fn an_isr_is_never_emptied_and_no_unclean_election() {
    let mut img = cluster(&[1, 2, 3]);
    // One partition on 1 and 2 only.
    img.apply(
        next(&img),
        &MetadataRecord::CreateTopic(CreateTopic {
            name: "t".into(),
            topic_id: [7; 16],
            partitions: -1,
            replication_factor: -1,
            assignment: Some(vec![vec![1, 2]]),
            configs: vec![],
            internal: false,
        }),
    )
    .unwrap();
    // The leader shrinks the ISR to itself (1).
    let p = part(&img, "t", 0).clone();
    img.apply(
        next(&img),
        &MetadataRecord::AlterPartition(AlterPartition {
            topic: "t".into(),
            topic_id: [7; 16],
            partition: 0,
            broker_id: 1,
            broker_epoch: img.brokers[&1].epoch,
            leader_epoch: p.leader_epoch,
            partition_epoch: p.partition_epoch,
            new_isr: vec![1],
        }),
    )
    .unwrap();
    fence(&mut img, 1);
    check_invariants(&img);
    let p = part(&img, "t", 0);
    // 2 is alive but out of sync: it must not lead; 1 stays the ISR's last member.
    assert_eq!(p.leader, NO_LEADER);
    assert_eq!(p.isr, vec![1]);
    // 2 coming back changes nothing.
    fence(&mut img, 2);
    ready(&mut img, 2);
    assert_eq!(part(&img, "t", 0).leader, NO_LEADER);
    // 1 coming back leads again, with a new epoch.
    let epoch = part(&img, "t", 0).leader_epoch;
    ready(&mut img, 1);
    check_invariants(&img);
    assert_eq!(part(&img, "t", 0).leader, 1);
    assert_eq!(part(&img, "t", 0).leader_epoch, epoch + 1);
}

#[test]
fn stale_alter_partition_is_rejected() {
    let mut img = cluster(&[1, 2, 3]);
    create(&mut img, "t", 1, 3).unwrap();
    let p = part(&img, "t", 0).clone();
    let leader = p.leader;
    let change = |isr: Vec<i32>,
                  leader_epoch: i32,
                  partition_epoch: i32,
                  broker: i32,
                  img: &MetadataImage| {
        MetadataRecord::AlterPartition(AlterPartition {
            topic: "t".into(),
            topic_id: img.topics["t"].id,
            partition: 0,
            broker_id: broker,
            broker_epoch: img.brokers[&broker].epoch,
            leader_epoch,
            partition_epoch,
            new_isr: isr,
        })
    };
    let follower = p.replicas.iter().copied().find(|r| *r != leader).unwrap();
    let shrunk: Vec<i32> = p.isr.iter().copied().filter(|r| *r != follower).collect();
    let r = change(
        shrunk.clone(),
        p.leader_epoch,
        p.partition_epoch,
        leader,
        &img,
    );
    img.apply(next(&img), &r).unwrap();
    assert_eq!(part(&img, "t", 0).isr, shrunk);
    assert_eq!(part(&img, "t", 0).partition_epoch, p.partition_epoch + 1);
    assert_eq!(part(&img, "t", 0).leader_epoch, p.leader_epoch);
    // The same change again is stale (partition epoch).
    let e = img.apply(next(&img), &r).unwrap_err();
    assert!(matches!(e, Rejected::InvalidUpdateVersion { .. }), "{e:?}");
    // From a follower, or with an old leader epoch: fenced.
    let cur = part(&img, "t", 0).clone();
    let e = img
        .apply(
            next(&img),
            &change(
                cur.isr.clone(),
                cur.leader_epoch,
                cur.partition_epoch,
                follower,
                &img,
            ),
        )
        .unwrap_err();
    assert!(matches!(e, Rejected::FencedLeaderEpoch { .. }), "{e:?}");
    let e = img
        .apply(
            next(&img),
            &change(
                cur.isr.clone(),
                cur.leader_epoch - 1,
                cur.partition_epoch,
                leader,
                &img,
            ),
        )
        .unwrap_err();
    assert!(matches!(e, Rejected::FencedLeaderEpoch { .. }), "{e:?}");
    // An ISR without the leader, with a non-replica, or adding a fenced broker.
    let bad = [vec![follower], vec![leader, 99]];
    for isr in bad {
        let e = img
            .apply(
                next(&img),
                &change(isr, cur.leader_epoch, cur.partition_epoch, leader, &img),
            )
            .unwrap_err();
        assert!(matches!(e, Rejected::IneligibleReplica { .. }), "{e:?}");
    }
    fence(&mut img, follower);
    let cur = part(&img, "t", 0).clone();
    let mut grown = cur.isr.clone();
    grown.push(follower);
    let e = img
        .apply(
            next(&img),
            &change(grown, cur.leader_epoch, cur.partition_epoch, leader, &img),
        )
        .unwrap_err();
    assert!(matches!(e, Rejected::IneligibleReplica { .. }), "{e:?}");
    check_invariants(&img);
}

#[test]
fn controlled_shutdown_moves_leadership_and_fences() {
    let mut img = cluster(&[1, 2, 3]);
    create(&mut img, "t", 6, 3).unwrap();
    let led_by_1: Vec<usize> = (0..6).filter(|i| part(&img, "t", *i).leader == 1).collect();
    assert_eq!(led_by_1.len(), 2);
    let epoch = img.brokers[&1].epoch;
    img.apply(
        next(&img),
        &MetadataRecord::ShutdownBroker {
            broker_id: 1,
            broker_epoch: epoch,
        },
    )
    .unwrap();
    check_invariants(&img);
    assert!(img.brokers[&1].fenced && img.brokers[&1].shut_down);
    for i in 0..6 {
        let p = part(&img, "t", i);
        assert_ne!(p.leader, 1);
        assert!(!p.isr.contains(&1));
        assert!(p.leader != NO_LEADER);
    }
    // A clean restart: the new registration changes no partition.
    let before = img.topics.clone();
    img.apply(
        next(&img),
        &MetadataRecord::RegisterBroker {
            broker_id: 1,
            incarnation: 555,
            listener: "h:1".into(),
            clean_shutdown_epoch: Some(epoch),
            replication_listener: None,
            endpoints: vec![],
            rack: None,
            features: vec![],
        },
    )
    .unwrap();
    assert_eq!(img.topics, before);
    assert!(img.brokers[&1].fenced && !img.brokers[&1].shut_down);
    assert_eq!(img.brokers[&1].epoch, img.index as i64);
}

#[test]
fn an_unclean_restart_leaves_every_isr_and_moves_leadership() {
    let mut img = cluster(&[1, 2, 3]);
    create(&mut img, "t", 6, 3).unwrap();
    // Broker 2 restarts (kill -9) before the controller noticed: it is still in every
    // ISR and leads two partitions.
    let outcome = img.apply(next(&img), &registration(2, 999, "h:2")).unwrap();
    assert_eq!(outcome, Applied::BrokerEpoch(img.index as i64));
    check_invariants(&img);
    for i in 0..6 {
        let p = part(&img, "t", i);
        assert!(!p.isr.contains(&2), "{p:?}");
        assert_ne!(p.leader, 2);
    }
    // The same registration proposed twice changes nothing the second time.
    let again = img.clone();
    img.apply(next(&img), &registration(2, 999, "h:2")).unwrap();
    assert_eq!(img.brokers, again.brokers);
    assert_eq!(img.topics, again.topics);
    // BrokerReady of the old epoch is stale; of the new one unfences it.
    let e = img
        .apply(
            next(&img),
            &MetadataRecord::BrokerReady {
                broker_id: 2,
                broker_epoch: 2,
            },
        )
        .unwrap_err();
    assert!(matches!(e, Rejected::StaleBroker { .. }), "{e:?}");
    ready(&mut img, 2);
    assert!(img.is_unfenced(2));
}

#[test]
fn delete_create_partitions_configs_and_producer_ids() {
    let mut img = cluster(&[1, 2, 3]);
    create(&mut img, "t", 2, 2).unwrap();
    img.apply(
        next(&img),
        &MetadataRecord::CreatePartitions {
            name: "t".into(),
            total: 5,
            assignment: None,
        },
    )
    .unwrap();
    assert_eq!(img.topics["t"].partitions.len(), 5);
    assert!(
        img.topics["t"]
            .partitions
            .iter()
            .all(|p| p.replicas.len() == 2)
    );
    let e = img
        .apply(
            next(&img),
            &MetadataRecord::CreatePartitions {
                name: "t".into(),
                total: 5,
                assignment: None,
            },
        )
        .unwrap_err();
    assert!(matches!(e, Rejected::InvalidPartitions { .. }));
    img.apply(
        next(&img),
        &MetadataRecord::AlterTopicConfig {
            name: "t".into(),
            configs: vec![("retention.ms".into(), "1000".into())],
        },
    )
    .unwrap();
    assert_eq!(img.topics["t"].config().get("retention.ms"), Some("1000"));
    let e = img
        .apply(
            next(&img),
            &MetadataRecord::AlterTopicConfig {
                name: "t".into(),
                configs: vec![("retention.ms".into(), "soon".into())],
            },
        )
        .unwrap_err();
    assert!(matches!(e, Rejected::InvalidConfig { .. }));
    let epoch = img.brokers[&1].epoch;
    let alloc = MetadataRecord::AllocateProducerIds {
        broker_id: 1,
        broker_epoch: epoch,
        count: 1000,
    };
    assert_eq!(
        img.apply(next(&img), &alloc).unwrap(),
        Applied::ProducerIds(0)
    );
    assert_eq!(
        img.apply(next(&img), &alloc).unwrap(),
        Applied::ProducerIds(1000)
    );
    // A wrong topic id does not delete a topic of the same name.
    let e = img
        .apply(
            next(&img),
            &MetadataRecord::DeleteTopic {
                name: "t".into(),
                topic_id: Some([0xee; 16]),
            },
        )
        .unwrap_err();
    assert!(matches!(e, Rejected::UnknownTopic(_)));
    img.apply(
        next(&img),
        &MetadataRecord::DeleteTopic {
            name: "t".into(),
            topic_id: None,
        },
    )
    .unwrap();
    assert!(img.topics.is_empty());
}

#[test]
fn local_changes_tell_a_node_its_roles() {
    let mut img = cluster(&[1, 2, 3]);
    let empty = img.clone();
    create(&mut img, "t", 3, 2).unwrap();
    let c = local_changes(1, &empty, &img);
    let hosted = img.topics["t"]
        .partitions
        .iter()
        .filter(|p| p.hosts(1))
        .count();
    assert_eq!(c.changed.len(), hosted);
    assert!(
        c.changed
            .iter()
            .any(|ch| matches!(ch.role, LocalRole::Leader { .. }))
    );
    let before = img.clone();
    fence(&mut img, 2);
    let c = local_changes(1, &before, &img);
    // Every partition of 1 that 2 was in changed (ISR or leader).
    assert!(!c.changed.is_empty());
    for ch in &c.changed {
        if let LocalRole::Leader { isr, .. } = &ch.role {
            assert!(!isr.contains(&2));
        }
    }
    let before = img.clone();
    img.apply(
        next(&img),
        &MetadataRecord::DeleteTopic {
            name: "t".into(),
            topic_id: None,
        },
    )
    .unwrap();
    let c = local_changes(1, &before, &img);
    assert_eq!(c.removed.len(), hosted);
    assert!(c.changed.is_empty());
}

#[test]
fn the_image_round_trips_and_bad_bytes_are_typed_errors() {
    let mut img = cluster(&[1, 2, 3]);
    img.apply(
        next(&img),
        &MetadataRecord::InitCluster {
            cluster_id: "abc".into(),
            features: vec![],
        },
    )
    .unwrap();
    create(&mut img, "t", 4, 3).unwrap();
    let bytes = img.encode();
    assert_eq!(MetadataImage::decode(&bytes, "snapshot").unwrap(), img);
    for cut in [0, 1, 5, bytes.len() / 2, bytes.len() - 1] {
        let e = MetadataImage::decode(&bytes[..cut], "snapshot").unwrap_err();
        assert!(e.is_corruption(), "{e}");
    }
}

/// A random record, over a small universe so that they interact.
fn any_record() -> impl Strategy<Value = MetadataRecord> {
    let broker = 0..4i32;
    let topic = prop::sample::select(vec!["a", "b", "c"]);
    prop_oneof![
        (
            broker.clone(),
            0..3u64,
            proptest::option::of(0..40i64),
            0..3i16
        )
            .prop_map(|(b, inc, clean, max)| {
                MetadataRecord::RegisterBroker {
                    broker_id: b,
                    incarnation: inc,
                    listener: format!("h:{b}"),
                    clean_shutdown_epoch: clean,
                    replication_listener: None,
                    endpoints: vec![],
                    rack: None,
                    // Up to this build's highest transaction.version.
                    features: crate::cluster::features::supported()
                        .into_iter()
                        .map(|f| crate::cluster::records::SupportedFeature { max, ..f })
                        .filter(|f| f.max > 0)
                        .collect(),
                }
            }),
        (
            broker.clone(),
            0..40i64,
            prop::collection::vec((topic.clone(), 0..4i32), 0..4)
        )
            .prop_map(|(b, e, ps)| MetadataRecord::ReplicasOffline {
                broker_id: b,
                broker_epoch: e,
                // The topic's name in the id's first byte, for `plausible`.
                partitions: ps
                    .into_iter()
                    .map(|(t, p)| ([t.as_bytes()[0]; 16], p))
                    .collect(),
            }),
        (0..3i16).prop_map(|level| MetadataRecord::FeatureLevel {
            name: crate::cluster::features::TRANSACTION_VERSION.into(),
            level,
        }),
        (broker.clone(), 0..40i64).prop_map(|(b, e)| MetadataRecord::BrokerReady {
            broker_id: b,
            broker_epoch: e
        }),
        (broker.clone(), 0..40i64).prop_map(|(b, e)| MetadataRecord::FenceBroker {
            broker_id: b,
            broker_epoch: e
        }),
        (broker.clone(), 0..40i64).prop_map(|(b, e)| MetadataRecord::ShutdownBroker {
            broker_id: b,
            broker_epoch: e
        }),
        (topic.clone(), 1..4i32, 1..4i16, any::<u8>()).prop_map(|(t, p, rf, id)| {
            MetadataRecord::CreateTopic(CreateTopic {
                name: t.into(),
                topic_id: [id; 16],
                partitions: p,
                replication_factor: rf,
                assignment: None,
                configs: vec![],
                internal: false,
            })
        }),
        topic.clone().prop_map(|t| MetadataRecord::DeleteTopic {
            name: t.into(),
            topic_id: None
        }),
        (topic.clone(), 1..6i32).prop_map(|(t, n)| MetadataRecord::CreatePartitions {
            name: t.into(),
            total: n,
            assignment: None
        }),
        prop::collection::vec((topic.clone(), 0..3i32), 0..4).prop_map(|ps| {
            MetadataRecord::ElectPreferredLeaders {
                partitions: ps
                    .into_iter()
                    .map(|(t, p)| PartitionRef {
                        topic: t.into(),
                        topic_id: [0; 16],
                        partition: p,
                    })
                    .collect(),
            }
        }),
        prop::collection::vec((topic.clone(), 0..3i32), 0..4).prop_map(|ps| {
            MetadataRecord::ElectUncleanLeaders {
                partitions: ps
                    .into_iter()
                    .map(|(t, p)| PartitionRef {
                        topic: t.into(),
                        topic_id: [0; 16],
                        partition: p,
                    })
                    .collect(),
            }
        }),
        (
            topic.clone(),
            0..3i32,
            proptest::option::of(prop::collection::vec(broker.clone(), 0..4))
        )
            .prop_map(
                |(t, p, target)| MetadataRecord::AlterPartitionReassignment {
                    partition: PartitionRef {
                        topic: t.into(),
                        topic_id: [0; 16],
                        partition: p,
                    },
                    target,
                }
            ),
        (
            topic,
            0..3i32,
            broker.clone(),
            0..40i64,
            0..5i32,
            0..8i32,
            prop::collection::vec(broker, 0..4)
        )
            .prop_map(|(t, p, b, be, le, pe, isr)| {
                MetadataRecord::AlterPartition(AlterPartition {
                    topic: t.into(),
                    topic_id: [0; 16],
                    partition: p,
                    broker_id: b,
                    broker_epoch: be,
                    leader_epoch: le,
                    partition_epoch: pe,
                    new_isr: isr,
                })
            }),
    ]
}

/// Turns a random AlterPartition into one that has a chance to pass: the current leader,
/// epochs and topic id, with the random ISR (plus the leader).
fn plausible(img: &MetadataImage, r: MetadataRecord) -> MetadataRecord {
    match r {
        MetadataRecord::AlterPartition(mut a) => {
            if let Some(t) = img.topics.get(&a.topic)
                && let Some(p) = t.partitions.get(a.partition as usize)
                && p.leader != NO_LEADER
                && a.broker_epoch % 3 != 0
            {
                a.topic_id = t.id;
                a.broker_id = p.leader;
                a.broker_epoch = img.brokers[&p.leader].epoch;
                a.leader_epoch = p.leader_epoch;
                a.partition_epoch = p.partition_epoch;
                a.new_isr.retain(|b| *b != p.leader);
                a.new_isr.sort_unstable();
                a.new_isr.dedup();
                a.new_isr.insert(0, p.leader);
            }
            MetadataRecord::AlterPartition(a)
        }
        MetadataRecord::ElectPreferredLeaders { mut partitions } => {
            for r in &mut partitions {
                if let Some(t) = img.topics.get(&r.topic) {
                    r.topic_id = t.id;
                }
            }
            MetadataRecord::ElectPreferredLeaders { partitions }
        }
        MetadataRecord::ElectUncleanLeaders { mut partitions } => {
            for r in &mut partitions {
                if let Some(t) = img.topics.get(&r.topic) {
                    r.topic_id = t.id;
                }
            }
            MetadataRecord::ElectUncleanLeaders { partitions }
        }
        MetadataRecord::AlterPartitionReassignment {
            mut partition,
            mut target,
        } => {
            if let Some(t) = img.topics.get(&partition.topic) {
                partition.topic_id = t.id;
            }
            // Distinct replicas, most of the time.
            if let Some(t) = &mut target
                && partition.partition != 2
            {
                let mut seen = std::collections::BTreeSet::new();
                t.retain(|b| seen.insert(*b));
            }
            MetadataRecord::AlterPartitionReassignment { partition, target }
        }
        MetadataRecord::ReplicasOffline {
            broker_id,
            broker_epoch,
            mut partitions,
        } => {
            for (id, _) in &mut partitions {
                let name = char::from(id[0]).to_string();
                if let Some(t) = img.topics.get(&name) {
                    *id = t.id;
                }
            }
            MetadataRecord::ReplicasOffline {
                broker_id,
                broker_epoch: match img.brokers.get(&broker_id) {
                    Some(b) if broker_epoch % 4 != 0 => b.epoch,
                    _ => broker_epoch,
                },
                partitions,
            }
        }
        MetadataRecord::BrokerReady {
            broker_id,
            broker_epoch,
        } if broker_epoch % 2 == 0 => MetadataRecord::BrokerReady {
            broker_id,
            broker_epoch: img
                .brokers
                .get(&broker_id)
                .map_or(broker_epoch, |b| b.epoch),
        },
        MetadataRecord::FenceBroker {
            broker_id,
            broker_epoch,
        } if broker_epoch % 2 == 0 => MetadataRecord::FenceBroker {
            broker_id,
            broker_epoch: img
                .brokers
                .get(&broker_id)
                .map_or(broker_epoch, |b| b.epoch),
        },
        MetadataRecord::ShutdownBroker {
            broker_id,
            broker_epoch,
        } if broker_epoch % 4 == 0 => MetadataRecord::ShutdownBroker {
            broker_id,
            broker_epoch: img
                .brokers
                .get(&broker_id)
                .map_or(broker_epoch, |b| b.epoch),
        },
        other => other,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn invariants_hold_and_every_node_reaches_the_same_image(records in prop::collection::vec(any_record(), 1..80)) {
        let mut img = MetadataImage::default();
        let mut log = Vec::new();
        for (i, r) in records.into_iter().enumerate() {
            let r = plausible(&img, r);
            let before = img.clone();
            let outcome = img.apply(i as u64 + 1, &r);
            if outcome.is_err() {
                // A rejection changes nothing but the index.
                prop_assert_eq!(&img.topics, &before.topics);
                prop_assert_eq!(&img.brokers, &before.brokers);
            }
            check_invariants(&img);
            // Epochs never go down.
            for (name, t) in &img.topics {
                if let Some(b) = before.topics.get(name).filter(|b| b.id == t.id) {
                    for (p, q) in b.partitions.iter().zip(&t.partitions) {
                        prop_assert!(q.leader_epoch >= p.leader_epoch);
                        prop_assert!(q.partition_epoch >= p.partition_epoch);
                        if q.leader != p.leader {
                            prop_assert!(q.leader_epoch > p.leader_epoch);
                        }
                        if q.leader != p.leader
                            || q.isr != p.isr
                            || q.replicas != p.replicas
                            || q.offline != p.offline
                        {
                            prop_assert!(q.partition_epoch > p.partition_epoch);
                        }
                    }
                }
            }
            log.push(r);
        }
        // Another node applying the same log (through the encoding, as replicated)
        // reaches the same image, which also survives a snapshot round trip.
        let mut other = MetadataImage::default();
        for (i, r) in log.iter().enumerate() {
            let env = crate::cluster::records::Envelope { proposer: 1, request_id: i as u64, stamp: None, record: r.clone() };
            let back = crate::cluster::records::Envelope::decode(&env.encode(), "entry").unwrap();
            let _ = other.apply(i as u64 + 1, &back.record);
        }
        prop_assert_eq!(&other, &img);
        prop_assert_eq!(MetadataImage::decode(&img.encode(), "snapshot").unwrap(), img);
    }
}

#[test]
fn every_sample_record_applies_or_rejects_without_panicking() {
    let mut img = cluster(&[1, 2, 3]);
    for r in samples() {
        let _ = img.apply(next(&img), &r);
        check_invariants(&img);
    }
}

/// A registration of broker `id` with listeners PLAINTEXT and EXTERNAL (none when
/// `endpoints` is false, as an older node registers).
fn register_with_endpoints(img: &mut MetadataImage, id: i32, endpoints: bool) {
    let endpoints = if endpoints {
        vec![
            Endpoint {
                name: "PLAINTEXT".into(),
                host: "10.0.0.1".into(),
                port: 9000 + id as u16,
                protocol: crate::security::SecurityProtocol::Plaintext,
            },
            Endpoint {
                name: "EXTERNAL".into(),
                host: format!("broker{id}.example"),
                port: 19000 + id as u16,
                protocol: crate::security::SecurityProtocol::Ssl,
            },
        ]
    } else {
        vec![]
    };
    img.apply(
        next(img),
        &MetadataRecord::RegisterBroker {
            broker_id: id,
            incarnation: 7,
            listener: format!("10.0.0.1:{}", 9000 + id),
            clean_shutdown_epoch: None,
            replication_listener: None,
            endpoints,
            rack: None,
            features: vec![],
        },
    )
    .unwrap();
}

#[test]
fn a_broker_is_found_at_the_endpoint_of_each_listener_name() {
    let mut img = MetadataImage::default();
    register_with_endpoints(&mut img, 1, true);
    register_with_endpoints(&mut img, 2, false);
    let b1 = &img.brokers[&1];
    assert_eq!(b1.endpoint("PLAINTEXT"), Some(("10.0.0.1".into(), 9001)));
    assert_eq!(
        b1.endpoint("EXTERNAL"),
        Some(("broker1.example".into(), 19001))
    );
    assert_eq!(b1.endpoint("INTERNAL"), None);
    // A registration without endpoints (RegisterBroker version 0 or 1): its one
    // listener, whatever the name.
    let b2 = &img.brokers[&2];
    assert_eq!(b2.endpoint("EXTERNAL"), Some(("10.0.0.1".into(), 9002)));
    // The snapshot keeps the endpoints.
    let back = MetadataImage::decode(&img.encode(), "snapshot").unwrap();
    assert_eq!(back.brokers, img.brokers);
}

#[test]
fn a_version_2_image_decodes_without_endpoints() {
    let mut img = MetadataImage::default();
    register_with_endpoints(&mut img, 1, false);
    let mut bytes = img.encode_v10();
    // Version 2 is version 10 (for an image without topics) without the endpoint count
    // and the rack after each broker and the proposers', directories', quotas', group
    // configs' and broker configs' counts at the end: version (2), index (8), no
    // cluster id (1), next producer id (8), broker count (4), then broker 1: id, epoch,
    // incarnation (20), listener "10.0.0.1:9001" (4 + 13), fenced, shut down, no
    // replication listener (3): the count is at 60.
    assert_eq!(&bytes[..2], &[0, 10]);
    let at = 2 + 8 + 1 + 8 + 4 + 20 + 17 + 3;
    assert_eq!(&bytes[at..at + 5], &[0, 0, 0, 0, 0]);
    bytes.drain(at..at + 5);
    assert_eq!(bytes.split_off(bytes.len() - 20), [0; 20]);
    bytes[1] = 2;
    assert_eq!(MetadataImage::decode(&bytes, "v2").unwrap(), img);
    bytes[1] = 200;
    assert!(
        MetadataImage::decode(&bytes, "v200")
            .unwrap_err()
            .is_corruption()
    );
}

#[test]
fn a_broker_keeps_its_rack_in_the_snapshot_and_a_version_7_image_has_none() {
    let mut img = MetadataImage::default();
    img.apply(
        1,
        &MetadataRecord::RegisterBroker {
            broker_id: 1,
            incarnation: 7,
            listener: "10.0.0.1:9001".into(),
            clean_shutdown_epoch: None,
            replication_listener: None,
            endpoints: vec![],
            rack: Some("rack-a".into()),
            features: vec![],
        },
    )
    .unwrap();
    assert_eq!(img.brokers[&1].rack.as_deref(), Some("rack-a"));
    assert_eq!(MetadataImage::decode(&img.encode(), "v11").unwrap(), img);
    let mut bytes = img.encode_v10();
    assert_eq!(MetadataImage::decode(&bytes, "v10").unwrap(), img);
    // Version 9 is version 10 without the broker configs' count (none) at the end.
    assert_eq!(bytes.split_off(bytes.len() - 4), [0; 4]);
    bytes[1] = 9;
    assert_eq!(MetadataImage::decode(&bytes, "v9").unwrap(), img);
    // Version 8 is version 9 without the group configs' count (none) at the end.
    assert_eq!(bytes.split_off(bytes.len() - 4), [0; 4]);
    bytes[1] = 8;
    assert_eq!(MetadataImage::decode(&bytes, "v8").unwrap(), img);
    // Version 7: the same without the rack (present flag and string) after the
    // endpoint count; the broker's fields end 2 + 8 + 1 + 8 + 4 + 20 + 17 + 3 + 4 in.
    let at = 2 + 8 + 1 + 8 + 4 + 20 + 17 + 3 + 4;
    assert_eq!(bytes[at], 1, "rack present");
    bytes.drain(at..at + 1 + 4 + "rack-a".len());
    bytes[1] = 7;
    let old = MetadataImage::decode(&bytes, "v7").unwrap();
    assert_eq!(old.brokers[&1].rack, None);
}

#[test]
fn group_configs_are_applied_all_or_none_kept_in_the_snapshot_and_absent_before_version_9() {
    let mut img = cluster(&[1, 2, 3]);
    let change = |changes: &[(&str, Option<&str>)]| MetadataRecord::AlterGroupConfig {
        group: "g".into(),
        changes: changes
            .iter()
            .map(|(k, v)| (k.to_string(), v.map(str::to_string)))
            .collect(),
    };
    img.apply(
        next(&img),
        &change(&[
            ("consumer.session.timeout.ms", Some("50000")),
            ("share.auto.offset.reset", Some("earliest")),
        ]),
    )
    .unwrap();
    // One bad value refuses the whole record (the bounds are the proposing node's
    // settings, checked before the record is proposed; the image checks the form).
    let before = img.group_configs.clone();
    let e = img
        .apply(
            next(&img),
            &change(&[
                ("share.auto.offset.reset", None),
                ("share.record.lock.duration.ms", Some("soon")),
            ]),
        )
        .unwrap_err();
    assert!(
        format!("{e:?}").contains("share.record.lock.duration.ms"),
        "{e:?}"
    );
    assert_eq!(img.group_configs, before);
    assert_eq!(
        img.group_configs["g"]["share.auto.offset.reset"],
        "earliest"
    );
    let bytes = img.encode();
    let back = MetadataImage::decode(&bytes, "snapshot").unwrap();
    assert_eq!(back, img);
    assert_eq!(
        back.group_configs["g"]["consumer.session.timeout.ms"],
        "50000"
    );
    // Removing every override forgets the group.
    img.apply(
        next(&img),
        &change(&[
            ("consumer.session.timeout.ms", None),
            ("share.auto.offset.reset", None),
        ]),
    )
    .unwrap();
    assert!(img.group_configs.is_empty());
    // A version 8 image (without them, nor version 10's broker configs) knows none.
    let mut bytes = img.encode_v10();
    assert_eq!(bytes.split_off(bytes.len() - 8), [0; 8]);
    bytes[1] = 8;
    assert!(
        MetadataImage::decode(&bytes, "v8")
            .unwrap()
            .group_configs
            .is_empty()
    );
}

#[test]
fn a_voter_is_known_by_its_first_directory_id() {
    let mut img = cluster(&[1, 2, 3]);
    let at = img.index + 1;
    let record = |id: &str| MetadataRecord::RegisterVoterDirectory {
        node_id: 2,
        directory_id: id.into(),
    };
    img.apply(at, &record("dir-a")).unwrap();
    // The same id again is a no-op; another one (an empty directory) is refused.
    img.apply(at + 1, &record("dir-a")).unwrap();
    let e = img.apply(at + 2, &record("dir-b")).unwrap_err();
    assert!(
        matches!(&e, Rejected::StaleBroker { broker: 2, reason } if reason.contains("dir-a") && reason.contains("lost")),
        "{e:?}"
    );
    assert_eq!(img.directories.get(&2).map(String::as_str), Some("dir-a"));
    // The snapshot keeps them; a version 4 image (without them) knows none.
    let back = MetadataImage::decode(&img.encode(), "snapshot").unwrap();
    assert_eq!(back, img);
    let mut bytes = img.encode_v10();
    // Version 7's client quotas, version 9's group configs and version 10's broker
    // configs (none) come last.
    assert_eq!(bytes.split_off(bytes.len() - 12), [0; 12]);
    let tail = 4 + 4 + 4 + "dir-a".len();
    assert_eq!(
        &bytes[bytes.len() - tail..bytes.len() - tail + 4],
        &[0, 0, 0, 1]
    );
    bytes.truncate(bytes.len() - tail);
    // Nor the brokers' racks (version 8): each of the three brokers (45 bytes from 23
    // on: id, epoch, incarnation, listener "127.0.0.1:900N", flags, endpoint count) ends
    // with an absent rack.
    for b in (0..3).rev() {
        let at = 23 + 45 * (b + 1) + b;
        assert_eq!(bytes[at], 0, "broker {b}'s absent rack");
        bytes.remove(at);
    }
    bytes[1] = 4;
    let v4 = MetadataImage::decode(&bytes, "v4").unwrap();
    assert!(v4.directories.is_empty());
    assert_eq!(v4.brokers, img.brokers);
}

#[test]
fn the_transaction_state_topic_is_internal_and_only_so() {
    let mut img = cluster(&[1, 2, 3]);
    let record = |internal: bool| {
        MetadataRecord::CreateTopic(CreateTopic {
            name: TRANSACTION_STATE_TOPIC.into(),
            topic_id: [7; 16],
            partitions: 50,
            replication_factor: 3,
            assignment: None,
            configs: vec![
                ("cleanup.policy".into(), "compact".into()),
                ("min.insync.replicas".into(), "2".into()),
            ],
            internal,
        })
    };
    // A client's CreateTopics of the name is refused; the cluster's own is made.
    assert!(matches!(
        img.apply(next(&img), &record(false)),
        Err(Rejected::InvalidTopicName { .. })
    ));
    img.apply(next(&img), &record(true)).unwrap();
    let t = img.topic(TRANSACTION_STATE_TOPIC).unwrap();
    assert!(t.internal);
    assert_eq!(t.partitions.len(), 50);
    assert!(t.partitions.iter().all(|p| p.replicas.len() == 3));
    // And the internal flag is no way to make another topic internal.
    let mut other = record(true);
    if let MetadataRecord::CreateTopic(c) = &mut other {
        c.name = "mine".into();
    }
    assert!(matches!(
        img.apply(next(&img), &other),
        Err(Rejected::InvalidTopicName { .. })
    ));
    check_invariants(&img);
}

/// An envelope of `record` from process `incarnation` of node 1.
fn stamped(
    request_id: u64,
    incarnation: u64,
    issued: u64,
    expires: u64,
    record: MetadataRecord,
) -> Envelope {
    Envelope {
        proposer: 1,
        request_id,
        stamp: Some(Stamp {
            incarnation,
            issued_ms: issued,
            expires_ms: expires,
        }),
        record,
    }
}

fn acl(name: &str) -> AclBinding {
    use crate::security::acl::{AclOperation, AclPermission, PatternType, ResourceType};
    AclBinding {
        resource_type: ResourceType::Topic,
        resource_name: name.into(),
        pattern_type: PatternType::Literal,
        principal: "User:alice".into(),
        host: "*".into(),
        operation: AclOperation::Read,
        permission: AclPermission::Allow,
    }
}

#[test]
fn a_proposal_is_applied_at_most_once_and_an_expired_one_never() {
    let mut img = cluster(&[1, 2, 3]);
    let create = stamped(
        7,
        42,
        1_000,
        31_000,
        MetadataRecord::CreateAcls {
            bindings: vec![acl("a")],
        },
    );
    let delete = stamped(
        8,
        42,
        2_000,
        32_000,
        MetadataRecord::DeleteAcls {
            filters: vec![AclFilter::any()],
        },
    );
    img.apply_envelope(next(&img), &create).unwrap();
    img.apply_envelope(next(&img), &delete).unwrap();
    let index = next(&img);
    assert_eq!(
        img.apply_envelope(index, &create),
        Err(Rejected::Duplicate {
            proposer: 1,
            request_id: 7
        })
    );
    assert_eq!(img.index, index, "a refused copy still moves the index");
    assert!(img.acls.is_empty(), "the deleted ACL came back");
    // The same request id from another process of node 1 is another proposal.
    img.apply_envelope(
        next(&img),
        &stamped(
            7,
            43,
            0,
            30_000,
            MetadataRecord::CreateAcls {
                bindings: vec![acl("b")],
            },
        ),
    )
    .unwrap();
    assert_eq!(img.acls.len(), 1);
    // Process 42 issues a proposal past the first two's expiry: their ids are
    // forgotten, and a copy of them is refused as expired, never applied again.
    img.apply_envelope(
        next(&img),
        &stamped(
            9,
            42,
            40_000,
            70_000,
            MetadataRecord::CreateAcls {
                bindings: vec![acl("c")],
            },
        ),
    )
    .unwrap();
    assert_eq!(
        img.proposals[&(1, 42)]
            .applied
            .keys()
            .copied()
            .collect::<Vec<_>>(),
        vec![9]
    );
    assert_eq!(
        img.apply_envelope(next(&img), &create),
        Err(Rejected::Expired {
            proposer: 1,
            request_id: 7
        })
    );
    assert!(!img.acls.contains(&acl("a")));
    // The snapshot keeps what was applied.
    let back = MetadataImage::decode(&img.encode(), "snapshot").unwrap();
    assert_eq!(back, img);
    // Only the newest processes of a node are remembered.
    for inc in 100..100 + once::MAX_INCARNATIONS as u64 {
        img.apply_envelope(
            next(&img),
            &stamped(
                1,
                inc,
                0,
                10,
                MetadataRecord::CreateAcls {
                    bindings: vec![acl("d")],
                },
            ),
        )
        .unwrap();
    }
    let kept: Vec<u64> = img.proposals.keys().map(|(_, inc)| *inc).collect();
    assert_eq!(kept.len(), once::MAX_INCARNATIONS);
    assert!(!kept.contains(&42) && !kept.contains(&43), "{kept:?}");
}
