//! The write fence of `__share_group_state` on a cluster, kept by the leader of each of
//! its partitions: a record of a share-partition whose `LeaderEpoch` is older than one
//! already written for that share-partition is refused when it is written
//! (FENCED_LEADER_EPOCH), not only skipped when the state is read back. A deposed
//! leader of a data partition that has not learnt of its deposition yet is thus told
//! that its acknowledgement did not count, instead of answering it as done while the
//! next leader delivers the records again.
//!
//! Every write of a state partition led here goes through [`ShareFence::append`] (the
//! coordinator's own and the Produce of other nodes'), which checks and appends under
//! the fence's lock, so no write slips between the check of another and its append.
//! The newest leader epoch of each share-partition is read from the state partition's
//! log when this node's leadership of it begins (a new leader of the state partition
//! has every record that was acknowledged), then kept up to date by the appends.
//!
//! A share-partition's state epoch moves when an admin sets or deletes its start offset
//! (a snapshot of the next state epoch): a snapshot of an older state epoch, or an update
//! of an older snapshot epoch than the first snapshot of the state epoch, was made
//! against the state the admin replaced and is refused (FENCED_STATE_EPOCH); the leader
//! of the data partition that wrote it reads the state again.
//!
//! A new leader of a data partition raises the fence before it reads a
//! share-partition's state: it writes an update with its leader epoch, no batches and
//! start offset -1 (Kafka's share coordinator writes the same record when a newer
//! leader reads a share-partition), so a deposed leader's write either lands before
//! that record, and is read, or is refused.

use std::collections::HashMap;

use parking_lot::Mutex;

use super::share_records::{self as records, SHARE_GROUP_STATE_TOPIC, ShareKey, ShareState};
use super::share_shell::{RecordVisitor, keyed_records};
use crate::error::{Error, Result};

/// The fence of the state partitions this node leads: see the module documentation.
#[derive(Default)]
pub(crate) struct ShareFence {
    /// By index of `__share_group_state`.
    tables: Mutex<HashMap<i32, Table>>,
}

/// The newest leader epoch written of each share-partition of one state partition,
/// and its state epoch.
struct Table {
    /// The leader epoch of the state partition (this node's leadership) it was read at.
    leadership: i32,
    epochs: HashMap<ShareKey, i32>,
    states: HashMap<ShareKey, StateEpoch>,
}

/// A share-partition's newest state epoch, and the snapshot epoch its first snapshot
/// had: an update of an older snapshot epoch was made against an older state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct StateEpoch {
    state: i32,
    since_snapshot: i32,
}

/// The state epoch `kind` record `v` starts, if it starts one (a snapshot of a newer
/// state epoch than `now`, or the first snapshot seen).
fn starts(kind: i16, v: &ShareState, now: Option<StateEpoch>) -> Option<StateEpoch> {
    let newer = now.is_none_or(|n| v.state_epoch > n.state);
    (kind == records::SNAPSHOT && newer).then_some(StateEpoch {
        state: v.state_epoch,
        since_snapshot: v.snapshot_epoch,
    })
}

/// Why record `v` of `kind` was made against an older state than `now`, if it was: a
/// snapshot of an older state epoch, or an update (not a new leader's fence) of an
/// older snapshot epoch than the state's first snapshot.
fn stale(kind: i16, v: &ShareState, now: StateEpoch) -> Option<String> {
    if kind == records::SNAPSHOT && v.state_epoch < now.state {
        return Some(format!(
            "a snapshot of state epoch {}, the state's is {}",
            v.state_epoch, now.state
        ));
    }
    let fence = v.start_offset < 0 && v.batches.is_empty();
    (kind == records::UPDATE && !fence && v.snapshot_epoch < now.since_snapshot).then(|| {
        format!(
            "an update of snapshot epoch {}, state epoch {} began at snapshot epoch {}",
            v.snapshot_epoch, now.state, now.since_snapshot
        )
    })
}

impl std::fmt::Debug for ShareFence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShareFence")
            .field("partitions", &self.tables.lock().len())
            .finish()
    }
}

