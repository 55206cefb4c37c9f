//! Sparse index files: the offset index (`.index`) and the machinery the time index
//! (`.timeindex`) shares with it.
//!
//! An index file is an array of fixed-size big-endian entries. It is created with the
//! first entry of its segment (a segment of less than `index_interval_bytes` has none).
//! While its segment is active the file is sized to `index_max_bytes` (sparse) and
//! mapped read-write; entries are appended, with disk blocks reserved a chunk ahead so
//! that a write into the map can never fault on a full disk. When the segment is sealed
//! the file is trimmed to its entries; a sealed index is mapped read-only when its
//! segment is read. Entries are strictly increasing in both columns, so lookups are binary
//! searches over the readable prefix.
//!
//! Offset index entry (8 bytes): relative offset (u32, offset - segment base offset),
//! position (u32, byte position of the batch in the `.log`). The first batch of a
//! segment (position 0) never has an entry, so every entry has a position > 0 and an
//! all-zero entry marks the end of a preallocated file that was not trimmed.

use super::files::FdCache;
use super::mmap::{AppendMap, MapWriter, allocate};
use crate::error::IoContext;
use crate::error::{Error, Result};
use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Bytes reserved on disk ahead of the write position of an index.
const INDEX_RESERVE_CHUNK: usize = 64 * 1024;

/// The entries of an index, read through its map (none when it has no map: a segment
/// whose index was never written, or is not mapped).
#[derive(Clone, Copy)]
pub(crate) struct IndexView<'a> {
    map: Option<&'a AppendMap>,
    entry_size: usize,
}

impl<'a> IndexView<'a> {
    /// The entries published in `map` (entries of `entry_size` bytes).
    pub(crate) fn new(map: Option<&'a AppendMap>, entry_size: usize) -> IndexView<'a> {
        IndexView { map, entry_size }
    }

    /// Number of readable entries.
    #[inline]
    pub(crate) fn entries(&self) -> usize {
        self.map.map_or(0, |m| m.readable() / self.entry_size)
    }

    /// The bytes of entry `i` (which must be below `entries()`).
    #[inline]
    pub(crate) fn entry(&self, i: usize) -> &'a [u8] {
        let s = i * self.entry_size;
        self.map
            .and_then(|m| m.get(s, s + self.entry_size))
            .unwrap_or(&[])
    }

    /// Index of the last entry whose key (read by `key`) is <= `target`, by binary search.
    pub(crate) fn floor<K: Ord>(&self, target: K, key: impl Fn(&[u8]) -> K) -> Option<usize> {
        let n = self.entries();
        // partition_point: first entry with key > target.
        let (mut lo, mut hi) = (0, n);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if key(self.entry(mid)) <= target {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo.checked_sub(1)
    }
}

/// Maps the first `entries` entries of a sealed index file read-only (the descriptor is
/// closed once mapped); None when there are none.
pub(crate) fn map_sealed(
    path: &Path,
    entry_size: usize,
    entries: usize,
) -> Result<Option<Arc<AppendMap>>> {
    if entries == 0 {
        return Ok(None);
    }
    let file = File::open(path).ctx("open index", path)?;
    let map = AppendMap::map_ro(&file, entries * entry_size).ctx("map index", path)?;
    Ok(Some(map))
}

/// Flushes the entries of an index written through `map` to disk: fsync through a
/// descriptor from `fds` (after msync where that is needed, see
/// [`AppendMap::flush_for_fsync`]). An index file that does not exist has nothing to
/// flush.
pub(crate) fn sync(map: Option<&AppendMap>, fds: &FdCache, id: u64, path: &Path) -> Result<()> {
    if let Some(m) = map {
        m.flush_for_fsync().ctx("msync index", path)?;
    }
    match fds.get(id, path) {
        Ok(f) => f.sync_data().ctx("fsync index", path),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io("open index", path, e)),
    }
}

/// Write side of an active index file: appends entries through a read-write map and
/// reserves disk space ahead of them. It holds no descriptor: it takes one from the
/// data directory's [`FdCache`] when it reserves, trims or syncs.
pub(crate) struct IndexWriter {
    /// Key of the file in the descriptor cache.
    id: u64,
    path: PathBuf,
    writer: MapWriter,
    map: Arc<AppendMap>,
    entry_size: usize,
    /// Bytes of entries written.
    len: usize,
    /// Bytes of the file backed by reserved blocks.
    reserved: usize,
    /// Capacity in bytes (index_max_bytes rounded down to whole entries).
    capacity: usize,
}

