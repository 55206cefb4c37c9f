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
//! An admin's snapshot of the next state epoch is conditional: it is refused
//! (FENCED_STATE_EPOCH, and the admin reads the state again) unless its snapshot epoch
//! is newer than every snapshot written of the share-partition, so a snapshot the data
//! partition's leader wrote between the admin's read and its write is not overwritten
//! by a state computed from an older one, with the leader's next updates taken as
//! updates of the admin's.
//!
//! A new leader of a data partition raises the fence before it reads a
//! share-partition's state: it writes an update with its leader epoch, no batches and
//! start offset -1 (Kafka's share coordinator writes the same record when a newer
//! leader reads a share-partition), so a deposed leader's write either lands before
//! that record, and is read, or is refused. An admin writes the same before its
//! snapshot.
//!
//! A deleted state (a snapshot with start offset -1) is forgotten, so the fence holds
//! only share-partitions with a state. As Kafka's share coordinator refuses a write to
//! a share-partition with no state, so does the fence, unless it is a new leader's
//! fence (which begins every first read): the leader of the data partition that still
//! holds the deleted state reads it again.

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

/// What the fence knows of the share-partitions of one state partition: only those
/// with a state, or a new leader's fence written before their first snapshot (a
/// deleted state is forgotten).
struct Table {
    /// The leader epoch of the state partition (this node's leadership) it was read at.
    leadership: i32,
    known: HashMap<ShareKey, Known>,
}

/// One share-partition as the fence knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Known {
    /// The newest leader epoch written of it.
    leader_epoch: i32,
    /// Its state epoch, None before its first snapshot.
    state: Option<StateEpoch>,
}

/// A share-partition's newest state epoch, the snapshot epoch its first snapshot had
/// (an update of an older snapshot epoch was made against an older state), and the
/// newest snapshot epoch written of it (a snapshot that starts a newer state epoch
/// must be newer than every snapshot: it was made against the state it read, and a
/// snapshot written since replaced that).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct StateEpoch {
    state: i32,
    since_snapshot: i32,
    newest_snapshot: i32,
}

/// Whether record `v` of `kind` is a new leader's fence: an update with no batches and
/// start offset -1.
fn is_fence(kind: i16, v: &ShareState) -> bool {
    kind == records::UPDATE && v.start_offset < 0 && v.batches.is_empty()
}

/// Why a record is refused.
enum Refused {
    LeaderEpoch(String),
    StateEpoch(String),
}

/// What the fence knows of a share-partition after record `v` of `kind`, from `now`
/// (None: nothing, or its state was deleted), or why the record is refused: an older
/// leader epoch than one written; a write other than a new leader's fence to a
/// share-partition with no state (deleted, or never written: Kafka refuses writes to an
/// uninitialized share-partition), or an update before its first snapshot; a snapshot
/// of an older state epoch; an update of an older snapshot epoch than the state
/// epoch's first snapshot. `live`: a write, not a record read back at a new leadership
/// (read back, a first snapshot is taken as it is: the fence before it may have been
/// pruned away); a write also refuses a snapshot that starts a newer state epoch (an
/// admin's) unless it is newer than every snapshot written: the state changed since
/// the admin read it. A snapshot with start offset -1 deletes the state: forgotten.
fn admit(
    now: Option<Known>,
    kind: i16,
    v: &ShareState,
    live: bool,
) -> Result<Option<Known>, Refused> {
    let fence = is_fence(kind, v);
    let Some(now) = now else {
        return match (fence, kind == records::SNAPSHOT && !live) {
            (true, _) => Ok(Some(Known {
                leader_epoch: v.leader_epoch,
                state: None,
            })),
            // Read back: the first snapshot of a share-partition whose earlier records
            // (and its leader's fence) were pruned away.
            (false, true) => Ok(admit_snapshot(v.leader_epoch, None, v)),
            (false, false) => Err(Refused::StateEpoch(
                "the share-partition has no state (deleted, or never written)".into(),
            )),
        };
    };
    let state = match now.state {
        Some(s) if kind == records::SNAPSHOT && v.state_epoch < s.state => {
            return Err(Refused::StateEpoch(format!(
                "a snapshot of state epoch {}, the state's is {}",
                v.state_epoch, s.state
            )));
        }
        Some(s)
            if live
                && kind == records::SNAPSHOT
                && v.state_epoch > s.state
                && v.snapshot_epoch <= s.newest_snapshot =>
        {
            return Err(Refused::StateEpoch(format!(
                "a snapshot of state epoch {} at snapshot epoch {}, snapshot epoch {} was written since the state was read",
                v.state_epoch, v.snapshot_epoch, s.newest_snapshot
            )));
        }
        Some(s) if !fence && kind == records::UPDATE && v.snapshot_epoch < s.since_snapshot => {
            return Err(Refused::StateEpoch(format!(
                "an update of snapshot epoch {}, state epoch {} began at snapshot epoch {}",
                v.snapshot_epoch, s.state, s.since_snapshot
            )));
        }
        None if !fence && kind == records::UPDATE => {
            return Err(Refused::StateEpoch(
                "an update of a share-partition with no snapshot".into(),
            ));
        }
        s => s,
    };
    if v.leader_epoch < now.leader_epoch {
        return Err(Refused::LeaderEpoch(format!(
            "written at leader epoch {}, this write is of leader epoch {}",
            now.leader_epoch, v.leader_epoch
        )));
    }
    Ok(match kind {
        records::SNAPSHOT => admit_snapshot(now.leader_epoch, state, v),
        _ => Some(Known {
            leader_epoch: now.leader_epoch.max(v.leader_epoch),
            state,
        }),
    })
}

