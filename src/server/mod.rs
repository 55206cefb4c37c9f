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
//!   flight, Kafka's `queued.max.request.bytes`), `fetch_max_wait` (the longest a
//!   Fetch waits for data) and `fetch_max_bytes` (the record bytes of a consumer's Fetch
//!   response, Kafka's broker `fetch.max.bytes`). A connection whose client hangs up while its request waits
//!   is closed within a second. Warnings about what a peer sent are rate-limited per
//!   address. See the `limits` module.
//! - Security (the `auth` module): several listeners, each PLAINTEXT, SSL (rustls),
//!   SASL_PLAINTEXT or SASL_SSL (PLAIN, SCRAM-SHA-256/512), and ACLs checked by every
//!   API handler when the authorizer is on. Fetches on TLS listeners copy file bytes
//!   through the TLS writer; plaintext ones keep `sendfile`.
//! - [`ServerHandle::shutdown`] stops accepting, lets in-flight requests finish, closes
//!   every connection and joins every thread.

mod advertised;
mod api;
mod backend;
mod broker_backend;
mod cluster_view;
mod codec;
mod connection;
mod error_codes;
mod idempotence;
mod limits;
mod listener;
mod sendfile;
mod transport;

use std::collections::HashMap;
use std::net::{SocketAddr, TcpListener, ToSocketAddrs};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::error::IoContext;
use crate::error::Result;
use crate::security::SecurityProtocol;
use crate::security::sasl::SaslMechanism;
use crate::security::tls::TlsSettings;
use backend::Backend;
use idempotence::ProducerIds;

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

/// Runs the server side of an SSL listener's TLS handshake (with `tls`'s certificate;
/// client certificates required when `data`'s length is odd and `tls` has a client CA)
/// on a loopback connection whose client sends `data` and then closes its side. Panics
/// if the handshake completes: arbitrary bytes cannot finish one (the client's Finished
/// needs the handshake's keys), and nothing of a connection is read as a request before
/// it does. For the `tls_handshake` fuzz target (through `tidelog::testing`).
#[cfg(any(test, feature = "testing"))]
pub(crate) fn fuzz_tls_handshake(tls: &TlsSettings, data: &[u8]) {
    use std::io::Write;
    use std::net::{Shutdown, TcpStream};
    use std::sync::OnceLock;
    static SETUP: OnceLock<(TcpListener, crate::security::tls::TlsAcceptors)> = OnceLock::new();
    let (listener, acceptors) = SETUP.get_or_init(|| {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback listener");
        let acceptors = tls.load().expect("the fuzz target's certificate and key");
        (listener, acceptors)
    });
    let config = match (&acceptors.mutual, data.len() % 2) {
        (Some(mutual), 1) => mutual.clone(),
        _ => acceptors.server.clone(),
    };
    let addr = listener.local_addr().expect("the listener's address");
    let mut client = TcpStream::connect(addr).expect("a loopback connection");
    let (server, _) = listener.accept().expect("the loopback connection accepted");
    // The client's bytes (on a thread: the server reads them as it goes), then its FIN.
    let bytes = data.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = client.write_all(&bytes);
        let _ = client.shutdown(Shutdown::Write);
        client
    });
    let result = crate::security::tls::accept(config, Arc::new(server), Duration::from_secs(1));
    let client = writer.join().expect("the fuzz client thread");
    drop(client);
    assert!(
        result.is_err(),
        "a TLS handshake completed from {} arbitrary bytes",
        data.len()
    );
}

/// Feeds `data` to a connection on a SASL_PLAINTEXT listener as the server would: a
/// sequence of frames, each a big-endian `u16` length and that many bytes, through the
/// security gate and the SASL handlers, each frame also through the SCRAM message
/// parsers. The only user is `fuzz` with password `fuzz-password` (SCRAM-SHA-256).
/// Panics if a request other than ApiVersions and the SASL ones passes before
/// authentication, or if a session authenticates as anyone but `fuzz`. For the
/// `sasl_session` fuzz target (through `tidelog::testing`).
#[cfg(any(test, feature = "testing"))]
pub(crate) fn fuzz_sasl_session(data: &[u8]) {
    use crate::security::credentials::{CredentialChange, CredentialStore};
    use crate::security::scram::{ScramCredential, ScramMechanism};
    use kafka_protocol::messages::ApiKey;
    use std::sync::OnceLock;

    /// The one user, in memory.
    #[derive(Debug)]
    struct OneUser(ScramCredential);
    impl CredentialStore for OneUser {
        fn credential(&self, user: &str, m: ScramMechanism) -> Option<ScramCredential> {
            (user == "fuzz" && m == self.0.mechanism).then(|| self.0.clone())
        }
        fn users(&self) -> Vec<(String, Vec<(ScramMechanism, u32)>)> {
            vec![("fuzz".into(), vec![(self.0.mechanism, self.0.iterations)])]
        }
        fn apply(&self, _: &[CredentialChange]) -> Result<()> {
            Err(crate::error::Error::InvalidConfig {
                key: "users".into(),
                reason: "the fuzz target's store is read-only".into(),
            })
        }
    }
    static SECURITY: OnceLock<crate::security::Security> = OnceLock::new();
    let security = SECURITY.get_or_init(|| {
        crate::security::Security::new(Arc::new(OneUser(ScramCredential::new(
            ScramMechanism::Sha256,
            "fuzz-password",
            4096,
        ))))
    });
    let log = crate::security::peer_log::PeerLog::default();
    let peer = SocketAddr::from(([127, 0, 0, 1], 1));
    let mut session = crate::security::Session::new(SecurityProtocol::SaslPlaintext, None);
    let allowed = [
        ApiKey::ApiVersions,
        ApiKey::SaslHandshake,
        ApiKey::SaslAuthenticate,
    ];
    let mut rest = data;
    while rest.len() >= 2 {
        let len = usize::from(u16::from_be_bytes([rest[0], rest[1]])).min(rest.len() - 2);
        let frame = &rest[2..2 + len];
        rest = &rest[2 + len..];
        let _ = crate::security::scram::parse_client_first(frame);
        let _ = crate::security::scram::parse_client_final(frame);
        let was_authenticated = session.authenticated();
        let raw = session.expects_raw_token();
        let key = codec::request_start(frame).map(|s| s.api_key);
        match connection::admit(security, &log, &mut session, peer, frame.to_vec()) {
            Ok(connection::Admitted::Request(req)) => assert!(
                was_authenticated || req.header.request_api_key == ApiKey::ApiVersions as i16,
                "{} passed the gate before authentication",
                api::api_name(req.header.request_api_key)
            ),
            Ok(connection::Admitted::Sasl(answer)) => {
                assert!(
                    raw || was_authenticated
                        || key.is_some_and(|k| allowed.iter().any(|a| *a as i16 == k)),
                    "api key {key:?} was answered before authentication"
                );
                if matches!(
                    answer.outcome,
                    api::SaslOutcome::Failed | api::SaslOutcome::Close
                ) {
                    return;
                }
            }
            Err(_) => return,
        }
        if session.authenticated() {
            assert_eq!(
                session.principal, "User:fuzz",
                "authenticated as someone else"
            );
        }
    }
}

