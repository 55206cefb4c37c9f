//! `tidelog serve --log-retention-check-interval-ms` (Kafka's
//! `log.retention.check.interval.ms`): retention runs that often, so segments past a
//! topic's `retention.ms` are deleted within seconds instead of the default 5 minutes.
#![cfg(all(feature = "cli", feature = "server"))]

mod cli_support;
use cli_support::{ok, serve, tidelog};
use std::time::{Duration, Instant};

/// The `.log` files of partition 0 of `topic`.
fn segments(data: &std::path::Path, topic: &str) -> usize {
    std::fs::read_dir(data.join(format!("{topic}-0")))
        .map(|dir| {
            dir.filter_map(Result::ok)
                .filter(|e| e.file_name().to_string_lossy().ends_with(".log"))
                .count()
        })
        .unwrap_or(0)
}

#[test]
fn serve_applies_retention_every_check_interval() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let t = |args: &[&str], stdin: &str| tidelog(&data, args, stdin);
    ok(t(
        &[
            "topics",
            "create",
            "old",
            "--config",
            "retention.ms=1000",
            "--config",
            "segment.bytes=1024",
        ],
        "",
    ));
    // One batch per run, each well under 1 KiB: a segment each.
    for run in 0..6 {
        let lines: String = (0..10)
            .map(|i| format!("record {run}.{i:02} of the old topic\n"))
            .collect();
        ok(t(&["produce", "old"], &lines));
    }
    let before = segments(&data, "old");
    assert!(before >= 3, "small segments rolled: {before}");

    let server = serve(&data, &["--log-retention-check-interval-ms", "1000"]);
    // Records are more than 1 s old after at most a second; the next check deletes
    // every segment but the active one.
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut now = segments(&data, "old");
    while now > 1 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        now = segments(&data, "old");
    }
    assert_eq!(
        now, 1,
        "segments past retention.ms deleted within seconds (had {before})"
    );
    assert_eq!(server.stop(), Some(0));
}
