//! A roll moves the recovery point: the maintenance thread fsyncs the segments sealed
//! since the last checkpoint and checkpoints the active segment's base offset, so that
//! recovery after a crash validates the active segment only. The crash image is a copy
//! of the directory taken while the log is open (what SIGKILL leaves: the page cache
//! holds every appended byte, nothing was closed).

use std::path::Path;
use std::time::{Duration, Instant};
use tidelog::storage::{LogManager, PartitionLog};
use tidelog::{BatchBuilder, LogConfig};

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        // The maintenance thread may rename a checkpoint's temporary file away between
        // the listing and the copy: a file that is gone is not part of the image.
        match std::fs::copy(entry.path(), to.join(entry.file_name())) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => panic!("copy {}: {e}", entry.path().display()),
        }
    }
}

#[test]
fn roll_moves_the_recovery_point_and_recovery_trusts_sealed_segments() {
    let tmp = tempfile::tempdir().unwrap();
    let manager = LogManager::open(tmp.path().join("data")).unwrap();
    let mut config = LogConfig::default();
    config.set("segment.bytes", "65536").unwrap();
    let log = manager.open_log("events-0", config).unwrap();
    manager.start_background(Duration::from_millis(5), Duration::from_secs(3600));

    let value = [7u8; 1000];
    let mut b = BatchBuilder::new();
    for _ in 0..10 {
        b.push(1_000, None, Some(&value), &[]);
    }
    let batch = b.finish();
    for _ in 0..40 {
        log.append(&batch).unwrap();
    }
    let bases = log.segment_base_offsets();
    assert!(bases.len() >= 5, "rolled several times: {bases:?}");
    let active_base = *bases.last().unwrap();
    assert!(log.log_end_offset() > active_base);

    // Nothing but the maintenance thread syncs (no flush policy is set).
    let deadline = Instant::now() + Duration::from_secs(30);
    while log.recovery_point() < active_base {
        assert!(
            Instant::now() < deadline,
            "recovery point {} never reached the active segment's base {active_base}",
            log.recovery_point()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(
        log.recovery_point(),
        active_base,
        "the active segment is not synced"
    );
    assert!(manager.background_errors().is_empty());

    // The recovery point in memory moves before the checkpoint file that records it
    // is renamed into place, so a crash image taken at once may still hold the previous
    // checkpoint: take images until one holds the new one (bounded).
    let end = log.log_end_offset();
    let mut attempt = 0;
    let (recovered, r) = loop {
        attempt += 1;
        let crash = tmp.path().join(format!("crash-{attempt}"));
        copy_dir(&tmp.path().join("data").join("events-0"), &crash);
        let recovered = PartitionLog::open(&crash, "events-0", LogConfig::default()).unwrap();
        let r = recovered.recovery_report().clone();
        if r.segments_trusted == bases.len() - 1 || Instant::now() >= deadline {
            break (recovered, r);
        }
        recovered.close().unwrap();
        std::thread::sleep(Duration::from_millis(5));
    };
    manager.close().unwrap();
    assert!(r.is_clean(), "{r:?}");
    assert_eq!(r.segments_trusted, bases.len() - 1, "{r:?}");
    assert_eq!(r.segments_validated, 1, "{r:?}");
    assert_eq!(recovered.log_end_offset(), end);
    assert_eq!(recovered.segment_base_offsets(), bases);
    // Every record reads back.
    let mut pos = 0;
    while pos < end {
        let slice = recovered.read(pos, 1 << 20).unwrap();
        assert!(slice.next_offset() > pos);
        pos = slice.next_offset();
    }
    recovered.close().unwrap();
}
