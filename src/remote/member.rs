//! A [`GroupConsumer`](crate::GroupConsumer) over the network: Kafka's classic group
//! protocol, at the versions negotiated with the group's coordinator.
//!
//! The member finds the coordinator (FindCoordinator), joins (JoinGroup with protocol
//! type `consumer`, offering the assignors of its [`GroupConfig`]; the leader runs the
//! chosen [`Assignor`](crate::consumer::Assignor) over the members' subscriptions and
//! the partition counts from Metadata, and hands the assignments in with SyncGroup),
//! heartbeats from `poll` every `heartbeat_interval`, auto-commits every
//! `auto_commit_interval` and before giving partitions up, and leaves (LeaveGroup) on
//! close unless it is a static member (`group.instance.id`). A heartbeat answered
//! REBALANCE_IN_PROGRESS makes it rejoin: an eager member commits, tells the listener
//! and gives up every partition first; a cooperative one keeps its partitions, sends
//! them as `owned_partitions`, and gives up (committing, telling the listener) only
//! those the new assignment moves, then rejoins once more so that their new owner gets
//! them. ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID and FENCED_INSTANCE_ID mean its
//! partitions went to others: it drops them without committing and rejoins.
//! NOT_COORDINATOR and its kin make it look the coordinator up again.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    GroupId, HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest, SyncGroupRequest,
};

use std::sync::mpsc::{Receiver, Sender};
use std::thread::JoinHandle;

use super::cluster::{Cluster, api_version, unreachable};
use super::consumer::{ATTEMPTS, Reader, kstr, millis};
use crate::consumer::{
    Assignment, ConsumerRecords, GroupConfig, GroupProtocol, OffsetCommitCallback,
    RebalanceContext, RebalanceListener, RemoteRebalance, Subscription,
};
use crate::error::{Error, ErrorCode, Result};
use crate::producer::ConsumerGroupMetadata;

/// JoinGroup versions: 1 (the rebalance timeout) to 9 (`skip_assignment`).
const JOIN_GROUP: std::ops::RangeInclusive<i16> = 1..=9;
/// SyncGroup versions: 0 to 5.
const SYNC_GROUP: std::ops::RangeInclusive<i16> = 0..=5;
/// Heartbeat versions: 0 to 4.
const HEARTBEAT: std::ops::RangeInclusive<i16> = 0..=4;
/// LeaveGroup versions: 0 to 5.
const LEAVE_GROUP: std::ops::RangeInclusive<i16> = 0..=5;
/// Kafka's FENCED_INSTANCE_ID: another member took this static member's instance id.
const FENCED_INSTANCE_ID: i16 = 82;

/// Topic partitions, as an assignment lists them.
type Partitions = Vec<(String, i32)>;

/// Offsets to commit: (topic, partition, next offset).
type Offsets = Vec<(String, i32, i64)>;

/// An asynchronous commit: the member's identity when it was made (generation, member
/// id, instance id), the offsets, and the callback of its result.
type AsyncCommit = (
    (i32, String, Option<String>),
    Offsets,
    Option<OffsetCommitCallback>,
);

/// The committer thread of a member's asynchronous commits: it sends them one at a
/// time, in the order they were made, on connections of its own (a member's long
/// Fetch does not hold them up), and hands each result back.
struct Committer {
    jobs: Option<Sender<AsyncCommit>>,
    results: Receiver<(Offsets, Result<()>, Option<OffsetCommitCallback>)>,
    /// Commits sent whose result was not taken yet.
    in_flight: usize,
    thread: Option<JoinHandle<()>>,
}

impl Committer {
    fn start(reader: &Reader) -> Result<Committer> {
        let committer = Reader::new(reader.cluster.with_own_connections(), reader.config.clone());
        let (jobs, inbox) = std::sync::mpsc::channel::<AsyncCommit>();
        let (outbox, results) = std::sync::mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("tidelog-commit".into())
            .spawn(move || {
                for ((generation, member_id, instance), offsets, callback) in inbox {
                    let who = (generation, member_id.as_str(), instance.as_deref());
                    let result = committer.commit(who, &offsets);
                    if outbox.send((offsets, result, callback)).is_err() {
                        return;
                    }
                }
            })
            .map_err(|e| Error::io("spawn the commit thread", "<consumer>", e))?;
        Ok(Committer {
            jobs: Some(jobs),
            results,
            in_flight: 0,
            thread: Some(thread),
        })
    }
}

