//! Raw-bytes tests of framing, the ApiVersions fallback and shutdown, against a real
//! socket.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};

use super::*;

/// A server over a fresh broker in a temporary directory.
fn start() -> ServerHandle {
    start_in(Box::leak(Box::new(tempfile::tempdir().unwrap())).path())
}

fn start_in(dir: &std::path::Path) -> ServerHandle {
    Server::builder(crate::broker::Broker::open(dir).unwrap())
        .listen(SocketAddr::from(([127, 0, 0, 1], 0)))
        .max_request_size(1024 * 1024)
        .start()
        .unwrap()
}

/// A request frame: size, api key, version, correlation id, client id, body.
pub(crate) fn request(api_key: i16, version: i16, correlation_id: i32, body: &[u8]) -> Vec<u8> {
    let mut msg = Vec::new();
    msg.extend_from_slice(&api_key.to_be_bytes());
    msg.extend_from_slice(&version.to_be_bytes());
    msg.extend_from_slice(&correlation_id.to_be_bytes());
    msg.extend_from_slice(&4i16.to_be_bytes());
    msg.extend_from_slice(b"test");
    if version >= 3 && api_key == 18 {
        msg.push(0); // header tagged fields (header v2)
    }
    msg.extend_from_slice(body);
    let mut out = (msg.len() as i32).to_be_bytes().to_vec();
    out.extend_from_slice(&msg);
    out
}

/// Read one response frame (without its size prefix).
pub(crate) fn response(s: &mut TcpStream) -> Vec<u8> {
    let mut size = [0u8; 4];
    s.read_exact(&mut size).unwrap();
    let mut body = vec![0u8; i32::from_be_bytes(size) as usize];
    s.read_exact(&mut body).unwrap();
    body
}

fn be16(b: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([b[at], b[at + 1]])
}

