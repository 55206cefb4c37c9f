//! One segment: a `.log` file of RecordBatch v2 batches back to back, with its sparse
//! `.index` and `.timeindex`.
//!
//! A [`Segment`] is the shared, read side (held in `Arc`s by the log and by readers);
//! a [`SegmentWriter`] is the single write side of the active segment; a [`View`] is a
//! segment with its maps, what every read goes through. Invariants:
//!
//! * bytes `[0, readable)` of a map are whole, validated batches with strictly
//!   increasing offsets, the first at or above `base_offset`;
//! * `next_offset` (one past the last record) is published after the bytes it covers;
//! * every index entry points at the start of a batch inside the readable bytes;
//! * file blocks are reserved (fallocate) before any byte is copied into the map;
//! * a segment holds no file descriptor: its files are mapped (the writer's map while it
//!   has data; a sealed segment's maps from its first read until the data directory's
//!   budget unmaps it), and a descriptor comes from the [`FdCache`](super::files::FdCache) when one is needed;
//! * a segment whose file was removed or replaced is `detached`: it is never opened by
//!   its path again (the path may name another file now).

use super::config::LogConfig;
use super::events::DiskSpace;
use super::files::{Files, Unmap};
use super::index::{
    IndexView, IndexWriter, OFFSET_ENTRY, map_sealed, offset_entry, read_offset_entry,
};
use super::mmap::{AppendMap, MapWriter, allocate};
use super::prefault::Prefaulter;
use super::time_index::{TIME_ENTRY, read_time_entry, time_entry};
use super::types::SegmentScan;
use crate::error::IoContext;
use crate::error::{Error, Result};
use crate::record::{Batch, BatchHead, HEADER_LEN};
use parking_lot::RwLock;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, Weak};
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
/// `View::read_ahead`); the next window is requested when the reader gets within half
/// of it.
const READ_AHEAD_WINDOW: usize = 8 << 20;

/// Ids of segments (three each: the log, the offset index, the time index), the keys of
/// their files in the descriptor cache. A file replaced by rename belongs to a new
/// segment, hence a new id.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// File name of a segment file: the base offset, 20 digits, zero-padded.
pub(crate) fn file_name(base_offset: i64, ext: &str) -> String {
    format!("{base_offset:020}.{ext}")
}

/// Removes the files of the segment at `base_offset` in `dir` (its log, both indexes
/// and its aborted-transaction index; a file already gone is no error). `op` names the removal in an error.
pub(crate) fn remove_files(dir: &Path, base_offset: i64, op: &'static str) -> Result<()> {
    for ext in ["log", "index", "timeindex", super::txn_index::TXN_INDEX_EXT] {
        let p = dir.join(file_name(base_offset, ext));
        match std::fs::remove_file(&p) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io(op, p, e)),
        }
    }
    Ok(())
}

/// Creates the index file at `path` empty if it does not exist (a file that does keeps
/// its bytes). Only its directory entry costs: no descriptor stays open, no map.
pub(crate) fn create_empty_index(path: &Path) -> Result<()> {
    OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .ctx("create empty index", path)
        .map(drop)
}

/// The maps of a segment: its log, and its indexes once they have entries.
pub(crate) struct Maps {
    log: Arc<AppendMap>,
    index: OnceLock<Arc<AppendMap>>,
    time: OnceLock<Arc<AppendMap>>,
}

impl Maps {
    fn new(log: Arc<AppendMap>) -> Maps {
        Maps {
            log,
            index: OnceLock::new(),
            time: OnceLock::new(),
        }
    }
}

/// The shared, read side of a segment.
pub(crate) struct Segment {
    pub(crate) base_offset: i64,
    pub(crate) log_path: PathBuf,
    /// Key of the `.log` in the descriptor cache (`id + 1`: `.index`, `id + 2`:
    /// `.timeindex`).
    id: u64,
    files: Arc<Files>,
    /// This segment, for the map budget (which unmaps it when it is idle).
    me: Weak<Segment>,
    /// The maps, when mapped. None for an active segment without data, and for a
    /// segment not read since it was opened or unmapped.
    maps: RwLock<Option<Arc<Maps>>>,
    /// Bytes of data (published after the bytes, as `next_offset`).
    len: AtomicUsize,
    /// Entries of the indexes on disk, for mapping them read-only.
    index_entries: AtomicUsize,
    time_entries: AtomicUsize,
    /// A writer writes through the maps: they are never unmapped.
    pinned: AtomicBool,
    /// The file was removed or replaced: never opened by path again.
    detached: AtomicBool,
    /// Read since the map budget last looked (its second chance).
    used: AtomicBool,
    /// One past the last offset in the segment.
    next_offset: AtomicI64,
    /// Largest record timestamp in the segment (-1 when empty).
    max_timestamp: AtomicI64,
    /// Counts writes to the index files (entries, the final entry, trims; not the
    /// entry count, which a rewrite can leave unchanged). Starts at 1 when an open or a
    /// truncation wrote the files (they are not known to be synced).
    index_writes: AtomicU64,
    /// `index_writes` as of the last index fsync that succeeded.
    index_synced: AtomicU64,
    /// Bytes that were on disk when the segment was opened (0 for a segment created by
    /// this process): the only bytes a read can fault on, since appends map theirs.
    cold_end: usize,
    /// `[0, read_ahead)` has been handed to the prefault thread to be mapped.
    read_ahead: AtomicUsize,
    /// Where the last read ended: a read starting there is sequential.
    last_read_end: AtomicUsize,
}

impl Drop for Segment {
    fn drop(&mut self) {
        for k in 0..3 {
            self.files.fds.forget(self.id + k);
        }
    }
}

