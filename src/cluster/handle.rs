//! What the data plane needs of its node ([`NodeHandle`]): the latest image, the broker
//! epoch, the replication settings, and proposing records. The [`super::ClusterNode`]
//! owns it (the replica manager and its fetchers hold it weakly, so they see the node
//! gone once it is dropped) and answers the same calls through it.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;

use super::config::ClusterConfig;
use super::image::MetadataImage;
use super::inbox::Inbound;
use super::records::{AlterPartition, MetadataRecord};
use super::shared::{Proposal, Shared, Waiter};
use crate::error::Result;

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
