//! An in-process member of a consumer group.
//!
//! A [`GroupConsumer`] speaks to the broker's [`GroupCoordinator`] exactly as a Kafka
//! client does over the network: JoinGroup with a `ConsumerProtocol` subscription per
//! assignor, the leader computes the assignment client-side and hands it in with
//! SyncGroup, members heartbeat, commit with their generation, and LeaveGroup on close.
//! So in-process members and Kafka clients can share one group.
//!
//! The member is driven by `poll`: joining, heartbeats, auto-commit and rebalances all
//! happen inside it (there is no background thread per member). When its group starts
//! a rebalance, the coordinator wakes a member blocked in `poll` at once, so a long poll
//! never holds the others up. A member that does not
//! call `poll` within `session_timeout` is therefore considered dead and its partitions
//! move to the others; `session_timeout` plays the role of both Kafka's
//! `session.timeout.ms` and `max.poll.interval.ms`.
//!
//! Rebalances are eager with the range and round-robin assignors: before rejoining, a
//! member auto-commits its positions (if auto-commit is on), calls the listener's
//! `on_partitions_revoked` (where it may commit), and gives up all its partitions. With
//! only cooperative assignors (`cooperative-sticky`), rebalances are incremental as in
//! Kafka: a member keeps its partitions while rejoining, sends them as
//! `owned_partitions`, and gives up only those the new assignment moves elsewhere
//! (committing them first), which their new owner receives in a follow-up rebalance.
//!
//! With [`GroupProtocol::Consumer`] the member speaks the consumer group protocol
//! (KIP-848) instead: the broker assigns, and the member reconciles on each heartbeat,
//! revoking what its new assignment no longer holds (the listener hears it) and adding
//! what the others have released; its assignors are not used.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::broker::{Broker, OFFSETS_TOPIC};
use crate::consumer::assignor::{
    Assignment, Assignor, RangeAssignor, RoundRobinAssignor, Subscription,
};
use crate::consumer::standalone::{
    ConsumerConfig, ConsumerRecords, Fetcher, IsolationLevel, OffsetReset, commit_entries,
};
use crate::coordinator::{
    GroupCoordinator, GroupError, JoinGroupRequest, JoinGroupResponse, JoinStart, JoinTicket,
    LeavingMember, MemberOrigin, RebalanceWaker, SyncGroupRequest,
};
use crate::error::{Error, Result};

use super::source::{Origin, RemoteMember, RemoteRebalance, Source};

/// Topic partitions, as an assignment lists them.
type Partitions = Vec<(String, i32)>;

#[path = "member_consumer_protocol.rs"]
mod consumer_protocol;

/// How long a member waits before rejoining when the coordinator is unavailable.
const RETRY_BACKOFF: Duration = Duration::from_millis(100);

/// Settings of a group member. Defaults mirror the Kafka consumer's, except where noted.
#[derive(Clone)]
pub struct GroupConfig {
    /// The group to join (`group.id`).
    pub group_id: String,
    /// Topics to subscribe to.
    pub topics: Vec<String>,
    /// Assignors offered, in order of preference (`partition.assignment.strategy`).
    /// Default range, then round-robin.
    pub assignors: Vec<Arc<dyn Assignor>>,
    /// The member is removed if it does not poll for this long (`session.timeout.ms`,
    /// also standing in for `max.poll.interval.ms`). Default 10 s (Kafka 3.0+: 45 s).
    pub session_timeout: Duration,
    /// How long a rebalance waits for this member to rejoin (`max.poll.interval.ms`,
    /// sent as the rebalance timeout). Default 5 min.
    pub rebalance_timeout: Duration,
    /// How often `poll` heartbeats to keep the session alive (`heartbeat.interval.ms`).
    /// Default 1 s (Kafka: 3 s). A rebalance does not wait for it: the coordinator wakes
    /// an in-process member blocked in `poll` as soon as its group starts one.
    pub heartbeat_interval: Duration,
    /// Commit positions every `auto_commit_interval` from `poll`, before a rebalance and
    /// on close (`enable.auto.commit`). Default true.
    pub enable_auto_commit: bool,
    /// `auto.commit.interval.ms`. Default 5 s.
    pub auto_commit_interval: Duration,
    /// `auto.offset.reset`. Default Latest.
    pub auto_offset_reset: OffsetReset,
    /// `max.partition.fetch.bytes`. Default 1 MiB.
    pub max_partition_fetch_bytes: usize,
    /// `check.crcs`: check every batch's CRC-32C before decoding it. Default true.
    pub check_crcs: bool,
    /// `isolation.level`: which records of transactions to read. Default
    /// ReadUncommitted, as in Kafka. Reading committed, a member also waits for its
    /// group's committed offsets to be stable (KIP-447), in process and over the
    /// network (OffsetFetch v7 `require_stable`).
    pub isolation_level: IsolationLevel,
    /// Static membership id (`group.instance.id`). Default None.
    pub group_instance_id: Option<String>,
    /// `client.id`, the prefix of the member id. Default "tidelog".
    pub client_id: String,
    /// `group.protocol`: the classic protocol (JoinGroup/SyncGroup, the assignors
    /// above), or the consumer protocol (KIP-848: the broker assigns, `assignors` are
    /// not used). Default classic.
    pub group_protocol: GroupProtocol,
    /// `client.rack`: see [`ConsumerConfig::client_rack`]. Default None.
    pub client_rack: Option<String>,
}

