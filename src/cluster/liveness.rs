//! When each peer was last heard from: the transport notes it, the controller reads a
//! snapshot of it to fence brokers by liveness.

use std::collections::HashMap;
use std::time::Instant;

use parking_lot::Mutex;

/// When each peer was last heard from, by node id: a plain copy of a [`Liveness`].
pub(crate) type LastHeard = HashMap<i32, Instant>;

/// When each peer was last heard from (any Raft message), for the controller's
/// liveness check.
#[derive(Debug, Default)]
pub(crate) struct Liveness {
    last: Mutex<HashMap<i32, Instant>>,
}

impl Liveness {
    /// Notes a message from `node`.
    pub(crate) fn heard(&self, node: i32) {
        self.last.lock().insert(node, Instant::now());
    }

    /// When every peer was last heard from, as of now.
    pub(crate) fn snapshot(&self) -> LastHeard {
        self.last.lock().clone()
    }
}
