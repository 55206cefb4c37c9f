//! The forwarder against a tidelog server in process: every record once, in order,
//! across restarts whose commits were lost, with renames and other partition counts;
//! retention held while the remote side is away.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::{Forwarder, ForwarderConfig, GROUP_PREFIX, OFFSET_HEADER, SOURCE_HEADER};
use crate::producer::partition_for_key;
use crate::{
    Broker, ClientConfig, Consumer, ConsumerConfig, IsolationLevel, OffsetReset, Producer,
    ProducerRecord, Server, TopicConfig,
};

/// A record as the remote side holds it: key, value, headers (without the forwarder's),
/// timestamp, and the source and local offset of the forwarder's headers.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Forwarded {
    key: Option<Vec<u8>>,
    value: Vec<u8>,
    headers: Vec<(String, Vec<u8>)>,
    timestamp: i64,
    source: String,
    offset: i64,
}

/// Every committed record of `topic` on `broker` (read as an exactly-once reader of the
/// remote side reads: aborted copies are not there), per partition, in offset order.
fn read_all(broker: &Broker, topic: &str) -> Vec<Vec<Forwarded>> {
    let count = broker.topic(topic).unwrap().partition_count();
    let mut out = vec![Vec::new(); count as usize];
    let mut c = Consumer::new(
        broker,
        ConsumerConfig {
            auto_offset_reset: OffsetReset::Earliest,
            isolation_level: IsolationLevel::ReadCommitted,
            ..ConsumerConfig::default()
        },
    );
    let assignment: Vec<(&str, i32)> = (0..count).map(|p| (topic, p)).collect();
    c.assign(&assignment).unwrap();
    for _ in 0..10_000 {
        let records = c.poll(Duration::from_millis(20)).unwrap();
        if records.is_empty() {
            break;
        }
        for r in records.iter() {
            let r = r.unwrap();
            let mut headers = Vec::new();
            let (mut source, mut offset) = (String::new(), -1);
            for (k, v) in r.headers.iter() {
                let v = v.unwrap_or_default();
                match k {
                    SOURCE_HEADER => source = String::from_utf8(v.to_vec()).unwrap(),
                    OFFSET_HEADER => offset = std::str::from_utf8(v).unwrap().parse().unwrap(),
                    _ => headers.push((k.to_string(), v.to_vec())),
                }
            }
            out[r.partition as usize].push(Forwarded {
                key: r.key.map(<[u8]>::to_vec),
                value: r.value.unwrap_or_default().to_vec(),
                headers,
                timestamp: r.timestamp,
                source,
                offset,
            });
        }
    }
    out
}

fn produce(broker: &Broker, topic: &str, from: u32, to: u32) {
    let producer = Producer::new(broker).unwrap();
    for i in from..to {
        let key = format!("k{}", i % 37);
        let value = format!("v{i}");
        let headers = [("n", &b"1"[..])];
        producer
            .send(
                topic,
                ProducerRecord::keyed(key.as_bytes(), value.as_bytes())
                    .timestamp(1_000_000 + i64::from(i))
                    .headers(&headers),
            )
            .unwrap();
    }
}

fn remote_node() -> (tempfile::TempDir, Broker, crate::ServerHandle) {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::open(dir.path()).unwrap();
    let server = Server::builder(broker.clone())
        .listen("127.0.0.1:0")
        .start()
        .unwrap();
    (dir, broker, server)
}

/// A broker in a new temporary directory with `topic` of `partitions` partitions.
fn local_topic(topic: &str, partitions: i32, config: TopicConfig) -> (tempfile::TempDir, Broker) {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::open(dir.path()).unwrap();
    broker.create_topic(topic, partitions, config).unwrap();
    (dir, broker)
}

/// Small segments whose records retention may delete after a second.
fn short_retention() -> TopicConfig {
    TopicConfig::new()
        .set("segment.bytes", "1024")
        .set("retention.ms", "1000")
}

/// Asserts that `f` forwards everything there is within 60 s.
fn wait_caught_up(f: &Forwarder) {
    assert!(
        f.wait_caught_up(Duration::from_secs(60)),
        "{:?}",
        f.status()
    );
}

