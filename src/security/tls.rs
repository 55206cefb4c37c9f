//! TLS for the SSL and SASL_SSL listeners, with rustls: TLS 1.3 and 1.2 only, ring's
//! primitives, the server's certificate chain and key from PEM files, and optionally
//! client certificates checked against a CA (`--tls-client-ca`, Kafka's
//! `ssl.client.auth=required`) on SSL listeners, whose subject becomes the principal
//! (`User:CN=...,O=...`, see the `dn` module).
//!
//! The handshake runs on the connection's thread before the first request is read, with
//! its own deadline ([`HANDSHAKE_TIMEOUT`]), so a client that stalls in the middle of it
//! holds its thread for that long at most.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig, ServerConnection};

use crate::error::{Error, Result};

/// The TLS versions offered: 1.3 and 1.2.
pub(crate) const PROTOCOL_VERSIONS: &[&rustls::SupportedProtocolVersion] =
    &[&rustls::version::TLS13, &rustls::version::TLS12];

/// The longest a TLS handshake may take.
pub(crate) const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Where the server's TLS certificate and key are, and the CA of client certificates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSettings {
    cert: PathBuf,
    key: PathBuf,
    client_ca: Option<PathBuf>,
}

impl TlsSettings {
    /// The server's certificate chain (PEM, leaf first) and private key (PEM: PKCS#8,
    /// PKCS#1 or SEC1), as Kafka's `ssl.keystore.*` in PEM form. Read by
    /// [`ServerBuilder::start`](crate::ServerBuilder::start).
    pub fn from_pem_files(cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> TlsSettings {
        TlsSettings {
            cert: cert.into(),
            key: key.into(),
            client_ca: None,
        }
    }

    /// Require a client certificate signed by a CA of this PEM file on SSL listeners
    /// (Kafka's `ssl.client.auth=required` with `ssl.truststore.*`); the certificate's
    /// subject becomes the connection's principal, `User:` and its RFC 2253 name (Kafka's
    /// default `ssl.principal.mapping.rules`). SASL_SSL listeners do not ask for one: the
    /// SASL user is the principal there. Default = no client certificate.
    #[must_use]
    pub fn client_ca(mut self, ca: impl Into<PathBuf>) -> TlsSettings {
        self.client_ca = Some(ca.into());
        self
    }
}

impl TlsSettings {
    /// The server's certificate and key as a client identity (a cluster node's replica
    /// fetchers present them, as a Kafka broker uses its keystore for both ends).
    pub(crate) fn identity(&self) -> crate::security::ClientIdentity<'_> {
        crate::security::ClientIdentity {
            cert: &self.cert,
            key: &self.key,
        }
    }
}

/// The rustls configurations of a server.
#[derive(Debug, Clone)]
pub(crate) struct TlsAcceptors {
    /// For SASL_SSL listeners (and SSL ones without a client CA).
    pub(crate) server: Arc<ServerConfig>,
    /// For SSL listeners when a client CA is set: client certificates required.
    pub(crate) mutual: Option<Arc<ServerConfig>>,
}

fn invalid(key: &str, reason: String) -> Error {
    Error::InvalidConfig {
        key: key.into(),
        reason,
    }
}

/// Reads a PEM file; `op` names the setting it was given as ("read tls-cert").
fn read_pem(path: &Path, op: &'static str) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| Error::io(op, path, e))
}

/// The PEM certificates of `path`, given as setting `key` (at least one).
pub(crate) fn certificates(
    path: &Path,
    key: &str,
    op: &'static str,
) -> Result<Vec<CertificateDer<'static>>> {
    let pem = read_pem(path, op)?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| invalid(key, format!("{}: {e}", path.display())))?;
    if certs.is_empty() {
        return Err(invalid(
            key,
            format!("{} holds no PEM certificate", path.display()),
        ));
    }
    Ok(certs)
}

/// A roots store of the PEM CA certificates of `path`, given as setting `key`.
pub(crate) fn roots(path: &Path, key: &str, op: &'static str) -> Result<Arc<RootCertStore>> {
    let mut roots = RootCertStore::empty();
    for c in certificates(path, key, op)? {
        roots
            .add(c)
            .map_err(|e| invalid(key, format!("{}: {e}", path.display())))?;
    }
    Ok(Arc::new(roots))
}

/// The PEM private key (PKCS#8, PKCS#1 or SEC1) of `path`, given as setting `key`.
pub(crate) fn private_key(
    path: &Path,
    key: &str,
    op: &'static str,
) -> Result<PrivateKeyDer<'static>> {
    let pem = read_pem(path, op)?;
    PrivateKeyDer::from_pem_slice(&pem).map_err(|e| {
        invalid(
            key,
            format!("{} holds no usable PEM private key: {e}", path.display()),
        )
    })
}

