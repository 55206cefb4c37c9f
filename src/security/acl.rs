//! Access control lists with Kafka's model, and the authorizer that checks them.
//!
//! An ACL binding is a resource pattern (type, name, literal or prefixed) and an entry
//! (principal, host, operation, allow or deny). A request from `principal` at `host` may
//! do `operation` on a resource when, among the bindings whose pattern matches the
//! resource (a literal name equal to it or `*`, or a prefix it starts with) and whose
//! principal (or `User:*`) and host (or `*`) match:
//!
//! - no DENY binding names the operation or `All` (deny wins), and
//! - some ALLOW binding names the operation, `All`, or an operation that implies it
//!   (`Describe` is implied by `Read`, `Write`, `Delete` and `Alter`; `DescribeConfigs`
//!   by `AlterConfigs`), as in Kafka's `AclAuthorizer`.
//!
//! With no matching ALLOW the answer is no (`allow.everyone.if.no.acl.found=false`).
//! Super users (`super.users`) may do everything. The bindings are kept in the data
//! directory in `acls` (a crash-safe TLCP file; see docs/format.md), behind the
//! [`AclStore`] trait.

use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};

use std::sync::Arc;

use parking_lot::RwLock;

use crate::error::{Error, Result};
use crate::storage::codec::{Reader, Writer};

/// The name Kafka gives the cluster resource.
pub const CLUSTER_RESOURCE_NAME: &str = "kafka-cluster";

/// The file of the bindings in a single node's data directory.
pub(crate) const ACLS_FILE: &str = "acls";

pub use crate::error::{AclOperation, AclPermission, PatternType, ResourceType};

/// One ACL: who may or may not do what on which resources, from where.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AclBinding {
    /// The resource type (never `Any`).
    pub resource_type: ResourceType,
    /// The resource name (`*` with `Literal` for every resource of the type; always
    /// `kafka-cluster` for the cluster).
    pub resource_name: String,
    /// `Literal` or `Prefixed`.
    pub pattern_type: PatternType,
    /// `Type:name`, e.g. `User:alice`, or `User:*` for everyone.
    pub principal: String,
    /// The client's IP address, or `*` for any.
    pub host: String,
    /// The operation (never `Any`).
    pub operation: AclOperation,
    /// `Allow` or `Deny`.
    pub permission: AclPermission,
}

impl AclBinding {
    /// Checks that the binding is concrete (no `Any`/`Match`), its principal is
    /// `Type:name`, and a cluster binding names `kafka-cluster`. The error says which
    /// field is wrong.
    pub fn validate(&self) -> Result<()> {
        let bad = |key: &str, reason: String| {
            Err(Error::InvalidConfig {
                key: key.into(),
                reason,
            })
        };
        if matches!(self.resource_type, ResourceType::Any) {
            return bad(
                "resource type",
                "a binding needs a concrete resource type".into(),
            );
        }
        if !matches!(
            self.pattern_type,
            PatternType::Literal | PatternType::Prefixed
        ) {
            return bad(
                "pattern type",
                format!(
                    "{} is a filter; a binding is Literal or Prefixed",
                    self.pattern_type
                ),
            );
        }
        if self.resource_name.is_empty() {
            return bad("resource name", "empty".into());
        }
        if self.resource_type == ResourceType::Cluster
            && self.resource_name != CLUSTER_RESOURCE_NAME
        {
            return bad(
                "resource name",
                format!("the cluster resource is named {CLUSTER_RESOURCE_NAME:?}"),
            );
        }
        if matches!(self.operation, AclOperation::Any) {
            return bad("operation", "a binding needs a concrete operation".into());
        }
        if matches!(self.permission, AclPermission::Any) {
            return bad("permission", "a binding is Allow or Deny".into());
        }
        match self.principal.split_once(':') {
            Some((kind, name)) if !kind.is_empty() && !name.is_empty() => {}
            _ => {
                return bad(
                    "principal",
                    format!("{:?} is not Type:name (such as User:alice)", self.principal),
                );
            }
        }
        if self.host.is_empty() {
            return bad("host", "empty (use * for any host)".into());
        }
        Ok(())
    }

