//! Kafka's finalized features (KIP-584) in a cluster: the levels of each feature a node
//! supports (registered with it), the level the cluster has finalized (held in the
//! metadata image, changed by `FeatureLevel` records), and the rules UpdateFeatures is
//! checked with before one is proposed (Kafka's `FeatureControlManager`).
//!
//! tidelog has one feature, `transaction.version` (Kafka's `TransactionVersion`):
//! level 2 is KIP-890 part 2, where the transaction coordinator bumps a producer's
//! epoch at the end of every transaction (EndTxn v5). A new cluster starts at the
//! highest level its first controller supports (capped at what every broker registered
//! by then supports); a cluster formed before features existed stays at level 0 until
//! an operator upgrades it. A node that does not support a finalized level is refused
//! registration (as Kafka's controller refuses a broker's).
//!
//! The rules of an update, as Kafka's controller has them for every feature but
//! `metadata.version`: the level is not negative; every registered broker and every
//! voter supports it (a voter that never registered may not); a lower level needs a
//! downgrade type (safe and unsafe are alike: `transaction.version` keeps nothing on
//! disk that a lower level cannot read), a higher one the upgrade type. Level 0 removes
//! the feature from the finalized ones.

use std::collections::BTreeMap;
use std::time::Duration;

use super::ClusterNode;
use super::image::MetadataImage;
use super::records::{MetadataRecord, SupportedFeature};
use crate::error::{Error, Result};

/// Kafka's feature of the transaction protocol's version.
pub(crate) const TRANSACTION_VERSION: &str = "transaction.version";

/// The highest `transaction.version` this build supports.
pub(crate) const TRANSACTION_VERSION_MAX: i16 = crate::transaction::EPOCH_BUMP_TRANSACTION_VERSION;

/// The features this build supports, each from level 0.
pub(crate) fn supported() -> Vec<SupportedFeature> {
    vec![SupportedFeature {
        name: TRANSACTION_VERSION.into(),
        min: 0,
        max: TRANSACTION_VERSION_MAX,
    }]
}

/// The levels a new cluster starts at: the highest of each feature `supported` names.
pub(crate) fn bootstrap_levels(supported: &[SupportedFeature]) -> Vec<(String, i16)> {
    supported
        .iter()
        .filter(|f| f.max > 0)
        .map(|f| (f.name.clone(), f.max))
        .collect()
}

/// UpdateFeatures' upgrade types (KIP-778).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UpgradeType {
    /// Only to a higher level (or the same).
    Upgrade,
    /// A downgrade that loses no metadata.
    SafeDowngrade,
    /// A downgrade that may lose metadata.
    UnsafeDowngrade,
}

impl UpgradeType {
    /// Kafka's value on the wire (1, 2, 3), or None for another.
    pub(crate) fn from_kafka(value: i8) -> Option<UpgradeType> {
        match value {
            1 => Some(UpgradeType::Upgrade),
            2 => Some(UpgradeType::SafeDowngrade),
            3 => Some(UpgradeType::UnsafeDowngrade),
            _ => None,
        }
    }
}

/// The range of levels of `name` that a node registered with `features` supports: level
/// 0 only when it names none (a node that registered no features).
pub(crate) fn range_of(features: &[SupportedFeature], name: &str) -> (i16, i16) {
    features
        .iter()
        .find(|f| f.name == name)
        .map_or((0, 0), |f| (f.min, f.max))
}

/// Why `who` cannot run at `level` of a feature it supports in `range` (Kafka's
/// `QuorumFeatures.reasonNotSupported`), or None if it can.
fn reason_not_supported(who: &str, (min, max): (i16, i16), level: i16) -> Option<String> {
    if (min..=max).contains(&level) {
        None
    } else if max == 0 {
        Some(format!("{who} does not support this feature."))
    } else {
        Some(format!("{who} only supports versions {min}-{max}"))
    }
}

/// The feature, and why, for which node `node`, supporting `features`, cannot
/// register in a cluster that finalized `finalized` (Kafka's refusal of a broker's
/// registration), or None if it can.
pub(crate) fn unsupported_finalized(
    node: i32,
    finalized: &BTreeMap<String, i16>,
    features: &[SupportedFeature],
) -> Option<(String, String)> {
    finalized.iter().find_map(|(name, level)| {
        let (min, max) = range_of(features, name);
        (!(min..=max).contains(level)).then(|| {
            (
                name.clone(),
                format!(
                    "node {node} is unable to register because it does not support finalized version {level} of {name}; it supports versions {min} to {max}"
                ),
            )
        })
    })
}

/// Why the registered brokers of `image` cannot all run at `level` of `name`: the first
/// broker that does not support it, or None.
pub(crate) fn blocking_broker(image: &MetadataImage, name: &str, level: i16) -> Option<String> {
    image.brokers.values().find_map(|b| {
        reason_not_supported(
            &format!("Broker {}", b.id),
            range_of(&b.features, name),
            level,
        )
    })
}

