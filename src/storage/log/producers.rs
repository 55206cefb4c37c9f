//! The idempotent producers' state of a [`PartitionLog`] (`producer_state` holds the
//! state machine and its snapshot files): the checked append of idempotent batches, the
//! listing for DescribeProducers, and loading, replaying and trimming the state as the
//! log opens, rolls, retains and truncates.

use super::{PartitionLog, WriterState, parse_batches};
use crate::error::{Error, Result};
use crate::record::ValidBatches;
use crate::storage::clock::now_ms;
use crate::storage::producer_state::{
    ActiveProducer, AppendOutcome, BatchMeta, Check, CompletedTxn, ProducerState, TxnChange,
    last_seq, list_snapshots, next_seq, read_snapshot, remove_snapshot, snapshot_path,
};
use crate::storage::txn_index::{self, AbortedTxn};
use std::path::PathBuf;

/// What a replay of the log found.
#[derive(Default)]
pub(super) struct Replayed {
    /// Batch headers read.
    pub(super) batches: u64,
    /// The transactions it saw end: first offset and marker offset.
    pub(super) ended: Vec<(i64, i64)>,
    /// The log's aborted transactions, in marker order.
    pub(super) aborted: Vec<AbortedTxn>,
}

/// The index entry of `txn`, aborted, once `state` recorded its marker: its last
/// stable offset is the first offset of the earliest transaction still open, or the
/// offset after the marker (Kafka's `lastStableOffset(completedTxn)`).
pub(super) fn aborted_entry(state: &ProducerState, txn: &CompletedTxn) -> AbortedTxn {
    AbortedTxn {
        producer_id: txn.producer_id,
        first_offset: txn.first_offset,
        last_offset: txn.last_offset,
        last_stable_offset: state
            .open_transactions()
            .next()
            .map_or(txn.last_offset + 1, |(first, _)| first),
    }
}

/// The log's `producer.id.expiration.ms`.
fn expiration_ms(w: &WriterState) -> i64 {
    i64::try_from(w.config.producer_id_expiration_ms).unwrap_or(i64::MAX)
}

