//! [`Cluster`]: connections to a cluster's brokers, the metadata of its topics, and the
//! retry loop that follows a partition's leader.

use std::collections::{BTreeMap, HashMap};
use std::ops::RangeInclusive;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    BrokerId, DescribeConfigsRequest, MetadataRequest, MetadataResponse, TopicName,
};
use kafka_protocol::protocol::{Message, Request, StrBytes};
use parking_lot::{Mutex, RwLock};

use super::config::ClientConfig;
use crate::admin::{AdminClient, ConfigSource, NewTopic};
use crate::client::{Client, ClientSecurity, api_name};
use crate::config::TopicConfig;
use crate::error::{AdminError, ApiError, Error, ErrorCode, Resource, Result, TopicPartition};
use crate::storage::{CONFIG_KEYS, LogConfig};
use crate::topic::{PartitionDescription, TopicDescription};

/// DescribeConfigs versions: 1 (the first with each setting's source) to 4.
const DESCRIBE_CONFIGS: RangeInclusive<i16> = 1..=4;
/// Kafka's resource type of a topic (DescribeConfigs).
const TOPIC_RESOURCE: i8 = 2;

/// How much longer than `request.timeout.ms` the client waits for an answer, so that a
/// broker's REQUEST_TIMED_OUT arrives before the socket gives up: a quarter of it, at
/// most 2 s.
fn slack(request_timeout: Duration) -> Duration {
    (request_timeout / 4).min(Duration::from_secs(2))
}

/// A connection to a Kafka-API cluster, used where a [`Broker`](crate::Broker) is used
/// in process: cheap to clone (clones share the connections and metadata), safe to
/// share between threads. See the [module documentation](crate::remote).
#[derive(Clone, Debug)]
pub struct Cluster {
    inner: Arc<Inner>,
    /// One connection per broker address; each carries its negotiated versions. Shared
    /// by clones, except those [`with_own_connections`](Self::with_own_connections)
    /// makes.
    conns: Arc<Mutex<HashMap<String, Arc<Mutex<Client>>>>>,
}

#[derive(Debug)]
struct Inner {
    bootstrap: Vec<String>,
    client_id: String,
    request_timeout: Duration,
    connect_timeout: Duration,
    retry_backoff: Duration,
    retry_backoff_max: Duration,
    metadata_max_age: Duration,
    delivery_timeout: Duration,
    security: Arc<ClientSecurity>,
    admin: AdminClient,
    meta: RwLock<Meta>,
}

/// The cluster as the last Metadata answers showed it.
#[derive(Debug, Default)]
struct Meta {
    brokers: BTreeMap<i32, String>,
    topics: HashMap<String, TopicLeaders>,
    /// The broker that last answered a request any broker answers: asked first next
    /// time, so one that hangs (stopped, overloaded) costs one request timeout, not
    /// one per request.
    answered: Option<String>,
}

/// The leaders of one topic's partitions, and when they were learnt.
#[derive(Debug, Clone)]
struct TopicLeaders {
    /// Per partition: the leader's node id (-1: none now) and its leader epoch.
    partitions: Vec<(i32, i32)>,
    learnt: Instant,
    /// A request failed in a way that says these are out of date.
    stale: bool,
}

/// Where a partition's requests go.
#[derive(Debug, Clone)]
pub(crate) struct Leader {
    /// The leader's `host:port`.
    pub addr: String,
    /// Its leader epoch, as the last metadata gave it (-1: unknown).
    pub epoch: i32,
}

/// What one attempt of a partition request made.
pub(crate) enum Attempt<T> {
    /// Final: the value, or an error asking again would not change.
    Done(Result<T>),
    /// Ask again after fresh metadata (the leader moved, the broker was not ready).
    Retry(Error),
}

