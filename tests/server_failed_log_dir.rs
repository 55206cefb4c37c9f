//! A log directory that really fails under a running server with two of them
//! (`log.dirs`, JBOD), nothing calling `Broker::fail_log_dir`: the tmpfs mounted on the
//! second is unmounted (lazily, as a disk pulled from under open files; skipped where
//! the test may not mount), or the second directory is renamed away and a plain file
//! takes its path, while records are produced. The logs there write on through the files
//! they hold open until one makes a new file (a segment roll): that I/O error takes the
//! directory offline (`note_io_error`). Its partitions then answer KAFKA_STORAGE_ERROR
//! to Produce and Fetch and DescribeLogDirs reports the directory's error without
//! partitions, while the partitions of the data directory go on taking writes and
//! serving reads, with every record they acknowledged.
#![cfg(feature = "server")]

mod server_support;
mod tmpfs_support;

use std::collections::BTreeMap;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::{
    ApiKey, BrokerId, FetchRequest, FetchResponse, ProduceRequest, ProduceResponse, TopicName,
    fetch_request, produce_request,
};
use kafka_protocol::protocol::StrBytes;
use server_support::call;
use tidelog::admin::{AdminClient, ErrorCode, LogDirDescription};
use tidelog::record::batches;
use tidelog::{BatchBuilder, Broker, Server, TopicConfig};
use tmpfs_support::Tmpfs;

/// KAFKA_STORAGE_ERROR.
const STORAGE_ERROR: i16 = 56;
const PARTITIONS: i32 = 4;

fn topic() -> TopicName {
    TopicName(StrBytes::from_static_str("t"))
}

/// Produces `value` to t-`p` (acks=all); the error code and the record's offset.
fn produce(s: &mut TcpStream, p: i32, value: &str) -> (i16, i64) {
    let mut b = BatchBuilder::new();
    b.push(1_700_000_000_000, None, Some(value.as_bytes()), &[]);
    let req = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(10_000)
        .with_topic_data(vec![
            produce_request::TopicProduceData::default()
                .with_name(topic())
                .with_partition_data(vec![
                    produce_request::PartitionProduceData::default()
                        .with_index(p)
                        .with_records(Some(Bytes::from(b.finish()))),
                ]),
        ]);
    let resp: ProduceResponse = call(s, ApiKey::Produce, 8, &req);
    let r = &resp.responses[0].partition_responses[0];
    (r.error_code, r.base_offset)
}

/// Every record of t-`p` from offset 0 over the wire: the error code and offset → value.
fn fetch_all(s: &mut TcpStream, p: i32) -> (i16, BTreeMap<i64, String>) {
    let mut out = BTreeMap::new();
    let mut offset = 0;
    loop {
        let req = FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_wait_ms(0)
            .with_min_bytes(1)
            .with_max_bytes(1 << 20)
            .with_topics(vec![
                fetch_request::FetchTopic::default()
                    .with_topic(topic())
                    .with_partitions(vec![
                        fetch_request::FetchPartition::default()
                            .with_partition(p)
                            .with_fetch_offset(offset)
                            .with_partition_max_bytes(1 << 20),
                    ]),
            ]);
        let resp: FetchResponse = call(s, ApiKey::Fetch, 12, &req);
        let part = &resp.responses[0].partitions[0];
        if part.error_code != 0 {
            return (part.error_code, out);
        }
        let before = offset;
        if let Some(bytes) = &part.records {
            for b in batches(bytes) {
                let b = b.unwrap();
                for r in b.records() {
                    let r = r.unwrap();
                    let v = String::from_utf8(r.value.unwrap().to_vec()).unwrap();
                    out.insert(r.offset, v);
                    offset = r.offset + 1;
                }
            }
        }
        if offset == before || offset >= part.high_watermark {
            return (0, out);
        }
    }
}

/// A value of about 300 bytes: a 4 KiB segment rolls every dozen records.
fn value(p: i32, i: usize) -> String {
    format!("{p}-{i:06}-{}", "x".repeat(300))
}

