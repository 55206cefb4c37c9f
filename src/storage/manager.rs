//! [`LogManager`]: a locked data directory, the logs open in it, the one maintenance
//! thread (flush by `flush_ms`, retention, compaction) for all of them, and the
//! high-watermark checkpoint of the replicated ones (`replication-offset-checkpoint`).

use super::clock::CoarseClock;
use super::clock::now_ms;
use super::config::LogConfig;
use super::dirs::{DirHealth, duplicate, future_of, least_loaded, retired_of, sync_copy};
use super::events::DiskSpace;
use super::files::{Files, StorageLimits};
use super::log::{LogEnv, PartitionLog};
use super::moves::LogMove;
use super::prefault::{PrefaultThread, Prefaulter};
use super::types::CleanupOutcome;
use crate::error::IoContext;
use crate::error::{Error, Result};
use crossbeam_channel::{Receiver, Sender, bounded};
use fs2::FileExt;
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Name of the lock file in a data directory.
pub const LOCK_FILE: &str = ".lock";

/// Name of the data directory's high-watermark checkpoint (Kafka's
/// `replication-offset-checkpoint`): one `topic partition high_watermark` line per
/// replicated log.
pub const HIGH_WATERMARK_FILE: &str = "replication-offset-checkpoint";

/// The directory of a data directory where log directories that belong to no topic
/// are moved (see [`LogManager::move_aside`]).
pub const ORPHANED_DIR: &str = "orphaned";

/// A log directory that belonged to nothing and was moved aside (see
/// [`LogManager::move_aside`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrphanedLog {
    /// Its name in the data directory, e.g. `events-3`.
    pub name: String,
    /// Where it is now: `<data dir>/orphaned/<name>-<unix ms>`.
    pub moved_to: PathBuf,
    /// Bytes of the files in it.
    pub bytes: u64,
}

impl std::fmt::Display for OrphanedLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "partition directory {} ({} bytes) belongs to no topic: moved to {}",
            self.name,
            self.bytes,
            self.moved_to.display()
        )
    }
}

/// A partition being moved into another log directory (Kafka's future replica), as
/// [`LogManager::future_logs`] gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FutureLog {
    /// The log's name, `<topic>-<partition>`.
    pub name: String,
    /// The log directory it moves into.
    pub dir: PathBuf,
    /// Bytes copied there so far.
    pub size: u64,
    /// How far the copy's end is below the serving log's end.
    pub offset_lag: i64,
}

/// Bytes of the files under `dir` (apparent sizes).
fn dir_bytes(dir: &Path) -> Result<u64> {
    let mut total = 0;
    for entry in fs::read_dir(dir).ctx("list", dir)? {
        let entry = entry.ctx("list", dir)?;
        let meta = entry.metadata().ctx("stat", entry.path())?;
        total += if meta.is_dir() {
            dir_bytes(&entry.path())?
        } else {
            meta.len()
        };
    }
    Ok(total)
}

/// Takes the exclusive lock of the log directory `dir`.
fn lock_dir(dir: &Path) -> Result<File> {
    let lock_path = dir.join(LOCK_FILE);
    let lock = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&lock_path)
        .ctx("open lock file", &lock_path)?;
    if lock.try_lock_exclusive().is_err() {
        return Err(Error::DirectoryLocked(dir.to_path_buf()));
    }
    Ok(lock)
}

/// Refuses a log directory given twice.
fn check_distinct(dir: &Path, extra: &[PathBuf]) -> Result<()> {
    let mut seen = vec![dir];
    for d in extra {
        if seen.contains(&d.as_path()) {
            return Err(Error::InvalidConfig {
                key: "log.dirs".into(),
                reason: format!("{} is given twice", d.display()),
            });
        }
        seen.push(d);
    }
    Ok(())
}

/// Names of the plain-named subdirectories of `dir`.
fn list_subdirs(dir: &Path) -> Result<Vec<String>> {
    let mut names = Vec::new();
    for entry in fs::read_dir(dir).ctx("list log directory", dir)? {
        let entry = entry.ctx("list log directory", dir)?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if entry.path().is_dir() && check_name(&name).is_ok() {
            names.push(name);
        }
    }
    names.sort();
    Ok(names)
}

/// Finds the partition directories of every usable log directory: which one holds
/// each. One in two directories is an error naming both. A `-future` directory (a move
/// between directories that a crash cut short) is deleted if the partition is still
/// in its old directory (the move starts again if asked again), and renamed into place
/// if not (the old copy was already retired: the future one is complete). An extra
/// directory that cannot be listed is failed.
fn scan_dirs(dirs: &[Arc<DirHealth>], read_only: bool) -> Result<BTreeMap<String, usize>> {
    let mut placement: BTreeMap<String, usize> = BTreeMap::new();
    let mut futures = Vec::new();
    let mut retired = Vec::new();
    for (at, d) in dirs.iter().enumerate() {
        if d.failure().is_some() {
            continue;
        }
        let names = match list_subdirs(d.path()) {
            Ok(names) => names,
            Err(e) if at > 0 => {
                d.fail(&e.to_string());
                continue;
            }
            Err(e) => return Err(e),
        };
        for name in names {
            if let Some(partition) = future_of(&name) {
                futures.push((at, name.clone(), partition.to_string()));
            } else if let Some(partition) = retired_of(&name) {
                retired.push((at, name.clone(), partition.to_string()));
            } else if split_log_name(&name).is_some()
                && let Some(&first) = placement.get(&name)
            {
                return Err(duplicate(&name, dirs[first].path(), d.path()));
            } else if split_log_name(&name).is_some() {
                placement.insert(name, at);
            }
        }
    }
    if read_only {
        return Ok(placement);
    }
    for (at, future, partition) in futures {
        let path = dirs[at].path().join(&future);
        match placement.entry(partition) {
            std::collections::btree_map::Entry::Occupied(_) => {
                fs::remove_dir_all(&path).ctx("delete unfinished move", &path)?;
            }
            std::collections::btree_map::Entry::Vacant(v) => {
                let to = dirs[at].path().join(v.key());
                fs::rename(&path, &to).ctx("finish move", &path)?;
                v.insert(at);
            }
        }
        super::checkpoint::sync_dir(dirs[at].path())?;
    }
    // A directory retired by a move: deleted once the partition is in place elsewhere,
    // put back if not (the move had not finished).
    for (at, old, partition) in retired {
        let path = dirs[at].path().join(&old);
        match placement.entry(partition) {
            std::collections::btree_map::Entry::Occupied(_) => {
                fs::remove_dir_all(&path).ctx("delete moved partition", &path)?;
            }
            std::collections::btree_map::Entry::Vacant(v) => {
                fs::rename(&path, dirs[at].path().join(v.key())).ctx("restore", &path)?;
                v.insert(at);
            }
        }
        super::checkpoint::sync_dir(dirs[at].path())?;
    }
    Ok(placement)
}

