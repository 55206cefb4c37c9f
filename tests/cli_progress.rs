//! Progress of long work on stderr: none when stderr is not a terminal (the default,
//! `auto`), none with `--quiet` or `TIDELOG_PROGRESS=never`, shown on a terminal (a pty
//! made by util-linux's `script`), and with `TIDELOG_PROGRESS=always` on any stderr —
//! for `perf`, `consume -e`, `dump`, opening a directory with unflushed bytes to
//! validate, and `topics delete`.
#![cfg(feature = "cli")]

use std::path::Path;
use std::process::{Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_tidelog");
const RECORDS: &str = "40000";

/// Runs `tidelog ARGS` with stdout and stderr piped (not terminals) and `env` set;
/// returns (stdout, stderr), asserting success.
fn piped(args: &[&str], env: &[(&str, &str)]) -> (String, String) {
    let mut cmd = Command::new(BIN);
    cmd.args(args)
        .env_remove("TIDELOG_PROGRESS")
        .envs(env.iter().copied())
        .stdin(Stdio::null());
    let out = cmd.output().expect("run tidelog");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(out.status.success(), "{args:?}: {stderr}");
    (stdout, stderr)
}

/// Runs the shell command `line` (with `$T` the tidelog binary) on a terminal: a pty
/// that `script` makes, 100 columns wide; returns all it printed there.
fn on_terminal(line: &str, env: &[(&str, &str)]) -> String {
    let out = Command::new("script")
        .args([
            "-q",
            "-e",
            "-c",
            &format!("stty cols 100; {line}"),
            "/dev/null",
        ])
        .env("T", BIN)
        .env_remove("TIDELOG_PROGRESS")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .expect("util-linux's script runs a command on a pty");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{line}: {text}");
    text
}

/// A data directory with topic `t` of RECORDS records.
fn data(dir: &Path) -> String {
    let d = dir.join("data").to_str().unwrap().to_string();
    let args = [
        "--data",
        &d,
        "perf",
        "produce",
        "--topic",
        "t",
        "--records",
        RECORDS,
        "--record-size",
        "100",
    ];
    let (_, stderr) = piped(&args, &[]);
    assert_eq!(stderr, "", "perf produce with stderr not a terminal");
    d
}

/// Makes the next open of `d` validate every batch of `t-0` (as after a crash).
fn lose_checkpoint(d: &str) {
    std::fs::remove_file(Path::new(d).join("t-0").join("partition.checkpoint")).unwrap();
}

#[test]
fn nothing_shows_when_stderr_is_not_a_terminal() {
    let tmp = tempfile::tempdir().unwrap();
    let d = data(tmp.path());
    let segment = format!("{d}/t-0/00000000000000000000.log");
    lose_checkpoint(&d);
    for args in [
        vec!["--data", &d, "topics", "list"],
        vec!["--data", &d, "consume", "t", "-e", "--from-beginning"],
        vec!["dump", &segment],
        vec!["--data", &d, "perf", "consume", "--topic", "t"],
        vec!["--data", &d, "topics", "delete", "t"],
    ] {
        let (_, stderr) = piped(&args, &[]);
        assert_eq!(stderr, "", "{args:?}");
    }
}

#[test]
fn progress_shows_on_a_terminal_unless_quiet() {
    let tmp = tempfile::tempdir().unwrap();
    let d = data(tmp.path());
    let produce =
        format!("\"$T\" --data '{d}' perf produce --topic t --records {RECORDS} --record-size 100");
    let shown = on_terminal(&produce, &[]);
    assert!(
        shown.contains("perf produce: ") && shown.contains(" records ("),
        "{shown}"
    );
    // Cleared at the end: the last thing on the line is the erase sequence.
    assert!(shown.contains("\r\x1b[2K"), "{shown:?}");
    for (line, env) in [
        (format!("{produce} --quiet"), vec![]),
        (produce.clone(), vec![("TIDELOG_PROGRESS", "never")]),
    ] {
        let quiet = on_terminal(&line, &env);
        assert!(!quiet.contains(" records ("), "{line} {env:?}: {quiet}");
        assert!(
            quiet.contains("produce: "),
            "the summary still shows: {quiet}"
        );
    }

    // consume -e: a bar on the terminal when the records go to a file...
    let out = tmp.path().join("out.txt");
    let consume = format!(
        "\"$T\" --data '{d}' consume t -e --from-beginning -f '%o\\n' > '{}'",
        out.display()
    );
    let shown = on_terminal(&consume, &[]);
    assert!(shown.contains("consume t: ["), "{shown}");
    let printed = std::fs::read_to_string(&out).unwrap();
    assert_eq!(
        printed.lines().count(),
        160_000,
        "four perf runs of {RECORDS}"
    );
    // ...and none when they go to the terminal itself.
    let to_terminal = on_terminal(
        &format!("\"$T\" --data '{d}' consume t -e --from-beginning -c 3 -f '%o\\n'"),
        &[],
    );
    assert!(!to_terminal.contains("consume t: ["), "{to_terminal}");
    assert!(to_terminal.contains("2\r\n"), "{to_terminal:?}");
}

#[test]
fn always_shows_progress_on_any_stderr() {
    let tmp = tempfile::tempdir().unwrap();
    let d = data(tmp.path());
    let always = [("TIDELOG_PROGRESS", "always")];
    let segment = format!("{d}/t-0/00000000000000000000.log");
    let (_, stderr) = piped(&["dump", &segment], &always);
    assert!(
        stderr.contains("dump 00000000000000000000.log: ["),
        "{stderr}"
    );
    lose_checkpoint(&d);
    // A command that opens the directory for writing recovers it (`topics list` opens
    // it read-only and validates nothing it need not).
    let (stdout, stderr) = piped(&["--data", &d, "topics", "create", "u"], &always);
    assert_eq!(stdout, "Created topic u.\n");
    assert!(
        stderr.contains("validating unflushed data in ") && stderr.contains("MiB"),
        "{stderr}"
    );
    let (_, stderr) = piped(&["--data", &d, "-q", "topics", "describe", "t"], &always);
    assert_eq!(stderr, "", "--quiet wins over TIDELOG_PROGRESS=always");
    let (stdout, stderr) = piped(&["--data", &d, "topics", "delete", "t"], &always);
    assert_eq!(stdout, "Deleted topic t.\n");
    assert!(stderr.contains("deleting topic t: ["), "{stderr}");
}
