//! The in-process ShareConsumer (share groups, KIP-932): many consumers on one
//! partition, acknowledgements, redelivery, the delivery limit, and restarts.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

use tidelog::coordinator::{RecordState, ShareConfig, ShareError};
use tidelog::{
    AcknowledgeType, Broker, Consumer, ConsumerConfig, Error, OffsetReset, Producer,
    ProducerRecord, ShareConsumer, ShareConsumerConfig, ShareRecord, TopicConfig,
};

const LOCK: Duration = Duration::from_millis(400);

fn open(dir: &Path, delivery_limit: i16) -> Broker {
    Broker::builder(dir)
        .share(ShareConfig {
            record_lock_duration: LOCK,
            delivery_count_limit: delivery_limit,
            state_topic_partitions: 2,
            ..ShareConfig::default()
        })
        .open()
        .unwrap()
}

fn produce(broker: &Broker, n: usize) {
    let producer = Producer::new(broker).unwrap();
    for i in 0..n {
        producer
            .send("q", ProducerRecord::new(format!("job-{i}").as_bytes()))
            .unwrap();
    }
}

fn consumer(broker: &Broker) -> ShareConsumer {
    let config = ShareConsumerConfig::new("g", &["q"]).auto_offset_reset(OffsetReset::Earliest);
    ShareConsumer::new(broker, config).unwrap()
}

fn offsets(records: &[ShareRecord]) -> Vec<i64> {
    records.iter().map(|r| r.offset).collect()
}

/// Polls until `n` records came or `limit` passed.
fn poll_n(c: &mut ShareConsumer, n: usize, limit: Duration) -> Vec<ShareRecord> {
    let deadline = Instant::now() + limit;
    let mut out = Vec::new();
    while out.len() < n && Instant::now() < deadline {
        out.extend(c.poll(Duration::from_millis(100)).unwrap());
    }
    out
}

fn setup(delivery_limit: i16, records: usize) -> (tempfile::TempDir, Broker) {
    let dir = tempfile::tempdir().unwrap();
    let broker = open(dir.path(), delivery_limit);
    broker.create_topic("q", 1, TopicConfig::new()).unwrap();
    produce(&broker, records);
    (dir, broker)
}

#[test]
fn three_consumers_on_one_partition_get_disjoint_records() {
    const N: usize = 600;
    let (_dir, broker) = setup(5, 0);
    let threads: Vec<_> = (0..3)
        .map(|_| {
            let broker = broker.clone();
            std::thread::spawn(move || {
                let config = ShareConsumerConfig::new("g", &["q"])
                    .auto_offset_reset(OffsetReset::Earliest)
                    .max_poll_records(7);
                let mut c = ShareConsumer::new(&broker, config).unwrap();
                let mut mine = Vec::new();
                let mut idle = 0;
                while idle < 10 {
                    let records = c.poll(Duration::from_millis(100)).unwrap();
                    if records.is_empty() {
                        idle += 1;
                        continue;
                    }
                    idle = 0;
                    for r in &records {
                        assert_eq!(r.delivery_count, 1, "offset {}", r.offset);
                        c.acknowledge(r, AcknowledgeType::Accept).unwrap();
                        mine.push(r.offset);
                    }
                }
                c.commit_sync().unwrap();
                mine
            })
        })
        .collect();
    produce(&broker, N);
    let got: Vec<Vec<i64>> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    let mut all = BTreeSet::new();
    for mine in &got {
        for o in mine {
            assert!(all.insert(*o), "offset {o} delivered to two consumers");
        }
    }
    assert_eq!(
        all,
        (0..N as i64).collect::<BTreeSet<_>>(),
        "every record once"
    );
    let share = broker.share_coordinator().unwrap();
    assert_eq!(share.start_offset("g", "q", 0), Some(N as i64));
}