/// The group protocol a member speaks (`group.protocol`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GroupProtocol {
    /// JoinGroup/SyncGroup with client-side assignors (Kafka's `classic`).
    #[default]
    Classic,
    /// KIP-848's ConsumerGroupHeartbeat: the broker assigns and the member reconciles
    /// incrementally (Kafka's `consumer`).
    Consumer,
}

impl std::fmt::Debug for GroupConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupConfig")
            .field("group_id", &self.group_id)
            .field("topics", &self.topics)
            .field(
                "assignors",
                &self
                    .assignors
                    .iter()
                    .map(|a| a.name().to_string())
                    .collect::<Vec<_>>(),
            )
            .field("session_timeout", &self.session_timeout)
            .field("enable_auto_commit", &self.enable_auto_commit)
            .field("auto_offset_reset", &self.auto_offset_reset)
            .field("isolation_level", &self.isolation_level)
            .finish()
    }
}

impl GroupConfig {
    /// A member of `group_id` subscribed to `topics`, with default settings.
    pub fn new(group_id: impl Into<String>, topics: &[&str]) -> Self {
        GroupConfig {
            group_id: group_id.into(),
            topics: topics.iter().map(|t| t.to_string()).collect(),
            assignors: vec![Arc::new(RangeAssignor), Arc::new(RoundRobinAssignor)],
            session_timeout: Duration::from_secs(10),
            rebalance_timeout: Duration::from_secs(300),
            heartbeat_interval: Duration::from_secs(1),
            enable_auto_commit: true,
            auto_commit_interval: Duration::from_secs(5),
            auto_offset_reset: OffsetReset::Latest,
            max_partition_fetch_bytes: 1 << 20,
            check_crcs: true,
            isolation_level: IsolationLevel::ReadUncommitted,
            group_instance_id: None,
            client_id: "tidelog".into(),
            group_protocol: GroupProtocol::Classic,
            client_rack: None,
        }
    }

    /// Sets `client.rack`.
    #[must_use]
    pub fn client_rack(mut self, rack: impl Into<String>) -> Self {
        self.client_rack = Some(rack.into());
        self
    }

    /// The settings of the member's reads and commits.
    pub(crate) fn consumer_config(&self) -> ConsumerConfig {
        ConsumerConfig {
            group_id: Some(self.group_id.clone()),
            auto_offset_reset: self.auto_offset_reset,
            max_partition_fetch_bytes: self.max_partition_fetch_bytes,
            check_crcs: self.check_crcs,
            isolation_level: self.isolation_level,
            client_rack: self.client_rack.clone(),
            ..ConsumerConfig::default()
        }
    }

    /// Sets `auto.offset.reset`.
    #[must_use]
    pub fn auto_offset_reset(mut self, reset: OffsetReset) -> Self {
        self.auto_offset_reset = reset;
        self
    }

    /// Sets `session.timeout.ms`.
    #[must_use]
    pub fn session_timeout(mut self, timeout: Duration) -> Self {
        self.session_timeout = timeout;
        self
    }

    /// Sets the rebalance timeout (`max.poll.interval.ms`).
    #[must_use]
    pub fn rebalance_timeout(mut self, timeout: Duration) -> Self {
        self.rebalance_timeout = timeout;
        self
    }

    /// Sets `heartbeat.interval.ms`.
    #[must_use]
    pub fn heartbeat_interval(mut self, interval: Duration) -> Self {
        self.heartbeat_interval = interval;
        self
    }

    /// Sets `enable.auto.commit`.
    #[must_use]
    pub fn enable_auto_commit(mut self, yes: bool) -> Self {
        self.enable_auto_commit = yes;
        self
    }

    /// Sets `auto.commit.interval.ms`.
    #[must_use]
    pub fn auto_commit_interval(mut self, interval: Duration) -> Self {
        self.auto_commit_interval = interval;
        self
    }

    /// Replaces the assignors (first = preferred).
    #[must_use]
    pub fn assignors(mut self, assignors: Vec<Arc<dyn Assignor>>) -> Self {
        self.assignors = assignors;
        self
    }

    /// Sets `check.crcs`.
    #[must_use]
    pub fn check_crcs(mut self, check: bool) -> Self {
        self.check_crcs = check;
        self
    }

    /// Sets `isolation.level`.
    #[must_use]
    pub fn isolation_level(mut self, level: IsolationLevel) -> Self {
        self.isolation_level = level;
        self
    }

