//! What the data plane needs of its node ([`NodeHandle`]): the latest image, the broker
//! epoch, the replication settings, proposing records, and read barriers on the
//! metadata log. The [`super::ClusterNode`]
//! owns it (the replica manager and its fetchers hold it weakly, so they see the node
//! gone once it is dropped) and answers the same calls through it.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crossbeam_channel::{RecvTimeoutError, Sender};

use super::config::ClusterConfig;
use super::image::MetadataImage;
use super::inbox::{Inbound, ReadIndex, read_context};
use super::records::{AlterPartition, MetadataRecord};
use super::shared::{Proposal, Shared, Waiter};
use crate::error::{Error, Result};

/// A running node's state and inbox, as its data plane reaches them.
pub(crate) struct NodeHandle {
    /// The node's settings.
    pub(super) config: Arc<ClusterConfig>,
    /// The state its threads share.
    pub(super) shared: Arc<Shared>,
    /// The Raft loop's inbox.
    pub(super) inbox: Sender<Inbound>,
}

impl NodeHandle {
    /// The latest published image.
    pub(crate) fn image(&self) -> Arc<MetadataImage> {
        self.shared.image.read().clone()
    }

    /// This process's broker epoch, once its registration is applied.
    pub(crate) fn broker_epoch(&self) -> Option<i64> {
        let e = self.shared.broker_epoch.load(Ordering::Acquire);
        (e >= 0).then_some(e)
    }

    /// The node's settings.
    pub(crate) fn config(&self) -> &ClusterConfig {
        &self.config
    }

    /// Proposes `record` without waiting: the returned [`Proposal`] tells its outcome
    /// once this node has applied and published it, or a timeout after `timeout`.
    pub(crate) fn submit(&self, record: MetadataRecord, timeout: Duration) -> Result<Proposal> {
        self.shared.check_running()?;
        let name = record.name();
        let (request_id, data) = self.shared.envelope(record, timeout);
        let deadline = Instant::now() + timeout;
        let waiter = Arc::new(Waiter::default());
        self.shared
            .waiters
            .lock()
            .insert(request_id, waiter.clone());
        let sent = self
            .inbox
            .send(Inbound::Propose {
                request_id,
                #[cfg(test)]
                data: data.clone(),
                #[cfg(not(test))]
                data,
                deadline,
            })
            .is_ok();
        Ok(Proposal {
            #[cfg(test)]
            data,
            shared: self.shared.clone(),
            request_id,
            waiter,
            sent,
            name,
            timeout,
            deadline,
        })
    }

    /// A read barrier on the metadata log, as a linearizable read in Raft: asks the
    /// controller for its commit index (raft-rs's `read_index`, ReadOnlySafe: the
    /// controller first confirms with a round of heartbeats that it still leads; a
    /// follower's read goes to the controller), then waits until this node has
    /// published the metadata log up to it. The image this node publishes after it
    /// returns holds every record committed before it was called. Within `timeout`: no
    /// controller known, a controller that does not answer (a leadership change loses
    /// the reads in flight; the Raft loop asks again) or a node that does not catch up
    /// in time fail with [`Error::Timeout`] naming which; a stopped node with
    /// [`Error::Closed`].
    pub(crate) fn read_barrier(&self, timeout: Duration) -> Result<()> {
        self.shared.check_running()?;
        let me = self.config.node_id;
        let deadline = Instant::now() + timeout;
        let (reply, answer) = crossbeam_channel::bounded(1);
        let ctx = read_context(me, self.shared.incarnation, self.shared.next_request_id());
        let read = ReadIndex {
            ctx,
            reply,
            deadline,
        };
        if self.inbox.send(Inbound::ReadIndex(read)).is_err() {
            self.shared.check_running()?;
            return Err(Error::Closed(format!("cluster node {me}")));
        }
        let index = match index_wait(answer.recv_deadline(deadline), Instant::now(), deadline) {
            IndexWait::Index(index) => index,
            IndexWait::TimedOut => {
                let why = match self.shared.leader.load(Ordering::Acquire) {
                    c if c >= 0 => {
                        format!("the controller (node {c}) did not confirm its commit index")
                    }
                    _ => "no controller was known".to_string(),
                };
                return Err(Error::Timeout(format!(
                    "the metadata read barrier of node {me}: {why} within {timeout:?}"
                )));
            }
            IndexWait::LoopGone => {
                self.shared.check_running()?;
                return Err(Error::Closed(format!("cluster node {me}")));
            }
        };
        self.wait_published(index, deadline, timeout)
    }

