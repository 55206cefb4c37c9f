//! The share-partition state machine: unit tests, and a property test against a simple
//! model of what a share group promises.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use proptest::prelude::*;

use super::share_partition::{AcknowledgeType, ShareLimits, SharePartition};
use crate::error::{RecordState, ShareError};

const LOCK: Duration = Duration::from_millis(100);

fn limits(delivery: i16, locks: usize) -> ShareLimits {
    ShareLimits {
        lock_duration: LOCK,
        delivery_count_limit: delivery,
        max_record_locks: locks,
    }
}

fn offsets(p: &[super::share_partition::AcquiredRecord]) -> Vec<i64> {
    p.iter().map(|r| r.offset).collect()
}

#[test]
fn kafkas_defaults() {
    let l = ShareLimits::default();
    assert_eq!(l.lock_duration, Duration::from_millis(30_000));
    assert_eq!(l.delivery_count_limit, 5);
    assert_eq!(l.max_record_locks, 2000);
}

#[test]
fn two_members_never_share_a_record() {
    let now = Instant::now();
    let mut p = SharePartition::new(0, limits(5, 100));
    let all: Vec<i64> = (0..10).collect();
    let a = p.acquire("a", &all, 10, 4, now);
    assert_eq!(offsets(&a), vec![0, 1, 2, 3]);
    assert_eq!(p.fetch_offset(), 4);
    // b read the same slice: only what a did not take.
    let b = p.acquire("b", &all, 10, 100, now);
    assert_eq!(offsets(&b), (4..10).collect::<Vec<_>>());
    assert!(p.acquire("c", &all, 10, 100, now).is_empty());
    assert_eq!(p.holder_of(2), Some("a"));
    assert_eq!(p.acquired(), 10);
}

#[test]
fn accepted_records_move_the_start_offset() {
    let now = Instant::now();
    let mut p = SharePartition::new(5, limits(5, 100));
    p.acquire("a", &[5, 6, 7], 8, 10, now);
    p.acknowledge("a", 6, AcknowledgeType::Accept, now).unwrap();
    assert_eq!(p.start_offset(), 5, "5 is still acquired");
    p.acknowledge("a", 5, AcknowledgeType::Reject, now).unwrap();
    assert_eq!(
        p.start_offset(),
        7,
        "5 archived and 6 acknowledged are complete"
    );
    p.acknowledge("a", 7, AcknowledgeType::Accept, now).unwrap();
    assert_eq!((p.start_offset(), p.end_offset(), p.in_flight()), (8, 8, 0));
    let err = p
        .acknowledge("a", 7, AcknowledgeType::Accept, now)
        .unwrap_err();
    assert!(matches!(
        err,
        ShareError::InvalidRecordState {
            offset: 7,
            state: None,
            ..
        }
    ));
}

#[test]
fn only_the_holder_acknowledges() {
    let now = Instant::now();
    let mut p = SharePartition::new(0, limits(5, 100));
    p.acquire("a", &[0], 1, 10, now);
    let err = p
        .acknowledge("b", 0, AcknowledgeType::Accept, now)
        .unwrap_err();
    assert!(matches!(
        err,
        ShareError::InvalidRecordState {
            offset: 0,
            state: Some(RecordState::Acquired),
            ..
        }
    ));
    let err = p
        .acknowledge("a", 3, AcknowledgeType::Accept, now)
        .unwrap_err();
    assert!(matches!(
        err,
        ShareError::InvalidRecordState {
            offset: 3,
            state: None,
            ..
        }
    ));
}

