//! One client connection: read a frame, handle it, write the reply, repeat.
//!
//! A connection is served by one thread with blocking I/O, one request at a time, so
//! responses leave in exactly the order the requests arrived (Kafka clients rely on it)
//! and an `acks = 0` produce simply writes nothing. Bytes go through a
//! [`Transport`](super::transport::Transport), not a bare socket.
//!
//! One exception, for requests that wait for the in-sync replicas on a plaintext
//! connection (an OffsetCommit, for a client that commits offsets of many groups; a
//! Produce with `acks=all`, for a producer with several requests in flight): such a
//! request is handled up to the append of its batches, and its wait for the in-sync
//! replicas (and its reply) is left to the connection's writer thread, started by the
//! first one, while this thread reads and starts the next request if it is an
//! OffsetCommit or Produce too (up to [`MAX_PIPELINED`] under way; a Produce that waits
//! for nothing is answered in its turn: by the writer behind replies still queued, else
//! at once by this thread, without a hand-off). The writer finishes them in
//! the order they came and writes each reply once its replicas have the batches, so
//! replies stay in request order and none is sent early; the batches are in the log in
//! request order. A request of any other kind first waits until every reply before it
//! is written (it sees what they stored), then runs on this thread as usual.
//!
//! Before reading a request's body the connection reserves its size from the server's
//! request memory (`max_queued_request_bytes`), waiting while it is used up, and gives it
//! back once the request is handled (see the `limits` module).
//!
//! On a TLS listener the connection first runs the TLS handshake (its own deadline); on
//! a SASL listener it serves only ApiVersions, SaslHandshake and SaslAuthenticate until
//! the client authenticates, and closes on anything else (`crate::security`'s gate). A
//! failed authentication is answered after a delay that grows with that address's
//! failures, then the connection closes.
//!
//! Bad input never panics and never touches other connections: a frame with a bad size,
//! an unknown API, a version we do not answer (other than ApiVersions, which gets the v0
//! fallback reply) or a body that does not decode closes this connection with a log line
//! naming the peer, rate-limited per peer address (see `crate::security::peer_log`).

