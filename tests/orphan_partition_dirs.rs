//! Partition directories of no registered topic (as an older version left them when a
//! topic creation failed part way) are reported when the data directory is opened, with
//! their size, and moved aside to `orphaned/`: never kept where they would be taken for
//! a partition, never deleted. The CLI prints one warning line each.

mod cli_support;

use tidelog::{BatchBuilder, Broker, TopicConfig};

#[test]
fn orphan_partition_directories_are_reported_and_moved_aside() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    {
        let b = Broker::open(&data).unwrap();
        let p = b
            .create_topic("kept", 1, TopicConfig::new())
            .and_then(|()| b.topic("kept"))
            .unwrap()
            .partition(0)
            .unwrap();
        let mut batch = BatchBuilder::new();
        batch.push(0, None, Some(b"record"), &[]);
        p.append_batch(&batch.finish()).unwrap();
        b.close().unwrap();
    }
    // What a half-made topic of an older version looked like: directories with an
    // empty segment and preallocated indexes, and a partition past a topic's count.
    let segment = std::fs::read(data.join("kept-0").join("00000000000000000000.log")).unwrap();
    for name in ["ghost-0", "ghost-1", "kept-7"] {
        let d = data.join(name);
        std::fs::create_dir(&d).unwrap();
        std::fs::write(d.join("00000000000000000000.log"), &segment).unwrap();
        std::fs::write(d.join("00000000000000000000.index"), vec![0u8; 4096]).unwrap();
    }
    // A directory that is not a partition's is none of the broker's business.
    std::fs::create_dir(data.join("notes")).unwrap();

    // A command that opens the directory for writing (one that only reads opens it
    // read-only and moves nothing).
    let run = cli_support::tidelog(&data, &["produce", "kept"], "");
    assert_eq!(run.code, 0, "{run:?}");
    let warnings: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| l.starts_with("warning:"))
        .collect();
    assert_eq!(warnings.len(), 3, "{run:?}");
    let bytes = segment.len() + 4096;
    for (w, name) in warnings.iter().zip(["ghost-0", "ghost-1", "kept-7"]) {
        assert!(
            w.starts_with(&format!(
                "warning: partition directory {name} ({bytes} bytes) belongs to no topic: moved to "
            )),
            "{w}"
        );
        assert!(!data.join(name).exists());
    }
    let aside: Vec<String> = std::fs::read_dir(data.join("orphaned"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(aside.len(), 3, "{aside:?}");
    for name in ["ghost-0", "ghost-1", "kept-7"] {
        let moved = aside
            .iter()
            .find(|a| a.starts_with(&format!("{name}-")))
            .unwrap_or_else(|| panic!("{name} in {aside:?}"));
        let kept = std::fs::read(
            data.join("orphaned")
                .join(moved)
                .join("00000000000000000000.log"),
        )
        .unwrap();
        assert_eq!(kept, segment, "moved whole, not deleted");
    }
    assert!(data.join("notes").is_dir());

    // Nothing is left to report; the registered topic is intact.
    let b = Broker::open(&data).unwrap();
    assert!(b.orphaned_logs().is_empty());
    assert_eq!(
        b.topic("kept")
            .unwrap()
            .partition(0)
            .unwrap()
            .log_end_offset(),
        1
    );
}
