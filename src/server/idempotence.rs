//! Idempotent producers: the producer ids this server hands out.
//!
//! The per-partition sequence checks (Kafka's `ProducerStateManager`) live with each
//! partition's log (`storage::producer_state`, `PartitionLog::append_idempotent`), where
//! every append, a leader's or a follower's, keeps them current and snapshots make a
//! restart cheap. What stays here is the allocation of producer ids. A single node hands
//! them out from blocks of [`ID_BLOCK`] whose upper end is written to
//! `<data dir>/producer-id-block` (crash-safe checkpoint) before any id of the block is
//! used, so an id is never given twice, across restarts too; a cluster node reserves its
//! blocks through the controller instead.

use std::path::PathBuf;

use parking_lot::Mutex;

use crate::error::Result;

/// Producer ids reserved on disk at a time.
pub(crate) const ID_BLOCK: i64 = 1000;

/// The next producer ids to hand out.
#[derive(Debug)]
struct IdBlock {
    /// Next id to give.
    next: i64,
    /// First id not reserved on disk.
    limit: i64,
}

/// Reserves a block of producer ids cluster-wide (a cluster node asks its controller):
/// given the block size, returns the block's first id.
pub(crate) type BlockSource = Box<dyn Fn(i64) -> Result<i64> + Send + Sync>;

/// Producer ids of one server.
pub(crate) struct ProducerIds {
    /// Where the reserved id block is recorded.
    block_file: PathBuf,
    ids: Mutex<Option<IdBlock>>,
    /// On a cluster node, blocks come from the controller instead of `block_file`.
    block_source: Option<BlockSource>,
}

impl std::fmt::Debug for ProducerIds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProducerIds")
            .field("block_file", &self.block_file)
            .field("cluster_blocks", &self.block_source.is_some())
            .finish_non_exhaustive()
    }
}

impl ProducerIds {
    /// Ids for a broker whose data directory is `dir`.
    pub(crate) fn new(dir: PathBuf) -> ProducerIds {
        ProducerIds {
            block_file: dir.join("producer-id-block"),
            ids: Mutex::new(None),
            block_source: None,
        }
    }

    /// Ids for a cluster node: blocks are reserved through `source`, so no two nodes
    /// hand out the same id.
    pub(crate) fn with_block_source(dir: PathBuf, source: BlockSource) -> ProducerIds {
        ProducerIds {
            block_source: Some(source),
            ..ProducerIds::new(dir)
        }
    }

    /// A new producer id, never handed out before by this data directory (by this
    /// cluster, on a cluster node).
    pub(crate) fn new_producer_id(&self) -> Result<i64> {
        let mut ids = self.ids.lock();
        if let Some(source) = &self.block_source {
            if ids.as_ref().is_none_or(|b| b.next >= b.limit) {
                let start = source(ID_BLOCK)?;
                *ids = Some(IdBlock {
                    next: start,
                    limit: start + ID_BLOCK,
                });
            }
            let block = ids.as_mut().expect("set above");
            let id = block.next;
            block.next += 1;
            return Ok(id);
        }
        let block = match ids.as_mut() {
            Some(b) => b,
            None => {
                let start = match crate::storage::read_checkpoint(&self.block_file)? {
                    Some(bytes) if bytes.len() == 8 => {
                        i64::from_be_bytes(bytes[..8].try_into().unwrap_or([0; 8]))
                    }
                    Some(_) => {
                        return Err(crate::error::Error::corrupt(
                            self.block_file.display(),
                            0,
                            "a producer id block is 8 bytes",
                        ));
                    }
                    None => 0,
                };
                ids.insert(IdBlock {
                    next: start,
                    limit: start,
                })
            }
        };
        if block.next >= block.limit {
            let limit = block.next + ID_BLOCK;
            crate::storage::write_checkpoint(&self.block_file, &limit.to_be_bytes())?;
            block.limit = limit;
        }
        let id = block.next;
        block.next += 1;
        Ok(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn producer_ids_are_never_reused_across_restarts() {
        let dir = tempfile::tempdir().unwrap();
        let a = ProducerIds::new(dir.path().to_path_buf());
        let first: Vec<i64> = (0..3).map(|_| a.new_producer_id().unwrap()).collect();
        assert_eq!(first, vec![0, 1, 2]);
        drop(a);
        let b = ProducerIds::new(dir.path().to_path_buf());
        let next = b.new_producer_id().unwrap();
        assert!(next >= ID_BLOCK, "{next}");
    }
}