use std::io::{BufWriter, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use bytes::Bytes;
use kafka_protocol::messages::ApiKey;

use super::Shared;
use super::api::{self, Fatal, Part, Reply, Request, SaslAnswer, SaslOutcome};
use super::codec::{self, FrameError};
use super::transport::{self, PlainWriter, ReplyOut, Transport};
use crate::security::peer_log::PeerLog;
use crate::security::peer_log::peer_warn;
use crate::security::{Gate, Security, SecurityProtocol, Session};

/// The transport of a new connection: plaintext, or TLS after a handshake (with the
/// client certificate's subject, if it sent one). `None` if the handshake failed.
fn open_transport(
    shared: &Shared,
    stream: Arc<TcpStream>,
    peer: SocketAddr,
    protocol: SecurityProtocol,
) -> Option<(Transport, Option<String>)> {
    if !protocol.uses_tls() {
        return Some((Transport::Plain(stream), None));
    }
    let tls = shared.security.tls.as_ref()?;
    let config = match (protocol, &tls.mutual) {
        (SecurityProtocol::Ssl, Some(mutual)) => mutual.clone(),
        _ => tls.server.clone(),
    };
    match crate::security::tls::accept(config, stream.clone(), shared.config.idle_timeout) {
        Ok((tls, subject)) => Some((Transport::Tls(Box::new(tls)), subject)),
        Err(e) => {
            peer_warn!(
                shared.peer_log,
                peer,
                "TLS handshake failed: {e}; closing the connection"
            );
            let _ = stream.shutdown(std::net::Shutdown::Both);
            None
        }
    }
}

/// Most OffsetCommits of one connection under way at once (their waits for the
/// in-sync replicas overlap); the connection reads no more requests meanwhile.
const MAX_PIPELINED: usize = 64;

/// Serve `stream` until the client leaves, a fatal error, or server shutdown.
pub(crate) fn serve(
    shared: Arc<Shared>,
    stream: Arc<TcpStream>,
    peer: SocketAddr,
    (protocol, listener): (SecurityProtocol, &str),
) {
    tracing::debug!(%peer, %protocol, listener, "connection opened");
    let local = stream.local_addr().unwrap_or(shared.config.listen);
    let Some((mut transport, subject)) = open_transport(&shared, stream, peer, protocol) else {
        return;
    };
    let mut session = Session::new(protocol, subject);
    let max_request_size = shared.max_request_size();
    let mut stats = shared.metrics.connection(peer);
    // The writer of pipelined replies writes through this (a TLS connection has none,
    // and pipelines nothing).
    let plain = transport.plain_writer();
    std::thread::scope(|scope| {
        // The writer of pipelined replies, started by the connection's first one.
        let mut writer: Option<Writer<'_>> = None;
        loop {
            let Some((frame, reservation)) =
                next_request(&shared, &mut transport, peer, max_request_size)
            else {
                break;
            };
            // A plaintext OffsetCommit or Produce may start while earlier ones wait for
            // their replicas; any other request waits until every earlier reply is
            // written, so that it sees what they did (and the connection writes from one
            // thread).
            let pipeline = plain.as_ref().filter(|_| {
                codec::request_start(&frame).is_some_and(|s| api::pipelined_key(s.api_key))
            });
            if pipeline.is_none() && writer.as_ref().is_some_and(|w| !w.outbox.drain()) {
                break;
            }
            let timer = stats.request(&frame);
            shared.in_flight.fetch_add(1, Ordering::AcqRel);
            let outcome = admit(
                &shared.security,
                &shared.peer_log,
                &mut session,
                peer,
                frame,
            )
            .and_then(|admitted| match admitted {
                Admitted::Sasl(answer) => Ok(Handled::Now(answer)),
                Admitted::Request(req) => {
                    let ctx = api::Ctx {
                        shared: &shared,
                        peer,
                        local,
                        listener,
                        socket: transport.socket(),
                        principal: &session.principal,
                    };
                    if let Some(out) = pipeline
                        && api::pipelined(&req)
                    {
                        return api::handle_pipelined(&ctx, req)
                            .map(|answer| Handled::Queue(answer, out));
                    }
                    api::handle(&ctx, req).map(|reply| {
                        Handled::Now(SaslAnswer {
                            reply,
                            outcome: SaslOutcome::Continue,
                        })
                    })
                }
            });
            // The request's bytes are gone with it: its memory is free for others.
            drop(reservation);
            let outcome = match outcome {
                // A reply ready now with no reply queued before it (a Produce that waits
                // for no replica): written by this thread, as any other request's.
                Ok(Handled::Queue(api::Answer::Now(reply), _))
                    if writer.as_ref().is_none_or(|w| w.outbox.idle()) =>
                {
                    Ok(SaslAnswer {
                        reply,
                        outcome: SaslOutcome::Continue,
                    })
                }
                Ok(Handled::Queue(answer, out)) => {
                    let w = writer.get_or_insert_with(|| {
                        Writer::start(scope, &shared, out.clone(), &stats, peer)
                    });
                    if !w.send(Queued { answer, timer }) {
                        break;
                    }
                    continue;
                }
                Ok(Handled::Now(answer)) => Ok(answer),
                Err(fatal) => Err(fatal),
            };
            // A SASL answer to a frame taken for an OffsetCommit (a raw token).
            if writer.as_ref().is_some_and(|w| !w.outbox.drain()) {
                shared.in_flight.fetch_sub(1, Ordering::AcqRel);
                break;
            }
            let mut close = false;
            let outcome = outcome.map(|answer| {
                match answer.outcome {
                    SaslOutcome::Continue | SaslOutcome::Authenticated => {}
                    SaslOutcome::Close => close = true,
                    SaslOutcome::Failed => {
                        close = true;
                        // Only this client waits: its own thread sleeps.
                        let delay = shared
                            .security
                            .failed_logins
                            .failed(peer.ip(), std::time::Instant::now());
                        std::thread::sleep(delay);
                    }
                }
                answer.reply
            });
            let written = send_reply(&shared, &mut transport, peer, outcome);
            drop(timer);
            shared.in_flight.fetch_sub(1, Ordering::AcqRel);
            if written.is_err() || close {
                break;
            }
            if shared.stopping.load(Ordering::Acquire) {
                break;
            }
        }
        // The writer ends each commit under way (written while the client reads).
        if let Some(w) = writer {
            w.finish();
        }
    });
    transport.close_notify();
    let _ = transport.socket().shutdown(std::net::Shutdown::Both);
    tracing::debug!(%peer, "connection closed");
}

/// A request past [`admit`] on the connection's thread.
enum Handled<'a> {
    /// The reply (and its SASL outcome), written by the connection's thread.
    Now(SaslAnswer),
    /// A pipelined request: its answer goes through the connection's writer, which
    /// writes with the plaintext writer.
    Queue(api::Answer, &'a PlainWriter),
}

/// Writes `outcome`'s reply, if any: `Err` if the connection is to close (a write
/// failed, the client left, or the request was fatal; each logged).
fn send_reply(
    shared: &Shared,
    transport: &mut impl ReplyOut,
    peer: SocketAddr,
    outcome: Result<Reply, Fatal>,
) -> Result<(), ()> {
    match outcome {
        Ok(Reply::Nothing) => Ok(()),
        Ok(Reply::Parts(parts)) => write_reply(transport, parts).map_err(|e| {
            tracing::info!(%peer, error = %e, "cannot write a response; closing the connection");
        }),
        Ok(Reply::ClientGone) => {
            tracing::debug!(%peer, "the client hung up while its request waited");
            Err(())
        }
        Err(Fatal(msg)) => {
            peer_warn!(shared.peer_log, peer, "{msg}; closing the connection");
            Err(())
        }
    }
}

/// A pipelined request's answer, with its timer (recorded once the reply is written).
struct Queued {
    answer: api::Answer,
    timer: crate::metrics::server::RequestTimer,
}

/// How many queued replies the writer has not written yet, and whether it failed.
#[derive(Default)]
struct Outbox {
    state: parking_lot::Mutex<(usize, bool)>,
    written: parking_lot::Condvar,
}

impl Outbox {
    /// True if every queued reply is written and the writer has not failed: nothing
    /// the writer does can then overlap a reply written by the connection's thread.
    fn idle(&self) -> bool {
        let st = self.state.lock();
        st.0 == 0 && !st.1
    }

    /// Waits until every queued reply is written: false if the writer failed (the
    /// connection is to close).
    fn drain(&self) -> bool {
        let mut st = self.state.lock();
        while st.0 > 0 && !st.1 {
            self.written.wait(&mut st);
        }
        !st.1
    }
}

/// The thread that finishes a connection's pipelined requests in the order they came
/// and writes their replies (the connection's thread reads meanwhile, and writes only
/// once the queue is empty: see [`Outbox::drain`]).
struct Writer<'scope> {
    queue: std::sync::mpsc::SyncSender<Queued>,
    outbox: Arc<Outbox>,
    thread: std::thread::ScopedJoinHandle<'scope, ()>,
}

