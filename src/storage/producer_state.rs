//! Idempotent producers' state in one partition, as Kafka's `ProducerStateManager`: for
//! each producer id, its epoch and its last five batches (sequences and offsets), so
//! that a retried batch lands once and a gap in the sequences is refused.
//!
//! Kafka's rules, per producer id:
//! - a batch whose first and last sequence equal one of the producer's last five batches
//!   is a duplicate: it is not appended and the original offset is returned;
//! - otherwise, with the producer's current epoch, the first sequence must follow the
//!   last one (`DUPLICATE_SEQUENCE_NUMBER` if it is older, `OUT_OF_ORDER_SEQUENCE_NUMBER`
//!   if it skips ahead); a newer epoch must start at sequence 0; an older epoch is
//!   `INVALID_PRODUCER_EPOCH`;
//! - a producer the partition has never seen may start anywhere.
//!
//! The log keeps the state with its writer (`WriterState::producers`) and updates it on
//! every append, a leader's or a follower's, so a follower that becomes leader has it
//! (`log/producers.rs` drives it; this file is the state machine and its files).
//! It is snapshotted to `<offset>.snapshot` when a segment rolls (named by the new
//! segment's base offset) and on a clean close; on open the latest snapshot is loaded
//! and only the batch headers after it are replayed.
//!
//! Transactions (KIP-98), per producer id: a transactional batch opens the producer's
//! transaction at its first offset (or continues the open one); a control batch of the
//! producer (COMMIT or ABORT) ends it, whatever its data, and records the producer's
//! coordinator epoch. The state lists the open transactions by first offset, for the
//! last stable offset. A marker's producer epoch becomes the producer's (KIP-890
//! bumps it with the marker); the refusals of markers with an older producer or
//! coordinator epoch are the leader's ([`ProducerState::check_marker`]), as in Kafka
//! a follower replays whatever its leader wrote.
//!
//! Snapshot file: TLCP framing (see `checkpoint`), payload (big-endian):
//! `offset: i64` (the file name's offset: the state covers the batches below it),
//! `producers: u32`, then per producer `producer_id: i64`, `epoch: i16`, `batches: u8`
//! (at most 5), then per batch, oldest first, `first_sequence: i32`,
//! `last_sequence: i32`, `base_offset: i64`; then, optionally (a snapshot written
//! before transactions ends after the producers), `transactional: u32` and per
//! producer with a coordinator epoch or an open transaction, by ascending id,
//! `producer_id: i64`, `coordinator_epoch: i32`, `txn_first_offset: i64` (-1: none);
//! then, optionally (a snapshot written before producer-id expiry ends there; the
//! transactional section is then written even when empty), `timestamps: u32` (the
//! number of producers) and per producer, by ascending id, `last_timestamp: i64` (when
//! its last batch or marker was appended, ms since the epoch; -1: unknown).
//!
//! Producer-id expiry (Kafka's `producer.id.expiration.ms`): a producer whose last
//! batch or marker was appended longer ago than the expiration (by the broker's clock,
//! not the batch's timestamps, which a producer sets), and that has no transaction
//! open, is forgotten ([`ProducerState::remove_expired`]); its next batch is then
//! taken as a new producer's. A producer whose time is unknown (replayed from the log,
//! or from a snapshot written before expiry) counts from when the state was loaded.

use super::checkpoint;
use super::segment::parse_base_offset;
use super::types::AppendInfo;
use crate::error::{Error, Result};
use crate::record::EndTxnMarker;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::{Path, PathBuf};

/// Batches remembered per producer for duplicate detection (Kafka keeps five: the most a
/// producer may have in flight with idempotence on).
pub(crate) const REMEMBERED_BATCHES: usize = 5;

/// Extension of producer-state snapshot files (`<offset:020>.snapshot`, Kafka's name).
pub(crate) const SNAPSHOT_EXT: &str = "snapshot";

/// The sequence after `seq` (sequences wrap from `i32::MAX` to 0).
pub(crate) fn next_seq(seq: i32) -> i32 {
    if seq == i32::MAX { 0 } else { seq + 1 }
}

/// The sequence of the last record of a batch whose first record has sequence `first`
/// and whose last offset delta is `last_offset_delta` (sequences wrap).
pub(crate) fn last_seq(first: i32, last_offset_delta: i32) -> i32 {
    let sum = i64::from(first) + i64::from(last_offset_delta);
    if sum > i64::from(i32::MAX) {
        (sum - i64::from(i32::MAX) - 1) as i32
    } else {
        sum as i32
    }
}

/// One appended batch of a producer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BatchMeta {
    /// Sequence of its first record.
    pub(crate) first_seq: i32,
    /// Sequence of its last record.
    pub(crate) last_seq: i32,
    /// Offset of its first record.
    pub(crate) base_offset: i64,
}

