//! Topic ids on the wire (ConsumerGroupHeartbeat, ConsumerGroupDescribe).
//!
//! The ids are the topics' own (KIP-516): drawn at each creation and kept with the topic
//! (in `partition.metadata` on a single node, in the metadata image on a cluster), the
//! ids Metadata v10+ answers, so that a client can resolve an assignment's topic ids
//! through Metadata. A topic deleted and created again gets a new id.

use std::collections::HashMap;

use uuid::Uuid;

use super::backend::Backend;

/// The id of topic `name` (the nil id for a topic that does not exist).
pub(crate) fn topic_id(backend: &dyn Backend, name: &str) -> Uuid {
    backend
        .topic_id(name)
        .map(Uuid::from_bytes)
        .unwrap_or_default()
}

/// Every topic of the backend (of the cluster on a cluster node) with its partition
/// count.
pub(crate) fn topics_with_counts(backend: &dyn Backend) -> Vec<(String, i32)> {
    match backend.cluster() {
        Some(cluster) => {
            let names = cluster.topic_names();
            let layouts = cluster.topics(&names);
            names
                .into_iter()
                .zip(layouts)
                .filter_map(|(n, l)| l.map(|l| (n, l.partitions.len() as i32)))
                .collect()
        }
        None => backend
            .topic_names()
            .into_iter()
            .filter_map(|n| backend.partition_count(&n).map(|c| (n, c)))
            .collect(),
    }
}

/// The names of `names` by their ids.
pub(crate) fn by_id<'a>(
    backend: &dyn Backend,
    names: impl IntoIterator<Item = &'a String>,
) -> HashMap<Uuid, String> {
    names
        .into_iter()
        .filter_map(|n| Some((Uuid::from_bytes(backend.topic_id(n)?), n.clone())))
        .collect()
}