impl<T> Attempt<T> {
    /// A broker's refusal `e` with Kafka's `code`: asked again if the code is
    /// [`retriable`], final otherwise.
    pub(crate) fn refused(code: i16, e: Error) -> Attempt<T> {
        if retriable(ErrorCode::from_code(code)) {
            Attempt::Retry(e)
        } else {
            Attempt::Done(Err(e))
        }
    }
}

/// `host:port`, with an IPv6 host in brackets.
fn host_port(host: &str, port: i32) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// True for a failure to reach a broker, as opposed to its answer.
pub(crate) fn unreachable(e: &Error) -> bool {
    matches!(e, Error::Io { .. } | Error::Timeout(_))
}

/// True for Kafka's codes that a partition request answers while leadership moves or a
/// broker catches up: asking again (after fresh metadata) may succeed.
pub(crate) fn retriable(code: ErrorCode) -> bool {
    const NETWORK_EXCEPTION: i16 = 13;
    const NOT_ENOUGH_REPLICAS: i16 = 19;
    const NOT_ENOUGH_REPLICAS_AFTER_APPEND: i16 = 20;
    const KAFKA_STORAGE_ERROR: i16 = 56;
    const OFFSET_NOT_AVAILABLE: i16 = 78;
    code.is_retriable()
        || code == ErrorCode::FENCED_LEADER_EPOCH
        || code == ErrorCode::UNKNOWN_TOPIC_OR_PARTITION
        || code == ErrorCode::REQUEST_TIMED_OUT
        || matches!(
            code.code(),
            NETWORK_EXCEPTION
                | NOT_ENOUGH_REPLICAS
                | NOT_ENOUGH_REPLICAS_AFTER_APPEND
                | KAFKA_STORAGE_ERROR
                | OFFSET_NOT_AVAILABLE
        )
}

/// The error of a Kafka `code` an API answered about a partition.
pub(crate) fn partition_error(
    api: String,
    broker: &str,
    topic: &str,
    partition: i32,
    code: i16,
    message: Option<&StrBytes>,
) -> Error {
    ApiError {
        api,
        broker: broker.to_string(),
        resource: Resource::Partition(TopicPartition::new(topic, partition)),
        code: ErrorCode::from_code(code),
        message: message
            .map(|m| m.to_string())
            .filter(|m| !m.trim().is_empty()),
    }
    .into()
}

/// The pauses between the attempts of one operation: `retry.backoff.ms`, doubling up
/// to `retry.backoff.max.ms`, for at most `delivery.timeout.ms` in all.
struct Retry {
    deadline: Instant,
    backoff: Duration,
    max: Duration,
}

impl Retry {
    /// Sleeps before the next attempt; false (without sleeping) when the pause would
    /// end past the deadline.
    fn pause(&mut self) -> bool {
        if Instant::now() + self.backoff > self.deadline {
            return false;
        }
        std::thread::sleep(self.backoff);
        self.backoff = (self.backoff * 2).min(self.max);
        true
    }
}

impl Cluster {
    /// Connects to the cluster `config` names: checks every setting, asks the bootstrap
    /// addresses in turn for the cluster's brokers (negotiating the versions of each
    /// API with the broker that answers) until one answers.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming a setting that is unknown or has a bad value
    /// (`bootstrap.servers` empty or not `HOST:PORT`, TLS or SASL settings that do not
    /// go together); [`Error::Io`] or [`Error::Timeout`] when no address answers;
    /// [`Error::AuthenticationFailed`] when a broker refuses the SASL login;
    /// [`Error::UnsupportedApi`] when a broker speaks no version of Metadata this client
    /// does.
    pub fn connect(config: ClientConfig) -> Result<Cluster> {
        let parsed = config.parse()?;
        let bootstrap = parsed.admin.bootstrap_addresses()?;
        let security = Arc::new(parsed.admin.client_security()?);
        let (client_id, request_timeout, retry_backoff) = parsed.admin.timing();
        let (client_id, request_timeout, retry_backoff) =
            (client_id.to_string(), request_timeout, retry_backoff);
        let admin = parsed.admin.negotiating().connect_with(security.clone())?;
        let cluster = Cluster {
            inner: Arc::new(Inner {
                bootstrap,
                client_id,
                request_timeout,
                connect_timeout: parsed.connect_timeout,
                retry_backoff,
                retry_backoff_max: parsed.retry_backoff_max,
                metadata_max_age: parsed.metadata_max_age,
                delivery_timeout: parsed.delivery_timeout,
                security,
                admin,
                meta: RwLock::new(Meta::default()),
            }),
            conns: Arc::default(),
        };
        cluster.refresh(&[])?;
        Ok(cluster)
    }

