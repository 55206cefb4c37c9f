//! The Kafka wire protocol over TCP (feature `server`).
//!
//! [`Server::builder`] takes a broker and serves it to unmodified Kafka clients
//! (librdkafka, kcat, kafka-python, confluent-kafka, ...). A request flows
//! listener -> connection (framing, header, in-order replies) -> api handler -> broker.
//!
//! - One thread per connection, blocking I/O, requests answered one at a time in order.
//! - Request and response types come from the `kafka-protocol` crate, except the Fetch
//!   response, framed by hand so record bytes go out with `sendfile(2)` straight from the
//!   segment file (counted for tests by `tidelog::testing::sendfile_bytes_sent`).
//! - Limits: `max_connections` (refusals logged with the peer address; lowered to what
//!   the open-files limit allows), `max_request_size` (Kafka's
//!   `socket.request.max.bytes`), `max_queued_request_bytes` (memory of all requests in
//!   flight, Kafka's `queued.max.request.bytes`) and `fetch_max_wait` (the longest a
//!   Fetch waits for data). A connection whose client hangs up while its request waits
//!   is closed within a second. Warnings about what a peer sent are rate-limited per
//!   address. See the `limits` module.
//! - [`ServerHandle::shutdown`] stops accepting, lets in-flight requests finish, closes
//!   every connection and joins every thread.

mod api;
mod backend;
mod broker_backend;
mod codec;
mod connection;
mod idempotence;
mod limits;
mod listener;
mod peer_log;
mod sendfile;
mod transport;

use std::collections::HashMap;
use std::net::{SocketAddr, TcpListener, ToSocketAddrs};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::Result;
use crate::error::IoContext;
use backend::Backend;
use idempotence::ProducerStates;

#[cfg(any(test, feature = "testing"))]
pub(crate) use sendfile::sendfile_bytes_sent;

/// Parse `frame` (one request without its size prefix) as the server would and decode
/// its body, acting on nothing. For the request-decoder fuzz target (through
/// `tidelog::testing`); returns whether the request was accepted.
#[cfg(any(test, feature = "testing"))]
pub(crate) fn fuzz_decode_request(frame: &[u8]) -> bool {
    match connection::parse(frame.to_vec()) {
        Ok(connection::Parsed::Request(req)) => api::decode_only(req).is_ok(),
        Ok(connection::Parsed::Reply(_)) => true,
        Err(_) => false,
    }
}

/// The default cap on a Fetch's `max_wait_ms`: 30 s.
const DEFAULT_FETCH_MAX_WAIT: Duration = Duration::from_secs(30);

/// Settings of a server; see the setters of [`ServerBuilder`] for each default.
#[derive(Debug, Clone)]
pub(crate) struct Config {
    /// Address to bind.
    pub listen: SocketAddr,
    /// `host:port` put in Metadata and FindCoordinator responses; `None` = the address
    /// the client connected to.
    pub advertised: Option<String>,
    /// Most connections served at once.
    pub max_connections: usize,
    /// Largest request accepted, in bytes.
    pub max_request_size: usize,
    /// Whether Metadata requests that allow it create missing topics.
    pub auto_create_topics: bool,
    /// A connection with no request for this long is closed.
    pub idle_timeout: Duration,
    /// A write that makes no progress for this long closes the connection.
    pub write_timeout: Duration,
    /// The longest a Fetch waits for `min_bytes`, whatever its `max_wait_ms`.
    pub fetch_max_wait: Duration,
    /// Bytes of requests in flight over all connections, at most.
    pub max_queued_request_bytes: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: SocketAddr::from(([127, 0, 0, 1], 9092)),
            advertised: None,
            max_connections: 10_000,
            max_request_size: codec::DEFAULT_MAX_REQUEST_SIZE,
            auto_create_topics: false,
            idle_timeout: Duration::from_secs(600),
            write_timeout: Duration::from_secs(60),
            fetch_max_wait: DEFAULT_FETCH_MAX_WAIT,
            max_queued_request_bytes: limits::DEFAULT_MAX_QUEUED_REQUEST_BYTES,
        }
    }
}

