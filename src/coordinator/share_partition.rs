//! One share-partition's delivery state (KIP-932): which records of a topic partition a
//! share group has in flight, who holds each, and how often each was delivered.
//!
//! A pure state machine in the style of [`Group`](super::Group): every transition takes
//! the request and an explicit `now` and returns an answer or a typed [`ShareError`];
//! no threads, no clock, no I/O. The shell (`share_shell.rs`) owns the lock and writes
//! every change to `__share_group_state` (`share_records.rs`).
//!
//! The records between the *start offset* and the *end offset* are in flight: each is
//! available, acquired by one member until its lock expires, acknowledged or archived.
//! Records before the start offset are complete (acknowledged or archived); records
//! from the end offset on were never fetched. The start offset moves over complete
//! records as soon as they are the first in flight.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use crate::config::ShareConfig;
use crate::error::{RecordState, ShareError};

/// How a member acknowledges a record it acquired (Kafka's `AcknowledgeType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AcknowledgeType {
    /// Processed: never delivered again.
    Accept,
    /// Not processed: made available to the group again (archived instead once its
    /// delivery count reached the limit).
    Release,
    /// Unprocessable: never delivered again (archived).
    Reject,
}

impl AcknowledgeType {
    /// Kafka's number of the type on the wire: 1 accept, 2 release, 3 reject (0 marks a
    /// gap in ShareFetch and ShareAcknowledge, never a record's acknowledgement).
    pub fn id(self) -> i8 {
        match self {
            AcknowledgeType::Accept => 1,
            AcknowledgeType::Release => 2,
            AcknowledgeType::Reject => 3,
        }
    }

    /// The type of Kafka's number, `None` for any other number.
    pub fn from_id(id: i8) -> Option<AcknowledgeType> {
        match id {
            1 => Some(AcknowledgeType::Accept),
            2 => Some(AcknowledgeType::Release),
            3 => Some(AcknowledgeType::Reject),
            _ => None,
        }
    }
}

/// The limits a share-partition works under (from [`ShareConfig`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShareLimits {
    /// How long an acquisition lock lasts (`group.share.record.lock.duration.ms`).
    pub lock_duration: Duration,
    /// Deliveries of a record at most (`group.share.delivery.count.limit`).
    pub delivery_count_limit: i16,
    /// Records in flight at most (`group.share.partition.max.record.locks`).
    pub max_record_locks: usize,
}

impl From<&ShareConfig> for ShareLimits {
    fn from(c: &ShareConfig) -> Self {
        ShareLimits {
            lock_duration: c.record_lock_duration,
            delivery_count_limit: c.delivery_count_limit.max(1),
            max_record_locks: c.partition_max_record_locks.max(1),
        }
    }
}

impl Default for ShareLimits {
    fn default() -> Self {
        ShareLimits::from(&ShareConfig::default())
    }
}

/// A record handed to a member by [`SharePartition::acquire`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AcquiredRecord {
    /// Its offset.
    pub offset: i64,
    /// How many times it has been delivered, this delivery included (1 the first time).
    pub delivery_count: i16,
}

/// A run of consecutive records with one state and delivery count: how the state is
/// written to `__share_group_state` (Kafka's `StateBatch`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateBatch {
    /// Offset of the first record.
    pub first_offset: i64,
    /// Offset of the last record (inclusive).
    pub last_offset: i64,
    /// The records' state. An acquired record is written as available: a lock does
    /// not outlive the coordinator that granted it.
    pub state: RecordState,
    /// Their delivery count.
    pub delivery_count: i16,
}

#[derive(Debug, Clone)]
struct InFlight {
    state: RecordState,
    delivery_count: i16,
    /// The member holding it, while acquired.
    holder: Option<String>,
    /// When its acquisition lock expires, while acquired.
    lock_expires: Option<Instant>,
}

impl InFlight {
    /// The state written to `__share_group_state`.
    fn persisted_state(&self) -> RecordState {
        match self.state {
            RecordState::Acquired => RecordState::Available,
            s => s,
        }
    }
}