impl<'scope> Writer<'scope> {
    fn start<'env>(
        scope: &'scope std::thread::Scope<'scope, 'env>,
        shared: &'env Shared,
        mut transport: PlainWriter,
        stats: &crate::metrics::server::ConnectionStats,
        peer: SocketAddr,
    ) -> Writer<'scope> {
        let (queue, queued) = std::sync::mpsc::sync_channel::<Queued>(MAX_PIPELINED);
        let outbox = Arc::new(Outbox::default());
        let counting = stats.error_counter();
        let out = Arc::clone(&outbox);
        let thread = scope.spawn(move || {
            let _counting = counting.count_here();
            let mut failed = false;
            // Every queued request is finished, also once the connection failed: its
            // commit must leave the coordinator's order.
            for q in queued {
                let reply = match q.answer {
                    api::Answer::Now(reply) => Ok(reply),
                    api::Answer::Later(finish) => finish(),
                };
                if !failed && send_reply(shared, &mut transport, peer, reply).is_err() {
                    failed = true;
                    // The connection's thread, reading, sees the connection end.
                    let _ = transport.socket().shutdown(std::net::Shutdown::Both);
                }
                drop(q.timer);
                shared.in_flight.fetch_sub(1, Ordering::AcqRel);
                let mut st = out.state.lock();
                st.0 -= 1;
                st.1 |= failed;
                out.written.notify_all();
            }
        });
        Writer {
            queue,
            outbox,
            thread,
        }
    }

    /// Queues `q` (waiting while [`MAX_PIPELINED`] are): false if the writer failed
    /// (the connection is to close; `q` is finished all the same).
    fn send(&self, q: Queued) -> bool {
        self.outbox.state.lock().0 += 1;
        if let Err(std::sync::mpsc::SendError(q)) = self.queue.send(q) {
            // The writer is gone (it panicked, which the scope reports): the request
            // still ends.
            if let api::Answer::Later(finish) = q.answer {
                let _ = finish();
            }
            return false;
        }
        !self.outbox.state.lock().1
    }

    /// No more requests: waits until the writer has finished and written every one.
    fn finish(self) {
        drop(self.queue);
        let _ = self.thread.join();
    }
}