#[test]
fn expired_and_released_records_are_delivered_again_until_the_limit() {
    let t0 = Instant::now();
    let mut p = SharePartition::new(0, limits(3, 100));
    let first = p.acquire("a", &[0], 1, 10, t0);
    assert_eq!(first[0].delivery_count, 1);
    // a's lock expires: b gets it, delivery 2; a's late acknowledgement is refused.
    let t1 = t0 + LOCK;
    let again = p.acquire("b", &[0], 1, 10, t1);
    assert_eq!(again[0].delivery_count, 2);
    assert!(p.acknowledge("a", 0, AcknowledgeType::Accept, t1).is_err());
    assert_eq!(
        p.acknowledge("b", 0, AcknowledgeType::Release, t1),
        Ok(RecordState::Available)
    );
    let third = p.acquire("a", &[0], 1, 10, t1);
    assert_eq!(third[0].delivery_count, 3);
    // The third delivery was the last: releasing archives it.
    assert_eq!(
        p.acknowledge("a", 0, AcknowledgeType::Release, t1),
        Ok(RecordState::Archived)
    );
    assert!(p.acquire("a", &[0], 1, 10, t1).is_empty());
    assert_eq!(p.start_offset(), 1);
}

#[test]
fn a_lock_expiring_at_the_limit_archives() {
    let t0 = Instant::now();
    let mut p = SharePartition::new(0, limits(1, 100));
    p.acquire("a", &[0, 1], 2, 10, t0);
    p.acknowledge("a", 1, AcknowledgeType::Accept, t0).unwrap();
    assert_eq!(p.expire_locks(t0 + LOCK), vec![0]);
    assert_eq!(p.state_of(0), None);
    assert_eq!(p.start_offset(), 2);
}

#[test]
fn max_record_locks_bounds_the_records_in_flight() {
    let now = Instant::now();
    let mut p = SharePartition::new(0, limits(5, 3));
    let all: Vec<i64> = (0..10).collect();
    assert_eq!(offsets(&p.acquire("a", &all, 10, 100, now)), vec![0, 1, 2]);
    assert!(p.acquire("b", &all, 10, 100, now).is_empty());
    assert_eq!(p.end_offset(), 3);
    // An acknowledged record in the middle still counts; the first one does not.
    p.acknowledge("a", 1, AcknowledgeType::Accept, now).unwrap();
    assert!(p.acquire("b", &all, 10, 100, now).is_empty());
    p.acknowledge("a", 0, AcknowledgeType::Accept, now).unwrap();
    assert_eq!(offsets(&p.acquire("b", &all, 10, 100, now)), vec![3, 4]);
}

#[test]
fn offsets_without_records_are_passed_over() {
    let now = Instant::now();
    let mut p = SharePartition::new(0, limits(5, 100));
    // Offsets 2 and 3 are a transaction marker and a compacted record.
    let got = p.acquire("a", &[0, 1, 4], 6, 10, now);
    assert_eq!(offsets(&got), vec![0, 1, 4]);
    assert_eq!(p.end_offset(), 6);
    for o in [0, 1, 4] {
        p.acknowledge("a", o, AcknowledgeType::Accept, now).unwrap();
    }
    assert_eq!((p.start_offset(), p.in_flight()), (6, 0));
}

#[test]
fn a_leaving_member_releases_what_it_holds() {
    let now = Instant::now();
    let mut p = SharePartition::new(0, limits(5, 100));
    p.acquire("a", &[0, 1], 2, 10, now);
    p.acquire("b", &[2], 3, 10, now);
    assert_eq!(p.release_member("a"), vec![0, 1]);
    assert_eq!(p.fetch_offset(), 0);
    assert_eq!(p.holder_of(2), Some("b"));
}

#[test]
fn snapshot_and_changes_restore_the_same_state() {
    let now = Instant::now();
    let mut p = SharePartition::new(0, limits(5, 100));
    p.acquire("a", &[0, 1, 2, 3, 4], 5, 10, now);
    p.acknowledge("a", 1, AcknowledgeType::Accept, now).unwrap();
    p.acknowledge("a", 3, AcknowledgeType::Reject, now).unwrap();
    let mut replica = SharePartition::new(0, p.limits());
    let (start, batches) = p.take_changes().expect("changes");
    replica.apply(start, &batches);
    assert!(p.take_changes().is_none());
    p.acknowledge("a", 0, AcknowledgeType::Accept, now).unwrap();
    let (start, batches) = p.take_changes().expect("changes");
    replica.apply(start, &batches);
    let whole = SharePartition::restore(p.start_offset(), &p.snapshot(), p.limits());
    for q in [&replica, &whole] {
        assert_eq!(q.start_offset(), 2);
        assert_eq!(q.end_offset(), 5);
        // Acquired records come back available, with their delivery count.
        assert_eq!(q.state_of(2), Some((RecordState::Available, 1)));
        assert_eq!(q.state_of(3), Some((RecordState::Archived, 1)));
        assert_eq!(q.fetch_offset(), 2);
    }
}