impl Unmap for Segment {
    fn take_used(&self) -> bool {
        self.used.swap(false, Ordering::Relaxed)
    }

    fn unmap(&self) -> bool {
        let mut maps = self.maps.write();
        if self.pinned.load(Ordering::Acquire) {
            return false;
        }
        *maps = None;
        true
    }
}

/// A segment with its maps: what reads go through. Holding it keeps the maps mapped.
pub(crate) struct View<'s> {
    pub(crate) seg: &'s Segment,
    maps: Option<Arc<Maps>>,
    /// The segment's next offset, loaded before its maps: every offset below it is
    /// readable in them.
    next: i64,
}

/// Most bytes of a segment read at once by [`Heads`] for headers not known to be
/// mapped: a scan from an offset index entry (one per 4 KiB of data by default) to the
/// batch it looks for stays inside one window.
const HEAD_WINDOW: usize = 8192;

/// Reads the batch headers of one segment while locating an offset.
///
/// Bytes this process wrote or read ahead are in the page tables, and their headers are
/// read through the map. Bytes that were on disk when the segment was opened, and that
/// no sequential reader has had mapped, are read with `pread` into a window instead: a
/// lookup at a random offset of a large log then costs a system call (about 1 µs here)
/// rather than a page fault (2-3 µs, and the kernel maps the 16 pages around the
/// header, which a lookup does not need). Kafka locates batches the same way (positional
/// reads of the log, mapped indexes).
pub(crate) struct Heads<'v> {
    view: &'v View<'v>,
    /// File position of `buf[0]`, and how many bytes of `buf` hold file data.
    from: usize,
    held: usize,
    /// Bytes to read first (set from the offset index).
    first_read: usize,
    /// Allocated on the first `pread`: reads of mapped bytes never touch it.
    buf: Vec<u8>,
    /// The descriptor for `pread`, taken from the cache on the first cold read.
    file: Option<Arc<File>>,
}

impl Heads<'_> {
    /// The header of the batch at `pos`, if a whole batch is readable there.
    #[inline]
    pub(crate) fn at(&mut self, pos: usize) -> Option<BatchHead> {
        let seg = self.view.seg;
        if pos >= seg.cold_end || pos < seg.read_ahead.load(Ordering::Relaxed) {
            return self.view.head_at(pos);
        }
        self.cold(pos)
    }

    #[cold]
    fn cold(&mut self, pos: usize) -> Option<BatchHead> {
        let readable = self.view.readable();
        if pos < self.from || pos + HEADER_LEN > self.from + self.held {
            if self.file.is_none() {
                match self.view.seg.fd() {
                    Ok(f) => self.file = Some(f),
                    // The map reads the same bytes.
                    Err(_) => return self.view.head_at(pos),
                }
            }
            let file = self.file.as_ref().expect("set above");
            // The first read takes what the index says the scan needs (see
            // `View::index_position`); a scan that goes on reads a whole window.
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
                match file.read_at(&mut self.buf[held..want], (pos + held) as u64) {
                    Ok(0) => break,
                    Ok(n) => held += n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    // The map reads the same bytes (and reports nothing either).
                    Err(_) => return self.view.head_at(pos),
                }
            }
            self.from = pos;
            self.held = held;
        }
        let head = BatchHead::parse(&self.buf[pos - self.from..self.held])?;
        (pos + head.len <= readable).then_some(head)
    }
}

impl Segment {
    /// A segment over `log_path` with the state `scan` found; mapped with `maps` (and
    /// pinned) when a writer writes through them.
    fn assemble(
        base_offset: i64,
        log_path: PathBuf,
        files: &Arc<Files>,
        scan: &SegmentScan,
        maps: Option<Arc<Maps>>,
    ) -> Arc<Segment> {
        let pinned = maps.is_some();
        Arc::new_cyclic(|me| Segment {
            base_offset,
            log_path,
            id: NEXT_ID.fetch_add(3, Ordering::Relaxed),
            files: Arc::clone(files),
            me: me.clone(),
            maps: RwLock::new(maps),
            len: AtomicUsize::new(scan.data_len),
            index_entries: AtomicUsize::new(scan.index_entries),
            time_entries: AtomicUsize::new(scan.time_entries),
            pinned: AtomicBool::new(pinned),
            detached: AtomicBool::new(false),
            used: AtomicBool::new(false),
            next_offset: AtomicI64::new(scan.next_offset),
            max_timestamp: AtomicI64::new(scan.max_timestamp),
            index_writes: AtomicU64::new(u64::from(!scan.indexes_on_disk)),
            index_synced: AtomicU64::new(0),
            cold_end: scan.data_len,
            read_ahead: AtomicUsize::new(0),
            last_read_end: AtomicUsize::new(0),
        })
    }

