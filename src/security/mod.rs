//! Securing the network server and its peers (feature `server`): listeners with Kafka's
//! security protocols, TLS settings, SASL mechanisms (PLAIN, SCRAM-SHA-256/512), SCRAM
//! credentials and ACLs (see docs/security.md). The server, the cluster, the client and
//! the admin commands all use this layer; it uses only the layers below the broker.
//!
//! - A listener is `PLAINTEXT`, `SSL`, `SASL_PLAINTEXT` or `SASL_SSL`, as Kafka's
//!   `listeners` (`SASL_SSL://0.0.0.0:9094`). TLS listeners run a rustls handshake first
//!   (the `tls` module); SASL listeners serve nothing but ApiVersions, SaslHandshake and
//!   SaslAuthenticate until a SASL exchange succeeds (`Session::gate`).
//! - Every connection has a principal: `User:ANONYMOUS` on PLAINTEXT and on SSL without a
//!   client certificate, `User:<certificate subject>` with one, `User:<name>` once
//!   authenticated over SASL.
//! - With the authorizer on, each API handler asks `Security::authorize` (through
//!   `Ctx::allowed` and friends) for the operations Kafka checks; anything not allowed
//!   by an ACL is denied, super users excepted. Without it every principal may do
//!   everything, as before.
//! - Users' credentials and the ACLs are kept in the data directory (`users`, `acls`).
//!   The in-process API (the `Broker` a program opens) is trusted: none of this applies
//!   to it.
// A build with `client` and without `server` uses the client side only (TLS and SASL
// logins, the credential and ACL vocabulary of the admin client): the server's gates
// (listeners, sessions, the authorizer) are compiled but unused there.
#![cfg_attr(not(feature = "server"), allow(dead_code))]

pub(crate) mod acl;
pub(crate) mod credentials;
pub(crate) mod dn;
pub(crate) mod identity;
#[cfg(feature = "server")]
pub(crate) mod peer_log;
pub(crate) mod quota;
pub(crate) mod sasl;
pub(crate) mod scram;
pub(crate) mod tls;

pub use acl::{
    AclBinding, AclFilter, AclOperation, AclPermission, AclStore, CLUSTER_RESOURCE_NAME,
    FileAclStore, PatternType, ResourceType,
};
pub use credentials::{
    CredentialChange, CredentialStore, FileCredentialStore, validate_credential,
};
pub(crate) use identity::{ClientIdentity, SaslLogin};
pub use quota::{
    CONSUMER_BYTE_RATE, ENTITY_CLIENT_ID, ENTITY_USER, EntityName, FileQuotaStore,
    PRODUCER_BYTE_RATE, QUOTA_KEYS, QuotaChange, QuotaEntity, QuotaStore, Quotas,
    REQUEST_PERCENTAGE,
};
pub use sasl::SaslMechanism;
pub use scram::{MAX_ITERATIONS, MIN_ITERATIONS, ScramCredential, ScramMechanism};
pub use tls::TlsSettings;

use std::collections::BTreeSet;
use std::fmt;
use std::net::SocketAddr;
use std::str::FromStr;
use std::sync::Arc;

use kafka_protocol::messages::ApiKey;

use crate::error::{Error, Result};
use acl::Authorizer;
use sasl::{FailedLogins, SaslState};

/// The principal of a connection that has not authenticated (Kafka's
/// `KafkaPrincipal.ANONYMOUS`).
pub const ANONYMOUS: &str = "User:ANONYMOUS";

/// How a listener carries Kafka's protocol (Kafka's `security.protocol`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SecurityProtocol {
    /// Plain TCP; file bytes of fetches go out with `sendfile(2)`.
    Plaintext,
    /// TLS; a client certificate, if required, names the principal.
    Ssl,
    /// SASL authentication over plain TCP.
    SaslPlaintext,
    /// SASL authentication over TLS.
    SaslSsl,
}

impl SecurityProtocol {
    /// Kafka's name: `PLAINTEXT`, `SSL`, `SASL_PLAINTEXT`, `SASL_SSL`.
    pub fn name(self) -> &'static str {
        match self {
            SecurityProtocol::Plaintext => "PLAINTEXT",
            SecurityProtocol::Ssl => "SSL",
            SecurityProtocol::SaslPlaintext => "SASL_PLAINTEXT",
            SecurityProtocol::SaslSsl => "SASL_SSL",
        }
    }

    /// Whether connections start with a TLS handshake.
    pub fn uses_tls(self) -> bool {
        matches!(self, SecurityProtocol::Ssl | SecurityProtocol::SaslSsl)
    }

    /// Whether clients must authenticate with SASL before anything else.
    pub fn uses_sasl(self) -> bool {
        matches!(
            self,
            SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl
        )
    }
}

