//! Sparse index files: the offset index (`.index`) and the machinery the time index
//! (`.timeindex`) shares with it.
//!
//! An index file is an array of fixed-size big-endian entries. While its segment is
//! active the file is sized to `index_max_bytes` (sparse) and mapped read-write; entries
//! are appended, with disk blocks reserved a chunk ahead so that a write into the map
//! can never fault on a full disk. When the segment is sealed the file is trimmed to its
//! entries. Entries are strictly increasing in both columns, so lookups are binary
//! searches over the readable prefix.
//!
//! Offset index entry (8 bytes): relative offset (u32, offset - segment base offset),
//! position (u32, byte position of the batch in the `.log`). The first batch of a
//! segment (position 0) never has an entry, so every entry has a position > 0 and an
//! all-zero entry marks the end of a preallocated file that was not trimmed.

use super::mmap::{AppendMap, MapWriter, allocate};
use crate::error::IoContext;
use crate::{Error, Result};
use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Bytes reserved on disk ahead of the write position of an index.
const INDEX_RESERVE_CHUNK: usize = 64 * 1024;

/// A fixed-width entry file, shared by readers, appended to by one writer.
pub(crate) struct IndexFile {
    path: PathBuf,
    file: File,
    map: Arc<AppendMap>,
    entry_size: usize,
}

/// Write side of an active index file.
pub(crate) struct IndexWriter {
    file: File,
    writer: MapWriter,
    entry_size: usize,
    /// Bytes of entries written.
    len: usize,
    /// Bytes of the file backed by reserved blocks.
    reserved: usize,
    /// Capacity in bytes (index_max_bytes rounded down to whole entries).
    capacity: usize,
}