impl Drop for Committer {
    fn drop(&mut self) {
        // Closing the queue ends the thread after the commit it is sending.
        self.jobs = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A member of a consumer group of a cluster, as Kafka's `KafkaConsumer` with
/// `subscribe()` is. See the [module documentation](self).
pub(super) struct RemoteMember {
    reader: Reader,
    config: GroupConfig,
    member_id: String,
    generation: i32,
    listener: Option<Box<dyn RebalanceListener>>,
    needs_rejoin: bool,
    last_heartbeat: Instant,
    last_auto_commit: Instant,
    closed: bool,
    /// The thread of asynchronous commits, from the first one.
    committer: Option<Committer>,
    /// The failure of an asynchronous commit without a callback, not returned yet.
    async_failure: Option<Error>,
}

/// What a listener may do while a member over the network gives partitions up.
struct Revoking<'a> {
    reader: &'a Reader,
    generation: i32,
    member_id: &'a str,
    instance: Option<&'a str>,
}

impl RemoteRebalance for Revoking<'_> {
    fn positions(&self) -> Vec<(String, i32, i64)> {
        self.reader.positions()
    }

    fn commit_sync(&self) -> Result<()> {
        let who = (self.generation, self.member_id, self.instance);
        self.reader.commit(who, &self.reader.positions())
    }
}

impl RemoteMember {
    /// A member of `config.group_id` on `cluster`; it joins on its first poll.
    ///
    /// # Errors
    /// [`Error::UnknownTopic`] for a subscribed topic the cluster does not have;
    /// [`Error::InvalidConfig`] for `group.protocol` consumer (KIP-848), which only the
    /// in-process member speaks.
    pub(super) fn new(cluster: Cluster, config: GroupConfig) -> Result<RemoteMember> {
        if config.group_protocol == GroupProtocol::Consumer {
            return Err(Error::InvalidConfig {
                key: "group.protocol".into(),
                reason: "a member over the network speaks the classic protocol only".into(),
            });
        }
        for t in &config.topics {
            cluster.partition_count(t)?;
        }
        let now = Instant::now();
        Ok(RemoteMember {
            reader: Reader::new(cluster, config.consumer_config()),
            config,
            member_id: String::new(),
            generation: -1,
            listener: None,
            needs_rejoin: true,
            last_heartbeat: now,
            last_auto_commit: now,
            closed: false,
            committer: None,
            async_failure: None,
        })
    }

    /// Takes the results of the asynchronous commits that have one (`wait`: waits for
    /// every pending one): calls their callbacks, in the order the commits were made,
    /// and keeps the first failure of one without a callback.
    fn settle_async(&mut self, wait: bool) {
        let Some(committer) = self.committer.as_mut() else {
            return;
        };
        let mut settled = Vec::new();
        while committer.in_flight > 0 {
            let next = match wait {
                true => committer.results.recv().ok(),
                false => committer.results.try_recv().ok(),
            };
            let Some(result) = next else {
                break;
            };
            committer.in_flight -= 1;
            settled.push(result);
        }
        for (offsets, result, callback) in settled {
            match callback {
                Some(callback) => callback(&offsets, result),
                None => {
                    if let Err(e) = result {
                        self.async_failure.get_or_insert(e);
                    }
                }
            }
        }
    }

    /// Kafka's `commitAsync`: hands the commit of the positions to the committer
    /// thread. See `GroupConsumer::commit_async`.
    fn send_async(&mut self, callback: Option<OffsetCommitCallback>) -> Result<()> {
        // A commit that cannot be sent: its callback gets the error, else the caller.
        let refuse = |callback: Option<OffsetCommitCallback>, e: Error| match callback {
            Some(callback) => {
                callback(&[], Err(e));
                Ok(())
            }
            None => Err(e),
        };
        if let Err(e) = self.check_open() {
            return refuse(callback, e);
        }
        self.settle_async(false);
        if self.committer.is_none() {
            match Committer::start(&self.reader) {
                Ok(c) => self.committer = Some(c),
                Err(e) => return refuse(callback, e),
            }
        }
        let report = callback.is_none();
        let who = (
            self.generation,
            self.member_id.clone(),
            self.config.group_instance_id.clone(),
        );
        let job = (who, self.reader.positions(), callback);
        let committer = self.committer.as_mut().expect("started above");
        let sent = match committer.jobs.as_ref() {
            Some(jobs) => jobs.send(job).map_err(|unsent| unsent.0.2),
            None => Err(job.2),
        };
        if let Err(callback) = sent {
            // The thread is gone (it only stops once its queue is closed).
            let e = Error::Closed(format!(
                "asynchronous commits of consumer group {:?}",
                self.config.group_id
            ));
            return refuse(callback, e);
        }
        committer.in_flight += 1;
        match self.async_failure.take() {
            Some(e) if report => Err(e),
            kept => {
                self.async_failure = kept;
                Ok(())
            }
        }
    }

