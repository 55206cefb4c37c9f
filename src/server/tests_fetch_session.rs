//! Fetch sessions (KIP-227) over a real socket, with requests encoded and responses
//! decoded by `kafka-protocol`: a full fetch opens a session, incremental fetches send
//! and receive only what changed, and the session errors come back as Kafka's codes.

use bytes::Bytes;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

use super::tests_api::{Client, batch, create, produce_req, start};

// Kafka's error codes, as numbers: the test checks the wire.
const FETCH_SESSION_ID_NOT_FOUND: i16 = 70;
const INVALID_FETCH_SESSION_EPOCH: i16 = 71;

const PARTITIONS: i32 = 50;

fn topic_name() -> TopicName {
    TopicName(StrBytes::from_static_str("many"))
}

/// A Fetch of `session_id` at `session_epoch` listing `partitions` (index, offset).
fn fetch(session_id: i32, session_epoch: i32, partitions: &[(i32, i64)]) -> FetchRequest {
    let topics = if partitions.is_empty() {
        Vec::new()
    } else {
        vec![
            fetch_request::FetchTopic::default()
                .with_topic(topic_name())
                .with_partitions(
                    partitions
                        .iter()
                        .map(|&(p, offset)| {
                            fetch_request::FetchPartition::default()
                                .with_partition(p)
                                .with_fetch_offset(offset)
                                .with_partition_max_bytes(1 << 20)
                        })
                        .collect(),
                ),
        ]
    };
    FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(0)
        .with_min_bytes(0)
        .with_max_bytes(1 << 24)
        .with_session_id(session_id)
        .with_session_epoch(session_epoch)
        .with_topics(topics)
}

/// The partitions a response answers, with whether each carries records.
fn answered(resp: &FetchResponse) -> Vec<(i32, bool)> {
    resp.responses
        .iter()
        .flat_map(|t| t.partitions.iter())
        .map(|p| {
            let records = p.records.as_ref().is_some_and(|r: &Bytes| !r.is_empty());
            (p.partition_index, records)
        })
        .collect()
}

fn produce_one(c: &mut Client, partition: i32) {
    let resp: ProduceResponse = c.call(
        ApiKey::Produce,
        8,
        &produce_req(1, vec![("many", partition, batch(&["x"]))]),
    );
    assert_eq!(resp.responses[0].partition_responses[0].error_code, 0);
}

#[test]
fn an_incremental_fetch_sends_and_receives_only_what_changed() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path());
    let mut c = Client::connect(server.local_addr());
    create(&mut c, "many", PARTITIONS);
    let all: Vec<(i32, i64)> = (0..PARTITIONS).map(|p| (p, 0)).collect();

    // v7+: a full fetch at epoch 0 opens a session and answers every partition.
    for version in 7..=11 {
        let resp: FetchResponse = c.call(ApiKey::Fetch, version, &fetch(0, 0, &all));
        assert_eq!(resp.error_code, 0);
        assert!(resp.session_id > 0, "v{version}: a session was opened");
        assert_eq!(answered(&resp).len(), PARTITIONS as usize, "v{version}");
        let session = resp.session_id;

        // Nothing changed: an incremental fetch listing nothing gets nothing.
        let resp: FetchResponse = c.call(ApiKey::Fetch, version, &fetch(session, 1, &[]));
        assert_eq!(
            (resp.error_code, resp.session_id),
            (0, session),
            "v{version}"
        );
        assert!(
            answered(&resp).is_empty(),
            "v{version}: {:?}",
            answered(&resp)
        );

        // Close it (epoch -1): the answer is sessionless and whole.
        let resp: FetchResponse = c.call(ApiKey::Fetch, version, &fetch(session, -1, &all));
        assert_eq!((resp.error_code, resp.session_id), (0, 0));
        assert_eq!(answered(&resp).len(), PARTITIONS as usize);
    }

    let resp: FetchResponse = c.call(ApiKey::Fetch, 11, &fetch(0, 0, &all));
    let session = resp.session_id;
    // A record lands in partition 7: the next incremental fetch answers partition 7
    // alone, with the record (the session still reads every partition from offset 0).
    produce_one(&mut c, 7);
    let resp: FetchResponse = c.call(ApiKey::Fetch, 11, &fetch(session, 1, &[]));
    assert_eq!(answered(&resp), vec![(7, true)]);
    // The client moves its offset past the record, listing partition 7 only: nothing
    // is new any more.
    let resp: FetchResponse = c.call(ApiKey::Fetch, 11, &fetch(session, 2, &[(7, 1)]));
    assert!(answered(&resp).is_empty(), "{:?}", answered(&resp));
    // A partition forgotten is not read any more, even with news.
    let forget = fetch(session, 3, &[]).with_forgotten_topics_data(vec![
        fetch_request::ForgottenTopic::default()
            .with_topic(topic_name())
            .with_partitions(vec![3]),
    ]);
    let resp: FetchResponse = c.call(ApiKey::Fetch, 11, &forget);
    assert!(answered(&resp).is_empty());
    produce_one(&mut c, 3);
    produce_one(&mut c, 4);
    let resp: FetchResponse = c.call(ApiKey::Fetch, 11, &fetch(session, 4, &[]));
    assert_eq!(answered(&resp), vec![(4, true)]);

    // The same epoch again: INVALID_FETCH_SESSION_EPOCH, no partitions, and the session
    // is left as it was (epoch 5 still goes through).
    let resp: FetchResponse = c.call(ApiKey::Fetch, 11, &fetch(session, 4, &[]));
    assert_eq!(resp.error_code, INVALID_FETCH_SESSION_EPOCH);
    assert!(resp.responses.is_empty());
    let resp: FetchResponse = c.call(ApiKey::Fetch, 11, &fetch(session, 5, &[]));
    assert_eq!(resp.error_code, 0);
    // An id the server never gave out: FETCH_SESSION_ID_NOT_FOUND.
    let unknown = if session == i32::MAX { 1 } else { session + 1 };
    let resp: FetchResponse = c.call(ApiKey::Fetch, 11, &fetch(unknown, 1, &[]));
    assert_eq!(
        (resp.error_code, resp.session_id),
        (FETCH_SESSION_ID_NOT_FOUND, 0)
    );
    assert!(resp.responses.is_empty());
    // Versions below 7 have no session fields: always whole answers.
    let resp: FetchResponse = c.call(ApiKey::Fetch, 6, &fetch(0, 0, &all));
    assert_eq!(answered(&resp).len(), PARTITIONS as usize);
}