/// What a producer has written to the partition.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ProducerEntry {
    epoch: i16,
    /// The last few batches, oldest first.
    batches: VecDeque<BatchMeta>,
    /// The epoch of the coordinator that wrote the producer's last marker (-1: none).
    coordinator_epoch: i32,
    /// The first offset of the producer's open transaction.
    txn_first_offset: Option<i64>,
    /// When its last batch or marker was appended (ms; -1: unknown), for producer-id
    /// expiry.
    last_timestamp: i64,
}

impl Default for ProducerEntry {
    fn default() -> Self {
        ProducerEntry {
            epoch: 0,
            batches: VecDeque::new(),
            coordinator_epoch: -1,
            txn_first_offset: None,
            last_timestamp: -1,
        }
    }
}

impl ProducerEntry {
    /// Kafka's `maybeUpdateProducerEpoch`: a new epoch forgets the batches.
    fn set_epoch(&mut self, epoch: i16) {
        if epoch != self.epoch {
            self.batches.clear();
            self.epoch = epoch;
        }
    }

    /// Whether the snapshot's transactional section lists it.
    fn transactional(&self) -> bool {
        self.coordinator_epoch != -1 || self.txn_first_offset.is_some()
    }
}

/// A transaction a marker ended (Kafka's `CompletedTxn`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CompletedTxn {
    /// The producer's id.
    pub(crate) producer_id: i64,
    /// The offset of its first batch.
    pub(crate) first_offset: i64,
    /// The offset of the marker that ended it.
    pub(crate) last_offset: i64,
    /// Ended by ABORT.
    pub(crate) aborted: bool,
}

/// What recording a batch changed in the open transactions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TxnChange {
    /// Producer `producer_id` opened a transaction at `first_offset`.
    Opened {
        /// The offset of its first batch.
        first_offset: i64,
        /// The producer's id.
        producer_id: i64,
    },
    /// A marker ended this transaction.
    Ended(CompletedTxn),
}

/// Why a leader refuses a marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MarkerRefusal {
    /// The producer has moved on to epoch `current`.
    ProducerEpoch {
        /// The producer's epoch.
        current: i16,
    },
    /// A newer coordinator, of epoch `current`, wrote the producer's last marker.
    CoordinatorEpoch {
        /// The coordinator epoch of the producer's last marker.
        current: i32,
    },
}

/// The verdict on one batch of an idempotent producer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Check {
    /// Append it.
    Append,
    /// Already in the log at this base offset: do not append it again.
    Duplicate(i64),
    /// Older than the producer's last batch but not one it remembers.
    DuplicateSequence,
    /// Does not follow the producer's last batch, whose successor is `expected`.
    OutOfOrder {
        /// The sequence the batch should start with.
        expected: i32,
    },
    /// The producer has moved on to epoch `current`.
    InvalidEpoch {
        /// The producer's current epoch.
        current: i16,
    },
}

/// The producers of one partition.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ProducerState {
    producers: HashMap<i64, ProducerEntry>,
    /// The open transactions: first offset to producer id.
    open: BTreeMap<i64, i64>,
}

impl ProducerState {
    /// Judges a batch of producer `pid` with `epoch` and sequences `first..=last`.
    pub(crate) fn check(&self, pid: i64, epoch: i16, first: i32, last: i32) -> Check {
        let Some(entry) = self.producers.get(&pid) else {
            return Check::Append;
        };
        if epoch < entry.epoch {
            return Check::InvalidEpoch {
                current: entry.epoch,
            };
        }
        if epoch > entry.epoch {
            return if first == 0 {
                Check::Append
            } else {
                Check::OutOfOrder { expected: 0 }
            };
        }
        if let Some(dup) = entry
            .batches
            .iter()
            .find(|b| b.first_seq == first && b.last_seq == last)
        {
            return Check::Duplicate(dup.base_offset);
        }
        match entry.batches.back() {
            // A known producer with no batch at this epoch: a marker took it there
            // (KIP-890 bumps the epoch with the marker), so its sequences start over at
            // 0, as in Kafka. Taking any other sequence would leave a gap that a retry
            // of the batches before it then fills as duplicates: acknowledged, never
            // written.
            None if first == 0 => Check::Append,
            None => Check::OutOfOrder { expected: 0 },
            Some(prev) if first == next_seq(prev.last_seq) => Check::Append,
            Some(prev) if first <= prev.last_seq => Check::DuplicateSequence,
            Some(prev) => Check::OutOfOrder {
                expected: next_seq(prev.last_seq),
            },
        }
    }

