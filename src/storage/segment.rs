//! One segment: a `.log` file of RecordBatch v2 batches back to back, with its sparse
//! `.index` and `.timeindex`.
//!
//! A [`Segment`] is the shared, read side (held in `Arc`s by the log and by readers);
//! a [`SegmentWriter`] is the single write side of the active segment. Invariants:
//!
//! * bytes `[0, log.readable())` are whole, validated batches with strictly increasing
//!   offsets, the first at or above `base_offset`;
//! * `next_offset` (one past the last record) is published after the bytes it covers;
//! * every index entry points at the start of a batch inside the readable bytes;
//! * file blocks are reserved (fallocate) before any byte is copied into the map.

use super::config::LogConfig;
use super::index::{
    IndexFile, IndexWriter, OFFSET_ENTRY, offset_entry, read_offset_entry, valid_prefix,
};
use super::mmap::{AppendMap, MapWriter};
use super::prefault::Prefaulter;
use super::time_index::{TIME_ENTRY, read_time_entry, time_entry};
use crate::error::IoContext;
use crate::record::{Batch, BatchHead, HEADER_LEN};
use crate::{Error, Result};
use fs2::FileExt;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::time::Instant;

/// Smallest and largest step by which a segment's reserved disk space grows. The step
/// doubles with what the writer has reserved since the segment was opened, so an idle
/// partition holds 256 KiB past its data (also after a reopen), a busy one reserves
/// 16 MiB at a time (1,000 partitions never reserve more than they use plus 16 MiB each).
const LOG_RESERVE_MIN: usize = 256 << 10;
const LOG_RESERVE_MAX: usize = 16 << 20;

/// A writer that used up its last reservation step faster than this is "fast": its
/// next steps are faulted in ahead of it.
const PREFAULT_MIN_BYTES_PER_SEC: f64 = 50e6;

/// Batches of at least this many bytes are appended with `pwritev` rather than copied
/// through the map. The kernel then fills fresh page-cache pages by copying, where
/// faulting them into the map zeroes each one first: at 100 KB batches that is 3.6
/// GB/s on one core against 2.1 GB/s with the prefault thread on a second one. Below
/// this size the page at each end of a batch is partial, the syscall and partial-page
/// cost dominates, and prefaulted stores win.
const BULK_APPEND_MIN: usize = 64 << 10;

/// How far ahead of a sequential reader of on-disk bytes the segment is mapped (see
/// `Segment::read_ahead`); the next window is requested when the reader gets within
/// half of it.
const READ_AHEAD_WINDOW: usize = 8 << 20;

/// File name of a segment file: the base offset, 20 digits, zero-padded.
pub(crate) fn file_name(base_offset: i64, ext: &str) -> String {
    format!("{base_offset:020}.{ext}")
}

/// The shared, read side of a segment.
pub(crate) struct Segment {
    pub(crate) base_offset: i64,
    pub(crate) log_path: PathBuf,
    pub(crate) file: File,
    log: Arc<AppendMap>,
    pub(crate) index: IndexFile,
    pub(crate) time_index: IndexFile,
    /// One past the last offset in the segment.
    next_offset: AtomicI64,
    /// Largest record timestamp in the segment (-1 when empty).
    max_timestamp: AtomicI64,
    /// Bytes that were on disk when the segment was opened (0 for a segment created by
    /// this process): the only bytes a read can fault on, since appends map theirs.
    cold_end: usize,
    /// `[0, read_ahead)` has been handed to the prefault thread to be mapped.
    read_ahead: AtomicUsize,
    /// Where the last read ended: a read starting there is sequential.
    last_read_end: AtomicUsize,
}

/// Write side of the active segment.
pub(crate) struct SegmentWriter {
    pub(crate) seg: Arc<Segment>,
    log_w: MapWriter,
    index_w: IndexWriter,
    time_w: IndexWriter,
    /// Byte position of the next batch.
    pos: usize,
    /// Bytes of the file backed by reserved blocks.
    reserved: usize,
    /// `reserved` when the segment was opened: steps grow with what this writer has
    /// reserved, so a reopened segment starts again from the smallest step.
    reserved_at_open: usize,
    /// Size of the mapping.
    capacity: usize,
    bytes_since_index: usize,
    last_time_entry: i64,
    /// Relative offset of the batch holding the largest timestamp (for the final entry).
    max_ts_batch: u32,
    /// Wall-clock ms of the first append (for segment_ms); None while empty.
    pub(crate) first_append_ms: Option<i64>,
    index_interval: usize,
    /// Faults in reserved ranges off the appending thread (see `prefault`).
    prefault: Option<Prefaulter>,
    /// When the last reservation step was taken, and the write position then: the
    /// writer's pace is the bytes written since over the time since.
    last_reserve: Option<(Instant, usize)>,
    /// Bytes written with `pwritev` since the last reservation: they need no page
    /// faulted in ahead, so they do not count towards the writer's pace.
    bulk_since_reserve: usize,
}

/// Most bytes of a segment read at once by [`Heads`] for headers not known to be
/// mapped: a scan from an offset index entry (one per 4 KiB of data by default) to the
/// batch it looks for stays inside one window.
const HEAD_WINDOW: usize = 8192;

