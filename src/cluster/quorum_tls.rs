//! Mutual TLS on the quorum port (`--quorum-security-protocol SSL`, the Kafka
//! controller listener's `SSL` with `ssl.client.auth=required`).
//!
//! Every node presents its own certificate (`--tls-cert`/`--tls-key`) both as the server
//! of its quorum listener and as the client of its connections to its peers, and checks
//! the other side's against the CA of `--quorum-ssl-ca-location`, in both directions:
//!
//! - the connecting node checks the listener's certificate as any TLS client does: signed
//!   by the CA, valid now, naming the host of that voter's `--quorum` address (DNS or IP
//!   subject alternative name);
//! - the listening node requires a client certificate signed by the CA (a connection
//!   without one is refused in the handshake, before any frame is read), and once the
//!   hello says which voter the peer is, that the certificate names the host of that
//!   voter's `--quorum` address too. A certificate of the CA issued for another host
//!   cannot speak for a voter; voters that share a host (one machine, tests) cannot be
//!   told apart by their certificates.
//!
//! TLS 1.3 and 1.2 only, with ring's primitives, as the Kafka listeners.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::pki_types::{CertificateDer, ServerName};
use rustls::server::{ParsedCertificate, WebPkiClientVerifier};
use rustls::{ClientConfig, ClientConnection, ServerConfig, StreamOwned};

use super::voters::Voter;
use crate::error::{Error, Result};
use crate::security::tls::{self, HANDSHAKE_TIMEOUT, PROTOCOL_VERSIONS, TlsSettings};

/// The setting naming the CA of the nodes' certificates.
pub(crate) const CA_KEY: &str = "quorum-ssl-ca-location";

fn invalid(key: &str, reason: String) -> Error {
    Error::InvalidConfig {
        key: key.into(),
        reason,
    }
}

/// The rustls configurations of a node's quorum connections.
#[derive(Debug)]
pub(crate) struct QuorumTls {
    /// The quorum listener: client certificates of the CA required.
    server: Arc<ServerConfig>,
    /// Connections to the peers: their certificates checked against the CA, this node's
    /// presented.
    client: Arc<ClientConfig>,
}

/// The host of a `host:port` voter address (an IPv6 address without its brackets).
fn host(addr: &str) -> &str {
    addr.rsplit_once(':')
        .map_or(addr, |(h, _)| h)
        .trim_start_matches('[')
        .trim_end_matches(']')
}

/// The name a voter's certificate must carry: the host of its quorum address.
fn voter_name(voter: &Voter) -> Result<ServerName<'static>> {
    ServerName::try_from(host(&voter.addr).to_string()).map_err(|e| {
        invalid(
            "controller.quorum.voters",
            format!(
                "node {}'s address {} has no host a certificate can name: {e}",
                voter.id, voter.addr
            ),
        )
    })
}

impl QuorumTls {
    /// Reads the node's certificate and key from `identity` and the CA from `ca`; the
    /// error names the setting and the file.
    pub(crate) fn load(identity: &TlsSettings, ca: &Path) -> Result<QuorumTls> {
        let (chain, key) = identity.chain_and_key()?;
        let roots = tls::roots(ca, CA_KEY, "read quorum-ssl-ca-location")?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier = WebPkiClientVerifier::builder_with_provider(roots.clone(), provider.clone())
            .build()
            .map_err(|e| invalid(CA_KEY, format!("{}: {e}", ca.display())))?;
        let server = ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(PROTOCOL_VERSIONS)
            .map_err(|e| invalid("quorum-security-protocol", e.to_string()))?
            .with_client_cert_verifier(verifier)
            .with_single_cert(chain.clone(), key.clone_key())
            .map_err(|e| identity.bad_pair(e))?;
        let client = ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(PROTOCOL_VERSIONS)
            .map_err(|e| invalid("quorum-security-protocol", e.to_string()))?
            .with_root_certificates(roots)
            .with_client_auth_cert(chain, key)
            .map_err(|e| identity.bad_pair(e))?;
        Ok(QuorumTls {
            server: Arc::new(server),
            client: Arc::new(client),
        })
    }

