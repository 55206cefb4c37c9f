//! Shared setup of the tests that drive tidelog's own network client against three
//! `tidelog serve` child processes: replication factor 3, `min.insync.replicas=2`,
//! short session and lag timeouts so a killed leader is replaced quickly; and the
//! numbered records the store-and-forward tests write locally and check remotely.
#![allow(dead_code)] // each test uses its part

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tidelog::{
    Broker, ClientConfig, Cluster, Consumer, ConsumerConfig, IsolationLevel, OffsetReset, Producer,
    ProducerRecord, TopicConfig,
};
use tidelog_interop::cluster::{Processes, eventually};

/// How long each setup step may take.
pub const WAIT: Duration = Duration::from_secs(60);

/// Client settings that retry quickly through a leader change and give a send long
/// enough to outlive one.
pub fn config(bootstrap: &str) -> ClientConfig {
    ClientConfig::new(bootstrap)
        .set("retry.backoff.ms", 50)
        .set("request.timeout.ms", 5000)
        .set("delivery.timeout.ms", 90_000)
}

/// Three nodes under `root` with a topic of `partitions` partitions whose replicas are
/// all in sync: the nodes, their bootstrap list, a `Cluster` connected to them and the
/// leader of partition 0.
pub fn three_nodes_with_topic(
    root: &Path,
    topic: &str,
    partitions: i32,
) -> (Processes, String, Cluster, i32) {
    let (nodes, bootstrap, cluster) = three_nodes(root, "2000", "3000");
    eventually("the topic", WAIT, || {
        cluster
            .create_topic_if_missing(topic, partitions, TopicConfig::new())
            .ok()
    });
    let leader = eventually("in-sync leaders", WAIT, || {
        let t = cluster.describe_topic(topic).ok()?;
        let all_in_sync = t.partitions.iter().all(|p| p.isr.len() == 3);
        all_in_sync.then_some(t.partitions[0].leader?)
    });
    (nodes, bootstrap, cluster, leader)
}

/// Three nodes under `root` (replication factor 3, `min.insync.replicas=2`) with
/// broker session and replica lag timeouts of `session_ms` and `lag_ms`: the nodes,
/// their bootstrap list and a `Cluster` connected to all three.
pub fn three_nodes(root: &Path, session_ms: &str, lag_ms: &str) -> (Processes, String, Cluster) {
    let nodes = Processes::start(
        tidelog_interop::tidelog_bin(),
        root,
        3,
        &[
            "--broker-session-timeout-ms",
            session_ms,
            "--replica-lag-time-max-ms",
            lag_ms,
            "--default-replication-factor",
            "3",
            "--min-insync-replicas",
            "2",
        ],
    );
    let bootstrap = nodes.layout.bootstrap();
    let cluster = eventually("three brokers", WAIT, || {
        Cluster::connect(config(&bootstrap))
            .ok()
            .filter(|c| c.brokers().len() == 3)
    });
    (nodes, bootstrap, cluster)
}

/// A `tidelog forward` child process that is killed when dropped: a test that fails
/// while its forwarder runs leaves no forwarder retrying a cluster that is gone.
pub struct ForwardChild(Option<Child>);

impl ForwardChild {
    /// SIGKILLs the child and reaps it.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// The child, no longer killed on drop (to stop it another way).
    pub fn into_inner(mut self) -> Child {
        self.0.take().expect("a running forwarder")
    }
}

impl Drop for ForwardChild {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Starts `tidelog forward --name edge` on `data` to `bootstrap` for `topic` as a child
/// process, its stderr appended to `log`.
pub fn forward_child(data: &Path, bootstrap: &str, topic: &str, log: &Path) -> ForwardChild {
    forward_child_with(data, bootstrap, topic, log, &[])
}

/// [`forward_child`] with more arguments.
pub fn forward_child_with(
    data: &Path,
    bootstrap: &str,
    topic: &str,
    log: &Path,
    more: &[&str],
) -> ForwardChild {
    let log = std::fs::File::options()
        .create(true)
        .append(true)
        .open(log)
        .unwrap();
    Command::new(tidelog_interop::tidelog_bin())
        .args(["forward", "--data"])
        .arg(data)
        .args(["--bootstrap", bootstrap, "--topic", topic, "--name", "edge"])
        .args(more)
        .env("TIDELOG_PROGRESS", "never")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .map(|c| ForwardChild(Some(c)))
        .unwrap()
}

/// An embedded log in a new temporary directory with `topic` of `partitions`
/// partitions: the local side of store-and-forward.
pub fn local_log(topic: &str, partitions: i32) -> (tempfile::TempDir, Broker) {
    let dir = tempfile::tempdir().unwrap();
    let local = Broker::open(dir.path()).unwrap();
    local
        .create_topic(topic, partitions, TopicConfig::new())
        .unwrap();
    (dir, local)
}

/// Writes records `from..to` into local `topic`: each one's value is its number, its
/// partition the number modulo `partitions`.
pub fn write_numbers(local: &Broker, topic: &str, partitions: i32, (from, to): (u32, u32)) {
    let producer = Producer::new(local).unwrap();
    for i in from..to {
        let value = i.to_string();
        producer
            .send(
                topic,
                ProducerRecord::new(value.as_bytes()).partition(i as i32 % partitions),
            )
            .unwrap();
    }
    producer.flush().unwrap();
}

/// Reads remote `topic` from the start (`WAIT` at most), as a reader of committed
/// records (the forwarder's aborted transactions are not there for it), and asserts
/// that it holds the numbers `0..records` that [`write_numbers`] wrote: each partition
/// every number of it once, in local order, and nothing beyond them.
pub fn check_every_number_once_in_order(
    cluster: &Cluster,
    topic: &str,
    partitions: i32,
    records: u32,
) {
    let mut consumer = Consumer::new(
        cluster,
        ConsumerConfig::default()
            .auto_offset_reset(OffsetReset::Earliest)
            .isolation_level(IsolationLevel::ReadCommitted),
    );
    let all: Vec<(&str, i32)> = (0..partitions).map(|p| (topic, p)).collect();
    consumer.assign(&all).unwrap();
    let mut remote: Vec<Vec<u32>> = vec![Vec::new(); partitions as usize];
    let deadline = Instant::now() + WAIT;
    while remote.iter().map(Vec::len).sum::<usize>() < records as usize && Instant::now() < deadline
    {
        let records = consumer.poll(Duration::from_millis(200)).unwrap();
        for r in &records {
            let r = r.unwrap();
            let v: u32 = std::str::from_utf8(r.value.unwrap())
                .unwrap()
                .parse()
                .unwrap();
            remote[r.partition as usize].push(v);
        }
    }
    // Nothing more than every record: a last look finds no duplicate after them.
    let extra = consumer.poll(Duration::from_millis(500)).unwrap();
    assert_eq!(extra.iter().count(), 0, "no record beyond the local ones");
    for p in 0..partitions {
        let want: Vec<u32> = (0..records)
            .filter(|i| *i as i32 % partitions == p)
            .collect();
        let got = &remote[p as usize];
        assert_eq!(got.len(), want.len(), "partition {p}: every record, once");
        assert!(*got == want, "partition {p}: in local order, once");
    }
}