/// Errors from background passes kept for inspection (the newest ones).
const MAX_BACKGROUND_ERRORS: usize = 32;

struct Inner {
    dir: PathBuf,
    /// Holds the exclusive fs2 lock for as long as the manager lives (None: opened
    /// read-only, which takes no lock).
    _lock: Option<File>,
    /// Every log directory, the data directory first (Kafka's `log.dirs`), and whether
    /// each is usable.
    dirs: Vec<Arc<DirHealth>>,
    /// The locks of the other log directories (as `_lock`).
    _dir_locks: Vec<File>,
    /// Which log directory holds each partition directory (`<topic>-<partition>`),
    /// found on disk at open or placed since, by index in `dirs`.
    placement: Mutex<BTreeMap<String, usize>>,
    /// Opened read-only: nothing is written, the logs follow another process.
    read_only: bool,
    logs: Mutex<BTreeMap<String, PartitionLog>>,
    background: Mutex<Option<(Sender<()>, JoinHandle<()>)>>,
    /// Faults in the active segments' next pages (see `prefault`).
    prefaulter: Prefaulter,
    prefault_thread: Mutex<PrefaultThread>,
    /// Ticked by the maintenance thread; read by appends (see `clock`).
    clock: CoarseClock,
    /// Whether the disk is full, for all the logs (one episode per data directory).
    space: Arc<DiskSpace>,
    /// The descriptors and maps all the logs hold, bounded.
    files: Arc<Files>,
    errors: Mutex<Vec<String>>,
    /// The high watermarks in `replication-offset-checkpoint`, by log name, as read on
    /// open or last written. Held while the file is written.
    high_watermarks: Mutex<BTreeMap<String, i64>>,
    /// The partitions moving into another log directory, by log name.
    moves: Mutex<BTreeMap<String, Arc<LogMove>>>,
    /// Kafka's `replica.alter.log.dirs.io.max.bytes.per.second` (0: unlimited).
    move_rate: AtomicU64,
    /// Tests: how much longer, in microseconds, each log [`LogManager::open_log`] opens
    /// (not already open) takes, as on a slow disk.
    #[cfg(test)]
    open_delay_us: AtomicU64,
}

/// Owns a data directory: takes its lock, opens the partition logs in it, and runs the
/// maintenance thread. Cheap to clone. Closing (or dropping the last clone) stops and
/// joins the thread and closes every log.
///
/// ```
/// use tidelog::LogConfig;
/// use tidelog::storage::LogManager;
///
/// let dir = tempfile::tempdir()?;
/// let manager = LogManager::open(dir.path())?;
/// let log = manager.open_log("events-0", LogConfig::default())?;
/// assert_eq!(log.log_end_offset(), 0);
/// // A second manager on the same directory is refused.
/// assert!(LogManager::open(dir.path()).is_err());
/// manager.close()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct LogManager {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for LogManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogManager")
            .field("dir", &self.inner.dir)
            .finish()
    }
}

/// The error for a move of the log `name` that is not open.
fn not_open(name: &str) -> Error {
    Error::InvalidConfig {
        key: "log name".into(),
        reason: format!("{name} is not open: only an open log is moved"),
    }
}

fn check_name(name: &str) -> Result<()> {
    let bad = name.is_empty()
        || name == "."
        || name == ".."
        || name.starts_with('.')
        || name.contains(['/', '\\', '\0']);
    if bad {
        return Err(Error::InvalidConfig {
            key: "log name".into(),
            reason: format!("{name:?} is not a plain directory name"),
        });
    }
    Ok(())
}

impl LogManager {
    /// Opens (creating if needed) the data directory `dir` and locks it for this process.
    /// A directory already locked gives [`Error::DirectoryLocked`].
    pub fn open(dir: impl AsRef<Path>) -> Result<LogManager> {
        Self::open_with_limits(dir, StorageLimits::default())
    }

    /// [`LogManager::open`] with the limits of what its logs hold open at once
    /// (descriptors, mapped segments), however many logs it opens.
    pub fn open_with_limits(dir: impl AsRef<Path>, limits: StorageLimits) -> Result<LogManager> {
        Self::open_with_dirs(dir, &[], limits)
    }

