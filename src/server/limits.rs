//! Limits that hold across connections: memory for requests in flight, and file
//! descriptors.
//!
//! **Request memory** (Kafka's `queued.max.request.bytes`). Once a connection has read a
//! request's size prefix it reserves that many bytes from [`RequestMemory`] before it
//! reads the body, and gives them back when the request has been handled. While the
//! reservations add up to the limit, further connections wait before reading their next
//! request (their bytes stay in the kernel's socket buffers). A connection that holds a
//! reservation only needs its own client's bytes to finish, so reservations never wait
//! on each other; a request larger than the whole limit is refused like one above
//! `max_request_size`, rather than waiting forever. The body buffer itself grows with the
//! bytes received (see `codec::read_body`), so memory used is at most what is reserved.
//!
//! **Descriptors.** A connection costs one descriptor. [`Descriptors`] reads the
//! process's soft open-files limit at start and keeps a reserve of it for the broker's
//! own files (segments of new partitions and rolls, checkpoints): the connection limit is
//! lowered (with a warning) to what fits, and each accepted socket whose descriptor
//! number reaches into the reserve is refused. Descriptors are allocated lowest-free
//! first, so a socket numbered `n` means `n` descriptors below it are in use: the check
//! costs nothing per connection and also sees descriptors the broker opened since.

use std::time::Duration;

use parking_lot::{Condvar, Mutex};

/// Kafka's `queued.max.request.bytes` as tidelog defaults it: 500 MiB.
pub(crate) const DEFAULT_MAX_QUEUED_REQUEST_BYTES: usize = 500 * 1024 * 1024;

/// How often a connection waiting for request memory checks whether it should give up
/// (shutdown, or its client left).
const WAIT_SLICE: Duration = Duration::from_millis(200);

/// Bytes reserved by requests in flight, against a limit.
#[derive(Debug)]
pub(crate) struct RequestMemory {
    limit: usize,
    used: Mutex<usize>,
    freed: Condvar,
}

/// Bytes taken from a [`RequestMemory`], given back on drop.
#[derive(Debug)]
pub(crate) struct Reservation<'a> {
    pool: &'a RequestMemory,
    bytes: usize,
}

impl RequestMemory {
    /// A pool of `limit` bytes.
    pub(crate) fn new(limit: usize) -> RequestMemory {
        RequestMemory {
            limit,
            used: Mutex::new(0),
            freed: Condvar::new(),
        }
    }

    /// The limit in bytes.
    pub(crate) fn limit(&self) -> usize {
        self.limit
    }

    /// Bytes reserved right now.
    pub(crate) fn used(&self) -> usize {
        *self.used.lock()
    }

    /// Reserve `bytes` (at most the limit: larger requests are refused before this),
    /// waiting while the pool cannot hold them. Every 200 ms of waiting `give_up` is
    /// asked whether to stop; `None` if it said so.
    pub(crate) fn reserve(
        &self,
        bytes: usize,
        mut give_up: impl FnMut() -> bool,
    ) -> Option<Reservation<'_>> {
        let bytes = bytes.min(self.limit);
        let mut used = self.used.lock();
        while *used + bytes > self.limit {
            self.freed.wait_for(&mut used, WAIT_SLICE);
            if *used + bytes > self.limit && give_up() {
                return None;
            }
        }
        *used += bytes;
        Some(Reservation { pool: self, bytes })
    }

    /// Wake every waiter so that it asks its `give_up` again (shutdown).
    pub(crate) fn wake_all(&self) {
        let _used = self.used.lock();
        self.freed.notify_all();
    }
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        let mut used = self.pool.used.lock();
        *used -= self.bytes;
        self.pool.freed.notify_all();
    }
}

/// The process's open-files budget as the server sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Descriptors {
    /// The soft `RLIMIT_NOFILE`; `None` if unlimited.
    pub soft_limit: Option<u64>,
    /// Descriptors open when the server started.
    pub open_at_start: u64,
}

