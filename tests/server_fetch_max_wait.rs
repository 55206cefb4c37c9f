//! A Fetch asking to wait `i32::MAX` ms for data that never comes is answered once the
//! server's `fetch_max_wait` has passed, with an empty partition and no error.
#![cfg(feature = "server")]

mod server_support;

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, FetchResponse};
use kafka_protocol::protocol::{Decodable, HeaderVersion};
use server_support::{fetch, frame, response};
use tidelog::{Broker, Server, TopicConfig};

#[test]
fn max_wait_ms_is_capped_by_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::open(dir.path()).unwrap();
    broker.create_topic("quiet", 1, TopicConfig::new()).unwrap();
    let server = Server::builder(broker)
        .listen(SocketAddr::from(([127, 0, 0, 1], 0)))
        .fetch_max_wait(Duration::from_millis(300))
        .start()
        .unwrap();
    let mut s = TcpStream::connect(server.local_addr()).unwrap();
    // Far longer than the cap; without it the read below would time out.
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    for (corr, version) in [(1, 4), (2, 11)] {
        s.write_all(&frame(
            ApiKey::Fetch,
            version,
            corr,
            &fetch("quiet", i32::MAX),
        ))
        .unwrap();
        let (got, body) = response(&mut s).expect("a Fetch response within the cap");
        assert_eq!(got, corr);
        // The response header of these versions is the correlation id alone.
        assert_eq!(FetchResponse::header_version(version), 0);
        let mut b = Bytes::from(body);
        let resp = FetchResponse::decode(&mut b, version).unwrap();
        assert_eq!(resp.error_code, 0);
        let p = &resp.responses[0].partitions[0];
        assert_eq!((p.error_code, p.high_watermark), (0, 0));
        assert!(p.records.as_ref().is_none_or(|r| r.is_empty()));
    }
    server.shutdown().unwrap();
}
