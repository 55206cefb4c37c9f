//! A blocking Kafka-protocol client for one broker: connect, send a request of a fixed
//! version, read its response, with timeouts and a reconnect on the next call after a
//! failure. Used by the replica fetchers (Fetch, OffsetForLeaderEpoch), which pick
//! versions every tidelog node answers, by the admin client, and by the network client
//! of any Kafka cluster ([`Cluster`](crate::Cluster)), which turns on ApiVersions
//! negotiation ([`Client::negotiating`]): each new connection first asks the broker
//! which versions of each API it answers (ApiVersions v3, or v0 when the broker refuses
//! v3, as Kafka's clients do), and [`Client::version`] picks the highest version both
//! sides speak.
//!
//! Frames are Kafka's: a big-endian `i32` size, then the request header (api key,
//! version, correlation id, client id; the header version the API and version ask for)
//! and the body. Responses must carry the correlation id of their request, else the
//! connection is dropped and the call fails.

pub(crate) mod security;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use kafka_protocol::messages::{
    ApiVersionsRequest, RequestHeader, ResponseHeader, SaslAuthenticateRequest,
    SaslHandshakeRequest,
};
use kafka_protocol::protocol::Message;
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};

use crate::error::Error;
use crate::error::Result;
use crate::security::sasl::SaslMechanism;
use crate::security::scram::client::ScramClient;
pub(crate) use security::ClientSecurity;
use security::Stream;

/// Largest response accepted (a fetch answers at most its `max_bytes`, 10 MiB for the
/// replica fetchers, plus headers).
const MAX_RESPONSE: usize = 128 << 20;

/// A connection to one broker, opened on first use and again after a failure.
#[derive(Debug)]
pub(crate) struct Client {
    addr: String,
    client_id: String,
    connect_timeout: Duration,
    security: Arc<ClientSecurity>,
    stream: Option<Stream>,
    next_correlation: i32,
    /// Ask each new connection for its ApiVersions.
    negotiate: bool,
    /// The versions the broker of the current connection answers.
    versions: Option<ApiVersions>,
}

/// The versions a broker answers, per API key, from its ApiVersions answer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ApiVersions {
    ranges: std::collections::BTreeMap<i16, (i16, i16)>,
    /// The features the broker has finalized (ApiVersions v3), by name: the highest
    /// level.
    finalized: std::collections::BTreeMap<String, i16>,
}

impl ApiVersions {
    /// The highest version of API `key` in both `ours` and the broker's range.
    pub(crate) fn highest(&self, key: i16, ours: (i16, i16)) -> Option<i16> {
        let &(min, max) = self.ranges.get(&key)?;
        let top = max.min(ours.1);
        (top >= min.max(ours.0)).then_some(top)
    }

    /// The broker's range of API `key`, if it answers it.
    pub(crate) fn range(&self, key: i16) -> Option<(i16, i16)> {
        self.ranges.get(&key).copied()
    }

    /// The highest finalized level of feature `name` (none: not finalized, or a broker
    /// before ApiVersions v3).
    pub(crate) fn finalized(&self, name: &str) -> Option<i16> {
        self.finalized.get(name).copied()
    }
}

pub(crate) use crate::error::api_name;

impl Client {
    /// A client of the broker at `addr` (`host:port`), identifying as `client_id`.
    pub(crate) fn new(addr: impl Into<String>, client_id: impl Into<String>) -> Client {
        Client {
            addr: addr.into(),
            client_id: client_id.into(),
            connect_timeout: Duration::from_secs(5),
            security: Arc::new(ClientSecurity::default()),
            stream: None,
            next_correlation: 0,
            negotiate: false,
            versions: None,
        }
    }

    /// Asks each new connection for the versions the broker answers (ApiVersions),
    /// before any login, so that [`Client::version`] can pick them.
    pub(crate) fn negotiating(mut self) -> Client {
        self.negotiate = true;
        self
    }