/// The default cap on a Fetch's `max_wait_ms`: 30 s.
const DEFAULT_FETCH_MAX_WAIT: Duration = Duration::from_secs(30);

/// The default cap on the record bytes of one Fetch response: 55 MiB, Kafka's broker
/// default for `fetch.max.bytes` (see [`ServerBuilder::fetch_max_bytes`]).
const DEFAULT_FETCH_MAX_BYTES: usize = 55 * 1024 * 1024;

/// The smallest `fetch_max_bytes` accepted (Kafka's lower bound for `fetch.max.bytes`).
const MIN_FETCH_MAX_BYTES: usize = 1024;

/// Settings of a server; see the setters of [`ServerBuilder`] for each default.
#[derive(Debug, Clone)]
pub(crate) struct Config {
    /// Address to bind.
    pub listen: SocketAddr,
    /// Kafka's `advertised.listeners` as given (`NAME://HOST:PORT,...`; a bare
    /// `HOST:PORT` is the first listener's); `None` = each listener's bound address.
    pub advertised: Option<String>,
    /// The advertised address of each listener by name, resolved from `advertised` by
    /// [`ServerBuilder::start`]; a listener without one answers with the address the
    /// client connected to.
    pub advertised_listeners: Vec<(String, Option<advertised::Advertised>)>,
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
    /// The most record bytes one Fetch response carries, whatever its `max_bytes`.
    pub fetch_max_bytes: usize,
    /// Bytes of requests in flight over all connections, at most.
    pub max_queued_request_bytes: usize,
    /// The security protocol of the `listen` listener.
    pub protocol: SecurityProtocol,
    /// The certificate and key of TLS listeners.
    pub tls: Option<TlsSettings>,
    /// SASL mechanisms offered on SASL listeners.
    pub sasl_mechanisms: Vec<SaslMechanism>,
    /// Whether ACLs are enforced.
    pub authorizer: bool,
    /// Principals allowed everything when ACLs are enforced.
    pub super_users: Vec<String>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: SocketAddr::from(([127, 0, 0, 1], 9092)),
            advertised: None,
            advertised_listeners: Vec::new(),
            max_connections: 10_000,
            max_request_size: codec::DEFAULT_MAX_REQUEST_SIZE,
            auto_create_topics: false,
            idle_timeout: Duration::from_secs(600),
            write_timeout: Duration::from_secs(60),
            fetch_max_wait: DEFAULT_FETCH_MAX_WAIT,
            fetch_max_bytes: DEFAULT_FETCH_MAX_BYTES,
            max_queued_request_bytes: limits::DEFAULT_MAX_QUEUED_REQUEST_BYTES,
            protocol: SecurityProtocol::Plaintext,
            tls: None,
            sasl_mechanisms: SaslMechanism::ALL.to_vec(),
            authorizer: false,
            super_users: Vec::new(),
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
    /// The producer ids of idempotent producers (their sequence state is in the logs).
    pub producers: ProducerIds,
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
    pub peer_log: crate::security::peer_log::PeerLog,
    /// The connection limit in force: `max_connections`, lowered to what the
    /// open-files limit allows.
    pub max_connections: usize,
    /// The open-files limit and what was open at start: accepted sockets whose
    /// descriptor reaches into the reserve kept for the broker's files are refused.
    pub descriptors: limits::Descriptors,
    /// TLS, SASL credentials, the authorizer, failed logins.
    pub security: crate::security::Security,
    /// Connections, requests and errors, for `Broker::metrics` (`crate::metrics`).
    pub metrics: Arc<crate::metrics::server::ServerStats>,
}

