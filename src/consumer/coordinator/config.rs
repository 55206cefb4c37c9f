//! Settings of the group coordinator.

use std::time::Duration;

/// Settings of the group coordinator. Defaults mirror Kafka's broker settings, except
/// where noted.
#[derive(Debug, Clone)]
pub struct CoordinatorConfig {
    /// Smallest `session_timeout` a member may ask for. Default 6 s
    /// (`group.min.session.timeout.ms`).
    pub min_session_timeout: Duration,
    /// Largest `session_timeout` a member may ask for. Default 30 min
    /// (`group.max.session.timeout.ms`).
    pub max_session_timeout: Duration,
    /// How long the first rebalance of an empty group waits for more members when its
    /// first member is a network client (`group.initial.rebalance.delay.ms`). Each
    /// member that joins meanwhile extends the wait by this much again, up to the
    /// round's rebalance timeout, so consumers started together form one generation,
    /// not one per member. Default 3 s, as Kafka.
    pub initial_rebalance_delay: Duration,
    /// The same delay when the group's first member is in-process. Default 0: members
    /// in one process join within microseconds of each other, and a later join simply
    /// starts another rebalance.
    pub in_process_initial_rebalance_delay: Duration,
    /// Most members a group may have. Default unlimited (`group.max.size`).
    pub max_group_size: usize,
    /// Longest metadata string stored with a committed offset. Default 4096
    /// (`offset.metadata.max.bytes`).
    pub offset_metadata_max_bytes: usize,
    /// How long the offsets of a group without members are kept after it became empty
    /// (`offsets.retention.minutes`, KIP-211). Default 7 days.
    pub offsets_retention: Duration,
}

impl Default for CoordinatorConfig {
    fn default() -> Self {
        CoordinatorConfig {
            min_session_timeout: Duration::from_secs(6),
            max_session_timeout: Duration::from_secs(30 * 60),
            initial_rebalance_delay: Duration::from_secs(3),
            in_process_initial_rebalance_delay: Duration::ZERO,
            max_group_size: usize::MAX,
            offset_metadata_max_bytes: 4096,
            offsets_retention: Duration::from_secs(7 * 24 * 3600),
        }
    }
}