    /// [`LogManager::open_with_limits`] over several log directories (Kafka's
    /// `log.dirs`, JBOD): `dir` holds the metadata files and partitions like any other,
    /// `extra` are more directories for partitions (each created if missing and
    /// locked). Partitions already on disk are found in whichever directory holds them
    /// (one found in two is an error naming both paths); a new one goes to the usable
    /// directory holding the fewest. An extra directory that cannot be created, locked
    /// or listed is failed at once: its partitions are offline (a storage error), the
    /// others serve.
    ///
    /// ```
    /// use tidelog::LogConfig;
    /// use tidelog::storage::{LogManager, StorageLimits};
    ///
    /// let (a, b) = (tempfile::tempdir()?, tempfile::tempdir()?);
    /// let extra = [b.path().to_path_buf()];
    /// let m = LogManager::open_with_dirs(a.path(), &extra, StorageLimits::default())?;
    /// m.open_log("t-0", LogConfig::default())?;
    /// m.open_log("t-1", LogConfig::default())?;
    /// assert!(a.path().join("t-0").is_dir() && b.path().join("t-1").is_dir());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn open_with_dirs(
        dir: impl AsRef<Path>,
        extra: &[PathBuf],
        limits: StorageLimits,
    ) -> Result<LogManager> {
        let dir = dir.as_ref().to_path_buf();
        check_distinct(&dir, extra)?;
        fs::create_dir_all(&dir).ctx("create data directory", &dir)?;
        let lock = lock_dir(&dir)?;
        let mut health = vec![Arc::new(DirHealth::new(dir.clone()))];
        let mut locks = Vec::new();
        for d in extra {
            let h = Arc::new(DirHealth::new(d.clone()));
            let locked = fs::create_dir_all(d)
                .ctx("create log directory", d)
                .and_then(|()| lock_dir(d));
            match locked {
                Ok(l) => locks.push(l),
                Err(e @ Error::DirectoryLocked(_)) => return Err(e),
                Err(e) => {
                    h.fail(&e.to_string());
                }
            }
            health.push(h);
        }
        Self::assemble(dir, (Some(lock), locks), health, limits)
    }

    /// Opens the data directory `dir` read-only, while another process may hold it and
    /// write it: takes no lock, writes no byte (no recovery repair, no checkpoint, no
    /// maintenance), and its logs follow that writer's appends, rolls and retention (a
    /// thread looks at the logs someone waits on every 10 ms; a read at the end looks
    /// at once). Every change is refused with [`Error::ReadOnly`]. Works on a directory
    /// this process cannot write (a read-only copy or mount). The directory must exist.
    pub fn open_read_only(dir: impl AsRef<Path>) -> Result<LogManager> {
        Self::open_read_only_with_limits(dir, StorageLimits::default())
    }

    /// [`LogManager::open_read_only`] with the limits of what its logs hold open.
    pub fn open_read_only_with_limits(
        dir: impl AsRef<Path>,
        limits: StorageLimits,
    ) -> Result<LogManager> {
        Self::open_read_only_with_dirs(dir, &[], limits)
    }

    /// [`LogManager::open_read_only_with_limits`] over several log directories (see
    /// [`LogManager::open_with_dirs`]); an extra directory missing is failed.
    pub fn open_read_only_with_dirs(
        dir: impl AsRef<Path>,
        extra: &[PathBuf],
        limits: StorageLimits,
    ) -> Result<LogManager> {
        let dir = dir.as_ref().to_path_buf();
        check_distinct(&dir, extra)?;
        if !dir.is_dir() {
            return Err(Error::io(
                "open data directory",
                &dir,
                std::io::Error::from(std::io::ErrorKind::NotFound),
            ));
        }
        let mut health = vec![Arc::new(DirHealth::new(dir.clone()))];
        for d in extra {
            let h = Arc::new(DirHealth::new(d.clone()));
            if !d.is_dir() {
                h.fail(&format!("{} is not a directory", d.display()));
            }
            health.push(h);
        }
        let manager = Self::assemble(dir, (None, Vec::new()), health, limits)?;
        let (tx, rx) = bounded::<()>(1);
        let weak = Arc::downgrade(&manager.inner);
        let handle = std::thread::Builder::new()
            .name("tidelog-follow".into())
            .spawn(move || follow_loop(&weak, &rx))
            .map_err(|e| Error::io("start the follower thread for", manager.dir(), e))?;
        *manager.inner.background.lock() = Some((tx, handle));
        Ok(manager)
    }

    /// A manager of `dir` and the log directories `dirs` (`dir` first) holding `locks`
    /// (None: read-only).
    fn assemble(
        dir: PathBuf,
        (lock, dir_locks): (Option<File>, Vec<File>),
        dirs: Vec<Arc<DirHealth>>,
        limits: StorageLimits,
    ) -> Result<LogManager> {
        let placement = scan_dirs(&dirs, lock.is_none())?;
        let mut errors = Vec::new();
        let high_watermarks = match read_high_watermarks(&dir) {
            Ok(hws) => hws,
            Err(e) if e.is_corruption() => {
                // Nothing is known: replicated logs start with no record exposed above
                // their log start until the cluster moves their high watermark.
                errors.push(format!("{e}; the recorded high watermarks are ignored"));
                BTreeMap::new()
            }
            Err(e) => return Err(e),
        };
        let (prefaulter, prefault_thread) =
            Prefaulter::start().map_err(|e| Error::io("start the prefault thread for", &dir, e))?;
        let read_only = lock.is_none();
        Ok(LogManager {
            inner: Arc::new(Inner {
                dir,
                _lock: lock,
                dirs,
                _dir_locks: dir_locks,
                placement: Mutex::new(placement),
                read_only,
                prefaulter,
                prefault_thread: Mutex::new(prefault_thread),
                clock: CoarseClock::default(),
                space: Arc::default(),
                files: Files::new(limits, !read_only),
                logs: Mutex::new(BTreeMap::new()),
                background: Mutex::new(None),
                errors: Mutex::new(errors),
                high_watermarks: Mutex::new(high_watermarks),
                moves: Mutex::new(BTreeMap::new()),
                move_rate: AtomicU64::new(0),
                #[cfg(test)]
                open_delay_us: AtomicU64::new(0),
            }),
        })
    }

    /// True if the directory was opened read-only ([`LogManager::open_read_only`]).
    pub fn is_read_only(&self) -> bool {
        self.inner.read_only
    }

    fn check_writable(&self) -> Result<()> {
        if self.inner.read_only {
            return Err(Error::ReadOnly(self.inner.dir.clone()));
        }
        Ok(())
    }

    /// The data directory.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// Descriptors the logs hold open now (at most [`StorageLimits::open_files`];
    /// `sendfile`s in flight hold theirs besides).
    pub fn open_files(&self) -> usize {
        self.inner.files.fds.len()
    }

    /// Sealed segments counted as mapped now (at most
    /// [`StorageLimits::mapped_segments`]; active segments being written are mapped
    /// besides).
    pub fn mapped_segments(&self) -> usize {
        self.inner.files.maps.len()
    }

    /// The maintenance clock (tests check that it ticks).
    #[cfg(test)]
    pub(crate) fn clock(&self) -> &CoarseClock {
        &self.inner.clock
    }

    /// What the prefault thread did so far (`crate::metrics`).
    pub(crate) fn prefault_stats(&self) -> crate::metrics::PrefaultMetrics {
        self.inner.prefaulter.stats()
    }

    /// The prefault thread's submit handle (tests wait for it to go idle).
    #[cfg(test)]
    pub(crate) fn prefaulter(&self) -> &Prefaulter {
        &self.inner.prefaulter
    }

    /// Tests: every log [`LogManager::open_log`] opens from now on (not already open)
    /// takes `each` longer, as on a slow disk.
    #[cfg(all(test, feature = "server"))]
    pub(crate) fn slow_opens(&self, each: Duration) {
        let us = u64::try_from(each.as_micros()).unwrap_or(u64::MAX);
        self.inner.open_delay_us.store(us, Ordering::Relaxed);
    }

    /// Opens the log `dir/<name>` (creating it if needed, recovering it otherwise), or
    /// returns it if it is already open (with `config` applied).
    pub fn open_log(&self, name: &str, config: LogConfig) -> Result<PartitionLog> {
        check_name(name)?;
        let mut logs = self.inner.logs.lock();
        if let Some(log) = logs.get(name) {
            log.set_config(config)?;
            return Ok(log.clone());
        }
        let at = self.place(name)?;
        let health = &self.inner.dirs[at];
        health.check(name)?;
        let env = LogEnv {
            prefault: Some(self.inner.prefaulter.clone()),
            clock: Some(self.inner.clock.clone()),
            space: Arc::clone(&self.inner.space),
            files: Arc::clone(&self.inner.files),
            dir_health: Some(Arc::clone(health)),
        };
        let path = health.path().join(name);
        #[cfg(test)]
        std::thread::sleep(Duration::from_micros(
            self.inner.open_delay_us.load(Ordering::Relaxed),
        ));
        let log = if self.inner.read_only {
            PartitionLog::open_read_only(&path, name, config, env)
        } else {
            PartitionLog::open_with(&path, name, config, env)
        };
        let log = match log {
            Ok(log) => log,
            Err(e) => {
                if at > 0 && matches!(e, Error::Io { .. }) && !super::events::is_out_of_space(&e) {
                    // An extra directory that fails under a log: offline, as Kafka.
                    health.fail(&format!("{name}: {e}"));
                }
                return Err(e);
            }
        };
        if split_log_name(name).is_some() {
            self.inner.placement.lock().insert(name.to_string(), at);
        }
        logs.insert(name.to_string(), log.clone());
        Ok(log)
    }

    /// Which log directory holds (or will hold) the log `name`: the one it was found
    /// in, else the main one for a name that is not `<topic>-<partition>` (metadata),
    /// else the usable directory holding the fewest partitions.
    fn place(&self, name: &str) -> Result<usize> {
        let placement = self.inner.placement.lock();
        if let Some(&at) = placement.get(name) {
            return Ok(at);
        }
        if self.inner.dirs.len() == 1 || split_log_name(name).is_none() {
            return Ok(0);
        }
        let mut counts = vec![0usize; self.inner.dirs.len()];
        for &at in placement.values() {
            counts[at] += 1;
        }
        least_loaded(&self.inner.dirs, &counts).ok_or_else(|| {
            Error::io(
                "create log directory",
                self.inner.dir.join(name),
                std::io::Error::other("every log directory is offline"),
            )
        })
    }

    /// The log directories, the data directory first (Kafka's `log.dirs`).
    pub fn log_dirs(&self) -> Vec<PathBuf> {
        self.inner
            .dirs
            .iter()
            .map(|d| d.path().to_path_buf())
            .collect()
    }

    /// Each log directory with why it failed (None: usable), the data directory first.
    pub fn log_dir_states(&self) -> Vec<(PathBuf, Option<String>)> {
        super::dirs::states(&self.inner.dirs)
    }

    /// The health of every log directory, the data directory first: what
    /// [`LogManager::log_dir_states`] reads, for a holder that must not wait on whoever
    /// holds the manager while logs open.
    pub(crate) fn dir_health(&self) -> Vec<Arc<DirHealth>> {
        self.inner.dirs.clone()
    }

    /// The path of the log `name`: where it is on disk, or where [`LogManager::open_log`]
    /// would create it now.
    pub fn log_path(&self, name: &str) -> PathBuf {
        let at = self.place(name).unwrap_or(0);
        self.inner.dirs[at].path().join(name)
    }

    /// The log directory holding the log `name`, if it was found on disk or opened.
    pub fn log_dir_of(&self, name: &str) -> Option<PathBuf> {
        let at = *self.inner.placement.lock().get(name)?;
        Some(self.inner.dirs[at].path().to_path_buf())
    }

    /// The index of the log directory `dir` (compared canonicalized, as DescribeLogDirs
    /// shows them).
    fn dir_index(&self, dir: &Path) -> Option<usize> {
        let want = fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
        self.inner
            .dirs
            .iter()
            .position(|d| d.path() == dir || fs::canonicalize(d.path()).is_ok_and(|p| p == want))
    }

    /// True if `dir` is one of the log directories.
    pub fn is_log_dir(&self, dir: &Path) -> bool {
        self.dir_index(dir).is_some()
    }

    /// Moves the open log `name` into the log directory `target` (Kafka's
    /// AlterReplicaLogDirs) and returns it reopened there; `reopen` is the log's
    /// configuration. The files are first copied into
    /// `<target>/<name>.<uuid>-future` while the log serves; then the log is closed
    /// (appends and reads of the old handle get [`Error::Closed`]: the caller swaps in
    /// the returned one), what changed since is copied, the old directory is renamed
    /// `<name>.<uuid>-delete`, the future one renamed into place, and the old one
    /// deleted. Each step is fsynced; a crash at any point leaves either the old copy or
    /// the new one in place when the manager opens again (see `scan_dirs`). A log
    /// already in `target` is left alone; a background move of it in progress is
    /// cancelled. The same steps run in the background through
    /// `begin_move`, `LogMove::copy_online` and `finish_move`.
    pub fn move_log(&self, name: &str, target: &Path, reopen: LogConfig) -> Result<PartitionLog> {
        // A background move of the log in progress gives way to this one.
        self.cancel_move(name);
        let Some(m) = self.begin_move(name, target)? else {
            return self.get(name).ok_or_else(|| not_open(name));
        };
        if let Err(e) = m.copy_online(&self.inner.move_rate) {
            self.abandon_move(&m);
            return Err(e);
        }
        self.finish_move(&m, reopen)
    }

    /// Starts moving the open log `name` into the log directory `target`: registers the
    /// move (its future replica, see [`LogManager::future_logs`]) and returns it for
    /// `LogMove::copy_online` and then [`LogManager::finish_move`] (or `abandon_move`).
    /// None when there is nothing to start: the log is in `target` already (a move
    /// elsewhere in progress is cancelled), or a move into `target` is in progress. A
    /// move into another directory in progress is cancelled and replaced.
    pub(crate) fn begin_move(&self, name: &str, target: &Path) -> Result<Option<Arc<LogMove>>> {
        self.check_writable()?;
        check_name(name)?;
        let to = self.dir_index(target).ok_or_else(|| Error::InvalidConfig {
            key: "log.dirs".into(),
            reason: format!("{} is not one of the log directories", target.display()),
        })?;
        let log = self.get(name).ok_or_else(|| not_open(name))?;
        let from = self.place(name)?;
        let mut moves = self.inner.moves.lock();
        if let Some(m) = moves.get(name) {
            if m.to == to && !m.is_cancelled() {
                return Ok(None);
            }
            m.cancel();
            moves.remove(name);
        }
        if from == to {
            return Ok(None);
        }
        self.inner.dirs[from].check(name)?;
        self.inner.dirs[to].check(name)?;
        let m = Arc::new(LogMove::new(
            name,
            (from, to),
            (self.inner.dirs[from].path(), self.inner.dirs[to].path()),
            log,
        ));
        moves.insert(name.to_string(), Arc::clone(&m));
        Ok(Some(m))
    }

    /// Drops the move `m` (failed or cancelled): deletes its future directory.
    pub(crate) fn abandon_move(&self, m: &Arc<LogMove>) {
        m.cancel();
        let mut moves = self.inner.moves.lock();
        if moves.get(&m.name).is_some_and(|x| Arc::ptr_eq(x, m)) {
            moves.remove(&m.name);
        }
        drop(moves);
        let _ = fs::remove_dir_all(&m.future);
    }

    /// Cancels the move of the log `name`, if one is in progress (its copy stops, its
    /// future directory is deleted); true if there was one.
    pub(crate) fn cancel_move(&self, name: &str) -> bool {
        match self.inner.moves.lock().remove(name) {
            Some(m) => {
                m.cancel();
                true
            }
            None => false,
        }
    }

    /// Sets Kafka's `replica.alter.log.dirs.io.max.bytes.per.second`: the bytes per
    /// second moves between log directories copy at most (None: unlimited, the
    /// default). Applies to the moves in progress at once.
    pub fn set_log_dir_move_rate(&self, bytes_per_second: Option<u64>) {
        self.inner
            .move_rate
            .store(bytes_per_second.unwrap_or(0), Ordering::Relaxed);
    }

    /// The pace of moves between log directories, for `LogMove::copy_online`.
    pub(crate) fn move_rate(&self) -> &AtomicU64 {
        &self.inner.move_rate
    }

    /// The logs moving into another log directory now (Kafka's future replicas): where
    /// each goes, the bytes copied so far and how far the copy is behind.
    pub fn future_logs(&self) -> Vec<FutureLog> {
        let moves: Vec<Arc<LogMove>> = self.inner.moves.lock().values().cloned().collect();
        moves
            .into_iter()
            .map(|m| FutureLog {
                name: m.name.clone(),
                dir: self.inner.dirs[m.to].path().to_path_buf(),
                size: dir_bytes(&m.future).unwrap_or(0),
                offset_lag: m.offset_lag(),
            })
            .collect()
    }

    /// Ends the move `m` once its online copy is done: closes the log (appends and
    /// reads of the old handle get [`Error::Closed`]), copies what changed since,
    /// renames the old directory `<name>.<uuid>-delete` and the future one into place,
    /// reopens the log there with `reopen`, deletes the old directory. Refused (and the
    /// move abandoned) if it was cancelled or the log is no longer the one copied.
    pub(crate) fn finish_move(&self, m: &Arc<LogMove>, reopen: LogConfig) -> Result<PartitionLog> {
        let name = m.name.as_str();
        let (from, to) = (m.from, m.to);
        let mut logs = self.inner.logs.lock();
        let current = self
            .inner
            .moves
            .lock()
            .get(name)
            .is_some_and(|x| Arc::ptr_eq(x, m));
        let same_log = logs
            .get(name)
            .is_some_and(|l| l.dir() == m.log.dir() && !l.is_closed());
        if m.is_cancelled() || !current || !same_log {
            drop(logs);
            self.abandon_move(m);
            return Err(Error::Closed(format!(
                "the move of {name} was cancelled or its log replaced"
            )));
        }
        logs.remove(name);
        let (src, future, retired, dst) = (&m.src, &m.future, &m.retired, &m.dst);
        let swapped = (|| {
            m.log.close()?;
            sync_copy(src, future)?;
            super::checkpoint::sync_dir(self.inner.dirs[to].path())?;
            fs::rename(src, retired).ctx("retire", src)?;
            super::checkpoint::sync_dir(self.inner.dirs[from].path())?;
            fs::rename(future, dst).ctx("finish move", future)?;
            super::checkpoint::sync_dir(self.inner.dirs[to].path())
        })();
        if let Err(e) = swapped {
            // Put the old copy back if it was retired; the next open resolves the rest.
            if !src.exists() && retired.exists() && !dst.exists() {
                let _ = fs::rename(retired, src);
            }
            drop(logs);
            self.abandon_move(m);
            return Err(e);
        }
        self.inner.placement.lock().insert(name.to_string(), to);
        self.inner.moves.lock().remove(name);
        drop(logs);
        let moved = self.open_log(name, reopen)?;
        fs::remove_dir_all(retired).ctx("delete moved partition", retired)?;
        super::checkpoint::sync_dir(self.inner.dirs[from].path())?;
        Ok(moved)
    }

    /// Takes the log directory `dir` offline, as an I/O error in it does: its logs
    /// refuse appends and reads with a storage error, new logs go elsewhere. For an
    /// operator's tooling and tests (the way a disk is pulled).
    pub fn fail_log_dir(&self, dir: &Path, reason: &str) -> Result<()> {
        let d = self
            .inner
            .dirs
            .iter()
            .find(|d| d.path() == dir)
            .ok_or_else(|| Error::InvalidConfig {
                key: "log.dirs".into(),
                reason: format!("{} is not one of the log directories", dir.display()),
            })?;
        d.fail(reason);
        for log in self.logs() {
            if log.dir().parent() == Some(dir) {
                log.wake_all();
            }
        }
        Ok(())
    }

    /// The open log called `name`, if any.
    pub fn get(&self, name: &str) -> Option<PartitionLog> {
        self.inner.logs.lock().get(name).cloned()
    }

    /// Every open log, by name.
    pub fn logs(&self) -> Vec<PartitionLog> {
        self.inner.logs.lock().values().cloned().collect()
    }

    /// Names of the log directories present on disk (open or not).
    /// Every log directory counts (a failed one is skipped); a partition being moved
    /// in (`-future`) is not a log.
    pub fn names_on_disk(&self) -> Result<Vec<String>> {
        let mut names = Vec::new();
        for (at, d) in self.inner.dirs.iter().enumerate() {
            if at > 0 && d.failure().is_some() {
                continue;
            }
            for name in list_subdirs(d.path())? {
                if future_of(&name).is_none() && (at == 0 || split_log_name(&name).is_some()) {
                    names.push(name);
                }
            }
        }
        names.sort();
        names.dedup();
        Ok(names)
    }

    /// Moves the log directory `name`, which must not be open, out of the way, to
    /// `<data dir>/orphaned/<name>-<unix ms>`, and says how many bytes it holds: for a
    /// partition directory that belongs to no topic (a creation a crash or an older
    /// version left half done), which is neither kept where it would be taken for a log
    /// nor deleted.
    pub fn move_aside(&self, name: &str) -> Result<OrphanedLog> {
        self.check_writable()?;
        check_name(name)?;
        if self.inner.logs.lock().contains_key(name) {
            return Err(Error::InvalidConfig {
                key: "log name".into(),
                reason: format!("{name} is open: only a log that is not open is moved aside"),
            });
        }
        let from = self.log_path(name);
        let home = from.parent().unwrap_or(&self.inner.dir).to_path_buf();
        let bytes = dir_bytes(&from)?;
        let aside = home.join(ORPHANED_DIR);
        fs::create_dir_all(&aside).ctx("create", &aside)?;
        let mut ms = now_ms();
        let to = loop {
            let to = aside.join(format!("{name}-{ms}"));
            if !to.exists() {
                break to;
            }
            ms += 1;
        };
        fs::rename(&from, &to).ctx("move aside", &from)?;
        super::checkpoint::sync_dir(&aside)?;
        super::checkpoint::sync_dir(&home)?;
        self.inner.placement.lock().remove(name);
        let orphan = OrphanedLog {
            name: name.to_string(),
            moved_to: to,
            bytes,
        };
        super::events::orphan_moved(&orphan.to_string());
        Ok(orphan)
    }

    /// Closes the log `name` and deletes its directory (and its recorded high
    /// watermark, at once: a log created again under the name starts afresh).
    pub fn delete_log(&self, name: &str) -> Result<()> {
        self.check_writable()?;
        check_name(name)?;
        self.cancel_move(name);
        let log = self.inner.logs.lock().remove(name);
        match log {
            Some(log) => log.destroy()?,
            None => {
                let p = self.log_path(name);
                if p.exists() {
                    fs::remove_dir_all(&p).ctx("delete log directory", &p)?;
                    super::checkpoint::sync_dir(p.parent().unwrap_or(&self.inner.dir))?;
                }
            }
        }
        self.inner.placement.lock().remove(name);
        let mut hws = self.inner.high_watermarks.lock();
        if hws.remove(name).is_some() {
            write_high_watermarks(&self.inner.dir, &hws)?;
        }
        Ok(())
    }

    /// The high watermark `replication-offset-checkpoint` records for the log `name`
    /// (as read when the manager opened, or as last written): where the cluster layer
    /// starts a replicated log again (`PartitionLog::set_replicated`). None if the log
    /// was not replicated, or the file was missing or damaged (see
    /// [`LogManager::background_errors`]).
    pub fn recorded_high_watermark(&self, name: &str) -> Option<i64> {
        self.inner.high_watermarks.lock().get(name).copied()
    }

    /// Writes the high watermark of every open log in replicated mode to
    /// `replication-offset-checkpoint`, crash-safely, if one changed (entries of logs
    /// not open are kept). The maintenance thread calls it every flush check, and
    /// [`LogManager::close`] at the end. A replicated log whose name is not
    /// `<topic>-<partition>` cannot be recorded in Kafka's format: the others are
    /// written and [`Error::InvalidConfig`] names it.
    pub fn checkpoint_high_watermarks(&self) -> Result<()> {
        self.inner.checkpoint_high_watermarks()
    }

    /// Starts the maintenance thread: every `flush_check` it fsyncs segments sealed
    /// since a log's recovery point (and moves the point past them), writes the
    /// checkpoint of a log whose recovery point durable appends moved, and syncs logs
    /// whose `flush_ms` is due; every `retention_check` it applies retention and compaction.
    /// Calling it again restarts the thread with the new intervals.
    pub fn start_background(&self, flush_check: Duration, retention_check: Duration) {
        if self.inner.read_only {
            // Its background thread is the follower; nothing here is maintained.
            return;
        }
        self.stop_background();
        let (tx, rx) = bounded::<()>(1);
        let weak = Arc::downgrade(&self.inner);
        let clock = self.inner.clock.clone();
        let handle = std::thread::Builder::new()
            .name("tidelog-maintenance".into())
            .spawn(move || {
                maintenance(weak, rx, flush_check, retention_check, &clock);
                clock.stop();
            })
            .expect("spawning the maintenance thread");
        *self.inner.background.lock() = Some((tx, handle));
    }

    fn stop_background(&self) {
        stop(&self.inner);
    }

    /// Errors the maintenance thread met (newest last), e.g. a failed fsync.
    pub fn background_errors(&self) -> Vec<String> {
        self.inner.errors.lock().clone()
    }

    /// Stops the maintenance thread and closes every log (sealing, fsyncing and
    /// checkpointing each). Returns the first error met; the lock is released when the
    /// last clone is dropped.
    pub fn close(&self) -> Result<()> {
        for m in std::mem::take(&mut *self.inner.moves.lock()).into_values() {
            m.cancel();
        }
        self.stop_background();
        self.inner.prefault_thread.lock().stop();
        let logs: Vec<PartitionLog> = self.inner.logs.lock().values().cloned().collect();
        let mut first = None;
        for log in logs {
            if let Err(e) = log.close() {
                first.get_or_insert(e);
            }
        }
        if let Err(e) = self.inner.checkpoint_high_watermarks() {
            first.get_or_insert(e);
        }
        first.map_or(Ok(()), Err)
    }
}

