//! The broker: a data directory, its topics, the group coordinator and the background
//! threads.
//!
//! Invariants:
//! - One broker per data directory (the storage layer's `.lock`).
//! - The topic registry (`<dir>/topics`) is a crash-safe checkpoint: written to a
//!   temporary file, fsynced, renamed, directory fsynced. A topic's partition logs are
//!   created before the registry names them and deleted after it stops naming them, so
//!   a crash leaves at worst an orphan directory, never a registered topic without logs;
//!   the next open reports it and moves it aside (`orphaned/`), never deletes it.
//! - Creation is all or nothing: a topic or a growth is checked against
//!   `max_partitions` before a file is made, and one that fails part way removes every
//!   partition directory it made.
//! - Admin operations (create, delete, add partitions) are serialized by one mutex;
//!   lookups read a snapshot and never wait for them.
//! - `close()` (or dropping the last clone) stops the group reaper and the storage
//!   maintenance thread, wakes every blocked poller, and closes the logs.
//! - On a cluster node (a data directory with `__cluster_metadata-0/raft-state`, or a
//!   broker a cluster node was attached to) the cluster's metadata decides the topics:
//!   admin operations go to the [`TopicAuthority`], which applies the outcome back with
//!   `apply_cluster_topic` / `remove_cluster_topic`; the `topics` registry file is not
//!   used, and each partition directory holds Kafka's `partition.metadata` (topic id).

mod metrics;
mod share;
mod topic_admin;
pub(crate) mod transactions;

#[cfg(feature = "server")]
pub(crate) use transactions::{RemoteTransactions, TxnMarkerWrite};

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
#[cfg(feature = "server")]
use std::sync::Weak;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use parking_lot::{Mutex, RwLock};

use crate::config::{BrokerConfig, TopicConfig, validate_topic_name};
use crate::coordinator::GroupCoordinator;
use crate::error::{Error, Result};
use crate::storage::dirs::DirHealth;
use crate::storage::{
    CleanupPolicy, LogConfig, LogManager, OrphanedLog, read_checkpoint, write_checkpoint,
};
use crate::topic::{Partition, Topic, TopicDescription};
use crate::transaction::log::TRANSACTION_STATE_TOPIC;

#[cfg(feature = "client")]
pub(crate) use metrics::ForwarderProbe;
pub use topic_admin::TopicAdmin;
#[cfg(feature = "client")]
pub(crate) use topic_admin::topic_admin_by_inherent_methods;

/// Name of the internal topic that stores committed group offsets.
pub const OFFSETS_TOPIC: &str = "__consumer_offsets";

const REGISTRY_FILE: &str = "topics";

/// The name Kafka reserves for the cluster's metadata log (KRaft's topic); a cluster
/// node keeps its Raft log in `<data>/__cluster_metadata-0/`.
pub(crate) const CLUSTER_METADATA_TOPIC: &str = "__cluster_metadata";
/// The directory of a cluster node's Raft log.
pub(crate) const CLUSTER_METADATA_DIR: &str = "__cluster_metadata-0";
/// The file whose presence in [`CLUSTER_METADATA_DIR`] makes a data directory a cluster
/// node's.
pub(crate) const CLUSTER_STATE_FILE: &str = "raft-state";
/// Kafka's per-partition file naming the topic id.
pub(crate) const PARTITION_METADATA_FILE: &str = "partition.metadata";

/// Decides the topics of a cluster node: the broker hands its admin operations to it and
/// it applies the outcome back through [`Broker::apply_cluster_topic`] and
/// [`Broker::remove_cluster_topic`] before returning. Implemented by the cluster module
/// (the layer above), so the broker does not depend on it.
pub(crate) trait TopicAuthority: Send + Sync {
    /// Creates a topic (the cluster's default replication factor).
    fn create_topic(&self, name: &str, partitions: i32, config: &TopicConfig) -> Result<()>;
    /// Deletes a topic.
    fn delete_topic(&self, name: &str) -> Result<()>;
    /// Grows a topic to `total` partitions.
    fn add_partitions(&self, name: &str, total: i32) -> Result<()>;
    /// Replaces a topic's config overrides.
    fn alter_topic_config(&self, name: &str, config: &TopicConfig) -> Result<()>;
    /// Partition `partition` of `topic` is served from `new` now, its log moved into
    /// another log directory (AlterReplicaLogDirs): `new` takes `old`'s replica role and
    /// the replication follows it. By default nothing follows it (an authority that
    /// replicates nothing).
    fn replica_moved(&self, topic: &str, partition: i32, old: &Partition, new: &Partition) {
        let _ = (topic, partition, old, new);
    }
}

/// A topic as a cluster's metadata says it, for this node.
#[derive(Debug, Clone)]
pub(crate) struct ClusterTopic {
    /// Name.
    pub name: String,
    /// Topic id, as Kafka prints it (base64).
    pub id: String,
    /// Partitions of the topic.
    pub partition_count: i32,
    /// Partitions this node holds a replica of, sorted.
    pub hosted: Vec<i32>,
    /// Config overrides.
    pub config: TopicConfig,
    /// True for `__consumer_offsets`.
    pub internal: bool,
}

struct BrokerInner {
    dir: PathBuf,
    config: BrokerConfig,
    logs: Mutex<Option<LogManager>>,
    /// The health of `logs`' directories, read without `logs`' lock: that lock is held
    /// while a cluster node opens a topic's logs, and a cluster node's Raft thread,
    /// which answers the controller, reads the failed directories every tick.
    dir_health: Vec<Arc<DirHealth>>,
    topics: RwLock<BTreeMap<String, Topic>>,
    /// Serializes create / delete / add-partitions and registry writes.
    admin: Mutex<()>,
    coordinator: GroupCoordinator,
    /// The transaction coordinator; its `__transaction_state` is made on first use.
    transactions: crate::transaction::TransactionCoordinator,
    /// Serializes the first use of `__transaction_state`.
    txn_setup: Mutex<()>,
    /// The share coordinator (KIP-932); its `__share_group_state` is made on first use.
    share: crate::coordinator::ShareCoordinator,
    /// Held while `__share_group_state` is made and loaded.
    share_setup: Mutex<()>,
    /// The next and the first unreserved producer id of in-process transactional
    /// producers (`broker/transactions.rs`), once read.
    in_process_ids: Mutex<Option<(i64, i64)>>,
    closed: AtomicBool,
    /// True on a cluster node: the topics come from the cluster's metadata.
    managed: AtomicBool,
    /// The cluster node deciding the topics, once attached.
    authority: RwLock<Option<Arc<dyn TopicAuthority>>>,
    /// The transaction coordinators of other nodes (a cluster node's), once attached.
    remote_transactions: RwLock<Option<Arc<dyn transactions::RemoteTransactions>>>,
    /// Topic ids (Kafka's, base64) by topic name: from the cluster's metadata on a
    /// cluster node, from the partitions' `partition.metadata` on a single node.
    topic_ids: RwLock<HashMap<String, String>>,
    /// Partition directories of no topic moved aside since the broker opened.
    orphans: Mutex<Vec<OrphanedLog>>,
    /// The threads moving partitions between log directories (joined at close).
    movers: Mutex<Vec<std::thread::JoinHandle<()>>>,
    /// Opened read-only: another process may write the directory; this one never does.
    read_only: bool,
    /// What `metrics()` adds beyond the topics, groups and logs (the servers).
    stats: crate::metrics::BrokerStats,
    /// The store-and-forward forwarders running on these topics, for `metrics()`.
    forwarders: metrics::Forwarders,
}

/// The offsets journal of a read-only broker: every commit is refused.
struct ReadOnlyJournal(PathBuf);

impl crate::coordinator::offsets::OffsetJournal for ReadOnlyJournal {
    fn append(&self, _records: &[crate::coordinator::offsets::JournalRecord]) -> Result<()> {
        Err(Error::ReadOnly(self.0.clone()))
    }

    fn append_txn(
        &self,
        _producer_id: i64,
        _producer_epoch: i16,
        _records: &[crate::coordinator::offsets::JournalRecord],
    ) -> Result<()> {
        Err(Error::ReadOnly(self.0.clone()))
    }
}

#[cfg(feature = "server")]
/// A handle that does not keep the broker open (held by the cluster node, which the
/// broker holds in turn).
#[derive(Clone)]
pub(crate) struct WeakBroker {
    inner: Weak<BrokerInner>,
}

#[cfg(feature = "server")]
impl WeakBroker {
    /// The broker, if it is still alive.
    pub(crate) fn upgrade(&self) -> Option<Broker> {
        self.inner.upgrade().map(|inner| Broker { inner })
    }
}

/// True if `dir` holds a cluster node's Raft log.
pub(crate) fn is_cluster_dir(dir: &Path) -> bool {
    dir.join(CLUSTER_METADATA_DIR)
        .join(CLUSTER_STATE_FILE)
        .exists()
}

/// Writes `partition.metadata` (Kafka's format) into a partition directory.
fn write_partition_metadata(dir: &Path, topic_id: &str) -> Result<()> {
    use std::io::Write;
    let path = dir.join(PARTITION_METADATA_FILE);
    let tmp = dir.join("partition.metadata.tmp");
    {
        let mut f = std::fs::File::create(&tmp).map_err(|e| Error::io("create", &tmp, e))?;
        f.write_all(format!("version: 0\ntopic_id: {topic_id}\n").as_bytes())
            .and_then(|()| f.sync_all())
            .map_err(|e| Error::io("write", &tmp, e))?;
    }
    std::fs::rename(&tmp, &path).map_err(|e| Error::io("rename into place", &path, e))?;
    crate::storage::sync_dir(dir)
}

/// The topic id in a partition directory's `partition.metadata`, if it has one.
fn read_partition_metadata(dir: &Path) -> Option<String> {
    let text = std::fs::read_to_string(dir.join(PARTITION_METADATA_FILE)).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("topic_id:"))
        .map(|id| id.trim().to_string())
}

/// An open data directory with its topics and group coordinator.
///
/// Cheap to clone (an `Arc` inside), `Send + Sync`: hand clones to threads, producers,
/// consumers and the network server. The broker closes when [`Broker::close`] is called
/// or the last clone is dropped.
#[derive(Clone)]
pub struct Broker {
    inner: Arc<BrokerInner>,
}

impl std::fmt::Debug for Broker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Broker")
            .field("dir", &self.inner.dir)
            .field("closed", &self.is_closed())
            .finish()
    }
}

/// Configures and opens a [`Broker`]. Every setting documents its default and the
/// Kafka setting it mirrors.
#[derive(Debug, Clone)]
#[must_use]
pub struct BrokerBuilder {
    dir: PathBuf,
    config: BrokerConfig,
}

