//! What a data directory's logs hold open, bounded however many partitions there are:
//! file descriptors (a cache of the recently used ones) and the memory maps of sealed
//! segments (mapped when read, unmapped when others were used since).
//!
//! A mapped file needs no descriptor to be read, so a segment holds none: the writer of
//! an active segment takes its descriptor from [`FdCache`] when it reserves space,
//! writes with `pwritev` or syncs, a lookup of bytes on disk when it reads headers with
//! `pread`, and a `sendfile` for as long as it runs (the slice keeps the `Arc<File>` it
//! got). The cache closes the least recently used descriptor once it holds its limit;
//! a descriptor in use elsewhere stays open until that use ends.
//!
//! Sealed segments are mapped on their first read and registered with [`MapBudget`];
//! once more than its limit are mapped, the least recently used ones (a second-chance
//! clock over a `used` bit each read sets) are unmapped. Readers keep the maps they hold
//! (`Arc`), so unmapping never takes bytes from under a slice. An active segment stays
//! mapped while it has data (its writer writes through the map).

use parking_lot::Mutex;
use std::collections::{HashMap, VecDeque};
use std::fs::{File, OpenOptions};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

/// Descriptors a cache holds at most when the process's limit is not known.
const DEFAULT_FDS: usize = 64;

/// Sealed segments a budget keeps mapped at most by default: three maps each (log,
/// offset index, time index), well under the kernel's `vm.max_map_count` (65,530).
pub(crate) const DEFAULT_MAPPED_SEGMENTS: usize = 2048;

/// The soft limit on open files of this process (`RLIMIT_NOFILE`), from
/// `/proc/self/limits`; None where that cannot be read.
pub(crate) fn open_files_limit() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = text.lines().find(|l| l.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

/// The kernel's limit on the memory maps of a process (`vm.max_map_count`).
pub(crate) fn max_map_count() -> Option<u64> {
    std::fs::read_to_string("/proc/sys/vm/max_map_count")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// The descriptors a data directory's logs keep open at most: a sixteenth of the soft
/// open-files limit (64 of 1,024), between 16 and 1,024, so that connections, sockets,
/// the descriptors `sendfile`s hold and the files being created keep the rest (the
/// server keeps a tenth of the limit for the broker's files).
pub(crate) fn default_fd_limit() -> usize {
    open_files_limit().map_or(DEFAULT_FDS, |n| (n / 16).clamp(16, 1024) as usize)
}

/// How much of the process a data directory's logs may hold at once, however many
/// partitions it has: open descriptors and mapped sealed segments.
///
/// ```
/// use tidelog::storage::StorageLimits;
///
/// let limits = StorageLimits::default();
/// assert!(limits.open_files >= 16 && limits.open_files <= 1024);
/// assert_eq!(limits.mapped_segments, 2048);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StorageLimits {
    /// Descriptors the logs keep open (a cache of the recently used ones: active
    /// segments being written, lookups of bytes on disk; a `sendfile` in flight holds
    /// its own until it ends). Default: a sixteenth of the soft open-files limit
    /// (`ulimit -n`), between 16 and 1,024 (64 under the common 1,024).
    pub open_files: usize,
    /// Sealed segments mapped at once (three maps each: log, offset index, time
    /// index); the least recently read ones are unmapped past it. Default 2,048 (6,144
    /// maps, a tenth of the kernel's default `vm.max_map_count` of 65,530).
    pub mapped_segments: usize,
}

impl Default for StorageLimits {
    fn default() -> Self {
        StorageLimits {
            open_files: default_fd_limit(),
            mapped_segments: DEFAULT_MAPPED_SEGMENTS,
        }
    }
}

impl StorageLimits {
    /// Partitions a process can hold with these limits, derived from the kernel's
    /// `vm.max_map_count`: a partition being written maps its active segment's log and
    /// two indexes (3 maps), the sealed segments mapped at once take theirs, and a
    /// thousand are left for the program, its libraries and thread stacks. (Descriptors
    /// do not grow with partitions.) 19,462 with the kernel's default of 65,530.
    pub fn partitions_that_fit(&self) -> usize {
        let maps = max_map_count().unwrap_or(65_530) as usize;
        maps.saturating_sub(3 * self.mapped_segments + 1000) / 3
    }
}

/// What a data directory's logs share to bound what they hold open: the descriptor
/// cache and the budget of mapped sealed segments.
#[derive(Debug)]
pub(crate) struct Files {
    /// Open descriptors, least recently used closed first.
    pub(crate) fds: FdCache,
    /// Mapped sealed segments, least recently used unmapped first.
    pub(crate) maps: MapBudget,
}

impl Files {
    /// Within `limits`; files opened read-write unless `writable` is false.
    pub(crate) fn new(limits: StorageLimits, writable: bool) -> Arc<Files> {
        Arc::new(Files {
            fds: FdCache::new(limits.open_files, writable),
            maps: MapBudget::new(limits.mapped_segments),
        })
    }
}

impl Default for Files {
    fn default() -> Self {
        let limits = StorageLimits::default();
        Files {
            fds: FdCache::new(limits.open_files, true),
            maps: MapBudget::new(limits.mapped_segments),
        }
    }
}

/// A bounded cache of open files, keyed by a segment's or index's id (never by path:
/// a file replaced by rename gets a new id, so a stale descriptor is never handed out).
pub(crate) struct FdCache {
    limit: usize,
    writable: bool,
    tick: AtomicU64,
    open: Mutex<HashMap<u64, (Arc<File>, u64)>>,
    /// Files opened since the cache was made (tests count them).
    opened: AtomicU64,
}

impl std::fmt::Debug for FdCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FdCache")
            .field("limit", &self.limit)
            .field("open", &self.open.lock().len())
            .finish()
    }
}