/// How the second log directory is made to fail.
enum Second {
    /// A tmpfs, unmounted lazily.
    Mounted(Tmpfs),
    /// A plain directory, renamed away and replaced by a file (no right to mount).
    Plain(tempfile::TempDir),
}

impl Second {
    fn path(&self) -> &Path {
        match self {
            Second::Mounted(fs) => fs.path(),
            Second::Plain(d) => d.path(),
        }
    }

    /// Pulls the disk; where the directory went, for a replaced one.
    fn fail(&self) -> Option<PathBuf> {
        match self {
            Second::Mounted(fs) => {
                let st = Command::new("umount")
                    .arg("-l")
                    .arg(fs.path())
                    .status()
                    .unwrap();
                assert!(st.success(), "umount -l {}", fs.path().display());
                None
            }
            Second::Plain(d) => {
                let away = d.path().with_extension("away");
                std::fs::rename(d.path(), &away).unwrap();
                std::fs::write(d.path(), b"not a directory").unwrap();
                Some(away)
            }
        }
    }
}

/// Node 0's directories as DescribeLogDirs gives them, by path.
fn describe(admin: &AdminClient) -> BTreeMap<String, LogDirDescription> {
    let mut all = admin.describe_log_dirs().unwrap();
    assert_eq!(all.keys().copied().collect::<Vec<_>>(), vec![0], "{all:?}");
    all.remove(&0)
        .unwrap()
        .unwrap()
        .into_iter()
        .map(|d| (d.path.clone(), d))
        .collect()
}

/// The partitions of t listed in `d`.
fn partitions_of(d: &LogDirDescription) -> Vec<i32> {
    let mut out: Vec<i32> = d
        .replicas
        .iter()
        .filter(|r| r.partition.topic == "t")
        .map(|r| r.partition.partition)
        .collect();
    out.sort_unstable();
    out
}

#[test]
fn a_log_directory_unmounted_under_the_server_takes_only_its_partitions_offline() {
    // Where the test may not mount, the other test below makes the directory fail.
    let Some(fs) = Tmpfs::mount("64m") else {
        return;
    };
    fails_under_the_server(Second::Mounted(fs));
}

#[test]
fn a_log_directory_replaced_under_the_server_takes_only_its_partitions_offline() {
    fails_under_the_server(Second::Plain(tempfile::tempdir().unwrap()));
}