/// Reads the batch headers of one segment while locating an offset.
///
/// Bytes this process wrote or read ahead are mapped, and their headers are read
/// through the map. Bytes that were on disk when the segment was opened, and that no
/// sequential reader has had mapped, are read with `pread` into a window instead: a
/// lookup at a random offset of a large log then costs a system call (about 1 µs here)
/// rather than a page fault (2-3 µs, and the kernel maps the 16 pages around the
/// header, which a lookup does not need). Kafka locates batches the same way (positional
/// reads of the log, mapped indexes).
pub(crate) struct Heads<'s> {
    seg: &'s Segment,
    /// File position of `buf[0]`, and how many bytes of `buf` hold file data.
    from: usize,
    held: usize,
    /// Bytes to read first (set from the offset index).
    first_read: usize,
    /// Allocated on the first `pread`: reads of mapped bytes never touch it.
    buf: Vec<u8>,
}

impl Heads<'_> {
    /// The header of the batch at `pos`, if a whole batch is readable there.
    #[inline]
    pub(crate) fn at(&mut self, pos: usize) -> Option<BatchHead> {
        let seg = self.seg;
        if pos >= seg.cold_end || pos < seg.read_ahead.load(Ordering::Relaxed) {
            return seg.head_at(pos);
        }
        self.cold(pos)
    }

    #[cold]
    fn cold(&mut self, pos: usize) -> Option<BatchHead> {
        let seg = self.seg;
        let readable = seg.log.readable();
        if pos < self.from || pos + HEADER_LEN > self.from + self.held {
            // The first read takes what the index says the scan needs (see
            // `Segment::index_position`); a scan that goes on reads a whole window.
            let size = if self.held == 0 {
                self.first_read.clamp(HEADER_LEN, HEAD_WINDOW)
            } else {
                HEAD_WINDOW
            };
            let want = size.min(readable.saturating_sub(pos));
            if self.buf.is_empty() {
                self.buf = vec![0; HEAD_WINDOW];
            }
            let mut held = 0;
            while held < want {
                match seg
                    .file
                    .read_at(&mut self.buf[held..want], (pos + held) as u64)
                {
                    Ok(0) => break,
                    Ok(n) => held += n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    // The map reads the same bytes (and reports nothing either).
                    Err(_) => return seg.head_at(pos),
                }
            }
            self.from = pos;
            self.held = held;
        }
        let head = BatchHead::parse(&self.buf[pos - self.from..self.held])?;
        (pos + head.len <= readable).then_some(head)
    }
}

/// What opening a segment found.
#[derive(Debug, Default, Clone)]
pub(crate) struct SegmentScan {
    pub(crate) data_len: usize,
    pub(crate) next_offset: i64,
    pub(crate) max_timestamp: i64,
    pub(crate) max_ts_batch: u32,
    pub(crate) index_entries: usize,
    pub(crate) time_entries: usize,
    pub(crate) last_time_entry: i64,
    pub(crate) bytes_since_index: usize,
    /// (position, reason) of the first bad batch, where the log was cut.
    pub(crate) truncated: Option<(u64, String)>,
    pub(crate) index_rebuilt: bool,
    pub(crate) time_index_rebuilt: bool,
    pub(crate) bytes_validated: u64,
    /// Opened without validating batches (below the recovery point).
    pub(crate) trusted: bool,
}

fn create_rw(path: &Path) -> Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .ctx("open segment", path)
}

impl Segment {
    /// Offset one past the last record.
    #[inline]
    pub(crate) fn next_offset(&self) -> i64 {
        self.next_offset.load(Ordering::Acquire)
    }

    /// Largest record timestamp, -1 if empty.
    #[inline]
    pub(crate) fn max_timestamp(&self) -> i64 {
        self.max_timestamp.load(Ordering::Acquire)
    }

    /// Bytes of data in the segment.
    #[inline]
    pub(crate) fn size(&self) -> usize {
        self.log.readable()
    }

    /// Readable bytes `[start, end)`.
    #[inline]
    pub(crate) fn bytes(&self, start: usize, end: usize) -> Option<&[u8]> {
        self.log.get(start, end)
    }

    fn location(&self) -> String {
        self.log_path.display().to_string()
    }