    /// Sets `group.instance.id` (static membership).
    #[must_use]
    pub fn group_instance_id(mut self, id: impl Into<String>) -> Self {
        self.group_instance_id = Some(id.into());
        self
    }

    /// Sets `client.id`.
    #[must_use]
    pub fn client_id(mut self, id: impl Into<String>) -> Self {
        self.client_id = id.into();
        self
    }

    /// Sets `group.protocol`.
    #[must_use]
    pub fn group_protocol(mut self, protocol: GroupProtocol) -> Self {
        self.group_protocol = protocol;
        self
    }
}

/// What a rebalance listener may do while partitions are revoked: read positions and
/// commit them.
pub struct RebalanceContext<'a>(Context<'a>);

enum Context<'a> {
    Local {
        fetcher: &'a Fetcher,
        generation: i32,
        member_id: &'a str,
        instance: Option<&'a str>,
    },
    // Built only with the `client` feature.
    #[cfg_attr(not(feature = "client"), allow(dead_code))]
    Remote(&'a dyn RemoteRebalance),
}

impl<'a> RebalanceContext<'a> {
    /// The context of a member over the network.
    #[cfg_attr(not(feature = "client"), allow(dead_code))]
    pub(crate) fn remote(member: &'a dyn RemoteRebalance) -> RebalanceContext<'a> {
        RebalanceContext(Context::Remote(member))
    }

    /// The member's next offset per assigned partition: (topic, partition, offset).
    pub fn positions(&self) -> Vec<(String, i32, i64)> {
        match &self.0 {
            Context::Local { fetcher, .. } => fetcher
                .positions()
                .into_iter()
                .map(|c| (c.topic, c.partition, c.offset))
                .collect(),
            Context::Remote(r) => r.positions(),
        }
    }

    /// Commits the current positions (with the generation being left, which the
    /// coordinator accepts while the group prepares the rebalance).
    pub fn commit_sync(&self) -> Result<()> {
        match &self.0 {
            Context::Local {
                fetcher,
                generation,
                member_id,
                instance,
            } => fetcher.commit(*generation, member_id, *instance, fetcher.positions()),
            Context::Remote(r) => r.commit_sync(),
        }
    }
}

/// Callbacks around a rebalance (Kafka's `ConsumerRebalanceListener`).
pub trait RebalanceListener: Send {
    /// The member is about to give up these partitions; commit here to avoid
    /// reprocessing. Called from `poll`, before rejoining.
    fn on_partitions_revoked(&mut self, ctx: &RebalanceContext<'_>, partitions: &[(String, i32)]) {
        let _ = (ctx, partitions);
    }

    /// The member now owns these partitions (after the rebalance completed).
    fn on_partitions_assigned(&mut self, partitions: &[(String, i32)]) {
        let _ = partitions;
    }
}

enum MemberState {
    /// Must send JoinGroup.
    Unjoined,
    /// JoinGroup sent, waiting for the rebalance.
    Joining(JoinTicket),
    /// Joined generation `resp.generation_id`; must SyncGroup (with the assignment if
    /// leader).
    Syncing {
        generation: i32,
        assignments: Vec<(String, Vec<u8>)>,
    },
    /// Has its assignment.
    Stable,
}

/// A [`GroupConsumer`] of a [`Broker`] in this process.
pub(super) struct LocalMember {
    fetcher: Fetcher,
    config: GroupConfig,
    state: MemberState,
    member_id: String,
    generation: i32,
    listener: Option<Box<dyn RebalanceListener>>,
    last_heartbeat: Instant,
    last_auto_commit: Instant,
    rebalance_flag: Arc<AtomicBool>,
    closed: bool,
}

impl std::fmt::Debug for LocalMember {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupConsumer")
            .field("group_id", &self.config.group_id)
            .field("member_id", &self.member_id)
            .field("generation", &self.generation)
            .field("assignment", &self.assignment())
            .finish()
    }
}

impl LocalMember {
    fn join(broker: &Broker, config: GroupConfig) -> Result<LocalMember> {
        for t in &config.topics {
            broker.topic(t)?;
        }
        let consumer_config = config.consumer_config();
        let now = Instant::now();
        Ok(LocalMember {
            fetcher: Fetcher::new(broker.clone(), consumer_config),
            config,
            state: MemberState::Unjoined,
            member_id: String::new(),
            generation: -1,
            listener: None,
            last_heartbeat: now,
            last_auto_commit: now,
            rebalance_flag: Arc::new(AtomicBool::new(false)),
            closed: false,
        })
    }

    fn set_listener(&mut self, listener: impl RebalanceListener + 'static) {
        self.listener = Some(Box::new(listener));
    }

    fn member_id(&self) -> &str {
        &self.member_id
    }

    fn generation(&self) -> i32 {
        self.generation
    }

