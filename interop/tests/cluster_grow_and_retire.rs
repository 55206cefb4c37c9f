//! Growing a cluster and retiring a node online, with the commands docs/cluster.md walks
//! through: `tidelog serve` child processes, three voters (nodes 1 to 3) and two
//! broker-only nodes (4 and 5), each node in its own network namespace with its own
//! address, like a host of its own, when the test runs as root (`ip netns`), else on
//! 127.0.0.1 ports. A topic has six partitions with three replicas and
//! `min.insync.replicas=2`; an idempotent acks=all producer (librdkafka) sends numbered
//! records and a consumer group of two librdkafka members reads them throughout, while:
//!
//! 1. node 6 starts as a broker only and joins (`tidelog quorum describe` lists it as an
//!    observer);
//! 2. half of the partitions move to it (`tidelog reassign --execute`, then `--verify`
//!    until completed), each replacing its preferred leader; the replaced replicas
//!    delete their copy;
//! 3. the controller is removed from the voters (`tidelog quorum remove-voter`, one run:
//!    it hands its leadership away and the client follows it) and node 4 is added
//!    (`quorum add-voter`);
//! 4. the removed node is drained (`tidelog cluster drain`), stopped and unregistered
//!    (`tidelog cluster unregister`): `tidelog cluster describe` and Metadata no longer
//!    list it.
//!
//! At the end the producer flushed and gave up on nothing, the group delivered every
//! acknowledged record, and after a clean stop each partition's log is byte-identical on
//! its replicas; the history (acknowledgements, polls, a final read and the logs) has no
//! anomaly: no acknowledged record lost, none twice.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tidelog_interop::cluster::{
    ClusterView, cli, cli_ok, describe, eventually, free_ports, log_tails, read_log,
    terminate_child, terminate_children,
};
use tidelog_interop::faults::{Net, NetKind};
use tidelog_interop::history::{self, Event};
use tidelog_interop::workload::{self, History};

const TOPIC: &str = "orders";
const PARTITIONS: i32 = 6;
const GROUP: &str = "billing";
/// Nodes 1 to 6 (node 6 joins later); nodes 1 to 3 are the voters the cluster starts with.
const NODES: usize = 6;
const VOTERS: usize = 3;
const WAIT: Duration = Duration::from_secs(60);

/// Where the nodes run: each in a network namespace of its own (root), or on loopback
/// ports.
struct Hosts {
    /// The namespaces, when the test runs as root.
    net: Option<Net>,
    /// On loopback: each node's Kafka port and each voter's quorum port.
    kafka: Vec<u16>,
    quorum: Vec<u16>,
}

impl Hosts {
    /// Namespaces as root, unless `TIDELOG_FAULTS_NET=proxy` (as for the fault tests)
    /// asks for loopback.
    fn new() -> Hosts {
        let root = Command::new("id")
            .arg("-u")
            .output()
            .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
        let loopback = std::env::var("TIDELOG_FAULTS_NET").is_ok_and(|v| v == "proxy");
        let net = (root && !loopback)
            .then(|| Net::new(NODES))
            .filter(|n| n.kind() == NetKind::Namespaces);
        let ports = free_ports(NODES + VOTERS);
        Hosts {
            net,
            kafka: ports[..NODES].to_vec(),
            quorum: ports[NODES..].to_vec(),
        }
    }

    fn describe(&self) -> String {
        match &self.net {
            Some(n) => n.describe(),
            None => "127.0.0.1 ports".into(),
        }
    }

    /// The Kafka listener of node index `i`.
    fn client_addr(&self, i: usize) -> String {
        match &self.net {
            Some(n) => n.client_addr(i),
            None => format!("127.0.0.1:{}", self.kafka[i]),
        }
    }

    /// `--quorum`: the voters the cluster starts with, every node the same.
    fn quorum(&self) -> String {
        (0..VOTERS)
            .map(|i| match &self.net {
                // Each node has the whole port range of its own address.
                Some(_) => {
                    let addr = self.client_addr(i);
                    let host = addr.rsplit_once(':').expect("host:port").0;
                    format!("{}@{host}:9093", i + 1)
                }
                None => format!("{}@127.0.0.1:{}", i + 1, self.quorum[i]),
            })
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The command that runs the `tidelog` binary as node index `i`.
    fn command(&self, i: usize) -> Command {
        let bin = tidelog_interop::tidelog_bin();
        match &self.net {
            Some(n) => n.command(i, &bin),
            None => Command::new(bin),
        }
    }
}

/// The nodes, as `tidelog serve` child processes (killed when dropped).
struct Nodes {
    root: PathBuf,
    hosts: Hosts,
    children: Vec<Option<Child>>,
}

impl Nodes {
    fn dir(&self, i: usize) -> PathBuf {
        self.root.join(format!("node-{}", i + 1))
    }