    /// Whether the binding's pattern covers the resource `(kind, name)`.
    fn covers(&self, kind: ResourceType, name: &str) -> bool {
        self.resource_type == kind
            && match self.pattern_type {
                PatternType::Literal => self.resource_name == name || self.resource_name == "*",
                PatternType::Prefixed => name.starts_with(&self.resource_name),
                _ => false,
            }
    }
}

impl fmt::Display for AclBinding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} from host {} may{} {} {} {:?} ({})",
            self.principal,
            match self.permission {
                AclPermission::Deny => "DENY:",
                _ => "ALLOW:",
            },
            self.host,
            if self.permission == AclPermission::Deny {
                " not"
            } else {
                ""
            },
            self.operation,
            self.resource_type,
            self.resource_name,
            self.pattern_type
        )
    }
}

/// A filter over bindings (DescribeAcls, DeleteAcls): each `None` or `Any` matches
/// everything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AclFilter {
    /// Resource type, or `Any`.
    pub resource_type: ResourceType,
    /// Resource name, or None for any.
    pub resource_name: Option<String>,
    /// `Any`, `Match` (the bindings that would apply to `resource_name`), `Literal` or
    /// `Prefixed`.
    pub pattern_type: PatternType,
    /// Principal, or None for any.
    pub principal: Option<String>,
    /// Host, or None for any.
    pub host: Option<String>,
    /// Operation, or `Any`.
    pub operation: AclOperation,
    /// Permission, or `Any`.
    pub permission: AclPermission,
}

impl AclFilter {
    /// A filter that matches every binding.
    pub fn any() -> AclFilter {
        AclFilter {
            resource_type: ResourceType::Any,
            resource_name: None,
            pattern_type: PatternType::Any,
            principal: None,
            host: None,
            operation: AclOperation::Any,
            permission: AclPermission::Any,
        }
    }

    /// Whether `b` passes the filter (Kafka's `AclBindingFilter.matches`).
    pub fn matches(&self, b: &AclBinding) -> bool {
        let kind = self.resource_type == ResourceType::Any || self.resource_type == b.resource_type;
        let pattern = match (self.pattern_type, &self.resource_name) {
            (PatternType::Any, None) => true,
            (PatternType::Any, Some(n)) => b.resource_name == *n,
            (PatternType::Match, None) => true,
            (PatternType::Match, Some(n)) => match b.pattern_type {
                PatternType::Literal => b.resource_name == *n || b.resource_name == "*",
                PatternType::Prefixed => n.starts_with(&b.resource_name),
                _ => false,
            },
            (p, name) => b.pattern_type == p && name.as_ref().is_none_or(|n| b.resource_name == *n),
        };
        kind && pattern
            && self.principal.as_ref().is_none_or(|p| b.principal == *p)
            && self.host.as_ref().is_none_or(|h| b.host == *h)
            && (self.operation == AclOperation::Any || self.operation == b.operation)
            && (self.permission == AclPermission::Any || self.permission == b.permission)
    }
}

/// Where bindings are kept: a file in a single node's data directory.
pub trait AclStore: Send + Sync + fmt::Debug {
    /// Every binding.
    fn bindings(&self) -> Vec<AclBinding>;
    /// Adds bindings (present ones are kept once); durable when it returns.
    fn add(&self, bindings: &[AclBinding]) -> Result<()>;
    /// Removes the bindings matching any of `filters`, returning what each filter
    /// removed; durable when it returns.
    fn remove(&self, filters: &[AclFilter]) -> Result<Vec<Vec<AclBinding>>>;
}

/// The bindings of a data directory, in its `acls` file.
///
/// One process at a time: the one that has the directory's broker open.
#[derive(Debug)]
pub struct FileAclStore {
    path: PathBuf,
    bindings: RwLock<BTreeSet<AclBinding>>,
}

/// Payload version of the `acls` file.
const ACLS_VERSION: u8 = 1;