impl BrokerBuilder {
    /// The data directory to open.
    #[cfg_attr(not(feature = "server"), allow(dead_code))]
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// Default log settings of every topic (Kafka `log.segment.bytes`,
    /// `log.retention.ms`, ...). Default: `LogConfig::default()`, Kafka's values.
    pub fn log_config(mut self, config: LogConfig) -> Self {
        self.config.log = config;
        self
    }

    /// Default segment size (Kafka `log.segment.bytes`). Default 1 GiB.
    pub fn segment_bytes(mut self, bytes: u64) -> Self {
        self.config.log.segment_bytes = bytes;
        self
    }

    /// Default retention; None keeps records forever (Kafka `log.retention.ms`).
    /// Default 7 days.
    pub fn retention(mut self, age: Option<Duration>) -> Self {
        self.config.log.retention_ms = age.map(|d| d.as_millis() as u64);
        self
    }

    /// Default of every topic's `durable.acks` (`log.durable.acks`, a tidelog setting):
    /// an `acks=all` write is answered once the leader and every in-sync replica have
    /// fsynced it. A topic's own `durable.acks` overrides it. Default false, as Kafka.
    pub fn durable_acks(mut self, durable: bool) -> Self {
        self.config.log.durable_acks = durable;
        self
    }

    /// How often retention runs (Kafka `log.retention.check.interval.ms`). Default
    /// 5 min.
    pub fn retention_check_interval(mut self, interval: Duration) -> Self {
        self.config.retention_check_interval = interval;
        self
    }

    /// How often `flush.ms` is checked (Kafka `log.flush.scheduler.interval.ms`).
    /// Default 1 s.
    pub fn flush_check_interval(mut self, interval: Duration) -> Self {
        self.config.flush_check_interval = interval;
        self
    }

    /// Smallest session timeout a group member may ask for (Kafka
    /// `group.min.session.timeout.ms`). Default 6 s.
    pub fn group_min_session_timeout(mut self, timeout: Duration) -> Self {
        self.config.coordinator.min_session_timeout = timeout;
        self
    }

    /// Largest session timeout a group member may ask for (Kafka
    /// `group.max.session.timeout.ms`). Default 30 min.
    pub fn group_max_session_timeout(mut self, timeout: Duration) -> Self {
        self.config.coordinator.max_session_timeout = timeout;
        self
    }

    /// How long the first rebalance of a new group of network clients waits for more
    /// members (Kafka `group.initial.rebalance.delay.ms`). Default 3 s, as Kafka.
    pub fn group_initial_rebalance_delay(mut self, delay: Duration) -> Self {
        self.config.coordinator.initial_rebalance_delay = delay;
        self
    }

    /// The same delay for a group whose first member is in-process. Default 0 (members
    /// of one process join together; a later join starts another rebalance).
    pub fn group_initial_rebalance_delay_in_process(mut self, delay: Duration) -> Self {
        self.config.coordinator.in_process_initial_rebalance_delay = delay;
        self
    }

    /// How long a member of a consumer-protocol group (KIP-848) may go without a
    /// heartbeat (Kafka `group.consumer.session.timeout.ms`). Default 45 s.
    pub fn group_consumer_session_timeout(mut self, timeout: Duration) -> Self {
        self.config.coordinator.consumer_session_timeout = timeout;
        self
    }

    /// Whether groups convert online between the classic and the consumer protocol
    /// (Kafka `group.consumer.migration.policy`, KIP-848): a classic group becomes a
    /// consumer group when a consumer-protocol member joins it (upgrade), and back when
    /// its last consumer-protocol member leaves (downgrade). Default `Bidirectional`.
    pub fn group_consumer_migration_policy(
        mut self,
        policy: crate::config::ConsumerGroupMigrationPolicy,
    ) -> Self {
        self.config.coordinator.consumer_migration_policy = policy;
        self
    }

    /// How often members of a consumer-protocol group are told to heartbeat (Kafka
    /// `group.consumer.heartbeat.interval.ms`). Default 5 s.
    pub fn group_consumer_heartbeat_interval(mut self, interval: Duration) -> Self {
        self.config.coordinator.consumer_heartbeat_interval = interval;
        self
    }

    /// The bounds of a group's `consumer.session.timeout.ms` config (Kafka
    /// `group.consumer.min.session.timeout.ms` and `group.consumer.max.session.timeout.ms`):
    /// IncrementalAlterConfigs of a value outside them answers INVALID_CONFIG. Default
    /// 45 s and 60 s.
    pub fn group_consumer_session_timeout_bounds(mut self, min: Duration, max: Duration) -> Self {
        self.config.coordinator.consumer_min_session_timeout = min;
        self.config.coordinator.consumer_max_session_timeout = max;
        self
    }

    /// The bounds of a group's `consumer.heartbeat.interval.ms` config (Kafka
    /// `group.consumer.min.heartbeat.interval.ms` and
    /// `group.consumer.max.heartbeat.interval.ms`). Default 5 s and 15 s.
    pub fn group_consumer_heartbeat_interval_bounds(
        mut self,
        min: Duration,
        max: Duration,
    ) -> Self {
        self.config.coordinator.consumer_min_heartbeat_interval = min;
        self.config.coordinator.consumer_max_heartbeat_interval = max;
        self
    }

    /// Partitions of `__consumer_offsets` when this broker creates it (Kafka
    /// `offsets.topic.num.partitions`). Default 50. Groups are spread over them by
    /// their id's hash, as Kafka does; a data directory whose `__consumer_offsets`
    /// exists keeps its count whatever this says.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let broker = tidelog::Broker::builder(dir.path())
    ///     .offsets_topic_num_partitions(3)
    ///     .open()?;
    /// assert_eq!(broker.topic(tidelog::OFFSETS_TOPIC)?.partition_count(), 3);
    /// # Ok::<(), tidelog::Error>(())
    /// ```
    pub fn offsets_topic_num_partitions(mut self, partitions: i32) -> Self {
        self.config.coordinator.offsets_topic_num_partitions = partitions;
        self
    }

    /// Partitions of auto-created topics (Kafka `num.partitions`). Default 1.
    pub fn default_partitions(mut self, partitions: i32) -> Self {
        self.config.default_partitions = partitions;
        self
    }

    /// Create unknown topics, with [`default_partitions`](Self::default_partitions)
    /// partitions, when they are first used: by [`Broker::topic`] (so by in-process
    /// producers and consumers) and, through a [`Server`](crate::Server) that keeps the
    /// broker's setting, by Kafka clients' Metadata requests (Kafka
    /// `auto.create.topics.enable`).
    ///
    /// Default false, where Kafka's default is true: in an embedded program the program
    /// creates its topics (see [`Broker::create_topic_if_missing`]), and a misspelt
    /// topic name is an `UnknownTopic` error rather than a new, empty topic that
    /// consumers wait on. `tidelog serve` turns it on, as a Kafka broker has it.
    pub fn auto_create_topics(mut self, yes: bool) -> Self {
        self.config.auto_create_topics = yes;
        self
    }

    /// Partitions the broker holds at most, over all its topics (`tidelog serve
    /// --max-partitions`). A [`Broker::create_topic`], auto-creation, CreateTopics,
    /// [`Broker::add_partitions`] or CreatePartitions that would pass it is refused
    /// whole with [`Error::InvalidPartitions`] (Kafka's INVALID_PARTITIONS) before a
    /// file is created. Default: what the process can hold
    /// ([`StorageLimits::partitions_that_fit`](crate::storage::StorageLimits::partitions_that_fit)).
    pub fn max_partitions(mut self, partitions: usize) -> Self {
        self.config.max_partitions = partitions;
        self
    }

    /// What the partitions' logs hold open at once: descriptors (a cache of the
    /// recently used ones) and mapped sealed segments. Default:
    /// [`StorageLimits::default`](crate::storage::StorageLimits::default).
    pub fn storage_limits(mut self, limits: crate::storage::StorageLimits) -> Self {
        self.config.storage_limits = limits;
        self
    }

    /// More log directories for partitions besides the data directory (Kafka's
    /// `log.dirs`, JBOD; `tidelog serve --log-dirs`). The data directory keeps the
    /// metadata files and holds partitions like the others; a new partition goes to
    /// the usable directory holding the fewest, an existing one is found in whichever
    /// holds it. A directory that fails (missing or unusable at open, an I/O error
    /// later) takes only its partitions offline: they answer a storage error
    /// (KAFKA_STORAGE_ERROR), the others serve. Give the same list at every open.
    ///
    /// ```
    /// # let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    /// let broker = tidelog::Broker::builder(a.path())
    ///     .log_dirs([b.path()])
    ///     .open()?;
    /// assert_eq!(broker.log_dirs().len(), 2);
    /// # Ok::<(), tidelog::Error>(())
    /// ```
    pub fn log_dirs<P: AsRef<Path>>(mut self, extra: impl IntoIterator<Item = P>) -> Self {
        self.config.extra_log_dirs = extra
            .into_iter()
            .map(|p| p.as_ref().to_path_buf())
            .collect();
        self
    }

    /// The transaction coordinator's settings (Kafka's `transaction.*`). Default:
    /// [`TransactionConfig::default`](crate::config::TransactionConfig::default).
    pub fn transaction(mut self, config: crate::config::TransactionConfig) -> Self {
        self.config.transaction = config;
        self
    }

    /// Opens the directory (created if missing), recovers every partition and starts
    /// the background threads.
    pub fn open(self) -> Result<Broker> {
        Broker::open_with(self.dir, self.config, false, None)
    }

    /// Opens the directory read-only, as [`Broker::open_read_only`] does, with these
    /// settings (the log and storage ones apply; nothing is created).
    pub fn open_read_only(self) -> Result<Broker> {
        Broker::open_with(self.dir, self.config, true, None)
    }

    #[cfg(feature = "server")]
    /// Opens a cluster node's data directory read-only, with `topics` (what the node's
    /// own metadata says, read by the cluster layer) in place of a registry: each
    /// partition the node hosts whose directory holds the topic's id. Nothing is
    /// written; the committed offsets are those of the node's `__consumer_offsets`.
    pub(crate) fn open_read_only_with_node_topics(self, topics: &[ClusterTopic]) -> Result<Broker> {
        Broker::open_with(self.dir, self.config, true, Some(topics))
    }
}

/// One topic in the registry file.
struct RegistryEntry {
    name: String,
    partitions: i32,
    internal: bool,
    config: TopicConfig,
}

fn encode_registry(entries: &[RegistryEntry]) -> Vec<u8> {
    let mut out = Vec::new();
    let put_str = |out: &mut Vec<u8>, s: &str| {
        out.extend_from_slice(&(s.len() as u32).to_be_bytes());
        out.extend_from_slice(s.as_bytes());
    };
    out.extend_from_slice(&(entries.len() as u32).to_be_bytes());
    for e in entries {
        put_str(&mut out, &e.name);
        out.extend_from_slice(&e.partitions.to_be_bytes());
        out.push(u8::from(e.internal));
        let overrides: Vec<(&str, &str)> = e.config.overrides().collect();
        out.extend_from_slice(&(overrides.len() as u32).to_be_bytes());
        for (k, v) in overrides {
            put_str(&mut out, k);
            put_str(&mut out, v);
        }
    }
    out
}

