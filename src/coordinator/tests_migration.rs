//! Online migration between the classic and the consumer group protocols (KIP-848's
//! upgrade and downgrade) through the coordinator's methods, as the network handlers
//! call them.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::protocol::{Assignment, Subscription};
use super::*;
use crate::config::ConsumerGroupMigrationPolicy;

fn topics() -> TopicsImage {
    BTreeMap::from([("t".to_string(), 4)])
}

fn coordinator(policy: ConsumerGroupMigrationPolicy) -> GroupCoordinator {
    GroupCoordinator::new(CoordinatorConfig {
        min_session_timeout: Duration::from_millis(1),
        initial_rebalance_delay: Duration::ZERO,
        consumer_migration_policy: policy,
        ..CoordinatorConfig::default()
    })
}

/// A classic JoinGroup of `member` subscribing to "t", owning `owned`.
fn classic_join(member: &str, owned: &[i32]) -> JoinGroupRequest {
    let owned_partitions = if owned.is_empty() {
        vec![]
    } else {
        vec![("t".to_string(), owned.to_vec())]
    };
    let sub = Subscription {
        topics: vec!["t".into()],
        user_data: None,
        owned_partitions,
    };
    JoinGroupRequest {
        group_id: "g".into(),
        member_id: member.into(),
        protocol_type: "consumer".into(),
        protocols: vec![("range".into(), sub.encode())],
        session_timeout: Duration::from_secs(30),
        rebalance_timeout: Duration::from_secs(30),
        ..Default::default()
    }
}

fn sync(member: &str, generation: i32, assignments: Vec<(String, Vec<u8>)>) -> SyncGroupRequest {
    SyncGroupRequest {
        group_id: "g".into(),
        generation_id: generation,
        member_id: member.into(),
        protocol_type: Some("consumer".into()),
        protocol_name: Some("range".into()),
        assignments,
        ..Default::default()
    }
}

fn partitions(assignment: &[u8]) -> Vec<i32> {
    Assignment::decode(assignment)
        .unwrap()
        .partitions
        .into_iter()
        .flat_map(|(_, ps)| ps)
        .collect()
}

fn beat(member: &str, epoch: i32) -> ConsumerHeartbeatRequest {
    ConsumerHeartbeatRequest {
        group_id: "g".into(),
        member_id: member.into(),
        member_epoch: epoch,
        rebalance_timeout_ms: 30_000,
        subscribed_topic_names: Some(vec!["t".into()]),
        ..Default::default()
    }
}

/// Every member's current partitions, checked to be disjoint.
fn owners(c: &GroupCoordinator) -> BTreeMap<String, Vec<i32>> {
    let d = c.consumer_group_describe("g").unwrap();
    let mut seen = BTreeSet::new();
    let mut out = BTreeMap::new();
    for m in d.members {
        let ps: Vec<i32> = m.assignment.into_iter().flat_map(|(_, ps)| ps).collect();
        for p in &ps {
            assert!(seen.insert(*p), "partition {p} owned twice");
        }
        out.insert(m.member_id, ps);
    }
    out
}

/// A classic group "g" with one member owning all four partitions; its member id and
/// generation.
fn classic_group(c: &GroupCoordinator) -> (String, i32) {
    let r = c
        .join_group(classic_join("", &[]), Duration::from_secs(5))
        .unwrap();
    let all = Assignment {
        partitions: vec![("t".into(), vec![0, 1, 2, 3])],
        user_data: None,
    };
    let s = c
        .sync_group(
            sync(
                &r.member_id,
                r.generation_id,
                vec![(r.member_id.clone(), all.encode())],
            ),
            Duration::from_secs(5),
        )
        .unwrap();
    assert_eq!(partitions(&s.assignment), vec![0, 1, 2, 3]);
    (r.member_id, r.generation_id)
}