    /// The admin client of the cluster (same settings), for what the methods here do
    /// not cover: configurations, groups, ACLs.
    pub fn admin(&self) -> &AdminClient {
        &self.inner.admin
    }

    /// The same cluster (settings, metadata) with connections of its own, as each
    /// Kafka client instance has: a consumer's requests the broker holds (a JoinGroup
    /// waiting for the group's round, a Fetch waiting for records) then hold up no one
    /// else's.
    pub(crate) fn with_own_connections(&self) -> Cluster {
        Cluster {
            inner: self.inner.clone(),
            conns: Arc::default(),
        }
    }

    /// The brokers as `(node id, host:port)`, as the last metadata gave them.
    pub fn brokers(&self) -> Vec<(i32, String)> {
        let meta = self.inner.meta.read();
        meta.brokers.iter().map(|(i, a)| (*i, a.clone())).collect()
    }

    /// The bootstrap addresses.
    pub(crate) fn bootstrap(&self) -> &[String] {
        &self.inner.bootstrap
    }

    /// The `request.timeout.ms` setting.
    pub(crate) fn request_timeout(&self) -> Duration {
        self.inner.request_timeout
    }

    /// The `metadata.max.age.ms` setting.
    pub(crate) fn metadata_max_age(&self) -> Duration {
        self.inner.metadata_max_age
    }

    /// The `host:port` of broker `id`, as the last metadata listed it.
    pub(crate) fn broker_addr(&self, id: i32) -> Option<String> {
        self.inner.meta.read().brokers.get(&id).cloned()
    }

    /// The `delivery.timeout.ms` setting.
    pub(crate) fn delivery_timeout(&self) -> Duration {
        self.inner.delivery_timeout
    }

    /// The `retry.backoff.max.ms` setting.
    pub(crate) fn retry_backoff_max(&self) -> Duration {
        self.inner.retry_backoff_max
    }

    /// How long a client waits for an answer: `request.timeout.ms` and a little slack.
    pub(crate) fn answer_timeout(&self) -> Duration {
        self.inner.request_timeout + slack(self.inner.request_timeout)
    }

    /// A connection of its own to the broker at `addr`, with this cluster's settings
    /// (it connects, negotiates versions and logs in on first use): for a producer's
    /// pipelined requests, which must not share a connection with other callers.
    pub(crate) fn connection(&self, addr: &str) -> Client {
        Client::new(addr, self.inner.client_id.clone())
            .with_security(self.inner.security.clone())
            .with_connect_timeout(self.inner.connect_timeout)
            .negotiating()
    }

    /// The connection to the broker at `addr` (opened, and its versions negotiated, on
    /// first use).
    fn conn(&self, addr: &str) -> Arc<Mutex<Client>> {
        let mut conns = self.conns.lock();
        conns
            .entry(addr.to_string())
            .or_insert_with(|| Arc::new(Mutex::new(self.connection(addr))))
            .clone()
    }

    /// Sends the request `build` makes for the version negotiated with the broker at
    /// `addr` (the highest in `ours` that it answers); returns the version and answer.
    pub(crate) fn call<R: Request + Message>(
        &self,
        addr: &str,
        ours: RangeInclusive<i16>,
        build: impl FnOnce(i16) -> R,
    ) -> Result<(i16, R::Response)> {
        self.call_within(addr, ours, build, self.inner.request_timeout)
    }

