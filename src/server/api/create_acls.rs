//! CreateAcls (key 30), versions 1-3: adds ACL bindings.
//!
//! Needs Alter on the cluster (CLUSTER_AUTHORIZATION_FAILED per creation otherwise), and
//! an authorizer (`--authorizer`): without one every creation is SECURITY_DISABLED, as
//! in Kafka. A binding that is not concrete (`Any`, `Match`, an unknown code, a
//! principal that is not `Type:name`, a cluster not named `kafka-cluster`) is
//! INVALID_REQUEST with the reason. The valid ones are stored together, durably, before
//! the answer.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::{CreateAclsRequest, CreateAclsResponse};

use super::{Ctx, Fatal, Reply, Request, error_code, kstr};
use crate::security::acl::{AclBinding, AclOperation, AclPermission, PatternType, ResourceType};

pub(super) fn handle(ctx: &Ctx<'_>, req: &mut Request) -> Result<Reply, Fatal> {
    let request: CreateAclsRequest = req.decode()?;
    let authorizer = match ctx.acl_authorizer(AclOperation::Alter) {
        Ok(a) => a,
        Err((code, message)) => {
            let refused = request.creations.iter().map(|_| {
                AclCreationResult::default()
                    .with_error_code(code)
                    .with_error_message(Some(kstr(message)))
            });
            return req.respond(&CreateAclsResponse::default().with_results(refused.collect()));
        }
    };
    let parsed: Vec<Result<AclBinding, String>> = request
        .creations
        .iter()
        .map(|c| {
            let binding = AclBinding {
                resource_type: ResourceType::from_code(c.resource_type)
                    .ok_or_else(|| format!("unknown resource type {}", c.resource_type))?,
                resource_name: c.resource_name.to_string(),
                pattern_type: PatternType::from_code(c.resource_pattern_type)
                    .ok_or_else(|| format!("unknown pattern type {}", c.resource_pattern_type))?,
                principal: c.principal.to_string(),
                host: c.host.to_string(),
                operation: AclOperation::from_code(c.operation)
                    .ok_or_else(|| format!("unknown operation {}", c.operation))?,
                permission: AclPermission::from_code(c.permission_type)
                    .ok_or_else(|| format!("unknown permission type {}", c.permission_type))?,
            };
            binding.validate().map_err(|e| e.to_string())?;
            Ok(binding)
        })
        .collect();
    let valid: Vec<AclBinding> = parsed
        .iter()
        .filter_map(|p| p.as_ref().ok().cloned())
        .collect();
    let stored = authorizer.store().add(&valid);
    if stored.is_ok() {
        for b in &valid {
            tracing::info!(peer = %ctx.peer, principal = ctx.principal, "ACL added: {b}");
        }
    }
    let results = parsed
        .into_iter()
        .map(|p| match (p, &stored) {
            (Err(why), _) => AclCreationResult::default()
                .with_error_code(ResponseError::InvalidRequest.code())
                .with_error_message(Some(kstr(why))),
            (Ok(_), Err(e)) => AclCreationResult::default()
                .with_error_code(error_code(e))
                .with_error_message(Some(kstr(e.to_string()))),
            (Ok(_), Ok(())) => AclCreationResult::default(),
        })
        .collect();
    req.respond(&CreateAclsResponse::default().with_results(results))
}
