//! The network server's counters: connections, requests per API with their latency, and
//! the Kafka error codes of responses.
//!
//! A connection thread holds a [`ConnectionStats`] for its life and a [`RequestTimer`]
//! per request (from the request read to its response written). The error codes of a
//! response are counted one by one with [`count_error`] (the server knows which codes
//! each response type carries: its table of APIs): each reaches the connection's server
//! through a thread-local set by [`ConnectionStats`], so the handlers need no extra
//! argument.

use std::cell::RefCell;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use super::counters::Histogram;
use super::{ErrorMetrics, HistogramSnapshot, RequestMetrics, ServerMetrics};

/// Bytes written to sockets by `sendfile(2)` since the process started (the server's
/// sendfile path adds to it).
pub(crate) static SENDFILE_BYTES: AtomicU64 = AtomicU64::new(0);

pub(crate) use crate::error::api_name;

/// API keys counted one by one (Kafka's keys are below 100).
const API_SLOTS: usize = 128;
/// Error codes counted one by one: -1 to 254 (Kafka's go to about 130).
const ERROR_SLOTS: usize = 256;

/// One server's counters. Shared by its connection threads; registered with the broker
/// (`BrokerStats::attach_server`) so that `Broker::metrics` sees it.
#[derive(Debug)]
pub(crate) struct ServerStats {
    open: AtomicU64,
    accepted: AtomicU64,
    refused: AtomicU64,
    /// Request latency by API key.
    requests: Box<[Histogram]>,
    /// Responses by error code (index = code + 1).
    errors: Box<[AtomicU64]>,
}

impl Default for ServerStats {
    fn default() -> Self {
        ServerStats {
            open: AtomicU64::new(0),
            accepted: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            requests: (0..API_SLOTS).map(|_| Histogram::default()).collect(),
            errors: (0..ERROR_SLOTS).map(|_| AtomicU64::new(0)).collect(),
        }
    }
}

thread_local! {
    /// The server of the connection this thread serves, while it serves it.
    static CURRENT: RefCell<Option<Arc<ServerStats>>> = const { RefCell::new(None) };
}

impl ServerStats {
    /// A connection from `peer` starts being served on this thread: counted until the
    /// returned value is dropped.
    pub(crate) fn connection(self: &Arc<Self>, peer: SocketAddr) -> ConnectionStats {
        self.accepted.fetch_add(1, Ordering::Relaxed);
        self.open.fetch_add(1, Ordering::Relaxed);
        CURRENT.with(|c| *c.borrow_mut() = Some(Arc::clone(self)));
        ConnectionStats {
            stats: Arc::clone(self),
            peer,
            client_id: None,
            requests: 0,
        }
    }

    /// A connection was refused.
    pub(crate) fn refused(&self) {
        self.refused.fetch_add(1, Ordering::Relaxed);
    }

