//! Model test of the group coordinator's state machine ([`Group`]), driven directly: no
//! threads, no sleeps, an explicit clock. Random interleavings of joins (dynamic members
//! with KIP-394's MEMBER_ID_REQUIRED, static members with `group.instance.id`),
//! syncs, heartbeats, leaves, commits, client restarts, time passing (session expiry,
//! rebalance timeouts) and coordinator restarts (the group reloaded from the records it
//! wrote to `__consumer_offsets`). After every step:
//!
//! - no generation ever gives a partition to two members (the assignments handed out by
//!   SyncGroup are decoded and collected per generation; a static member counts as its
//!   instance, which keeps its assignment under a new member id);
//! - a completed round leaves no joined member behind: once the group is past
//!   PreparingRebalance, every JoinGroup that was waiting has its answer;
//! - committed offsets are what the model says.
//!
//! Deterministic tests below replay the sequence of issue 18 (a coordinator restart
//! with members mid-session).

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use proptest::prelude::*;
use tidelog::consumer::{Assignment, Assignor, RangeAssignor, Subscription};
use tidelog::coordinator::{
    CommitOffset, CoordinatorConfig, Group, GroupError, GroupState, JoinGroupRequest,
    JoinGroupResponse, JoinStart, JoinTicket, JournalRecord, LeavingMember, MemberOrigin,
    OffsetCommitRequest, SyncGroupRequest, load_groups,
};

const SLOTS: usize = 4;
/// Slots below this are static members (`group.instance.id` = "instance-N").
const STATIC_SLOTS: usize = 2;
const PARTITIONS: i32 = 6;
const GROUP: &str = "model";
const SESSION: Duration = Duration::from_secs(10);
const REBALANCE: Duration = Duration::from_secs(20);

#[derive(Debug, Clone)]
enum Op {
    Join(usize),
    Collect(usize),
    Sync(usize),
    Heartbeat(usize),
    Leave(usize),
    Commit(usize, i32, i64),
    /// The client process restarts: it forgets its member id (a static member keeps its
    /// instance id) and its assignment.
    ClientRestart(usize),
    Advance(u64),
    CoordinatorRestart,
}

fn op() -> impl Strategy<Value = Op> {
    let slot = 0..SLOTS;
    prop_oneof![
        4 => slot.clone().prop_map(Op::Join),
        4 => slot.clone().prop_map(Op::Collect),
        4 => slot.clone().prop_map(Op::Sync),
        3 => slot.clone().prop_map(Op::Heartbeat),
        1 => slot.clone().prop_map(Op::Leave),
        2 => (slot.clone(), 0..PARTITIONS, 0i64..1000).prop_map(|(s, p, o)| Op::Commit(s, p, o)),
        1 => slot.prop_map(Op::ClientRestart),
        2 => prop_oneof![Just(100u64), Just(3_000), Just(11_000), Just(25_000)].prop_map(Op::Advance),
        1 => Just(Op::CoordinatorRestart),
    ]
}

fn config() -> CoordinatorConfig {
    CoordinatorConfig {
        min_session_timeout: Duration::from_millis(1),
        initial_rebalance_delay: Duration::ZERO,
        ..CoordinatorConfig::default()
    }
}

fn subscription() -> Vec<u8> {
    Subscription {
        topics: vec!["t".into()],
        ..Default::default()
    }
    .encode()
}

/// One client, as a Kafka consumer keeps its group state.
#[derive(Debug, Default, Clone)]
struct Client {
    member_id: String,
    generation: i32,
    ticket: Option<JoinTicket>,
    /// A JoinGroup answer waiting for its SyncGroup.
    joined: Option<JoinGroupResponse>,
    /// The generation whose SyncGroup waits for the leader.
    syncing: Option<i32>,
    /// The generation and partitions it was last given.
    assignment: Option<(i32, Vec<i32>)>,
}

struct Harness {
    group: Group,
    cfg: CoordinatorConfig,
    /// Everything the coordinator wrote to `__consumer_offsets`, oldest first.
    log: Vec<JournalRecord>,
    now: Instant,
    wall_ms: i64,
    incarnation: u64,
    clients: Vec<Client>,
    /// generation -> owner (instance id or member id) -> partitions handed out.
    handed_out: BTreeMap<i32, BTreeMap<String, BTreeSet<i32>>>,
    /// partition -> committed offset, as the model expects.
    offsets: BTreeMap<i32, i64>,
    /// The clients speak JoinGroup v9+ (`skip_assignment`).
    skip_assignment: bool,
}