    fn instance(&self) -> Option<&str> {
        self.config.group_instance_id.as_deref()
    }

    /// True if every assignor is cooperative (one eager assignor makes the group eager,
    /// as in Kafka).
    fn cooperative(&self) -> bool {
        self.config.assignors.iter().all(|a| a.is_cooperative())
    }

    /// Commits the positions and waits for the answer, after the pending asynchronous
    /// commits (an older commit must not land after this one).
    fn commit_current(&mut self) -> Result<()> {
        self.settle_async(true);
        let who = (self.generation, self.member_id.as_str(), self.instance());
        self.reader.commit(who, &self.reader.positions())
    }

    fn notify_assigned(&mut self, partitions: &[(String, i32)]) {
        if let Some(mut l) = self.listener.take() {
            l.on_partitions_assigned(partitions);
            self.listener = Some(l);
        }
    }

    fn notify_revoked(&mut self, partitions: &[(String, i32)]) {
        if let Some(mut l) = self.listener.take() {
            // What the listener commits lands after every commit made before.
            self.settle_async(true);
            let revoking = Revoking {
                reader: &self.reader,
                generation: self.generation,
                member_id: &self.member_id,
                instance: self.config.group_instance_id.as_deref(),
            };
            l.on_partitions_revoked(&RebalanceContext::remote(&revoking), partitions);
            self.listener = Some(l);
        }
    }

    /// Gives up `partitions` before rejoining: auto-commit (if `commit`), listener.
    fn revoke(&mut self, partitions: &[(String, i32)], commit: bool) {
        if partitions.is_empty() {
            return;
        }
        if commit && self.config.enable_auto_commit {
            let _ = self.commit_current();
        }
        self.notify_revoked(partitions);
    }

    /// The group moves on: rejoin, giving up every partition first (eager; `commit`
    /// says whether their positions may still be committed), or keeping them
    /// (cooperative, when the membership still stands).
    fn prepare_rejoin(&mut self, commit: bool) {
        if commit && self.cooperative() {
            if self.config.enable_auto_commit {
                let _ = self.commit_current();
            }
        } else {
            let all = self.reader.assignment();
            self.revoke(&all, commit);
            self.reader.owned.clear();
        }
        self.needs_rejoin = true;
    }