impl Inner {
    fn checkpoint_high_watermarks(&self) -> Result<()> {
        if self.read_only {
            return Ok(());
        }
        let logs: Vec<PartitionLog> = self.logs.lock().values().cloned().collect();
        let mut hws = self.high_watermarks.lock();
        let mut next = hws.clone();
        let mut unnamed = Vec::new();
        for log in logs.iter().filter(|l| l.is_replicated()) {
            if split_log_name(log.name()).is_some() {
                next.insert(log.name().to_string(), log.high_watermark());
            } else {
                unnamed.push(log.name().to_string());
            }
        }
        if next != *hws {
            write_high_watermarks(&self.dir, &next)?;
            *hws = next;
        }
        if unnamed.is_empty() {
            Ok(())
        } else {
            Err(Error::InvalidConfig {
                key: "log name".into(),
                reason: format!(
                    "replicated logs {unnamed:?} are not named <topic>-<partition>: \
                     {HIGH_WATERMARK_FILE} cannot record their high watermarks"
                ),
            })
        }
    }
}

/// `(topic, partition)` of a log named `<topic>-<partition>` whose topic has no
/// whitespace (the text format separates fields by spaces).
pub(crate) fn split_log_name(name: &str) -> Option<(&str, i32)> {
    let (topic, partition) = name.rsplit_once('-')?;
    let valid = !topic.is_empty()
        && !topic.contains(char::is_whitespace)
        && !partition.is_empty()
        && partition.bytes().all(|b| b.is_ascii_digit());
    Some((topic, partition.parse().ok()?)).filter(|_| valid)
}

