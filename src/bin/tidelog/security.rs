//! `tidelog users add|delete|list` (as `kafka-configs --entity-type users`) and
//! `tidelog acls add|list|remove` (as `kafka-acls`), on a single node's data directory
//! or, with `--bootstrap`, on a running node or cluster (AlterUserScramCredentials,
//! DescribeUserScramCredentials, CreateAcls, DescribeAcls, DeleteAcls through
//! `tidelog::admin::AdminClient`).
//!
//! On a data directory both open the broker first, so they hold the directory's lock: a
//! running `tidelog serve` keeps its own copy of the users and ACLs and must be stopped
//! (or changed with `--bootstrap`). A cluster node's directory is refused: a cluster
//! keeps its users and ACLs in its metadata log. Passwords are read from standard input
//! unless given with `--password`, and only salted keys are written (over the wire, the
//! salted password).

use std::collections::{BTreeMap, BTreeSet};
use std::io::BufRead;
use std::path::Path;

use tidelog::admin::{AdminClient, ScramAlteration};

use tidelog::security::{
    AclBinding, AclFilter, AclOperation, AclPermission, AclStore, CLUSTER_RESOURCE_NAME,
    CredentialChange, CredentialStore, FileAclStore, FileCredentialStore, PatternType,
    ResourceType, ScramCredential, ScramMechanism, validate_credential,
};

use crate::cli::{AclArgs, AclsArgs, AclsCmd, UsersArgs, UsersCmd};
use crate::common::{admin_client, close_broker, counted, data_dir, only, open_broker};
use crate::out::Out;
use crate::{CliResult, fail};

fn mechanisms(names: &[String]) -> CliResult<Vec<ScramMechanism>> {
    if names.is_empty() {
        return Ok(ScramMechanism::ALL.to_vec());
    }
    names
        .iter()
        .map(|n| {
            ScramMechanism::from_name(&n.to_ascii_uppercase())
                .ok_or_else(|| fail!("--mechanism {n:?}: SCRAM-SHA-256 or SCRAM-SHA-512"))
        })
        .collect()
}

/// A user with its mechanisms and iterations.
type UserListing = (String, Vec<(ScramMechanism, u32)>);

/// Where `tidelog users` acts: a data directory's `users` file, or a running node or
/// cluster (`--bootstrap`).
trait UserTarget {
    /// Every user with its mechanisms and iterations, sorted by name.
    fn list(&self) -> CliResult<Vec<UserListing>>;
    /// Adds or replaces `user`'s credential for each mechanism.
    fn upsert(
        &self,
        user: &str,
        mechanisms: &[ScramMechanism],
        password: &str,
        iterations: u32,
    ) -> CliResult;
    /// Removes `user`'s credentials for `mechanisms`.
    fn delete(&self, user: &str, mechanisms: &[ScramMechanism]) -> CliResult;
}

impl UserTarget for FileCredentialStore {
    fn list(&self) -> CliResult<Vec<UserListing>> {
        Ok(self.users())
    }

    fn upsert(
        &self,
        user: &str,
        mechanisms: &[ScramMechanism],
        password: &str,
        iterations: u32,
    ) -> CliResult {
        let changes: Vec<_> = mechanisms
            .iter()
            .map(|m| CredentialChange::Upsert {
                user: user.to_string(),
                credential: ScramCredential::new(*m, password, iterations),
            })
            .collect();
        Ok(self.apply(&changes)?)
    }

    fn delete(&self, user: &str, mechanisms: &[ScramMechanism]) -> CliResult {
        let changes: Vec<_> = mechanisms
            .iter()
            .map(|m| CredentialChange::Delete {
                user: user.to_string(),
                mechanism: *m,
            })
            .collect();
        Ok(self.apply(&changes)?)
    }
}

impl UserTarget for AdminClient {
    fn list(&self) -> CliResult<Vec<UserListing>> {
        self.describe_user_scram_credentials(&[])?
            .into_iter()
            .map(|(user, creds)| Ok((user, creds?)))
            .collect()
    }

    fn upsert(
        &self,
        user: &str,
        mechanisms: &[ScramMechanism],
        password: &str,
        iterations: u32,
    ) -> CliResult {
        let changes: Vec<_> = mechanisms
            .iter()
            .map(|m| ScramAlteration::Upsert {
                user: user.to_string(),
                mechanism: *m,
                iterations,
                password: password.to_string(),
            })
            .collect();
        Ok(only(self.alter_user_scram_credentials(&changes)?, user)?)
    }