    /// Whether a leader takes a COMMIT or ABORT marker of producer `pid` at `epoch`
    /// written by a coordinator of `coordinator_epoch` (Kafka's `checkProducerEpoch` and
    /// `checkCoordinatorEpoch`): not with an older producer epoch, nor from an older
    /// coordinator than the producer's last marker. A producer the partition has not
    /// seen takes any marker (it ends no transaction). A marker of
    /// `transaction_version` 2 or more (KIP-890: its coordinator bumped the epoch to end
    /// the transaction) must carry a newer epoch than the producer's, unless it repeats
    /// the producer's last marker ([`ProducerState::marker_repeats`]): one of the
    /// current epoch is a delayed marker of an earlier transaction.
    pub(crate) fn check_marker(
        &self,
        pid: i64,
        epoch: i16,
        coordinator_epoch: i32,
        transaction_version: i8,
    ) -> std::result::Result<(), MarkerRefusal> {
        let Some(entry) = self.producers.get(&pid) else {
            return Ok(());
        };
        let stale = if transaction_version >= EPOCH_BUMP_MARKER_VERSION {
            epoch <= entry.epoch && !self.marker_repeats(pid, epoch, coordinator_epoch)
        } else {
            epoch < entry.epoch
        };
        if stale {
            return Err(MarkerRefusal::ProducerEpoch {
                current: entry.epoch,
            });
        }
        if coordinator_epoch < entry.coordinator_epoch {
            return Err(MarkerRefusal::CoordinatorEpoch {
                current: entry.coordinator_epoch,
            });
        }
        Ok(())
    }

    /// Whether a marker of producer `pid` at `epoch` from a coordinator of
    /// `coordinator_epoch` repeats the producer's last marker here: no transaction of
    /// the producer is open and its last marker had the same producer and coordinator
    /// epochs, so the marker would end nothing and change nothing (a coordinator's
    /// retry of a marker whose answer it lost). A producer the partition has not seen,
    /// or has not seen a marker of, takes it as a new marker.
    pub(crate) fn marker_repeats(&self, pid: i64, epoch: i16, coordinator_epoch: i32) -> bool {
        self.producers.get(&pid).is_some_and(|e| {
            e.txn_first_offset.is_none()
                && e.epoch == epoch
                && e.coordinator_epoch >= 0
                && e.coordinator_epoch == coordinator_epoch
        })
    }

    /// True if producer `pid` has an open transaction (a leader then refuses its
    /// non-transactional batches: Kafka's `InvalidTxnStateException`).
    pub(crate) fn in_transaction(&self, pid: i64) -> bool {
        self.producers
            .get(&pid)
            .is_some_and(|e| e.txn_first_offset.is_some())
    }

