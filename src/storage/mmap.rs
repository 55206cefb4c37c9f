//! Memory maps of segment and index files: the only module of the storage layer with
//! `unsafe` code.
//!
//! [`AppendMap`] maps a file that grows at its end. It keeps one invariant that makes
//! handing out `&[u8]` to concurrent readers sound while a writer keeps appending:
//!
//! * bytes `[0, readable)` are never written again through this map; readers can only
//!   borrow inside that range;
//! * bytes `[readable, capacity)` are written only by the single [`MapWriter`] of the
//!   map, through the map or with `pwritev` on its file (it is not `Clone`, and writing
//!   takes `&mut self`), and only after the
//!   caller reserved the file space behind them (so a write never faults on a hole the
//!   disk cannot back: no SIGBUS on a full disk);
//! * `readable` only grows (`publish`), with Release ordering; readers load it with
//!   Acquire, so the bytes they borrow were written before they could see them.
//!
//! The map stays valid as long as any `Arc<AppendMap>` lives, even after its file was
//! unlinked: a reader never sees a segment vanish under it.
//!
//! What no code here can rule out is another process writing the same file; the data
//! directory lock (one process writes a data directory) is what keeps that away. A
//! process that opens a data directory read-only while another writes it maps segments
//! read-only and publishes (through a [`Follower`]) only bytes that the writer has
//! published: whole batches whose CRC it checked, which the writer never writes again
//! and never cuts from the file (a file is only trimmed past its data, or replaced by
//! rename, which leaves this map the old inode).