impl fmt::Display for SecurityProtocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for SecurityProtocol {
    type Err = Error;
    /// Kafka's name, case-insensitive.
    fn from_str(s: &str) -> Result<SecurityProtocol> {
        [
            SecurityProtocol::Plaintext,
            SecurityProtocol::Ssl,
            SecurityProtocol::SaslPlaintext,
            SecurityProtocol::SaslSsl,
        ]
        .into_iter()
        .find(|p| p.name().eq_ignore_ascii_case(s))
        .ok_or_else(|| Error::InvalidConfig {
            key: "listeners".into(),
            reason: format!(
                "unknown security protocol {s:?}: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL"
            ),
        })
    }
}

/// Splits a listener as Kafka's `listeners` writes it, `PROTOCOL://host:port`, into the
/// protocol and the address; a bare `host:port` is PLAINTEXT.
///
/// ```
/// use tidelog::security::{parse_listener, SecurityProtocol};
/// assert_eq!(
///     parse_listener("SASL_SSL://0.0.0.0:9094").unwrap(),
///     (SecurityProtocol::SaslSsl, "0.0.0.0:9094".to_string())
/// );
/// assert_eq!(
///     parse_listener("127.0.0.1:9092").unwrap(),
///     (SecurityProtocol::Plaintext, "127.0.0.1:9092".to_string())
/// );
/// ```
pub fn parse_listener(spec: &str) -> Result<(SecurityProtocol, String)> {
    match split_listener(spec)? {
        None => Ok((SecurityProtocol::Plaintext, spec.to_string())),
        Some((protocol, addr)) => Ok((protocol.parse()?, addr.to_string())),
    }
}

/// `PREFIX://host:port` split into its prefix and address, `None` for a bare
/// `host:port`; nothing after `://` is an error.
fn split_listener(spec: &str) -> Result<Option<(&str, &str)>> {
    match spec.split_once("://") {
        Some((_, "")) => Err(Error::InvalidConfig {
            key: "listeners".into(),
            reason: format!("{spec:?} has no host:port after ://"),
        }),
        split => Ok(split),
    }
}

/// Kafka's `listener.security.protocol.map`: the security protocol of each listener
/// name, so that listeners can be named for their role (`INTERNAL://0.0.0.0:9093`) and
/// selected by name (`inter.broker.listener.name=INTERNAL`). The four protocol names map
/// to themselves unless the map says otherwise, so `SSL://host:port` keeps working
/// beside custom names. Names are upper-cased, as Kafka's `ListenerName` normalizes
/// them.
///
/// ```
/// use tidelog::security::{ListenerProtocolMap, SecurityProtocol};
/// let map: ListenerProtocolMap = "INTERNAL:SASL_SSL,EXTERNAL:SSL".parse().unwrap();
/// assert_eq!(
///     map.parse_listener("INTERNAL://0.0.0.0:9093").unwrap(),
///     ("INTERNAL".to_string(), SecurityProtocol::SaslSsl, "0.0.0.0:9093".to_string())
/// );
/// assert_eq!(map.protocol("PLAINTEXT").unwrap(), SecurityProtocol::Plaintext);
/// assert!(map.parse_listener("CLIENT://0.0.0.0:9092").is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerProtocolMap {
    names: std::collections::BTreeMap<String, SecurityProtocol>,
}

impl Default for ListenerProtocolMap {
    /// The identity on PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL (Kafka's default).
    fn default() -> Self {
        let names = [
            SecurityProtocol::Plaintext,
            SecurityProtocol::Ssl,
            SecurityProtocol::SaslPlaintext,
            SecurityProtocol::SaslSsl,
        ]
        .into_iter()
        .map(|p| (p.name().to_string(), p))
        .collect();
        ListenerProtocolMap { names }
    }
}

fn map_error(reason: String) -> Error {
    Error::InvalidConfig {
        key: "listener.security.protocol.map".into(),
        reason,
    }
}

