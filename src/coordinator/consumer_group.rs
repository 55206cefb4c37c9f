//! One consumer-protocol group (KIP-848) as a pure state machine: the broker computes
//! the assignment and each member reconciles toward it through its heartbeats, with no
//! stop-the-world rebalance. No threads, no locks and no clock of its own: every
//! transition takes the request and an explicit `now` and returns an outcome or a
//! [`GroupError`].
//!
//! # Epochs
//!
//! The **group epoch** is bumped whenever the inputs of the assignment change: a member
//! joins or leaves (or times out), a subscription or the preferred assignor changes, or
//! a subscribed topic appears, disappears or gains partitions. The **target
//! assignment** is then recomputed by the server-side assignor and stamped with that
//! epoch (the assignment epoch). Each member has its own **member epoch**: the epoch of
//! the target assignment it has reconciled to.
//!
//! # Reconciliation
//!
//! A member moves toward its target in steps, on its heartbeats:
//!
//! 1. partitions it owns that the target takes away are **revoked** first: its
//!    assignment shrinks to what it keeps, its epoch stays, and it must acknowledge by
//!    heartbeating with owned partitions that no longer hold them (or be removed once
//!    its rebalance timeout passes);
//! 2. then it takes the new epoch and the target's partitions that no other member
//!    still owns; partitions another member has not released yet are given on a later
//!    heartbeat, once released.
//!
//! So a partition is never in two members' current assignments at once.
//!
//! # Fencing
//!
//! A heartbeat with an epoch ahead of the member's, or behind it other than the
//! previous epoch with nothing more than its assignment (a lost response), answers
//! `FENCED_MEMBER_EPOCH`; an unknown member id `UNKNOWN_MEMBER_ID`. A static member
//! (`instance_id`) that leaves with epoch -2 keeps its assignment until its session
//! times out; a new member with the same instance id takes it over, and is refused
//! with `UNRELEASED_INSTANCE_ID` while the old one has not left.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use super::GroupError;
use super::consumer_types::{
    ConsumerGroupDescription, ConsumerGroupState, ConsumerHeartbeatRequest,
    ConsumerHeartbeatResponse, ConsumerMemberDescription, TopicPartitionList,
};
use super::server_assignor::{self, Assignment};
use crate::config::CoordinatorConfig;

/// The epoch a member sends to join.
pub const JOIN_EPOCH: i32 = 0;
/// The epoch a member sends to leave the group.
pub const LEAVE_EPOCH: i32 = -1;
/// The epoch a static member sends to leave temporarily (it keeps its assignment
/// until its session times out).
pub const STATIC_LEAVE_EPOCH: i32 = -2;

/// Every topic of the cluster with its partition count, as the coordinator sees it on
/// a heartbeat (the shell passes the broker's registry).
pub type TopicsImage = BTreeMap<String, i32>;

/// Topics a regular expression never matches (Kafka's internal topics).
const INTERNAL_TOPICS: &[&str] = &["__consumer_offsets", "__transaction_state"];

/// Where a member is in its reconciliation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MemberState {
    /// It owns its target assignment at its epoch.
    Stable,
    /// It must revoke `revoking` before it moves on.
    UnrevokedPartitions,
    /// It is at the target epoch but waits for partitions others still own.
    UnreleasedPartitions,
}

/// One member of a consumer-protocol group.
#[derive(Debug, Clone)]
struct Member {
    instance_id: Option<String>,
    rack_id: Option<String>,
    client_id: String,
    client_host: String,
    epoch: i32,
    previous_epoch: i32,
    state: MemberState,
    rebalance_timeout: Duration,
    topic_names: BTreeSet<String>,
    regex: Option<(String, regex::Regex)>,
    server_assignor: Option<String>,
    /// Its current assignment (what it may own).
    assigned: Assignment,
    /// Partitions it must revoke before moving on.
    revoking: Assignment,
    session_deadline: Instant,
    /// When it is removed if it has not revoked `revoking` by then.
    revocation_deadline: Option<Instant>,
    /// For a member that uses the classic protocol: when it is removed if it has not
    /// sent SyncGroup since its JoinGroup was answered (Kafka's sync timeout, its
    /// rebalance timeout).
    sync_deadline: Option<Instant>,
    /// Set for a member that uses the classic protocol (JoinGroup/SyncGroup) in this
    /// group (KIP-848's online migration).
    classic: Option<classic::ClassicMember>,
}