    /// The first offsets of the open transactions, ascending, with their producer ids.
    pub(crate) fn open_transactions(&self) -> impl Iterator<Item = (i64, i64)> + '_ {
        self.open.iter().map(|(&first, &pid)| (first, pid))
    }

    /// Remembers an appended batch of producer `pid`.
    pub(crate) fn record(&mut self, pid: i64, epoch: i16, meta: BatchMeta) {
        let entry = self.producers.entry(pid).or_default();
        entry.set_epoch(epoch);
        entry.batches.push_back(meta);
        while entry.batches.len() > REMEMBERED_BATCHES {
            entry.batches.pop_front();
        }
    }

    /// Remembers the batch `b` (its producer fields) appended at `base_offset`; batches
    /// without a producer id change nothing. A transactional batch opens its producer's
    /// transaction if none is open; a control batch is parsed for its marker
    /// ([`Error::Corrupt`] naming `location` if it does not parse; then nothing
    /// changed) and ends the producer's transaction, if one is open. `written_ms`: when
    /// the batch was appended (-1 for a replay: then the producer's expiry counts from
    /// the load).
    pub(crate) fn record_batch(
        &mut self,
        b: &crate::record::Batch<'_>,
        base_offset: i64,
        location: &str,
        written_ms: i64,
    ) -> Result<Option<TxnChange>> {
        let pid = b.producer_id();
        if pid < 0 {
            return Ok(None);
        }
        if b.is_control() {
            let Some(marker) = EndTxnMarker::of_batch(b, location)? else {
                return Ok(None); // Kafka: compaction emptied it.
            };
            let change = self.end_transaction(pid, b.producer_epoch(), marker, base_offset);
            if let Some(entry) = self.producers.get_mut(&pid) {
                entry.last_timestamp = written_ms;
            }
            return Ok(change);
        }
        let first = b.base_sequence();
        self.record(
            pid,
            b.producer_epoch(),
            BatchMeta {
                first_seq: first,
                last_seq: last_seq(first, b.last_offset_delta()),
                base_offset,
            },
        );
        let entry = self.producers.get_mut(&pid).expect("just recorded");
        entry.last_timestamp = written_ms;
        if b.is_transactional() && entry.txn_first_offset.is_none() {
            entry.txn_first_offset = Some(base_offset);
            self.open.insert(base_offset, pid);
            return Ok(Some(TxnChange::Opened {
                first_offset: base_offset,
                producer_id: pid,
            }));
        }
        Ok(None)
    }

    /// Kafka's `appendEndTxnMarker` without its checks: the marker at `offset` takes
    /// the producer to `epoch` and `marker`'s coordinator epoch and ends its open
    /// transaction (a transaction without data ends nothing).
    fn end_transaction(
        &mut self,
        pid: i64,
        epoch: i16,
        marker: EndTxnMarker,
        offset: i64,
    ) -> Option<TxnChange> {
        let entry = self.producers.entry(pid).or_default();
        entry.set_epoch(epoch);
        entry.coordinator_epoch = marker.coordinator_epoch;
        let first = entry.txn_first_offset.take()?;
        self.open.remove(&first);
        Some(TxnChange::Ended(CompletedTxn {
            producer_id: pid,
            first_offset: first,
            last_offset: offset,
            aborted: !marker.commit,
        }))
    }

    /// Forgets the producers whose last batch or marker is `expiration_ms` or more
    /// older than `now_ms` and that have no transaction open (Kafka's
    /// `removeExpiredProducers`); a producer whose time is unknown counts from
    /// `now_ms`. Returns how many it forgot.
    pub(crate) fn remove_expired(&mut self, now_ms: i64, expiration_ms: i64) -> usize {
        let before = self.producers.len();
        self.producers.retain(|_, e| {
            if e.last_timestamp < 0 {
                e.last_timestamp = now_ms;
            }
            e.txn_first_offset.is_some() || now_ms.saturating_sub(e.last_timestamp) < expiration_ms
        });
        before - self.producers.len()
    }

    /// The epoch of producer `pid`, None if unknown.
    pub(crate) fn epoch_of(&self, pid: i64) -> Option<i16> {
        self.producers.get(&pid).map(|e| e.epoch)
    }

    /// Each producer's id, epoch and last batch (None if it has none), in no order.
    pub(crate) fn last_batches(&self) -> impl Iterator<Item = (i64, i16, Option<BatchMeta>)> {
        self.producers
            .iter()
            .map(|(&id, e)| (id, e.epoch, e.batches.back().copied()))
    }

    /// The snapshot payload for offset `offset` (see the module docs).
    fn encode(&self, offset: i64) -> Vec<u8> {
        let mut ids: Vec<&i64> = self.producers.keys().collect();
        ids.sort_unstable();
        let mut out = Vec::with_capacity(12 + self.producers.len() * 32);
        out.extend_from_slice(&offset.to_be_bytes());
        out.extend_from_slice(&(self.producers.len() as u32).to_be_bytes());
        for id in ids {
            let e = &self.producers[id];
            out.extend_from_slice(&id.to_be_bytes());
            out.extend_from_slice(&e.epoch.to_be_bytes());
            out.push(e.batches.len() as u8);
            for b in &e.batches {
                out.extend_from_slice(&b.first_seq.to_be_bytes());
                out.extend_from_slice(&b.last_seq.to_be_bytes());
                out.extend_from_slice(&b.base_offset.to_be_bytes());
            }
        }
        let txn: Vec<(&i64, &ProducerEntry)> = ids_sorted(&self.producers)
            .into_iter()
            .map(|id| (id, &self.producers[id]))
            .filter(|(_, e)| e.transactional())
            .collect();
        let timed = self.producers.values().any(|e| e.last_timestamp >= 0);
        if !txn.is_empty() || timed {
            out.extend_from_slice(&(txn.len() as u32).to_be_bytes());
            for (id, e) in txn {
                out.extend_from_slice(&id.to_be_bytes());
                out.extend_from_slice(&e.coordinator_epoch.to_be_bytes());
                out.extend_from_slice(&e.txn_first_offset.unwrap_or(-1).to_be_bytes());
            }
        }
        if timed {
            out.extend_from_slice(&(self.producers.len() as u32).to_be_bytes());
            for id in ids_sorted(&self.producers) {
                out.extend_from_slice(&self.producers[id].last_timestamp.to_be_bytes());
            }
        }
        out
    }

    /// Parses a snapshot payload that must be for `offset`.
    fn decode(payload: &[u8], offset: i64, path: &Path) -> Result<ProducerState> {
        let mut r = Reader {
            bytes: payload,
            at: 0,
            path,
        };
        let stored = r.i64()?;
        if stored != offset {
            return Err(r.bad(
                0,
                format!("holds the state at offset {stored}, not {offset}"),
            ));
        }
        let count = r.u32()?;
        let mut state = ProducerState::default();
        for _ in 0..count {
            let at = r.at;
            let id = r.i64()?;
            let epoch = r.i16()?;
            let n = r.u8()? as usize;
            if n > REMEMBERED_BATCHES {
                return Err(r.bad(at, format!("producer {id} has {n} batches, at most 5")));
            }
            let mut batches = VecDeque::with_capacity(n);
            for _ in 0..n {
                batches.push_back(BatchMeta {
                    first_seq: r.i32()?,
                    last_seq: r.i32()?,
                    base_offset: r.i64()?,
                });
            }
            let entry = ProducerEntry {
                epoch,
                batches,
                ..ProducerEntry::default()
            };
            if id < 0 || state.producers.insert(id, entry).is_some() {
                return Err(r.bad(at, format!("producer id {id} is negative or repeated")));
            }
        }
        if r.at != payload.len() {
            let n = r.u32()?;
            let mut prev = None;
            for _ in 0..n {
                let at = r.at;
                let id = r.i64()?;
                let coordinator_epoch = r.i32()?;
                let first = r.i64()?;
                let Some(entry) = state.producers.get_mut(&id).filter(|_| prev < Some(id)) else {
                    return Err(r.bad(
                        at,
                        format!("transactional producer {id} is not listed, or out of order"),
                    ));
                };
                prev = Some(id);
                entry.coordinator_epoch = coordinator_epoch;
                if first >= 0 {
                    entry.txn_first_offset = Some(first);
                    if state.open.insert(first, id).is_some() {
                        return Err(r.bad(at, format!("two transactions open at {first}")));
                    }
                } else if first != -1 {
                    return Err(r.bad(at, format!("transaction first offset {first}")));
                }
            }
        }
        if r.at != payload.len() {
            let at = r.at;
            let n = r.u32()? as usize;
            if n != state.producers.len() {
                return Err(r.bad(
                    at,
                    format!(
                        "{n} producer timestamps for {} producers",
                        state.producers.len()
                    ),
                ));
            }
            let ids: Vec<i64> = ids_sorted(&state.producers).into_iter().copied().collect();
            for id in ids {
                let t = r.i64()?;
                if let Some(e) = state.producers.get_mut(&id) {
                    e.last_timestamp = t;
                }
            }
            if r.at != payload.len() {
                return Err(r.bad(r.at, "bytes after the last producer timestamp".into()));
            }
        }
        Ok(state)
    }
}