impl FileAclStore {
    /// Reads `<dir>/acls` (none yet: no binding). A damaged file is `Error::Corrupt`.
    pub fn open(dir: impl AsRef<Path>) -> Result<FileAclStore> {
        let path = dir.as_ref().join(ACLS_FILE);
        let bindings = match crate::storage::read_checkpoint(&path)? {
            None => BTreeSet::new(),
            Some(payload) => decode_bindings(&payload, &path.display().to_string())?,
        };
        Ok(FileAclStore {
            path,
            bindings: RwLock::new(bindings),
        })
    }

    fn persist(&self, all: &BTreeSet<AclBinding>) -> Result<()> {
        crate::storage::write_checkpoint(&self.path, &encode_bindings(all))
    }
}

impl AclStore for FileAclStore {
    fn bindings(&self) -> Vec<AclBinding> {
        self.bindings.read().iter().cloned().collect()
    }

    fn add(&self, new: &[AclBinding]) -> Result<()> {
        let mut all = self.bindings.write();
        let mut next = all.clone();
        next.extend(new.iter().cloned());
        if next.len() != all.len() {
            self.persist(&next)?;
            *all = next;
        }
        Ok(())
    }

    fn remove(&self, filters: &[AclFilter]) -> Result<Vec<Vec<AclBinding>>> {
        let mut all = self.bindings.write();
        let mut next = all.clone();
        let removed = remove_matching(&mut next, filters);
        if next.len() != all.len() {
            self.persist(&next)?;
            *all = next;
        }
        Ok(removed)
    }
}

/// Removes from `all` the bindings matching any of `filters`; returns what each filter
/// matched (a binding matched by two filters is listed under both).
pub(crate) fn remove_matching(
    all: &mut BTreeSet<AclBinding>,
    filters: &[AclFilter],
) -> Vec<Vec<AclBinding>> {
    let removed = filters
        .iter()
        .map(|f| all.iter().filter(|b| f.matches(b)).cloned().collect())
        .collect();
    all.retain(|b| !filters.iter().any(|f| f.matches(b)));
    removed
}

/// The payload of the `acls` file: version (`u8`, 1), count (`u32`), then each binding
/// as [`put_binding`] writes it.
pub(crate) fn encode_bindings<'a>(all: impl IntoIterator<Item = &'a AclBinding>) -> Vec<u8> {
    let all: Vec<&AclBinding> = all.into_iter().collect();
    let mut w = Writer::new();
    w.u8(ACLS_VERSION);
    w.u32(all.len() as u32);
    for b in all {
        put_binding(&mut w, b);
    }
    w.into_bytes()
}

/// Reads what [`encode_bindings`] wrote; `location` names the file in errors.
pub(crate) fn decode_bindings(payload: &[u8], location: &str) -> Result<BTreeSet<AclBinding>> {
    let mut r = Reader::new(payload, location);
    let version = r.u8()?;
    if version != ACLS_VERSION {
        return Err(r.error(format!(
            "ACL payload version {version}; this build reads version {ACLS_VERSION}"
        )));
    }
    let n = r.count(14)?;
    let mut out = BTreeSet::new();
    for _ in 0..n {
        out.insert(get_binding(&mut r)?);
    }
    r.finish()?;
    Ok(out)
}

/// Writes one binding: resource type (`i8`), name (string), pattern type (`i8`),
/// principal, host (strings), operation (`i8`), permission (`i8`). Strings are a `u32`
/// length and UTF-8.
pub(crate) fn put_binding(w: &mut Writer, b: &AclBinding) {
    w.u8(b.resource_type.code() as u8);
    w.str(&b.resource_name);
    w.u8(b.pattern_type.code() as u8);
    w.str(&b.principal);
    w.str(&b.host);
    w.u8(b.operation.code() as u8);
    w.u8(b.permission.code() as u8);
}

