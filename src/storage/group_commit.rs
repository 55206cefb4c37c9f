//! Group commit: concurrent requests to make a log durable share fsyncs.
//!
//! A caller asks for the log to be durable up to an offset (exclusive) it appended
//! below, after releasing every append lock. At most one sync runs at a time (its
//! *leader*); it covers everything appended before it read the log end. A caller whose
//! offset is already durable returns at once; one whose offset the running sync covers
//! waits for it; the others queue and, once it is done, one of them leads the next sync,
//! which covers all of them (at most two fsyncs' wait for anyone).
//!
//! Waiting for the running sync alone would split steady senders into two cohorts that
//! alternate (the previous leader is back with its next record before the senders it
//! woke are), so each fsync would cover half of them. A leader therefore first waits,
//! briefly, for as many callers as the previous sync covered to queue (what PostgreSQL's
//! `commit_delay` and MySQL's `binlog_group_commit_sync_delay` do, with the delay and the
//! count taken from the previous sync rather than configured): at most the previous
//! sync's duration, and not at all while one caller syncs alone.

use crate::{Error, Result};
use parking_lot::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Longest a leader waits for its group to queue, whatever the last fsync took.
const MAX_GATHER: Duration = Duration::from_millis(2);

/// The group-commit state of one log (see the module's documentation).
#[derive(Default)]
pub(super) struct GroupCommit {
    state: Mutex<State>,
    /// A sync finished (or its leader read the end it covers).
    done: Condvar,
    /// A caller queued while a leader gathers its group.
    queued: Condvar,
}

#[derive(Default)]
struct State {
    /// A leader is gathering its group or syncing.
    leading: bool,
    /// The end (exclusive) the running sync covers, once its leader read it.
    in_flight: Option<i64>,
    /// Callers waiting that the running sync does not cover (the next group so far).
    queued: u32,
    /// How many callers the last sync covered: the group the next leader waits for.
    last_group: u32,
    /// How long the last sync took.
    last_sync: Duration,
}

/// What the log gives a sync request.
pub(super) trait Durable {
    /// The offset (exclusive) up to which the log is durable.
    fn durable_end(&self) -> i64;
    /// The error to give while the log may not be synced (poisoned by a failed fsync):
    /// a later fsync could report success for pages the failed one dropped.
    fn refuse(&self) -> Option<Error>;
    /// Runs `sync` with the log's sync lock held and the current log end; `sync` makes
    /// the log durable up to that end and moves the durable end.
    fn lead(&self, sync: &mut dyn FnMut(i64) -> Result<()>) -> Result<()>;
    /// Fsyncs everything appended up to `end` (called by `lead`'s closure).
    fn sync_up_to(&self, end: i64) -> Result<()>;
    /// The log end now (to tell a truncated offset from a pending one).
    fn log_end(&self) -> i64;
    /// The error for `target` when the log was truncated below it before it was synced.
    fn truncated(&self, target: i64) -> Error;
}

impl GroupCommit {
    /// Returns once `log` is durable up to `target` (exclusive), leading a sync or
    /// waiting for one as the module's documentation says.
    pub(super) fn sync_to(&self, log: &dyn Durable, target: i64) -> Result<()> {
        if log.durable_end() >= target {
            return Ok(());
        }
        let mut st = self.state.lock();
        let mut counted = false;
        loop {
            if log.durable_end() >= target {
                return Ok(());
            }
            if let Some(e) = log.refuse() {
                return Err(e);
            }
            if !st.leading {
                if !counted {
                    st.queued += 1;
                }
                return self.lead(st, log, target);
            }
            let covered = st.in_flight.is_some_and(|end| end >= target);
            if !covered && !counted {
                st.queued += 1;
                counted = true;
                self.queued.notify_one();
            }
            self.done.wait(&mut st);
        }
    }

    /// Leads one sync: gathers the group, syncs up to the log end, wakes every waiter.
    fn lead(&self, mut st: MutexGuard<'_, State>, log: &dyn Durable, target: i64) -> Result<()> {
        st.leading = true;
        st.in_flight = None;
        let want = st.last_group;
        if want > st.queued {
            let deadline = Instant::now() + st.last_sync.min(MAX_GATHER);
            while st.queued < want && !self.queued.wait_until(&mut st, deadline).timed_out() {}
        }
        let started = Instant::now();
        let mut group = 0;
        let mut covered = i64::MIN;
        let result = log.lead(&mut |end| {
            // Every caller queued so far appended before this read of the log end.
            st.in_flight = Some(end);
            group = std::mem::take(&mut st.queued);
            covered = end;
            MutexGuard::unlocked(&mut st, || log.sync_up_to(end))
        });
        st.leading = false;
        st.in_flight = None;
        st.last_group = group.max(1);
        st.last_sync = started.elapsed();
        self.done.notify_all();
        drop(st);
        result?;
        if covered < target && log.log_end() < target {
            return Err(log.truncated(target));
        }
        if log.durable_end() >= target {
            return Ok(());
        }
        // The log end this sync read was below `target`: impossible for an offset the
        // caller saw appended, unless the log was truncated and appended to again.
        self.sync_to(log, target)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};