impl Member {
    fn new(now: Instant, session: Duration) -> Member {
        Member {
            instance_id: None,
            rack_id: None,
            client_id: String::new(),
            client_host: String::new(),
            epoch: 0,
            previous_epoch: -1,
            state: MemberState::Stable,
            rebalance_timeout: Duration::from_secs(300),
            topic_names: BTreeSet::new(),
            regex: None,
            server_assignor: None,
            assigned: Assignment::new(),
            revoking: Assignment::new(),
            session_deadline: now + session,
            revocation_deadline: None,
            sync_deadline: None,
            classic: None,
        }
    }

    /// The topics of `topics` it subscribes to, by name or by its regular expression.
    fn subscribed(&self, topics: &TopicsImage) -> BTreeSet<String> {
        let mut out: BTreeSet<String> = self
            .topic_names
            .iter()
            .filter(|t| topics.contains_key(*t))
            .cloned()
            .collect();
        if let Some((_, re)) = &self.regex {
            out.extend(
                topics
                    .keys()
                    .filter(|t| !INTERNAL_TOPICS.contains(&t.as_str()) && re.is_match(t))
                    .cloned(),
            );
        }
        out
    }

    fn owns(&self, topic: &str, partition: i32) -> bool {
        let has = |a: &Assignment| a.get(topic).is_some_and(|p| p.contains(&partition));
        has(&self.assigned) || has(&self.revoking)
    }
}

/// A consumer-protocol group: its members, epochs and target assignment. Its committed
/// offsets are kept by the coordinator beside it, as for a classic group.
#[derive(Debug, Clone)]
pub struct ConsumerGroup {
    id: String,
    group_epoch: i32,
    assignment_epoch: i32,
    members: BTreeMap<String, Member>,
    /// instance id -> member id, for static members.
    instances: BTreeMap<String, String>,
    target: BTreeMap<String, Assignment>,
    /// The partition counts of the subscribed topics the target was computed with.
    subscribed_metadata: BTreeMap<String, i32>,
    /// The topics as last seen (the reaper recomputes with them).
    topics: TopicsImage,
    assignor: String,
    seq: u64,
    incarnation: u64,
    /// The records the journal holds for the group, by key (see `pending_records`).
    written: BTreeMap<Vec<u8>, Vec<u8>>,
}

/// An anchored regular expression (Kafka matches the whole topic name).
fn compile_regex(regex: &str) -> Result<regex::Regex, GroupError> {
    regex::Regex::new(&format!("^(?:{regex})$")).map_err(|e| GroupError::InvalidRegularExpression {
        regex: regex.to_string(),
        reason: e.to_string(),
    })
}

fn to_list(a: &Assignment) -> TopicPartitionList {
    a.iter()
        .filter(|(_, p)| !p.is_empty())
        .map(|(t, p)| (t.clone(), p.iter().copied().collect()))
        .collect()
}

fn from_list(list: &TopicPartitionList) -> Assignment {
    let mut out = Assignment::new();
    for (t, ps) in list {
        out.entry(t.clone()).or_default().extend(ps.iter().copied());
    }
    out.retain(|_, p| !p.is_empty());
    out
}

fn intersects(a: &Assignment, b: &Assignment) -> bool {
    a.iter()
        .any(|(t, ps)| b.get(t).is_some_and(|qs| !ps.is_disjoint(qs)))
}

fn is_subset(a: &Assignment, b: &Assignment) -> bool {
    a.iter()
        .all(|(t, ps)| ps.is_empty() || b.get(t).is_some_and(|qs| ps.is_subset(qs)))
}

