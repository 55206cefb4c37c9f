//! DescribeUserScramCredentials (key 50), version 0: which SCRAM mechanisms each user has
//! a credential for, with its iterations (never a key or a salt).
//!
//! Needs Describe on the cluster (CLUSTER_AUTHORIZATION_FAILED otherwise). No user list
//! (null or empty) describes every user; a user named twice is DUPLICATE_RESOURCE, one
//! without credentials RESOURCE_NOT_FOUND, as in Kafka.

use std::collections::HashMap;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::describe_user_scram_credentials_response::{
    CredentialInfo, DescribeUserScramCredentialsResult,
};
use kafka_protocol::messages::{
    DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse,
};

use super::{Ctx, Fatal, Reply, Request, kstr};
use crate::security::acl::AclOperation;

pub(super) fn handle(ctx: &Ctx<'_>, req: &mut Request) -> Result<Reply, Fatal> {
    let request: DescribeUserScramCredentialsRequest = req.decode()?;
    if !ctx.allowed_on_cluster(AclOperation::Describe) {
        return req.respond(
            &DescribeUserScramCredentialsResponse::default()
                .with_error_code(ResponseError::ClusterAuthorizationFailed.code())
                .with_error_message(Some(kstr("Cluster authorization failed"))),
        );
    }
    let users: HashMap<String, Vec<_>> = ctx.security().credentials.users().into_iter().collect();
    let info = |creds: &Vec<(crate::security::scram::ScramMechanism, u32)>| {
        creds
            .iter()
            .map(|(m, i)| {
                CredentialInfo::default()
                    .with_mechanism(m.kafka_type())
                    .with_iterations(i32::try_from(*i).unwrap_or(i32::MAX))
            })
            .collect::<Vec<_>>()
    };
    let wanted: Vec<String> = request
        .users
        .unwrap_or_default()
        .into_iter()
        .map(|u| u.name.to_string())
        .collect();
    let results = if wanted.is_empty() {
        let mut all: Vec<_> = users.iter().collect();
        all.sort_by(|a, b| a.0.cmp(b.0));
        all.into_iter()
            .map(|(user, creds)| {
                DescribeUserScramCredentialsResult::default()
                    .with_user(kstr(user.clone()))
                    .with_credential_infos(info(creds))
            })
            .collect()
    } else {
        let mut counts: HashMap<&str, usize> = HashMap::new();
        for w in &wanted {
            *counts.entry(w).or_default() += 1;
        }
        let mut done = std::collections::HashSet::new();
        wanted
            .iter()
            .filter(|w| done.insert(w.as_str()))
            .map(|user| {
                let result = DescribeUserScramCredentialsResult::default().with_user(kstr(user.clone()));
                if counts[user.as_str()] > 1 {
                    return result
                        .with_error_code(ResponseError::DuplicateResource.code())
                        .with_error_message(Some(kstr(format!("Cannot describe SCRAM credentials for the same user twice in a single request: {user}"))));
                }
                match users.get(user) {
                    Some(creds) => result.with_credential_infos(info(creds)),
                    None => result
                        .with_error_code(ResponseError::ResourceNotFound.code())
                        .with_error_message(Some(kstr(format!("Attempt to describe a user credential that does not exist: {user}")))),
                }
            })
            .collect()
    };
    req.respond(
        &DescribeUserScramCredentialsResponse::default()
            .with_error_message(None)
            .with_results(results),
    )
}
