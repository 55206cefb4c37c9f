//! One consumer group as a pure state machine: Kafka's classic group protocol with no
//! threads, no locks and no clock of its own.
//!
//! Every transition takes the request and an explicit `now` and returns an outcome or a
//! [`GroupError`]. What a transition decides to persist (a new generation's metadata, a
//! static member's new id) is queued and taken by the caller with
//! [`Group::take_pending_store`]; the coordinator's shell writes it to
//! `__consumer_offsets` before it answers. Blocking calls are split in two: a JoinGroup
//! registers the member and the answer is collected later with [`Group::join_result`]
//! once the round completes; a follower's SyncGroup is answered by
//! [`Group::sync_result`] once the leader has synced.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant};

use super::GroupError;
use super::offsets::{self, Committed, JournalRecord, StoredGroup, StoredMember};
use super::sorted_map::SortedMap;
use super::types::{
    CommitOffset, FetchedOffset, GroupDescription, GroupState, JoinGroupMember, JoinGroupRequest,
    JoinGroupResponse, JoinStart, JoinTicket, LeavingMember, ListedGroup, MemberDescription,
    MemberOrigin, OffsetCommitRequest, OffsetCommitResult, SyncGroupRequest, SyncGroupResponse,
};
use crate::config::CoordinatorConfig;

/// One member of a group.
#[derive(Debug, Clone)]
struct Member {
    group_instance_id: Option<String>,
    client_id: String,
    client_host: String,
    protocols: Vec<(String, Vec<u8>)>,
    session_timeout: Duration,
    rebalance_timeout: Duration,
    last_heartbeat: Instant,
    /// Order in which members first joined; the earliest becomes leader.
    joined_seq: u64,
    /// Sequence of the JoinGroup this member is waiting on.
    awaiting_join: Option<u64>,
    /// The answer to that JoinGroup, once the round completed (or it was fenced).
    /// Boxed: set only while an answer waits to be collected.
    join_result: Option<Box<(u64, Result<JoinGroupResponse, GroupError>)>>,
    /// SyncGroup calls waiting for the leader's assignment (the member counts as alive
    /// while one waits, as in Kafka).
    awaiting_sync: u32,
    /// It was answered the current generation's JoinGroup and has not sent SyncGroup
    /// since (Kafka's pending sync): removed if it has not by the group's
    /// `sync_deadline`.
    pending_sync: bool,
    assignment: Vec<u8>,
}

impl Member {
    fn metadata(&self, protocol: &str) -> Vec<u8> {
        self.protocols
            .iter()
            .find(|(n, _)| n == protocol)
            .map(|(_, meta)| meta.clone())
            .unwrap_or_default()
    }

    fn same_protocols(&self, protocols: &[(String, Vec<u8>)]) -> bool {
        self.protocols == protocols
    }
}

/// The first rebalance of an empty group waits this long for more members; each new
/// member extends it by the delay again, up to the round's rebalance timeout (Kafka's
/// `InitialDelayedJoin`).
#[derive(Debug, Clone, Copy)]
struct InitialDelay {
    until: Instant,
    delay: Duration,
    cap: Instant,
}

/// A consumer group: its members, generation, assignment and committed offsets.
#[derive(Debug, Clone)]
pub struct Group {
    id: String,
    state: GroupState,
    protocol_type: Option<String>,
    protocol: Option<String>,
    generation: i32,
    leader: Option<String>,
    members: SortedMap<String, Member>,
    /// Member ids handed out with MEMBER_ID_REQUIRED, not joined yet, with when they
    /// are forgotten if the member does not rejoin (its session timeout, as in Kafka).
    pending: BTreeMap<String, Instant>,
    /// group_instance_id -> member id, for static members.
    instances: BTreeMap<String, String>,
    /// When a PreparingRebalance gives up on members that have not rejoined.
    rebalance_deadline: Option<Instant>,
    /// When the members answered by the last completed JoinGroup round that have not
    /// sent SyncGroup yet are removed (the round's rebalance timeout, as Kafka's
    /// pending-sync expiry).
    sync_deadline: Option<Instant>,
    initial_delay: Option<InitialDelay>,
    offsets: SortedMap<(String, i32), Committed>,
    /// When the group entered its current state (ms since the epoch), as stored.
    state_timestamp_ms: i64,
    /// Counter for join sequence numbers and member ids.
    seq: u64,
    /// Makes member ids unique across coordinator incarnations (restarts, failovers).
    incarnation: u64,
    /// The group's metadata changed in a way that must be stored before answering.
    store_pending: bool,
    /// Bumped each time the group enters PreparingRebalance.
    rebalances: u64,
    /// JoinGroups of static members replaced by a newer instance: (old member id, join
    /// sequence, instance id); their waiters get FENCED_INSTANCE_ID.
    fenced_joins: Vec<(String, u64, String)>,
    /// A static member took over its entry in a Stable group without a rebalance:
    /// (instance id, old member id, new member id), until its metadata is stored.
    pending_replacement: Option<Box<StaticReplacement>>,
    /// What the last stored metadata recorded, if it was such a replacement.
    stored_replacement: Option<Box<StaticReplacement>>,
    /// The replaced member as it was, until the replacement is stored: put back if
    /// storing fails (Kafka reverts the replacement rather than rebalance).
    replaced_member: Option<Box<Member>>,
}

/// A static member's new member id, without a rebalance: (instance id, old member id,
/// new member id).
pub(crate) type StaticReplacement = (String, String, String);

impl Group {
    /// An empty group. `incarnation` makes the member ids this value hands out differ
    /// from those of any other incarnation (give each load of a coordinator its own).
    pub fn new(id: impl Into<String>, incarnation: u64) -> Group {
        Group {
            id: id.into(),
            state: GroupState::Empty,
            protocol_type: None,
            protocol: None,
            generation: 0,
            leader: None,
            members: SortedMap::new(),
            pending: BTreeMap::new(),
            instances: BTreeMap::new(),
            rebalance_deadline: None,
            sync_deadline: None,
            initial_delay: None,
            offsets: SortedMap::new(),
            state_timestamp_ms: -1,
            seq: 0,
            incarnation,
            store_pending: false,
            rebalances: 0,
            fenced_joins: Vec::new(),
            pending_replacement: None,
            stored_replacement: None,
            replaced_member: None,
        }
    }

    /// The group id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The group's state.
    pub fn state(&self) -> GroupState {
        self.state
    }

    /// The current generation.
    pub fn generation(&self) -> i32 {
        self.generation
    }

    /// The leader's member id, if there is a generation.
    pub fn leader(&self) -> Option<&str> {
        self.leader.as_deref()
    }

    /// The chosen protocol (assignor), if there is a generation.
    pub fn protocol(&self) -> Option<&str> {
        self.protocol.as_deref()
    }

    /// The member ids.
    pub fn member_ids(&self) -> Vec<String> {
        self.members.keys().cloned().collect()
    }

    /// The member id of a static member, by its `group.instance.id`.
    pub fn static_member(&self, instance: &str) -> Option<&str> {
        self.instances.get(instance).map(String::as_str)
    }

