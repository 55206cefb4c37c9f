//! A node's metadata image as its own disk has it, and the read-only opening of a
//! cluster node's data directory on that image (for `tidelog consume`, `topics
//! describe` and `groups describe` on a stopped node's disk).
//!
//! The image is the node's snapshot with the entries of its log after it applied, as the
//! node applies them: the metadata it last knew, which the cluster may have moved past
//! since. The node's stored commit index lags (it is persisted with the next hard
//! state), so every entry is applied: the last ones of a node cut off from its leader
//! may not have been committed.

use std::path::Path;

use raft::prelude::EntryType;

use super::{MetadataImage, TopicImage};
use crate::broker::{Broker, BrokerBuilder, CLUSTER_METADATA_DIR, ClusterTopic};
use crate::cluster::records::Envelope;
use crate::cluster::storage;
use crate::error::{Error, Result};
use crate::storage::codec;

/// What a cluster node's own metadata said when it stopped: the view
/// [`BrokerBuilder::open_cluster_node_read_only`] opens its data directory with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterNodeMetadata {
    /// The node's id (Kafka's `node.id`).
    pub node_id: i32,
    /// The cluster's id, once the node had learnt it.
    pub cluster_id: Option<String>,
    /// The index of the last entry of the node's metadata log (the view is the
    /// metadata as of that entry).
    pub index: u64,
    /// Topics in that metadata (internal ones included).
    pub topics: usize,
}

impl TopicImage {
    /// The topic as node `node_id`'s broker holds it: the partitions it has a replica
    /// of.
    pub(crate) fn for_node(&self, node_id: i32) -> ClusterTopic {
        ClusterTopic {
            name: self.name.clone(),
            id: codec::uuid_base64(&self.id),
            partition_count: self.partitions.len() as i32,
            hosted: (0..self.partitions.len() as i32)
                .filter(|p| self.partitions[*p as usize].hosts(node_id))
                .collect(),
            config: self.config(),
            internal: self.internal,
        }
    }
}

impl MetadataImage {
    /// The image a node's metadata directory `meta_dir` holds (its snapshot and the
    /// entries after it, applied as the node applies them), and the node's id.
    /// Reads only.
    pub(crate) fn read_stored(meta_dir: &Path) -> Result<(i32, MetadataImage)> {
        let (raft_id, snapshot, entries) = storage::read_stored(meta_dir)?;
        let mut image = if snapshot.get_metadata().index > 0 {
            let location = meta_dir.join(storage::SNAPSHOT_FILE).display().to_string();
            MetadataImage::decode(&snapshot.data, &location)?
        } else {
            MetadataImage::default()
        };
        for e in entries {
            if e.data.is_empty() || e.get_entry_type() != EntryType::EntryNormal {
                image.index = image.index.max(e.index);
                continue;
            }
            let location = format!("metadata log entry {}", e.index);
            match Envelope::decode(&e.data, &location) {
                // A rejected record leaves the image as it was, on every node alike.
                Ok(env) => drop(image.apply(e.index, &env.record)),
                Err(_) => image.index = e.index,
            }
        }
        let node_id = i32::try_from(raft_id.saturating_sub(1)).map_err(|_| {
            Error::corrupt(
                meta_dir.join(storage::STATE_FILE).display(),
                0,
                format!("raft id {raft_id} is not a node id"),
            )
        })?;
        Ok((node_id, image))
    }
}

impl BrokerBuilder {
    /// Opens a cluster node's data directory read-only, with the topics of the node's
    /// own metadata (its `__cluster_metadata-0` snapshot and log entries): for
    /// looking at a stopped node's disk, or one that another process serves. The broker
    /// holds the partitions the node has a replica of, read up to their log end (what
    /// the node wrote, committed or not), and the committed offsets of its
    /// `__consumer_offsets`; nothing is written, and as with
    /// [`Broker::open_read_only`] creating, deleting, appending and committing are
    /// refused. The metadata is the node's last known, which the cluster may have
    /// moved past: [`ClusterNodeMetadata`] says which.
    ///
    /// Errors: the directory is not a cluster node's (use [`Broker::open_read_only`]),
    /// or its metadata files do not decode (named with the file and position).
    pub fn open_cluster_node_read_only(self) -> Result<(Broker, ClusterNodeMetadata)> {
        let meta_dir = self.dir().join(CLUSTER_METADATA_DIR);
        if !crate::broker::is_cluster_dir(self.dir()) {
            return Err(Error::InvalidConfig {
                key: "node.id".into(),
                reason: format!(
                    "{} is not a cluster node's data directory (it has no {CLUSTER_METADATA_DIR}/{}): open it with Broker::open_read_only",
                    self.dir().display(),
                    storage::STATE_FILE
                ),
            });
        }
        let (node_id, image) = MetadataImage::read_stored(&meta_dir)?;
        let topics: Vec<ClusterTopic> =
            image.topics.values().map(|t| t.for_node(node_id)).collect();
        let broker = self.open_read_only_with_node_topics(&topics)?;
        let view = ClusterNodeMetadata {
            node_id,
            cluster_id: image.cluster_id.clone(),
            index: image.index,
            topics: topics.len(),
        };
        Ok((broker, view))
    }
}
