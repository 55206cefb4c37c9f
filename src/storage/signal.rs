//! Wake-ups: how a reader blocked on a log learns that it moved.
//!
//! A [`Signal`] is one waiter's channel (a consumer's, a network long poll's, a thread in
//! `PartitionLog::wait_for`); [`Watchers`] is a log's list of the signals to notify. The
//! log notifies them in its publish step, so every append, whichever way it came (a
//! `Partition`, the `PartitionLog` itself, a replica fetcher), and every move of the high
//! watermark wakes the readers that wait for it. A signal registered for the log end is
//! woken by appends and high-watermark moves, one registered for the high watermark only
//! by the latter (in a log that is not replicated, an append moves both).

use super::types::ReadLimit;
use parking_lot::{Condvar, Mutex};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// A wakeup channel: a counter bumped by `notify` and a condition variable to wait for
/// it to move. One per waiter.
///
/// `notify` is one atomic add, plus a lock and a futex wake only when the waiter is
/// asleep; `wait_past` spins briefly before sleeping, so a consumer that keeps up with
/// its producer is woken in well under a microsecond, and an idle one costs no CPU.
/// (The counter and the sleeper count are both SeqCst: either the notifier sees the
/// sleeper and wakes it under the lock, or the sleeper sees the new count.)
#[derive(Debug, Default)]
pub(crate) struct Signal {
    seq: AtomicU64,
    sleepers: AtomicUsize,
    lock: Mutex<()>,
    cv: Condvar,
}

/// How long `wait_past` spins before sleeping on the condition variable.
const SPIN: Duration = Duration::from_micros(30);

impl Signal {
    /// The current count; pass it to [`Signal::wait_past`].
    pub(crate) fn current(&self) -> u64 {
        self.seq.load(Ordering::SeqCst)
    }

    /// Bumps the count and wakes the waiter.
    pub(crate) fn notify(&self) {
        if self.bump() {
            self.wake();
        }
    }

    /// Bumps the count; true if the waiter sleeps and needs [`Signal::wake`].
    fn bump(&self) -> bool {
        self.seq.fetch_add(1, Ordering::SeqCst);
        self.sleepers.load(Ordering::SeqCst) > 0
    }

    /// Wakes a waiter asleep on the condition variable.
    fn wake(&self) {
        // Taking the lock orders this wake-up after a waiter's check of the count (it
        // holds the lock from that check until it sleeps); the notify itself comes after
        // the lock is let go, so the woken waiter does not find it held (and contend for
        // it, spinning and yielding its core, on its way back).
        drop(self.lock.lock());
        self.cv.notify_all();
    }

    /// Waits until the count differs from `seen` or `deadline` passes. True if it moved.
    pub(crate) fn wait_past(&self, seen: u64, deadline: Instant) -> bool {
        self.wait_past_spinning(seen, deadline, SPIN)
    }

    /// [`Signal::wait_past`] without the spin: parks on the condition variable at once
    /// (the network server's long-polling Fetch).
    #[cfg(any(feature = "server", test))]
    pub(crate) fn wait_past_parked(&self, seen: u64, deadline: Instant) -> bool {
        self.wait_past_spinning(seen, deadline, Duration::ZERO)
    }

    fn wait_past_spinning(&self, seen: u64, deadline: Instant, spin: Duration) -> bool {
        let moved = || self.seq.load(Ordering::SeqCst) != seen;
        let spin_until = Instant::now() + spin;
        let mut spins = 0u32;
        while !moved() {
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            if now >= spin_until {
                break;
            }
            for _ in 0..32 {
                std::hint::spin_loop();
            }
            spins += 1;
            if spins.is_multiple_of(8) {
                std::thread::yield_now();
            }
        }
        if moved() {
            return true;
        }
        let mut g = self.lock.lock();
        self.sleepers.fetch_add(1, Ordering::SeqCst);
        while !moved() {
            if self.cv.wait_until(&mut g, deadline).timed_out() {
                break;
            }
        }
        self.sleepers.fetch_sub(1, Ordering::SeqCst);
        moved()
    }
}

/// What moved, for [`Watchers::notify`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Moved {
    /// The log end only (an append to a replicated log).
    LogEnd,
    /// The high watermark (with or without the log end), or the log closed: everyone.
    HighWatermark,
}

/// The signals a log notifies, each with the bound its waiter reads up to.
#[derive(Debug, Default)]
pub(crate) struct Watchers {
    /// `list.len()`, read without the lock by every publish.
    count: AtomicUsize,
    list: Mutex<Vec<(Arc<Signal>, ReadLimit)>>,
}

impl Watchers {
    /// Notifies `signal` from now on when what `limit` names moves.
    ///
    /// The count is stored, then a SeqCst fence: a waiter that registers, then reads the
    /// log's bound, either sees a publish that happened before or is seen (and notified)
    /// by it, never neither.
    pub(crate) fn add(&self, signal: &Arc<Signal>, limit: ReadLimit) {
        let mut list = self.list.lock();
        list.push((Arc::clone(signal), limit));
        self.count.store(list.len(), Ordering::SeqCst);
        drop(list);
        std::sync::atomic::fence(Ordering::SeqCst);
    }