impl FdCache {
    /// A cache of at most `limit` descriptors (at least 1), opening files read-write,
    /// or read-only when `writable` is false (a read-only opener of a data directory).
    pub(crate) fn new(limit: usize, writable: bool) -> FdCache {
        FdCache {
            limit: limit.max(1),
            writable,
            tick: AtomicU64::new(0),
            open: Mutex::new(HashMap::new()),
            opened: AtomicU64::new(0),
        }
    }

    /// The open file of `id` (at `path`), opened (and the least recently used one
    /// closed, when the cache is full) if it is not open.
    pub(crate) fn get(&self, id: u64, path: &Path) -> std::io::Result<Arc<File>> {
        let now = self.tick.fetch_add(1, Ordering::Relaxed);
        if let Some((f, used)) = self.open.lock().get_mut(&id) {
            *used = now;
            return Ok(Arc::clone(f));
        }
        // Opened outside the lock: an open can take long (a cold inode).
        let file = Arc::new(
            OpenOptions::new()
                .read(true)
                .write(self.writable)
                .open(path)?,
        );
        self.opened.fetch_add(1, Ordering::Relaxed);
        let mut open = self.open.lock();
        if let Some((f, used)) = open.get_mut(&id) {
            // Another thread opened it meanwhile: keep one.
            *used = now;
            return Ok(Arc::clone(f));
        }
        while open.len() >= self.limit {
            let Some(oldest) = open
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(k, _)| *k)
            else {
                break;
            };
            open.remove(&oldest);
        }
        open.insert(id, (Arc::clone(&file), now));
        Ok(file)
    }

    /// Closes the file of `id` (its segment is gone or replaced); uses elsewhere keep it
    /// open until they end.
    pub(crate) fn forget(&self, id: u64) {
        self.open.lock().remove(&id);
    }

    /// Descriptors the cache holds.
    pub(crate) fn len(&self) -> usize {
        self.open.lock().len()
    }

    /// Files opened since the cache was made.
    #[cfg(test)]
    pub(crate) fn opened(&self) -> u64 {
        self.opened.load(Ordering::Relaxed)
    }
}

/// A mapped thing a [`MapBudget`] can unmap: a sealed segment.
pub(crate) trait Unmap: Send + Sync {
    /// True (and cleared) if it was read since the last call: it gets a second chance.
    fn take_used(&self) -> bool;
    /// Drops its maps (readers keep theirs); false if it cannot be unmapped now.
    fn unmap(&self) -> bool;
}

/// Bounds how many sealed segments are mapped at once.
pub(crate) struct MapBudget {
    limit: usize,
    mapped: Mutex<VecDeque<Weak<dyn Unmap>>>,
}