    /// Key of the `.log` in the descriptor cache.
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

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
        self.len.load(Ordering::Acquire)
    }

    fn location(&self) -> String {
        self.log_path.display().to_string()
    }

    fn index_path(&self) -> PathBuf {
        self.log_path.with_extension("index")
    }

    fn time_path(&self) -> PathBuf {
        self.log_path.with_extension("timeindex")
    }

    /// The maps of the indexes, with their paths, when mapped (tests check their
    /// page-cache footprint).
    #[cfg(test)]
    pub(crate) fn index_maps(&self) -> Vec<(Arc<AppendMap>, PathBuf)> {
        let maps = self.maps.read().clone();
        let Some(m) = maps else { return Vec::new() };
        let mut out = Vec::new();
        if let Some(i) = m.index.get() {
            out.push((Arc::clone(i), self.index_path()));
        }
        if let Some(t) = m.time.get() {
            out.push((Arc::clone(t), self.time_path()));
        }
        out
    }

    /// Entries of the offset index.
    #[cfg(test)]
    pub(crate) fn index_entries(&self) -> usize {
        self.index_entries.load(Ordering::Acquire)
    }

    /// True if the segment's maps are mapped (tests).
    #[cfg(test)]
    pub(crate) fn is_mapped(&self) -> bool {
        self.maps.read().is_some()
    }

    /// An open descriptor of the `.log`, from the data directory's cache. Never one of
    /// another file: a segment whose file was removed or replaced refuses.
    pub(crate) fn fd(&self) -> Result<Arc<File>> {
        let gone = || {
            Error::io(
                "open segment",
                &self.log_path,
                std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    "the segment was removed or replaced",
                ),
            )
        };
        if self.detached.load(Ordering::SeqCst) {
            return Err(gone());
        }
        let f = self
            .files
            .fds
            .get(self.id, &self.log_path)
            .map_err(|e| Error::io("open segment", &self.log_path, e))?;
        // `detach` is stored before the rename or unlink: not detached now means the
        // file opened above was this segment's.
        if self.detached.load(Ordering::SeqCst) {
            self.files.fds.forget(self.id);
            return Err(gone());
        }
        Ok(f)
    }

    /// Marks the segment's file as removed or replaced (before the unlink or the rename
    /// over it) and closes its cached descriptors.
    pub(crate) fn detach(&self) {
        self.detached.store(true, Ordering::SeqCst);
        for k in 0..3 {
            self.files.fds.forget(self.id + k);
        }
    }

    /// The segment's maps, mapping a sealed (or idle active) segment read-only now if it
    /// is not mapped; None for a segment without data.
    fn maps(&self) -> Result<Option<Arc<Maps>>> {
        if let Some(m) = self.maps.read().as_ref() {
            self.used.store(true, Ordering::Relaxed);
            return Ok(Some(Arc::clone(m)));
        }
        let len = self.size();
        if len == 0 {
            return Ok(None);
        }
        let mut slot = self.maps.write();
        if let Some(m) = slot.as_ref() {
            return Ok(Some(Arc::clone(m)));
        }
        if self.detached.load(Ordering::SeqCst) {
            return Err(self.fd().expect_err("a detached segment has no file"));
        }
        // Opened, mapped and closed at once: the map needs no descriptor.
        let file = File::open(&self.log_path).ctx("open segment", &self.log_path)?;
        let log = AppendMap::map_ro(&file, len).ctx("map segment", &self.log_path)?;
        drop(file);
        let maps = Maps::new(log);
        let index = map_sealed(
            &self.index_path(),
            OFFSET_ENTRY,
            self.index_entries.load(Ordering::Acquire),
        )?;
        let time = map_sealed(
            &self.time_path(),
            TIME_ENTRY,
            self.time_entries.load(Ordering::Acquire),
        )?;
        if let Some(i) = index {
            let _ = maps.index.set(i);
        }
        if let Some(t) = time {
            let _ = maps.time.set(t);
        }
        let maps = Arc::new(maps);
        *slot = Some(Arc::clone(&maps));
        drop(slot);
        let me: Weak<dyn Unmap> = self.me.clone();
        self.files.maps.mapped(me);
        Ok(Some(maps))
    }

    /// The segment with its maps, for reading.
    pub(crate) fn view(&self) -> Result<View<'_>> {
        let next = self.next_offset();
        let maps = self.maps()?;
        Ok(View {
            seg: self,
            maps,
            next,
        })
    }

    /// Fsyncs the segment's data and, if written since their last fsync, its indexes.
    /// A segment whose file was removed has nothing left to sync.
    pub(crate) fn sync(&self) -> Result<()> {
        self.sync_log()?;
        self.sync_indexes().map(|_| ())
    }

    /// Fsyncs the segment's data only: what a durable append waits for. The indexes
    /// are not needed for it: opening a log walks the batch headers of the segment
    /// holding its recovery point from its last index entries to its end (see
    /// `scan::trusted_scan` and docs/design.md, "Invariants of a single node").
    pub(crate) fn sync_log(&self) -> Result<()> {
        let maps = self.maps.read().clone();
        if let Some(m) = &maps {
            m.log.flush_for_fsync().ctx("msync", &self.log_path)?;
        }
        match self.fd() {
            Ok(f) => f.sync_data().ctx("fsync", &self.log_path),
            Err(_) if self.detached.load(Ordering::SeqCst) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Fsyncs both index files unless nothing was written to them since their last
    /// fsync; returns whether it synced.
    pub(crate) fn sync_indexes(&self) -> Result<bool> {
        let writes = self.index_writes.load(Ordering::Acquire);
        if self.index_synced.load(Ordering::Acquire) >= writes {
            return Ok(false);
        }
        if self.detached.load(Ordering::SeqCst) {
            return Ok(false);
        }
        let maps = self.maps.read().clone();
        let index = maps.as_ref().and_then(|m| m.index.get().map(|a| &**a));
        super::index::sync(index, &self.files.fds, self.id + 1, &self.index_path())?;
        let time = maps.as_ref().and_then(|m| m.time.get().map(|a| &**a));
        super::index::sync(time, &self.files.fds, self.id + 2, &self.time_path())?;
        self.index_synced.fetch_max(writes, Ordering::AcqRel);
        Ok(true)
    }

    /// True if the index files were written since their last fsync.
    pub(crate) fn indexes_dirty(&self) -> bool {
        self.index_synced.load(Ordering::Acquire) < self.index_writes.load(Ordering::Acquire)
    }

    /// Counts a write to the index files, once it is done (a sync that saw the count
    /// then fsyncs after the write).
    fn index_written(&self) {
        self.index_writes.fetch_add(1, Ordering::AcqRel);
    }

    /// Creates a new, empty active segment (its `.log` empty, no index file yet: the
    /// index files are made with their first entry, or empty when it is sealed).
    pub(crate) fn create(
        dir: &Path,
        base_offset: i64,
        config: &LogConfig,
        files: &Arc<Files>,
    ) -> Result<SegmentWriter> {
        let log_path = dir.join(file_name(base_offset, "log"));
        for ext in ["index", "timeindex"] {
            let p = dir.join(file_name(base_offset, ext));
            if p.exists() {
                std::fs::remove_file(&p).ctx("remove stale index", &p)?;
            }
        }
        let created = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&log_path)
            .ctx("create segment", &log_path);
        if let Err(e) = created {
            // Nothing of a segment that could not be made stays behind.
            let _ = std::fs::remove_file(&log_path);
            return Err(e);
        }
        let scan = SegmentScan {
            next_offset: base_offset,
            max_timestamp: -1,
            last_time_entry: -1,
            // No index file yet.
            indexes_on_disk: true,
            ..Default::default()
        };
        Ok(Self::open_active(dir, base_offset, &scan, config, files))
    }

    /// Opens the segment at `base_offset` as the active one, after `scan` established
    /// its contents. Nothing is opened or mapped until it is read or appended to.
    pub(crate) fn open_active(
        dir: &Path,
        base_offset: i64,
        scan: &SegmentScan,
        config: &LogConfig,
        files: &Arc<Files>,
    ) -> SegmentWriter {
        let log_path = dir.join(file_name(base_offset, "log"));
        let capacity = (config.segment_bytes as usize).max(scan.data_len + 1);
        let seg = Segment::assemble(base_offset, log_path, files, scan, None);
        SegmentWriter {
            seg,
            log_w: None,
            index_w: None,
            time_w: None,
            pos: scan.data_len,
            reserved: scan.data_len,
            reserved_at_open: scan.data_len,
            capacity,
            index_max_bytes: config.index_max_bytes as usize,
            bytes_since_index: scan.bytes_since_index,
            last_time_entry: scan.last_time_entry,
            max_ts_batch: scan.max_ts_batch,
            first_append_ms: None,
            index_interval: config.index_interval_bytes as usize,
            prefault: None,
            last_reserve: None,
            bulk_since_reserve: 0,
        }
    }

    /// A sealed segment after `scan` established its contents: nothing is opened or
    /// mapped until it is read.
    pub(crate) fn open_sealed(
        dir: &Path,
        base_offset: i64,
        scan: &SegmentScan,
        files: &Arc<Files>,
    ) -> Arc<Segment> {
        let log_path = dir.join(file_name(base_offset, "log"));
        Segment::assemble(base_offset, log_path, files, scan, None)
    }

    /// True if `map` is the segment's log map now.
    pub(crate) fn has_log_map(&self, map: &Arc<AppendMap>) -> bool {
        self.maps
            .read()
            .as_ref()
            .is_some_and(|m| Arc::ptr_eq(&m.log, map))
    }

    /// Makes `map` (a read-only map another process's appends are followed through)
    /// the segment's log map, pinned, keeping its index maps (mapping them if it had
    /// none).
    pub(crate) fn install_log_map(&self, map: Arc<AppendMap>) -> Result<()> {
        let old = self.maps.read().clone();
        let maps = Maps::new(map);
        let index = match old.as_ref().and_then(|m| m.index.get().cloned()) {
            Some(i) => Some(i),
            None => map_sealed(
                &self.index_path(),
                OFFSET_ENTRY,
                self.index_entries.load(Ordering::Acquire),
            )?,
        };
        let time = match old.as_ref().and_then(|m| m.time.get().cloned()) {
            Some(t) => Some(t),
            None => map_sealed(
                &self.time_path(),
                TIME_ENTRY,
                self.time_entries.load(Ordering::Acquire),
            )?,
        };
        if let Some(i) = index {
            let _ = maps.index.set(i);
        }
        if let Some(t) = time {
            let _ = maps.time.set(t);
        }
        let mut slot = self.maps.write();
        self.pinned.store(true, Ordering::Release);
        *slot = Some(Arc::new(maps));
        Ok(())
    }

    /// Another process appended: the segment now holds `len` bytes, up to offset
    /// `next_offset` (exclusive), with records up to `max_timestamp`. Published after
    /// the map made the bytes readable.
    pub(crate) fn follow_to(&self, len: usize, next_offset: i64, max_timestamp: i64) {
        self.max_timestamp
            .fetch_max(max_timestamp, Ordering::AcqRel);
        self.len.store(len, Ordering::Release);
        self.next_offset.store(next_offset, Ordering::Release);
    }

    /// The segment is no longer followed (another came after it): its maps may be
    /// unmapped when idle, as a sealed segment's.
    pub(crate) fn unpin(&self) {
        let mapped = {
            let slot = self.maps.read();
            self.pinned.store(false, Ordering::Release);
            slot.is_some()
        };
        if mapped {
            let me: Weak<dyn Unmap> = self.me.clone();
            self.files.maps.mapped(me);
        }
    }

    /// How far read-ahead has been requested.
    #[cfg(test)]
    pub(crate) fn read_ahead_mark(&self) -> usize {
        self.read_ahead.load(Ordering::Relaxed)
    }
}

