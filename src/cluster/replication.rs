//! The data plane of a cluster node: the replica manager and the follower fetchers.
//!
//! [`ReplicaManager`] is a [`MetadataListener`]: for every hosted partition whose role
//! changed in a new image it makes the [`Partition`] a leader (the log replicated at its
//! recorded high watermark, the epoch stamped, the followers' state fresh) or a follower
//! (appends refused, the partition handed to the fetcher of its leader, which first
//! truncates by leader epoch), and it loads or unloads the groups of each partition of
//! `__consumer_offsets` into the group coordinator with the partition's leadership. Its ISR thread proposes the ISR changes the
//! leaders' rules ask for (`AlterPartition`), every `replica.lag.time.max.ms / 2` at
//! most, a quarter second at least, without waiting for their outcome (it settles them
//! on its next rounds), so no partition's change waits for another's, with or without a
//! controller.
//!
//! A [`Fetcher`] is one thread per source node (Kafka's `num.replica.fetchers` = 1).
//! Each round it asks the leader for the end of its latest epoch for the partitions that
//! start following (OffsetForLeaderEpoch, Kafka's follower truncation rules, iterated
//! while the leader answers an older epoch), then sends one Fetch for every partition
//! it follows from that leader (v15: this node's id and broker epoch, which the leader
//! checks against its metadata, KIP-903; the current leader epoch, the local log end as
//! fetch offset; a leader that answers no v15 gets v11), appends the leader's batches
//! verbatim and takes `min(leader's high watermark, own log end)` as its high watermark. A response is
//! applied under the fetcher's lock and only if the partition is still followed at the
//! same epoch, and the replica manager removes a partition under that lock before it
//! changes its role: no batch of an old leader lands after a role change.
//!
//! KIP-73: the fetchers share this node's follower quota
//! (`follower.replication.throttled.rate`, see [`super::replication_quota`]): a
//! partition whose replica here is listed in its topic's
//! `follower.replication.throttled.replicas` and is not in the ISR asks at most one
//! second of the rate per fetch and is left out while the budget is spent.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use kafka_protocol::ResponseError;
use kafka_protocol::messages::fetch_request::ReplicaState;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::{
    ApiVersionsRequest, BrokerId, FetchRequest, OffsetForLeaderEpochRequest, TopicName,
};
use kafka_protocol::protocol::Request as _;
use kafka_protocol::protocol::StrBytes;
use parking_lot::{Condvar, Mutex};

use super::handle::NodeHandle;
use super::image::NO_LEADER;
use super::image::{FOLLOWER_THROTTLED_RATE, UNTHROTTLED};
use super::image::{LocalPartitionChange, LocalRole};
use super::listener::{MetadataListener, MetadataUpdate};
use super::records::{AlterPartition, TopicId};
use super::replication_quota::ReplicationQuota;
use crate::broker::{Broker, OFFSETS_TOPIC, WeakBroker};
use crate::client::Client;
use crate::error::Error;
use crate::replica::IsrProposalEnd;
use crate::topic::Partition;

/// Fetch version the fetchers send: v15 carries this node's broker epoch (KIP-903), the
/// leader's check that this process is the broker's current incarnation.
const FETCH_VERSION: i16 = 15;
/// Fetch version sent to a leader of an older version that answers no higher (no
/// broker epoch: such a leader checks none).
const FETCH_VERSION_OLD: i16 = 11;
/// OffsetForLeaderEpoch version the fetchers send.
const EPOCH_VERSION: i16 = 3;
/// How long a replica fetch waits on the leader for new data (Kafka
/// `replica.fetch.wait.max.ms`).
const FETCH_MAX_WAIT: Duration = Duration::from_millis(500);
/// Bytes per partition per fetch (Kafka `replica.fetch.max.bytes`).
const PARTITION_MAX_BYTES: i32 = 1 << 20;
/// Bytes per fetch response (Kafka `replica.fetch.response.max.bytes`).
const RESPONSE_MAX_BYTES: i32 = 10 << 20;
/// How long a call to the leader may take (Kafka `replica.socket.timeout.ms`).
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// Pause after an error the next metadata is expected to fix (Kafka
/// `replica.fetch.backoff.ms`).
const BACKOFF: Duration = Duration::from_millis(200);
/// How long an ISR change waits to be applied.
const ALTER_TIMEOUT: Duration = Duration::from_secs(5);

type Key = (String, i32);

/// An ISR change proposed and not settled yet.
struct IsrProposal {
    partition: Partition,
    leader_epoch: i32,
    /// The partition's id of the proposal.
    id: u64,
    proposal: super::shared::Proposal,
}

/// A partition this node leads.
struct Led {
    topic_id: TopicId,
    partition: Partition,
}

#[derive(Default)]
struct ManagerState {
    led: BTreeMap<Key, Led>,
    /// Followed partitions and the node they are fetched from.
    followed: BTreeMap<Key, i32>,
    fetchers: HashMap<i32, Arc<Fetcher>>,
    /// Fetchers told to stop and not joined yet (a call in flight to a hung leader may
    /// take its timeout: the metadata publisher does not wait for it).
    retired: Vec<Arc<Fetcher>>,
    /// The partitions of `__consumer_offsets` whose groups this node's coordinator has
    /// loaded (or is loading).
    coordinator: std::collections::BTreeSet<i32>,
}

/// Drives the replica role of every hosted partition from the metadata. See the module
/// documentation.
pub(crate) struct ReplicaManager {
    node_id: i32,
    broker: WeakBroker,
    node: Weak<NodeHandle>,
    lag_max: Duration,
    default_min_insync: i32,
    state: Mutex<ManagerState>,
    stop: Arc<(Mutex<bool>, Condvar)>,
    isr_thread: Mutex<Option<JoinHandle<()>>>,
    /// What tests steer the fetchers with.
    hooks: Arc<FetcherHooks>,
    /// This node's follower replication quota, shared by its fetchers (KIP-73).
    follower_quota: Arc<ReplicationQuota>,
    /// Loads and unloads the group coordinator off the metadata publisher thread.
    loader: CoordinatorLoader,
}

/// A job of the coordinator loader thread.
enum LoaderJob {
    /// Load the groups of this partition of `__consumer_offsets`, led here at
    /// `leader_epoch`.
    Load {
        partition: Partition,
        leader_epoch: i32,
    },
    /// Stop coordinating the groups of this partition of `__consumer_offsets`.
    Unload(i32),
}

/// How often a fetcher whose login or certificate the leader refuses logs it at warn.
const LOGIN_WARN_EVERY: Duration = Duration::from_secs(60);

/// The thread that loads the groups of a partition of `__consumer_offsets` into the
/// group coordinator when this node becomes its leader, and unloads them when it stops
/// leading it, in the order the metadata said so. Loading reads the partition's whole
/// log, which may take a while: the metadata publisher only queues the job, so
/// publication never waits for it. Until the load is done the partition's groups
/// answer NOT_COORDINATOR (clients retry), and a load whose leadership ended meanwhile
/// is undone.
struct CoordinatorLoader {
    jobs: Mutex<Option<crossbeam_channel::Sender<LoaderJob>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
    /// Tests: while set, every load waits (as on a large offsets log) until it is
    /// cleared, at most a minute.
    #[cfg(test)]
    hold: Arc<(Mutex<bool>, Condvar)>,
    /// Tests: this many loads fail (as on a read error) before they start.
    #[cfg(test)]
    fail: Arc<std::sync::atomic::AtomicUsize>,
}

