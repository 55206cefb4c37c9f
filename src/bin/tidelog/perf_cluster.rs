//! `tidelog perf cluster`: replicated writes over the network. It starts `tidelog serve`
//! child processes on 127.0.0.1 (one single node, then a cluster of three), creates a
//! topic of replication factor 1 on the single node and one of replication factor 3
//! (`min.insync.replicas` 2) on the cluster, and drives each with Kafka Produce requests
//! (v8) on one connection to the partition's leader, with `acks=1` and then `acks=all`:
//!
//! - throughput: `--records` records in requests of `--batch` records, at most
//!   `--in-flight` requests unanswered (Kafka's `max.in.flight.requests.per.connection`,
//!   5), unpaced; records per second and the ack latency of a request (sent to answered);
//! - latency: `--latency-records` records due at `--latency-rate` per second; each request
//!   carries the records due when the window has room (a producer with `linger.ms` 0:
//!   one record a request while the acks keep up), and a record's latency runs from when
//!   it was due to when its request was acknowledged: p50/p99/p99.9.
//!
//! On the cluster, a second topic with `durable.acks=true` is driven with `acks=all` too
//! (`rf3_acksall_durable`): the cost of answering only once every in-sync replica has
//! fsynced the write.
//!
//! Every configuration runs once, one after the other, in the same invocation, so their
//! ratios come from one machine state. The nodes are stopped (SIGKILL: their data is a
//! benchmark's, in a directory removed at the end) when the command ends, also on error.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::sync_channel;
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::{
    ApiKey, ProduceRequest, ProduceResponse, ResponseHeader, TopicName, produce_request,
};
use kafka_protocol::protocol::{Decodable, StrBytes};
use tidelog::BatchBuilder;
use tidelog::admin::{AdminClient, NewTopic};

use crate::cli::PerfClusterArgs;
use crate::perf::{RunDir, current_exe, percentile_us, report_fields};
use crate::{CliResult, fail};

/// The Produce version sent (Kafka 2.1+; every field this benchmark needs).
const PRODUCE_VERSION: i16 = 8;
/// How long the nodes get to start and elect a controller and leaders.
const START_TIMEOUT: Duration = Duration::from_secs(90);
/// How long one Produce may take before the run fails.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// The `tidelog serve` processes of a run, killed on drop.
pub(crate) struct Nodes {
    children: Vec<Child>,
    /// Client addresses, in node order.
    bootstrap: Vec<String>,
}

impl Drop for Nodes {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Nodes {
    /// One node (`count` 1) or a cluster of `count` nodes (`--node-id`, `--quorum`),
    /// each in a directory under `dir` with its log in `node-N.log`.
    fn start(dir: &Path, label: &str, count: usize) -> CliResult<Nodes> {
        Nodes::start_with(dir, label, count, &[])
    }

    /// [`start`](Self::start), each node given `extra` `tidelog serve` options too.
    pub(crate) fn start_with(
        dir: &Path,
        label: &str,
        count: usize,
        extra: &[&str],
    ) -> CliResult<Nodes> {
        let mut ports = free_ports(2 * count)?;
        let peer = ports.split_off(count);
        let client = ports;
        let quorum = peer
            .iter()
            .enumerate()
            .map(|(i, p)| format!("{}@127.0.0.1:{p}", i + 1))
            .collect::<Vec<_>>()
            .join(",");
        let exe = current_exe()?;
        let mut nodes = Nodes {
            children: Vec::new(),
            bootstrap: client.iter().map(|p| format!("127.0.0.1:{p}")).collect(),
        };
        for i in 0..count {
            let data = dir.join(format!("{label}-{}", i + 1));
            let log = std::fs::File::create(dir.join(format!("{label}-{}.log", i + 1)))
                .map_err(|e| fail!("cannot create a node's log in {}: {e}", dir.display()))?;
            let mut cmd = Command::new(&exe);
            cmd.arg("serve")
                .arg("--data")
                .arg(&data)
                .args(["--listen", &nodes.bootstrap[i]])
                .args(extra);
            if count > 1 {
                cmd.args(["--node-id", &(i + 1).to_string(), "--quorum", &quorum]);
            }
            let child = cmd
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::from(log))
                .spawn()
                .map_err(|e| fail!("cannot start tidelog serve: {e}"))?;
            nodes.children.push(child);
        }
        Ok(nodes)
    }

