//! The fuzz targets' entry points into the server (through `tidelog::testing`, feature
//! `testing`): decoding a request frame, an SSL listener's TLS handshake and a SASL
//! session, each as the server runs them, acting on nothing else.

use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::time::Duration;

use super::{api, codec, connection};
use crate::error::Result;
use crate::security::SecurityProtocol;
use crate::security::tls::TlsSettings;

/// Parse `frame` (one request without its size prefix) as the server would and decode
/// its body, acting on nothing. For the request-decoder fuzz target (through
/// `tidelog::testing`); returns whether the request was accepted.
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