    /// As [`call`](Self::call), waiting for the answer up to `timeout` (and a little
    /// slack) instead of `request.timeout.ms`: for a request the broker holds on
    /// purpose (a JoinGroup waits for the group's rebalance).
    pub(crate) fn call_within<R: Request + Message>(
        &self,
        addr: &str,
        ours: RangeInclusive<i16>,
        build: impl FnOnce(i16) -> R,
        timeout: Duration,
    ) -> Result<(i16, R::Response)> {
        let conn = self.conn(addr);
        let mut client = conn.lock();
        let version = client.version::<R>(ours)?;
        let request = build(version);
        let response = client.call(&request, version, timeout + slack(timeout))?;
        Ok((version, response))
    }

    /// The highest finalized level of feature `name` the broker at `addr` announced
    /// (none: not finalized there); connects first if needed.
    pub(crate) fn finalized_feature(&self, addr: &str, name: &str) -> Result<Option<i16>> {
        self.conn(addr).lock().finalized_feature(name)
    }

    /// The `retry.backoff.ms` setting.
    pub(crate) fn retry_backoff(&self) -> Duration {
        self.inner.retry_backoff
    }

    /// Sends the request `build` makes to the broker at `addr` without waiting for an
    /// answer (a Produce with acks 0); returns the version sent.
    #[cfg(all(test, feature = "server"))]
    pub(crate) fn call_no_answer<R: Request + Message>(
        &self,
        addr: &str,
        ours: RangeInclusive<i16>,
        build: impl FnOnce(i16) -> R,
    ) -> Result<i16> {
        let conn = self.conn(addr);
        let mut client = conn.lock();
        let version = client.version::<R>(ours)?;
        client.submit(&build(version), version, self.answer_timeout())?;
        Ok(version)
    }

    /// The versions of every API the broker at `addr` answers, as negotiated (connects
    /// first if needed): `(api key, highest version this client uses)` is what
    /// [`call`](Self::call) picks.
    pub(crate) fn negotiated<R: Request + Message>(
        &self,
        addr: &str,
        ours: RangeInclusive<i16>,
    ) -> Result<i16> {
        self.conn(addr).lock().version::<R>(ours)
    }

    /// Asks a broker (the known ones, then the bootstrap addresses) for the metadata of
    /// `topics` (an empty list: the brokers only) and remembers brokers and leaders.
    fn refresh(&self, topics: &[&str]) -> Result<MetadataResponse> {
        self.refresh_from(topics).map(|(_, _, response)| response)
    }

    /// As [`refresh`](Self::refresh), with the address of the broker that answered and
    /// the version.
    fn refresh_from(&self, topics: &[&str]) -> Result<(String, i16, MetadataResponse)> {
        let (addr, version, response) = self.call_any(1..=12, |version| {
            MetadataRequest::default()
                .with_topics(Some(
                    topics
                        .iter()
                        .map(|n| {
                            MetadataRequestTopic::default()
                                .with_name(Some(TopicName(StrBytes::from_string(n.to_string()))))
                        })
                        .collect(),
                ))
                // Versions before 4 have no such field (and always create).
                .with_allow_auto_topic_creation(version < 4)
        })?;
        self.remember(&response);
        Ok((addr, version, response))
    }

