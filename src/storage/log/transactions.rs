//! Transactions in a [`PartitionLog`] (KIP-98): the markers the transaction
//! coordinator appends, the last stable offset, and the aborted transactions a
//! read_committed fetch returns. The producers' state (`producer_state`) tracks the
//! open transactions; `Inner::txns` mirrors them for readers, with the aborted ones
//! (`txn_index` holds their files).

use super::{PartitionLog, WriterState};
use crate::error::{Error, Result};
use crate::record::EndTxnMarker;
use crate::storage::producer_state::{MarkerOutcome, MarkerRefusal, TxnChange};
use crate::storage::txn_index::{self, AbortedTxn};
use crate::storage::types::AppendInfo;

impl PartitionLog {
    /// Appends the COMMIT or ABORT `marker` of producer `producer_id` at
    /// `producer_epoch`, its record at `timestamp`: what the transaction coordinator
    /// writes to every partition of a transaction (Kafka's WriteTxnMarkers). It ends the
    /// producer's open transaction, if one is, and takes the producer to
    /// `producer_epoch` (KIP-890 bumps the epoch with the marker). An older epoch than
    /// the producer's is refused ([`Error::InvalidProducerEpoch`]), and so is a marker
    /// from an older coordinator than the producer's last one
    /// ([`Error::TransactionCoordinatorFenced`]).
    ///
    /// ```
    /// use tidelog::record::{EndTxnMarker, TRANSACTIONAL_BIT};
    /// use tidelog::storage::PartitionLog;
    /// use tidelog::{BatchBuilder, LogConfig};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let log = PartitionLog::open(dir.path().join("t-0"), "t-0", LogConfig::default())?;
    /// let mut b = BatchBuilder::new().producer(7, 0, 0).attributes(TRANSACTIONAL_BIT);
    /// b.push(1_000, None, Some(b"pending"), &[]);
    /// log.append_idempotent(&b.finish())?;
    /// assert_eq!(log.last_stable_offset()?, 0, "the transaction is open");
    /// log.append_end_txn_marker(7, 0, EndTxnMarker::abort(0), 2_000)?;
    /// assert_eq!(log.last_stable_offset()?, 2);
    /// let aborted = log.aborted_transactions(0, 2)?;
    /// assert_eq!((aborted[0].first_offset, aborted[0].last_offset), (0, 1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn append_end_txn_marker(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        marker: EndTxnMarker,
        timestamp: i64,
    ) -> Result<AppendInfo> {
        let bytes = self.marker_batch(producer_id, producer_epoch, marker, timestamp)?;
        let parsed = super::parse_batches(&bytes)?;
        let w = self.lock_for_marker(&parsed, producer_id, producer_epoch, marker, 0)?;
        self.append_locked(w, &parsed)
    }

    /// [`PartitionLog::append_end_txn_marker`] as a partition leader answers
    /// WriteTxnMarkers, idempotent: a marker that repeats the producer's last one here
    /// (same producer and coordinator epochs, no transaction of the producer opened
    /// since: a coordinator's retry after it lost the answer) is not appended again
    /// ([`MarkerOutcome::Repeated`]), so a retried marker lands once. The refusals are
    /// those of [`PartitionLog::append_end_txn_marker`], and with a
    /// `transaction_version` of 2 or more (KIP-890's transaction version 2, whose
    /// coordinator bumps the producer epoch at every transaction end and writes the
    /// markers with the bumped epoch) a marker whose producer epoch is not newer than
    /// the producer's here is refused too ([`Error::InvalidProducerEpoch`]), unless it
    /// repeats the last one: a delayed marker of an earlier transaction never ends a
    /// later one. Versions 0 and 1 take a marker of the producer's current epoch.
    ///
    /// ```
    /// use tidelog::record::{EndTxnMarker, TRANSACTIONAL_BIT};
    /// use tidelog::storage::{MarkerOutcome, PartitionLog};
    /// use tidelog::{BatchBuilder, LogConfig};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let log = PartitionLog::open(dir.path().join("t-0"), "t-0", LogConfig::default())?;
    /// let mut b = BatchBuilder::new().producer(7, 0, 0).attributes(TRANSACTIONAL_BIT);
    /// b.push(1_000, None, Some(b"pending"), &[]);
    /// log.append_idempotent(&b.finish())?;
    /// let commit = EndTxnMarker::commit(0);
    /// assert!(matches!(
    ///     log.append_end_txn_marker_once(7, 0, commit, 0, 2_000)?,
    ///     MarkerOutcome::Appended(_)
    /// ));
    /// // The coordinator's retry: not appended again.
    /// assert_eq!(
    ///     log.append_end_txn_marker_once(7, 0, commit, 0, 2_000)?,
    ///     MarkerOutcome::Repeated { log_end_offset: 2 }
    /// );
    /// assert_eq!(log.log_end_offset(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn append_end_txn_marker_once(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        marker: EndTxnMarker,
        transaction_version: i8,
        timestamp: i64,
    ) -> Result<MarkerOutcome> {
        let bytes = self.marker_batch(producer_id, producer_epoch, marker, timestamp)?;
        let parsed = super::parse_batches(&bytes)?;
        let w = self.lock_for_marker(
            &parsed,
            producer_id,
            producer_epoch,
            marker,
            transaction_version,
        )?;
        let state = w.producers.as_ref().ok_or_else(|| self.closed_err())?;
        if state.marker_repeats(producer_id, producer_epoch, marker.coordinator_epoch) {
            return Ok(MarkerOutcome::Repeated {
                log_end_offset: self.log_end_offset(),
            });
        }
        self.append_locked(w, &parsed).map(MarkerOutcome::Appended)
    }

    /// The control batch of `marker`, refused without a producer id.
    fn marker_batch(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        marker: EndTxnMarker,
        timestamp: i64,
    ) -> Result<Vec<u8>> {
        if producer_id < 0 {
            return Err(Error::InvalidBatch(format!(
                "a transaction marker for {} without a producer id",
                self.inner.name
            )));
        }
        Ok(marker.batch(producer_id, producer_epoch, timestamp))
    }

    /// The writer lock, the producers' state loaded, once the log and the producer's
    /// state take the marker `parsed` of `transaction_version`: the refusals of
    /// [`PartitionLog::append_end_txn_marker_once`].
    fn lock_for_marker(
        &self,
        parsed: &crate::record::ValidBatches<'_>,
        producer_id: i64,
        producer_epoch: i16,
        marker: EndTxnMarker,
        transaction_version: i8,
    ) -> Result<parking_lot::MutexGuard<'_, WriterState>> {
        let mut w = self.inner.writer.lock();
        self.check_batches(parsed, None)?;
        self.check_writable()?;
        self.ensure_producers(&mut w)?;
        let state = w.producers.as_ref().ok_or_else(|| self.closed_err())?;
        match state.check_marker(
            producer_id,
            producer_epoch,
            marker.coordinator_epoch,
            transaction_version,
        ) {
            Ok(()) => Ok(w),
            Err(MarkerRefusal::ProducerEpoch { current }) => Err(Error::InvalidProducerEpoch {
                partition: self.inner.name.clone(),
                producer_id,
                epoch: producer_epoch,
                current,
            }),
            Err(MarkerRefusal::CoordinatorEpoch { current }) => {
                Err(Error::TransactionCoordinatorFenced {
                    partition: self.inner.name.clone(),
                    producer_id,
                    coordinator_epoch: marker.coordinator_epoch,
                    current,
                })
            }
        }
    }

    /// The last stable offset (LSO): the first offset of the earliest transaction
    /// still open (or ended by a marker the high watermark has not passed yet), or the
    /// high watermark when there is none; never above the high watermark. A
    /// read_committed consumer reads up to it. Readers waiting on the high watermark
    /// also wake when it moves: it moves only with the high watermark or with an append
    /// (both notify them).
    ///
    /// Cheap once the producers' state is loaded (one uncontended lock, no writer
    /// lock); the first call on a log without a snapshot reads its batch headers.
    pub fn last_stable_offset(&self) -> Result<i64> {
        self.with_txns(|t, hw| t.last_stable_offset(hw))
    }

    /// The aborted transactions with data in `from_offset..to_offset`: those whose
    /// ABORT marker is at or after `from_offset` and whose first offset is below
    /// `to_offset`, in marker order (what a read_committed Fetch returns with its
    /// records, for `to_offset` its upper bound, the last stable offset).
    pub fn aborted_transactions(
        &self,
        from_offset: i64,
        to_offset: i64,
    ) -> Result<Vec<AbortedTxn>> {
        self.with_txns(|t, _| t.aborted_between(from_offset, to_offset))
    }

    /// Whether producer `producer_id` has a transaction open in this log (a
    /// transactional batch not yet ended by a marker).
    ///
    /// ```
    /// use tidelog::record::{EndTxnMarker, TRANSACTIONAL_BIT};
    /// use tidelog::storage::PartitionLog;
    /// use tidelog::{BatchBuilder, LogConfig};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let log = PartitionLog::open(dir.path().join("t-0"), "t-0", LogConfig::default())?;
    /// assert!(!log.has_open_transaction(7)?);
    /// let mut b = BatchBuilder::new().producer(7, 0, 0).attributes(TRANSACTIONAL_BIT);
    /// b.push(1_000, None, Some(b"pending"), &[]);
    /// log.append_idempotent(&b.finish())?;
    /// assert!(log.has_open_transaction(7)?);
    /// log.append_end_txn_marker(7, 0, EndTxnMarker::commit(0), 2_000)?;
    /// assert!(!log.has_open_transaction(7)?);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn has_open_transaction(&self, producer_id: i64) -> Result<bool> {
        self.with_txns(|t, _| t.open.values().any(|p| *p == producer_id))
    }

    /// `f` of the transactions and the high watermark, the producers' state loaded
    /// first if it is not.
    fn with_txns<R>(&self, mut f: impl FnMut(&mut txn_index::TxnBounds, i64) -> R) -> Result<R> {
        {
            let hw = self.high_watermark();
            let mut t = self.inner.txns.lock();
            if t.known {
                return Ok(f(&mut t, hw));
            }
        }
        let mut w = self.inner.writer.lock();
        self.ensure_producers(&mut w)?;
        let hw = self.high_watermark();
        let mut t = self.inner.txns.lock();
        Ok(f(&mut t, hw))
    }

    /// After an append changed the open transactions (under the writer lock, before
    /// the batch is published): mirrors the change for readers, and writes an aborted
    /// transaction to the index of the active segment (the marker's). A failure to
    /// write it poisons the log: the batch is in the segment, unpublished, and the
    /// reopen replays it.
    pub(super) fn note_txn_change(&self, w: &mut WriterState, change: TxnChange) -> Result<()> {
        let mut t = self.inner.txns.lock();
        match change {
            TxnChange::Opened {
                first_offset,
                producer_id,
            } => {
                t.open.insert(first_offset, producer_id);
            }
            TxnChange::Ended(txn) => {
                t.open.remove(&txn.first_offset);
                t.ended.insert(txn.first_offset, txn.last_offset);
                if txn.aborted {
                    let state = w.producers.as_ref().ok_or_else(|| self.closed_err())?;
                    let entry = super::producers::aborted_entry(state, &txn);
                    let base = w
                        .active
                        .as_ref()
                        .map(|a| a.shared().base_offset)
                        .ok_or_else(|| self.closed_err())?;
                    if let Err(e) = txn_index::append(&self.inner.dir, base, &entry) {
                        self.poison(&e);
                        return Err(e);
                    }
                    t.aborted.push(entry);
                }
            }
        }
        Ok(())
    }
}