    /// The assignment bytes of every member of a Stable group (None in other states).
    pub fn assignments(&self) -> Option<BTreeMap<String, Vec<u8>>> {
        (self.state == GroupState::Stable).then(|| {
            self.members
                .iter()
                .map(|(id, m)| (id.clone(), m.assignment.clone()))
                .collect()
        })
    }

    /// How many rebalances the group has started (for waking in-process members).
    pub fn rebalances(&self) -> u64 {
        self.rebalances
    }

    /// True when nothing is left worth keeping: no members, no pending joins, no
    /// offsets.
    pub fn is_forgettable(&self) -> bool {
        self.state == GroupState::Empty
            && self.members.is_empty()
            && self.pending.is_empty()
            && self.offsets.is_empty()
    }

    /// True if the group was ever given a generation (it has metadata stored).
    fn has_stored_metadata(&self) -> bool {
        self.generation > 0 || self.protocol_type.is_some()
    }

    fn next_member_id(&mut self, prefix: &str) -> String {
        self.seq += 1;
        format!("{prefix}-{:08x}-{:08x}", self.incarnation as u32, self.seq)
    }

    // ----- JoinGroup -----------------------------------------------------------------

    /// JoinGroup: validates the request, adds or updates the member and starts (or
    /// joins) a rebalance. `Pending` answers are collected with [`Group::join_result`].
    pub fn join(
        &mut self,
        req: &JoinGroupRequest,
        cfg: &CoordinatorConfig,
        now: Instant,
    ) -> Result<JoinStart, GroupError> {
        validate_join(req, cfg)?;
        if self.state == GroupState::Dead {
            return Err(GroupError::CoordinatorNotAvailable);
        }
        if !self.members.is_empty() {
            self.check_protocols(req)?;
        }
        if req.member_id.is_empty() {
            self.join_without_member_id(req, cfg, now)
        } else {
            self.join_with_member_id(req, cfg, now)
        }
    }

    /// JoinGroup with an empty member id: a static member rejoining after a restart of
    /// its client, or a new member, given its id (and, if the client asks for it, told
    /// to join again with it: MEMBER_ID_REQUIRED).
    fn join_without_member_id(
        &mut self,
        req: &JoinGroupRequest,
        cfg: &CoordinatorConfig,
        now: Instant,
    ) -> Result<JoinStart, GroupError> {
        if let Some(instance) = &req.group_instance_id
            && let Some(old) = self.instances.get(instance).cloned()
        {
            return Ok(self.rejoin_static(req, &old, now));
        }
        if self.members.len() + self.pending.len() >= cfg.max_group_size {
            return Err(GroupError::GroupMaxSizeReached(cfg.max_group_size));
        }
        let prefix = req
            .group_instance_id
            .as_deref()
            .unwrap_or(if req.client_id.is_empty() {
                "member"
            } else {
                req.client_id.as_str()
            })
            .to_string();
        let member_id = self.next_member_id(&prefix);
        if req.require_known_member_id && req.group_instance_id.is_none() {
            self.pending
                .insert(member_id.clone(), now + req.session_timeout);
            return Err(GroupError::MemberIdRequired { member_id });
        }
        Ok(JoinStart::Pending(
            self.add_member(member_id, req, cfg, now),
        ))
    }

    /// JoinGroup with a member id: a member id handed out with MEMBER_ID_REQUIRED, or
    /// a known member rejoining (fenced if its instance has another member id now).
    fn join_with_member_id(
        &mut self,
        req: &JoinGroupRequest,
        cfg: &CoordinatorConfig,
        now: Instant,
    ) -> Result<JoinStart, GroupError> {
        let member_id = req.member_id.clone();
        if let Some(instance) = &req.group_instance_id
            && let Some(current) = self.instances.get(instance)
            && *current != member_id
        {
            return Err(GroupError::FencedInstanceId(instance.clone()));
        }
        if self.pending.remove(&member_id).is_some() {
            return Ok(JoinStart::Pending(
                self.add_member(member_id, req, cfg, now),
            ));
        }
        self.check_member(&member_id, req.group_instance_id.as_deref())?;
        Ok(self.rejoin_known_member(member_id, req, now))
    }

    /// A known member rejoins: answered at once if the round it belongs to goes on,
    /// else it starts (or joins) a rebalance.
    fn rejoin_known_member(
        &mut self,
        member_id: String,
        req: &JoinGroupRequest,
        now: Instant,
    ) -> JoinStart {
        let is_leader = self.leader.as_deref() == Some(member_id.as_str());
        let same = self.members[&member_id].same_protocols(&req.protocols);
        match self.state {
            GroupState::Stable if same && !is_leader => {
                // A follower with unchanged metadata: the generation goes on.
                let m = self.members.get_mut(&member_id).expect("checked above");
                m.last_heartbeat = now;
                return JoinStart::Done(self.current_join_response(&member_id, false));
            }
            GroupState::CompletingRebalance if same => {
                // It lost the JoinGroup answer: give it again.
                let m = self.members.get_mut(&member_id).expect("checked above");
                m.last_heartbeat = now;
                return JoinStart::Done(self.current_join_response(&member_id, is_leader));
            }
            _ => {}
        }
        self.seq += 1;
        let seq = self.seq;
        let m = self.members.get_mut(&member_id).expect("checked above");
        update_member(m, req);
        m.last_heartbeat = now;
        m.awaiting_join = Some(seq);
        m.join_result = None;
        if self.state != GroupState::PreparingRebalance {
            self.prepare_rebalance(now);
        }
        self.try_complete_join(now);
        JoinStart::Pending(JoinTicket {
            group_id: self.id.clone(),
            member_id,
            join_seq: seq,
        })
    }

    fn check_protocols(&self, req: &JoinGroupRequest) -> Result<(), GroupError> {
        if self.protocol_type.as_deref() != Some(req.protocol_type.as_str()) {
            return Err(GroupError::InconsistentGroupProtocol(format!(
                "protocol type {:?} differs from the group's {:?}",
                req.protocol_type,
                self.protocol_type.as_deref().unwrap_or("")
            )));
        }
        let common = self.common_protocols(Some(&req.member_id));
        if !req
            .protocols
            .iter()
            .any(|(name, _)| common.as_ref().is_none_or(|c| c.contains(name)))
        {
            return Err(GroupError::InconsistentGroupProtocol(format!(
                "none of {:?} is supported by every member",
                req.protocols.iter().map(|(n, _)| n).collect::<Vec<_>>()
            )));
        }
        Ok(())
    }

