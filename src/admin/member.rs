//! [`GroupMember`]: a member of a consumer group of a running node or cluster, over the
//! Kafka protocol. What `tidelog consume --group G --bootstrap ADDRS` runs.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    FetchRequest, GroupId, HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest,
    OffsetCommitRequest, OffsetFetchRequest, SyncGroupRequest, TopicName,
};
use kafka_protocol::protocol::Request;

use super::router::{Outcome, kstr};
use super::{
    AdminClient, AdminClientBuilder, AdminError, ErrorCode, OFFSET_COMMIT_VERSION,
    OFFSET_FETCH_VERSION, OffsetSpec, Resource, TopicPartition, isolation_level, topics_of,
};
use crate::consumer::{Assignment, ConsumerRecords, GroupConfig, OffsetReset, Subscription};
use crate::error::{Error, Result};

/// API versions asked for (every tidelog node and Kafka from 2.4 answer them).
const JOIN_GROUP_VERSION: i16 = 5;
const SYNC_GROUP_VERSION: i16 = 3;
const HEARTBEAT_VERSION: i16 = 3;
const LEAVE_GROUP_VERSION: i16 = 3;
const FETCH_VERSION: i16 = 11;

/// Attempts at one step (finding the coordinator, joining, committing) before its last
/// error is returned.
const ATTEMPTS: u32 = 30;
/// Pause between two attempts.
const BACKOFF: Duration = Duration::from_millis(100);
/// OffsetFetch version of a member reading committed: `require_stable` (KIP-447).
const STABLE_OFFSET_FETCH_VERSION: i16 = 7;
/// How long a member reading committed waits for offsets a transaction holds pending
/// (Kafka's `default.api.timeout.ms`).
const UNSTABLE_WAIT: Duration = Duration::from_secs(60);
/// How much longer than the rebalance timeout a JoinGroup may wait for its answer.
const JOIN_SLACK: Duration = Duration::from_secs(5);
/// `fetch.max.bytes`.
const FETCH_MAX_BYTES: i32 = 50 << 20;

/// One partition assigned to the member.
#[derive(Debug)]
struct Owned {
    topic: Arc<str>,
    partition: i32,
    /// The next offset to hand out; `None` until the committed offset or the reset
    /// policy decides it.
    position: Option<i64>,
    /// The high watermark of the last fetch answer.
    high_watermark: Option<i64>,
}

/// What the member does after a group error code.
enum Next {
    /// Ask the (new) coordinator again.
    Rediscover,
    /// Join the group again (`forget`: as a new member).
    Rejoin { forget: bool },
    /// Give up with this error.
    Fail(Error),
}

/// A member of a consumer group of a running node or cluster (feature `server`), as
/// Kafka's `KafkaConsumer` with `subscribe()` is. Blocking; one thread uses it.
///
/// It finds the group's coordinator (FindCoordinator), joins (JoinGroup with protocol
/// type `consumer`, offering the assignors of its [`GroupConfig`]; the leader computes
/// the assignments with the named [`Assignor`](crate::consumer::Assignor) and sends them in its
/// SyncGroup), heartbeats from [`poll`](GroupMember::poll) every
/// `heartbeat_interval`, starts each assigned partition at the group's committed offset
/// (OffsetFetch) or, without one, at the `auto_offset_reset` position (ListOffsets),
/// fetches from each partition's leader (Metadata), commits (OffsetCommit) and leaves
/// (LeaveGroup). A heartbeat answered REBALANCE_IN_PROGRESS makes it commit its
/// positions and rejoin (an eager assignor gives up every partition first; a cooperative
/// one keeps those it is assigned again and gives up the others, then rejoins once
/// more); ILLEGAL_GENERATION or UNKNOWN_MEMBER_ID means its partitions went to others: it
/// drops them without committing and rejoins. NOT_COORDINATOR and its kin make it look
/// the coordinator up again.
///
/// ```no_run
/// use std::time::Duration;
/// use tidelog::admin::GroupMember;
/// use tidelog::{GroupConfig, OffsetReset};
///
/// let config = GroupConfig::new("billing", &["payments"])
///     .auto_offset_reset(OffsetReset::Earliest)
///     .enable_auto_commit(false);
/// let mut member = GroupMember::join("127.0.0.1:9092", config)?;
/// let records = member.poll(Duration::from_millis(500))?;
/// for record in &records {
///     let record = record?;
///     println!("{}-{}@{}", record.topic, record.partition, record.offset);
/// }
/// member.commit_sync()?;
/// member.close();
/// # Ok::<(), tidelog::Error>(())
/// ```
#[derive(Debug)]
pub struct GroupMember {
    admin: AdminClient,
    config: GroupConfig,
    /// The coordinator's address, while it is known.
    coordinator: Option<String>,
    member_id: String,
    generation: i32,
    owned: Vec<Owned>,
    /// Each partition's leader address, from the last Metadata answer.
    leaders: BTreeMap<(String, i32), String>,
    leaders_stale: bool,
    needs_rejoin: bool,
    last_heartbeat: Instant,
    closed: bool,
}

impl GroupMember {
    /// Connects to the cluster at `bootstrap` (`host:port`, or several separated by
    /// commas) and joins group `config.group_id`, returning once the group assigned it
    /// its partitions (possibly none). `enable_auto_commit` is not used: commit with
    /// [`commit_sync`](GroupMember::commit_sync). `group_instance_id` is sent as is
    /// (static membership).
    pub fn join(bootstrap: &str, config: GroupConfig) -> Result<GroupMember> {
        GroupMember::join_with(AdminClient::builder(bootstrap), config)
    }

    /// Joins as [`join`](GroupMember::join) does, through a client with the settings of
    /// `client` (security protocol, SASL, TLS, request timeout; the client id is
    /// `config.client_id`).
    pub fn join_with(client: AdminClientBuilder, config: GroupConfig) -> Result<GroupMember> {
        if config.topics.is_empty() {
            return Err(Error::InvalidConfig {
                key: "topics".into(),
                reason: "a group member subscribes to at least one topic".into(),
            });
        }
        if config.assignors.is_empty() {
            return Err(Error::InvalidConfig {
                key: "partition.assignment.strategy".into(),
                reason: "give at least one assignor".into(),
            });
        }
        let admin = client.client_id(config.client_id.clone()).connect()?;
        let mut member = GroupMember {
            admin,
            config,
            coordinator: None,
            member_id: String::new(),
            generation: -1,
            owned: Vec::new(),
            leaders: BTreeMap::new(),
            leaders_stale: true,
            needs_rejoin: true,
            last_heartbeat: Instant::now(),
            closed: false,
        };
        member.ensure_joined()?;
        Ok(member)
    }

