//! A consumer over the network: [`Reader`] keeps the positions of the partitions it is
//! given, fetches them from their leaders (one Fetch per leader), finds where they
//! start (OffsetFetch from the group's coordinator, ListOffsets for the reset policy,
//! seeks and `offsetsForTimes`) and commits (OffsetCommit). [`RemoteConsumer`] is a
//! `Consumer` on assigned partitions over it; the group member (`member.rs`) reads
//! with one too. Every request is sent at the version negotiated with its broker.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ForgottenTopic};
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::{
    BrokerId, FetchRequest, FindCoordinatorRequest, GroupId, OffsetCommitRequest,
    OffsetFetchRequest, TopicName,
};
use kafka_protocol::protocol::{Message, Request, StrBytes};
use parking_lot::Mutex;

use super::cluster::{Cluster, api_version, partition_error, retriable, unreachable};
use super::partition::FETCH;
use crate::admin::isolation_level;
use crate::consumer::{ConsumerConfig, ConsumerRecords, IsolationLevel, OffsetReset, SeekSpec};
use crate::error::{ApiError, Error, ErrorCode, Resource, Result};

/// FindCoordinator versions: 0 to 4 (4 asks for a list of keys).
const FIND_COORDINATOR: std::ops::RangeInclusive<i16> = 0..=4;
/// OffsetCommit versions: 2 to 8 (9 is the consumer protocol's member epoch).
const OFFSET_COMMIT: std::ops::RangeInclusive<i16> = 2..=8;
/// OffsetFetch versions: 1 to 7 (8 asks for several groups; 7 has `require_stable`).
const OFFSET_FETCH: std::ops::RangeInclusive<i16> = 1..=7;
/// Kafka's UNSTABLE_OFFSET_COMMIT: a transaction holds the group's offset pending.
const UNSTABLE_OFFSET_COMMIT: i16 = 88;
/// Attempts at one coordinator request before its last error is returned.
pub(super) const ATTEMPTS: u32 = 30;
/// How long a reader reading committed waits for offsets a transaction holds pending
/// (Kafka's `default.api.timeout.ms`).
const UNSTABLE_WAIT: Duration = Duration::from_secs(60);