    fn group_metadata(&self) -> crate::producer::ConsumerGroupMetadata {
        crate::producer::ConsumerGroupMetadata {
            group_id: self.config.group_id.clone(),
            generation_id: self.generation,
            member_id: self.member_id.clone(),
            group_instance_id: self.config.group_instance_id.clone(),
        }
    }

    fn assignment(&self) -> Vec<(String, i32)> {
        self.fetcher.assignment()
    }

    fn position(&mut self, topic: &str, partition: i32) -> Result<i64> {
        self.fetcher.position(topic, partition)
    }

    fn end_offset(&self, topic: &str, partition: i32) -> Result<i64> {
        self.fetcher.end_offset_of(topic, partition)
    }

    fn seek(&mut self, topic: &str, partition: i32, offset: i64) -> Result<()> {
        self.fetcher.find(topic, partition)?.position = Some(offset);
        Ok(())
    }

    fn offsets_for_times(&self, timestamp: i64) -> Result<Vec<(String, i32, Option<i64>)>> {
        self.fetcher.offsets_for_times(timestamp)
    }

    fn committed(&self, topic: &str, partition: i32) -> Result<Option<i64>> {
        self.fetcher.committed(topic, partition)
    }

    fn cooperative(&self) -> bool {
        self.config.assignors.iter().all(|a| a.is_cooperative())
    }

    fn coordinator(&self) -> &GroupCoordinator {
        self.fetcher.broker.group_coordinator()
    }

    fn group_error(&self, source: GroupError) -> Error {
        Error::Group {
            group: self.config.group_id.clone(),
            source,
        }
    }

    fn commit_current(&self) -> Result<()> {
        self.fetcher.commit(
            self.generation,
            &self.member_id,
            self.config.group_instance_id.as_deref(),
            self.fetcher.positions(),
        )
    }

    fn join_request(&self) -> JoinGroupRequest {
        // Cooperative members tell the leader what they own, so it can keep it there.
        let mut owned: BTreeMap<String, Vec<i32>> = BTreeMap::new();
        if self.cooperative() {
            for (t, p) in self.assignment() {
                owned.entry(t).or_default().push(p);
            }
        }
        let subscription = Subscription {
            topics: self.config.topics.clone(),
            user_data: None,
            owned_partitions: owned.into_iter().collect(),
        }
        .encode();
        JoinGroupRequest {
            group_id: self.config.group_id.clone(),
            member_id: self.member_id.clone(),
            group_instance_id: self.config.group_instance_id.clone(),
            protocol_type: "consumer".into(),
            protocols: self
                .config
                .assignors
                .iter()
                .map(|a| (a.name().to_string(), subscription.clone()))
                .collect(),
            session_timeout: self.config.session_timeout,
            rebalance_timeout: self.config.rebalance_timeout,
            require_known_member_id: false,
            client_id: self.config.client_id.clone(),
            client_host: "in-process".into(),
            origin: MemberOrigin::InProcess,
            // A returning static leader is answered as a follower (the group's old
            // leader id), which this member handles like any follower.
            supports_skip_assignment: false,
        }
    }

    fn compute_assignment(&self, resp: &JoinGroupResponse) -> Result<Vec<(String, Vec<u8>)>> {
        let protocol = resp.protocol_name.clone().unwrap_or_default();
        let assignor = self
            .config
            .assignors
            .iter()
            .find(|a| a.name() == protocol)
            .ok_or_else(|| {
                self.group_error(GroupError::InconsistentGroupProtocol(format!(
                    "the group chose protocol {protocol:?}, which this member does not offer"
                )))
            })?;
        let mut members = BTreeMap::new();
        let mut counts = BTreeMap::new();
        for m in &resp.members {
            // A member whose metadata cannot be read gets nothing rather than failing
            // the whole group.
            let sub = Subscription::decode(&m.metadata).unwrap_or_default();
            for t in &sub.topics {
                if !counts.contains_key(t)
                    && let Ok(topic) = self.fetcher.broker.topic(t)
                {
                    counts.insert(t.clone(), topic.partition_count());
                }
            }
            members.insert(m.member_id.clone(), sub);
        }
        let plan = assignor.assign(&counts, &members);
        Ok(members
            .keys()
            .map(|id| {
                let partitions = plan.get(id).cloned().unwrap_or_default();
                (
                    id.clone(),
                    Assignment {
                        partitions,
                        user_data: None,
                    }
                    .encode(),
                )
            })
            .collect())
    }

