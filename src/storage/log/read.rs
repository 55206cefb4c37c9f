//! Reading a [`PartitionLog`]: bounded reads of whole batches ([`LogSlice`]), the
//! waits for the high watermark or the log end and the watchers they register, and the
//! lookup by timestamp.

use super::PartitionLog;
use crate::error::{Error, Result};
use crate::storage::signal::{Moved, Signal};
use crate::storage::slice::LogSlice;
use crate::storage::types::ReadLimit;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// What a read is bounded by: a [`ReadLimit`], or a last stable offset read before.
#[derive(Clone, Copy)]
enum Upper {
    Limit(ReadLimit),
    Stable(i64),
}

impl PartitionLog {
    /// Reads whole batches starting with the one that contains `offset`, up to
    /// `max_bytes` (at least one batch, even a larger one), below the high watermark
    /// (what consumers may see). Reading at or above the high watermark, up to the log
    /// end, gives an empty slice (a replicated log's records there are not committed
    /// yet: Kafka's fetch waits for them too); outside `[log start, log end]` is
    /// [`Error::OffsetOutOfRange`].
    pub fn read(&self, offset: i64, max_bytes: usize) -> Result<LogSlice> {
        self.read_bounded(offset, max_bytes, ReadLimit::HighWatermark)
    }

    /// The offset `limit` names: the high watermark or the log end.
    #[inline]
    pub fn bound(&self, limit: ReadLimit) -> i64 {
        match limit {
            ReadLimit::HighWatermark => self.high_watermark(),
            ReadLimit::LogEnd => self.log_end_offset(),
        }
    }

    /// [`PartitionLog::read`] bounded by `limit`: [`ReadLimit::LogEnd`] reads records
    /// above the high watermark too, as a follower's replica fetch does. Either way,
    /// outside `[log start, log end]` is [`Error::OffsetOutOfRange`], and at or above
    /// the bound an empty slice.
    pub fn read_bounded(
        &self,
        offset: i64,
        max_bytes: usize,
        limit: ReadLimit,
    ) -> Result<LogSlice> {
        // A sealed segment is mapped when read; one that retention, compaction or a
        // truncation removed or replaced since the segment list was taken cannot be:
        // read again from the new list (whose bounds say where the log is now).
        let mut attempt = 0;
        loop {
            match self.read_once(offset, max_bytes, Upper::Limit(limit)) {
                Err(Error::Io { source, .. })
                    if source.kind() == std::io::ErrorKind::NotFound && attempt < 2 =>
                {
                    attempt += 1;
                    // Read-only: the writer's retention took it; list the directory.
                    self.refresh(true)?;
                }
                result => return result,
            }
        }
    }

