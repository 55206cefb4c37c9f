//! Batches compressed by real clients (confluent-kafka, kafka-python, kcat; see
//! tests/fixtures/README.md) are read back in process: appended as they are, then read by
//! a `Consumer` and a `GroupConsumer`, every record's key, value and header checked.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use tidelog::record::batches;
use tidelog::{
    Broker, Consumer, ConsumerConfig, GroupConfig, GroupConsumer, OffsetReset, TopicConfig,
};

const CLIENTS: [&str; 2] = ["confluent-kafka", "kafka-python"];
const CODECS: [&str; 4] = ["gzip", "snappy", "lz4", "zstd"];

fn fixture(name: &str) -> Vec<u8> {
    let path: PathBuf = [
        env!("CARGO_MANIFEST_DIR"),
        "tests/fixtures/compressed",
        name,
    ]
    .iter()
    .collect();
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// (offset, key, value, header) of every record a consumer reads from `topic`.
type Seen = Vec<(i64, Vec<u8>, Vec<u8>, Vec<u8>)>;

fn consume_all(broker: &Broker, topic: &str, expect: usize) -> Seen {
    let mut consumer = Consumer::new(
        broker,
        ConsumerConfig::default().auto_offset_reset(OffsetReset::Earliest),
    );
    consumer.assign(&[(topic, 0)]).unwrap();
    let mut seen = Seen::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while seen.len() < expect && Instant::now() < deadline {
        for r in consumer.poll(Duration::from_millis(200)).unwrap().iter() {
            let r = r.unwrap();
            let header = r.headers.iter().next().unwrap().1.unwrap().to_vec();
            seen.push((
                r.offset,
                r.key.unwrap().to_vec(),
                r.value.unwrap().to_vec(),
                header,
            ));
        }
    }
    seen
}

#[test]
fn batches_compressed_by_real_clients_are_read_back_in_process() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::open(dir.path()).unwrap();
    for client in CLIENTS {
        for codec in CODECS {
            let topic = format!("{client}-{codec}");
            let bytes = fixture(&format!("{topic}.log"));
            let first = batches(&bytes).next().unwrap().unwrap();
            assert_eq!(
                first.codec().unwrap().name(),
                codec,
                "{topic} is compressed"
            );
            broker.create_topic(&topic, 1, TopicConfig::new()).unwrap();
            broker
                .topic(&topic)
                .unwrap()
                .partition(0)
                .unwrap()
                .append_batch(&bytes)
                .unwrap();
            let seen = consume_all(&broker, &topic, 40);
            assert_eq!(seen.len(), 40, "{topic}");
            for (i, (offset, key, value, header)) in seen.iter().enumerate() {
                assert_eq!(*offset, i as i64, "{topic}");
                assert_eq!(key, format!("key-{}", i % 7).as_bytes(), "{topic}");
                let want =
                    format!("{codec} record number {i}, padded so that the batch compresses well");
                assert_eq!(value, want.as_bytes(), "{topic}");
                assert_eq!(header, client.as_bytes(), "{topic}");
            }
        }
    }
    // kcat (librdkafka 2.0.2) compresses zstd only against tidelog; values count from 1.
    broker
        .create_topic("kcat-zstd", 1, TopicConfig::new())
        .unwrap();
    let bytes = fixture("kcat-zstd.log");
    broker
        .topic("kcat-zstd")
        .unwrap()
        .partition(0)
        .unwrap()
        .append_batch(&bytes)
        .unwrap();
    let seen = consume_all(&broker, "kcat-zstd", 40);
    assert_eq!(seen.len(), 40);
    assert!(seen[39].2.starts_with(b"zstd record number 40,"));
    assert_eq!(seen[0].3, b"kcat");
    broker.close().unwrap();
}

#[test]
fn a_group_member_reads_compressed_batches_and_a_bad_frame_is_corrupt_naming_the_batch() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::open(dir.path()).unwrap();
    broker.create_topic("mixed", 1, TopicConfig::new()).unwrap();
    let p = broker.topic("mixed").unwrap().partition(0).unwrap();
    for codec in CODECS {
        p.append_batch(&fixture(&format!("kafka-python-{codec}.log")))
            .unwrap();
    }
    let config = GroupConfig::new("readers", &["mixed"]).auto_offset_reset(OffsetReset::Earliest);
    let mut member = GroupConsumer::join(&broker, config).unwrap();
    let mut values = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while values.len() < 160 && Instant::now() < deadline {
        for r in member.poll(Duration::from_millis(200)).unwrap().iter() {
            let r = r.unwrap();
            values.push((
                r.offset,
                String::from_utf8(r.value.unwrap().to_vec()).unwrap(),
            ));
        }
    }
    assert_eq!(values.len(), 160);
    assert_eq!(
        values[40],
        (
            40,
            "snappy record number 0, padded so that the batch compresses well".into()
        )
    );
    assert!(values[159].1.starts_with("zstd record number 39"));
    member.close();

    // Damage the compressed stream of one batch (with a valid CRC, as a client could
    // send it): reading it is Error::Corrupt naming the partition and the batch.
    let mut bad = fixture("confluent-kafka-gzip.log");
    let len = bad.len();
    for b in &mut bad[80..len - 10] {
        *b = !*b;
    }
    let crc = tidelog::record::crc32c(&bad[21..]);
    bad[17..21].copy_from_slice(&crc.to_be_bytes());
    let at = p.append_batch(&bad).unwrap().base_offset;
    let mut consumer = Consumer::new(&broker, ConsumerConfig::default());
    consumer.assign(&[("mixed", 0)]).unwrap();
    consumer.seek("mixed", 0, at).unwrap();
    let polled = consumer.poll(Duration::from_secs(5)).unwrap();
    let err = polled.iter().next().unwrap().unwrap_err();
    assert!(err.is_corruption(), "{err}");
    let text = err.to_string();
    assert!(
        text.contains(&format!("mixed-0 (batch at offset {at})")),
        "{text}"
    );
    assert!(text.contains("gzip"), "{text}");
    broker.close().unwrap();
}
