//! [`LogManager`]: a locked data directory, the logs open in it, the one maintenance
//! thread (flush by `flush_ms`, retention, compaction) for all of them, and the
//! high-watermark checkpoint of the replicated ones (`replication-offset-checkpoint`).

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

/// Name of the data directory's high-watermark checkpoint (Kafka's
/// `replication-offset-checkpoint`): one `topic partition high_watermark` line per
/// replicated log.
pub const HIGH_WATERMARK_FILE: &str = "replication-offset-checkpoint";

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
    /// The high watermarks in `replication-offset-checkpoint`, by log name, as read on
    /// open or last written. Held while the file is written.
    high_watermarks: Mutex<BTreeMap<String, i64>>,
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
        Ok(LogManager {
            inner: Arc::new(Inner {
                dir,
                _lock: lock,
                prefaulter,
                prefault_thread: Mutex::new(prefault_thread),
                clock: CoarseClock::default(),
                logs: Mutex::new(BTreeMap::new()),
                background: Mutex::new(None),
                errors: Mutex::new(errors),
                high_watermarks: Mutex::new(high_watermarks),
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

    /// What the prefault thread did so far (`crate::metrics`).
    pub(crate) fn prefault_stats(&self) -> crate::metrics::PrefaultMetrics {
        self.inner.prefaulter.stats()
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

    /// Closes the log `name` and deletes its directory (and its recorded high
    /// watermark, at once: a log created again under the name starts afresh).
    pub fn delete_log(&self, name: &str) -> Result<()> {
        check_name(name)?;
        let log = self.inner.logs.lock().remove(name);
        match log {
            Some(log) => log.destroy()?,
            None => {
                let p = self.inner.dir.join(name);
                if p.exists() {
                    fs::remove_dir_all(&p).ctx("delete log directory", &p)?;
                    super::checkpoint::sync_dir(&self.inner.dir)?;
                }
            }
        }
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
        if let Err(e) = self.inner.checkpoint_high_watermarks() {
            first.get_or_insert(e);
        }
        first.map_or(Ok(()), Err)
    }
}

impl Inner {
    fn checkpoint_high_watermarks(&self) -> Result<()> {
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
fn split_log_name(name: &str) -> Option<(&str, i32)> {
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
                    .map(|o| crate::metrics::events::cleaned(&log, &o));
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
