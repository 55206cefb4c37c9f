//! Client quotas through the admin client: AlterClientQuotas and DescribeClientQuotas,
//! as Kafka's `Admin` sends them (KIP-546). Any broker answers them (a tidelog cluster
//! node hands the change to its controller and answers once it applied it).

use std::collections::BTreeMap;

use kafka_protocol::messages::alter_client_quotas_request::{EntityData, EntryData, OpData};
use kafka_protocol::messages::describe_client_quotas_request::ComponentData;
use kafka_protocol::messages::{AlterClientQuotasRequest, DescribeClientQuotasRequest};
use kafka_protocol::protocol::StrBytes;

use super::router::{Outcome, check, kstr};
use super::{AdminClient, Resource};
use crate::error::{Error, Result};
use crate::security::quota::{
    ENTITY_CLIENT_ID, ENTITY_USER, EntityName, QuotaChange, QuotaEntity, Quotas, validate_change,
};

const ALTER_CLIENT_QUOTAS_VERSION: i16 = 0;
const DESCRIBE_CLIENT_QUOTAS_VERSION: i16 = 0;

/// Which names of one entity type a [`AdminClient::describe_client_quotas`] filter
/// matches (Kafka's `ClientQuotaFilterComponent`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QuotaMatch {
    /// This name exactly.
    Exact(String),
    /// The default of the type.
    Default,
    /// Any name but the default.
    Any,
}

/// The (type, name) parts of an entity, in Kafka's form (a default is a null name).
fn parts(entity: &QuotaEntity) -> Vec<(&'static str, Option<String>)> {
    [
        (ENTITY_USER, &entity.user),
        (ENTITY_CLIENT_ID, &entity.client_id),
    ]
    .into_iter()
    .filter_map(|(kind, part)| {
        part.as_ref().map(|p| {
            (
                kind,
                match p {
                    EntityName::Default => None,
                    EntityName::Name(n) => Some(n.clone()),
                },
            )
        })
    })
    .collect()
}

/// The entity of a response's (type, name) parts.
fn entity_of<'a>(
    parts: impl Iterator<Item = (&'a StrBytes, Option<&'a StrBytes>)>,
) -> Result<QuotaEntity> {
    let mut entity = QuotaEntity::default();
    for (kind, name) in parts {
        let name = name.map_or(EntityName::Default, |n| EntityName::Name(n.to_string()));
        match kind.as_str() {
            ENTITY_USER => entity.user = Some(name),
            ENTITY_CLIENT_ID => entity.client_id = Some(name),
            other => {
                return Err(Error::corrupt(
                    "a DescribeClientQuotas response",
                    0,
                    format!("unknown entity type {other:?}"),
                ));
            }
        }
    }
    Ok(entity)
}

impl AdminClient {
    /// Runs an idempotent request any broker answers through `round` (repeated as the
    /// router repeats rounds), and its outcome.
    pub(super) fn on_any_broker<T>(
        &self,
        round: impl FnMut(&mut super::router::Router) -> Result<Outcome<T>>,
    ) -> Result<T> {
        self.until_final(true, round)
    }

    /// Sets and removes client quotas (AlterClientQuotas): the outcome per entity, in
    /// the order the entities first appear in `changes`. An entity's changes apply
    /// together or not at all; with `validate_only` they are only checked.
    pub fn alter_client_quotas(
        &self,
        changes: &[QuotaChange],
        validate_only: bool,
    ) -> Result<Vec<(QuotaEntity, Result<()>)>> {
        let mut order: Vec<QuotaEntity> = Vec::new();
        for c in changes {
            validate_change(c)?;
            if !order.contains(&c.entity) {
                order.push(c.entity.clone());
            }
        }
        let entries: Vec<EntryData> = order
            .iter()
            .map(|entity| {
                EntryData::default()
                    .with_entity(
                        parts(entity)
                            .into_iter()
                            .map(|(kind, name)| {
                                EntityData::default()
                                    .with_entity_type(kstr(kind))
                                    .with_entity_name(name.map(kstr))
                            })
                            .collect(),
                    )
                    .with_ops(
                        changes
                            .iter()
                            .filter(|c| &c.entity == entity)
                            .map(|c| {
                                OpData::default()
                                    .with_key(kstr(&c.key))
                                    .with_value(c.value.unwrap_or(0.0))
                                    .with_remove(c.value.is_none())
                            })
                            .collect(),
                    )
            })
            .collect();
        let request = AlterClientQuotasRequest::default()
            .with_entries(entries)
            .with_validate_only(validate_only);
        let results = self.on_any_broker(|r| {
            let response = r.call_any(&request, ALTER_CLIENT_QUOTAS_VERSION)?;
            Ok(Outcome::Done(Ok(response.entries)))
        })?;
        let mut out = Vec::new();
        for res in results {
            let entity = entity_of(
                res.entity
                    .iter()
                    .map(|e| (&e.entity_type, e.entity_name.as_ref())),
            )?;
            let o = check(
                || Resource::Cluster,
                res.error_code,
                res.error_message.as_ref(),
            )
            .map_err(Error::from);
            out.push((entity, o));
        }
        Ok(out)
    }

    /// The client quotas whose entities match every `(entity type, match)` of
    /// `filter` (DescribeClientQuotas; `user` or `client-id`); with `strict`, only
    /// entities of no other type. An empty filter without `strict` matches every entity.
    pub fn describe_client_quotas(
        &self,
        filter: &[(&str, QuotaMatch)],
        strict: bool,
    ) -> Result<Quotas> {
        let request = DescribeClientQuotasRequest::default()
            .with_components(
                filter
                    .iter()
                    .map(|(kind, m)| {
                        let (match_type, name) = match m {
                            QuotaMatch::Exact(n) => (0, Some(kstr(n))),
                            QuotaMatch::Default => (1, None),
                            QuotaMatch::Any => (2, None),
                        };
                        ComponentData::default()
                            .with_entity_type(kstr(*kind))
                            .with_match_type(match_type)
                            .with_match(name)
                    })
                    .collect(),
            )
            .with_strict(strict);
        let entries = self.on_any_broker(|r| {
            let response = r.call_any(&request, DESCRIBE_CLIENT_QUOTAS_VERSION)?;
            Ok(check(
                || Resource::Cluster,
                response.error_code,
                response.error_message.as_ref(),
            )
            .map(|()| response.entries.unwrap_or_default())
            .into())
        })?;
        let mut out = Quotas::new();
        for e in entries {
            let entity = entity_of(
                e.entity
                    .iter()
                    .map(|p| (&p.entity_type, p.entity_name.as_ref())),
            )?;
            let values: BTreeMap<String, f64> = e
                .values
                .into_iter()
                .map(|v| (v.key.to_string(), v.value))
                .collect();
            out.insert(entity, values);
        }
        Ok(out)
    }
}