    fn add_member(
        &mut self,
        member_id: String,
        req: &JoinGroupRequest,
        cfg: &CoordinatorConfig,
        now: Instant,
    ) -> JoinTicket {
        self.seq += 1;
        let seq = self.seq;
        let mut member = Member {
            group_instance_id: req.group_instance_id.clone(),
            client_id: req.client_id.clone(),
            client_host: req.client_host.clone(),
            protocols: Vec::new(),
            session_timeout: req.session_timeout,
            rebalance_timeout: req.rebalance_timeout,
            last_heartbeat: now,
            joined_seq: seq,
            awaiting_join: Some(seq),
            join_result: None,
            awaiting_sync: 0,
            pending_sync: false,
            assignment: Vec::new(),
        };
        update_member(&mut member, req);
        if self.members.is_empty() {
            self.protocol_type = Some(req.protocol_type.clone());
        }
        if let Some(instance) = &req.group_instance_id {
            self.instances.insert(instance.clone(), member_id.clone());
        }
        self.members.insert(member_id.clone(), member);
        match self.state {
            GroupState::Empty => {
                let delay = match req.origin {
                    MemberOrigin::Network => cfg.initial_rebalance_delay,
                    MemberOrigin::InProcess => cfg.in_process_initial_rebalance_delay,
                };
                self.prepare_rebalance(now);
                if !delay.is_zero() {
                    let cap = self.rebalance_deadline.unwrap_or(now);
                    self.initial_delay = Some(InitialDelay {
                        until: (now + delay).min(cap),
                        delay,
                        cap,
                    });
                }
            }
            GroupState::PreparingRebalance => {
                // A new member during the initial delay extends it (up to the cap).
                if let Some(d) = &mut self.initial_delay {
                    d.until = (now + d.delay).min(d.cap);
                }
            }
            _ => self.prepare_rebalance(now),
        }
        self.try_complete_join(now);
        JoinTicket {
            group_id: self.id.clone(),
            member_id,
            join_seq: seq,
        }
    }

    /// A static member comes back with an empty member id: it takes over its old entry
    /// under a new member id (the old id is fenced), and keeps its assignment if the
    /// group is Stable and the protocol would not change (KIP-345).
    fn rejoin_static(&mut self, req: &JoinGroupRequest, old_id: &str, now: Instant) -> JoinStart {
        let instance = req.group_instance_id.clone().unwrap_or_default();
        let current_leader = self.leader.clone();
        let new_id = self.next_member_id(&instance);
        let mut member = self
            .members
            .remove(old_id)
            .expect("instances maps to members");
        let before = member.clone();
        if let Some(seq) = member.awaiting_join.take() {
            // A JoinGroup of the replaced instance is still waiting: fence it.
            if self.fenced_joins.len() >= 64 {
                self.fenced_joins.remove(0);
            }
            self.fenced_joins
                .push((old_id.to_string(), seq, instance.clone()));
        }
        member.join_result = None;
        member.awaiting_sync = 0;
        update_member(&mut member, req);
        member.last_heartbeat = now;
        member.client_id = req.client_id.clone();
        member.client_host = req.client_host.clone();
        self.members.insert(new_id.clone(), member);
        if self.leader.as_deref() == Some(old_id) {
            self.leader = Some(new_id.clone());
        }
        self.instances.insert(instance.clone(), new_id.clone());
        let protocol_stays = self.protocol.is_some()
            && self.select_protocol().as_deref() == self.protocol.as_deref();
        match self.state {
            GroupState::Stable if protocol_stays => {
                self.store_pending = true;
                self.pending_replacement =
                    Some(Box::new((instance, old_id.to_string(), new_id.clone())));
                self.replaced_member = Some(Box::new(before));
                let leads = self.leader.as_deref() == Some(new_id.as_str());
                if req.supports_skip_assignment {
                    // JoinGroup v9+: the returning leader learns that it leads (to go on
                    // watching the topics' metadata) but does not assign: the group's
                    // assignment stands.
                    let mut resp = self.current_join_response(&new_id, leads);
                    resp.skip_assignment = leads;
                    return JoinStart::Done(resp);
                }
                // Before v9: the old leader id, so that a returning leader (whose new
                // id differs) acts as a follower and does not compute an assignment a
                // Stable group would not hand out.
                let mut resp = self.current_join_response(&new_id, false);
                resp.leader = current_leader.unwrap_or_default();
                JoinStart::Done(resp)
            }
            _ => {
                self.seq += 1;
                let seq = self.seq;
                let m = self.members.get_mut(&new_id).expect("just inserted");
                m.awaiting_join = Some(seq);
                if self.state != GroupState::PreparingRebalance {
                    self.prepare_rebalance(now);
                }
                self.try_complete_join(now);
                JoinStart::Pending(JoinTicket {
                    group_id: self.id.clone(),
                    member_id: new_id,
                    join_seq: seq,
                })
            }
        }
    }

    fn current_join_response(&self, member_id: &str, with_members: bool) -> JoinGroupResponse {
        let protocol = self.protocol.clone().unwrap_or_default();
        JoinGroupResponse {
            generation_id: self.generation,
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol.clone(),
            leader: self.leader.clone().unwrap_or_default(),
            member_id: member_id.to_string(),
            members: if with_members {
                self.member_list(&protocol)
            } else {
                Vec::new()
            },
            skip_assignment: false,
        }
    }

    fn member_list(&self, protocol: &str) -> Vec<JoinGroupMember> {
        let mut by_join: Vec<(&String, &Member)> = self.members.iter().collect();
        by_join.sort_by_key(|(_, m)| m.joined_seq);
        by_join
            .into_iter()
            .map(|(id, m)| JoinGroupMember {
                member_id: id.clone(),
                group_instance_id: m.group_instance_id.clone(),
                metadata: m.metadata(protocol),
            })
            .collect()
    }

    /// The answer to a pending JoinGroup, once its round completed. `None` while it
    /// waits. Errors: the member was removed or fenced meanwhile, or a newer JoinGroup
    /// of the same member replaced this one.
    pub fn join_result(
        &mut self,
        ticket: &JoinTicket,
        now: Instant,
    ) -> Option<Result<JoinGroupResponse, GroupError>> {
        if let Some(i) = self
            .fenced_joins
            .iter()
            .position(|(id, seq, _)| *id == ticket.member_id && *seq == ticket.join_seq)
        {
            let (_, _, instance) = self.fenced_joins.swap_remove(i);
            return Some(Err(GroupError::FencedInstanceId(instance)));
        }
        let Some(member) = self.members.get_mut(&ticket.member_id) else {
            return Some(Err(GroupError::UnknownMemberId(ticket.member_id.clone())));
        };
        if let Some((seq, _)) = member.join_result.as_deref()
            && *seq == ticket.join_seq
        {
            let (_, resp) = *member.join_result.take()?;
            member.last_heartbeat = now;
            return Some(resp);
        }
        if member.awaiting_join != Some(ticket.join_seq) {
            // A newer JoinGroup of the same member replaced this one.
            return Some(Err(GroupError::UnknownMemberId(ticket.member_id.clone())));
        }
        None
    }

    /// The protocols every member except `except` supports (None when there is no
    /// other member).
    fn common_protocols(&self, except: Option<&str>) -> Option<BTreeSet<String>> {
        let mut common: Option<BTreeSet<String>> = None;
        for (id, m) in &self.members {
            if Some(id.as_str()) == except {
                continue;
            }
            let names: BTreeSet<String> = m.protocols.iter().map(|(n, _)| n.clone()).collect();
            common = Some(match common {
                None => names,
                Some(c) => c.intersection(&names).cloned().collect(),
            });
        }
        common
    }