    /// The member id the coordinator gave.
    pub fn member_id(&self) -> &str {
        &self.member_id
    }

    /// The generation of the group the member last joined.
    pub fn generation(&self) -> i32 {
        self.generation
    }

    /// The partitions assigned to the member, as (topic, partition).
    pub fn assignment(&self) -> Vec<(String, i32)> {
        self.owned
            .iter()
            .map(|o| (o.topic.to_string(), o.partition))
            .collect()
    }

    /// The offset of the next record `poll` hands out from `topic`-`partition`: the
    /// committed offset, or the reset position, until records are read.
    pub fn position(&mut self, topic: &str, partition: i32) -> Result<i64> {
        let i = self.find(topic, partition)?;
        if self.owned[i].position.is_none() {
            self.resolve_positions()?;
        }
        let i = self.find(topic, partition)?;
        self.owned[i].position.ok_or_else(|| Error::InvalidConfig {
            key: "assignment".into(),
            reason: format!("partition {topic}-{partition} has no position"),
        })
    }

    /// Moves the position of `topic`-`partition` to `offset`.
    pub fn seek(&mut self, topic: &str, partition: i32, offset: i64) -> Result<()> {
        let i = self.find(topic, partition)?;
        self.owned[i].position = Some(offset);
        Ok(())
    }

    /// The high watermark of `topic`-`partition` as the last fetch answered it, `None`
    /// before the first fetch of that partition.
    pub fn high_watermark(&self, topic: &str, partition: i32) -> Option<i64> {
        self.owned
            .iter()
            .find(|o| &*o.topic == topic && o.partition == partition)
            .and_then(|o| o.high_watermark)
    }

    fn find(&self, topic: &str, partition: i32) -> Result<usize> {
        self.owned
            .iter()
            .position(|o| &*o.topic == topic && o.partition == partition)
            .ok_or_else(|| Error::InvalidConfig {
                key: "assignment".into(),
                reason: format!("partition {topic}-{partition} is not assigned to this consumer"),
            })
    }

    fn group_error(&self, code: i16) -> Error {
        AdminError::new(
            Resource::Group(self.config.group_id.clone()),
            ErrorCode::from_code(code),
            None,
        )
        .into()
    }

    /// What to do after `code` from the coordinator.
    fn next_after(&self, code: i16) -> Next {
        match ErrorCode::from_code(code) {
            ErrorCode::NOT_COORDINATOR
            | ErrorCode::COORDINATOR_NOT_AVAILABLE
            | ErrorCode::COORDINATOR_LOAD_IN_PROGRESS => Next::Rediscover,
            ErrorCode::REBALANCE_IN_PROGRESS | ErrorCode::ILLEGAL_GENERATION => {
                Next::Rejoin { forget: false }
            }
            ErrorCode::UNKNOWN_MEMBER_ID => Next::Rejoin { forget: true },
            _ => Next::Fail(self.group_error(code)),
        }
    }

    /// The coordinator's address, looked up when not known.
    fn coordinator_addr(&mut self) -> Result<String> {
        if let Some(addr) = &self.coordinator {
            return Ok(addr.clone());
        }
        let mut attempt = 0;
        loop {
            let found = self
                .admin
                .router
                .lock()
                .coordinator(&self.config.group_id)?;
            match found {
                Outcome::Done(Ok((_, addr))) => {
                    self.coordinator = Some(addr.clone());
                    return Ok(addr);
                }
                Outcome::Done(Err(e)) => return Err(e),
                Outcome::Retry(e) if attempt + 1 >= ATTEMPTS => return Err(e),
                Outcome::Retry(_) => {
                    attempt += 1;
                    std::thread::sleep(BACKOFF);
                }
            }
        }
    }

    /// Sends `request` to the coordinator; a failure to reach it forgets it (the next
    /// call looks it up again).
    fn call_coordinator<R: Request>(
        &mut self,
        request: &R,
        version: i16,
        timeout: Option<Duration>,
    ) -> Result<R::Response> {
        let addr = self.coordinator_addr()?;
        let mut router = self.admin.router.lock();
        let result = match timeout {
            Some(t) => router.call_addr_within(&addr, request, version, t),
            None => router.call_addr(&addr, request, version),
        };
        drop(router);
        if result.is_err() {
            self.coordinator = None;
        }
        result
    }

    /// Joins the group again if it must (first join, a rebalance, a lost membership).
    fn ensure_joined(&mut self) -> Result<()> {
        let mut attempt = 0;
        while self.needs_rejoin {
            let last = attempt + 1 >= ATTEMPTS;
            match self.join_once() {
                Ok(true) => {}
                Ok(false) if last => {
                    return Err(Error::Timeout(format!(
                        "joining consumer group {:?}: no assignment after {ATTEMPTS} attempts",
                        self.config.group_id
                    )));
                }
                Ok(false) => std::thread::sleep(BACKOFF),
                Err(e @ (Error::Io { .. } | Error::Timeout(_))) if !last => {
                    drop(e);
                    std::thread::sleep(BACKOFF);
                }
                Err(e) => return Err(e),
            }
            attempt += 1;
        }
        Ok(())
    }