impl Harness {
    fn new() -> Harness {
        Harness {
            group: Group::new(GROUP, 1),
            cfg: config(),
            log: Vec::new(),
            now: Instant::now(),
            wall_ms: 1_700_000_000_000,
            incarnation: 1,
            clients: vec![Client::default(); SLOTS],
            handed_out: BTreeMap::new(),
            offsets: BTreeMap::new(),
            skip_assignment: false,
        }
    }

    fn instance(slot: usize) -> Option<String> {
        (slot < STATIC_SLOTS).then(|| format!("instance-{slot}"))
    }

    /// What the shell does after every transition: store what the group asked to.
    fn persist(&mut self) {
        if let Some(record) = self.group.take_pending_store(self.wall_ms) {
            self.log.push(record);
        }
    }

    fn join_request(&self, slot: usize) -> JoinGroupRequest {
        JoinGroupRequest {
            group_id: GROUP.into(),
            member_id: self.clients[slot].member_id.clone(),
            group_instance_id: Self::instance(slot),
            protocol_type: "consumer".into(),
            protocols: vec![("range".into(), subscription())],
            session_timeout: SESSION,
            rebalance_timeout: REBALANCE,
            require_known_member_id: true,
            client_id: format!("client-{slot}"),
            client_host: "/127.0.0.1".into(),
            origin: MemberOrigin::Network,
            supports_skip_assignment: self.skip_assignment,
        }
    }

    fn join(&mut self, slot: usize) {
        let req = self.join_request(slot);
        let result = self.group.join(&req, &self.cfg, self.now);
        self.persist();
        let c = &mut self.clients[slot];
        match result {
            Ok(JoinStart::Pending(ticket)) => {
                c.member_id = ticket.member_id.clone();
                c.ticket = Some(ticket);
                c.joined = None;
                c.syncing = None;
            }
            Ok(JoinStart::Done(resp)) => {
                c.member_id = resp.member_id.clone();
                c.generation = resp.generation_id;
                c.ticket = None;
                c.joined = Some(resp);
            }
            Err(GroupError::MemberIdRequired { member_id }) => c.member_id = member_id,
            Err(GroupError::UnknownMemberId(_) | GroupError::FencedInstanceId(_)) => {
                c.member_id.clear();
                c.ticket = None;
            }
            Err(e) => panic!("unexpected JoinGroup refusal for slot {slot}: {e:?}"),
        }
    }

    /// Collects a finished JoinGroup.
    fn collect(&mut self, slot: usize) {
        let Some(ticket) = self.clients[slot].ticket.clone() else {
            return;
        };
        let Some(result) = self.group.join_result(&ticket, self.now) else {
            return;
        };
        let c = &mut self.clients[slot];
        c.ticket = None;
        match result {
            Ok(resp) => {
                assert_eq!(resp.member_id, c.member_id);
                c.generation = resp.generation_id;
                c.joined = Some(resp);
            }
            Err(GroupError::UnknownMemberId(_) | GroupError::FencedInstanceId(_)) => {
                c.member_id.clear();
            }
            Err(e) => panic!("unexpected JoinGroup answer for slot {slot}: {e:?}"),
        }
    }

    fn leader_assignment(resp: &JoinGroupResponse) -> Vec<(String, Vec<u8>)> {
        let members: BTreeMap<String, Subscription> = resp
            .members
            .iter()
            .map(|m| {
                let sub = Subscription::decode(&m.metadata).expect("subscription");
                (m.member_id.clone(), sub)
            })
            .collect();
        let counts = BTreeMap::from([("t".to_string(), PARTITIONS)]);
        let plan = RangeAssignor.assign(&counts, &members);
        members
            .keys()
            .map(|id| {
                let partitions = plan.get(id).cloned().unwrap_or_default();
                let bytes = Assignment {
                    partitions,
                    user_data: None,
                }
                .encode();
                (id.clone(), bytes)
            })
            .collect()
    }

