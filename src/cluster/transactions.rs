//! Transactions on a cluster: `__transaction_state` made through the controller on
//! first use, the transaction coordinator of each of its partitions loaded where the
//! partition is led (at its leader epoch as the coordinator epoch) and unloaded where it
//! no longer is, markers sent to remote leaders with WriteTxnMarkers, and a partition
//! leader's KIP-890 check of a transactional batch against a coordinator elsewhere
//! (AddPartitionsToTxn v4, `verify_only`).
//!
//! [`TxnLoader`] is a [`MetadataListener`] registered after the replica manager, so a
//! partition's role is set before its coordinator is loaded. Loading replays the
//! partition's log, which may take a while: the publisher only queues the job for the
//! loader thread. Until the load is done the ids of the partition answer
//! COORDINATOR_LOAD_IN_PROGRESS; a load that fails is retried by the coordinator's
//! timer (the partition answers COORDINATOR_LOAD_IN_PROGRESS meanwhile); a load whose
//! leadership ended meanwhile is undone. Unloading is immediate, on the publisher
//! thread: from then on the partition's ids answer NOT_COORDINATOR.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use kafka_protocol::ResponseError;
use kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, ProducerId, TopicName, TransactionalId, WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
};
use kafka_protocol::protocol::StrBytes;
use parking_lot::Mutex;

use super::ClusterNode;
use super::handle::NodeHandle;
use super::image::{LocalRole, MetadataImage, NO_LEADER, TRANSACTION_STATE_TOPIC};
use super::listener::{MetadataListener, MetadataUpdate};
use super::records::{CreateTopic, MetadataRecord};
use super::txn_markers_wire::{MarkersRequest, TRANSACTION_VERSION_SINCE};
use crate::broker::{Broker, WeakBroker};
use crate::client::Client;
use crate::error::{
    AdminError, Error, ErrorCode, Resource, Result, TopicPartition as AdminPartition, TxnError,
};
use crate::storage::codec;
use crate::topic::Partition;
use crate::transaction::{
    MarkerWriter, MarkersDone, ProducerIdAndEpoch, TopicPartition, TxnMarkers, TxnResult,
    TxnStateLog,
};

/// WriteTxnMarkers version the coordinators send when no marker of the request has a
/// transaction version, or the leader does not answer a newer one (every tidelog node
/// answers 1; those of a transaction version 2 go in version 2,
/// [`TRANSACTION_VERSION_SINCE`], to a leader that advertises it).
const MARKERS_VERSION: i16 = 1;
/// AddPartitionsToTxn version of a partition leader's verification (KIP-890).
const VERIFY_VERSION: i16 = 5;
/// How long a call to another broker may take (markers wait for the in-sync replicas).
const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// How long making `__transaction_state` waits for the metadata to apply it.
const CREATE_TIMEOUT: Duration = Duration::from_secs(10);

/// Idle connections to other brokers by address, for the coordinators' markers and
/// the leaders' verifications: a call takes one (or connects), and gives it back when
/// it succeeded, so concurrent calls to one broker each have their own and a login is
/// not paid per call.
pub(crate) struct ClientPool {
    client_id: String,
    /// New connections ask the broker for its ApiVersions (for
    /// [`ClientPool::call_negotiated`]).
    negotiate: bool,
    idle: Mutex<HashMap<String, Vec<Client>>>,
}

/// Idle connections kept per broker.
const IDLE_PER_BROKER: usize = 4;

impl ClientPool {
    pub(crate) fn new(client_id: String) -> ClientPool {
        ClientPool {
            client_id,
            negotiate: false,
            idle: Mutex::new(HashMap::new()),
        }
    }

    /// A pool whose connections first ask the broker which versions it answers, so
    /// that [`ClientPool::call_negotiated`] can pick them.
    pub(crate) fn negotiating(client_id: String) -> ClientPool {
        ClientPool {
            negotiate: true,
            ..ClientPool::new(client_id)
        }
    }

    /// `request` at `version` to the broker at `addr`, connecting with `security`.
    pub(super) fn call<R: kafka_protocol::protocol::Request>(
        &self,
        addr: &str,
        security: &Arc<crate::client::ClientSecurity>,
        request: &R,
        version: i16,
    ) -> Result<R::Response> {
        self.call_within(addr, security, request, version, CALL_TIMEOUT)
    }

    /// As [`call`](Self::call), waiting up to `timeout` for the answer: for a request
    /// the broker holds on purpose (a voter change waits until it is applied).
    pub(super) fn call_within<R: kafka_protocol::protocol::Request>(
        &self,
        addr: &str,
        security: &Arc<crate::client::ClientSecurity>,
        request: &R,
        version: i16,
        timeout: std::time::Duration,
    ) -> Result<R::Response> {
        self.with_client(addr, security, |client| {
            client.call(request, version, timeout)
        })
    }

    /// `request` to the broker at `addr` at the highest version of `ours` it
    /// advertises (the ApiVersions answer of the connection; the pool must be
    /// [`ClientPool::negotiating`]), connecting with `security`; the version sent and
    /// the answer.
    ///
    /// # Errors
    /// [`Error::UnsupportedApi`] when the broker answers none of `ours` (or the pool
    /// does not negotiate); connection errors.
    pub(super) fn call_negotiated<R>(
        &self,
        addr: &str,
        security: &Arc<crate::client::ClientSecurity>,
        request: &R,
        ours: std::ops::RangeInclusive<i16>,
    ) -> Result<(i16, R::Response)>
    where
        R: kafka_protocol::protocol::Request + kafka_protocol::protocol::Message,
    {
        self.with_client(addr, security, |client| {
            let version = client.version::<R>(ours)?;
            Ok((version, client.call(request, version, CALL_TIMEOUT)?))
        })
    }

