//! Three nodes in this process whose quorum port is mutual TLS
//! (`quorum_security_protocol(Ssl)`, each node's own certificate of the test CA, the CA
//! checked both ways): they elect a controller and replicate a topic, which they can
//! only do if every Raft message between them went through the TLS connections. A node
//! told to use SSL without the CA to check its peers against does not start.

mod quorum_ssl_support;

use std::net::SocketAddr;
use std::time::Duration;

use quorum_ssl_support::{Pki, agreed_controller, start_nodes};
use tidelog::security::{SecurityProtocol, TlsSettings};
use tidelog::{Broker, Error, Server};
use tidelog_interop::cluster::{Layout, eventually, replicate_twenty_records, shutdown_all};

const WAIT: Duration = Duration::from_secs(30);

#[test]
fn a_cluster_with_its_quorum_over_ssl_elects_a_controller_and_replicates() {
    let pki = Pki::new(3);
    let layout = Layout::new(3);
    let dirs: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let (brokers, servers) = start_nodes(&layout, &dirs, &pki);
    replicate_twenty_records(&brokers, "events", WAIT);
    // Every node knows the same controller, one of the voters.
    let controller = eventually("one controller known to every node", WAIT, || {
        agreed_controller(&layout, "events")
    });
    assert!((1..=3).contains(&controller));
    shutdown_all(servers);

    // SSL without the CA to check peers against: refused, naming the setting.
    let dir = tempfile::tempdir().unwrap();
    let solo = Layout::new(1);
    let err = Server::builder(Broker::open(dir.path()).unwrap())
        .listen(solo.addr(0).parse::<SocketAddr>().unwrap())
        .node_id(1)
        .quorum(solo.quorum.clone())
        .tls(TlsSettings::from_pem_files(
            &pki.nodes[0].cert,
            &pki.nodes[0].key,
        ))
        .quorum_security_protocol(SecurityProtocol::Ssl)
        .start()
        .unwrap_err();
    assert!(
        matches!(&err, Error::InvalidConfig { key, .. } if key == "quorum-ssl-ca-location"),
        "{err:?}"
    );
}