/// An address nothing listens on: a remote side that is away.
fn away() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().to_string()
}

/// Waits (10 s at most) until `f` says why it waits; that error.
fn wait_failing(f: &Forwarder) -> String {
    for _ in 0..500 {
        if let Some(e) = f.status().last_error {
            return e;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("no error while the remote side is away: {:?}", f.status());
}

/// Moves the forwarder's committed positions and retention holds back to 0: as if it
/// was killed after sending but before committing.
fn forget_commits(local: &Broker, name: &str, topic: &str) {
    for p in local.topic(topic).unwrap().partitions().iter() {
        p.log()
            .hold_retention_durably(&format!("{GROUP_PREFIX}{name}"), Some(0))
            .unwrap();
    }
    let count = local.topic(topic).unwrap().partition_count();
    let mut c = Consumer::new(
        local,
        ConsumerConfig {
            group_id: Some(format!("{GROUP_PREFIX}{name}")),
            ..ConsumerConfig::default()
        },
    );
    let zeros: Vec<(&str, i32, i64)> = (0..count).map(|p| (topic, p, 0)).collect();
    c.commit_offsets(&zeros).unwrap();
}

fn check_exactly_once(local: &Broker, topic: &str, remote: &[Vec<Forwarded>], name: &str) {
    let locals = read_all(local, topic);
    let mut by_source: HashMap<String, Vec<&Forwarded>> = HashMap::new();
    for (q, p) in remote.iter().enumerate() {
        let mut last: HashMap<&str, i64> = HashMap::new();
        for r in p {
            let before = last.insert(&r.source, r.offset).unwrap_or(-1);
            assert!(
                before < r.offset,
                "{} in local order in partition {q}",
                r.source
            );
            by_source.entry(r.source.clone()).or_default().push(r);
        }
    }
    for (p, records) in locals.iter().enumerate() {
        let source = format!("{name}/{topic}/{p}");
        let mut got = by_source.remove(&source).unwrap_or_default();
        got.sort_by_key(|r| r.offset);
        assert_eq!(got.len(), records.len(), "{source}: every record once");
        for (i, (l, r)) in records.iter().zip(&got).enumerate() {
            assert_eq!(r.offset, i as i64, "{source}: each offset once");
            assert_eq!(
                (&l.key, &l.value, &l.headers, l.timestamp),
                (&r.key, &r.value, &r.headers, r.timestamp),
                "{source} offset {i}"
            );
        }
    }
    assert!(by_source.is_empty(), "nothing else: {:?}", by_source.keys());
}

#[test]
fn every_record_arrives_once_in_order_when_commits_were_lost() {
    let (_dir, local) = local_topic("events", 3, TopicConfig::new());
    let (_rdir, remote, server) = remote_node();
    let client = || ClientConfig::new(server.local_addr().to_string());
    produce(&local, "events", 0, 1_500);
    let f = Forwarder::builder(&local, client()).start().unwrap();
    wait_caught_up(&f);
    let status = f.status();
    assert_eq!(status.records_forwarded, 1_500);
    assert_eq!(status.records_behind(), 0);
    assert!(status.partitions.iter().all(|p| p.bytes_behind == 0));
    // The broker's metrics show it while it runs, and no more once it stopped.
    let shown = local.metrics().forwarders;
    assert_eq!(shown.len(), 1, "{shown:?}");
    assert_eq!(
        (shown[0].name.as_str(), shown[0].records_forwarded),
        ("default", 1_500)
    );
    let text = crate::metrics::prometheus_text(&local.metrics());
    for line in [
        "tidelog_forward_records_total{forwarder=\"default\"} 1500",
        "tidelog_forward_records_behind{forwarder=\"default\",topic=\"events\",partition=\"2\",remote_topic=\"events\"} 0",
        "tidelog_forward_error{forwarder=\"default\"} 0",
    ] {
        assert!(text.lines().any(|l| l == line), "no {line:?} in:\n{text}");
    }
    f.stop().unwrap();
    assert!(local.metrics().forwarders.is_empty());
    let text = crate::metrics::prometheus_text(&local.metrics());
    assert!(!text.contains("tidelog_forward_"), "{text}");
    // Killed after sending, before committing: the remote tail says where it stands.
    forget_commits(&local, "default", "events");
    produce(&local, "events", 1_500, 2_000);
    let f = Forwarder::builder(&local, client()).start().unwrap();
    wait_caught_up(&f);
    let status = f.status();
    assert_eq!(
        status.records_skipped, 0,
        "resumed after the remote's last record"
    );
    assert_eq!(status.records_forwarded, 500);
    f.stop().unwrap();
    let forwarded = read_all(&remote, "events");
    check_exactly_once(&local, "events", &forwarded, "default");
    // Partition p went to partition p.
    for (p, records) in forwarded.iter().enumerate() {
        assert!(
            records
                .iter()
                .all(|r| r.source == format!("default/events/{p}"))
        );
    }
    // The position is the group's committed offset, as `groups describe` shows it.
    let c = Consumer::new(
        &local,
        ConsumerConfig {
            group_id: Some("tidelog-forward-default".into()),
            ..ConsumerConfig::default()
        },
    );
    for p in 0..3 {
        let end = local
            .topic("events")
            .unwrap()
            .partition(p)
            .unwrap()
            .high_watermark();
        assert_eq!(c.committed("events", p).unwrap(), Some(end));
    }
}

#[test]
fn renamed_to_a_topic_of_another_partition_count_by_key_and_skipping_what_is_there() {
    let (_dir, local) = local_topic("a", 2, TopicConfig::new());
    local
        .create_topic("ignored", 1, TopicConfig::new())
        .unwrap();
    let (_rdir, remote, server) = remote_node();
    remote
        .create_topic("site.a", 5, TopicConfig::new())
        .unwrap();
    let client = || ClientConfig::new(server.local_addr().to_string());
    produce(&local, "a", 0, 800);
    produce(&local, "ignored", 0, 10);
    let start = || {
        Forwarder::builder(&local, client())
            .name("edge-1")
            .topic("a")
            .rename("a", "site.a")
            .max_in_flight_records(64)
            .start()
            .unwrap()
    };
    let f = start();
    wait_caught_up(&f);
    f.stop().unwrap();
    forget_commits(&local, "edge-1", "a");
    produce(&local, "a", 800, 1_000);
    let f = start();
    wait_caught_up(&f);
    let status = f.status();
    assert_eq!(status.records_forwarded, 200);
    assert!(status.records_skipped > 0, "{status:?}");
    f.stop().unwrap();
    let forwarded = read_all(&remote, "site.a");
    for (q, records) in forwarded.iter().enumerate() {
        for r in records {
            assert_eq!(partition_for_key(r.key.as_deref().unwrap(), 5), q as i32);
        }
    }
    check_exactly_once(&local, "a", &forwarded, "edge-1");
    assert!(remote.topic("ignored").is_err(), "only the topics given");
}

#[test]
fn retention_keeps_what_was_not_forwarded_unless_allowed() {
    let (_dir, local) = local_topic("t", 1, short_retention());
    produce(&local, "t", 0, 200);
    let p = local.topic("t").unwrap().partition(0).unwrap();
    assert!(p.segment_count() > 2);
    let away = away();
    let f = Forwarder::builder(&local, ClientConfig::new(away.clone()))
        .start()
        .unwrap();
    p.log().apply_retention(i64::MAX / 2).unwrap();
    assert_eq!(p.log_start_offset(), 0, "nothing was forwarded: all kept");
    wait_failing(&f);
    f.stop().unwrap();
    let f = Forwarder::builder(&local, ClientConfig::new(away))
        .allow_retention_loss(true)
        .start()
        .unwrap();
    p.log().apply_retention(i64::MAX / 2).unwrap();
    assert!(p.log_start_offset() > 0, "allowed: retention deletes");
    f.stop().unwrap();
    // Back: what is left is forwarded, what retention took is counted as lost.
    let (_rdir, remote, server) = remote_node();
    let f = Forwarder::builder(&local, ClientConfig::new(server.local_addr().to_string()))
        .allow_retention_loss(true)
        .start()
        .unwrap();
    wait_caught_up(&f);
    let status = f.status();
    assert_eq!(status.records_lost as i64, p.log_start_offset());
    assert_eq!(status.records_forwarded as i64, 200 - p.log_start_offset());
    f.stop().unwrap();
    let forwarded = read_all(&remote, "t");
    assert_eq!(forwarded[0][0].offset, p.log_start_offset());
}

#[test]
fn a_read_only_forwarders_hold_outlives_the_applications_restart_unless_loss_is_allowed() {
    let (local_dir, app) = local_topic("t", 1, short_retention());
    produce(&app, "t", 0, 200);
    // The forwarder reads the directory the application holds: it commits nothing.
    let (_rdir, remote, server) = remote_node();
    let addr = server.local_addr().to_string();
    let reader = Broker::open_read_only(local_dir.path()).unwrap();
    let f = Forwarder::builder(&reader, ClientConfig::new(addr.clone()))
        .start()
        .unwrap();
    wait_caught_up(&f);
    f.stop().unwrap();
    drop(reader);
    // The application writes on with the forwarder gone, and restarts: nothing in its
    // memory holds retention, the forwarder's hold file does.
    produce(&app, "t", 200, 400);
    app.close().unwrap();
    drop(app);
    let app = Broker::open(local_dir.path()).unwrap();
    let p = app.topic("t").unwrap().partition(0).unwrap();
    assert!(p.segment_count() > 4);
    assert_eq!(p.log().retention_floor(), None, "no hold in memory");
    p.log().apply_retention(i64::MAX / 2).unwrap();
    let start = p.log_start_offset();
    assert!(start > 0, "what was forwarded may go");
    assert!(start <= 200, "what was not is kept: log start {start}");
    // A read-only forwarder started again resumes there, and sends the rest once.
    let reader = Broker::open_read_only(local_dir.path()).unwrap();
    let f = Forwarder::builder(&reader, ClientConfig::new(addr))
        .start()
        .unwrap();
    wait_caught_up(&f);
    let status = f.status();
    assert_eq!(
        (status.records_forwarded, status.records_lost),
        (200, 0),
        "{status:?}"
    );
    f.stop().unwrap();
    let offsets: Vec<i64> = read_all(&remote, "t")[0].iter().map(|r| r.offset).collect();
    assert_eq!(offsets, (0..400).collect::<Vec<i64>>(), "every record once");
    // Allowed loss: the forwarder releases its hold, and retention takes the rest.
    produce(&app, "t", 400, 600);
    let f = Forwarder::builder(&reader, ClientConfig::new("127.0.0.1:1"))
        .allow_retention_loss(true)
        .start()
        .unwrap();
    f.stop().unwrap();
    assert_eq!(p.log().durable_retention_holds().unwrap(), vec![]);
    p.log().apply_retention(i64::MAX / 2).unwrap();
    assert!(p.log_start_offset() > 400, "{}", p.log_start_offset());
    // Released by name, for a forwarder retired for good.
    let reader_log = reader.topic("t").unwrap().partition(0).unwrap();
    reader_log
        .log()
        .hold_retention_durably("tidelog-forward-old", Some(0))
        .unwrap();
    assert_eq!(Forwarder::release(&app, "old").unwrap(), 1);
    assert_eq!(Forwarder::release(&app, "old").unwrap(), 0);
}

#[test]
fn bad_settings_are_refused_by_name() {
    let (_dir, local) = local_topic("t", 1, TopicConfig::new());
    let client = || ClientConfig::new("127.0.0.1:1");
    let e = Forwarder::builder(&local, client())
        .name("a/b")
        .start()
        .unwrap_err();
    assert!(e.to_string().contains("a/b"), "{e}");
    let e = Forwarder::builder(&local, client())
        .topic("nope")
        .start()
        .unwrap_err();
    assert!(matches!(e, crate::Error::UnknownTopic(_)), "{e}");
    let e = Forwarder::builder(&local, client())
        .topic("t")
        .rename("u", "v")
        .start()
        .unwrap_err();
    assert!(e.to_string().contains("u=v"), "{e}");
    let e = Forwarder::builder(&local, client())
        .rename("t", "bad name!")
        .start()
        .unwrap_err();
    assert!(e.to_string().contains("bad name!"), "{e}");
}

#[test]
fn positions_read_from_the_directory_show_the_position_lag_and_last_error() {
    let (local_dir, local) = local_topic("t", 2, TopicConfig::new());
    produce(&local, "t", 0, 100);
    let ends: Vec<i64> = (0..2)
        .map(|p| {
            local
                .topic("t")
                .unwrap()
                .partition(p)
                .unwrap()
                .log_end_offset()
        })
        .collect();
    assert_eq!(ends.iter().sum::<i64>(), 100);
    // A forwarder no one started has no position.
    let none = Forwarder::positions(&local, "default").unwrap();
    assert!(none.partitions.is_empty(), "{none:?}");
    assert_eq!(none.last_error, None);
    assert!(Forwarder::positions(&local, "a/b").is_err(), "a bad name");
    // The remote side is away: the forwarder holds at 0 and records why it waits.
    let f = Forwarder::builder(&local, ClientConfig::new(away()))
        .start()
        .unwrap();
    let error = wait_failing(&f);
    f.stop().unwrap();
    // Read back from the directory, by another (read-only) opener too.
    let reader = Broker::open_read_only(local_dir.path()).unwrap();
    for broker in [&local, &reader] {
        let stopped = Forwarder::positions(broker, "default").unwrap();
        let rows: Vec<(&str, i32, i64, i64)> = stopped
            .partitions
            .iter()
            .map(|p| (p.topic.as_str(), p.partition, p.position, p.end))
            .collect();
        assert_eq!(rows, vec![("t", 0, 0, ends[0]), ("t", 1, 0, ends[1])]);
        assert_eq!(stopped.records_behind(), 100);
        assert!(stopped.bytes_behind() > 0);
        assert_eq!(stopped.last_error.as_deref(), Some(error.as_str()));
        assert!(stopped.last_error_at.is_some());
    }
    // Once the remote side is back and everything is forwarded: no lag, no error.
    let (_rdir, _remote, server) = remote_node();
    let f = Forwarder::builder(&local, ClientConfig::new(server.local_addr().to_string()))
        .start()
        .unwrap();
    wait_caught_up(&f);
    f.stop().unwrap();
    let done = Forwarder::positions(&reader, "default").unwrap();
    assert_eq!(done.partitions.len(), 2, "{done:?}");
    assert_eq!(done.records_behind(), 0, "{done:?}");
    assert_eq!((done.last_error, done.last_error_at), (None, None));
}

#[test]
fn the_brokers_metrics_show_each_running_forwarder_until_it_is_stopped_or_dropped() {
    let (_dir, local) = local_topic("t", 2, TopicConfig::new());
    let away = away();
    let start = |name: &str| {
        Forwarder::builder(&local, ClientConfig::new(away.clone()))
            .config(ForwarderConfig {
                name: name.into(),
                retry_backoff: Duration::from_millis(20),
                ..ForwarderConfig::default()
            })
            .start()
            .unwrap()
    };
    let (second, first) = (start("second"), start("first"));
    wait_failing(&first);
    wait_failing(&second);
    let shown = local.metrics().forwarders;
    let names: Vec<&str> = shown.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["first", "second"], "sorted by name");
    for f in &shown {
        assert!(f.errors >= 1 && f.sessions >= f.errors, "{f:?}");
        assert!(f.last_error.is_some(), "{f:?}");
    }
    let text = crate::metrics::prometheus_text(&local.metrics());
    let series = |prefix: &str| text.lines().filter(|l| l.starts_with(prefix)).count();
    assert_eq!(series("tidelog_forward_error{"), 2, "{text}");
    assert_eq!(series("tidelog_forward_last_error_info{"), 2, "{text}");
    assert_eq!(
        series("# TYPE tidelog_forward_errors_total counter"),
        1,
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l == "tidelog_forward_error{forwarder=\"first\"} 1"),
        "{text}"
    );
    // Dropped: it leaves; stopped: it leaves too.
    drop(second);
    let names: Vec<String> = local
        .metrics()
        .forwarders
        .into_iter()
        .map(|f| f.name)
        .collect();
    assert_eq!(names, ["first"]);
    first.stop().unwrap();
    assert!(local.metrics().forwarders.is_empty());
    let text = crate::metrics::prometheus_text(&local.metrics());
    assert!(!text.contains("tidelog_forward_"), "{text}");
}

