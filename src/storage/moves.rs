//! A partition moving into another log directory of the same manager in the
//! background (Kafka's future replica of AlterReplicaLogDirs): its files are copied
//! into `<target>/<name>.<uuid>-future` while the log serves (paced by Kafka's
//! `replica.alter.log.dirs.io.max.bytes.per.second`), pass after pass until little is
//! left, then the manager swaps it in (see `LogManager::finish_move`).

use super::log::PartitionLog;
use crate::error::{Error, Result};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// A pass that copied fewer bytes than this ends the online copy: the rest is copied
/// while the log is closed for the swap.
const SMALL_TAIL: u64 = 1 << 20;

/// Online copy passes at most (a log appended faster than it is copied is swapped
/// after the last one, its tail copied while it is closed).
const MAX_PASSES: usize = 4;

/// One partition moving between log directories.
#[derive(Debug)]
pub(crate) struct LogMove {
    /// The log's name, `<topic>-<partition>`.
    pub(crate) name: String,
    /// Index of the log directory it leaves, and of the one it goes to.
    pub(crate) from: usize,
    pub(crate) to: usize,
    /// The log's directory now.
    pub(crate) src: PathBuf,
    /// `<target>/<name>.<uuid>-future`.
    pub(crate) future: PathBuf,
    /// `<source>/<name>.<uuid>-delete`, the old directory between the swap and its deletion.
    pub(crate) retired: PathBuf,
    /// `<target>/<name>`.
    pub(crate) dst: PathBuf,
    /// The log being copied (the serving one).
    pub(crate) log: PartitionLog,
    cancelled: AtomicBool,
    /// The end offset the copy holds so far (-1: no pass finished).
    copied_end: AtomicI64,
}

impl LogMove {
    pub(crate) fn new(
        name: &str,
        (from, to): (usize, usize),
        (source, target): (&Path, &Path),
        log: PartitionLog,
    ) -> LogMove {
        let hex: String = super::codec::random_uuid()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        LogMove {
            name: name.to_string(),
            from,
            to,
            src: source.join(name),
            future: target.join(format!("{name}.{hex}{}", super::dirs::FUTURE_SUFFIX)),
            retired: source.join(format!("{name}.{hex}{}", super::dirs::DELETE_SUFFIX)),
            dst: target.join(name),
            log,
            cancelled: AtomicBool::new(false),
            copied_end: AtomicI64::new(-1),
        }
    }

    /// Stops the copy at its next chunk; the move is then abandoned.
    pub(crate) fn cancel(&self) {
        self.cancelled.store(true, Ordering::Release);
    }

    pub(crate) fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::Acquire)
    }

    fn check(&self) -> Result<()> {
        if self.is_cancelled() {
            return Err(Error::Closed(format!(
                "the move of {} into {} was cancelled",
                self.name,
                self.dst.parent().unwrap_or(&self.dst).display()
            )));
        }
        Ok(())
    }

    /// How far the copy's end is below the log's end (Kafka's offset lag of a future
    /// replica): the whole log until a pass finished.
    pub(crate) fn offset_lag(&self) -> i64 {
        let end = self.log.log_end_offset();
        let copied = match self.copied_end.load(Ordering::Acquire) {
            -1 => self.log.log_start_offset(),
            c => c,
        };
        (end - copied).max(0)
    }

    /// Copies the log's files into the future directory while it serves, pass after
    /// pass (each copies what changed) until a pass copies little, paced by `rate`.
    pub(crate) fn copy_online(&self, rate: &AtomicU64) -> Result<()> {
        let mut pacer = Pacer::new(rate);
        for _ in 0..MAX_PASSES {
            let end = self.log.log_end_offset();
            let copied = super::dirs::sync_copy_paced(&self.src, &self.future, &mut |n| {
                pacer.wait(n, self)
            })?;
            self.copied_end.store(end, Ordering::Release);
            if copied < SMALL_TAIL {
                break;
            }
        }
        self.check()
    }
}

/// Paces a copy to at most `rate` bytes per second (0: unlimited), read again before
/// every chunk so a change applies at once.
struct Pacer<'a> {
    rate: &'a AtomicU64,
    seen: u64,
    since: Instant,
    bytes: u64,
}

impl<'a> Pacer<'a> {
    fn new(rate: &'a AtomicU64) -> Pacer<'a> {
        Pacer {
            rate,
            seen: rate.load(Ordering::Relaxed),
            since: Instant::now(),
            bytes: 0,
        }
    }

    /// Waits until `n` more bytes fit the rate (or the move is cancelled: its error).
    fn wait(&mut self, n: usize, m: &LogMove) -> Result<()> {
        let n = n as u64;
        loop {
            m.check()?;
            let rate = self.rate.load(Ordering::Relaxed);
            if rate != self.seen {
                self.seen = rate;
                self.since = Instant::now();
                self.bytes = 0;
            }
            if rate == 0 {
                break;
            }
            let due = Duration::from_secs_f64((self.bytes + n) as f64 / rate as f64);
            let elapsed = self.since.elapsed();
            if elapsed >= due {
                break;
            }
            std::thread::sleep((due - elapsed).min(Duration::from_millis(50)));
        }
        self.bytes += n;
        Ok(())
    }
}
