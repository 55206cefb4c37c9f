//! `tidelog consume --group` without `-e` waits for more records until interrupted;
//! Ctrl-C (SIGINT) ends it with exit code 0 after committing what it printed, so the
//! next run of the group starts after it.
#![cfg(all(feature = "cli", unix))]

mod cli_support;

use cli_support::{ok, tidelog};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

#[test]
fn interrupted_consumer_commits_what_it_printed() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    ok(tidelog(
        &data,
        &["topics", "create", "jobs", "--partitions", "2"],
        "",
    ));
    ok(tidelog(&data, &["produce", "jobs", "-p", "0"], "a\nb\n"));
    ok(tidelog(&data, &["produce", "jobs", "-p", "1"], "c\n"));

    let mut child = Command::new(env!("CARGO_BIN_EXE_tidelog"))
        .arg("--data")
        .arg(&data)
        .args(["consume", "jobs", "-g", "workers", "--from-beginning"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id().to_string();
    // A watchdog so that a consumer that ignores the signal fails the test instead of
    // hanging it.
    let done = Arc::new(AtomicBool::new(false));
    let watchdog = {
        let (done, pid) = (Arc::clone(&done), pid.clone());
        std::thread::spawn(move || {
            for _ in 0..600 {
                if done.load(Ordering::Relaxed) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            let _ = Command::new("kill").args(["-KILL", &pid]).status();
        })
    };
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut seen: Vec<String> = (0..3).map(|_| lines.next().unwrap().unwrap()).collect();
    seen.sort();
    assert_eq!(seen, ["a", "b", "c"]);
    assert!(
        Command::new("kill")
            .args(["-INT", &pid])
            .status()
            .unwrap()
            .success()
    );
    let status = child.wait().unwrap();
    done.store(true, Ordering::Relaxed);
    watchdog.join().unwrap();
    assert_eq!(status.code(), Some(0), "exit code after SIGINT");

    let out = ok(tidelog(&data, &["groups", "describe", "workers"], ""));
    assert!(out.contains("workers\tjobs\t0\t2\t2\t0\t-"), "{out}");
    assert!(out.contains("workers\tjobs\t1\t1\t1\t0\t-"), "{out}");
    ok(tidelog(&data, &["produce", "jobs", "-p", "1"], "d\n"));
    let out = ok(tidelog(
        &data,
        &["consume", "jobs", "-g", "workers", "-e"],
        "",
    ));
    assert_eq!(out, "d\n");
}
