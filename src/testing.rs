//! Hooks for tidelog's own tests, benchmarks and fuzz targets (feature `testing`).
//!
//! Nothing here is part of the stable API: these functions reach below the layers an
//! application uses, to build damaged or half-written states on purpose and to count
//! what the server did. Enable the feature only in test, bench and fuzz builds.

use std::path::Path;

use crate::error::Result;

/// Writes `payload` as a crash-safe checkpoint file (temp file, fsync, rename, fsync of
/// the directory, CRC-32 over the bytes), as the storage layer writes
/// `partition.checkpoint` and the broker its topic registry (`docs/format.md`).
pub fn write_checkpoint(path: &Path, payload: &[u8]) -> Result<()> {
    crate::storage::write_checkpoint(path, payload)
}

/// Decodes one request frame (without its size prefix) as the server would, then
/// decodes its body, acting on nothing: what the `request_decoder` fuzz target calls.
/// Returns whether the request was accepted.
#[cfg(feature = "server")]
pub fn fuzz_decode_request(frame: &[u8]) -> bool {
    crate::server::fuzz_decode_request(frame)
}

/// Bytes the server has sent with `sendfile(2)` since the process started, over every
/// server in the process.
#[cfg(feature = "server")]
pub fn sendfile_bytes_sent() -> u64 {
    crate::server::sendfile_bytes_sent()
}