    /// Sends a request any broker answers to the broker that answered the last one,
    /// then the other known brokers, then the bootstrap addresses, until one answers;
    /// returns its address, the version and the answer.
    pub(crate) fn call_any<R: Request + Message>(
        &self,
        ours: RangeInclusive<i16>,
        build: impl Fn(i16) -> R,
    ) -> Result<(String, i16, R::Response)> {
        let mut candidates: Vec<String> = Vec::new();
        {
            let meta = self.inner.meta.read();
            let known = meta.answered.iter().chain(meta.brokers.values());
            for b in known.chain(&self.inner.bootstrap) {
                if !candidates.contains(b) {
                    candidates.push(b.clone());
                }
            }
        }
        let mut last = None;
        for addr in candidates {
            match self.call(&addr, ours.clone(), &build) {
                Ok((version, response)) => {
                    self.inner.meta.write().answered = Some(addr.clone());
                    return Ok((addr, version, response));
                }
                Err(e) if unreachable(&e) => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| Error::InvalidConfig {
            key: "bootstrap.servers".into(),
            reason: "no broker address to connect to".into(),
        }))
    }

    fn remember(&self, response: &MetadataResponse) {
        let mut meta = self.inner.meta.write();
        if !response.brokers.is_empty() {
            meta.brokers = response
                .brokers
                .iter()
                .map(|b| (b.node_id.0, host_port(&b.host, b.port)))
                .collect();
        }
        let now = Instant::now();
        for t in &response.topics {
            let Some(name) = t.name.as_ref().map(|n| n.0.to_string()) else {
                continue;
            };
            if t.error_code != 0 {
                meta.topics.remove(&name);
                continue;
            }
            let mut partitions = vec![(-1, -1); t.partitions.len()];
            for p in &t.partitions {
                if let Some(slot) = usize::try_from(p.partition_index)
                    .ok()
                    .and_then(|i| partitions.get_mut(i))
                {
                    *slot = (p.leader_id.0, p.leader_epoch);
                }
            }
            meta.topics.insert(
                name,
                TopicLeaders {
                    partitions,
                    learnt: now,
                    stale: false,
                },
            );
        }
    }

