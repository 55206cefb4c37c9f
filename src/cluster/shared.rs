//! The state a node's threads share ([`Shared`]): the published image, the controller's
//! id, the broker epoch, the listeners and the callers waiting for their proposals'
//! outcomes ([`Proposal`]).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex, RwLock};

use super::image::{Applied, MetadataImage, Outcome};
use super::listener::{MetadataListener, MetadataUpdate};
use super::liveness::Liveness;
use super::membership::{Membership, QuorumStatus};
use super::records::{Envelope, MetadataRecord, Stamp};
use super::transport::{ClusterIdCell, DirectoryCell};
use crate::error::{Error, Result};
use crate::storage::codec;

/// A caller waiting for its record's outcome.
#[derive(Default)]
pub(super) struct Waiter {
    pub(super) outcome: Mutex<Option<Outcome>>,
    pub(super) cv: Condvar,
}

/// State shared by the node handle, the Raft loop, the publisher and the transport.
pub(crate) struct Shared {
    pub(super) node_id: i32,
    pub(super) image: RwLock<Arc<MetadataImage>>,
    /// The latest image the Raft loop applied: ahead of `image` while the listeners
    /// act on it (open the logs of new partitions) before it is published.
    pub(super) applied: RwLock<Arc<MetadataImage>>,
    /// Index of the published image.
    pub(super) published: AtomicU64,
    pub(super) published_lock: Mutex<()>,
    pub(super) published_cv: Condvar,
    /// The Raft leader (controller), -1 if unknown.
    pub(super) leader: AtomicI32,
    /// This process's broker epoch, -1 before its registration is applied.
    pub(super) broker_epoch: AtomicI64,
    /// Set by controlled shutdown: no more BrokerReady.
    pub(super) shutting_down: AtomicBool,
    /// Set once this process published the metadata log up to its own registration:
    /// client requests are held until then.
    pub(super) caught_up: AtomicBool,
    pub(super) waiters: Mutex<HashMap<u64, Arc<Waiter>>>,
    pub(super) next_request: AtomicU64,
    /// This process (random per start; its broker registration names it).
    pub(super) incarnation: u64,
    /// When this process's node started: the clock of its proposals' stamps.
    pub(super) started: Instant,
    pub(super) listeners: Mutex<Vec<Arc<dyn MetadataListener>>>,
    /// Why the Raft loop stopped, if it failed.
    pub(super) failed: Mutex<Option<String>>,
    pub(super) stopped: AtomicBool,
    /// This voter dropped a vote request: it may not vote yet (`amnesia::may_vote`).
    pub(super) refused_vote: AtomicBool,
    pub(super) cluster_id: ClusterIdCell,
    /// The voters' directory ids the applied metadata records (the transport checks
    /// hellos against them).
    pub(super) directories: DirectoryCell,
    pub(super) liveness: Arc<Liveness>,
    /// The metadata quorum's voters and learners, as the Raft loop last applied them.
    pub(super) membership: RwLock<Membership>,
    /// The quorum with the controller's view of each member's progress.
    pub(super) quorum: RwLock<QuorumStatus>,
}

impl Shared {
    /// The state of a node `node_id` starting, in cluster `cluster_id` if its data
    /// directory names one.
    pub(super) fn new(node_id: i32, cluster_id: Option<String>) -> Shared {
        Shared {
            node_id,
            image: RwLock::new(Arc::new(MetadataImage::default())),
            applied: RwLock::new(Arc::new(MetadataImage::default())),
            published: AtomicU64::new(0),
            published_lock: Mutex::new(()),
            published_cv: Condvar::new(),
            leader: AtomicI32::new(-1),
            broker_epoch: AtomicI64::new(-1),
            shutting_down: AtomicBool::new(false),
            caught_up: AtomicBool::new(false),
            waiters: Mutex::new(HashMap::new()),
            next_request: AtomicU64::new(codec::random_u64() >> 2),
            incarnation: codec::random_u64(),
            started: Instant::now(),
            listeners: Mutex::new(Vec::new()),
            failed: Mutex::new(None),
            stopped: AtomicBool::new(false),
            refused_vote: AtomicBool::new(false),
            cluster_id: Arc::new(RwLock::new(cluster_id)),
            directories: Arc::new(RwLock::new(Default::default())),
            liveness: Arc::new(Liveness::default()),
            membership: RwLock::new(Membership::default()),
            quorum: RwLock::new(QuorumStatus::default()),
        }
    }

    /// `Closed` once the node stopped or failed.
    pub(super) fn check_running(&self) -> Result<()> {
        if let Some(why) = self.failed.lock().clone() {
            return Err(Error::Closed(format!(
                "cluster node {} (it failed: {why})",
                self.node_id
            )));
        }
        if self.stopped.load(Ordering::Acquire) {
            return Err(Error::Closed(format!("cluster node {}", self.node_id)));
        }
        Ok(())
    }

