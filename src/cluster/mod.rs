//! A cluster node (feature `server`): the metadata quorum (Raft, with raft-rs), the
//! controller and the broker lifecycle. See docs/design.md, "The cluster".
//!
//! [`ClusterNode::start`] makes a [`Broker`] one node of a cluster whose voters are
//! listed in the quorum. The node keeps the cluster's metadata log in
//! `<data>/__cluster_metadata-0/` ([`storage`]), exchanges Raft messages with its peers
//! ([`transport`]), applies committed records to its [`MetadataImage`] ([`image`]) and
//! publishes every new image to its [`MetadataListener`]s: the broker's topic registry
//! (local logs for the partitions this node hosts) and, with the data plane, the replica
//! manager, which drives each hosted partition's leader or follower role from
//! [`local_changes`](image::local_changes).
//!
//! Layers: the cluster module sits above the broker; the broker defines the
//! [`TopicAuthority`] trait it hands admin operations to, and this module implements it.
//!
//! Its files import each other bottom-up only (each imports only files above it in
//! this list; no cycle but a file and its own tests):
//! 1. `voters`, `liveness`, `logger`, `meta_properties`, `storage`, `records`
//!    (with `records/codec`), `voter_change`: no other file of the cluster;
//! 2. `quorum_tls` (voters), then `config` (voters, quorum_tls, records);
//! 3. `image` (with `image/codec`: records), then `listener` (image), `inbox` (image,
//!    voter_change), `membership` (inbox);
//! 4. `transport` (image, inbox, liveness, quorum_tls, voters);
//! 5. `shared` (image, listener, liveness, membership, records, transport), then `handle` (config, image,
//!    inbox, records, shared);
//! 6. `controller` (config, image, liveness, records: a pure function);
//! 7. `node`, the Raft loop (config, controller, image, inbox, meta_properties,
//!    records, shared, storage, transport);
//! 8. `replication`, the data plane (handle, image, listener, records, shared);
//! 9. this file, [`ClusterNode`] (all of the above), and `format` (inbox,
//!    meta_properties, storage, voters: a node's data directory before its first start);
//! 10. `security` (this file's [`ClusterNode`], for the server's credentials and ACLs),
//!     `partition_admin` (leader elections and reassignments on [`ClusterNode`]).

/// The Kafka client the cluster's tests talk to nodes with.
#[cfg(test)]
pub(crate) use crate::client;

mod amnesia;
mod config;
mod controller;
pub(crate) mod features;
pub(crate) mod format;
pub(crate) mod group_configs;
mod handle;
pub(crate) mod image;
mod inbox;
mod listener;
mod liveness;
mod logger;
mod membership;
mod meta_properties;
mod node;
pub(crate) mod partition_admin;
pub(crate) mod quorum_forward;
pub(crate) mod quorum_tls;
pub(crate) mod records;
mod replication;
mod replication_quota;
pub(crate) use replication_quota::{LeaderThrottle, ReplicationQuota};
pub(crate) mod security;
mod share;
mod shared;
mod storage;
mod transactions;
mod transactions_remote;
mod transport;
pub(crate) mod txn_markers_wire;
pub(crate) mod unregister;
mod voter_change;
mod voters;

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::broker::Broker;
use crate::broker::{CLUSTER_METADATA_DIR, CLUSTER_STATE_FILE, TopicAuthority, WeakBroker};
use crate::config::TopicConfig;
use crate::error::IoContext;
use crate::error::{Error, Result};
use crate::storage::codec;
pub(crate) use config::ClusterConfig;
use handle::NodeHandle;
#[cfg(test)]
use image::NO_LEADER;
pub(crate) use image::{Applied, MetadataImage};
use inbox::{Inbound, raft_id};
pub(crate) use listener::{MetadataListener, MetadataUpdate};
pub(crate) use membership::{QuorumStatus, ReplicaStatus};
use node::{PublishJob, RaftLoop};
#[cfg(test)]
use records::AlterPartition;
pub(crate) use records::{CreateTopic, MetadataRecord};
pub(crate) use shared::Proposal;
use shared::Shared;
pub(crate) use voter_change::QuorumRefusal;
#[cfg(test)]
use voters::Voter;
pub(crate) use voters::parse_quorum;