#[test]
fn acknowledge_type_ids_are_kafkas() {
    for t in [
        AcknowledgeType::Accept,
        AcknowledgeType::Release,
        AcknowledgeType::Reject,
    ] {
        assert_eq!(AcknowledgeType::from_id(t.id()), Some(t));
    }
    assert_eq!(AcknowledgeType::from_id(0), None);
    assert_eq!(RecordState::from_id(4), Some(RecordState::Archived));
    assert_eq!(RecordState::from_id(3), None);
}

// The model: every record of a log of `LOG` offsets (every seventh has no record),
// with who holds it and until when, how often it was delivered, and whether it is done.
const LOG: i64 = 40;
const MEMBERS: [&str; 3] = ["m0", "m1", "m2"];

#[derive(Debug, Clone, PartialEq)]
enum Model {
    Never,
    Held { member: usize, until: Instant },
    Available,
    Done,
}

#[derive(Debug, Clone)]
enum Op {
    Acquire {
        member: usize,
        max: usize,
    },
    Ack {
        member: usize,
        pick: usize,
        kind: AcknowledgeType,
    },
    Wait {
        ms: u64,
    },
    Leave {
        member: usize,
    },
    Restart,
}

fn op() -> impl Strategy<Value = Op> {
    let kind = prop_oneof![
        Just(AcknowledgeType::Accept),
        Just(AcknowledgeType::Release),
        Just(AcknowledgeType::Reject)
    ];
    prop_oneof![
        4 => (0..3usize, 1..8usize).prop_map(|(member, max)| Op::Acquire { member, max }),
        5 => (0..3usize, 0..LOG as usize, kind)
            .prop_map(|(member, pick, kind)| Op::Ack { member, pick, kind }),
        2 => (0..150u64).prop_map(|ms| Op::Wait { ms }),
        1 => (0..3usize).prop_map(|member| Op::Leave { member }),
        1 => Just(Op::Restart),
    ]
}

fn log_offsets() -> Vec<i64> {
    (0..LOG).filter(|o| o % 7 != 6).collect()
}

