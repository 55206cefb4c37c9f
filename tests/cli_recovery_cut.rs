//! What recovery cuts is never dropped silently: a command that opens a data directory
//! whose trusted segment is damaged at its end prints one line on stderr naming the
//! partition, the file, the offset, and the bytes and records removed; `tidelog dump`
//! reads the cut file and finds the valid batches after the damaged one.

#![cfg(feature = "testing")]

mod cli_support;

use cli_support::{ok, tidelog};
use tidelog::testing::{batch_positions, damage_batch_magic};
use tidelog::{BatchBuilder, Broker, TopicConfig};

#[test]
fn a_recovery_cut_is_reported_on_stderr_and_its_bytes_can_be_dumped() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    {
        let broker = Broker::open(&data).unwrap();
        let t = broker
            .create_topic("t", 1, TopicConfig::new().segment_bytes(4096))
            .and_then(|()| broker.topic("t"))
            .unwrap();
        let p = t.partition(0).unwrap();
        for i in 0..200 {
            let mut b = BatchBuilder::new();
            b.push(
                1000 + i,
                Some(b"k"),
                Some(format!("value-{i:04}").as_bytes()),
                &[],
            );
            p.append_batch(&b.finish()).unwrap();
        }
        assert!(p.segment_count() >= 3);
        broker.close().unwrap();
    }
    let part = data.join("t-0");
    let mut logs: Vec<_> = std::fs::read_dir(&part)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    logs.sort();
    // The first segment: damage the magic byte of its second-to-last batch, after its
    // last index entry (opening walks those headers).
    let victim = &logs[0];
    let batches = batch_positions(victim).unwrap().len();
    let pos = damage_batch_magic(victim, batches - 2).unwrap();
    let size = std::fs::metadata(victim).unwrap().len() as usize;
    let offset = (batches - 2) as i64; // one record per batch, from offset 0

    // A command that opens the directory for writing recovers it (one that only reads
    // opens it read-only and repairs nothing: it reports the damage when it reads it).
    let run = tidelog(&data, &["produce", "t"], "");
    assert_eq!(run.code, 0, "{run:?}");
    let consumed = ok(tidelog(
        &data,
        &["consume", "t", "--from-beginning", "-e"],
        "",
    ));
    assert_eq!(consumed.lines().count() as i64, offset, "{run:?}");
    let warnings: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| l.starts_with("warning:"))
        .collect();
    assert_eq!(warnings.len(), logs.len(), "one line per cut: {run:?}");
    let first = warnings[0];
    assert!(first.contains("partition t-0"), "{first}");
    assert!(first.contains(&victim.display().to_string()), "{first}");
    assert!(
        first.contains(&format!("at byte {pos} (offset {offset})")),
        "{first}"
    );
    assert!(
        first.contains(&format!("{} bytes and 2 records removed", size - pos)),
        "{first}"
    );
    assert!(first.contains("magic"), "{first}");

    // The cut file holds the damaged batch and the good one after it.
    let cut = std::fs::read_dir(&part)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with(&format!(
                    "{}.cut-",
                    victim.file_name().unwrap().to_string_lossy()
                ))
        })
        .expect("a cut file beside the segment");
    let dump = tidelog(&data, &["dump", cut.to_str().unwrap(), "--records"], "");
    assert_eq!(dump.code, 1, "the damaged batch is a problem: {dump:?}");
    assert!(dump.stdout.contains("unsupported magic byte 9"), "{dump:?}");
    assert!(
        dump.stdout.contains(&format!(
            "baseOffset: {} lastOffset: {}",
            offset + 1,
            offset + 1
        )),
        "the valid batch after it is found: {dump:?}"
    );
    assert!(
        dump.stdout.contains(&format!("value-{:04}", offset + 1)),
        "{dump:?}"
    );

    // Opened again, nothing more is cut and nothing is printed.
    let again = tidelog(&data, &["produce", "t"], "");
    assert_eq!(again.code, 0, "{again:?}");
    assert!(!again.stderr.contains("warning"), "{again:?}");
}