/// A TCP proxy on `front` to `target` that, while `hold` is set, keeps each Produce
/// request it reads (the whole frame) instead of passing it on: a request written by a
/// session that then failed, still on the wire.
fn holding_proxy(
    front: std::net::TcpListener,
    target: String,
    hold: Arc<AtomicBool>,
    held: Arc<Mutex<Vec<Vec<u8>>>>,
) {
    std::thread::spawn(move || {
        for conn in front.incoming().take(200) {
            let Ok(mut client) = conn else { return };
            let Ok(mut server) = std::net::TcpStream::connect(&target) else {
                return;
            };
            let (hold, held) = (hold.clone(), held.clone());
            let (mut s_in, mut c_out) = (server.try_clone().unwrap(), client.try_clone().unwrap());
            std::thread::spawn(move || std::io::copy(&mut s_in, &mut c_out));
            std::thread::spawn(move || {
                loop {
                    let mut size = [0u8; 4];
                    if client.read_exact(&mut size).is_err() {
                        break;
                    }
                    let mut frame = size.to_vec();
                    frame.resize(4 + u32::from_be_bytes(size) as usize, 0);
                    if client.read_exact(&mut frame[4..]).is_err() {
                        break;
                    }
                    let produce = frame.get(4..6) == Some(&[0, 0][..]);
                    if produce && hold.load(Ordering::SeqCst) {
                        held.lock().unwrap().push(frame);
                    } else if server.write_all(&frame).is_err() {
                        break;
                    }
                }
                let _ = server.shutdown(std::net::Shutdown::Both);
            });
        }
    });
}