/// The classic member `a` of generation `generation` is told to rejoin
/// (REBALANCE_IN_PROGRESS on its heartbeat) and rejoins owning `owned`.
fn rejoin(c: &GroupCoordinator, a: &str, generation: i32, owned: &[i32]) -> JoinGroupResponse {
    assert!(matches!(
        c.heartbeat("g", generation, a, None),
        Err(GroupError::RebalanceInProgress)
    ));
    c.join_group(classic_join(a, owned), Duration::from_secs(5))
        .unwrap()
}

/// The partitions a follower's SyncGroup of `generation` gives `member`.
fn synced(c: &GroupCoordinator, member: &str, generation: i32) -> Vec<i32> {
    let s = c
        .sync_group(sync(member, generation, vec![]), Duration::from_secs(5))
        .unwrap();
    partitions(&s.assignment)
}

/// A heartbeat of the static member with instance id "s".
fn static_beat(member: &str, epoch: i32) -> ConsumerHeartbeatRequest {
    ConsumerHeartbeatRequest {
        instance_id: Some("s".into()),
        ..beat(member, epoch)
    }
}

#[test]
fn a_consumer_member_upgrades_a_classic_group_and_the_last_one_leaving_downgrades_it() {
    let c = coordinator(ConsumerGroupMigrationPolicy::Bidirectional);
    let (a, generation) = classic_group(&c);

    // The consumer-protocol member joins: the group converts, the classic member keeps
    // its partitions and its generation as its epoch.
    let r = c.consumer_group_heartbeat(beat("", 0), &topics()).unwrap();
    let b = r.member_id.clone();
    assert_eq!(c.group_type("g"), Some(GroupType::Consumer));
    assert_eq!(r.member_epoch, generation + 1);
    assert_eq!(
        r.assignment,
        Some(vec![]),
        "A has not released anything yet"
    );
    assert_eq!(owners(&c)[&a], vec![0, 1, 2, 3]);
    // ConsumerGroupDescribe tells the members' protocols apart (KIP-1099's member type).
    let kinds: BTreeMap<String, bool> = c
        .consumer_group_describe("g")
        .unwrap()
        .members
        .into_iter()
        .map(|m| (m.member_id, m.classic))
        .collect();
    assert_eq!(
        kinds,
        BTreeMap::from([(a.clone(), true), (b.clone(), false)])
    );

    // The classic member is told to rejoin; its JoinGroup (owning everything) gives it
    // its share to keep, at its old epoch, with no leader (the server assigns).
    let j = rejoin(&c, &a, generation, &[0, 1, 2, 3]);
    assert_eq!((j.generation_id, j.leader.as_str()), (generation, ""));
    assert!(j.members.is_empty());
    let kept = synced(&c, &a, generation);
    assert_eq!(kept.len(), 2);
    assert!(matches!(
        c.heartbeat("g", generation, &a, None),
        Err(GroupError::RebalanceInProgress)
    ));
    // It rejoins owning only what it kept: the revocation is acknowledged.
    let j = c
        .join_group(classic_join(&a, &kept), Duration::from_secs(5))
        .unwrap();
    assert_eq!(j.generation_id, generation + 1);
    assert_eq!(synced(&c, &a, j.generation_id), kept);
    c.heartbeat("g", j.generation_id, &a, None).unwrap();
    // The consumer-protocol member gets the released partitions.
    let r = c
        .consumer_group_heartbeat(beat(&b, r.member_epoch), &topics())
        .unwrap();
    let got: Vec<i32> = r
        .assignment
        .unwrap()
        .into_iter()
        .flat_map(|(_, ps)| ps)
        .collect();
    assert_eq!(got.len(), 2);
    let owned = owners(&c);
    assert_eq!(owned[&a], kept);
    assert_eq!(owned[&b], got);
    assert_eq!(
        c.consumer_group_describe("g").unwrap().state.as_str(),
        "Stable"
    );

    // The classic member commits with its epoch as generation.
    let commit = |generation| OffsetCommitRequest {
        group_id: "g".into(),
        generation_id: generation,
        member_id: a.clone(),
        group_instance_id: None,
        offsets: vec![CommitOffset {
            topic: "t".into(),
            partition: kept[0],
            offset: 5,
            leader_epoch: -1,
            metadata: None,
            commit_timestamp: None,
        }],
    };
    let results = c.offset_commit(commit(j.generation_id)).unwrap();
    assert!(results[0].result.is_ok(), "{:?}", results[0].result);
    assert!(matches!(
        c.offset_commit(commit(generation)),
        Err(GroupError::IllegalGeneration { .. })
    ));

    // The consumer-protocol member leaves: only a classic member is left, the group is
    // classic again and rebalances; its offsets stay.
    c.consumer_group_heartbeat(beat(&b, -1), &topics()).unwrap();
    assert_eq!(c.group_type("g"), Some(GroupType::Classic));
    let j2 = rejoin(&c, &a, j.generation_id, &kept);
    assert_eq!(j2.leader, a);
    assert!(j2.generation_id > j.generation_id);
    let fetched = c.offset_fetch("g", None).unwrap();
    assert!(
        fetched
            .iter()
            .any(|f| f.partition == kept[0] && f.offset == 5)
    );
}

