//! Fuzz target: decompression of arbitrary gzip, snappy, lz4 and zstd streams must never
//! panic nor exceed its limit, and what decodes must round-trip through tidelog's encoder.
#![no_main]

#[path = "../fuzz_logic.rs"]
mod fuzz_logic;

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_logic::decompress(data));
