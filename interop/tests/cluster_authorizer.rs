//! Replication keeps working with the authorizer on: three nodes in this process, each
//! with `--authorizer`, and an ACL, added through one node into the cluster's metadata,
//! that lets `User:ANONYMOUS` from 127.0.0.1 (the nodes' replica fetchers, on the
//! PLAINTEXT listener they advertise) do ClusterAction on the cluster; an `acks=all`
//! producer on the leader returns once both followers have the records, and every
//! replica's log ends at the same offset. (A follower's Fetch without
//! ClusterAction is refused: `server::tests_security`.)

use std::time::Duration;

use tidelog::security::{
    AclBinding, AclOperation, AclPermission, CLUSTER_RESOURCE_NAME, PatternType, ResourceType,
};
use tidelog_interop::cluster::{Layout, replicate_twenty_records, shutdown_all, start_nodes};

#[test]
fn followers_replicate_through_the_authorizer_with_cluster_action() {
    let layout = Layout::new(3);
    let dirs: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let (brokers, servers) = start_nodes(&layout, &dirs, |_, b| b.authorizer(true));
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
    shutdown_all(servers);
}
