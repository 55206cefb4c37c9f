//! UnregisterBroker (key 64), version 0 (KIP-500's decommissioning): removes a retired
//! node's registration, so Metadata, DescribeCluster and the quorum no longer list it
//! and its id may be taken by a new node. Needs Alter on the cluster
//! (CLUSTER_AUTHORIZATION_FAILED). BROKER_ID_NOT_REGISTERED for an unknown id;
//! INVALID_REQUEST while the node is a voter of the metadata quorum, is running, or
//! still holds a replica (drain it first: reassign its replicas to other nodes); the
//! controller's error otherwise. A single node is never unregistered: it hosts every
//! partition.

use std::time::Duration;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::{UnregisterBrokerRequest, UnregisterBrokerResponse};

use super::{Ctx, Fatal, NODE_ID, Reply, Request, error_code, kstr};
use crate::security::acl::{AclOperation, CLUSTER_RESOURCE_NAME, ResourceType};
use crate::server::partition_admin::Unregistered;

/// How long the controller is waited for.
const TIMEOUT: Duration = Duration::from_secs(30);

pub(super) fn handle(ctx: &Ctx<'_>, req: &mut Request) -> Result<Reply, Fatal> {
    let request: UnregisterBrokerRequest = req.decode()?;
    let broker = request.broker_id.0;
    let answer = |code: i16, message: Option<String>| {
        UnregisterBrokerResponse::default()
            .with_error_code(code)
            .with_error_message(message.map(kstr))
    };
    if let Err((code, message)) = ctx.check(
        AclOperation::Alter,
        ResourceType::Cluster,
        CLUSTER_RESOURCE_NAME,
    ) {
        return req.respond(&answer(code, Some(message)));
    }
    let backend = ctx.backend();
    let outcome = match backend.cluster().and_then(|c| c.partition_admin()) {
        Some(admin) => admin.unregister_broker(broker, TIMEOUT),
        None if broker == NODE_ID => Ok(Unregistered::Refused(format!(
            "node {broker} is a single node hosting every partition; it cannot be unregistered"
        ))),
        None => Ok(Unregistered::NotRegistered),
    };
    let (code, message) = match outcome {
        Ok(Unregistered::Done) => (0, None),
        Ok(Unregistered::NotRegistered) => (
            ResponseError::BrokerIdNotRegistered.code(),
            Some(format!("no broker {broker} is registered")),
        ),
        Ok(Unregistered::Refused(why)) => (ResponseError::InvalidRequest.code(), Some(why)),
        Err(e) => (error_code(&e), Some(e.to_string())),
    };
    if let Some(m) = &message {
        tracing::info!(peer = %ctx.peer, broker, code, "unregistration refused: {m}");
    }
    req.respond(&answer(code, message))
}
