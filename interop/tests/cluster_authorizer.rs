//! Replication keeps working with the authorizer on: three nodes in this process, each
//! with `--authorizer`, and an ACL, added through one node into the cluster's metadata,
//! that lets `User:ANONYMOUS` from 127.0.0.1 (the nodes' replica fetchers, on the
//! PLAINTEXT listener they advertise) do ClusterAction on the cluster; an `acks=all`
//! producer on the leader returns once both followers have the records, and every
//! replica's log ends at the same offset. (A follower's Fetch without
//! ClusterAction is refused: `server::tests_security`.)

use std::net::SocketAddr;
use std::time::Duration;

use tidelog::security::{
    AclBinding, AclOperation, AclPermission, CLUSTER_RESOURCE_NAME, PatternType, ResourceType,
};
use tidelog::{Broker, Server};
use tidelog_interop::cluster::{Layout, replicate_twenty_records};

#[test]
fn followers_replicate_through_the_authorizer_with_cluster_action() {
    let layout = Layout::new(3);
    let dirs: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let mut brokers = Vec::new();
    let mut servers = Vec::new();
    for (i, dir) in dirs.iter().enumerate() {
        let broker = Broker::builder(dir.path())
            .group_initial_rebalance_delay(Duration::ZERO)
            .open()
            .unwrap();
        let server = Server::builder(broker.clone())
            .listen(layout.addr(i).parse::<SocketAddr>().unwrap())
            .node_id(i as i32 + 1)
            .quorum(layout.quorum.clone())
            .broker_session_timeout(Duration::from_secs(2))
            .default_replication_factor(3)
            .authorizer(true)
            .start()
            .unwrap();
        brokers.push(broker);
        servers.push(server);
    }
    // The ACL goes through the controller into the metadata log: every node has it.
    servers[0]
        .acl_store()
        .expect("the authorizer is on")
        .add(&[AclBinding {
            resource_type: ResourceType::Cluster,
            resource_name: CLUSTER_RESOURCE_NAME.into(),
            pattern_type: PatternType::Literal,
            principal: "User:ANONYMOUS".into(),
            host: "127.0.0.1".into(),
            operation: AclOperation::ClusterAction,
            permission: AclPermission::Allow,
        }])
        .unwrap();
    // The program's own API is trusted: it creates the topic and produces.
    replicate_twenty_records(&brokers, "events", Duration::from_secs(30));
    for s in servers {
        s.shutdown().unwrap();
    }
}