    fn sync(&mut self, slot: usize) {
        let c = self.clients[slot].clone();
        if let Some(generation) = c.syncing {
            let result = self.group.sync_result(
                &c.member_id,
                Self::instance(slot).as_deref(),
                generation,
                self.now,
            );
            if let Some(result) = result {
                self.group.end_sync_wait(&c.member_id, self.now);
                self.clients[slot].syncing = None;
                self.synced(slot, generation, result);
            }
            return;
        }
        let Some(resp) = c.joined.clone() else {
            return;
        };
        // A leader told to skip the assignment syncs with none, as a Kafka client does.
        let assignments = if resp.leader == resp.member_id && !resp.skip_assignment {
            Self::leader_assignment(&resp)
        } else {
            Vec::new()
        };
        let req = SyncGroupRequest {
            group_id: GROUP.into(),
            generation_id: resp.generation_id,
            member_id: c.member_id.clone(),
            group_instance_id: Self::instance(slot),
            protocol_type: Some("consumer".into()),
            protocol_name: resp.protocol_name.clone(),
            assignments,
        };
        let result = self.group.sync(&req, self.now);
        self.persist();
        self.clients[slot].joined = None;
        match result {
            Ok(None) => self.clients[slot].syncing = Some(resp.generation_id),
            Ok(Some(answer)) => self.synced(slot, resp.generation_id, Ok(answer)),
            Err(e) => self.synced(slot, resp.generation_id, Err(e)),
        }
    }

    fn synced(
        &mut self,
        slot: usize,
        generation: i32,
        result: Result<tidelog::coordinator::SyncGroupResponse, GroupError>,
    ) {
        let c = &mut self.clients[slot];
        match result {
            Ok(answer) => {
                let a = Assignment::decode(&answer.assignment).expect("assignment bytes");
                let parts: Vec<i32> = a
                    .partitions
                    .iter()
                    .flat_map(|(_, ps)| ps.iter().copied())
                    .collect();
                let owner = Self::instance(slot).unwrap_or_else(|| c.member_id.clone());
                let gen_map = self.handed_out.entry(generation).or_default();
                let entry = gen_map.entry(owner).or_default();
                entry.extend(parts.iter().copied());
                c.assignment = Some((generation, parts));
            }
            Err(GroupError::UnknownMemberId(_) | GroupError::FencedInstanceId(_)) => {
                c.member_id.clear();
                c.assignment = None;
            }
            Err(GroupError::RebalanceInProgress | GroupError::IllegalGeneration { .. }) => {
                c.assignment = None;
            }
            Err(e) => panic!("unexpected SyncGroup answer for slot {slot}: {e:?}"),
        }
    }

    fn heartbeat(&mut self, slot: usize) {
        let c = self.clients[slot].clone();
        if c.member_id.is_empty() || c.ticket.is_some() {
            return;
        }
        let result = self.group.heartbeat(
            c.generation,
            &c.member_id,
            Self::instance(slot).as_deref(),
            self.now,
        );
        self.persist();
        match result {
            Ok(()) => {}
            Err(GroupError::RebalanceInProgress | GroupError::IllegalGeneration { .. }) => {
                self.clients[slot].assignment = None;
            }
            Err(GroupError::UnknownMemberId(_) | GroupError::FencedInstanceId(_)) => {
                let c = &mut self.clients[slot];
                c.member_id.clear();
                c.assignment = None;
            }
            Err(e) => panic!("unexpected Heartbeat answer: {e:?}"),
        }
    }

    fn leave(&mut self, slot: usize) {
        let c = self.clients[slot].clone();
        if c.member_id.is_empty() && Self::instance(slot).is_none() {
            return;
        }
        let results = self.group.leave(
            &[LeavingMember {
                member_id: c.member_id.clone(),
                group_instance_id: Self::instance(slot),
            }],
            self.now,
        );
        self.persist();
        assert_eq!(results.len(), 1);
        self.clients[slot] = Client::default();
    }

    fn commit(&mut self, slot: usize, partition: i32, offset: i64) {
        let c = self.clients[slot].clone();
        let req = OffsetCommitRequest {
            group_id: GROUP.into(),
            generation_id: c.generation,
            member_id: c.member_id.clone(),
            group_instance_id: Self::instance(slot),
            offsets: vec![CommitOffset {
                topic: "t".into(),
                partition,
                offset,
                leader_epoch: -1,
                metadata: None,
                commit_timestamp: None,
            }],
        };
        let allowed = self.group.check_commit(&req, self.now);
        // A member of the current generation may commit unless the group waits for
        // the leader's assignment.
        let expect_ok = !c.member_id.is_empty()
            && self.group.member_ids().contains(&c.member_id)
            && c.generation == self.group.generation()
            && self.group.state() != GroupState::CompletingRebalance;
        assert_eq!(
            allowed.is_ok(),
            expect_ok,
            "commit by slot {slot}: {allowed:?}"
        );
        if allowed.is_err() {
            return;
        }
        let (results, prepared) = self
            .group
            .prepare_commit(&req.offsets, &self.cfg, self.wall_ms);
        assert!(results[0].result.is_ok());
        self.log.extend(self.group.commit_records(&prepared));
        self.group.apply_commit(prepared);
        self.offsets.insert(partition, offset);
    }