#[test]
fn the_migration_policy_decides_which_conversions_happen() {
    // Disabled: a classic group with members refuses the consumer protocol.
    let c = coordinator(ConsumerGroupMigrationPolicy::Disabled);
    classic_group(&c);
    assert!(matches!(
        c.consumer_group_heartbeat(beat("", 0), &topics()),
        Err(GroupError::GroupIdNotFound)
    ));
    assert_eq!(c.group_type("g"), Some(GroupType::Classic));

    // Downgrade only: the same.
    let c = coordinator(ConsumerGroupMigrationPolicy::Downgrade);
    classic_group(&c);
    assert!(matches!(
        c.consumer_group_heartbeat(beat("", 0), &topics()),
        Err(GroupError::GroupIdNotFound)
    ));

    // Upgrade only: the group converts, and stays a consumer group serving its
    // classic member when the consumer-protocol member leaves.
    let c = coordinator(ConsumerGroupMigrationPolicy::Upgrade);
    let (a, generation) = classic_group(&c);
    let r = c.consumer_group_heartbeat(beat("", 0), &topics()).unwrap();
    c.consumer_group_heartbeat(beat(&r.member_id, -1), &topics())
        .unwrap();
    assert_eq!(c.group_type("g"), Some(GroupType::Consumer));
    let j = rejoin(&c, &a, generation, &[0, 1, 2, 3]);
    assert_eq!(synced(&c, &a, j.generation_id), vec![0, 1, 2, 3]);
    c.heartbeat("g", j.generation_id, &a, None).unwrap();
}

#[test]
fn a_classic_member_joins_a_consumer_group_if_its_protocol_fits() {
    let c = coordinator(ConsumerGroupMigrationPolicy::Bidirectional);
    let r = c.consumer_group_heartbeat(beat("", 0), &topics()).unwrap();
    assert_eq!(r.assignment.as_ref().map(|a| a[0].1.len()), Some(4));

    let mut other = classic_join("", &[]);
    other.protocol_type = "connect".into();
    assert!(matches!(
        c.join_group(other, Duration::from_secs(1)),
        Err(GroupError::InconsistentGroupProtocol(_))
    ));
    // A JoinGroup v4+ without a member id is given one first.
    let mut first = classic_join("", &[]);
    first.require_known_member_id = true;
    let Err(GroupError::MemberIdRequired { member_id }) =
        c.join_group(first, Duration::from_secs(1))
    else {
        panic!("expected MEMBER_ID_REQUIRED");
    };
    let j = c
        .join_group(classic_join(&member_id, &[]), Duration::from_secs(1))
        .unwrap();
    assert_eq!(j.member_id, member_id);
    // Nothing is free yet: the consumer-protocol member owns everything.
    let s = c
        .sync_group(
            sync(&member_id, j.generation_id, vec![]),
            Duration::from_secs(1),
        )
        .unwrap();
    assert!(partitions(&s.assignment).is_empty());
    assert!(matches!(
        c.sync_group(
            sync(&member_id, j.generation_id + 5, vec![]),
            Duration::from_secs(1)
        ),
        Err(GroupError::IllegalGeneration { .. })
    ));
    // The consumer-protocol member revokes its half.
    let r = c
        .consumer_group_heartbeat(beat(&r.member_id, r.member_epoch), &topics())
        .unwrap();
    let kept = r.assignment.clone().unwrap();
    assert_eq!(kept[0].1.len(), 2);
    let mut ack = beat(&r.member_id, r.member_epoch);
    ack.owned_partitions = Some(kept);
    c.consumer_group_heartbeat(ack, &topics()).unwrap();
    // The classic member is told to rejoin, and gets the released half.
    assert!(matches!(
        c.heartbeat("g", j.generation_id, &member_id, None),
        Err(GroupError::RebalanceInProgress)
    ));
    let j = c
        .join_group(classic_join(&member_id, &[]), Duration::from_secs(1))
        .unwrap();
    let s = c
        .sync_group(
            sync(&member_id, j.generation_id, vec![]),
            Duration::from_secs(1),
        )
        .unwrap();
    assert_eq!(partitions(&s.assignment).len(), 2);
    owners(&c);
    // It leaves with LeaveGroup.
    let left = c
        .leave_group(
            "g",
            &[LeavingMember {
                member_id: member_id.clone(),
                group_instance_id: None,
            }],
        )
        .unwrap();
    assert!(left[0].is_ok());
    assert_eq!(c.consumer_group_describe("g").unwrap().members.len(), 1);
}