impl Descriptors {
    /// The limit and the descriptors in use now (`/proc/self/fd` where there is one,
    /// else the number of the lowest free descriptor, which `probe` holds).
    pub(crate) fn now(probe: &impl std::os::fd::AsRawFd) -> Descriptors {
        use rustix::process::{Resource, getrlimit};
        let soft_limit = getrlimit(Resource::Nofile).current;
        let open_at_start = match std::fs::read_dir("/proc/self/fd") {
            // The directory handle itself is one of the entries.
            Ok(dir) => (dir.count() as u64).saturating_sub(1),
            Err(_) => probe.as_raw_fd().max(0) as u64 + 1,
        };
        Descriptors {
            soft_limit,
            open_at_start,
        }
    }

    /// Descriptors kept for the broker's own files: a tenth of the limit, at least 32.
    pub(crate) fn reserve(&self) -> u64 {
        self.soft_limit.map_or(0, |l| (l / 10).max(32))
    }

    /// The lowest descriptor number a connection may not have: one at or above it
    /// would eat into the reserve. `None` if unlimited.
    pub(crate) fn ceiling(&self) -> Option<u64> {
        self.soft_limit.map(|l| l.saturating_sub(self.reserve()))
    }

    /// How many connections fit: the limit less what is open and the reserve (one
    /// descriptor per connection). `None` if unlimited.
    pub(crate) fn connections_that_fit(&self) -> Option<usize> {
        self.ceiling()
            .map(|c| usize::try_from(c.saturating_sub(self.open_at_start)).unwrap_or(usize::MAX))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    #[test]
    fn reservations_add_up_to_the_limit_and_come_back_on_drop() {
        let pool = RequestMemory::new(100);
        let a = pool.reserve(60, || true).unwrap();
        let b = pool.reserve(40, || true).unwrap();
        assert_eq!(pool.used(), 100);
        // Full: a caller that gives up at once gets nothing.
        assert!(pool.reserve(1, || true).is_none());
        drop(a);
        assert_eq!(pool.used(), 40);
        let c = pool.reserve(60, || true).unwrap();
        drop((b, c));
        assert_eq!(pool.used(), 0);
    }

    #[test]
    fn a_waiter_gets_its_bytes_when_another_request_finishes() {
        let pool = Arc::new(RequestMemory::new(100));
        let held = pool.reserve(80, || true).unwrap();
        let got = Arc::new(AtomicBool::new(false));
        let waiter = {
            let (pool, got) = (pool.clone(), got.clone());
            std::thread::spawn(move || {
                let r = pool.reserve(50, || false);
                got.store(r.is_some(), Ordering::SeqCst);
                pool.used()
            })
        };
        // The waiter cannot have its 50 bytes while 80 of 100 are held.
        std::thread::sleep(Duration::from_millis(50));
        assert!(!got.load(Ordering::SeqCst));
        drop(held);
        assert_eq!(waiter.join().unwrap(), 50);
        assert!(got.load(Ordering::SeqCst));
        assert_eq!(pool.used(), 0);
    }

    #[test]
    fn a_waiter_stops_when_told_to() {
        let pool = RequestMemory::new(10);
        let _held = pool.reserve(10, || true).unwrap();
        let mut asked = 0;
        let r = pool.reserve(5, || {
            asked += 1;
            asked == 2
        });
        assert!(r.is_none());
        assert_eq!(asked, 2);
        assert_eq!(pool.used(), 10);
    }

    #[test]
    fn the_descriptor_budget_keeps_a_reserve() {
        let d = Descriptors {
            soft_limit: Some(1024),
            open_at_start: 20,
        };
        assert_eq!(d.reserve(), 102);
        assert_eq!(d.ceiling(), Some(922));
        assert_eq!(d.connections_that_fit(), Some(902));
        let small = Descriptors {
            soft_limit: Some(100),
            open_at_start: 90,
        };
        assert_eq!(small.reserve(), 32);
        assert_eq!(small.connections_that_fit(), Some(0));
        let unlimited = Descriptors {
            soft_limit: None,
            open_at_start: 5,
        };
        assert_eq!(unlimited.connections_that_fit(), None);
        assert_eq!(unlimited.ceiling(), None);
    }

    #[test]
    fn the_current_budget_counts_open_descriptors() {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let d = Descriptors::now(&probe);
        // stdin, stdout, stderr and the probe at least.
        assert!(d.open_at_start >= 4, "{d:?}");
    }
}
