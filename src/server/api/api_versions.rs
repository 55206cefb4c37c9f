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
//! image and the image's index as `finalized_features_epoch`. Below level 2 the list
//! stops at Produce v11 and TxnOffsetCommit v4, so that a client that reads only the
//! versions (not the finalized features) never sends the two versions that would
//! make the leader or the group coordinator add a partition to its transaction; one
//! that sends them anyway is answered UNSUPPORTED_VERSION for each partition.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::api_versions_response::{
    ApiVersion, FinalizedFeatureKey, SupportedFeatureKey,
};
use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse};

use super::{APIS, ApiKey, Ctx, Fatal, Reply, Request, encode_response, kstr};
use crate::cluster::features::{FeatureLevels, TRANSACTION_VERSION};
use crate::transaction::EPOCH_BUMP_TRANSACTION_VERSION;

/// The last Produce version of a client of transaction version 0 or 1; Produce v12
/// makes the partition leader add the partition to the transaction (KIP-890 part 2).
pub(super) const LAST_PRODUCE_BEFORE_TRANSACTION_V2: i16 = 11;

/// The last TxnOffsetCommit version of a client of transaction version 0 or 1; v5
/// makes the group coordinator add the group's offsets partition to the transaction.
pub(super) const LAST_TXN_OFFSET_COMMIT_BEFORE_TRANSACTION_V2: i16 = 4;

/// The feature levels this node answers with: its cluster's, or a single node's.
pub(super) fn levels(ctx: &Ctx<'_>) -> FeatureLevels {
    ctx.backend()
        .cluster()
        .and_then(|c| c.feature_levels())
        .unwrap_or_else(FeatureLevels::single_node)
}

/// Whether this node's cluster (a single node always) has finalized
/// `transaction.version` 2, so that Produce v12 and TxnOffsetCommit v5 may add
/// partitions to a transaction.
pub(super) fn transaction_version_2(ctx: &Ctx<'_>) -> bool {
    levels(ctx).level(TRANSACTION_VERSION) >= EPOCH_BUMP_TRANSACTION_VERSION
}

/// The highest version of `key` this node answers at finalized `levels`: the table's,
/// capped for the two APIs of transaction version 2 below level 2.
fn max_version(key: ApiKey, max: i16, levels: &FeatureLevels) -> i16 {
    if levels.level(TRANSACTION_VERSION) >= EPOCH_BUMP_TRANSACTION_VERSION {
        return max;
    }
    match key {
        ApiKey::Produce => max.min(LAST_PRODUCE_BEFORE_TRANSACTION_V2),
        ApiKey::TxnOffsetCommit => max.min(LAST_TXN_OFFSET_COMMIT_BEFORE_TRANSACTION_V2),
        _ => max,
    }
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
                .with_max_version(max_version(api.key, api.max, levels))
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
