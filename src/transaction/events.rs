//! What the transaction coordinator tells an operator while `tidelog serve` runs:
//! failed writes and reloads of `__transaction_state`, markers retried or dropped,
//! timed-out transactions. Logged through `tracing` when the `server` feature is on
//! (the only build that sets up a subscriber); without it these do nothing.

use crate::error::Error;

/// A write to `__transaction_state` failed: the partition is reloaded.
pub(crate) fn write_failed(partition: i32, transactional_id: &str, e: &Error) {
    #[cfg(feature = "server")]
    tracing::warn!(partition, transactional_id, error = %e, "cannot write to __transaction_state: reloading the partition");
    #[cfg(not(feature = "server"))]
    let _ = (partition, transactional_id, e);
}

/// The reload after a failed write failed too: the timer retries it.
pub(crate) fn reload_failed(partition: i32, e: &Error) {
    #[cfg(feature = "server")]
    tracing::error!(partition, error = %e, "cannot reload __transaction_state: retrying");
    #[cfg(not(feature = "server"))]
    let _ = (partition, e);
}

/// A partition of `__transaction_state` was loaded.
pub(crate) fn partition_loaded(partition: i32, coordinator_epoch: i32) {
    #[cfg(feature = "server")]
    tracing::debug!(
        partition,
        coordinator_epoch,
        "transaction coordinator loaded its partition of __transaction_state"
    );
    #[cfg(not(feature = "server"))]
    let _ = (partition, coordinator_epoch);
}

/// Every partition of `__transaction_state` is loaded.
pub(crate) fn coordinator_loaded(partitions: i32) {
    #[cfg(feature = "server")]
    tracing::info!(
        partitions,
        "transaction coordinator loaded __transaction_state"
    );
    #[cfg(not(feature = "server"))]
    let _ = partitions;
}

/// `__transaction_state` is being made (on first use).
pub(crate) fn creating_state_topic(partitions: i32) {
    #[cfg(feature = "server")]
    tracing::info!(
        partitions,
        "creating the internal topic __transaction_state"
    );
    #[cfg(not(feature = "server"))]
    let _ = partitions;
}

/// A marker could not be written to a partition: retried.
pub(crate) fn marker_retried(transactional_id: &str, topic: &str, partition: i32, e: &Error) {
    #[cfg(feature = "server")]
    tracing::debug!(transactional_id, topic, partition, error = %e, "transaction marker not written: retrying");
    #[cfg(not(feature = "server"))]
    let _ = (transactional_id, topic, partition, e);
}

/// A marker was dropped: its partition is gone (`e` None) or refused it as fenced.
pub(crate) fn marker_dropped(
    transactional_id: &str,
    topic: &str,
    partition: i32,
    e: Option<&Error>,
) {
    #[cfg(feature = "server")]
    match e {
        None => tracing::info!(
            transactional_id,
            topic,
            partition,
            "transaction marker dropped: the partition no longer exists"
        ),
        Some(e) => {
            tracing::warn!(transactional_id, topic, partition, error = %e, "transaction marker refused by the partition: dropped")
        }
    }
    #[cfg(not(feature = "server"))]
    let _ = (transactional_id, topic, partition, e);
}

/// Markers were written for a transaction that is no longer prepared here (reloaded or
/// moved meanwhile).
pub(crate) fn stale_markers(transactional_id: &str, e: &super::TxnError) {
    #[cfg(feature = "server")]
    tracing::debug!(transactional_id, error = %e, "markers written for a transaction no longer prepared here");
    #[cfg(not(feature = "server"))]
    let _ = (transactional_id, e);
}

/// A transaction passed its timeout and is being aborted.
pub(crate) fn timed_out(transactional_id: &str) {
    #[cfg(feature = "server")]
    tracing::info!(transactional_id, "transaction timed out: aborting");
    #[cfg(not(feature = "server"))]
    let _ = transactional_id;
}

/// A marker was written to `__consumer_offsets`.
pub(crate) fn offsets_marker(producer_id: i64, producer_epoch: i16, commit: bool) {
    #[cfg(feature = "server")]
    tracing::debug!(
        producer_id,
        producer_epoch,
        commit,
        "transaction marker written to __consumer_offsets"
    );
    #[cfg(not(feature = "server"))]
    let _ = (producer_id, producer_epoch, commit);
}