    /// The protocol the next generation would use: among those every member supports,
    /// each member votes for its most preferred one; most votes wins (ties: the
    /// leader's preference, then name order).
    fn select_protocol(&self) -> Option<String> {
        let common = self.common_protocols(None)?;
        let mut votes: HashMap<&str, usize> = HashMap::new();
        for m in self.members.values() {
            if let Some((name, _)) = m.protocols.iter().find(|(n, _)| common.contains(n)) {
                *votes.entry(name.as_str()).or_default() += 1;
            }
        }
        let best = votes.values().copied().max().unwrap_or(0);
        let prefs: Vec<String> = self
            .leader
            .as_ref()
            .and_then(|l| self.members.get(l))
            .or_else(|| self.members.values().min_by_key(|m| m.joined_seq))
            .map(|m| m.protocols.iter().map(|(n, _)| n.clone()).collect())
            .unwrap_or_default();
        prefs
            .iter()
            .find(|n| votes.get(n.as_str()).copied() == Some(best))
            .cloned()
            .or_else(|| common.iter().next().cloned())
    }

    fn prepare_rebalance(&mut self, now: Instant) {
        if self.state == GroupState::PreparingRebalance {
            return;
        }
        self.rebalance_deadline = Some(now + self.longest_rebalance_timeout());
        self.state = GroupState::PreparingRebalance;
        self.rebalances += 1;
        self.clear_pending_sync();
    }

    /// No member is waited for in SyncGroup any more.
    fn clear_pending_sync(&mut self) {
        self.sync_deadline = None;
        for m in self.members.values_mut() {
            m.pending_sync = false;
        }
    }

    /// The longest rebalance timeout of the members: how long a round waits for them.
    fn longest_rebalance_timeout(&self) -> Duration {
        self.members
            .values()
            .map(|m| m.rebalance_timeout)
            .max()
            .unwrap_or(Duration::ZERO)
    }

    /// Completes the PreparingRebalance phase if every known member (and every member
    /// id handed out with MEMBER_ID_REQUIRED) has joined, or the deadline passed.
    /// Returns true if it completed.
    fn try_complete_join(&mut self, now: Instant) -> bool {
        if !self.join_round_over(now) {
            return false;
        }
        self.remove_laggards();
        if !self.members.is_empty() && self.members.values().all(|m| m.awaiting_join.is_none()) {
            // Only static members that have not rejoined are left: wait for them (their
            // session timeout removes them if they are gone), as Kafka does.
            self.rebalance_deadline = Some(now + self.longest_rebalance_timeout());
            return false;
        }
        self.generation += 1;
        self.rebalance_deadline = None;
        if self.members.is_empty() {
            self.become_empty();
            return true;
        }
        let protocol = self.select_protocol().unwrap_or_default();
        let leader = self.choose_leader();
        self.protocol = Some(protocol.clone());
        self.leader = Some(leader.clone());
        self.state = GroupState::CompletingRebalance;
        self.answer_joined_members(&protocol, &leader, now);
        true
    }

    /// True if a PreparingRebalance round may complete now: past the initial delay of a
    /// new group (which then ends), and every member has joined or the deadline passed.
    fn join_round_over(&mut self, now: Instant) -> bool {
        if self.state != GroupState::PreparingRebalance {
            return false;
        }
        if let Some(d) = self.initial_delay {
            if now < d.until {
                return false;
            }
            self.initial_delay = None;
        }
        let all_joined =
            self.members.values().all(|m| m.awaiting_join.is_some()) && self.pending.is_empty();
        let past_deadline = self.rebalance_deadline.is_some_and(|d| now >= d);
        all_joined || past_deadline
    }

    /// At the end of a round: dynamic members that did not rejoin in time are dropped;
    /// static ones stay (their session timeout decides), as in Kafka.
    fn remove_laggards(&mut self) {
        self.members
            .retain(|_, m| m.awaiting_join.is_some() || m.group_instance_id.is_some());
    }

    /// The new generation's leader: the leader stays if it rejoined; else the earliest
    /// member that did.
    fn choose_leader(&self) -> String {
        match &self.leader {
            Some(l)
                if self
                    .members
                    .get(l)
                    .is_some_and(|m| m.awaiting_join.is_some()) =>
            {
                l.clone()
            }
            _ => self
                .members
                .iter()
                .filter(|(_, m)| m.awaiting_join.is_some())
                .min_by_key(|(_, m)| m.joined_seq)
                .map(|(id, _)| id.clone())
                .unwrap_or_default(),
        }
    }

    /// Gives each member that joined the round its JoinGroup answer: the new
    /// generation, and to the leader the member list. Every member keeps the
    /// assignment of the last Stable generation (what it may still hold) until the
    /// leader's SyncGroup replaces it.
    fn answer_joined_members(&mut self, protocol: &str, leader: &str, now: Instant) {
        let all_members = self.member_list(protocol);
        let generation = self.generation;
        let protocol_type = self.protocol_type.clone();
        for (id, m) in self.members.iter_mut() {
            let Some(seq) = m.awaiting_join.take() else {
                continue;
            };
            let resp = JoinGroupResponse {
                generation_id: generation,
                protocol_type: protocol_type.clone(),
                protocol_name: Some(protocol.to_string()),
                leader: leader.to_string(),
                member_id: id.clone(),
                members: if id == leader {
                    all_members.clone()
                } else {
                    Vec::new()
                },
                skip_assignment: false,
            };
            m.join_result = Some(Box::new((seq, Ok(resp))));
            m.last_heartbeat = now;
            m.pending_sync = true;
        }
        self.sync_deadline = Some(now + self.longest_rebalance_timeout());
    }

    fn become_empty(&mut self) {
        self.members.clear();
        self.instances.clear();
        self.state = GroupState::Empty;
        self.protocol = None;
        self.leader = None;
        self.rebalance_deadline = None;
        self.sync_deadline = None;
        self.initial_delay = None;
        self.store_pending = true;
    }

    fn remove_member(&mut self, member_id: &str, now: Instant) {
        let Some(m) = self.members.remove(member_id) else {
            return;
        };
        if let Some(instance) = &m.group_instance_id
            && self.instances.get(instance).map(String::as_str) == Some(member_id)
        {
            self.instances.remove(instance);
        }
        if self.leader.as_deref() == Some(member_id) {
            self.leader = None;
        }
        match self.state {
            GroupState::Stable | GroupState::CompletingRebalance => {
                if self.members.is_empty() {
                    self.generation += 1;
                    self.become_empty();
                } else {
                    self.prepare_rebalance(now);
                }
            }
            GroupState::PreparingRebalance => {
                self.try_complete_join(now);
            }
            GroupState::Empty | GroupState::Dead => {}
        }
    }

    // ----- SyncGroup, Heartbeat, LeaveGroup ------------------------------------------

    /// Checks that `member_id` belongs to the group and is not fenced by a newer
    /// instance of the same static member, as Kafka's `validateCurrentMember`: an
    /// instance id mapped to another member id is fenced, one the group does not know
    /// is an unknown member.
    fn check_member(&self, member_id: &str, instance: Option<&str>) -> Result<(), GroupError> {
        if let Some(instance) = instance {
            match self.instances.get(instance) {
                Some(current) if current != member_id => {
                    return Err(GroupError::FencedInstanceId(instance.to_string()));
                }
                Some(_) => {}
                None => return Err(GroupError::UnknownMemberId(member_id.to_string())),
            }
        }
        if self.members.contains_key(member_id) {
            Ok(())
        } else {
            Err(GroupError::UnknownMemberId(member_id.to_string()))
        }
    }