    fn ensure_joined(&mut self, deadline: Instant) -> Result<bool> {
        if self.config.group_protocol == GroupProtocol::Consumer {
            return self.ensure_joined_consumer(deadline);
        }
        loop {
            let remaining = deadline.saturating_duration_since(Instant::now());
            match std::mem::replace(&mut self.state, MemberState::Unjoined) {
                MemberState::Stable => {
                    self.state = MemberState::Stable;
                    return Ok(true);
                }
                MemberState::Unjoined => match self.coordinator().begin_join(self.join_request()) {
                    Ok(JoinStart::Pending(ticket)) => {
                        self.member_id = ticket.member_id.clone();
                        self.state = MemberState::Joining(ticket);
                    }
                    Ok(JoinStart::Done(resp)) => self.joined(resp)?,
                    Err(e) => self.join_failed(e, deadline)?,
                },
                MemberState::Joining(ticket) => {
                    match self.coordinator().await_join(&ticket, remaining) {
                        None => {
                            self.state = MemberState::Joining(ticket);
                            return Ok(false);
                        }
                        Some(Ok(resp)) => self.joined(resp)?,
                        Some(Err(e)) => self.join_failed(e, deadline)?,
                    }
                }
                MemberState::Syncing {
                    generation,
                    assignments,
                } => {
                    let resp = self.coordinator().sync_group(
                        SyncGroupRequest {
                            group_id: self.config.group_id.clone(),
                            generation_id: generation,
                            member_id: self.member_id.clone(),
                            group_instance_id: self.config.group_instance_id.clone(),
                            protocol_type: None,
                            protocol_name: None,
                            assignments: assignments.clone(),
                        },
                        remaining,
                    );
                    match resp {
                        Ok(resp) => {
                            let assignment = Assignment::decode(&resp.assignment)?;
                            let list: Vec<(String, i32)> = assignment
                                .partitions
                                .iter()
                                .flat_map(|(t, ps)| ps.iter().map(move |p| (t.clone(), *p)))
                                .collect();
                            self.last_heartbeat = Instant::now();
                            if self.cooperative() {
                                self.apply_incremental(&list)?;
                            } else {
                                // Positions are set on the first fetch (committed
                                // offset or reset policy): a policy error then comes
                                // from poll without forcing another rebalance.
                                self.fetcher.assign(&list)?;
                                self.state = MemberState::Stable;
                                self.notify_assigned(&list);
                            }
                        }
                        Err(GroupError::RequestTimedOut) => {
                            self.state = MemberState::Syncing {
                                generation,
                                assignments,
                            };
                            return Ok(false);
                        }
                        Err(e) => self.join_failed(e, deadline)?,
                    }
                }
            }
            if Instant::now() >= deadline {
                return Ok(matches!(self.state, MemberState::Stable));
            }
        }
    }

    fn joined(&mut self, resp: JoinGroupResponse) -> Result<()> {
        self.member_id = resp.member_id.clone();
        self.generation = resp.generation_id;
        self.coordinator().set_waker(
            &self.config.group_id,
            &self.member_id,
            RebalanceWaker {
                flag: Arc::clone(&self.rebalance_flag),
                signal: Arc::clone(&self.fetcher.signal),
            },
        );
        let assignments = if resp.leader == resp.member_id {
            self.compute_assignment(&resp)?
        } else {
            Vec::new()
        };
        self.state = MemberState::Syncing {
            generation: resp.generation_id,
            assignments,
        };
        Ok(())
    }

    fn join_failed(&mut self, e: GroupError, deadline: Instant) -> Result<()> {
        self.state = MemberState::Unjoined;
        match e {
            GroupError::UnknownMemberId(_) | GroupError::FencedInstanceId(_) => {
                self.member_id.clear();
                Ok(())
            }
            GroupError::RebalanceInProgress | GroupError::IllegalGeneration { .. } => Ok(()),
            e if e.is_retriable() => {
                // The coordinator is moving or unavailable: wait a little, then rejoin.
                let pause = deadline
                    .saturating_duration_since(Instant::now())
                    .min(RETRY_BACKOFF);
                std::thread::sleep(pause);
                Ok(())
            }
            e => Err(self.group_error(e)),
        }
    }

    fn notify_assigned(&mut self, partitions: &[(String, i32)]) {
        if let Some(mut l) = self.listener.take() {
            l.on_partitions_assigned(partitions);
            self.listener = Some(l);
        }
    }

    fn notify_revoked(&mut self, partitions: &[(String, i32)]) {
        if let Some(mut l) = self.listener.take() {
            let ctx = RebalanceContext(Context::Local {
                fetcher: &self.fetcher,
                generation: self.generation,
                member_id: &self.member_id,
                instance: self.config.group_instance_id.as_deref(),
            });
            l.on_partitions_revoked(&ctx, partitions);
            self.listener = Some(l);
        }
    }

    fn apply_incremental(&mut self, list: &[(String, i32)]) -> Result<()> {
        let (revoked, added) = self.revoke_for(list);
        self.state = if revoked.is_empty() {
            MemberState::Stable
        } else {
            MemberState::Unjoined
        };
        self.fetcher.update_assignment(list)?;
        self.notify_assigned(&added);
        Ok(())
    }

