//! DeleteAcls (key 31), versions 1-3: removes the ACL bindings that match each filter
//! and lists what each removed.
//!
//! Needs Alter on the cluster (CLUSTER_AUTHORIZATION_FAILED per filter otherwise) and
//! an authorizer (SECURITY_DISABLED without one). A filter with an unknown code is
//! INVALID_REQUEST; the others are applied together, durably, before the answer.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::delete_acls_response::{
    DeleteAclsFilterResult, DeleteAclsMatchingAcl,
};
use kafka_protocol::messages::{DeleteAclsRequest, DeleteAclsResponse};

use super::describe_acls::filter;
use super::{Ctx, Fatal, Reply, Request, error_code, kstr};
use crate::security::acl::AclOperation;

pub(super) fn handle(ctx: &Ctx<'_>, req: &mut Request) -> Result<Reply, Fatal> {
    let request: DeleteAclsRequest = req.decode()?;
    let authorizer = match ctx.acl_authorizer(AclOperation::Alter) {
        Ok(a) => a,
        Err((code, message)) => {
            let refused = request.filters.iter().map(|_| {
                DeleteAclsFilterResult::default()
                    .with_error_code(code)
                    .with_error_message(Some(kstr(message)))
            });
            return req
                .respond(&DeleteAclsResponse::default().with_filter_results(refused.collect()));
        }
    };
    let parsed: Vec<_> = request
        .filters
        .iter()
        .map(|f| {
            filter(
                f.resource_type_filter,
                f.resource_name_filter.as_ref(),
                f.pattern_type_filter,
                f.principal_filter.as_ref(),
                f.host_filter.as_ref(),
                f.operation,
                f.permission_type,
            )
        })
        .collect();
    let valid: Vec<_> = parsed
        .iter()
        .filter_map(|p| p.as_ref().ok().cloned())
        .collect();
    let removed = authorizer.store().remove(&valid);
    let mut removed_each = match &removed {
        Ok(r) => r.clone().into_iter(),
        Err(_) => Vec::new().into_iter(),
    };
    let results = parsed
        .into_iter()
        .map(|p| match (p, &removed) {
            (Err(why), _) => DeleteAclsFilterResult::default()
                .with_error_code(ResponseError::InvalidRequest.code())
                .with_error_message(Some(kstr(why))),
            (Ok(_), Err(e)) => DeleteAclsFilterResult::default()
                .with_error_code(error_code(e))
                .with_error_message(Some(kstr(e.to_string()))),
            (Ok(_), Ok(_)) => {
                let gone = removed_each.next().unwrap_or_default();
                for b in &gone {
                    tracing::info!(peer = %ctx.peer, principal = ctx.principal, "ACL removed: {b}");
                }
                DeleteAclsFilterResult::default()
                    .with_error_message(None)
                    .with_matching_acls(
                        gone.into_iter()
                            .map(|b| {
                                DeleteAclsMatchingAcl::default()
                                    .with_error_message(None)
                                    .with_resource_type(b.resource_type.code())
                                    .with_resource_name(kstr(b.resource_name))
                                    .with_pattern_type(b.pattern_type.code())
                                    .with_principal(kstr(b.principal))
                                    .with_host(kstr(b.host))
                                    .with_operation(b.operation.code())
                                    .with_permission_type(b.permission.code())
                            })
                            .collect(),
                    )
            }
        })
        .collect();
    req.respond(&DeleteAclsResponse::default().with_filter_results(results))
}
