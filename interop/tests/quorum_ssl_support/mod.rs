//! Helpers of the quorum-over-SSL tests: a test PKI made here with rcgen (the cluster's
//! CA and a certificate per node for 127.0.0.1, a stranger CA with its own certificate,
//! and a certificate of the cluster's CA for another host), in-process nodes with
//! `quorum_security_protocol(Ssl)`, and a raw quorum client that speaks the quorum
//! protocol's frames itself (a hello, then raft-rs messages in their protobuf encoding),
//! as an attacker on the network would.
//!
//! rcgen's certificates are valid from 1975 to 4096: nothing depends on the date the
//! tests run.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tidelog::security::{SecurityProtocol, TlsSettings};
use tidelog::{Broker, Server, ServerHandle};
use tidelog_interop::cluster::{Layout, describe};

/// A certificate and its key, as PEM files.
pub struct Identity {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// The PEM files of the test PKI, in a directory of their own.
pub struct Pki {
    pub dir: tempfile::TempDir,
    /// The cluster's CA.
    pub ca: PathBuf,
    /// One per node, signed by the CA, for 127.0.0.1 and localhost.
    pub nodes: Vec<Identity>,
    /// Signed by the CA, for intruder.example only.
    pub other_host: Identity,
    /// Signed by another CA, for 127.0.0.1.
    pub stranger: Identity,
}

fn ca(name: &str) -> (rcgen::Certificate, KeyPair) {
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let cert = params.self_signed(&key).unwrap();
    (cert, key)
}

/// A node certificate: server and client authentication, as the quorum port uses it.
fn leaf(
    cn: &str,
    names: &[&str],
    ca: &rcgen::Certificate,
    ca_key: &KeyPair,
) -> (rcgen::Certificate, KeyPair) {
    let key = KeyPair::generate().unwrap();
    let mut params =
        CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>()).unwrap();
    params.distinguished_name.push(DnType::CommonName, cn);
    params.extended_key_usages = vec![
        ExtendedKeyUsagePurpose::ServerAuth,
        ExtendedKeyUsagePurpose::ClientAuth,
    ];
    let cert = params.signed_by(&key, ca, ca_key).unwrap();
    (cert, key)
}

impl Pki {
    /// A CA and certificates for `n` nodes, the other host and the stranger.
    pub fn new(n: usize) -> Pki {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: String, pem: String| {
            let p = dir.path().join(name);
            std::fs::write(&p, pem).unwrap();
            p
        };
        let identity = |name: &str, (cert, key): (rcgen::Certificate, KeyPair)| Identity {
            cert: write(format!("{name}.pem"), cert.pem()),
            key: write(format!("{name}.key"), key.serialize_pem()),
        };
        let (ca_cert, ca_key) = ca("tidelog quorum test CA");
        let (stranger_ca, stranger_key) = ca("a stranger's CA");
        Pki {
            ca: write("ca.pem".into(), ca_cert.pem()),
            nodes: (1..=n)
                .map(|i| {
                    let cn = format!("node-{i}");
                    identity(
                        &cn,
                        leaf(&cn, &["127.0.0.1", "localhost"], &ca_cert, &ca_key),
                    )
                })
                .collect(),
            other_host: identity(
                "other-host",
                leaf("intruder", &["intruder.example"], &ca_cert, &ca_key),
            ),
            stranger: identity(
                "stranger",
                leaf("stranger", &["127.0.0.1"], &stranger_ca, &stranger_key),
            ),
            dir,
        }
    }
}

/// Starts every node of `layout` in this process, node index `i` on `dirs[i]`, with its
/// quorum over SSL (see [`start_node`]).
pub fn start_nodes(
    layout: &Layout,
    dirs: &[tempfile::TempDir],
    pki: &Pki,
) -> (Vec<Broker>, Vec<ServerHandle>) {
    dirs.iter()
        .enumerate()
        .map(|(i, d)| start_node(layout, i, d.path(), pki))
        .unzip()
}

/// Every node's controller, if all answer Metadata about `topic` and agree on one of
/// the voters.
pub fn agreed_controller(layout: &Layout, topic: &str) -> Option<i32> {
    let n = layout.kafka.len();
    let seen: Vec<i32> = (0..n)
        .map(|i| describe(&layout.addr(i), topic, Duration::from_secs(2)).map(|v| v.controller))
        .collect::<Option<_>>()?;
    (seen.iter().all(|c| *c == seen[0]) && (1..=n as i32).contains(&seen[0])).then_some(seen[0])
}