    pub(super) fn revoke_for(&mut self, list: &[(String, i32)]) -> (Partitions, Partitions) {
        let current = self.assignment();
        let revoked: Partitions = current
            .iter()
            .filter(|tp| !list.contains(tp))
            .cloned()
            .collect();
        let added: Partitions = list
            .iter()
            .filter(|tp| !current.contains(tp))
            .cloned()
            .collect();
        if !revoked.is_empty() {
            if self.config.enable_auto_commit {
                let _ = self.commit_current();
            }
            self.notify_revoked(&revoked);
        }
        (revoked, added)
    }

    fn revoke(&mut self, commit: bool) {
        if commit && self.config.enable_auto_commit {
            let _ = self.commit_current();
        }
        let revoked = self.assignment();
        self.notify_revoked(&revoked);
        self.fetcher.unassign();
        self.state = MemberState::Unjoined;
    }

    fn heartbeat(&mut self) {
        if self.config.group_protocol == GroupProtocol::Consumer {
            return self.consumer_heartbeat();
        }
        self.last_heartbeat = Instant::now();
        let answer = self.coordinator().heartbeat(
            &self.config.group_id,
            self.generation,
            &self.member_id,
            self.config.group_instance_id.as_deref(),
        );
        match answer {
            Ok(()) => {}
            // The coordinator is moving (or restarting): keep the partitions and the
            // member id, and try again at the next heartbeat.
            Err(e) if e.is_retriable() => {}
            Err(GroupError::RebalanceInProgress) if self.cooperative() => {
                // Keep the partitions (and their positions) while rejoining.
                if self.config.enable_auto_commit {
                    let _ = self.commit_current();
                }
                self.state = MemberState::Unjoined;
            }
            Err(GroupError::RebalanceInProgress) => self.revoke(true),
            Err(GroupError::UnknownMemberId(_) | GroupError::FencedInstanceId(_)) => {
                // Removed from the group (missed its session): the partitions are lost,
                // a commit would be refused.
                self.revoke(false);
                self.member_id.clear();
            }
            Err(_) => self.revoke(false),
        }
    }

    fn poll(&mut self, timeout: Duration) -> Result<ConsumerRecords> {
        if self.closed {
            return Err(Error::Closed(format!(
                "member {:?} of consumer group {:?}",
                self.member_id, self.config.group_id
            )));
        }
        if self.fetcher.broker.is_closed() {
            return Err(Error::Closed(format!(
                "broker at {}",
                self.fetcher.broker.dir().display()
            )));
        }
        let deadline = Instant::now() + timeout;
        loop {
            if !self.ensure_joined(deadline)? {
                return Ok(ConsumerRecords::default());
            }
            let now = Instant::now();
            let rebalancing = self.rebalance_flag.swap(false, Ordering::AcqRel);
            if rebalancing || now >= self.last_heartbeat + self.config.heartbeat_interval {
                self.heartbeat();
                if !matches!(self.state, MemberState::Stable) {
                    continue;
                }
            }
            if self.config.enable_auto_commit
                && now >= self.last_auto_commit + self.config.auto_commit_interval
            {
                self.last_auto_commit = now;
                let _ = self.commit_current();
            }
            let wake = deadline.min(self.last_heartbeat + self.config.heartbeat_interval);
            let records = self.fetcher.poll_until(wake, Some(&self.rebalance_flag))?;
            if !records.is_empty() || Instant::now() >= deadline {
                return Ok(records);
            }
        }
    }

    fn commit_positions(&mut self, fsync: bool) -> Result<()> {
        self.commit_current()?;
        if fsync {
            let index = self.coordinator().partition_of(&self.config.group_id);
            let offsets = self.fetcher.broker.topic(OFFSETS_TOPIC)?.partition(index)?;
            offsets.sync()?;
        }
        Ok(())
    }

    fn commit_sync(&mut self) -> Result<()> {
        self.commit_positions(true)
    }

    fn commit_async(&mut self) -> Result<()> {
        self.commit_positions(false)
    }

    fn commit_offsets(&mut self, offsets: &[(&str, i32, i64)]) -> Result<()> {
        self.fetcher.commit(
            self.generation,
            &self.member_id,
            self.config.group_instance_id.as_deref(),
            commit_entries(offsets),
        )
    }

    fn close(&mut self) {
        if self.closed {
            return;
        }
        self.closed = true;
        let stable = matches!(self.state, MemberState::Stable);
        if stable && self.config.enable_auto_commit && !std::thread::panicking() {
            let _ = self.commit_current();
        }
        if self.config.group_protocol == GroupProtocol::Consumer {
            self.consumer_leave();
        } else if !self.member_id.is_empty() && self.config.group_instance_id.is_none() {
            // A static member does not leave: it keeps its entry (and partitions) for
            // its session timeout, so that a restart gets them back without a rebalance.
            let _ = self.coordinator().leave_group(
                &self.config.group_id,
                &[LeavingMember {
                    member_id: self.member_id.clone(),
                    group_instance_id: self.config.group_instance_id.clone(),
                }],
            );
        }
        self.fetcher.unassign();
    }
}

