//! `tidelog consume --bootstrap` reads a running node over the Kafka protocol: without
//! `--group` the partitions and start given (`-p`, `-o`, `--timestamp`, `-c`, `-e`), as
//! on a data directory; with `--group` two processes split the topic's partitions, the
//! first committing what it printed before it gives a partition up.
#![cfg(all(feature = "cli", feature = "server"))]

mod cli_support;

use cli_support::{err, ok, serve, tidelog, tidelog_raw};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};
use tidelog::{ClientConfig, Cluster, Producer, ProducerRecord};

/// A `consume` child process, killed when dropped (a failed test leaves none behind).
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `consume events -g pair --from-beginning` on `bootstrap`, printing `partition
/// value` lines; the lines come through the receiver.
fn member(bootstrap: &str) -> (Killed, Receiver<String>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tidelog"))
        .args(["consume", "events", "-g", "pair", "--from-beginning"])
        .args(["-f", "%p %s\\n", "--bootstrap", bootstrap])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let (tx, rx) = channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    (Killed(child), rx)
}

/// The next `n` lines of `rx`, waiting at most 60 s in all.
fn lines(rx: &Receiver<String>, n: usize) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut got = Vec::new();
    while got.len() < n {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => got.push(line),
            Err(e) => panic!("{e} after {got:?}, waiting for {n} lines"),
        }
    }
    got
}

/// The lines left in `rx` once its process has exited (at most 60 s).
fn rest(rx: &Receiver<String>) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut got = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => got.push(line),
            Err(RecvTimeoutError::Disconnected) => return got,
            Err(RecvTimeoutError::Timeout) => panic!("stdout still open after {got:?}"),
        }
    }
}

/// Sends SIGTERM to `child` and expects a clean exit (it commits and leaves).
fn stop(mut child: Killed) {
    let child = &mut child.0;
    let pid = child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert_eq!(status.code(), Some(0), "exit code after SIGTERM");
            return;
        }
        if Instant::now() > deadline {
            child.kill().unwrap();
            panic!("consume did not exit within 60 s of SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn consume_from_a_running_node_with_and_without_a_group() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    ok(tidelog(
        &data,
        &["topics", "create", "events", "--partitions", "2"],
        "",
    ));
    ok(tidelog(
        &data,
        &["produce", "events", "-p", "0"],
        "a0\na1\na2\n",
    ));
    ok(tidelog(
        &data,
        &["produce", "events", "-p", "1"],
        "b0\nb1\nb2\n",
    ));
    let node = serve(&data, &[]);
    let b = node.addr.clone();
    let t = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(["--bootstrap", b.as_str()]);
        tidelog_raw(&all, "")
    };

    // Without a group: the partitions and start positions of the command line.
    let out = ok(t(&[
        "consume",
        "events",
        "--from-beginning",
        "-e",
        "-f",
        "%t|%p|%o|%s\\n",
    ]));
    let mut all: Vec<&str> = out.lines().collect();
    all.sort_unstable();
    assert_eq!(
        all,
        [
            "events|0|0|a0",
            "events|0|1|a1",
            "events|0|2|a2",
            "events|1|0|b0",
            "events|1|1|b1",
            "events|1|2|b2"
        ]
    );
    assert_eq!(
        ok(t(&[
            "consume", "events", "-p", "0", "-o", "1", "-e", "-c", "1"
        ])),
        "a1\n"
    );
    assert_eq!(
        ok(t(&["consume", "events", "-p", "1", "-o", "-2", "-e"])),
        "b1\nb2\n"
    );
    assert_eq!(ok(t(&["consume", "events", "-o", "end", "-e"])), "");
    // Reading committed: records outside transactions are all committed.
    let out = ok(t(&[
        "consume",
        "events",
        "--from-beginning",
        "-e",
        "--isolation-level",
        "read_committed",
    ]));
    assert_eq!(out.lines().count(), 6, "{out}");
    assert_eq!(ok(t(&["consume", "events", "-e"])), "");
    assert_eq!(
        ok(t(&[
            "consume",
            "events",
            "-p",
            "0",
            "--timestamp",
            "2000-01-01T00:00:00Z",
            "-e"
        ])),
        "a0\na1\na2\n"
    );
    assert_eq!(
        ok(t(&[
            "consume",
            "events",
            "--timestamp",
            "4102444800000",
            "-e"
        ])),
        ""
    );
    err(
        t(&["consume", "events", "-p", "0", "-o", "7", "-e"]),
        1,
        "offset 7 is out of range for events-0: valid offsets are 0..3",
    );
    err(t(&["consume", "events", "-p", "5", "-e"]), 1, "events");
    err(t(&["consume", "nope", "-e"]), 1, "nope");

    // A group of two processes: the first reads both partitions; once the second joined
    // each owns one, and what the first printed is not printed again.
    let (first, from_first) = member(&b);
    let mut printed = lines(&from_first, 6);
    printed.sort_unstable();
    assert_eq!(printed, ["0 a0", "0 a1", "0 a2", "1 b0", "1 b1", "1 b2"]);
    let (second, from_second) = member(&b);
    let admin = tidelog::admin::AdminClient::connect(&b).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let groups = admin.describe_groups(&["pair"]).unwrap();
        let d = groups["pair"].as_ref().unwrap();
        let owned: Vec<usize> = d
            .members
            .iter()
            .filter_map(|m| m.assignment.as_ref())
            .map(|a| a.partitions.iter().map(|(_, p)| p.len()).sum())
            .collect();
        if d.state == "Stable" && owned == [1, 1] {
            break;
        }
        assert!(Instant::now() < deadline, "no split within 60 s: {d:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let cluster = Cluster::connect(ClientConfig::new(b.as_str())).unwrap();
    let producer = Producer::new(&cluster).unwrap();
    producer
        .send("events", ProducerRecord::new(b"a3").partition(0))
        .unwrap();
    producer
        .send("events", ProducerRecord::new(b"b3").partition(1))
        .unwrap();
    let one = lines(&from_first, 1);
    let other = lines(&from_second, 1);
    let mut both = [one[0].clone(), other[0].clone()];
    both.sort_unstable();
    assert_eq!(both, ["0 a3", "1 b3"]);
    stop(first);
    stop(second);
    assert_eq!(
        rest(&from_first),
        Vec::<String>::new(),
        "nothing else printed"
    );
    assert_eq!(
        rest(&from_second),
        Vec::<String>::new(),
        "nothing printed twice"
    );

    // Both committed on exit: the group stands at the end of each partition.
    let out = ok(t(&["groups", "describe", "pair"]));
    assert!(out.contains("pair\tevents\t0\t4\t4\t0\t-"), "{out}");
    assert!(out.contains("pair\tevents\t1\t4\t4\t0\t-"), "{out}");
    drop(node);
}
