//! Opening and closing a [`PartitionLog`]: [`PartitionLog::open`] runs recovery's steps
//! (`recovery`) and assembles the log over the recovered segments (also the read-only
//! follower's, `follow`), completes an interrupted truncation and loads the leader
//! epochs and producers' state; [`PartitionLog::close`] seals, snapshots and syncs;
//! `destroy` deletes.

use super::{Assembly, Inner, LogEnv, PartitionLog, WriterState};
use crate::error::IoContext;
use crate::error::Result;
use crate::storage::checkpoint;
use crate::storage::config::LogConfig;
use crate::storage::events::{self, RateLimit};
use crate::storage::follow::FollowState;
use crate::storage::producer_state;
use crate::storage::recovery;
use crate::storage::scan;
use crate::storage::segment::Segment;
use crate::storage::signal::Watchers;
use crate::storage::txn_index;
use crate::storage::types::RecoveryReport;
use parking_lot::{Mutex, RwLock};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

impl PartitionLog {
    /// Opens (creating if needed) the log in `dir`, recovering it: segments below the
    /// recovery point are trusted, later ones validated batch by batch and cut at the
    /// first torn or corrupt batch. `name` (e.g. `events-0`) names the log in errors.
    pub fn open(dir: impl AsRef<Path>, name: &str, config: LogConfig) -> Result<PartitionLog> {
        Self::open_with(dir.as_ref(), name, config, LogEnv::default())
    }

    /// [`PartitionLog::open`] with what a [`LogManager`](crate::storage::LogManager) shares with its logs:
    /// reads the checkpoint, lists and recovers the segments (`recovery`), assembles the
    /// log, completes a truncation a crash interrupted and loads the leader-epoch cache.
    pub(crate) fn open_with(
        dir: &Path,
        name: &str,
        config: LogConfig,
        env: LogEnv,
    ) -> Result<PartitionLog> {
        let LogEnv {
            prefault,
            clock,
            space,
            files,
            dir_health,
        } = env;
        config.validate()?;
        let dir = dir.to_path_buf();
        let created = !dir.exists();
        fs::create_dir_all(&dir).ctx("create log directory", &dir)?;
        if created && let Some(parent) = dir.parent() {
            checkpoint::sync_dir(parent)?;
        }
        let mut report = RecoveryReport::default();
        let cp = recovery::read_checkpoint(&dir, &mut report);
        let listing = recovery::list_segments(&dir)?;
        let scans = recovery::recover_segments(
            &dir,
            &listing.bases,
            cp.recovery_point,
            &config,
            &mut report,
        )?;
        let (segments, active) = recovery::open_segments(
            &dir,
            scans,
            cp.log_start,
            &config,
            (prefault.clone(), &files),
        )?;
        let mut cut_files = listing.cut_files.clone();
        cut_files.extend(report.cuts.iter().filter_map(|c| {
            let name = c.sidecar.file_name()?.to_str()?;
            Some((c.sidecar.clone(), scan::parse_cut_name(name)?))
        }));
        for cut in &report.cuts {
            events::recovery_cut(name, &cut.to_string());
        }
        let log_end = active.shared().next_offset();
        let log_start = cp.log_start.clamp(segments[0].base_offset, log_end);
        let recovery_point = if report.checkpoint_damaged {
            0
        } else {
            cp.recovery_point.min(log_end)
        };
        let mut log = PartitionLog::assemble(
            Assembly {
                name,
                dir,
                config,
                env: LogEnv {
                    prefault,
                    clock,
                    space,
                    files,
                    dir_health,
                },
                segments,
                active: Some(active),
                read_only: false,
            },
            (log_start, log_end, recovery_point),
            cp.on_disk,
            cut_files,
        );
        report.truncation_completed = log.complete_interrupted_truncation()?;
        report.leader_epochs_rebuilt = log.load_epochs()?;
        let snapshots = match report.truncation_completed {
            // The truncation removed the snapshots past its cut.
            Some(_) => producer_state::list_snapshots(&log.inner.dir)?,
            None => listing.snapshots,
        };
        (
            report.producer_snapshots_removed,
            report.producer_batches_replayed,
        ) = log.load_producers_on_open(&snapshots)?;
        if let Some(inner) = Arc::get_mut(&mut log.inner) {
            // Open holds the only reference to the new log.
            inner.report = report;
        }
        if !log.inner.report.is_clean() {
            // Make the repair durable before anything is appended on top of it.
            log.sync()?;
        }
        Ok(log)
    }

