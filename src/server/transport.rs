//! How a connection's bytes travel: reads, writes, file regions, and whether the client
//! is still there.
//!
//! A connection reads requests and writes responses through a [`Transport`], never
//! through a bare socket, so that another way of carrying bytes is one more variant here
//! rather than a change to the connection loop. The thread that writes a plaintext
//! connection's pipelined replies writes through its [`PlainWriter`], a type that
//! cannot be TLS. The plaintext transport sends file
//! regions with `sendfile(2)`; the TLS transport (rustls) must encrypt them, so it reads
//! them with `pread` and copies them through its writer.
//!
//! The raw socket stays reachable ([`Transport::socket`]) for what is about the TCP
//! connection itself whatever runs over it: shutdown, and noticing a client that hung up
//! while its request waits ([`peer_closed`]).

use std::fs::File;
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::sync::Arc;

use super::codec::{self, FrameError};
use super::sendfile;
use crate::security::tls::TlsStream;

/// The byte stream of one connection.
pub(crate) enum Transport {
    /// Bytes as they are on the socket; file regions go out with `sendfile(2)`.
    Plain(Arc<TcpStream>),
    /// TLS over the socket (after the handshake); file regions are copied through it.
    Tls(Box<TlsStream>),
}

/// Where a response is written: a connection's [`Transport`], or the [`PlainWriter`] of
/// a plaintext connection's thread that writes pipelined replies.
pub(crate) trait ReplyOut: Write {
    /// The TCP socket under it.
    fn socket(&self) -> &TcpStream;

    /// Write `len` bytes of `file` from `position`. Buffered bytes must have been
    /// flushed by the caller first.
    fn send_file(&mut self, file: &File, position: u64, len: usize) -> io::Result<()>;
}

/// The writing side of a plaintext connection, for a thread other than the one that
/// reads it (which keeps its [`Transport`]). A TLS session cannot be split that way: its
/// connection has none ([`Transport::plain_writer`]).
#[derive(Clone)]
pub(crate) struct PlainWriter(Arc<TcpStream>);

impl ReplyOut for PlainWriter {
    fn socket(&self) -> &TcpStream {
        &self.0
    }

    fn send_file(&mut self, file: &File, position: u64, len: usize) -> io::Result<()> {
        sendfile::send_file(&self.0, file, position, len)
    }
}

impl Write for PlainWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        (&*self.0).write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        (&*self.0).flush()
    }
}

impl ReplyOut for Transport {
    fn socket(&self) -> &TcpStream {
        Transport::socket(self)
    }

    fn send_file(&mut self, file: &File, position: u64, len: usize) -> io::Result<()> {
        match self {
            Transport::Plain(s) => sendfile::send_file(s, file, position, len),
            Transport::Tls(t) => sendfile::copy_range(&mut **t, file, position, len),
        }
    }
}

impl Transport {
    /// The TCP socket under the transport.
    pub(crate) fn socket(&self) -> &TcpStream {
        match self {
            Transport::Plain(s) => s,
            Transport::Tls(t) => &t.sock.0,
        }
    }

    /// A writer of the same connection for another thread: plaintext only.
    pub(crate) fn plain_writer(&self) -> Option<PlainWriter> {
        match self {
            Transport::Plain(s) => Some(PlainWriter(Arc::clone(s))),
            Transport::Tls(_) => None,
        }
    }

    /// Reads the `len` bytes of a request whose size prefix was read
    /// ([`codec::read_body`]: the buffer grows with the bytes that arrive). Plaintext
    /// reads from the socket itself: std reads a `TcpStream` into a vector's spare
    /// capacity as it is, where a reader with only [`Read::read`] (as this type) needs
    /// every byte of that capacity zeroed first, a memset of each request's size.
    pub(crate) fn read_body(&mut self, len: usize) -> Result<Vec<u8>, FrameError> {
        match self {
            Transport::Plain(s) => codec::read_body(&mut &**s, len),
            Transport::Tls(_) => codec::read_body(self, len),
        }
    }

    /// Ends the TLS session politely (a close_notify alert); nothing for plaintext.
    pub(crate) fn close_notify(&mut self) {
        if let Transport::Tls(t) = self {
            t.conn.send_close_notify();
            let _ = t.conn.write_tls(&mut t.sock);
        }
    }
}

impl Read for Transport {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Transport::Plain(s) => (&**s).read(buf),
            Transport::Tls(t) => t.read(buf),
        }
    }
}

impl Write for Transport {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Transport::Plain(s) => (&**s).write(buf),
            Transport::Tls(t) => t.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Transport::Plain(s) => (&**s).flush(),
            Transport::Tls(t) => t.flush(),
        }
    }
}