/// Reads what [`put_binding`] wrote; an unknown code or an invalid binding is an error.
pub(crate) fn get_binding(r: &mut Reader<'_>) -> Result<AclBinding> {
    let rt = r.u8()? as i8;
    let resource_name = r.str()?;
    let pt = r.u8()? as i8;
    let principal = r.str()?;
    let host = r.str()?;
    let op = r.u8()? as i8;
    let perm = r.u8()? as i8;
    let binding = AclBinding::from_codes(rt, &resource_name, pt, &principal, &host, op, perm)
        .map_err(|why| r.error(why))?;
    binding
        .validate()
        .map_err(|e| r.error(format!("an invalid binding: {e}")))?;
    Ok(binding)
}

impl AclBinding {
    /// A binding from Kafka's wire codes; the error says which codes are unknown.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn from_codes(
        resource_type: i8,
        resource_name: &str,
        pattern_type: i8,
        principal: &str,
        host: &str,
        operation: i8,
        permission: i8,
    ) -> std::result::Result<AclBinding, String> {
        match (
            ResourceType::from_code(resource_type),
            PatternType::from_code(pattern_type),
            AclOperation::from_code(operation),
            AclPermission::from_code(permission),
        ) {
            (Some(resource_type), Some(pattern_type), Some(operation), Some(permission)) => {
                Ok(AclBinding {
                    resource_type,
                    resource_name: resource_name.to_string(),
                    pattern_type,
                    principal: principal.to_string(),
                    host: host.to_string(),
                    operation,
                    permission,
                })
            }
            _ => Err(format!(
                "a binding has an unknown code (resource type {resource_type}, pattern type \
                 {pattern_type}, operation {operation}, permission {permission})"
            )),
        }
    }
}

/// Writes one filter: resource type (`i8`), name (`bool` present, then a string),
/// pattern type (`i8`), principal and host (each as the name), operation (`i8`),
/// permission (`i8`).
pub(crate) fn put_filter(w: &mut Writer, f: &AclFilter) {
    let opt = |w: &mut Writer, v: &Option<String>| match v {
        None => w.bool(false),
        Some(v) => {
            w.bool(true);
            w.str(v);
        }
    };
    w.u8(f.resource_type.code() as u8);
    opt(w, &f.resource_name);
    w.u8(f.pattern_type.code() as u8);
    opt(w, &f.principal);
    opt(w, &f.host);
    w.u8(f.operation.code() as u8);
    w.u8(f.permission.code() as u8);
}

/// Reads what [`put_filter`] wrote; an unknown code is an error.
pub(crate) fn get_filter(r: &mut Reader<'_>) -> Result<AclFilter> {
    let opt = |r: &mut Reader<'_>| -> Result<Option<String>> {
        Ok(if r.bool()? { Some(r.str()?) } else { None })
    };
    let rt = r.u8()? as i8;
    let resource_name = opt(r)?;
    let pt = r.u8()? as i8;
    let principal = opt(r)?;
    let host = opt(r)?;
    let op = r.u8()? as i8;
    let perm = r.u8()? as i8;
    match (
        ResourceType::from_code(rt),
        PatternType::from_code(pt),
        AclOperation::from_code(op),
        AclPermission::from_code(perm),
    ) {
        (Some(resource_type), Some(pattern_type), Some(operation), Some(permission)) => {
            Ok(AclFilter {
                resource_type,
                resource_name,
                pattern_type,
                principal,
                host,
                operation,
                permission,
            })
        }
        _ => Err(r.error(format!(
            "a filter has an unknown code (resource type {rt}, pattern type {pt}, \
             operation {op}, permission {perm})"
        ))),
    }
}

/// Decides whether a principal may do an operation, from the store's bindings.
#[derive(Debug, Clone)]
pub(crate) struct Authorizer {
    store: Arc<dyn AclStore>,
    super_users: Arc<BTreeSet<String>>,
}

impl Authorizer {
    /// An authorizer over `store`, with `super_users` allowed everything.
    pub(crate) fn new(store: Arc<dyn AclStore>, super_users: BTreeSet<String>) -> Authorizer {
        Authorizer {
            store,
            super_users: Arc::new(super_users),
        }
    }

