//! DescribeAcls (key 29), versions 1-3: the ACL bindings that match a filter, grouped by
//! resource pattern.
//!
//! Needs Describe on the cluster (CLUSTER_AUTHORIZATION_FAILED otherwise) and an
//! authorizer (SECURITY_DISABLED without one, as in Kafka). A filter with an unknown
//! code is INVALID_REQUEST.

use std::collections::BTreeMap;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::describe_acls_response::{AclDescription, DescribeAclsResource};
use kafka_protocol::messages::{DescribeAclsRequest, DescribeAclsResponse};
use kafka_protocol::protocol::StrBytes;

use super::{Ctx, Fatal, Reply, Request, kstr};
use crate::security::acl::{AclFilter, AclOperation, AclPermission, PatternType, ResourceType};

/// A filter from its wire fields; the error says which code is unknown.
pub(super) fn filter(
    resource_type: i8,
    resource_name: Option<&StrBytes>,
    pattern_type: i8,
    principal: Option<&StrBytes>,
    host: Option<&StrBytes>,
    operation: i8,
    permission: i8,
) -> Result<AclFilter, String> {
    Ok(AclFilter {
        resource_type: ResourceType::from_code(resource_type)
            .ok_or_else(|| format!("unknown resource type {resource_type}"))?,
        resource_name: resource_name.map(|s| s.to_string()),
        pattern_type: PatternType::from_code(pattern_type)
            .ok_or_else(|| format!("unknown pattern type {pattern_type}"))?,
        principal: principal.map(|s| s.to_string()),
        host: host.map(|s| s.to_string()),
        operation: AclOperation::from_code(operation)
            .ok_or_else(|| format!("unknown operation {operation}"))?,
        permission: AclPermission::from_code(permission)
            .ok_or_else(|| format!("unknown permission type {permission}"))?,
    })
}

pub(super) fn handle(ctx: &Ctx<'_>, req: &mut Request) -> Result<Reply, Fatal> {
    let r: DescribeAclsRequest = req.decode()?;
    let refuse = |code: i16, message: String| {
        DescribeAclsResponse::default()
            .with_error_code(code)
            .with_error_message(Some(kstr(message)))
    };
    let authorizer = match ctx.acl_authorizer(AclOperation::Describe) {
        Ok(a) => a,
        Err((code, message)) => return req.respond(&refuse(code, message.into())),
    };
    let f = match filter(
        r.resource_type_filter,
        r.resource_name_filter.as_ref(),
        r.pattern_type_filter,
        r.principal_filter.as_ref(),
        r.host_filter.as_ref(),
        r.operation,
        r.permission_type,
    ) {
        Ok(f) => f,
        Err(why) => return req.respond(&refuse(ResponseError::InvalidRequest.code(), why)),
    };
    let mut by_resource: BTreeMap<(i8, String, i8), Vec<AclDescription>> = BTreeMap::new();
    for b in authorizer
        .store()
        .bindings()
        .into_iter()
        .filter(|b| f.matches(b))
    {
        by_resource
            .entry((
                b.resource_type.code(),
                b.resource_name.clone(),
                b.pattern_type.code(),
            ))
            .or_default()
            .push(
                AclDescription::default()
                    .with_principal(kstr(b.principal))
                    .with_host(kstr(b.host))
                    .with_operation(b.operation.code())
                    .with_permission_type(b.permission.code()),
            );
    }
    let resources = by_resource
        .into_iter()
        .map(|((kind, name, pattern), acls)| {
            DescribeAclsResource::default()
                .with_resource_type(kind)
                .with_resource_name(kstr(name))
                .with_pattern_type(pattern)
                .with_acls(acls)
        })
        .collect();
    req.respond(
        &DescribeAclsResponse::default()
            .with_error_message(None)
            .with_resources(resources),
    )
}
