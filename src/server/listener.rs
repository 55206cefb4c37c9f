//! The accept loops (one thread per listener), one thread per connection, and graceful
//! shutdown.
//!
//! Shutdown order: raise `stopping`, wake each accept thread with a connection to itself
//! and join it (no new connections from then on), shut the read half of every open
//! connection (an idle client sees its connection end; a request being handled still
//! gets its response, since the write half stays open), then join every connection
//! thread.
//!
//! A connection costs one descriptor: its thread and the registry share the socket. An
//! accepted socket is refused (closed at once, logged with the peer address, rate-limited
//! per address) when `max_connections` are open, when its address has
//! `max_connections_per_ip` open (or its override) or when its descriptor number reaches
//! into the descriptors kept for the broker's files (see the `limits` module).

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::{self, JoinHandle};
use std::time::Duration;

use parking_lot::Mutex;

use super::{Shared, connection};
use crate::security::SecurityProtocol;
use crate::security::peer_log::{self, peer_warn};

/// Open connections and their threads, so that shutdown can reach them.
#[derive(Default)]
pub(crate) struct Registry {
    /// Each open connection's socket (shared with its thread), by connection number.
    sockets: Mutex<HashMap<u64, Arc<TcpStream>>>,
    /// Threads of connections, finished ones pruned as new ones start.
    threads: Mutex<Vec<JoinHandle<()>>>,
}