    /// Runs `call` on an idle connection to `addr` (or a new one), and keeps the
    /// connection when it succeeded.
    fn with_client<T>(
        &self,
        addr: &str,
        security: &Arc<crate::client::ClientSecurity>,
        call: impl FnOnce(&mut Client) -> Result<T>,
    ) -> Result<T> {
        let taken = self.idle.lock().get_mut(addr).and_then(Vec::pop);
        let mut client = taken.unwrap_or_else(|| {
            let client = Client::new(addr, self.client_id.clone()).with_security(security.clone());
            if self.negotiate {
                client.negotiating()
            } else {
                client
            }
        });
        let answer = call(&mut client)?;
        let mut idle = self.idle.lock();
        let kept = idle.entry(addr.to_string()).or_default();
        if kept.len() < IDLE_PER_BROKER {
            kept.push(client);
        }
        Ok(answer)
    }
}

/// A job of the loader thread.
struct LoadJob {
    index: i32,
    partition: Partition,
    leader_epoch: i32,
}

/// Loads and unloads the transaction coordinator's partitions as this node's
/// leadership of `__transaction_state` partitions changes. See the module
/// documentation.
pub(crate) struct TxnLoader {
    node_id: i32,
    broker: WeakBroker,
    /// The leader epoch each led partition was loaded (or queued) at.
    loaded: Mutex<BTreeMap<i32, i32>>,
    jobs: Mutex<Option<crossbeam_channel::Sender<LoadJob>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl TxnLoader {
    /// Starts the loader thread, and gives `broker`'s transaction coordinator its
    /// marker writer (remote leaders over `node`'s inter-broker client, local ones
    /// directly) and its timer.
    pub(crate) fn start(
        node_id: i32,
        broker: &Broker,
        node: Weak<NodeHandle>,
    ) -> Result<Arc<TxnLoader>> {
        let txns = broker.transaction_coordinator();
        txns.set_marker_writer(ClusterMarkers::writer(node_id, node, broker));
        txns.start_timer()?;
        let (tx, rx) = crossbeam_channel::unbounded::<LoadJob>();
        let weak = broker.downgrade();
        let h = std::thread::Builder::new()
            .name(format!("txn-loader-{node_id}"))
            .spawn(move || {
                while let Ok(job) = rx.recv() {
                    let Some(broker) = weak.upgrade() else {
                        return;
                    };
                    load(node_id, &broker, job);
                }
            })
            .map_err(|e| Error::io("spawn", "the transaction coordinator loader thread", e))?;
        Ok(Arc::new(TxnLoader {
            node_id,
            broker: broker.downgrade(),
            loaded: Mutex::new(BTreeMap::new()),
            jobs: Mutex::new(Some(tx)),
            thread: Mutex::new(Some(h)),
        }))
    }

    /// Stops the thread once the jobs queued are done.
    pub(crate) fn stop(&self) {
        drop(self.jobs.lock().take());
        if let Some(h) = self.thread.lock().take() {
            let _ = h.join();
        }
    }
}

/// Loads one partition if it is still led at the job's epoch; undoes the load if the
/// leadership ended while it ran.
fn load(node_id: i32, broker: &Broker, job: LoadJob) {
    let LoadJob {
        index,
        partition,
        leader_epoch,
    } = job;
    if partition.leader_epoch() != Some(leader_epoch) {
        return;
    }
    let txns = broker.transaction_coordinator();
    let started = Instant::now();
    let log: Arc<dyn TxnStateLog> = Arc::new(partition.clone());
    match txns.load_partition(index, leader_epoch, log) {
        Ok(()) => {
            tracing::info!(node = node_id, partition = index, coordinator_epoch = leader_epoch, elapsed = ?started.elapsed(), "transaction coordinator loaded {TRANSACTION_STATE_TOPIC}-{index}");
        }
        Err(e) => {
            // The slot stays, marked for reload: the coordinator's timer retries it.
            tracing::warn!(node = node_id, partition = index, error = %e, "cannot load {TRANSACTION_STATE_TOPIC}-{index} yet; retrying");
        }
    }
    // The leadership ended while it loaded: a newer leadership queued its own load.
    if partition.leader_epoch() != Some(leader_epoch) {
        txns.unload_partition(index);
    }
}

impl MetadataListener for TxnLoader {
    fn on_metadata(&self, update: &MetadataUpdate<'_>) {
        let Some(broker) = self.broker.upgrade() else {
            return;
        };
        let txns = broker.transaction_coordinator();
        if let Some(t) = update.current.topic(TRANSACTION_STATE_TOPIC) {
            txns.set_partition_count(t.partitions.len() as i32);
        }
        let changes = update.local_changes();
        let mut loaded = self.loaded.lock();
        for (topic, _, index) in &changes.removed {
            if topic == TRANSACTION_STATE_TOPIC && loaded.remove(index).is_some() {
                txns.unload_partition(*index);
            }
        }
        for c in changes.changed {
            if c.topic != TRANSACTION_STATE_TOPIC {
                continue;
            }
            match c.role {
                LocalRole::Leader { leader_epoch, .. } => {
                    if loaded.get(&c.partition) == Some(&leader_epoch) {
                        continue;
                    }
                    let Some(partition) = broker.hosted_partition(&c.topic, c.partition) else {
                        continue;
                    };
                    loaded.insert(c.partition, leader_epoch);
                    if let Some(tx) = self.jobs.lock().as_ref() {
                        let _ = tx.send(LoadJob {
                            index: c.partition,
                            partition,
                            leader_epoch,
                        });
                    }
                }
                LocalRole::Follower { .. } => {
                    if loaded.remove(&c.partition).is_some() {
                        tracing::info!(
                            node = self.node_id,
                            partition = c.partition,
                            "transaction coordinator unloaded {TRANSACTION_STATE_TOPIC}-{}",
                            c.partition
                        );
                        txns.unload_partition(c.partition);
                    }
                }
            }
        }
    }
}

/// The markers of the coordinators of this node: to partitions led here through the
/// broker, to the others with WriteTxnMarkers to their leader (from the image).
pub(super) struct ClusterMarkers {
    node_id: i32,
    node: Weak<NodeHandle>,
    local: Arc<dyn MarkerWriter>,
    /// Connections to the leaders, kept between calls.
    clients: ClientPool,
}

impl MarkerWriter for ClusterMarkers {
    fn write_markers(&self, m: &TxnMarkers) -> Vec<(TopicPartition, Error)> {
        crate::transaction::write_markers_as_batch(self, m)
    }