fn fails_under_the_server(second: Second) {
    let data = tempfile::tempdir().unwrap();
    let broker = Broker::builder(data.path())
        .log_dirs([second.path()])
        .offsets_topic_num_partitions(1)
        .open()
        .unwrap();
    broker
        .create_topic("t", PARTITIONS, TopicConfig::new().segment_bytes(4096))
        .unwrap();
    let server = Server::builder(broker.clone())
        .listen(SocketAddr::from(([127, 0, 0, 1], 0)))
        .start()
        .unwrap();
    let addr = server.local_addr();
    let mut s = TcpStream::connect(addr).unwrap();
    let admin = AdminClient::connect(&addr.to_string()).unwrap();

    // Each directory holds some of t's partitions.
    let dirs = describe(&admin);
    assert_eq!(dirs.len(), 2, "{dirs:?}");
    let main_path = data.path().canonicalize().unwrap().display().to_string();
    let second_path = second.path().canonicalize().unwrap().display().to_string();
    let (healthy, doomed) = (
        partitions_of(&dirs[&main_path]),
        partitions_of(&dirs[&second_path]),
    );
    assert!(dirs.values().all(|d| d.error.is_none()), "{dirs:?}");
    assert!(!healthy.is_empty() && !doomed.is_empty(), "{dirs:?}");
    for p in &doomed {
        assert!(second.path().join(format!("t-{p}")).is_dir());
    }

    // A few records in every partition (less than a segment), then the disk goes while
    // producing goes on.
    let mut acked: Vec<(i32, i64, String)> = Vec::new();
    let mut n = 0;
    for _ in 0..5 {
        for p in 0..PARTITIONS {
            let v = value(p, n);
            n += 1;
            let (code, offset) = produce(&mut s, p, &v);
            assert_eq!(code, 0, "t-{p} before the failure");
            acked.push((p, offset, v));
        }
    }
    assert_eq!(broker.metrics().storage.offline_log_dirs, 0);
    let away = second.fail();
    // The logs on the pulled disk write on through the files they hold open until one
    // makes a new file (a roll, within a dozen records): that I/O error fails the
    // directory. Every record for the data directory's partitions is acknowledged.
    let mut refused: BTreeMap<i32, i16> = BTreeMap::new();
    let mut late = 0;
    let deadline = Instant::now() + Duration::from_secs(60);
    while refused.len() < doomed.len() {
        assert!(
            Instant::now() < deadline,
            "the pulled directory never failed: {refused:?}, {late} records acknowledged on it"
        );
        for p in 0..PARTITIONS {
            if refused.contains_key(&p) {
                continue;
            }
            let v = value(p, n);
            n += 1;
            let (code, offset) = produce(&mut s, p, &v);
            if healthy.contains(&p) {
                assert_eq!(code, 0, "t-{p} is on the data directory");
                acked.push((p, offset, v));
            } else if code == 0 {
                late += 1;
            } else {
                refused.insert(p, code);
            }
        }
    }
    assert!(refused.values().all(|c| *c == STORAGE_ERROR), "{refused:?}");
    // (Records acknowledged on the pulled disk in the meantime are lost with it.)
    eprintln!("{late} records acknowledged on the pulled disk before a roll failed");

    // The failed directory's partitions are offline for Produce and Fetch, and
    // DescribeLogDirs tells the directory's error, with no partition in it.
    for &p in &doomed {
        assert_eq!(produce(&mut s, p, "after").0, STORAGE_ERROR, "t-{p}");
        assert_eq!(fetch_all(&mut s, p).0, STORAGE_ERROR, "t-{p}");
    }
    let dirs = describe(&admin);
    let failed = &dirs[&second_path];
    assert_eq!(
        failed.error.as_ref().map(|e| e.code),
        Some(ErrorCode::KAFKA_STORAGE_ERROR),
        "{failed:?}"
    );
    assert!(failed.replicas.is_empty(), "{failed:?}");
    assert!(dirs[&main_path].error.is_none(), "{dirs:?}");
    assert_eq!(partitions_of(&dirs[&main_path]), healthy);
    let m = broker.metrics();
    assert_eq!(
        (m.storage.offline_log_dirs, m.storage.offline_partitions),
        (1, doomed.len() as u64)
    );

    // The data directory's partitions go on, and every record they acknowledged reads
    // back at its offset.
    for i in 0..20 {
        for &p in &healthy {
            let v = value(p, n + i);
            let (code, offset) = produce(&mut s, p, &v);
            assert_eq!(code, 0, "t-{p} after the failure");
            acked.push((p, offset, v));
        }
    }
    for &p in &healthy {
        let (code, stored) = fetch_all(&mut s, p);
        assert_eq!(code, 0, "t-{p}");
        let mine: Vec<_> = acked.iter().filter(|(q, _, _)| *q == p).collect();
        let lost: Vec<_> = mine
            .iter()
            .filter(|(_, o, v)| stored.get(o) != Some(v))
            .collect();
        assert!(
            lost.is_empty(),
            "t-{p}: acknowledged records lost: {lost:?}"
        );
        assert_eq!(stored.len(), mine.len(), "t-{p}");
    }

    drop(admin);
    drop(s);
    server.shutdown().unwrap();
    drop(broker);
    if let (Second::Plain(d), Some(away)) = (&second, away) {
        std::fs::remove_file(d.path()).unwrap();
        std::fs::rename(away, d.path()).unwrap();
    }
}