    fn error(&self, code: i16) {
        if code == 0 {
            return;
        }
        if let Some(slot) = usize::try_from(i32::from(code) + 1)
            .ok()
            .and_then(|i| self.errors.get(i))
        {
            slot.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The counters of `servers` added up; None for no server.
    pub(crate) fn sum(servers: &[Arc<ServerStats>]) -> Option<ServerMetrics> {
        if servers.is_empty() {
            return None;
        }
        let mut m = ServerMetrics {
            sendfile_bytes: SENDFILE_BYTES.load(Ordering::Relaxed),
            ..ServerMetrics::default()
        };
        for key in 0..API_SLOTS {
            let mut latency = HistogramSnapshot::empty();
            for s in servers {
                s.requests[key].add_to(&mut latency);
            }
            if latency.count > 0 {
                let api_key = key as i16;
                m.requests.push(RequestMetrics {
                    api: api_name(api_key),
                    api_key,
                    latency,
                });
            }
        }
        for slot in 0..ERROR_SLOTS {
            let count: u64 = servers
                .iter()
                .map(|s| s.errors[slot].load(Ordering::Relaxed))
                .sum();
            if count > 0 {
                let code = slot as i16 - 1;
                m.errors.push(ErrorMetrics {
                    code,
                    name: crate::error::error_name(code),
                    count,
                });
            }
        }
        for s in servers {
            m.connections_open += s.open.load(Ordering::Relaxed);
            m.connections_accepted += s.accepted.load(Ordering::Relaxed);
            m.connections_refused += s.refused.load(Ordering::Relaxed);
        }
        Some(m)
    }
}

/// One connection being served (see [`ServerStats::connection`]): logs the client at
/// debug level once its first request names it, and the close.
#[derive(Debug)]
pub(crate) struct ConnectionStats {
    stats: Arc<ServerStats>,
    peer: SocketAddr,
    client_id: Option<String>,
    requests: u64,
}

impl ConnectionStats {
    /// A request (`frame`: header and body, no size prefix) is about to be handled; its
    /// latency is recorded when the returned timer is dropped, after the response is
    /// written.
    pub(crate) fn request(&mut self, frame: &[u8]) -> RequestTimer {
        self.requests += 1;
        if self.client_id.is_none() {
            let id = client_id(frame).unwrap_or_default();
            tracing::debug!(peer = %self.peer, client_id = %id, "client connected");
            self.client_id = Some(id);
        }
        let api = frame
            .get(..2)
            .map(|k| i16::from_be_bytes([k[0], k[1]]))
            .and_then(|k| usize::try_from(k).ok())
            .filter(|&k| k < API_SLOTS);
        RequestTimer {
            stats: Arc::clone(&self.stats),
            api,
            start: Instant::now(),
        }
    }
}

impl ConnectionStats {
    /// What lets another thread of the connection (its writer) count the error codes
    /// of the responses it builds ([`ErrorCounter::count_here`]).
    pub(crate) fn error_counter(&self) -> ErrorCounter {
        ErrorCounter(Arc::clone(&self.stats))
    }
}

/// See [`ConnectionStats::error_counter`].
#[derive(Debug)]
pub(crate) struct ErrorCounter(Arc<ServerStats>);

impl ErrorCounter {
    /// Counts the error codes of the responses built on this thread until the returned
    /// value is dropped.
    pub(crate) fn count_here(self) -> CountingHere {
        CURRENT.with(|c| *c.borrow_mut() = Some(self.0));
        CountingHere(())
    }
}

/// See [`ErrorCounter::count_here`].
#[derive(Debug)]
pub(crate) struct CountingHere(());

impl Drop for CountingHere {
    fn drop(&mut self) {
        CURRENT.with(|c| c.borrow_mut().take());
    }
}

impl Drop for ConnectionStats {
    fn drop(&mut self) {
        self.stats.open.fetch_sub(1, Ordering::Relaxed);
        CURRENT.with(|c| c.borrow_mut().take());
        tracing::debug!(
            peer = %self.peer,
            client_id = %self.client_id.as_deref().unwrap_or(""),
            requests = self.requests,
            "client disconnected"
        );
    }
}

/// Times one request; records it when dropped.
#[derive(Debug)]
pub(crate) struct RequestTimer {
    stats: Arc<ServerStats>,
    api: Option<usize>,
    start: Instant,
}

impl Drop for RequestTimer {
    fn drop(&mut self) {
        if let Some(api) = self.api {
            self.stats.requests[api].observe(self.start.elapsed());
        }
    }
}

/// The client id in a request header (v1 and later: api key, version, correlation id,
/// then the client id as a nullable 16-bit-length string); None if it is null or the
/// frame is too short.
fn client_id(frame: &[u8]) -> Option<String> {
    let len = i16::from_be_bytes(frame.get(8..10)?.try_into().ok()?);
    let len = usize::try_from(len).ok()?;
    let bytes = frame.get(10..10 + len)?;
    Some(String::from_utf8_lossy(bytes).into_owned())
}

/// Counts `code` (0 is success and not counted) for the connection this thread serves.
#[inline]
pub(crate) fn count_error(code: i16) {
    if code != 0 {
        CURRENT.with(|c| {
            if let Some(s) = c.borrow().as_ref() {
                s.error(code);
            }
        });
    }
}

/// True while this thread serves a connection: the error codes of a response are worth
/// collecting for [`count_error`] (the server skips them otherwise).
#[inline]
pub(crate) fn counting_errors() -> bool {
    CURRENT.with(|c| c.borrow().is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_client_id_comes_from_the_header() {
        let mut frame = vec![0, 3, 0, 8, 0, 0, 0, 7];
        frame.extend_from_slice(&5i16.to_be_bytes());
        frame.extend_from_slice(b"rdkaf");
        assert_eq!(client_id(&frame).as_deref(), Some("rdkaf"));
        frame[8..10].copy_from_slice(&(-1i16).to_be_bytes());
        assert_eq!(client_id(&frame), None);
        assert_eq!(client_id(&frame[..9]), None);
        frame[8..10].copy_from_slice(&100i16.to_be_bytes());
        assert_eq!(client_id(&frame), None, "a length past the frame");
    }
}
