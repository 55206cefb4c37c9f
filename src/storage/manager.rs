//! [`LogManager`]: a locked data directory, the logs open in it, and the one
//! maintenance thread (flush by `flush_ms`, retention, compaction) for all of them.

use super::clock::CoarseClock;
use super::config::LogConfig;
use super::log::{PartitionLog, now_ms};
use super::prefault::{PrefaultThread, Prefaulter};
use crate::error::IoContext;
use crate::{Error, Result};
use crossbeam_channel::{Receiver, Sender, bounded};
use fs2::FileExt;
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Name of the lock file in a data directory.
pub const LOCK_FILE: &str = ".lock";

/// Errors from background passes kept for inspection (the newest ones).
const MAX_BACKGROUND_ERRORS: usize = 32;

struct Inner {
    dir: PathBuf,
    /// Holds the exclusive fs2 lock for as long as the manager lives.
    _lock: File,
    logs: Mutex<BTreeMap<String, PartitionLog>>,
    background: Mutex<Option<(Sender<()>, JoinHandle<()>)>>,
    /// Faults in the active segments' next pages (see `prefault`).
    prefaulter: Prefaulter,
    prefault_thread: Mutex<PrefaultThread>,
    /// Ticked by the maintenance thread; read by appends (see `clock`).
    clock: CoarseClock,
    errors: Mutex<Vec<String>>,
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
        let dir = dir.as_ref().to_path_buf();
        fs::create_dir_all(&dir).ctx("create data directory", &dir)?;
        let lock_path = dir.join(LOCK_FILE);
        let lock = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&lock_path)
            .ctx("open lock file", &lock_path)?;
        if lock.try_lock_exclusive().is_err() {
            return Err(Error::DirectoryLocked(dir));
        }
        let (prefaulter, prefault_thread) =
            Prefaulter::start().map_err(|e| Error::io("start the prefault thread for", &dir, e))?;
        Ok(LogManager {
            inner: Arc::new(Inner {
                dir,
                _lock: lock,
                prefaulter,
                prefault_thread: Mutex::new(prefault_thread),
                clock: CoarseClock::default(),
                logs: Mutex::new(BTreeMap::new()),
                background: Mutex::new(None),
                errors: Mutex::new(Vec::new()),
            }),
        })
    }

    /// The data directory.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// The maintenance clock (tests check that it ticks).
    #[cfg(test)]
    pub(crate) fn clock(&self) -> &CoarseClock {
        &self.inner.clock
    }

    /// The prefault thread's submit handle (tests wait for it to go idle).
    #[cfg(test)]
    pub(crate) fn prefaulter(&self) -> &Prefaulter {
        &self.inner.prefaulter
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
        let log = PartitionLog::open_with(
            &self.inner.dir.join(name),
            name,
            config,
            Some(self.inner.prefaulter.clone()),
            Some(self.inner.clock.clone()),
        )?;
        logs.insert(name.to_string(), log.clone());
        Ok(log)
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
    pub fn names_on_disk(&self) -> Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in fs::read_dir(&self.inner.dir).ctx("list data directory", &self.inner.dir)? {
            let entry = entry.ctx("list data directory", &self.inner.dir)?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if entry.path().is_dir() && check_name(&name).is_ok() {
                names.push(name);
            }
        }
        names.sort();
        Ok(names)
    }

    /// Closes the log `name` and deletes its directory.
    pub fn delete_log(&self, name: &str) -> Result<()> {
        check_name(name)?;
        let log = self.inner.logs.lock().remove(name);
        match log {
            Some(log) => log.destroy(),
            None => {
                let p = self.inner.dir.join(name);
                if p.exists() {
                    fs::remove_dir_all(&p).ctx("delete log directory", &p)?;
                    super::checkpoint::sync_dir(&self.inner.dir)?;
                }
                Ok(())
            }
        }
    }

    /// Starts the maintenance thread: every `flush_check` it fsyncs segments sealed
    /// since a log's recovery point (and moves the point past them) and logs whose
    /// `flush_ms` is due; every `retention_check` it applies retention and compaction.
    /// Calling it again restarts the thread with the new intervals.
    pub fn start_background(&self, flush_check: Duration, retention_check: Duration) {
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
        self.stop_background();
        self.inner.prefault_thread.lock().stop();
        let logs: Vec<PartitionLog> = self.inner.logs.lock().values().cloned().collect();
        let mut first = None;
        for log in logs {
            if let Err(e) = log.close() {
                first.get_or_insert(e);
            }
        }
        first.map_or(Ok(()), Err)
    }
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
                result = log.apply_retention(now_ms()).map(|_| ());
            }
            if let Err(e) = result
                && !matches!(e, Error::Closed(_))
            {
                let mut errs = inner.errors.lock();
                if errs.len() == MAX_BACKGROUND_ERRORS {
                    errs.remove(0);
                }
                errs.push(format!("{}: {e}", log.name()));
            }
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        stop(self);
        self.prefault_thread.get_mut().stop();
        for log in self.logs.get_mut().values() {
            let _ = log.close();
        }
    }
}