/// What the fence knows after snapshot `v` of a share-partition known at `leader_epoch`
/// and `state`: a new state epoch, the same one with a newer snapshot, or nothing (a
/// deleted state).
fn admit_snapshot(leader_epoch: i32, state: Option<StateEpoch>, v: &ShareState) -> Option<Known> {
    if v.start_offset < 0 {
        return None;
    }
    let state = match state {
        Some(s) if v.state_epoch <= s.state => StateEpoch {
            newest_snapshot: s.newest_snapshot.max(v.snapshot_epoch),
            ..s
        },
        _ => StateEpoch {
            state: v.state_epoch,
            since_snapshot: v.snapshot_epoch,
            newest_snapshot: v.snapshot_epoch,
        },
    };
    Some(Known {
        leader_epoch: leader_epoch.max(v.leader_epoch),
        state: Some(state),
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
    /// against a state an admin replaced or deleted since, or is not a new leader's
    /// fence and its share-partition has no state ([`Error::FencedStateEpoch`]: its
    /// writer reads the state again). `scan` visits the partition's records, from its
    /// start; it is called when the leadership is new to the fence.
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
            let mut known = HashMap::new();
            scan(&mut |_, key, value| {
                if let Some((kind, k, v)) = records::decode(key, value)? {
                    // What a load skips is skipped here too.
                    if let Ok(next) = admit(known.get(&k).copied(), kind, &v, false) {
                        set(&mut known, k, next);
                    }
                }
                Ok(())
            })?;
            tables.insert(index, Table { leadership, known });
        }
        let table = tables.get_mut(&index).expect("made above");
        let location = format!("{SHARE_GROUP_STATE_TOPIC}-{index}");
        // What the fence knows after the records of `batches` checked so far.
        let mut after: Vec<(ShareKey, Option<Known>)> = Vec::new();
        let mut scratch = Vec::new();
        keyed_records(batches, 0, &location, &mut scratch, &mut |_, key, value| {
            let Some((kind, k, v)) = records::decode(key, value)? else {
                return Ok(());
            };
            let now = match after.iter().rev().find(|(r, _)| *r == k) {
                Some((_, n)) => *n,
                None => table.known.get(&k).copied(),
            };
            let what = |reason: String| {
                format!(
                    "share group {:?} partition {}: {reason}",
                    k.group, k.partition
                )
            };
            match admit(now, kind, &v, true) {
                Ok(next) => {
                    after.push((k, next));
                    Ok(())
                }
                Err(Refused::LeaderEpoch(r)) => Err(Error::FencedLeaderEpoch {
                    partition: location.clone(),
                    reason: what(r),
                }),
                Err(Refused::StateEpoch(r)) => Err(Error::FencedStateEpoch {
                    partition: location.clone(),
                    reason: what(r),
                }),
            }
        })?;
        let out = append()?;
        for (k, next) in after {
            set(&mut table.known, k, next);
        }
        Ok(out)
    }

    /// How many share-partitions the fence knows in partition `index`.
    #[cfg(test)]
    pub(super) fn known(&self, index: i32) -> usize {
        self.tables.lock().get(&index).map_or(0, |t| t.known.len())
    }
}

