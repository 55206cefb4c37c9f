//! `tidelog serve --fetch-max-bytes`: a consumer's Fetch asking for 1 MiB gets at most
//! that many record bytes (but always one whole batch), and without the flag the
//! default (1 MiB) holds every batch of the log. Raw Fetch v4 requests, so the test
//! sees exactly what one response carries.

mod serve_support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use tidelog::{BatchBuilder, Broker, TopicConfig};

/// A Fetch v4 request for `topic` partition 0 from `offset`, size-prefixed.
fn fetch_v4(corr: i32, topic: &str, offset: i64, max_bytes: i32) -> Vec<u8> {
    let mut msg = Vec::new();
    msg.extend_from_slice(&1i16.to_be_bytes()); // api key: Fetch
    msg.extend_from_slice(&4i16.to_be_bytes()); // version
    msg.extend_from_slice(&corr.to_be_bytes());
    msg.extend_from_slice(&(-1i16).to_be_bytes()); // client id: null
    msg.extend_from_slice(&(-1i32).to_be_bytes()); // replica id: a consumer
    msg.extend_from_slice(&0i32.to_be_bytes()); // max_wait_ms
    msg.extend_from_slice(&1i32.to_be_bytes()); // min_bytes
    msg.extend_from_slice(&max_bytes.to_be_bytes());
    msg.push(0); // isolation level: read uncommitted
    msg.extend_from_slice(&1i32.to_be_bytes()); // one topic
    msg.extend_from_slice(&(topic.len() as i16).to_be_bytes());
    msg.extend_from_slice(topic.as_bytes());
    msg.extend_from_slice(&1i32.to_be_bytes()); // one partition
    msg.extend_from_slice(&0i32.to_be_bytes());
    msg.extend_from_slice(&offset.to_be_bytes());
    msg.extend_from_slice(&max_bytes.to_be_bytes()); // partition_max_bytes
    let mut out = (msg.len() as i32).to_be_bytes().to_vec();
    out.extend_from_slice(&msg);
    out
}

/// Sends a Fetch v4 and returns the partition's error code and record bytes.
fn fetch(addr: SocketAddr, topic: &str, offset: i64, max_bytes: i32) -> (i16, Vec<u8>) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(&fetch_v4(9, topic, offset, max_bytes)).unwrap();
    let mut size = [0u8; 4];
    s.read_exact(&mut size).unwrap();
    let mut body = vec![0u8; i32::from_be_bytes(size) as usize];
    s.read_exact(&mut body).unwrap();
    let mut at = 0usize;
    let mut take = |n: usize| {
        let b = body[at..at + n].to_vec();
        at += n;
        b
    };
    assert_eq!(take(4), 9i32.to_be_bytes(), "correlation id");
    take(4); // throttle_time_ms
    assert_eq!(take(4), 1i32.to_be_bytes(), "one topic");
    let name_len = i16::from_be_bytes(take(2).try_into().unwrap()) as usize;
    assert_eq!(take(name_len), topic.as_bytes());
    assert_eq!(take(4), 1i32.to_be_bytes(), "one partition");
    assert_eq!(take(4), 0i32.to_be_bytes(), "partition 0");
    let error = i16::from_be_bytes(take(2).try_into().unwrap());
    take(8 + 8 + 4); // high watermark, last stable offset, aborted transactions
    let len = i32::from_be_bytes(take(4).try_into().unwrap());
    let records = if len > 0 {
        take(len as usize)
    } else {
        Vec::new()
    };
    (error, records)
}

#[test]
fn a_fetch_carries_at_most_fetch_max_bytes_but_a_whole_first_batch() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    // Four batches of one 1,000-byte record each.
    let mut batches = Vec::new();
    {
        let broker = Broker::open(&data).unwrap();
        let topic = broker
            .create_topic("t", 1, TopicConfig::new())
            .and_then(|()| broker.topic("t"))
            .unwrap();
        let p = topic.partition(0).unwrap();
        for i in 0..4u8 {
            let mut b = BatchBuilder::new();
            b.push(0, None, Some(&[b'a' + i; 1000][..]), &[]);
            let bytes = b.finish();
            p.append_batch(&bytes).unwrap();
            batches.push(bytes);
        }
        broker.close().unwrap();
    }
    let batch_len = batches[0].len();
    assert_eq!(batch_len, 1070, "the arithmetic below");

    // At most 2,200 bytes: two batches (2 x 1,070) fit, three do not.
    let serve = serve_support::start(&data, &["--fetch-max-bytes", "2200"], None);
    let (error, records) = fetch(serve.addr, "t", 0, 1 << 20);
    assert_eq!(error, 0);
    assert_eq!(records.len(), 2 * batch_len);
    // The bytes are the log's: each batch as stored (offset and leader epoch stamped).
    assert_eq!(records[16..batch_len], batches[0][16..]);
    assert_eq!(records[batch_len + 16..], batches[1][16..]);
    let (_, records) = fetch(serve.addr, "t", 2, 1 << 20);
    assert_eq!(records.len(), 2 * batch_len);
    serve.stop();

    // At the lowest cap (1,024 bytes, under one batch), one whole batch still comes.
    let serve = serve_support::start(&data, &["--fetch-max-bytes", "1024"], None);
    let (error, records) = fetch(serve.addr, "t", 1, 1 << 20);
    assert_eq!(error, 0);
    assert_eq!(records.len(), batch_len);
    assert_eq!(records[16..], batches[1][16..]);
    serve.stop();

    // The default (1 MiB) holds all four.
    let serve = serve_support::start(&data, &[], None);
    let (error, records) = fetch(serve.addr, "t", 0, 1 << 20);
    assert_eq!(error, 0);
    assert_eq!(records.len(), 4 * batch_len);
    serve.stop();
}

#[test]
fn a_fetch_max_bytes_under_1024_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (code, stderr) =
        serve_support::run_to_exit(&dir.path().join("data"), &["--fetch-max-bytes", "1000"]);
    assert_ne!(code, Some(0), "{stderr}");
    assert!(stderr.contains("--fetch-max-bytes"), "{stderr}");
}