/// Reads `replication-offset-checkpoint`: empty if it does not exist.
fn read_high_watermarks(dir: &Path) -> Result<BTreeMap<String, i64>> {
    let path = dir.join(HIGH_WATERMARK_FILE);
    let mut hws = BTreeMap::new();
    for (at, f) in super::checkpoint::read_text(&path, 3)?.unwrap_or_default() {
        let bad = |why: String| Error::corrupt(path.display(), at, why);
        let partition: i32 = f[1]
            .parse()
            .ok()
            .filter(|p| *p >= 0)
            .ok_or_else(|| bad(format!("partition {:?} is not a partition number", f[1])))?;
        let hw: i64 = f[2]
            .parse()
            .ok()
            .filter(|o| *o >= 0)
            .ok_or_else(|| bad(format!("high watermark {:?} is not an offset", f[2])))?;
        let name = format!("{}-{partition}", f[0]);
        if hws.insert(name.clone(), hw).is_some() {
            return Err(bad(format!("{name} appears twice")));
        }
    }
    Ok(hws)
}

/// Writes `replication-offset-checkpoint` crash-safely.
fn write_high_watermarks(dir: &Path, hws: &BTreeMap<String, i64>) -> Result<()> {
    let lines: Vec<String> = hws
        .iter()
        .filter_map(|(name, hw)| {
            split_log_name(name).map(|(topic, partition)| format!("{topic} {partition} {hw}"))
        })
        .collect();
    super::checkpoint::write_text(&dir.join(HIGH_WATERMARK_FILE), &lines)
}

