//! Client quotas are cluster metadata: set through one node (AlterClientQuotas, as any
//! admin client sends it), every node's image has them, and DescribeClientQuotas on
//! another node answers them.

use super::failover::addr;
use super::*;
use crate::admin::{AdminClient, QuotaMatch};
use crate::security::quota::{EntityName, PRODUCER_BYTE_RATE, QuotaChange, QuotaEntity};

#[test]
fn a_quota_set_through_one_node_applies_on_every_node() {
    let c = TestCluster::new(3, 1024);
    c.wait_settled();
    let ingest = QuotaEntity {
        user: Some(EntityName::Default),
        client_id: Some(EntityName::Name("ingest".into())),
    };
    let admin = AdminClient::builder(addr(&c, 0).to_string())
        .connect()
        .unwrap();
    let set = admin
        .alter_client_quotas(
            &[QuotaChange {
                entity: ingest.clone(),
                key: PRODUCER_BYTE_RATE.into(),
                value: Some(2048.0),
            }],
            false,
        )
        .unwrap();
    assert!(set.iter().all(|(_, r)| r.is_ok()), "{set:?}");
    for i in 0..3 {
        wait_until("the quota applied on every node", || {
            c.node(i)
                .image()
                .client_quotas
                .0
                .get(&ingest)
                .is_some_and(|q| q.get(PRODUCER_BYTE_RATE) == Some(&2048.0))
        });
    }
    let other = AdminClient::builder(addr(&c, 2).to_string())
        .connect()
        .unwrap();
    let described = other
        .describe_client_quotas(&[("user", QuotaMatch::Default)], false)
        .unwrap();
    assert_eq!(described.len(), 1);
    assert_eq!(described[&ingest][PRODUCER_BYTE_RATE], 2048.0);
}