/// Checks an UpdateFeatures change of `name` to `level` against `image`, whose voters
/// are `voters`, and this node's own `local` support (Kafka's
/// `FeatureControlManager.updateFeature`). The error is INVALID_UPDATE_VERSION's
/// message, in Kafka's words.
pub(crate) fn check_update(
    image: &MetadataImage,
    voters: &[i32],
    local: &[SupportedFeature],
    (name, level, upgrade): (&str, i16, UpgradeType),
) -> Result<(), String> {
    let invalid = |why: String| {
        Err(format!(
            "Invalid update version {level} for feature {name}. {why}"
        ))
    };
    if !local.iter().any(|f| f.name == name) {
        return invalid("This cluster does not know the feature.".into());
    }
    if level < 0 {
        return invalid("A feature version cannot be less than 0.".into());
    }
    if let Some(why) = reason_not_supported("Local controller", range_of(local, name), level)
        .or_else(|| blocking_broker(image, name, level))
    {
        return invalid(why);
    }
    if let Some(voter) = voters.iter().find(|v| !image.brokers.contains_key(v)) {
        return invalid(format!(
            "controller {voter} has not registered, and may not support this feature"
        ));
    }
    let current = image.finalized_level(name);
    if level < current && upgrade == UpgradeType::Upgrade {
        return invalid(
            "Can't downgrade the version of this feature without setting the upgrade type to either safe or unsafe downgrade.".into(),
        );
    }
    if level > current && upgrade != UpgradeType::Upgrade {
        return invalid("Can't downgrade to a newer version.".into());
    }
    Ok(())
}

/// The features of a cluster as a node sees them (ApiVersions' supported and
/// finalized features).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FeatureLevels {
    /// The metadata index the finalized levels are at (ApiVersions'
    /// `finalized_features_epoch`).
    pub epoch: i64,
    /// The finalized level of each feature above level 0.
    pub finalized: BTreeMap<String, i16>,
    /// The levels this node supports.
    pub supported: Vec<SupportedFeature>,
}

impl FeatureLevels {
    /// A single node's levels: every feature at the highest level this build supports,
    /// for good (epoch 0: they never change).
    pub(crate) fn single_node() -> FeatureLevels {
        let supported = supported();
        FeatureLevels {
            epoch: 0,
            finalized: bootstrap_levels(&supported).into_iter().collect(),
            supported,
        }
    }

    /// The finalized level of feature `name` (0 when it is not finalized).
    pub(crate) fn level(&self, name: &str) -> i16 {
        self.finalized.get(name).copied().unwrap_or(0)
    }
}

/// One change UpdateFeatures asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FeatureChange {
    /// The feature.
    pub name: String,
    /// Its new level (0 removes it).
    pub level: i16,
    /// Upgrade or downgrade.
    pub upgrade: UpgradeType,
}

impl ClusterNode {
    /// The cluster's finalized feature levels as this node applied them, and the ones
    /// it supports.
    pub(crate) fn feature_levels(&self) -> FeatureLevels {
        let image = self.image();
        FeatureLevels {
            epoch: image.index as i64,
            finalized: image.features.clone(),
            supported: self.config.supported_features.clone(),
        }
    }