impl CoordinatorLoader {
    fn new() -> CoordinatorLoader {
        CoordinatorLoader {
            jobs: Mutex::new(None),
            thread: Mutex::new(None),
            #[cfg(test)]
            hold: Arc::new((Mutex::new(false), Condvar::new())),
            #[cfg(test)]
            fail: Arc::new(std::sync::atomic::AtomicUsize::new(0)),
        }
    }

    fn start(&self, node_id: i32, broker: WeakBroker) -> crate::error::Result<()> {
        let (tx, rx) = crossbeam_channel::unbounded::<LoaderJob>();
        let thread = LoaderThread {
            node_id,
            broker,
            rx,
            #[cfg(test)]
            hold: self.hold.clone(),
            #[cfg(test)]
            fail: self.fail.clone(),
        };
        let h = std::thread::Builder::new()
            .name(format!("coordinator-loader-{node_id}"))
            .spawn(move || thread.run())
            .map_err(|e| Error::io("spawn", "the coordinator loader thread", e))?;
        *self.jobs.lock() = Some(tx);
        *self.thread.lock() = Some(h);
        Ok(())
    }

    fn send(&self, job: LoaderJob) {
        if let Some(tx) = self.jobs.lock().as_ref() {
            let _ = tx.send(job);
        }
    }

    /// Stops the thread once the jobs queued are done.
    fn stop(&self) {
        drop(self.jobs.lock().take());
        if let Some(h) = self.thread.lock().take() {
            let _ = h.join();
        }
    }
}

/// A failed coordinator load is tried again after this long, doubling up to
/// [`LOAD_RETRY_MAX`], for as long as the leadership it was for lasts.
const LOAD_RETRY_MIN: Duration = Duration::from_millis(500);
const LOAD_RETRY_MAX: Duration = Duration::from_secs(30);

/// A load that failed, tried again at `due`.
struct Retry {
    partition: Partition,
    leader_epoch: i32,
    due: Instant,
    delay: Duration,
}

/// The coordinator loader's thread: its jobs, in order.
struct LoaderThread {
    node_id: i32,
    broker: WeakBroker,
    rx: crossbeam_channel::Receiver<LoaderJob>,
    #[cfg(test)]
    hold: Arc<(Mutex<bool>, Condvar)>,
    #[cfg(test)]
    fail: Arc<std::sync::atomic::AtomicUsize>,
}

impl LoaderThread {
    /// Runs the jobs as they come; a failed load is retried with a backoff (while
    /// other jobs go on) until it succeeds, its leadership ends, or a newer job of its
    /// partition replaces it.
    fn run(self) {
        let mut retries: BTreeMap<i32, Retry> = BTreeMap::new();
        loop {
            let job = match retries.values().map(|r| r.due).min() {
                None => match self.rx.recv() {
                    Ok(job) => Some(job),
                    Err(_) => return,
                },
                Some(due) => match self.rx.recv_deadline(due) {
                    Ok(job) => Some(job),
                    Err(crossbeam_channel::RecvTimeoutError::Timeout) => None,
                    Err(crossbeam_channel::RecvTimeoutError::Disconnected) => return,
                },
            };
            let Some(broker) = self.broker.upgrade() else {
                return;
            };
            let coordinator = broker.group_coordinator();
            match job {
                Some(LoaderJob::Unload(index)) => {
                    retries.remove(&index);
                    coordinator.unload_partition(index);
                    tracing::info!(
                        node = self.node_id,
                        "group coordinator unloaded {OFFSETS_TOPIC}-{index}"
                    );
                }
                Some(LoaderJob::Load {
                    partition,
                    leader_epoch,
                }) => {
                    retries.remove(&partition.index());
                    if !self.load(coordinator, &partition, leader_epoch) {
                        retries.insert(
                            partition.index(),
                            Retry {
                                partition,
                                leader_epoch,
                                due: Instant::now() + LOAD_RETRY_MIN,
                                delay: LOAD_RETRY_MIN,
                            },
                        );
                    }
                }
                None => {}
            }
            let now = Instant::now();
            retries.retain(|_, r| {
                if r.due > now {
                    return true;
                }
                if self.load(coordinator, &r.partition, r.leader_epoch) {
                    return false;
                }
                r.delay = (r.delay * 2).min(LOAD_RETRY_MAX);
                r.due = Instant::now() + r.delay;
                true
            });
        }
    }

    /// Loads the groups of `partition` if it is still led here at `leader_epoch`, and
    /// undoes the load if the leadership ended while it ran. False if the load failed
    /// (to be retried).
    fn load(
        &self,
        coordinator: &crate::coordinator::GroupCoordinator,
        partition: &Partition,
        leader_epoch: i32,
    ) -> bool {
        if partition.leader_epoch() != Some(leader_epoch) {
            return true;
        }
        #[cfg(test)]
        self.hold_if_told();
        let index = partition.index();
        let started = Instant::now();
        let loaded = match self.load_once(coordinator, partition) {
            Ok(()) => {
                tracing::info!(node = self.node_id, leader_epoch, elapsed = ?started.elapsed(), "group coordinator loaded {OFFSETS_TOPIC}-{index}");
                true
            }
            Err(e) => {
                tracing::error!(node = self.node_id, error = %e, "cannot load the group coordinator of {OFFSETS_TOPIC}-{index}; retrying while this node leads it");
                false
            }
        };
        // The leadership ended while it loaded: an Unload is queued too, but nothing
        // may be answered meanwhile.
        if partition.leader_epoch() != Some(leader_epoch) {
            coordinator.unload_partition(index);
            return true;
        }
        loaded
    }

    fn load_once(
        &self,
        coordinator: &crate::coordinator::GroupCoordinator,
        partition: &Partition,
    ) -> crate::error::Result<()> {
        #[cfg(test)]
        if self
            .fail
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
            .is_ok()
        {
            return Err(Error::io(
                "read",
                format!("{OFFSETS_TOPIC}-{}", partition.index()),
                std::io::Error::other("injected by a test"),
            ));
        }
        coordinator.load_partition(partition.clone())
    }

    /// Tests: waits while loads are held, at most a minute.
    #[cfg(test)]
    fn hold_if_told(&self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut held = self.hold.0.lock();
        while *held && Instant::now() < deadline {
            self.hold.1.wait_until(&mut held, deadline);
        }
    }
}

impl ReplicaManager {
    /// A replica manager for `node` (not yet listening: register it as a listener, then
    /// call [`ReplicaManager::start`]); its follower quota counts into `follower_stats`.
    pub(crate) fn new(
        node_id: i32,
        broker: WeakBroker,
        follower_stats: Arc<crate::metrics::ThrottleStats>,
        node: Weak<NodeHandle>,
        lag_max: Duration,
        default_min_insync: i32,
    ) -> Arc<ReplicaManager> {
        Arc::new(ReplicaManager {
            node_id,
            broker,
            node,
            lag_max,
            default_min_insync,
            state: Mutex::new(ManagerState::default()),
            stop: Arc::new((Mutex::new(false), Condvar::new())),
            isr_thread: Mutex::new(None),
            hooks: Arc::new(FetcherHooks::default()),
            follower_quota: Arc::new(ReplicationQuota::new(follower_stats)),
            loader: CoordinatorLoader::new(),
        })
    }