    /// The leaders of `topic` as known, asking for them when unknown, marked stale or
    /// older than `metadata.max.age.ms`.
    fn leaders(&self, topic: &str) -> Result<TopicLeaders> {
        let fresh = |t: &TopicLeaders| !t.stale && t.learnt.elapsed() < self.inner.metadata_max_age;
        if let Some(t) = self
            .inner
            .meta
            .read()
            .topics
            .get(topic)
            .filter(|t| fresh(t))
        {
            return Ok(t.clone());
        }
        // A topic whose leaders are being elected (just created, or every replica of a
        // partition away) is answered LEADER_NOT_AVAILABLE, a retriable code: asked
        // again after `retry.backoff.ms` (doubling up to `retry.backoff.max.ms`) for at
        // most `delivery.timeout.ms`, as Kafka's clients wait for a new topic's metadata.
        let mut retry = self.retry();
        let response = loop {
            let response = self.refresh(&[topic])?;
            let electing = response.topics.iter().any(|t| {
                t.name.as_ref().is_some_and(|n| n.0.as_str() == topic)
                    && t.error_code == ErrorCode::LEADER_NOT_AVAILABLE.code()
            });
            if !electing || !retry.pause() {
                break response;
            }
        };
        let answer = response
            .topics
            .iter()
            .find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == topic));
        match answer {
            Some(t) if t.error_code == ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.code() => {
                Err(Error::UnknownTopic(topic.to_string()))
            }
            Some(t) if t.error_code != 0 => Err(ApiError {
                api: "Metadata".into(),
                broker: self
                    .brokers()
                    .first()
                    .map(|b| b.1.clone())
                    .unwrap_or_default(),
                resource: Resource::Topic(topic.to_string()),
                code: ErrorCode::from_code(t.error_code),
                message: None,
            }
            .into()),
            _ => self
                .inner
                .meta
                .read()
                .topics
                .get(topic)
                .cloned()
                .ok_or_else(|| Error::UnknownTopic(topic.to_string())),
        }
    }

    /// Forgets what is known of `topic`'s leaders: the next request asks again.
    pub(crate) fn invalidate(&self, topic: &str) {
        if let Some(t) = self.inner.meta.write().topics.get_mut(topic) {
            t.stale = true;
        }
    }

    /// The number of partitions of `topic` (from metadata, asked when unknown).
    ///
    /// # Errors
    /// [`Error::UnknownTopic`] when the cluster has no such topic.
    pub fn partition_count(&self, topic: &str) -> Result<i32> {
        let known = self.inner.meta.read().topics.get(topic).and_then(|t| {
            (!t.stale && t.learnt.elapsed() < self.inner.metadata_max_age)
                .then_some(t.partitions.len() as i32)
        });
        match known {
            Some(n) => Ok(n),
            None => Ok(self.leaders(topic)?.partitions.len() as i32),
        }
    }

    /// The leader of `partition` of `topic`, or `None` while it has none.
    pub(crate) fn leader(&self, topic: &str, partition: i32) -> Result<Option<Leader>> {
        let leaders = self.leaders(topic)?;
        let Some(&(node, epoch)) = usize::try_from(partition)
            .ok()
            .and_then(|i| leaders.partitions.get(i))
        else {
            return Err(Error::UnknownPartition {
                topic: topic.to_string(),
                partition,
                count: leaders.partitions.len() as i32,
            });
        };
        let addr = self.inner.meta.read().brokers.get(&node).cloned();
        Ok(addr.map(|addr| Leader { addr, epoch }))
    }

    /// Runs `attempt` against the leader of `topic`/`partition` until it is done: after
    /// an [`Attempt::Retry`] or a broker that cannot be reached, marks the metadata
    /// stale, pauses (`retry.backoff.ms`, doubling up to `retry.backoff.max.ms`) and
    /// asks the leader again, for at most `delivery.timeout.ms` in all.
    pub(crate) fn on_leader<T>(
        &self,
        topic: &str,
        partition: i32,
        mut attempt: impl FnMut(&Leader) -> Attempt<T>,
    ) -> Result<T> {
        let mut retry = self.retry();
        loop {
            let error = match self.leader(topic, partition) {
                Ok(Some(leader)) => match attempt(&leader) {
                    Attempt::Done(Err(e)) if unreachable(&e) => e,
                    Attempt::Done(done) => return done,
                    Attempt::Retry(e) => e,
                },
                Ok(None) => partition_error(
                    "Metadata".into(),
                    &self
                        .brokers()
                        .first()
                        .map(|b| b.1.clone())
                        .unwrap_or_default(),
                    topic,
                    partition,
                    ErrorCode::LEADER_NOT_AVAILABLE.code(),
                    None,
                ),
                Err(e) if unreachable(&e) => e,
                Err(e) => return Err(e),
            };
            self.invalidate(topic);
            if !retry.pause() {
                return Err(error);
            }
        }
    }

    /// The pauses of one operation's attempts, from now.
    fn retry(&self) -> Retry {
        Retry {
            deadline: Instant::now() + self.inner.delivery_timeout,
            backoff: self.inner.retry_backoff,
            max: self.inner.retry_backoff_max,
        }
    }

    /// Creates `topic` with `partitions` partitions (the cluster's default replication
    /// factor) and the settings of `config`.
    ///
    /// # Errors
    /// [`Error::TopicExists`] when it exists (as in process); a broker's refusal
    /// (INVALID_CONFIG, INVALID_PARTITIONS, ...) as [`Error::Admin`].
    pub fn create_topic(&self, name: &str, partitions: i32, config: TopicConfig) -> Result<()> {
        let mut new = NewTopic::new(name).partitions(partitions);
        new.configs = config
            .overrides()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let mut results = self.inner.admin.create_topics(&[new])?;
        match results.remove(name).unwrap_or(Ok(())) {
            Err(Error::Admin(e)) if e.code == ErrorCode::TOPIC_ALREADY_EXISTS => {
                Err(Error::TopicExists(name.to_string()))
            }
            other => other,
        }
    }

    /// Creates `topic` unless it exists; an existing topic must have `partitions`
    /// partitions, as [`Broker::create_topic_if_missing`](crate::Broker::create_topic_if_missing)
    /// requires (its settings are left as they are).
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] (key `partitions`) when the topic exists with another
    /// count; the errors of [`create_topic`](Self::create_topic).
    pub fn create_topic_if_missing(
        &self,
        name: &str,
        partitions: i32,
        config: TopicConfig,
    ) -> Result<()> {
        match self.create_topic(name, partitions, config) {
            Err(Error::TopicExists(_)) => {}
            created_or_failed => return created_or_failed,
        }
        self.invalidate(name);
        let current = self.partition_count(name)?;
        if current != partitions {
            return Err(Error::InvalidConfig {
                key: "partitions".into(),
                reason: format!(
                    "topic {name:?} already exists with {current} partitions, not {partitions}"
                ),
            });
        }
        Ok(())
    }

    /// The names of the cluster's topics, sorted (internal ones included).
    pub fn topics(&self) -> Result<Vec<String>> {
        let metadata = self.inner.admin.metadata()?;
        Ok(metadata.topics.into_iter().map(|t| t.name).collect())
    }

    /// The partitions of `topic` with their offsets, leaders, replicas and in-sync
    /// replicas, and its settings: the same [`TopicDescription`] as
    /// [`Broker::describe_topic`](crate::Broker::describe_topic). Each request goes in
    /// the version negotiated with the broker asked: one Metadata, one DescribeConfigs,
    /// and two ListOffsets (earliest, latest) per partition leader; sizes and segment
    /// counts are not reported over the network.
    ///
    /// # Errors
    /// [`Error::UnknownTopic`] when the cluster has no such topic;
    /// [`Error::UnsupportedApi`] naming DescribeConfigs on a broker without it;
    /// `InvalidConfig` naming the setting when the broker reports a value tidelog
    /// cannot read.
    pub fn describe_topic(&self, name: &str) -> Result<TopicDescription> {
        let (addr, version, metadata) = self.refresh_from(&[name])?;
        let topic = metadata
            .topics
            .into_iter()
            .find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == name))
            .ok_or_else(|| Error::UnknownTopic(name.into()))?;
        topic_answer(
            name,
            topic.error_code,
            None,
            (&addr, || api_version::<MetadataRequest>(version)),
        )?;
        let (config, log_config) = self.topic_configs(name)?;
        let mut ids: Vec<i32> = topic.partitions.iter().map(|p| p.partition_index).collect();
        ids.sort_unstable();
        let starts = self.list_offsets(name, &ids, Cluster::EARLIEST)?;
        let ends = self.list_offsets(name, &ids, Cluster::LATEST)?;
        let nodes = |ids: &[BrokerId]| ids.iter().map(|b| b.0).collect::<Vec<i32>>();
        let mut partitions: Vec<PartitionDescription> = topic
            .partitions
            .iter()
            .map(|p| PartitionDescription {
                partition: p.partition_index,
                log_start_offset: starts.get(&p.partition_index).copied().unwrap_or(0),
                log_end_offset: ends.get(&p.partition_index).copied().unwrap_or(0),
                leader: Some(p.leader_id.0).filter(|l| *l >= 0),
                replicas: nodes(&p.replica_nodes),
                isr: nodes(&p.isr_nodes),
                size_bytes: None,
                segments: None,
            })
            .collect();
        partitions.sort_by_key(|p| p.partition);
        Ok(TopicDescription {
            name: name.to_string(),
            internal: topic.is_internal,
            config,
            log_config,
            partitions,
        })
    }

    /// The settings of `topic` (DescribeConfigs, at the version negotiated with the
    /// broker asked): its own overrides, and every setting tidelog's `LogConfig` has.
    fn topic_configs(&self, name: &str) -> Result<(TopicConfig, LogConfig)> {
        let (addr, version, response) = self.call_any(DESCRIBE_CONFIGS, |_| {
            DescribeConfigsRequest::default().with_resources(vec![
                DescribeConfigsResource::default()
                    .with_resource_type(TOPIC_RESOURCE)
                    .with_resource_name(StrBytes::from_string(name.to_string()))
                    .with_configuration_keys(None),
            ])
        })?;
        let result = response
            .results
            .into_iter()
            .find(|r| r.resource_name.as_str() == name)
            .ok_or_else(|| Error::UnknownTopic(name.into()))?;
        topic_answer(
            name,
            result.error_code,
            result.error_message.as_ref(),
            (&addr, || api_version::<DescribeConfigsRequest>(version)),
        )?;
        let mut config = TopicConfig::new();
        let mut log_config = LogConfig::default();
        for entry in result.configs {
            let Some(value) = entry.value else { continue };
            let key = entry.name.as_str();
            if ConfigSource::from_wire(entry.config_source) == ConfigSource::Topic {
                config = config.set(key, value.as_str());
            }
            if CONFIG_KEYS.contains(&key) {
                log_config
                    .set(key, value.as_str())
                    .map_err(|e| Error::InvalidConfig {
                        key: key.to_string(),
                        reason: format!("topic {name:?} as the cluster describes it: {e}"),
                    })?;
            }
        }
        Ok((config, log_config))
    }

    /// Deletes `topic` and its data.
    ///
    /// # Errors
    /// [`Error::UnknownTopic`] when the cluster has no such topic.
    pub fn delete_topic(&self, name: &str) -> Result<()> {
        let mut results = self.inner.admin.delete_topics(&[name])?;
        self.inner.meta.write().topics.remove(name);
        known_topic(name, results.remove(name).unwrap_or(Ok(())))
    }

    /// Grows `topic` to `total` partitions (as
    /// [`Broker::add_partitions`](crate::Broker::add_partitions)).
    ///
    /// # Errors
    /// [`Error::UnknownTopic`]; INVALID_PARTITIONS (as [`Error::Admin`]) for a count
    /// that is not a growth.
    pub fn add_partitions(&self, name: &str, total: i32) -> Result<()> {
        let mut results = self.inner.admin.create_partitions(&[(name, total)])?;
        self.invalidate(name);
        known_topic(name, results.remove(name).unwrap_or(Ok(())))
    }
}

