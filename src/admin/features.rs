//! Feature levels through the admin client (KIP-584), as `kafka-features.sh` has them:
//! describe asks any broker (ApiVersions: what it supports and what the cluster
//! finalized), upgrade and downgrade send UpdateFeatures to the controller, all of a
//! request's changes or none.

use std::collections::BTreeMap;

use kafka_protocol::messages::update_features_request::FeatureUpdateKey;
use kafka_protocol::messages::{ApiVersionsRequest, UpdateFeaturesRequest};

use super::router::{check, kstr};
use super::{AdminClient, Resource};
use crate::error::Result;

/// ApiVersions version read (the first with features).
const API_VERSIONS_VERSION: i16 = 3;
/// UpdateFeatures version sent (per-feature upgrade types and validate-only).
const UPDATE_FEATURES_VERSION: i16 = 1;

/// A cluster's features as a broker describes them (`kafka-features.sh describe`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeatureMetadata {
    /// The finalized level of each feature the cluster has finalized above level 0.
    pub finalized: BTreeMap<String, i16>,
    /// The epoch of the finalized levels (the metadata offset they are at; -1 if the
    /// broker did not say).
    pub finalized_epoch: i64,
    /// The lowest and highest level of each feature the answering broker supports.
    pub supported: BTreeMap<String, (i16, i16)>,
}

/// How UpdateFeatures may move a level (KIP-778's upgrade types).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FeatureUpgradeType {
    /// To a higher level (or the same).
    Upgrade,
    /// To a lower level, refused if it would lose metadata.
    SafeDowngrade,
    /// To a lower level, even if it loses metadata.
    UnsafeDowngrade,
}

impl FeatureUpgradeType {
    /// Kafka's value on the wire.
    fn code(self) -> i8 {
        match self {
            FeatureUpgradeType::Upgrade => 1,
            FeatureUpgradeType::SafeDowngrade => 2,
            FeatureUpgradeType::UnsafeDowngrade => 3,
        }
    }
}

impl AdminClient {
    /// The features the cluster finalized and the ones a broker supports (ApiVersions,
    /// asked of any broker).
    pub fn describe_features(&self) -> Result<FeatureMetadata> {
        let r = self
            .router
            .lock()
            .call_any(&ApiVersionsRequest::default(), API_VERSIONS_VERSION)?;
        check(|| Resource::Cluster, r.error_code, None)?;
        Ok(FeatureMetadata {
            finalized: r
                .finalized_features
                .iter()
                .map(|f| (f.name.to_string(), f.max_version_level))
                .collect(),
            finalized_epoch: r.finalized_features_epoch,
            supported: r
                .supported_features
                .iter()
                .map(|f| (f.name.to_string(), (f.min_version, f.max_version)))
                .collect(),
        })
    }

    /// Sets each feature of `updates` to its level (0 removes it) with its upgrade type,
    /// all or none (UpdateFeatures, sent to the controller); `validate_only` only
    /// checks. A refusal is INVALID_UPDATE_VERSION with the controller's reason, naming
    /// the node that does not support a level.
    pub fn update_features(
        &self,
        updates: &[(&str, i16, FeatureUpgradeType)],
        validate_only: bool,
    ) -> Result<()> {
        let mut router = self.router.lock();
        let request = UpdateFeaturesRequest::default()
            .with_timeout_ms(router.timeout_ms())
            .with_validate_only(validate_only)
            .with_feature_updates(
                updates
                    .iter()
                    .map(|(name, level, upgrade)| {
                        FeatureUpdateKey::default()
                            .with_feature(kstr(*name))
                            .with_max_version_level(*level)
                            .with_upgrade_type(upgrade.code())
                    })
                    .collect(),
            );
        let r = router.call_controller(&request, UPDATE_FEATURES_VERSION)?;
        check(|| Resource::Cluster, r.error_code, r.error_message.as_ref())?;
        for f in &r.results {
            check(|| Resource::Cluster, f.error_code, f.error_message.as_ref())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    /// Against a tidelog server (feature `server`).
    #[cfg(feature = "server")]
    #[test]
    fn a_single_node_describes_transaction_version_2_and_keeps_it() {
        use super::*;
        use crate::admin::ErrorCode;
        use crate::error::Error;

        let dir = tempfile::tempdir().unwrap();
        let broker = crate::broker::Broker::open(dir.path()).unwrap();
        let server = crate::server::Server::builder(broker)
            .listen("127.0.0.1:0")
            .start()
            .unwrap();
        let admin = AdminClient::connect(&server.local_addr().to_string()).unwrap();
        let f = admin.describe_features().unwrap();
        assert_eq!(f.finalized, [("transaction.version".to_string(), 2)].into());
        assert_eq!(f.finalized_epoch, 0);
        assert_eq!(f.supported["transaction.version"], (0, 2));
        // The level it has is taken; another is refused, validate-only or not.
        admin
            .update_features(
                &[("transaction.version", 2, FeatureUpgradeType::Upgrade)],
                false,
            )
            .unwrap();
        for validate_only in [true, false] {
            match admin.update_features(
                &[("transaction.version", 1, FeatureUpgradeType::SafeDowngrade)],
                validate_only,
            ) {
                Err(Error::Admin(e)) => {
                    assert_eq!(e.code, ErrorCode::INVALID_UPDATE_VERSION);
                    assert!(e.to_string().contains("fixed"), "{e}");
                }
                other => panic!("not refused: {other:?}"),
            }
        }
        assert_eq!(admin.describe_features().unwrap(), f);
    }
}