    /// The batch header at `pos` (no CRC check: bytes were validated on the way in).
    #[inline]
    pub(crate) fn batch_at(&self, pos: usize) -> Option<Batch<'_>> {
        let head = self.log.get(pos, pos + HEADER_LEN)?;
        let size = crate::record::batch_size(head)?;
        let bytes = self.log.get(pos, pos + size)?;
        Batch::parse_header_at(bytes, "", 0).ok()
    }

    /// The header fields of the batch at `pos`, read through the map.
    #[inline]
    pub(crate) fn head_at(&self, pos: usize) -> Option<BatchHead> {
        self.batch_at(pos).map(|b| b.head())
    }

    /// Every batch of the segment, oldest first (headers only; validated on the way in).
    pub(crate) fn batches(&self) -> impl Iterator<Item = Batch<'_>> {
        let mut pos = 0;
        std::iter::from_fn(move || {
            let b = self.batch_at(pos)?;
            pos += b.len();
            Some(b)
        })
    }

    /// A reader of this segment's batch headers (see [`Heads`]).
    #[inline]
    pub(crate) fn heads(&self) -> Heads<'_> {
        Heads {
            seg: self,
            from: 0,
            held: 0,
            first_read: HEAD_WINDOW,
            buf: Vec::new(),
        }
    }

    /// Position to start a forward scan for relative offset `rel`: the last offset index
    /// entry at or below it, if the batch there starts at the offset the entry names;
    /// else 0. A damaged entry of a segment trusted on open (only its last entry is
    /// checked then) costs a longer scan, never a wrong answer.
    fn index_position(&self, rel: u32, heads: &mut Heads<'_>) -> usize {
        let Some(i) = self.index.floor(rel, |e| read_offset_entry(e).0) else {
            return 0;
        };
        let (entry_rel, pos) = read_offset_entry(self.index.entry(i));
        // The batch sought starts before the next entry's position, so a scan reads at
        // most up to there. Entries further apart than a window mean large batches
        // (entries are one index interval apart, plus one batch): the batch at this
        // entry is then likely the one sought, and its header is all there is to read.
        heads.first_read = if i + 1 < self.index.entries() {
            let (_, next) = read_offset_entry(self.index.entry(i + 1));
            let span = (next as usize).saturating_sub(pos as usize) + HEADER_LEN;
            if span <= HEAD_WINDOW {
                span
            } else {
                HEADER_LEN
            }
        } else {
            HEAD_WINDOW
        };
        match heads.at(pos as usize) {
            Some(b) if b.base_offset == self.base_offset + entry_rel as i64 => pos as usize,
            _ => 0,
        }
    }

    /// Byte position of the batch that contains `offset` (or the first after it), found
    /// through the sparse index and a forward scan of batch headers; `None` if the
    /// segment has no batch with a last offset >= `offset`.
    pub(crate) fn find(&self, offset: i64, heads: &mut Heads<'_>) -> Option<usize> {
        let rel = (offset - self.base_offset).clamp(0, u32::MAX as i64) as u32;
        let from = self.index_position(rel, heads);
        self.scan_from(from, heads, |b| b.last_offset >= offset)
    }

    /// Walks batch headers from `pos` to the first batch that `hit` accepts.
    fn scan_from(
        &self,
        mut pos: usize,
        heads: &mut Heads<'_>,
        hit: impl Fn(&BatchHead) -> bool,
    ) -> Option<usize> {
        let end = self.log.readable();
        while pos < end {
            let b = heads.at(pos)?;
            if hit(&b) {
                return Some(pos);
            }
            pos += b.len;
        }
        None
    }

    /// Position of the first batch whose max timestamp is >= `ts`, found through the
    /// time index and a forward scan.
    pub(crate) fn find_time(&self, ts: i64) -> Option<usize> {
        let start_rel = self
            .time_index
            .floor(ts.saturating_sub(1), |e| read_time_entry(e).0)
            .map_or(0, |i| read_time_entry(self.time_index.entry(i)).1);
        let mut heads = self.heads();
        let from = self.index_position(start_rel, &mut heads);
        self.scan_from(from, &mut heads, |b| b.max_timestamp >= ts)
    }

    /// Told of each read of `[start, end)`: when it continues the previous read and the
    /// segment's on-disk bytes lie ahead, hands the next window of them to `prefault` to
    /// be mapped while the reader works on what it has. Random reads (lookups) request
    /// nothing (unless they hit the first batch), nor do reads of bytes appended by this
    /// process (already mapped).
    pub(crate) fn read_ahead(&self, start: usize, end: usize, prefault: &Prefaulter) {
        // Checked first, so that readers of bytes this process appended (a tailing
        // consumer) never write to the segment's shared state.
        if start >= self.cold_end {
            return;
        }
        let prev = self.last_read_end.swap(end, Ordering::Relaxed);
        // A read from the segment's start counts as sequential too: a reader crossing
        // from the previous segment, or starting at the log start.
        if prev != start && start != 0 {
            return;
        }
        let mapped = self.read_ahead.load(Ordering::Relaxed);
        if mapped >= end.saturating_add(READ_AHEAD_WINDOW / 2) {
            return;
        }
        let from = mapped.max(start);
        let to = from.saturating_add(READ_AHEAD_WINDOW).min(self.cold_end);
        if from < to
            && self
                .read_ahead
                .compare_exchange(mapped, to, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            // A busy thread refuses: the reader then faults the pages itself.
            prefault.submit_read(&self.log, from, to);
        }
    }

    /// How far read-ahead has been requested.
    #[cfg(test)]
    pub(crate) fn read_ahead_mark(&self) -> usize {
        self.read_ahead.load(Ordering::Relaxed)
    }

    /// Fsyncs the segment's data and indexes.
    pub(crate) fn sync(&self) -> Result<()> {
        self.log
            .flush(0, self.log.readable())
            .ctx("msync", &self.log_path)?;
        self.file.sync_data().ctx("fsync", &self.log_path)?;
        self.index.sync()?;
        self.time_index.sync()
    }

    /// Creates a new, empty active segment.
    pub(crate) fn create(
        dir: &Path,
        base_offset: i64,
        config: &LogConfig,
    ) -> Result<SegmentWriter> {
        let log_path = dir.join(file_name(base_offset, "log"));
        for ext in ["index", "timeindex"] {
            let p = dir.join(file_name(base_offset, ext));
            if p.exists() {
                std::fs::remove_file(&p).ctx("remove stale index", &p)?;
            }
        }
        let file = create_rw(&log_path)?;
        file.set_len(0).ctx("truncate new segment", &log_path)?;
        let scan = SegmentScan {
            next_offset: base_offset,
            max_timestamp: -1,
            last_time_entry: -1,
            ..Default::default()
        };
        Self::open_active_file(dir, base_offset, file, &scan, config)
    }

    /// Opens the segment at `base_offset` as the active one, after `scan` established
    /// its contents.
    pub(crate) fn open_active(
        dir: &Path,
        base_offset: i64,
        scan: &SegmentScan,
        config: &LogConfig,
    ) -> Result<SegmentWriter> {
        let path = dir.join(file_name(base_offset, "log"));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .ctx("open segment", &path)?;
        Self::open_active_file(dir, base_offset, file, scan, config)
    }

    /// [`Segment::open_active`] over an opened `.log` file.
    fn open_active_file(
        dir: &Path,
        base_offset: i64,
        file: File,
        scan: &SegmentScan,
        config: &LogConfig,
    ) -> Result<SegmentWriter> {
        let log_path = dir.join(file_name(base_offset, "log"));
        let index_max_bytes = config.index_max_bytes as usize;
        let capacity = (config.segment_bytes as usize).max(scan.data_len + 1);
        let (log, log_w) =
            AppendMap::map_rw(&file, capacity, scan.data_len).ctx("map segment", &log_path)?;
        let (index, index_w) = IndexFile::open_rw(
            &dir.join(file_name(base_offset, "index")),
            OFFSET_ENTRY,
            scan.index_entries,
            index_max_bytes,
        )?;
        let (time_index, time_w) = IndexFile::open_rw(
            &dir.join(file_name(base_offset, "timeindex")),
            TIME_ENTRY,
            scan.time_entries,
            index_max_bytes,
        )?;
        let reserved = file.metadata().ctx("stat", &log_path)?.len() as usize;
        let seg = Segment::assemble(base_offset, log_path, file, log, index, time_index, scan);
        Ok(SegmentWriter {
            seg,
            log_w,
            index_w,
            time_w,
            pos: scan.data_len,
            reserved: reserved.max(scan.data_len),
            reserved_at_open: reserved.max(scan.data_len),
            capacity,
            bytes_since_index: scan.bytes_since_index,
            last_time_entry: scan.last_time_entry,
            max_ts_batch: scan.max_ts_batch,
            first_append_ms: None,
            index_interval: config.index_interval_bytes as usize,
            prefault: None,
            last_reserve: None,
            bulk_since_reserve: 0,
        })
    }

    /// The shared segment over opened files, with the state `scan` found.
    fn assemble(
        base_offset: i64,
        log_path: PathBuf,
        file: File,
        log: Arc<AppendMap>,
        index: IndexFile,
        time_index: IndexFile,
        scan: &SegmentScan,
    ) -> Arc<Segment> {
        Arc::new(Segment {
            base_offset,
            log_path,
            file,
            log,
            index,
            time_index,
            next_offset: AtomicI64::new(scan.next_offset),
            max_timestamp: AtomicI64::new(scan.max_timestamp),
            cold_end: scan.data_len,
            read_ahead: AtomicUsize::new(0),
            last_read_end: AtomicUsize::new(0),
        })
    }

    /// Opens a sealed segment read-only after `scan` established its contents.
    pub(crate) fn open_sealed(
        dir: &Path,
        base_offset: i64,
        scan: &SegmentScan,
    ) -> Result<Arc<Segment>> {
        let log_path = dir.join(file_name(base_offset, "log"));
        let file = File::open(&log_path).ctx("open segment", &log_path)?;
        let log = AppendMap::map_ro(&file, scan.data_len).ctx("map segment", &log_path)?;
        let index = IndexFile::open_ro(
            &dir.join(file_name(base_offset, "index")),
            OFFSET_ENTRY,
            scan.index_entries,
        )?;
        let time_index = IndexFile::open_ro(
            &dir.join(file_name(base_offset, "timeindex")),
            TIME_ENTRY,
            scan.time_entries,
        )?;
        Ok(Segment::assemble(
            base_offset,
            log_path,
            file,
            log,
            index,
            time_index,
            scan,
        ))
    }
}

