//! `tidelog forward` as a child process copies an embedded log that an application (this
//! test) keeps writing to a `tidelog serve` node, exactly once: the forwarder is killed
//! with SIGKILL three times and restarted, and the node is killed and brought back on
//! the same address; the remote topic then holds every local record once, with its key,
//! value, headers and timestamp, in local order per partition.
#![cfg(all(feature = "cli", feature = "server"))]

mod cli_support;

use std::io::BufRead;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cli_support::{serve, serve_on};
use tidelog::forward::{OFFSET_HEADER, SOURCE_HEADER};
use tidelog::{
    Broker, ClientConfig, Cluster, Consumer, ConsumerConfig, IsolationLevel, OffsetReset, Producer,
    ProducerRecord, TopicConfig,
};

const TOPIC: &str = "events";
const PARTITIONS: i32 = 3;
const RECORDS: u32 = 100_000;

/// A `tidelog forward` child; its stderr lines are kept.
struct Forward {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
}

fn forward(data: &Path, bootstrap: &str) -> Forward {
    forward_with(data, bootstrap, &["--topic", TOPIC, "--name", "edge"])
}

fn forward_with(data: &Path, bootstrap: &str, args: &[&str]) -> Forward {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tidelog"))
        .arg("--data")
        .arg(data)
        .args(["forward", "--bootstrap", bootstrap])
        .args(args)
        .env("TIDELOG_PROGRESS", "never")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn tidelog forward");
    let pipe = child.stderr.take().expect("stderr");
    let lines = Arc::new(Mutex::new(Vec::new()));
    let kept = Arc::clone(&lines);
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(pipe).lines() {
            let Ok(line) = line else { break };
            kept.lock().unwrap().push(line);
        }
    });
    Forward { child, lines }
}

impl Forward {
    fn kill(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    /// SIGTERM; its exit code and stderr.
    fn stop(mut self) -> (Option<i32>, Vec<String>) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(120);
        let code = loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                break status.code();
            }
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                break None;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        std::thread::sleep(Duration::from_millis(100));
        (code, self.lines.lock().unwrap().clone())
    }
}

impl Forward {
    /// Waits (at most 60 s) for a stderr line containing `needle`.
    fn line_with(&self, needle: &str) -> String {
        for _ in 0..600 {
            if let Some(l) = self
                .lines
                .lock()
                .unwrap()
                .iter()
                .find(|l| l.contains(needle))
            {
                return l.clone();
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("no line with {needle:?}: {:?}", self.lines.lock().unwrap());
    }
}

/// A record as a consumer reads it: key, value, headers, timestamp.
type Fields = (Option<Vec<u8>>, Vec<u8>, Vec<(String, Vec<u8>)>, i64);

/// A reader of committed records from the start of its partitions.
fn committed_from_start() -> ConsumerConfig {
    ConsumerConfig {
        auto_offset_reset: OffsetReset::Earliest,
        isolation_level: IsolationLevel::ReadCommitted,
        ..ConsumerConfig::default()
    }
}

/// Every record of `topic` on `broker`, per partition, in offset order.
fn read_all(broker: &Broker) -> Vec<Vec<Fields>> {
    let mut out = vec![Vec::new(); PARTITIONS as usize];
    let mut c = Consumer::new(broker, committed_from_start());
    let assignment: Vec<(&str, i32)> = (0..PARTITIONS).map(|p| (TOPIC, p)).collect();
    c.assign(&assignment).unwrap();
    for _ in 0..100_000 {
        let records = c.poll(Duration::from_millis(50)).unwrap();
        if records.is_empty() {
            break;
        }
        for r in records.iter() {
            let r = r.unwrap();
            let headers = r
                .headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.unwrap_or_default().to_vec()))
                .collect();
            out[r.partition as usize].push((
                r.key.map(<[u8]>::to_vec),
                r.value.unwrap_or_default().to_vec(),
                headers,
                r.timestamp,
            ));
        }
    }
    out
}

/// Counts the records of remote partitions a reader of committed records sees (not
/// their end offsets: the forwarder's transaction markers take offsets too), reading
/// on from where it stopped; 0 while the topic does not exist.
struct Committed<'c> {
    cluster: &'c Cluster,
    topic: &'static str,
    /// Assigned once the topic exists on the remote side.
    consumer: Option<Consumer>,
    /// Committed records read so far, by partition.
    counts: Vec<i64>,
}

