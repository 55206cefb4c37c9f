//! How the blocking client reaches a broker's listener: plaintext or TLS (rustls, the
//! broker's certificate checked against a CA file, Kafka's `ssl.ca.location`), then,
//! on SASL listeners, a SASL login (SaslHandshake and SaslAuthenticate v1) with PLAIN
//! or SCRAM-SHA-256/512, whose server-final message is checked, so the broker proves it
//! knows the credential. On TLS listeners the client can present a certificate of its
//! own (Kafka's `ssl.certificate.location` and `ssl.key.location`), for brokers that
//! require one (mutual TLS: the certificate's subject is then the principal).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection, StreamOwned};

use crate::error::{Error, Result};
use crate::security::SecurityProtocol;

use crate::security::tls;
use crate::security::{ClientIdentity, SaslLogin};

/// A client's security settings, ready to connect with (the default: plaintext).
#[derive(Debug, Clone, Default)]
pub(crate) struct ClientSecurity {
    tls: Option<Arc<ClientConfig>>,
    /// The login of SASL listeners.
    pub(crate) sasl: Option<SaslLogin>,
}

fn invalid(key: &str, reason: impl Into<String>) -> Error {
    Error::InvalidConfig {
        key: key.into(),
        reason: reason.into(),
    }
}

impl ClientSecurity {
    /// Checks and loads Kafka's client settings: a TLS protocol needs `ca` (PEM file of
    /// the CA that signed the brokers' certificates) and may present `identity`, a SASL
    /// one needs a login. The error names the setting.
    pub(crate) fn new(
        protocol: SecurityProtocol,
        ca: Option<&Path>,
        identity: Option<ClientIdentity<'_>>,
        sasl: Option<SaslLogin>,
    ) -> Result<ClientSecurity> {
        let tls = match (protocol.uses_tls(), ca) {
            (false, _) => None,
            (true, None) => {
                return Err(invalid(
                    "ssl.ca.location",
                    format!("{protocol} needs the CA certificate of the brokers (PEM)"),
                ));
            }
            (true, Some(ca)) => Some(Arc::new(client_config(ca, identity)?)),
        };
        let sasl = match (protocol.uses_sasl(), sasl) {
            (false, _) => None,
            (true, None) => {
                return Err(invalid(
                    "sasl.username",
                    format!("{protocol} needs a SASL mechanism, user name and password"),
                ));
            }
            (true, Some(login)) => {
                if login.username.is_empty() || login.password.is_empty() {
                    return Err(invalid(
                        "sasl.username",
                        "a SASL login needs a user name and a password",
                    ));
                }
                Some(login)
            }
        };
        Ok(ClientSecurity { tls, sasl })
    }

    /// `tcp` wrapped for the protocol: a TLS handshake with the broker at `addr`
    /// (`host:port`, whose host the certificate must name) on TLS listeners.
    pub(crate) fn wrap(&self, tcp: TcpStream, addr: &str) -> Result<Stream> {
        let Some(config) = &self.tls else {
            return Ok(Stream::Plain(tcp));
        };
        let host = addr
            .rsplit_once(':')
            .map_or(addr, |(h, _)| h)
            .trim_start_matches('[')
            .trim_end_matches(']');
        let name = ServerName::try_from(host.to_string())
            .map_err(|e| invalid("bootstrap.servers", format!("{addr}: {e}")))?;
        let mut conn = ClientConnection::new(config.clone(), name)
            .map_err(|e| invalid("ssl", format!("{addr}: {e}")))?;
        let mut tcp = tcp;
        while conn.is_handshaking() {
            conn.complete_io(&mut tcp)
                .map_err(|e| Error::io("complete the TLS handshake with", addr, e))?;
        }
        Ok(Stream::Tls(Box::new(StreamOwned::new(conn, tcp))))
    }
}

/// Whether `e` is a failed TLS exchange with a broker: a certificate one side does not
/// trust, or a client certificate the broker requires and did not get.
#[cfg(feature = "server")]
pub(crate) fn is_tls_failure(e: &Error) -> bool {
    match e {
        Error::Io { source, .. } => source
            .get_ref()
            .is_some_and(|inner| inner.is::<rustls::Error>()),
        _ => false,
    }
}

