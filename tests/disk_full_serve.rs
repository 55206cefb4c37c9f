//! A full disk through the server: Produce requests to a broker on a small tmpfs get
//! KAFKA_STORAGE_ERROR once the file system is full, the server logs the episode once at
//! error level (not once per failed request) and once at warning level when appends
//! succeed again after space was freed, and every record produced reads back.
#![cfg(all(feature = "server", feature = "cli", feature = "testing"))]

mod tmpfs_support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiKey, ProduceRequest, ProduceResponse, RequestHeader, ResponseHeader, TopicName,
    produce_request,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};
use tidelog::testing::CapturedLogs;
use tidelog::{BatchBuilder, Broker, Server, TopicConfig};
use tmpfs_support::Tmpfs;

/// KAFKA_STORAGE_ERROR.
const STORAGE_ERROR: i16 = 56;

fn value(i: usize) -> Vec<u8> {
    let mut v = format!("{i:08}").into_bytes();
    v.resize(8000, (i % 251) as u8);
    v
}

/// Sends one Produce v8 of record `i` to t-0 and returns its partition error code.
fn produce(s: &mut TcpStream, i: usize) -> i16 {
    let mut b = BatchBuilder::new();
    b.push(1_700_000_000_000, None, Some(&value(i)), &[]);
    let req = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(5000)
        .with_topic_data(vec![
            produce_request::TopicProduceData::default()
                .with_name(TopicName(StrBytes::from_static_str("t")))
                .with_partition_data(vec![
                    produce_request::PartitionProduceData::default()
                        .with_index(0)
                        .with_records(Some(Bytes::from(b.finish()))),
                ]),
        ]);
    let header = RequestHeader::default()
        .with_request_api_key(ApiKey::Produce as i16)
        .with_request_api_version(8)
        .with_correlation_id(i as i32)
        .with_client_id(Some(StrBytes::from_static_str("disk-full-test")));
    let mut buf = BytesMut::new();
    header
        .encode(&mut buf, ApiKey::Produce.request_header_version(8))
        .unwrap();
    req.encode(&mut buf, 8).unwrap();
    let mut framed = (buf.len() as i32).to_be_bytes().to_vec();
    framed.extend_from_slice(&buf);
    s.write_all(&framed).unwrap();
    let mut size = [0u8; 4];
    s.read_exact(&mut size).unwrap();
    let mut body = vec![0u8; i32::from_be_bytes(size) as usize];
    s.read_exact(&mut body).unwrap();
    let mut body = Bytes::from(body);
    let h = ResponseHeader::decode(&mut body, ProduceResponse::header_version(8)).unwrap();
    assert_eq!(h.correlation_id, i as i32);
    let resp = ProduceResponse::decode(&mut body, 8).unwrap();
    resp.responses[0].partition_responses[0].error_code
}

#[test]
fn the_server_answers_a_full_disk_with_storage_errors_and_logs_each_episode_once() {
    let Some(fs) = Tmpfs::mount("3m") else {
        return;
    };
    let logs = CapturedLogs::default();
    let writer = logs.clone();
    tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::INFO)
        .init();
    let data = fs.path().join("data");
    let ballast = fs.ballast(256 << 10);
    let broker = Broker::open(&data).expect("open");
    broker
        .create_topic("t", 1, TopicConfig::new())
        .expect("create");
    let server = Server::builder(broker.clone())
        .listen(SocketAddr::from(([127, 0, 0, 1], 0)))
        .start()
        .expect("start");
    let mut s = TcpStream::connect(server.local_addr()).unwrap();

    let mut produced = 0usize;
    loop {
        assert!(produced < 1000, "a 3 MiB file system must fill up");
        match produce(&mut s, produced) {
            0 => produced += 1,
            code => {
                assert_eq!(code, STORAGE_ERROR);
                break;
            }
        }
    }
    assert!(produced > 100, "{produced}");
    for i in 0..20 {
        assert_eq!(produce(&mut s, produced + i), STORAGE_ERROR);
    }
    let full = logs.lines_with(&["disk full"]);
    assert_eq!(full.len(), 1, "one line for the episode: {full:?}");
    assert!(full[0].contains("ERROR"), "{}", full[0]);
    assert!(
        full[0].contains("No space left on device (os error 28)")
            && full[0].contains("bytes asked for"),
        "{}",
        full[0]
    );
    assert!(logs.lines_with(&["available again"]).is_empty());

    std::fs::remove_file(&ballast).expect("free space");
    for _ in 0..5 {
        assert_eq!(produce(&mut s, produced), 0, "produce resumes");
        produced += 1;
    }
    let back = logs.lines_with(&["available again"]);
    assert_eq!(back.len(), 1, "{back:?}");
    assert_eq!(logs.lines_with(&["disk full"]).len(), 1);

    let p = broker.topic("t").unwrap().partition(0).unwrap();
    let mut at = 0;
    let mut seen = 0usize;
    while at < p.high_watermark() {
        let slice = p.read(at, 1 << 20).expect("read back");
        for b in slice.batches() {
            for r in b.records() {
                assert_eq!(r.unwrap().value, Some(&value(seen)[..]));
                seen += 1;
            }
        }
        at = slice.next_offset();
    }
    assert_eq!(seen, produced);
    server.shutdown().expect("shutdown");
    broker.close().expect("close");
}
