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

/// Helpers of the cluster tests: free loopback ports, bounded waits, three (or more)
/// nodes in this process (`Server::builder(..).node_id(..).quorum(..)`) or as
/// `tidelog serve` child processes that can be killed with SIGKILL and restarted on the
/// same data directory and ports.
pub mod cluster {
    use std::fs::File;
    use std::net::{SocketAddr, TcpListener};
    use std::path::{Path, PathBuf};
    use std::process::{Child, Command, Stdio};
    use std::time::{Duration, Instant};

    use tidelog::{Broker, Server, ServerHandle};

    /// `n` free loopback ports (bound together, then released for the nodes to bind).
    pub fn free_ports(n: usize) -> Vec<u16> {
        let listeners: Vec<TcpListener> = (0..n)
            .map(|_| TcpListener::bind("127.0.0.1:0").expect("a free port"))
            .collect();
        listeners
            .iter()
            .map(|l| l.local_addr().expect("bound").port())
            .collect()
    }

    /// Polls `f` every 100 ms until it returns `Some`, for at most `limit`.
    ///
    /// # Panics
    /// When `limit` passes, naming `what`.
    pub fn eventually<T>(what: &str, limit: Duration, mut f: impl FnMut() -> Option<T>) -> T {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(v) = f() {
                return v;
            }
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Ports and quorum of an `n`-node cluster on loopback.
    #[derive(Debug, Clone)]
    pub struct Layout {
        /// Kafka listener port of each node.
        pub kafka: Vec<u16>,
        /// `1@127.0.0.1:p,2@...`: node ids from 1.
        pub quorum: String,
    }

    impl Layout {
        /// Fresh ports for `n` nodes.
        pub fn new(n: usize) -> Layout {
            let ports = free_ports(2 * n);
            let quorum = (0..n)
                .map(|i| format!("{}@127.0.0.1:{}", i + 1, ports[n + i]))
                .collect::<Vec<_>>()
                .join(",");
            Layout {
                kafka: ports[..n].to_vec(),
                quorum,
            }
        }

        /// `host:port` of node index `i`'s Kafka listener.
        pub fn addr(&self, i: usize) -> String {
            format!("127.0.0.1:{}", self.kafka[i])
        }

        /// Every node's Kafka listener, comma-separated (a client's bootstrap list).
        pub fn bootstrap(&self) -> String {
            (0..self.kafka.len())
                .map(|i| self.addr(i))
                .collect::<Vec<_>>()
                .join(",")
        }
    }

    /// Starts node index `i` of `layout` in this process on `dir`, with a short broker
    /// session timeout (2 s), replica lag time (`lag`) and no initial rebalance delay.
    pub fn start_in_process(layout: &Layout, i: usize, dir: &Path, lag: Duration) -> ServerHandle {
        let broker = Broker::builder(dir)
            .group_initial_rebalance_delay(Duration::ZERO)
            .open()
            .expect("open the node's broker");
        Server::builder(broker)
            .listen(
                layout
                    .addr(i)
                    .parse::<SocketAddr>()
                    .expect("a loopback address"),
            )
            .node_id(i as i32 + 1)
            .quorum(layout.quorum.clone())
            .broker_session_timeout(Duration::from_secs(2))
            .replica_lag_time_max(lag)
            .start()
            .expect("start the node")
    }

    /// Nodes run as `tidelog serve` child processes; killed when dropped.
    #[derive(Debug)]
    pub struct Processes {
        bin: PathBuf,
        root: PathBuf,
        /// Ports and quorum.
        pub layout: Layout,
        extra: Vec<String>,
        children: Vec<Option<Child>>,
    }

    impl Processes {
        /// Starts `n` nodes with data directories `root/node-N` and logs in
        /// `root/node-N.log`, each with `extra` arguments after the cluster ones.
        pub fn start(bin: PathBuf, root: &Path, n: usize, extra: &[&str]) -> Processes {
            let mut p = Processes {
                bin,
                root: root.to_path_buf(),
                layout: Layout::new(n),
                extra: extra.iter().map(|s| s.to_string()).collect(),
                children: (0..n).map(|_| None).collect(),
            };
            for i in 0..n {
                p.restart(i);
            }
            p
        }

        /// The data directory of node index `i`.
        pub fn dir(&self, i: usize) -> PathBuf {
            self.root.join(format!("node-{}", i + 1))
        }

        /// Starts node index `i` (again), on its data directory and ports.
        pub fn restart(&mut self, i: usize) {
            assert!(self.children[i].is_none(), "node {} is running", i + 1);
            let log = File::options()
                .create(true)
                .append(true)
                .open(self.root.join(format!("node-{}.log", i + 1)))
                .expect("the node's log file");
            let child = Command::new(&self.bin)
                .arg("serve")
                .arg("--data")
                .arg(self.dir(i))
                .arg("--listen")
                .arg(self.layout.addr(i))
                .arg("--node-id")
                .arg((i + 1).to_string())
                .arg("--quorum")
                .arg(&self.layout.quorum)
                .args(&self.extra)
                .env("RUST_LOG", "info")
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .expect("spawn tidelog serve");
            self.children[i] = Some(child);
        }

        /// SIGKILL node index `i` and reap it.
        pub fn kill(&mut self, i: usize) {
            if let Some(mut c) = self.children[i].take() {
                let _ = c.kill();
                let _ = c.wait();
            }
        }

        /// SIGTERM node index `i` (controlled shutdown) and wait up to 30 s for it to
        /// exit; true if it exited successfully.
        pub fn terminate(&mut self, i: usize) -> bool {
            let Some(mut c) = self.children[i].take() else {
                return true;
            };
            let _ = Command::new("kill")
                .args(["-TERM", &c.id().to_string()])
                .status();
            let deadline = Instant::now() + Duration::from_secs(30);
            loop {
                if let Ok(Some(status)) = c.try_wait() {
                    return status.success();
                }
                if Instant::now() >= deadline {
                    let _ = c.kill();
                    let _ = c.wait();
                    return false;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }

        /// The node logs, for a failing test's message.
        pub fn logs(&self) -> String {
            (0..self.children.len())
                .map(|i| {
                    let path = self.root.join(format!("node-{}.log", i + 1));
                    let text = std::fs::read_to_string(&path).unwrap_or_default();
                    let tail: Vec<&str> = text.lines().rev().take(40).collect();
                    let tail: Vec<&str> = tail.into_iter().rev().collect();
                    format!("--- node {} ---\n{}", i + 1, tail.join("\n"))
                })
                .collect::<Vec<_>>()
                .join("\n")
        }
    }

    impl Drop for Processes {
        fn drop(&mut self) {
            for i in 0..self.children.len() {
                self.kill(i);
            }
        }
    }
}