/// Checks the fields of a heartbeat as Kafka does (INVALID_REQUEST and friends).
pub fn validate_heartbeat(
    req: &ConsumerHeartbeatRequest,
    cfg: &CoordinatorConfig,
) -> Result<(), GroupError> {
    let invalid = |why: &str| Err(GroupError::InvalidRequest(why.to_string()));
    if req.group_id.is_empty() {
        return Err(GroupError::InvalidGroupId(String::new()));
    }
    if req.member_epoch < STATIC_LEAVE_EPOCH {
        return invalid("MemberEpoch is invalid");
    }
    if req.member_epoch != JOIN_EPOCH && req.member_id.is_empty() {
        return invalid("MemberId can't be empty");
    }
    if req.member_epoch == STATIC_LEAVE_EPOCH && req.instance_id.is_none() {
        return invalid("InstanceId can't be null when leaving with epoch -2");
    }
    if req.member_epoch == JOIN_EPOCH {
        if req.rebalance_timeout_ms < 0 {
            return invalid("RebalanceTimeoutMs must be provided in the first request");
        }
        if req.subscribed_topic_names.is_none() && req.subscribed_topic_regex.is_none() {
            return invalid(
                "SubscribedTopicNames or SubscribedTopicRegex must be set in the first request",
            );
        }
        if req.owned_partitions.as_ref().is_some_and(|o| !o.is_empty()) {
            return invalid("TopicPartitions must be empty when (re-)joining");
        }
    }
    if let Some(a) = &req.server_assignor
        && !(cfg.consumer_assignors.iter().any(|c| c == a)
            && server_assignor::ASSIGNORS.contains(&a.as_str()))
    {
        return Err(GroupError::UnsupportedAssignor(a.clone()));
    }
    if let Some(re) = req
        .subscribed_topic_regex
        .as_deref()
        .filter(|r| !r.is_empty())
    {
        compile_regex(re)?;
    }
    Ok(())
}

impl ConsumerGroup {
    /// An empty group. `incarnation` makes the member ids it hands out (to version 0
    /// clients) differ from those of any other incarnation.
    pub fn new(id: impl Into<String>, incarnation: u64) -> ConsumerGroup {
        ConsumerGroup {
            id: id.into(),
            group_epoch: 0,
            assignment_epoch: 0,
            members: BTreeMap::new(),
            instances: BTreeMap::new(),
            target: BTreeMap::new(),
            subscribed_metadata: BTreeMap::new(),
            topics: TopicsImage::new(),
            assignor: String::new(),
            seq: 0,
            incarnation,
            written: BTreeMap::new(),
        }
    }

    /// The group id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The group epoch.
    pub fn group_epoch(&self) -> i32 {
        self.group_epoch
    }

    /// The member ids.
    pub fn member_ids(&self) -> Vec<String> {
        self.members.keys().cloned().collect()
    }

    /// True when it has no members.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// A member's epoch, if it is a member.
    pub fn member_epoch(&self, member_id: &str) -> Option<i32> {
        self.members.get(member_id).map(|m| m.epoch)
    }

    /// A member's current assignment (what it may own now), if it is a member.
    pub fn current_assignment(&self, member_id: &str) -> Option<TopicPartitionList> {
        self.members.get(member_id).map(|m| to_list(&m.assigned))
    }

    /// Every partition each member owns or has yet to revoke.
    pub fn owned_partitions(&self) -> BTreeMap<String, TopicPartitionList> {
        self.members
            .iter()
            .map(|(id, m)| {
                let mut all = m.assigned.clone();
                for (t, ps) in &m.revoking {
                    all.entry(t.clone()).or_default().extend(ps);
                }
                (id.clone(), to_list(&all))
            })
            .collect()
    }

    /// The topics some member subscribes to (OffsetDelete refuses their offsets).
    pub fn subscribed_topics(&self) -> BTreeSet<String> {
        self.members
            .values()
            .flat_map(|m| m.subscribed(&self.topics))
            .collect()
    }

    /// The group's state.
    pub fn state(&self) -> ConsumerGroupState {
        if self.members.is_empty() {
            ConsumerGroupState::Empty
        } else if self.group_epoch > self.assignment_epoch {
            ConsumerGroupState::Assigning
        } else if self
            .members
            .values()
            .any(|m| m.state != MemberState::Stable || m.epoch != self.assignment_epoch)
        {
            ConsumerGroupState::Reconciling
        } else {
            ConsumerGroupState::Stable
        }
    }

    fn next_member_id(&mut self) -> String {
        self.seq += 1;
        format!("consumer-{:08x}-{:08x}", self.incarnation as u32, self.seq)
    }