    /// The store of the bindings.
    pub(crate) fn store(&self) -> &Arc<dyn AclStore> {
        &self.store
    }

    /// Whether `principal` at `host` may do `op` on the resource `(kind, name)`.
    pub(crate) fn authorize(
        &self,
        principal: &str,
        host: &str,
        op: AclOperation,
        kind: ResourceType,
        name: &str,
    ) -> bool {
        if self.super_users.contains(principal) {
            return true;
        }
        let bindings = self.store.bindings();
        let applies = |b: &&AclBinding| {
            b.covers(kind, name)
                && (b.principal == principal || b.principal == "User:*")
                && (b.host == host || b.host == "*")
        };
        let relevant: Vec<&AclBinding> = bindings.iter().filter(applies).collect();
        let denied = relevant.iter().any(|b| {
            b.permission == AclPermission::Deny
                && (b.operation == op || b.operation == AclOperation::All)
        });
        if denied {
            return false;
        }
        let implied: &[AclOperation] = match op {
            AclOperation::Describe => &[
                AclOperation::Describe,
                AclOperation::Read,
                AclOperation::Write,
                AclOperation::Delete,
                AclOperation::Alter,
            ],
            AclOperation::DescribeConfigs => {
                &[AclOperation::DescribeConfigs, AclOperation::AlterConfigs]
            }
            _ => std::slice::from_ref(&op),
        };
        relevant.iter().any(|b| {
            b.permission == AclPermission::Allow
                && (b.operation == AclOperation::All || implied.contains(&b.operation))
        })
    }
}