    /// Checks `changes`, all of them first (Kafka's controller changes all or none),
    /// then, unless `validate_only`, finalizes each through the controller. The error
    /// string is INVALID_UPDATE_VERSION's message, naming what blocks the change (a
    /// broker that does not support the level, a voter that never registered).
    pub(crate) fn update_features(
        &self,
        changes: &[FeatureChange],
        validate_only: bool,
        timeout: Duration,
    ) -> Result<std::result::Result<(), String>> {
        let image = self.image();
        let voters = self.membership().voters;
        for c in changes {
            if let Err(why) = check_update(
                &image,
                &voters,
                &self.config.supported_features,
                (&c.name, c.level, c.upgrade),
            ) {
                return Ok(Err(why));
            }
        }
        drop(image);
        if validate_only {
            return Ok(Ok(()));
        }
        for c in changes {
            let record = MetadataRecord::FeatureLevel {
                name: c.name.clone(),
                level: c.level,
            };
            match self.propose(record, timeout) {
                Ok(_) => {}
                // A broker that registered since the check does not support the level.
                Err(Error::InvalidConfig { key, reason }) if key == c.name => {
                    return Ok(Err(format!(
                        "Invalid update version {} for feature {}. {reason}",
                        c.level, c.name
                    )));
                }
                Err(e) => return Err(e),
            }
        }
        Ok(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::image::BrokerRegistration;

    fn broker(id: i32, features: Vec<SupportedFeature>) -> BrokerRegistration {
        BrokerRegistration {
            id,
            epoch: 1,
            incarnation: 1,
            listener: "h:1".into(),
            replication_listener: None,
            endpoints: vec![],
            rack: None,
            features,
            fenced: false,
            shut_down: false,
        }
    }

    fn tv(min: i16, max: i16) -> Vec<SupportedFeature> {
        vec![SupportedFeature {
            name: TRANSACTION_VERSION.into(),
            min,
            max,
        }]
    }

    /// An image of brokers 1 and 2 (supporting `two`), at `level`.
    fn image(two: Vec<SupportedFeature>, level: i16) -> MetadataImage {
        let mut image = MetadataImage::default();
        image.brokers.insert(1, broker(1, supported()));
        image.brokers.insert(2, broker(2, two));
        if level > 0 {
            image.features.insert(TRANSACTION_VERSION.into(), level);
        }
        image
    }

    fn check(image: &MetadataImage, level: i16, upgrade: UpgradeType) -> Result<(), String> {
        check_update(
            image,
            &[1, 2],
            &supported(),
            (TRANSACTION_VERSION, level, upgrade),
        )
    }

    #[test]
    fn this_build_supports_transaction_version_0_to_2_and_a_new_cluster_starts_at_2() {
        assert_eq!(supported(), tv(0, 2));
        assert_eq!(
            bootstrap_levels(&supported()),
            vec![(TRANSACTION_VERSION.to_string(), 2)]
        );
        assert_eq!(bootstrap_levels(&tv(0, 0)), vec![]);
    }

    #[test]
    fn an_upgrade_names_the_broker_that_does_not_support_it() {
        let old = image(vec![], 0);
        let e = check(&old, 2, UpgradeType::Upgrade).unwrap_err();
        assert_eq!(
            e,
            "Invalid update version 2 for feature transaction.version. Broker 2 does not support this feature."
        );
        let partly = image(tv(0, 1), 0);
        let e = check(&partly, 2, UpgradeType::Upgrade).unwrap_err();
        assert!(e.ends_with("Broker 2 only supports versions 0-1"), "{e}");
        assert_eq!(check(&partly, 1, UpgradeType::Upgrade), Ok(()));
        let e = check(&partly, 3, UpgradeType::Upgrade).unwrap_err();
        assert!(
            e.ends_with("Local controller only supports versions 0-2"),
            "{e}"
        );
    }

    #[test]
    fn a_voter_that_never_registered_blocks_an_upgrade() {
        let img = image(supported(), 0);
        let e = check_update(
            &img,
            &[1, 2, 3],
            &supported(),
            (TRANSACTION_VERSION, 2, UpgradeType::Upgrade),
        )
        .unwrap_err();
        assert!(
            e.ends_with("controller 3 has not registered, and may not support this feature"),
            "{e}"
        );
    }

    #[test]
    fn a_downgrade_needs_a_downgrade_type_and_a_lower_level() {
        let img = image(supported(), 2);
        let e = check(&img, 1, UpgradeType::Upgrade).unwrap_err();
        assert!(e.contains("without setting the upgrade type"), "{e}");
        assert_eq!(check(&img, 1, UpgradeType::SafeDowngrade), Ok(()));
        assert_eq!(check(&img, 0, UpgradeType::UnsafeDowngrade), Ok(()));
        // The same level is no change, whatever the type.
        assert_eq!(check(&img, 2, UpgradeType::SafeDowngrade), Ok(()));
        assert_eq!(check(&img, 2, UpgradeType::Upgrade), Ok(()));
        let low = image(supported(), 1);
        let e = check(&low, 2, UpgradeType::SafeDowngrade).unwrap_err();
        assert!(e.ends_with("Can't downgrade to a newer version."), "{e}");
        let e = check(&low, -1, UpgradeType::SafeDowngrade).unwrap_err();
        assert!(e.ends_with("cannot be less than 0."), "{e}");
    }

    #[test]
    fn an_unknown_feature_or_upgrade_type_is_refused() {
        let img = image(supported(), 2);
        let e = check_update(
            &img,
            &[1, 2],
            &supported(),
            ("group.version", 1, UpgradeType::Upgrade),
        )
        .unwrap_err();
        assert!(e.contains("feature group.version"), "{e}");
        assert_eq!(UpgradeType::from_kafka(0), None);
        assert_eq!(UpgradeType::from_kafka(4), None);
        assert_eq!(UpgradeType::from_kafka(1), Some(UpgradeType::Upgrade));
        assert_eq!(UpgradeType::from_kafka(2), Some(UpgradeType::SafeDowngrade));
        assert_eq!(
            UpgradeType::from_kafka(3),
            Some(UpgradeType::UnsafeDowngrade)
        );
    }

    #[test]
    fn a_node_is_refused_registration_for_a_finalized_level_it_does_not_support() {
        let finalized: BTreeMap<String, i16> = [(TRANSACTION_VERSION.to_string(), 2)].into();
        assert_eq!(unsupported_finalized(4, &finalized, &supported()), None);
        let (feature, e) = unsupported_finalized(4, &finalized, &tv(0, 1)).unwrap();
        assert_eq!(feature, TRANSACTION_VERSION);
        assert!(
            e.contains("node 4 is unable to register because it does not support finalized version 2 of transaction.version"),
            "{e}"
        );
        assert!(unsupported_finalized(4, &finalized, &[]).is_some());
        assert_eq!(unsupported_finalized(4, &BTreeMap::new(), &[]), None);
    }
}
