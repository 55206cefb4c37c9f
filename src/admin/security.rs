//! Users' SCRAM credentials and ACLs through the admin client: AlterUserScramCredentials,
//! DescribeUserScramCredentials, CreateAcls, DescribeAcls and DeleteAcls, as Kafka's
//! `Admin` sends them. Any broker answers them (a tidelog cluster node hands the change to
//! its controller and answers once it applied it).

use kafka_protocol::messages::alter_user_scram_credentials_request::{
    ScramCredentialDeletion, ScramCredentialUpsertion,
};
use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::describe_user_scram_credentials_request::UserName;
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest,
    DescribeUserScramCredentialsRequest,
};

use super::router::{Outcome, check, kstr};
use super::{AdminClient, Cluster, Each, Resource};
use crate::error::{Error, Result};
use crate::security::acl::{AclBinding, AclFilter};
use crate::security::credentials::validate_credential;
use crate::security::scram;
use crate::security::scram::ScramMechanism;

const ALTER_USER_SCRAM_CREDENTIALS_VERSION: i16 = 0;
const DESCRIBE_USER_SCRAM_CREDENTIALS_VERSION: i16 = 0;
const CREATE_ACLS_VERSION: i16 = 2;
const DESCRIBE_ACLS_VERSION: i16 = 2;
const DELETE_ACLS_VERSION: i16 = 2;

/// Bytes of the random salt of a new credential (Kafka's `ScramFormatter` uses a
/// 32-byte nonce-sized salt).
const SALT_BYTES: usize = 32;

/// A change to one user's SCRAM credential (Kafka's `UserScramCredentialAlteration`).
#[derive(Clone, PartialEq, Eq)]
pub enum ScramAlteration {
    /// Adds or replaces the user's credential for `mechanism`. The client salts the
    /// password (a random salt, `iterations` of PBKDF2) and sends the salted password,
    /// never the password.
    Upsert {
        /// The user name.
        user: String,
        /// SCRAM-SHA-256 or SCRAM-SHA-512.
        mechanism: ScramMechanism,
        /// PBKDF2 iterations, 4096 to 16384.
        iterations: u32,
        /// The password.
        password: String,
    },
    /// Removes the user's credential for `mechanism`.
    Delete {
        /// The user name.
        user: String,
        /// The mechanism whose credential goes.
        mechanism: ScramMechanism,
    },
}

impl ScramAlteration {
    /// The user it changes.
    pub fn user(&self) -> &str {
        match self {
            ScramAlteration::Upsert { user, .. } | ScramAlteration::Delete { user, .. } => user,
        }
    }
}

impl std::fmt::Debug for ScramAlteration {
    /// Never shows the password.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ScramAlteration::Upsert {
                user,
                mechanism,
                iterations,
                ..
            } => f
                .debug_struct("Upsert")
                .field("user", user)
                .field("mechanism", mechanism)
                .field("iterations", iterations)
                .finish_non_exhaustive(),
            ScramAlteration::Delete { user, mechanism } => f
                .debug_struct("Delete")
                .field("user", user)
                .field("mechanism", mechanism)
                .finish(),
        }
    }
}

fn user(name: &str) -> Resource {
    Resource::User(name.to_string())
}

/// A binding from the wire codes of a response; an unknown code is `Error::Corrupt`.
#[allow(clippy::too_many_arguments)]
fn binding_of(
    resource_type: i8,
    resource_name: &str,
    pattern_type: i8,
    principal: &str,
    host: &str,
    operation: i8,
    permission: i8,
) -> Result<AclBinding> {
    AclBinding::from_codes(
        resource_type,
        resource_name,
        pattern_type,
        principal,
        host,
        operation,
        permission,
    )
    .map_err(|why| Error::corrupt("an ACL response", 0, why))
}