    /// ConsumerGroupHeartbeat: joins, heartbeats or leaves, and answers the member's
    /// epoch and (when it changed) its assignment. `topics` is the cluster's topics now.
    pub fn heartbeat(
        &mut self,
        req: &ConsumerHeartbeatRequest,
        topics: &TopicsImage,
        cfg: &CoordinatorConfig,
        now: Instant,
    ) -> Result<ConsumerHeartbeatResponse, GroupError> {
        validate_heartbeat(req, cfg)?;
        self.topics = topics.clone();
        if req.member_epoch == LEAVE_EPOCH || req.member_epoch == STATIC_LEAVE_EPOCH {
            return self.leave(req, cfg, now);
        }
        let (member_id, mut member, mut bump) = self.member_for(req, cfg, now)?;
        bump |= update_member(&mut member, req)?;
        member.session_deadline = now + cfg.consumer_session_timeout;
        let before = (member.epoch, member.assigned.clone());
        let owned = req.owned_partitions.as_ref().map(from_list);
        self.admit(&member_id, member, bump, owned.as_ref(), cfg, now);
        let m = &self.members[&member_id];
        let changed = before != (m.epoch, m.assigned.clone());
        let send = req.member_epoch == JOIN_EPOCH
            || changed
            || owned.as_ref().is_some_and(|o| *o != m.assigned);
        Ok(ConsumerHeartbeatResponse {
            member_id,
            member_epoch: m.epoch,
            heartbeat_interval: cfg.consumer_heartbeat_interval,
            assignment: send.then(|| to_list(&m.assigned)),
        })
    }

    /// The member a heartbeat is for (taken out of the group while it is updated), and
    /// whether the group epoch must move (a new member).
    fn member_for(
        &mut self,
        req: &ConsumerHeartbeatRequest,
        cfg: &CoordinatorConfig,
        now: Instant,
    ) -> Result<(String, Member, bool), GroupError> {
        let session = cfg.consumer_session_timeout;
        if req.member_epoch != JOIN_EPOCH {
            let member = self
                .members
                .get(&req.member_id)
                .ok_or_else(|| GroupError::UnknownMemberId(req.member_id.clone()))?;
            if let Some(i) = &req.instance_id
                && self.instances.get(i) != Some(&req.member_id)
            {
                return Err(GroupError::FencedInstanceId(i.clone()));
            }
            check_epoch(member, req)?;
            let member = self.members.remove(&req.member_id).expect("checked above");
            return Ok((req.member_id.clone(), member, false));
        }
        let member_id = if req.member_id.is_empty() {
            self.next_member_id()
        } else {
            req.member_id.clone()
        };
        if let Some(instance) = &req.instance_id
            && let Some(old_id) = self.instances.get(instance).cloned()
        {
            // A static member rejoining: it takes over the old member's epoch and
            // assignment, if the old one has left.
            let old = &self.members[&old_id];
            if old.epoch != STATIC_LEAVE_EPOCH {
                return Err(GroupError::UnreleasedInstanceId(instance.clone()));
            }
            let mut member = self.members.remove(&old_id).expect("mapped instance");
            member.epoch = member.previous_epoch;
            if let Some(t) = self.target.remove(&old_id) {
                self.target.insert(member_id.clone(), t);
            }
            return Ok((member_id, member, false));
        }
        if self.members.len() >= cfg.max_group_size && !self.members.contains_key(&member_id) {
            return Err(GroupError::GroupMaxSizeReached(cfg.max_group_size));
        }
        // A new member, or a known one rejoining after it was fenced: it owns nothing.
        let rejoining = self.members.remove(&member_id);
        let mut member = Member::new(now, session);
        if let Some(old) = rejoining {
            member.topic_names = old.topic_names;
            member.regex = old.regex;
            member.server_assignor = old.server_assignor;
            member.rebalance_timeout = old.rebalance_timeout;
            member.instance_id = old.instance_id;
            return Ok((member_id, member, false));
        }
        Ok((member_id, member, true))
    }

    /// Applies a leave (epoch -1, or -2 for a static member).
    fn leave(
        &mut self,
        req: &ConsumerHeartbeatRequest,
        cfg: &CoordinatorConfig,
        now: Instant,
    ) -> Result<ConsumerHeartbeatResponse, GroupError> {
        let member_id = match &req.instance_id {
            Some(i) => {
                let id = self
                    .instances
                    .get(i)
                    .ok_or_else(|| GroupError::UnknownMemberId(req.member_id.clone()))?;
                if *id != req.member_id {
                    return Err(GroupError::FencedInstanceId(i.clone()));
                }
                id.clone()
            }
            None => req.member_id.clone(),
        };
        let member = self
            .members
            .get_mut(&member_id)
            .ok_or_else(|| GroupError::UnknownMemberId(member_id.clone()))?;
        if req.member_epoch == STATIC_LEAVE_EPOCH {
            // It keeps its assignment until its session times out or it comes back.
            if member.epoch != STATIC_LEAVE_EPOCH {
                member.previous_epoch = member.epoch;
            }
            member.epoch = STATIC_LEAVE_EPOCH;
            member.session_deadline = now + cfg.consumer_session_timeout;
            member.revocation_deadline = None;
        } else {
            self.remove_member(&member_id, cfg);
        }
        Ok(ConsumerHeartbeatResponse {
            member_id,
            member_epoch: req.member_epoch,
            heartbeat_interval: cfg.consumer_heartbeat_interval,
            assignment: None,
        })
    }

