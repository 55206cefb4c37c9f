//! Users and ACLs of a cluster node: kept in the metadata image, so every node
//! authenticates and authorizes alike, and changed through the controller as metadata
//! records (`AlterScramCredentials`, `CreateAcls`, `DeleteAcls`). A change returns once
//! this node applied it; the other nodes apply it as they catch up with the log.

use std::sync::Arc;

use super::{ADMIN_TIMEOUT, Applied, ClusterNode, MetadataRecord};
use crate::error::{Error, Result};
use crate::security::acl::{AclBinding, AclFilter, AclStore};
use crate::security::credentials::{self, CredentialChange, CredentialStore};
use crate::security::quota::{self, QuotaChange, QuotaStore, Quotas};
use crate::security::scram::{ScramCredential, ScramMechanism};

/// The users of a cluster, in its metadata image.
#[derive(Debug)]
pub(crate) struct ClusterCredentials(pub(crate) Arc<ClusterNode>);

impl CredentialStore for ClusterCredentials {
    fn credential(&self, user: &str, mechanism: ScramMechanism) -> Option<ScramCredential> {
        self.0.image().users.get(user)?.get(&mechanism).cloned()
    }

    fn users(&self) -> Vec<(String, Vec<(ScramMechanism, u32)>)> {
        credentials::list_users(&self.0.image().users)
    }

    fn apply(&self, changes: &[CredentialChange]) -> Result<()> {
        // Refuse an invalid change here with its typed error; the apply checks again.
        credentials::apply_changes(&mut (*self.0.image().users).clone(), changes)?;
        self.0
            .propose(
                MetadataRecord::AlterScramCredentials {
                    changes: changes.to_vec(),
                },
                ADMIN_TIMEOUT,
            )
            .map(drop)
    }
}

/// The client quotas of a cluster, in its metadata image: every node throttles by the
/// same quotas (each measures the clients it serves, as Kafka's brokers do).
#[derive(Debug)]
pub(crate) struct ClusterQuotas(pub(crate) Arc<ClusterNode>);

impl QuotaStore for ClusterQuotas {
    fn quotas(&self) -> Arc<Quotas> {
        self.0.image().client_quotas.0.clone()
    }

    fn apply(&self, changes: &[QuotaChange]) -> Result<()> {
        // Refuse an invalid change here with its typed error; the apply checks again.
        quota::apply_changes(&mut (*self.0.image().client_quotas.0).clone(), changes)?;
        if changes.is_empty() {
            return Ok(());
        }
        self.0
            .propose(
                MetadataRecord::AlterClientQuotas {
                    changes: changes.to_vec(),
                },
                ADMIN_TIMEOUT,
            )
            .map(drop)
    }
}

/// The ACL bindings of a cluster, in its metadata image.
#[derive(Debug)]
pub(crate) struct ClusterAcls(pub(crate) Arc<ClusterNode>);

impl AclStore for ClusterAcls {
    fn bindings(&self) -> Vec<AclBinding> {
        self.0.image().acls.iter().cloned().collect()
    }

    fn add(&self, bindings: &[AclBinding]) -> Result<()> {
        for b in bindings {
            b.validate()?;
        }
        if bindings.is_empty() {
            return Ok(());
        }
        self.0
            .propose(
                MetadataRecord::CreateAcls {
                    bindings: bindings.to_vec(),
                },
                ADMIN_TIMEOUT,
            )
            .map(drop)
    }