impl Authorizer {
    /// Whether `principal` at `host` may do `op` on at least one resource of type `kind`
    /// (Kafka's `authorizeByResourceType`): some ALLOW binding for it (or `All`) whose
    /// pattern is not also denied to the principal, and no DENY on every resource of the
    /// type (literal `*`).
    pub(crate) fn may_do_on_some(
        &self,
        principal: &str,
        host: &str,
        op: AclOperation,
        kind: ResourceType,
    ) -> bool {
        if self.super_users.contains(principal) {
            return true;
        }
        let bindings = self.store.bindings();
        let mine = |b: &&AclBinding| {
            b.resource_type == kind
                && (b.principal == principal || b.principal == "User:*")
                && (b.host == host || b.host == "*")
                && (b.operation == op || b.operation == AclOperation::All)
        };
        let denied = |pattern: &AclBinding| {
            bindings.iter().filter(mine).any(|d| {
                d.permission == AclPermission::Deny
                    && ((d.pattern_type == PatternType::Literal && d.resource_name == "*")
                        || (d.pattern_type == pattern.pattern_type
                            && d.resource_name == pattern.resource_name))
            })
        };
        bindings
            .iter()
            .filter(mine)
            .any(|b| b.permission == AclPermission::Allow && !denied(b))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bind(
        kind: ResourceType,
        name: &str,
        pattern: PatternType,
        principal: &str,
        op: AclOperation,
        perm: AclPermission,
    ) -> AclBinding {
        AclBinding {
            resource_type: kind,
            resource_name: name.into(),
            pattern_type: pattern,
            principal: principal.into(),
            host: "*".into(),
            operation: op,
            permission: perm,
        }
    }

    fn authorizer(bindings: Vec<AclBinding>, supers: &[&str]) -> (tempfile::TempDir, Authorizer) {
        let dir = tempfile::tempdir().unwrap();
        let store = FileAclStore::open(dir.path()).unwrap();
        store.add(&bindings).unwrap();
        let a = Authorizer::new(
            Arc::new(store),
            supers.iter().map(|s| s.to_string()).collect(),
        );
        (dir, a)
    }

    use AclOperation as Op;
    use AclPermission as Perm;
    use PatternType as Pat;
    use ResourceType as Res;

    #[test]
    fn nothing_is_allowed_without_an_acl_but_super_users_are() {
        let (_d, a) = authorizer(vec![], &["User:admin"]);
        assert!(!a.authorize("User:alice", "1.2.3.4", Op::Read, Res::Topic, "t"));
        assert!(a.authorize(
            "User:admin",
            "1.2.3.4",
            Op::Alter,
            Res::Cluster,
            CLUSTER_RESOURCE_NAME
        ));
    }

    #[test]
    fn deny_beats_allow_and_all() {
        let (_d, a) = authorizer(
            vec![
                bind(
                    Res::Topic,
                    "*",
                    Pat::Literal,
                    "User:*",
                    Op::All,
                    Perm::Allow,
                ),
                bind(
                    Res::Topic,
                    "secret",
                    Pat::Literal,
                    "User:alice",
                    Op::Read,
                    Perm::Deny,
                ),
            ],
            &[],
        );
        assert!(a.authorize("User:alice", "h", Op::Read, Res::Topic, "public"));
        assert!(!a.authorize("User:alice", "h", Op::Read, Res::Topic, "secret"));
        assert!(a.authorize("User:bob", "h", Op::Read, Res::Topic, "secret"));
        // A deny of Read does not deny Describe.
        assert!(a.authorize("User:alice", "h", Op::Describe, Res::Topic, "secret"));
    }

    #[test]
    fn prefixed_bindings_cover_matching_names_only() {
        let (_d, a) = authorizer(
            vec![bind(
                Res::Topic,
                "app.",
                Pat::Prefixed,
                "User:alice",
                Op::Write,
                Perm::Allow,
            )],
            &[],
        );
        assert!(a.authorize("User:alice", "h", Op::Write, Res::Topic, "app.events"));
        assert!(!a.authorize("User:alice", "h", Op::Write, Res::Topic, "app"));
        assert!(!a.authorize("User:alice", "h", Op::Write, Res::Topic, "other.app.events"));
        assert!(!a.authorize("User:alice", "h", Op::Write, Res::Group, "app.events"));
    }

    #[test]
    fn implied_operations() {
        let (_d, a) = authorizer(
            vec![
                bind(
                    Res::Topic,
                    "t",
                    Pat::Literal,
                    "User:r",
                    Op::Read,
                    Perm::Allow,
                ),
                bind(
                    Res::Topic,
                    "t",
                    Pat::Literal,
                    "User:c",
                    Op::AlterConfigs,
                    Perm::Allow,
                ),
            ],
            &[],
        );
        assert!(a.authorize("User:r", "h", Op::Describe, Res::Topic, "t"));
        assert!(!a.authorize("User:r", "h", Op::Write, Res::Topic, "t"));
        assert!(a.authorize("User:c", "h", Op::DescribeConfigs, Res::Topic, "t"));
        assert!(!a.authorize("User:c", "h", Op::Describe, Res::Topic, "t"));
    }

    #[test]
    fn hosts_match_exactly_or_by_wildcard() {
        let mut b = bind(
            Res::Cluster,
            CLUSTER_RESOURCE_NAME,
            Pat::Literal,
            "User:ANONYMOUS",
            Op::ClusterAction,
            Perm::Allow,
        );
        b.host = "10.0.0.2".into();
        let (_d, a) = authorizer(vec![b], &[]);
        assert!(a.authorize(
            "User:ANONYMOUS",
            "10.0.0.2",
            Op::ClusterAction,
            Res::Cluster,
            CLUSTER_RESOURCE_NAME
        ));
        assert!(!a.authorize(
            "User:ANONYMOUS",
            "10.0.0.3",
            Op::ClusterAction,
            Res::Cluster,
            CLUSTER_RESOURCE_NAME
        ));
    }

    #[test]
    fn filters_as_kafka_matches_them() {
        let lit = bind(
            Res::Topic,
            "app.x",
            Pat::Literal,
            "User:a",
            Op::Read,
            Perm::Allow,
        );
        let pre = bind(
            Res::Topic,
            "app.",
            Pat::Prefixed,
            "User:a",
            Op::Read,
            Perm::Allow,
        );
        let wild = bind(
            Res::Topic,
            "*",
            Pat::Literal,
            "User:a",
            Op::Read,
            Perm::Allow,
        );
        let mut f = AclFilter::any();
        assert!(f.matches(&lit) && f.matches(&pre) && f.matches(&wild));
        f.resource_name = Some("app.x".into());
        f.pattern_type = Pat::Match;
        assert!(f.matches(&lit) && f.matches(&pre) && f.matches(&wild));
        f.pattern_type = Pat::Literal;
        assert!(f.matches(&lit) && !f.matches(&pre) && !f.matches(&wild));
        f.pattern_type = Pat::Any;
        assert!(f.matches(&lit) && !f.matches(&pre));
        f.resource_name = None;
        f.pattern_type = Pat::Prefixed;
        assert!(!f.matches(&lit) && f.matches(&pre));
        f.principal = Some("User:b".into());
        assert!(!f.matches(&pre));
    }

    #[test]
    fn the_store_survives_a_reopen_and_removes_by_filter() {
        let dir = tempfile::tempdir().unwrap();
        let a = bind(
            Res::Topic,
            "t",
            Pat::Literal,
            "User:a",
            Op::Read,
            Perm::Allow,
        );
        let b = bind(
            Res::Group,
            "g",
            Pat::Prefixed,
            "User:b",
            Op::Read,
            Perm::Deny,
        );
        {
            let s = FileAclStore::open(dir.path()).unwrap();
            s.add(&[a.clone(), b.clone(), a.clone()]).unwrap();
        }
        let s = FileAclStore::open(dir.path()).unwrap();
        assert_eq!(s.bindings().len(), 2);
        let mut f = AclFilter::any();
        f.resource_type = Res::Group;
        assert_eq!(s.remove(&[f]).unwrap(), vec![vec![b]]);
        drop(s);
        assert_eq!(FileAclStore::open(dir.path()).unwrap().bindings(), vec![a]);
    }

    #[test]
    fn a_damaged_file_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let s = FileAclStore::open(dir.path()).unwrap();
        s.add(&[bind(
            Res::Topic,
            "t",
            Pat::Literal,
            "User:a",
            Op::Read,
            Perm::Allow,
        )])
        .unwrap();
        let path = dir.path().join(ACLS_FILE);
        let mut bytes = std::fs::read(&path).unwrap();
        let n = bytes.len();
        bytes[n - 6] ^= 0xff;
        std::fs::write(&path, bytes).unwrap();
        let err = FileAclStore::open(dir.path()).unwrap_err();
        assert!(matches!(err, Error::Corrupt { .. }), "{err}");
        // A payload whose codes are unknown is refused, not skipped.
        let mut bad = encode_bindings(&[bind(
            Res::Topic,
            "t",
            Pat::Literal,
            "User:a",
            Op::Read,
            Perm::Allow,
        )]);
        let at = bad.len() - 1;
        bad[at] = 9;
        assert!(decode_bindings(&bad, "test").is_err());
        for cut in 0..bad.len() {
            assert!(decode_bindings(&bad[..cut], "test").is_err());
        }
    }

    #[test]
    fn validation_and_names() {
        let mut b = bind(
            Res::Cluster,
            "other",
            Pat::Literal,
            "User:a",
            Op::Alter,
            Perm::Allow,
        );
        assert!(b.validate().is_err());
        b.resource_name = CLUSTER_RESOURCE_NAME.into();
        assert!(b.validate().is_ok());
        b.principal = "alice".into();
        assert!(b.validate().is_err());
        assert_eq!(
            "idempotent-write".parse::<Op>().unwrap(),
            Op::IdempotentWrite
        );
        assert_eq!(
            "TRANSACTIONAL_ID".parse::<Res>().unwrap(),
            Res::TransactionalId
        );
        assert!("Fly".parse::<Op>().is_err());
        assert_eq!(Op::from_code(12), Some(Op::IdempotentWrite));
        assert_eq!(Op::from_code(0), None);
    }
}
