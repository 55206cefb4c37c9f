//! `tidelog serve` with 10,000 partitions under an open-files limit of 1,024 (soft and
//! hard): a librdkafka consumer assigned every partition reads every record, and the
//! server's descriptors stay bounded (a Fetch response sends a bounded number of
//! partitions with `sendfile`, each holding its segment's descriptor until sent; the
//! others are copied from the map).

mod serve_support;

use std::collections::HashSet;
use std::path::Path;
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer as _};
use rdkafka::message::Message;
use rdkafka::{ClientConfig, Offset, TopicPartitionList};
use tidelog::{BatchBuilder, Broker, TopicConfig};

const PARTITIONS: i32 = 10_000;

fn fds_of(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

#[test]
fn a_client_reads_ten_thousand_partitions_from_a_server_under_1024_open_files() {
    let shm = Path::new("/dev/shm");
    let dir = if shm.is_dir() {
        tempfile::tempdir_in(shm).unwrap()
    } else {
        tempfile::tempdir().unwrap()
    };
    let data = dir.path().join("data");
    {
        let broker = Broker::open(&data).unwrap();
        let topic = broker
            .create_topic(
                "many",
                PARTITIONS,
                TopicConfig::new().segment_bytes(16 << 10),
            )
            .and_then(|()| broker.topic("many"))
            .unwrap();
        for p in topic.partitions().iter() {
            let mut b = BatchBuilder::new();
            b.push(0, None, Some(format!("{}", p.index()).as_bytes()), &[]);
            p.append_batch(&b.finish()).unwrap();
        }
        broker.close().unwrap();
    }
    let serve = serve_support::start(&data, &[], Some("ulimit -n 1024"));
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", serve.child.id())).unwrap();
    assert!(
        limits
            .lines()
            .any(|l| l.starts_with("Max open files") && l.split_whitespace().nth(3) == Some("1024")),
        "{limits}"
    );

    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", serve.addr.to_string())
        .set("group.id", "many")
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    for p in 0..PARTITIONS {
        tpl.add_partition_offset("many", p, Offset::Beginning)
            .unwrap();
    }
    consumer.assign(&tpl).unwrap();
    let mut seen = HashSet::new();
    let mut most_fds = 0;
    let deadline = Instant::now() + Duration::from_secs(120);
    while seen.len() < PARTITIONS as usize && Instant::now() < deadline {
        if let Some(m) = consumer.poll(Duration::from_millis(100)) {
            let m = m.unwrap();
            assert_eq!(
                m.payload().unwrap(),
                m.partition().to_string().as_bytes(),
                "partition {}",
                m.partition()
            );
            seen.insert(m.partition());
        }
        most_fds = most_fds.max(fds_of(serve.child.id()));
    }
    assert_eq!(seen.len(), PARTITIONS as usize, "every partition's record");
    assert!(
        most_fds < 400,
        "{most_fds} descriptors at most in the server"
    );
    drop(consumer);
    let (status, lines) = serve.stop();
    assert!(status.success(), "{status}: {lines:?}");
}