impl Shared {
    fn new(
        config: Config,
        backend: Arc<dyn Backend>,
        fds: limits::Descriptors,
        metrics: Arc<crate::metrics::server::ServerStats>,
        security: crate::security::Security,
        producers: ProducerIds,
    ) -> Shared {
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
            peer_log: crate::security::peer_log::PeerLog::default(),
            max_connections,
            descriptors: fds,
            security,
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
            producers,
            backend,
            stopping: AtomicBool::new(false),
            active: AtomicUsize::new(0),
            in_flight: AtomicUsize::new(0),
            long_polls: LongPolls::default(),
            registry: listener::Registry::default(),
            metrics,
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
    pub fn builder(broker: crate::broker::Broker) -> ServerBuilder {
        ServerBuilder {
            config: Config {
                auto_create_topics: broker.config().auto_create_topics,
                ..Config::default()
            },
            listen_error: None,
            broker,
            cluster: ClusterSettings::default(),
            listener: None,
            listener_name: None,
            extra_listeners: Vec::new(),
        }
    }
}

/// The cluster settings given to a [`ServerBuilder`] (Kafka's names in the setters).
#[derive(Debug, Default)]
struct ClusterSettings {
    node_id: Option<i32>,
    quorum: Option<String>,
    session_timeout: Option<Duration>,
    default_replication_factor: Option<i16>,
    min_insync_replicas: Option<i32>,
    replica_lag_time_max: Option<Duration>,
    offsets_topic_replication_factor: Option<i16>,
    auto_leader_rebalance: Option<bool>,
    leader_imbalance_check_interval: Option<Duration>,
    leader_imbalance_per_broker_percentage: Option<u32>,
    /// The listener replica fetchers use, by protocol or name (Kafka's
    /// `inter.broker.listener.name`).
    inter_broker_listener: Option<InterBrokerListener>,
    /// The certificate and key replica fetchers present on a TLS inter-broker listener
    /// (default: the node's own TLS certificate and key).
    inter_broker_client_cert: Option<(std::path::PathBuf, std::path::PathBuf)>,
    /// The replica fetchers' SASL login on that listener.
    inter_broker_sasl: Option<crate::security::SaslLogin>,
    /// The CA of the nodes' certificates, for a TLS inter-broker listener.
    inter_broker_ca: Option<std::path::PathBuf>,
    /// The quorum port's protocol: PLAINTEXT (default) or SSL.
    quorum_protocol: Option<SecurityProtocol>,
    /// The CA of the nodes' certificates on an SSL quorum port.
    quorum_ca: Option<std::path::PathBuf>,
    /// Tests: quorum listener bound by the caller, small snapshot threshold.
    #[cfg(test)]
    quorum_listener: Option<TcpListener>,
    #[cfg(test)]
    snapshot_after_entries: Option<usize>,
}

/// How the inter-broker listener was named.
#[derive(Debug, Clone)]
enum InterBrokerListener {
    /// The first listener with this protocol (`inter_broker_listener`).
    Protocol(SecurityProtocol),
    /// The listener of this name, or else the only one with the protocol of this name
    /// (`inter_broker_listener_name`).
    Name(String),
}

impl InterBrokerListener {
    /// The index in `listeners` (name, protocol, address) of the listener meant.
    fn resolve(&self, listeners: &[(String, SecurityProtocol, SocketAddr)]) -> Result<usize> {
        let all = || {
            listeners
                .iter()
                .map(|(n, p, a)| {
                    if n == p.name() {
                        format!("{n}://{a}")
                    } else {
                        format!("{n}://{a} ({p})")
                    }
                })
                .collect::<Vec<_>>()
                .join(", ")
        };
        let invalid = |reason: String| crate::error::Error::InvalidConfig {
            key: "inter.broker.listener.name".into(),
            reason,
        };
        match self {
            InterBrokerListener::Protocol(protocol) => listeners
                .iter()
                .position(|(_, p, _)| p == protocol)
                .ok_or_else(|| invalid(format!("no {protocol} listener among {}", all()))),
            InterBrokerListener::Name(name) => {
                let upper = name.to_ascii_uppercase();
                if let Some(i) = listeners.iter().position(|(n, _, _)| *n == upper) {
                    return Ok(i);
                }
                let Ok(protocol) = upper.parse::<SecurityProtocol>() else {
                    return Err(invalid(format!(
                        "no listener named {upper} among {}",
                        all()
                    )));
                };
                let mut with = listeners
                    .iter()
                    .enumerate()
                    .filter(|(_, (_, p, _))| *p == protocol);
                match (with.next(), with.next()) {
                    (Some((i, _)), None) => Ok(i),
                    (None, _) => Err(invalid(format!(
                        "no listener named {upper} and no {protocol} listener among {}",
                        all()
                    ))),
                    (Some(_), Some(_)) => Err(invalid(format!(
                        "{upper} is the protocol of several listeners ({}): name one",
                        all()
                    ))),
                }
            }
        }
    }
}

/// How long a node's controlled shutdown waits for the controller.
const CONTROLLED_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(5);

/// Configures and starts a [`Server`].
#[must_use]
pub struct ServerBuilder {
    config: Config,
    /// Why the address given to `listen` cannot be used; reported by `start`.
    listen_error: Option<crate::error::Error>,
    broker: crate::broker::Broker,
    cluster: ClusterSettings,
    /// A socket bound by the caller, used instead of binding `config.listen`.
    listener: Option<TcpListener>,
    /// The name of the `listen` listener (default: its protocol's name).
    listener_name: Option<String>,
    /// Listeners besides the `listen` one, with their names (default: the protocol's).
    extra_listeners: Vec<(Option<String>, SecurityProtocol, Endpoint)>,
}

/// Where a listener listens: an address to bind, or a socket bound by the caller.
#[derive(Debug)]
enum Endpoint {
    Addr(std::result::Result<SocketAddr, crate::error::Error>),
    Bound(TcpListener),
}

impl Endpoint {
    fn bind(self) -> Result<TcpListener> {
        match self {
            Endpoint::Bound(l) => Ok(l),
            Endpoint::Addr(Err(e)) => Err(e),
            Endpoint::Addr(Ok(addr)) => TcpListener::bind(addr).ctx("bind", addr.to_string()),
        }
    }
}

/// The first address `addr` resolves to, or `Error::InvalidConfig` for `listen`.
fn resolve<A: ToSocketAddrs + std::fmt::Debug>(addr: A) -> Result<SocketAddr> {
    let invalid = |reason: String| crate::error::Error::InvalidConfig {
        key: "listen".into(),
        reason,
    };
    match addr.to_socket_addrs().map(|mut all| all.next()) {
        Ok(Some(resolved)) => Ok(resolved),
        Ok(None) => Err(invalid(format!("{addr:?} resolves to no address"))),
        Err(e) => Err(invalid(format!(
            "{addr:?} is not an address to listen on: {e}"
        ))),
    }
}

impl std::fmt::Debug for ServerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerBuilder")
            .field("config", &self.config)
            .field("cluster", &self.cluster)
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
        self.listen_error = match resolve(addr) {
            Ok(resolved) => {
                self.config.listen = resolved;
                None
            }
            Err(e) => Some(e),
        };
        self
    }

    /// The security protocol of the [`listen`](ServerBuilder::listen) listener (Kafka's
    /// `listeners=SASL_SSL://...`). Default = PLAINTEXT. SSL and SASL_SSL need
    /// [`tls`](ServerBuilder::tls).
    pub fn security_protocol(mut self, protocol: SecurityProtocol) -> Self {
        self.config.protocol = protocol;
        self
    }

    /// Another listener, with its own protocol and address (Kafka's `listeners` lists
    /// several: `PLAINTEXT://127.0.0.1:9092,SASL_SSL://0.0.0.0:9094`). Every listener
    /// serves the same broker; [`ServerHandle::listeners`] tells where each is bound.
    pub fn add_listener<A: ToSocketAddrs + std::fmt::Debug>(
        mut self,
        protocol: SecurityProtocol,
        addr: A,
    ) -> Self {
        self.extra_listeners
            .push((None, protocol, Endpoint::Addr(resolve(addr))));
        self
    }

    /// Another listener on a socket the caller bound (see
    /// [`listener`](ServerBuilder::listener)).
    pub fn add_bound_listener(mut self, protocol: SecurityProtocol, listener: TcpListener) -> Self {
        self.extra_listeners
            .push((None, protocol, Endpoint::Bound(listener)));
        self
    }

    /// The name of the [`listen`](ServerBuilder::listen) listener (Kafka's listener
    /// names: `INTERNAL://...` with `listener.security.protocol.map=INTERNAL:SSL`), by
    /// which [`inter_broker_listener_name`](Self::inter_broker_listener_name) selects it.
    /// Upper-cased. Default = its protocol's name (`PLAINTEXT`). Names must differ
    /// between listeners ([`start`](Self::start) refuses two of one name).
    pub fn listener_name(mut self, name: impl Into<String>) -> Self {
        self.listener_name = Some(name.into());
        self
    }

    /// Another listener with a name of its own (see
    /// [`listener_name`](Self::listener_name)), its protocol and its address.
    pub fn add_named_listener<A: ToSocketAddrs + std::fmt::Debug>(
        mut self,
        name: impl Into<String>,
        protocol: SecurityProtocol,
        addr: A,
    ) -> Self {
        self.extra_listeners
            .push((Some(name.into()), protocol, Endpoint::Addr(resolve(addr))));
        self
    }

    /// Another named listener on a socket the caller bound.
    pub fn add_bound_named_listener(
        mut self,
        name: impl Into<String>,
        protocol: SecurityProtocol,
        listener: TcpListener,
    ) -> Self {
        self.extra_listeners
            .push((Some(name.into()), protocol, Endpoint::Bound(listener)));
        self
    }

    /// The certificate and key of SSL and SASL_SSL listeners, and optionally the CA of
    /// client certificates. Read by [`start`](ServerBuilder::start), which fails with the
    /// file's name if one cannot be read or used. Default = none (a TLS listener is then
    /// an `InvalidConfig` error).
    pub fn tls(mut self, settings: TlsSettings) -> Self {
        self.config.tls = Some(settings);
        self
    }

    /// The SASL mechanisms SASL listeners offer (Kafka's `sasl.enabled.mechanisms`).
    /// Default = PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512. Users and their SCRAM
    /// credentials are kept in the data directory (`tidelog users`,
    /// AlterUserScramCredentials); PLAIN checks a password against them.
    pub fn sasl_mechanisms(mut self, mechanisms: &[SaslMechanism]) -> Self {
        self.config.sasl_mechanisms = mechanisms.to_vec();
        self
    }

    /// Enforce ACLs on network clients (Kafka's `authorizer.class.name` with
    /// `allow.everyone.if.no.acl.found=false`): each request is checked for the
    /// operations Kafka checks, and anything no ACL allows is refused with
    /// TOPIC_/GROUP_/CLUSTER_AUTHORIZATION_FAILED. ACLs are kept in the data directory
    /// (`tidelog acls`, CreateAcls). The in-process API is not affected. Default = off:
    /// every client may do everything.
    pub fn authorizer(mut self, on: bool) -> Self {
        self.config.authorizer = on;
        self
    }

    /// Principals allowed everything when the authorizer is on (Kafka's `super.users`:
    /// `User:admin`, several separated by `;`). Default = none.
    pub fn super_users<I, S>(mut self, principals: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        self.config.super_users = crate::security::super_users(principals)
            .into_iter()
            .collect();
        self
    }

    /// The addresses clients are told to connect to in Metadata, FindCoordinator and
    /// DescribeCluster responses, for when the bind addresses are not reachable from
    /// them, as Kafka's `advertised.listeners`: `NAME://HOST:PORT` entries separated by
    /// commas, one per listener name (`INTERNAL://broker1:9093,EXTERNAL://public:9094`);
    /// a bare `HOST:PORT` (or `HOST`, keeping the bound port) is the first listener's.
    /// Each client is answered with the addresses of the listener it connected on; in a
    /// cluster every node registers all its listeners so that this holds for the other
    /// nodes too. Default = each listener's bound address (a single node bound to
    /// `0.0.0.0` answers every client with the address it reached; a cluster node
    /// advertises its quorum host). An entry naming no listener makes
    /// [`start`](Self::start) fail with `Error::InvalidConfig` for
    /// `advertised.listeners`.
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

    /// The most record bytes one Fetch response carries (Kafka's broker setting
    /// `fetch.max.bytes`): a client's `max_bytes` above it is capped to it, and the first
    /// partition with data still gets at least one whole batch, however large. Values
    /// under 1,024 are raised to 1,024. Follower fetches are not capped (as in Kafka).
    /// Default = 55 MiB, as Kafka's. A client decodes a response only once all of it has
    /// arrived (librdkafka hands none of its records to the application before), so a
    /// smaller cap (1 MiB, say) lets a consumer asking for many megabytes decode one
    /// response while the next is on its way: its first record comes sooner.
    pub fn fetch_max_bytes(mut self, bytes: usize) -> Self {
        self.config.fetch_max_bytes = bytes.clamp(MIN_FETCH_MAX_BYTES, i32::MAX as usize);
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

    /// Makes this server node `id` of a cluster (Kafka `node.id`); needs
    /// [`ServerBuilder::quorum`] too. Without both the server is a single node, as
    /// always. A cluster node keeps its metadata log in `<data>/__cluster_metadata-0/`
    /// and its identity in `<data>/meta.properties`, and refuses a data directory of
    /// another node or cluster, or one with a single node's topics.
    ///
    /// ```no_run
    /// # fn main() -> tidelog::Result<()> {
    /// let broker = tidelog::Broker::open("data-1")?;
    /// let server = tidelog::Server::builder(broker)
    ///     .listen("127.0.0.1:9092")
    ///     .node_id(1)
    ///     .quorum("1@127.0.0.1:9093,2@127.0.0.1:9193,3@127.0.0.1:9293")
    ///     .start()?;
    /// server.run_until_signal()?; // SIGTERM: controlled shutdown, then stop
    /// # Ok(())
    /// # }
    /// ```
    pub fn node_id(mut self, id: i32) -> Self {
        self.cluster.node_id = Some(id);
        self
    }

    /// Every voter of the cluster's metadata quorum with its quorum address, as Kafka's
    /// `controller.quorum.voters`: `1@host:port,2@host:port,3@host:port`. Each node lists
    /// all of them (itself included) and listens for its peers on its own entry's
    /// address. Checked by [`ServerBuilder::start`].
    pub fn quorum(mut self, voters: impl Into<String>) -> Self {
        self.cluster.quorum = Some(voters.into());
        self
    }

    /// Cluster: a broker the controller has not heard from for this long is fenced (its
    /// partitions get new leaders). Default = 9 s (Kafka `broker.session.timeout.ms`).
    pub fn broker_session_timeout(mut self, timeout: Duration) -> Self {
        self.cluster.session_timeout = Some(timeout);
        self
    }

    /// Cluster: replicas of a topic created without a replication factor (auto-created,
    /// `Broker::create_topic`, CreateTopics with -1). Default = 1 (Kafka
    /// `default.replication.factor`).
    pub fn default_replication_factor(mut self, factor: i16) -> Self {
        self.cluster.default_replication_factor = Some(factor);
        self
    }

    /// Cluster: the fewest in-sync replicas an `acks=all` produce needs, for topics that
    /// do not set `min.insync.replicas`. Default = 1 (Kafka `min.insync.replicas`).
    pub fn min_insync_replicas(mut self, replicas: i32) -> Self {
        self.cluster.min_insync_replicas = Some(replicas);
        self
    }

    /// Cluster: the listener replica fetchers (this node's, and the other nodes' when
    /// they fetch from this one) connect to, as Kafka's `inter.broker.listener.name`:
    /// the first listener with `protocol`. Every node of a cluster should name the same.
    /// With a SASL protocol, give the fetchers' login with
    /// [`inter_broker_sasl`](Self::inter_broker_sasl); with a TLS one, the CA of the
    /// nodes' certificates with [`inter_broker_ca`](Self::inter_broker_ca). Default = the
    /// first listener, reached in plaintext.
    pub fn inter_broker_listener(mut self, protocol: SecurityProtocol) -> Self {
        self.cluster.inter_broker_listener = Some(InterBrokerListener::Protocol(protocol));
        self
    }

    /// Cluster: the inter-broker listener by name, as Kafka's
    /// `inter.broker.listener.name=INTERNAL` (see
    /// [`listener_name`](Self::listener_name) and
    /// [`add_named_listener`](Self::add_named_listener)). A protocol name that names no
    /// listener selects the only listener with that protocol (an error if several have
    /// it), so `SSL` keeps meaning what [`inter_broker_listener`](Self::inter_broker_listener)
    /// meant. An unknown name makes [`start`](Self::start) fail with
    /// `Error::InvalidConfig` for `inter.broker.listener.name`.
    pub fn inter_broker_listener_name(mut self, name: impl Into<String>) -> Self {
        self.cluster.inter_broker_listener = Some(InterBrokerListener::Name(name.into()));
        self
    }

    /// Cluster: the certificate chain and private key (PEM) replica fetchers present on
    /// a TLS inter-broker listener (Kafka's inter-broker keystore), for nodes whose SSL
    /// inter-broker listener requires client certificates
    /// ([`TlsSettings::client_ca`]): the certificate's subject is the fetchers'
    /// principal (`User:CN=...`), which needs ClusterAction on the cluster, or to be a
    /// super user, when the authorizer is on. Default = the node's own
    /// [`tls`](Self::tls) certificate and key, as a Kafka broker uses its listener's
    /// keystore for both ends.
    pub fn inter_broker_client_cert(
        mut self,
        cert: impl Into<std::path::PathBuf>,
        key: impl Into<std::path::PathBuf>,
    ) -> Self {
        self.cluster.inter_broker_client_cert = Some((cert.into(), key.into()));
        self
    }

    /// Cluster: how this node's replica fetchers log in on a SASL inter-broker listener
    /// (Kafka's `sasl.mechanism.inter.broker.protocol` and the listener's JAAS login).
    /// With the authorizer on, the principal (`User:NAME`) needs ClusterAction on the
    /// cluster, or to be a super user; the user is cluster metadata like any other.
    pub fn inter_broker_sasl(
        mut self,
        mechanism: SaslMechanism,
        username: impl Into<String>,
        password: impl Into<String>,
    ) -> Self {
        self.cluster.inter_broker_sasl = Some(crate::security::SaslLogin {
            mechanism,
            username: username.into(),
            password: password.into(),
        });
        self
    }

    /// Cluster: the PEM file of the CA that signed the nodes' certificates, which replica
    /// fetchers check on a TLS inter-broker listener (Kafka's inter-broker truststore).
    pub fn inter_broker_ca(mut self, path: impl Into<std::path::PathBuf>) -> Self {
        self.cluster.inter_broker_ca = Some(path.into());
        self
    }

    /// Cluster: the security protocol of the quorum port (Raft traffic between the
    /// voters), as Kafka's `listener.security.protocol.map` for the controller listener:
    /// [`SecurityProtocol::Plaintext`] (the default) or [`SecurityProtocol::Ssl`], mutual
    /// TLS with the certificate and key of [`tls`](Self::tls) as both server and client
    /// certificate, and the peers' certificates checked against
    /// [`quorum_ca`](Self::quorum_ca). SASL protocols are refused by
    /// [`start`](Self::start).
    pub fn quorum_security_protocol(mut self, protocol: SecurityProtocol) -> Self {
        self.cluster.quorum_protocol = Some(protocol);
        self
    }

    /// Cluster: the PEM file of the CA that signed the nodes' certificates, which an SSL
    /// quorum port checks in both directions: a peer's certificate must be signed by it
    /// and name the host of that voter's quorum address.
    pub fn quorum_ca(mut self, path: impl Into<std::path::PathBuf>) -> Self {
        self.cluster.quorum_ca = Some(path.into());
        self
    }

    /// Cluster: a follower that has not caught up for this long leaves the ISR. Default =
    /// 30 s (Kafka `replica.lag.time.max.ms`).
    pub fn replica_lag_time_max(mut self, lag: Duration) -> Self {
        self.cluster.replica_lag_time_max = Some(lag);
        self
    }

    /// Cluster: replicas of `__consumer_offsets`, capped at the number of voters (with a
    /// warning). Default = 3 (Kafka `offsets.topic.replication.factor`).
    pub fn offsets_topic_replication_factor(mut self, factor: i16) -> Self {
        self.cluster.offsets_topic_replication_factor = Some(factor);
        self
    }

    /// Cluster: the controller moves leaderships back to the preferred replicas (the
    /// first replica of each partition) when they are imbalanced, e.g. after a rolling
    /// restart left every leader on the node that stayed up. Default = true (Kafka
    /// `auto.leader.rebalance.enable`).
    pub fn auto_leader_rebalance(mut self, enable: bool) -> Self {
        self.cluster.auto_leader_rebalance = Some(enable);
        self
    }

    /// Cluster: how often the controller checks the leaders' balance. Default = 300 s
    /// (Kafka `leader.imbalance.check.interval.seconds`).
    pub fn leader_imbalance_check_interval(mut self, interval: Duration) -> Self {
        self.cluster.leader_imbalance_check_interval = Some(interval);
        self
    }

    /// Cluster: a broker's partitions are rebalanced when more than this percentage of
    /// those it is the preferred replica of are led by another broker. Default = 10
    /// (Kafka `leader.imbalance.per.broker.percentage`).
    pub fn leader_imbalance_per_broker_percentage(mut self, percentage: u32) -> Self {
        self.cluster.leader_imbalance_per_broker_percentage = Some(percentage);
        self
    }

    /// Tests: a quorum listener bound beforehand (port 0), and snapshots every `n`
    /// entries.
    #[cfg(test)]
    pub(crate) fn test_cluster(
        mut self,
        quorum_listener: TcpListener,
        snapshot_after_entries: usize,
    ) -> Self {
        self.cluster.quorum_listener = Some(quorum_listener);
        self.cluster.snapshot_after_entries = Some(snapshot_after_entries);
        self
    }

    /// The cluster node's settings, if the builder was given a node id or quorum.
    fn cluster_config(
        &mut self,
        listeners: &[(String, SecurityProtocol, SocketAddr)],
    ) -> Result<Option<crate::cluster::ClusterConfig>> {
        let local = listeners[0].2;
        if self.cluster.node_id.is_none() && self.cluster.quorum.is_none() {
            return Ok(None);
        }
        let quorum_tls = self.quorum_tls()?;
        let c = &mut self.cluster;
        let (node_id, quorum) = match (c.node_id, c.quorum.as_deref()) {
            (None, None) => return Ok(None),
            (Some(id), Some(q)) => (id, q),
            (Some(_), None) | (None, Some(_)) => {
                return Err(crate::error::Error::InvalidConfig {
                    key: "node.id".into(),
                    reason: "a cluster node needs both a node id and the quorum's voters".into(),
                });
            }
        };
        let voters = crate::cluster::parse_quorum(quorum)?;
        // Other brokers and clients must reach this address: a wildcard listen address
        // is advertised with this node's quorum host.
        let quorum_host = voters
            .iter()
            .find(|v| v.id == node_id)
            .and_then(|v| v.addr.rsplit_once(':').map(|(h, _)| h.to_string()))
            .unwrap_or_else(|| "localhost".into());
        let reachable = |addr: SocketAddr| {
            if addr.ip().is_unspecified() {
                format!("{quorum_host}:{}", addr.port())
            } else {
                addr.to_string()
            }
        };
        // Every listener by name, at its advertised address or else its bound one.
        let endpoints: Vec<crate::cluster::records::Endpoint> = listeners
            .iter()
            .zip(&self.config.advertised_listeners)
            .map(|((name, protocol, addr), (_, adv))| {
                let (host, port) = match adv {
                    Some((host, port)) => (host.clone(), port.unwrap_or(addr.port())),
                    None if addr.ip().is_unspecified() => (quorum_host.clone(), addr.port()),
                    None => (addr.ip().to_string(), addr.port()),
                };
                crate::cluster::records::Endpoint {
                    name: name.clone(),
                    host,
                    port,
                    protocol: *protocol,
                }
            })
            .collect();
        let advertised = match endpoints.first() {
            Some(e) => e.address(),
            None => reachable(local),
        };
        let replication = match &c.inter_broker_listener {
            None => None,
            Some(which) => {
                let index = which.resolve(listeners)?;
                let protocol = listeners[index].1;
                // The fetchers' certificate: the one given, else the node's own.
                let identity = match (&c.inter_broker_client_cert, &self.config.tls) {
                    (Some((cert, key)), _) => Some(crate::security::ClientIdentity { cert, key }),
                    (None, Some(tls)) => Some(tls.identity()),
                    (None, None) => None,
                };
                let security = crate::client::ClientSecurity::new(
                    protocol,
                    c.inter_broker_ca.as_deref(),
                    identity,
                    c.inter_broker_sasl.clone(),
                )
                .map_err(|e| match e {
                    crate::error::Error::InvalidConfig { key, reason } => {
                        crate::error::Error::InvalidConfig {
                            key: format!("inter-broker {key}"),
                            reason,
                        }
                    }
                    other => other,
                })?;
                // The first listener is advertised already.
                let addr = (index > 0).then(|| match endpoints.get(index) {
                    Some(e) => e.address(),
                    None => reachable(listeners[index].2),
                });
                Some((addr, security))
            }
        };
        let mut config = crate::cluster::ClusterConfig::new(node_id, voters, advertised);
        config.quorum_tls = quorum_tls;
        config.endpoints = endpoints;
        if let Some((addr, security)) = replication {
            config.replication_listener = addr;
            config.replication_security = Arc::new(security);
        }
        if let Some(t) = c.session_timeout {
            config.session_timeout = t;
        }
        if let Some(f) = c.default_replication_factor {
            config.default_replication_factor = f;
        }
        if let Some(m) = c.min_insync_replicas {
            config.min_insync_replicas = m;
        }
        if let Some(l) = c.replica_lag_time_max {
            config.replica_lag_time_max = l;
        }
        if let Some(f) = c.offsets_topic_replication_factor {
            config.offsets_topic_replication_factor = f;
        }
        if let Some(e) = c.auto_leader_rebalance {
            config.auto_leader_rebalance = e;
        }
        if let Some(i) = c.leader_imbalance_check_interval {
            config.leader_imbalance_check_interval = i;
        }
        if let Some(p) = c.leader_imbalance_per_broker_percentage {
            config.leader_imbalance_per_broker_percentage = p;
        }
        config.default_partitions = self.broker.config().default_partitions;
        #[cfg(test)]
        {
            config.quorum_listener = c.quorum_listener.take();
            if let Some(n) = c.snapshot_after_entries {
                config.snapshot_after_entries = n;
            }
        }
        Ok(Some(config))
    }

    /// The quorum port's TLS, from `quorum_security_protocol`, `quorum_ca` and `tls`.
    fn quorum_tls(&self) -> Result<Option<Arc<crate::cluster::quorum_tls::QuorumTls>>> {
        let invalid = |key: &str, reason: String| crate::error::Error::InvalidConfig {
            key: key.into(),
            reason,
        };
        let c = &self.cluster;
        match c.quorum_protocol.unwrap_or(SecurityProtocol::Plaintext) {
            SecurityProtocol::Plaintext => match &c.quorum_ca {
                None => Ok(None),
                Some(ca) => Err(invalid(
                    crate::cluster::quorum_tls::CA_KEY,
                    format!(
                        "{} is set but the quorum port is PLAINTEXT: set quorum-security-protocol to SSL",
                        ca.display()
                    ),
                )),
            },
            SecurityProtocol::Ssl => {
                let tls = self.config.tls.as_ref().ok_or_else(|| {
                    invalid(
                        "quorum-security-protocol",
                        "SSL needs the node's certificate and key (tls-cert, tls-key), used as both server and client certificate".into(),
                    )
                })?;
                let ca = c.quorum_ca.as_deref().ok_or_else(|| {
                    invalid(
                        crate::cluster::quorum_tls::CA_KEY,
                        "the SSL quorum port needs the PEM file of the CA that signed the nodes' certificates".into(),
                    )
                })?;
                Ok(Some(Arc::new(crate::cluster::quorum_tls::QuorumTls::load(
                    tls, ca,
                )?)))
            }
            other => Err(invalid(
                "quorum-security-protocol",
                format!("{other}: the quorum port speaks PLAINTEXT or SSL (mutual TLS)"),
            )),
        }
    }

    /// Bind the address (unless a [`listener`](ServerBuilder::listener) was given) and
    /// start the accept thread (and, for a cluster node, the node's quorum threads
    /// first).
    pub fn start(mut self) -> Result<ServerHandle> {
        if let Some(e) = self.listen_error.take()
            && self.listener.is_none()
        {
            return Err(e);
        }
        let listen = self.config.listen;
        let listener = match self.listener.take() {
            Some(l) => l,
            None => TcpListener::bind(listen).ctx("bind", listen.to_string())?,
        };
        let local = listener.local_addr().ctx("bind", listen.to_string())?;
        let name = |n: Option<String>, p: SecurityProtocol| {
            n.map_or_else(|| p.name().to_string(), |n| n.to_ascii_uppercase())
        };
        let mut names = vec![name(self.listener_name.take(), self.config.protocol)];
        let mut listeners = vec![(self.config.protocol, listener, local)];
        for (n, protocol, endpoint) in std::mem::take(&mut self.extra_listeners) {
            let n = name(n, protocol);
            if names.contains(&n) {
                return Err(crate::error::Error::InvalidConfig {
                    key: "listeners".into(),
                    reason: format!(
                        "two listeners are named {n}: each listener needs a name of its own \
                         (NAME://HOST:PORT with NAME:PROTOCOL in the listener security protocol map)"
                    ),
                });
            }
            let l = endpoint.bind()?;
            let addr = l.local_addr().ctx("bind", format!("the {n} listener"))?;
            names.push(n);
            listeners.push((protocol, l, addr));
        }
        let tls = self.config.tls.as_ref().map(|t| t.load()).transpose()?;
        if let Some((p, _, addr)) = listeners
            .iter()
            .find(|(p, _, _)| p.uses_tls() && tls.is_none())
        {
            return Err(crate::error::Error::InvalidConfig {
                key: "tls".into(),
                reason: format!("the {p} listener on {addr} needs a TLS certificate and key"),
            });
        }
        let bound: Vec<(String, SecurityProtocol, SocketAddr)> = names
            .iter()
            .zip(&listeners)
            .map(|(n, (p, _, a))| (n.clone(), *p, *a))
            .collect();
        let advertised = match &self.config.advertised {
            Some(spec) => advertised::resolve(spec, &names)?,
            None => vec![None; names.len()],
        };
        self.config.advertised_listeners = names.iter().cloned().zip(advertised).collect();
        let cluster = match self.cluster_config(&bound)? {
            Some(config) => Some(crate::cluster::ClusterNode::start(&self.broker, config)?),
            None if self.broker.is_cluster_node() => {
                return Err(crate::error::Error::InvalidConfig {
                    key: "node.id".into(),
                    reason: format!(
                        "{} is a cluster node's data directory; start it with its node id and the quorum",
                        self.broker.dir().display()
                    ),
                });
            }
            None => None,
        };
        let security = match self.security(tls, cluster.as_ref()) {
            Ok(s) => s,
            Err(e) => {
                if let Some(c) = &cluster {
                    c.shutdown();
                }
                return Err(e);
            }
        };
        let metrics = Arc::<crate::metrics::server::ServerStats>::default();
        self.broker.stats().attach_server(&metrics);
        let producers = producer_ids(self.broker.dir(), cluster.as_ref());
        let backend: Arc<dyn Backend> = Arc::new(broker_backend::BrokerBackend {
            broker: self.broker,
            cluster: cluster
                .clone()
                .map(|c| c as Arc<dyn cluster_view::ClusterView>),
        });
        // Counted once the cluster node (if any) has opened its sockets and files.
        let fds = limits::Descriptors::now(&listeners[0].1);
        let shared = Arc::new(Shared::new(
            self.config,
            backend,
            fds,
            metrics,
            security,
            producers,
        ));
        let mut accepts = Vec::with_capacity(listeners.len());
        let named = bound;
        let mut bound = Vec::with_capacity(listeners.len());
        for ((protocol, l, addr), name) in listeners.into_iter().zip(&names) {
            match listener::spawn(shared.clone(), l, protocol, Arc::from(name.as_str())) {
                Ok(a) => accepts.push((a, addr)),
                Err(e) => {
                    listener::shutdown(&shared, accepts);
                    if let Some(c) = &cluster {
                        c.shutdown();
                    }
                    return Err(e).ctx("spawn the accept thread for", addr.to_string());
                }
            }
            tracing::info!(
                local = %addr,
                listener = %name,
                %protocol,
                max_connections = shared.max_connections,
                open_files_limit = fds.soft_limit,
                "listening"
            );
            bound.push((protocol, addr));
        }
        Ok(ServerHandle {
            shared,
            accepts,
            local,
            listeners: bound,
            named,
            cluster,
        })
    }

    /// The security settings: `tls`, the credential and ACL stores (the data
    /// directory's files on a single node, the metadata image on a cluster node) and the
    /// authorizer, from the builder's settings.
    fn security(
        &self,
        tls: Option<crate::security::tls::TlsAcceptors>,
        cluster: Option<&Arc<crate::cluster::ClusterNode>>,
    ) -> Result<crate::security::Security> {
        use crate::security::acl::AclStore;
        use crate::security::credentials::CredentialStore;
        let dir = self.broker.dir();
        let authorizer = self.config.authorizer;
        let (credentials, acls): (Arc<dyn CredentialStore>, Option<Arc<dyn AclStore>>) =
            match cluster {
                None => (
                    Arc::new(crate::security::credentials::FileCredentialStore::open(
                        dir,
                    )?),
                    if authorizer {
                        Some(Arc::new(crate::security::acl::FileAclStore::open(dir)?))
                    } else {
                        None
                    },
                ),
                Some(node) => {
                    for file in [
                        crate::security::credentials::USERS_FILE,
                        crate::security::acl::ACLS_FILE,
                    ] {
                        let path = dir.join(file);
                        if path.exists() {
                            tracing::warn!(
                                file = %path.display(),
                                "a cluster node keeps users and ACLs in the cluster's metadata \
                                 log: {} is not used (add its users and ACLs to the cluster with \
                                 tidelog users|acls --bootstrap, then remove it)",
                                path.display()
                            );
                        }
                    }
                    (
                        Arc::new(crate::cluster::security::ClusterCredentials(node.clone())),
                        Some(Arc::new(crate::cluster::security::ClusterAcls(
                            node.clone(),
                        ))),
                    )
                }
            };
        let mut security = crate::security::Security::new(credentials);
        security.mechanisms = self.config.sasl_mechanisms.clone();
        security.tls = tls;
        if let Some(acls) = acls.filter(|_| authorizer) {
            security.authorizer = Some(crate::security::acl::Authorizer::new(
                acls,
                self.config.super_users.iter().cloned().collect(),
            ));
        }
        Ok(security)
    }
}