fn ids_sorted(producers: &HashMap<i64, ProducerEntry>) -> Vec<&i64> {
    let mut ids: Vec<&i64> = producers.keys().collect();
    ids.sort_unstable();
    ids
}

/// A cursor over a snapshot payload; errors name the file and the byte position (in the
/// file: the payload starts after the 10 bytes of TLCP header).
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
    path: &'a Path,
}

impl Reader<'_> {
    fn bad(&self, at: usize, why: String) -> Error {
        Error::corrupt(self.path.display(), (10 + at) as u64, why)
    }
    fn take<const N: usize>(&mut self) -> Result<[u8; N]> {
        let b = self
            .bytes
            .get(self.at..self.at + N)
            .and_then(|b| <[u8; N]>::try_from(b).ok())
            .ok_or_else(|| self.bad(self.at, "ends inside a field".into()))?;
        self.at += N;
        Ok(b)
    }
    fn u8(&mut self) -> Result<u8> {
        Ok(self.take::<1>()?[0])
    }
    fn i16(&mut self) -> Result<i16> {
        self.take().map(i16::from_be_bytes)
    }
    fn i32(&mut self) -> Result<i32> {
        self.take().map(i32::from_be_bytes)
    }
    fn u32(&mut self) -> Result<u32> {
        self.take().map(u32::from_be_bytes)
    }
    fn i64(&mut self) -> Result<i64> {
        self.take().map(i64::from_be_bytes)
    }
}

/// Path of the snapshot at `offset` in `dir`.
pub(crate) fn snapshot_path(dir: &Path, offset: i64) -> PathBuf {
    dir.join(super::segment::file_name(offset, SNAPSHOT_EXT))
}

/// The offset a snapshot file name stands for, if `name` is one.
pub(crate) fn parse_snapshot_name(name: &str) -> Option<i64> {
    parse_base_offset(name, SNAPSHOT_EXT)
}

/// Writes `state` as the snapshot at `offset`, crash-safely.
pub(crate) fn write_snapshot(dir: &Path, offset: i64, state: &ProducerState) -> Result<()> {
    checkpoint::write(&snapshot_path(dir, offset), &state.encode(offset))
}

