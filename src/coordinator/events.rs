//! What the coordinator tells an operator while `tidelog serve` runs: group rebalances.
//! Logged at info level through `tracing` when the `server` feature is on (the only
//! build that sets up a subscriber); without it this does nothing.

use super::Group;

/// The group's metadata was just stored: a completed generation (a rebalance), or the
/// group became empty.
pub(crate) fn group_stored(group: &Group) {
    #[cfg(feature = "server")]
    {
        use super::GroupState;
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