    /// Tests: while `held`, every coordinator load waits before it reads the log, as a
    /// large offsets log would keep it busy (released by `false`, or after a minute).
    #[cfg(test)]
    pub(crate) fn hold_coordinator_loads(&self, held: bool) {
        *self.loader.hold.0.lock() = held;
        self.loader.hold.1.notify_all();
    }

    /// Tests: the next `n` coordinator loads fail before they read the log.
    #[cfg(test)]
    pub(crate) fn fail_coordinator_loads(&self, n: usize) {
        self.loader.fail.store(n, Ordering::Release);
    }

    /// Tests: while `held`, every truncation of a follower waits before it cuts (released
    /// by `false`, or after a minute); returns how many waited so far.
    #[cfg(test)]
    pub(crate) fn hold_truncations(&self, held: bool) -> usize {
        *self.hooks.hold_truncations.0.lock() = held;
        self.hooks.hold_truncations.1.notify_all();
        self.hooks.held.load(Ordering::Acquire)
    }

    /// Tests: stops (or resumes) every fetch of this node, as if its leaders were
    /// unreachable.
    #[cfg(test)]
    pub(crate) fn pause_fetchers(&self, paused: bool) {
        self.hooks.paused.store(paused, Ordering::Release);
        // A response being applied finishes first; later ones are dropped.
        for f in self.state.lock().fetchers.values() {
            drop(f.parts.lock());
        }
    }

    /// Starts the ISR thread and the coordinator loader.
    pub(crate) fn start(self: &Arc<Self>) -> crate::error::Result<()> {
        self.loader.start(self.node_id, self.broker.clone())?;
        let me = Arc::downgrade(self);
        let stop = self.stop.clone();
        let tick = (self.lag_max / 2).clamp(Duration::from_millis(50), Duration::from_millis(250));
        let h = std::thread::Builder::new()
            .name(format!("isr-{}", self.node_id))
            .spawn(move || {
                let mut in_flight = Vec::new();
                loop {
                    {
                        let mut stopped = stop.0.lock();
                        if *stopped {
                            return;
                        }
                        stop.1.wait_for(&mut stopped, tick);
                        if *stopped {
                            return;
                        }
                    }
                    let Some(m) = me.upgrade() else { return };
                    m.check_isr(&mut in_flight);
                }
            })
            .map_err(|e| Error::io("spawn", "the ISR thread", e))?;
        *self.isr_thread.lock() = Some(h);
        Ok(())
    }

    /// Stops the ISR thread and every fetcher.
    pub(crate) fn stop(&self) {
        let fetchers: Vec<Arc<Fetcher>> = {
            // Under the state lock: no publication adds a fetcher after this.
            let mut st = self.state.lock();
            {
                let mut s = self.stop.0.lock();
                *s = true;
                self.stop.1.notify_all();
            }
            let mut all: Vec<Arc<Fetcher>> = st.fetchers.drain().map(|(_, f)| f).collect();
            all.append(&mut st.retired);
            all
        };
        if let Some(h) = self.isr_thread.lock().take() {
            let _ = h.join();
        }
        for f in &fetchers {
            f.signal_stop();
        }
        for f in fetchers {
            f.stop();
        }
        self.loader.stop();
    }

    /// Settles the ISR changes proposed before (a refusal or a timeout lets the leader
    /// propose another), then proposes the changes the leaders' rules ask for now. It
    /// never waits for the controller: one partition's change cannot hold up another's,
    /// even with no controller at all.
    fn check_isr(&self, in_flight: &mut Vec<IsrProposal>) {
        in_flight.retain(|p| match p.proposal.poll() {
            None => true,
            Some(Ok(_)) => false,
            Some(Err(e)) => {
                tracing::warn!(node = self.node_id, partition = %p.partition.name(), error = %e, "ISR change not applied");
                // A timed-out record may still be committed: it keeps counting for the
                // high watermark until a committed change fences it.
                let end = if matches!(e, Error::Timeout(_)) {
                    IsrProposalEnd::TimedOut
                } else {
                    IsrProposalEnd::Refused
                };
                p.partition.isr_change_failed(p.leader_epoch, p.id, end);
                false
            }
        });
        let Some(node) = self.node.upgrade() else {
            return;
        };
        let led: Vec<(Key, TopicId, Partition)> = self
            .state
            .lock()
            .led
            .iter()
            .map(|(k, l)| (k.clone(), l.topic_id, l.partition.clone()))
            .collect();
        let now = Instant::now();
        let image = node.image();
        // The controller refuses to add a fenced broker: do not ask.
        let eligible = |b: i32| image.is_unfenced(b);
        for ((topic, p), topic_id, partition) in led {
            let Some(change) = partition.isr_change(now, eligible) else {
                continue;
            };
            let Some(broker_epoch) = node.broker_epoch() else {
                partition.isr_change_failed(
                    change.leader_epoch,
                    change.proposal,
                    IsrProposalEnd::Refused,
                );
                continue;
            };
            tracing::info!(node = self.node_id, partition = %partition.name(), isr = ?change.new_isr, "proposing an ISR change");
            let submitted = node.alter_partition(
                AlterPartition {
                    topic: topic.clone(),
                    topic_id,
                    partition: p,
                    broker_id: self.node_id,
                    broker_epoch,
                    leader_epoch: change.leader_epoch,
                    partition_epoch: change.partition_epoch,
                    new_isr: change.new_isr.clone(),
                },
                ALTER_TIMEOUT,
            );
            match submitted {
                Ok(proposal) => in_flight.push(IsrProposal {
                    partition,
                    leader_epoch: change.leader_epoch,
                    id: change.proposal,
                    proposal,
                }),
                Err(e) => {
                    tracing::warn!(node = self.node_id, partition = %partition.name(), error = %e, "ISR change not proposed");
                    partition.isr_change_failed(
                        change.leader_epoch,
                        change.proposal,
                        IsrProposalEnd::Refused,
                    );
                }
            }
        }
    }

    /// The fetcher of `source`, started if needed.
    fn fetcher(&self, st: &mut ManagerState, source: i32) -> Option<Arc<Fetcher>> {
        if let Some(f) = st.fetchers.get(&source) {
            return Some(f.clone());
        }
        let shared = (self.hooks.clone(), self.follower_quota.clone());
        match Fetcher::start(self.node_id, source, self.node.clone(), shared) {
            Ok(f) => {
                st.fetchers.insert(source, f.clone());
                Some(f)
            }
            Err(e) => {
                tracing::error!(node = self.node_id, source, error = %e, "cannot start a replica fetcher");
                None
            }
        }
    }

    /// Stops fetching `key` (waits for a response being applied to it).
    fn unfollow(&self, st: &mut ManagerState, key: &Key) {
        if let Some(source) = st.followed.remove(key)
            && let Some(f) = st.fetchers.get(&source)
        {
            f.remove(key);
            if f.is_empty() {
                let f = st.fetchers.remove(&source).expect("present");
                f.signal_stop();
                st.retired.retain(|r| !r.is_finished());
                st.retired.push(f);
            }
        }
    }

