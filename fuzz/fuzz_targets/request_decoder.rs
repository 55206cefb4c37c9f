//! The server's request decoder on arbitrary bytes: framing, header, every supported
//! request body. Must never panic, abort or allocate out of proportion to the input.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = tidelog::testing::fuzz_decode_request(data);
});