impl<'c> Committed<'c> {
    /// Counts for the `partitions` partitions of remote `topic`.
    fn new(cluster: &'c Cluster, topic: &'static str, partitions: i32) -> Committed<'c> {
        Committed {
            cluster,
            topic,
            consumer: None,
            counts: vec![0; partitions as usize],
        }
    }

    /// Reads what was committed since the last call (until a poll finds nothing new)
    /// and returns the count of each partition so far.
    fn read(&mut self) -> &[i64] {
        if self.consumer.is_none() {
            let mut c = Consumer::new(self.cluster, committed_from_start());
            let wanted: Vec<(&str, i32)> = (0..self.counts.len() as i32)
                .map(|p| (self.topic, p))
                .collect();
            if c.assign(&wanted).is_err() {
                return &self.counts;
            }
            self.consumer = Some(c);
        }
        let c = self.consumer.as_mut().expect("assigned above");
        for _ in 0..10_000 {
            match c.poll(Duration::from_millis(100)) {
                Ok(records) if !records.is_empty() => {
                    for r in records.iter() {
                        let r = r.unwrap_or_else(|e| panic!("remote {}: {e}", self.topic));
                        self.counts[r.partition as usize] += 1;
                    }
                }
                _ => break,
            }
        }
        &self.counts
    }

    fn total(&mut self) -> i64 {
        self.read().iter().sum()
    }
}

#[test]
fn forward_survives_kills_of_itself_and_of_the_remote_node_exactly_once() {
    let tmp = tempfile::tempdir().unwrap();
    let local_dir = tmp.path().join("edge");
    let remote_dir = tmp.path().join("central");
    let local = Broker::open(&local_dir).unwrap();
    local
        .create_topic(TOPIC, PARTITIONS, TopicConfig::new())
        .unwrap();
    let node = serve(&remote_dir, &[]);
    let addr = node.addr.clone();

    // The application: writes in paced chunks while the forwarder runs.
    let writer = {
        let local = local.clone();
        std::thread::spawn(move || {
            let producer = Producer::new(&local).unwrap();
            for chunk in 0..40 {
                for i in chunk * (RECORDS / 40)..(chunk + 1) * (RECORDS / 40) {
                    let key = format!("device-{}", i % 101);
                    let value = format!("reading {i}");
                    let seq = i.to_string();
                    let headers = [("seq", seq.as_bytes())];
                    producer
                        .send_nowait(
                            TOPIC,
                            ProducerRecord::keyed(key.as_bytes(), value.as_bytes())
                                .timestamp(1_700_000_000_000 + i64::from(i))
                                .headers(&headers),
                        )
                        .unwrap();
                }
                producer.flush().unwrap();
                std::thread::sleep(Duration::from_millis(250));
            }
        })
    };

    // Three SIGKILLs of the forwarder, each after it has run a while.
    let mut f = forward(&local_dir, &addr);
    for _ in 0..3 {
        std::thread::sleep(Duration::from_millis(1_500));
        f.kill();
        f = forward(&local_dir, &addr);
    }
    // The remote node dies and comes back on its address a few seconds later.
    std::thread::sleep(Duration::from_millis(1_000));
    node.kill();
    std::thread::sleep(Duration::from_secs(4));
    let node = serve_on(&remote_dir, &addr, &[]);
    writer.join().unwrap();

    let cluster = Cluster::connect(ClientConfig::new(addr.clone())).unwrap();
    let deadline = Instant::now() + Duration::from_secs(180);
    let mut remote_records = Committed::new(&cluster, TOPIC, PARTITIONS);
    while remote_records.total() < i64::from(RECORDS) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
    }
    let (code, lines) = f.stop();
    // Whether the node's absence shows as "forwarding paused" depends on timing: the
    // producer's retries (within delivery.timeout.ms) may outlast a short outage
    // without a failed chunk. What must hold is below: every record once, in order.
    assert_eq!(code, Some(0), "{lines:#?}");
    assert_eq!(node.stop(), Some(0));

    let remote = Broker::open(&remote_dir).unwrap();
    let locals = read_all(&local);
    let remotes = read_all(&remote);
    assert_eq!(locals.iter().map(Vec::len).sum::<usize>(), RECORDS as usize);
    for p in 0..PARTITIONS as usize {
        assert_eq!(
            remotes[p].len(),
            locals[p].len(),
            "partition {p}: every record exactly once"
        );
        for (offset, (l, r)) in locals[p].iter().zip(&remotes[p]).enumerate() {
            let (key, value, headers, timestamp) = r;
            let mut plain = headers.clone();
            plain.retain(|(k, _)| k != SOURCE_HEADER && k != OFFSET_HEADER);
            assert_eq!(
                (&l.0, &l.1, &l.2, l.3),
                (key, value, &plain, *timestamp),
                "partition {p} offset {offset}"
            );
            let header = |name: &str| {
                headers
                    .iter()
                    .find(|(k, _)| k == name)
                    .map(|(_, v)| String::from_utf8(v.clone()).unwrap())
            };
            assert_eq!(header(OFFSET_HEADER), Some(offset.to_string()));
            assert_eq!(header(SOURCE_HEADER), Some(format!("edge/{TOPIC}/{p}")));
        }
    }
}