    fn min_insync(&self, update: &MetadataUpdate<'_>, topic: &str) -> i32 {
        update
            .current
            .topic(topic)
            .and_then(|t| t.configs.get("min.insync.replicas"))
            .and_then(|v| v.parse().ok())
            .unwrap_or(self.default_min_insync)
    }
}

impl MetadataListener for ReplicaManager {
    fn on_metadata(&self, update: &MetadataUpdate<'_>) {
        let Some(broker) = self.broker.upgrade() else {
            return;
        };
        let changes = update.local_changes();
        let mut st = self.state.lock();
        if *self.stop.0.lock() {
            return;
        }
        // Groups are placed by the count the topic has (fixed at its creation).
        if let Some(t) = update.current.topic(OFFSETS_TOPIC) {
            broker
                .group_coordinator()
                .set_partition_count(t.partitions.len() as i32);
        }
        let now = Instant::now();
        for (topic, _, p) in &changes.removed {
            self.remove_replica(&mut st, topic, *p);
        }
        for c in changes.changed {
            self.change_role(&mut st, &broker, update, c, now);
        }
        self.reset_stale_followers(&st, update);
        self.refresh_min_insync(&st, update);
    }

    /// The node follows no metadata any more: stops fetching and the ISR thread, and
    /// steps down from every partition it leads (appends are refused with
    /// `NotLeaderOrFollower`), since another leader may be elected without it knowing.
    fn on_node_failed(&self) {
        self.stop();
        let led = std::mem::take(&mut self.state.lock().led);
        for (_, l) in led {
            let hw = l.partition.high_watermark();
            l.partition.become_follower(NO_LEADER, hw);
        }
    }
}

impl ReplicaManager {
    /// Partition `partition` of `topic` is served from `new` now, its log moved into
    /// another log directory: `new` takes `old`'s role, and what led or followed `old`
    /// leads or follows `new` (a role the metadata gave `new` since is kept).
    pub(crate) fn replica_moved(
        &self,
        topic: &str,
        partition: i32,
        old: &Partition,
        new: &Partition,
    ) {
        let key = (topic.to_string(), partition);
        let mut st = self.state.lock();
        let fetcher = st
            .followed
            .get(&key)
            .and_then(|source| st.fetchers.get(source))
            .filter(|f| f.follows(&key, old))
            .cloned();
        let led = st.led.get_mut(&key).filter(|l| l.partition.is_same(old));
        if led.is_none() && fetcher.is_none() {
            return;
        }
        if let Err(e) = new.take_role_from(old) {
            tracing::error!(node = self.node_id, partition = %new.name(), error = %e, "cannot take the role of a replica moved between log directories");
            return;
        }
        if let Some(l) = led {
            l.partition = new.clone();
        }
        if let Some(f) = fetcher {
            f.replace(&key, old, new);
        }
    }

    /// This node no longer hosts `topic`'s `partition` (deleted, or reassigned to other
    /// replicas): stops following and leading it
    /// (and coordinating its groups, for a partition of `__consumer_offsets`).
    fn remove_replica(&self, st: &mut ManagerState, topic: &str, partition: i32) {
        let key = (topic.to_string(), partition);
        self.unfollow(st, &key);
        if let Some(l) = st.led.remove(&key) {
            // Reassigned away while leading: writes waiting for the in-sync replicas
            // end with NOT_LEADER_OR_FOLLOWER now rather than at their timeout.
            let hw = l.partition.high_watermark();
            l.partition.become_follower(NO_LEADER, hw);
        }
        if topic == OFFSETS_TOPIC && st.coordinator.remove(&partition) {
            self.loader.send(LoaderJob::Unload(partition));
        }
    }

    /// Gives a hosted partition the role the image says.
    fn change_role(
        &self,
        st: &mut ManagerState,
        broker: &Broker,
        update: &MetadataUpdate<'_>,
        c: LocalPartitionChange,
        now: Instant,
    ) {
        let key = (c.topic.clone(), c.partition);
        let Some(partition) = broker.hosted_partition(&c.topic, c.partition) else {
            tracing::error!(node = self.node_id, topic = %c.topic, partition = c.partition, "a hosted partition has no local log");
            return;
        };
        let initial_hw = broker
            .recorded_high_watermark(&c.topic, c.partition)
            .unwrap_or_else(|| partition.log_start_offset());
        match c.role {
            LocalRole::Leader {
                leader_epoch,
                partition_epoch,
                isr,
                replicas,
            } => {
                self.unfollow(st, &key);
                let min = self.min_insync(update, &c.topic);
                let was_leader = partition.leader_epoch() == Some(leader_epoch);
                if let Err(e) = partition.become_leader(
                    self.node_id,
                    leader_epoch,
                    partition_epoch,
                    replicas,
                    isr,
                    min,
                    self.lag_max,
                    initial_hw,
                    now,
                ) {
                    tracing::error!(node = self.node_id, partition = %partition.name(), error = %e, "cannot become the leader");
                    return;
                }
                self.led(st, key, c.topic_id, partition, leader_epoch, was_leader);
            }
            LocalRole::Follower {
                leader,
                leader_epoch,
                ..
            } => self.follow(st, key, partition, initial_hw, leader, leader_epoch),
        }
    }

    /// Records a partition this node now leads at `leader_epoch`, and (for a new
    /// leadership of a partition of `__consumer_offsets`) loads its groups into the
    /// group coordinator.
    fn led(
        &self,
        st: &mut ManagerState,
        key: Key,
        topic_id: TopicId,
        partition: Partition,
        leader_epoch: i32,
        was_leader: bool,
    ) {
        if !was_leader {
            tracing::info!(node = self.node_id, partition = %partition.name(), leader_epoch, "leader");
        }
        let offsets = key.0 == OFFSETS_TOPIC;
        let index = key.1;
        st.led.insert(
            key,
            Led {
                topic_id,
                partition: partition.clone(),
            },
        );
        if offsets && !was_leader {
            self.loader.send(LoaderJob::Load {
                partition,
                leader_epoch,
            });
            st.coordinator.insert(index);
        }
    }

    /// Makes a hosted partition a follower of `leader` (fetched from it unless there
    /// is none), unloading the groups of a partition of `__consumer_offsets`.
    fn follow(
        &self,
        st: &mut ManagerState,
        key: Key,
        partition: Partition,
        initial_hw: i64,
        leader: i32,
        leader_epoch: i32,
    ) {
        st.led.remove(&key);
        if key.0 == OFFSETS_TOPIC && st.coordinator.remove(&key.1) {
            self.loader.send(LoaderJob::Unload(key.1));
        }
        self.unfollow(st, &key);
        partition.become_follower(leader, initial_hw);
        tracing::info!(node = self.node_id, partition = %partition.name(), leader, leader_epoch, "follower");
        if leader != NO_LEADER
            && let Some(f) = self.fetcher(st, leader)
        {
            f.add(key.clone(), partition, leader_epoch);
            st.followed.insert(key, leader);
        }
    }