/// True if the client has closed its end of `socket` (or the connection failed), checked
/// without waiting and without consuming any byte it sent: a request it pipelined stays
/// in the socket for the next read.
///
/// On Linux `poll(2)` reports `POLLRDHUP` as soon as the peer's FIN arrives, even with
/// unread bytes before it. Elsewhere a readable socket is peeked at: zero bytes means the
/// peer closed (a close behind pipelined bytes is then seen at the next read).
pub(crate) fn peer_closed(socket: &TcpStream) -> bool {
    use rustix::event::{PollFd, PollFlags, Timespec, poll};
    #[cfg(any(target_os = "linux", target_os = "android"))]
    let interest = PollFlags::RDHUP;
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    let interest = PollFlags::IN;
    let mut fds = [PollFd::new(socket, interest)];
    let now = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    match poll(&mut fds, Some(&now)) {
        Ok(0) => false,
        Ok(_) => {
            let got = fds[0].revents();
            if got.intersects(PollFlags::RDHUP | PollFlags::HUP | PollFlags::ERR) {
                return true;
            }
            if got.contains(PollFlags::NVAL) {
                return true;
            }
            // Readable without a hang-up flag (not Linux): EOF reads as zero bytes.
            got.contains(PollFlags::IN) && matches!(socket.peek(&mut [0u8; 1]), Ok(0) | Err(_))
        }
        // EINTR and the like: not a hang-up; the next check will tell.
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Shutdown, TcpListener};
    use std::time::{Duration, Instant};

    fn pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (server, _) = l.accept().unwrap();
        (client, server)
    }

    /// Polls `peer_closed` for up to 5 s (the FIN crosses loopback at once, but the
    /// test does not rely on when).
    fn becomes_closed(s: &TcpStream) -> bool {
        let end = Instant::now() + Duration::from_secs(5);
        while Instant::now() < end {
            if peer_closed(s) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        false
    }

    #[test]
    fn an_open_connection_is_not_closed_even_with_bytes_waiting() {
        let (mut client, server) = pair();
        assert!(!peer_closed(&server));
        client.write_all(b"pipelined request").unwrap();
        std::thread::sleep(Duration::from_millis(20));
        assert!(!peer_closed(&server));
        // Nothing was consumed.
        let mut buf = [0u8; 17];
        (&server).read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"pipelined request");
    }

    #[test]
    fn a_client_that_closes_is_noticed() {
        let (client, server) = pair();
        drop(client);
        assert!(becomes_closed(&server));
    }

    #[test]
    fn a_client_that_closes_after_sending_is_noticed_and_its_bytes_kept() {
        let (mut client, server) = pair();
        client.write_all(b"abc").unwrap();
        client.shutdown(Shutdown::Write).unwrap();
        #[cfg(any(target_os = "linux", target_os = "android"))]
        assert!(becomes_closed(&server));
        let mut buf = Vec::new();
        (&server).read_to_end(&mut buf).unwrap();
        assert_eq!(buf, b"abc");
    }

    #[test]
    fn a_plaintext_connection_has_a_writer_for_another_thread() {
        let (client, server) = pair();
        let t = Transport::Plain(Arc::new(server));
        let mut out = t.plain_writer().unwrap();
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(b"0123456789").unwrap();
        std::thread::spawn(move || {
            out.write_all(b"bytes,").unwrap();
            out.send_file(&file, 2, 5).unwrap();
            out.socket().shutdown(Shutdown::Write).unwrap();
        })
        .join()
        .unwrap();
        let mut got = Vec::new();
        (&client).read_to_end(&mut got).unwrap();
        assert_eq!(got, b"bytes,23456");
        // The reading side is the transport's, untouched.
        assert_eq!(
            t.socket().local_addr().unwrap(),
            client.peer_addr().unwrap()
        );
    }

    #[test]
    fn a_plaintext_body_arrives_in_pieces_and_a_short_one_is_truncated() {
        let (mut client, server) = pair();
        let mut t = Transport::Plain(Arc::new(server));
        // A body of 200 KiB in three writes: more than the first 64 KiB buffer, read
        // across the writes; the bytes after it stay for the next request.
        let body: Vec<u8> = (0..200 * 1024u32).map(|i| (i % 251) as u8).collect();
        let writer = std::thread::spawn(move || {
            for piece in body.chunks(70_000) {
                client.write_all(piece).unwrap();
                std::thread::sleep(Duration::from_millis(2));
            }
            client.write_all(b"next").unwrap();
            // Then a request that promises 12 bytes and sends 5.
            client.write_all(b"12345").unwrap();
            client.shutdown(Shutdown::Write).unwrap();
            body
        });
        let got = t.read_body(200 * 1024).unwrap();
        let body = writer.join().unwrap();
        assert_eq!(got, body);
        assert!(got.capacity() <= body.len(), "{}", got.capacity());
        assert_eq!(t.read_body(4).unwrap(), b"next");
        match t.read_body(12) {
            Err(FrameError::Truncated { expected, got }) => assert_eq!((expected, got), (12, 5)),
            other => panic!("{other:?}"),
        }
    }
}