/// Reads a file into a read-only map of its current length (for scanning on open).
fn map_whole(path: &Path) -> Result<(File, Arc<AppendMap>)> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .ctx("open", path)?;
    let len = file.metadata().ctx("stat", path)?.len() as usize;
    let map = AppendMap::map_ro(&file, len).ctx("map", path)?;
    Ok((file, map))
}

/// How far a segment can be trusted on open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Trust {
    /// The whole segment lies below the recovery point.
    Full,
    /// Trusted if its data ends at or below this recovery point.
    UpTo(i64),
    /// Validate every batch.
    None,
}

/// Establishes the contents of a segment on open.
///
/// A trusted segment (wholly below the recovery point) reuses its indexes if they check
/// out (else they are rebuilt by a header walk), and only the batch headers after the
/// last index entry are walked to find the data end. Otherwise every batch's length,
/// magic, CRC and offsets are checked from the start, the log is cut at the first bad
/// batch, and both indexes are rebuilt. Either way the `.log` file is trimmed to the
/// data end when it is longer. Sets `trusted` in the result.
pub(crate) fn scan_segment(
    dir: &Path,
    base_offset: i64,
    trust: Trust,
    index_interval: usize,
    index_max_bytes: usize,
) -> Result<SegmentScan> {
    let log_path = dir.join(file_name(base_offset, "log"));
    let (file, log) = map_whole(&log_path)?;
    let file_len = log.readable();
    let data = log.get(0, file_len).unwrap_or(&[]);
    let loc = log_path.display().to_string();
    let index_path = dir.join(file_name(base_offset, "index"));
    let time_path = dir.join(file_name(base_offset, "timeindex"));

    let mut scan = match trust {
        Trust::None => None,
        Trust::Full => trusted_scan(data, base_offset, &index_path, &time_path)?,
        // Bytes other than the zero padding after the data are a torn write: validate
        // the segment so that the cut is reported, not trimmed silently.
        Trust::UpTo(rp) => trusted_scan(data, base_offset, &index_path, &time_path)?
            .filter(|s| s.next_offset <= rp && data[s.data_len..].iter().all(|&b| b == 0)),
    };
    if let Some(s) = scan.as_mut() {
        s.trusted = true;
    } else {
        let validate = trust != Trust::Full;
        let (mut s, idx, tidx) = full_scan(
            data,
            base_offset,
            &loc,
            validate,
            index_interval,
            index_max_bytes,
        );
        // A rebuilt time index may lack the final entry written when the segment was
        // sealed: only a real difference counts as a repair.
        s.index_rebuilt = differs(&index_path, &idx, false);
        s.time_index_rebuilt = differs(&time_path, &tidx, true);
        // A trusted segment is rebuilt only because its indexes did not check out.
        s.index_rebuilt |= !validate && !s.time_index_rebuilt;
        write_index_file(&index_path, &idx)?;
        write_index_file(&time_path, &tidx)?;
        scan = Some(s);
    }
    let scan = scan.expect("set above");
    if file_len > scan.data_len {
        file.set_len(scan.data_len as u64)
            .ctx("truncate segment", &log_path)?;
    }
    Ok(scan)
}

