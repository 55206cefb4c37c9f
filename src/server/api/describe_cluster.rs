//! DescribeCluster (key 60), versions 0-2: the cluster id, the controller and the
//! brokers (from [`Backend::brokers`](crate::server::backend::Backend::brokers): this
//! node alone, or a cluster's registered brokers from its
//! [`ClusterView`](crate::server::cluster_view::ClusterView)). Brokers answer for the broker endpoint
//! only: asking for controllers (endpoint type 2, v1+) is UNSUPPORTED_ENDPOINT_TYPE, an
//! unknown endpoint type INVALID_REQUEST. Fenced brokers are listed from v2 only when
//! asked for.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::{BrokerId, DescribeClusterRequest, DescribeClusterResponse};

use super::{Ctx, Fatal, NODE_ID, Reply, Request, kstr};
use crate::security::acl::AclOperation;

/// Endpoint type of brokers (v1+).
const BROKER_ENDPOINT: i8 = 1;
/// Endpoint type of controllers (v1+).
const CONTROLLER_ENDPOINT: i8 = 2;
/// "Not requested" for `cluster_authorized_operations`.
const OPERATIONS_OMITTED: i32 = i32::MIN;

pub(super) fn handle(ctx: &Ctx<'_>, req: &mut Request) -> Result<Reply, Fatal> {
    let request: DescribeClusterRequest = req.decode()?;
    if !ctx.allowed_on_cluster(AclOperation::Describe) {
        return req.respond(
            &DescribeClusterResponse::default()
                .with_error_code(ResponseError::ClusterAuthorizationFailed.code())
                .with_error_message(Some(kstr("Cluster authorization failed"))),
        );
    }
    let version = req.version();
    let endpoint = if version >= 1 {
        request.endpoint_type
    } else {
        BROKER_ENDPOINT
    };
    // A cluster node answers with the cluster's id and its controller (Raft leader).
    let (cluster_id, controller) = match ctx.backend().cluster() {
        Some(c) => (
            c.cluster_id()
                .unwrap_or_else(|| ctx.shared.cluster_id.clone()),
            c.controller_id().unwrap_or(-1),
        ),
        None => (ctx.shared.cluster_id.clone(), NODE_ID),
    };
    let response = DescribeClusterResponse::default()
        .with_error_message(None)
        .with_endpoint_type(endpoint)
        .with_cluster_id(kstr(cluster_id))
        .with_controller_id(BrokerId(controller))
        .with_cluster_authorized_operations(OPERATIONS_OMITTED);
    let response = match endpoint {
        BROKER_ENDPOINT => {
            let brokers = ctx
                .backend()
                .brokers(ctx.listener, ctx.advertised())
                .into_iter()
                .filter(|b| !b.fenced || (version >= 2 && request.include_fenced_brokers))
                .map(|b| {
                    DescribeClusterBroker::default()
                        .with_broker_id(BrokerId(b.node_id))
                        .with_host(kstr(b.host))
                        .with_port(b.port)
                        .with_rack(b.rack.map(kstr))
                        .with_is_fenced(b.fenced)
                })
                .collect();
            response.with_brokers(brokers)
        }
        CONTROLLER_ENDPOINT => response
            .with_error_code(ResponseError::UnsupportedEndpointType.code())
            .with_error_message(Some(kstr(
                "this endpoint serves brokers; controllers are not listed",
            ))),
        other => response
            .with_error_code(ResponseError::InvalidRequest.code())
            .with_error_message(Some(kstr(format!("unknown endpoint type {other}")))),
    };
    req.respond(&response)
}