    /// The metadata quorum stops on this node for good (`why`): proposals fail with
    /// `Closed` naming it, and the listeners stop acting on the last image (this node
    /// leads no partition any more). Never a node that looks alive and follows nothing.
    pub(super) fn fail(&self, why: String) {
        {
            let mut failed = self.failed.lock();
            if failed.is_some() {
                return;
            }
            tracing::error!(node = self.node_id, reason = %why, "the metadata quorum stops on this node: it leads no partition and applies no metadata until it is restarted");
            *failed = Some(why);
        }
        self.set_leader(-1);
        for l in self.listeners.lock().iter() {
            l.on_node_failed();
        }
        for w in self.waiters.lock().values() {
            w.cv.notify_all();
        }
    }

    pub(super) fn next_request_id(&self) -> u64 {
        self.next_request.fetch_add(1, Ordering::Relaxed)
    }

    /// A new proposal of `record`, which its proposer gives up on after `timeout`: its
    /// request id and the envelope's bytes, stamped so the image applies it at most
    /// once (`image::once`).
    pub(super) fn envelope(&self, record: MetadataRecord, timeout: Duration) -> (u64, Vec<u8>) {
        let request_id = self.next_request_id();
        let issued_ms = self.started.elapsed().as_millis() as u64;
        let data = Envelope {
            proposer: self.node_id,
            request_id,
            stamp: Some(Stamp {
                incarnation: self.incarnation,
                issued_ms,
                expires_ms: issued_ms.saturating_add(timeout.as_millis() as u64),
            }),
            record,
        }
        .encode();
        (request_id, data)
    }

    pub(super) fn set_leader(&self, node: i32) {
        self.leader.store(node, Ordering::Release);
    }

    pub(super) fn publish(
        &self,
        previous: &MetadataImage,
        current: &Arc<MetadataImage>,
        outcomes: Vec<(u64, Outcome)>,
    ) {
        let epoch = self.broker_epoch.load(Ordering::Acquire);
        let update = MetadataUpdate {
            node_id: self.node_id,
            previous,
            current,
            caught_up: epoch >= 0 && current.index >= epoch as u64,
        };
        for l in self.listeners.lock().iter() {
            l.on_metadata(&update);
        }
        *self.image.write() = current.clone();
        {
            let _g = self.published_lock.lock();
            if update.caught_up {
                self.caught_up.store(true, Ordering::Release);
            }
            self.published.store(current.index, Ordering::Release);
            self.published_cv.notify_all();
        }
        let waiters = self.waiters.lock();
        for (id, outcome) in outcomes {
            if let Some(w) = waiters.get(&id) {
                *w.outcome.lock() = Some(outcome);
                w.cv.notify_all();
            }
        }
    }
}

/// A proposal in flight ([`super::ClusterNode::submit`]); dropping it stops waiting.
pub(crate) struct Proposal {
    /// The envelope as proposed (tests send copies of it).
    #[cfg(test)]
    pub(super) data: Vec<u8>,
    pub(super) shared: Arc<Shared>,
    pub(super) request_id: u64,
    pub(super) waiter: Arc<Waiter>,
    pub(super) sent: bool,
    pub(super) name: &'static str,
    pub(super) timeout: Duration,
    pub(super) deadline: Instant,
}

impl Proposal {
    /// The outcome if it is decided (applied, rejected, timed out or the node closed),
    /// without blocking.
    pub(crate) fn poll(&self) -> Option<Result<Applied>> {
        if let Some(outcome) = self.waiter.outcome.lock().take() {
            return Some(outcome.map_err(Into::into));
        }
        if !self.sent || Instant::now() >= self.deadline || self.shared.check_running().is_err() {
            return Some(Err(self.failure()));
        }
        None
    }

    /// Waits for the outcome.
    pub(crate) fn wait(self) -> Result<Applied> {
        let outcome = if self.sent {
            let mut g = self.waiter.outcome.lock();
            while g.is_none()
                && self.shared.check_running().is_ok()
                && !self.waiter.cv.wait_until(&mut g, self.deadline).timed_out()
            {}
            g.take()
        } else {
            None
        };
        match outcome {
            Some(o) => o.map_err(Into::into),
            None => Err(self.failure()),
        }
    }

    /// Why no outcome came: the node closed, or the timeout.
    fn failure(&self) -> Error {
        if let Err(e) = self.shared.check_running() {
            return e;
        }
        Error::Timeout(format!(
            "{} was not applied by the cluster within {:?} (controller: {})",
            self.name,
            self.timeout,
            match self.shared.leader.load(Ordering::Acquire) {
                c if c >= 0 => format!("node {c}"),
                _ => "none".to_string(),
            }
        ))
    }
}

impl Drop for Proposal {
    fn drop(&mut self) {
        self.shared.waiters.lock().remove(&self.request_id);
    }
}