    /// One JoinGroup and SyncGroup. True when the member has its assignment (it may
    /// still have to rejoin, after giving up partitions under a cooperative assignor);
    /// false to try again.
    fn join_once(&mut self) -> Result<bool> {
        let cooperative = self.config.assignors.iter().any(|a| a.is_cooperative());
        let mut owned: BTreeMap<String, Vec<i32>> = BTreeMap::new();
        for o in &self.owned {
            owned
                .entry(o.topic.to_string())
                .or_default()
                .push(o.partition);
        }
        let subscription = Subscription {
            topics: self.config.topics.clone(),
            user_data: None,
            owned_partitions: if cooperative {
                owned.into_iter().collect()
            } else {
                Vec::new()
            },
        };
        let metadata = Bytes::from(subscription.encode());
        let request = JoinGroupRequest::default()
            .with_group_id(GroupId(kstr(&self.config.group_id)))
            .with_session_timeout_ms(millis(self.config.session_timeout))
            .with_rebalance_timeout_ms(millis(self.config.rebalance_timeout))
            .with_member_id(kstr(&self.member_id))
            .with_group_instance_id(self.config.group_instance_id.as_deref().map(kstr))
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
        let timeout = self.config.rebalance_timeout + JOIN_SLACK;
        let joined = self.call_coordinator(&request, JOIN_GROUP_VERSION, Some(timeout))?;
        if joined.error_code == ErrorCode::MEMBER_ID_REQUIRED.code() && self.member_id.is_empty() {
            // Join again at once with the id given (once: the id is not empty then).
            self.member_id = joined.member_id.to_string();
            return self.join_once();
        }
        if joined.error_code != 0 {
            return self.after_error(joined.error_code).map(|()| false);
        }
        self.member_id = joined.member_id.to_string();
        self.generation = joined.generation_id;
        let protocol = joined
            .protocol_name
            .as_ref()
            .map(|p| p.to_string())
            .unwrap_or_default();
        let assignments = if joined.leader == joined.member_id {
            self.assign(&protocol, &joined.members)?
        } else {
            Vec::new()
        };
        let request = SyncGroupRequest::default()
            .with_group_id(GroupId(kstr(&self.config.group_id)))
            .with_generation_id(self.generation)
            .with_member_id(kstr(&self.member_id))
            .with_group_instance_id(self.config.group_instance_id.as_deref().map(kstr))
            .with_protocol_type(Some(kstr("consumer")))
            .with_protocol_name(Some(kstr(&protocol)))
            .with_assignments(assignments);
        let synced = self.call_coordinator(&request, SYNC_GROUP_VERSION, Some(timeout))?;
        if synced.error_code != 0 {
            return self.after_error(synced.error_code).map(|()| false);
        }
        let assignment = if synced.assignment.is_empty() {
            Assignment::default()
        } else {
            Assignment::decode(&synced.assignment)?
        };
        self.apply(assignment, cooperative)?;
        self.last_heartbeat = Instant::now();
        Ok(true)
    }

