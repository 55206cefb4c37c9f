//! Compressed batches between librdkafka (the `rdkafka` crate, librdkafka 2.12) and
//! tidelog, both ways, for every codec: a librdkafka producer's batches are stored as
//! sent and read back by an in-process `Consumer`; the in-process `Producer`'s batches
//! are read by a librdkafka consumer. zstd is left out: the rdkafka crate is built here
//! without libzstd (its `zstd` feature builds C); kcat and confluent-kafka cover zstd
//! (tests/interop/compression.sh, tests/compressed_fixtures.rs).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer as _};
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer as _};
use tidelog::record::batches;
use tidelog::{
    Broker, Compression, Consumer, ConsumerConfig, OffsetReset, Producer, ProducerRecord, Server,
    TopicConfig,
};

const N: usize = 200;

fn value(codec: &str, i: usize) -> String {
    format!("{codec} record {i} with a repetitive repetitive payload")
}

#[test]
fn gzip_snappy_and_lz4_cross_between_librdkafka_and_tidelog_both_ways() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::open(dir.path()).unwrap();
    let server = Server::builder(broker.clone())
        .listen(SocketAddr::from(([127, 0, 0, 1], 0)))
        .start()
        .unwrap();
    let bootstrap = server.local_addr().to_string();
    for codec in [Compression::Gzip, Compression::Snappy, Compression::Lz4] {
        let name = codec.name();
        // librdkafka -> tidelog.
        let topic = format!("from-rdkafka-{name}");
        broker.create_topic(&topic, 1, TopicConfig::new()).unwrap();
        let producer: BaseProducer = ClientConfig::new()
            .set("bootstrap.servers", &bootstrap)
            .set("compression.type", name)
            .set("linger.ms", "50")
            .create()
            .unwrap();
        for i in 0..N {
            let v = value(name, i);
            producer
                .send(BaseRecord::<(), _>::to(&topic).payload(&v).partition(0))
                .unwrap();
        }
        producer.flush(Duration::from_secs(10)).unwrap();
        let partition = broker.topic(&topic).unwrap().partition(0).unwrap();
        let slice = partition.read(0, 1 << 20).unwrap();
        // Stored as sent. librdkafka sends a batch uncompressed when compressing does
        // not make it smaller (a batch of one record, when linger cut one off, often);
        // the rest of the records come compressed.
        let mut compressed = 0;
        for b in batches(&slice) {
            let b = b.unwrap();
            match b.codec().unwrap() {
                c if c == codec => compressed += b.record_count(),
                Compression::None => {}
                other => panic!("{topic}: a batch stored as {other:?}"),
            }
        }
        assert!(
            compressed as usize >= N / 2,
            "{topic}: {compressed} of {N} records compressed"
        );
        let mut consumer = Consumer::new(
            &broker,
            ConsumerConfig::default().auto_offset_reset(OffsetReset::Earliest),
        );
        consumer.assign(&[(&topic, 0)]).unwrap();
        let mut got = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(10);
        while got.len() < N && Instant::now() < deadline {
            for r in consumer.poll(Duration::from_millis(200)).unwrap().iter() {
                got.push(String::from_utf8(r.unwrap().value.unwrap().to_vec()).unwrap());
            }
        }
        assert_eq!(
            got,
            (0..N).map(|i| value(name, i)).collect::<Vec<_>>(),
            "{topic}"
        );

        // tidelog -> librdkafka.
        let topic = format!("to-rdkafka-{name}");
        broker.create_topic(&topic, 1, TopicConfig::new()).unwrap();
        let producer = Producer::builder(&broker)
            .compression(codec)
            .build()
            .unwrap();
        let values: Vec<String> = (0..N).map(|i| value(name, i)).collect();
        let records: Vec<_> = values
            .iter()
            .map(|v| ProducerRecord::new(v.as_bytes()).partition(0))
            .collect();
        producer.send_batch(&topic, &records).unwrap();
        producer.flush().unwrap();
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", &bootstrap)
            .set("group.id", format!("reader-{name}"))
            .set("auto.offset.reset", "earliest")
            .set("enable.auto.commit", "false")
            .create()
            .unwrap();
        consumer.subscribe(&[&topic]).unwrap();
        let mut got = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        while got.len() < N && Instant::now() < deadline {
            if let Some(m) = consumer.poll(Duration::from_millis(200)) {
                let m = m.unwrap();
                got.push(String::from_utf8(m.payload().unwrap().to_vec()).unwrap());
            }
        }
        assert_eq!(got, values, "{topic}");
    }
    server.shutdown().unwrap();
    broker.close().unwrap();
}
