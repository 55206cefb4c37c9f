//! A proposal the Raft loop proposes again (after `REPROPOSE_AFTER`, when a leader
//! change may have dropped it) can be committed twice. Its caller is told the outcome of
//! the first application: a DeleteAcls committed twice still reports what it removed,
//! not the empty result of its duplicate.

use super::*;
use crate::cluster::inbox::Inbound;
use crate::security::acl::{
    AclBinding, AclFilter, AclOperation, AclPermission, PatternType, ResourceType,
};

const CALL: Duration = Duration::from_secs(10);

#[test]
fn a_duplicate_commit_does_not_overwrite_the_first_outcome() {
    let c = TestCluster::new(3, 1024);
    c.wait_settled();
    let node = c.node(0);
    // Both copies are usually committed and published together, and only then does
    // the old code let the duplicate's empty result overwrite the first; some rounds
    // publish them apart. Ten rounds catch it nearly always.
    for round in 0..10 {
        let binding = AclBinding {
            resource_type: ResourceType::Topic,
            resource_name: format!("payments-{round}"),
            pattern_type: PatternType::Literal,
            principal: "User:alice".into(),
            host: "*".into(),
            operation: AclOperation::Read,
            permission: AclPermission::Allow,
        };
        node.propose(
            MetadataRecord::CreateAcls {
                bindings: vec![binding.clone()],
            },
            CALL,
        )
        .unwrap();
        let record = MetadataRecord::DeleteAcls {
            filters: vec![AclFilter::any()],
        };
        let proposal = node.submit(record.clone(), CALL).unwrap();
        // The same envelope again, right behind the first, as the loop's re-proposal
        // sends it: both are committed.
        let again = records::Envelope {
            proposer: 1,
            request_id: proposal.request_id,
            record,
        }
        .encode();
        node.inbox
            .send(Inbound::Propose {
                request_id: proposal.request_id,
                data: again,
                deadline: Instant::now() + CALL,
            })
            .unwrap();
        match proposal.wait().unwrap() {
            Applied::AclsRemoved(removed) => {
                assert_eq!(removed, vec![vec![binding]], "round {round}")
            }
            other => panic!("round {round}: DeleteAcls applied as {other:?}"),
        }
    }
    wait_until("the duplicate applied on every node", || {
        (0..3).all(|i| c.node(i).image().acls.is_empty())
    });
    let image = c.wait_same_image();
    assert!(image.acls.is_empty(), "{:?}", image.acls);
    c.shutdown();
}
