//! Racks in process: every node registers its rack (`rack-N` on node N, listed by
//! Metadata), and with the
//! rack-aware replica selector a consumer that names a follower's rack is sent by the
//! leader to that follower (`preferred_read_replica`, no records), then reads exactly
//! the committed records from it (the leader serves none of them), under the leader
//! epoch and offset range rules of a follower's read.

use bytes::Bytes;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{BrokerId, FetchRequest, FetchResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::failover::{addr, pause, send, values};
use super::replication::{broker, create, leader_index, part};
use super::*;
use crate::cluster::client::Client;
use crate::producer::Acks;

const CALL: Duration = Duration::from_secs(10);

/// A consumer's Fetch (`version`) of `topic`-0 from `offset` by a client of `rack`.
fn fetch(
    client: &mut Client,
    version: i16,
    (rack, leader_epoch): (&str, i32),
    offset: i64,
) -> FetchResponse {
    let request = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(0)
        .with_min_bytes(0)
        .with_max_bytes(1 << 20)
        .with_session_epoch(-1)
        .with_rack_id(StrBytes::from_string(rack.to_string()))
        .with_topics(vec![
            FetchTopic::default()
                .with_topic(TopicName(StrBytes::from_static_str("near")))
                .with_partitions(vec![
                    FetchPartition::default()
                        .with_partition(0)
                        .with_fetch_offset(offset)
                        .with_current_leader_epoch(leader_epoch)
                        .with_partition_max_bytes(1 << 20),
                ]),
        ]);
    client.call(&request, version, CALL).unwrap()
}

/// The values of the records of a fetched partition.
fn record_values(records: &Option<Bytes>) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(records) = records {
        for b in crate::record::batches(records) {
            for r in b.unwrap().records() {
                out.push(String::from_utf8(r.unwrap().value.unwrap().to_vec()).unwrap());
            }
        }
    }
    out
}

/// Bytes node `i` handed out by reads of `near`-0.
fn bytes_out(c: &TestCluster, i: usize) -> u64 {
    broker(c, i)
        .metrics()
        .partitions
        .iter()
        .find(|p| p.topic == "near" && p.partition == 0)
        .map_or(0, |p| p.bytes_out)
}

#[test]
fn a_consumer_of_a_followers_rack_reads_the_committed_records_from_that_follower() {
    // A long lag time: the followers stay in the ISR while they are cut off.
    let c = TestCluster::with_racks(3, Duration::from_secs(60));
    c.wait_settled();
    let img = c.wait_same_image();
    for id in 1..=3 {
        assert_eq!(
            img.brokers[&id].rack.as_deref(),
            Some(format!("rack-{id}").as_str())
        );
    }
    // Metadata over the wire lists each broker's rack.
    let admin = crate::admin::AdminClient::connect(&addr(&c, 0).to_string()).unwrap();
    let listed: Vec<(i32, Option<String>)> = admin
        .metadata()
        .unwrap()
        .brokers
        .into_iter()
        .map(|b| (b.id, b.rack))
        .collect();
    assert_eq!(
        listed,
        (1..=3)
            .map(|id| (id, Some(format!("rack-{id}"))))
            .collect::<Vec<_>>()
    );
    create(&c, "near", 1, Vec::new());
    let l = leader_index(&c, "near", 0);
    let leader = part(&c, l, "near", 0);
    wait_until("leadership applied", || leader.leader_epoch().is_some());
    let epoch = leader.leader_epoch().unwrap();
    let committed = values("committed", 5);
    send(&c, l, "near", Acks::All, &committed);
    let f = (0..3).find(|i| *i != l).unwrap();
    let f_id = f as i32 + 1;
    let follower = part(&c, f, "near", 0);
    wait_until("the follower's high watermark", || {
        follower.high_watermark() == 5
    });
    wait_until("the leader to know the follower caught up", || {
        leader
            .in_sync_follower_log_end(f_id)
            .is_some_and(|end| end >= 5)
    });
    // Cut both followers off: the leader's log is read by nobody but consumers now, and
    // records it takes with acks=1 stay uncommitted.
    for i in (0..3).filter(|i| *i != l) {
        pause(&c, i, true);
    }
    send(&c, l, "near", Acks::Leader, &values("pending", 3));
    assert_eq!((leader.log_end_offset(), leader.high_watermark()), (8, 5));

    let rack = format!("rack-{f_id}");
    let mut to_leader = Client::new(addr(&c, l).to_string(), "rack-test");
    let r = fetch(&mut to_leader, 11, (&rack, epoch), 0);
    let p = &r.responses[0].partitions[0];
    assert_eq!(p.error_code, 0);
    assert_eq!(p.preferred_read_replica.0, f_id, "sent to the follower");
    assert_eq!(p.high_watermark, 5);
    assert!(record_values(&p.records).is_empty(), "no records with it");
    // A client of the leader's rack, or of none, is served by the leader.
    for own in [format!("rack-{}", l + 1), String::new()] {
        let r = fetch(&mut to_leader, 11, (&own, epoch), 0);
        let p = &r.responses[0].partitions[0];
        assert_eq!(p.preferred_read_replica.0, -1, "{own:?}");
        assert_eq!(record_values(&p.records), committed, "{own:?}");
    }

    // The follower serves exactly the committed records; the leader reads nothing.
    let (leader_before, follower_before) = (bytes_out(&c, l), bytes_out(&c, f));
    let mut to_follower = Client::new(addr(&c, f).to_string(), "rack-test");
    let r = fetch(&mut to_follower, 11, (&rack, epoch), 0);
    let p = &r.responses[0].partitions[0];
    assert_eq!(p.error_code, 0);
    assert_eq!(p.preferred_read_replica.0, -1);
    assert_eq!(p.high_watermark, 5);
    assert_eq!(record_values(&p.records), committed);
    let served = p.records.as_ref().map_or(0, |r| r.len() as u64);
    assert_eq!(bytes_out(&c, f) - follower_before, served);
    assert_eq!(
        bytes_out(&c, l),
        leader_before,
        "the leader served none of it"
    );
    // Nothing past its high watermark, an offset past its log end is out of range.
    let r = fetch(&mut to_follower, 12, (&rack, epoch), 5);
    let p = &r.responses[0].partitions[0];
    assert_eq!(p.error_code, 0);
    assert!(record_values(&p.records).is_empty());
    let r = fetch(&mut to_follower, 12, (&rack, epoch), 8);
    assert_eq!(
        r.responses[0].partitions[0].error_code,
        ResponseError::OffsetOutOfRange.code()
    );
    // The leader epoch is checked against the follower's metadata.
    let r = fetch(&mut to_follower, 12, (&rack, epoch + 1), 0);
    assert_eq!(
        r.responses[0].partitions[0].error_code,
        ResponseError::UnknownLeaderEpoch.code()
    );
    if epoch > 0 {
        let r = fetch(&mut to_follower, 12, (&rack, epoch - 1), 0);
        assert_eq!(
            r.responses[0].partitions[0].error_code,
            ResponseError::FencedLeaderEpoch.code()
        );
    }
    // Before v11 (no client metadata) only the leader serves.
    let r = fetch(&mut to_follower, 10, ("", epoch), 0);
    assert_eq!(
        r.responses[0].partitions[0].error_code,
        ResponseError::NotLeaderOrFollower.code()
    );
    for i in (0..3).filter(|i| *i != l) {
        pause(&c, i, false);
    }
    c.shutdown();
}