/// rustls's client configuration trusting the CA certificates of the PEM file `ca`,
/// presenting `identity` when a broker asks for a client certificate.
fn client_config(ca: &Path, identity: Option<ClientIdentity<'_>>) -> Result<ClientConfig> {
    let roots = tls::roots(ca, "ssl.ca.location", "read ssl.ca.location")?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|e| invalid("ssl", e.to_string()))?
        .with_root_certificates(roots);
    let Some(ClientIdentity { cert, key }) = identity else {
        return Ok(builder.with_no_client_auth());
    };
    let chain = tls::certificates(
        cert,
        "ssl.certificate.location",
        "read ssl.certificate.location",
    )?;
    let private = tls::private_key(key, "ssl.key.location", "read ssl.key.location")?;
    builder.with_client_auth_cert(chain, private).map_err(|e| {
        invalid(
            "ssl.key.location",
            format!(
                "{} does not go with the certificate of {}: {e}",
                key.display(),
                cert.display()
            ),
        )
    })
}

/// A connection to a broker: plain TCP or TLS over it.
#[derive(Debug)]
pub(crate) enum Stream {
    /// Plaintext.
    Plain(TcpStream),
    /// TLS.
    Tls(Box<StreamOwned<ClientConnection, TcpStream>>),
}

impl Stream {
    /// The TCP socket (for timeouts).
    pub(crate) fn tcp(&self) -> &TcpStream {
        match self {
            Stream::Plain(s) => s,
            Stream::Tls(s) => s.get_ref(),
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Stream::Plain(s) => s.read(buf),
            Stream::Tls(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Stream::Plain(s) => s.write(buf),
            Stream::Tls(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Stream::Plain(s) => s.flush(),
            Stream::Tls(s) => s.flush(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    /// A self-signed certificate and its key, committed for the TLS fuzz target.
    fn fixture(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fuzz/tls")
            .join(name)
    }

    fn setting(r: Result<ClientSecurity>) -> (String, String) {
        match r {
            Err(Error::InvalidConfig { key, reason }) => (key, reason),
            other => panic!("expected InvalidConfig, got {other:?}"),
        }
    }

    #[test]
    fn each_bad_tls_file_is_named_by_its_kafka_setting() {
        let dir = tempfile::tempdir().unwrap();
        let junk = dir.path().join("junk.pem");
        std::fs::write(&junk, "not a certificate").unwrap();
        let (ca, cert, key) = (
            fixture("server.pem"),
            fixture("server.pem"),
            fixture("server.key"),
        );
        let ssl = SecurityProtocol::Ssl;

        let (k, _) = setting(ClientSecurity::new(ssl, None, None, None));
        assert_eq!(k, "ssl.ca.location");

        let missing = dir.path().join("missing.pem");
        let err = ClientSecurity::new(ssl, Some(&missing), None, None).unwrap_err();
        assert!(
            matches!(&err, Error::Io { .. }) && err.to_string().contains("missing.pem"),
            "{err}"
        );

        let (k, why) = setting(ClientSecurity::new(ssl, Some(&junk), None, None));
        assert_eq!(k, "ssl.ca.location");
        assert!(why.contains("junk.pem holds no PEM certificate"), "{why}");

        let id = |cert, key| Some(ClientIdentity { cert, key });
        let (k, _) = setting(ClientSecurity::new(ssl, Some(&ca), id(&junk, &key), None));
        assert_eq!(k, "ssl.certificate.location");
        let (k, why) = setting(ClientSecurity::new(ssl, Some(&ca), id(&cert, &junk), None));
        assert_eq!(k, "ssl.key.location");
        assert!(why.contains("no usable PEM private key"), "{why}");

        let ok = ClientSecurity::new(ssl, Some(&ca), id(&cert, &key), None).unwrap();
        assert!(ok.tls.is_some() && ok.sasl.is_none());
    }
}