    /// Acts on an error code of JoinGroup or SyncGroup.
    fn after_error(&mut self, code: i16) -> Result<()> {
        match self.next_after(code) {
            Next::Rediscover => self.coordinator = None,
            Next::Rejoin { forget } => {
                if forget {
                    self.member_id.clear();
                    self.generation = -1;
                }
            }
            Next::Fail(e) => return Err(e),
        }
        Ok(())
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
                    format!("JoinGroup response of group {:?}", self.config.group_id),
                    0,
                    format!(
                        "the group chose assignor {protocol:?}, which this member does not offer"
                    ),
                )
            })?;
        let mut subscriptions = BTreeMap::new();
        let mut topics = BTreeSet::new();
        for m in members {
            let s = Subscription::decode(&m.metadata)?;
            topics.extend(s.topics.iter().cloned());
            subscriptions.insert(m.member_id.to_string(), s);
        }
        let topics: Vec<String> = topics.into_iter().collect();
        let counts = self.refresh_metadata(&topics)?;
        let result = assignor.assign(&counts, &subscriptions);
        Ok(subscriptions
            .keys()
            .map(|id| {
                let partitions = result.get(id).cloned().unwrap_or_default();
                let bytes = Assignment {
                    partitions,
                    user_data: None,
                }
                .encode();
                SyncGroupRequestAssignment::default()
                    .with_member_id(kstr(id))
                    .with_assignment(Bytes::from(bytes))
            })
            .collect())
    }

    /// Fresh metadata of `topics`: remembers each partition's leader, and returns the
    /// partition count of each topic that exists.
    fn refresh_metadata(&mut self, topics: &[String]) -> Result<BTreeMap<String, i32>> {
        let mut router = self.admin.router.lock();
        let response = router.refresh(Some(topics))?;
        let mut counts = BTreeMap::new();
        for (name, outcome) in topics_of(response) {
            let Outcome::Done(Ok(t)) = outcome else {
                continue;
            };
            counts.insert(name.clone(), t.partitions.len() as i32);
            for p in t.partitions {
                let key = (name.clone(), p.partition);
                match p.leader.and_then(|l| router.node_addr(l)) {
                    Some(addr) => {
                        self.leaders.insert(key, addr);
                    }
                    None => {
                        self.leaders.remove(&key);
                    }
                }
            }
        }
        self.leaders_stale = false;
        Ok(counts)
    }

    /// Takes `assignment`: keeps the positions of partitions it keeps, and starts the
    /// new ones at their committed offsets. Under a cooperative assignor, the partitions
    /// it lost are committed and given up, and the member rejoins.
    fn apply(&mut self, assignment: Assignment, cooperative: bool) -> Result<()> {
        let new: BTreeSet<(String, i32)> = assignment
            .partitions
            .into_iter()
            .flat_map(|(t, ps)| ps.into_iter().map(move |p| (t.clone(), p)))
            .collect();
        let (kept, lost): (Vec<Owned>, Vec<Owned>) = std::mem::take(&mut self.owned)
            .into_iter()
            .partition(|o| new.contains(&(o.topic.to_string(), o.partition)));
        self.needs_rejoin = false;
        if cooperative && !lost.is_empty() {
            self.commit(&lost)?;
            self.needs_rejoin = true;
        }
        self.owned = kept;
        for (topic, partition) in new {
            if self.find(&topic, partition).is_err() {
                self.owned.push(Owned {
                    topic: Arc::from(topic.as_str()),
                    partition,
                    position: None,
                    high_watermark: None,
                });
            }
        }
        self.resolve_positions()
    }

    /// Gives up every partition before rejoining (eager) after committing their
    /// positions if `commit`; a cooperative member keeps them until the new assignment.
    fn prepare_rejoin(&mut self, commit: bool) -> Result<()> {
        let cooperative = self.config.assignors.iter().any(|a| a.is_cooperative());
        if commit && !cooperative {
            let owned = std::mem::take(&mut self.owned);
            let committed = self.commit(&owned);
            match committed {
                // The group moved on without this member: its partitions are others' now.
                Err(Error::Admin(e))
                    if matches!(
                        e.code,
                        ErrorCode::ILLEGAL_GENERATION | ErrorCode::UNKNOWN_MEMBER_ID
                    ) => {}
                other => other?,
            }
        } else if !commit {
            self.owned.clear();
        }
        self.needs_rejoin = true;
        Ok(())
    }

    /// Starts the partitions without a position at the group's committed offset, or at
    /// the reset position.
    fn resolve_positions(&mut self) -> Result<()> {
        let pending: Vec<(String, i32)> = self
            .owned
            .iter()
            .filter(|o| o.position.is_none())
            .map(|o| (o.topic.to_string(), o.partition))
            .collect();
        if pending.is_empty() {
            return Ok(());
        }
        let committed = self.fetch_committed(&pending)?;
        let mut reset = Vec::new();
        for (topic, partition) in pending {
            match committed.get(&(topic.clone(), partition)) {
                Some(&offset) => {
                    let i = self.find(&topic, partition)?;
                    self.owned[i].position = Some(offset);
                }
                None => reset.push(TopicPartition::new(topic, partition)),
            }
        }
        for (tp, offset) in self.reset_offsets(&reset, None)? {
            let i = self.find(&tp.topic, tp.partition)?;
            self.owned[i].position = Some(offset);
        }
        Ok(())
    }

    /// The group's committed offsets of `partitions` (OffsetFetch), those it has.
    /// Reading committed, with `require_stable` (KIP-447): a partition whose offset a
    /// transaction holds pending (UNSTABLE_OFFSET_COMMIT) is asked again until the
    /// transaction ended, for at most [`UNSTABLE_WAIT`].
    fn fetch_committed(
        &mut self,
        partitions: &[(String, i32)],
    ) -> Result<BTreeMap<(String, i32), i64>> {
        let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
        for (t, p) in partitions {
            by_topic.entry(t).or_default().push(*p);
        }
        let request = OffsetFetchRequest::default()
            .with_group_id(GroupId(kstr(&self.config.group_id)))
            .with_topics(Some(
                by_topic
                    .into_iter()
                    .map(|(t, ps)| {
                        OffsetFetchRequestTopic::default()
                            .with_name(TopicName(kstr(t)))
                            .with_partition_indexes(ps)
                    })
                    .collect(),
            ));
        let stable = self.config.isolation_level == crate::consumer::IsolationLevel::ReadCommitted;
        let (request, version) = match stable {
            true => (
                request.with_require_stable(true),
                STABLE_OFFSET_FETCH_VERSION,
            ),
            false => (request, OFFSET_FETCH_VERSION),
        };
        let unstable_until = Instant::now() + UNSTABLE_WAIT;
        let mut attempt = 0;
        'again: loop {
            attempt += 1;
            let last = attempt >= ATTEMPTS;
            let response = match self.call_coordinator(&request, version, None) {
                Ok(r) => r,
                Err(Error::Io { .. } | Error::Timeout(_)) if !last => {
                    std::thread::sleep(BACKOFF);
                    continue;
                }
                Err(e) => return Err(e),
            };
            let mut codes = vec![response.error_code];
            codes.extend(
                response
                    .topics
                    .iter()
                    .flat_map(|t| t.partitions.iter().map(|p| p.error_code)),
            );
            if let Some(code) = codes.into_iter().find(|c| *c != 0) {
                let unstable = kafka_protocol::ResponseError::UnstableOffsetCommit.code();
                if code == unstable && Instant::now() < unstable_until {
                    attempt -= 1;
                    std::thread::sleep(BACKOFF);
                    continue 'again;
                }
                match self.next_after(code) {
                    Next::Rediscover if !last => {
                        self.coordinator = None;
                        std::thread::sleep(BACKOFF);
                        continue 'again;
                    }
                    _ => return Err(self.group_error(code)),
                }
            }
            let mut out = BTreeMap::new();
            for t in response.topics {
                for p in t.partitions {
                    if p.committed_offset >= 0 {
                        out.insert(
                            (t.name.0.to_string(), p.partition_index),
                            p.committed_offset,
                        );
                    }
                }
            }
            return Ok(out);
        }
    }

    /// The `auto_offset_reset` position of each of `partitions` (ListOffsets); `from`
    /// is the out-of-range offset that calls for it, if any, for the error of the
    /// `none` policy.
    fn reset_offsets(
        &mut self,
        partitions: &[TopicPartition],
        from: Option<i64>,
    ) -> Result<Vec<(TopicPartition, i64)>> {
        if partitions.is_empty() {
            return Ok(Vec::new());
        }
        let spec = match self.config.auto_offset_reset {
            OffsetReset::Earliest => OffsetSpec::Earliest,
            OffsetReset::Latest => OffsetSpec::Latest,
            OffsetReset::None => {
                let tp = &partitions[0];
                let ask = |spec| [(tp.clone(), spec)];
                let start = self.listed(&ask(OffsetSpec::Earliest))?;
                let end = self.listed(&ask(OffsetSpec::Latest))?;
                return Err(Error::NoOffsetForPartition {
                    partition: tp.to_string(),
                    offset: from.unwrap_or(-1),
                    start: start[0].1,
                    end: end[0].1,
                });
            }
        };
        let specs: Vec<(TopicPartition, OffsetSpec)> =
            partitions.iter().map(|tp| (tp.clone(), spec)).collect();
        self.listed(&specs)
    }

    fn listed(&self, specs: &[(TopicPartition, OffsetSpec)]) -> Result<Vec<(TopicPartition, i64)>> {
        let mut out = Vec::new();
        let level = self.config.isolation_level;
        for (tp, listed) in self.admin.list_offsets_with(specs, level)? {
            let offset = listed?.offset.ok_or_else(|| {
                Error::corrupt(
                    format!("ListOffsets answer for {tp}"),
                    0,
                    "no offset for the earliest or latest position",
                )
            })?;
            out.push((tp, offset));
        }
        Ok(out)
    }

    /// Sends a heartbeat if one is due, and acts on its answer.
    fn heartbeat_if_due(&mut self) -> Result<()> {
        if self.needs_rejoin || self.last_heartbeat.elapsed() < self.config.heartbeat_interval {
            return Ok(());
        }
        let request = HeartbeatRequest::default()
            .with_group_id(GroupId(kstr(&self.config.group_id)))
            .with_generation_id(self.generation)
            .with_member_id(kstr(&self.member_id))
            .with_group_instance_id(self.config.group_instance_id.as_deref().map(kstr));
        let response = match self.call_coordinator(&request, HEARTBEAT_VERSION, None) {
            Ok(r) => r,
            // The coordinator is gone: the next heartbeat asks the new one.
            Err(Error::Io { .. } | Error::Timeout(_)) => return Ok(()),
            Err(e) => return Err(e),
        };
        if response.error_code == 0 {
            self.last_heartbeat = Instant::now();
            return Ok(());
        }
        match ErrorCode::from_code(response.error_code) {
            ErrorCode::REBALANCE_IN_PROGRESS => self.prepare_rejoin(true),
            _ => match self.next_after(response.error_code) {
                Next::Rediscover => {
                    self.coordinator = None;
                    Ok(())
                }
                Next::Rejoin { forget } => {
                    if forget {
                        self.member_id.clear();
                        self.generation = -1;
                    }
                    self.prepare_rejoin(false)
                }
                Next::Fail(e) => Err(e),
            },
        }
    }

    /// Waits at most `timeout` for records of the assigned partitions, heartbeating and
    /// taking part in rebalances on the way. An empty answer means none arrived in time.
    pub fn poll(&mut self, timeout: Duration) -> Result<ConsumerRecords> {
        let deadline = Instant::now() + timeout;
        loop {
            self.ensure_joined()?;
            self.heartbeat_if_due()?;
            if self.needs_rejoin {
                continue;
            }
            self.resolve_positions()?;
            let now = Instant::now();
            let wait = deadline
                .saturating_duration_since(now)
                .min(self.config.heartbeat_interval);
            let records = self.fetch(wait)?;
            if !records.is_empty() || Instant::now() >= deadline {
                return Ok(records);
            }
        }
    }

    /// One Fetch to each leader of an assigned partition, waiting at most `wait` in all
    /// for records (a member without partitions just waits).
    fn fetch(&mut self, wait: Duration) -> Result<ConsumerRecords> {
        let mut out = ConsumerRecords::default();
        if self.owned.is_empty() {
            std::thread::sleep(wait);
            return Ok(out);
        }
        if self.leaders_stale
            || self.owned.iter().any(|o| {
                !self
                    .leaders
                    .contains_key(&(o.topic.to_string(), o.partition))
            })
        {
            let topics: Vec<String> = self.config.topics.clone();
            self.refresh_metadata(&topics)?;
        }
        let mut by_leader: BTreeMap<String, Vec<usize>> = BTreeMap::new();
        for (i, o) in self.owned.iter().enumerate() {
            match self.leaders.get(&(o.topic.to_string(), o.partition)) {
                Some(addr) => by_leader.entry(addr.clone()).or_default().push(i),
                None => self.leaders_stale = true,
            }
        }
        if by_leader.is_empty() {
            std::thread::sleep(wait.min(BACKOFF));
            return Ok(out);
        }
        let each = wait / by_leader.len() as u32;
        for (addr, members) in by_leader {
            let mut topics: BTreeMap<&str, Vec<FetchPartition>> = BTreeMap::new();
            for &i in &members {
                let o = &self.owned[i];
                topics.entry(&o.topic).or_default().push(
                    FetchPartition::default()
                        .with_partition(o.partition)
                        .with_current_leader_epoch(-1)
                        .with_fetch_offset(o.position.unwrap_or(0))
                        .with_log_start_offset(-1)
                        .with_partition_max_bytes(
                            self.config.max_partition_fetch_bytes.min(i32::MAX as usize) as i32,
                        ),
                );
            }
            let request = FetchRequest::default()
                .with_replica_id((-1).into())
                .with_max_wait_ms(millis(each))
                .with_min_bytes(1)
                .with_max_bytes(FETCH_MAX_BYTES)
                .with_isolation_level(isolation_level(self.config.isolation_level))
                .with_session_id(0)
                .with_session_epoch(-1)
                .with_topics(
                    topics
                        .into_iter()
                        .map(|(t, ps)| {
                            FetchTopic::default()
                                .with_topic(TopicName(kstr(t)))
                                .with_partitions(ps)
                        })
                        .collect(),
                );
            let timeout = self.admin_timeout() + each;
            let response = match self.admin.router.lock().call_addr_within(
                &addr,
                &request,
                FETCH_VERSION,
                timeout,
            ) {
                Ok(r) => r,
                Err(Error::Io { .. } | Error::Timeout(_)) => {
                    // The leader is gone or moved: ask where it is now next time.
                    self.leaders_stale = true;
                    continue;
                }
                Err(e) => return Err(e),
            };
            if response.error_code != 0 {
                self.leaders_stale = true;
                continue;
            }
            for t in response.responses {
                let topic = t.topic.0.to_string();
                for p in t.partitions {
                    let Ok(i) = self.find(&topic, p.partition_index) else {
                        continue;
                    };
                    self.fetched(i, p, &mut out)?;
                }
            }
        }
        Ok(out)
    }

    fn admin_timeout(&self) -> Duration {
        self.config.session_timeout.max(Duration::from_secs(5))
    }

    /// Takes one partition of a Fetch answer.
    fn fetched(
        &mut self,
        i: usize,
        p: kafka_protocol::messages::fetch_response::PartitionData,
        out: &mut ConsumerRecords,
    ) -> Result<()> {
        let topic = Arc::clone(&self.owned[i].topic);
        let partition = self.owned[i].partition;
        let tp = TopicPartition::new(topic.to_string(), partition);
        let from = self.owned[i].position.unwrap_or(0);
        if p.error_code != 0 {
            return match ErrorCode::from_code(p.error_code) {
                ErrorCode::OFFSET_OUT_OF_RANGE => {
                    let reset = self.reset_offsets(std::slice::from_ref(&tp), Some(from))?;
                    let i = self.find(&topic, partition)?;
                    self.owned[i].position = reset.first().map(|(_, o)| *o);
                    Ok(())
                }
                ErrorCode::NOT_LEADER_OR_FOLLOWER
                | ErrorCode::LEADER_NOT_AVAILABLE
                | ErrorCode::UNKNOWN_TOPIC_OR_PARTITION
                | ErrorCode::FENCED_LEADER_EPOCH
                | ErrorCode::UNKNOWN_LEADER_EPOCH => {
                    self.leaders_stale = true;
                    Ok(())
                }
                code => Err(AdminError::new(Resource::Partition(tp), code, None).into()),
            };
        }
        self.owned[i].high_watermark = Some(p.high_watermark);
        let fetched = out.push_fetched((topic, partition, from), &p, self.config.check_crcs)?;
        if let Some(next) = fetched {
            self.owned[i].position = Some(next);
        }
        Ok(())
    }

    /// Commits the position of every assigned partition (OffsetCommit), retrying while
    /// the coordinator moves or finishes a rebalance.
    pub fn commit_sync(&mut self) -> Result<()> {
        let owned = std::mem::take(&mut self.owned);
        let result = self.commit(&owned);
        self.owned = owned;
        result
    }

    fn commit(&mut self, owned: &[Owned]) -> Result<()> {
        let mut by_topic: BTreeMap<&str, Vec<OffsetCommitRequestPartition>> = BTreeMap::new();
        for o in owned {
            let Some(position) = o.position else { continue };
            by_topic.entry(&o.topic).or_default().push(
                OffsetCommitRequestPartition::default()
                    .with_partition_index(o.partition)
                    .with_committed_offset(position)
                    .with_committed_leader_epoch(-1)
                    .with_committed_metadata(Some(kstr(""))),
            );
        }
        if by_topic.is_empty() {
            return Ok(());
        }
        let request = OffsetCommitRequest::default()
            .with_group_id(GroupId(kstr(&self.config.group_id)))
            .with_generation_id_or_member_epoch(self.generation)
            .with_member_id(kstr(&self.member_id))
            .with_group_instance_id(self.config.group_instance_id.as_deref().map(kstr))
            .with_topics(
                by_topic
                    .into_iter()
                    .map(|(t, ps)| {
                        OffsetCommitRequestTopic::default()
                            .with_name(TopicName(kstr(t)))
                            .with_partitions(ps)
                    })
                    .collect(),
            );
        let mut attempt = 0;
        loop {
            attempt += 1;
            let last = attempt >= ATTEMPTS;
            let response = match self.call_coordinator(&request, OFFSET_COMMIT_VERSION, None) {
                Ok(r) => r,
                Err(Error::Io { .. } | Error::Timeout(_)) if !last => {
                    std::thread::sleep(BACKOFF);
                    continue;
                }
                Err(e) => return Err(e),
            };
            let refused = response.topics.iter().find_map(|t| {
                t.partitions
                    .iter()
                    .find(|p| p.error_code != 0)
                    .map(|p| (t.name.0.to_string(), p.partition_index, p.error_code))
            });
            let Some((topic, partition, error_code)) = refused else {
                return Ok(());
            };
            let code = ErrorCode::from_code(error_code);
            let again = match self.next_after(error_code) {
                Next::Rediscover => {
                    self.coordinator = None;
                    true
                }
                // A group finishing a rebalance this member already joined.
                Next::Rejoin { .. } => code == ErrorCode::REBALANCE_IN_PROGRESS,
                Next::Fail(_) => false,
            };
            if again && !last {
                std::thread::sleep(BACKOFF);
                continue;
            }
            return Err(match code {
                ErrorCode::REBALANCE_IN_PROGRESS
                | ErrorCode::ILLEGAL_GENERATION
                | ErrorCode::UNKNOWN_MEMBER_ID => self.group_error(error_code),
                _ => AdminError::new(
                    Resource::Partition(TopicPartition::new(topic, partition)),
                    code,
                    None,
                )
                .into(),
            });
        }
    }

    /// Leaves the group (LeaveGroup), so that its partitions go to the other members at
    /// once. Commits nothing: call [`commit_sync`](GroupMember::commit_sync) first.
    /// Errors are ignored (the coordinator removes a member that went away when its
    /// session expires). A static member (`group_instance_id`) does not leave, as in
    /// Kafka: its partitions wait for it until its session expires. Also done on drop.
    pub fn close(&mut self) {
        if self.closed {
            return;
        }
        self.closed = true;
        if self.member_id.is_empty() || self.config.group_instance_id.is_some() {
            self.owned.clear();
            return;
        }
        let request = LeaveGroupRequest::default()
            .with_group_id(GroupId(kstr(&self.config.group_id)))
            .with_members(vec![
                MemberIdentity::default()
                    .with_member_id(kstr(&self.member_id))
                    .with_group_instance_id(self.config.group_instance_id.as_deref().map(kstr)),
            ]);
        let _ = self.call_coordinator(&request, LEAVE_GROUP_VERSION, None);
        self.owned.clear();
    }
}