use memmap2::{Advice, MmapOptions, MmapRaw};
use std::fs::File;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Page size assumed for rounding advice ranges (4 KiB; larger pages only make the
/// rounding coarser, never wrong).
const PAGE: usize = 4096;

/// A file mapping shared by one writer and many readers; see the module docs.
pub(crate) struct AppendMap {
    raw: MmapRaw,
    /// Length of the mapping (may exceed the file's current size; only reserved bytes
    /// are ever touched).
    capacity: usize,
    /// Bytes `[0, readable)` are immutable and may be borrowed by readers.
    readable: AtomicUsize,
}

/// The only handle that writes into an [`AppendMap`].
pub(crate) struct MapWriter {
    map: Arc<AppendMap>,
}

/// The only handle that makes more of a read-only map readable: the map of a segment
/// another process writes (see [`AppendMap::map_ro_following`]). It writes no byte.
pub(crate) struct Follower {
    map: Arc<AppendMap>,
}

impl Follower {
    /// The map it publishes.
    pub(crate) fn map(&self) -> &Arc<AppendMap> {
        &self.map
    }

    /// Makes `[0, upto)` readable. The caller checked those bytes (whole batches with a
    /// valid CRC, read from the file) and they lie below the file's end; the writing
    /// process never writes published bytes again. `upto` must not be below the
    /// readable end nor above the capacity; returns false otherwise.
    pub(crate) fn publish(&mut self, upto: usize) -> bool {
        if upto > self.map.capacity || upto < self.map.readable() {
            return false;
        }
        self.map.readable.store(upto, Ordering::Release);
        true
    }
}

impl AppendMap {
    /// Maps `capacity` bytes of `file` read-write, with `[0, readable)` already holding
    /// data. Returns the shared map and its single writer.
    pub(crate) fn map_rw(
        file: &File,
        capacity: usize,
        readable: usize,
    ) -> std::io::Result<(Arc<AppendMap>, MapWriter)> {
        let capacity = capacity.max(readable).max(1);
        let raw = MmapOptions::new().len(capacity).map_raw(file)?;
        let map = Arc::new(AppendMap {
            raw,
            capacity,
            readable: AtomicUsize::new(readable),
        });
        Ok((map.clone(), MapWriter { map }))
    }

    /// Maps the first `len` bytes of `file` for reading only (a sealed segment).
    pub(crate) fn map_ro(file: &File, len: usize) -> std::io::Result<Arc<AppendMap>> {
        let raw = MmapOptions::new().len(len.max(1)).map_raw_read_only(file)?;
        Ok(Arc::new(AppendMap {
            raw,
            capacity: len.max(1),
            readable: AtomicUsize::new(len),
        }))
    }

    /// Maps `capacity` bytes of `file` for reading only, `[0, readable)` readable, for a
    /// segment that another process appends to: the returned [`Follower`] makes more of
    /// it readable once this process has checked those bytes (read with `pread`, whole
    /// batches with a valid CRC). Only bytes below the file's data end are ever made
    /// readable: pages past the end of the file would fault (SIGBUS).
    pub(crate) fn map_ro_following(
        file: &File,
        capacity: usize,
        readable: usize,
    ) -> std::io::Result<(Arc<AppendMap>, Follower)> {
        let capacity = capacity.max(readable).max(1);
        let raw = MmapOptions::new().len(capacity).map_raw_read_only(file)?;
        let map = Arc::new(AppendMap {
            raw,
            capacity,
            readable: AtomicUsize::new(readable),
        });
        Ok((map.clone(), Follower { map }))
    }

    /// Bytes the map spans.
    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    /// Bytes that readers may borrow.
    #[inline]
    pub(crate) fn readable(&self) -> usize {
        self.readable.load(Ordering::Acquire)
    }

    /// The readable bytes `[start, end)`, or `None` if that range is not readable.
    #[inline]
    pub(crate) fn get(&self, start: usize, end: usize) -> Option<&[u8]> {
        if start > end || end > self.readable() {
            return None;
        }
        // SAFETY: `end <= readable`, and `readable <= capacity` (publish checks it), so
        // the range lies inside the mapping, which lives as long as `self`. Bytes below
        // `readable` are never written again through this map (only `MapWriter` writes,
        // and only at or above `readable`), and the Acquire load above pairs with the
        // Release store in `publish`, so the bytes were fully written before this
        // borrow. The data-directory lock keeps other processes from writing the file
        // below the published end: the one writer never rewrites published bytes, and a
        // read-only follower publishes only bytes the writer had published (`Follower`).
        #[allow(unsafe_code)]
        let all = unsafe { std::slice::from_raw_parts(self.raw.as_ptr(), end) };
        Some(&all[start..])
    }

    /// Faults `[start, end)` in for writing (MADV_POPULATE_WRITE; ignored where the
    /// kernel lacks it), so appends into it take no page fault. It changes no byte, so
    /// any holder may call it; the file space behind the range must be reserved.
    ///
    /// Works in 1 MiB pieces and skips what the writer has already written (its pages
    /// are in): a range handed over while the writer was fast but reached after it
    /// caught up costs nothing, and the work never holds a core for long at a time.
    pub(crate) fn populate_write(&self, start: usize, end: usize) {
        const PIECE: usize = 1 << 20;
        let end = end.min(self.capacity);
        let mut at = start;
        while at < end {
            let from = at.max(self.readable() & !(PAGE - 1));
            if from >= end {
                break;
            }
            let to = from.saturating_add(PIECE).min(end);
            let _ = self
                .raw
                .advise_range(Advice::PopulateWrite, from, to - from);
            at = to;
        }
    }

    /// Maps `[start, end)` (clipped to the readable bytes) into this process's page
    /// tables (MADV_POPULATE_READ; ignored where the kernel lacks it), reading from disk
    /// what is not cached, so that readers of the range take no page fault. It changes
    /// no byte, so any holder may call it.
    pub(crate) fn populate_read(&self, start: usize, end: usize) {
        let end = end.min(self.readable());
        if start < end {
            let _ = self
                .raw
                .advise_range(Advice::PopulateRead, start, end - start);
        }
    }

    /// Tells the kernel that faults in this map are random (MADV_RANDOM): a fault on a
    /// page that is not cached reads that page alone, instead of reading ahead up to the
    /// device's `read_ahead_kb` (8 MiB on our VMs). For a preallocated file whose tail is
    /// a hole, read-ahead means zero-filling megabytes of page cache, synchronously, in
    /// the faulting writer. It changes no byte; failures are ignored (advice only).
    pub(crate) fn advise_random(&self) {
        let _ = self.raw.advise(Advice::Random);
    }

    /// Pages of the file behind the first `len` bytes of the map that are in the page
    /// cache (mincore), mapped here or not: tests check what a write brought in.
    #[cfg(test)]
    pub(crate) fn cached_pages(&self, len: usize) -> usize {
        let len = len.min(self.capacity);
        let mut vec = vec![0u8; len.div_ceil(PAGE)];
        // SAFETY: the range is inside this live mapping (clamped to its length) and its
        // start is the mapping's page-aligned base; `vec` has one byte per page of it, as
        // mincore requires, and is not otherwise borrowed during the call.
        #[allow(unsafe_code)]
        let rc = unsafe {
            libc::mincore(
                self.raw.as_mut_ptr().cast::<libc::c_void>(),
                len,
                vec.as_mut_ptr(),
            )
        };
        assert_eq!(rc, 0, "mincore: {}", std::io::Error::last_os_error());
        vec.iter().filter(|&&b| b & 1 == 1).count()
    }

    /// Makes the bytes written through this map part of what the next fsync of its
    /// file writes. On Linux there is nothing to do: a shared file mapping's pages are
    /// the file's page cache pages, and a store to a clean one faults (the kernel keeps
    /// clean shared pages write-protected) and marks it dirty, so `fdatasync` writes it
    /// as it writes a page dirtied by `write(2)`. `msync(MS_SYNC)` is itself an fsync of
    /// the range there (`vfs_fsync_range`): calling it before `fdatasync` synced every
    /// file twice. POSIX leaves the two caches possibly apart, so elsewhere this is
    /// `msync(MS_SYNC)` of the written bytes.
    pub(crate) fn flush_for_fsync(&self) -> std::io::Result<()> {
        #[cfg(target_os = "linux")]
        {
            Ok(())
        }
        #[cfg(not(target_os = "linux"))]
        {
            let end = self.readable().min(self.capacity);
            if end == 0 {
                return Ok(());
            }
            self.raw.flush_range(0, end)
        }
    }
}

impl MapWriter {
    /// Copies `data` to position `pos`, which must be at or above the readable end and
    /// inside the capacity; returns false (writing nothing) otherwise. The caller must
    /// have reserved the file space behind `[pos, pos + data.len())`.
    #[inline]
    pub(crate) fn write(&mut self, pos: usize, data: &[u8]) -> bool {
        let Some(end) = pos.checked_add(data.len()) else {
            return false;
        };
        if pos < self.map.readable() || end > self.map.capacity {
            return false;
        }
        // SAFETY: `[pos, end)` lies inside the mapping (checked above) and at or above
        // `readable`, so no reader holds a borrow of it; `MapWriter` is unique for its
        // map and this takes `&mut self`, so no other write runs concurrently. The
        // caller reserved the file blocks, so the store cannot raise SIGBUS. `data`
        // cannot overlap the destination: it is borrowed immutably while this region
        // is never handed out.
        #[allow(unsafe_code)]
        unsafe {
            std::ptr::copy_nonoverlapping(
                data.as_ptr(),
                self.map.raw.as_mut_ptr().add(pos),
                data.len(),
            );
        }
        true
    }

    /// Writes `head` then `rest` at position `pos` with one `pwritev` on `file` (the
    /// mapped file) instead of through the map. Same bounds as [`MapWriter::write`];
    /// returns `Ok(false)`, writing nothing, outside them.
    ///
    /// For large batches this is the cheaper way into the page cache: the kernel copies
    /// whole pages straight into fresh page-cache pages, where a store through the map
    /// first faults each page in, which zeroes it (reading a hole) and maps it. The map
    /// sees the bytes at once: it is a shared mapping of the same pages.
    pub(crate) fn write_file(
        &mut self,
        file: &File,
        pos: usize,
        head: &[u8],
        rest: &[u8],
    ) -> std::io::Result<bool> {
        let Some(end) = pos.checked_add(head.len() + rest.len()) else {
            return Ok(false);
        };
        if pos < self.map.readable() || end > self.map.capacity {
            return Ok(false);
        }
        let mut done = 0usize;
        let total = end - pos;
        while done < total {
            let (a, b): (&[u8], &[u8]) = if done < head.len() {
                (&head[done..], rest)
            } else {
                (&rest[done - head.len()..], &[])
            };
            let iov = [
                libc::iovec {
                    iov_base: a.as_ptr() as *mut libc::c_void,
                    iov_len: a.len(),
                },
                libc::iovec {
                    iov_base: b.as_ptr() as *mut libc::c_void,
                    iov_len: b.len(),
                },
            ];
            let at = libc::off_t::try_from(pos + done).map_err(|_| {
                std::io::Error::new(std::io::ErrorKind::InvalidInput, "offset too large")
            })?;
            // SAFETY: both iovecs point into live slices borrowed for this call, with
            // their exact lengths; the kernel only reads them. The descriptor stays open
            // for the call's duration (`file` is borrowed). The target range lies at or above
            // `readable` and inside the capacity (checked above), so no reader borrows
            // those bytes through the map, and `&mut self` on the unique writer means no
            // other write to them runs concurrently.
            #[allow(unsafe_code)]
            let n = unsafe {
                libc::pwritev(std::os::fd::AsRawFd::as_raw_fd(file), iov.as_ptr(), 2, at)
            };
            if n < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            if n == 0 {
                return Err(std::io::ErrorKind::WriteZero.into());
            }
            done += n as usize;
        }
        Ok(true)
    }

    /// Makes `[0, upto)` readable. `upto` must not be below the current readable end
    /// nor above the capacity; returns false otherwise.
    #[inline]
    pub(crate) fn publish(&mut self, upto: usize) -> bool {
        if upto > self.map.capacity || upto < self.map.readable() {
            return false;
        }
        self.map.readable.store(upto, Ordering::Release);
        true
    }
}

/// Reserves the disk blocks of `[offset, offset + len)` of `file` (extending the file
/// if it is shorter), so that later stores through a map of that range cannot fault for
/// lack of space: `posix_fallocate(3)`, whose return value is the error (it does not set
/// `errno`; fs2's `allocate` read `errno` and reported a full disk as "Success (os
/// error 0)"). The error says how many bytes were asked for, and where.
pub(crate) fn allocate(file: &File, offset: u64, len: u64) -> std::io::Result<()> {
    if len == 0 {
        return Ok(());
    }
    let too_large =
        || std::io::Error::new(std::io::ErrorKind::InvalidInput, "reservation too large");
    let off = libc::off_t::try_from(offset).map_err(|_| too_large())?;
    let n = libc::off_t::try_from(len).map_err(|_| too_large())?;
    loop {
        // SAFETY: posix_fallocate takes a descriptor and two integers and touches no
        // memory of ours; the descriptor stays open for the call (`file` is borrowed).
        #[allow(unsafe_code)]
        let rc = unsafe { libc::posix_fallocate(std::os::fd::AsRawFd::as_raw_fd(file), off, n) };
        match rc {
            0 => return Ok(()),
            libc::EINTR => continue,
            code => {
                let e = std::io::Error::from_raw_os_error(code);
                return Err(std::io::Error::new(
                    e.kind(),
                    format!("{e}; {len} bytes asked for at byte {offset}"),
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writer_cannot_touch_published_bytes() {
        let f = tempfile::tempfile().unwrap();
        f.set_len(4096).unwrap();
        let (map, mut w) = AppendMap::map_rw(&f, 1 << 20, 0).unwrap();
        assert!(w.write(0, b"hello"));
        assert!(
            map.get(0, 5).is_none(),
            "unpublished bytes are not readable"
        );
        assert!(w.publish(5));
        assert_eq!(map.get(0, 5), Some(&b"hello"[..]));
        assert!(!w.write(3, b"xx"), "a write below readable is refused");
        assert!(!w.publish(4), "readable never shrinks");
        assert!(
            !w.write((1 << 20) - 1, b"ab"),
            "a write past capacity is refused"
        );
        assert!(w.write(5, b" world"));
        assert!(w.publish(11));
        assert_eq!(map.get(6, 11), Some(&b"world"[..]));
    }

    #[test]
    fn read_only_map_sees_file_bytes() {
        use std::io::Write;
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(b"abcdef").unwrap();
        let map = AppendMap::map_ro(&f, 6).unwrap();
        assert_eq!(map.get(2, 4), Some(&b"cd"[..]));
        assert!(map.get(4, 7).is_none());
    }
}