    /// [`PartitionLog::read`] for a read_committed consumer: whole batches below the
    /// last stable offset (records of transactions still open, or whose marker the
    /// high watermark has not passed, wait), with that offset. The aborted
    /// transactions of the range are [`PartitionLog::aborted_transactions`] from
    /// `offset` to the slice's next offset.
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
    /// let (slice, lso) = log.read_committed(0, 1 << 20)?;
    /// assert!(slice.is_empty() && lso == 0, "the transaction is open");
    /// log.append_end_txn_marker(7, 0, EndTxnMarker::commit(0), 2_000)?;
    /// let (slice, lso) = log.read_committed(0, 1 << 20)?;
    /// assert_eq!((slice.next_offset(), lso), (2, 2));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn read_committed(&self, offset: i64, max_bytes: usize) -> Result<(LogSlice, i64)> {
        let mut attempt = 0;
        loop {
            let lso = self.last_stable_offset()?;
            match self.read_once(offset, max_bytes, Upper::Stable(lso)) {
                Err(Error::Io { source, .. })
                    if source.kind() == std::io::ErrorKind::NotFound && attempt < 2 =>
                {
                    attempt += 1;
                    self.refresh(true)?;
                }
                result => return result.map(|slice| (slice, lso)),
            }
        }
    }

    fn read_once(&self, offset: i64, max_bytes: usize, upper: Upper) -> Result<LogSlice> {
        self.check_dir()?;
        let bound = |upper| match upper {
            Upper::Limit(limit) => self.bound(limit),
            Upper::Stable(lso) => lso,
        };
        if self.inner.read_only && offset >= bound(upper) {
            // At the end of what this reader has seen: the writer may have gone on.
            self.refresh(false)?;
        }
        // The bound first, then the log end (at or above it; a truncation in between
        // may lower both, and the range then ends at the bound).
        let hw = bound(upper);
        let end = self.log_end_offset().max(hw);
        let start = self.log_start_offset();
        if offset < start || offset > end {
            return Err(Error::OffsetOutOfRange {
                partition: self.inner.name.clone(),
                offset,
                start,
                end,
            });
        }
        let segs = self.segments();
        if offset >= hw {
            // Not committed yet (a new leader's high watermark may lag records an
            // earlier leader's consumers read): nothing yet, not out of range.
            return Ok(LogSlice::empty(segs.last(), offset));
        }
        let first = segs
            .partition_point(|s| s.base_offset <= offset)
            .saturating_sub(1);
        for seg in &segs[first..] {
            let view = seg.view()?;
            let mut heads = view.heads();
            let Some(pos) = view
                .find(offset, &mut heads)
                .inspect_err(|e| self.report_corrupt_read(e))?
            else {
                continue;
            };
            let mut end = pos;
            let mut next_offset = offset;
            let mut base = None;
            let limit = view.readable();
            while end < limit && (base.is_none() || end - pos < max_bytes) {
                // Past the first batch, the reader is about to touch these bytes
                // anyway: walk them through the map (one fault per 64 KiB) rather than
                // a system call per header.
                let b = match base {
                    None => heads.at(end),
                    Some(_) => view.head_at(end),
                };
                // A header that does not parse, or offsets that do not follow, end the
                // slice here: the next read, which starts at this batch, reports it.
                let Some(b) = b.filter(|b| base.is_none() || b.base_offset >= next_offset) else {
                    break;
                };
                // Whole batches below the bound: a batch that straddles a high watermark
                // (never the case when it is a follower's log end) waits for it.
                if b.last_offset >= hw || (base.is_some() && end - pos + b.len > max_bytes) {
                    break;
                }
                base.get_or_insert(b.base_offset);
                next_offset = b.last_offset + 1;
                end += b.len;
            }
            if let Some(base_offset) = base {
                if let Some(p) = &self.inner.prefault {
                    view.read_ahead(pos, end, p);
                }
                let from = offset.max(base_offset);
                self.inner
                    .stats
                    .read((next_offset - from) as u64, (end - pos) as u64);
                return Ok(LogSlice::new(
                    seg,
                    view.map().cloned(),
                    (pos, end),
                    (base_offset, next_offset),
                ));
            }
        }
        Ok(LogSlice::empty(segs.last(), offset))
    }

    /// Blocks until the high watermark passes `offset` (a record at `offset` can be
    /// read), the timeout expires, or the log is closed. Returns true if data is there.
    /// Spins briefly before registering a signal with the log and sleeping on it: a
    /// reader that keeps up with the writer is woken in microseconds and costs the
    /// writer nothing, an idle one costs no CPU.
    pub fn wait_for(&self, offset: i64, timeout: Duration) -> bool {
        self.wait_for_bounded(offset, ReadLimit::HighWatermark, timeout)
    }

    /// [`PartitionLog::wait_for`] for the bound `limit` names: with
    /// [`ReadLimit::LogEnd`], until the log end passes `offset` (a replica fetch's long
    /// poll).
    pub fn wait_for_bounded(&self, offset: i64, limit: ReadLimit, timeout: Duration) -> bool {
        if self.inner.read_only {
            return self.poll_writer(offset, limit, timeout);
        }
        // SeqCst loads: a waiter registers its signal, then reads the bound; the writer
        // stores the bound, then reads the watcher count (see `Watchers::add`).
        let ready = || {
            let bound = match limit {
                ReadLimit::HighWatermark => &self.inner.high_watermark,
                ReadLimit::LogEnd => &self.inner.log_end,
            };
            bound.load(Ordering::SeqCst) > offset
        };
        if ready() {
            return true;
        }
        let deadline = Instant::now() + timeout;
        // Spin first, unregistered: a writer pays nothing for a reader that keeps up.
        let spin_until = Instant::now() + timeout.min(Duration::from_micros(50));
        let mut spins = 0u32;
        while Instant::now() < spin_until {
            for _ in 0..64 {
                std::hint::spin_loop();
            }
            if ready() {
                return true;
            }
            spins += 1;
            if spins.is_multiple_of(16) {
                std::thread::yield_now();
            }
        }
        let signal = Arc::new(Signal::default());
        self.inner.watchers.add(&signal, limit);
        let result = loop {
            let seen = signal.current();
            if ready() {
                break true;
            }
            if self.is_closed() {
                break false;
            }
            if !signal.wait_past(seen, deadline) {
                break ready();
            }
        };
        self.inner.watchers.remove(&signal);
        result
    }

    /// [`PartitionLog::wait_for_bounded`] of a read-only log: another process appends,
    /// so it looks every 10 ms (or sooner, as the deadline comes).
    fn poll_writer(&self, offset: i64, limit: ReadLimit, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if self.bound(limit) > offset {
                return true;
            }
            if self.is_closed() || self.refresh(false).is_err() {
                return self.bound(limit) > offset;
            }
            if self.bound(limit) > offset {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            std::thread::sleep((deadline - now).min(Duration::from_millis(10)));
        }
    }

    /// True if a reader waits on the log (a read-only log is followed then).
    pub(crate) fn is_watched(&self) -> bool {
        self.inner.watchers.is_watched()
    }

    /// Notifies `signal` whenever what `limit` names moves (appends and high-watermark
    /// moves for [`ReadLimit::LogEnd`], high-watermark moves for
    /// [`ReadLimit::HighWatermark`]; in a standalone log every append moves both) and
    /// when the log closes, until [`PartitionLog::unwatch`]. Register, then read the
    /// log: a move after the read is never missed.
    pub(crate) fn watch(&self, signal: &Arc<Signal>, limit: ReadLimit) {
        self.inner.watchers.add(signal, limit);
    }

    /// Stops notifying `signal` (one registration of it).
    pub(crate) fn unwatch(&self, signal: &Arc<Signal>) {
        self.inner.watchers.remove(signal);
    }

    /// Wakes every reader waiting on the log: threads in [`PartitionLog::wait_for`] (they
    /// re-check and go back to sleep unless data arrived or the log closed) and the
    /// watchers (consumers, long polls).
    pub fn wake_all(&self) {
        self.inner.watchers.notify(Moved::HighWatermark);
    }

    /// The first record whose timestamp is >= `timestamp`: `(offset, timestamp)`, or
    /// `None` if every record is older. Searches segments by their largest timestamp,
    /// then the time index, then batch headers, then the records of one batch.
    pub fn offset_for_timestamp(&self, timestamp: i64) -> Result<Option<(i64, i64)>> {
        let hw = self.high_watermark();
        let start = self.log_start_offset();
        for seg in self.segments().iter() {
            if seg.max_timestamp() < timestamp || seg.next_offset() <= start {
                continue;
            }
            let view = seg.view()?;
            let Some(mut pos) = view
                .find_time(timestamp)
                .inspect_err(|e| self.report_corrupt_read(e))?
            else {
                continue;
            };
            let mut prev: Option<i64> = None;
            while pos < view.readable() {
                let Some(b) = view
                    .batch_at(pos)
                    .filter(|b| prev.is_none_or(|p| b.base_offset() > p))
                else {
                    let e = view.corrupt_at(pos, prev, prev.map_or(seg.base_offset, |p| p + 1));
                    self.report_corrupt_read(&e);
                    return Err(e);
                };
                prev = Some(b.last_offset());
                if b.last_offset() >= hw {
                    break;
                }
                if b.max_timestamp() >= timestamp && b.last_offset() >= start {
                    if b.compression() != 0 || b.timestamp_type_log_append() {
                        return Ok(Some((b.base_offset().max(start), b.max_timestamp())));
                    }
                    for r in b.records() {
                        let r = r?;
                        if r.timestamp >= timestamp && r.offset >= start {
                            return Ok(Some((r.offset, r.timestamp)));
                        }
                    }
                }
                pos += b.len();
            }
        }
        Ok(None)
    }
}