    /// Joins the group again while it must (first join, a rebalance, a lost
    /// membership).
    fn ensure_joined(&mut self) -> Result<()> {
        let mut attempt = 0;
        while self.needs_rejoin {
            attempt += 1;
            let last = attempt >= ATTEMPTS;
            match self.join_once() {
                Ok(true) => {}
                Ok(false) if last => {
                    return Err(Error::Timeout(format!(
                        "joining consumer group {:?}: no assignment after {ATTEMPTS} attempts",
                        self.config.group_id
                    )));
                }
                Ok(false) => std::thread::sleep(self.reader.cluster.retry_backoff()),
                Err(e) if unreachable(&e) && !last => {
                    std::thread::sleep(self.reader.cluster.retry_backoff())
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Acts on a group error `code` of JoinGroup, SyncGroup or Heartbeat: true to try
    /// again (the coordinator moved, the group rebalances, the membership is gone);
    /// else the error.
    fn after_error(&mut self, api: String, broker: &str, code: i16) -> Result<()> {
        if self.reader.coordinator_moved(code) {
            return Ok(());
        }
        match ErrorCode::from_code(code) {
            ErrorCode::REBALANCE_IN_PROGRESS | ErrorCode::ILLEGAL_GENERATION => Ok(()),
            ErrorCode::UNKNOWN_MEMBER_ID => {
                self.member_id.clear();
                self.generation = -1;
                Ok(())
            }
            // FENCED_INSTANCE_ID and the rest: final.
            _ => Err(self.reader.group_error(api, broker, code)),
        }
    }

    /// One JoinGroup and SyncGroup. True when the member has its assignment (it may
    /// still have to rejoin, after giving up partitions under a cooperative assignor);
    /// false to try again.
    fn join_once(&mut self) -> Result<bool> {
        let cooperative = self.cooperative();
        let mut owned: BTreeMap<String, Vec<i32>> = BTreeMap::new();
        if cooperative {
            for (t, p) in self.reader.assignment() {
                owned.entry(t).or_default().push(p);
            }
        }
        let metadata = Bytes::from(
            Subscription {
                topics: self.config.topics.clone(),
                user_data: None,
                owned_partitions: owned.into_iter().collect(),
            }
            .encode(),
        );
        let group = GroupId(kstr(&self.config.group_id));
        let instance = self.instance().map(kstr);
        let build = |version: i16| {
            let request = JoinGroupRequest::default()
                .with_group_id(group.clone())
                .with_session_timeout_ms(millis(self.config.session_timeout))
                .with_rebalance_timeout_ms(millis(self.config.rebalance_timeout))
                .with_member_id(kstr(&self.member_id))
                .with_protocol_type(kstr("consumer"))
                .with_protocols(
                    self.config
                        .assignors
                        .iter()
                        .map(|a| {
                            JoinGroupRequestProtocol::default()
                                .with_name(kstr(a.name()))
                                .with_metadata(metadata.clone())
                        })
                        .collect(),
                );
            match version >= 5 {
                true => request.with_group_instance_id(instance.clone()),
                false => request,
            }
        };
        // The coordinator holds a JoinGroup until the round ends (at most the
        // rebalance timeout).
        let timeout = self.config.rebalance_timeout + self.reader.cluster.request_timeout();
        let (broker, version, joined) = self.reader.call_coordinator(JOIN_GROUP, build, timeout)?;
        if joined.error_code == ErrorCode::MEMBER_ID_REQUIRED.code() {
            // Join again at once with the id given.
            self.member_id = joined.member_id.to_string();
            return Ok(false);
        }
        if joined.error_code != 0 {
            let api = api_version::<JoinGroupRequest>(version);
            return self
                .after_error(api, &broker, joined.error_code)
                .map(|()| false);
        }
        self.member_id = joined.member_id.to_string();
        self.generation = joined.generation_id;
        let protocol = joined
            .protocol_name
            .as_ref()
            .map(|p| p.to_string())
            .unwrap_or_default();
        // From v9 a returning static leader is told to skip the assignment.
        let assignments = if joined.leader == joined.member_id && !joined.skip_assignment {
            self.assign(&protocol, &joined.members)?
        } else {
            Vec::new()
        };
        let build = |version: i16| {
            let request = SyncGroupRequest::default()
                .with_group_id(group.clone())
                .with_generation_id(self.generation)
                .with_member_id(kstr(&self.member_id))
                .with_assignments(assignments.clone());
            let request = match version >= 3 {
                true => request.with_group_instance_id(instance.clone()),
                false => request,
            };
            match version >= 5 {
                true => request
                    .with_protocol_type(Some(kstr("consumer")))
                    .with_protocol_name(Some(kstr(&protocol))),
                false => request,
            }
        };
        let (broker, version, synced) = self.reader.call_coordinator(SYNC_GROUP, build, timeout)?;
        if synced.error_code != 0 {
            let api = api_version::<SyncGroupRequest>(version);
            return self
                .after_error(api, &broker, synced.error_code)
                .map(|()| false);
        }
        let assignment = match synced.assignment.is_empty() {
            true => Assignment::default(),
            false => Assignment::decode(&synced.assignment)?,
        };
        let list: Partitions = assignment
            .partitions
            .into_iter()
            .flat_map(|(t, ps)| ps.into_iter().map(move |p| (t.clone(), p)))
            .collect();
        self.apply(&list, cooperative);
        self.last_heartbeat = Instant::now();
        Ok(true)
    }

    /// Takes the assignment `list`: keeps the positions of partitions that stay and
    /// starts the new ones at their committed offsets. Under a cooperative assignor,
    /// the partitions it lost are given up (committed first) and the member rejoins.
    fn apply(&mut self, list: &[(String, i32)], cooperative: bool) {
        let current = self.reader.assignment();
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
        self.needs_rejoin = cooperative && !revoked.is_empty();
        self.revoke(&revoked, true);
        self.reader.update_assignment(list);
        self.notify_assigned(&added);
    }

    /// The leader's part: the assignments of every member, by the assignor `protocol`.
    fn assign(
        &mut self,
        protocol: &str,
        members: &[JoinGroupResponseMember],
    ) -> Result<Vec<SyncGroupRequestAssignment>> {
        let assignor = self
            .config
            .assignors
            .iter()
            .find(|a| a.name() == protocol)
            .cloned()
            .ok_or_else(|| {
                Error::corrupt(
                    format!("JoinGroup answer of group {:?}", self.config.group_id),
                    0,
                    format!(
                        "the group chose assignor {protocol:?}, which this member does not offer"
                    ),
                )
            })?;
        let mut subscriptions = BTreeMap::new();
        let mut topics = BTreeSet::new();
        for m in members {
            // A member whose metadata cannot be read gets nothing rather than failing
            // the whole group.
            let s = Subscription::decode(&m.metadata).unwrap_or_default();
            topics.extend(s.topics.iter().cloned());
            subscriptions.insert(m.member_id.to_string(), s);
        }
        let mut counts = BTreeMap::new();
        for t in topics {
            self.reader.cluster.invalidate(&t);
            if let Ok(n) = self.reader.cluster.partition_count(&t) {
                counts.insert(t, n);
            }
        }
        let plan = assignor.assign(&counts, &subscriptions);
        Ok(subscriptions
            .keys()
            .map(|id| {
                let bytes = Assignment {
                    partitions: plan.get(id).cloned().unwrap_or_default(),
                    user_data: None,
                }
                .encode();
                SyncGroupRequestAssignment::default()
                    .with_member_id(kstr(id))
                    .with_assignment(Bytes::from(bytes))
            })
            .collect())
    }

    /// Sends a heartbeat if one is due, and acts on its answer.
    fn heartbeat_if_due(&mut self) -> Result<()> {
        if self.needs_rejoin || self.last_heartbeat.elapsed() < self.config.heartbeat_interval {
            return Ok(());
        }
        let instance = self.instance().map(kstr);
        let build = |version: i16| {
            let request = HeartbeatRequest::default()
                .with_group_id(GroupId(kstr(&self.config.group_id)))
                .with_generation_id(self.generation)
                .with_member_id(kstr(&self.member_id));
            match version >= 3 {
                true => request.with_group_instance_id(instance),
                false => request,
            }
        };
        let timeout = self.reader.cluster.request_timeout();
        let (broker, version, response) =
            match self.reader.call_coordinator(HEARTBEAT, build, timeout) {
                Ok(r) => r,
                // The coordinator is gone: the next heartbeat asks the new one.
                Err(e) if unreachable(&e) => return Ok(()),
                Err(e) => return Err(e),
            };
        self.last_heartbeat = Instant::now();
        let code = response.error_code;
        if code == 0 || self.reader.coordinator_moved(code) {
            return Ok(());
        }
        match ErrorCode::from_code(code) {
            ErrorCode::REBALANCE_IN_PROGRESS => self.prepare_rejoin(true),
            ErrorCode::ILLEGAL_GENERATION => self.prepare_rejoin(false),
            ErrorCode::UNKNOWN_MEMBER_ID => {
                self.prepare_rejoin(false);
                self.member_id.clear();
                self.generation = -1;
            }
            _ if code == FENCED_INSTANCE_ID => {
                self.prepare_rejoin(false);
                let api = api_version::<HeartbeatRequest>(version);
                return Err(self.reader.group_error(api, &broker, code));
            }
            _ => {
                let api = api_version::<HeartbeatRequest>(version);
                return Err(self.reader.group_error(api, &broker, code));
            }
        }
        Ok(())
    }

    fn check_open(&self) -> Result<()> {
        match self.closed {
            true => Err(Error::Closed(format!(
                "member {:?} of consumer group {:?}",
                self.member_id, self.config.group_id
            ))),
            false => Ok(()),
        }
    }
}

impl crate::consumer::RemoteMember for RemoteMember {
    fn set_listener(&mut self, listener: Box<dyn RebalanceListener>) {
        self.listener = Some(listener);
    }

    fn member_id(&self) -> &str {
        &self.member_id
    }

    fn generation(&self) -> i32 {
        self.generation
    }

    fn group_metadata(&self) -> ConsumerGroupMetadata {
        ConsumerGroupMetadata {
            group_id: self.config.group_id.clone(),
            generation_id: self.generation,
            member_id: self.member_id.clone(),
            group_instance_id: self.config.group_instance_id.clone(),
        }
    }

    fn assignment(&self) -> Vec<(String, i32)> {
        self.reader.assignment()
    }

    fn position(&mut self, topic: &str, partition: i32) -> Result<i64> {
        self.reader.position(topic, partition)
    }

    fn end_offset(&self, topic: &str, partition: i32) -> Result<i64> {
        self.reader.end_offset(topic, partition)
    }

    fn seek(&mut self, topic: &str, partition: i32, offset: i64) -> Result<()> {
        self.reader.seek(topic, partition, offset)
    }

    fn offsets_for_times(&self, timestamp: i64) -> Result<Vec<(String, i32, Option<i64>)>> {
        self.reader.offsets_for_times(timestamp)
    }

    fn committed(&self, topic: &str, partition: i32) -> Result<Option<i64>> {
        self.reader.committed(topic, partition)
    }

    fn poll(&mut self, timeout: Duration) -> Result<ConsumerRecords> {
        self.check_open()?;
        self.settle_async(false);
        let deadline = Instant::now() + timeout;
        loop {
            self.ensure_joined()?;
            self.heartbeat_if_due()?;
            if self.needs_rejoin {
                continue;
            }
            let now = Instant::now();
            if self.config.enable_auto_commit
                && now >= self.last_auto_commit + self.config.auto_commit_interval
            {
                self.last_auto_commit = now;
                let _ = self.commit_current();
            }
            self.reader.resolve_positions()?;
            let wait = deadline
                .saturating_duration_since(now)
                .min(self.config.heartbeat_interval);
            let records = self.reader.fetch(wait)?;
            if !records.is_empty() || Instant::now() >= deadline {
                return Ok(records);
            }
        }
    }

    fn commit_positions(&mut self) -> Result<()> {
        self.check_open()?;
        self.commit_current()?;
        match self.async_failure.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    fn commit_async(&mut self, callback: Option<OffsetCommitCallback>) -> Result<()> {
        self.send_async(callback)
    }

    fn commit_offsets(&mut self, offsets: &[(&str, i32, i64)]) -> Result<()> {
        self.check_open()?;
        self.settle_async(true);
        let offsets: Vec<(String, i32, i64)> = offsets
            .iter()
            .map(|(t, p, o)| (t.to_string(), *p, *o))
            .collect();
        let who = (self.generation, self.member_id.as_str(), self.instance());
        self.reader.commit(who, &offsets)
    }

    /// Commits (if auto-commit is on) and leaves the group (LeaveGroup), so that its
    /// partitions go to the other members at once; a static member does not leave, as
    /// in Kafka: its partitions wait for it until its session expires. Errors are
    /// ignored (the coordinator removes a member that went away when its session
    /// expires).
    fn close(&mut self) {
        if self.closed {
            return;
        }
        self.closed = true;
        // Pending asynchronous commits are answered (and their callbacks called)
        // before the member leaves.
        self.settle_async(true);
        self.committer = None;
        let joined = !self.needs_rejoin && !self.member_id.is_empty();
        if joined && self.config.enable_auto_commit && !std::thread::panicking() {
            let _ = self.commit_current();
        }
        if joined && self.config.group_instance_id.is_none() {
            let member_id = kstr(&self.member_id);
            let build = |version: i16| {
                let request = LeaveGroupRequest::default()
                    .with_group_id(GroupId(kstr(&self.config.group_id)));
                match version >= 3 {
                    true => request.with_members(vec![
                        MemberIdentity::default().with_member_id(member_id.clone()),
                    ]),
                    false => request.with_member_id(member_id.clone()),
                }
            };
            let timeout = self.reader.cluster.request_timeout();
            let _ = self.reader.call_coordinator(LEAVE_GROUP, build, timeout);
        }
        self.reader.owned.clear();
    }
}

impl Drop for RemoteMember {
    fn drop(&mut self) {
        crate::consumer::RemoteMember::close(self);
    }
}