/// A member of a consumer group, used from one thread (`Send`, not `Sync`).
///
/// Created with [`GroupConsumer::join`]; it joins on the first `poll`. Dropping it (or
/// [`GroupConsumer::close`]) commits (if auto-commit is on, and not while the thread is
/// panicking) and leaves the group, so the others take its partitions at once.
///
/// Opened on a [`Broker`] in this process (`GroupConsumer::join(&broker, ..)`), or, with
/// the `client` feature, on a `tidelog::Cluster` over the network
/// (`GroupConsumer::join(&cluster, ..)`): the calls, the assignors, the rebalance
/// listener and the commits are the same; over the network the member speaks Kafka's
/// classic group protocol (FindCoordinator, JoinGroup, SyncGroup, Heartbeat,
/// OffsetCommit, OffsetFetch, LeaveGroup) to the group's coordinator, at the versions
/// negotiated with it, and fetches from each partition's leader.
pub struct GroupConsumer(Member);

enum Member {
    Local(Box<LocalMember>),
    // Built only with the `client` feature.
    #[cfg_attr(not(feature = "client"), allow(dead_code))]
    Remote(Box<dyn RemoteMember>),
}

impl std::fmt::Debug for GroupConsumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            Member::Local(m) => m.fmt(f),
            Member::Remote(m) => f
                .debug_struct("RemoteGroupConsumer")
                .field("member_id", &m.member_id())
                .field("generation", &m.generation())
                .field("assignment", &m.assignment())
                .finish(),
        }
    }
}

/// Calls `$call` on the member, in process or over the network.
macro_rules! on_member {
    ($self:ident, $m:ident => $call:expr) => {
        match &$self.0 {
            Member::Local($m) => $call,
            Member::Remote($m) => $call,
        }
    };
    (mut $self:ident, $m:ident => $call:expr) => {
        match &mut $self.0 {
            Member::Local($m) => $call,
            Member::Remote($m) => $call,
        }
    };
}

impl GroupConsumer {
    /// A member of `config.group_id` subscribed to `config.topics`, on `log`
    /// (`&broker`, or `&cluster` with the `client` feature). Checks the topics exist;
    /// the member joins the group on its first `poll`.
    pub fn join(log: impl Into<Source>, config: GroupConfig) -> Result<GroupConsumer> {
        check_config(&config)?;
        match log.into().0 {
            Origin::Local(broker) => Ok(GroupConsumer(Member::Local(Box::new(LocalMember::join(
                &broker, config,
            )?)))),
            Origin::Remote(remote) => {
                Ok(GroupConsumer(Member::Remote(remote.group_member(config)?)))
            }
        }
    }

    /// Sets the rebalance listener.
    pub fn set_listener(&mut self, listener: impl RebalanceListener + 'static) {
        match &mut self.0 {
            Member::Local(m) => m.set_listener(listener),
            Member::Remote(m) => m.set_listener(Box::new(listener)),
        }
    }

    /// The member id the coordinator gave ("" before the first join).
    pub fn member_id(&self) -> &str {
        on_member!(self, m => m.member_id())
    }

    /// The generation the member is in (-1 before the first join).
    pub fn generation(&self) -> i32 {
        on_member!(self, m => m.generation())
    }

    /// The group and this member's generation, member id and instance id (Kafka's
    /// `groupMetadata()`): what a transactional producer's
    /// [`crate::Producer::send_offsets_to_transaction`] takes, so that the offsets of
    /// a member that lost its partitions in a rebalance are refused.
    pub fn group_metadata(&self) -> crate::producer::ConsumerGroupMetadata {
        match &self.0 {
            Member::Local(m) => m.group_metadata(),
            Member::Remote(m) => m.group_metadata(),
        }
    }

    /// The partitions the member owns now.
    pub fn assignment(&self) -> Vec<(String, i32)> {
        on_member!(self, m => m.assignment())
    }

    /// The next offset the member reads from a partition it owns (see
    /// [`Consumer::position`](crate::Consumer::position) for a committed offset that
    /// is not stable yet).
    pub fn position(&mut self, topic: &str, partition: i32) -> Result<i64> {
        on_member!(mut self, m => m.position(topic, partition))
    }

    /// Where the member's reads of a partition it owns end now: its high watermark, or
    /// its last stable offset when reading committed (the lag is this minus the
    /// position).
    pub fn end_offset(&self, topic: &str, partition: i32) -> Result<i64> {
        on_member!(self, m => m.end_offset(topic, partition))
    }

    /// The next poll reads this partition (which the member owns) from `offset`.
    pub fn seek(&mut self, topic: &str, partition: i32, offset: i64) -> Result<()> {
        on_member!(mut self, m => m.seek(topic, partition, offset))
    }

