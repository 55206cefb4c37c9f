//! A topic whose creation a node applied but has not published yet (its listeners are
//! still opening the partitions' logs) is answered as being created, not as unknown:
//! librdkafka's consumer, told UNKNOWN_TOPIC_OR_PARTITION by a node that lags behind the
//! one that created the topic, reports its subscribed topic as missing.

use std::io::{Read, Write};
use std::net::TcpStream;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

use super::*;

/// What a [`Gate`] holds its node's publisher on.
type Holds = dyn Fn(&MetadataImage) -> bool + Send + Sync;

/// Holds its node's publisher on the first image that `holds` (its previous one does
/// not) until released (at most [`WAIT`]): the node has applied the image and not
/// published it.
pub(super) struct Gate {
    holds: Box<Holds>,
    open: parking_lot::Mutex<bool>,
    cv: parking_lot::Condvar,
}

impl MetadataListener for Gate {
    fn on_metadata(&self, update: &MetadataUpdate<'_>) {
        if !(self.holds)(update.current) || (self.holds)(update.previous) {
            return;
        }
        let deadline = Instant::now() + WAIT;
        let mut open = self.open.lock();
        while !*open && Instant::now() < deadline {
            self.cv.wait_until(&mut open, deadline);
        }
    }
}

impl Gate {
    /// A gate on the first image that `holds`.
    pub(super) fn on(holds: impl Fn(&MetadataImage) -> bool + Send + Sync + 'static) -> Arc<Gate> {
        Arc::new(Gate {
            holds: Box::new(holds),
            open: parking_lot::Mutex::new(false),
            cv: parking_lot::Condvar::new(),
        })
    }

    pub(super) fn release(&self) {
        *self.open.lock() = true;
        self.cv.notify_all();
    }
}

/// Metadata v12 of `topic` (None: of every topic) from the node listening at `addr`:
/// each topic's name and error code.
fn metadata(addr: SocketAddr, topic: Option<&str>) -> Vec<(String, i16)> {
    let version = 12;
    let header = RequestHeader::default()
        .with_request_api_key(ApiKey::Metadata as i16)
        .with_request_api_version(version)
        .with_correlation_id(1)
        .with_client_id(Some(StrBytes::from_static_str("unit")));
    let request = MetadataRequest::default().with_topics(topic.map(|t| {
        vec![
            metadata_request::MetadataRequestTopic::default()
                .with_name(Some(TopicName(StrBytes::from_string(t.into())))),
        ]
    }));
    let mut buf = BytesMut::new();
    header
        .encode(&mut buf, ApiKey::Metadata.request_header_version(version))
        .unwrap();
    request.encode(&mut buf, version).unwrap();
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(WAIT)).unwrap();
    s.write_all(&(buf.len() as i32).to_be_bytes()).unwrap();
    s.write_all(&buf).unwrap();
    let mut size = [0u8; 4];
    s.read_exact(&mut size).unwrap();
    let mut body = vec![0u8; i32::from_be_bytes(size) as usize];
    s.read_exact(&mut body).unwrap();
    let mut b = Bytes::from(body);
    ResponseHeader::decode(&mut b, ApiKey::Metadata.response_header_version(version)).unwrap();
    let r = MetadataResponse::decode(&mut b, version).unwrap();
    r.topics
        .iter()
        .map(|t| (t.name.as_ref().unwrap().to_string(), t.error_code))
        .filter(|(name, _)| !name.starts_with("__"))
        .collect()
}

fn metadata_error(addr: SocketAddr, topic: &str) -> i16 {
    let topics = metadata(addr, Some(topic));
    assert_eq!(topics.len(), 1, "{topics:?}");
    topics[0].1
}

#[test]
fn a_topic_a_node_applied_but_has_not_published_is_leader_not_available_there() {
    let c = TestCluster::new(3, 1024);
    c.wait_settled();
    let gate = Gate::on(|image| image.topic("fresh").is_some());
    c.node(0).add_listener(gate.clone());
    // Created through node 2, which answers once it published it; node 1 is held
    // between applying the creation and publishing it.
    c.node(1)
        .create_topic(
            &NewTopic {
                name: "fresh".into(),
                partitions: 2,
                replication_factor: 3,
                ..Default::default()
            },
            false,
            WAIT,
        )
        .unwrap();
    // Only "fresh" is checked among the topics being published: the controller makes
    // `__consumer_offsets` on its own once the cluster is up, and under load a node may
    // still be opening its logs at any point of this test.
    let publishing_fresh = || {
        c.node(0)
            .topics_being_published()
            .iter()
            .any(|t| t == "fresh")
    };
    wait_until("node 1 applied the creation", publishing_fresh);
    assert!(c.node(0).image().topic("fresh").is_none());
    let addr = c.nodes[0].as_ref().unwrap().local_addr();
    assert_eq!(metadata_error(addr, "fresh"), 5, "LEADER_NOT_AVAILABLE");
    assert_eq!(
        metadata_error(addr, "other"),
        3,
        "UNKNOWN_TOPIC_OR_PARTITION"
    );
    gate.release();
    wait_until("node 1 published the topic", || {
        c.node(0).image().topic("fresh").is_some()
    });
    assert!(!publishing_fresh());
    assert_eq!(metadata_error(addr, "fresh"), 0);
    assert_eq!(metadata(addr, None), [("fresh".to_string(), 0)]);
    c.shutdown();
}