/// The connection's next request with its memory reservation, or None when the
/// connection ends: the client left, the server is stopping, the client sent nothing
/// for `connections.max.idle.ms`, or a frame could not be read (each logged as it
/// deserves).
fn next_request<'s>(
    shared: &'s Shared,
    transport: &mut Transport,
    peer: SocketAddr,
    max_request_size: usize,
) -> Option<(Vec<u8>, super::limits::Reservation<'s>)> {
    match read_request(shared, transport, max_request_size) {
        Ok(Some(request)) => return Some(request),
        Ok(None) => {}
        Err(FrameError::Closed) => {}
        Err(FrameError::Io(e)) if shared.stopping.load(Ordering::Acquire) => {
            tracing::debug!(%peer, error = %e, "connection closed by shutdown");
        }
        Err(FrameError::Io(e))
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ) =>
        {
            // The socket's read timeout is the idle timeout (see listener.rs).
            tracing::info!(
                %peer,
                "connection idle for connections.max.idle.ms = {} ms: closed",
                shared.config.idle_timeout.as_millis()
            );
        }
        Err(e @ FrameError::BadLength(_)) => {
            peer_warn!(
                shared.peer_log,
                peer,
                max_request_size = shared.config.max_request_size,
                max_queued_request_bytes = shared.config.max_queued_request_bytes,
                "refusing request: {e}; closing the connection"
            );
        }
        Err(e) => {
            if shared
                .peer_log
                .admit(peer.ip(), std::time::Instant::now())
                .is_some()
            {
                tracing::info!(%peer, "{e}; closing the connection");
            }
        }
    }
    None
}

/// A frame past the connection's security gate.
pub(crate) enum Admitted {
    /// A request for the API handlers.
    Request(Request),
    /// Answered by the connection itself (SASL, the ApiVersions fallback).
    Sasl(SaslAnswer),
}

/// Decide what a frame is on this connection: a bare SASL token (after a v0
/// SaslHandshake), a SASL request (which changes the session), a request the gate lets
/// through, or a fatal refusal (a request before authentication on a SASL listener).
pub(crate) fn admit(
    security: &Security,
    log: &PeerLog,
    session: &mut Session,
    peer: SocketAddr,
    frame: Vec<u8>,
) -> Result<Admitted, Fatal> {
    if session.expects_raw_token() {
        return Ok(Admitted::Sasl(api::sasl_authenticate::raw(
            security, session, peer, log, &frame,
        )));
    }
    let mut req = match parse(frame)? {
        Parsed::Reply(reply) => {
            return Ok(Admitted::Sasl(SaslAnswer {
                reply,
                outcome: SaslOutcome::Continue,
            }));
        }
        Parsed::Request(req) => req,
    };
    let key = req.header.request_api_key;
    if let Gate::Refuse(why) = session.gate(key) {
        return Err(Fatal(why));
    }
    match ApiKey::try_from(key) {
        Ok(ApiKey::SaslHandshake) => {
            api::sasl_handshake::handle(security, session, peer, log, &mut req).map(Admitted::Sasl)
        }
        Ok(ApiKey::SaslAuthenticate) => {
            api::sasl_authenticate::handle(security, session, peer, log, &mut req)
                .map(Admitted::Sasl)
        }
        _ => Ok(Admitted::Request(req)),
    }
}

