//! AlterClientQuotas (key 49), versions 0-1 (KIP-546): sets and removes client quotas
//! (`producer_byte_rate`, `consumer_byte_rate`, `request_percentage`) of a user, a client
//! id or both, a null name being the default of its type.
//!
//! Needs AlterConfigs on the cluster (CLUSTER_AUTHORIZATION_FAILED for every entry
//! otherwise). Checked per entry, as Kafka does: an entity with an unknown type (`ip`
//! quotas are not kept), a type named twice or no type, an unknown key, a value not
//! above zero (or not whole for a byte rate) is INVALID_REQUEST with a message naming
//! it. The accepted entries are stored together, durably (in the cluster's metadata on a
//! cluster node), before the answer; with `validate_only` nothing is stored. One result
//! per entry.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::alter_client_quotas_request::EntryData;
use kafka_protocol::messages::alter_client_quotas_response::{
    EntityData, EntryData as ResultEntry,
};
use kafka_protocol::messages::{AlterClientQuotasRequest, AlterClientQuotasResponse};

use super::{Ctx, Fatal, Reply, Request, error_code, kstr};
use crate::security::acl::AclOperation;
use crate::security::quota::{
    ENTITY_CLIENT_ID, ENTITY_USER, EntityName, QuotaChange, QuotaEntity, validate_change,
};

/// The entity of a request's entry, or why it is refused.
pub(super) fn entity_of<'a>(
    parts: impl Iterator<Item = (&'a str, Option<&'a str>)>,
) -> Result<QuotaEntity, String> {
    let mut entity = QuotaEntity::default();
    for (kind, name) in parts {
        let name = match name {
            None => EntityName::Default,
            Some(n) => EntityName::Name(n.to_string()),
        };
        let slot = match kind {
            ENTITY_USER => &mut entity.user,
            ENTITY_CLIENT_ID => &mut entity.client_id,
            "ip" => return Err("ip quotas (connection_creation_rate) are not supported".into()),
            other => return Err(format!("unknown quota entity type {other:?}")),
        };
        if slot.replace(name).is_some() {
            return Err(format!("entity type {kind:?} named twice"));
        }
    }
    if entity.user.is_none() && entity.client_id.is_none() {
        return Err("an entity needs a user, a client-id or both".into());
    }
    Ok(entity)
}

/// The changes of one entry, or why it is refused.
fn changes_of(entry: &EntryData) -> Result<Vec<QuotaChange>, String> {
    let entity = entity_of(
        entry
            .entity
            .iter()
            .map(|e| (e.entity_type.as_str(), e.entity_name.as_deref())),
    )?;
    let mut changes = Vec::with_capacity(entry.ops.len());
    for op in &entry.ops {
        if changes
            .iter()
            .any(|c: &QuotaChange| c.key == op.key.as_str())
        {
            return Err(format!(
                "quota {:?} altered twice for {entity}",
                op.key.as_str()
            ));
        }
        let change = QuotaChange {
            entity: entity.clone(),
            key: op.key.to_string(),
            value: (!op.remove).then_some(op.value),
        };
        validate_change(&change).map_err(|e| e.to_string())?;
        changes.push(change);
    }
    Ok(changes)
}

pub(super) fn handle(ctx: &Ctx<'_>, req: &mut Request) -> Result<Reply, Fatal> {
    let request: AlterClientQuotasRequest = req.decode()?;
    let authorized = ctx.allowed_on_cluster(AclOperation::AlterConfigs);
    let outcomes: Vec<Result<Vec<QuotaChange>, (i16, String)>> = request
        .entries
        .iter()
        .map(|entry| {
            if !authorized {
                return Err((
                    ResponseError::ClusterAuthorizationFailed.code(),
                    "Cluster authorization failed".to_string(),
                ));
            }
            changes_of(entry).map_err(|m| (ResponseError::InvalidRequest.code(), m))
        })
        .collect();
    let changes: Vec<QuotaChange> = outcomes
        .iter()
        .filter_map(|o| o.as_ref().ok())
        .flatten()
        .cloned()
        .collect();
    let stored = match ctx.security().quotas.store() {
        _ if changes.is_empty() || request.validate_only => Ok(()),
        Some(store) => store.apply(&changes),
        None => Err(crate::error::Error::InvalidConfig {
            key: "client quotas".into(),
            reason: "this server keeps no client quotas".into(),
        }),
    };
    let entries = request
        .entries
        .iter()
        .zip(outcomes)
        .map(|(entry, outcome)| {
            let result = ResultEntry::default().with_entity(
                entry
                    .entity
                    .iter()
                    .map(|e| {
                        EntityData::default()
                            .with_entity_type(e.entity_type.clone())
                            .with_entity_name(e.entity_name.clone())
                    })
                    .collect(),
            );
            match (outcome, &stored) {
                (Err((code, message)), _) => {
                    tracing::debug!(peer = %ctx.peer, code, "client quota change refused: {message}");
                    result
                        .with_error_code(code)
                        .with_error_message(Some(kstr(message)))
                }
                (Ok(_), Err(e)) => result
                    .with_error_code(error_code(e))
                    .with_error_message(Some(kstr(e.to_string()))),
                (Ok(changes), Ok(())) => {
                    if !request.validate_only && !changes.is_empty() {
                        tracing::info!(
                            peer = %ctx.peer,
                            principal = ctx.principal,
                            entity = %changes[0].entity,
                            "client quotas altered"
                        );
                    }
                    result
                }
            }
        })
        .collect();
    req.respond(&AlterClientQuotasResponse::default().with_entries(entries))
}
