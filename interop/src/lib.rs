//! Shared helpers of the interop tests (real Kafka clients and multi-node clusters
//! against tidelog). The tests themselves are in `tests/`, one scenario per file.

use std::path::PathBuf;

/// The `tidelog` binary built by `cargo test --workspace --all-features` (it sits in the
/// same target directory as the test executables), for tests that run nodes as child
/// processes.
///
/// # Panics
/// If the binary is not there: build it with `cargo build --features cli,server` or run
/// the tests with `cargo test --workspace --all-features`.
pub fn tidelog_bin() -> PathBuf {
    let exe = std::env::current_exe().expect("path of the test executable");
    // target/<profile>/deps/<test>-<hash> -> target/<profile>/tidelog
    let dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("test executable in target/<profile>/deps");
    let bin = dir.join("tidelog");
    assert!(
        bin.exists(),
        "{} is missing: build it with `cargo build --features cli,server` or run the tests \
         with `cargo test --workspace --all-features`",
        bin.display()
    );
    bin
}

/// Helpers of the consumer group tests: a server on a fixed port that can be restarted
/// in place, and the group's assignments as the coordinator holds them.
pub mod groups {
    use std::collections::BTreeMap;
    use std::net::{SocketAddr, TcpListener};
    use std::path::Path;
    use std::time::Duration;

    use tidelog::{Assignment, Broker, GroupState, Server, ServerHandle};

    /// A free port on 127.0.0.1 (bound and released; the server binds it again).
    pub fn free_port() -> u16 {
        TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free port on 127.0.0.1")
    }

    /// Opens the broker of `dir` and serves it on `port` (network groups form at once,
    /// without Kafka's initial rebalance delay, to keep the tests short).
    pub fn serve_on(dir: &Path, port: u16) -> (Broker, ServerHandle) {
        let broker = Broker::builder(dir)
            .group_initial_rebalance_delay(Duration::ZERO)
            .open()
            .expect("open the broker");
        let server = Server::builder(broker.clone())
            .listen(SocketAddr::from(([127, 0, 0, 1], port)))
            .start()
            .expect("serve on the fixed port");
        (broker, server)
    }

    /// A group's generation and, per member id, its partitions of `topic`, when the
    /// group is Stable.
    pub fn stable_assignment(
        broker: &Broker,
        group: &str,
    ) -> Option<(i32, BTreeMap<String, Vec<i32>>)> {
        let d = broker.group_coordinator().describe_group(group).ok()?;
        if d.state != GroupState::Stable {
            return None;
        }
        let mut out = BTreeMap::new();
        for m in d.members {
            let a = Assignment::decode(&m.assignment).ok()?;
            let parts = a.partitions.into_iter().flat_map(|(_, ps)| ps).collect();
            out.insert(m.member_id, parts);
        }
        Some((d.generation_id, out))
    }

    /// Panics if two members of one generation own the same partition.
    pub fn assert_disjoint(generation: i32, members: &BTreeMap<String, Vec<i32>>) {
        let mut seen = BTreeMap::new();
        for (member, parts) in members {
            for p in parts {
                if let Some(other) = seen.insert(*p, member) {
                    panic!("generation {generation} gave partition {p} to {other} and {member}");
                }
            }
        }
    }
}
