//! What the coordinator tells an operator while `tidelog serve` runs: group rebalances.
//! Logged at info level through `tracing` when the `server` feature is on (the only
//! build that sets up a subscriber); without it this does nothing.

use super::Group;

/// The group's metadata was just stored: a completed generation (a rebalance), the
/// group became empty, or a static member came back under a new member id.
pub(crate) fn group_stored(group: &Group) {
    #[cfg(feature = "server")]
    {
        use super::GroupState;
        if let Some((instance, old, new)) = group.stored_replacement() {
            tracing::info!(
                group = group.id(),
                generation = group.generation(),
                instance = instance.as_str(),
                old_member = old.as_str(),
                member = new.as_str(),
                "static member rejoined under a new member id with its assignment, no rebalance"
            );
            return;
        }
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