    fn advance(&mut self, ms: u64) {
        self.now += Duration::from_millis(ms);
        self.wall_ms += ms as i64;
        self.group.tick(self.now);
        self.persist();
    }

    /// The coordinator restarts: the group is rebuilt from its records. Requests that
    /// were waiting die with their connections (clients retry with what they hold).
    fn restart_coordinator(&mut self) {
        self.incarnation += 1;
        let mut groups =
            load_groups(self.log.clone(), self.now, self.incarnation).expect("log decodes");
        self.group = groups
            .remove(GROUP)
            .unwrap_or_else(|| Group::new(GROUP, self.incarnation));
        for c in &mut self.clients {
            c.ticket = None;
            c.syncing = None;
        }
        // Committed offsets survive exactly.
        let fetched = self.group.fetch_offsets(None);
        let got: BTreeMap<i32, i64> = fetched.iter().map(|o| (o.partition, o.offset)).collect();
        assert_eq!(got, self.offsets, "offsets after a coordinator restart");
    }

    fn apply(&mut self, op: &Op) {
        match *op {
            Op::Join(s) => self.join(s),
            Op::Collect(s) => self.collect(s),
            Op::Sync(s) => self.sync(s),
            Op::Heartbeat(s) => self.heartbeat(s),
            Op::Leave(s) => self.leave(s),
            Op::Commit(s, p, o) => self.commit(s, p, o),
            Op::ClientRestart(s) => self.clients[s] = Client::default(),
            Op::Advance(ms) => self.advance(ms),
            Op::CoordinatorRestart => self.restart_coordinator(),
        }
    }