#[test]
fn forward_of_a_free_directory_commits_its_position_as_a_group_and_serves_metrics() {
    use std::io::{Read, Write};
    let tmp = tempfile::tempdir().unwrap();
    let local_dir = tmp.path().join("edge");
    let remote_dir = tmp.path().join("central");
    {
        let local = Broker::open(&local_dir).unwrap();
        local
            .create_topic(TOPIC, PARTITIONS, TopicConfig::new())
            .unwrap();
        let producer = Producer::new(&local).unwrap();
        for i in 0..300u32 {
            let v = i.to_string();
            producer
                .send(
                    TOPIC,
                    ProducerRecord::new(v.as_bytes()).partition((i % 3) as i32),
                )
                .unwrap();
        }
        local.close().unwrap();
    }
    let node = serve(&remote_dir, &[]);
    let f = forward_with(
        &local_dir,
        &node.addr,
        &[
            "--rename",
            "events=central.events",
            "--metrics-listen",
            "127.0.0.1:0",
        ],
    );
    let url = f.line_with("metrics on http://");
    let addr = url
        .split("http://")
        .nth(1)
        .and_then(|r| r.strip_suffix("/metrics"))
        .unwrap()
        .to_string();
    let cluster = Cluster::connect(ClientConfig::new(node.addr.clone())).unwrap();
    let mut remote_end = Committed::new(&cluster, "central.events", PARTITIONS);
    for _ in 0..600 {
        if remote_end.total() >= 300 {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(remote_end.read(), [100, 100, 100]);
    // The metrics: the broker's and the forwarder's, nothing behind once it caught up.
    let mut text = String::new();
    for _ in 0..100 {
        let mut s = std::net::TcpStream::connect(&addr).unwrap();
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        text.clear();
        s.read_to_string(&mut text).unwrap();
        if text.contains("tidelog_forward_records_total{forwarder=\"default\"} 300") {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        text.contains(
            "tidelog_forward_records_behind{forwarder=\"default\",topic=\"events\",partition=\"1\",remote_topic=\"central.events\"} 0"
        ),
        "{text}"
    );
    assert!(
        text.contains("tidelog_forward_records_total{forwarder=\"default\"} 300"),
        "{text}"
    );
    // Once: the forwarder is in the broker's metrics, rendered once per scrape.
    for once in [
        "# TYPE tidelog_forward_records_total counter",
        "tidelog_forward_records_total{forwarder=\"default\"} 300",
        "# TYPE tidelog_partition_log_end_offset gauge",
    ] {
        let n = text.lines().filter(|l| *l == once).count();
        assert_eq!(n, 1, "{once:?} {n} times in:\n{text}");
    }
    let (code, lines) = f.stop();
    assert_eq!(code, Some(0), "{lines:#?}");
    assert!(
        lines
            .iter()
            .any(|l| l.contains("300 records forwarded, 0 behind")),
        "{lines:#?}"
    );
    node.stop();
    // Its position is the group tidelog-forward-default's offsets: no lag.
    let out = cli_support::ok(cli_support::tidelog(
        &local_dir,
        &["groups", "describe", "tidelog-forward-default"],
        "",
    ));
    let rows: Vec<Vec<&str>> = out
        .lines()
        .filter(|l| l.starts_with("tidelog-forward-default\t"))
        .map(|l| l.split('\t').collect())
        .collect();
    assert_eq!(rows.len(), 3, "{out}");
    for row in rows {
        assert_eq!(&row[1..6], &[TOPIC, row[2], "100", "100", "0"], "{out}");
    }
}

#[test]
fn forward_of_a_directory_an_application_holds_keeps_its_retention_across_its_restart() {
    let tmp = tempfile::tempdir().unwrap();
    let local_dir = tmp.path().join("edge");
    let remote_dir = tmp.path().join("central");
    let produce = |app: &Broker, from: i64, to: i64| {
        let producer = Producer::new(app).unwrap();
        for i in from..to {
            let v = i.to_string();
            producer
                .send(
                    "held",
                    ProducerRecord::new(v.as_bytes()).timestamp(1_000 + i),
                )
                .unwrap();
        }
    };
    let app = Broker::open(&local_dir).unwrap();
    let config = TopicConfig::new()
        .set("segment.bytes", "1024")
        .set("retention.ms", "1000");
    app.create_topic("held", 1, config).unwrap();
    produce(&app, 0, 200);
    // The forwarder opens the directory the application holds read-only.
    let node = serve(&remote_dir, &[]);
    let f = forward_with(
        &local_dir,
        &node.addr,
        &["--topic", "held", "--name", "edge"],
    );
    let cluster = Cluster::connect(ClientConfig::new(node.addr.clone())).unwrap();
    let mut remote_end = Committed::new(&cluster, "held", 1);
    for _ in 0..600 {
        if remote_end.total() >= 200 {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(remote_end.read(), [200]);
    let (code, lines) = f.stop();
    assert_eq!(code, Some(0), "{lines:#?}");
    node.stop();
    // The application writes on, restarts, and runs retention: the forwarder's hold
    // file keeps what it has not forwarded.
    produce(&app, 200, 400);
    app.close().unwrap();
    drop(app);
    let app = Broker::open(&local_dir).unwrap();
    let p = app.topic("held").unwrap().partition(0).unwrap();
    assert!(p.segment_count() > 4);
    p.log().apply_retention(i64::MAX / 2).unwrap();
    let start = p.log_start_offset();
    assert!(start > 0 && start <= 200, "log start {start}");
    // Released for good by name: retention takes the rest.
    let run = cli_support::tidelog(&local_dir, &["forward", "--release", "--name", "edge"], "");
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stderr
            .contains("released the retention holds of forwarder edge on 1 partitions"),
        "{run:?}"
    );
    p.log().apply_retention(i64::MAX / 2).unwrap();
    assert!(p.log_start_offset() > 200, "{}", p.log_start_offset());
    app.close().unwrap();
}

/// `forward --describe` reads the directory without taking it: a forwarder started
/// while describes run back to back (a monitoring loop) opens the directory, where
/// before a describe that held it at that moment made the forwarder exit with "in use
/// by another tidelog instance".
#[test]
fn describes_in_a_loop_never_keep_a_forwarder_from_starting() {
    let tmp = tempfile::tempdir().unwrap();
    let local_dir = tmp.path().join("edge");
    Broker::open(&local_dir)
        .unwrap()
        .create_topic(TOPIC, 1, TopicConfig::new())
        .unwrap();
    // Nothing listens there: the forwarder starts and waits for the remote side.
    let away = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .to_string();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let describer = {
        let (stop, dir) = (Arc::clone(&stop), local_dir.clone());
        std::thread::spawn(move || {
            for _ in 0..5_000 {
                if stop.load(std::sync::atomic::Ordering::SeqCst) {
                    break;
                }
                let _ = Command::new(env!("CARGO_BIN_EXE_tidelog"))
                    .arg("--data")
                    .arg(&dir)
                    .args(["forward", "--name", "edge", "--describe"])
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status();
            }
        })
    };
    for run in 0..16 {
        let f = forward(&local_dir, &away);
        let deadline = Instant::now() + Duration::from_secs(20);
        let started = loop {
            let lines = f.lines.lock().unwrap().clone();
            // The start line, or the CLI's one fatal `error: ...` line (not a log
            // line of the remote side being away, which may come first and says
            // "os error 111").
            if let Some(l) = lines
                .iter()
                .find(|l| l.contains(" as edge") || l.starts_with("error: "))
            {
                break l.clone();
            }
            assert!(Instant::now() < deadline, "run {run}: no start: {lines:?}");
            std::thread::sleep(Duration::from_millis(10));
        };
        assert!(started.contains(" as edge"), "run {run}: {started}");
        let (code, lines) = f.stop();
        assert_eq!(code, Some(0), "run {run}: {lines:#?}");
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    describer.join().unwrap();
}