    /// The listening side's handshake on an accepted `socket`, within
    /// [`HANDSHAKE_TIMEOUT`]: the stream (reads time out after `poll`), the peer's
    /// certificate and its subject. A peer without a certificate of the CA fails here.
    pub(crate) fn accept(
        &self,
        socket: TcpStream,
        poll: Duration,
    ) -> io::Result<(Box<dyn Read + Send>, CertificateDer<'static>, String)> {
        let (stream, subject) = tls::accept(self.server.clone(), Arc::new(socket), poll)?;
        let cert = stream
            .conn
            .peer_certificates()
            .and_then(|c| c.first())
            .cloned()
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    "the peer presented no certificate",
                )
            })?;
        Ok((Box::new(stream), cert, subject.unwrap_or_default()))
    }

    /// The connecting side's handshake with `peer` on `socket`, within
    /// [`HANDSHAKE_TIMEOUT`]: the peer's certificate must name the host of its address.
    pub(crate) fn connect(&self, socket: TcpStream, peer: &Voter) -> Result<Box<dyn Write + Send>> {
        let name = voter_name(peer)?;
        let mut conn = ClientConnection::new(self.client.clone(), name)
            .map_err(|e| invalid("quorum-security-protocol", format!("{}: {e}", peer.addr)))?;
        let mut socket = socket;
        let deadline = Instant::now() + HANDSHAKE_TIMEOUT;
        let handshake = |e: io::Error| Error::io("TLS handshake with quorum peer", &peer.addr, e);
        while conn.is_handshaking() {
            let left = deadline
                .checked_duration_since(Instant::now())
                .filter(|d| !d.is_zero())
                .ok_or_else(|| {
                    handshake(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "the TLS handshake timed out",
                    ))
                })?;
            socket.set_read_timeout(Some(left)).map_err(handshake)?;
            conn.complete_io(&mut socket).map_err(handshake)?;
        }
        // The sender only writes from here on.
        socket.set_read_timeout(None).map_err(handshake)?;
        Ok(Box::new(StreamOwned::new(conn, socket)))
    }
}

/// Checks that `cert` (already verified against the CA in the handshake) names the host
/// of `voter`'s quorum address, the voter its hello claims to be.
pub(crate) fn check_peer(
    cert: &CertificateDer<'_>,
    subject: &str,
    voter: &Voter,
    peer: &str,
) -> Result<()> {
    let name = voter_name(voter)?;
    let parsed = ParsedCertificate::try_from(cert).map_err(|e| {
        invalid(
            CA_KEY,
            format!("{peer}: cannot read its certificate ({subject}): {e}"),
        )
    })?;
    rustls::client::verify_server_name(&parsed, &name).map_err(|e| {
        invalid(
            CA_KEY,
            format!(
                "{peer} says it is node {}, but its certificate ({subject}) does not name {}, \
                 the host of that node's quorum address: {e}",
                voter.id,
                host(&voter.addr)
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_of_a_voter_address() {
        assert_eq!(host("node-1.example:9093"), "node-1.example");
        assert_eq!(host("127.0.0.1:9093"), "127.0.0.1");
        assert_eq!(host("[::1]:9093"), "::1");
        let v = Voter {
            id: 1,
            addr: "[::1]:9093".into(),
        };
        assert!(matches!(voter_name(&v).unwrap(), ServerName::IpAddress(_)));
    }

    #[test]
    fn the_builder_refuses_sasl_a_missing_identity_and_a_ca_without_ssl() {
        use crate::security::SecurityProtocol;
        let dir = tempfile::tempdir().unwrap();
        let broker = crate::Broker::open(dir.path()).unwrap();
        let node = || {
            crate::Server::builder(broker.clone())
                .listen("127.0.0.1:0")
                .node_id(1)
                .quorum("1@127.0.0.1:1")
        };
        let key_of = |b: crate::ServerBuilder| match b.start() {
            Err(Error::InvalidConfig { key, reason }) => (key, reason),
            other => panic!("{other:?}"),
        };
        // (With `tls` files, they are read first: interop/tests/cluster_quorum_ssl.rs.)
        let (key, reason) = key_of(
            node()
                .quorum_security_protocol(SecurityProtocol::SaslSsl)
                .quorum_ca("ca.pem"),
        );
        assert_eq!(key, "quorum-security-protocol");
        assert!(reason.contains("SASL_SSL"), "{reason}");
        let (key, reason) = key_of(
            node()
                .quorum_security_protocol(SecurityProtocol::Ssl)
                .quorum_ca("ca.pem"),
        );
        assert_eq!(key, "quorum-security-protocol");
        assert!(reason.contains("tls-cert"), "{reason}");
        let (key, reason) = key_of(node().quorum_ca("ca.pem"));
        assert_eq!(key, CA_KEY);
        assert!(reason.contains("PLAINTEXT"), "{reason}");
    }

    #[test]
    fn missing_and_empty_files_name_the_setting_and_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let junk = dir.path().join("junk.pem");
        std::fs::write(&junk, "not a certificate").unwrap();
        let missing = dir.path().join("missing.pem");
        let err = QuorumTls::load(&TlsSettings::from_pem_files(&missing, &junk), &junk)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("tls-cert") && err.contains("missing.pem"),
            "{err}"
        );
        let err = QuorumTls::load(&TlsSettings::from_pem_files(&junk, &junk), &junk)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("tls-cert") && err.contains("junk.pem"),
            "{err}"
        );
    }
}
