//! ApiVersions (key 18), versions 0-3: the list of APIs and versions the server answers.
//!
//! A client sends its newest ApiVersions first. When the server cannot parse that
//! version it still answers, in the v0 layout (which every client can read), with
//! `UNSUPPORTED_VERSION` (35) and the full list, and the client retries with the highest
//! version the list offers. That reply is built from the raw header alone, before any
//! decoding, in [`unsupported_version_reply`].
//!
//! v3 also lists the features the server supports and has finalized (KIP-584): only
//! `transaction.version`. Its level 2 (KIP-890 part 2: EndTxn v5 bumps the producer's
//! epoch on every transaction end, Produce v12 and TxnOffsetCommit v5 add their
//! partition to the transaction) tells Kafka 4.0 clients to use it. A single node is at
//! level 2 for good (epoch 0); a cluster node answers with the levels of its metadata
//! image and the image's index as `finalized_features_epoch`.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::api_versions_response::{
    ApiVersion, FinalizedFeatureKey, SupportedFeatureKey,
};
use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse};

use super::{APIS, Ctx, Fatal, Reply, Request, encode_response, kstr};
use crate::cluster::features::FeatureLevels;

/// The feature levels this node answers with: its cluster's, or a single node's.
pub(super) fn levels(ctx: &Ctx<'_>) -> FeatureLevels {
    ctx.backend()
        .cluster()
        .and_then(|c| c.feature_levels())
        .unwrap_or_else(FeatureLevels::single_node)
}

/// The response listing every API of the table ([`APIS`]), with `error_code`, and the
/// features of `levels`.
fn response(error_code: i16, levels: &FeatureLevels) -> ApiVersionsResponse {
    let api_keys = APIS
        .iter()
        .map(|api| {
            ApiVersion::default()
                .with_api_key(api.key as i16)
                .with_min_version(api.min)
                .with_max_version(api.max)
        })
        .collect();
    ApiVersionsResponse::default()
        .with_error_code(error_code)
        .with_api_keys(api_keys)
        .with_supported_features(
            levels
                .supported
                .iter()
                .map(|f| {
                    SupportedFeatureKey::default()
                        .with_name(kstr(f.name.clone()))
                        .with_min_version(f.min)
                        .with_max_version(f.max)
                })
                .collect(),
        )
        .with_finalized_features_epoch(levels.epoch)
        // As Kafka, the level on both ends (KIP-778 dropped minimum levels).
        .with_finalized_features(
            levels
                .finalized
                .iter()
                .map(|(name, level)| {
                    FinalizedFeatureKey::default()
                        .with_name(kstr(name.clone()))
                        .with_min_version_level(*level)
                        .with_max_version_level(*level)
                })
                .collect(),
        )
}

/// Answer an ApiVersions request of a supported version.
pub(super) fn handle(ctx: &Ctx<'_>, req: &mut Request) -> Result<Reply, Fatal> {
    // The body carries the client's software name and version (v3); nothing to act on,
    // but a body that does not decode is still a bad request.
    let _: ApiVersionsRequest = req.decode()?;
    req.respond(&response(0, &levels(ctx)))
}

/// The v0-shaped `UNSUPPORTED_VERSION` reply to an ApiVersions request of a version the
/// server cannot parse.
pub(crate) fn unsupported_version_reply(correlation_id: i32) -> Result<Reply, Fatal> {
    let code = ResponseError::UnsupportedVersion.code();
    // The v0 layout has no features.
    encode_response(
        correlation_id,
        0,
        &response(code, &FeatureLevels::single_node()),
    )
    .map(Reply::bytes)
}
