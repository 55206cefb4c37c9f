//! A background thread that faults in the pages a segment will be written to next, and
//! the pages a sequential reader of data from disk will read next.
//!
//! The first store into a fresh page of a file mapping costs a page fault and the
//! kernel zeroing the page; on this class of machine (a VM whose host backs guest pages
//! lazily) that is the largest cost of an append. Each active segment keeps one step of
//! disk space reserved ahead of its write position; when it reserves the next step it
//! hands the range to this thread, which faults it in (MADV_POPULATE_WRITE) while the
//! appending thread keeps copying into pages faulted earlier. Without a prefaulter (a
//! `PartitionLog` opened alone) the range is faulted in by the appending thread.
//!
//! Reads of bytes that were on disk when the segment was opened fault too (the page
//! cache holds them, but this process has not mapped them): about a quarter of the time
//! of a consumer catching up from offset 0. A reader that continues where its last read
//! ended has the next megabytes mapped here (MADV_POPULATE_READ) while it decodes the
//! ones before; see `Segment::read_ahead`.
//!
//! Batches of 64 KiB and more skip all this: they are written with `pwritev`, which
//! fills fresh page-cache pages by copying instead of zeroing them first (see
//! `segment::BULK_APPEND_MIN`), and nothing is faulted in ahead of them.
//!
//! The thread holds an `Arc` of each map it works on, so a segment deleted meanwhile is
//! still mapped; it stops and is joined when its [`PrefaultThread`] is stopped or dropped.

use super::mmap::AppendMap;
use crossbeam_channel::{Receiver, Sender, TrySendError, bounded};
use std::sync::Arc;
use std::thread::JoinHandle;

struct Job {
    map: Arc<AppendMap>,
    start: usize,
    end: usize,
    write: bool,
    /// Signalled once the job is done (tests wait on it).
    done: Option<Sender<()>>,
}

/// Handle to submit ranges to the prefault thread. Cheap to clone.
#[derive(Clone)]
pub(crate) struct Prefaulter {
    tx: Sender<Job>,
    /// What the thread did (`crate::metrics`).
    stats: Arc<crate::metrics::PrefaultStats>,
    /// Write ranges accepted so far (tests check who asks for them).
    #[cfg(test)]
    write_jobs: Arc<std::sync::atomic::AtomicUsize>,
}

/// Owns the prefault thread.
pub(crate) struct PrefaultThread {
    stop: Option<Sender<()>>,
    handle: Option<JoinHandle<()>>,
}

impl Prefaulter {
    /// Starts the thread; returns the submit handle and the owner that stops it.
    pub(crate) fn start() -> std::io::Result<(Prefaulter, PrefaultThread)> {
        // A few segments' worth of pending steps; more waiting means the thread is
        // behind, and the appender then faults the pages itself.
        let (tx, rx) = bounded::<Job>(64);
        let (stop_tx, stop_rx) = bounded::<()>(1);
        let stats = Arc::<crate::metrics::PrefaultStats>::default();
        let counted = Arc::clone(&stats);
        let handle = std::thread::Builder::new()
            .name("tidelog-prefault".into())
            .spawn(move || run(rx, stop_rx, &counted))?;
        Ok((
            Prefaulter {
                tx,
                stats,
                #[cfg(test)]
                write_jobs: Arc::default(),
            },
            PrefaultThread {
                stop: Some(stop_tx),
                handle: Some(handle),
            },
        ))
    }

    /// Asks for `[start, end)` of `map` to be faulted in (the file space behind it must be
    /// reserved). Returns false when the thread is busy or gone: the caller then does it.
    pub(crate) fn submit(&self, map: &Arc<AppendMap>, start: usize, end: usize) -> bool {
        self.send(map, start, end, true)
    }

    /// Asks for the readable bytes `[start, end)` of `map` to be mapped for reading.
    /// Returns false when the thread is busy or gone: the reader then faults them.
    pub(crate) fn submit_read(&self, map: &Arc<AppendMap>, start: usize, end: usize) -> bool {
        self.send(map, start, end, false)
    }

    /// What the thread did so far.
    pub(crate) fn stats(&self) -> crate::metrics::PrefaultMetrics {
        self.stats.snapshot()
    }

    /// Waits until every range submitted before the call has been faulted in.
    #[cfg(test)]
    pub(crate) fn wait_idle(&self) {
        let (tx, rx) = bounded(1);
        let f = tempfile::tempfile().unwrap();
        let (map, _w) = AppendMap::map_rw(&f, 1, 0).unwrap();
        self.tx
            .send(Job {
                map,
                start: 0,
                end: 0,
                write: false,
                done: Some(tx),
            })
            .unwrap();
        rx.recv().unwrap();
    }

    /// Write ranges accepted so far.
    #[cfg(test)]
    pub(crate) fn write_jobs(&self) -> usize {
        self.write_jobs.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn send(&self, map: &Arc<AppendMap>, start: usize, end: usize, write: bool) -> bool {
        match self.tx.try_send(Job {
            map: Arc::clone(map),
            start,
            end,
            write,
            done: None,
        }) {
            Ok(()) => {
                #[cfg(test)]
                if write {
                    self.write_jobs
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                true
            }
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                self.stats.refused();
                false
            }
        }
    }
}

fn run(rx: Receiver<Job>, stop: Receiver<()>, stats: &crate::metrics::PrefaultStats) {
    loop {
        crossbeam_channel::select! {
            recv(rx) -> job => match job {
                Ok(job) => {
                    let t = std::time::Instant::now();
                    if job.write {
                        job.map.populate_write(job.start, job.end);
                    } else {
                        job.map.populate_read(job.start, job.end);
                    }
                    let bytes = job.end.saturating_sub(job.start) as u64;
                    stats.done(job.write, bytes, t.elapsed());
                    if let Some(done) = job.done {
                        let _ = done.send(());
                    }
                }
                Err(_) => return,
            },
            recv(stop) -> _ => return,
        }
    }
}

impl PrefaultThread {
    /// Stops the thread and joins it; pending ranges are dropped (appenders fault
    /// their pages themselves).
    pub(crate) fn stop(&mut self) {
        self.stop.take();
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

impl Drop for PrefaultThread {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_in_submitted_ranges_and_stops() {
        let f = tempfile::tempfile().unwrap();
        f.set_len(1 << 20).unwrap();
        let (map, _w) = AppendMap::map_rw(&f, 1 << 20, 0).unwrap();
        let (p, mut t) = Prefaulter::start().unwrap();
        assert!(p.submit(&map, 0, 1 << 20));
        t.stop();
        // After the thread is gone submissions are refused and the caller falls back.
        let mut refused = false;
        for _ in 0..100 {
            if !p.submit(&map, 0, 4096) {
                refused = true;
                break;
            }
        }
        assert!(refused);
    }
}