/// The signals of the Fetch long polls in progress, so that shutdown can wake them
/// (a client may ask to wait for up to `i32::MAX` ms).
#[derive(Default)]
pub(crate) struct LongPolls {
    next: AtomicU64,
    signals: parking_lot::Mutex<HashMap<u64, Arc<crate::topic::Signal>>>,
}

impl LongPolls {
    /// Track `signal`; the id unregisters it.
    pub(crate) fn register(&self, signal: &Arc<crate::topic::Signal>) -> u64 {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.signals.lock().insert(id, signal.clone());
        id
    }

    /// Stop tracking a signal.
    pub(crate) fn unregister(&self, id: u64) {
        self.signals.lock().remove(&id);
    }

    /// Wake every long poll (they see `stopping` and answer with what they have).
    pub(crate) fn wake_all(&self) {
        for s in self.signals.lock().values() {
            s.notify();
        }
    }
}

/// State shared by the accept thread and every connection thread.
pub(crate) struct Shared {
    /// The settings the server was started with.
    pub config: Config,
    /// The broker being served.
    pub backend: Arc<dyn Backend>,
    /// Reported in Metadata (v2+).
    pub cluster_id: String,
    /// Producer ids and sequence state of idempotent producers.
    pub producers: ProducerStates,
    /// Raised once by shutdown; connections finish their current request and leave.
    pub stopping: AtomicBool,
    /// Number of open connections (checked against `max_connections`).
    pub active: AtomicUsize,
    /// Requests being handled right now (read, not yet answered).
    pub in_flight: AtomicUsize,
    /// Fetch long polls waiting for data.
    pub long_polls: LongPolls,
    /// Open connections, for shutdown.
    pub registry: listener::Registry,
    /// Bytes reserved by requests in flight (`max_queued_request_bytes`).
    pub request_memory: limits::RequestMemory,
    /// Rate limit of warnings about what peers send.
    pub peer_log: peer_log::PeerLog,
    /// The connection limit in force: `max_connections`, lowered to what the
    /// open-files limit allows.
    pub max_connections: usize,
    /// The open-files limit and what was open at start: accepted sockets whose
    /// descriptor reaches into the reserve kept for the broker's files are refused.
    pub descriptors: limits::Descriptors,
}

impl Shared {
    fn new(config: Config, backend: Arc<dyn Backend>, fds: limits::Descriptors) -> Shared {
        let dir = backend.data_dir();
        let fit = fds.connections_that_fit().unwrap_or(usize::MAX);
        let max_connections = config.max_connections.min(fit);
        if max_connections < config.max_connections {
            tracing::warn!(
                max_connections = config.max_connections,
                open_files_limit = fds.soft_limit,
                open = fds.open_at_start,
                reserved = fds.reserve(),
                "max_connections {} does not fit the open-files limit of {} ({} descriptors \
                 open, {} kept for the broker's files): serving at most {max_connections} \
                 connections; raise the limit (ulimit -n) to serve more",
                config.max_connections,
                fds.soft_limit.unwrap_or(u64::MAX),
                fds.open_at_start,
                fds.reserve(),
            );
        }
        Shared {
            request_memory: limits::RequestMemory::new(config.max_queued_request_bytes),
            peer_log: peer_log::PeerLog::default(),
            max_connections,
            descriptors: fds,
            config,
            cluster_id: format!("tidelog-{}", dir.display())
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == '-' {
                        c
                    } else {
                        '_'
                    }
                })
                .collect(),
            producers: ProducerStates::new(dir),
            backend,
            stopping: AtomicBool::new(false),
            active: AtomicUsize::new(0),
            in_flight: AtomicUsize::new(0),
            long_polls: LongPolls::default(),
            registry: listener::Registry::default(),
        }
    }

    /// True once shutdown began.
    pub(crate) fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::Acquire)
    }

    /// The largest request accepted: `max_request_size`, or the whole request memory if
    /// that is smaller (such a request could never be read).
    pub(crate) fn max_request_size(&self) -> usize {
        self.config
            .max_request_size
            .min(self.request_memory.limit())
    }
}

/// Entry point of the network server: `Server::builder(broker)...start()`.
#[derive(Debug)]
pub struct Server {
    _private: (),
}