impl AdminClient {
    /// Adds, replaces and removes users' SCRAM credentials (AlterUserScramCredentials);
    /// the outcome per user. A user's changes apply together or not at all.
    pub fn alter_user_scram_credentials(
        &self,
        alterations: &[ScramAlteration],
    ) -> Result<Each<String>> {
        let mut deletions = Vec::new();
        let mut upsertions = Vec::new();
        for a in alterations {
            match a {
                ScramAlteration::Upsert {
                    user,
                    mechanism,
                    iterations,
                    password,
                } => {
                    validate_credential(user, *iterations)?;
                    let salt = scram::random_bytes(SALT_BYTES);
                    let salted = mechanism.salted_password(password.as_bytes(), &salt, *iterations);
                    upsertions.push(
                        ScramCredentialUpsertion::default()
                            .with_name(kstr(user))
                            .with_mechanism(mechanism.kafka_type())
                            .with_iterations(*iterations as i32)
                            .with_salt(salt.into())
                            .with_salted_password(salted.into()),
                    );
                }
                ScramAlteration::Delete { user, mechanism } => deletions.push(
                    ScramCredentialDeletion::default()
                        .with_name(kstr(user))
                        .with_mechanism(mechanism.kafka_type()),
                ),
            }
        }
        let users: Vec<String> = alterations.iter().map(|a| a.user().to_string()).collect();
        self.router.lock().rounds(users, false, |r, pending| {
            let mine = |name: &kafka_protocol::protocol::StrBytes| {
                pending.iter().any(|p| p.as_str() == name.as_str())
            };
            let request = AlterUserScramCredentialsRequest::default()
                .with_deletions(
                    deletions
                        .iter()
                        .filter(|d| mine(&d.name))
                        .cloned()
                        .collect(),
                )
                .with_upsertions(
                    upsertions
                        .iter()
                        .filter(|u| mine(&u.name))
                        .cloned()
                        .collect(),
                );
            let response = r.call_any(&request, ALTER_USER_SCRAM_CREDENTIALS_VERSION)?;
            Ok(response
                .results
                .iter()
                .map(|res| {
                    let name = res.user.to_string();
                    let o: Outcome<()> =
                        check(|| user(&name), res.error_code, res.error_message.as_ref()).into();
                    (name, o)
                })
                .collect())
        })
    }

    /// The mechanisms and iterations of each user's credentials
    /// (DescribeUserScramCredentials): of `users`, or of every user with one when
    /// `users` is empty. A named user without credentials is RESOURCE_NOT_FOUND.
    pub fn describe_user_scram_credentials(
        &self,
        users: &[&str],
    ) -> Result<Each<String, Vec<(ScramMechanism, u32)>>> {
        let request = DescribeUserScramCredentialsRequest::default().with_users(
            (!users.is_empty()).then(|| {
                users
                    .iter()
                    .map(|u| UserName::default().with_name(kstr(*u)))
                    .collect()
            }),
        );
        let mut r = self.router.lock();
        let mut found = r.rounds(vec![Cluster], true, |r, _| {
            let response = r.call_any(&request, DESCRIBE_USER_SCRAM_CREDENTIALS_VERSION)?;
            let o: Outcome<_> = check(
                || Resource::Cluster,
                response.error_code,
                response.error_message.as_ref(),
            )
            .map(|()| response.results)
            .into();
            Ok(vec![(Cluster, o)])
        })?;
        let results = found
            .remove(&Cluster)
            .unwrap_or_else(|| Err(Error::corrupt("an admin response", 0, "no answer")))?;
        results
            .into_iter()
            .map(|res| {
                let name = res.user.to_string();
                let o = check(|| user(&name), res.error_code, res.error_message.as_ref())
                    .map_err(Error::from)
                    .and_then(|()| {
                        res.credential_infos
                            .iter()
                            .map(|c| {
                                let m = ScramMechanism::from_kafka_type(c.mechanism).ok_or_else(
                                    || {
                                        Error::corrupt(
                                            "a DescribeUserScramCredentials response",
                                            0,
                                            format!(
                                                "user {name:?} has an unknown mechanism {}",
                                                c.mechanism
                                            ),
                                        )
                                    },
                                )?;
                                Ok((m, u32::try_from(c.iterations).unwrap_or(0)))
                            })
                            .collect()
                    });
                Ok((name, o))
            })
            .collect()
    }

