//! `tidelog serve` raises its soft open-files limit to the hard one, says how many
//! connections fit, and lowers `--max-connections` (with a warning) to what the limit
//! holds; connections past it are refused and the server keeps serving.

mod serve_support;

use std::net::TcpStream;

use serve_support::{answered, eventually_answers, start};

const SOFT: u64 = 100;
const HARD: u64 = 200;

#[test]
fn the_connection_limit_fits_the_open_files_limit() {
    let tmp = tempfile::tempdir().unwrap();
    let serve = start(
        tmp.path(),
        &["--max-connections", "10000"],
        Some(&format!("ulimit -S -n {SOFT} && ulimit -H -n {HARD}")),
    );

    // The soft limit of the running server is the hard one.
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", serve.child.id())).unwrap();
    let open_files: Vec<&str> = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .expect("Max open files")
        .split_whitespace()
        .collect();
    assert_eq!(
        open_files[3..5],
        [HARD.to_string(), HARD.to_string()],
        "{limits}"
    );

    let lines = serve.lines_through("tidelog serve: open-files limit");
    let started = lines
        .iter()
        .find(|l| l.starts_with("tidelog serve: open-files limit"))
        .unwrap_or_else(|| panic!("no line about the open-files limit: {lines:?}"));
    assert!(
        started.contains(&format!("open-files limit {HARD} (raised from {SOFT})")),
        "{started}"
    );
    let fit: usize = started
        .split("up to ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no connection count: {started}"));
    assert!(fit > 0 && (fit as u64) < HARD, "{started}");
    let warning = lines
        .iter()
        .find(|l| l.contains("WARN") && l.contains("max_connections 10000 does not fit"))
        .unwrap_or_else(|| panic!("no warning about --max-connections: {lines:?}"));
    assert!(
        warning.contains(&format!("serving at most {fit} connections")),
        "{warning}"
    );

    // More clients than fit: at most `fit` are served, the others are refused.
    let mut clients: Vec<TcpStream> = Vec::new();
    let mut served = 0;
    for _ in 0..HARD + 50 {
        let Ok(mut s) = TcpStream::connect(serve.addr) else {
            continue;
        };
        if answered(&mut s) {
            served += 1;
        }
        clients.push(s);
    }
    assert!(served >= 1 && served <= fit, "{served} served, {fit} fit");
    let lines = serve.lines_containing("refusing connection");
    assert!(
        lines.iter().any(|l| l.contains("refusing connection")),
        "{lines:?}"
    );
    drop(clients);
    // Their slots come back.
    assert!(eventually_answers(serve.addr));
    let (status, lines) = serve.stop();
    assert!(status.success(), "{lines:?}");
}