#[test]
fn the_last_consumer_protocol_member_expiring_downgrades_the_group() {
    let c = coordinator(ConsumerGroupMigrationPolicy::Bidirectional);
    let (a, generation) = classic_group(&c);
    let r = c.consumer_group_heartbeat(beat("", 0), &topics()).unwrap();
    assert_eq!(c.group_type("g"), Some(GroupType::Consumer));
    c.expire_consumer_member("g", &r.member_id);
    assert_eq!(c.group_type("g"), Some(GroupType::Classic));
    // The classic member kept its generation and is told to rejoin; it leads the new
    // generation alone.
    let j = rejoin(&c, &a, generation, &[0, 1, 2, 3]);
    assert_eq!((j.leader.as_str(), j.members.len()), (a.as_str(), 1));
    assert_eq!(j.generation_id, generation + 1);
}

#[test]
fn a_static_consumer_member_leaving_for_a_while_does_not_downgrade_the_group() {
    // Kafka's `validateOnlineDowngrade*`: a static member that leaves with epoch -2
    // stays a consumer-protocol member, so the group stays a consumer group; only its
    // removal (here its session timing out) or its replacement by a classic member with
    // the same instance id downgrades the group.
    let c = coordinator(ConsumerGroupMigrationPolicy::Bidirectional);
    let (a, _) = classic_group(&c);
    let join = static_beat("", 0);
    let s = c.consumer_group_heartbeat(join.clone(), &topics()).unwrap();
    assert_eq!(c.group_type("g"), Some(GroupType::Consumer));

    let left = c
        .consumer_group_heartbeat(static_beat(&s.member_id, -2), &topics())
        .unwrap();
    assert_eq!(left.member_epoch, -2);
    assert_eq!(c.group_type("g"), Some(GroupType::Consumer));
    // The classic member goes on in the consumer group.
    let j = c
        .join_group(classic_join(&a, &[0, 1, 2, 3]), Duration::from_secs(5))
        .unwrap();
    assert_eq!(j.protocol_type.as_deref(), Some("consumer"));
    assert_eq!(c.group_type("g"), Some(GroupType::Consumer));
    assert_eq!(c.consumer_group_describe("g").unwrap().members.len(), 2);

    // It comes back with the consumer protocol (taking over its entry under a new
    // member id): no downgrade.
    let back = c.consumer_group_heartbeat(join.clone(), &topics()).unwrap();
    assert_eq!(c.group_type("g"), Some(GroupType::Consumer));
    let ids: Vec<String> = c
        .consumer_group_describe("g")
        .unwrap()
        .members
        .into_iter()
        .map(|m| m.member_id)
        .collect();
    assert_eq!(ids.len(), 2);
    assert!(ids.contains(&back.member_id) && ids.contains(&a));

    // It leaves for a while again and comes back as a classic member with its instance
    // id: every member is classic now, the group is classic again.
    c.consumer_group_heartbeat(static_beat(&back.member_id, -2), &topics())
        .unwrap();
    let mut classic = classic_join("", &[]);
    classic.group_instance_id = Some("s".into());
    c.join_group(classic, Duration::from_secs(5)).unwrap();
    assert_eq!(c.group_type("g"), Some(GroupType::Classic));
}

