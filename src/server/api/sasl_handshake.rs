//! SaslHandshake (key 17), versions 0-1: the client names the SASL mechanism it wants.
//!
//! On a SASL listener, before authentication: the mechanism must be one the server has
//! enabled, else UNSUPPORTED_SASL_MECHANISM with the enabled ones, and the connection
//! closes. v1 is followed by SaslAuthenticate requests; v0 (Kafka 0.10's form) by bare
//! size-prefixed SASL tokens. A second handshake, or one on a listener without SASL, is
//! ILLEGAL_SASL_STATE (re-authentication is not offered: SaslAuthenticate answers a
//! session lifetime of 0).

use kafka_protocol::ResponseError;
use kafka_protocol::messages::{SaslHandshakeRequest, SaslHandshakeResponse};

use super::{Fatal, Request, SaslAnswer, SaslOutcome, kstr};
use crate::security::peer_log::peer_warn;
use crate::security::sasl::{SaslMechanism, SaslState};
use crate::security::{Security, Session};

pub(crate) fn handle(
    security: &Security,
    session: &mut Session,
    peer: std::net::SocketAddr,
    log: &crate::security::peer_log::PeerLog,
    req: &mut Request,
) -> Result<SaslAnswer, Fatal> {
    let request: SaslHandshakeRequest = req.decode()?;
    let enabled: Vec<_> = security.mechanisms.iter().map(|m| kstr(m.name())).collect();
    let answer = |code: i16, outcome| -> Result<SaslAnswer, Fatal> {
        let response = SaslHandshakeResponse::default()
            .with_error_code(code)
            .with_mechanisms(enabled.clone());
        Ok(SaslAnswer {
            reply: req.respond(&response)?,
            outcome,
        })
    };
    let asked = request.mechanism.as_str();
    if !session.protocol.uses_sasl() {
        return answer(
            ResponseError::IllegalSaslState.code(),
            SaslOutcome::Continue,
        );
    }
    if !matches!(session.sasl, SaslState::Start) {
        peer_warn!(
            log,
            peer,
            "SaslHandshake for {asked} after one already happened; closing the connection"
        );
        return answer(ResponseError::IllegalSaslState.code(), SaslOutcome::Close);
    }
    let chosen = SaslMechanism::from_name(asked).filter(|m| security.mechanisms.contains(m));
    let Some(mechanism) = chosen else {
        peer_warn!(
            log,
            peer,
            "SASL mechanism {asked:?} is not enabled; closing the connection"
        );
        return answer(
            ResponseError::UnsupportedSaslMechanism.code(),
            SaslOutcome::Close,
        );
    };
    session.sasl = SaslState::Exchange {
        mechanism,
        raw: req.version() == 0,
        scram: None,
    };
    answer(0, SaslOutcome::Continue)
}
