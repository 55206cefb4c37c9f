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
//!
//! Each group API goes at the highest version both the member and the coordinator
//! speak. A coordinator that advertises flexible versions of JoinGroup but closes the
//! connection on them (twice, the second time on a fresh connection) and then answers
//! JoinGroup v5 is asked, from then on, in the group APIs' versions before the flexible
//! ones: JoinGroup 5, SyncGroup 3, Heartbeat 3, and LeaveGroup 2 (before members are
//! listed in a batch). librdkafka's mock cluster (2.12) is such a coordinator: it
//! advertises JoinGroup v6, SyncGroup v4, Heartbeat v4 and LeaveGroup v4, but reads the
//! bodies of JoinGroup, SyncGroup and LeaveGroup as the versions its own client sends
//! (JoinGroup 5, SyncGroup 3, LeaveGroup 1): it closes the connection on JoinGroup v6
//! and misreads (and may crash on) a flexible SyncGroup. A SyncGroup answer whose
//! assignment is null (the mock sends one with its errors, and to a member the leader
//! gave nothing) is read as an
//! empty assignment, as Kafka's client reads it: no partitions.

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

use std::ops::RangeInclusive;
use std::sync::Mutex;
use std::sync::mpsc::{Receiver, Sender};

use bytes::BytesMut;
use kafka_protocol::messages::SyncGroupResponse;
use kafka_protocol::protocol::buf::ByteBuf;
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Message, Request};
use std::thread::JoinHandle;

use super::cluster::{Cluster, api_version, unreachable};
use super::consumer::{ATTEMPTS, Reader, kstr, millis};
use crate::consumer::{
    Assignment, ConsumerRecords, GroupConfig, GroupProtocol, OffsetCommitCallback,
    RebalanceContext, RebalanceListener, RemoteRebalance, Subscription,
};
use crate::error::{Error, ErrorCode, Result};
use crate::producer::ConsumerGroupMetadata;

/// JoinGroup versions: 1 (the rebalance timeout) to 9 (`skip_assignment`); and the
/// highest for a coordinator that does not read the flexible versions (see the module
/// documentation).
const JOIN_GROUP: (RangeInclusive<i16>, i16) = (1..=9, 5);
/// SyncGroup versions: 0 to 5 (3 for a coordinator that does not read flexible ones).
const SYNC_GROUP: (RangeInclusive<i16>, i16) = (0..=5, 3);
/// Heartbeat versions: 0 to 4 (3 for a coordinator that does not read flexible ones).
const HEARTBEAT: (RangeInclusive<i16>, i16) = (0..=4, 3);
/// LeaveGroup versions: 0 to 5 (2 for a coordinator that does not read flexible ones).
const LEAVE_GROUP: (RangeInclusive<i16>, i16) = (0..=5, 2);
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
    /// The coordinators (addresses) that close the connection on the flexible versions
    /// of JoinGroup and answer v5: asked in the group APIs' versions before the
    /// flexible ones.
    flexible_refused: Mutex<BTreeSet<String>>,
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
            flexible_refused: Mutex::new(BTreeSet::new()),
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
        let (broker, version, joined) = self.call_group(JOIN_GROUP, build, timeout)?;
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
        let (broker, version, synced) =
            self.call_group(SYNC_GROUP, |v| SyncGroup(build(v)), timeout)?;
        let synced = synced.0;
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

    /// Sends a group request to the coordinator at the highest version both speak of
    /// `versions` (the member's range, and the highest for a coordinator that does not
    /// read flexible versions); returns the coordinator's address, the version and the
    /// answer. A coordinator that closes the connection on a JoinGroup in a flexible
    /// version twice (the second time on a fresh connection) is asked in v5, and when
    /// it answers that, in the versions before the flexible ones from then on (see the
    /// module documentation).
    fn call_group<R: Request>(
        &self,
        versions: (RangeInclusive<i16>, i16),
        build: impl Fn(i16) -> R,
        timeout: Duration,
    ) -> Result<(String, i16, R::Response)> {
        let (ours, cap) = versions;
        let addr = self.reader.coordinator()?;
        let refused = self
            .flexible_refused
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(&addr);
        let before = *ours.start()..=cap;
        if refused {
            return self.reader.call_coordinator(before, &build, timeout);
        }
        let first = self.reader.call_coordinator(ours.clone(), &build, timeout);
        let closed = |e: &Error| {
            matches!(e, Error::Io { source, .. } if matches!(
                source.kind(),
                std::io::ErrorKind::UnexpectedEof
                    | std::io::ErrorKind::ConnectionReset
                    | std::io::ErrorKind::ConnectionAborted
                    | std::io::ErrorKind::BrokenPipe
            ))
        };
        match first {
            Err(e) if R::KEY == JoinGroupRequest::KEY && closed(&e) => {}
            other => return other,
        }
        // Connects afresh (the failure dropped the connection) and negotiates.
        let version = self.reader.cluster.negotiated::<R>(&addr, ours.clone())?;
        let second = self.reader.call_coordinator(ours, &build, timeout);
        match second {
            Err(e) if closed(&e) && version > cap => {
                let answered = self.reader.call_coordinator(before, &build, timeout)?;
                self.flexible_refused
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(addr);
                Ok(answered)
            }
            other => other,
        }
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
                true => request.with_group_instance_id(instance.clone()),
                false => request,
            }
        };
        let timeout = self.reader.cluster.request_timeout();
        let (broker, version, response) = match self.call_group(HEARTBEAT, build, timeout) {
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
            let _ = self.call_group(LEAVE_GROUP, build, timeout);
        }
        self.reader.owned.clear();
    }
}

