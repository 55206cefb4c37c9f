//! A proposal the Raft loop proposes again (after `REPROPOSE_AFTER`, when a leader
//! change may have dropped it) can be committed twice. Its caller is told the outcome of
//! the first application: a DeleteAcls committed twice still reports what it removed,
//! not the empty result of its duplicate; and the copy is not applied again, so it
//! cannot undo a change committed between the two.

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
        let proposal = node.submit(record, CALL).unwrap();
        // The same envelope again, right behind the first, as the loop's re-proposal
        // sends it: both are committed.
        let again = proposal.data.clone();
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

/// A copy of a proposal committed after a later change (the loop's re-proposal, late)
/// is not applied again: an ACL created, then deleted, does not come back.
#[test]
fn a_late_copy_of_a_proposal_does_not_undo_a_later_change() {
    let c = TestCluster::new(3, 1024);
    c.wait_settled();
    let node = c.node(0);
    let binding = AclBinding {
        resource_type: ResourceType::Topic,
        resource_name: "payments".into(),
        pattern_type: PatternType::Literal,
        principal: "User:mallory".into(),
        host: "*".into(),
        operation: AclOperation::Write,
        permission: AclPermission::Allow,
    };
    let create = node
        .submit(
            MetadataRecord::CreateAcls {
                bindings: vec![binding.clone()],
            },
            CALL,
        )
        .unwrap();
    let request_id = create.request_id;
    let copy = create.data.clone();
    create.wait().unwrap();
    node.propose(
        MetadataRecord::DeleteAcls {
            filters: vec![AclFilter::any()],
        },
        CALL,
    )
    .unwrap();
    // The CreateAcls proposed again, committed after the delete.
    node.inbox
        .send(Inbound::Propose {
            request_id,
            data: copy,
            deadline: Instant::now() + CALL,
        })
        .unwrap();
    // Something after it, from the same node, to know the copy was committed.
    node.propose(
        MetadataRecord::CreateAcls {
            bindings: vec![AclBinding {
                resource_name: "marker".into(),
                ..binding.clone()
            }],
        },
        CALL,
    )
    .unwrap();
    let image = c.wait_same_image();
    assert!(
        image.acls.iter().all(|b| b.resource_name != "payments"),
        "the revoked ACL came back: {:?}",
        image.acls
    );
    c.shutdown();
}