fn be32(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Parse a v0 ApiVersions response: (correlation id, error code, [(key, min, max)]).
fn api_versions_v0(b: &[u8]) -> (i32, i16, Vec<(i16, i16, i16)>) {
    let n = be32(b, 6) as usize;
    let keys = (0..n)
        .map(|i| {
            let at = 10 + 6 * i;
            (be16(b, at), be16(b, at + 2), be16(b, at + 4))
        })
        .collect();
    (be32(b, 0), be16(b, 4), keys)
}

/// True once the peer closed the connection (read returns 0 or an error).
fn closed(s: &mut TcpStream) -> bool {
    let mut buf = [0u8; 16];
    matches!(s.read(&mut buf), Ok(0) | Err(_))
}

#[test]
fn api_versions_v0_lists_the_supported_apis() {
    let server = start();
    let mut s = TcpStream::connect(server.local_addr()).unwrap();
    s.write_all(&request(18, 0, 7, &[])).unwrap();
    let (corr, err, keys) = api_versions_v0(&response(&mut s));
    assert_eq!((corr, err), (7, 0));
    assert!(keys.contains(&(18, 0, 3)), "{keys:?}");
}

#[test]
fn api_versions_v3_is_answered_in_the_flexible_layout() {
    let server = start();
    let mut s = TcpStream::connect(server.local_addr()).unwrap();
    // client_software_name "t", client_software_version "1" (compact strings), no tags.
    s.write_all(&request(18, 3, 9, &[2, b't', 2, b'1', 0]))
        .unwrap();
    let b = response(&mut s);
    assert_eq!(be32(&b, 0), 9);
    assert_eq!(be16(&b, 4), 0, "error code");
    // compact array: length + 1 as an unsigned varint.
    assert_eq!(b[6] as usize, api::APIS.len() + 1);
}

#[test]
fn an_api_versions_version_too_new_gets_the_v0_unsupported_reply() {
    let server = start();
    let mut s = TcpStream::connect(server.local_addr()).unwrap();
    s.write_all(&request(18, 99, 11, b"whatever the future holds"))
        .unwrap();
    let (corr, err, keys) = api_versions_v0(&response(&mut s));
    assert_eq!((corr, err), (11, 35));
    assert!(keys.contains(&(18, 0, 3)), "{keys:?}");
    // The connection stays usable: the client now retries with a version we know.
    s.write_all(&request(18, 2, 12, &[])).unwrap();
    let b = response(&mut s);
    assert_eq!((be32(&b, 0), be16(&b, 4)), (12, 0));
}

#[test]
fn requests_on_one_connection_are_answered_in_order() {
    let server = start();
    let mut s = TcpStream::connect(server.local_addr()).unwrap();
    let mut all = Vec::new();
    for corr in 0..50 {
        all.extend_from_slice(&request(18, (corr % 3) as i16, corr, &[]));
    }
    s.write_all(&all).unwrap();
    for corr in 0..50 {
        assert_eq!(be32(&response(&mut s), 0), corr);
    }
}

#[test]
fn bad_frames_close_only_their_own_connection() {
    let server = start();
    let addr = server.local_addr();
    let mut good = TcpStream::connect(addr).unwrap();

    let cases: Vec<Vec<u8>> = vec![
        (-5i32).to_be_bytes().to_vec(),                     // negative size
        (2_000_000i32).to_be_bytes().to_vec(),              // above max_request_size
        vec![0, 0, 0, 3, 1, 2, 3],                          // shorter than a header
        request(9999, 0, 1, &[]),                           // unknown api key
        request(3, 1, 1, &[0xff, 0xff]),                    // metadata, truncated body
        request(18, 3, 1, &[0xff, 0xff, 0xff, 0xff, 0x0f]), // body that does not decode
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),      // garbage
    ];
    for bytes in cases {
        let mut bad = TcpStream::connect(addr).unwrap();
        bad.write_all(&bytes).unwrap();
        assert!(closed(&mut bad), "case {bytes:?} left the connection open");
    }
    good.write_all(&request(18, 1, 5, &[])).unwrap();
    assert_eq!(be32(&response(&mut good), 0), 5);
}

#[test]
fn a_client_that_disconnects_mid_request_does_not_disturb_others() {
    let server = start();
    let addr = server.local_addr();
    for cut in [2usize, 6, 12] {
        let mut s = TcpStream::connect(addr).unwrap();
        let req = request(18, 1, 1, &[]);
        s.write_all(&req[..cut]).unwrap();
        drop(s);
    }
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(&request(18, 1, 2, &[])).unwrap();
    assert_eq!(be32(&response(&mut s), 0), 2);
}

#[test]
fn connections_above_the_limit_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::builder(crate::broker::Broker::open(dir.path()).unwrap())
        .listen(SocketAddr::from(([127, 0, 0, 1], 0)))
        .max_connections(2)
        .start()
        .unwrap();
    let addr = server.local_addr();
    let mut a = TcpStream::connect(addr).unwrap();
    let mut b = TcpStream::connect(addr).unwrap();
    // Make sure both are registered before the third arrives.
    for (s, c) in [(&mut a, 1), (&mut b, 2)] {
        s.write_all(&request(18, 0, c, &[])).unwrap();
        assert_eq!(be32(&response(s), 0), c);
    }
    let mut c = TcpStream::connect(addr).unwrap();
    let _ = c.write_all(&request(18, 0, 3, &[]));
    assert!(closed(&mut c));
    drop(a);
    // Once one leaves, a new connection is served again (the slot frees asynchronously).
    let served = (0..200).any(|i| {
        let mut d = TcpStream::connect(addr).unwrap();
        let _ = d.write_all(&request(18, 0, 100 + i, &[]));
        let mut size = [0u8; 4];
        if d.read_exact(&mut size).is_ok() {
            return true;
        }
        std::thread::yield_now();
        false
    });
    assert!(served);
}