    /// Kafka's `offsetsForTimes` for the partitions the member owns: for each, the
    /// offset of its first record with a timestamp at or after `timestamp` (ms since
    /// the epoch), None when it has none before its end. Over the network: ListOffsets
    /// by timestamp. Seek to one with [`seek`](Self::seek).
    pub fn offsets_for_times(&self, timestamp: i64) -> Result<Vec<(String, i32, Option<i64>)>> {
        on_member!(self, m => m.offsets_for_times(timestamp))
    }

    /// The group's committed offset for a partition, None if there is none.
    pub fn committed(&self, topic: &str, partition: i32) -> Result<Option<i64>> {
        on_member!(self, m => m.committed(topic, partition))
    }

    /// Joins or rejoins the group as needed, heartbeats, auto-commits, and waits up to
    /// `timeout` for records from the member's partitions.
    pub fn poll(&mut self, timeout: Duration) -> Result<ConsumerRecords> {
        on_member!(mut self, m => m.poll(timeout))
    }

    /// Commits the positions of every owned partition and, in process, fsyncs
    /// `__consumer_offsets` before returning (over the network: once the coordinator
    /// answered the OffsetCommit).
    pub fn commit_sync(&mut self) -> Result<()> {
        match &mut self.0 {
            Member::Local(m) => m.commit_sync(),
            Member::Remote(m) => m.commit_positions(),
        }
    }

    /// Commits the positions of every owned partition without waiting. In process: the
    /// commit is made without waiting for the fsync (it is in the page cache, visible to
    /// every member at once, and durable after the next flush). Over the network, as
    /// Kafka's `commitAsync`: the OffsetCommit is handed to the member's committer
    /// thread and this returns at once; commits go out in the order they were made; a
    /// failure is returned by the member's next `commit_async` or `commit_sync` call
    /// (or handed to the callback of [`commit_async_with`](Self::commit_async_with));
    /// `commit_sync`, `commit_offsets`, a rebalance's commit and `close` wait for the
    /// pending asynchronous commits first, so an older commit never lands after a
    /// newer one.
    ///
    /// # Errors
    /// In process, the commit's own refusal; over the network, the failure of an
    /// earlier asynchronous commit that had no callback (this commit is still sent),
    /// or [`Error::Closed`].
    pub fn commit_async(&mut self) -> Result<()> {
        match &mut self.0 {
            Member::Local(m) => m.commit_async(),
            Member::Remote(m) => m.commit_async(None),
        }
    }

    /// [`commit_async`](Self::commit_async) with Kafka's `OffsetCommitCallback`:
    /// `callback` gets the offsets committed (topic, partition, next offset) and the
    /// result. In process it is called before this returns; over the network on the
    /// member's thread, from a later `poll`, commit or `close` (in the order the
    /// commits were made), once the coordinator answered.
    pub fn commit_async_with(
        &mut self,
        callback: impl FnOnce(&[(String, i32, i64)], Result<()>) + Send + 'static,
    ) {
        match &mut self.0 {
            Member::Local(m) => {
                let offsets: Vec<(String, i32, i64)> = m
                    .fetcher
                    .positions()
                    .into_iter()
                    .map(|c| (c.topic, c.partition, c.offset))
                    .collect();
                let result = m.commit_async();
                callback(&offsets, result);
            }
            Member::Remote(m) => {
                let sent = m.commit_async(Some(Box::new(callback)));
                debug_assert!(sent.is_ok(), "the callback gets every outcome");
            }
        }
    }

    /// Commits explicit offsets (topic, partition, next offset to read) for partitions
    /// the member owns, with its generation.
    pub fn commit_offsets(&mut self, offsets: &[(&str, i32, i64)]) -> Result<()> {
        on_member!(mut self, m => m.commit_offsets(offsets))
    }

    /// Commits (if auto-commit is on) and leaves the group. Later polls return
    /// `Error::Closed`.
    pub fn close(&mut self) {
        on_member!(mut self, m => m.close())
    }
}

/// The checks of a group member's settings, in process and over the network.
fn check_config(config: &GroupConfig) -> Result<()> {
    if config.group_id.is_empty() {
        return Err(Error::InvalidConfig {
            key: "group.id".into(),
            reason: "a consumer group needs a non-empty group id".into(),
        });
    }
    if config.topics.is_empty() || config.assignors.is_empty() {
        return Err(Error::InvalidConfig {
            key: "subscription".into(),
            reason: format!(
                "group {:?} needs at least one topic and one assignor",
                config.group_id
            ),
        });
    }
    Ok(())
}

/// What [`GroupConsumer::commit_async_with`] calls with the offsets it committed and
/// the result (Kafka's `OffsetCommitCallback`).
pub(crate) type OffsetCommitCallback =
    Box<dyn FnOnce(&[(String, i32, i64)], Result<()>) + Send + 'static>;

/// The former name of [`GroupConsumer`].
#[deprecated(
    since = "0.2.0",
    note = "renamed GroupConsumer: it is one member (consumer) of a group"
)]
pub type ConsumerGroup = GroupConsumer;

impl Drop for LocalMember {
    fn drop(&mut self) {
        self.close();
    }
}