fn stop(inner: &Inner) {
    let bg = inner.background.lock().take();
    if let Some((tx, handle)) = bg {
        drop(tx);
        if handle.thread().id() != std::thread::current().id() {
            let _ = handle.join();
        }
        inner.clock.stop();
    }
}

/// The follower thread of a read-only manager: every 10 ms, catches up the logs that
/// someone waits on with what their writer appended (and wakes them).
fn follow_loop(weak: &Weak<Inner>, stop_rx: &Receiver<()>) {
    const TICK: Duration = Duration::from_millis(10);
    loop {
        match stop_rx.recv_timeout(TICK) {
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => {}
            _ => return,
        }
        let Some(inner) = weak.upgrade() else { return };
        let logs: Vec<PartitionLog> = inner.logs.lock().values().cloned().collect();
        for log in logs.iter().filter(|l| l.is_watched()) {
            if let Err(e) = log.refresh(false) {
                push_error(&inner, format!("{}: {e}", log.name()));
            }
        }
    }
}

fn maintenance(
    weak: Weak<Inner>,
    stop_rx: Receiver<()>,
    flush_check: Duration,
    retention_check: Duration,
    clock: &CoarseClock,
) {
    let tick = flush_check
        .min(retention_check)
        .max(Duration::from_millis(1));
    let mut next_retention = Instant::now() + retention_check;
    loop {
        clock.tick(now_ms(), tick);
        match stop_rx.recv_timeout(tick) {
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => {}
            _ => return,
        }
        clock.tick(now_ms(), tick);
        let Some(inner) = weak.upgrade() else { return };
        let logs: Vec<PartitionLog> = inner.logs.lock().values().cloned().collect();
        let retention_due = Instant::now() >= next_retention;
        if retention_due {
            next_retention = Instant::now() + retention_check;
        }
        for log in logs {
            // An fsync can take long: keep the clock within a tick of the time.
            clock.tick(now_ms(), tick);
            let mut result = log.flush_sealed().and_then(|()| log.flush_if_due());
            if retention_due && result.is_ok() {
                result = log
                    .apply_retention(now_ms())
                    .map(|o| cleaned(&log, &o))
                    .and_then(|()| log.remove_expired_producers(now_ms()).map(drop));
            }
            if let Err(e) = result
                && !matches!(e, Error::Closed(_))
            {
                push_error(&inner, format!("{}: {e}", log.name()));
            }
        }
        if let Err(e) = inner.checkpoint_high_watermarks() {
            push_error(&inner, e.to_string());
        }
    }
}