impl Server {
    /// A builder for a server in front of `broker`: the same topics, partitions and
    /// group coordinator that in-process producers and consumers use.
    ///
    /// ```no_run
    /// # fn main() -> tidelog::Result<()> {
    /// let broker = tidelog::Broker::open("data")?;
    /// let server = tidelog::Server::builder(broker)
    ///     .listen("127.0.0.1:9092")
    ///     .start()?;
    /// println!("serving Kafka clients on {}", server.local_addr());
    /// server.run_until_signal()?; // SIGINT / SIGTERM: graceful shutdown, broker closed
    /// # Ok(())
    /// # }
    /// ```
    pub fn builder(broker: crate::Broker) -> ServerBuilder {
        ServerBuilder {
            config: Config {
                auto_create_topics: broker.config().auto_create_topics,
                ..Config::default()
            },
            listen_error: None,
            backend: Arc::new(broker_backend::BrokerBackend { broker }),
            listener: None,
        }
    }
}

/// Configures and starts a [`Server`].
#[must_use]
pub struct ServerBuilder {
    config: Config,
    /// Why the address given to `listen` cannot be used; reported by `start`.
    listen_error: Option<crate::Error>,
    backend: Arc<dyn Backend>,
    /// A socket bound by the caller, used instead of binding `config.listen`.
    listener: Option<TcpListener>,
}

impl std::fmt::Debug for ServerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerBuilder")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl ServerBuilder {
    /// Address to listen on: a `SocketAddr`, or anything else std resolves to one, such
    /// as `"127.0.0.1:9092"` or `("localhost", 9092)` (the first address it resolves
    /// to). Default = `127.0.0.1:9092`; port 0 picks a free port (see
    /// [`ServerHandle::local_addr`]). An address that does not parse or resolve makes
    /// [`ServerBuilder::start`] fail with `Error::InvalidConfig` for `listen`.
    pub fn listen<A: ToSocketAddrs + std::fmt::Debug>(mut self, addr: A) -> Self {
        let invalid = |reason: String| crate::Error::InvalidConfig {
            key: "listen".into(),
            reason,
        };
        self.listen_error = match addr.to_socket_addrs().map(|mut all| all.next()) {
            Ok(Some(resolved)) => {
                self.config.listen = resolved;
                None
            }
            Ok(None) => Some(invalid(format!("{addr:?} resolves to no address"))),
            Err(e) => Some(invalid(format!(
                "{addr:?} is not an address to listen on: {e}"
            ))),
        };
        self
    }

    /// `host:port` that clients are told to connect to in Metadata and FindCoordinator
    /// responses, for when the bind address is not reachable from them (Kafka's
    /// `advertised.listeners`). Default = the address each client connected to (so a
    /// server bound to `0.0.0.0` answers every client with a reachable address).
    pub fn advertised(mut self, host_port: impl Into<String>) -> Self {
        self.config.advertised = Some(host_port.into());
        self
    }

    /// Most client connections served at once; further connections are accepted, logged
    /// with the peer address and closed. Default = 10,000.
    ///
    /// A connection costs one file descriptor. If the process's open-files limit (the
    /// soft `RLIMIT_NOFILE`) cannot hold this many besides the descriptors already open
    /// and a reserve for the broker's own files (a tenth of the limit, at least 32),
    /// [`ServerBuilder::start`] logs a warning and serves fewer (see
    /// [`ServerHandle::max_connections`]); a connection whose descriptor would reach
    /// into the reserve is refused.
    pub fn max_connections(mut self, n: usize) -> Self {
        self.config.max_connections = n;
        self
    }

    /// Largest request accepted, in bytes; a larger size prefix closes the connection.
    /// Default = 100 MiB (Kafka's `socket.request.max.bytes`).
    pub fn max_request_size(mut self, bytes: usize) -> Self {
        self.config.max_request_size = bytes.min(i32::MAX as usize);
        self
    }

    /// The most memory that requests in flight may take over all connections, in bytes
    /// (Kafka's `queued.max.request.bytes`). When reading the next request would go
    /// past it, connections wait before reading until requests being handled finish; a
    /// request larger than this closes its connection as one above
    /// [`max_request_size`](ServerBuilder::max_request_size) does. Default = 500 MiB.
    pub fn max_queued_request_bytes(mut self, bytes: usize) -> Self {
        self.config.max_queued_request_bytes = bytes.max(codec::MIN_REQUEST_LEN);
        self
    }

    /// The longest a Fetch request waits for data: a client's `max_wait_ms` above this
    /// is capped to it (the answer then comes with whatever is there). Default = 30 s.
    pub fn fetch_max_wait(mut self, max: Duration) -> Self {
        self.config.fetch_max_wait = max;
        self
    }

    /// Serve on `listener`, a socket the caller bound, instead of binding
    /// [`listen`](ServerBuilder::listen)'s address. Binding first lets a program fail on
    /// a port in use before it opens anything else (as `tidelog serve` does before it
    /// opens the data directory).
    pub fn listener(mut self, listener: TcpListener) -> Self {
        self.listener = Some(listener);
        self
    }

    /// Whether a Metadata request for an unknown topic (that allows it) creates the topic
    /// with the broker's defaults (Kafka's `auto.create.topics.enable`). Default = the
    /// broker's [`BrokerBuilder::auto_create_topics`](crate::BrokerBuilder::auto_create_topics)
    /// (false unless turned on there), so in-process and network clients see the same
    /// topics appear; `tidelog serve` turns it on.
    pub fn auto_create_topics(mut self, on: bool) -> Self {
        self.config.auto_create_topics = on;
        self
    }

    /// Close connections that send no request for this long. Default = 10 minutes
    /// (Kafka's `connections.max.idle.ms`).
    pub fn idle_timeout(mut self, timeout: Duration) -> Self {
        self.config.idle_timeout = timeout;
        self
    }

    /// Bind the address (unless a [`listener`](ServerBuilder::listener) was given) and
    /// start the accept thread.
    pub fn start(self) -> Result<ServerHandle> {
        if self.listener.is_none()
            && let Some(e) = self.listen_error
        {
            return Err(e);
        }
        let listen = self.config.listen;
        let listener = match self.listener {
            Some(l) => l,
            None => TcpListener::bind(listen).ctx("bind", listen.to_string())?,
        };
        let local = listener.local_addr().ctx("bind", listen.to_string())?;
        let fds = limits::Descriptors::now(&listener);
        let shared = Arc::new(Shared::new(self.config, self.backend, fds));
        let accept = listener::spawn(shared.clone(), listener)
            .ctx("spawn the accept thread for", local.to_string())?;
        tracing::info!(
            %local,
            max_connections = shared.max_connections,
            open_files_limit = fds.soft_limit,
            "listening"
        );
        Ok(ServerHandle {
            shared,
            accept: Some(accept),
            local,
        })
    }
}