    fn remove(&self, filters: &[AclFilter]) -> Result<Vec<Vec<AclBinding>>> {
        if filters.is_empty() {
            return Ok(Vec::new());
        }
        match self.0.propose(
            MetadataRecord::DeleteAcls {
                filters: filters.to_vec(),
            },
            ADMIN_TIMEOUT,
        )? {
            Applied::AclsRemoved(removed) if removed.len() == filters.len() => Ok(removed),
            other => Err(Error::corrupt(
                "metadata log",
                0,
                format!("DeleteAcls applied as {other:?}"),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::image::MetadataImage;
    use crate::security::acl::{AclOperation, AclPermission, PatternType, ResourceType};

    fn binding(principal: &str, topic: &str) -> AclBinding {
        AclBinding {
            resource_type: ResourceType::Topic,
            resource_name: topic.into(),
            pattern_type: PatternType::Literal,
            principal: principal.into(),
            host: "*".into(),
            operation: AclOperation::Read,
            permission: AclPermission::Allow,
        }
    }

    #[test]
    fn users_and_acls_apply_and_survive_a_snapshot() {
        let mut image = MetadataImage::default();
        let alice = ScramCredential::new(ScramMechanism::Sha256, "pw", 4096);
        assert_eq!(
            image.apply(
                1,
                &MetadataRecord::AlterScramCredentials {
                    changes: vec![CredentialChange::Upsert {
                        user: "alice".into(),
                        credential: alice.clone(),
                    }],
                },
            ),
            Ok(Applied::Done)
        );
        // All or none: a weak credential refuses the whole record.
        let mut weak = ScramCredential::new(ScramMechanism::Sha512, "pw", 4096);
        weak.iterations = 10;
        let before = image.users.clone();
        let refused = image.apply(
            2,
            &MetadataRecord::AlterScramCredentials {
                changes: vec![
                    CredentialChange::Delete {
                        user: "alice".into(),
                        mechanism: ScramMechanism::Sha256,
                    },
                    CredentialChange::Upsert {
                        user: "bob".into(),
                        credential: weak,
                    },
                ],
            },
        );
        assert!(
            matches!(&refused, Err(super::super::image::Rejected::InvalidConfig { key, .. }) if key == "iterations"),
            "{refused:?}"
        );
        assert_eq!(image.users, before);
        let a = binding("User:alice", "events");
        let b = binding("User:bob", "events");
        assert_eq!(
            image.apply(
                3,
                &MetadataRecord::CreateAcls {
                    bindings: vec![a.clone(), b.clone(), a.clone()],
                },
            ),
            Ok(Applied::Done)
        );
        assert_eq!(image.acls.len(), 2);
        let mut invalid = a.clone();
        invalid.principal = "alice".into();
        assert!(
            image
                .apply(
                    4,
                    &MetadataRecord::CreateAcls {
                        bindings: vec![invalid],
                    },
                )
                .is_err()
        );
        let bytes = image.encode();
        let restored = MetadataImage::decode(&bytes, "snapshot").unwrap();
        assert_eq!(restored, image);
        assert_eq!(
            restored
                .users
                .get("alice")
                .unwrap()
                .get(&ScramMechanism::Sha256),
            Some(&alice)
        );
        let by_bob = AclFilter {
            principal: Some("User:bob".into()),
            ..AclFilter::any()
        };
        assert_eq!(
            image.apply(
                5,
                &MetadataRecord::DeleteAcls {
                    filters: vec![by_bob.clone(), by_bob],
                },
            ),
            Ok(Applied::AclsRemoved(vec![vec![b.clone()], vec![b]]))
        );
        assert_eq!(image.acls.iter().collect::<Vec<_>>(), vec![&a]);
    }

    #[test]
    fn a_version_1_image_has_no_users_or_acls() {
        let image = MetadataImage {
            index: 7,
            cluster_id: Some("c".into()),
            ..MetadataImage::default()
        };
        let mut bytes = image.encode();
        // Versions 2 to 11 append eight empty counts to what version 1 wrote.
        bytes.truncate(bytes.len() - 32);
        bytes[..2].copy_from_slice(&1u16.to_be_bytes());
        assert_eq!(MetadataImage::decode(&bytes, "v1").unwrap(), image);
    }

    #[test]
    fn client_quotas_apply_all_or_none_and_survive_a_snapshot() {
        use crate::security::quota::{EntityName, PRODUCER_BYTE_RATE, QuotaEntity};
        let mut image = MetadataImage::default();
        let app = QuotaEntity {
            user: None,
            client_id: Some(EntityName::Name("app".into())),
        };
        let set = |entity: &QuotaEntity, key: &str, value: Option<f64>| QuotaChange {
            entity: entity.clone(),
            key: key.into(),
            value,
        };
        assert_eq!(
            image.apply(
                1,
                &MetadataRecord::AlterClientQuotas {
                    changes: vec![set(&app, PRODUCER_BYTE_RATE, Some(1024.0))],
                },
            ),
            Ok(Applied::Done)
        );
        // All or none: an unknown key refuses the whole record.
        let before = image.client_quotas.clone();
        let refused = image.apply(
            2,
            &MetadataRecord::AlterClientQuotas {
                changes: vec![
                    set(&app, PRODUCER_BYTE_RATE, None),
                    set(&app, "bogus_rate", Some(1.0)),
                ],
            },
        );
        assert!(refused.is_err(), "{refused:?}");
        assert_eq!(image.client_quotas, before);
        let restored = MetadataImage::decode(&image.encode(), "snapshot").unwrap();
        assert_eq!(restored, image);
        assert_eq!(restored.client_quotas.0[&app][PRODUCER_BYTE_RATE], 1024.0);
    }
}