    fn check_generation(&self, given: i32) -> Result<(), GroupError> {
        if given == self.generation {
            Ok(())
        } else {
            Err(GroupError::IllegalGeneration {
                given,
                current: self.generation,
            })
        }
    }

    /// SyncGroup. The leader's call (in CompletingRebalance) stores every member's
    /// assignment and makes the group Stable (the caller then persists
    /// [`take_pending_store`](Self::take_pending_store) before answering). `Ok(None)`:
    /// a follower must wait for the leader; ask again with
    /// [`sync_result`](Self::sync_result), and call
    /// [`end_sync_wait`](Self::end_sync_wait) when giving up.
    pub fn sync(
        &mut self,
        req: &SyncGroupRequest,
        now: Instant,
    ) -> Result<Option<SyncGroupResponse>, GroupError> {
        if self.state == GroupState::Dead {
            return Err(GroupError::CoordinatorNotAvailable);
        }
        self.check_member(&req.member_id, req.group_instance_id.as_deref())?;
        self.check_generation(req.generation_id)?;
        if req
            .protocol_type
            .as_ref()
            .is_some_and(|p| self.protocol_type.as_ref() != Some(p))
            || req
                .protocol_name
                .as_ref()
                .is_some_and(|p| self.protocol.as_ref() != Some(p))
        {
            return Err(GroupError::InconsistentGroupProtocol(
                "SyncGroup names another protocol than the group's".into(),
            ));
        }
        match self.state {
            GroupState::PreparingRebalance => return Err(GroupError::RebalanceInProgress),
            GroupState::Empty | GroupState::Dead => {
                return Err(GroupError::UnknownMemberId(req.member_id.clone()));
            }
            GroupState::CompletingRebalance => {
                if let Some(m) = self.members.get_mut(&req.member_id) {
                    m.last_heartbeat = now;
                }
                if self.leader.as_deref() == Some(req.member_id.as_str()) {
                    let given: HashMap<&str, &Vec<u8>> = req
                        .assignments
                        .iter()
                        .map(|(id, a)| (id.as_str(), a))
                        .collect();
                    for (id, m) in self.members.iter_mut() {
                        m.assignment = given
                            .get(id.as_str())
                            .map(|a| (*a).clone())
                            .unwrap_or_default();
                    }
                    self.state = GroupState::Stable;
                    self.store_pending = true;
                }
            }
            GroupState::Stable => {}
        }
        let m = self
            .members
            .get_mut(&req.member_id)
            .expect("checked member");
        m.last_heartbeat = now;
        m.pending_sync = false;
        if self.state == GroupState::Stable {
            return Ok(Some(SyncGroupResponse {
                protocol_type: self.protocol_type.clone(),
                protocol_name: self.protocol.clone(),
                assignment: m.assignment.clone(),
            }));
        }
        m.awaiting_sync += 1;
        Ok(None)
    }

    /// A follower's wait in SyncGroup for `generation`: the answer once the leader
    /// synced, an error if the group moved on, `None` while it waits.
    pub fn sync_result(
        &mut self,
        member_id: &str,
        instance: Option<&str>,
        generation: i32,
        now: Instant,
    ) -> Option<Result<SyncGroupResponse, GroupError>> {
        if let Err(e) = self.check_member(member_id, instance) {
            return Some(Err(e));
        }
        if self.generation != generation
            || matches!(
                self.state,
                GroupState::PreparingRebalance | GroupState::Empty
            )
        {
            return Some(Err(GroupError::RebalanceInProgress));
        }
        let m = self.members.get_mut(member_id)?;
        m.last_heartbeat = now;
        (self.state == GroupState::Stable).then(|| {
            Ok(SyncGroupResponse {
                protocol_type: self.protocol_type.clone(),
                protocol_name: self.protocol.clone(),
                assignment: m.assignment.clone(),
            })
        })
    }

    /// A SyncGroup wait of `member_id` ended (answered or given up).
    pub fn end_sync_wait(&mut self, member_id: &str, now: Instant) {
        if let Some(m) = self.members.get_mut(member_id) {
            m.awaiting_sync = m.awaiting_sync.saturating_sub(1);
            m.last_heartbeat = now;
        }
    }

    /// Heartbeat: keeps the member's session alive. `RebalanceInProgress` when the
    /// member must rejoin.
    pub fn heartbeat(
        &mut self,
        generation_id: i32,
        member_id: &str,
        instance: Option<&str>,
        now: Instant,
    ) -> Result<(), GroupError> {
        match self.state {
            GroupState::Dead => return Err(GroupError::CoordinatorNotAvailable),
            GroupState::Empty => return Err(GroupError::UnknownMemberId(member_id.to_string())),
            _ => {}
        }
        self.check_member(member_id, instance)?;
        self.check_generation(generation_id)?;
        if let Some(m) = self.members.get_mut(member_id) {
            m.last_heartbeat = now;
        }
        match self.state {
            GroupState::PreparingRebalance => Err(GroupError::RebalanceInProgress),
            _ => Ok(()),
        }
    }

    /// LeaveGroup: removes the members (by member id, or by instance id for static
    /// members, LeaveGroup v3+) and starts a rebalance for the rest. One result per
    /// member named.
    pub fn leave(
        &mut self,
        members: &[LeavingMember],
        now: Instant,
    ) -> Vec<Result<(), GroupError>> {
        members
            .iter()
            .map(|m| {
                if self.state == GroupState::Dead {
                    return Err(GroupError::CoordinatorNotAvailable);
                }
                let id = match (&m.group_instance_id, m.member_id.is_empty()) {
                    (Some(instance), true) => match self.instances.get(instance) {
                        Some(id) => id.clone(),
                        None => return Err(GroupError::UnknownMemberId(String::new())),
                    },
                    _ => m.member_id.clone(),
                };
                if self.pending.remove(&id).is_some() {
                    return Ok(());
                }
                self.check_member(&id, m.group_instance_id.as_deref())?;
                self.remove_member(&id, now);
                Ok(())
            })
            .collect()
    }

    // ----- Offsets --------------------------------------------------------------------

    /// Checks that an OffsetCommit may be made: by a member of the current generation
    /// (while the group is Stable or PreparingRebalance, so that a member can commit in
    /// its "partitions revoked" callback), or by a standalone consumer (generation < 0,
    /// no member id) while the group has no members.
    pub fn check_commit(
        &mut self,
        req: &OffsetCommitRequest,
        now: Instant,
    ) -> Result<(), GroupError> {
        if self.state == GroupState::Dead {
            return Err(GroupError::CoordinatorNotAvailable);
        }
        // A negative generation commits to an empty group whatever member id comes
        // with it (Kafka's rule: an admin client, or a consumer that assigns itself
        // partitions, such as a KIP-848 client with a member id of its own).
        if req.generation_id < 0 && self.members.is_empty() {
            return Ok(());
        }
        let simple =
            req.generation_id < 0 && req.member_id.is_empty() && req.group_instance_id.is_none();
        if simple {
            return if self.members.is_empty() {
                Ok(())
            } else {
                Err(GroupError::UnknownMemberId(String::new()))
            };
        }
        self.check_member(&req.member_id, req.group_instance_id.as_deref())?;
        self.check_generation(req.generation_id)?;
        if self.state == GroupState::CompletingRebalance {
            return Err(GroupError::RebalanceInProgress);
        }
        if let Some(m) = self.members.get_mut(&req.member_id) {
            m.last_heartbeat = now;
        }
        Ok(())
    }