/// A running cluster node. Cheap to share (`Arc`); stops with [`ClusterNode::shutdown`].
pub(crate) struct ClusterNode {
    config: Arc<ClusterConfig>,
    shared: Arc<Shared>,
    inbox: crossbeam_channel::Sender<Inbound>,
    /// The same config, state and inbox, as the data plane holds them (weakly).
    handle: Arc<NodeHandle>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    broker: WeakBroker,
    data_dir: PathBuf,
    quorum_addr: SocketAddr,
    /// The data plane: partition roles, fetchers, ISR changes.
    replicas: Mutex<Option<Arc<replication::ReplicaManager>>>,
    /// Loads the transaction coordinator where `__transaction_state` is led.
    txn_loader: Mutex<Option<Arc<transactions::TxnLoader>>>,
    /// Connections to the coordinators that verify transactional batches led here.
    txn_clients: transactions::ClientPool,
    /// Connections to the controller for the requests a node forwards to it
    /// ([`quorum_forward`]).
    forward_clients: transactions::ClientPool,
    /// What this node sends as leader to followers of its leader-throttled replicas
    /// (KIP-73).
    leader_quota: Arc<replication_quota::ReplicationQuota>,
}

impl std::fmt::Debug for ClusterNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterNode")
            .field("node_id", &self.config.node_id)
            .field("quorum_addr", &self.quorum_addr)
            .finish_non_exhaustive()
    }
}

/// Keeps a cluster node's broker registry in step with the image: topics and the local
/// logs of hosted partitions; once caught up, deletes orphaned partition directories.
struct BrokerSync {
    broker: WeakBroker,
    swept: AtomicBool,
    /// The pace of moves between log directories the node started with, which the
    /// dynamic `replica.alter.log.dirs.io.max.bytes.per.second` overrides while set.
    static_move_rate: Option<u64>,
    /// The last index of the node's metadata log when it started: a record after it was
    /// never applied by an earlier process of the node.
    log_end_at_start: u64,
}

impl MetadataListener for BrokerSync {
    fn on_metadata(&self, u: &MetadataUpdate<'_>) {
        let Some(broker) = self.broker.upgrade() else {
            return;
        };
        for (name, t) in &u.previous.topics {
            if u.current.topics.get(name).map(|c| c.id) != Some(t.id)
                && let Err(e) = broker.remove_cluster_topic(name)
            {
                tracing::error!(node = u.node_id, topic = %name, error = %e, "cannot delete a deleted topic's local logs");
            }
        }
        if u.previous.broker_configs != u.current.broker_configs {
            broker.set_log_dir_move_rate(
                u.current
                    .broker_configs
                    .log_dir_move_rate(u.node_id, self.static_move_rate),
            );
        }
        // An update that holds records of the node's metadata log from before this start
        // may replay what an earlier process applied: no replica is new to it then. One
        // that starts after them holds only records no earlier process saw (the Raft
        // loop and the publisher never join the two in one update, but for a snapshot
        // sent by the controller). A node that started with no metadata (new, or its
        // metadata directory lost) cannot tell: none is new before it caught up.
        let live = match self.log_end_at_start {
            0 => self.swept.load(Ordering::Acquire),
            end => u.previous.index >= end,
        };
        for (name, t) in &u.current.topics {
            let before = u.previous.topics.get(name);
            if before.is_some_and(|p| Arc::ptr_eq(p, t)) {
                continue;
            }
            let topic = t.for_node(u.node_id);
            // Replicas assigned to this node by this update: they have no records
            // anywhere, so a log is made for them even while a log directory failed.
            let hosted_before = |p: i32| {
                before.is_some_and(|b| {
                    b.id == t.id
                        && b.partitions
                            .get(p as usize)
                            .is_some_and(|x| x.hosts(u.node_id))
                })
            };
            let fresh: Vec<i32> = match live {
                true => topic
                    .hosted
                    .iter()
                    .copied()
                    .filter(|&p| !hosted_before(p))
                    .collect(),
                false => Vec::new(),
            };
            if let Err(e) = broker.apply_cluster_topic(&topic, &fresh) {
                tracing::error!(node = u.node_id, topic = %name, error = %e, "cannot open a topic's local logs");
            }
        }
        if u.caught_up && !self.swept.swap(true, Ordering::AcqRel) {
            match broker.sweep_cluster_orphans() {
                Ok(deleted) if !deleted.is_empty() => {
                    tracing::info!(
                        node = u.node_id,
                        ?deleted,
                        "deleted local logs of topics the cluster no longer has"
                    );
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::error!(node = u.node_id, error = %e, "cannot sweep orphaned partition directories")
                }
            }
        }
    }
}

/// A request to create a topic, with Kafka's -1 for "the default".
#[derive(Debug, Clone, Default)]
pub(crate) struct NewTopic {
    /// Name.
    pub name: String,
    /// Partitions, -1 = `num.partitions`.
    pub partitions: i32,
    /// Replication factor, -1 = `default.replication.factor`.
    pub replication_factor: i16,
    /// Client-chosen replicas per partition.
    pub assignment: Option<Vec<Vec<i32>>>,
    /// Config overrides.
    pub configs: Vec<(String, String)>,
}

