//! Zero-copy transfer of segment bytes to a socket.
//!
//! The Fetch response carries record batches exactly as they lie in the segment file, so
//! the server hands the kernel a (file, position, length) triple and lets `sendfile(2)`
//! move the pages from the page cache to the socket without passing through user space.
//!
//! This is one of the two modules of the crate allowed `unsafe` (the other maps files):
//! the only unsafe code is the `libc::sendfile` call below. Every byte that leaves
//! through it is added to a process-wide counter, [`sendfile_bytes_sent`], so that tests
//! can prove a fetch took the zero-copy path.
//!
//! Invariants:
//! - [`send_file`] either writes exactly `len` bytes or returns an error; partial writes
//!   are retried from where the kernel stopped, `EINTR` is retried.
//! - Where `sendfile` is unavailable (not Linux, or a file system that refuses it), the
//!   bytes are copied with `pread` + `write` instead and the counter is not touched.

use std::fs::File;
use std::io::{self, Write};
use std::net::TcpStream;

/// Total number of bytes the server has sent with `sendfile(2)` (zero-copy) since the
/// process started, over all servers and connections of the process.
///
/// Fetch responses send record bytes this way; tests read this counter to check that a
/// fetch took the zero-copy path, and the server's metrics report it.
#[cfg(any(test, feature = "testing"))]
pub(crate) fn sendfile_bytes_sent() -> u64 {
    crate::metrics::server::SENDFILE_BYTES.load(std::sync::atomic::Ordering::Relaxed)
}

/// A run of bytes inside an open file, to be sent without copying.
///
/// Implemented by the log's read slice; the value must keep the file and the bytes valid
/// (not truncated) for as long as it lives.
pub(crate) trait FileRegion: Send {
    /// The file that holds the bytes (`None` only for an empty region).
    fn file(&self) -> Option<&File>;
    /// Byte position of the first byte inside the file.
    fn position(&self) -> u64;
    /// Number of bytes.
    fn len(&self) -> usize;
}

/// Write `len` bytes of `file` starting at `position` to `socket`.
///
/// Uses `sendfile(2)` on Linux and falls back to a buffered copy when the kernel refuses
/// it for this file (`EINVAL`, `ENOSYS`, `EOPNOTSUPP`).
pub(crate) fn send_file(
    socket: &TcpStream,
    file: &File,
    position: u64,
    len: usize,
) -> io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        match linux::send_all(socket, file, position, len) {
            Ok(()) => Ok(()),
            Err((sent, e)) if linux::refuses(&e) => {
                copy_range(socket, file, position + sent as u64, len - sent)
            }
            Err((_, e)) => Err(e),
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        copy_range(socket, file, position, len)
    }
}

#[cfg(target_os = "linux")]
mod linux {
    use crate::metrics::server::SENDFILE_BYTES;
    use std::fs::File;
    use std::io;
    use std::net::TcpStream;
    use std::os::fd::AsRawFd;
    use std::sync::atomic::Ordering;

    /// Largest count passed to one `sendfile` call (the kernel caps one call near 2 GiB).
    const MAX_CHUNK: usize = 1 << 30;

    /// True when `sendfile` cannot be used for this pair of descriptors at all.
    pub(super) fn refuses(e: &io::Error) -> bool {
        matches!(
            e.raw_os_error(),
            Some(libc::EINVAL) | Some(libc::ENOSYS) | Some(libc::EOPNOTSUPP)
        )
    }

    /// The `sendfile` loop; on error, how many bytes were sent before it.
    pub(super) fn send_all(
        socket: &TcpStream,
        file: &File,
        position: u64,
        len: usize,
    ) -> Result<(), (usize, io::Error)> {
        let out_fd = socket.as_raw_fd();
        let in_fd = file.as_raw_fd();
        let mut sent = 0usize;
        while sent < len {
            let mut offset = libc::off_t::try_from(position + sent as u64).map_err(|_| {
                (
                    sent,
                    io::Error::new(io::ErrorKind::InvalidInput, "file position overflows off_t"),
                )
            })?;
            let count = (len - sent).min(MAX_CHUNK);
            // SAFETY: `out_fd` and `in_fd` are open descriptors borrowed from `socket` and
            // `file`, which outlive this call; `offset` is a valid, exclusively borrowed
            // `off_t` the kernel updates in place; `count` bytes are only read from the
            // file (never from our memory), so no Rust memory is read or written except
            // `offset`.
            #[allow(unsafe_code)]
            let n = unsafe { libc::sendfile(out_fd, in_fd, &mut offset, count) };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err((sent, e));
            }
            if n == 0 {
                // The file is shorter than the region: a truncated segment. Never spin.
                return Err((
                    sent,
                    io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        format!(
                            "segment file ended at byte {} while sending {len} bytes from byte {position}",
                            position + sent as u64
                        ),
                    ),
                ));
            }
            let n = n as usize;
            sent += n;
            SENDFILE_BYTES.fetch_add(n as u64, Ordering::Relaxed);
        }
        Ok(())
    }
}

/// Copy `len` bytes from `file` at `position` to `out` through a user-space buffer (the
/// fallback where `sendfile` is refused, and the way file bytes go through TLS).
pub(crate) fn copy_range<W: Write>(
    mut out: W,
    file: &File,
    position: u64,
    len: usize,
) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    let mut buf = vec![0u8; len.min(256 * 1024)];
    let mut done = 0usize;
    while done < len {
        let want = (len - done).min(buf.len());
        let n = file.read_at(&mut buf[..want], position + done as u64)?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "segment file ended at byte {} while sending {len} bytes from byte {position}",
                    position + done as u64
                ),
            ));
        }
        out.write_all(&buf[..n])?;
        done += n;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Seek, SeekFrom};
    use std::net::TcpListener;

    #[test]
    fn sends_a_file_range_and_counts_it() {
        let mut file = tempfile::tempfile().unwrap();
        let data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        file.write_all(&data).unwrap();
        file.seek(SeekFrom::Start(0)).unwrap();

        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let reader = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut got = Vec::new();
            s.read_to_end(&mut got).unwrap();
            got
        });
        let before = sendfile_bytes_sent();
        let sock = TcpStream::connect(addr).unwrap();
        send_file(&sock, &file, 1000, 150_000).unwrap();
        drop(sock);
        let got = reader.join().unwrap();
        assert_eq!(got, &data[1000..151_000]);
        if cfg!(target_os = "linux") {
            assert!(sendfile_bytes_sent() >= before + 150_000);
        }
    }

    #[test]
    fn a_region_past_the_end_of_the_file_is_an_error() {
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(b"short").unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let reader = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut got = Vec::new();
            let _ = s.read_to_end(&mut got);
            got
        });
        let sock = TcpStream::connect(addr).unwrap();
        let err = send_file(&sock, &file, 0, 100).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
        drop(sock);
        assert_eq!(reader.join().unwrap(), b"short");
    }
}
