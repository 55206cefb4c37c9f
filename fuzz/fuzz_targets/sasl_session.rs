//! A connection on a SASL listener fed arbitrary frames: the security gate, SaslHandshake
//! (v0 and v1), SaslAuthenticate and bare v0 tokens, PLAIN and SCRAM exchanges, and the
//! SCRAM message parsers on every frame. Must never panic; no request but ApiVersions
//! and the SASL APIs may pass before authentication, and nobody may authenticate
//! without the one user's password (`fuzz_logic::sasl_session`).
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../fuzz_logic.rs"]
mod fuzz_logic;

fuzz_target!(|data: &[u8]| {
    fuzz_logic::sasl_session(data);
});