    /// A broker fenced or registered anew: what its fetches said may no longer hold
    /// (a restarted node truncates before it fetches again).
    fn reset_stale_followers(&self, st: &ManagerState, update: &MetadataUpdate<'_>) {
        let stale: Vec<i32> = update
            .current
            .brokers
            .values()
            .filter(|b| {
                b.fenced
                    && update
                        .previous
                        .brokers
                        .get(&b.id)
                        .is_none_or(|p| !p.fenced || p.epoch != b.epoch)
            })
            .map(|b| b.id)
            .collect();
        if !stale.is_empty() {
            for led in st.led.values() {
                led.partition.reset_followers(&stale);
            }
        }
    }

    /// A led topic's min.insync.replicas may have changed.
    fn refresh_min_insync(&self, st: &ManagerState, update: &MetadataUpdate<'_>) {
        for ((topic, _), led) in &st.led {
            let changed = update
                .previous
                .topics
                .get(topic)
                .zip(update.current.topics.get(topic))
                .is_none_or(|(a, b)| !Arc::ptr_eq(a, b));
            if changed {
                led.partition
                    .set_min_insync_replicas(self.min_insync(update, topic));
            }
        }
    }
}

/// One followed partition, as its fetcher sees it.
#[derive(Clone)]
struct Followed {
    partition: Partition,
    leader_epoch: i32,
    /// Truncation by leader epoch is still to be done.
    truncating: bool,
    /// Fetch from here rather than the log end (the leader's log start, when this log
    /// ends below it).
    fetch_from: Option<i64>,
    /// No request for it before then.
    delay_until: Option<Instant>,
    /// Held while its log is cut outside the fetcher's lock; removing the partition
    /// waits for it (see [`Fetcher::cut`]).
    cutting: Arc<Mutex<()>>,
}

impl Followed {
    fn fetch_offset(&self) -> i64 {
        self.fetch_from
            .unwrap_or_else(|| self.partition.log_end_offset())
    }
}

/// The fetcher thread of one source node. See the module documentation.
pub(crate) struct Fetcher {
    node_id: i32,
    source: i32,
    node: Weak<NodeHandle>,
    parts: Mutex<BTreeMap<Key, Followed>>,
    changed: Condvar,
    stopped: AtomicBool,
    thread: Mutex<Option<JoinHandle<()>>>,
    /// See [`ReplicaManager::pause_fetchers`].
    hooks: Arc<FetcherHooks>,
    /// This node's follower replication quota.
    quota: Arc<ReplicationQuota>,
}

/// What tests steer the fetchers with (outside tests, `paused` stays false).
#[derive(Default)]
struct FetcherHooks {
    /// While set, the fetchers send nothing (a follower cut off from leaders).
    paused: AtomicBool,
    /// While set, every truncation waits before it cuts (at most a minute), as a slow
    /// disk would.
    #[cfg(test)]
    hold_truncations: (Mutex<bool>, Condvar),
    /// Truncations that waited on `hold_truncations`.
    #[cfg(test)]
    held: std::sync::atomic::AtomicUsize,
}

impl FetcherHooks {
    /// Tests: waits while truncations are held.
    #[cfg(test)]
    fn hold_truncation(&self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut held = self.hold_truncations.0.lock();
        if *held {
            self.held.fetch_add(1, Ordering::AcqRel);
        }
        while *held && Instant::now() < deadline {
            self.hold_truncations.1.wait_until(&mut held, deadline);
        }
    }
}

impl Fetcher {
    fn start(
        node_id: i32,
        source: i32,
        node: Weak<NodeHandle>,
        (hooks, quota): (Arc<FetcherHooks>, Arc<ReplicationQuota>),
    ) -> crate::error::Result<Arc<Fetcher>> {
        let f = Arc::new(Fetcher {
            node_id,
            source,
            node,
            hooks,
            quota,
            parts: Mutex::new(BTreeMap::new()),
            changed: Condvar::new(),
            stopped: AtomicBool::new(false),
            thread: Mutex::new(None),
        });
        let me = f.clone();
        let h = std::thread::Builder::new()
            .name(format!("replica-fetcher-{node_id}-from-{source}"))
            .spawn(move || me.run())
            .map_err(|e| Error::io("spawn", "a replica fetcher thread", e))?;
        *f.thread.lock() = Some(h);
        Ok(f)
    }

    fn add(&self, key: Key, partition: Partition, leader_epoch: i32) {
        self.parts.lock().insert(
            key,
            Followed {
                partition,
                leader_epoch,
                truncating: true,
                fetch_from: None,
                delay_until: None,
                cutting: Arc::new(Mutex::new(())),
            },
        );
        self.changed.notify_all();
    }

    /// True if `key` is fetched into `partition` (this very handle).
    fn follows(&self, key: &Key, partition: &Partition) -> bool {
        self.parts
            .lock()
            .get(key)
            .is_some_and(|f| f.partition.is_same(partition))
    }

    /// Fetches `key` into `new` instead of `old` (its log moved into another log
    /// directory), checking its truncation again as after a new leader epoch.
    fn replace(&self, key: &Key, old: &Partition, new: &Partition) {
        let mut parts = self.parts.lock();
        if let Some(f) = parts.get_mut(key).filter(|f| f.partition.is_same(old)) {
            f.partition = new.clone();
            f.truncating = true;
            f.fetch_from = None;
        }
        drop(parts);
        self.changed.notify_all();
    }

    /// Stops fetching `key`; waits for a truncation of it under way (only that one).
    fn remove(&self, key: &Key) {
        let removed = self.parts.lock().remove(key);
        if let Some(f) = removed {
            drop(f.cutting.lock());
        }
    }

    fn is_empty(&self) -> bool {
        self.parts.lock().is_empty()
    }

    /// Tells the thread to stop, without waiting for it.
    fn signal_stop(&self) {
        self.stopped.store(true, Ordering::Release);
        let _g = self.parts.lock();
        self.changed.notify_all();
    }

    /// True once the thread has exited.
    fn is_finished(&self) -> bool {
        self.thread.lock().as_ref().is_none_or(|h| h.is_finished())
    }

    /// Stops the thread and waits for it.
    fn stop(&self) {
        self.signal_stop();
        if let Some(h) = self.thread.lock().take()
            && h.thread().id() != std::thread::current().id()
        {
            let _ = h.join();
        }
    }

    fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::Acquire)
    }

    /// Sleeps up to `d` (woken by a change or a stop).
    fn pause(&self, d: Duration) {
        let mut g = self.parts.lock();
        if !self.is_stopped() {
            self.changed.wait_for(&mut g, d);
        }
    }

    fn run(self: Arc<Self>) {
        let mut client: Option<Client> = None;
        // The Fetch version the leader answers, asked once per connection.
        let mut version: Option<i16> = None;
        // When a refused login was last logged at warn: once a minute at most.
        let mut login_warned: Option<Instant> = None;
        while !self.is_stopped() {
            if self.hooks.paused.load(Ordering::Acquire) {
                self.pause(Duration::from_millis(20));
                continue;
            }
            let now = Instant::now();
            let ready: Vec<(Key, Followed)> = {
                let mut g = self.parts.lock();
                if g.is_empty() {
                    self.changed.wait_for(&mut g, Duration::from_secs(1));
                    continue;
                }
                g.iter()
                    .filter(|(_, f)| f.delay_until.is_none_or(|d| d <= now))
                    .map(|(k, f)| (k.clone(), f.clone()))
                    .collect()
            };
            if ready.is_empty() {
                self.pause(Duration::from_millis(50));
                continue;
            }
            let Some(node) = self.node.upgrade() else {
                return;
            };
            let addr = node
                .image()
                .brokers
                .get(&self.source)
                .filter(|b| !b.fenced)
                .map(|b| b.replication_listener.clone().unwrap_or(b.listener.clone()));
            let security = node.config().replication_security.clone();
            drop(node);
            let Some(addr) = addr else {
                self.pause(BACKOFF);
                continue;
            };
            if client.as_ref().is_none_or(|c| c.addr() != addr) {
                version = None;
                client = Some(
                    Client::new(addr, format!("tidelog-replica-fetcher-{}", self.node_id))
                        .with_security(security),
                );
            }
            let c = client.as_mut().expect("set above");
            let truncating: Vec<(Key, Followed)> = ready
                .iter()
                .filter(|(_, f)| f.truncating)
                .cloned()
                .collect();
            let result = if truncating.is_empty() {
                let v = match version {
                    Some(v) => Ok(v),
                    None => fetch_version(c),
                };
                v.and_then(|v| {
                    version = Some(v);
                    self.fetch(c, &ready, v)
                })
            } else {
                self.truncate(c, &truncating)
            };
            if let Err(e) = result {
                if !self.is_stopped() {
                    let hint = match &e {
                        Error::AuthenticationFailed { .. } => Some(
                            "replica fetcher cannot log in to the leader (check --inter-broker-sasl-* and TIDELOG_INTER_BROKER_SASL_PASSWORD); replication from it is stalled",
                        ),
                        e if crate::client::security::is_tls_failure(e) => Some(
                            "replica fetcher's TLS connection to the leader failed (check --inter-broker-ssl-ca-location, and the client certificate, --inter-broker-ssl-certificate-location or else --tls-cert, against the leader's --tls-client-ca); replication from it is stalled",
                        ),
                        _ => None,
                    };
                    let warn_now = hint.is_some()
                        && login_warned.is_none_or(|t| t.elapsed() >= LOGIN_WARN_EVERY);
                    if let (true, Some(hint)) = (warn_now, hint) {
                        // A wrong inter-broker login or certificate stalls replication:
                        // say so where an operator looks.
                        login_warned = Some(Instant::now());
                        tracing::warn!(node = self.node_id, source = self.source, error = %e, "{hint}");
                    } else {
                        tracing::debug!(node = self.node_id, source = self.source, error = %e, "replica fetch failed");
                    }
                }
                c.disconnect();
                version = None;
                self.pause(BACKOFF);
            }
        }
    }

    /// Runs `work` (a truncation) on the followed partition `key` if it is still
    /// followed at `epoch`, holding only that partition's `cutting` lock, not the
    /// fetcher's: the metadata publisher adds and removes other partitions meanwhile.
    /// The lock is taken under the fetcher's, and [`Fetcher::remove`] takes it after
    /// removing the partition, so once a partition is removed no cut of it is under way
    /// or will start (its log is never cut after its role changed). `None` if it is no
    /// longer followed at `epoch`.
    fn cut(
        &self,
        key: &Key,
        epoch: i32,
        work: impl FnOnce(&Partition) -> crate::error::Result<Option<bool>>,
    ) -> Option<crate::error::Result<Option<bool>>> {
        let g = self.parts.lock();
        let entry = g.get(key).filter(|e| e.leader_epoch == epoch)?;
        let (cutting, partition) = (entry.cutting.clone(), entry.partition.clone());
        let _cutting = cutting.lock();
        drop(g);
        Some(work(&partition))
    }

    /// Records what [`Fetcher::cut`] did: `Some(true)` completes the truncation,
    /// `Some(false)` asks again, `None` (refused by the leader) and an error back off.
    fn after_cut(&self, key: &Key, f: &Followed, cut: Option<crate::error::Result<Option<bool>>>) {
        let delay = match cut {
            None | Some(Ok(Some(false))) => return,
            Some(Ok(Some(true))) => {
                self.with_current(key, f.leader_epoch, |e| e.truncating = false);
                return;
            }
            Some(Ok(None)) => BACKOFF,
            Some(Err(e)) => {
                tracing::error!(node = self.node_id, partition = %f.partition.name(), error = %e, "truncation failed");
                Duration::from_secs(1)
            }
        };
        self.with_current(key, f.leader_epoch, |e| {
            e.delay_until = Some(Instant::now() + delay);
        });
    }

    /// Applies `f` to the followed partition `key` if it is still followed at `epoch`.
    fn with_current<T>(
        &self,
        key: &Key,
        epoch: i32,
        f: impl FnOnce(&mut Followed) -> T,
    ) -> Option<T> {
        let mut g = self.parts.lock();
        let entry = g.get_mut(key).filter(|e| e.leader_epoch == epoch)?;
        Some(f(entry))
    }

    /// KIP-101/279: asks the leader where its log ends for this log's latest epoch and
    /// truncates to where the two diverge.
    fn truncate(&self, client: &mut Client, parts: &[(Key, Followed)]) -> crate::error::Result<()> {
        let mut topics: BTreeMap<&str, Vec<OffsetForLeaderPartition>> = BTreeMap::new();
        let mut asked = Vec::new();
        for (key, f) in parts {
            let log = f.partition.log();
            let latest = log.latest_epoch()?;
            match latest {
                Some(epoch) if epoch >= 0 => {
                    topics.entry(key.0.as_str()).or_default().push(
                        OffsetForLeaderPartition::default()
                            .with_partition(key.1)
                            .with_current_leader_epoch(f.leader_epoch)
                            .with_leader_epoch(epoch),
                    );
                    asked.push((key, f));
                }
                _ => {
                    // No epoch in the log: an empty log has nothing to cut; a log of
                    // batches without epochs falls back to the high watermark (Kafka's
                    // rule before KIP-101).
                    let cut = self.cut(key, f.leader_epoch, |p| {
                        let log = p.log();
                        let hw = log.high_watermark();
                        if log.log_end_offset() > hw {
                            log.truncate_to(hw)?;
                        }
                        Ok(Some(true))
                    });
                    self.after_cut(key, f, cut);
                }
            }
        }
        if asked.is_empty() {
            return Ok(());
        }
        let request = OffsetForLeaderEpochRequest::default()
            .with_replica_id(BrokerId(self.node_id))
            .with_topics(
                topics
                    .into_iter()
                    .map(|(t, ps)| {
                        OffsetForLeaderTopic::default()
                            .with_topic(TopicName(StrBytes::from_string(t.to_string())))
                            .with_partitions(ps)
                    })
                    .collect(),
            );
        let response = client.call(&request, EPOCH_VERSION, CALL_TIMEOUT)?;
        for t in response.topics {
            for r in t.partitions {
                let key = (t.topic.0.to_string(), r.partition);
                let Some((_, f)) = asked.iter().find(|(k, _)| **k == key) else {
                    continue;
                };
                let cut = self.cut(&key, f.leader_epoch, |p| {
                    if r.error_code != 0 {
                        tracing::debug!(node = self.node_id, partition = %p.name(), code = r.error_code, "OffsetForLeaderEpoch refused; waiting for metadata");
                        return Ok(None);
                    }
                    #[cfg(test)]
                    self.hooks.hold_truncation();
                    let log = p.log();
                    let (target, complete) = truncation_point(
                        |epoch| log.end_offset_for_epoch(epoch),
                        log.log_start_offset(),
                        log.log_end_offset(),
                        log.high_watermark(),
                        r.leader_epoch,
                        r.end_offset,
                    )?;
                    if target < log.log_end_offset() {
                        if target < log.high_watermark() {
                            // Only an unclean history gets here (the high watermark was
                            // computed over ISR members, and the leader was one): the
                            // leader's log is the one the cluster keeps.
                            tracing::warn!(node = self.node_id, partition = %p.name(), target, hw = log.high_watermark(), "truncating below the high watermark as the leader's log requires");
                        }
                        let end = log.truncate_to(target)?;
                        tracing::info!(node = self.node_id, partition = %p.name(), leader_epoch = r.leader_epoch, end, "truncated to the leader's log");
                    }
                    Ok(Some(complete))
                });
                self.after_cut(&key, f, cut);
            }
        }
        Ok(())
    }

    /// One Fetch (of `version`) for every ready partition, applied.
    fn fetch(
        &self,
        client: &mut Client,
        parts: &[(Key, Followed)],
        version: i16,
    ) -> crate::error::Result<()> {
        let Some(node) = self.node.upgrade() else {
            return Ok(());
        };
        // KIP-903: the broker epoch of this process's registration.
        let Some(broker_epoch) = node.broker_epoch() else {
            return Err(Error::NotLeaderOrFollower {
                partition: format!("fetch from node {}", self.source),
                reason: "this node's registration is not published yet".into(),
            });
        };
        let image = node.image();
        drop(node);
        // KIP-73: this node's follower rate, measured over its throttled replicas that
        // are not in sync; once it is spent they are left out of the fetch.
        let rate = image
            .broker_configs
            .rate(self.node_id, FOLLOWER_THROTTLED_RATE);
        let now = Instant::now();
        let over = self.quota.is_exceeded(rate, now);
        let mut topics: BTreeMap<&str, Vec<FetchPartition>> = BTreeMap::new();
        let mut sent: HashMap<Key, (i32, i64, bool)> = HashMap::new();
        for (key, f) in parts {
            let throttled = rate != UNTHROTTLED
                && f.partition
                    .config()
                    .follower_throttled_replicas
                    .contains(key.1, self.node_id)
                && image.topic(&key.0).is_none_or(|t| {
                    t.partitions
                        .get(key.1 as usize)
                        .is_none_or(|p| !p.isr.contains(&self.node_id))
                });
            if throttled && over {
                continue;
            }
            let max_bytes = if throttled {
                ReplicationQuota::partition_max_bytes(rate, PARTITION_MAX_BYTES)
            } else {
                PARTITION_MAX_BYTES
            };
            let offset = f.fetch_offset();
            topics.entry(key.0.as_str()).or_default().push(
                FetchPartition::default()
                    .with_partition(key.1)
                    .with_current_leader_epoch(f.leader_epoch)
                    .with_fetch_offset(offset)
                    .with_log_start_offset(f.partition.log_start_offset())
                    .with_partition_max_bytes(max_bytes),
            );
            sent.insert(key.clone(), (f.leader_epoch, offset, throttled));
        }
        if topics.is_empty() {
            // Every ready partition is throttled and the budget is spent.
            self.pause(
                self.quota
                    .wait(rate, now)
                    .clamp(BACKOFF / 4, FETCH_MAX_WAIT),
            );
            return Ok(());
        }
        // From v13 topics go by id, and come back by id.
        let mut names: HashMap<uuid::Uuid, String> = HashMap::new();
        let mut request = FetchRequest::default()
            .with_max_wait_ms(FETCH_MAX_WAIT.as_millis() as i32)
            .with_min_bytes(1)
            .with_max_bytes(RESPONSE_MAX_BYTES)
            .with_isolation_level(0)
            .with_session_id(0)
            .with_session_epoch(-1)
            .with_topics(
                topics
                    .into_iter()
                    .filter_map(|(t, ps)| {
                        let topic = FetchTopic::default().with_partitions(ps);
                        if version < 13 {
                            let name = TopicName(StrBytes::from_string(t.to_string()));
                            return Some(topic.with_topic(name));
                        }
                        let id = uuid::Uuid::from_bytes(image.topic(t)?.id);
                        names.insert(id, t.to_string());
                        Some(topic.with_topic_id(id))
                    })
                    .collect(),
            );
        if version >= 15 {
            request = request.with_replica_state(
                ReplicaState::default()
                    .with_replica_id(BrokerId(self.node_id))
                    .with_replica_epoch(broker_epoch),
            );
        } else {
            request = request.with_replica_id(BrokerId(self.node_id));
        }
        let response = client.call(&request, version, CALL_TIMEOUT)?;
        if response.error_code != 0 {
            return Err(Error::NotLeaderOrFollower {
                partition: format!("fetch from node {}", self.source),
                reason: format!("the leader answered error code {}", response.error_code),
            });
        }
        let mut durable = Vec::new();
        for t in response.responses {
            let topic = match names.get(&t.topic_id) {
                Some(name) if version >= 13 => name.clone(),
                _ => t.topic.0.to_string(),
            };
            for p in t.partitions {
                let key = (topic.clone(), p.partition_index);
                let Some(&(epoch, offset, throttled)) = sent.get(&key) else {
                    continue;
                };
                if throttled {
                    let bytes = p.records.as_ref().map_or(0, |r| r.len());
                    self.quota.record(rate, bytes, Instant::now());
                }
                let applied = self.with_current(&key, epoch, |e| {
                    if e.truncating
                        || e.fetch_offset() != offset
                        || self.hooks.paused.load(Ordering::Acquire)
                    {
                        return Ok::<_, Error>(None);
                    }
                    apply_fetched(self.node_id, e, offset, &p)?;
                    Ok(e.partition
                        .config()
                        .durable_acks
                        .then(|| e.partition.clone()))
                });
                match applied {
                    Some(Err(err)) => {
                        tracing::error!(node = self.node_id, topic = %key.0, partition = key.1, error = %err, "cannot apply the leader's batches");
                        self.with_current(&key, epoch, |e| {
                            e.delay_until = Some(Instant::now() + Duration::from_secs(1));
                        });
                    }
                    Some(Ok(Some(partition))) => durable.push(partition),
                    _ => {}
                }
            }
        }
        // Durable acks: what was appended is fsynced (group commit, outside the
        // fetcher's lock) before the next fetch reports this log end to the leader.
        for partition in durable {
            partition.log().sync_to(partition.log_end_offset())?;
        }
        Ok(())
    }
}

