//! A full disk through the API: appends to a partition on a small tmpfs until the file
//! system is full; the error names the file, the OS error and the bytes asked for; the
//! writer used the last bytes it could (it falls back from its reservation step to what
//! the batch needs); every earlier record reads back; once a little space is freed the
//! next append succeeds, and everything survives a reopen.
// Reaches into the partition's log (`Partition::log`, a `testing` feature hook).
#![cfg(feature = "testing")]

mod tmpfs_support;

use tidelog::{BatchBuilder, Broker, Error, Partition, TopicConfig};
use tmpfs_support::Tmpfs;

const VALUE: usize = 8000;

fn value(i: usize) -> Vec<u8> {
    let mut v = format!("{i:08}").into_bytes();
    v.resize(VALUE, (i % 251) as u8);
    v
}

fn batch(i: usize) -> Vec<u8> {
    let mut b = BatchBuilder::new();
    b.push(1_700_000_000_000 + i as i64, None, Some(&value(i)), &[]);
    b.finish()
}

/// Every record of the partition, in order, checked against what was appended.
fn check_all(p: &Partition, count: usize) {
    let mut at = 0i64;
    let mut seen = 0usize;
    while at < p.high_watermark() {
        let slice = p.read(at, 1 << 20).expect("earlier data stays readable");
        assert!(!slice.is_empty());
        for b in slice.batches() {
            for r in b.records() {
                let r = r.expect("record");
                assert_eq!(r.offset as usize, seen);
                assert_eq!(r.value, Some(&value(seen)[..]), "record {seen}");
                seen += 1;
            }
        }
        at = slice.next_offset();
    }
    assert_eq!(seen, count);
}

#[test]
fn a_full_disk_fails_appends_whole_and_they_resume_once_space_is_freed() {
    let Some(fs) = Tmpfs::mount("3m") else {
        return;
    };
    let data = fs.path().join("data");
    let ballast = fs.ballast(256 << 10);
    let broker = Broker::open(&data).expect("open");
    let topic = broker
        .create_topic("t", 1, TopicConfig::new())
        .and_then(|()| broker.topic("t"))
        .expect("create");
    let p = topic.partition(0).expect("p0");
    let mut appended = 0usize;
    let err = loop {
        assert!(appended < 1000, "a 3 MiB file system must fill up");
        match p.append_batch(&batch(appended)) {
            Ok(info) => {
                assert_eq!(info.base_offset as usize, appended);
                appended += 1;
            }
            Err(e) => break e,
        }
    };
    assert!(
        appended > 100,
        "the disk filled early: {appended} records, {err}"
    );
    let text = err.to_string();
    let segment = data.join("t-0").join("00000000000000000000.log");
    assert!(matches!(err, Error::Io { .. }), "{err:?}");
    assert!(
        text.contains(&format!("reserve disk space for {}", segment.display())),
        "names the file: {text}"
    );
    assert!(
        text.contains("No space left on device (os error 28)"),
        "the real error, not \"Success (os error 0)\": {text}"
    );
    assert!(text.contains("bytes asked for at byte"), "{text}");
    // Reservation steps are 256 KiB and up: it took the last of them a batch at a time.
    let left = fs.available();
    assert!(
        left < 3 * batch(0).len() as u64,
        "{left} bytes left unused after the first failure"
    );
    // The failed append left nothing behind: the same batch fails again, and what was
    // appended before reads back.
    assert!(p.append_batch(&batch(appended)).is_err());
    assert_eq!(p.log_end_offset() as usize, appended);
    check_all(&p, appended);

    std::fs::remove_file(&ballast).expect("free space");
    for _ in 0..5 {
        p.append_batch(&batch(appended))
            .expect("appends resume once there is room");
        appended += 1;
    }
    check_all(&p, appended);
    broker.close().expect("close");
    drop(broker);

    let broker = Broker::open(&data).expect("reopen");
    let p = broker.topic("t").expect("t").partition(0).expect("p0");
    assert!(p.log().recovery_report().cuts.is_empty());
    check_all(&p, appended);
    broker.close().expect("close");
}
