//! Rate-limited warnings about what a peer sent, so that a misbehaving or fuzzing client
//! cannot fill the disk with logs.
//!
//! For each peer IP address, the first event of a window of [`WINDOW`] (10 s) is logged;
//! the rest of that window only counts, and the count of the suppressed ones rides on
//! the next line logged for that address (or is logged on its own at shutdown, or when
//! the table is pruned). At most [`MAX_PEERS`] addresses are tracked; past that (after
//! dropping the windows that have ended), every other address shares one window, so a
//! client with many source addresses is limited too.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// One log line per peer address per window.
pub(crate) const WINDOW: Duration = Duration::from_secs(10);

/// Addresses tracked one by one.
const MAX_PEERS: usize = 4096;

/// The window of one address (or of every untracked one).
#[derive(Debug, Clone, Copy)]
struct Window {
    opened: Instant,
    suppressed: u64,
}

/// The rate limiter.
#[derive(Debug)]
pub(crate) struct PeerLog {
    window: Duration,
    /// `None` is the shared window of addresses past [`MAX_PEERS`].
    peers: Mutex<HashMap<Option<IpAddr>, Window>>,
}

impl Default for PeerLog {
    fn default() -> Self {
        PeerLog::new(WINDOW)
    }
}

impl PeerLog {
    /// A limiter with one line per address per `window`.
    pub(crate) fn new(window: Duration) -> PeerLog {
        PeerLog {
            window,
            peers: Mutex::new(HashMap::new()),
        }
    }

    /// Whether an event from `ip` at `now` is logged: `Some(n)` with the number of
    /// events from that address suppressed since its last line, or `None` to stay quiet.
    pub(crate) fn admit(&self, ip: IpAddr, now: Instant) -> Option<u64> {
        let mut peers = self.peers.lock();
        let mut key = Some(ip);
        if !peers.contains_key(&key) && peers.len() >= MAX_PEERS {
            for (addr, n) in Self::prune(&mut peers, now, self.window) {
                report_suppressed(addr, n);
            }
            if peers.len() >= MAX_PEERS {
                key = None;
            }
        }
        match peers.get_mut(&key) {
            Some(w) if now.saturating_duration_since(w.opened) < self.window => {
                w.suppressed += 1;
                None
            }
            Some(w) => {
                let suppressed = w.suppressed;
                *w = Window {
                    opened: now,
                    suppressed: 0,
                };
                Some(suppressed)
            }
            None => {
                peers.insert(
                    key,
                    Window {
                        opened: now,
                        suppressed: 0,
                    },
                );
                Some(0)
            }
        }
    }

    /// Forget every window, returning the counts still unreported (for shutdown).
    pub(crate) fn drain(&self) -> Vec<(Option<IpAddr>, u64)> {
        self.peers
            .lock()
            .drain()
            .filter(|(_, w)| w.suppressed > 0)
            .map(|(k, w)| (k, w.suppressed))
            .collect()
    }

    /// Drop the windows that have ended, returning their unreported counts.
    fn prune(
        peers: &mut HashMap<Option<IpAddr>, Window>,
        now: Instant,
        window: Duration,
    ) -> Vec<(Option<IpAddr>, u64)> {
        let mut ended = Vec::new();
        peers.retain(|k, w| {
            let keep = k.is_none() || now.saturating_duration_since(w.opened) < window;
            if !keep && w.suppressed > 0 {
                ended.push((*k, w.suppressed));
            }
            keep
        });
        ended
    }
}

/// Log the count of suppressed warnings that no later line will carry.
pub(crate) fn report_suppressed(addr: Option<IpAddr>, n: u64) {
    match addr {
        Some(ip) => {
            tracing::warn!(peer = %ip, suppressed = n, "{n} more warnings about this peer were suppressed")
        }
        None => tracing::warn!(
            suppressed = n,
            "{n} more warnings about other peers were suppressed"
        ),
    }
}

/// Log a warning about something `peer` did, rate-limited by `$log` (a [`PeerLog`]).
/// The message is a format string with its arguments.
macro_rules! peer_warn {
    ($log:expr, $peer:expr, $($msg:tt)+) => {{
        let peer: std::net::SocketAddr = $peer;
        if let Some(suppressed) = $log.admit(peer.ip(), std::time::Instant::now()) {
            if suppressed == 0 {
                tracing::warn!(%peer, $($msg)+);
            } else {
                tracing::warn!(%peer, suppressed, $($msg)+);
            }
        }
    }};
}
pub(crate) use peer_warn;

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(n: u8) -> IpAddr {
        IpAddr::from([10, 0, 0, n])
    }

    #[test]
    fn one_line_per_window_then_the_suppressed_count() {
        let log = PeerLog::new(Duration::from_secs(10));
        let t0 = Instant::now();
        assert_eq!(log.admit(ip(1), t0), Some(0));
        for i in 1..1000u64 {
            assert_eq!(log.admit(ip(1), t0 + Duration::from_millis(i)), None);
        }
        // Another address has its own window.
        assert_eq!(log.admit(ip(2), t0 + Duration::from_secs(1)), Some(0));
        // The window ends: the next line carries the 999 suppressed.
        assert_eq!(log.admit(ip(1), t0 + Duration::from_secs(10)), Some(999));
        assert_eq!(log.admit(ip(1), t0 + Duration::from_secs(11)), None);
        assert_eq!(log.drain(), vec![(Some(ip(1)), 1)]);
        assert!(log.drain().is_empty());
    }

    #[test]
    fn too_many_addresses_share_one_window() {
        let log = PeerLog::new(Duration::from_secs(10));
        let t0 = Instant::now();
        for i in 0..MAX_PEERS as u32 {
            let addr = IpAddr::from(i.to_be_bytes());
            assert_eq!(log.admit(addr, t0), Some(0));
        }
        let extra = |i: u32| IpAddr::from((0x8000_0000u32 + i).to_be_bytes());
        // The first untracked address opens the shared window; the others are quiet.
        assert_eq!(log.admit(extra(0), t0), Some(0));
        for i in 1..100 {
            assert_eq!(log.admit(extra(i), t0), None);
        }
        // Once the tracked windows have ended, they are pruned and an address gets its
        // own window again.
        let later = t0 + Duration::from_secs(10);
        assert_eq!(log.admit(extra(200), later), Some(0));
        assert_eq!(log.peers.lock().len(), 2);
    }
}
