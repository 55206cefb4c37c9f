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
    use std::net::SocketAddr;
    use std::path::Path;
    use std::time::Duration;

    use tidelog::consumer::Assignment;
    use tidelog::coordinator::GroupState;
    use tidelog::{Broker, Server, ServerHandle};

    /// A free port on 127.0.0.1 (bound and released; the server binds it again), as
    /// [`crate::cluster::free_ports`] picks them.
    pub fn free_port() -> u16 {
        crate::cluster::free_ports(1)[0]
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

    /// Opens the broker of `dir` (network groups form at once), creates `topic` with
    /// `partitions` and serves it on a free loopback port.
    pub fn serve_topic(dir: &Path, topic: &str, partitions: i32) -> (Broker, ServerHandle) {
        let broker = Broker::builder(dir)
            .group_initial_rebalance_delay(Duration::ZERO)
            .open()
            .expect("open the broker");
        broker
            .create_topic(topic, partitions, tidelog::TopicConfig::default())
            .expect("create the topic");
        let server = Server::builder(broker.clone())
            .listen("127.0.0.1:0")
            .start()
            .expect("serve on a free port");
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

    /// Runs `tidelog ARGS... --bootstrap BOOTSTRAP`: exit code, stdout, stderr.
    pub fn cli(bootstrap: &str, args: &[&str]) -> (i32, String, String) {
        let out = Command::new(crate::tidelog_bin())
            .args(args)
            .args(["--bootstrap", bootstrap])
            .output()
            .expect("run tidelog");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// The stdout of a successful [`cli`] run, or `None` (the failure goes to stderr).
    pub fn cli_ok(bootstrap: &str, args: &[&str]) -> Option<String> {
        let (code, out, err) = cli(bootstrap, args);
        if code != 0 {
            eprintln!("tidelog {args:?} --bootstrap {bootstrap}: exit {code}: {err}");
        }
        (code == 0).then_some(out)
    }

    /// `n` free loopback ports (bound together, then released for the nodes to bind),
    /// below Linux's ephemeral range (32768-60999): a port the kernel hands out for
    /// `bind(0)` or an outgoing connection could become a started node's connection
    /// before the node meant to listen on it binds it, or while that node is killed
    /// and before it restarts.
    pub fn free_ports(n: usize) -> Vec<u16> {
        use std::sync::atomic::{AtomicU32, Ordering};
        // The tests of one binary run in parallel, the binaries one after another:
        // each process starts at its own place (its pid) and its threads take turns.
        static NEXT: AtomicU32 = AtomicU32::new(0);
        const FIRST: u32 = 20_000;
        const SPAN: u32 = 12_000;
        let start = std::process::id().wrapping_mul(7919) % SPAN;
        let mut listeners = Vec::new();
        for _ in 0..SPAN {
            if listeners.len() == n {
                break;
            }
            let port = FIRST + (start + NEXT.fetch_add(1, Ordering::Relaxed)) % SPAN;
            if let Ok(l) = TcpListener::bind(("127.0.0.1", port as u16)) {
                listeners.push(l);
            }
        }
        assert_eq!(listeners.len(), n, "{n} free loopback ports below 32768");
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

    /// Through the in-process nodes' `brokers` (the program's own, trusted API): creates
    /// `topic` with one partition, produces 20 records with acks=all on its leader, and
    /// waits until every node's replica ends at 20, each step for at most `limit`.
    ///
    /// # Panics
    /// When a step does not happen in time.
    pub fn replicate_twenty_records(brokers: &[Broker], topic: &str, limit: Duration) {
        use tidelog::{Acks, Producer, ProducerRecord, TopicConfig};
        eventually("the topic is created", limit, || {
            brokers[0]
                .create_topic_if_missing(topic, 1, TopicConfig::new())
                .ok()
        });
        let leader = eventually("a leader", limit, || {
            brokers.iter().position(|b| {
                b.topic(topic)
                    .and_then(|t| t.partition(0))
                    .is_ok_and(|p| p.is_leader())
            })
        });
        let producer = Producer::builder(&brokers[leader])
            .acks(Acks::All)
            .build()
            .expect("a producer");
        for i in 0..20 {
            let v = format!("record {i}");
            producer
                .send(topic, ProducerRecord::new(v.as_bytes()))
                .expect("an acks=all send");
        }
        producer.flush().expect("acks=all records acknowledged");
        for (i, b) in brokers.iter().enumerate() {
            let p = b
                .topic(topic)
                .and_then(|t| t.partition(0))
                .expect("the partition on every node");
            eventually(&format!("node {} has the records", i + 1), limit, || {
                (p.log_end_offset() == 20).then_some(())
            });
        }
    }

    /// Sends `v{p}-{o}` for offsets `from..from + n` to each partition `p` of
    /// `0..partitions` of `topic` through `producer`, and waits at most `limit` for
    /// every delivery.
    ///
    /// # Panics
    /// When a send or the flush fails.
    pub fn produce_values(
        producer: &rdkafka::producer::BaseProducer,
        topic: &str,
        partitions: i32,
        (from, n): (i64, i64),
        limit: Duration,
    ) {
        use rdkafka::producer::{BaseRecord, Producer};
        for p in 0..partitions {
            for o in from..from + n {
                let v = format!("v{p}-{o}");
                producer
                    .send(BaseRecord::<(), String>::to(topic).payload(&v).partition(p))
                    .expect("a send");
            }
        }
        producer.flush(limit).expect("every record delivered");
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

    /// Node index `i` of `layout` on `dir`: its broker, opened without initial rebalance
    /// delay, and a server builder on the layout's listener with its node id and quorum
    /// and a short broker session timeout (2 s).
    fn node(layout: &Layout, i: usize, dir: &Path) -> (Broker, tidelog::ServerBuilder) {
        let broker = Broker::builder(dir)
            .group_initial_rebalance_delay(Duration::ZERO)
            .open()
            .expect("open the node's broker");
        let builder = Server::builder(broker.clone())
            .listen(
                layout
                    .addr(i)
                    .parse::<SocketAddr>()
                    .expect("a loopback address"),
            )
            .node_id(i as i32 + 1)
            .quorum(layout.quorum.clone())
            .broker_session_timeout(Duration::from_secs(2));
        (broker, builder)
    }

    /// Starts node index `i` of `layout` in this process on `dir`, with a short broker
    /// session timeout (2 s), replica lag time (`lag`) and no initial rebalance delay.
    pub fn start_in_process(layout: &Layout, i: usize, dir: &Path, lag: Duration) -> ServerHandle {
        node(layout, i, dir)
            .1
            .replica_lag_time_max(lag)
            .start()
            .expect("start the node")
    }

    /// Starts the nodes of `layout` in this process, node index `i` on `dirs[i]`: a
    /// broker without initial rebalance delay and a server on the layout's listener with
    /// its node id and quorum, a 2 s broker session timeout and replication factor 3 by
    /// default, which `configure(i, builder)` completes (listeners, security, ...).
    ///
    /// # Panics
    /// When a broker or a server does not start.
    pub fn start_nodes<D: AsRef<Path>>(
        layout: &Layout,
        dirs: &[D],
        configure: impl Fn(usize, tidelog::ServerBuilder) -> tidelog::ServerBuilder,
    ) -> (Vec<Broker>, Vec<ServerHandle>) {
        dirs.iter()
            .enumerate()
            .map(|(i, dir)| {
                let (broker, builder) = node(layout, i, dir.as_ref());
                let server = configure(i, builder.default_replication_factor(3))
                    .start()
                    .expect("start the node");
                (broker, server)
            })
            .unzip()
    }

    /// [`start_nodes`] with node index `i` in rack `rack-{i + 1}` and Kafka's rack-aware
    /// replica selector (KIP-392: the leader sends a consumer to a replica of its
    /// `client.rack`).
    ///
    /// # Panics
    /// When a broker or a server does not start.
    pub fn start_racked_nodes<D: AsRef<Path>>(
        layout: &Layout,
        dirs: &[D],
    ) -> (Vec<Broker>, Vec<ServerHandle>) {
        start_nodes(layout, dirs, |i, b| {
            b.broker_rack(format!("rack-{}", i + 1))
                .replica_selector_class("org.apache.kafka.common.replica.RackAwareReplicaSelector")
                .expect("Kafka's rack-aware selector is known")
        })
    }

    /// Shuts `servers` down all at once: their controlled shutdowns run while the voters
    /// still form a majority (one after another, the last voters' would wait out their
    /// timeout alone).
    ///
    /// # Panics
    /// When a shutdown fails.
    pub fn shutdown_all(servers: Vec<ServerHandle>) {
        std::thread::scope(|s| {
            for server in servers {
                s.spawn(move || server.shutdown().expect("shut the node down"));
            }
        });
    }

    /// Nodes run as `tidelog serve` child processes; killed when dropped.
    #[derive(Debug)]
    pub struct Processes {
        bin: PathBuf,
        root: PathBuf,
        /// Ports and quorum.
        pub layout: Layout,
        extra: Vec<String>,
        /// Arguments of one node only, after `extra`.
        per_node: Vec<Vec<String>>,
        log_filter: String,
        children: Vec<Option<Child>>,
    }

    impl Processes {
        /// Starts `n` nodes with data directories `root/node-N` and logs in
        /// `root/node-N.log`, each with `extra` arguments after the cluster ones.
        pub fn start(bin: PathBuf, root: &Path, n: usize, extra: &[&str]) -> Processes {
            Processes::start_logged(bin, root, n, extra, "info")
        }

        /// As [`Processes::start`], with `RUST_LOG=log_filter` for the nodes.
        pub fn start_logged(
            bin: PathBuf,
            root: &Path,
            n: usize,
            extra: &[&str],
            log_filter: &str,
        ) -> Processes {
            Processes::start_each(bin, root, n, extra, log_filter, |_| Vec::new())
        }

        /// As [`Processes::start_logged`], with `per_node(i)`'s arguments for node
        /// index `i` after `extra` (another listener's port, say).
        pub fn start_each(
            bin: PathBuf,
            root: &Path,
            n: usize,
            extra: &[&str],
            log_filter: &str,
            per_node: impl Fn(usize) -> Vec<String>,
        ) -> Processes {
            let mut p = Processes {
                bin,
                root: root.to_path_buf(),
                layout: Layout::new(n),
                extra: extra.iter().map(|s| s.to_string()).collect(),
                per_node: (0..n).map(per_node).collect(),
                log_filter: log_filter.to_string(),
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
                .args(&self.per_node[i])
                .env("RUST_LOG", &self.log_filter)
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .expect("spawn tidelog serve");
            self.children[i] = Some(child);
        }

        /// SIGKILL node index `i` and reap it (a stopped one too).
        pub fn kill(&mut self, i: usize) {
            if let Some(mut c) = self.children[i].take() {
                let _ = c.kill();
                let _ = c.wait();
            }
        }

        /// SIGTERM node index `i` (controlled shutdown) and wait up to 30 s for it to
        /// exit; true if it exited successfully.
        pub fn terminate(&mut self, i: usize) -> bool {
            self.children[i].take().is_none_or(terminate_child)
        }

        /// SIGTERM every running node at once, as [`terminate_children`] does; per node
        /// index, true if it exited successfully or was not running.
        pub fn terminate_all(&mut self) -> Vec<bool> {
            terminate_children(self.children.iter_mut().map(Option::take).collect())
        }

        /// Sends `SIG<name>` (`STOP`, `CONT`, ...) to node index `i` if it runs.
        pub fn signal(&self, i: usize, name: &str) {
            if let Some(c) = &self.children[i] {
                let _ = Command::new("kill")
                    .arg(format!("-{name}"))
                    .arg(c.id().to_string())
                    .status();
            }
        }

        /// True while node index `i` runs (started and not killed or stopped).
        pub fn is_running(&self, i: usize) -> bool {
            self.children[i].is_some()
        }

        /// How many lines of the nodes' logs contain `needle`.
        pub fn count_in_logs(&self, needle: &str) -> usize {
            (0..self.children.len())
                .map(|i| {
                    let path = self.root.join(format!("node-{}.log", i + 1));
                    let text = std::fs::read_to_string(&path).unwrap_or_default();
                    text.lines().filter(|l| l.contains(needle)).count()
                })
                .sum()
        }

        /// The node logs, for a failing test's message.
        pub fn logs(&self) -> String {
            log_tails(&self.root, self.children.len(), 40)
        }
    }

    /// SIGTERM `c` (a node's controlled shutdown) and wait up to 30 s for it to exit;
    /// true if it exited successfully (killed and false after 30 s).
    pub fn terminate_child(c: Child) -> bool {
        terminate_children(vec![Some(c)])[0]
    }

    /// SIGTERM every child of `children` at once (their controlled shutdowns run while
    /// the voters still form a majority; one after another, the last voters' would wait
    /// out their timeout alone) and wait up to 30 s for them to exit. Per child: true if
    /// it exited successfully (killed and false after 30 s), or was `None`.
    pub fn terminate_children(children: Vec<Option<Child>>) -> Vec<bool> {
        let pids: Vec<String> = children
            .iter()
            .flatten()
            .map(|c| c.id().to_string())
            .collect();
        if !pids.is_empty() {
            let _ = Command::new("kill").arg("-TERM").args(&pids).status();
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        children
            .into_iter()
            .map(|c| c.is_none_or(|c| exited_by(c, deadline)))
            .collect()
    }

    /// Waits until `deadline` for `c` to exit; true if it exited successfully (killed
    /// and false at the deadline).
    fn exited_by(mut c: Child, deadline: Instant) -> bool {
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

    /// The last `lines` lines of the logs `root/node-N.log` of `n` nodes, for a failing
    /// test's message.
    pub fn log_tails(root: &Path, n: usize, lines: usize) -> String {
        (0..n)
            .map(|i| {
                let path = root.join(format!("node-{}.log", i + 1));
                let text = std::fs::read_to_string(&path).unwrap_or_default();
                let tail: Vec<&str> = text.lines().rev().take(lines).collect();
                let tail: Vec<&str> = tail.into_iter().rev().collect();
                format!("--- node {} ---\n{}", i + 1, tail.join("\n"))
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// One partition as a node's Metadata response shows it.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct PartitionView {
        /// The partition's error code (5 = LEADER_NOT_AVAILABLE), 0 for none.
        pub error: i16,
        /// Its leader, -1 for none.
        pub leader: i32,
        /// Its leader epoch.
        pub leader_epoch: i32,
        /// Its replicas, in assignment order (the first is the preferred leader).
        pub replicas: Vec<i32>,
        /// Its in-sync replicas, sorted.
        pub isr: Vec<i32>,
    }

    /// A node's view of the cluster and of one topic (Metadata v8).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct ClusterView {
        /// The controller, -1 if the node knows none.
        pub controller: i32,
        /// The brokers listed (unfenced ones), sorted.
        pub brokers: Vec<i32>,
        /// The topic's error code, 0 for none.
        pub topic_error: i16,
        /// The topic's partitions, by index.
        pub partitions: Vec<PartitionView>,
    }

    impl ClusterView {
        /// True if every partition has a leader and `n` in-sync replicas.
        pub fn fully_in_sync(&self, n: usize) -> bool {
            !self.partitions.is_empty()
                && self
                    .partitions
                    .iter()
                    .all(|p| p.error == 0 && p.leader >= 0 && p.isr.len() == n)
        }
    }

    /// Asks the node at `addr` for its metadata of `topic` (None if it does not answer
    /// within `timeout`: down, or holding requests until it caught up).
    pub fn describe(addr: &str, topic: &str, timeout: Duration) -> Option<ClusterView> {
        use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
        use kafka_protocol::messages::{MetadataRequest, MetadataResponse, TopicName};
        use kafka_protocol::protocol::StrBytes;
        let request = MetadataRequest::default()
            .with_topics(Some(vec![MetadataRequestTopic::default().with_name(Some(
                TopicName(StrBytes::from_string(topic.to_string())),
            ))]))
            .with_allow_auto_topic_creation(false);
        let response: MetadataResponse = call(addr, &request, 8, timeout)?;
        let mut brokers: Vec<i32> = response.brokers.iter().map(|b| b.node_id.0).collect();
        brokers.sort_unstable();
        let t = response.topics.first()?;
        let mut partitions: Vec<PartitionView> = t
            .partitions
            .iter()
            .map(|p| {
                let mut isr: Vec<i32> = p.isr_nodes.iter().map(|b| b.0).collect();
                isr.sort_unstable();
                PartitionView {
                    error: p.error_code,
                    leader: p.leader_id.0,
                    leader_epoch: p.leader_epoch,
                    replicas: p.replica_nodes.iter().map(|b| b.0).collect(),
                    isr,
                }
            })
            .collect();
        let mut order: Vec<usize> = (0..partitions.len()).collect();
        order.sort_by_key(|i| t.partitions[*i].partition_index);
        partitions = order.into_iter().map(|i| partitions[i].clone()).collect();
        Some(ClusterView {
            controller: response.controller_id.0,
            brokers,
            topic_error: t.error_code,
            partitions,
        })
    }

    /// The first answer to [`describe`] from the nodes of `layout` whose indexes are in
    /// `nodes`.
    pub fn describe_any(layout: &Layout, nodes: &[usize], topic: &str) -> Option<ClusterView> {
        nodes
            .iter()
            .find_map(|i| describe(&layout.addr(*i), topic, Duration::from_secs(2)))
    }

    /// One request/response over a fresh connection (Kafka framing), None on any
    /// failure.
    fn call<R: kafka_protocol::protocol::Request>(
        addr: &str,
        request: &R,
        version: i16,
        timeout: Duration,
    ) -> Option<R::Response> {
        KafkaConn::connect(addr, timeout)?.call(request, version)
    }

    /// One connection to a node speaking the Kafka protocol, a request at a time (so a
    /// SASL exchange and the requests after it share it).
    #[derive(Debug)]
    pub struct KafkaConn {
        stream: std::net::TcpStream,
        correlation: i32,
    }

    impl KafkaConn {
        /// Connects to `addr` (`host:port`); reads and writes time out after `timeout`.
        pub fn connect(addr: &str, timeout: Duration) -> Option<KafkaConn> {
            let sock: SocketAddr = addr.parse().ok()?;
            let stream = std::net::TcpStream::connect_timeout(&sock, timeout).ok()?;
            stream.set_read_timeout(Some(timeout)).ok()?;
            stream.set_write_timeout(Some(timeout)).ok()?;
            Some(KafkaConn {
                stream,
                correlation: 0,
            })
        }

        /// Sends `request` at `version` and reads its response; None on any failure
        /// (the connection closed, a bad frame, a wrong correlation id).
        pub fn call<R: kafka_protocol::protocol::Request>(
            &mut self,
            request: &R,
            version: i16,
        ) -> Option<R::Response> {
            use bytes::{Buf, BytesMut};
            use kafka_protocol::messages::{RequestHeader, ResponseHeader};
            use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};
            use std::io::{Read, Write};
            self.correlation += 1;
            let header = RequestHeader::default()
                .with_request_api_key(R::KEY)
                .with_request_api_version(version)
                .with_correlation_id(self.correlation)
                .with_client_id(Some(StrBytes::from_static_str("tidelog-interop")));
            let mut body = BytesMut::new();
            body.extend_from_slice(&[0; 4]);
            header.encode(&mut body, R::header_version(version)).ok()?;
            request.encode(&mut body, version).ok()?;
            let size = (body.len() - 4) as i32;
            body[..4].copy_from_slice(&size.to_be_bytes());
            self.stream.write_all(&body).ok()?;
            let mut len = [0u8; 4];
            self.stream.read_exact(&mut len).ok()?;
            let len = usize::try_from(i32::from_be_bytes(len)).ok()?;
            let mut buf = vec![0u8; len];
            self.stream.read_exact(&mut buf).ok()?;
            let mut bytes = bytes::Bytes::from(buf);
            let h =
                ResponseHeader::decode(&mut bytes, R::Response::header_version(version)).ok()?;
            if h.correlation_id != self.correlation {
                return None;
            }
            let response = R::Response::decode(&mut bytes, version).ok()?;
            (!bytes.has_remaining()).then_some(response)
        }
    }

    /// A partition's log as a stopped node left it in its data directory: its log end,
    /// every byte from its log start to its log end, and each record's offset and value.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct LogContents {
        /// The log end offset.
        pub end: i64,
        /// The high watermark the node recorded (`replication-offset-checkpoint`), if
        /// any.
        pub high_watermark: Option<i64>,
        /// The batches, as stored.
        pub bytes: Vec<u8>,
        /// `(offset, value)` of every record.
        pub records: Vec<(i64, Vec<u8>)>,
    }

    /// Reads partition `partition` of `topic` from the data directory `dir` of a stopped
    /// node (uncompressed batches, as the tests write them).
    ///
    /// # Panics
    /// If the log cannot be opened or read, naming it.
    pub fn read_log(dir: &Path, topic: &str, partition: i32) -> LogContents {
        use tidelog::LogConfig;
        use tidelog::storage::{PartitionLog, ReadLimit};
        let name = format!("{topic}-{partition}");
        let log = PartitionLog::open(dir.join(&name), &name, LogConfig::default())
            .unwrap_or_else(|e| panic!("open {}: {e}", dir.join(&name).display()));
        let end = log.log_end_offset();
        let mut out = LogContents {
            end,
            high_watermark: recorded_high_watermark(dir, &name),
            bytes: Vec::new(),
            records: Vec::new(),
        };
        let mut offset = log.log_start_offset();
        for _ in 0..1_000_000 {
            if offset >= end {
                break;
            }
            let s = log
                .read_bounded(offset, 1 << 20, ReadLimit::LogEnd)
                .unwrap_or_else(|e| panic!("read {name} at {offset}: {e}"));
            if s.is_empty() {
                break;
            }
            for b in s.batches() {
                for r in b.records() {
                    let r = r.unwrap_or_else(|e| panic!("a record of {name}: {e}"));
                    out.records
                        .push((r.offset, r.value.map(<[u8]>::to_vec).unwrap_or_default()));
                }
            }
            out.bytes.extend_from_slice(&s);
            offset = s.next_offset();
        }
        log.close().unwrap_or_else(|e| panic!("close {name}: {e}"));
        out
    }

    /// The high watermark of `name` in `dir/replication-offset-checkpoint` (Kafka's
    /// format: version, count, then `topic partition offset` lines).
    fn recorded_high_watermark(dir: &Path, name: &str) -> Option<i64> {
        let text = std::fs::read_to_string(dir.join("replication-offset-checkpoint")).ok()?;
        text.lines().skip(2).find_map(|l| {
            let mut f = l.split_whitespace();
            let (t, p, o) = (f.next()?, f.next()?, f.next()?);
            (format!("{t}-{p}") == name)
                .then(|| o.parse().ok())
                .flatten()
        })
    }

    /// A small seeded random number generator (SplitMix64), so a chaos run can be
    /// replayed from the seed it prints.
    #[derive(Debug, Clone)]
    pub struct Rng(u64);

    impl Rng {
        /// A generator from `seed`.
        pub fn new(seed: u64) -> Rng {
            Rng(seed)
        }

        /// The next 64 random bits.
        pub fn next_u64(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        }

        /// A number in `0..n` (`n` > 0).
        pub fn below(&mut self, n: u64) -> u64 {
            self.next_u64() % n
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

/// Numbered records for the cluster tests: an idempotent acks=all producer (librdkafka)
/// that sends `partition:sequence` values round-robin over a topic's partitions and
/// notes where and when each was acknowledged, and the check that a cluster's logs hold
/// every acknowledged record exactly once, in order, identically on every node.
pub mod numbered {
    use std::collections::{BTreeMap, HashMap};
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};

    use rdkafka::message::Message;
    use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
    use rdkafka::{ClientConfig, ClientContext};

    use crate::cluster::{Processes, read_log};

    /// One acknowledged record: its offset and when librdkafka reported it.
    #[derive(Debug, Clone, Copy)]
    pub struct Ack {
        /// The offset the acknowledgement gave.
        pub offset: i64,
        /// When the delivery report arrived.
        pub at: Instant,
    }

    /// What librdkafka reported: per partition, sequence -> acknowledgement, and the
    /// number of records it gave up on.
    #[derive(Clone, Default)]
    pub struct Deliveries {
        /// Per partition, by sequence number.
        pub acked: Arc<Mutex<HashMap<i32, BTreeMap<u64, Ack>>>>,
        /// Records librdkafka gave up on.
        pub failed: Arc<AtomicU64>,
    }

    impl Deliveries {
        /// Records acknowledged so far.
        pub fn acked_count(&self) -> u64 {
            self.acked
                .lock()
                .unwrap()
                .values()
                .map(|m| m.len() as u64)
                .sum()
        }

        /// The acknowledgements so far.
        pub fn snapshot(&self) -> HashMap<i32, BTreeMap<u64, Ack>> {
            self.acked.lock().unwrap().clone()
        }
    }

    impl ClientContext for Deliveries {}

    impl ProducerContext for Deliveries {
        type DeliveryOpaque = ();
        fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
            match result {
                Ok(m) => {
                    let (_, seq) = parse(m.payload().expect("a value"));
                    self.acked
                        .lock()
                        .unwrap()
                        .entry(m.partition())
                        .or_default()
                        .insert(
                            seq,
                            Ack {
                                offset: m.offset(),
                                at: Instant::now(),
                            },
                        );
                }
                Err(_) => {
                    self.failed.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }

    /// `partition:sequence`.
    pub fn parse(value: &[u8]) -> (i32, u64) {
        let s = std::str::from_utf8(value).expect("utf-8 value");
        let (p, n) = s.split_once(':').expect("partition:sequence");
        (p.parse().expect("partition"), n.parse().expect("sequence"))
    }

    /// An idempotent acks=all producer of `bootstrap` (uncompressed, so the logs can be
    /// read record by record) that gives up on a record after `message_timeout`.
    pub fn producer(bootstrap: &str, message_timeout: Duration) -> BaseProducer<Deliveries> {
        ClientConfig::new()
            .set("bootstrap.servers", bootstrap)
            .set("acks", "all")
            .set("enable.idempotence", "true")
            .set("compression.type", "none")
            .set("linger.ms", "5")
            .set(
                "message.timeout.ms",
                message_timeout.as_millis().to_string(),
            )
            .set("request.timeout.ms", "10000")
            .create_with_context(Deliveries::default())
            .expect("an rdkafka producer")
    }

    /// Sends `partition:n` records of `topic` round-robin over `partitions` (`n` from
    /// `first` in each) until `stop`, `count` were sent or 10 minutes passed, keeping
    /// at most `in_flight` unacknowledged per partition (a partition that stalls does
    /// not hold the others back) and pausing 2 ms every 20 records; then flushes for up
    /// to `flush`. Returns the number sent and whether the flush completed.
    #[allow(clippy::too_many_arguments)]
    pub fn run(
        producer: &BaseProducer<Deliveries>,
        topic: &str,
        partitions: i32,
        first: u64,
        count: u64,
        in_flight: u64,
        stop: &AtomicBool,
        flush: Duration,
    ) -> (u64, bool) {
        let d = producer.context().clone();
        let mut next = vec![first; partitions as usize];
        let mut sent = 0u64;
        let mut p = 0i32;
        let deadline = Instant::now() + Duration::from_secs(600);
        while !stop.load(Ordering::Acquire) && sent < count && Instant::now() < deadline {
            // The next partition with room in its window, if any.
            let room = {
                let acked = d.acked.lock().unwrap();
                let failed = d.failed.load(Ordering::Relaxed);
                (0..partitions).map(|k| (p + k) % partitions).find(|q| {
                    let done = acked.get(q).map_or(0, |m| m.len() as u64) + failed;
                    next[*q as usize] - first < done + in_flight
                })
            };
            let Some(q) = room else {
                producer.poll(Duration::from_millis(10));
                continue;
            };
            let value = format!("{q}:{}", next[q as usize]);
            match producer.send(
                BaseRecord::<(), String>::to(topic)
                    .payload(&value)
                    .partition(q),
            ) {
                Ok(()) => {
                    next[q as usize] += 1;
                    sent += 1;
                    p = (q + 1) % partitions;
                }
                Err(_) => {
                    producer.poll(Duration::from_millis(10));
                    continue;
                }
            }
            producer.poll(Duration::ZERO);
            if sent.is_multiple_of(20) {
                std::thread::sleep(Duration::from_millis(2));
            }
        }
        (sent, producer.flush(flush).is_ok())
    }

    /// After the nodes of `nodes` whose indexes are in `on` (the replicas) stopped: each
    /// partition of `topic` is byte-identical on them; every record of `acked` is in it at the offset its acknowledgement
    /// gave; no record is there twice, and a partition's records are in the order they
    /// were sent. Returns the number of records per partition.
    ///
    /// # Panics
    /// On the first rule broken, naming the partition, node and record.
    pub fn check_logs(
        nodes: &Processes,
        on: &[usize],
        topic: &str,
        partitions: i32,
        acked: &HashMap<i32, BTreeMap<u64, Ack>>,
    ) -> Vec<usize> {
        let mut counts = Vec::new();
        for p in 0..partitions {
            let logs: Vec<_> = on
                .iter()
                .map(|i| read_log(&nodes.dir(*i), topic, p))
                .collect();
            for (k, l) in logs.iter().enumerate().skip(1) {
                assert_eq!(
                    (l.end, l.bytes.len()),
                    (logs[0].end, logs[0].bytes.len()),
                    "{topic}-{p}: node {} and node {} end alike",
                    on[k] + 1,
                    on[0] + 1
                );
                assert!(
                    l.bytes == logs[0].bytes,
                    "{topic}-{p}: node {} holds the same bytes as node {}",
                    on[k] + 1,
                    on[0] + 1
                );
            }
            let mut at: HashMap<u64, i64> = HashMap::new();
            let mut last: Option<u64> = None;
            for (offset, value) in &logs[0].records {
                let (part, seq) = parse(value);
                assert_eq!(part, p, "{topic}-{p} holds only its own records");
                if let Some(first) = at.insert(seq, *offset) {
                    panic!(
                        "{topic}-{p}: record {seq} is in the log twice (offsets {first} and {offset})"
                    );
                }
                assert!(
                    last.is_none_or(|l| seq > l),
                    "{topic}-{p}: record {seq} at offset {offset} follows record {last:?}"
                );
                last = Some(seq);
            }
            for (seq, ack) in acked.get(&p).into_iter().flatten() {
                assert_eq!(
                    at.get(seq),
                    Some(&ack.offset),
                    "{topic}-{p}: acknowledged record {seq} at offset {}",
                    ack.offset
                );
            }
            counts.push(logs[0].records.len());
        }
        counts
    }
}

pub mod faults;
pub mod history;
pub mod transactions;
pub mod workload;
