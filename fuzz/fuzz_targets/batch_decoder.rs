//! Fuzz target: RecordBatch v2 decoding of arbitrary bytes must never panic.
#![no_main]

#[path = "../fuzz_logic.rs"]
mod fuzz_logic;

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_logic::batch_decoder(data));
