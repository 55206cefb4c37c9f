//! Model test of the consumer-protocol group state machine ([`ConsumerGroup`], KIP-848),
//! driven directly: no threads, no sleeps, an explicit clock. Four clients (two static,
//! with `instance_id`; subscriptions by name and by regular expression) join, heartbeat
//! with the partitions they own, leave (static ones temporarily, with epoch -2), go
//! silent while time passes (sessions and revocations expire), while a topic gains
//! partitions. A client applies each assignment it receives at once (revoking what it no
//! longer has) and starts over when fenced. After every step:
//!
//! - no partition is owned by two members at once (the coordinator's current
//!   assignments, revocations pending included), nor by two clients that are members;
//!
//! and once the clients all heartbeat without time passing, the group is Stable and
//! every partition of a subscribed topic is assigned to exactly one member.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use proptest::prelude::*;
use tidelog::coordinator::{
    ConsumerGroup, ConsumerGroupState, ConsumerHeartbeatRequest, CoordinatorConfig, GroupError,
    TopicPartitionList, TopicsImage,
};

const SLOTS: usize = 4;
/// Slots below this are static members (`instance_id` = "instance-N").
const STATIC_SLOTS: usize = 2;

#[derive(Debug, Clone)]
enum Op {
    Join(usize),
    Heartbeat(usize),
    Leave(usize),
    Advance(u64),
    GrowTopic,
}

fn op() -> impl Strategy<Value = Op> {
    let slot = 0..SLOTS;
    prop_oneof![
        3 => slot.clone().prop_map(Op::Join),
        8 => slot.clone().prop_map(Op::Heartbeat),
        1 => slot.prop_map(Op::Leave),
        2 => prop_oneof![Just(1_000u64), Just(10_000), Just(25_000), Just(50_000)].prop_map(Op::Advance),
        1 => Just(Op::GrowTopic),
    ]
}

/// What a client knows of its membership.
#[derive(Debug, Clone)]
struct Client {
    member_id: String,
    epoch: i32,
    owned: TopicPartitionList,
}

struct Model {
    group: ConsumerGroup,
    cfg: CoordinatorConfig,
    topics: TopicsImage,
    now: Instant,
    clients: Vec<Option<Client>>,
    joins: u64,
}

fn subscribe(slot: usize, req: &mut ConsumerHeartbeatRequest) {
    match slot {
        0 => req.subscribed_topic_names = Some(vec!["t".into()]),
        1 => req.subscribed_topic_regex = Some("t|u".into()),
        2 => req.subscribed_topic_names = Some(vec!["t".into(), "u".into()]),
        _ => req.subscribed_topic_names = Some(vec!["u".into()]),
    }
}

impl Model {
    fn new() -> Model {
        Model {
            group: ConsumerGroup::new("model", 7),
            cfg: CoordinatorConfig::default(),
            topics: BTreeMap::from([("t".to_string(), 5), ("u".to_string(), 2)]),
            now: Instant::now(),
            clients: vec![None; SLOTS],
            joins: 0,
        }
    }

    fn instance(slot: usize) -> Option<String> {
        (slot < STATIC_SLOTS).then(|| format!("instance-{slot}"))
    }

    fn join(&mut self, slot: usize) {
        if self.clients[slot].is_some() {
            return;
        }
        self.joins += 1;
        let mut req = ConsumerHeartbeatRequest {
            group_id: "model".into(),
            member_id: format!("m{slot}-{}", self.joins),
            member_epoch: 0,
            instance_id: Model::instance(slot),
            rebalance_timeout_ms: 20_000,
            owned_partitions: Some(Vec::new()),
            ..Default::default()
        };
        subscribe(slot, &mut req);
        match self
            .group
            .heartbeat(&req, &self.topics, &self.cfg, self.now)
        {
            Ok(r) => {
                self.clients[slot] = Some(Client {
                    member_id: r.member_id,
                    epoch: r.member_epoch,
                    owned: r.assignment.expect("a join is answered its assignment"),
                })
            }
            Err(GroupError::UnreleasedInstanceId(_)) => {}
            Err(e) => panic!("join of slot {slot} refused: {e}"),
        }
    }

    fn heartbeat(&mut self, slot: usize) {
        let Some(c) = self.clients[slot].clone() else {
            return;
        };
        let req = ConsumerHeartbeatRequest {
            group_id: "model".into(),
            member_id: c.member_id.clone(),
            member_epoch: c.epoch,
            instance_id: Model::instance(slot),
            rebalance_timeout_ms: -1,
            owned_partitions: Some(c.owned.clone()),
            ..Default::default()
        };
        match self
            .group
            .heartbeat(&req, &self.topics, &self.cfg, self.now)
        {
            Ok(r) => {
                let c = self.clients[slot].as_mut().expect("client");
                c.epoch = r.member_epoch;
                if let Some(a) = r.assignment {
                    c.owned = a;
                }
            }
            // Fenced or removed: the client drops its partitions and starts over.
            Err(
                GroupError::UnknownMemberId(_)
                | GroupError::FencedMemberEpoch { .. }
                | GroupError::FencedInstanceId(_),
            ) => self.clients[slot] = None,
            Err(e) => panic!("heartbeat of slot {slot} refused: {e}"),
        }
    }

