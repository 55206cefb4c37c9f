//! Transactions with the authorizer on: three nodes in this process, each with the
//! authorizer, and an in-process transactional producer on a node whose transactional
//! id is coordinated by another node, so its calls go to that coordinator over the
//! network as the nodes' principal (`User:ANONYMOUS` from 127.0.0.1 on the PLAINTEXT
//! listener). With ClusterAction only (replication, markers, the partition leader's
//! verification), `init_transactions` is refused with a clear error naming
//! TRANSACTIONAL_ID_AUTHORIZATION_FAILED; once the principal may Write (and Describe)
//! the transactional id and Write the topic (AddPartitionsToTxn's ACL), the producer
//! commits.

use std::time::Duration;

use tidelog::security::{
    AclBinding, AclOperation, AclPermission, CLUSTER_RESOURCE_NAME, PatternType, ResourceType,
};
use tidelog::transaction::TxnError;
use tidelog::{Error, Producer, ProducerRecord, TopicConfig};
use tidelog_interop::cluster::{Layout, eventually, shutdown_all, start_nodes};

const WAIT: Duration = Duration::from_secs(60);

fn allow(resource_type: ResourceType, name: &str, operation: AclOperation) -> AclBinding {
    AclBinding {
        resource_type,
        resource_name: name.into(),
        pattern_type: PatternType::Literal,
        principal: "User:ANONYMOUS".into(),
        host: "127.0.0.1".into(),
        operation,
        permission: AclPermission::Allow,
    }
}

#[test]
fn a_transaction_through_a_remote_coordinator_needs_write_on_the_transactional_id() {
    let layout = Layout::new(3);
    let dirs: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let (brokers, servers) = start_nodes(&layout, &dirs, |_, b| b.authorizer(true));
    let acls = servers[0].acl_store().expect("the authorizer is on");
    acls.add(&[allow(
        ResourceType::Cluster,
        CLUSTER_RESOURCE_NAME,
        AclOperation::ClusterAction,
    )])
    .unwrap();
    eventually("the topic is created", WAIT, || {
        brokers[0]
            .create_topic_if_missing("t", 1, TopicConfig::new())
            .ok()
    });
    let leader = eventually("a leader", WAIT, || {
        brokers.iter().position(|b| {
            b.topic("t")
                .and_then(|t| t.partition(0))
                .is_ok_and(|p| p.is_leader())
        })
    });
    let here = &brokers[leader];
    // The first init makes `__transaction_state`; whatever it answers, the partition
    // count is then known.
    let probe = Producer::builder(here)
        .transactional_id("probe")
        .build()
        .unwrap();
    let _ = probe.init_transactions();
    let id = eventually("a transactional id coordinated elsewhere", WAIT, || {
        let txns = here.transaction_coordinator();
        (0..1000).map(|i| format!("acl-{i}")).find(|id| {
            txns.partition_of(id)
                .is_some_and(|p| !txns.leads(p) && txns.partition_count() > 0)
        })
    });

    let producer = Producer::builder(here)
        .transactional_id(id.clone())
        .build()
        .unwrap();
    let err = eventually("the coordinator's refusal", WAIT, || {
        match producer.init_transactions() {
            Err(e @ Error::Transaction { .. }) if e.to_string().contains("AUTHORIZATION") => {
                Some(e)
            }
            Ok(()) => panic!("initialized without Write on the transactional id"),
            Err(_) => None, // the coordinator still loading or moving
        }
    });
    match &err {
        Error::Transaction {
            transactional_id,
            source: TxnError::AuthorizationFailed { code, .. },
        } => {
            assert_eq!(transactional_id, &id);
            assert_eq!(code.code(), 53, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED");
        }
        other => panic!("{other:?}"),
    }
    assert!(
        err.to_string()
            .contains("TRANSACTIONAL_ID_AUTHORIZATION_FAILED"),
        "{err}"
    );

    acls.add(&[
        allow(ResourceType::TransactionalId, &id, AclOperation::Write),
        allow(ResourceType::TransactionalId, &id, AclOperation::Describe),
        // AddPartitionsToTxn: Write on the topic, as Kafka asks.
        allow(ResourceType::Topic, "t", AclOperation::Write),
    ])
    .unwrap();
    eventually("the ACLs on the coordinator", WAIT, || {
        producer.init_transactions().ok()
    });
    producer.begin_transaction().unwrap();
    for v in ["a", "b"] {
        producer
            .send("t", ProducerRecord::new(v.as_bytes()).partition(0))
            .unwrap();
    }
    producer.commit_transaction().unwrap();
    let part = here.topic("t").unwrap().partition(0).unwrap();
    eventually("the commit's marker, stable", WAIT, || {
        (part.log_end_offset() == 3 && part.log().last_stable_offset().ok()? == 3).then_some(())
    });
    drop((probe, producer));
    shutdown_all(servers);
}