impl Drop for RemoteMember {
    fn drop(&mut self) {
        crate::consumer::RemoteMember::close(self);
    }
}

/// SyncGroup, whose answer reads a null assignment as an empty one (no partitions), as
/// Kafka's client does: librdkafka's mock cluster answers null with its errors and to a
/// member the leader assigned nothing.
#[derive(Debug, Clone, Default)]
struct SyncGroup(SyncGroupRequest);

/// The answer to [`SyncGroup`].
#[derive(Debug, Clone, Default)]
struct Synced(SyncGroupResponse);

/// The delegating impls of a wrapper `$outer($inner)`: the same messages, versions,
/// encoding and headers as the wrapped type.
macro_rules! same_message_as {
    ($outer:ident, $inner:ty) => {
        impl Message for $outer {
            const VERSIONS: kafka_protocol::protocol::VersionRange = <$inner>::VERSIONS;
            const DEPRECATED_VERSIONS: Option<kafka_protocol::protocol::VersionRange> =
                <$inner>::DEPRECATED_VERSIONS;
        }

        impl Encodable for $outer {
            fn encode<B: kafka_protocol::protocol::buf::ByteBufMut>(
                &self,
                buf: &mut B,
                version: i16,
            ) -> anyhow::Result<()> {
                self.0.encode(buf, version)
            }
            fn compute_size(&self, version: i16) -> anyhow::Result<usize> {
                self.0.compute_size(version)
            }
        }

        impl HeaderVersion for $outer {
            fn header_version(version: i16) -> i16 {
                <$inner as HeaderVersion>::header_version(version)
            }
        }
    };
}

same_message_as!(SyncGroup, SyncGroupRequest);
same_message_as!(Synced, SyncGroupResponse);

impl Decodable for SyncGroup {
    fn decode<B: ByteBuf>(buf: &mut B, version: i16) -> anyhow::Result<Self> {
        SyncGroupRequest::decode(buf, version).map(SyncGroup)
    }
}

impl Request for SyncGroup {
    const KEY: i16 = SyncGroupRequest::KEY;
    type Response = Synced;
}