impl PartitionLog {
    /// Appends batches of idempotent producers (and possibly others) after checking
    /// their sequences against the producers' state, check and append in one step under
    /// the writer's lock. Each batch is judged as if the ones before it in `bytes` were
    /// already appended. A single batch that repeats one of its producer's last five is
    /// [`AppendOutcome::Duplicate`] with the original base offset; otherwise a batch
    /// that does not follow its producer's last one is refused, and nothing is
    /// appended: [`Error::DuplicateSequence`] (older than the last one, or a duplicate
    /// among several batches), [`Error::OutOfOrderSequence`], or
    /// [`Error::InvalidProducerEpoch`] (an epoch older than the producer's).
    ///
    /// ```
    /// use tidelog::storage::{AppendOutcome, PartitionLog};
    /// use tidelog::{BatchBuilder, LogConfig};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let log = PartitionLog::open(dir.path().join("t-0"), "t-0", LogConfig::default())?;
    /// let batch = |seq: i32| {
    ///     let mut b = BatchBuilder::new().producer(42, 0, seq);
    ///     b.push(1_000, None, Some(b"once"), &[]);
    ///     b.finish()
    /// };
    /// assert!(matches!(log.append_idempotent(&batch(0))?, AppendOutcome::Appended(_)));
    /// // The producer's retry lands once: the original offset comes back.
    /// assert_eq!(log.append_idempotent(&batch(0))?, AppendOutcome::Duplicate(0));
    /// assert!(log.append_idempotent(&batch(5)).is_err(), "a gap in the sequences");
    /// assert_eq!(log.log_end_offset(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn append_idempotent(&self, bytes: &[u8]) -> Result<AppendOutcome> {
        self.append_idempotent_valid(&parse_batches(bytes)?)
    }

    /// [`PartitionLog::append_idempotent`] of batches already validated (length, magic,
    /// CRC), as [`PartitionLog::append_valid`]: the sequence and the log's other checks
    /// run once here, the CRC is not computed again.
    pub fn append_idempotent_valid(&self, parsed: &ValidBatches<'_>) -> Result<AppendOutcome> {
        let mut w = self.inner.writer.lock();
        self.check_batches(parsed, Some(w.config.max_message_bytes as usize))?;
        self.check_writable()?;
        self.ensure_producers(&mut w)?;
        let state = w.producers.as_ref().ok_or_else(|| self.closed_err())?;
        if let Some(b) = parsed.iter().find(|b| b.is_control()) {
            // Kafka: only the transaction coordinator writes markers
            // (`append_end_txn_marker`), never a producer.
            return Err(Error::InvalidBatch(format!(
                "a producer's append to {} holds a control batch (offset delta {})",
                self.inner.name,
                b.last_offset_delta()
            )));
        }
        if let Some(b) = parsed
            .iter()
            .find(|b| b.producer_id() >= 0 && !b.is_transactional())
            .filter(|b| state.in_transaction(b.producer_id()))
        {
            // Kafka's InvalidTxnStateException.
            return Err(Error::InvalidBatch(format!(
                "producer {} has a transaction open in {}: its batches must be transactional",
                b.producer_id(),
                self.inner.name
            )));
        }
        // Producer id and last sequence of the batches judged so far.
        let mut staged: Vec<(i64, i32)> = Vec::new();
        for b in parsed.iter().filter(|b| b.producer_id() >= 0) {
            let (pid, epoch, first) = (b.producer_id(), b.producer_epoch(), b.base_sequence());
            let last = last_seq(first, b.last_offset_delta());
            let verdict = match staged.iter().rev().find(|s| s.0 == pid) {
                Some(&(_, prev)) if first == next_seq(prev) => Check::Append,
                Some(&(_, prev)) => Check::OutOfOrder {
                    expected: next_seq(prev),
                },
                None => state.check(pid, epoch, first, last),
            };
            let partition = || self.inner.name.clone();
            match verdict {
                Check::Append => staged.push((pid, last)),
                Check::Duplicate(base) if parsed.len() == 1 => {
                    return Ok(AppendOutcome::Duplicate(base));
                }
                Check::Duplicate(_) | Check::DuplicateSequence => {
                    return Err(Error::DuplicateSequence {
                        partition: partition(),
                        producer_id: pid,
                        sequence: first,
                    });
                }
                Check::OutOfOrder { expected } => {
                    return Err(Error::OutOfOrderSequence {
                        partition: partition(),
                        producer_id: pid,
                        epoch,
                        sequence: first,
                        expected,
                    });
                }
                Check::InvalidEpoch { current } => {
                    return Err(Error::InvalidProducerEpoch {
                        partition: partition(),
                        producer_id: pid,
                        epoch,
                        current,
                    });
                }
            }
        }
        // The append records the batches in the state (`write_batch`).
        self.append_locked(w, parsed).map(AppendOutcome::Appended)
    }

    /// Every producer of the partition's state, by producer id (Kafka's
    /// `activeProducers`), loading the state first if it is not loaded.
    #[cfg_attr(not(feature = "server"), allow(dead_code))]
    pub(crate) fn active_producers(&self) -> Result<Vec<ActiveProducer>> {
        let mut listed: Vec<(i64, i16, Option<BatchMeta>)> = {
            let mut w = self.inner.writer.lock();
            self.ensure_producers(&mut w)?;
            let state = w.producers.as_ref().ok_or_else(|| self.closed_err())?;
            state.last_batches().collect()
        };
        listed.sort_unstable_by_key(|p| p.0);
        let segments = self.segments();
        // The max timestamp of the batch at `offset`; None once retention removed it.
        // A segment that does not read back is an error, as every read of the log.
        let timestamp = |offset: i64| -> Result<Option<i64>> {
            let i = segments.partition_point(|s| s.base_offset <= offset);
            let Some(seg) = i.checked_sub(1).and_then(|i| segments.get(i)) else {
                return Ok(None);
            };
            let view = seg.view()?;
            let Some(pos) = view.find(offset, &mut view.heads())? else {
                return Ok(None);
            };
            Ok(view
                .head_at(pos)
                .filter(|h| h.base_offset == offset)
                .map(|h| h.max_timestamp))
        };
        listed
            .into_iter()
            .map(|(producer_id, epoch, last)| {
                let last_timestamp = match last {
                    Some(b) => timestamp(b.base_offset)?.unwrap_or(-1),
                    None => -1,
                };
                Ok(ActiveProducer {
                    producer_id,
                    epoch,
                    last_sequence: last.map_or(-1, |b| b.last_seq),
                    last_timestamp,
                })
            })
            .collect()
    }

    /// True if producer `producer_id` has a transaction open in this partition at
    /// `epoch`: a later batch of it continues that transaction, which the coordinator
    /// confirmed at its first batch (KIP-890 part 1 verifies only the first).
    pub fn transaction_open_at(&self, producer_id: i64, epoch: i16) -> Result<bool> {
        if !self.has_open_transaction(producer_id)? {
            return Ok(false);
        }
        // Both again under the writer lock: a marker appended since the look above
        // ended the transaction and took the producer to the marker's epoch, which
        // (transaction version 2) is the next transaction's. Read apart, the old
        // transaction's "open" and the new epoch made the next transaction's first
        // batch look like a continuation, and the coordinator was never asked to add
        // the partition (its EndTxn then found no transaction: "fenced").
        let mut w = self.inner.writer.lock();
        self.ensure_producers(&mut w)?;
        let state = w.producers.as_ref().ok_or_else(|| self.closed_err())?;
        Ok(state.in_transaction(producer_id) && state.epoch_of(producer_id) == Some(epoch))
    }

    /// True once the producers' state is loaded (tests).
    #[cfg(test)]
    pub(crate) fn producers_loaded(&self) -> bool {
        self.inner.writer.lock().producers.is_some()
    }

    /// Loads the producers' state if it is not loaded. No snapshot exists then (they are
    /// written only while the state is loaded, and open loads it when one exists): the
    /// state is rebuilt from every batch header.
    pub(super) fn ensure_producers(&self, w: &mut WriterState) -> Result<()> {
        if w.producers.is_none() {
            let mut state = ProducerState::default();
            let replayed = self.replay_producers(&mut state, i64::MIN)?;
            self.install_producers(w, state, replayed);
        }
        Ok(())
    }

    /// Forgets the idempotent producers whose last write is `producer.id.expiration.ms`
    /// older than `now_ms` and that have no transaction open (nothing to do while the
    /// state is not loaded: loading it expires them). The maintenance thread calls this
    /// on every retention pass; tests and tools may call it directly. Returns how many
    /// producers it forgot.
    pub fn remove_expired_producers(&self, now_ms: i64) -> Result<usize> {
        let mut w = self.inner.writer.lock();
        let expiration = expiration_ms(&w);
        Ok(w.producers
            .as_mut()
            .map_or(0, |state| state.remove_expired(now_ms, expiration)))
    }

    /// Makes `state` the log's producers' state, less the expired producers, and what
    /// `replayed` found of the transactions the log's (`Inner::txns`).
    fn install_producers(&self, w: &mut WriterState, mut state: ProducerState, replayed: Replayed) {
        state.remove_expired(now_ms(), expiration_ms(w));
        let hw = self.high_watermark();
        let mut t = self.inner.txns.lock();
        t.known = true;
        t.open = state.open_transactions().collect();
        t.ended = replayed
            .ended
            .into_iter()
            .filter(|&(_, marker)| marker >= hw)
            .collect();
        t.aborted = replayed.aborted;
        w.producers = Some(state);
    }

    /// On open: removes snapshots past the log end (a crash lost what they covered)
    /// and, if any other is left, loads the state from the latest sound one and the
    /// batch headers after it. Returns the damaged snapshots it removed and the number
    /// of batch headers replayed.
    pub(super) fn load_producers_on_open(&self, snapshots: &[i64]) -> Result<(Vec<PathBuf>, u64)> {
        let end = self.log_end_offset();
        for &s in snapshots.iter().filter(|&&s| s > end) {
            remove_snapshot(&self.inner.dir, s)?;
        }
        let usable: Vec<i64> = snapshots.iter().copied().filter(|&s| s <= end).collect();
        let mut removed = Vec::new();
        let mut replayed = 0;
        if !usable.is_empty() {
            let (state, r) = self.load_producers(&usable, &mut removed)?;
            replayed = r.batches;
            self.install_producers(&mut self.inner.writer.lock(), state, r);
        }
        Ok((removed, replayed))
    }

    /// The state from the latest sound snapshot of `snapshots` (at or below the log
    /// end), plus the batch headers after it; from every batch header if none is sound.
    /// Damaged snapshots are removed and listed in `removed`. Also returns the number
    /// of batch headers replayed.
    fn load_producers(
        &self,
        snapshots: &[i64],
        removed: &mut Vec<PathBuf>,
    ) -> Result<(ProducerState, Replayed)> {
        for &s in snapshots.iter().rev() {
            match read_snapshot(&self.inner.dir, s) {
                Ok(mut state) => {
                    let n = self.replay_producers(&mut state, s)?;
                    return Ok((state, n));
                }
                Err(e) if e.is_corruption() => {
                    remove_snapshot(&self.inner.dir, s)?;
                    removed.push(snapshot_path(&self.inner.dir, s));
                }
                Err(e) => return Err(e),
            }
        }
        let mut state = ProducerState::default();
        let r = self.replay_producers(&mut state, i64::MIN)?;
        Ok((state, r))
    }

    /// Records in `state` the batches at or after offset `from`, and rebuilds the
    /// aborted-transaction indexes from there (the entries of markers below `from` stay
    /// as the files have them; a read-only log writes nothing); returns how many batch
    /// headers it read and the transactions.
    fn replay_producers(&self, state: &mut ProducerState, from: i64) -> Result<Replayed> {
        let dir = &self.inner.dir;
        let segments = self.segments();
        let bases: Vec<i64> = segments.iter().map(|s| s.base_offset).collect();
        let write = !self.inner.read_only;
        let mut replayed = Replayed {
            aborted: txn_index::keep_below(dir, &bases, from, write)?,
            ..Replayed::default()
        };
        for seg in segments.iter().filter(|s| s.next_offset() > from) {
            let view = seg.view()?;
            for b in view.batches().filter(|b| b.base_offset() >= from) {
                replayed.batches += 1;
                let change = state.record_batch(&b, b.base_offset(), &self.inner.name, -1)?;
                let Some(TxnChange::Ended(txn)) = change else {
                    continue;
                };
                replayed.ended.push((txn.first_offset, txn.last_offset));
                if txn.aborted {
                    let entry = aborted_entry(state, &txn);
                    if write {
                        txn_index::append(dir, seg.base_offset, &entry)?;
                    }
                    replayed.aborted.push(entry);
                }
            }
        }
        Ok(replayed)
    }

    /// After retention deleted the segments below `first_base`: their snapshots go, but
    /// the latest snapshot stays (it keeps the state of producers whose batches are
    /// gone).
    pub(super) fn remove_snapshots_below(&self, first_base: i64) -> Result<()> {
        let snapshots = list_snapshots(&self.inner.dir)?;
        let latest = snapshots.last().copied();
        for s in snapshots
            .into_iter()
            .filter(|&s| s < first_base && Some(s) != latest)
        {
            remove_snapshot(&self.inner.dir, s)?;
        }
        // Their aborted transactions went with them (`remove_files`).
        self.inner
            .txns
            .lock()
            .aborted
            .retain(|e| e.last_offset >= first_base);
        Ok(())
    }

    /// After a truncation to `end`: the snapshots past it go, and a loaded state is
    /// loaded again from the latest one left (a damaged one is an error: the log is
    /// then poisoned, and reopening it reports and removes it).
    pub(super) fn truncate_producers(&self, w: &mut WriterState, end: i64) -> Result<()> {
        let snapshots = list_snapshots(&self.inner.dir)?;
        for &s in snapshots.iter().filter(|&&s| s > end) {
            remove_snapshot(&self.inner.dir, s)?;
        }
        if w.producers.is_some() {
            let usable: Vec<i64> = snapshots.into_iter().filter(|&s| s <= end).collect();
            let mut removed = Vec::new();
            let (state, replayed) = self.load_producers(&usable, &mut removed)?;
            self.install_producers(w, state, replayed);
            if let Some(p) = removed.first() {
                return Err(Error::corrupt(
                    p.display(),
                    0,
                    "damaged producer snapshot (removed; reopen the log)",
                ));
            }
        }
        Ok(())
    }
}