/// Starts node index `i` of `layout` in this process on `dir` with its quorum over SSL
/// (the node's certificate of `pki`, the CA checked both ways); topics get 3 replicas.
fn start_node(
    layout: &Layout,
    i: usize,
    dir: &std::path::Path,
    pki: &Pki,
) -> (Broker, ServerHandle) {
    let broker = Broker::builder(dir)
        .group_initial_rebalance_delay(Duration::ZERO)
        .open()
        .expect("open the node's broker");
    let node = &pki.nodes[i];
    let server = Server::builder(broker.clone())
        .listen(layout.addr(i).parse::<SocketAddr>().unwrap())
        .node_id(i as i32 + 1)
        .quorum(layout.quorum.clone())
        .broker_session_timeout(Duration::from_secs(2))
        .default_replication_factor(3)
        .tls(TlsSettings::from_pem_files(&node.cert, &node.key))
        .quorum_security_protocol(SecurityProtocol::Ssl)
        .quorum_ca(&pki.ca)
        .start()
        .expect("start the node");
    (broker, server)
}

/// The quorum address of node id `id` in `layout`.
pub fn quorum_addr(layout: &Layout, id: i32) -> String {
    layout
        .quorum
        .split(',')
        .find_map(|v| {
            let (n, addr) = v.split_once('@')?;
            (n.parse::<i32>().ok()? == id).then(|| addr.to_string())
        })
        .expect("the node is a voter")
}

/// CRC-32 (IEEE), as the quorum frames carry it.
fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// A quorum frame: length, CRC-32, body.
fn frame(body: &[u8]) -> Vec<u8> {
    let mut out = (body.len() as u32).to_be_bytes().to_vec();
    out.extend_from_slice(&crc32(body).to_be_bytes());
    out.extend_from_slice(body);
    out
}

fn varint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// What a voter's connection starts with, claiming to be node `from` talking to node
/// `to` (no cluster id, which every node accepts), followed by a raft-rs MsgHeartbeat
/// from the one to the other at `term`: were it processed, the node would step down to
/// a follower of `from` at that term.
pub fn forged_hello_and_heartbeat(from: i32, to: i32, term: u64) -> Vec<u8> {
    let mut hello = b"TLRQ".to_vec();
    hello.extend_from_slice(&1u16.to_be_bytes());
    hello.extend_from_slice(&from.to_be_bytes());
    hello.extend_from_slice(&to.to_be_bytes());
    hello.extend_from_slice(&0u32.to_be_bytes());
    // eraftpb.Message: msg_type = 1 (MsgHeartbeat = 8), to = 2, from = 3, term = 4, in
    // raft ids (node id + 1).
    let mut msg = Vec::new();
    for (field, value) in [
        (1u64, 8u64),
        (2, to as u64 + 1),
        (3, from as u64 + 1),
        (4, term),
    ] {
        varint(field << 3, &mut msg);
        varint(value, &mut msg);
    }
    let mut bytes = frame(&hello);
    bytes.extend_from_slice(&frame(&msg));
    bytes
}

/// Reads from `stream` until the other end closes it (end of stream, a reset or a TLS
/// alert), for at most `limit`; true if it did.
pub fn closed_within(stream: &mut dyn Read, limit: Duration) -> bool {
    let end = Instant::now() + limit;
    let mut buf = [0u8; 4096];
    while Instant::now() < end {
        match stream.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return true,
        }
    }
    false
}

/// A plaintext connection to `addr` with a short read timeout.
pub fn plain(addr: &str) -> TcpStream {
    let s = TcpStream::connect(addr).expect("connect to the quorum port");
    s.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    s
}

/// A TLS client to `addr` that trusts the cluster's CA and presents `identity`, once
/// its side of the handshake is done (at most 5 s); the handshake's error otherwise.
pub fn tls_client(
    addr: &str,
    ca: &std::path::Path,
    identity: &Identity,
) -> std::io::Result<rustls::StreamOwned<rustls::ClientConnection, TcpStream>> {
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(ca).unwrap() {
        roots.add(c.unwrap()).unwrap();
    }
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&identity.cert)
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let key = PrivateKeyDer::from_pem_file(&identity.key).unwrap();
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_client_auth_cert(chain, key)
    .unwrap();
    let mut conn = rustls::ClientConnection::new(
        Arc::new(config),
        ServerName::try_from("127.0.0.1".to_string()).unwrap(),
    )
    .unwrap();
    let mut sock = plain(addr);
    sock.set_read_timeout(Some(Duration::from_secs(5)))?;
    while conn.is_handshaking() {
        conn.complete_io(&mut sock)?;
    }
    sock.set_read_timeout(Some(Duration::from_millis(200)))?;
    Ok(rustls::StreamOwned::new(conn, sock))
}

/// Sends `bytes` (errors ignored: the node may have closed the connection already) and
/// tells whether the node closed the connection within `limit`.
pub fn send_and_wait_for_close(
    stream: &mut (impl Read + Write),
    bytes: &[u8],
    limit: Duration,
) -> bool {
    let _ = stream.write_all(bytes).and_then(|()| stream.flush());
    closed_within(stream, limit)
}