impl Drop for GroupMember {
    fn drop(&mut self) {
        self.close();
    }
}

/// Milliseconds as a protocol `i32`.
fn millis(d: Duration) -> i32 {
    d.as_millis().min(i32::MAX as u128) as i32
}

#[cfg(feature = "server")] // the tests start a tidelog server
#[cfg(test)]
mod tests {
    use super::*;

    /// A broker with topic `t` of 4 partitions holding 10 records each, served on a
    /// free port.
    fn served() -> (tempfile::TempDir, crate::Broker, crate::ServerHandle) {
        let dir = tempfile::tempdir().unwrap();
        let broker = crate::Broker::builder(dir.path())
            .group_initial_rebalance_delay(Duration::ZERO)
            .open()
            .unwrap();
        broker
            .create_topic("t", 4, crate::TopicConfig::default())
            .unwrap();
        let producer = crate::Producer::new(&broker).unwrap();
        for p in 0..4 {
            for i in 0..10 {
                let v = format!("{p}-{i}");
                producer
                    .send("t", crate::ProducerRecord::new(v.as_bytes()).partition(p))
                    .unwrap();
            }
        }
        producer.flush().unwrap();
        let server = crate::Server::builder(broker.clone())
            .listen("127.0.0.1:0")
            .start()
            .unwrap();
        (dir, broker, server)
    }

