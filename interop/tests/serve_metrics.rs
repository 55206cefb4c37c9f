//! `tidelog serve --metrics-listen`: a Prometheus scrape of a running server while a
//! librdkafka producer writes shows the partition's counters and the server's request
//! counts growing, and a consumer group's lag as the high watermark minus its committed
//! offset; the start-up and topic-creation lines are logged at info without RUST_LOG.

mod serve_support;

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer as _};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer as _};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};
use serve_support::start;

const TOPIC: &str = "metered";

/// `GET /metrics`: every sample line as `name{labels}` -> value.
fn scrape(addr: SocketAddr) -> HashMap<String, f64> {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: tidelog\r\n\r\n")
        .unwrap();
    let mut response = String::new();
    s.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").expect("an HTTP response");
    assert!(head.starts_with("HTTP/1.1 200 OK"), "{head}");
    assert!(
        head.contains("Content-Type: text/plain; version=0.0.4"),
        "{head}"
    );
    body.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let (name, value) = l.rsplit_once(' ').expect("name value");
            (name.to_string(), value.parse().expect("a number"))
        })
        .collect()
}

fn value(m: &HashMap<String, f64>, name: &str) -> f64 {
    *m.get(name)
        .unwrap_or_else(|| panic!("no {name} in the scrape: {:#?}", m.keys()))
}

fn partition(name: &str) -> String {
    format!("tidelog_partition_{name}{{topic=\"{TOPIC}\",partition=\"0\"}}")
}

fn produce(producer: &BaseProducer, n: usize, from: usize) {
    for i in from..from + n {
        let v = format!("record {i}");
        loop {
            match producer.send(BaseRecord::<(), _>::to(TOPIC).payload(&v).partition(0)) {
                Ok(()) => break,
                Err((e, _)) => {
                    assert!(
                        matches!(
                            e.rdkafka_error_code(),
                            Some(rdkafka::types::RDKafkaErrorCode::QueueFull)
                        ),
                        "{e}"
                    );
                    producer.poll(Duration::from_millis(10));
                }
            }
        }
    }
    producer.flush(Duration::from_secs(30)).unwrap();
}

#[test]
fn a_scrape_while_producing_shows_counters_growing_and_the_groups_lag() {
    let tmp = tempfile::tempdir().unwrap();
    let serve = start(tmp.path(), &["--metrics-listen", "127.0.0.1:0"], None);
    let metrics: SocketAddr = serve
        .lines_through("tidelog serve: metrics on ")
        .iter()
        .find_map(|l| l.strip_prefix("tidelog serve: metrics on http://"))
        .and_then(|rest| rest.strip_suffix("/metrics"))
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("no metrics address: {:?}", serve.lines()));
    let bootstrap = serve.addr.to_string();
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("client.id", "metrics-producer")
        .set("linger.ms", "5")
        .create()
        .unwrap();

    produce(&producer, 100, 0);
    let first = scrape(metrics);
    assert_eq!(value(&first, &partition("records_in_total")), 100.0);
    assert_eq!(value(&first, &partition("log_end_offset")), 100.0);
    let produces = "tidelog_server_request_duration_seconds_count{api=\"Produce\"}";
    assert!(value(&first, produces) >= 1.0);

    // A group commits offset 40: its lag is the other 60.
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("group.id", "metered-group")
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(TOPIC, 0, Offset::Offset(40))
        .unwrap();
    consumer.commit(&tpl, CommitMode::Sync).unwrap();
    let lag =
        format!("tidelog_group_lag{{group=\"metered-group\",topic=\"{TOPIC}\",partition=\"0\"}}");
    let committed = scrape(metrics);
    assert_eq!(value(&committed, &lag), 60.0);

    // Scrapes while a producer thread writes: no counter ever goes down, and they grow.
    let done = Arc::new(AtomicBool::new(false));
    let writer = {
        let done = Arc::clone(&done);
        std::thread::spawn(move || {
            for round in 0..20 {
                produce(&producer, 50, 100 + round * 50);
            }
            done.store(true, Ordering::Release);
        })
    };
    let watched = [
        partition("records_in_total"),
        partition("bytes_in_total"),
        produces.to_string(),
    ];
    let mut last = committed;
    let mut grew = 0;
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done.load(Ordering::Acquire) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        let now = scrape(metrics);
        for name in &watched {
            assert!(
                value(&now, name) >= value(&last, name),
                "{name} went down from {} to {}",
                value(&last, name),
                value(&now, name)
            );
        }
        if value(&now, &watched[0]) > value(&last, &watched[0]) {
            grew += 1;
        }
        last = now;
    }
    writer.join().unwrap();
    let end = scrape(metrics);
    assert_eq!(value(&end, &partition("records_in_total")), 1100.0);
    assert_eq!(value(&end, &partition("high_watermark")), 1100.0);
    assert_eq!(
        value(&end, &lag),
        1060.0,
        "the lag follows the high watermark"
    );
    assert!(grew >= 1, "no scrape saw records_in grow while producing");
    assert!(value(&end, produces) > value(&first, produces));
    assert!(value(&end, "tidelog_server_connections_accepted_total") >= 2.0);

    // Reading 1100 records over the network counts them out.
    let reader: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("group.id", "metered-reader")
        .create()
        .unwrap();
    let mut all = TopicPartitionList::new();
    all.add_partition_offset(TOPIC, 0, Offset::Beginning)
        .unwrap();
    reader.assign(&all).unwrap();
    let mut read = 0;
    let deadline = Instant::now() + Duration::from_secs(30);
    while read < 1100 && Instant::now() < deadline {
        if let Some(m) = reader.poll(Duration::from_millis(200)) {
            m.unwrap();
            read += 1;
        }
    }
    assert_eq!(read, 1100);
    let after = scrape(metrics);
    assert!(value(&after, &partition("records_out_total")) >= 1100.0);
    assert!(value(&after, "tidelog_server_sendfile_bytes_total") > 0.0);

    // Closed while the server runs: a librdkafka consumer closing against a stopped
    // server waits out its timeouts.
    drop(reader);
    drop(consumer);
    let (status, lines) = serve.stop();
    assert!(status.success(), "{lines:?}");
    // Logged at info by default: start-up, the topic and who created it, shutdown.
    for needle in [
        "data directory opened",
        "tidelog serve started",
        "topic created by a Metadata request",
        "server stopped",
    ] {
        assert!(
            lines
                .iter()
                .any(|l| l.contains(" INFO ") && l.contains(needle)),
            "no INFO line with {needle:?}: {lines:#?}"
        );
    }
    let created = lines.iter().find(|l| l.contains("topic created")).unwrap();
    assert!(
        created.contains("client_id=\"metrics-producer\"") && created.contains("peer=127.0.0.1:"),
        "{created}"
    );
}