/// The delivery state of one share-partition: see the module documentation.
#[derive(Debug, Clone)]
pub struct SharePartition {
    start: i64,
    end: i64,
    records: BTreeMap<i64, InFlight>,
    limits: ShareLimits,
    /// Offsets whose state changed since the last [`SharePartition::take_changes`].
    changed: BTreeSet<i64>,
    /// The start offset as last taken by [`SharePartition::take_changes`].
    taken_start: i64,
}

impl SharePartition {
    /// A share-partition with nothing in flight, starting at `start_offset` (the log's
    /// start or end, as `share.auto.offset.reset` says).
    pub fn new(start_offset: i64, limits: ShareLimits) -> SharePartition {
        SharePartition {
            start: start_offset,
            end: start_offset,
            records: BTreeMap::new(),
            limits,
            changed: BTreeSet::new(),
            taken_start: start_offset,
        }
    }

    /// A share-partition rebuilt from its persisted state: the start offset and the
    /// state batches of the records in flight (acquired ones come back available).
    pub fn restore(start_offset: i64, batches: &[StateBatch], limits: ShareLimits) -> Self {
        let mut p = SharePartition::new(start_offset, limits);
        p.apply(start_offset, batches);
        p.taken_start = p.start;
        p
    }

    /// Applies a persisted update: the new start offset, and the state of the records
    /// the batches name (records before the start offset are dropped).
    pub fn apply(&mut self, start_offset: i64, batches: &[StateBatch]) {
        self.start = start_offset;
        self.end = self.end.max(start_offset);
        self.records = self.records.split_off(&start_offset);
        for b in batches {
            for offset in b.first_offset.max(start_offset)..=b.last_offset {
                // A record held when the state was written lost its lock with the
                // coordinator: available again, or archived if that was its last
                // delivery (as a lock expiring then).
                let state = match b.state {
                    RecordState::Acquired | RecordState::Available
                        if b.delivery_count >= self.limits.delivery_count_limit =>
                    {
                        RecordState::Archived
                    }
                    RecordState::Acquired => RecordState::Available,
                    s => s,
                };
                self.records.insert(
                    offset,
                    InFlight {
                        state,
                        delivery_count: b.delivery_count,
                        holder: None,
                        lock_expires: None,
                    },
                );
                self.end = self.end.max(offset + 1);
            }
        }
        self.advance_start();
        self.changed.clear();
        self.taken_start = self.start;
    }

    /// The limits it works under.
    pub fn limits(&self) -> ShareLimits {
        self.limits
    }

    /// Sets how long the records acquired from now on stay locked (the group's
    /// `share.record.lock.duration.ms`); locks held keep their expiry.
    pub fn set_lock_duration(&mut self, lock_duration: Duration) {
        self.limits.lock_duration = lock_duration;
    }

    /// The first offset that may still be delivered: every record before it is
    /// acknowledged or archived.
    pub fn start_offset(&self) -> i64 {
        self.start
    }

    /// The offset after the last record ever fetched.
    pub fn end_offset(&self) -> i64 {
        self.end
    }

    /// Where a fetch for the group reads from: the first available record in flight,
    /// else the end offset.
    pub fn fetch_offset(&self) -> i64 {
        self.records
            .iter()
            .find(|(_, r)| r.state == RecordState::Available)
            .map_or(self.end, |(o, _)| *o)
    }

    /// The state and delivery count of the record at `offset`, while it is in flight;
    /// `None` before the start offset (complete), or from the end offset on (never
    /// fetched), or for an offset with no record.
    pub fn state_of(&self, offset: i64) -> Option<(RecordState, i16)> {
        self.records
            .get(&offset)
            .map(|r| (r.state, r.delivery_count))
    }

    /// The member holding the record at `offset`, while it is acquired.
    pub fn holder_of(&self, offset: i64) -> Option<&str> {
        self.records.get(&offset).and_then(|r| r.holder.as_deref())
    }