/// How long an in-process admin call waits for its record to be applied.
pub(crate) const ADMIN_TIMEOUT: Duration = Duration::from_secs(30);

impl ClusterNode {
    /// Starts node `config.node_id` on `broker`'s data directory: checks (and on a fresh
    /// directory, creates) the node's identity and Raft storage, binds the quorum
    /// listener, starts the Raft loop and publisher, and attaches to the broker. Errors
    /// name the data directory and both ids when it belongs to another node or cluster.
    pub(crate) fn start(broker: &Broker, mut config: ClusterConfig) -> Result<Arc<ClusterNode>> {
        let me = config.node_id;
        check_config(&mut config)?;
        let data_dir = broker.dir().to_path_buf();
        let mut meta_props = check_data_dir(&data_dir, me)?;
        let directory_id = meta_properties::directory_id(&data_dir, &mut meta_props)?;
        let listener = bind_quorum_listener(&mut config)?;
        let quorum_addr = listener
            .local_addr()
            .ctx("address of", "the quorum listener")?;
        if !config.is_voter() {
            tracing::info!(node = me, quorum = %quorum_addr, "not among the voters of --quorum: this node is a broker only and follows the metadata log as a learner");
        }
        let (inbox_tx, inbox_rx) = crossbeam_channel::unbounded();
        let shared = Arc::new(Shared::new(
            me,
            meta_props.as_ref().map(|p| p.cluster_id.clone()),
        ));
        let config = Arc::new(config);
        let node = Arc::new(ClusterNode {
            config: config.clone(),
            shared: shared.clone(),
            inbox: inbox_tx.clone(),
            handle: Arc::new(NodeHandle {
                config: config.clone(),
                shared: shared.clone(),
                inbox: inbox_tx,
            }),
            threads: Mutex::new(Vec::new()),
            broker: broker.downgrade(),
            data_dir,
            quorum_addr,
            replicas: Mutex::new(None),
            txn_loader: Mutex::new(None),
            txn_clients: transactions::ClientPool::new(format!("tidelog-txn-verify-{me}")),
            forward_clients: transactions::ClientPool::new(format!(
                "{}{me}",
                quorum_forward::FORWARDED_CLIENT_PREFIX
            )),
            leader_quota: Arc::new(replication_quota::ReplicationQuota::new(
                broker.stats().replication.leader.clone(),
            )),
        });
        // Refuses a single node's data directory before anything is written to it.
        broker.attach_cluster(node.clone())?;
        // Its in-process transactional producers reach the other nodes' coordinators.
        broker.attach_remote_transactions(node.clone());
        // A cluster node coordinates groups only while it leads `__consumer_offsets-0`
        // (the replica manager loads it then): until then every group API answers
        // NOT_COORDINATOR, never from an empty coordinator whose commits nothing keeps.
        broker.group_coordinator().unload();
        if let Err(e) = node.run(broker, listener, inbox_rx, meta_props, directory_id) {
            broker.detach_cluster();
            node.shutdown();
            return Err(e);
        }
        tracing::info!(node = me, quorum = %quorum_addr, listener = %config.advertised_listener, "cluster node started");
        Ok(node)
    }

    /// Opens the Raft storage, starts the transport, the listeners (the broker's
    /// registry, then the replica manager), the publisher and the Raft loop.
    fn run(
        self: &Arc<Self>,
        broker: &Broker,
        listener: TcpListener,
        inbox: crossbeam_channel::Receiver<Inbound>,
        meta_props: Option<meta_properties::MetaProperties>,
        directory_id: String,
    ) -> Result<()> {
        let config = &self.config;
        let me = config.node_id;
        let meta_dir = self.data_dir.join(CLUSTER_METADATA_DIR);
        let voter_ids: Vec<u64> = config.voters.iter().map(|v| raft_id(v.id)).collect();
        let store = storage::RaftStorage::open(&meta_dir, raft_id(me), &voter_ids)?;
        let clean_shutdown_epoch = storage::read_clean_shutdown(&meta_dir)?;
        storage::remove_clean_shutdown(&meta_dir)?;
        let (raw, image) = self.open_raft(store, meta_props.as_ref())?;
        let transport = transport::Transport::start(
            me,
            &config.voters,
            listener,
            self.inbox.clone(),
            self.shared.liveness.clone(),
            transport::QuorumIds {
                cluster_id: self.shared.cluster_id.clone(),
                directory_id: directory_id.clone(),
                directories: self.shared.directories.clone(),
            },
            config.quorum_tls.clone(),
            Some(announced_quorum_addr(config, self.quorum_addr)),
        )?;
        for (id, addr) in &raw.store().reconfigured().addresses {
            transport.note_address(inbox::node_of(*id), addr);
        }
        let log_end_at_start = raw.raft.raft_log.last_index();
        self.add_listeners(broker, log_end_at_start)?;
        let (pub_tx, pub_rx) = crossbeam_channel::unbounded::<PublishJob>();
        let publisher = {
            let shared = self.shared.clone();
            std::thread::Builder::new()
                .name(format!("metadata-publisher-{me}"))
                .spawn(move || node::publisher_loop(shared, pub_rx, log_end_at_start))
                .ctx("spawn the metadata publisher for", self.data_dir.clone())?
        };
        let raft_loop = RaftLoop::new(
            raw,
            config.clone(),
            self.shared.clone(),
            inbox,
            transport,
            pub_tx,
            image,
            self.data_dir.clone(),
            clean_shutdown_epoch,
            meta_props,
            directory_id,
            broker.downgrade(),
        );
        let looper = std::thread::Builder::new()
            .name(format!("raft-{me}"))
            .spawn(move || node::run_raft_thread(raft_loop))
            .ctx("spawn the raft thread for", self.data_dir.clone())?;
        self.threads.lock().extend([looper, publisher]);
        Ok(())
    }

