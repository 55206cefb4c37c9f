//! AlterUserScramCredentials (key 51), version 0: adds, replaces and deletes users' SCRAM
//! credentials. The client sends the salt and `SaltedPassword` (never the password); the
//! server keeps `StoredKey` and `ServerKey`.
//!
//! Needs Alter on the cluster (CLUSTER_AUTHORIZATION_FAILED for every user otherwise).
//! Checked per user, as Kafka does: a (user, mechanism) pair named twice is
//! DUPLICATE_RESOURCE, an empty name, an empty salt or password or iterations outside
//! 4096-16384 UNACCEPTABLE_CREDENTIAL, an unknown mechanism UNSUPPORTED_SASL_MECHANISM, a
//! deletion of a credential that does not exist RESOURCE_NOT_FOUND. A user with any
//! refused alteration gets none applied; the others are stored together, durably,
//! before the answer. One result per user.

use std::collections::{BTreeMap, HashSet};

use kafka_protocol::ResponseError;
use kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse,
};

use super::{Ctx, Fatal, Reply, Request, error_code, kstr};
use crate::security::acl::AclOperation;
use crate::security::credentials::{CredentialChange, validate_credential};
use crate::security::scram::{ScramCredential, ScramMechanism};

type Refusal = (i16, String);

pub(super) fn handle(ctx: &Ctx<'_>, req: &mut Request) -> Result<Reply, Fatal> {
    let request: AlterUserScramCredentialsRequest = req.decode()?;
    let mut per_user: BTreeMap<String, Result<Vec<CredentialChange>, Refusal>> = BTreeMap::new();
    let authorized = ctx.allowed_on_cluster(AclOperation::Alter);
    let store = &ctx.security().credentials;
    let mut seen = HashSet::new();
    let mut note = |user: &str, mechanism: i8, change: Result<CredentialChange, Refusal>| {
        let entry = per_user.entry(user.to_string()).or_insert(Ok(Vec::new()));
        let change = if !authorized {
            Err((
                ResponseError::ClusterAuthorizationFailed.code(),
                "Cluster authorization failed".to_string(),
            ))
        } else if !seen.insert((user.to_string(), mechanism)) {
            Err((
                ResponseError::DuplicateResource.code(),
                "A user credential cannot be altered twice in the same request".to_string(),
            ))
        } else {
            change
        };
        match (entry, change) {
            (Ok(changes), Ok(c)) => changes.push(c),
            (e @ Ok(_), Err(refusal)) => *e = Err(refusal),
            (Err(_), _) => {}
        }
    };
    let mechanism_of = |m: i8| {
        ScramMechanism::from_kafka_type(m).ok_or_else(|| {
            (
                ResponseError::UnsupportedSaslMechanism.code(),
                format!("Unknown SCRAM mechanism {m}"),
            )
        })
    };
    let unacceptable =
        |e: crate::error::Error| (ResponseError::UnacceptableCredential.code(), e.to_string());
    for d in &request.deletions {
        let user = d.name.to_string();
        let change = mechanism_of(d.mechanism).and_then(|mechanism| {
            if user.is_empty() {
                return Err(unacceptable(validate_credential("", 4096).unwrap_err()));
            }
            if store.credential(&user, mechanism).is_none() {
                return Err((
                    ResponseError::ResourceNotFound.code(),
                    "Attempt to delete a user credential that does not exist".to_string(),
                ));
            }
            Ok(CredentialChange::Delete {
                user: user.clone(),
                mechanism,
            })
        });
        note(&user, d.mechanism, change);
    }
    for u in &request.upsertions {
        let user = u.name.to_string();
        let change = mechanism_of(u.mechanism).and_then(|mechanism| {
            let iterations = u32::try_from(u.iterations).unwrap_or(0);
            validate_credential(&user, iterations).map_err(unacceptable)?;
            if u.salt.is_empty() || u.salted_password.is_empty() {
                return Err((
                    ResponseError::UnacceptableCredential.code(),
                    "the salt and the salted password must not be empty".to_string(),
                ));
            }
            Ok(CredentialChange::Upsert {
                user: user.clone(),
                credential: ScramCredential::from_salted_password(
                    mechanism,
                    u.salt.to_vec(),
                    iterations,
                    &u.salted_password,
                ),
            })
        });
        note(&user, u.mechanism, change);
    }
    let changes: Vec<CredentialChange> = per_user
        .values()
        .filter_map(|r| r.as_ref().ok())
        .flatten()
        .cloned()
        .collect();
    let stored = if changes.is_empty() {
        Ok(())
    } else {
        store.apply(&changes)
    };
    let results = per_user
        .into_iter()
        .map(|(user, outcome)| {
            let result = AlterUserScramCredentialsResult::default()
                .with_user(kstr(user.clone()))
                .with_error_message(None);
            match (outcome, &stored) {
                (Err((code, message)), _) => {
                    tracing::debug!(peer = %ctx.peer, user, code, "credential change refused: {message}");
                    result
                        .with_error_code(code)
                        .with_error_message(Some(kstr(message)))
                }
                (Ok(_), Err(e)) => result
                    .with_error_code(error_code(e))
                    .with_error_message(Some(kstr(e.to_string()))),
                (Ok(_), Ok(())) => {
                    tracing::info!(peer = %ctx.peer, principal = ctx.principal, user, "SCRAM credentials altered");
                    result
                }
            }
        })
        .collect();
    req.respond(&AlterUserScramCredentialsResponse::default().with_results(results))
}