/// Whether `name` can name a listener: letters, digits, `_` and `-` (Kafka's names are
/// used in configuration keys and metric names).
fn valid_listener_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

impl ListenerProtocolMap {
    /// The protocol of listener `name` (case-insensitive); `Error::InvalidConfig` for
    /// `listener.security.protocol.map` naming the names it has when `name` is not one.
    pub fn protocol(&self, name: &str) -> Result<SecurityProtocol> {
        self.names
            .get(&name.to_ascii_uppercase())
            .copied()
            .ok_or_else(|| {
                map_error(format!(
                    "listener name {name:?} is not in the map (it has {}); add NAME:PROTOCOL \
                     to --listener-security-protocol-map",
                    self.names.keys().cloned().collect::<Vec<_>>().join(", ")
                ))
            })
    }

    /// Splits a listener as Kafka's `listeners` writes it, `NAME://host:port`, into its
    /// upper-cased name, the name's protocol and the address; a bare `host:port` is the
    /// PLAINTEXT listener.
    pub fn parse_listener(&self, spec: &str) -> Result<(String, SecurityProtocol, String)> {
        let (name, addr) = match split_listener(spec)? {
            None => ("PLAINTEXT".to_string(), spec),
            Some((name, addr)) => (name.to_ascii_uppercase(), addr),
        };
        let protocol = self.protocol(&name).map_err(|e| match e {
            Error::InvalidConfig { reason, .. } => Error::InvalidConfig {
                key: "listeners".into(),
                reason: format!("{spec:?}: {reason}"),
            },
            other => other,
        })?;
        Ok((name, protocol, addr.to_string()))
    }
}

impl FromStr for ListenerProtocolMap {
    type Err = Error;
    /// `NAME:PROTOCOL,NAME:PROTOCOL...` on top of the default identity map. A name
    /// given twice, an empty or malformed entry or an unknown protocol is an error.
    fn from_str(s: &str) -> Result<ListenerProtocolMap> {
        let mut map = ListenerProtocolMap::default();
        let mut seen = BTreeSet::new();
        for entry in s.split(',').map(str::trim) {
            let Some((name, protocol)) = entry.split_once(':') else {
                return Err(map_error(format!(
                    "{entry:?} is not NAME:PROTOCOL (in {s:?})"
                )));
            };
            let name = name.trim().to_ascii_uppercase();
            if !valid_listener_name(&name) {
                return Err(map_error(format!(
                    "{name:?} is not a listener name: letters, digits, _ and - only (in {s:?})"
                )));
            }
            let protocol: SecurityProtocol =
                protocol.trim().parse().map_err(|e: Error| match e {
                    Error::InvalidConfig { reason, .. } => {
                        map_error(format!("listener {name}: {reason}"))
                    }
                    other => other,
                })?;
            if !seen.insert(name.clone()) {
                return Err(map_error(format!("listener name {name} is mapped twice")));
            }
            map.names.insert(name, protocol);
        }
        Ok(map)
    }
}

/// The security settings and state shared by every connection of a server.
#[derive(Debug)]
pub(crate) struct Security {
    /// The SASL mechanisms clients may choose (Kafka's `sasl.enabled.mechanisms`).
    pub(crate) mechanisms: Vec<SaslMechanism>,
    /// Users' SCRAM credentials.
    pub(crate) credentials: Arc<dyn CredentialStore>,
    /// The ACL checker, when enforcement is on.
    pub(crate) authorizer: Option<Authorizer>,
    /// rustls configurations, when a listener uses TLS.
    pub(crate) tls: Option<tls::TlsAcceptors>,
    /// Clients that keep failing to log in.
    pub(crate) failed_logins: FailedLogins,
    /// Key of the made-up SCRAM salts of unknown users (random per server).
    pub(crate) decoy_key: [u8; 32],
    /// Client quotas and each client's usage (none kept: nobody is throttled).
    pub(crate) quotas: quota::Throttler,
}

impl Security {
    /// Settings with no TLS and no authorizer over `credentials`.
    pub(crate) fn new(credentials: Arc<dyn CredentialStore>) -> Security {
        let mut decoy_key = [0u8; 32];
        decoy_key.copy_from_slice(&scram::random_bytes(32));
        Security {
            mechanisms: SaslMechanism::ALL.to_vec(),
            credentials,
            authorizer: None,
            tls: None,
            failed_logins: FailedLogins::default(),
            decoy_key,
            quotas: quota::Throttler::new(None, quota::QuotaWindows::default()),
        }
    }