    /// Checks that a TxnOffsetCommit may be made (Kafka's `doTxnCommitOffsets`,
    /// KIP-447): a static instance now used by another member id is fenced, a member id
    /// other than "" must be a member, and a generation other than a negative one must
    /// be the group's. A producer without group information (generation -1, no member
    /// id) always may; the group's state does not matter otherwise.
    pub fn check_txn_commit(
        &self,
        generation_id: i32,
        member_id: &str,
        group_instance_id: Option<&str>,
    ) -> Result<(), GroupError> {
        if self.state == GroupState::Dead {
            return Err(GroupError::CoordinatorNotAvailable);
        }
        if let Some(instance) = group_instance_id
            && let Some(current) = self.instances.get(instance)
            && current != member_id
        {
            return Err(GroupError::FencedInstanceId(instance.to_string()));
        }
        if !member_id.is_empty() && !self.members.contains_key(member_id) {
            return Err(GroupError::UnknownMemberId(member_id.to_string()));
        }
        if generation_id >= 0 {
            self.check_generation(generation_id)?;
        }
        Ok(())
    }

    /// Validates each offset (metadata size) and prepares the records to journal.
    /// Returns the per-partition results and the records of the accepted ones, which
    /// [`apply_commit`](Self::apply_commit) stores once they are journaled.
    pub fn prepare_commit(
        &self,
        offsets: &[CommitOffset],
        cfg: &CoordinatorConfig,
        wall_ms: i64,
    ) -> (Vec<OffsetCommitResult>, PreparedCommit) {
        let mut results = Vec::with_capacity(offsets.len());
        let mut accepted = Vec::with_capacity(offsets.len());
        for o in offsets {
            let len = o.metadata.as_ref().map_or(0, String::len);
            let result = if len > cfg.offset_metadata_max_bytes {
                Err(GroupError::OffsetMetadataTooLarge {
                    len,
                    max: cfg.offset_metadata_max_bytes,
                })
            } else if o.partition < 0 || o.topic.is_empty() {
                Err(GroupError::UnknownTopicOrPartition {
                    topic: o.topic.clone(),
                    partition: o.partition,
                })
            } else {
                accepted.push((
                    o.topic.clone(),
                    o.partition,
                    Committed {
                        offset: o.offset,
                        leader_epoch: o.leader_epoch,
                        metadata: o.metadata.clone().unwrap_or_default(),
                        commit_timestamp: o.commit_timestamp.unwrap_or(wall_ms),
                    },
                ));
                Ok(())
            };
            results.push(OffsetCommitResult {
                topic: o.topic.clone(),
                partition: o.partition,
                result,
            });
        }
        (results, PreparedCommit { accepted })
    }

    /// Stores journaled offsets.
    pub fn apply_commit(&mut self, prepared: PreparedCommit) {
        for (t, p, c) in prepared.accepted {
            self.offsets.insert((t, p), c);
        }
    }

    /// The records of a prepared commit, to append to the journal.
    pub fn commit_records(&self, prepared: &PreparedCommit) -> Vec<JournalRecord> {
        prepared
            .accepted
            .iter()
            .map(|(t, p, c)| {
                (
                    offsets::encode_key(&self.id, t, *p),
                    Some(offsets::encode_value(c)),
                )
            })
            .collect()
    }

    /// The committed offsets for `partitions`, or every one when None. Partitions
    /// without a commit answer offset -1.
    pub fn fetch_offsets(&self, partitions: Option<&[(String, i32)]>) -> Vec<FetchedOffset> {
        let fetched = |t: &str, p: i32, c: Option<&Committed>| FetchedOffset {
            topic: t.to_string(),
            partition: p,
            offset: c.map_or(-1, |c| c.offset),
            leader_epoch: c.map_or(-1, |c| c.leader_epoch),
            metadata: c.map(|c| c.metadata.clone()).unwrap_or_default(),
        };
        match partitions {
            Some(list) => list
                .iter()
                .map(|(t, p)| fetched(t, *p, self.offsets.get(&(t.clone(), *p))))
                .collect(),
            None => self
                .offsets
                .iter()
                .map(|((t, p), c)| fetched(t, *p, Some(c)))
                .collect(),
        }
    }

    /// The topics the group's members subscribe to (decoded from their
    /// `ConsumerProtocol` metadata for the group's protocol).
    fn subscribed_topics(&self) -> BTreeSet<String> {
        let protocol = self.protocol.clone().unwrap_or_default();
        self.members
            .values()
            .flat_map(|m| {
                let meta = match &self.protocol {
                    Some(_) => m.metadata(&protocol),
                    None => m
                        .protocols
                        .first()
                        .map(|(_, b)| b.clone())
                        .unwrap_or_default(),
                };
                super::protocol::Subscription::decode(&meta)
                    .map(|s| s.topics)
                    .unwrap_or_default()
            })
            .collect()
    }

    /// OffsetDelete: which of `partitions` may be deleted (not subscribed to by a live
    /// consumer group), with the per-partition refusals. Group-level errors: the group
    /// is unknown or dead (`GroupIdNotFound`), or is a non-consumer group with members
    /// (`NonEmptyGroup`).
    pub fn prepare_offset_delete(
        &self,
        partitions: &[(String, i32)],
    ) -> Result<PreparedOffsetDelete, GroupError> {
        if self.state == GroupState::Dead {
            return Err(GroupError::GroupIdNotFound);
        }
        let subscribed = if self.members.is_empty() {
            BTreeSet::new()
        } else if self.protocol_type.as_deref() == Some("consumer") {
            self.subscribed_topics()
        } else {
            return Err(GroupError::NonEmptyGroup);
        };
        let mut results = Vec::with_capacity(partitions.len());
        let mut records = Vec::new();
        for (t, p) in partitions {
            if subscribed.contains(t) {
                results.push(Err(GroupError::GroupSubscribedToTopic(t.clone())));
            } else {
                if self.offsets.contains_key(&(t.clone(), *p)) {
                    records.push((offsets::encode_key(&self.id, t, *p), None));
                }
                results.push(Ok(()));
            }
        }
        Ok((results, records))
    }

    /// Forgets offsets (after their tombstones were journaled).
    pub fn remove_offsets(&mut self, partitions: &[(String, i32)]) {
        for (t, p) in partitions {
            self.offsets.remove(&(t.clone(), *p));
        }
    }

    // ----- Deletion, description ------------------------------------------------------

