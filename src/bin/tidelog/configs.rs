//! `tidelog configs`: client quotas (as kafka-configs --entity-type clients|users):
//! `--alter --add-config producer_byte_rate=1048576 --entity-type clients --entity-name
//! app`, `--delete-config`, `--describe`; on a stopped single node's data directory, or
//! with --bootstrap on a running node or cluster. And a cluster's dynamic broker configs
//! (as kafka-configs --entity-type brokers), with --bootstrap: `--alter --add-config
//! leader.replication.throttled.rate=1048576 --entity-type brokers --entity-name 1` (or
//! `--entity-default`, every broker without its own value), `--delete-config`,
//! `--describe` (`--broker N` and `--broker-defaults` for short).

use std::path::Path;

use tidelog::admin::{AdminClient, AlterConfigOp, ConfigSource};
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
    let brokers = matches!(args.entity_type.as_deref(), Some("brokers" | "broker"))
        || args.broker.is_some()
        || args.broker_defaults;
    if let Some(bootstrap) = &args.target.bootstrap {
        let admin = admin_client(bootstrap, &args.target, given)?;
        if brokers {
            return run_brokers(&admin, args);
        }
        return run_on(&admin, args);
    }
    if brokers {
        return Err(fail!(
            "--entity-type brokers: dynamic broker configs are kept by a running cluster; give --bootstrap ADDRS"
        ));
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

/// The broker `--entity-name` names: Some(id), or None for `--entity-default` (the
/// cluster-wide default); for `--describe` without either, every broker and the default.
fn broker_entities(admin: &AdminClient, a: &ConfigsArgs) -> CliResult<Vec<Option<i32>>> {
    if a.user.is_some() || a.user_defaults || a.client.is_some() || a.client_defaults {
        return Err(fail!(
            "--entity-type brokers names a broker: --user and --client are for quotas"
        ));
    }
    let by_type = matches!(a.entity_type.as_deref(), Some("brokers" | "broker"));
    let (name, default) = match (&a.broker, a.broker_defaults) {
        (None, false) => (&a.entity_name, a.entity_default),
        _ if a.entity_type.is_some() && !by_type => {
            return Err(fail!(
                "--broker and --broker-defaults name a broker: not with --entity-type {}",
                a.entity_type.as_deref().unwrap_or_default()
            ));
        }
        _ if a.entity_name.is_some() || a.entity_default => {
            return Err(fail!(
                "give the broker once: --broker/--broker-defaults or --entity-name/--entity-default"
            ));
        }
        (b, d) => (b, d),
    };
    match (name, default) {
        (Some(_), true) => Err(fail!("give a name or the default, not both")),
        (Some(n), false) => match n.trim().parse::<i32>() {
            Ok(id) if id >= 0 => Ok(vec![Some(id)]),
            _ => Err(fail!("broker {n:?}: a broker is named by its node id")),
        },
        (None, true) => Ok(vec![None]),
        (None, false) if a.describe => {
            let mut ids: Vec<i32> = admin.metadata()?.brokers.iter().map(|b| b.id).collect();
            ids.sort_unstable();
            Ok(ids.into_iter().map(Some).chain([None]).collect())
        }
        (None, false) => Err(fail!(
            "give --entity-name N (a node id) or --entity-default (or --broker N, --broker-defaults)"
        )),
    }
}

/// `--add-config k=v[,k=v...]` and `--delete-config k[,k...]` as broker config changes.
fn broker_ops(a: &ConfigsArgs) -> CliResult<Vec<AlterConfigOp>> {
    let mut ops = Vec::new();
    for kv in a.add_config.iter().flat_map(|s| s.split(',')) {
        let Some((k, v)) = kv.split_once('=') else {
            return Err(fail!("--add-config {kv:?}: expected KEY=VALUE"));
        };
        ops.push(AlterConfigOp::Set(k.trim().into(), v.trim().into()));
    }
    for k in a.delete_config.iter().flat_map(|s| s.split(',')) {
        ops.push(AlterConfigOp::Delete(k.trim().into()));
    }
    Ok(ops)
}

/// `tidelog configs --entity-type brokers ...` on a cluster.
fn run_brokers(admin: &AdminClient, args: &ConfigsArgs) -> CliResult {
    let entities = broker_entities(admin, args)?;
    let mut out = Out::new();
    if args.alter {
        let ops = broker_ops(args)?;
        if ops.is_empty() {
            return Err(fail!("give --add-config KEY=VALUE or --delete-config KEY"));
        }
        let broker = entities[0];
        admin.alter_broker_configs(broker, &ops)?;
        return match broker {
            Some(id) => out.line(format_args!("Completed updating config for broker {id}.")),
            None => out.line(format_args!(
                "Completed updating default config for brokers in the cluster."
            )),
        };
    }
    // Any broker describes the cluster-wide default: its values whose source is it.
    let any = || -> CliResult<i32> {
        let brokers = admin.metadata()?.brokers;
        brokers
            .iter()
            .map(|b| b.id)
            .min()
            .ok_or_else(|| fail!("the cluster lists no broker"))
    };
    for broker in entities {
        let (entries, wanted) = match broker {
            Some(id) => (
                admin.describe_broker_configs(id)?,
                ConfigSource::DynamicBroker,
            ),
            None => (
                admin.describe_broker_configs(any()?)?,
                ConfigSource::DynamicDefaultBroker,
            ),
        };
        let heading = match broker {
            Some(id) => format!("Dynamic configs for broker {id} are:"),
            None => "Default configs for brokers in the cluster are:".to_string(),
        };
        out.line(format_args!("{heading}"))?;
        for e in entries.iter().filter(|e| e.source == wanted) {
            let value = e.value.as_deref().unwrap_or("null");
            let source = match wanted {
                ConfigSource::DynamicBroker => "DYNAMIC_BROKER_CONFIG",
                _ => "DYNAMIC_DEFAULT_BROKER_CONFIG",
            };
            out.line(format_args!(
                "  {}={value} sensitive={} synonyms={{{source}:{}={value}}}",
                e.name, e.sensitive, e.name
            ))?;
        }
    }
    Ok(())
}