/// True if the index file at `path` is missing or does not start with `rebuilt` followed
/// only by zeros (an untrimmed preallocated tail is not damage).
fn differs(path: &Path, rebuilt: &[u8], prefix_ok: bool) -> bool {
    match std::fs::read(path) {
        Ok(old) => {
            old.len() < rebuilt.len()
                || old[..rebuilt.len()] != *rebuilt
                || (!prefix_ok && old[rebuilt.len()..].iter().any(|&b| b != 0))
        }
        Err(_) => true,
    }
}

/// Writes an index file through a temporary file and a rename, so that a reader still
/// mapping the old file keeps valid pages (a shrink in place could fault its map).
fn write_index_file(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes).ctx("write index", &tmp)?;
    std::fs::rename(&tmp, path).ctx("rename index into place", path)
}

/// Makes the first `cut` bytes of `seg` (whole batches) the whole segment, reopened as
/// the active one, without changing a byte that a reader of `seg` may hold (truncation).
///
/// When bytes are cut, the kept prefix is copied to `<base>.log.swap`, fsynced, and
/// renamed over the `.log`: readers of the old file keep its pages through their maps
/// and descriptors, and appends go to the new file. When nothing is cut (the cut falls at
/// the end of a sealed segment) the file is reopened for appending past its data, which
/// no reader holds. Both indexes are rewritten for the prefix (temporary file and
/// rename). `step` is told of each durable step (crash tests stop or copy there).
pub(crate) fn cut_to(
    dir: &Path,
    seg: &Segment,
    cut: usize,
    config: &LogConfig,
    step: &mut dyn FnMut(&'static str) -> Result<()>,
) -> Result<SegmentWriter> {
    let base = seg.base_offset;
    let data = seg.bytes(0, cut).ok_or_else(|| {
        Error::corrupt(
            seg.location(),
            cut as u64,
            "truncation point is past the segment's data",
        )
    })?;
    let (scan, idx, tidx) = full_scan(
        data,
        base,
        &seg.location(),
        false,
        config.index_interval_bytes as usize,
        config.index_max_bytes as usize,
    );
    if scan.data_len != cut {
        return Err(Error::corrupt(
            seg.location(),
            scan.data_len as u64,
            "truncation point is not a batch boundary",
        ));
    }
    let swap = dir.join(format!("{}.swap", file_name(base, "log")));
    let copied = cut < seg.size();
    if copied {
        let mut src = File::open(&seg.log_path).ctx("open segment", &seg.log_path)?;
        let mut dst = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&swap)
            .ctx("create", &swap)?;
        let n = std::io::copy(&mut std::io::Read::take(&mut src, cut as u64), &mut dst)
            .ctx("copy the kept prefix to", &swap)?;
        if n != cut as u64 {
            return Err(Error::corrupt(
                seg.location(),
                n,
                "segment file ends before its data",
            ));
        }
        dst.sync_all().ctx("fsync", &swap)?;
        step("prefix copied")?;
    }
    write_index_file(&dir.join(file_name(base, "index")), &idx)?;
    write_index_file(&dir.join(file_name(base, "timeindex")), &tidx)?;
    step("indexes rewritten")?;
    if copied {
        std::fs::rename(&swap, &seg.log_path).ctx("swap in the kept prefix", &seg.log_path)?;
        step("prefix swapped in")?;
    }
    Segment::open_active(dir, base, &scan, config)
}