    /// Sets the connect timeout (Kafka's `socket.connection.setup.timeout.ms`).
    pub(crate) fn with_connect_timeout(mut self, timeout: Duration) -> Client {
        self.connect_timeout = timeout;
        self
    }

    /// The highest finalized level of feature `name` the broker announced (ApiVersions
    /// v3); connects (and negotiates) first if needed.
    ///
    /// # Errors
    /// Connection errors as [`Client::call`].
    pub(crate) fn finalized_feature(&mut self, name: &str) -> Result<Option<i16>> {
        if let Err(e) = self.connect() {
            self.stream = None;
            return Err(e);
        }
        Ok(self.versions.as_ref().and_then(|v| v.finalized(name)))
    }

    /// The highest version of `R` that both this client (within `ours`, a range of
    /// versions whose fields the caller fills in) and the broker speak; connects (and
    /// negotiates) first if needed.
    ///
    /// # Errors
    /// [`Error::UnsupportedApi`] when the broker lists no common version (or not the
    /// API); connection errors as [`Client::call`].
    pub(crate) fn version<R: Request + Message>(
        &mut self,
        ours: std::ops::RangeInclusive<i16>,
    ) -> Result<i16> {
        if let Err(e) = self.connect() {
            self.stream = None;
            return Err(e);
        }
        let ours = (
            (*ours.start()).max(R::VERSIONS.min),
            (*ours.end()).min(R::VERSIONS.max),
        );
        let versions = self
            .versions
            .as_ref()
            .ok_or_else(|| Error::UnsupportedApi {
                broker: self.addr.clone(),
                api: api_name(R::KEY),
                reason: "the connection did not negotiate versions".into(),
            })?;
        versions
            .highest(R::KEY, ours)
            .ok_or_else(|| Error::UnsupportedApi {
                broker: self.addr.clone(),
                api: api_name(R::KEY),
                reason: match versions.range(R::KEY) {
                    Some((min, max)) => format!(
                        "it answers versions {min}..={max}, this client {}..={}",
                        ours.0, ours.1
                    ),
                    None => "its ApiVersions answer does not list it".into(),
                },
            })
    }

    /// Connects with `security` (TLS, a SASL login) instead of in plaintext.
    pub(crate) fn with_security(mut self, security: Arc<ClientSecurity>) -> Client {
        self.security = security;
        self
    }

    /// The broker's address.
    #[cfg(feature = "server")]
    pub(crate) fn addr(&self) -> &str {
        &self.addr
    }

    /// Drops the connection (the next call connects again).
    #[cfg(feature = "server")]
    pub(crate) fn disconnect(&mut self) {
        self.stream = None;
    }

    fn connect(&mut self) -> Result<&mut Stream> {
        if self.stream.is_none() {
            let addrs: Vec<SocketAddr> = self
                .addr
                .to_socket_addrs()
                .map_err(|e| Error::io("resolve", &self.addr, e))?
                .collect();
            let mut last = None;
            let mut tcp = None;
            for a in addrs {
                match TcpStream::connect_timeout(&a, self.connect_timeout) {
                    Ok(s) => {
                        let _ = s.set_nodelay(true);
                        tcp = Some(s);
                        break;
                    }
                    Err(e) => last = Some(e),
                }
            }
            let Some(tcp) = tcp else {
                let e = last.unwrap_or_else(|| std::io::Error::other("no address"));
                return Err(Error::io("connect to", &self.addr, e));
            };
            // The handshakes get twice the connect timeout.
            let timeout = self.connect_timeout * 2;
            set_timeouts(&tcp, &self.addr, timeout)?;
            let mut stream = self.security.wrap(tcp, &self.addr)?;
            if self.negotiate {
                self.versions = Some(self.negotiate_versions(&mut stream, timeout)?);
            }
            if let Some(login) = self.security.sasl.clone() {
                self.login(&mut stream, &login, timeout)?;
            }
            self.stream = Some(stream);
        }
        Ok(self.stream.as_mut().expect("connected above"))
    }