    /// The image of `store`'s snapshot (checked against `meta.properties`) and raft-rs
    /// started on `store`.
    fn open_raft(
        &self,
        store: storage::RaftStorage,
        meta_props: Option<&meta_properties::MetaProperties>,
    ) -> Result<(raft::RawNode<storage::RaftStorage>, MetadataImage)> {
        let me = self.config.node_id;
        let meta_dir = self.data_dir.join(CLUSTER_METADATA_DIR);
        let snapshot = store.snapshot_ref().clone();
        let image = if snapshot.get_metadata().index > 0 {
            let location = format!("{}", meta_dir.join(storage::SNAPSHOT_FILE).display());
            MetadataImage::decode(&snapshot.data, &location)?
        } else {
            MetadataImage::default()
        };
        if let (Some(p), Some(id)) = (meta_props, &image.cluster_id) {
            meta_properties::check_cluster(&self.data_dir, p, id)?;
        }
        let raft_config = raft::Config {
            id: raft_id(me),
            election_tick: self.config.election_ticks,
            heartbeat_tick: 2,
            applied: snapshot.get_metadata().index,
            max_size_per_msg: 1 << 20,
            max_inflight_msgs: 256,
            check_quorum: true,
            pre_vote: true,
            ..Default::default()
        };
        raft_config.validate().map_err(|e| Error::InvalidConfig {
            key: "raft".into(),
            reason: e.to_string(),
        })?;
        let logger = logger::raft_logger(me);
        let raw =
            raft::RawNode::new(&raft_config, store, &logger).map_err(|e| Error::InvalidConfig {
                key: "raft".into(),
                reason: format!("cannot start raft on {}: {e}", meta_dir.display()),
            })?;
        Ok((raw, image))
    }

    /// Registers the metadata listeners: the broker's registry, then (a partition's
    /// log exists before its role is set) the started replica manager.
    fn add_listeners(self: &Arc<Self>, broker: &Broker, log_end_at_start: u64) -> Result<()> {
        self.shared.listeners.lock().push(Arc::new(BrokerSync {
            broker: broker.downgrade(),
            swept: AtomicBool::new(false),
            static_move_rate: broker.log_dir_move_rate(),
            log_end_at_start,
        }));
        let replicas = replication::ReplicaManager::new(
            self.config.node_id,
            broker.downgrade(),
            broker.stats().replication.follower.clone(),
            Arc::downgrade(&self.handle),
            self.config.replica_lag_time_max,
            self.config.min_insync_replicas,
        );
        replicas.start()?;
        self.shared.listeners.lock().push(replicas.clone());
        *self.replicas.lock() = Some(replicas);
        // After the replica manager: a partition's role is set before its coordinator
        // loads.
        let txns = transactions::TxnLoader::start(
            self.config.node_id,
            broker,
            Arc::downgrade(&self.handle),
        )?;
        self.shared.listeners.lock().push(txns.clone());
        *self.txn_loader.lock() = Some(txns);
        let store = share::ClusterShareStore::new(
            self.config.node_id,
            broker,
            Arc::downgrade(&self.handle),
        );
        broker.share_state().set_store(Arc::new(store));
        self.shared
            .listeners
            .lock()
            .push(Arc::new(share::ShareUnloader {
                broker: broker.downgrade(),
            }));
        Ok(())
    }