/// Writes a compacted copy of a sealed segment and swaps it in: the new bytes go to
/// `<base>.log.cleaned`, are fsynced, and are renamed over the `.log`; its indexes are
/// rebuilt. Readers of the old segment keep the old file's pages. Returns the new
/// segment, or `None` if it is empty and was deleted (unless `keep_empty`: the first
/// segment stays, so that the log start offset keeps its segment).
pub(crate) fn replace_with(
    dir: &Path,
    base_offset: i64,
    bytes: &[u8],
    keep_empty: bool,
    config: &LogConfig,
) -> Result<Option<Arc<Segment>>> {
    use std::io::Write;
    let log_path = dir.join(file_name(base_offset, "log"));
    if bytes.is_empty() && !keep_empty {
        for ext in ["log", "index", "timeindex"] {
            let p = dir.join(file_name(base_offset, ext));
            match std::fs::remove_file(&p) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(Error::io("delete compacted segment", p, e)),
            }
        }
        return Ok(None);
    }
    let cleaned = dir.join(format!("{}.cleaned", file_name(base_offset, "log")));
    let mut f = File::create(&cleaned).ctx("create", &cleaned)?;
    f.write_all(bytes).ctx("write", &cleaned)?;
    f.sync_all().ctx("fsync", &cleaned)?;
    drop(f);
    let (scan, idx, tidx) = full_scan(
        bytes,
        base_offset,
        &cleaned.display().to_string(),
        true,
        config.index_interval_bytes as usize,
        config.index_max_bytes as usize,
    );
    if let Some((pos, why)) = scan.truncated {
        let _ = std::fs::remove_file(&cleaned);
        return Err(Error::corrupt(cleaned.display(), pos, why));
    }
    write_index_file(&dir.join(file_name(base_offset, "index")), &idx)?;
    write_index_file(&dir.join(file_name(base_offset, "timeindex")), &tidx)?;
    std::fs::rename(&cleaned, &log_path).ctx("swap in compacted segment", &log_path)?;
    Segment::open_sealed(dir, base_offset, &scan).map(Some)
}

/// Reuses the indexes of a trusted segment; `None` if they do not check out.
fn trusted_scan(
    data: &[u8],
    base: i64,
    index_path: &Path,
    time_path: &Path,
) -> Result<Option<SegmentScan>> {
    let read = |p: &Path| match std::fs::read(p) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io("read index", p, e)),
    };
    let (Some(idx), Some(tidx)) = (read(index_path)?, read(time_path)?) else {
        return Ok(None);
    };
    if idx.len() % OFFSET_ENTRY != 0 || tidx.len() % TIME_ENTRY != 0 {
        return Ok(None);
    }
    let n = valid_prefix(&idx, OFFSET_ENTRY, |e| {
        let (o, p) = read_offset_entry(e);
        (o as i64, p as i64)
    });
    let tn = valid_prefix(&tidx, TIME_ENTRY, |e| {
        let (t, o) = read_time_entry(e);
        (t, o as i64)
    });
    // Start the walk at the last index entry, which must point at a batch whose base
    // offset matches.
    let (mut pos, mut expect_rel) = (0usize, 0u32);
    if n > 0 {
        let (rel, p) = read_offset_entry(&idx[(n - 1) * OFFSET_ENTRY..n * OFFSET_ENTRY]);
        pos = p as usize;
        expect_rel = rel;
    }
    let mut scan = SegmentScan {
        next_offset: base,
        max_timestamp: -1,
        last_time_entry: -1,
        index_entries: n,
        time_entries: tn,
        ..Default::default()
    };
    if tn > 0 {
        let (t, rel) = read_time_entry(&tidx[(tn - 1) * TIME_ENTRY..tn * TIME_ENTRY]);
        scan.max_timestamp = t;
        scan.last_time_entry = t;
        scan.max_ts_batch = rel;
    }
    let mut first = true;
    while pos + HEADER_LEN <= data.len() {
        let Ok(b) = Batch::parse_header_at(&data[pos..], "", 0) else {
            break;
        };
        if first && n > 0 && b.base_offset() != base + expect_rel as i64 {
            return Ok(None);
        }
        if b.base_offset() < scan.next_offset && !first {
            break;
        }
        first = false;
        scan.next_offset = b.last_offset() + 1;
        if b.max_timestamp() > scan.max_timestamp {
            scan.max_timestamp = b.max_timestamp();
            scan.max_ts_batch = (b.base_offset() - base) as u32;
        }
        pos += b.len();
        scan.bytes_since_index += b.len();
    }
    if n > 0 && first {
        // The last index entry points past the data.
        return Ok(None);
    }
    if tn > 0 && read_time_entry(&tidx[(tn - 1) * TIME_ENTRY..]).1 as i64 > scan.next_offset - base
    {
        return Ok(None);
    }
    scan.data_len = pos;
    Ok(Some(scan))
}

