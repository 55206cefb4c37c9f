//! FindCoordinator (key 10), versions 0-2: this broker coordinates every group.

use kafka_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};

use super::{Ctx, Fatal, NODE_ID, Reply, Request, kstr};

pub(super) fn handle(ctx: &Ctx<'_>, req: &mut Request) -> Result<Reply, Fatal> {
    let _: FindCoordinatorRequest = req.decode()?;
    let (host, port) = ctx.advertised();
    let response = FindCoordinatorResponse::default()
        .with_node_id(BrokerId(NODE_ID))
        .with_host(kstr(host))
        .with_port(port);
    req.respond(&response)
}
