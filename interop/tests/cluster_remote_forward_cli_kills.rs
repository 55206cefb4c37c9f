//! `tidelog forward` as a child process through kills of its own and a remote node's
//! outage: an application (a `Broker` in this process, which holds the data directory,
//! so the forwarder opens it read-only and follows its appends) writes 100,000 records
//! into a topic of two partitions while `tidelog forward` copies them to three
//! `tidelog serve` child processes (replication factor 3, `min.insync.replicas=2`).
//! The forwarder is SIGKILLed three times and started again each time, and one remote
//! node is stopped for 20 s and brought back. The remote topic holds every record
//! exactly once, in local order per partition, and `tidelog forward --describe` shows
//! the forwarder caught up.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use tidelog::Broker;
use tidelog::forward::Forwarder;
use tidelog_interop::cluster::terminate_child;

mod remote_cluster_support;
use remote_cluster_support::{
    WAIT, check_every_number_once_in_order, forward_child, local_log, three_nodes_with_topic,
    write_numbers,
};

const TOPIC: &str = "readings";
const PARTITIONS: i32 = 2;
const RECORDS: u32 = 100_000;
/// Records written per step of the application, and the pause between steps: the
/// records arrive over a few seconds, while the forwarder runs and is killed.
const STEP: u32 = 2_500;
const PAUSE: Duration = Duration::from_millis(100);
/// How long the remote node stays down.
const OUTAGE: Duration = Duration::from_secs(20);
/// Forwarded records (summed positions) at which the forwarder is killed.
const KILLS: [u64; 3] = [10_000, 35_000, 65_000];

/// How many times the forwarders logging to `log` said they run.
fn starts(log: &Path) -> usize {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .matches(" as edge (SIGINT or SIGTERM to stop)")
        .count()
}

/// The records the forwarder's positions say are forwarded, as the data directory
/// holds them.
fn forwarded(local: &Broker) -> u64 {
    Forwarder::positions(local, "edge")
        .map(|s| s.partitions.iter().map(|p| p.position as u64).sum())
        .unwrap_or(0)
}

#[test]
fn tidelog_forward_delivers_every_record_once_through_its_kills_and_a_node_outage() {
    let root = tempfile::tempdir().unwrap();
    let (mut nodes, bootstrap, cluster, leader) =
        three_nodes_with_topic(root.path(), TOPIC, PARTITIONS);
    let (dir, local) = local_log(TOPIC, PARTITIONS);
    let log = root.path().join("forward.log");
    let mut forwarder = forward_child(dir.path(), &bootstrap, TOPIC, &log);

    // The application writes while the forwarder runs.
    let writer = {
        let local = local.clone();
        std::thread::spawn(move || {
            for step in 0..RECORDS / STEP {
                let steps = (step * STEP, (step + 1) * STEP);
                write_numbers(&local, TOPIC, PARTITIONS, steps);
                std::thread::sleep(PAUSE);
            }
        })
    };

    // The leader of partition 0 goes down once records flow, for OUTAGE; the forwarder
    // is killed and started again at each of KILLS.
    let down = (leader - 1) as usize;
    let mut outage: Option<Instant> = None;
    let mut kills = KILLS.iter().peekable();
    let deadline = Instant::now() + WAIT * 2;
    loop {
        assert!(
            Instant::now() < deadline,
            "forwarded {} of {RECORDS}\n{}\n{}",
            forwarded(&local),
            std::fs::read_to_string(&log).unwrap_or_default(),
            nodes.logs()
        );
        let done = forwarded(&local);
        if outage.is_none() && done > 0 && nodes.is_running(down) {
            nodes.kill(down);
            outage = Some(Instant::now());
        }
        if outage.is_some_and(|at| at.elapsed() >= OUTAGE) && !nodes.is_running(down) {
            nodes.restart(down);
        }
        // Each forwarder is killed once it has said it runs (a position read from the
        // directory may have passed two marks before the previous one was killed).
        let started = starts(&log);
        if let Some(&&at) = kills.peek()
            && done >= at
            && started == 1 + KILLS.len() - kills.len()
        {
            forwarder.kill();
            forwarder = forward_child(dir.path(), &bootstrap, TOPIC, &log);
            kills.next();
        }
        let all_started = kills.peek().is_none() && started == 1 + KILLS.len();
        if done == u64::from(RECORDS) && all_started && nodes.is_running(down) {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    writer.join().unwrap();
    assert!(
        terminate_child(forwarder.into_inner()),
        "a clean stop on SIGTERM"
    );
    assert_eq!(
        starts(&log),
        1 + KILLS.len(),
        "a start after each kill:\n{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );

    // `--describe` reads the position from the directory the application holds.
    let out = Command::new(tidelog_interop::tidelog_bin())
        .args(["forward", "--data"])
        .arg(dir.path())
        .args(["--name", "edge", "--describe"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("Forwarder 'edge' (group tidelog-forward-edge): 0 records (0 bytes) behind"),
        "{text}"
    );
    assert_eq!(
        text.matches("\t0\t0\n").count(),
        PARTITIONS as usize,
        "{text}"
    );

    // The remote topic: every record once, in local order per partition.
    check_every_number_once_in_order(&cluster, TOPIC, PARTITIONS, RECORDS);
}