/// Walks every batch from the start, rebuilding both indexes; with `validate`, checks
/// CRCs too. Returns the scan and the index bytes.
fn full_scan(
    data: &[u8],
    base: i64,
    loc: &str,
    validate: bool,
    index_interval: usize,
    index_max_bytes: usize,
) -> (SegmentScan, Vec<u8>, Vec<u8>) {
    let mut scan = SegmentScan {
        next_offset: base,
        max_timestamp: -1,
        last_time_entry: -1,
        ..Default::default()
    };
    let (mut idx, mut tidx) = (Vec::new(), Vec::new());
    let mut pos = 0usize;
    while pos < data.len() {
        let parsed = if validate {
            Batch::parse_at(&data[pos..], loc, pos as u64)
        } else {
            Batch::parse_header_at(&data[pos..], loc, pos as u64)
        };
        let b = match parsed {
            Ok(b) => b,
            Err(e) => {
                // Zeros after the data are the unused preallocated tail, not damage.
                if !data[pos..].iter().all(|&x| x == 0) {
                    scan.truncated = Some((pos as u64, e.to_string()));
                }
                break;
            }
        };
        if b.base_offset() < scan.next_offset || b.last_offset() - base > u32::MAX as i64 {
            scan.truncated = Some((
                pos as u64,
                format!(
                    "corrupt data in {loc} at byte {pos}: batch offsets {}..={} do not follow {}",
                    b.base_offset(),
                    b.last_offset(),
                    scan.next_offset - 1
                ),
            ));
            break;
        }
        let rel = (b.base_offset() - base) as u32;
        if pos > 0
            && scan.bytes_since_index >= index_interval
            && idx.len() + OFFSET_ENTRY <= index_max_bytes
            && tidx.len() + TIME_ENTRY <= index_max_bytes
        {
            idx.extend_from_slice(&offset_entry(rel, pos as u32));
            let ts = scan.max_timestamp.max(b.max_timestamp());
            if ts > scan.last_time_entry {
                tidx.extend_from_slice(&time_entry(ts, rel));
                scan.last_time_entry = ts;
            }
            scan.bytes_since_index = 0;
        }
        if b.max_timestamp() > scan.max_timestamp {
            scan.max_timestamp = b.max_timestamp();
            scan.max_ts_batch = rel;
        }
        scan.next_offset = b.last_offset() + 1;
        scan.bytes_since_index += b.len();
        pos += b.len();
        if validate {
            crate::metrics::recovery_validated(b.len() as u64);
        }
    }
    if validate {
        scan.bytes_validated = pos as u64;
    }
    scan.data_len = pos;
    scan.index_entries = idx.len() / OFFSET_ENTRY;
    scan.time_entries = tidx.len() / TIME_ENTRY;
    (scan, idx, tidx)
}

impl SegmentWriter {
    /// Byte position of the next batch.
    #[inline]
    pub(crate) fn position(&self) -> usize {
        self.pos
    }

    /// Hands reserved ranges to `prefault` from now on.
    pub(crate) fn set_prefaulter(&mut self, prefault: Option<Prefaulter>) {
        self.prefault = prefault;
    }

    /// True if a batch of `len` bytes fits (a batch never spans two segments; an empty
    /// segment takes any batch up to the mapping's size).
    #[inline]
    pub(crate) fn fits(&self, len: usize, segment_bytes: usize) -> bool {
        self.pos + len <= self.capacity && (self.pos == 0 || self.pos + len <= segment_bytes)
    }

    /// True if the indexes have no room for another entry.
    pub(crate) fn index_full(&self) -> bool {
        self.index_w.is_full() || self.time_w.is_full()
    }

    /// The next reservation step: as much as this writer has reserved so far, within
    /// the bounds (doubling from 256 KiB to 16 MiB).
    fn step(&self) -> usize {
        self.reserved
            .saturating_sub(self.reserved_at_open)
            .clamp(LOG_RESERVE_MIN, LOG_RESERVE_MAX)
    }

    fn reserve(&mut self, upto: usize) -> Result<()> {
        if upto <= self.reserved {
            return Ok(());
        }
        let step = self.step();
        let target = (upto.max(self.reserved + step).div_ceil(LOG_RESERVE_MIN) * LOG_RESERVE_MIN)
            .min(self.capacity)
            .max(upto);
        self.seg
            .file
            .allocate(target as u64)
            .map_err(|e| Error::io("reserve disk space for", &self.seg.log_path, e))?;
        // A fast writer gets the new range faulted in ahead of it (by the prefault
        // thread, else here), saving a fault per page. A slow one takes the faults one
        // page at a time: a bulk fault-in would stall it, or steal a core from its
        // readers, for milliseconds that show up as tail latency.
        let now = Instant::now();
        let fast = self.last_reserve.is_some_and(|(at, pos)| {
            now.duration_since(at).as_secs_f64() * PREFAULT_MIN_BYTES_PER_SEC
                < (self.pos.saturating_sub(pos)).saturating_sub(self.bulk_since_reserve) as f64
        });
        if fast
            && !self
                .prefault
                .as_ref()
                .is_some_and(|p| p.submit(&self.seg.log, self.reserved, target))
        {
            self.seg.log.populate_write(self.reserved, target);
        }
        self.last_reserve = Some((now, self.pos));
        self.bulk_since_reserve = 0;
        self.reserved = target;
        Ok(())
    }