/// Reads the snapshot at `offset`; [`Error::Corrupt`] if it is torn or damaged.
pub(crate) fn read_snapshot(dir: &Path, offset: i64) -> Result<ProducerState> {
    let path = snapshot_path(dir, offset);
    match checkpoint::read(&path)? {
        Some(payload) => ProducerState::decode(&payload, offset, &path),
        None => Err(Error::io(
            "read producer snapshot",
            path,
            std::io::ErrorKind::NotFound.into(),
        )),
    }
}

/// The offsets of the snapshot files in `dir`, ascending.
pub(crate) fn list_snapshots(dir: &Path) -> Result<Vec<i64>> {
    use crate::error::IoContext;
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).ctx("list log directory", dir)? {
        let entry = entry.ctx("list log directory", dir)?;
        if let Some(o) = parse_snapshot_name(&entry.file_name().to_string_lossy()) {
            out.push(o);
        }
    }
    out.sort_unstable();
    Ok(out)
}

/// Removes the snapshot at `offset` (if it is there).
pub(crate) fn remove_snapshot(dir: &Path, offset: i64) -> Result<()> {
    let path = snapshot_path(dir, offset);
    match std::fs::remove_file(&path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io("remove producer snapshot", path, e)),
    }
}

/// What [`PartitionLog::append_idempotent`](super::PartitionLog::append_idempotent) did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppendOutcome {
    /// The batches were appended.
    Appended(AppendInfo),
    /// The batch (a producer's retry) is already in the log at this base offset: it was
    /// not appended again.
    Duplicate(i64),
}

/// The transaction version (WriteTxnMarkers v2's `TransactionVersion`) from which a
/// marker carries the epoch its coordinator bumped to end the transaction (KIP-890),
/// so a leader takes only a marker newer than the producer's epoch.
pub const EPOCH_BUMP_MARKER_VERSION: i8 = 2;

/// What [`PartitionLog::append_end_txn_marker_once`](super::PartitionLog::append_end_txn_marker_once)
/// did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkerOutcome {
    /// The marker was appended.
    Appended(AppendInfo),
    /// The producer's last marker in the log had the same producer and coordinator
    /// epochs and no transaction of it opened since: the marker (a coordinator's retry)
    /// was not appended again. That earlier marker is below `log_end_offset`, the log's
    /// end at the check, so it is replicated once the high watermark reaches it.
    Repeated {
        /// The log end offset when the marker was found to repeat.
        log_end_offset: i64,
    },
}

/// An idempotent producer as the partition knows it (DescribeProducers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(not(feature = "server"), allow(dead_code))]
pub(crate) struct ActiveProducer {
    /// Its producer id.
    pub(crate) producer_id: i64,
    /// Its current epoch.
    pub(crate) epoch: i16,
    /// The sequence of its last record (-1 if it has no batch).
    pub(crate) last_sequence: i32,
    /// The max timestamp of its last batch, read from that batch's header (-1 when
    /// retention or DeleteRecords removed it: the state does not keep timestamps).
    pub(crate) last_timestamp: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(first: i32, last: i32, base_offset: i64) -> BatchMeta {
        BatchMeta {
            first_seq: first,
            last_seq: last,
            base_offset,
        }
    }

    #[test]
    fn sequences_must_follow_and_duplicates_land_once() {
        let mut s = ProducerState::default();
        assert_eq!(s.check(7, 0, 0, 9), Check::Append);
        s.record(7, 0, meta(0, 9, 100));
        assert_eq!(s.check(7, 0, 0, 9), Check::Duplicate(100));
        assert_eq!(s.check(7, 0, 10, 19), Check::Append);
        s.record(7, 0, meta(10, 19, 110));
        assert_eq!(s.check(7, 0, 10, 19), Check::Duplicate(110));
        assert_eq!(s.check(7, 0, 25, 30), Check::OutOfOrder { expected: 20 });
        assert_eq!(s.check(7, 0, 5, 12), Check::DuplicateSequence);
        // Another producer is independent.
        assert_eq!(s.check(8, 0, 40, 41), Check::Append);
    }

    /// KIP-890: a marker bumps the producer's epoch and forgets its batches; the next
    /// transaction's first batch at that epoch must start at sequence 0. A later batch
    /// that arrives first (its predecessor refused, to be retried) is out of order, not
    /// appended: else the retried predecessor would be taken for a duplicate and its
    /// records acknowledged without being written.
    #[test]
    fn after_a_marker_bumps_the_epoch_sequences_start_at_zero() {
        let mut s = ProducerState::default();
        record(&mut s, &txn_batch(7, 1, 0, 100), 0);
        record(&mut s, &EndTxnMarker::commit(0).batch(7, 2, 0), 100);
        assert_eq!(s.epoch_of(7), Some(2));
        assert_eq!(s.check(7, 2, 100, 199), Check::OutOfOrder { expected: 0 });
        assert_eq!(s.check(7, 2, 0, 99), Check::Append);
        s.record(7, 2, meta(0, 99, 101));
        assert_eq!(s.check(7, 2, 100, 199), Check::Append);
    }