crate::broker::topic_admin_by_inherent_methods!(Cluster);

/// `result`, with a broker's UNKNOWN_TOPIC_OR_PARTITION for `name` as the in-process
/// error ([`Error::UnknownTopic`]).
fn known_topic<T>(name: &str, result: Result<T>) -> Result<T> {
    match result {
        Err(Error::Admin(e)) if is_unknown_topic(&e) => Err(Error::UnknownTopic(name.into())),
        other => other,
    }
}

fn is_unknown_topic(e: &AdminError) -> bool {
    e.code == ErrorCode::UNKNOWN_TOPIC_OR_PARTITION
}

/// A broker's answer `code` about topic `name`: fine (0), [`Error::UnknownTopic`], or
/// the refusal of the API `api()` names by the broker at `broker`.
fn topic_answer(
    name: &str,
    code: i16,
    message: Option<&StrBytes>,
    (broker, api): (&str, impl FnOnce() -> String),
) -> Result<()> {
    match code {
        0 => Ok(()),
        c if c == ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.code() => {
            Err(Error::UnknownTopic(name.into()))
        }
        c => Err(ApiError {
            api: api(),
            broker: broker.to_string(),
            resource: Resource::Topic(name.to_string()),
            code: ErrorCode::from_code(c),
            message: message
                .map(|m| m.to_string())
                .filter(|m| !m.trim().is_empty()),
        }
        .into()),
    }
}

/// The API and version of a request, as errors name it: `Produce v9`.
pub(crate) fn api_version<R: Request>(version: i16) -> String {
    format!("{} v{version}", api_name(R::KEY))
}