struct Cursor<'a> {
    path: &'a Path,
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.bytes.len())
            .ok_or_else(|| {
                Error::corrupt(
                    self.path.display(),
                    self.pos as u64,
                    "topic registry ends in the middle of an entry",
                )
            })?;
        let s = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    fn u32(&mut self) -> Result<u32> {
        let b = self.take(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn string(&mut self) -> Result<String> {
        let len = self.u32()? as usize;
        let at = self.pos;
        let s = self.take(len)?;
        String::from_utf8(s.to_vec()).map_err(|_| {
            Error::corrupt(
                self.path.display(),
                at as u64,
                "topic registry string is not UTF-8",
            )
        })
    }
}

/// Moves aside the partition directories of no registered topic (a creation that a
/// crash, or an older version's failure part way, left behind), and reports them.
fn move_orphans_aside(logs: &LogManager, entries: &[RegistryEntry]) -> Result<Vec<OrphanedLog>> {
    let registered: std::collections::HashSet<String> = entries
        .iter()
        .flat_map(|e| (0..e.partitions).map(|p| log_name(&e.name, p)))
        .collect();
    let mut orphans = Vec::new();
    for name in logs.names_on_disk()? {
        if !registered.contains(&name)
            && name != CLUSTER_METADATA_DIR
            && is_partition_dir_name(&name)
        {
            orphans.push(logs.move_aside(&name)?);
        }
    }
    Ok(orphans)
}

/// The topic ids of a single node's `topics`, from their partitions' `partition.metadata`.
/// A topic without one (created by an older version) is given a new id, written to each
/// of its partitions, unless the broker is read-only.
fn single_node_topic_ids(
    logs: &LogManager,
    topics: &BTreeMap<String, Topic>,
    read_only: bool,
) -> Result<HashMap<String, String>> {
    let mut ids = HashMap::with_capacity(topics.len());
    for (name, topic) in topics {
        // The partitions open here (one in a failed log directory is not).
        let hosted = topic.partitions();
        let found = hosted
            .iter()
            .find_map(|p| read_partition_metadata(&logs.log_path(&log_name(name, p.index()))));
        let id = match found {
            Some(id) => id,
            None if read_only => continue,
            None => {
                let id = crate::storage::codec::uuid_base64(&crate::storage::codec::random_uuid());
                for p in hosted.iter() {
                    write_partition_metadata(&logs.log_path(&log_name(name, p.index())), &id)?;
                }
                id
            }
        };
        ids.insert(name.clone(), id);
    }
    Ok(ids)
}

/// A cluster node's topics as `list` gives them (read-only): the logs of the partitions
/// it hosts whose directory holds the topic's id (a partition not yet created there, or
/// one of an older topic of that name, is left out), and the topic ids.
fn open_node_topics(
    logs: &LogManager,
    list: &[ClusterTopic],
    defaults: &LogConfig,
) -> Result<(BTreeMap<String, Topic>, HashMap<String, String>)> {
    let mut topics = BTreeMap::new();
    let mut ids = HashMap::new();
    for t in list {
        let log_config = t.config.apply(defaults)?;
        let name: Arc<str> = Arc::from(t.name.as_str());
        let mut parts = Vec::with_capacity(t.hosted.len());
        for &p in &t.hosted {
            let ln = log_name(&t.name, p);
            if read_partition_metadata(&logs.log_path(&ln)).as_deref() == Some(t.id.as_str()) {
                parts.push(Partition::new(
                    Arc::clone(&name),
                    p,
                    logs.open_log(&ln, log_config.clone())?,
                ));
            }
        }
        let topic = Topic::new(&t.name, parts.clone(), t.config.clone(), t.internal);
        topic.set_hosted_partitions(parts, t.partition_count);
        topics.insert(t.name.clone(), topic);
        ids.insert(t.name.clone(), t.id.clone());
    }
    Ok((topics, ids))
}

/// The partitions of `topic` offline on a node whose log directories are in `states`
/// (each with why it failed, None: usable), each index with why: kept offline at open
/// (their log directory was unusable) or held in a log directory that failed since.
pub(crate) fn offline_partitions_of(
    topic: &Topic,
    states: &[(PathBuf, Option<String>)],
) -> BTreeMap<i32, String> {
    let mut offline = topic.offline_partitions();
    let failed: Vec<(&PathBuf, &String)> = states
        .iter()
        .filter_map(|(dir, why)| why.as_ref().map(|why| (dir, why)))
        .collect();
    if failed.is_empty() {
        return offline;
    }
    for p in topic.partitions().iter() {
        let dir = p.log().dir().parent();
        if let Some((_, why)) = failed.iter().find(|(f, _)| dir == Some(f.as_path())) {
            offline.insert(p.index(), (*why).clone());
        }
    }
    offline
}

/// Why the log `ln` of a registered partition that no usable log directory holds is
/// offline, if a log directory failed (None: none did, the log is made afresh): it may
/// be in the failed one, and an empty log in its place would hide its records.
fn offline_reason(logs: &LogManager, ln: &str) -> Option<String> {
    let failed: Vec<String> = logs
        .log_dir_states()
        .into_iter()
        .filter_map(|(d, why)| why.map(|why| format!("{} ({why})", d.display())))
        .collect();
    (!failed.is_empty()).then(|| {
        format!(
            "partition {ln} is in no usable log directory and may be in a failed one: {}",
            failed.join(", ")
        )
    })
}

/// Opens the log `ln` with `open`, unless it is offline: found in no usable log
/// directory while one failed (its records may be in the failed one, and an empty log
/// made in its place would hide them — or, on a cluster node, be elected or caught up
/// as if new), unless it is `fresh` (a replica just assigned to this node, which has no
/// records anywhere yet); or in a log directory that fails as it opens. An offline log
/// gives `Ok(Err(why))`; another error is returned.
fn open_unless_offline(
    logs: &LogManager,
    ln: &str,
    fresh: bool,
    open: impl FnOnce() -> Result<crate::storage::PartitionLog>,
) -> Result<std::result::Result<crate::storage::PartitionLog, String>> {
    if !fresh
        && logs.log_dir_of(ln).is_none()
        && let Some(why) = offline_reason(logs, ln)
    {
        crate::storage::partition_offline(ln, &why);
        return Ok(Err(why));
    }
    match open() {
        Ok(log) => Ok(Ok(log)),
        // Its log directory failed under it: offline, as Kafka.
        Err(err @ Error::Io { .. })
            if logs.log_dir_of(ln).is_some_and(|d| {
                logs.log_dir_states()
                    .iter()
                    .any(|(f, why)| *f == d && why.is_some())
            }) =>
        {
            let why = err.to_string();
            crate::storage::partition_offline(ln, &why);
            Ok(Err(why))
        }
        Err(err) => Err(err),
    }
}

/// Opens the partition logs of the registry's topics, each with its topic's
/// configuration over the broker's defaults. A partition in a log directory that
/// failed (or found in none while one failed) is offline: the others serve.
fn open_registered_topics(
    logs: &LogManager,
    entries: Vec<RegistryEntry>,
    defaults: &LogConfig,
) -> Result<BTreeMap<String, Topic>> {
    let mut topics = BTreeMap::new();
    for e in entries {
        let log_config = e.config.apply(defaults)?;
        let mut parts = Vec::with_capacity(e.partitions.max(0) as usize);
        let mut offline = BTreeMap::new();
        let name: Arc<str> = Arc::from(e.name.as_str());
        for p in 0..e.partitions {
            let ln = log_name(&e.name, p);
            match open_unless_offline(logs, &ln, false, || logs.open_log(&ln, log_config.clone()))?
            {
                Ok(log) => parts.push(Partition::new(Arc::clone(&name), p, log)),
                Err(why) => {
                    offline.insert(p, why);
                }
            }
        }
        let topic = Topic::new(&e.name, parts, e.config, e.internal);
        topic.set_hosted_partitions(topic.partitions().to_vec(), e.partitions);
        topic.set_offline_partitions(offline);
        topics.insert(e.name.clone(), topic);
    }
    Ok(topics)
}

fn decode_registry(path: &Path, bytes: &[u8]) -> Result<Vec<RegistryEntry>> {
    let mut c = Cursor {
        path,
        bytes,
        pos: 0,
    };
    let count = c.u32()?;
    let mut entries = Vec::new();
    for _ in 0..count {
        let name = c.string()?;
        let partitions = c.u32()? as i32;
        let internal = c.take(1)?[0] != 0;
        let n = c.u32()?;
        let mut config = TopicConfig::new();
        for _ in 0..n {
            let k = c.string()?;
            let v = c.string()?;
            config = config.set(&k, v);
        }
        entries.push(RegistryEntry {
            name,
            partitions,
            internal,
            config,
        });
    }
    if c.pos != bytes.len() {
        return Err(Error::corrupt(
            path.display(),
            c.pos as u64,
            "unexpected bytes after the last topic",
        ));
    }
    Ok(entries)
}

fn log_name(topic: &str, partition: i32) -> String {
    format!("{topic}-{partition}")
}

/// True for a name of the form of a partition directory, `<topic>-<partition>`.
fn is_partition_dir_name(name: &str) -> bool {
    name.rsplit_once('-').is_some_and(|(topic, p)| {
        !topic.is_empty() && !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit())
    })
}

impl Broker {
    /// Opens (or creates) the data directory `dir` with default settings.
    pub fn open(dir: impl AsRef<Path>) -> Result<Broker> {
        Broker::builder(dir).open()
    }