    /// Appends one validated batch at the next position, stamping `base_offset` and,
    /// when given, `leader_epoch` (partitionLeaderEpoch; both fields lie outside the
    /// CRC). `batch` is the original bytes (the fields are overwritten in the file).
    pub(crate) fn append(
        &mut self,
        batch: &Batch<'_>,
        base_offset: i64,
        leader_epoch: Option<i32>,
        now_ms: i64,
    ) -> Result<()> {
        let bytes = batch.as_bytes();
        let len = bytes.len();
        let pos = self.pos;
        let bulk = len >= BULK_APPEND_MIN;
        self.reserve(pos + len)?;
        // baseOffset, then (when stamped) batchLength as it is and partitionLeaderEpoch.
        let mut head = [0u8; 16];
        head[..8].copy_from_slice(&base_offset.to_be_bytes());
        let head_len = match leader_epoch {
            Some(e) => {
                head[8..12].copy_from_slice(&bytes[8..12]);
                head[12..16].copy_from_slice(&e.to_be_bytes());
                16
            }
            None => 8,
        };
        let head = &head[..head_len];
        let written = if bulk {
            self.bulk_since_reserve += len;
            self.log_w
                .write_file(&self.seg.file, pos, head, &bytes[head_len..])
                .map_err(|e| Error::io("append to", &self.seg.log_path, e))?
        } else {
            self.log_w.write(pos, bytes) && self.log_w.patch(pos, head)
        };
        if !written {
            return Err(Error::corrupt(
                self.seg.location(),
                pos as u64,
                "append outside the segment mapping",
            ));
        }
        self.pos += len;
        self.log_w.publish(self.pos);
        if self.prefault.is_some() && !bulk {
            // Keep a step reserved (and being faulted in) ahead of the writer. A failure
            // here is reported by the append that needs the space.
            let half = self.step() / 2;
            if self.pos + half > self.reserved && self.reserved < self.capacity {
                let _ = self.reserve(self.pos + half + 1);
            }
        }
        let rel = (base_offset - self.seg.base_offset) as u32;
        let max_ts = batch.max_timestamp();
        let seg_max = self.seg.max_timestamp();
        if pos > 0 && self.bytes_since_index >= self.index_interval && !self.index_full() {
            self.index_w
                .append(&offset_entry(rel, pos as u32), self.seg.index.path())?;
            let ts = seg_max.max(max_ts);
            if ts > self.last_time_entry {
                self.time_w
                    .append(&time_entry(ts, rel), self.seg.time_index.path())?;
                self.last_time_entry = ts;
            }
            self.bytes_since_index = 0;
        }
        self.bytes_since_index += len;
        if max_ts > seg_max {
            self.seg.max_timestamp.store(max_ts, Ordering::Release);
            self.max_ts_batch = rel;
        }
        let last = base_offset + batch.last_offset_delta() as i64;
        self.seg.next_offset.store(last + 1, Ordering::Release);
        if self.first_append_ms.is_none() {
            self.first_append_ms = Some(now_ms);
        }
        Ok(())
    }

    /// Seals the segment: writes the final time index entry and trims the files to their
    /// data. Returns the shared segment (its read-write map stays valid for readers).
    pub(crate) fn seal(mut self) -> Result<Arc<Segment>> {
        let max = self.seg.max_timestamp();
        if max > self.last_time_entry && !self.time_w.is_full() {
            self.time_w.append(
                &time_entry(max, self.max_ts_batch),
                self.seg.time_index.path(),
            )?;
            self.last_time_entry = max;
        }
        self.index_w.trim(self.seg.index.path())?;
        self.time_w.trim(self.seg.time_index.path())?;
        // Readers borrow only below the write position: trimming the file there never
        // takes a page from under them.
        self.seg
            .file
            .set_len(self.pos as u64)
            .ctx("trim segment", &self.seg.log_path)?;
        Ok(self.seg)
    }

    /// The shared, read side of this segment (what the log's segment list and readers
    /// hold).
    pub(crate) fn shared(&self) -> &Arc<Segment> {
        &self.seg
    }
}

/// Parses a segment base offset from a `.log` file name.
pub(crate) fn parse_base_offset(name: &str, ext: &str) -> Option<i64> {
    let stem = name.strip_suffix(ext)?.strip_suffix('.')?;
    if stem.len() != 20 || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    stem.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(file_name(368769, "log"), "00000000000000368769.log");
        assert_eq!(
            parse_base_offset("00000000000000368769.log", "log"),
            Some(368769)
        );
        assert_eq!(parse_base_offset("0000000000000036876.log", "log"), None);
        assert_eq!(parse_base_offset("00000000000000368769.index", "log"), None);
    }
}