impl IndexWriter {
    /// Opens (or creates) an index file for appending, keeping its first `entries`
    /// entries: sized to `max_bytes` (sparse, as Kafka does), mapped read-write, and
    /// the first chunk of disk space reserved.
    pub(crate) fn open(
        path: &Path,
        id: u64,
        entry_size: usize,
        entries: usize,
        max_bytes: usize,
        fds: &FdCache,
    ) -> Result<IndexWriter> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .ctx("open index", path)?;
        let len = entries * entry_size;
        let capacity = (max_bytes / entry_size).max(entries + 1) * entry_size;
        // Blocks are reserved in chunks as entries are written.
        file.set_len(capacity as u64).ctx("resize index", path)?;
        let (map, writer) = AppendMap::map_rw(&file, capacity, len).ctx("map index", path)?;
        drop(file);
        // The file is a hole up to `max_bytes` (10 MB by default): without this, the
        // first entry's page fault would read ahead, zero-filling megabytes of page
        // cache for a few bytes of index (5 ms and 8 MiB per index file here).
        map.advise_random();
        let mut w = IndexWriter {
            id,
            path: path.to_path_buf(),
            writer,
            map,
            entry_size,
            len,
            reserved: 0,
            capacity,
        };
        w.reserve(len + entry_size, fds)
            .map_err(|e| Error::io("reserve index space", path, e))?;
        Ok(w)
    }

    /// The map readers read the entries through.
    pub(crate) fn map(&self) -> &Arc<AppendMap> {
        &self.map
    }

    /// Number of entries written.
    pub(crate) fn entries(&self) -> usize {
        self.len / self.entry_size
    }

    fn reserve(&mut self, upto: usize, fds: &FdCache) -> std::io::Result<()> {
        let upto = upto.min(self.capacity);
        if upto <= self.reserved {
            return Ok(());
        }
        let file = fds.get(self.id, &self.path)?;
        let target = upto.div_ceil(INDEX_RESERVE_CHUNK) * INDEX_RESERVE_CHUNK;
        let mut target = target.min(self.capacity);
        let from = self.reserved as u64;
        if let Err(e) = allocate(&file, from, (target - self.reserved) as u64) {
            // On a full disk, exactly the entry that is needed.
            if target == upto
                || !matches!(
                    e.kind(),
                    std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded
                )
            {
                return Err(e);
            }
            allocate(&file, from, (upto - self.reserved) as u64)?;
            target = upto;
        }
        self.reserved = target;
        Ok(())
    }

    /// Reserves the disk space of the next entry, so that appending it cannot fail for
    /// lack of space.
    pub(crate) fn reserve_next(&mut self, fds: &FdCache) -> Result<()> {
        self.reserve(self.len + self.entry_size, fds)
            .map_err(|e| Error::io("reserve index space", &self.path, e))
    }

    /// True when no further entry fits.
    pub(crate) fn is_full(&self) -> bool {
        self.len + self.entry_size > self.capacity
    }

    /// Appends one entry (`entry.len()` must be the entry size) and publishes it.
    pub(crate) fn append(&mut self, entry: &[u8], fds: &FdCache) -> Result<()> {
        debug_assert_eq!(entry.len(), self.entry_size);
        if self.is_full() {
            return Err(Error::corrupt(
                self.path.display(),
                self.len as u64,
                "index is full",
            ));
        }
        self.reserve_next(fds)?;
        if !self.writer.write(self.len, entry) {
            return Err(Error::corrupt(
                self.path.display(),
                self.len as u64,
                "index write out of bounds",
            ));
        }
        self.len += self.entry_size;
        self.writer.publish(self.len);
        Ok(())
    }

    /// Trims the file to its entries (on seal or clean close).
    pub(crate) fn trim(&self, fds: &FdCache) -> Result<()> {
        let file = fds
            .get(self.id, &self.path)
            .map_err(|e| Error::io("open index", &self.path, e))?;
        file.set_len(self.len as u64).ctx("trim index", &self.path)
    }
}

