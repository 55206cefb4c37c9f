//! What the layers below the server tell an operator while `tidelog serve` runs: group
//! rebalances and what retention or compaction removed. Logged at info level through
//! `tracing` when the `server` feature is on (the only build that sets up a subscriber);
//! without it these do nothing.

use crate::coordinator::Group;
use crate::storage::{CleanupOutcome, PartitionLog};

/// The group's metadata was just stored: a completed generation (a rebalance), or the
/// group became empty.
pub(crate) fn group_stored(group: &Group) {
    #[cfg(feature = "server")]
    {
        use crate::consumer::coordinator::GroupState;
        match group.state() {
            GroupState::Empty => tracing::info!(
                group = group.id(),
                generation = group.generation(),
                "consumer group is empty (its last member left or expired)"
            ),
            state => tracing::info!(
                group = group.id(),
                generation = group.generation(),
                members = group.member_ids().len(),
                protocol = group.protocol().unwrap_or(""),
                state = state.as_str(),
                "consumer group rebalanced"
            ),
        }
    }
    #[cfg(not(feature = "server"))]
    let _ = group;
}

/// A retention pass over `log` did `outcome`; logs what it removed, if anything.
pub(crate) fn cleaned(log: &PartitionLog, outcome: &CleanupOutcome) {
    #[cfg(feature = "server")]
    {
        if outcome.segments_deleted > 0 {
            tracing::info!(
                partition = log.name(),
                segments = outcome.segments_deleted,
                log_start_offset = log.log_start_offset(),
                "segments deleted by retention"
            );
        }
        if outcome.segments_compacted > 0 {
            tracing::info!(
                partition = log.name(),
                segments = outcome.segments_compacted,
                records_removed = outcome.records_removed,
                "segments compacted"
            );
        }
    }
    #[cfg(not(feature = "server"))]
    let _ = (log, outcome);
}