/// Records what the fence knows of `k` (forgets it on None).
fn set(known: &mut HashMap<ShareKey, Known>, k: ShareKey, next: Option<Known>) {
    match next {
        Some(n) => {
            known.insert(k, n);
        }
        None => {
            known.remove(&k);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::share_records::{SNAPSHOT, UPDATE};
    use super::*;

    fn key(group: &str) -> ShareKey {
        ShareKey {
            group: group.into(),
            topic_id: [7; 16],
            partition: 0,
        }
    }

    /// A new leader's fence of `group`'s share-partition at `leader_epoch`.
    fn fence_of(leader_epoch: i32) -> (i16, ShareState) {
        let v = ShareState {
            snapshot_epoch: 0,
            state_epoch: 0,
            leader_epoch,
            start_offset: -1,
            batches: Vec::new(),
        };
        (UPDATE, v)
    }

    /// A record of `kind` at leader epoch 1: (snapshot epoch, state epoch, start offset).
    fn rec(
        kind: i16,
        snapshot_epoch: i32,
        state_epoch: i32,
        start_offset: i64,
    ) -> (i16, ShareState) {
        let v = ShareState {
            snapshot_epoch,
            state_epoch,
            leader_epoch: 1,
            start_offset,
            batches: Vec::new(),
        };
        (kind, v)
    }

    type Log = Vec<(Vec<u8>, Vec<u8>)>;

    /// Appends record `r` of `group`'s share-partition to `log` through `fence` at
    /// `leadership`.
    fn put(
        fence: &ShareFence,
        log: &mut Log,
        leadership: i32,
        group: &str,
        r: (i16, ShareState),
    ) -> Result<()> {
        let k = records::key(r.0, &key(group));
        let v = records::value(r.0, &r.1);
        let mut b = crate::record::BatchBuilder::new();
        b.push(0, Some(&k), Some(&v), &[]);
        let batch = b.finish();
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

    /// A new leader's fence of `group`'s share-partition at `epoch`, through `fence`.
    fn write(
        fence: &ShareFence,
        log: &mut Log,
        leadership: i32,
        group: &str,
        epoch: i32,
    ) -> Result<()> {
        put(fence, log, leadership, group, fence_of(epoch))
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
        let (kind, v) = fence_of(9);
        let mut b = crate::record::BatchBuilder::new();
        b.push(
            0,
            Some(&records::key(kind, &key("g"))),
            Some(&records::value(kind, &v)),
            &[],
        );
        let batch = b.finish();
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

    /// Whether `fence` at `leadership` refuses each of `records` of `group`'s
    /// share-partition with FENCED_STATE_EPOCH, appending none.
    fn refuses(
        fence: &ShareFence,
        log: &mut Log,
        leadership: i32,
        group: &str,
        records: &[(i16, ShareState)],
    ) -> bool {
        let held = log.len();
        records.iter().all(|r| {
            let r = put(fence, log, leadership, group, r.clone());
            matches!(r, Err(Error::FencedStateEpoch { .. }))
        }) && log.len() == held
    }

    #[test]
    fn a_deleted_state_is_forgotten_and_a_stale_write_after_it_is_still_refused() {
        let fence = ShareFence::default();
        let mut log = Log::new();
        for group in ["g", "h"] {
            put(&fence, &mut log, 1, group, fence_of(1)).unwrap();
            put(&fence, &mut log, 1, group, rec(SNAPSHOT, 0, 0, 0)).unwrap();
        }
        put(&fence, &mut log, 1, "g", rec(UPDATE, 0, 0, 3)).unwrap();
        assert_eq!(fence.known(0), 2);
        // An admin deletes g's state (its fence, then a snapshot of the next state
        // epoch with start offset -1): forgotten.
        put(&fence, &mut log, 1, "g", fence_of(1)).unwrap();
        put(&fence, &mut log, 1, "g", rec(SNAPSHOT, 1, 1, -1)).unwrap();
        assert_eq!(fence.known(0), 1, "the table shrinks");
        // The leader of the data partition, still holding the old state, writes an
        // update and a snapshot of it: refused (no state: it reads it again).
        let stale = [rec(UPDATE, 0, 0, 5), rec(SNAPSHOT, 1, 0, 5)];
        assert!(refuses(&fence, &mut log, 1, "g", &stale));
        // The next leader of the state partition reads the log: g is not known there
        // either, and the same writes are refused.
        let next = ShareFence::default();
        put(&next, &mut log, 2, "h", rec(UPDATE, 0, 0, 1)).unwrap();
        assert_eq!(next.known(0), 1);
        assert!(refuses(&next, &mut log, 2, "g", &stale));
        // Read again, the leader starts g anew (its fence, then a first snapshot of the
        // deleted state's epochs): known again, and updates of it are taken.
        put(&next, &mut log, 2, "g", fence_of(1)).unwrap();
        assert!(
            refuses(&next, &mut log, 2, "g", &stale[..1]),
            "no snapshot yet"
        );
        put(&next, &mut log, 2, "g", rec(SNAPSHOT, 2, 1, 7)).unwrap();
        put(&next, &mut log, 2, "g", rec(UPDATE, 2, 1, 8)).unwrap();
        assert_eq!(next.known(0), 2);
        // A share-partition never written takes nothing but a leader's fence first.
        let first = [rec(SNAPSHOT, 0, 0, 0), rec(UPDATE, 0, 0, 0)];
        assert!(refuses(&next, &mut log, 2, "new", &first));
        assert_eq!(next.known(0), 2);
    }
}
