//! Metadata listeners: what is told about every new image ([`MetadataListener`]), and
//! how it sees it ([`MetadataUpdate`]).

use super::image::{LocalChanges, MetadataImage, local_changes};

/// A new image, as listeners see it.
pub(crate) struct MetadataUpdate<'a> {
    /// This node.
    pub node_id: i32,
    /// The image before (empty at the first publication).
    pub previous: &'a MetadataImage,
    /// The image now.
    pub current: &'a MetadataImage,
    /// True once this node's metadata includes its own registration: everything it ever
    /// applied before is in `current`.
    pub caught_up: bool,
}

impl MetadataUpdate<'_> {
    /// How this node's replicas changed.
    pub(crate) fn local_changes(&self) -> LocalChanges {
        local_changes(self.node_id, self.previous, self.current)
    }
}

/// Told about every new image, in order, on the publisher thread, before the image is
/// visible to readers and before the proposers of its records are woken.
pub(crate) trait MetadataListener: Send + Sync {
    /// A new image.
    fn on_metadata(&self, update: &MetadataUpdate<'_>);

    /// The node's metadata quorum stopped for good (its Raft thread failed or
    /// panicked): no image will follow, so what the last one said must no longer be
    /// acted on.
    fn on_node_failed(&self) {}
}