    /// The nodes' process ids, in node order.
    pub(crate) fn pids(&self) -> Vec<u32> {
        self.children.iter().map(Child::id).collect()
    }

    pub(crate) fn bootstrap(&self) -> String {
        self.bootstrap.join(",")
    }

    /// Fails if a node has exited.
    pub(crate) fn check_alive(&mut self, dir: &Path, label: &str) -> CliResult {
        for (i, c) in self.children.iter_mut().enumerate() {
            if let Ok(Some(status)) = c.try_wait() {
                let log = dir.join(format!("{label}-{}.log", i + 1));
                let tail = std::fs::read_to_string(&log).unwrap_or_default();
                let tail: Vec<&str> = tail.lines().rev().take(5).collect();
                return Err(fail!(
                    "node {} ({label}) exited ({status}); its log ends with: {}",
                    i + 1,
                    tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
                ));
            }
        }
        Ok(())
    }
}

/// `n` different ports free on 127.0.0.1 right now, below Linux's ephemeral range
/// (32768-60999): a port the kernel hands out for an outgoing connection could be taken
/// by a node started first before the node meant to listen on it binds it.
fn free_ports(n: usize) -> CliResult<Vec<u16>> {
    const FIRST: u32 = 20_000;
    const SPAN: u32 = 12_000;
    let start = std::process::id().wrapping_mul(7919) % SPAN;
    let held: Vec<TcpListener> = (0..SPAN)
        .filter_map(|i| TcpListener::bind(("127.0.0.1", (FIRST + (start + i) % SPAN) as u16)).ok())
        .take(n)
        .collect();
    if held.len() < n {
        return Err(fail!("cannot find {n} free ports on 127.0.0.1 below 32768"));
    }
    held.iter()
        .map(|l| l.local_addr().map(|a| a.port()))
        .collect::<std::io::Result<_>>()
        .map_err(|e| fail!("cannot find a free port on 127.0.0.1: {e}"))
}

/// A topic a benchmark makes: its partitions, replication factor, whether it sets
/// `durable.acks`, and whether it must stay empty.
#[derive(Clone, Copy)]
pub(crate) struct TopicSpec {
    pub(crate) partitions: i32,
    pub(crate) rf: i16,
    pub(crate) durable: bool,
    /// No record is written to it: partition 0's leader is not probed with a Produce
    /// (the caller checks that the leaders serve its partitions).
    pub(crate) empty: bool,
}

impl TopicSpec {
    /// One partition of `rf` replicas, without `durable.acks`.
    pub(crate) fn single(rf: i16) -> TopicSpec {
        TopicSpec {
            partitions: 1,
            rf,
            durable: false,
            empty: false,
        }
    }
}

/// The start of a run against one node: the run directory (`data`, or a temporary one
/// for `mode`), one `tidelog serve` child process in it named `label`, and `topic` made
/// there with `partitions` partitions of one replica and no record, each with a leader.
pub(crate) fn one_node_with_empty_topic(
    data: Option<&Path>,
    mode: &str,
    label: &str,
    topic: &str,
    partitions: i32,
) -> CliResult<(RunDir, Nodes)> {
    let dir = RunDir::new(data, mode)?;
    let mut nodes = Nodes::start_with(dir.path(), label, 1, &[])?;
    let spec = TopicSpec {
        partitions,
        rf: 1,
        durable: false,
        empty: true,
    };
    create_topic(&mut nodes, dir.path(), label, topic, spec)?;
    Ok((dir, nodes))
}