    fn delete(&self, user: &str, mechanisms: &[ScramMechanism]) -> CliResult {
        let changes: Vec<_> = mechanisms
            .iter()
            .map(|m| ScramAlteration::Delete {
                user: user.to_string(),
                mechanism: *m,
            })
            .collect();
        Ok(only(self.alter_user_scram_credentials(&changes)?, user)?)
    }
}

/// Refuses a cluster node's data directory: its users and ACLs are in the cluster's
/// metadata, reached with `--bootstrap`.
pub(crate) fn refuse_cluster_node(data: &Path, what: &str) -> CliResult {
    if data.join(CLUSTER_STATE).exists() {
        return Err(fail!(
            "{} is a cluster node's data directory: the cluster keeps its {what} in its metadata log; give --bootstrap HOST:PORT of a running node instead",
            data.display()
        ));
    }
    Ok(())
}

/// The file that makes a data directory a cluster node's (`__cluster_metadata-0/raft-state`).
const CLUSTER_STATE: &str = "__cluster_metadata-0/raft-state";

/// Runs `tidelog users ...`.
pub(crate) fn users(given: Option<&Path>, args: &UsersArgs) -> CliResult {
    if let Some(bootstrap) = &args.target.bootstrap {
        let admin = admin_client(bootstrap, &args.target, given)?;
        return users_on(&admin, &args.cmd);
    }
    let data = data_dir(given);
    refuse_cluster_node(data, "users")?;
    let broker = open_broker(data, matches!(args.cmd, UsersCmd::Add { .. }))?;
    let store = FileCredentialStore::open(broker.dir())?;
    users_on(&store, &args.cmd)?;
    close_broker(broker)
}

fn users_on(target: &dyn UserTarget, cmd: &UsersCmd) -> CliResult {
    let mut out = Out::new();
    match cmd {
        UsersCmd::Add {
            name,
            password,
            mechanism,
            iterations,
        } => {
            validate_credential(name, *iterations)?;
            let password = match password {
                Some(p) => p.clone(),
                None => {
                    let mut line = String::new();
                    std::io::stdin()
                        .lock()
                        .read_line(&mut line)
                        .map_err(|e| fail!("cannot read the password from standard input: {e}"))?;
                    line.trim_end_matches(['\n', '\r']).to_string()
                }
            };
            if password.is_empty() {
                return Err(fail!(
                    "an empty password: give --password or one line on standard input"
                ));
            }
            let mechanisms = mechanisms(mechanism)?;
            target.upsert(name, &mechanisms, &password, *iterations)?;
            let names: Vec<_> = mechanisms.iter().map(|m| m.name()).collect();
            out.line(format!(
                "user {name}: {} credentials with {iterations} iterations",
                names.join(", ")
            ))?;
        }
        UsersCmd::Delete { name, mechanism } => {
            let existing: Vec<ScramMechanism> = target
                .list()?
                .into_iter()
                .filter(|(u, _)| u == name)
                .flat_map(|(_, creds)| creds.into_iter().map(|(m, _)| m))
                .collect();
            let had: Vec<ScramMechanism> = mechanisms(mechanism)?
                .into_iter()
                .filter(|m| existing.contains(m))
                .collect();
            if had.is_empty() {
                return Err(fail!("user {name:?} has no such credential"));
            }
            target.delete(name, &had)?;
            let names: Vec<_> = had.iter().map(|m| m.name()).collect();
            out.line(format!("user {name}: {} deleted", names.join(", ")))?;
        }
        UsersCmd::List => {
            for (user, creds) in target.list()? {
                let creds: Vec<String> = creds
                    .iter()
                    .map(|(m, i)| format!("{m}=iterations={i}"))
                    .collect();
                out.line(format!("{user} {}", creds.join(",")))?;
            }
        }
    }
    out.flush()?;
    Ok(())
}

