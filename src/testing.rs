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

/// Runs the server side of an SSL listener's TLS handshake with `tls`'s certificate
/// (the first call's settings are kept) on a loopback connection whose client sends
/// `data`, then closes its side; client certificates are required when `data`'s length
/// is odd and `tls` has a client CA. Panics if the handshake completes: what the
/// `tls_handshake` fuzz target calls.
#[cfg(feature = "server")]
pub fn fuzz_tls_handshake(tls: &crate::security::tls::TlsSettings, data: &[u8]) {
    crate::server::fuzz_tls_handshake(tls, data)
}

/// Feeds `data` (frames, each a big-endian `u16` length and its bytes) to a connection on
/// a SASL listener through the server's security gate, SASL handlers and SCRAM parsers;
/// panics if anything but ApiVersions and the SASL APIs is served before authentication,
/// or if a session authenticates as anyone but the one user, `fuzz` (password
/// `fuzz-password`, SCRAM-SHA-256): what the `sasl_session` fuzz target calls.
#[cfg(feature = "server")]
pub fn fuzz_sasl_session(data: &[u8]) {
    crate::server::fuzz_sasl_session(data)
}

/// Bytes the server has sent with `sendfile(2)` since the process started, over every
/// server in the process.
#[cfg(feature = "server")]
pub fn sendfile_bytes_sent() -> u64 {
    crate::server::sendfile_bytes_sent()
}

/// What a `tracing` subscriber wrote, kept in memory for a test to read: pass a clone
/// as the subscriber's writer (`tracing_subscriber::fmt().with_writer(move ||
/// logs.clone())`), then look for lines.
#[derive(Debug, Clone, Default)]
pub struct CapturedLogs(std::sync::Arc<parking_lot::Mutex<Vec<u8>>>);

impl std::io::Write for CapturedLogs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl CapturedLogs {
    /// Every line written so far that contains each of `needles`.
    pub fn lines_with(&self, needles: &[&str]) -> Vec<String> {
        String::from_utf8_lossy(&self.0.lock())
            .lines()
            .filter(|l| needles.iter().all(|n| l.contains(n)))
            .map(str::to_string)
            .collect()
    }

    /// Waits at most `limit` for a line containing each of `needles` and returns the
    /// first; on timeout, an error with everything captured, for the test's message.
    pub fn wait_for_line(
        &self,
        needles: &[&str],
        limit: std::time::Duration,
    ) -> std::result::Result<String, String> {
        let deadline = std::time::Instant::now() + limit;
        loop {
            if let Some(line) = self.lines_with(needles).into_iter().next() {
                return Ok(line);
            }
            if std::time::Instant::now() >= deadline {
                return Err(format!(
                    "no line with {needles:?} within {limit:?} in:\n{}",
                    String::from_utf8_lossy(&self.0.lock())
                ));
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

/// The byte positions of the batches of the segment file at `path`, walking their
/// headers from the start; an error names the file and the first batch that does not
/// walk.
pub fn batch_positions(path: &Path) -> Result<Vec<usize>> {
    let bytes = std::fs::read(path).map_err(|e| crate::error::Error::io("read", path, e))?;
    let mut it = crate::record::batches(&bytes);
    let mut out = Vec::new();
    loop {
        let at = it.position();
        match it.next() {
            Some(Ok(_)) => out.push(at),
            Some(Err(e)) => {
                return Err(crate::error::Error::corrupt(
                    path.display().to_string(),
                    at as u64,
                    e.to_string(),
                ));
            }
            None => return Ok(out),
        }
    }
}

/// Damages batch number `index` (from 0) of the segment file at `path` in place: its
/// magic byte becomes 9, which no reader accepts. Returns the batch's byte position.
pub fn damage_batch_magic(path: &Path, index: usize) -> Result<usize> {
    let positions = batch_positions(path)?;
    let Some(&at) = positions.get(index) else {
        let why = format!("it has {} batches, no batch {index}", positions.len());
        let invalid = std::io::Error::new(std::io::ErrorKind::InvalidInput, why);
        return Err(crate::error::Error::io("damage", path, invalid));
    };
    let mut bytes = std::fs::read(path).map_err(|e| crate::error::Error::io("read", path, e))?;
    bytes[at + 16] = 9;
    std::fs::write(path, &bytes).map_err(|e| crate::error::Error::io("write", path, e))?;
    Ok(at)
}