#[test]
fn connections_above_the_per_address_limit_are_closed_at_accept() {
    let dir = tempfile::tempdir().unwrap();
    let start = |per_ip: usize, overrides: &str| {
        Server::builder(crate::broker::Broker::open(dir.path()).unwrap())
            .listen(SocketAddr::from(([127, 0, 0, 1], 0)))
            .max_connections_per_ip(per_ip)
            .max_connections_per_ip_overrides(overrides)
            .start()
    };
    let Err(bad) = start(2, "no host:1") else {
        panic!("a bad host is accepted");
    };
    assert!(
        bad.to_string().contains("max.connections.per.ip.overrides"),
        "{bad}"
    );
    // 127.0.0.1 may hold two; its override says one, by address or by host name (as
    // Kafka, which resolves the names it is given).
    for (per_ip, overrides, open) in [
        (2, "", 2),
        (5, "127.0.0.1:1, [::1]:7", 1),
        (5, "localhost:1", 1),
    ] {
        let server = start(per_ip, overrides).unwrap();
        let addr = server.local_addr();
        let mut served: Vec<TcpStream> = Vec::new();
        for c in 0..open {
            let mut s = TcpStream::connect(addr).unwrap();
            s.write_all(&request(18, 0, c, &[])).unwrap();
            assert_eq!(be32(&response(&mut s), 0), c);
            served.push(s);
        }
        let mut over = TcpStream::connect(addr).unwrap();
        let _ = over.write_all(&request(18, 0, 99, &[]));
        assert!(
            closed(&mut over),
            "connection {} of 127.0.0.1 ({overrides:?})",
            open + 1
        );
        // Once one leaves, the address is served again (the count drops asynchronously).
        drop(served.pop());
        let again = (0..200).any(|i| {
            let mut d = TcpStream::connect(addr).unwrap();
            let _ = d.write_all(&request(18, 0, 100 + i, &[]));
            let mut size = [0u8; 4];
            if d.read_exact(&mut size).is_ok() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(5));
            false
        });
        assert!(again, "{overrides:?}");
        server.shutdown().unwrap();
    }
}

#[test]
fn shutdown_finishes_in_flight_requests_and_closes_idle_connections() {
    let server = start();
    let addr = server.local_addr();
    let mut idle = TcpStream::connect(addr).unwrap();
    idle.write_all(&request(18, 0, 1, &[])).unwrap();
    response(&mut idle);
    server.shutdown().unwrap();
    assert!(closed(&mut idle));
    assert!(
        TcpStream::connect(addr).is_err() || {
            let mut s = TcpStream::connect(addr).unwrap();
            closed(&mut s)
        }
    );
}

/// A small deterministic fuzz run over the decoder (the cargo-fuzz target does the long
/// runs): random and mutated frames for every api key and version must not panic.
#[test]
fn the_request_decoder_survives_random_frames() {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for _ in 0..20_000 {
        let key = (next() % 40) as i16;
        let version = (next() % 14) as i16;
        let len = (next() % 64) as usize;
        let mut body: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        // Plant huge counts where arrays tend to be.
        if len >= 4 && next() % 2 == 0 {
            let at = (next() as usize) % (len - 3);
            body[at..at + 4].copy_from_slice(&0x7fff_fff0i32.to_be_bytes());
        }
        let frame = request(key, version, 1, &body);
        let _ = fuzz_decode_request(&frame[4..]);
    }
}

/// The committed seeds of the `request_decoder` fuzz target decode without panicking
/// (the fuzz target's property, checked in every `cargo test`).
#[test]
fn the_request_decoder_fuzz_seeds_replay() {
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus-seed/request_decoder");
    let mut replayed = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let bytes = std::fs::read(entry.unwrap().path()).unwrap();
        let _ = fuzz_decode_request(&bytes);
        replayed += 1;
    }
    assert!(replayed > 0, "no seeds in {}", dir.display());
}