/// The Fetch version to send to the leader `client` reaches: [`FETCH_VERSION`], or
/// [`FETCH_VERSION_OLD`] for a leader of an older version that answers no higher.
fn fetch_version(client: &mut Client) -> crate::error::Result<i16> {
    let versions = client.call(&ApiVersionsRequest::default(), 0, CALL_TIMEOUT)?;
    let max = versions
        .api_keys
        .iter()
        .find(|k| k.api_key == FetchRequest::KEY)
        .map_or(-1, |k| k.max_version);
    if max >= FETCH_VERSION {
        Ok(FETCH_VERSION)
    } else if max >= FETCH_VERSION_OLD {
        Ok(FETCH_VERSION_OLD)
    } else {
        Err(Error::NotLeaderOrFollower {
            partition: format!("fetch from {}", client.addr()),
            reason: format!("the leader answers Fetch up to v{max}, below v{FETCH_VERSION_OLD}"),
        })
    }
}

/// Applies one partition of a fetch response (sent at `offset`) to a followed
/// partition. Called under the fetcher's lock.
fn apply_fetched(
    node_id: i32,
    e: &mut Followed,
    offset: i64,
    p: &kafka_protocol::messages::fetch_response::PartitionData,
) -> crate::error::Result<()> {
    let log = e.partition.log();
    let code = p.error_code;
    if code == 0 {
        if let Some(records) = p.records.as_ref().filter(|r| !r.is_empty()) {
            log.append_replica(records)?;
            e.fetch_from = None;
        }
        let end = log.log_end_offset();
        log.set_high_watermark(p.high_watermark.min(end));
        // Follow the leader's log start (retention, DeleteRecords) once it is committed
        // here.
        if p.log_start_offset > log.log_start_offset() && p.log_start_offset <= log.high_watermark()
        {
            log.delete_records_before(p.log_start_offset)?;
        }
        return Ok(());
    }
    if code == ResponseError::OffsetOutOfRange.code() {
        if offset < p.log_start_offset {
            // Behind the leader's log start: nothing here is of use; start over at the
            // leader's log start (Kafka's truncateFullyAndStartAt; the gap below it is
            // kept as a compacted log's is, and the log start follows once committed).
            let start = log.log_start_offset();
            if log.log_end_offset() > start {
                log.truncate_to(start)?;
            }
            e.fetch_from = Some(p.log_start_offset);
            tracing::info!(node = node_id, partition = %e.partition.name(), from = p.log_start_offset, "behind the leader's log start: fetching from there");
        } else {
            // Past the leader's log end: diverged; truncate by epoch first.
            e.truncating = true;
        }
        return Ok(());
    }
    let retriable = [
        ResponseError::NotLeaderOrFollower.code(),
        ResponseError::FencedLeaderEpoch.code(),
        ResponseError::UnknownLeaderEpoch.code(),
        ResponseError::UnknownTopicOrPartition.code(),
        ResponseError::LeaderNotAvailable.code(),
    ];
    if retriable.contains(&code) {
        tracing::debug!(node = node_id, partition = %e.partition.name(), code, "the leader refused a fetch; waiting for metadata");
        e.delay_until = Some(Instant::now() + BACKOFF);
    } else {
        tracing::warn!(node = node_id, partition = %e.partition.name(), code, "replica fetch failed");
        e.delay_until = Some(Instant::now() + Duration::from_secs(1));
    }
    Ok(())
}

