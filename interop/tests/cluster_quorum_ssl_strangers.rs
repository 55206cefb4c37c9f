//! A quorum port over mutual TLS refuses whoever is not a voter of the cluster: three
//! nodes in this process elect a controller over SSL, then a stranger sends node A what
//! a voter's connection carries, a hello claiming to be node B and a Raft heartbeat from
//! B at a far higher term (processed, it would make A a follower of B at that term and
//! start a new election), three ways:
//!
//! - in plaintext: the TLS handshake fails on the first bytes;
//! - over TLS with a certificate of another CA: refused in the handshake;
//! - over TLS with a certificate of the cluster's CA issued for another host: the
//!   handshake passes, and the hello is refused, since the certificate does not name the
//!   host of B's quorum address.
//!
//! Each time the node closes the connection, and afterwards every node still names the
//! same controller (watched for 2 s) and the cluster still replicates.

mod quorum_ssl_support;

use std::time::{Duration, Instant};

use quorum_ssl_support::{
    Pki, agreed_controller, forged_hello_and_heartbeat, plain, quorum_addr,
    send_and_wait_for_close, start_nodes, tls_client,
};
use tidelog_interop::cluster::{Layout, eventually, replicate_twenty_records, shutdown_all};

const WAIT: Duration = Duration::from_secs(30);
const CLOSE: Duration = Duration::from_secs(15);

#[test]
fn strangers_cannot_get_a_raft_message_into_an_ssl_quorum() {
    let pki = Pki::new(3);
    let layout = Layout::new(3);
    let dirs: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let (brokers, servers) = start_nodes(&layout, &dirs, &pki);
    replicate_twenty_records(&brokers, "before", WAIT);
    let controller = eventually("one controller known to every node", WAIT, || {
        agreed_controller(&layout, "before")
    });
    // Target a follower, in the name of the other follower.
    let mut followers = (1..=3).filter(|n| *n != controller);
    let (target, claimed) = (followers.next().unwrap(), followers.next().unwrap());
    let addr = quorum_addr(&layout, target);
    let forged = forged_hello_and_heartbeat(claimed, target, 1 << 40);

    let mut s = plain(&addr);
    assert!(
        send_and_wait_for_close(&mut s, &forged, CLOSE),
        "a plaintext connection to the SSL quorum port stayed open"
    );

    // Another CA's certificate: refused in the handshake (TLS 1.3 clients learn it from
    // the alert that follows their last handshake message).
    if let Ok(mut s) = tls_client(&addr, &pki.ca, &pki.stranger) {
        assert!(
            send_and_wait_for_close(&mut s, &forged, CLOSE),
            "a client certificate of another CA was not refused"
        );
    }

    // The cluster's CA, another host: the handshake passes, the hello does not.
    let mut s = tls_client(&addr, &pki.ca, &pki.other_host)
        .expect("a certificate of the cluster's CA passes the handshake");
    assert!(
        send_and_wait_for_close(&mut s, &forged, CLOSE),
        "a certificate for another host was accepted as node {claimed}'s"
    );

    // Nothing moved: the same controller everywhere, for 2 s.
    let end = Instant::now() + Duration::from_secs(2);
    while Instant::now() < end {
        assert_eq!(
            agreed_controller(&layout, "before"),
            Some(controller),
            "the controller changed after the strangers' messages"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    replicate_twenty_records(&brokers, "after", WAIT);
    shutdown_all(servers);
}
