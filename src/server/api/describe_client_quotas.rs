//! DescribeClientQuotas (key 48), versions 0-1 (KIP-546): the client quotas whose
//! entities match a filter. Each component names an entity type and matches its exact
//! name (match type 0; a null name is the default), its default (1) or any name but the
//! default (2); with `strict`, an entity must have no other type than the components
//! name, else it may have more.
//!
//! Needs DescribeConfigs on the cluster (CLUSTER_AUTHORIZATION_FAILED otherwise). A
//! component with an unknown entity type, a type named twice or an unknown match type is
//! INVALID_REQUEST.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::describe_client_quotas_request::ComponentData;
use kafka_protocol::messages::describe_client_quotas_response::{EntityData, EntryData, ValueData};
use kafka_protocol::messages::{DescribeClientQuotasRequest, DescribeClientQuotasResponse};

use super::{Ctx, Fatal, Reply, Request, kstr};
use crate::security::acl::AclOperation;
use crate::security::quota::{ENTITY_CLIENT_ID, ENTITY_USER, EntityName, QuotaEntity};

/// Kafka's match types of a filter component.
const MATCH_EXACT: i8 = 0;
const MATCH_DEFAULT: i8 = 1;
const MATCH_SPECIFIED: i8 = 2;

/// Whether `part` (the entity's part of the component's type) matches `c`.
fn matches(c: &ComponentData, part: &Option<EntityName>) -> bool {
    match (c.match_type, part) {
        (_, None) => false,
        (MATCH_EXACT, Some(EntityName::Name(n))) => c._match.as_deref() == Some(n.as_str()),
        (MATCH_EXACT, Some(EntityName::Default)) => c._match.is_none(),
        (MATCH_DEFAULT, Some(p)) => *p == EntityName::Default,
        (_, Some(p)) => *p != EntityName::Default,
    }
}

/// The part of `entity` of the type `kind`.
fn part<'e>(entity: &'e QuotaEntity, kind: &str) -> &'e Option<EntityName> {
    if kind == ENTITY_USER {
        &entity.user
    } else {
        &entity.client_id
    }
}

/// Checks the filter's components: known types, each once, known match types.
fn check(components: &[ComponentData]) -> Result<(), String> {
    let mut seen = Vec::new();
    for c in components {
        let kind = c.entity_type.as_str();
        if kind != ENTITY_USER && kind != ENTITY_CLIENT_ID {
            return Err(format!("unknown quota entity type {kind:?}"));
        }
        if seen.contains(&kind) {
            return Err(format!("entity type {kind:?} named twice"));
        }
        if !(MATCH_EXACT..=MATCH_SPECIFIED).contains(&c.match_type) {
            return Err(format!("unknown match type {}", c.match_type));
        }
        seen.push(kind);
    }
    Ok(())
}

pub(super) fn handle(ctx: &Ctx<'_>, req: &mut Request) -> Result<Reply, Fatal> {
    let request: DescribeClientQuotasRequest = req.decode()?;
    let refuse = |code: i16, message: String| {
        req.respond(
            &DescribeClientQuotasResponse::default()
                .with_error_code(code)
                .with_error_message(Some(kstr(message)))
                .with_entries(None),
        )
    };
    if !ctx.allowed_on_cluster(AclOperation::DescribeConfigs) {
        return refuse(
            ResponseError::ClusterAuthorizationFailed.code(),
            "Cluster authorization failed".into(),
        );
    }
    if let Err(message) = check(&request.components) {
        return refuse(ResponseError::InvalidRequest.code(), message);
    }
    let quotas = ctx
        .security()
        .quotas
        .store()
        .map(|s| s.quotas())
        .unwrap_or_default();
    let entries = quotas
        .iter()
        .filter(|(entity, _)| {
            request
                .components
                .iter()
                .all(|c| matches(c, part(entity, c.entity_type.as_str())))
                && (!request.strict || {
                    let named = |kind: &str| {
                        request
                            .components
                            .iter()
                            .any(|c| c.entity_type.as_str() == kind)
                    };
                    (entity.user.is_none() || named(ENTITY_USER))
                        && (entity.client_id.is_none() || named(ENTITY_CLIENT_ID))
                })
        })
        .map(|(entity, values)| {
            let mut parts = Vec::new();
            for (kind, p) in [
                (ENTITY_USER, &entity.user),
                (ENTITY_CLIENT_ID, &entity.client_id),
            ] {
                if let Some(p) = p {
                    parts.push(
                        EntityData::default()
                            .with_entity_type(kstr(kind))
                            .with_entity_name(match p {
                                EntityName::Default => None,
                                EntityName::Name(n) => Some(kstr(n.clone())),
                            }),
                    );
                }
            }
            EntryData::default().with_entity(parts).with_values(
                values
                    .iter()
                    .map(|(k, v)| {
                        ValueData::default()
                            .with_key(kstr(k.clone()))
                            .with_value(*v)
                    })
                    .collect(),
            )
        })
        .collect();
    req.respond(&DescribeClientQuotasResponse::default().with_entries(Some(entries)))
}