    fn leave(&mut self, slot: usize) {
        let Some(c) = self.clients[slot].take() else {
            return;
        };
        let epoch = if slot < STATIC_SLOTS { -2 } else { -1 };
        let req = ConsumerHeartbeatRequest {
            group_id: "model".into(),
            member_id: c.member_id,
            member_epoch: epoch,
            instance_id: Model::instance(slot),
            rebalance_timeout_ms: -1,
            ..Default::default()
        };
        // Refused if the member was already removed: the client is gone either way.
        let _ = self
            .group
            .heartbeat(&req, &self.topics, &self.cfg, self.now);
    }

    fn apply(&mut self, op: &Op) {
        match *op {
            Op::Join(s) => self.join(s),
            Op::Heartbeat(s) => self.heartbeat(s),
            Op::Leave(s) => self.leave(s),
            Op::Advance(ms) => {
                self.now += Duration::from_millis(ms);
                self.group.tick(&self.cfg, self.now);
            }
            Op::GrowTopic => {
                let n = self.topics.get_mut("t").expect("topic t");
                *n = (*n + 1).min(12);
            }
        }
    }

    /// No partition in two members' current assignments (revocations included), nor
    /// owned by two clients that are members.
    fn check_exclusive(&self) -> Result<(), TestCaseError> {
        let mut seen: BTreeMap<(String, i32), String> = BTreeMap::new();
        for (member, parts) in self.group.owned_partitions() {
            for (t, ps) in parts {
                for p in ps {
                    if let Some(other) = seen.insert((t.clone(), p), member.clone()) {
                        return Err(TestCaseError::fail(format!(
                            "{t}-{p} owned by {other} and {member}"
                        )));
                    }
                }
            }
        }
        let members: BTreeSet<String> = self.group.member_ids().into_iter().collect();
        let mut by_client: BTreeMap<(String, i32), usize> = BTreeMap::new();
        for (slot, c) in self.clients.iter().enumerate() {
            let Some(c) = c.as_ref().filter(|c| members.contains(&c.member_id)) else {
                continue;
            };
            for (t, ps) in &c.owned {
                for &p in ps {
                    if let Some(other) = by_client.insert((t.clone(), p), slot) {
                        return Err(TestCaseError::fail(format!(
                            "{t}-{p} owned by clients {other} and {slot}"
                        )));
                    }
                }
            }
        }
        Ok(())
    }

    /// Every client joins and heartbeats, with no time passing, until nothing changes.
    fn settle(&mut self) {
        for _ in 0..8 {
            for slot in 0..SLOTS {
                self.join(slot);
                self.heartbeat(slot);
            }
        }
    }

    fn check_settled(&self) -> Result<(), TestCaseError> {
        prop_assert_eq!(self.group.state(), ConsumerGroupState::Stable);
        let mut assigned: BTreeMap<String, BTreeSet<i32>> = BTreeMap::new();
        for (member, parts) in self.group.owned_partitions() {
            let client = self
                .clients
                .iter()
                .flatten()
                .find(|c| c.member_id == member);
            let client =
                client.ok_or_else(|| TestCaseError::fail(format!("{member} has no client")))?;
            prop_assert_eq!(&client.owned, &parts, "client and coordinator disagree");
            for (t, ps) in parts {
                assigned.entry(t).or_default().extend(ps);
            }
        }
        // Every slot subscribes to t or u and they all joined: both are subscribed.
        for (t, &n) in &self.topics {
            prop_assert_eq!(
                assigned.get(t).cloned().unwrap_or_default(),
                (0..n).collect::<BTreeSet<i32>>(),
                "topic {} not fully assigned",
                t
            );
        }
        Ok(())
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn partitions_are_never_owned_twice_and_all_get_assigned(ops in proptest::collection::vec(op(), 1..80)) {
        let mut m = Model::new();
        for op in &ops {
            m.apply(op);
            m.check_exclusive()?;
        }
        m.settle();
        m.check_exclusive()?;
        m.check_settled()?;
    }
}

/// A static member leaves temporarily and a dynamic one joins meanwhile: the static
/// member's partitions stay reserved for it and it takes them back.
#[test]
fn a_static_member_gets_its_partitions_back_after_others_joined() {
    let mut m = Model::new();
    m.join(0);
    m.join(2);
    m.settle();
    let before = m.clients[0].clone().expect("slot 0 joined").owned;
    m.leave(0);
    m.join(3);
    m.settle();
    assert_eq!(m.clients[0].as_ref().expect("rejoined").owned, before);
    m.check_exclusive().unwrap();
    m.check_settled().unwrap();
}
