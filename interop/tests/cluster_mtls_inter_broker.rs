//! Replication over a mutual-TLS inter-broker listener chosen by name (Kafka's
//! `inter.broker.listener.name=INTERNAL` with `INTERNAL:SSL` in the listener security
//! protocol map): three nodes in this process, each with a PLAINTEXT listener for
//! clients (advertised) and an SSL listener named INTERNAL that requires client
//! certificates signed by the test CA, the authorizer on and no ACL at all. The only
//! principal that may fetch as a follower is the super user named by the nodes'
//! certificate subject, which the replica fetchers present (the node's own `--tls-cert`,
//! as a Kafka broker uses its keystore): an `acks=all` producer returns once both
//! followers have the records, which they can only have fetched on INTERNAL with that
//! certificate (`User:ANONYMOUS` on PLAINTEXT has no ClusterAction). An inter-broker
//! listener name no listener has does not start a node, naming the setting.

mod security_support;

use std::net::SocketAddr;
use std::time::Duration;

use security_support::{NODE_PRINCIPAL, Pki};
use tidelog::security::{SecurityProtocol, TlsSettings};
use tidelog::{Broker, Error, Server};
use tidelog_interop::cluster::{Layout, replicate_twenty_records, shutdown_all, start_nodes};

const WAIT: Duration = Duration::from_secs(30);

#[test]
fn followers_replicate_over_mutual_tls_as_the_certificate_subject() {
    let pki = Pki::new();
    let layout = Layout::new(3);
    let dirs: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let (brokers, servers) = start_nodes(&layout, &dirs, |_, b| {
        b.add_named_listener("INTERNAL", SecurityProtocol::Ssl, "127.0.0.1:0")
            .tls(TlsSettings::from_pem_files(&pki.node_cert, &pki.node_key).client_ca(&pki.ca))
            .authorizer(true)
            .super_users([NODE_PRINCIPAL])
            .inter_broker_listener_name("internal")
            .inter_broker_ca(&pki.ca)
    });
    for server in &servers {
        assert_eq!(server.named_listeners()[1].0, "INTERNAL");
    }
    replicate_twenty_records(&brokers, "events", WAIT);
    shutdown_all(servers);

    // An inter-broker listener name that no listener has.
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::open(dir.path()).unwrap();
    let solo = Layout::new(1);
    let err = Server::builder(broker)
        .listen(solo.addr(0).parse::<SocketAddr>().unwrap())
        .add_named_listener("INTERNAL", SecurityProtocol::Ssl, "127.0.0.1:0")
        .tls(TlsSettings::from_pem_files(&pki.node_cert, &pki.node_key))
        .node_id(1)
        .quorum(solo.quorum.clone())
        .inter_broker_listener_name("REPLICATION")
        .inter_broker_ca(&pki.ca)
        .start()
        .unwrap_err();
    match &err {
        Error::InvalidConfig { key, reason } => {
            assert_eq!(key, "inter.broker.listener.name");
            assert!(reason.contains("REPLICATION"), "{reason}");
        }
        other => panic!("expected InvalidConfig, got {other:?}"),
    }
}