    /// Splits the partitions of every transaction of `batch` by their leader in the
    /// current image: those led here go through the broker's local path (on this
    /// thread), the others in one WriteTxnMarkers per leader carrying the markers of
    /// every transaction with partitions there, each leader on its own thread, so a
    /// stalled leader holds only the transactions with a partition it leads.
    fn write_batch(&self, batch: &[TxnMarkers], done: &MarkersDone<'_>) {
        let Some(node) = self.node.upgrade() else {
            crate::transaction::fail_batch(batch, done, || Error::Closed("cluster node".into()));
            return;
        };
        let image = node.image();
        let security = node.config().replication_security.clone();
        drop(node);
        let routes = route_markers(batch, |t, p| leader_of(&image, t, p), self.node_id);
        // Per transaction: its failures so far, and the destinations not answered yet.
        let failed: Vec<Mutex<Vec<(TopicPartition, Error)>>> =
            routes.failed.into_iter().map(Mutex::new).collect();
        let waiting: Vec<AtomicUsize> = routes
            .destinations
            .into_iter()
            .map(AtomicUsize::new)
            .collect();
        let answered = |i: usize, f: Vec<(TopicPartition, Error)>| {
            failed[i].lock().extend(f);
            if waiting[i].fetch_sub(1, Ordering::AcqRel) == 1 {
                let f = std::mem::take(&mut *failed[i].lock());
                done(i, f);
            }
        };
        for (i, w) in waiting.iter().enumerate() {
            if w.load(Ordering::Acquire) == 0 {
                let f = std::mem::take(&mut *failed[i].lock());
                done(i, f);
            }
        }
        std::thread::scope(|scope| {
            let mut inline = Vec::new();
            for (leader, parts) in routes.remote {
                let addr = image
                    .brokers
                    .get(&leader)
                    .filter(|b| !b.fenced)
                    .map(|b| b.replication_listener.clone().unwrap_or(b.listener.clone()));
                let send = {
                    let (answered, security) = (&answered, &security);
                    move || {
                        let Some(addr) = addr else {
                            for (i, tps) in &parts {
                                answered(
                                    *i,
                                    tps.iter().map(|tp| (tp.clone(), not_leader(tp))).collect(),
                                );
                            }
                            return;
                        };
                        for (i, f) in self.send(&addr, security, batch, &parts) {
                            answered(i, f);
                        }
                    }
                };
                let spawned = std::thread::Builder::new()
                    .name(format!("tidelog-txn-markers-to-{leader}"))
                    .spawn_scoped(scope, send.clone());
                if spawned.is_err() {
                    inline.push(send);
                }
            }
            // The markers of every transaction with partitions led here, together.
            let (index, mine): (Vec<usize>, Vec<TxnMarkers>) = routes
                .local
                .into_iter()
                .map(|(i, partitions)| {
                    let m = TxnMarkers {
                        partitions,
                        ..batch[i].clone()
                    };
                    (i, m)
                })
                .unzip();
            if !mine.is_empty() {
                self.local.write_batch(&mine, &|j, f| {
                    if let Some(&i) = index.get(j) {
                        answered(i, f);
                    }
                });
            }
            for send in inline {
                send();
            }
        });
    }
}

/// Where the markers of a batch of transactions go.
#[derive(Debug, Default)]
struct MarkerRoutes {
    /// Per transaction: the partitions led here.
    local: Vec<(usize, std::collections::BTreeSet<TopicPartition>)>,
    /// Per remote leader: per transaction, its partitions there.
    remote: BTreeMap<i32, Vec<(usize, Vec<TopicPartition>)>>,
    /// Per transaction: its partitions without a leader.
    failed: Vec<Vec<(TopicPartition, Error)>>,
    /// Per transaction: how many destinations (here, or a leader) it has.
    destinations: Vec<usize>,
}

/// Splits the partitions of `batch` by their leader (`leader_of`; None: the
/// partition no longer exists, which the local writer drops).
fn route_markers(
    batch: &[TxnMarkers],
    leader_of: impl Fn(&str, i32) -> Option<i32>,
    node_id: i32,
) -> MarkerRoutes {
    let mut routes = MarkerRoutes::default();
    for (i, m) in batch.iter().enumerate() {
        let mut local = std::collections::BTreeSet::new();
        let mut remote: BTreeMap<i32, Vec<TopicPartition>> = BTreeMap::new();
        let mut failed = Vec::new();
        for tp in &m.partitions {
            match leader_of(&tp.0, tp.1) {
                None => {
                    local.insert(tp.clone());
                }
                Some(NO_LEADER) => failed.push((tp.clone(), not_leader(tp))),
                Some(l) if l == node_id => {
                    local.insert(tp.clone());
                }
                Some(l) => remote.entry(l).or_default().push(tp.clone()),
            }
        }
        routes
            .destinations
            .push(usize::from(!local.is_empty()) + remote.len());
        if !local.is_empty() {
            routes.local.push((i, local));
        }
        for (leader, tps) in remote {
            routes.remote.entry(leader).or_default().push((i, tps));
        }
        routes.failed.push(failed);
    }
    routes
}

/// One WriteTxnMarkers carrying, for each transaction of `parts` (an index into
/// `batch`, its partitions at the leader), its marker, with its transaction version.
fn markers_request(batch: &[TxnMarkers], parts: &[(usize, Vec<TopicPartition>)]) -> MarkersRequest {
    let markers = parts
        .iter()
        .map(|(i, partitions)| {
            let m = &batch[*i];
            let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
            for (t, p) in partitions {
                by_topic.entry(t.as_str()).or_default().push(*p);
            }
            WritableTxnMarker::default()
                .with_producer_id(ProducerId(m.producer_id))
                .with_producer_epoch(m.producer_epoch)
                .with_transaction_result(m.result == TxnResult::Commit)
                .with_coordinator_epoch(m.coordinator_epoch)
                .with_topics(
                    by_topic
                        .into_iter()
                        .map(|(t, ps)| {
                            WritableTxnMarkerTopic::default()
                                .with_name(TopicName(StrBytes::from_string(t.to_string())))
                                .with_partition_indexes(ps)
                        })
                        .collect(),
                )
        })
        .collect();
    MarkersRequest {
        request: WriteTxnMarkersRequest::default().with_markers(markers),
        transaction_versions: parts
            .iter()
            .map(|(i, _)| batch[*i].transaction_version)
            .collect(),
    }
}

/// The WriteTxnMarkers version `request` wants: 2 when a marker has a transaction
/// version, so the leader checks it (KIP-890), 1 otherwise ([`send_markers`] sends
/// less to a leader that does not advertise it).
fn markers_version(request: &MarkersRequest) -> i16 {
    if request.transaction_versions.iter().any(|&v| v > 0) {
        TRANSACTION_VERSION_SINCE
    } else {
        MARKERS_VERSION
    }
}

/// `request` to the leader at `addr`, at the highest version up to
/// [`markers_version`] the leader advertises (its ApiVersions answer, kept with the
/// pooled connection); the version sent and the leader's answer. A leader that does
/// not answer version 2 yet (an older node during a rolling upgrade) gets version 1,
/// without the transaction versions, and applies the older epoch rule to the markers.
/// Kafka's coordinator does the same: its network client negotiates the version per
/// node, and the ignorable `TransactionVersion` is left out below version 2.
fn send_markers(
    clients: &ClientPool,
    addr: &str,
    security: &Arc<crate::client::ClientSecurity>,
    request: &MarkersRequest,
) -> Result<(i16, WriteTxnMarkersResponse)> {
    let wanted = markers_version(request);
    let (version, response) =
        clients.call_negotiated(addr, security, request, MARKERS_VERSION..=wanted)?;
    if version < wanted {
        tracing::debug!(
            leader = addr,
            version,
            "the leader does not answer WriteTxnMarkers v{wanted}: markers sent in v{version}, without their transaction versions"
        );
    }
    Ok((version, response.0))
}

/// Per transaction of `parts`, the partitions of it the leader's `response` did not
/// write (a partition it did not answer counts as not written). The answers are
/// matched by producer id, topic and partition, so each marker gets its own.
fn marker_answers(
    batch: &[TxnMarkers],
    parts: &[(usize, Vec<TopicPartition>)],
    response: WriteTxnMarkersResponse,
) -> Vec<(usize, Vec<(TopicPartition, i16)>)> {
    let mut answered: HashMap<(i64, TopicPartition), i16> = HashMap::new();
    for r in response.markers {
        for t in r.topics {
            for p in t.partitions {
                answered.insert(
                    (r.producer_id.0, (t.name.0.to_string(), p.partition_index)),
                    p.error_code,
                );
            }
        }
    }
    parts
        .iter()
        .map(|(i, partitions)| {
            let pid = batch[*i].producer_id;
            let codes = partitions
                .iter()
                .map(|tp| {
                    let code = answered.get(&(pid, tp.clone())).copied().unwrap_or(-1);
                    (tp.clone(), code)
                })
                .collect();
            (*i, codes)
        })
        .collect()
}

impl ClusterMarkers {
    /// The marker writer of the coordinators of node `node_id`, whose broker is
    /// `broker`.
    pub(super) fn writer(
        node_id: i32,
        node: Weak<NodeHandle>,
        broker: &Broker,
    ) -> Arc<dyn MarkerWriter> {
        Arc::new(ClusterMarkers {
            node_id,
            node,
            local: broker.local_marker_writer(),
            clients: ClientPool::negotiating(format!("tidelog-txn-markers-{node_id}")),
        })
    }