/// The resource named by the options, if one is.
fn resource(args: &AclArgs) -> CliResult<Option<(ResourceType, String)>> {
    let mut given = Vec::new();
    if let Some(t) = &args.topic {
        given.push((ResourceType::Topic, t.clone()));
    }
    if let Some(g) = &args.group {
        given.push((ResourceType::Group, g.clone()));
    }
    if args.cluster {
        given.push((ResourceType::Cluster, CLUSTER_RESOURCE_NAME.to_string()));
    }
    if let Some(t) = &args.transactional_id {
        given.push((ResourceType::TransactionalId, t.clone()));
    }
    match given.len() {
        0 => Ok(None),
        1 => Ok(given.pop()),
        _ => Err(fail!(
            "give one resource: --topic, --group, --cluster or --transactional-id"
        )),
    }
}

fn parse<T: std::str::FromStr<Err = tidelog::Error>>(s: &str, flag: &str) -> CliResult<T> {
    s.parse().map_err(|e| fail!("{flag} {s:?}: {e}"))
}

/// The (principal, host, permission) entries given.
fn entries(args: &AclArgs) -> Vec<(String, String, AclPermission)> {
    let allow_host = args.allow_host.clone().unwrap_or_else(|| "*".into());
    let deny_host = args.deny_host.clone().unwrap_or_else(|| "*".into());
    args.allow_principal
        .iter()
        .map(|p| (p.clone(), allow_host.clone(), AclPermission::Allow))
        .chain(
            args.deny_principal
                .iter()
                .map(|p| (p.clone(), deny_host.clone(), AclPermission::Deny)),
        )
        .collect()
}

/// The filters of `list` and `remove`: one per (entry, operation), or one per
/// resource when no principal or operation is given.
fn filters(args: &AclArgs) -> CliResult<Vec<AclFilter>> {
    let pattern = match &args.resource_pattern_type {
        Some(p) => parse(p, "--resource-pattern-type")?,
        None => PatternType::Any,
    };
    let (kind, name) = match resource(args)? {
        Some((k, n)) => (k, Some(n)),
        None => (ResourceType::Any, None),
    };
    let base = AclFilter {
        resource_type: kind,
        resource_name: name,
        pattern_type: pattern,
        ..AclFilter::any()
    };
    let ops: Vec<AclOperation> = args
        .operation
        .iter()
        .map(|o| parse(o, "--operation"))
        .collect::<CliResult<_>>()?;
    let entries = entries(args);
    let mut out = Vec::new();
    let entry_filters: Vec<AclFilter> = if entries.is_empty() {
        vec![base]
    } else {
        entries
            .into_iter()
            .map(|(principal, host, permission)| AclFilter {
                principal: Some(principal),
                host: (host != "*" || args.allow_host.is_some() || args.deny_host.is_some())
                    .then_some(host),
                permission,
                ..base.clone()
            })
            .collect()
    };
    for f in entry_filters {
        if ops.is_empty() {
            out.push(f);
        } else {
            out.extend(ops.iter().map(|op| AclFilter {
                operation: *op,
                ..f.clone()
            }));
        }
    }
    Ok(out)
}

/// Prints bindings grouped by resource, as kafka-acls does.
fn print(out: &mut Out, bindings: &[AclBinding]) -> CliResult {
    let mut by_resource: BTreeMap<(ResourceType, String, PatternType), Vec<&AclBinding>> =
        BTreeMap::new();
    for b in bindings {
        by_resource
            .entry((b.resource_type, b.resource_name.clone(), b.pattern_type))
            .or_default()
            .push(b);
    }
    for ((kind, name, pattern), entries) in by_resource {
        out.line(format!(
            "Current ACLs for resource `ResourcePattern(resourceType={}, name={name}, patternType={})`:",
            kind.name().to_ascii_uppercase(),
            pattern.name().to_ascii_uppercase()
        ))?;
        for b in entries {
            out.line(format!(
                " \t(principal={}, host={}, operation={}, permissionType={})",
                b.principal,
                b.host,
                b.operation.name().to_ascii_uppercase(),
                b.permission.name().to_ascii_uppercase()
            ))?;
        }
        out.line("")?;
    }
    Ok(())
}

/// Where `tidelog acls` acts: a data directory's `acls` file, or a running node or
/// cluster (`--bootstrap`).
trait AclTarget {
    /// The bindings matching any of `filters`.
    fn list(&self, filters: &[AclFilter]) -> CliResult<Vec<AclBinding>>;
    /// Adds `bindings`.
    fn add(&self, bindings: &[AclBinding]) -> CliResult;
    /// Removes the bindings matching any of `filters`; what was removed.
    fn remove(&self, filters: &[AclFilter]) -> CliResult<Vec<AclBinding>>;
}