    #[test]
    fn epochs_fence_and_reset_sequences() {
        let mut s = ProducerState::default();
        s.record(1, 3, meta(0, 4, 0));
        assert_eq!(s.check(1, 2, 5, 5), Check::InvalidEpoch { current: 3 });
        assert_eq!(s.check(1, 4, 5, 5), Check::OutOfOrder { expected: 0 });
        assert_eq!(s.check(1, 4, 0, 0), Check::Append);
        s.record(1, 4, meta(0, 0, 5));
        assert_eq!(s.check(1, 4, 1, 1), Check::Append);
    }

    #[test]
    fn only_the_last_five_batches_are_remembered_and_sequences_wrap() {
        let mut s = ProducerState::default();
        for i in 0..6 {
            s.record(1, 0, meta(i, i, i64::from(i)));
        }
        assert_eq!(s.check(1, 0, 0, 0), Check::DuplicateSequence);
        assert_eq!(s.check(1, 0, 1, 1), Check::Duplicate(1));
        assert_eq!(last_seq(i32::MAX - 1, 3), 1);
        let mut w = ProducerState::default();
        w.record(2, 0, meta(i32::MAX - 1, i32::MAX, 0));
        assert_eq!(w.check(2, 0, 0, 4), Check::Append);
    }

    fn txn_batch(pid: i64, epoch: i16, seq: i32, n: usize) -> Vec<u8> {
        let mut b = crate::record::BatchBuilder::new()
            .producer(pid, epoch, seq)
            .attributes(crate::record::TRANSACTIONAL_BIT);
        for _ in 0..n {
            b.push(0, None, Some(b"v"), &[]);
        }
        b.finish()
    }

    fn record(s: &mut ProducerState, bytes: &[u8], offset: i64) -> Option<TxnChange> {
        let b = crate::record::Batch::parse(bytes).unwrap();
        s.record_batch(&b, offset, "t-0", -1).unwrap()
    }

    #[test]
    fn transactions_open_at_their_first_batch_and_end_with_a_marker() {
        let mut s = ProducerState::default();
        assert_eq!(
            record(&mut s, &txn_batch(1, 0, 0, 2), 10),
            Some(TxnChange::Opened {
                first_offset: 10,
                producer_id: 1
            })
        );
        assert_eq!(record(&mut s, &txn_batch(1, 0, 2, 1), 12), None);
        assert_eq!(
            record(&mut s, &txn_batch(2, 0, 0, 1), 13),
            Some(TxnChange::Opened {
                first_offset: 13,
                producer_id: 2
            })
        );
        assert!(s.in_transaction(1) && s.in_transaction(2) && !s.in_transaction(3));
        assert_eq!(
            s.open_transactions().collect::<Vec<_>>(),
            vec![(10, 1), (13, 2)]
        );
        let abort = EndTxnMarker::abort(4).batch(1, 0, 0);
        assert_eq!(
            record(&mut s, &abort, 14),
            Some(TxnChange::Ended(CompletedTxn {
                producer_id: 1,
                first_offset: 10,
                last_offset: 14,
                aborted: true,
            }))
        );
        assert_eq!(s.open_transactions().collect::<Vec<_>>(), vec![(13, 2)]);
        // A marker with no transaction open ends nothing, but counts for the epochs.
        assert_eq!(
            record(&mut s, &EndTxnMarker::commit(5).batch(1, 1, 0), 15),
            None
        );
        assert_eq!(
            s.check_marker(1, 0, 5, 0),
            Err(MarkerRefusal::ProducerEpoch { current: 1 })
        );
        assert_eq!(
            s.check_marker(1, 1, 4, 0),
            Err(MarkerRefusal::CoordinatorEpoch { current: 5 })
        );
        assert_eq!(s.check_marker(1, 2, 5, 0), Ok(()));
        assert_eq!(s.check_marker(99, 0, 0, 0), Ok(()));
        // Transaction version 2: only a newer epoch, or a repeat of the last marker.
        let tv2 = EPOCH_BUMP_MARKER_VERSION;
        assert_eq!(s.check_marker(1, 1, 5, tv2), Ok(()), "a repeat");
        assert_eq!(
            s.check_marker(1, 1, 6, tv2),
            Err(MarkerRefusal::ProducerEpoch { current: 1 })
        );
        assert_eq!(s.check_marker(1, 2, 6, tv2), Ok(()));
        // The marker's epoch is the producer's: its sequences start again.
        assert_eq!(s.check(1, 1, 0, 0), Check::Append);
        // A control batch that does not parse changes nothing.
        let mut bad = crate::record::BatchBuilder::new()
            .producer(2, 0, -1)
            .attributes(crate::record::TRANSACTIONAL_BIT | crate::record::CONTROL_BIT);
        bad.push(0, Some(&[0, 0, 0, 1]), Some(&[0]), &[]);
        let bad = bad.finish();
        let b = crate::record::Batch::parse(&bad).unwrap();
        assert!(
            s.record_batch(&b, 16, "t-0", -1)
                .unwrap_err()
                .is_corruption()
        );
        assert!(s.in_transaction(2));
    }