    fn check(&mut self) {
        // No generation gives a partition to two owners.
        for (generation, owners) in &self.handed_out {
            let mut seen: BTreeMap<i32, &str> = BTreeMap::new();
            for (owner, parts) in owners {
                for p in parts {
                    if let Some(other) = seen.insert(*p, owner) {
                        panic!(
                            "generation {generation} gave partition {p} to {other} and {owner}: {owners:?}"
                        );
                    }
                }
            }
        }
        // A completed round answered every JoinGroup that was waiting.
        if self.group.state() != GroupState::PreparingRebalance {
            for slot in 0..SLOTS {
                if let Some(ticket) = self.clients[slot].ticket.clone() {
                    let answer = self.group.join_result(&ticket, self.now);
                    assert!(
                        answer.is_some(),
                        "slot {slot} still waits in JoinGroup while the group is {:?} (generation {})",
                        self.group.state(),
                        self.group.generation()
                    );
                    // Put it back where `collect` finds it: replay the result.
                    self.clients[slot].ticket = None;
                    match answer {
                        Some(Ok(resp)) => {
                            self.clients[slot].generation = resp.generation_id;
                            self.clients[slot].joined = Some(resp);
                        }
                        _ => self.clients[slot].member_id.clear(),
                    }
                }
            }
        }
        // A Stable group's stored assignment agrees with what was handed out.
        if let Some(assignments) = self.group.assignments() {
            let mut all = BTreeSet::new();
            for bytes in assignments.values() {
                let a = Assignment::decode(bytes).expect("stored assignment");
                for (_, ps) in a.partitions {
                    for p in ps {
                        assert!(all.insert(p), "partition {p} stored for two members");
                    }
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn random_interleavings_keep_the_invariants(
        ops in prop::collection::vec(op(), 1..80),
        skip_assignment in any::<bool>(),
    ) {
        let mut h = Harness::new();
        h.skip_assignment = skip_assignment;
        for op in &ops {
            h.apply(op);
            h.check();
        }
    }
}

/// Every slot joins (dynamic members after MEMBER_ID_REQUIRED), collects its answer
/// and syncs, rejoining as a client does when told to, until all are in one Stable
/// generation; returns it.
fn settle(h: &mut Harness, slots: &[usize]) -> i32 {
    for _ in 0..10 {
        for &s in slots {
            // Heartbeats tell members of a generation that a rebalance started.
            if h.clients[s].assignment.is_some() {
                h.heartbeat(s);
            }
            let c = &h.clients[s];
            let current = c
                .assignment
                .as_ref()
                .is_some_and(|(g, _)| *g == h.group.generation());
            if !current && c.ticket.is_none() && c.joined.is_none() && c.syncing.is_none() {
                h.join(s);
            }
        }
        for &s in slots {
            h.collect(s);
            h.sync(s);
        }
        h.check();
        let generation = h.group.generation();
        let done = h.group.state() == GroupState::Stable
            && slots.iter().all(|&s| {
                h.clients[s]
                    .assignment
                    .as_ref()
                    .is_some_and(|(g, _)| *g == generation)
            });
        if done {
            return generation;
        }
    }
    panic!("slots {slots:?} never settled: {:?}", h.clients);
}

fn assignment_of(h: &Harness, slot: usize) -> Vec<i32> {
    h.clients[slot].assignment.clone().expect("assigned").1
}

#[test]
fn restarted_coordinator_continues_the_generation() {
    // Issue 18: two members mid-session, the coordinator restarts. With the group's
    // metadata in the log, both go on with their old ids and generation: heartbeats
    // and commits succeed, nobody rebalances.
    let mut h = Harness::new();
    let generation = settle(&mut h, &[2, 3]);
    let before = (assignment_of(&h, 2), assignment_of(&h, 3));
    h.advance(3_000);
    h.restart_coordinator();
    assert_eq!(h.group.state(), GroupState::Stable);
    assert_eq!(h.group.generation(), generation);
    for slot in [2, 3] {
        h.heartbeat(slot);
        assert!(
            h.clients[slot].assignment.is_some(),
            "slot {slot} was told to rejoin"
        );
        h.commit(slot, assignment_of(&h, slot)[0], 42);
    }
    // Sessions restart from the load: a member silent for its whole session expires.
    h.advance(9_000);
    h.heartbeat(2);
    h.heartbeat(3);
    h.advance(9_000);
    assert_eq!(h.group.generation(), generation);
    assert_eq!(h.group.state(), GroupState::Stable);
    assert_eq!((assignment_of(&h, 2), assignment_of(&h, 3)), before);
}

#[test]
fn stale_ids_after_a_restart_without_metadata_get_fresh_ids_and_one_round() {
    // The sequence of issue 18 against a log that holds only offsets (as written
    // before group metadata was stored): the restarted coordinator knows no member.
    // Before the fix it handed out member ids from a counter that restarted at zero,
    // so a rejoining client could be given the id another client still used, and the
    // two were one member to the coordinator, each assigned every partition in turn.
    let mut h = Harness::new();
    settle(&mut h, &[2, 3]);
    let old_ids: BTreeSet<String> = [2, 3]
        .iter()
        .map(|&s| h.clients[s].member_id.clone())
        .collect();
    h.commit(2, assignment_of(&h, 2)[0], 7);
    h.log.retain(|(key, _)| key[..2] != [0, 2]);
    // That coordinator's generations are forgotten with its metadata: the new one
    // numbers its own from 1 again, so only its generations are compared.
    h.handed_out.clear();
    h.restart_coordinator();
    assert_eq!(h.group.state(), GroupState::Empty);
    // Heartbeats with old generations and ids: UNKNOWN_MEMBER_ID, the clients reset.
    h.heartbeat(2);
    h.advance(50);
    h.heartbeat(3);
    assert!(h.clients[2].member_id.is_empty() && h.clients[3].member_id.is_empty());
    // They rejoin at slightly different times: 2 gets its id, 3 asks for one before 2
    // comes back with it; the round must wait for both.
    h.join(2);
    h.advance(20);
    h.join(3);
    h.join(2);
    assert_eq!(
        h.group.state(),
        GroupState::PreparingRebalance,
        "the round must wait for 3"
    );
    h.advance(20);
    h.join(3);
    let new_ids: BTreeSet<String> = [2, 3]
        .iter()
        .map(|&s| h.clients[s].member_id.clone())
        .collect();
    assert!(
        old_ids.is_disjoint(&new_ids),
        "ids reused: {old_ids:?} {new_ids:?}"
    );
    let generation = h.group.generation();
    for s in [2, 3] {
        h.collect(s);
    }
    for s in [2, 3] {
        h.sync(s);
    }
    for s in [2, 3] {
        h.sync(s);
    }
    h.check();
    assert_eq!(h.group.state(), GroupState::Stable);
    assert_eq!(
        h.group.generation(),
        generation,
        "one round, not one per member"
    );
    let mut all: Vec<i32> = [2, 3].iter().flat_map(|&s| assignment_of(&h, s)).collect();
    all.sort_unstable();
    assert_eq!(all, (0..PARTITIONS).collect::<Vec<_>>());
}

#[test]
fn static_member_restart_gets_its_assignment_back_without_a_rebalance() {
    let mut h = Harness::new();
    let generation = settle(&mut h, &[0, 2]);
    let mine = assignment_of(&h, 0);
    let old_id = h.clients[0].member_id.clone();
    // The static member's process restarts within its session.
    h.apply(&Op::ClientRestart(0));
    h.advance(2_000);
    h.join(0);
    let resp = h.clients[0].joined.clone().expect("answered at once");
    assert_eq!(resp.generation_id, generation);
    assert_ne!(resp.member_id, old_id);
    h.sync(0);
    assert_eq!(assignment_of(&h, 0), mine);
    assert_eq!(h.group.generation(), generation, "no rebalance");
    assert_eq!(h.group.state(), GroupState::Stable);
    // The other member was not disturbed; the old id is fenced.
    h.heartbeat(2);
    assert!(h.clients[2].assignment.is_some());
    assert!(matches!(
        h.group
            .heartbeat(generation, &old_id, Some("instance-0"), h.now),
        Err(GroupError::FencedInstanceId(_))
    ));
    // And the replacement survives a coordinator restart.
    h.restart_coordinator();
    assert_eq!(
        h.group.static_member("instance-0"),
        Some(resp.member_id.as_str())
    );
    h.heartbeat(0);
    assert!(h.clients[0].assignment.is_some());
    // LeaveGroup by instance id alone removes it and rebalances the other.
    let left = h.group.leave(
        &[LeavingMember {
            member_id: String::new(),
            group_instance_id: Some("instance-0".into()),
        }],
        h.now,
    );
    assert!(left[0].is_ok(), "{left:?}");
    assert_eq!(h.group.state(), GroupState::PreparingRebalance);
}

#[test]
fn static_leader_returns_without_a_rebalance_before_and_from_join_group_v9() {
    for skip in [false, true] {
        let mut h = Harness::new();
        h.skip_assignment = skip;
        let generation = settle(&mut h, &[0, 1]);
        let leader = h.group.leader().expect("a leader").to_string();
        let (l, o) = if h.clients[0].member_id == leader {
            (0, 1)
        } else {
            (1, 0)
        };
        let (mine, theirs) = (assignment_of(&h, l), assignment_of(&h, o));
        // The leader's process restarts within its session and joins with no member id.
        h.apply(&Op::ClientRestart(l));
        h.advance(2_000);
        h.join(l);
        let resp = h.clients[l].joined.clone().expect("answered at once");
        assert_eq!(resp.generation_id, generation, "skip {skip}");
        assert_ne!(resp.member_id, leader);
        assert_eq!(
            h.group.leader(),
            Some(resp.member_id.as_str()),
            "it still leads"
        );
        if skip {
            // v9: told that it leads, with the members, and to skip the assignment.
            assert_eq!(resp.leader, resp.member_id);
            assert!(resp.skip_assignment);
            assert_eq!(resp.members.len(), 2);
        } else {
            // Before v9: the old leader id, so that it acts as a follower.
            assert_eq!(resp.leader, leader);
            assert!(!resp.skip_assignment);
            assert!(resp.members.is_empty());
        }
        h.sync(l);
        assert_eq!(assignment_of(&h, l), mine, "skip {skip}");
        assert_eq!(
            h.group.generation(),
            generation,
            "no rebalance (skip {skip})"
        );
        assert_eq!(h.group.state(), GroupState::Stable);
        // The other member goes on undisturbed.
        h.heartbeat(o);
        assert_eq!(assignment_of(&h, o), theirs, "skip {skip}");
        h.check();
    }
}

#[test]
fn a_static_members_new_id_that_cannot_be_stored_is_undone_without_a_rebalance() {
    let mut h = Harness::new();
    let generation = settle(&mut h, &[0, 2]);
    let old_id = h.clients[0].member_id.clone();
    h.apply(&Op::ClientRestart(0));
    let req = h.join_request(0);
    let Ok(JoinStart::Done(resp)) = h.group.join(&req, &h.cfg, h.now) else {
        panic!("a static member back in a Stable group is answered at once");
    };
    // The journal refuses the group's metadata with the new id.
    assert!(h.group.take_pending_store(h.wall_ms).is_some());
    h.group.store_failed(h.now);
    assert_eq!(h.group.static_member("instance-0"), Some(old_id.as_str()));
    assert_eq!(h.group.state(), GroupState::Stable, "no rebalance");
    assert_eq!(h.group.generation(), generation);
    h.group
        .heartbeat(generation, &old_id, Some("instance-0"), h.now)
        .expect("the old id is the member again");
    assert!(matches!(
        h.group
            .heartbeat(generation, &resp.member_id, Some("instance-0"), h.now),
        Err(GroupError::FencedInstanceId(_))
    ));
    h.heartbeat(2);
    assert!(
        h.clients[2].assignment.is_some(),
        "the other member goes on"
    );
}

#[test]
fn a_static_member_gone_without_leave_stays_until_its_session_times_out() {
    let mut h = Harness::new();
    let generation = settle(&mut h, &[0, 2]);
    // Its process stops: a static member sends no LeaveGroup.
    h.apply(&Op::ClientRestart(0));
    h.advance(SESSION.as_millis() as u64 - 1_000);
    h.heartbeat(2);
    assert_eq!(h.group.state(), GroupState::Stable);
    assert_eq!(h.group.generation(), generation);
    assert!(h.group.static_member("instance-0").is_some());
    h.advance(2_000);
    assert_eq!(
        h.group.static_member("instance-0"),
        None,
        "its session ended"
    );
    assert_eq!(h.group.member_ids().len(), 1);
    assert_eq!(h.group.state(), GroupState::PreparingRebalance);
}

#[test]
fn leave_group_with_an_instance_id_is_checked_as_kafka_does() {
    let mut h = Harness::new();
    settle(&mut h, &[0, 2]);
    let id = h.clients[0].member_id.clone();
    let leaving = |member_id: &str, instance: &str| LeavingMember {
        member_id: member_id.into(),
        group_instance_id: Some(instance.into()),
    };
    let results = h.group.leave(
        &[
            // Another member id than the instance's: fenced.
            leaving("stale-id", "instance-0"),
            // An instance the group does not know: unknown member.
            leaving("", "instance-9"),
            leaving(&id, "instance-9"),
        ],
        h.now,
    );
    assert!(
        matches!(
            results.as_slice(),
            [
                Err(GroupError::FencedInstanceId(_)),
                Err(GroupError::UnknownMemberId(_)),
                Err(GroupError::UnknownMemberId(_)),
            ]
        ),
        "{results:?}"
    );
    assert_eq!(h.group.state(), GroupState::Stable, "nobody left");
    // Its own member id with its instance id: it leaves, the other rebalances.
    let results = h.group.leave(&[leaving(&id, "instance-0")], h.now);
    assert!(results[0].is_ok(), "{results:?}");
    assert_eq!(h.group.static_member("instance-0"), None);
    assert_eq!(h.group.state(), GroupState::PreparingRebalance);
}

#[test]
fn an_offset_commit_v1_timestamp_is_the_commits_time() {
    // A standalone consumer commits with its own timestamp (OffsetCommit v1), eight
    // days ago: with a week's retention the offset of the empty group has expired, as
    // Kafka counts from the commit timestamp; the same commit at the time of the
    // commit has not.
    let retention = Duration::from_secs(7 * 24 * 3600);
    for (timestamp, expired) in [(Some(-8), true), (None, false)] {
        let mut h = Harness::new();
        let day = 24 * 3600 * 1000;
        let req = OffsetCommitRequest {
            group_id: GROUP.into(),
            generation_id: -1,
            member_id: String::new(),
            group_instance_id: None,
            offsets: vec![CommitOffset {
                topic: "t".into(),
                partition: 0,
                offset: 3,
                leader_epoch: -1,
                metadata: None,
                commit_timestamp: timestamp.map(|days: i64| h.wall_ms + days * day),
            }],
        };
        h.group.check_commit(&req, h.now).unwrap();
        let (results, prepared) = h.group.prepare_commit(&req.offsets, &h.cfg, h.wall_ms);
        assert!(results[0].result.is_ok());
        h.group.apply_commit(prepared);
        let records = h.group.expired_records(retention, h.wall_ms);
        assert_eq!(records.is_some(), expired, "{timestamp:?}: {records:?}");
    }
}

#[test]
fn generation_fencing_and_expiry_during_join() {
    let mut h = Harness::new();
    let generation = settle(&mut h, &[2, 3]);
    // 2 rejoins: a rebalance; 3 stays silent past its session and the round's deadline.
    h.join(2);
    assert_eq!(h.group.state(), GroupState::PreparingRebalance);
    assert!(matches!(
        h.group
            .heartbeat(generation - 1, &h.clients[3].member_id.clone(), None, h.now),
        Err(GroupError::IllegalGeneration { .. })
    ));
    h.advance(21_000);
    h.collect(2);
    h.check();
    assert_eq!(h.group.generation(), generation + 1);
    assert_eq!(h.group.member_ids(), vec![h.clients[2].member_id.clone()]);
    // 3's commit with the old generation is refused.
    let id3 = h.clients[3].member_id.clone();
    let req = OffsetCommitRequest {
        group_id: GROUP.into(),
        generation_id: generation,
        member_id: id3,
        group_instance_id: None,
        offsets: Vec::new(),
    };
    assert!(matches!(
        h.group.check_commit(&req, h.now),
        Err(GroupError::UnknownMemberId(_))
    ));
}

#[test]
fn deleted_group_is_gone_after_a_restart() {
    let mut h = Harness::new();
    settle(&mut h, &[2]);
    h.commit(2, 0, 5);
    h.leave(2);
    assert_eq!(h.group.state(), GroupState::Empty);
    let tombstones = h
        .group
        .prepare_delete()
        .expect("an empty group may be deleted");
    assert!(tombstones.iter().all(|(_, v)| v.is_none()));
    h.log.extend(tombstones);
    h.offsets.clear();
    h.restart_coordinator();
    assert!(load_groups(h.log.clone(), h.now, 9).unwrap().is_empty());
}

#[test]
fn a_member_that_joins_but_never_syncs_is_removed_after_the_rebalance_timeout() {
    // Kafka's pending sync: once a round completes, every member that joined must send
    // SyncGroup within the rebalance timeout; one that only heartbeats is removed then
    // and the others rebalance.
    let mut h = Harness::new();
    for _ in 0..2 {
        h.join(2);
        h.join(3);
    }
    h.collect(2);
    h.collect(3);
    let leader = h.clients[2].joined.clone().expect("slot 2 joined");
    assert_eq!(leader.leader, leader.member_id, "the first to join leads");
    let generation = leader.generation_id;
    h.sync(2);
    assert_eq!(h.group.state(), GroupState::Stable);
    assert!(h.clients[2].assignment.is_some());
    // Slot 3 never syncs but keeps its session alive.
    let silent = h.clients[3].member_id.clone();
    for _ in 0..3 {
        h.advance(5_000);
        h.heartbeat(2);
        h.heartbeat(3);
        assert_eq!(h.group.state(), GroupState::Stable);
        assert!(h.group.member_ids().contains(&silent));
    }
    h.advance(5_000);
    assert!(!h.group.member_ids().contains(&silent), "slot 3 was kept");
    assert_eq!(h.group.state(), GroupState::PreparingRebalance);
    assert_eq!(h.group.generation(), generation);
    h.heartbeat(2);
    assert!(h.clients[2].assignment.is_none(), "slot 2 must rejoin");
    h.heartbeat(3);
    assert!(h.clients[3].member_id.is_empty(), "slot 3 is unknown");
    // Slot 2 alone forms the next generation.
    assert_eq!(settle(&mut h, &[2]), generation + 1);
}

#[test]
fn members_that_sync_in_time_are_not_removed() {
    let mut h = Harness::new();
    let generation = settle(&mut h, &[2, 3]);
    for _ in 0..6 {
        h.advance(5_000);
        h.heartbeat(2);
        h.heartbeat(3);
    }
    assert_eq!(h.group.state(), GroupState::Stable);
    assert_eq!(h.group.generation(), generation);
    assert_eq!(h.group.member_ids().len(), 2);
}
