//! A store-and-forward forwarder's status: what `Forwarder::status` returns and what
//! [`Broker::metrics`](crate::Broker::metrics) shows of each running forwarder (the
//! forwarder itself is the `forward` layer's, above the broker).

use std::time::SystemTime;

/// Where a store-and-forward forwarder (`tidelog::forward::Forwarder`, feature
/// `client`) stands: its `status()`, and an entry of [`Metrics::forwarders`](super::Metrics::forwarders)
/// while it runs.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct ForwardStatus {
    /// The forwarder's name.
    pub name: String,
    /// Every local partition forwarded, by topic and partition (filled once a session
    /// has started).
    pub partitions: Vec<PartitionStatus>,
    /// Records forwarded (acknowledged by the remote side) since start.
    pub records_forwarded: u64,
    /// Their bytes (keys, values and headers as read locally).
    pub bytes_forwarded: u64,
    /// Records found already forwarded when a session resumed, and not sent again.
    pub records_skipped: u64,
    /// Records deleted by local retention before they were forwarded (only with
    /// `allow_retention_loss`).
    pub records_lost: u64,
    /// Sessions started (the first, and one after each failure).
    pub sessions: u64,
    /// Sessions that failed (each is retried after `retry_backoff`).
    pub errors: u64,
    /// The last error, None since the last session that reached the remote cluster
    /// (kept in the data directory while it stands, for `Forwarder::positions`).
    pub last_error: Option<String>,
    /// When the last error happened.
    pub last_error_at: Option<SystemTime>,
}

impl ForwardStatus {
    /// Records of every partition not forwarded yet.
    pub fn records_behind(&self) -> u64 {
        self.partitions.iter().map(|p| p.records_behind()).sum()
    }

    /// Bytes of every partition not forwarded yet.
    pub fn bytes_behind(&self) -> u64 {
        self.partitions.iter().map(|p| p.bytes_behind).sum()
    }

    /// True once every partition is forwarded up to its end.
    pub fn caught_up(&self) -> bool {
        !self.partitions.is_empty() && self.records_behind() == 0
    }
}

/// One local partition's forwarding.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PartitionStatus {
    /// The local topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// The remote topic (empty in `Forwarder::positions`, which reads only the local
    /// directory).
    pub remote_topic: String,
    /// The first local offset not acknowledged by the remote side yet.
    pub position: i64,
    /// The local end (last stable offset) when last looked at.
    pub end: i64,
    /// Bytes of the local log from the position's batch to the end.
    pub bytes_behind: u64,
}

impl PartitionStatus {
    /// Records (offsets) not forwarded yet.
    pub fn records_behind(&self) -> u64 {
        (self.end - self.position).max(0) as u64
    }
}
