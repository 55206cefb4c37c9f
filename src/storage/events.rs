//! What the storage layer tells an operator while it runs: a read that met damaged bytes,
//! a full disk (once when the episode starts, once when writes succeed again), and what
//! recovery cut from a log on open.
//!
//! Each is also returned to the caller (an error, a `RecoveryReport`); the events are for
//! the log of a server, so they go through `tracing` when the `server` feature is on (the
//! only build that sets up a subscriber, `tidelog serve`) and are dropped otherwise.
//! Repeats are rate-limited here, per partition for damaged reads and per data
//! directory for a full disk, so that a client retrying a fetch of a damaged batch, or
//! a thousand partitions failing their appends at once, log one line.

use crate::error::Error;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

/// How often a partition logs damaged reads (the first one, then one per minute).
const CORRUPT_READ_EVERY_MS: i64 = 60_000;

/// One log line per `every_ms` at most.
#[derive(Debug)]
pub(crate) struct RateLimit {
    /// When the last line was allowed (ms since the epoch), `i64::MIN` before the first.
    last: AtomicI64,
}

impl Default for RateLimit {
    fn default() -> Self {
        RateLimit {
            last: AtomicI64::new(i64::MIN),
        }
    }
}

impl RateLimit {
    /// True if a line may be logged at `now_ms`: the first time, and once `every_ms`
    /// passed since the last one allowed.
    pub(crate) fn allow(&self, now_ms: i64, every_ms: i64) -> bool {
        let last = self.last.load(Ordering::Relaxed);
        if last != i64::MIN && now_ms.saturating_sub(last) < every_ms {
            return false;
        }
        self.last
            .compare_exchange(last, now_ms, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    }
}

/// Whether the disk under a data directory is full: set by the first append that
/// cannot reserve space, cleared by the first reservation that succeeds after it.
/// Shared by every log of a `LogManager` (one episode per data directory).
#[derive(Debug, Default)]
pub(crate) struct DiskSpace {
    full: AtomicBool,
}

impl DiskSpace {
    /// An append of `log` failed with `e` for lack of space: logs the start of an
    /// episode (once).
    pub(crate) fn ran_out(&self, log: &str, e: &Error) {
        if !self.full.swap(true, Ordering::AcqRel) {
            emit_disk_full(log, e);
        }
    }

    /// Space was reserved for an append to `file`: logs the end of an episode, if one
    /// ran.
    #[inline]
    pub(crate) fn reserved(&self, file: &Path) {
        if self.full.load(Ordering::Relaxed) && self.full.swap(false, Ordering::AcqRel) {
            emit_disk_space_back(file);
        }
    }

    /// True during an episode (tests).
    #[cfg(test)]
    pub(crate) fn is_full(&self) -> bool {
        self.full.load(Ordering::Acquire)
    }
}

/// True if `e` says the file system has no room left (ENOSPC, EDQUOT).
pub(crate) fn is_out_of_space(e: &Error) -> bool {
    matches!(e, Error::Io { source, .. }
        if matches!(source.kind(), std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded))
}

/// A read of `log` met damaged bytes (`e`); logged at most once a minute per log.
pub(crate) fn corrupt_read(limit: &RateLimit, log: &str, e: &Error) {
    if limit.allow(super::clock::now_ms(), CORRUPT_READ_EVERY_MS) {
        emit_corrupt_read(log, e);
    }
}

#[cfg(feature = "server")]
fn emit_corrupt_read(log: &str, e: &Error) {
    tracing::error!(
        partition = log,
        "damaged data in a log, reads of it fail: {e}"
    );
}

#[cfg(not(feature = "server"))]
fn emit_corrupt_read(_log: &str, _e: &Error) {}

#[cfg(feature = "server")]
fn emit_disk_full(log: &str, e: &Error) {
    tracing::error!(
        partition = log,
        "disk full: appends fail until space is freed (earlier data stays readable): {e}"
    );
}

#[cfg(not(feature = "server"))]
fn emit_disk_full(_log: &str, _e: &Error) {}

#[cfg(feature = "server")]
fn emit_disk_space_back(file: &Path) {
    tracing::warn!(
        "disk space is available again: appends succeed (space reserved for {})",
        file.display()
    );
}

#[cfg(not(feature = "server"))]
fn emit_disk_space_back(_file: &Path) {}

/// A log directory that belonged to nothing was moved aside: `line` says which, its size
/// and where it went.
#[cfg(feature = "server")]
pub(crate) fn orphan_moved(line: &str) {
    tracing::warn!("{line}");
}

/// A log directory that belonged to nothing was moved aside (logged with the `server`
/// feature).
#[cfg(not(feature = "server"))]
pub(crate) fn orphan_moved(_line: &str) {}

/// A log directory failed: its partitions are offline.
#[cfg(feature = "server")]
pub(crate) fn log_dir_failed(dir: &Path, reason: &str) {
    tracing::error!(log_dir = %dir.display(), "log directory failed, its partitions are offline: {reason}");
}

/// A log directory failed (logged with the `server` feature).
#[cfg(not(feature = "server"))]
pub(crate) fn log_dir_failed(_dir: &Path, _reason: &str) {}

/// Recovery of `log` removed data: `line` says what and where it went.
#[cfg(feature = "server")]
pub(crate) fn recovery_cut(log: &str, line: &str) {
    tracing::warn!(partition = log, "recovery removed data: {line}");
}

/// Recovery of `log` removed data (logged with the `server` feature).
#[cfg(not(feature = "server"))]
pub(crate) fn recovery_cut(_log: &str, _line: &str) {}

/// A partition that may be in a failed log directory is kept offline at open.
#[cfg(feature = "server")]
pub(crate) fn partition_offline(log: &str, why: &str) {
    tracing::warn!(partition = log, "partition offline: {why}");
}

/// A partition kept offline at open (logged with the `server` feature).
#[cfg(not(feature = "server"))]
pub(crate) fn partition_offline(_log: &str, _why: &str) {}

/// A move of `log` between log directories failed or was cancelled: it stays put.
#[cfg(feature = "server")]
pub(crate) fn move_abandoned(log: &str, why: &str) {
    tracing::warn!(
        partition = log,
        "move between log directories abandoned: {why}"
    );
}

/// A move abandoned (logged with the `server` feature).
#[cfg(not(feature = "server"))]
pub(crate) fn move_abandoned(_log: &str, _why: &str) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rate_limit_allows_the_first_line_then_one_per_period() {
        let limit = RateLimit::default();
        assert!(limit.allow(1_000, 60_000));
        assert!(!limit.allow(1_001, 60_000));
        assert!(!limit.allow(60_999, 60_000));
        assert!(limit.allow(61_000, 60_000));
    }

    #[test]
    fn a_disk_full_episode_starts_once_and_ends_once() {
        let space = DiskSpace::default();
        let e = Error::io(
            "reserve disk space for",
            "x",
            std::io::Error::from(std::io::ErrorKind::StorageFull),
        );
        assert!(is_out_of_space(&e));
        space.ran_out("t-0", &e);
        space.ran_out("t-1", &e);
        assert!(space.is_full());
        space.reserved(Path::new("t-0/00000000000000000000.log"));
        assert!(!space.is_full());
    }
}
