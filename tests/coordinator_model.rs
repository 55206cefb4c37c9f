//! Property test: random joins, leaves, deaths, heartbeats and commits drive the group
//! coordinator, and after every step it agrees with a small model (members, generation,
//! leader, assignments, committed offsets).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use proptest::prelude::*;
use tidelog::{
    Assignment, Assignor, CommitOffset, CoordinatorConfig, GroupCoordinator, GroupState,
    JoinGroupRequest, JoinStart, LeavingMember, OffsetCommitRequest, RangeAssignor, Subscription,
    SyncGroupRequest, group_codes as codes,
};

const SLOTS: usize = 4;
const PARTITIONS: i32 = 6;
const GROUP: &str = "model";

#[derive(Debug, Clone)]
enum Op {
    Join(usize),
    Leave(usize),
    Die(usize),
    Heartbeat(usize),
    Commit(usize, i32, i64),
    StaleCommit(usize, i32, i64),
}

fn op() -> impl Strategy<Value = Op> {
    let slot = 0..SLOTS;
    prop_oneof![
        3 => slot.clone().prop_map(Op::Join),
        1 => slot.clone().prop_map(Op::Leave),
        1 => slot.clone().prop_map(Op::Die),
        1 => slot.clone().prop_map(Op::Heartbeat),
        2 => (slot.clone(), 0..PARTITIONS, 0i64..1000).prop_map(|(s, p, o)| Op::Commit(s, p, o)),
        1 => (slot, 0..PARTITIONS, 0i64..1000).prop_map(|(s, p, o)| Op::StaleCommit(s, p, o)),
    ]
}

/// What the coordinator should hold.
#[derive(Default)]
struct Model {
    /// slot -> member id
    members: BTreeMap<usize, String>,
    generation: i32,
    offsets: BTreeMap<i32, i64>,
}

fn join_request(member_id: &str) -> JoinGroupRequest {
    JoinGroupRequest {
        group_id: GROUP.into(),
        member_id: member_id.into(),
        protocol_type: "consumer".into(),
        protocols: vec![(
            "range".into(),
            Subscription {
                topics: vec!["t".into()],
                ..Default::default()
            }
            .encode(),
        )],
        session_timeout: Duration::from_secs(60),
        rebalance_timeout: Duration::from_secs(60),
        ..Default::default()
    }
}

/// Every member (re)joins, the leader assigns with the range assignor, all sync; checks
/// the result against the model. `new_slot` joins with an empty member id.
fn settle(c: &GroupCoordinator, m: &mut Model, new_slot: Option<usize>) {
    let mut tickets = Vec::new();
    if let Some(slot) = new_slot {
        match c.begin_join(join_request("")) {
            JoinStart::Pending(t) => tickets.push((slot, t)),
            JoinStart::Done(r) => panic!("new member refused: {r:?}"),
        }
    }
    for (&slot, id) in &m.members {
        match c.begin_join(join_request(id)) {
            JoinStart::Pending(t) => tickets.push((slot, t)),
            JoinStart::Done(r) => panic!("member {id} refused: {r:?}"),
        }
    }
    if tickets.is_empty() {
        return;
    }
    m.generation += 1;
    let mut responses = Vec::new();
    for (slot, t) in &tickets {
        let r = c
            .await_join(t, Duration::from_secs(5))
            .expect("rebalance completes once everyone rejoined");
        assert_eq!(r.error_code, codes::NONE, "{r:?}");
        assert_eq!(r.generation_id, m.generation);
        m.members.insert(*slot, r.member_id.clone());
        responses.push(r);
    }
    let leaders: BTreeSet<&str> = responses.iter().map(|r| r.leader.as_str()).collect();
    assert_eq!(leaders.len(), 1, "members disagree on the leader");
    let leader = responses
        .iter()
        .find(|r| r.member_id == r.leader)
        .expect("the leader is a member");
    assert_eq!(leader.members.len(), m.members.len());
    // The leader computes the assignment client-side.
    let subs: BTreeMap<String, Subscription> = leader
        .members
        .iter()
        .map(|mm| {
            (
                mm.member_id.clone(),
                Subscription::decode(&mm.metadata).expect("subscription"),
            )
        })
        .collect();
    let counts = BTreeMap::from([("t".to_string(), PARTITIONS)]);
    let plan = RangeAssignor.assign(&counts, &subs);
    let assignments: Vec<(String, Vec<u8>)> = plan
        .iter()
        .map(|(id, tps)| {
            (
                id.clone(),
                Assignment {
                    partitions: tps.clone(),
                    user_data: None,
                }
                .encode(),
            )
        })
        .collect();
    let sync = |id: &str, assignments: Vec<(String, Vec<u8>)>| {
        c.sync_group(
            SyncGroupRequest {
                group_id: GROUP.into(),
                generation_id: m.generation,
                member_id: id.into(),
                assignments,
                ..Default::default()
            },
            Duration::from_secs(5),
        )
    };
    let mut owned = BTreeSet::new();
    let r = sync(&leader.member_id, assignments);
    assert_eq!(r.error_code, codes::NONE);
    for id in m.members.values() {
        let r = if *id == leader.member_id {
            r.clone()
        } else {
            sync(id, Vec::new())
        };
        assert_eq!(r.error_code, codes::NONE);
        let a = Assignment::decode(&r.assignment).expect("assignment");
        for (_, ps) in a.partitions {
            for p in ps {
                assert!(owned.insert(p), "partition {p} given twice");
            }
        }
    }
    assert_eq!(
        owned.len() as i32,
        PARTITIONS,
        "every partition has an owner"
    );
}

