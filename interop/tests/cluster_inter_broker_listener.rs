//! Replication over its own listener (Kafka's `inter.broker.listener.name`): three nodes
//! in this process, each with a PLAINTEXT listener for clients (advertised) and a
//! SASL_PLAINTEXT listener named the inter-broker listener, the authorizer on, and no ACL
//! at all: only `User:replicator`, a super user whose SCRAM credential is added through
//! one node into the cluster's metadata, may fetch as a follower. An `acks=all`
//! producer returns once both followers have the records, which they can only have
//! fetched on the SASL listener as `replicator` (`User:ANONYMOUS` on the PLAINTEXT one
//! has no ClusterAction). A node whose inter-broker listener is not among its listeners
//! does not start, naming the setting.

use std::net::SocketAddr;
use std::time::Duration;

use tidelog::security::{
    CredentialChange, SaslMechanism, ScramCredential, ScramMechanism, SecurityProtocol,
};
use tidelog::{Broker, Error, Server};
use tidelog_interop::cluster::{Layout, replicate_twenty_records, shutdown_all, start_nodes};

const WAIT: Duration = Duration::from_secs(30);

#[test]
fn followers_replicate_on_the_inter_broker_listener_as_its_principal() {
    let layout = Layout::new(3);
    let dirs: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let (brokers, servers) = start_nodes(&layout, &dirs, |_, b| {
        b.add_listener(SecurityProtocol::SaslPlaintext, "127.0.0.1:0")
            .authorizer(true)
            .super_users(["User:replicator"])
            .inter_broker_listener(SecurityProtocol::SaslPlaintext)
            .inter_broker_sasl(
                SaslMechanism::Scram(ScramMechanism::Sha512),
                "replicator",
                "replicator-secret",
            )
    });
    // The replicator's credential is cluster metadata, added through node 1.
    servers[0]
        .credential_store()
        .apply(&[CredentialChange::Upsert {
            user: "replicator".into(),
            credential: ScramCredential::new(ScramMechanism::Sha512, "replicator-secret", 4096),
        }])
        .unwrap();
    replicate_twenty_records(&brokers, "events", WAIT);
    shutdown_all(servers);

    // An inter-broker listener that is not there.
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::open(dir.path()).unwrap();
    let solo = Layout::new(1);
    let err = Server::builder(broker)
        .listen(solo.addr(0).parse::<SocketAddr>().unwrap())
        .node_id(1)
        .quorum(solo.quorum.clone())
        .inter_broker_listener(SecurityProtocol::SaslSsl)
        .start()
        .unwrap_err();
    assert!(
        matches!(&err, Error::InvalidConfig { key, .. } if key == "inter.broker.listener.name"),
        "{err:?}"
    );
}
