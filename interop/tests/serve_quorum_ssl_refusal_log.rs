//! `tidelog serve --node-id 1 --quorum ... --quorum-security-protocol SSL` (a one-node
//! cluster, started as a user would): the node elects itself over its TLS settings, and a
//! plaintext connection to its quorum port is closed and logged with the peer's address,
//! once per address per 10 s however often it comes back.

mod quorum_ssl_support;
mod serve_support;

use std::time::Duration;

use quorum_ssl_support::{Pki, forged_hello_and_heartbeat, plain, send_and_wait_for_close};
use serve_support::start;
use tidelog_interop::cluster::{describe, eventually, free_ports};

#[test]
fn a_plaintext_peer_is_refused_and_logged_with_its_address_rate_limited() {
    let pki = Pki::new(1);
    let tmp = tempfile::tempdir().unwrap();
    let quorum_addr = format!("127.0.0.1:{}", free_ports(1)[0]);
    let quorum = format!("1@{quorum_addr}");
    let s = |p: &std::path::Path| p.to_str().unwrap().to_string();
    let (ca, cert, key) = (s(&pki.ca), s(&pki.nodes[0].cert), s(&pki.nodes[0].key));
    let serve = start(
        &tmp.path().join("data"),
        &[
            "--node-id",
            "1",
            "--quorum",
            &quorum,
            "--quorum-security-protocol",
            "SSL",
            "--tls-cert",
            &cert,
            "--tls-key",
            &key,
            "--quorum-ssl-ca-location",
            &ca,
        ],
        None,
    );
    let addr = serve.addr.to_string();
    eventually("node 1 is the controller", Duration::from_secs(30), || {
        describe(&addr, "none", Duration::from_secs(2)).filter(|v| v.controller == 1)
    });

    let mut peers = Vec::new();
    for _ in 0..5 {
        let mut s = plain(&quorum_addr);
        peers.push(s.local_addr().unwrap().to_string());
        assert!(
            send_and_wait_for_close(
                &mut s,
                &forged_hello_and_heartbeat(2, 1, 1 << 40),
                Duration::from_secs(15)
            ),
            "a plaintext connection to the SSL quorum port stayed open"
        );
    }
    let lines = serve.lines_containing("closing a quorum connection");
    let refusals: Vec<&String> = lines
        .iter()
        .filter(|l| l.contains("closing a quorum connection"))
        .collect();
    assert_eq!(refusals.len(), 1, "{lines:#?}");
    assert!(refusals[0].contains(&peers[0]), "{refusals:?} {peers:?}");
    assert!(refusals[0].contains("TLS handshake"), "{refusals:?}");
    // Still node 1's cluster, controller 1.
    assert_eq!(
        describe(&addr, "none", Duration::from_secs(5)).map(|v| v.controller),
        Some(1)
    );
    let (status, lines) = serve.stop();
    assert!(status.success(), "{lines:#?}");
}
