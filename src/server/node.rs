//! Starting a node's cluster role: the builder's cluster settings (Kafka's `node.id`,
//! `controller.quorum.voters`, inter-broker listener and security, quorum TLS, ...), the
//! [`ClusterConfig`] they make, and what the server takes from the started
//! [`ClusterNode`] (its credential and ACL stores, producer-id blocks). This is the one
//! place of the server that uses the cluster node itself; the API handlers see it
//! through [`ClusterView`](super::cluster_view::ClusterView).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use super::idempotence::ProducerIds;
use super::{SecurityProtocol, ServerBuilder};
use crate::cluster::quorum_tls::{self, QuorumTls};
use crate::cluster::{ClusterConfig, ClusterNode};
use crate::error::Result;
use crate::security::sasl::SaslMechanism;

/// The cluster settings given to a [`ServerBuilder`] (Kafka's names in the setters).
#[derive(Debug, Default)]
pub(super) struct ClusterSettings {
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
    /// This broker's rack (Kafka's `broker.rack`).
    rack: Option<String>,
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
    quorum_listener: Option<std::net::TcpListener>,
    #[cfg(test)]
    snapshot_after_entries: Option<usize>,
    /// Tests: the node never records its directory id with the quorum.
    #[cfg(test)]
    unrecorded_directory: bool,
    /// Tests: the features the node supports, in place of this build's.
    #[cfg(test)]
    supported_features: Option<Vec<crate::cluster::records::SupportedFeature>>,
}

impl ClusterSettings {
    /// Sets in `config` what these settings give (the rest keeps its default).
    fn apply_to(&mut self, config: &mut ClusterConfig) {
        let c = self;
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
        config.rack = c.rack.take();
        #[cfg(test)]
        {
            config.quorum_listener = c.quorum_listener.take();
            if let Some(n) = c.snapshot_after_entries {
                config.snapshot_after_entries = n;
            }
            config.record_directory = !c.unrecorded_directory;
            if let Some(f) = c.supported_features.take() {
                config.supported_features = f;
            }
        }
    }
}

/// How the inter-broker listener was named.
#[derive(Debug, Clone)]
pub(super) enum InterBrokerListener {
    /// The first listener with this protocol (`inter_broker_listener`).
    Protocol(SecurityProtocol),
    /// The listener of this name, or else the only one with the protocol of this name
    /// (`inter_broker_listener_name`).
    Name(String),
}