    /// Adds ACL bindings (CreateAcls); the outcome of each, in order.
    pub fn create_acls(&self, bindings: &[AclBinding]) -> Result<Vec<Result<()>>> {
        for b in bindings {
            b.validate()?;
        }
        let keys: Vec<usize> = (0..bindings.len()).collect();
        let mut done = self.router.lock().rounds(keys, true, |r, pending| {
            let request = CreateAclsRequest::default().with_creations(
                pending
                    .iter()
                    .map(|i| {
                        let b = &bindings[*i];
                        AclCreation::default()
                            .with_resource_type(b.resource_type.code())
                            .with_resource_name(kstr(&b.resource_name))
                            .with_resource_pattern_type(b.pattern_type.code())
                            .with_principal(kstr(&b.principal))
                            .with_host(kstr(&b.host))
                            .with_operation(b.operation.code())
                            .with_permission_type(b.permission.code())
                    })
                    .collect(),
            );
            let response = r.call_any(&request, CREATE_ACLS_VERSION)?;
            Ok(pending
                .iter()
                .zip(response.results.iter())
                .map(|(i, res)| {
                    let o: Outcome<()> = check(
                        || Resource::Acl(bindings[*i].to_string()),
                        res.error_code,
                        res.error_message.as_ref(),
                    )
                    .into();
                    (*i, o)
                })
                .collect())
        })?;
        Ok((0..bindings.len())
            .map(|i| done.remove(&i).unwrap_or(Ok(())))
            .collect())
    }

    /// The ACL bindings matching `filter` (DescribeAcls).
    pub fn describe_acls(&self, filter: &AclFilter) -> Result<Vec<AclBinding>> {
        let request = DescribeAclsRequest::default()
            .with_resource_type_filter(filter.resource_type.code())
            .with_resource_name_filter(filter.resource_name.as_ref().map(kstr))
            .with_pattern_type_filter(filter.pattern_type.code())
            .with_principal_filter(filter.principal.as_ref().map(kstr))
            .with_host_filter(filter.host.as_ref().map(kstr))
            .with_operation(filter.operation.code())
            .with_permission_type(filter.permission.code());
        let mut r = self.router.lock();
        let mut found = r.rounds(vec![Cluster], true, |r, _| {
            let response = r.call_any(&request, DESCRIBE_ACLS_VERSION)?;
            let o: Outcome<_> = check(
                || Resource::Cluster,
                response.error_code,
                response.error_message.as_ref(),
            )
            .map(|()| response.resources)
            .into();
            Ok(vec![(Cluster, o)])
        })?;
        let resources = found
            .remove(&Cluster)
            .unwrap_or_else(|| Err(Error::corrupt("an admin response", 0, "no answer")))?;
        let mut out = Vec::new();
        for res in resources {
            for a in res.acls {
                out.push(binding_of(
                    res.resource_type,
                    &res.resource_name,
                    res.pattern_type,
                    &a.principal,
                    &a.host,
                    a.operation,
                    a.permission_type,
                )?);
            }
        }
        out.sort();
        Ok(out)
    }

    /// Removes the ACL bindings matching each filter (DeleteAcls); what each filter
    /// removed, in order. Repeated after a connection failure only if nothing was sent.
    pub fn delete_acls(&self, filters: &[AclFilter]) -> Result<Vec<Result<Vec<AclBinding>>>> {
        let keys: Vec<usize> = (0..filters.len()).collect();
        let mut done = self.router.lock().rounds(keys, false, |r, pending| {
            let request = DeleteAclsRequest::default().with_filters(
                pending
                    .iter()
                    .map(|i| {
                        let f = &filters[*i];
                        DeleteAclsFilter::default()
                            .with_resource_type_filter(f.resource_type.code())
                            .with_resource_name_filter(f.resource_name.as_ref().map(kstr))
                            .with_pattern_type_filter(f.pattern_type.code())
                            .with_principal_filter(f.principal.as_ref().map(kstr))
                            .with_host_filter(f.host.as_ref().map(kstr))
                            .with_operation(f.operation.code())
                            .with_permission_type(f.permission.code())
                    })
                    .collect(),
            );
            let response = r.call_any(&request, DELETE_ACLS_VERSION)?;
            Ok(pending
                .iter()
                .zip(response.filter_results.iter())
                .map(|(i, res)| {
                    let o = check(
                        || Resource::Cluster,
                        res.error_code,
                        res.error_message.as_ref(),
                    )
                    .map_err(Error::from)
                    .and_then(|()| {
                        res.matching_acls
                            .iter()
                            .map(|m| {
                                binding_of(
                                    m.resource_type,
                                    &m.resource_name,
                                    m.pattern_type,
                                    &m.principal,
                                    &m.host,
                                    m.operation,
                                    m.permission_type,
                                )
                            })
                            .collect()
                    });
                    (*i, Outcome::Done(o))
                })
                .collect())
        })?;
        Ok((0..filters.len())
            .map(|i| done.remove(&i).unwrap_or(Ok(Vec::new())))
            .collect())
    }
}