    /// This node's id.
    pub(crate) fn node_id(&self) -> i32 {
        self.config.node_id
    }

    /// The name of the inter-broker listener when one was named.
    pub(crate) fn inter_broker_listener(&self) -> Option<&str> {
        self.config.inter_broker_listener.as_deref()
    }

    /// The node's settings (the read-only broker configs DescribeConfigs lists).
    pub(crate) fn config(&self) -> &ClusterConfig {
        &self.config
    }

    /// The replica manager (tests).
    #[cfg(test)]
    pub(crate) fn replica_manager(&self) -> Arc<replication::ReplicaManager> {
        self.replicas.lock().clone().expect("running")
    }

    /// The address the quorum listener is bound to.
    #[cfg(test)]
    pub(crate) fn quorum_addr(&self) -> SocketAddr {
        self.quorum_addr
    }

    /// The latest published image.
    pub(crate) fn image(&self) -> Arc<MetadataImage> {
        self.handle.image()
    }

    /// The topics in the metadata this node applied but not yet in the image it
    /// published: their creation is committed, and this node is opening their logs.
    pub(crate) fn topics_being_published(&self) -> Vec<String> {
        let applied = self.shared.applied.read().clone();
        let published = self.image();
        if Arc::ptr_eq(&applied, &published) {
            return Vec::new();
        }
        applied
            .topics
            .keys()
            .filter(|name| published.topic(name).is_none())
            .cloned()
            .collect()
    }

    /// Tests: whether this voter dropped a vote request because it may not vote yet.
    #[cfg(test)]
    pub(crate) fn refused_a_vote(&self) -> bool {
        self.shared.refused_vote.load(Ordering::Acquire)
    }

    /// The controller (Raft leader), if known.
    pub(crate) fn controller_id(&self) -> Option<i32> {
        let l = self.shared.leader.load(Ordering::Acquire);
        (l >= 0).then_some(l)
    }

    /// This process's broker epoch, once its registration is applied.
    pub(crate) fn broker_epoch(&self) -> Option<i64> {
        self.handle.broker_epoch()
    }

    /// True once this process has published the metadata log up to its own
    /// registration: its image holds everything the cluster decided before it started.
    pub(crate) fn is_caught_up(&self) -> bool {
        self.shared.caught_up.load(Ordering::Acquire)
    }

    /// Holds a client request until this node has caught up with the metadata log (as
    /// a Kafka broker processes no request before it has): true once it has, false if
    /// `timeout` passes, the node stops, or `gone()` says the client left (checked
    /// every 200 ms).
    pub(crate) fn wait_caught_up(&self, timeout: Duration, gone: impl Fn() -> bool) -> bool {
        let deadline = Instant::now() + timeout;
        let mut g = self.shared.published_lock.lock();
        loop {
            if self.is_caught_up() {
                return true;
            }
            let now = Instant::now();
            if now >= deadline || self.check_running().is_err() || gone() {
                return false;
            }
            let step = (deadline - now).min(Duration::from_millis(200));
            self.shared.published_cv.wait_for(&mut g, step);
        }
    }

    #[cfg(test)]
    /// Registers a listener: it is told about the current image at once (as an update
    /// from the empty image), then about every new one.
    pub(crate) fn add_listener(&self, listener: Arc<dyn MetadataListener>) {
        let mut listeners = self.shared.listeners.lock();
        let current = self.image();
        let epoch = self.shared.broker_epoch.load(Ordering::Acquire);
        listener.on_metadata(&MetadataUpdate {
            node_id: self.config.node_id,
            previous: &MetadataImage::default(),
            current: &current,
            caught_up: epoch >= 0 && current.index >= epoch as u64,
        });
        listeners.push(listener);
    }

    fn check_running(&self) -> Result<()> {
        self.shared.check_running()
    }

    /// Proposes `record` and waits until this node has applied and published it (or
    /// `timeout`: `Error::Timeout`). Proposals are retried across leader changes.
    pub(crate) fn propose(&self, record: MetadataRecord, timeout: Duration) -> Result<Applied> {
        self.submit(record, timeout)?.wait()
    }

    /// Proposes `record` without waiting: the returned [`Proposal`] tells its outcome
    /// once this node has applied and published it, or a timeout after `timeout`.
    pub(crate) fn submit(&self, record: MetadataRecord, timeout: Duration) -> Result<Proposal> {
        self.handle.submit(record, timeout)
    }

