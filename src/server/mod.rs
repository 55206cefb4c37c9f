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
//!   the open-files limit allows), `max_connections_per_ip` and its overrides (Kafka's
//!   `max.connections.per.ip`, per client address), `max_request_size` (Kafka's
//!   `socket.request.max.bytes`), `max_queued_request_bytes` (memory of all requests in
//!   flight, Kafka's `queued.max.request.bytes`), `fetch_max_wait` (the longest a
//!   Fetch waits for data) and `fetch_max_bytes` (the record bytes of a consumer's Fetch
//!   response, Kafka's broker `fetch.max.bytes`). A connection whose client hangs up while its request waits
//!   is closed within a second. Warnings about what a peer sent are rate-limited per
//!   address. See the `limits` module.
//! - Security (`crate::security`): several listeners, each PLAINTEXT, SSL (rustls),
//!   SASL_PLAINTEXT or SASL_SSL (PLAIN, SCRAM-SHA-256/512), and ACLs checked by every
//!   API handler when the authorizer is on. Fetches on TLS listeners copy file bytes
//!   through the TLS writer; plaintext ones keep `sendfile`.
//! - A cluster node's role is started by the `node` module; the API handlers see the
//!   cluster only through the `cluster_view` module's `ClusterView` trait.
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
mod fetch_session;
#[cfg(any(test, feature = "testing"))]
mod fuzz;
mod idempotence;
mod ip_connections;
mod limits;
mod listener;
mod node;
mod node_broker_configs;
mod partition_admin;
mod sendfile;
mod throttle;
mod topic_ids;
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
use node::ClusterSettings;
#[cfg(test)]
use node::InterBrokerListener;

