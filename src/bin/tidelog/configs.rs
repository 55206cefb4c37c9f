//! `tidelog configs`: client quotas (as kafka-configs --entity-type clients|users):
//! `--alter --add-config producer_byte_rate=1048576 --entity-type clients --entity-name
//! app`, `--delete-config`, `--describe`; on a stopped single node's data directory, or
//! with --bootstrap on a running node or cluster.

use std::path::Path;

use tidelog::admin::AdminClient;
use tidelog::security::{EntityName, FileQuotaStore, QuotaChange, QuotaEntity, QuotaStore, Quotas};

use crate::cli::ConfigsArgs;
use crate::common::{admin_client, close_broker, data_dir, open_broker};
use crate::out::Out;
use crate::security::refuse_cluster_node;
use crate::{CliResult, fail};

/// Where the quotas are changed and read.
trait QuotaTarget {
    fn alter(&self, changes: &[QuotaChange]) -> CliResult;
    fn all(&self) -> CliResult<Quotas>;
}

impl QuotaTarget for AdminClient {
    fn alter(&self, changes: &[QuotaChange]) -> CliResult {
        for (_, outcome) in self.alter_client_quotas(changes, false)? {
            outcome?;
        }
        Ok(())
    }

    fn all(&self) -> CliResult<Quotas> {
        Ok(self.describe_client_quotas(&[], false)?)
    }
}

impl QuotaTarget for FileQuotaStore {
    fn alter(&self, changes: &[QuotaChange]) -> CliResult {
        Ok(self.apply(changes)?)
    }

    fn all(&self) -> CliResult<Quotas> {
        Ok((*self.quotas()).clone())
    }
}

/// The entity the options name: `--entity-type` with `--entity-name` or
/// `--entity-default`, and/or kafka-configs' `--user`, `--user-defaults`, `--client`,
/// `--client-defaults`. For `--describe`, parts left out match anything.
fn entity(a: &ConfigsArgs) -> CliResult<QuotaEntity> {
    let mut e = QuotaEntity::default();
    let name = |n: &Option<String>, default: bool| match (n, default) {
        (Some(n), false) => Ok(Some(EntityName::Name(n.clone()))),
        (None, true) => Ok(Some(EntityName::Default)),
        (None, false) => Ok(None),
        (Some(_), true) => Err(fail!("give a name or the default, not both")),
    };
    if let Some(kind) = &a.entity_type {
        let part = name(&a.entity_name, a.entity_default)?;
        let part = match part {
            Some(p) => Some(p),
            None if a.describe => None,
            None => return Err(fail!("give --entity-name NAME or --entity-default")),
        };
        match kind.as_str() {
            "clients" | "client-id" => e.client_id = part,
            "users" | "user" => e.user = part,
            other => {
                return Err(fail!(
                    "--entity-type {other:?}: client quotas are for clients or users"
                ));
            }
        }
    } else if a.entity_name.is_some() || a.entity_default {
        return Err(fail!(
            "--entity-name and --entity-default need --entity-type"
        ));
    }
    if let Some(u) = name(&a.user, a.user_defaults)? {
        e.user = Some(u);
    }
    if let Some(c) = name(&a.client, a.client_defaults)? {
        e.client_id = Some(c);
    }
    Ok(e)
}

/// `k=v[,k=v...]` of every `--add-config`, and every key of `--delete-config`.
fn changes(a: &ConfigsArgs, entity: &QuotaEntity) -> CliResult<Vec<QuotaChange>> {
    let mut out = Vec::new();
    for kv in a.add_config.iter().flat_map(|s| s.split(',')) {
        let Some((k, v)) = kv.split_once('=') else {
            return Err(fail!("--add-config {kv:?}: expected KEY=VALUE"));
        };
        let value: f64 = v
            .trim()
            .parse()
            .map_err(|_| fail!("--add-config {kv:?}: {v:?} is not a number"))?;
        out.push(QuotaChange {
            entity: entity.clone(),
            key: k.trim().to_string(),
            value: Some(value),
        });
    }
    for k in a.delete_config.iter().flat_map(|s| s.split(',')) {
        out.push(QuotaChange {
            entity: entity.clone(),
            key: k.trim().to_string(),
            value: None,
        });
    }
    Ok(out)
}

/// kafka-configs' words for an entity: `user-principal 'alice', client-id 'app'`.
fn describe_entity(e: &QuotaEntity) -> String {
    let part = |kind: &str, p: &EntityName| match p {
        EntityName::Default => format!("the default {kind}"),
        EntityName::Name(n) => format!("{kind} '{n}'"),
    };
    let mut parts = Vec::new();
    if let Some(u) = &e.user {
        parts.push(part("user-principal", u));
    }
    if let Some(c) = &e.client_id {
        parts.push(part("client-id", c));
    }
    parts.join(", ")
}

/// Whether `e` is one `filter` selects: every part `filter` names, as it names it.
fn selected(filter: &QuotaEntity, e: &QuotaEntity) -> bool {
    let fits = |f: &Option<EntityName>, p: &Option<EntityName>| f.is_none() || f == p;
    fits(&filter.user, &e.user) && fits(&filter.client_id, &e.client_id)
}

/// Runs `tidelog configs ...`.
pub(crate) fn run(given: Option<&Path>, args: &ConfigsArgs) -> CliResult {
    if args.alter == args.describe {
        return Err(fail!("give --alter or --describe"));
    }
    if let Some(bootstrap) = &args.target.bootstrap {
        let admin = admin_client(bootstrap, &args.target, given)?;
        return run_on(&admin, args);
    }
    let data = data_dir(given);
    refuse_cluster_node(data, "client quotas")?;
    let broker = open_broker(data, args.alter)?;
    let store = FileQuotaStore::open(broker.dir())?;
    run_on(&store, args)?;
    close_broker(broker)
}

fn run_on(target: &dyn QuotaTarget, args: &ConfigsArgs) -> CliResult {
    let entity = entity(args)?;
    let mut out = Out::new();
    if args.alter {
        if entity.user.is_none() && entity.client_id.is_none() {
            return Err(fail!(
                "give the entity: --entity-type clients|users with --entity-name NAME or --entity-default"
            ));
        }
        let changes = changes(args, &entity)?;
        if changes.is_empty() {
            return Err(fail!("give --add-config KEY=VALUE or --delete-config KEY"));
        }
        target.alter(&changes)?;
        return out.line(format_args!(
            "Completed updating config for {}.",
            describe_entity(&entity)
        ));
    }
    // `--describe --entity-type T` alone: every entity with a part of that type.
    let has_type = |e: &QuotaEntity| match args.entity_type.as_deref() {
        Some("users" | "user") => e.user.is_some(),
        Some(_) => e.client_id.is_some(),
        None => true,
    };
    for (e, values) in target.all()? {
        if !selected(&entity, &e) || !has_type(&e) {
            continue;
        }
        let values: Vec<String> = values.iter().map(|(k, v)| format!("{k}={v}")).collect();
        out.line(format_args!(
            "Quota configs for {} are {}",
            describe_entity(&e),
            values.join(", ")
        ))?;
    }
    Ok(())
}
