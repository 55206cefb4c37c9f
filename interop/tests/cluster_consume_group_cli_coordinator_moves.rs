//! `tidelog consume --group G --bootstrap` keeps consuming when the group's coordinator
//! dies: on a three-node cluster of `tidelog serve` child processes, a following
//! console member has printed every record so far when the node coordinating its group
//! is killed with SIGKILL. The member looks the coordinator up again (NOT_COORDINATOR,
//! a refused connection), keeps fetching from the partitions' new leaders, prints
//! what is produced after the kill, and on SIGTERM commits and exits cleanly on the new
//! coordinator: a later run of the group prints nothing again and nothing is lost.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use kafka_protocol::messages::FindCoordinatorRequest;
use kafka_protocol::protocol::StrBytes;
use rdkafka::ClientConfig;
use rdkafka::producer::BaseProducer;
use tidelog_interop::cluster::{KafkaConn, Processes, cli_ok, eventually, produce_values};

const WAIT: Duration = Duration::from_secs(45);
const TOPIC: &str = "moving";
const GROUP: &str = "survivors";
const PARTITIONS: i32 = 3;

/// The node id coordinating `GROUP`, asked of node index `i`.
fn coordinator(nodes: &Processes, i: usize) -> Option<i32> {
    let mut conn = KafkaConn::connect(&nodes.layout.addr(i), Duration::from_secs(5))?;
    let request = FindCoordinatorRequest::default()
        .with_key(StrBytes::from_static_str(GROUP))
        .with_key_type(0);
    let response = conn.call(&request, 2)?;
    (response.error_code == 0 && response.node_id.0 >= 0).then_some(response.node_id.0)
}

/// (partition, offset) of a `%p %o %s` line, checking its value.
fn parse(line: &str) -> (i32, i64) {
    let f: Vec<&str> = line.split(' ').collect();
    let (p, o): (i32, i64) = (f[0].parse().unwrap(), f[1].parse().unwrap());
    assert_eq!(f[2], format!("v{p}-{o}"), "the record's value");
    (p, o)
}

#[test]
fn a_console_member_survives_its_coordinator_being_killed() {
    let root = tempfile::tempdir().unwrap();
    let mut nodes = Processes::start(
        tidelog_interop::tidelog_bin(),
        root.path(),
        3,
        &["--broker-session-timeout-ms", "2000"],
    );
    let bootstrap = nodes.layout.bootstrap();
    let b = bootstrap.as_str();
    eventually("the topic created", WAIT, || {
        cli_ok(
            b,
            &[
                "topics",
                "create",
                TOPIC,
                "--partitions",
                &PARTITIONS.to_string(),
                "--replication-factor",
                "3",
                "--if-not-exists",
            ],
        )
    });
    eventually("every replica in sync", WAIT, || {
        let out = cli_ok(b, &["topics", "describe", TOPIC])?;
        let rows: Vec<&str> = out.lines().skip(1).collect();
        let full = rows.iter().all(|r| {
            r.split('\t')
                .find_map(|f| f.strip_prefix("Isr: "))
                .is_some_and(|isr| isr.split(',').count() == 3)
        });
        (rows.len() == PARTITIONS as usize && full).then_some(())
    });
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", b)
        .set("acks", "all")
        .set("message.timeout.ms", "40000")
        .create()
        .unwrap();
    let produce = |from: i64, n: i64| produce_values(&producer, TOPIC, PARTITIONS, (from, n), WAIT);
    produce(0, 10);

    // The following member, its lines read on a thread.
    let mut member = Command::new(tidelog_interop::tidelog_bin())
        .args(["consume", TOPIC, "--group", GROUP, "--bootstrap", b])
        .args(["--from-beginning", "-f", "%p %o %s\\n"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = mpsc::channel::<String>();
    let stdout = member.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut printed = Vec::new();
    let mut read_until = |count: usize, what: &str| {
        let deadline = Instant::now() + WAIT;
        while printed.len() < count && Instant::now() < deadline {
            if let Ok(line) = rx.recv_timeout(Duration::from_millis(100)) {
                printed.push(parse(&line));
            }
        }
        assert!(printed.len() >= count, "{what}: {printed:?}");
    };
    read_until(3 * 10, "the first records");

    let victim = eventually("the group's coordinator", WAIT, || coordinator(&nodes, 0));
    nodes.kill(victim as usize - 1);
    let survivor = (0..3).find(|i| *i != victim as usize - 1).unwrap();
    eventually("a new coordinator", WAIT, || {
        coordinator(&nodes, survivor).filter(|c| *c != victim)
    });
    produce(10, 5);
    read_until(3 * 15, "the records produced after the coordinator died");

    // SIGTERM: the member commits on the new coordinator and exits cleanly.
    let stopped = Command::new("kill")
        .args(["-TERM", &member.id().to_string()])
        .status()
        .unwrap();
    assert!(stopped.success());
    let deadline = Instant::now() + WAIT;
    let status = loop {
        if let Some(status) = member.try_wait().unwrap() {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = member.kill();
            panic!("the member did not exit on SIGTERM: {}", nodes.logs());
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut member.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(status.success(), "{status:?}: {stderr}");
    reader.join().unwrap();
    while let Ok(line) = rx.try_recv() {
        printed.push(parse(&line));
    }

    let all: BTreeSet<(i32, i64)> = (0..PARTITIONS)
        .flat_map(|p| (0..15).map(move |o| (p, o)))
        .collect();
    let seen: BTreeSet<(i32, i64)> = printed.iter().copied().collect();
    assert_eq!(seen, all, "every record, {stderr}");
    // Its commit landed: the group's next run has nothing to print.
    let again = cli_ok(
        b,
        &[
            "consume",
            TOPIC,
            "--group",
            GROUP,
            "-e",
            "-f",
            "%p %o %s\\n",
        ],
    )
    .expect("a second run");
    assert_eq!(again, "", "the first run committed every position");
}