    /// One WriteTxnMarkers to the leader at `addr` with the markers of `parts` (per
    /// transaction of `batch`, its partitions there): per transaction, the partitions
    /// the leader could not write, each with its error.
    fn send(
        &self,
        addr: &str,
        security: &Arc<crate::client::ClientSecurity>,
        batch: &[TxnMarkers],
        parts: &[(usize, Vec<TopicPartition>)],
    ) -> Vec<(usize, Vec<(TopicPartition, Error)>)> {
        let request = markers_request(batch, parts);
        let response = match send_markers(&self.clients, addr, security, &request) {
            Ok((_, r)) => r,
            Err(e) => {
                tracing::debug!(node = self.node_id, leader = addr, error = %e, "WriteTxnMarkers failed; retrying");
                let message = e.to_string();
                return parts
                    .iter()
                    .map(|(i, tps)| {
                        let failed = tps
                            .iter()
                            .map(|tp| (tp.clone(), Error::Timeout(message.clone())))
                            .collect();
                        (*i, failed)
                    })
                    .collect();
            }
        };
        marker_answers(batch, parts, response)
            .into_iter()
            .map(|(i, codes)| {
                let m = &batch[i];
                let mut failed = Vec::new();
                for (tp, code) in codes {
                    if marker_done(code) {
                        if code != 0 {
                            tracing::info!(node = self.node_id, transactional_id = %m.transactional_id, topic = %tp.0, partition = tp.1, code = %ErrorCode::from_code(code), "transaction marker dropped");
                        }
                        continue;
                    }
                    let e = refusal(&tp, code);
                    failed.push((tp, e));
                }
                (i, failed)
            })
            .collect()
    }
}

/// True when a leader's answer to a marker ends its delivery: written, or never to be
/// (the partition is gone, or a newer producer epoch or coordinator wrote there), as
/// Kafka's coordinator drops it.
fn marker_done(code: i16) -> bool {
    code == 0
        || code == ResponseError::UnknownTopicOrPartition.code()
        || code == ResponseError::InvalidProducerEpoch.code()
        || code == ResponseError::ProducerFenced.code()
        || code == ResponseError::TransactionCoordinatorFenced.code()
}

/// The leader of `topic`-`partition` in `image` (`Some(NO_LEADER)` while it has
/// none), None if the partition does not exist.
fn leader_of(image: &MetadataImage, topic: &str, partition: i32) -> Option<i32> {
    let t = image.topic(topic)?;
    let p = t.partitions.get(usize::try_from(partition).ok()?)?;
    Some(p.leader)
}

fn not_leader(tp: &TopicPartition) -> Error {
    refusal(tp, ResponseError::NotLeaderOrFollower.code())
}

/// A broker's refusal `code` for `tp`, as an error.
fn refusal(tp: &TopicPartition, code: i16) -> Error {
    Error::Admin(Box::new(AdminError::new(
        Resource::Partition(AdminPartition {
            topic: tp.0.clone(),
            partition: tp.1,
        }),
        ErrorCode::from_code(code),
        None,
    )))
}

/// The refusal a transaction coordinator's answer `code` to a request of `producer`
/// stands for, for the codes every such request may get (None for the others).
pub(super) fn coordinator_refusal(code: i16, producer: ProducerIdAndEpoch) -> Option<TxnError> {
    Some(match ResponseError::try_from_code(code)? {
        ResponseError::NotCoordinator => TxnError::NotCoordinator,
        ResponseError::CoordinatorLoadInProgress => TxnError::CoordinatorLoadInProgress,
        ResponseError::ConcurrentTransactions => TxnError::ConcurrentTransactions,
        ResponseError::ProducerFenced | ResponseError::InvalidProducerEpoch => {
            TxnError::ProducerFenced {
                producer_id: producer.producer_id,
                epoch: producer.epoch,
                current: -1,
            }
        }
        ResponseError::InvalidProducerIdMapping => TxnError::InvalidProducerIdMapping {
            producer_id: producer.producer_id,
            current: -1,
        },
        _ => return None,
    })
}

/// The refusal a coordinator's answer `code` to a verification of `topic`-`partition`
/// stands for.
fn verification_refusal(
    code: i16,
    producer: ProducerIdAndEpoch,
    topic: &str,
    partition: i32,
) -> TxnError {
    if let Some(refusal) = coordinator_refusal(code, producer) {
        return refusal;
    }
    match ResponseError::try_from_code(code) {
        Some(ResponseError::TransactionAbortable | ResponseError::InvalidTxnState) => {
            TxnError::TransactionAbortable {
                topic: topic.to_string(),
                partition,
            }
        }
        _ => TxnError::CoordinatorNotAvailable {
            reason: format!(
                "the coordinator answered {} to the verification of {topic}-{partition}",
                ErrorCode::from_code(code)
            ),
        },
    }
}

impl ClusterNode {
    /// Makes `__transaction_state` through the controller unless it exists (what the
    /// first FindCoordinator or InitProducerId of a transactional id does, as Kafka's
    /// broker asks its controller): `transaction.state.log.num.partitions` partitions,
    /// compacted, `transaction.state.log.replication.factor` replicas capped at the
    /// unfenced brokers (with a warning), `min.insync.replicas` of
    /// `transaction.state.log.min.isr` capped at that. Returns once this node applied
    /// it (or another node made it first).
    pub(crate) fn ensure_transaction_state(
        &self,
        config: &crate::config::TransactionConfig,
    ) -> Result<()> {
        let image = self.image();
        if image.topic(TRANSACTION_STATE_TOPIC).is_some() {
            return Ok(());
        }
        let unfenced = image.unfenced_brokers().len();
        let wanted = config.state_log_replication_factor;
        let rf = i16::try_from(unfenced).unwrap_or(i16::MAX).min(wanted);
        if rf < 1 {
            return Err(Error::InvalidConfig {
                key: "transaction.state.log.replication.factor".into(),
                reason: format!("no unfenced broker to place {TRANSACTION_STATE_TOPIC} on yet"),
            });
        }
        if rf < wanted {
            tracing::warn!(
                wanted,
                replicas = rf,
                "transaction.state.log.replication.factor is above the {unfenced} unfenced brokers: {TRANSACTION_STATE_TOPIC} gets {rf} replicas"
            );
        }
        let min_isr = config.state_log_min_isr.min(i32::from(rf)).max(1);
        let record = MetadataRecord::CreateTopic(CreateTopic {
            name: TRANSACTION_STATE_TOPIC.into(),
            topic_id: codec::random_uuid(),
            partitions: config.state_log_partitions,
            replication_factor: rf,
            assignment: None,
            configs: vec![
                ("cleanup.policy".into(), "compact".into()),
                ("min.insync.replicas".into(), min_isr.to_string()),
            ],
            internal: true,
        });
        tracing::info!(
            partitions = config.state_log_partitions,
            replicas = rf,
            "creating {TRANSACTION_STATE_TOPIC}"
        );
        match self.propose(record, CREATE_TIMEOUT) {
            Ok(_) => Ok(()),
            // Another node made it meanwhile.
            Err(_) if self.image().topic(TRANSACTION_STATE_TOPIC).is_some() => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// KIP-890 part 1 on a partition leader: asks the coordinator of
    /// `transactional_id` (the leader of its `__transaction_state` partition, another
    /// node) whether `topic`-`partition` is in the producer's ongoing transaction, with
    /// AddPartitionsToTxn `verify_only` over the inter-broker client. With `add`
    /// (KIP-890 part 2, a producer of transaction version 2) the partition is added to
    /// the transaction instead of verified.
    pub(crate) fn verify_transaction(
        &self,
        transactional_id: &str,
        producer: ProducerIdAndEpoch,
        topic: &str,
        partition: i32,
        add: bool,
    ) -> std::result::Result<(), TxnError> {
        let image = self.image();
        let unavailable = |reason: String| TxnError::CoordinatorNotAvailable { reason };
        let count = image
            .topic(TRANSACTION_STATE_TOPIC)
            .map_or(0, |t| t.partitions.len() as i32);
        if count == 0 {
            return Err(unavailable(format!(
                "{TRANSACTION_STATE_TOPIC} does not exist"
            )));
        }
        let index = crate::transaction::log::partition_for(transactional_id, count);
        let leader = leader_of(&image, TRANSACTION_STATE_TOPIC, index).unwrap_or(NO_LEADER);
        let addr = image
            .brokers
            .get(&leader)
            .filter(|b| !b.fenced)
            .map(|b| b.replication_listener.clone().unwrap_or(b.listener.clone()))
            .ok_or_else(|| {
                unavailable(format!("{TRANSACTION_STATE_TOPIC}-{index} has no leader"))
            })?;
        let request = AddPartitionsToTxnRequest::default().with_transactions(vec![
            AddPartitionsToTxnTransaction::default()
                .with_transactional_id(TransactionalId(StrBytes::from_string(
                    transactional_id.to_string(),
                )))
                .with_producer_id(ProducerId(producer.producer_id))
                .with_producer_epoch(producer.epoch)
                .with_verify_only(!add)
                .with_topics(vec![
                    AddPartitionsToTxnTopic::default()
                        .with_name(TopicName(StrBytes::from_string(topic.to_string())))
                        .with_partitions(vec![partition]),
                ]),
        ]);
        let response = self
            .txn_clients
            .call(
                &addr,
                &self.config.replication_security,
                &request,
                VERIFY_VERSION,
            )
            .map_err(|e| unavailable(format!("cannot ask the transaction coordinator: {e}")))?;
        if response.error_code != 0 {
            return Err(verification_refusal(
                response.error_code,
                producer,
                topic,
                partition,
            ));
        }
        let code = response
            .results_by_transaction
            .iter()
            .flat_map(|r| r.topic_results.iter())
            .filter(|t| t.name.0.as_str() == topic)
            .flat_map(|t| t.results_by_partition.iter())
            .find(|p| p.partition_index == partition)
            .map(|p| p.partition_error_code);
        match code {
            Some(0) => Ok(()),
            Some(code) => Err(verification_refusal(code, producer, topic, partition)),
            None => Err(unavailable(format!(
                "the transaction coordinator did not answer for {topic}-{partition}"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::write_txn_markers_response::{
        WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
    };

    #[test]
    fn fenced_and_gone_partitions_end_a_markers_delivery() {
        assert!(marker_done(0));
        assert!(marker_done(ResponseError::UnknownTopicOrPartition.code()));
        assert!(marker_done(
            ResponseError::TransactionCoordinatorFenced.code()
        ));
        assert!(marker_done(ResponseError::InvalidProducerEpoch.code()));
        assert!(!marker_done(ResponseError::NotLeaderOrFollower.code()));
        assert!(!marker_done(ResponseError::NotEnoughReplicas.code()));
        assert!(!marker_done(-1));
    }

    #[test]
    fn a_remote_verification_refusal_keeps_its_meaning() {
        let p = ProducerIdAndEpoch {
            producer_id: 7,
            epoch: 1,
        };
        let code = |e: ResponseError| verification_refusal(e.code(), p, "t", 0);
        assert_eq!(
            code(ResponseError::NotCoordinator),
            TxnError::NotCoordinator
        );
        assert!(matches!(
            code(ResponseError::TransactionAbortable),
            TxnError::TransactionAbortable { .. }
        ));
        assert!(matches!(
            code(ResponseError::InvalidTxnState),
            TxnError::TransactionAbortable { .. }
        ));
        assert!(matches!(
            code(ResponseError::ProducerFenced),
            TxnError::ProducerFenced { producer_id: 7, .. }
        ));
        assert!(code(ResponseError::UnknownServerError).is_retriable());
    }

    /// A partition leader that advertises WriteTxnMarkers versions 1 to `max` (an older
    /// tidelog during a rolling upgrade when `max` is 1): answers ApiVersions, then
    /// one WriteTxnMarkers, writing every marker; yields the version and markers it
    /// was sent (none when the request was of a version it does not advertise).
    fn fake_leader(
        max: i16,
    ) -> (
        String,
        std::thread::JoinHandle<Option<(i16, MarkersRequest)>>,
    ) {
        use bytes::{Buf, BufMut, BytesMut};
        use kafka_protocol::messages::api_versions_response::ApiVersion;
        use kafka_protocol::messages::{
            ApiKey, ApiVersionsResponse, RequestHeader, ResponseHeader,
        };
        use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion};
        use std::io::{Read, Write};

        use super::super::txn_markers_wire::MarkersResponse;

        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let thread = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let reply = |s: &mut std::net::TcpStream, header: BytesMut, body: BytesMut| {
                let mut frame = BytesMut::new();
                frame.put_i32((header.len() + body.len()) as i32);
                frame.extend_from_slice(&header);
                frame.extend_from_slice(&body);
                s.write_all(&frame).unwrap();
            };
            // ApiVersions, then WriteTxnMarkers: at most two requests.
            for _ in 0..2 {
                let mut size = [0u8; 4];
                s.read_exact(&mut size).unwrap();
                let mut buf = vec![0u8; i32::from_be_bytes(size) as usize];
                s.read_exact(&mut buf).unwrap();
                let mut buf = bytes::Bytes::from(buf);
                let (key, version) = ((&buf[..]).get_i16(), (&buf[2..]).get_i16());
                let header = RequestHeader::decode(&mut buf, 2).unwrap();
                let mut out = BytesMut::new();
                let mut body = BytesMut::new();
                if key == ApiKey::ApiVersions as i16 {
                    ResponseHeader::default()
                        .with_correlation_id(header.correlation_id)
                        .encode(&mut out, 0)
                        .unwrap();
                    ApiVersionsResponse::default()
                        .with_api_keys(vec![
                            ApiVersion::default()
                                .with_api_key(ApiKey::WriteTxnMarkers as i16)
                                .with_min_version(1)
                                .with_max_version(max),
                        ])
                        .encode(&mut body, version)
                        .unwrap();
                    reply(&mut s, out, body);
                    continue;
                }
                assert_eq!(key, ApiKey::WriteTxnMarkers as i16);
                if version > max {
                    return None;
                }
                let request = MarkersRequest::decode(&mut buf, version).unwrap();
                let mut response = WriteTxnMarkersResponse::default();
                for m in &request.request.markers {
                    response.markers.push(
                        WritableTxnMarkerResult::default()
                            .with_producer_id(m.producer_id)
                            .with_topics(
                                m.topics
                                    .iter()
                                    .map(|t| {
                                        WritableTxnMarkerTopicResult::default()
                                            .with_name(t.name.clone())
                                            .with_partitions(
                                                t.partition_indexes
                                                    .iter()
                                                    .map(|&p| {
                                                        WritableTxnMarkerPartitionResult::default()
                                                            .with_partition_index(p)
                                                    })
                                                    .collect(),
                                            )
                                    })
                                    .collect(),
                            ),
                    );
                }
                ResponseHeader::default()
                    .with_correlation_id(header.correlation_id)
                    .encode(&mut out, MarkersResponse::header_version(version))
                    .unwrap();
                MarkersResponse(response)
                    .encode(&mut body, version)
                    .unwrap();
                reply(&mut s, out, body);
                return Some((version, request));
            }
            None
        });
        (addr, thread)
    }

    /// A coordinator sends WriteTxnMarkers at the highest version the leader
    /// advertises: the markers of a transaction version 2 client go to a leader that
    /// answers only version 1 (one not upgraded yet) in version 1, which it writes
    /// (with the older epoch rule), instead of a version 2 it refuses until upgraded;
    /// to a leader that answers version 2 they go in version 2.
    #[test]
    fn markers_go_in_the_version_the_leader_advertises() {
        let batch = vec![
            txn("a", 1, &[("t", 0)]),
            TxnMarkers {
                transaction_version: 2,
                ..txn("b", 2, &[("t", 0), ("t", 1)])
            },
        ];
        let parts = vec![
            (0, vec![("t".to_string(), 0)]),
            (1, vec![("t".to_string(), 0), ("t".to_string(), 1)]),
        ];
        let request = markers_request(&batch, &parts);
        let security = Arc::new(crate::client::ClientSecurity::default());
        for (max, expected) in [
            (1, 1),
            (TRANSACTION_VERSION_SINCE, TRANSACTION_VERSION_SINCE),
        ] {
            let (addr, leader) = fake_leader(max);
            let clients = ClientPool::negotiating("test".into());
            let (sent, response) = send_markers(&clients, &addr, &security, &request)
                .unwrap_or_else(|e| panic!("a leader of versions 1..={max}: {e}"));
            assert_eq!(sent, expected);
            let (got, received) = leader
                .join()
                .unwrap()
                .unwrap_or_else(|| panic!("a leader of versions 1..={max} got a newer one"));
            assert_eq!(got, expected);
            assert_eq!(received.request, request.request);
            let carried = if expected == 1 { vec![] } else { vec![0, 2] };
            assert_eq!(received.transaction_versions, carried);
            let written = marker_answers(&batch, &parts, response);
            assert!(
                written
                    .iter()
                    .all(|(_, codes)| codes.iter().all(|(_, c)| *c == 0)),
                "{written:?}"
            );
        }
    }

    fn txn(id: &str, producer_id: i64, partitions: &[(&str, i32)]) -> TxnMarkers {
        TxnMarkers {
            transactional_id: id.into(),
            producer_id,
            producer_epoch: 0,
            coordinator_epoch: 3,
            result: TxnResult::Commit,
            partitions: partitions
                .iter()
                .map(|(t, p)| (t.to_string(), *p))
                .collect(),
            transaction_version: 0,
        }
    }

    /// Kafka's TransactionMarkerChannelManager: the markers of several transactions to
    /// one leader go in one WriteTxnMarkers, and its answer is read per marker.
    #[test]
    fn the_markers_of_many_transactions_go_to_each_leader_in_one_request() {
        let batch = vec![
            txn("a", 1, &[("t", 0), ("t", 1)]),
            txn("b", 2, &[("t", 0), ("t", 2)]),
            TxnMarkers {
                transaction_version: 2,
                ..txn("c", 3, &[("t", 0), ("t", 3), ("gone", 0)])
            },
        ];
        // t-0 led by node 2, t-1 by node 3, t-2 here (node 1), t-3 by nobody.
        let leaders = |t: &str, p: i32| match (t, p) {
            ("t", 0) => Some(2),
            ("t", 1) => Some(3),
            ("t", 2) => Some(1),
            ("t", _) => Some(NO_LEADER),
            _ => None,
        };
        let routes = route_markers(&batch, leaders, 1);
        assert_eq!(routes.remote.len(), 2, "one request per leader");
        let to_2 = &routes.remote[&2];
        assert_eq!(
            to_2.iter().map(|(i, _)| *i).collect::<Vec<_>>(),
            vec![0, 1, 2]
        );
        let request = markers_request(&batch, to_2);
        assert_eq!(
            request.request.markers.len(),
            3,
            "three transactions, one request"
        );
        assert_eq!(request.transaction_versions, vec![0, 0, 2]);
        assert_eq!(markers_version(&request), TRANSACTION_VERSION_SINCE);
        assert_eq!(
            request
                .request
                .markers
                .iter()
                .map(|m| (
                    m.producer_id.0,
                    m.coordinator_epoch,
                    m.topics[0].partition_indexes.clone()
                ))
                .collect::<Vec<_>>(),
            vec![(1, 3, vec![0]), (2, 3, vec![0]), (3, 3, vec![0])]
        );
        assert_eq!(routes.remote[&3], vec![(0, vec![("t".to_string(), 1)])]);
        // A deleted topic goes to the local writer, which drops it.
        assert_eq!(
            routes
                .local
                .iter()
                .map(|(i, tps)| (*i, tps.iter().cloned().collect::<Vec<_>>()))
                .collect::<Vec<_>>(),
            vec![
                (1, vec![("t".to_string(), 2)]),
                (2, vec![("gone".to_string(), 0)]),
            ]
        );
        assert_eq!(routes.destinations, vec![2, 2, 2]);
        let unled: Vec<Vec<TopicPartition>> = routes
            .failed
            .iter()
            .map(|f| f.iter().map(|(tp, _)| tp.clone()).collect())
            .collect();
        assert_eq!(unled, vec![vec![], vec![], vec![("t".to_string(), 3)]]);

        // The leader's answer, per marker: a's written, b's refused, c's missing.
        let mut response = WriteTxnMarkersResponse::default();
        for (pid, code) in [(1, 0), (2, ResponseError::NotEnoughReplicas.code())] {
            response.markers.push(
                WritableTxnMarkerResult::default()
                    .with_producer_id(ProducerId(pid))
                    .with_topics(vec![
                        WritableTxnMarkerTopicResult::default()
                            .with_name(TopicName(StrBytes::from_static_str("t")))
                            .with_partitions(vec![
                                WritableTxnMarkerPartitionResult::default()
                                    .with_partition_index(0)
                                    .with_error_code(code),
                            ]),
                    ]),
            );
        }
        let t0 = || ("t".to_string(), 0);
        assert_eq!(
            marker_answers(&batch, to_2, response),
            vec![
                (0, vec![(t0(), 0)]),
                (1, vec![(t0(), ResponseError::NotEnoughReplicas.code())]),
                (2, vec![(t0(), -1)]),
            ]
        );
    }
}