    /// A read barrier on the metadata log ([`NodeHandle::read_barrier`]): once it
    /// returns, this node's published image holds every record the cluster committed
    /// before the call (what another node's change, such as a group config, made
    /// before). Asks the controller for its commit index and waits until this node has
    /// published up to it, within `timeout` (`Error::Timeout` naming what did not come
    /// in time; `Error::Closed` once the node stopped).
    pub(crate) fn read_barrier(&self, timeout: Duration) -> Result<()> {
        self.handle.read_barrier(timeout)
    }

    /// The `CreateTopic` record for `t`, with the defaults filled in.
    fn create_record(&self, t: &NewTopic) -> MetadataRecord {
        MetadataRecord::CreateTopic(CreateTopic {
            name: t.name.clone(),
            topic_id: codec::random_uuid(),
            partitions: if t.partitions == -1 {
                self.config.default_partitions
            } else {
                t.partitions
            },
            replication_factor: if t.replication_factor == -1 {
                self.config.default_replication_factor
            } else {
                t.replication_factor
            },
            assignment: t.assignment.clone(),
            configs: t.configs.clone(),
            internal: false,
        })
    }

    /// Checks `record` against the current image without proposing it.
    fn validate(&self, record: &MetadataRecord) -> Result<()> {
        let mut scratch = (*self.image()).clone();
        scratch
            .apply(scratch.index + 1, record)
            .map(drop)
            .map_err(Into::into)
    }

    /// Creates a topic through the controller (or, with `validate_only`, checks that it
    /// would be created).
    pub(crate) fn create_topic(
        &self,
        t: &NewTopic,
        validate_only: bool,
        timeout: Duration,
    ) -> Result<()> {
        let record = self.create_record(t);
        if validate_only {
            return self.validate(&record);
        }
        self.propose(record, timeout).map(drop)
    }

    /// Deletes a topic through the controller.
    pub(crate) fn delete_topic(&self, name: &str, timeout: Duration) -> Result<()> {
        let topic_id = self.image().topic(name).map(|t| t.id);
        self.propose(
            MetadataRecord::DeleteTopic {
                name: name.to_string(),
                topic_id,
            },
            timeout,
        )
        .map(drop)
    }

    /// Grows a topic through the controller.
    pub(crate) fn create_partitions(
        &self,
        name: &str,
        total: i32,
        assignment: Option<Vec<Vec<i32>>>,
        validate_only: bool,
        timeout: Duration,
    ) -> Result<()> {
        let record = MetadataRecord::CreatePartitions {
            name: name.to_string(),
            total,
            assignment,
        };
        if validate_only {
            return self.validate(&record);
        }
        self.propose(record, timeout).map(drop)
    }

    /// Replaces a topic's config overrides through the controller.
    pub(crate) fn alter_topic_config(
        &self,
        name: &str,
        configs: Vec<(String, String)>,
        timeout: Duration,
    ) -> Result<()> {
        self.propose(
            MetadataRecord::AlterTopicConfig {
                name: name.to_string(),
                configs,
            },
            timeout,
        )
        .map(drop)
    }

    /// Sets and removes dynamic broker configs of `broker` (None: the cluster-wide
    /// default) through the controller, all or none (with `validate_only`, only checks
    /// them).
    pub(crate) fn alter_broker_config(
        &self,
        broker: Option<i32>,
        changes: Vec<(String, Option<String>)>,
        validate_only: bool,
        timeout: Duration,
    ) -> Result<()> {
        let record = MetadataRecord::AlterBrokerConfig { broker, changes };
        // Refuse an invalid change here with its typed error; the apply checks again.
        self.validate(&record)?;
        if validate_only {
            return Ok(());
        }
        self.propose(record, timeout).map(drop)
    }

    /// An ISR change from this node as a partition's leader (tests; the data plane
    /// proposes through [`NodeHandle::alter_partition`]), without waiting.
    #[cfg(test)]
    pub(crate) fn alter_partition(
        &self,
        change: AlterPartition,
        timeout: Duration,
    ) -> Result<Proposal> {
        self.handle.alter_partition(change, timeout)
    }

    /// The metadata quorum's voters and learners (broker-only nodes) as this node last
    /// applied them.
    pub(crate) fn membership(&self) -> membership::Membership {
        self.shared.membership.read().clone()
    }

    /// The quorum as this node sees it (Kafka's DescribeQuorum): on the controller,
    /// with every member's progress.
    pub(crate) fn quorum_status(&self) -> QuorumStatus {
        self.shared.quorum.read().clone()
    }

    /// The directory id the quorum recorded for `node`.
    pub(crate) fn directory_of(&self, node: i32) -> Option<String> {
        self.image().directories.get(&node).cloned()
    }