/// Creates `topic` as `spec` says (with `min.insync.replicas` one below a replication
/// factor above 1) on `nodes` once they serve, and waits until every partition has a
/// known leader and all its replicas in sync, and, unless `spec.empty`, partition 0's
/// leader takes a Produce of one record (the metadata of another node can show the
/// partition before its leader has opened it); partition 0's leader's address.
pub(crate) fn create_topic(
    nodes: &mut Nodes,
    dir: &Path,
    label: &str,
    topic: &str,
    spec: TopicSpec,
) -> CliResult<String> {
    let TopicSpec {
        partitions,
        rf,
        durable,
        empty,
    } = spec;
    let deadline = Instant::now() + START_TIMEOUT;
    let mut last = String::from("no answer yet");
    let mut created = false;
    while Instant::now() < deadline {
        nodes.check_alive(dir, label)?;
        let attempt = (|| -> Result<Option<String>, String> {
            let admin = AdminClient::builder(nodes.bootstrap())
                .request_timeout(Duration::from_secs(10))
                .connect()
                .map_err(|e| e.to_string())?;
            if !created {
                let mut new = NewTopic::new(topic)
                    .partitions(partitions)
                    .replication_factor(rf);
                if rf > 1 {
                    new = new.config("min.insync.replicas", (rf - 1).to_string());
                }
                if durable {
                    new = new.config("durable.acks", "true");
                }
                let result = admin.create_topics(&[new]).map_err(|e| e.to_string())?;
                match result.into_values().next() {
                    Some(Err(e)) if !e.to_string().contains("exists") => return Err(e.to_string()),
                    _ => created = true,
                }
            }
            let meta = admin.metadata().map_err(|e| e.to_string())?;
            let Some(t) = meta.topics.iter().find(|t| t.name == topic) else {
                return Ok(None);
            };
            let ready = t.partitions.len() == partitions as usize
                && t.partitions
                    .iter()
                    .all(|p| p.leader.is_some() && p.isr.len() == rf as usize);
            let first = t.partitions.iter().find(|p| p.partition == 0);
            let leader = first
                .and_then(|p| p.leader)
                .and_then(|l| meta.brokers.iter().find(|b| b.id == l));
            match leader {
                Some(b) if ready => Ok(Some(format!("{}:{}", b.host, b.port))),
                _ => Ok(None),
            }
        })();
        match attempt {
            Ok(Some(leader)) if empty => return Ok(leader),
            Ok(Some(leader)) => match probe(&leader, topic) {
                Ok(()) => return Ok(leader),
                Err(crate::Fail::Msg(e)) => {
                    last = format!("the leader at {leader} does not take a Produce yet: {e}")
                }
                Err(crate::Fail::BrokenPipe) => return Err(crate::Fail::BrokenPipe),
            },
            Ok(None) => last = "a partition has no leader or not every replica in sync yet".into(),
            Err(e) => last = e,
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    Err(fail!(
        "topic {topic} on the {label} nodes was not ready within {START_TIMEOUT:?}: {last}"
    ))
}

/// Sends one record to `topic` partition 0 at `leader` (acks=1) and reads the answer:
/// an error if it is refused.
fn probe(leader: &str, topic: &str) -> CliResult {
    let addr: SocketAddr = leader
        .parse()
        .map_err(|e| fail!("the leader's address {leader:?}: {e}"))?;
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
        .map_err(|e| fail!("cannot connect to {leader}: {e}"))?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok();
    let frame = produce_frame(topic, 1, &batch_of(1, 8), 1)?;
    stream
        .write_all(&frame)
        .map_err(|e| fail!("sending a Produce to {leader}: {e}"))?;
    read_response(&mut stream)
}

/// One configuration's figures.
struct Measured {
    records_per_s: f64,
    /// Ack latencies of the throughput run's requests, ns, sorted.
    throughput_acks: Vec<u64>,
    /// Latencies of the paced run's records (due to acknowledged), ns, sorted.
    paced_acks: Vec<u64>,
    paced_rate: f64,
}

/// The Produce request frames of `topic` partition 0 carrying `batch`, with `acks`.
fn produce_frame(topic: &str, acks: i16, batch: &Bytes, correlation_id: i32) -> CliResult<Vec<u8>> {
    let request = ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(REQUEST_TIMEOUT.as_millis() as i32)
        .with_topic_data(vec![
            produce_request::TopicProduceData::default()
                .with_name(TopicName(StrBytes::from_string(topic.to_string())))
                .with_partition_data(vec![
                    produce_request::PartitionProduceData::default()
                        .with_index(0)
                        .with_records(Some(batch.clone())),
                ]),
        ]);
    crate::perf_groups::frame(
        &request,
        PRODUCE_VERSION,
        correlation_id,
        "tidelog-perf-cluster",
    )
    .map(|b| b.to_vec())
}

/// Reads one Produce response; fails on any error code in it.
fn read_response(stream: &mut TcpStream) -> CliResult {
    let mut size = [0u8; 4];
    stream
        .read_exact(&mut size)
        .map_err(|e| fail!("reading a Produce response: {e}"))?;
    let mut body = vec![0u8; i32::from_be_bytes(size).max(0) as usize];
    stream
        .read_exact(&mut body)
        .map_err(|e| fail!("reading a Produce response: {e}"))?;
    let mut b = Bytes::from(body);
    let version = ApiKey::Produce.response_header_version(PRODUCE_VERSION);
    ResponseHeader::decode(&mut b, version)
        .and_then(|_| ProduceResponse::decode(&mut b, PRODUCE_VERSION))
        .map_err(|e| fail!("cannot decode a Produce response: {e}"))?
        .responses
        .iter()
        .flat_map(|t| t.partition_responses.iter())
        .find(|p| p.error_code != 0)
        .map_or(Ok(()), |p| {
            Err(fail!(
                "Produce refused with error code {}: {:?}",
                p.error_code,
                p.error_message
            ))
        })
}

/// What a run sends.
enum Load {
    /// `requests` requests of `batch` (`records` records each), as fast as the window
    /// lets them go.
    Unpaced {
        batch: Bytes,
        records: usize,
        requests: u64,
    },
    /// `records` records of `size` bytes, record `i` due at `i / rate` s: each request
    /// carries every record due when the window has room (at most `max_batch`), as a
    /// producer with `linger.ms` 0 does under backpressure.
    Paced {
        records: u64,
        size: usize,
        rate: u64,
        max_batch: usize,
    },
}

/// What one request carried, for its acknowledgement.
struct Sent {
    at: Instant,
    first: u64,
    count: u64,
}

/// Runs `load` against `leader` with `acks`, at most `in_flight` requests unanswered:
/// the seconds it took, the records sent, and the sorted latencies (ns): of each
/// request (sent to answered) when unpaced, of each record (due to answered) when paced.
fn drive(
    leader: &str,
    topic: &str,
    acks: i16,
    load: &Load,
    in_flight: usize,
) -> CliResult<(f64, u64, Vec<u64>)> {
    let addr: SocketAddr = leader
        .parse()
        .map_err(|e| fail!("the leader's address {leader:?}: {e}"))?;
    let mut reader = TcpStream::connect_timeout(&addr, REQUEST_TIMEOUT)
        .map_err(|e| fail!("cannot connect to {leader}: {e}"))?;
    reader.set_nodelay(true).ok();
    reader.set_read_timeout(Some(REQUEST_TIMEOUT)).ok();
    let mut writer = reader
        .try_clone()
        .map_err(|e| fail!("cannot clone the connection to {leader}: {e}"))?;
    // The window: a token per request in flight, returned when it is answered.
    let (window_tx, window_rx) = sync_channel::<()>(in_flight.max(1));
    let (sent_tx, sent_rx) = std::sync::mpsc::channel::<Sent>();
    let t0 = Instant::now();
    let paced_interval = match load {
        Load::Paced { rate, .. } => Some(1e9 / (*rate).max(1) as f64),
        Load::Unpaced { .. } => None,
    };
    let latencies = std::thread::scope(|scope| -> CliResult<(Vec<u64>, u64)> {
        let receiver = scope.spawn(move || -> CliResult<Vec<u64>> {
            let mut lat = Vec::new();
            while let Ok(sent) = sent_rx.recv() {
                read_response(&mut reader)?;
                let now = Instant::now();
                let _ = window_rx.try_recv();
                match paced_interval {
                    None => lat.push(now.duration_since(sent.at).as_nanos() as u64),
                    Some(ns) => lat.extend((sent.first..sent.first + sent.count).map(|i| {
                        let due = t0 + Duration::from_nanos((i as f64 * ns) as u64);
                        now.saturating_duration_since(due).as_nanos() as u64
                    })),
                }
            }
            Ok(lat)
        });
        let sender = (|| -> CliResult<u64> {
            let mut next = 0u64;
            let mut correlation = 0i32;
            loop {
                let (frame, count) = match load {
                    Load::Unpaced {
                        batch,
                        records,
                        requests,
                    } => {
                        if correlation as u64 >= *requests {
                            return Ok(next);
                        }
                        if window_tx.send(()).is_err() {
                            return Ok(next);
                        }
                        let frame = produce_frame(topic, acks, batch, correlation)?;
                        (frame, *records as u64)
                    }
                    Load::Paced {
                        records,
                        size,
                        rate,
                        max_batch,
                    } => {
                        if next >= *records {
                            return Ok(next);
                        }
                        let due = t0 + Duration::from_nanos(next * 1_000_000_000 / (*rate).max(1));
                        let now = Instant::now();
                        if due > now {
                            std::thread::sleep(due - now);
                        }
                        if window_tx.send(()).is_err() {
                            return Ok(next);
                        }
                        // Every record due by now goes in this request.
                        let elapsed = t0.elapsed().as_nanos() as u64;
                        let due_now =
                            (elapsed as u128 * (*rate) as u128 / 1_000_000_000) as u64 + 1;
                        let count = due_now
                            .min(*records)
                            .saturating_sub(next)
                            .clamp(1, *max_batch as u64);
                        let batch = batch_of(count as usize, *size);
                        (produce_frame(topic, acks, &batch, correlation)?, count)
                    }
                };
                let sent = Sent {
                    at: Instant::now(),
                    first: next,
                    count,
                };
                if sent_tx.send(sent).is_err() {
                    // The receiving thread stopped: its error says why.
                    return Ok(next);
                }
                writer
                    .write_all(&frame)
                    .map_err(|e| fail!("sending a Produce request to {leader}: {e}"))?;
                next += count;
                correlation = correlation.wrapping_add(1);
            }
        })();
        drop(sent_tx);
        drop(window_tx);
        let received = receiver
            .join()
            .map_err(|_| fail!("a perf thread stopped unexpectedly"))?;
        let records = sender?;
        received.map(|lat| (lat, records))
    })
    .map(|(mut lat, records)| {
        lat.sort_unstable();
        (t0.elapsed().as_secs_f64(), records, lat)
    })?;
    Ok(latencies)
}

/// A batch of `records` records of `size` bytes each.
fn batch_of(records: usize, size: usize) -> Bytes {
    let mut b = BatchBuilder::with_capacity(records * (size + 16));
    let value: Vec<u8> = (0..size).map(|i| (i * 31 % 251) as u8).collect();
    for _ in 0..records {
        b.push(tidelog::record::now_ms(), None, Some(&value), &[]);
    }
    Bytes::from(b.finish())
}

/// Throughput then paced latency of `topic` at `leader` with `acks`.
fn measure(leader: &str, topic: &str, acks: i16, a: &PerfClusterArgs) -> CliResult<Measured> {
    let unpaced = Load::Unpaced {
        batch: batch_of(a.batch, a.record_size),
        records: a.batch,
        requests: a.records.div_ceil(a.batch as u64),
    };
    let (seconds, records, throughput_acks) = drive(leader, topic, acks, &unpaced, a.in_flight)?;
    let paced = Load::Paced {
        records: a.latency_records,
        size: a.record_size,
        rate: a.latency_rate,
        max_batch: a.batch,
    };
    let (paced_seconds, paced_records, paced_acks) =
        drive(leader, topic, acks, &paced, a.in_flight)?;
    Ok(Measured {
        records_per_s: records as f64 / seconds.max(1e-9),
        throughput_acks,
        paced_rate: paced_records as f64 / paced_seconds.max(1e-9),
        paced_acks,
    })
}

/// Runs `tidelog perf cluster`. See the module documentation.
pub(crate) fn cluster(data: Option<&Path>, a: &PerfClusterArgs) -> CliResult {
    if a.records == 0 || a.batch == 0 || a.in_flight == 0 || a.latency_records == 0 {
        return Err(fail!(
            "--records, --batch, --in-flight and --latency-records must be at least 1"
        ));
    }
    let dir = RunDir::new(data, "perf cluster")?;
    let base: PathBuf = dir.path().to_path_buf();
    let mut results: Vec<(String, Measured)> = Vec::new();
    for (label, count) in [("single", 1usize), ("cluster", 3)] {
        let rf = count as i16;
        let mut nodes = Nodes::start(&base, label, count)?;
        let topic = format!("perf-cluster-rf{rf}");
        let leader = create_topic(&mut nodes, &base, label, &topic, TopicSpec::single(rf))?;
        eprintln!("perf cluster: {label} ({count} node(s)) ready, leader of {topic} at {leader}");
        for (name, acks) in [("acks1", 1i16), ("acksall", -1)] {
            let m = measure(&leader, &topic, acks, a)
                .and_then(|m| nodes.check_alive(&base, label).map(|()| m))?;
            results.push((format!("rf{rf}_{name}"), m));
        }
        if count > 1 {
            let topic = format!("perf-cluster-rf{rf}-durable");
            let leader = create_topic(
                &mut nodes,
                &base,
                label,
                &topic,
                TopicSpec {
                    durable: true,
                    ..TopicSpec::single(rf)
                },
            )?;
            let m = measure(&leader, &topic, -1, a)
                .and_then(|m| nodes.check_alive(&base, label).map(|()| m))?;
            results.push((format!("rf{rf}_acksall_durable"), m));
        }
        drop(nodes);
    }
    let mut fields: Vec<(String, String)> = vec![
        ("records".into(), a.records.to_string()),
        ("record_bytes".into(), a.record_size.to_string()),
        ("batch".into(), a.batch.to_string()),
        ("in_flight".into(), a.in_flight.to_string()),
        ("latency_records".into(), a.latency_records.to_string()),
        ("latency_rate".into(), a.latency_rate.to_string()),
    ];
    for (label, m) in &results {
        let pct = |v: &[u64], q: f64| format!("{:.1}", percentile_us(v, q));
        fields.push((
            format!("{label}_records_per_s"),
            format!("{:.1}", m.records_per_s),
        ));
        fields.push((format!("{label}_ack_p50_us"), pct(&m.throughput_acks, 0.5)));
        fields.push((format!("{label}_ack_p99_us"), pct(&m.throughput_acks, 0.99)));
        fields.push((
            format!("{label}_paced_rate"),
            format!("{:.1}", m.paced_rate),
        ));
        fields.push((format!("{label}_paced_p50_us"), pct(&m.paced_acks, 0.5)));
        fields.push((format!("{label}_paced_p99_us"), pct(&m.paced_acks, 0.99)));
        fields.push((format!("{label}_paced_p999_us"), pct(&m.paced_acks, 0.999)));
    }
    let rate = |l: &str| {
        results
            .iter()
            .find(|(k, _)| k == l)
            .map_or(0.0, |(_, m)| m.records_per_s)
    };
    let ratio = rate("rf3_acksall") / rate("rf1_acks1").max(1e-9);
    fields.push(("rf3_acksall_vs_rf1_acks1".into(), format!("{ratio:.3}")));
    let durable = rate("rf3_acksall_durable") / rate("rf3_acksall").max(1e-9);
    fields.push((
        "rf3_acksall_durable_vs_rf3_acksall".into(),
        format!("{durable:.3}"),
    ));
    let summary = format!(
        "RF 3 acks=all {:.0} records/s, {ratio:.2}x RF 1 acks=1 ({:.0} records/s); with durable.acks {:.0} records/s, {durable:.2}x",
        rate("rf3_acksall"),
        rate("rf1_acks1"),
        rate("rf3_acksall_durable")
    );
    let borrowed: Vec<(&str, String)> = fields
        .iter()
        .map(|(k, v)| (k.as_str(), v.clone()))
        .collect();
    report_fields("cluster", &summary, &borrowed, a.json)
}
