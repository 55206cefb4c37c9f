//! UpdateFeatures (key 57), versions 0-2 (KIP-584, KIP-778): finalizes feature levels
//! cluster-wide, all of a request's changes or none (`kafka-features.sh upgrade` /
//! `downgrade`). Needs Alter on the cluster (CLUSTER_AUTHORIZATION_FAILED). A change
//! the controller's rules refuse (a level a registered broker or a voter does not
//! support, a downgrade without a downgrade type, an unknown feature) is
//! INVALID_UPDATE_VERSION with Kafka's message naming what blocks it. v0 says a
//! downgrade with `allow_downgrade` (a safe downgrade), v1 with the upgrade type; v2
//! answers without per-feature results. A single node's levels are fixed: a change
//! to another level is refused.

use std::time::Duration;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::update_features_response::UpdatableFeatureResult;
use kafka_protocol::messages::{UpdateFeaturesRequest, UpdateFeaturesResponse};

use super::{Ctx, Fatal, Reply, Request, error_code, kstr};
use crate::cluster::features::{FeatureChange, FeatureLevels, UpgradeType};
use crate::security::acl::{AclOperation, CLUSTER_RESOURCE_NAME, ResourceType};

/// The longest the controller is waited for, whatever the request's timeout.
const MAX_TIMEOUT: Duration = Duration::from_secs(60);

pub(super) fn handle(ctx: &Ctx<'_>, req: &mut Request) -> Result<Reply, Fatal> {
    let request: UpdateFeaturesRequest = req.decode()?;
    let version = req.version();
    let names: Vec<String> = request
        .feature_updates
        .iter()
        .map(|u| u.feature.to_string())
        .collect();
    let answer = |code: i16, message: Option<String>| {
        let message = message.map(|m| {
            format!(
                "The update failed for all features since the following feature had an error: {m}"
            )
        });
        let mut r = UpdateFeaturesResponse::default()
            .with_error_code(code)
            .with_error_message(message.map(kstr));
        // Per-feature results only when it succeeded, and only before v2 (as Kafka's
        // controller).
        if code == 0 && version <= 1 {
            r.results = names
                .iter()
                .map(|n| UpdatableFeatureResult::default().with_feature(kstr(n.clone())))
                .collect();
        }
        r
    };
    if let Err((code, message)) = ctx.check(
        AclOperation::Alter,
        ResourceType::Cluster,
        CLUSTER_RESOURCE_NAME,
    ) {
        let r = UpdateFeaturesResponse::default()
            .with_error_code(code)
            .with_error_message(Some(kstr(message)));
        return req.respond(&r);
    }
    let invalid = ResponseError::InvalidUpdateVersion.code();
    let mut changes = Vec::with_capacity(request.feature_updates.len());
    for u in &request.feature_updates {
        let upgrade = if version == 0 {
            Some(if u.allow_downgrade {
                UpgradeType::SafeDowngrade
            } else {
                UpgradeType::Upgrade
            })
        } else {
            UpgradeType::from_kafka(u.upgrade_type)
        };
        let Some(upgrade) = upgrade else {
            let m = format!(
                "Invalid update version {} for feature {}. The controller does not support the given upgrade type.",
                u.max_version_level, u.feature
            );
            return req.respond(&answer(invalid, Some(m)));
        };
        changes.push(FeatureChange {
            name: u.feature.to_string(),
            level: u.max_version_level,
            upgrade,
        });
    }
    let timeout = Duration::from_millis(u64::try_from(request.timeout_ms).unwrap_or(0))
        .clamp(Duration::from_millis(1), MAX_TIMEOUT);
    let outcome = match ctx.backend().cluster() {
        Some(cluster) => cluster.update_features(&changes, request.validate_only, timeout),
        None => Ok(single_node(&changes)),
    };
    let (code, message) = match outcome {
        Ok(Ok(())) => (0, None),
        Ok(Err(why)) => (invalid, Some(why)),
        Err(e) => (error_code(&e), Some(e.to_string())),
    };
    if let Some(m) = &message {
        tracing::info!(peer = %ctx.peer, code, "feature update refused: {m}");
    }
    req.respond(&answer(code, message))
}

/// A single node's answer: its levels are fixed, so only a change to the level a feature
/// has is taken (as nothing to do).
fn single_node(changes: &[FeatureChange]) -> std::result::Result<(), String> {
    let levels = FeatureLevels::single_node();
    match changes.iter().find(|c| levels.level(&c.name) != c.level) {
        None => Ok(()),
        Some(c) => Err(format!(
            "Invalid update version {} for feature {}. A single node's feature levels are fixed at the highest it supports ({} is {}).",
            c.level,
            c.name,
            c.name,
            levels.level(&c.name)
        )),
    }
}