    /// Removes a member (left, timed out or fenced): its partitions are free, the group
    /// epoch moves and the target is recomputed.
    fn remove_member(&mut self, member_id: &str, cfg: &CoordinatorConfig) {
        let Some(m) = self.members.remove(member_id) else {
            return;
        };
        if let Some(i) = &m.instance_id
            && self.instances.get(i).map(String::as_str) == Some(member_id)
        {
            self.instances.remove(i);
        }
        self.target.remove(member_id);
        self.group_epoch += 1;
        self.compute_target(cfg);
    }

    /// The partition counts of every subscribed topic now.
    fn current_metadata(&self) -> BTreeMap<String, i32> {
        self.subscribed_topics()
            .into_iter()
            .filter_map(|t| self.topics.get(&t).map(|&n| (t, n)))
            .collect()
    }

    fn metadata_changed(&self) -> bool {
        self.current_metadata() != self.subscribed_metadata
    }

    /// The assignor: the one most members prefer, else the configured default.
    fn choose_assignor(&self, cfg: &CoordinatorConfig) -> String {
        let mut votes: BTreeMap<&str, usize> = BTreeMap::new();
        for m in self.members.values() {
            if let Some(a) = &m.server_assignor {
                *votes.entry(a).or_default() += 1;
            }
        }
        let default = cfg
            .consumer_assignors
            .first()
            .map_or(server_assignor::ASSIGNORS[0], String::as_str);
        votes
            .into_iter()
            .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(a.0)))
            .map_or(default, |(a, _)| a)
            .to_string()
    }

    /// Recomputes the target assignment at the group epoch.
    fn compute_target(&mut self, cfg: &CoordinatorConfig) {
        let subscriptions: BTreeMap<String, BTreeSet<String>> = self
            .members
            .iter()
            .map(|(id, m)| (id.clone(), m.subscribed(&self.topics)))
            .collect();
        self.subscribed_metadata = self.current_metadata();
        self.assignor = self.choose_assignor(cfg);
        self.target = server_assignor::assign(
            &self.assignor,
            &subscriptions,
            &self.subscribed_metadata,
            &self.target,
        );
        self.assignment_epoch = self.group_epoch;
    }

    /// Moves a member toward its target: revocations first; then the new epoch with the
    /// target's partitions no other member owns.
    /// Stores `member` (joined or updated) under `member_id`, bumps the group epoch when
    /// `bump` or the subscribed metadata changed, recomputes the target assignment when
    /// it is behind, and moves the member toward its target given what it says it owns.
    fn admit(
        &mut self,
        member_id: &str,
        member: Member,
        bump: bool,
        owned: Option<&Assignment>,
        cfg: &CoordinatorConfig,
        now: Instant,
    ) {
        if let Some(i) = &member.instance_id {
            self.instances.insert(i.clone(), member_id.to_string());
        }
        self.members.insert(member_id.to_string(), member);
        if bump || self.metadata_changed() {
            self.group_epoch += 1;
        }
        if self.group_epoch > self.assignment_epoch {
            self.compute_target(cfg);
        }
        self.reconcile(member_id, owned, now);
    }

    fn reconcile(&mut self, member_id: &str, owned: Option<&Assignment>, now: Instant) {
        let member = &self.members[member_id];
        if member.state == MemberState::UnrevokedPartitions {
            let acked = owned.is_some_and(|o| !intersects(o, &member.revoking));
            if !acked {
                return;
            }
        }
        if member.state == MemberState::Stable && member.epoch == self.assignment_epoch {
            return;
        }
        let target = self.target.get(member_id).cloned().unwrap_or_default();
        let taken = |t: &str, p: i32| {
            self.members
                .iter()
                .any(|(id, m)| id != member_id && m.owns(t, p))
        };
        let mut keep = Assignment::new();
        let mut revoke = Assignment::new();
        for (t, ps) in &member.assigned {
            for &p in ps {
                let into = if target.get(t).is_some_and(|q| q.contains(&p)) {
                    &mut keep
                } else {
                    &mut revoke
                };
                into.entry(t.clone()).or_default().insert(p);
            }
        }
        let mut next = keep.clone();
        let mut unreleased = false;
        for (t, ps) in &target {
            for &p in ps {
                if keep.get(t).is_some_and(|k| k.contains(&p)) {
                    continue;
                }
                if taken(t, p) {
                    unreleased = true;
                } else {
                    next.entry(t.clone()).or_default().insert(p);
                }
            }
        }
        let epoch = self.assignment_epoch;
        let m = self.members.get_mut(member_id).expect("reconciled member");
        if !revoke.is_empty() {
            m.assigned = keep;
            m.revoking = revoke;
            m.state = MemberState::UnrevokedPartitions;
            m.revocation_deadline = Some(now + m.rebalance_timeout);
            return;
        }
        m.revoking.clear();
        m.revocation_deadline = None;
        if m.epoch != epoch {
            m.previous_epoch = m.epoch;
            m.epoch = epoch;
        }
        m.assigned = next;
        m.state = if unreleased {
            MemberState::UnreleasedPartitions
        } else {
            MemberState::Stable
        };
    }

    /// Expires members whose session passed, and members that did not revoke within
    /// their rebalance timeout. Returns the next instant something may expire.
    pub fn tick(&mut self, cfg: &CoordinatorConfig, now: Instant) -> Option<Instant> {
        let expired: Vec<String> = self
            .members
            .iter()
            .filter(|(_, m)| {
                m.session_deadline <= now
                    || [m.revocation_deadline, m.sync_deadline]
                        .into_iter()
                        .flatten()
                        .any(|d| d <= now)
            })
            .map(|(id, _)| id.clone())
            .collect();
        for id in expired {
            self.remove_member(&id, cfg);
        }
        self.members
            .values()
            .flat_map(|m| {
                std::iter::once(m.session_deadline)
                    .chain(m.revocation_deadline)
                    .chain(m.sync_deadline)
            })
            .min()
    }

    /// Removes a member as if its session had timed out.
    pub fn expire_member(&mut self, member_id: &str, cfg: &CoordinatorConfig) {
        self.remove_member(member_id, cfg);
    }

    /// OffsetFetch v9's check for this group (KIP-848, Kafka's `validateOffsetFetch`):
    /// a request without a member id or with a negative epoch (an admin client's) is
    /// accepted; a member must be one of the group's (`UNKNOWN_MEMBER_ID`) at its
    /// current epoch (`STALE_MEMBER_EPOCH` otherwise).
    pub fn check_offset_fetch(
        &self,
        member_id: Option<&str>,
        member_epoch: i32,
    ) -> Result<(), GroupError> {
        let Some(member_id) = member_id.filter(|_| member_epoch >= 0) else {
            return Ok(());
        };
        let m = self
            .members
            .get(member_id)
            .ok_or_else(|| GroupError::UnknownMemberId(member_id.to_string()))?;
        if member_epoch != m.epoch {
            return Err(GroupError::StaleMemberEpoch {
                given: member_epoch,
                current: m.epoch,
            });
        }
        Ok(())
    }

    /// OffsetCommit's check for this group (KIP-848): a commit with a negative epoch is
    /// accepted only while the group is empty (with any member id, or none); a
    /// member's commit must carry its current epoch (`STALE_MEMBER_EPOCH` if older,
    /// fenced if newer; `ILLEGAL_GENERATION` for a member that uses the classic
    /// protocol).
    pub fn check_commit(&self, member_id: &str, member_epoch: i32) -> Result<(), GroupError> {
        // Kafka's rule: a negative epoch commits while the group is empty, whatever
        // member id comes with it (a client that assigns itself partitions).
        if member_epoch < 0 && self.members.is_empty() {
            return Ok(());
        }
        if member_epoch < 0 && member_id.is_empty() {
            return Err(GroupError::UnknownMemberId(String::new()));
        }
        let m = self
            .members
            .get(member_id)
            .ok_or_else(|| GroupError::UnknownMemberId(member_id.to_string()))?;
        if m.classic.is_some() && member_epoch != m.epoch {
            // A classic member's generation is its epoch (Kafka's ILLEGAL_GENERATION).
            return Err(GroupError::IllegalGeneration {
                given: member_epoch,
                current: m.epoch,
            });
        }
        match member_epoch.cmp(&m.epoch) {
            std::cmp::Ordering::Greater => Err(GroupError::FencedMemberEpoch {
                given: member_epoch,
                current: m.epoch,
            }),
            std::cmp::Ordering::Less => Err(GroupError::StaleMemberEpoch {
                given: member_epoch,
                current: m.epoch,
            }),
            std::cmp::Ordering::Equal => Ok(()),
        }
    }

    /// ConsumerGroupDescribe.
    pub fn describe(&self) -> ConsumerGroupDescription {
        ConsumerGroupDescription {
            group_id: self.id.clone(),
            state: self.state(),
            group_epoch: self.group_epoch,
            assignment_epoch: self.assignment_epoch,
            assignor_name: self.assignor.clone(),
            members: self
                .members
                .iter()
                .map(|(id, m)| ConsumerMemberDescription {
                    member_id: id.clone(),
                    instance_id: m.instance_id.clone(),
                    rack_id: m.rack_id.clone(),
                    member_epoch: m.epoch,
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    subscribed_topic_names: m.topic_names.iter().cloned().collect(),
                    subscribed_topic_regex: m.regex.as_ref().map(|(r, _)| r.clone()),
                    assignment: to_list(&m.assigned),
                    target_assignment: self.target.get(id).map(to_list).unwrap_or_default(),
                    classic: m.classic.is_some(),
                })
                .collect(),
        }
    }
}

