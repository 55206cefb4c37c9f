//! Topic ids on the wire (Metadata v10+, ConsumerGroupHeartbeat, ConsumerGroupDescribe).
//!
//! A topic's id is derived from its name ([`crate::coordinator::topic_id`], the ids
//! consumer-protocol groups store in `__consumer_offsets`): every node of a cluster, and
//! a restarted node, answers the same id for a name without storing one. Unlike Kafka's
//! random ids, a topic deleted and created again under the same name keeps its id.

use std::collections::HashMap;

use uuid::Uuid;

use super::backend::Backend;

/// The id of topic `name`.
pub(crate) fn topic_id(name: &str) -> Uuid {
    Uuid::from_bytes(crate::coordinator::topic_id(name))
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
pub(crate) fn by_id<'a>(names: impl IntoIterator<Item = &'a String>) -> HashMap<Uuid, String> {
    names
        .into_iter()
        .map(|n| (topic_id(n), n.clone()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_stable_distinct_and_not_reserved() {
        assert_eq!(topic_id("orders"), topic_id("orders"));
        assert_ne!(topic_id("orders"), topic_id("orders2"));
        assert_ne!(topic_id(""), Uuid::nil());
        assert_eq!(topic_id("orders").get_version_num(), 8);
        let names = vec!["a".to_string(), "b".to_string()];
        assert_eq!(by_id(&names)[&topic_id("b")], "b");
    }
}