/// A running server. Dropping it shuts it down like [`ServerHandle::shutdown`].
#[derive(Debug)]
pub struct ServerHandle {
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
    local: SocketAddr,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl ServerHandle {
    /// The address the server listens on (with the real port when bound to port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// The connection limit in force: [`ServerBuilder::max_connections`], or fewer if
    /// the open-files limit could not hold that many when the server started.
    pub fn max_connections(&self) -> usize {
        self.shared.max_connections
    }

    /// Stop accepting connections, let requests in flight finish and get their
    /// responses, close every connection and join every server thread.
    pub fn shutdown(mut self) -> Result<()> {
        self.stop();
        Ok(())
    }

    /// Block until SIGINT or SIGTERM, then shut down like [`ServerHandle::shutdown`] and
    /// close the broker cleanly.
    pub fn run_until_signal(self) -> Result<()> {
        use signal_hook::consts::{SIGINT, SIGTERM};
        let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM])
            .ctx("install signal handlers for", self.local.to_string())?;
        if let Some(sig) = signals.forever().next() {
            tracing::info!(signal = sig, "shutting down");
        }
        let shared = self.shared.clone();
        self.shutdown()?;
        shared.backend.close()
    }

    fn stop(&mut self) {
        if let Some(accept) = self.accept.take() {
            listener::shutdown(&self.shared, accept, self.local);
            tracing::info!(local = %self.local, "server stopped");
        }
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_api;
#[cfg(test)]
mod tests_groups;