pub(super) fn kstr(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// Milliseconds as a protocol `i32`.
pub(super) fn millis(d: Duration) -> i32 {
    d.as_millis().min(i32::MAX as u128) as i32
}

/// One partition being read.
#[derive(Debug)]
pub(super) struct Owned {
    pub(super) topic: Arc<str>,
    pub(super) partition: i32,
    /// The next offset to hand out; None until the committed offset, the reset policy
    /// or a seek decides it.
    pub(super) position: Option<i64>,
}

/// Kafka's FETCH_SESSION_ID_NOT_FOUND: the broker no longer has the session.
const FETCH_SESSION_ID_NOT_FOUND: i16 = 70;
/// Kafka's INVALID_FETCH_SESSION_EPOCH: the request's epoch is not the session's next.
const INVALID_FETCH_SESSION_EPOCH: i16 = 71;
/// The first Fetch version with sessions (KIP-227).
const FETCH_SESSIONS_FROM: i16 = 7;

/// A fetch session with one broker (KIP-227): after a full fetch that opens it, a
/// request lists only the partitions whose fetch offset or leader epoch changed since
/// the broker last heard them (and forgets those no longer read), and the broker
/// answers only partitions with news.
#[derive(Debug, Default)]
pub(super) struct FetchSession {
    /// The broker's id of the session; 0: none, the next request is a full fetch
    /// that asks for one.
    pub(super) id: i32,
    /// The epoch of the next request (1 after the opening full fetch).
    pub(super) epoch: i32,
    /// What the broker's session holds: each partition's fetch offset and leader
    /// epoch as last sent.
    sent: BTreeMap<SessionKey, SessionState>,
}

/// A partition of a fetch session, and what a request said of it: (fetch offset,
/// leader epoch).
type SessionKey = (Arc<str>, i32);
type SessionState = (i64, i32);

/// The epoch after `epoch`: 1 after `i32::MAX` (0 opens a session).
fn next_epoch(epoch: i32) -> i32 {
    if epoch == i32::MAX { 1 } else { epoch + 1 }
}

/// What a member's identity adds to a commit: `(generation, member id, instance id)`;
/// a standalone consumer commits as `(-1, "", None)`.
pub(super) type Committer<'a> = (i32, &'a str, Option<&'a str>);

/// Positions, fetches, offsets and commits of partitions read over the network.
#[derive(Debug)]
pub(super) struct Reader {
    pub(super) cluster: Cluster,
    pub(super) config: ConsumerConfig,
    pub(super) owned: Vec<Owned>,
    /// The group coordinator's address, while it is known.
    coordinator: Mutex<Option<String>>,
    /// The fetch session with each leader, by address.
    pub(super) sessions: BTreeMap<String, FetchSession>,
    /// Fetch requests sent, and the partitions they listed in all: with sessions a
    /// request lists only the partitions that changed.
    pub(super) fetches_sent: u64,
    pub(super) partitions_listed: u64,
    /// The replica each partition's leader prefers this consumer to read from
    /// (`preferred_read_replica`, KIP-392): its node id, until when (Kafka's
    /// `metadata.max.age.ms` after the leader said so).
    preferred: BTreeMap<SessionKey, (i32, Instant)>,
}

impl Reader {
    pub(super) fn new(cluster: Cluster, config: ConsumerConfig) -> Reader {
        Reader {
            cluster,
            config,
            owned: Vec::new(),
            coordinator: Mutex::new(None),
            sessions: BTreeMap::new(),
            fetches_sent: 0,
            partitions_listed: 0,
            preferred: BTreeMap::new(),
        }
    }

    /// `UnknownTopic` or `UnknownPartition` unless the cluster has the partition.
    fn check_exists(&self, topic: &str, partition: i32) -> Result<()> {
        let count = self.cluster.partition_count(topic)?;
        if partition < 0 || partition >= count {
            return Err(Error::UnknownPartition {
                topic: topic.to_string(),
                partition,
                count,
            });
        }
        Ok(())
    }

    /// Replaces the partitions read; their positions start unset.
    pub(super) fn assign(&mut self, partitions: &[(String, i32)]) -> Result<()> {
        for (t, p) in partitions {
            self.check_exists(t, *p)?;
        }
        self.owned = partitions
            .iter()
            .map(|(t, p)| Owned {
                topic: Arc::from(t.as_str()),
                partition: *p,
                position: None,
            })
            .collect();
        Ok(())
    }

    /// Changes the partitions read to `partitions`, keeping the positions of those
    /// that stay.
    pub(super) fn update_assignment(&mut self, partitions: &[(String, i32)]) {
        let mut old = std::mem::take(&mut self.owned);
        for (t, p) in partitions {
            let kept = old
                .iter()
                .position(|o| *o.topic == **t && o.partition == *p)
                .map(|i| old.swap_remove(i));
            self.owned.push(kept.unwrap_or_else(|| Owned {
                topic: Arc::from(t.as_str()),
                partition: *p,
                position: None,
            }));
        }
    }

    pub(super) fn assignment(&self) -> Vec<(String, i32)> {
        self.owned
            .iter()
            .map(|o| (o.topic.to_string(), o.partition))
            .collect()
    }

    /// Where `topic`-`partition` is among the partitions read; an error if it is not.
    pub(super) fn find(&self, topic: &str, partition: i32) -> Result<usize> {
        self.owned
            .iter()
            .position(|o| &*o.topic == topic && o.partition == partition)
            .ok_or_else(|| Error::InvalidConfig {
                key: "assignment".into(),
                reason: format!("partition {topic}-{partition} is not assigned to this consumer"),
            })
    }

    /// The positions set, as `(topic, partition, next offset)`.
    pub(super) fn positions(&self) -> Vec<(String, i32, i64)> {
        self.owned
            .iter()
            .filter_map(|o| o.position.map(|p| (o.topic.to_string(), o.partition, p)))
            .collect()
    }

    pub(super) fn seek(&mut self, topic: &str, partition: i32, offset: i64) -> Result<()> {
        let i = self.find(topic, partition)?;
        self.owned[i].position = Some(offset);
        Ok(())
    }

    /// ListOffsets of one partition at the reader's isolation level.
    fn listed(&self, topic: &str, partition: i32, spec: i64) -> Result<i64> {
        let level = self.config.isolation_level;
        Ok(self
            .cluster
            .list_offset(topic, partition, spec, level)?
            .offset)
    }

    /// The end of an assigned partition: its high watermark, or its last stable offset
    /// when reading committed.
    pub(super) fn end_offset(&self, topic: &str, partition: i32) -> Result<i64> {
        self.find(topic, partition)?;
        self.listed(topic, partition, Cluster::LATEST)
    }

    /// Kafka's `offsetsForTimes` of the partitions read.
    pub(super) fn offsets_for_times(
        &self,
        timestamp: i64,
    ) -> Result<Vec<(String, i32, Option<i64>)>> {
        let mut out = Vec::with_capacity(self.owned.len());
        for o in &self.owned {
            let found = self.listed(&o.topic, o.partition, timestamp)?;
            let end = self.listed(&o.topic, o.partition, Cluster::LATEST)?;
            let offset = (found >= 0 && found < end).then_some(found);
            out.push((o.topic.to_string(), o.partition, offset));
        }
        Ok(out)
    }

    /// Moves every partition read to `spec` (the log start, the end, or the first
    /// record at or after a timestamp, else the end).
    pub(super) fn seek_to(&mut self, spec: SeekSpec) -> Result<()> {
        if spec >= 0 {
            let found = self.offsets_for_times(spec)?;
            for (i, (t, p, offset)) in found.into_iter().enumerate() {
                let offset = match offset {
                    Some(o) => o,
                    None => self.listed(&t, p, Cluster::LATEST)?,
                };
                self.owned[i].position = Some(offset);
            }
            return Ok(());
        }
        for i in 0..self.owned.len() {
            let o = &self.owned[i];
            let offset = self.listed(&o.topic, o.partition, spec)?;
            self.owned[i].position = Some(offset);
        }
        Ok(())
    }

    /// The `auto.offset.reset` position of `topic`-`partition`; `from` is the offset
    /// that is not in the log, if any, for the error of the `none` policy.
    fn reset(&self, topic: &str, partition: i32, from: Option<i64>) -> Result<i64> {
        match self.config.auto_offset_reset {
            OffsetReset::Earliest => self.listed(topic, partition, Cluster::EARLIEST),
            OffsetReset::Latest => self.listed(topic, partition, Cluster::LATEST),
            OffsetReset::None => Err(Error::NoOffsetForPartition {
                partition: format!("{topic}-{partition}"),
                offset: from.unwrap_or(-1),
                start: self.listed(topic, partition, Cluster::EARLIEST)?,
                end: self.listed(topic, partition, Cluster::LATEST)?,
            }),
        }
    }

    /// Starts the partitions without a position at the group's committed offset, or at
    /// the reset position.
    pub(super) fn resolve_positions(&mut self) -> Result<()> {
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
        for (topic, partition) in pending {
            let offset = match committed.get(&(topic.clone(), partition)) {
                Some(&offset) => offset,
                None => self.reset(&topic, partition, None)?,
            };
            let i = self.find(&topic, partition)?;
            self.owned[i].position = Some(offset);
        }
        Ok(())
    }

    pub(super) fn position(&mut self, topic: &str, partition: i32) -> Result<i64> {
        let i = self.find(topic, partition)?;
        self.resolve_positions()?;
        self.owned[i].position.ok_or_else(|| Error::InvalidConfig {
            key: "assignment".into(),
            reason: format!("partition {topic}-{partition} has no position"),
        })
    }

    /// Waits up to `timeout` for records of the partitions read.
    pub(super) fn poll(&mut self, timeout: Duration) -> Result<ConsumerRecords> {
        let deadline = Instant::now() + timeout;
        loop {
            self.resolve_positions()?;
            let records = self.fetch(deadline.saturating_duration_since(Instant::now()))?;
            if !records.is_empty() || Instant::now() >= deadline {
                return Ok(records);
            }
        }
    }

    /// One Fetch to each leader of a partition read, waiting at most `wait` in all for
    /// records (a reader without partitions just waits).
    pub(super) fn fetch(&mut self, wait: Duration) -> Result<ConsumerRecords> {
        let mut out = ConsumerRecords::default();
        if self.owned.is_empty() {
            std::thread::sleep(wait);
            return Ok(out);
        }
        let mut by_leader: BTreeMap<String, Vec<(usize, i32)>> = BTreeMap::new();
        let now = Instant::now();
        self.preferred.retain(|_, (_, until)| *until > now);
        for (i, o) in self.owned.iter().enumerate() {
            match self.cluster.leader(&o.topic, o.partition) {
                Ok(Some(l)) => {
                    // The replica the leader prefers, while that holds and the
                    // metadata knows its address; else the leader.
                    let addr = self
                        .preferred
                        .get(&(Arc::clone(&o.topic), o.partition))
                        .and_then(|(id, _)| self.cluster.broker_addr(*id))
                        .unwrap_or(l.addr);
                    by_leader.entry(addr).or_default().push((i, l.epoch))
                }
                Ok(None) => self.cluster.invalidate(&o.topic),
                Err(e) if unreachable(&e) => self.cluster.invalidate(&o.topic),
                Err(e) => return Err(e),
            }
        }
        if by_leader.is_empty() {
            std::thread::sleep(wait.min(self.cluster.retry_backoff()));
            return Ok(out);
        }
        let each = wait / by_leader.len() as u32;
        for (addr, partitions) in by_leader {
            self.fetch_from(&addr, &partitions, each, &mut out)?;
        }
        Ok(out)
    }

    /// One Fetch of `partitions` (index among those read, leader epoch) from their
    /// leader at `addr`, or the replica their leader prefers.
    fn fetch_from(
        &mut self,
        addr: &str,
        partitions: &[(usize, i32)],
        wait: Duration,
        out: &mut ConsumerRecords,
    ) -> Result<()> {
        let max_bytes = self.config.max_partition_fetch_bytes.min(i32::MAX as usize) as i32;
        let fetch_max = self.config.fetch_max_bytes.min(i32::MAX as usize) as i32;
        // Every partition read from this leader, with what the request says of it.
        let wanted: BTreeMap<SessionKey, SessionState> = partitions
            .iter()
            .map(|&(i, epoch)| {
                let o = &self.owned[i];
                let key = (Arc::clone(&o.topic), o.partition);
                (key, (o.position.unwrap_or(0), epoch))
            })
            .collect();
        let session = self.sessions.entry(addr.to_string()).or_default();
        let (session_id, session_epoch) = (session.id, session.epoch);
        let incremental = session.id != 0;
        // An incremental request lists what changed and forgets what is not read.
        let changed: Vec<(&SessionKey, &SessionState)> = wanted
            .iter()
            .filter(|(k, v)| !incremental || session.sent.get(*k) != Some(*v))
            .collect();
        let forgotten: Vec<SessionKey> = match incremental {
            true => session
                .sent
                .keys()
                .filter(|k| !wanted.contains_key(*k))
                .cloned()
                .collect(),
            false => Vec::new(),
        };
        let isolation = isolation_level(self.config.isolation_level);
        let rack = self
            .config
            .client_rack
            .as_deref()
            .map(kstr)
            .unwrap_or_default();
        let build = |version: i16| {
            let sessions = version >= FETCH_SESSIONS_FROM;
            let listed: Vec<(&SessionKey, &SessionState)> = match sessions {
                true => changed.clone(),
                false => wanted.iter().collect(),
            };
            let mut topics: BTreeMap<&str, Vec<FetchPartition>> = BTreeMap::new();
            for ((topic, partition), (offset, epoch)) in listed {
                let mut p = FetchPartition::default()
                    .with_partition(*partition)
                    .with_fetch_offset(*offset)
                    .with_partition_max_bytes(max_bytes);
                if version >= 9 {
                    p = p.with_current_leader_epoch(*epoch);
                }
                topics.entry(topic).or_default().push(p);
            }
            let mut forget: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
            if sessions {
                for (topic, partition) in &forgotten {
                    forget.entry(topic).or_default().push(*partition);
                }
            }
            let request = FetchRequest::default()
                .with_replica_id(BrokerId(-1))
                .with_rack_id(match version >= 11 {
                    true => rack.clone(),
                    false => StrBytes::default(),
                })
                .with_max_wait_ms(millis(wait))
                .with_min_bytes(1)
                .with_max_bytes(fetch_max)
                .with_isolation_level(isolation)
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
            match sessions {
                true => request
                    .with_session_id(session_id)
                    .with_session_epoch(session_epoch)
                    .with_forgotten_topics_data(
                        forget
                            .into_iter()
                            .map(|(t, ps)| {
                                ForgottenTopic::default()
                                    .with_topic(TopicName(kstr(t)))
                                    .with_partitions(ps)
                            })
                            .collect(),
                    ),
                false => request,
            }
        };
        let timeout = self.cluster.request_timeout() + wait;
        let called = self.cluster.call_within(addr, FETCH, build, timeout);
        self.fetches_sent += 1;
        let (version, response) = match called {
            Ok(r) => r,
            Err(e) if unreachable(&e) => {
                // The leader (or preferred replica) is gone or moved: ask the leader,
                // where it is now, next time, in a full fetch.
                self.sessions.remove(addr);
                for &(i, _) in partitions {
                    let o = &self.owned[i];
                    self.preferred.remove(&(Arc::clone(&o.topic), o.partition));
                    self.cluster.invalidate(&o.topic);
                }
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        let sessions = version >= FETCH_SESSIONS_FROM;
        self.partitions_listed += match sessions {
            true => changed.len(),
            false => wanted.len(),
        } as u64;
        if sessions {
            let code = response.error_code;
            if code == FETCH_SESSION_ID_NOT_FOUND || code == INVALID_FETCH_SESSION_EPOCH {
                // The broker lost the session or disagrees on its epoch: the next
                // request is a full fetch that opens another.
                self.sessions.remove(addr);
                return Ok(());
            }
            let changed: Vec<(SessionKey, SessionState)> =
                changed.into_iter().map(|(k, v)| (k.clone(), *v)).collect();
            let session = self.sessions.entry(addr.to_string()).or_default();
            if !incremental {
                session.id = response.session_id;
                session.epoch = 1;
                session.sent = wanted;
            } else {
                session.epoch = next_epoch(session.epoch);
                for k in &forgotten {
                    session.sent.remove(k);
                }
                session.sent.extend(changed);
            }
            if session.id == 0 {
                // The broker keeps no session for us: full fetches.
                self.sessions.remove(addr);
            }
        }
        let api = api_version::<FetchRequest>(version);
        for t in response.responses {
            let topic = t.topic.0.to_string();
            for p in t.partitions {
                let Ok(i) = self.find(&topic, p.partition_index) else {
                    continue;
                };
                self.fetched(i, p, (&api, addr), out)?;
            }
        }
        Ok(())
    }

    /// Takes one partition of a Fetch answer of `(api, broker)`.
    fn fetched(
        &mut self,
        i: usize,
        p: kafka_protocol::messages::fetch_response::PartitionData,
        (api, broker): (&str, &str),
        out: &mut ConsumerRecords,
    ) -> Result<()> {
        let topic = Arc::clone(&self.owned[i].topic);
        let partition = self.owned[i].partition;
        let from = self.owned[i].position.unwrap_or(0);
        let key = (Arc::clone(&topic), partition);
        if p.error_code != 0 && self.preferred.remove(&key).is_some() {
            // Any error of the preferred replica (it is no longer a follower, it does
            // not have the offset yet, ...) sends the partition back to its leader,
            // which judges the offset, as Kafka's consumer does.
            return Ok(());
        }
        if p.preferred_read_replica.0 >= 0 {
            // The leader sends this consumer to a replica of its rack (with no
            // records): read there until it fails or `metadata.max.age.ms` passes.
            let until = Instant::now() + self.cluster.metadata_max_age();
            self.preferred
                .insert(key, (p.preferred_read_replica.0, until));
            return Ok(());
        }
        if p.error_code == ErrorCode::OFFSET_OUT_OF_RANGE.code() {
            self.owned[i].position = Some(self.reset(&topic, partition, Some(from))?);
            return Ok(());
        }
        if p.error_code != 0 {
            if retriable(ErrorCode::from_code(p.error_code)) {
                self.cluster.invalidate(&topic);
                return Ok(());
            }
            return Err(partition_error(
                api.to_string(),
                broker,
                &topic,
                partition,
                p.error_code,
                None,
            ));
        }
        let fetched = out.push_fetched((topic, partition, from), &p, self.config.check_crcs)?;
        if let Some(next) = fetched {
            self.owned[i].position = Some(next);
        }
        Ok(())
    }

    /// The group, or the error of an operation that needs one.
    pub(super) fn group(&self) -> Result<&str> {
        self.config
            .group_id
            .as_deref()
            .ok_or_else(|| Error::InvalidConfig {
                key: "group.id".into(),
                reason: "committed offsets need a group id".into(),
            })
    }

    /// The error of the group coordinator's Kafka `code`, answered by `broker` to `api`.
    pub(super) fn group_error(&self, api: String, broker: &str, code: i16) -> Error {
        ApiError {
            api,
            broker: broker.to_string(),
            resource: Resource::Group(self.group().unwrap_or_default().to_string()),
            code: ErrorCode::from_code(code),
            message: None,
        }
        .into()
    }

    /// Forgets the coordinator: the next request looks it up again.
    pub(super) fn forget_coordinator(&self) {
        *self.coordinator.lock() = None;
    }

    /// The group coordinator's address (FindCoordinator), looked up when not known.
    pub(super) fn coordinator(&self) -> Result<String> {
        if let Some(addr) = self.coordinator.lock().clone() {
            return Ok(addr);
        }
        let group = self.group()?;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let (broker, version, r) = self.cluster.call_any(FIND_COORDINATOR, |version| {
                let request = FindCoordinatorRequest::default().with_key_type(0);
                if version >= 4 {
                    request.with_coordinator_keys(vec![kstr(group)])
                } else {
                    request.with_key(kstr(group))
                }
            })?;
            let (code, node) = match r.coordinators.first() {
                Some(c) if version >= 4 => (c.error_code, (c.host.to_string(), c.port)),
                _ => (r.error_code, (r.host.to_string(), r.port)),
            };
            if code == 0 {
                let addr = match node.0.contains(':') {
                    true => format!("[{}]:{}", node.0, node.1),
                    false => format!("{}:{}", node.0, node.1),
                };
                *self.coordinator.lock() = Some(addr.clone());
                return Ok(addr);
            }
            let e = self.group_error(
                api_version::<FindCoordinatorRequest>(version),
                &broker,
                code,
            );
            if !retriable(ErrorCode::from_code(code)) || attempt >= ATTEMPTS {
                return Err(e);
            }
            std::thread::sleep(self.cluster.retry_backoff());
        }
    }

    /// Sends the request `build` makes to the group's coordinator, waiting up to
    /// `timeout` for the answer; a failure to reach it forgets it. Returns the
    /// coordinator's address, the version and the answer.
    pub(super) fn call_coordinator<R: Request + Message>(
        &self,
        ours: std::ops::RangeInclusive<i16>,
        build: impl FnOnce(i16) -> R,
        timeout: Duration,
    ) -> Result<(String, i16, R::Response)> {
        let addr = self.coordinator()?;
        match self.cluster.call_within(&addr, ours, build, timeout) {
            Ok((version, response)) => Ok((addr, version, response)),
            Err(e) => {
                if unreachable(&e) {
                    self.forget_coordinator();
                }
                Err(e)
            }
        }
    }

    /// True (after forgetting the coordinator) for the codes that say the group's
    /// coordinator moved or is loading: ask again.
    pub(super) fn coordinator_moved(&self, code: i16) -> bool {
        let moved = matches!(
            ErrorCode::from_code(code),
            ErrorCode::NOT_COORDINATOR
                | ErrorCode::COORDINATOR_NOT_AVAILABLE
                | ErrorCode::COORDINATOR_LOAD_IN_PROGRESS
        );
        if moved {
            self.forget_coordinator();
        }
        moved
    }

    /// The group's committed offsets of `partitions` (OffsetFetch), those it has.
    /// Reading committed, with `require_stable` (KIP-447, OffsetFetch v7): a partition
    /// whose offset a transaction holds pending is asked again until the transaction
    /// ended, for at most a minute.
    pub(super) fn fetch_committed(
        &self,
        partitions: &[(String, i32)],
    ) -> Result<BTreeMap<(String, i32), i64>> {
        let Some(group) = self.config.group_id.as_deref() else {
            return Ok(BTreeMap::new());
        };
        let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
        for (t, p) in partitions {
            by_topic.entry(t).or_default().push(*p);
        }
        let stable = self.config.isolation_level == IsolationLevel::ReadCommitted;
        let build = |version: i16| {
            let request = OffsetFetchRequest::default()
                .with_group_id(GroupId(kstr(group)))
                .with_topics(Some(
                    by_topic
                        .iter()
                        .map(|(t, ps)| {
                            OffsetFetchRequestTopic::default()
                                .with_name(TopicName(kstr(t)))
                                .with_partition_indexes(ps.clone())
                        })
                        .collect(),
                ));
            match stable && version >= 7 {
                true => request.with_require_stable(true),
                false => request,
            }
        };
        let unstable_until = Instant::now() + UNSTABLE_WAIT;
        let timeout = self.cluster.request_timeout();
        let mut attempt = 0;
        loop {
            attempt += 1;
            let last = attempt >= ATTEMPTS;
            let (broker, version, response) =
                match self.call_coordinator(OFFSET_FETCH, build, timeout) {
                    Ok(r) => r,
                    Err(e) if unreachable(&e) && !last => {
                        std::thread::sleep(self.cluster.retry_backoff());
                        continue;
                    }
                    Err(e) => return Err(e),
                };
            let refused = std::iter::once(response.error_code)
                .chain(
                    response
                        .topics
                        .iter()
                        .flat_map(|t| t.partitions.iter().map(|p| p.error_code)),
                )
                .find(|c| *c != 0);
            if let Some(code) = refused {
                let again = (code == UNSTABLE_OFFSET_COMMIT && Instant::now() < unstable_until)
                    || (self.coordinator_moved(code) && !last);
                if again {
                    std::thread::sleep(self.cluster.retry_backoff());
                    continue;
                }
                return Err(self.group_error(
                    api_version::<OffsetFetchRequest>(version),
                    &broker,
                    code,
                ));
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

    /// The group's committed offset of one partition, None without one (or without a
    /// group).
    pub(super) fn committed(&self, topic: &str, partition: i32) -> Result<Option<i64>> {
        let key = (topic.to_string(), partition);
        Ok(self
            .fetch_committed(std::slice::from_ref(&key))?
            .get(&key)
            .copied())
    }

    /// Commits `offsets` (topic, partition, next offset) for the group as `who`
    /// (OffsetCommit), asking again while the coordinator moves or (`who` being a member)
    /// finishes a rebalance the member already joined.
    pub(super) fn commit(&self, who: Committer<'_>, offsets: &[(String, i32, i64)]) -> Result<()> {
        let group = self.group()?;
        if offsets.is_empty() {
            return Ok(());
        }
        let (generation, member_id, instance) = who;
        let mut by_topic: BTreeMap<&str, Vec<OffsetCommitRequestPartition>> = BTreeMap::new();
        for (t, p, offset) in offsets {
            by_topic.entry(t).or_default().push(
                OffsetCommitRequestPartition::default()
                    .with_partition_index(*p)
                    .with_committed_offset(*offset)
                    .with_committed_metadata(Some(kstr(""))),
            );
        }
        let build = |version: i16| {
            let request = OffsetCommitRequest::default()
                .with_group_id(GroupId(kstr(group)))
                .with_generation_id_or_member_epoch(generation)
                .with_member_id(kstr(member_id))
                .with_topics(
                    by_topic
                        .iter()
                        .map(|(t, ps)| {
                            OffsetCommitRequestTopic::default()
                                .with_name(TopicName(kstr(t)))
                                .with_partitions(ps.clone())
                        })
                        .collect(),
                );
            match version >= 7 {
                true => request.with_group_instance_id(instance.map(kstr)),
                false => request,
            }
        };
        let timeout = self.cluster.request_timeout();
        let mut attempt = 0;
        loop {
            attempt += 1;
            let last = attempt >= ATTEMPTS;
            let (broker, version, response) =
                match self.call_coordinator(OFFSET_COMMIT, build, timeout) {
                    Ok(r) => r,
                    Err(e) if unreachable(&e) && !last => {
                        std::thread::sleep(self.cluster.retry_backoff());
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
            let Some((topic, partition, code)) = refused else {
                return Ok(());
            };
            let rebalancing =
                code == ErrorCode::REBALANCE_IN_PROGRESS.code() && !member_id.is_empty();
            if !last && (self.coordinator_moved(code) || rebalancing) {
                std::thread::sleep(self.cluster.retry_backoff());
                continue;
            }
            let api = api_version::<OffsetCommitRequest>(version);
            return Err(match ErrorCode::from_code(code) {
                ErrorCode::REBALANCE_IN_PROGRESS
                | ErrorCode::ILLEGAL_GENERATION
                | ErrorCode::UNKNOWN_MEMBER_ID
                | ErrorCode::NOT_COORDINATOR
                | ErrorCode::COORDINATOR_NOT_AVAILABLE
                | ErrorCode::COORDINATOR_LOAD_IN_PROGRESS => self.group_error(api, &broker, code),
                _ => partition_error(api, &broker, &topic, partition, code, None),
            });
        }
    }
}

/// A [`Consumer`](crate::Consumer) on assigned partitions of a cluster.
#[derive(Debug)]
pub(super) struct RemoteConsumer {
    reader: Reader,
    closed: bool,
}

impl RemoteConsumer {
    pub(super) fn new(cluster: Cluster, config: ConsumerConfig) -> RemoteConsumer {
        RemoteConsumer {
            reader: Reader::new(cluster, config),
            closed: false,
        }
    }

    fn check_open(&self) -> Result<()> {
        match self.closed {
            true => Err(Error::Closed("consumer".into())),
            false => Ok(()),
        }
    }
}

impl crate::consumer::RemoteConsumer for RemoteConsumer {
    fn assign(&mut self, partitions: &[(String, i32)]) -> Result<()> {
        self.check_open()?;
        self.reader.assign(partitions)
    }

    fn assignment(&self) -> Vec<(String, i32)> {
        self.reader.assignment()
    }

    fn seek(&mut self, topic: &str, partition: i32, offset: i64) -> Result<()> {
        self.check_open()?;
        self.reader.seek(topic, partition, offset)
    }

    fn seek_to(&mut self, spec: SeekSpec) -> Result<()> {
        self.check_open()?;
        self.reader.seek_to(spec)
    }

    fn offsets_for_times(&self, timestamp: i64) -> Result<Vec<(String, i32, Option<i64>)>> {
        self.check_open()?;
        self.reader.offsets_for_times(timestamp)
    }

    fn end_offset(&self, topic: &str, partition: i32) -> Result<i64> {
        self.check_open()?;
        self.reader.end_offset(topic, partition)
    }

    fn position(&mut self, topic: &str, partition: i32) -> Result<i64> {
        self.check_open()?;
        self.reader.position(topic, partition)
    }

    fn poll(&mut self, timeout: Duration) -> Result<ConsumerRecords> {
        self.check_open()?;
        self.reader.poll(timeout)
    }

    fn commit(&mut self, offsets: Option<&[(&str, i32, i64)]>) -> Result<()> {
        self.check_open()?;
        let offsets: Vec<(String, i32, i64)> = match offsets {
            Some(list) => list
                .iter()
                .map(|(t, p, o)| (t.to_string(), *p, *o))
                .collect(),
            None => self.reader.positions(),
        };
        self.reader.commit((-1, "", None), &offsets)
    }

    fn committed(&self, topic: &str, partition: i32) -> Result<Option<i64>> {
        self.reader.committed(topic, partition)
    }

    fn close(&mut self) {
        self.reader.owned.clear();
        self.closed = true;
    }
}