/// Writes the request `frame` to `target` on a connection of its own; the error codes
/// of the partitions of the Produce answer.
fn produce_now(target: &str, frame: &[u8]) -> Vec<i16> {
    use kafka_protocol::messages::{ApiKey, ProduceResponse, ResponseHeader};
    use kafka_protocol::protocol::Decodable;
    let version = i16::from_be_bytes([frame[6], frame[7]]);
    let mut conn = std::net::TcpStream::connect(target).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    conn.write_all(frame).unwrap();
    let mut size = [0u8; 4];
    conn.read_exact(&mut size).unwrap();
    let mut body = vec![0u8; u32::from_be_bytes(size) as usize];
    conn.read_exact(&mut body).unwrap();
    let mut b = bytes::Bytes::from(body);
    ResponseHeader::decode(&mut b, ApiKey::Produce.response_header_version(version)).unwrap();
    let response = ProduceResponse::decode(&mut b, version).unwrap();
    response
        .responses
        .iter()
        .flat_map(|t| t.partition_responses.iter().map(|p| p.error_code))
        .collect()
}

/// A session fails while its Produce request is still on the wire (held by a proxy
/// past the client's delivery timeout); the next session sends those records again.
/// When the held request then reaches the leader, the next session's
/// `init_transactions` has fenced it: it is refused, and the remote topic holds every
/// record once (an idempotent producer's request would be appended: a second copy).
#[test]
fn a_produce_request_a_failed_session_left_on_the_wire_is_fenced() {
    let (_dir, local) = local_topic("events", 1, TopicConfig::new());
    let rdir = tempfile::tempdir().unwrap();
    let remote = Broker::open(rdir.path()).unwrap();
    let front = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let front_addr = front.local_addr().unwrap().to_string();
    let server = Server::builder(remote.clone())
        .listen("127.0.0.1:0")
        .advertised(front_addr.clone())
        .start()
        .unwrap();
    let target = server.local_addr().to_string();
    let (hold, held) = (Arc::new(AtomicBool::new(true)), Arc::default());
    holding_proxy(front, target.clone(), hold.clone(), Arc::clone(&held));
    produce(&local, "events", 0, 200);
    let client = ClientConfig::new(front_addr)
        .set("request.timeout.ms", 1_000)
        .set("delivery.timeout.ms", 2_000);
    let f = Forwarder::builder(&local, client).start().unwrap();
    let e = wait_failing(&f);
    assert!(!held.lock().unwrap().is_empty(), "no Produce held: {e}");
    hold.store(false, Ordering::SeqCst);
    wait_caught_up(&f);
    // What the failed session left on the wire arrives now.
    let frames = std::mem::take(&mut *held.lock().unwrap());
    for frame in &frames {
        let codes = produce_now(&target, frame);
        assert!(
            !codes.is_empty() && codes.iter().all(|c| *c != 0),
            "a held request was appended: {codes:?}"
        );
    }
    f.stop().unwrap();
    let forwarded = read_all(&remote, "events");
    check_exactly_once(&local, "events", &forwarded, "default");
}

