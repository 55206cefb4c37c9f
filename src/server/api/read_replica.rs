//! The consumer side of fetching from the closest replica (KIP-392), kept apart from
//! `fetch.rs`: which replica a consumer's Fetch is served from.
//!
//! - A consumer's Fetch of v11 and later (which carries the client's `rack_id`) may be
//!   served by a follower: it reads the follower's copy up to the follower's high
//!   watermark, which trails the leader's by at most a fetch round, so it sees only
//!   committed records. Its `current_leader_epoch` is checked against the leader epoch
//!   of this node's metadata (older: FENCED_LEADER_EPOCH, newer: UNKNOWN_LEADER_EPOCH),
//!   an offset past the follower's log end is OFFSET_OUT_OF_RANGE, and one between its
//!   high watermark and log end has nothing yet. A node that holds no replica answers
//!   NOT_LEADER_OR_FOLLOWER as before; a Fetch below v11 is served by the leader only.
//! - With Kafka's `replica.selector.class` rack-aware
//!   (`RackAwareReplicaSelector`), the leader answers a consumer whose rack has no
//!   replica of the leader's but an in-sync follower with `preferred_read_replica` (the
//!   follower with the most records; no records, the leader's high watermark and log
//!   start), once that follower has copied up to the fetch offset; the consumer then
//!   fetches from it. ListOffsets and OffsetForLeaderEpoch stay the leader's.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::server::backend::{Backend, PartitionOps};

/// A consumer's fetch of `topic`-`partition` from `fetch_offset`, resolved: the
/// partition to read (the leader's, or this follower's copy) and the replica the
/// consumer should fetch from instead, if the leader's selector picked one.
/// `client_rack`: the request's `rack_id` from v11 (empty when the client has no rack),
/// None before v11. `rack_aware`: the server's replica selector is the rack-aware one.
/// `listener`: the listener the request arrived on (a preferred replica must be
/// reachable there).
pub(super) fn resolve(
    backend: &dyn Backend,
    (topic, partition): (&str, i32),
    (fetch_offset, current_leader_epoch): (i64, i32),
    (client_rack, rack_aware, listener): (Option<&str>, bool, &str),
) -> Result<(Arc<dyn PartitionOps>, Option<i32>)> {
    let log = match backend.partition(topic, partition) {
        Ok(log) => log,
        Err(e @ Error::NotLeaderOrFollower { .. }) if client_rack.is_some() => {
            return follower_copy(backend, topic, partition, current_leader_epoch, e)
                .map(|log| (log, None));
        }
        Err(e) => return Err(e),
    };
    log.check_leader_epoch(current_leader_epoch)?;
    let preferred = match client_rack {
        Some(rack) if rack_aware && !rack.is_empty() => select(
            backend,
            (topic, partition),
            fetch_offset,
            rack,
            (log.as_ref(), listener),
        ),
        _ => None,
    };
    Ok((log, preferred))
}

/// This node's copy of a partition it follows, for a consumer's read, after the leader
/// epoch check; `not_leader` (the leader check's refusal) if it holds no replica.
fn follower_copy(
    backend: &dyn Backend,
    topic: &str,
    partition: i32,
    current_leader_epoch: i32,
    not_leader: Error,
) -> Result<Arc<dyn PartitionOps>> {
    let Some(cluster) = backend.cluster() else {
        return Err(not_leader);
    };
    let Some(layout) = cluster
        .topic(topic)
        .and_then(|t| t.partitions.get(usize::try_from(partition).ok()?).cloned())
    else {
        return Err(not_leader);
    };
    if !layout.replicas.contains(&cluster.node_id()) {
        return Err(not_leader);
    }
    let name = || format!("{topic}-{partition}");
    if current_leader_epoch >= 0 && current_leader_epoch < layout.leader_epoch {
        return Err(Error::FencedLeaderEpoch {
            partition: name(),
            reason: format!(
                "the request's epoch {current_leader_epoch} is older than {} (a follower's read)",
                layout.leader_epoch
            ),
        });
    }
    if current_leader_epoch > layout.leader_epoch {
        return Err(Error::UnknownLeaderEpoch {
            partition: name(),
            reason: format!(
                "the request's epoch {current_leader_epoch} is newer than {} this follower knows",
                layout.leader_epoch
            ),
        });
    }
    backend.replica_partition(topic, partition)
}

/// Kafka's `RackAwareReplicaSelector` on the leader: None when the leader is in the
/// client's `rack` or no in-sync follower there has copied up to `fetch_offset`;
/// otherwise the follower of that rack with the most records (the lower id on a tie).
/// Only unfenced brokers with an endpoint on `listener` are chosen.
fn select(
    backend: &dyn Backend,
    (topic, partition): (&str, i32),
    fetch_offset: i64,
    rack: &str,
    (log, listener): (&dyn PartitionOps, &str),
) -> Option<i32> {
    let cluster = backend.cluster()?;
    let me = cluster.node_id();
    let brokers = cluster.brokers(listener);
    let rack_of = |id: i32| {
        brokers
            .iter()
            .find(|b| b.id == id && !b.fenced && b.endpoint.is_some())
            .and_then(|b| b.rack.as_deref())
    };
    if rack_of(me) == Some(rack) {
        return None;
    }
    let layout = cluster
        .topic(topic)?
        .partitions
        .get(usize::try_from(partition).ok()?)?
        .clone();
    pick(
        layout
            .replicas
            .iter()
            .filter(|r| **r != me && rack_of(**r) == Some(rack))
            .filter_map(|r| Some((*r, log.in_sync_follower_log_end(*r)?))),
        fetch_offset,
    )
}

/// Of `(replica, log end)` candidates, the one with the most records that has copied
/// up to `fetch_offset` (the lower id on a tie).
fn pick(candidates: impl Iterator<Item = (i32, i64)>, fetch_offset: i64) -> Option<i32> {
    candidates
        .filter(|(_, end)| *end >= fetch_offset)
        .max_by_key(|(id, end)| (*end, -*id))
        .map(|(id, _)| id)
}

#[cfg(test)]
mod tests {
    use super::pick;

    #[test]
    fn the_follower_with_the_most_records_that_reached_the_offset_is_picked() {
        assert_eq!(pick([(2, 10), (3, 12)].into_iter(), 5), Some(3));
        assert_eq!(pick([(2, 12), (3, 12)].into_iter(), 5), Some(2));
        assert_eq!(pick([(2, 4), (3, 12)].into_iter(), 5), Some(3));
        assert_eq!(pick([(2, 4)].into_iter(), 5), None);
        assert_eq!(pick(std::iter::empty(), 0), None);
    }

    #[test]
    fn replica_selector_class_takes_kafkas_two_selectors_only() {
        let dir = tempfile::tempdir().unwrap();
        let rack_aware = |name: &str| {
            let broker = crate::broker::Broker::open(dir.path()).unwrap();
            crate::server::Server::builder(broker)
                .replica_selector_class(name)
                .map(|b| b.config.rack_aware_replica_selector)
        };
        let full = "org.apache.kafka.common.replica.RackAwareReplicaSelector";
        assert!(rack_aware(full).unwrap());
        assert!(rack_aware("RackAwareReplicaSelector").unwrap());
        assert!(!rack_aware("org.apache.kafka.common.replica.LeaderSelector").unwrap());
        let e = rack_aware("com.example.NearestSelector").unwrap_err();
        assert!(
            matches!(&e, crate::error::Error::InvalidConfig { key, .. } if key == "replica.selector.class"),
            "{e}"
        );
    }
}