    /// A log whose "fsync" sleeps and counts.
    #[derive(Default)]
    struct FakeLog {
        end: AtomicI64,
        durable: AtomicI64,
        syncs: AtomicU64,
        fail: AtomicBool,
        poisoned: AtomicBool,
        lock: Mutex<()>,
    }

    impl Durable for FakeLog {
        fn durable_end(&self) -> i64 {
            self.durable.load(Ordering::Acquire)
        }
        fn refuse(&self) -> Option<Error> {
            self.poisoned
                .load(Ordering::Acquire)
                .then(|| Error::Closed("poisoned".into()))
        }
        fn lead(&self, sync: &mut dyn FnMut(i64) -> Result<()>) -> Result<()> {
            let _l = self.lock.lock();
            sync(self.end.load(Ordering::Acquire))
        }
        fn sync_up_to(&self, end: i64) -> Result<()> {
            self.syncs.fetch_add(1, Ordering::Relaxed);
            std::thread::sleep(Duration::from_micros(300));
            if self.fail.load(Ordering::Acquire) {
                self.poisoned.store(true, Ordering::Release);
                return Err(Error::Timeout("fsync failed".into()));
            }
            self.durable.fetch_max(end, Ordering::AcqRel);
            Ok(())
        }
        fn log_end(&self) -> i64 {
            self.end.load(Ordering::Acquire)
        }
        fn truncated(&self, target: i64) -> Error {
            Error::Timeout(format!("truncated below {target}"))
        }
    }

    impl FakeLog {
        fn append(&self) -> i64 {
            self.end.fetch_add(1, Ordering::AcqRel) + 1
        }
    }

    #[test]
    fn concurrent_callers_share_fsyncs_and_all_end_durable() {
        let log = Arc::new(FakeLog::default());
        let group = Arc::new(GroupCommit::default());
        let threads = 8;
        let per_thread = 50;
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let (log, group) = (Arc::clone(&log), Arc::clone(&group));
                std::thread::spawn(move || {
                    for _ in 0..per_thread {
                        let target = log.append();
                        group.sync_to(&*log, target).unwrap();
                        assert!(log.durable_end() >= target, "acknowledged before durable");
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        let records = (threads * per_thread) as u64;
        let syncs = log.syncs.load(Ordering::Relaxed);
        assert_eq!(log.durable_end(), records as i64);
        assert!(
            syncs < records / 2,
            "{syncs} fsyncs for {records} records from {threads} threads"
        );
    }

    #[test]
    fn a_covered_offset_returns_without_a_sync() {
        let log = FakeLog::default();
        let group = GroupCommit::default();
        let first = log.append();
        log.append();
        group.sync_to(&log, first).unwrap();
        assert_eq!(log.syncs.load(Ordering::Relaxed), 1);
        assert_eq!(log.durable_end(), 2, "the sync covered the log end");
        group.sync_to(&log, 2).unwrap();
        assert_eq!(log.syncs.load(Ordering::Relaxed), 1, "already durable");
    }

    #[test]
    fn a_failed_sync_fails_its_waiters_and_every_later_caller() {
        let log = Arc::new(FakeLog::default());
        let group = Arc::new(GroupCommit::default());
        log.fail.store(true, Ordering::Release);
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let (log, group) = (Arc::clone(&log), Arc::clone(&group));
                std::thread::spawn(move || {
                    let target = log.append();
                    group.sync_to(&*log, target)
                })
            })
            .collect();
        for h in handles {
            assert!(h.join().unwrap().is_err(), "no caller hears success");
        }
        log.fail.store(false, Ordering::Release);
        let target = log.append();
        assert!(
            group.sync_to(&*log, target).is_err(),
            "poisoned stays refused"
        );
        assert_eq!(log.durable_end(), 0);
    }

    #[test]
    fn a_truncated_offset_is_an_error_not_a_hang() {
        let log = FakeLog::default();
        let group = GroupCommit::default();
        log.append();
        let target = log.append();
        log.end.store(1, Ordering::Release);
        match group.sync_to(&log, target) {
            Err(Error::Timeout(m)) => assert_eq!(m, "truncated below 2"),
            other => panic!("expected the truncation error, got {other:?}"),
        }
        assert_eq!(log.durable_end(), 1);
    }
}