/// Applies `op` to the share-partition and the model, checking the promises.
#[allow(clippy::too_many_lines)]
fn step(
    p: &mut SharePartition,
    model: &mut BTreeMap<i64, (Model, i16)>,
    now: &mut Instant,
    op: &Op,
    limit: i16,
) -> Result<(), TestCaseError> {
    // Locks that expired become available, or done at the delivery limit (the shell
    // ends expired locks before every call).
    p.expire_locks(*now);
    for (m, count) in model.values_mut() {
        if let Model::Held { until, .. } = m
            && *until <= *now
        {
            *m = if *count >= limit {
                Model::Done
            } else {
                Model::Available
            };
        }
    }
    match op {
        Op::Acquire { member, max } => {
            let from = p.fetch_offset();
            let read: Vec<i64> = log_offsets().into_iter().filter(|o| *o >= from).collect();
            let got = p.acquire(MEMBERS[*member], &read, LOG, *max, *now);
            prop_assert!(got.len() <= *max);
            for r in &got {
                let (m, count) = model.get_mut(&r.offset).expect("a record of the log");
                // Delivered to at most one holder at a time; done never again.
                prop_assert!(
                    matches!(m, Model::Never | Model::Available),
                    "offset {} acquired while {:?}",
                    r.offset,
                    m
                );
                *count += 1;
                prop_assert_eq!(r.delivery_count, *count);
                prop_assert!(*count <= limit);
                *m = Model::Held {
                    member: *member,
                    until: *now + LOCK,
                };
            }
            // Nothing available below what was handed out was skipped.
            if let Some(last) = got.last()
                && got.len() < *max
            {
                for (o, (m, _)) in model.range(..last.offset) {
                    prop_assert!(*m != Model::Available, "available {} skipped", o);
                }
            }
        }
        Op::Ack { member, pick, kind } => {
            let offset = *pick as i64;
            let result = p.acknowledge(MEMBERS[*member], offset, *kind, *now);
            let Some((m, count)) = model.get_mut(&offset) else {
                prop_assert!(result.is_err());
                return Ok(());
            };
            let holds = matches!(m, Model::Held { member: h, .. } if h == member);
            prop_assert_eq!(
                result.is_ok(),
                holds,
                "{:?} of {} while {:?}",
                kind,
                offset,
                m
            );
            if holds {
                *m = match kind {
                    AcknowledgeType::Release if *count < limit => Model::Available,
                    _ => Model::Done,
                };
            }
        }
        Op::Wait { ms } => *now += Duration::from_millis(*ms),
        Op::Leave { member } => {
            p.release_member(MEMBERS[*member]);
            for (m, count) in model.values_mut() {
                if matches!(m, Model::Held { member: h, .. } if h == member) {
                    *m = if *count >= limit {
                        Model::Done
                    } else {
                        Model::Available
                    };
                }
            }
        }
        Op::Restart => {
            // The coordinator restarts from its persisted state: locks are gone.
            *p = SharePartition::restore(p.start_offset(), &p.snapshot(), p.limits());
            for (m, count) in model.values_mut() {
                if matches!(m, Model::Held { .. }) {
                    *m = if *count >= limit {
                        Model::Done
                    } else {
                        Model::Available
                    };
                }
            }
        }
    }
    // The share-partition agrees with the model on every record.
    for (o, (m, count)) in model.iter() {
        let state = p.state_of(*o);
        match m {
            Model::Never => prop_assert!(state.is_none() && *o >= p.end_offset()),
            Model::Held { member, .. } => {
                prop_assert_eq!(state, Some((RecordState::Acquired, *count)));
                prop_assert_eq!(p.holder_of(*o), Some(MEMBERS[*member]));
            }
            Model::Available => prop_assert_eq!(state, Some((RecordState::Available, *count))),
            Model::Done => prop_assert!(
                state.is_none_or(|(s, _)| s.is_final()),
                "done {} is {:?}",
                o,
                state
            ),
        }
        prop_assert!(*o >= p.start_offset() || matches!(m, Model::Done));
    }
    prop_assert!(p.in_flight() <= p.limits().max_record_locks);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn share_partition_keeps_its_promises(
        ops in proptest::collection::vec(op(), 1..80),
        limit in 1..4i16,
        locks in 3..30usize,
    ) {
        let mut now = Instant::now();
        let mut p = SharePartition::new(0, limits(limit, locks));
        let mut model: BTreeMap<i64, (Model, i16)> =
            log_offsets().into_iter().map(|o| (o, (Model::Never, 0))).collect();
        for op in &ops {
            step(&mut p, &mut model, &mut now, op, limit)?;
        }
        // In the end, with every lock expired, everything not done is delivered
        // again: acquiring until nothing comes hands out exactly the records not done.
        now += LOCK;
        step(&mut p, &mut model, &mut now, &Op::Wait { ms: 0 }, limit)?;
        for _ in 0..(LOG as usize) {
            let before = model.values().filter(|(m, _)| *m == Model::Done).count();
            step(&mut p, &mut model, &mut now, &Op::Acquire { member: 0, max: 1000 }, limit)?;
            for (o, (m, _)) in model.iter_mut() {
                if matches!(m, Model::Held { .. }) {
                    p.acknowledge("m0", *o, AcknowledgeType::Accept, now).unwrap();
                    *m = Model::Done;
                }
            }
            if model.values().filter(|(m, _)| *m == Model::Done).count() == before {
                break;
            }
        }
        prop_assert!(model.values().all(|(m, _)| *m == Model::Done));
        prop_assert_eq!(p.start_offset(), LOG);
    }
}