    /// DeleteGroups: refuses a group with members; otherwise the tombstones of its
    /// offsets and its metadata, to journal before [`mark_dead`](Self::mark_dead).
    pub fn prepare_delete(&self) -> Result<Vec<JournalRecord>, GroupError> {
        if self.state == GroupState::Dead {
            return Err(GroupError::GroupIdNotFound);
        }
        if !self.members.is_empty() || !self.pending.is_empty() {
            return Err(GroupError::NonEmptyGroup);
        }
        let mut records: Vec<JournalRecord> = self
            .offsets
            .keys()
            .map(|(t, p)| (offsets::encode_key(&self.id, t, *p), None))
            .collect();
        if self.has_stored_metadata() {
            records.push((offsets::encode_group_key(&self.id), None));
        }
        Ok(records)
    }

    /// The group is gone (deleted): every later call on it answers as for a dead group.
    pub fn mark_dead(&mut self) {
        self.state = GroupState::Dead;
        self.offsets.clear();
        self.store_pending = false;
    }

    /// The group as ListGroups shows it.
    pub fn listed(&self) -> ListedGroup {
        ListedGroup {
            group_id: self.id.clone(),
            protocol_type: self.protocol_type.clone().unwrap_or_default(),
            state: self.state,
        }
    }

    /// The group as DescribeGroups shows it.
    pub fn describe(&self) -> GroupDescription {
        let protocol = self.protocol.clone().unwrap_or_default();
        let stable = self.state == GroupState::Stable;
        GroupDescription {
            group_id: self.id.clone(),
            state: self.state,
            protocol_type: self.protocol_type.clone().unwrap_or_default(),
            protocol_data: if stable {
                protocol.clone()
            } else {
                String::new()
            },
            generation_id: self.generation,
            leader: self.leader.clone().unwrap_or_default(),
            members: self
                .members
                .iter()
                .map(|(id, m)| MemberDescription {
                    member_id: id.clone(),
                    group_instance_id: m.group_instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    metadata: if stable {
                        m.metadata(&protocol)
                    } else {
                        Vec::new()
                    },
                    assignment: if stable {
                        m.assignment.clone()
                    } else {
                        Vec::new()
                    },
                })
                .collect(),
        }
    }

    // ----- Time -----------------------------------------------------------------------

    /// Expires sessions and member ids handed out with MEMBER_ID_REQUIRED, ends a
    /// rebalance past its deadline or initial delay. Returns the next instant at which
    /// something may time out.
    pub fn tick(&mut self, now: Instant) -> Option<Instant> {
        self.pending.retain(|_, until| *until > now);
        self.expire_pending_sync(now);
        let expired: Vec<String> = self
            .members
            .iter()
            .filter(|(_, m)| {
                m.awaiting_join.is_none()
                    && m.awaiting_sync == 0
                    && now >= m.last_heartbeat + m.session_timeout
            })
            .map(|(id, _)| id.clone())
            .collect();
        for id in expired {
            self.remove_member(&id, now);
        }
        self.try_complete_join(now);
        let mut next: Option<Instant> = None;
        let mut soonest = |t: Instant| next = Some(next.map_or(t, |n: Instant| n.min(t)));
        for until in self.pending.values() {
            soonest(*until);
        }
        for m in self.members.values() {
            if m.awaiting_join.is_none() && m.awaiting_sync == 0 {
                soonest(m.last_heartbeat + m.session_timeout);
            }
        }
        for d in [self.rebalance_deadline, self.sync_deadline]
            .into_iter()
            .flatten()
        {
            soonest(d);
        }
        if let Some(d) = self.initial_delay {
            soonest(d.until);
        }
        next
    }

    /// Past the sync deadline, removes the members that joined the round but did not
    /// send SyncGroup (even if they heartbeat) and starts a rebalance for the others,
    /// as Kafka's pending-sync expiry.
    fn expire_pending_sync(&mut self, now: Instant) {
        if self.sync_deadline.is_none_or(|d| now < d) {
            return;
        }
        self.sync_deadline = None;
        if !matches!(
            self.state,
            GroupState::CompletingRebalance | GroupState::Stable
        ) {
            return;
        }
        let silent: Vec<String> = self
            .members
            .iter()
            .filter(|(_, m)| m.pending_sync)
            .map(|(id, _)| id.clone())
            .collect();
        for id in silent {
            self.remove_member(&id, now);
        }
    }

    /// Removes a member as if its session had expired.
    pub fn expire_member(&mut self, member_id: &str, now: Instant) {
        self.remove_member(member_id, now);
    }

    // ----- Persistence ----------------------------------------------------------------

    /// The group's metadata record, if a transition asked for it to be stored since
    /// the last call (a completed generation, an emptied group, a static member's new
    /// id). `wall_ms` is stamped as the state's timestamp.
    pub fn take_pending_store(&mut self, wall_ms: i64) -> Option<JournalRecord> {
        let replacement = self.pending_replacement.take();
        if !std::mem::take(&mut self.store_pending) || self.state == GroupState::Dead {
            self.replaced_member = None;
            return None;
        }
        if replacement.is_none() {
            self.replaced_member = None;
        }
        self.stored_replacement = replacement;
        self.state_timestamp_ms = wall_ms;
        let protocol = self.protocol.clone().unwrap_or_default();
        let stored = StoredGroup {
            protocol_type: self.protocol_type.clone().unwrap_or_default(),
            generation: self.generation,
            protocol: self.protocol.clone(),
            leader: self.leader.clone(),
            current_state_timestamp: wall_ms,
            members: if self.state == GroupState::Stable {
                self.members
                    .iter()
                    .map(|(id, m)| StoredMember {
                        member_id: id.clone(),
                        group_instance_id: m.group_instance_id.clone(),
                        client_id: m.client_id.clone(),
                        client_host: m.client_host.clone(),
                        rebalance_timeout_ms: duration_ms(m.rebalance_timeout),
                        session_timeout_ms: duration_ms(m.session_timeout),
                        subscription: m.metadata(&protocol),
                        assignment: m.assignment.clone(),
                    })
                    .collect()
            } else {
                Vec::new()
            },
        };
        Some((
            offsets::encode_group_key(&self.id),
            Some(offsets::encode_group_value(&stored)),
        ))
    }

    /// Storing the metadata failed: the generation cannot be trusted to survive a
    /// restart, so its members rejoin; a static member's new id that could not be
    /// stored is undone instead (the old id is the member again, no rebalance), as
    /// Kafka does, and the joining instance is refused.
    pub fn store_failed(&mut self, now: Instant) {
        if let (Some((instance, old, new)), Some(member)) = (
            self.stored_replacement.take().map(|r| *r),
            self.replaced_member.take(),
        ) && self.members.remove(&new).is_some()
        {
            self.members.insert(old.clone(), *member);
            if self.leader.as_deref() == Some(new.as_str()) {
                self.leader = Some(old.clone());
            }
            self.instances.insert(instance, old);
            return;
        }
        if !self.members.is_empty() {
            self.prepare_rebalance(now);
        }
    }