    /// Records in flight (not before the start offset, fetched at least once).
    pub fn in_flight(&self) -> usize {
        self.records.len()
    }

    /// Records acquired now.
    pub fn acquired(&self) -> usize {
        self.records
            .values()
            .filter(|r| r.state == RecordState::Acquired)
            .count()
    }

    /// When the next acquisition lock expires, if any record is acquired.
    pub fn next_lock_expiry(&self) -> Option<Instant> {
        self.records.values().filter_map(|r| r.lock_expires).min()
    }

    /// Ends every acquisition lock that expired by `now`: the record becomes available,
    /// or archived when it was delivered `delivery.count.limit` times. Returns their
    /// offsets.
    pub fn expire_locks(&mut self, now: Instant) -> Vec<i64> {
        let expired: Vec<i64> = self
            .records
            .iter()
            .filter(|(_, r)| r.lock_expires.is_some_and(|t| t <= now))
            .map(|(o, _)| *o)
            .collect();
        for &o in &expired {
            self.release_one(o);
        }
        self.advance_start();
        expired
    }

    /// Acquires for `member` up to `max_records` records among `offsets`, the offsets of
    /// the records a read of the log from [`fetch_offset`](Self::fetch_offset) found
    /// (in order), that read having ended at `read_end`. A record is acquired when it is
    /// in flight and available, or new (at or after the end offset) while fewer than
    /// `max.record.locks` records are in flight. Expired locks end first. Each acquired
    /// record's delivery count goes up by one and its lock lasts `lock.duration`.
    pub fn acquire(
        &mut self,
        member: &str,
        offsets: &[i64],
        read_end: i64,
        max_records: usize,
        now: Instant,
    ) -> Vec<AcquiredRecord> {
        self.expire_locks(now);
        let mut out = Vec::new();
        let mut stopped = false;
        let mut last = i64::MIN;
        for &offset in offsets {
            if offset <= last || offset < self.start {
                continue;
            }
            last = offset;
            if out.len() >= max_records {
                stopped = true;
                break;
            }
            if offset < self.end {
                match self.records.get(&offset) {
                    Some(r) if r.state == RecordState::Available => {}
                    _ => continue,
                }
            } else if self.records.len() >= self.limits.max_record_locks {
                stopped = true;
                break;
            } else {
                self.records.insert(
                    offset,
                    InFlight {
                        state: RecordState::Available,
                        delivery_count: 0,
                        holder: None,
                        lock_expires: None,
                    },
                );
                self.end = offset + 1;
            }
            let r = self.records.get_mut(&offset).expect("checked or inserted");
            r.state = RecordState::Acquired;
            r.delivery_count = r.delivery_count.saturating_add(1);
            r.holder = Some(member.to_string());
            r.lock_expires = Some(now + self.limits.lock_duration);
            self.changed.insert(offset);
            out.push(AcquiredRecord {
                offset,
                delivery_count: r.delivery_count,
            });
        }
        if !stopped && read_end > self.end && self.records.len() < self.limits.max_record_locks {
            // Offsets of the read with no record (markers, aborted or compacted away).
            self.end = read_end;
        }
        self.advance_start();
        out
    }