impl<'s> View<'s> {
    fn log(&self) -> Option<&AppendMap> {
        self.maps.as_deref().map(|m| &*m.log)
    }

    /// The log's map (a slice keeps it).
    pub(crate) fn map(&self) -> Option<&Arc<AppendMap>> {
        self.maps.as_ref().map(|m| &m.log)
    }

    /// Bytes readable through the map.
    #[inline]
    pub(crate) fn readable(&self) -> usize {
        self.log().map_or(0, AppendMap::readable)
    }

    /// Readable bytes `[start, end)`.
    #[inline]
    pub(crate) fn bytes(&self, start: usize, end: usize) -> Option<&[u8]> {
        match self.log() {
            Some(m) => m.get(start, end),
            None if start == 0 && end == 0 => Some(&[]),
            None => None,
        }
    }

    fn index(&self) -> IndexView<'_> {
        IndexView::new(
            self.maps
                .as_deref()
                .and_then(|m| m.index.get().map(|a| &**a)),
            OFFSET_ENTRY,
        )
    }

    fn time_index(&self) -> IndexView<'_> {
        IndexView::new(
            self.maps
                .as_deref()
                .and_then(|m| m.time.get().map(|a| &**a)),
            TIME_ENTRY,
        )
    }

    /// The batch header at `pos` (no CRC check: bytes were validated on the way in).
    #[inline]
    pub(crate) fn batch_at(&self, pos: usize) -> Option<Batch<'_>> {
        let log = self.log()?;
        let head = log.get(pos, pos + HEADER_LEN)?;
        let size = crate::record::batch_size(head)?;
        let bytes = log.get(pos, pos + size)?;
        Batch::parse_header_at(bytes, "", 0).ok()
    }

    /// The header fields of the batch at `pos`, read through the map.
    #[inline]
    pub(crate) fn head_at(&self, pos: usize) -> Option<BatchHead> {
        self.batch_at(pos).map(|b| b.head())
    }

    /// Every batch of the segment, oldest first (headers only; validated on the way in).
    /// Stops at the first header that does not parse: for what must see every batch
    /// (compaction), [`View::checked_batches`] reports it instead.
    pub(crate) fn batches(&self) -> impl Iterator<Item = Batch<'_>> {
        let mut pos = 0;
        std::iter::from_fn(move || {
            let b = self.batch_at(pos)?;
            pos += b.len();
            Some(b)
        })
    }

    /// Every batch of the segment, oldest first, ending with [`Error::Corrupt`] (naming
    /// the file and position) at a header inside the data that does not parse or a batch
    /// whose offsets do not follow its predecessor's.
    pub(crate) fn checked_batches(&self) -> impl Iterator<Item = Result<Batch<'_>>> {
        let mut pos = 0;
        let mut prev: Option<i64> = None;
        let end = self.readable();
        let mut failed = false;
        let base = self.seg.base_offset;
        std::iter::from_fn(move || {
            if failed || pos >= end {
                return None;
            }
            let item = match self.batch_at(pos) {
                Some(b) if prev.is_none_or(|p| b.base_offset() > p) => {
                    pos += b.len();
                    prev = Some(b.last_offset());
                    Ok(b)
                }
                _ => Err(self.corrupt_at(pos, prev, prev.map_or(base, |p| p + 1))),
            };
            failed = item.is_err();
            Some(item)
        })
    }

    /// The error for the batch at `pos`, inside the segment's data, that cannot be read:
    /// its header does not parse (says why), or its offsets do not follow `prev` (the
    /// last offset of the batch before it). `offset` is the offset being looked for.
    #[cold]
    pub(crate) fn corrupt_at(&self, pos: usize, prev: Option<i64>, offset: i64) -> Error {
        let data = self.bytes(pos, self.readable()).unwrap_or(&[]);
        let base = self.seg.base_offset;
        let detail = match Batch::parse_header_at(data, "", 0) {
            Err(Error::Corrupt { reason, .. }) => reason,
            Err(e) => e.to_string(),
            Ok(b) => match prev {
                Some(p) if b.base_offset() <= p => format!(
                    "batch offsets {}..={} do not follow the previous batch's last offset {p}",
                    b.base_offset(),
                    b.last_offset()
                ),
                _ if b.base_offset() < base => format!(
                    "batch offsets {}..={} lie below the segment's base offset {base}",
                    b.base_offset(),
                    b.last_offset(),
                ),
                _ => "the batch is not where the segment's data says it is".to_string(),
            },
        };
        Error::corrupt(
            self.seg.location(),
            pos as u64,
            format!(
                "{detail} (inside the segment's {} bytes of data, reading offset {offset})",
                self.readable()
            ),
        )
    }

    /// A reader of this segment's batch headers (see [`Heads`]).
    #[inline]
    pub(crate) fn heads(&self) -> Heads<'_> {
        Heads {
            view: self,
            from: 0,
            held: 0,
            first_read: HEAD_WINDOW,
            buf: Vec::new(),
            file: None,
        }
    }

    /// Position to start a forward scan for relative offset `rel`: the last offset index
    /// entry at or below it, if the batch there starts at the offset the entry names;
    /// else 0. A damaged entry of a segment trusted on open (only its last entry is
    /// checked then) costs a longer scan, never a wrong answer.
    fn index_position(&self, rel: u32, heads: &mut Heads<'_>) -> usize {
        let index = self.index();
        let Some(i) = index.floor(rel, |e| read_offset_entry(e).0) else {
            return 0;
        };
        let (entry_rel, pos) = read_offset_entry(index.entry(i));
        // The batch sought starts before the next entry's position, so a scan reads at
        // most up to there. Entries further apart than a window mean large batches
        // (entries are one index interval apart, plus one batch): the batch at this
        // entry is then likely the one sought, and its header is all there is to read.
        heads.first_read = if i + 1 < index.entries() {
            let (_, next) = read_offset_entry(index.entry(i + 1));
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
            Some(b) if b.base_offset == self.seg.base_offset + entry_rel as i64 => pos as usize,
            _ => 0,
        }
    }

    /// Byte position of the batch that contains `offset` (or the first after it), found
    /// through the sparse index and a forward scan of batch headers; `None` if the
    /// segment has no batch with a last offset >= `offset`. A header inside the data
    /// that does not parse, a batch whose offsets do not follow the one before it, or a
    /// segment that ends before the offsets it holds (`next_offset`) is
    /// [`Error::Corrupt`]: nothing is skipped silently.
    pub(crate) fn find(&self, offset: i64, heads: &mut Heads<'_>) -> Result<Option<usize>> {
        let next = self.next;
        let base = self.seg.base_offset;
        let rel = (offset - base).clamp(0, u32::MAX as i64) as u32;
        let from = self.index_position(rel, heads);
        match self.scan_from(from, heads, offset, |b| b.last_offset >= offset)? {
            // An empty segment holds no offset (its next offset is its base).
            None if offset < next && next > base => Err(Error::corrupt(
                self.seg.location(),
                self.readable() as u64,
                format!(
                    "the segment's data ends before offset {offset}, which it holds (its offsets run to {})",
                    next - 1
                ),
            )),
            found => Ok(found),
        }
    }

    /// Walks batch headers from `pos` to the first batch that `hit` accepts; `offset`
    /// (the offset looked for) names the read in errors.
    fn scan_from(
        &self,
        mut pos: usize,
        heads: &mut Heads<'_>,
        offset: i64,
        hit: impl Fn(&BatchHead) -> bool,
    ) -> Result<Option<usize>> {
        let end = self.readable();
        let mut prev: Option<i64> = None;
        while pos < end {
            let b = match heads.at(pos) {
                Some(b) if prev.is_none_or(|p| b.base_offset > p) => b,
                _ => return Err(self.corrupt_at(pos, prev, offset)),
            };
            if hit(&b) {
                return Ok(Some(pos));
            }
            prev = Some(b.last_offset);
            pos += b.len;
        }
        Ok(None)
    }

    /// Position of the first batch whose max timestamp is >= `ts`, found through the
    /// time index and a forward scan (errors as [`View::find`]).
    pub(crate) fn find_time(&self, ts: i64) -> Result<Option<usize>> {
        let time = self.time_index();
        let start_rel = time
            .floor(ts.saturating_sub(1), |e| read_time_entry(e).0)
            .map_or(0, |i| read_time_entry(time.entry(i)).1);
        let mut heads = self.heads();
        let from = self.index_position(start_rel, &mut heads);
        let offset = self.seg.base_offset + start_rel as i64;
        self.scan_from(from, &mut heads, offset, |b| b.max_timestamp >= ts)
    }

    /// Told of each read of `[start, end)`: when it continues the previous read and the
    /// segment's on-disk bytes lie ahead, hands the next window of them to `prefault` to
    /// be mapped while the reader works on what it has. Random reads (lookups) request
    /// nothing (unless they hit the first batch), nor do reads of bytes appended by this
    /// process (already mapped).
    pub(crate) fn read_ahead(&self, start: usize, end: usize, prefault: &Prefaulter) {
        let seg = self.seg;
        // Checked first, so that readers of bytes this process appended (a tailing
        // consumer) never write to the segment's shared state.
        if start >= seg.cold_end {
            return;
        }
        let Some(log) = self.map() else { return };
        let prev = seg.last_read_end.swap(end, Ordering::Relaxed);
        // A read from the segment's start counts as sequential too: a reader crossing
        // from the previous segment, or starting at the log start.
        if prev != start && start != 0 {
            return;
        }
        let mapped = seg.read_ahead.load(Ordering::Relaxed);
        if mapped >= end.saturating_add(READ_AHEAD_WINDOW / 2) {
            return;
        }
        let from = mapped.max(start);
        let to = from.saturating_add(READ_AHEAD_WINDOW).min(seg.cold_end);
        if from < to
            && seg
                .read_ahead
                .compare_exchange(mapped, to, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            // A busy thread refuses: the reader then faults the pages itself.
            prefault.submit_read(log, from, to);
        }
    }
}

