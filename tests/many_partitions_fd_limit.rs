//! Ten thousand partitions under the common default of 1,024 open files: a child
//! process of this test, whose open-files limit is lowered to 1,024, creates a topic of
//! 10,000 partitions, appends a batch to each, closes, reopens the data directory and
//! reads every record back; it holds a bounded number of descriptors and memory maps
//! throughout, however many partitions there are.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use tidelog::{BatchBuilder, Broker, TopicConfig};

const PARTITIONS: i32 = 10_000;
/// Set in the child's environment: run the scenario instead of spawning it.
const CHILD: &str = "TIDELOG_TEST_MANY_PARTITIONS_CHILD";

fn count_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count())
}

fn count_maps() -> usize {
    std::fs::read_to_string("/proc/self/maps").map_or(0, |m| m.lines().count())
}

fn open_files_limit() -> String {
    std::fs::read_to_string("/proc/self/limits")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap_or("")
        .to_string()
}

/// The scenario, in the child whose limit is 1,024.
fn child(data: &Path) {
    assert!(
        open_files_limit().split_whitespace().nth(3) == Some("1024"),
        "the child runs under a soft limit of 1024: {}",
        open_files_limit()
    );
    let t = Instant::now();
    let broker = Broker::open(data).expect("open");
    let topic = broker
        .create_topic(
            "many",
            PARTITIONS,
            TopicConfig::new().segment_bytes(16 << 10),
        )
        .and_then(|()| broker.topic("many"))
        .expect("10,000 partitions are created under 1,024 open files");
    let created = t.elapsed();
    let parts = topic.partitions();
    for p in parts.iter() {
        let mut b = BatchBuilder::new();
        b.push(
            0,
            None,
            Some(format!("record of {}", p.index()).as_bytes()),
            &[],
        );
        p.append_batch(&b.finish()).expect("append");
    }
    let (fds, maps) = (count_fds(), count_maps());
    eprintln!("created in {created:?}, one batch each: {fds} descriptors, {maps} maps");
    assert!(fds < 300, "{fds} descriptors open for 10,000 partitions");
    // A partition being written maps its active segment's log (indexes come with the
    // first index entry, which one small batch does not make).
    assert!(maps < 10_000 + 2_000, "{maps} maps");
    drop((parts, topic));
    broker.close().expect("close");
    drop(broker);

    let t = Instant::now();
    let broker = Broker::open(data).expect("reopen");
    let reopened = t.elapsed();
    let (fds, maps) = (count_fds(), count_maps());
    eprintln!("reopened in {reopened:?}: {fds} descriptors, {maps} maps");
    assert!(fds < 300, "{fds} descriptors after reopening");
    assert!(
        maps < 2_000,
        "{maps} maps: nothing is mapped until it is read"
    );
    let topic = broker.topic("many").expect("many");
    assert_eq!(topic.partition_count(), PARTITIONS);
    for p in topic.partitions().iter() {
        let slice = p.read(0, 1 << 10).expect("read");
        let batch = slice.batches().next().expect("a batch");
        let record = batch.records().next().expect("a record").expect("decodes");
        assert_eq!(
            record.value,
            Some(format!("record of {}", p.index()).as_bytes())
        );
    }
    let (fds, maps) = (count_fds(), count_maps());
    eprintln!("read back: {fds} descriptors, {maps} maps");
    assert!(fds < 300, "{fds} descriptors after reading every partition");
    // Reads map the active segments read-only, within the budget of mapped segments.
    assert!(maps < 10_000, "{maps} maps after reading every partition");
    broker.close().expect("close");
}

#[test]
fn ten_thousand_partitions_fit_under_1024_open_files() {
    if let Some(data) = std::env::var_os(CHILD) {
        child(Path::new(&data));
        return;
    }
    // On a tmpfs where there is one: the test is about descriptors and maps, not about
    // 40,000 directory fsyncs on a disk.
    let shm = Path::new("/dev/shm");
    let dir = if shm.is_dir() {
        tempfile::tempdir_in(shm).unwrap()
    } else {
        tempfile::tempdir().unwrap()
    };
    let exe = std::env::current_exe().unwrap();
    let out = Command::new("sh")
        .arg("-c")
        .arg("ulimit -S -n 1024 && exec \"$0\" \"$@\"")
        .arg(&exe)
        .args([
            "--exact",
            "ten_thousand_partitions_fit_under_1024_open_files",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, dir.path().join("data"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "the child failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    eprintln!("{stderr}");
}