#[test]
fn a_server_without_session_slots_answers_every_fetch_whole() {
    let dir = tempfile::tempdir().unwrap();
    let server = super::Server::builder(crate::broker::Broker::open(dir.path()).unwrap())
        .listen(std::net::SocketAddr::from(([127, 0, 0, 1], 0)))
        .fetch_session_cache_slots(0)
        .start()
        .unwrap();
    let mut c = Client::connect(server.local_addr());
    create(&mut c, "many", PARTITIONS);
    let all: Vec<(i32, i64)> = (0..PARTITIONS).map(|p| (p, 0)).collect();
    let resp: FetchResponse = c.call(ApiKey::Fetch, 11, &fetch(0, 0, &all));
    assert_eq!((resp.error_code, resp.session_id), (0, 0));
    assert_eq!(answered(&resp).len(), PARTITIONS as usize);
}

/// From v13 topics go by id, in the request, in the session and in the answer: an
/// incremental fetch answers the partition with news, keyed by the topic's id.
#[test]
fn a_session_of_topic_ids_answers_what_changed() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path());
    let mut c = Client::connect(server.local_addr());
    create(&mut c, "many", PARTITIONS);
    let id = uuid::Uuid::from_bytes(super::tests_api::topic_ids(&mut c, &["many"])[0].1);
    let all: Vec<(i32, i64)> = (0..PARTITIONS).map(|p| (p, 0)).collect();
    let by_id = |mut req: FetchRequest| {
        for t in &mut req.topics {
            t.topic = TopicName::default();
            t.topic_id = id;
        }
        req
    };
    for version in 13..=15 {
        let resp: FetchResponse = c.call(ApiKey::Fetch, version, &by_id(fetch(0, 0, &all)));
        assert_eq!(resp.error_code, 0, "v{version}");
        assert!(resp.session_id > 0, "v{version}: a session was opened");
        assert_eq!(answered(&resp).len(), PARTITIONS as usize, "v{version}");
        assert_eq!(resp.responses[0].topic_id, id, "v{version}");
        let session = resp.session_id;
        let resp: FetchResponse = c.call(ApiKey::Fetch, version, &by_id(fetch(session, 1, &[])));
        assert!(
            answered(&resp).is_empty(),
            "v{version}: {:?}",
            answered(&resp)
        );
        // Close it (epoch -1).
        let resp: FetchResponse = c.call(ApiKey::Fetch, version, &by_id(fetch(session, -1, &all)));
        assert_eq!((resp.error_code, resp.session_id), (0, 0), "v{version}");
    }
    let version = 15;
    let resp: FetchResponse = c.call(ApiKey::Fetch, version, &by_id(fetch(0, 0, &all)));
    let session = resp.session_id;
    produce_one(&mut c, 3);
    let resp: FetchResponse = c.call(ApiKey::Fetch, version, &by_id(fetch(session, 1, &[])));
    assert_eq!(answered(&resp), vec![(3, true)], "v{version}");
    assert_eq!(resp.responses[0].topic_id, id, "v{version}");
    // Forgotten by id: not read any more.
    let forget = by_id(fetch(session, 2, &[])).with_forgotten_topics_data(vec![
        fetch_request::ForgottenTopic::default()
            .with_topic_id(id)
            .with_partitions(vec![3]),
    ]);
    produce_one(&mut c, 3);
    let resp: FetchResponse = c.call(ApiKey::Fetch, version, &forget);
    assert!(
        answered(&resp).is_empty(),
        "v{version}: {:?}",
        answered(&resp)
    );
}