    /// Opens the data directory `dir` read-only, with default settings: while another
    /// process holds it (an application, `tidelog serve`) or where this one cannot
    /// write (a read-only copy or mount). Nothing is written, locked or repaired, and
    /// nothing is created: the topics are those registered when it opens, their
    /// partitions follow the writer's appends, rolls and retention as they happen
    /// (every new batch checked whole, CRC included, before it is handed out), and the
    /// group coordinator holds the committed offsets (and the last stored generation of
    /// each group) as they were on open. Creating, deleting, appending and committing
    /// are refused with [`Error::ReadOnly`]. The directory must exist.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// use tidelog::{Broker, TopicConfig};
    /// let writer = Broker::open(dir.path())?;
    /// writer.create_topic("events", 1, TopicConfig::new())?;
    /// let p = writer.topic("events")?.partition(0)?;
    /// let reader = Broker::open_read_only(dir.path())?;
    /// let mut b = tidelog::BatchBuilder::new();
    /// b.push(0, None, Some(b"hello"), &[]);
    /// p.append_batch(&b.finish())?;
    /// let followed = reader.topic("events")?.partition(0)?;
    /// assert!(followed.wait_for(0, std::time::Duration::from_secs(5)));
    /// assert_eq!(followed.read(0, 1 << 20)?.next_offset(), 1);
    /// assert!(reader.create_topic("other", 1, TopicConfig::new()).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn open_read_only(dir: impl AsRef<Path>) -> Result<Broker> {
        Broker::builder(dir).open_read_only()
    }

    /// True if the broker was opened read-only ([`Broker::open_read_only`]).
    pub fn is_read_only(&self) -> bool {
        self.inner.read_only
    }

    /// A builder to configure the broker before opening `dir`.
    pub fn builder(dir: impl AsRef<Path>) -> BrokerBuilder {
        BrokerBuilder {
            dir: dir.as_ref().to_path_buf(),
            config: BrokerConfig::default(),
        }
    }

    fn open_with(
        dir: PathBuf,
        config: BrokerConfig,
        read_only: bool,
        node_topics: Option<&[ClusterTopic]>,
    ) -> Result<Broker> {
        config.log.validate()?;
        if config.default_partitions < 1 {
            return Err(Error::InvalidConfig {
                key: "num.partitions".into(),
                reason: format!("{} is less than 1", config.default_partitions),
            });
        }
        let logs = if read_only {
            LogManager::open_read_only_with_dirs(
                &dir,
                &config.extra_log_dirs,
                config.storage_limits,
            )?
        } else {
            std::fs::create_dir_all(&dir).map_err(|e| Error::io("create directory", &dir, e))?;
            LogManager::open_with_dirs(&dir, &config.extra_log_dirs, config.storage_limits)?
        };
        let managed = is_cluster_dir(&dir);
        if managed && read_only && node_topics.is_none() {
            return Err(Error::InvalidConfig {
                key: "node.id".into(),
                reason: format!(
                    "{} is a cluster node's data directory: its topics come from the cluster's metadata, which Broker::open_read_only does not read (BrokerBuilder::open_cluster_node_read_only does; the CLI uses it)",
                    dir.display()
                ),
            });
        }
        let registry_path = dir.join(REGISTRY_FILE);
        let entries = match read_checkpoint(&registry_path)? {
            // A cluster node's topics come from the cluster's metadata.
            Some(_) if managed => Vec::new(),
            Some(bytes) => decode_registry(&registry_path, &bytes)?,
            None => Vec::new(),
        };
        let orphans = if !managed && !read_only {
            move_orphans_aside(&logs, &entries)?
        } else {
            Vec::new()
        };
        let (topics, topic_ids) = match node_topics {
            Some(list) => open_node_topics(&logs, list, &config.log)?,
            None => {
                let topics = open_registered_topics(&logs, entries, &config.log)?;
                let ids = single_node_topic_ids(&logs, &topics, read_only)?;
                (topics, ids)
            }
        };
        let coordinator = GroupCoordinator::new(config.coordinator.clone());
        let share = crate::coordinator::ShareCoordinator::new(config.share.clone());
        let transactions =
            crate::transaction::TransactionCoordinator::new(config.transaction.clone());
        let broker = Broker {
            inner: Arc::new(BrokerInner {
                dir,
                config,
                dir_health: logs.dir_health(),
                logs: Mutex::new(Some(logs)),
                topics: RwLock::new(topics),
                admin: Mutex::new(()),
                transactions,
                txn_setup: Mutex::new(()),
                share,
                share_setup: Mutex::new(()),
                in_process_ids: Mutex::new(None),
                coordinator,
                closed: AtomicBool::new(false),
                managed: AtomicBool::new(managed),
                authority: RwLock::new(None),
                remote_transactions: RwLock::new(None),
                topic_ids: RwLock::new(topic_ids),
                orphans: Mutex::new(orphans),
                movers: Mutex::new(Vec::new()),
                read_only,
                stats: Default::default(),
                forwarders: Default::default(),
            }),
        };
        if read_only {
            broker.load_offsets_read_only()?;
        } else {
            broker.start_services(managed)?;
        }
        Ok(broker)
    }

    /// A read-only broker's committed offsets as they stand (the group coordinator
    /// lives in the writing process): loaded, never written.
    fn load_offsets_read_only(&self) -> Result<()> {
        match self.registered_topic(OFFSETS_TOPIC) {
            Ok(t) => self.use_offsets_topic(&t)?,
            Err(_) => self.inner.coordinator.load(
                Vec::new(),
                Arc::new(ReadOnlyJournal(self.inner.dir.clone())),
            ),
        }
        Ok(())
    }

    /// Starts a writing broker just opened: its group coordinator (on the committed
    /// offsets, unless a cluster node's, which the cluster loads) and the log
    /// manager's maintenance.
    fn start_services(&self, managed: bool) -> Result<()> {
        if !managed {
            // Committed offsets: create the internal topic on first open, replay it after.
            let offsets_topic = match self.topic(OFFSETS_TOPIC) {
                Ok(t) => t,
                Err(_) => self.create_topic_inner(
                    OFFSETS_TOPIC,
                    self.inner.config.coordinator.offsets_topic_num_partitions,
                    TopicConfig::new().cleanup_policy(CleanupPolicy::Compact),
                    true,
                )?,
            };
            self.use_offsets_topic(&offsets_topic)?;
            // Transactions prepared before a restart are completed now, not at the
            // next transactional request.
            if self.registered_topic(TRANSACTION_STATE_TOPIC).is_ok() {
                self.ensure_transaction_state()?;
            }
            if self
                .registered_topic(crate::coordinator::SHARE_GROUP_STATE_TOPIC)
                .is_ok()
            {
                self.ensure_share_state()?;
            }
        }
        // OffsetCommit answers UNKNOWN_TOPIC_OR_PARTITION for partitions that do not
        // exist (a weak handle: the coordinator lives inside the broker).
        let weak = Arc::downgrade(&self.inner);
        self.inner
            .coordinator
            .set_partition_check(Arc::new(move |topic: &str, partition: i32| {
                weak.upgrade().is_some_and(|inner| {
                    inner
                        .topics
                        .read()
                        .get(topic)
                        .is_some_and(|t| partition >= 0 && partition < t.partition_count())
                })
            }));
        self.inner.coordinator.start_reaper()?;
        if let Some(logs) = self.inner.logs.lock().as_ref() {
            logs.start_background(
                self.inner.config.flush_check_interval,
                self.inner.config.retention_check_interval,
            );
        }
        Ok(())
    }

    /// The data directory.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// The log directories, the data directory first (see [`BrokerBuilder::log_dirs`]).
    pub fn log_dirs(&self) -> Vec<PathBuf> {
        match self.inner.logs.lock().as_ref() {
            Some(logs) => logs.log_dirs(),
            None => vec![self.inner.dir.clone()],
        }
    }

    /// Each log directory with why it failed (None: usable), the data directory first.
    /// Never waits for logs to open or close.
    pub fn log_dir_states(&self) -> Vec<(PathBuf, Option<String>)> {
        match self.is_closed() {
            false => crate::storage::dirs::states(&self.inner.dir_health),
            true => vec![(self.inner.dir.clone(), None)],
        }
    }

    /// Moves partition `partition` of `topic` into the log directory `dir` (Kafka's
    /// AlterReplicaLogDirs; see [`LogManager::move_log`]): its files are copied while it
    /// serves, then it is briefly offline (appends and reads through a handle taken
    /// before get [`Error::Closed`], Kafka's NOT_LEADER_OR_FOLLOWER on the wire, which
    /// clients retry) while the tail is copied and the directories swapped; handles
    /// taken after serve from the new directory. Every step is crash-safe: after a
    /// crash the partition is whole in one directory or the other. A partition already
    /// in `dir` is left alone. The topics of the coordinators (`__consumer_offsets`,
    /// ...) are not moved ([`Error::InvalidConfig`]). A cluster node's replica keeps its
    /// role (leader or follower) and high watermark across the move.
    ///
    /// ```
    /// # let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    /// use tidelog::{Broker, TopicConfig};
    /// let broker = Broker::builder(a.path()).log_dirs([b.path()]).open()?;
    /// broker.create_topic("events", 1, TopicConfig::new())?;
    /// broker.move_partition_to_log_dir("events", 0, b.path())?;
    /// assert!(b.path().join("events-0").is_dir());
    /// # Ok::<(), tidelog::Error>(())
    /// ```
    pub fn move_partition_to_log_dir(&self, topic: &str, partition: i32, dir: &Path) -> Result<()> {
        let _admin = self.inner.admin.lock();
        let (t, logs) = self.movable(topic, partition, dir)?;
        let ln = log_name(topic, partition);
        let old = t.partition(partition)?;
        let config = old.log().config();
        let (log, result) = match logs.move_log(&ln, dir, config.clone()) {
            Ok(log) => (log, Ok(())),
            // The log may be closed part way: serve it again from where it is.
            Err(e) => match logs.open_log(&ln, config) {
                Ok(log) if old.log().is_closed() => (log, Err(e)),
                _ => return Err(e),
            },
        };
        self.swap_log(&t, &old, log);
        result
    }

    /// Starts moving partition `partition` of `topic` into the log directory `dir` and
    /// returns at once (Kafka's AlterReplicaLogDirs): a thread copies its files into a
    /// future replica while it serves (paced by
    /// [`Broker::set_log_dir_move_rate`]; [`Broker::future_logs`] shows its progress),
    /// then swaps it in as [`Broker::move_partition_to_log_dir`] does. A partition
    /// already in `dir` is left alone (a move of it elsewhere is cancelled); a move
    /// into `dir` in progress goes on; one into another directory is replaced. The same
    /// refusals as [`Broker::move_partition_to_log_dir`]; a move that fails later is
    /// logged and abandoned (the partition stays where it was).
    pub fn start_partition_move(&self, topic: &str, partition: i32, dir: &Path) -> Result<()> {
        let _admin = self.inner.admin.lock();
        let (_, logs) = self.movable(topic, partition, dir)?;
        let ln = log_name(topic, partition);
        let Some(m) = logs.begin_move(&ln, dir)? else {
            return Ok(());
        };
        let weak = Arc::downgrade(&self.inner);
        let (topic, thread_logs) = (topic.to_string(), logs.clone());
        let moving = Arc::clone(&m);
        let spawned = std::thread::Builder::new()
            .name(format!("tidelog-move-{ln}"))
            .spawn(move || {
                let m = moving;
                let result =
                    m.copy_online(thread_logs.move_rate())
                        .and_then(|()| match weak.upgrade() {
                            Some(inner) => {
                                Broker { inner }.finish_partition_move(&topic, partition, &m)
                            }
                            None => Err(Error::Closed("broker".into())),
                        });
                if let Err(e) = result {
                    thread_logs.abandon_move(&m);
                    crate::storage::move_abandoned(&m.name, &e.to_string());
                }
            });
        match spawned {
            Ok(handle) => {
                let mut movers = self.inner.movers.lock();
                movers.retain(|h| !h.is_finished());
                movers.push(handle);
                Ok(())
            }
            Err(e) => {
                logs.abandon_move(&m);
                Err(Error::io(
                    "start the log directory move of",
                    logs.log_path(&ln),
                    e,
                ))
            }
        }
    }

    /// The swap at the end of a background move (see [`Broker::start_partition_move`]).
    fn finish_partition_move(
        &self,
        topic: &str,
        partition: i32,
        m: &Arc<crate::storage::moves::LogMove>,
    ) -> Result<()> {
        let _admin = self.inner.admin.lock();
        self.check_open()?;
        let t = self.registered_topic(topic)?;
        let old = t.partition(partition)?;
        let logs = self.log_manager()?;
        let ln = log_name(topic, partition);
        let config = old.log().config();
        let log = match logs.finish_move(m, config.clone()) {
            Ok(log) => log,
            Err(e) if old.log().is_closed() => {
                // Closed part way: serve it again from where it is.
                let log = logs.open_log(&ln, config)?;
                self.swap_log(&t, &old, log);
                return Err(e);
            }
            Err(e) => return Err(e),
        };
        self.swap_log(&t, &old, log);
        Ok(())
    }

    /// Checks that partition `partition` of `topic` may move into `dir`: the topic and
    /// the log manager.
    fn movable(&self, topic: &str, partition: i32, dir: &Path) -> Result<(Topic, LogManager)> {
        self.check_open()?;
        if self.inner.read_only {
            return Err(Error::ReadOnly(self.inner.dir.clone()));
        }
        let refuse = |why: String| Error::InvalidConfig {
            key: "log.dirs".into(),
            reason: format!("partition {topic}-{partition} is not moved: {why}"),
        };
        let t = self.registered_topic(topic)?;
        if t.is_internal() {
            return Err(refuse(format!(
                "{topic} is an internal topic, whose partitions the coordinators hold"
            )));
        }
        t.partition(partition)?;
        let logs = self.log_manager()?;
        if !logs.is_log_dir(dir) {
            return Err(refuse(format!(
                "{} is not one of the log directories",
                dir.display()
            )));
        }
        Ok((t, logs))
    }

    /// Tests: every partition log opened from now on takes `each` longer, as on a slow
    /// disk (see [`LogManager::slow_opens`]).
    #[cfg(all(test, feature = "server"))]
    pub(crate) fn slow_log_opens(&self, each: std::time::Duration) {
        if let Ok(logs) = self.log_manager() {
            logs.slow_opens(each);
        }
    }

    /// The log manager, while the broker is open.
    fn log_manager(&self) -> Result<LogManager> {
        self.inner
            .logs
            .lock()
            .clone()
            .ok_or_else(|| Error::Closed("broker".into()))
    }

    /// Serves `old`'s partition of `t` from `log` if it replaced `old`'s. On a cluster
    /// node the new handle starts at `old`'s high watermark and takes its replica role
    /// (see [`TopicAuthority::replica_moved`]).
    fn swap_log(&self, t: &Topic, old: &Partition, log: crate::storage::PartitionLog) {
        if log.dir() == old.log().dir() && !old.log().is_closed() {
            return;
        }
        let (name, index) = (Arc::from(t.name()), old.index());
        let cluster = self.inner.authority.read().clone();
        let new = match &cluster {
            Some(_) => Partition::new_unassigned(name, index, log, old.high_watermark()),
            None => Partition::new(name, index, log),
        };
        let mut parts: Vec<Partition> = t.partitions().to_vec();
        if let Some(slot) = parts.iter_mut().find(|p| p.index() == index) {
            *slot = new.clone();
        }
        t.set_hosted_partitions(parts, t.partition_count());
        if let Some(cluster) = cluster {
            cluster.replica_moved(t.name(), index, old, &new);
        }
    }

    /// Kafka's `replica.alter.log.dirs.io.max.bytes.per.second`: the bytes per second
    /// moves between log directories copy at most (None: unlimited, the default);
    /// applies at once to the moves in progress.
    pub fn set_log_dir_move_rate(&self, bytes_per_second: Option<u64>) {
        if let Some(logs) = self.inner.logs.lock().as_ref() {
            logs.set_log_dir_move_rate(bytes_per_second);
        }
    }

    /// The pace [`Broker::set_log_dir_move_rate`] set (None: unlimited).
    #[cfg(feature = "server")]
    pub(crate) fn log_dir_move_rate(&self) -> Option<u64> {
        let logs = self.inner.logs.lock();
        let rate = logs.as_ref()?.move_rate().load(Ordering::Relaxed);
        (rate > 0).then_some(rate)
    }

    /// The partitions moving between log directories now (Kafka's future replicas; see
    /// [`LogManager::future_logs`]).
    pub fn future_logs(&self) -> Vec<crate::storage::FutureLog> {
        match self.inner.logs.lock().as_ref() {
            Some(logs) => logs.future_logs(),
            None => Vec::new(),
        }
    }

    /// The partitions of `topic` that are offline here, each index with why (see
    /// [`offline_partitions_of`]). Empty for a topic that does not exist.
    #[cfg(feature = "server")]
    pub(crate) fn offline_partitions(&self, topic: &str) -> BTreeMap<i32, String> {
        match self.registered_topic(topic) {
            Ok(topic) => offline_partitions_of(&topic, &self.log_dir_states()),
            Err(_) => BTreeMap::new(),
        }
    }

    /// Takes the log directory `dir` offline, as an I/O error in it does (see
    /// [`LogManager::fail_log_dir`]): its partitions answer a storage error.
    pub fn fail_log_dir(&self, dir: &Path, reason: &str) -> Result<()> {
        self.check_open()?;
        match self.inner.logs.lock().as_ref() {
            Some(logs) => logs.fail_log_dir(dir, reason),
            None => Err(Error::Closed("broker".into())),
        }
    }

    /// Partition directories that belonged to no topic and were moved aside (to
    /// `<data dir>/orphaned/`) since the broker opened: left by a topic creation that a
    /// crash or an older version's failure cut short. Nothing is deleted.
    pub fn orphaned_logs(&self) -> Vec<OrphanedLog> {
        self.inner.orphans.lock().clone()
    }

    /// Partitions of every topic the broker holds now.
    pub fn partition_count(&self) -> usize {
        self.inner
            .topics
            .read()
            .values()
            .map(|t| t.partition_count().max(0) as usize)
            .sum()
    }

    /// Refuses, before anything is created, `adding` partitions for `topic` that would
    /// make the broker hold more than its `max_partitions`.
    pub(crate) fn check_partition_limit(&self, topic: &str, adding: i32) -> Result<()> {
        let held = self.partition_count();
        let max = self.inner.config.max_partitions;
        let total = held.saturating_add(adding.max(0) as usize);
        if total > max {
            return Err(Error::InvalidPartitions {
                topic: topic.to_string(),
                reason: format!(
                    "{adding} more partitions would make {total} in this broker, above its limit of {max} (max_partitions; tidelog serve --max-partitions); nothing was created"
                ),
            });
        }
        Ok(())
    }

    /// Opens the logs of partitions `range` of topic `name`, all or none: a failure part
    /// way removes every directory and file made so far, and a directory already there
    /// (of no registered topic) is moved aside first, never reused or deleted.
    fn create_partition_logs(
        &self,
        logs: &LogManager,
        (name, topic_id): (&str, &str),
        range: std::ops::Range<i32>,
        config: &LogConfig,
    ) -> Result<Vec<Partition>> {
        let arc_name: Arc<str> = Arc::from(name);
        let mut parts = Vec::with_capacity(range.len());
        for p in range.clone() {
            let ln = log_name(name, p);
            let made = (|| {
                if logs.log_path(&ln).is_dir() {
                    let orphan = logs.move_aside(&ln)?;
                    self.inner.orphans.lock().push(orphan);
                }
                let log = logs.open_log(&ln, config.clone())?;
                write_partition_metadata(&logs.log_path(&ln), topic_id)?;
                Ok(log)
            })();
            match made {
                Ok(log) => parts.push(Partition::new(Arc::clone(&arc_name), p, log)),
                Err(e) => {
                    // What this call made, and only that: the directory of the partition
                    // that failed if it made one (a file of that name is not ours).
                    for q in range.start..=p {
                        let ln = log_name(name, q);
                        if q < p || logs.log_path(&ln).is_dir() {
                            let _ = logs.delete_log(&ln);
                        }
                    }
                    return Err(e);
                }
            }
        }
        Ok(parts)
    }

    /// Removes the logs of partitions `range` of `name` (a creation that failed after
    /// they were made).
    fn remove_partition_logs(&self, name: &str, range: std::ops::Range<i32>) {
        if let Some(logs) = self.inner.logs.lock().as_ref() {
            for p in range {
                let _ = logs.delete_log(&log_name(name, p));
            }
        }
    }

    /// The broker's settings.
    pub fn config(&self) -> &BrokerConfig {
        &self.inner.config
    }

    /// True once the broker is closed.
    #[inline]
    pub fn is_closed(&self) -> bool {
        self.inner.closed.load(Ordering::Acquire)
    }

    fn check_open(&self) -> Result<()> {
        if self.is_closed() {
            Err(Error::Closed(format!(
                "broker at {}",
                self.inner.dir.display()
            )))
        } else {
            Ok(())
        }
    }

    /// Open, and not read-only: a change may be made.
    fn check_writable(&self) -> Result<()> {
        self.check_open()?;
        if self.inner.read_only {
            return Err(Error::ReadOnly(self.inner.dir.clone()));
        }
        Ok(())
    }

    /// A snapshot of the broker's metrics: per partition records and bytes in and out,
    /// offsets, size and segments; per consumer group its generation, members, committed
    /// offsets and lag; the network server's connections, requests and errors (when one
    /// serves this broker); fsyncs, prefault work and recovery totals. See
    /// [`metrics`](crate::metrics) for where each is recorded.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let broker = tidelog::Broker::open(dir.path())?;
    /// broker.create_topic("events", 1, tidelog::TopicConfig::new())?;
    /// let p = broker.topic("events")?.partition(0)?;
    /// let mut b = tidelog::BatchBuilder::new();
    /// b.push(0, None, Some(b"hello"), &[]);
    /// p.append_batch(&b.finish())?;
    /// let m = broker.metrics();
    /// let events = m.partitions.iter().find(|p| p.topic == "events").unwrap();
    /// assert_eq!((events.records_in, events.log_end_offset), (1, 1));
    /// # Ok::<(), tidelog::Error>(())
    /// ```
    pub fn metrics(&self) -> crate::metrics::Metrics {
        let logs = self.inner.logs.lock().clone();
        metrics::collect(self, &self.inner.stats, &self.inner.forwarders, logs)
    }

    /// Shows a running forwarder in [`metrics`](Self::metrics) while `probe` lives and
    /// answers (the broker holds it weakly).
    #[cfg(feature = "client")]
    pub(crate) fn register_forwarder(&self, probe: std::sync::Weak<dyn ForwarderProbe>) {
        self.inner.forwarders.register(probe);
    }

    /// Where the servers of this broker register their counters.
    #[cfg(feature = "server")]
    pub(crate) fn stats(&self) -> &crate::metrics::BrokerStats {
        &self.inner.stats
    }

    /// The group coordinator (shared by in-process groups and the network server).
    pub fn group_coordinator(&self) -> &GroupCoordinator {
        &self.inner.coordinator
    }

    /// Loads the groups of every partition of `topic` (`__consumer_offsets`, whose
    /// partition count places the groups) and journals their new records to them.
    fn use_offsets_topic(&self, topic: &Topic) -> Result<()> {
        let coordinator = &self.inner.coordinator;
        coordinator.unload();
        coordinator.set_partition_count(topic.partition_count());
        for partition in topic.partitions().iter() {
            coordinator.load_partition(partition.clone())?;
        }
        Ok(())
    }

    #[cfg(feature = "server")]
    /// A handle that does not keep the broker open.
    pub(crate) fn downgrade(&self) -> WeakBroker {
        WeakBroker {
            inner: Arc::downgrade(&self.inner),
        }
    }

    /// True on a cluster node (the topics come from the cluster's metadata).
    pub(crate) fn is_cluster_node(&self) -> bool {
        self.inner.managed.load(Ordering::Acquire)
    }

    /// The attached cluster node, or the error a cluster node's broker gives before one is
    /// attached; None on a single node.
    fn authority(&self) -> Result<Option<Arc<dyn TopicAuthority>>> {
        if !self.is_cluster_node() {
            return Ok(None);
        }
        match self.inner.authority.read().clone() {
            Some(a) => Ok(Some(a)),
            None => Err(Error::InvalidConfig {
                key: "node.id".into(),
                reason: format!(
                    "{} is a cluster node's data directory: its topics come from the cluster; start it as that node (tidelog serve --node-id N --quorum ..., or Server::builder(broker).node_id(N).quorum(..))",
                    self.inner.dir.display()
                ),
            }),
        }
    }

    #[cfg(feature = "server")]
    /// Makes this broker a cluster node whose topics `authority` decides. A broker opened
    /// on a fresh directory holds only an empty `__consumer_offsets`: it is removed (the
    /// cluster creates its own). A directory with a single node's topics or committed
    /// offsets is refused.
    pub(crate) fn attach_cluster(&self, authority: Arc<dyn TopicAuthority>) -> Result<()> {
        self.check_writable()?;
        let _admin = self.inner.admin.lock();
        if !self.is_cluster_node() {
            let topics = self.inner.topics.read().clone();
            let offsets_used = topics
                .get(OFFSETS_TOPIC)
                .is_some_and(|t| t.partitions().iter().any(|p| p.log_end_offset() > 0));
            let user: Vec<&String> = topics.keys().filter(|n| *n != OFFSETS_TOPIC).collect();
            if !user.is_empty() || offsets_used {
                return Err(Error::InvalidConfig {
                    key: "node.id".into(),
                    reason: format!(
                        "{} holds a single node's topics ({}); a cluster node starts on an empty data directory or on one it created",
                        self.inner.dir.display(),
                        if user.is_empty() {
                            format!("{OFFSETS_TOPIC} with committed offsets")
                        } else {
                            user.iter()
                                .map(|s| s.as_str())
                                .collect::<Vec<_>>()
                                .join(", ")
                        }
                    ),
                });
            }
            self.inner.managed.store(true, Ordering::Release);
            self.inner.topics.write().clear();
            if let Some(logs) = self.inner.logs.lock().as_ref() {
                for t in topics.values() {
                    t.inner.deleted.store(true, Ordering::Release);
                    for p in t.partitions().iter() {
                        logs.delete_log(&log_name(t.name(), p.index()))?;
                    }
                }
            }
        }
        // A single node's registry has no meaning on a cluster node.
        let registry = self.inner.dir.join(REGISTRY_FILE);
        if registry.exists() {
            std::fs::remove_file(&registry).map_err(|e| Error::io("remove", &registry, e))?;
            crate::storage::sync_dir(&self.inner.dir)?;
        }
        *self.inner.authority.write() = Some(authority);
        Ok(())
    }

    #[cfg(feature = "server")]
    /// Detaches the cluster node (it is stopping); admin operations fail from now on.
    pub(crate) fn detach_cluster(&self) {
        self.inner.authority.write().take();
        self.inner.remote_transactions.write().take();
    }

    #[cfg(feature = "server")]
    /// Opens the log of partition `p` of a cluster topic: an existing directory is kept
    /// only if its `partition.metadata` names the same topic id (a directory of a
    /// deleted topic of the same name is cleared).
    fn open_cluster_log(
        &self,
        logs: &LogManager,
        topic: &ClusterTopic,
        p: i32,
        config: &LogConfig,
    ) -> Result<crate::storage::PartitionLog> {
        let name = log_name(&topic.name, p);
        let path = logs.log_path(&name);
        if path.exists() && read_partition_metadata(&path).as_deref() != Some(topic.id.as_str()) {
            logs.delete_log(&name)?;
        }
        let path = logs.log_path(&name);
        let log = logs.open_log(&name, config.clone())?;
        if read_partition_metadata(&path).is_none() {
            write_partition_metadata(&path, &topic.id)?;
        }
        Ok(log)
    }

    #[cfg(feature = "server")]
    /// Cluster node: makes the registry hold `topic` as the cluster's metadata says, with
    /// logs for the partitions this node hosts (created, or reopened if they are of the
    /// same topic id). A hosted partition found in no usable log directory while one
    /// failed is offline, not made afresh (its records may be in the failed directory),
    /// unless it is in `fresh`: assigned to this node by a record after the end of its
    /// metadata log at its start (no earlier process of the node saw it). Idempotent.
    pub(crate) fn apply_cluster_topic(&self, topic: &ClusterTopic, fresh: &[i32]) -> Result<()> {
        self.check_open()?;
        let _admin = self.inner.admin.lock();
        let known_id = self.inner.topic_ids.read().get(&topic.name).cloned();
        if known_id.is_some_and(|id| id != topic.id) {
            self.remove_topic_locked(&topic.name)?;
        }
        let log_config = topic.config.apply(&self.inner.config.log)?;
        let existing = self.inner.topics.read().get(&topic.name).cloned();
        let mut parts = Vec::with_capacity(topic.hosted.len());
        let mut offline = BTreeMap::new();
        {
            let logs = self.inner.logs.lock();
            let logs = logs
                .as_ref()
                .ok_or_else(|| Error::Closed("broker".into()))?;
            let arc_name: Arc<str> = Arc::from(topic.name.as_str());
            for &p in &topic.hosted {
                if let Some(part) = existing.as_ref().and_then(|t| t.partition(p).ok()) {
                    parts.push(part);
                    continue;
                }
                let ln = log_name(&topic.name, p);
                let opened = open_unless_offline(logs, &ln, fresh.contains(&p), || {
                    self.open_cluster_log(logs, topic, p, &log_config)
                })?;
                match opened {
                    Ok(log) => {
                        // No role until the replica manager gives one: it refuses
                        // appends, and readers see up to its recorded high watermark.
                        let hw = logs
                            .recorded_high_watermark(&ln)
                            .unwrap_or_else(|| log.log_start_offset());
                        parts.push(Partition::new_unassigned(Arc::clone(&arc_name), p, log, hw));
                    }
                    Err(why) => {
                        offline.insert(p, why);
                    }
                }
            }
            // Partitions no longer hosted here (reassigned away) are deleted.
            if let Some(t) = &existing {
                for old in t.partitions().iter() {
                    if !topic.hosted.contains(&old.index()) {
                        old.wake_all();
                        logs.delete_log(&log_name(&topic.name, old.index()))?;
                    }
                }
            }
        }
        match existing {
            Some(t) => {
                if t.config() != topic.config {
                    *t.inner.config.write() = topic.config.clone();
                    for p in &parts {
                        p.log().set_config(log_config.clone())?;
                    }
                }
                t.set_hosted_partitions(parts, topic.partition_count);
                t.set_offline_partitions(offline);
            }
            None => {
                let t = Topic::new(&topic.name, parts, topic.config.clone(), topic.internal);
                t.set_hosted_partitions(t.partitions().as_ref().clone(), topic.partition_count);
                t.set_offline_partitions(offline);
                self.inner.topics.write().insert(topic.name.clone(), t);
            }
        }
        self.inner
            .topic_ids
            .write()
            .insert(topic.name.clone(), topic.id.clone());
        // The group coordinator is loaded by the replica manager when this node becomes
        // the leader of the offsets partition, not here: commits go to the leader.
        Ok(())
    }

    #[cfg(feature = "server")]
    /// Cluster node: partition `p` of `topic`, if this node hosts it.
    pub(crate) fn hosted_partition(&self, topic: &str, p: i32) -> Option<Partition> {
        self.registered_topic(topic).ok()?.partition(p).ok()
    }

    #[cfg(feature = "server")]
    /// Cluster node: the high watermark `replication-offset-checkpoint` recorded for
    /// partition `p` of `topic` (where a restarted replica starts).
    pub(crate) fn recorded_high_watermark(&self, topic: &str, p: i32) -> Option<i64> {
        self.inner
            .logs
            .lock()
            .as_ref()?
            .recorded_high_watermark(&log_name(topic, p))
    }

    #[cfg(feature = "server")]
    /// Cluster node: removes a topic the cluster deleted, with its local logs.
    pub(crate) fn remove_cluster_topic(&self, name: &str) -> Result<()> {
        self.check_open()?;
        let _admin = self.inner.admin.lock();
        self.remove_topic_locked(name)
    }

    #[cfg(feature = "server")]
    fn remove_topic_locked(&self, name: &str) -> Result<()> {
        let topic = self.inner.topics.write().remove(name);
        self.inner.topic_ids.write().remove(name);
        if let Some(topic) = topic {
            topic.inner.deleted.store(true, Ordering::Release);
            let logs = self.inner.logs.lock();
            if let Some(logs) = logs.as_ref() {
                for p in topic.partitions().iter() {
                    p.wake_all();
                    logs.delete_log(&log_name(name, p.index()))?;
                }
            }
        }
        Ok(())
    }

    #[cfg(feature = "server")]
    /// Cluster node, once its metadata has caught up: deletes partition directories of
    /// cluster topics (they hold `partition.metadata`) that the registry no longer names,
    /// e.g. of a topic deleted while this node was down. Returns the names deleted.
    pub(crate) fn sweep_cluster_orphans(&self) -> Result<Vec<String>> {
        self.check_open()?;
        let _admin = self.inner.admin.lock();
        let logs = self.inner.logs.lock();
        let logs = logs
            .as_ref()
            .ok_or_else(|| Error::Closed("broker".into()))?;
        let topics = self.inner.topics.read();
        let mut deleted = Vec::new();
        for name in logs.names_on_disk()? {
            if name == CLUSTER_METADATA_DIR
                || read_partition_metadata(&logs.log_path(&name)).is_none()
            {
                continue;
            }
            let hosted = name.rsplit_once('-').is_some_and(|(topic, p)| {
                p.parse::<i32>()
                    .ok()
                    .and_then(|p| topics.get(topic).map(|t| t.partition(p).is_ok()))
                    .unwrap_or(false)
            });
            if !hosted {
                logs.delete_log(&name)?;
                deleted.push(name);
            }
        }
        Ok(deleted)
    }

    /// Creates a topic with `partitions` partitions and per-topic overrides. Errors:
    /// `InvalidTopicName`, `TopicExists`, `InvalidConfig`. [`Broker::topic`] returns a
    /// handle to it afterwards.
    ///
    /// On a cluster node the controller creates the topic (with the cluster's default
    /// replication factor) and this returns once this node has applied it.
    pub fn create_topic(&self, name: &str, partitions: i32, config: TopicConfig) -> Result<()> {
        self.create_topic_handle(name, partitions, config)
            .map(|_| ())
    }

    /// [`Broker::create_topic`], returning the new topic's handle.
    pub(crate) fn create_topic_handle(
        &self,
        name: &str,
        partitions: i32,
        config: TopicConfig,
    ) -> Result<Topic> {
        if name.starts_with("__") && name == OFFSETS_TOPIC {
            return Err(Error::TopicExists(name.to_string()));
        }
        if name == TRANSACTION_STATE_TOPIC {
            return Err(Error::InvalidTopicName {
                name: name.to_string(),
                reason: "the name is reserved for the transaction coordinator's internal topic"
                    .into(),
            });
        }
        if let Some(authority) = self.authority()? {
            self.check_open()?;
            authority.create_topic(name, partitions, &config)?;
            return self.registered_topic(name);
        }
        self.create_topic_inner(name, partitions, config, false)
    }

    /// Creates a topic unless it exists, so that a program can run again on the same
    /// data directory: succeeds when the existing topic has `partitions` partitions
    /// (its settings are left as they are: change them with
    /// [`Broker::alter_topic_config`]), and returns an `InvalidConfig` error for
    /// `partitions` naming both counts when it has another number. Otherwise as
    /// [`Broker::create_topic`].
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let path = dir.path();
    /// use tidelog::{Broker, TopicConfig};
    /// for _run in 0..2 {
    ///     let broker = Broker::open(path)?;
    ///     broker.create_topic_if_missing("events", 3, TopicConfig::new())?;
    ///     assert_eq!(broker.describe_topic("events")?.partitions.len(), 3);
    ///     assert!(broker.create_topic_if_missing("events", 4, TopicConfig::new()).is_err());
    /// }
    /// # Ok::<(), tidelog::Error>(())
    /// ```
    pub fn create_topic_if_missing(
        &self,
        name: &str,
        partitions: i32,
        config: TopicConfig,
    ) -> Result<()> {
        let exists = match self.create_topic_handle(name, partitions, config) {
            Ok(_) => return Ok(()),
            Err(Error::TopicExists(e)) => Error::TopicExists(e),
            Err(e) => return Err(e),
        };
        let topic = match self.registered_topic(name) {
            Ok(t) if !t.is_internal() => t,
            // The internal offsets topic is never the caller's; a topic deleted since
            // is reported as it was found.
            _ => return Err(exists),
        };
        let current = topic.partition_count();
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

    fn create_topic_inner(
        &self,
        name: &str,
        partitions: i32,
        config: TopicConfig,
        internal: bool,
    ) -> Result<Topic> {
        self.check_writable()?;
        validate_topic_name(name)?;
        if name == CLUSTER_METADATA_TOPIC {
            return Err(Error::InvalidTopicName {
                name: name.to_string(),
                reason: "the name is reserved for a cluster's metadata log".into(),
            });
        }
        if partitions < 1 {
            return Err(Error::InvalidConfig {
                key: "partitions".into(),
                reason: format!("topic {name:?} needs at least 1 partition, not {partitions}"),
            });
        }
        let log_config = config.apply(&self.inner.config.log)?;
        let _admin = self.inner.admin.lock();
        if self.inner.topics.read().contains_key(name) {
            return Err(Error::TopicExists(name.to_string()));
        }
        // Kafka refuses names that collide once '.' and '_' are treated alike.
        let folded = name.replace('.', "_");
        if let Some(other) = self
            .inner
            .topics
            .read()
            .keys()
            .find(|t| t.replace('.', "_") == folded)
        {
            return Err(Error::InvalidTopicName {
                name: name.to_string(),
                reason: format!("it collides with topic {other:?} ('.' and '_' collide)"),
            });
        }
        // Checked before a file is made: a refusal leaves the directory as it was.
        self.check_partition_limit(name, partitions)?;
        // A new id for every creation: a topic created again under a deleted one's name
        // is another topic for Kafka clients (KIP-516).
        let topic_id = crate::storage::codec::uuid_base64(&crate::storage::codec::random_uuid());
        let parts = {
            let logs = self.inner.logs.lock();
            let logs = logs
                .as_ref()
                .ok_or_else(|| Error::Closed("broker".into()))?;
            self.create_partition_logs(logs, (name, &topic_id), 0..partitions, &log_config)?
        };
        let topic = Topic::new(name, parts, config, internal);
        let mut snapshot = self.inner.topics.read().clone();
        snapshot.insert(name.to_string(), topic.clone());
        if let Err(e) = self.write_registry(&snapshot) {
            self.remove_partition_logs(name, 0..partitions);
            return Err(e);
        }
        *self.inner.topics.write() = snapshot;
        self.inner
            .topic_ids
            .write()
            .insert(name.to_string(), topic_id);
        Ok(topic)
    }

    fn write_registry(&self, topics: &BTreeMap<String, Topic>) -> Result<()> {
        let entries: Vec<RegistryEntry> = topics
            .values()
            .map(|t| RegistryEntry {
                name: t.name().to_string(),
                partitions: t.partition_count(),
                internal: t.is_internal(),
                config: t.config(),
            })
            .collect();
        write_checkpoint(
            &self.inner.dir.join(REGISTRY_FILE),
            &encode_registry(&entries),
        )
    }

    /// The topic named `name`, or `Error::UnknownTopic` (created with the default
    /// partition count first if `auto_create_topics` is on).
    pub fn topic(&self, name: &str) -> Result<Topic> {
        self.check_open()?;
        if let Some(t) = self.inner.topics.read().get(name) {
            return Ok(t.clone());
        }
        if self.inner.config.auto_create_topics
            && name != OFFSETS_TOPIC
            && name != TRANSACTION_STATE_TOPIC
        {
            return match self.create_topic_handle(
                name,
                self.inner.config.default_partitions,
                TopicConfig::new(),
            ) {
                Ok(t) => Ok(t),
                Err(Error::TopicExists(_)) => self.topic(name),
                Err(e) => Err(e),
            };
        }
        Err(Error::UnknownTopic(name.to_string()))
    }

    /// Names of every topic, sorted (including the internal `__consumer_offsets`).
    ///
    /// # Errors
    /// `Closed` once the broker is closed.
    pub fn topics(&self) -> Result<Vec<String>> {
        self.check_open()?;
        Ok(self.topic_names())
    }

    /// [`Broker::topics`] without the check that the broker is open.
    pub(crate) fn topic_names(&self) -> Vec<String> {
        self.inner.topics.read().keys().cloned().collect()
    }

    /// Partitions, offsets, sizes and settings of a topic (never creates it).
    pub fn describe_topic(&self, name: &str) -> Result<TopicDescription> {
        self.check_open()?;
        Ok(self.registered_topic(name)?.describe())
    }

    /// Deletes a topic and its data. Handles to it return `UnknownTopic` afterwards.
    pub fn delete_topic(&self, name: &str) -> Result<()> {
        self.check_writable()?;
        if name == OFFSETS_TOPIC || name == TRANSACTION_STATE_TOPIC {
            return Err(Error::InvalidConfig {
                key: "topic".into(),
                reason: format!("the internal topic {name} cannot be deleted"),
            });
        }
        if let Some(authority) = self.authority()? {
            authority.delete_topic(name)?;
            self.delete_share_states_of(name);
            return Ok(());
        }
        let _admin = self.inner.admin.lock();
        let mut snapshot = self.inner.topics.read().clone();
        let topic = snapshot
            .remove(name)
            .ok_or_else(|| Error::UnknownTopic(name.to_string()))?;
        self.write_registry(&snapshot)?;
        *self.inner.topics.write() = snapshot;
        self.inner.topic_ids.write().remove(name);
        topic.inner.deleted.store(true, Ordering::Release);
        let logs = self.inner.logs.lock();
        if let Some(logs) = logs.as_ref() {
            for p in topic.partitions().iter() {
                p.wake_all();
                logs.delete_log(&log_name(name, p.index()))?;
            }
        }
        drop(logs);
        drop(_admin);
        self.delete_share_states_of(name);
        Ok(())
    }

    /// The id of topic `name` (Kafka's topic id, base64), if it has one: every topic of
    /// a cluster node, and every topic of a writable single node (one created by an
    /// older version gets its id when the broker opens).
    pub(crate) fn topic_id(&self, name: &str) -> Option<String> {
        self.inner.topic_ids.read().get(name).cloned()
    }

    /// The registered topic `name` (no auto-creation), for admin operations and for
    /// the server, where only a Metadata request may create a topic.
    pub(crate) fn registered_topic(&self, name: &str) -> Result<Topic> {
        self.inner
            .topics
            .read()
            .get(name)
            .cloned()
            .ok_or_else(|| Error::UnknownTopic(name.to_string()))
    }

    /// Replaces a topic's per-topic overrides (Kafka IncrementalAlterConfigs /
    /// `kafka-configs --alter`): the new settings are checked first, written to the
    /// registry, then applied to every partition's log (segment and retention settings
    /// take effect from the next roll and retention pass). On an error nothing changes.
    pub fn alter_topic_config(&self, name: &str, config: TopicConfig) -> Result<()> {
        self.check_writable()?;
        if let Some(authority) = self.authority()? {
            return authority.alter_topic_config(name, &config);
        }
        let _admin = self.inner.admin.lock();
        let topic = self.registered_topic(name)?;
        let log_config = config.apply(&self.inner.config.log)?;
        let old = topic.config();
        *topic.inner.config.write() = config;
        let snapshot = self.inner.topics.read().clone();
        if let Err(e) = self.write_registry(&snapshot) {
            *topic.inner.config.write() = old;
            return Err(e);
        }
        for p in topic.partitions().iter() {
            p.log().set_config(log_config.clone())?;
        }
        Ok(())
    }

    /// Grows a topic to `total` partitions (Kafka CreatePartitions). Shrinking is
    /// refused, as in Kafka.
    pub fn add_partitions(&self, name: &str, total: i32) -> Result<()> {
        self.check_writable()?;
        if let Some(authority) = self.authority()? {
            return authority.add_partitions(name, total);
        }
        let _admin = self.inner.admin.lock();
        let topic = self.registered_topic(name)?;
        let current = topic.partition_count();
        if total <= current {
            return Err(Error::InvalidConfig {
                key: "partitions".into(),
                reason: format!(
                    "topic {name:?} has {current} partitions; it can only grow, not to {total}"
                ),
            });
        }
        let log_config = topic.config().apply(&self.inner.config.log)?;
        self.check_partition_limit(name, total - current)?;
        let mut parts: Vec<Partition> = topic.partitions().as_ref().clone();
        let topic_id = self.topic_id(name).unwrap_or_default();
        {
            let logs = self.inner.logs.lock();
            let logs = logs
                .as_ref()
                .ok_or_else(|| Error::Closed("broker".into()))?;
            parts.extend(self.create_partition_logs(
                logs,
                (name, &topic_id),
                current..total,
                &log_config,
            )?);
        }
        let old = topic.partitions().as_ref().clone();
        topic.set_hosted_partitions(parts, total);
        let snapshot = self.inner.topics.read().clone();
        if let Err(e) = self.write_registry(&snapshot) {
            topic.set_hosted_partitions(old, current);
            self.remove_partition_logs(name, current..total);
            return Err(e);
        }
        Ok(())
    }

    /// Closes the broker: stops the group coordinator and background threads, wakes
    /// blocked consumers (their `poll` returns `Error::Closed`), flushes and closes the
    /// logs. Later calls on any clone return `Error::Closed`. Idempotent.
    pub fn close(&self) -> Result<()> {
        self.inner.close()
    }
}