#[test]
fn a_static_consumer_member_whose_session_ends_after_its_leave_downgrades_the_group() {
    let c = coordinator(ConsumerGroupMigrationPolicy::Bidirectional);
    classic_group(&c);
    let join = static_beat("", 0);
    let s = c.consumer_group_heartbeat(join, &topics()).unwrap();
    c.consumer_group_heartbeat(static_beat(&s.member_id, -2), &topics())
        .unwrap();
    assert_eq!(c.group_type("g"), Some(GroupType::Consumer));
    c.expire_consumer_member("g", &s.member_id);
    assert_eq!(c.group_type("g"), Some(GroupType::Classic));
}

#[test]
fn a_classic_group_upgraded_mid_rebalance_keeps_its_last_stable_assignment() {
    // Mid-rebalance, a classic member still holds (and may still read) what the last
    // Stable generation gave it: the converted group must not hand any of it to
    // another member before it is released.
    for rejoined in [false, true] {
        let c = coordinator(ConsumerGroupMigrationPolicy::Bidirectional);
        let (a, _) = classic_group(&c);
        // Another classic member joins: the group prepares a rebalance.
        let joining = c.begin_join(classic_join("", &[])).unwrap();
        assert!(matches!(joining, JoinStart::Pending(_)));
        if rejoined {
            // A rejoins too: the round completes and the group waits for the leader's
            // assignment (CompletingRebalance).
            let j = c.join_group(classic_join(&a, &[0, 1, 2, 3]), Duration::from_secs(5));
            assert!(j.is_ok(), "{j:?}");
        }
        let r = c.consumer_group_heartbeat(beat("", 0), &topics()).unwrap();
        assert_eq!(c.group_type("g"), Some(GroupType::Consumer));
        assert_eq!(
            r.assignment,
            Some(vec![]),
            "nothing is free before A releases it (rejoined: {rejoined})"
        );
        assert_eq!(owners(&c)[&a], vec![0, 1, 2, 3], "rejoined: {rejoined}");
    }
}

#[test]
fn a_classic_members_assignment_has_its_subscriptions_version() {
    // Kafka answers a classic member of a consumer group with its assignment encoded
    // at the version of its subscription (the highest it knows capped at 3).
    let c = coordinator(ConsumerGroupMigrationPolicy::Bidirectional);
    c.consumer_group_heartbeat(beat("", 0), &topics()).unwrap();
    for (version, expected) in [(0i16, 0i16), (1, 1), (3, 3), (7, 3)] {
        let mut join = classic_join("", &[]);
        let mut meta = join.protocols[0].1.clone();
        meta[..2].copy_from_slice(&version.to_be_bytes());
        if version >= 1 {
            meta.extend_from_slice(&0i32.to_be_bytes()); // no owned partitions
        }
        if version >= 3 {
            meta.extend_from_slice(&(-1i32).to_be_bytes()); // generation id
            meta.extend_from_slice(&(-1i16).to_be_bytes()); // no rack id
        }
        join.protocols[0].1 = meta;
        let j = c.join_group(join, Duration::from_secs(1)).unwrap();
        let s = c
            .sync_group(
                sync(&j.member_id, j.generation_id, vec![]),
                Duration::from_secs(1),
            )
            .unwrap();
        assert_eq!(
            i16::from_be_bytes([s.assignment[0], s.assignment[1]]),
            expected,
            "subscription version {version}"
        );
        Assignment::decode(&s.assignment).unwrap();
    }
}
