//! Memory for requests in flight is bounded over all connections
//! (`max_queued_request_bytes`): many clients that each send part of a large request
//! keep the server's memory near the limit, a connection waits for memory rather than
//! reading past it, and reading resumes when memory frees.
#![cfg(feature = "server")]

mod server_support;

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use server_support::{answers, api_versions, eventually, response, rss};
use tidelog::{Broker, Server};

const LIMIT: usize = 8 << 20;
const CLIENTS: usize = 64;
/// Each client announces a request of 4 MiB and sends half of it.
const FRAME: usize = 4 << 20;
const SENT: usize = 2 << 20;

/// The start of an ApiVersions v0 request of `len` bytes (size prefix excluded): a
/// header, then padding that the client may or may not send.
fn big_request(len: usize, corr: i32) -> Vec<u8> {
    let mut out = (len as i32).to_be_bytes().to_vec();
    out.extend_from_slice(&18i16.to_be_bytes());
    out.extend_from_slice(&0i16.to_be_bytes());
    out.extend_from_slice(&corr.to_be_bytes());
    out.extend_from_slice(&(-1i16).to_be_bytes());
    out.resize(4 + len, 0);
    out
}

#[test]
fn partial_requests_from_many_clients_stay_within_the_request_memory() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::builder(Broker::open(dir.path()).unwrap())
        .listen(SocketAddr::from(([127, 0, 0, 1], 0)))
        .max_queued_request_bytes(LIMIT)
        .start()
        .unwrap();
    let addr = server.local_addr();
    let baseline = rss();

    // One buffer for every client, so the clients' own memory stays small.
    let bytes: Arc<Vec<u8>> = Arc::new(big_request(FRAME, 1)[..4 + SENT].to_vec());
    let writers: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let bytes = bytes.clone();
            let mut s = TcpStream::connect(addr).unwrap();
            std::thread::spawn(move || {
                // A client the server does not read from stops when the socket buffers
                // are full: give up after a while and keep the connection open.
                s.set_write_timeout(Some(Duration::from_secs(3))).unwrap();
                let _ = s.write_all(&bytes);
                s
            })
        })
        .collect();
    let mut peak = 0u64;
    let clients: Vec<TcpStream> = writers
        .into_iter()
        .map(|w| {
            peak = peak.max(rss());
            w.join().unwrap()
        })
        .collect();
    // The server has read what it was going to read; watch its memory a little longer.
    for _ in 0..25 {
        peak = peak.max(rss());
        std::thread::sleep(Duration::from_millis(20));
    }
    let grown = peak.saturating_sub(baseline);
    let allowed = (LIMIT + (24 << 20)) as u64;
    assert!(
        grown <= allowed,
        "{CLIENTS} clients sent {} MiB of partial requests: memory grew by {} MiB, more \
         than the {} MiB limit plus a 24 MiB margin",
        (CLIENTS * SENT) >> 20,
        grown >> 20,
        LIMIT >> 20
    );

    // The memory is held by two of the partial requests (4 MiB each): even a small
    // complete request waits; when the partial requests go away it is read and answered.
    let mut waiting = TcpStream::connect(addr).unwrap();
    waiting.write_all(&api_versions(7)).unwrap();
    waiting
        .set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    assert!(
        response(&mut waiting).is_err(),
        "answered while the memory was held"
    );
    drop(clients);
    waiting
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let (corr, _) = response(&mut waiting).expect("answered once the memory was free");
    assert_eq!(corr, 7);

    // A request larger than the whole request memory is refused at once, not waited for.
    let mut huge = TcpStream::connect(addr).unwrap();
    huge.write_all(&((LIMIT + 1) as i32).to_be_bytes()).unwrap();
    huge.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    assert!(response(&mut huge).is_err());
    // Nothing is left reserved: new clients are answered.
    assert!(eventually(Duration::from_secs(10), || answers(addr)));
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(&api_versions(3)).unwrap();
    assert_eq!(response(&mut s).unwrap().0, 3);
    server.shutdown().unwrap();
}