/// Removes a connection from the registry and the count when its thread ends, however
/// it ends.
struct Slot {
    shared: Arc<Shared>,
    id: u64,
    ip: std::net::IpAddr,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.shared.ip_connections.release(self.ip);
        self.shared.registry.sockets.lock().remove(&self.id);
        self.shared.active.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Start the accept thread of listener `name`, whose connections speak `protocol`.
pub(crate) fn spawn(
    shared: Arc<Shared>,
    listener: TcpListener,
    protocol: SecurityProtocol,
    name: Arc<str>,
) -> std::io::Result<JoinHandle<()>> {
    thread::Builder::new()
        .name(format!(
            "tidelog-accept-{}",
            protocol.name().to_ascii_lowercase()
        ))
        .spawn(move || accept_loop(&shared, &listener, protocol, &name))
}

/// Connection numbers, unique over every listener of the process.
static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn accept_loop(
    shared: &Arc<Shared>,
    listener: &TcpListener,
    protocol: SecurityProtocol,
    name: &Arc<str>,
) {
    loop {
        let (stream, peer) = match listener.accept() {
            Ok(pair) => pair,
            Err(e) => {
                if shared.stopping.load(Ordering::Acquire) {
                    return;
                }
                // Out of file descriptors and the like: log, back off briefly so the loop
                // does not spin, and keep serving the connections we have.
                tracing::warn!(error = %e, "accept failed");
                thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        if shared.stopping.load(Ordering::Acquire) {
            return;
        }
        let max = shared.max_connections;
        if shared.active.load(Ordering::Acquire) >= max {
            shared.metrics.refused();
            peer_warn!(
                shared.peer_log,
                peer,
                max_connections = max,
                "refusing connection: too many open connections"
            );
            continue;
        }
        let fds = shared.descriptors;
        if let Some(ceiling) = fds.ceiling()
            && descriptor_number(&stream) >= ceiling
        {
            shared.metrics.refused();
            peer_warn!(
                shared.peer_log,
                peer,
                "refusing connection: {} descriptors are open and the open-files limit is {}, \
                 whose last {} are kept for the broker's files (raise it with ulimit -n)",
                descriptor_number(&stream) + 1,
                fds.soft_limit.unwrap_or(u64::MAX),
                fds.reserve()
            );
            continue;
        }
        if let Err(limit) = shared.ip_connections.acquire(peer.ip()) {
            shared.metrics.refused();
            peer_warn!(
                shared.peer_log,
                peer,
                max_connections_per_ip = limit,
                "refusing connection: too many open connections from this address"
            );
            continue;
        }
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        if let Err(e) = start_connection(shared, stream, peer, id, (protocol, name.clone())) {
            tracing::warn!(%peer, error = %e, "cannot start a connection thread");
        }
    }
}

fn start_connection(
    shared: &Arc<Shared>,
    stream: TcpStream,
    peer: SocketAddr,
    id: u64,
    (protocol, name): (SecurityProtocol, Arc<str>),
) -> std::io::Result<()> {
    let configured = stream
        .set_nodelay(true)
        .and_then(|()| stream.set_read_timeout(Some(shared.config.idle_timeout)))
        .and_then(|()| stream.set_write_timeout(Some(shared.config.write_timeout)));
    if let Err(e) = configured {
        // Counted by the accept loop; the slot that would uncount it is not made yet.
        shared.ip_connections.release(peer.ip());
        return Err(e);
    }
    let stream = Arc::new(stream);
    shared.active.fetch_add(1, Ordering::AcqRel);
    shared.registry.sockets.lock().insert(id, stream.clone());
    let slot = Slot {
        shared: shared.clone(),
        id,
        ip: peer.ip(),
    };
    let conn_shared = shared.clone();
    let spawned = thread::Builder::new()
        .name(format!("tidelog-conn-{id}"))
        .stack_size(512 * 1024)
        .spawn(move || {
            let _slot = slot;
            connection::serve(conn_shared, stream, peer, (protocol, &name));
        });
    match spawned {
        Ok(handle) => {
            let mut threads = shared.registry.threads.lock();
            threads.retain(|t| !t.is_finished());
            threads.push(handle);
            Ok(())
        }
        // The closure (and with it the slot) was dropped, which undid the registration.
        Err(e) => Err(e),
    }
}

/// Stop accepting, let in-flight requests finish, close every connection, join every
/// thread. `accepts` are the accept threads with the address each listens on.
pub(crate) fn shutdown(shared: &Shared, accepts: Vec<(JoinHandle<()>, SocketAddr)>) {
    shared.stopping.store(true, Ordering::Release);
    tracing::info!(
        connections = shared.active.load(Ordering::Acquire),
        in_flight = shared.in_flight.load(Ordering::Acquire),
        request_bytes = shared.request_memory.used(),
        "shutting down: no new connections; finishing requests in flight"
    );
    for (accept, local) in accepts {
        // Wake the blocking accept() with a connection of our own.
        let wake = match local.ip() {
            IpAddr::V4(ip) if ip.is_unspecified() => {
                SocketAddr::new(Ipv4Addr::LOCALHOST.into(), local.port())
            }
            IpAddr::V6(ip) if ip.is_unspecified() => {
                SocketAddr::new(Ipv6Addr::LOCALHOST.into(), local.port())
            }
            _ => local,
        };
        let _ = TcpStream::connect_timeout(&wake, Duration::from_secs(5));
        if accept.join().is_err() {
            tracing::error!("an accept thread panicked");
        }
    }
    for socket in shared.registry.sockets.lock().values() {
        let _ = socket.shutdown(Shutdown::Read);
    }
    // Long polls answer now with what they have instead of waiting out max_wait_ms;
    // connections waiting for request memory give up.
    shared.long_polls.wake_all();
    shared.request_memory.wake_all();
    let threads = std::mem::take(&mut *shared.registry.threads.lock());
    for t in threads {
        if t.join().is_err() {
            tracing::error!("a connection thread panicked");
        }
    }
    for (addr, n) in shared.peer_log.drain() {
        peer_log::report_suppressed(addr, n);
    }
}

/// The descriptor number of `stream`: descriptors are handed out lowest-free first, so
/// at least this many were open when it was accepted.
fn descriptor_number(stream: &TcpStream) -> u64 {
    use std::os::fd::AsRawFd;
    u64::try_from(stream.as_raw_fd()).unwrap_or(0)
}