    /// `tidelog serve --node-id N --listen ADDR --quorum VOTERS ...`: a voter if N is
    /// one of the voters, else a broker only.
    fn start(&mut self, i: usize) {
        let log = std::fs::File::options()
            .create(true)
            .append(true)
            .open(self.root.join(format!("node-{}.log", i + 1)))
            .expect("the node's log file");
        let child = self
            .hosts
            .command(i)
            .arg("serve")
            .arg("--data")
            .arg(self.dir(i))
            .args(["--node-id", &(i + 1).to_string()])
            .args(["--listen", &self.hosts.client_addr(i)])
            .args(["--quorum", &self.hosts.quorum()])
            .args(["--broker-session-timeout-ms", "2000"])
            .args(["--replica-lag-time-max-ms", "3000"])
            .args(["--offsets-topic-num-partitions", "6"])
            .args(["--group-initial-rebalance-delay-ms", "0"])
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn tidelog serve");
        self.children[i] = Some(child);
    }

    fn logs(&self) -> String {
        log_tails(&self.root, NODES, 30)
    }
}

impl Drop for Nodes {
    fn drop(&mut self) {
        for mut c in self.children.iter_mut().filter_map(Option::take) {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// `tidelog quorum describe`: the controller, the voters and the observers.
fn quorum(bootstrap: &str) -> Option<(i32, Vec<i32>, Vec<i32>)> {
    let out = cli_ok(bootstrap, &["quorum", "describe"])?;
    let field = |name: &str| -> Option<&str> {
        out.lines()
            .find_map(|l| l.strip_prefix(name))
            .map(str::trim)
    };
    let ids = |s: &str| -> Vec<i32> {
        s.trim_matches(|c| c == '[' || c == ']')
            .split(',')
            .filter_map(|x| x.parse().ok())
            .collect()
    };
    Some((
        field("LeaderId:")?.parse().ok()?,
        ids(field("CurrentVoters:")?),
        ids(field("CurrentObservers:")?),
    ))
}

/// `tidelog cluster describe`: each node listed, with its role.
fn cluster_nodes(bootstrap: &str) -> Option<Vec<(i32, String)>> {
    let out = cli_ok(bootstrap, &["cluster", "describe"])?;
    Some(
        out.lines()
            .filter_map(|l| {
                let rest = l.strip_prefix("Node: ")?;
                let (id, rest) = rest.split_once(' ')?;
                let role = rest.trim().strip_prefix("Role: ")?.split(' ').next()?;
                Some((id.parse().ok()?, role.to_string()))
            })
            .collect(),
    )
}

/// The topic as the first node (of those running) that answers sees it.
fn view(nodes: &Nodes) -> Option<ClusterView> {
    (0..NODES)
        .filter(|i| nodes.children[*i].is_some())
        .find_map(|i| describe(&nodes.hosts.client_addr(i), TOPIC, Duration::from_secs(2)))
}

/// Every partition led, with three in-sync replicas: its replica set.
fn in_sync(nodes: &Nodes) -> Option<Vec<Vec<i32>>> {
    let v = view(nodes)?;
    v.fully_in_sync(3)
        .then(|| v.partitions.iter().map(|p| p.replicas.clone()).collect())
}

/// Runs `tidelog COMMAND --bootstrap BOOTSTRAP` (COMMAND split at spaces), which must
/// succeed, and prints it with its output.
fn run(bootstrap: &str, command: &str) -> String {
    let args: Vec<&str> = command.split_whitespace().collect();
    let (code, out, err) = cli(bootstrap, &args);
    assert_eq!(code, 0, "tidelog {command}: {out}{err}");
    print!("$ tidelog {command}\n{out}");
    out
}

#[test]
fn a_cluster_grows_moves_partitions_changes_voters_and_retires_a_node() {
    let started = Instant::now();
    let root = tempfile::tempdir().unwrap();
    let mut nodes = Nodes {
        root: root.path().to_path_buf(),
        hosts: Hosts::new(),
        children: (0..NODES).map(|_| None).collect(),
    };
    println!("nodes on {}", nodes.hosts.describe());
    for i in 0..5 {
        nodes.start(i);
    }
    let bootstrap = (0..NODES)
        .map(|i| nodes.hosts.client_addr(i))
        .collect::<Vec<_>>()
        .join(",");
    let b = bootstrap.as_str();
    eventually("5 brokers, nodes 4 and 5 observers", WAIT, || {
        let q = quorum(b)?;
        (view(&nodes)?.brokers == [1, 2, 3, 4, 5] && q.1 == [1, 2, 3] && q.2 == [4, 5])
            .then_some(())
    });
    run(
        b,
        &format!(
            "topics create {TOPIC} --partitions {PARTITIONS} --replication-factor 3 --config min.insync.replicas=2"
        ),
    );
    eventually("every partition in sync", WAIT, || in_sync(&nodes));

    let history = History::default();
    let stop_consumers = Arc::new(AtomicBool::new(false));
    let members: Vec<_> = (0..2)
        .map(|m| {
            let name = format!("{GROUP}-{m}");
            workload::member(
                b,
                TOPIC,
                GROUP,
                "earliest",
                &name,
                &history,
                &stop_consumers,
            )
        })
        .collect();
    let sender = workload::produce_in_background(b, TOPIC, PARTITIONS, 300, WAIT);
    let deliveries = sender.deliveries.clone();
    eventually("records acknowledged", WAIT, || {
        (deliveries.acked_count() >= 100).then_some(())
    });

    // 1. Node 6 joins as a broker only.
    println!("[{:.1?}] node 6 joins", started.elapsed());
    nodes.start(5);
    eventually("node 6 a broker and an observer", WAIT, || {
        let q = quorum(b)?;
        (view(&nodes)?.brokers.contains(&6) && q.2.contains(&6)).then_some(())
    });

    // 2. Half of the partitions move to node 6, each in place of its preferred leader.
    println!(
        "[{:.1?}] half of the partitions move to node 6",
        started.elapsed()
    );
    let before = eventually("every partition in sync", WAIT, || in_sync(&nodes));
    let moved: Vec<(i32, i32)> = (0..PARTITIONS)
        .step_by(2)
        .map(|p| (p, before[p as usize][0]))
        .collect();
    let plan = moved
        .iter()
        .map(|(p, _)| {
            let mut r = before[*p as usize].clone();
            r[0] = 6;
            format!(r#"{{"topic":"{TOPIC}","partition":{p},"replicas":{r:?}}}"#)
        })
        .collect::<Vec<_>>()
        .join(",");
    let plan_file = root.path().join("move.json");
    std::fs::write(
        &plan_file,
        format!(r#"{{"version":1,"partitions":[{plan}]}}"#),
    )
    .unwrap();
    let plan_file = plan_file.to_str().unwrap();
    run(
        b,
        &format!("reassign --execute --reassignment-json-file {plan_file}"),
    );
    let verify = format!("reassign --verify --reassignment-json-file {plan_file}");
    eventually("the moves completed", WAIT, || {
        let args: Vec<&str> = verify.split_whitespace().collect();
        let out = cli_ok(b, &args)?;
        (out.matches("is completed.").count() == moved.len()).then_some(())
    });
    run(b, &verify);
    for (p, old) in &moved {
        let copy = nodes.dir(*old as usize - 1).join(format!("{TOPIC}-{p}"));
        eventually(
            &format!("node {old}'s copy of {TOPIC}-{p} deleted"),
            WAIT,
            || (!copy.exists()).then_some(()),
        );
    }

    // 3. The controller leaves the voters (one run: it hands its leadership away and
    // the client asks the new controller); node 4 becomes a voter.
    println!(
        "[{:.1?}] the controller leaves the voters",
        started.elapsed()
    );
    let (controller, _, _) = quorum(b).expect("the quorum described");
    let c = controller.to_string();
    run(b, &format!("quorum remove-voter --node-id {c}"));
    run(b, "quorum add-voter --node-id 4");
    let mut voters: Vec<i32> = (1..=3).filter(|v| *v != controller).collect();
    voters.push(4);
    eventually("the new voters", WAIT, || {
        let q = quorum(b)?;
        (q.1 == voters && q.2.contains(&controller) && q.0 != controller).then_some(())
    });
    run(b, "quorum describe");

    // 4. The old controller is drained, stopped and unregistered.
    println!("[{:.1?}] the old controller retires", started.elapsed());
    let out = run(b, &format!("cluster drain --node {c}"));
    assert!(out.contains(&format!("Node {c} is drained.")), "{out}");
    let gone = controller as usize - 1;
    eventually(&format!("node {c} holds no partition data"), WAIT, || {
        (0..PARTITIONS)
            .all(|p| !nodes.dir(gone).join(format!("{TOPIC}-{p}")).exists())
            .then_some(())
    });
    let child = nodes.children[gone].take().expect("running");
    assert!(terminate_child(child), "node {c} stops cleanly");
    run(b, &format!("cluster unregister --node {c}"));
    eventually(&format!("node {c} no longer listed"), WAIT, || {
        let listed = cluster_nodes(b)?;
        let ids: BTreeSet<i32> = listed.iter().map(|(id, _)| *id).collect();
        (!ids.contains(&controller) && !view(&nodes)?.brokers.contains(&controller))
            .then_some(listed)
    });
    run(b, "cluster describe");

    // The end: the producer flushes, the group delivers every acknowledged record.
    println!("[{:.1?}] the checks", started.elapsed());
    let (sent, flushed) = sender.stop();
    let failed = deliveries.failed.load(Ordering::Relaxed);
    let acked = workload::acked_events(&deliveries);
    println!(
        "{sent} sent, {} acknowledged, {failed} given up, flushed: {flushed}",
        acked.len()
    );
    let all_delivered = || {
        let got = workload::delivered(&history.events(), GROUP);
        acked.iter().all(|e| match e {
            Event::Acked {
                partition, value, ..
            } => got.contains(&(*partition, value.clone())),
            _ => true,
        })
    };
    let waited = Instant::now();
    while waited.elapsed() < WAIT && !all_delivered() {
        std::thread::sleep(Duration::from_millis(200));
    }
    stop_consumers.store(true, Ordering::Release);
    for m in members {
        m.join().unwrap();
    }
    let (read, complete) = workload::read_all(b, TOPIC, PARTITIONS, "final-read", WAIT);
    assert!(complete, "the final read reached every partition's end");
    let replicas = eventually("every partition in sync", WAIT, || in_sync(&nodes));
    for (p, _) in &moved {
        assert!(replicas[*p as usize].contains(&6), "{replicas:?}");
    }
    let stopped = terminate_children(nodes.children.iter_mut().map(Option::take).collect());
    assert!(
        stopped.iter().all(|ok| *ok),
        "every node stops cleanly: {stopped:?}\n{}",
        nodes.logs()
    );

    // Each partition's log is byte-identical on its replicas.
    let mut events = history.events();
    events.extend(acked);
    events.extend(read);
    for (p, on) in replicas.iter().enumerate() {
        let logs: Vec<_> = on
            .iter()
            .map(|n| read_log(&nodes.dir(*n as usize - 1), TOPIC, p as i32))
            .collect();
        for (k, l) in logs.iter().enumerate().skip(1) {
            assert!(
                l.end == logs[0].end && l.bytes == logs[0].bytes,
                "{TOPIC}-{p}: node {} holds the same bytes as node {}",
                on[k],
                on[0]
            );
        }
        for (offset, value) in &logs[0].records {
            events.push(Event::Polled {
                consumer: format!("node-{}-log", on[0]),
                group: None,
                partition: p as i32,
                offset: *offset,
                value: String::from_utf8_lossy(value).into_owned(),
            });
        }
    }
    let report = history::check(&events);
    println!(
        "{} acknowledged, {} polled by the group, anomalies {:?}; {:?} in all",
        report.acked,
        report.polled,
        report.counts(),
        started.elapsed()
    );
    for a in report.anomalies.iter().take(20) {
        println!("  {a}");
    }
    assert!(report.acked > 0, "records were acknowledged");
    assert!(report.anomalies.is_empty(), "no anomaly");
    assert_eq!(failed, 0, "the producer gave up on no record");
    assert!(flushed, "the producer flushed");
}