    /// Waits until this node has published the metadata log up to `index`, until
    /// `deadline` (the barrier's `timeout` is named in the error).
    fn wait_published(&self, index: u64, deadline: Instant, timeout: Duration) -> Result<()> {
        let me = self.config.node_id;
        let mut g = self.shared.published_lock.lock();
        loop {
            let published = self.shared.published.load(Ordering::Acquire);
            if published >= index {
                return Ok(());
            }
            self.shared.check_running()?;
            if Instant::now() >= deadline {
                return Err(Error::Timeout(format!(
                    "the metadata read barrier of node {me}: it published the metadata log up to index {published} of the controller's commit index {index} within {timeout:?}"
                )));
            }
            // Woken by each publication and at shutdown; a node that fails is seen
            // within a step.
            let step = Instant::now() + Duration::from_millis(200);
            self.shared
                .published_cv
                .wait_until(&mut g, deadline.min(step));
        }
    }

    /// An ISR change from this node as a partition's leader (the data plane's
    /// `AlterPartition`), without waiting; stale ones are refused with
    /// `FencedLeaderEpoch` or `InvalidUpdateVersion`.
    pub(crate) fn alter_partition(
        &self,
        change: AlterPartition,
        timeout: Duration,
    ) -> Result<Proposal> {
        self.submit(MetadataRecord::AlterPartition(change), timeout)
    }
}

/// How a read barrier's wait for the controller's commit index ended.
#[derive(Debug, PartialEq, Eq)]
enum IndexWait {
    /// The commit index came.
    Index(u64),
    /// None came by the barrier's deadline.
    TimedOut,
    /// The Raft loop dropped the read before its deadline: it stopped.
    LoopGone,
}

/// What `outcome`, the wait for a read's answer until `deadline`, means at `now`. The
/// Raft loop forgets a read once its deadline passed, dropping its reply: a reply gone
/// by then is the caller's timeout seen first by the loop (a caller that was not
/// scheduled at its deadline), not a stopped loop.
fn index_wait(
    outcome: Result<u64, RecvTimeoutError>,
    now: Instant,
    deadline: Instant,
) -> IndexWait {
    match outcome {
        Ok(index) => IndexWait::Index(index),
        Err(RecvTimeoutError::Timeout) => IndexWait::TimedOut,
        Err(RecvTimeoutError::Disconnected) if now >= deadline => IndexWait::TimedOut,
        Err(RecvTimeoutError::Disconnected) => IndexWait::LoopGone,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_the_raft_loop_forgot_at_its_deadline_is_a_timeout_not_a_stopped_node() {
        let deadline = Instant::now();
        let late = deadline + Duration::from_millis(5);
        let disconnected = || Err(RecvTimeoutError::Disconnected);
        assert_eq!(
            index_wait(disconnected(), late, deadline),
            IndexWait::TimedOut
        );
        assert_eq!(
            index_wait(disconnected(), deadline, deadline),
            IndexWait::TimedOut
        );
        let early = deadline - Duration::from_millis(5);
        assert_eq!(
            index_wait(disconnected(), early, deadline),
            IndexWait::LoopGone
        );
        assert_eq!(
            index_wait(Err(RecvTimeoutError::Timeout), late, deadline),
            IndexWait::TimedOut
        );
        assert_eq!(index_wait(Ok(7), late, deadline), IndexWait::Index(7));
    }
}