    /// A log over recovered (or, read-only, followed) segments.
    pub(super) fn assemble(
        a: Assembly<'_>,
        (log_start, log_end, recovery_point): (i64, i64, i64),
        checkpoint_on_disk: Option<[u8; 16]>,
        cut_files: Vec<(PathBuf, i64)>,
    ) -> PartitionLog {
        let config = Arc::new(a.config);
        PartitionLog {
            inner: Arc::new(Inner {
                name: a.name.to_string(),
                dir: a.dir,
                config: RwLock::new(Arc::clone(&config)),
                clock: a.env.clock,
                segments: RwLock::new(Arc::new(a.segments)),
                writer: Mutex::new(WriterState {
                    active: a.active,
                    config,
                    unflushed_records: 0,
                    unflushed_since: None,
                    scratch: Vec::new(),
                    replicated: false,
                    leader_epoch: None,
                    latest_epoch: None,
                    producers: None,
                }),
                sync_lock: Mutex::new(()),
                group: Default::default(),
                hw_lock: Mutex::new(()),
                log_start: AtomicI64::new(log_start),
                log_end: AtomicI64::new(log_end),
                high_watermark: AtomicI64::new(log_end),
                recovery_point: AtomicI64::new(recovery_point),
                replicated: AtomicBool::new(false),
                standalone: AtomicBool::new(true),
                closed: AtomicBool::new(false),
                poisoned: AtomicBool::new(false),
                poison_reason: Mutex::new(None),
                watchers: Watchers::default(),
                txns: Mutex::new(Default::default()),
                epochs: RwLock::new(None),
                prefault: a.env.prefault,
                space: a.env.space,
                files: a.env.files,
                dir_health: a.env.dir_health,
                corrupt_reads: RateLimit::default(),
                cut_files: Mutex::new(cut_files),
                report: RecoveryReport::default(),
                checkpoint_on_disk: Mutex::new(checkpoint_on_disk),
                read_only: a.read_only,
                follow: Mutex::new(FollowState::default()),
                stats: Default::default(),
                retention_holds: Mutex::new(Default::default()),
                #[cfg(test)]
                step_hook: Mutex::new(None),
            }),
        }
    }

    /// Seals the active segment, snapshots the producers' state (if loaded), fsyncs
    /// everything and writes the checkpoint; later appends fail with
    /// [`Error::Closed`](crate::Error::Closed). Readers' slices stay valid. Idempotent.
    pub fn close(&self) -> Result<()> {
        if self.inner.read_only {
            // Nothing to seal, sync or checkpoint: this process never wrote the log.
            if !self.inner.closed.swap(true, Ordering::AcqRel) {
                self.wake_all();
            }
            return Ok(());
        }
        let mut w = self.inner.writer.lock();
        if self.inner.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        let snapshot = match &w.producers {
            Some(p) if !self.inner.poisoned.load(Ordering::Acquire) => {
                // The snapshot covers the active segment's aborted transactions: their
                // index is on disk first.
                let active = w.active.as_ref().map(|a| a.shared().base_offset);
                active
                    .map_or(Ok(()), |base| txn_index::sync(&self.inner.dir, base))
                    .and_then(|()| {
                        producer_state::write_snapshot(&self.inner.dir, self.log_end_offset(), p)
                    })
            }
            _ => Ok(()),
        };
        let sealed = w.active.take().map(|a| a.seal()).transpose();
        drop(w);
        self.wake_all();
        snapshot?;
        let sealed = sealed?;
        if let Some(s) = sealed {
            let mut segs = self.inner.segments.write();
            let mut list: Vec<Arc<Segment>> = segs.iter().cloned().collect();
            if let Some(last) = list.last_mut() {
                *last = s;
            }
            *segs = Arc::new(list);
        }
        if self.inner.poisoned.load(Ordering::Acquire) {
            return Ok(());
        }
        self.sync()
    }

    /// Deletes the log's files and directory (the log must be closed or unused).
    pub(crate) fn destroy(&self) -> Result<()> {
        self.close()?;
        for s in self.segments().iter() {
            s.detach();
        }
        fs::remove_dir_all(&self.inner.dir).ctx("delete log directory", &self.inner.dir)?;
        if let Some(parent) = self.inner.dir.parent() {
            checkpoint::sync_dir(parent)?;
        }
        Ok(())
    }
}
