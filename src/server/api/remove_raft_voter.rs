//! RemoveRaftVoter (key 81), version 0 (KIP-853): see [`super::describe_quorum`].

use super::{Ctx, Fatal, Reply, Request};

pub(super) fn handle(ctx: &Ctx<'_>, req: &mut Request) -> Result<Reply, Fatal> {
    super::describe_quorum::remove(ctx, req)
}