/// A session killed after its records reached the remote partition and before its
/// transaction committed: the next session's `init_transactions` fences that producer
/// and aborts the transaction, and its scan of the remote tail does not take the
/// aborted copies for forwarded records. It sends them again: a reader of committed
/// records sees each once (a reader of uncommitted ones sees the aborted copies too).
#[test]
fn records_of_a_transaction_a_killed_session_left_open_are_sent_again() {
    let (_dir, local) = local_topic("events", 1, TopicConfig::new());
    let (_rdir, remote, server) = remote_node();
    let client = || ClientConfig::new(server.local_addr().to_string());
    produce(&local, "events", 0, 100);
    // The killed session's transaction: local offsets 0 to 59, never ended.
    let cluster = crate::Cluster::connect(client()).unwrap();
    cluster
        .create_topic_if_missing("events", 1, TopicConfig::new())
        .unwrap();
    let killed = Producer::builder(&cluster)
        .transactional_id(format!("{GROUP_PREFIX}default"))
        .build()
        .unwrap();
    killed.init_transactions().unwrap();
    killed.begin_transaction().unwrap();
    for offset in 0..60 {
        let o = offset.to_string();
        let headers = [
            (SOURCE_HEADER, &b"default/events/0"[..]),
            (OFFSET_HEADER, o.as_bytes()),
        ];
        killed
            .send(
                "events",
                ProducerRecord::new(b"copy").partition(0).headers(&headers),
            )
            .unwrap();
    }
    killed.flush().unwrap();

    let f = Forwarder::builder(&local, client()).start().unwrap();
    wait_caught_up(&f);
    let status = f.status();
    assert_eq!((status.records_forwarded, status.records_skipped), (100, 0));
    f.stop().unwrap();
    assert!(
        matches!(
            killed.commit_transaction(),
            Err(crate::Error::ProducerFenced { .. })
        ),
        "the killed session's producer is fenced"
    );
    check_exactly_once(&local, "events", &read_all(&remote, "events"), "default");
    let mut c = Consumer::new(
        &remote,
        ConsumerConfig {
            auto_offset_reset: OffsetReset::Earliest,
            ..ConsumerConfig::default()
        },
    );
    c.assign(&[("events", 0)]).unwrap();
    let mut uncommitted = 0;
    for _ in 0..100 {
        let records = c.poll(Duration::from_millis(20)).unwrap();
        if records.is_empty() {
            break;
        }
        uncommitted += records.iter().count();
    }
    assert_eq!(uncommitted, 160, "the aborted copies and the records");
}

