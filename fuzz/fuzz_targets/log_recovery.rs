//! Fuzz target: opening a partition log whose segment (and index) files hold arbitrary
//! bytes must recover without panicking and never serve a corrupt batch.
#![no_main]

#[path = "../fuzz_logic.rs"]
mod fuzz_logic;

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_logic::log_recovery(data));
