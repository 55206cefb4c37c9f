//! At most once: a proposal is applied once however many copies of it the metadata log
//! commits.
//!
//! A proposer proposes again what is not applied after a while (a leader change may have
//! dropped it), so two copies of one proposal can both be committed, possibly with other
//! records between them. Applying the second copy would undo what came in between (an
//! ACL deleted after it was created would come back). So the image remembers, per
//! proposing process (node id and incarnation), the request ids it applied, and applies
//! nothing for a copy of one of them.
//!
//! To stay bounded without a clock of its own, the image uses the proposer's: each
//! envelope carries when its proposal was issued and when its proposer stops proposing
//! it (milliseconds of that process's monotonic clock). Once the process has issued a
//! proposal past another's expiry, that other one is *expired*: its id is forgotten and
//! any copy of it still to come is refused, so forgetting can never let a copy through.
//! Only the last [`MAX_INCARNATIONS`] processes of each node are remembered, ordered by
//! when their first proposal was applied; a copy from an older one would be applied again
//! (it would have to outlive that many restarts of its proposer).

use std::collections::BTreeMap;

use super::{MetadataImage, Outcome, Rejected};
use crate::cluster::records::Envelope;

/// Processes remembered per node.
pub(crate) const MAX_INCARNATIONS: usize = 8;

/// What the image remembers of one proposing process.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ProposerWindow {
    /// The metadata log index of its first applied proposal (orders its node's
    /// processes).
    pub first_index: u64,
    /// The latest issue time among its applied proposals.
    pub latest_issued_ms: u64,
    /// Its applied request ids not yet expired, with their expiry.
    pub applied: BTreeMap<u64, u64>,
}

impl MetadataImage {
    /// Applies the record of `env` at `index`, unless a copy of the same proposal was
    /// applied before (`Rejected::Duplicate`, nothing changes) or its proposer had
    /// given up on it (`Rejected::Expired`). Envelopes of version 1 carry no stamp and
    /// are applied as they come.
    pub(crate) fn apply_envelope(&mut self, index: u64, env: &Envelope) -> Outcome {
        if let Some(stamp) = env.stamp {
            let key = (env.proposer, stamp.incarnation);
            if let Some(w) = self.proposals.get(&key) {
                if w.applied.contains_key(&env.request_id) {
                    self.index = index;
                    return Err(Rejected::Duplicate {
                        proposer: env.proposer,
                        request_id: env.request_id,
                    });
                }
                if stamp.expires_ms < w.latest_issued_ms {
                    self.index = index;
                    return Err(Rejected::Expired {
                        proposer: env.proposer,
                        request_id: env.request_id,
                    });
                }
            } else {
                self.forget_old_incarnations(env.proposer);
            }
            let w = self.proposals.entry(key).or_insert_with(|| ProposerWindow {
                first_index: index,
                ..ProposerWindow::default()
            });
            w.latest_issued_ms = w.latest_issued_ms.max(stamp.issued_ms);
            w.applied.insert(env.request_id, stamp.expires_ms);
            let latest = w.latest_issued_ms;
            w.applied.retain(|_, expires| *expires >= latest);
        }
        self.apply(index, &env.record)
    }

    /// Makes room for a new process of `node`: keeps its newest `MAX_INCARNATIONS - 1`.
    fn forget_old_incarnations(&mut self, node: i32) {
        let mut mine: Vec<(u64, u64)> = self
            .proposals
            .iter()
            .filter(|((n, _), _)| *n == node)
            .map(|((_, inc), w)| (w.first_index, *inc))
            .collect();
        if mine.len() < MAX_INCARNATIONS {
            return;
        }
        mine.sort_unstable();
        for (_, inc) in &mine[..=mine.len() - MAX_INCARNATIONS] {
            self.proposals.remove(&(node, *inc));
        }
    }
}