impl Decodable for Synced {
    fn decode<B: ByteBuf>(buf: &mut B, version: i16) -> anyhow::Result<Self> {
        let raw = buf.get_bytes(buf.remaining());
        let mut mended = null_assignment_as_empty(raw, version);
        SyncGroupResponse::decode(&mut mended, version).map(Synced)
    }
}

/// A SyncGroup answer of `version` whose assignment is null (length -1, or 0 in the
/// compact form of the flexible versions) with an empty one instead; any other answer
/// as it is (the decoder judges it).
fn null_assignment_as_empty(raw: Bytes, version: i16) -> Bytes {
    // throttle_time_ms (v1+), error_code.
    let mut at = if version >= 1 { 6 } else { 2 };
    if version < 4 {
        if raw.get(at..at + 4) != Some(&[0xff; 4][..]) {
            return raw;
        }
        let mut mended = BytesMut::from(&raw[..]);
        mended[at..at + 4].copy_from_slice(&0i32.to_be_bytes());
        return mended.freeze();
    }
    if version >= 5 {
        // protocol_type and protocol_name: compact nullable strings (length + 1).
        for _ in 0..2 {
            let Some((n, width)) = uvarint(raw.get(at..).unwrap_or_default()) else {
                return raw;
            };
            at += width + (n as usize).saturating_sub(1);
        }
    }
    if raw.get(at) != Some(&0) {
        return raw;
    }
    let mut mended = BytesMut::from(&raw[..]);
    mended[at] = 1;
    mended.freeze()
}

/// An unsigned varint at the start of `bytes`: its value and width.
fn uvarint(bytes: &[u8]) -> Option<(u64, usize)> {
    let mut value = 0u64;
    for (i, b) in bytes.iter().enumerate().take(10) {
        value |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Some((value, i + 1));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::protocol::StrBytes;

    /// A SyncGroup answer of `version` with error `code` and an empty assignment,
    /// encoded, then its assignment made null.
    fn null_answer(version: i16, code: i16) -> Bytes {
        let mut answer = SyncGroupResponse::default().with_error_code(code);
        if version >= 5 {
            answer = answer
                .with_protocol_type(Some(StrBytes::from_static_str("consumer")))
                .with_protocol_name(Some(StrBytes::from_static_str("range")));
        }
        let mut buf = BytesMut::new();
        answer.encode(&mut buf, version).unwrap();
        // The empty assignment is the last field before the tagged fields (flexible
        // versions: a 1 for "0 bytes", then 0 tagged fields).
        let len = buf.len();
        match version >= 4 {
            true => {
                assert_eq!(&buf[len - 2..], &[1, 0]);
                buf[len - 2] = 0;
            }
            false => {
                assert_eq!(&buf[len - 4..], &[0, 0, 0, 0]);
                buf[len - 4..].copy_from_slice(&(-1i32).to_be_bytes());
            }
        }
        buf.freeze()
    }

    #[test]
    fn a_null_assignment_is_read_as_no_partitions_in_every_syncgroup_version() {
        for version in 0..=5 {
            let raw = null_answer(version, 27);
            // As it is, the decoder refuses it (the field is not nullable).
            assert!(
                SyncGroupResponse::decode(&mut raw.clone(), version).is_err(),
                "v{version}"
            );
            let Synced(answer) = Synced::decode(&mut raw.clone(), version).unwrap();
            assert_eq!(answer.error_code, 27, "v{version}");
            assert!(answer.assignment.is_empty(), "v{version}");
            if version >= 5 {
                assert_eq!(answer.protocol_name.as_deref(), Some("range"));
            }
        }
    }

    #[test]
    fn an_assignment_is_read_as_it_is() {
        for version in 0..=5 {
            let assignment = Bytes::from_static(b"\x00\x01rest");
            let mut buf = BytesMut::new();
            SyncGroupResponse::default()
                .with_assignment(assignment.clone())
                .encode(&mut buf, version)
                .unwrap();
            let Synced(answer) = Synced::decode(&mut buf.freeze(), version).unwrap();
            assert_eq!(answer.assignment, assignment, "v{version}");
        }
    }
}