    fn config() -> GroupConfig {
        GroupConfig::new("g", &["t"])
            .auto_offset_reset(OffsetReset::Earliest)
            .enable_auto_commit(false)
            .heartbeat_interval(Duration::from_millis(100))
    }

    /// (partition, offset) of every record of `records`.
    fn offsets(records: &ConsumerRecords) -> Vec<(i32, i64)> {
        records
            .iter()
            .map(|r| r.map(|r| (r.partition, r.offset)).unwrap())
            .collect()
    }

    #[test]
    fn members_split_the_partitions_and_hand_over_at_the_committed_offsets() {
        let (_dir, broker, server) = served();
        let addr = server.local_addr().to_string();
        let mut a = GroupMember::join(&addr, config()).unwrap();
        assert_eq!(a.assignment().len(), 4);
        assert_eq!(a.position("t", 0).unwrap(), 0, "no commit: earliest");
        let mut read = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(20);
        while read.len() < 40 && Instant::now() < deadline {
            read.extend(offsets(&a.poll(Duration::from_millis(100)).unwrap()));
        }
        assert_eq!(read.len(), 40);
        assert_eq!(a.high_watermark("t", 3), Some(10));

        // A second member: a rejoins from poll (committing first), b gets two
        // partitions and starts where a stopped.
        let b = std::thread::spawn({
            let addr = addr.clone();
            move || GroupMember::join(&addr, config()).unwrap()
        });
        let deadline = Instant::now() + Duration::from_secs(20);
        while a.assignment().len() != 2 && Instant::now() < deadline {
            read.extend(offsets(&a.poll(Duration::from_millis(100)).unwrap()));
        }
        let mut b = b.join().unwrap();
        assert_eq!(a.assignment().len(), 2);
        let mut both = a.assignment();
        both.extend(b.assignment());
        both.sort();
        assert_eq!(
            both,
            (0..4).map(|p| ("t".to_string(), p)).collect::<Vec<_>>()
        );
        for (t, p) in b.assignment() {
            assert_eq!(
                b.position(&t, p).unwrap(),
                10,
                "{t}-{p} continues at a's commit"
            );
        }
        read.extend(offsets(&b.poll(Duration::from_millis(300)).unwrap()));
        let mut unique = read.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), read.len(), "no record twice");
        assert!(a.position("t", 9).is_err(), "not assigned");

        let moved = b.assignment()[0].1;
        b.seek("t", moved, 4).unwrap();
        b.commit_sync().unwrap();
        b.close();
        a.close();
        let committed = broker
            .group_coordinator()
            .offset_fetch("g", Some(&[("t".to_string(), moved)]))
            .unwrap();
        assert_eq!(committed[0].offset, 4);
        server.shutdown().unwrap();
    }

    /// Over the wire, a member reading committed gets the committed records only (up
    /// to the last stable offset, none of an aborted transaction, no marker), and its
    /// `latest` reset is the last stable offset; reading uncommitted, every record.
    #[test]
    fn a_member_reads_committed_records_over_the_wire() {
        use crate::consumer::IsolationLevel;
        use crate::record::{Compression, EndTxnMarker, test_batch};
        let dir = tempfile::tempdir().unwrap();
        let broker = crate::Broker::open(dir.path()).unwrap();
        let p = broker
            .create_topic("x", 1, crate::TopicConfig::new())
            .unwrap()
            .partition(0)
            .unwrap();
        let append = |txn: Option<i64>, v: &str| {
            p.append_batch(&test_batch(txn, Compression::None, &[v]))
                .unwrap();
        };
        append(None, "a"); // 0
        append(Some(7), "aborted"); // 1
        append(Some(8), "committed"); // 2
        let log = p.log();
        log.append_end_txn_marker(7, 0, EndTxnMarker::abort(0), 1)
            .unwrap(); // 3
        append(Some(7), "later"); // 4: producer 7 again, committed below
        log.append_end_txn_marker(8, 0, EndTxnMarker::commit(0), 1)
            .unwrap(); // 5
        log.append_end_txn_marker(7, 0, EndTxnMarker::commit(0), 1)
            .unwrap(); // 6
        append(None, "b"); // 7
        append(Some(9), "open"); // 8
        let server = crate::Server::builder(broker.clone())
            .listen("127.0.0.1:0")
            .start()
            .unwrap();
        let addr = server.local_addr().to_string();
        let read = |level: IsolationLevel, reset: OffsetReset, want: usize| {
            let config = GroupConfig::new(format!("{level:?}"), &["x"])
                .auto_offset_reset(reset)
                .enable_auto_commit(false)
                .isolation_level(level);
            let mut m = GroupMember::join(&addr, config).unwrap();
            let mut got = Vec::new();
            let deadline = Instant::now() + Duration::from_secs(20);
            while got.len() < want && Instant::now() < deadline {
                let polled = m.poll(Duration::from_millis(50)).unwrap();
                for r in polled.iter() {
                    got.push(String::from_utf8(r.unwrap().value.unwrap().to_vec()).unwrap());
                }
            }
            let position = m.position("x", 0).unwrap();
            m.close();
            (got, position)
        };
        let (got, position) = read(IsolationLevel::ReadCommitted, OffsetReset::Earliest, 4);
        assert_eq!(got, ["a", "committed", "later", "b"]);
        assert_eq!(position, 8, "up to the open transaction");
        let (got, _) = read(IsolationLevel::ReadUncommitted, OffsetReset::Earliest, 6);
        assert_eq!(got, ["a", "aborted", "committed", "later", "b", "open"]);
        let (got, position) = read(IsolationLevel::ReadCommitted, OffsetReset::Latest, 0);
        assert_eq!((got.len(), position), (0, 8), "latest is the LSO");
        server.shutdown().unwrap();
    }

    /// A member reading committed fetches its group's offsets with `require_stable`
    /// (KIP-447): offsets a transaction holds pending are waited for, so the member
    /// starts where the transaction committed, not at its reset policy's offset.
    #[test]
    fn a_member_reading_committed_waits_for_offsets_of_an_open_transaction() {
        use crate::consumer::IsolationLevel;
        use crate::producer::{ConsumerGroupMetadata, Producer, ProducerRecord};
        let dir = tempfile::tempdir().unwrap();
        let broker = crate::Broker::builder(dir.path())
            .group_initial_rebalance_delay(Duration::ZERO)
            .open()
            .unwrap();
        broker
            .create_topic("y", 1, crate::TopicConfig::new())
            .unwrap();
        let plain = Producer::new(&broker).unwrap();
        for v in ["0", "1", "2", "3"] {
            plain.send("y", ProducerRecord::new(v.as_bytes())).unwrap();
        }
        let txn = Producer::builder(&broker)
            .transactional_id("copier")
            .build()
            .unwrap();
        txn.init_transactions().unwrap();
        txn.begin_transaction().unwrap();
        txn.send_offsets_to_transaction(
            &[("y".to_string(), 0, 2)],
            &ConsumerGroupMetadata::new("stable"),
        )
        .unwrap();
        let server = crate::Server::builder(broker.clone())
            .listen("127.0.0.1:0")
            .start()
            .unwrap();
        let addr = server.local_addr().to_string();
        let config = GroupConfig::new("stable", &["y"])
            .auto_offset_reset(OffsetReset::Earliest)
            .enable_auto_commit(false)
            .isolation_level(IsolationLevel::ReadCommitted);
        // The member fetches the offsets while the transaction is still open (no
        // initial rebalance delay).
        let committer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(1500));
            txn.commit_transaction().unwrap();
        });
        let mut m = GroupMember::join(&addr, config).unwrap();
        let mut got = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(20);
        while got.len() < 2 && Instant::now() < deadline {
            for r in m.poll(Duration::from_millis(50)).unwrap().iter() {
                got.push(r.unwrap().offset);
            }
        }
        assert_eq!(got, [2, 3], "from the offset the transaction committed");
        m.close();
        committer.join().unwrap();
        server.shutdown().unwrap();
    }

    /// What a member thread saw: every assignment after a poll, and every record.
    #[derive(Default)]
    struct Seen {
        assignments: Vec<Vec<(String, i32)>>,
        records: Vec<(i32, i64)>,
    }

    /// Polls `member` on its own thread, as an application does, until `stop`;
    /// returns the member (to close) once stopped.
    fn run_member(
        mut member: GroupMember,
        seen: Arc<parking_lot::Mutex<Seen>>,
        stop: Arc<std::sync::atomic::AtomicBool>,
    ) -> std::thread::JoinHandle<GroupMember> {
        std::thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(60);
            while !stop.load(std::sync::atomic::Ordering::Acquire) && Instant::now() < deadline {
                let records = offsets(&member.poll(Duration::from_millis(50)).unwrap());
                let mut s = seen.lock();
                s.records.extend(records);
                s.assignments.push(member.assignment());
            }
            member
        })
    }

    #[test]
    fn cooperative_members_rebalance_incrementally_keeping_their_partitions() {
        let (_dir, broker, server) = served();
        let addr = server.local_addr().to_string();
        let cooperative = || {
            config().assignors(vec![Arc::new(crate::consumer::CooperativeStickyAssignor)
                as Arc<dyn crate::consumer::Assignor>])
        };
        let mut a = GroupMember::join(&addr, cooperative()).unwrap();
        assert_eq!(a.assignment().len(), 4);
        // a starts every partition at offset 3 and commits nothing: what it keeps
        // through the rebalance it keeps reading from there, and what it gives up it
        // commits first, so b starts there too.
        for p in 0..4 {
            a.seek("t", p, 3).unwrap();
        }
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let seen_a = Arc::new(parking_lot::Mutex::new(Seen::default()));
        let seen_b = Arc::new(parking_lot::Mutex::new(Seen::default()));
        let a = run_member(a, seen_a.clone(), stop.clone());
        let b = GroupMember::join(&addr, cooperative()).unwrap();
        let b = run_member(b, seen_b.clone(), stop.clone());
        let last = |s: &parking_lot::Mutex<Seen>| s.lock().assignments.last().cloned();
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            let read = seen_a.lock().records.len() + seen_b.lock().records.len();
            let (la, lb) = (last(&seen_a), last(&seen_b));
            if read >= 4 * 7 && la.is_some_and(|l| l.len() == 2) && lb.is_some_and(|l| l.len() == 2)
            {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        stop.store(true, std::sync::atomic::Ordering::Release);
        let (mut a, mut b) = (a.join().unwrap(), b.join().unwrap());
        let seen_a = seen_a.lock();
        let seen_b = seen_b.lock();

        // a had the two partitions it ends with in every assignment it saw, and b got
        // the other two.
        let (final_a, final_b) = (a.assignment(), b.assignment());
        assert_eq!(final_a.len(), 2, "{:?}", seen_a.assignments);
        assert_eq!(final_b.len(), 2, "{:?}", seen_b.assignments);
        for assignment in &seen_a.assignments {
            for tp in &final_a {
                assert!(assignment.contains(tp), "a gave up {tp:?}: {assignment:?}");
            }
        }
        let mut both = final_a.clone();
        both.extend(final_b.clone());
        both.sort();
        assert_eq!(
            both,
            (0..4).map(|p| ("t".to_string(), p)).collect::<Vec<_>>()
        );
        // Every record from offset 3 on, once, and none before.
        let mut read = seen_a.records.clone();
        read.extend(seen_b.records.iter().copied());
        read.sort();
        let expected: Vec<(i32, i64)> = (0..4).flat_map(|p| (3..10).map(move |o| (p, o))).collect();
        assert_eq!(read, expected);
        let described = broker.group_coordinator().describe_group("g").unwrap();
        assert_eq!(described.protocol_data, "cooperative-sticky");
        b.close();
        a.close();
        server.shutdown().unwrap();
    }

    #[test]
    fn a_subscription_without_topics_is_refused() {
        let err = GroupMember::join("127.0.0.1:1", GroupConfig::new("g", &[])).unwrap_err();
        assert!(matches!(err, Error::InvalidConfig { .. }), "{err:?}");
    }
}