    /// Whether `principal` at `peer` may do `op` on `(kind, name)`: always without an
    /// authorizer.
    pub(crate) fn authorize(
        &self,
        principal: &str,
        peer: SocketAddr,
        op: AclOperation,
        kind: ResourceType,
        name: &str,
    ) -> bool {
        match &self.authorizer {
            None => true,
            Some(a) => a.authorize(principal, &peer.ip().to_string(), op, kind, name),
        }
    }

    /// Whether `principal` at `peer` may write to some topic (Kafka's
    /// `authorizeByResourceType(WRITE, TOPIC)`: an idempotent producer without
    /// IdempotentWrite on the cluster may still get a producer id, KIP-679).
    pub(crate) fn may_write_some_topic(&self, principal: &str, peer: SocketAddr) -> bool {
        match &self.authorizer {
            None => true,
            Some(a) => a.may_do_on_some(
                principal,
                &peer.ip().to_string(),
                AclOperation::Write,
                ResourceType::Topic,
            ),
        }
    }
}

/// Super users from Kafka's `super.users` syntax: principals separated by `;`.
pub(crate) fn super_users<I, S>(users: I) -> BTreeSet<String>
where
    I: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    users
        .into_iter()
        .flat_map(|u| {
            u.as_ref()
                .split(';')
                .map(|s| s.trim().to_string())
                .collect::<Vec<_>>()
        })
        .filter(|s| !s.is_empty())
        .collect()
}

/// Kafka's error code for an operation refused on a resource of type `kind`.
pub(crate) fn denied_code(kind: ResourceType) -> i16 {
    use kafka_protocol::ResponseError as R;
    match kind {
        ResourceType::Group => R::GroupAuthorizationFailed,
        ResourceType::Cluster => R::ClusterAuthorizationFailed,
        ResourceType::TransactionalId => R::TransactionalIdAuthorizationFailed,
        _ => R::TopicAuthorizationFailed,
    }
    .code()
}

/// One connection's security: its listener's protocol, its principal, and where its
/// SASL authentication stands.
#[derive(Debug)]
pub(crate) struct Session {
    /// The listener's protocol.
    pub(crate) protocol: SecurityProtocol,
    /// `User:...`.
    pub(crate) principal: String,
    /// SASL state (irrelevant on non-SASL listeners).
    pub(crate) sasl: SaslState,
}

/// What the gate says of a request on a connection.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Gate {
    /// Serve it.
    Pass,
    /// Refuse it and close the connection: it came before authentication completed.
    Refuse(String),
}

impl Session {
    /// A new connection's session; `subject` is a TLS client certificate's RFC 2253
    /// name.
    pub(crate) fn new(protocol: SecurityProtocol, subject: Option<String>) -> Session {
        Session {
            protocol,
            principal: subject.map_or_else(|| ANONYMOUS.to_string(), |s| format!("User:{s}")),
            sasl: SaslState::Start,
        }
    }

    /// Whether the connection may use every API.
    pub(crate) fn authenticated(&self) -> bool {
        !self.protocol.uses_sasl() || matches!(self.sasl, SaslState::Authenticated)
    }

    /// Whether the next frame is a bare SASL token (after a v0 SaslHandshake).
    pub(crate) fn expects_raw_token(&self) -> bool {
        matches!(self.sasl, SaslState::Exchange { raw: true, .. })
    }