/// The epoch check of a heartbeat from a known member.
fn check_epoch(member: &Member, req: &ConsumerHeartbeatRequest) -> Result<(), GroupError> {
    let fenced = || GroupError::FencedMemberEpoch {
        given: req.member_epoch,
        current: member.epoch,
    };
    if req.member_epoch > member.epoch {
        return Err(fenced());
    }
    if req.member_epoch < member.epoch {
        // Tolerated: the previous epoch, owning nothing beyond its assignment (the
        // response that moved it on was lost).
        let lost_response = req.member_epoch == member.previous_epoch
            && req
                .owned_partitions
                .as_ref()
                .is_some_and(|o| is_subset(&from_list(o), &member.assigned));
        if !lost_response {
            return Err(fenced());
        }
    }
    Ok(())
}

/// Applies the request's fields to the member; true if its subscription or preferred
/// assignor changed (the group epoch must move).
fn update_member(member: &mut Member, req: &ConsumerHeartbeatRequest) -> Result<bool, GroupError> {
    let mut changed = false;
    if req.instance_id.is_some() {
        member.instance_id = req.instance_id.clone();
    }
    if req.rack_id.is_some() {
        member.rack_id = req.rack_id.clone();
    }
    if !req.client_id.is_empty() {
        member.client_id = req.client_id.clone();
    }
    if !req.client_host.is_empty() {
        member.client_host = req.client_host.clone();
    }
    if req.rebalance_timeout_ms >= 0 {
        member.rebalance_timeout = Duration::from_millis(req.rebalance_timeout_ms as u64);
    }
    if let Some(names) = &req.subscribed_topic_names {
        let names: BTreeSet<String> = names.iter().cloned().collect();
        changed |= names != member.topic_names;
        member.topic_names = names;
    }
    if let Some(re) = &req.subscribed_topic_regex {
        let old = member.regex.as_ref().map(|(r, _)| r.as_str());
        if old != Some(re.as_str()) && !(old.is_none() && re.is_empty()) {
            member.regex = if re.is_empty() {
                None
            } else {
                Some((re.clone(), compile_regex(re)?))
            };
            changed = true;
        }
    }
    if let Some(a) = &req.server_assignor
        && member.server_assignor.as_ref() != Some(a)
    {
        member.server_assignor = Some(a.clone());
        changed = true;
    }
    Ok(changed)
}

#[path = "consumer_group_store.rs"]
mod store;

#[path = "consumer_classic.rs"]
mod classic;

#[cfg(test)]
#[path = "consumer_group_tests.rs"]
mod tests;