/// Write side of the active segment.
pub(crate) struct SegmentWriter {
    pub(crate) seg: Arc<Segment>,
    /// The writer of the log's map, made by the first append (or the first after a
    /// reopen): a segment without data needs no map.
    log_w: Option<MapWriter>,
    /// The index writers, made with the first index entry.
    index_w: Option<IndexWriter>,
    time_w: Option<IndexWriter>,
    /// Byte position of the next batch.
    pos: usize,
    /// Bytes of the file backed by reserved blocks.
    reserved: usize,
    /// `reserved` when the segment was opened: steps grow with what this writer has
    /// reserved, so a reopened segment starts again from the smallest step.
    reserved_at_open: usize,
    /// Size of the mapping.
    capacity: usize,
    index_max_bytes: usize,
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
        self.index_w.as_ref().is_some_and(IndexWriter::is_full)
            || self.time_w.as_ref().is_some_and(IndexWriter::is_full)
    }

    /// Maps the log read-write (at the first append of a new segment, or the first
    /// after a reopen) and pins the maps: from now on readers read through the writer's
    /// map. A reopened segment with index entries gets its index writers too, so that
    /// lookups keep their index.
    fn ensure_mapped(&mut self) -> Result<()> {
        if self.log_w.is_some() {
            return Ok(());
        }
        let file = self.seg.fd()?;
        let (map, writer) = AppendMap::map_rw(&file, self.capacity, self.pos)
            .ctx("map segment", &self.seg.log_path)?;
        let mut slot = self.seg.maps.write();
        self.seg.pinned.store(true, Ordering::Release);
        *slot = Some(Arc::new(Maps::new(map)));
        drop(slot);
        self.log_w = Some(writer);
        if self.seg.index_entries.load(Ordering::Acquire) > 0
            || self.seg.time_entries.load(Ordering::Acquire) > 0
        {
            self.ensure_indexes()?;
        }
        Ok(())
    }

    /// The log's map (the writer's; `ensure_mapped` made it).
    fn log_map(&self) -> Result<Arc<AppendMap>> {
        match self.seg.maps.read().as_ref() {
            Some(m) if self.log_w.is_some() => Ok(Arc::clone(&m.log)),
            _ => Err(Error::corrupt(
                self.seg.location(),
                self.pos as u64,
                "the active segment is not mapped",
            )),
        }
    }

    /// Opens the index writers (creating the files with the segment's first index
    /// entry) and hands their maps to readers.
    fn ensure_indexes(&mut self) -> Result<()> {
        if self.index_w.is_some() && self.time_w.is_some() {
            return Ok(());
        }
        let maps = self.seg.maps.read().clone();
        let Some(maps) = maps.filter(|_| self.log_w.is_some()) else {
            return Err(Error::corrupt(
                self.seg.location(),
                self.pos as u64,
                "the active segment is not mapped",
            ));
        };
        if self.index_w.is_none() {
            let w = IndexWriter::open(
                &self.seg.index_path(),
                self.seg.id + 1,
                OFFSET_ENTRY,
                self.seg.index_entries.load(Ordering::Acquire),
                self.index_max_bytes,
                &self.seg.files.fds,
            )?;
            let _ = maps.index.set(Arc::clone(w.map()));
            self.index_w = Some(w);
        }
        if self.time_w.is_none() {
            let w = IndexWriter::open(
                &self.seg.time_path(),
                self.seg.id + 2,
                TIME_ENTRY,
                self.seg.time_entries.load(Ordering::Acquire),
                self.index_max_bytes,
                &self.seg.files.fds,
            )?;
            let _ = maps.time.set(Arc::clone(w.map()));
            self.time_w = Some(w);
        }
        self.seg.index_written();
        Ok(())
    }

    /// The next reservation step: as much as this writer has reserved so far, within
    /// the bounds (doubling from 256 KiB to 16 MiB).
    fn step(&self) -> usize {
        self.reserved
            .saturating_sub(self.reserved_at_open)
            .clamp(LOG_RESERVE_MIN, LOG_RESERVE_MAX)
    }

    /// Reserves the disk space of `[reserved, upto)` and a step more; when the step
    /// does not fit on the disk, exactly what `upto` needs (so that appends go on as
    /// long as there is room for them). Tells `space` of a reservation that succeeded.
    fn reserve(&mut self, upto: usize, space: &DiskSpace) -> Result<()> {
        if upto <= self.reserved {
            return Ok(());
        }
        let step = self.step();
        let mut target = (upto.max(self.reserved + step).div_ceil(LOG_RESERVE_MIN)
            * LOG_RESERVE_MIN)
            .min(self.capacity)
            .max(upto);
        let file = self.seg.fd()?;
        let from = self.reserved as u64;
        if let Err(e) = allocate(&file, from, (target - self.reserved) as u64) {
            let full = matches!(
                e.kind(),
                std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded
            );
            if !full || target == upto {
                return Err(Error::io("reserve disk space for", &self.seg.log_path, e));
            }
            allocate(&file, from, (upto - self.reserved) as u64)
                .map_err(|e| Error::io("reserve disk space for", &self.seg.log_path, e))?;
            target = upto;
        }
        space.reserved(&self.seg.log_path);
        // A fast writer gets the new range faulted in ahead of it (by the prefault
        // thread, else here), saving a fault per page. A slow one takes the faults one
        // page at a time: a bulk fault-in would stall it, or steal a core from its
        // readers, for milliseconds that show up as tail latency.
        let now = Instant::now();
        let fast = self.last_reserve.is_some_and(|(at, pos)| {
            now.duration_since(at).as_secs_f64() * PREFAULT_MIN_BYTES_PER_SEC
                < (self.pos.saturating_sub(pos)).saturating_sub(self.bulk_since_reserve) as f64
        });
        if fast {
            let map = self.log_map()?;
            if !self
                .prefault
                .as_ref()
                .is_some_and(|p| p.submit(&map, self.reserved, target))
            {
                map.populate_write(self.reserved, target);
            }
        }
        self.last_reserve = Some((now, self.pos));
        self.bulk_since_reserve = 0;
        self.reserved = target;
        Ok(())
    }

    /// Appends one validated batch at the next position, stamping `base_offset` and,
    /// when given, `leader_epoch` (partitionLeaderEpoch; both fields lie outside the
    /// CRC). `batch` is the original bytes (the fields are overwritten in the file).
    ///
    /// The stamped head is written before the rest of the batch (a fence between): a
    /// reader in another process that finds the batch's CRC valid then reads the
    /// stamped offset, never the one the client sent.
    pub(crate) fn append(
        &mut self,
        batch: &Batch<'_>,
        base_offset: i64,
        leader_epoch: Option<i32>,
        now_ms: i64,
        space: &DiskSpace,
    ) -> Result<()> {
        let bytes = batch.as_bytes();
        let len = bytes.len();
        let pos = self.pos;
        let bulk = len >= BULK_APPEND_MIN;
        self.ensure_mapped()?;
        // Everything this append needs is reserved before a byte is written: a full
        // disk fails the append whole, never after its bytes were published.
        let index_due =
            pos > 0 && self.bytes_since_index >= self.index_interval && !self.index_full();
        if index_due {
            self.ensure_indexes()?;
            let fds = &self.seg.files.fds;
            if let Some(w) = self.index_w.as_mut() {
                w.reserve_next(fds)?;
            }
            if let Some(w) = self.time_w.as_mut() {
                w.reserve_next(fds)?;
            }
        }
        self.reserve(pos + len, space)?;
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
            let file = self.seg.fd()?;
            let Some(w) = self.log_w.as_mut() else {
                return Err(self.unmapped());
            };
            w.write_file(&file, pos, head, &bytes[head_len..])
                .map_err(|e| Error::io("append to", &self.seg.log_path, e))?
        } else {
            let Some(w) = self.log_w.as_mut() else {
                return Err(self.unmapped());
            };
            w.write(pos, head) && {
                std::sync::atomic::fence(Ordering::Release);
                w.write(pos + head_len, &bytes[head_len..])
            }
        };
        if !written {
            return Err(Error::corrupt(
                self.seg.location(),
                pos as u64,
                "append outside the segment mapping",
            ));
        }
        self.pos += len;
        if let Some(w) = self.log_w.as_mut() {
            w.publish(self.pos);
        }
        self.seg.len.store(self.pos, Ordering::Release);
        if self.prefault.is_some() && !bulk {
            // Keep a step reserved (and being faulted in) ahead of the writer. A failure
            // here is reported by the append that needs the space.
            let half = self.step() / 2;
            if self.pos + half > self.reserved && self.reserved < self.capacity {
                let _ = self.reserve(self.pos + half + 1, space);
            }
        }
        let rel = (base_offset - self.seg.base_offset) as u32;
        let max_ts = batch.max_timestamp();
        let seg_max = self.seg.max_timestamp();
        if index_due {
            let written = self.append_index_entries(rel, pos, seg_max.max(max_ts));
            // Counted after the writes, done or failed half way.
            self.seg.index_written();
            written?;
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

    /// Appends the offset index entry of the batch at `pos` (relative offset `rel`),
    /// and a time index entry if the segment's largest timestamp `ts` grew since the
    /// last one.
    fn append_index_entries(&mut self, rel: u32, pos: usize, ts: i64) -> Result<()> {
        let fds = &self.seg.files.fds;
        if let Some(w) = self.index_w.as_mut() {
            w.append(&offset_entry(rel, pos as u32), fds)?;
            self.seg.index_entries.store(w.entries(), Ordering::Release);
        }
        if ts > self.last_time_entry
            && let Some(w) = self.time_w.as_mut()
        {
            w.append(&time_entry(ts, rel), fds)?;
            self.seg.time_entries.store(w.entries(), Ordering::Release);
            self.last_time_entry = ts;
        }
        Ok(())
    }

    #[cold]
    fn unmapped(&self) -> Error {
        Error::corrupt(
            self.seg.location(),
            self.pos as u64,
            "the active segment is not mapped",
        )
    }

    /// Seals the segment: writes the final time index entry and trims the files to their
    /// data. Returns the shared segment, unpinned: its maps stay valid for readers until
    /// the data directory's map budget unmaps it.
    pub(crate) fn seal(mut self) -> Result<Arc<Segment>> {
        let max = self.seg.max_timestamp();
        let final_entry = time_entry(max, self.max_ts_batch);
        let fds = &self.seg.files.fds;
        if max > self.last_time_entry {
            // The final entry only shortens a lookup of the newest timestamps: on a
            // full disk the segment is sealed without it.
            match self.time_w.as_mut() {
                Some(w) => {
                    if !w.is_full() && w.reserve_next(fds).is_ok() {
                        w.append(&final_entry, fds)?;
                        self.seg.time_entries.store(w.entries(), Ordering::Release);
                        self.last_time_entry = max;
                    }
                }
                None => {
                    // No time index yet: the one entry is written as the whole file.
                    let path = self.seg.time_path();
                    if std::fs::write(&path, final_entry).is_ok() {
                        self.seg.time_entries.store(1, Ordering::Release);
                        self.last_time_entry = max;
                    }
                }
            }
        }
        if let Some(w) = &self.index_w {
            w.trim(fds)?;
        }
        if let Some(w) = &self.time_w {
            w.trim(fds)?;
        }
        // A sealed segment has its three files, as in Kafka: an index that never got an
        // entry (one large batch) is an empty file, never mapped.
        for (writer, path) in [
            (self.index_w.is_some(), self.seg.index_path()),
            (self.time_w.is_some(), self.seg.time_path()),
        ] {
            if !writer {
                create_empty_index(&path)?;
            }
        }
        self.seg.index_written();
        // Readers borrow only below the write position: trimming the file there never
        // takes a page from under them.
        if self.reserved > self.pos {
            self.seg
                .fd()?
                .set_len(self.pos as u64)
                .ctx("trim segment", &self.seg.log_path)?;
        }
        let mapped = {
            let slot = self.seg.maps.read();
            self.seg.pinned.store(false, Ordering::Release);
            slot.is_some()
        };
        if mapped {
            let me: Weak<dyn Unmap> = self.seg.me.clone();
            self.seg.files.maps.mapped(me);
        }
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