impl std::fmt::Debug for MapBudget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MapBudget")
            .field("limit", &self.limit)
            .field("mapped", &self.mapped.lock().len())
            .finish()
    }
}

impl MapBudget {
    /// A budget of `limit` mapped segments (at least 1).
    pub(crate) fn new(limit: usize) -> MapBudget {
        MapBudget {
            limit: limit.max(1),
            mapped: Mutex::new(VecDeque::new()),
        }
    }

    /// `seg` was just mapped: counts it, and unmaps the least recently used others
    /// while over the limit. Never unmaps `seg` itself in this call.
    pub(crate) fn mapped(&self, seg: Weak<dyn Unmap>) {
        let mut victims = Vec::new();
        {
            let mut mapped = self.mapped.lock();
            // Over the limit: look at each entry at most twice (a second chance each).
            let mut budget = 2 * mapped.len();
            while mapped.len() >= self.limit && budget > 0 {
                budget -= 1;
                let Some(w) = mapped.pop_front() else { break };
                let Some(s) = w.upgrade() else { continue };
                if s.take_used() {
                    mapped.push_back(w);
                } else {
                    victims.push(s);
                }
            }
            mapped.push_back(seg);
        }
        // Unmapped outside the lock (munmap takes the process's map lock).
        for v in victims {
            v.unmap();
        }
    }

    /// Segments counted as mapped (some may be gone or unmapped since).
    pub(crate) fn len(&self) -> usize {
        self.mapped.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;

    #[test]
    fn the_cache_holds_its_limit_and_closes_the_least_recently_used() {
        let dir = tempfile::tempdir().unwrap();
        let paths: Vec<_> = (0..5)
            .map(|i| {
                let p = dir.path().join(format!("{i}"));
                std::fs::write(&p, b"x").unwrap();
                p
            })
            .collect();
        let cache = FdCache::new(3, false);
        for (i, p) in paths.iter().enumerate().take(3) {
            cache.get(i as u64, p).unwrap();
        }
        cache.get(0, &paths[0]).unwrap(); // 0 is now the most recent
        let held = cache.get(3, &paths[3]).unwrap(); // closes 1, the oldest
        assert_eq!(cache.len(), 3);
        assert_eq!(cache.opened(), 4);
        cache.get(0, &paths[0]).unwrap();
        assert_eq!(cache.opened(), 4, "0 stayed open");
        cache.get(1, &paths[1]).unwrap();
        assert_eq!(cache.opened(), 5, "1 was closed");
        cache.forget(3);
        // A file in use stays open after the cache lets go of it.
        use std::os::unix::fs::FileExt;
        let mut b = [0u8; 1];
        held.read_at(&mut b, 0).unwrap();
        assert_eq!(&b, b"x");
    }

    struct Fake {
        used: AtomicBool,
        mapped: AtomicBool,
    }

    impl Unmap for Fake {
        fn take_used(&self) -> bool {
            self.used.swap(false, Ordering::Relaxed)
        }
        fn unmap(&self) -> bool {
            self.mapped.store(false, Ordering::Relaxed);
            true
        }
    }

    #[test]
    fn the_budget_unmaps_the_least_recently_used_past_its_limit() {
        let budget = MapBudget::new(3);
        let segs: Vec<Arc<Fake>> = (0..5)
            .map(|_| {
                Arc::new(Fake {
                    used: AtomicBool::new(false),
                    mapped: AtomicBool::new(true),
                })
            })
            .collect();
        for s in &segs[..3] {
            let d: Arc<dyn Unmap> = s.clone();
            budget.mapped(Arc::downgrade(&d));
        }
        segs[0].used.store(true, Ordering::Relaxed);
        let d: Arc<dyn Unmap> = segs[3].clone();
        budget.mapped(Arc::downgrade(&d));
        assert!(
            segs[0].mapped.load(Ordering::Relaxed),
            "read: a second chance"
        );
        assert!(
            !segs[1].mapped.load(Ordering::Relaxed),
            "the oldest unused goes"
        );
        assert!(segs[2].mapped.load(Ordering::Relaxed));
        assert_eq!(budget.len(), 3);
    }
}