impl ShareFence {
    /// Runs `append` (which appends the record batches `batches` to partition `index`
    /// of `__share_group_state`, led here at leader epoch `leadership`) unless a record
    /// of `batches` has an older leader epoch than its share-partition already has:
    /// then [`Error::FencedLeaderEpoch`] and nothing is appended; nor when one was made
    /// against a state an admin replaced since ([`Error::FencedStateEpoch`]). `scan`
    /// visits the
    /// partition's records, from its start; it is called when the leadership is new to
    /// the fence.
    pub(crate) fn append<T>(
        &self,
        index: i32,
        leadership: i32,
        batches: &[u8],
        scan: impl FnOnce(&mut RecordVisitor<'_>) -> Result<()>,
        append: impl FnOnce() -> Result<T>,
    ) -> Result<T> {
        let mut tables = self.tables.lock();
        if tables
            .get(&index)
            .is_none_or(|t| t.leadership != leadership)
        {
            let mut epochs = HashMap::new();
            let mut states = HashMap::new();
            scan(&mut |_, key, value| {
                if let Some((kind, k, v)) = records::decode(key, value)? {
                    if let Some(s) = starts(kind, &v, states.get(&k).copied()) {
                        states.insert(k.clone(), s);
                    }
                    raise(&mut epochs, k, v.leader_epoch);
                }
                Ok(())
            })?;
            tables.insert(
                index,
                Table {
                    leadership,
                    epochs,
                    states,
                },
            );
        }
        let table = tables.get_mut(&index).expect("made above");
        let location = format!("{SHARE_GROUP_STATE_TOPIC}-{index}");
        let mut raised: Vec<(ShareKey, i32)> = Vec::new();
        let mut started: Vec<(ShareKey, StateEpoch)> = Vec::new();
        let mut scratch = Vec::new();
        keyed_records(batches, 0, &location, &mut scratch, &mut |_, key, value| {
            let Some((kind, k, v)) = records::decode(key, value)? else {
                return Ok(());
            };
            let state = started
                .iter()
                .rev()
                .find(|(r, _)| *r == k)
                .map(|(_, s)| *s)
                .or_else(|| table.states.get(&k).copied());
            if let Some(reason) = state.and_then(|now| stale(kind, &v, now)) {
                return Err(Error::FencedStateEpoch {
                    partition: location.clone(),
                    reason: format!(
                        "share group {:?} partition {}'s state was replaced: {reason}",
                        k.group, k.partition
                    ),
                });
            }
            if let Some(s) = starts(kind, &v, state) {
                started.push((k.clone(), s));
            }
            let newest = raised
                .iter()
                .filter(|(r, _)| *r == k)
                .map(|(_, e)| *e)
                .chain(table.epochs.get(&k).copied())
                .max();
            if let Some(newest) = newest
                && v.leader_epoch < newest
            {
                return Err(Error::FencedLeaderEpoch {
                    partition: location.clone(),
                    reason: format!(
                        "share group {:?} partition {}'s state was written at leader epoch {newest}, this write is of leader epoch {}",
                        k.group, k.partition, v.leader_epoch
                    ),
                });
            }
            raised.push((k, v.leader_epoch));
            Ok(())
        })?;
        let out = append()?;
        for (k, epoch) in raised {
            raise(&mut table.epochs, k, epoch);
        }
        table.states.extend(started);
        Ok(out)
    }
}

fn raise(epochs: &mut HashMap<ShareKey, i32>, k: ShareKey, epoch: i32) {
    let e = epochs.entry(k).or_insert(epoch);
    *e = (*e).max(epoch);
}

#[cfg(test)]
mod tests {
    use super::super::share_records::UPDATE;
    use super::*;

    fn key(group: &str) -> ShareKey {
        ShareKey {
            group: group.into(),
            topic_id: [7; 16],
            partition: 0,
        }
    }

    /// A batch of one update of `group`'s share-partition at `leader_epoch`.
    fn update(group: &str, leader_epoch: i32) -> (Vec<u8>, Vec<u8>, Vec<u8>) {
        let k = records::key(UPDATE, &key(group));
        let v = records::value(
            UPDATE,
            &ShareState {
                snapshot_epoch: 0,
                state_epoch: 0,
                leader_epoch,
                start_offset: -1,
                batches: Vec::new(),
            },
        );
        let mut b = crate::record::BatchBuilder::new();
        b.push(0, Some(&k), Some(&v), &[]);
        (b.finish(), k, v)
    }

    /// A log of (key, value) records, appended through `fence` at `leadership`.
    fn write(
        fence: &ShareFence,
        log: &mut Vec<(Vec<u8>, Vec<u8>)>,
        leadership: i32,
        group: &str,
        epoch: i32,
    ) -> Result<()> {
        let (batch, k, v) = update(group, epoch);
        let before = log.clone();
        fence.append(
            0,
            leadership,
            &batch,
            |f| {
                for (i, (k, v)) in before.iter().enumerate() {
                    f(i as i64, k, Some(v))?;
                }
                Ok(())
            },
            || {
                log.push((k, v));
                Ok(())
            },
        )
    }

    #[test]
    fn an_older_leader_epochs_write_is_refused_and_not_appended() {
        let fence = ShareFence::default();
        let mut log = Vec::new();
        write(&fence, &mut log, 1, "g", 3).unwrap();
        write(&fence, &mut log, 1, "g", 3).unwrap();
        let e = write(&fence, &mut log, 1, "g", 2).unwrap_err();
        assert!(matches!(e, Error::FencedLeaderEpoch { .. }), "{e}");
        assert_eq!(log.len(), 2);
        // Another share-partition has its own epochs; a newer epoch raises the fence.
        write(&fence, &mut log, 1, "other", 1).unwrap();
        write(&fence, &mut log, 1, "g", 4).unwrap();
        assert!(write(&fence, &mut log, 1, "g", 3).is_err());
        assert_eq!(log.len(), 4);
    }

    #[test]
    fn a_new_leadership_of_the_state_partition_reads_the_epochs_from_its_log() {
        let mut log = Vec::new();
        write(&ShareFence::default(), &mut log, 1, "g", 5).unwrap();
        // Another node leads the state partition now, with the same log: its fence
        // knows epoch 5 without having written it.
        let next = ShareFence::default();
        assert!(write(&next, &mut log, 2, "g", 4).is_err());
        write(&next, &mut log, 2, "g", 5).unwrap();
        // A write that fails to append raises nothing.
        let (batch, _, _) = update("g", 9);
        let failed: Result<()> = next.append(
            0,
            2,
            &batch,
            |_| Ok(()),
            || Err(Error::Closed("log".into())),
        );
        assert!(failed.is_err());
        write(&next, &mut log, 2, "g", 6).unwrap();
    }
}