/// Read the next request: its size, then (once the request memory can hold it) its
/// bytes. `Ok(None)` if the connection should end quietly while it waited for memory
/// (shutdown, or the client left).
fn read_request<'s>(
    shared: &'s Shared,
    transport: &mut Transport,
    max: usize,
) -> Result<Option<(Vec<u8>, super::limits::Reservation<'s>)>, FrameError> {
    let len = codec::read_size(transport, max)?;
    let socket = transport.socket();
    let Some(reservation) = shared.request_memory.reserve(len, || {
        shared.is_stopping() || transport::peer_closed(socket)
    }) else {
        return Ok(None);
    };
    let frame = transport.read_body(len)?;
    Ok(Some((frame, reservation)))
}

/// A frame after header parsing.
pub(crate) enum Parsed {
    /// A request of a supported api key and version, header decoded.
    Request(Request),
    /// Answered from the header alone (the ApiVersions fallback).
    Reply(Reply),
}

/// Check the api key and version of `frame` and decode its header.
pub(crate) fn parse(frame: Vec<u8>) -> Result<Parsed, Fatal> {
    let start = codec::request_start(&frame)
        .ok_or_else(|| Fatal(format!("request of {} bytes is too short", frame.len())))?;
    let name = api::api_name(start.api_key);
    let Some((lo, hi)) = api::supported_range(start.api_key) else {
        return Err(Fatal(format!("{name} is not supported")));
    };
    if start.api_version < lo || start.api_version > hi {
        if start.api_key == ApiKey::ApiVersions as i16 {
            // A client asks with its newest version first: the usual start, not a fault.
            tracing::debug!(
                version = start.api_version,
                client_id = codec::client_id(&frame).unwrap_or_default(),
                "ApiVersions v{} is not supported (versions {lo}-{hi} are): answered \
                 UNSUPPORTED_VERSION with the supported ranges",
                start.api_version
            );
            return api::unsupported_version_reply(start.correlation_id).map(Parsed::Reply);
        }
        // As Kafka, which closes the connection of a request of a version it does not
        // serve; the log line names the client.
        return Err(Fatal(format!(
            "{name} v{} is not supported (versions {lo}-{hi} are), client id {:?}",
            start.api_version,
            codec::client_id(&frame).unwrap_or_default()
        )));
    }
    let key =
        ApiKey::try_from(start.api_key).map_err(|()| Fatal(format!("{name} is not supported")))?;
    let header_version = key.request_header_version(start.api_version);
    let (header, body) = codec::split_header(Bytes::from(frame), header_version)
        .map_err(|e| Fatal(format!("cannot decode the header of a {name} request: {e}")))?;
    tracing::trace!(api = %name, version = start.api_version, correlation_id = start.correlation_id, "request");
    Ok(Parsed::Request(Request { header, body }))
}

/// Write one size prefix and then every part: bytes through a buffer, file regions
/// through the transport (`sendfile` on plaintext) after flushing the buffer.
fn write_reply(transport: &mut impl ReplyOut, parts: Vec<Part>) -> std::io::Result<()> {
    let total: usize = parts.iter().map(Part::len).sum();
    let size = i32::try_from(total).map_err(|_| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("response of {total} bytes does not fit a Kafka frame"),
        )
    })?;
    let mut out = BufWriter::with_capacity((total + 4).min(64 * 1024), transport);
    out.write_all(&size.to_be_bytes())?;
    for part in parts {
        match part {
            Part::Bytes(b) => out.write_all(&b)?,
            Part::File(region) => {
                out.flush()?;
                let file = region.file().ok_or_else(|| {
                    std::io::Error::new(std::io::ErrorKind::NotFound, "a log slice without a file")
                })?;
                out.get_mut()
                    .send_file(file, region.position(), region.len())?;
            }
        }
    }
    out.flush()
}