impl AclTarget for FileAclStore {
    fn list(&self, filters: &[AclFilter]) -> CliResult<Vec<AclBinding>> {
        Ok(self
            .bindings()
            .into_iter()
            .filter(|b| filters.iter().any(|f| f.matches(b)))
            .collect())
    }

    fn add(&self, bindings: &[AclBinding]) -> CliResult {
        Ok(AclStore::add(self, bindings)?)
    }

    fn remove(&self, filters: &[AclFilter]) -> CliResult<Vec<AclBinding>> {
        Ok(AclStore::remove(self, filters)?
            .into_iter()
            .flatten()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect())
    }
}

impl AclTarget for AdminClient {
    fn list(&self, filters: &[AclFilter]) -> CliResult<Vec<AclBinding>> {
        let mut found = BTreeSet::new();
        for f in filters {
            found.extend(self.describe_acls(f)?);
        }
        Ok(found.into_iter().collect())
    }

    fn add(&self, bindings: &[AclBinding]) -> CliResult {
        for r in self.create_acls(bindings)? {
            r?;
        }
        Ok(())
    }

    fn remove(&self, filters: &[AclFilter]) -> CliResult<Vec<AclBinding>> {
        let mut removed = BTreeSet::new();
        for r in self.delete_acls(filters)? {
            removed.extend(r?);
        }
        Ok(removed.into_iter().collect())
    }
}

/// Runs `tidelog acls ...`.
pub(crate) fn acls(given: Option<&Path>, args: &AclsArgs) -> CliResult {
    if let Some(bootstrap) = &args.target.bootstrap {
        let admin = admin_client(bootstrap, &args.target, given)?;
        return acls_on(&admin, &args.cmd);
    }
    let data = data_dir(given);
    refuse_cluster_node(data, "ACLs")?;
    let broker = open_broker(data, matches!(args.cmd, AclsCmd::Add(_)))?;
    let store = FileAclStore::open(broker.dir())?;
    acls_on(&store, &args.cmd)?;
    close_broker(broker)
}

fn acls_on(target: &dyn AclTarget, cmd: &AclsCmd) -> CliResult {
    let mut out = Out::new();
    match cmd {
        AclsCmd::Add(args) => {
            let Some((kind, name)) = resource(args)? else {
                return Err(fail!(
                    "give a resource: --topic, --group, --cluster or --transactional-id"
                ));
            };
            let pattern: PatternType = match &args.resource_pattern_type {
                Some(p) => parse(p, "--resource-pattern-type")?,
                None => PatternType::Literal,
            };
            let entries = entries(args);
            if entries.is_empty() {
                return Err(fail!("give --allow-principal or --deny-principal"));
            }
            if args.operation.is_empty() {
                return Err(fail!("give --operation"));
            }
            let mut bindings = Vec::new();
            for (principal, host, permission) in entries {
                for op in &args.operation {
                    let binding = AclBinding {
                        resource_type: kind,
                        resource_name: name.clone(),
                        pattern_type: pattern,
                        principal: principal.clone(),
                        host: host.clone(),
                        operation: parse(op, "--operation")?,
                        permission,
                    };
                    binding.validate()?;
                    bindings.push(binding);
                }
            }
            target.add(&bindings)?;
            out.line(format!(
                "added {}",
                counted(bindings.len() as u64, "ACL", "ACLs")
            ))?;
            print(&mut out, &bindings)?;
        }
        AclsCmd::List(args) => {
            let found = target.list(&filters(args)?)?;
            print(&mut out, &found)?;
        }
        AclsCmd::Remove(args) => {
            if resource(args)?.is_none()
                && args.allow_principal.is_empty()
                && args.deny_principal.is_empty()
            {
                return Err(fail!(
                    "give a resource or a principal of the ACLs to remove (every ACL would go)"
                ));
            }
            let removed = target.remove(&filters(args)?)?;
            out.line(format!(
                "removed {}",
                counted(removed.len() as u64, "ACL", "ACLs")
            ))?;
            print(&mut out, &removed)?;
        }
    }
    out.flush()?;
    Ok(())
}