    /// Adds `node`, a broker-only node that follows the metadata log, to the voters
    /// (Kafka's `AddRaftVoter`): asked of the controller, answered once this node
    /// applied the change. `directory_id`, when given, must be the one the node
    /// registered.
    pub(crate) fn add_voter(
        &self,
        node: i32,
        directory_id: Option<String>,
        timeout: Duration,
    ) -> std::result::Result<(), QuorumRefusal> {
        self.change_voters(true, node, directory_id, timeout)
    }

    /// Removes voter `node` (Kafka's `RemoveRaftVoter`); the quorum forgets its
    /// directory id, so that it can come back on a new data directory through
    /// [`ClusterNode::add_voter`]. A removed node that keeps running follows the log
    /// as a broker only.
    pub(crate) fn remove_voter(
        &self,
        node: i32,
        directory_id: Option<String>,
        timeout: Duration,
    ) -> std::result::Result<(), QuorumRefusal> {
        self.change_voters(false, node, directory_id, timeout)
    }

    fn change_voters(
        &self,
        add: bool,
        node: i32,
        directory_id: Option<String>,
        timeout: Duration,
    ) -> std::result::Result<(), QuorumRefusal> {
        let failed = |reason: String| QuorumRefusal::Failed { reason };
        let (tx, rx) = crossbeam_channel::bounded(1);
        self.inbox
            .send(Inbound::ChangeVoters(voter_change::VoterChange {
                add,
                node,
                directory_id,
                reply: tx,
            }))
            .map_err(|_| failed(format!("cluster node {} is stopped", self.config.node_id)))?;
        let deadline = Instant::now() + timeout;
        rx.recv_timeout(timeout).map_err(|_| {
            failed(format!(
                "cluster node {} did not answer in {timeout:?}",
                self.config.node_id
            ))
        })??;
        // Proposed: wait until this node applied it.
        loop {
            let m = self.membership();
            if m.voters.contains(&node) == add {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(failed(format!(
                    "the change of voter {node} was proposed but not applied within {timeout:?}; describe the quorum to see whether it was"
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Reserves `count` producer ids for this broker; returns the first.
    pub(crate) fn allocate_producer_ids(&self, count: i64, timeout: Duration) -> Result<i64> {
        let broker_epoch = self.broker_epoch().ok_or_else(|| Error::StaleBrokerEpoch {
            broker: self.config.node_id,
            reason: "this node is not registered yet".into(),
        })?;
        match self.propose(
            MetadataRecord::AllocateProducerIds {
                broker_id: self.config.node_id,
                broker_epoch,
                count,
            },
            timeout,
        )? {
            Applied::ProducerIds(first) => Ok(first),
            other => Err(Error::corrupt(
                "metadata log",
                0,
                format!("AllocateProducerIds applied as {other:?}"),
            )),
        }
    }

    /// Controlled shutdown: moves this node's leaderships to other in-sync replicas and
    /// fences it (`ShutdownBroker`), then records the clean shutdown in the data
    /// directory. The node keeps running until [`ClusterNode::shutdown`].
    pub(crate) fn controlled_shutdown(&self, timeout: Duration) -> Result<()> {
        self.shared.shutting_down.store(true, Ordering::Release);
        let Some(broker_epoch) = self.broker_epoch() else {
            return Ok(());
        };
        self.propose(
            MetadataRecord::ShutdownBroker {
                broker_id: self.config.node_id,
                broker_epoch,
            },
            timeout,
        )?;
        storage::write_clean_shutdown(&self.data_dir.join(CLUSTER_METADATA_DIR), broker_epoch)?;
        tracing::info!(
            node = self.config.node_id,
            broker_epoch,
            "controlled shutdown done"
        );
        Ok(())
    }

    /// Stops the Raft loop, the publisher and the transport, and detaches from the
    /// broker. To the rest of the cluster this node just went silent (it is fenced after
    /// the session timeout) unless [`ClusterNode::controlled_shutdown`] ran first.
    /// Idempotent.
    pub(crate) fn shutdown(&self) {
        if self.shared.stopped.swap(true, Ordering::AcqRel) {
            return;
        }
        if let Some(r) = self.replicas.lock().take() {
            r.stop();
        }
        if let Some(t) = self.txn_loader.lock().take() {
            t.stop();
        }
        let _ = self.inbox.send(Inbound::Stop);
        let threads: Vec<_> = self.threads.lock().drain(..).collect();
        for t in threads {
            let _ = t.join();
        }
        self.shared.listeners.lock().clear();
        if let Some(broker) = self.broker.upgrade() {
            broker.detach_cluster();
        }
        // Wake every waiting caller: they report the node closed.
        for w in self.shared.waiters.lock().values() {
            w.cv.notify_all();
        }
        {
            let _g = self.shared.published_lock.lock();
            self.shared.published_cv.notify_all();
        }
    }
}

/// Checks `config` against the quorum, capping the offsets topic's replication factor
/// at the number of voters.
fn check_config(config: &mut ClusterConfig) -> Result<()> {
    if config.node_id < 0 {
        return Err(Error::InvalidConfig {
            key: "node.id".into(),
            reason: format!("node id {} is negative", config.node_id),
        });
    }
    let voters = config.voters.len() as i16;
    if config.offsets_topic_replication_factor > voters {
        tracing::warn!(
            wanted = config.offsets_topic_replication_factor,
            nodes = voters,
            "offsets.topic.replication.factor is above the number of nodes; using {voters}"
        );
        config.offsets_topic_replication_factor = voters;
    }
    if config.offsets_topic_replication_factor < 1 || config.default_replication_factor < 1 {
        return Err(Error::InvalidConfig {
            key: "default.replication.factor".into(),
            reason: "replication factors must be at least 1".into(),
        });
    }
    Ok(())
}

/// The data directory's `meta.properties`, checked to be node `me`'s with its
/// metadata log (None on a fresh directory).
fn check_data_dir(data_dir: &Path, me: i32) -> Result<Option<meta_properties::MetaProperties>> {
    let meta_dir = data_dir.join(CLUSTER_METADATA_DIR);
    let meta_props = meta_properties::read(data_dir)?;
    if let Some(p) = &meta_props {
        meta_properties::check_node(data_dir, p, me)?;
        if !meta_dir.join(CLUSTER_STATE_FILE).exists() {
            return Err(Error::InvalidConfig {
                key: "node.id".into(),
                reason: format!(
                    "{} says it is node {me} of cluster {}, but its metadata log {} is missing",
                    data_dir.display(),
                    p.cluster_id,
                    meta_dir.display()
                ),
            });
        }
    }
    Ok(meta_props)
}

/// The quorum listener the caller bound, or this node's voter address bound now.
fn bind_quorum_listener(config: &mut ClusterConfig) -> Result<TcpListener> {
    if let Some(l) = config.quorum_listener.take() {
        return Ok(l);
    }
    let me = config.node_id;
    let addr = match config.voters.iter().find(|v| v.id == me) {
        Some(v) => v.addr.clone(),
        // A broker only: the voters connect to it where it announces, on a port of the
        // OS's choosing on its advertised host.
        None => format!("{}:0", advertised_host(config)),
    };
    TcpListener::bind(addr.as_str()).ctx("bind the quorum listener", addr.clone())
}

/// The host of this node's advertised Kafka listener.
fn advertised_host(config: &ClusterConfig) -> String {
    let host = config
        .advertised_listener
        .rsplit_once(':')
        .map_or(config.advertised_listener.as_str(), |(h, _)| h);
    host.to_string()
}

/// The quorum address a node announces in its hellos: a voter's `--quorum` entry, a
/// broker-only node's bound listener (with the advertised host for a wildcard address).
fn announced_quorum_addr(config: &ClusterConfig, bound: SocketAddr) -> String {
    if let Some(v) = config.voters.iter().find(|v| v.id == config.node_id) {
        v.addr.clone()
    } else if bound.ip().is_unspecified() {
        format!("{}:{}", advertised_host(config), bound.port())
    } else {
        bound.to_string()
    }
}

impl TopicAuthority for ClusterNode {
    fn create_topic(&self, name: &str, partitions: i32, config: &TopicConfig) -> Result<()> {
        let t = NewTopic {
            name: name.to_string(),
            partitions,
            replication_factor: -1,
            assignment: None,
            configs: config
                .overrides()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        };
        ClusterNode::create_topic(self, &t, false, ADMIN_TIMEOUT)
    }

    fn delete_topic(&self, name: &str) -> Result<()> {
        ClusterNode::delete_topic(self, name, ADMIN_TIMEOUT)
    }

    fn add_partitions(&self, name: &str, total: i32) -> Result<()> {
        self.create_partitions(name, total, None, false, ADMIN_TIMEOUT)
    }

    fn alter_topic_config(&self, name: &str, config: &TopicConfig) -> Result<()> {
        ClusterNode::alter_topic_config(
            self,
            name,
            config
                .overrides()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ADMIN_TIMEOUT,
        )
    }

    fn replica_moved(
        &self,
        topic: &str,
        partition: i32,
        old: &crate::topic::Partition,
        new: &crate::topic::Partition,
    ) {
        // Without a replica manager yet, it gives the new handle its role when it starts.
        if let Some(replicas) = self.replicas.lock().clone() {
            replicas.replica_moved(topic, partition, old, new);
        }
    }
}

#[cfg(test)]
mod tests;