impl InterBrokerListener {
    /// The index in `listeners` (name, protocol, address) of the listener meant.
    pub(super) fn resolve(
        &self,
        listeners: &[(String, SecurityProtocol, SocketAddr)],
    ) -> Result<usize> {
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

impl ServerBuilder {
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
    /// ([`TlsSettings::client_ca`](crate::security::tls::TlsSettings::client_ca)): the certificate's subject is the fetchers'
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

    /// Cluster: this broker's rack (Kafka's `broker.rack`), registered with the broker
    /// and listed by Metadata and DescribeCluster. A new topic's replicas are spread
    /// over the racks (Kafka's rack-aware placement), and with
    /// [`replica_selector_class`](Self::replica_selector_class) rack-aware a consumer of
    /// this rack may fetch from a replica here. Default (and an empty name): no rack.
    pub fn broker_rack(mut self, rack: impl Into<String>) -> Self {
        self.cluster.rack = Some(rack.into()).filter(|r: &String| !r.is_empty());
        self
    }

    /// Tests: a quorum listener bound beforehand (port 0), and snapshots every `n`
    /// entries.
    #[cfg(test)]
    pub(crate) fn test_cluster(
        mut self,
        quorum_listener: std::net::TcpListener,
        snapshot_after_entries: usize,
    ) -> Self {
        self.cluster.quorum_listener = Some(quorum_listener);
        self.cluster.snapshot_after_entries = Some(snapshot_after_entries);
        self
    }

    /// Tests: the node never records its directory id with the quorum, as one whose
    /// `RegisterVoterDirectory` no peer has applied yet.
    #[cfg(test)]
    pub(crate) fn test_unrecorded_directory(mut self) -> Self {
        self.cluster.unrecorded_directory = true;
        self
    }

    /// Tests: the node supports `features` (each a name and its lowest and highest
    /// level) in place of this build's.
    #[cfg(test)]
    pub(crate) fn test_supported_features(mut self, features: &[(&str, i16, i16)]) -> Self {
        self.cluster.supported_features = Some(
            features
                .iter()
                .map(
                    |(name, min, max)| crate::cluster::records::SupportedFeature {
                        name: name.to_string(),
                        min: *min,
                        max: *max,
                    },
                )
                .collect(),
        );
        self
    }

    /// Start the node's cluster role if the builder was given a node id or quorum;
    /// `listeners` are every listener's name, protocol and bound address. A cluster
    /// node's data directory without them is an error.
    pub(super) fn start_cluster(
        &mut self,
        listeners: &[(String, SecurityProtocol, SocketAddr)],
    ) -> Result<Option<Arc<ClusterNode>>> {
        Ok(match self.cluster_config(listeners)? {
            Some(config) => Some(ClusterNode::start(&self.broker, config)?),
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
        })
    }

    /// The cluster node's settings, if the builder was given a node id or quorum.
    fn cluster_config(
        &mut self,
        listeners: &[(String, SecurityProtocol, SocketAddr)],
    ) -> Result<Option<ClusterConfig>> {
        let local = listeners[0].2;
        if self.cluster.node_id.is_none() && self.cluster.quorum.is_none() {
            return Ok(None);
        }
        let quorum_tls = self.quorum_tls()?;
        let (node_id, quorum) = match (self.cluster.node_id, self.cluster.quorum.as_deref()) {
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
        let endpoints = self.endpoints(listeners, &quorum_host);
        let advertised = match endpoints.first() {
            Some(e) => e.address(),
            None => reachable(local),
        };
        let replication = self.replication(listeners, &endpoints, &reachable)?;
        let mut config = ClusterConfig::new(node_id, voters, advertised);
        config.quorum_tls = quorum_tls;
        config.endpoints = endpoints;
        if let Some((name, addr, security)) = replication {
            config.inter_broker_listener = Some(name);
            config.replication_listener = addr;
            config.replication_security = Arc::new(security);
        }
        self.cluster.apply_to(&mut config);
        config.default_partitions = self.broker.config().default_partitions;
        config.offsets_topic_num_partitions = self
            .broker
            .config()
            .coordinator
            .offsets_topic_num_partitions;
        Ok(Some(config))
    }

    /// Every listener by name, at its advertised address or else its bound one (a
    /// wildcard address is advertised with `quorum_host`).
    fn endpoints(
        &self,
        listeners: &[(String, SecurityProtocol, SocketAddr)],
        quorum_host: &str,
    ) -> Vec<crate::cluster::records::Endpoint> {
        listeners
            .iter()
            .zip(&self.config.advertised_listeners)
            .map(|((name, protocol, addr), (_, adv))| {
                let (host, port) = match adv {
                    Some((host, port)) => (host.clone(), port.unwrap_or(addr.port())),
                    None if addr.ip().is_unspecified() => (quorum_host.to_string(), addr.port()),
                    None => (addr.ip().to_string(), addr.port()),
                };
                crate::cluster::records::Endpoint {
                    name: name.clone(),
                    host,
                    port,
                    protocol: *protocol,
                }
            })
            .collect()
    }

    /// The inter-broker listener replica fetchers connect to, if one was named: its
    /// name, its address (None for the first listener, advertised already) and how the
    /// fetchers connect to it.
    fn replication(
        &self,
        listeners: &[(String, SecurityProtocol, SocketAddr)],
        endpoints: &[crate::cluster::records::Endpoint],
        reachable: &dyn Fn(SocketAddr) -> String,
    ) -> Result<Option<(String, Option<String>, crate::client::ClientSecurity)>> {
        let c = &self.cluster;
        let Some(which) = &c.inter_broker_listener else {
            return Ok(None);
        };
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
        Ok(Some((listeners[index].0.clone(), addr, security)))
    }

    /// The quorum port's TLS, from `quorum_security_protocol`, `quorum_ca` and `tls`.
    fn quorum_tls(&self) -> Result<Option<Arc<QuorumTls>>> {
        let invalid = |key: &str, reason: String| crate::error::Error::InvalidConfig {
            key: key.into(),
            reason,
        };
        let c = &self.cluster;
        match c.quorum_protocol.unwrap_or(SecurityProtocol::Plaintext) {
            SecurityProtocol::Plaintext => match &c.quorum_ca {
                None => Ok(None),
                Some(ca) => Err(invalid(
                    quorum_tls::CA_KEY,
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
                        quorum_tls::CA_KEY,
                        "the SSL quorum port needs the PEM file of the CA that signed the nodes' certificates".into(),
                    )
                })?;
                Ok(Some(Arc::new(QuorumTls::load(tls, ca)?)))
            }
            other => Err(invalid(
                "quorum-security-protocol",
                format!("{other}: the quorum port speaks PLAINTEXT or SSL (mutual TLS)"),
            )),
        }
    }

    /// The security settings: `tls`, the credential and ACL stores (the data
    /// directory's files on a single node, the metadata image on a cluster node) and the
    /// authorizer, from the builder's settings.
    pub(super) fn security(
        &self,
        tls: Option<crate::security::tls::TlsAcceptors>,
        cluster: Option<&Arc<ClusterNode>>,
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
        let quotas: Arc<dyn crate::security::QuotaStore> = match cluster {
            None => Arc::new(crate::security::FileQuotaStore::open(dir)?),
            Some(node) => Arc::new(crate::cluster::security::ClusterQuotas(node.clone())),
        };
        let mut security = crate::security::Security::new(credentials);
        security.quotas =
            crate::security::quota::Throttler::new(Some(quotas), self.config.quota_windows);
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
pub(super) fn producer_ids(
    dir: &std::path::Path,
    cluster: Option<&Arc<ClusterNode>>,
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