    /// A group read back from its stored metadata: a Stable generation with the
    /// stored members (each given a full session from `now`), or an Empty group.
    fn restore(&mut self, stored: StoredGroup, now: Instant) {
        self.protocol_type = (!stored.protocol_type.is_empty()).then_some(stored.protocol_type);
        self.generation = stored.generation;
        self.protocol = stored.protocol;
        self.leader = stored.leader;
        self.state_timestamp_ms = stored.current_state_timestamp;
        self.members.clear();
        self.instances.clear();
        self.pending.clear();
        self.rebalance_deadline = None;
        self.sync_deadline = None;
        self.initial_delay = None;
        let protocol = self.protocol.clone().unwrap_or_default();
        for (i, m) in stored.members.into_iter().enumerate() {
            if let Some(instance) = &m.group_instance_id {
                self.instances.insert(instance.clone(), m.member_id.clone());
            }
            let session = Duration::from_millis(m.session_timeout_ms.max(0) as u64);
            self.members.insert(
                m.member_id,
                Member {
                    group_instance_id: m.group_instance_id,
                    client_id: m.client_id,
                    client_host: m.client_host,
                    protocols: vec![(protocol.clone(), m.subscription)],
                    session_timeout: session,
                    rebalance_timeout: Duration::from_millis(m.rebalance_timeout_ms.max(0) as u64),
                    last_heartbeat: now,
                    joined_seq: i as u64,
                    awaiting_join: None,
                    join_result: None,
                    awaiting_sync: 0,
                    pending_sync: false,
                    assignment: m.assignment,
                },
            );
        }
        self.seq = self.members.len() as u64;
        self.state = if self.members.is_empty() {
            self.leader = None;
            self.protocol = None;
            GroupState::Empty
        } else {
            GroupState::Stable
        };
    }

    /// The static member whose new member id the metadata last taken by
    /// [`take_pending_store`](Self::take_pending_store) records, if that was all it
    /// recorded (no rebalance). Read only by the log line of `tidelog serve`.
    #[cfg(feature = "server")]
    pub(crate) fn stored_replacement(&self) -> Option<&StaticReplacement> {
        self.stored_replacement.as_deref()
    }

    /// When the group entered its current state (ms since the epoch, -1 if unknown).
    pub fn state_timestamp_ms(&self) -> i64 {
        self.state_timestamp_ms
    }

    /// Offsets of an Empty group whose state is older than `retention` (at wall
    /// clock `wall_ms`) expire with the group (Kafka's `offsets.retention.minutes`
    /// for groups without members, KIP-211): the tombstones to journal, or None.
    pub fn expired_records(&self, retention: Duration, wall_ms: i64) -> Option<Vec<JournalRecord>> {
        if self.state != GroupState::Empty || !self.pending.is_empty() {
            return None;
        }
        let since = if self.state_timestamp_ms >= 0 {
            self.state_timestamp_ms
        } else {
            self.offsets.values().map(|c| c.commit_timestamp).max()?
        };
        if wall_ms.saturating_sub(since) < retention.as_millis() as i64 {
            return None;
        }
        self.prepare_delete().ok()
    }
}

/// OffsetDelete's per-partition results and the tombstones to journal.
pub type PreparedOffsetDelete = (Vec<Result<(), GroupError>>, Vec<JournalRecord>);

/// An OffsetCommit's accepted offsets, between journaling and applying.
#[derive(Debug)]
pub struct PreparedCommit {
    accepted: Vec<(String, i32, Committed)>,
}

impl PreparedCommit {
    /// True if no offset was accepted.
    pub fn is_empty(&self) -> bool {
        self.accepted.is_empty()
    }

    /// The accepted offsets: (topic, partition, offset).
    pub(crate) fn accepted(&self) -> &[(String, i32, Committed)] {
        &self.accepted
    }

    /// Offsets to store as they are (a transaction's, once it committed).
    pub(crate) fn of(accepted: Vec<(String, i32, Committed)>) -> Self {
        PreparedCommit { accepted }
    }
}

fn duration_ms(d: Duration) -> i32 {
    d.as_millis().min(i32::MAX as u128) as i32
}

fn update_member(m: &mut Member, req: &JoinGroupRequest) {
    m.protocols = req.protocols.clone();
    m.session_timeout = req.session_timeout;
    // JoinGroup v0 has no rebalance timeout: Kafka uses the session timeout.
    m.rebalance_timeout = if req.rebalance_timeout.is_zero() {
        req.session_timeout
    } else {
        req.rebalance_timeout
    };
}

/// The checks of a JoinGroup that need no group state.
pub(crate) fn validate_join(
    req: &JoinGroupRequest,
    cfg: &CoordinatorConfig,
) -> Result<(), GroupError> {
    if req.group_id.is_empty() {
        return Err(GroupError::InvalidGroupId(req.group_id.clone()));
    }
    if req.session_timeout < cfg.min_session_timeout
        || req.session_timeout > cfg.max_session_timeout
    {
        return Err(GroupError::InvalidSessionTimeout(req.session_timeout));
    }
    if req.protocol_type.is_empty() || req.protocols.is_empty() {
        return Err(GroupError::InconsistentGroupProtocol(
            "JoinGroup names no protocol type or no protocol".into(),
        ));
    }
    Ok(())
}

/// Replays `__consumer_offsets` records, oldest first, into the groups they describe
/// (latest record per key wins; tombstones delete). Stored generations are restored
/// Stable with their members, each given a full session from `now`, so that members
/// go on with their old ids and generation. `incarnation` makes the member ids the
/// loaded groups hand out new (see [`Group::new`]).
pub fn load_groups(
    records: impl IntoIterator<Item = JournalRecord>,
    now: Instant,
    incarnation: u64,
) -> crate::error::Result<BTreeMap<String, Group>> {
    let mut entries = Vec::new();
    for (key, value) in records {
        if let Some(e) = offsets::decode(&key, value.as_deref())? {
            entries.push(e);
        }
    }
    Ok(groups_from_entries(entries, now, incarnation))
}

pub(crate) fn groups_from_entries(
    entries: Vec<offsets::Entry>,
    now: Instant,
    incarnation: u64,
) -> BTreeMap<String, Group> {
    let mut groups: BTreeMap<String, Group> = BTreeMap::new();
    let mut stored: BTreeMap<String, Option<StoredGroup>> = BTreeMap::new();
    for entry in entries {
        match entry {
            offsets::Entry::Commit {
                group,
                topic,
                partition,
                value,
            } => {
                groups
                    .entry(group.clone())
                    .or_insert_with(|| Group::new(&group, incarnation))
                    .offsets
                    .insert((topic, partition), value);
            }
            offsets::Entry::Delete {
                group,
                topic,
                partition,
            } => {
                if let Some(g) = groups.get_mut(&group) {
                    g.offsets.remove(&(topic, partition));
                }
            }
            offsets::Entry::Group { group, value } => {
                groups
                    .entry(group.clone())
                    .or_insert_with(|| Group::new(&group, incarnation));
                stored.insert(group, Some(value));
            }
            offsets::Entry::DeleteGroup { group } => {
                // Kafka writes the group tombstone after its offsets' tombstones: the
                // group is gone with everything it had.
                groups.remove(&group);
                stored.insert(group, None);
            }
        }
    }
    for (id, value) in stored {
        if let (Some(value), Some(g)) = (value, groups.get_mut(&id)) {
            g.restore(value, now);
        }
    }
    groups.retain(|_, g| !g.is_forgettable() || g.has_stored_metadata());
    groups
}

#[path = "group_convert.rs"]
mod convert;
pub(crate) use convert::MigratingMember;