    /// Whether a request of `api_key` may be served now: before authentication on a SASL
    /// listener only ApiVersions, SaslHandshake and SaslAuthenticate are (Kafka closes
    /// the connection on anything else, and so does tidelog).
    pub(crate) fn gate(&self, api_key: i16) -> Gate {
        if self.authenticated() {
            return Gate::Pass;
        }
        let allowed = [
            ApiKey::ApiVersions,
            ApiKey::SaslHandshake,
            ApiKey::SaslAuthenticate,
        ];
        if allowed.iter().any(|k| *k as i16 == api_key) {
            return Gate::Pass;
        }
        if let SaslState::Exchange { raw: true, .. } = self.sasl {
            return Gate::Refuse("a Kafka request came where a SASL token was expected".into());
        }
        Gate::Refuse(format!(
            "{} before SASL authentication completed on a {} listener",
            crate::error::api_name(api_key),
            self.protocol
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listeners_parse_like_kafka() {
        assert_eq!(
            parse_listener("ssl://h:1").unwrap(),
            (SecurityProtocol::Ssl, "h:1".into())
        );
        assert!(parse_listener("TLS://h:1").is_err());
        assert!(parse_listener("SSL://").is_err());
    }

    #[test]
    fn only_the_sasl_apis_pass_before_authentication() {
        let mut s = Session::new(SecurityProtocol::SaslPlaintext, None);
        assert_eq!(s.principal, ANONYMOUS);
        assert_eq!(s.gate(ApiKey::ApiVersions as i16), Gate::Pass);
        assert_eq!(s.gate(ApiKey::SaslHandshake as i16), Gate::Pass);
        assert_eq!(s.gate(ApiKey::SaslAuthenticate as i16), Gate::Pass);
        assert!(matches!(s.gate(ApiKey::Metadata as i16), Gate::Refuse(_)));
        assert!(matches!(s.gate(-7), Gate::Refuse(_)));
        s.sasl = SaslState::Authenticated;
        assert_eq!(s.gate(ApiKey::Produce as i16), Gate::Pass);
        let plain = Session::new(SecurityProtocol::Ssl, Some("CN=c".into()));
        assert_eq!(plain.principal, "User:CN=c");
        assert_eq!(plain.gate(ApiKey::Fetch as i16), Gate::Pass);
    }

    #[test]
    fn the_listener_map_names_listeners_like_kafka() {
        let map: ListenerProtocolMap = "internal:SASL_SSL, EXTERNAL:ssl".parse().unwrap();
        assert_eq!(map.protocol("INTERNAL").unwrap(), SecurityProtocol::SaslSsl);
        assert_eq!(map.protocol("external").unwrap(), SecurityProtocol::Ssl);
        // The identity stays for the protocol names.
        assert_eq!(
            map.parse_listener("SASL_PLAINTEXT://h:1").unwrap(),
            (
                "SASL_PLAINTEXT".into(),
                SecurityProtocol::SaslPlaintext,
                "h:1".into()
            )
        );
        assert_eq!(
            map.parse_listener("h:2").unwrap(),
            (
                "PLAINTEXT".into(),
                SecurityProtocol::Plaintext,
                "h:2".into()
            )
        );
        assert_eq!(
            map.parse_listener("Internal://0.0.0.0:9093").unwrap(),
            (
                "INTERNAL".into(),
                SecurityProtocol::SaslSsl,
                "0.0.0.0:9093".into()
            )
        );
        // A protocol name can be mapped to another protocol, as in Kafka.
        let odd: ListenerProtocolMap = "PLAINTEXT:SSL".parse().unwrap();
        assert_eq!(odd.protocol("PLAINTEXT").unwrap(), SecurityProtocol::Ssl);
    }

    #[test]
    fn a_bad_listener_map_or_unknown_name_is_a_clear_error() {
        let reason = |r: Result<ListenerProtocolMap>| match r {
            Err(Error::InvalidConfig { key, reason }) => {
                assert_eq!(key, "listener.security.protocol.map");
                reason
            }
            other => panic!("expected InvalidConfig, got {other:?}"),
        };
        assert!(reason("INTERNAL".parse()).contains("NAME:PROTOCOL"));
        assert!(reason("INTERNAL:TLS".parse()).contains("TLS"));
        assert!(reason("A:SSL,a:SSL".parse()).contains("twice"));
        assert!(reason(":SSL".parse()).contains("listener name"));
        assert!(reason("IN TERNAL:SSL".parse()).contains("listener name"));
        assert!(reason("INTERNAL:SSL,".parse()).contains("NAME:PROTOCOL"));
        let map = ListenerProtocolMap::default();
        match map.parse_listener("INTERNAL://h:1") {
            Err(Error::InvalidConfig { key, reason }) => {
                assert_eq!(key, "listeners");
                assert!(reason.contains("INTERNAL"), "{reason}");
            }
            other => panic!("expected InvalidConfig, got {other:?}"),
        }
        assert!(map.parse_listener("SSL://").is_err());
        assert!(map.protocol("NOPE").is_err());
    }

    #[test]
    fn super_users_split_on_semicolons() {
        let s = super_users(["User:a;User:b", " User:c "]);
        assert_eq!(
            s.into_iter().collect::<Vec<_>>(),
            vec!["User:a", "User:b", "User:c"]
        );
    }
}
