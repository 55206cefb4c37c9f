//! ApiVersions (key 18), versions 0-3: the list of APIs and versions the server answers.
//!
//! A client sends its newest ApiVersions first. When the server cannot parse that
//! version it still answers, in the v0 layout (which every client can read), with
//! `UNSUPPORTED_VERSION` (35) and the full list, and the client retries with the highest
//! version the list offers. That reply is built from the raw header alone, before any
//! decoding, in [`unsupported_version_reply`].
//!
//! v3 also lists the features the server supports and has finalized: only
//! `transaction.version`, finalized at 2 (KIP-890 part 2: EndTxn v5 bumps the
//! producer's epoch on every transaction end, Produce v12 and TxnOffsetCommit v5 add
//! their partition to the transaction), which tells Kafka 4.0 clients to use it.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::api_versions_response::{
    ApiVersion, FinalizedFeatureKey, SupportedFeatureKey,
};
use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse};
use kafka_protocol::protocol::StrBytes;

use super::{APIS, Ctx, Fatal, Reply, Request, encode_response};
use crate::transaction::EPOCH_BUMP_TRANSACTION_VERSION;

/// Kafka's feature of the transaction protocol's version (KIP-1022).
const TRANSACTION_VERSION: &str = "transaction.version";

/// The response listing every API of the table ([`APIS`]), with `error_code`.
fn response(error_code: i16) -> ApiVersionsResponse {
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
        .with_supported_features(vec![
            SupportedFeatureKey::default()
                .with_name(StrBytes::from_static_str(TRANSACTION_VERSION))
                .with_min_version(0)
                .with_max_version(EPOCH_BUMP_TRANSACTION_VERSION),
        ])
        // The levels never change: one epoch for the life of every server.
        .with_finalized_features_epoch(0)
        .with_finalized_features(vec![
            FinalizedFeatureKey::default()
                .with_name(StrBytes::from_static_str(TRANSACTION_VERSION))
                .with_min_version_level(EPOCH_BUMP_TRANSACTION_VERSION)
                .with_max_version_level(EPOCH_BUMP_TRANSACTION_VERSION),
        ])
}

/// Answer an ApiVersions request of a supported version.
pub(super) fn handle(_ctx: &Ctx<'_>, req: &mut Request) -> Result<Reply, Fatal> {
    // The body carries the client's software name and version (v3); nothing to act on,
    // but a body that does not decode is still a bad request.
    let _: ApiVersionsRequest = req.decode()?;
    req.respond(&response(0))
}

/// The v0-shaped `UNSUPPORTED_VERSION` reply to an ApiVersions request of a version the
/// server cannot parse.
pub(crate) fn unsupported_version_reply(correlation_id: i32) -> Result<Reply, Fatal> {
    let code = ResponseError::UnsupportedVersion.code();
    encode_response(correlation_id, 0, &response(code)).map(Reply::bytes)
}