impl BrokerInner {
    fn close(&self) -> Result<()> {
        if self.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        self.authority.write().take();
        self.remote_transactions.write().take();
        self.coordinator.shutdown();
        self.transactions.shutdown();
        for topic in self.topics.read().values() {
            for p in topic.partitions().iter() {
                p.wake_all();
            }
        }
        if let Some(logs) = self.logs.lock().as_ref() {
            for m in logs.future_logs() {
                logs.cancel_move(&m.name);
            }
        }
        // The movers stop at their next chunk (a mover dropping the last handle does
        // not wait for itself).
        let me = std::thread::current().id();
        for h in std::mem::take(&mut *self.movers.lock()) {
            if h.thread().id() != me {
                let _ = h.join();
            }
        }
        match self.logs.lock().take() {
            Some(logs) => logs.close(),
            None => Ok(()),
        }
    }
}

impl Drop for BrokerInner {
    fn drop(&mut self) {
        let _ = self.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consumer_protocol_settings_and_metrics() {
        let dir = tempfile::tempdir().unwrap();
        let broker = Broker::builder(dir.path())
            .group_consumer_session_timeout(Duration::from_secs(7))
            .group_consumer_heartbeat_interval(Duration::from_millis(700))
            .open()
            .unwrap();
        let c = broker.group_coordinator();
        let join = crate::coordinator::ConsumerHeartbeatRequest {
            group_id: "g".into(),
            member_id: "a".into(),
            rebalance_timeout_ms: 30_000,
            subscribed_topic_names: Some(vec!["t".into()]),
            ..Default::default()
        };
        let r = c
            .consumer_group_heartbeat(join, &std::collections::BTreeMap::new())
            .unwrap();
        assert_eq!(r.heartbeat_interval, Duration::from_millis(700));
        assert_eq!(c.config().consumer_session_timeout, Duration::from_secs(7));
        // The metrics list the consumer-protocol group, its epoch as the generation.
        let g = &broker.metrics().groups;
        assert_eq!(g.len(), 1);
        assert_eq!(
            (g[0].state, g[0].generation, g[0].members),
            ("Stable", 1, 1)
        );
        broker.close().unwrap();
        // Reopened, the coordinator has the member back from __consumer_offsets.
        let broker = Broker::open(dir.path()).unwrap();
        let d = broker
            .group_coordinator()
            .consumer_group_describe("g")
            .unwrap();
        assert_eq!((d.group_epoch, d.members.len()), (1, 1));
        assert_eq!(
            (d.members[0].member_id.as_str(), d.members[0].member_epoch),
            ("a", 1)
        );
        broker.close().unwrap();
    }

    #[test]
    fn handles_are_thread_safe() {
        fn send_sync<T: Send + Sync + Clone>() {}
        fn send<T: Send>() {}
        send_sync::<Broker>();
        send_sync::<crate::producer::Producer>();
        send_sync::<Topic>();
        send_sync::<Partition>();
        send_sync::<GroupCoordinator>();
        send::<crate::consumer::Consumer>();
        send::<crate::consumer::GroupConsumer>();
    }

    #[test]
    fn a_data_directory_opens_once() {
        let dir = tempfile::tempdir().expect("temp dir");
        let broker = Broker::open(dir.path()).expect("first open");
        assert!(matches!(
            Broker::open(dir.path()),
            Err(Error::DirectoryLocked(_))
        ));
        broker.close().expect("close");
        assert!(matches!(broker.topic("x"), Err(Error::Closed(_))));
    }

    #[test]
    fn create_topic_if_missing_returns_the_topic_or_names_the_mismatch() {
        let dir = tempfile::tempdir().expect("temp dir");
        let broker = Broker::open(dir.path()).expect("open");
        broker
            .create_topic_if_missing("events", 3, TopicConfig::new())
            .expect("created");
        broker
            .topic("events")
            .expect("topic")
            .partition(0)
            .expect("p0")
            .append_batch(&{
                let mut b = crate::record::BatchBuilder::new();
                b.push(0, None, Some(b"kept"), &[]);
                b.finish()
            })
            .expect("append");
        broker
            .create_topic_if_missing("events", 3, TopicConfig::new().set("retention.ms", "1"))
            .expect("existing");
        let again = broker.topic("events").expect("topic");
        assert_eq!(
            again.partition(0).expect("p0").log_end_offset(),
            1,
            "same topic, data kept"
        );
        assert_eq!(
            again.config().get("retention.ms"),
            None,
            "settings left as they are"
        );
        match broker.create_topic_if_missing("events", 4, TopicConfig::new()) {
            Err(Error::InvalidConfig { key, reason }) => {
                assert_eq!(key, "partitions");
                assert_eq!(
                    reason,
                    "topic \"events\" already exists with 3 partitions, not 4"
                );
            }
            other => panic!("expected InvalidConfig, got {other:?}"),
        }
        assert!(matches!(
            broker.create_topic_if_missing(OFFSETS_TOPIC, 1, TopicConfig::new()),
            Err(Error::TopicExists(_))
        ));
        assert!(matches!(
            broker.create_topic_if_missing("bad name", 1, TopicConfig::new()),
            Err(Error::InvalidTopicName { .. })
        ));
    }

    #[test]
    fn auto_creation_is_off_by_default_and_never_comes_from_a_describe() {
        let dir = tempfile::tempdir().expect("temp dir");
        let broker = Broker::open(dir.path()).expect("open");
        assert!(matches!(broker.topic("typo"), Err(Error::UnknownTopic(_))));
        broker.close().expect("close");
        let broker = Broker::builder(dir.path())
            .auto_create_topics(true)
            .open()
            .expect("reopen");
        assert!(matches!(
            broker.describe_topic("looked-at"),
            Err(Error::UnknownTopic(_))
        ));
        assert_eq!(broker.topic("used").expect("created").partition_count(), 1);
        assert_eq!(broker.topics().expect("topics"), [OFFSETS_TOPIC, "used"]);
    }

    #[test]
    fn registry_round_trips() {
        let entries = vec![RegistryEntry {
            name: "events".into(),
            partitions: 3,
            internal: false,
            config: TopicConfig::new().set("retention.ms", "1000"),
        }];
        let bytes = encode_registry(&entries);
        let back = decode_registry(Path::new("topics"), &bytes).unwrap();
        assert_eq!(back.len(), 1);
        assert_eq!(back[0].name, "events");
        assert_eq!(back[0].partitions, 3);
        assert_eq!(back[0].config.get("retention.ms"), Some("1000"));
        assert!(decode_registry(Path::new("topics"), &bytes[..bytes.len() - 1]).is_err());
    }

    #[cfg(feature = "server")]
    #[test]
    fn a_cluster_replica_refuses_appends_before_it_has_a_role() {
        // A cluster node registers a hosted partition (from the cluster's metadata)
        // before the replica manager makes it a leader or a follower; in between it
        // leads nothing, so nothing may be appended or acknowledged there.
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::create_dir_all(dir.path().join(CLUSTER_METADATA_DIR)).expect("mkdir");
        std::fs::write(
            dir.path()
                .join(CLUSTER_METADATA_DIR)
                .join(CLUSTER_STATE_FILE),
            b"",
        )
        .expect("raft state");
        let broker = Broker::open(dir.path()).expect("open");
        broker
            .apply_cluster_topic(
                &ClusterTopic {
                    name: "orders".into(),
                    id: "AAAAAAAAAAAAAAAAAAAAAA".into(),
                    partition_count: 1,
                    hosted: vec![0],
                    config: TopicConfig::new(),
                    internal: false,
                },
                &[],
            )
            .expect("applied");
        let p = broker.hosted_partition("orders", 0).expect("hosted");
        assert!(!p.is_leader(), "no role yet: not a leader");
        let mut b = crate::record::BatchBuilder::new();
        b.push(0, None, Some(b"unled"), &[]);
        let batch = b.finish();
        assert!(
            matches!(
                p.append_batch(&batch),
                Err(Error::NotLeaderOrFollower { .. })
            ),
            "an append before the replica manager gives a role is refused"
        );
        assert!(matches!(
            p.check_enough_replicas(),
            Err(Error::NotLeaderOrFollower { .. })
        ));
        assert!(matches!(
            p.wait_committed(0, Duration::from_millis(1)),
            Err(Error::NotLeaderOrFollower { .. })
        ));
        assert_eq!(p.log_end_offset(), 0, "nothing was appended");
        // Once the replica manager makes it the leader, appends go in.
        p.become_leader(
            1,
            0,
            0,
            vec![1],
            vec![1],
            1,
            Duration::from_secs(30),
            0,
            std::time::Instant::now(),
        )
        .expect("leader");
        p.append_batch(&batch).expect("the leader appends");
        broker.close().expect("close");
    }
}