/// A forwarder stopped while it sends commits the transaction it has open: none is left
/// to hold the remote partition's last stable offset (what readers of committed records
/// get to) until the coordinator aborts it at its timeout.
#[test]
fn a_forwarder_stopped_while_it_sends_leaves_no_transaction_open() {
    let (_dir, local) = local_topic("events", 1, TopicConfig::new());
    let (_rdir, remote, server) = remote_node();
    let client = || ClientConfig::new(server.local_addr().to_string());
    let remote_end = || {
        remote
            .topic("events")
            .ok()
            .map_or(0, |t| t.partition(0).unwrap().log_end_offset())
    };
    for round in 0..6 {
        // Records enough to be sending when the stop comes.
        produce(&local, "events", round * 50_000, (round + 1) * 50_000);
        let f = Forwarder::builder(&local, client()).start().unwrap();
        let before = remote_end();
        // Stopped once it sends again (or after 10 s: the stop is then at any point).
        for _ in 0..1_000 {
            if remote_end() > before {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        f.stop().unwrap();
        // The commit's markers are written after EndTxn is answered (by the
        // coordinator's marker senders, as Kafka's): the last stable offset reaches the
        // high watermark within 5 s, where a transaction left open would hold it until
        // its 60 s timeout.
        let p = remote.topic("events").unwrap().partition(0).unwrap();
        for _ in 0..500 {
            if p.last_stable_offset().unwrap() == p.high_watermark() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(
            p.last_stable_offset().unwrap(),
            p.high_watermark(),
            "round {round}: a transaction is left open"
        );
    }
    let f = Forwarder::builder(&local, client()).start().unwrap();
    wait_caught_up(&f);
    f.stop().unwrap();
    check_exactly_once(&local, "events", &read_all(&remote, "events"), "default");
}

/// A remote node whose principal `fwd` may do anything to topics and the cluster but
/// not write as a transactional id: the forwarder's session fails at its
/// `init_transactions`, and its error says how to go on; without transactions the same
/// principal forwards everything.
#[test]
fn a_remote_cluster_that_refuses_transactions_gets_an_error_with_the_ways_on() {
    use crate::security::SecurityProtocol;
    use crate::security::acl::{
        AclBinding, AclOperation, AclPermission, AclStore, FileAclStore, PatternType, ResourceType,
    };
    use crate::security::credentials::{CredentialChange, CredentialStore, FileCredentialStore};
    use crate::security::scram::{ScramCredential, ScramMechanism};

    let (_dir, local) = local_topic("events", 1, TopicConfig::new());
    produce(&local, "events", 0, 20);
    let rdir = tempfile::tempdir().unwrap();
    let remote = Broker::open(rdir.path()).unwrap();
    remote
        .create_topic("events", 1, TopicConfig::new())
        .unwrap();
    FileCredentialStore::open(rdir.path())
        .unwrap()
        .apply(&[CredentialChange::Upsert {
            user: "fwd".into(),
            credential: ScramCredential::new(ScramMechanism::Sha512, "pw", 4096),
        }])
        .unwrap();
    let allow = |resource_type, resource_name: &str| AclBinding {
        resource_type,
        resource_name: resource_name.into(),
        pattern_type: PatternType::Literal,
        principal: "User:fwd".into(),
        host: "*".into(),
        operation: AclOperation::All,
        permission: AclPermission::Allow,
    };
    FileAclStore::open(rdir.path())
        .unwrap()
        .add(&[
            allow(ResourceType::Topic, "*"),
            allow(ResourceType::Cluster, "kafka-cluster"),
        ])
        .unwrap();
    let server = Server::builder(remote.clone())
        .listen("127.0.0.1:0")
        .security_protocol(SecurityProtocol::SaslPlaintext)
        .authorizer(true)
        .start()
        .unwrap();
    let client = || {
        ClientConfig::new(server.local_addr().to_string())
            .set("security.protocol", "SASL_PLAINTEXT")
            .set("sasl.mechanism", "PLAIN")
            .set("sasl.username", "fwd")
            .set("sasl.password", "pw")
    };

    let f = Forwarder::builder(&local, client()).start().unwrap();
    let error = wait_failing(&f);
    assert!(
        error.contains("TRANSACTIONAL_ID_AUTHORIZATION_FAILED")
            && error.contains("tidelog-forward-default")
            && error.contains("--no-transactions")
            && error.contains("ForwarderBuilder::transactional(false)"),
        "{error}"
    );
    assert_eq!(f.status().records_forwarded, 0);
    f.stop().unwrap();

    let f = Forwarder::builder(&local, client())
        .transactional(false)
        .start()
        .unwrap();
    wait_caught_up(&f);
    assert_eq!(f.status().records_forwarded, 20);
    f.stop().unwrap();
    assert_eq!(read_all(&remote, "events")[0].len(), 20);
    server.shutdown().unwrap();
}
