//! Arbitrary bytes as the client's side of a connection to an SSL listener: the server's
//! TLS handshake (rustls with tidelog's configuration, with and without required client
//! certificates, and tidelog's handshake loop: reads, alerts, end of stream, timeouts).
//! Must never panic, and never complete a handshake, so that nothing is read as a
//! request (`fuzz_logic::tls_handshake`).
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../fuzz_logic.rs"]
mod fuzz_logic;

fuzz_target!(|data: &[u8]| {
    fuzz_logic::tls_handshake(data);
});