    /// ApiVersions on a new connection: v3 (with this client's name and version, as
    /// KIP-511 asks), or v0 when the broker answers UNSUPPORTED_VERSION (an older
    /// broker answers with a v0 body, which carries the versions it does answer).
    fn negotiate_versions(
        &mut self,
        stream: &mut Stream,
        timeout: Duration,
    ) -> Result<ApiVersions> {
        const UNSUPPORTED_VERSION: i16 = 35;
        let v3 = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("tidelog"))
            .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")));
        let response = match self.exchange(stream, &v3, 3, timeout) {
            Ok(r) if r.error_code != UNSUPPORTED_VERSION => r,
            // A broker that does not answer v3 replies with a v0 body, which the v3
            // decoder refuses or reads as UNSUPPORTED_VERSION: ask again in v0.
            Ok(_) | Err(Error::Corrupt { .. }) => {
                self.exchange(stream, &ApiVersionsRequest::default(), 0, timeout)?
            }
            Err(e) => return Err(e),
        };
        if response.error_code != 0 {
            return Err(Error::UnsupportedApi {
                broker: self.addr.clone(),
                api: "ApiVersions".into(),
                reason: format!(
                    "it answered {}",
                    crate::error::error_name(response.error_code)
                ),
            });
        }
        Ok(ApiVersions {
            ranges: response
                .api_keys
                .iter()
                .map(|k| (k.api_key, (k.min_version, k.max_version)))
                .collect(),
            finalized: response
                .finalized_features
                .iter()
                .map(|f| (f.name.to_string(), f.max_version_level))
                .collect(),
        })
    }

    /// The SASL exchange on a new connection (SaslHandshake v1, SaslAuthenticate v1).
    fn login(
        &mut self,
        stream: &mut Stream,
        login: &crate::security::SaslLogin,
        timeout: Duration,
    ) -> Result<()> {
        let broker = self.addr.clone();
        let failed = move |reason: String| Error::AuthenticationFailed {
            broker: broker.clone(),
            reason,
        };
        let mechanism = login.mechanism.name();
        let hs = self.exchange(
            stream,
            &SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str(mechanism)),
            1,
            timeout,
        )?;
        if hs.error_code != 0 {
            let enabled: Vec<String> = hs.mechanisms.iter().map(|m| m.to_string()).collect();
            return Err(failed(format!(
                "the broker does not enable {mechanism} (error {}; it enables {})",
                hs.error_code,
                enabled.join(", ")
            )));
        }
        let mut step = |stream: &mut Stream, bytes: Vec<u8>| -> Result<Vec<u8>> {
            let r = self.exchange(
                stream,
                &SaslAuthenticateRequest::default().with_auth_bytes(bytes.into()),
                1,
                timeout,
            )?;
            if r.error_code != 0 {
                return Err(failed(format!(
                    "error {}: {}",
                    r.error_code,
                    r.error_message.as_deref().unwrap_or("no message")
                )));
            }
            Ok(r.auth_bytes.to_vec())
        };
        match login.mechanism {
            SaslMechanism::Plain => {
                let token = format!("\0{}\0{}", login.username, login.password);
                step(stream, token.into_bytes())?;
            }
            SaslMechanism::Scram(m) => {
                let client = ScramClient::new(m, &login.username, &login.password);
                let server_first = step(stream, client.first())?;
                let (fin, expected) = client.final_message(&server_first).map_err(&failed)?;
                let server_final = step(stream, fin)?;
                if !ScramClient::verify_server(&server_final, &expected) {
                    return Err(failed(
                        "the broker's SCRAM signature is wrong: it does not know the credential"
                            .into(),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Sends `request` as version `version` and waits at most `timeout` for its
    /// response. Any failure drops the connection: the next call reconnects.
    pub(crate) fn call<R: Request>(
        &mut self,
        request: &R,
        version: i16,
        timeout: Duration,
    ) -> Result<R::Response> {
        let result = self.call_inner(request, version, timeout);
        if result.is_err() {
            self.stream = None;
        }
        result
    }

    fn call_inner<R: Request>(
        &mut self,
        request: &R,
        version: i16,
        timeout: Duration,
    ) -> Result<R::Response> {
        let addr = self.addr.clone();
        self.connect()?;
        let mut stream = self.stream.take().expect("connected above");
        set_timeouts(stream.tcp(), &addr, timeout)?;
        let result = self.exchange(&mut stream, request, version, timeout);
        self.stream = Some(stream);
        result
    }

    /// Writes `request` as version `version` without reading its answer; returns its
    /// correlation id, for [`Client::receive`]. A broker answers a connection's
    /// requests in the order they came, so several may be in flight (a producer's
    /// pipelined Produce requests); a Produce with acks 0 has no answer. A failure
    /// drops the connection.
    pub(crate) fn submit<R: Request>(
        &mut self,
        request: &R,
        version: i16,
        timeout: Duration,
    ) -> Result<i32> {
        let addr = self.addr.clone();
        let result = self.connect().and_then(|stream| {
            set_timeouts(stream.tcp(), &addr, timeout)?;
            Ok(())
        });
        let result = result.and_then(|()| {
            let mut stream = self.stream.take().expect("connected above");
            let sent = self.write_request(&mut stream, request, version, timeout);
            self.stream = Some(stream);
            sent
        });
        if result.is_err() {
            self.stream = None;
        }
        result
    }

    /// Reads the answer of the oldest request [`Client::submit`] wrote and not read yet,
    /// which must be `correlation_id` (an `R` of `version`), waiting at most `timeout`.
    /// A failure drops the connection (and with it the answers of the others).
    pub(crate) fn receive<R: Request>(
        &mut self,
        correlation_id: i32,
        version: i16,
        timeout: Duration,
    ) -> Result<R::Response> {
        let addr = self.addr.clone();
        let Some(mut stream) = self.stream.take() else {
            return Err(Error::io(
                "read from",
                &addr,
                std::io::Error::new(
                    std::io::ErrorKind::NotConnected,
                    "the connection closed before the answer",
                ),
            ));
        };
        let result = set_timeouts(stream.tcp(), &addr, timeout)
            .and_then(|()| self.read_response::<R>(&mut stream, correlation_id, version, timeout));
        if result.is_ok() {
            self.stream = Some(stream);
        }
        result
    }

    /// Writes `request` as version `version` to `stream` and reads its response.
    fn exchange<R: Request>(
        &mut self,
        stream: &mut Stream,
        request: &R,
        version: i16,
        timeout: Duration,
    ) -> Result<R::Response> {
        let correlation_id = self.write_request(stream, request, version, timeout)?;
        self.read_response::<R>(stream, correlation_id, version, timeout)
    }

    /// Writes `request` as version `version` to `stream`; returns its correlation id.
    fn write_request<R: Request>(
        &mut self,
        stream: &mut Stream,
        request: &R,
        version: i16,
        timeout: Duration,
    ) -> Result<i32> {
        let correlation_id = self.next_correlation;
        self.next_correlation = self.next_correlation.wrapping_add(1);
        let api = api_name(R::KEY);
        let header = RequestHeader::default()
            .with_request_api_key(R::KEY)
            .with_request_api_version(version)
            .with_correlation_id(correlation_id)
            .with_client_id(Some(StrBytes::from_string(self.client_id.clone())));
        let mut body = BytesMut::with_capacity(256);
        body.extend_from_slice(&[0; 4]);
        header
            .encode(&mut body, R::header_version(version))
            .and_then(|()| request.encode(&mut body, version))
            .map_err(|e| {
                Error::corrupt(
                    format!("{api} v{version} request"),
                    0,
                    format!("cannot encode: {e}"),
                )
            })?;
        let size = (body.len() - 4) as i32;
        body[..4].copy_from_slice(&size.to_be_bytes());
        let addr = self.addr.clone();
        stream
            .write_all(&body)
            .and_then(|()| stream.flush())
            .map_err(|e| io_error("send to", &addr, e, timeout))?;
        Ok(correlation_id)
    }

    /// Reads the response of the request `correlation_id` (an `R` of `version`).
    fn read_response<R: Request>(
        &mut self,
        stream: &mut Stream,
        correlation_id: i32,
        version: i16,
        timeout: Duration,
    ) -> Result<R::Response> {
        let api = api_name(R::KEY);
        let addr = self.addr.clone();
        let mut len = [0u8; 4];
        stream
            .read_exact(&mut len)
            .map_err(|e| io_error("read from", &addr, e, timeout))?;
        let len = i32::from_be_bytes(len);
        if len < 4 || len as usize > MAX_RESPONSE {
            return Err(Error::corrupt(
                format!("{api} response from {addr}"),
                0,
                format!("response size {len}"),
            ));
        }
        let mut buf = vec![0u8; len as usize];
        stream
            .read_exact(&mut buf)
            .map_err(|e| io_error("read from", &addr, e, timeout))?;
        let mut bytes = bytes::Bytes::from(buf);
        let corrupt = |e: String| Error::corrupt(format!("{api} response from {addr}"), 0, e);
        let header = ResponseHeader::decode(&mut bytes, R::Response::header_version(version))
            .map_err(|e| corrupt(e.to_string()))?;
        if header.correlation_id != correlation_id {
            return Err(corrupt(format!(
                "correlation id {} answers no request (expected {correlation_id})",
                header.correlation_id
            )));
        }
        // Bytes after the response are left unread, as Kafka's own client leaves them:
        // librdkafka's mock cluster, for one, ends its Metadata answers with a byte more.
        R::Response::decode(&mut bytes, version).map_err(|e| corrupt(e.to_string()))
    }
}

fn set_timeouts(tcp: &TcpStream, addr: &str, timeout: Duration) -> Result<()> {
    tcp.set_write_timeout(Some(timeout))
        .and_then(|()| tcp.set_read_timeout(Some(timeout)))
        .map_err(|e| Error::io("set timeouts on", addr, e))
}

fn io_error(op: &'static str, addr: &str, e: std::io::Error, timeout: Duration) -> Error {
    if matches!(
        e.kind(),
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
    ) {
        Error::Timeout(format!("no answer from {addr} within {timeout:?}"))
    } else {
        Error::io(op, addr, e)
    }
}

#[cfg(feature = "server")] // the tests start a tidelog server
#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::{ApiVersionsRequest, MetadataRequest};

    #[test]
    fn calls_a_server_and_reconnects_after_it_restarts() {
        let dir = tempfile::tempdir().unwrap();
        let broker = crate::broker::Broker::open(dir.path()).unwrap();
        let server = crate::server::Server::builder(broker.clone())
            .listen("127.0.0.1:0")
            .start()
            .unwrap();
        let addr = server.local_addr();
        let mut c = Client::new(addr.to_string(), "test");
        let v = c
            .call(&ApiVersionsRequest::default(), 0, Duration::from_secs(5))
            .unwrap();
        assert_eq!(v.error_code, 0);
        assert!(!v.api_keys.is_empty());
        let m = c
            .call(&MetadataRequest::default(), 8, Duration::from_secs(5))
            .unwrap();
        assert_eq!(m.brokers.len(), 1);
        server.shutdown().unwrap();
        let err = c
            .call(&MetadataRequest::default(), 8, Duration::from_secs(2))
            .unwrap_err();
        assert!(
            matches!(err, Error::Io { .. } | Error::Timeout(_)),
            "{err:?}"
        );
        let server = crate::server::Server::builder(broker)
            .listen(addr)
            .start()
            .unwrap();
        let m = c
            .call(&MetadataRequest::default(), 8, Duration::from_secs(5))
            .unwrap();
        assert_eq!(m.brokers.len(), 1, "reconnected");
        server.shutdown().unwrap();
    }
}