/// Size of an offset index entry.
pub(crate) const OFFSET_ENTRY: usize = 8;

/// Encodes an offset index entry.
#[inline]
pub(crate) fn offset_entry(relative_offset: u32, position: u32) -> [u8; 8] {
    let mut e = [0u8; 8];
    e[..4].copy_from_slice(&relative_offset.to_be_bytes());
    e[4..].copy_from_slice(&position.to_be_bytes());
    e
}

/// Decodes an offset index entry into (relative offset, position).
#[inline]
pub(crate) fn read_offset_entry(e: &[u8]) -> (u32, u32) {
    if e.len() < 8 {
        return (0, 0);
    }
    (
        u32::from_be_bytes([e[0], e[1], e[2], e[3]]),
        u32::from_be_bytes([e[4], e[5], e[6], e[7]]),
    )
}

/// Counts the valid entries at the front of an index file's bytes: entries must be
/// strictly increasing in both columns and non-zero (an all-zero entry is the unused
/// tail of a preallocated file). Stops at the first entry that breaks the rule.
pub(crate) fn valid_prefix(
    bytes: &[u8],
    entry_size: usize,
    key: impl Fn(&[u8]) -> (i64, i64),
) -> usize {
    let n = bytes.len() / entry_size;
    let mut prev: Option<(i64, i64)> = None;
    for i in 0..n {
        let e = &bytes[i * entry_size..(i + 1) * entry_size];
        if e.iter().all(|&b| b == 0) {
            return i;
        }
        let k = key(e);
        if let Some(p) = prev
            && (k.0 <= p.0 || k.1 < p.1)
        {
            return i;
        }
        prev = Some(k);
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn append_floor_and_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("0.index");
        let fds = FdCache::new(4, true);
        let mut w = IndexWriter::open(&p, 1, OFFSET_ENTRY, 0, 1024, &fds).unwrap();
        for i in 1..=10u32 {
            w.append(&offset_entry(i * 10, i * 4096), &fds).unwrap();
        }
        let idx = IndexView::new(Some(w.map()), OFFSET_ENTRY);
        assert_eq!(idx.entries(), 10);
        let key = |e: &[u8]| read_offset_entry(e).0;
        assert_eq!(idx.floor(5, key), None);
        assert_eq!(idx.floor(10, key), Some(0));
        assert_eq!(idx.floor(55, key), Some(4));
        assert_eq!(idx.floor(1000, key), Some(9));
        assert_eq!(std::fs::metadata(&p).unwrap().len(), 1024, "preallocated");
        w.trim(&fds).unwrap();
        assert_eq!(std::fs::metadata(&p).unwrap().len(), 80);
        let ro = map_sealed(&p, OFFSET_ENTRY, 10).unwrap();
        let ro = IndexView::new(ro.as_deref(), OFFSET_ENTRY);
        assert_eq!(read_offset_entry(ro.entry(9)), (100, 40960));
        assert!(map_sealed(&p, OFFSET_ENTRY, 0).unwrap().is_none());
        assert_eq!(IndexView::new(None, OFFSET_ENTRY).floor(5, key), None);
    }

    #[test]
    fn full_index_refuses() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("0.index");
        let fds = FdCache::new(4, true);
        let mut w = IndexWriter::open(&p, 1, OFFSET_ENTRY, 0, 16, &fds).unwrap();
        w.append(&offset_entry(1, 1), &fds).unwrap();
        w.append(&offset_entry(2, 2), &fds).unwrap();
        assert!(w.is_full());
        assert!(w.append(&offset_entry(3, 3), &fds).is_err());
    }

    #[test]
    fn valid_prefix_stops_at_zeros_and_disorder() {
        let key = |e: &[u8]| {
            let (o, p) = read_offset_entry(e);
            (o as i64, p as i64)
        };
        let mut b = Vec::new();
        b.extend_from_slice(&offset_entry(1, 100));
        b.extend_from_slice(&offset_entry(5, 200));
        b.extend_from_slice(&[0u8; 16]);
        assert_eq!(valid_prefix(&b, 8, key), 2);
        b.truncate(16);
        b.extend_from_slice(&offset_entry(4, 300));
        assert_eq!(valid_prefix(&b, 8, key), 2);
    }
}