    /// Stops notifying `signal` (one registration of it).
    pub(crate) fn remove(&self, signal: &Arc<Signal>) {
        let mut list = self.list.lock();
        if let Some(i) = list.iter().position(|(s, _)| Arc::ptr_eq(s, signal)) {
            list.swap_remove(i);
        }
        self.count.store(list.len(), Ordering::SeqCst);
    }

    /// Notifies the signals that wait for what moved. One load when nobody watches.
    #[inline]
    pub(crate) fn notify(&self, moved: Moved) {
        if self.count.load(Ordering::SeqCst) > 0 {
            self.notify_slow(moved);
        }
    }

    /// Bumps the signals under the list's lock and wakes the sleeping ones after
    /// releasing it. A woken network Fetch removes its registration as soon as it has
    /// read: had the wake-up been made under the lock, the waker (often preempted by the
    /// thread it wakes, on a busy machine) would still hold it, and the Fetch would spin
    /// and `sched_yield` for it on its way to answer, a yield that can give the core
    /// away for a whole time slice.
    #[cold]
    fn notify_slow(&self, moved: Moved) {
        let mut asleep = Vec::new();
        for (s, limit) in self.list.lock().iter() {
            if (moved == Moved::HighWatermark || *limit == ReadLimit::LogEnd) && s.bump() {
                asleep.push(Arc::clone(s));
            }
        }
        for s in asleep {
            s.wake();
        }
    }

    /// True if a signal is registered (a read-only log is followed only then).
    pub(crate) fn is_watched(&self) -> bool {
        self.count.load(Ordering::SeqCst) > 0
    }

    /// Number of registrations (tests check that waiters clean up after themselves).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.list.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signal_wakes_a_sleeping_waiter_and_never_loses_a_notify() {
        let s = Arc::new(Signal::default());
        // A notify between `current` and `wait_past` is not lost.
        let seen = s.current();
        s.notify();
        assert!(s.wait_past(seen, Instant::now() + Duration::from_secs(5)));
        // Nothing new: the wait times out.
        let seen = s.current();
        assert!(!s.wait_past(seen, Instant::now() + Duration::from_millis(5)));
        // A waiter past its spin phase is woken by a notify from another thread.
        let notifier = {
            let s = Arc::clone(&s);
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(20));
                s.notify();
            })
        };
        assert!(s.wait_past(seen, Instant::now() + Duration::from_secs(10)));
        notifier.join().expect("notifier");
    }

    #[test]
    fn a_parked_waiter_never_loses_a_notify() {
        let s = Arc::new(Signal::default());
        let seen = s.current();
        s.notify();
        assert!(s.wait_past_parked(seen, Instant::now() + Duration::from_secs(5)));
        let seen = s.current();
        assert!(!s.wait_past_parked(seen, Instant::now() + Duration::from_millis(5)));
        assert_eq!(s.current(), seen, "a timed-out wait moves nothing");
        // Notifies racing with the waiter going to sleep, 200 times: each is seen.
        for _ in 0..200 {
            let seen = s.current();
            let notifier = {
                let s = Arc::clone(&s);
                std::thread::spawn(move || s.notify())
            };
            assert!(s.wait_past_parked(seen, Instant::now() + Duration::from_secs(10)));
            notifier.join().expect("notifier");
        }
        assert_eq!(s.sleepers.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn a_notify_wakes_sleepers_after_releasing_the_list() {
        let w = Arc::new(Watchers::default());
        let s = Arc::new(Signal::default());
        w.add(&s, ReadLimit::LogEnd);
        // A sleeper, and the signal's own lock held here: the notifier's wake-up waits
        // for it, as a wake-up preempted by the thread it wakes does.
        s.sleepers.fetch_add(1, Ordering::SeqCst);
        let held = s.lock.lock();
        let notifier = {
            let w = Arc::clone(&w);
            std::thread::spawn(move || w.notify(Moved::LogEnd))
        };
        let start = Instant::now();
        while s.current() == 0 && start.elapsed() < Duration::from_secs(10) {
            std::thread::yield_now();
        }
        assert_eq!(s.current(), 1, "the notifier bumped the signal");
        // The woken waiter's next step is to take the list's lock (a Fetch removing its
        // registration): it is free while the wake-up is still under way.
        let mut free = false;
        while !free && start.elapsed() < Duration::from_secs(10) {
            free = w.list.try_lock().is_some();
            std::thread::yield_now();
        }
        assert!(free, "the list's lock is held through the wake-up");
        drop(held);
        notifier.join().expect("notifier");
        s.sleepers.fetch_sub(1, Ordering::SeqCst);
        w.remove(&s);
        assert_eq!(w.len(), 0);
    }

    #[test]
    fn log_end_watchers_hear_appends_high_watermark_watchers_only_commits() {
        let w = Watchers::default();
        let (hw, end) = (Arc::new(Signal::default()), Arc::new(Signal::default()));
        w.add(&hw, ReadLimit::HighWatermark);
        w.add(&end, ReadLimit::LogEnd);
        w.notify(Moved::LogEnd);
        assert_eq!((hw.current(), end.current()), (0, 1));
        w.notify(Moved::HighWatermark);
        assert_eq!((hw.current(), end.current()), (1, 2));
        w.remove(&hw);
        w.remove(&end);
        assert_eq!(w.len(), 0);
        w.notify(Moved::HighWatermark);
        assert_eq!(
            (hw.current(), end.current()),
            (1, 2),
            "removed: not notified"
        );
    }
}
