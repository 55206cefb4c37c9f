//! Buffered stdout that turns a closed pipe into a quiet stop, and hides the progress
//! bars while it writes when stdout is the terminal they are drawn on.

use crate::{CliResult, Fail};
use std::io::{self, BufWriter, StdoutLock, Write};

/// Buffered, locked stdout. Write errors become [`Fail`]s: `BrokenPipe` when the reader
/// went away (`tidelog ... | head`), a message otherwise.
pub(crate) struct Out {
    w: BufWriter<Stdout>,
}

/// Locked stdout whose writes hide the progress bars meanwhile (see `progress`).
struct Stdout(StdoutLock<'static>);

impl Write for Stdout {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        crate::progress::suspend(|| self.0.write(buf))
    }

    fn flush(&mut self) -> io::Result<()> {
        crate::progress::suspend(|| self.0.flush())
    }
}

/// Maps a write error on stdout to a [`Fail`].
pub(crate) fn stdout_err(e: io::Error) -> Fail {
    if e.kind() == io::ErrorKind::BrokenPipe {
        Fail::BrokenPipe
    } else {
        Fail::Msg(format!("cannot write to standard output: {e}"))
    }
}

impl Out {
    /// Locks stdout.
    pub(crate) fn new() -> Out {
        Out {
            w: BufWriter::with_capacity(64 * 1024, Stdout(io::stdout().lock())),
        }
    }

    /// Writes one line.
    pub(crate) fn line(&mut self, s: impl std::fmt::Display) -> CliResult {
        writeln!(self.w, "{s}").map_err(stdout_err)
    }

    /// Writes raw bytes.
    pub(crate) fn bytes(&mut self, b: &[u8]) -> CliResult {
        self.w.write_all(b).map_err(stdout_err)
    }

    /// Flushes what is buffered.
    pub(crate) fn flush(&mut self) -> CliResult {
        self.w.flush().map_err(stdout_err)
    }
}

impl Drop for Out {
    fn drop(&mut self) {
        // Errors were reported by `flush` where it mattered; a closed pipe is not one.
        let _ = self.w.flush();
    }
}