#[test]
fn a_stuck_consumers_records_go_to_another_after_the_lock_expires() {
    let (_dir, broker) = setup(5, 10);
    let mut stuck = consumer(&broker);
    let held = poll_n(&mut stuck, 10, Duration::from_secs(5));
    assert_eq!(offsets(&held), (0..10).collect::<Vec<_>>());
    let mut other = consumer(&broker);
    let started = Instant::now();
    let again = poll_n(&mut other, 10, Duration::from_secs(10));
    assert!(started.elapsed() >= LOCK / 2, "delivered while locked");
    assert_eq!(offsets(&again), (0..10).collect::<Vec<_>>());
    assert!(again.iter().all(|r| r.delivery_count == 2));
    // The stuck consumer's late acknowledgement is refused: the record is not its own.
    stuck
        .acknowledge(&held[0], AcknowledgeType::Accept)
        .unwrap();
    match stuck.commit_sync() {
        Err(Error::Share {
            source: ShareError::InvalidRecordState { offset: 0, .. },
            ..
        }) => {}
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_dropped_consumers_records_are_delivered_again_at_once() {
    let (_dir, broker) = setup(5, 5);
    let mut first = consumer(&broker);
    let held = poll_n(&mut first, 5, Duration::from_secs(5));
    assert_eq!(held.len(), 5);
    // Explicit mode (implicit mode would accept them all on close).
    first
        .acknowledge(&held[0], AcknowledgeType::Release)
        .unwrap();
    let mut second = consumer(&broker);
    assert!(
        second.poll(Duration::ZERO).unwrap().is_empty(),
        "delivered while held"
    );
    drop(first);
    let again = poll_n(&mut second, 5, Duration::from_millis(300));
    assert_eq!(
        offsets(&again),
        (0..5).collect::<Vec<_>>(),
        "released on drop, not at expiry"
    );
    assert!(again.iter().all(|r| r.delivery_count == 2));
}

#[test]
fn released_records_are_delivered_again() {
    let (_dir, broker) = setup(5, 4);
    let mut a = consumer(&broker);
    let records = poll_n(&mut a, 4, Duration::from_secs(5));
    for r in &records {
        let kind = if r.offset % 2 == 0 {
            AcknowledgeType::Release
        } else {
            AcknowledgeType::Accept
        };
        a.acknowledge(r, kind).unwrap();
    }
    a.commit_sync().unwrap();
    let mut b = consumer(&broker);
    let again = poll_n(&mut b, 2, Duration::from_secs(5));
    assert_eq!(offsets(&again), vec![0, 2]);
    assert!(again.iter().all(|r| r.delivery_count == 2));
    assert_eq!(again[0].value.as_deref(), Some(&b"job-0"[..]));
}

#[test]
fn rejected_and_over_limit_records_are_never_delivered_again() {
    let (_dir, broker) = setup(2, 2);
    let mut c = consumer(&broker);
    // Offset 0 rejected; offset 1 released twice, the limit.
    for round in 1..=2 {
        let records = poll_n(
            &mut c,
            if round == 1 { 2 } else { 1 },
            Duration::from_secs(5),
        );
        for r in &records {
            let kind = if r.offset == 0 {
                AcknowledgeType::Reject
            } else {
                assert_eq!(r.delivery_count, round);
                AcknowledgeType::Release
            };
            c.acknowledge(r, kind).unwrap();
        }
        c.commit_sync().unwrap();
    }
    assert!(c.poll(Duration::from_millis(300)).unwrap().is_empty());
    let mut fresh = consumer(&broker);
    assert!(fresh.poll(Duration::from_millis(300)).unwrap().is_empty());
    let share = broker.share_coordinator().unwrap();
    assert_eq!(share.start_offset("g", "q", 0), Some(2), "both archived");
    assert_eq!(share.record_state("g", "q", 0, 1), None);
}

#[test]
fn a_poison_record_whose_lock_keeps_expiring_is_archived_at_the_limit() {
    let (_dir, broker) = setup(2, 1);
    for _ in 0..2 {
        let mut c = consumer(&broker);
        assert_eq!(poll_n(&mut c, 1, Duration::from_secs(5)).len(), 1);
        // The consumer "crashes" processing it: no acknowledgement, no leave.
        std::mem::forget(c);
        std::thread::sleep(LOCK + Duration::from_millis(50));
    }
    let mut c = consumer(&broker);
    assert!(c.poll(Duration::from_millis(300)).unwrap().is_empty());
    let share = broker.share_coordinator().unwrap();
    assert_eq!(share.start_offset("g", "q", 0), Some(1));
}

#[test]
fn implicit_acknowledgement_accepts_at_the_next_poll() {
    let (_dir, broker) = setup(5, 3);
    let mut c = consumer(&broker);
    assert_eq!(poll_n(&mut c, 3, Duration::from_secs(5)).len(), 3);
    assert!(c.poll(Duration::from_millis(50)).unwrap().is_empty());
    let share = broker.share_coordinator().unwrap();
    assert_eq!(share.start_offset("g", "q", 0), Some(3));
}

#[test]
fn explicit_acknowledgement_refuses_a_poll_with_records_unacknowledged() {
    let (_dir, broker) = setup(5, 2);
    let mut c = consumer(&broker);
    let records = poll_n(&mut c, 2, Duration::from_secs(5));
    c.acknowledge(&records[0], AcknowledgeType::Accept).unwrap();
    let err = c.poll(Duration::ZERO).unwrap_err();
    assert!(
        err.to_string().contains("offset 1 was not acknowledged"),
        "{err}"
    );
    c.acknowledge(&records[1], AcknowledgeType::Accept).unwrap();
    assert!(c.poll(Duration::ZERO).unwrap().is_empty());
}

#[test]
fn accepted_records_stay_accepted_after_the_broker_reopens() {
    let dir = tempfile::tempdir().unwrap();
    {
        let broker = open(dir.path(), 5);
        broker.create_topic("q", 1, TopicConfig::new()).unwrap();
        produce(&broker, 10);
        let mut c = consumer(&broker);
        let records = poll_n(&mut c, 10, Duration::from_secs(5));
        for r in &records {
            if r.offset % 3 != 0 {
                c.acknowledge(r, AcknowledgeType::Accept).unwrap();
            } else if r.offset == 9 {
                c.acknowledge(r, AcknowledgeType::Reject).unwrap();
            }
        }
        c.commit_sync().unwrap();
        // Offsets 0, 3 and 6 are still held when the broker goes away.
        std::mem::forget(c);
        broker.close().unwrap();
    }
    let broker = open(dir.path(), 5);
    let mut c = consumer(&broker);
    let again = poll_n(&mut c, 3, Duration::from_secs(5));
    assert_eq!(offsets(&again), vec![0, 3, 6]);
    assert!(again.iter().all(|r| r.delivery_count == 2));
    let share = broker.share_coordinator().unwrap();
    assert_eq!(
        share.start_offset("g", "q", 0),
        Some(0),
        "offset 0 was held"
    );
    assert_eq!(
        share.record_state("g", "q", 0, 1),
        Some((RecordState::Acknowledged, 1))
    );
    assert_eq!(
        share.record_state("g", "q", 0, 4),
        Some((RecordState::Acknowledged, 1))
    );
    assert_eq!(
        share.record_state("g", "q", 0, 9),
        Some((RecordState::Archived, 1))
    );
    // Accepted (implicitly) with the next poll, which finds nothing more.
    assert!(c.poll(Duration::from_millis(200)).unwrap().is_empty());
    assert_eq!(share.start_offset("g", "q", 0), Some(10));
}

#[test]
fn the_coordinator_lists_share_groups_and_their_members() {
    let (_dir, broker) = setup(5, 0);
    let a = consumer(&broker);
    let b = ShareConsumer::new(
        &broker,
        ShareConsumerConfig::new("g", &["q"]).client_id("worker-b"),
    )
    .unwrap();
    let share = broker.share_coordinator().unwrap();
    assert_eq!(share.list_groups(), vec!["g".to_string()]);
    let members = share.describe("g");
    let ids: BTreeSet<&str> = members.iter().map(|m| m.member_id.as_str()).collect();
    assert_eq!(ids, BTreeSet::from([a.member_id(), b.member_id()]));
    assert!(
        members
            .iter()
            .any(|m| m.client_id == "worker-b" && m.topics == ["q"])
    );
    drop(a);
    assert_eq!(share.describe("g").len(), 1, "a left when dropped");
}

#[test]
fn a_consumer_groups_id_is_not_a_share_groups() {
    let (_dir, broker) = setup(5, 0);
    let mut classic = Consumer::new(&broker, ConsumerConfig::default().group_id("classic"));
    classic.assign(&[("q", 0)]).unwrap();
    classic.commit_offsets(&[("q", 0, 0)]).unwrap();
    let err = ShareConsumer::new(&broker, ShareConsumerConfig::new("classic", &["q"])).unwrap_err();
    assert!(
        matches!(
            err,
            Error::Share {
                source: ShareError::NotShareGroup,
                ..
            }
        ),
        "{err:?}"
    );
    let err = ShareConsumer::new(&broker, ShareConsumerConfig::new("g", &["missing"])).unwrap_err();
    assert!(matches!(err, Error::UnknownTopic(_)), "{err:?}");
}

#[test]
fn records_deleted_from_the_log_are_passed_over() {
    let (_dir, broker) = setup(5, 10);
    let mut c = consumer(&broker);
    let records = poll_n(&mut c, 10, Duration::from_secs(5));
    for r in &records {
        if r.offset < 3 {
            c.acknowledge(r, AcknowledgeType::Release).unwrap();
        } else {
            c.acknowledge(r, AcknowledgeType::Accept).unwrap();
        }
    }
    c.commit_sync().unwrap();
    // Offsets 0..3 are available again, but DeleteRecords removes 0..2.
    let p = broker.topic("q").unwrap().partition(0).unwrap();
    p.delete_records_before(2).unwrap();
    let again = poll_n(&mut c, 1, Duration::from_secs(5));
    assert_eq!(offsets(&again), vec![2]);
    let share = broker.share_coordinator().unwrap();
    assert_eq!(share.start_offset("g", "q", 0), Some(2));
    assert_eq!(share.record_state("g", "q", 0, 0), None);
}