/// Kafka's follower truncation rule (`AbstractFetcherThread.getOffsetTruncationState`):
/// given the leader's answer `(leader_epoch, leader_end)` for this log's latest epoch,
/// where to truncate and whether that completes the truncation (false: the leader
/// answered an epoch this log does not have; truncate to the end of this log's largest
/// epoch below it and ask again with the new latest epoch).
///
/// A point below this log's start (`log_start`: retention or DeleteRecords moved it past
/// where the logs diverge) is the log start, and completes the truncation: everything
/// this log holds diverged (Kafka's `truncateFullyAndStartAt`; the records below are
/// fetched from the leader no more than a compacted log's gap would be).
fn truncation_point(
    end_offset_for_epoch: impl Fn(i32) -> crate::error::Result<(i32, i64)>,
    log_start: i64,
    log_end: i64,
    high_watermark: i64,
    leader_epoch: i32,
    leader_end: i64,
) -> crate::error::Result<(i64, bool)> {
    let (target, complete) = divergence_point(
        end_offset_for_epoch,
        log_end,
        high_watermark,
        leader_epoch,
        leader_end,
    )?;
    Ok(if target < log_start {
        (log_start, true)
    } else {
        (target, complete)
    })
}

/// [`truncation_point`] before the log start is considered.
fn divergence_point(
    end_offset_for_epoch: impl Fn(i32) -> crate::error::Result<(i32, i64)>,
    log_end: i64,
    high_watermark: i64,
    leader_epoch: i32,
    leader_end: i64,
) -> crate::error::Result<(i64, bool)> {
    if leader_epoch < 0 || leader_end < 0 {
        // The leader has no epoch at or below ours: Kafka falls back to the high
        // watermark.
        return Ok((high_watermark.min(log_end), true));
    }
    let (epoch, end) = end_offset_for_epoch(leader_epoch)?;
    if epoch < 0 || end < 0 {
        return Ok((leader_end.min(log_end), true));
    }
    if epoch != leader_epoch {
        return Ok((end.min(log_end), false));
    }
    Ok((end.min(leader_end).min(log_end), true))
}

#[cfg(test)]
mod tests {
    use super::truncation_point;

    /// A follower's epochs: (epoch, start offset); its log ends at 100.
    fn follower(epoch: i32) -> crate::error::Result<(i32, i64)> {
        let entries = [(1, 0), (3, 40), (4, 70)];
        let end = 100;
        let mut found = None;
        for (i, (e, _)) in entries.iter().enumerate() {
            if *e <= epoch {
                found = Some(i);
            }
        }
        Ok(match found {
            None => (epoch, 0),
            Some(i) => (entries[i].0, entries.get(i + 1).map_or(end, |(_, s)| *s)),
        })
    }

    #[test]
    fn truncation_follows_kafkas_rules() {
        // The leader has epoch 4 too, ending at 90: cut to 90.
        assert_eq!(
            truncation_point(follower, 0, 100, 50, 4, 90).unwrap(),
            (90, true)
        );
        // The leader knows our epoch 4 but ends later: nothing to cut.
        assert_eq!(
            truncation_point(follower, 0, 100, 50, 4, 120).unwrap(),
            (100, true)
        );
        // The leader answers epoch 2, which we never had: cut to the end of our largest
        // epoch below it (1 ends at 40) and ask again.
        assert_eq!(
            truncation_point(follower, 0, 100, 50, 2, 55).unwrap(),
            (40, false)
        );
        // The leader has no epoch: the high watermark.
        assert_eq!(
            truncation_point(follower, 0, 100, 50, -1, -1).unwrap(),
            (50, true)
        );
        // Our answer for 3 is its own end (70): min with the leader's 60.
        assert_eq!(
            truncation_point(follower, 0, 100, 50, 3, 60).unwrap(),
            (60, true)
        );
    }

    #[test]
    fn a_point_below_the_log_start_is_the_log_start_and_completes_the_truncation() {
        // Our log starts at 80 (retention); the leader ends our epoch 4 at 75: all we
        // hold diverged. Truncating to 75 would be refused (below the log start), and
        // retried forever.
        assert_eq!(
            truncation_point(follower, 80, 100, 90, 4, 75).unwrap(),
            (80, true)
        );
        // Asking again would not help either: an epoch we never had, below the start.
        assert_eq!(
            truncation_point(follower, 80, 100, 90, 2, 55).unwrap(),
            (80, true)
        );
        // At or above the start, the rules as before.
        assert_eq!(
            truncation_point(follower, 80, 100, 90, 4, 85).unwrap(),
            (85, true)
        );
    }
}