/// Keeps a background error for [`LogManager::background_errors`] (the newest ones).
fn push_error(inner: &Inner, error: String) {
    let mut errs = inner.errors.lock();
    if errs.len() == MAX_BACKGROUND_ERRORS {
        errs.remove(0);
    }
    errs.push(error);
}

impl Drop for Inner {
    fn drop(&mut self) {
        stop(self);
        self.prefault_thread.get_mut().stop();
        for log in self.logs.get_mut().values() {
            let _ = log.close();
        }
        // Best effort, as the closes above: `close` reports failures.
        let _ = self.checkpoint_high_watermarks();
    }
}

/// A retention pass over `log` did `outcome`; logs what it removed, if anything (at
/// info level through `tracing` with the `server` feature; nothing without it).
fn cleaned(log: &PartitionLog, outcome: &CleanupOutcome) {
    #[cfg(feature = "server")]
    {
        if outcome.segments_deleted > 0 {
            tracing::info!(
                partition = log.name(),
                segments = outcome.segments_deleted,
                log_start_offset = log.log_start_offset(),
                "segments deleted by retention"
            );
        }
        if outcome.segments_compacted > 0 {
            tracing::info!(
                partition = log.name(),
                segments = outcome.segments_compacted,
                records_removed = outcome.records_removed,
                "segments compacted"
            );
        }
    }
    #[cfg(not(feature = "server"))]
    let _ = (log, outcome);
}