fn check(c: &GroupCoordinator, m: &Model) {
    let d = c.describe_group(GROUP);
    let ids: BTreeSet<String> = d.members.iter().map(|x| x.member_id.clone()).collect();
    let want: BTreeSet<String> = m.members.values().cloned().collect();
    assert_eq!(ids, want);
    if m.members.is_empty() {
        assert!(
            matches!(d.state, GroupState::Empty | GroupState::Dead),
            "{:?}",
            d.state
        );
    } else {
        assert_eq!(d.state, GroupState::Stable);
        assert_eq!(d.generation_id, m.generation);
        assert!(want.contains(&d.leader));
    }
    let fetched = c.offset_fetch(GROUP, None);
    let got: BTreeMap<i32, i64> = fetched
        .offsets
        .iter()
        .map(|o| (o.partition, o.offset))
        .collect();
    assert_eq!(got, m.offsets);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn coordinator_agrees_with_model(ops in proptest::collection::vec(op(), 1..40)) {
        let c = GroupCoordinator::new(CoordinatorConfig {
            min_session_timeout: Duration::from_millis(1),
            ..CoordinatorConfig::default()
        });
        let mut m = Model::default();
        for op in ops {
            match op {
                Op::Join(s) => {
                    if !m.members.contains_key(&s) {
                        settle(&c, &mut m, Some(s));
                    }
                }
                Op::Leave(s) | Op::Die(s) => {
                    if let Some(id) = m.members.remove(&s) {
                        if matches!(op, Op::Leave(_)) {
                            let r = c.leave_group(GROUP, &[LeavingMember { member_id: id, group_instance_id: None }]);
                            prop_assert_eq!(r.error_code, codes::NONE);
                        } else {
                            c.expire_member(GROUP, &id);
                        }
                        if m.members.is_empty() {
                            m.generation += 1;
                        } else {
                            settle(&c, &mut m, None);
                        }
                    }
                }
                Op::Heartbeat(s) => {
                    let (id, want) = match m.members.get(&s) {
                        Some(id) => (id.clone(), codes::NONE),
                        None => (format!("ghost-{s}"), codes::UNKNOWN_MEMBER_ID),
                    };
                    prop_assert_eq!(c.heartbeat(GROUP, m.generation, &id, None), want);
                }
                Op::Commit(s, p, o) | Op::StaleCommit(s, p, o) => {
                    let stale = matches!(op, Op::StaleCommit(..));
                    let (id, generation) = match m.members.get(&s) {
                        Some(id) => (id.clone(), if stale { m.generation - 1 } else { m.generation }),
                        None => (format!("ghost-{s}"), m.generation),
                    };
                    let r = c.offset_commit(OffsetCommitRequest {
                        group_id: GROUP.into(),
                        generation_id: generation,
                        member_id: id,
                        group_instance_id: None,
                        offsets: vec![CommitOffset { topic: "t".into(), partition: p, offset: o, leader_epoch: -1, metadata: None }],
                    });
                    let want = if !m.members.contains_key(&s) {
                        codes::UNKNOWN_MEMBER_ID
                    } else if stale {
                        codes::ILLEGAL_GENERATION
                    } else {
                        codes::NONE
                    };
                    prop_assert_eq!(r[0].error_code, want);
                    if want == codes::NONE {
                        m.offsets.insert(p, o);
                    }
                }
            }
            check(&c, &m);
        }
    }
}