    #[test]
    fn snapshots_keep_transactions_and_read_the_old_format() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = ProducerState::default();
        s.record(1, 0, meta(0, 0, 0));
        record(&mut s, &txn_batch(2, 3, 0, 1), 1);
        record(&mut s, &txn_batch(3, 0, 0, 1), 2);
        record(&mut s, &EndTxnMarker::commit(7).batch(3, 0, 0), 3);
        write_snapshot(dir.path(), 4, &s).unwrap();
        let back = read_snapshot(dir.path(), 4).unwrap();
        assert_eq!(back, s);
        assert_eq!(back.open_transactions().collect::<Vec<_>>(), vec![(1, 2)]);
        // The transactional section: producers 2 (open at 1) and 3 (coordinator 7).
        let payload = s.encode(4);
        let tail: Vec<u8> = [
            &2u32.to_be_bytes()[..],
            &2i64.to_be_bytes(),
            &(-1i32).to_be_bytes(),
            &1i64.to_be_bytes(),
            &3i64.to_be_bytes(),
            &7i32.to_be_bytes(),
            &(-1i64).to_be_bytes(),
        ]
        .concat();
        assert!(payload.ends_with(&tail));
        // A snapshot of the format before transactions (no section) still reads.
        let mut old = ProducerState::default();
        old.record(1, 0, meta(0, 0, 0));
        let old_payload = old.encode(1);
        assert_eq!(old_payload.len(), 8 + 4 + 8 + 2 + 1 + 16);
        checkpoint::write(&snapshot_path(dir.path(), 1), &old_payload).unwrap();
        assert_eq!(read_snapshot(dir.path(), 1).unwrap(), old);
        // A section naming a producer the snapshot does not list is corrupt.
        let mut lying = old_payload.clone();
        lying.extend_from_slice(&1u32.to_be_bytes());
        lying.extend_from_slice(&9i64.to_be_bytes());
        lying.extend_from_slice(&0i32.to_be_bytes());
        lying.extend_from_slice(&(-1i64).to_be_bytes());
        checkpoint::write(&snapshot_path(dir.path(), 1), &lying).unwrap();
        assert!(read_snapshot(dir.path(), 1).unwrap_err().is_corruption());
    }

    #[test]
    fn snapshots_round_trip_and_damage_is_typed() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = ProducerState::default();
        for i in 0..7 {
            s.record(
                i % 3,
                (i / 3) as i16,
                meta(i as i32 * 10, i as i32 * 10 + 9, i * 10),
            );
        }
        s.record(1 << 40, -1, meta(i32::MAX - 1, 0, 99));
        write_snapshot(dir.path(), 4200, &s).unwrap();
        assert_eq!(list_snapshots(dir.path()).unwrap(), vec![4200]);
        assert!(dir.path().join("00000000000000004200.snapshot").exists());
        assert_eq!(read_snapshot(dir.path(), 4200).unwrap(), s);
        // Named for another offset than it holds.
        std::fs::rename(
            snapshot_path(dir.path(), 4200),
            snapshot_path(dir.path(), 4300),
        )
        .unwrap();
        let e = read_snapshot(dir.path(), 4300).unwrap_err();
        assert!(e.is_corruption() && e.to_string().contains("4300"), "{e}");
        // A flipped bit fails the CRC.
        let path = snapshot_path(dir.path(), 4300);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[20] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        assert!(read_snapshot(dir.path(), 4300).unwrap_err().is_corruption());
        remove_snapshot(dir.path(), 4300).unwrap();
        remove_snapshot(dir.path(), 4300).unwrap();
        assert!(list_snapshots(dir.path()).unwrap().is_empty());
        // A payload that lies about its contents, under a valid CRC.
        let mut payload = ProducerState::default().encode(7);
        payload[11] = 1; // one producer announced, none follows
        checkpoint::write(&snapshot_path(dir.path(), 7), &payload).unwrap();
        let e = read_snapshot(dir.path(), 7).unwrap_err();
        assert!(
            e.is_corruption() && e.to_string().contains("ends inside"),
            "{e}"
        );
    }
}