impl TlsSettings {
    /// The certificate chain and private key, read from their files (the error names
    /// the setting and the file).
    pub(crate) fn chain_and_key(
        &self,
    ) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)> {
        let chain = certificates(&self.cert, "tls-cert", "read tls-cert")?;
        let key = private_key(&self.key, "tls-key", "read tls-key")?;
        Ok((chain, key))
    }

    /// The error of a private key that is not the certificate's.
    pub(crate) fn bad_pair(&self, e: rustls::Error) -> Error {
        invalid(
            "tls-key",
            format!(
                "{} does not go with the certificate of {}: {e}",
                self.key.display(),
                self.cert.display()
            ),
        )
    }

    /// Reads the files and builds the rustls configurations; the error names the file.
    pub(crate) fn load(&self) -> Result<TlsAcceptors> {
        let (chain, key) = self.chain_and_key()?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = || {
            ServerConfig::builder_with_provider(provider.clone())
                .with_protocol_versions(PROTOCOL_VERSIONS)
                .map_err(|e| invalid("tls", e.to_string()))
        };
        let bad_pair = |e: rustls::Error| self.bad_pair(e);
        let server = builder()?
            .with_no_client_auth()
            .with_single_cert(chain.clone(), key.clone_key())
            .map_err(bad_pair)?;
        let mutual = match &self.client_ca {
            None => None,
            Some(ca) => {
                let roots = roots(ca, "tls-client-ca", "read tls-client-ca")?;
                let verifier = WebPkiClientVerifier::builder_with_provider(roots, provider.clone())
                    .build()
                    .map_err(|e| invalid("tls-client-ca", format!("{}: {e}", ca.display())))?;
                Some(Arc::new(
                    builder()?
                        .with_client_cert_verifier(verifier)
                        .with_single_cert(chain, key)
                        .map_err(bad_pair)?,
                ))
            }
        };
        Ok(TlsAcceptors {
            server: Arc::new(server),
            mutual,
        })
    }
}

/// The socket as rustls reads and writes it (shared with the connection's registry).
#[derive(Debug)]
pub(crate) struct SocketIo(pub(crate) Arc<TcpStream>);

impl Read for SocketIo {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        (&*self.0).read(buf)
    }
}

impl Write for SocketIo {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        (&*self.0).write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        (&*self.0).flush()
    }
}

/// An established TLS stream.
pub(crate) type TlsStream = rustls::StreamOwned<ServerConnection, SocketIo>;

/// Runs the server side of a TLS handshake on `socket` within [`HANDSHAKE_TIMEOUT`];
/// the stream and, with a client certificate, its subject's RFC 2253 name. `restore` is
/// the read timeout the connection uses afterwards.
pub(crate) fn accept(
    config: Arc<ServerConfig>,
    socket: Arc<TcpStream>,
    restore: Duration,
) -> io::Result<(TlsStream, Option<String>)> {
    let mut conn = ServerConnection::new(config).map_err(io::Error::other)?;
    let mut io = SocketIo(socket.clone());
    let deadline = Instant::now() + HANDSHAKE_TIMEOUT;
    let timed_out = || io::Error::new(io::ErrorKind::TimedOut, "the TLS handshake timed out");
    while conn.is_handshaking() {
        while conn.wants_write() {
            conn.write_tls(&mut io)?;
        }
        if !conn.is_handshaking() {
            break;
        }
        let left = deadline
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
            .ok_or_else(timed_out)?;
        socket.set_read_timeout(Some(left))?;
        let n = match conn.read_tls(&mut io) {
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return Err(timed_out());
            }
            Err(e) => return Err(e),
        };
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the client closed the connection during the TLS handshake",
            ));
        }
        if let Err(e) = conn.process_new_packets() {
            // Tell the client why (a TLS alert), then give up.
            let _ = conn.write_tls(&mut io);
            return Err(io::Error::new(io::ErrorKind::InvalidData, e));
        }
    }
    while conn.wants_write() {
        conn.write_tls(&mut io)?;
    }
    socket.set_read_timeout(Some(restore))?;
    let subject = match conn.peer_certificates().and_then(|c| c.first()) {
        None => None,
        Some(cert) => Some(super::dn::subject_rfc2253(cert).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("cannot read the client certificate's subject: {e}"),
            )
        })?),
    };
    Ok((rustls::StreamOwned::new(conn, io), subject))
}