#[cfg(any(test, feature = "testing"))]
pub(crate) use fuzz::{fuzz_decode_request, fuzz_sasl_session, fuzz_tls_handshake};
#[cfg(any(test, feature = "testing"))]
pub(crate) use sendfile::sendfile_bytes_sent;

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
    /// Kafka's `listeners` as bound (`NAME://HOST:PORT,...`), set by
    /// [`ServerBuilder::start`].
    pub listeners: String,
    /// Most connections served at once.
    pub max_connections: usize,
    /// Most connections served at once from one client address (Kafka's
    /// `max.connections.per.ip`).
    pub max_connections_per_ip: usize,
    /// Kafka's `max.connections.per.ip.overrides`: `HOST:LIMIT,...`.
    pub max_connections_per_ip_overrides: String,
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
    /// The most incremental fetch sessions held at once.
    pub fetch_session_cache_slots: usize,
    /// The most partitions one DescribeTopicPartitions response carries (Kafka's
    /// `max.request.partition.size.limit`).
    pub max_request_partition_size_limit: i32,
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
    /// How client quota usage is measured (Kafka's `quota.window.size.seconds` and
    /// `quota.window.num`).
    pub quota_windows: crate::security::quota::QuotaWindows,
    /// Whether a cluster node takes a follower's fetch that carries no broker epoch.
    pub follower_fetch_without_epoch: bool,
    /// Kafka's `replica.selector.class` is the rack-aware selector: a consumer of a
    /// rack where an in-sync follower is is told to fetch from it (KIP-392).
    pub rack_aware_replica_selector: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: SocketAddr::from(([127, 0, 0, 1], 9092)),
            advertised: None,
            advertised_listeners: Vec::new(),
            listeners: String::new(),
            max_connections: 10_000,
            max_connections_per_ip: usize::MAX,
            max_connections_per_ip_overrides: String::new(),
            max_request_size: codec::DEFAULT_MAX_REQUEST_SIZE,
            auto_create_topics: false,
            idle_timeout: Duration::from_secs(600),
            write_timeout: Duration::from_secs(60),
            fetch_max_wait: DEFAULT_FETCH_MAX_WAIT,
            fetch_max_bytes: DEFAULT_FETCH_MAX_BYTES,
            fetch_session_cache_slots: fetch_session::DEFAULT_SLOTS,
            max_request_partition_size_limit: api::DEFAULT_MAX_REQUEST_PARTITION_SIZE_LIMIT,
            max_queued_request_bytes: limits::DEFAULT_MAX_QUEUED_REQUEST_BYTES,
            protocol: SecurityProtocol::Plaintext,
            tls: None,
            sasl_mechanisms: SaslMechanism::ALL.to_vec(),
            authorizer: false,
            quota_windows: Default::default(),
            follower_fetch_without_epoch: false,
            rack_aware_replica_selector: false,
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
    /// Open connections per client address (`max_connections_per_ip`).
    pub ip_connections: ip_connections::IpConnections,
    /// Requests being handled right now (read, not yet answered).
    pub in_flight: AtomicUsize,
    /// Fetch long polls waiting for data.
    pub long_polls: LongPolls,
    /// The incremental fetch sessions (KIP-227).
    pub fetch_sessions: fetch_session::FetchSessions,
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
        let fetch_sessions = fetch_session::FetchSessions::new(config.fetch_session_cache_slots);
        Shared {
            ip_connections: ip_connections::IpConnections::new(
                config.max_connections_per_ip,
                std::collections::HashMap::new(),
            ),
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
            fetch_sessions,
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

/// A listener's protocol, socket and bound address.
type BoundListener = (SecurityProtocol, TcpListener, SocketAddr);

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

    /// Most connections served at once from one client address (Kafka's
    /// `max.connections.per.ip`; default: no limit). One more from that address is
    /// closed as soon as it is accepted, and logged.
    pub fn max_connections_per_ip(mut self, n: usize) -> Self {
        self.config.max_connections_per_ip = n;
        self
    }

    /// Limits of given client addresses instead of
    /// [`max_connections_per_ip`](Self::max_connections_per_ip) (Kafka's
    /// `max.connections.per.ip.overrides`): `HOST:LIMIT` pairs separated by commas, a
    /// host an IP address (IPv6 in brackets) or a host name, resolved by
    /// [`ServerBuilder::start`] to every address it has (`127.0.0.1:100,[::1]:0,
    /// localhost:5`). `start` fails with
    /// [`Error::InvalidConfig`](crate::error::Error::InvalidConfig) naming a pair that is
    /// not a host and a count, a name that does not resolve, or an address two pairs
    /// name.
    pub fn max_connections_per_ip_overrides(mut self, spec: impl Into<String>) -> Self {
        self.config.max_connections_per_ip_overrides = spec.into();
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

    /// Cluster: take a follower's fetch that carries no broker epoch (Fetch v14 and
    /// below, or v15+ with `replica_epoch` -1), which cannot be checked against the
    /// follower's registration (KIP-903). Default false: refused with
    /// NOT_LEADER_OR_FOLLOWER, so no process can move the high watermark in a follower's
    /// name without proving its incarnation. Turn it on only while a rolling upgrade from
    /// a version that sends no broker epoch is under way.
    pub fn follower_fetch_without_epoch(mut self, accept: bool) -> Self {
        self.config.follower_fetch_without_epoch = accept;
        self
    }

    /// Cluster: which replica a consumer should fetch from (Kafka's
    /// `replica.selector.class`, KIP-392). `org.apache.kafka.common.replica.RackAwareReplicaSelector`
    /// (or `RackAwareReplicaSelector`): a consumer that names its rack (`client.rack`)
    /// is sent, by the partition's leader, to an in-sync replica in that rack that has
    /// the records it asks for. `org.apache.kafka.common.replica.LeaderSelector` (or
    /// `LeaderSelector`), the default: the leader. Any other name is
    /// `Error::InvalidConfig`. Followers serve a consumer's fetch up to their high
    /// watermark whatever the selector (Fetch v11+).
    pub fn replica_selector_class(mut self, name: &str) -> Result<Self> {
        const PACKAGE: &str = "org.apache.kafka.common.replica.";
        self.config.rack_aware_replica_selector = match name.strip_prefix(PACKAGE).unwrap_or(name) {
            "RackAwareReplicaSelector" => true,
            "LeaderSelector" => false,
            _ => {
                return Err(crate::error::Error::InvalidConfig {
                    key: "replica.selector.class".into(),
                    reason: format!(
                        "{name:?} is not a replica selector tidelog has: \
                         org.apache.kafka.common.replica.RackAwareReplicaSelector or \
                         org.apache.kafka.common.replica.LeaderSelector"
                    ),
                });
            }
        };
        Ok(self)
    }

    /// How a client's usage is measured against its quotas: over the last `samples`
    /// windows of `window` each (Kafka's `quota.window.num` and
    /// `quota.window.size.seconds`). Default 11 windows of 1 s, as Kafka. A new client's
    /// first burst is spread over `samples - 1` windows, so fewer windows let less of it
    /// through unthrottled. `samples` below 2 is taken as 2.
    pub fn client_quota_window(mut self, window: Duration, samples: u32) -> Self {
        self.config.quota_windows = crate::security::quota::QuotaWindows {
            window: window.max(Duration::from_millis(1)),
            samples: samples.max(2),
        };
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

    /// The most incremental fetch sessions (KIP-227) the server holds at once (Kafka's
    /// `max.incremental.fetch.session.cache.slots`): a consumer of many partitions
    /// lists them once and then sends, and is answered, only what changed. When the
    /// cache is full a new session takes the slot of one idle for two minutes, or of a
    /// smaller consumer session at least two minutes old, as in Kafka; otherwise its
    /// client fetches without a session. 0 turns sessions off. Default = 1,000.
    pub fn fetch_session_cache_slots(mut self, slots: usize) -> Self {
        self.config.fetch_session_cache_slots = slots;
        self
    }

    /// The most partitions one DescribeTopicPartitions response carries, whatever its
    /// `response_partition_limit` (Kafka's `max.request.partition.size.limit`): an admin
    /// client describing more topics' partitions pages through them. Values under 1 are
    /// raised to 1. Default = 2,000, as Kafka's.
    pub fn max_request_partition_size_limit(mut self, partitions: usize) -> Self {
        self.config.max_request_partition_size_limit =
            i32::try_from(partitions).unwrap_or(i32::MAX).max(1);
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

    /// Bind every listener (or take the sockets bound by the caller): their names
    /// (upper-cased; the protocol's unless given one), and their protocols, sockets and
    /// addresses, the `listen` one first.
    fn bind(&mut self) -> Result<(Vec<String>, Vec<BoundListener>)> {
        let listen = self.config.listen;
        let listener = match self.listener.take() {
            Some(l) => l,
            None => TcpListener::bind(listen).ctx("bind", listen.to_string())?,
        };
        let name = |n: Option<String>, p: SecurityProtocol| {
            n.map_or_else(|| p.name().to_string(), |n| n.to_ascii_uppercase())
        };
        let mut names = vec![name(self.listener_name.take(), self.config.protocol)];
        let local = listener.local_addr().ctx("bind", listen.to_string())?;
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
        Ok((names, listeners))
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
        let ip_overrides =
            ip_connections::parse_overrides(&self.config.max_connections_per_ip_overrides)?;
        let (names, listeners) = self.bind()?;
        let local = listeners[0].2;
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
        self.config.listeners = bound
            .iter()
            .map(|(name, _, addr)| format!("{name}://{addr}"))
            .collect::<Vec<_>>()
            .join(",");
        let cluster = self.start_cluster(&bound)?;
        let security = match self.security(tls, cluster.as_ref()) {
            Ok(s) => s,
            Err(e) => {
                if let Some(c) = &cluster {
                    c.shutdown();
                }
                return Err(e);
            }
        };
        // A single node keeps its group configs in its data directory, a cluster in its
        // metadata image; the group and share coordinators read each group's from there.
        let group_configs: Arc<dyn crate::coordinator::group_configs::GroupConfigStore> = {
            let (coordinator, share) = (
                &self.broker.config().coordinator,
                &self.broker.config().share,
            );
            match &cluster {
                None => Arc::new(
                    crate::coordinator::group_configs::FileGroupConfigStore::open(
                        self.broker.dir(),
                        coordinator,
                        share,
                    )?,
                ),
                Some(node) => Arc::new(crate::cluster::group_configs::ClusterGroupConfigs::new(
                    node.clone(),
                    coordinator,
                    share,
                )),
            }
        };
        self.broker
            .group_coordinator()
            .set_group_configs(group_configs.clone());
        self.broker
            .share_state()
            .set_group_configs(group_configs.clone());
        let group_configs = Some(group_configs);
        let metrics = Arc::<crate::metrics::server::ServerStats>::default();
        self.broker.stats().attach_server(&metrics);
        let producers = node::producer_ids(self.broker.dir(), cluster.as_ref());
        // A single node keeps its dynamic broker configs in its data directory, a
        // cluster in its metadata image.
        let broker_configs = match &cluster {
            None => Some(Arc::new(node_broker_configs::NodeBrokerConfigs::open(
                &self.broker,
                api::NODE_ID,
            )?)),
            Some(_) => None,
        };
        let backend: Arc<dyn Backend> = Arc::new(broker_backend::BrokerBackend {
            broker: self.broker,
            cluster: cluster
                .clone()
                .map(|c| c as Arc<dyn cluster_view::ClusterView>),
            group_configs,
            broker_configs,
        });
        // Counted once the cluster node (if any) has opened its sockets and files.
        let fds = limits::Descriptors::now(&listeners[0].1);
        let mut shared = Shared::new(self.config, backend, fds, metrics, security, producers);
        shared.ip_connections =
            ip_connections::IpConnections::new(shared.config.max_connections_per_ip, ip_overrides);
        let shared = Arc::new(shared);
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
pub(crate) mod tests_api;
#[cfg(test)]
mod tests_api_table;
#[cfg(test)]
mod tests_broker_configs;
#[cfg(test)]
mod tests_cluster_view;
#[cfg(test)]
mod tests_consumer_groups;
#[cfg(test)]
mod tests_describe_topic_partitions;
#[cfg(test)]
mod tests_error_codes;
#[cfg(test)]
mod tests_fetch_session;
#[cfg(test)]
mod tests_groups;
#[cfg(test)]
mod tests_listeners;
#[cfg(test)]
mod tests_log_dirs;
#[cfg(test)]
mod tests_security;
#[cfg(test)]
mod tests_share_fetch_edges;
#[cfg(test)]
mod tests_share_groups;
#[cfg(test)]
pub(crate) mod tests_transactions;
#[cfg(test)]
mod tests_txn_read;