/// The producer ids of idempotent producers: blocks from the controller on a cluster
/// node (held weakly: the node's threads must be able to end), else from the data
/// directory's file.
fn producer_ids(
    dir: &std::path::Path,
    cluster: Option<&Arc<crate::cluster::ClusterNode>>,
) -> ProducerIds {
    match cluster {
        Some(node) => {
            let node = Arc::downgrade(node);
            ProducerIds::with_block_source(
                dir.to_path_buf(),
                Box::new(move |count| match node.upgrade() {
                    Some(n) => n.allocate_producer_ids(count, Duration::from_secs(10)),
                    None => Err(crate::error::Error::Closed("cluster node".into())),
                }),
            )
        }
        None => ProducerIds::new(dir.to_path_buf()),
    }
}

/// A running server. Dropping it shuts it down like [`ServerHandle::shutdown`].
#[derive(Debug)]
pub struct ServerHandle {
    shared: Arc<Shared>,
    /// The accept thread of each listener and the address it listens on; empty once
    /// stopped.
    accepts: Vec<(JoinHandle<()>, SocketAddr)>,
    local: SocketAddr,
    listeners: Vec<(SecurityProtocol, SocketAddr)>,
    /// Every listener's name, protocol and address, the `listen` one first.
    named: Vec<(String, SecurityProtocol, SocketAddr)>,
    cluster: Option<Arc<crate::cluster::ClusterNode>>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl ServerHandle {
    /// The address the server listens on (with the real port when bound to port 0):
    /// the [`listen`](ServerBuilder::listen) listener's.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Every listener's protocol and bound address, the `listen` one first.
    pub fn listeners(&self) -> &[(SecurityProtocol, SocketAddr)] {
        &self.listeners
    }

    /// Every listener's name (upper-cased; its protocol's name unless it was given one),
    /// protocol and bound address, the `listen` one first.
    pub fn named_listeners(&self) -> &[(String, SecurityProtocol, SocketAddr)] {
        &self.named
    }

    /// The address of the listener named `name` (case-insensitive), if there is one.
    pub fn listener_addr_by_name(&self, name: &str) -> Option<SocketAddr> {
        self.named
            .iter()
            .find(|(n, _, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, _, a)| *a)
    }

    /// The address of the first listener with `protocol`, if there is one.
    pub fn listener_addr(&self, protocol: SecurityProtocol) -> Option<SocketAddr> {
        self.listeners
            .iter()
            .find(|(p, _)| *p == protocol)
            .map(|(_, a)| *a)
    }

    /// The users' SCRAM credentials this server authenticates against: the data
    /// directory's `users` file on a single node; on a cluster node the cluster's
    /// metadata, where a change goes through the controller and returns once this node
    /// applied it. The in-process API is trusted: nothing here is authorized.
    pub fn credential_store(&self) -> Arc<dyn crate::security::credentials::CredentialStore> {
        self.shared.security.credentials.clone()
    }

    /// The ACL bindings the authorizer checks (None without
    /// [`authorizer`](ServerBuilder::authorizer)): the data directory's `acls` file on a
    /// single node; on a cluster node the cluster's metadata, as
    /// [`credential_store`](ServerHandle::credential_store).
    pub fn acl_store(&self) -> Option<Arc<dyn crate::security::acl::AclStore>> {
        self.shared
            .security
            .authorizer
            .as_ref()
            .map(|a| a.store().clone())
    }

    /// The connection limit in force: [`ServerBuilder::max_connections`], or fewer if
    /// the open-files limit could not hold that many when the server started.
    pub fn max_connections(&self) -> usize {
        self.shared.max_connections
    }

    /// Stop accepting connections, let requests in flight finish and get their
    /// responses, close every connection and join every server thread. A cluster node
    /// first moves the leadership of its partitions to other in-sync replicas
    /// (controlled shutdown, waiting at most 5 s for the controller), and stops its
    /// quorum threads last.
    pub fn shutdown(mut self) -> Result<()> {
        self.stop();
        Ok(())
    }

    /// The node id of a cluster node, None for a single node.
    pub fn node_id(&self) -> Option<i32> {
        self.cluster.as_ref().map(|c| c.node_id())
    }

    /// The cluster node behind this server (tests).
    #[cfg(test)]
    pub(crate) fn cluster_node(&self) -> Option<&Arc<crate::cluster::ClusterNode>> {
        self.cluster.as_ref()
    }

    /// Stops like a killed process would, as far as the cluster can tell: no controlled
    /// shutdown (tests).
    #[cfg(test)]
    pub(crate) fn halt(mut self) {
        if let Some(c) = self.cluster.take() {
            c.shutdown();
        }
        self.stop();
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
        if let Some(cluster) = &self.cluster
            && !self.accepts.is_empty()
        {
            if cluster.controller_id().is_none() {
                tracing::warn!(
                    node = cluster.node_id(),
                    "no controller reachable: stopping without a controlled shutdown"
                );
            } else if let Err(e) = cluster.controlled_shutdown(CONTROLLED_SHUTDOWN_TIMEOUT) {
                tracing::warn!(node = cluster.node_id(), error = %e, "controlled shutdown failed; stopping anyway");
            }
        }
        if !self.accepts.is_empty() {
            listener::shutdown(&self.shared, std::mem::take(&mut self.accepts));
            tracing::info!(local = %self.local, "server stopped");
        }
        if let Some(cluster) = self.cluster.take() {
            cluster.shutdown();
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
mod tests_admin;
#[cfg(test)]
mod tests_api;
#[cfg(test)]
mod tests_api_table;
#[cfg(test)]
mod tests_cluster_view;
#[cfg(test)]
mod tests_error_codes;
#[cfg(test)]
mod tests_groups;
#[cfg(test)]
mod tests_listeners;
#[cfg(test)]
mod tests_security;