    /// `member` acknowledges the record at `offset`: accepted (acknowledged), released
    /// (available again, or archived at the delivery limit) or rejected (archived).
    /// Expired locks end first, so a record whose lock expired is no longer the
    /// member's. Returns the record's new state.
    pub fn acknowledge(
        &mut self,
        member: &str,
        offset: i64,
        kind: AcknowledgeType,
        now: Instant,
    ) -> Result<RecordState, ShareError> {
        self.expire_locks(now);
        let refuse = |state: Option<RecordState>, reason: &str| ShareError::InvalidRecordState {
            offset,
            state,
            reason: reason.to_string(),
        };
        let Some(r) = self.records.get_mut(&offset) else {
            return Err(if offset < self.start {
                refuse(None, "it is before the start offset (already complete)")
            } else {
                refuse(None, "it is not in flight (never acquired)")
            });
        };
        if r.state != RecordState::Acquired {
            return Err(refuse(Some(r.state), "it is not acquired"));
        }
        if r.holder.as_deref() != Some(member) {
            return Err(refuse(Some(r.state), "another member holds it"));
        }
        let state = match kind {
            AcknowledgeType::Accept => {
                Self::settle(r, RecordState::Acknowledged);
                RecordState::Acknowledged
            }
            AcknowledgeType::Reject => {
                Self::settle(r, RecordState::Archived);
                RecordState::Archived
            }
            AcknowledgeType::Release => {
                self.release_one(offset);
                self.records[&offset].state
            }
        };
        self.changed.insert(offset);
        self.advance_start();
        Ok(state)
    }

    /// Releases every record `member` holds (the member left or was removed). Returns
    /// their offsets.
    pub fn release_member(&mut self, member: &str) -> Vec<i64> {
        let held: Vec<i64> = self
            .records
            .iter()
            .filter(|(_, r)| r.holder.as_deref() == Some(member))
            .map(|(o, _)| *o)
            .collect();
        for &o in &held {
            self.release_one(o);
        }
        self.advance_start();
        held
    }

    /// Moves the start offset to `offset` when the log no longer has the records before
    /// it (retention, DeleteRecords): they can never be delivered.
    pub fn skip_to(&mut self, offset: i64) {
        if offset <= self.start {
            return;
        }
        self.records = self.records.split_off(&offset);
        self.start = offset;
        self.end = self.end.max(offset);
        self.advance_start();
    }

    /// The state of every record in flight, as batches.
    pub fn snapshot(&self) -> Vec<StateBatch> {
        batches(self.records.iter())
    }

    /// What changed since the last call, to persist: `None` when nothing did, else the
    /// start offset and the batches of the records that changed and are still in flight.
    pub fn take_changes(&mut self) -> Option<(i64, Vec<StateBatch>)> {
        if self.changed.is_empty() && self.start == self.taken_start {
            return None;
        }
        let changed = std::mem::take(&mut self.changed);
        let records = changed
            .iter()
            .filter_map(|o| self.records.get(o).map(|r| (o, r)));
        self.taken_start = self.start;
        Some((self.start, batches(records)))
    }

    fn settle(r: &mut InFlight, state: RecordState) {
        r.state = state;
        r.holder = None;
        r.lock_expires = None;
    }

    /// An acquired record goes back to available, or to archived at the delivery limit.
    fn release_one(&mut self, offset: i64) {
        let limit = self.limits.delivery_count_limit;
        if let Some(r) = self.records.get_mut(&offset) {
            let state = if r.delivery_count >= limit {
                RecordState::Archived
            } else {
                RecordState::Available
            };
            Self::settle(r, state);
            self.changed.insert(offset);
        }
    }

    /// Drops the complete records at the front: the start offset moves to the first
    /// record still to deliver, or to the end offset.
    fn advance_start(&mut self) {
        while let Some(entry) = self.records.first_entry() {
            if !entry.get().state.is_final() {
                self.start = *entry.key();
                return;
            }
            entry.remove();
        }
        self.start = self.end;
    }
}

/// Consecutive records of one persisted state and delivery count, as batches.
fn batches<'a>(records: impl Iterator<Item = (&'a i64, &'a InFlight)>) -> Vec<StateBatch> {
    let mut out: Vec<StateBatch> = Vec::new();
    for (&offset, r) in records {
        let state = r.persisted_state();
        match out.last_mut() {
            Some(b)
                if b.last_offset + 1 == offset
                    && b.state == state
                    && b.delivery_count == r.delivery_count =>
            {
                b.last_offset = offset;
            }
            _ => out.push(StateBatch {
                first_offset: offset,
                last_offset: offset,
                state,
                delivery_count: r.delivery_count,
            }),
        }
    }
    out
}