impl IndexFile {
    /// Opens (or creates) an index file for appending, keeping its first `entries`
    /// entries.
    pub(crate) fn open_rw(
        path: &Path,
        entry_size: usize,
        entries: usize,
        max_bytes: usize,
    ) -> Result<(IndexFile, IndexWriter)> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .ctx("open index", path)?;
        let len = entries * entry_size;
        let capacity = (max_bytes / entry_size).max(entries + 1) * entry_size;
        // Sparse preallocation to the maximum, as Kafka does; blocks are reserved in
        // chunks as entries are written.
        file.set_len(capacity as u64).ctx("resize index", path)?;
        let (map, writer) = AppendMap::map_rw(&file, capacity, len).ctx("map index", path)?;
        // The file is a hole up to `max_bytes` (10 MB by default): without this, the
        // first entry's page fault would read ahead, zero-filling megabytes of page
        // cache for a few bytes of index (5 ms and 8 MiB per index file here).
        map.advise_random();
        let mut w = IndexWriter {
            file,
            writer,
            entry_size,
            len,
            reserved: 0,
            capacity,
        };
        w.reserve(len + entry_size)
            .map_err(|e| Error::io("reserve index space", path, e))?;
        Ok((
            IndexFile {
                path: path.to_path_buf(),
                file: w.file.try_clone().ctx("open index", path)?,
                map,
                entry_size,
            },
            w,
        ))
    }

    /// Maps a sealed index file read-only, keeping its first `entries` entries.
    pub(crate) fn open_ro(path: &Path, entry_size: usize, entries: usize) -> Result<IndexFile> {
        let file = File::open(path).ctx("open index", path)?;
        let map = AppendMap::map_ro(&file, entries * entry_size).ctx("map index", path)?;
        Ok(IndexFile {
            path: path.to_path_buf(),
            file,
            map,
            entry_size,
        })
    }

    /// Flushes the readable entries to disk.
    pub(crate) fn sync(&self) -> Result<()> {
        self.map
            .flush(0, self.map.readable())
            .ctx("msync index", &self.path)?;
        self.file.sync_data().ctx("fsync index", &self.path)
    }

    /// The map (tests check its page-cache footprint).
    #[cfg(test)]
    pub(crate) fn map(&self) -> &Arc<AppendMap> {
        &self.map
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Number of readable entries.
    #[inline]
    pub(crate) fn entries(&self) -> usize {
        self.map.readable() / self.entry_size
    }

    /// The bytes of entry `i` (which must be below `entries()`).
    #[inline]
    pub(crate) fn entry(&self, i: usize) -> &[u8] {
        let s = i * self.entry_size;
        self.map.get(s, s + self.entry_size).unwrap_or(&[])
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

impl IndexWriter {
    fn reserve(&mut self, upto: usize) -> std::io::Result<()> {
        let upto = upto.min(self.capacity);
        if upto <= self.reserved {
            return Ok(());
        }
        let target = upto.div_ceil(INDEX_RESERVE_CHUNK) * INDEX_RESERVE_CHUNK;
        let mut target = target.min(self.capacity);
        let from = self.reserved as u64;
        if let Err(e) = allocate(&self.file, from, (target - self.reserved) as u64) {
            // On a full disk, exactly the entry that is needed.
            if target == upto
                || !matches!(
                    e.kind(),
                    std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded
                )
            {
                return Err(e);
            }
            allocate(&self.file, from, (upto - self.reserved) as u64)?;
            target = upto;
        }
        self.reserved = target;
        Ok(())
    }

    /// Reserves the disk space of the next entry, so that appending it cannot fail for
    /// lack of space.
    pub(crate) fn reserve_next(&mut self, path: &Path) -> Result<()> {
        self.reserve(self.len + self.entry_size)
            .map_err(|e| Error::io("reserve index space", path, e))
    }

    /// True when no further entry fits.
    pub(crate) fn is_full(&self) -> bool {
        self.len + self.entry_size > self.capacity
    }

    /// Appends one entry (`entry.len()` must be the entry size) and publishes it.
    pub(crate) fn append(&mut self, entry: &[u8], path: &Path) -> Result<()> {
        debug_assert_eq!(entry.len(), self.entry_size);
        if self.is_full() {
            return Err(Error::corrupt(
                path.display(),
                self.len as u64,
                "index is full",
            ));
        }
        self.reserve(self.len + self.entry_size)
            .map_err(|e| Error::io("reserve index space", path, e))?;
        if !self.writer.write(self.len, entry) {
            return Err(Error::corrupt(
                path.display(),
                self.len as u64,
                "index write out of bounds",
            ));
        }
        self.len += self.entry_size;
        self.writer.publish(self.len);
        Ok(())
    }

    /// Trims the file to its entries (on seal or clean close).
    pub(crate) fn trim(&self, path: &Path) -> Result<()> {
        self.file.set_len(self.len as u64).ctx("trim index", path)
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
        let (idx, mut w) = IndexFile::open_rw(&p, OFFSET_ENTRY, 0, 1024).unwrap();
        for i in 1..=10u32 {
            w.append(&offset_entry(i * 10, i * 4096), &p).unwrap();
        }
        assert_eq!(idx.entries(), 10);
        let key = |e: &[u8]| read_offset_entry(e).0;
        assert_eq!(idx.floor(5, key), None);
        assert_eq!(idx.floor(10, key), Some(0));
        assert_eq!(idx.floor(55, key), Some(4));
        assert_eq!(idx.floor(1000, key), Some(9));
        assert_eq!(std::fs::metadata(&p).unwrap().len(), 1024, "preallocated");
        w.trim(&p).unwrap();
        assert_eq!(std::fs::metadata(&p).unwrap().len(), 80);
        let ro = IndexFile::open_ro(&p, OFFSET_ENTRY, 10).unwrap();
        assert_eq!(read_offset_entry(ro.entry(9)), (100, 40960));
    }

    #[test]
    fn full_index_refuses() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("0.index");
        let (_idx, mut w) = IndexFile::open_rw(&p, OFFSET_ENTRY, 0, 16).unwrap();
        w.append(&offset_entry(1, 1), &p).unwrap();
        w.append(&offset_entry(2, 2), &p).unwrap();
        assert!(w.is_full());
        assert!(w.append(&offset_entry(3, 3), &p).is_err());
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
