//! SaslAuthenticate (key 36), versions 0-2: one token of the SASL exchange the
//! handshake chose, and (after a v0 SaslHandshake) the same tokens as bare frames.
//!
//! A token that completes the exchange makes the connection's principal `User:<name>`
//! and opens every API to it. A failed exchange (wrong password, unknown user,
//! malformed message) answers SASL_AUTHENTICATION_FAILED with Kafka's message, logged
//! with the peer address (rate-limited), and the connection closes; each failure from
//! the same address delays its answer longer (the `sasl` module's `FailedLogins`), so
//! only that client is slowed down. `session_lifetime_ms` is 0: no re-authentication.

use bytes::Bytes;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::{SaslAuthenticateRequest, SaslAuthenticateResponse};

use super::{Fatal, Reply, Request, SaslAnswer, SaslOutcome, kstr};
use crate::security::peer_log::{PeerLog, peer_warn};
use crate::security::sasl::{self, AuthStep, SaslState};
use crate::security::{Security, Session};

pub(crate) fn handle(
    security: &Security,
    session: &mut Session,
    peer: std::net::SocketAddr,
    log: &PeerLog,
    req: &mut Request,
) -> Result<SaslAnswer, Fatal> {
    let request: SaslAuthenticateRequest = req.decode()?;
    let (response, outcome) = match exchange(security, session, peer, log, &request.auth_bytes) {
        Ok((reply, outcome)) => (
            SaslAuthenticateResponse::default()
                .with_auth_bytes(Bytes::from(reply))
                .with_session_lifetime_ms(0),
            outcome,
        ),
        Err((code, message, outcome)) => (
            SaslAuthenticateResponse::default()
                .with_error_code(code)
                .with_error_message(Some(kstr(message))),
            outcome,
        ),
    };
    Ok(SaslAnswer {
        reply: req.respond(&response)?,
        outcome,
    })
}

/// A bare token after a v0 SaslHandshake: the answer is the bare server token; a failure
/// can only be told by closing the connection.
pub(crate) fn raw(
    security: &Security,
    session: &mut Session,
    peer: std::net::SocketAddr,
    log: &PeerLog,
    token: &[u8],
) -> SaslAnswer {
    match exchange(security, session, peer, log, token) {
        Ok((reply, outcome)) => SaslAnswer {
            reply: Reply::bytes(reply),
            outcome,
        },
        Err((_, _, outcome)) => SaslAnswer {
            reply: Reply::Nothing,
            outcome,
        },
    }
}

/// One token through the connection's exchange.
fn exchange(
    security: &Security,
    session: &mut Session,
    peer: std::net::SocketAddr,
    log: &PeerLog,
    token: &[u8],
) -> Result<(Vec<u8>, SaslOutcome), (i16, String, SaslOutcome)> {
    let SaslState::Exchange {
        mechanism, scram, ..
    } = &mut session.sasl
    else {
        peer_warn!(
            log,
            peer,
            "SaslAuthenticate without a SaslHandshake first; closing the connection"
        );
        return Err((
            ResponseError::IllegalSaslState.code(),
            "SaslAuthenticate needs a SaslHandshake first".into(),
            SaslOutcome::Close,
        ));
    };
    let mechanism = *mechanism;
    match sasl::step(
        mechanism,
        scram,
        security.decoy_key,
        &*security.credentials,
        token,
    ) {
        AuthStep::Continue(reply) => Ok((reply, SaslOutcome::Continue)),
        AuthStep::Done { user, reply } => {
            session.principal = format!("User:{user}");
            session.sasl = SaslState::Authenticated;
            security.failed_logins.succeeded(peer.ip());
            tracing::info!(%peer, user, %mechanism, "authenticated");
            Ok((reply, SaslOutcome::Authenticated))
        }
        AuthStep::Failed { log: why, client } => {
            session.sasl = SaslState::Start;
            peer_warn!(
                log,
                peer,
                "SASL authentication failed: {why}; closing the connection"
            );
            Err((
                ResponseError::SaslAuthenticationFailed.code(),
                client,
                SaslOutcome::Failed,
            ))
        }
    }
}
